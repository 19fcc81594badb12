/*
 * core/moe/moe_dev.c — routed experts on devices: the issue / take halves of a
 * layer's device work, the devices' working buffers and staging slots.
 * Which experts are resident where (the VRAM tier: placement at open,
 * adaptation between tokens), and each device's working buffers and staging
 * slots (struct coli_dev_slot), are core/place/vram.c's; where[l][e] says which device
 * holds an expert (-1: host), dev_slab[l][e] its slab there, in the
 * container's layout (gate/up/down offsets are the container's).
 *
 * A layer on device d (compute stream, nothing waits on the host):
 *   copy     the gate and up parts of the first wave's streamed slabs not
 *            staged yet (copy stream, queued first: see Streaming)
 *   gather   pair activations in expert order         [P][H] int8 + scales, or f32:
 *            on this device from the tokens' rows when it holds the dense
 *            part (ml->dev_rows), else on the host and uploaded
 *   then per wave of experts (one wave at decode, see Streaming):
 *   gemv     gate and up of the wave's experts        -> g, u [P][I]   (one launch)
 *   silu     h = silu(g) * u over the wave's rows      [P][I]          (one launch,
 *            and h -> int8 per 32-block for q8/q4 models in the same one)
 *   copy     the down parts of the slabs this wave copies (crossing while
 *            gate, up and silu run)
 *   gemv     down of the wave's experts                -> y [P][H]     (one launch)
 *   download y to host staging (not on the device that holds the dense part
 *            when core/moe/moe.c's moe_on_dense names it: y's rows are then at
 *            their pair index and core/forward/forward_dev.c reads them there)
 * An expert with COLI_GPU_GEMM_MIN_S pairs or more (prefill; q8/q4:
 * COLI_GPU_GEMM_MIN_S_Q, block types _MIN_S_KQ) runs its matrices as tensor-core GEMM jobs
 * instead (ptx/expert/gemm.cu, ptx/expert/kquant_gemm.cu: quantized types bit-identical to
 * the GEMV, bf16 within rounding), in one more launch next to each gemv. take()
 * waits for the stream and scatters y into the engine's per-pair outputs; core/moe/moe.c then
 * accumulates all pairs in ascending expert order, whoever computed them, so the bits do not depend
 * on placement. A preplanned layer (core/forward/forward_dev.c, ml->preplanned == d): its resident
 * experts already ran with the routing, so only streamed ones are issued here, their y rows at
 * their pair index (pair0) beside the resident ones. On the dense part's device take waits for
 * nothing but the layer's slab copies (their host slabs are unpinned after it).
 *
 * Streaming: a RAM-tier expert assigned to a device by the cost model
 * (core/moe/moe.c) is computed from one of the device's staging slots, an LRU
 * cache tagged (layer, expert). Copies run on the device's copy stream;
 * per slot, a *full* event orders copy -> compute and a *free* event orders
 * the last reader -> the next copy (ptx/gpu_stream.c). The slots keep what they
 * hold for later tokens (a staged hit costs no copy). A layer with more new copies
 * than half the free slots goes in waves that reuse the slots of the wave
 * before. The cost model's bandwidths: streaming is timed at open (a
 * slab-sized upload) and recalibrated at every take that had to wait (then
 * the device time is known); CPU rows are timed as they run.
 *
 * CUDA_RELEASE_HOST=1: once a slab is resident (placement, or a swap in
 * adapt), its host copies are dropped (core/place/tiers.c: RAM slot, mapping,
 * page cache); if the device fails, core/moe/moe.c's CPU path reads it back
 * from disk through the tiers, counted as a reload.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core_internal.h"
#include "core/dev/dev.h"
#include "core/moe/moe.h"

#define MARK_ISSUE 0 /* --profile: the device reaches a layer's expert work */
#define MARK_DONE  1 /* ... and finishes it */

size_t coli_quant_plane_bytes(enum coli_dtype t, size_t rows, size_t K)
{
	return t == COLI_DTYPE_Q8_0 ? rows * K : t == COLI_DTYPE_Q4_0 ? rows * K / 2 : 0;
}

/* Device view of one matrix inside a resident slab. */
static void job_matrix(struct coli_gpu_gemv_job *j, enum coli_dtype t, uint64_t base, int rows,
                       int K)
{
	size_t qb = coli_quant_plane_bytes(t, rows, K);

	j->w = (const void *)(uintptr_t)base;
	j->scales = qb ? (const unsigned short *)(uintptr_t)(base + qb) : NULL;
	j->rows = rows;
	j->K = K;
}

