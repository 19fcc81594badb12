/*
 * core/spec.c — lossless speculative decoding from n-gram drafts (prompt
 * lookup) or a draft model: coli_generate's steps (core/generate.c) and a
 * colid sequence decoding alone (core/seq.c) guess the next tokens and
 * verify them in one forward pass.
 *
 * Draft: the earlier place in the history (prompt and generated tokens)
 * whose tokens match the history's end the longest (at least
 * COLI_SPEC_NGRAM_MIN, counted up to COLI_SPEC_LMAX; the most recent of the
 * longest), and what followed it there: up to k tokens, and no more than
 * the match is long, since a short match is weak evidence and a rejected
 * draft token costs a position of the verifying forward (the demo model's
 * held-out excerpts, greedy on the CPU: 783 draft tokens for 452 accepted,
 * 891 for 459 without that cap). Code, lists, quoted documents and chat
 * turns repeat themselves; a random sequence has no such match and then
 * costs nothing (no draft, the plain one-token step).
 *
 * Verify: the last token and the k drafts go through one forward with every
 * position's logits ([k + 1][vocab]). The sampler picks the token after
 * position j from row j (greedy: coli_argmax, the engine's tie rule; else
 * its draw, after the request's penalties and grammar saw the tokens
 * before), and drafts are accepted while the token picked from row j equals
 * draft j + 1; the first pick that differs (or the pick past the last
 * draft) is a token too. For a sampled token this is the speculative
 * sampling rule for a draft that proposes x with certainty: x is kept with
 * probability p(x), else the token comes from p without x, renormalized;
 * drawing from p and comparing with x does exactly that. The cache keeps
 * the inputs whose outputs were used (coli_engine_rewind drops the rest).
 * The tokens are the plain loop's exactly, sampled ones with the same seed
 * too (one draw a token, in the same order), when a forward of k + 1 tokens
 * gives each position the logits a one-token step gives it: the canonical
 * reduction holds it for the experts and the CPU's dense part (tests/core/
 * spec_decode checks the text against the plain loop's, greedy, sampled and
 * constrained, on the CPU and the simulated device).
 *
 * Or from a draft model (coli_engine_set_draft: a smaller model reading text
 * as this one does): its greedy continuation of the history, k steps of its
 * own. Its KV cache follows the text: each draft first rewinds it to what it
 * shares with the history (coli_kv_own_prefix: the accepted drafts stay) and
 * forwards the rest (the prompt the first time, then the token the
 * verification picked), so a draft costs k small steps and a rejected
 * draft's inputs are dropped, as the verified model's are. Its seconds count
 * in the verification's cost (--spec auto's measure).
 *
 * Draft length k: SPEC_K0 to start, + 2 after a draft accepted whole, halved
 * after one rejected at its first token, within 1..COLI_SPEC_KMAX. Drafts
 * whose first token keeps failing (SPEC_MISS in a row) pause drafting for
 * SPEC_PAUSE steps: a k + 1 token forward reads more experts than a one-
 * token step, which only pays when something is accepted. And the cost is
 * measured (--spec auto, wherever the dense part runs): when a
 * verification's seconds per token it yields (its picks from the rows
 * included, as a plain step's pick or argmax is in the step's) run above a
 * plain step's (running means), drafting pauses four times as long, then
 * probes again (--spec ngram drafts regardless). A small model whose forward grows with
 * its tokens (bound by compute, not by reading its weights) ends up mostly undrafted; a large one,
 * whose step reads the weights once for all its tokens, keeps drafting.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/core_internal.h"

#define SPEC_K0        4
#define SPEC_MISS      4
#define SPEC_PAUSE     16
#define SPEC_MEAN      16

void coli_spec_init(struct coli_spec *sp, const struct coli_engine *e)
{
	memset(sp, 0, sizeof(*sp));
	sp->on = coli_gen_spec_on(e);
	sp->guard = e->opts.spec == COLI_OPT_SPEC_AUTO;
	sp->model = e->draft; /* (NULL: n-grams) */
	sp->model_vocab = e->m.cfg.vocab;
	sp->k = SPEC_K0;
}

