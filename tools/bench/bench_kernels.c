/*
 * tools/bench/bench_kernels.c — `coli bench kernels`: how close the CPU expert
 * kernels come to the memory bound.
 *
 * A decode-time GEMV reads every weight byte once and does ~1 FMA per weight,
 * so its bound is the host read bandwidth. We build, per dtype (bf16, q8, q4,
 * and GGUF's block types kept as stored: q4_k, q5_k, q6_k, q3_k, q2_k, q4_1,
 * q5_0, q5_1),
 * a set of expert-shaped matrices larger than the last-level cache (default
 * 256 MiB of Qwen3-30B-A3B experts, gate/up 768 x 2048 and down 2048 x 768,
 * alternating; --shape 235b: Qwen3-235B-A22B's, 1536 x 4096 and 4096 x
 * 1536), THP-advised like the engine's slot arena, and time one pass over
 * the whole set:
 *
 *   S = 1      coli_gemv_mt per matrix          (decode, a pool round each)
 *   S = 1L     coli_gemm_batch_mt of LAYER_MATS matrices at a time (decode
 *              as the engine's CPU rows run it: a layer's experts' rows in
 *              one pool round, core/moe/moe.c)
 *   S = 2,4,8  coli_gemm_mt per matrix          (a batch / prefill chunk)
 *
 * reporting weight bytes / second (the kernels the engine would run; --isa
 * NAME: that ISA's own, cpu/dispatch.c's per-CPU exceptions off; --isa A,B:
 * each kernel arm once per ISA, interleaved, to compare them in one run). In
 * the same run, with the same threads, tools/bench/bench_measure.c's
 * STREAM-like read (sum of 64-bit words, 4 independent accumulators, shared
 * with decode/prefill) over a separate 256 MiB buffer gives the bound. Arms
 * are interleaved (every
 * repetition runs every arm once, in turn) so drift in clock or neighbours
 * hits all arms alike; the figures are medians over the repetitions.
 *
 * Then the sampler (core/text/sampler.c), one pick at a time over 151936 logits
 * shaped like a trained model's (N(0, 1.5) with 20 tokens 8-15 above), per
 * setting, its block passes over the pool as in coli generate:
 * microseconds a pick (median of the repetitions' means), beside
 * one read of the logits at the host bound. Two settings add a request's
 * steps (core/text/sampler_proc.c): min_p with the penalties over a
 * 512-token history and two biases (a copy of the logits and a pass more),
 * and logprobs with a top list of 20 (a log-sum-exp and a top-20 scan).
 *
 * Then (text output) the prefill GEMM's compute rate per ISA beside the AMX
 * peak: tools/bench/bench_gemm.c.
 *
 * Buffers:  weights  uint8 [set bytes] per dtype, matrices back to back
 *           acts     MAX_S activations per K (the hidden size and the
 *                    expert's), canonical form
 *           y        float [max(MAX_S, LAYER_MATS)][hidden]
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core_internal.h"
#include "cpu/cpu.h"
#include "tools/bench/bench.h"
#include "tools/tools.h"

#define MAX_S 16 /* the largest batch: where the AVX2 K-quant panel and AMX tiles run */
/* S = 1L's pool round: a top-8 layer's gate, up and down matrices */
#define LAYER_MATS 24

/* the experts' matrices: gate/up are I x H, down H x I */
struct shape {
	const char *name;
	int I, H;
};

struct wset {
	enum coli_dtype dt;
	int n;              /* matrices */
	struct coli_mat *m; /* [n] */
	uint8_t *buf;       /* all of them */
	size_t bytes;
};

struct acts {
	int K;
	float *x;      /* [MAX_S][K] */
	int8_t *q;     /* [MAX_S][K] */
	float *d;      /* [MAX_S][K/32] */
	int32_t *qsum; /* [MAX_S][K/32] */
	struct coli_act a[MAX_S];
};