/* Activation operands: pair row `row` of device buffers [P][K] (q), their
 * block scales and sums [P][K/32], or f32 [P][K]. */
static void job_input(struct coli_gpu_gemv_job *j, uint64_t q, uint64_t d, uint64_t qs, uint64_t f,
                      int row, int K)
{
	j->xq = (const signed char *)(uintptr_t)(q + (size_t)row * K);
	j->xd = (const float *)(uintptr_t)(d + (size_t)row * (K / 32) * 4);
	j->xqsum = (const int *)(uintptr_t)(qs + (size_t)row * (K / 32) * 4);
	j->xf = (const float *)(uintptr_t)(f + (size_t)row * K * 4);
}

/* Queue matrix j times its n pairs: GEMV jobs of up to COLI_GPU_MAX_S pairs,
 * or one tensor-core GEMM job for a run of COLI_GPU_GEMM_MIN_S (q8/q4:
 * _MIN_S_Q, GGUF's block types: _MIN_S_KQ) or more (prefill). Quantized
 * types' bits are the same either way. A down
 * of another dtype than gate and up (a GGUF mix kept as stored: Q4_K gate
 * and up, Q6_K down) is its own launch anyway. */
static void add_job(struct coli_dev_slot *v, enum coli_dtype t, const struct coli_gpu_gemv_job *j,
                    int n, int *nj, int *ngj)
{
	struct coli_gpu_gemm_job *g;
	int nb = j->K / 32;

	const int min_s = t == COLI_DTYPE_BF16     ? COLI_GPU_GEMM_MIN_S
	                  : coli_dtype_is_block(t) ? COLI_GPU_GEMM_MIN_S_KQ
	                                           : COLI_GPU_GEMM_MIN_S_Q;

	if (n < min_s) {
		for (int s0 = 0; s0 < n; s0 += COLI_GPU_MAX_S) {
			struct coli_gpu_gemv_job *c = &v->jobs[(*nj)++];

			*c = *j;
			c->S = n - s0 < COLI_GPU_MAX_S ? n - s0 : COLI_GPU_MAX_S;
			c->xq = j->xq + (size_t)s0 * j->K;
			c->xd = j->xd + (size_t)s0 * nb;
			c->xqsum = j->xqsum + (size_t)s0 * nb;
			c->xf = j->xf + (size_t)s0 * j->K;
			c->y = j->y + (size_t)s0 * j->ldy;
		}
		return;
	}
	g = &v->gjobs[(*ngj)++];
	memset(g, 0, sizeof(*g));
	g->w = j->w, g->scales = j->scales, g->xq = j->xq, g->xd = j->xd, g->xqsum = j->xqsum;
	g->xf = j->xf, g->y = j->y, g->rows = j->rows, g->K = j->K, g->S = n, g->ldy = j->ldy;
}

/* The queued jobs of one step: GEMV launches (one, or several of
 * COLI_GPU_MAX_JOBS: a prefill chunk's many short runs) and/or a GEMM
 * launch. */
static int launch_jobs(struct coli_dev_slot *v, enum coli_dtype t, int nj, int ngj)
{
	int rc = 0;

	for (int j0 = 0; j0 < nj && !rc; j0 += COLI_GPU_MAX_JOBS)
		rc = coli_dev_gemv(v->dev,
		                   &(struct coli_dev_jobs){.t = t,
		                                           .jobs = v->jobs + j0,
		                                           .n_jobs = nj - j0 < COLI_GPU_MAX_JOBS
		                                                         ? nj - j0
		                                                         : COLI_GPU_MAX_JOBS});

	return rc || !ngj
	           ? rc
	           : coli_dev_gemm(v->dev, &(struct coli_dev_jobs){
	                                       .t = t, .gemm_jobs = v->gjobs, .n_jobs = ngj});
}

/* ---- staging slots ---- */

static int stage_find(const struct coli_dev_slot *v, int l, int ex)
{
	for (int i = 0; i < v->n_stage; i++)
		if (v->st[i].l == l && v->st[i].ex == ex)
			return i;
	return -1;
}

