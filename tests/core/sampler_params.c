/*
 * tests/core/sampler_params.c — the request's sampling values
 * (core/text/sampler_proc.c) against what this test computes itself, in
 * double, from the formulas documented in core/coli.h:
 *
 *   logit_bias     a bias of -100 is never drawn, over 40 seeds and several
 *                  settings (greedy too: the next best is chosen); +5 adds 5
 *   min_p          coli_sampler_apply cuts exactly the tokens whose
 *                  probability after temperature is below min_p * p_max
 *                  (logits chosen with no token within 1e-3 of the cut),
 *                  and draws fit the renormalised rest (chi-square)
 *   penalties      a prompt and a generated history (with repeats) through
 *                  begin / accept: every logit equals repetition (l / r or
 *                  l * r over prompt + generated), then - c f - (c > 0) p
 *                  over the generated counts; others untouched, bit for bit;
 *                  a bias comes before the penalties (vLLM's order)
 *   logprobs       exp(log-softmax) sums to 1 over the vocabulary; a pick's
 *                  logprob and top list are the raw distribution's (a
 *                  full sort here), whatever temperature, bias or penalty
 *   seeds          one seed, every value on: the same 200 ids twice, and
 *                  over the engine's thread pool; another seed differs
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_internal.h"

enum { V = 300 };
static float g_l[V];
static int g_fails;

#define FAIL(...) (printf("FAIL " __VA_ARGS__), printf("\n"), g_fails++)

static uint64_t g_x = 12345;

static double rnd(void) /* [0, 1) */
{
	g_x = g_x * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(g_x >> 11) / 9007199254740992.0;
}

static int cmp_desc(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return g_l[x] != g_l[y] ? (g_l[x] < g_l[y] ? 1 : -1) : x - y;
}

/* Draws from s over l until n; returns how many landed on a token with
 * p[i] == 0, and fills got[V]. */
static int draw_n(struct coli_sampler *s, const float *l, int n, const double *p, long *got)
{
	int outside = 0;

	memset(got, 0, sizeof(long) * V);
	for (int d = 0; d < n; d++) {
		int id = coli_sampler_pick(s, l, V);

		got[id]++;
		outside += p && p[id] == 0;
	}
	return outside;
}

/* chi-square of got against n * p (cells expecting < 5 pooled); 1 if too big */
static int misfit(const long *got, const double *p, int n, double *chi_out)
{
	double chi = 0, pp = 0;
	long pn = 0;
	int dof = -1;

	for (int i = 0; i < V; i++) {
		if (p[i] == 0)
			continue;
		if (n * p[i] < 5) {
			pp += p[i], pn += got[i];
			continue;
		}
		dof++;
		chi += (got[i] - n * p[i]) * (got[i] - n * p[i]) / (n * p[i]);
	}
	if (n * pp >= 5)
		dof++, chi += (pn - n * pp) * (pn - n * pp) / (n * pp);
	*chi_out = chi;
	return dof > 0 && chi > dof + 6 * sqrt(2.0 * dof) + 10;
}

static void test_bias(void)
{
	static const float T[4] = {0, 1, 0.7f, 1.5f};
	static const float P[4] = {1, 1, 0.9f, 1};
	static const int K[4] = {0, 0, 0, 20};
	int ord[V], drawn_banned = 0, plus_ok = 1;
	struct coli_logit_bias b[4];
	struct coli_sampler s;
	float out[V];

	for (int i = 0; i < V; i++)
		ord[i] = i;
	qsort(ord, V, sizeof(int), cmp_desc);
	/* ban the three likeliest, push a middling one up by 5 */
	for (int i = 0; i < 3; i++)
		b[i] = (struct coli_logit_bias){ord[i], -100};
	b[3] = (struct coli_logit_bias){ord[V / 2], 5};
	for (int c = 0; c < 4; c++)
		for (uint64_t seed = 1; seed <= 40; seed++) {
			coli_sampler_init(&s, T[c], P[c], K[c], seed);
			s.bias = b, s.n_bias = 4;
			for (int d = 0; d < 100; d++) {
				int id = coli_sampler_pick(&s, g_l, V);

				drawn_banned += id == ord[0] || id == ord[1] || id == ord[2];
			}
			coli_sampler_end(&s); /* the processed copy pick allocated */
		}
	coli_sampler_init(&s, 0, 1, 0, 1);
	s.bias = b, s.n_bias = 3;
	if (coli_sampler_pick(&s, g_l, V) != ord[3])
		FAIL("bias: greedy with the 3 best banned did not pick the 4th (%d)", ord[3]);
	s.n_bias = 4;
	coli_sampler_apply(&s, g_l, V, out);
	for (int i = 0; i < V; i++) {
		double want = i == ord[0] || i == ord[1] || i == ord[2] ? -INFINITY
		              : i == ord[V / 2]                         ? g_l[i] + 5.0
		                                                        : g_l[i];
		plus_ok &= out[i] == (float)want;
	}
	coli_sampler_end(&s);
	printf("logit_bias: -100 drawn %d times in 16000 draws; +5 and bans applied: %s\n",
	       drawn_banned, plus_ok ? "yes" : "no");
	if (drawn_banned || !plus_ok)
		FAIL("logit_bias");
}

