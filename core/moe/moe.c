/*
 * core/moe/moe.c — the MoE scheduler: a layer's routed experts, wherever each
 * runs, for one layer call (struct coli_moe_layer, core/moe/moe.h). The call
 * is a short list of named steps over it (coli_moe_experts):
 *
 *   plan          route (softmax, top-k), the (token, expert) pairs by expert,
 *                 an owner for every routed expert (VRAM device, streamed to a
 *                 device, or CPU rows: core/moe/assign.c's cost model)
 *   pin_streamed  the streamed slabs in RAM and pinned, their first copies queued
 *   issue         every device queues its experts (beside the CPU rows' round)
 *   cpu_rows      the CPU's experts, chunk by chunk as the tiers hold them
 *   take          wait for the devices, collect their outputs
 *   redo          a device that failed at take: its experts on the CPU
 *
 * and one recorder (mark) charges each step's time to the engine's
 * statistics and the layer's timeline. core/moe/block.c is the CPU path's
 * MLP half around it (router logits, accumulation, shared expert).
 *
 * The routing and the layer's (token, expert) pairs by expert are
 * core/moe/route.c's: the tokens of one call are grouped per expert so an
 * expert's weights are read once per call, whatever T is.
 *
 * Accumulation order (part of the placement invariant): for each token the
 * routed experts' outputs are added in ascending expert id,
 *     out[j] = out[j] + w_e * y_e[j]      (product rounded, then the sum)
 * starting from +0.0, then the shared expert's gated output is added. Whoever
 * computed y_e (CPU row, resident GPU group, streamed expert), the sum is
 * formed in this order (core/moe/block.c, or the dense device's accumulate).
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
#include <string.h>
#include <time.h>

#include "core/core_internal.h"
#include "core/dev/dev.h"
#include "core/moe/moe.h"

/* One coli_moe_experts call's working state (this file's steps read and
 * write it; the layer call itself is ml). The device issue (every device's
 * coli_moe_dev_issue): with COLI_GROUP_ASYNC=1 and CPU rows to compute it is left
 * pending and runs on the calling thread beside the CPU rows' pool round
 * (cpu_experts): the workers start on the rows while the caller queues the
 * devices' work, so the issue is off the token's critical path. A chunk
 * whose slabs still come from disk runs it first instead (the devices work
 * while the CPU waits). */
struct moe_run {
	struct coli_engine *e;
	struct coli_moe_layer *ml;
	const struct coli_expert_layer *xl;
	int pending;                  /* the device issue waits to run beside the CPU rows */
	int issued[COLI_MAX_DEVS];    /* device d's issue succeeded */
	int took[COLI_MAX_DEVS];      /* taken before the CPU rows: 1 ok, -1 failed */
	int n_need, n_stream, n_rows; /* e->moe.need[0..n_need): the experts the host reads */
	int n_redo;                   /* e->moe.redo[0..n_redo): recomputed on the CPU */
	int pinned;                   /* need[0..pinned) pinned in the tiers until take */
	int lookahead_done;           /* the next layer's guess was made */
	int64_t cpu_bytes;            /* slab bytes the CPU rows read */
	double t0, t_pin, t_issue, t_cpu, t_take; /* the recorder's clock (mark) */
};

/* h = act(g, u) for pairs e->moe.xpairs[] (silu(g) * u, or gpt-oss's biased,
 * clamped form: coli_act_ffn), then h quantized (pool task over r's layer). */
static void swiglu_pairs(void *arg, int t, int n_tasks)
{
	const struct moe_run *r = arg;
	struct coli_engine *e = r->e;
	const struct coli_layer *L = &e->m.layers[r->ml->l];
	int I = e->m.cfg.moe_inter, a = (int)((long)e->moe.n_xpairs * t / n_tasks),
	    b = (int)((long)e->moe.n_xpairs * (t + 1) / n_tasks);

	for (int i = a; i < b; i++) {
		int p = e->moe.xpairs[i];
		float *h = e->moe.pg + (size_t)p * I;

		coli_act_ffn(&e->m.cfg, L, e->s.pair_expert[p], h, e->moe.pu + (size_t)p * I, h);
		coli_actbuf_set(&e->moe.ph[p], h);
		e->moe.hag[p] = e->moe.ph[p].act;
	}
}

