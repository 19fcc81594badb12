/*
 * core/moe/moe.h — the MoE part's private header: one MoE layer call as a
 * value, and the scheduler's entry points (core/moe/moe.c, moe_dev.c,
 * lookahead.c).
 *
 * A MoE layer call is a struct coli_moe_layer the forward builds on its stack
 * for one layer (core/forward/forward.c on the CPU path, core/forward/
 * forward_dev.c and layer_host.c with the dense part on a device) and passes
 * down by pointer: which layer and how many tokens, where the routing comes
 * from, which device already ran part of it, where the tokens' rows live on a
 * device, and the hooks through which the MoE part asks the forward for what
 * only the forward can do (make rows it deferred, queue the device tail
 * ahead). The MoE part writes back what the forward reads after the call
 * (moe_on_dense, the tail's signal, the timeline). Nothing of a call is left
 * in struct coli_engine: the engine holds owned state only.
 *
 * Calls go one way: forward -> moe -> place -> dev. The MoE part never calls
 * a forward function by name; it calls the hooks it was handed.
 */
#ifndef COLI_CORE_MOE_H
#define COLI_CORE_MOE_H

#include <stdint.h>

#include "core/core_internal.h"

struct coli_moe_layer;

/* A hook the forward hands the MoE part: fn(e, ml, ctx), ctx the forward's. */
struct coli_moe_hook {
	void (*fn)(struct coli_engine *e, struct coli_moe_layer *ml, void *ctx);
	void *ctx;
};

/* When a decode layer's host part reached each step (coli_now_s seconds;
 * coli_engine_stats moe_layer, summed by core/forward/layer_host.c). */
struct coli_moe_timeline {
	double launch;           /* the forward began to queue the layer's device part */
	double copy;             /* its first slab copy was queued (0: none) */
	double issue, cpu, take; /* each step ended (issue: 0 if none ran) */
	int copies;              /* slab copies queued */
};

struct coli_moe_layer {
	/* ---- set by the forward ---- */
	int l, T;       /* the layer, the call's tokens */
	int routed;     /* 1: e->s.sel/selw hold the dense device's routing (coli_route
	                 * there); 0: the host routes from e->s.rlog */
	int dense_dev;  /* index in e->vram.devs of the device running the layer's dense
	                 * part, or -1 (the CPU) */
	int preplanned; /* device whose resident experts of this layer already ran
	                 * (forward_dev's run_plan; outputs in its y at pair rows), or -1 */
	int guess_l;    /* e->s.guess holds the dense device's lookahead guess for this
	                 * MoE layer, or -1 */
	const int *pos; /* [T] each row's position in its sequence (ROUTE_TRACE), or
	                 * NULL: slot 0's from its position on */
	/* the tokens' rows where they already are on a device (the dense
	 * device's normed rows, q8/q4 quantized by the norm or f32): that
	 * device's pairs are gathered there (core/moe/moe_dev.c), not uploaded.
	 * dev NULL: none */
	struct {
		struct coli_dev *dev;
		uint64_t q, d, qs, f; /* [T][H] int8, [T][H/32] scales and sums; [T][H] f32 */
	} dev_rows;
	int ax_defer;                    /* rows of e->s.xn not yet in e->s.ax (0: ready); */
	struct coli_moe_hook ax_make;    /* makes them: coli_moe_ax_ready calls it */
	int tail_ok;                     /* the device tail may be queued ahead, */
	struct coli_moe_hook tail_ahead; /* by this, once the experts are issued */
	/* ---- set by the MoE part ---- */
	struct coli_dev *tail_dev; /* the tail hook queued a tail behind a host wait */
	uint32_t tail_seq;         /* on tail_dev: coli_moe_experts signals it */
	int tail_queued;           /* the tail hook queued the whole tail */
	int moe_on_dense;          /* the device holding the dense part whose pairs'
	                            * outputs stay in its y at their pair rows (the rest
	                            * come from e->s.ey), or -1: all in e->s.ey */
	struct coli_moe_timeline tl;
};

