/*
 * tools/bench/bench_constrain.c — `coli bench constrain`: the cost of a
 * constrained step's token mask (core/text/grammar_mask.c) at a real
 * vocabulary size, next to the share of a decode step it may take.
 *
 * The vocabulary: a byte-level BPE tokenizer.json (the demo model's by
 * default) padded to --vocab tokens (151936, Qwen3's) with tokens made of
 * two of its own, so the bytes look like a trained vocabulary's (words,
 * leading spaces, indentation, punctuation runs). The trie is built once
 * (its time and memory printed), then the mask is timed in states that
 * span the cheap and the dear ones: a key about to open, inside a string
 * (most tokens allowed: the whole trie walked), inside a number, an array
 * of any values. Each state is reached by feeding its prefix's tokens to a
 * sampler, as a generation would. Then a whole JSON document, token by
 * token, a mask before each (the mean: what a generation pays a token; each
 * of its tokens must be allowed).
 *
 * figure: median microseconds a mask; bound: --share (5%) of a decode step
 * of --decode-ms (20 ms: 50 tok/s, a 30B-A3B model on one GPU); ratio =
 * figure / bound (<= 1: the target is met). The figure holds the walk and
 * the sampler's copy of the logits with -inf where the mask says no; that pass
 * alone, with nothing allowed, is printed too (the floor any mask pays).
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"
#include "tools/tools.h"

#define P "coli bench constrain"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
	return g_rng;
}

/* tokenizer.json at path, its vocabulary padded to n tokens. */
static int padded_tokenizer(const char *path, int n, coli_tokenizer_t **out)
{
	json_error_t je;
	json_t *root = json_load_file(path, 0, &je), *vocab, *added;
	const char *k, **keys = NULL;
	json_t *v;
	char err[256], *text;
	int nk = 0, next = 0, rc;
	size_t i;

	vocab = json_object_get(json_object_get(root, "model"), "vocab");
	added = json_object_get(root, "added_tokens");
	if (!json_is_object(vocab)) {
		json_decref(root);
		return tool_err(P, "%s: no model.vocab (a BPE tokenizer.json is needed)", path),
		       -EINVAL;
	}
	keys = malloc(sizeof(*keys) * json_object_size(vocab));
	json_object_foreach(vocab, k, v)
	{
		keys[nk++] = k;
		next =
		    (int)json_integer_value(v) + 1 > next ? (int)json_integer_value(v) + 1 : next;
	}
	json_array_foreach(added, i, v)
	{
		int id = (int)json_integer_value(json_object_get(v, "id"));

		next = id + 1 > next ? id + 1 : next;
	}
	while (next < n) { /* two of the vocabulary's tokens, end to end */
		char buf[512];

		snprintf(buf, sizeof(buf), "%s%s", keys[rnd() % (uint64_t)nk],
		         keys[rnd() % (uint64_t)nk]);
		if (json_object_get(vocab, buf))
			continue;
		json_object_set_new(vocab, buf, json_integer(next++));
	}
	text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	free(keys);
	if (!text)
		return -ENOMEM;
	rc = coli_tokenizer_load(text, strlen(text), out, err, sizeof(err));
	free(text);
	if (rc)
		tool_err(P, "%s padded: %s", path, err);
	return rc;
}

struct arm {
	const char *name, *schema, *prefix; /* schema NULL: any JSON object */
	double t[64];
	int allowed;
};

/* A document as a generation writes it: the mean microseconds of the
 * sampler's grammar step (coli_sampler_apply: the mask unless the state's
 * key is the last one's, then the masked copy of the logits) over its
 * tokens, each accepted in turn; *n_tok its tokens. */
