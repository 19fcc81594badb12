/*
 * core/forward/scratch.h — the forward's working buffers, sized at open for
 * tmax tokens a call (--ubatch, at most the context): the token rows of the
 * dense layers, the routing and the (token, expert) pairs a MoE layer call
 * hands between the forward and the MoE part (core/moe), and the
 * page-locked transfer region through which rows cross to and from a
 * device. core/engine.c allocates it (coli_scratch_alloc) after the KV
 * cache and frees it (coli_scratch_free) after the devices are closed; what
 * it holds between two calls means nothing.
 */
#ifndef COLI_CORE_FORWARD_SCRATCH_H
#define COLI_CORE_FORWARD_SCRATCH_H

#include <stddef.h>
#include <stdint.h>

struct coli_actbuf;
struct coli_act;
struct coli_attn_group;
struct coli_model_config;

struct coli_scratch {
	int tmax;                     /* tokens a forward call takes */
	float *x;                     /* [tmax][hidden] residual stream */
	float *xn;                    /* [tmax][hidden] normed */
	float *q;                     /* [tmax][nh*hd] */
	float *kx, *vx;               /* [tmax][nkv*hd] */
	float *att;                   /* [tmax][nh*hd] attention output */
	float *scores;                /* [n_slots][slot]: attention's */
	size_t slot;                  /* floats a slot: coli_attn_slot_floats of ctx */
	int n_slots;                  /* a thread's, or a decode step's group's where more */
	struct coli_attn_group *attn; /* [tmax * n_kv_heads]: a forward's attention groups */
	float *mlp;                   /* [tmax][hidden] MoE / MLP output */
	float *proj;                  /* [tmax][hidden] projection output */
	float *glogits; /* [vocab]: the CPU path's logits for coli_engine_forward_argmax */
	float *rlog;    /* [tmax][n_experts] router logits */
	int *sel;       /* [tmax][top_k] routed experts (descending weight) */
	float *selw;    /* [tmax][top_k] their weights */
	float *g, *u;   /* [tmax][max_inter] */
	float *ey;      /* [tmax*top_k][hidden] per-pair expert outputs, then room
	                 * for the pair lists (one upload: core/forward/forward_dev.c) */
	/* the layer's (token, expert) pairs, sorted by expert then token
	 * (core/moe/moe.c plans them) */
	int n_pairs;
	int *pair_expert, *pair_token;
	float *pair_w;
	struct coli_actbuf *ax;     /* [tmax] over hidden-sized inputs */
	struct coli_actbuf *ah;     /* [tmax] over inter / attention-sized inputs */
	struct coli_act *ag;        /* [tmax * top_k] gathered activations (struct copies) */
	float *inv_freq;            /* [head_dim/2] rope frequencies */
	float rope_attn;            /* cos and sin are multiplied by it (YaRN; else 1) */
	float attn_scale;           /* MLA's softmax scale (head_dim^-0.5, YaRN's mscale^2) */
	float *mla;                 /* [tmax][...] MLA's rows, then [mla_cap][max(nope, kv_lora)]
	                             * per-head inputs (core/forward/mla.c), or NULL */
	float *mla_rows;            /* inside mla: [mla_cap][max(nope, kv_lora)] */
	int mla_cap;                /* max(tmax, n_heads): per-head rows a batch */
	struct coli_actbuf *mla_ab; /* [mla_cap] their activations */
	struct coli_act *mla_acts;  /* [mla_cap] (struct copies, for the GEMM jobs) */
	void *xfer; /* page-locked region holding xn, rlog, ey, pair_token, pair_w, xids,
	             * sel, selw, fast_sel, guess, xlogits */
	size_t xfer_bytes;
	float *xlogits; /* [n_seq][vocab]: a decode step's logits on their way from the dense
	                 * device (a download into the caller's pageable buffer went
	                 * through the driver's staging at a few GB/s) */
	int *fast_sel;  /* [n_layers][COLI_GPU_STEP_T][top_k]: routing of the layers planned on
	                 * the dense device this forward, for the host's counts */
	int *guess;     /* [tmax][top_k]: the lookahead's top-k for a layer call's guess_l,
	                 * computed on the dense device (core/forward/forward_dev.c) */
	int *xids;      /* [2 + tmax] position, then token ids, on their way to the dense device
	                 * ([tmax + 1] unused); then [tmax][COLI_GPU_ROWS] several sequences'
	                 * row table (dd_rows); then [tmax] the greedy ids coming back
	                 * (coli_engine_forward_argmax: dd_host_next,
	                 * core/forward/dense_dev.h) */
	size_t bytes;   /* what coli_scratch_alloc took, for the RAM budget */
};

/* s for tmax tokens of model c, `threads` attention slots of ctx positions,
 * the logits of a row for each of n_seq sequences (xlogits).
 * -ENOMEM: s holds what was allocated; coli_scratch_free releases it. */
int coli_scratch_alloc(struct coli_scratch *s, const struct coli_model_config *c, int tmax, int ctx,
                       int n_seq, int threads);
/* Releases what coli_scratch_alloc made; call after the devices that
 * registered the transfer region are closed. s is zeroed. */
void coli_scratch_free(struct coli_scratch *s);

#endif
