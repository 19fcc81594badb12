/*
 * cpu/kquant/kquant.c — GGUF's block types kept as stored (Q4_1, Q5_0, Q5_1 and the
 * K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K): their canonical reduction and its
 * scalar reference, which the AVX2 / AVX-512 forms (cpu/kquant/kquant_simd.h) and
 * the GPU kernels to come reproduce bit for bit.
 *
 * Layout (cpu/dtype.h): a rows x K matrix is its rows one after the other,
 * each row its K / elems blocks exactly as a GGUF file stores them, so an
 * imported tensor is a copy (cpu/ggml.c coli_ggml_repack) and a block keeps
 * its scales beside its quants (no planes: the K-quants pack 6-bit scales
 * and mins into 12 bytes shared by eight groups, which a plane would not
 * make easier to read). The blocks (little endian, d / dmin / m IEEE half):
 *
 *   Q4_1  20 B / 32    d, m, qs[16]              x = d * q + m        q 0..15
 *   Q5_0  22 B / 32    d, qh[4], qs[16]          x = d * (q - 16)     q 0..31
 *   Q5_1  24 B / 32    d, m, qh[4], qs[16]       x = d * q + m        q 0..31
 *   Q2_K  84 B / 256   sc[16], qs[64], d, dmin   x = d*s_g*q - dmin*m_g    16 groups of 16
 *   Q3_K  110 B / 256  hm[32], qs[64], sc[12], d x = d * s_g * q     q -4..3, s_g -32..31
 *   Q4_K  144 B / 256  d, dmin, sc[12], qs[128]  x = d*s_g*q - dmin*m_g    8 groups of 32
 *   Q5_K  176 B / 256  d, dmin, sc[12], qh[32], qs[128]   the same, q 0..31
 *   Q6_K  210 B / 256  ql[128], qh[64], sc[16] (int8), d   x = d*s_g*(q-32)  16 of 16
 *
 * (cpu/ggml.c decodes each field; coli_mat_row_f32 dequantizes through it,
 * bit for bit the gguf package's values.)
 *
 * THE CANONICAL REDUCTION of these types extends cpu.h's: the activations are
 * the same per-32 int8 blocks (xq, dx, qsum: coli_act_quantize), the unit is
 * the 32-element activation block b = 0, 1, ..., K/32 - 1, going to lane
 * b % 16, and a unit's weights are one 32-block (Q4_1, Q5_*), one group of
 * 32 (Q4_K, Q5_K) or two groups of 16 (Q2_K, Q3_K, Q6_K) of one weight block.
 * Per unit, two exact integers:
 *
 *   A = sum over the unit's groups g of  s_g * sum_{i in g} q_i * xq_i
 *       (s_g = 1 for Q4_1 / Q5_*; q as in the table: Q5_0's q - 16, Q3_K's
 *       signed q, Q6_K's q - 32)
 *   C = the min term: Q4_1 / Q5_1: qsum_b;  Q2_K: -sum_g m_g * sum_{i in g}
 *       xq_i;  Q4_K / Q5_K: -m_g * qsum_b;  none for the others
 *
 * and then, in this order, in fp32:
 *
 *   l[b % 16] = fmaf((float)A, d * dx[b], l[b % 16])
 *   l[b % 16] = fmaf((float)C, dm * dx[b], l[b % 16])   (types with a min;
 *                                                        dm = m or dmin)
 *
 * d and dm are the block's halves widened exactly; each product with dx is
 * rounded to fp32 before its fmaf. Then the canonical fold (h = 8, 4, 2, 1).
 * Every |A| and |C| is below 2^24, so (float) is exact (the largest: Q6_K's
 * 2 x 128 x 32 x 127 x 16 = 16,646,144; Q4_K's 63 x 15 x 127 x 32 = 3,840,480),
 * and int32 holds every partial sum: the integers may be formed in any order,
 * the floats not. K must be whole blocks (32 or 256).
 */
#include <math.h>
#include <string.h>

#include "cpu/cpu_internal.h"

static float half(const uint8_t *p)
{
	return coli_fp16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

/* element l (0..31) of a 32-element block's 16 nibble bytes: byte l % 16,
 * low nibble for l < 16 */
static int nib32(const uint8_t *qs, int l)
{
	return qs[l & 15] >> (l & 16 ? 4 : 0) & 0xf;
}

void coli_kq_scale_min(const uint8_t *s, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = s[j] & 63, *m = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 0xf) | (s[j - 4] >> 6) << 4;
		*m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
	}
}

int coli_kq_q3_scale(const uint8_t *s, int g)
{
	const int lo = g < 8 ? s[g] & 0xf : s[g - 8] >> 4, hi = s[8 + g % 4] >> (2 * (g / 4)) & 3;

	return (lo | hi << 4) - 32;
}

/* The unit's integers (above) for unit b of a row at `row`; *fa, *fc the
 * halves d and dm (fc 0 and C 0 for types without a min). */
