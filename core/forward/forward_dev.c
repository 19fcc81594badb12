/*
 * core/forward/forward_dev.c — the forward pass with the dense part on a device:
 * embeddings, norms, attention with its KV cache, routers, shared experts,
 * dense MLPs and lm_head live in the device's memory, uploaded once at open
 * (no per-token copy of a constant: only token ids, the activations the CPU
 * rows need, and the CPU rows' outputs cross the bus).
 *
 * Per MoE layer the device computes the router logits (gpt-oss: plus the
 * router's bias) and routes them (coli_route: softmax, top-k, weights). A layer whose every expert
 * is resident on this device, at T <= COLI_GPU_STEP_T (decode), is planned on the device too
 * (coli_route_plan routes and writes the GEMV job tables and pair lists in one launch): gate/up,
 * silu, quantize, down and the accumulation follow on the stream with no round trip to the host,
 * whose only part is counting the routed experts once the forward has synchronized (layer_host.c).
 * gpt-oss's layers too: the plan names each pair's expert (dd->pex), the silu adds its gate and up
 * bias rows before the clamped SwiGLU, and a bias add puts its down bias on each output before the
 * accumulation (core/forward/layer_host.c coli_dense_dev_down_bias), the CPU's bits.
 * Any other layer: the host downloads the routing, the lookahead's guess for the next layer and the
 * normed input, plans exactly as the CPU path does (core/moe/moe.c: issue to devices, CPU rows,
 * take), uploads the per-pair outputs, and the device accumulates them in ascending expert id with
 * core/moe/moe.c's bits (that host part: core/forward/layer_host.c). A preplanned layer's resident
 * experts are queued behind those downloads and a wait point
 * (coli_dev_point), which the host waits for instead of the whole stream:
 * they run while it plans. Routing is on the device in both cases, so the
 * weights do not depend on which case a layer takes.
 * When every pair of a layer ran on this same device, the outputs never
 * leave it: the accumulation reads the expert path's output buffer, which is
 * in pair order, on the same stream, and take does not wait
 * (core/moe/moe_dev.c). So for a given dense device, logits do not depend on
 * where experts ran. The simulated device runs the same sequence with the
 * CPU kernels, so --gpu sim reproduces the CPU path bit for bit, which is
 * what CI checks.
 *
 * At decode each layer's device part (layer_ops: up to where the host must
 * look) is captured once as a CUDA graph and replayed (layer_run), or, when
 * no layer needs the host, the whole token's layers as one (token_run): what
 * changes per token is read from device memory (position and ids in dd->ids,
 * routing and job tables the kernels write).
 *
 * Several sequences (--parallel > 1, coli_forward_dev_batch): the runs of a
 * step (struct coli_batch) become T rows as for one sequence, every matrix,
 * router and MoE layer over all of them; each row's position and slot go to
 * the device in a row table beside the ids (dd_rows, COLI_GPU_ROWS), which
 * the fused q/k/RoPE/store launch and attention read (core/forward/attn_dev.c),
 * so a decode step of several sequences is one launch per op and one graph,
 * keyed by the row count and its furthest position's bucket (struct dstep).
 * The cache rows are the host pool's blocks (core/forward/kv.h): the
 * step's slots' device block tables are brought up to the host's before
 * the step's uploads (coli_dense_dev_tables: nothing, unless a slot took
 * or lost a block), so a captured graph replays with whatever blocks the
 * slots hold now.
 *
 * With the layers split over several devices (core/forward/dense_dev.c), each
 * layer runs on its own range's device (coli_dense_dev_at): the forward holds
 * the one with the residual stream in a local, and a layer on the next
 * device's range first hands the stream over (handoff), once a token per
 * boundary.
 *
 * Its buffers are drawn in core/forward/dense_dev.h, uploaded at open by
 * core/forward/dense_dev.c. A layer's attention (norm, q/k/v, q/k norms and
 * RoPE, the KV store, attention, o) and the shared expert are in
 * core/forward/attn_dev.c; the dense GEMV steps both use (prep, gemm,
 * swiglu) are inline in core/forward/dense_dev.h.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_internal.h"
#include "core/forward/dense_dev.h"
#include "core/dev/dev.h"

/* Whether MoE layer l is routed and planned on the device at T tokens
 * (every expert resident here: T <= COLI_GPU_STEP_T), or preplanned (some
 * are: they start here before the host plans the rest, which it does as a
 * decode step's only at T <= COLI_GPU_MAX_S). gpt-oss's experts too: the plan names
 * each pair's expert (dd->pex), its silu adds that expert's gate and up
 * bias rows before the clamped SwiGLU, and its down bias joins each output
 * before the accumulate (coli_dense_dev_down_bias). */
static int can_plan(const struct coli_engine *e, int l, int T)
{
	const struct coli_dense_dev *dd = coli_dense_dev_at(e, l);

	return dd->route_on_dev && dd->plan_dev >= 0 && T <= COLI_GPU_STEP_T && !e->trace &&
	       !dd->dev->failed &&
	       (e->m.cfg.ffn_act == COLI_ACT_SWIGLU ||
	        coli_dev_can(dd->dev, COLI_DEV_CAP_SWIGLU_OAI));
}

