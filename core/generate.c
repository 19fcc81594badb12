/*
 * core/generate.c — the generation loop shared by `coli generate` and colid:
 * reset the KV cache, prefill the prompt in one batch, then decode one token
 * at a time, sampling, streaming complete UTF-8 text to a callback, stopping
 * at an EOS id of the model or after max_new tokens. The sampler's sequence
 * (the history its penalties read) runs from the prompt to the last token;
 * s->out holds the token being passed to the callback, with its logprobs.
 * The same loop turned inside out for one sequence of a batch is
 * core/seq.c's struct coli_seq_gen, sharing the stop rules and the sampler's
 * start (coli_gen_*, core_internal.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core_internal.h"

int coli_gen_is_eos(const struct coli_model_config *c, int id)
{
	for (int i = 0; i < c->n_eos; i++)
		if (c->eos[i] == id)
			return 1;
	return 0;
}

int coli_gen_is_end(const struct coli_sampler *s, int id)
{
	for (int i = 0; i < s->n_end_ids; i++)
		if (s->end_ids[i] == id)
			return 1;
	return 0;
}

int coli_gen_sampler_begin(coli_engine_t *e, struct coli_sampler *s, const int *prompt, int n)
{
	const struct coli_model_config *c = &e->m.cfg;

	if (s->grammar) {
		if (!s->trie)
			s->trie = coli_engine_vocab_trie(e);
		for (int q = 0; q < c->n_eos; q++) {
			int j = 0;

			while (j < s->n_end_ids && s->end_ids[j] != c->eos[q])
				j++;
			if (j == s->n_end_ids &&
			    s->n_end_ids < (int)(sizeof(s->end_ids) / sizeof(int)))
				s->end_ids[s->n_end_ids++] = c->eos[q];
		}
	}
	return coli_sampler_begin(s, c->vocab, prompt, n);
}

/* The prefill's phase split: e0 before it, e1 after. */
static void prefill_stats(struct coli_gen_stats *st, const struct coli_engine_stats *e0,
                          const struct coli_engine_stats *e1)
{
	st->prefill_attention_s = e1->attention_s - e0->attention_s;
	st->prefill_moe_s = e1->moe_s - e0->moe_s;
	st->prefill_lm_head_s = e1->lm_head_s - e0->lm_head_s;
	st->prefill_plan_s = e1->moe_plan_s - e0->moe_plan_s;
	st->prefill_issue_s = e1->moe_issue_s - e0->moe_issue_s;
	st->prefill_devissue_s = e1->moe_devissue_s - e0->moe_devissue_s;
	st->prefill_slabs_s = e1->moe_slabs_s - e0->moe_slabs_s;
	st->prefill_beside_s = e1->moe_beside_s - e0->moe_beside_s;
	st->prefill_lookahead_s = e1->lookahead_s - e0->lookahead_s;
	st->prefill_cpu_s = e1->moe_cpu_s - e0->moe_cpu_s;
	st->prefill_take_s = e1->moe_take_s - e0->moe_take_s;
	st->prefill_handoff_s = e1->handoff_s - e0->handoff_s;
}

/* The decode's split and counts: e0 before the prefill, e1 after it, s1 the
 * devices' op counts then. */
static void decode_stats(coli_engine_t *e, struct coli_gen_stats *st,
                         const struct coli_engine_stats *e0, const struct coli_engine_stats *e1,
                         const struct coli_engine_stats *s1)
{
	struct coli_engine_stats s2;

	st->decode_issue_s = e->est.moe_issue_s - e1->moe_issue_s;
	st->decode_plan_s = e->est.moe_plan_s - e1->moe_plan_s;
	st->decode_slabs_s = e->est.moe_slabs_s - e1->moe_slabs_s;
	st->decode_devissue_s = e->est.moe_devissue_s - e1->moe_devissue_s;
	st->decode_beside_s = e->est.moe_beside_s - e1->moe_beside_s;
	st->decode_cpu_s = e->est.moe_cpu_s - e1->moe_cpu_s;
	st->decode_take_s = e->est.moe_take_s - e1->moe_take_s;
	st->decode_handoff_s = e->est.handoff_s - e1->handoff_s;
	st->decode_dev_busy_s = e->est.dev_busy_s - e1->dev_busy_s;
	coli_engine_stats(e, &s2);
	st->decode_dev_ops = (double)(s2.dev_ops - s1->dev_ops);
	st->decode_host_bytes = (double)(e->est.bytes[COLI_TIER_RAM] - e1->bytes[COLI_TIER_RAM] +
	                                 e->est.bytes[COLI_TIER_DISK] - e1->bytes[COLI_TIER_DISK]);
	st->decode_steps = (int)(e->est.tokens - e1->tokens);
	st->expert_calls = e->est.expert_uses - e0->expert_uses;
	st->expert_bytes = 0;
	for (int x = 0; x < COLI_TIER_N; x++)
		st->expert_bytes += e->est.bytes[x] - e0->bytes[x];
}