static double document(const struct coli_vocab_trie *trie, const coli_tokenizer_t *tok,
                       const float *logits, float *work, int vocab, int *n_tok)
{
	static const char schema[] =
	    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"name\":"
	    "{\"type\":\"string\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":"
	    "\"string\"}},\"owner\":{\"type\":\"object\",\"properties\":{\"login\":{"
	    "\"type\":\"string\"},\"score\":{\"type\":\"number\"},\"admin\":{\"type\":"
	    "\"boolean\"}},\"required\":[\"login\",\"score\",\"admin\"]},\"notes\":{\"type\":"
	    "\"string\"}},\"required\":[\"id\",\"name\",\"tags\",\"owner\",\"notes\"]}";
	static const char doc[] =
	    "{\"id\": 48213, \"name\": \"read_file: open a path and return its text\", "
	    "\"tags\": [\"io\", \"files\", \"text\", \"utf-8\"], \"owner\": {\"login\": "
	    "\"octocat\", \"score\": 0.875, \"admin\": false}, \"notes\": \"Raises "
	    "FileNotFoundError when the path does not exist; the caller closes nothing, "
	    "the with-block does. See also write_file and the tests in tests/io.\"}";
	struct coli_grammar *g = NULL;
	struct coli_sampler s;
	int *ids = NULL, n = 0;
	char err[256];
	double sum = 0;

	*n_tok = 0;
	if (coli_grammar_from_schema(schema, strlen(schema), &g, err, sizeof(err)) ||
	    coli_tokenizer_encode(tok, doc, strlen(doc), &ids, &n, err, sizeof(err))) {
		coli_grammar_free(g);
		return -1;
	}
	coli_sampler_init(&s, 0, 1, 0, 0);
	s.grammar = g;
	s.trie = trie;
	if (!coli_sampler_begin(&s, vocab, NULL, 0))
		for (int i = 0; i < n; i++) {
			double t0 = bench_now_s();

			coli_sampler_apply(&s, logits, vocab, work); /* the generation's step 0 */
			sum += bench_now_s() - t0;
			if (work[ids[i]] == -INFINITY) { /* (the mask must allow it) */
				sum = -1e9;
				break;
			}
			coli_sampler_accept(&s, ids[i]);
		}
	coli_sampler_end(&s);
	coli_grammar_free(g);
	free(ids);
	*n_tok = n;
	return n && sum >= 0 ? sum / n * 1e6 : -1;
}

/* A sampler in the state after prefix (its tokens accepted one by one). */
static int reach(struct coli_sampler *s, const coli_tokenizer_t *tok, const char *prefix, int vocab)
{
	int *ids = NULL, n = 0, rc;
	char err[128];

	rc = coli_sampler_begin(s, vocab, NULL, 0);
	if (!rc)
		rc = coli_tokenizer_encode(tok, prefix, strlen(prefix), &ids, &n, err, sizeof(err));
	for (int i = 0; !rc && i < n; i++)
		coli_sampler_accept(s, ids[i]);
	free(ids);
	return rc;
}

