/*
 * tests/cpu/quant_mse.c — Q4_0 with a searched scale (COLI_ROUND_MSE, what
 * coli convert writes) against GGUF's reference rounding: every block's
 * squared error must be no larger (the search includes GGUF's scale), the
 * blocks must decode with the plain Q4_0 rule, and on normal and heavy-tailed
 * data the overall error must drop. Prints both relative RMS errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

static uint64_t g_s = 12345;

static double unif(void)
{
	g_s = g_s * 6364136223846793005ULL + 1442695040888963407ULL;
	return ((g_s >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(void)
{
	return sqrt(-2 * log(unif())) * cos(6.283185307179586 * unif());
}

int main(void)
{
	const int R = 256, K = 1024, nb = K / 32;
	float *x = malloc(sizeof(float) * R * K), *a = malloc(sizeof(float) * K),
	      *b = malloc(sizeof(float) * K);
	size_t bytes = coli_dtype_mat_bytes(COLI_DTYPE_Q4_0, R, K);
	void *qg = malloc(bytes), *qm = malloc(bytes);
	int fails = 0;

	for (int dist = 0; dist < 2; dist++) {
		struct coli_mat mg, mm;
		double eg = 0, em = 0, ss = 0;
		long worse = 0;

		for (int i = 0; i < R * K; i++) /* normal, or a heavy-tailed scale mixture */
			x[i] = (float)(dist == 0 ? normal() : normal() * exp(0.75 * normal()));
		if (coli_quantize_mat_ex(COLI_DTYPE_Q4_0, x, R, K, qg, COLI_ROUND_GGUF) ||
		    coli_quantize_mat_ex(COLI_DTYPE_Q4_0, x, R, K, qm, COLI_ROUND_MSE))
			return 1;
		coli_mat_view(&mg, COLI_DTYPE_Q4_0, R, K, qg);
		coli_mat_view(&mm, COLI_DTYPE_Q4_0, R, K, qm);
		for (int r = 0; r < R; r++) {
			coli_mat_row_f32(&mg, r, a);
			coli_mat_row_f32(&mm, r, b);
			for (int blk = 0; blk < nb; blk++) {
				double bg = 0, bm = 0;

				for (int j = blk * 32; j < blk * 32 + 32; j++) {
					double x0 = x[(size_t)r * K + j];

					bg += (a[j] - x0) * (a[j] - x0);
					bm += (b[j] - x0) * (b[j] - x0);
					ss += x0 * x0;
				}
				/* the fp16 scale makes both inexact; allow a rounding's worth */
				worse += bm > bg * (1 + 1e-6) + 1e-12;
				eg += bg;
				em += bm;
			}
		}
		printf("%-12s Q4_0 relative RMS error: GGUF rounding %.4f, searched scale %.4f "
		       "(%.1f%% lower); blocks worse: %ld of %d\n",
		       dist ? "heavy-tailed" : "normal", sqrt(eg / ss), sqrt(em / ss),
		       100 * (1 - sqrt(em / eg)), worse, R * nb);
		if (worse || !(em < eg))
			fails++;
	}
	free(x), free(a), free(b), free(qg), free(qm);
	return fails != 0;
}
