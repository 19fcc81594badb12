/*
 * tools/bench/bench_gemm.c — `coli bench kernels`' prefill GEMM section: the
 * compute rate of coli_gemm_mt over many activations (a prompt's rows), per
 * CPU kernel ISA this CPU has from AVX-512 up, beside the AMX int8 peak
 * measured in the same run.
 *
 * The matrices are one Qwen3-30B-A3B expert (gate/up 768 x 2048, down
 * 2048 x 768) per dtype (q8, q4 and every GGUF block type: random quant
 * bytes, finite scales), cache-resident: what is timed is
 * arithmetic, not memory. Arms (dtype x S x ISA) are interleaved, every
 * repetition runs each once; figures are medians. Rate = 2 * rows * K * S
 * int8 ops per second (a multiply-add counts two). The peak is
 * coli_cpu_amx_peak_run on every thread of the pool (four independent full
 * 16 x 16 x 64 TDPBSSD in a loop): the tiles' own ceiling, which a GEMM that
 * keeps 32-blocks apart (K = 32 a tile product, cpu/gemv/gemm_amx.c) and
 * scales every block in fp32 can reach at most half of.
 *
 * Buffers:  w   per dtype, the two matrices back to back
 *           x   [S_MAX] activations of K 2048 and of K 768, canonical form
 *           y   float [S_MAX][2048]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "tools/bench/bench.h"

#define S_MAX 512

static const int g_S[] = {8, 16, 32, 128, 512};
static const enum coli_dtype g_dts[] = {
    COLI_DTYPE_Q8_0, COLI_DTYPE_Q4_0, COLI_DTYPE_Q4_K, COLI_DTYPE_Q5_K, COLI_DTYPE_Q6_K,
    COLI_DTYPE_Q3_K, COLI_DTYPE_Q2_K, COLI_DTYPE_Q4_1, COLI_DTYPE_Q5_0, COLI_DTYPE_Q5_1};
#define N_DT (int)(sizeof(g_dts) / sizeof(g_dts[0]))
#define N_S  (int)(sizeof(g_S) / sizeof(g_S[0]))

struct gacts {
	struct coli_act a[S_MAX];
	void *buf;
};

static int gacts_build(struct gacts *g, int K, uint64_t seed)
{
	size_t nb = (size_t)K / 32;
	char *p = malloc((size_t)S_MAX * (K * 5 + nb * 8));
	float *x = malloc(sizeof(float) * (size_t)K);

	if (!p || !x) {
		free(p);
		free(x);
		return -ENOMEM;
	}
	g->buf = p;
	for (int s = 0; s < S_MAX; s++) {
		struct coli_act *a = &g->a[s];

		a->q = (int8_t *)p;
		a->d = (float *)(p + K);
		a->qsum = (int32_t *)(p + K + nb * 4);
		p += K + nb * 8;
		for (int k = 0; k < K; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			x[k] = (float)((int64_t)(seed >> 33) - (1ll << 30)) / (float)(1 << 30);
		}
		coli_act_quantize(a, x, K);
	}
	free(x);
	return 0;
}

struct peak_arg {
	long n;
	int64_t ops;
};

static void peak_task(void *arg, int t, int n)
{
	struct peak_arg *pa = arg;
	int64_t ops = coli_cpu_amx_peak_run(pa->n);

	if (ops > 0)
		__atomic_fetch_add(&pa->ops, ops, __ATOMIC_RELAXED);
}

/* int8 GOP/s of the AMX tiles on every thread, or 0 without them */
static double amx_peak(coli_cpu_pool_t *pool)
{
	int threads = coli_cpu_pool_threads(pool);
	struct peak_arg pa = {20000, 0};
	double t0 = bench_now_s();

	coli_cpu_pool_run(pool, peak_task, &pa, threads);
	return pa.ops > 0 ? (double)pa.ops / (bench_now_s() - t0) / 1e9 : 0;
}

/* Finite scales on random bytes: a q8/q4 scale plane, or each block's halves,
 * fp16 0x1c00 .. 0x1fff (~0.004 .. 0.008). */
static void fill_scales(struct coli_mat *m)
{
	unsigned be, bb;

	if (!coli_dtype_is_block(m->dtype)) {
		for (size_t i = 0; i < (size_t)m->rows * (m->cols / 32); i++)
			((uint16_t *)m->scales)[i] = (uint16_t)(0x1c00 | (i & 0x3ff));
		return;
	}
	coli_dtype_block(m->dtype, &be, &bb);
	for (size_t i = 0; i < (size_t)m->rows * (m->cols / be); i++)
		for (const int *o = bench_block_halves(m->dtype); *o >= 0; o++) {
			uint8_t *h = (uint8_t *)m->data + i * bb + *o;

			h[0] = (uint8_t)i, h[1] = (uint8_t)(0x1c | (i >> 8 & 3));
		}
}

