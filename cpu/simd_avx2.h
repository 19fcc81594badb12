/*
 * cpu/simd_avx2.h — AVX2 steps the *_avx2.c files share (compiled with
 * -mavx2 -mfma: include it only there): coli_expf's bits eight lanes at a
 * time, and bf16 and q8 values widened to fp32.
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

#endif