static void unit_ints(enum coli_dtype t, const uint8_t *row, const struct coli_act *x, int b,
                      int32_t *A, int32_t *C, float *fa, float *fc)
{
	const int8_t *xq = x->q + (size_t)b * 32;
	const uint8_t *bp;
	int32_t a = 0, c = 0;

	*fc = 0.0f;
	switch (t) {
	case COLI_DTYPE_Q4_1:
		bp = row + (size_t)b * 20;
		for (int l = 0; l < 32; l++)
			a += nib32(bp + 4, l) * xq[l];
		c = x->qsum[b];
		*fa = half(bp), *fc = half(bp + 2);
		break;
	case COLI_DTYPE_Q5_0:
	case COLI_DTYPE_Q5_1: {
		const int one = t == COLI_DTYPE_Q5_1;
		uint32_t qh;

		bp = row + (size_t)b * (one ? 24 : 22);
		memcpy(&qh, bp + (one ? 4 : 2), 4);
		for (int l = 0; l < 32; l++)
			a += ((nib32(bp + (one ? 8 : 6), l) | (int)(qh >> l & 1) << 4) -
			      (one ? 0 : 16)) *
			     xq[l];
		*fa = half(bp);
		if (one)
			c = x->qsum[b], *fc = half(bp + 2);
		break;
	}
	case COLI_DTYPE_Q2_K: {
		const int u = b % 8;

		bp = row + (size_t)(b / 8) * 84;
		for (int h = 0; h < 2; h++) { /* the unit's groups of 16 */
			const int g = u * 2 + h, sc = bp[g] & 0xf, m = bp[g] >> 4;
			int32_t s = 0, xs = 0;

			for (int l = h * 16; l < h * 16 + 16; l++) {
				const int p = u * 32 + l;

				s += (bp[16 + p / 128 * 32 + p % 32] >> (2 * (p / 32 % 4)) & 3) *
				     xq[l];
				xs += xq[l];
			}
			a += sc * s, c -= m * xs;
		}
		*fa = half(bp + 80), *fc = half(bp + 82);
		break;
	}
	case COLI_DTYPE_Q3_K: {
		const int u = b % 8;

		bp = row + (size_t)(b / 8) * 110;
		for (int h = 0; h < 2; h++) {
			const int g = u * 2 + h, sc = coli_kq_q3_scale(bp + 96, g);
			int32_t s = 0;

			for (int l = h * 16; l < h * 16 + 16; l++) {
				const int p = u * 32 + l;
				const int q =
				    (bp[32 + p / 128 * 32 + p % 32] >> (2 * (p / 32 % 4)) & 3) -
				    (bp[p % 32] >> (p / 32) & 1 ? 0 : 4);

				s += q * xq[l];
			}
			a += sc * s;
		}
		*fa = half(bp + 108);
		break;
	}
	case COLI_DTYPE_Q4_K:
	case COLI_DTYPE_Q5_K: {
		const int five = t == COLI_DTYPE_Q5_K, g = b % 8;
		int sc, m;

		bp = row + (size_t)(b / 8) * (five ? 176 : 144);
		coli_kq_scale_min(bp + 4, g, &sc, &m);
		for (int l = 0; l < 32; l++) {
			int q = bp[(five ? 48 : 16) + g / 2 * 32 + l] >> (g % 2 * 4) & 0xf;

			if (five)
				q |= (bp[16 + l] >> g & 1) << 4;
			a += q * xq[l];
		}
		a *= sc;
		c = -m * x->qsum[b];
		*fa = half(bp), *fc = half(bp + 2);
		break;
	}
	case COLI_DTYPE_Q6_K: {
		const int u = b % 8, h = u / 4;
		const int8_t *sc;

		bp = row + (size_t)(b / 8) * 210;
		sc = (const int8_t *)(bp + 192);
		for (int l = 0; l < 32; l++) {
			const int k = u % 4 * 32 + l;
			const int lo = bp[h * 64 + k % 64] >> (k / 64 * 4) & 0xf;
			const int hi = bp[128 + h * 32 + l] >> (2 * (u % 4)) & 3;

			a += sc[u * 2 + l / 16] * ((lo | hi << 4) - 32) * xq[l];
		}
		*fa = half(bp + 208);
		break;
	}
	default:
		*fa = NAN;
		break;
	}
	*A = a, *C = c;
}

static int has_min(enum coli_dtype t)
{
	return t == COLI_DTYPE_Q4_1 || t == COLI_DTYPE_Q5_1 || t == COLI_DTYPE_Q2_K ||
	       t == COLI_DTYPE_Q4_K || t == COLI_DTYPE_Q5_K;
}

void coli_kq_unit_acc(enum coli_dtype t, const uint8_t *row, const struct coli_act *x, int b,
                      float *l)
{
	int32_t A, C;
	float fa, fc;

	unit_ints(t, row, x, b, &A, &C, &fa, &fc);
	l[b % COLI_LANES] = fmaf((float)A, fa * x->d[b], l[b % COLI_LANES]);
	if (has_min(t))
		l[b % COLI_LANES] = fmaf((float)C, fc * x->d[b], l[b % COLI_LANES]);
}

float coli_kq_row_ref(enum coli_dtype t, const uint8_t *row, const struct coli_act *x, int K)
{
	float l[COLI_LANES] = {0};

	for (int b = 0; b < K / COLI_QBLOCK; b++)
		coli_kq_unit_acc(t, row, x, b, l);
	return coli_lanes_fold(l);
}

void coli_kq_gemv_ref(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                      int row1)
{
	const size_t rb = coli_dtype_row_bytes(w->dtype, (size_t)w->cols);

	for (int r = row0; r < row1; r++)
		y[r - row0] = coli_kq_row_ref(w->dtype, (const uint8_t *)w->data + (size_t)r * rb,
		                              x, w->cols);
}
