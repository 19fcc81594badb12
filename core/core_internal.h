/*
 * core/core_internal.h — the engine's private structures: the bound model
 * (tensor views into the container), the KV cache and scratch buffers.
 *
 * Data flow of one forward call over T tokens (prefill T > 1, decode T = 1):
 *
 *   ids[T] -> x[T][hidden] (embedding rows)
 *   per layer l:
 *     xn = rmsnorm(x) ---> q,k,v -> (q/k norm) -> rope -> kv cache -> attention -> o
 *     x += o
 *     xn = rmsnorm(x) ---> MoE block (router, top-k, experts [, shared expert])
 *                          or dense MLP
 *     x += mlp
 *   logits = lm_head(rmsnorm(x))   for the rows asked for
 */
#ifndef COLI_CORE_INTERNAL_H
#define COLI_CORE_INTERNAL_H

#include <stdio.h>
#include <time.h>

#include "core/coli.h"
#include "cpu/cpu.h"
#include "io/io.h"

struct coli_layer {
	const float *attn_norm; /* [hidden] */
	const float *ffn_norm;  /* [hidden] */
	struct coli_mat q, k, v, o;
	const float *q_bias, *k_bias, *v_bias; /* [nh*hd], [nkv*hd], [nkv*hd] or NULL */
	const float *q_norm, *k_norm;          /* see cfg.qk_norm, or NULL */
	int moe;
	/* MoE layers */
	struct coli_mat router;                  /* [n_experts, hidden] f32 */
	const float *router_bias;                /* [n_experts] (cfg.router_bias) or NULL */
	int xl;                                  /* index of the container's expert layer */
	struct coli_mat sh_gate, sh_up, sh_down; /* shared expert (rows 0 if none) */
	struct coli_mat sh_router;               /* [1, hidden] f32 (cfg.shared_gated) */
	/* dense MLP layers */
	struct coli_mat ffn_gate, ffn_up, ffn_down;
};

struct coli_model {
	coli_container_t *c;
	struct coli_model_config cfg;
	struct coli_mat tok_embd; /* [vocab, hidden] */
	struct coli_mat lm_head;  /* [vocab, hidden] (tok_embd when tied) */
	const float *out_norm;    /* [hidden] */
	struct coli_layer layers[COLI_MAX_LAYERS];
};

/* Bind every tensor of the container to the model's views; checks that each
 * required tensor exists with the expected shape and dtype. m owns c (m->c)
 * once this returns 0; on failure m->c is NULL and c is still the caller's. */
int coli_model_bind(struct coli_model *m, coli_container_t *c, char *err, size_t errlen);

/* An expert's three matrices, viewed in its slab. */
struct coli_expert_view {
	struct coli_mat gate, up, down;
};
/* The same view over a copy of the slab at `slab` (a tier slot). */
void coli_model_expert_at(const struct coli_model *m, int layer, const void *slab,
                          struct coli_expert_view *v);
/* Re-point every tensor view inside [from, from + bytes) to the same offset
 * in `to` (the dense region copied into an arena). */
void coli_model_rebase(struct coli_model *m, const void *from, size_t bytes, const void *to);

/* Per-token activation scratch: fp32 values plus their quantized form. */
struct coli_actbuf {
	int n;
	float *f;      /* [n] */
	int8_t *q;     /* [n] */
	float *d;      /* [n/32] */
	int32_t *qsum; /* [n/32] */
	struct coli_act act;
};

#define COLI_MAX_DEVS 8

/* One device's share of the MoE work: made by core/place/vram.c, used per
 * layer by core/moe/moe_dev.c. Device addresses are uint64_t; s* are host
 * staging buffers of the same shapes. */
