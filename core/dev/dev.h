/*
 * core/dev/dev.h — expert execution devices behind one ops table (private to core/).
 *
 * The MoE scheduler (core/moe/) and the device forward (core/forward/) speak
 * only to this table:
 *   cuda   ptx/ through the CUDA driver API (core/dev/dev_gpu.c)
 *   sim    host memory and the CPU kernels, same semantics (core/dev/dev_sim.c,
 *          its kernels core/dev/dev_sim_ops.c), so the scheduler's issue /
 *          take / fallback logic runs in CI
 * The CPU path itself is not a device: CPU rows are computed in place by
 * core/moe/moe.c and are the reference every device must reproduce bit for bit.
 *
 * Addresses are uint64_t: device pointers for cuda, host pointers for sim.
 * Every op returns 0 or -errno; ops marked (async) are ordered on the
 * device's one stream and complete by the next successful sync.
 *
 * A kernel's arguments travel in a struct of its family (struct
 * coli_dev_norm, _attention, _qk_rope, ...; kernels_abi.h's own where ptx/
 * has one), filled with designated initializers at the call, so every
 * argument is named where it is passed and a field left out is 0 ("none").
 * Every op passes one gate (coli_dev_gate, below): the sticky failure, the
 * fault injector (COLI_GPU_FAIL_AFTER=N: after N counted ops every op fails
 * with -EIO, as a device that fell off the bus; COLI_GPU_FAIL_AT: which kind
 * of op it strikes) and the launch count a graph capture records; then
 * coli_dev_settle turns the backend's error into the sticky failure. The
 * kernels' entry points are inline (COLI_DEV_OP): one indirect call per op,
 * as before. Adding a kernel: its struct and its member of struct
 * coli_dev_ops here, one COLI_DEV_OP line, the backends, the caller.
 *
 * What a caller may ask of a device is a capability (COLI_DEV_CAP_*); the
 * table carries no kind to compare (struct coli_dev's name says which it is
 * in messages).
 */
#ifndef COLI_CORE_DEV_H
#define COLI_CORE_DEV_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu.h"
#include "ptx/kernels_abi.h"

struct coli_dev;

/* One download of a list (coli_dev_download_many): n bytes from src to dst;
 * a device's download_many takes up to COLI_DEV_DOWN_MAX at once. */
#define COLI_DEV_DOWN_MAX COLI_GPU_PULLS
struct coli_dev_down {
	void *dst;
	uint64_t src;
	size_t n;
};

/* Argument structs, one per kernel family, filled with designated
 * initializers at the call. A field left 0 is "none" where the comment
 * allows it. Shapes: rows are tokens, activations fp32. */

/* A device-to-device copy of n bytes (async). */
struct coli_dev_copy {
	uint64_t dst, src;
	size_t n;
};

/* The norms: rmsnorm (y = rmsnorm(x) * w), add_rmsnorm (x += add first),
 * acc_rmsnorm (x += moe_accumulate of pairs first, one op, the same bits). */
struct coli_dev_norm {
	uint64_t x;                         /* [rows][n] */
	uint64_t add;                       /* add_rmsnorm: [rows][n] added into x (0: none) */
	const struct coli_gpu_pairs *pairs; /* acc_rmsnorm: the pairs summed into x */
	uint64_t w;                         /* [n] (rmsnorm: 0, none) */
	uint64_t y;                         /* [rows][n] (may be x for rmsnorm) */
	uint64_t q, qd, qsum; /* y quantized per 32-block (0: not; act_quantize's bits) */
	int rows, n;
	float eps;
};

/* Elementwise: add (x[i] += y[i], i < n), bias (y[r] += b for rows r of n;
 * idx != 0, device ints [rows]: y[r] += row idx[r] of b [..][n], gpt-oss's
 * down bias on a device-planned layer's pairs), gated (out[t] +=
 * sigmoid(gate[t]) * y[t], rows of n). Each add one rounding. */
