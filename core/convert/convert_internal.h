/*
 * core/convert/convert_internal.h — what the converter's files share:
 * core/convert/convert_hf.c reads a Hugging Face directory (config dialects, index,
 * tokenizer files) into struct coli_convert_hf; core/convert/convert.c plans the
 * container from it and streams the tensors; core/convert/convert_gguf.c reads a
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
	/* A GGUF source (core/convert/convert_gguf.c): ggml[s][i] is tensor i of
	 * st[s]'s ggml block type, -1 where dtype says all (one shard per part
	 * of a split file); NULL for safetensors */
	int **ggml;
	/* A GGUF of llama.cpp's "llama" family: its attn_q / attn_k rows are in
	 * ggml's interleaved RoPE order (llama.cpp's converter permutes each
	 * head's rows: checkpoint row i*hd/2 + k is GGUF row 2k + i); the
	 * converter reads them back into the checkpoint's order */
	int rope_interleaved;
	/* quantization_config fp8 (core/convert/convert_fp8.c): F8 weights with
	 * <name>_scale_inv block scales; block 0: the whole dimension */
	int fp8;
	uint64_t fp8_block[2]; /* weight_block_size: [rows, cols] */
	/* quantization_config mxfp4 (gpt-oss, core/convert/convert_gptoss.c):
	 * experts as <name>_blocks / <name>_scales */
	int mxfp4;
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
/* config.json (cfg) and generation_config.json (gen, or NULL) -> h->cfg
 * (core/convert/convert_hf_config.c); h->dir names the files in messages. */
int coli_convert_hf_config(struct coli_convert_hf *h, json_t *cfg, json_t *gen,
                           enum coli_dtype quant, char *errbuf, size_t errlen);

/* minimax_m2's keys (core/convert/convert_minimax.c's top) over c as the shared
 * keys filled it; *n_mtp gets the MTP layers to skip. 0 or -errno, errbuf
 * naming the key. */
int coli_convert_hf_minimax(json_t *cfg, const char *path, struct coli_model_config *c, int *n_mtp,
                            char *errbuf, size_t errlen);

/* gpt_oss's keys (core/convert/convert_gptoss.c's top) over c as the shared
 * keys filled it. 0 or -errno, errbuf naming the key. */
int coli_convert_hf_gptoss(json_t *cfg, const char *path, struct coli_model_config *c, char *errbuf,
                           size_t errlen);
/* quantization_config with quant_method "mxfp4" (qc) -> h->mxfp4; refused
 * for a family other than gpt_oss. */
int coli_convert_mxfp4_load(struct coli_convert_hf *h, const json_t *qc, const char *path,
                            char *errbuf, size_t errlen);

/* GGUF as a source: 1 if path is a file starting with GGUF's magic; _load
 * fills h as coli_convert_hf_load and _open_shards together would (a
 * virtual shard per part: core/convert/convert_gguf.c's top); _bytes is what n elements
 * (whole blocks) of a ggml type take. */
int coli_convert_gguf_is(const char *path);
int coli_convert_gguf_load(const struct coli_convert_opts *o, struct coli_convert_hf *h,
                           char *errbuf, size_t errlen);
uint64_t coli_convert_gguf_bytes(uint32_t type, uint64_t n);
/* A parsed GGUF's metadata alone (no tensor mapped, no file opened): the
 * config and the text sections _load would make, or what it would refuse
 * (tools/fuzz/fuzz_gguf.c feeds it every input that parses). h is filled as by
 * _load; free it with coli_convert_hf_free whatever this returns. */
struct coli_gguf;
int coli_convert_gguf_meta(struct coli_gguf *g, const char *path, struct coli_convert_hf *h,
                           char *errbuf, size_t errlen);
/* The GGUF name of the checkpoint name a GGUF tensor was read as
 * ("model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight", an
 * expert's -> "blk.3.ffn_gate_exps.weight, expert 5"); -ENOENT for a name no
 * GGUF tensor becomes. For messages: a GGUF's user knows its own names. */
int coli_convert_gguf_name(const char *hf, char *out, size_t n);
/* A source tensor's name for messages: from a GGUF (gguf != 0) "its GGUF
 * name (read as hf)" in buf, else (or when it has none) hf itself. */
const char *coli_convert_src_label(int gguf, const char *hf, char *buf, size_t n);
/* tokenizer.ggml.* of g as a tokenizer.json text in *out (NULL, with a
 * warning, when g has no tokenizer): core/convert/convert_gguf_tok.c. */
