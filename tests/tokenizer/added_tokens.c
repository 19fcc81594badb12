/*
 * tests/tokenizer/added_tokens.c — added tokens matched before
 * pre-tokenization: ChatML specials anywhere in the text, leftmost-longest
 * among overlapping tokens, lstrip/rstrip eating whitespace, single_word,
 * "normalized" tokens matched after NFC, a whitespace token (GPT-NeoX
 * style), token_id / is_special, and decoding specials to their text.
 * No merges: every other byte is its own id.
 */
#include "tokenizer/tok_test.h"

static json_t *added(int id, const char *content, int special, int normalized, int lstrip,
                     int rstrip, int single_word)
{
	return json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", id, "content", content,
	                 "special", special, "normalized", normalized, "lstrip", lstrip, "rstrip",
	                 rstrip, "single_word", single_word);
}

static void expect_text(const coli_tokenizer_t *t, const int *ids, int n, const char *want)
{
	char *text;
	size_t len;
	int rc = coli_tokenizer_decode(t, ids, n, &text, &len);
	CHECK(rc == 0 && len == strlen(want) && !memcmp(text, want, len), "decode: \"%s\"",
	      rc ? "(error)" : text);
	if (!rc)
		free(text);
}

int main(void)
{
	json_t *a = json_array();
	json_array_append_new(a, added(300, "<|endoftext|>", 1, 0, 0, 0, 0));
	json_array_append_new(a, added(301, "<|im_start|>", 1, 0, 0, 0, 0));
	json_array_append_new(a, added(302, "<|im_end|>", 1, 0, 0, 0, 0));
	json_array_append_new(a, added(303, "[MASK]", 1, 0, 1, 0, 0));
	json_array_append_new(a, added(304, "<tool>", 0, 0, 0, 1, 0));
	json_array_append_new(a, added(305, "hello", 0, 1, 0, 0, 1));
	json_array_append_new(a, added(306, "<|im", 1, 0, 0, 0, 0));
	json_array_append_new(a, added(307, "e\xcc\x81", 0, 1, 0, 0, 0)); /* NFC: é */
	json_array_append_new(a, added(308, "  ", 0, 1, 0, 0, 0));
	char *json = bl_json(NULL, 0, a, NULL, NULL);
	coli_tokenizer_t *t = load_or_die(json);
	free(json);

	CHECK(coli_tokenizer_n_vocab(t) == 309, "n_vocab %d", coli_tokenizer_n_vocab(t));
	expect_ids(t, "<|im_start|>user\nhi<|im_end|>",
	           (int[]){301, 'u', 's', 'e', 'r', '\n', 'h', 'i', 302, -1});
	expect_ids(t, "<|im_end|><|im_end|>", (int[]){302, 302, -1});
	expect_ids(t, "a<|endoftext|>b", (int[]){'a', 300, 'b', -1});
	expect_ids(t, "<|im_x", (int[]){306, '_', 'x', -1});             /* the shorter one */
	expect_ids(t, "<|im_end", (int[]){306, '_', 'e', 'n', 'd', -1}); /* not the longer */
	expect_ids(t, "x  [MASK] y", (int[]){'x', 303, ' ', 'y', -1});   /* lstrip */
	expect_ids(t, "a <tool> \t b", (int[]){'a', ' ', 304, 'b', -1}); /* rstrip */
	expect_ids(t, "hello world", (int[]){305, ' ', 'w', 'o', 'r', 'l', 'd', -1});
	expect_ids(t, "say hello!", (int[]){'s', 'a', 'y', ' ', 305, '!', -1});
	expect_ids(t, "hellos", (int[]){'h', 'e', 'l', 'l', 'o', 's', -1}); /* single_word */
	expect_ids(t, "_hello", (int[]){'_', 'h', 'e', 'l', 'l', 'o', -1});
	expect_ids(t, "cafe\xcc\x81", (int[]){'c', 'a', 'f', 307, -1}); /* after NFC */
	expect_ids(t, "caf\xc3\xa9", (int[]){'c', 'a', 'f', 307, -1});
	expect_ids(t, "a  b", (int[]){'a', 308, 'b', -1});
	expect_ids(t, "<|im_start|>", (int[]){301, -1});

	CHECK(coli_tokenizer_token_id(t, "<|im_end|>") == 302, "token_id");
	CHECK(coli_tokenizer_token_id(t, "<|endoftext|>") == 300, "token_id");
	CHECK(coli_tokenizer_is_special(t, 302) && !coli_tokenizer_is_special(t, 304) &&
	          !coli_tokenizer_is_special(t, 'a'),
	      "is_special");
	expect_text(t, (int[]){301, 'h', 'i', 302}, 4, "<|im_start|>hi<|im_end|>");
	expect_text(t, (int[]){'a', 308, 'b'}, 3, "a  b"); /* raw: ' ' has no byte-level char */
	coli_tokenizer_free(t);
	return g_fail;
}