struct coli_dev_add {
	uint64_t x, y;
	int n;
};
struct coli_dev_bias {
	uint64_t y, b;
	int rows, n;
	uint64_t idx;
};
struct coli_dev_gated {
	uint64_t out, y, gate;
	int T, H;
};

/* Per-head q/k norm (qw/kw 0: none), RoPE, k and v into the layer's cache
 * kc/vc at pos0; posp != 0: pos0 is the int there when the op runs (ptx/ptx.h
 * says what that changes for attention). The cache's rows are typed (kt, vt:
 * enum coli_kv_type, cpu/cpu.h's row layout with a q8 scale a kv head);
 * store_only: k and v are stored as they are (no norm, no RoPE, q untouched:
 * the op-by-op path's store into a typed cache). */
struct coli_dev_qk_rope {
	uint64_t q, k, v; /* [T][nh][hd], [T][nkv][hd], [T][nkv][hd] */
	uint64_t qw, kw;  /* [hd] */
	float eps;
	int T, nh, nkv, hd, pos0;
	uint64_t posp;
	uint64_t inv_freq; /* [hd / 2] */
	uint64_t kc, vc;   /* a layer's [n_blocks][32] rows of [nkv][hd] in kt / vt */
	int kt, vt, store_only;
	float f;       /* YaRN's cos/sin factor: q and k times f after RoPE, one
	                * rounding (core/forward/forward.c's rope_attn); 0 or 1: none */
	uint64_t rows; /* several sequences: [T][2] ints (COLI_GPU_ROWS, ptx/kernels_abi.h),
	                * row t's position and its slot; 0: pos0 + t of slot 0 */
	uint64_t tab;  /* the block table [n_seq][nbs] ints (from slot 0's, or the run's
	                * slot's without rows): slot s's position p is row
	                * tab[s * nbs + p / 32] * 32 + p % 32 (ptx/attn/kv_rows.cuh kv_at);
	                * 0: the identity table (a contiguous cache, nbs * 32 rows a slot) */
	int nbs;
};

/* RoPE of x [T][nh][hd] in place at positions pos0..: the first rd dims of
 * each head (0 or hd: all of them; less: partial RoPE, GLM-4.5) */
struct coli_dev_rope {
	uint64_t x, inv_freq; /* inv_freq [rd / 2] */
	int T, nh, hd, rd, pos0;
};

/* Causal attention of q [T][nh][hd] over the cache k/v (a layer's
 * [n_blocks][32] rows of [nkv * hd], through tab as qk_rope's) into
 * out (like q); posp as for qk_rope, and then the positions split as for a
 * context of span (ptx/ptx.h coli_gpu_attention says what a graph needs);
 * aq != 0: out also quantized per 32-block into aq/ad/aqs. gpt-oss: sinks
 * [nh] f32 (0: none), a logit per head that joins each softmax's
 * denominator (cpu/ coli_attention_head_sink); window > 0: a query that sees
 * n positions sees only the last window of them (k0 = n - window). */
struct coli_dev_attention {
	uint64_t q, k, v, out;
	int T, pos0;
	uint64_t posp;
	int span, nh, nkv, hd;
	float scale;
	uint64_t aq, ad, aqs;
	int kt, vt; /* the cache rows' types (enum coli_kv_type; qk_rope's layout) */
	uint64_t sinks;
	int window;
	uint64_t rows; /* as qk_rope's: each row's position and slot (0: pos0 + t) */
	uint64_t tab;  /* the cache's block table, as qk_rope's */
	int nbs;
};

/* Multi-head latent attention (core/forward/mla.c says the shapes): the
 * absorbed query rows q [T][nh][dk] over the layer's latent cache, [n_blocks][32]
 * rows of ld values (the values a row's first dv), head h of query t out at
 * out + t * ldt + h * ldh (floats; 0, 0: [T][nh][dv]); posp, span, rows, tab
 * and nbs as for attention (with rows, pos0 is the furthest position + 1).
 * The elementwise step before it is mla_prep (kernels_abi.h's struct). */
