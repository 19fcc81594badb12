/*
 * mem/dtype.c — the weight formats' names and sizes (mem/dtype.h): what the
 * container reader, the GPU backend and the CPU kernels agree on before any
 * of them touches a weight. The formats' contents are cpu/'s (cpu/dtype.c).
 */
#include <errno.h>
#include <string.h>

#include "mem/dtype.h"

const char *coli_dtype_name(enum coli_dtype t)
{
	switch (t) {
	case COLI_DTYPE_F32:
		return "f32";
	case COLI_DTYPE_F16:
		return "f16";
	case COLI_DTYPE_BF16:
		return "bf16";
	case COLI_DTYPE_Q8_0:
		return "q8_0";
	case COLI_DTYPE_Q4_0:
		return "q4_0";
	}
	return "?";
}

int coli_dtype_parse(const char *s, enum coli_dtype *out)
{
	static const struct {
		const char *name;
		enum coli_dtype t;
	} names[] = {
	    {"f32", COLI_DTYPE_F32},   {"f16", COLI_DTYPE_F16},   {"bf16", COLI_DTYPE_BF16},
	    {"q8", COLI_DTYPE_Q8_0},   {"q8_0", COLI_DTYPE_Q8_0}, {"q4", COLI_DTYPE_Q4_0},
	    {"q4_0", COLI_DTYPE_Q4_0},
	};
	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(s, names[i].name)) {
			*out = names[i].t;
			return 0;
		}
	}
	return -EINVAL;
}

int coli_dtype_is_quant(enum coli_dtype t)
{
	return t == COLI_DTYPE_Q8_0 || t == COLI_DTYPE_Q4_0;
}

size_t coli_dtype_mat_bytes(enum coli_dtype t, size_t rows, size_t cols)
{
	size_t n = rows * cols;

	if (rows && n / rows != cols)
		return 0;
	switch (t) {
	case COLI_DTYPE_F32:
		return n * 4;
	case COLI_DTYPE_F16:
	case COLI_DTYPE_BF16:
		return n * 2;
	case COLI_DTYPE_Q8_0:
		if (cols % COLI_QBLOCK)
			return 0;
		return n + rows * (cols / COLI_QBLOCK) * 2;
	case COLI_DTYPE_Q4_0:
		if (cols % COLI_QBLOCK)
			return 0;
		return n / 2 + rows * (cols / COLI_QBLOCK) * 2;
	}
	return 0;
}
