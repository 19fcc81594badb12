/*
 * core/moe/assign.c — who computes each routed expert of a layer call (the
 * scheduler's plan step, core/moe/moe.c): the device holding it in VRAM;
 * else, for a RAM-tier expert, a CPU row or a copy streamed to a device,
 * split by the cost model so that both finish together (decode: whole
 * slabs at the link's and the CPU's rates; prefill: CPU rows cost per
 * token, a streamed slab its copy), experts already staged on a device
 * first. Its outputs: e->moe.assign (a device, or -1: CPU rows) and
 * e->moe.streamed (1 copied, 2 staged earlier).
 */
#include <limits.h>
#include <string.h>

#include "core/core_internal.h"
#include "core/dev/dev.h"
#include "core/moe/moe.h"

/* Whether no device has a bandwidth of its own (simulated ones). */
static int sim_only(const struct coli_engine *e)
{
	int sim = 1;

	for (int d = 0; d < e->vram.n_devs; d++)
		sim = sim && !coli_dev_can(e->vram.devs[d], COLI_DEV_CAP_BANDWIDTH);
	return sim;
}

/* The cost model's share of RAM-tier experts to stream (the rest are CPU
 * rows), so that both finish together: bw_stream / (bw_cpu + bw_stream); all
 * of them with --stream only. A simulated device has no bandwidth of its own:
 * an even split keeps --gpu sim runs reproducible launch for launch (the
 * fault tests inject failures by launch count). */
double coli_moe_stream_share(const struct coli_engine *e)
{
	double bs = e->moe.bw_stream > 0 ? e->moe.bw_stream : 1,
	       bc = e->moe.bw_cpu > 0 ? e->moe.bw_cpu : bs;

	if (e->opts.stream == COLI_OPT_STREAM_ONLY)
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
	double bs = e->moe.bw_stream > 0 ? e->moe.bw_stream : 1,
	       bc = e->moe.bw_cpu > 0 ? e->moe.bw_cpu : bs;
	double bp = e->moe.bw_cpu_pair > 0 ? e->moe.bw_cpu_pair : bc, read = slab / bc, cpu = 0;
	double best = 1e300;
	int k_best = 0;

#define CPU_COST(ex) (slab * e->moe.pair_n[ex] / bp > read ? slab * e->moe.pair_n[ex] / bp : read)
	if (e->opts.stream == COLI_OPT_STREAM_ONLY)
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
	double bs = e->moe.bw_stream > 0 ? e->moe.bw_stream : 1,
	       bc = e->moe.bw_cpu > 0 ? e->moe.bw_cpu : bs;

	if (e->opts.stream == COLI_OPT_STREAM_ONLY || sim_only(e))
		return (int)(n_cand * coli_moe_stream_share(e) + 0.5);
	return coli_moe_decode_split(n_cand, bs, bc);
}

/* Candidates cand[0..n) most tokens (cnt[]) first, then ascending id
 * (insertion sort: n <= E). */
static void sort_by_tokens(int *cand, int n, const int *cnt)
{
	for (int i = 1; i < n; i++)
		for (int j = i;
		     j > 0 && (cnt[cand[j]] > cnt[cand[j - 1]] ||
		               (cnt[cand[j]] == cnt[cand[j - 1]] && cand[j] < cand[j - 1]));
		     j--) {
			int t = cand[j];

			cand[j] = cand[j - 1];
			cand[j - 1] = t;
		}
}

/* Candidates of layer l still in a staging slot of a device (home's only,
 * when home >= 0) are streamed from it and leave cand[]; returns how many
 * candidates are left. */
static int take_staged(struct coli_engine *e, int l, int home, int *cand, int n_cand,
                       int *slots_left)
{
	for (int i = 0; i < n_cand; i++)
		for (int d = 0; d < e->vram.n_devs; d++)
			if ((home < 0 || d == home) && coli_moe_dev_staged(e, d, l, cand[i])) {
				e->moe.assign[cand[i]] = (signed char)d;
				e->moe.streamed[cand[i]] = 2;
				slots_left[d]--;
				cand[i--] = cand[--n_cand];
				break;
			}
	return n_cand;
}

