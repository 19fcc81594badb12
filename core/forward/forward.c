/*
 * core/forward/forward.c — the CPU forward pass over a batch of runs (struct
 * coli_batch: each run n consecutive tokens of one sequence slot from its
 * position; prefill chunks and decode tokens mixed), T rows in all:
 * embeddings, attention with RoPE over each run's slot of the KV cache, the
 * MLP/MoE block of each layer, final norm and lm_head. Every matrix and the
 * MoE block see all T rows (a weight row, a RAM expert, is read once per
 * call); RoPE, the cache append and the attention groups go per run, at its
 * slot and positions. A row's bits never depend on the other rows (the CPU
 * kernels' canonical reductions): a sequence gets the same tokens alone or
 * batched. Prefill is one run of the prompt's chunk; decode one row a run;
 * coli_forward is the one-run case on slot 0.
 *
 * Buffers (engine scratch, see core_internal.h), t = row in the call:
 *   x    [T][hidden]       residual stream, fp32
 *   xn   [T][hidden]       normed input of attention / MLP
 *   q    [T][nh*hd]        queries; kx, vx [T][nkv*hd] keys and values
 *   kcache, vcache [slot][layer][ctx] rows of [nkv*hd] in --kv-type (core/forward/kv.h)
 *   att  [T][nh*hd]        attention output (input of attn_o)
 * Attention follows transformers' eager path: scores scaled by 1/sqrt(hd),
 * causal, softmax in fp32, RoPE in the rotate-half convention. gpt-oss's
 * layers add a sink logit per head to the softmax (cfg.attn_sinks) and, on
 * sliding layers, see only the last `window` keys: the same kernel over the
 * window's rows (the KV cache keeps every position on every layer: a
 * window-sized ring for sliding layers is later work). An MLA model's
 * layers (cfg.kv_lora: DeepSeek-V3) run core/forward/mla.c's attention instead,
 * over its latent cache rows.
 */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "core/core_internal.h"
#include "core/forward/dense_dev.h"
#include "core/moe/moe.h"

/* y[T][rows] = W . act[t] for the T prepared activations. */
static void matmul(struct coli_engine *e, const struct coli_mat *w, struct coli_actbuf *ab, int T,
                   float *y)
{
	for (int t = 0; t < T; t++)
		e->s.ag[t] = ab[t].act;
	coli_gemm_mt(e->pool, w, e->s.ag, T, y, w->rows);
}

static void add_bias(float *y, const float *b, int T, int n)
{
	if (!b)
		return;
	for (int t = 0; t < T; t++)
		for (int i = 0; i < n; i++)
			y[(size_t)t * n + i] += b[i];
}

/* RMSNorm of each head (Qwen3: weight [hd]) or of the whole row (OLMoE). */
static void qk_norm(const struct coli_model_config *c, float *v, const float *w, int T, int nh)
{
	int hd = c->head_dim;

	for (int t = 0; t < T; t++) {
		float *row = v + (size_t)t * nh * hd;

		if (c->qk_norm == 1)
			for (int h = 0; h < nh; h++)
				coli_rmsnorm(row + h * hd, w, row + h * hd, hd, c->norm_eps);
		else
			coli_rmsnorm(row, w, row, nh * hd, c->norm_eps);
	}
}

/* YaRN's cos/sin factor (s->rope_attn, gpt-oss) on the rotated dims of
 * x[n][nh][hd]: their first rd (coli_rope_part's). */
static void rope_attn(float *x, int n, int hd, int rd, float f)
{
	if (f == 1.0f)
		return;
	for (int i = 0; i < n; i++)
		for (int d = 0; d < rd; d++)
			x[(size_t)i * hd + d] *= f;
}

/* A prefill chunk's q, k and v rows after their projections, a share of
 * rows a task (coli_rows_mt): the biases, the QK norm, RoPE at each row's
 * position, and the keys and values appended to the row's slot (rounded to
 * the cache's type). Each row's steps are the same whatever the share. */
