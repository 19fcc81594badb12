/*
 * core/moe/moe.c — the MLP half of a layer: the routed MoE block (router softmax,
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
 * Where slabs come from (core/place/tiers.c): the experts the host must read (CPU
 * rows and streamed ones) are acquired from the tier manager in ascending id,
 * in chunks that fit its RAM slots; a chunk's misses go to disk as one batch
 * and the next layer's likely experts are prefetched (core/moe/lookahead.c) while
 * it lands. Devices are issued first when nothing they need comes from the
 * host, so they work while the CPU waits for disk. Streaming needs every
 * streamed slab pinned until take; if they do not all fit in one chunk the
 * layer keeps its RAM-tier experts on the CPU.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "core/core_internal.h"
#include "core/dev/dev.h"
#include "core/moe/moe.h"

/* Router logits e->rlog[T][E] = router . xn on the CPU (the device path
 * computes them on the device and downloads them instead). */
static void route_logits(struct coli_engine *e, struct coli_moe_layer *ml)
{
	coli_moe_ax_ready(e, ml);
	for (int t = 0; t < ml->T; t++)
		e->ag[t] = e->ax[t].act;
	coli_gemm_mt(e->pool, &e->m.layers[ml->l].router, e->ag, ml->T, e->rlog,
	             e->m.cfg.n_experts);
}

