/*
 * cpu/gemv/gemm_unpack_amx.c — a 16-row panel of any GGUF block type coli
 * keeps, as the AMX int8 tiles of cpu/gemv/gemm_amx.c read it: the quants as
 * int8 in the tiles' A layout, and each canonical unit's scale factors as
 * fp32 (or int32) planes. Run once per panel and shared by every token tile
 * of a call: nothing here is kept between calls, and no second copy of the
 * model exists.
 *
 * A unit is kquant.c's: the 32-element activation block b. Its A tile bytes
 * are the unit's 32 weight quants, already centred where the type centres
 * them, so that one TDPBSSD yields the exact int32 sum the reference forms:
 *
 *   type   quant in A          per-unit planes ([16 rows][nb units])
 *   Q8_0   (read in place)     d = the block's scale
 *   Q4_0   nibble - 8          d
 *   Q5_0   5-bit q - 16        d
 *   Q4_1   nibble 0..15        d, dm = m
 *   Q5_1   5-bit q 0..31       d, dm = m
 *   Q4_K   nibble 0..15        d, dm = dmin, s0 = s_g, n0 = -m_g
 *   Q5_K   5-bit q 0..31       the same
 *   Q6_K   6-bit q - 32        d, s0 / s1 = the two groups' int8 scales
 *   Q3_K   signed q -4..3      d, s0 / s1 = the two groups' 6-bit scales
 *   Q2_K   2-bit q 0..3        d, dm = dmin, s0 / s1 = the groups' scales,
 *                              n0 / n1 = minus the groups' mins
 *
 * q: [nb][16 rows][32] int8, unit b of panel row m at q + (b * 16 + m) * 32:
 * a tile load with stride 32 takes the 16 rows of one unit (colsb 32), or of
 * one group of 16 of it (colsb 16, at + 0 or + 16: Q2_K, Q3_K and Q6_K, whose
 * two groups keep their own scale and so their own int32 sum). Every value
 * is an int8, so the tile product is exact; s0, s1, n0 and n1 are small
 * integers held as floats (exact: |s| <= 128, |m| <= 63). The halves are
 * widened exactly (F16C).
 */
#include <errno.h>
#include <immintrin.h>
#include <string.h>

#include "cpu/cpu_internal.h"

static float half(const uint8_t *p)
{
	return _cvtsh_ss((uint16_t)(p[0] | p[1] << 8));
}

/* A panel's fp16 scale plane (16 rows of nb, row stride nb) as fp32 [16][nb]. */
static void widen_scales(const uint16_t *s, int nb, float *dwf)
{
	for (int m = 0; m < 16; m++)
		for (int b = 0; b < nb; b += 16) {
			__mmask16 k = nb - b >= 16 ? 0xffff : (__mmask16)((1u << (nb - b)) - 1);
			__m512 v =
			    _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, s + (size_t)m * nb + b));

			_mm512_mask_storeu_ps(dwf + (size_t)m * nb + b, k, v);
		}
}

/* Q4_0: 16 rows (from row rs) of nibbles - 8, low nibbles (elements 0..15)
 * then high ones (16..31). */
static void unpack_q4(const struct coli_mat *w, int rs, int nb, int8_t *wa)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
	const __m512i ia = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
	const __m512i ib = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);

	for (int m = 0; m < 16; m++) {
		const uint8_t *q = (const uint8_t *)w->data + (size_t)(rs + m) * nb * 16;
		int b = 0;

		for (; b + 4 <= nb; b += 4) {
			__m512i v = _mm512_loadu_si512(q + (size_t)b * 16);
			__m512i lo = _mm512_sub_epi8(_mm512_and_si512(v, m4), eight);
			__m512i hi =
			    _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), eight);
			__m512i p = _mm512_permutex2var_epi64(lo, ia, hi); /* blocks b, b+1 */
			__m512i s = _mm512_permutex2var_epi64(lo, ib, hi); /* blocks b+2, b+3 */

			_mm256_store_si256((__m256i *)(wa + ((size_t)b * 16 + m) * 32),
			                   _mm512_castsi512_si256(p));
			_mm256_store_si256((__m256i *)(wa + ((size_t)(b + 1) * 16 + m) * 32),
			                   _mm512_extracti64x4_epi64(p, 1));
			_mm256_store_si256((__m256i *)(wa + ((size_t)(b + 2) * 16 + m) * 32),
			                   _mm512_castsi512_si256(s));
			_mm256_store_si256((__m256i *)(wa + ((size_t)(b + 3) * 16 + m) * 32),
			                   _mm512_extracti64x4_epi64(s, 1));
		}
		for (; b < nb; b++) {
			int8_t *o = wa + ((size_t)b * 16 + m) * 32;

			for (int j = 0; j < 16; j++) {
				o[j] = (int8_t)((q[b * 16 + j] & 15) - 8);
				o[j + 16] = (int8_t)((q[b * 16 + j] >> 4) - 8);
			}
		}
	}
}

