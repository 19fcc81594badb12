/*
 * core/forward/kv_pool.c — the KV pool's blocks (core/forward/kv.h): which
 * table holds each, the cache of released ones, and the index through which
 * a new prompt shares the blocks of an earlier one with the same tokens:
 * the prefix cache, as large as the pool.
 *
 * A block is free (on the free stack), held (ref tables list it: open
 * slots', and slot 0's for the single-sequence calls, which never close) or
 * cached (no table holds it, its rows kept, on the LRU list). A block is
 * taken from the free stack, else the least recently released cached one
 * is evicted. A closing slot releases its blocks from the last to the
 * first, so a chain's later blocks are evicted before its earlier ones (a
 * block shared again is released again later, so this stays true).
 *
 * The index. A slot's full blocks below its position (final rows) are
 * published when it closes and, for running slots, when another slot opens
 * (so that 8 clients sending one system prompt prefill it once as long as
 * the others arrive after the first has). A block is published under a
 * 64-bit hash of its chain's tokens (the previous block's key and its own
 * 32 ids); a lookup also compares the ids and the previous block's id and
 * generation, so a collision cannot hand out wrong rows. A prompt walks its
 * full blocks through the index from position 0 (coli_kv_open) and its
 * table lists the blocks found, no copy. The rows a step writes depend on
 * the tokens and positions alone (the canonical reductions), so a block
 * published twice for the same chain (two prompts prefilled in one step)
 * holds the same bytes: the later is dropped for the earlier.
 *
 * Generations. b->gen moves on when a block's rows stop being the rows
 * they were: it is freed, evicted, or written over. A closed slot's table
 * keeps its ids with their generations (bgen): its next open keeps its own
 * history, to the token, up to its first block whose generation moved on.
 *
 * Writing (coli_kv_grow). A step writes a slot's rows from its position
 * on. After a rewind, or a prompt that kept part of a block, the position
 * may sit inside or below blocks that other tables hold or the index
 * lists: the blocks past the position's own are let go (the step takes new
 * ones), and the position's block, when another table holds it too or the
 * index lists it, is replaced by a new block whose rows below the position
 * the caller copies (copy-on-write, on the host or the dense devices:
 * core/forward/forward.c coli_forward_grow); else it takes a new generation
 * (a closed slot's weak table may still list it: tests/core/kv_pool_walk
 * found that one).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/forward/kv.h"

#define B COLI_KV_BLOCK

int coli_kv_pool_alloc(struct coli_kv *kv)
{
	const int n = kv->n_blocks;

	kv->n_bucket = 64;
	while (kv->n_bucket < n) /* (about a block a bucket) */
		kv->n_bucket *= 2;
	kv->b = calloc((size_t)n, sizeof(*kv->b));
	kv->btok = malloc(sizeof(int) * B * (size_t)n);
	kv->bucket = malloc(sizeof(int) * (size_t)kv->n_bucket);
	kv->free = malloc(sizeof(int) * (size_t)n);
	if (!kv->b || !kv->btok || !kv->bucket || !kv->free)
		return -ENOMEM;
	memset(kv->bucket, 0xff, sizeof(int) * (size_t)kv->n_bucket);
	/* the stack pops block 0 first: one slot's blocks ascend */
	for (int b = 0; b < n; b++)
		kv->free[b] = n - 1 - b;
	kv->n_free = n;
	kv->lru_head = kv->lru_tail = -1;
	return 0;
}

void coli_kv_pool_free(struct coli_kv *kv)
{
	free(kv->b), free(kv->btok), free(kv->bucket), free(kv->free);
	kv->b = NULL, kv->btok = NULL, kv->bucket = NULL, kv->free = NULL;
}

void coli_kv_scramble(struct coli_kv *kv)
{
	uint64_t x = 0x9e3779b97f4a7c15ull; /* a fixed seed: the same order every run */

	for (int i = kv->n_free - 1; i > 0; i--) { /* Fisher-Yates, xorshift64 */
		int j, t;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		j = (int)(x % (uint64_t)(i + 1));
		t = kv->free[i], kv->free[i] = kv->free[j], kv->free[j] = t;
	}
}

/* ---- the index ---- */

static uint64_t chain_key(uint64_t prev, const int *ids)
{
	uint64_t h = prev ^ 0x243f6a8885a308d3ull;

	for (int i = 0; i < B; i++) { /* splitmix64's finalizer a token */
		h += (uint64_t)(uint32_t)ids[i] + 0x9e3779b97f4a7c15ull;
		h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
		h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
		h ^= h >> 31;
	}
	return h;
}

/* The key a block after block `prev` (-1: the first) with ids would have. */
static uint64_t key_after(const struct coli_kv *kv, int prev, const int *ids)
{
	return chain_key(prev < 0 ? 0 : kv->b[prev].key, ids);
}