static int planned(const struct coli_engine *e, int l, int T)
{
	return can_plan(e, l, T) && coli_dense_dev_at(e, l)->full[l];
}

static int preplanned(const struct coli_engine *e, int l, int T)
{
	return can_plan(e, l, T) && T <= COLI_GPU_MAX_S && !coli_dense_dev_at(e, l)->full[l] &&
	       coli_dense_dev_at(e, l)->part[l];
}

/* Layer l's routing of T tokens' router logits rlog into sel/selw on the
 * device: softmax (coli_route) or, for a sigmoid router, with the layer's
 * correction bias, groups and scale (coli_route_sigmoid's steps). */
static struct coli_dev_route route_args(const struct coli_engine *e, int l, uint64_t rlog,
                                        uint64_t sel, uint64_t selw, int T)
{
	const struct coli_model_config *c = &e->m.cfg;

	return (struct coli_dev_route){.rlog = rlog,
	                               .sel = sel,
	                               .selw = selw,
	                               .T = T,
	                               .E = c->n_experts,
	                               .K = c->top_k,
	                               .norm = c->norm_topk_prob,
	                               .sigmoid = c->router_kind == COLI_ROUTER_SIGMOID,
	                               .n_group = c->n_group,
	                               .topk_group = c->topk_group,
	                               .bias = coli_dense_dev_at(e, l)->L[l].router_bias,
	                               .scale = c->routed_scale};
}

/* Route layer l's T <= COLI_GPU_STEP_T tokens from the router logits in
 * dd->rlog and plan its experts resident here (one launch for both): the
 * routing into sel (dd->sel, which a preplanned layer downloads, or the
 * layer's row of dd->fsel), the GEMV job tables and pair lists (dd->ptok/pw)
 * on the device. router != NULL (f32): the router's GEMV of dd->xn into
 * dd->rlog comes first, in the same launch as the routing (layer_ops
 * decides). A sigmoid router routes in a launch of its own first (router
 * NULL then), and the plan reads that routing. group: an expert's pairs in
 * shared jobs, their rows gathered into the slot's pair-order buffers (a
 * planned layer of several tokens; a preplanned one's host part gathers
 * its own rows there). */
static int plan_route(struct coli_engine *e, int l, int T, const struct dmat *router, uint64_t sel,
                      int group)
{
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_dense_dev *dd = coli_dense_dev_at(e, l);
	struct coli_dev_slot *v = &e->vram.slot[dd->plan_dev];
	const struct coli_expert_layer *xl =
	    coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl);
	enum coli_dtype t = xl->dtype;
	int H = c->hidden, I = c->moe_inter, K = c->top_k;
	struct coli_gpu_moe_plan a = {
	    .sel = (const int *)(uintptr_t)sel,
	    .selw = (const float *)(uintptr_t)dd->selw,
	    .slabs =
	        (const unsigned long long *)(uintptr_t)(dd->slabs + (size_t)l * c->n_experts * 8),
	    .gate_off = xl->gate_off,
	    .up_off = xl->up_off,
	    .down_off = xl->down_off,
	    .scale_gu = coli_quant_plane_bytes(t, I, H),
	    .scale_d = coli_quant_plane_bytes(coli_io_expert_down_dtype(xl), H, I),
	    .xquant = coli_dtype_is_quant(t), /* GGUF's block types too: no scale plane */
	    .xq = (const signed char *)(uintptr_t)dd->aq,
	    .xd = (const float *)(uintptr_t)dd->ad,
	    .xqsum = (const int *)(uintptr_t)dd->aqs,
	    .xf = (const float *)(uintptr_t)dd->xn,
	    .g = (float *)(uintptr_t)v->g,
	    .u = (float *)(uintptr_t)v->u,
	    .h = (float *)(uintptr_t)v->h,
	    .hq = (const signed char *)(uintptr_t)v->hq,
	    .hd = (const float *)(uintptr_t)v->hd,
	    .hqs = (const int *)(uintptr_t)v->hqs,
	    .y = (float *)(uintptr_t)v->y,
	    .gu_jobs = (struct coli_gpu_gemv_job *)(uintptr_t)dd->gu_jobs,
	    .down_jobs = (struct coli_gpu_gemv_job *)(uintptr_t)dd->down_jobs,
	    .pair_token = (int *)(uintptr_t)dd->ptok,
	    .pair_w = (float *)(uintptr_t)dd->pw,
	    .T = T,
	    .K = K,
	    .H = H,
	    .I = I,
	    .rlog = (const float *)(uintptr_t)dd->rlog, /* routed in the same launch */
	    .E = c->n_experts,
	    .norm = c->norm_topk_prob,
	    .pair_expert = (int *)(uintptr_t)dd->pex, /* gpt-oss: its biases' rows */
	    .gq = group ? (signed char *)(uintptr_t)v->xq : NULL,
	    .gd = (float *)(uintptr_t)v->xd,
	    .gqs = (int *)(uintptr_t)v->xqs,
	    .gf = (float *)(uintptr_t)v->xf,
	};

	if (c->router_kind == COLI_ROUTER_SIGMOID) {
		struct coli_dev_route ra = route_args(e, l, dd->rlog, sel, dd->selw, T);
		int rc = coli_dev_route(dd->dev, &ra);

		a.rlog = NULL; /* plan only */
		return rc ? rc : coli_dev_moe_plan(dd->dev, &a);
	}
	if (router) {
		struct coli_gpu_dense_gemv r =
		    gemv_args(dd, router, dd->xn, T, dd->rlog, c->n_experts);

		return coli_dev_router_plan(dd->dev,
		                            &(struct coli_dev_router_plan){.r = &r, .plan = &a});
	}
	return coli_dev_moe_plan(dd->dev, &a);
}

