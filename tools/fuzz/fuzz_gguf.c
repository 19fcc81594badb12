/*
 * tools/fuzz/fuzz_gguf.c — libFuzzer target for the GGUF reader (io/gguf.c). The
 * input is a whole GGUF file. Every parse must either fail cleanly or give
 * metadata whose strings and arrays lie inside the input, and tensors whose
 * data ranges lie inside it, aligned and sized by their type and dims. A
 * file that parses is then read as `coli convert` reads one, metadata only
 * (core/convert/convert_gguf.c's coli_convert_gguf_meta: the family's keys
 * -> the config, tokenizer.ggml.* -> tokenizer.json, the config's round
 * trip): it must convert or refuse, never crash. Seeds: tests/fuzz/gguf/
 * (arch-*.gguf: one per family llama.cpp names, keys as its converter
 * writes them, tests/convert/gguf_import.py's `seed`).
 * fuzz-max-len: 65536
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert/convert_internal.h"
#include "io/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inside(const uint8_t *data, size_t size, const void *p, uint64_t n)
{
	const uint8_t *q = p;

	if (q < data || q > data + size || n > (uint64_t)(data + size - q))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct coli_gguf g;
	volatile uint64_t sink = 0;

	if (coli_gguf_parse(data, size, "fuzz", &g))
		return 0;
	for (int i = 0; i < g.n_kv; i++) {
		const struct coli_gguf_kv *kv = &g.kv[i];

		if (coli_gguf_find(&g, kv->key) != kv)
			abort();
		if (kv->type == COLI_GGUF_STR)
			inside(data, size, kv->s, kv->len);
		if (kv->type != COLI_GGUF_ARR)
			continue;
		for (uint64_t j = 0; j < kv->n; j++) {
			uint64_t len;
			const char *s = coli_gguf_arr_str(kv, j, &len);

			if (kv->atype == COLI_GGUF_STR) {
				if (!s)
					abort();
				inside(data, size, s, len);
				sink += len ? (unsigned char)s[len - 1] : 0;
			} else {
				sink += (uint64_t)coli_gguf_arr_i64(kv, j);
				sink += (uint64_t)coli_gguf_arr_f64(kv, j);
			}
		}
	}
	for (int i = 0; i < g.n_tensors; i++) {
		const struct coli_gguf_tensor *t = &g.t[i];
		unsigned be, bb;
		uint64_t n = 1;

		if (coli_gguf_tensor_find(&g, t->name) != t ||
		    coli_ggml_type_block(t->type, &be, &bb))
			abort();
		for (int d = 0; d < 4; d++)
			n *= t->ne[d];
		if (t->offset % g.alignment || n / be * bb != t->bytes)
			abort();
		inside(data, size, coli_gguf_tensor_data(&g, t), t->bytes);
		if (t->bytes)
			sink += ((const uint8_t *)coli_gguf_tensor_data(&g, t))[t->bytes - 1];
	}
	(void)sink;
	{
		struct coli_convert_hf h;
		char err[512];

		coli_convert_gguf_meta(&g, "fuzz", &h, err, sizeof(err));
		coli_convert_hf_free(&h);
	}
	coli_gguf_close(&g);
	return 0;
}
