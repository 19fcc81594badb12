/*
 * cpu/cpu.h — CPU kernels: weight formats, quantization, GEMV / small GEMM,
 * dense ops and the thread pool. This is the reference every other backend
 * (the GPU kernels in ptx/) must reproduce bit for bit.
 *
 * Weight formats (a matrix is rows x cols, row-major, cols = the reduction dim K):
 *
 *   F32   float  [rows][K]
 *   F16   uint16 [rows][K]                       IEEE half
 *   BF16  uint16 [rows][K]                       top 16 bits of an fp32
 *   Q8_0  int8   [rows][K]         then  fp16 d [rows][K/32]
 *   Q4_0  uint8  [rows][K/2]       then  fp16 d [rows][K/32]
 *   Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K   GGUF's blocks as stored: each row its
 *         K/32 or K/256 whole blocks (cpu/kquant/kquant.c: layout, values, and
 *         their canonical reduction, this one's units with a min term)
 *
 * Quantized matrices are "planar": all quants first, then all block scales,
 * each plane row-major. The values are GGUF's Q8_0 / Q4_0 blocks exactly
 * (same fp16 scale, same int8 values, same nibble order: within a 32-block,
 * byte j holds element j in its low nibble and element j+16 in its high
 * nibble, value = d * (nibble - 8)), only stored as two planes instead of
 * 34/18-byte structs, so both AVX-512 and the GPU can load the quants with
 * aligned vector loads. Import from GGUF is a lossless repack.
 *
 * THE CANONICAL REDUCTION (placement never changes tokens; ptx/ follows it):
 *
 *   Activations for Q8_0/Q4_0 weights are quantized per 32-block:
 *       amax = max_i |x_i|;  d = amax / 127.0f;  id = d != 0 ? 1.0f / d : 0.0f;
 *       q_i  = (int8) roundf(x_i * id)                 (round half away from 0)
 *   For every output row r, 16 fp32 lane accumulators l[0..15] start at +0.0f.
 *   The "units" of the row are visited in ascending order; unit u goes to
 *   lane u % 16:
 *       F32/F16/BF16: unit = element k:  l[k%16] = fmaf(w[r][k], x[k], l[k%16])
 *       Q8_0/Q4_0:    unit = block b:    s = exact int32 sum over the block of
 *                         wq * xq   (Q4_0: wq = nibble - 8)
 *                     l[b%16] = fmaf((float)s, dw[r][b] * dx[b], l[b%16])
 *                     where dw is the fp16 scale widened to fp32 and the product
 *                     dw*dx is rounded to fp32 before the fmaf.
 *   Then the lanes are folded by a fixed tree: for h = 8, 4, 2, 1:
 *       l[j] = l[j] + l[j + h]   for j < h;          y[r] = l[0]
 *   (A warp's shfl_xor butterfly over 16 lanes with offsets 8,4,2,1 yields the
 *   same value, since fp32 addition is commutative.) The integer block sum may
 *   be formed in any order: it is exact. Nothing else may be reassociated;
 *   this file set is compiled with -ffp-contract=off.
 *
 * Threads: the kernels are pure functions over [row0, row1); callers split
 * rows across the pool. No kernel allocates.
 */
#ifndef COLI_CPU_H
#define COLI_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/dtype.h" /* enum coli_dtype, its names and sizes; COLI_QBLOCK */

#define COLI_LANES 16 /* lanes of the canonical reduction */

/* A matrix view. For quant types `data` points at the quant plane and
 * `scales` at the fp16 scale plane (normally data + rows*quant_row_bytes). */
struct coli_mat {
	enum coli_dtype dtype;
	int rows; /* output features */
	int cols; /* reduction dim K */
	const void *data;
	const uint16_t *scales;
};
/* Fill a view of a matrix stored contiguously in format t at p. */
void coli_mat_view(struct coli_mat *m, enum coli_dtype t, int rows, int cols, const void *p);

