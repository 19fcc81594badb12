/*
 * cpu/gemv/panel_unpack.h — what the row panels share (cpu/gemv/gemm_panel.h:
 * eight rows in a 256-bit vector's lanes; cpu/gemv/gemm_panel16_avx512.c:
 * sixteen in a 512-bit one): the 8 x 8 transposes, and the unpack of eight
 * rows of Q4_0, Q8_0 (cpu.h's planes), a K-quant or a 32-element block type
 * (Q4_1, Q5_0, Q5_1) into a panel's chunks and scales; and the 32-element
 * types' quant bytes, which the row kernels (cpu/kquant/kquant_simd.h) use too.
 * Included by files compiled for AVX2 or above.
 */
#ifndef COLI_CPU_PANEL_UNPACK_H
#define COLI_CPU_PANEL_UNPACK_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu.h"

#define PANEL_INLINE static inline __attribute__((always_inline))

/* Element l of a 32-element block in byte l: qs[16]'s low nibbles, then its
 * high ones. */
PANEL_INLINE __m256i q32_nibbles(const uint8_t *qs)
{
	const __m128i q = _mm_loadu_si128((const __m128i *)qs);

	return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
}

/* Bit l of the 32 at qh as 16 (set) or 0 in byte l: byte l / 8 of qh
 * broadcast to bytes 8k..8k+7, tested against 1 << (l % 8). */
PANEL_INLINE __m256i q32_fifth_bits(const uint8_t *qh)
{
	const __m256i idx = _mm256_set_epi64x(0x0303030303030303ll, 0x0202020202020202ll,
	                                      0x0101010101010101ll, 0),
	              bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
	uint32_t h;
	__m256i v;

	__builtin_memcpy(&h, qh, 4);
	v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), idx);
	v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
	return _mm256_and_si256(v, _mm256_set1_epi8(16));
}

