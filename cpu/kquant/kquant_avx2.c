/*
 * cpu/kquant/kquant_avx2.c — the block types' kernels for AVX2 (cpu/kquant/kquant_simd.h
 * has them; this file picks the dot): four u8 x s8 products summed as
 * vpmaddubsw (pairs, exact in int16 for these operands) then vpmaddwd with
 * ones. Compiled with -mavx2 -mfma -mf16c, called after the dispatcher's
 * cpuid check.
 */
#include <errno.h>

#define DOTACC(acc, u, s)                                                                          \
	_mm256_add_epi32((acc),                                                                    \
	                 _mm256_madd_epi16(_mm256_maddubs_epi16((u), (s)), _mm256_set1_epi16(1)))
/* a dot into int32 costs two instructions here: units summed in int16 first */
#define KQ_HADD16
#include "cpu/kquant/kquant_simd.h"

int coli_kq_gemv_avx2(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                      int row1)
{
	return kq_gemv(w, x, y, row0, row1);
}

int coli_kq_gemm_avx2(const struct coli_mat *w, const struct coli_act *x, int S, float *y, int ldy,
                      int row0, int row1)
{
	const int r = S >= COLI_PANEL_MIN_S
	                  ? coli_gemm_panel_avx2(w, x, S, y, (size_t)ldy, row0, row1)
	                  : row0;

	return kq_gemm(w, x, S, y + (r - row0), (size_t)ldy, r, row1);
}