/* ---- scalar conversions (exact, portable) ---- */
float coli_fp16_to_f32(uint16_t h);
uint16_t coli_f32_to_fp16(float f); /* round to nearest even */
float coli_bf16_to_f32(uint16_t h);
uint16_t coli_f32_to_bf16(float f); /* round to nearest even, NaN kept quiet */

/* ---- weight quantization (used by convert; GGUF's reference rounding) ----
 * Quantize a rows x cols fp32 matrix into format t at dst (coli_dtype_mat_bytes
 * bytes). Q8_0: d = amax/127, q = roundf(x*id). Q4_0: d = max/-8 where max is
 * the signed value of largest magnitude, q = min(15, (int8)(x*id + 8.5f)).
 * As in GGUF: id = d != 0 ? 1.0f/d : 0 in fp32 (x*id can differ from x/d in
 * the last bit), and d is rounded to fp16 only for storage. Returns -EINVAL
 * on a non-finite input or a bad shape. */
int coli_quantize_mat(enum coli_dtype t, const float *src, int rows, int cols, void *dst);
/* The same with a choice of rounding. COLI_ROUND_GGUF is GGUF's reference
 * (above). COLI_ROUND_MSE (Q4_0 only; Q8_0 and others as GGUF) searches each
 * block's scale around GGUF's for the least squared error: the blocks are
 * still plain Q4_0, the error is lower (docs/quant.md). coli convert uses it. */
enum coli_quant_rounding { COLI_ROUND_GGUF = 0, COLI_ROUND_MSE = 1 };
int coli_quantize_mat_ex(enum coli_dtype t, const float *src, int rows, int cols, void *dst,
                         enum coli_quant_rounding rounding);
/* Rows [row0, row1) only of the rows x cols matrix at dst (its planar layout:
 * quants, then scales), from src [rows][cols]: threads can fill one matrix
 * by disjoint row ranges (core/convert/convert.c). */
/* One row of K elements (whole blocks) of a GGUF block type, in GGUF's layout
 * (cpu/kquant/kquant_enc.c): Q4_K, Q5_K, Q6_K, Q5_0, Q5_1; -EINVAL for the
 * others or a K of partial blocks. */
int coli_kq_encode_row(enum coli_dtype t, const float *x, int K, void *dst);
int coli_quantize_rows(enum coli_dtype t, const float *src, int rows, int cols, void *dst,
                       enum coli_quant_rounding rounding, int row0, int row1);
/* Dequantize row r of m into out[cols] (any dtype). */
void coli_mat_row_f32(const struct coli_mat *m, int r, float *out);

/* ---- activations ---- */
/* An activation vector prepared for every weight format: the fp32 values and,
 * for quantized weights, their per-32-block int8 form (canonical rule above). */
struct coli_act {
	int n;          /* length K, multiple of 32 */
	const float *f; /* [n] */
	int8_t *q;      /* [n] */
	float *d;       /* [n/32] block scales */
	int32_t *qsum;  /* [n/32] sum of q per block (for unsigned-by-signed dot tricks) */
};
/* Quantize x[n] into a's buffers (which the caller owns: q[n], d[n/32], qsum[n/32]). */
void coli_act_quantize(struct coli_act *a, const float *x, int n);

/* ---- GEMV / small GEMM ----
 * y[r - row0] = W[r] . x  for r in [row0, row1), the canonical reduction.
 * coli_gemm: S activation vectors (S small, decode batch or a prefill chunk),
 * Y[s][r - row0] with row stride ldy; every element equals coli_gemv's. */
void coli_gemv(const struct coli_mat *w, const struct coli_act *x, float *y, int row0, int row1);
void coli_gemm(const struct coli_mat *w, const struct coli_act *x, int S, float *y, int ldy,
               int row0, int row1);
/* The portable scalar reference, always compiled; the dispatcher above picks
 * AVX-512 / AVX2 / scalar by cpuid once. */
void coli_gemv_ref(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                   int row1);

