/*
 * tests/cpu/swiglu_oai.c — coli_swiglu_oai, gpt-oss's clamped SwiGLU
 * (transformers' GptOssExperts._apply_gate): h = (clamp(u, -L, L) + 1) *
 * g' * sigmoid(alpha g'), g' = min(g, L).
 *
 * Over a sweep of g and u in [-3L, 3L] and random pairs: every h within 4e-6
 * (relative to max(|h|, 1e-30)) of the same formula in double (2e-6 seen, at
 * g ~ -20 where coli_expf(34)'s own error shows); the clamps
 * exact: g above L gives the bits of g = L, u above L those of u = L, u
 * below -L those of u = -L (so a device twin has one clamp to reproduce, not
 * a rounding); h written over g (the engine's in-place use) equal to h in a
 * separate buffer. Two (alpha, limit) pairs: gpt-oss's (1.702, 7) and the
 * fixture's (1.702, 0.25).
 */
#include <math.h>

#include "helpers.h"

static double ref(double g, double u, double alpha, double lim)
{
	double gc = g < lim ? g : lim, uc = u < -lim ? -lim : u > lim ? lim : u;

	return (uc + 1.0) * gc / (1.0 + exp(-gc * alpha));
}

static int check(float alpha, float lim)
{
	enum { N = 40000 };
	float *g = malloc(4 * N), *u = malloc(4 * N), *h = malloc(4 * N), *c = malloc(4 * N);
	float *cu = malloc(4 * N), *ch = malloc(4 * N);
	double worst = 0;
	int fails = 0;

	for (int i = 0; i < N; i++) {
		if (i < N / 2) { /* the sweep: g across, u stepping more slowly */
			g[i] = -3 * lim + 6 * lim * (float)(i % 200) / 199;
			u[i] = -3 * lim + 6 * lim * (float)(i / 200) / 99;
		} else {
			g[i] = 3 * lim * rng_uniform();
			u[i] = 3 * lim * rng_uniform();
		}
	}
	poison(h, N);
	coli_swiglu_oai(g, u, h, N, alpha, lim);
	for (int i = 0; i < N; i++) {
		double want = ref(g[i], u[i], alpha, lim), e = fabs(h[i] - want);
		double rel = e / (fabs(want) > 1e-30 ? fabs(want) : 1e-30);

		worst = rel > worst ? rel : worst;
		if (!(rel <= 4e-6) && fails++ < 3)
			fprintf(stderr, "alpha %g limit %g: g %a u %a: h %a, double %a\n", alpha,
			        lim, g[i], u[i], h[i], want);
		/* the clamps: the clamped argument's bits */
		c[i] = g[i] > lim ? lim : g[i];
		cu[i] = u[i] > lim ? lim : u[i] < -lim ? -lim : u[i];
	}
	coli_swiglu_oai(c, cu, ch, N, alpha, lim);
	if (memcmp(h, ch, 4 * (size_t)N)) {
		fprintf(stderr, "alpha %g limit %g: clamped arguments give other bits\n", alpha,
		        lim);
		fails++;
	}
	memcpy(c, g, 4 * (size_t)N);
	coli_swiglu_oai(c, u, c, N, alpha, lim); /* in place, as core/model/act.c */
	if (memcmp(h, c, 4 * (size_t)N)) {
		fprintf(stderr, "alpha %g limit %g: h over g differs\n", alpha, lim);
		fails++;
	}
	printf("alpha %g limit %g: %d values, max relative error %.3g vs double, clamps exact\n",
	       alpha, lim, N, worst);
	free(g), free(u), free(h), free(c), free(cu), free(ch);
	return fails;
}

int main(void)
{
	int fails = check(1.702f, 7.0f) + check(1.702f, 0.25f);

	return fails ? 1 : 0;
}
