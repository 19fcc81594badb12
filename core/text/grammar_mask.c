/*
 * core/text/grammar_mask.c — the vocabulary as a trie of bytes, and the mask
 * of a constrained step: the tokens whose bytes the grammar's automaton
 * takes from its current state.
 *
 * The trie is stored flat in preorder (one node per distinct prefix of a
 * token's bytes), each node's fields in parallel arrays:
 *
 *   byte[i]   the byte that leads from its parent to node i
 *   depth[i]  its parent's depth: node i is the prefix of depth[i] + 1 bytes
 *   end[i]    the first node after i's subtree (preorder: skipping it)
 *   tok[i]    tokens whose bytes are exactly that prefix: ids[tok[i] ..
 *             tok[i] + n_tok[i]) (tokens sorted by bytes, so they are a run)
 *
 * Special tokens (added and marked special) and tokens of no bytes are left
 * out: a constrained step never allows them, EOS aside. A token's bytes are
 * coli_tokenizer_piece's (the stream's leading-space strip of some
 * SentencePiece decoders is not applied: their first token may differ).
 *
 * The mask walks the array once: node i's state is its parent's (kept per
 * depth) stepped by byte[i]; a byte refused skips the subtree (i = end[i]),
 * so the walk visits only the prefixes the automaton takes and their
 * children. A state copy moves only the frames in use. Cost and memory:
 * `coli bench constrain` (docs/api.md, Structured output).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/text/grammar_internal.h"

struct coli_vocab_trie {
	int vocab;
	uint32_t *off; /* [vocab] a token's bytes: pool + off */
	uint16_t *len; /* [vocab] 0: left out */
	char *pool;    /* [pool_bytes] */
	size_t pool_bytes;
	int n_nodes, max_len;
	uint8_t *byte;   /* [n_nodes] */
	uint16_t *depth; /* [n_nodes] */
	uint32_t *end;   /* [n_nodes] */
	uint32_t *tok;   /* [n_nodes] */
	uint16_t *n_tok; /* [n_nodes] */
	int32_t *ids;    /* [n_ids] the tokens in byte order */
	int n_ids;
};