/* auto drafts wherever the dense part runs and lets the measure decide
 * (core/spec.c's guard): a step that streams experts over the link gains
 * where drafts are accepted, one bound by the dense part's latency does
 * not, and the guard pauses drafting there */
int coli_gen_spec_on(const coli_engine_t *e)
{
	return e->opts.spec != COLI_OPT_SPEC_OFF;
}

int coli_gen_pick(coli_engine_t *e, struct coli_sampler *s, int greedy, const float *logits)
{
	int id;

	if (!greedy)
		return coli_sampler_pick_pool(s, logits, e->m.cfg.vocab, e->pool);
	id = coli_argmax(logits, e->m.cfg.vocab);
	s->out.id = id;
	return id;
}

/* A verification in progress (core/spec.c): the token before the draft and
 * the draft went through one forward; the loop picks from its rows in turn. */
struct verify {
	int k, row, pos; /* the draft's length, the row picked from next, ids[0]'s position */
	int ids[COLI_SPEC_KMAX + 1];
	int next[COLI_SPEC_KMAX + 1]; /* greedy: each row's argmax, not its logits */
	double s;                     /* the forward's seconds */
};

/* The tokens hist[0, n) are generated, the last one not forwarded yet; at
 * most `room` tokens may follow the next one. With a draft, forwards the
 * last token and the draft (v->ids[0..k]) with every position's logits into
 * *vlogits (greedy: their argmaxes into v->next, on the GPU when the dense
 * part is there) and returns k; 0 with no draft (the caller runs the plain
 * step) or an error (*rc). */
static int verify(coli_engine_t *e, struct coli_spec *sp, const int *hist, int n, int room,
                  int greedy, struct verify *v, float **vlogits, int *rc)
{
	const int V = e->m.cfg.vocab;
	double t0;
	int k;

	v->pos = coli_engine_pos(e);
	k = sp->on ? coli_spec_draft(sp, hist, n, room < COLI_SPEC_KMAX ? room : COLI_SPEC_KMAX,
	                             v->ids + 1)
	           : 0;
	if (k <= 0 || v->pos + k + 1 > coli_engine_ctx(e))
		return 0;
	if (!*vlogits && !(*vlogits = malloc(sizeof(float) * V * (COLI_SPEC_KMAX + 1)))) {
		sp->on = 0;
		return 0;
	}
	v->ids[0] = hist[n - 1];
	t0 = coli_now_s();
	if ((*rc = greedy ? coli_engine_forward_argmax_all(e, v->ids, k + 1, *vlogits, v->next)
	                  : coli_engine_forward(e, v->ids, k + 1, *vlogits, 1)))
		return 0;
	v->s = coli_now_s() - t0;
	v->row = 0;
	return v->k = k;
}

int coli_generate(coli_engine_t *e, const int *prompt, int n_prompt, int max_new,
                  struct coli_sampler *s, coli_gen_cb cb, void *arg, struct coli_gen_stats *st)
{
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_detok dt;
	struct coli_engine_stats e0, e1, s1;
	const float *logits = NULL; /* the engine's (coli_engine_forward_last) */
	float *vlogits = NULL;      /* a verification's [k + 1][vocab] */
	int *hist = NULL;           /* prompt and generated tokens, for drafts */
	struct coli_spec sp;
	char *text = NULL;
	size_t cap = 0;
	double t0, t1, step_s = -1; /* a sampled plain step's seconds, until its pick */
	struct verify v;
	int rc = 0, id, next = 0, greedy, i;

