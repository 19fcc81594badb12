/*
 * tests/cpu/route_sigmoid.c — cpu/ops.c coli_route_sigmoid (GLM-4.5's
 * router) against a reference written here another way: every expert ranked
 * by sorting (score descending, id ascending), groups ranked the same way by
 * the sum of their two best choice scores. Random logits and biases over
 * many (E, K, n_group, topk_group), some drawn from a few values so that
 * ties are common; expert ids and weights must be equal bit for bit. Then
 * four cases by hand: the bias chooses but does not weigh, a pruned group's
 * expert is never chosen even when every kept choice score is negative
 * (transformers 5 masks with -inf), ties go to the lower id, and the weights
 * are renormalised and scaled.
 */
#include "helpers.h"

struct rank {
	float v;
	int id;
};

/* descending value, then ascending id */
static int cmp_rank(const void *a, const void *b)
{
	const struct rank *x = a, *y = b;

	if (x->v != y->v)
		return x->v > y->v ? -1 : 1;
	return x->id - y->id;
}

static void reference(const float *logit, const float *bias, int E, int K, int G, int TG, int norm,
                      float scale, int *sel, float *w)
{
	float p[COLI_ROUTE_MAX_E], c[COLI_ROUTE_MAX_E];
	struct rank r[COLI_ROUTE_MAX_E], gr[COLI_ROUTE_MAX_E];
	int gs = E / G, keep[COLI_ROUTE_MAX_E] = {0};

	for (int i = 0; i < E; i++) {
		p[i] = 1.0f / (1.0f + expf(-logit[i]));
		c[i] = bias ? p[i] + bias[i] : p[i];
	}
	for (int g = 0; g < G; g++) {
		for (int i = 0; i < gs; i++)
			r[i] = (struct rank){c[g * gs + i], i};
		qsort(r, (size_t)gs, sizeof(r[0]), cmp_rank);
		gr[g] = (struct rank){r[0].v + r[1].v, g};
	}
	qsort(gr, (size_t)G, sizeof(gr[0]), cmp_rank);
	for (int j = 0; j < (G > 1 ? TG : G); j++)
		keep[gr[j].id] = 1;
	for (int i = 0; i < E; i++)
		r[i] = (struct rank){keep[i / gs] ? c[i] : -INFINITY, i};
	qsort(r, (size_t)E, sizeof(r[0]), cmp_rank);
	float sum = 0;

	for (int j = 0; j < K; j++) {
		sel[j] = r[j].id;
		w[j] = p[r[j].id];
		sum += w[j];
	}
	for (int j = 0; j < K; j++) {
		if (norm)
			w[j] /= sum + 1e-20f;
		w[j] *= scale;
	}
}

static int route(const float *logit, const float *bias, int E, int K, int G, int TG, int norm,
                 float scale, int *sel, float *w)
{
	float p[COLI_ROUTE_MAX_E];
	const struct coli_route_sig r = {bias, G, TG, norm, scale};

	memcpy(p, logit, sizeof(float) * (size_t)E);
	coli_route_sigmoid(p, E, K, &r, sel, w);
	return 0;
}

static int random_cases(void)
{
	static const int shapes[][4] = {
	    /* E, K, n_group, topk_group */
	    {8, 2, 1, 1},   {16, 3, 4, 2},  {16, 4, 8, 3},  {64, 6, 8, 4},  {128, 8, 8, 4},
	    {160, 8, 1, 1}, {256, 8, 8, 4}, {384, 8, 1, 1}, {32, 1, 16, 1}, {4096, 16, 64, 8}};
	float logit[COLI_ROUTE_MAX_E], bias[COLI_ROUTE_MAX_E], w[16], rw[16];
	int sel[16], rsel[16], fails = 0, n = 0;

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (int rep = 0; rep < 60; rep++) {
			int E = shapes[s][0], K = shapes[s][1], G = shapes[s][2], TG = shapes[s][3];
			int coarse = rep % 3 == 0, nob = rep % 5 == 1, norm = rep % 2;
			float scale = rep % 4 ? 2.5f : 1.0f;

			for (int i = 0; i < E; i++) {
				/* coarse: a few values, so scores and group sums tie */
				logit[i] =
				    coarse ? (float)(rng_u64() % 4) - 1.5f : 3 * rng_normalish();
				bias[i] = coarse ? 0.25f * (float)(rng_u64() % 3)
				                 : 0.3f * rng_normalish();
			}
			route(logit, nob ? NULL : bias, E, K, G, TG, norm, scale, sel, w);
			reference(logit, nob ? NULL : bias, E, K, G, TG, norm, scale, rsel, rw);
			n++;
			if (memcmp(sel, rsel, sizeof(int) * K) ||
			    memcmp(w, rw, sizeof(float) * K)) {
				if (fails++ < 5)
					printf(
					    "FAIL E %d K %d groups %d/%d rep %d: expert %d w %.9g, "
					    "reference %d w %.9g\n",
					    E, K, TG, G, rep, sel[0], w[0], rsel[0], rw[0]);
			}
		}
	printf("%d random routings, %d differ from the reference\n", n, fails);
	return fails;
}

static int check(const char *what, int ok)
{
	printf("%-58s %s\n", what, ok ? "ok" : "FAIL");
	return !ok;
}

int main(void)
{
	int fails = random_cases(), sel[4];
	float w[4];

	{ /* logits equal, bias picks 5 and 2; their weights are sigmoid(0) */
		float lg[8] = {0}, b[8] = {0, 0, 0.2f, 0, 0, 0.3f, 0, 0};

		route(lg, b, 8, 2, 1, 1, 0, 1.0f, sel, w);
		fails += check("bias selects, weights are the unbiased scores",
		               sel[0] == 5 && sel[1] == 2 && w[0] == 0.5f && w[1] == 0.5f);
	}
	{ /* group 1 (experts 4..7) wins; its choice scores are all negative,
	   * group 0's would be 0 under a 0-mask: -inf never picks them */
		float lg[8] = {-9, -9, -9, -9, 0, 0, 0, 0};
		float b[8] = {-2, -2, -2, -2, -0.8f, -0.6f, -0.7f, -0.9f};

		route(lg, b, 8, 3, 2, 1, 1, 1.0f, sel, w);
		fails += check("a pruned group's experts are never chosen (-inf mask)",
		               sel[0] == 5 && sel[1] == 6 && sel[2] == 4);
	}
	{ /* all equal: the lowest ids, groups too (groups 0 and 1 of 4) */
		float lg[8] = {0};

		route(lg, NULL, 8, 3, 4, 2, 1, 1.0f, sel, w);
		fails += check("ties go to the lower id, groups and experts",
		               sel[0] == 0 && sel[1] == 1 && sel[2] == 2);
	}
	{ /* two experts of sigmoid 0.5 and 0.5 renormalised: 0.5 each, x 2.5 */
		float lg[4] = {0, 0, -30, -30};

		route(lg, NULL, 4, 2, 1, 1, 1, 2.5f, sel, w);
		fails += check("renormalised then scaled by routed_scale",
		               sel[0] == 0 && sel[1] == 1 && w[0] == 1.25f && w[1] == 1.25f);
	}
	return fails != 0;
}
