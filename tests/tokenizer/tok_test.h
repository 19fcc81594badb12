/*
 * tests/tokenizer/tok_test.h — helpers for the tokenizer unit tests: build a
 * tiny byte-level BPE tokenizer.json with jansson (ids 0..255 are the 256
 * single bytes in byte order, merge i makes id 256 + i), and check macros.
 */
#ifndef TOK_TEST_H
#define TOK_TEST_H

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"

static int g_fail;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond);                 \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			g_fail = 1;                                                                \
		}                                                                                  \
	} while (0)

#define QWEN2_RE                                                                                   \
	"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "                      \
	"?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* GPT-2's byte -> unicode, written as UTF-8 into out (3 bytes max + NUL). */
__attribute__((unused)) static void bl_char(unsigned char b, char *out)
{
	unsigned cp = b, n = 0;
	int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
	if (!printable) {
		for (int i = 0; i < b; i++)
			n += !((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174);
		cp = 256 + n;
	}
	if (cp < 0x80) {
		out[0] = (char)cp, out[1] = 0;
	} else {
		out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
	}
}

/* raw bytes -> byte-level string (static buffer, one at a time) */
__attribute__((unused)) static const char *bl_str(const char *raw)
{
	static char buf[1024];
	size_t k = 0;
	for (; *raw; raw++) {
		bl_char((unsigned char)*raw, buf + k);
		k += strlen(buf + k);
	}
	buf[k] = 0;
	return buf;
}

/* The pre-tokenizer of Qwen2: Split(QWEN2_RE, Isolated) + ByteLevel(no regex). */
__attribute__((unused)) static json_t *qwen2_pre(void)
{
	return json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b, s:b}]}", "type",
	                 "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex", QWEN2_RE,
	                 "behavior", "Isolated", "invert", 0, "type", "ByteLevel",
	                 "add_prefix_space", 0, "trim_offsets", 0, "use_regex", 0);
}

/* merges: n pairs of raw strings; added: JSON array or NULL (stolen);
 * pre: pre_tokenizer (stolen; NULL = qwen2_pre()); model_extra merged into
 * "model" (stolen, may be NULL). Returns the JSON text (malloc'd). */
__attribute__((unused)) static char *bl_json(const char *const (*merges)[2], int n, json_t *added,
                                             json_t *pre, json_t *model_extra)
{
	json_t *vocab = json_object(), *jm = json_array();
	char key[1024];
	for (int b = 0; b < 256; b++) {
		char c[4];
		bl_char((unsigned char)b, c);
		json_object_set_new(vocab, c, json_integer(b));
	}
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%s%s", merges[i][0], merges[i][1]);
		json_object_set_new(vocab, bl_str(key), json_integer(256 + i));
		json_t *pair = json_array();
		json_array_append_new(pair, json_string(bl_str(merges[i][0])));
		json_array_append_new(pair, json_string(bl_str(merges[i][1])));
		json_array_append_new(jm, pair);
	}
	json_t *model = json_pack("{s:s, s:o, s:o}", "type", "BPE", "vocab", vocab, "merges", jm);
	if (model_extra)
		json_object_update(model, model_extra), json_decref(model_extra);
	json_t *root =
	    json_pack("{s:s, s:o, s:{s:s}, s:o, s:{s:s}, s:o}", "version", "1.0", "added_tokens",
	              added ? added : json_array(), "normalizer", "type", "NFC", "pre_tokenizer",
	              pre ? pre : qwen2_pre(), "decoder", "type", "ByteLevel", "model", model);
	char *s = json_dumps(root, 0);
	json_decref(root);
	return s;
}

__attribute__((unused)) static coli_tokenizer_t *load_or_die(const char *json)
{
	char err[512];
	coli_tokenizer_t *t;
	int rc = coli_tokenizer_load(json, strlen(json), &t, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "load: %d %s\n", rc, err);
		exit(1);
	}
	return t;
}

/* Encodes text and compares with the expected ids (terminated by -1). */
__attribute__((unused)) static void expect_ids(const coli_tokenizer_t *t, const char *text,
                                               const int *want)
{
	char err[256];
	int *ids, n, m = 0;
	int rc = coli_tokenizer_encode(t, text, strlen(text), &ids, &n, err, sizeof(err));
	CHECK(rc == 0, "encode \"%s\": %d %s", text, rc, err);
	if (rc)
		return;
	while (want[m] >= 0)
		m++;
	int same = n == m && (n == 0 || !memcmp(ids, want, (size_t)n * sizeof(int)));
	if (!same) {
		fprintf(stderr, "encode \"%s\": got", text);
		for (int i = 0; i < n; i++)
			fprintf(stderr, " %d", ids[i]);
		fprintf(stderr, ", want");
		for (int i = 0; i < m; i++)
			fprintf(stderr, " %d", want[i]);
		fputc('\n', stderr);
		g_fail = 1;
	}
	free(ids);
}

#endif
