/*
 * core/core_internal.h — the engine's private structures: the bound model
 * (tensor views into the container) and struct coli_engine, made of parts
 * with one owner each, every part's struct in its owner's header:
 *
 *   kv     struct coli_kv         core/forward/kv.h       the host KV cache
 *   s      struct coli_scratch    core/forward/scratch.h  the forward's buffers
 *   moe    struct coli_moe_sched  core/moe/sched.h        the scheduler's lists
 *   vram   struct coli_vram       core/place/vram.h       devices, VRAM tier
 *   dense  struct coli_dense      core/forward/dense.h    the dense part's devices
 *   tiers  struct coli_tiers      core/place/tiers_internal.h  the RAM tier
 *
 * core/engine.c allocates each part at open through its owner's function and
 * frees it, once, at close; the options, model, tokenizer, pool, trace,
 * statistics and error message stay at the top. Between open and close the
 * parts fill one another's buffers through the engine (the MoE part writes
 * the pairs and their outputs into the forward's scratch; core/place/vram.c
 * takes the cost model's first streaming measure) while calls go one way
 * (tools/check_layers.py). What one MoE layer call means is a value, not a
 * field (struct coli_moe_layer, core/moe/moe.h).
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
#include "core/forward/dense.h"
#include "core/forward/kv.h"
#include "core/forward/scratch.h"
#include "core/moe/sched.h"
#include "core/place/vram.h"
#include "cpu/cpu.h"
#include "io/io.h"

struct coli_layer {
	const float *attn_norm; /* [hidden] */
	const float *ffn_norm;  /* [hidden] */
	struct coli_mat q, k, v, o;
	const float *q_bias, *k_bias, *v_bias; /* [nh*hd], [nkv*hd], [nkv*hd] or NULL */
	const float *q_norm, *k_norm;          /* see cfg.qk_norm, or NULL */
	const float *o_bias;                   /* [hidden] (cfg.attn_o_bias) or NULL */
	const float *sinks;                    /* [nh] (cfg.attn_sinks) or NULL */
	int window;                            /* keys a query sees (sliding layers), 0: all */
	/* MLA (cfg.kv_lora): q is attn_q_b [nh*hd, q_lora] (or attn_q [nh*hd,
	 * hidden] without q_lora), k and v unbound, o [hidden, nh*v_head] */
	struct coli_mat q_a;    /* [q_lora, hidden] (rows 0 without q_lora) */
	struct coli_mat kv_a;   /* [kv_lora + rope_dim, hidden] */
	struct coli_mat k_b;    /* [nh*kv_lora, qk_nope]: W_UK^T, a head a block */
	struct coli_mat v_b;    /* [nh*v_head, kv_lora]: W_UV, a head a block */
	const float *q_a_norm;  /* [q_lora] or NULL */
	const float *kv_a_norm; /* [kv_lora] */
	int moe;
	/* MoE layers */
	struct coli_mat router;   /* [n_experts, hidden] f32 */
	const float *router_bias; /* [n_experts] (cfg.router_bias) or NULL */
	/* [n_experts][moe_inter] x2, [n_experts][hidden] (cfg.expert_bias) or NULL */
	const float *exp_gate_bias, *exp_up_bias, *exp_down_bias;
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
/* Whether the devices' kernels can run the model's dense matrices (experts
 * 0) or its routed experts (experts 1; 2: on devices that have gpt-oss's
 * activation, COLI_DEV_CAP_SWIGLU_OAI): every GEMV's columns a multiple of
 * 32, its dtype none of GGUF's block types (q4_k ...: CPU kernels only so
 * far), no op the devices lack. 0, or -ENOTSUP with why naming the first
 * that is not (core/engine.c then keeps the dense part on the CPU, or, for
 * the experts, the model). */
int coli_model_dev_check(const struct coli_model *m, int experts, char *why, size_t len);
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
/* MemAvailable of /proc/meminfo in bytes (0: unknown). */
uint64_t coli_tiers_mem_available(void);
/* The KV cache's positions when --ctx is 0 (core/ctx.c): the model's trained
 * length, capped by what the memory budget gives the cache's n_seq slots
 * (--parallel; 0 as 1); why says which
 * ("the model's trained length" or the cap). */
int coli_engine_ctx_default(const struct coli_engine *e, int n_seq, char *why, size_t len);
/* --parallel 0's slots for a cache of ctx positions (core/ctx.c): what the
 * host budget holds, at most opts.parallel_auto; 1 where the dense part may
 * go to a device. */
int coli_engine_parallel_default(const struct coli_engine *e, int ctx);
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
/* Whether every expert of MoE layer l holds a RAM slot (landed or landing):
 * a prefetch for it would issue nothing, whatever its mask. */
