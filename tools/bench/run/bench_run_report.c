/*
 * tools/bench/run/bench_run_report.c — what `coli bench decode|prefill` (and `coli
 * bench stream`) make of the rounds tools/bench/run/bench_run.c timed: each arm's
 * medians over its rounds (min and max of tok/s as the spread), the bound of
 * DESIGN.md's performance model from the bandwidths measured in the same run,
 * and the report: a table, or one JSON object (--json), with --profile's
 * window and the MoE layers' timeline where asked.
 *
 * Data: struct arm (tools/bench/run/bench_run.h) holds its rounds r[0 .. R->rounds),
 * figures per token each; bench_summarize fills the arm's medians and its
 * bounds from them, which the printers read (bench_round_ratio reads the
 * rounds themselves: a ratio a round, then their median).
 *
 * Bytes per token (coli_engine_stats deltas over the timed part):
 *   ram, disk, vram   slab bytes each tier served (the tier manager and
 *                     the devices fill them)
 *   dense             every dense tensor read once per forward call (tok_embd
 *                     only its rows unless tied), plus the KV cache the
 *                     attention reads, divided by the tokens of the call
 * Terms of the bound, CPU-only host (no GPU path measured):
 *   cpu   = dense + ram + disk   every byte the CPU multiplies: slabs that came
 *                                from disk are read again from memory by the
 *                                CPU rows, so they count here too
 *   disk  = disk                 at the disk's bandwidth for the streamer's
 *                                pattern (a sequential read is slower than
 *                                that on some disks, and then the streamer
 *                                beat the "bound")
 * With a GPU (bench_gpu_bw measured): VRAM-resident slabs and a device
 * dense part are hbm bytes, slabs copied to staging are pcie bytes (and hbm
 * once there); a simulated device's bytes are all cpu bytes.
 * Prefill's bound is memory-only: large prompts become compute bound, so
 * its ratio is expected well below 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/coli.h"
#include "tools/bench/bench.h"
#include "tools/tools.h"

#include "tools/bench/run/bench_run.h"
static const char *const g_phase[N_PHASES] = {"attention", "moe", "dense_mlp", "lm_head", "other"};
/* --profile: where the overlap window's time goes (core/coli.h's engine stats) */
static const char *const g_prof[N_PROF] = {"plan",      "host slabs", "device issue",
                                           "lookahead", "beside",     "devices busy"};
static const char *const g_prof_key[N_PROF] = {"plan",      "host_slabs", "device_issue",
                                               "lookahead", "beside",     "devices_busy"};

static double med_of(struct arm *a, int n, size_t off)
{
	double v[MAX_ROUNDS];

	for (int i = 0; i < n; i++)
		v[i] = *(const double *)((const char *)&a->r[i] + off);
	return bench_median(v, n);
}

/* DESIGN.md's T_ram >= B_ram / (BW_cpu + BW_pcie), also >= B_ram / BW_dram:
 * the host's expert bytes split between CPU rows and streaming so both
 * finish together, at most at the rate the host's memory serves the cores
 * and the link together (bw->dram_gbs, where measured), VRAM experts at the
 * HBM rate; with_dense: the dense part's bytes too, where they are read.
 * With a simulated device (or none) every byte is a CPU byte. */
static void ideal_bound(const struct run *R, const struct arm *a, const struct bench_bw *bw,
                        int sim, int with_dense, struct bench_bound *out)
{
	const double dense = with_dense ? a->dense_b : 0;
	struct bench_bytes b = {{0}};
	struct bench_bw w = *bw;

	b.b[BENCH_TERM_CPU] = a->tier_b[COLI_TIER_RAM] + a->tier_b[COLI_TIER_DISK];
	b.b[BENCH_TERM_DISK] = a->tier_b[COLI_TIER_DISK];
	if (!sim && R->have_gpu) {
		b.b[BENCH_TERM_CPU] += a->dense_dev ? 0 : dense;
		b.b[BENCH_TERM_HBM] = a->tier_b[COLI_TIER_VRAM] + (a->dense_dev ? dense : 0);
		w.cpu_gbs = bw->cpu_gbs + bw->pcie_gbs;
		if (bw->dram_gbs > 0 && bw->dram_gbs < w.cpu_gbs) /* B_ram / BW_dram */
			w.cpu_gbs = bw->dram_gbs;
	} else {
		b.b[BENCH_TERM_CPU] += dense + a->tier_b[COLI_TIER_VRAM];
	}
	bench_bound(&b, &w, out);
}