/* out[c] dword r = v[r] dword c (an 8 x 8 dword transpose, in place) */
PANEL_INLINE void transpose8x32(__m256i v[8])
{
	__m256i t[8], u[8];

#pragma GCC unroll 8
	for (int i = 0; i < 4; i++) {
		t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
		t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
	}
#pragma GCC unroll 8
	for (int i = 0; i < 2; i++) {
		u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
		u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
	}
#pragma GCC unroll 8
	for (int i = 0; i < 4; i++) {
		v[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
		v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
	}
}

/* out[g] int16 r = v[r] int16 g (8 x 8 int16, in place) */
PANEL_INLINE void transpose8x16(__m128i v[8])
{
	__m128i a[8], b[8];

#pragma GCC unroll 8
	for (int i = 0; i < 4; i++) {
		a[2 * i] = _mm_unpacklo_epi16(v[2 * i], v[2 * i + 1]);
		a[2 * i + 1] = _mm_unpackhi_epi16(v[2 * i], v[2 * i + 1]);
	}
#pragma GCC unroll 8
	for (int i = 0; i < 2; i++) {
		b[4 * i] = _mm_unpacklo_epi32(a[4 * i], a[4 * i + 2]);
		b[4 * i + 1] = _mm_unpackhi_epi32(a[4 * i], a[4 * i + 2]);
		b[4 * i + 2] = _mm_unpacklo_epi32(a[4 * i + 1], a[4 * i + 3]);
		b[4 * i + 3] = _mm_unpackhi_epi32(a[4 * i + 1], a[4 * i + 3]);
	}
#pragma GCC unroll 8
	for (int i = 0; i < 4; i++) {
		v[2 * i] = _mm_unpacklo_epi64(b[i], b[i + 4]);
		v[2 * i + 1] = _mm_unpackhi_epi64(b[i], b[i + 4]);
	}
}

/* a plane of eight rows' int16 values as pairs: lanes 2r and 2r + 1 = v[r] */
PANEL_INLINE void store_pairs(int16_t *o, __m128i v)
{
	_mm256_store_si256((__m256i *)o,
	                   _mm256_set_m128i(_mm_unpackhi_epi16(v, v), _mm_unpacklo_epi16(v, v)));
}

/* Where an eight-row unpack writes (strides in elements): chunk c of unit u
 * at q + ustep u + cstep c; unit u's scales as int16 pairs (lanes 2r, 2r + 1
 * = row r's) at sc + sstep u (and sc2), its mins negated at mn + mstep u;
 * block i's d and dmin at d + bstep i, dm + bstep i. */
struct panel_dst {
	uint8_t *q;
	size_t ustep, cstep;
	int16_t *sc, *sc2; /* sc2: a unit's second group of 16 (Q2_K, Q3_K, Q6_K) */
	size_t sstep;
	float *mn;
	size_t mstep;
	float *d, *dm;
	size_t bstep;
	uint8_t *mb; /* Q2_K: group g of unit u's mins, row r's at bytes 4r..4r+3,
	              * at mb + mbstep u + mbg g */
	size_t mbstep, mbg;
};

/* Block i of rows row[0..8) (Q4_K, or Q5_K when five) into a panel (o):
 * the quants as bytes, each unit's scale as int16 pairs and its min negated
 * as fp32, the block's d and dmin. */
PANEL_INLINE void unpack_q45k_block(const uint8_t *const *row, int i, int five,
                                    const struct panel_dst *o)
{
	const size_t bb = five ? 176 : 144;
	const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
	__m128i sc[8], mn[8];

#pragma GCC unroll 8
	for (int r = 0; r < 8; r++) {
		const uint8_t *bp = row[r] + i * bb;
		/* coli_kq_scale_min's fields in vector lanes (GPR to vector moves
		 * went through memory with GCC's generic tuning): dwords u0, u1, u2
		 * of the 12 bytes; lanes 0 / 1 become the scales / the mins */
		const __m128i v = _mm_loadu_si128((const __m128i *)(bp + 4)),
		              lo = _mm_and_si128(v, _mm_set1_epi8(0x3f)),
		              top = _mm_slli_epi32(
		                  _mm_and_si128(_mm_srli_epi32(v, 6), _mm_set1_epi8(3)), 4),
		              u2 = _mm_srlv_epi32(_mm_shuffle_epi32(v, 0xaa),
		                                  _mm_set_epi32(0, 0, 4, 0)),
		              hi = _mm_or_si128(_mm_and_si128(u2, _mm_set1_epi8(0x0f)), top),
		              both = _mm_unpacklo_epi32(lo, hi); /* sc_lo sc_hi m_lo m_hi */

		o->d[o->bstep * i + r] = _cvtsh_ss((uint16_t)(bp[0] | bp[1] << 8));
		o->dm[o->bstep * i + r] = _cvtsh_ss((uint16_t)(bp[2] | bp[3] << 8));
		sc[r] = _mm_cvtepu8_epi16(both);
		mn[r] = _mm_cvtepu8_epi16(_mm_srli_si128(both, 8));
	}
	transpose8x16(sc); /* sc[g] = group g's scale of rows 0..7 */
	transpose8x16(mn);
#pragma GCC unroll 8
	for (int g = 0; g < 8; g++) {
		const int u = 8 * i + g;

		store_pairs(o->sc + o->sstep * u, sc[g]);
		_mm256_store_ps(o->mn + o->mstep * u,
		                _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_setzero_si256(),
		                                                    _mm256_cvtepi16_epi32(mn[g]))));
	}
	/* groups 2j and 2j + 1 share 32 quant bytes: low and high nibbles (Q5_K:
	 * bit g of qh[l] is element l's fifth bit in group g) */
	for (int j = 0; j < 4; j++) {
		__m256i lo[8], hi[8];

#pragma GCC unroll 8
		for (int r = 0; r < 8; r++) {
			const uint8_t *bp = row[r] + i * bb;
			const __m256i q =
			    _mm256_loadu_si256((const __m256i *)(bp + (five ? 48 : 16) + 32 * j));

			lo[r] = _mm256_and_si256(q, m4);
			hi[r] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
			if (five) {
				const __m256i h = _mm256_loadu_si256((const __m256i *)(bp + 16));

				lo[r] = _mm256_or_si256(
				    lo[r],
				    _mm256_and_si256(
				        _mm256_slli_epi16(_mm256_srli_epi16(h, 2 * j), 4), b4));
				hi[r] = _mm256_or_si256(
				    hi[r],
				    _mm256_and_si256(
				        _mm256_slli_epi16(_mm256_srli_epi16(h, 2 * j + 1), 4), b4));
			}
		}
		transpose8x32(lo);
		transpose8x32(hi);
#pragma GCC unroll 8
		for (int c = 0; c < 8; c++) {
			_mm256_store_si256((__m256i *)(o->q + o->ustep * (8 * i + 2 * j) + o->cstep * c),
			                   lo[c]);
			_mm256_store_si256((__m256i *)(o->q + o->ustep * (8 * i + 2 * j + 1) + o->cstep * c),
			                   hi[c]);
		}
	}
}

