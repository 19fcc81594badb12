/*
 * tools/bench/run/bench_stream.c — `coli bench stream`: the streaming-weight path's
 * benchmark (issue #7). Five fixed arms over one VRAM budget, each round on a
 * fresh engine that starts from the same heat; rounds, medians, the bound and
 * the JSON are tools/bench/run/bench_run.c's.
 *
 *   sync            COLI_GROUP_ASYNC=0, --stream off
 *   overlap         COLI_GROUP_ASYNC=1, --stream off
 *   overlap+stream  COLI_GROUP_ASYNC=1, --stream auto (the cost model's split)
 *   stream-only     COLI_GROUP_ASYNC=1, --stream only
 *   cpu-only        --vram-gb 0, --stream off
 *
 * VRAM: n = floor(--vram-frac x experts) slabs resident (default 25% of the
 * expert bytes); the staging slots of streaming arms come on top of an
 * explicit --vram-gb, so every arm but cpu-only holds the same experts. The
 * rest is in RAM (--ram-gb as given; default: no limit).
 *
 * Heat: the model's usage file (or --usage FILE) when it exists, else a
 * warm-up run of --heat-tokens decode tokens (fed as the rounds feed theirs,
 * from another prompt) on the cpu-only options; it is
 * snapshotted to MODEL.usage.bench-snapshot, and before every arm's round
 * restored to MODEL.usage.bench (coli_usage_copy, as `coli usage restore`),
 * which that round's engine opens with: VRAM placement and the RAM warm-up
 * reads start from the same heat whatever the arm before did. The prompt is
 * prefilled and the warm-up reads settle (coli_engine_settle) before the
 * clock starts. Both files are removed at the end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptx/ptx.h"
#include "tools/bench/run/bench_run.h"
#include "tools/tools.h"

static int stream_arm(struct run *R, struct arm *a, const char *name)
{
	double slab = (double)R->slab_bytes;
	int total = (int)(R->expert_total_bytes / slab + 0.5), n_res = (int)(R->vram_frac * total);
	double vram = (n_res + 0.5) * slab;

	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", name);
	a->opts = R->base;
	a->opts.group_async = strcmp(name, "sync") != 0;
	a->opts.stream = COLI_OPT_STREAM_OFF;
	a->opts.vram_gb = vram / 1e9;
	if (!strcmp(name, "overlap+stream") || !strcmp(name, "stream-only")) {
		a->opts.stream =
		    !strcmp(name, "stream-only") ? COLI_OPT_STREAM_ONLY : COLI_OPT_STREAM_AUTO;
	} else if (!strcmp(name, "cpu-only")) {
		a->opts.vram_gb = 0;
	} else if (strcmp(name, "sync") && strcmp(name, "overlap")) {
		return tool_err("bench",
		                "stream: unknown arm '%s' (sync, overlap, overlap+stream, "
		                "stream-only, cpu-only)",
		                name);
	}
	a->opts.ctx = R->prompt + R->tokens + 1;
	a->opts.ctx_override = 1; /* speed, not quality: past max_ctx is fine */
	snprintf(a->opts.usage, sizeof(a->opts.usage), "%s", R->usage_cur);
	a->opts.usage_off = 0;
	a->threads = a->opts.threads > 0 ? a->opts.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (coli_cpu_pool_create(a->threads, &a->pool))
		return tool_err("bench", "cannot start %d threads", a->threads);
	return 0;
}

