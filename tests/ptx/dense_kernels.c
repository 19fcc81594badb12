/*
 * tests/ptx/dense_kernels.c — the dense-part kernels of ptx/dense/dense.cu, ptx/dense/route.cu,
 * ptx/attn/attention.cu and ptx/attn/attn_prefill.cu against the CPU reference (cpu/),
 * on fresh random inputs, outputs poisoned (0xff bytes = NaN) before each launch, max error
 * printed:
 *
 *   dense_gemv      f32 / bf16 / q8_0 / q4_0, rows 1..9000, K 32..7168, T 1..600
 *                   (f32/bf16 split-K at small row counts, chunks of 4 tokens
 *                   past T = 4; f32 routers past COLI_GPU_STEP_T on the tiled
 *                   GEMM), vs coli_gemv within 1e-5 of sum|w*x|, q8_0 and
 *                   q4_0 bit for bit (the canonical reduction); gaps of ldy > rows
 *                   stay poisoned; a second launch gives the same bits, and so
 *                   does each token alone (T = 1): a prefill batch sums a token
 *                   in the order a decode step does
 *   rmsnorm         rows x n from 1 x 2048 to 32 x 128 and 2 x 20000, in place too
 *   rope            vs coli_rope
 *   add_rmsnorm     x + add then coli_rmsnorm: x written back bit-exact, y within
 *                   the rmsnorm tolerance, y's quantization (same launch, or a
 *                   second one past the register path) = coli_act_quantize of
 *                   the device's y, bit for bit
 *   qk_rope_store   vs coli_rmsnorm per head + coli_rope + copies into the cache
 *                   (qwen3, mixtral and small shapes, decode and prefill): q and
 *                   cache rows within tolerance, v rows exact, rows outside
 *                   pos0..pos0+T-1 still poisoned
 *   moe_accumulate  bit-exact vs core/moe/moe.c's order (pairs ascending, product
 *                   rounded then added), incl. a token with > 512 pairs; the
 *                   pairs summed inside the next norm (acc_rmsnorm): x, y and
 *                   y's quantization the bytes of accumulate + add_rmsnorm
 *   attention       decode at 1, 100, 5000, 12289, 40000 positions and prefill
 *                   chunks, GQA groups 1..16, hd 16..256, vs coli_attention_head;
 *                   gpt-oss's sinks and sliding windows vs coli_attention_head_sink
 *                   over the window's rows
 *                   (2e-5, times sqrt(n / 10000) past 10000 positions); the
 *                   same rows paged through a block table that moves every
 *                   block (ptx/attn/kv_rows.cuh kv_at) give the contiguous
 *                   cache's bytes
 *   gather_rows     pair rows gathered from token rows: the bytes, repeats too
 *   route           vs cpu/ops.c coli_route (E 8..1024, K 1..16, renormalised or
 *                   not, ties): the same experts in the same order; weights
 *                   within 4 ulp (the device's expf), max printed
 *   argmax          vs coli_argmax, exact: 152k random logits, the maximum
 *                   repeated (the first index wins), NaNs (never the maximum;
 *                   x[0] NaN gives 0), all -inf, -0 vs +0, n = 1 and 33
 *   moe_plan        job tables and pair lists vs the layout built here: pairs in
 *                   ascending (expert, token), every field of every job (a
 *                   non-resident expert's jobs empty, its pairs in place; each
 *                   pair's expert, gpt-oss's bias rows); grouped (several
 *                   tokens: an expert's pairs in jobs of up to COLI_GPU_MAX_S,
 *                   long runs from a small pool of experts), the gathered
 *                   q8/q4 or f32 rows byte for byte; with
 *                   router logits (coli_route_plan, T 1 .. COLI_GPU_STEP_T: a
 *                   warp routes several tokens) the routing is coli_route's
 *                   choice and the pair lists follow it
 *   router_plan     the router's f32 GEMV and the plan in one launch: the bytes
 *                   of the two launches (logits, routing, jobs, pair lists)
 *
 * `dense_kernels GROUP` runs one group (attention, gemv_q4_0, ...: main's
 * table). Skips (77) without a usable GPU. `dense_kernels --bench` instead
 * times the experts' grouped GEMV at decode (a layer's gate+up and down
 * tables) and each kernel at decode shapes (qwen3-30b-a3b) next to a
 * device-to-device copy of the same run (docs/perf/kernels.md; `--bench
 * ops`: the non-GEMV kernels only; `--bench prefill`: q/k/v and o at 8..256
 * tokens, the quantized ones on the GEMM from COLI_GPU_DENSE_GEMM_MIN_T, and
 * the routers at 512 and 2,048 tokens, joined and tiled;
 * `--bench kquant`: the experts'
 * GEMV of GGUF's block types beside q4_0 / q8_0 at qwen3-235b's shape, then
 * their prefill GEMM at 16 and 128 tokens an expert in TOPS against the
 * int8 tensor peak; `--bench step`: a decode step of several sequences'
 * kernels, q4_0 q/k/v/o at T 1..16 and the route + plan's parts); the bench
 * asserts nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_test.h"

#define DP(a) ((uintptr_t)(a))

/* |got - want| <= tol[i] (or tol0 when tol is NULL); prints one line */
static int check(const char *what, const float *got, const float *want, const float *tol,
                 float tol0, size_t n)
{
	size_t bad = 0;
	double maxe = 0, maxr = 0;

	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - want[i]), t = tol ? tol[i] : tol0;

		if (!(e <= t))
			bad++;
		if (e > maxe || e != e)
			maxe = e != e ? INFINITY : e;
		if (t > 0 && e / t > maxr)
			maxr = e / t;
	}
	printf("  %-44s %9zu values  max|err| %.3g (%.2f of tol)  bad %zu\n", what, n, maxe, maxr,
	       bad);
	return bad != 0;
}

/* ---- dense GEMV ---- */

struct mat_host {
	enum coli_dtype t;
	int R, K;
	void *w;
	struct coli_mat m;
	uint64_t dw, dscales;
};

static void mat_make(struct mat_host *h, enum coli_dtype t, int R, int K, float amp)
{
	float *wf = xmalloc(sizeof(float) * R * K);
	size_t bytes = coli_dtype_mat_bytes(t, R, K);

	for (size_t i = 0; i < (size_t)R * K; i++)
		wf[i] = frand() * amp;
	h->t = t, h->R = R, h->K = K;
	h->w = xmalloc(bytes);
	if (coli_dtype_is_block(t))
		random_blocks(t, h->w, R, K);
	else if (coli_quantize_mat(t, wf, R, K, h->w)) {
		fprintf(stderr, "quantize %dx%d failed\n", R, K);
		exit(1);
	}
	coli_mat_view(&h->m, t, R, K, h->w);
	h->dw = dev_copy(h->w, bytes);
	h->dscales =
	    h->m.scales ? h->dw + (uint64_t)((const char *)h->m.scales - (const char *)h->w) : 0;
	free(wf);
}

static void mat_free(struct mat_host *h)
{
	coli_gpu_free(g_gpu, h->dw);
	free(h->w);
}

/* Activations x [T][K] in fp32 and quantized, on host and device. */
struct act_host {
	int T, K;
	float *x, *xd;
	int8_t *xq;
	int32_t *xs;
	uint64_t dx, dq, dd, ds;
};

static void act_make(struct act_host *a, int T, int K)
{
	int nb = K / 32;

	a->T = T, a->K = K;
	a->x = xmalloc(sizeof(float) * T * K);
	a->xq = xmalloc((size_t)T * K);
	a->xd = xmalloc(sizeof(float) * T * nb);
	a->xs = xmalloc(4 * (size_t)T * nb);
	for (size_t i = 0; i < (size_t)T * K; i++)
		a->x[i] = frand() * 2.0f;
	for (int t = 0; t < T; t++) {
		struct coli_act q = {.q = a->xq + (size_t)t * K,
		                     .d = a->xd + (size_t)t * nb,
		                     .qsum = a->xs + (size_t)t * nb};

		coli_act_quantize(&q, a->x + (size_t)t * K, K);
	}
	a->dx = dev_copy(a->x, sizeof(float) * T * K);
	a->dq = dev_copy(a->xq, (size_t)T * K);
	a->dd = dev_copy(a->xd, sizeof(float) * T * nb);
	a->ds = dev_copy(a->xs, 4 * (size_t)T * nb);
}

static void act_free(struct act_host *a)
{
	coli_gpu_free(g_gpu, a->dx), coli_gpu_free(g_gpu, a->dq);
	coli_gpu_free(g_gpu, a->dd), coli_gpu_free(g_gpu, a->ds);
	free(a->x), free(a->xq), free(a->xd), free(a->xs);
}

static struct coli_gpu_dense_gemv job(const struct mat_host *m, const struct act_host *a,
                                      uint64_t y, int ldy)
{
	struct coli_gpu_dense_gemv j = {
	    .w = (const void *)DP(m->dw),
	    .scales = (const unsigned short *)DP(m->dscales),
	    .xf = (const float *)DP(a->dx),
	    .xq = (const signed char *)DP(a->dq),
	    .xd = (const float *)DP(a->dd),
	    .xqsum = (const int *)DP(a->ds),
	    .y = (float *)DP(y),
	    .rows = m->R,
	    .K = m->K,
	    .T = a->T,
	    .ldy = ldy,
	};
	return j;
}

static int test_dense_gemv(enum coli_dtype t)
{
	static const int shapes[][3] = {
	    /* rows, K, T */
	    {1, 32, 1},       {7, 64, 2},       {128, 2048, 1},   {128, 2048, 4},  {512, 2048, 1},
	    {512, 2048, 3},   {33, 4096, 2},    {2048, 4096, 1},  {5000, 2048, 1}, {300, 768, 5},
	    {1000, 2048, 9},  {4096, 2048, 4},  {128, 2048, 600}, {200, 1568, 3},  {70, 5120, 2},
	    {3, 96, 7},       {41, 32, 50},     {300, 768, 70},   {64, 4096, 49},  {9000, 1568, 2},
	    {8448, 64, 5},    {2048, 2048, 16}, {1000, 768, 12},  {512, 4096, 13}, {40000, 1024, 5},
	    {40000, 2048, 8},  /* (wide: the GEMM from 5 tokens) */
	    {128, 2048, 8},    /* the router of a step of 8 sequences: split-K, not joined */
	    {1000, 2048, 33},  /* q8/q4: three chunks of 16 on the mma, the last of one */
	    /* from here f32 takes the tiled GEMM (ptx/dense/dgemm_f32.cuh) at any
	     * grid (COLI_GPU_DGEMM_ALWAYS): on 132 SMs one unit a lane and split
	     * (128 x 2048, 160 x 1536: a second, partial row tile), two with empty
	     * splits past K's end (96 x 4096), three (128 x 6144), seven
	     * (deepseek-v3's router, 256 x 7168) */
	    {128, 2048, 300}, {160, 1536, 20}, {96, 4096, 40}, {128, 6144, 24}, {256, 7168, 33}};
	const size_t tiled0 = sizeof(shapes) / sizeof(shapes[0]) - 5;
	int rc = 0;

	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		int R = shapes[k][0], K = shapes[k][1], T = shapes[k][2], ldy = R + (k & 1) * 3;
		struct mat_host m;
		struct act_host a;
		float *want = xmalloc(sizeof(float) * T * ldy),
		      *got = xmalloc(sizeof(float) * T * ldy);
		float *got2 = xmalloc(sizeof(float) * T * ldy),
		      *tol = xmalloc(sizeof(float) * T * ldy);
		float *row = xmalloc(sizeof(float) * K);
		uint64_t dy = dev_poison(sizeof(float) * T * ldy);
		struct coli_gpu_dense_gemv j;
		size_t gaps = 0, alone = 0;
		char what[96];

		mat_make(&m, t, R, K, 0.1f);
		act_make(&a, T, K);
		for (int s = 0; s < T; s++) {
			struct coli_act q = {.n = K,
			                     .f = a.x + (size_t)s * K,
			                     .q = a.xq + (size_t)s * K,
			                     .d = a.xd + (size_t)s * (K / 32),
			                     .qsum = a.xs + (size_t)s * (K / 32)};

			coli_gemv(&m.m, &q, want + (size_t)s * ldy, 0, R);
		}
		/* tolerance: 1e-5 of sum |w_k x_k| (dequantized weights) */
		for (int r = 0; r < R; r++) {
			coli_mat_row_f32(&m.m, r, row);
			for (int s = 0; s < T; s++) {
				double sum = 0;

				for (int i = 0; i < K; i++)
					sum += fabs((double)row[i] * a.x[(size_t)s * K + i]);
				tol[(size_t)s * ldy + r] = (float)(1e-5 * sum + 1e-30);
			}
		}
		j = job(&m, &a, dy, ldy);
		coli_gpu_dense_tiled(g_gpu, k >= tiled0 ? COLI_GPU_DGEMM_ALWAYS : COLI_GPU_DGEMM_AUTO);
		if (coli_gpu_dense_gemv(g_gpu, t, &j))
			return 1;
		download(got, dy, sizeof(float) * T * ldy);
		if (coli_gpu_dense_gemv(g_gpu, t, &j))
			return 1;
		download(got2, dy, sizeof(float) * T * ldy);
		for (int s = 0; s < T; s++) { /* each token alone: the same bits */
			struct coli_gpu_dense_gemv j1 = j;
			float *one = got2 + (size_t)s * ldy;

			j1.T = 1;
			j1.xf += (size_t)s * K, j1.xq += (size_t)s * K;
			j1.xd += (size_t)s * (K / 32), j1.xqsum += (size_t)s * (K / 32);
			if (s % 97 && s > 9 && s != T - 1) /* a sample of the long batch */
				continue;
			if (coli_gpu_dense_gemv(g_gpu, t, &j1))
				return 1;
			download(one, dy, sizeof(float) * R);
			alone += memcmp(one, got + (size_t)s * ldy, sizeof(float) * R) != 0;
			if (coli_gpu_dense_gemv(g_gpu, t, &j)) /* got2: the batch again */
				return 1;
			download(got2, dy, sizeof(float) * T * ldy);
		}
		for (int s = 0; s < T; s++)
			for (int r = R; r < ldy; r++) {
				uint32_t u;

				memcpy(&u, &got[(size_t)s * ldy + r], 4);
				gaps += u != 0xffffffffu;
				got[(size_t)s * ldy + r] = want[(size_t)s * ldy + r] = 0;
				tol[(size_t)s * ldy + r] = 0;
				got2[(size_t)s * ldy + r] = 0;
			}
		snprintf(what, sizeof(what), "dense_gemv %s %dx%d T=%d", coli_dtype_name(t), R, K,
		         T);
		rc |= check(what, got, want, tol, 0, (size_t)T * ldy);
		if (coli_dtype_is_quant(t)) { /* the canonical reduction: coli_gemv's bits */
			size_t differ = 0;

			for (size_t i = 0; i < (size_t)T * ldy; i++)
				differ += memcmp(&got[i], &want[i], 4) != 0;
			if (differ) {
				printf("    %zu values differ from coli_gemv's bits\n", differ);
				rc = 1;
			}
		}
		if (gaps || alone || memcmp(got, got2, sizeof(float) * T * ldy)) {
			printf("    %zu gap values written; second launch %s; %zu tokens differ "
			       "alone\n",
			       gaps,
			       memcmp(got, got2, sizeof(float) * T * ldy) ? "differs" : "same",
			       alone);
			rc = 1;
		}
		if (R >= 3) { /* stacked matrices: three ranges of rows, three buffers */
			int r1 = R / 3, r2 = R - R / 4, l2 = r2 - r1 + 1, l3 = R - r2 + 2;
			uint64_t d2 = dev_poison(sizeof(float) * T * l2),
			         d3 = dev_poison(sizeof(float) * T * l3);
			float *g2 = xmalloc(sizeof(float) * T * l2),
			      *g3 = xmalloc(sizeof(float) * T * l3);
			size_t bad = 0;

			j = job(&m, &a, dy, ldy);
			j.y2 = (float *)DP(d2), j.y3 = (float *)DP(d3);
			j.rows1 = r1, j.rows2 = r2, j.ldy2 = l2, j.ldy3 = l3;
			if (coli_gpu_dense_gemv(g_gpu, t, &j))
				return 1;
			download(got2, dy, sizeof(float) * T * ldy);
			download(g2, d2, sizeof(float) * T * l2);
			download(g3, d3, sizeof(float) * T * l3);
			for (int s = 0; s < T; s++) /* each row's bits where its range sends it */
				for (int r = 0; r < R; r++) {
					const float *at = r < r1   ? got2 + (size_t)s * ldy + r
					                  : r < r2 ? g2 + (size_t)s * l2 + (r - r1)
					                           : g3 + (size_t)s * l3 + (r - r2);

					bad += memcmp(at, got + (size_t)s * ldy + r, 4) != 0;
				}
			if (bad) {
				printf("    stacked rows %d | %d | %d: %zu values differ from the "
				       "single launch\n",
				       r1, r2 - r1, R - r2, bad);
				rc = 1;
			}
			coli_gpu_free(g_gpu, d2), coli_gpu_free(g_gpu, d3);
			free(g2), free(g3);
		}
		coli_gpu_free(g_gpu, dy);
		mat_free(&m);
		act_free(&a);
		free(want), free(got), free(got2), free(tol), free(row);
	}
	coli_gpu_dense_tiled(g_gpu, COLI_GPU_DGEMM_AUTO);
	return rc;
}

