/*
 * core/moe/sched.h — what the MoE scheduler keeps from open to close: its
 * per-expert lists and CPU rows, reused by every layer call (core/moe/
 * moe.c, moe_dev.c; what one call means lives in struct coli_moe_layer,
 * core/moe/moe.h), the lookahead's idle counts (core/moe/lookahead.c) and
 * the cost model's bandwidths, which improve over the run. core/engine.c
 * allocates it after the forward's scratch (coli_moe_sched_alloc) and frees
 * it at close (coli_moe_sched_free).
 */
#ifndef COLI_CORE_MOE_SCHED_H
#define COLI_CORE_MOE_SCHED_H

#include <stddef.h>

struct coli_actbuf;
struct coli_act;
struct coli_expert_view;
struct coli_gemm_job;
struct coli_model_config;

struct coli_moe_sched {
	/* a layer's experts, [n_experts] each */
	signed char *assign;      /* device computing it, -1 CPU */
	unsigned char *streamed;  /* 1 if copied to the device */
	int *cand, *cand_n;       /* scratch of coli_moe_pairs, coli_moe_assign, cpu_list */
	int *pair_first, *pair_n; /* first pair, pair count */
	int *need, *redo;         /* experts the host reads; CPU recomputes */
	const void **slab_ptr;    /* slabs of the acquired chunk */
	const void **host_slab;   /* RAM slab of a streamed expert */
	/* CPU rows of a MoE layer, batched over its experts (moe.c cpu_experts);
	 * models with routed experts only */
	float *pg, *pu;                 /* [tmax * top_k][moe_inter] gate, up (then h) */
	struct coli_actbuf *ph;         /* [tmax * top_k] h per pair, quantized */
	struct coli_act *hag;           /* [tmax * top_k] views of ph for the down GEMM */
	struct coli_expert_view *xview; /* [n_experts] */
	struct coli_gemm_job *xjobs;    /* [3 * n_experts]: gate, up, then down */
	int *xpairs, n_xpairs;          /* pairs whose SwiGLU the pool computes */
	int n_ph;                       /* ph's count, for coli_moe_sched_free */
	unsigned char *la_idle; /* [n_layers] lookahead guesses in a row that read nothing */
	/* cost model: bytes/s of CPU rows and of streaming (the first measure of
	 * streaming: core/place/vram.c, at its staging slots' allocation) */
	double bw_cpu, bw_stream;
	double bw_cpu_pair; /* prefill CPU rows: slab bytes x tokens per second */
	size_t bytes;       /* what coli_moe_sched_alloc took, for the RAM budget */
};

/* sched for model c and tmax tokens a call. -ENOMEM: sched holds what was
 * allocated; coli_moe_sched_free releases it. */
int coli_moe_sched_alloc(struct coli_moe_sched *sched, const struct coli_model_config *c, int tmax);
/* Releases what coli_moe_sched_alloc made; sched is zeroed. */
void coli_moe_sched_free(struct coli_moe_sched *sched);

#endif
