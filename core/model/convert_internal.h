/*
 * core/model/convert_internal.h — what the converter's files share:
 * core/model/convert_hf.c reads a Hugging Face directory (config dialects, index,
 * tokenizer files) into struct coli_convert_hf; core/model/convert.c plans the
 * container from it and streams the tensors.
 */
#ifndef COLI_CONVERT_INTERNAL_H
#define COLI_CONVERT_INTERNAL_H

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
	int fused_seen; /* diagnostics only */
	int n_mtp;      /* num_nextn_predict_layers: layers n_layers.. of the checkpoint are
	                 * next-token-prediction layers, skipped (never run) */
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

/* "path/name" in a malloc'd string. */
char *coli_convert_path_join(const char *dir, const char *name);

#endif
