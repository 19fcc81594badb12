/*
 * ptx/ptx.h — the GPU through the CUDA driver API: libcuda.so.1 loaded with
 * dlopen, PTX compiled from the ptx/ .cu files at build time and embedded, loaded
 * with cuModuleLoadDataEx (the JIT log is printed on failure). Without nvcc at
 * build time or without a driver at run time, coli_ptx_probe says why and
 * the engine runs on the CPU.
 *
 * A coli_gpu_t is one device: its context, the kernel modules, a compute
 * and a copy stream (ptx/gpu.c says what may go where).
 * Device addresses are plain uint64_t above ptx/. Every call returns 0 or
 * -errno (CUDA errors are logged by name here). Calls on one coli_gpu_t must
 * come from one thread at a time.
 *
 * The folder: ptx/ itself is the device as the host uses it (driver.c,
 * gpu.c, gpu_mem.c, gpu_stream.c, gpu_none.c for a build without nvcc;
 * ptx_internal.h, the driver API's slice; kernels_abi.h, the structs host
 * and kernels share); each kernel family keeps its .cu/.cuh and its
 * launchers (gpu_*.c) in a subfolder:
 *   attn/    attention over the KV cache, MLA, the cache's typed rows
 *   expert/  the routed experts' GEMV and GEMM (the canonical reduction)
 *   dense/   the dense part: dense GEMV, norms, RoPE, routing, the MoE plan
 *   common/  device helpers two families or more include (pdl, cp.async, ...)
 * A .cu's name is its module's (coli_ptx_<name>), unique across them.
 */
#ifndef COLI_PTX_H
#define COLI_PTX_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/dtype.h"
#include "ptx/kernels_abi.h"

/* Number of usable CUDA devices (0 when none; *why then says why). */
int coli_ptx_probe(const char **why);
/* Device memory of an ordinal in bytes, without a context (0: no such device). */
size_t coli_ptx_total_mem(int ordinal);
/* The NUMA node an ordinal's PCI device hangs off (sysfs), without a
 * context; -1: no such device, one node, or firmware did not say. */
int coli_ptx_numa_node(int ordinal);

typedef struct coli_gpu coli_gpu_t;

/* flags: 0, or fault injection (COLI_PTX_FAIL): the JIT is handed PTX it
 * refuses for the compute_90 build (the compute_80 one is taken) or for both
 * (the open fails with the JIT log). */
#define COLI_GPU_FAIL_JIT_90  1u
#define COLI_GPU_FAIL_JIT_ALL 2u
int coli_gpu_open(int ordinal, unsigned flags, coli_gpu_t **out, char *err, size_t errlen);
void coli_gpu_close(coli_gpu_t *g);
const char *coli_gpu_name(const coli_gpu_t *g);
/* The host NUMA node the GPU hangs off (its PCI address, mem/numa.c); -1
 * where unknown or where the host has one node. */
int coli_gpu_numa_node(const coli_gpu_t *g);
/* Launch without programmatic dependent launch from now on (COLI_PDL=0). */
void coli_gpu_plain_launches(coli_gpu_t *g);
int coli_gpu_mem_info(coli_gpu_t *g, size_t *free_bytes, size_t *total_bytes);

int coli_gpu_alloc(coli_gpu_t *g, size_t bytes, uint64_t *dptr);
void coli_gpu_free(coli_gpu_t *g, uint64_t dptr);
/* n bytes of v at dptr, in order with the stream's work, complete on return. */
int coli_gpu_memset(coli_gpu_t *g, uint64_t dptr, unsigned char v, size_t n);
/* Synchronous copies (complete on return). */
int coli_gpu_upload(coli_gpu_t *g, uint64_t dst, const void *src, size_t n);
int coli_gpu_download(coli_gpu_t *g, void *dst, uint64_t src, size_t n);
/* Stream-ordered copies: src/dst must stay valid until coli_gpu_sync; they
 * overlap with the host only when the host memory is pinned/registered. */
int coli_gpu_upload_async(coli_gpu_t *g, uint64_t dst, const void *src, size_t n);
/* The device's address of host bytes [p, p + n) when memory this context
 * registered and mapped holds them all (kernels read them over the bus),
 * else 0. */
uint64_t coli_gpu_mapped(const coli_gpu_t *g, const void *p, size_t n);
int coli_gpu_download_async(coli_gpu_t *g, void *dst, uint64_t src, size_t n);
/* n downloads (bytes[i] from src[i] to dst[i]) in stream order, as one
 * kernel where each would be pushed by one (small, into mapped memory). */
