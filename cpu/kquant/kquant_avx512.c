/*
 * cpu/kquant/kquant_avx512.c — the block types' kernels for AVX-512 VNNI
 * (cpu/kquant/kquant_simd.h has them; this file picks the dot): four u8 x s8
 * products summed into int32 by one vpdpbusd on 256-bit registers (VL),
 * which never saturates. Compiled with the AVX-512 flags, called after the
 * dispatcher's cpuid check.
 *
 * A batch of COLI_PANEL_MIN_S activations or more takes the eight-row panel
 * (cpu/gemv/gemm_panel.h in its VNNI form, the same bits) for its whole
 * panels, as AVX2 does: per activation it issues about half the
 * instructions of these row kernels (CPU prefill of a Q4_K_M 30b-shape
 * model, 2 threads of an AVX-512 EPYC: 547 tok/s on the row kernels,
 * 808-820 on AVX2's panel; Q2_K 650-660 on AVX2's panel, 765-791 on VNNI's).
 * Every block type takes the sixteen-row panel (cpu/gemv/gemm_panel16_avx512.c)
 * before it from COLI_PANEL16_MIN_S_KQ activations.
 */
#include <errno.h>

#define DOTACC(acc, u, s) _mm256_dpbusd_epi32((acc), (u), (s))
#define KQ_Q4K_PAIRS /* Q4_K below the panels: two units a vector (kquant_vnni.h) */
#define KQ_Q6K_DOT32 /* Q6_K at one activation: units into int32 (kquant_vnni.h) */
#define KQ_Q2K_ZMM   /* Q2_K at one activation: two units a 512-bit vector (kquant_vnni.h) */
#include "cpu/kquant/kquant_simd.h"

int coli_kq_gemv_avx512(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                        int row1)
{
	return kq_gemv(w, x, y, row0, row1);
}

int coli_kq_gemm_avx512(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                        int ldy, int row0, int row1)
{
	int r = row0;

	if (S >= COLI_PANEL16_MIN_S_KQ) /* sixteen rows a panel first */
		r = coli_gemm_panel16_avx512(w, x, S, y, (size_t)ldy, row0, row1);
	if (S >= COLI_PANEL_MIN_S)
		r = coli_gemm_panel_avx512(w, x, S, y + (r - row0), (size_t)ldy, r, row1);
	return kq_gemm(w, x, S, y + (r - row0), (size_t)ldy, r, row1);
}
