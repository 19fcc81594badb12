/*
 * cpu/attn/attention_mt.c — a few GQA groups' attention across the thread pool,
 * each with coli_attention_group's bits.
 *
 * At decode a token has one group per key/value head (four for qwen3-30b):
 * one task a group leaves most of sixteen threads idle, and at long context
 * each group is long (its keys, values and one exp per position and
 * head). With AVX2 the group's steps (cpu/attn/attention_avx2.c) run as six rounds
 * over shares instead: scores by blocks of positions (each block's max
 * kept), exp by blocks (the max over the blocks' maxes first), the sum of
 * the exps (in position order: one task a unit of eight heads), the weights
 * by blocks, the outputs' sums by shares of the COLI_ATTN_OUT_BLOCK blocks
 * (each block's into the unit's slot, after its scores), their fold by slices of
 * eight dims. Nothing a position, a block or an output computes depends on
 * the share, so the bits are the unsplit function's
 * (tests/cpu/attention_group, tests/cpu/attention_long). The outputs' sums
 * read whole positions of the unit's rows, as the scores do: a slice of
 * dims a task took a part of every position's cache line instead.
 *
 * As many units and groups as threads or more (a few cores, or many
 * key/value heads): one task a group, or, for a decode step's groups side
 * by side in the same rows, tasks of adjacent groups that walk their rows
 * together (rows_task, below). Fewer groups than threads but as many units
 * (MLA's one group of 16 units for DeepSeek-V3's 128 heads) take the
 * rounds: one task a group left all but one thread idle. One group's
 * units, which read the same rows, take them together (together_task): a
 * task its block of positions for every unit, so a row is read once, not
 * once a unit (128 heads on one 576-wide bf16 head, 32k positions, two
 * Zen 4 cores: 87-88 -> 61 ms a layer).
 */
#include <string.h>

#include "cpu/attn_head.h"

#define MT_MIN_POS    256 /* a shorter group is not split: the rounds cost more */
#define MT_MIN_BLOCK  64  /* positions a block, at least */
#define MT_MAX_UNITS  64  /* eight-head units split at once */
#define MT_MAX_BLOCKS 32 /* two a thread of 16 where one group's units go together */

enum { SCORES, EXP, SUM, WEIGHTS, OUTPUTS, FOLD };

struct unit {
	const struct coli_attn_group *g;
	int h0, nh;  /* heads [h0, h0 + nh) of the group, nh <= 8 */
	float *sc;   /* [n_pos][8] */
	float *part; /* [blocks][vd rounded up to 8][8]: the output blocks' sums */
};

struct job {
	const struct coli_attn_group *g;
	int n, stride, hd, vd, step, n_units, nb, ns; /* hd: key dims, vd: value dims */
	int together; /* one group's units: a task takes its positions of every unit */
	float scale, *scratch;
	size_t slot;
	struct unit u[MT_MAX_UNITS];
	float bmax[MT_MAX_UNITS][MT_MAX_BLOCKS][8]; /* each block's lane maxes */
	float sum[MT_MAX_UNITS][8];                 /* each unit's sum of exps */
};

/* A group's K (v 0) or V (v 1) rows: typed, or fp32 j->stride floats apart. */
static struct coli_kv_rows rows_of(const struct job *j, const struct coli_attn_group *g, int v)
{
	size_t st = v ? g->vstride : g->kstride;

	return (struct coli_kv_rows){.p = v ? g->V : g->K,
	                             .stride = st ? st : sizeof(float) * (size_t)j->stride,
	                             .type = v ? g->vt : g->kt,
	                             .soff = v ? g->vsoff : g->ksoff,
	                             .seg = g->seg ? g->seg : j->hd,
	                             .blk = g->blk,
	                             .p0 = g->p0,
	                             .bshift = g->bshift};
}

/* Unit u's output block b. */
static float *block_of(const struct job *j, int u, int b)
{
	return j->u[u].part + (size_t)b * (size_t)((j->vd + 7) / 8 * 64);
}