struct coli_dev_slot {
	struct coli_dev *dev;
	size_t budget, used;      /* VRAM for resident expert slabs, bytes */
	int n_experts;            /* resident */
	int pmax;                 /* pairs the buffers hold: tmax * top_k */
	uint64_t xq, xd, xqs, xf; /* pair activations [P][H] (+ scales, sums) or f32 */
	uint64_t g, u, h;         /* [P][I] f32 */
	uint64_t hq, hd, hqs;     /* h quantized */
	uint64_t y;               /* [P][H] expert outputs */
	/* host staging of the pair activations and outputs: one page-locked region
	 * (mem/ registers it with every device), so copies are truly asynchronous */
	void *host;
	size_t host_bytes;
	int8_t *sx_q;
	float *sx_d, *sx_f, *sy;
	int32_t *sx_s;
	int32_t *sx_tok;                 /* [P] each row's token, for a device-side gather */
	uint64_t tok;                    /* the same on the device */
	struct coli_gpu_gemv_job *jobs;  /* runs of <= COLI_GPU_MAX_S pairs */
	struct coli_gpu_gemm_job *gjobs; /* longer runs (prefill): tensor-core GEMM */
	struct dev_run {
		int expert, pair0, n, row0;
		int stage;     /* staging slot, -1 for a resident expert */
		int tail;      /* its down part is still to copy (wave_compute) */
		uint64_t slab; /* resident slab or staging slot */
	} * runs;              /* this layer's experts on the device */
	int n_runs, P;
	/* the issue's first part (moe_dev.c issue_begin): its first wave's end
	 * and cap; early: that wave's copies went first; on_dev: the pairs'
	 * rows are on this device (the layer call's dev_rows); ahead: queued already by
	 * coli_moe_dev_copy_ahead, which returned ahead_rc */
	int r1, cap, early, on_dev, ahead, ahead_rc;
	int direct; /* this layer's gate and up read the tokens' rows in ml->dev_rows
	             * (one pair an expert: no gather) */
	/* streaming: RAM-tier slabs copied into VRAM staging slots, a small LRU
	 * cache tagged (layer, expert); copies run on the device's copy stream */
	uint64_t stage; /* n_stage slots of stage_bytes */
	int n_stage;
	size_t stage_bytes;
	struct dev_stage {
		int l, ex;     /* what the slot holds (or is receiving); l = -1: nothing */
		uint64_t used; /* st_clock of the last round that claimed it (this
		                  round's: not a victim) */
		uint64_t last; /* st_tick of its last copy or reader: the LRU order */
	} * st;
	uint64_t st_clock, st_tick;
	uint64_t streamed_bytes; /* this layer */
	double t_issue;          /* when this layer's issue began (s) */
};
/* ---- usage file (core/place/usage.c) ---- */
struct coli_usage {
	uint64_t model_hash;
	int n_layers, n_experts; /* expert layers x experts per layer */
	uint64_t tokens;
	uint64_t *counts; /* [n_layers][n_experts] */
};
int coli_usage_read(const char *path, struct coli_usage *u, char *err, size_t errlen);
int coli_usage_write(const char *path, const struct coli_usage *u, char *err, size_t errlen);

/* ---- expert tiers (core/place/tiers.c, core/place/tiers_open.c) ----
 * The MoE block's protocol for one layer, experts in ascending id:
 *
 *   k = coli_tiers_acquire(e, l, ex, uses, n, slabs)  pins ex[0..k) (k >= 1),
 *                      their misses submitted as ONE batch of demand reads;
 *                      slabs[j] = where expert ex[j]'s slab will be
 *   coli_lookahead(e, l, T)          (first chunk only) prefetch layer l+1
 *   rc = coli_tiers_wait(e)          every pinned slab is in RAM (or -errno);
 *                                    coli_tiers_ready(e): 1 if it would not wait
 *   ... compute ex[0..k) in order, accumulate ...
 *   coli_tiers_release(e)
 *   (repeat from ex + k while experts remain: a small budget is a slow one)
 *   coli_tiers_layer_end(e, l)
 */
struct coli_tiers;
int coli_tiers_open(struct coli_engine *e, char *err, size_t errlen);
void coli_tiers_close(struct coli_engine *e);
int coli_tiers_acquire(struct coli_engine *e, int l, const int *ex, const int *uses, int n,
                       const void **slabs);
