/*
 * tools/fuzz_text.c — libFuzzer target for the text parsers a model file
 * carries: the input's first byte picks the parser, the rest is its input.
 *
 *   0  coli's model config (core/model/config.c coli_config_parse)
 *   1  a tokenizer.json (coli_tokenizer_load), then a fixed text encoded and
 *      decoded with it
 *   2  text through the fixture tokenizer (encode, decode, streaming decode
 *      is covered by tests/tokenizer/detok_stream): any bytes, valid UTF-8
 *      or not
 *
 * The fixture tokenizer is tests/fixtures/tokenizer/tokenizer.json, read
 * once (the target runs from the repository's root, as tools/fuzz.sh runs
 * it). Seeds: tests/fuzz/text/ and tools/fuzz_text.seed.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static coli_tokenizer_t *g_tok;

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	char *p = NULL;
	long len;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (p = malloc((size_t)len)) && fread(p, 1, (size_t)len, f) != (size_t)len) {
		free(p);
		p = NULL;
	}
	*n = p ? (size_t)len : 0;
	fclose(f);
	return p;
}

static void round_trip(const coli_tokenizer_t *t, const char *text, size_t len)
{
	int *ids = NULL, n = 0;
	char *back = NULL, err[256];
	size_t blen = 0;

	if (coli_tokenizer_encode(t, text, len, &ids, &n, err, sizeof(err)) == 0) {
		for (int i = 0; i < n; i++)
			if (ids[i] < 0 || ids[i] >= coli_tokenizer_n_vocab(t))
				__builtin_trap();
		if (coli_tokenizer_decode(t, ids, n, &back, &blen) == 0)
			free(back);
		free(ids);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data + 1;
	size_t n = size ? size - 1 : 0;
	char err[512] = "";

	if (!size)
		return 0;
	switch (data[0] % 3) {
	case 0: {
		struct coli_model_config c;

		if (coli_config_parse(s, n, &c, err, sizeof(err)) && !err[0])
			__builtin_trap();
		break;
	}
	case 1: {
		coli_tokenizer_t *t;
		static const char text[] = "def f(x):\n    return x  # ünïcode ✓ 🐍\r\n\t<|im_end|>";

		if (coli_tokenizer_load(s, n, &t, err, sizeof(err)) == 0) {
			round_trip(t, text, sizeof(text) - 1);
			coli_tokenizer_free(t);
		}
		break;
	}
	default:
		if (!g_tok) {
			size_t len;
			char *js = slurp("tests/fixtures/tokenizer/tokenizer.json", &len);

			if (!js || coli_tokenizer_load(js, len, &g_tok, err, sizeof(err)))
				abort(); /* run from the repository's root */
			free(js);
		}
		round_trip(g_tok, s, n);
	}
	return 0;
}