/* AMX is AVX-512 plus int8 tiles for coli_gemm's larger S (named
 * "avx512+amx"); every ISA below the best can be forced. */
enum coli_cpu_isa {
	COLI_CPU_ISA_SCALAR = 0,
	COLI_CPU_ISA_AVX2 = 1,
	COLI_CPU_ISA_AVX512 = 2,
	COLI_CPU_ISA_AMX = 3,
};
enum coli_cpu_isa coli_cpu_isa(void);
const char *coli_cpu_isa_name(enum coli_cpu_isa isa);
/* The best ISA of this CPU, whatever is forced. */
enum coli_cpu_isa coli_cpu_isa_best(void);
/* The AMX int8 peak, for benchmarks' bound: n rounds of four independent
 * full 16 x 16 x 64 TDPBSSD on the calling thread; returns the int8 ops
 * done (2 a multiply-add), or -ENOTSUP without AMX. */
int64_t coli_cpu_amx_peak_run(long n);
/* Force a kernel ISA (tests, benchmarks); -ENOTSUP if the CPU lacks it. */
int coli_cpu_isa_force(enum coli_cpu_isa isa);
/* Which Q8_0 / Q4_0 products take the AVX2 kernels under the AVX-512 ISA
 * (cpu/dispatch.c, where they run faster): none, both types below their
 * panels (Zen 4), or Q4_0 below its panels and Q8_0 below four activations
 * (the GPU hosts' Xeons); set: a mode to force (OFF: tests and benchmarks of one
 * ISA's own kernels), -1 to detect again. */
enum { COLI_INT8_AVX2_OFF, COLI_INT8_AVX2_ALL, COLI_INT8_AVX2_XEON };
int coli_cpu_int8_avx2(void);
void coli_cpu_int8_avx2_set(int mode);

/* ---- thread pool ----
 * One pool per engine. coli_cpu_pool_run calls fn(arg, task, n_tasks) for
 * task in [0, n_tasks) across the workers and the caller, and returns when all
 * are done (the return is a full barrier: writes made by tasks are visible). */
typedef struct coli_cpu_pool coli_cpu_pool_t;
int coli_cpu_pool_create(int n_threads, coli_cpu_pool_t **out);
void coli_cpu_pool_destroy(coli_cpu_pool_t *p);
int coli_cpu_pool_threads(const coli_cpu_pool_t *p);
/* How many tasks to split `units` equal units of work into (pool may be
 * NULL): a few a thread, so that a stalled thread holds back little, at
 * most units. */
int coli_cpu_pool_tasks(const coli_cpu_pool_t *p, int units);
void coli_cpu_pool_run(coli_cpu_pool_t *p, void (*fn)(void *arg, int task, int n_tasks), void *arg,
                       int n_tasks);
/* The same, and the caller first runs side(side_arg) while the workers start
 * on the tasks, then joins them (a side job that is not the pool's: the MoE
 * block issues its devices' work beside the CPU rows' first round). The
 * tasks are claimed dynamically, so give more tasks than threads. */
void coli_cpu_pool_run_beside(coli_cpu_pool_t *p, void (*fn)(void *arg, int task, int n_tasks),
                              void *arg, int n_tasks, void (*side)(void *side_arg), void *side_arg);

/* Up to COLI_POOL_PHASES phases of tasks in one round: a phase's tasks start
 * when every task of the phases before it has finished (their writes
 * visible; a phase may have no tasks), the caller joining after
 * side(side_arg) if given. Where phases ran as
 * rounds one after another, a side job on the caller held back each round
 * after the first (the round's end waits for the caller). */
#define COLI_POOL_PHASES 4
struct coli_pool_phase {
	void (*fn)(void *arg, int task, int n_tasks);
	void *arg;
	int n_tasks;
};
void coli_cpu_pool_run_phases(coli_cpu_pool_t *p, const struct coli_pool_phase *ph, int n,
                              void (*side)(void *side_arg), void *side_arg);