int coli_tiers_wait(struct coli_engine *e);
int coli_tiers_ready(struct coli_engine *e);
void coli_tiers_release(struct coli_engine *e);
void coli_tiers_layer_end(struct coli_engine *e, int l);
/* Lookahead's entry: experts predicted for MoE layer l_next (ascending, mask
 * over n_experts); reads are issued for misses as prefetches. Returns the
 * reads issued. */
int coli_tiers_prefetch(struct coli_engine *e, int l_next, const unsigned char *mask);
/* Pin a slab already in RAM for a device copy (NULL if it is not); unpin when
 * the copy has landed. */
const void *coli_tiers_pin_ready(struct coli_engine *e, int l, int ex, int *slot);
void coli_tiers_unpin(struct coli_engine *e, int slot);
/* Count an access served from a device's staged copy as a RAM-tier hit. */
void coli_tiers_served_staged(struct coli_engine *e, int l, int ex, int uses);
/* Heat of expert ex of expert layer xl (accesses, usage file included), and
 * counting accesses served outside the RAM tier (VRAM-resident experts), so
 * the usage file sees every access wherever it was served. */
uint64_t coli_tiers_heat(struct coli_engine *e, int xl, int ex);
void coli_tiers_count(struct coli_engine *e, int l, int ex, int uses);
/* CUDA_RELEASE_HOST: expert ex of layer l now lives on a device; drop its
 * host copies (its RAM slot, the container mapping's and page cache's pages)
 * and count its next read from disk as a reload. host_back: it left the
 * device (VRAM swap), so a later read is an ordinary miss again. */
void coli_tiers_drop_host(struct coli_engine *e, int l, int ex);
void coli_tiers_host_back(struct coli_engine *e, int l, int ex);
int coli_tiers_readmit(struct coli_engine *e, int l, int ex);
/* Wait for every slab read queued and not pinned (prefetches, the usage
 * file's warm-up reads). */
void coli_tiers_settle_all(struct coli_engine *e);
/* Per-token bookkeeping (usage file every N tokens). */
void coli_tiers_tokens(struct coli_engine *e, int T);
void coli_tiers_stats(struct coli_engine *e, struct coli_engine_stats *st);

