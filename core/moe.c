/*
 * core/moe.c — the MLP half of a layer: the routed MoE block (router softmax,
 * top-k, SwiGLU experts, the Qwen2-MoE shared expert with its sigmoid gate)
 * and the dense SwiGLU MLP of non-MoE layers.
 *
 * Routing follows transformers: probabilities = softmax(router logits) over
 * all experts in fp32, the top_k largest are kept (ties: lower id first), and
 * renormalised to sum 1 when norm_topk_prob (Mixtral always renormalises; its
 * converter sets the flag). The tokens of one call are grouped per expert so
 * an expert's weights are read once per call, whatever T is.
 *
 * Accumulation order (part of the placement invariant): for each token the
 * routed experts' outputs are added in ascending expert id,
 *     out[j] = out[j] + w_e * y_e[j]      (product rounded, then the sum)
 * starting from +0.0, then the shared expert's gated output is added. Whoever
 * computed y_e (CPU row, resident GPU group, streamed expert), the sum is
 * formed here in this order.
 *
 * Where slabs come from (core/tiers.c): the routed experts of a call, in
 * ascending id, are acquired from the tier manager in chunks that fit its
 * RAM slots (one chunk unless the budget is tiny and the call is a long
 * prefill). A chunk's misses go to disk as one batch; the next layer's
 * likely experts are prefetched (core/lookahead.c) while the batch lands;
 * then the chunk is computed in ascending order, so the sum is the same
 * whatever was resident.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "core/core_internal.h"

/* Top-k of p[n] by value (descending, ties to the lower index). */
static void topk(const float *p, int n, int k, int *idx, float *val)
{
	for (int j = 0; j < k; j++) {
		int best = -1;

		for (int i = 0; i < n; i++) {
			int taken = 0;

			for (int q = 0; q < j; q++)
				taken |= idx[q] == i;
			if (!taken && (best < 0 || p[i] > p[best]))
				best = i;
		}
		idx[j] = best;
		val[j] = p[best];
	}
}

static void route(struct coli_engine *e, int l, int T)
{
	const struct coli_model_config *c = &e->m.cfg;
	int E = c->n_experts, K = c->top_k;

	for (int t = 0; t < T; t++)
		e->ag[t] = e->ax[t].act;
	coli_gemm_mt(e->pool, &e->m.layers[l].router, e->ag, T, e->rlog, E);
	for (int t = 0; t < T; t++) {
		float *p = e->rlog + (size_t)t * E, *w = e->selw + (size_t)t * K;
		int *s = e->sel + (size_t)t * K;

		coli_softmax(p, E);
		topk(p, E, K, s, w);
		if (c->norm_topk_prob) {
			float sum = 0;

			for (int j = 0; j < K; j++)
				sum += w[j];
			for (int j = 0; j < K; j++)
				w[j] /= sum;
		}
		if (e->trace) {
			fprintf(e->trace, "%d %d", e->pos + t, l);
			for (int j = 0; j < K; j++)
				fprintf(e->trace, " %d:%.6f", s[j], w[j]);
			fputc('\n', e->trace);
		}
	}
}

/* h[n][I] = silu(W_gate . x) * (W_up . x) for the n gathered activations in
 * e->ag; then y[n][H] = W_down . h. Uses e->g, e->u, e->ah. */
static void swiglu(struct coli_engine *e, const struct coli_mat *gate, const struct coli_mat *up,
		   const struct coli_mat *down, int n, float *y)
{
	int I = gate->rows;

	coli_gemm_mt(e->pool, gate, e->ag, n, e->g, I);
	coli_gemm_mt(e->pool, up, e->ag, n, e->u, I);
	for (int i = 0; i < n; i++) {
		float *h = e->g + (size_t)i * I;

		coli_silu_mul(h, e->u + (size_t)i * I, h, I);
		e->ah[i].n = I;
		coli_actbuf_set(&e->ah[i], h);
		e->ag[i] = e->ah[i].act;
	}
	coli_gemm_mt(e->pool, down, e->ag, n, y, down->rows);
}