/* GEMV/GEMM split across the pool by row ranges (pool may be NULL). */
void coli_gemv_mt(coli_cpu_pool_t *p, const struct coli_mat *w, const struct coli_act *x, float *y);
void coli_gemm_mt(coli_cpu_pool_t *p, const struct coli_mat *w, const struct coli_act *x, int S,
                  float *y, int ldy);

/* Several independent GEMMs in one dispatch (the CPU-row experts of a MoE
 * layer): the rows of all jobs are dealt out in 16-row units, contiguous per
 * worker, so the pool wakes once for all of them. Every y equals coli_gemm's. */
struct coli_gemm_job {
	const struct coli_mat *w;
	const struct coli_act *x; /* [S] */
	int S;
	float *y; /* [S][ldy] */
	int ldy;
};
void coli_gemm_batch_mt(coli_cpu_pool_t *p, const struct coli_gemm_job *jobs, int n);
/* The same batch as a phase of coli_cpu_pool_run_phases: init returns the
 * batch's 16-row units (give at most that many tasks), the task function
 * is the phase's fn with the batch as its arg. */
struct coli_gemm_batch {
	const struct coli_gemm_job *jobs;
	int n, units;
};
int coli_gemm_batch_init(struct coli_gemm_batch *b, const struct coli_gemm_job *jobs, int n);
void coli_gemm_batch_task(void *batch, int task, int n_tasks);

/* ---- dense ops (cpu/ops.c) ----
 * Elementwise and normalisation ops of the forward pass. coli_expf and
 * coli_silu_mul use only IEEE +, *, fmaf and exact scaling, so a GPU kernel
 * written the same way reproduces their bits (expert outputs go through
 * silu; the placement invariant needs them exact). */
float coli_expf(float x);
/* h[i] = silu(g[i]) * u[i] = g / (1 + exp(-g)) * u */
void coli_silu_mul(const float *g, const float *u, float *h, int n);
/* gpt-oss's clamped SwiGLU (transformers' GptOssExperts._apply_gate):
 * g' = min(g, limit), u' = clamp(u, -limit, limit),
 * h = (u' + 1) * (g' * (1 / (1 + exp(-(g' * alpha))))), exp coli_expf's; the
 * same IEEE-only steps, so a device twin can give its bits. h may be g. */
void coli_swiglu_oai(const float *g, const float *u, float *h, int n, float alpha, float limit);
/* y = x / sqrt(mean(x^2) + eps) * w   (w may be NULL) */
void coli_rmsnorm(const float *x, const float *w, float *y, int n, float eps);
/* w[i] = exp((x[i] - m) * s) for the sampler's weights (x - m <= 0 there):
 * within 2 ulp of expf, 0 below exp's range, the same bits on every ISA (the
 * AVX2 form runs the scalar steps eight at a time); not the canonical expf
 * of the forward pass. */
void coli_exp_scaled(const float *x, int n, float m, float s, float *w);
/* The index of the largest of x[0..n) (the first one on ties); NaNs are
 * never the largest, x[0] NaN gives 0: the plain loop's result, by blocks
 * of independent maxima (the loop's load-compare chain cost 0.64 ms over a
 * 152k vocabulary, a third of a decode step). */
int coli_argmax(const float *x, int n);
/* In place softmax over n values. */
void coli_softmax(float *x, int n);
/* MoE routing of one token (transformers' order): p = softmax(logits[E]) in
 * place, sel/w = the K largest in descending order (ties to the lower id),
 * w renormalised to sum 1 when norm. ptx/dense/dense.cu's coli_route is the same
 * but for the device's expf. */
void coli_route(float *logits, int E, int K, int norm, int *sel, float *w);
/* Sigmoid routing (GLM-4.5, DeepSeek-V3; transformers' order): p = sigmoid
 * (logits[E]) in place as 1 / (1 + expf(-x)); the choice scores are p + bias
 * (bias NULL: p); with n_group > 1 the E experts are n_group equal groups,
 * a group's score the sum of its two best choice scores, the topk_group best
 * groups kept and every other expert's choice score set to -inf (transformers
 * 5; some earlier versions wrote 0, which differs only when a kept choice
 * score is negative); sel = the K best choice scores in descending order (ties
 * to the lower id, groups likewise); w = their p, divided by (their sum in
 * sel's order + 1e-20) when norm, then times scale. E <= COLI_ROUTE_MAX_E. */