/* Least recently used slot not claimed this round, or -1. Recency is per copy and
 * per wave, not per round: a wave's slots, released for the next wave, are
 * the last picked, so a layer streaming more experts than there are slots
 * copies into slots the wave before is not reading (in round order every
 * slot tied and the next wave's copies waited for the previous wave's down:
 * copy and compute ran one after the other). */
static int stage_victim(const struct coli_dev_slot *v)
{
	int best = -1;

	for (int i = 0; i < v->n_stage; i++)
		if (v->st[i].used < v->st_clock && (best < 0 || v->st[i].last < v->st[best].last))
			best = i;
	return best;
}

/* Slot s receives expert ex of layer l, claimed this round. */
static void stage_fill(struct coli_dev_slot *v, int s, int l, int ex)
{
	v->st[s] = (struct dev_stage){.l = l, .ex = ex, .used = v->st_clock, .last = ++v->st_tick};
}

/* Staging slots device d can fill now. */
int coli_moe_dev_stage_room(struct coli_engine *e, int d)
{
	const struct coli_dev_slot *v = &e->vram.slot[d];

	return v->st ? v->n_stage : 0;
}

/* Is expert ex of layer l already staged on device d (a copy landed or in
 * flight)? core/moe/moe.c streams such experts first: their copy is paid. */
int coli_moe_dev_staged(struct coli_engine *e, int d, int l, int ex)
{
	const struct coli_dev_slot *v = &e->vram.slot[d];

	return v->st && !v->dev->failed && stage_find(v, l, ex) >= 0;
}

/* The copies of wave [r0, r1) of device d's layer: its streamed slabs that
 * are not staged yet, from the pinned host slabs into the least recently
 * used free slots, on the copy stream. The first wave's are queued before
 * the activations' gather (coli_moe_dev_issue), so the link starts at once.
 * Only the gate and up part of each slab here ([0, down_off)): wave_compute
 * queues the down parts behind the gate and up launches, so those run while
 * the downs cross the link (a slot's event is the last copy's: the gate and
 * up launches wait for the first parts, down for the rest). */
static int wave_copies(struct coli_engine *e, struct coli_moe_layer *ml, int d, int r0, int r1)
{
	struct coli_dev_slot *v = &e->vram.slot[d];
	int l = ml->l;
	const struct coli_expert_layer *xl =
	    coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl);

	for (int r = r0; r < r1; r++) {
		struct dev_run *run = &v->runs[r];
		int ex = run->expert, rc;

		if (!e->moe.streamed[ex])
			continue;
		/* RAM tier: staged a layer early, or copied now */
		run->stage = stage_find(v, l, ex);
		if (run->stage >= 0) {
			e->est.stream_staged_hits++;
		} else {
			run->stage = stage_victim(v);
			if (run->stage < 0 || e->moe.streamed[ex] != 1)
				return -ENOSPC; /* the wave cap counts the slots */
			rc = coli_dev_stage_copy(v->dev, run->stage,
			                         v->stage + (uint64_t)run->stage * v->stage_bytes,
			                         e->moe.host_slab[ex], xl->down_off);
			if (rc)
				return rc;
			if (!ml->tl.copy)
				ml->tl.copy = coli_now_s();
			run->tail = 1;
			stage_fill(v, run->stage, l, ex);
			v->streamed_bytes += xl->slab_bytes;
		}
		run->slab = v->stage + (uint64_t)run->stage * v->stage_bytes;
	}
	return 0;
}

/* A failed issue: slots whose down part was never copied hold no expert. */
static void drop_tails(struct coli_dev_slot *v)
{
	for (int r = 0; r < v->n_runs; r++)
		if (v->runs[r].tail) {
			v->st[v->runs[r].stage].l = -1;
			v->runs[r].tail = 0;
		}
}

/* Gate and up of wave [r0, r1) of v's runs: g, u [rows][I] = W . x, each
 * run's input its staged rows, or (direct) its pair's row of the dense part. */