struct coli_dev_mla {
	uint64_t q, cache, out, posp;
	int T, pos0, span, nh, dk, dv, ld, ldt, ldh;
	float scale;
	int kt; /* the latent rows' type: ld values a row (f32 as before), or a
	         * typed row of dk values with q8 scales of dv (c_kv) and the rest */
	uint64_t rows, tab;
	int nbs;
};

/* h = silu(g) * u over n; q != 0: h also quantized into q/qd/qsum (n % 32 == 0).
 * kind COLI_ACT_SWIGLU_OAI (gpt-oss; devices with COLI_DEV_CAP_SWIGLU_OAI):
 * bg and bu (rows of `I` f32, or 0) are first added to every I-row of g and
 * u in place (g = g + bg, one rounding), then h = cpu/ coli_swiglu_oai(g, u)
 * with alpha and limit: the bits of core/model/act.c coli_act_ffn. idx != 0
 * (device ints [n / I], a device-planned layer's pair_expert): row r adds
 * row idx[r] of bg and bu, [E][I] each; 0: their row 0 (one expert's run). */
struct coli_dev_silu {
	uint64_t g, u, h, q, qd, qsum;
	int n;
	int kind; /* enum coli_ffn_act (0: silu) */
	float alpha, limit;
	uint64_t bg, bu;
	int I;
	uint64_t idx;
};

/* x [n_blocks * 32] quantized into q/qd/qsum (cpu/ coli_act_quantize's bits). */
struct coli_dev_quantize {
	uint64_t x, q, qd, qsum;
	int n_blocks;
};

/* dst row r = src row idx[r] for r < n, rows of row_bytes (% 4 == 0). */
struct coli_dev_gather {
	uint64_t dst, src, idx;
	int n;
	size_t row_bytes;
};

/* Expert GEMV/GEMM jobs of dtype t (kernels_abi.h): gemv runs jobs[0..n_jobs)
 * (S <= COLI_GPU_MAX_S), gemm gemm_jobs[0..n_jobs) (prefill, any S: q8/q4
 * bit-identical to gemv, bf16 within rounding on a GPU), gemv_table the
 * table of n_jobs jobs already in device memory (written by moe_plan), each
 * of at most max_rows rows. */
struct coli_dev_jobs {
	enum coli_dtype t;
	const struct coli_gpu_gemv_job *jobs;
	const struct coli_gpu_gemm_job *gemm_jobs;
	uint64_t table;
	int n_jobs, max_rows;
};

/* Rows of the token embedding table (t: its dtype, scales its fp16 plane
 * or 0) for the T ids (device ints) into x [T][H]. */
struct coli_dev_embed {
	enum coli_dtype t;
	uint64_t table, scales, ids, x;
	int T, H;
};

/* *out (a device int) = the first index of the largest of x[0..n): coli_argmax. */
struct coli_dev_argmax {
	uint64_t x, out;
	int n;
};

/* out [T][H] = the sum of each token's pairs (core/moe/moe.c's bits); pair
 * p's row at hy + p * H when p < 64 and bit p of hmask is set (hy from
 * coli_dev_host_addr: the rows read in place), else at y + p * H. */
struct coli_dev_accumulate {
	uint64_t out, y, pair_token, pair_w;
	int n_pairs, T, H;
	uint64_t hy, hmask;
};

/* Routing on the device (cpu/ops.c coli_route's result; cuda: its expf):
 * router logits rlog [T][E] into sel/selw [T][K], renormalised when norm.
 * sigmoid: cpu/ops.c coli_route_sigmoid's instead (cuda: ptx/dense/kinds.cu), with
 * bias [E] (or 0), the groups and the scale. */
struct coli_dev_route {
	uint64_t rlog, sel, selw;
	int T, E, K, norm;
	int sigmoid, n_group, topk_group;
	uint64_t bias;
	float scale;
};

