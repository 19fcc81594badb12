/*
 * core/seq.c — sequence slots and the batched step (core/coli.h "several
 * sequences"): which slot a new sequence gets, its position and rewind, and
 * coli_engine_step, one forward over the runs of several slots.
 *
 * The slots are the KV cache's (struct coli_kv_seq, core/forward/kv.h: n_seq
 * of them, each a block table into the pool, pos, hist, open, used, resv).
 * The prefix cache is the pool's (core/forward/kv_pool.c): a closed slot's
 * full blocks go to an index keyed by their tokens, a running slot's too
 * when another opens, and a new prompt's table lists the blocks its first
 * full blocks match (shared, not copied), or when longer the slot's own
 * history to the token (its last partial block too). The pool's admission
 * lives here too: coli_engine_kv_fits (would a new sequence of n positions
 * fit beside the open ones' blocks and promises) and coli_engine_seq_reserve
 * (the promise); coli_engine_step's runs take their blocks in the forward
 * (coli_forward_grow: all or none, -ENOSPC), shared blocks they write over
 * after a rewind copied first on the host or the dense devices
 * (copy-on-write). A new prompt gets the free slot whose own history shares
 * the longest prefix with it (ties: the one opened least recently, so an
 * unused or stale slot goes first); it keeps at most all its tokens but the
 * last (whose logits the caller needs). Hits, kept tokens and the shared
 * ones among them are counted in the engine's stats (prefix_hits,
 * prefix_saved, prefix_shared), as coli_generate counts slot 0's.
 *
 * struct coli_seq_gen is core/generate.c's loop turned inside out for one
 * sequence of a batch (colid's continuous batching): the caller owns the
 * steps (coli_engine_step over every running sequence's run), each
 * sequence's run comes from coli_seq_gen_run (its prompt's next chunk, then
 * one token a step) and its logits go to coli_seq_gen_after, which picks and
 * streams the token as coli_generate does (the same ids for the same
 * logits); alone, coli_seq_gen_spec drafts and verifies as coli_generate's
 * speculative steps do.
 *
 * A row's bits do not depend on the rows beside it on the CPU (canonical
 * reductions in every kernel, attention groups split by positions with the
 * same bits), so a kept prefix — its own or another sequence's blocks — is
 * the prefix a prefill from empty would have written, and a sequence's
 * tokens are the same alone or batched.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_internal.h"

int coli_engine_n_seq(const coli_engine_t *e)
{
	return e->kv.n_seq;
}

int coli_engine_kv_tokens(const coli_engine_t *e)
{
	return e->kv.n_blocks * COLI_KV_BLOCK;
}

int coli_engine_kv_fits(const coli_engine_t *e, int n)
{
	int want = coli_kv_blocks_of(n);

	if (n < 0 || n > e->kv.ctx || want > e->kv.n_blocks)
		return -E2BIG;
	return want <= coli_kv_room(&e->kv);
}

int coli_engine_seq_reserve(coli_engine_t *e, int slot, int n)
{
	if (slot < 0 || slot >= e->kv.n_seq || !e->kv.seq[slot].open || n < 0)
		return -EINVAL;
	return coli_kv_reserve(&e->kv, slot, n);
}

/* The free slot a prompt ids[n] gets (-1: none) and its own prefix there:
 * the longest, ties to the least recently opened. */
static int pick_slot(const coli_engine_t *e, const int *ids, int n, int *own)
{
	int best = -1;

	*own = -1;
	for (int s = 0; s < e->kv.n_seq; s++) {
		const struct coli_kv_seq *q = &e->kv.seq[s];
		int keep;

		if (q->open)
			continue;
		keep = coli_kv_own_prefix(&e->kv, s, ids, n);
		if (keep > *own || (keep == *own && q->used < e->kv.seq[best].used))
			best = s, *own = keep;
	}
	*own = best < 0 ? 0 : *own;
	return best;
}

int coli_engine_kv_fits_prompt(coli_engine_t *e, const int *ids, int n_ids, int n)
{
	int rc = coli_engine_kv_fits(e, n), own, slot, kept, cached;

	if (rc < 0 || !ids || n_ids < 1) /* too long, or nothing to share */
		return rc;
	coli_kv_publish_open(&e->kv);
	slot = pick_slot(e, ids, n_ids < n ? n_ids : n, &own);
	kept = coli_kv_open_blocks(&e->kv, slot, ids, n_ids < n ? n_ids : n, own, &cached);
	return coli_kv_blocks_of(n) - kept + cached <= coli_kv_room(&e->kv);
}

