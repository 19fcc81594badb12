/*
 * core/text/tokenizer_bpe.c — the string arena, the hash tables, and BPE proper.
 *
 * BPE of one pre-token runs on a doubly linked list of symbols in an array
 * (one per initial character, or per byte for byte-level tokenizers) and a
 * binary min-heap of candidate merges ordered by (rank, position): the
 * lowest-ranked pair merges first, leftmost among equals, exactly the order
 * HF tokenizers' word.merge_all uses. A popped candidate is stale when its
 * left symbol was absorbed, it has no right neighbour any more, or the pair
 * now found there merges into a different id; stale entries are skipped, the
 * same test HF makes, so ties resolve identically. Each merge pushes at most
 * two new candidates, so a word of n symbols costs O(n log n), whatever its
 * length (a 100k-letter run is one pre-token under the Qwen2 regex).
 *
 * Scratch (symbols, heap) is malloc'd per call and sized to the word, so
 * nothing grows without bound and the tokenizer stays immutable and
 * thread-safe. No cache: the merge loop is fast enough that HF's word cache
 * would buy little here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/text/tokenizer_internal.h"

int tok_arena_add(struct coli_tokenizer *t, const void *p, size_t n, struct tok_str *out)
{
	if (t->arena_len + n + 1 > UINT32_MAX)
		return -EOVERFLOW;
	if (t->arena_len + n + 1 > t->arena_cap) {
		size_t cap = t->arena_cap ? t->arena_cap : 1 << 16;
		while (cap < t->arena_len + n + 1)
			cap *= 2;
		char *a = realloc(t->arena, cap);
		if (!a)
			return -ENOMEM;
		t->arena = a;
		t->arena_cap = cap;
	}
	memcpy(t->arena + t->arena_len, p, n);
	t->arena[t->arena_len + n] = 0; /* every string is also NUL-terminated */
	out->off = (uint32_t)t->arena_len;
	out->len = (uint32_t)n;
	t->arena_len += n + 1;
	return 0;
}

static uint64_t hash_bytes(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then a final mix */
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 32);
}

