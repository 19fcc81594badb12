/*
 * tools/fuzz/fuzz_tok.h — shared by the fuzz targets that tokenize: the fixture
 * tokenizer (tests/fixtures/tokenizer/tokenizer.json, read once; tools/fuzz/fuzz.sh
 * runs the targets from the repository's root) and an encode/decode round
 * trip that traps on an id outside the vocabulary.
 */
#ifndef COLI_FUZZ_TOK_H
#define COLI_FUZZ_TOK_H

#include <stdio.h>
#include <stdlib.h>

#include "core/coli.h"

static inline char *slurp(const char *path, size_t *n)
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

static inline void round_trip(const coli_tokenizer_t *t, const char *text, size_t len)
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

/* The fixture tokenizer, loaded on first use. */
static inline const coli_tokenizer_t *fixture_tokenizer(void)
{
	static coli_tokenizer_t *tok;
	char err[512];

	if (!tok) {
		size_t len;
		char *js = slurp("tests/fixtures/tokenizer/tokenizer.json", &len);

		if (!js || coli_tokenizer_load(js, len, &tok, err, sizeof(err)))
			abort(); /* run from the repository's root */
		free(js);
	}
	return tok;
}

#endif