static int gate_up_queue(struct coli_engine *e, const struct coli_moe_layer *ml,
                         struct coli_dev_slot *v, const struct coli_expert_layer *xl, int r0,
                         int r1)
{
	enum coli_dtype t = xl->dtype;
	int H = e->m.cfg.hidden, I = e->m.cfg.moe_inter, nj = 0, ngj = 0;

	for (int r = r0; r < r1; r++)
		for (int m = 0; m < 2; m++) {
			struct coli_gpu_gemv_job j;

			memset(&j, 0, sizeof(j));
			job_matrix(&j, t, v->runs[r].slab + (m ? xl->up_off : xl->gate_off), I, H);
			if (v->direct) /* its one pair's token row, where the dense part left it */
				job_input(&j, ml->dev_rows.q, ml->dev_rows.d, ml->dev_rows.qs,
				          ml->dev_rows.f, e->s.pair_token[v->runs[r].pair0], H);
			else
				job_input(&j, v->xq, v->xd, v->xqs, v->xf, v->runs[r].row0, H);
			j.y = (float *)(uintptr_t)((m ? v->u : v->g) +
			                           (size_t)v->runs[r].row0 * I * 4);
			j.ldy = I;
			add_job(v, t, &j, v->runs[r].n, &nj, &ngj);
		}
	return launch_jobs(v, t, nj, ngj);
}

/* Down of wave [r0, r1): y[P][H] = W_down . h; on the dense part's device
 * (d == ml->moe_on_dense) each run's outputs go to its pairs' rows. */
static int down_queue(const struct coli_moe_layer *ml, int d, struct coli_dev_slot *v,
                      const struct coli_expert_layer *xl, int H, int I, int r0, int r1)
{
	enum coli_dtype t = coli_io_expert_down_dtype(xl);
	int nj = 0, ngj = 0;

	for (int r = r0; r < r1; r++) {
		struct coli_gpu_gemv_job j;

		memset(&j, 0, sizeof(j));
		job_matrix(&j, t, v->runs[r].slab + xl->down_off, H, I);
		job_input(&j, v->hq, v->hd, v->hqs, v->h, v->runs[r].row0, I);
		/* on the dense part's device, the outputs go to their pair's row */
		j.y =
		    (float *)(uintptr_t)(v->y + (size_t)(ml->moe_on_dense == d ? v->runs[r].pair0
		                                                               : v->runs[r].row0) *
		                                    H * 4);
		j.ldy = H;
		add_job(v, t, &j, v->runs[r].n, &nj, &ngj);
	}
	return launch_jobs(v, t, nj, ngj);
}

/* gpt-oss's activation of run r's rows (one expert): its gate and up biases
 * (v->xbias, uploaded at open) added, the clamped SwiGLU, h quantized for
 * q8/q4: coli_act_ffn's bits (struct coli_dev_silu says how). */
static int oai_queue(struct coli_engine *e, const struct coli_moe_layer *ml,
                     struct coli_dev_slot *v, int r, int quant)
{
	const struct coli_model_config *c = &e->m.cfg;
	size_t I = (size_t)c->moe_inter, row = (size_t)v->runs[r].row0;
	uint64_t at = (uint64_t)v->runs[r].expert * I * 4; /* its row of each table */
	uint64_t bg = coli_moe_dev_xbias(e, v, ml->l, COLI_XBIAS_GATE);
	uint64_t bu = coli_moe_dev_xbias(e, v, ml->l, COLI_XBIAS_UP);

	return coli_dev_silu_mul(v->dev,
	                         &(struct coli_dev_silu){.g = v->g + row * I * 4,
	                                                 .u = v->u + row * I * 4,
	                                                 .h = v->h + row * I * 4,
	                                                 .q = quant ? v->hq + row * I : 0,
	                                                 .qd = v->hd + row * (I / 32) * 4,
	                                                 .qsum = v->hqs + row * (I / 32) * 4,
	                                                 .n = v->runs[r].n * (int)I,
	                                                 .kind = COLI_ACT_SWIGLU_OAI,
	                                                 .alpha = c->act_alpha,
	                                                 .limit = c->act_limit,
	                                                 .bg = bg ? bg + at : 0,
	                                                 .bu = bu ? bu + at : 0,
	                                                 .I = (int)I});
}

/* Queue wave [r0, r1) of device d's layer, its copies queued (wave_copies):
 * the compute stream waits for its staged slabs, then gate and up, SwiGLU,
 * quantization and down over the wave's rows. A wave's staging slots are
 * freed for the next wave once its down is queued (the copy stream waits for
 * it on the slot's event), so a layer may stream more experts than there are
 * slots. */