/* ---- rmsnorm, rope ---- */

static int test_rmsnorm(void)
{
	static const int shapes[][2] = {{1, 2048}, {3, 2048}, {32, 128},  {8, 64},   {2, 16},
	                                {1, 5120}, {5, 18},   {2, 20000}, {4, 4096}, {1, 7168}};
	int rc = 0;

	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		int rows = shapes[k][0], n = shapes[k][1], inplace = k % 3 == 2;
		size_t N = (size_t)rows * n;
		float *x = xmalloc(4 * N), *w = xmalloc(4 * (size_t)n), *want = xmalloc(4 * N);
		float *got = xmalloc(4 * N);
		uint64_t dx, dw, dy;
		char what[64];

		for (size_t i = 0; i < N; i++)
			x[i] = frand() * (i % 5 ? 1.0f : 30.0f);
		for (int i = 0; i < n; i++)
			w[i] = 1.0f + 0.1f * frand();
		for (int r = 0; r < rows; r++)
			coli_rmsnorm(x + (size_t)r * n, k % 4 == 3 ? NULL : w, want + (size_t)r * n,
			             n, 1e-6f);
		dx = dev_copy(x, 4 * N);
		dw = dev_copy(w, 4 * (size_t)n);
		dy = inplace ? dx : dev_poison(4 * N);
		if (coli_gpu_rmsnorm(g_gpu, dx, k % 4 == 3 ? 0 : dw, dy, rows, n, 1e-6f))
			return 1;
		download(got, dy, 4 * N);
		snprintf(what, sizeof(what), "rmsnorm %dx%d%s%s", rows, n,
		         inplace ? " in place" : "", k % 4 == 3 ? " no w" : "");
		rc |= check(what, got, want, NULL, 4e-6f, N);
		coli_gpu_free(g_gpu, dx), coli_gpu_free(g_gpu, dw);
		if (!inplace)
			coli_gpu_free(g_gpu, dy);
		free(x), free(w), free(want), free(got);
	}
	return rc;
}

static int test_rope(void)
{
	const int T = 3, nh = 32, hd = 128, pos0 = 39990;
	size_t N = (size_t)T * nh * hd;
	float *x = xmalloc(4 * N), *want = xmalloc(4 * N), *got = xmalloc(4 * N), f[64];
	uint64_t dx, df;
	int rc;

	for (int i = 0; i < hd / 2; i++)
		f[i] = (float)pow(1e6, -2.0 * i / hd);
	for (size_t i = 0; i < N; i++)
		x[i] = want[i] = frand();
	coli_rope(want, T, nh, hd, pos0, f);
	dx = dev_copy(x, 4 * N);
	df = dev_copy(f, sizeof(f));
	if (coli_gpu_rope(g_gpu, dx, T, nh, hd, pos0, df))
		return 1;
	download(got, dx, 4 * N);
	rc = check("rope 3x32x128 at 39990", got, want, NULL, 1e-6f, N);
	coli_gpu_free(g_gpu, dx), coli_gpu_free(g_gpu, df);
	free(x), free(want), free(got);
	return rc;
}

static int test_add_rmsnorm(void)
{
	static const int shapes[][2] = {{1, 2048}, {4, 4096}, {3, 18}, {2, 20000}, {5, 128}};
	int rc = 0;

	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		int rows = shapes[k][0], n = shapes[k][1];
		size_t N = (size_t)rows * n, xbad = 0;
		float *x = xmalloc(4 * N), *a = xmalloc(4 * N), *w = xmalloc(4 * (size_t)n);
		float *want = xmalloc(4 * N), *got = xmalloc(4 * N), *gx = xmalloc(4 * N);
		int quant = n % 32 == 0, nb = (int)(N / 32);
		int8_t *gq = xmalloc(N + 1), *cq = xmalloc(N + 1);
		float *gd = xmalloc(4 * (size_t)nb + 4), *cd = xmalloc(4 * (size_t)nb + 4);
		int32_t *gs = xmalloc(4 * (size_t)nb + 4), *cs = xmalloc(4 * (size_t)nb + 4);
		struct coli_act ca = {.q = cq, .d = cd, .qsum = cs};
		uint64_t dx, da, dw, dy, dq = 0, dd = 0, ds = 0;
		char what[80];

		for (size_t i = 0; i < N; i++)
			x[i] = frand() * (i % 5 ? 1.0f : 30.0f), a[i] = frand();
		for (int i = 0; i < n; i++)
			w[i] = 1.0f + 0.1f * frand();
		dx = dev_copy(x, 4 * N);
		da = dev_copy(a, 4 * N);
		dw = dev_copy(w, 4 * (size_t)n);
		dy = dev_poison(4 * N);
		for (size_t i = 0; i < N; i++)
			x[i] = x[i] + a[i];
		for (int r = 0; r < rows; r++)
			coli_rmsnorm(x + (size_t)r * n, w, want + (size_t)r * n, n, 1e-6f);
		if (quant)
			dq = dev_poison(N), dd = dev_poison(4 * (size_t)nb),
			ds = dev_poison(4 * (size_t)nb);
		if (coli_gpu_add_rmsnorm(g_gpu, dx, da, dw, dy, dq, dd, ds, rows, n, 1e-6f))
			return 1;
		download(got, dy, 4 * N);
		download(gx, dx, 4 * N);
		if (quant) { /* the quantization of what the device computed, exactly */
			download(gq, dq, N);
			download(gd, dd, 4 * (size_t)nb);
			download(gs, ds, 4 * (size_t)nb);
			coli_act_quantize(&ca, got, (int)N);
			xbad += memcmp(gq, cq, N) != 0 || memcmp(gd, cd, 4 * (size_t)nb) != 0 ||
			        memcmp(gs, cs, 4 * (size_t)nb) != 0;
			coli_gpu_free(g_gpu, dq), coli_gpu_free(g_gpu, dd),
			    coli_gpu_free(g_gpu, ds);
		}
		for (size_t i = 0; i < N; i++)
			xbad += memcmp(&gx[i], &x[i], 4) != 0;
		snprintf(what, sizeof(what), "add_rmsnorm %dx%d (x += a, quantized y: %zu differ)",
		         rows, n, xbad);
		rc |= check(what, got, want, NULL, 4e-6f, N) | (xbad != 0);
		coli_gpu_free(g_gpu, dx), coli_gpu_free(g_gpu, da), coli_gpu_free(g_gpu, dw);
		coli_gpu_free(g_gpu, dy);
		free(x), free(a), free(w), free(want), free(got), free(gx);
		free(gq), free(cq), free(gd), free(cd), free(gs), free(cs);
	}
	return rc;
}

static int test_qk_rope_store(void)
{
	static const int cases[][6] = {/* T, nh, nkv, hd, pos0, norm */ {1, 32, 4, 128, 70, 1},
	                               {5, 32, 4, 128, 0, 1},
	                               {1, 32, 8, 128, 39990, 0},
	                               {3, 4, 2, 64, 7, 1},
	                               {2, 8, 8, 256, 100, 1},
	                               {1, 6, 3, 18, 3, 1}};
	int rc = 0;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int T = cases[c][0], nh = cases[c][1], nkv = cases[c][2], hd = cases[c][3];
		int pos0 = cases[c][4], norm = cases[c][5], ctx = pos0 + T + 2;
		size_t qn = (size_t)T * nh * hd, kn = (size_t)T * nkv * hd, kvd = (size_t)nkv * hd;
		size_t cn = (size_t)ctx * kvd, vbad = 0, kept = 0;
		float *q = xmalloc(4 * qn), *k = xmalloc(4 * kn), *v = xmalloc(4 * kn);
		float *qw = xmalloc(4 * (size_t)hd), *kw = xmalloc(4 * (size_t)hd), f[128];
		float *gq = xmalloc(4 * qn), *gk = xmalloc(4 * cn), *gv = xmalloc(4 * cn);
		uint64_t dq, dk, dv, dqw, dkw, df, dkc, dvc, dpos;
		char what[96];

		for (int i = 0; i < hd / 2; i++)
			f[i] = (float)pow(1e6, -2.0 * i / hd);
		for (size_t i = 0; i < qn; i++)
			q[i] = frand() * 3.0f;
		for (size_t i = 0; i < kn; i++)
			k[i] = frand() * 3.0f, v[i] = frand();
		for (int i = 0; i < hd; i++)
			qw[i] = 1.0f + 0.1f * frand(), kw[i] = 1.0f + 0.1f * frand();
		dq = dev_copy(q, 4 * qn), dk = dev_copy(k, 4 * kn), dv = dev_copy(v, 4 * kn);
		dqw = dev_copy(qw, 4 * (size_t)hd), dkw = dev_copy(kw, 4 * (size_t)hd);
		df = dev_copy(f, sizeof(f));
		dkc = dev_poison(4 * cn), dvc = dev_poison(4 * cn);
		if (norm) { /* the reference: the unfused CPU steps */
			for (size_t h = 0; h < (size_t)T * nh; h++)
				coli_rmsnorm(q + h * hd, qw, q + h * hd, hd, 1e-6f);
			for (size_t h = 0; h < (size_t)T * nkv; h++)
				coli_rmsnorm(k + h * hd, kw, k + h * hd, hd, 1e-6f);
		}
		coli_rope(q, T, nh, hd, pos0, f);
		coli_rope(k, T, nkv, hd, pos0, f);
		/* normed cases read the position from device memory (the argument
		 * is wrong on purpose), as a launch captured in a graph does */
		dpos = dev_copy(&pos0, sizeof(pos0));
		if (coli_gpu_qk_rope_store(g_gpu, dq, dk, dv, norm ? dqw : 0, norm ? dkw : 0, 1e-6f,
		                           T, nh, nkv, hd, norm ? (pos0 ? pos0 - 1 : 1) : pos0,
		                           norm ? dpos : 0, df, dkc, dvc))
			return 1;
		coli_gpu_free(g_gpu, dpos);
		download(gq, dq, 4 * qn);
		download(gk, dkc, 4 * cn);
		download(gv, dvc, 4 * cn);
		for (size_t i = 0; i < cn; i++) {
			size_t row = i / kvd;
			int in = row >= (size_t)pos0 && row < (size_t)pos0 + T;

			if (in)
				vbad += memcmp(&gv[i], &v[i - (size_t)pos0 * kvd], 4) != 0;
			else
				kept += gk[i] != gk[i] && gv[i] != gv[i]; /* NaN: untouched */
		}
		snprintf(what, sizeof(what), "qk_rope_store T=%d %dq/%dkv x %d at %d%s: q", T, nh,
		         nkv, hd, pos0, norm ? " normed" : "");
		rc |= check(what, gq, q, NULL, 2e-5f, qn);
		snprintf(what, sizeof(what), "  k in the cache (v rows: %zu differ)", vbad);
		rc |= check(what, gk + (size_t)pos0 * kvd, k, NULL, 2e-5f, kn);
		if (vbad || kept != cn - kn) {
			printf(
			    "  FAIL: v rows differ (%zu) or rows outside the step written (%zu of "
			    "%zu kept)\n",
			    vbad, kept, cn - kn);
			rc = 1;
		}
		coli_gpu_free(g_gpu, dq), coli_gpu_free(g_gpu, dk), coli_gpu_free(g_gpu, dv);
		coli_gpu_free(g_gpu, dqw), coli_gpu_free(g_gpu, dkw), coli_gpu_free(g_gpu, df);
		coli_gpu_free(g_gpu, dkc), coli_gpu_free(g_gpu, dvc);
		free(q), free(k), free(v), free(qw), free(kw), free(gq), free(gk), free(gv);
	}
	return rc;
}

/* ---- gather_rows and moe_accumulate: exact ---- */

/* coli_gather_rows: a MoE layer's pair rows from the token rows, bytes as
 * they were (int8 rows, 4-byte scale rows, repeated and skipped tokens) */