/* A dense matrix times T rows (kernels_abi.h's struct, and its dtype):
 * deterministic, not canonical on cuda; the simulated device gives coli_gemv's
 * bits. router_plan: the router's f32 GEMV r into plan->rlog, then the plan. */
struct coli_dev_dense {
	enum coli_dtype t;
	const struct coli_gpu_dense_gemv *m;
};
struct coli_dev_router_plan {
	const struct coli_gpu_dense_gemv *r;
	const struct coli_gpu_moe_plan *plan;
};

/* The backend's table. Members marked (optional) may be NULL; the entry
 * point's behaviour then is given after "NULL:". */
struct coli_dev_ops {
	int (*mem_info)(struct coli_dev *d, size_t *free_bytes, size_t *total_bytes);
	int (*alloc)(struct coli_dev *d, size_t bytes, uint64_t *addr);
	void (*free)(struct coli_dev *d, uint64_t addr);
	int (*upload)(struct coli_dev *d, uint64_t dst, const void *src, size_t n); /* sync */
	int (*upload_async)(struct coli_dev *d, uint64_t dst, const void *src, size_t n);
	int (*download_async)(struct coli_dev *d, void *dst, uint64_t src, size_t n);
	/* (optional) n <= COLI_DEV_DOWN_MAX downloads as one op (the GPU: one
	 * kernel where each would be one); NULL: download_async one by one */
	int (*download_many)(struct coli_dev *d, const struct coli_dev_down *v, int n);
	int (*sync)(struct coli_dev *d);
	void (*close)(struct coli_dev *d);
	/* staging slots for streamed slabs: copies on a second stream, ordered by
	 * events (ptx/gpu_stream.c says how); sim copies at once and orders nothing */
	int (*stage_init)(struct coli_dev *d, int n);
	int (*stage_copy)(struct coli_dev *d, int slot, uint64_t dst, const void *src,
	                  size_t n);                       /* async, copy stream */
	int (*stage_use)(struct coli_dev *d, int slot);    /* compute waits for the copy */
	int (*stage_done)(struct coli_dev *d, int slot);   /* readers of slot are queued */
	int (*stage_landed)(struct coli_dev *d, int slot); /* 1 landed, 0 in flight */
	int (*stage_fence)(struct coli_dev *d, int slot);  /* slot lands behind every copy
	                                                    * queued so far (none of its own) */
	/* timing marks on the compute stream (--profile): record mark `slot`;
	 * the seconds between two recorded marks (waits for the second) */
	int (*mark)(struct coli_dev *d, int slot);
	int (*elapsed)(struct coli_dev *d, int from, int to, double *s);
	/* (optional) the host's wait point on the compute stream (recorded into
	 * a graph when captured) and the wait for it; NULL: point records
	 * nothing (returns 0), point_wait is sync */
	int (*point)(struct coli_dev *d);
	int (*point_wait)(struct coli_dev *d);
	/* (optional, COLI_DEV_CAP_HOST_WAIT) the compute stream waits (async)
	 * until the host signals seq or later (a word of host memory the device
	 * reads); ops queued behind the wait run after it. The host must signal
	 * before any op that waits for the stream (sync, point_wait, a
	 * download's data). NULL: nothing queued, host_signal does nothing */
	int (*host_wait)(struct coli_dev *d, uint32_t seq);
	void (*host_signal)(struct coli_dev *d, uint32_t seq);
	/* (optional) where the device's kernels read registered host bytes [p,
	 * p + n) in place, 0 where they cannot; NULL: 0 always */
	uint64_t (*host_addr)(struct coli_dev *d, const void *p, size_t n);
	/* the kernels (all async): the argument structs above */
	int (*gemv)(struct coli_dev *d, const struct coli_dev_jobs *a);
	int (*gemm)(struct coli_dev *d, const struct coli_dev_jobs *a);
	int (*gemv_table)(struct coli_dev *d, const struct coli_dev_jobs *a);
	int (*silu_mul)(struct coli_dev *d, const struct coli_dev_silu *a);
	int (*act_quantize)(struct coli_dev *d, const struct coli_dev_quantize *a);
	int (*copy)(struct coli_dev *d, const struct coli_dev_copy *a);
	int (*rmsnorm)(struct coli_dev *d, const struct coli_dev_norm *a);
	int (*add_rmsnorm)(struct coli_dev *d, const struct coli_dev_norm *a);
	int (*acc_rmsnorm)(struct coli_dev *d, const struct coli_dev_norm *a);
	int (*add_bias)(struct coli_dev *d, const struct coli_dev_bias *a);
	int (*add)(struct coli_dev *d, const struct coli_dev_add *a);
	int (*gated_add)(struct coli_dev *d, const struct coli_dev_gated *a);
	int (*qk_rope_store)(struct coli_dev *d, const struct coli_dev_qk_rope *a);
	int (*rope)(struct coli_dev *d, const struct coli_dev_rope *a);
	int (*attention)(struct coli_dev *d, const struct coli_dev_attention *a);
	int (*mla_prep)(struct coli_dev *d, const struct coli_gpu_mla_prep *a);
	int (*mla_attention)(struct coli_dev *d, const struct coli_dev_mla *a);
	int (*embed)(struct coli_dev *d, const struct coli_dev_embed *a);
	int (*gather_rows)(struct coli_dev *d, const struct coli_dev_gather *a);
	int (*moe_accumulate)(struct coli_dev *d, const struct coli_dev_accumulate *a);
	int (*argmax)(struct coli_dev *d, const struct coli_dev_argmax *a);
	int (*dense_gemv)(struct coli_dev *d, const struct coli_dev_dense *a);
	/* routing and the plan of a fully resident layer: job tables written on
	 * the device, run by gemv_table (see ptx/kernels_abi.h) */
	int (*route)(struct coli_dev *d, const struct coli_dev_route *a);
	int (*moe_plan)(struct coli_dev *d, const struct coli_gpu_moe_plan *a);
	/* (optional) NULL: the caller (which checks) runs the router's GEMV,
	 * then moe_plan */
	int (*router_plan)(struct coli_dev *d, const struct coli_dev_router_plan *a);
	/* (optional, COLI_DEV_CAP_GRAPHS) graphs: the ops between capture_begin
	 * and capture_end are recorded into *graph, not run; graph_launch
	 * replays them. NULL (all four): capture_begin returns -ENOTSUP */
	int (*capture_begin)(struct coli_dev *d);
	int (*capture_end)(struct coli_dev *d, uint64_t *graph);
	int (*graph_launch)(struct coli_dev *d, uint64_t graph);
	void (*graph_free)(struct coli_dev *d, uint64_t graph);
};