static int wave_compute(struct coli_engine *e, const struct coli_moe_layer *ml, int d, int r0,
                        int r1, int more)
{
	int l = ml->l;
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_dev_slot *v = &e->vram.slot[d];
	const struct coli_expert_layer *xl =
	    coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl);
	enum coli_dtype t = xl->dtype;
	int H = c->hidden, I = c->moe_inter, quant = coli_dtype_is_quant(t);
	int rc = 0, row_a = v->runs[r0].row0;
	int rows = v->runs[r1 - 1].row0 + v->runs[r1 - 1].n - row_a;

	for (int r = r0; r < r1; r++)
		if (e->moe.streamed[v->runs[r].expert]) {
			rc = coli_dev_stage_use(v->dev, v->runs[r].stage);
			if (rc)
				return rc;
		}
	rc = gate_up_queue(e, ml, v, xl, r0, r1);
	if (c->ffn_act == COLI_ACT_SWIGLU_OAI) /* gpt-oss: a launch an expert, its biases */
		for (int r = r0; !rc && r < r1; r++)
			rc = oai_queue(e, ml, v, r, quant);
	else
		rc = rc ? rc /* h, and for q8/q4 its quantized form, in one launch */
		        : coli_dev_silu_mul(
		              v->dev,
		              &(struct coli_dev_silu){.g = v->g + (size_t)row_a * I * 4,
		                                      .u = v->u + (size_t)row_a * I * 4,
		                                      .h = v->h + (size_t)row_a * I * 4,
		                                      .q = quant ? v->hq + (size_t)row_a * I : 0,
		                                      .qd = v->hd + (size_t)row_a * (I / 32) * 4,
		                                      .qsum = v->hqs + (size_t)row_a * (I / 32) * 4,
		                                      .n = rows * I});
	/* the down parts of the slabs this wave copies, then down waits for them */
	for (int r = r0; !rc && r < r1; r++)
		if (v->runs[r].tail) {
			rc = coli_dev_stage_copy(
			    v->dev, v->runs[r].stage, v->runs[r].slab + xl->down_off,
			    (const char *)e->moe.host_slab[v->runs[r].expert] + xl->down_off,
			    xl->slab_bytes - xl->down_off);
			rc = rc ? rc : coli_dev_stage_use(v->dev, v->runs[r].stage);
			v->runs[r].tail = 0;
		}
	if (rc)
		return rc;
	rc = down_queue(ml, d, v, xl, H, I, r0, r1);
	for (int r = r0; !rc && r < r1; r++) /* the staged slabs' last reader is queued */
		if (v->runs[r].stage >= 0) {
			rc = coli_dev_stage_done(v->dev, v->runs[r].stage);
			v->st[v->runs[r].stage].last = ++v->st_tick;
			if (more) /* the next wave may reuse the slot, after the others */
				v->st[v->runs[r].stage].used = v->st_clock - 1;
		}
	return rc;
}

/* Copy the activations of staging rows [r0, r1) of v's runs from their
 * tokens' (e->s.ax) into the upload staging. */
struct gather {
	struct coli_engine *e;
	struct coli_dev_slot *v;
	int quant;
};

static void gather_task(void *arg, int task, int n_tasks)
{
	const struct gather *g = arg;
	const struct coli_dev_slot *v = g->v;
	struct coli_engine *e = g->e;
	int H = e->m.cfg.hidden, r0 = v->P * task / n_tasks, r1 = v->P * (task + 1) / n_tasks;

	for (int k = 0; k < v->n_runs; k++) {
		const struct dev_run *run = &v->runs[k];
		int a = r0 > run->row0 ? r0 : run->row0;
		int b = r1 < run->row0 + run->n ? r1 : run->row0 + run->n;

		for (int r = a; r < b; r++) {
			const struct coli_act *x =
			    &e->s.ax[e->s.pair_token[run->pair0 + r - run->row0]].act;

			if (g->quant) {
				memcpy(v->sx_q + (size_t)r * H, x->q, (size_t)H);
				memcpy(v->sx_d + (size_t)r * (H / 32), x->d,
				       sizeof(float) * (H / 32));
				memcpy(v->sx_s + (size_t)r * (H / 32), x->qsum,
				       sizeof(int32_t) * (H / 32));
			} else {
				memcpy(v->sx_f + (size_t)r * H, x->f, sizeof(float) * H);
			}
		}
	}
}

/* The pairs' activation rows: gathered on the host (over the pool for a
 * prefill chunk's megabytes) and uploaded, ... */