/* The planned experts, on the stream (q8/q4 experts read xn's rows quantized
 * in dd->aq by the ffn norm): gate/up, silu + quantize (gpt-oss: each pair's
 * gate and up biases, row dd->pex[p] of the slot's, then the clamped
 * SwiGLU), down. Outputs in the device slot's y, a row per pair in pair
 * order. */
static int plan_experts(struct coli_engine *e, int l, int T)
{
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_dense_dev *dd = coli_dense_dev_at(e, l);
	struct coli_dev_slot *v = &e->vram.slot[dd->plan_dev];
	const struct coli_expert_layer *xl =
	    coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl);
	enum coli_dtype t = xl->dtype;
	int P = T * c->top_k, rc;
	const struct coli_dev_jobs gu = {
	    .t = t, .table = dd->gu_jobs, .n_jobs = 2 * P, .max_rows = c->moe_inter};
	const struct coli_dev_jobs down = {.t = coli_io_expert_down_dtype(xl),
	                                   .table = dd->down_jobs,
	                                   .n_jobs = P,
	                                   .max_rows = c->hidden};
	const struct coli_dev_silu silu = {.g = v->g,
	                                   .u = v->u,
	                                   .h = v->h,
	                                   .q = coli_dtype_is_quant(t) ? v->hq : 0,
	                                   .qd = v->hd,
	                                   .qsum = v->hqs,
	                                   .n = P * c->moe_inter,
	                                   .kind = c->ffn_act,
	                                   .alpha = c->act_alpha,
	                                   .limit = c->act_limit,
	                                   .bg = coli_moe_dev_xbias(e, v, l, COLI_XBIAS_GATE),
	                                   .bu = coli_moe_dev_xbias(e, v, l, COLI_XBIAS_UP),
	                                   .I = c->moe_inter,
	                                   .idx = dd->pex};

	rc = coli_dev_gemv_table(dd->dev, &gu);
	rc = rc ? rc : coli_dev_silu_mul(dd->dev, &silu);
	return rc ? rc : coli_dev_gemv_table(dd->dev, &down);
}

/* The router lookahead's guess for the next MoE layer (core/moe/lookahead.c),
 * on the device: its router on this layer's xn, routed, downloaded next to
 * this layer's routing. Only where the host plans this layer and the next
 * one is not planned on the device (it needs no prefetch): guess_layer says
 * which layer (-1: none), guess_ops queues its router and routing (layer_ops
 * downloads it with the layer's own). */
static int guess_layer(const struct coli_engine *e, int l, int T)
{
	const struct coli_model_config *c = &e->m.cfg;
	const struct coli_dense_dev *dd = coli_dense_dev_at(e, l);
	int n = l + 1;

	while (n < c->n_layers && !e->m.layers[n].moe)
		n++;
	/* (its router lives with its layer: none across a device boundary) */
	if (n == c->n_layers || n >= dd->l1 || !coli_lookahead_wanted(e, n) || planned(e, n, T))
		return -1;
	return n;
}

/* Whether layer l's router adds its bias to its logits: the softmax
 * router's (gpt-oss: F.linear's bias, core/moe/block.c); the sigmoid
 * router's is for selection only (the route op takes it). */
static int logit_bias(const struct coli_engine *e, const struct coli_dense_dev *dd, int l)
{
	return e->m.cfg.router_kind == COLI_ROUTER_SOFTMAX && dd->L[l].router_bias;
}

/* Layer l's router logits y [T][E] of dd->xn: the GEMV, then a softmax
 * router's bias, added as the CPU adds it (one rounding, y += b). */
static int router_logits(struct coli_engine *e, struct coli_dense_dev *dd, int l, int T, uint64_t y)
{
	const int E = e->m.cfg.n_experts;
	int rc = gemm(dd, &dd->L[l].router, dd->xn, T, y, E);

	if (rc || !logit_bias(e, dd, l))
		return rc;
	return coli_dev_add_bias(
	    dd->dev, &(struct coli_dev_bias){.y = y, .b = dd->L[l].router_bias, .rows = T, .n = E});
}

static int guess_ops(struct coli_engine *e, int n, int T)
{
	struct coli_dense_dev *dd = coli_dense_dev_at(e, n);
	const struct coli_dev_route ra = route_args(e, n, dd->grlog, dd->gsel, dd->gselw, T);
	int rc;

	rc = router_logits(e, dd, n, T, dd->grlog);
	return rc ? rc : coli_dev_route(dd->dev, &ra);
}

static int layer_kind(const struct coli_engine *e, int l, int T)
{
	return !e->m.layers[l].moe   ? SEG_DENSE
	       : planned(e, l, T)    ? SEG_PLANNED
	       : preplanned(e, l, T) ? SEG_PRE
	                             : SEG_HOST;
}

