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
 * out: a constrained step allows them only where the grammar names one
 * (GK_TOKEN: a family's tool-call markers) and, for the end ids, where the
 * text is whole. Their names are kept for that (special[], names[]). A token's bytes are
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
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/text/grammar_internal.h"

/* A trie over some of the tokens (all, or only the string-special ones). */
struct tarr {
	int n_nodes;
	uint8_t *byte;   /* [n_nodes] */
	uint16_t *depth; /* [n_nodes] */
	uint32_t *end;   /* [n_nodes] */
	uint32_t *tok;   /* [n_nodes] */
	uint16_t *n_tok; /* [n_nodes] */
	int32_t *ids;    /* [n_ids] its tokens in byte order */
	int n_ids;
};

struct coli_vocab_trie {
	int vocab, max_len;
	uint32_t *off; /* [vocab] a token's bytes: pool + off */
	uint16_t *len; /* [vocab] 0: left out */
	char *pool;    /* [pool_bytes] */
	size_t pool_bytes;
	int16_t *chars;  /* [vocab] code points of a plain token (string content
	                  * only: whole UTF-8, no '"', '\', control), -1 others */
	uint64_t *plain; /* [vocab / 64] the plain tokens */
	int32_t *plain_ids;
	int n_plain;
	int32_t *special; /* [n_special] the special tokens' ids (names: names[i]) */
	char **names;
	int n_special;
	struct tarr all;  /* every token left in */
	struct tarr rest; /* the tokens that are not plain, less those with a
	                   * control byte before any '"' (never taken in a string) */
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

static void tarr_free(struct tarr *a)
{
	free(a->byte), free(a->depth), free(a->end), free(a->tok), free(a->n_tok), free(a->ids);
}

void coli_vocab_trie_free(struct coli_vocab_trie *v)
{
	if (!v)
		return;
	free(v->off), free(v->len), free(v->pool), free(v->chars), free(v->plain);
	free(v->plain_ids);
	for (int i = 0; i < v->n_special; i++)
		free(v->names[i]);
	free(v->special), free(v->names);
	tarr_free(&v->all), tarr_free(&v->rest);
	free(v);
}

size_t coli_vocab_trie_bytes(const struct coli_vocab_trie *v)
{
	return sizeof(*v) + (size_t)v->vocab * (4 + 2 + 2) + (size_t)(v->vocab + 63) / 64 * 8 +
	       v->pool_bytes + (size_t)(v->all.n_ids + v->rest.n_ids + v->n_plain) * 4 +
	       (size_t)(v->all.n_nodes + v->rest.n_nodes) * (1 + 2 + 4 + 4 + 2);
}

/* Code points of b[n] as string content with nothing due before it, or -1
 * when it holds '"', '\', a control byte or anything but whole UTF-8. */
static int plain_chars(const uint8_t *b, int n)
{
	int c = 0;

	for (int i = 0; i < n; c++) {
		uint8_t x = b[i], lo = 0x80, hi = 0xbf;
		int more;

		if (x < 0x20 || x == '"' || x == '\\')
			return -1;
		more = x < 0x80   ? 0
		       : x < 0xc2 ? -1
		       : x < 0xe0 ? 1
		       : x < 0xf0 ? 2
		       : x < 0xf5 ? 3
		                  : -1;
		if (more < 0 || i + more >= n)
			return -1;
		lo = x == 0xe0 ? 0xa0 : x == 0xf0 ? 0x90 : lo;
		hi = x == 0xed ? 0x9f : x == 0xf4 ? 0x8f : hi;
		for (int k = 1; k <= more; k++, lo = 0x80, hi = 0xbf)
			if (b[i + k] < lo || b[i + k] > hi)
				return -1;
		i += 1 + more;
	}
	return c > 0x7fff ? -1 : c;
}

/* The pieces of every token into v->pool. */
static int gather(const coli_tokenizer_t *t, struct coli_vocab_trie *v)
{
	size_t cap = 1 << 16, used = 0;

	v->vocab = coli_tokenizer_n_vocab(t);
	v->off = calloc((size_t)v->vocab, sizeof(*v->off));
	v->len = calloc((size_t)v->vocab, sizeof(*v->len));
	v->all.ids = malloc(sizeof(int32_t) * (size_t)(v->vocab ? v->vocab : 1));
	v->pool = malloc(cap);
	if (!v->off || !v->len || !v->all.ids || !v->pool)
		return -ENOMEM;
	for (int id = 0; id < v->vocab; id++) {
		size_t n = 0;
		const char *p = coli_tokenizer_piece(t, id, &n);

		if (p && coli_tokenizer_is_special(t, id) && coli_tokenizer_token_str(t, id)) {
			if (v->n_special % 64 == 0) { /* (a grammar may name them: GK_TOKEN) */
				int32_t *a =
				    realloc(v->special, sizeof(*a) * (size_t)(v->n_special + 64));
				char **b =
				    realloc(v->names, sizeof(*b) * (size_t)(v->n_special + 64));

				v->special = a ? a : v->special;
				v->names = b ? b : v->names;
				if (!a || !b)
					return -ENOMEM;
			}
			v->names[v->n_special] = strdup(coli_tokenizer_token_str(t, id));
			if (!v->names[v->n_special])
				return -ENOMEM;
			v->special[v->n_special++] = id;
			continue;
		}
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
		v->all.ids[v->all.n_ids++] = id;
		v->max_len = (int)n > v->max_len ? (int)n : v->max_len;
	}
	v->pool_bytes = used;
	return 0;
}

/* a->ids[n_ids] (set) sorted and made a trie. */
static int tarr_build(struct coli_vocab_trie *v, struct tarr *a)
{
	size_t bytes = 1;
	uint32_t *path = malloc(sizeof(*path) * (size_t)(v->max_len + 1)); /* open node per depth */
	int open = 0;

	for (int i = 0; i < a->n_ids; i++)
		bytes += v->len[a->ids[i]]; /* at most one node per byte */
	qsort_r(a->ids, (size_t)a->n_ids, sizeof(*a->ids), cmp_piece, v);
	a->byte = malloc(bytes);
	a->depth = malloc(sizeof(*a->depth) * bytes);
	a->end = malloc(sizeof(*a->end) * bytes);
	a->tok = malloc(sizeof(*a->tok) * bytes);
	a->n_tok = calloc(bytes, sizeof(*a->n_tok));
	if (!a->byte || !a->depth || !a->end || !a->tok || !a->n_tok || !path) {
		free(path);
		return -ENOMEM;
	}
	for (int i = 0; i < a->n_ids; i++) {
		const uint8_t *b = (const uint8_t *)v->pool + v->off[a->ids[i]];
		int n = v->len[a->ids[i]], l = 0;

		if (i) { /* the prefix shared with the previous token stays open */
			const uint8_t *p = (const uint8_t *)v->pool + v->off[a->ids[i - 1]];
			int pn = v->len[a->ids[i - 1]];

			while (l < n && l < pn && b[l] == p[l])
				l++;
		}
		while (open > l)
			a->end[path[--open]] = (uint32_t)a->n_nodes;
		for (int d = l; d < n; d++) {
			int x = a->n_nodes++;

			a->byte[x] = b[d];
			a->depth[x] = (uint16_t)d;
			a->tok[x] = (uint32_t)i;
			path[open++] = (uint32_t)x;
		}
		if (!a->n_tok[path[n - 1]]) /* (a duplicate adds itself to the run) */
			a->tok[path[n - 1]] = (uint32_t)i;
		a->n_tok[path[n - 1]]++;
	}
	while (open > 0)
		a->end[path[--open]] = (uint32_t)a->n_nodes;
	free(path);
	return 0;
}

/* A control byte before any '"': never string content, and the string
 * cannot end before it (the rest trie leaves such tokens out). */
static int string_dead(const uint8_t *b, int n)
{
	for (int i = 0; i < n; i++) {
		if (b[i] == '"')
			return 0;
		if (b[i] < 0x20)
			return 1;
	}
	return 0;
}

int coli_vocab_trie_build(const coli_tokenizer_t *t, struct coli_vocab_trie **out)
{
	struct coli_vocab_trie *v = calloc(1, sizeof(*v));
	int rc;

	*out = NULL;
	if (!v)
		return -ENOMEM;
	rc = gather(t, v);
	if (rc)
		goto err;
	rc = -ENOMEM;
	v->chars = malloc(sizeof(*v->chars) * (size_t)(v->vocab ? v->vocab : 1));
	v->plain = calloc((size_t)(v->vocab + 63) / 64 + 1, sizeof(*v->plain));
	v->plain_ids = malloc(sizeof(int32_t) * (size_t)(v->all.n_ids + 1));
	v->rest.ids = malloc(sizeof(int32_t) * (size_t)(v->all.n_ids + 1));
	if (!v->chars || !v->plain || !v->plain_ids || !v->rest.ids)
		goto err;
	for (int id = 0; id < v->vocab; id++) {
		int c = v->len[id] ? plain_chars((const uint8_t *)v->pool + v->off[id], v->len[id])
		                   : -1;

		v->chars[id] = (int16_t)c;
		if (c > 0) {
			v->plain[id >> 6] |= 1ull << (id & 63);
			v->plain_ids[v->n_plain++] = id;
		} else if (v->len[id] &&
		           !string_dead((const uint8_t *)v->pool + v->off[id], v->len[id])) {
			v->rest.ids[v->rest.n_ids++] = id;
		}
	}
	rc = tarr_build(v, &v->all);
	rc = rc ? rc : tarr_build(v, &v->rest);
	if (rc)
		goto err;
	*out = v;
	return 0;
err:
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

int coli_vocab_trie_special_id(const struct coli_vocab_trie *v, const char *name)
{
	for (int i = 0; i < v->n_special; i++)
		if (!strcmp(v->names[i], name))
			return v->special[i];
	return -1;
}

const char *coli_vocab_trie_special_name(const struct coli_vocab_trie *v, int id)
{
	for (int i = 0; i < v->n_special; i++)
		if (v->special[i] == id)
			return v->names[i];
	return NULL;
}

static void copy_state(struct coli_grammar_state *d, const struct coli_grammar_state *s)
{
	d->depth = s->depth;
	d->dead = s->dead;
	memcpy(d->f, s->f, sizeof(*d->f) * (size_t)s->depth);
}

/* Walk trie a from st: every token whose bytes st takes into allow. */
static int walk(const struct coli_grammar *g, const struct tarr *a, int max_len,
                const struct coli_grammar_state *st, uint64_t *allow, int vocab)
{
	struct coli_grammar_state *S = malloc(sizeof(*S) * (size_t)(max_len + 1));
	int count = 0;

	for (int i = 0; S && i < a->n_nodes;) {
		int d = a->depth[i];
		struct coli_grammar_state *x = &S[d];

		copy_state(x, d ? &S[d - 1] : st);
		if (!coli_gstate_step(g, x, a->byte[i])) {
			i = (int)a->end[i];
			continue;
		}
		for (uint32_t t = a->tok[i]; t < a->tok[i] + a->n_tok[i]; t++) {
			int id = a->ids[t];

			if (id < vocab) {
				allow[id >> 6] |= 1ull << (id & 63);
				count++;
			}
		}
		i++;
	}
	free(S);
	return count;
}

/* Inside a string with nothing due (no escape, no UTF-8 continuation): a
 * plain token only adds its code points, so the plain ones are allowed as a
 * set (those that fit maxLength) and only the rest are walked. */
static int in_plain_string(const struct coli_grammar *g, const struct coli_grammar_state *st)
{
	const struct gframe *f = &st->f[st->depth - 1];

	return g->nodes[f->node].kind == GK_STRING && f->phase == 1 && !f->sub && !f->u8;
}

int coli_grammar_mask(const struct coli_grammar *g, const struct coli_vocab_trie *v,
                      const struct coli_grammar_state *st, const int *end_ids, int n_end,
                      uint64_t *allow, int vocab)
{
	int count = 0, words = (vocab + 63) / 64;

	memset(allow, 0, sizeof(*allow) * (size_t)words);
	if (st->dead || !st->depth) {
		count = 0;
	} else if (in_plain_string(g, st)) {
		const struct gframe *f = &st->f[st->depth - 1];
		uint32_t max = g->nodes[f->node].max, room = max - f->n;

		if (max == GRAMMAR_NOLIMIT) {
			int w = (v->vocab + 63) / 64 < words ? (v->vocab + 63) / 64 : words;

			for (int i = 0; i < w; i++)
				allow[i] = v->plain[i];
			if (vocab < w * 64) /* (ids past the model's vocab) */
				allow[w - 1] &= vocab % 64 ? (1ull << (vocab % 64)) - 1 : ~0ull;
			count = v->n_plain;
		} else {
			for (int i = 0; i < v->n_plain; i++) {
				int id = v->plain_ids[i];

				if ((uint32_t)v->chars[id] <= room && id < vocab) {
					allow[id >> 6] |= 1ull << (id & 63);
					count++;
				}
			}
		}
		count += walk(g, &v->rest, v->max_len, st, allow, vocab);
	} else {
		count = walk(g, &v->all, v->max_len, st, allow, vocab);
	}
	if (st->depth && !st->dead && coli_gstate_token(g, st)) { /* a special token next */
		int id = coli_vocab_trie_special_id(v, coli_gstate_token(g, st));

		if (id >= 0 && id < vocab) {
			allow[id >> 6] |= 1ull << (id & 63);
			count++;
		}
	}
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

void coli_grammar_mask_logits(const uint64_t *allow, const float *in, float *out, int vocab)
{
	const int whole = vocab / 64;
	const uint32_t ninf = 0xff800000u; /* -inf's bits */

	/* whole words as loops of a constant 64, which the compiler vectorizes:
	 * the pass is as fast as the copy it replaces (one read, one write) */
	for (int w = 0; w < whole; w++) {
		const uint64_t m = allow[w];
		const uint32_t *x = (const uint32_t *)(const void *)(in + w * 64);
		uint32_t *y = (uint32_t *)(void *)(out + w * 64);

		if (m == ~0ull) {
			if (in != out)
				memcpy(y, x, 64 * sizeof(*y));
		} else if (!m) {
			for (int i = 0; i < 64; i++)
				y[i] = ninf;
		} else {
			for (int i = 0; i < 64; i++) { /* -inf's bits where the bit is 0 */
				uint32_t keep = 0u - (uint32_t)(m >> i & 1);

				y[i] = (x[i] & keep) | (ninf & ~keep);
			}
		}
	}
	for (int i = whole * 64; i < vocab; i++)
		out[i] = allow[i >> 6] >> (i & 63) & 1 ? in[i] : -INFINITY;
}
