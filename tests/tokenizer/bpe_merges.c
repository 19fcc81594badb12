/*
 * tests/tokenizer/bpe_merges.c — BPE on a hand-made byte-level tokenizer:
 * merge order by rank, leftmost among equal ranks, the Qwen2 pre-tokenizer
 * boundaries, "a b" and ["a","b"] merges giving the same ids, ignore_merges,
 * every byte round-tripping, and a 100k-character input (timed, printed).
 */
#include <time.h>

#include "tokenizer/tok_test.h"

static const char *const MERGES[][2] = {
    {"a", "a"},    /* 256 */
    {"h", "e"},    /* 257 */
    {"l", "l"},    /* 258 */
    {"he", "ll"},  /* 259 */
    {"hell", "o"}, /* 260 */
    {" ", "w"},    /* 261 */
    {"aa", "a"},   /* 262: lower rank than "a a", used only after it */
    {"o", "r"},    /* 263 */
    {" w", "or"},  /* 264 */
    {"x", "y"},    /* 265 */
    {"y", "z"},    /* 266: "xyz" -> "xy" "z" (xy ranks first) */
};
#define N_MERGES ((int)(sizeof(MERGES) / sizeof(MERGES[0])))

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void roundtrip(const coli_tokenizer_t *t, const char *s, size_t n)
{
	char err[256], *text;
	int *ids, k;
	size_t len;
	int rc = coli_tokenizer_encode(t, s, n, &ids, &k, err, sizeof(err));
	CHECK(rc == 0, "%s", err);
	if (rc)
		return;
	rc = coli_tokenizer_decode(t, ids, k, &text, &len);
	CHECK(rc == 0 && len == n && !memcmp(text, s, n), "round trip of %zu bytes", n);
	free(ids);
	if (!rc)
		free(text);
}

int main(void)
{
	char *json = bl_json(MERGES, N_MERGES, NULL, NULL, NULL);
	coli_tokenizer_t *t = load_or_die(json);
	free(json);

	CHECK(coli_tokenizer_n_vocab(t) == 256 + N_MERGES, "n_vocab %d", coli_tokenizer_n_vocab(t));
	expect_ids(t, "hello", (int[]){260, -1});
	expect_ids(t, "hello world", (int[]){260, 264, 'l', 'd', -1});
	expect_ids(t, "aaa", (int[]){262, -1});        /* aa + a, then aaa */
	expect_ids(t, "aaaa", (int[]){256, 256, -1});  /* leftmost pairs first */
	expect_ids(t, "aaaaa", (int[]){256, 262, -1}); /* aa aa a, then aa aaa */
	expect_ids(t, "xyz", (int[]){265, 'z', -1});
	expect_ids(t, "", (int[]){-1});
	/* Qwen2 regex: digits one by one, letters after one non-letter */
	expect_ids(t, "a12", (int[]){'a', '1', '2', -1});
	expect_ids(t, "!hello", (int[]){'!', 260, -1});
	/* a space before a non-space run belongs to the next piece */
	expect_ids(t, "hello  world", (int[]){260, ' ', 264, 'l', 'd', -1});
	CHECK(coli_tokenizer_token_id(t, "hello") == 260, "token_id hello");
	CHECK(coli_tokenizer_token_id(t, bl_str(" w")) == 261, "token_id Ġw");
	CHECK(coli_tokenizer_token_id(t, "nope") == -1, "token_id nope");
	CHECK(!strcmp(coli_tokenizer_token_str(t, 261), bl_str(" w")), "token_str");

	/* every byte value that forms valid UTF-8 round-trips; so does a mix */
	const char *mix = "héllo wörld 日本語 😀👍🏽 \t\r\n 12345 aaaaa <|x|>";
	roundtrip(t, mix, strlen(mix));

	/* 100k characters: letters, a single 100k-letter run, whitespace runs */
	size_t n = 100000;
	char *big = malloc(n + 1);
	for (size_t i = 0; i < n; i++)
		big[i] = "hello world aaa xyz 42\t\n"[i % 24];
	double t0 = now_s();
	roundtrip(t, big, n);
	double t1 = now_s();
	memset(big, 'a', n);
	roundtrip(t, big, n);
	double t2 = now_s();
	memset(big, ' ', n);
	roundtrip(t, big, n);
	double t3 = now_s();
	printf("100k chars encode+decode: mixed %.1f ms, one 100k-letter word %.1f ms, 100k "
	       "spaces %.1f ms\n",
	       (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3);
	free(big);
	coli_tokenizer_free(t);

	/* merges as "a b" strings, and ignore_merges */
	json = bl_json(MERGES, N_MERGES, NULL, NULL, NULL);
	json_t *root = json_loads(json, 0, NULL);
	free(json);
	json_t *jm = json_object_get(json_object_get(root, "model"), "merges"), *m;
	size_t i;
	json_array_foreach(jm, i, m)
	{
		char s[64];
		snprintf(s, sizeof(s), "%s %s", json_string_value(json_array_get(m, 0)),
		         json_string_value(json_array_get(m, 1)));
		json_array_set_new(jm, i, json_string(s));
	}
	/* a vocab entry no merge path reaches: only ignore_merges finds it */
	json_object_set_new(json_object_get(json_object_get(root, "model"), "vocab"), "zz",
	                    json_integer(300));
	char *s1 = json_dumps(root, 0);
	t = load_or_die(s1);
	expect_ids(t, "hello world", (int[]){260, 264, 'l', 'd', -1});
	expect_ids(t, "zz", (int[]){'z', 'z', -1});
	coli_tokenizer_free(t);
	json_object_set_new(json_object_get(root, "model"), "ignore_merges", json_true());
	char *s2 = json_dumps(root, 0);
	t = load_or_die(s2);
	expect_ids(t, "zz", (int[]){300, -1});
	expect_ids(t, "hello", (int[]){260, -1});
	coli_tokenizer_free(t);
	free(s1);
	free(s2);
	json_decref(root);
	return g_fail;
}