/* What a device can do (struct coli_dev's caps, set when it opens): the
 * questions the scheduler asks, instead of the device's kind. */
enum coli_dev_cap {
	/* its own bandwidth and timing: the cost model's measured stream rate
	 * means something (sim: none, the split is even) */
	COLI_DEV_CAP_BANDWIDTH = 1u << 0,
	/* capture_begin .. graph_launch (cuda, where the driver has graphs) */
	COLI_DEV_CAP_GRAPHS = 1u << 1,
	/* host_wait queues a wait for the host (cuda: where the driver has
	 * stream waits) */
	COLI_DEV_CAP_HOST_WAIT = 1u << 2,
	/* silu_mul takes gpt-oss's kind (struct coli_dev_silu): biased gate and
	 * up, the clamped SwiGLU (sim, and cuda: ptx/expert/kernels.cu coli_swiglu_oai) */
	COLI_DEV_CAP_SWIGLU_OAI = 1u << 3,
	/* attention reads any pair of KV cache types (sim); without it, equal
	 * types and q8 keys with bf16 values (cuda: ptx/attn/kv_rows.cuh's modes) */
	COLI_DEV_CAP_KV_ANY = 1u << 4,
};

/* COLI_GPU_FAIL_AT: the kind of op an injected fault strikes. Staging copies
 * are their own kind: the stage-ahead copies follow an issue, so a fault
 * meant for an issue's kernels could otherwise land between issue and take. */
