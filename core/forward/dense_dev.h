/*
 * core/forward/dense_dev.h — the dense part on a device (core/forward/dense_dev.c uploads it
 * at open, core/forward/forward_dev.c runs the forward over it): its matrices, the
 * captured decode graphs and the working buffers.
 *
 * Device buffers (rows are tokens, fp32 unless said):
 *   x, xn, mlp, proj, shy [tmax][H]; q, att [tmax][nh*hd]; k, v [tmax][nkv*hd]
 *   (MLA: att [tmax][nh*v_head]; qa, kva, qn, qrow, lat below)
 *   aq int8 / ad / aqs: the quantized form of the current GEMV input, [tmax][K_max]
 *   g, u, h [tmax][I_max]; rlog [tmax][E]; gl [tmax]; ey [tmax*top_k][H]
 *   then 2 x [tmax*top_k] (a host-planned layer's pair lists, uploaded with it)
 *   ids int [1 + tmax]: the position, then the token ids; then with several
 *   sequences the row table [tmax][COLI_GPU_ROWS] (dd_rows: each row's position
 *   and its slot)
 *   kcache, vcache [its layers][n_blocks][32] rows of [nkv*hd] in --kv-type: the
 *   host pool's blocks (core/forward/kv.h; kv.c alone says which block is
 *   whose), slot s's position p of a layer at row ktab[s][p / 32] * 32 + p % 32
 *   (ptx/attn/kv_rows.cuh kv_at); ktab int [n_seq][nbs], the device block table,
 *   at a fixed address (captured graphs read it), brought up to the host's
 *   before a step's launches (coli_dense_dev_tables). MLA: kcache
 *   [n_layers][ctx][kv_lora + rope_dim], the latent rows of its one
 *   sequence, contiguous, and no vcache; logits [tmax][vocab]
 *   sel int / selw [tmax][top_k]; slabs u64 [n_layers][n_experts] (resident
 *   slab of each expert, fully resident layers only); gu_jobs, down_jobs
 *   [2 or 1][COLI_GPU_MAX_S * top_k] GEMV jobs written by coli_route_plan,
 *   with the pair lists ptok, pw and (gpt-oss: its experts' biases) pex, the
 *   pairs' experts, int [tmax * top_k];
 *   grlog, gsel, gselw: the lookahead's router logits and routing
 */
#ifndef COLI_CORE_DENSE_DEV_H
#define COLI_CORE_DENSE_DEV_H

#include <stdint.h>

#include "core/core_internal.h"
#include "core/dev/dev.h"
#include "core/moe/moe.h"

struct dmat {
	enum coli_dtype dtype;
	int rows, cols;
	uint64_t w, scales;
};

struct dlayer {
	uint64_t attn_norm, ffn_norm, q_bias, k_bias, v_bias, q_norm, k_norm;
	uint64_t router_bias; /* [n_experts] f32, or 0: the sigmoid router's selection bias;
	                       * the softmax router's (gpt-oss) is added to its logits */
	uint64_t o_bias;      /* [hidden] f32 (cfg.attn_o_bias), or 0 */
	uint64_t sinks;       /* [n_heads] f32 (cfg.attn_sinks), or 0 */
	struct dmat q, k, v, o, router, sh_gate, sh_up, sh_down, sh_router, ffn_gate, ffn_up,
	    ffn_down;
	struct dmat qkv; /* q, k and v stacked in one allocation (q, k, v are views of it),
	                  * run as one GEMV; rows 0 when they cannot be stacked */
	/* MLA (core/forward/mla_dev.c): q is q_b (or attn_q), k and v unused */
	struct dmat q_a, kv_a, k_b, v_b;
	uint64_t q_a_norm, kv_a_norm;
	uint64_t kb_jobs, vb_jobs; /* GEMV jobs: k_b's, v_b's heads for T = 1 ..
	                            * COLI_GPU_STEP_T tokens (coli_dense_dev_mla_table) */
};

/* A decode layer's device work captured as a graph (layer_run), for one
 * token count; kind and guess say what it was captured for. */
enum { SEG_HOST, SEG_PRE, SEG_PLANNED, SEG_DENSE };

struct seg {
	uint64_t graph;
	long n_ops;        /* launches it holds */
	signed char state; /* 0 not yet captured, 1 graph ready, -1 run directly */
	signed char kind;  /* SEG_* */
	signed char pend;  /* what the layer's first norm adds: PEND_* */
	short guess;       /* the lookahead layer its ops route, or -1 */
	signed char point; /* it records the host's wait point (dd->point) */
};

