/*
 * tests/core/kv_pool_walk.c — the KV pool's bookkeeping (core/forward/
 * kv_pool.c) under random walks, without a model: sequences open (the slot
 * and prefix coli_engine_seq_open would pick), write rows, rewind, close,
 * and now and then the cache is rebuilt as after a dense device's failure,
 * on a pool small enough that eviction and copy-on-write happen all the
 * time. A row's value encodes its position and the tokens up to it (an
 * FNV hash), as real rows depend on them alone, so a block shared, copied,
 * evicted or handed to the wrong table shows as a wrong value.
 *
 * After every operation: each open slot's rows [0, pos) hold its history's
 * values; every block is free, cached or held, each by as many tables as
 * list it (refs), the cache's list holds exactly the cached blocks and the
 * counts add up; a slot's kept prefix is at most its prompt but the last
 * token. Tokens come from a 3-id vocabulary and prompts from a few shared
 * stems, so prefixes meet often. 4 seeds x 4000 operations, 4 slots, 12
 * blocks of 32, ctx 160.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"
#include "core/forward/kv.h"
#include "cpu/cpu.h"

#define N_SEQ 4
#define CTX   160
#define NB    12
#define OPS   4000

static uint64_t g_rng;

static unsigned rnd(unsigned n)
{
	g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
	return (unsigned)(g_rng % n);
}

/* The value of a row at position p after tokens ids[0..p]. */
static float row_value(const int *ids, int p)
{
	uint32_t h = 2166136261u;

	for (int i = 0; i <= p; i++)
		h = (h ^ (uint32_t)ids[i]) * 16777619u;
	return (float)(h >> 8) + (float)p / 1024.0f;
}

static float row_at(const struct coli_kv *kv, int s, int p)
{
	return ((const float *)kv->kcache)[coli_kv_row(kv, s, p) * (kv->krow / 4)];
}

static int fail(int seed, int op, const char *what)
{
	printf("seed %d op %d: %s\n", seed, op, what);
	return 1;
}

/* The pool's invariants and every open slot's rows; 0 or 1 (said). */
static int check(const struct coli_kv *kv, int seed, int op)
{
	int refs[NB] = {0}, on_free[NB] = {0}, n_lru = 0, held = 0;
	char msg[160];

	for (int s = 0; s < kv->n_seq; s++) {
		const struct coli_kv_seq *q = &kv->seq[s];

		if (q->open && !q->held)
			return fail(seed, op, "an open slot's table is not held");
		if (q->held && q->n_blk < coli_kv_blocks_of(q->pos))
			return fail(seed, op, "a held table has fewer blocks than its positions");
		for (int j = 0; q->held && j < q->n_blk; j++)
			refs[q->blk[j]]++;
		for (int p = 0; q->open && p < q->pos; p++)
			if (row_at(kv, s, p) != row_value(q->hist, p)) {
				snprintf(msg, sizeof(msg), "slot %d position %d of %d: wrong row", s,
				         p, q->pos);
				return fail(seed, op, msg);
			}
	}
	for (int i = 0; i < kv->n_free; i++) {
		if (on_free[kv->free[i]]++)
			return fail(seed, op, "a block twice on the free stack");
	}
	for (int b = kv->lru_head, prev = -1; b >= 0; prev = b, b = kv->b[b].next) {
		if (!kv->b[b].cached || kv->b[b].prev != prev || ++n_lru > NB)
			return fail(seed, op, "the cache's list is broken");
	}
	for (int b = 0; b < NB; b++) {
		const struct coli_kv_block *k = &kv->b[b];

		held += refs[b] > 0;
		if (k->ref != refs[b]) {
			snprintf(msg, sizeof(msg), "block %d: ref %d, %d tables list it", b, k->ref,
			         refs[b]);
			return fail(seed, op, msg);
		}
		if ((k->ref > 0) + k->cached + on_free[b] != 1)
			return fail(seed, op, "a block not exactly one of free, cached, held");
		if (on_free[b] && k->pub)
			return fail(seed, op, "a free block in the index");
	}
	if (n_lru != kv->n_cached || held + kv->n_cached + kv->n_free != NB)
		return fail(seed, op, "the counts do not add up");
	return 0;
}

/* Writes n tokens ids of slot s at its position (coli_kv_grow, its copies,
 * the rows), counting copies and evictions; -ENOSPC or 0. */
static int write_rows(struct coli_kv *kv, int s, const int *ids, int n, int *cows, int *evicted)
{
	struct coli_kv_seq *q = &kv->seq[s];
	struct coli_kv_cow cow[1];
	int n_cow, upto = q->pos + n, cached = kv->n_free ? -1 : kv->n_cached;
	int rc = coli_kv_grow(kv, &s, &upto, 1, cow, &n_cow);
	float row[2];

	if (rc)
		return rc;
	*evicted += cached >= 0 && kv->n_cached < cached;
	*cows += n_cow;
	for (int i = 0; i < n_cow; i++)
		coli_kv_copy_block(kv, &cow[i]);
	memcpy(q->hist + q->pos, ids, sizeof(int) * (size_t)n);
	for (int t = 0; t < n; t++) {
		row[0] = row[1] = row_value(q->hist, q->pos + t);
		coli_kv_append(kv, s, 0, q->pos + t, 1, row, row);
	}
	q->pos = upto;
	return 0;
}

