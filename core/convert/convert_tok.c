/*
 * core/convert/convert_tok.c — the tokenizer.json text a converter writes when
 * its source has no tokenizer.json of its own: a GGUF's tokenizer.ggml.*
 * (core/convert/convert_gguf.c) and a tiktoken rank file
 * (core/convert/convert_tiktoken.c). Both are byte-level BPE, so one layout
 * serves them:
 *
 *   normalizer     NFC or null
 *   pre_tokenizer  ByteLevel (its own GPT-2 regex) when regex is NULL, else
 *                  Sequence[Split(Regex regex, Isolated), a Split for each of
 *                  more (DeepSeek-V3's three in turn), ByteLevel(use_regex
 *                  false)]
 *   model          BPE: vocab, merges ("a b"), no unk, no byte fallback,
 *                  ignore_merges as asked
 *   decoder        ByteLevel
 *   added_tokens   as given
 *
 * The engine's tokenizer (core/text/tokenizer*.c) loads the text as it loads
 * a checkpoint's.
 */
#include <errno.h>
#include <jansson.h>

#include "core/convert/convert_internal.h"

static json_t *split(const char *regex)
{
	return json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split", "pattern", "Regex", regex,
	                 "behavior", "Isolated", "invert", 0);
}

static json_t *pre_tokenizer(const struct coli_convert_tok *t)
{
	json_t *bl = json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0,
	                       "trim_offsets", 0, "use_regex", t->regex == NULL);
	json_t *seq = json_array();

	if (!t->regex || !bl || !seq) {
		json_decref(seq);
		return bl;
	}
	for (int i = -1; i < t->n_more; i++)
		if (json_array_append_new(seq, split(i < 0 ? t->regex : t->more[i]))) {
			json_decref(seq);
			json_decref(bl);
			return NULL;
		}
	if (json_array_append_new(seq, bl)) {
		json_decref(seq);
		return NULL;
	}
	return json_pack("{s:s, s:o}", "type", "Sequence", "pretokenizers", seq);
}

int coli_convert_tok_write(const struct coli_convert_tok *t, char **out)
{
	json_t *root;

	*out = NULL;
	root = json_pack("{s:s, s:n, s:n, s:O, s:o, s:o, s:n, s:{s:s, s:b, s:b, s:b}}", "version",
	                 "1.0", "truncation", "padding", "added_tokens", t->added, "normalizer",
	                 t->nfc ? json_pack("{s:s}", "type", "NFC") : json_null(), "pre_tokenizer",
	                 pre_tokenizer(t), "post_processor", "decoder", "type", "ByteLevel",
	                 "add_prefix_space", 1, "trim_offsets", 1, "use_regex", 1);
	if (!root ||
	    json_object_set_new(root, "model",
	                        json_pack("{s:s, s:n, s:n, s:b, s:b, s:b, s:O, s:O}", "type", "BPE",
	                                  "dropout", "unk_token", "fuse_unk", 0, "byte_fallback", 0,
	                                  "ignore_merges", t->ignore_merges, "vocab", t->vocab,
	                                  "merges", t->merges))) {
		json_decref(root);
		return -ENOMEM;
	}
	*out = json_dumps(root, JSON_COMPACT);
	json_decref(root);
	return *out ? 0 : -ENOMEM;
}