/* One task a group (too many, too short, or no AVX2): task k takes the
 * groups congruent to it, its scratch slot k. */
static void group_task(void *arg, int task, int n_tasks)
{
	struct job *j = arg;

	for (int k = task; k < j->n; k += n_tasks) {
		const struct coli_attn_group *g = &j->g[k];

		struct coli_kv_rows K = rows_of(j, g, 0), V = rows_of(j, g, 1);

		coli_attention_group_kv(g->q, g->G, &K, &V, g->n_pos, j->hd, j->vd, j->scale,
		                        g->sink, j->scratch + (size_t)task * j->slot, g->out);
	}
}

/* Rows walked together: a decode step's groups are one token's key/value
 * heads side by side in the same rows (core/forward/forward.c), so one task
 * a group reads a quarter (qwen3-30b's four heads) of each row, a strided
 * walk a core fetched from DRAM at two thirds of a whole row's rate (one
 * Zen 4 core, scores: 5.2-5.4 GB/s against 7.3-7.9; docs/perf/kernels.md
 * has the gain). Here a task takes adjacent groups and walks their rows
 * together: each block of ROW_BLOCK positions is scored for every group in
 * turn, the next block's rows fetched whole meanwhile, and the outputs go
 * out-block by out-block the same way. Each group's steps are
 * coli_attention_group_avx2's (a group of at most eight heads: one unit),
 * the max taken over the blocks in order: the same bits. */
#define ROW_BLOCK 64
#define ROW_UNITS 8 /* groups a task, at most (their outputs on its stack) */

/* Whether g[0..n) are such siblings: one unit each (2 to 8 heads), the
 * same positions and row layout, each group's rows one head past the one
 * before. */
static int row_siblings(const struct job *j, const struct coli_attn_group *g, int n)
{
	if (n < 2 || coli_cpu_isa() < COLI_CPU_ISA_AVX2 || j->vd != j->hd)
		return 0;
	for (int k = 0; k < n; k++) {
		const struct coli_attn_group *a = &g[k], *b = &g[k ? k - 1 : 0];
		const size_t esz = coli_kv_elem_bytes(a->kt);

		if (a->G < 2 || a->G > 8 || a->sink || a->n_pos != g[0].n_pos || a->kt != g[0].kt ||
		    a->vt != a->kt || !a->kstride || a->kstride != g[0].kstride ||
		    a->vstride != a->kstride || a->blk != g[0].blk || a->p0 != g[0].p0 ||
		    a->bshift != g[0].bshift)
			return 0;
		if (k && ((const char *)a->K - (const char *)b->K != (ptrdiff_t)(esz * j->hd) ||
		          (const char *)a->V - (const char *)b->V != (ptrdiff_t)(esz * j->hd)))
			return 0;
	}
	return 1;
}