static uint64_t g_rng = 88172645463325252ull;
static uint64_t rnd(void)
{
	g_rng ^= g_rng << 13;
	g_rng ^= g_rng >> 7;
	g_rng ^= g_rng << 17;
	return g_rng;
}

const int *bench_block_halves(enum coli_dtype dt)
{
	static const int lead[] = {0, 2, -1}, q50[] = {0, -1}, q2k[] = {80, 82, -1},
	                 q3k[] = {108, -1}, q6k[] = {208, -1};

	switch (dt) {
	case COLI_DTYPE_Q5_0:
		return q50;
	case COLI_DTYPE_Q2_K:
		return q2k;
	case COLI_DTYPE_Q3_K:
		return q3k;
	case COLI_DTYPE_Q6_K:
		return q6k;
	default:
		return lead;
	}
}

/* Random weights with finite, normal values: quants are any byte, bf16 values
 * lie in [2^-8, 2) in magnitude, scales in [1e-3, 1e-2]. */
static int wset_build(struct wset *s, enum coli_dtype dt, size_t target, const struct shape *sh)
{
	const int shape[2][2] = {{sh->I, sh->H}, {sh->H, sh->I}};
	size_t per = coli_dtype_mat_bytes(dt, sh->I, sh->H), off = 0;

	s->dt = dt;
	s->n = (int)((target + per - 1) / per);
	s->n += s->n & 1;
	s->bytes = per * (size_t)s->n;
	s->buf = bench_alloc(s->bytes);
	s->m = calloc((size_t)s->n, sizeof(*s->m));
	if (!s->buf || !s->m)
		return -ENOMEM;
	for (int i = 0; i < s->n; i++) {
		int rows = shape[i & 1][0], K = shape[i & 1][1];
		coli_mat_view(&s->m[i], dt, rows, K, s->buf + off);
		off += per;
	}
	uint64_t *w = (uint64_t *)s->buf;
	for (size_t i = 0; i < s->bytes / 8; i++)
		w[i] = rnd();
	for (int i = 0; i < s->n; i++) {
		struct coli_mat *m = &s->m[i];
		if (dt == COLI_DTYPE_BF16) {
			uint16_t *h = (uint16_t *)m->data;
			for (size_t k = 0; k < (size_t)m->rows * m->cols; k++)
				h[k] =
				    (uint16_t)(0x3b80 | (h[k] & 0x807f) | ((h[k] >> 1) & 0x0380));
		} else if (coli_dtype_is_block(dt)) { /* each block's halves */
			unsigned be, bb;
			uint8_t *b = (uint8_t *)m->data;

			coli_dtype_block(dt, &be, &bb);
			for (size_t k = 0; k < (size_t)m->rows * m->cols / be; k++, b += bb)
				for (const int *o = bench_block_halves(dt); *o >= 0; o++) {
					uint16_t h =
					    coli_f32_to_fp16(1e-3f + (float)(rnd() % 1000) * 9e-6f);

					memcpy(b + *o, &h, 2);
				}
		} else {
			uint16_t *sc = (uint16_t *)m->scales;
			for (size_t k = 0; k < (size_t)m->rows * (m->cols / 32); k++)
				sc[k] = coli_f32_to_fp16(1e-3f + (float)(rnd() % 1000) * 9e-6f);
		}
	}
	return 0;
}

static int acts_build(struct acts *a, int K)
{
	a->K = K;
	a->x = malloc(sizeof(float) * MAX_S * K);
	a->q = malloc((size_t)MAX_S * K);
	a->d = malloc(sizeof(float) * MAX_S * (K / 32));
	a->qsum = malloc(sizeof(int32_t) * MAX_S * (K / 32));
	if (!a->x || !a->q || !a->d || !a->qsum)
		return -ENOMEM;
	for (int s = 0; s < MAX_S; s++) {
		for (int k = 0; k < K; k++)
			a->x[s * K + k] = (float)((int)(rnd() % 2001) - 1000) * 1e-3f;
		a->a[s].q = a->q + s * K;
		a->a[s].d = a->d + s * (K / 32);
		a->a[s].qsum = a->qsum + s * (K / 32);
		coli_act_quantize(&a->a[s], a->x + s * K, K);
	}
	return 0;
}