/* The draft model: it must read text as e does (coli.h). */
int coli_engine_set_draft(coli_engine_t *e, coli_engine_t *draft, char *err, size_t errlen)
{
	const coli_tokenizer_t *a = e->tok, *b = draft ? draft->tok : NULL;

	if (draft == e) {
		snprintf(err, errlen, "the draft model is the model itself");
		return -EINVAL;
	}
	if (draft && (!a) != (!b)) {
		snprintf(err, errlen,
		         "one of the two models has no tokenizer: they may not read "
		         "text alike");
		return -EINVAL;
	}
	if (draft && !a && draft->m.cfg.vocab != e->m.cfg.vocab) {
		snprintf(err, errlen, "the draft model's vocabulary has %d tokens, the model's %d",
		         draft->m.cfg.vocab, e->m.cfg.vocab);
		return -EINVAL;
	}
	if (draft && a) {
		const int n = coli_tokenizer_n_vocab(a);

		if (coli_tokenizer_n_vocab(b) != n) {
			snprintf(err, errlen,
			         "the draft model's tokenizer has %d tokens, the model's %d",
			         coli_tokenizer_n_vocab(b), n);
			return -EINVAL;
		}
		for (int id = 0; id < n; id++) {
			const char *x = coli_tokenizer_token_str(a, id),
			           *y = coli_tokenizer_token_str(b, id);

			if ((!x) != (!y) || (x && strcmp(x, y))) {
				snprintf(err, errlen,
				         "the tokenizers differ at token %d ('%.40s' against the "
				         "model's '%.40s')",
				         id, y ? y : "(none)", x ? x : "(none)");
				return -EINVAL;
			}
		}
	}
	e->draft = draft;
	return 0;
}

/* The draft model failed: said once, and the verified model's steps go on
 * without drafts. */
static int draft_failed(struct coli_spec *sp)
{
	fprintf(stderr, "coli: the draft model failed (%s): decoding goes on without drafts\n",
	        coli_engine_errmsg(sp->model));
	sp->on = 0;
	return 0;
}

/* Up to k tokens of the draft model's greedy continuation of hist[0, n)
 * (the verified model's vocabulary: a draft stops before an id outside it). */
static int model_draft(struct coli_spec *sp, const int *hist, int n, int k, int vocab, int *draft)
{
	struct coli_engine *d = sp->model;
	const int keep = coli_kv_own_prefix(&d->kv, 0, hist, n);
	const double t0 = coli_now_s();
	int m = 0, next;

	if (n + k > coli_engine_ctx(d))
		return 0; /* past the draft model's context: plain steps */
	if (coli_engine_rewind(d, keep) ||
	    coli_engine_forward_argmax(d, hist + keep, n - keep, &next))
		return draft_failed(sp);
	while (m < k && next >= 0 && next < vocab) {
		draft[m++] = next;
		if (m < k && coli_engine_forward_argmax(d, &draft[m - 1], 1, &next)) {
			draft_failed(sp); /* (the drafts so far are good) */
			break;
		}
	}
	sp->draft_s += coli_now_s() - t0; /* (a draft of none: the next verification's) */
	return m;
}

/* The n-gram draft (the top's): the place e < n - 1 whose tokens up to e
 * match hist's last ones the longest, then hist[e + 1 ..], at most k and at
 * most the match's length. */
static int ngram_draft(const int *hist, int n, int k, int *draft)
{
	int best = 0, end = 0, m = 0;

	/* a match holds the last two tokens: the scan tests those first (a
	 * 131,072-token history without a match: ~0.14 ms a draft on a 2-vCPU
	 * VM, tests/core/spec_draft) */
	_Static_assert(COLI_SPEC_NGRAM_MIN == 2, "the scan's first test is the shortest match");
	for (int e = n - 2; e >= 1; e--) {
		int len = 2;

		if (hist[e] != hist[n - 1] || hist[e - 1] != hist[n - 2])
			continue;
		while (len < COLI_SPEC_LMAX && len <= e && hist[e - len] == hist[n - 1 - len])
			len++;
		if (len > best) /* (strictly: the most recent of equals stays) */
			best = len, end = e;
	}
	if (!best)
		return 0;
	k = k < best ? k : best;
	while (m < k && end + 1 + m < n)
		draft[m] = hist[end + 1 + m], m++;
	return m;
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
	if (sp->model)
		return model_draft(sp, hist, n, k, sp->model_vocab, draft);
	return ngram_draft(hist, n, k, draft);
}

/* a running mean over the last ~SPEC_MEAN samples */
static void mean_add(double *m, int *n, double v)
{
	*n += *n < SPEC_MEAN;
	*m += (v - *m) / *n;
}

void coli_spec_step(struct coli_spec *sp, double seconds)
{
	mean_add(&sp->step_s, &sp->n_step, seconds);
}

void coli_spec_result(struct coli_spec *sp, int drafted, int accepted, double seconds)
{
	seconds += sp->draft_s; /* a draft model's steps are part of the cost */
	sp->draft_s = 0;
	mean_add(&sp->yield_s, &sp->n_yield, seconds / (accepted + 1));
	/* measured not to pay: a verification's tokens cost more than plain
	 * steps' (a small model whose forward grows with its tokens) */
	if (sp->guard && sp->n_yield >= 4 && sp->n_step >= 4 && sp->yield_s > sp->step_s * 1.02) {
		sp->pause = SPEC_PAUSE * 4;
		sp->slow++;
		sp->n_yield = 0; /* probe afresh after the pause */
	}
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
