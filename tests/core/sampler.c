/*
 * tests/core/sampler.c — core/text/sampler.c against a reference written here the
 * slow, obvious way (double softmax of logits / T, a full descending sort,
 * top-k, top-p prefix): for each setting no token outside the reference's
 * kept set is drawn, and the frequencies fit its probabilities (tokens that
 * expect < 5 of the draws pooled in one cell): chi-square below
 * dof + 6 sqrt(2 dof) + 10
 * (a one-in-millions excess for a right sampler; a draw walking the wrong
 * list or mass lands in the thousands). Greedy ties go to the lowest id; one
 * seed gives one sequence, another seed another. A vocabulary of Qwen's
 * size (152k) takes the paths that look only at the tokens that can be kept
 * (top-k from the block maxima or within d T of the max, top-p within d T, d
 * doubled when the mass lies deeper; a nucleus of thousands by the weights'
 * bits); over the engine's thread pool
 * (coli_sampler_pick_pool) the draws are the same, id for id.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_internal.h"

static const float *g_l; /* for the reference's sort */

static int ref_cmp(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	if (g_l[x] != g_l[y])
		return g_l[x] < g_l[y] ? 1 : -1;
	return x - y;
}

/* The reference: probabilities over the vocabulary (0 outside the kept set). */
static void reference(const float *l, int V, float T, int top_k, float top_p, double *p)
{
	int *ord = malloc(sizeof(int) * V), n = V;
	double sum = 0, mass = 0;

	for (int i = 0; i < V; i++)
		ord[i] = i, p[i] = 0;
	g_l = l;
	qsort(ord, V, sizeof(int), ref_cmp);
	if (top_k > 0 && top_k < V)
		n = top_k;
	for (int i = 0; i < n; i++)
		sum += exp((l[ord[i]] - (double)l[ord[0]]) / T);
	if (top_p < 1) {
		int keep = 0;

		while (keep < n && mass < top_p * sum)
			mass += exp((l[ord[keep++]] - (double)l[ord[0]]) / T);
		n = keep;
		sum = mass;
	}
	for (int i = 0; i < n; i++)
		p[ord[i]] = exp((l[ord[i]] - (double)l[ord[0]]) / T) / sum;
	free(ord);
}

static int check(const char *what, const float *l, int V, float T, int top_k, float top_p,
                 int draws)
{
	double *p = calloc(V, sizeof(double)), chi = 0, pool_p = 0;
	long *got = calloc(V, sizeof(long)), pool_n = 0;
	int fails = 0, dof = -1, outside = 0, kept = 0, fit;
	struct coli_sampler s;

	reference(l, V, T, top_k, top_p, p);
	coli_sampler_init(&s, T, top_p, top_k, 42);
	for (int d = 0; d < draws; d++) {
		int id = coli_sampler_pick(&s, l, V);

		if (id < 0 || id >= V) {
			printf("FAIL %s: drew id %d of %d\n", what, id, V);
			return 1;
		}
		got[id]++;
	}
	for (int i = 0; i < V; i++) {
		if (p[i] == 0) {
			outside += got[i] > 0;
			continue;
		}
		kept++;
		if (draws * p[i] < 5) {
			pool_p += p[i], pool_n += got[i];
			continue;
		}
		dof++;
		chi += (got[i] - draws * p[i]) * (got[i] - draws * p[i]) / (draws * p[i]);
	}
	if (draws * pool_p >= 5) {
		dof++;
		chi += (pool_n - draws * pool_p) * (pool_n - draws * pool_p) / (draws * pool_p);
	}
	fit = dof > 0;
	printf("%-28s kept %4d  drawn outside it %d  ", what, kept, outside);
	if (fit)
		printf("chi2 %.1f, %d dof (bound %.0f)\n", chi, dof,
		       dof + 6 * sqrt(2.0 * dof) + 10);
	else
		printf("(too few draws per token for chi2)\n");
	if (outside || (fit && chi > dof + 6 * sqrt(2.0 * dof) + 10)) {
		printf("FAIL %s\n", what);
		fails++;
	}
	free(p), free(got);
	return fails;
}