/* What a layer's first norm adds to the residual: nothing (layer 0), the
 * previous layer's MLP output (dd->mlp), or its MoE pairs not yet summed (a
 * device-planned layer leaves its accumulate to the next norm: one launch
 * less; see defers). */
enum { PEND_NONE, PEND_MLP, PEND_PAIRS };

/* Rows of the device's logits buffer: every position's logits (coli logits,
 * perplexity) are computed and downloaded this many at a time, so a large
 * --ubatch does not cost ubatch x vocabulary floats of VRAM. */
#define COLI_DEV_LOGIT_ROWS 64

struct coli_dense_dev {
	struct coli_dev *dev;
	int l0, l1;      /* its layers [l0, l1); its KV cache holds only these */
	int first, last; /* it holds the embeddings / the output norm and lm_head */
	struct dmat tok_embd, lm_head;
	uint64_t out_norm, inv_freq;
	struct dlayer *L;
	uint64_t kcache, vcache;
	size_t layer_rows; /* rows of a layer's cache: n_blocks * 32 (MLA: ctx) */
	uint64_t ktab;     /* [n_seq][nbs] int: the device block table */
	int *tab_up;       /* [n_seq][nbs] host: what ktab holds (-1: not written) */
	uint64_t ids, x, xn, mlp, proj, shy, q, att, k, v, aq, ad, aqs, g, u, h, rlog, gl, ey, ptok,
	    pw, pex, logits, next, sel, selw, slabs, gu_jobs, down_jobs, grlog, gsel, gselw;
	uint64_t qa, kva, qn, qrow, lat;    /* MLA: [tmax][q_lora], [tmax][kl + r],
	                                     * [nh][tmax][np], [tmax][nh][kl + r],
	                                     * [nh][tmax][kl] (core/forward/mla_dev.c) */
	struct coli_gpu_gemm_job *mla_jobs; /* [nh] host: a prefill's per-head jobs */
	uint64_t
	    fsel;         /* [n_layers][COLI_GPU_STEP_T][top_k]: each device-planned layer's
	                   * routing, down once a forward into e->s.fast_sel (coli_dense_dev_fast_down) */
	int route_on_dev; /* the device routes (E and top_k within coli_route's limits) */
	int point;        /* the layer queued last recorded the host's wait point behind its
	                   * downloads (the host part waits for it, not the stream) */
	int plan_dev; /* index in e->vram.devs of this device, when layers can be planned here */
	signed char *full; /* [n_layers] every expert of the layer resident on this device */
	signed char *part; /* [n_layers] some (full or not): the layer can be preplanned */
	int *fast_T;       /* [n_layers] tokens of this forward's device-planned layer, or 0 */
	int fast_any;      /* a layer was planned here this forward: its fsel goes down */
	struct seg *seg;   /* [n_layers][COLI_GPU_STEP_T][2][COLI_ATTN_BUCKETS]: decode
	                    * layers' captured graphs, without and with the
	                    * lookahead's guess, by the positions attention covers
	                    * (kernels_abi.h coli_gpu_attn_reach) */
	struct seg tok[COLI_GPU_STEP_T][COLI_ATTN_BUCKETS]; /* every layer in one graph,
	                                                     * when none needs the host
	                                                     * (forward_dev.c token_run) */
	struct coli_gpu_gemv_job *jobs;
	int kmax;
	uint64_t *allocs; /* every allocation, for release */
	int n_allocs, cap_allocs;
	double phase_t; /* the phase clock: end of the last phase charged */
};

/* A copy-on-write (core/forward/kv_pool.c) on every dense device: the
 * first c->rows rows of block c->src into block c->dst, each device its
 * layers' K and V rows (typed, byte for byte), queued on its stream behind
 * the steps that wrote them and ahead of the step that writes over them. */
int coli_dense_dev_copy_block(struct coli_engine *e, const struct coli_kv_cow *c);
/* The device block tables of the n slots slot[] brought up to the host
 * pool's (e->kv), queued on each dense device's stream ahead of a step's
 * launches: a slot's entries that changed since they were last written, one
 * upload a slot that changed (a slot's blocks change once in 32 positions:
 * most steps upload nothing). Thread: the engine's, before a step. */
int coli_dense_dev_tables(struct coli_engine *e, const int *slot, int n);
/* The cache's table arguments of a launch: slot's row of dd's block table
 * (0 with several sequences: the row table names each row's slot). */
static inline uint64_t dd_tab(const struct coli_dense_dev *dd, int nbs, int slot)
{
	return dd->ktab + (uint64_t)slot * nbs * 4;
}

