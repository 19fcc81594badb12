/*
 * core/forward/scratch.c — the forward's working buffers (core/forward/
 * scratch.h), sized for tmax tokens a call; every byte is counted in
 * s->bytes, which the RAM tier's budget takes off (core/place/tiers_open.c).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_internal.h"
#include "core/forward/scratch.h"
#include "mem/mem.h"
#include "core/dev/dev.h"

static int max3(int a, int b, int c)
{
	int m = a > b ? a : b;

	return m > c ? m : c;
}

#define ALLOC(p, n)                                                                                \
	((p) = calloc((size_t)(n), sizeof(*(p))), s->bytes += (size_t)(n) * sizeof(*(p)),          \
	 (p) ? 0 : -ENOMEM)

/* What crosses to or from a device every layer (normed input, router
 * logits, per-pair outputs and lists) lives in one region that mem/
 * registers with the devices: an async copy from pageable memory first
 * waits for the device's stream to drain, and a small upload from
 * registered memory is pulled by a kernel instead of queuing behind the
 * copy engine's slab copies (ptx/gpu_mem.c). */
static int xfer_alloc(struct coli_scratch *s, const struct coli_model_config *c, int n_seq)
{
	int T = s->tmax, H = c->hidden;
	size_t E1 = c->n_experts > 1 ? c->n_experts : 1, P = (size_t)T * c->top_k;
	size_t fast = (size_t)c->n_layers * COLI_GPU_STEP_T * c->top_k;
	size_t sz[] = {(size_t)T * H * 4,
	               (size_t)T * E1 * 4,
	               P * (H + 2) * 4,
	               P * 4,
	               P * 4,
	               (size_t)(T + 2 + COLI_GPU_ROWS * T + T) * 4,
	               P * 4,
	               P * 4,
	               fast * 4 + 4,
	               P * 4,
	               (size_t)(n_seq > 1 ? n_seq : 1) * c->vocab * 4};
	void **dst[] = {(void **)&s->xn,         (void **)&s->rlog,   (void **)&s->ey,
	                (void **)&s->pair_token, (void **)&s->pair_w, (void **)&s->xids,
	                (void **)&s->sel,        (void **)&s->selw,   (void **)&s->fast_sel,
	                (void **)&s->guess,      (void **)&s->xlogits};

	s->xfer = coli_mem_alloc_buffers(sz, dst, 11, COLI_MEM_NODE_ANY, &s->xfer_bytes);
	if (!s->xfer)
		return -ENOMEM;
	s->bytes += s->xfer_bytes;
	return 0;
}

/* Floats a token of MLA's rows takes in s->mla: q_a's output [q_lora],
 * kv_a's [kv_lora + rope], the query rows [nh][kv_lora + rope], the latent
 * outputs [nh][kv_lora]; then s->mla_rows (gathered per-head inputs) of
 * mla_row floats each. */
static size_t mla_width(const struct coli_model_config *c)
{
	size_t kr = (size_t)c->kv_lora + c->rope_dim, nh = c->n_heads;

	return c->q_lora + kr + nh * kr + nh * c->kv_lora;
}

static int mla_row(const struct coli_model_config *c)
{
	return c->qk_nope > c->kv_lora ? c->qk_nope : c->kv_lora;
}

/* MLA's per-head rows: max(tmax, n_heads) gathered inputs and their
 * activations, so that a decode step's heads go in one batch. */
static int mla_alloc(struct coli_scratch *s, const struct coli_model_config *c, int quant)
{
	int rc;

	s->mla_cap = s->tmax > c->n_heads ? s->tmax : c->n_heads;
	rc = ALLOC(s->mla, (size_t)s->tmax * mla_width(c) + (size_t)s->mla_cap * mla_row(c));
	rc = rc ? rc : ALLOC(s->mla_acts, s->mla_cap);
	if (!rc)
		s->mla_rows = s->mla + (size_t)s->tmax * mla_width(c);
	rc = rc ? rc : coli_actbufs_alloc(&s->mla_ab, s->mla_cap, mla_row(c), quant);
	if (quant)
		s->bytes += (size_t)s->mla_cap * mla_row(c) * 2;
	return rc;
}

/* The widest input the attention and MLP matrices other than the hidden-wide
 * ones take (s->ah): nh*hd, the MLPs' inter, MLA's q_lora, per-head nope
 * and kv_lora and o's nh*v_head. */
static int ah_width(const struct coli_model_config *c, int inter)
{
	int w = c->n_heads * c->head_dim > inter ? c->n_heads * c->head_dim : inter;

	if (c->kv_lora)
		w = max3(w, max3(c->q_lora, c->kv_lora, c->qk_nope), c->n_heads * c->v_head);
	return w;
}