enum coli_dev_fail_at {
	COLI_FAIL_AT_ANY,
	COLI_FAIL_AT_LAUNCH,
	COLI_FAIL_AT_SYNC,
	COLI_FAIL_AT_COPY,
	COLI_FAIL_AT_ALLOC /* allocations from the Nth on: out of device memory, not a failure */
};

/* What an op counts as at the gate: one launch, sync or staging copy (the
 * kinds COLI_GPU_FAIL_AT names), a graph's replay (its launches; struck
 * unless COLI_GPU_FAIL_AT=sync), or nothing (only the sticky failure). */
enum coli_dev_count {
	COLI_DEV_COUNT_NONE = -1,
	COLI_DEV_COUNT_LAUNCH = COLI_FAIL_AT_LAUNCH,
	COLI_DEV_COUNT_SYNC = COLI_FAIL_AT_SYNC,
	COLI_DEV_COUNT_COPY = COLI_FAIL_AT_COPY,
	COLI_DEV_COUNT_GRAPH = 16,
};

struct coli_dev {
	const struct coli_dev_ops *ops;
	void *impl;
	char name[128];
	int index;
	int numa_node;   /* the host node the device hangs off; -1 unknown, one node, sim */
	unsigned caps;   /* enum coli_dev_cap */
	long fail_after; /* launches before injected failure; -1 never */
	int fail_at;     /* enum coli_dev_fail_at: the kind of op the injected failure strikes */
	long launches;
	long allocs;   /* device allocations so far (COLI_FAIL_AT_ALLOC counts these) */
	long cap_from; /* launches when the capture under way began */
	int failed;    /* sticky: once failed, the device is not used again */
};

static inline int coli_dev_can(const struct coli_dev *d, enum coli_dev_cap cap)
{
	return (d->caps & cap) != 0;
}

/* The device fails for good (the first time: one line saying what failed,
 * its experts move to the CPU); returns rc. */
int coli_dev_fail(struct coli_dev *d, int rc, const char *what);

/* The gate every op passes before the backend sees it: -EIO on a failed
 * device, or once the injected budget (COLI_GPU_FAIL_AFTER) is spent at an
 * op of the kind COLI_GPU_FAIL_AT names; else the op's n launches are
 * counted (what a capture records and a replay charges). */
static inline int coli_dev_gate(struct coli_dev *d, enum coli_dev_count kind, long n)
{
	if (d->failed)
		return -EIO;
	if (kind == COLI_DEV_COUNT_NONE)
		return 0;
	if (d->fail_after >= 0 && d->launches + n > d->fail_after &&
	    (kind == COLI_DEV_COUNT_GRAPH ? d->fail_at != COLI_FAIL_AT_SYNC
	                                  : !d->fail_at || d->fail_at == (int)kind))
		return coli_dev_fail(d, -EIO, "injected fault (COLI_GPU_FAIL_AFTER)");
	d->launches += n;
	return 0;
}

/* The backend's result: an error makes the failure sticky. */
static inline int coli_dev_settle(struct coli_dev *d, int rc, const char *what)
{
	return rc ? coli_dev_fail(d, rc, what) : 0;
}

/* The kernels' checked entry points, coli_dev_OP(d, &(struct ARGS){...}):
 * the gate, the backend's op, its result settled; `what` names the op in the
 * failure's message. Inline: one indirect call per op, no allocation. The
 * device copy does not count toward COLI_GPU_FAIL_AFTER. */
#define COLI_DEV_OP(op, args, count, what)                                                         \
	static inline int coli_dev_##op(struct coli_dev *d, const args *a)                         \
	{                                                                                          \
		int rc = coli_dev_gate(d, count, 1);                                               \
		return rc ? rc : coli_dev_settle(d, d->ops->op(d, a), what);                       \
	}
