/*
 * core/spec.c — lossless speculative decoding from n-gram drafts (prompt
 * lookup) or a draft model: coli_generate's steps (core/generate.c) and a
 * colid sequence decoding alone (core/seq.c) guess the next tokens and
 * verify them in one forward pass.
 *
 * Draft: the earlier place in the history (prompt and generated tokens)
 * whose tokens match the history's end the longest (at least
 * COLI_SPEC_NGRAM_MIN, under --spec auto COLI_SPEC_NGRAM_MIN_AUTO: its cost
 * model weighs a short match's drafts; counted up to COLI_SPEC_LMAX; the most
 * recent of the longest), and what followed it there: up to k tokens, and no more than
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
 * Draft length k under --spec auto (n-grams): chosen each time from what
 * the drafts have been worth and what a verification costs (auto_k). Every
 * draft is scored against the text as it grows, verified or declined (the
 * tokens are the plain loop's either way, so a declined draft is free
 * evidence): counts of its token j accepted given the ones before, by the
 * length of the match it came from (a 2-token match is a coin flip on the
 * demo model's held-out text, 8 tokens and more right nine times in ten)
 * and by whether the draft scored last was right throughout (the text is
 * in a loop: a random-weight model's greedy text falls into one after a
 * while, and drafts that were a loss before pay there). The cost is
 * measured: a plain step's seconds and a verification's extra seconds a
 * draft token (the picks from its rows included, as a plain step's pick or
 * argmax is in the step's). k maximizes the tokens a verification is
 * expected to yield over its cost in steps, and no draft is verified when
 * none beats a plain step by 5%; a one-token probe now and then keeps the
 * cost current. A small model on the CPU, whose forward grows
 * with its tokens (bound by compute, not by reading its weights), ends up
 * verifying only near-certain drafts; a large one, whose step reads the
 * weights once for all its tokens, drafts long.
 *
 * Under --spec ngram (deterministic: the tests' mode) and with a draft
 * model the schedule alone: SPEC_K0 to start, + 2 after a draft accepted
 * whole, halved after one rejected at its first token, within
 * 1..COLI_SPEC_KMAX; drafts whose first token keeps failing (SPEC_MISS in a
 * row) pause drafting for SPEC_PAUSE steps. With a draft model under auto,
 * when a verification's seconds per token it yields (the draft model's
 * steps included) run above a plain step's, drafting pauses four times as
 * long, then probes again.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/core_internal.h"

#define SPEC_K0        4
#define SPEC_MISS      4
#define SPEC_PAUSE     16
#define SPEC_MEAN      16
#define SPEC_ACC_N     64   /* acceptance counts forget at about this many samples */
#define SPEC_G0        0.5  /* g before a verification has measured it */
#define SPEC_PROBE     64   /* declined drafts before a one-token probe re-measures g */

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
 * match hist's last ones the longest (at least lmin: 1 or 2), then
 * hist[e + 1 ..], at most k and at most the match's length. */
static int ngram_draft(const int *hist, int n, int k, int lmin, int *draft, int *len_out)
{
	int best = 0, end = 0, m = 0;

	/* the last token first, then the one before (a 131,072-token history
	 * without a match: ~0.14 ms a draft on a 2-vCPU VM, tests/core/spec_draft) */
	for (int e = n - 2; e >= lmin - 1; e--) {
		int len = 2;

		if (hist[e] != hist[n - 1])
			continue;
		if (e == 0 || hist[e - 1] != hist[n - 2]) {
			if (lmin == 1 && !best) /* the most recent one-token match */
				best = 1, end = e;
			continue;
		}
		while (len < COLI_SPEC_LMAX && len <= e && hist[e - len] == hist[n - 1 - len])
			len++;
		if (len > best) /* (strictly: the most recent of equals stays) */
			best = len, end = e;
	}
	*len_out = best;
	if (!best)
		return 0;
	k = k < best ? k : best;
	while (m < k && end + 1 + m < n)
		draft[m] = hist[end + 1 + m], m++;
	return m;
}

/* A match length's bucket in acc[]: one each for 1..7 tokens (where the
 * demo model's held-out text shows acceptance climbing, about 0.5 at 2 to
 * 0.85 at 7), then 8..15 and 16.. (0.9 and more). */
static int match_bucket(int len)
{
	return len < 8 ? len - 1 : len < 16 ? 7 : 8;
}

/* Score a draft against the history as it grew since: its token j
 * against hist[n0 + j] while tokens j - 1 and before matched, each a sample
 * of its bucket's acceptance at j; once it is decided, sp->hot says whether
 * it was right throughout. Whether the draft was verified or
 * declined makes no difference: the tokens are the plain loop's either way,
 * so a declined draft teaches as much as a verified one, at no cost. */