struct qkv_rows {
	struct coli_engine *e;
	const struct coli_layer *L;
	const struct coli_fwd *f;
	int l;
};

static void qkv_rows(void *arg, int t0, int t1)
{
	const struct qkv_rows *a = arg;
	struct coli_engine *e = a->e;
	const struct coli_model_config *c = &e->m.cfg;
	const struct coli_layer *L = a->L;
	int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim, hd = c->head_dim;
	float *q = e->s.q + (size_t)t0 * qd, *k = e->s.kx + (size_t)t0 * kvd,
	      *v = e->s.vx + (size_t)t0 * kvd;

	add_bias(q, L->q_bias, t1 - t0, qd);
	add_bias(k, L->k_bias, t1 - t0, kvd);
	add_bias(v, L->v_bias, t1 - t0, kvd);
	if (c->qk_norm) {
		qk_norm(c, q, L->q_norm, t1 - t0, c->n_heads);
		qk_norm(c, k, L->k_norm, t1 - t0, c->n_kv_heads);
	}
	for (int r = 0; r < a->f->n_runs; r++) { /* the runs' rows in [t0, t1) */
		const struct coli_fwd_run *R = &a->f->run[r];
		int r0 = R->r0 > t0 ? R->r0 : t0, r1 = R->r0 + R->n < t1 ? R->r0 + R->n : t1;
		int n = r1 - r0, pos0 = R->pos0 + (r0 - R->r0);

		if (n <= 0)
			continue;
		q = e->s.q + (size_t)r0 * qd, k = e->s.kx + (size_t)r0 * kvd;
		coli_rope_part(q, n, c->n_heads, hd, c->rope_dim, pos0, e->s.inv_freq);
		coli_rope_part(k, n, c->n_kv_heads, hd, c->rope_dim, pos0, e->s.inv_freq);
		rope_attn(q, n * c->n_heads, hd, c->rope_dim, e->s.rope_attn);
		rope_attn(k, n * c->n_kv_heads, hd, c->rope_dim, e->s.rope_attn);
		coli_kv_append(&e->kv, R->slot, a->l, pos0, n, k, e->s.vx + (size_t)r0 * kvd);
	}
}

/* RoPE, the cache append and one attention group a (row, kv head) for each
 * run of f: a run's rows see its own slot's rows, from its position on. */
static void attention(struct coli_engine *e, int l, const struct coli_fwd *f)
{
	const struct coli_model_config *c = &e->m.cfg;
	const struct coli_layer *L = &e->m.layers[l];
	int H = c->hidden, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
	int hd = c->head_dim, nkv = c->n_kv_heads, group = c->n_heads / nkv, T = f->T;
	struct qkv_rows qr = {e, L, f, l};

	coli_rows_rmsnorm(e, e->s.x, L->attn_norm, e->s.xn, T, H, c->norm_eps);
	coli_actbufs_set(e, e->s.ax, e->s.xn, T, H);
	matmul(e, &L->q, e->s.ax, T, e->s.q);
	matmul(e, &L->k, e->s.ax, T, e->s.kx);
	matmul(e, &L->v, e->s.ax, T, e->s.vx);
	coli_rows_mt(e, T, qkv_rows, &qr);
	for (int r = 0; r < f->n_runs; r++) {
		const struct coli_fwd_run *R = &f->run[r];

		/* one group a (token, key/value head): the query heads sharing it
		 * (coli_attention_groups_mt splits the few groups of a decode step
		 * across the threads; each head's bits are coli_attention_head's) */
		for (int tg = 0; tg < R->n * nkv; tg++) {
			int t = R->r0 + tg / nkv, g = tg % nkv, n = R->pos0 + tg / nkv + 1;
			int k0 =
			    L->window && n > L->window ? n - L->window : 0; /* a sliding layer */
			size_t h0 =
			    (size_t)t * c->n_heads + (size_t)g * group; /* the group's first */
			struct coli_attn_group *a = &e->s.attn[(size_t)t * nkv + g];

			*a = (struct coli_attn_group){.q = e->s.q + h0 * hd,
			                              .out = e->s.att + h0 * hd,
			                              .G = group,
			                              .n_pos = n - k0,
			                              .sink =
			                                  L->sinks ? L->sinks + g * group : NULL};
			coli_kv_group_rows(&e->kv, R->slot, l, g, hd, k0, a);
		}
	}
	/* YaRN's scale (core/model/rope.c) when the config has it; else as always */
	double t0 = coli_now_s();

	coli_attention_groups_mt(e->pool, e->s.attn, T * nkv, kvd, hd, hd,
	                         c->rope_factor > 1 ? e->s.attn_scale : 1.0f / sqrtf((float)hd),
	                         e->s.scores, e->s.slot, e->s.n_slots);
	e->est.attn_core_s += coli_now_s() - t0;
	coli_actbufs_set(e, e->s.ah, e->s.att, T, qd);
	matmul(e, &L->o, e->s.ah, T, e->s.proj);
	add_bias(e->s.proj, L->o_bias, T, H);
	coli_rows_add(e, e->s.x, e->s.proj, T, H);
}