static int test_gather(void)
{
	static const int shapes[][3] = {/* tokens, pairs, row bytes */
	                                {256, 2048, 2048},
	                                {5, 40, 64},
	                                {1, 8, 4},
	                                {64, 3, 8192}};
	int rc = 0;

	for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
		int T = shapes[k][0], P = shapes[k][1], rb = shapes[k][2];
		unsigned char *src = xmalloc((size_t)T * rb), *got = xmalloc((size_t)P * rb);
		int *idx = xmalloc(sizeof(int) * P);
		uint64_t ds, dd, di;
		size_t bad = 0;

		for (size_t i = 0; i < (size_t)T * rb; i++)
			src[i] = (unsigned char)rnd();
		for (int r = 0; r < P; r++)
			idx[r] = (int)(rnd() % (uint64_t)T);
		ds = dev_copy(src, (size_t)T * rb);
		di = dev_copy(idx, sizeof(int) * P);
		dd = dev_poison((size_t)P * rb);
		if (coli_gpu_gather_rows(g_gpu, dd, ds, di, P, (size_t)rb))
			return 1;
		download(got, dd, (size_t)P * rb);
		for (int r = 0; r < P; r++)
			bad += memcmp(got + (size_t)r * rb, src + (size_t)idx[r] * rb, rb) != 0;
		printf("  gather_rows %d of %d rows x %d bytes: %zu rows differ\n", P, T, rb, bad);
		rc |= bad != 0;
		coli_gpu_free(g_gpu, ds), coli_gpu_free(g_gpu, dd), coli_gpu_free(g_gpu, di);
		free(src), free(got), free(idx);
	}
	return rc;
}

/* coli_gpu_download_many: ranges of device bytes into registered host memory
 * as one kernel (up to COLI_GPU_PULLS of them), and the fallbacks (more
 * ranges, one too large to push, a pageable destination) as single
 * downloads: every byte lands, nothing between the ranges is touched. */
static int test_download_many(void)
{
	static const size_t cases[][6] = {
	    /* ranges, then their sizes in bytes (a decode layer's: routing, weights, xn) */
	    {4, 32, 32, 8192, 32},
	    {3, 4, 102400, 16},
	    {5, 64, 64, 64, 64, 64},
	    {2, 8192, 300 << 10}};
	const size_t span = 1 << 20, gap = 256;
	unsigned char *host = aligned_alloc(4096, span), *want = xmalloc(span);
	unsigned char *src = xmalloc(span);
	int rc = 0;

	if (!host || coli_gpu_host_register(g_gpu, host, span)) {
		printf("  download_many: registering host memory failed\n");
		return 1;
	}
	for (size_t i = 0; i < span; i++)
		src[i] = (unsigned char)rnd();
	uint64_t ds = dev_copy(src, span);
	unsigned char *pageable = xmalloc(8192);

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]) + 1; k++) {
		/* the last case: the first case's ranges, its second into pageable memory */
		const size_t *c = cases[k < sizeof(cases) / sizeof(cases[0]) ? k : 0];
		int n = (int)c[0];
		void *dst[5];
		uint64_t from[5];
		size_t off = 0, bad = 0;

		memset(host, 0xa5, span), memcpy(want, host, span), memset(pageable, 0, 8192);
		for (int r = 0; r < n; r++) {
			size_t sz = c[1 + r], at = (size_t)(rnd() % (span / 2)) & ~(size_t)3;

			at = at + sz <= span ? at : 0;
			dst[r] =
			    k == sizeof(cases) / sizeof(cases[0]) && r == 1 ? pageable : host + off;
			from[r] = ds + at;
			if (dst[r] != pageable)
				memcpy(want + off, src + at, sz);
			off += sz + gap;
		}
		if (coli_gpu_download_many(g_gpu, n, dst, from, c + 1) || coli_gpu_sync(g_gpu))
			return 1;
		bad = memcmp(host, want, span) != 0;
		if (k == sizeof(cases) / sizeof(cases[0]))
			bad += memcmp(pageable, src + (from[1] - ds), c[2]) != 0;
		printf("  download_many %d ranges%s: %s\n", n,
		       k == sizeof(cases) / sizeof(cases[0]) ? " (one pageable)" : "",
		       bad ? "bytes differ" : "every byte landed, gaps untouched");
		rc |= bad != 0;
	}
	coli_gpu_host_unregister(g_gpu, host);
	coli_gpu_free(g_gpu, ds);
	free(host), free(want), free(src), free(pageable);
	return rc;
}

/* The pairs of a random mask (every other, the first, none, all) read
 * through the mapping from registered host memory, their device rows
 * poisoned: the sums must not change by a bit. */
static int moe_acc_host(const float *y, const float *want, int T, int P, int H, uint64_t dt,
                        uint64_t dw)
{
	const size_t row = 4 * (size_t)H, n = (size_t)P * row;
	uint64_t masks[] = {rnd() & ((P < 64 ? 1ull << P : 0) - 1), 0x5555555555555555ull, 1, 0,
	                    ~0ull};
	float *host = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
	float *got = xmalloc(4 * (size_t)T * H);
	uint64_t hy, dy, dout;
	int rc = 0;

	if (!host || coli_gpu_host_register(g_gpu, host, (n + 4095) & ~(size_t)4095) ||
	    !(hy = coli_gpu_mapped(g_gpu, host, n))) {
		printf("  moe_accumulate: registering or mapping host rows failed\n");
		return 1;
	}
	for (size_t m = 0; m < sizeof(masks) / sizeof(masks[0]); m++) {
		size_t bad = 0;

		dy = dev_copy(y, n);
		memset(host, 0xff, n); /* NaN where a row is the device's */
		for (int p = 0; p < P; p++)
			if (masks[m] >> p & 1) { /* the host's row; the device's copy NaN */
				memcpy((char *)host + p * row, (const char *)y + p * row, row);
				if (coli_gpu_memset(g_gpu, dy + p * row, 0xff, row))
					return 1;
			}
		dout = dev_poison(4 * (size_t)T * H);
		if (coli_gpu_moe_accumulate(g_gpu, dout, dy, dt, dw, P, T, H, hy, masks[m]))
			return 1;
		download(got, dout, 4 * (size_t)T * H);
		for (size_t i = 0; i < (size_t)T * H; i++)
			bad += memcmp(&got[i], &want[i], 4) != 0;
		printf(
		    "  moe_accumulate T=%-3d pairs=%-5d H=%-5d host mask %016llx mismatches %zu\n",
		    T, P, H, (unsigned long long)masks[m], bad);
		rc |= bad != 0;
		coli_gpu_free(g_gpu, dy), coli_gpu_free(g_gpu, dout);
	}
	coli_gpu_host_unregister(g_gpu, host);
	free(host), free(got);
	return rc;
}

static int test_moe_acc(void)
{
	static const int cases[][3] = {/* T, pairs, H */ {1, 8, 2048},
	                               {4, 32, 2048},
	                               {5, 40, 1000},
	                               {64, 512, 256},
	                               {1, 600, 64},
	                               {3, 2000, 96},
	                               {8, 64, 2048},   /* a step of 8 sequences */
	                               {300, 2400, 2048}, /* a prompt's rows: a CTA a row */
	                               {256, 2048, 1000}};
	int rc = 0;

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		int T = cases[k][0], P = cases[k][1], H = cases[k][2];
		float *y = xmalloc(4 * (size_t)P * H), *w = xmalloc(4 * (size_t)P);
		float *want = xmalloc(4 * (size_t)T * H), *got = xmalloc(4 * (size_t)T * H);
		int *tok = xmalloc(4 * (size_t)P);
		uint64_t dy, dw, dt, dout;
		size_t bad = 0;

		for (int p = 0; p < P; p++) {
			tok[p] = (int)((g_rng = g_rng * 6364136223846793005ULL + 1) >> 33) % T;
			w[p] = 0.5f + 0.5f * frand();
		}
		for (size_t i = 0; i < (size_t)P * H; i++)
			y[i] = frand() * 3.0f;
		memset(want, 0, 4 * (size_t)T * H);
		for (int p = 0; p < P; p++) /* core/moe/moe.c: o = o + w * y, pair order */
			for (int j = 0; j < H; j++) {
				float prod = w[p] * y[(size_t)p * H + j];

				want[(size_t)tok[p] * H + j] = want[(size_t)tok[p] * H + j] + prod;
			}
		dy = dev_copy(y, 4 * (size_t)P * H);
		dw = dev_copy(w, 4 * (size_t)P);
		dt = dev_copy(tok, 4 * (size_t)P);
		dout = dev_poison(4 * (size_t)T * H);
		if (coli_gpu_moe_accumulate(g_gpu, dout, dy, dt, dw, P, T, H, 0, 0))
			return 1;
		download(got, dout, 4 * (size_t)T * H);
		for (size_t i = 0; i < (size_t)T * H; i++)
			bad += memcmp(&got[i], &want[i], 4) != 0;
		printf("  moe_accumulate T=%-3d pairs=%-5d H=%-5d %16s mismatches %zu\n", T, P, H,
		       "", bad);
		rc |= bad != 0;
		if (P <= 64) /* some rows read from mapped host memory instead */
			rc |= moe_acc_host(y, want, T, P, H, dt, dw);
		/* the same pairs summed by the next norm (coli_gpu_acc_rmsnorm): x, y
		 * and y quantized as accumulate then add_rmsnorm, byte for byte */
		if (H % 32 == 0) {
			const struct coli_gpu_pairs pr = {.y = dy, .token = dt, .w = dw, .n = P};
			size_t n = (size_t)T * H, nb = n / 32;
			float *x = xmalloc(4 * n), *h[2][3];
			uint64_t dx[2], dyo[2], dq[2], dd[2], ds[2], dnw;
			size_t sz[3] = {4 * n, 4 * n, n};

			for (size_t i = 0; i < n; i++)
				x[i] = frand();
			dnw = dev_copy(x, 4 * (size_t)H); /* any weights */
			for (int v = 0; v < 2; v++) {
				dx[v] = dev_copy(x, 4 * n), dyo[v] = dev_poison(4 * n);
				dq[v] = dev_poison(n), dd[v] = dev_poison(4 * nb);
				ds[v] = dev_poison(4 * nb);
			}
			if (coli_gpu_add_rmsnorm(g_gpu, dx[0], dout, dnw, dyo[0], dq[0], dd[0],
			                         ds[0], T, H, 1e-6f) ||
			    coli_gpu_acc_rmsnorm(g_gpu, dx[1], &pr, dnw, dyo[1], dq[1], dd[1],
			                         ds[1], T, H, 1e-6f))
				return 1;
			bad = 0;
			for (int v = 0; v < 2; v++) {
				uint64_t src[3] = {dx[v], dyo[v], dq[v]};

				for (int k2 = 0; k2 < 3; k2++) {
					h[v][k2] = xmalloc(sz[k2]);
					download(h[v][k2], src[k2], sz[k2]);
				}
			}
			for (int k2 = 0; k2 < 3; k2++)
				bad += memcmp(h[0][k2], h[1][k2], sz[k2]) != 0;
			printf("  acc_rmsnorm    T=%-3d pairs=%-5d H=%-5d %16s %zu of 3 differ\n",
			       T, P, H, "", bad);
			rc |= bad != 0;
			for (int v = 0; v < 2; v++) {
				coli_gpu_free(g_gpu, dx[v]), coli_gpu_free(g_gpu, dyo[v]);
				coli_gpu_free(g_gpu, dq[v]), coli_gpu_free(g_gpu, dd[v]);
				coli_gpu_free(g_gpu, ds[v]);
				for (int k2 = 0; k2 < 3; k2++)
					free(h[v][k2]);
			}
			coli_gpu_free(g_gpu, dnw);
			free(x);
		}
		coli_gpu_free(g_gpu, dy), coli_gpu_free(g_gpu, dw), coli_gpu_free(g_gpu, dt);
		coli_gpu_free(g_gpu, dout);
		free(y), free(w), free(want), free(got), free(tok);
	}
	return rc;
}

/* ---- route: the same choice as the CPU, weights within the device's expf ---- */

static int test_route(void)
{
	/* spread: odd tokens' logits scaled by it, so some of their p fall
	 * below where the device's warp sum is exact (it then sums in one lane,
	 * in order); the even tokens' stay above */
	static const int cases[][5] = {/* T, E, K, norm, spread */ {1, 128, 8, 1, 1},
	                               {4, 128, 8, 1, 1},
	                               {3, 8, 2, 1, 1},
	                               {2, 64, 8, 0, 1},
	                               {4, 1024, 16, 1, 1},
	                               {1, 16, 16, 0, 1},
	                               {5, 256, 8, 1, 1},
	                               {4, 128, 8, 1, 12}};
	int rc = 0;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int T = cases[c][0], E = cases[c][1], K = cases[c][2], norm = cases[c][3];
		float *lg = xmalloc(4 * (size_t)T * E), *p = xmalloc(4 * (size_t)E);
		float *w = xmalloc(4 * (size_t)T * K), *gw = xmalloc(4 * (size_t)T * K);
		int *s = xmalloc(4 * (size_t)T * K), *gs = xmalloc(4 * (size_t)T * K);
		uint64_t dl, ds, dw;
		size_t bad = 0;
		double ulp = 0;

		for (int i = 0; i < T * E; i++) /* coarse values: ties happen */
			lg[i] =
			    ((float)((int)(frand() * 8)) * 0.25f + (i % 5 == 0 ? 0.0f : frand())) *
			    (float)((i / E) % 2 ? cases[c][4] : 1);
		for (int t = 0; t < T; t++) {
			memcpy(p, lg + (size_t)t * E, 4 * (size_t)E);
			coli_route(p, E, K, norm, s + (size_t)t * K, w + (size_t)t * K);
		}
		dl = dev_copy(lg, 4 * (size_t)T * E);
		ds = dev_poison(4 * (size_t)T * K);
		dw = dev_poison(4 * (size_t)T * K);
		if (coli_gpu_route(g_gpu, dl, T, E, K, norm, ds, dw))
			return 1;
		download(gs, ds, 4 * (size_t)T * K);
		download(gw, dw, 4 * (size_t)T * K);
		for (int i = 0; i < T * K; i++) {
			double u = fabs((double)gw[i] - w[i]) / (nextafterf(w[i], INFINITY) - w[i]);

			bad += gs[i] != s[i] || !(u <= 4);
			ulp = u > ulp || u != u ? u : ulp;
		}
		printf(
		    "  route T=%d E=%-4d K=%-2d norm=%d spread %-2d %12s mismatches %zu, max %.0f "
		    "ulp\n",
		    T, E, K, norm, cases[c][4], "", bad, ulp);
		rc |= bad != 0;
		coli_gpu_free(g_gpu, dl), coli_gpu_free(g_gpu, ds), coli_gpu_free(g_gpu, dw);
		free(lg), free(p), free(w), free(gw), free(s), free(gs);
	}
	return rc;
}

/* ---- moe_plan: the tables, field by field ---- */