/* The published block that follows `prev` (-1: none) with ids, or -1. */
static int find(const struct coli_kv *kv, int prev, const int *ids)
{
	const uint64_t key = key_after(kv, prev, ids);

	for (int b = kv->bucket[key & (uint64_t)(kv->n_bucket - 1)]; b >= 0; b = kv->b[b].hnext) {
		const struct coli_kv_block *k = &kv->b[b];

		if (k->key == key && k->parent == prev &&
		    (prev < 0 || k->pgen == kv->b[prev].gen) &&
		    !memcmp(kv->btok + (size_t)b * B, ids, sizeof(int) * B))
			return b;
	}
	return -1;
}

static void publish(struct coli_kv *kv, int b, int prev, const int *ids)
{
	struct coli_kv_block *k = &kv->b[b];
	int *head;

	k->key = key_after(kv, prev, ids);
	k->parent = prev;
	k->pgen = prev < 0 ? 0 : kv->b[prev].gen;
	memcpy(kv->btok + (size_t)b * B, ids, sizeof(int) * B);
	head = &kv->bucket[k->key & (uint64_t)(kv->n_bucket - 1)];
	k->hnext = *head;
	*head = b;
	k->pub = 1;
}

static void unpublish(struct coli_kv *kv, int b)
{
	int *at = &kv->bucket[kv->b[b].key & (uint64_t)(kv->n_bucket - 1)];

	if (!kv->b[b].pub)
		return;
	while (*at != b)
		at = &kv->b[*at].hnext;
	*at = kv->b[b].hnext;
	kv->b[b].pub = 0;
}

/* ---- holding and letting go ---- */

static void lru_del(struct coli_kv *kv, int b)
{
	struct coli_kv_block *k = &kv->b[b];

	*(k->prev >= 0 ? &kv->b[k->prev].next : &kv->lru_head) = k->next;
	*(k->next >= 0 ? &kv->b[k->next].prev : &kv->lru_tail) = k->prev;
	k->cached = 0;
	kv->n_cached--;
}

static void lru_add(struct coli_kv *kv, int b) /* the most recent */
{
	struct coli_kv_block *k = &kv->b[b];

	k->prev = kv->lru_tail, k->next = -1;
	*(kv->lru_tail >= 0 ? &kv->b[kv->lru_tail].next : &kv->lru_head) = b;
	kv->lru_tail = b;
	k->cached = 1;
	kv->n_cached++;
}

/* b's rows are no longer what they were: out of the index, a new generation. */
static void retire(struct coli_kv *kv, int b)
{
	unpublish(kv, b);
	kv->b[b].gen++;
}

static void hold(struct coli_kv *kv, int b)
{
	if (kv->b[b].cached)
		lru_del(kv, b);
	kv->b[b].ref++;
}

/* One reference to b let go; unheld, it is cached when keep or in the
 * index (its rows serve a later prompt), else freed. */
static void drop(struct coli_kv *kv, int b, int keep)
{
	if (--kv->b[b].ref > 0)
		return;
	if (keep || kv->b[b].pub) {
		lru_add(kv, b);
	} else {
		retire(kv, b);
		kv->free[kv->n_free++] = b;
	}
}

/* A block for a table (coli_kv_room said there is): the free stack's top,
 * else the least recently released cached block, evicted. */
static int take(struct coli_kv *kv)
{
	int b;

	if (kv->n_free) {
		b = kv->free[--kv->n_free];
	} else {
		b = kv->lru_head;
		lru_del(kv, b);
		retire(kv, b);
	}
	kv->b[b].ref = 1;
	return b;
}

/* Slot q's table entries from j on let go. */
static void let_go(struct coli_kv *kv, struct coli_kv_seq *q, int j)
{
	while (q->n_blk > j)
		drop(kv, q->blk[--q->n_blk], 0);
	if (q->n_pub > j)
		q->n_pub = j;
}

int coli_kv_room(const struct coli_kv *kv)
{
	long room = kv->n_free + kv->n_cached;

	for (int s = 0; s < kv->n_seq; s++) {
		const struct coli_kv_seq *q = &kv->seq[s];

		if (q->open && q->resv > q->n_blk)
			room -= q->resv - q->n_blk;
	}
	return room > 0 ? (int)room : 0;
}

void coli_kv_counts(const struct coli_kv *kv, int *in_use, int *cached)
{
	*cached = kv->n_cached;
	*in_use = kv->n_blocks - kv->n_free - kv->n_cached;
}

/* ---- a step's blocks ---- */

/* Slot q's position's block needs a copy before q writes into it: q's rows
 * below pos there are shared with another table, or in the index (a prompt
 * that kept a few tokens of a closed slot's history would otherwise write
 * over a block other prompts find). */