int coli_engine_seq_open(coli_engine_t *e, const int *ids, int n, int *cached)
{
	int best, best_keep, keep, shared;

	if (n < 1 || !ids)
		return -EINVAL;
	best = pick_slot(e, ids, n, &best_keep);
	if (best < 0)
		return -EBUSY;
	keep = coli_kv_open(&e->kv, best, ids, n, best_keep, &shared);
	e->kv.seq[best].open = 1;
	e->kv.seq[best].used = ++e->kv.opens;
	e->est.prefix_hits += keep > 0;
	e->est.prefix_saved += (uint64_t)keep;
	e->est.prefix_shared += (uint64_t)shared;
	if (cached)
		*cached = keep;
	return best;
}

void coli_engine_seq_close(coli_engine_t *e, int slot)
{
	if (slot < 0 || slot >= e->kv.n_seq || !e->kv.seq[slot].open)
		return;
	coli_kv_release(&e->kv, slot);
	e->kv.seq[slot].open = 0, e->kv.seq[slot].resv = 0;
}

int coli_engine_seq_pos(const coli_engine_t *e, int slot)
{
	return slot >= 0 && slot < e->kv.n_seq ? e->kv.seq[slot].pos : -EINVAL;
}

int coli_engine_seq_rewind(coli_engine_t *e, int slot, int pos)
{
	if (slot < 0 || slot >= e->kv.n_seq || pos < 0 || pos > e->kv.seq[slot].pos)
		return -EINVAL;
	e->kv.seq[slot].pos = pos;
	return 0;
}

/* The CPU's batch; with next, the rows' greedy ids from their logits. */
static int cpu_step(coli_engine_t *e, const struct coli_batch *b, float *logits, int *next)
{
	int rc = coli_forward_batch(e, b, logits), rows = 0;

	for (int r = 0; next && r < b->n_runs; r++) /* the rows asked, in run order */
		rows += b->runs[r].logits == 2 ? b->runs[r].n : b->runs[r].logits == 1;
	if (!rc && next)
		coli_argmax_rows(e, logits, rows, next);
	return rc;
}

/* The batch with the dense part on the device(s): one slot runs as
 * coli_engine_forward runs it; several through coli_forward_dev_batch, and
 * when a device fails the dense part moves (coli_engine_forward's path
 * rebuilds every slot's cache) and the step runs again. */
static int step_dev(coli_engine_t *e, const struct coli_batch *b, float *logits, int *next)
{
	const struct coli_run *R = b->runs;
	int rc;

	if (e->kv.n_seq == 1) {
		if (b->n_runs != 1 || R->slot != 0 || R->n < 1 || R->n > e->s.tmax)
			return -EINVAL;
		if (next && R->logits == 2)
			return coli_engine_forward_argmax_all(e, R->ids, R->n, logits, next);
		if (next && R->logits == 1)
			return coli_engine_forward_argmax(e, R->ids, R->n, next);
		return coli_engine_forward(e, R->ids, R->n, R->logits ? logits : NULL,
		                           R->logits == 2);
	}
	rc = coli_forward_dev_batch(e, b, logits, next);
	if (rc == 0 && e->vram.n_devs) /* between steps, as coli_engine_forward's */
		coli_moe_dev_adapt(e);
	if (rc == 0 || rc == -E2BIG || rc == -EINVAL || rc == -ENOSPC)
		return rc;
	rc = coli_engine_dense_moved(e, rc);
	if (rc)
		return rc;
	return e->dense.dd ? step_dev(e, b, logits, next) : cpu_step(e, b, logits, next);
}

/* coli_engine_step, and with next coli_engine_step_argmax. */
static int step(coli_engine_t *e, const struct coli_batch *b, float *logits, int *next)
{
	int rc;

	if (!b || b->n_runs < 1 || !b->runs)
		return -EINVAL;
	for (int r = 0; r < b->n_runs; r++) {
		int s = b->runs[r].slot;

		if (s < 0 || s >= e->kv.n_seq || !e->kv.seq[s].open || !b->runs[r].ids ||
		    (b->runs[r].logits && !logits))
			return -EINVAL;
	}
	if (e->dense.dd) {
		rc = step_dev(e, b, logits, next);
		if (rc && !e->errmsg[0])
			snprintf(e->errmsg, sizeof(e->errmsg), "%s", strerror(-rc));
		return rc;
	}
	rc = cpu_step(e, b, logits, next);
	if (!rc && e->vram.n_devs)
		coli_moe_dev_adapt(e);
	if (rc && !e->errmsg[0])
		snprintf(e->errmsg, sizeof(e->errmsg), "%s", strerror(-rc));
	return rc;
}

