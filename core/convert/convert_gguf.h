/*
 * core/convert/convert_gguf.h — what the GGUF importer's two files share:
 * core/convert/convert_gguf.c (the file, its tensors under checkpoint names,
 * the load) and core/convert/convert_gguf_config.c ({arch}.* metadata -> the
 * model config, per family).
 */
#ifndef COLI_CONVERT_GGUF_H
#define COLI_CONVERT_GGUF_H

#include "core/convert/convert_internal.h"
#include "io/gguf.h"

/* One load: the file (its metadata: part 1 of a split), every part, its
 * architecture's key prefix, where errors go. */
struct gg {
	struct coli_gguf *g;
	struct coli_gguf *parts; /* [n_parts]; parts[0] is g */
	int n_parts;
	const char *path;
	char arch[32];
	enum coli_arch family;
	int n_main; /* blocks run: block_count less nextn_predict_layers (those
	             * blk.N, N >= n_main, are skipped) */
	char *errbuf;
	size_t errlen;
};

/* A tensor by name, in whichever part holds it; "blk.l.suffix". */
const struct coli_gguf_tensor *coli_convert_gguf_find(struct gg *s, const char *name);
const struct coli_gguf_tensor *coli_convert_gguf_tensor(struct gg *s, int l, const char *suffix);

/* {arch}.* (and the tensors present) -> c and h's MTP / RoPE-order flags:
 * the keys every family has, then its own (core/convert/convert_gguf_config.c's
 * top). 0 or -errno with s->errbuf naming the key. */
int coli_convert_gguf_config(struct gg *s, struct coli_convert_hf *h, enum coli_dtype quant);

#endif
