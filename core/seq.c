/*
 * core/seq.c — sequence slots and the batched step (core/coli.h "several
 * sequences"): which slot a new sequence gets, its position and rewind, and
 * coli_engine_step, one forward over the runs of several slots.
 *
 * The slots are the KV cache's (struct coli_kv_seq, core/forward/kv.h:
 * n_seq of them, each [n_layers][ctx] rows, pos, hist, open, used). A slot
 * keeps its rows and history after its sequence closes: that is the prefix
 * cache, with as many entries as slots. A new prompt gets the free slot
 * whose history shares the longest prefix with it (ties: the one opened
 * least recently, so an unused or stale slot goes first), and keeps that
 * prefix, at most all its tokens but the last (whose logits the caller
 * needs). Hits and kept tokens are counted in the engine's stats
 * (prefix_hits, prefix_saved), as coli_generate counts slot 0's.
 *
 * A row's bits do not depend on the rows beside it on the CPU (canonical
 * reductions in every kernel, attention groups split by positions with the
 * same bits), so a kept prefix is the prefix a prefill from empty would have
 * written, and a sequence's tokens are the same alone or batched.
 */
#include <errno.h>
#include <string.h>

#include "core/core_internal.h"

int coli_engine_n_seq(const coli_engine_t *e)
{
	return e->kv.n_seq;
}

/* Tokens of slot q's history that ids[n] starts with, at most n - 1. */
static int shared_prefix(const struct coli_kv_seq *q, const int *ids, int n)
{
	int have = q->pos < n - 1 ? q->pos : n - 1, keep = 0;

	while (keep < have && q->hist[keep] == ids[keep])
		keep++;
	return keep;
}

int coli_engine_seq_open(coli_engine_t *e, const int *ids, int n, int *cached)
{
	int best = -1, best_keep = -1;

	if (n < 1 || !ids)
		return -EINVAL;
	for (int s = 0; s < e->kv.n_seq; s++) {
		const struct coli_kv_seq *q = &e->kv.seq[s];
		int keep;

		if (q->open)
			continue;
		keep = shared_prefix(q, ids, n);
		if (keep > best_keep || (keep == best_keep && q->used < e->kv.seq[best].used))
			best = s, best_keep = keep;
	}
	if (best < 0)
		return -EBUSY;
	e->kv.seq[best].open = 1;
	e->kv.seq[best].used = ++e->kv.opens;
	e->kv.seq[best].pos = best_keep;
	e->est.prefix_hits += best_keep > 0;
	e->est.prefix_saved += (uint64_t)best_keep;
	if (cached)
		*cached = best_keep;
	return best;
}

void coli_engine_seq_close(coli_engine_t *e, int slot)
{
	if (slot >= 0 && slot < e->kv.n_seq)
		e->kv.seq[slot].open = 0;
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

/* The dense part on a device holds one slot (core/engine.c keeps it on the
 * CPU with more): the batch is one run of slot 0, through the device's
 * forward as coli_engine_forward runs it. Batching the runs of several
 * slots on the dense device is the next step. */
static int step_dev(coli_engine_t *e, const struct coli_batch *b, float *logits)
{
	const struct coli_run *R = b->runs;

	if (b->n_runs != 1 || R->slot != 0 || R->n < 1 || R->n > e->s.tmax)
		return -EINVAL;
	return coli_engine_forward(e, R->ids, R->n, R->logits ? logits : NULL, R->logits == 2);
}

int coli_engine_step(coli_engine_t *e, const struct coli_batch *b, float *logits)
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
	if (e->dense.dd)
		return step_dev(e, b, logits);
	rc = coli_forward_batch(e, b, logits);
	if (!rc && e->vram.n_devs)
		coli_moe_dev_adapt(e);
	if (rc && !e->errmsg[0])
		snprintf(e->errmsg, sizeof(e->errmsg), "%s", strerror(-rc));
	return rc;
}