COLI_DEV_OP(copy, struct coli_dev_copy, COLI_DEV_COUNT_NONE, "device copy")
COLI_DEV_OP(rmsnorm, struct coli_dev_norm, COLI_DEV_COUNT_LAUNCH, "rmsnorm launch")
COLI_DEV_OP(add_rmsnorm, struct coli_dev_norm, COLI_DEV_COUNT_LAUNCH, "add+rmsnorm launch")
COLI_DEV_OP(acc_rmsnorm, struct coli_dev_norm, COLI_DEV_COUNT_LAUNCH, "accumulate+rmsnorm launch")
COLI_DEV_OP(add_bias, struct coli_dev_bias, COLI_DEV_COUNT_LAUNCH, "bias launch")
COLI_DEV_OP(add, struct coli_dev_add, COLI_DEV_COUNT_LAUNCH, "add launch")
COLI_DEV_OP(gated_add, struct coli_dev_gated, COLI_DEV_COUNT_LAUNCH, "gate launch")
COLI_DEV_OP(qk_rope_store, struct coli_dev_qk_rope, COLI_DEV_COUNT_LAUNCH, "qk rope launch")
COLI_DEV_OP(rope, struct coli_dev_rope, COLI_DEV_COUNT_LAUNCH, "rope launch")
COLI_DEV_OP(attention, struct coli_dev_attention, COLI_DEV_COUNT_LAUNCH, "attention launch")
COLI_DEV_OP(mla_prep, struct coli_gpu_mla_prep, COLI_DEV_COUNT_LAUNCH, "mla prep launch")
COLI_DEV_OP(mla_attention, struct coli_dev_mla, COLI_DEV_COUNT_LAUNCH, "mla attention launch")
COLI_DEV_OP(gemv, struct coli_dev_jobs, COLI_DEV_COUNT_LAUNCH, "gemv launch")
COLI_DEV_OP(gemm, struct coli_dev_jobs, COLI_DEV_COUNT_LAUNCH, "gemm launch")
COLI_DEV_OP(gemv_table, struct coli_dev_jobs, COLI_DEV_COUNT_LAUNCH, "gemv launch")
COLI_DEV_OP(silu_mul, struct coli_dev_silu, COLI_DEV_COUNT_LAUNCH, "silu launch")
COLI_DEV_OP(act_quantize, struct coli_dev_quantize, COLI_DEV_COUNT_LAUNCH, "quantize launch")
COLI_DEV_OP(gather_rows, struct coli_dev_gather, COLI_DEV_COUNT_LAUNCH, "gather launch")
COLI_DEV_OP(embed, struct coli_dev_embed, COLI_DEV_COUNT_LAUNCH, "embed launch")
COLI_DEV_OP(argmax, struct coli_dev_argmax, COLI_DEV_COUNT_LAUNCH, "argmax launch")
COLI_DEV_OP(moe_accumulate, struct coli_dev_accumulate, COLI_DEV_COUNT_LAUNCH, "accumulate launch")
COLI_DEV_OP(route, struct coli_dev_route, COLI_DEV_COUNT_LAUNCH, "route launch")
COLI_DEV_OP(dense_gemv, struct coli_dev_dense, COLI_DEV_COUNT_LAUNCH, "dense gemv launch")
COLI_DEV_OP(moe_plan, struct coli_gpu_moe_plan, COLI_DEV_COUNT_LAUNCH, "plan launch")
COLI_DEV_OP(router_plan, struct coli_dev_router_plan, COLI_DEV_COUNT_LAUNCH, "router + plan launch")

/* The memory of the smallest device --gpu SPEC names (sim: what the simulated
 * device reports), before any is opened; 0: none, or one not found. */
size_t coli_dev_spec_mem(const char *spec);
/* The NUMA node of the first GPU --gpu names (auto: ordinal 0, as CUDA
 * numbers them: CUDA_VISIBLE_DEVICES and the driver's order, which sysfs
 * order need not be), its ordinal in *ordinal; -1 for off, sim, no GPU, one
 * node or a node firmware did not give. */
