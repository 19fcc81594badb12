/*
 * tests/text/grammar_mask.c — the token mask of constrained decoding
 * (core/text/grammar_mask.c: the trie walked with the automaton, the plain
 * string tokens taken as a set) against brute force on the demo model's
 * vocabulary (models/demo/tokenizer.json): at every step of random walks
 * under several schemas, a token is allowed exactly when the text so far
 * plus its bytes is still a prefix of a valid value (coli_grammar_match
 * from the start, no trie), special tokens never, the end id exactly when
 * the text is whole; and the sampler's own masked copy (coli_sampler_apply,
 * which reuses its last mask when the state's key has not changed) agrees,
 * as coli_grammar_mask_logits does with the rule on random words.
 * The walks draw among the allowed tokens with a seeded generator and go
 * through the sampler's accept, as a generation does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"

static int fails;

#define CHECK(c, ...)                                                                              \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			fails++;                                                                   \
		}                                                                                  \
	} while (0)

static uint64_t g_rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
	return g_rng;
}

static char *load(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *b = NULL;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc((size_t)n + 1);
	if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return b;
}

/* One walk of up to steps tokens under g; every step's mask checked. */
static void walk(const struct coli_grammar *g, const struct coli_vocab_trie *trie,
                 const coli_tokenizer_t *tok, int steps, const char *what)
{
	const int vocab = coli_tokenizer_n_vocab(tok), eos = vocab - 3; /* <|endoftext|> */
	uint64_t *allow = calloc((size_t)(vocab + 63) / 64, sizeof(*allow));
	char *text = malloc(1 << 16), *buf = malloc(1 << 16);
	int *ids = malloc(sizeof(int) * (size_t)vocab);
	float *zeros = calloc((size_t)vocab, sizeof(float)), *out = malloc(sizeof(float) * vocab);
	struct coli_sampler s;
	size_t len = 0;

	coli_sampler_init(&s, 0, 1, 0, 0);
	s.grammar = g;
	s.trie = trie;
	s.end_ids[s.n_end_ids++] = eos;
	CHECK(!coli_sampler_begin(&s, vocab, NULL, 0), "%s: begin", what);
	for (int step = 0; step < steps && s.gstate; step++) {
		int n = coli_grammar_mask(g, trie, s.gstate, s.end_ids, s.n_end_ids, allow, vocab);
		int k = 0, whole = coli_grammar_match(g, text, len) == 2, bad = 0, bad_apply = 0;

		/* the sampler's own pass (its last mask reused where the state's key
		 * is the same): -inf exactly where this mask says no */
		coli_sampler_apply(&s, zeros, vocab, out);
		for (int id = 0; id < vocab; id++)
			if ((out[id] == -INFINITY) == (int)(allow[id >> 6] >> (id & 63) & 1) &&
			    bad_apply++ < 3)
				CHECK(0, "%s, step %d: the sampler's pass differs at token %d",
				      what, step, id);

		for (int id = 0; id < vocab; id++) {
			size_t pl = 0;
			const char *p = coli_tokenizer_piece(tok, id, &pl);
			int want, got = (int)(allow[id >> 6] >> (id & 63) & 1);

			if (id == eos)
				want = whole;
			else if (coli_tokenizer_is_special(tok, id) || !p || !pl)
				want = 0;
			else {
				memcpy(buf, text, len);
				memcpy(buf + len, p, pl);
				want = coli_grammar_match(g, buf, len + pl) != 0;
			}
			if (want != got && bad++ < 3)
				CHECK(
				    0,
				    "%s, step %d after '%.*s': token %d '%.*s' allowed %d, want %d",
				    what, step, (int)len, text, id, (int)pl, p ? p : "", got, want);
			if (got)
				ids[k++] = id;
		}
		CHECK(k == n, "%s: mask count %d, bits %d", what, n, k);
		if (!k || bad)
			break;
		{
			int pick = (int)(rnd() % (uint64_t)k), id;
			size_t pl = 0;
			const char *p;

			if (ids[pick] == eos && k > 1 && rnd() % 4) /* walks of some length */
				pick = (pick + 1) % k;
			id = ids[pick];
			if (id == eos)
				break;
			coli_sampler_accept(&s, id);
			p = coli_tokenizer_piece(tok, id, &pl);
			if (len + pl < (1 << 15)) {
				memcpy(text + len, p, pl);
				len += pl;
			}
		}
	}
	coli_sampler_end(&s);
	free(allow), free(text), free(buf), free(ids), free(zeros), free(out);
}