struct coli_engine {
	struct coli_opts opts;
	struct coli_model m;
	coli_tokenizer_t *tok; /* NULL when the container has none */
	coli_cpu_pool_t *pool;
	int ctx;                /* KV positions */
	int pos;                /* tokens in the cache */
	float *kcache, *vcache; /* [n_layers][ctx][n_kv*hd] */
	size_t kv_bytes;
	/* scratch for up to tmax tokens per forward call */
	int tmax;
	float *x;                     /* [tmax][hidden] residual stream */
	float *xn;                    /* [tmax][hidden] normed */
	float *q;                     /* [tmax][nh*hd] */
	float *kx, *vx;               /* [tmax][nkv*hd] */
	float *att;                   /* [tmax][nh*hd] attention output */
	float *scores;                /* [threads][ctx * 8]: attention's, a slot a thread */
	struct coli_attn_group *attn; /* [tmax * n_kv_heads]: a forward's attention groups */
	float *mlp;                   /* [tmax][hidden] MoE / MLP output */
	float *proj;                  /* [tmax][hidden] projection output */
	float *glogits;    /* [vocab]: the CPU path's logits for coli_engine_forward_argmax */
	float *rlog;       /* [tmax][n_experts] router logits */
	int *sel;          /* [tmax][top_k] routed experts (descending weight) */
	float *selw;       /* [tmax][top_k] their weights */
	uint32_t tail_seq; /* the dense device's host waits queued so far (core/forward/
	                    * layer_host.c's tail ahead) */
	float *g, *u;      /* [tmax][max_inter] */
	float *ey;         /* [tmax*top_k][hidden] per-pair expert outputs, then room
	                    * for the pair lists (one upload: core/forward/forward_dev.c) */
	/* the layer's (token, expert) pairs, sorted by expert then token */
	int n_pairs;
	int *pair_expert, *pair_token;
	float *pair_w;
	/* devices and the VRAM expert tier (core/moe/moe_dev.c) */
	struct coli_dev *devs[COLI_MAX_DEVS];
	int n_devs;
	unsigned char *la_idle; /* [n_layers] guesses in a row that read nothing */
	void *xfer;     /* page-locked region holding xn, rlog, ey, pair_token, pair_w, xids,
	                 * sel, selw, fast_sel, guess, xlogits */
	float *xlogits; /* [vocab]: a decode step's logits on their way from the dense
	                 * device (a download into the caller's pageable buffer went
	                 * through the driver's staging at a few GB/s) */
	int *fast_sel;  /* [n_layers][COLI_GPU_MAX_S][top_k]: routing of the layers planned on
	                 * the dense device this forward, for the host's counts */
	int *guess;     /* [tmax][top_k]: the lookahead's top-k for a layer call's guess_l,
	                 * computed on the dense device (core/forward/forward_dev.c) */
	int *xids;      /* [2 + tmax] position, then token ids, on their way to the dense device;
	                 * the last: the greedy id coming back (coli_engine_forward_argmax) */
	size_t xfer_bytes;
	struct coli_dev_slot vram[COLI_MAX_DEVS];
	signed char *where;        /* [n_layers][n_experts]: device index, -1 host */
	signed char *assign;       /* [n_experts] this layer: device computing it, -1 CPU */
	unsigned char *streamed;   /* [n_experts] this layer: 1 if copied to the device */
	int *cand, *cand_n;        /* [n_experts] scratch of plan_pairs, assign_experts, cpu_list */
	int *pair_first, *pair_n;  /* [n_experts] this layer: first pair, pair count */
	int *need, *redo;          /* [n_experts] experts the host reads; CPU recomputes */
	const void **slab_ptr;     /* [n_experts] slabs of the acquired chunk */
	const void **host_slab;    /* [n_experts] RAM slab of a streamed expert */
	double bw_cpu, bw_stream;  /* cost model: bytes/s of CPU rows and of streaming */
	double bw_cpu_pair;        /* prefill CPU rows: slab bytes x tokens per second */
	struct coli_dense_dev *dd; /* dense part on a device (core/forward/forward_dev.c), or NULL;
	                            * with several (layer split), the one of the layer
	                            * running, else the first */
	struct coli_dense_dev *dds[COLI_MAX_DEVS]; /* each device's range of layers */
	int n_dd;
	signed char *dd_of; /* [n_layers] index in dds of the layer's dense device */
	struct coli_dev *dd_dev[COLI_MAX_DEVS]; /* dds[i]'s device, for the parts that do not
	                                         * see struct coli_dense_dev (place, moe) */
	/* the VRAM adaptation moved expert ex of layer l to device address addr
	 * (0: out of VRAM): core/place/vram.c calls the hook core/engine.c
	 * installs at open (the dense device's table of what it may plan) */
	int (*slab_moved)(struct coli_engine *e, int l, int ex, uint64_t addr);
	uint64_t adapt_at;      /* token count of the next VRAM adaptation round */
	int *hist;              /* [ctx] token ids in the KV cache, to rebuild it on the
	                         * CPU if the dense device fails */
	uint64_t *dev_slab;     /* [n_layers][n_experts]: device address of the slab */
	struct coli_actbuf *ax; /* [tmax] over hidden-sized inputs */
	struct coli_actbuf *ah; /* [tmax] over inter / attention-sized inputs */
	/* CPU rows of a MoE layer, batched over its experts (core/moe/moe.c cpu_experts) */
	float *pg, *pu;                 /* [tmax * top_k][moe_inter] gate, up (then h) */
	struct coli_actbuf *ph;         /* [tmax * top_k] h per pair, quantized */
	struct coli_act *hag;           /* [tmax * top_k] views of ph for the down GEMM */
	struct coli_expert_view *xview; /* [n_experts] */
	struct coli_gemm_job *xjobs;    /* [3 * n_experts]: gate, up, then down */
	int *xpairs, n_xpairs;          /* pairs whose SwiGLU the pool computes */
	struct coli_act *ag;            /* [tmax] gathered activations (struct copies) */
	float *inv_freq;                /* [head_dim/2] rope frequencies */
	FILE *trace;                    /* ROUTE_TRACE */
	struct coli_engine_stats est;   /* cumulative, see coli_engine_stats */
	size_t scratch_bytes;           /* what scratch_alloc took, for the budget */
	int numa_node;                  /* resolved --numa-bind */
	char numa_why[160];             /* what it resolved to and why (coli_engine_numa) */
	struct coli_tiers *tiers;       /* expert slots, streamer, heat */
	char errmsg[512];               /* why the last forward failed */
};

