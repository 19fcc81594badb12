/*
 * cpu/gemv/gemv_ref.c — the portable scalar reference of THE CANONICAL REDUCTION
 * (cpu.h). It is written to be read, not to be fast: every vector kernel
 * (gemv_avx2.c, gemv_avx512.c) and every GPU kernel (ptx/) is tested against
 * it bit for bit.
 *
 * For an output row r:
 *
 *   float l[16] = {+0.0f ...};                      16 lane accumulators
 *   float / half / bf16 weights, unit = element k (k = 0, 1, ..., K-1):
 *       l[k % 16] = fmaf(w[r][k], x[k], l[k % 16])  w widened exactly to fp32
 *   Q8_0 / Q4_0 weights, unit = 32-block b (b = 0, 1, ..., K/32 - 1):
 *       s = sum_{j<32} wq[r][32b+j] * xq[32b+j]     exact int32
 *       l[b % 16] = fmaf((float)s, dw[r][b] * dx[b], l[b % 16])
 *                                                   dw: fp16 widened; the
 *                                                   product rounded to fp32
 *   Q4_1 / Q5_* / Q2_K..Q6_K: the same units, with a min term: cpu/kquant/kquant.c
 *   fold: for h in 8, 4, 2, 1: l[j] = l[j] + l[j + h] for j < h;  y = l[0]
 *
 * fmaf is the C99 fused multiply-add (one rounding); this file is compiled
 * with -ffp-contract=off so no other multiply-add is fused behind our back.
 */
#include <math.h>

#include "cpu/cpu_internal.h"

static float row_f32(const float *w, const float *x, int K)
{
	float l[COLI_LANES] = {0};

	for (int k = 0; k < K; k++)
		l[k % COLI_LANES] = fmaf(w[k], x[k], l[k % COLI_LANES]);
	return coli_lanes_fold(l);
}

static float row_f16(const uint16_t *w, const float *x, int K)
{
	float l[COLI_LANES] = {0};

	for (int k = 0; k < K; k++)
		l[k % COLI_LANES] = fmaf(coli_fp16_to_f32(w[k]), x[k], l[k % COLI_LANES]);
	return coli_lanes_fold(l);
}

static float row_bf16(const uint16_t *w, const float *x, int K)
{
	float l[COLI_LANES] = {0};

	for (int k = 0; k < K; k++)
		l[k % COLI_LANES] = fmaf(coli_bf16_to_f32(w[k]), x[k], l[k % COLI_LANES]);
	return coli_lanes_fold(l);
}

/* wq: int8 [K]; dw: fp16 [K/32] */
static float row_q8_0(const int8_t *wq, const uint16_t *dw, const struct coli_act *x, int K)
{
	float l[COLI_LANES] = {0};

	for (int b = 0; b < K / COLI_QBLOCK; b++) {
		int32_t s = 0;
		for (int j = 0; j < COLI_QBLOCK; j++)
			s += (int32_t)wq[b * 32 + j] * x->q[b * 32 + j];
		float scale = coli_fp16_to_f32(dw[b]) * x->d[b];
		l[b % COLI_LANES] = fmaf((float)s, scale, l[b % COLI_LANES]);
	}
	return coli_lanes_fold(l);
}

/* wq: uint8 [K/2], two nibbles per byte (cpu.h); dw: fp16 [K/32] */
static float row_q4_0(const uint8_t *wq, const uint16_t *dw, const struct coli_act *x, int K)
{
	float l[COLI_LANES] = {0};

	for (int b = 0; b < K / COLI_QBLOCK; b++) {
		const uint8_t *qb = wq + b * 16;
		const int8_t *xb = x->q + b * 32;
		int32_t s = 0;
		for (int j = 0; j < 16; j++) {
			s += ((int32_t)(qb[j] & 15) - 8) * xb[j];
			s += ((int32_t)(qb[j] >> 4) - 8) * xb[j + 16];
		}
		float scale = coli_fp16_to_f32(dw[b]) * x->d[b];
		l[b % COLI_LANES] = fmaf((float)s, scale, l[b % COLI_LANES]);
	}
	return coli_lanes_fold(l);
}

float coli_gemv_ref_row(const struct coli_mat *w, const struct coli_act *x, int r)
{
	size_t K = (size_t)w->cols, nb = K / COLI_QBLOCK;

	switch (w->dtype) {
	case COLI_DTYPE_F32:
		return row_f32((const float *)w->data + r * K, x->f, (int)K);
	case COLI_DTYPE_F16:
		return row_f16((const uint16_t *)w->data + r * K, x->f, (int)K);
	case COLI_DTYPE_BF16:
		return row_bf16((const uint16_t *)w->data + r * K, x->f, (int)K);
	case COLI_DTYPE_Q8_0:
		return row_q8_0((const int8_t *)w->data + r * K, w->scales + r * nb, x, (int)K);
	case COLI_DTYPE_Q4_0:
		return row_q4_0((const uint8_t *)w->data + r * K / 2, w->scales + r * nb, x,
		                (int)K);
	default: /* the block types: cpu/kquant/kquant.c */
		return coli_kq_row_ref(
		    w->dtype, (const uint8_t *)w->data + r * coli_dtype_row_bytes(w->dtype, K), x,
		    (int)K);
	}
}

void coli_gemv_ref(const struct coli_mat *w, const struct coli_act *x, float *y, int row0, int row1)
{
	for (int r = row0; r < row1; r++)
		y[r - row0] = coli_gemv_ref_row(w, x, r);
}