static int test_moe_plan(void)
{
	enum { E = 128, H = 2048, I = 768 };
	/* T, K, grouped (q8/q4 rows; 2: bf16's), experts drawn from the first
	 * `pool` (long runs: several jobs of COLI_GPU_MAX_S) */
	static const int cases[][4] = {{1, 8, 0, E},   {4, 8, 0, E},   {3, 2, 0, E}, {4, 16, 0, E},
	                               {16, 8, 0, E},  {16, 16, 0, E}, {2, 8, 1, E}, {16, 8, 1, 16},
	                               {16, 16, 1, E}, {9, 4, 2, 8}};
	int rc = 0;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int T = cases[c][0], K = cases[c][1], P = T * K, order[256], bad = 0;
		const int group = cases[c][2], pool = cases[c][3];
		signed char *xq = NULL, *gq = NULL;
		float *xd = NULL, *gd = NULL, *xf = NULL, *gf = NULL;
		int *xs = NULL, *gs = NULL;
		uint64_t dxq = 0, dxd = 0, dxs = 0, dxf = 0, dgq = 0, dgd = 0, dgs = 0, dgf = 0;
		int sel[256], tok[256], px[256];
		float selw[256], pw[256];
		unsigned long long slabs[E];
		struct coli_gpu_gemv_job gu[512], dn[256];
		uint64_t dsel, dselw, dslabs, dgu, ddn, dtok, dpw, dpx;
		struct coli_gpu_moe_plan a;

		for (int x = 0; x < E; x++) /* every third expert not resident: empty jobs */
			slabs[x] =
			    x % 3 == 1 ? 0 : 0x100000000ull + (unsigned long long)x * 0x300000;
		for (int t = 0; t < T; t++) /* K distinct experts per token */
			for (int k = 0; k < K; k++) {
				int ex;
				int dup;

				do {
					ex = (int)(rnd() % pool);
					dup = 0;
					for (int j = 0; j < k; j++)
						dup |= sel[t * K + j] == ex;
				} while (dup);
				sel[t * K + k] = ex;
				selw[t * K + k] = 0.1f + 0.01f * (float)(t * K + k);
			}
		for (int i = 0; i < P; i++) /* expected order: ascending (expert, token) */
			order[i] = i;
		for (int i = 1; i < P; i++)
			for (int j = i; j > 0 && (sel[order[j - 1]] > sel[order[j]] ||
			                          (sel[order[j - 1]] == sel[order[j]] &&
			                           order[j - 1] / K > order[j] / K));
			     j--) {
				int x = order[j];

				order[j] = order[j - 1], order[j - 1] = x;
			}
		dsel = dev_copy(sel, 4 * (size_t)P);
		dselw = dev_copy(selw, 4 * (size_t)P);
		dslabs = dev_copy(slabs, sizeof(slabs));
		dgu = dev_poison(sizeof(gu[0]) * 2 * P);
		ddn = dev_poison(sizeof(dn[0]) * P);
		dtok = dev_poison(4 * (size_t)P);
		dpw = dev_poison(4 * (size_t)P);
		dpx = dev_poison(4 * (size_t)P);
		memset(&a, 0, sizeof(a));
		a.sel = (const int *)DP(dsel), a.selw = (const float *)DP(dselw);
		a.slabs = (const unsigned long long *)DP(dslabs);
		a.gate_off = 64, a.up_off = 64 + 0x10000, a.down_off = 64 + 0x20000;
		a.scale_gu = 0x8000, a.scale_d = 0x9000;
		a.xq = (const signed char *)0x1000, a.xd = (const float *)0x2000;
		a.xqsum = (const int *)0x3000, a.xf = (const float *)0x4000;
		a.g = (float *)0x10000000, a.u = (float *)0x20000000, a.h = (float *)0x30000000;
		a.hq = (const signed char *)0x40000000, a.hd = (const float *)0x50000000;
		a.hqs = (const int *)0x60000000, a.y = (float *)0x70000000;
		a.gu_jobs = (struct coli_gpu_gemv_job *)DP(dgu);
		a.down_jobs = (struct coli_gpu_gemv_job *)DP(ddn);
		a.pair_token = (int *)DP(dtok), a.pair_w = (float *)DP(dpw);
		a.pair_expert = (int *)DP(dpx); /* gpt-oss's bias rows */
		a.T = T, a.K = K, a.H = H, a.I = I, a.E = E;
		if (group) { /* real rows to gather: random bytes, poisoned outputs */
			size_t nb = (size_t)T * (H / 32);

			xq = xmalloc((size_t)T * H), xd = xmalloc(4 * nb), xs = xmalloc(4 * nb);
			xf = xmalloc(4 * (size_t)T * H);
			gq = xmalloc((size_t)P * H), gd = xmalloc(4 * (size_t)P * (H / 32));
			gs = xmalloc(4 * (size_t)P * (H / 32)), gf = xmalloc(4 * (size_t)P * H);
			for (size_t i = 0; i < (size_t)T * H; i++)
				xq[i] = (signed char)rnd(), xf[i] = frand();
			for (size_t i = 0; i < nb; i++)
				xd[i] = frand(), xs[i] = (int)rnd();
			dxq = dev_copy(xq, (size_t)T * H), dxd = dev_copy(xd, 4 * nb);
			dxs = dev_copy(xs, 4 * nb), dxf = dev_copy(xf, 4 * (size_t)T * H);
			dgq = dev_poison((size_t)P * H), dgd = dev_poison(4 * (size_t)P * (H / 32));
			dgs = dev_poison(4 * (size_t)P * (H / 32)),
			dgf = dev_poison(4 * (size_t)P * H);
			a.xq = (const signed char *)DP(dxq), a.xd = (const float *)DP(dxd);
			a.xqsum = (const int *)DP(dxs), a.xf = (const float *)DP(dxf);
			a.gq = (signed char *)DP(dgq), a.gd = (float *)DP(dgd);
			a.gqs = (int *)DP(dgs), a.gf = (float *)DP(dgf);
			a.xquant = group == 1; /* else bf16: the f32 rows */
			a.scale_gu = group == 1 ? a.scale_gu : 0;
		}
		if (coli_gpu_moe_plan(g_gpu, &a))
			return 1;
		download(gu, dgu, sizeof(gu[0]) * 2 * P);
		download(dn, ddn, sizeof(dn[0]) * P);
		download(tok, dtok, 4 * (size_t)P);
		download(pw, dpw, 4 * (size_t)P);
		download(px, dpx, 4 * (size_t)P);
		for (int r = 0; r < P; r++) {
			int i = order[r], t = i / K, o = 0, n = 0, S = 1;
			unsigned long long s = slabs[sel[i]];
			struct coli_gpu_gemv_job want[3];
			/* grouped: the run's first of every COLI_GPU_MAX_S takes them */
			const size_t xr = group ? (size_t)r : (size_t)t;

			for (int q = 0; q < P; q++)
				o += sel[order[q]] == sel[i] && q < r, n += sel[order[q]] == sel[i];
			if (group)
				S = o % COLI_GPU_MAX_S       ? 0
				    : n - o < COLI_GPU_MAX_S ? n - o
				                             : COLI_GPU_MAX_S;
			memset(want, 0, sizeof(want));
			for (int m = 0; m < 2; m++) {
				unsigned long long w = s + (m ? a.up_off : a.gate_off);

				want[m] = (struct coli_gpu_gemv_job){
				    .w = (const void *)w,
				    .scales = a.scale_gu ? (const unsigned short *)(w + a.scale_gu)
				                         : NULL,
				    .xq = (group ? a.gq : a.xq) + xr * H,
				    .xd = (group ? a.gd : a.xd) + xr * (H / 32),
				    .xqsum = (group ? a.gqs : a.xqsum) + xr * (H / 32),
				    .xf = (group ? a.gf : a.xf) + xr * H,
				    .y = (m ? a.u : a.g) + (size_t)r * I,
				    .rows = s && S ? I : 0,
				    .K = H,
				    .S = S ? S : 1,
				    .ldy = I};
			}
			want[2] = (struct coli_gpu_gemv_job){
			    .w = (const void *)(s + a.down_off),
			    .scales = (const unsigned short *)(s + a.down_off + a.scale_d),
			    .xq = a.hq + (size_t)r * I,
			    .xd = a.hd + (size_t)r * (I / 32),
			    .xqsum = a.hqs + (size_t)r * (I / 32),
			    .xf = a.h + (size_t)r * I,
			    .y = a.y + (size_t)r * H,
			    .rows = s && S ? H : 0,
			    .K = I,
			    .S = S ? S : 1,
			    .ldy = H};
			bad += memcmp(&gu[2 * r], &want[0], sizeof(want[0])) != 0;
			bad += memcmp(&gu[2 * r + 1], &want[1], sizeof(want[0])) != 0;
			bad += memcmp(&dn[r], &want[2], sizeof(want[0])) != 0;
			bad += tok[r] != t || pw[r] != selw[i] || px[r] != sel[i];
		}
		if (group == 1) { /* row r of the gathered = token tok[r]'s */
			download(gq, dgq, (size_t)P * H);
			download(gd, dgd, 4 * (size_t)P * (H / 32));
			download(gs, dgs, 4 * (size_t)P * (H / 32));
			for (int r = 0; r < P; r++) {
				size_t b = H / 32;

				bad += memcmp(gq + (size_t)r * H, xq + (size_t)tok[r] * H, H) != 0;
				bad += memcmp(gd + r * b, xd + tok[r] * b, 4 * b) != 0;
				bad += memcmp(gs + r * b, xs + tok[r] * b, 4 * b) != 0;
			}
		} else if (group == 2) {
			download(gf, dgf, 4 * (size_t)P * H);
			for (int r = 0; r < P; r++)
				bad +=
				    memcmp(gf + (size_t)r * H, xf + (size_t)tok[r] * H, 4 * H) != 0;
		}
		if (group) {
			free(xq), free(xd), free(xs), free(xf), free(gq), free(gd), free(gs),
			    free(gf);
			coli_gpu_free(g_gpu, dxq), coli_gpu_free(g_gpu, dxd),
			    coli_gpu_free(g_gpu, dxs);
			coli_gpu_free(g_gpu, dxf), coli_gpu_free(g_gpu, dgq),
			    coli_gpu_free(g_gpu, dgd);
			coli_gpu_free(g_gpu, dgs), coli_gpu_free(g_gpu, dgf);
		}
		printf("  moe_plan T=%d K=%-2d pairs=%-3d %-6s experts %-3d %11s mismatches %d\n",
		       T, K, P,
		       group == 1 ? "q"
		       : group    ? "bf16"
		                  : "single",
		       pool, "", bad);
		rc |= bad != 0;
		coli_gpu_free(g_gpu, dsel), coli_gpu_free(g_gpu, dselw),
		    coli_gpu_free(g_gpu, dslabs);
		coli_gpu_free(g_gpu, dgu), coli_gpu_free(g_gpu, ddn), coli_gpu_free(g_gpu, dtok);
		coli_gpu_free(g_gpu, dpw), coli_gpu_free(g_gpu, dpx);
	}
	return rc;
}

static int test_route_plan(void)
{
	enum { E = 128, K = 8, H = 256, I = 64 };
	int rc = 0;

	for (int T = 1; T <= COLI_GPU_STEP_T; T += 3) { /* 1 .. 16: several tokens a warp */
		int P = T * K, sel[COLI_GPU_STEP_T * K], gsel[COLI_GPU_STEP_T * K];
		int tok[COLI_GPU_STEP_T * K], bad = 0;
		float lg[COLI_GPU_STEP_T * E], p[E], w[COLI_GPU_STEP_T * K],
		    pw[COLI_GPU_STEP_T * K];
		float gw[COLI_GPU_STEP_T * K];
		unsigned long long slabs[E] = {0};
		struct coli_gpu_moe_plan a;
		uint64_t dl, ds, dw, dsl, dgu, ddn, dt, dp;

		for (int i = 0; i < T * E; i++)
			lg[i] = frand() * 4.0f;
		for (int t = 0; t < T; t++) {
			memcpy(p, lg + t * E, sizeof(p));
			coli_route(p, E, K, 1, sel + t * K, w + t * K);
		}
		dl = dev_copy(lg, sizeof(float) * T * E);
		ds = dev_poison(4 * (size_t)P), dw = dev_poison(4 * (size_t)P);
		dsl = dev_copy(slabs, sizeof(slabs));
		dgu = dev_poison(sizeof(struct coli_gpu_gemv_job) * 2 * P);
		ddn = dev_poison(sizeof(struct coli_gpu_gemv_job) * P);
		dt = dev_poison(4 * (size_t)P), dp = dev_poison(4 * (size_t)P);
		memset(&a, 0, sizeof(a));
		a.sel = (const int *)DP(ds), a.selw = (const float *)DP(dw);
		a.slabs = (const unsigned long long *)DP(dsl);
		a.gu_jobs = (struct coli_gpu_gemv_job *)DP(dgu);
		a.down_jobs = (struct coli_gpu_gemv_job *)DP(ddn);
		a.pair_token = (int *)DP(dt), a.pair_w = (float *)DP(dp);
		a.T = T, a.K = K, a.H = H, a.I = I;
		a.rlog = (const float *)DP(dl), a.E = E, a.norm = 1;
		if (coli_gpu_moe_plan(g_gpu, &a))
			return 1;
		download(gsel, ds, 4 * (size_t)P);
		download(tok, dt, 4 * (size_t)P);
		download(pw, dp, 4 * (size_t)P);
		download(gw, dw, 4 * (size_t)P);
		for (int i = 0; i < P; i++)
			bad += gsel[i] != sel[i];
		for (int r = 1; r < P; r++) { /* the lists follow ascending (expert, token) */
			int prev = -1, cur = -1;

			for (int i = 0; i < P; i++) { /* the pair each list entry came from */
				prev = prev < 0 && i / K == tok[r - 1] && gw[i] == pw[r - 1] ? i
				                                                             : prev;
				cur = cur < 0 && i / K == tok[r] && gw[i] == pw[r] ? i : cur;
			}
			bad += prev < 0 || cur < 0 || sel[prev] > sel[cur] ||
			       (sel[prev] == sel[cur] && tok[r - 1] >= tok[r]);
		}
		printf("  route_plan T=%d E=%d K=%d %28s mismatches %d\n", T, E, K, "", bad);
		rc |= bad != 0;
		coli_gpu_free(g_gpu, dl), coli_gpu_free(g_gpu, ds), coli_gpu_free(g_gpu, dw);
		coli_gpu_free(g_gpu, dsl), coli_gpu_free(g_gpu, dgu), coli_gpu_free(g_gpu, ddn);
		coli_gpu_free(g_gpu, dt), coli_gpu_free(g_gpu, dp);
	}
	return rc;
}

/* The router's GEMV and the plan in one launch (coli_gpu_router_plan) give
 * the bytes of the two launches: logits, routing, job tables, pair lists. */