/* The recorder: each step's end is marked once, and the time goes to the
 * engine's statistics (est.moe_*_s) and the layer's timeline (ml->tl). */
enum moe_mark {
	MOE_PLANNED,    /* route, pairs, owners */
	MOE_PINNING,    /* the streamed slabs' acquire begins */
	MOE_PINNED,     /* ... they are in RAM */
	MOE_DEV_ISSUE,  /* the devices' issue begins */
	MOE_DEV_ISSUED, /* ... every device's work is queued, */
	MOE_DEV_BESIDE, /* ... or so, beside the CPU rows' round */
	MOE_ISSUED,     /* the issue step is over: the CPU rows begin */
	MOE_CPU_DONE,   /* the CPU rows are in e->s.ey: take begins */
	MOE_TAKEN       /* every device taken */
};

static void mark(struct moe_run *r, enum moe_mark m)
{
	struct coli_engine_stats *st = &r->e->est;
	struct coli_moe_timeline *tl = &r->ml->tl;
	double now = coli_now_s();

	switch (m) {
	case MOE_PLANNED:
		st->moe_plan_s += now - r->t0;
		st->expert_uses += r->e->s.n_pairs;
		tl->issue = tl->copy = 0;
		break;
	case MOE_PINNING:
		r->t_pin = now;
		break;
	case MOE_PINNED:
		st->moe_slabs_s += now - r->t_pin;
		break;
	case MOE_DEV_ISSUE:
		r->t_issue = now;
		break;
	case MOE_DEV_ISSUED:
	case MOE_DEV_BESIDE:
		tl->issue = now;
		*(m == MOE_DEV_BESIDE ? &st->moe_beside_s : &st->moe_devissue_s) +=
		    now - r->t_issue;
		break;
	case MOE_ISSUED:
		r->t_cpu = now;
		st->moe_issue_s += now - r->t0;
		break;
	case MOE_CPU_DONE:
		r->t_take = tl->cpu = now;
		tl->copies = r->n_stream;
		st->moe_cpu_s += now - r->t_cpu;
		break;
	case MOE_TAKEN:
		tl->take = now;
		st->moe_take_s += now - r->t_take;
		break;
	}
}

static void dev_issue_run(void *arg)
{
	struct moe_run *r = arg;
	struct coli_engine *e = r->e;
	struct coli_moe_layer *ml = r->ml;
	int beside = r->pending;

	r->pending = 0;
	mark(r, MOE_DEV_ISSUE);
	for (int d = 0; d < e->vram.n_devs; d++) {
		if (e->vram.devs[d]->failed)
			continue;
		/* beside a pool round, the pool is busy: gather alone */
		r->issued[d] = coli_moe_dev_issue(e, ml, d, beside ? NULL : e->pool) == 0;
		e->est.dev_fail_issue += !r->issued[d];
	}
	if (ml->tail_ok && !e->vram.devs[0]->failed && r->issued[0])
		ml->tail_ahead.fn(e, ml, ml->tail_ahead.ctx);
	mark(r, beside ? MOE_DEV_BESIDE : MOE_DEV_ISSUED);
}

/* CPU rows of experts list[0..n) whose slabs (in RAM) are slabs[0..n): each
 * expert's pairs (e->moe.pair_first/pair_n) into e->s.ey. One pool round of three
 * phases for all of them -- gate and up of every expert, SwiGLU of every
 * pair, down of every expert -- instead of three rounds per expert; the bits
 * are coli_gemm's and coli_silu_mul's, as expert by expert. A pending device
 * issue runs on the caller beside the round, and the phases do not wait for
 * it (as three rounds, SwiGLU and down waited for the caller: a decode
 * layer's rows ended ~20 us after the issue on the H200). */
