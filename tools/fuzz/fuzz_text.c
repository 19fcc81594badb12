/*
 * tools/fuzz/fuzz_text.c — libFuzzer target for the text parsers a model file
 * carries: the input's first byte picks the parser, the rest is its input.
 *
 *   0  coli's model config (core/model/config.c coli_config_parse)
 *   1  a tokenizer.json (coli_tokenizer_load), then a fixed text encoded and
 *      decoded with it
 *   2  text through the fixture tokenizer (encode, decode, streaming decode
 *      is covered by tests/tokenizer/detok_stream): any bytes, valid UTF-8
 *      or not
 *   3  a generated reply split by every family's format (core/text/reply.c
 *      coli_reply_parse), the prompt's think block open or not: every call
 *      named, its arguments JSON text
 *
 * The fixture tokenizer is tests/fixtures/tokenizer/tokenizer.json, read
 * once (the target runs from the repository's root, as tools/fuzz/fuzz.sh runs
 * it). Seeds: tests/fuzz/text/ and tools/fuzz/seed/fuzz_text.seed.sh.
 */
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"
#include "tools/fuzz/fuzz_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data + 1;
	size_t n = size ? size - 1 : 0;
	char err[512] = "";

	if (!size)
		return 0;
	switch (data[0] % 4) {
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
	case 2:
		round_trip(fixture_tokenizer(), s, n);
		break;
	default:
		for (int f = COLI_CHAT_PLAIN; f <= COLI_CHAT_HARMONY; f++) {
			struct coli_reply r;

			if (coli_reply_parse((enum coli_chat_family)f, s, n, data[0] >> 7, NULL,
			                     &r))
				continue; /* (out of memory only) */
			if (!r.content)
				__builtin_trap();
			for (int i = 0; i < r.n_calls; i++)
				if (!r.calls[i].name || !r.calls[i].arguments)
					__builtin_trap();
			coli_reply_free(&r);
		}
	}
	return 0;
}