static void embed(struct coli_engine *e, const struct coli_batch *b)
{
	float *x = e->s.x;

	for (int r = 0; r < b->n_runs; r++)
		for (int t = 0; t < b->runs[r].n; t++, x += e->m.cfg.hidden)
			coli_mat_row_f32(&e->m.tok_embd, b->runs[r].ids[t], x);
}

int coli_forward_grow(struct coli_engine *e, const int *slot, const int *upto, int n)
{
	struct coli_kv_cow cow[COLI_MAX_SEQ];
	int n_cow, rc = coli_kv_grow(&e->kv, slot, upto, n, cow, &n_cow);

	for (int i = 0; !rc && i < n_cow; i++) {
		if (e->dense.dd)
			rc = coli_dense_dev_copy_block(e, &cow[i]);
		else
			coli_kv_copy_block(&e->kv, &cow[i]);
		e->est.kv_copied += (uint64_t)cow[i].rows;
	}
	return rc;
}

int coli_forward_rows(struct coli_engine *e, const struct coli_batch *b, struct coli_fwd *f,
                      struct coli_fwd_run *run, int *pos)
{
	unsigned char seen[COLI_MAX_SEQ] = {0};

	f->T = 0, f->n_runs = b->n_runs, f->run = run, f->pos = pos;
	if (b->n_runs < 1 || b->n_runs > e->kv.n_seq)
		return -EINVAL;
	for (int r = 0; r < b->n_runs; r++) {
		const struct coli_run *R = &b->runs[r];

		if (R->slot < 0 || R->slot >= e->kv.n_seq || seen[R->slot]++ || R->n < 1 ||
		    R->n > e->s.tmax - f->T)
			return -EINVAL;
		if (e->kv.seq[R->slot].pos + R->n > e->kv.ctx)
			return -E2BIG;
		for (int t = 0; t < R->n; t++)
			if (R->ids[t] < 0 || R->ids[t] >= e->m.cfg.vocab)
				return -EINVAL;
		run[r] = (struct coli_fwd_run){
		    .slot = R->slot, .r0 = f->T, .n = R->n, .pos0 = e->kv.seq[R->slot].pos};
		for (int t = 0; t < R->n; t++)
			pos[f->T + t] = run[r].pos0 + t;
		f->T += R->n;
	}
	{ /* every run's blocks, or none (-ENOSPC: nothing changed) */
		int slot[COLI_MAX_SEQ], upto[COLI_MAX_SEQ];

		for (int r = 0; r < b->n_runs; r++)
			slot[r] = run[r].slot, upto[r] = run[r].pos0 + run[r].n;
		return coli_forward_grow(e, slot, upto, b->n_runs);
	}
}