static int test_router_plan(void)
{
	enum { E = 128, K = 8, H = 2048, I = 768 };
	float *w = xmalloc(4 * (size_t)E * H), *x = xmalloc(4 * (size_t)COLI_GPU_MAX_S * H);
	uint64_t dwt = 0, dx = 0, dsl;
	unsigned long long slabs[E];
	int rc = 0;

	for (size_t i = 0; i < (size_t)E * H; i++)
		w[i] = frand() * 0.05f;
	for (size_t i = 0; i < (size_t)COLI_GPU_MAX_S * H; i++)
		x[i] = frand();
	for (int e = 0; e < E; e++) /* a few "resident" experts: non-empty jobs */
		slabs[e] = e % 5 ? 0 : 0x100000ull * (e + 1);
	dwt = dev_copy(w, 4 * (size_t)E * H);
	dx = dev_copy(x, 4 * (size_t)COLI_GPU_MAX_S * H);
	dsl = dev_copy(slabs, sizeof(slabs));
	for (int T = 1; T <= COLI_GPU_MAX_S; T++) {
		int P = T * K, bad = 0;
		/* per path: rlog, sel, selw, gu jobs, down jobs, pair_token, pair_w */
		size_t sz[7] = {4 * (size_t)T * E,
		                4 * (size_t)P,
		                4 * (size_t)P,
		                sizeof(struct coli_gpu_gemv_job) * 2 * P,
		                sizeof(struct coli_gpu_gemv_job) * P,
		                4 * (size_t)P,
		                4 * (size_t)P};
		uint64_t d[2][7];
		unsigned char *h[2][7];

		for (int v = 0; v < 2; v++) {
			struct coli_gpu_dense_gemv r = {0};
			struct coli_gpu_moe_plan a = {0};

			for (int k = 0; k < 7; k++)
				d[v][k] = dev_poison(sz[k]), h[v][k] = xmalloc(sz[k]);
			r.w = (const void *)DP(dwt), r.xf = (const float *)DP(dx);
			r.y = (float *)DP(d[v][0]);
			r.rows = E, r.K = H, r.T = T, r.ldy = E;
			a.sel = (const int *)DP(d[v][1]), a.selw = (const float *)DP(d[v][2]);
			a.slabs = (const unsigned long long *)DP(dsl);
			a.gu_jobs = (struct coli_gpu_gemv_job *)DP(d[v][3]);
			a.down_jobs = (struct coli_gpu_gemv_job *)DP(d[v][4]);
			a.pair_token = (int *)DP(d[v][5]), a.pair_w = (float *)DP(d[v][6]);
			a.T = T, a.K = K, a.H = H, a.I = I;
			a.rlog = (const float *)DP(d[v][0]), a.E = E, a.norm = 1;
			if (v ? coli_gpu_router_plan(g_gpu, &r, &a)
			      : coli_gpu_dense_gemv(g_gpu, COLI_DTYPE_F32, &r) ||
			            coli_gpu_moe_plan(g_gpu, &a)) {
				printf("  router_plan T=%d: launch failed\n", T);
				return 1;
			}
			for (int k = 0; k < 7; k++)
				download(h[v][k], d[v][k], sz[k]);
		}
		/* the job tables hold the paths' own buffer addresses (sel, ...): none
		 * of those are in them, so the bytes compare as they are */
		for (int k = 0; k < 7; k++)
			bad += memcmp(h[0][k], h[1][k], sz[k]) != 0;
		printf("  router_plan T=%d E=%d K=%d H=%d: %d of 7 outputs differ from the two "
		       "launches\n",
		       T, E, K, H, bad);
		rc |= bad != 0;
		for (int v = 0; v < 2; v++)
			for (int k = 0; k < 7; k++)
				coli_gpu_free(g_gpu, d[v][k]), free(h[v][k]);
	}
	coli_gpu_free(g_gpu, dwt), coli_gpu_free(g_gpu, dx), coli_gpu_free(g_gpu, dsl);
	free(w), free(x);
	return rc;
}

/* ---- attention ---- */

/* The cache rows x [n][row] floats paged as the engine's (ptx/attn/kv_rows.cuh
 * kv_at): block j (rows 32 j ..) at block tab[j] = nb + 2 - j of nb + 3
 * blocks, none at its own place, the other blocks NaN. */
static uint64_t paged(const float *x, int n, int row, const int *tab, int nb)
{
	uint64_t d = dev_poison(4 * (size_t)(nb + 3) * 32 * row);

	for (int j = 0; j < nb; j++) {
		int rows = n - 32 * j < 32 ? n - 32 * j : 32;

		coli_gpu_upload(g_gpu, d + 4 * (size_t)tab[j] * 32 * row, x + (size_t)j * 32 * row,
		                4 * (size_t)rows * row);
	}
	return d;
}

/* window > 0: a sliding layer's (each query sees its last `window`
 * positions); sinks: gpt-oss's logit per head, drawn in [-1, 1] * qamp (the
 * scores' own range, so a sink is sometimes the max). Both go to every launch
 * of the case, checked as the plain one is: against the CPU's
 * coli_attention_head_sink over the window's rows, a query alone against the
 * batch, the prefill kernel against the chunk kernel. The first launch reads
 * a contiguous cache (no table); the others the same rows paged through a
 * block table that moves every block (paged()): the same bytes. */
static int attention_case(int T, int pos0, int nh, int nkv, int hd, float qamp, int window,
                          int sinks)
{
	int n = pos0 + T, kvd = nkv * hd, group = nh / nkv;
	size_t qn = (size_t)T * nh * hd;
	float *q = xmalloc(4 * qn), *K = xmalloc(4 * (size_t)n * kvd);
	float *V = xmalloc(4 * (size_t)n * kvd), *want = xmalloc(4 * qn), *got = xmalloc(4 * qn);
	float *sc = xmalloc(4 * (size_t)n), scale = 1.0f / sqrtf((float)hd);
	float *sk = xmalloc(4 * (size_t)nh);
	uint64_t dq, dk, dv, dout, dpos, dsk = 0, dkp, dvp, dtab;
	const int nbk = (n + 31) / 32; /* the cache's blocks */
	int *tab = xmalloc(sizeof(int) * (size_t)nbk);
	/* both sides sum n terms in f32, in different orders (splits, chunks):
	 * the error grows ~ sqrt(n); 2e-5 up to 10000 positions */
	const float tol = 2e-5f * fmaxf(1.0f, sqrtf(n / 10000.0f));
	char what[96];
	int rc;

	for (size_t i = 0; i < qn; i++)
		q[i] = frand() * qamp;
	for (size_t i = 0; i < (size_t)n * kvd; i++) {
		K[i] = frand();
		V[i] = frand();
	}
	for (int h = 0; h < nh; h++)
		sk[h] = frand() * qamp;
	for (int t = 0; t < T; t++)
		for (int h = 0; h < nh; h++) {
			const int nt = pos0 + t + 1, k0 = window && nt > window ? nt - window : 0;

			coli_attention_head_sink(
			    q + ((size_t)t * nh + h) * hd, K + (size_t)k0 * kvd + (h / group) * hd,
			    V + (size_t)k0 * kvd + (h / group) * hd, nt - k0, kvd, hd, hd, scale,
			    sinks ? sk[h] : -INFINITY, sc, want + ((size_t)t * nh + h) * hd);
		}
	if (sinks)
		dsk = dev_copy(sk, 4 * (size_t)nh);
	dq = dev_copy(q, 4 * qn);
	dk = dev_copy(K, 4 * (size_t)n * kvd);
	dv = dev_copy(V, 4 * (size_t)n * kvd);
	for (int j = 0; j < nbk; j++)
		tab[j] = nbk + 2 - j;
	dtab = dev_copy(tab, sizeof(int) * (size_t)nbk);
	dkp = paged(K, n, kvd, tab, nbk), dvp = paged(V, n, kvd, tab, nbk);
	dout = dev_poison(4 * qn);
	/* with the output also quantized for the o projection (the engine's form
	 * when o is q8/q4): the same bytes coli_act_quantize makes of the output */
	{
		const struct dev_act aq = dev_act_poison(qn);

		if (qn % 32 ||
		    coli_gpu_attention_kv(g_gpu, dq, dk, dv, dout, T, pos0, 0, 0, nh, nkv, hd,
		                          scale, aq.q, aq.d, aq.qsum, 0, 0, dsk, window, 0, 0, 0)) {
			printf("  attention T=%d pos0=%d: launch failed\n", T, pos0);
			return 1;
		}
		download(got, dout, 4 * qn);
		snprintf(what, sizeof(what), "attention T=%d n=%d nh=%d nkv=%d hd=%d%s%s", T, n, nh,
		         nkv, hd, window ? " window" : "", sinks ? " sinks" : "");
		rc = check(what, got, want, NULL, tol, qn);
		if (dev_act_differs(aq, got)) {
			printf("  FAIL %s: its quantized output is not coli_act_quantize's\n",
			       what);
			rc = 1;
		}
		dev_act_free(aq);
	}
	/* the position read from device memory (the pos0 argument is wrong on
	 * purpose, but an upper bound as outside a capture it must be: splits
	 * past pos0 + T are not launched), the grid split for a longer context
	 * than the one used, the cache paged */
	dpos = dev_copy(&pos0, sizeof(pos0));
	coli_gpu_free(g_gpu, dout);
	dout = dev_poison(4 * qn);
	if (coli_gpu_attention_kv(g_gpu, dq, dkp, dvp, dout, T, pos0 + 1, dpos, n + 3000, nh, nkv,
	                          hd, scale, 0, 0, 0, 0, 0, dsk, window, 0, dtab, nbk)) {
		printf("  attention T=%d pos0=%d from memory: launch failed\n", T, pos0);
		return 1;
	}
	{ /* coli_attn_chunks / coli_attn_prefill: each query's split depends on
	   * its position only, not on the span the cache has (COLI_GPU_ATTN_CPS):
	   * the same bytes as the first launch (coli_attention's tiles, the
	   * other head sizes, split by the span and the batch) */
		float *first = xmalloc(4 * qn);

		memcpy(first, got, 4 * qn);
		download(got, dout, 4 * qn);
		snprintf(what, sizeof(what),
		         "  the same, paged, position from memory, split for %d", n + 3000);
		rc |= check(what, got, want, NULL, tol, qn);
		if (hd % 32 == 0 && 256 % hd == 0 && memcmp(first, got, 4 * qn)) {
			size_t i = 0, bad = 0;

			while (!memcmp(first + i, got + i, 4))
				i++;
			for (size_t j = 0; j < qn; j++)
				bad += !isfinite(got[j]);
			printf("  FAIL %s: not the bytes of the launch without the span (first at "
			       "%zu: %g, not %g; %zu of %zu not finite)\n",
			       what, i, got[i], first[i], bad, qn);
			rc = 1;
		}
		free(first);
	}
	/* the batch does not change bits: a query alone (a decode step at its
	 * position: the first, one in the middle, the last) gives the same bytes
	 * as in the batch, and so does the whole batch on coli_attn_chunks alone
	 * (batches of 64 or more take coli_attn_prefill when hd is 64 or 128) */
	if (T > 1 && hd % 32 == 0 && 256 % hd == 0) {
		const size_t row = (size_t)nh * hd;
		uint64_t d1 = dev_poison(4 * row);
		float *one = xmalloc(4 * row);

		for (int k = 0; k < 3; k++) {
			int t = k == 0 ? 0 : k == 1 ? T / 2 : T - 1, at = pos0 + t;

			coli_gpu_free(g_gpu, dpos);
			dpos = dev_copy(&at, sizeof(at));
			if (coli_gpu_attention_kv(g_gpu, dq + 4 * row * t, dkp, dvp, d1, 1, at,
			                          dpos, n + 3000, nh, nkv, hd, scale, 0, 0, 0, 0, 0,
			                          dsk, window, 0, dtab, nbk)) {
				printf("  attention T=1 at %d: launch failed\n", at);
				return 1;
			}
			download(one, d1, 4 * row);
			if (memcmp(one, got + row * t, 4 * row)) {
				printf("  FAIL attention T=%d pos0=%d: query %d alone differs from "
				       "the "
				       "batch\n",
				       T, pos0, t);
				rc = 1;
			}
		}
		coli_gpu_free(g_gpu, dpos);
		dpos = dev_copy(&pos0, sizeof(pos0));
		coli_gpu_free(g_gpu, dout);
		dout = dev_poison(4 * qn);
		coli_gpu_attn_prefill(g_gpu, COLI_GPU_PREFILL_OFF);
		if (coli_gpu_attention_kv(g_gpu, dq, dkp, dvp, dout, T, pos0 + 1, dpos, n + 3000,
		                          nh, nkv, hd, scale, 0, 0, 0, 0, 0, dsk, window, 0, dtab,
		                          nbk)) {
			printf("  attention T=%d pos0=%d on the chunk kernel: launch failed\n", T,
			       pos0);
			return 1;
		}
		coli_gpu_attn_prefill(g_gpu, COLI_GPU_PREFILL_ROWS);
		download(want, dout, 4 * qn);
		size_t bad = bytes_differ(want, got, qn);

		if (bad) {
			printf("  FAIL attention T=%d pos0=%d: %zu of %zu values differ from the "
			       "chunk kernel's\n",
			       T, pos0, bad, qn);
			rc = 1;
		}
		coli_gpu_free(g_gpu, d1);
		free(one);
	}
	coli_gpu_free(g_gpu, dq), coli_gpu_free(g_gpu, dk), coli_gpu_free(g_gpu, dv);
	coli_gpu_free(g_gpu, dkp), coli_gpu_free(g_gpu, dvp), coli_gpu_free(g_gpu, dtab);
	free(tab);
	coli_gpu_free(g_gpu, dout), coli_gpu_free(g_gpu, dpos);
	if (dsk)
		coli_gpu_free(g_gpu, dsk);
	free(q), free(K), free(V), free(want), free(got), free(sc), free(sk);
	return rc;
}

static int test_attention_case(int T, int pos0, int nh, int nkv, int hd, float qamp)
{
	return attention_case(T, pos0, nh, nkv, hd, qamp, 0, 0);
}

/* ---- argmax ---- */

static int argmax_case(const char *what, const float *x, int n)
{
	uint64_t dx = dev_copy(x, 4 * (size_t)n), dout = dev_poison(4);
	int got = -2, want = coli_argmax(x, n), rc = 0;

	if (coli_gpu_argmax(g_gpu, dx, n, dout)) {
		printf("  argmax %s: launch failed\n", what);
		rc = 1;
	} else {
		download(&got, dout, 4);
		if (got != want) {
			printf("  FAIL argmax %s: %d, coli_argmax %d\n", what, got, want);
			rc = 1;
		}
	}
	coli_gpu_free(g_gpu, dx), coli_gpu_free(g_gpu, dout);
	return rc;
}