/* Monotonic seconds, for the engine's timers. */
static inline double coli_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* dense_dev.c: the dense part on the devices (uploaded once at open): all of
 * it on the first, or (--split layers, several devices) each device a
 * contiguous range of layers with their KV cache, the embeddings on the
 * first, the output norm and lm_head on the last. */
int coli_dense_dev_open(struct coli_engine *e, char *err, size_t errlen);
void coli_dense_dev_close(struct coli_engine *e);
/* core/place/vram.c, from e->dd_dev (which dense_dev.c fills), so that the
 * placement, the scheduler and the forward may all ask: the device index (in
 * e->devs) whose dense part holds layer l, or -1; whether dev holds some of
 * the dense part (a range of layers, or all of it). */
int coli_dense_dev_of(const struct coli_engine *e, int l);
int coli_dense_dev_holds(const struct coli_engine *e, const struct coli_dev *dev);
/* next != NULL (logits NULL): the greedy id after the last token, computed on
 * the device; only the index is downloaded */
int coli_forward_dev(struct coli_engine *e, const int *ids, int T, float *logits, int all_logits,
                     int *next);
/* After expert placement: the MoE layers the dense device can plan itself. */
int coli_dense_dev_plan_init(struct coli_engine *e);
/* The VRAM adaptation moved expert ex of layer l to device address addr (0:
 * out): e->slab_moved, installed by core/engine.c at open. */
int coli_dense_dev_slab_set(struct coli_engine *e, int l, int ex, uint64_t addr);

/* core/text/sampler.c: coli_sampler_pick with its per-block passes (block maxima,
 * weight sums) spread over the engine's pool; the same ids as without. */
int coli_sampler_pick_pool(struct coli_sampler *s, const float *logits, int vocab,
                           coli_cpu_pool_t *pool);

/* forward.c */
int coli_forward(struct coli_engine *e, const int *ids, int T, float *logits, int all_logits);
/* vram.c: place experts in VRAM at open (and free them at close). */
int coli_moe_dev_place(struct coli_engine *e, char *err, size_t errlen);
void coli_moe_dev_release(struct coli_engine *e);
/* vram.c: left free on a device when no --vram-gb is given */
#define COLI_VRAM_RESERVE_BYTES ((size_t)512 << 20)
/* vram.c: a device's working buffers for tmax*top_k pairs and its staging
 * slots (with a first measure of the streaming bandwidth), freed together
 * (core/moe/moe_dev.c issues and takes with them). */
size_t coli_moe_dev_slot_bytes(const struct coli_model_config *c, int tmax);
int coli_moe_dev_slot_alloc(struct coli_engine *e, struct coli_dev_slot *v);
int coli_moe_dev_stage_alloc(struct coli_engine *e, struct coli_dev_slot *v);
void coli_moe_dev_slot_free(struct coli_dev_slot *v);
/* vram.c: close device d of several and move the ones after it up. */
void coli_vram_device_drop(struct coli_engine *e, int d);
/* vram.c, between tokens: swap a cold resident expert for a hotter one, per
 * layer, with hysteresis (call after each forward). */
void coli_moe_dev_adapt(struct coli_engine *e);
/* core/model/act.c: prepare actbuf from x[n] (fp32 copy + quantized form). */
void coli_actbuf_set(struct coli_actbuf *a, const float *x);
/* ab[t] over rows t of x [T][n], t < T (a prefill chunk's rows over the pool). */
void coli_actbufs_set(struct coli_engine *e, struct coli_actbuf *ab, const float *x, int T, int n);

#endif