static void cpu_experts(struct moe_run *r, const int *list, const void *const *slabs, int n)
{
	struct coli_engine *e = r->e;
	struct coli_moe_layer *ml = r->ml;
	int H = e->m.cfg.hidden, I = e->m.cfg.moe_inter, nj = 0;
	int threads = coli_cpu_pool_threads(e->pool), side = r->pending;
	struct coli_gemm_batch gu, down;
	struct coli_pool_phase ph[3];

	coli_moe_ax_ready(e, ml); /* before the pool round that may run a device issue beside */
	e->moe.n_xpairs = 0;
	for (int j = 0; j < n; j++) {
		int ex = list[j], p0 = e->moe.pair_first[ex], np = e->moe.pair_n[ex];

		coli_model_expert_at(&e->m, ml->l, slabs[j], &e->moe.xview[j]);
		for (int i = 0; i < np; i++) {
			e->s.ag[p0 + i] = e->s.ax[e->s.pair_token[p0 + i]].act;
			e->moe.xpairs[e->moe.n_xpairs++] = p0 + i;
		}
		e->moe.xjobs[nj++] = (struct coli_gemm_job){&e->moe.xview[j].gate, e->s.ag + p0, np,
		                                            e->moe.pg + (size_t)p0 * I, I};
		e->moe.xjobs[nj++] = (struct coli_gemm_job){&e->moe.xview[j].up, e->s.ag + p0, np,
		                                            e->moe.pu + (size_t)p0 * I, I};
	}
	/* down reads h through e->moe.hag, which the SwiGLU phase fills */
	for (int j = 0; j < n; j++) {
		int p0 = e->moe.pair_first[list[j]];

		e->moe.xjobs[nj + j] =
		    (struct coli_gemm_job){&e->moe.xview[j].down, e->moe.hag + p0,
		                           e->moe.pair_n[list[j]], e->s.ey + (size_t)p0 * H, H};
	}
	coli_gemm_batch_init(&gu, e->moe.xjobs, nj);
	coli_gemm_batch_init(&down, e->moe.xjobs + nj, n);
	/* a few tasks a thread (coli_cpu_pool_tasks): a stalled thread, or the
	 * caller busy beside, holds back little */
	ph[0] = (struct coli_pool_phase){coli_gemm_batch_task, &gu,
	                                 coli_cpu_pool_tasks(e->pool, gu.units)};
	ph[1] = (struct coli_pool_phase){swiglu_pairs, r,
	                                 threads < e->moe.n_xpairs ? threads : e->moe.n_xpairs};
	ph[2] = (struct coli_pool_phase){coli_gemm_batch_task, &down,
	                                 coli_cpu_pool_tasks(e->pool, down.units)};
	coli_cpu_pool_run_phases(e->pool, ph, 3, side ? dev_issue_run : NULL, r);
}

/* CPU rows for a list of experts (ascending): acquire from the tiers in
 * chunks, wait, compute, release; the next layer's guess made at the first
 * chunk unless r->lookahead_done, and a pending device issue run beside the
 * rows (or before, while the disk lands). Returns bytes computed, or -errno. */
static int64_t cpu_list(struct moe_run *r, const int *list, int n)
{
	struct coli_engine *e = r->e;
	struct coli_moe_layer *ml = r->ml;
	int l = ml->l;
	int64_t bytes = 0;

	for (int i = 0, k; i < n; i += k) {
		int rc;

		for (int j = i; j < n; j++)
			e->moe.cand_n[j - i] = e->moe.pair_n[list[j]];
		k = coli_tiers_acquire(e, l, list + i, e->moe.cand_n, n - i, e->moe.slab_ptr);
		if (k <= 0)
			return k < 0 ? k : -EIO;
		if (!r->lookahead_done) {
			coli_lookahead(e, ml);
			r->lookahead_done = 1;
		}
		if (r->pending && !coli_tiers_ready(e))
			dev_issue_run(r); /* the devices work while the disk lands */
		rc = coli_tiers_wait(e);
		if (!rc) {
			cpu_experts(r, list + i, e->moe.slab_ptr, k);
			bytes += (int64_t)k * r->xl->slab_bytes;
		}
		coli_tiers_release(e);
		if (rc)
			return rc;
	}
	return bytes;
}