static int test_argmax(void)
{
	const int V = 151936;
	float *x = xmalloc(4 * (size_t)V);
	int rc = 0;

	for (int i = 0; i < V; i++)
		x[i] = frand() * 20.0f;
	rc |= argmax_case("152k random", x, V);
	x[777] = x[150000] = x[5] = 1e3f; /* repeated maximum: the first index */
	rc |= argmax_case("repeated maximum", x, V);
	x[3] = NAN, x[100000] = NAN; /* NaNs are never the maximum */
	rc |= argmax_case("with NaNs", x, V);
	x[0] = NAN; /* x[0] NaN: 0, as the plain loop */
	rc |= argmax_case("x[0] NaN", x, V);
	for (int i = 0; i < V; i++)
		x[i] = -INFINITY;
	rc |= argmax_case("all -inf", x, V);
	x[10] = -0.0f, x[20] = 0.0f;
	for (int i = 0; i < 10; i++)
		x[i] = -1.0f;
	rc |= argmax_case("-0 before +0", x, 33);
	rc |= argmax_case("n = 1", x, 1);
	printf("  argmax: 7 cases vs coli_argmax%s\n", rc ? ": FAILED" : ", all equal");
	free(x);
	return rc;
}

static int test_attention(void)
{
	int rc = 0;

	/* decode, qwen3-30b-a3b heads: 1, 100, 5000, 12289, 40000 positions */
	rc |= test_attention_case(1, 0, 32, 4, 128, 4.0f);
	rc |= test_attention_case(1, 99, 32, 4, 128, 4.0f);
	rc |= test_attention_case(1, 4999, 32, 4, 128, 4.0f);
	rc |= test_attention_case(1, 12288, 32, 4, 128, 4.0f);
	rc |= test_attention_case(1, 39999, 32, 4, 128, 8.0f);
	/* decode batches and prefill chunks (causal within the chunk) */
	rc |= test_attention_case(4, 12285, 32, 4, 128, 4.0f);
	rc |= test_attention_case(7, 100, 32, 4, 128, 4.0f);
	rc |= test_attention_case(64, 300, 32, 4, 128, 4.0f);
	/* prefill batches (coli_attn_prefill): long, several splits a query,
	 * groups of 1, 4, 16, hd 64 (66 at 3000: its splits on CTAs of their
	 * own) */
	rc |= test_attention_case(600, 100, 32, 4, 128, 4.0f);
	rc |= test_attention_case(200, 5000, 32, 4, 128, 4.0f);
	rc |= test_attention_case(300, 40, 16, 4, 64, 4.0f);
	rc |= test_attention_case(70, 0, 16, 16, 64, 2.0f);
	rc |= test_attention_case(66, 3000, 16, 1, 128, 4.0f);
	rc |= test_attention_case(64, 0, 32, 4, 128, 4.0f);
	/* few queries after a long cache: their splits on CTAs of their own,
	 * in two batches (the partials of 60 queries fit the scratch), one tile
	 * whose queries split unlike (2,112 positions: one chunk a split of 66
	 * on an H200, two from 2,113) in one CTA; and hd 64 */
	rc |= test_attention_case(64, 2082, 32, 4, 128, 4.0f);
	rc |= test_attention_case(64, 3000, 16, 4, 64, 4.0f);
	/* other head shapes: fixtures (hd 16, 64), MHA, group 16, hd 256 */
	rc |= test_attention_case(5, 3, 4, 2, 16, 2.0f);
	rc |= test_attention_case(1, 700, 8, 2, 64, 2.0f);
	rc |= test_attention_case(3, 517, 8, 8, 96, 2.0f);
	rc |= test_attention_case(1, 2000, 16, 1, 128, 4.0f);
	rc |= test_attention_case(2, 1000, 16, 2, 256, 4.0f);
	/* gpt-oss (hd 64, groups of 8; 20b: 64 q heads over 8 kv heads):
	 * sinks alone, sliding windows of 128 (its own) and 8 (the fixture's)
	 * with sinks, at decode (one split, several: the window's first split
	 * past 0, its first position inside a chunk) and prefill (the window
	 * moving k0 a row at a time, across the prefill kernel's chunks), and
	 * the tile kernel (hd 48) */
	rc |= attention_case(1, 700, 64, 8, 64, 2.0f, 0, 1);
	rc |= attention_case(1, 0, 64, 8, 64, 2.0f, 128, 1);
	rc |= attention_case(1, 100, 64, 8, 64, 2.0f, 128, 1);
	rc |= attention_case(1, 5000, 64, 8, 64, 2.0f, 128, 1);
	rc |= attention_case(4, 12285, 64, 8, 64, 2.0f, 128, 0);
	rc |= attention_case(7, 300, 16, 2, 64, 2.0f, 8, 1);
	rc |= attention_case(300, 40, 64, 8, 64, 2.0f, 128, 1);
	rc |= attention_case(200, 5000, 64, 8, 64, 2.0f, 128, 1);
	rc |= attention_case(70, 0, 16, 2, 64, 2.0f, 8, 1);
	rc |= attention_case(66, 3000, 16, 1, 128, 4.0f, 100, 1);
	rc |= attention_case(3, 517, 8, 8, 48, 2.0f, 128, 1);
	rc |= attention_case(2, 5000, 8, 2, 48, 2.0f, 0, 1);
	return rc;
}

/* ---- --bench: decode shapes against the same run's copy bandwidth ---- */

static double time_us(int (*fn)(void *, int), void *arg, int reps)
{
	float ms = 0;

	fn(arg, 0); /* warm: JIT, caches of the launch path */
	coli_gpu_sync(g_gpu);
	coli_gpu_mark(g_gpu, 0);
	for (int i = 0; i < reps; i++)
		if (fn(arg, i))
			return -1;
	coli_gpu_mark(g_gpu, 1);
	if (coli_gpu_elapsed_ms(g_gpu, 0, 1, &ms))
		return -1;
	return ms * 1e3 / reps;
}

struct bench_gemv {
	enum coli_dtype t;
	int n_copies, canonical;
	struct mat_host m[400];
	struct act_host a;
	uint64_t dy;
};

/* each rep reads another copy of the matrix, so L2 (50 MB on H200) does not serve it */
static int run_gemv(void *arg, int i)
{
	struct bench_gemv *b = arg;
	const struct mat_host *m = &b->m[i % b->n_copies];

	if (b->canonical) {
		struct coli_gpu_gemv_job j = {
		    .w = (const void *)DP(m->dw),
		    .scales = (const unsigned short *)DP(m->dscales),
		    .xq = (const signed char *)DP(b->a.dq),
		    .xd = (const float *)DP(b->a.dd),
		    .xqsum = (const int *)DP(b->a.ds),
		    .xf = (const float *)DP(b->a.dx),
		    .y = (float *)DP(b->dy),
		    .rows = m->R,
		    .K = m->K,
		    .S = b->a.T,
		    .ldy = m->R,
		};
		return coli_gpu_gemv(g_gpu, b->t, &j, 1);
	}
	{
		struct coli_gpu_dense_gemv j = job(m, &b->a, b->dy, m->R);

		return coli_gpu_dense_gemv(g_gpu, b->t, &j);
	}
}

static void bench_gemv(const char *name, enum coli_dtype t, int R, int K, int T, double bw)
{
	static struct bench_gemv b;
	size_t bytes = coli_dtype_mat_bytes(t, R, K);
	double us[2];

	memset(&b, 0, sizeof(b));
	b.t = t;
	b.n_copies = (int)((256u << 20) / bytes);
	b.n_copies = b.n_copies < 1 ? 1 : b.n_copies > 400 ? 400 : b.n_copies;
	for (int c = 0; c < b.n_copies; c++) {
		b.m[c].t = t;
		if (c == 0) {
			mat_make(&b.m[0], t, R, K, 0.1f);
		} else {
			b.m[c] = b.m[0];
			b.m[c].dw = dev_copy(b.m[0].w, bytes);
			b.m[c].dscales =
			    b.m[0].dscales ? b.m[c].dw + (b.m[0].dscales - b.m[0].dw) : 0;
		}
	}
	act_make(&b.a, T, K);
	b.dy = dev_poison(sizeof(float) * T * R);
	for (int canon = 0; canon < 2; canon++) {
		b.canonical = canon;
		/* the grouped GEMV takes S <= COLI_GPU_MAX_S */
		us[canon] = canon && T > COLI_GPU_MAX_S ? -1 : time_us(run_gemv, &b, 200);
	}
	b.canonical = 0;
	printf("  %-10s %-5s %6d x %-5d T=%-3d %8.2f MB  dense %7.2f us %7.0f GB/s %5.2f of copy",
	       name, coli_dtype_name(t), R, K, T, bytes / 1e6, us[0], bytes / us[0] / 1e3,
	       bytes / us[0] / 1e3 / bw);
	if (T > COLI_GPU_MAX_S) /* a prefill chunk: the work, not the bytes */
		printf("  %6.1f TOPS", 2.0 * R * K * T / us[0] / 1e6);
	if (us[1] > 0)
		printf(" | canonical %7.2f us %5.2f", us[1], bytes / us[1] / 1e3 / bw);
	printf("\n");
	for (int c = 1; c < b.n_copies; c++)
		coli_gpu_free(g_gpu, b.m[c].dw);
	mat_free(&b.m[0]);
	act_free(&b.a);
	coli_gpu_free(g_gpu, b.dy);
}

/* The experts' grouped GEMV at decode (issue #6: >= 60% of the device's
 * memory bandwidth at S = 1): one launch of n jobs, as a layer's gate+up (2 x
 * top-k jobs) or down (top-k) table; each rep reads other copies of the
 * matrices, so L2 does not serve them. */
struct bench_group {
	enum coli_dtype t;
	int n_sets, n_jobs;
	int v0; /* the block types' per-lane kernel (coli_gpu_gemv_kq_v0) */
	uint64_t dw[64][16];
	struct mat_host m;
	struct act_host a;
	uint64_t dy;
};

static int run_group(void *arg, int i)
{
	struct bench_group *b = arg;
	struct coli_gpu_gemv_job j[16];
	const int set = i % b->n_sets;

	for (int k = 0; k < b->n_jobs; k++)
		j[k] = (struct coli_gpu_gemv_job){
		    .w = (const void *)DP(b->dw[set][k]),
		    .scales = b->m.dscales ? (const unsigned short *)DP(b->dw[set][k] +
		                                                        (b->m.dscales - b->m.dw))
		                           : NULL,
		    .xq = (const signed char *)DP(b->a.dq),
		    .xd = (const float *)DP(b->a.dd),
		    .xqsum = (const int *)DP(b->a.ds),
		    .xf = (const float *)DP(b->a.dx),
		    .y = (float *)DP(b->dy) + (size_t)k * b->m.R,
		    .rows = b->m.R,
		    .K = b->m.K,
		    .S = 1,
		    .ldy = b->m.R,
		};
	return b->v0 ? coli_gpu_gemv_kq_v0(g_gpu, b->t, j, b->n_jobs)
	             : coli_gpu_gemv(g_gpu, b->t, j, b->n_jobs);
}

/* One launch of n_jobs R x K matrices, S = 1, each rep another set of
 * copies; returns the fraction of copy bandwidth and prints the line
 * (without its newline), unless v0: the block types' per-lane kernel,
 * timed the same way, printed by the caller beside the staged one's. */
static double bench_group_v(const char *name, enum coli_dtype t, int n_jobs, int R, int K,
                            double bw, int v0)
{
	static struct bench_group b;
	size_t bytes = coli_dtype_mat_bytes(t, R, K);
	double us, frac;

	memset(&b, 0, sizeof(b));
	b.t = t;
	b.v0 = v0;
	b.n_jobs = n_jobs;
	b.n_sets = (int)((256u << 20) / (bytes * n_jobs));
	b.n_sets = b.n_sets < 1 ? 1 : b.n_sets > 64 ? 64 : b.n_sets;
	mat_make(&b.m, t, R, K, 0.1f);
	for (int s = 0; s < b.n_sets; s++)
		for (int k = 0; k < n_jobs; k++)
			b.dw[s][k] = dev_copy(b.m.w, bytes);
	act_make(&b.a, 1, K);
	b.dy = dev_poison(sizeof(float) * n_jobs * R);
	us = time_us(run_group, &b, 200);
	frac = bytes * n_jobs / us / 1e3 / bw;
	if (!v0)
		printf(
		    "  %-22s %-5s %2d x %5d x %-5d S=1 %7.2f MB %7.2f us %7.0f GB/s %5.2f of copy",
		    name, coli_dtype_name(t), n_jobs, R, K, bytes * n_jobs / 1e6, us,
		    bytes * n_jobs / us / 1e3, frac);
	for (int s = 0; s < b.n_sets; s++)
		for (int k = 0; k < n_jobs; k++)
			coli_gpu_free(g_gpu, b.dw[s][k]);
	mat_free(&b.m);
	act_free(&b.a);
	coli_gpu_free(g_gpu, b.dy);
	return frac;
}

static void bench_group(const char *name, enum coli_dtype t, int n_jobs, int R, int K, double bw)
{
	bench_group_v(name, t, n_jobs, R, K, bw, 0);
	printf("\n");
}

/* A block type's table on the staged GEMV (coli_gpu_gemv), then on the
 * per-lane one it replaced, on one line: "... of copy | v0 ...". A failed
 * launch shows as a negative fraction (time_us's -1). */
static void bench_group_ab(const char *name, enum coli_dtype t, int n_jobs, int R, int K, double bw)
{
	bench_group_v(name, t, n_jobs, R, K, bw, 0);
	printf(" | v0 %5.2f\n", bench_group_v(name, t, n_jobs, R, K, bw, 1));
}

/* The experts' GEMM of prefill (ptx/expert/gemm.cu, ptx/expert/kquant_gemm.cu): one
 * launch of n jobs of R x K times S tokens each, as a layer's gate+up table
 * with S tokens an expert; its int8 TOPS (2 R K S n a launch) against the
 * H200's dense int8 tensor peak (the datasheet's 1979 TOPS). Each rep reads
 * another set of copies of the matrices. */
#define H200_INT8_TOPS 1979.0

struct bench_gemm {
	enum coli_dtype t;
	int n_sets, n_jobs;
	uint64_t dw[16][16];
	struct mat_host m;
	struct act_host a;
	uint64_t dy;
};

static int run_gemm(void *arg, int i)
{
	struct bench_gemm *b = arg;
	struct coli_gpu_gemm_job j[16];
	const int set = i % b->n_sets;

	for (int k = 0; k < b->n_jobs; k++)
		j[k] = (struct coli_gpu_gemm_job){
		    .w = (const void *)DP(b->dw[set][k]),
		    .scales = b->m.dscales ? (const unsigned short *)DP(b->dw[set][k] +
		                                                        (b->m.dscales - b->m.dw))
		                           : NULL,
		    .xq = (const signed char *)DP(b->a.dq),
		    .xd = (const float *)DP(b->a.dd),
		    .xqsum = (const int *)DP(b->a.ds),
		    .xf = (const float *)DP(b->a.dx),
		    .y = (float *)DP(b->dy) + (size_t)k * b->m.R * b->a.T,
		    .rows = b->m.R,
		    .K = b->m.K,
		    .S = b->a.T,
		    .ldy = b->m.R,
		};
	return coli_gpu_gemm(g_gpu, b->t, j, b->n_jobs);
}