static void score_draft(struct coli_spec *sp, struct coli_spec_cand *c, const int *hist, int n)
{
	if (n < c->n0)
		c->m = 0; /* the history was rewound past it */
	while (c->j < c->m && c->n0 + c->j < n) {
		float *a = sp->acc[c->hot][c->b][c->j];
		const int hit = hist[c->n0 + c->j] == c->ids[c->j];

		if (a[1] >= SPEC_ACC_N) /* forget slowly: the text changes */
			a[0] *= 1.0f - 1.0f / SPEC_ACC_N, a[1] *= 1.0f - 1.0f / SPEC_ACC_N;
		a[0] += (float)hit, a[1] += 1.0f;
		c->j++;
		if (!hit)
			c->m = 0, sp->hot = 0;
	}
	if (c->m && c->j == c->m)
		c->m = 0, sp->hot = 1; /* scored whole */
}

/* g: a draft token's measured extra seconds over a plain step's, in steps. */
double coli_spec_cost(const struct coli_spec *sp)
{
	return sp->guard && !sp->model && sp->n_extra && sp->step_s > 0 ? sp->extra_s / sp->step_s
	                                                                : 0;
}

/* --spec auto's draft length for an n-gram draft of m tokens from a match in
 * bucket b: the k <= m (0: a plain step) most tokens a second. A
 * verification of k drafts yields 1 + p1 + p1 p2 + ... + p1..pk tokens on
 * average (pj: its bucket's acceptance of token j given the ones before,
 * in the state sp->hot,
 * its counts smoothed toward token j - 1's estimate) and costs about 1 + g k
 * plain steps (g: the measured extra seconds a draft token, over a step's).
 * Linear in k is the CPU's shape; a GPU's is flatter and a streamed MoE's
 * grows with the union of the experts the tokens route to, so the mean over
 * the k verified is what g learns. With nothing verified for SPEC_PROBE
 * drafts a one-token draft is verified anyway, so g follows the machine (a
 * busier host, a longer context). `coli bench spec` replays a model's text
 * through this at a measured g and at given ones. */
static int auto_k(struct coli_spec *sp, int b, int m)
{
	const double g = coli_spec_cost(sp) > 0 ? coli_spec_cost(sp) : SPEC_G0;
	/* best: a draft must gain 5% over a plain step, as g is a running mean
	 * of noisy timings (a draft that merely breaks even costs when g reads
	 * low) */
	double p = 1, yield = 1, best = 1.05, pj = 0.5;
	int k = 0;

	for (int j = 0; j < m; j++) {
		const float *a = sp->acc[sp->hot][b][j];

		/* token j's prior: token j - 1's estimate (given the ones before
		 * right, a later token is right more often, not less) */
		pj = (a[0] + 2.0 * pj) / (a[1] + 2.0);
		p *= pj;
		yield += p;
		if (yield / (1 + g * (j + 1)) > best)
			best = yield / (1 + g * (j + 1)), k = j + 1;
	}
	if (k)
		sp->idle = 0;
	else if (++sp->idle >= SPEC_PROBE)
		sp->idle = 0, k = 1;
	return k;
}

int coli_spec_draft(struct coli_spec *sp, const int *hist, int n, int kmax, int *draft)
{
	int k = sp->k < kmax ? sp->k : kmax, len = 0, m;

	if (!sp->on || k <= 0)
		return 0;
	if (sp->model) {
		if (sp->pause > 0) {
			sp->pause--;
			return 0;
		}
		return model_draft(sp, hist, n, k, sp->model_vocab, draft);
	}
	if (!sp->guard) { /* --spec ngram: the schedule alone (coli_spec_result) */
		if (sp->pause > 0) {
			sp->pause--;
			return 0;
		}
		return ngram_draft(hist, n, k, COLI_SPEC_NGRAM_MIN, draft, &len);
	}
	for (int i = 0; i < COLI_SPEC_KMAX + 1; i++)
		score_draft(sp, &sp->cand[i], hist, n);
	if (!(m = ngram_draft(hist, n, kmax, COLI_SPEC_NGRAM_MIN_AUTO, draft, &len)))
		return 0;
	for (int i = 0; i < COLI_SPEC_KMAX + 1; i++)
		if (!sp->cand[i].m) { /* (a free slot: one a step, each open k + 1 steps at most) */
			struct coli_spec_cand *c = &sp->cand[i];

			c->n0 = n, c->m = m, c->j = 0, c->b = match_bucket(len), c->hot = sp->hot;
			memcpy(c->ids, draft, sizeof(int) * (size_t)m);
			break;
		}
	return auto_k(sp, match_bucket(len), m);
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
	if (sp->n_step && drafted > 0)
		mean_add(&sp->extra_s, &sp->n_extra,
		         (seconds > sp->step_s ? seconds - sp->step_s : 0) / drafted);
	if (sp->guard && !sp->model) { /* auto_k decides (its totals only here) */
		sp->drafted += drafted, sp->accepted += accepted, sp->rounds++;
		return;
	}
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
