/*
 * cpu/simd_avx2.h — AVX2 steps the *_avx2.c files share (and the *_avx512.c
 * ones, whose flags include AVX2's; include it only there): coli_expf's bits
 * eight lanes at a time, bf16 and q8 values widened to fp32, the GEMVs'
 * canonical fold of 16 lanes, and the attention's fold of eight heads'
 * dot-product chains.
 */
#ifndef COLI_CPU_SIMD_AVX2_H
#define COLI_CPU_SIMD_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* coli_expf's steps (cpu/ops.c) eight lanes at a time: NaN passes through,
 * above 88.7 inf, below -87 zero, else floor of x * log2e + 0.5, the
 * two-part fma reduction, the degree-7 fma Horner, 2^n with n = 128 taken as
 * 2 * 2^127. fma and floor are exact IEEE steps, so the lanes are the scalar
 * bits. */
static inline __m256 expf8(__m256 x)
{
	static const float c[7] = {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f,
	                           0.5f,          1.0f,          1.0f};
	const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
	const __m256 sign = _mm256_set1_ps(-0.0f);
	__m256 nn, mn, r, p, big, e;
	__m256i bits;

	nn =
	    _mm256_floor_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(COLI_EXPF_LOG2E)), half));
	mn = _mm256_xor_ps(nn, sign);
	r = _mm256_fmadd_ps(mn, _mm256_set1_ps(COLI_EXPF_LN2_HI), x);
	r = _mm256_fmadd_ps(mn, _mm256_set1_ps(COLI_EXPF_LN2_LO), r);
	p = _mm256_set1_ps(1.0f / 5040.0f);
	for (int k = 0; k < 7; k++)
		p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c[k]));
	big = _mm256_cmp_ps(nn, _mm256_set1_ps(127.0f), _CMP_GT_OQ); /* n = 128: p * 2, n - 1 */
	p = _mm256_blendv_ps(p, _mm256_add_ps(p, p), big);
	nn = _mm256_blendv_ps(nn, _mm256_sub_ps(nn, one), big);
	bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(nn), _mm256_set1_epi32(127)),
	                         23);
	e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
	/* the range checks, in the scalar order: x < -87 -> 0, x > 88.7 -> inf,
	 * NaN -> x (the compares are false for NaN) */
	e = _mm256_blendv_ps(e, _mm256_setzero_ps(),
	                     _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ));
	e = _mm256_blendv_ps(e, _mm256_set1_ps(__builtin_inff()),
	                     _mm256_cmp_ps(x, _mm256_set1_ps(88.7f), _CMP_GT_OQ));
	return _mm256_blendv_ps(e, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

/* Eight bf16 values as fp32: the bits shifted up (exact). */
static inline __m256 bf16x8(const uint16_t *b)
{
	return _mm256_castsi256_ps(
	    _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)b)), 16));
}

/* Eight q8 values times their scale as fp32: the KV cache's decode, one
 * rounded product (cpu/kvq.c). */
static inline __m256 q8x8(const signed char *q, __m256 scale)
{
	return _mm256_mul_ps(
	    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)q))), scale);
}

/* The canonical fold of 16 lanes held as a0 = lanes 0..7, a1 = 8..15 (cpu.h):
 * h=8 adds a0 and a1, h=4 the 128-bit halves, h=2 and h=1 finish in one
 * xmm. */
static inline float fold16(__m256 a0, __m256 a1)
{
	__m256 v8 = _mm256_add_ps(a0, a1);
	__m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
	__m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
	__m128 v1 = _mm_add_ss(v2, _mm_movehdup_ps(v2));

	return _mm_cvtss_f32(v1);
}

/* The eight heads' sums of eight lanes each, (q . k chains in lanes 0..7),
 * as one vector of eight heads: per head ((0 + 4) + (2 + 6)) + ((1 + 5) +
 * (3 + 7)), the scalar's fold, by a transpose that adds as it goes. */
static inline __m256 fold8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
                           __m256 a6, __m256 a7)
{
	/* [lanes 0-3 + lanes 4-7 of head 2h | of head 2h + 1] (written out:
	 * a loop over an array of vectors went through memory) */
#define FOLD_HALVES(x, y)                                                                          \
	_mm256_add_ps(_mm256_permute2f128_ps(x, y, 0x20), _mm256_permute2f128_ps(x, y, 0x31))
	const __m256 c0 = FOLD_HALVES(a0, a1), c1 = FOLD_HALVES(a2, a3), c2 = FOLD_HALVES(a4, a5),
	             c3 = FOLD_HALVES(a6, a7);
#undef FOLD_HALVES
	/* [(0+4)+(2+6), (1+5)+(3+7) of heads 4h, 4h+2 | 4h+1, 4h+3] */
	const __m256 d0 = _mm256_add_ps(_mm256_shuffle_ps(c0, c1, 0x44),
	                                _mm256_shuffle_ps(c0, c1, 0xee)),
	             d1 = _mm256_add_ps(_mm256_shuffle_ps(c2, c3, 0x44),
	                                _mm256_shuffle_ps(c2, c3, 0xee));

	/* heads 0 2 4 6 | 1 3 5 7, then in order */
	return _mm256_permutevar8x32_ps(
	    _mm256_add_ps(_mm256_shuffle_ps(d0, d1, 0x88), _mm256_shuffle_ps(d0, d1, 0xdd)),
	    _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

#endif