static void bench_gemm(const char *name, enum coli_dtype t, int n_jobs, int R, int K, int S)
{
	static struct bench_gemm b;
	size_t bytes = coli_dtype_mat_bytes(t, R, K);
	double us, tops;

	memset(&b, 0, sizeof(b));
	b.t = t;
	b.n_jobs = n_jobs;
	b.n_sets = (int)((256u << 20) / (bytes * n_jobs));
	b.n_sets = b.n_sets < 1 ? 1 : b.n_sets > 16 ? 16 : b.n_sets;
	mat_make(&b.m, t, R, K, 0.1f);
	for (int s = 0; s < b.n_sets; s++)
		for (int k = 0; k < n_jobs; k++)
			b.dw[s][k] = dev_copy(b.m.w, bytes);
	act_make(&b.a, S, K);
	b.dy = dev_poison(sizeof(float) * n_jobs * R * S);
	us = time_us(run_gemm, &b, 50);
	tops = 2.0 * R * K * S * n_jobs / us / 1e6;
	printf("  %-22s %-5s %2d x %5d x %-5d S=%-3d %8.1f us %7.1f TOPS %5.3f of int8 peak\n",
	       name, coli_dtype_name(t), n_jobs, R, K, S, us, tops, tops / H200_INT8_TOPS);
	for (int s = 0; s < b.n_sets; s++)
		for (int k = 0; k < n_jobs; k++)
			coli_gpu_free(g_gpu, b.dw[s][k]);
	mat_free(&b.m);
	act_free(&b.a);
	coli_gpu_free(g_gpu, b.dy);
}

/* The router's f32 GEMV with the routing and the plan (coli_gpu_router_plan),
 * and the routing and plan alone from logits (coli_gpu_moe_plan), at
 * qwen3-30b-a3b's router (128 x 2048, top-8), one token, chained launches. */
struct bench_route {
	struct coli_gpu_dense_gemv r;
	struct coli_gpu_moe_plan a;
};

static int run_route(void *arg, int i)
{
	struct bench_route *b = arg;

	return i < 0 ? coli_gpu_moe_plan(g_gpu, &b->a) : coli_gpu_router_plan(g_gpu, &b->r, &b->a);
}

static int run_route_only(void *arg, int i)
{
	return run_route(arg, -1 - i);
}

static void bench_router(void)
{
	enum { E = 128, K = 8, H = 2048, I = 768 };
	float *w = xmalloc(4 * (size_t)E * H), x[H];
	unsigned long long slabs[E];
	struct bench_route b = {0};
	uint64_t d[9];

	for (size_t i = 0; i < (size_t)E * H; i++)
		w[i] = frand() * 0.05f;
	for (int i = 0; i < H; i++)
		x[i] = frand();
	for (int e = 0; e < E; e++) /* a quarter "resident" */
		slabs[e] = e % 4 ? 0 : 0x100000ull * (e + 1);
	d[0] = dev_copy(w, 4 * (size_t)E * H), d[1] = dev_copy(x, sizeof(x));
	d[2] = dev_copy(slabs, sizeof(slabs)), d[3] = dev_poison(4 * E);
	d[4] = dev_poison(4 * K), d[5] = dev_poison(4 * K);
	d[6] = dev_poison(sizeof(struct coli_gpu_gemv_job) * 3 * K);
	d[7] = dev_poison(4 * K), d[8] = dev_poison(4 * K);
	b.r.w = (const void *)DP(d[0]), b.r.xf = (const float *)DP(d[1]);
	b.r.y = (float *)DP(d[3]), b.r.rows = E, b.r.K = H, b.r.T = 1, b.r.ldy = E;
	b.a.sel = (const int *)DP(d[4]), b.a.selw = (const float *)DP(d[5]);
	b.a.slabs = (const unsigned long long *)DP(d[2]);
	b.a.gu_jobs = (struct coli_gpu_gemv_job *)DP(d[6]);
	b.a.down_jobs = b.a.gu_jobs + 2 * K;
	b.a.pair_token = (int *)DP(d[7]), b.a.pair_w = (float *)DP(d[8]);
	b.a.T = 1, b.a.K = K, b.a.H = H, b.a.I = I;
	b.a.rlog = (const float *)DP(d[3]), b.a.E = E, b.a.norm = 1;
	printf("  router GEMV + route + plan 128 x 2048 top-8 %7.2f us\n",
	       time_us(run_route, &b, 500));
	printf("  route + plan from logits, 128 top-8       %7.2f us\n",
	       time_us(run_route_only, &b, 500));
	for (int k = 0; k < 9; k++)
		coli_gpu_free(g_gpu, d[k]);
	free(w);
}

static int run_plan(void *arg, int i)
{
	(void)i;
	return coli_gpu_moe_plan(g_gpu, arg);
}

/* A step of T tokens as the engine plans it (grouped: the int8 rows of H
 * gathered into pair order), and the same without its parts: the routing
 * (sel given), the gather (gq NULL), to see where the launch's time goes. */
static void bench_route_plan(int T)
{
	enum { E = 128, K = 8, H = 2048, I = 768 };
	const int P = T * K;
	float *lg = xmalloc(4 * (size_t)T * E);
	signed char *xq = xmalloc((size_t)T * H);
	unsigned long long slabs[E];
	struct coli_gpu_moe_plan a = {0};
	uint64_t d[14];

	for (int i = 0; i < T * E; i++)
		lg[i] = frand() * 4.0f;
	for (int i = 0; i < T * H; i++)
		xq[i] = (signed char)(rand() % 255 - 127);
	for (int e = 0; e < E; e++)
		slabs[e] = 0x100000ull * (e + 1);
	d[0] = dev_copy(lg, 4 * (size_t)T * E), d[1] = dev_copy(slabs, sizeof(slabs));
	d[2] = dev_poison(4 * (size_t)P), d[3] = dev_poison(4 * (size_t)P);
	d[4] = dev_poison(sizeof(struct coli_gpu_gemv_job) * 3 * P);
	d[5] = dev_poison(4 * (size_t)P), d[6] = dev_poison(4 * (size_t)P);
	d[7] = dev_copy(xq, (size_t)T * H), d[8] = dev_poison(4 * (size_t)T * H / 32);
	d[9] = dev_poison(4 * (size_t)T * H / 32), d[10] = dev_poison((size_t)P * H);
	d[11] = dev_poison(4 * (size_t)P * H / 32), d[12] = dev_poison(4 * (size_t)P * H / 32);
	d[13] = dev_poison(4 * (size_t)P * H);
	a.sel = (const int *)DP(d[2]), a.selw = (const float *)DP(d[3]);
	a.slabs = (const unsigned long long *)DP(d[1]);
	a.gu_jobs = (struct coli_gpu_gemv_job *)DP(d[4]);
	a.down_jobs = a.gu_jobs + 2 * P;
	a.pair_token = (int *)DP(d[5]), a.pair_w = (float *)DP(d[6]);
	a.xq = (const signed char *)DP(d[7]), a.xd = (const float *)DP(d[8]);
	a.xqsum = (const int *)DP(d[9]);
	a.gq = (signed char *)DP(d[10]), a.gd = (float *)DP(d[11]), a.gqs = (int *)DP(d[12]);
	a.h = a.g = a.u = a.y = (float *)DP(d[13]);
	a.scale_gu = a.scale_d = 64, a.xquant = 1; /* quantized: the int8 gather */
	a.T = T, a.K = K, a.H = H, a.I = I, a.E = E, a.norm = 1;
	a.rlog = (const float *)DP(d[0]);
	printf("  route + plan T=%-2d grouped, H %d gathered  %7.2f us\n", T, H,
	       time_us(run_plan, &a, 500));
	a.gq = NULL;
	printf("  route + plan T=%-2d, no gather             %7.2f us\n", T,
	       time_us(run_plan, &a, 500));
	a.gq = (signed char *)DP(d[10]), a.rlog = NULL; /* the routing above stays in sel */
	printf("  plan T=%-2d grouped (routing given)         %7.2f us\n", T,
	       time_us(run_plan, &a, 500));
	a.gq = NULL;
	printf("  plan T=%-2d (routing given), no gather      %7.2f us\n", T,
	       time_us(run_plan, &a, 500));
	for (int k = 0; k < 14; k++)
		coli_gpu_free(g_gpu, d[k]);
	free(lg), free(xq);
}

struct bench_op {
	int kind; /* 0 rmsnorm, 1 attention, 2 moe_acc, 3 add, 4 rope */
	int a, b, c;
	uint64_t p[6];
};

static int run_op(void *arg, int i)
{
	struct bench_op *o = arg;

	switch (o->kind) {
	case 0:
		return coli_gpu_rmsnorm(g_gpu, o->p[0], o->p[1], o->p[2], o->a, o->b, 1e-6f);
	case 1: /* o->b: 0, position as an argument; else read from p[4], grid for span b */
		return coli_gpu_attention(g_gpu, o->p[0], o->p[1], o->p[2], o->p[3], 1, o->a - 1,
		                          o->b ? o->p[4] : 0, o->b, 32, 4, 128, 0.088f, 0, 0, 0);
	case 2:
		return coli_gpu_moe_accumulate(g_gpu, o->p[0], o->p[1], o->p[2], o->p[3], 8, 1,
		                               2048, 0, 0);
	case 3:
		return coli_gpu_add(g_gpu, o->p[0], o->p[1], o->a);
	default:
		return coli_gpu_rope(g_gpu, o->p[0], 1, 32, 128, 1000, o->p[1]);
	}
}

struct bench_akv {
	uint64_t q, K, V, out;
	int n, t;
};

static int run_attn_kv(void *arg, int i)
{
	struct bench_akv *a = arg;

	(void)i;
	return coli_gpu_attention_kv(g_gpu, a->q, a->K, a->V, a->out, 1, a->n - 1, 0, 0, 32, 4, 128,
	                             0.088f, 0, 0, 0, a->t, a->t, 0, 0, 0, 0, 0);
}

/* A decode step's attention over a bf16 and a q8 cache (qwen3-30b's 32/4 x
 * 128) at 1k to 128k positions: the cache's bytes a launch reads against the
 * copy's bandwidth (#41 asks 60% at long contexts; up to ~16k the cache stays
 * in L2 between launches). The lengths between say how a launch's time splits
 * into a fixed part and one a chunk. The rows repeat a block of 1,024 random
 * ones. */
static void bench_attn_kv(double bw)
{
	enum { NV = 4 * 128, BLK = 1024, NMAX = 131072 };
	static const int ns[] = {1024, 4096, 8192, 16384, 32768, 65536, 131072};
	float *x = xmalloc(4 * (size_t)BLK * NV), q[32 * 128];

	for (size_t i = 0; i < (size_t)BLK * NV; i++)
		x[i] = frand();
	for (int i = 0; i < 32 * 128; i++)
		q[i] = frand();
	for (int t = 1; t <= 2; t++) {
		const size_t rb = coli_kv_row_bytes(t, NV, NV / 128);
		char *rows = xmalloc(rb * BLK);
		struct bench_akv a = {dev_copy(q, sizeof(q)), dev_poison(rb * NMAX),
		                       dev_poison(rb * NMAX), dev_poison(sizeof(q)), 0, t};

		for (int r = 0; r < BLK; r++)
			coli_kv_row_store(t, rows + rb * r, x + (size_t)r * NV, NV, 128);
		for (int r = 0; r < NMAX; r += BLK) {
			coli_gpu_upload(g_gpu, a.K + rb * r, rows, rb * BLK);
			coli_gpu_upload(g_gpu, a.V + rb * r, rows, rb * BLK);
		}
		for (int k = 0; k < (int)(sizeof(ns) / sizeof(ns[0])); k++) {
			double us, mb = 2.0 * ns[k] * rb / 1e6;

			a.n = ns[k];
			us = time_us(run_attn_kv, &a, ns[k] > 32768 ? 20 : 100);
			printf("  attention decode 32/4 x 128 %-4s at %6d positions %8.2f us  K+V %6.1f MB "
			       "%6.0f GB/s %5.2f of copy\n",
			       t == 1 ? "bf16" : "q8", ns[k], us, mb, mb / us * 1e3, mb / us * 1e3 / bw);
		}
		coli_gpu_free(g_gpu, a.q), coli_gpu_free(g_gpu, a.K), coli_gpu_free(g_gpu, a.V);
		coli_gpu_free(g_gpu, a.out);
		free(rows);
	}
	free(x);
}

static void bench_ops(double bw)
{
	struct bench_op o;
	float *buf = xmalloc(4 * (size_t)40000 * 512);
	double us;

	for (size_t i = 0; i < (size_t)40000 * 512; i++)
		buf[i] = frand();
	for (int k = 0; k < 5; k++)
		o.p[k] = dev_copy(buf, 4 * (size_t)40000 * 512);
	o.kind = 0;
	o.a = 1, o.b = 2048;
	printf("  rmsnorm 1 x 2048          %7.2f us\n", time_us(run_op, &o, 500));
	o.a = 32, o.b = 128;
	printf("  rmsnorm 32 x 128 (q norm) %7.2f us\n", time_us(run_op, &o, 500));
	o.kind = 2;
	{
		int tok[8] = {0};
		float w[8] = {0.1f, 0.2f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.2f};

		coli_gpu_upload(g_gpu, o.p[2], tok, sizeof(tok));
		coli_gpu_upload(g_gpu, o.p[3], w, sizeof(w));
	}
	printf("  moe_accumulate 8 pairs x 2048 %7.2f us\n", time_us(run_op, &o, 500));
	o.kind = 3;
	o.a = 2048;
	printf("  add 2048                  %7.2f us\n", time_us(run_op, &o, 500));
	o.kind = 4;
	printf("  rope 32 x 128             %7.2f us\n", time_us(run_op, &o, 500));
	bench_router();
	o.kind = 1;
	for (int k = 0; k < 7; k++) {
		/* the last two as the engine runs them: position in device memory,
		 * the grid for a 4096 context (decode graphs) */
		static const int ns[] = {100, 1000, 5000, 12289, 40000, 100, 1000};
		int n = ns[k], pos = n - 1;

		o.a = n;
		o.b = k < 5 ? 0 : 4096;
		coli_gpu_upload(g_gpu, o.p[4], &pos, sizeof(pos));
		us = time_us(run_op, &o, 100);
		printf("  attention decode 32/4 x 128 at %5d positions%s %8.2f us  K+V %6.1f MB "
		       "%6.0f GB/s %5.2f of copy\n",
		       n, o.b ? ", ctx 4096" : "          ", us, 2.0 * n * 512 * 4 / 1e6,
		       2.0 * n * 512 * 4 / us / 1e3, 2.0 * n * 512 * 4 / us / 1e3 / bw);
	}
	for (int k = 0; k < 5; k++)
		coli_gpu_free(g_gpu, o.p[k]);
	free(buf);
	bench_attn_kv(bw);
}

