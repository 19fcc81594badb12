/*
 * cpu/gemv/panel_unpack.h — what the row panels share (cpu/gemv/gemm_panel.h:
 * eight rows in a 256-bit vector's lanes; cpu/gemv/gemm_panel16_avx512.c:
 * sixteen in a 512-bit one): the 8 x 8 transposes, and the unpack of eight
 * rows of Q4_0 or Q8_0 (cpu.h's planes) into a panel's chunks and scales.
 * Included by files compiled for AVX2 or above.
 */
#ifndef COLI_CPU_PANEL_UNPACK_H
#define COLI_CPU_PANEL_UNPACK_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu.h"

#define PANEL_INLINE static inline __attribute__((always_inline))

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
 * them out: each quant plus 128 as a byte (x ^ 0x80: vpdpbusd's unsigned
 * operand; the 128 qsum it adds is taken off the sum), its scales too. */
PANEL_INLINE void unpack_q8_0(const struct coli_mat *w, int r0, int nu, uint8_t *pq, size_t ustep,
                              size_t cstep, float *pd, int dstep)
{
	const __m256i flip = _mm256_set1_epi8((char)0x80);
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

#endif