/* Who computes each routed expert of layer l: the device holding it in VRAM;
 * else, for RAM-tier experts, the cost model splits them between the CPU and
 * streaming to a device so both finish together (decode_stream_count,
 * prefill_stream_count), taking the experts with the most tokens first (a
 * streamed slab costs the same whatever its token count; CPU rows cost per
 * token). Experts already in a device's staging slots (left there by an
 * earlier token) are streamed first: their copy is paid, so the split
 * applies to the rest. */
void coli_moe_assign(struct coli_engine *e, const struct coli_moe_layer *ml)
{
	const struct coli_model_config *c = &e->m.cfg;
	int l = ml->l, T = ml->T;
	int E = c->n_experts, n_cand = 0, k, slots_left[COLI_MAX_DEVS], d_next = 0, home = -1;
	int *cand = e->moe.cand;
	const int *cnt = e->moe.pair_n; /* tokens per expert, from coli_moe_pairs */

	if (E <= 0) /* the config guarantees >= 1; this tells the compiler too */
		return;
	memset(e->moe.assign, -1, (size_t)E);
	memset(e->moe.streamed, 0, (size_t)E);
	for (int ex = 0; ex < E; ex++) {
		int d = e->vram.where ? e->vram.where[(size_t)l * E + ex] : -1;

		if (!cnt[ex])
			continue;
		if (d >= 0 && !e->vram.devs[d]->failed)
			e->moe.assign[ex] = (signed char)d;
		else
			cand[n_cand++] = ex;
	}
	if (!e->vram.n_devs || !n_cand || e->opts.stream == COLI_OPT_STREAM_OFF)
		return;
	for (int d = 0; d < e->vram.n_devs; d++)
		slots_left[d] = e->vram.devs[d]->failed ? 0 : coli_moe_dev_stage_room(e, d);
	/* at decode, only the device holding the layer's dense part (its
	 * outputs then need no trip through the host when nothing else ran);
	 * at prefill round-robin over the devices with staging room (two H200s,
	 * a quarter of the experts on each: decode +7%, prefill no better with
	 * home: docs/perf/history/2026-11-30.md) */
	if (T <= COLI_GPU_MAX_S && ml->dense_dev >= 0)
		home = ml->dense_dev;
	for (int d = 0; home >= 0 && d < e->vram.n_devs; d++)
		if (d != home)
			slots_left[d] = 0;
	/* still in a slot from an earlier token: the copy is paid, stream it
	 * (on the home device only, when streaming is: what a prefill left on
	 * another would keep it busy every token) */
	n_cand = take_staged(e, l, home, cand, n_cand, slots_left);
	/* a device with a slot left for new copies streams any number, in waves */
	for (int d = 0; d < e->vram.n_devs; d++)
		slots_left[d] = slots_left[d] > 0 ? INT_MAX : 0;
	if (!n_cand)
		return;
	sort_by_tokens(cand, n_cand, cnt);
	/* the share of those still to copy (a staged one costs the link nothing) */
	k = T > COLI_GPU_MAX_S && !sim_only(e) ? prefill_stream_count(e, l, cand, n_cand)
	                                       : decode_stream_count(e, n_cand);
	for (int i = 0; i < n_cand && k > 0; i++) {
		int tries = 0;

		while (tries < e->vram.n_devs && slots_left[d_next] == 0) {
			d_next = (d_next + 1) % e->vram.n_devs;
			tries++;
		}
		if (slots_left[d_next] == 0)
			break; /* staging full: the rest stay CPU rows */
		e->moe.assign[cand[i]] = (signed char)d_next;
		e->moe.streamed[cand[i]] = 1;
		slots_left[d_next]--;
		d_next = (d_next + 1) % e->vram.n_devs;
		k--;
	}
}