/* Softmax, top-k and weights from e->rlog, for every token. */
static void route_select(struct coli_engine *e, const struct coli_moe_layer *ml)
{
	const struct coli_model_config *c = &e->m.cfg;
	int E = c->n_experts, K = c->top_k, l = ml->l, T = ml->T;

	for (int t = 0; t < T; t++) {
		float *p = e->rlog + (size_t)t * E, *w = e->selw + (size_t)t * K;
		int *s = e->sel + (size_t)t * K;

		if (!ml->routed) /* else the dense device routed (core/forward/forward_dev.c) */
			coli_route(p, E, K, c->norm_topk_prob, s, w);
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

/* Sort the layer's (token, expert) pairs by expert, then token: a counting
 * sort (one pass to count, one to place in token order). It walked every
 * expert over every pair before: 128 x 256 x 8 tests a layer of a 256-token
 * prefill chunk, ~0.3 ms on the H200 host. */
static void plan_pairs(struct coli_engine *e, int T)
{
	const struct coli_model_config *c = &e->m.cfg;
	int K = c->top_k, E = c->n_experts, n = 0;
	int *at = e->cand; /* [E]: the next free pair of each expert */

	memset(e->pair_n, 0, sizeof(int) * (size_t)E);
	for (int i = 0; i < T * K; i++)
		if (e->sel[i] >= 0 && e->sel[i] < E)
			e->pair_n[e->sel[i]]++;
	for (int ex = 0; ex < E; ex++) {
		e->pair_first[ex] = at[ex] = n;
		n += e->pair_n[ex];
	}
	for (int i = 0; i < T * K; i++) {
		int ex = e->sel[i], p;

		if (ex < 0 || ex >= E)
			continue;
		p = at[ex]++;
		e->pair_expert[p] = ex;
		e->pair_token[p] = i / K;
		e->pair_w[p] = e->selw[i];
	}
	e->n_pairs = n;
}

/* h = silu(g) * u for pairs e->xpairs[], then h quantized (pool task). */
static void swiglu_pairs(void *arg, int t, int n_tasks)
{
	struct coli_engine *e = arg;
	int I = e->m.cfg.moe_inter, a = (int)((long)e->n_xpairs * t / n_tasks),
	    b = (int)((long)e->n_xpairs * (t + 1) / n_tasks);

	for (int i = a; i < b; i++) {
		int p = e->xpairs[i];
		float *h = e->pg + (size_t)p * I;

		coli_silu_mul(h, e->pu + (size_t)p * I, h, I);
		coli_actbuf_set(&e->ph[p], h);
		e->hag[p] = e->ph[p].act;
	}
}

/* A layer's device issue (every device's coli_moe_dev_issue, then the next
 * layer's staging prefetch when the guess is made). With COLI_GROUP_ASYNC=1
 * and CPU rows to compute it is left pending and runs on the calling thread
 * beside the CPU rows' pool round (cpu_experts): the workers start on the rows while
 * the caller queues the devices' work, so the issue is off the token's
 * critical path. A chunk whose slabs still come from disk runs it first
 * instead (the devices work while the CPU waits). */
struct dev_issue {
	struct coli_engine *e;
	struct coli_moe_layer *ml;
	int pending, prefetch;
	int *issued; /* [n_devs]: issue succeeded */
};

static void dev_issue_run(void *arg)
{
	struct dev_issue *di = arg;
	struct coli_engine *e = di->e;
	struct coli_moe_layer *ml = di->ml;
	double t0 = coli_now_s();
	int beside = di->pending;

	di->pending = 0;
	for (int d = 0; d < e->n_devs; d++) {
		if (e->devs[d]->failed)
			continue;
		/* beside a pool round, the pool is busy: gather alone */
		di->issued[d] = coli_moe_dev_issue(e, ml, d, beside ? NULL : e->pool) == 0;
		e->est.dev_fail_issue += !di->issued[d];
	}
	if (ml->tail_ok && !e->devs[0]->failed && di->issued[0])
		ml->tail_ahead.fn(e, ml, ml->tail_ahead.ctx);
	ml->tl.issue = coli_now_s();
	*(beside ? &e->est.moe_beside_s : &e->est.moe_devissue_s) += ml->tl.issue - t0;
	if (di->prefetch) /* the next layer's guess, copied while this one runs */
		coli_moe_dev_prefetch(e);
}

/* CPU rows of experts list[0..n) whose slabs (in RAM) are slabs[0..n): each
 * expert's pairs (e->pair_first/pair_n) into e->ey. One pool round of three
 * phases for all of them -- gate and up of every expert, SwiGLU of every
 * pair, down of every expert -- instead of three rounds per expert; the bits
 * are coli_gemm's and coli_silu_mul's, as expert by expert. A pending device
 * issue runs on the caller beside the round, and the phases do not wait for
 * it (as three rounds, SwiGLU and down waited for the caller: a decode
 * layer's rows ended ~20 us after the issue on the H200). */
static void cpu_experts(struct coli_engine *e, struct coli_moe_layer *ml, const int *list,
                        const void *const *slabs, int n, struct dev_issue *di)
{
	int H = e->m.cfg.hidden, I = e->m.cfg.moe_inter, nj = 0;
	int threads = coli_cpu_pool_threads(e->pool), side = di && di->pending;
	int gu_tasks = (side ? 4 : 1) * threads; /* beside a side job the workers
	                                          * share the caller's part */
	struct coli_gemm_batch gu, down;
	struct coli_pool_phase ph[3];

	coli_moe_ax_ready(e, ml); /* before the pool round that may run a device issue beside */
	e->n_xpairs = 0;
	for (int j = 0; j < n; j++) {
		int ex = list[j], p0 = e->pair_first[ex], np = e->pair_n[ex];

		coli_model_expert_at(&e->m, ml->l, slabs[j], &e->xview[j]);
		for (int i = 0; i < np; i++) {
			e->ag[p0 + i] = e->ax[e->pair_token[p0 + i]].act;
			e->xpairs[e->n_xpairs++] = p0 + i;
		}
		e->xjobs[nj++] = (struct coli_gemm_job){&e->xview[j].gate, e->ag + p0, np,
		                                        e->pg + (size_t)p0 * I, I};
		e->xjobs[nj++] = (struct coli_gemm_job){&e->xview[j].up, e->ag + p0, np,
		                                        e->pu + (size_t)p0 * I, I};
	}
	/* down reads h through e->hag, which the SwiGLU phase fills */
	for (int j = 0; j < n; j++) {
		int p0 = e->pair_first[list[j]];

		e->xjobs[nj + j] = (struct coli_gemm_job){
		    &e->xview[j].down, e->hag + p0, e->pair_n[list[j]], e->ey + (size_t)p0 * H, H};
	}
	coli_gemm_batch_init(&gu, e->xjobs, nj);
	coli_gemm_batch_init(&down, e->xjobs + nj, n);
	ph[0] = (struct coli_pool_phase){coli_gemm_batch_task, &gu,
	                                 gu_tasks < gu.units ? gu_tasks : gu.units};
	ph[1] = (struct coli_pool_phase){swiglu_pairs, e,
	                                 threads < e->n_xpairs ? threads : e->n_xpairs};
	ph[2] = (struct coli_pool_phase){coli_gemm_batch_task, &down,
	                                 threads < down.units ? threads : down.units};
	coli_cpu_pool_run_phases(e->pool, ph, 3, side ? dev_issue_run : NULL, di);
}

/* CPU rows for a list of experts (ascending): acquire from the tiers in
 * chunks, wait, compute, release. *lookahead_done says whether this layer
 * already prefetched the next one; di, if not NULL, a pending device issue.
 * Returns bytes computed, or -errno. */
static int64_t cpu_list(struct coli_engine *e, struct coli_moe_layer *ml, const int *list, int n,
                        int *lookahead_done, struct dev_issue *di)
{
	int l = ml->l;
	const struct coli_expert_layer *xl =
	    coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl);
	int64_t bytes = 0;

	for (int i = 0, k; i < n; i += k) {
		int rc;

		for (int j = i; j < n; j++)
			e->cand_n[j - i] = e->pair_n[list[j]];
		k = coli_tiers_acquire(e, l, list + i, e->cand_n, n - i, e->slab_ptr);
		if (k <= 0)
			return k < 0 ? k : -EIO;
		if (!*lookahead_done) {
			coli_lookahead(e, ml);
			if (di && di->pending)
				di->prefetch = 1; /* after the issue */
			else
				coli_moe_dev_prefetch(e);
			*lookahead_done = 1;
		}
		if (di && di->pending && !coli_tiers_ready(e))
			dev_issue_run(di); /* the devices work while the disk lands */
		rc = coli_tiers_wait(e);
		if (!rc) {
			cpu_experts(e, ml, list + i, e->slab_ptr, k, di);
			bytes += (int64_t)k * xl->slab_bytes;
		}
		coli_tiers_release(e);
		if (rc)
			return rc;
	}
	return bytes;
}

/* Whether every device is simulated (no bandwidth of its own). */
static int sim_only(const struct coli_engine *e)
{
	int sim = 1;

	for (int d = 0; d < e->n_devs; d++)
		sim = sim && !strcmp(e->devs[d]->ops->kind, "sim");
	return sim;
}

/* The cost model's share of RAM-tier experts to stream (the rest are CPU
 * rows), so that both finish together: bw_stream / (bw_cpu + bw_stream); all
 * of them with --stream only. A simulated device has no bandwidth of its own:
 * an even split keeps --gpu sim runs reproducible launch for launch (the
 * fault tests inject failures by launch count). */
double coli_moe_stream_share(const struct coli_engine *e)
{
	double bs = e->bw_stream > 0 ? e->bw_stream : 1, bc = e->bw_cpu > 0 ? e->bw_cpu : bs;

	if (!strcmp(e->opts.stream, "only"))
		return 1.0;
	return sim_only(e) ? 0.5 : bs / (bs + bc);
}

/* A prefill layer's split (T > COLI_GPU_MAX_S): an expert's CPU rows cost
 * per token once the CPU is compute-bound — slab x n / bw_cpu_pair, measured
 * on prefill layers (before the first: assumed as slow per token as decode's
 * per expert, which streams more, the cheap mistake) — but never less than
 * reading its slab (slab / bw_cpu); a streamed expert costs its copy, slab /
 * bw_stream, whatever n (the GPU's GEMM is far faster than the link). cand is
 * sorted by token count, most first: stream the first k, k the balance point
 * of the copies against the CPU rows of the rest. */
static int prefill_stream_count(const struct coli_engine *e, int l, const int *cand, int n_cand)
{
	double slab = (double)coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl)->slab_bytes;
	double bs = e->bw_stream > 0 ? e->bw_stream : 1, bc = e->bw_cpu > 0 ? e->bw_cpu : bs;
	double bp = e->bw_cpu_pair > 0 ? e->bw_cpu_pair : bc, read = slab / bc, cpu = 0;
	double best = 1e300;
	int k_best = 0;

#define CPU_COST(ex) (slab * e->pair_n[ex] / bp > read ? slab * e->pair_n[ex] / bp : read)
	if (!strcmp(e->opts.stream, "only"))
		return n_cand;
	for (int i = 0; i < n_cand; i++)
		cpu += CPU_COST(cand[i]);
	/* k streamed: copies k x slab / bs beside the CPU rows of cand[k..] */
	for (int k = 0; k <= n_cand; k++) {
		double t = k * slab / bs > cpu ? k * slab / bs : cpu;

		if (t < best)
			best = t, k_best = k;
		if (k < n_cand)
			cpu -= CPU_COST(cand[k]);
	}
#undef CPU_COST
	return k_best;
}

