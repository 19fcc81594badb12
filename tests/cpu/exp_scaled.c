/*
 * tests/cpu/exp_scaled.c — cpu/ coli_exp_scaled (the sampler's weights):
 * within 2 ulp of libm's expf over the range the sampler feeds it (x - m in
 * [-104, 0], scale 0.5..2), exactly 0 below exp's range, and the same bits
 * on every ISA this machine has (the AVX2 form is the scalar steps eight at
 * a time), tails of every length included.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

int main(void)
{
	enum { N = 200003 };
	static const float scales[] = {1.0f, 0.5f, 2.0f, 1.0f / 0.7f};
	float *x = malloc(sizeof(float) * N), *w = malloc(sizeof(float) * N);
	float *ref = malloc(sizeof(float) * N);
	enum coli_cpu_isa best = coli_cpu_isa();
	int fails = 0;

	for (int i = 0; i < N; i++) /* x - m from 0 down to -104, some exact zeros */
		x[i] = i % 1000 == 0 ? 3.0f : 3.0f - 104.0f * (float)i / N;
	for (size_t k = 0; k < sizeof(scales) / sizeof(scales[0]); k++) {
		double worst = 0;
		long zeros_bad = 0;

		coli_cpu_isa_force(best);
		coli_exp_scaled(x, N, 3.0f, scales[k], w);
		for (int i = 0; i < N; i++) {
			float v = (x[i] - 3.0f) * scales[k], e = expf(v);
			double ulp = nextafterf(e, INFINITY) - e;

			if (v < -87.33654f) {
				zeros_bad += w[i] != 0.0f;
				continue;
			}
			if (e > 1e-37f && fabs((double)w[i] - e) / ulp > worst)
				worst = fabs((double)w[i] - e) / ulp;
		}
		printf("scale %.3f: max %.2f ulp from expf, %ld underflows not 0 (%s)\n", scales[k],
		       worst, zeros_bad, coli_cpu_isa_name(best));
		fails += worst > 2.0 || zeros_bad;
		for (int isa = COLI_CPU_ISA_SCALAR; isa < (int)best; isa++) {
			if (coli_cpu_isa_force((enum coli_cpu_isa)isa))
				continue;
			for (int n = 1; n <= 17; n++) { /* tails */
				coli_exp_scaled(x + 5, n, 3.0f, scales[k], ref);
				fails += memcmp(ref, w + 5, sizeof(float) * n) != 0;
			}
			coli_exp_scaled(x, N, 3.0f, scales[k], ref);
			if (memcmp(ref, w, sizeof(float) * N)) {
				printf("FAIL scale %.3f: %s and %s differ\n", scales[k],
				       coli_cpu_isa_name((enum coli_cpu_isa)isa),
				       coli_cpu_isa_name(best));
				fails++;
			}
		}
	}
	coli_cpu_isa_force(best);
	free(x), free(w), free(ref);
	printf("%d failed\n", fails);
	return fails ? 1 : 0;
}
