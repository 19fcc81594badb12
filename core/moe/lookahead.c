/*
 * core/moe/lookahead.c — router lookahead: guess the next MoE layer's experts a
 * layer early and prefetch their slabs, so disk reads overlap this layer's
 * expert compute and the next layer's attention.
 *
 * The guess applies layer l+1's router to layer l's normed MoE input
 * (xn = rmsnorm(x, ffn_norm_l), already quantized in e->s.ax): the residual
 * stream changes little across one layer, so the top-k of those logits
 * overlaps much of what l+1 will route. Per token its top_k; the union over
 * the call's tokens is the set prefetched. Recall (experts routed at l+1
 * that were guessed / routed) and waste (prefetched reads l+1 did not use)
 * are counted by the tier manager and printed at the end of generate.
 *
 * The router logits go to e->s.rlog (route() is done with it by now) as
 * [T][n_experts] fp32; top-k on logits equals top-k on softmax (a sigmoid
 * router's guess is its own routing: bias and groups change the choice). With the
 * dense part on a device the guess is computed there, next to the layer's
 * own routing (core/forward/forward_dev.c: the next router on the device's xn, then
 * coli_route), and arrives with it in e->s.guess: the CPU, which is about to
 * compute this layer's rows, skips the GEMV (the layer call's guess_l names the
 * layer it guessed).
 */
#include <string.h>

#include "core/core_internal.h"
#include "core/dev/dev.h"
#include "core/moe/moe.h"

static int next_moe_layer(const struct coli_engine *e, int l)
{
	for (int n = l + 1; n < e->m.cfg.n_layers; n++)
		if (e->m.layers[n].moe)
			return n;
	return -1;
}

/* A guess costs the next router's GEMV (on the CPU, or in the device's chain
 * before the routing comes back), worth it while it finds slabs to read.
 * Once IDLE_GUESSES guesses in a row for a layer read nothing (its hot
 * experts are all in RAM: a model that fits, after its first tokens), the
 * layer is guessed only at every IDLE_PROBE-th position, and a guess that
 * reads again resumes it. Depends only on state the call does not change before
 * coli_lookahead runs, so the device's guess_layer and the host agree. */
#define IDLE_GUESSES 8
#define IDLE_PROBE   8

/* Every expert of layer n in a working device's VRAM: a guess would find
 * nothing to read or stage (the layer after a split's boundary, whose router
 * is on the other device, would otherwise pay a host GEMM each chunk). */
static int all_resident(const struct coli_engine *e, int n)
{
	int E = e->m.cfg.n_experts;

	for (int i = 0; e->vram.where && i < E; i++) {
		int d = e->vram.where[(size_t)n * E + i];

		if (d < 0 || e->vram.devs[d]->failed)
			return 0;
	}
	return e->vram.where != NULL;
}

int coli_lookahead_wanted(const struct coli_engine *e, int n)
{
	if (!e->opts.prefetch || !e->tiers || all_resident(e, n))
		return 0;
	return e->moe.la_idle[n] < IDLE_GUESSES || e->kv.seq[0].pos % IDLE_PROBE == 0;
}

void coli_lookahead(struct coli_engine *e, struct coli_moe_layer *ml)
{
	const struct coli_model_config *c = &e->m.cfg;
	int E = c->n_experts, K = c->top_k, next = next_moe_layer(e, ml->l), T = ml->T;
	unsigned char mask[E];

	if (next < 0 || !coli_lookahead_wanted(e, next)) {
		ml->guess_l = -1; /* a guess the device made for it goes unused */
		return;
	}
	double t0 = coli_now_s();

	if (ml->guess_l != next && coli_tiers_layer_held(e, next)) {
		/* every expert of it in RAM (a model that fits, once read): the
		 * guess would read nothing, so skip its router GEMM and count it
		 * idle as coli_tiers_prefetch's nothing would */
		if (e->moe.la_idle[next] < IDLE_GUESSES)
			e->moe.la_idle[next]++;
		e->est.lookahead_s += coli_now_s() - t0;
		return;
	}
	memset(mask, 0, sizeof(mask));
	if (ml->guess_l == next) { /* the device's */
		for (int i = 0; i < T * K; i++)
			mask[e->s.guess[i]] = 1;
		T = 0;
		ml->guess_l = -1; /* used once */
	} else {
		coli_moe_ax_ready(e, ml);
		for (int t = 0; t < T; t++)
			e->s.ag[t] = e->s.ax[t].act;
		coli_gemm_mt(e->pool, &e->m.layers[next].router, e->s.ag, T, e->s.rlog, E);
	}
	for (int t = 0; t < T && c->router_kind == COLI_ROUTER_SIGMOID; t++) {
		/* the bias and the groups change the choice: the next layer's own
		 * routing (its weights are not needed; p is scratch) */
		const struct coli_route_sig sig = {.bias = e->m.layers[next].router_bias,
		                                   .n_group = c->n_group,
		                                   .topk_group = c->topk_group,
		                                   .norm = 0,
		                                   .scale = 1.0f};
		int sel[64];
		float w[64];

		coli_route_sigmoid(e->s.rlog + (size_t)t * E, E, K, &sig, sel, w);
		for (int j = 0; j < K; j++)
			mask[sel[j]] = 1;
	}
	for (int t = 0; t < T && c->router_kind == COLI_ROUTER_SOFTMAX; t++) {
		const float *p = e->s.rlog + (size_t)t * E;
		unsigned char taken[E];

		memset(taken, 0, sizeof(taken));
		for (int j = 0; j < K; j++) {
			int best = -1;

			for (int i = 0; i < E; i++)
				if (!taken[i] && (best < 0 || p[i] > p[best]))
					best = i;
			taken[best] = 1;
			mask[best] = 1;
		}
	}
	/* experts resident on a working device are not read by the host: a
	 * prefetch would be a wasted read (and, under CUDA_RELEASE_HOST, bring
	 * back the copy that was dropped) */
	for (int i = 0; e->vram.where && i < E; i++) {
		int d = e->vram.where[(size_t)next * E + i];

		if (d >= 0 && !e->vram.devs[d]->failed)
			mask[i] = 0;
	}
	if (coli_tiers_prefetch(e, next, mask))
		e->moe.la_idle[next] = 0;
	else if (e->moe.la_idle[next] < IDLE_GUESSES)
		e->moe.la_idle[next]++;
	e->est.lookahead_s += coli_now_s() - t0;
}
