/*
 * cpu/ops_avx2.c — AVX2 forms of cpu/ops.c's elementwise ops that have one:
 * eight lanes of exactly the scalar steps (cpu/ops.c coli_exp_scaled_ref), so
 * the bits do not depend on the ISA.
 */
#include <immintrin.h>

#include "cpu/cpu_internal.h"

void coli_exp_scaled_avx2(const float *x, int n, float m, float s, float *w)
{
	const __m256 vm = _mm256_set1_ps(m), vs = _mm256_set1_ps(s);
	const __m256 lo = _mm256_set1_ps(COLI_EXP_LO), l2e = _mm256_set1_ps(COLI_EXP_LOG2E);
	const __m256 c1 = _mm256_set1_ps(COLI_EXP_C1), c2 = _mm256_set1_ps(COLI_EXP_C2);
	const __m256 one = _mm256_set1_ps(1.0f);
	int i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vs);
		const __m256 under = _mm256_cmp_ps(v, lo, _CMP_LT_OQ);
		__m256 fx, z, y;
		__m256i e;

		v = _mm256_max_ps(v, lo);
		fx = _mm256_round_ps(_mm256_mul_ps(v, l2e),
		                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
		v = _mm256_fnmadd_ps(fx, c1, v);
		v = _mm256_fnmadd_ps(fx, c2, v);
		z = _mm256_mul_ps(v, v);
		y = _mm256_set1_ps(COLI_EXP_P0);
		y = _mm256_fmadd_ps(y, v, _mm256_set1_ps(COLI_EXP_P1));
		y = _mm256_fmadd_ps(y, v, _mm256_set1_ps(COLI_EXP_P2));
		y = _mm256_fmadd_ps(y, v, _mm256_set1_ps(COLI_EXP_P3));
		y = _mm256_fmadd_ps(y, v, _mm256_set1_ps(COLI_EXP_P4));
		y = _mm256_fmadd_ps(y, v, _mm256_set1_ps(COLI_EXP_P5));
		y = _mm256_add_ps(_mm256_fmadd_ps(y, z, v), one);
		e = _mm256_slli_epi32(
		    _mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
		y = _mm256_andnot_ps(under, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
		_mm256_storeu_ps(w + i, y);
	}
	if (i < n)
		coli_exp_scaled_ref(x + i, n - i, m, s, w + i);
}

/* h = g / (1 + coli_expf(-g)) * u, coli_expf's steps (cpu/ops.c) eight lanes
 * at a time: NaN passes through, above 88.7 inf, below -87 zero, else floor
 * of x * log2e + 0.5, the two-part fma reduction, the degree-7 fma Horner,
 * 2^n with n = 128 taken as 2 * 2^127. fma and floor are exact IEEE steps,
 * so the lanes are the scalar bits; one division and one multiply, in the
 * scalar order. */
void coli_silu_mul_avx2(const float *g, const float *u, float *h, int n)
{
	static const float c[7] = {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f,
	                           0.5f,          1.0f,          1.0f};
	const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
	const __m256 hi = _mm256_set1_ps(88.7f), lo = _mm256_set1_ps(-87.0f);
	const __m256 l2e = _mm256_set1_ps(COLI_EXPF_LOG2E), c1 = _mm256_set1_ps(COLI_EXPF_LN2_HI);
	const __m256 c2 = _mm256_set1_ps(COLI_EXPF_LN2_LO), n127 = _mm256_set1_ps(127.0f);
	const __m256 sign = _mm256_set1_ps(-0.0f);
	int i = 0;

	for (; i + 8 <= n; i += 8) {
		const __m256 vg = _mm256_loadu_ps(g + i), x = _mm256_xor_ps(vg, sign);
		__m256 nn, mn, r, p, big, e;
		__m256i bits;

		nn = _mm256_floor_ps(_mm256_add_ps(_mm256_mul_ps(x, l2e), half));
		mn = _mm256_xor_ps(nn, sign);
		r = _mm256_fmadd_ps(mn, c1, x);
		r = _mm256_fmadd_ps(mn, c2, r);
		p = _mm256_set1_ps(1.0f / 5040.0f);
		for (int k = 0; k < 7; k++)
			p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c[k]));
		big = _mm256_cmp_ps(nn, n127, _CMP_GT_OQ); /* n = 128: p * 2, n - 1 */
		p = _mm256_blendv_ps(p, _mm256_add_ps(p, p), big);
		nn = _mm256_blendv_ps(nn, _mm256_sub_ps(nn, one), big);
		bits = _mm256_slli_epi32(
		    _mm256_add_epi32(_mm256_cvttps_epi32(nn), _mm256_set1_epi32(127)), 23);
		e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
		/* the range checks, in the scalar order: x < -87 -> 0, x > 88.7 ->
		 * inf, NaN -> x (the compares are false for NaN) */
		e = _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
		e = _mm256_blendv_ps(e, _mm256_set1_ps(__builtin_inff()),
		                     _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
		e = _mm256_blendv_ps(e, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
		_mm256_storeu_ps(h + i, _mm256_mul_ps(_mm256_div_ps(vg, _mm256_add_ps(one, e)),
		                                      _mm256_loadu_ps(u + i)));
	}
	if (i < n)
		coli_silu_mul_ref(g + i, u + i, h + i, n - i);
}
