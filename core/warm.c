/*
 * core/warm.c — a host-planned decode layer's CPU-row slabs read into the
 * host's caches while the device runs the layer's dense chain.
 *
 * A host-planned decode layer (core/forward_dev.c moe_host) waits ~40 us for
 * its routing — the device runs the accumulate, attention, the router and
 * the downloads — with the CPU, the host's DRAM and the link idle. Then its
 * CPU rows read their slabs from DRAM beside the slab copies, and the two
 * share that DRAM (docs/perf/README.md, session 16). Consecutive tokens route
 * much alike at a layer (temporal locality: in coli bench's synthetic models
 * 73% of a token's experts at a layer were the token before's), so the
 * experts the layer ran as CPU rows last token are read ahead through the
 * pool while the host waits: when they recur their rows read from the
 * cache, and the DRAM is the copies'. The caller's part of the pool round is
 * the wait itself; once the routing is there the workers stop at their next
 * 4 KiB. Nothing is computed here, so a wrong guess costs idle DRAM time and
 * some cache, never a bit of the output.
 *
 * core/moe.c keeps the warmed experts on the CPU when the split streams some
 * of the layer's candidates (assign_experts: at equal token counts the
 * others are streamed first). COLI_WARM_ROWS=0 turns it off for A/B, and so
 * does COLI_GROUP_ASYNC=0 (the synchronous path overlaps nothing).
 */
#include <string.h>

#include "core/core_internal.h"
#include "core/dev.h"

#define WARM_CHUNK ((size_t)64 << 10) /* a pool task's bytes */
#define WARM_STEP  ((size_t)4 << 10)  /* the stop flag is read this often */

/* After assign_experts: remember the experts layer l computes as CPU rows
 * (decode calls only: a prefill chunk's say nothing of the next token's). */
void coli_warm_note(struct coli_engine *e, int l, int T)
{
	int E = e->m.cfg.n_experts, K = e->m.cfg.top_k, n = 0;
	int *list = e->warm_ex + (size_t)l * K;

	if (T > COLI_GPU_MAX_S)
		return;
	for (int ex = 0; ex < E && n < K; ex++)
		if (e->pair_n[ex] && e->assign[ex] < 0)
			list[n++] = ex;
	e->warm_n[l] = n;
}

/* One round: slabs s[0..n) cut into WARM_CHUNK tasks in list order. */
struct warm_round {
	const char *p[COLI_WARM_MAX];
	size_t len[COLI_WARM_MAX];
	int first[COLI_WARM_MAX + 1]; /* each slab's first task */
	int n, stop, rc;
	uint64_t bytes; /* prefetched before the stop */
	int (*wait)(void *arg);
	void *wait_arg;
};

static void warm_task(void *arg, int t, int n_tasks)
{
	struct warm_round *w = arg;
	int s = 0;

	(void)n_tasks;
	while (s + 1 < w->n && w->first[s + 1] <= t)
		s++;
	size_t off = (size_t)(t - w->first[s]) * WARM_CHUNK, end = off + WARM_CHUNK, done = 0;

	if (end > w->len[s])
		end = w->len[s];
	for (size_t o = off; o < end; o += WARM_STEP) {
		const char *p = w->p[s] + o;
		size_t n = end - o < WARM_STEP ? end - o : WARM_STEP;

		if (__atomic_load_n(&w->stop, __ATOMIC_RELAXED))
			break;
		for (size_t i = 0; i < n; i += 64)
			__builtin_prefetch(p + i, 0, 2);
		done += n;
	}
	if (done)
		__atomic_add_fetch(&w->bytes, done, __ATOMIC_RELAXED);
}

/* The caller's side of the round: the wait, then the workers stop. */
static void warm_side(void *arg)
{
	struct warm_round *w = arg;

	w->rc = w->wait(w->wait_arg);
	__atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
}

int coli_warm_wait(struct coli_engine *e, int l, int T, int (*wait)(void *arg), void *arg)
{
	int E = e->m.cfg.n_experts, K = e->m.cfg.top_k, tslot[COLI_WARM_MAX], tasks = 0;
	const int *list = e->warm_ex + (size_t)l * K;
	const struct coli_expert_layer *xl;
	struct warm_round w = {.wait = wait, .wait_arg = arg};

	e->warm_l = -1;
	if (!e->opts.warm_rows || !e->opts.group_async || T > COLI_GPU_MAX_S || !e->pool ||
	    coli_cpu_pool_threads(e->pool) < 2 || !e->m.layers[l].moe || !e->warm_n[l])
		return wait(arg);
	xl = coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl);
	memset(e->warmed, 0, (size_t)E);
	for (int i = 0; i < e->warm_n[l] && w.n < COLI_WARM_MAX; i++) {
		int ex = list[i], staged = 0;
		const void *p;

		if (e->where && e->where[(size_t)l * E + ex] >= 0)
			continue; /* resident now (the VRAM adaptation) */
		for (int d = 0; d < e->n_devs; d++)
			staged |= coli_moe_dev_staged(e, d, l, ex);
		if (staged || !(p = coli_tiers_pin_ready(e, l, ex, &tslot[w.n])))
			continue; /* a copy is in VRAM, or the slab is not in RAM */
		e->warmed[ex] = 1;
		w.p[w.n] = p;
		w.len[w.n] = xl->slab_bytes;
		w.first[w.n] = tasks;
		tasks += (int)((xl->slab_bytes + WARM_CHUNK - 1) / WARM_CHUNK);
		w.n++;
	}
	w.first[w.n] = tasks;
	if (!w.n)
		return wait(arg);
	e->warm_l = l;
	coli_cpu_pool_run_beside(e->pool, warm_task, &w, tasks, warm_side, &w);
	for (int i = 0; i < w.n; i++)
		coli_tiers_unpin(e, tslot[i]);
	e->est.warm_slabs += (uint64_t)w.n;
	e->est.warm_bytes += w.bytes;
	return w.rc;
}