static double copy_bw(void)
{
	size_t n = (size_t)1 << 30;
	uint64_t a = dev_poison(n), b = dev_poison(n);
	float ms = 0;

	coli_gpu_copy(g_gpu, b, a, n);
	coli_gpu_mark(g_gpu, 0);
	for (int i = 0; i < 10; i++)
		coli_gpu_copy(g_gpu, b, a, n);
	coli_gpu_mark(g_gpu, 1);
	coli_gpu_elapsed_ms(g_gpu, 0, 1, &ms);
	coli_gpu_free(g_gpu, a), coli_gpu_free(g_gpu, b);
	return 2.0 * n * 10 / (ms * 1e-3) / 1e9; /* read + write */
}

struct bench_attn {
	int T, pos0, nh, nkv, hd, kt; /* kt: the cache's type, 0 f32 or 1 bf16 (K and V) */
	uint64_t q, k, v, o, pos;
};

static int run_attn(void *arg, int i)
{
	struct bench_attn *a = arg;

	(void)i;
	return coli_gpu_attention_kv(g_gpu, a->q, a->k, a->v, a->o, a->T, a->pos0, a->pos, 4096,
	                             a->nh, a->nkv, a->hd, 0.088f, 0, 0, 0, a->kt, a->kt, 0, 0, 0, 0,
	                             0);
}

/* A prompt's attention (positions from device memory, the grid of a 4096
 * context, as the engine runs it), flops = 4 * hd * nh * (the causal
 * pairs): an f32 cache on coli_attn_chunks (a query a CTA) against
 * coli_attn_prefill; a bf16 cache (qwen3-30b's and qwen3-235b's heads) on
 * coli_attn_tc a query a CTA, coli_attn_tc's tiles of columns and
 * coli_attn_tcp's of rows (coli_gpu_attn_prefill's three levels). */
static void bench_attn_prefill(void)
{
	static const int cs[][6] = {
	    {256, 0, 32, 4, 128, 0},     {1024, 0, 32, 4, 128, 0},  {2048, 0, 32, 4, 128, 0},
	    {512, 2048, 32, 4, 128, 0},  {256, 0, 16, 4, 64, 0},    {1024, 0, 16, 4, 64, 0},
	    {16, 0, 32, 4, 128, 0},      {32, 0, 32, 4, 128, 0},    {64, 0, 32, 4, 128, 0},
	    {128, 0, 32, 4, 128, 0},     {16, 3000, 32, 4, 128, 0}, {64, 3000, 32, 4, 128, 0},
	    {128, 3000, 32, 4, 128, 0},  {256, 3800, 32, 4, 128, 0}, {512, 0, 32, 4, 128, 1},
	    {2048, 0, 32, 4, 128, 1},    {4096, 0, 32, 4, 128, 1},  {512, 2048, 32, 4, 128, 1},
	    {2048, 0, 64, 4, 128, 1},    {1024, 0, 16, 4, 64, 1},   {2048, 0, 64, 8, 64, 1}};
	struct bench_attn a;
	const size_t nq = (size_t)4096 * 8192, nkv = (size_t)4096 * 1024;
	float *buf = xmalloc(4 * nq);
	uint16_t *bf = xmalloc(2 * nkv);

	for (size_t i = 0; i < nq; i++)
		buf[i] = frand();
	for (size_t i = 0; i < nkv; i++)
		bf[i] = coli_f32_to_bf16(buf[i]);
	a.q = dev_copy(buf, 4 * nq);
	a.o = dev_poison(4 * nq);
	a.pos = dev_poison(4);
	for (int kt = 1; kt >= 0; kt--) { /* bf16 first */
		a.k = kt ? dev_copy(bf, 2 * nkv) : dev_copy(buf, 4 * nkv);
		a.v = kt ? dev_copy(bf + 7, 2 * (nkv - 7)) : dev_copy(buf + 7, 4 * (nkv - 7));
		for (size_t c = 0; c < sizeof(cs) / sizeof(cs[0]); c++) {
			double us[3], pairs;
			/* an f32 cache: coli_attn_prefill at either level above OFF */
			static const int level[2][3] = {
			    {COLI_GPU_PREFILL_OFF, COLI_GPU_PREFILL_ROWS},
			    {COLI_GPU_PREFILL_OFF, COLI_GPU_PREFILL_COLS, COLI_GPU_PREFILL_ROWS}};
			const int levels = kt ? 3 : 2;

			if (cs[c][5] != kt)
				continue;
			a.T = cs[c][0], a.pos0 = cs[c][1], a.nh = cs[c][2], a.nkv = cs[c][3];
			a.hd = cs[c][4], a.kt = kt;
			pairs = (double)a.T * a.pos0 + (double)a.T * (a.T + 1) / 2;
			coli_gpu_upload(g_gpu, a.pos, &a.pos0, 4);
			for (int lv = 0; lv < levels; lv++) {
				coli_gpu_attn_prefill(g_gpu, level[kt][lv]);
				us[lv] = time_us(run_attn, &a, 10);
			}
			coli_gpu_attn_prefill(g_gpu, COLI_GPU_PREFILL_ROWS);
			if (!kt)
				printf("  attention prefill f32 T=%4d at %4d, %d/%d x %3d: chunks %8.1f "
				       "us, prefill %8.1f us (%.2fx, %.1f TFLOPS)\n",
				       a.T, a.pos0, a.nh, a.nkv, a.hd, us[0], us[1], us[0] / us[1],
				       4.0 * a.hd * a.nh * pairs / us[1] / 1e6);
			else
				printf("  attention prefill bf16 T=%4d at %4d, %d/%d x %3d: a query a "
				       "CTA %8.1f us, columns %8.1f us (%.1f TFLOPS), rows %8.1f us "
				       "(%.1f TFLOPS, %.2fx columns)\n",
				       a.T, a.pos0, a.nh, a.nkv, a.hd, us[0], us[1],
				       4.0 * a.hd * a.nh * pairs / us[1] / 1e6, us[2],
				       4.0 * a.hd * a.nh * pairs / us[2] / 1e6, us[1] / us[2]);
		}
		coli_gpu_free(g_gpu, a.k), coli_gpu_free(g_gpu, a.v);
	}
	coli_gpu_free(g_gpu, a.q), coli_gpu_free(g_gpu, a.o), coli_gpu_free(g_gpu, a.pos);
	free(buf), free(bf);
}

/* A prefill chunk's dense matrices (T tokens): from COLI_GPU_DENSE_GEMM_MIN_T
 * tokens the quantized ones run on the tensor-core GEMM; then attention. */
static void bench_prefill(double bw)
{
	static const int Ts[] = {8, 16, 32, 48, 64, 256};
	const enum coli_dtype dts[] = {COLI_DTYPE_Q4_0, COLI_DTYPE_Q8_0, COLI_DTYPE_BF16};

	bench_attn_prefill();

	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
		for (size_t k = 0; k < sizeof(Ts) / sizeof(Ts[0]); k++) {
			bench_gemv("qkv", dts[d], 5120, 2048, Ts[k], bw);
			bench_gemv("o", dts[d], 2048, 4096, Ts[k], bw);
		}
	/* a prefill chunk's routers (qwen3-30b's, deepseek-v3's): the joined
	 * GEMV against the tiled GEMM, the same bits */
	for (int T = 512; T <= 2048; T *= 4)
		for (int tiled = 0; tiled < 2; tiled++) {
			coli_gpu_dense_tiled(g_gpu,
			                     tiled ? COLI_GPU_DGEMM_ALWAYS : COLI_GPU_DGEMM_OFF);
			bench_gemv(tiled ? "router, tiled" : "router, joined", COLI_DTYPE_F32, 128,
			           2048, T, bw);
			bench_gemv(tiled ? "v3 router, tiled" : "v3 router, joined", COLI_DTYPE_F32,
			           256, 7168, T, bw);
		}
	coli_gpu_dense_tiled(g_gpu, COLI_GPU_DGEMM_AUTO);
	/* a decode step of 1 to 16 sequences: qwen3's lm_head, q/k/v and o,
	 * the dense GEMV against the tensor-core GEMM */
	for (size_t d = 0; d < 2; d++)
		for (int T = 1; T <= COLI_GPU_STEP_T; T *= 2) {
			bench_gemv("lm_head", dts[d], 151936, 2048, T, bw);
			bench_gemm("lm_head gemm", dts[d], 1, 151936, 2048, T);
			bench_gemv("qkv", dts[d], 5120, 2048, T, bw);
			bench_gemm("qkv gemm", dts[d], 1, 5120, 2048, T);
			bench_gemv("o", dts[d], 2048, 4096, T, bw);
			bench_gemm("o gemm", dts[d], 1, 2048, 4096, T);
		}
}

/* GGUF's block types (ptx/expert/kquant.cu, experts only so far) at qwen3-235b's
 * expert shape: the staged GEMV's fraction of copy, then after "| v0" the
 * per-lane kernel's of 2026-12-02 in the same run (issue #38's target:
 * 0.60 and up for every type) */
static int bench_kquant(double bw)
{
	for (int t = COLI_DTYPE_Q4_1; t <= COLI_DTYPE_Q6_K; t++) {
		bench_group_ab("235b gate+up, top-8", (enum coli_dtype)t, 16, 1536, 4096, bw);
		bench_group_ab("235b down, top-8", (enum coli_dtype)t, 8, 4096, 1536, bw);
	}
	/* prefill: the same gate+up table on the GEMM, 16 and 128 tokens an
	 * expert, the block types beside q4_0 / q8_0 */
	for (int S = 16; S <= 128; S *= 8) {
		bench_gemm("235b gate+up GEMM", COLI_DTYPE_Q4_0, 16, 1536, 4096, S);
		bench_gemm("235b gate+up GEMM", COLI_DTYPE_Q8_0, 16, 1536, 4096, S);
		for (int t = COLI_DTYPE_Q4_1; t <= COLI_DTYPE_Q6_K; t++)
			bench_gemm("235b gate+up GEMM", (enum coli_dtype)t, 16, 1536, 4096, S);
	}
	return 0;
}

static int bench(int ops_only)
{
	double bw = copy_bw();
	static const struct {
		const char *name;
		int R, K;
	} m[] = {
	    {"q", 4096, 2048}, {"k/v", 512, 2048}, {"o", 2048, 4096}, {"lm_head", 151936, 2048}};
	const enum coli_dtype dts[] = {COLI_DTYPE_Q4_0, COLI_DTYPE_Q8_0, COLI_DTYPE_BF16};

	printf("device-to-device copy: %.0f GB/s (read + write, 1 GiB x 10)\n", bw);
	if (ops_only == 3) { /* the block types beside q4_0 / q8_0 at the 235b shape */
		for (size_t d = 0; d < 2; d++) {
			bench_group("235b gate+up, top-8", dts[d], 16, 1536, 4096, bw);
			bench_group("235b down, top-8", dts[d], 8, 4096, 1536, bw);
		}
		return bench_kquant(bw);
	}
	if (ops_only == 1) {
		bench_ops(bw);
		return 0;
	}
	if (ops_only == 2) {
		bench_prefill(bw);
		return 0;
	}
	if (ops_only == 4) { /* a step of T sequences: the dense q4_0 GEMVs, the plan */
		for (size_t k = 0; k < 3; k++)
			for (int T = 1; T <= 16; T *= 2)
				bench_gemv(m[k].name, COLI_DTYPE_Q4_0, m[k].R, m[k].K, T, bw);
		for (int T = 1; T <= 16; T *= 2)
			bench_route_plan(T);
		return 0;
	}
	/* qwen3-30b-a3b's experts (768 x 2048), top-8: gate+up, then down; the
	 * same tables at qwen3-235b-a22b's shape (1536 x 4096) */
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
		bench_group("experts gate+up, top-8", dts[d], 16, 768, 2048, bw);
		bench_group("experts down, top-8", dts[d], 8, 2048, 768, bw);
	}
	for (size_t d = 0; d < 2; d++) {
		bench_group("235b gate+up, top-8", dts[d], 16, 1536, 4096, bw);
		bench_group("235b down, top-8", dts[d], 8, 4096, 1536, bw);
	}
	bench_kquant(bw);
	bench_gemv("router", COLI_DTYPE_F32, 128, 2048, 1, bw);
	bench_gemv("router", COLI_DTYPE_F32, 128, 2048, 4, bw);
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
		for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++)
			for (int T = 1; T <= 4; T += 3)
				bench_gemv(m[k].name, dts[d], m[k].R, m[k].K, T, bw);
	bench_ops(bw);
	return 0;
}

static int gemv_f32(void)
{
	return test_dense_gemv(COLI_DTYPE_F32);
}
static int gemv_bf16(void)
{
	return test_dense_gemv(COLI_DTYPE_BF16);
}
static int gemv_q8_0(void)
{
	return test_dense_gemv(COLI_DTYPE_Q8_0);
}
static int gemv_q4_0(void)
{
	return test_dense_gemv(COLI_DTYPE_Q4_0);
}

int main(int argc, char **argv)
{
	int rc = ptx_test_open();

	if (rc)
		return rc;
	if (argc > 1 && !strcmp(argv[1], "--bench")) {
		/* ATTN_WAYS=N: a decode step's fold shared by N CTAs at most (1:
		 * the last alone), to time them against each other */
		if (getenv("ATTN_WAYS"))
			coli_gpu_attn_ways(g_gpu, atoi(getenv("ATTN_WAYS")));
		rc = bench(argc < 3                      ? 0
		           : !strcmp(argv[2], "ops")     ? 1
		           : !strcmp(argv[2], "prefill") ? 2
		           : !strcmp(argv[2], "kquant")  ? 3
		           : !strcmp(argv[2], "step")    ? 4
		                                         : 0);
		coli_gpu_close(g_gpu);
		return rc;
	}
	{ /* every group, or the one named: `dense_kernels attention` */
		static const struct {
			const char *name;
			int (*run)(void);
		} groups[] = {
		    {"gemv_f32", gemv_f32},
		    {"gemv_bf16", gemv_bf16},
		    {"gemv_q8_0", gemv_q8_0},
		    {"gemv_q4_0", gemv_q4_0},
		    {"rmsnorm", test_rmsnorm},
		    {"rope", test_rope},
		    {"add_rmsnorm", test_add_rmsnorm},
		    {"qk_rope_store", test_qk_rope_store},
		    {"moe_acc", test_moe_acc},
		    {"gather", test_gather},
		    {"download_many", test_download_many},
		    {"route", test_route},
		    {"moe_plan", test_moe_plan},
		    {"route_plan", test_route_plan},
		    {"router_plan", test_router_plan},
		    {"attention", test_attention},
		    {"argmax", test_argmax},
		};
		int ran = 0;

		for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
			if (argc < 2 || !strcmp(argv[1], groups[i].name))
				rc |= groups[i].run(), ran++;
		if (!ran) {
			fprintf(stderr, "dense_kernels: no test group %s\n", argv[1]);
			rc = 2;
		}
	}
	coli_gpu_close(g_gpu);
	return rc;
}