/* ---- arms ---- */

struct arm {
	const char *name;
	struct wset *ws; /* NULL: the read-bandwidth arm, or the pool's round */
	int S;
	int layer; /* S = 1L: LAYER_MATS matrices a pool round */
	double *t; /* [reps] seconds per pass */
	double med;
	int isa; /* the kernels' ISA (--isa A,B: each arm of every ISA, interleaved) */
};

#define POOL_ROUNDS 1000

/* arms[]: the read bound, the pool's round, then the kernels */
enum { ARM_READ, ARM_POOL, ARM_KERNELS };

static void nothing(void *arg, int t, int n)
{
}

/* POOL_ROUNDS rounds of one empty task a thread: what every coli_gemv_mt /
 * coli_gemm_batch_mt call pays before and after its rows (the wake, the
 * claims, the barrier) */
static void pass_pool(coli_cpu_pool_t *pool)
{
	for (int i = 0; i < POOL_ROUNDS; i++)
		coli_cpu_pool_run(pool, nothing, NULL, coli_cpu_pool_threads(pool));
}

static void pass_kernels(coli_cpu_pool_t *pool, const struct arm *arm, struct acts *aH,
                         struct acts *aI, float *y)
{
	const struct wset *ws = arm->ws;

	if (arm->layer) {
		struct coli_gemm_job jobs[LAYER_MATS];

		for (int i = 0; i < ws->n; i += LAYER_MATS) {
			int n = ws->n - i < LAYER_MATS ? ws->n - i : LAYER_MATS;

			for (int j = 0; j < n; j++) {
				const struct coli_mat *m = &ws->m[i + j];

				jobs[j] = (struct coli_gemm_job){
				    m, (m->cols == aH->K ? aH : aI)->a, 1, y + (size_t)j * aH->K,
				    aH->K};
			}
			coli_gemm_batch_mt(pool, jobs, n);
		}
		return;
	}
	for (int i = 0; i < ws->n; i++) {
		const struct coli_mat *m = &ws->m[i];
		struct acts *a = m->cols == aH->K ? aH : aI;
		if (arm->S == 1)
			coli_gemv_mt(pool, m, &a->a[0], y);
		else
			coli_gemm_mt(pool, m, a->a, arm->S, y, aH->K);
	}
}

#define SAMP_V     151936
#define SAMP_PICKS 50

/* pen: presence 0.5, frequency 0.3, repetition 1.1 over a 512-token prompt
 * and the picks, and two logit biases; logprobs: the top list's length (-1: none) */
static const struct {
	const char *name;
	float temperature, top_p;
	int top_k;
	float min_p;
	int pen, logprobs;
} g_samp[] = {
    {"T 0.8", 0.8f, 1, 0, 0, 0, -1},
    {"T 0.8 top-p 0.9", 0.8f, 0.9f, 0, 0, 0, -1},
    {"T 0.8 top-k 40", 0.8f, 1, 40, 0, 0, -1},
    {"T 0.8 top-k 50 top-p 0.95", 0.8f, 0.95f, 50, 0, 0, -1},
    {"T 0.8 min-p 0.05 penalties", 0.8f, 1, 0, 0.05f, 1, -1},
    {"T 0.8 top-p 0.9 logprobs 20", 0.8f, 0.9f, 0, 0, 0, 20},
};
#define N_SAMP (int)(sizeof(g_samp) / sizeof(g_samp[0]))