void bench_summarize(struct run *R, struct arm *a)
{
	int n = R->rounds;
	double v[MAX_ROUNDS];

	for (int i = 0; i < n; i++)
		v[i] = a->r[i].tok_s;
	a->tok_s = bench_median(v, n);
	a->tok_s_min = v[0];
	a->tok_s_max = v[n - 1];
	a->host_gbs = med_of(a, n, offsetof(struct round, host_gbs));
	for (int x = 0; x < COLI_TIER_N; x++)
		a->tier_b[x] = med_of(a, n, offsetof(struct round, tier_b) + x * sizeof(double));
	a->dense_b = med_of(a, n, offsetof(struct round, dense_b));
	a->stream_b = med_of(a, n, offsetof(struct round, stream_b));
	a->stream_copy_b = med_of(a, n, offsetof(struct round, stream_copy_b));
	a->dense_dev = a->r[0].dense_dev;
	a->uses = med_of(a, n, offsetof(struct round, uses));
	a->hits = med_of(a, n, offsetof(struct round, hits));
	for (int p = 0; p < N_PHASES; p++)
		a->phase_ms[p] =
		    med_of(a, n, offsetof(struct round, phase_ms) + p * sizeof(double));

	for (int p = 0; p < 4; p++)
		a->win_ms[p] = med_of(a, n, offsetof(struct round, win_ms) + p * sizeof(double));
	for (int p = 0; p < N_PROF; p++)
		a->prof_ms[p] = med_of(a, n, offsetof(struct round, prof_ms) + p * sizeof(double));
	a->stream_gbs = med_of(a, n, offsetof(struct round, stream_gbs));
	a->kv_b = med_of(a, n, offsetof(struct round, kv_b));
	a->reloads = a->reload_b = 0;
	memset(a->layer, 0, sizeof(a->layer));
	for (int i = 0; i < n; i++) {
		a->reloads += a->r[i].reloads;
		a->reload_b += a->r[i].reload_b;
		for (int k = 0; k < COLI_TL_CLASSES; k++)
			for (int f = 0; f < COLI_TL_FIELDS; f++)
				a->layer[k][f] += a->r[i].layer[k][f];
	}

	struct bench_bw bw = {.cpu_gbs = a->host_gbs, .disk_gbs = R->disk_med};
	int sim = !strncmp(a->opts.gpu, "sim", 3);

	memset(&a->bytes, 0, sizeof(a->bytes));
	/* The CPU reads the dense part (when it runs there) and every slab it
	 * computes; streamed slabs cross PCIe and are read again from VRAM;
	 * VRAM-resident slabs and a device-resident dense part are HBM reads. */
	a->bytes.b[BENCH_TERM_CPU] = (a->dense_dev ? 0 : a->dense_b) + a->tier_b[COLI_TIER_RAM] +
	                             a->tier_b[COLI_TIER_DISK] - a->stream_b;
	a->bytes.b[BENCH_TERM_DISK] = a->tier_b[COLI_TIER_DISK];
	if (R->have_gpu) {
		bw.hbm_gbs = R->gpu.hbm_gbs;
		bw.pcie_gbs = R->gpu.pcie_gbs;
		bw.dram_gbs = R->gpu.dram_gbs;
		a->bytes.b[BENCH_TERM_HBM] =
		    a->tier_b[COLI_TIER_VRAM] + a->stream_b + (a->dense_dev ? a->dense_b : 0);
		a->bytes.b[BENCH_TERM_PCIE] = a->stream_copy_b; /* staged hits cost no copy */
	}
	if (sim) { /* the simulated device computes with the CPU, from host memory */
		memset(&a->bytes, 0, sizeof(a->bytes));
		bw.hbm_gbs = bw.pcie_gbs = 0;
		a->bytes.b[BENCH_TERM_CPU] = a->dense_b + a->tier_b[COLI_TIER_VRAM] +
		                             a->tier_b[COLI_TIER_RAM] + a->tier_b[COLI_TIER_DISK];
		a->bytes.b[BENCH_TERM_DISK] = a->tier_b[COLI_TIER_DISK];
	}
	bench_bound(&a->bytes, &bw, &a->bound);
	a->ideal = a->bound;
	if (!R->stream)
		return;
	ideal_bound(R, a, &bw, sim, 1, &a->ideal);
	{
		struct bench_bw free_bw = bw;

		free_bw.dram_gbs = 0;
		ideal_bound(R, a, &free_bw, sim, 1, &a->ideal_free);
	}
	/* The path bound. A decode token is a chain: a layer's attention and
	 * router come before its experts, its experts before the next layer,
	 * so the part of the token outside the MoE phase (as this arm measured
	 * it: the dense part runs at its kernels' latency, far from any
	 * bandwidth) adds to the experts' own ideal (the one above over the
	 * expert bytes alone). Copies issued ahead of the routing could still
	 * hide under the chain, so this is not a floor: it is what the MoE
	 * machinery is measured against. */
	ideal_bound(R, a, &bw, sim, 0, &a->moe_ideal);
	a->path_s = 0;
	if (a->tok_s > 0)
		a->path_s = 1.0 / a->tok_s - a->phase_ms[1] / 1e3 + a->moe_ideal.bound_s;
	if (a->path_s < a->moe_ideal.bound_s) /* the MoE phase timed past the token */
		a->path_s = a->moe_ideal.bound_s;
}