#define COLI_ROUTE_MAX_E 4096
struct coli_route_sig {
	const float *bias; /* [E] selection-only bias, or NULL */
	int n_group, topk_group, norm;
	float scale;
};
void coli_route_sigmoid(float *logits, int E, int K, const struct coli_route_sig *r, int *sel,
                        float *w);
/* Rotate-half RoPE in place over x[T][nh][hd] at positions pos0 + t, with
 * angle = (float)pos * inv_freq[i] for i < hd/2 (transformers' convention). */
void coli_rope(float *x, int T, int nh, int hd, int pos0, const float *inv_freq);
/* Partial RoPE (GLM-4.5's partial_rotary_factor): the same rotation over the
 * first rd dims of each head of hd (rotate-half within those rd: i pairs
 * with i + rd/2, i < rd/2), the other hd - rd left as they are. */
void coli_rope_part(float *x, int T, int nh, int hd, int rd, int pos0, const float *inv_freq);
/* MLA's elementwise step (core/forward/mla.c) in place, T tokens at
 * positions pos0 + t: each kva row [kl + r] rmsnormed over its first kl (by
 * w), rope_part over its last r; the last r of each head of q [T][nh][np + r]
 * likewise; then the rotated values times f (YaRN's cos/sin factor; 1: none). */
void coli_mla_rope(float *kva, float *q, const float *w, const float *inv_freq, int T, int nh,
                   int np, int kl, int r, int pos0, float eps, float f);
/* ---- typed KV cache rows (cpu/kvq.c) ----
 *
 * A cache row is the values of one token (and layer) for K or V: GQA
 * [nkv][hd], MLA's latent [kv_lora + rope]. Stored as
 *   COLI_KV_F32   n floats (the exact reference)
 *   COLI_KV_BF16  n bf16, each the fp32 value rounded to nearest even
 *   COLI_KV_Q8    n int8, zero-padded to a multiple of 4 bytes, then one
 *                 fp32 scale per segment of `seg` dims (the last segment the
 *                 remainder): GQA seg = hd (a scale a kv head), MLA seg =
 *                 kv_lora (c_kv's scale, then k_pe's). scale = amax / 127,
 *                 q = rint(x / scale) (IEEE division, ties to even), 0 where
 *                 amax is 0.
 * A stored element reads back as one fp32 value: bf16 exactly (bits << 16),
 * q8 as (float)q * scale (one rounded product). Attention computes on those
 * values exactly as on an fp32 cache, so only the load depends on the type
 * and every implementation (CPU, the simulated device) gives one type's
 * bits. */
enum coli_kv_type { COLI_KV_F32, COLI_KV_BF16, COLI_KV_Q8 };
#define COLI_KV_TYPES 3

/* A head's (or a latent row's) view of a typed cache: position p's
 * element i at (char *)p + p * stride, of `type`; q8: its scale the float
 * at that row's + soff + 4 * (i / seg) bytes. */
struct coli_kv_rows {
	const void *p;
	size_t stride; /* bytes */
	int type, soff, seg;
	/* a paged cache (core/forward/kv.h): position p is row blk[(p0 + p) >>
	 * bshift] << bshift | (p0 + p) & (2^bshift - 1) of p's rows; blk NULL:
	 * row p */
	const int *blk;
	int p0, bshift;
};
/* Row of position p in r's rows: p, or its block's (paged). */
static inline size_t coli_kv_rows_index(const struct coli_kv_rows *r, size_t p)
{
	if (!r->blk)
		return p;
	p += (size_t)r->p0;
	return ((size_t)r->blk[p >> r->bshift] << r->bshift) | (p & (((size_t)1 << r->bshift) - 1));
}
/* Position p's row in r (its first byte). */
static inline const char *coli_kv_rows_ptr(const struct coli_kv_rows *r, size_t p)
{
	return (const char *)r->p + coli_kv_rows_index(r, p) * r->stride;
}
/* Bytes of one value of a type (q8: the int8; its scales apart). */
static inline size_t coli_kv_elem_bytes(int type)
{
	return type == COLI_KV_F32 ? 4 : type == COLI_KV_BF16 ? 2 : 1;
}