/* The heat every arm starts from (see above); also reads the config. */
static int stream_heat(struct run *R)
{
	char err[1024], src[4200] = "";
	struct coli_opts o = R->base;
	coli_engine_t *e;
	int have = 0, rc = 0, *ids, id, V;
	float *logits;

	if (snprintf(R->usage_snap, sizeof(R->usage_snap), "%s.usage.bench-snapshot", R->model) >=
	    (int)sizeof(R->usage_snap))
		return tool_err("bench", "stream: model path too long");
	snprintf(R->usage_cur, sizeof(R->usage_cur), "%s.usage.bench", R->model);
	if (R->base.usage[0] && strcmp(R->base.usage, "off") && strcmp(R->base.usage, "none"))
		snprintf(src, sizeof(src), "%s", R->base.usage);
	else if (!R->base.usage[0])
		coli_usage_default_path(R->model, src, sizeof(src));
	if (src[0] && access(src, R_OK) == 0) {
		if (coli_usage_copy(R->model, src, R->usage_cur, err, sizeof(err)))
			return tool_err("bench", "stream: heat from %s: %s", src, err);
		snprintf(R->heat_from, sizeof(R->heat_from), "%s", src);
		have = 1;
	} else {
		unlink(R->usage_cur);
	}
	o.vram_gb = 0;
	o.stream = COLI_OPT_STREAM_OFF;
	snprintf(o.usage, sizeof(o.usage), "%s", R->usage_cur);
	o.usage_off = 0;
	o.ctx = R->prompt + R->heat_tokens + 1;
	o.ctx_override = 1;
	if (coli_engine_open(R->model, &o, &e, err, sizeof(err)))
		return tool_err("bench", "stream: %s", err);
	R->cfg = *coli_engine_config(e);
	V = R->cfg.vocab;
	ids = malloc(sizeof(int) * (size_t)R->prompt);
	logits = malloc(sizeof(float) * (size_t)V);
	if (!have && ids && logits) {
		for (int i = 0; i < R->prompt; i++) /* not a timed round's prompt */
			ids[i] = (int)((3 + 104729ull * (uint64_t)i) % (uint64_t)V);
		rc = coli_engine_forward(e, ids, R->prompt, logits, 0);
		for (int i = 0; !rc && i < R->heat_tokens; i++) {
			id = bench_feed(R, ids, i, logits);
			rc = coli_engine_forward(e, &id, 1, logits, 0);
		}
		snprintf(R->heat_from, sizeof(R->heat_from),
		         "a warm-up of %d prompt + %d %s tokens (cpu-only options)", R->prompt,
		         R->heat_tokens, R->feed_greedy ? "greedy" : "pseudo-random");
	}
	if (!ids || !logits)
		rc = -ENOMEM;
	free(ids), free(logits);
	coli_engine_close(e); /* writes the usage file */
	if (rc)
		return tool_err("bench", "stream: heat run: %s", strerror(-rc));
	if (coli_usage_copy(R->model, R->usage_cur, R->usage_snap, err, sizeof(err)))
		return tool_err("bench", "stream: snapshot: %s", err);
	return 0;
}

int bench_stream_setup(struct run *R)
{
	char list[1024], *save = NULL;

	if (!R->n_moe_layers || R->expert_total_bytes <= 0)
		return tool_err("bench", "stream: %s has no routed experts", R->model);
	if (strncmp(R->base.gpu, "sim", 3)) {
		const char *why = "";

		if (!strcmp(R->base.gpu, "off") || coli_ptx_probe(&why) <= 0)
			return tool_err(
			    "bench",
			    "stream: no GPU to stream to (%s); --gpu sim runs the scheduler "
			    "on a simulated device",
			    strcmp(R->base.gpu, "off") ? why : "--gpu off");
	}
	if (stream_heat(R))
		return 1;
	snprintf(list, sizeof(list), "%s",
	         R->arm_list ? R->arm_list : "sync,overlap,overlap+stream,stream-only,cpu-only");
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (R->n_arms == MAX_ARMS)
			return tool_err("bench", "at most %d arms", MAX_ARMS);
		if (stream_arm(R, &R->arm[R->n_arms++], t))
			return 1;
	}
	return 0;
}

int bench_stream_round(struct run *R, struct arm *a, struct round *r, float *logits)
{
	char err[1024];
	int rc;

	if (coli_usage_copy(R->model, R->usage_snap, R->usage_cur, err, sizeof(err))) {
		tool_err("bench", "stream: restoring the heat: %s", err);
		return -EIO;
	}
	rc = coli_engine_open(R->model, &a->opts, &a->e, err, sizeof(err));
	if (rc) {
		tool_err("bench", "arm '%s': %s", a->name, err);
		return rc;
	}
	rc = bench_round_body(R, a, r, logits);
	coli_engine_close(a->e);
	a->e = NULL;
	return rc;
}

static const struct arm *arm_named(const struct run *R, const char *name)
{
	for (int i = 0; i < R->n_arms; i++)
		if (!strcmp(R->arm[i].name, name))
			return &R->arm[i];
	return NULL;
}

/* Issue #7's figures: the streaming arm against the synchronous one (the
 * median of the rounds' own ratios: the sync arm is CPU-bound and drifts with
 * the host; the ratio of the two medians beside it), and against its bounds
 * (when both arms ran). */
static void print_summary(const struct run *R)
{
	const struct arm *sync = arm_named(R, "sync"), *os = arm_named(R, "overlap+stream");
	double lo, hi;

	if (!sync || !os || sync->tok_s <= 0)
		return;
	printf("overlap+stream: %.2fx sync (median of the rounds' ratios; %.2fx of the medians); "
	       "%.2f of the ideal bound (%.2f without the host memory's cap), %.2f of the path "
	       "bound\n",
	       bench_round_ratio(R, os, sync, &lo, &hi), os->tok_s / sync->tok_s,
	       os->tok_s * os->ideal.bound_s, os->tok_s * os->ideal_free.bound_s,
	       os->tok_s * os->path_s);
}