/* Block i of rows row[0..8) (Q6_K) into a panel (o): unit u of half h = u / 4
 * from the low (u % 4 < 2) or high nibbles of ql bytes 64h + 32 (u % 2) ..
 * +32 and bits 2 (u % 4) of qh bytes 32h .. +32, less 32; its groups of 16
 * take scales 2u and 2u + 1. */
PANEL_INLINE void unpack_q6k_block(const uint8_t *const *row, int i, const struct panel_dst *o)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3),
	              k32 = _mm256_set1_epi8(32);
	__m128i s1[8], s2[8];

#pragma GCC unroll 8
	for (int r = 0; r < 8; r++) {
		const uint8_t *bp = row[r] + i * 210;
		const __m128i sc = _mm_loadu_si128((const __m128i *)(bp + 192)); /* int8 [16] */

		o->d[o->bstep * i + r] = _cvtsh_ss((uint16_t)(bp[208] | bp[209] << 8));
		/* the even scales (first groups) and the odd ones, widened */
		s1[r] = _mm_srai_epi16(_mm_slli_epi16(sc, 8), 8);
		s2[r] = _mm_srai_epi16(sc, 8);
	}
	transpose8x16(s1);
	transpose8x16(s2);
#pragma GCC unroll 8
	for (int u = 0; u < 8; u++) {
		store_pairs(o->sc + o->sstep * (8 * i + u), s1[u]);
		store_pairs(o->sc2 + o->sstep * (8 * i + u), s2[u]);
	}
#pragma GCC unroll 8
	for (int h = 0; h < 2; h++) {
		__m256i v[4][8];

#pragma GCC unroll 8
		for (int r = 0; r < 8; r++) {
			const uint8_t *bp = row[r] + i * 210;
			const __m256i A = _mm256_loadu_si256((const __m256i *)(bp + 64 * h)),
			              B = _mm256_loadu_si256((const __m256i *)(bp + 64 * h + 32)),
			              H = _mm256_loadu_si256((const __m256i *)(bp + 128 + 32 * h));
			const __m256i lo[4] = {_mm256_and_si256(A, m4), _mm256_and_si256(B, m4),
			                       _mm256_and_si256(_mm256_srli_epi16(A, 4), m4),
			                       _mm256_and_si256(_mm256_srli_epi16(B, 4), m4)};

#pragma GCC unroll 8
			for (int k = 0; k < 4; k++) {
				const __m256i hb =
				    _mm256_and_si256(_mm256_srli_epi16(H, 2 * k), m3);

				v[k][r] = _mm256_sub_epi8(
				    _mm256_or_si256(lo[k], _mm256_slli_epi16(hb, 4)), k32);
			}
		}
#pragma GCC unroll 8
		for (int k = 0; k < 4; k++) {
			transpose8x32(v[k]);
#pragma GCC unroll 8
			for (int c = 0; c < 8; c++)
				_mm256_store_si256((__m256i *)(o->q +
				                               o->ustep * (8 * i + 4 * h + k) +
				                               o->cstep * c),
				                   v[k][c]);
		}
	}
}

/* A Q3_K block's 16 6-bit scales (coli_kq_q3_scale) as int8: the low
 * nibbles of bytes 96..103 (groups 0-7), then their high nibbles (8-15);
 * bits 2 (g / 4) of byte 104 + g % 4 on top (g = 4j + k: a dword shift by
 * 2j); minus 32. */