/* ---- the scheduler's steps, over one layer call (struct moe_run) ---- */

/* The tiers' and statistics' view of routed expert ex, planned: a VRAM
 * expert's access is counted here (the tiers never see it), one the dense
 * device preplanned is a VRAM hit already (no take counts it), a staged one
 * read the RAM tier when it was copied. */
static void count_expert(struct moe_run *r, int ex)
{
	struct coli_engine *e = r->e;
	int l = r->ml->l, n = e->moe.pair_n[ex];

	if (e->moe.assign[ex] >= 0 && !e->moe.streamed[ex]) /* VRAM: the tiers never see it */
		coli_tiers_count(e, l, ex, n);
	if (e->moe.assign[ex] >= 0 && e->moe.assign[ex] == r->ml->preplanned &&
	    !e->moe.streamed[ex]) {
		e->est.hits[COLI_TIER_VRAM]++; /* it ran already: no take counts it */
		e->est.bytes[COLI_TIER_VRAM] += r->xl->slab_bytes;
	}
	if (e->moe.streamed[ex] == 2) /* staged: its copy read the RAM tier */
		coli_tiers_served_staged(e, l, ex, n);
}

/* plan: the routing, the layer's pairs by expert, an owner for every routed
 * expert (coli_moe_assign) and the experts the host reads, in e->moe.need: its
 * CPU rows and the slabs it streams. */
static void plan(struct moe_run *r)
{
	struct coli_engine *e = r->e;

	coli_moe_route(e, r->ml);
	coli_moe_pairs(e, r->ml->T);
	coli_moe_assign(e, r->ml);
	for (int d = 0; d < e->vram.n_devs; d++)
		e->vram.slot[d].ahead = 0; /* no first part queued yet (coli_moe_dev_copy_ahead) */
	mark(r, MOE_PLANNED);
	for (int ex = 0; ex < e->m.cfg.n_experts; ex++) {
		if (!e->moe.pair_n[ex])
			continue;
		count_expert(r, ex);
		if (e->moe.assign[ex] < 0 || e->moe.streamed[ex] == 1)
			e->moe.need[r->n_need++] = ex;
		r->n_stream += e->moe.streamed[ex] == 1;
		r->n_rows += e->moe.assign[ex] < 0;
	}
}

/* Streamed slabs must be in RAM and pinned until take: the host's experts
 * acquired as one chunk (the next layer's guess made while the disk lands);
 * if they do not all fit, this layer streams nothing. Then each device's
 * first copies are queued at once (coli_moe_dev_copy_ahead): the link starts
 * before the CPU rows' round, and the issue beside that round goes on from
 * there. */
static int pin_streamed(struct moe_run *r)
{
	struct coli_engine *e = r->e;
	const int *need = e->moe.need;
	int rc;

	if (!r->n_stream)
		return 0;
	mark(r, MOE_PINNING);
	for (int j = 0; j < r->n_need; j++)
		e->moe.cand_n[j] = e->moe.pair_n[need[j]];
	r->pinned =
	    coli_tiers_acquire(e, r->ml->l, need, e->moe.cand_n, r->n_need, e->moe.slab_ptr);
	if (r->pinned <= 0)
		return r->pinned < 0 ? r->pinned : -EIO;
	if (!coli_tiers_ready(e)) { /* the next layer's guess while the disk lands */
		coli_lookahead(e, r->ml);
		r->lookahead_done = 1;
	}
	rc = coli_tiers_wait(e);
	if (rc) {
		coli_tiers_release(e);
		return rc;
	}
	for (int j = 0; j < r->pinned; j++)
		e->moe.host_slab[need[j]] = e->moe.slab_ptr[j];
	mark(r, MOE_PINNED);
	if (r->pinned < r->n_need) { /* they do not all fit: this layer copies nothing */
		for (int j = 0; j < r->n_need; j++)
			if (e->moe.streamed[need[j]] == 1) {
				e->moe.streamed[need[j]] = 0;
				e->moe.assign[need[j]] = -1;
			}
		r->n_stream = 0;
	}
	for (int d = 0; r->n_stream && d < e->vram.n_devs; d++)
		if (!e->vram.devs[d]->failed && coli_moe_dev_copy_ahead(e, r->ml, d) &&
		    e->vram.devs[d]->failed) /* the issue skips it: its share goes to the CPU */
			e->est.dev_fail_issue++;
	if (!r->lookahead_done) {
		coli_lookahead(e, r->ml);
		r->lookahead_done = 1;
	}
	return 0;
}

