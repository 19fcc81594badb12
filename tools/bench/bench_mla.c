/*
 * tools/bench/bench_mla.c — `coli bench mla`: the latent attention of a decode step
 * (ptx/attn/mla.cu, ptx/attn/mla_decode.cuh) against the device's memory bandwidth.
 *
 * A decode step's MLA attention reads each layer's latent cache once: ctx
 * rows of dk values (DeepSeek-V3 and Kimi-K2: kv_lora 512 + rope 64 = 576)
 * in the cache's type (--kv-type: f32, bf16 the engine's default, q8: int8
 * values and a scale a segment), shared by every head. Its bound is those
 * bytes at the device bandwidth measured in the same run
 * (tools/bench/bench_measure.c: a 512 MiB device copy, read + write bytes). The
 * work is 2 nh ctx (dk + dv) multiply-adds on the tensor cores, times the
 * products an arm makes of each: at 128 heads that work, not the read, is
 * what decides the time, and the figure printed beside each arm is the
 * fraction of the bandwidth bound reached.
 *
 * Arms: the tf32 kernel (mla.cu) x3 (three tf32 products, ~fp32) and x1 (one);
 * the bf16 decode kernel (mla_decode.cuh) dec1 .. dec3 (the query and P in
 * 1 .. 3 bf16 terms; dec2 is what the dense forward picks), interleaved:
 * every repetition launches each arm once, in turn, on one of four caches of
 * the context's size (so a launch does not find the previous one's rows in
 * L2), timed with device events; medians over the repetitions, with the
 * range.
 *
 * Buffers: cache [4][ctx][row bytes], q [nh][dk] f32, out [nh][dv] f32, on
 * GPU 0.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx/ptx.h"
#include "tools/bench/bench.h"
#include "tools/tools.h"

#define P        "coli bench mla"
#define N_BUFS   4
#define MAX_REPS 200

static void help(FILE *f)
{
	fprintf(f, "usage: coli bench mla [--ctx N] [--heads H] [--dk D] [--dv V] [--reps R]\n"
	           "                      [--kv-type f32|bf16|q8]\n"
	           "  decode-step latent attention (ptx/attn/mla.cu, mla_decode.cuh) over a cache\n"
	           "  of N positions (default 32768) in the cache's type (default bf16), H\n"
	           "  heads (default 128; Kimi-K2: 64), key D (576), value V (512): per arm\n"
	           "  (tf32 x3, x1; bf16 dec1..dec3) microseconds per launch, cache GB/s, the\n"
	           "  bound from the device bandwidth measured in the run, and their ratio\n");
}

struct arm {
	const char *name;
	int terms, x3; /* struct coli_gpu_mla's */
	double us[MAX_REPS];
};

#define N_ARMS 5