int coli_dev_spec_node(const char *spec, int *ordinal);
/* Open the devices named by --gpu (auto | off | sim | 0,1,...): *n devices
 * in devs[]; prints one line when a GPU was asked for but is absent. */
int coli_dev_open_all(const char *spec, long fail_after, int sim_latency_us, int pdl,
                      unsigned gpu_flags, struct coli_dev **devs, int max, int *n, char *err,
                      size_t errlen);
void coli_dev_close(struct coli_dev *d);

/* The other checked entry points (core/dev/dev.c), through the same gate. */
int coli_dev_alloc(struct coli_dev *d, size_t bytes, uint64_t *addr);
void coli_dev_free(struct coli_dev *d, uint64_t addr);
int coli_dev_upload(struct coli_dev *d, uint64_t dst, const void *src, size_t n);
int coli_dev_upload_async(struct coli_dev *d, uint64_t dst, const void *src, size_t n);
int coli_dev_download_async(struct coli_dev *d, void *dst, uint64_t src, size_t n);
/* v[0..n) downloaded in stream order, as download_async each would be. */
int coli_dev_download_many(struct coli_dev *d, const struct coli_dev_down *v, int n);
int coli_dev_sync(struct coli_dev *d);
/* Graphs (-ENOTSUP where the device has none): core/forward/forward_dev.c records a
 * layer's dense ops once and replays them. A capture that fails leaves the
 * device usable (the caller runs the ops directly); *n_ops: the launches the
 * graph holds, which a replay counts (an injected fault strikes the replay
 * that would cross COLI_GPU_FAIL_AFTER's budget). */
int coli_dev_capture_begin(struct coli_dev *d);
int coli_dev_capture_end(struct coli_dev *d, uint64_t *graph, long *n_ops);
int coli_dev_graph_launch(struct coli_dev *d, uint64_t graph, long n_ops);
void coli_dev_graph_free(struct coli_dev *d, uint64_t graph);
int coli_dev_mem_info(struct coli_dev *d, size_t *free_bytes, size_t *total_bytes);
int coli_dev_stage_init(struct coli_dev *d, int n);
int coli_dev_stage_copy(struct coli_dev *d, int slot, uint64_t dst, const void *src, size_t n);
int coli_dev_stage_use(struct coli_dev *d, int slot);
int coli_dev_stage_done(struct coli_dev *d, int slot);
int coli_dev_stage_landed(struct coli_dev *d, int slot);
int coli_dev_stage_fence(struct coli_dev *d, int slot);
int coli_dev_mark(struct coli_dev *d, int slot);
int coli_dev_elapsed(struct coli_dev *d, int from, int to, double *s);
/* A wait point: 1 recorded on the compute stream, 0 the device has none (wait
 * with coli_dev_sync); point_wait returns once the stream is past the last
 * one recorded, counted as the sync it replaces (COLI_GPU_FAIL_AFTER). */
int coli_dev_point(struct coli_dev *d);
int coli_dev_point_wait(struct coli_dev *d);
/* The stream waiting for the host (host_wait): 1 queued, 0 the device has no
 * such wait (queue nothing behind it), -errno; host_signal releases it (and
 * every earlier seq). Neither counts toward COLI_GPU_FAIL_AFTER. */
int coli_dev_host_wait(struct coli_dev *d, uint32_t seq);
void coli_dev_host_signal(struct coli_dev *d, uint32_t seq);

/* The device's address of registered host bytes [p, p + n) its kernels can
 * read in place (the GPU: mapped memory), else 0 (then upload them). */
uint64_t coli_dev_host_addr(struct coli_dev *d, const void *p, size_t n);

/* Backends. */
/* flags: coli_gpu_open's (COLI_GPU_FAIL_JIT_*: fault injection) */
int coli_dev_gpu_open(int ordinal, int pdl, unsigned flags, struct coli_dev **out, char *err,
                      size_t errlen);
int coli_dev_sim_open(struct coli_dev **out, int index, size_t mem_bytes, int latency_us);

#endif