static float *sampler_logits(void)
{
	float *l = malloc(sizeof(float) * SAMP_V);

	for (int i = 0; l && i < SAMP_V; i++) { /* Box-Muller */
		double u1 = ((double)(rnd() >> 11) + 1) / 9007199254740993.0;
		double u2 = (double)(rnd() >> 11) / 9007199254740992.0;

		l[i] = (float)(1.5 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
	}
	for (int j = 0; l && j < 20; j++)
		l[(j * 7919) % SAMP_V] += 8 + 0.35f * (float)j;
	return l;
}

/* mean seconds a pick over SAMP_PICKS picks of setting i */
static double sampler_pass(const float *l, int i, uint64_t seed, coli_cpu_pool_t *pool)
{
	static const struct coli_logit_bias bias[2] = {{0, -100}, {7919, 2}};
	struct coli_sampler s;
	int sink = 0, prompt[512];
	double t0;

	coli_sampler_init(&s, g_samp[i].temperature, g_samp[i].top_p, g_samp[i].top_k, seed);
	s.min_p = g_samp[i].min_p;
	s.logprobs = g_samp[i].logprobs;
	if (g_samp[i].pen) {
		s.presence_penalty = 0.5f, s.frequency_penalty = 0.3f, s.repetition_penalty = 1.1f;
		s.bias = bias, s.n_bias = 2;
	}
	for (int p = 0; p < 512; p++)
		prompt[p] = (int)(rnd() % SAMP_V);
	coli_sampler_begin(&s, SAMP_V, prompt, 512);
	t0 = bench_now_s();
	for (int p = 0; p < SAMP_PICKS; p++) {
		int id = coli_sampler_pick_pool(&s, l, SAMP_V, pool);

		coli_sampler_accept(&s, id);
		sink += id;
	}
	t0 = bench_now_s() - t0;
	coli_sampler_end(&s);
	return (t0 + (sink < 0)) / SAMP_PICKS;
}

/* --dtypes LIST: *mask, bit 1 << dtype for each of dts[n] named
 * (comma-separated, as coli_dtype_name spells them, or coli_dtype_parse's q4
 * and q8); 1 with the refusal printed for a name that is not one of them */
static int pick_dtypes(const char *list, const enum coli_dtype *dts, int n, uint64_t *mask)
{
	char buf[256], *save = NULL, known[256] = "";

	*mask = 0;
	for (int d = 0; d < n; d++) {
		snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s", d ? ", " : "",
		         coli_dtype_name(dts[d]));
	}
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		enum coli_dtype t;
		const int alias = !coli_dtype_parse(tok, &t); /* q4, q8 */
		int d = 0;

		while (d < n && strcmp(tok, coli_dtype_name(dts[d])) && !(alias && dts[d] == t))
			d++;
		if (d == n) {
			tool_err("bench kernels", "--dtypes %s: '%s' is not one of %s", list, tok,
			         known);
			return 1;
		}
		*mask |= (uint64_t)1 << dts[d];
	}
	if (!*mask)
		tool_err("bench kernels", "--dtypes: no dtype named (%s)", known);
	return !*mask;
}