static int cmp_piece(const void *a, const void *b, void *arg)
{
	const struct coli_vocab_trie *v = arg;
	int x = *(const int32_t *)a, y = *(const int32_t *)b;
	size_t n = v->len[x] < v->len[y] ? v->len[x] : v->len[y];
	int c = memcmp(v->pool + v->off[x], v->pool + v->off[y], n);

	if (c)
		return c;
	if (v->len[x] != v->len[y])
		return v->len[x] < v->len[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

void coli_vocab_trie_free(struct coli_vocab_trie *v)
{
	if (!v)
		return;
	free(v->off), free(v->len), free(v->pool);
	free(v->byte), free(v->depth), free(v->end), free(v->tok), free(v->n_tok), free(v->ids);
	free(v);
}

size_t coli_vocab_trie_bytes(const struct coli_vocab_trie *v)
{
	return sizeof(*v) + (size_t)v->vocab * 6 + v->pool_bytes + (size_t)v->n_ids * 4 +
	       (size_t)v->n_nodes * (1 + 2 + 4 + 4 + 2);
}

/* The pieces of every token into v->pool. */
static int gather(const coli_tokenizer_t *t, struct coli_vocab_trie *v)
{
	size_t cap = 1 << 16, used = 0;

	v->vocab = coli_tokenizer_n_vocab(t);
	v->off = calloc((size_t)v->vocab, sizeof(*v->off));
	v->len = calloc((size_t)v->vocab, sizeof(*v->len));
	v->ids = malloc(sizeof(*v->ids) * (size_t)(v->vocab ? v->vocab : 1));
	v->pool = malloc(cap);
	if (!v->off || !v->len || !v->ids || !v->pool)
		return -ENOMEM;
	for (int id = 0; id < v->vocab; id++) {
		size_t n = 0;
		const char *p = coli_tokenizer_piece(t, id, &n);

		if (!p || !n || n > 0xffff || coli_tokenizer_is_special(t, id))
			continue;
		if (used + n > cap) {
			char *q;

			while (used + n > cap)
				cap *= 2;
			q = realloc(v->pool, cap);
			if (!q)
				return -ENOMEM;
			v->pool = q;
		}
		memcpy(v->pool + used, p, n);
		v->off[id] = (uint32_t)used;
		v->len[id] = (uint16_t)n;
		used += n;
		v->ids[v->n_ids++] = id;
		v->max_len = (int)n > v->max_len ? (int)n : v->max_len;
	}
	v->pool_bytes = used;
	return 0;
}

int coli_vocab_trie_build(const coli_tokenizer_t *t, struct coli_vocab_trie **out)
{
	struct coli_vocab_trie *v = calloc(1, sizeof(*v));
	uint32_t *path = NULL; /* [max_len] the open node of each depth */
	int open = 0, rc;

	*out = NULL;
	if (!v)
		return -ENOMEM;
	rc = gather(t, v);
	if (rc)
		goto err;
	qsort_r(v->ids, (size_t)v->n_ids, sizeof(*v->ids), cmp_piece, v);
	/* at most one node per byte of the pool */
	v->byte = malloc(v->pool_bytes + 1);
	v->depth = malloc(sizeof(*v->depth) * (v->pool_bytes + 1));
	v->end = malloc(sizeof(*v->end) * (v->pool_bytes + 1));
	v->tok = malloc(sizeof(*v->tok) * (v->pool_bytes + 1));
	v->n_tok = calloc(v->pool_bytes + 1, sizeof(*v->n_tok));
	path = malloc(sizeof(*path) * (size_t)(v->max_len + 1));
	rc = -ENOMEM;
	if (!v->byte || !v->depth || !v->end || !v->tok || !v->n_tok || !path)
		goto err;
	for (int i = 0; i < v->n_ids; i++) {
		const uint8_t *b = (const uint8_t *)v->pool + v->off[v->ids[i]];
		int n = v->len[v->ids[i]], l = 0;

		if (i) { /* the prefix shared with the previous token stays open */
			const uint8_t *p = (const uint8_t *)v->pool + v->off[v->ids[i - 1]];
			int pn = v->len[v->ids[i - 1]];

			while (l < n && l < pn && b[l] == p[l])
				l++;
		}
		while (open > l)
			v->end[path[--open]] = (uint32_t)v->n_nodes;
		for (int d = l; d < n; d++) {
			int x = v->n_nodes++;

			v->byte[x] = b[d];
			v->depth[x] = (uint16_t)d;
			v->tok[x] = (uint32_t)i;
			path[open++] = (uint32_t)x;
		}
		if (!v->n_tok[path[n - 1]]) /* (a duplicate adds itself to the run) */
			v->tok[path[n - 1]] = (uint32_t)i;
		v->n_tok[path[n - 1]]++;
	}
	while (open > 0)
		v->end[path[--open]] = (uint32_t)v->n_nodes;
	free(path);
	*out = v;
	return 0;
err:
	free(path);
	coli_vocab_trie_free(v);
	return rc;
}

/* The token's bytes (*len; 0: left out of the trie). */
const char *coli_vocab_trie_piece(const struct coli_vocab_trie *v, int id, size_t *len)
{
	if (id < 0 || id >= v->vocab) {
		*len = 0;
		return NULL;
	}
	*len = v->len[id];
	return v->pool + v->off[id];
}

static void copy_state(struct coli_grammar_state *d, const struct coli_grammar_state *s)
{
	d->depth = s->depth;
	d->dead = s->dead;
	memcpy(d->f, s->f, sizeof(*d->f) * (size_t)s->depth);
}

int coli_grammar_mask(const struct coli_grammar *g, const struct coli_vocab_trie *v,
                      const struct coli_grammar_state *st, const int *end_ids, int n_end,
                      uint64_t *allow, int vocab)
{
	struct coli_grammar_state *S;
	int count = 0;

	memset(allow, 0, sizeof(*allow) * (size_t)((vocab + 63) / 64));
	S = st->dead || !st->depth ? NULL : malloc(sizeof(*S) * (size_t)(v->max_len + 1));
	for (int i = 0; S && i < v->n_nodes;) {
		int d = v->depth[i];
		struct coli_grammar_state *x = &S[d];

		copy_state(x, d ? &S[d - 1] : st);
		if (!coli_gstate_step(g, x, v->byte[i])) {
			i = (int)v->end[i];
			continue;
		}
		for (uint32_t t = v->tok[i]; t < v->tok[i] + v->n_tok[i]; t++) {
			int id = v->ids[t];

			if (id < vocab) {
				allow[id >> 6] |= 1ull << (id & 63);
				count++;
			}
		}
		i++;
	}
	free(S);
	/* the end: where the text is whole, or where nothing else can go */
	if (coli_gstate_accepting(g, st) || !count)
		for (int i = 0; i < n_end; i++)
			if (end_ids[i] >= 0 && end_ids[i] < vocab &&
			    !(allow[end_ids[i] >> 6] >> (end_ids[i] & 63) & 1)) {
				allow[end_ids[i] >> 6] |= 1ull << (end_ids[i] & 63);
				count++;
			}
	return count;
}
