/*
 * io/gguf.h — reading GGUF files (the format llama.cpp and its quantizers
 * write), validated. Nothing here knows about models: a GGUF is a table of
 * typed metadata (key -> value) and a table of tensors (name, ggml type,
 * dims, data range). core/model/ maps both to a model.
 *
 * The file is mapped read-only; every count, length and offset in it is
 * hostile until checked against the mapping. All functions return 0 or
 * -errno (-EBADMSG for a malformed file) with "PATH: what" in
 * coli_io_errmsg().
 */
#ifndef COLI_IO_GGUF_H
#define COLI_IO_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/ggml.h" /* the tensor types: names, blocks */

/* Metadata value types (the format's numbering). */
enum coli_gguf_vtype {
	COLI_GGUF_U8 = 0,
	COLI_GGUF_I8 = 1,
	COLI_GGUF_U16 = 2,
	COLI_GGUF_I16 = 3,
	COLI_GGUF_U32 = 4,
	COLI_GGUF_I32 = 5,
	COLI_GGUF_F32 = 6,
	COLI_GGUF_BOOL = 7,
	COLI_GGUF_STR = 8,
	COLI_GGUF_ARR = 9,
	COLI_GGUF_U64 = 10,
	COLI_GGUF_I64 = 11,
	COLI_GGUF_F64 = 12,
};

/* One metadata entry. Scalars: v (integers widened, bools 0/1, floats in
 * v.f), strings: s/len (not NUL-terminated: they point into the file).
 * Arrays: atype and n elements at data (numbers, little endian, packed), or
 * for strings through coli_gguf_arr_str. */
struct coli_gguf_kv {
	char *key;
	enum coli_gguf_vtype type;
	enum coli_gguf_vtype atype; /* ARR: the elements' type */
	uint64_t n;                 /* ARR: elements */
	union {
		uint64_t u;
		int64_t i;
		double f;
	} v;
	const char *s;              /* STR */
	uint64_t len;               /* STR: bytes */
	const unsigned char *data;  /* ARR of numbers: the packed elements */
	const unsigned char **strs; /* ARR of STR: where each element's u64 length is */
};

struct coli_gguf_tensor {
	char *name;
	uint32_t type; /* enum coli_ggml_type, or another of ggml's numbers (cpu/ggml.h) */
	int ndim;
	uint64_t ne[4];  /* ne[0]: elements of a row (the innermost dim) */
	uint64_t offset; /* absolute in the file */
	uint64_t bytes;
};

struct coli_gguf {
	char *path;
	const unsigned char *map; /* the file (or the caller's buffer: parse) */
	uint64_t map_bytes;
	int mapped; /* map is ours to unmap */
	uint32_t version;
	uint32_t alignment;
	uint64_t data_offset;
	int n_kv, n_tensors;
	struct coli_gguf_kv *kv;
	struct coli_gguf_tensor *t;
};

int coli_gguf_open(const char *path, struct coli_gguf *g);
/* Parse a GGUF held in memory (the fuzz target's entry): p must outlive g. */
int coli_gguf_parse(const void *p, uint64_t n, const char *path, struct coli_gguf *g);
void coli_gguf_close(struct coli_gguf *g);

/* A model split by llama.cpp's gguf-split: PREFIX-00001-of-0000N.gguf ..
 * PREFIX-0000N-of-0000N.gguf, each holding split.no (u16, 0-based),
 * split.count (u16, N) and split.tensors.count (i32: the whole model's),
 * the model's metadata in part 1 only. Given part 1 (or a file without
 * split.count, or with split.count 1: one part), opens every part into
 * *parts (malloc'd, n_parts of them) and checks they belong together: each
 * part's split.count and split.no, the tensor total, no tensor name in two
 * parts. A missing part is -ENOENT naming it; another part than the first
 * is refused naming the first. */
int coli_gguf_open_split(const char *path, struct coli_gguf **parts, int *n_parts);
void coli_gguf_close_split(struct coli_gguf *parts, int n_parts);

const struct coli_gguf_kv *coli_gguf_find(const struct coli_gguf *g, const char *key);
/* Typed reads of a scalar; -ENOENT when absent, -EBADMSG (message names the
 * key) when the value has another type or does not fit. */
int coli_gguf_get_u64(const struct coli_gguf *g, const char *key, uint64_t *out);
int coli_gguf_get_f64(const struct coli_gguf *g, const char *key, double *out);
int coli_gguf_get_str(const struct coli_gguf *g, const char *key, const char **s, uint64_t *len);
/* Element i of an array: a string (pointer into the file), or a number. */
const char *coli_gguf_arr_str(const struct coli_gguf_kv *kv, uint64_t i, uint64_t *len);
int64_t coli_gguf_arr_i64(const struct coli_gguf_kv *kv, uint64_t i);
double coli_gguf_arr_f64(const struct coli_gguf_kv *kv, uint64_t i);

const struct coli_gguf_tensor *coli_gguf_tensor_find(const struct coli_gguf *g, const char *name);
const void *coli_gguf_tensor_data(const struct coli_gguf *g, const struct coli_gguf_tensor *t);

const char *coli_gguf_vtype_name(uint32_t vtype);

#endif