int coli_engine_step(coli_engine_t *e, const struct coli_batch *b, float *logits)
{
	return step(e, b, logits, NULL);
}

int coli_engine_step_argmax(coli_engine_t *e, const struct coli_batch *b, float *buf, int *next)
{
	return next && buf ? step(e, b, buf, next) : -EINVAL;
}

int coli_engine_step_last(coli_engine_t *e, const struct coli_batch *b, const float **logits)
{
	int rc;

	if (!logits || !b || (unsigned)b->n_runs > (unsigned)e->kv.n_seq)
		return -EINVAL;
	for (int r = 0; b->runs && r < b->n_runs; r++)
		if (b->runs[r].logits > 1)
			return -EINVAL;
	rc = coli_engine_step(e, b, e->s.xlogits);
	*logits = rc ? NULL : e->s.xlogits;
	return rc;
}

/* ---- one sequence of a batch, stepped by the caller ---- */

int coli_seq_gen_begin(coli_engine_t *e, struct coli_seq_gen *g, int slot, int cached,
                       const int *prompt, int n_prompt, int max_new, struct coli_sampler *s,
                       coli_gen_cb cb, void *arg)
{
	int rc;

	memset(g, 0, sizeof(*g));
	g->st.n_prompt = n_prompt;
	if (n_prompt <= 0 || cached < 0 || cached >= n_prompt)
		return -EINVAL;
	if (n_prompt + (max_new > 0 ? max_new - 1 : 0) > e->kv.ctx)
		return -E2BIG;
	g->slot = slot, g->prompt = prompt, g->n_prompt = n_prompt, g->max_new = max_new;
	g->s = s, g->cb = cb, g->arg = arg;
	g->fed = g->st.n_cached = cached;
	g->cap = e->tok ? coli_tokenizer_max_piece_bytes(e->tok) + 32 : 32;
	g->text = malloc(g->cap);
	if (!g->text)
		return -ENOMEM;
	rc = coli_gen_sampler_begin(e, s, prompt, n_prompt);
	if (rc) {
		free(g->text);
		g->text = NULL;
		return rc;
	}
	g->greedy = !coli_sampler_needs_logits(s);
	g->done = max_new <= 0;
	/* --spec as coli_generate takes it (auto: the measure decides, wherever
	 * the dense part runs) */
	if (coli_gen_spec_on(e) && (g->spec = malloc(sizeof(*g->spec))))
		coli_spec_init(g->spec, e);
	coli_detok_init(&g->dt);
	g->t0 = coli_now_s();
	return 0;
}

int coli_seq_gen_run(const struct coli_seq_gen *g, int room, struct coli_run *run)
{
	int left = g->n_prompt - g->fed;

	if (g->done || room < 1)
		return 0;
	if (left > 0) { /* the prompt's next chunk; logits after its last token */
		int n = left < room ? left : room;

		*run = (struct coli_run){
		    .slot = g->slot, .n = n, .ids = g->prompt + g->fed, .logits = n == left};
		return n;
	}
	*run = (struct coli_run){.slot = g->slot, .n = 1, .ids = &g->next, .logits = 1};
	return 1;
}

/* id, picked, as the sequence's next token: accepted by the sampler, then
 * the end (EOS, an end id), or streamed to the callback; done at max_new. */
static void take(coli_engine_t *e, struct coli_seq_gen *g, int id)
{
	const struct coli_model_config *c = &e->m.cfg;
	int n;

	coli_sampler_accept(g->s, id);
	if (coli_gen_is_eos(c, id) || (g->s->grammar && coli_gen_is_end(g->s, id))) {
		g->st.stopped_eos = 1;
		g->done = 1;
		return;
	}
	g->st.n_gen++;
	n = e->tok ? coli_detok_push(e->tok, &g->dt, id, g->text, g->cap) : 0;
	if (g->cb && g->cb(g->arg, id, g->text, (size_t)(n > 0 ? n : 0)))
		g->done = 1;
	if (g->st.n_gen >= g->max_new)
		g->done = 1;
	g->next = id;
}