/* Whether layer l, of kind `kind`, leaves its MoE accumulate to the next
 * layer's first norm: a device-planned layer with a next layer and no shared
 * expert (whose gated add needs the sum first). */
static int defers(const struct coli_engine *e, int l, int kind) /* (and on this device) */
{
	return kind == SEG_PLANNED && l + 1 < coli_dense_dev_at(e, l)->l1 && !e->m.cfg.shared_inter;
}

/* A planned layer's MoE: routed, planned, computed and accumulated here;
 * the routing goes back for coli_dense_dev_fast_count with the forward's
 * other planned layers' (coli_dense_dev_fast_down). */
static int planned_moe(struct coli_engine *e, int l, int T, const struct dlayer *D, int fused,
                       int xq)
{
	struct coli_dense_dev *dd = coli_dense_dev_at(e, l);
	int H = e->m.cfg.hidden, K = e->m.cfg.top_k, rc;

	rc = plan_route(e, l, T, fused ? &D->router : NULL,
	                dd->fsel + (size_t)l * COLI_GPU_STEP_T * K * 4, T > 1);
	rc = rc ? rc : plan_experts(e, l, T);
	rc = rc ? rc : coli_dense_dev_down_bias(e, dd, l, T * K);
	if (defers(e, l, SEG_PLANNED)) /* summed by the next layer's first norm */
		return rc;
	rc = rc ? rc
	        : coli_dev_moe_accumulate(
	              dd->dev, &(struct coli_dev_accumulate){.out = dd->mlp,
	                                                     .y = e->vram.slot[dd->plan_dev].y,
	                                                     .pair_token = dd->ptok,
	                                                     .pair_w = dd->pw,
	                                                     .n_pairs = T * K,
	                                                     .T = T,
	                                                     .H = H});
	return rc ? rc : coli_dense_dev_shared_expert(e, dd, D, T, xq);
}

/* Layer l's device work up to where the host must look: the embedding
 * (layer 0), attention, the ffn norm, then
 *   SEG_DENSE    the dense MLP
 *   SEG_PLANNED  router, route + plan, experts, accumulate, shared expert
 *   SEG_HOST/PRE router, routing (with a preplanned layer's plan), the
 *                lookahead's guess (layer gn >= 0), the downloads the host
 *                plans from; then a preplanned layer's wait point and its
 *                resident experts
 * No host state changes here (layer_run may capture it as a graph and
 * replay it); xq: the ffn norm quantizes xn's rows for q8/q4 experts on
 * the device. */
static int layer_ops(struct coli_engine *e, int l, const struct dstep *st, int kind, int xq, int gn,
                     int pend)
{
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_dense_dev *dd = coli_dense_dev_at(e, l);
	const struct dlayer *D = &dd->L[l];
	int H = c->hidden, E = c->n_experts, K = c->top_k, rc = 0, fused, nd = 0, T = st->T;
	struct coli_dev_down down[COLI_DEV_DOWN_MAX]; /* what the host plans from */

	dd->point = 0;
	if (l == 0)
		rc = coli_dev_embed(dd->dev, &(struct coli_dev_embed){.t = dd->tok_embd.dtype,
		                                                      .table = dd->tok_embd.w,
		                                                      .scales = dd->tok_embd.scales,
		                                                      .ids = dd->ids + 4,
		                                                      .x = dd->x,
		                                                      .T = T,
		                                                      .H = H});
	rc = rc ? rc : coli_dense_dev_attention(e, l, st, pend);
	if (!rc && e->opts.profile) /* never captured: graphs are off with --profile */
		rc = coli_dense_dev_phase_end(dd, &e->est.attention_s, 1);
	rc = rc ? rc
	        : coli_dev_add_rmsnorm(dd->dev, &(struct coli_dev_norm){.x = dd->x,
	                                                                .add = dd->proj,
	                                                                .w = D->ffn_norm,
	                                                                .y = dd->xn,
	                                                                .q = xq ? dd->aq : 0,
	                                                                .qd = dd->ad,
	                                                                .qsum = dd->aqs,
	                                                                .rows = T,
	                                                                .n = H,
	                                                                .eps = c->norm_eps});
	if (kind == SEG_DENSE)
		return rc ? rc
		          : swiglu(dd, &D->ffn_gate, &D->ffn_up, &D->ffn_down, dd->xn, 0, T,
		                   dd->mlp);
	rc = rc ? rc : prep(dd, &D->router, dd->xn, T); /* f32 today: a no-op */
	/* a planned layer's f32 router runs in the plan's launch (not one whose
	 * bias joins its logits: that is a launch between), up to the fused
	 * GEMV's COLI_GPU_MAX_S rows */
	fused = (kind == SEG_PLANNED || kind == SEG_PRE) && dd->route_on_dev &&
	        T <= COLI_GPU_MAX_S && D->router.dtype == COLI_DTYPE_F32 &&
	        dd->dev->ops->router_plan && c->router_kind == COLI_ROUTER_SOFTMAX &&
	        !logit_bias(e, dd, l);
	rc = rc || fused ? rc : router_logits(e, dd, l, T, dd->rlog);
	if (kind == SEG_PLANNED)
		return rc ? rc : planned_moe(e, l, T, D, fused, xq);
	/* what the host plans from: the routing (or the router logits it
	 * routes), the lookahead's guess, and the normed rows for its readers
	 * (CPU rows, host routing) -- a prefill chunk's (2 MB a 256-token chunk
	 * of a 2048-wide model) only when a pair of the layer is not resident on
	 * this device (coli_dense_dev_moe_host) */
	const struct coli_dev_route ra = route_args(e, l, dd->rlog, dd->sel, dd->selw, T);

	if (dd->route_on_dev) { /* a preplanned layer routes with its plan */
		rc = rc                ? rc
		     : kind == SEG_PRE ? plan_route(e, l, T, fused ? &D->router : NULL, dd->sel, 0)
		                       : coli_dev_route(dd->dev, &ra);
		rc = rc || gn < 0 ? rc : guess_ops(e, gn, T);
		if (gn >= 0)
			down[nd++] =
			    (struct coli_dev_down){e->s.guess, dd->gsel, sizeof(int) * T * K};
		down[nd++] = (struct coli_dev_down){e->s.sel, dd->sel, sizeof(int) * T * K};
		down[nd++] = (struct coli_dev_down){e->s.selw, dd->selw, sizeof(float) * T * K};
	} else
		down[nd++] = (struct coli_dev_down){e->s.rlog, dd->rlog, sizeof(float) * T * E};
	if (T <= COLI_GPU_MAX_S)
		down[nd++] = (struct coli_dev_down){e->s.xn, dd->xn, sizeof(float) * T * H};
	/* in one op: on a GPU one kernel, not up to four (each costs the chain
	 * well under a microsecond: docs/perf/history/2026-12-01.md, but a launch and a
	 * graph node apiece) */
	rc = rc ? rc : coli_dev_download_many(dd->dev, down, nd);
	if (rc || kind != SEG_PRE)
		return rc;
	/* the host looks from here: the resident experts run while it plans and
	 * computes the rest (without a wait point it waits for them too) */
	rc = coli_dev_point(dd->dev);
	dd->point = rc > 0;
	return rc < 0 ? rc : plan_experts(e, l, T);
}