static int gather_upload(struct coli_engine *e, struct coli_moe_layer *ml, struct coli_dev_slot *v,
                         int quant, coli_cpu_pool_t *pool)
{
	struct gather g = {e, v, quant};
	int H = e->m.cfg.hidden, P = v->P, rc = 0;

	coli_moe_ax_ready(e, ml); /* beside the CPU rows, cpu_experts made them before */
	coli_cpu_pool_run(P < 64 ? NULL : pool, gather_task, &g,
	                  P < 64 || !pool ? 1 : coli_cpu_pool_threads(pool));
	if (e->opts.profile || e->opts.cuda_profile) /* the device's expert work, timed */
		rc = coli_dev_mark(v->dev, MARK_ISSUE);
	if (quant) {
		rc = rc ? rc : coli_dev_upload_async(v->dev, v->xq, v->sx_q, (size_t)P * H);
		rc =
		    rc ? rc : coli_dev_upload_async(v->dev, v->xd, v->sx_d, (size_t)P * H / 32 * 4);
		rc = rc ? rc
		        : coli_dev_upload_async(v->dev, v->xqs, v->sx_s, (size_t)P * H / 32 * 4);
		e->est.h2d_bytes += (size_t)P * H + (size_t)P * H / 32 * 8;
	} else {
		rc = rc ? rc : coli_dev_upload_async(v->dev, v->xf, v->sx_f, (size_t)P * H * 4);
		e->est.h2d_bytes += (size_t)P * H * 4;
	}
	return rc;
}

/* ... or, when the tokens' rows are already on this device (ml->dev_rows),
 * gathered there: only each row's token goes up (a 256-token prefill chunk
 * of qwen3-30b moved 5 MB a layer over PCIe). The same bytes: the device
 * quantized the rows with coli_act_quantize's steps. */
static int gather_on_device(struct coli_engine *e, const struct coli_moe_layer *ml,
                            struct coli_dev_slot *v, int quant)
{
	int H = e->m.cfg.hidden, P = v->P, rc = 0;

	for (int k = 0; k < v->n_runs; k++)
		for (int r = 0; r < v->runs[k].n; r++)
			v->sx_tok[v->runs[k].row0 + r] = e->s.pair_token[v->runs[k].pair0 + r];
	if (e->opts.profile || e->opts.cuda_profile)
		rc = coli_dev_mark(v->dev, MARK_ISSUE);
	rc = rc ? rc : coli_dev_upload_async(v->dev, v->tok, v->sx_tok, sizeof(int) * P);
	e->est.h2d_bytes += sizeof(int) * (size_t)P;
	if (!quant)
		return rc ? rc
		          : coli_dev_gather_rows(
		                v->dev, &(struct coli_dev_gather){.dst = v->xf,
		                                                  .src = ml->dev_rows.f,
		                                                  .idx = v->tok,
		                                                  .n = P,
		                                                  .row_bytes = (size_t)H * 4});
	struct coli_dev_gather gq = {.dst = v->xq, .src = ml->dev_rows.q, .idx = v->tok, .n = P};
	struct coli_dev_gather gd = gq, gs = gq;

	gq.row_bytes = (size_t)H;
	gd.dst = v->xd, gd.src = ml->dev_rows.d, gd.row_bytes = (size_t)H / 32 * 4;
	gs.dst = v->xqs, gs.src = ml->dev_rows.qs, gs.row_bytes = (size_t)H / 32 * 4;
	rc = rc ? rc : coli_dev_gather_rows(v->dev, &gq);
	rc = rc ? rc : coli_dev_gather_rows(v->dev, &gd);
	return rc ? rc : coli_dev_gather_rows(v->dev, &gs);
}

/* The end of the wave from run r0: as many runs as hold at most cap streamed
 * slabs that still need a copy (r0 itself if the first needs one and cap is
 * 0). */
static int wave_end(struct coli_engine *e, const struct coli_dev_slot *v, int l, int r0, int cap)
{
	int misses = 0, r1;

	for (r1 = r0; r1 < v->n_runs; r1++) {
		int ex = v->runs[r1].expert;

		if (e->moe.streamed[ex] && stage_find(v, l, ex) < 0) {
			if (misses == cap)
				break;
			misses++;
		}
	}
	return r1;
}

/* The issue's first part: device d's runs of layer l (v->runs, v->P), the
 * size of its first wave (v->cap, v->r1) and, when they go first (v->early),
 * that wave's slab copies. */
