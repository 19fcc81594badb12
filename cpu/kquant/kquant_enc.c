/*
 * cpu/kquant/kquant_enc.c — encoders for GGUF's block types, so `coli convert
 * --quant q4k|q5k|q6k` makes them from a Hugging Face checkpoint (GGUF files
 * bring their own blocks; cpu/kquant/kquant.c reads both). The blocks are
 * byte for byte GGUF's layouts (cpu/kquant/kquant.c's table), so a row
 * encoded here decodes through cpu/ggml.c, the gguf package and llama.cpp
 * alike.
 *
 * Choosing the scales (no importance weights: every element counts alike):
 *
 *   affine groups (Q4_K, Q5_K: x = s q - m, q 0..nmax, s, m >= 0; Q5_1:
 *   x = d q + m): candidate steps (max - min) / (nmax + t) over a small
 *   range of t, each followed by two rounds of "round q, then the least-
 *   squares step and offset for those q" (m clamped at >= 0 where the
 *   format stores it unsigned); the candidate with the least squared error
 *   wins.
 *   symmetric groups (Q6_K: x = s (q - 32); Q5_0: x = d (q - 16)): the
 *   element of largest magnitude maps to the most negative level (one level
 *   more on that side), then steps scaled by 1 + 0.02 k, k = -8..8, each with
 *   one least-squares refinement s = sum(q x) / sum(q q).
 *   super-blocks (Q4_K/Q5_K 8 groups, Q6_K 16): the groups' steps and offsets
 *   become 6-bit (8-bit for Q6_K) multiples of one fp16 d (and dmin), the
 *   largest mapping to the top code; then every q is rounded again against
 *   the scales as stored, so the block holds the best q for what decodes.
 *
 * Cost: a few passes over each group per candidate, ~50 candidates a group:
 * converting is bound by this search (a 30B model's experts: minutes on a
 * many-core host), which runs once.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "cpu/cpu_internal.h"

static void put_half(uint8_t *p, float v)
{
	const uint16_t h = coli_f32_to_fp16(v);

	p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

static float get_half(const uint8_t *p)
{
	return coli_fp16_to_f32((uint16_t)(p[0] | p[1] << 8));
}

static int clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* x ~ s q - m over n elements, q 0..nmax, m >= 0 when nonneg_m (else any
 * sign): the best (s, m) of the candidates in the top comment. */
static void fit_affine(const float *x, int n, int nmax, int nonneg_m, float *s_out, float *m_out)
{
	float lo = x[0], hi = x[0], best = FLT_MAX, bs = 0.0f, bm = 0.0f;

	for (int i = 1; i < n; i++)
		lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
	if (nonneg_m && lo > 0.0f)
		lo = 0.0f;
	if (hi == lo) {
		*s_out = 0.0f, *m_out = -lo;
		return;
	}
	for (int t = -4; t <= 12; t++) {
		float s = (hi - lo) / ((float)nmax + 0.125f * (float)t), m = -lo;

		for (int round = 0; round < 3; round++) {
			double sq = 0, sqq = 0, sx = 0, sqx = 0, err = 0, det;
			const float is = s > 0.0f ? 1.0f / s : 0.0f;

			for (int i = 0; i < n; i++) {
				const int q = clampi((int)lrintf((x[i] + m) * is), 0, nmax);
				const double e = (double)s * q - m - x[i];

				err += e * e;
				sq += q, sqq += (double)q * q, sx += x[i], sqx += (double)q * x[i];
			}
			if (err < best)
				best = (float)err, bs = s, bm = m;
			if (round == 2)
				break;
			/* least squares for these q: x ~ s q + c, m = -c */
			det = n * sqq - sq * sq;
			if (det <= 0)
				break;
			s = (float)((n * sqx - sq * sx) / det);
			m = (float)(-(sqq * sx - sq * sqx) / det);
			if (nonneg_m && m < 0.0f)
				m = 0.0f, s = sqq > 0 ? (float)(sqx / sqq) : s;
			if (!(s > 0.0f))
				break;
		}
	}
	*s_out = bs, *m_out = bm;
}

/* x ~ s (q - off) over n elements, q 0..2 off - 1: the best s (any sign). */
static float fit_sym(const float *x, int n, int off)
{
	float amax = 0.0f, vmax = 0.0f, best = FLT_MAX, bs = 0.0f;

	for (int i = 0; i < n; i++)
		if (fabsf(x[i]) > amax)
			amax = fabsf(x[i]), vmax = x[i];
	if (amax == 0.0f)
		return 0.0f;
	for (int k = -8; k <= 8; k++) {
		float s = vmax / (float)-off * (1.0f + 0.02f * (float)k);

		for (int round = 0; round < 2; round++) {
			double sqq = 0, sqx = 0, err = 0;
			const float is = 1.0f / s;

			for (int i = 0; i < n; i++) {
				const int q = clampi((int)lrintf(x[i] * is), -off, off - 1);
				const double e = (double)s * q - x[i];

				err += e * e, sqq += (double)q * q, sqx += (double)q * x[i];
			}
			if (err < best)
				best = (float)err, bs = s;
			if (round || sqq == 0)
				break;
			s = (float)(sqx / sqq);
			if (s == 0.0f)
				break;
		}
	}
	return bs;
}

