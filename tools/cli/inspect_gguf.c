/*
 * tools/cli/inspect_gguf.c — `coli inspect FILE.gguf`: what a GGUF holds, as
 * io/gguf.c reads it. One line a metadata key (type and value; arrays their
 * length and element type, and -v their first elements), a summary of the
 * tensor types, and with -v one line a tensor. The lines are stable: the
 * GGUF reader's test compares them with the `gguf` Python package's reading.
 */
#include <stdio.h>
#include <string.h>

#include "io/gguf.h"
#include "io/io.h"
#include "tools/tools.h"

#define ARR_SHOWN 8 /* elements of an array shown with -v */

static void print_scalar(const struct coli_gguf_kv *kv)
{
	switch (kv->type) {
	case COLI_GGUF_F32:
	case COLI_GGUF_F64:
		printf("%.9g", kv->v.f);
		break;
	case COLI_GGUF_I8:
	case COLI_GGUF_I16:
	case COLI_GGUF_I32:
	case COLI_GGUF_I64:
		printf("%lld", (long long)kv->v.i);
		break;
	case COLI_GGUF_STR:
		printf("\"%.*s\"", kv->len > 200 ? 200 : (int)kv->len, kv->s);
		break;
	default:
		printf("%llu", (unsigned long long)kv->v.u);
	}
}

static void print_array(const struct coli_gguf_kv *kv, int verbose)
{
	printf("array[%llu] of %s", (unsigned long long)kv->n, coli_gguf_vtype_name(kv->atype));
	if (!verbose)
		return;
	for (uint64_t i = 0; i < kv->n && i < ARR_SHOWN; i++) {
		uint64_t len;
		const char *s = coli_gguf_arr_str(kv, i, &len);

		if (s)
			printf(" \"%.*s\"", len > 40 ? 40 : (int)len, s);
		else if (kv->atype == COLI_GGUF_F32 || kv->atype == COLI_GGUF_F64)
			printf(" %.9g", coli_gguf_arr_f64(kv, i));
		else if (kv->atype == COLI_GGUF_U64)
			printf(" %llu", (unsigned long long)coli_gguf_arr_i64(kv, i));
		else
			printf(" %lld", (long long)coli_gguf_arr_i64(kv, i));
	}
	if (kv->n > ARR_SHOWN)
		printf(" ...");
}

int inspect_gguf(const char *path, int verbose)
{
	struct coli_gguf g;
	int count[64] = {0}, other = 0;
	uint64_t bytes = 0;

	if (coli_gguf_open(path, &g))
		return tool_err("inspect", "%s", coli_io_errmsg());
	printf("file           %s\n", path);
	printf("gguf           v%u, %d keys, %d tensors, alignment %u, data at %llu of %llu "
	       "bytes\n",
	       g.version, g.n_kv, g.n_tensors, g.alignment, (unsigned long long)g.data_offset,
	       (unsigned long long)g.map_bytes);
	for (int i = 0; i < g.n_kv; i++) {
		const struct coli_gguf_kv *kv = &g.kv[i];

		printf("key %s = ", kv->key);
		if (kv->type == COLI_GGUF_ARR) {
			print_array(kv, verbose);
		} else {
			printf("%s ", coli_gguf_vtype_name(kv->type));
			print_scalar(kv);
		}
		printf("\n");
	}
	for (int i = 0; i < g.n_tensors; i++) {
		const struct coli_gguf_tensor *t = &g.t[i];

		bytes += t->bytes;
		if (t->type < 64)
			count[t->type]++;
		else
			other++;
		if (!verbose)
			continue;
		printf("tensor %s %s [", t->name, coli_ggml_type_name(t->type));
		for (int d = 0; d < t->ndim; d++)
			printf(d ? ", %llu" : "%llu", (unsigned long long)t->ne[d]);
		printf("] at %llu, %llu bytes\n", (unsigned long long)t->offset,
		       (unsigned long long)t->bytes);
	}
	printf("types         ");
	for (int t = 0; t < 64; t++)
		if (count[t])
			printf(" %s %d", coli_ggml_type_name((uint32_t)t), count[t]);
	printf("%s, %llu bytes\n", other ? " (and others)" : "", (unsigned long long)bytes);
	coli_gguf_close(&g);
	return 0;
}
