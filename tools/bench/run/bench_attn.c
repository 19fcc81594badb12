/*
 * tools/bench/run/bench_attn.c — `coli bench decode --ctx-fill N`'s report: decode
 * after N cached tokens, and what attention costs there.
 *
 * The fill: the first round (a warm-up one by default) prefills the N-token
 * prompt, as any decode round prefills its prompt, before the clock; every
 * later round rewinds the cache to N (coli_engine_rewind, as the prefix
 * cache keeps a prompt) and times --tokens steps from there, so a 128k fill
 * is paid once per arm, not once per round, and every round decodes at the
 * same positions N .. N + tokens - 1.
 *
 * Per arm, the medians of the rounds:
 *   attention ms   coli_engine_stats attention_s per token (norm, q/k/v,
 *                  RoPE, attention, o; on a device exact with --profile only:
 *                  core/forward/dense_dev.c coli_dense_dev_phase_end)
 *   share          attention ms / the step's ms (1 / tok/s), the median of the
 *                  rounds' own shares (medians taken apart could pair a slow
 *                  round's attention with a fast round's step: a share past 1)
 *   KV MB          K and V of every cached position, every layer, read once
 *                  a step: (p + 1) rows at step p, averaged (bench_run.c's
 *                  kv_row_bytes: the cache's own element size)
 *   KV GB/s        KV bytes / attention time: a floor of the rate attention
 *                  read the cache at (its time holds the projections too)
 *   of bound       KV GB/s over the bandwidth the bench's bound uses for
 *                  where attention ran: the device memory's copy rate with
 *                  the dense part on a GPU, else the arm's host read
 */
#include <stdio.h>
#include <string.h>

#include "core/coli.h"
#include "tools/bench/bench.h"

#include "tools/bench/run/bench_run.h"

/* The bandwidth attention's reads are held to, GB/s (0: not measured). */
static double attn_bw(const struct run *R, const struct arm *a)
{
	if (a->dense_dev && strncmp(a->opts.gpu, "sim", 3))
		return R->have_gpu ? R->gpu.hbm_gbs : 0;
	return a->host_gbs;
}

/* The median over arm a's rounds of attention's share of the round's step. */
static double attn_share(const struct run *R, const struct arm *a)
{
	double v[MAX_ROUNDS];
	int n = 0;

	for (int k = 0; k < R->rounds && k < MAX_ROUNDS; k++)
		if (a->r[k].tok_s > 0)
			v[n++] = a->r[k].phase_ms[0] * a->r[k].tok_s / 1e3;
	return n ? bench_median(v, n) : 0;
}

void bench_attn_table(const struct run *R)
{
	if (!R->ctx_fill)
		return;
	printf("\nattention after %d cached tokens (decode steps at positions %d..%d), per "
	       "token, medians:\n",
	       R->ctx_fill, R->ctx_fill, R->ctx_fill + R->tokens - 1);
	printf("%-20s %12s %7s %9s %9s %10s %8s\n", "arm", "attention ms", "share", "KV MB",
	       "KV GB/s", "bound GB/s", "of bound");
	for (int i = 0; i < R->n_arms; i++) {
		const struct arm *a = &R->arm[i];
		double ms = a->phase_ms[0];
		double gbs = ms > 0 ? a->kv_b / (ms / 1e3) / 1e9 : 0, bw = attn_bw(R, a);

		printf("%-20s %12.3f %6.1f%% %9.2f %9.2f %10.2f %7.1f%%%s\n", a->name, ms,
		       100 * attn_share(R, a), a->kv_b / 1e6, gbs, bw, bw > 0 ? 100 * gbs / bw : 0,
		       a->dense_dev && !a->opts.profile ? "  (device: --profile for an exact split)"
		                                        : "");
	}
}

void bench_attn_json(const struct run *R, const struct arm *a)
{
	double ms = a->phase_ms[0];
	double gbs = ms > 0 ? a->kv_b / (ms / 1e3) / 1e9 : 0, bw = attn_bw(R, a);

	if (!R->ctx_fill)
		return;
	printf(",\n   \"ctx_fill\": %d, \"attention\": {\"ms_per_token\": %.6g, \"share\": %.6g, "
	       "\"kv_bytes_per_token\": %.1f, \"kv_gbs\": %.6g, \"bound_gbs\": %.6g, "
	       "\"ratio\": %.6g}",
	       R->ctx_fill, ms, attn_share(R, a), a->kv_b, gbs, bw, bw > 0 ? gbs / bw : 0);
}