int coli_gpu_download_many(coli_gpu_t *g, int n, void *const *dst, const uint64_t *src,
                           const size_t *bytes);
int coli_gpu_sync(coli_gpu_t *g);
/* The host's wait point on the compute stream (one per device): point records
 * it (captured into a graph as an event record node), point_wait returns once
 * the stream has passed the last one recorded or replayed. */
int coli_gpu_point(coli_gpu_t *g);
int coli_gpu_point_wait(coli_gpu_t *g);
/* The compute stream waits (async) until the host signals seq: a word of
 * mapped host memory (cuStreamWaitValue32); has_host_wait: 0 where the
 * driver lacks stream waits (host_wait then fails with -ENOTSUP). */
int coli_gpu_host_wait(coli_gpu_t *g, uint32_t seq);
void coli_gpu_host_signal(coli_gpu_t *g, uint32_t seq);
int coli_gpu_has_host_wait(const coli_gpu_t *g);
/* Graphs: ops queued between capture_begin and capture_end are recorded, not
 * run, into *graph (an executable graph, 0 on failure); graph_launch replays
 * it on the stream with the captured parameters (kernels that must see
 * per-call values read them from device memory). -ENOTSUP: the driver has
 * no graphs. */
int coli_gpu_capture_begin(coli_gpu_t *g);
int coli_gpu_capture_end(coli_gpu_t *g, uint64_t *graph);
int coli_gpu_graph_launch(coli_gpu_t *g, uint64_t graph);
void coli_gpu_graph_free(coli_gpu_t *g, uint64_t graph);
/* Staging slots on a second (copy) stream, ordered by events (ptx/gpu_stream.c):
 * init n slots; copy into slot (after its last reader); make the compute
 * stream wait for slot's copy; mark slot's last reader queued; 1 when the
 * slot's copy has landed, 0 while in flight; fence: slot's landed event
 * recorded behind every copy queued so far (no copy of its own). */
int coli_gpu_stage_init(coli_gpu_t *g, int n);
int coli_gpu_stage_copy(coli_gpu_t *g, int slot, uint64_t dst, const void *src, size_t n);
int coli_gpu_stage_use(coli_gpu_t *g, int slot);
int coli_gpu_stage_done(coli_gpu_t *g, int slot);
int coli_gpu_stage_landed(coli_gpu_t *g, int slot);
int coli_gpu_stage_fence(coli_gpu_t *g, int slot);
/* Page-lock host memory for DMA (cuMemHostRegister). */
int coli_gpu_host_register(coli_gpu_t *g, void *p, size_t n);
void coli_gpu_host_unregister(coli_gpu_t *g, void *p);

/* ---- kernels (stream-ordered, asynchronous) ----
 * GEMV jobs: each is one matrix [rows x K] in `dtype` times S <= COLI_GPU_MAX_S
 * activation vectors, with the canonical reduction of cpu/cpu.h: results are
 * bit-identical to coli_gemv. All jobs of one call run in one launch. */
int coli_gpu_gemv(coli_gpu_t *g, enum coli_dtype dtype, const struct coli_gpu_gemv_job *jobs,
                  int n_jobs);
/* Bench only: the block types' (Q4_1..Q6_K) per-lane GEMV of 2026-12-02,
 * the kernel coli_gpu_gemv's staged one replaced, for an A/B in one run
 * (tests/ptx/dense_kernels --bench kquant). Same bits; up to
 * COLI_GPU_INL_JOBS jobs; -ENOTSUP for other dtypes. */
int coli_gpu_gemv_kq_v0(coli_gpu_t *g, enum coli_dtype dtype, const struct coli_gpu_gemv_job *jobs,
                        int n_jobs);
/* GEMM jobs (prefill, ptx/expert/gemm.cu): each is one matrix [rows x K] times S
 * tokens, any S, on tensor cores; all jobs of one call run in one launch.
 * q8_0 / q4_0: int8 mma, results bit-identical to coli_gemv (the canonical
 * reduction). bf16: bf16 mma, equal to coli_gemv only within rounding (the
 * documented exception). -ENOTSUP for other dtypes, -EINVAL for a bad job
 * (K % 32, S < 1) or more than 4096 jobs. tile0 and tile are filled here
 * (the caller's jobs are not written). */
int coli_gpu_gemm(coli_gpu_t *g, enum coli_dtype dtype, const struct coli_gpu_gemm_job *jobs,
                  int n_jobs);