/* The dense layers' rows [tmax][...] and the pairs' expert ids. */
static int layer_alloc(struct coli_scratch *s, const struct coli_model_config *c, int inter,
                       int quant, int ctx, int threads)
{
	int T = s->tmax, H = c->hidden, qd = c->n_heads * c->head_dim;
	int kvd = c->n_kv_heads * c->head_dim, aw = ah_width(c, inter);
	/* a decode token's eight-head units (MLA: one group of every head) */
	int units = c->kv_lora ? (c->n_heads + 7) / 8
	                       : c->n_kv_heads * ((c->n_heads / c->n_kv_heads + 7) / 8);
	int rc;

	rc = ALLOC(s->x, (size_t)T * H);
	rc = rc ? rc : ALLOC(s->q, (size_t)T * qd);
	rc = rc ? rc : ALLOC(s->kx, (size_t)T * kvd);
	rc = rc ? rc : ALLOC(s->vx, (size_t)T * kvd);
	rc = rc ? rc : ALLOC(s->att, (size_t)T * aw); /* aw >= qd, and MLA's nh*v_head */
	/* attention's: the scores, and the output blocks' sums where a decode
	 * token's groups split (fewer groups than threads: coli_attention_groups_mt) */
	const int groups = c->kv_lora ? 1 : c->n_kv_heads, split = groups < threads;

	s->slot = split ? coli_attn_slot_floats(ctx, c->kv_lora ? c->kv_lora : c->head_dim)
	                : (size_t)ctx * 8;
	/* a slot a thread, a decode token's group (coli_attention_groups_mt
	 * walks their rows together, each group's scores in its own slot), or
	 * its unit where they split */
	s->n_slots = coli_attn_n_slots(threads, groups, units);
	rc = rc ? rc : ALLOC(s->scores, (size_t)s->n_slots * s->slot);
	rc = rc ? rc : ALLOC(s->attn, (size_t)T * c->n_kv_heads);
	rc = rc ? rc : ALLOC(s->mlp, (size_t)T * H);
	rc = rc ? rc : ALLOC(s->proj, (size_t)T * H);
	rc = rc ? rc : ALLOC(s->glogits, c->vocab);
	rc = rc ? rc : ALLOC(s->g, (size_t)T * inter);
	rc = rc ? rc : ALLOC(s->u, (size_t)T * inter);
	rc = rc ? rc : ALLOC(s->pair_expert, (size_t)T * c->top_k);
	rc = rc ? rc : ALLOC(s->ag, (size_t)T * c->top_k);
	rc = rc ? rc : ALLOC(s->inv_freq, c->head_dim / 2);
	if (c->kv_lora) /* MLA's rows (core/forward/mla.c) */
		rc = rc ? rc : mla_alloc(s, c, quant);
	rc = rc ? rc : coli_actbufs_alloc(&s->ax, T, H, quant);
	rc = rc ? rc : coli_actbufs_alloc(&s->ah, T, aw, quant);
	return rc;
}
#undef ALLOC

int coli_scratch_alloc(struct coli_scratch *s, const struct coli_model_config *c, int tmax, int ctx,
                       int n_seq, int threads)
{
	int H = c->hidden;
	int inter = max3(c->moe_inter, c->shared_inter, c->dense_inter);
	int quant = coli_dtype_is_quant(c->quant);
	int rc;

	s->tmax = tmax;
	rc = xfer_alloc(s, c, n_seq);
	rc = rc ? rc : layer_alloc(s, c, inter, quant, ctx, threads);
	if (quant) /* int8 values, fp32 scales and int32 sums per 32-block */
		s->bytes += (size_t)tmax * (H + ah_width(c, inter)) * 2;
	if (rc)
		return rc;
	/* as transformers computes it (core/model/rope.c): inv_freq = 1 /
	 * theta^(2i/hd), in fp32, over the rotated dims only (rope_dim, head_dim
	 * unless partial); YaRN's blend under rope_factor */
	coli_config_rope(c, s->inv_freq, &s->rope_attn, &s->attn_scale);
	return 0;
}

void coli_scratch_free(struct coli_scratch *s)
{
	free(s->x), free(s->q), free(s->kx), free(s->vx), free(s->att);
	free(s->scores), free(s->attn), free(s->mlp), free(s->proj), free(s->glogits);
	free(s->g), free(s->u), free(s->ag);
	free(s->inv_freq), free(s->mla), free(s->mla_acts);
	coli_actbufs_free(s->mla_ab, s->mla_cap);
	free(s->pair_expert);
	coli_mem_free_buffers(s->xfer, s->xfer_bytes);
	coli_actbufs_free(s->ax, s->tmax);
	coli_actbufs_free(s->ah, s->tmax);
	memset(s, 0, sizeof(*s));
}