	memset(st, 0, sizeof(*st));
	st->n_prompt = n_prompt;
	if (n_prompt <= 0)
		return -EINVAL;
	if (n_prompt + (max_new > 0 ? max_new - 1 : 0) > e->kv.ctx)
		return -E2BIG;
	cap = e->tok ? coli_tokenizer_max_piece_bytes(e->tok) + 32 : 32;
	text = malloc(cap);
	if (!text)
		return -ENOMEM;
	rc = coli_gen_sampler_begin(e, s, prompt, n_prompt);
	if (rc) {
		free(text);
		return rc;
	}
	/* the prompt's prefix already in the KV cache (the previous generation's
	 * prompt and tokens: a shared system prompt) is kept, at least its last
	 * token run again for the logits */
	{
		int shared, keep = coli_kv_open(&e->kv, 0, prompt, n_prompt,
		                                coli_kv_own_prefix(&e->kv, 0, prompt, n_prompt),
		                                &shared);

		st->n_cached = keep;
		e->est.prefix_hits += keep > 0;
		e->est.prefix_saved += (uint64_t)keep;
		e->est.prefix_shared += (uint64_t)shared;
	}
	e0 = e->est; /* the generation's expert counts are differences of these */
	coli_detok_init(&dt);
	t0 = coli_now_s();
	/* greedy without penalties, bias or logprobs: the engine returns the
	 * argmax (on the GPU when the dense part is there), not the logits */
	greedy = !coli_sampler_needs_logits(s);
	rc = greedy ? coli_engine_forward_argmax(e, prompt + st->n_cached, n_prompt - st->n_cached,
	                                         &next)
	            : coli_engine_forward_last(e, prompt + st->n_cached, n_prompt - st->n_cached,
	                                       &logits);
	t1 = coli_now_s();
	st->prefill_s = t1 - t0;
	e1 = e->est;
	prefill_stats(st, &e0, &e1);
	coli_engine_stats(e, &s1); /* with the devices' op counts */
	coli_spec_init(&sp, e);
	if (sp.on && !(hist = malloc(sizeof(int) * ((size_t)n_prompt + max_new))))
		sp.on = 0;
	if (hist)
		memcpy(hist, prompt, sizeof(int) * (size_t)n_prompt);
	v.k = 0;
	for (i = 0; !rc && i < max_new; i++) {
		int n;

		/* the token: from a verification's row while one runs (its row is the
		 * plain step's logits, so the sampler draws what it would have), else
		 * from the last step */
		if (v.k && greedy) {
			id = v.next[v.row], s->out.id = id;
		} else if (v.k || !greedy) {
			const double tp = coli_now_s();

			id = coli_gen_pick(e, s, greedy,
			                   v.k ? vlogits + (size_t)v.row * c->vocab : logits);
			/* --spec auto's measure: a verification's picks count in its
			 * cost (a greedy plain step's argmax is in its forward), and
			 * a sampled plain step's pick in the step's */
			if (v.k)
				v.s += coli_now_s() - tp;
			else if (step_s >= 0)
				coli_spec_step(&sp, step_s + (coli_now_s() - tp));
			step_s = -1;
		} else {
			id = next, s->out.id = id;
		}
		coli_sampler_accept(s, id);
		if (coli_gen_is_eos(c, id) || (s->grammar && coli_gen_is_end(s, id))) {
			/* (constrained: one of its end ids, a chat turn's end among them) */
			st->stopped_eos = 1;
			break;
		}
		st->n_gen++;
		if (hist)
			hist[n_prompt + i] = id;
		n = e->tok ? coli_detok_push(e->tok, &dt, id, text, cap) : 0;
		if (n < 0)
			n = 0;
		if (cb && cb(arg, id, text, (size_t)n))
			break;
		if (i + 1 >= max_new)
			continue;
		if (v.k) {
			if (v.row < v.k && id == v.ids[v.row + 1]) {
				v.row++; /* the draft's token: its output is the next row */
				continue;
			}
			/* the cache keeps the inputs whose outputs were used */
			coli_spec_result(&sp, v.k, v.row, v.s);
			rc = coli_engine_rewind(e, v.pos + 1 + v.row);
			v.k = 0;
			if (rc)
				break;
		}
		if (verify(e, &sp, hist, n_prompt + i + 1, max_new - i - 2, greedy, &v, &vlogits,
		           &rc) ||
		    rc)
			continue;
		const double ts = coli_now_s();

		rc = greedy ? coli_engine_forward_argmax(e, &id, 1, &next)
		            : coli_engine_forward_last(e, &id, 1, &logits);
		if (sp.on && greedy)
			coli_spec_step(&sp, coli_now_s() - ts);
		else if (sp.on)
			step_s = coli_now_s() - ts; /* measured with its pick, above */
	}
	if (v.k)
		coli_spec_result(&sp, v.k, v.row, v.s);
	/* the cache holds the inputs of the tokens used: a verified draft may have
	 * left inputs of tokens the loop stopped before (EOS, the callback) */
	if (!rc && max_new > 0 && coli_engine_pos(e) > n_prompt + (i < max_new ? i : max_new - 1))
		rc = coli_engine_rewind(e, n_prompt + (i < max_new ? i : max_new - 1));
	st->spec_drafted = sp.drafted, st->spec_accepted = sp.accepted, st->spec_rounds = sp.rounds;
	st->spec_cost = coli_spec_cost(&sp);
	st->spec_model = sp.model != NULL;
	free(hist), free(vlogits);
	if (!rc && e->tok && cb) {
		int n = coli_detok_flush(e->tok, &dt, text, cap);

		if (n > 0)
			cb(arg, -1, text, (size_t)n);
	}
	st->decode_s = coli_now_s() - t1;
	decode_stats(e, st, &e0, &e1, &s1);
	coli_sampler_end(s);
	free(text);
	return rc;
}