/* "f32" "bf16" "q8" -> type; -EINVAL otherwise. */
int coli_kv_type_parse(const char *s);
const char *coli_kv_type_name(int type);
/* Bytes of one row of n values in nseg segments. */
size_t coli_kv_row_bytes(int type, int n, int nseg);
/* Segment g's place in such a row (segments of hd values): bytes to its
 * first value (*off), and from there to its q8 scale (*soff). */
void coli_kv_seg_offsets(int type, int n, int g, int hd, size_t *off, int *soff);
/* x[n] -> dst (one row, layout above; segments of seg dims). */
void coli_kv_row_store(int type, void *dst, const float *x, int n, int seg);
/* Elements [i0, i0 + n) of position p as fp32: a pointer into the cache
 * (fp32) or into tmp[n] (decoded). */
const float *coli_kv_rows_at(const struct coli_kv_rows *r, size_t p, int i0, int n, float *tmp);
/* The same rows read back whole: dst[n] (tests and the simulated device). */
void coli_kv_row_load(int type, const void *row, float *dst, int n, int seg);
/* The typed forms of the attention head and group: each the fp32 form's
 * bits on the rows' fp32 values. */
void coli_attention_head_kv(const float *q, const struct coli_kv_rows *K,
                            const struct coli_kv_rows *V, int n_pos, int hd, int vd, float scale,
                            float sink, float *scores, float *out);
void coli_attention_group_kv(const float *q, int G, const struct coli_kv_rows *K,
                             const struct coli_kv_rows *V, int n_pos, int hd, int vd, float scale,
                             const float *sink, float *scores, float *out);

/* One attention head for one query: out[vd] = softmax(q . k_p * scale) . v_p
 * over positions p < n_pos, keys (hd values) and values (vd) at K + p*stride
 * and V + p*stride (the head's offset already applied; GQA: vd = hd; MLA's
 * latent rows: K = V, hd = kv_lora + rope, vd = kv_lora). scores: [n_pos]
 * scratch. A q . k dot product is summed in 8 lanes (element i into lane
 * i % 8 by fmaf, in order) folded pairwise; exp is coli_expf; the softmax
 * sum over positions in order; an output summed by fmaf over each block of
 * COLI_ATTN_OUT_BLOCK positions in order, the blocks' sums then added in
 * order (threads take blocks of a long context: coli_attention_groups_mt).
 * fmaf and coli_expf are exact IEEE steps, so the AVX2 lanes give the same
 * bits (cpu/attn/attention_avx2.c). */
#define COLI_ATTN_OUT_BLOCK 256
void coli_attention_head(const float *q, const float *K, const float *V, int n_pos, int stride,
                         int hd, int vd, float scale, float *scores, float *out);
/* The same with an attention sink (gpt-oss): a logit `sink` that joins the
 * softmax as one more column and is dropped after it (the max over the
 * scores and the sink; the sum over positions in order, then + exp(sink -
 * max)). -INFINITY: none, coli_attention_head's bits. */
void coli_attention_head_sink(const float *q, const float *K, const float *V, int n_pos, int stride,
                              int hd, int vd, float scale, float sink, float *scores, float *out);
/* The G query heads that share one key/value head (GQA), for one query:
 * q [G][hd], out [G][vd] (consecutive heads); each head's bits are
 * coli_attention_head's. With AVX2 and G >= 2, eight heads at a time share
 * one walk of the rows (fewer fill the eight by repeating): a key vector is
 * read once for them, and from the softmax on they are the lanes of every
 * vector (docs/perf/kernels.md "CPU attention"). scores: [n_pos * 8] scratch. */