/* ---- output ---- */

/* A host-planned decode MoE layer, step by step (coli_engine_stats
 * moe_layer): where a streamed layer's time goes, by the copies it made.
 * Arms with --profile, and every arm of bench stream (the timeline costs the
 * engine nothing; --profile's phase syncs and ungraphed layers change it). */
static const char *const g_tl[COLI_TL_FIELDS - 1] = {"launch", "chain", "copy", "issue",
                                                     "cpu",    "take",  "end"};

static int shows_timeline(const struct run *R, const struct arm *a)
{
	return R->stream || a->opts.profile || a->opts.cuda_profile;
}

void bench_print_timeline(const struct run *R)
{
	int any = 0;

	for (int i = 0; i < R->n_arms; i++)
		for (int k = 0; k < COLI_TL_CLASSES; k++)
			any |= shows_timeline(R, &R->arm[i]) && R->arm[i].layer[k][0] > 0;
	if (!any)
		return;
	printf("\na host-planned decode MoE layer by the slab copies it made, us (mean): launch = "
	       "queuing its device part,\nchain = then waiting for its routing; then, after the "
	       "routing, when its first slab copy was queued (0: none),\nwhen the devices' issue, "
	       "the CPU rows, take and the layer's host part ended.\noutside: a token's time "
	       "beyond these layers' launch + chain + end\n");
	printf("%-20s %6s %7s %7s %7s %7s %7s %7s %7s %7s\n", "arm", "copies", "layers", g_tl[0],
	       g_tl[1], g_tl[2], g_tl[3], g_tl[4], g_tl[5], g_tl[6]);
	for (int i = 0; i < R->n_arms; i++) {
		const struct arm *a = &R->arm[i];
		double in_layers = 0; /* s, summed over the rounds */

		if (!shows_timeline(R, a))
			continue;
		for (int k = 0; k < COLI_TL_CLASSES; k++) {
			const double *m = a->layer[k];

			if (m[0] <= 0)
				continue;
			printf("%-20s %5d%s %7.0f", a->name, k,
			       k == COLI_TL_CLASSES - 1 ? "+" : " ", m[0]);
			for (int f = 1; f < COLI_TL_FIELDS; f++)
				printf(" %7.1f", m[f] / m[0] * 1e6);
			printf("\n");
			in_layers += m[1] + m[2] + m[7];
		}
		/* a token's time as the mean over the rounds, as the layers' sums are
		 * (the median token beside the mean layer put a noisy arm's outside
		 * part below zero) */
		double tok = 0;
		int n = 0;

		for (int r = 0; r < R->rounds; r++)
			if (a->r[r].tok_s > 0)
				tok += 1.0 / a->r[r].tok_s, n++;
		if (n == R->rounds && in_layers > 0)
			printf("%-20s outside %.1f us a token (of %.1f, the rounds' mean)\n",
			       a->name,
			       (tok / n - in_layers / ((double)R->rounds * R->tokens)) * 1e6,
			       tok / n * 1e6);
	}
}

