/*
 * tests/core/spec_draft.c — core/spec.c's n-gram drafts against a reference
 * written here the slow, obvious way: for each length from COLI_SPEC_LMAX
 * down to COLI_SPEC_NGRAM_MIN (under --spec auto COLI_SPEC_NGRAM_MIN_AUTO),
 * the most recent earlier occurrence of the
 * history's last tokens of that length (memcmp at every place); the first
 * length found wins, and the draft is what followed it, at most k and at
 * most that length, cut at the history's end. Random histories over a few
 * token ids (long and overlapping matches, runs of one token) and every k;
 * then cases written out: the longer match over the more recent shorter one,
 * the cap by the match's length, the most recent of equal matches, no
 * match, drafting off, paused and kmax; --spec auto's cost model (its
 * scoring of drafts, the hot state after a draft right throughout, its
 * choice of length, its probes). Last it prints
 * (asserting nothing) what a draft costs over a 131,072-token history
 * without a match.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core_internal.h"

static int ref_draft(const int *h, int n, int k, int lmin, int *d)
{
	for (int len = COLI_SPEC_LMAX; len >= lmin; len--) {
		if (len > n - 1)
			continue;
		/* the occurrence ends at e: h[e - len + 1 .. e] == h[n - len .. n - 1] */
		for (int e = n - 2; e >= len - 1; e--) {
			int m = 0;

			if (memcmp(h + e - len + 1, h + n - len, sizeof(int) * (size_t)len))
				continue;
			while (m < k && m < len && e + 1 + m < n)
				d[m] = h[e + 1 + m], m++;
			return m;
		}
	}
	return 0;
}

static int draft(const int *h, int n, int k, int kmax, int *d)
{
	struct coli_spec sp;

	memset(&sp, 0, sizeof(sp));
	sp.on = 1;
	sp.k = k;
	return coli_spec_draft(&sp, h, n, kmax, d);
}

static int expect(const char *what, const int *h, int n, int k, const int *want, int nw)
{
	int d[COLI_SPEC_KMAX + 1], m = draft(h, n, k, COLI_SPEC_KMAX, d);

	if (m != nw || memcmp(d, want, sizeof(int) * (size_t)nw)) {
		printf("FAIL %s: %d draft tokens (%d expected)\n", what, m, nw);
		return 1;
	}
	return 0;
}

/* --spec auto's cost model (core/spec.c: score_draft, auto_k): a draft's
 * tokens scored against the history as it grows, verified or not; the
 * length chosen from those counts and the measured cost; a probe after
 * drafts declined in a row. */
