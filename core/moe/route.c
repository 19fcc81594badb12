/*
 * core/moe/route.c — a MoE layer call's routing: every token's experts and
 * weights from its router logits, and the call's (token, expert) pairs
 * grouped by expert (the scheduler's plan step, core/moe/moe.c).
 *
 * Routing follows transformers: probabilities = softmax(router logits) over
 * all experts in fp32, the top_k largest are kept (ties: lower id first), and
 * renormalised to sum 1 when norm_topk_prob (Mixtral always renormalises; its
 * converter sets the flag). The sigmoid router of GLM-4.5, DeepSeek-V3 and
 * MiniMax-M2 (cfg.router_kind) is cpu/ops.c coli_route_sigmoid: bias for
 * selection only, group-limited, weights scaled by routed_scale. Each
 * token's choice is its own, so the tokens go across the pool; when the
 * dense device routed them (ml->routed) only the trace is written here.
 */
#include <stdio.h>
#include <string.h>

#include "core/core_internal.h"
#include "core/moe/moe.h"

/* Softmax (or sigmoid: cfg.router_kind), top-k and weights from e->s.rlog,
 * for tokens [t0, t1) of the layer call (coli_rows_mt's share: each token's
 * choice is its own). */
struct route_rows {
	struct coli_engine *e;
	const struct coli_moe_layer *ml;
};

static void route_rows(void *arg, int t0, int t1)
{
	const struct route_rows *a = arg;
	struct coli_engine *e = a->e;
	const struct coli_model_config *c = &e->m.cfg;
	int E = c->n_experts, K = c->top_k;
	const struct coli_route_sig sig = {.bias = e->m.layers[a->ml->l].router_bias,
	                                   .n_group = c->n_group,
	                                   .topk_group = c->topk_group,
	                                   .norm = c->norm_topk_prob,
	                                   .scale = c->routed_scale};

	for (int t = t0; t < t1; t++) {
		float *p = e->s.rlog + (size_t)t * E, *w = e->s.selw + (size_t)t * K;
		int *s = e->s.sel + (size_t)t * K;

		if (c->router_kind == COLI_ROUTER_SIGMOID)
			coli_route_sigmoid(p, E, K, &sig, s, w);
		else
			coli_route(p, E, K, c->norm_topk_prob, s, w);
	}
}

/* Every token's experts and weights (unless the dense device routed them:
 * core/forward/forward_dev.c), then COLI_TRACE's lines in token order. */
void coli_moe_route(struct coli_engine *e, const struct coli_moe_layer *ml)
{
	int K = e->m.cfg.top_k;
	struct route_rows a = {e, ml};

	if (!ml->routed)
		coli_rows_mt(e, ml->T, route_rows, &a);
	for (int t = 0; e->trace && t < ml->T; t++) {
		const float *w = e->s.selw + (size_t)t * K;
		const int *s = e->s.sel + (size_t)t * K;

		fprintf(e->trace, "%d %d", ml->pos ? ml->pos[t] : e->kv.seq[0].pos + t, ml->l);
		for (int j = 0; j < K; j++)
			fprintf(e->trace, " %d:%.6f", s[j], w[j]);
		fputc('\n', e->trace);
	}
}

/* Sort the layer's (token, expert) pairs by expert, then token: a counting
 * sort (one pass to count, one to place in token order). It walked every
 * expert over every pair before: 128 x 256 x 8 tests a layer of a 256-token
 * prefill chunk, ~0.3 ms on the H200 host. */
void coli_moe_pairs(struct coli_engine *e, int T)
{
	const struct coli_model_config *c = &e->m.cfg;
	int K = c->top_k, E = c->n_experts, n = 0;
	int *at = e->moe.cand; /* [E]: the next free pair of each expert */

	memset(e->moe.pair_n, 0, sizeof(int) * (size_t)E);
	for (int i = 0; i < T * K; i++)
		if (e->s.sel[i] >= 0 && e->s.sel[i] < E)
			e->moe.pair_n[e->s.sel[i]]++;
	for (int ex = 0; ex < E; ex++) {
		e->moe.pair_first[ex] = at[ex] = n;
		n += e->moe.pair_n[ex];
	}
	for (int i = 0; i < T * K; i++) {
		int ex = e->s.sel[i], p;

		if (ex < 0 || ex >= E)
			continue;
		p = at[ex]++;
		e->s.pair_expert[p] = ex;
		e->s.pair_token[p] = i / K;
		e->s.pair_w[p] = e->s.selw[i];
	}
	e->s.n_pairs = n;
}
