/*
 * tests/cpu/kquant_encode.c — the block-type encoders (cpu/kquant/kquant_enc.c)
 * on normal and heavy-tailed (Student-t, 3 degrees of freedom) rows, decoded
 * with the gguf package's rules (coli_mat_row_f32 -> cpu/ggml.c):
 *
 *   - each type's relative RMS error is below a stated bound and ordered as
 *     the bits say: q6_k < q5_k < q4_k < q4_0 (coli's searched Q4_0, what
 *     `--quant q4` writes), q5_1 <= q5_0 * 1.05 and q5_0 < q4_0;
 *   - a Q4_K row of values in [1, 2): the format's offset is subtracted
 *     (x = s q - m, m >= 0), so a group's codes span [0, max]; no element
 *     may be off by more than half of max / 15;
 *   - a constant row, a zero row and a row with one huge element encode and
 *     decode to finite values (zero rows exactly to zero);
 *   - a K of partial blocks and a type without an encoder are refused.
 *
 * Prints each type's error.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

static uint64_t g_s = 777;

static double unif(void)
{
	g_s = g_s * 6364136223846793005ULL + 1442695040888963407ULL;
	return ((g_s >> 11) + 0.5) / 9007199254740992.0;
}

static double normal(void)
{
	return sqrt(-2 * log(unif())) * cos(6.283185307179586 * unif());
}

/* relative RMS error of t on x [R][K] */
static double rel_err(enum coli_dtype t, const float *x, int R, int K)
{
	void *q = malloc(coli_dtype_mat_bytes(t, R, K));
	float *y = malloc(sizeof(float) * K);
	struct coli_mat m;
	double e = 0, s = 0;

	if (coli_quantize_mat_ex(t, x, R, K, q, COLI_ROUND_MSE)) {
		printf("FAIL: %s refused a %d x %d matrix\n", coli_dtype_name(t), R, K);
		exit(1);
	}
	coli_mat_view(&m, t, R, K, q);
	for (int r = 0; r < R; r++) {
		coli_mat_row_f32(&m, r, y);
		for (int k = 0; k < K; k++) {
			double d = (double)y[k] - x[(size_t)r * K + k];

			e += d * d, s += (double)x[(size_t)r * K + k] * x[(size_t)r * K + k];
		}
	}
	free(q), free(y);
	return sqrt(e / s);
}

int main(void)
{
	enum { R = 64, K = 1024 };
	const enum coli_dtype ts[] = {COLI_DTYPE_Q6_K, COLI_DTYPE_Q5_K, COLI_DTYPE_Q4_K,
	                              COLI_DTYPE_Q5_1, COLI_DTYPE_Q5_0, COLI_DTYPE_Q4_0};
	/* bounds on the relative RMS error, normal rows (heavy tails: x 1.6; measured 0.0165,
	 * 0.0358, 0.0709, 0.0337, 0.0399, 0.0807) */
	const double bound[] = {0.018, 0.038, 0.075, 0.036, 0.042, 0.085};
	float *x = malloc(sizeof(float) * R * K), *y = malloc(sizeof(float) * K);
	void *q = malloc(coli_dtype_mat_bytes(COLI_DTYPE_Q6_K, R, K) * 2);
	int fails = 0;

	for (int dist = 0; dist < 2; dist++) {
		double e[6];

		for (int i = 0; i < R * K; i++) {
			double v = normal();

			if (dist) { /* Student-t(3): normal / sqrt(chi2(3) / 3) */
				double c = 0;

				for (int j = 0; j < 3; j++) {
					double n = normal();

					c += n * n;
				}
				v /= sqrt(c / 3);
			}
			x[i] = (float)(0.02 * v);
		}
		for (int i = 0; i < 6; i++) {
			e[i] = rel_err(ts[i], x, R, K);
			printf("  %-7s %-5s relative RMS error %.4f (bound %.3f)\n",
			       dist ? "t(3)" : "normal", coli_dtype_name(ts[i]), e[i],
			       bound[i] * (dist ? 1.6 : 1.0));
			if (!(e[i] < bound[i] * (dist ? 1.6 : 1.0)))
				printf("FAIL: %s above its bound\n", coli_dtype_name(ts[i])),
				    fails++;
		}
		if (!(e[0] < e[1] && e[1] < e[2] && e[2] < e[5] && e[4] < e[5] &&
		      e[3] <= e[4] * 1.05))
			printf("FAIL: the errors are not ordered as the bits\n"), fails++;
	}
	/* an all-positive Q4_K row: codes span [0, max], half a step is max / 30 */
	for (int k = 0; k < 256; k++)
		x[k] = 1.0f + (float)k / 256.0f;
	if (coli_kq_encode_row(COLI_DTYPE_Q4_K, x, 256, q))
		printf("FAIL: q4_k refused a positive row\n"), fails++;
	else {
		struct coli_mat m;
		double worst = 0;

		coli_mat_view(&m, COLI_DTYPE_Q4_K, 1, 256, q);
		coli_mat_row_f32(&m, 0, y);
		for (int k = 0; k < 256; k++)
			worst = fabs(y[k] - x[k]) > worst ? fabs(y[k] - x[k]) : worst;
		printf("  positive row q4_k max |error| %.4f\n", worst);
		if (!(worst <= 2.0 / 30 * 1.01))
			printf("FAIL: q4_k positive row error %.4f\n", worst), fails++;
	}
	/* degenerate rows: constant, zero, one huge element */
	for (int c = 0; c < 3; c++)
		for (size_t i = 0; i < sizeof(ts) / sizeof(ts[0]) - 1; i++) {
			struct coli_mat m;

			for (int k = 0; k < 256; k++)
				x[k] = c == 0 ? 0.5f : c == 1 ? 0.0f : (k == 77 ? 3e4f : 1e-3f);
			if (coli_kq_encode_row(ts[i], x, 256, q)) {
				printf("FAIL: %s refused a degenerate row\n",
				       coli_dtype_name(ts[i]));
				fails++;
				continue;
			}
			coli_mat_view(&m, ts[i], 1, 256, q);
			coli_mat_row_f32(&m, 0, y);
			for (int k = 0; k < 256; k++)
				if (!isfinite(y[k]) || (c == 1 && y[k] != 0.0f)) {
					printf("FAIL: %s row kind %d decodes element %d to %g\n",
					       coli_dtype_name(ts[i]), c, k, y[k]);
					fails++;
					break;
				}
		}
	if (coli_kq_encode_row(COLI_DTYPE_Q4_K, x, 288, q) != -22 ||
	    coli_kq_encode_row(COLI_DTYPE_Q2_K, x, 256, q) != -22)
		printf("FAIL: a partial block or a type without an encoder was accepted\n"),
		    fails++;
	free(x), free(y), free(q);
	if (!fails)
		printf("kquant encoders ok\n");
	return fails != 0;
}