/* Arms run with --profile: pack+issue = plan + host slabs + device issue (+ the
 * lookahead where it ran there); cpu-rows include the devices' issue beside
 * them; devices busy: event time of the expert work of the layers the host
 * planned, all devices (a layer planned on the dense part's device, all its
 * experts resident there, runs outside the window and is not in it). */
void bench_print_profile(const struct run *R)
{
	int any = 0;

	for (int i = 0; i < R->n_arms; i++)
		any |= R->arm[i].opts.profile || R->arm[i].opts.cuda_profile;
	if (!any)
		return;
	printf("\n--profile, ms per token (median): ");
	for (int p = 0; p < N_PROF; p++)
		printf("%s%s", p ? " | " : "", g_prof[p]);
	printf("; slabs copied to devices, GB/s of the timed run\n");
	for (int i = 0; i < R->n_arms; i++) {
		const struct arm *a = &R->arm[i];

		if (!a->opts.profile && !a->opts.cuda_profile)
			continue;
		printf("%-20s", a->name);
		for (int p = 0; p < N_PROF; p++)
			printf(" %9.3f", a->prof_ms[p]);
		printf("; %.2f\n", a->stream_gbs);
	}
}

double bench_round_ratio(const struct run *R, const struct arm *a, const struct arm *b, double *lo,
                         double *hi)
{
	double v[MAX_ROUNDS];
	int n = 0;

	for (int i = 0; i < R->rounds; i++)
		if (b->r[i].tok_s > 0)
			v[n++] = a->r[i].tok_s / b->r[i].tok_s;
	if (!n) {
		*lo = *hi = 0;
		return 0;
	}
	double m = bench_median(v, n); /* sorts v */

	*lo = v[0];
	*hi = v[n - 1];
	return m;
}

