/*
 * cpu/ops_avx2.c — AVX2 forms of cpu/ops.c's ops that have one: eight lanes
 * of exactly the scalar steps (cpu/ops.c coli_exp_scaled_ref, coli_expf,
 * SwiGLU), so the bits do not depend on the ISA. Attention's AVX2 kernels
 * are cpu/attn/attention_avx2.c.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "cpu/simd_avx2.h"

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

/* h = g / (1 + coli_expf(-g)) * u: one division and one multiply, in the
 * scalar order. */
void coli_silu_mul_avx2(const float *g, const float *u, float *h, int n)
{
	const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
	int i = 0;

	for (; i + 8 <= n; i += 8) {
		const __m256 vg = _mm256_loadu_ps(g + i), e = expf8(_mm256_xor_ps(vg, sign));

		_mm256_storeu_ps(h + i, _mm256_mul_ps(_mm256_div_ps(vg, _mm256_add_ps(one, e)),
		                                      _mm256_loadu_ps(u + i)));
	}
	if (i < n)
		coli_silu_mul_ref(g + i, u + i, h + i, n - i);
}