/* The final norm and lm_head over the rows the runs ask for, in run order. */
static void lm_head(struct coli_engine *e, const struct coli_batch *b, const struct coli_fwd *f,
                    float *logits)
{
	int H = e->m.cfg.hidden, n = 0;

	for (int r = 0; r < b->n_runs; r++) {
		const struct coli_fwd_run *R = &f->run[r];
		int t0 = b->runs[r].logits == 2 ? R->r0 : R->r0 + R->n - 1;

		for (int t = t0; b->runs[r].logits && t < R->r0 + R->n; t++, n++)
			coli_rmsnorm(e->s.x + (size_t)t * H, e->m.out_norm, e->s.xn + (size_t)n * H,
			             H, e->m.cfg.norm_eps);
	}
	if (!n || !logits)
		return;
	coli_actbufs_set(e, e->s.ax, e->s.xn, n, H);
	matmul(e, &e->m.lm_head, e->s.ax, n, logits);
}

int coli_forward_batch(struct coli_engine *e, const struct coli_batch *b, float *logits)
{
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_fwd_run run[COLI_MAX_SEQ];
	struct coli_fwd f;
	int H = c->hidden, T, rc, pos[e->s.tmax]; /* pos: each row's position */
	double t0 = coli_now_s(), t1, t2;

	e->errmsg[0] = 0;
	rc = coli_forward_rows(e, b, &f, run, pos);
	if (rc)
		return rc;
	T = f.T;
	embed(e, b);
	for (int l = 0; l < c->n_layers; l++) {
		t1 = coli_now_s();
		if (c->kv_lora)
			coli_forward_mla(e, l, &f); /* core/forward/mla.c */
		else
			attention(e, l, &f);
		t2 = coli_now_s();
		e->est.attention_s += t2 - t1;
		coli_rows_rmsnorm(e, e->s.x, e->m.layers[l].ffn_norm, e->s.xn, T, H, c->norm_eps);
		coli_actbufs_set(e, e->s.ax, e->s.xn, T, H);
		if (e->m.layers[l].moe) {
			/* the call's value: rows ready in e->s.ax, nothing on a device;
			 * every run's rows at once (an expert read once for all) */
			struct coli_moe_layer ml = coli_moe_layer_make(l, T);

			ml.dense_dev = coli_dense_dev_of(e, l);
			ml.pos = pos;
			rc = coli_moe_block(e, &ml, e->s.mlp);
			if (rc)
				return rc; /* a slab could not be read: e->errmsg; pos unchanged */
		} else {
			coli_mlp_dense(e, l, T, e->s.mlp);
		}
		t1 = coli_now_s();
		*(e->m.layers[l].moe ? &e->est.moe_s : &e->est.dense_mlp_s) += t1 - t2;
		coli_rows_add(e, e->s.x, e->s.mlp, T, H);
	}
	for (int r = 0; r < f.n_runs; r++) {
		struct coli_kv_seq *q = &e->kv.seq[run[r].slot];

		/* (memmove: a rebuild from the history forwards hist itself) */
		memmove(q->hist + q->pos, b->runs[r].ids, sizeof(int) * run[r].n);
		q->pos += run[r].n;
	}
	e->est.tokens += T;
	e->est.steps++;
	e->est.step_runs += (uint64_t)f.n_runs;
	coli_tiers_tokens(e, T);
	t1 = coli_now_s();
	lm_head(e, b, &f, logits);
	t2 = coli_now_s();
	e->est.lm_head_s += t2 - t1;
	e->est.forward_s += t2 - t0;
	return 0;
}

int coli_forward(struct coli_engine *e, const int *ids, int T, float *logits, int all_logits)
{
	const struct coli_run run = {.slot = 0,
	                             .n = T,
	                             .ids = ids,
	                             .logits = !logits      ? 0
	                                       : all_logits ? 2
	                                                    : 1};

	if (T <= 0 || T > e->s.tmax)
		return -EINVAL;
	return coli_forward_batch(e, &(struct coli_batch){.n_runs = 1, .runs = &run}, logits);
}