/* The outputs of the device that holds the dense part stay there, each at
 * its pair's row: no download, and core/forward/layer_host.c uploads the
 * CPU's and the other devices' rows beside them. At decode only when every
 * pair is there (a few rows: one upload of all outputs with the pair lists
 * costs less than one per run of rows), or preplanned. Not where the
 * experts have a down bias (gpt-oss): it joins every row on the host first
 * (layer_host.c), as core/moe/block.c's accumulation adds it. */
static void outputs_where(struct moe_run *r)
{
	struct coli_engine *e = r->e;
	struct coli_moe_layer *ml = r->ml;

	ml->moe_on_dense = ml->preplanned;
	if (ml->moe_on_dense < 0 && ml->dense_dev >= 0 && !e->m.layers[ml->l].exp_down_bias) {
		int d = ml->dense_dev, stay = ml->T > COLI_GPU_MAX_S || !r->n_need;

		for (int p = 0; stay && ml->T <= COLI_GPU_MAX_S && p < e->s.n_pairs; p++)
			stay = e->moe.assign[e->s.pair_expert[p]] == d;
		ml->moe_on_dense = stay ? d : -1;
	}
}

/* issue: every device queues its experts; a failure sends its share to the
 * CPU. Overlapped, beside the CPU rows' first round (struct moe_run), when
 * there are CPU rows. COLI_GROUP_ASYNC=0, for A/B: the devices are taken
 * now, before the CPU rows. */
static void issue(struct moe_run *r)
{
	struct coli_engine *e = r->e;

	if (e->opts.group_async && r->n_rows) {
		r->pending = 1;
	} else {
		dev_issue_run(r);
		if (!r->lookahead_done && !r->n_need) { /* no host slab to wait for: guess now */
			coli_lookahead(e, r->ml);
			r->lookahead_done = 1;
		}
	}
	if (!e->opts.group_async)
		for (int d = 0; d < e->vram.n_devs; d++)
			r->took[d] = !r->issued[d]                         ? -1
			             : coli_moe_dev_take(e, r->ml, d) == 0 ? 1
			                                                   : -1;
	mark(r, MOE_ISSUED);
}

/* CPU rows, while the devices work: those of the pinned chunk first
 * (streaming layers), then the rest, acquired chunk by chunk. A device
 * issue still pending (no CPU row ran: a read failed) runs before take. */
static int cpu_rows(struct moe_run *r)
{
	struct coli_engine *e = r->e;
	const int *need = e->moe.need;
	int n_cpu = 0, n_rest = 0, first_rest = r->pinned, rc = 0;
	int64_t b;

	for (int j = 0; j < r->pinned; j++)
		if (e->moe.assign[need[j]] < 0) {
			e->moe.cand[n_cpu] = need[j];
			e->moe.slab_ptr[n_cpu++] = e->moe.slab_ptr[j]; /* j >= n_cpu: in place */
		}
	if (n_cpu)
		cpu_experts(r, e->moe.cand, e->moe.slab_ptr, n_cpu);
	r->cpu_bytes += (int64_t)n_cpu * r->xl->slab_bytes;
	if (r->pinned && !r->n_stream) {
		coli_tiers_release(e); /* nothing streamed: the chunk can go now */
		r->pinned = 0;
	}
	for (int j = first_rest; j < r->n_need; j++)
		if (e->moe.assign[need[j]] < 0)
			e->moe.cand[n_rest++] = need[j];
	b = n_rest ? cpu_list(r, e->moe.cand, n_rest) : 0;
	if (b < 0)
		rc = (int)b;
	else
		r->cpu_bytes += b;
	if (r->pending)
		dev_issue_run(r);
	return rc;
}