void bench_print_table(struct run *R)
{
	const char *what = R->prefill ? "prefill" : "decode";

	printf("coli bench %s: %s, %s %s, %d layers, top-%d of %d experts, slab %.2f MB\n", what,
	       R->model, R->cfg.model_type, coli_dtype_name(R->cfg.quant), R->cfg.n_layers,
	       R->cfg.top_k, R->cfg.n_experts, R->slab_bytes / 1e6);
	if (R->prefill)
		printf("prompt %d tokens per round", R->prompt);
	else
		printf("prompt %d, %d decode tokens per round (fed %s)", R->prompt, R->tokens,
		       R->feed_greedy ? "greedy" : "a pseudo-random sequence");
	printf("; %d warm-up + %d interleaved rounds; medians [min..max]\n", R->warmup, R->rounds);
	if (R->noise)
		printf("noise: %d threads burning a core each through the rounds\n", R->noise);
	printf("bandwidth measured in this run: host read %s; disk ", "per arm (below)");
	if (R->disk_mib)
		printf("%.2f GB/s (%s, %s%s; the streamer's pattern: %zu random slabs of %.2f MB "
		       "per round, %d in flight; median of %d rounds)\n",
		       R->disk_med, R->disk.direct ? "O_DIRECT" : "BUFFERED: O_DIRECT refused",
		       R->disk.uring ? "io_uring" : "pread", R->disk.fixed ? ", fixed buffers" : "",
		       R->n_dext, R->slabs.slab_bytes / 1e6, R->qd, R->rounds);
	else
		printf("not measured (--disk-mib 0)\n");
	if (R->have_gpu)
		printf("GPU 0: pinned H2D %.1f GB/s, device memory %.0f GB/s (read + write of a "
		       "copy)\n\n",
		       R->gpu.pcie_gbs, R->gpu.hbm_gbs);
	else
		printf("GPU: none (hbm and pcie terms absent)\n\n");
	printf("%-20s %9s %17s %8s %8s %8s %8s %9s %9s %-5s %6s\n", "arm", "tok/s", "[min..max]",
	       "ram MB", "disk MB", "vram MB", "dense MB", "host GB/s", "bound t/s", "by", "ratio");
	for (int i = 0; i < R->n_arms; i++) {
		struct arm *a = &R->arm[i];
		char spread[40];

		snprintf(spread, sizeof(spread), "[%.2f..%.2f]", a->tok_s_min, a->tok_s_max);
		printf("%-20s %9.2f %17s %8.2f %8.2f %8.2f %8.2f %9.2f %9.2f %-5s %6.3f\n", a->name,
		       a->tok_s, spread, a->tier_b[COLI_TIER_RAM] / 1e6,
		       a->tier_b[COLI_TIER_DISK] / 1e6, a->tier_b[COLI_TIER_VRAM] / 1e6,
		       a->dense_b / 1e6, a->host_gbs, 1.0 / a->bound.bound_s,
		       bench_term_name[a->bound.dominant], a->tok_s * a->bound.bound_s);
	}
	if (R->n_arms > 1) { /* A/B: each arm against the first, round by round */
		printf("\nx %s, the median [min..max] of the rounds' own ratios:", R->arm[0].name);
		for (int i = 1; i < R->n_arms; i++) {
			double lo, hi, x = bench_round_ratio(R, &R->arm[i], &R->arm[0], &lo, &hi);

			printf("%s %s %.3f [%.3f..%.3f]", i > 1 ? ";" : "", R->arm[i].name, x, lo,
			       hi);
		}
		printf("\n");
	}
	printf("\nper-token split, ms (median): ");
	for (int p = 0; p < N_PHASES; p++)
		printf("%s%s", p ? " | " : "", g_phase[p]);
	printf("; moe = pack+issue | cpu-rows | take; attention's core (the CPU's scores, "
	       "softmax and values)\n");
	for (int i = 0; i < R->n_arms; i++) {
		struct arm *a = &R->arm[i];

		printf("%-20s", a->name);
		for (int p = 0; p < N_PHASES; p++)
			printf(" %9.3f", a->phase_ms[p]);
		printf("; %.3f | %.3f | %.3f; %.3f   (%.1f expert loads, %.1f routed pairs per "
		       "token)\n",
		       a->win_ms[0], a->win_ms[1], a->win_ms[2], a->win_ms[3], a->hits, a->uses);
	}
	bench_attn_table(R);
	bench_print_profile(R);
	bench_print_timeline(R);
	printf("\nMB = 1e6 bytes per token. bound: max over terms of bytes/bandwidth (cpu = dense "
	       "+ ram + disk bytes at the host read GB/s; disk = disk bytes at the disk GB/s); "
	       "ratio = achieved / bound.\n");
}