/* y[n][H] accumulated into out: out[t] += w * y for each gathered row. */
static void expert_rows(struct coli_engine *e, int l, int ex, const void *slab, int T, float *out)
{
	const struct coli_model_config *c = &e->m.cfg;
	int H = c->hidden, K = c->top_k, n = 0;
	struct coli_expert_view v;

	for (int t = 0; t < T; t++)
		for (int j = 0; j < K; j++)
			if (e->sel[t * K + j] == ex)
				e->rows[n++] = t * K + j;
	for (int i = 0; i < n; i++)
		e->ag[i] = e->ax[e->rows[i] / K].act;
	coli_model_expert_at(&e->m, l, slab, &v);
	swiglu(e, &v.gate, &v.up, &v.down, n, e->ey);
	for (int i = 0; i < n; i++) {
		float w = e->selw[e->rows[i]];
		float *o = out + (size_t)(e->rows[i] / K) * H;
		const float *y = e->ey + (size_t)i * H;

		for (int j = 0; j < H; j++)
			o[j] = o[j] + w * y[j];
	}
}

int coli_moe_block(struct coli_engine *e, int l, int T, float *out)
{
	const struct coli_model_config *c = &e->m.cfg;
	const struct coli_layer *L = &e->m.layers[l];
	const struct coli_expert_layer *xl = coli_io_container_expert_layer(e->m.c, L->xl);
	int H = c->hidden, K = c->top_k, E = c->n_experts, n_need = 0;
	int need[E], uses[E]; /* routed experts, ascending, and their token counts */
	const void *slabs[E];

	route(e, l, T);
	memset(out, 0, sizeof(float) * T * H);
	memset(uses, 0, sizeof(uses));
	for (int i = 0; i < T * K; i++)
		uses[e->sel[i]]++;
	for (int ex = 0; ex < E; ex++)
		if (uses[ex]) {
			uses[n_need] = uses[ex];
			need[n_need++] = ex;
			e->stats.expert_calls += uses[ex];
			e->stats.expert_bytes += xl->slab_bytes;
			e->est.expert_uses += uses[ex];
		}
	for (int i = 0, k; i < n_need; i += k) {
		int rc;

		k = coli_tiers_acquire(e, l, need + i, uses + i, n_need - i, slabs);
		if (k <= 0)
			return k < 0 ? k : -EIO;
		if (i == 0)
			coli_lookahead(e, l, T);
		rc = coli_tiers_wait(e);
		for (int j = 0; !rc && j < k; j++)
			expert_rows(e, l, need[i + j], slabs[j], T, out);
		coli_tiers_release(e);
		if (rc)
			return rc;
	}
	coli_tiers_layer_end(e, l);
	if (c->shared_inter) {
		/* gate[t] = sigmoid(shexp_router . xn[t]); out[t] += gate[t] * shared(xn[t]) */
		for (int t = 0; t < T; t++)
			e->ag[t] = e->ax[t].act;
		coli_gemm(&L->sh_router, e->ag, T, e->rlog, 1, 0, 1);
		swiglu(e, &L->sh_gate, &L->sh_up, &L->sh_down, T, e->ey);
		for (int t = 0; t < T; t++) {
			float gate = 1.0f / (1.0f + expf(-e->rlog[t]));
			float *o = out + (size_t)t * H;
			const float *y = e->ey + (size_t)t * H;

			for (int j = 0; j < H; j++)
				o[j] = o[j] + gate * y[j];
		}
	}
	return 0;
}

void coli_mlp_dense(struct coli_engine *e, int l, int T, float *out)
{
	const struct coli_layer *L = &e->m.layers[l];

	for (int t = 0; t < T; t++)
		e->ag[t] = e->ax[t].act;
	swiglu(e, &L->ffn_gate, &L->ffn_up, &L->ffn_down, T, out);
}