struct coli_gguf;
int coli_convert_gguf_tokenizer(const struct coli_gguf *g, const char *path, char **out,
                                char *errbuf, size_t errlen);
/* Either source's elements [elem0, elem0+n) of t as stored, one pread (ggml:
 * a GGUF block type, whole rows; -1: t->dtype says), errbuf saying what
 * failed; and their widening to fp32: elements [i0, i1) of src to dst[i0,
 * i1) (coli_io_st_widen, or coli_ggml_dequant by whole blocks). */
int coli_convert_src_read(const struct coli_st_file *f, const struct coli_st_tensor *t, int ggml,
                          uint64_t elem0, uint64_t n, void *dst, char *errbuf, size_t errlen);
int coli_convert_src_widen(int ggml, enum coli_st_dtype d, const void *src, uint64_t i0,
                           uint64_t i1, float *dst);

/* A config.json's RoPE scaling (rope_scaling or rope_parameters: "yarn",
 * "linear"; "default" or none leaves c as it is; any other type refused by
 * name) into c (core/convert/convert_rope.c; c->max_ctx set first): 0, or
 * -errno with errbuf naming path. */
struct json_t;
int coli_convert_hf_rope(struct json_t *cfg, struct coli_model_config *c, const char *path,
                         char *errbuf, size_t errlen);
/* A GGUF's {arch}.rope.scaling.* keys into c (core/convert/convert_rope.c;
 * c->max_ctx set first): 0, or -errno with errbuf naming path and the key. */
struct coli_gguf;
int coli_convert_gguf_rope(const struct coli_gguf *g, const char *arch, struct coli_model_config *c,
                           const char *path, char *errbuf, size_t errlen);
/* FP8 checkpoints (core/convert/convert_fp8.c): reads config.json's
 * quantization_config (h->section[COLI_SECTION_HF_CONFIG]) into h->fp8*;
 * refuses any quant_method but fp8, naming it. An FP8 checkpoint without
 * --quant (o->quant_auto) becomes q8 (h->cfg.quant and the CONFIG section). */
int coli_convert_fp8_load(const struct coli_convert_opts *o, struct coli_convert_hf *h,
                          char *errbuf, size_t errlen);

/* The tokenizer.json text of a byte-level BPE vocabulary (core/model/
 * convert_tok.c's top has the layout): vocab (object token -> id), merges
 * (array of "a b"), added (array of added-token objects) are borrowed;
 * regex is the Split pattern (NULL: ByteLevel's own GPT-2 regex). *out is
 * malloc'd; -ENOMEM is the only error. */
struct json_t;
struct coli_convert_tok {
	struct json_t *vocab, *merges, *added;
	const char *regex;
	/* more Splits, applied in turn after regex's (DeepSeek-V3's three):
	 * n_more of them, or 0 */
	const char *const *more;
	int n_more;
	int nfc;           /* an NFC normalizer */
	int ignore_merges; /* a pre-token that is a token is that token (tiktoken's rule) */
};
int coli_convert_tok_write(const struct coli_convert_tok *t, char **out);

/* A tiktoken tokenizer (core/convert/convert_tiktoken.c): when dir has no
 * tokenizer.json, _load reads the rank file tokenizer_config.json (tokcfg,
 * may be NULL) names, or tiktoken.model, into h's TOKENIZER section; no
 * rank file -> 0 with nothing stored; a class coli does not know -> -ENOTSUP
 * naming it. _json turns a rank file's text (named name in messages) into
 * the tokenizer.json text *out (malloc'd). */
int coli_convert_tiktoken_load(struct coli_convert_hf *h, const struct json_t *tokcfg, char *errbuf,
                               size_t errlen);
int coli_convert_tiktoken_json(const char *text, size_t len, const struct json_t *tokcfg,
                               const char *name, char **out, char *errbuf, size_t errlen);
/* Kimi-K2's pattern in PCRE2 (convert_tiktoken.c's top): its tiktoken
 * tokenizer's, and a GGUF's tokenizer.ggml.pre "kimi-k2". */
extern const char coli_convert_kimi_regex[];

/* Formats the message into errbuf and returns rc (the converter's errors). */
int coli_convert_errf(char *errbuf, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "path/name" in a malloc'd string. */
char *coli_convert_path_join(const char *dir, const char *name);

#endif