static void test_min_p(void)
{
	static const float T[3] = {1, 0.6f, 1.4f};
	static const float MP[3] = {0.05f, 0.2f, 0.5f};
	double p[V];
	long got[V];
	float out[V];

	for (int c = 0; c < 3; c++) {
		struct coli_sampler s;
		double lmax = -1e30, sum = 0, chi;
		int wrong = 0, kept = 0, outside, near = 0;

		for (int i = 0; i < V; i++)
			lmax = g_l[i] > lmax ? g_l[i] : lmax;
		for (int i = 0; i < V; i++) {
			double r = exp((g_l[i] - lmax) / T[c]); /* p_i / p_max */

			near += fabs(log(r) - log(MP[c])) < 1e-3;
			p[i] = r >= MP[c] ? r : 0;
			sum += p[i];
			kept += p[i] > 0;
		}
		if (near) {
			FAIL("min_p: %d logits within 1e-3 of the cut (change the test's logits)",
			     near);
			continue;
		}
		for (int i = 0; i < V; i++)
			p[i] /= sum;
		coli_sampler_init(&s, T[c], 1, 0, 9);
		s.min_p = MP[c];
		coli_sampler_apply(&s, g_l, V, out);
		for (int i = 0; i < V; i++)
			wrong += p[i] > 0 ? out[i] != g_l[i] : out[i] != -INFINITY;
		outside = draw_n(&s, g_l, 100000, p, got);
		coli_sampler_end(&s);
		printf("min_p %.2f T %.1f: kept %d of %d, %d cut wrongly, drawn outside %d, ",
		       MP[c], T[c], kept, V, wrong, outside);
		if (misfit(got, p, 100000, &chi) | wrong | outside)
			FAIL("min_p (chi2 %.1f)", chi);
		else
			printf("chi2 %.1f\n", chi);
	}
}

static void test_penalties(void)
{
	static const int prompt[6] = {3, 7, 7, 11, 250, 3};
	static const int gen[9] = {7, 40, 40, 40, 12, 250, 12, 299, 40};
	static const float R[3] = {1.3f, 0.8f, 1};
	static const float F[3] = {0.5f, -0.4f, 1.5f}, PR[3] = {0.25f, 1.0f, -2.0f};
	float out[V];

	for (int c = 0; c < 3; c++) {
		struct coli_sampler s;
		double worst = 0;
		int changed_other = 0;

		coli_sampler_init(&s, 1, 1, 0, 1);
		s.repetition_penalty = R[c];
		s.frequency_penalty = F[c];
		s.presence_penalty = PR[c];
		if (coli_sampler_begin(&s, V, prompt, 6)) {
			FAIL("penalties: begin");
			return;
		}
		for (int i = 0; i < 9; i++)
			coli_sampler_accept(&s, gen[i]);
		coli_sampler_apply(&s, g_l, V, out);
		for (int id = 0; id < V; id++) {
			int in_prompt = 0, cnt = 0;
			double l = g_l[id];

			for (int i = 0; i < 6; i++)
				in_prompt |= prompt[i] == id;
			for (int i = 0; i < 9; i++)
				cnt += gen[i] == id;
			if (!in_prompt && !cnt) {
				changed_other += memcmp(&out[id], &g_l[id], sizeof(float)) != 0;
				continue;
			}
			l = l > 0 ? l / R[c] : l * R[c];
			l -= cnt * (double)F[c] + (cnt > 0 ? PR[c] : 0);
			if (fabs(out[id] - l) > worst)
				worst = fabs(out[id] - l);
		}
		coli_sampler_end(&s);
		printf("penalties r %.1f f %.1f p %.2f: max |engine - formula| %.2g, "
		       "others changed %d\n",
		       R[c], F[c], PR[c], worst, changed_other);
		if (worst > 1e-5 || changed_other)
			FAIL("penalties");
	}
}

/* The order: logit_bias before the penalties (vLLM's): a token of logit -3
 * biased +4, in the prompt, under repetition 2 is (-3 + 4) / 2 = 0.5; the
 * other order would give -3 * 2 + 4 = -2. */