int main(void)
{
	enum { V = 200, VF = 4000, VL = 151936 };
	static float l[V], flat[VF], tie[8] = {1, 3, 2, 3, 3, 0, -1, 3};
	uint64_t x = 7;
	struct coli_sampler a, b, c;
	int fails = 0, same_ab = 1, same_ac = 1;

	for (int i = 0; i < V; i++) { /* a peaked head and a long tail, like real logits */
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		l[i] = (float)((x >> 40) % 1000) / 100.0f - (i % 17 == 0 ? 0 : 4);
	}
	for (int i = 0; i < VF; i++) { /* nearly flat: top-p has to look deep */
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		flat[i] = (float)((x >> 40) % 1000) / 1000.0f;
	}
	coli_sampler_init(&a, 0, 1, 0, 1);
	if (coli_sampler_pick(&a, tie, 8) != 1) {
		printf("FAIL greedy: ties must go to the lowest id (1)\n");
		fails++;
	}
	fails += check("T 1", l, V, 1.0f, 0, 1.0f, 100000);
	fails += check("T 0.7", l, V, 0.7f, 0, 1.0f, 100000);
	fails += check("T 1 top-k 5", l, V, 1.0f, 5, 1.0f, 100000);
	fails += check("T 1 top-p 0.5", l, V, 1.0f, 0, 0.5f, 100000);
	fails += check("T 1.3 top-k 40 top-p 0.9", l, V, 1.3f, 40, 0.9f, 100000);
	fails += check("flat, T 1", flat, VF, 1.0f, 0, 1.0f, 30000);
	fails += check("flat, T 1 top-p 0.9", flat, VF, 1.0f, 0, 0.9f, 2000);
	fails += check("ties, T 1 top-k 2", tie, 8, 1.0f, 2, 1.0f, 100000);
	/* a vocabulary of Qwen's size: top-k's candidates from the block
	 * maxima, or (k past the blocks' count) within d T of the max; top-p's
	 * within d T, d doubled when they lack the mass (the tail's below 8 T) */
	float *big = malloc(sizeof(float) * VL), *tail = malloc(sizeof(float) * VL);

	if (!big || !tail)
		return 1;
	for (int i = 0; i < VL; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		big[i] = (float)((x >> 40) % 1000) / 250.0f - (i % 2999 == 0 ? 0 : 12);
		tail[i] = i == 77 ? 10.0f : 1.5f; /* one head, a tail 8.5 below it */
	}
	fails += check("152k, T 0.8 top-k 40", big, VL, 0.8f, 40, 1.0f, 5000);
	fails += check("152k, T 0.8 top-k 1000", big, VL, 0.8f, 1000, 1.0f, 5000);
	fails += check("152k, T 0.8 top-p 0.9", big, VL, 0.8f, 0, 0.9f, 5000);
	fails += check("152k, T 0.8 top-k 50 top-p 0.95", big, VL, 0.8f, 50, 0.95f, 5000);
	fails += check("152k tail, T 1 top-p 0.5", tail, VL, 1.0f, 0, 0.5f, 300);
	/* a nucleus of thousands (its boundary found by the weights' bits) */
	for (int i = 0; i < 20000; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		big[i] = i % 6 ? -30.0f : (float)((x >> 40) % 1000) / 500.0f;
	}
	fails += check("20k, 3334 high, T 1 top-p 0.9", big, 20000, 1.0f, 0, 0.9f, 30000);
	/* the block passes over a pool (coli generate's): the same draws */
	coli_cpu_pool_t *pool = NULL;

	if (coli_cpu_pool_create(4, &pool))
		return 1;
	for (int k = 0; k < 4; k++) {
		static const float tp[4] = {1, 0.9f, 1, 0.95f};
		static const int tk[4] = {0, 0, 40, 50};
		int differ = 0;

		coli_sampler_init(&a, 0.8f, tp[k], tk[k], 11);
		coli_sampler_init(&b, 0.8f, tp[k], tk[k], 11);
		for (int i = 0; i < 200; i++)
			differ += coli_sampler_pick(&a, big, VL) !=
			          coli_sampler_pick_pool(&b, big, VL, pool);
		printf(
		    "152k, T 0.8 top-k %d top-p %.2f: over a pool of 4, %d of 200 draws differ\n",
		    tk[k], tp[k], differ);
		if (differ) {
			printf("FAIL: the pool changed the draws\n");
			fails++;
		}
	}
	coli_cpu_pool_destroy(pool);
	free(big), free(tail);
	coli_sampler_init(&a, 1, 0.9f, 0, 5);
	coli_sampler_init(&b, 1, 0.9f, 0, 5);
	coli_sampler_init(&c, 1, 0.9f, 0, 6);
	for (int i = 0; i < 64; i++) {
		int ia = coli_sampler_pick(&a, l, V);

		same_ab &= ia == coli_sampler_pick(&b, l, V);
		same_ac &= ia == coli_sampler_pick(&c, l, V);
	}
	if (!same_ab || same_ac) {
		printf("FAIL seeds: same seed %s, other seed %s\n", same_ab ? "same" : "differs",
		       same_ac ? "same" : "differs");
		fails++;
	}
	printf("%d failed\n", fails);
	return fails ? 1 : 0;
}