/* Tests and benchmarks: the q8/q4 GEMM's tile forced to the one of
 * `tokens` tokens (COLI_GPU_GEMM_TILE_TOKENS: 64, 32 or 16); 0 (the
 * default): chosen per run. Same bits either way. */
void coli_gpu_gemm_tile(coli_gpu_t *g, int tokens);
/* h[i] = silu(g[i]) * u[i], bit-identical to coli_silu_mul. */
int coli_gpu_silu_mul(coli_gpu_t *g, uint64_t gate, uint64_t up, uint64_t h, int n);
/* The same, then h quantized as coli_gpu_act_quantize does, in one launch
 * (n_blocks 32-blocks; the same bits as the two launches). */
int coli_gpu_silu_mul_q(coli_gpu_t *g, uint64_t gate, uint64_t up, uint64_t h, uint64_t q,
                        uint64_t d, uint64_t qsum, int n_blocks);
/* gpt-oss's clamped SwiGLU over rows of I (ptx/expert/kernels.cu coli_swiglu_oai:
 * cpu/ops.c coli_swiglu_oai's bits): bg/bu (or 0) added to g and u in place
 * first, row idx[r] of them to row r ([E][I] each; idx 0: row 0 to every
 * row); q != 0: h also quantized (n % 32 == 0). */
struct coli_gpu_swiglu_oai {
	uint64_t g, u, bg, bu, h, q, qd, qsum, idx;
	int n, I;
	float alpha, limit;
};
int coli_gpu_swiglu_oai(coli_gpu_t *g, const struct coli_gpu_swiglu_oai *a);
/* y [rows][n] += row idx[r] of b [E][n], each row one rounding (gpt-oss's
 * down bias on a device-planned layer: ptx/expert/kernels.cu coli_pair_bias). */
int coli_gpu_pair_bias(coli_gpu_t *g, uint64_t y, uint64_t b, uint64_t idx, int rows, int n);
/* Canonical per-32-block quantization of x[n_blocks*32] (coli_act_quantize). */
int coli_gpu_act_quantize(coli_gpu_t *g, uint64_t x, uint64_t q, uint64_t d, uint64_t qsum,
                          int n_blocks);

/* ---- the dense part (ptx/dense/dense.cu): rows are tokens, fp32, stream-ordered ---- */
int coli_gpu_copy(coli_gpu_t *g, uint64_t dst, uint64_t src, size_t n);
int coli_gpu_rmsnorm(coli_gpu_t *g, uint64_t x, uint64_t w, uint64_t y, int rows, int n, float eps);
/* x += add (add 0: none), then y = rmsnorm(x) * w (the residual add fused; y
 * != x), and when q != 0 y quantized into q/qd/qsum as coli_gpu_act_quantize
 * does (n % 32 == 0; in the same launch where the row fits in registers). */
int coli_gpu_add_rmsnorm(coli_gpu_t *g, uint64_t x, uint64_t add, uint64_t w, uint64_t y,
                         uint64_t q, uint64_t qd, uint64_t qsum, int rows, int n, float eps);
/* coli_gpu_add_rmsnorm with add = coli_gpu_moe_accumulate of the pairs, in the
 * same launch (the same bits: each row's pairs summed in pair order, product
 * rounded then added from +0, then x + that). */
int coli_gpu_acc_rmsnorm(coli_gpu_t *g, uint64_t x, const struct coli_gpu_pairs *p, uint64_t w,
                         uint64_t y, uint64_t q, uint64_t qd, uint64_t qsum, int rows, int n,
                         float eps);
/* q/k per-head norm (qw/kw 0: none), RoPE, k and v into the cache rows
 * pos0.. (ptx/dense/dense.cu coli_qk_rope_store); hd even and <= 256. posp != 0:
 * pos0 is the int at posp when the launch runs (graph-capturable). */
int coli_gpu_qk_rope_store(coli_gpu_t *g, uint64_t q, uint64_t k, uint64_t v, uint64_t qw,
                           uint64_t kw, float eps, int T, int nh, int nkv, int hd, int pos0,
                           uint64_t posp, uint64_t inv_freq, uint64_t kc, uint64_t vc);