int coli_tiers_layer_held(struct coli_engine *e, int l);
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

/* Speculative decoding's state over one generation (core/spec.c). */
#define COLI_SPEC_KMAX 7 /* k + 1 = 8 tokens a verification: the small-batch kernels */
#define COLI_SPEC_NGRAM_MIN 2 /* an n-gram draft's shortest match (core/spec.c) */
#define COLI_SPEC_NGRAM_MIN_AUTO 1 /* ... under --spec auto, whose cost model weighs it */
#define COLI_SPEC_LMAX      64 /* ... and the most it counts (evidence enough) */
#define COLI_SPEC_BUCKETS        9  /* match lengths 1..7, 8..15, 16.. (core/spec.c) */
struct coli_spec {
	int on;
	int k;                         /* the next draft's length */
	int misses, pause;             /* first-token rejections in a row; steps left paused */
	int drafted, accepted, rounds; /* totals: draft tokens, accepted ones, verifications */
	double step_s, yield_s;        /* running means: a one-token step's seconds, and a
	                                * verification's seconds per token it yields */
	int n_step, n_yield;           /* samples in each mean (capped: a running mean) */
	int slow;                      /* pauses for verifications measured slower than steps */
	int guard;                     /* --spec auto: the measured cost decides */
	struct coli_engine *model;     /* drafts from this model's greedy steps, else n-grams */
	int model_vocab;               /* the verified model's vocabulary (a draft ends past it) */
	double draft_s;                /* the last draft's seconds (a draft model's steps) */
	/* --spec auto's cost model for n-gram drafts (core/spec.c) */
	/* decayed counts [hot][match-length bucket][draft token j]: accepted, scored
	 * (the tokens before it accepted); hot: the draft scored last was right
	 * throughout (a loop the text is in) */
	float acc[2][COLI_SPEC_BUCKETS][COLI_SPEC_KMAX][2];
	double extra_s;                /* running mean: a verification's seconds a draft token
	                                * above a plain step's */
	int n_extra;
	int idle;                      /* drafts declined since the last verification */
	int hot;                       /* the last draft scored was right throughout */
	struct coli_spec_cand {
		int n0, m, j, b, hot; /* drafted after hist[n0 - 1]: m tokens, j scored, its
		                       * counts' bucket and hot */
		int ids[COLI_SPEC_KMAX];
	} cand[COLI_SPEC_KMAX + 1]; /* the last drafts (m 0: a free slot), scored against
	                             * the history as it grows */
};
/* From e's options and draft model: on, draft at all (coli_gen_spec_on);
 * guard, let the measured cost choose the draft length (--spec auto;
 * --spec ngram drafts on its schedule whatever it costs, deterministic for
 * tests); model, e's draft. */
void coli_spec_init(struct coli_spec *sp, const struct coli_engine *e);
/* Up to kmax draft tokens (k on the schedule) following the history hist[n] into draft[];
 * how many to verify (0: no match, paused, off, or under --spec auto none
 * that pays; draft[] may hold more). With sp->model (coli_generate
 * sets it from the engine's draft), its greedy continuation of hist; a
 * failing draft model turns drafting off (the plain steps go on). */
int coli_spec_draft(struct coli_spec *sp, const int *hist, int n, int kmax, int *draft);
/* A verification's outcome: `accepted` of `drafted` drafts matched, in
 * `seconds` (the forward and its argmaxes). */
void coli_spec_result(struct coli_spec *sp, int drafted, int accepted, double seconds);
/* A plain one-token step's seconds (the cost verifications must beat). */
void coli_spec_step(struct coli_spec *sp, double seconds);
/* --spec auto's measured cost of a draft token in plain steps (0: none yet,
 * or not the cost model's drafts). */
double coli_spec_cost(const struct coli_spec *sp);