/* coli_engine_seq_open's choice of a slot (core/seq.c), then the open. */
static int open_slot(struct coli_kv *kv, const int *ids, int n, int *keep)
{
	int best = -1, best_keep = -1, shared;

	for (int s = 0; s < kv->n_seq; s++) {
		int k;

		if (kv->seq[s].open)
			continue;
		k = coli_kv_own_prefix(kv, s, ids, n);
		if (k > best_keep || (k == best_keep && kv->seq[s].used < kv->seq[best].used))
			best = s, best_keep = k;
	}
	if (best < 0)
		return -1;
	*keep = coli_kv_open(kv, best, ids, n, best_keep, &shared);
	kv->seq[best].open = 1;
	kv->seq[best].used = ++kv->opens;
	return best;
}

static int walk(int seed)
{
	struct coli_model_config c;
	struct coli_kv kv;
	int stems[3][CTX], prompt[N_SEQ][CTX], plen[N_SEQ] = {0}, bad = 0;
	int hits = 0, cows = 0, evictions = 0;

	memset(&c, 0, sizeof(c));
	c.n_layers = 1, c.n_kv_heads = 1, c.head_dim = 1;
	memset(&kv, 0, sizeof(kv));
	if (coli_kv_alloc(&kv, &c, N_SEQ, CTX, COLI_KV_F32, COLI_KV_F32, NB, -1))
		return fail(seed, 0, "coli_kv_alloc");
	g_rng = 0x9e3779b97f4a7c15ull * (uint64_t)(seed + 1);
	coli_kv_scramble(&kv);
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < CTX; i++)
			stems[k][i] = (int)rnd(3);
	for (int op = 1; !bad && op <= OPS; op++) {
		int s = (int)rnd(N_SEQ), what = (int)rnd(100);
		struct coli_kv_seq *q = &kv.seq[s];

		if (what < 25) { /* a new sequence: a stem's first tokens, then its own */
			int n = 1 + (int)rnd(120), stem = (int)rnd(3), cut = (int)rnd((unsigned)n + 1);
			int ids[CTX], keep, t;

			for (int i = 0; i < n; i++)
				ids[i] = i < cut ? stems[stem][i] : (int)rnd(3);
			t = open_slot(&kv, ids, n, &keep);
			if (t < 0)
				continue;
			if (keep > n - 1 || memcmp(kv.seq[t].hist, ids, sizeof(int) * (size_t)keep))
				bad = fail(seed, op, "the kept prefix is not the prompt's");
			memcpy(prompt[t], ids, sizeof(int) * (size_t)n);
			plen[t] = n;
			hits += keep > 0;
		} else if (what < 70 && q->open) { /* a step: the prompt's rest, or tokens */
			int n = plen[s] > q->pos ? plen[s] - q->pos : 1 + (int)rnd(40), ids[CTX];

			if (q->pos + n > CTX)
				continue;
			for (int i = 0; i < n; i++)
				ids[i] = plen[s] > q->pos + i ? prompt[s][q->pos + i] : (int)rnd(3);
			write_rows(&kv, s, ids, n, &cows, &evictions); /* (-ENOSPC: unchanged) */
		} else if (what < 80 && q->open) { /* a rejected draft, or further back */
			q->pos = (int)rnd((unsigned)q->pos + 1);
			plen[s] = q->pos;
		} else if (what < 97 && q->open) {
			coli_kv_release(&kv, s);
			q->open = 0, q->resv = 0;
		} else if (what >= 97) { /* a failover: everything written again */
			unsigned char closed[N_SEQ];

			for (int t = 0; t < N_SEQ; t++)
				closed[t] = !kv.seq[t].held;
			coli_kv_flush(&kv);
			kv.rebuild = 1;
			for (int t = 0; !bad && t < N_SEQ; t++) {
				int had = kv.seq[t].pos, ids[CTX];

				memcpy(ids, kv.seq[t].hist, sizeof(int) * (size_t)had);
				kv.seq[t].pos = 0;
				if (had && write_rows(&kv, t, ids, had, &cows, &evictions))
					bad = fail(seed, op, "the rebuild found no room");
			}
			kv.rebuild = 0;
			for (int t = 0; t < N_SEQ; t++)
				if (closed[t])
					coli_kv_release(&kv, t);
		}
		bad = bad ? bad : check(&kv, seed, op);
	}
	if (!bad && (!hits || !cows || !evictions))
		bad = fail(seed, OPS, "the walk missed a path (hits, copies or evictions)");
	printf("seed %d: %d operations, %d prefix hits, %d copies-on-write, %d evictions%s\n",
	       seed, OPS, hits, cows, evictions, bad ? ": FAILED" : "");
	coli_kv_free(&kv);
	return bad;
}

int main(void)
{
	int bad = 0;

	for (int seed = 0; seed < 4; seed++)
		bad += walk(seed);
	return bad != 0;
}