/* A decode layer's split: k of the n_cand RAM-tier experts streamed, the
 * rest CPU rows, each costing its slab at the link's or the CPU's rate. The
 * whole k that finishes first, min over k of max(k / bw_stream, (n_cand -
 * k) / bw_cpu) -- both finishing together as nearly as whole experts allow
 * (rounding n_cand x coli_moe_stream_share streamed two of five where the
 * link, at ~40 GB/s beside the CPU rows, then ended ~40 us after them: H200,
 * docs/perf/history/2026-11-30.md). Ties go to the CPU. A simulated device
 * keeps the even split (coli_moe_stream_share). */
int coli_moe_decode_split(int n, double bw_stream, double bw_cpu)
{
	double best = 1e300;
	int k_best = 0;

	for (int k = 0; k <= n; k++) {
		double t = k / bw_stream > (n - k) / bw_cpu ? k / bw_stream : (n - k) / bw_cpu;

		if (t < best)
			best = t, k_best = k;
	}
	return k_best;
}

static int decode_stream_count(const struct coli_engine *e, int n_cand)
{
	double bs = e->bw_stream > 0 ? e->bw_stream : 1, bc = e->bw_cpu > 0 ? e->bw_cpu : bs;

	if (!strcmp(e->opts.stream, "only") || sim_only(e))
		return (int)(n_cand * coli_moe_stream_share(e) + 0.5);
	return coli_moe_decode_split(n_cand, bs, bc);
}