/* The same into a typed cache (kt, vt: enum coli_kv_type, cpu/cpu.h's row
 * layout, ptx/attn/kv_rows.cuh); store_only: k and v stored as they are (no norm,
 * no RoPE, q untouched); f (0 or 1: none): q and k times YaRN's cos/sin
 * factor after the rotation, one rounding, as the CPU's forward. rows != 0:
 * tokens of several sequences, each at its own position and slot
 * (COLI_GPU_ROWS, ptx/kernels_abi.h; pos0 and posp unused; 0: slot 0).
 * kc / vc: a layer's [n_blocks][32] rows, slot s's position p at its block's
 * row through the block table tab [n_seq][nbs] ints (ptx/attn/kv_rows.cuh
 * kv_at); tab 0: the identity table, a contiguous cache of nbs * 32 rows a
 * slot (coli_gpu_qk_rope_store's: 0, 0, slot 0 only). */
int coli_gpu_qk_rope_store_kv(coli_gpu_t *g, uint64_t q, uint64_t k, uint64_t v, uint64_t qw,
                              uint64_t kw, float eps, int T, int nh, int nkv, int hd, int pos0,
                              uint64_t posp, uint64_t inv_freq, uint64_t kc, uint64_t vc, int kt,
                              int vt, int store_only, float f, uint64_t rows, uint64_t tab,
                              int nbs);
/* The attention kernels' KV modes (ptx/attn/kv_rows.cuh): key and value types
 * f32/f32, bf16/bf16, q8/q8, q8/bf16; -1 for a pair with no kernels. */
#define COLI_GPU_KV_MODES 4
static inline int coli_gpu_kv_mode(int kt, int vt)
{
	return kt == vt ? kt : kt == 2 && vt == 1 ? 3 : -1;
}
int coli_gpu_add_bias(coli_gpu_t *g, uint64_t y, uint64_t b, int rows, int n);
int coli_gpu_add(coli_gpu_t *g, uint64_t x, uint64_t y, int n);
int coli_gpu_rope(coli_gpu_t *g, uint64_t x, int T, int nh, int hd, int pos0, uint64_t inv_freq);
/* Dense matrix times T activation rows (any T): deterministic; f32 and bf16
 * not the canonical reduction (the dense part is exempt from the placement
 * invariant), q8_0 and q4_0 the canonical reduction (coli_gemv's bits; from
 * COLI_GPU_DENSE_GEMM_MIN_T tokens on the tensor-core GEMM). K % 32 == 0;
 * quantized weights read m->xq/xd/xqsum from coli_gpu_act_quantize. */
int coli_gpu_dense_gemv(coli_gpu_t *g, enum coli_dtype dtype, const struct coli_gpu_dense_gemv *m);
/* Which form a prefill chunk (more than COLI_GPU_STEP_T tokens) of an f32
 * matrix with 64 rows or more (the routers) takes, the same bits in each:
 * COLI_GPU_DGEMM_AUTO (the default): the tiled GEMM (ptx/dense/dgemm_f32.cuh)
 * where its grid nearly fills the GPU, else the joined GEMV;
 * COLI_GPU_DGEMM_ALWAYS: the tiled GEMM wherever it applies (tests, the
 * bench); COLI_GPU_DGEMM_OFF: the joined GEMV. */
enum { COLI_GPU_DGEMM_AUTO, COLI_GPU_DGEMM_ALWAYS, COLI_GPU_DGEMM_OFF };
void coli_gpu_dense_tiled(coli_gpu_t *g, int mode);
/* Causal attention (ptx/attn/attention.cu): q [T][nh][hd], K/V the layer's cache
 * [ctx][nkv*hd] (rows 0..pos0+T-1 valid), out like q. Any context length; hd % 4 == 0,
 * nh / nkv <= 16 and (nh / nkv) * hd <= 2048, else -ENOTSUP. posp != 0:
 * pos0 is the int at posp when the launch runs (graph-capturable), and the
 * positions split as for a context of `span` (pos0 + T <= span): the bits
 * then depend on span and T, not on pos0's value at capture. Outside a
 * capture the pos0 argument must still be at least the int at posp: splits
 * past pos0 + T are not launched (same bits, fewer CTAs); in a capture those
 * past coli_gpu_attn_reach(pos0 + T, span) (kernels_abi.h), so a replay must
 * stay within that many positions. aq != 0: out
 * also quantized into aq/ad/aqs as coli_gpu_act_quantize does (the o
 * projection's input), in the same launch where the head size allows. */
int coli_gpu_attention(coli_gpu_t *g, uint64_t q, uint64_t K, uint64_t V, uint64_t out, int T,
                       int pos0, uint64_t posp, int span, int nh, int nkv, int hd, float scale,
                       uint64_t aq, uint64_t ad, uint64_t aqs);