static uint64_t hash_pair(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static size_t pow2_for(size_t n)
{
	size_t cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	return cap;
}

int tok_hash_init(struct tok_hash *h, size_t n_entries)
{
	size_t cap = pow2_for(n_entries);
	h->slots = calloc(cap, sizeof(*h->slots));
	if (!h->slots)
		return -ENOMEM;
	h->mask = (uint32_t)(cap - 1);
	return 0;
}

void tok_hash_free(struct tok_hash *h)
{
	free(h->slots);
	h->slots = NULL;
}

void tok_hash_put(struct tok_hash *h, const struct coli_tokenizer *t, const struct tok_str *strs,
                  int id)
{
	const char *p = tok_s(t, strs[id]);
	size_t n = strs[id].len;
	uint32_t i = (uint32_t)hash_bytes(p, n) & h->mask;

	for (;; i = (i + 1) & h->mask) {
		uint32_t s = h->slots[i];
		if (!s) {
			h->slots[i] = (uint32_t)id + 1;
			return;
		}
		if (strs[s - 1].len == n && !memcmp(tok_s(t, strs[s - 1]), p, n))
			return;
	}
}

int tok_hash_get(const struct tok_hash *h, const struct coli_tokenizer *t,
                 const struct tok_str *strs, const char *p, size_t n)
{
	uint32_t i = (uint32_t)hash_bytes(p, n) & h->mask;

	for (;; i = (i + 1) & h->mask) {
		uint32_t s = h->slots[i];
		if (!s)
			return -1;
		if (strs[s - 1].len == n && !memcmp(tok_s(t, strs[s - 1]), p, n))
			return (int)s - 1;
	}
}

int tok_merges_init(struct coli_tokenizer *t, size_t n)
{
	size_t cap = pow2_for(n);
	t->merges = malloc(cap * sizeof(*t->merges));
	if (!t->merges)
		return -ENOMEM;
	for (size_t i = 0; i < cap; i++)
		t->merges[i].pair = UINT64_MAX;
	t->merges_mask = (uint32_t)(cap - 1);
	return 0;
}

int tok_merges_put(struct coli_tokenizer *t, int a, int b, int rank, int id)
{
	uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
	uint32_t i = (uint32_t)hash_pair(key) & t->merges_mask;

	for (;; i = (i + 1) & t->merges_mask) {
		struct tok_merge_slot *s = &t->merges[i];
		if (s->pair == key)
			return -EEXIST;
		if (s->pair == UINT64_MAX) {
			s->pair = key;
			s->rank = rank;
			s->id = id;
			t->n_merges++;
			return 0;
		}
	}
}

const struct tok_merge_slot *tok_merges_get(const struct coli_tokenizer *t, int a, int b)
{
	uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
	uint32_t i = (uint32_t)hash_pair(key) & t->merges_mask;

	if (!t->merges)
		return NULL;
	for (;; i = (i + 1) & t->merges_mask) {
		const struct tok_merge_slot *s = &t->merges[i];
		if (s->pair == key)
			return s;
		if (s->pair == UINT64_MAX)
			return NULL;
	}
}

int tok_ids_push(struct tok_ids *ids, int id)
{
	if (ids->n == ids->cap) {
		size_t cap = ids->cap ? ids->cap * 2 : 64;
		int *v = realloc(ids->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		ids->v = v;
		ids->cap = cap;
	}
	ids->v[ids->n++] = id;
	return 0;
}

/* ---- the merge loop ---- */

struct sym {
	int id;
	int prev, next; /* indices, -1 at the ends */
	int alive;
};

struct cand {
	int32_t rank;
	int32_t pos; /* index of the left symbol */
	int32_t id;  /* what the pair merges into */
};

static int cand_less(const struct cand *x, const struct cand *y)
{
	return x->rank != y->rank ? x->rank < y->rank : x->pos < y->pos;
}

struct heap {
	struct cand *v;
	size_t n;
};

static void heap_push(struct heap *h, struct cand c)
{
	size_t i = h->n++;
	while (i) {
		size_t p = (i - 1) / 2;
		if (!cand_less(&c, &h->v[p]))
			break;
		h->v[i] = h->v[p];
		i = p;
	}
	h->v[i] = c;
}

static struct cand heap_pop(struct heap *h)
{
	struct cand top = h->v[0], last = h->v[--h->n];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		const struct cand *best = &last;
		if (l < h->n && cand_less(&h->v[l], best))
			m = l, best = &h->v[l];
		if (l + 1 < h->n && cand_less(&h->v[l + 1], best))
			m = l + 1;
		if (m == i)
			break;
		h->v[i] = h->v[m];
		i = m;
	}
	if (h->n)
		h->v[i] = last;
	return top;
}

static void push_pair(const struct coli_tokenizer *t, struct heap *h, const struct sym *s, int pos)
{
	int nx = s[pos].next;
	if (nx < 0)
		return;
	const struct tok_merge_slot *m = tok_merges_get(t, s[pos].id, s[nx].id);
	if (m)
		heap_push(h, (struct cand){m->rank, pos, m->id});
}

/* Appends the initial symbols of p[0..n) to s (ids, -2 for unknown). */
static size_t initial_symbols(const struct coli_tokenizer *t, const char *p, size_t n,
                              struct sym *s)
{
	size_t k = 0;

	for (size_t i = 0; i < n;) {
		size_t cl =
		    t->byte_level ? 1 : (size_t)tok_utf8_len((const unsigned char *)p + i, n - i);
		if (!cl)
			cl = 1; /* unreachable: input was validated */
		int id = t->byte_level ? t->byte_id[(unsigned char)p[i]]
		                       : tok_hash_get(&t->key_hash, t, t->key, p + i, cl);
		if (id < 0 && t->byte_fallback) {
			size_t j;
			for (j = 0; j < cl && t->fallback_id[(unsigned char)p[i + j]] >= 0; j++)
				;
			if (j == cl) {
				for (j = 0; j < cl; j++)
					s[k++] = (struct sym){
					    t->fallback_id[(unsigned char)p[i + j]], 0, 0, 1};
				i += cl;
				continue;
			}
		}
		if (id < 0) {
			/* HF: the unknown token (fused with a preceding one when
			 * fuse_unk), or the character is dropped when there is none. */
			if (t->unk_id >= 0 && !(t->fuse_unk && k && s[k - 1].id == -2))
				s[k++] = (struct sym){-2, 0, 0, 1};
			i += cl;
			continue;
		}
		s[k++] = (struct sym){id, 0, 0, 1};
		i += cl;
	}
	for (size_t i = 0; i < k; i++) {
		if (s[i].id == -2)
			s[i].id = t->unk_id; /* merges may involve it, as in HF */
		s[i].prev = (int)i - 1;
		s[i].next = i + 1 < k ? (int)i + 1 : -1;
	}
	return k;
}

int tok_bpe_word(const struct coli_tokenizer *t, const char *p, size_t n, struct tok_ids *out)
{
	int rc = 0;

	if (!n)
		return 0;
	if (t->ignore_merges) {
		int id = tok_hash_get(&t->key_hash, t, t->key, p, n);
		if (id >= 0)
			return tok_ids_push(out, id);
	}
	/* n bytes give at most n symbols (byte fallback: one per byte); the
	 * heap sees k - 1 initial pairs and at most 2 per merge: < 3n. */
	struct sym *s = malloc(n * sizeof(*s));
	struct heap h = {malloc((3 * n + 1) * sizeof(struct cand)), 0};
	if (!s || !h.v) {
		rc = -ENOMEM;
		goto out;
	}
	size_t k = initial_symbols(t, p, n, s);
	for (size_t i = 0; i + 1 < k; i++)
		push_pair(t, &h, s, (int)i);
	while (h.n) {
		struct cand c = heap_pop(&h);
		struct sym *l = &s[c.pos];
		if (!l->alive || l->next < 0)
			continue;
		const struct tok_merge_slot *m = tok_merges_get(t, l->id, s[l->next].id);
		if (!m || m->id != c.id)
			continue; /* stale */
		struct sym *r = &s[l->next];
		l->id = c.id;
		l->next = r->next;
		r->alive = 0;
		if (l->next >= 0)
			s[l->next].prev = c.pos;
		if (l->prev >= 0)
			push_pair(t, &h, s, l->prev);
		push_pair(t, &h, s, c.pos);
	}
	for (int i = k ? 0 : -1; i >= 0 && !rc; i = s[i].next)
		rc = tok_ids_push(out, s[i].id);
out:
	free(h.v);
	free(s);
	return rc;
}