void bench_print_json(struct run *R)
{
	printf("{\"bench\": \"%s\", \"model\": \"%s\", \"arch\": \"%s\", \"quant\": \"%s\", "
	       "\"n_layers\": %d, \"n_moe_layers\": %d, \"n_experts\": %d, \"top_k\": %d, "
	       "\"slab_bytes\": %llu, \"prompt\": %d, \"tokens\": %d, \"rounds\": %d, "
	       "\"warmup\": %d, \"isa\": \"%s\", \"cpus\": %ld, \"noise\": %d,\n",
	       R->stream    ? "stream"
	       : R->prefill ? "prefill"
	                    : "decode",
	       R->model, R->cfg.model_type, coli_dtype_name(R->cfg.quant), R->cfg.n_layers,
	       R->n_moe_layers, R->cfg.n_experts, R->cfg.top_k, (unsigned long long)R->slab_bytes,
	       R->prompt, R->prefill ? R->prompt : R->tokens, R->rounds, R->warmup,
	       coli_cpu_isa_name(coli_cpu_isa()), sysconf(_SC_NPROCESSORS_ONLN), R->noise);
	char hbm[32] = "null", pcie[32] = "null", dram[32] = "null", sbuf[16];

	if (R->have_gpu) {
		snprintf(hbm, sizeof(hbm), "%.2f", R->gpu.hbm_gbs);
		snprintf(pcie, sizeof(pcie), "%.2f", R->gpu.pcie_gbs);
	}
	if (R->gpu.dram_gbs > 0)
		snprintf(dram, sizeof(dram), "%.2f", R->gpu.dram_gbs);
	printf(" \"bandwidth\": {\"disk_gbs\": %.4f, \"disk_direct\": %s, \"disk_engine\": \"%s\", "
	       "\"disk_fixed\": %s, \"disk_pattern\": \"%s\", \"disk_qd\": %d, "
	       "\"disk_block_bytes\": %llu, \"disk_reads_per_round\": %zu, "
	       "\"disk_bytes_per_round\": %llu, \"hbm_gbs\": %s, \"pcie_gbs\": %s, "
	       "\"dram_gbs\": %s},\n",
	       R->disk_mib ? R->disk_med : 0.0, R->disk.direct ? "true" : "false",
	       R->disk_mib ? (R->disk.uring ? "io_uring" : "pread") : "none",
	       R->disk.fixed ? "true" : "false", R->disk_mib ? "slabs" : "none", R->qd,
	       (unsigned long long)R->slabs.slab_bytes, R->disk_mib ? R->n_dext : 0,
	       (unsigned long long)R->disk.bytes, hbm, pcie, dram);
	printf(" \"arms\": [");
	for (int i = 0; i < R->n_arms; i++) {
		struct arm *a = &R->arm[i];
		double sum = 0;

		for (int x = 0; x < COLI_TIER_N; x++)
			sum += a->tier_b[x];
		printf("%s\n  {\"arm\": \"%s\", \"threads\": %d, \"tok_s\": %.4f, \"tok_s_min\": "
		       "%.4f, \"tok_s_max\": %.4f, \"tok_s_rounds\": [",
		       i ? "," : "", a->name, a->threads, a->tok_s, a->tok_s_min, a->tok_s_max);
		for (int k = 0; k < R->rounds; k++)
			printf("%s%.4f", k ? ", " : "", a->r[k].tok_s);
		printf("],\n   \"host_read_gbs\": %.4f, \"bytes_per_token\": {\"vram\": %.1f, "
		       "\"ram\": %.1f, \"disk\": %.1f, \"experts\": %.1f, \"dense\": %.1f},\n",
		       a->host_gbs, a->tier_b[COLI_TIER_VRAM], a->tier_b[COLI_TIER_RAM],
		       a->tier_b[COLI_TIER_DISK], sum, a->dense_b);
		printf("   \"expert_loads_per_token\": %.3f, \"routed_pairs_per_token\": %.3f,\n",
		       a->hits, a->uses);
		printf("   \"phase_ms_per_token\": {");
		for (int p = 0; p < N_PHASES; p++)
			printf("%s\"%s\": %.4f", p ? ", " : "", g_phase[p], a->phase_ms[p]);
		printf(", \"attention_core\": %.4f},\n", a->win_ms[3]);
		if (a->opts.profile || a->opts.cuda_profile) {
			printf("   \"profile_ms_per_token\": {");
			for (int p = 0; p < N_PROF; p++)
				printf("%s\"%s\": %.4f", p ? ", " : "", g_prof_key[p],
				       a->prof_ms[p]);
			printf("},\n   \"layer_timeline_us\": [");
			for (int k = 0; k < COLI_TL_CLASSES; k++) {
				const double *m = a->layer[k], n = m[0] > 0 ? m[0] : 1;

				printf("%s{\"copies\": %d, \"layers\": %.0f", k ? ", " : "", k,
				       m[0]);
				for (int f = 1; f < COLI_TL_FIELDS; f++)
					printf(", \"%s\": %.2f", g_tl[f - 1], m[f] / n * 1e6);
				printf("}");
			}
			printf("],\n");
		}
		printf("   \"bound_terms_s\": {");
		for (int t = 0, k = 0; t < BENCH_N_TERMS; t++)
			if (a->bound.term_s[t] >= 0)
				printf("%s\"%s\": %.6g", k++ ? ", " : "", bench_term_name[t],
				       a->bound.term_s[t]);
		if (a->bound.bound_s > 0)
			printf("}, \"bound_term\": \"%s\", \"bound_tok_s\": %.6g, \"ratio\": %.6g",
			       bench_term_name[a->bound.dominant], 1.0 / a->bound.bound_s,
			       a->tok_s * a->bound.bound_s);
		else /* every byte went through a term not measured here (a simulated device) */
			printf("}, \"bound_term\": null, \"bound_tok_s\": null, \"ratio\": null");
		printf(",\n   \"reloads\": %.0f, \"reload_bytes\": %.0f", a->reloads, a->reload_b);
		bench_attn_json(R, a);
		if (R->stream)
			printf(
			    ",\n   \"group_async\": %d, \"stream\": \"%s\", \"vram_gb\": %.6g, "
			    "\"stream_bytes_per_token\": %.1f, \"stream_copy_bytes_per_token\": "
			    "%.1f, "
			    "\"stream_gbs\": %.4f,\n   "
			    "\"overlap_window_ms_per_token\": {\"pack_issue\": %.4f, \"cpu_rows\": "
			    "%.4f, \"take\": %.4f},\n   \"ideal_bound_term\": "
			    "\"%s\", \"ideal_bound_tok_s\": %.6g, \"ideal_ratio\": %.6g, "
			    "\"ideal_ratio_uncapped\": %.6g,\n   "
			    "\"moe_ms_per_token\": %.6g, \"moe_ideal_ms_per_token\": %.6g, "
			    "\"path_bound_tok_s\": %.6g, \"path_ratio\": %.6g",
			    a->opts.group_async,
			    coli_opts_get(&a->opts, "--stream", sbuf, sizeof(sbuf)),
			    a->opts.vram_gb, a->stream_b, a->stream_copy_b, a->stream_gbs,
			    a->win_ms[0], a->win_ms[1], a->win_ms[2],
			    bench_term_name[a->ideal.dominant], 1.0 / a->ideal.bound_s,
			    a->tok_s * a->ideal.bound_s, a->tok_s * a->ideal_free.bound_s,
			    a->phase_ms[1], a->moe_ideal.bound_s * 1e3,
			    a->path_s > 0 ? 1.0 / a->path_s : 0.0, a->tok_s * a->path_s);
		printf("}");
	}
	printf("\n ]");
	if (R->stream)
		printf(",\n \"vram_frac\": %.4f, \"expert_bytes\": %.0f, \"stream_slots\": %d, "
		       "\"device\": \"%s\", \"heat_from\": \"%s\"",
		       R->vram_frac, R->expert_total_bytes, R->base.stream_slots, R->base.gpu,
		       R->heat_from);
	printf("}\n");
}
