/*
 * core/convert/convert_job.h — what the converter's passes share
 * (core/convert/convert.c plans and writes, core/convert/convert_map.c maps a
 * checkpoint's tensors to jobs): the job a source tensor's rows become, the
 * canonical tensors expected, and the conversion's state.
 */
#ifndef COLI_CONVERT_JOB_H
#define COLI_CONVERT_JOB_H

#include <time.h>

#include "core/convert/convert_internal.h"
#include "cpu/cpu.h"
#include "cpu/ggml.h"

enum dst_kind { DST_TENSOR, DST_SLAB };
/* How a job's source rows become its destination rows (MLA, convert_map.c):
 * as they are; RoPE dims de-interleaved (destination row i < rows/2 is source
 * row 2i, row rows/2 + i is 2i + 1); transposed (the source is `cols` rows
 * of `rows` values, destination row r is their column r). gpt-oss's fused
 * gate_up (core/convert/convert_gptoss.c), whose gate and up columns alternate:
 * XF_PAIR, the source rows hold 2 * cols values and destination column c is
 * source column 2c + pair; XF_TRANSPOSE_PAIR, the source is `cols` rows of
 * 2 * rows values and destination row r is their column 2r + pair. */
enum job_xf { XF_NONE, XF_DEINTERLEAVE, XF_TRANSPOSE, XF_PAIR, XF_TRANSPOSE_PAIR };
enum { PART_GATE, PART_UP, PART_DOWN };

struct job {
	int shard;
	const struct coli_st_tensor *src;
	uint64_t src_row0; /* first source row (of `cols` elements) */
	uint64_t rows;     /* destination matrix rows == rows copied */
	uint64_t cols;
	enum dst_kind kind;
	int idx; /* writer tensor index, or expert layer index */
	uint32_t expert;
	uint64_t base; /* byte offset of the matrix inside the tensor/slab */
	enum coli_dtype dtype;
	int ggml;   /* a GGUF block type (read and widened by blocks), or -1 */
	int unrope; /* head dim of rows stored in ggml's interleaved RoPE order
	             * (hf.rope_interleaved: attn_q, attn_k), or 0 */
	int copy;   /* ggml's blocks are dtype's (Q8_0 -> q8, Q4_0 -> q4): repacked,
	             * never widened (cpu/ggml.h) */
	enum job_xf xf;
	uint64_t dst_row0; /* the rows land at this row of a matrix of dst_rows rows */
	uint64_t dst_rows; /* (0: the job is the whole matrix, dst_row0 0) */
	/* an F8 source's block scales (<name>_scale_inv, in shard scale_shard),
	 * or NULL (core/convert/convert_fp8.c) */
	const struct coli_st_tensor *scale;
	int scale_shard;
	int pair; /* XF_PAIR, XF_TRANSPOSE_PAIR: which of the alternating columns */
	/* MXFP4 (gpt-oss's <name>_blocks [.., rows, cols/32, 16] with
	 * <name>_scales [.., rows, cols/32], core/convert/convert_gptoss.c): the
	 * scales tensor (src is the blocks one), or NULL; destination row r is
	 * source row src_row0 + r * mx_stride */
	const struct coli_st_tensor *mx_scales;
	int mx_shard, mx_stride;
};

/* One canonical tensor: what we expect and whether a source filled it. */
struct slot {
	char name[COLI_TENSOR_NAME_MAX];
	int ndim;
	uint64_t shape[2];
	enum coli_dtype dtype;
	int idx;             /* writer index */
	const char *hf_seen; /* source name once mapped */
};

struct cv {
	const struct coli_convert_opts *o;
	struct coli_convert_hf hf;
	struct coli_model_config *c;
	coli_io_writer_t *w;
	struct slot *slots;
	int n_slots;
	struct coli_expert_layer *el; /* [n_el] */
	int n_el;
	int layer_el[COLI_MAX_LAYERS]; /* expert layer index per layer, -1 dense */
	unsigned char *part_seen;      /* [n_el][n_experts][3] */
	struct job *jobs;
	size_t n_jobs, cap_jobs;
	char *errbuf;
	size_t errlen;
	int n_fb;                  /* matrices (expert layers: one each) kept as bf16 */
	char fb[256];              /* the first of their names, for the line that says so */
	int n_kfb;                 /* K-quant targets: matrices of partial 256-blocks */
	char kfb[256];             /* (their fallback type: kq_fallback), likewise */
	coli_cpu_pool_t *pool;     /* converts a chunk's rows in parallel (--threads) */
	int mtp_skipped;           /* tensors of next-token-prediction layers left out */
	float *fp8_scale;          /* a chunk's block scales (coli_convert_fp8_chunk) */
	size_t fp8_cap;            /* floats */
	size_t n_blocks, n_copied; /* GGUF jobs of a block type; of those, kept as stored */
	size_t n_mx_exact;         /* GGUF MXFP4 matrices (jobs) to q8 exactly (convert_gptoss.c) */
	uint64_t mx_flushed;       /* MXFP4 blocks under q8's scale range, written as zero */
	int keep;                  /* a GGUF without --quant: blocks with a coli twin kept */
	/* progress */
	uint64_t done, total;
	struct timespec t0;
	double last_draw;
};