/* Q4_1 / Q5_0 / Q5_1: one 32-block a unit; the fifth bits (qh, bit l for
 * element l) become 16 by a byte mask. */
static void unpack_q5(const struct coli_mat *w, int rs, int nb, const struct coli_amx_panel *u)
{
	const enum coli_dtype t = w->dtype;
	const int one = t != COLI_DTYPE_Q5_0, five = t != COLI_DTYPE_Q4_1;
	const int bb = t == COLI_DTYPE_Q4_1 ? 20 : t == COLI_DTYPE_Q5_0 ? 22 : 24;
	const int qoff = (one ? 4 : 2) + (five ? 4 : 0); /* qs; qh just before */
	const __m128i m4 = _mm_set1_epi8(0x0f);
	const __m256i sixteen = _mm256_set1_epi8(16);

	for (int m = 0; m < 16; m++) {
		const uint8_t *row = (const uint8_t *)w->data + (size_t)(rs + m) * nb * bb;

		for (int b = 0; b < nb; b++) {
			const uint8_t *bp = row + (size_t)b * bb;
			const __m128i v = _mm_loadu_si128((const __m128i *)(bp + qoff));
			__m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4),
			                             _mm_and_si128(v, m4));

			if (five) {
				uint32_t qh;

				memcpy(&qh, bp + qoff - 4, 4);
				q = _mm256_or_si256(q, _mm256_maskz_mov_epi8(qh, sixteen));
				if (!one)
					q = _mm256_sub_epi8(q, sixteen);
			}
			_mm256_store_si256((__m256i *)(u->q + ((size_t)b * 16 + m) * 32), q);
			u->d[m * nb + b] = half(bp);
			if (one)
				u->dm[m * nb + b] = half(bp + 2);
		}
	}
}

/* Q4_K / Q5_K: unit b is group b % 8 of superblock b / 8; its scale and
 * min as kquant.c's unit_ints reads them. */
static void unpack_kq(const struct coli_mat *w, int rs, int nb, const struct coli_amx_panel *u)
{
	const int five = w->dtype == COLI_DTYPE_Q5_K, bb = five ? 176 : 144;
	const size_t rowb = (size_t)(nb / 8) * bb;
	const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);

	for (int m = 0; m < 16; m++) {
		const uint8_t *row = (const uint8_t *)w->data + (size_t)(rs + m) * rowb;
		float d = 0, dmin = 0;

		for (int b = 0; b < nb; b++) {
			const uint8_t *bp = row + (size_t)(b / 8) * bb;
			const int g = b % 8;
			__m256i v = _mm256_loadu_si256(
			    (const __m256i *)(bp + (five ? 48 : 16) + g / 2 * 32));
			__m256i q = _mm256_and_si256(_mm256_srli_epi16(v, g % 2 * 4), m4);
			int sc, mn;

			if (five) {
				__m256i h = _mm256_loadu_si256((const __m256i *)(bp + 16));

				h = _mm256_and_si256(_mm256_srli_epi16(h, g), one);
				q = _mm256_or_si256(q, _mm256_slli_epi16(h, 4));
			}
			_mm256_store_si256((__m256i *)(u->q + ((size_t)b * 16 + m) * 32), q);
			coli_kq_scale_min(bp + 4, g, &sc, &mn);
			u->s0[m * nb + b] = (float)sc;
			u->n0[m * nb + b] = (float)-mn;
			if (!g) {
				d = half(bp);
				dmin = half(bp + 2);
			}
			u->d[m * nb + b] = d;
			u->dm[m * nb + b] = dmin;
		}
	}
}

/* (v >> n) & mask on bytes, n a run-time count (the 16-bit shift's bits
 * from the neighbour byte fall outside mask: n + its width <= 8). */
static inline __m256i bits(const uint8_t *p, int n, __m256i mask)
{
	return _mm256_and_si256(
	    _mm256_srl_epi16(_mm256_loadu_si256((const __m256i *)p), _mm_cvtsi32_si128(n)), mask);
}

