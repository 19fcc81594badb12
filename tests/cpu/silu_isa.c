/*
 * tests/cpu/silu_isa.c — coli_silu_mul (SwiGLU's silu(g) * u, whose bits the
 * placement invariant needs: the GPU reproduces them) gives the same bits on
 * every ISA this machine has: the AVX2 form against the scalar steps, over a
 * fine sweep of g in [-100, 100], the edges of coli_expf's ranges (-87, 88.7,
 * the n = 128 scaling), random bit patterns (NaNs with payloads, infinities,
 * subnormals, huge values), and tails of every length.
 */
#include <math.h>

#include "helpers.h"

static int same_bits(const float *a, const float *b, int n, const float *g, const char *what)
{
	for (int i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], 4)) {
			fprintf(stderr, "%s: g %a: scalar %a, vector %a\n", what, g[i], a[i], b[i]);
			return 1;
		}
	return 0;
}

int main(void)
{
	enum { N = 1 << 20 };
	float *g = malloc(4 * N), *u = malloc(4 * N), *a = malloc(4 * N), *b = malloc(4 * N);
	enum coli_cpu_isa best = coli_cpu_isa();
	int fails = 0, n = 0;

	if (best < COLI_CPU_ISA_AVX2) {
		printf("skip: this CPU has no AVX2 (the scalar form is the only one)\n");
		return 77;
	}
	for (int i = 0; i < N / 2; i++) /* the sweep */
		g[n++] = -100.0f + 200.0f * (float)i / (N / 2);
	for (float c = -88.0f; c > -90.0f; c -= 0.001f) /* the edges, bit by bit near them */
		g[n++] = c;
	{
		static const float edges[] = {87.0f, -88.7f, -88.72283f, 0.0f,
		                              -0.0f, 1e-30f, -1e-45f};

		for (size_t k = 0; k < sizeof(edges) / sizeof(edges[0]); k++) {
			float v = edges[k];

			for (int s = 0; s < 64; s++) {
				g[n++] = v;
				g[n++] = -v;
				v = nextafterf(v, INFINITY);
			}
		}
	}
	while (n < N) { /* random bit patterns */
		uint32_t bits = (uint32_t)rng_u64();

		memcpy(&g[n++], &bits, 4);
	}
	for (int i = 0; i < N; i++)
		u[i] = 0.5f + (float)(rng_u64() % 1000) / 500.0f;
	coli_cpu_isa_force(COLI_CPU_ISA_SCALAR);
	coli_silu_mul(g, u, a, N);
	coli_cpu_isa_force(best);
	coli_silu_mul(g, u, b, N);
	fails += same_bits(a, b, N, g, "whole");
	for (int len = 0; len < 24; len++) { /* tails */
		memset(b, 0xff, 4 * 32);
		coli_silu_mul(g + 1000 + len, u, b, len);
		coli_cpu_isa_force(COLI_CPU_ISA_SCALAR);
		coli_silu_mul(g + 1000 + len, u, a, len);
		coli_cpu_isa_force(best);
		fails += same_bits(a, b, len, g + 1000 + len, "tail");
	}
	printf("coli_silu_mul: %d values, the vector form %s\n", N,
	       fails ? "DIFFERS from the scalar" : "bit-identical to the scalar");
	free(g), free(u), free(a), free(b);
	return fails ? 1 : 0;
}