static int issue_begin(struct coli_engine *e, struct coli_moe_layer *ml, int d)
{
	int l = ml->l;
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_dev_slot *v = &e->vram.slot[d];
	const struct coli_expert_layer *xl =
	    coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl);
	int quant = coli_dtype_is_quant(xl->dtype);
	int P = 0, n_runs = 0, room = 0;

	v->t_issue = coli_now_s();
	v->n_runs = 0;
	v->streamed_bytes = 0;
	if (v->st) {
		/* a new round: this layer's staged experts are claimed before any
		 * copy of this layer picks a victim */
		v->st_clock++;
		for (int ex = 0; ex < c->n_experts; ex++) {
			int s = e->moe.pair_n[ex] && e->moe.assign[ex] == d && e->moe.streamed[ex]
			            ? stage_find(v, l, ex)
			            : -1;

			if (s >= 0)
				v->st[s].used = v->st_clock;
		}
		for (int i = 0; i < v->n_stage; i++)
			room += v->st[i].used < v->st_clock;
	}
	for (int p = 0; p < e->s.n_pairs;) {
		int ex = e->s.pair_expert[p], n = 0;

		while (p + n < e->s.n_pairs && e->s.pair_expert[p + n] == ex)
			n++;
		if (e->moe.assign[ex] != d || (ml->preplanned == d && !e->moe.streamed[ex])) {
			p += n; /* another's, or resident and already run (forward_dev run_plan) */
			continue;
		}
		v->runs[n_runs] = (struct dev_run){
		    .expert = ex,
		    .pair0 = p,
		    .n = n,
		    .row0 = P,
		    .stage = -1,
		    .slab =
		        e->moe.streamed[ex] ? 0 : e->vram.dev_slab[(size_t)l * c->n_experts + ex]};
		n_runs++;
		P += n;
		p += n;
	}
	v->n_runs = n_runs;
	v->P = P;
	if (!P)
		return 0;
	/* the first wave's copies go first, so the link starts before the gather's
	 * launches are queued (H200 decode trace: a layer's one copy landed ~10 us
	 * later behind them) -- unless the gather uploads megabytes of rows, which
	 * would then queue behind the slabs on the one copy engine */
	v->on_dev = ml->dev_rows.dev == v->dev && (quant ? ml->dev_rows.q : ml->dev_rows.f);
	v->early = v->on_dev || P < 64;
	/* one pair an expert (a decode step): the jobs read the rows in place,
	 * the gather's four launches (a third of a streamed decode layer's issue
	 * on the H200) are not needed */
	v->direct = v->on_dev && P == n_runs;
	v->cap = room >= 2 ? room / 2 : room;
	v->r1 = wave_end(e, v, l, 0, v->cap);
	if (v->r1 == 0)
		return -ENOSPC; /* no slot to stream into: coli_moe_assign counts */
	return v->early ? wave_copies(e, ml, d, 0, v->r1) : 0;
}

/* The issue's first part queued now, as soon as the layer's streamed slabs
 * are pinned (core/moe/moe.c): the link starts before the CPU rows' round does,
 * and coli_moe_dev_issue goes on from there. */
int coli_moe_dev_copy_ahead(struct coli_engine *e, struct coli_moe_layer *ml, int d)
{
	struct coli_dev_slot *v = &e->vram.slot[d];

	v->ahead_rc = issue_begin(e, ml, d);
	v->ahead = 1;
	return v->ahead_rc;
}

/* Gather the activations of device d's pairs into staging, upload them once,
 * and queue the layer in waves of at most half the free staging slots of new
 * copies each (one wave at decode), so copies of a wave overlap the compute
 * of the one before. Pairs: e->pair_* (ascending expert). */