PANEL_INLINE __m128i q3k_scales(const uint8_t *bp)
{
	int32_t h;

	memcpy(&h, bp + 104, 4);
	const __m128i v = _mm_loadl_epi64((const __m128i *)(bp + 96)),
	              lo = _mm_and_si128(_mm_unpacklo_epi64(v, _mm_srli_epi16(v, 4)),
	                                 _mm_set1_epi8(0x0f)),
	              hi = _mm_and_si128(
	                  _mm_srlv_epi32(_mm_set1_epi32(h), _mm_set_epi32(6, 4, 2, 0)),
	                  _mm_set1_epi8(3));

	return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}

/* Block i of rows row[0..8) (Q2_K: bb 84; Q3_K: bb 110) into a panel (o):
 * unit u's 2-bit quants are bits 2 (u % 4) of qs bytes 32 (u / 4) .. +32
 * (qs at 16 in Q2_K, at 32 in Q3_K); Q3_K subtracts 4 where bit u of hm[l]
 * is clear. Groups 2u, 2u + 1: Q2_K's scale and min nibbles of sc[g], Q3_K's
 * 6-bit scales (coli_kq_q3_scale) less 32. */
PANEL_INLINE void unpack_q23k_block(const uint8_t *const *row, int i, int three,
                                    const struct panel_dst *o)
{
	const size_t bb = three ? 110 : 84;
	const __m256i m3 = _mm256_set1_epi8(3), k4 = _mm256_set1_epi8(4);
	__m128i s1[8], s2[8], m1[8], m2[8];

#pragma GCC unroll 8
	for (int r = 0; r < 8; r++) {
		const uint8_t *bp = row[r] + i * bb;
		__m128i sc;

		if (three) {
			sc = q3k_scales(bp);
			o->d[o->bstep * i + r] = _cvtsh_ss((uint16_t)(bp[108] | bp[109] << 8));
		} else {
			const __m128i v = _mm_loadu_si128((const __m128i *)bp);

			sc = _mm_and_si128(v, _mm_set1_epi8(0x0f));
			m1[r] = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0f)); /* mins */
			o->d[o->bstep * i + r] = _cvtsh_ss((uint16_t)(bp[80] | bp[81] << 8));
			o->dm[o->bstep * i + r] = _cvtsh_ss((uint16_t)(bp[82] | bp[83] << 8));
		}
		/* even groups (first of each unit) and odd ones, widened */
		s1[r] = _mm_srai_epi16(_mm_slli_epi16(sc, 8), 8);
		s2[r] = _mm_srai_epi16(sc, 8);
	}
	transpose8x16(s1);
	transpose8x16(s2);
#pragma GCC unroll 8
	for (int u = 0; u < 8; u++) {
		store_pairs(o->sc + o->sstep * (8 * i + u), s1[u]);
		store_pairs(o->sc2 + o->sstep * (8 * i + u), s2[u]);
	}
	if (!three) { /* each group's min, row r's as bytes 4r..4r+3 (a chunk's
		       * broadcast pattern): from the 16 min bytes of each row */
#pragma GCC unroll 8
		for (int r = 0; r < 8; r++) {
			m2[r] = _mm_srli_epi16(m1[r], 8);                   /* odd groups */
			m1[r] = _mm_and_si128(m1[r], _mm_set1_epi16(0xff)); /* even */
		}
		transpose8x16(m1);
		transpose8x16(m2);
#pragma GCC unroll 8
		for (int u = 0; u < 8; u++) { /* int16 m of rows 0..7 -> bytes 4r..4r+3 */
			const __m256i b = _mm256_set1_epi32(0x01010101);

			_mm256_store_si256((__m256i *)(o->mb + o->mbstep * (8 * i + u)),
			                   _mm256_mullo_epi32(_mm256_cvtepu16_epi32(m1[u]), b));
			_mm256_store_si256((__m256i *)(o->mb + o->mbstep * (8 * i + u) + o->mbg),
			                   _mm256_mullo_epi32(_mm256_cvtepu16_epi32(m2[u]), b));
		}
	}
	for (int h = 0; h < 2; h++) {
		__m256i v[4][8];

#pragma GCC unroll 8
		for (int r = 0; r < 8; r++) {
			const uint8_t *bp = row[r] + i * bb;
			const __m256i q = _mm256_loadu_si256(
			                  (const __m256i *)(bp + (three ? 32 : 16) + 32 * h)),
			              hm = three ? _mm256_loadu_si256((const __m256i *)bp) : q;

#pragma GCC unroll 4
			for (int k = 0; k < 4; k++) {
				v[k][r] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
				if (three) { /* - 4 where bit 4h + k of hm[l] is clear */
					const __m256i bit =
					    _mm256_set1_epi8((char)(1 << (4 * h + k)));
					const __m256i clear = _mm256_cmpeq_epi8(
					    _mm256_and_si256(hm, bit), _mm256_setzero_si256());

					v[k][r] =
					    _mm256_sub_epi8(v[k][r], _mm256_and_si256(clear, k4));
				}
			}
		}
#pragma GCC unroll 4
		for (int k = 0; k < 4; k++) {
			transpose8x32(v[k]);
#pragma GCC unroll 8
			for (int c = 0; c < 8; c++)
				_mm256_store_si256(
				    (__m256i *)(o->q + o->ustep * (8 * i + 4 * h + k) + o->cstep * c),
				    v[k][c]);
		}
	}
}