static int needs_copy(const struct coli_kv *kv, const struct coli_kv_seq *q)
{
	const int j = q->pos / B;

	return !kv->rebuild && q->pos % B && j < q->n_blk &&
	       (kv->b[q->blk[j]].ref > 1 || kv->b[q->blk[j]].pub);
}

/* Closed slot q's weak table held again, its first nb blocks (their rows
 * still its own: coli_kv_own_prefix), the rest forgotten. */
static void rehold(struct coli_kv *kv, struct coli_kv_seq *q, int nb)
{
	q->n_blk = nb < q->n_blk ? nb : q->n_blk;
	for (int j = 0; j < q->n_blk; j++)
		hold(kv, q->blk[j]);
	if (q->n_pub > q->n_blk)
		q->n_pub = q->n_blk;
	q->held = 1;
}

int coli_kv_grow(struct coli_kv *kv, const int *slot, const int *upto, int n,
                 struct coli_kv_cow *cow, int *n_cow)
{
	long need = 0;

	*n_cow = 0;
	for (int i = 0; i < n; i++) { /* a closed slot 0 a single-sequence call writes */
		struct coli_kv_seq *q = &kv->seq[slot[i]];

		if (!q->held) {
			for (int j = 0; j < coli_kv_blocks_of(q->pos) && j < q->n_blk; j++)
				if (kv->b[q->blk[j]].gen != q->bgen[j]) /* its rows are gone */
					return -EINVAL; /* (coli_engine_reset first) */
			rehold(kv, q, coli_kv_blocks_of(q->pos));
		}
	}
	for (int i = 0; i < n; i++) {
		const struct coli_kv_seq *q = &kv->seq[slot[i]];
		/* the blocks it keeps (past pos's own let go), what it adds */
		int keep = kv->rebuild ? q->n_blk : coli_kv_blocks_of(q->pos), want;
		int owed = q->open && q->resv > q->n_blk ? q->resv - q->n_blk : 0, add;

		if (upto[i] > kv->ctx)
			return -E2BIG;
		keep = keep < q->n_blk ? keep : q->n_blk;
		want = coli_kv_blocks_of(upto[i]);
		add = (want > keep ? want - keep : 0) + needs_copy(kv, q);
		/* what its promise covers is its own; the rest of it stays kept */
		need += add > owed ? add - owed : 0;
	}
	if (need > coli_kv_room(kv))
		return -ENOSPC;
	for (int i = 0; i < n; i++) {
		struct coli_kv_seq *q = &kv->seq[slot[i]];
		const int j = q->pos / B;

		if (!kv->rebuild) {
			let_go(kv, q, coli_kv_blocks_of(q->pos));
			if (needs_copy(kv, q)) {
				const int src = q->blk[j];

				cow[(*n_cow)++] = (struct coli_kv_cow){src, take(kv), q->pos % B};
				q->blk[j] = cow[*n_cow - 1].dst;
				drop(kv, src, 0);
			} else if (j < q->n_blk) { /* written over, its alone: a closed
				                    * slot's weak table may list it */
				kv->b[q->blk[j]].gen++;
			}
			if (q->n_pub > j)
				q->n_pub = j;
		}
		while (q->n_blk < coli_kv_blocks_of(upto[i]))
			q->blk[q->n_blk++] = take(kv);
	}
	return 0;
}

int coli_kv_reserve(struct coli_kv *kv, int s, int n)
{
	struct coli_kv_seq *q = &kv->seq[s];
	int want = coli_kv_blocks_of(n < kv->ctx ? n : kv->ctx);
	int owed = q->open && q->resv > q->n_blk ? q->resv - q->n_blk : 0; /* (room took it off) */

	if (n > 0 && want > q->n_blk && want - q->n_blk > coli_kv_room(kv) + owed)
		return -ENOSPC;
	q->resv = n > 0 ? want : 0;
	return 0;
}

/* ---- opening and closing ---- */

int coli_kv_own_prefix(const struct coli_kv *kv, int s, const int *ids, int n)
{
	const struct coli_kv_seq *q = &kv->seq[s];
	int have = q->pos < n - 1 ? q->pos : n - 1, keep = 0;

	while (keep < have && q->hist[keep] == ids[keep])
		keep++;
	for (int j = 0; !q->held && j < coli_kv_blocks_of(keep); j++)
		if (kv->b[q->blk[j]].gen != q->bgen[j])
			return j * B; /* taken for another use since */
	return keep;
}

/* Slot q's full final blocks published (those past n_pub), each swapped
 * for the index's own when it already lists that chain. */