int coli_moe_dev_issue(struct coli_engine *e, struct coli_moe_layer *ml, int d,
                       coli_cpu_pool_t *pool)
{
	int l = ml->l;
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_dev_slot *v = &e->vram.slot[d];
	const struct coli_expert_layer *xl =
	    coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl);
	int H = c->hidden, quant = coli_dtype_is_quant(xl->dtype);
	int rc = v->ahead ? v->ahead_rc : issue_begin(e, ml, d), P = v->P, n_runs = v->n_runs;
	int cap = v->cap, r1 = v->r1, on_dev = v->on_dev, early = v->early;

	v->ahead = 0;
	if (!rc && !P)
		return 0;
	if (v->direct && (e->opts.profile || e->opts.cuda_profile))
		rc = rc ? rc : coli_dev_mark(v->dev, MARK_ISSUE);
	else if (!v->direct)
		rc = rc       ? rc
		     : on_dev ? gather_on_device(e, ml, v, quant)
		              : gather_upload(e, ml, v, quant, pool);
	rc = rc || early ? rc : wave_copies(e, ml, d, 0, r1);
	for (int r0 = 0; !rc && r0 < n_runs; r0 = r1) {
		if (r0) { /* a later wave copies into slots the one before freed */
			r1 = wave_end(e, v, l, r0, cap);
			rc = r1 == r0 ? -ENOSPC : wave_copies(e, ml, d, r0, r1);
		}
		rc = rc ? rc : wave_compute(e, ml, d, r0, r1, r1 < n_runs);
	}
	if (rc)
		drop_tails(v);
	if (v->streamed_bytes && ml->moe_on_dense == d) /* behind them: copies_landed */
		rc = rc ? rc : coli_dev_stage_fence(v->dev, v->n_stage);
	if (ml->moe_on_dense != d) /* else the dense part reads v->y where it is */
		rc = rc ? rc : coli_dev_download_async(v->dev, v->sy, v->y, (size_t)P * H * 4);
	if (e->opts.profile || e->opts.cuda_profile)
		rc = rc ? rc : coli_dev_mark(v->dev, MARK_DONE);
	e->est.h2d_bytes += v->streamed_bytes;
	e->est.stream_copy_bytes += v->streamed_bytes;
	return rc;
}

/* Wait until the slabs this layer copied have landed on the device: the
 * fence issue put behind them (a slot's own event may belong to a later copy
 * by now, a later wave's into a slot this layer has done with). */
static int copies_landed(struct coli_dev_slot *v)
{
	if (v->streamed_bytes)
		while (!coli_dev_stage_landed(v->dev, v->n_stage))
			sched_yield();
	return v->dev->failed ? -EIO : 0;
}

/* Wait for device d and scatter its outputs into e->s.ey (per pair). */
int coli_moe_dev_take(struct coli_engine *e, const struct coli_moe_layer *ml, int d)
{
	int l = ml->l;
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_dev_slot *v = &e->vram.slot[d];
	const struct coli_expert_layer *xl =
	    coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl);
	int H = c->hidden, rc;

	double t0;

	if (!v->P)
		return 0;
	t0 = coli_now_s();
	/* on the device holding the dense part the outputs stay where they are
	 * (core/forward/forward_dev.c accumulates them on the same stream): only the
	 * copies need waiting for, their host slabs are unpinned after take */
	rc = ml->moe_on_dense == d ? copies_landed(v) : coli_dev_sync(v->dev);
	if (rc)
		return rc;
	if (e->opts.profile || e->opts.cuda_profile) { /* waits for the mark: profile only */
		double busy = 0;

		rc = coli_dev_elapsed(v->dev, MARK_ISSUE, MARK_DONE, &busy);
		if (rc)
			return rc;
		e->est.dev_busy_s += busy;
	}
	/* recalibrate only when the device was the critical path: then the time
	 * from issue to now is the device's (copies + compute) */
	if (v->streamed_bytes && coli_now_s() - t0 > 50e-6) {
		double bw = v->streamed_bytes / (coli_now_s() - v->t_issue);

		e->moe.bw_stream = e->moe.bw_stream > 0 ? 0.8 * e->moe.bw_stream + 0.2 * bw : bw;
	}
	for (int r = 0; r < v->n_runs; r++) {
		int ex = v->runs[r].expert;

		if (ml->moe_on_dense != d)
			memcpy(e->s.ey + (size_t)v->runs[r].pair0 * H,
			       v->sy + (size_t)v->runs[r].row0 * H,
			       sizeof(float) * H * v->runs[r].n);
		if (e->moe.streamed[ex]) { /* its RAM/disk hit was counted by the tiers */
			e->est.stream_experts++;
			e->est.stream_bytes += xl->slab_bytes;
		} else {
			e->est.hits[COLI_TIER_VRAM]++;
			e->est.bytes[COLI_TIER_VRAM] += xl->slab_bytes;
		}
	}
	return 0;
}