/* The fp16 scales of units [0, nu) of rows r0 .. r0 + 7 (Q4_0, Q8_0: one a
 * unit), eight units a load, transposed: row r's of unit u at pd[dstep * u
 * + r]. */
PANEL_INLINE void unpack_scales(const struct coli_mat *w, int r0, int nu, float *pd, int dstep)
{
	const uint16_t *sc = w->scales + (size_t)r0 * nu;
	int u;

	for (u = 0; u + 8 <= nu; u += 8) {
		__m128i h[8];

#pragma GCC unroll 8
		for (int r = 0; r < 8; r++)
			h[r] = _mm_loadu_si128((const __m128i *)(sc + (size_t)r * nu + u));
		transpose8x16(h);
#pragma GCC unroll 8
		for (int k = 0; k < 8; k++)
			_mm256_storeu_ps(pd + (size_t)dstep * (u + k), _mm256_cvtph_ps(h[k]));
	}
	for (; u < nu; u++)
		for (int r = 0; r < 8; r++)
			pd[(size_t)dstep * u + r] = _cvtsh_ss(sc[(size_t)r * nu + u]);
}

/* Units [0, nu) of Q4_0 rows r0 .. r0 + 7 (cpu.h's planes: a unit's 16
 * bytes hold elements j and j + 16 in the low and high nibbles) into a
 * panel: nibbles 0..15 (the - 8 is taken from the sum as 8 qsum), chunk c
 * of unit u (the rows' quants 4c..4c+3, row r's at byte 4r: 32 bytes) at
 * pq + ustep * u + cstep * c, two units a load; the fp16 scales eight units
 * a load, transposed, row r's of unit u at pd[dstep * u + r]. */
PANEL_INLINE void unpack_q4_0(const struct coli_mat *w, int r0, int nu, uint8_t *pq, size_t ustep,
                              size_t cstep, float *pd, int dstep)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	const uint8_t *q = (const uint8_t *)w->data + (size_t)r0 * nu * 16;
	int u = 0;

	for (; u + 2 <= nu; u += 2) {
		__m256i v0[8], v1[8];

#pragma GCC unroll 8
		for (int r = 0; r < 8; r++) {
			const __m256i b = _mm256_loadu_si256(
			                  (const __m256i *)(q + ((size_t)r * nu + u) * 16)),
			              lo = _mm256_and_si256(b, m4),
			              hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);

			v0[r] = _mm256_permute2x128_si256(lo, hi, 0x20);
			v1[r] = _mm256_permute2x128_si256(lo, hi, 0x31);
		}
		transpose8x32(v0);
		transpose8x32(v1);
#pragma GCC unroll 8
		for (int c = 0; c < 8; c++) {
			_mm256_store_si256((__m256i *)(pq + ustep * u + cstep * c), v0[c]);
			_mm256_store_si256((__m256i *)(pq + ustep * (u + 1) + cstep * c), v1[c]);
		}
	}
	if (u < nu) { /* an odd last unit */
		const __m128i m = _mm_set1_epi8(0x0f);
		__m256i v[8];

#pragma GCC unroll 8
		for (int r = 0; r < 8; r++) {
			const __m128i b =
			    _mm_loadu_si128((const __m128i *)(q + ((size_t)r * nu + u) * 16));

			v[r] = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m),
			                        _mm_and_si128(b, m));
		}
		transpose8x32(v);
