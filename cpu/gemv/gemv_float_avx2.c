/*
 * cpu/gemv/gemv_float_avx2.c — the AVX2 + FMA + F16C GEMV and GEMM of float
 * weights (F32, F16, BF16) under THE CANONICAL REDUCTION (cpu.h), bit-identical
 * to cpu/gemv/gemv_ref.c; cpu/gemv/gemv_avx2.c's entry points call it for
 * those types.
 *
 * The unit is the element: elements k..k+15 (k % 16 == 0) of a row are one
 * fmadd into lanes 0..7 and one into lanes 8..15, two ymm accumulators a row
 * and activation, then the canonical fold (fold16, cpu/simd_avx2.h). A tile
 * is R rows x T activations, R * T <= 4, so its eight accumulators and the
 * widened weights fit the sixteen registers: a decode step (one activation)
 * by tiles of four rows, eight independent FMA chains hiding the FMA
 * latency, a batch by two rows x two activations. Each weight vector is
 * widened once for the tile's activations and each activation's loads serve
 * its rows; rows run outermost, so a tile's rows stay in L1 while every
 * activation passes over them.
 */
#include <immintrin.h>
#include <math.h>

#include "cpu/cpu_internal.h"
#include "cpu/simd_avx2.h"

#define INLINE static inline __attribute__((always_inline))

/* 16 weights at w (element type by dt) as two fp32 vectors. */
INLINE void load16(enum coli_dtype dt, const void *w, size_t k, __m256 *lo, __m256 *hi)
{
	if (dt == COLI_DTYPE_F32) {
		*lo = _mm256_loadu_ps((const float *)w + k);
		*hi = _mm256_loadu_ps((const float *)w + k + 8);
	} else if (dt == COLI_DTYPE_F16) {
		*lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + k)));
		*hi = _mm256_cvtph_ps(
		    _mm_loadu_si128((const __m128i *)((const uint16_t *)w + k + 8)));
	} else {
		__m256i v = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k));
		__m256i a = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(v));
		__m256i b = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(v, 1));
		*lo = _mm256_castsi256_ps(_mm256_slli_epi32(a, 16));
		*hi = _mm256_castsi256_ps(_mm256_slli_epi32(b, 16));
	}
}

INLINE float widen1(enum coli_dtype dt, const void *w, size_t k)
{
	if (dt == COLI_DTYPE_F32)
		return ((const float *)w)[k];
	if (dt == COLI_DTYPE_F16)
		return coli_fp16_to_f32(((const uint16_t *)w)[k]);
	return coli_bf16_to_f32(((const uint16_t *)w)[k]);
}

/* Rows r..r+R x activations x[0..T) of a float-type matrix into y[t * ldy +
 * i], R * T <= 4 (R 1, 2 or 4; T 1 or 2): sixteen lanes along the row, low
 * and high eight as two fmadd chains, then the canonical fold (the
 * reference's trailing columns into their lanes first). Each weight vector
 * is widened once for the T activations; the eight accumulators fit the
 * sixteen registers. */
INLINE void float_tile(enum coli_dtype dt, const struct coli_mat *w, const struct coli_act *x,
                       float *y, size_t ldy, int r, const int R, const int T)
{
	const size_t K = (size_t)w->cols, K16 = K & ~(size_t)15;
	const size_t esz = dt == COLI_DTYPE_F32 ? 4 : 2;
	const char *base = (const char *)w->data + (size_t)r * K * esz;
	__m256 acc[4][2][2]; /* [row][activation][half] */

#pragma GCC unroll 4
	for (int i = 0; i < R; i++)
#pragma GCC unroll 2
		for (int t = 0; t < T; t++)
			acc[i][t][0] = acc[i][t][1] = _mm256_setzero_ps();
	for (size_t k = 0; k < K16; k += 16) {
		__m256 lo[4], hi[4];

#pragma GCC unroll 4
		for (int i = 0; i < R; i++) {
			/* the next tile's row at this offset (the rows follow in memory) */
			_mm_prefetch(base + (i + R) * K * esz + k * esz, _MM_HINT_T0);
			load16(dt, base + i * K * esz, k, &lo[i], &hi[i]);
		}
#pragma GCC unroll 2
		for (int t = 0; t < T; t++) {
			const __m256 x0 = _mm256_loadu_ps(x[t].f + k),
			             x1 = _mm256_loadu_ps(x[t].f + k + 8);

#pragma GCC unroll 4
			for (int i = 0; i < R; i++) {
				acc[i][t][0] = _mm256_fmadd_ps(lo[i], x0, acc[i][t][0]);
				acc[i][t][1] = _mm256_fmadd_ps(hi[i], x1, acc[i][t][1]);
			}
		}
	}
	for (int i = 0; i < R; i++)
		for (int t = 0; t < T; t++) {
			if (K16 == K) {
				y[t * ldy + i] = fold16(acc[i][t][0], acc[i][t][1]);
				continue;
			}
			float l[16];
			_mm256_storeu_ps(l, acc[i][t][0]);
			_mm256_storeu_ps(l + 8, acc[i][t][1]);
			for (size_t k = K16; k < K; k++)
				l[k % 16] =
				    fmaf(widen1(dt, base + i * K * esz, k), x[t].f[k], l[k % 16]);
			y[t * ldy + i] = coli_lanes_fold(l);
		}
}

/* Rows r..r+R x all S activations: pairs of activations where the tile
 * allows (R <= 2), then one at a time. */
INLINE void float_acts(enum coli_dtype dt, const struct coli_mat *w, const struct coli_act *x,
                       int S, float *y, size_t ldy, int r, const int R)
{
	int s = 0;

	if (R <= 2)
		for (; s + 2 <= S; s += 2)
			float_tile(dt, w, x + s, y + (size_t)s * ldy, ldy, r, R <= 2 ? R : 2, 2);
	for (; s < S; s++)
		float_tile(dt, w, x + s, y + (size_t)s * ldy, ldy, r, R, 1);
}

/* Rows [row0, row1) x S activations: one activation (a decode step) by
 * tiles of 4 rows, a batch by 2 rows x 2 activations; rows outermost, so a
 * tile's rows stay in L1 while every activation passes over them. */
INLINE void gemm_float(enum coli_dtype dt, const struct coli_mat *w, const struct coli_act *x,
                       int S, float *y, size_t ldy, int row0, int row1)
{
	int r = row0;

	if (S == 1)
		for (; r + 4 <= row1; r += 4)
			float_acts(dt, w, x, S, y + (r - row0), ldy, r, 4);
	for (; r + 2 <= row1; r += 2)
		float_acts(dt, w, x, S, y + (r - row0), ldy, r, 2);
	for (; r < row1; r++)
		float_acts(dt, w, x, S, y + (r - row0), ldy, r, 1);
}

void coli_gemm_float_avx2(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                          size_t ldy, int row0, int row1)
{
	switch (w->dtype) { /* a copy of the tiles a type */
	case COLI_DTYPE_F32:
		gemm_float(COLI_DTYPE_F32, w, x, S, y, ldy, row0, row1);
		return;
	case COLI_DTYPE_F16:
		gemm_float(COLI_DTYPE_F16, w, x, S, y, ldy, row0, row1);
		return;
	default:
		gemm_float(COLI_DTYPE_BF16, w, x, S, y, ldy, row0, row1);
		return;
	}
}