int bench_kernels_main(int argc, char **argv)
{
	static const enum coli_dtype dts[] = {COLI_DTYPE_BF16, COLI_DTYPE_Q8_0, COLI_DTYPE_Q4_0,
	                                      COLI_DTYPE_Q4_K, COLI_DTYPE_Q5_K, COLI_DTYPE_Q6_K,
	                                      COLI_DTYPE_Q3_K, COLI_DTYPE_Q2_K, COLI_DTYPE_Q4_1,
	                                      COLI_DTYPE_Q5_0, COLI_DTYPE_Q5_1};
	static const int Ss[] = {1, 2, 4, 8, 16};
	enum { N_DT = sizeof(dts) / sizeof(dts[0]), N_S = sizeof(Ss) / sizeof(Ss[0]) };
	int threads = (int)sysconf(_SC_NPROCESSORS_ONLN), reps = 7, json = 0, mib = 256, err;
	int read_only = 0; /* --read-only: only the host read (tools/bench/bench_vs_fio.sh) */
	uint64_t dt_mask = ~(uint64_t)0; /* --dtypes: bit 1 << dtype for each that runs */
	struct wset ws[N_DT] = {0};
	static const struct shape shapes[] = {{"30b", 768, 2048}, {"235b", 1536, 4096}};
	const struct shape *sh = &shapes[0];
	struct acts aH = {0}, aI = {0};
	struct arm arms[2 + N_DT * (N_S + 1) * 4];
	int n_arms = 0, isas[4], n_isa = 0;
	coli_cpu_pool_t *pool = NULL;
	struct bench_readbw rb;
	float *y = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--dtypes") && i + 1 < argc) {
			if (pick_dtypes(argv[i + 1], dts, N_DT, &dt_mask))
				return 1;
			i++;
		} else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
			if (tool_int("coli bench kernels", argv[i], argv[i + 1], 1, 4096, &threads))
				return 2;
			i++;
		} else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
			if (tool_int("coli bench kernels", argv[i], argv[i + 1], 1, 1 << 20, &reps))
				return 2;
			i++;
		} else if (!strcmp(argv[i], "--mib") && i + 1 < argc) {
			if (tool_int("coli bench kernels", argv[i], argv[i + 1], 1, 1 << 20, &mib))
				return 2;
			i++;
		} else if (!strcmp(argv[i], "--shape") && i + 1 < argc) {
			size_t k = 0;

			while (k < sizeof(shapes) / sizeof(shapes[0]) && strcmp(argv[i + 1], shapes[k].name))
				k++;
			if (k == sizeof(shapes) / sizeof(shapes[0]))
				return tool_err("bench kernels",
				                "--shape %s: not 30b or 235b (qwen3's expert shapes)",
				                argv[i + 1]);
			sh = &shapes[k];
			i++;
		} else if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--read-only"))
			read_only = 1;
		else if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
			/* the kernels of ISAs this CPU has (as --cpu-isa), each its own
			 * (cpu/dispatch.c's per-CPU exceptions off); several (avx512,avx2)
			 * run every kernel arm once per ISA, interleaved */
			static const char *const names[] = {"scalar", "avx2", "avx512", "amx"};
			char list[64], *save = NULL;

			snprintf(list, sizeof(list), "%s", argv[i + 1]);
			n_isa = 0;
			for (char *tok = strtok_r(list, ",", &save); tok;
			     tok = strtok_r(NULL, ",", &save)) {
				int isa = 0;

				while (isa < 4 && strcmp(tok, names[isa]))
					isa++;
				if (isa == 4 || n_isa == 4 ||
				    coli_cpu_isa_force((enum coli_cpu_isa)isa))
					return tool_err(
					    "bench kernels",
					    "--isa %s: not a list of up to four of scalar, "
					    "avx2, avx512 and amx this CPU has (best: %s)",
					    argv[i + 1], coli_cpu_isa_name(coli_cpu_isa_best()));
				isas[n_isa++] = isa;
			}
			if (!n_isa)
				return tool_err("bench kernels", "--isa: no ISA named");
			coli_cpu_isa_force((enum coli_cpu_isa)isas[0]);
			coli_cpu_int8_avx2_set(0); /* each ISA's own kernels for q8_0 / q4_0 too */
			i++;
		} else
			return tool_err("bench kernels",
			                "unknown argument '%s' (see coli bench --help)", argv[i]);
	}
	y = malloc(sizeof(float) * (MAX_S > LAYER_MATS ? MAX_S : LAYER_MATS) * sh->H);
	if (threads < 1 || reps < 1 || mib < 1 || !y)
		return tool_err("bench kernels", "--threads, --reps and --mib must be positive");
	err = coli_cpu_pool_create(threads, &pool);
	if (err)
		return tool_err("bench kernels", "thread pool of %d: %s", threads, strerror(-err));

	size_t target = (size_t)mib << 20;
	if (bench_readbw_init(&rb, target))
		return tool_err("bench kernels", "cannot allocate %d MiB", mib);
	if (acts_build(&aH, sh->H) || acts_build(&aI, sh->I))
		return tool_err("bench kernels", "out of memory");
	arms[n_arms++] = (struct arm){"read", NULL, 0, 0, NULL, 0, -1};
	arms[n_arms++] = (struct arm){"pool", NULL, 0, 0, NULL, 0, -1};
	for (int d = 0; d < (read_only ? 0 : N_DT); d++) {
		if (!(dt_mask >> dts[d] & 1))
			continue;
		if (wset_build(&ws[d], dts[d], target, sh))
			return tool_err("bench kernels", "cannot allocate %d MiB of %s weights",
			                mib, coli_dtype_name(dts[d]));
		/* S = 1, S = 1L (layer rounds), then the batches */
		for (int s = 0; s <= N_S; s++)
			for (int k = 0; k < (n_isa ? n_isa : 1); k++)
				arms[n_arms++] = (struct arm){coli_dtype_name(dts[d]),
				                              &ws[d],
				                              s < 2 ? 1 : Ss[s - 1],
				                              s == 1,
				                              NULL,
				                              0,
				                              n_isa ? isas[k] : -1};
	}
	for (int i = 0; i < n_arms; i++)
		arms[i].t = calloc((size_t)reps, sizeof(double));

	/* one warm-up pass per arm (page faults, frequency), then reps rounds */
	for (int r = -1; r < reps; r++) {
		for (int i = 0; i < n_arms; i++) {
			double t0 = bench_now_s();
			if (i == ARM_POOL)
				pass_pool(pool);
			else if (!arms[i].ws)
				bench_readbw_pass(&rb, pool);
			else {
				if (arms[i].isa >= 0)
					coli_cpu_isa_force((enum coli_cpu_isa)arms[i].isa);
				pass_kernels(pool, &arms[i], &aH, &aI, y);
			}
			double t = bench_now_s() - t0;
			if (r >= 0)
				arms[i].t[r] = t;
		}
	}
	for (int i = 0; i < n_arms; i++)
		arms[i].med = bench_median(arms[i].t, reps);
	if (n_isa) /* the sampler and the GEMM rates: the first ISA named */
		coli_cpu_isa_force((enum coli_cpu_isa)isas[0]);
	/* the sampler, settings interleaved as the arms */
	double samp[N_SAMP], st[N_SAMP][64];
	float *sl = read_only ? NULL : sampler_logits();
	int sreps = reps < 64 ? reps : 64;

	for (int r = -1; sl && r < sreps; r++)
		for (int i = 0; i < N_SAMP; i++) {
			double t = sampler_pass(sl, i, (uint64_t)r + 7, pool);

			if (r >= 0)
				st[i][r] = t;
		}
	for (int i = 0; i < N_SAMP; i++)
		samp[i] = sl ? bench_median(st[i], sreps) : 0;
	free(sl);
	double bound = (double)target / arms[ARM_READ].med / 1e9,
	       round_us = arms[ARM_POOL].med / POOL_ROUNDS * 1e6;

	if (json) {
		printf("{\"isa\": \"%s\", \"threads\": %d, \"reps\": %d, \"set_mib\": %d, "
		       "\"read_gbs\": %.3f, \"read_huge_share\": %.3f, \"pool_round_us\": %.3f, "
		       "\"arms\": [",
		       coli_cpu_isa_name(coli_cpu_isa()), threads, reps, mib, bound, rb.huge_share,
		       round_us);
		for (int i = ARM_KERNELS; i < n_arms; i++) {
			double gbs = (double)arms[i].ws->bytes / arms[i].med / 1e9;
			printf("%s{\"dtype\": \"%s\", \"S\": %d, \"layer\": %s, \"isa\": \"%s\", "
			       "\"weight_gbs\": %.3f, \"ratio\": %.3f, \"ms\": %.3f}",
			       i > ARM_KERNELS ? ", " : "", arms[i].name, arms[i].S,
			       arms[i].layer ? "true" : "false",
			       coli_cpu_isa_name(arms[i].isa >= 0 ? (enum coli_cpu_isa)arms[i].isa
			                                          : coli_cpu_isa()),
			       gbs, gbs / bound, arms[i].med * 1e3);
		}
		printf("], \"sampler\": [");
		for (int i = 0; !read_only && i < N_SAMP; i++)
			printf("%s{\"setting\": \"%s\", \"us\": %.3f}", i ? ", " : "",
			       g_samp[i].name, samp[i] * 1e6);
		printf("]}\n");
	} else {
		char isa_list[64] = "";

		for (int k = 0; k < n_isa; k++)
			snprintf(isa_list + strlen(isa_list), sizeof(isa_list) - strlen(isa_list),
			         "%s%s", k ? "," : "",
			         coli_cpu_isa_name((enum coli_cpu_isa)isas[k]));
		printf("coli bench kernels: isa %s%s, %d threads, %d MiB of weights per dtype "
		       "(%dx%d + %dx%d experts: %s), median of %d interleaved reps\n",
		       n_isa > 1 ? isa_list : coli_cpu_isa_name(coli_cpu_isa()),
		       coli_cpu_isa() < COLI_CPU_ISA_AVX512 ? ""
		       : coli_cpu_int8_avx2() == COLI_INT8_AVX2_ALL
		           ? " (q8_0 and q4_0 below their panels on the avx2 kernels: faster on "
		             "this CPU)"
		       : coli_cpu_int8_avx2() == COLI_INT8_AVX2_XEON
		           ? " (q4_0 below its panels and q8_0 at S = 1 .. 3 on the avx2 kernels: "
		             "faster on this CPU)"
		           : "",
		       threads, mib, sh->I, sh->H, sh->H, sh->I, sh->name, reps);
		printf("host read bandwidth (STREAM-like sum, %d threads, %.0f%% huge pages): %.2f "
		       "GB/s  [bound]\n",
		       threads, rb.huge_share * 100, bound);
		printf(
		    "thread pool round with nothing to do: %.2f us (every S = 1 pass pays it once "
		    "a matrix; 1L: once a %d-matrix layer, as the engine)\n\n",
		    round_us, LAYER_MATS);
		printf("%-6s %2s %10s %14s %10s %8s%s\n", "dtype", "S", "ms/pass", "weight GB/s",
		       "bound GB/s", "ratio", n_isa > 1 ? "  isa" : "");
		for (int i = ARM_KERNELS; i < n_arms; i++) {
			double gbs = (double)arms[i].ws->bytes / arms[i].med / 1e9;
			printf("%-6s %2d%s %9.2f %14.2f %10.2f %8.2f%s%s\n", arms[i].name, arms[i].S,
			       arms[i].layer ? "L" : " ",
			       arms[i].med * 1e3, gbs, bound, gbs / bound, n_isa > 1 ? "  " : "",
			       n_isa > 1 ? coli_cpu_isa_name((enum coli_cpu_isa)arms[i].isa) : "");
		}
		if (!read_only) {
			printf(
			    "\nsampler (core/text/sampler.c), %d logits shaped like a trained "
			    "model's, "
			    "its block passes over the %d threads (as coli generate); one read of "
			    "them at the bound: %.1f us\n",
			    SAMP_V, threads, SAMP_V * 4.0 / (bound * 1e9) * 1e6);
			for (int i = 0; i < N_SAMP; i++)
				printf("%-28s %8.1f us a pick\n", g_samp[i].name, samp[i] * 1e6);
		}
		if (!read_only && bench_gemm_rates(pool, reps, dt_mask))
			return tool_err("bench kernels", "out of memory");
	}
	for (int i = 0; i < n_arms; i++)
		free(arms[i].t);
	for (int d = 0; d < N_DT; d++) {
		free(ws[d].buf);
		free(ws[d].m);
	}
	bench_readbw_free(&rb);
	free(aH.x), free(aH.q), free(aH.d), free(aH.qsum);
	free(aI.x), free(aI.q), free(aI.d), free(aI.qsum);
	free(y);
	coli_cpu_pool_destroy(pool);
	return 0;
}
