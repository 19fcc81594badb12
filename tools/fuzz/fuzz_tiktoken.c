/*
 * tools/fuzz/fuzz_tiktoken.c — libFuzzer target for the tiktoken rank-file import
 * of `coli convert` (core/convert/convert_tiktoken.c): a rank file and a
 * tokenizer_config.json through coli_convert_tiktoken_json, as
 * coli_convert_tiktoken_load calls it after reading the files.
 *
 * Input: tokenizer_config.json, a NUL byte, the rank file (no NUL: the
 * config alone, read with no rank file text). A refusal must say why; an
 * accepted rank file's tokenizer.json must load in the engine's tokenizer
 * with the ranks plus the 256 special tokens, and encode and decode a fixed
 * text with a special token in it. Seeds: tools/fuzz/seed/fuzz_tiktoken.seed.sh.
 * fuzz-max-len: 1048576
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert/convert_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const char *json)
{
	static const char text[] = "Hello 世界 it's 12345\n\n <|reserved_token_9999|>[BOS] x";
	coli_tokenizer_t *t;
	char err[512], *back = NULL;
	int *ids = NULL, n = 0;
	size_t nb = 0;

	if (coli_tokenizer_load(json, strlen(json), &t, err, sizeof(err)))
		__builtin_trap(); /* convert wrote what the engine refuses */
	if (coli_tokenizer_n_vocab(t) < 512 ||
	    coli_tokenizer_encode(t, text, sizeof(text) - 1, &ids, &n, err, sizeof(err)) ||
	    coli_tokenizer_decode(t, ids, n, &back, &nb) || nb != sizeof(text) - 1 ||
	    memcmp(back, text, nb))
		__builtin_trap(); /* byte-level BPE over all 256 bytes gives the text back */
	free(ids);
	free(back);
	coli_tokenizer_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t ncfg = nul ? (size_t)(nul - data) : size;
	json_t *cfg = json_loadb((const char *)data, ncfg, 0, NULL);
	const char *ranks = nul ? (const char *)nul + 1 : "";
	size_t nranks = nul ? size - ncfg - 1 : 0;
	char err[512], *out = NULL;

	if (coli_convert_tiktoken_json(ranks, nranks, cfg, "fuzz.tiktoken", &out, err,
	                               sizeof(err))) {
		if (!err[0] || out)
			__builtin_trap(); /* a refusal says why and leaves nothing */
	} else {
		check(out);
	}
	free(out);
	json_decref(cfg);
	return 0;
}