/* Who computes each routed expert of layer l: the device holding it in VRAM;
 * else, for RAM-tier experts, the cost model splits them between the CPU and
 * streaming to a device so both finish together (decode_stream_count,
 * prefill_stream_count), taking the experts with the most tokens first (a
 * streamed slab costs the same whatever its token count; CPU rows cost per
 * token). Experts already in a device's staging slots (left there by an
 * earlier token, or copied a layer ahead: core/moe/moe_dev.c's prefetch) are
 * streamed first: their copy is paid, so the split applies to the rest. */
static void assign_experts(struct coli_engine *e, const struct coli_moe_layer *ml)
{
	const struct coli_model_config *c = &e->m.cfg;
	int l = ml->l, T = ml->T;
	int E = c->n_experts, n_cand = 0, k, slots_left[COLI_MAX_DEVS], d_next = 0, home = -1;
	int *cand = e->cand;
	const int *cnt = e->pair_n; /* tokens per expert, from plan_pairs */

	if (E <= 0) /* the config guarantees >= 1; this tells the compiler too */
		return;
	memset(e->assign, -1, (size_t)E);
	memset(e->streamed, 0, (size_t)E);
	for (int ex = 0; ex < E; ex++) {
		int d = e->where ? e->where[(size_t)l * E + ex] : -1;

		if (!cnt[ex])
			continue;
		if (d >= 0 && !e->devs[d]->failed)
			e->assign[ex] = (signed char)d;
		else
			cand[n_cand++] = ex;
	}
	if (!e->n_devs || !n_cand || !strcmp(e->opts.stream, "off"))
		return;
	for (int d = 0; d < e->n_devs; d++)
		slots_left[d] = e->devs[d]->failed ? 0 : coli_moe_dev_stage_room(e, d);
	/* COLI_STREAM_HOME: only the device holding the layer's dense part (its
	 * outputs then need no trip through the host when nothing else ran); by
	 * default at decode only (two H200s, a quarter of the experts on each:
	 * decode +7%, prefill no better: docs/perf/history/2026-11-30.md) */
	if ((e->opts.stream_home == 1 || (e->opts.stream_home == 2 && T <= COLI_GPU_MAX_S)) &&
	    ml->dense_dev >= 0)
		home = ml->dense_dev;
	for (int d = 0; home >= 0 && d < e->n_devs; d++)
		if (d != home)
			slots_left[d] = 0;
	/* staged a layer early (the lookahead's guess) or still in a slot: the
	 * copy is paid, stream it (on the home device only, when streaming is:
	 * what a prefill left on another would keep it busy every token) */
	for (int i = 0; i < n_cand; i++)
		for (int d = 0; d < e->n_devs; d++)
			if ((home < 0 || d == home) && coli_moe_dev_staged(e, d, l, cand[i])) {
				e->assign[cand[i]] = (signed char)d;
				e->streamed[cand[i]] = 2;
				slots_left[d]--;
				cand[i--] = cand[--n_cand];
				break;
			}
	/* a device with a slot left for new copies streams any number, in waves */
	for (int d = 0; d < e->n_devs; d++)
		slots_left[d] = slots_left[d] > 0 ? INT_MAX : 0;
	if (!n_cand)
		return;
	/* most tokens first, then ascending id (insertion sort: n_cand <= E) */
	for (int i = 1; i < n_cand; i++)
		for (int j = i;
		     j > 0 && (cnt[cand[j]] > cnt[cand[j - 1]] ||
		               (cnt[cand[j]] == cnt[cand[j - 1]] && cand[j] < cand[j - 1]));
		     j--) {
			int t = cand[j];

			cand[j] = cand[j - 1];
			cand[j - 1] = t;
		}
	/* the share of those still to copy (a staged one costs the link nothing) */
	k = T > COLI_GPU_MAX_S && !sim_only(e) ? prefill_stream_count(e, l, cand, n_cand)
	                                       : decode_stream_count(e, n_cand);
	for (int i = 0; i < n_cand && k > 0; i++) {
		int tries = 0;

		while (tries < e->n_devs && slots_left[d_next] == 0) {
			d_next = (d_next + 1) % e->n_devs;
			tries++;
		}
		if (slots_left[d_next] == 0)
			break; /* staging full: the rest stay CPU rows */
		e->assign[cand[i]] = (signed char)d_next;
		e->streamed[cand[i]] = 1;
		slots_left[d_next]--;
		d_next = (d_next + 1) % e->n_devs;
		k--;
	}
}

