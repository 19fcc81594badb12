/*
 * tools/fuzz/fuzz_safetensors.c — libFuzzer target for the safetensors header
 * parser (io/safetensors.c). Input: the first 8 bytes are the data region's
 * size (little endian, so offsets near and past it are explored), the rest
 * is the JSON header. Every parse must either fail cleanly or produce
 * tensors whose ranges lie inside the data region and match dtype x shape.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct coli_st_file f;
	uint64_t data_bytes = 0;

	if (size < 8)
		return 0;
	for (int i = 7; i >= 0; i--)
		data_bytes = data_bytes << 8 | data[i];
	data_bytes &= (1ull << 40) - 1;
	if (coli_io_st_parse_header((const char *)data + 8, size - 8, data_bytes, "fuzz", &f))
		return 0;
	for (int i = 0; i < f.n; i++) {
		const struct coli_st_tensor *t = &f.t[i];
		uint64_t hdr_end = 8 + (uint64_t)(size - 8);
		unsigned es = coli_io_st_dtype_bytes(t->dtype);

		if (t->offset < hdr_end || t->offset - hdr_end > data_bytes ||
		    t->bytes > data_bytes - (t->offset - hdr_end))
			abort();
		if (es && t->bytes != coli_io_st_numel(t) * es)
			abort();
		if (coli_io_st_find(&f, t->name) == NULL)
			abort();
	}
	coli_io_st_close(&f);
	return 0;
}