/* Whether a step's layers run as graphs: a decode step, whose positions
 * come from device memory (dd->ids, or the row table of several sequences),
 * which every kernel of layer_ops reads them from except the unfused q/k
 * path (OLMoE's whole-vector norm, heads over 256; MLA's ops all read it).
 * One sequence up to COLI_GPU_MAX_S rows; several up to COLI_GPU_STEP_T, each
 * run within COLI_GPU_MAX_S (a longer one attends in a launch of its own at
 * the position the host gives: core/forward/attn_dev.c attend). */
static int use_graphs(const struct coli_engine *e, const struct coli_dense_dev *dd,
                      const struct dstep *st)
{
	const struct coli_model_config *c = &e->m.cfg;
	int decode = st->T <= COLI_GPU_MAX_S || (st->rows && st->T <= COLI_GPU_STEP_T);

	for (int r = 0; st->rows && r < st->n_runs; r++)
		decode &= st->run[r].n <= COLI_GPU_MAX_S;
	return decode && e->opts.dev_graph && !e->opts.profile &&
	       (c->kv_lora || coli_dense_dev_qk_fused(c)) &&
	       coli_dev_can(dd->dev, COLI_DEV_CAP_GRAPHS);
}

/* layer_ops, replayed from a graph captured the first time this layer runs
 * at T tokens, with or without a guess (the lookahead skips idle layers at
 * most positions: core/moe/lookahead.c), in the position's bucket (attention's
 * grid covers the bucket's positions, not the whole context: 256 at first,
 * doubling), or after its placement changed (a capture the driver refuses:
 * run directly from then on).
 * The replay reads what changes per token from device memory: the position
 * and ids (dd->ids), the routing and job tables its own kernels write. */
static int layer_run(struct coli_engine *e, int l, const struct dstep *st, int kind, int xq, int gn,
                     int pend)
{
	struct coli_dense_dev *dd = coli_dense_dev_at(e, l);
	const int T = st->T;
	struct seg *s =
	    &dd->seg[(((size_t)l * COLI_GPU_STEP_T + T - 1) * 2 + (gn >= 0)) * COLI_ATTN_BUCKETS +
	             coli_gpu_attn_bucket(st->reach)];
	int rc;

	if (!use_graphs(e, dd, st))
		return layer_ops(e, l, st, kind, xq, gn, pend);
	if (s->state && (s->kind != kind || s->guess != gn || s->pend != pend)) { /* placement */
		coli_dev_graph_free(dd->dev, s->graph);
		*s = (struct seg){0};
	}
	if (!s->state) {
		s->kind = (signed char)kind;
		s->pend = (signed char)pend;
		s->guess = (short)gn;
		s->state = -1;
		if (coli_dev_capture_begin(dd->dev) == 0) {
			int rc_end;

			rc = layer_ops(e, l, st, kind, xq, gn, pend);
			rc_end = coli_dev_capture_end(dd->dev, &s->graph, &s->n_ops);
			if (rc || dd->dev->failed)
				return rc ? rc : -EIO;
			if (!rc_end && s->graph) {
				s->state = 1;
				s->point = (signed char)dd->point;
				e->est.dev_graph_captures++;
			}
		}
	}
	if (s->state == 1) {
		e->est.dev_graph_replays++;
		dd->point = s->point;
		return coli_dev_graph_launch(dd->dev, s->graph, s->n_ops);
	}
	return layer_ops(e, l, st, kind, xq, gn, pend);
}

