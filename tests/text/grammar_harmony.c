/*
 * tests/text/grammar_harmony.c — a forced tool call in gpt-oss's harmony
 * syntax, whose markers are special tokens (core/text/grammar_tool.c,
 * GK_TOKEN): the demo model's tokenizer with harmony's <|channel|>,
 * <|message|>, <|constrain|> and <|call|> added as special tokens, then
 * random walks through the masks (a seeded pick among the allowed tokens,
 * accepted through the sampler). At every step the only special tokens
 * allowed are the one the syntax names there or the end (<|call|>, once the
 * arguments are whole); every walk must end with <|call|>, and its text,
 * decoded, must parse back (core/text/reply.c, harmony) into one call of a
 * listed tool whose arguments hold under its schema (checked here by hand).
 */
#include <jansson.h>
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

static uint64_t g_rng = 0x2545f4914f6cdd1dull;

static uint64_t rnd(void)
{
	g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
	return g_rng;
}

static const char *const SPECIAL[] = {"<|channel|>", "<|message|>", "<|constrain|>", "<|call|>"};

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":6},\"unit\":{"
    "\"enum\":[\"C\",\"F\"]}},\"required\":[\"city\",\"unit\"],\"additionalProperties\":false}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"time\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"utc\":{\"type\":\"boolean\"}},\"required\":[\"utc\"],"
    "\"additionalProperties\":false}}}]";

/* The demo tokenizer with harmony's special tokens added after its last id. */
static coli_tokenizer_t *harmony_tokenizer(const char *path, int *first_id)
{
	json_error_t je;
	json_t *root = json_load_file(path, 0, &je), *added;
	coli_tokenizer_t *t = NULL;
	char err[256], *text;
	int next = 0;
	size_t i;
	json_t *a;

	if (!root)
		return NULL;
	next = (int)json_object_size(json_object_get(json_object_get(root, "model"), "vocab"));
	added = json_object_get(root, "added_tokens");
	json_array_foreach(added, i, a)
	{
		int id = (int)json_integer_value(json_object_get(a, "id"));

		next = id + 1 > next ? id + 1 : next;
	}
	*first_id = next;
	for (int k = 0; k < 4; k++)
		json_array_append_new(added,
		                      json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", next + k,
		                                "content", SPECIAL[k], "single_word", 0, "lstrip",
		                                0, "rstrip", 0, "normalized", 0, "special", 1));
	text = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	if (text && coli_tokenizer_load(text, strlen(text), &t, err, sizeof(err)))
		fprintf(stderr, "tokenizer: %s\n", err);
	free(text);
	return t;
}

static void check_call(const char *text, size_t len)
{
	struct coli_reply r = {0};
	json_t *a;

	CHECK(!coli_reply_parse(COLI_CHAT_HARMONY, text, len, 0, TOOLS, &r), "reply parse");
	CHECK(r.n_calls == 1, "%d calls in '%.*s'", r.n_calls, (int)len, text);
	if (r.n_calls != 1) {
		coli_reply_free(&r);
		return;
	}
	a = json_loads(r.calls[0].arguments, 0, NULL);
	if (!strcmp(r.calls[0].name, "get_weather")) {
		const char *city = json_string_value(json_object_get(a, "city"));
		const char *unit = json_string_value(json_object_get(a, "unit"));

		CHECK(json_object_size(a) == 2 && city && unit &&
		          (!strcmp(unit, "C") || !strcmp(unit, "F")),
		      "get_weather arguments %s", r.calls[0].arguments);
	} else {
		CHECK(!strcmp(r.calls[0].name, "time") && json_object_size(a) == 1 &&
		          json_is_boolean(json_object_get(a, "utc")),
		      "call %s(%s)", r.calls[0].name, r.calls[0].arguments);
	}
	json_decref(a);
	coli_reply_free(&r);
}

int main(void)
{
	const char *root = getenv("ROOT");
	char path[4096], err[256];
	int first = 0, n_walks = 0;
	coli_tokenizer_t *tok;
	struct coli_vocab_trie *trie = NULL;
	struct coli_grammar *g = NULL;

	snprintf(path, sizeof(path), "%s/models/demo/tokenizer.json", root ? root : ".");
	tok = harmony_tokenizer(path, &first);
	if (!tok) {
		printf("no demo tokenizer at %s\n", path);
		return 77;
	}
	CHECK(!coli_vocab_trie_build(tok, &trie), "trie");
	CHECK(!coli_grammar_tool_call(COLI_CHAT_HARMONY, TOOLS, NULL, &g, err, sizeof(err)),
	      "grammar: %s", err);
	for (int w = 0; g && trie && w < 12; w++) {
		const int vocab = coli_tokenizer_n_vocab(tok), call = first + 3;
		uint64_t *allow = calloc((size_t)(vocab + 63) / 64, sizeof(*allow));
		int *ids = malloc(sizeof(int) * 400), n = 0, *cand = malloc(sizeof(int) * vocab);
		struct coli_sampler s;
		int ended = 0;

		coli_sampler_init(&s, 0, 1, 0, 0);
		s.grammar = g;
		s.trie = trie;
		s.end_ids[s.n_end_ids++] = call;
		CHECK(!coli_sampler_begin(&s, vocab, NULL, 0), "begin");
		while (n < 400 && !ended) {
			int k = 0, id;

			coli_grammar_mask(g, trie, s.gstate, s.end_ids, s.n_end_ids, allow, vocab);
			for (int i = 0; i < vocab; i++)
				if (allow[i >> 6] >> (i & 63) & 1)
					cand[k++] = i;
			for (int i = 0; i < k;
			     i++) /* specials: one at most, the syntax's or the end */
				if (coli_tokenizer_is_special(tok, cand[i]))
					CHECK(k == 1 || cand[i] == call,
					      "step %d: special %d among %d", n, cand[i], k);
			CHECK(k > 0, "step %d: nothing allowed", n);
			if (!k)
				break;
			id = cand[rnd() % (uint64_t)k];
			if (id != call && k > 1 && allow[call >> 6] >> (call & 63) & 1 && rnd() % 2)
				id = call; /* the end, once it may come, soon */
			coli_sampler_accept(&s, id);
			ended = id == call;
			ids[n++] = id;
		}
		CHECK(ended, "walk %d: no <|call|> in 400 tokens", w);
		if (ended) {
			char *text = NULL;
			size_t len = 0;

			CHECK(!coli_tokenizer_decode(tok, ids, n, &text, &len), "decode");
			CHECK(len > 14 && !memcmp(text, " to=functions.", 14), "text '%s'", text);
			check_call(text, len);
			free(text);
			n_walks++;
		}
		coli_sampler_end(&s);
		free(allow), free(ids), free(cand);
	}
	coli_grammar_free(g);
	coli_vocab_trie_free(trie);
	coli_tokenizer_free(tok);
	if (fails)
		return 1;
	printf("grammar_harmony: %d walks, each one call of a listed tool\n", n_walks);
	return 0;
}
