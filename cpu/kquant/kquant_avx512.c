/*
 * cpu/kquant/kquant_avx512.c — the block types' kernels for AVX-512 VNNI
 * (cpu/kquant/kquant_simd.h has them; this file picks the dot): four u8 x s8
 * products summed into int32 by one vpdpbusd on 256-bit registers (VL),
 * which never saturates. Compiled with the AVX-512 flags, called after the
 * dispatcher's cpuid check.
 */
#include <errno.h>

#define DOTACC(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#include "cpu/kquant/kquant_simd.h"

int coli_kq_gemv_avx512(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                        int row1)
{
	return kq_gemv(w, x, y, row0, row1);
}

int coli_kq_gemm_avx512(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                        int ldy, int row0, int row1)
{
	return kq_gemm(w, x, S, y, (size_t)ldy, row0, row1);
}