/* The same over a typed cache (kt, vt as for coli_gpu_qk_rope_store_kv; a
 * pair coli_gpu_kv_mode refuses: -ENOTSUP), and gpt-oss's two cases: sinks
 * (0: none) [nh] f32, a logit per head that joins each softmax's denominator
 * (cpu/ coli_attention_head_sink); window > 0: a query that sees n positions
 * sees only the last `window` (from k0 = n - window: a sliding layer).
 * rows != 0: queries of several sequences, each at its own position and
 * slot (COLI_GPU_ROWS, ptx/kernels_abi.h); pos0 is then the furthest query's
 * position + 1 (a capture launches its bucket's reach, as with posp), span
 * a slot's positions, and no prefill kernel (its queries share K/V). K, V,
 * tab and nbs: the paged cache as for coli_gpu_qk_rope_store_kv. */
int coli_gpu_attention_kv(coli_gpu_t *g, uint64_t q, uint64_t K, uint64_t V, uint64_t out, int T,
                          int pos0, uint64_t posp, int span, int nh, int nkv, int hd, float scale,
                          uint64_t aq, uint64_t ad, uint64_t aqs, int kt, int vt, uint64_t sinks,
                          int window, uint64_t rows, uint64_t tab, int nbs);
/* Which kernels a prompt's batch (64 queries or more, one sequence, hd 64 or
 * 128) may take, the same bits per query in each: COLI_GPU_PREFILL_ROWS (the
 * default): a bf16 or q8 cache's on coli_attn_tcp (the (query, head) pairs as
 * the mma's rows); COLI_GPU_PREFILL_COLS: on coli_attn_tc's tiles of 32
 * columns (an f32 cache: coli_attn_prefill, at either level);
 * COLI_GPU_PREFILL_OFF: every batch a query a CTA, as decode steps (tests,
 * the bench). */
enum { COLI_GPU_PREFILL_OFF, COLI_GPU_PREFILL_COLS, COLI_GPU_PREFILL_ROWS };
void coli_gpu_attn_prefill(coli_gpu_t *g, int level);
/* The CTAs, at most, that share each query's fold of its splits in a
 * decode step over a bf16 or q8 cache (fewer where many queries split at
 * once; the same bits whichever fold): 1 folds on the last CTA alone; 0
 * restores the default, COLI_GPU_ATTN_WAYS (tests, the bench). */
#define COLI_GPU_ATTN_WAYS 16
void coli_gpu_attn_ways(coli_gpu_t *g, int ways);
/* dst row r = src row idx[r] (idx: device ints), n rows of row_bytes (a
 * multiple of 4): device to device. */
int coli_gpu_gather_rows(coli_gpu_t *g, uint64_t dst, uint64_t src, uint64_t idx, int n,
                         size_t row_bytes);
int coli_gpu_embed(coli_gpu_t *g, enum coli_dtype t, uint64_t table, uint64_t scales, uint64_t ids,
                   uint64_t x, int T, int H);
/* out[t] = the sum of token t's pairs (pair order, product rounded then
 * added: core/moe/moe.c's bits); pair p's row is y + p * H, or hy + p * H when
 * p < 64 and bit p of hmask is set (hy: mapped host memory, coli_gpu_mapped,
 * read over the bus where a pull would have copied it first). */
int coli_gpu_moe_accumulate(coli_gpu_t *g, uint64_t out, uint64_t y, uint64_t pair_token,
                            uint64_t pair_w, int n_pairs, int T, int H, uint64_t hy,
                            uint64_t hmask);
int coli_gpu_gated_add(coli_gpu_t *g, uint64_t out, uint64_t y, uint64_t gate, int T, int H);
/* *out (an int in device memory) = the index of the largest of x[0..n), the
 * first on ties, NaNs never the largest (x[0] NaN: 0): cpu/ coli_argmax's. */
int coli_gpu_argmax(coli_gpu_t *g, uint64_t x, int n, uint64_t out);
/* Routing of T tokens from router logits rlog [T][E]: sel/selw [T][K] (see
 * coli_route in ptx/dense/route.cu); E <= COLI_GPU_ROUTE_MAX_E, K <= 16. */
/* Sigmoid routing (ptx/dense/kinds.cu, cpu/ops.c coli_route_sigmoid's steps; only
 * expf may differ from the host's in the last place): rlog [T][E] f32, bias
 * [E] or 0, into sel/selw [T][K]. E <= COLI_GPU_ROUTE_MAX_E, K <= 16; groups
 * of at least 2 that hold K. -ENOTSUP outside those. */