/* Whether layer l's experts read xn's rows quantized by its ffn norm (q8/q4
 * experts; a host-planned layer's device experts gather them on the device). */
static int layer_xq(const struct coli_engine *e, int l, int kind)
{
	return kind != SEG_DENSE &&
	       coli_dtype_is_quant(
	           coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl)->dtype);
}

/* A decode token none of whose layers needs the host (every MoE layer
 * planned on this device, one device): all the layers' ops in one graph per
 * token count, captured the first time and replayed, so the boundaries
 * between the layers' graphs go too (the last kernel of one and the first of
 * the next then overlap under programmatic dependent launch, as inside a
 * layer). Its ops are the layer-by-layer path's with the same pend chain, so
 * the bits are too. Returns 1 when it ran the layers, 0 when the token takes
 * the layer-by-layer path (a layer needs the host, graphs are off, or the
 * capture was refused: then never again), or -errno. */
static int token_run(struct coli_engine *e, const struct dstep *st)
{
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_dense_dev *dd = e->dense.dds[0]; /* (graphs: one device only) */
	const int T = st->T;
	struct seg *s = &dd->tok[T - 1][coli_gpu_attn_bucket(st->reach)];
	int rc = 0;

	if (e->dense.n_dd != 1 || s->state < 0 || !use_graphs(e, dd, st))
		return 0;
	for (int l = 0; l < c->n_layers; l++)
		if (layer_kind(e, l, T) != SEG_PLANNED && layer_kind(e, l, T) != SEG_DENSE)
			return 0;
	if (!s->state) {
		int rc_end;

		s->state = -1;
		if (coli_dev_capture_begin(dd->dev))
			return 0;
		for (int l = 0, pend = PEND_NONE; !rc && l < c->n_layers; l++) {
			int kind = layer_kind(e, l, T);

			rc = layer_ops(e, l, st, kind, layer_xq(e, l, kind), -1, pend);
			pend = defers(e, l, kind) ? PEND_PAIRS : PEND_MLP;
		}
		rc_end = coli_dev_capture_end(dd->dev, &s->graph, &s->n_ops);
		if (rc || dd->dev->failed)
			return rc ? rc : -EIO;
		if (rc_end || !s->graph)
			return 0; /* recorded, not run: the layers go one by one */
		s->state = 1;
		e->est.dev_graph_captures++;
	}
	rc = coli_dev_graph_launch(dd->dev, s->graph, s->n_ops);
	if (rc)
		return rc;
	e->est.dev_graph_replays += (uint64_t)c->n_layers;
	for (int l = 0; l < c->n_layers; l++)
		if (layer_kind(e, l, T) == SEG_PLANNED)
			dd->fast_T[l] = T, dd->fast_any = 1;
	return 1;
}

/* Layer split: the next layer's dense part is on another device. The
 * residual stream (with the last layer's MLP output added: a layer before a
 * boundary does not defer its accumulate) goes over through the host's
 * registered rows; the device left behind has nothing else queued. Its own
 * phase (handoff_s; with --profile the upload is waited for too). */
static int handoff(struct coli_engine *e, struct coli_dense_dev *from, struct coli_dense_dev *to,
                   int T)
{
	int H = e->m.cfg.hidden, rc;
	size_t n = sizeof(float) * T * H;
	struct coli_dev_down down[2] = {{e->s.xn, from->x, n}};
	int nd = 1;

	rc = coli_dev_add(from->dev,
	                  &(struct coli_dev_add){.x = from->x, .y = from->mlp, .n = T * H});
	coli_dense_dev_fast_down(e, from, down, &nd);
	rc = rc ? rc : coli_dev_download_many(from->dev, down, nd);
	rc = rc ? rc : coli_dev_sync(from->dev);
	rc = rc ? rc : coli_dev_upload_async(to->dev, to->x, e->s.xn, n);
	e->est.h2d_bytes += n;
	to->phase_t = from->phase_t;
	return rc ? rc : coli_dense_dev_phase_end(to, &e->est.handoff_s, e->opts.profile);
}

/* The logits of the rows want[n_want] (ascending), in pieces of
 * COLI_DEV_LOGIT_ROWS (the stream orders each download before the next
 * piece overwrites); the last piece's come down with the planned layers'
 * routing, as one. A piece's rows get the last layer's MLP output added
 * (the others were added by the next layer's norm), normed and, for a
 * quantized lm_head, quantized, into xn's first rows: a launch a range of
 * consecutive rows (one for a prompt's or a decode batch's). One row (a
 * decode step; a quantized lm_head: its GEMV writes a CTA's rows as one
 * store, ptx/dense/dgemv.cuh) goes straight into the registered e->s.xlogits, no
 * download behind the GEMV; several into logits [n_want][vocab]. */