static void rows_task(void *arg, int task, int n_tasks)
{
	struct job *j = arg;
	const int c0 = j->n * task / n_tasks, nu = j->n * (task + 1) / n_tasks - c0;
	const int n_pos = j->g[c0].n_pos, hd = j->hd, vd = j->vd;
	struct coli_kv_rows K[ROW_UNITS], V[ROW_UNITS];
	float mx[ROW_UNITS][8], *sc[ROW_UNITS];
	float acc[2 * nu][vd * 8]; /* each group's outputs, and a block's */

	for (int u = 0; u < nu; u++) {
		K[u] = rows_of(j, &j->g[c0 + u], 0), V[u] = rows_of(j, &j->g[c0 + u], 1);
		sc[u] = j->scratch + (size_t)(c0 + u) * j->slot;
	}
	for (int p0 = 0; p0 < n_pos; p0 += ROW_BLOCK) {
		const int p1 = n_pos - p0 < ROW_BLOCK ? n_pos : p0 + ROW_BLOCK;

		for (int u = 0; u < nu; u++) {
			const struct coli_attn_group *g = &j->g[c0 + u];
			float bm[16]; /* the max so far, this block's */

			/* a part of the next block's rows, every group's heads */
			for (int p = p1 + u * ROW_BLOCK / nu;
			     p < p1 + (u + 1) * ROW_BLOCK / nu && p < n_pos; p++)
				kv_prefetch(&K[0], (size_t)p, 0, nu * hd);
			coli_attn8_scores(g->q, g->G, &K[u], p0, p1, hd, j->scale, sc[u], bm + 8);
			if (p0) { /* the max so far, then this block's: in order */
				memcpy(bm, mx[u], sizeof(mx[u]));
				coli_attn8_max_avx2(bm, 2, mx[u]);
			} else {
				memcpy(mx[u], bm + 8, sizeof(mx[u]));
			}
		}
	}
	for (int u = 0; u < nu; u++)
		coli_attn8_weights(sc[u], j->g[c0 + u].G, n_pos, NULL, mx[u]);
	for (int p0 = 0; p0 < n_pos; p0 += COLI_ATTN_OUT_BLOCK)
		for (int u = 0; u < nu; u++)
			coli_attn8_out_block(sc[u], j->g[c0 + u].G, &V[u], p0, n_pos, vd,
			                     acc[2 * u], acc[2 * u + 1]);
	for (int u = 0; u < nu; u++) {
		if (n_pos <= 0)
			memset(acc[2 * u], 0, sizeof(float) * vd * 8);
		coli_attn8_store(acc[2 * u], j->g[c0 + u].G, vd, 0, vd, j->g[c0 + u].out);
	}
}

/* The shares of a unit in the round j->step: slices of dims, one sum, or
 * blocks of positions (of output blocks: OUTPUTS). */
static int shares(const struct job *j)
{
	return j->step == FOLD ? j->ns : j->step == SUM ? 1 : j->nb;
}

/* Together (one group of several units, MLA's 16 for DeepSeek-V3's 128
 * heads, all reading the same rows): in the rounds that walk positions a
 * task takes block s for every unit, so a row comes from memory once for
 * all of them, not once a unit; the scores go by ROW_BLOCK positions for
 * each unit in turn, the next ones' rows fetched meanwhile, the outputs
 * out-block by out-block. Each unit's steps are share_task's: the same
 * bits. */
static int walks_positions(int step)
{
	return step == SCORES || step == EXP || step == WEIGHTS || step == OUTPUTS;
}

static void share_task(void *arg, int task, int n_tasks);

static void together_task(void *arg, int task, int n_tasks)
{
	struct job *j = arg;

	if (!walks_positions(j->step)) {
		share_task(arg, task, n_tasks);
		return;
	}
	if (j->step == OUTPUTS) { /* out-blocks [b0, b1), every unit's in turn */
		const struct coli_attn_group *g = j->u[0].g;
		const int nob = coli_attn_out_blocks(g->n_pos);
		struct coli_kv_rows V = rows_of(j, g, 1);

		for (int b = nob * task / j->nb; b < nob * (task + 1) / j->nb; b++) {
			const int q0 = b * COLI_ATTN_OUT_BLOCK;
			const int q1 = g->n_pos - q0 < COLI_ATTN_OUT_BLOCK
			                   ? g->n_pos
			                   : q0 + COLI_ATTN_OUT_BLOCK;

			for (int u = 0; u < j->n_units; u++)
				coli_attn8_out(j->u[u].sc, j->u[u].nh, &V, q0, q1, 0, j->vd,
				               block_of(j, u, b));
		}
		return;
	}
	if (j->step != SCORES) {
		for (int u = 0; u < j->n_units; u++)
			share_task(arg, u * j->nb + task, n_tasks);
		return;
	}
	const int nu = j->n_units, n_pos = j->u[0].g->n_pos, hd = j->hd;
	const int q0 = (int)((long long)n_pos * task / j->nb),
	          q1 = (int)((long long)n_pos * (task + 1) / j->nb);
	struct coli_kv_rows K = rows_of(j, j->u[0].g, 0);

	for (int p0 = q0; p0 < q1; p0 += ROW_BLOCK) {
		const int p1 = q1 - p0 < ROW_BLOCK ? q1 : p0 + ROW_BLOCK;

		for (int u = 0; u < nu; u++) {
			const struct unit *un = &j->u[u];
			float *mx = j->bmax[u][task], bm[16];

			for (int p = p1 + u * ROW_BLOCK / nu;
			     p < p1 + (u + 1) * ROW_BLOCK / nu && p < q1; p++)
				kv_prefetch(&K, (size_t)p, 0, hd);
			coli_attn8_scores(un->g->q + (size_t)un->h0 * hd, un->nh, &K, p0, p1, hd,
			                  j->scale, un->sc, p0 > q0 ? bm + 8 : mx);
			if (p0 > q0) { /* the max so far, then this block's: in order */
				memcpy(bm, mx, sizeof(bm) / 2);
				coli_attn8_max_avx2(bm, 2, mx);
			}
		}
	}
}