/* Shared by core/forward/forward_dev.c and core/forward/layer_host.c. */
/* Charge the time since the last phase end to *acc (sync: wait for the
 * device first, --profile's exact split); see core/forward/forward_dev.c. */
int coli_dense_dev_phase_end(struct coli_dense_dev *dd, double *acc, int sync);
/* Qwen2-MoE's shared expert on the dense device: mlp += sigmoid(gate . xn)
 * * swiglu(xn); xn_ready: dd->aq holds xn quantized. */
int coli_dense_dev_shared_expert(struct coli_engine *e, struct coli_dense_dev *dd,
                                 const struct dlayer *D, int T, int xn_ready);
/* The host's part of a layer layer_ops queued up to its routing (SEG_HOST,
 * or SEG_PRE when pre): core/forward/layer_host.c completes the layer call ml
 * (core/moe/moe.h) and runs it. */
int coli_dense_dev_moe_host(struct coli_engine *e, struct coli_moe_layer *ml, int pre, int xq);
/* gpt-oss's down bias (core/forward/layer_host.c): each of a device-planned
 * layer's n_pairs outputs in the plan device's y plus its expert's row
 * (dd->pex); nothing where the experts have none. */
int coli_dense_dev_down_bias(struct coli_engine *e, struct coli_dense_dev *dd, int l, int n_pairs);

/* Shared by core/forward/forward_dev.c and core/forward/attn_dev.c. */
/* Whether q/k norms, RoPE and the KV store run as one launch (see
 * core/forward/attn_dev.c); a decode graph needs it. */
int coli_dense_dev_qk_fused(const struct coli_model_config *c);
/* One forward's rows on the dense devices (core/forward/forward_dev.c): T
 * rows of one sequence from pos0 (a graph reads pos0 from dd->ids), or, with
 * several slots (rows), of the runs run[n_runs], each row at its own
 * position and slot through the device's row table (dd_rows). reach: the
 * furthest position + 1 a row sees (a graph's bucket). */
struct dstep {
	int T, pos0, reach;
	int rows;                       /* several slots: each device's dd_rows holds the rows */
	int n_runs;                     /* runs (with rows) */
	const struct coli_fwd_run *run; /* [n_runs]: slot, r0, n, pos0 */
};

/* The row table of several slots on the device (COLI_GPU_ROWS ints a row,
 * after the position and the token ids in dd->ids). */
static inline uint64_t dd_rows(const struct coli_dense_dev *dd, int tmax)
{
	return dd->ids + (uint64_t)(tmax + 1) * 4;
}

/* Their host side, in the registered e->s.xids (core/forward/scratch.h):
 * the row table after the position and the ids, then the greedy ids coming
 * back from the lm_head's argmaxes. */
static inline int *dd_host_rows(struct coli_engine *e)
{
	return e->s.xids + e->s.tmax + 2;
}
static inline int *dd_host_next(struct coli_engine *e)
{
	return dd_host_rows(e) + COLI_GPU_ROWS * e->s.tmax;
}

/* Layer l's attention on its dense device for st's rows, adding first what
 * the previous layer left (pend: PEND_*); leaves the projection in dd->proj. */
int coli_dense_dev_attention(struct coli_engine *e, int l, const struct dstep *st, int pend);

/* An attention op's launches for st's rows (several slots), one at a time
 * (*i: 0 first; 0 returned when none is left): the short runs (decode
 * tokens, COLI_GPU_MAX_S rows at most) between two long ones in one launch
 * through the row table (rows 1: pos0 the furthest position + 1), each long
 * run (a prompt's chunk, never in a graph) in one of its own at its slot
 * and position. A query's bits are the same either way. */
struct dlaunch {
	int r0, T, pos0, slot, rows;
};
static inline int coli_dense_dev_launch_next(const struct dstep *st, int *i, struct dlaunch *L)
{
	const struct coli_fwd_run *R = st->run;
	int r = *i, most = 0;

	if (r >= st->n_runs)
		return 0;
	if (R[r].n > COLI_GPU_MAX_S) {
		*L = (struct dlaunch){R[r].r0, R[r].n, R[r].pos0, R[r].slot, 0};
		*i = r + 1;
		return 1;
	}
	for (L->r0 = R[r].r0; r < st->n_runs && R[r].n <= COLI_GPU_MAX_S; r++)
		most = R[r].pos0 + R[r].n > most ? R[r].pos0 + R[r].n : most;
	L->T = (r < st->n_runs ? R[r].r0 : st->T) - L->r0;
	L->pos0 = most, L->slot = 0, L->rows = 1;
	*i = r;
	return 1;
}

/* MLA (core/forward/mla_dev.c): the decode job tables written, at open
 * after the buffers (kb_jobs, vb_jobs allocated); layer l's attention for
 * st's rows after its norm, into dd->proj. */
