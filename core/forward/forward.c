/*
 * core/forward/forward.c — the CPU forward pass over T tokens: embeddings, attention
 * with RoPE over the KV cache, the MLP/MoE block of each layer, final norm and
 * lm_head. Prefill runs the prompt as one batch (every matrix sees all T
 * rows, so a weight row is read once per call); decode is the same code with
 * T = 1.
 *
 * Buffers (engine scratch, see core_internal.h), t = token in the call:
 *   x    [T][hidden]       residual stream, fp32
 *   xn   [T][hidden]       normed input of attention / MLP
 *   q    [T][nh*hd]        queries; kx, vx [T][nkv*hd] keys and values
 *   kcache, vcache [layer][ctx] rows of [nkv*hd] in --kv-type (core/forward/kv.h)
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

static void attention(struct coli_engine *e, int l, int T, int pos0)
{
	const struct coli_model_config *c = &e->m.cfg;
	const struct coli_layer *L = &e->m.layers[l];
	int H = c->hidden, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
	int hd = c->head_dim, nkv = c->n_kv_heads, group = c->n_heads / nkv;

	for (int t = 0; t < T; t++)
		coli_rmsnorm(e->s.x + (size_t)t * H, L->attn_norm, e->s.xn + (size_t)t * H, H,
		             c->norm_eps);
	coli_actbufs_set(e, e->s.ax, e->s.xn, T, H);
	matmul(e, &L->q, e->s.ax, T, e->s.q);
	matmul(e, &L->k, e->s.ax, T, e->s.kx);
	matmul(e, &L->v, e->s.ax, T, e->s.vx);
	add_bias(e->s.q, L->q_bias, T, qd);
	add_bias(e->s.kx, L->k_bias, T, kvd);
	add_bias(e->s.vx, L->v_bias, T, kvd);
	if (c->qk_norm) {
		qk_norm(c, e->s.q, L->q_norm, T, c->n_heads);
		qk_norm(c, e->s.kx, L->k_norm, T, c->n_kv_heads);
	}
	coli_rope_part(e->s.q, T, c->n_heads, c->head_dim, c->rope_dim, pos0, e->s.inv_freq);
	coli_rope_part(e->s.kx, T, c->n_kv_heads, c->head_dim, c->rope_dim, pos0, e->s.inv_freq);
	rope_attn(e->s.q, T * c->n_heads, hd, c->rope_dim, e->s.rope_attn);
	rope_attn(e->s.kx, T * nkv, hd, c->rope_dim, e->s.rope_attn);
	/* append this call's keys and values to the cache (rounded to its type) */
	coli_kv_append(&e->kv, l, pos0, T, e->s.kx, e->s.vx);
	/* one group a (token, key/value head): the query heads sharing it
	 * (coli_attention_groups_mt splits the few groups of a decode step
	 * across the threads; each head's bits are coli_attention_head's) */
	for (int tg = 0; tg < T * nkv; tg++) {
		int t = tg / nkv, g = tg % nkv, n = pos0 + t + 1;
		int k0 = L->window && n > L->window ? n - L->window : 0; /* a sliding layer */
		size_t h0 = (size_t)t * c->n_heads + (size_t)g * group; /* the group's first head */

		e->s.attn[tg] =
		    (struct coli_attn_group){.q = e->s.q + h0 * hd,
		                             .out = e->s.att + h0 * hd,
		                             .G = group,
		                             .n_pos = n - k0,
		                             .sink = L->sinks ? L->sinks + g * group : NULL};
		coli_kv_group_rows(&e->kv, l, g, hd, k0, &e->s.attn[tg]);
	}
	/* YaRN's scale (core/model/rope.c) when the config has it; else as always */
	coli_attention_groups_mt(e->pool, e->s.attn, T * nkv, kvd, hd, hd,
	                         c->rope_factor > 1 ? e->s.attn_scale : 1.0f / sqrtf((float)hd),
	                         e->s.scores, (size_t)e->kv.ctx * 8,
	                         coli_cpu_pool_threads(e->pool));
	coli_actbufs_set(e, e->s.ah, e->s.att, T, qd);
	matmul(e, &L->o, e->s.ah, T, e->s.proj);
	add_bias(e->s.proj, L->o_bias, T, H);
	for (size_t i = 0; i < (size_t)T * H; i++)
		e->s.x[i] += e->s.proj[i];
}

static void embed(struct coli_engine *e, const int *ids, int T)
{
	for (int t = 0; t < T; t++)
		coli_mat_row_f32(&e->m.tok_embd, ids[t], e->s.x + (size_t)t * e->m.cfg.hidden);
}

int coli_forward(struct coli_engine *e, const int *ids, int T, float *logits, int all_logits)
{
	const struct coli_model_config *c = &e->m.cfg;
	int H = c->hidden, pos0 = e->kv.pos;
	double t0 = coli_now_s(), t1, t2;

	if (T <= 0 || T > e->s.tmax)
		return -EINVAL;
	e->errmsg[0] = 0;
	if (pos0 + T > e->kv.ctx)
		return -E2BIG;
	for (int t = 0; t < T; t++)
		if (ids[t] < 0 || ids[t] >= c->vocab)
			return -EINVAL;
	embed(e, ids, T);
	for (int l = 0; l < c->n_layers; l++) {
		t1 = coli_now_s();
		if (c->kv_lora)
			coli_forward_mla(e, l, T, pos0); /* core/forward/mla.c */
		else
			attention(e, l, T, pos0);
		t2 = coli_now_s();
		e->est.attention_s += t2 - t1;
		for (int t = 0; t < T; t++)
			coli_rmsnorm(e->s.x + (size_t)t * H, e->m.layers[l].ffn_norm,
			             e->s.xn + (size_t)t * H, H, c->norm_eps);
		coli_actbufs_set(e, e->s.ax, e->s.xn, T, H);
		if (e->m.layers[l].moe) {
			/* the call's value: rows ready in e->s.ax, nothing on a device */
			struct coli_moe_layer ml = coli_moe_layer_make(l, T);
			int rc;

			ml.dense_dev = coli_dense_dev_of(e, l);
			rc = coli_moe_block(e, &ml, e->s.mlp);

			if (rc)
				return rc; /* a slab could not be read: e->errmsg; pos unchanged */
		} else {
			coli_mlp_dense(e, l, T, e->s.mlp);
		}
		t1 = coli_now_s();
		*(e->m.layers[l].moe ? &e->est.moe_s : &e->est.dense_mlp_s) += t1 - t2;
		for (size_t i = 0; i < (size_t)T * H; i++)
			e->s.x[i] += e->s.mlp[i];
	}
	e->kv.pos += T;
	e->est.tokens += T;
	coli_tiers_tokens(e, T);
	t1 = coli_now_s();
	if (logits) {
		int r0 = all_logits ? 0 : T - 1, n = T - r0;

		for (int t = r0; t < T; t++)
			coli_rmsnorm(e->s.x + (size_t)t * H, e->m.out_norm,
			             e->s.xn + (size_t)(t - r0) * H, H, c->norm_eps);
		coli_actbufs_set(e, e->s.ax, e->s.xn, n, H);
		matmul(e, &e->m.lm_head, e->s.ax, n, logits);
	}
	t2 = coli_now_s();
	e->est.lm_head_s += t2 - t1;
	e->est.forward_s += t2 - t0;
	return 0;
}