static void publish_slot(struct coli_kv *kv, struct coli_kv_seq *q)
{
	const int full = q->pos / B < q->n_blk ? q->pos / B : q->n_blk;

	for (int j = q->n_pub; j < full; j++) {
		const int *ids = q->hist + (size_t)j * B, prev = j ? q->blk[j - 1] : -1;
		int b = q->blk[j], was = kv->b[b].pub ? -1 : find(kv, prev, ids);

		if (kv->b[b].pub)
			continue;
		if (was >= 0) { /* the same rows (its header says why): share them */
			hold(kv, was);
			q->blk[j] = was;
			drop(kv, b, 0);
		} else {
			publish(kv, b, prev, ids);
		}
	}
	if (q->n_pub < full)
		q->n_pub = full;
}

/* Blocks of the index that ids[n]'s first full blocks match, none holding
 * its last token. */
static int index_prefix(const struct coli_kv *kv, const int *ids, int n)
{
	int m = 0;

	for (int prev = -1; (m + 1) * B <= n - 1; m++)
		if ((prev = find(kv, prev, ids + (size_t)m * B)) < 0)
			break;
	return m;
}

void coli_kv_publish_open(struct coli_kv *kv)
{
	for (int t = 0; t < kv->n_seq; t++)
		if (kv->seq[t].held && kv->seq[t].open)
			publish_slot(kv, &kv->seq[t]);
}

int coli_kv_open_blocks(const struct coli_kv *kv, int s, const int *ids, int n, int own,
                        int *cached)
{
	const struct coli_kv_seq *q = s >= 0 ? &kv->seq[s] : NULL;
	int m = index_prefix(kv, ids, n), nb = coli_kv_blocks_of(own);

	*cached = 0;
	if (!q || m * B > own) { /* coli_kv_open's choice */
		for (int j = 0, prev = -1; j < m; j++) {
			prev = find(kv, prev, ids + (size_t)j * B);
			*cached += kv->b[prev].cached;
		}
		return m;
	}
	nb = nb < q->n_blk ? nb : q->n_blk;
	for (int j = 0; !q->held && j < nb; j++)
		*cached += kv->b[q->blk[j]].cached;
	return nb;
}

int coli_kv_open(struct coli_kv *kv, int s, const int *ids, int n, int own, int *shared)
{
	struct coli_kv_seq *q = &kv->seq[s];
	int m, keep;

	coli_kv_publish_open(kv); /* the running slots' prefills findable */
	m = index_prefix(kv, ids, n);
	*shared = 0;
	if (m * B > own) {
		/* (what it held goes first: a block the chain lists is in the
		 * index, so it is cached, not freed) */
		if (q->held)
			let_go(kv, q, 0);
		q->n_blk = 0;
		for (int j = 0, prev = -1; j < m; j++) {
			prev = find(kv, prev, ids + (size_t)j * B);
			hold(kv, prev);
			q->blk[q->n_blk++] = prev;
		}
		q->n_pub = m;
		keep = m * B;
		*shared = keep;
		memcpy(q->hist, ids, sizeof(int) * (size_t)keep);
	} else { /* its own table, to the token */
		int nb = coli_kv_blocks_of(own);

		if (q->held)
			let_go(kv, q, nb);
		else
			rehold(kv, q, nb);
		keep = own;
	}
	q->held = 1;
	q->pos = keep;
	return keep;
}

void coli_kv_release(struct coli_kv *kv, int s)
{
	struct coli_kv_seq *q = &kv->seq[s];
	const int rows = coli_kv_blocks_of(q->pos); /* the blocks with its final rows */

	if (!q->held)
		return;
	publish_slot(kv, q);
	for (int j = q->n_blk - 1; j >= 0; j--) { /* last first: evicted first */
		q->bgen[j] = kv->b[q->blk[j]].gen;
		drop(kv, q->blk[j], j < rows);
	}
	q->n_pub = 0;
	q->held = 0;
}

void coli_kv_flush(struct coli_kv *kv)
{
	for (int s = 0; s < kv->n_seq; s++) { /* closed: its own rows, held to be rebuilt */
		struct coli_kv_seq *q = &kv->seq[s];
		int j = 0;

		if (q->held)
			continue;
		while (j < coli_kv_blocks_of(q->pos) && j < q->n_blk &&
		       kv->b[q->blk[j]].gen == q->bgen[j])
			j++;
		if (q->pos > j * B)
			q->pos = j * B;
		rehold(kv, q, j);
	}
	while (kv->lru_head >= 0) {
		int b = kv->lru_head;

		lru_del(kv, b);
		retire(kv, b);
		kv->free[kv->n_free++] = b;
	}
	for (int b = 0; b < kv->n_blocks; b++)
		unpublish(kv, b);
	for (int s = 0; s < kv->n_seq; s++)
		kv->seq[s].n_pub = 0;
}