static void share_task(void *arg, int task, int n_tasks)
{
	struct job *j = arg;
	int per = shares(j), s = task % per;
	const struct unit *u = &j->u[task / per];
	const struct coli_attn_group *g = u->g;
	int p0 = (int)((long long)g->n_pos * s / per),
	    p1 = (int)((long long)g->n_pos * (s + 1) / per);
	const float *q = g->q + (size_t)u->h0 * j->hd;
	float mx[8];

	(void)n_tasks;
	switch (j->step) {
	case SCORES: {
		struct coli_kv_rows K = rows_of(j, g, 0);

		coli_attn8_scores(q, u->nh, &K, p0, p1, j->hd, j->scale, u->sc,
		                  j->bmax[task / per][s]);
		break;
	}
	case EXP:
		coli_attn8_max_avx2(j->bmax[task / per][0], j->nb, mx);
		if (g->sink) /* gpt-oss: the sink joins the max */
			coli_attn8_sink_max(g->sink + u->h0, u->nh, mx);
		coli_attn8_exp_avx2(u->sc, u->nh, p0, p1, mx);
		break;
	case SUM: /* in position order, by one task a unit */
		coli_attn8_sum_avx2(u->sc, g->n_pos, j->sum[task]);
		if (g->sink) { /* and exp(sink - max) after the positions */
			coli_attn8_max_avx2(j->bmax[task][0], j->nb, mx);
			coli_attn8_sink_max(g->sink + u->h0, u->nh, mx);
			coli_attn8_sink_sum(g->sink + u->h0, u->nh, mx, j->sum[task]);
		}
		break;
	case WEIGHTS:
		coli_attn8_div_avx2(u->sc, p0, p1, j->sum[task / per]);
		break;
	case OUTPUTS: { /* blocks [b0, b1) of the unit's output blocks */
		const int nob = coli_attn_out_blocks(g->n_pos);
		const int b0 = nob * s / per, b1 = nob * (s + 1) / per;
		struct coli_kv_rows V = rows_of(j, g, 1);

		for (int b = b0; b < b1; b++) {
			const int q0 = b * COLI_ATTN_OUT_BLOCK;
			const int q1 = g->n_pos - q0 < COLI_ATTN_OUT_BLOCK
			                   ? g->n_pos
			                   : q0 + COLI_ATTN_OUT_BLOCK;

			coli_attn8_out(u->sc, u->nh, &V, q0, q1, 0, j->vd,
			               block_of(j, task / per, b));
		}
		break;
	}
	default: { /* FOLD: slices of eight dims, the blocks in order */
		const int nob = coli_attn_out_blocks(g->n_pos);
		int blocks = (j->vd + 7) / 8, b0 = blocks * s / per, b1 = blocks * (s + 1) / per;
		int i1 = b1 * 8 < j->vd ? b1 * 8 : j->vd;
		float *acc = block_of(j, task / per, 0) + b0 * 64;

		for (int b = 1; b < nob; b++)
			coli_attn8_fold_avx2(acc, block_of(j, task / per, b) + b0 * 64,
			                     (b1 - b0) * 64);
		coli_attn8_store(acc, u->nh, j->vd, b0 * 8, i1, g->out + (size_t)u->h0 * j->vd);
	}
	}
}