int coli_seq_gen_after(coli_engine_t *e, struct coli_seq_gen *g, const struct coli_run *run,
                       const float *logits)
{
	int id;

	if (g->fed < g->n_prompt) {
		g->fed += run->n;
		if (g->fed < g->n_prompt)
			return 0;
		g->t1 = coli_now_s();
		g->st.prefill_s = g->t1 - g->t0;
	}
	id = coli_gen_pick(e, g->s, g->greedy, logits); /* as coli_generate picks it */
	if (g->step_t0 > 0) { /* a plain step the draft declined, its pick with it:
		               * --spec auto's measure */
		coli_spec_step(g->spec, coli_now_s() - g->step_t0);
		g->step_t0 = 0;
	}
	take(e, g, id);
	return 0;
}

int coli_seq_gen_spec(coli_engine_t *e, struct coli_seq_gen *g)
{
	struct coli_kv_seq *q = &e->kv.seq[g->slot];
	const int V = e->m.cfg.vocab, pos = q->pos, room = g->max_new - g->st.n_gen - 1;
	int ids[COLI_SPEC_KMAX + 1], nx[COLI_SPEC_KMAX + 1], k, j, i, rc;
	/* the draft and the token before it are one step's rows: at most tmax */
	int kmax = room < COLI_SPEC_KMAX ? room : COLI_SPEC_KMAX;
	struct coli_run run;
	double t0, t1;

	if (kmax > e->s.tmax - 1)
		kmax = e->s.tmax - 1;
	if (!g->spec || g->done || g->fed < g->n_prompt || kmax < 1 || pos + 1 >= e->kv.ctx)
		return 0;
	q->hist[pos] = g->next; /* the history, ending with the token to feed */
	k = coli_spec_draft(g->spec, q->hist, pos + 1, kmax, ids + 1);
	if (k > 0 && pos + k + 1 > e->kv.ctx)
		k = 0;
	if (k > 0 && !g->vlogits &&
	    !(g->vlogits = malloc(sizeof(float) * V * (COLI_SPEC_KMAX + 1))))
		k = 0;
	if (k <= 0) {
		g->step_t0 = coli_now_s(); /* the plain step's time, for the measure */
		return 0;
	}
	ids[0] = g->next;
	run = (struct coli_run){.slot = g->slot, .n = k + 1, .ids = ids, .logits = 2};
	t0 = coli_now_s();
	/* greedy: the rows' argmaxes (on the GPU when the dense part is there) */
	rc = g->greedy
	         ? coli_engine_step_argmax(e, &(struct coli_batch){.n_runs = 1, .runs = &run},
	                                   g->vlogits, nx)
	         : coli_engine_step(e, &(struct coli_batch){.n_runs = 1, .runs = &run}, g->vlogits);
	if (rc)
		return rc;
	t1 = coli_now_s();
	/* the tokens as the plain steps pick them, one a row while each is the
	 * draft's next (the sampler draws from the rows in order); the picks
	 * count in the verification's cost, as a plain step's pick in its own */
	for (i = j = 0;; j++) {
		const double tp = coli_now_s();
		const int id = g->greedy ? (g->s->out.id = nx[j])
		                         : coli_gen_pick(e, g->s, 0, g->vlogits + (size_t)j * V);

		t1 += coli_now_s() - tp;
		take(e, g, id), i++;
		if (g->done || j == k || id != ids[j + 1])
			break;
	}
	coli_spec_result(g->spec, k, j, t1 - t0);
	rc = coli_engine_seq_rewind(e, g->slot, pos + 1 + j); /* the inputs whose outputs count */
	return rc ? rc : i;
}

void coli_seq_gen_end(coli_engine_t *e, struct coli_seq_gen *g, int rc)
{
	if (!g->text)
		return;
	if (!rc && e->tok && g->cb) {
		int n = coli_detok_flush(e->tok, &g->dt, g->text, g->cap);

		if (n > 0)
			g->cb(g->arg, -1, g->text, (size_t)n);
	}
	if (g->t1 > 0)
		g->st.decode_s = coli_now_s() - g->t1;
	g->st.decode_steps = g->st.n_gen > 0 ? g->st.n_gen - 1 : 0;
	if (g->spec) {
		g->st.spec_drafted = g->spec->drafted, g->st.spec_accepted = g->spec->accepted;
		g->st.spec_rounds = g->spec->rounds;
		g->st.spec_cost = coli_spec_cost(g->spec);
	}
	coli_sampler_end(g->s);
	free(g->text), free(g->spec), free(g->vlogits);
	g->text = NULL, g->spec = NULL, g->vlogits = NULL;
}
