/*
 * core/spec.c — lossless speculative decoding from n-gram drafts (prompt
 * lookup): coli_generate's greedy steps (core/generate.c) guess the next
 * tokens from the text so far and verify them in one forward pass.
 *
 * Draft: the longest suffix of the history (prompt and generated tokens) of
 * SPEC_NGRAM_MAX down to SPEC_NGRAM_MIN tokens that occurred before, its most
 * recent earlier occurrence, and the up to k tokens that followed it there.
 * Code, lists, quoted documents and chat turns repeat themselves; a random
 * sequence has no such match and then costs nothing (no draft, the plain
 * one-token step).
 *
 * Verify: the last token and the k drafts go through one forward with every
 * position's logits ([k + 1][vocab]); position j's argmax (coli_argmax, the
 * engine's tie rule) is the greedy token after draft j, so drafts are
 * accepted while draft j + 1 equals it, and the first argmax past the
 * accepted ones is a free extra token. The cache keeps the inputs whose
 * outputs were used (coli_engine_rewind drops the rest). The tokens are the
 * plain greedy loop's exactly when a forward of k + 1 tokens gives each
 * position the logits a one-token step gives it: the canonical reduction
 * holds it for the experts and the CPU's dense part (tests/core/
 * spec_decode checks the text against the plain loop's, on the CPU and the
 * simulated device).
 *
 * Draft length k: SPEC_K0 to start, + 2 after a draft accepted whole, halved
 * after one rejected at its first token, within 1..COLI_SPEC_KMAX. Drafts whose
 * first token keeps failing (SPEC_MISS in a row) pause drafting for
 * SPEC_PAUSE steps: a k + 1 token forward reads more experts than a one-
 * token step, which only pays when something is accepted.
 */
#include <string.h>

#include "core/core_internal.h"

#define SPEC_NGRAM_MAX 4
#define SPEC_NGRAM_MIN 2
#define SPEC_K0        4
#define SPEC_MISS      4
#define SPEC_PAUSE     16

void coli_spec_init(struct coli_spec *sp, int on)
{
	memset(sp, 0, sizeof(*sp));
	sp->on = on;
	sp->k = SPEC_K0;
}

int coli_spec_draft(struct coli_spec *sp, const int *hist, int n, int kmax, int *draft)
{
	int k = sp->k < kmax ? sp->k : kmax;

	if (!sp->on || k <= 0)
		return 0;
	if (sp->pause > 0) {
		sp->pause--;
		return 0;
	}
	for (int g = SPEC_NGRAM_MAX; g >= SPEC_NGRAM_MIN; g--) {
		if (n <= g)
			continue;
		/* the most recent earlier occurrence of hist[n - g, n) */
		for (int at = n - g - 1; at >= 0; at--) {
			int m = 0;

			if (memcmp(hist + at, hist + n - g, sizeof(int) * (size_t)g))
				continue;
			while (m < k && at + g + m < n)
				draft[m] = hist[at + g + m], m++;
			if (m)
				return m;
		}
	}
	return 0;
}

void coli_spec_result(struct coli_spec *sp, int drafted, int accepted)
{
	sp->drafted += drafted;
	sp->accepted += accepted;
	sp->rounds++;
	if (accepted == drafted) {
		sp->k = sp->k + 2 < COLI_SPEC_KMAX ? sp->k + 2 : COLI_SPEC_KMAX;
		sp->misses = 0;
	} else if (accepted == 0) {
		sp->k = sp->k / 2 > 1 ? sp->k / 2 : 1;
		if (++sp->misses >= SPEC_MISS) {
			sp->pause = SPEC_PAUSE;
			sp->misses = 0;
		}
	} else {
		sp->misses = 0;
	}
}