/* coli_grammar_mask_logits against the rule, bit for bit: words all set,
 * empty and mixed, a vocabulary not a multiple of 64, in place and not. */
static void masked_copy(void)
{
	enum { V = 64 * 9 + 37 };
	static uint64_t allow[(V + 63) / 64];
	static float in[V], out[V], ref[V];

	for (int r = 0; r < 8; r++) {
		for (int w = 0; w < (V + 63) / 64; w++) {
			uint64_t k = rnd() % 4;

			allow[w] = k == 0 ? 0 : k == 1 ? ~0ull : rnd() & rnd();
		}
		for (int i = 0; i < V; i++) {
			in[i] = (float)(int64_t)(rnd() % 2001 - 1000) / 7.0f;
			out[i] = NAN;
			ref[i] = allow[i >> 6] >> (i & 63) & 1 ? in[i] : -INFINITY;
		}
		coli_grammar_mask_logits(allow, in, out, V);
		CHECK(!memcmp(out, ref, sizeof(ref)), "masked copy, round %d", r);
		coli_grammar_mask_logits(allow, in, in, V);
		CHECK(!memcmp(in, ref, sizeof(ref)), "masked copy in place, round %d", r);
	}
}

int main(void)
{
	static const char *schemas[] = {
	    NULL, /* json_object */
	    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":6},"
	    "\"n\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\","
	    "\"bc\",3]},\"maxItems\":3},\"x\":{\"anyOf\":[{\"type\":\"number\"},{\"type\":"
	    "\"null\"}]}},\"required\":[\"name\",\"n\"],\"additionalProperties\":false}",
	    "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"minLength\":2},\"minItems\":1}",
	    "{\"$defs\":{\"t\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"boolean\"},"
	    "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/t\"},\"maxItems\":2}},"
	    "\"required\":[\"k\"],\"additionalProperties\":false}},\"$ref\":\"#/$defs/t\"}",
	};
	const char *root = getenv("ROOT");
	char path[4096], err[256];
	size_t n = 0;
	char *json;
	coli_tokenizer_t *tok = NULL;
	struct coli_vocab_trie *trie = NULL;

	snprintf(path, sizeof(path), "%s/models/demo/tokenizer.json", root ? root : ".");
	json = load(path, &n);
	if (!json) {
		printf("no demo tokenizer at %s\n", path);
		return 77;
	}
	if (coli_tokenizer_load(json, n, &tok, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s: %s\n", path, err);
		return 1;
	}
	free(json);
	masked_copy();
	CHECK(!coli_vocab_trie_build(tok, &trie), "trie build");
	for (size_t i = 0; trie && i < sizeof(schemas) / sizeof(schemas[0]); i++) {
		struct coli_grammar *g = NULL;
		int rc = schemas[i] ? coli_grammar_from_schema(schemas[i], strlen(schemas[i]), &g,
		                                               err, sizeof(err))
		                    : coli_grammar_json_object(&g);

		CHECK(!rc, "schema %zu: %s", i, err);
		for (int w = 0; !rc && w < 4; w++) {
			char what[64];

			snprintf(what, sizeof(what), "schema %zu walk %d", i, w);
			walk(g, trie, tok, 60, what);
		}
		coli_grammar_free(g);
	}
	coli_vocab_trie_free(trie);
	coli_tokenizer_free(tok);
	if (fails)
		return 1;
	printf("grammar_mask: ok\n");
	return 0;
}