static int logits_queue(struct coli_engine *e, struct coli_dense_dev *dd, const int *want,
                        int n_want, float *logits, int *next, struct coli_dev_down *down, int *nd)
{
	const struct coli_model_config *c = &e->m.cfg;
	int H = c->hidden, rc = 0, quant = coli_dtype_is_quant(dd->lm_head.dtype);

	uint64_t hx = n_want == 1 && !next && quant
	                  ? coli_dev_host_addr(dd->dev, e->s.xlogits, sizeof(float) * c->vocab)
	                  : 0;
	struct coli_dev_norm nm = {.w = dd->out_norm, .n = H, .eps = c->norm_eps};

	for (int j0 = 0; !rc && (logits || next) && j0 < n_want; j0 += COLI_DEV_LOGIT_ROWS) {
		int n = n_want - j0 < COLI_DEV_LOGIT_ROWS ? n_want - j0 : COLI_DEV_LOGIT_ROWS;

		rc = coli_dev_download_many(dd->dev, down, *nd); /* the piece before */
		*nd = 0;
		for (int j = j0, k; !rc && j < j0 + n; j = k) {
			size_t at = (size_t)want[j] * H * 4, to = (size_t)(j - j0) * H;

			for (k = j + 1; k < j0 + n && want[k] == want[k - 1] + 1; k++)
				;
			nm.x = dd->x + at, nm.add = dd->mlp + at, nm.rows = k - j;
			nm.y = dd->xn + to * 4, nm.q = quant ? dd->aq + to : 0;
			nm.qd = dd->ad + to / 8, nm.qsum = dd->aqs + to / 8; /* a 32-block's */
			rc = coli_dev_add_rmsnorm(dd->dev, &nm);
		}
		rc = rc ? rc : gemm(dd, &dd->lm_head, dd->xn, n, hx ? hx : dd->logits, c->vocab);
		if (next) { /* greedy: the indices come back, not the vocabulary's logits */
			for (int j = 0; !rc && j < n; j++)
				rc = coli_dev_argmax(
				    dd->dev,
				    &(struct coli_dev_argmax){
				        .x = dd->logits + sizeof(float) * (size_t)j * c->vocab,
				        .out = dd->next + sizeof(int) * (size_t)j,
				        .n = c->vocab});
			down[(*nd)++] = (struct coli_dev_down){dd_host_next(e) + j0, dd->next,
			                                       sizeof(int) * (size_t)n};
		} else if (!hx) {
			/* one row (a decode step) through the registered e->s.xlogits */
			float *dst = n_want == 1 ? e->s.xlogits : logits + (size_t)j0 * c->vocab;

			down[(*nd)++] =
			    (struct coli_dev_down){dst, dd->logits, sizeof(float) * n * c->vocab};
		}
	}
	return rc;
}

/* The forward of st's rows, their token ids (and with several slots the row
 * table) already in e->s.xids; logits of the rows want[n_want] (next: the
 * greedy ids after them, next[n_want]). The caller advances the slots. */
static int forward_rows(struct coli_engine *e, const struct dstep *st, const int *want, int n_want,
                        float *logits, int *next)
{
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_dense_dev *dd = e->dense.dds[0];
	int T = st->T, rc = 0, whole, nd = 0, slots[COLI_MAX_SEQ], n_slots = 0;
	struct coli_dev_down down[2]; /* the forward's last downloads, as one */
	double start = coli_now_s();

	dd->phase_t = start;
	for (int r = 0; r < (st->rows ? st->n_runs : 1); r++) /* one sequence: slot 0 */
		slots[n_slots++] = st->rows ? st->run[r].slot : 0;
	rc = coli_dense_dev_tables(e, slots, n_slots);
	for (int i = 0; !rc && i < e->dense.n_dd; i++) { /* every device reads the positions */
		struct coli_dense_dev *di = e->dense.dds[i];

		rc = coli_dev_upload_async(di->dev, di->ids, e->s.xids, sizeof(int) * (T + 1));
		e->est.h2d_bytes += sizeof(int) * (T + 1);
		if (!rc && st->rows) {
			size_t n = sizeof(int) * COLI_GPU_ROWS * T;

			rc = coli_dev_upload_async(di->dev, dd_rows(di, e->s.tmax), dd_host_rows(e),
			                           n);
			e->est.h2d_bytes += n;
		}
	}
	if (!rc) /* a failed upload is the device's failure (the caller falls back) */
		rc = T <= COLI_GPU_STEP_T ? token_run(e, st) : 0;
	whole = rc == 1;
	rc = whole ? 0 : rc;
	if (whole && !e->opts.profile) /* queued, not done: see coli_dense_dev_phase_end */
		coli_dense_dev_phase_end(dd, &e->est.attention_s, 0);
	for (int l = 0, pend = PEND_NONE; !rc && !whole && l < c->n_layers; l++) {
		int kind, moe;

		/* layer split: the next device's range */
		if (coli_dense_dev_at(e, l) != dd) {
			rc = handoff(e, dd, coli_dense_dev_at(e, l), T);
			dd = coli_dense_dev_at(e, l);
			pend = PEND_NONE;
			if (rc)
				break;
		}
		kind = layer_kind(e, l, T), moe = kind != SEG_DENSE;
		int gn = kind == SEG_HOST || kind == SEG_PRE ? guess_layer(e, l, T) : -1;
		int xq = layer_xq(e, l, kind);
		double t_launch = coli_now_s();

		rc = layer_run(e, l, st, kind, xq, gn, pend);
		pend = defers(e, l, kind) ? PEND_PAIRS : PEND_MLP;
		if (!rc && kind == SEG_PLANNED) {
			dd->fast_T[l] = T, dd->fast_any = 1;
			if (!e->opts.profile) /* queued, not done: see coli_dense_dev_phase_end */
				coli_dense_dev_phase_end(dd, &e->est.attention_s, 0);
		}
		if (!rc && (kind == SEG_HOST || kind == SEG_PRE)) {
			/* the layer call; core/forward/layer_host.c completes it */
			struct coli_moe_layer ml = coli_moe_layer_make(l, T);
			ml.tl.launch = t_launch, ml.guess_l = dd->route_on_dev ? gn : -1;
			rc = coli_dense_dev_moe_host(e, &ml, kind == SEG_PRE, xq);
		}
		if (!rc) /* a host-planned layer ended on a sync; a device-planned one queued */
			rc = coli_dense_dev_phase_end(dd, moe ? &e->est.moe_s : &e->est.dense_mlp_s,
			                              e->opts.profile && !moe);
	}
	rc = rc ? rc : logits_queue(e, dd, want, n_want, logits, next, down, &nd);
	coli_dense_dev_fast_down(e, dd, down, &nd);
	rc = rc ? rc : coli_dev_download_many(dd->dev, down, nd);
	rc = rc ? rc : coli_dev_sync(dd->dev);
	if (rc)
		return rc;
	if (logits && n_want == 1 && logits != e->s.xlogits) /* (coli_engine_forward_last's) */
		memcpy(logits, e->s.xlogits, sizeof(float) * c->vocab);
	coli_dense_dev_fast_count(e);
	if (next)
		memcpy(next, dd_host_next(e), sizeof(int) * (size_t)n_want);
	if (logits || next)
		coli_dense_dev_phase_end(dd, &e->est.lm_head_s, 0);
	e->est.forward_s += coli_now_s() - start;
	e->est.tokens += T;
	return 0;
}