void coli_attention_group(const float *q, int G, const float *K, const float *V, int n_pos,
                          int stride, int hd, int vd, float scale, float *scores, float *out);
/* The same with each head's sink (sink [G], or NULL: none): each head's bits
 * are coli_attention_head_sink's. */
void coli_attention_group_sink(const float *q, int G, const float *K, const float *V, int n_pos,
                               int stride, int hd, int vd, float scale, const float *sink,
                               float *scores, float *out);
/* One GQA group for one query: coli_attention_group_sink's own arguments. A
 * sliding window is K and V started at the window's first key, n_pos its
 * keys (the caller's arguments: the kernels see a shorter history). A typed
 * KV cache (bf16, q8: cpu/kvq.c) sets kt/vt and the byte strides and scale
 * offsets of struct coli_kv_rows; zero: fp32 rows `stride` floats apart. */
struct coli_attn_group {
	const float *q;
	const void *K, *V; /* the group's head in position 0's row */
	float *out;
	int G, n_pos;
	const float *sink;       /* [G] (gpt-oss) or NULL */
	int kt, vt;              /* enum coli_kv_type of K's and V's rows (0: fp32) */
	size_t kstride, vstride; /* bytes a position (0: the call's stride floats) */
	int ksoff, vsoff, seg;   /* q8: struct coli_kv_rows' soff and seg */
	const int *blk;          /* paged: struct coli_kv_rows' blk, p0, bshift (K's and
	                          * V's alike), or NULL: position p at row p */
	int p0, bshift;
};
/* The COLI_ATTN_OUT_BLOCK blocks of n_pos positions. */
static inline int coli_attn_out_blocks(int n_pos)
{
	return (n_pos + COLI_ATTN_OUT_BLOCK - 1) / COLI_ATTN_OUT_BLOCK;
}
/* Floats a slot of coli_attention_groups_mt's scratch holds for groups of
 * up to n_pos positions and vd value dims: the scores [n_pos][8], then the
 * sums of each COLI_ATTN_OUT_BLOCK of the outputs (a smaller slot: one task
 * a group). */
static inline size_t coli_attn_slot_floats(int n_pos, int vd)
{
	return (size_t)n_pos * 8 +
	       (size_t)coli_attn_out_blocks(n_pos) * (size_t)((vd + 7) / 8) * 64;
}
/* The slots coli_attention_groups_mt takes for `groups` groups of `units`
 * eight-head units in all on `threads` threads: a slot a thread or a group,
 * or a unit where the groups are fewer than the threads (their units split). */
static inline int coli_attn_n_slots(int threads, int groups, int units)
{
	const int n = threads > groups ? threads : groups;

	return groups < threads && units > n ? units : n;
}
/* n groups (sharing stride, hd, vd and scale) across the pool (may be NULL), each
 * with coli_attention_group's bits. Fewer eight-head units than threads, or
 * fewer groups than threads (MLA's one group of every head), each at least
 * 256 positions long (decode at long context), are split by positions and
 * outputs so that every thread works (a slot a unit); otherwise one task a
 * group. scratch: n_slots slots of `slot` floats, each >= n_pos * 8 of any
 * group, coli_attn_slot_floats to split (the engine's attention scratch: a
 * slot a thread, or a group or a unit where there are more). A decode step's groups
 * side by side in the same rows, one slot each, run as tasks of adjacent
 * groups whose rows are walked together (cpu/attn/attention_mt.c). Returns
 * 1 when it split them, 2 when it walked rows together, 0 for one task a
 * group. */
int coli_attention_groups_mt(coli_cpu_pool_t *p, const struct coli_attn_group *g, int n, int stride,
                             int hd, int vd, float scale, float *scratch, size_t slot, int n_slots);

#endif
