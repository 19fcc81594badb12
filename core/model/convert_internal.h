/*
 * core/model/convert_internal.h — what the converter's files share:
 * core/model/convert_hf.c reads a Hugging Face directory (config dialects, index,
 * tokenizer files) into struct coli_convert_hf; core/model/convert.c plans the
 * container from it and streams the tensors; core/model/convert_gguf.c reads a
 * GGUF file into the same struct.
 */
#ifndef COLI_CONVERT_INTERNAL_H
#define COLI_CONVERT_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "core/coli.h"
#include "io/io.h"

#define COLI_CONVERT_N_SECTIONS 7 /* indexed by enum coli_section (1..6) */

struct coli_convert_hf {
	char *dir;
	struct coli_model_config cfg; /* filled from config.json (+ generation_config.json) */
	char *index_path;             /* model.safetensors.index.json, or NULL */
	int n_shards;
	char **shards;           /* full paths, in the index's order of first use */
	struct coli_st_file *st; /* [n_shards] headers, opened by coli_convert_hf_open_shards */
	char *section[COLI_CONVERT_N_SECTIONS];
	size_t section_bytes[COLI_CONVERT_N_SECTIONS];
	int fused_seen;      /* diagnostics only */
	int n_mtp;           /* num_nextn_predict_layers: layers n_layers.. of the checkpoint are
	                      * next-token-prediction layers, skipped (never run) */
	int rope_interleave; /* MLA (deepseek_v3): the checkpoint's RoPE dims are interleaved
	                      * pairs; convert de-interleaves their rows (convert_map.c) */
	/* A GGUF source (core/model/convert_gguf.c): for each tensor of st[0]
	 * its ggml block type, -1 where dtype says all; NULL for safetensors */
	int *ggml;
	/* quantization_config fp8 (core/model/convert_fp8.c): F8 weights with
	 * <name>_scale_inv block scales; block 0: the whole dimension */
	int fp8;
	uint64_t fp8_block[2]; /* weight_block_size: [rows, cols] */
};

/* Reads config.json and the optional generation_config.json,
 * tokenizer.json, tokenizer_config.json and chat_template.jinja; finds the
 * shards (index or single file). Does not open the shards. */
int coli_convert_hf_load(const char *dir, enum coli_dtype quant, struct coli_convert_hf *h,
                         char *errbuf, size_t errlen);
/* Opens and validates every shard's header; a shard named by the index but
 * absent is an error naming both files. */
int coli_convert_hf_open_shards(struct coli_convert_hf *h, char *errbuf, size_t errlen);
void coli_convert_hf_free(struct coli_convert_hf *h);

/* minimax_m2's keys (core/model/convert_minimax.c's top) over c as the shared
 * keys filled it; *n_mtp gets the MTP layers to skip. 0 or -errno, errbuf
 * naming the key. */
int coli_convert_hf_minimax(json_t *cfg, const char *path, struct coli_model_config *c, int *n_mtp,
                            char *errbuf, size_t errlen);

/* GGUF as a source: 1 if path is a file starting with GGUF's magic; _load
 * fills h as coli_convert_hf_load and _open_shards together would (one
 * virtual shard: core/model/convert_gguf.c's top); _bytes is what n elements
 * (whole blocks) of a ggml type take. */
int coli_convert_gguf_is(const char *path);
int coli_convert_gguf_load(const struct coli_convert_opts *o, struct coli_convert_hf *h,
                           char *errbuf, size_t errlen);
uint64_t coli_convert_gguf_bytes(uint32_t type, uint64_t n);
/* Either source's elements [elem0, elem0+n) of t as stored, one pread (ggml:
 * a GGUF block type, whole rows; -1: t->dtype says), errbuf saying what
 * failed; and their widening to fp32: elements [i0, i1) of src to dst[i0,
 * i1) (coli_io_st_widen, or coli_ggml_dequant by whole blocks). */
int coli_convert_src_read(const struct coli_st_file *f, const struct coli_st_tensor *t, int ggml,
                          uint64_t elem0, uint64_t n, void *dst, char *errbuf, size_t errlen);
int coli_convert_src_widen(int ggml, enum coli_st_dtype d, const void *src, uint64_t i0,
                           uint64_t i1, float *dst);

/* YaRN's keys of a config.json (rope_scaling or rope_parameters of type
 * "yarn") into c (core/model/convert_yarn.c; c->max_ctx set first): 0 when
 * there are none too, or -errno with errbuf naming path. */
struct json_t;
int coli_convert_hf_yarn(struct json_t *cfg, struct coli_model_config *c, const char *path,
                         char *errbuf, size_t errlen);
/* FP8 checkpoints (core/model/convert_fp8.c): reads config.json's
 * quantization_config (h->section[COLI_SECTION_HF_CONFIG]) into h->fp8*;
 * refuses any quant_method but fp8, naming it. An FP8 checkpoint without
 * --quant (o->quant_auto) becomes q8 (h->cfg.quant and the CONFIG section). */
int coli_convert_fp8_load(const struct coli_convert_opts *o, struct coli_convert_hf *h,
                          char *errbuf, size_t errlen);

/* Formats the message into errbuf and returns rc (the converter's errors). */
int coli_convert_errf(char *errbuf, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "path/name" in a malloc'd string. */
char *coli_convert_path_join(const char *dir, const char *name);

#endif