/* A layer call with nothing on a device yet: the CPU path's value. */
static inline struct coli_moe_layer coli_moe_layer_make(int l, int T)
{
	return (struct coli_moe_layer){
	    .l = l, .T = T, .dense_dev = -1, .preplanned = -1, .guess_l = -1, .moe_on_dense = -1};
}

/* e->s.ax for the rows the forward deferred; every host reader of e->s.ax in the
 * MoE part calls it first. */
static inline void coli_moe_ax_ready(struct coli_engine *e, struct coli_moe_layer *ml)
{
	if (ml->ax_defer) {
		ml->ax_make.fn(e, ml, ml->ax_make.ctx);
		ml->ax_defer = 0;
	}
}

/* moe.c: from router logits in e->s.rlog (or ml->routed's routing) and
 * activations in e->s.ax: route, plan, issue to devices, CPU rows, take.
 * Leaves per-pair outputs in e->s.ey (ml->moe_on_dense's in that device's y);
 * -errno (e->errmsg) when a slab could not be read. */
int coli_moe_experts(struct coli_engine *e, struct coli_moe_layer *ml);
/* route.c: every token's experts and weights into e->s.sel / e->s.selw
 * (unless ml->routed), then COLI_TRACE's lines; the call's pairs by expert,
 * then token (e->s.pair_*, e->moe.pair_first / pair_n). */
void coli_moe_route(struct coli_engine *e, const struct coli_moe_layer *ml);
void coli_moe_pairs(struct coli_engine *e, int T);
/* block.c: out[T][hidden] = MoE(xn) for layer ml->l; xn's activations are
 * prepared. 0, or -errno when an expert's slab could not be read (e->errmsg
 * says which). coli_mlp_dense: out = the dense SwiGLU MLP of layer l. */
int coli_moe_block(struct coli_engine *e, struct coli_moe_layer *ml, float *out);
void coli_mlp_dense(struct coli_engine *e, int l, int T, float *out);
/* assign.c: an owner for every routed expert of the call (e->moe.assign,
 * e->moe.streamed) from its pairs (coli_moe_pairs); the share of a layer's
 * RAM-tier experts the cost model streams. */
void coli_moe_assign(struct coli_engine *e, const struct coli_moe_layer *ml);
double coli_moe_stream_share(const struct coli_engine *e);
/* A decode layer's split of n RAM-tier experts, a slab each (core/moe/assign.c
 * decode_stream_count): how many to stream, the k minimizing
 * max(k / bw_stream, (n - k) / bw_cpu); ties go to the CPU. */
int coli_moe_decode_split(int n, double bw_stream, double bw_cpu);

/* moe_dev.c: per layer, queue device d's experts (issue) and collect their
 * outputs into e->s.ey (take). */
/* pool: where a prefill chunk's activation rows are gathered (NULL: the
 * caller alone, e.g. when it runs beside a pool round) */
int coli_moe_dev_issue(struct coli_engine *e, struct coli_moe_layer *ml, int d,
                       coli_cpu_pool_t *pool);
int coli_moe_dev_take(struct coli_engine *e, const struct coli_moe_layer *ml, int d);
int coli_moe_dev_staged(struct coli_engine *e, int d, int l, int ex);
int coli_moe_dev_stage_room(struct coli_engine *e, int d);
int coli_moe_dev_copy_ahead(struct coli_engine *e, struct coli_moe_layer *ml, int d);
/* Bytes of a [rows][K] matrix's quant plane in a slab (the scales follow). */
size_t coli_quant_plane_bytes(enum coli_dtype t, size_t rows, size_t K);

/* lookahead.c: after layer ml->l's routing, guess the next MoE layer's
 * experts from the current normed hidden state and prefetch them. */
void coli_lookahead(struct coli_engine *e, struct coli_moe_layer *ml);
/* Whether the guess for MoE layer n is worth its router GEMV this call. */
int coli_lookahead_wanted(const struct coli_engine *e, int n);

#endif