/* The cost model's CPU rates from the rows just computed: per expert at
 * decode (bw_cpu), per (expert, token) at prefill (bw_cpu_pair). */
static void cpu_rates(struct moe_run *r)
{
	struct coli_engine *e = r->e;
	double dt;

	if (!r->cpu_bytes || !e->vram.n_devs)
		return;
	dt = coli_now_s() - r->t_cpu + 1e-9;
	if (r->ml->T <= COLI_GPU_MAX_S) {
		double bw = r->cpu_bytes / dt;

		e->moe.bw_cpu = e->moe.bw_cpu > 0 ? 0.8 * e->moe.bw_cpu + 0.2 * bw : bw;
	} else {
		double pair_bytes = 0, bw;

		for (int ex = 0; ex < e->m.cfg.n_experts; ex++)
			if (e->moe.pair_n[ex] && e->moe.assign[ex] < 0)
				pair_bytes += (double)e->moe.pair_n[ex] * r->xl->slab_bytes;
		bw = pair_bytes / dt;
		e->moe.bw_cpu_pair =
		    e->moe.bw_cpu_pair > 0 ? 0.8 * e->moe.bw_cpu_pair + 0.2 * bw : bw;
	}
}

/* take: wait for each device and collect its outputs; a device failing now
 * has its experts listed in e->moe.redo. */
static void take(struct moe_run *r)
{
	struct coli_engine *e = r->e;

	for (int d = 0; d < e->vram.n_devs; d++) {
		int failed = r->took[d] ? r->took[d] < 0
		                        : !r->issued[d] || coli_moe_dev_take(e, r->ml, d) != 0;

		e->est.dev_fail_take += failed && r->issued[d];
		/* (a slab CUDA_RELEASE_HOST dropped is read back by cpu_list's acquire) */
		for (int ex = 0; failed && ex < e->m.cfg.n_experts; ex++)
			if (e->moe.pair_n[ex] && e->moe.assign[ex] == d)
				e->moe.redo[r->n_redo++] = ex;
	}
}

/* redo: the failed devices' experts recomputed on the CPU (their outputs
 * are then the CPU's, in e->s.ey), unless a read failed already (rc); the
 * next layer's guess made if nothing made it. */
static int redo(struct moe_run *r, int rc)
{
	struct coli_engine *e = r->e;
	struct coli_moe_layer *ml = r->ml;

	for (int j = 0; j < r->n_redo; j++) {
		if (e->moe.assign[e->moe.redo[j]] == ml->moe_on_dense)
			ml->moe_on_dense = -1;
		e->moe.assign[e->moe.redo[j]] = -1;
	}
	if (!rc && r->n_redo) {
		int64_t b = cpu_list(r, e->moe.redo, r->n_redo);

		rc = b < 0 ? (int)b : 0;
	}
	if (!r->lookahead_done && !rc)
		coli_lookahead(e, ml); /* a failed read: still prefetch */
	return rc;
}

int coli_moe_experts(struct coli_engine *e, struct coli_moe_layer *ml)
{
	struct moe_run r = {.e = e,
	                    .ml = ml,
	                    .xl = coli_io_container_expert_layer(e->m.c, e->m.layers[ml->l].xl),
	                    .t0 = coli_now_s()};
	int rc;

	plan(&r);
	rc = pin_streamed(&r);
	if (rc)
		return rc;
	outputs_where(&r);
	issue(&r);
	rc = cpu_rows(&r);
	cpu_rates(&r);
	if (ml->tail_dev) { /* the device tail queued at issue reads the CPU rows' outputs: now */
		coli_dev_host_signal(ml->tail_dev, ml->tail_seq);
		ml->tail_dev = NULL;
	}
	mark(&r, MOE_CPU_DONE);
	take(&r);
	mark(&r, MOE_TAKEN);
	if (r.pinned) /* the streamed slabs' copies have landed */
		coli_tiers_release(e);
	rc = redo(&r, rc);
	coli_tiers_layer_end(e, ml->l);
	return rc;
}
