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
 * Then response_format json_object made harmony's answer
 * (coli_grammar_as_answer): "<|channel|>final<|message|>" and an object,
 * which the reply parser gives back as the content.
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
	int first = 0, n_walks = 0, n_json = 0;
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
	g = NULL;
	/* response_format json_object in harmony: the final channel, then the JSON */
	CHECK(!coli_grammar_json_object(&g) && !coli_grammar_as_answer(g, COLI_CHAT_HARMONY),
	      "json_object grammar");
	for (int w = 0; g && trie && w < 6; w++) {
		const int vocab = coli_tokenizer_n_vocab(tok), end = first + 3;
		uint64_t *allow = calloc((size_t)(vocab + 63) / 64, sizeof(*allow));
		int *ids = malloc(sizeof(int) * 600), n = 0, *cand = malloc(sizeof(int) * vocab);
		struct coli_sampler s;
		int ended = 0;

		coli_sampler_init(&s, 0, 1, 0, 0);
		s.grammar = g;
		s.trie = trie;
		s.end_ids[s.n_end_ids++] = end;
		CHECK(!coli_sampler_begin(&s, vocab, NULL, 0), "begin");
		while (n < 600 && !ended) {
			int k = 0, id;

			coli_grammar_mask(g, trie, s.gstate, s.end_ids, s.n_end_ids, allow, vocab);
			for (int i = 0; i < vocab; i++)
				if (allow[i >> 6] >> (i & 63) & 1)
					cand[k++] = i;
			if (!k)
				break;
			id = cand[rnd() % (uint64_t)k];
			if (allow[end >> 6] >> (end & 63) & 1) /* whole: end it */
				id = end;
			else if (n > 40 && k > 1) {                   /* then close what is open */
				static const char order[] = "\"}]0:"; /* '"' first: in a string */
				int best = 99;

				for (int i = 0; i < k; i++) {
					size_t pl = 0;
					const char *p = coli_tokenizer_piece(tok, cand[i], &pl);
					const char *at =
					    pl == 1 && p && p[0] ? strchr(order, p[0]) : NULL;

					if (at && at - order < best) {
						best = (int)(at - order);
						id = cand[i];
					}
				}
			}
			coli_sampler_accept(&s, id);
			ended = id == end;
			ids[n++] = id;
		}
		if (!ended) {
			char *text = NULL;
			size_t len = 0;

			coli_tokenizer_decode(tok, ids, n, &text, &len);
			CHECK(0, "json walk %d: not whole in 600 tokens: '%.300s'", w,
			      text ? text + (len > 300 ? len - 300 : 0) : "");
			free(text);
		}
		if (ended) {
			char *text = NULL;
			size_t len = 0;
			struct coli_reply r = {0};
			json_t *o;

			CHECK(!coli_tokenizer_decode(tok, ids, n - 1, &text, &len), "decode");
			CHECK(len > 27 && !memcmp(text, "<|channel|>final<|message|>{", 28),
			      "json text '%s'", text);
			CHECK(!coli_reply_parse(COLI_CHAT_HARMONY, text, len, 0, NULL, &r),
			      "parse");
			o = r.content ? json_loads(r.content, 0, NULL) : NULL;
			CHECK(json_is_object(o) && !r.reasoning, "content '%s'",
			      r.content ? r.content : "(null)");
			json_decref(o);
			coli_reply_free(&r);
			free(text);
			n_json++;
		}
		coli_sampler_end(&s);
		free(allow), free(ids), free(cand);
	}
	coli_grammar_free(g);
	coli_vocab_trie_free(trie);
	coli_tokenizer_free(tok);
	if (fails)
		return 1;
	printf("grammar_harmony: %d walks, each one call of a listed tool; %d json_object answers "
	       "in the final channel\n",
	       n_walks, n_json);
	if (n_walks != 12 || n_json != 6)
		return 1;
	return 0;
}