int bench_gemm_rates(coli_cpu_pool_t *pool, int reps, uint64_t dtypes)
{
	enum coli_cpu_isa isas[2] = {COLI_CPU_ISA_AVX512, COLI_CPU_ISA_AMX};
	const enum coli_cpu_isa best = coli_cpu_isa();
	int n_isa = 0, any = 0;
	struct coli_mat m[N_DT][2];
	void *wbuf[N_DT] = {NULL};
	struct gacts *x = calloc(2, sizeof(*x)); /* K 2048, 768 */
	float *y = malloc(sizeof(float) * S_MAX * 2048);
	double *t = calloc((size_t)N_DT * N_S * 2 * reps, sizeof(double)), peak[64];
	int rc = -ENOMEM;

	for (int i = 0; i < 2; i++)
		if (best >= isas[i])
			isas[n_isa++] = isas[i];
	for (int d = 0; d < N_DT; d++)
		any |= (int)(dtypes >> g_dts[d] & 1);
	if (!any) { /* none of the dtypes named has a table here (bf16) */
		rc = 0;
		goto out;
	}
	if (!n_isa) {
		printf("\nprefill GEMM: no AVX-512 VNNI here (kernels: %s); skipped\n",
		       coli_cpu_isa_name(best));
		rc = 0;
		goto out;
	}
	if (!x || !y || !t || gacts_build(&x[0], 2048, 1) || gacts_build(&x[1], 768, 2))
		goto out;
	for (int d = 0; d < N_DT; d++) {
		size_t b0 = coli_dtype_mat_bytes(g_dts[d], 768, 2048);
		uint8_t *w;

		if (!(dtypes >> g_dts[d] & 1))
			continue;
		w = bench_alloc(2 * b0);

		if (!(wbuf[d] = w))
			goto out;
		for (size_t i = 0; i < 2 * b0; i++)
			w[i] = (uint8_t)(i * 2654435761u >> 13);
		coli_mat_view(&m[d][0], g_dts[d], 768, 2048, w);
		coli_mat_view(&m[d][1], g_dts[d], 2048, 768, w + b0);
		for (int j = 0; j < 2; j++)
			fill_scales(&m[d][j]);
	}
	if (reps > 64)
		reps = 64;
	for (int r = -1; r < reps; r++) {
		for (int d = 0; d < N_DT; d++)
			for (int s = 0; s < N_S && wbuf[d]; s++)
				for (int i = 0; i < n_isa; i++) {
					double t0;

					coli_cpu_isa_force(isas[i]);
					t0 = bench_now_s();
					coli_gemm_mt(pool, &m[d][0], x[0].a, g_S[s], y, 2048);
					coli_gemm_mt(pool, &m[d][1], x[1].a, g_S[s], y, 2048);
					if (r >= 0)
						t[((d * N_S + s) * 2 + i) * reps + r] =
						    bench_now_s() - t0;
				}
		if (r >= 0)
			peak[r] = amx_peak(pool);
	}
	coli_cpu_isa_force(best);
	double pk = n_isa > 1 ? bench_median(peak, reps) : 0;

	printf("\nprefill GEMM (coli_gemm_mt, one 768x2048 + 2048x768 expert, cache-resident), "
	       "int8 GOP/s, median of %d interleaved reps\n",
	       reps);
	if (pk > 0)
		printf("AMX int8 peak measured on the %d threads (full 16x16x64 TDPBSSD): %.0f "
		       "GOP/s  [bound]\n",
		       coli_cpu_pool_threads(pool), pk);
	printf("%-6s %4s %12s %12s %8s %8s\n", "dtype", "S", "avx512",
	       n_isa > 1 ? "avx512+amx" : "", n_isa > 1 ? "x" : "", n_isa > 1 ? "ratio" : "");
	for (int d = 0; d < N_DT; d++)
		for (int s = 0; s < N_S && wbuf[d]; s++) {
			double ops = 2.0 * 2 * 768 * 2048 * g_S[s], g[2];

			for (int i = 0; i < n_isa; i++)
				g[i] = ops /
				       bench_median(&t[((d * N_S + s) * 2 + i) * reps], reps) / 1e9;
			printf("%-6s %4d %12.1f", coli_dtype_name(g_dts[d]), g_S[s], g[0]);
			if (n_isa > 1)
				printf(" %12.1f %8.2f %8.3f", g[1], g[1] / g[0],
				       pk > 0 ? g[1] / pk : 0);
			printf("\n");
		}
	rc = 0;
out:
	for (int i = 0; x && i < 2; i++)
		free(x[i].buf);
	free(x);
	free(y);
	free(t);
	for (int d = 0; d < N_DT; d++)
		free(wbuf[d]);
	return rc;
}