/* 6-bit codes of v[n] (>= 0) against one fp16 step: *d and code[] */
static void codes6(const float *v, int n, int top, uint8_t *dst, float *d, int *code)
{
	float vmax = 0.0f;

	for (int i = 0; i < n; i++)
		vmax = v[i] > vmax ? v[i] : vmax;
	put_half(dst, vmax / (float)top);
	*d = get_half(dst);
	for (int i = 0; i < n; i++)
		code[i] = *d > 0.0f ? clampi((int)lrintf(v[i] / *d), 0, top) : 0;
}

/* Q4_K (five 0) / Q5_K (five 1): d, dmin, sc[12], [qh[32]], qs[128] */
static void enc_q45k(const float *x, uint8_t *b, int five)
{
	const int nmax = five ? 31 : 15;
	uint8_t *s = b + 4, *qh = b + 16, *qs = b + (five ? 48 : 16);
	float gs[8], gm[8], d, dmin;
	int sc[8], m[8];

	memset(b, 0, five ? 176 : 144);
	for (int g = 0; g < 8; g++)
		fit_affine(x + 32 * g, 32, nmax, 1, &gs[g], &gm[g]);
	codes6(gs, 8, 63, b, &d, sc);
	codes6(gm, 8, 63, b + 2, &dmin, m);
	for (int j = 0; j < 4; j++) {
		s[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
		s[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
		s[j + 8] = (uint8_t)((sc[j + 4] & 0xf) | (m[j + 4] & 0xf) << 4);
	}
	for (int g = 0; g < 8; g++) {
		const float ds = d * (float)sc[g], dm = dmin * (float)m[g];
		const float is = ds > 0.0f ? 1.0f / ds : 0.0f;

		for (int l = 0; l < 32; l++) {
			const int q = clampi((int)lrintf((x[32 * g + l] + dm) * is), 0, nmax);

			qs[g / 2 * 32 + l] |= (uint8_t)((q & 15) << (g % 2 * 4));
			if (five)
				qh[l] |= (uint8_t)((q >> 4) << g);
		}
	}
}

/* Q6_K: ql[128], qh[64], sc[16] (int8), d */
static void enc_q6k(const float *x, uint8_t *b)
{
	float gs[16], amax = 0.0f, d;
	int8_t *sc = (int8_t *)(b + 192);

	memset(b, 0, 210);
	for (int g = 0; g < 16; g++) {
		gs[g] = fit_sym(x + 16 * g, 16, 32);
		amax = fabsf(gs[g]) > amax ? fabsf(gs[g]) : amax;
	}
	put_half(b + 208, amax / 127.0f);
	d = get_half(b + 208);
	for (int g = 0; g < 16; g++)
		sc[g] = (int8_t)(d > 0.0f ? clampi((int)lrintf(gs[g] / d), -127, 127) : 0);
	for (int p = 0; p < 256; p++) {
		const float s = d * (float)sc[p / 16];
		const int q = s != 0.0f ? clampi((int)lrintf(x[p] / s), -32, 31) + 32 : 32;
		const int h = p / 128, k = p % 128;

		b[h * 64 + k % 64] |= (uint8_t)((q & 15) << (k / 64 * 4));
		b[128 + h * 32 + k % 32] |= (uint8_t)((q >> 4) << (2 * (k / 32)));
	}
}

/* Q5_0 (one 0: d, qh[4], qs[16], x = d (q - 16)) and Q5_1 (one 1: d, m, qh[4],
 * qs[16], x = d q + m) */
static void enc_q5(const float *x, uint8_t *b, int one)
{
	uint8_t *qh = b + (one ? 4 : 2), *qs = b + (one ? 8 : 6);
	float d, m = 0.0f;
	uint32_t h = 0;

	memset(b, 0, one ? 24 : 22);
	if (one) {
		float s, off;

		fit_affine(x, 32, 31, 0, &s, &off);
		put_half(b, s), put_half(b + 2, -off);
		d = get_half(b), m = get_half(b + 2);
	} else {
		put_half(b, fit_sym(x, 32, 16));
		d = get_half(b);
	}
	for (int j = 0; j < 32; j++) {
		const float id = d != 0.0f ? 1.0f / d : 0.0f;
		const int q = one ? clampi((int)lrintf((x[j] - m) * id), 0, 31)
		                  : clampi((int)lrintf(x[j] * id), -16, 15) + 16;

		qs[j & 15] |= (uint8_t)((q & 15) << (j & 16 ? 4 : 0));
		h |= (uint32_t)(q >> 4) << j;
	}
	memcpy(qh, &h, 4);
}

int coli_kq_encode_row(enum coli_dtype t, const float *x, int K, void *dst)
{
	unsigned elems, bytes;
	uint8_t *b = dst;

	if (coli_dtype_block(t, &elems, &bytes) || K <= 0 || K % (int)elems)
		return -EINVAL;
	for (int k = 0; k < K; k += (int)elems, b += bytes)
		switch (t) {
		case COLI_DTYPE_Q4_K:
		case COLI_DTYPE_Q5_K:
			enc_q45k(x + k, b, t == COLI_DTYPE_Q5_K);
			break;
		case COLI_DTYPE_Q6_K:
			enc_q6k(x + k, b);
			break;
		case COLI_DTYPE_Q5_0:
		case COLI_DTYPE_Q5_1:
			enc_q5(x + k, b, t == COLI_DTYPE_Q5_1);
			break;
		default:
			return -EINVAL; /* Q2_K, Q3_K, Q4_1: GGUF files only */
		}
	return 0;
}