int coli_forward_dev(struct coli_engine *e, const int *ids, int T, float *logits, int all_logits,
                     int *next)
{
	const struct coli_model_config *c = &e->m.cfg;
	int pos0 = e->kv.seq[0].pos, rc, n_want = all_logits ? T : 1;
	int want[e->s.tmax > 0 ? e->s.tmax : 1];
	const struct dstep st = {.T = T, .pos0 = pos0, .reach = pos0 + T};

	if (T <= 0 || T > e->s.tmax || e->kv.n_seq > 1) /* (several: coli_forward_dev_batch) */
		return -EINVAL;
	if (pos0 + T > e->kv.ctx)
		return -E2BIG;
	for (int t = 0; t < T; t++)
		if (ids[t] < 0 || ids[t] >= c->vocab)
			return -EINVAL;
	rc = coli_forward_grow(e, &(int){0}, &(int){pos0 + T}, 1); /* the pool's count */
	if (rc)
		return rc;
	e->s.xids[0] = pos0; /* registered: see engine.c */
	memcpy(e->s.xids + 1, ids, sizeof(int) * T);
	for (int j = 0; j < n_want; j++)
		want[j] = all_logits ? j : T - 1;
	rc = forward_rows(e, &st, want, n_want, logits, next);
	if (!rc)
		e->kv.seq[0].pos += T;
	return rc;
}

int coli_forward_dev_batch(struct coli_engine *e, const struct coli_batch *b, float *logits,
                           int *next)
{
	struct coli_fwd_run run[COLI_MAX_SEQ];
	struct coli_fwd f;
	int pos[e->s.tmax], want[e->s.tmax], n_want = 0, *rows = dd_host_rows(e), rc;
	struct dstep st = {.rows = 1, .run = run};

	e->errmsg[0] = 0;
	rc = coli_forward_rows(e, b, &f, run, pos);
	if (rc)
		return rc;
	st.T = f.T, st.n_runs = f.n_runs;
	e->s.xids[0] = 0; /* (the row table holds the positions) */
	for (int r = 0; r < f.n_runs; r++) {
		const struct coli_fwd_run *R = &run[r];
		int lg = b->runs[r].logits;

		memcpy(e->s.xids + 1 + R->r0, b->runs[r].ids, sizeof(int) * R->n);
		for (int t = R->r0; t < R->r0 + R->n; t++) {
			rows[COLI_GPU_ROWS * t] = pos[t];
			rows[COLI_GPU_ROWS * t + 1] = R->slot;
			if (lg == 2 || (lg == 1 && t == R->r0 + R->n - 1))
				want[n_want++] = t;
		}
		st.reach = R->pos0 + R->n > st.reach ? R->pos0 + R->n : st.reach;
	}
	rc = forward_rows(e, &st, want, n_want, n_want && !next ? logits : NULL,
	                  n_want ? next : NULL);
	if (rc)
		return rc;
	for (int r = 0; r < f.n_runs; r++) {
		struct coli_kv_seq *q = &e->kv.seq[run[r].slot];

		/* (memmove: a rebuild from the history forwards hist itself) */
		memmove(q->hist + q->pos, b->runs[r].ids, sizeof(int) * run[r].n);
		q->pos += run[r].n;
	}
	e->est.steps++;
	e->est.step_runs += (uint64_t)f.n_runs;
	return 0;
}