#pragma GCC unroll 8
		for (int c = 0; c < 8; c++)
			_mm256_store_si256((__m256i *)(pq + ustep * u + cstep * c), v[c]);
	}
	unpack_scales(w, r0, nu, pd, dstep);
}

/* Units [0, nu) of Q8_0 rows r0 .. r0 + 7 into a panel as unpack_q4_0 lays
 * them out, its scales too: with flip each quant plus 128 as a byte (x ^
 * 0x80: vpdpbusd's unsigned operand; the 128 qsum it adds is taken off the
 * sum), else the signed quants as stored (|w| by x with w's sign). */
PANEL_INLINE void unpack_q8_0(const struct coli_mat *w, int r0, int nu, uint8_t *pq, size_t ustep,
                              size_t cstep, float *pd, int dstep, int flip_sign)
{
	const __m256i flip = _mm256_set1_epi8(flip_sign ? (char)0x80 : 0);
	const uint8_t *q = (const uint8_t *)w->data + (size_t)r0 * nu * 32;

	for (int u = 0; u < nu; u++) {
		__m256i v[8];

#pragma GCC unroll 8
		for (int r = 0; r < 8; r++)
			v[r] = _mm256_xor_si256(
			    _mm256_loadu_si256((const __m256i *)(q + ((size_t)r * nu + u) * 32)), flip);
		transpose8x32(v);
#pragma GCC unroll 8
		for (int c = 0; c < 8; c++)
			_mm256_store_si256((__m256i *)(pq + ustep * u + cstep * c), v[c]);
	}
	unpack_scales(w, r0, nu, pd, dstep);
}

/* Units [0, nu) of rows r0 .. r0 + 7 of a 32-element block type t (GGUF's
 * blocks as stored: Q4_1 d, m, qs[16]; Q5_0 d, qh[4], qs[16]; Q5_1 d, m,
 * qh[4], qs[16]) into a panel as unpack_q4_0 lays them out: the quants
 * unsigned (Q4_1 0..15, Q5_* 0..31; Q5_0's - 16 is taken from the sum as 16
 * qsum), each unit's d at pd[dstep * u + r] and (Q4_1, Q5_1) its m at
 * pm[dstep * u + r]. */
PANEL_INLINE void unpack_q32(const struct coli_mat *w, int r0, int nu, uint8_t *pq, size_t ustep,
                             size_t cstep, float *pd, float *pm, int dstep)
{
	const enum coli_dtype t = w->dtype;
	const size_t bb = t == COLI_DTYPE_Q4_1 ? 20 : t == COLI_DTYPE_Q5_0 ? 22 : 24;
	const size_t rb = coli_dtype_row_bytes(t, (size_t)w->cols);
	const int oqs = t == COLI_DTYPE_Q4_1 ? 4 : t == COLI_DTYPE_Q5_0 ? 6 : 8,
	          oqh = t == COLI_DTYPE_Q5_0 ? 2 : 4;

	for (int u = 0; u < nu; u++) {
		__m256i v[8];

#pragma GCC unroll 8
		for (int r = 0; r < 8; r++) {
			const uint8_t *b = (const uint8_t *)w->data + (size_t)(r0 + r) * rb + u * bb;

			v[r] = q32_nibbles(b + oqs);
			if (t != COLI_DTYPE_Q4_1)
				v[r] = _mm256_or_si256(v[r], q32_fifth_bits(b + oqh));
			pd[(size_t)dstep * u + r] = _cvtsh_ss((uint16_t)(b[0] | b[1] << 8));
			if (t != COLI_DTYPE_Q5_0)
				pm[(size_t)dstep * u + r] = _cvtsh_ss((uint16_t)(b[2] | b[3] << 8));
		}
		transpose8x32(v);
#pragma GCC unroll 8
		for (int c = 0; c < 8; c++)
			_mm256_store_si256((__m256i *)(pq + ustep * u + cstep * c), v[c]);
	}
}

#endif