void bench_stream_table(struct run *R)
{
	int total = (int)(R->expert_total_bytes / R->slab_bytes + 0.5);

	printf("coli bench stream: %s, %s %s, %d layers, top-%d of %d experts, slab %.2f MB\n",
	       R->model, R->cfg.model_type, coli_dtype_name(R->cfg.quant), R->cfg.n_layers,
	       R->cfg.top_k, R->cfg.n_experts, R->slab_bytes / 1e6);
	printf("device %s; VRAM: %d of %d experts resident (%.0f%% of %.2f GB) in every arm but "
	       "cpu-only, + %d staging slabs in streaming arms; the rest in RAM\n",
	       R->base.gpu, (int)(R->vram_frac * total), total, 100 * R->vram_frac,
	       R->expert_total_bytes / 1e9, R->base.stream_slots);
	printf("heat: %s, restored before every round of every arm\n", R->heat_from);
	printf("prompt %d, %d decode tokens per round (fed %s); %d warm-up + %d interleaved "
	       "rounds; medians [min..max]\n",
	       R->prompt, R->tokens, R->feed_greedy ? "greedy" : "a pseudo-random sequence",
	       R->warmup, R->rounds);
	if (R->noise)
		printf("noise: %d threads burning a core each through the rounds\n", R->noise);
	if (R->disk_mib)
		printf("disk %.2f GB/s (%s); ", R->disk_med,
		       R->disk.direct ? "O_DIRECT" : "BUFFERED");
	if (R->have_gpu && strncmp(R->base.gpu, "sim", 3)) {
		printf("GPU 0: pinned H2D %.1f GB/s, device memory %.0f GB/s", R->gpu.pcie_gbs,
		       R->gpu.hbm_gbs);
		if (R->gpu.dram_gbs > 0)
			printf("; host memory with the link busy %.0f GB/s (the cores' part %.0f): "
			       "the ideal's cap on CPU + PCIe",
			       R->gpu.dram_gbs, R->dram_cores);
		printf("\n\n");
	} else
		printf("no GPU measured (sim: every byte is a CPU byte)\n\n");
	printf("%-15s %8s %15s %8s %8s %8s %8s %7s %9s %9s %8s %9s %-4s %6s %9s %6s %7s %7s %9s "
	       "%6s\n",
	       "arm", "tok/s", "[min..max]", "vram MB", "ram MB", "disk MB", "strm MB", "strm GB/s",
	       "pack+iss", "cpu-rows", "take", "bound t/s", "by", "ratio", "ideal t/s", "ratio",
	       "moe ms", "ideal", "path t/s", "ratio");
	for (int i = 0; i < R->n_arms; i++) {
		struct arm *a = &R->arm[i];
		char spread[40];

		snprintf(spread, sizeof(spread), "[%.2f..%.2f]", a->tok_s_min, a->tok_s_max);
		printf("%-15s %8.2f %15s %8.2f %8.2f %8.2f %8.2f %9.2f %9.3f %9.3f %8.3f %9.2f "
		       "%-4s %6.3f %9.2f %6.3f %7.3f %7.3f %9.2f %6.3f\n",
		       a->name, a->tok_s, spread, a->tier_b[COLI_TIER_VRAM] / 1e6,
		       a->tier_b[COLI_TIER_RAM] / 1e6, a->tier_b[COLI_TIER_DISK] / 1e6,
		       a->stream_b / 1e6, a->stream_gbs, a->win_ms[0], a->win_ms[1], a->win_ms[2],
		       1.0 / a->bound.bound_s, bench_term_name[a->bound.dominant],
		       a->tok_s * a->bound.bound_s, 1.0 / a->ideal.bound_s,
		       a->tok_s * a->ideal.bound_s, a->phase_ms[1], a->moe_ideal.bound_s * 1e3,
		       a->path_s > 0 ? 1.0 / a->path_s : 0.0, a->tok_s * a->path_s);
	}
	printf("\nMB = 1e6 bytes per token (strm: streamed, part of ram + disk); pack+iss | "
	       "cpu-rows | take: the MoE overlap window, ms per token; bound: this arm's split "
	       "(cpu = CPU rows, pcie = streamed, hbm = VRAM); ideal: RAM-tier bytes split so CPU "
	       "and PCIe finish together, B_ram / (BW_cpu + BW_pcie); ratio = achieved / bound. "
	       "moe ms: the token's MoE phase, ideal: the expert bytes' own ideal; path: the token "
	       "outside the MoE phase as measured + that ideal (a layer's experts wait for its "
	       "attention and router).\n");
	bench_print_profile(R);
	bench_print_timeline(R);
	print_summary(R);
}