static int cost_model(void)
{
	/* 1 2 3 4 5 6 | 1 2 3 4: the match 1 2 3 4 (4 tokens, bucket 3) drafts 5 6 */
	int h[32] = {1, 2, 3, 4, 5, 6, 1, 2, 3, 4}, d[COLI_SPEC_KMAX + 1], m, rc = 0, probes = 0;
	struct coli_spec sp;

	memset(&sp, 0, sizeof(sp));
	sp.on = 1, sp.guard = 1, sp.k = 4;
	/* nothing measured: g = 0.5 and acceptance 1/2 a token: 1 + 1/2 tokens for
	 * 1.5 steps ties a plain step, so the smoothed counts alone draft nothing */
	if ((m = coli_spec_draft(&sp, h, 10, COLI_SPEC_KMAX, d)) != 0 || d[0] != 5 || d[1] != 6) {
		printf("FAIL auto, no evidence: %d draft tokens verified, or not 5 6\n", m);
		rc = 1;
	}
	/* the text goes on 5 7: token 0 accepted, token 1 not, scored when the
	 * history has them (the draft above was declined) */
	h[10] = 5, h[11] = 7;
	coli_spec_draft(&sp, h, 11, COLI_SPEC_KMAX, d);
	if (sp.acc[0][3][0][1] != 1.0f || sp.acc[0][3][0][0] != 1.0f ||
	    sp.acc[0][3][1][1] != 0.0f) {
		printf("FAIL scoring: bucket 3 token 0 %.0f of %.0f, token 1 scored %.0f times\n",
		       sp.acc[0][3][0][0], sp.acc[0][3][0][1], sp.acc[0][3][1][1]);
		rc = 1;
	}
	coli_spec_draft(&sp, h, 12, COLI_SPEC_KMAX, d);
	if (sp.acc[0][3][1][1] != 1.0f || sp.acc[0][3][1][0] != 0.0f || sp.cand[0].m) {
		printf("FAIL scoring: token 1 %.0f of %.0f, the draft still open\n",
		       sp.acc[0][3][1][0], sp.acc[0][3][1][1]);
		rc = 1;
	}
	/* a draft right throughout makes the state hot: the next draft's counts
	 * are the hot ones */
	{
		int hh[12] = {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6};
		struct coli_spec sh = sp;

		memset(sh.cand, 0, sizeof(sh.cand));
		sh.cand[0] = (struct coli_spec_cand){.n0 = 10, .m = 2, .b = 3, .ids = {5, 6}};
		coli_spec_draft(&sh, hh, 12, COLI_SPEC_KMAX, d);
		if (sp.hot || !sh.hot || sh.acc[0][3][1][1] != sp.acc[0][3][1][1] + 1.0f ||
		    !sh.cand[0].m || !sh.cand[0].hot) {
			printf("FAIL hot: %d before, %d after a draft right throughout; the next "
			       "draft %s\n",
			       sp.hot, sh.hot, sh.cand[0].hot ? "hot" : "not hot");
			rc = 1;
		}
	}
	/* measured: a step 1 ms, a verification of 2 drafts 1.2 ms (g = 0.1) */
	coli_spec_step(&sp, 1e-3);
	coli_spec_result(&sp, 2, 0, 1.2e-3);
	if (sp.extra_s < 0.99e-4 || sp.extra_s > 1.01e-4) {
		printf("FAIL measure: %.3g s a draft token above a step (1e-4 expected)\n", sp.extra_s);
		rc = 1;
	}
	/* the bucket's tokens accepted 19 of 20 times: drafted whole */
	for (int j = 0; j < COLI_SPEC_KMAX; j++)
		for (int hot = 0; hot < 2; hot++)
			sp.acc[hot][3][j][0] = 19, sp.acc[hot][3][j][1] = 20;
	memset(sp.cand, 0, sizeof(sp.cand));
	if ((m = coli_spec_draft(&sp, h, 10, COLI_SPEC_KMAX, d)) != 4) {
		printf("FAIL cheap and likely: %d draft tokens verified (4 expected)\n", m);
		rc = 1;
	}
	/* a verification as dear as its tokens' steps (g = 1): never pays but
	 * for the probe that re-measures it */
	sp.extra_s = 1e-3;
	for (int i = 0; i < 200; i++) {
		memset(sp.cand, 0, sizeof(sp.cand));
		m = coli_spec_draft(&sp, h, 10, COLI_SPEC_KMAX, d);
		probes += m != 0;
		if (m > 1) {
			printf("FAIL dear: %d draft tokens verified\n", m);
			rc = 1;
			break;
		}
	}
	if (probes < 1 || probes > 200 / 16) {
		printf("FAIL dear: %d probes in 200 drafts\n", probes);
		rc = 1;
	}
	printf("the cost model: %s\n", rc ? "FAIL" : "ok");
	return rc;
}