static void test_order(void)
{
	static const int prompt[1] = {0};
	struct coli_logit_bias b = {0, 4};
	struct coli_sampler s;
	float l[4] = {-3, 0.5f, 1, 2}, out[4];

	coli_sampler_init(&s, 1, 1, 0, 1);
	s.repetition_penalty = 2;
	s.bias = &b, s.n_bias = 1;
	coli_sampler_begin(&s, 4, prompt, 1);
	coli_sampler_apply(&s, l, 4, out);
	coli_sampler_end(&s);
	printf("order: logit -3, bias +4, repetition 2 -> %g (bias first: 0.5)\n", out[0]);
	if (out[0] != 0.5f)
		FAIL("order: bias then penalties");
}

static void test_logprobs(void)
{
	float lp[V];
	int ord[V], bad = 0;
	double sum = 0;
	struct coli_sampler s;
	struct coli_logit_bias b = {0, 7};

	coli_sampler_logprobs(g_l, V, lp);
	for (int i = 0; i < V; i++)
		sum += exp((double)lp[i]);
	for (int i = 0; i < V; i++)
		ord[i] = i;
	qsort(ord, V, sizeof(int), cmp_desc);
	coli_sampler_init(&s, 1.3f, 0.9f, 0, 3);
	s.logprobs = 20;
	s.bias = &b, s.n_bias = 1;
	s.repetition_penalty = 1.5f;
	coli_sampler_begin(&s, V, ord, 10);
	for (int d = 0; d < 500; d++) {
		int id = coli_sampler_pick(&s, g_l, V);

		coli_sampler_accept(&s, id);
		bad += s.out.id != id || fabsf(s.out.logprob - lp[id]) > 1e-6f || s.out.n_top != 20;
		for (int k = 0; k < s.out.n_top; k++)
			bad += s.out.top_id[k] != ord[k] ||
			       fabsf(s.out.top_logprob[k] - lp[ord[k]]) > 1e-6f;
	}
	coli_sampler_end(&s);
	printf("logprobs: sum of exp over the vocabulary %.9f; 500 picks with T 1.3, bias, "
	       "penalty: %d differ from the raw log-softmax or its top 20\n",
	       sum, bad);
	if (fabs(sum - 1) > 1e-5 || bad)
		FAIL("logprobs");
}

static void test_seeds(void)
{
	struct coli_logit_bias b[2] = {{5, -100}, {17, 2}};
	struct coli_sampler s[4];
	coli_cpu_pool_t *pool = NULL;
	int same = 1, other = 1, pooled = 1;
	static const int prompt[3] = {1, 2, 3};

	if (coli_cpu_pool_create(3, &pool)) {
		FAIL("pool");
		return;
	}
	for (int i = 0; i < 4; i++) {
		coli_sampler_init(&s[i], 0.9f, 0.95f, 50, i == 3 ? 78 : 77);
		s[i].min_p = 0.02f;
		s[i].presence_penalty = 0.3f;
		s[i].frequency_penalty = 0.2f;
		s[i].repetition_penalty = 1.1f;
		s[i].bias = b, s[i].n_bias = 2;
		s[i].logprobs = 3;
		coli_sampler_begin(&s[i], V, prompt, 3);
	}
	for (int d = 0; d < 200; d++) {
		int a = coli_sampler_pick(&s[0], g_l, V), x = coli_sampler_pick(&s[1], g_l, V);
		int y = coli_sampler_pick_pool(&s[2], g_l, V, pool);
		int z = coli_sampler_pick(&s[3], g_l, V);

		same &= a == x;
		pooled &= a == y;
		other &= a == z;
		coli_sampler_accept(&s[0], a), coli_sampler_accept(&s[1], x);
		coli_sampler_accept(&s[2], y), coli_sampler_accept(&s[3], z);
	}
	for (int i = 0; i < 4; i++)
		coli_sampler_end(&s[i]);
	coli_cpu_pool_destroy(pool);
	printf("seeds, every value on: same seed %s, over a pool %s, another seed %s\n",
	       same ? "same" : "DIFFERS", pooled ? "same" : "DIFFERS", other ? "SAME" : "differs");
	if (!same || !pooled || other)
		FAIL("seeds");
}

int main(void)
{
	/* a peaked head and a long tail, on a grid of 1/64 (min_p's cut then
	 * falls between grid points for the settings above) */
	for (int i = 0; i < V; i++)
		g_l[i] = (float)((int)(rnd() * 640) - (i % 13 ? 320 : 0)) / 64.0f;
	test_bias();
	test_min_p();
	test_penalties();
	test_order();
	test_logprobs();
	test_seeds();
	printf("%d failed\n", g_fails);
	return g_fails ? 1 : 0;
}