int coli_gpu_route_sigmoid(coli_gpu_t *g, uint64_t rlog, uint64_t bias, int T, int E, int K,
                           int n_group, int topk_group, int norm, float scale, uint64_t sel,
                           uint64_t selw);
/* Partial RoPE (cpu/ops.c coli_rope_part): the first rd dims of each head. */
int coli_gpu_rope_part(coli_gpu_t *g, uint64_t x, int T, int nh, int hd, int rd, int pos0,
                       uint64_t inv_freq);
/* Multi-head latent attention, absorbed (ptx/attn/mla.cu): q [T][nh][dk] against
 * the latent cache rows of ld values (positions 0 .. pos0 + T - 1 valid,
 * through tab as kv_at addresses them; the values are a row's first dv), out (t, h) at out + t *
 * ldt + h * ldh (0, 0: [T][nh][dv]); query t sees positions 0 .. pos0 + t. dk % 16 == 0 and <= 640,
 * dv % 8 == 0 and <= min(dk, 512), ld >= dk and % 4 == 0, ldt and ldh % 4 == 0
 * (-EINVAL). terms picks the kernel: 1..3 the bf16 decode kernel
 * (ptx/attn/mla_decode.cuh) with the query and P split in that many bf16 terms
 * (dv % 16 == 0, else -ENOTSUP); COLI_GPU_MLA_TF32 the
 * tf32 kernel, x3 three tf32 products a pair (~fp32), else one; 0 picks: the
 * bf16 kernel with COLI_GPU_MLA_PICK_TERMS terms where it applies, else
 * tf32. A query's bytes depend on its position, not on T. posp != 0:
 * pos0 is the int there when the launch runs, and a launch being captured
 * splits the positions for coli_gpu_attn_reach(pos0 + T, span) (a graph
 * replays it while pos0 + T stays within that; with rows, of pos0). */
struct coli_gpu_mla {
	uint64_t q, cache, out, posp;
	int T, pos0, span, nh, dk, dv, ld, ldt, ldh;
	float scale;
	int x3;
	int kt;    /* the cache's type: 0 f32 (rows of ld floats), else typed rows of dk
	            * values (bf16, or q8 with scales of dv values and of the rest) */
	int terms; /* 0 pick, 1..3 bf16 terms, COLI_GPU_MLA_TF32 */
	/* several sequences (COLI_GPU_ROWS, as coli_gpu_attention's): each query's
	 * position and slot; pos0 then the furthest position + 1. tab: the
	 * block table of the layer's [n_blocks][32] rows (0: the identity) */
	uint64_t rows, tab;
	int nbs;
};
#define COLI_GPU_MLA_TF32       (-1)
#define COLI_GPU_MLA_PICK_TERMS 2
int coli_gpu_mla_attention(coli_gpu_t *g, const struct coli_gpu_mla *a);
/* MLA's elementwise step (kernels_abi.h struct coli_gpu_mla_prep). */
int coli_gpu_mla_prep(coli_gpu_t *g, const struct coli_gpu_mla_prep *a);
int coli_gpu_route(coli_gpu_t *g, uint64_t rlog, int T, int E, int K, int norm, uint64_t sel,
                   uint64_t selw);
/* The job tables and pair lists of a fully resident layer (ptx/dense/dense.cu
 * coli_moe_plan), then run with coli_gpu_gemv_table; with a->rlog set the
 * routing into a->sel/selw comes first, in the same launch (coli_route_plan). */
int coli_gpu_moe_plan(coli_gpu_t *g, const struct coli_gpu_moe_plan *a);
/* The router's f32 GEMV r (T <= COLI_GPU_MAX_S tokens, its output r->y the
 * plan's rlog, E x E) and then the plan p with routing, in one launch: the
 * bits of coli_gpu_dense_gemv then coli_gpu_moe_plan. */
int coli_gpu_router_plan(coli_gpu_t *g, const struct coli_gpu_dense_gemv *r,
                         const struct coli_gpu_moe_plan *p);
/* coli_gpu_gemv on a job table already in device memory (written by a
 * kernel): every job has at most max_rows rows, S <= COLI_GPU_MAX_S. */
int coli_gpu_gemv_table(coli_gpu_t *g, enum coli_dtype dtype, uint64_t table, int n_jobs,
                        int max_rows);

/* Elapsed milliseconds of the work queued between two marks (profiling). */
int coli_gpu_mark(coli_gpu_t *g, int slot);
int coli_gpu_elapsed_ms(coli_gpu_t *g, int from_slot, int to_slot, float *ms);

#endif
