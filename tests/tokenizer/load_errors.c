/*
 * tests/tokenizer/load_errors.c — tokenizer.json features coli does not
 * implement are refused at load with -ENOTSUP and a message naming them;
 * malformed files with -EINVAL. Never a tokenizer that would give wrong ids.
 */
#include "tokenizer/tok_test.h"

/* Loads the base tokenizer with `key` of `obj` (root or model) set to val. */
static void expect_refused(const char *where, const char *key, const char *val_json, int want_rc,
                           const char *want_msg)
{
	char *base = bl_json(NULL, 0, NULL, NULL, NULL), err[512] = "";
	json_t *root = json_loads(base, 0, NULL);
	json_t *obj = strcmp(where, "model") ? root : json_object_get(root, "model");
	json_object_set_new(obj, key, json_loads(val_json, JSON_DECODE_ANY, NULL));
	char *s = json_dumps(root, 0);
	coli_tokenizer_t *t = NULL;
	int rc = coli_tokenizer_load(s, strlen(s), &t, err, sizeof(err));
	CHECK(rc == want_rc && t == NULL, "%s.%s: rc %d, want %d", where, key, rc, want_rc);
	CHECK(strstr(err, want_msg) != NULL, "%s.%s: message \"%s\" lacks \"%s\"", where, key, err,
	      want_msg);
	coli_tokenizer_free(t);
	free(s);
	free(base);
	json_decref(root);
}

int main(void)
{
	char err[256];
	coli_tokenizer_t *t;

	expect_refused("model", "type", "\"WordPiece\"", -ENOTSUP, "WordPiece");
	expect_refused("model", "type", "\"Unigram\"", -ENOTSUP, "only BPE");
	expect_refused("model", "dropout", "0.1", -ENOTSUP, "dropout");
	expect_refused("model", "continuing_subword_prefix", "\"##\"", -ENOTSUP,
	               "continuing_subword_prefix");
	expect_refused("model", "merges", "[\"a\"]", -EINVAL, "merges[0]");
	expect_refused("model", "merges", "[\"q z\"]", -EINVAL, "not in the vocab");
	expect_refused("root", "normalizer", "{\"type\":\"Lowercase\"}", -ENOTSUP, "Lowercase");
	expect_refused("root", "normalizer",
	               "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},"
	               "{\"type\":\"StripAccents\"}]}",
	               -ENOTSUP, "normalizer.normalizers[1].type: normalizer StripAccents");
	expect_refused("root", "pre_tokenizer", "{\"type\":\"Whitespace\"}", -ENOTSUP,
	               "Whitespace");
	expect_refused("root", "pre_tokenizer",
	               "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":"
	               "\"Contiguous\",\"invert\":false}",
	               -ENOTSUP, "Contiguous");
	expect_refused("root", "pre_tokenizer",
	               "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":"
	               "\"Isolated\",\"invert\":false}",
	               -EINVAL, "regex");
	expect_refused("root", "decoder", "{\"type\":\"WordPiece\"}", -ENOTSUP, "WordPiece");
	expect_refused("root", "decoder", "null", -ENOTSUP, "ByteLevel decoder");
	expect_refused("root", "added_tokens", "[{\"id\":-1,\"content\":\"x\"}]", -EINVAL,
	               "added_tokens[0]");
	CHECK(coli_tokenizer_load("{\"model\":", 9, &t, err, sizeof(err)) == -EINVAL &&
	          strstr(err, "line 1"),
	      "bad JSON: %s", err);
	CHECK(coli_tokenizer_load("{}", 2, &t, err, sizeof(err)) == -EINVAL, "no model: %s", err);
	return g_fail;
}