int coli_dense_dev_mla_tables(struct coli_engine *e, struct coli_dense_dev *dd);
size_t coli_dense_dev_mla_table(int nh, int T);
int coli_dense_dev_mla(struct coli_engine *e, struct coli_dense_dev *dd, const struct dlayer *D,
                       int l, const struct dstep *st);

/* The routing of the layers planned on device dd this forward (COLI_GPU_STEP_T
 * rows each), queued into the downloads v[*n] before the forward's last
 * sync; then, after it, the host's counts for them (core/forward/layer_host.c). */
void coli_dense_dev_fast_down(struct coli_engine *e, struct coli_dense_dev *dd,
                              struct coli_dev_down *v, int *n);
void coli_dense_dev_fast_count(struct coli_engine *e);

/* The dense GEMV steps, inline: every layer queues a few of them. */
/* Quantize rows of x [T][K] into aq/ad/aqs when m is quantized. Once per
 * input: every matrix that reads x after it (q, k and v; gate and up) uses
 * the same quantized rows. */
static inline int prep(struct coli_dense_dev *dd, const struct dmat *m, uint64_t x, int T)
{
	if (!coli_dtype_is_quant(m->dtype))
		return 0;
	return coli_dev_act_quantize(
	    dd->dev,
	    &(struct coli_dev_quantize){
	        .x = x, .q = dd->aq, .qd = dd->ad, .qsum = dd->aqs, .n_blocks = T * m->cols / 32});
}

/* The dense GEMV's arguments for y[T][ldy] = m . x[T][K]. */
static inline struct coli_gpu_dense_gemv gemv_args(const struct coli_dense_dev *dd,
                                                   const struct dmat *m, uint64_t x, int T,
                                                   uint64_t y, int ldy)
{
	struct coli_gpu_dense_gemv a = {
	    .w = (const void *)(uintptr_t)m->w,
	    .scales = (const unsigned short *)(uintptr_t)m->scales,
	    .xf = (const float *)(uintptr_t)x,
	    .xq = (const signed char *)(uintptr_t)dd->aq,
	    .xd = (const float *)(uintptr_t)dd->ad,
	    .xqsum = (const int *)(uintptr_t)dd->aqs,
	    .y = (float *)(uintptr_t)y,
	    .rows = m->rows,
	    .K = m->cols,
	    .T = T,
	    .ldy = ldy,
	};

	return a;
}

/* y[T][ldy] = m . x[T][K] in one launch of the dense GEMV (deterministic; the
 * canonical reduction for q8_0/q4_0, on the tensor-core GEMM from
 * COLI_GPU_DENSE_GEMM_MIN_T tokens). A quantized matrix reads x's quantized rows
 * from aq/ad/aqs: prep(x) first. */
static inline int gemm(struct coli_dense_dev *dd, const struct dmat *m, uint64_t x, int T,
                       uint64_t y, int ldy)
{
	struct coli_gpu_dense_gemv a = gemv_args(dd, m, x, T, y, ldy);

	return coli_dev_dense_gemv(dd->dev, &(struct coli_dev_dense){.t = m->dtype, .m = &a});
}

/* x_ready: dd->aq already holds x's rows quantized (the norm that wrote x
 * did it). h is quantized for down by the silu launch itself. */
static inline int swiglu(struct coli_dense_dev *dd, const struct dmat *gate, const struct dmat *up,
                         const struct dmat *down, uint64_t x, int x_ready, int T, uint64_t y)
{
	int I = gate->rows, rc;

	rc = x_ready ? 0 : prep(dd, gate, x, T);
	rc = rc ? rc : gemm(dd, gate, x, T, dd->g, I);
	rc = rc ? rc : gemm(dd, up, x, T, dd->u, I);
	rc = rc ? rc
	        : coli_dev_silu_mul(dd->dev, &(struct coli_dev_silu){
	                                         .g = dd->g,
	                                         .u = dd->u,
	                                         .h = dd->h,
	                                         .q = coli_dtype_is_quant(down->dtype) ? dd->aq : 0,
	                                         .qd = dd->ad,
	                                         .qsum = dd->aqs,
	                                         .n = T * I});
	rc = rc ? rc : gemm(dd, down, dd->h, T, y, down->rows);
	return rc;
}

/* The dense device of layer l (with --split layers each device holds a range
 * of layers; else the one device). */
static inline struct coli_dense_dev *coli_dense_dev_at(const struct coli_engine *e, int l)
{
	return e->dense.dds[e->dense.dd_of[l]];
}

#endif