int coli_attention_groups_mt(coli_cpu_pool_t *p, const struct coli_attn_group *g, int n, int stride,
                             int hd, int vd, float scale, float *scratch, size_t slot, int n_slots)
{
	int threads = p ? coli_cpu_pool_threads(p) : 1, min_pos = n ? g[0].n_pos : 0, max_pos = 0,
	    units = 0;
	struct job job = {.g = g,
	                  .n = n,
	                  .stride = stride,
	                  .hd = hd,
	                  .vd = vd,
	                  .scale = scale,
	                  .scratch = scratch,
	                  .slot = slot},
	           *j = &job;

	for (int k = 0; k < n; k++) {
		min_pos = g[k].n_pos < min_pos ? g[k].n_pos : min_pos;
		max_pos = g[k].n_pos > max_pos ? g[k].n_pos : max_pos;
		units += (g[k].G + 7) / 8;
	}
	/* one group of several units (MLA's): a task its block of every unit */
	j->together = threads >= 2 && n == 1 && units >= 2;
	/* a task a group, or rows walked together, where the groups or their
	 * units are as many as the threads; fewer groups than threads with
	 * many heads each (MLA's one group of every head) share them */
	if (coli_cpu_isa() < COLI_CPU_ISA_AVX2 || (units >= threads && n >= threads) ||
	    units > MT_MAX_UNITS || units > n_slots || min_pos < MT_MIN_POS ||
	    coli_attn_slot_floats(max_pos, vd) > slot) {
		const int tasks = n < threads ? n : threads;

		/* (a group a task: nothing to walk together, and the blocks cost
		 * more: the demo's two groups on two threads, 0.35-0.39 -> 0.40-0.42
		 * ms a layer at 8k) */
		if (min_pos >= MT_MIN_POS && n <= n_slots && n >= 2 * tasks &&
		    n <= ROW_UNITS * tasks && (size_t)max_pos * 8 <= slot &&
		    row_siblings(j, g, n)) {
			coli_cpu_pool_run(p, rows_task, j, tasks);
			return 2;
		}
		coli_cpu_pool_run(p, group_task, j, n < n_slots ? n : n_slots);
		return 0;
	}
	for (int k = 0; k < n; k++)
		for (int h = 0; h < g[k].G; h += 8, j->n_units++)
			j->u[j->n_units] = (struct unit){
			    .g = &g[k],
			    .h0 = h,
			    .nh = g[k].G - h < 8 ? g[k].G - h : 8,
			    .sc = scratch + (size_t)j->n_units * slot,
			    .part = scratch + (size_t)j->n_units * slot + (size_t)g[k].n_pos * 8};
	/* about two tasks a thread in each round */
	j->nb = j->together ? 2 * threads : (2 * threads + units - 1) / units;
	j->nb = j->nb > MT_MAX_BLOCKS ? MT_MAX_BLOCKS : j->nb;
	j->nb = j->nb > min_pos / MT_MIN_BLOCK ? min_pos / MT_MIN_BLOCK : j->nb;
	j->ns = (2 * threads + units - 1) / units;
	j->ns = j->ns > (vd + 7) / 8 ? (vd + 7) / 8 : j->ns;
	for (j->step = SCORES; j->step <= FOLD; j->step++) {
		if (j->together)
			coli_cpu_pool_run(p, together_task, j,
			                  walks_positions(j->step) ? j->nb : units * shares(j));
		else
			coli_cpu_pool_run(p, share_task, j, units * shares(j));
	}
	return 1;
}