int bench_mla_main(int argc, char **argv)
{
	int ctx = 32768, nh = 128, dk = 576, dv = 512, reps = 30, rc = 0, kt = 1;
	static const char *const kname[3] = {"f32", "bf16", "q8"};
	struct bench_bw bw = {0};
	struct arm arms[N_ARMS] = {{.name = "x3", .terms = COLI_GPU_MLA_TF32, .x3 = 1},
	                           {.name = "x1", .terms = COLI_GPU_MLA_TF32, .x3 = 0},
	                           {.name = "dec1", .terms = 1},
	                           {.name = "dec2", .terms = 2},
	                           {.name = "dec3", .terms = 3}};
	uint64_t cache[N_BUFS] = {0}, q = 0, out = 0;
	coli_gpu_t *g = NULL;
	const char *why;
	char err[256];

	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			help(stdout);
			return 0;
		}
		if (!v)
			return tool_err("bench mla", "%s needs a value (see --help)", o), 2;
		if (!strcmp(o, "--ctx"))
			bad = tool_int(P, o, v, 1, 1 << 20, &ctx);
		else if (!strcmp(o, "--heads"))
			bad = tool_int(P, o, v, 1, 1024, &nh);
		else if (!strcmp(o, "--dk"))
			bad = tool_int(P, o, v, 16, 640, &dk);
		else if (!strcmp(o, "--dv"))
			bad = tool_int(P, o, v, 8, 512, &dv);
		else if (!strcmp(o, "--reps"))
			bad = tool_int(P, o, v, 3, MAX_REPS, &reps);
		else if (!strcmp(o, "--kv-type")) {
			for (kt = 0; kt < 3 && strcmp(v, kname[kt]); kt++)
				;
			if (kt == 3)
				return tool_err("bench mla", "--kv-type '%s': not f32, bf16 or q8",
				                v),
				       2;
		} else
			return tool_err("bench mla", "unknown option '%s' (see --help)", o), 2;
		if (bad)
			return 2;
		i++;
	}
	if (coli_ptx_probe(&why) == 0)
		return tool_err("bench mla", "no GPU: %s", why), 1;
	if (bench_gpu_bw(&bw, NULL, NULL, NULL))
		return tool_err("bench mla", "measuring the device bandwidth failed"), 1;
	if (coli_gpu_open(0, 0, &g, err, sizeof(err)))
		return tool_err("bench mla", "GPU 0: %s", err), 1;
	/* a row's bytes: f32 dk floats; bf16 dk halves; q8 dk bytes (to 4) and
	 * one float a segment of dv values */
	const size_t rbytes = kt == 0 ? (size_t)dk * 4
	                      : kt == 1
	                          ? (size_t)dk * 2
	                          : ((size_t)dk + 3) / 4 * 4 + 4 * (size_t)((dk + dv - 1) / dv);
	const size_t cbytes = (size_t)ctx * rbytes;

	for (int b = 0; !rc && b < N_BUFS; b++) {
		rc = coli_gpu_alloc(g, cbytes, &cache[b]);
		rc = rc ? rc : coli_gpu_memset(g, cache[b], 0x3c, cbytes); /* ~0.011 each */
	}
	rc = rc ? rc : coli_gpu_alloc(g, sizeof(float) * nh * dk, &q);
	rc = rc ? rc : coli_gpu_memset(g, q, 0x3e, sizeof(float) * nh * dk);
	rc = rc ? rc : coli_gpu_alloc(g, sizeof(float) * nh * dv, &out);
	/* the clocks up first: a second of launches (an idle H200 sits at a
	 * fraction of its clock, and a few launches do not raise it) */
	for (double t0 = bench_now_s(); !rc && bench_now_s() - t0 < 1.0;) {
		struct coli_gpu_mla m = {.q = q,
		                         .cache = cache[0],
		                         .out = out,
		                         .T = 1,
		                         .pos0 = ctx - 1,
		                         .nh = nh,
		                         .dk = dk,
		                         .dv = dv,
		                         .ld = dk,
		                         .scale = 0.04f,
		                         .kt = kt};

		for (int i = 0; !rc && i < 20; i++)
			rc = coli_gpu_mla_attention(g, &m);
		rc = rc ? rc : coli_gpu_sync(g);
	}
	for (int r = 0; !rc && r <= reps; r++) /* r = 0 warms up */
		for (int a = 0; !rc && a < N_ARMS; a++) {
			struct coli_gpu_mla m = {.q = q,
			                         .cache = cache[(N_ARMS * r + a) % N_BUFS],
			                         .out = out,
			                         .T = 1,
			                         .pos0 = ctx - 1,
			                         .nh = nh,
			                         .dk = dk,
			                         .dv = dv,
			                         .ld = dk,
			                         .scale = 0.04f,
			                         .x3 = arms[a].x3,
			                         .terms = arms[a].terms,
			                         .kt = kt};
			float ms = 0;

			rc = coli_gpu_mark(g, 0);
			rc = rc ? rc : coli_gpu_mla_attention(g, &m);
			rc = rc ? rc : coli_gpu_mark(g, 1);
			rc = rc ? rc : coli_gpu_elapsed_ms(g, 0, 1, &ms);
			if (r)
				arms[a].us[r - 1] = ms * 1e3;
		}
	if (rc) {
		tool_err("bench mla", "a launch failed (%d): %s", rc,
		         rc == -ENOTSUP ? "shape not supported" : "");
		goto out;
	}
	const double bound_us = cbytes / (bw.hbm_gbs * 1e9) * 1e6;

	printf("mla decode attention: ctx %d, %d heads, dk %d, dv %d; %s cache, %zu bytes a row, "
	       "%.1f MB a layer read; device %.0f GB/s (copy, same run): bound %.1f us\n",
	       ctx, nh, dk, dv, kname[kt], rbytes, cbytes / 1e6, bw.hbm_gbs, bound_us);
	printf("%-5s %10s %22s %10s %8s %12s\n", "arm", "us", "[range]", "cache GB/s", "of bound",
	       "mma TFLOP/s");
	for (int a = 0; a < N_ARMS; a++) {
		double *v = arms[a].us, med = bench_median(v, reps); /* sorts v */
		/* tensor products an arm makes of each multiply-add: tf32 x3 three,
		 * x1 one; bf16 its terms, one more for an f32 cache's lo plane */
		const int prods = arms[a].terms < 0 ? (arms[a].x3 ? 3 : 1) : arms[a].terms + !kt;
		const double flop = 2.0 * nh * ctx * (dk + dv) * prods;

		printf("%-5s %10.1f   [%8.1f .. %8.1f] %10.0f %8.2f %12.0f\n", arms[a].name, med,
		       v[0], v[reps - 1], cbytes / (med * 1e-6) / 1e9, bound_us / med,
		       flop / (med * 1e-6) / 1e12);
	}
out:
	for (int b = 0; b < N_BUFS; b++)
		if (cache[b])
			coli_gpu_free(g, cache[b]);
	if (q)
		coli_gpu_free(g, q);
	if (out)
		coli_gpu_free(g, out);
	coli_gpu_close(g);
	return rc ? 1 : 0;
}
