/*
 * tools/bench/bench_cpu_attn.c — `coli bench attention`: the CPU's attention of
 * one decode token over a long cache (coli_attention_groups_mt, as
 * core/forward/forward.c calls it) against the host's read bandwidth.
 *
 * A decode step's attention reads each layer's K and V rows once: ctx
 * positions of kv_heads x head_dim values each, in the cache's type
 * (--kv-type: bf16 the engine's default, f32, q8 with a scale a head). Its
 * bound is those bytes at the host read bandwidth measured in the same run
 * (tools/bench/bench_measure.c: a 256 MiB buffer allocated as the engine's, read
 * by the same threads). The caches are --layers layers' worth, allocated
 * as the engine allocates its cache (coli_mem_alloc) and laid out as its
 * rows (a position's row holds every kv head), walked in turn as a decode
 * step walks its layers, so a layer's rows come from memory, not from the
 * cache a previous call left.
 *
 * Arms: the kernels' ISAs (--isa LIST; default the best this CPU offers,
 * whose kernels the engine runs), interleaved: each repetition runs every
 * arm once over all the layers. Per arm: ms a layer (median over the
 * repetitions, with the range), the cache's GB/s, and the ratio to the
 * bound; and whether the groups split across the threads (fewer eight-head
 * units than threads, positions >= 256), ran with their rows walked
 * together (a task adjacent groups), or ran a task a group.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu/cpu.h"
#include "mem/mem.h"
#include "tools/bench/bench.h"
#include "tools/tools.h"

#define P         "coli bench attention"
#define MAX_REPS  200
#define MAX_ARMS  4
#define MAX_LAYER 64

static void help(FILE *f)
{
	fprintf(f,
	        "usage: coli bench attention [--ctx N] [--heads H] [--kv-heads K] [--head-dim D]\n"
	        "                            [--kv-type bf16|f32|q8] [--layers L] [--threads T]\n"
	        "                            [--reps R] [--isa scalar,avx2,avx512,amx]\n"
	        "  the CPU attention of one decode token over N cached positions (default\n"
	        "  8192) of L layers (default 8) in turn: H query heads (32) sharing K kv\n"
	        "  heads (4) of D dims (128; qwen3-30b's shape), the cache's type (bf16), T\n"
	        "  threads (default: online CPUs); per ISA arm (default: this CPU's best;\n"
	        "  several interleaved) ms a layer, the cache GB/s, the bound from the host\n"
	        "  read bandwidth measured in the run, and their ratio\n");
}

static int parse_isa(const char *v, int *isa, int *n)
{
	static const char *const names[] = {"scalar", "avx2", "avx512", "amx"};
	char buf[128], *save = NULL;

	if (strlen(v) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, v);
	*n = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int k = 0;

		while (k < 4 && strcmp(t, names[k]))
			k++;
		if (k == 4 || *n == MAX_ARMS)
			return -EINVAL;
		isa[(*n)++] = k;
	}
	return *n ? 0 : -EINVAL;
}

/* Seeded values in [-1, 1): rows, queries. */
static float rnd(unsigned long long *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((*s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

int bench_cpu_attn_main(int argc, char **argv)
{
	int ctx = 8192, nh = 32, nkv = 4, hd = 128, layers = 8, reps = 9, kt = COLI_KV_BF16;
	int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), isa[MAX_ARMS], n_arms = 0, rc = 0,
	    n_slots;
	static const char *const kname[3] = {"f32", "bf16", "q8"};
	static const char *const iname[4] = {"scalar", "avx2", "avx512", "amx"};
	struct bench_readbw rb = {0};
	coli_cpu_pool_t *pool = NULL;
	char *K[MAX_LAYER] = {0}, *V[MAX_LAYER] = {0};
	float *q = NULL, *out = NULL, *scratch = NULL;
	static double ms[MAX_ARMS][MAX_REPS];
	int split[MAX_ARMS] = {0};

	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			help(stdout);
			return 0;
		}
		if (!v)
			return tool_err("bench attention", "%s needs a value (see --help)", o), 2;
		if (!strcmp(o, "--ctx"))
			bad = tool_int(P, o, v, 1, 1 << 22, &ctx);
		else if (!strcmp(o, "--heads"))
			bad = tool_int(P, o, v, 1, 1024, &nh);
		else if (!strcmp(o, "--kv-heads"))
			bad = tool_int(P, o, v, 1, 1024, &nkv);
		else if (!strcmp(o, "--head-dim"))
			bad = tool_int(P, o, v, 8, 1024, &hd);
		else if (!strcmp(o, "--layers"))
			bad = tool_int(P, o, v, 1, MAX_LAYER, &layers);
		else if (!strcmp(o, "--threads"))
			bad = tool_int(P, o, v, 1, 4096, &threads);
		else if (!strcmp(o, "--reps"))
			bad = tool_int(P, o, v, 3, MAX_REPS, &reps);
		else if (!strcmp(o, "--kv-type")) {
			if ((kt = coli_kv_type_parse(v)) < 0)
				return tool_err("bench attention",
				                "--kv-type '%s': not f32, bf16 or q8", v),
				       2;
		} else if (!strcmp(o, "--isa")) {
			if (parse_isa(v, isa, &n_arms))
				return tool_err(
				           "bench attention",
				           "--isa '%s': a list of scalar, avx2, avx512, amx (at "
				           "most %d)",
				           v, MAX_ARMS),
				       2;
		} else
			return tool_err("bench attention", "unknown option '%s' (see --help)", o),
			       2;
		if (bad)
			return 2;
		i++;
	}
	if (nh % nkv || hd % 4)
		return tool_err("bench attention",
		                "--heads %d is not a multiple of --kv-heads %d, or --head-dim %d "
		                "of 4",
		                nh, nkv, hd),
		       2;
	if (!n_arms)
		isa[n_arms++] = (int)coli_cpu_isa_best();
	for (int a = 0; a < n_arms; a++)
		if (isa[a] > (int)coli_cpu_isa_best())
			return tool_err("bench attention", "--isa %s: this CPU does not offer it",
			                iname[isa[a]]),
			       1;

	const int G = nh / nkv, n = nkv * hd;
	const size_t row = coli_kv_row_bytes(kt, n, nkv), slot = coli_attn_slot_floats(ctx, hd);
	unsigned long long seed = 1;
	float *x = malloc(sizeof(float) * n);

	rc = coli_cpu_pool_create(threads, &pool);
	if (rc || !x) {
		tool_err("bench attention", "a pool of %d threads: %s", threads, strerror(-rc));
		free(x);
		return 1;
	}
	for (int l = 0; l < layers && !rc; l++) {
		K[l] = coli_mem_alloc(row * ctx, COLI_MEM_NODE_ANY);
		V[l] = coli_mem_alloc(row * ctx, COLI_MEM_NODE_ANY);
		if (!K[l] || !V[l]) {
			rc = -ENOMEM;
			break;
		}
		for (int p = 0; p < ctx; p++) {
			for (int i = 0; i < n; i++)
				x[i] = rnd(&seed);
			coli_kv_row_store(kt, K[l] + row * p, x, n, hd);
			for (int i = 0; i < n; i++)
				x[i] = rnd(&seed);
			coli_kv_row_store(kt, V[l] + row * p, x, n, hd);
		}
	}
	q = malloc(sizeof(float) * nh * hd);
	out = malloc(sizeof(float) * nh * hd);
	/* as the engine's (core/forward/scratch.c) */
	n_slots = coli_attn_n_slots(threads, nkv, nkv * ((G + 7) / 8));
	scratch = malloc(sizeof(float) * slot * n_slots);
	if (rc || !q || !out || !scratch || bench_readbw_init(&rb, (size_t)256 << 20)) {
		tool_err("bench attention", "out of memory (%d layers of %.1f MB)", layers,
		         2.0 * row * ctx / 1e6);
		rc = 1;
		goto out;
	}
	for (int i = 0; i < nh * hd; i++)
		q[i] = rnd(&seed);

	double rb_s[MAX_REPS];

	bench_readbw_pass(&rb, pool);     /* the pages touched, the clocks up */
	for (int r = 0; r <= reps; r++) { /* r = 0 warms up */
		if (r)
			rb_s[r - 1] = bench_readbw_pass(&rb, pool);
		for (int a = 0; a < n_arms; a++) {
			double t0;

			coli_cpu_isa_force((enum coli_cpu_isa)isa[a]);
			t0 = bench_now_s();
			for (int l = 0; l < layers; l++) {
				struct coli_attn_group g[1024];

				for (int k = 0; k < nkv; k++) {
					size_t off;
					int soff;

					coli_kv_seg_offsets(kt, n, k, hd, &off, &soff);

					g[k] = (struct coli_attn_group){.q = q + (size_t)k * G * hd,
					                                .K = K[l] + off,
					                                .V = V[l] + off,
					                                .out = out +
					                                       (size_t)k * G * hd,
					                                .G = G,
					                                .n_pos = ctx,
					                                .kt = kt,
					                                .vt = kt,
					                                .kstride = row,
					                                .vstride = row,
					                                .ksoff = soff,
					                                .vsoff = soff,
					                                .seg = hd};
				}
				split[a] = coli_attention_groups_mt(pool, g, nkv, n, hd, hd,
				                                    1.0f / sqrtf((float)hd),
				                                    scratch, slot, n_slots);
			}
			if (r)
				ms[a][r - 1] = (bench_now_s() - t0) / layers * 1e3;
		}
	}
	coli_cpu_isa_force(coli_cpu_isa_best());

	const double read_gbs = rb.words * 8 / bench_median(rb_s, reps) / 1e9;
	const double bytes = 2.0 * row * ctx, bound_ms = bytes / (read_gbs * 1e9) * 1e3;

	printf("cpu decode attention: ctx %d, %d heads on %d kv heads of %d dims, %s cache "
	       "(%.1f MB a layer, %d layers in turn); %d threads; host read %.1f GB/s (same "
	       "run): bound %.3f ms a layer\n",
	       ctx, nh, nkv, hd, kname[kt], bytes / 1e6, layers, threads, read_gbs, bound_ms);
	printf("%-7s %10s %22s %10s %8s  %s\n", "arm", "ms", "[range]", "cache GB/s", "of bound",
	       "split");
	for (int a = 0; a < n_arms; a++) {
		double *v = ms[a], med = bench_median(v, reps); /* sorts v */

		printf("%-7s %10.3f   [%8.3f .. %8.3f] %10.1f %8.2f  %s\n", iname[isa[a]], med,
		       v[0], v[reps - 1], bytes / (med * 1e-3) / 1e9, bound_ms / med,
		       split[a] == 1   ? "threads share each group"
		       : split[a] == 2 ? "rows walked together"
		                       : "a task a group");
	}
out:
	bench_readbw_free(&rb);
	for (int l = 0; l < layers; l++) {
		if (K[l])
			coli_mem_free(K[l], row * ctx);
		if (V[l])
			coli_mem_free(V[l], row * ctx);
	}
	free(x), free(q), free(out), free(scratch);
	coli_cpu_pool_destroy(pool);
	return rc ? 1 : 0;
}