struct coli_engine {
	struct coli_opts opts;
	struct coli_model m;
	coli_tokenizer_t *tok; /* NULL when the container has none */
	coli_cpu_pool_t *pool;
	struct coli_kv kv;            /* the KV cache (core/forward/kv.h) */
	struct coli_scratch s;        /* the forward's buffers (core/forward/scratch.h) */
	struct coli_moe_sched moe;    /* the MoE scheduler's (core/moe/sched.h) */
	struct coli_vram vram;        /* devices, VRAM expert tier (core/place/vram.h) */
	struct coli_dense dense;      /* the dense part's devices (core/forward/dense.h) */
	struct coli_tiers *tiers;     /* expert slots, streamer, heat (core/place) */
	FILE *trace;                  /* ROUTE_TRACE */
	struct coli_engine_stats est; /* cumulative, see coli_engine_stats */
	int numa_node;                /* resolved --numa-bind */
	char numa_why[160];           /* what it resolved to and why (coli_engine_numa) */
	char errmsg[512];             /* why the last forward failed */
	struct coli_vocab_trie *trie; /* the tokenizer's, at the first constrained request */
	struct coli_engine *draft;    /* the draft model (coli_engine_set_draft), not owned */
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
/* core/place/vram.c, from e->dense.dd_dev (which dense_dev.c fills), so that the
 * placement, the scheduler and the forward may all ask: the device index (in
 * e->vram.devs) whose dense part holds layer l, or -1; whether dev holds some of
 * the dense part (a range of layers, or all of it). */
int coli_dense_dev_of(const struct coli_engine *e, int l);
int coli_dense_dev_holds(const struct coli_engine *e, const struct coli_dev *dev);
/* next != NULL (logits unused): the greedy id after the last token (all_logits:
 * after each token, next[T]), computed on the device; only the indices are
 * downloaded */
int coli_forward_dev(struct coli_engine *e, const int *ids, int T, float *logits, int all_logits,
                     int *next);
/* After expert placement: the MoE layers the dense device can plan itself. */
int coli_dense_dev_plan_init(struct coli_engine *e);
/* The VRAM adaptation moved expert ex of layer l to device address addr (0:
 * out): e->vram.slab_moved, installed by core/engine.c at open. */
int coli_dense_dev_slab_set(struct coli_engine *e, int l, int ex, uint64_t addr);

/* core/text/sampler.c: coli_sampler_pick with its per-block passes (block maxima,
 * weight sums) spread over the engine's pool; the same ids as without. */
int coli_sampler_pick_pool(struct coli_sampler *s, const float *logits, int vocab,
                           coli_cpu_pool_t *pool);
/* core/text/sampler_proc.c: the logits the draw sees (logits itself when no
 * step is on, else s->work; NULL: out of memory), and s->out for the token
 * id drawn (its raw logprobs when s->logprobs >= 0). */
const float *coli_sampler_process(struct coli_sampler *s, const float *logits, int vocab);
void coli_sampler_report(struct coli_sampler *s, const float *logits, int vocab, int id,
                         coli_cpu_pool_t *pool);
/* core/text/sampler.c: log(sum of exp(logits[i])), max + log(sum of exp(l -
 * max)), the exponentials coli_exp_scaled's, block sums in double over pool
 * (NULL: this thread), added in block order: the same bits either way. */
double coli_sampler_lse(const float *logits, int vocab, coli_cpu_pool_t *pool);

/* core/generate.c, shared with core/seq.c's stepped sequences: the model's
 * EOS ids, the sampler's end ids (constrained), and s begun over prompt[n]
 * (constrained: the engine's trie, the model's EOS among its end ids). */
int coli_gen_is_eos(const struct coli_model_config *c, int id);
int coli_gen_is_end(const struct coli_sampler *s, int id);
int coli_gen_sampler_begin(coli_engine_t *e, struct coli_sampler *s, const int *prompt, int n);
/* --spec's drafts for this engine's generations (any sampler: a draft is
 * kept while the sampler draws its tokens from the verification's rows);
 * the token picked from logits as both loops pick it (greedy: the argmax,
 * ties to the lowest id, with no logprobs; else the sampler's draw). */
int coli_gen_spec_on(const coli_engine_t *e);
int coli_gen_pick(coli_engine_t *e, struct coli_sampler *s, int greedy, const float *logits);

/* forward.c: a call's runs as rows (run r: rows [r0, r0 + n) of the
 * scratch, positions pos0.. of its slot), built from a struct coli_batch. */
struct coli_fwd_run {
	int slot, r0, n, pos0;
};
struct coli_fwd {
	int T, n_runs;                  /* rows, runs */
	const struct coli_fwd_run *run; /* [n_runs] */
	const int *pos;                 /* [T] each row's position in its slot */
};
/* b's runs as rows of the call (f->run, f->pos: [tmax]), checked: -EINVAL
 * (a slot out of range or twice, n < 1, an id out of the vocabulary, more
 * rows than tmax), -E2BIG (past a slot's context); then the runs' blocks
 * (coli_forward_grow: -ENOSPC, nothing changed). */
int coli_forward_rows(struct coli_engine *e, const struct coli_batch *b, struct coli_fwd *f,
                      struct coli_fwd_run *run, int *pos);
/* The CPU forward of b's runs (coli_engine_step's contract; logits: the rows
 * asked, in run order); each run's slot advances and records its ids. */
int coli_forward_batch(struct coli_engine *e, const struct coli_batch *b, float *logits);
/* The same with the dense part on the devices (core/forward/forward_dev.c),
 * several slots open (coli_forward_dev: one); with next, the rows' greedy ids
 * (argmaxes on the device) instead of their logits. */
int coli_forward_dev_batch(struct coli_engine *e, const struct coli_batch *b, float *logits,
                           int *next);
/* The n slots slot[] ready to write up to upto[] (coli_kv_grow), shared
 * blocks they write over copied first on the host or the dense devices
 * (core/forward/forward.c). */
int coli_forward_grow(struct coli_engine *e, const int *slot, const int *upto, int n);
/* core/engine.c: a dense device failed with why: the dense part moves to the
 * devices left or to the CPU, every slot's cache rebuilt from its history. */
int coli_engine_dense_moved(struct coli_engine *e, int why);
/* core/engine.c: next[j] = the greedy id of row j of logits [n][vocab] (coli_argmax). */
void coli_argmax_rows(const struct coli_engine *e, const float *logits, int n, int *next);
/* The one-run case on slot 0. */
int coli_forward(struct coli_engine *e, const int *ids, int T, float *logits, int all_logits);
/* MLA (core/forward/mla.c): layer l's attention for f's rows, the residual
 * stream e->s.x updated and each run's latent rows appended to its slot;
 * and the attention proper: qrow [T][nh][kl + r] against the cache's rows
 * [pos0 + T][kl + r] (c_kv || k_pe; cache: their typed view, coli_kv_group_rows)
 * into lat [T][nh][kl]; g: [T] groups, scores: n_slots slots of `slot` floats
 * (coli_attention_groups_mt's). */
void coli_forward_mla(struct coli_engine *e, int l, const struct coli_fwd *f);
int coli_mla_attend(coli_cpu_pool_t *pool, const float *qrow, const struct coli_attn_group *cache,
                    int T, int nh, int kl, int r, int pos0, float scale, float *lat,
                    struct coli_attn_group *g, float *scores, size_t slot, int n_slots);
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
/* vram.c: where device slot v keeps gpt-oss's expert biases of MoE layer l
 * (cfg.expert_bias): part COLI_XBIAS_GATE and _UP [E][I], _DOWN [E][H] f32. */
enum { COLI_XBIAS_GATE, COLI_XBIAS_UP, COLI_XBIAS_DOWN };
uint64_t coli_moe_dev_xbias(const struct coli_engine *e, const struct coli_dev_slot *v, int l,
                            int part);
/* vram.c: close device d of several and move the ones after it up. */
void coli_vram_device_drop(struct coli_engine *e, int d);
/* vram.c, between tokens: swap a cold resident expert for a hotter one, per
 * layer, with hysteresis (call after each forward). */
void coli_moe_dev_adapt(struct coli_engine *e);
/* core/model/act.c: count row sets of n values (quant: with their int8 form),
 * and their release (what alloc made when it failed, too). */
int coli_actbufs_alloc(struct coli_actbuf **out, int count, int n, int quant);
void coli_actbufs_free(struct coli_actbuf *a, int count);
/* core/model/act.c: a routed expert's activation over one pair's rows,
 * g and u [moe_inter] of expert ex of layer L: h = silu(g) * u, or (cfg.ffn_act
 * SWIGLU_OAI) gate and up biased in place (cfg.expert_bias) and clamped
 * (coli_swiglu_oai). h may be g. */
void coli_act_ffn(const struct coli_model_config *c, const struct coli_layer *L, int ex, float *g,
                  float *u, float *h);
/* core/model/act.c: prepare actbuf from x[n] (fp32 copy + quantized form). */
void coli_actbuf_set(struct coli_actbuf *a, const float *x);
/* fn(arg, t0, t1) over shares of the rows [0, T): a prefill chunk's across
 * the pool, a decode step's (T < 16) on the caller. For work a row at a
 * time, whose bits do not depend on the share (norms, residual adds, RoPE). */
void coli_rows_mt(struct coli_engine *e, int T, void (*fn)(void *arg, int t0, int t1), void *arg);
/* out[t] = rmsnorm(x[t]) with weight w, and x[t] += y[t], for the T rows of n
 * values (coli_rows_mt: a prefill chunk's across the pool). */
void coli_rows_rmsnorm(struct coli_engine *e, const float *x, const float *w, float *out, int T,
                       int n, float eps);
void coli_rows_add(struct coli_engine *e, float *x, const float *y, int T, int n);
/* ab[t] over rows t of x [T][n], t < T (a prefill chunk's rows over the pool). */
void coli_actbufs_set(struct coli_engine *e, struct coli_actbuf *ab, const float *x, int T, int n);

#endif