int main(void)
{
	int rc = 0, cases = 0;

	srand(7);
	for (int it = 0; it < 20000; it++) {
		/* 2..4 ids: matches everywhere, some longer than COLI_SPEC_LMAX */
		int h[400], n = 1 + rand() % 400, ids = 2 + rand() % 3, k = 1 + rand() % COLI_SPEC_KMAX;
		int d[COLI_SPEC_KMAX + 1], w[COLI_SPEC_KMAX + 1], m, mw;

		for (int i = 0; i < n; i++)
			h[i] = rand() % 7 ? rand() % ids : 9; /* and a rarer one */
		m = draft(h, n, k, COLI_SPEC_KMAX, d);
		mw = ref_draft(h, n, k, COLI_SPEC_NGRAM_MIN, w);
		cases++;
		if (m != mw || memcmp(d, w, sizeof(int) * (size_t)m)) {
			printf("FAIL random history %d (n %d, k %d): %d draft tokens, the reference "
			       "%d\n",
			       it, n, k, m, mw);
			rc = 1;
			break;
		}
		/* --spec auto's drafts (up to kmax = k, from a match of one token
		 * on): the draft it scores, whatever length it verifies */
		{
			struct coli_spec sp;

			memset(&sp, 0, sizeof(sp));
			sp.on = 1, sp.guard = 1, sp.k = 1;
			coli_spec_draft(&sp, h, n, k, d);
			mw = ref_draft(h, n, k, COLI_SPEC_NGRAM_MIN_AUTO, w);
			if (sp.cand[0].m != mw ||
			    memcmp(sp.cand[0].ids, w, sizeof(int) * (size_t)mw)) {
				printf(
				    "FAIL random history %d (n %d, kmax %d) under auto: %d draft "
				    "tokens, the reference %d\n",
				    it, n, k, sp.cand[0].m, mw);
				rc = 1;
				break;
			}
		}
	}
	{
		/* "1 2 3 4" matched at the start beats the later "3 4" */
		static const int h[] = {1, 2, 3, 4, 10, 11, 12, 13, 9, 3, 4, 20, 21, 1, 2, 3, 4};
		static const int w[] = {10, 11, 12, 13};

		rc |= expect("the longest match", h, 17, 7, w, 4);
	}
	{
		/* a match of two drafts two, whatever k */
		static const int h[] = {7, 8, 50, 51, 52, 53, 54, 55, 60, 7, 8};
		static const int w[] = {50, 51};

		rc |= expect("capped by the match", h, 11, 7, w, 2);
	}
	{
		/* equal matches: the most recent */
		static const int h[] = {5, 7, 8, 30, 31, 6, 7, 8, 40, 41, 4, 7, 8};
		static const int w[] = {40, 41};

		rc |= expect("the most recent of equals", h, 13, 4, w, 2);
	}
	{
		/* the last token seen before, but no two: no draft */
		static const int h[] = {1, 8, 2, 3, 4, 8};

		rc |= expect("a one-token match", h, 6, 4, NULL, 0);
	}
	{
		/* the continuation ends at the history's end */
		static const int h[] = {5, 6, 5, 6};
		static const int w[] = {5, 6};

		rc |= expect("cut at the end", h, 4, 7, w, 2);
	}
	{
		static const int h[] = {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6};
		struct coli_spec sp;
		int d[COLI_SPEC_KMAX + 1], m;

		memset(&sp, 0, sizeof(sp));
		sp.on = 1, sp.k = 6;
		if ((m = coli_spec_draft(&sp, h, 14, 3, d)) != 3 || d[0] != 7 || d[2] != 1) {
			printf("FAIL kmax 3: %d draft tokens\n", m);
			rc = 1;
		}
		sp.pause = 2;
		if (coli_spec_draft(&sp, h, 14, 7, d) || sp.pause != 1) {
			printf("FAIL paused: drafted, or the pause did not count down\n");
			rc = 1;
		}
		sp.pause = 0, sp.on = 0;
		if (coli_spec_draft(&sp, h, 14, 7, d)) {
			printf("FAIL off: drafted\n");
			rc = 1;
		}
	}
	{
		/* 3% of the tokens one id (the last one's), 27% among 200, the rest
		 * among 100,000 */
		enum { N = 131072, REPS = 50 };
		int *h = malloc(sizeof(int) * N), d[COLI_SPEC_KMAX + 1], found = 0;
		struct timespec t0, t1;

		for (int i = 0; i < N; i++) {
			const int r = rand() % 100;

			h[i] = r < 3 ? 11 : r < 30 ? rand() % 200 : 1000 + rand() % 100000;
		}
		h[N - 2] = 999, h[N - 1] = 11; /* a pair seen nowhere before */
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int i = 0; i < REPS; i++)
			found += draft(h, N, 4, COLI_SPEC_KMAX, d);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		printf("a draft over %d tokens without a match: %.0f us (%d drafted)\n", N,
		       ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) /
		           1e3 / REPS,
		       found);
		rc |= found != 0;
		free(h);
	}
	rc |= cost_model();
	printf("%d random histories against the reference; %s\n", cases, rc ? "FAIL" : "ok");
	return rc;
}
