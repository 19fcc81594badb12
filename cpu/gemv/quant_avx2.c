/*
 * cpu/gemv/quant_avx2.c — the AVX2 form of Q4_0's scale search step
 * (coli_q4_block_err_ref in cpu/dtype.c): a block's 32 elements as four
 * vectors, element j in lane j % 8, each lane doing the scalar steps in the
 * scalar order (mul then add, no fma), the lanes folded as the scalar form
 * folds its eight partial sums. Same bits, so `coli convert` writes the same
 * file on every ISA; ~10x fewer instructions than the scalar loop, which was
 * the whole cost of a q4 conversion (docs/quant.md).
 */
#include <immintrin.h>

#include "cpu/cpu_internal.h"

float coli_q4_block_err_avx2(const float *x, float d)
{
	const float dq = coli_fp16_to_f32(coli_f32_to_fp16(d)), id = 1.0f / d;
	const __m256 vid = _mm256_set1_ps(id), vdq = _mm256_set1_ps(dq);
	const __m256 half8 = _mm256_set1_ps(8.5f), eight = _mm256_set1_ps(8.0f);
	const __m256 zero = _mm256_setzero_ps(), fifteen = _mm256_set1_ps(15.0f);
	__m256 l = _mm256_setzero_ps();
	float v[8];

	for (int j = 0; j < COLI_QBLOCK; j += 8) {
		const __m256 xv = _mm256_loadu_ps(x + j);
		__m256 q = _mm256_floor_ps(_mm256_add_ps(_mm256_mul_ps(xv, vid), half8));
		__m256 r;

		/* max_ps(q, 0) is 0 for a NaN q, min_ps(q, 15) 15 for +inf: the
		 * scalar form's tests */
		q = _mm256_min_ps(_mm256_max_ps(q, zero), fifteen);
		r = _mm256_sub_ps(xv, _mm256_mul_ps(vdq, _mm256_sub_ps(q, eight)));
		l = _mm256_add_ps(l, _mm256_mul_ps(r, r));
	}
	_mm256_storeu_ps(v, l);
	return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}