/* Elements in one of a job's source rows. */
static inline uint64_t coli_convert_src_cols(const struct job *j)
{
	return j->xf == XF_TRANSPOSE        ? j->rows
	       : j->xf == XF_TRANSPOSE_PAIR ? 2 * j->rows
	       : j->xf == XF_PAIR           ? 2 * j->cols
	                                    : j->cols;
}

/* Bytes of n elements (whole rows) of a job's source as stored. */
static inline uint64_t coli_convert_src_bytes(const struct job *j, uint64_t n)
{
	return j->ggml >= 0   ? coli_convert_gguf_bytes((uint32_t)j->ggml, n)
	       : j->mx_scales ? n / 32 * 17 /* 16 bytes of nibbles and a scale a block */
	                      : n * coli_io_st_dtype_bytes(j->src->dtype);
}

/* The map pass (convert_map.c): one source tensor to its job(s); then
 * whether every expected tensor and expert part was supplied (the error
 * names the missing one the way the checkpoint spells it). */
int coli_convert_map_tensor(struct cv *v, int shard, const struct coli_st_tensor *t);
/* One job into v's table (an F8 source bound to its block scales first). */
int coli_convert_add_job(struct cv *v, const struct job *j);
/* The checkpoint name of a canonical (coli) tensor name, into buf; NULL for
 * one without a single source (cn: "tok_embd", "blk.3.attn_q", ...). */
const char *coli_convert_slot_hf(const struct cv *v, const char *cn, char *buf, size_t n);
int coli_convert_check_complete(struct cv *v);

/* FP8 (core/convert/convert_fp8.c). _screen, before a tensor is mapped: 1
 * for one the F8 weights' widening reads (a "<weight>_scale_inv" of an FP8
 * checkpoint), not mapped itself; an error for an F8 tensor without an fp8
 * quantization_config; else 0. _bind: a job of an F8 source gets its scale
 * tensor, shape checked (errors name it). _chunk: rows [r0, r0+n) of j's
 * destination get their block scales read into v->fp8_scale, described in
 * *fc. _widen: elements [i0, i1) of a chunk of `cols` columns, value x scale
 * in one fp32 multiply (as transformers dequantizes to float32); -EINVAL on
 * a NaN encoding or a non-finite product. */
struct fp8_chunk {
	const float *scale; /* [scale rows of the chunk][ncb] fp32 */
	uint64_t rr0;       /* the chunk's first row within its matrix */
	uint64_t br, bc;    /* the block: rows, columns */
	uint64_t ncb;       /* scale columns: ceil(cols / bc) */
};
/* gpt-oss (core/convert/convert_gptoss.c, below convert_map.c and convert.c:
 * it calls neither). _map: a layer's tensor whose layer suffix is `rest` ->
 * *jobs (malloc'd, *n_jobs of them, for convert_map.c to add): its fused
 * experts in either form, MXFP4 or bf16, their biases; 1 when rest is not
 * one of them, else 0 or -errno. _rows: rows [r0, r0+n) of an MXFP4 job:
 * 1 with them in q8 exactly in out (planar, 2 x E2M1 the int8 quants,
 * 2^(e-128) the fp16 scales), 0 with them dequantized into `in` (fp32, for
 * any other dtype), or -errno. */
int coli_convert_gptoss_map(struct cv *v, int shard, const struct coli_st_tensor *t, int l,
                            const char *rest, struct job **jobs, size_t *n_jobs);
int coli_convert_mxfp4_rows(struct cv *v, const struct job *j, uint64_t r0, uint64_t n, float *in,
                            unsigned char *out);
/* Rows [r0, r0+n) of a GGUF's MXFP4 matrix (raw: ggml's 17-byte blocks, e
 * then qs[16], qs[i] holding elements i and i + 16) into q8 exactly, planar
 * in out, as _rows does for a checkpoint's: 0 or -errno (a scale past fp16's
 * range; label names the tensor, convert.c's coli_convert_src_label). */
int coli_convert_mxfp4_gguf(struct cv *v, const struct job *j, uint64_t r0, uint64_t n,
                            const unsigned char *raw, unsigned char *out, const char *label);
int coli_convert_fp8_screen(struct cv *v, int shard, const struct coli_st_tensor *t);
int coli_convert_fp8_bind(struct cv *v, struct job *j);
int coli_convert_fp8_chunk(struct cv *v, const struct job *j, uint64_t r0, uint64_t n,
                           struct fp8_chunk *fc);
int coli_convert_fp8_widen(const struct fp8_chunk *fc, enum coli_st_dtype d, const void *src,
                           uint64_t cols, uint64_t i0, uint64_t i1, float *dst);

#endif