int coli_moe_experts(struct coli_engine *e, struct coli_moe_layer *ml)
{
	const struct coli_model_config *c = &e->m.cfg;
	int l = ml->l, T = ml->T;
	const struct coli_expert_layer *xl =
	    coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl);
	int issued[COLI_MAX_DEVS] = {0}, took[COLI_MAX_DEVS] = {0};
	struct dev_issue di = {.e = e, .ml = ml, .issued = issued};
	int *need = e->need, *redo = e->redo, n_need = 0, n_redo = 0, n_stream = 0, pinned = 0;
	int n_rows = 0;
	int lookahead_done = 0, rc = 0, first_rest;
	double t_cpu, t0 = coli_now_s(), t_take;
	int64_t cpu_bytes = 0, r;

	route_select(e, ml);
	plan_pairs(e, T);
	assign_experts(e, ml);
	ml->tl.issue = ml->tl.copy = 0;
	for (int d = 0; d < e->n_devs; d++)
		e->vram[d].ahead = 0; /* no first part queued yet (coli_moe_dev_copy_ahead) */
	e->est.moe_plan_s += coli_now_s() - t0;
	e->est.expert_uses += e->n_pairs;
	for (int ex = 0; ex < c->n_experts; ex++) {
		if (!e->pair_n[ex])
			continue;
		if (e->assign[ex] >= 0 && !e->streamed[ex]) /* VRAM: the tiers never see it */
			coli_tiers_count(e, l, ex, e->pair_n[ex]);
		if (e->assign[ex] >= 0 && e->assign[ex] == ml->preplanned && !e->streamed[ex]) {
			e->est.hits[COLI_TIER_VRAM]++; /* it ran already: no take counts it */
			e->est.bytes[COLI_TIER_VRAM] += xl->slab_bytes;
		}
		if (e->streamed[ex] == 2) /* staged: its copy read the RAM tier */
			coli_tiers_served_staged(e, l, ex, e->pair_n[ex]);
		if (e->assign[ex] < 0 || e->streamed[ex] == 1)
			need[n_need++] = ex;
		n_stream += e->streamed[ex] == 1;
		n_rows += e->assign[ex] < 0;
	}
	/* streamed slabs must be in RAM and pinned until take */
	if (n_stream) {
		double t_slabs = coli_now_s();

		for (int j = 0; j < n_need; j++)
			e->cand_n[j] = e->pair_n[need[j]];
		pinned = coli_tiers_acquire(e, l, need, e->cand_n, n_need, e->slab_ptr);
		if (pinned <= 0)
			return pinned < 0 ? pinned : -EIO;
		if (!coli_tiers_ready(e)) { /* the next layer's guess while the disk lands */
			coli_lookahead(e, ml);
			lookahead_done = 1;
		}
		rc = coli_tiers_wait(e);
		if (rc) {
			coli_tiers_release(e);
			return rc;
		}
		for (int j = 0; j < pinned; j++)
			e->host_slab[need[j]] = e->slab_ptr[j];
		e->est.moe_slabs_s += coli_now_s() - t_slabs;
		if (pinned < n_need) { /* they do not all fit: this layer copies nothing */
			for (int j = 0; j < n_need; j++)
				if (e->streamed[need[j]] == 1) {
					e->streamed[need[j]] = 0;
					e->assign[need[j]] = -1;
				}
			n_stream = 0;
		}
		/* the copies first: the link starts before the CPU rows' round, and
		 * the issue beside that round goes on from there */
		for (int d = 0; n_stream && d < e->n_devs; d++)
			if (!e->devs[d]->failed && coli_moe_dev_copy_ahead(e, ml, d) &&
			    e->devs[d]->failed) /* the issue skips it: its share goes to the CPU */
				e->est.dev_fail_issue++;
		if (!lookahead_done) {
			coli_lookahead(e, ml);
			lookahead_done = 1;
		}
	}
	/* the outputs of the device that holds the dense part stay there, each
	 * at its pair's row: no download, and core/forward/forward_dev.c uploads the
	 * CPU's and the other devices' rows beside them. At decode only when every
	 * pair is there (a few rows: one upload of all outputs with the pair
	 * lists costs less than one per run of rows), or preplanned. */
	ml->moe_on_dense = ml->preplanned;
	if (ml->moe_on_dense < 0 && ml->dense_dev >= 0) {
		int d = ml->dense_dev, stay = T > COLI_GPU_MAX_S || !n_need;

		for (int p = 0; stay && T <= COLI_GPU_MAX_S && p < e->n_pairs; p++)
			stay = e->assign[e->pair_expert[p]] == d;
		ml->moe_on_dense = stay ? d : -1;
	}
	/* issue: every device queues its experts; a failure sends its share to
	 * the CPU. Overlapped, beside the CPU rows' first round (struct dev_issue). */
	if (e->opts.group_async && n_rows) {
		di.pending = 1;
		di.prefetch = lookahead_done;
	} else {
		dev_issue_run(&di);
		if (!lookahead_done && !n_need) { /* no host slab to wait for: guess now */
			coli_lookahead(e, ml);
			lookahead_done = 1;
		}
		if (lookahead_done) /* the next layer's guess, copied while this one runs */
			coli_moe_dev_prefetch(e);
	}
	/* COLI_GROUP_ASYNC=0, for A/B: take the devices now, before the CPU rows */
	if (!e->opts.group_async)
		for (int d = 0; d < e->n_devs; d++)
			took[d] = !issued[d] ? -1 : coli_moe_dev_take(e, ml, d) == 0 ? 1 : -1;
	/* CPU rows, while the devices work: the pinned chunk first, then the rest */
	t_cpu = coli_now_s();
	e->est.moe_issue_s += t_cpu - t0;
	{
		int n_cpu = 0;

		for (int j = 0; j < pinned; j++)
			if (e->assign[need[j]] < 0) {
				e->cand[n_cpu] = need[j];
				e->slab_ptr[n_cpu++] = e->slab_ptr[j]; /* j >= n_cpu: in place */
			}
		if (n_cpu) /* the pinned chunk's CPU rows (streaming layers) */
			cpu_experts(e, ml, e->cand, e->slab_ptr, n_cpu, &di);
		cpu_bytes += (int64_t)n_cpu * xl->slab_bytes;
	}
	first_rest = pinned;
	if (pinned && !n_stream) {
		coli_tiers_release(e); /* nothing streamed: the chunk can go now */
		pinned = 0;
	}
	{
		int n_rest = 0;

		for (int j = first_rest; j < n_need; j++)
			if (e->assign[need[j]] < 0)
				e->cand[n_rest++] = need[j];
		r = n_rest ? cpu_list(e, ml, e->cand, n_rest, &lookahead_done, &di) : 0;
		if (r < 0)
			rc = (int)r;
		else
			cpu_bytes += r;
	}
	if (di.pending) /* no CPU row ran (a read failed): issue before take */
		dev_issue_run(&di);
	/* the CPU rows' rates: per expert at decode, per (expert, token) at prefill */
	if (cpu_bytes && e->n_devs) {
		double dt = coli_now_s() - t_cpu + 1e-9;

		if (T <= COLI_GPU_MAX_S) {
			double bw = cpu_bytes / dt;

			e->bw_cpu = e->bw_cpu > 0 ? 0.8 * e->bw_cpu + 0.2 * bw : bw;
		} else {
			double pair_bytes = 0, bw;

			for (int ex = 0; ex < c->n_experts; ex++)
				if (e->pair_n[ex] && e->assign[ex] < 0)
					pair_bytes += (double)e->pair_n[ex] * xl->slab_bytes;
			bw = pair_bytes / dt;
			e->bw_cpu_pair = e->bw_cpu_pair > 0 ? 0.8 * e->bw_cpu_pair + 0.2 * bw : bw;
		}
	}
	/* the device tail queued at issue reads the CPU rows' outputs: now */
	if (ml->tail_dev) {
		coli_dev_host_signal(ml->tail_dev, ml->tail_seq);
		ml->tail_dev = NULL;
	}
	/* take: a device failing now has its experts recomputed on the CPU */
	t_take = coli_now_s();
	ml->tl.cpu = t_take;
	ml->tl.copies = n_stream;
	e->est.moe_cpu_s += t_take - t_cpu;
	for (int d = 0; d < e->n_devs; d++) {
		int failed = took[d] ? took[d] < 0 : !issued[d] || coli_moe_dev_take(e, ml, d) != 0;

		e->est.dev_fail_take += failed && issued[d];
		/* (a slab CUDA_RELEASE_HOST dropped is read back by cpu_list's acquire) */
		for (int ex = 0; failed && ex < c->n_experts; ex++)
			if (e->pair_n[ex] && e->assign[ex] == d)
				redo[n_redo++] = ex;
	}
	ml->tl.take = coli_now_s();
	e->est.moe_take_s += ml->tl.take - t_take;
	if (pinned)
		coli_tiers_release(e);
	for (int j = 0; j < n_redo; j++) { /* their outputs are the CPU's, in e->ey */
		if (e->assign[redo[j]] == ml->moe_on_dense)
			ml->moe_on_dense = -1;
		e->assign[redo[j]] = -1;
	}
	if (!rc && n_redo) {
		r = cpu_list(e, ml, redo, n_redo, &lookahead_done, NULL);
		rc = r < 0 ? (int)r : 0;
	}
	if (!lookahead_done && !rc)
		coli_lookahead(e, ml); /* a failed read: still prefetch */
	coli_tiers_layer_end(e, l);
	return rc;
}

