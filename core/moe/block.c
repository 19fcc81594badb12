/*
 * core/moe/block.c — the MLP half of a layer on the CPU path
 * (core/forward/forward.c): a MoE layer's router logits, its experts
 * (coli_moe_experts, core/moe/moe.c: wherever each runs), the accumulation
 * of every pair's output in ascending expert id and the shared expert
 * (Qwen2-MoE's with its sigmoid gate, GLM-4.5's without); and the dense
 * SwiGLU MLP of non-MoE layers. With the dense part on a device the same
 * accumulation runs there
 * (core/forward/layer_host.c); the order is the placement invariant's
 * (core/moe/moe.c says it).
 */
#include <math.h>
#include <string.h>

#include "core/core_internal.h"
#include "core/moe/moe.h"

/* Router logits e->s.rlog[T][E] = router . xn on the CPU (the device path
 * computes them on the device and downloads them instead). */
static void route_logits(struct coli_engine *e, struct coli_moe_layer *ml)
{
	coli_moe_ax_ready(e, ml);
	for (int t = 0; t < ml->T; t++)
		e->s.ag[t] = e->s.ax[t].act;
	coli_gemm_mt(e->pool, &e->m.layers[ml->l].router, e->s.ag, ml->T, e->s.rlog,
	             e->m.cfg.n_experts);
	/* gpt-oss: under softmax routing the bias is the router's own (F.linear's
	 * bias), added to the logits; the sigmoid router's is for selection only
	 * (core/moe/moe.c) */
	if (e->m.cfg.router_kind == COLI_ROUTER_SOFTMAX && e->m.layers[ml->l].router_bias)
		for (int t = 0; t < ml->T; t++)
			for (int x = 0; x < e->m.cfg.n_experts; x++)
				e->s.rlog[(size_t)t * e->m.cfg.n_experts + x] +=
				    e->m.layers[ml->l].router_bias[x];
}

/* h[n][I] = silu(W_gate . x) * (W_up . x) for the n gathered activations in
 * e->s.ag; then y[n][H] = W_down . h. Uses e->s.g, e->s.u, e->s.ah. */
static void swiglu(struct coli_engine *e, const struct coli_mat *gate, const struct coli_mat *up,
                   const struct coli_mat *down, int n, float *y)
{
	int I = gate->rows;

	coli_gemm_mt(e->pool, gate, e->s.ag, n, e->s.g, I);
	coli_gemm_mt(e->pool, up, e->s.ag, n, e->s.u, I);
	for (int i = 0; i < n; i++) {
		float *h = e->s.g + (size_t)i * I;

		coli_silu_mul(h, e->s.u + (size_t)i * I, h, I);
		e->s.ah[i].n = I;
		coli_actbuf_set(&e->s.ah[i], h);
		e->s.ag[i] = e->s.ah[i].act;
	}
	coli_gemm_mt(e->pool, down, e->s.ag, n, y, down->rows);
}

/* out's rows [t0, t1) (coli_rows_mt's share): zero, then every pair of
 * those rows added in pair order, i.e. ascending expert id, whoever computed
 * it; gpt-oss's down bias joins each output before its weight (y = h W + b,
 * then w y). A row's sums are the same whatever the share. */
struct combine {
	struct coli_engine *e;
	const struct coli_layer *L;
	float *out;
};

static void combine_rows(void *arg, int t0, int t1)
{
	const struct combine *a = arg;
	const struct coli_engine *e = a->e;
	int H = e->m.cfg.hidden;

	memset(a->out + (size_t)t0 * H, 0, sizeof(float) * (size_t)(t1 - t0) * H);
	for (int p = 0; p < e->s.n_pairs; p++) {
		int t = e->s.pair_token[p];
		float w = e->s.pair_w[p], *o = a->out + (size_t)t * H;
		const float *y = e->s.ey + (size_t)p * H;

		if (t < t0 || t >= t1)
			continue;
		if (a->L->exp_down_bias) {
			const float *b = a->L->exp_down_bias + (size_t)e->s.pair_expert[p] * H;

			for (int j = 0; j < H; j++)
				o[j] = o[j] + w * (y[j] + b[j]);
			continue;
		}
		for (int j = 0; j < H; j++)
			o[j] = o[j] + w * y[j];
	}
}

/* out[t] += gate[t] * the shared expert's y[t] (e->s.ey) for rows [t0, t1):
 * gate = sigmoid of its router's logit (e->s.rlog[t]), or 1 ungated. */
static void shared_rows(void *arg, int t0, int t1)
{
	const struct combine *a = arg;
	const struct coli_engine *e = a->e;
	const struct coli_model_config *c = &e->m.cfg;
	int H = c->hidden;

	for (int t = t0; t < t1; t++) {
		float gate = c->shared_gated ? 1.0f / (1.0f + expf(-e->s.rlog[t])) : 1.0f;
		float *o = a->out + (size_t)t * H;
		const float *y = e->s.ey + (size_t)t * H;

		for (int j = 0; j < H; j++)
			o[j] = o[j] + gate * y[j];
	}
}

int coli_moe_block(struct coli_engine *e, struct coli_moe_layer *ml, float *out)
{
	const struct coli_model_config *c = &e->m.cfg;
	const struct coli_layer *L = &e->m.layers[ml->l];
	int T = ml->T, rc;
	struct combine cb = {e, L, out};

	route_logits(e, ml);
	rc = coli_moe_experts(e, ml);
	if (rc)
		return rc; /* a slab could not be read: e->errmsg says which */
	coli_rows_mt(e, T, combine_rows, &cb);
	if (c->shared_inter) {
		/* gate[t] = sigmoid(shexp_router . xn[t]) (1 when not shared_gated:
		 * 1 * y is y, so the ungated sum is out + y);
		 * out[t] += gate[t] * shared(xn[t]) */
		coli_moe_ax_ready(e, ml);
		for (int t = 0; t < T; t++)
			e->s.ag[t] = e->s.ax[t].act;
		if (c->shared_gated)
			coli_gemm(&L->sh_router, e->s.ag, T, e->s.rlog, 1, 0, 1);
		swiglu(e, &L->sh_gate, &L->sh_up, &L->sh_down, T, e->s.ey);
		coli_rows_mt(e, T, shared_rows, &cb);
	}
	return 0;
}

void coli_mlp_dense(struct coli_engine *e, int l, int T, float *out)
{
	const struct coli_layer *L = &e->m.layers[l];

	/* e->s.ax holds xn's rows: core/forward/forward.c prepared them */
	for (int t = 0; t < T; t++)
		e->s.ag[t] = e->s.ax[t].act;
	swiglu(e, &L->ffn_gate, &L->ffn_up, &L->ffn_down, T, out);
}