int bench_constrain_main(int argc, char **argv)
{
	const char *path = "models/demo/tokenizer.json";
	int vocab = 151936, reps = 21;
	double decode_ms = 20, share = 0.05, t0, build_s, floor_us;
	struct arm arms[] = {
	    {"object, a key opens",
	     "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"
	     "\"string\"},\"age\":{\"type\":\"integer\"}}}",
	     "{",
	     {0},
	     0},
	    {"inside a string", NULL, "{\"name\": \"Jo", {0}, 0},
	    {"inside a number", NULL, "{\"n\": 12", {0}, 0},
	    {"array, any value", NULL, "{\"a\": [", {0}, 0},
	};
	enum { N_ARMS = sizeof(arms) / sizeof(arms[0]) };
	coli_tokenizer_t *tok = NULL;
	struct coli_vocab_trie *trie = NULL;
	uint64_t *allow;
	float *logits, *src;

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf(
			    "usage: coli bench constrain [--tokenizer tokenizer.json] [--vocab N]\n"
			    "                            [--reps R] [--decode-ms MS]\n");
			return 0;
		}
		if (!v)
			return tool_err(P, "%s needs a value", argv[i]), 2;
		if (!strcmp(argv[i], "--tokenizer"))
			path = v;
		else if (!strcmp(argv[i], "--vocab")) {
			if (tool_int(P, argv[i], v, 1, 1 << 22, &vocab))
				return 2;
		} else if (!strcmp(argv[i], "--reps")) {
			if (tool_int(P, argv[i], v, 1, 64, &reps))
				return 2;
		} else if (!strcmp(argv[i], "--decode-ms")) {
			if (tool_double(P, argv[i], v, 0.001, 1e6, &decode_ms))
				return 2;
		} else
			return tool_err(P, "unknown option '%s'", argv[i]), 2;
		i++;
	}
	if (padded_tokenizer(path, vocab, &tok))
		return 1;
	vocab = coli_tokenizer_n_vocab(tok);
	t0 = bench_now_s();
	if (coli_vocab_trie_build(tok, &trie)) {
		coli_tokenizer_free(tok);
		return tool_err(P, "building the trie: out of memory"), 1;
	}
	build_s = bench_now_s() - t0;
	allow = calloc((size_t)(vocab + 63) / 64, sizeof(*allow));
	logits = calloc((size_t)vocab, sizeof(*logits));
	src = calloc((size_t)vocab, sizeof(*src)); /* the engine's logits, copied masked */
	if (!allow || !logits || !src) {
		free(allow), free(logits), free(src);
		coli_vocab_trie_free(trie);
		coli_tokenizer_free(tok);
		return tool_err(P, "out of memory"), 1;
	}
	/* the floor: the masked copy of the logits (the sampler's copy, the mask
	 * applied as it goes) with nothing allowed */
	{
		double t[64];

		for (int r = 0; r < reps; r++) {
			t0 = bench_now_s();
			coli_grammar_mask_logits(allow, src, logits, vocab);
			t[r] = bench_now_s() - t0;
		}
		floor_us = bench_median(t, reps) * 1e6;
	}
	for (int a = 0; a < N_ARMS; a++) {
		struct coli_grammar *g = NULL;
		struct coli_sampler s;
		char err[256];
		int rc = arms[a].schema
		             ? coli_grammar_from_schema(arms[a].schema, strlen(arms[a].schema), &g,
		                                        err, sizeof(err))
		             : coli_grammar_json_object(&g);

		coli_sampler_init(&s, 0, 1, 0, 0);
		s.grammar = g;
		s.trie = trie;
		rc = rc ? rc : reach(&s, tok, arms[a].prefix, vocab);
		for (int r = 0; !rc && r < reps; r++) {
			t0 = bench_now_s();
			arms[a].allowed =
			    coli_grammar_mask(g, trie, s.gstate, NULL, 0, allow, vocab);
			coli_grammar_mask_logits(allow, src, logits, vocab);
			arms[a].t[r] = bench_now_s() - t0;
		}
		coli_sampler_end(&s);
		coli_grammar_free(g);
		if (rc) {
			tool_err(P, "arm '%s': %s", arms[a].name, strerror(-rc));
			return 1;
		}
	}
	printf("constrained decoding mask (core/text/grammar_mask.c), %d tokens (%s padded)\n"
	       "trie: built in %.1f ms, %.1f MB; the masked copy alone (nothing allowed): %.1f us\n"
	       "bound: %.0f%% of a %.1f ms decode step = %.0f us\n\n",
	       vocab, path, build_s * 1e3, coli_vocab_trie_bytes(trie) / 1e6, floor_us, share * 100,
	       decode_ms, share * decode_ms * 1e3);
	printf("%-22s %9s %10s %10s %7s\n", "state", "allowed", "mask us", "bound us", "ratio");
	for (int a = 0; a < N_ARMS; a++) {
		double us = bench_median(arms[a].t, reps) * 1e6;

		printf("%-22s %9d %10.1f %10.0f %7.3f\n", arms[a].name, arms[a].allowed, us,
		       share * decode_ms * 1e3, us / (share * decode_ms * 1e3));
	}
	{
		int n_tok = 0;
		float *work = malloc(sizeof(float) * (size_t)vocab);
		double us;

		memset(logits, 0, sizeof(float) * (size_t)vocab); /* (the arms left -inf in it) */
		us = work ? document(trie, tok, logits, work, vocab, &n_tok) : -1;

		free(work);

		if (us < 0)
			return tool_err(P, "the document's tokens were not all allowed"), 1;
		printf("%-22s %9s %10.1f %10.0f %7.3f\n", "a document, mean", "-", us,
		       share * decode_ms * 1e3, us / (share * decode_ms * 1e3));
		printf("(mask us: the walk and the masked copy of the logits; median of %d; the\n"
		       " document: a %d-token JSON object of strings, numbers, an array and an\n"
		       " object, a mask before each token)\n",
		       reps, n_tok);
	}
	free(allow);
	free(logits);
	free(src);
	coli_vocab_trie_free(trie);
	coli_tokenizer_free(tok);
	return 0;
}