int coli_moe_block(struct coli_engine *e, struct coli_moe_layer *ml, float *out)
{
	const struct coli_model_config *c = &e->m.cfg;
	const struct coli_layer *L = &e->m.layers[ml->l];
	int H = c->hidden, T = ml->T, rc;

	route_logits(e, ml);
	rc = coli_moe_experts(e, ml);
	if (rc)
		return rc; /* a slab could not be read: e->errmsg says which */
	/* accumulate in ascending expert id, whoever computed each pair */
	memset(out, 0, sizeof(float) * T * H);
	for (int p = 0; p < e->n_pairs; p++) {
		float w = e->pair_w[p];
		float *o = out + (size_t)e->pair_token[p] * H;
		const float *y = e->ey + (size_t)p * H;

		for (int j = 0; j < H; j++)
			o[j] = o[j] + w * y[j];
	}
	if (c->shared_inter) {
		/* gate[t] = sigmoid(shexp_router . xn[t]); out[t] += gate[t] * shared(xn[t]) */
		coli_moe_ax_ready(e, ml);
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

	/* e->ax holds xn's rows: core/forward/forward.c prepared them */
	for (int t = 0; t < T; t++)
		e->ag[t] = e->ax[t].act;
	swiglu(e, &L->ffn_gate, &L->ffn_up, &L->ffn_down, T, out);
}