/* Q6_K, Q3_K and Q2_K: unit v (0..7) of a superblock is its elements
 * 32v .. 32v + 31, two groups of 16 (2v, 2v + 1). */
static void unpack_g16(const struct coli_mat *w, int rs, int nb, const struct coli_amx_panel *u)
{
	const enum coli_dtype t = w->dtype;
	const int bb = t == COLI_DTYPE_Q6_K ? 210 : t == COLI_DTYPE_Q3_K ? 110 : 84;
	const size_t rowb = (size_t)(nb / 8) * bb;
	const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3),
	              m1 = _mm256_set1_epi8(1), c32 = _mm256_set1_epi8(32),
	              c4 = _mm256_set1_epi8(4);

	for (int m = 0; m < 16; m++) {
		const uint8_t *row = (const uint8_t *)w->data + (size_t)(rs + m) * rowb;

		for (int b0 = 0; b0 < nb; b0 += 8) {
			const uint8_t *bp = row + (size_t)(b0 / 8) * bb;
			float sc[16], mn[16], d, dm = 0.0f; /* the 16 groups' scales, mins */

			if (t == COLI_DTYPE_Q6_K) { /* ql[128] qh[64] sc[16] d */
				for (int g = 0; g < 16; g++)
					sc[g] = (float)(int8_t)bp[192 + g];
				d = half(bp + 208);
			} else if (t == COLI_DTYPE_Q3_K) { /* hm[32] qs[64] sc[12] d */
				for (int g = 0; g < 16; g++)
					sc[g] = (float)coli_kq_q3_scale(bp + 96, g);
				d = half(bp + 108);
			} else { /* Q2_K: sc[16] qs[64] d dmin */
				for (int g = 0; g < 16; g++) {
					sc[g] = (float)(bp[g] & 0xf);
					mn[g] = (float)-(int)(bp[g] >> 4);
				}
				d = half(bp + 80);
				dm = half(bp + 82);
			}
			for (int v = 0; v < 8; v++) {
				const int i = m * nb + b0 + v;
				__m256i q;

				if (t == COLI_DTYPE_Q6_K) {
					__m256i lo =
					    bits(bp + v / 4 * 64 + v % 2 * 32, v % 4 / 2 * 4, m4);
					__m256i hi = bits(bp + 128 + v / 4 * 32, 2 * (v % 4), m3);

					q = _mm256_sub_epi8(
					    _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), c32);
				} else if (t == COLI_DTYPE_Q3_K) {
					__m256i lo = bits(bp + 32 + v / 4 * 32, 2 * (v % 4), m3);
					__m256i hb = bits(bp, v, m1);

					q = _mm256_sub_epi8(
					    _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2)), c4);
				} else {
					q = bits(bp + 16 + v / 4 * 32, 2 * (v % 4), m3);
					u->n0[i] = mn[2 * v];
					u->n1[i] = mn[2 * v + 1];
					u->dm[i] = dm;
				}
				_mm256_store_si256(
				    (__m256i *)(u->q + ((size_t)(b0 + v) * 16 + m) * 32), q);
				u->s0[i] = sc[2 * v];
				u->s1[i] = sc[2 * v + 1];
				u->d[i] = d;
			}
		}
	}
}

int coli_amx_panel_unpack(const struct coli_mat *w, int rs, const struct coli_amx_panel *u)
{
	const int nb = w->cols / COLI_QBLOCK;

	switch (w->dtype) {
	case COLI_DTYPE_Q8_0:
		widen_scales(w->scales + (size_t)rs * nb, nb, u->d);
		return 0;
	case COLI_DTYPE_Q4_0:
		widen_scales(w->scales + (size_t)rs * nb, nb, u->d);
		unpack_q4(w, rs, nb, u->q);
		return 0;
	case COLI_DTYPE_Q4_1:
	case COLI_DTYPE_Q5_0:
	case COLI_DTYPE_Q5_1:
		unpack_q5(w, rs, nb, u);
		return 0;
	case COLI_DTYPE_Q4_K:
	case COLI_DTYPE_Q5_K:
		unpack_kq(w, rs, nb, u);
		return 0;
	case COLI_DTYPE_Q6_K:
	case COLI_DTYPE_Q3_K:
	case COLI_DTYPE_Q2_K:
		unpack_g16(w, rs, nb, u);
		return 0;
	default:
		return -ENOTSUP;
	}
}
