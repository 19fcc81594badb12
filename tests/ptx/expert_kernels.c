/*
 * tests/ptx/expert_kernels.c — every expert kernel of ptx/ against the CPU
 * reference, bit for bit (the placement invariant).
 *
 *   act_quantize   random blocks incl. all-zero, tiny and huge values
 *   silu_mul_q     silu then quantize in one launch: h, int8, scales and sums
 *                  exact vs coli_silu_mul + coli_act_quantize
 *   silu_mul       g over [-120, 120] plus edge values, exact bits of coli_silu_mul
 *   swiglu_oai     gpt-oss's biased, clamped SwiGLU (and quantized): exact vs
 *                  the bias adds, coli_swiglu_oai and coli_act_quantize; also
 *                  with a bias row per row (a device-planned layer's pairs)
 *   pair_bias      gpt-oss's down bias, a row of [E][H] per output row: exact
 *   gemv           q8_0 / q4_0 / bf16, several shapes and S = 1..4 in one grouped
 *                  launch (K from 32 to 2048: fewer and more than 16 units a lane);
 *                  GGUF's block types (ptx/expert/kquant.cu) on random blocks: K-quants
 *                  K whole 256-blocks up to 4096 (odd block counts: a half step);
 *                  Q4_1 / Q5_x also K not a multiple of 512 (a partial step of
 *                  16 blocks) and rows of 2-byte aligned starts
 *   expert         gate, up -> silu -> quantize -> down, all on the GPU, vs CPU
 *   dense_kq       the block types through the dense part's GEMV (stacked q/k/v
 *                  ranges, 9 tokens: GEMV jobs; 40: the tensor-core GEMM; also
 *                  ranges of odd row counts, so a range starts mid-chunk) and
 *                  its embedding lookup, exact
 *
 * Outputs are poisoned (0xff bytes = NaN) before each run, inputs are fresh
 * random draws, max |error| and the mismatch count are printed. Skips (77)
 * without a usable GPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PTX_TEST_SEED 0x9e3779b97f4a7c15ULL
#include "ptx_test.h"

static int compare(const char *what, const float *got, const float *want, size_t n)
{
	size_t bad = 0;
	double maxe = 0;

	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - want[i]);

		if (memcmp(&got[i], &want[i], 4))
			bad++;
		if (e > maxe || e != e)
			maxe = e != e ? INFINITY : e;
	}
	printf("  %-34s %8zu values  max|err| %.3g  mismatches %zu\n", what, n, maxe, bad);
	return bad != 0;
}

static int test_act_quantize(void)
{
	const int nb = 1000, n = nb * 32;
	float *x = malloc(sizeof(float) * n), *d = malloc(sizeof(float) * nb), *gd;
	int8_t *q = malloc(n), *gq = malloc(n);
	int32_t *qs = malloc(4 * nb), *gqs = malloc(4 * nb);
	struct coli_act a = {.q = q, .d = d, .qsum = qs};
	uint64_t dx, dq, dd, dqs;
	int rc = 0;

	for (int i = 0; i < n; i++) {
		float scale = (i / 32) % 7 == 0 ? 1e-30f : (i / 32) % 5 == 0 ? 1e6f : 3.0f;

		x[i] = (i / 32) % 11 == 0 ? 0.0f : frand() * scale;
	}
	coli_act_quantize(&a, x, n);
	dx = dev_copy(x, sizeof(float) * n);
	dq = dev_poison(n);
	dd = dev_poison(sizeof(float) * nb);
	dqs = dev_poison(4 * nb);
	gd = malloc(sizeof(float) * nb);
	if (coli_gpu_act_quantize(g_gpu, dx, dq, dd, dqs, nb) ||
	    coli_gpu_download(g_gpu, gq, dq, n) || coli_gpu_download(g_gpu, gd, dd, 4 * nb) ||
	    coli_gpu_download(g_gpu, gqs, dqs, 4 * nb))
		return 1;
	rc |= compare("act_quantize scales", gd, d, nb);
	if (memcmp(gq, q, n) || memcmp(gqs, qs, 4 * nb)) {
		printf("  act_quantize: int8 values or block sums differ\n");
		rc = 1;
	}
	coli_gpu_free(g_gpu, dx), coli_gpu_free(g_gpu, dq), coli_gpu_free(g_gpu, dd);
	coli_gpu_free(g_gpu, dqs);
	free(x), free(d), free(gd), free(q), free(gq), free(qs), free(gqs);
	return rc;
}

static int test_silu_q(void)
{
	const int nb = 4096, n = nb * 32;
	float *g = malloc(4 * n), *u = malloc(4 * n), *h = malloc(4 * n), *gh = malloc(4 * n);
	float *d = malloc(4 * nb), *gd = malloc(4 * nb);
	int8_t *q = malloc(n), *gq = malloc(n);
	int32_t *qs = malloc(4 * nb), *gqs = malloc(4 * nb);
	struct coli_act a = {.q = q, .d = d, .qsum = qs};
	uint64_t dg, du, dh, dq, dd, dqs;
	int rc = 0;

	for (int i = 0; i < n; i++) {
		g[i] = (i / 32) % 9 == 0 ? 0.0f : frand() * ((i / 32) % 4 ? 8.0f : 120.0f);
		u[i] = frand() * ((i / 32) % 5 ? 4.0f : 1e-30f);
	}
	coli_silu_mul(g, u, h, n);
	coli_act_quantize(&a, h, n);
	dg = dev_copy(g, 4 * n), du = dev_copy(u, 4 * n), dh = dev_poison(4 * n);
	dq = dev_poison(n), dd = dev_poison(4 * nb), dqs = dev_poison(4 * nb);
	if (coli_gpu_silu_mul_q(g_gpu, dg, du, dh, dq, dd, dqs, nb) ||
	    coli_gpu_download(g_gpu, gh, dh, 4 * n) || coli_gpu_download(g_gpu, gq, dq, n) ||
	    coli_gpu_download(g_gpu, gd, dd, 4 * nb) || coli_gpu_download(g_gpu, gqs, dqs, 4 * nb))
		return 1;
	rc |= compare("silu_mul_q h", gh, h, n);
	rc |= compare("silu_mul_q scales", gd, d, nb);
	if (memcmp(gq, q, n) || memcmp(gqs, qs, 4 * nb)) {
		printf("  silu_mul_q: int8 values or block sums differ\n");
		rc = 1;
	}
	coli_gpu_free(g_gpu, dg), coli_gpu_free(g_gpu, du), coli_gpu_free(g_gpu, dh);
	coli_gpu_free(g_gpu, dq), coli_gpu_free(g_gpu, dd), coli_gpu_free(g_gpu, dqs);
	free(g), free(u), free(h), free(gh), free(d), free(gd), free(q), free(gq), free(qs);
	free(gqs);
	return rc;
}

/* gpt-oss's form: bias rows added to g and u in place (as core/model/act.c
 * does: g + bg, one rounding), the clamped SwiGLU, then quantized; with
 * and without the quantized output. Gates and ups well past the clamp.
 * by_row: a device-planned layer's pairs, row r biased by row idx[r] of
 * [E][I] tables (the plan's pair_expert), not row 0 of one expert's. */
static int test_swiglu_oai(int quant, int by_row)
{
	const int I = 288, rows = 37, n = I * rows, nb = n / 32, E = by_row ? 5 : 1;
	const float alpha = 1.702f, limit = 7.0f;
	float *g = malloc(4 * n), *u = malloc(4 * n), *h = malloc(4 * n), *gh = malloc(4 * n);
	float *bg = malloc(4 * E * I), *bu = malloc(4 * E * I), *gg = malloc(4 * n);
	float *gu = malloc(4 * n), *d = malloc(4 * nb), *gd = malloc(4 * nb);
	int8_t *q = malloc(n), *gq = malloc(n);
	int32_t *qs = malloc(4 * nb), *gqs = malloc(4 * nb), idx[37];
	struct coli_act a = {.q = q, .d = d, .qsum = qs};
	uint64_t dev[9];
	char what[64];
	int rc = 0;

	for (int i = 0; i < E * I; i++)
		bg[i] = frand() * 2, bu[i] = frand() * 2;
	for (int r = 0; r < rows; r++)
		idx[r] = by_row ? (int)(rnd() % E) : 0;
	for (int i = 0; i < n; i++) {
		g[i] = (i / 32) % 9 == 0 ? 0.0f : frand() * ((i / 32) % 4 ? 12.0f : 120.0f);
		u[i] = frand() * ((i / 32) % 5 ? 12.0f : 1e-30f);
	}
	dev[0] = dev_copy(g, 4 * n), dev[1] = dev_copy(u, 4 * n);
	dev[2] = dev_copy(bg, 4 * E * I), dev[3] = dev_copy(bu, 4 * E * I);
	dev[4] = dev_poison(4 * n), dev[5] = dev_poison(n);
	dev[6] = dev_poison(4 * nb), dev[7] = dev_poison(4 * nb);
	dev[8] = dev_copy(idx, sizeof(idx));
	for (int i = 0; i < n; i++) { /* the CPU's steps */
		size_t b = (size_t)idx[i / I] * I + i % I;

		g[i] = g[i] + bg[b], u[i] = u[i] + bu[b];
	}
	coli_swiglu_oai(g, u, h, n, alpha, limit);
	coli_act_quantize(&a, h, n);
	if (coli_gpu_swiglu_oai(g_gpu, &(struct coli_gpu_swiglu_oai){.g = dev[0],
	                                                             .u = dev[1],
	                                                             .bg = dev[2],
	                                                             .bu = dev[3],
	                                                             .h = dev[4],
	                                                             .q = quant ? dev[5] : 0,
	                                                             .qd = dev[6],
	                                                             .qsum = dev[7],
	                                                             .idx = by_row ? dev[8] : 0,
	                                                             .n = n,
	                                                             .I = I,
	                                                             .alpha = alpha,
	                                                             .limit = limit}) ||
	    coli_gpu_download(g_gpu, gh, dev[4], 4 * n) ||
	    coli_gpu_download(g_gpu, gg, dev[0], 4 * n) ||
	    coli_gpu_download(g_gpu, gu, dev[1], 4 * n) ||
	    coli_gpu_download(g_gpu, gq, dev[5], n) ||
	    coli_gpu_download(g_gpu, gd, dev[6], 4 * nb) ||
	    coli_gpu_download(g_gpu, gqs, dev[7], 4 * nb))
		return 1;
	snprintf(what, sizeof(what), "swiglu_oai%s%s h", quant ? "_q" : "",
	         by_row ? " (bias by row)" : "");
	rc |= compare(what, gh, h, n);
	rc |= compare("swiglu_oai biased g", gg, g, n);
	rc |= compare("swiglu_oai biased u", gu, u, n);
	if (quant) {
		rc |= compare("swiglu_oai_q scales", gd, d, nb);
		if (memcmp(gq, q, n) || memcmp(gqs, qs, 4 * nb)) {
			printf("  swiglu_oai_q: int8 values or block sums differ\n");
			rc = 1;
		}
	}
	for (int i = 0; i < 9; i++)
		coli_gpu_free(g_gpu, dev[i]);
	free(g), free(u), free(h), free(gh), free(bg), free(bu), free(gg), free(gu), free(d);
	free(gd), free(q), free(gq), free(qs), free(gqs);
	return rc;
}

/* gpt-oss's down bias on a planned layer's outputs: row r of y plus row
 * idx[r] of b [E][H], one rounding each (core/moe/block.c's y + b). */
static int test_pair_bias(void)
{
	enum { E = 7, H = 2880, ROWS = 16 };
	float *y = malloc(4 * ROWS * H), *b = malloc(4 * E * H), *got = malloc(4 * ROWS * H);
	int idx[ROWS];
	uint64_t dy, db, di;
	int rc;

	for (int i = 0; i < ROWS * H; i++)
		y[i] = frand() * ((i / 64) % 3 ? 4.0f : 1e4f);
	for (int i = 0; i < E * H; i++)
		b[i] = frand() * ((i / 32) % 5 ? 1.0f : 1e-6f);
	for (int r = 0; r < ROWS; r++)
		idx[r] = (int)(rnd() % E);
	dy = dev_copy(y, 4 * ROWS * H), db = dev_copy(b, 4 * E * H),
	di = dev_copy(idx, sizeof(idx));
	for (int i = 0; i < ROWS * H; i++) /* the CPU's step */
		y[i] = y[i] + b[(size_t)idx[i / H] * H + i % H];
	if (coli_gpu_pair_bias(g_gpu, dy, db, di, ROWS, H) ||
	    coli_gpu_download(g_gpu, got, dy, 4 * ROWS * H))
		return 1;
	rc = compare("pair_bias (down bias by row)", got, y, (size_t)ROWS * H);
	coli_gpu_free(g_gpu, dy), coli_gpu_free(g_gpu, db), coli_gpu_free(g_gpu, di);
	free(y), free(b), free(got);
	return rc;
}

static int test_silu(void)
{
	const int n = 1 << 20;
	float *gt = malloc(4 * n), *u = malloc(4 * n), *h = malloc(4 * n), *gh = malloc(4 * n);
	const float edge[] = {0.0f,  -0.0f,  1e-38f, -1e-38f, 87.0f, -87.0f, 88.69f, -88.69f,
	                      88.8f, -88.8f, 103.0f, -103.0f, 1e30f, -1e30f, 0.5f,   -0.5f};
	uint64_t dg, du, dh;
	int rc;

	for (int i = 0; i < n; i++) {
		gt[i] = i < 16 ? edge[i] : frand() * (i % 3 ? 8.0f : 120.0f);
		u[i] = frand() * 4;
	}
	coli_silu_mul(gt, u, h, n);
	dg = dev_copy(gt, 4 * n);
	du = dev_copy(u, 4 * n);
	dh = dev_poison(4 * n);
	if (coli_gpu_silu_mul(g_gpu, dg, du, dh, n) || coli_gpu_download(g_gpu, gh, dh, 4 * n))
		return 1;
	rc = compare("silu_mul", gh, h, n);
	coli_gpu_free(g_gpu, dg), coli_gpu_free(g_gpu, du), coli_gpu_free(g_gpu, dh);
	free(gt), free(u), free(h), free(gh);
	return rc;
}

/* One grouped launch over several matrices of one dtype. */
static int test_gemv(enum coli_dtype t)
{
	static const int shapes[][2] = {{17, 32},    {33, 64},   {64, 96},   {768, 2048},
	                                {2048, 768}, {100, 512}, {256, 544}, {5, 1024}};
	/* GGUF's block types: whole 256-blocks (1 to 16 units a lane) */
	static const int kshapes[][2] = {{17, 256},   {33, 512},   {64, 768},   {768, 2048},
	                                 {2048, 768}, {100, 1280}, {256, 1536}, {5, 4096}};
	/* Q4_1 / Q5_0 / Q5_1 (32-element blocks): a step of the GEMV is 16
	 * blocks, so K = 32, 96, 544, 1056: a partial step (and with 22-byte
	 * Q5_0 blocks rows starting 2 mod 4) */
	static const int kshapes32[][2] = {{17, 32},     {33, 96},    {64, 544},   {768, 2048},
	                                   {2048, 1056}, {101, 1280}, {255, 1536}, {5, 4096}};
	const int block = coli_dtype_is_block(t);
	unsigned belems = 0, bbytes = 0;
	enum { NJ = sizeof(shapes) / sizeof(shapes[0]) };
	struct coli_gpu_gemv_job jobs[NJ];
	float *want[NJ], *got[NJ];
	uint64_t dev[NJ][6];
	int rc = 0;
	char what[64];
	size_t total = 0;

	memset(jobs, 0, sizeof(jobs));
	if (block && coli_dtype_block(t, &belems, &bbytes))
		return 1;
	for (int j = 0; j < NJ; j++) {
		const int(*ks)[2] = belems == 32 ? kshapes32 : kshapes;
		int R = block ? ks[j][0] : shapes[j][0], K = block ? ks[j][1] : shapes[j][1];
		int S = 1 + j % COLI_GPU_MAX_S, nb = K / 32;
		float *wf = malloc(sizeof(float) * R * K), *x = malloc(sizeof(float) * S * K);
		void *w = malloc(coli_dtype_mat_bytes(t, R, K));
		int8_t *xq = malloc((size_t)S * K);
		float *xd = malloc(sizeof(float) * S * nb);
		int32_t *xs = malloc(4 * S * nb);
		struct coli_mat m;

		for (int i = 0; i < R * K; i++)
			wf[i] = frand() * 0.1f;
		for (int i = 0; i < S * K; i++)
			x[i] = frand() * 2.0f;
		if (block)
			random_blocks(t, w, R, K);
		else
			coli_quantize_mat(t, wf, R, K, w);
		coli_mat_view(&m, t, R, K, w);
		want[j] = malloc(sizeof(float) * S * R);
		got[j] = malloc(sizeof(float) * S * R);
		for (int s = 0; s < S; s++) {
			struct coli_act a = {
			    .q = xq + s * K, .d = xd + s * nb, .qsum = xs + s * nb};

			coli_act_quantize(&a, x + s * K, K);
			coli_gemv(&m, &a, want[j] + s * R, 0, R);
		}
		dev[j][0] = dev_copy(w, coli_dtype_mat_bytes(t, R, K));
		dev[j][1] = dev_copy(xq, (size_t)S * K);
		dev[j][2] = dev_copy(xd, sizeof(float) * S * nb);
		dev[j][3] = dev_copy(xs, 4 * S * nb);
		dev[j][4] = dev_copy(x, sizeof(float) * S * K);
		dev[j][5] = dev_poison(sizeof(float) * S * R);
		jobs[j].w = (const void *)(uintptr_t)dev[j][0];
		jobs[j].scales =
		    m.scales
		        ? (const unsigned short *)(uintptr_t)(dev[j][0] + ((const char *)m.scales -
		                                                           (const char *)w))
		        : NULL;
		jobs[j].xq = (const signed char *)(uintptr_t)dev[j][1];
		jobs[j].xd = (const float *)(uintptr_t)dev[j][2];
		jobs[j].xqsum = (const int *)(uintptr_t)dev[j][3];
		jobs[j].xf = (const float *)(uintptr_t)dev[j][4];
		jobs[j].y = (float *)(uintptr_t)dev[j][5];
		jobs[j].rows = R;
		jobs[j].K = K;
		jobs[j].S = S;
		jobs[j].ldy = R;
		free(wf), free(x), free(w), free(xq), free(xd), free(xs);
	}
	if (coli_gpu_gemv(g_gpu, t, jobs, NJ))
		return 1;
	for (int j = 0; j < NJ; j++) {
		size_t n = (size_t)jobs[j].S * jobs[j].rows;
		size_t bad_before = 0;

		if (coli_gpu_download(g_gpu, got[j], dev[j][5], sizeof(float) * n))
			return 1;
		for (size_t i = 0; i < n; i++)
			bad_before += memcmp(&got[j][i], &want[j][i], 4) != 0;
		if (bad_before) {
			snprintf(what, sizeof(what), "gemv %s %dx%d S=%d", coli_dtype_name(t),
			         jobs[j].rows, jobs[j].K, jobs[j].S);
			rc |= compare(what, got[j], want[j], n);
		}
		total += n;
		for (int k = 0; k < 6; k++)
			coli_gpu_free(g_gpu, dev[j][k]);
	}
	{
		/* one summary line over every job of the launch */
		size_t bad = 0;
		double maxe = 0;

		for (int j = 0; j < NJ; j++)
			for (int i = 0; i < jobs[j].S * jobs[j].rows; i++) {
				double e = fabs((double)got[j][i] - want[j][i]);

				bad += memcmp(&got[j][i], &want[j][i], 4) != 0;
				maxe = e > maxe || e != e ? (e != e ? INFINITY : e) : maxe;
			}
		printf("  gemv %-29s %8zu values  max|err| %.3g  mismatches %zu  (%d jobs, one "
		       "launch)\n",
		       coli_dtype_name(t), total, maxe, bad, NJ);
		rc |= bad != 0;
	}
	for (int j = 0; j < NJ; j++)
		free(want[j]), free(got[j]);
	return rc;
}

/* GGUF's block types on the dense part's entry points (ptx/dense/gpu_dense.c): a
 * stacked q/k/v-like GEMV (three ranges of rows to three outputs) over T
 * tokens (GEMV jobs of 4, or from COLI_GPU_DENSE_GEMM_MIN_T_KQ tokens the
 * tensor-core GEMM's jobs), and embedding rows, both exactly the CPU's. */
static int test_dense_kq(enum coli_dtype t, int T, int odd)
{
	const int R1 = odd ? 41 : 40, R2 = odd ? 57 : 56, R = odd ? 73 : 72;
	const int K = odd ? 1280 : 768, V = 50, ids[5] = {0, 49, 7, 7, 23};
	const size_t bytes = coli_dtype_mat_bytes(t, R, K);
	void *w = xmalloc(bytes);
	const size_t n_out = (size_t)T * R > (size_t)5 * K ? (size_t)T * R : (size_t)5 * K;
	float *x = xmalloc(sizeof(float) * T * K), *want = xmalloc(sizeof(float) * n_out);
	float *got = xmalloc(sizeof(float) * n_out);
	int8_t *xq = xmalloc((size_t)T * K);
	float *xd = xmalloc(sizeof(float) * T * (K / 32));
	int32_t *xs = xmalloc(4 * T * (K / 32));
	struct coli_mat m;
	uint64_t dw, dq, dd, ds, dy[3], dids, dx;
	char what[64];
	int rc = 0;

	random_blocks(t, w, R, K);
	coli_mat_view(&m, t, R, K, w);
	for (int i = 0; i < T * K; i++)
		x[i] = frand() * 2.0f;
	for (int s = 0; s < T; s++) {
		struct coli_act a = {
		    .q = xq + s * K, .d = xd + s * (K / 32), .qsum = xs + s * (K / 32)};

		coli_act_quantize(&a, x + s * K, K);
		coli_gemv(&m, &a, want + (size_t)s * R, 0, R);
	}
	dw = dev_copy(w, bytes), dq = dev_copy(xq, (size_t)T * K);
	dd = dev_copy(xd, sizeof(float) * T * (K / 32)), ds = dev_copy(xs, 4 * T * (K / 32));
	dy[0] = dev_poison(sizeof(float) * T * R1);
	dy[1] = dev_poison(sizeof(float) * T * (R2 - R1));
	dy[2] = dev_poison(sizeof(float) * T * (R - R2));
	{
		struct coli_gpu_dense_gemv j = {
		    .w = (const void *)(uintptr_t)dw,
		    .xq = (const signed char *)(uintptr_t)dq,
		    .xd = (const float *)(uintptr_t)dd,
		    .xqsum = (const int *)(uintptr_t)ds,
		    .y = (float *)(uintptr_t)dy[0],
		    .rows = R,
		    .K = K,
		    .T = T,
		    .ldy = R1,
		    .y2 = (float *)(uintptr_t)dy[1],
		    .y3 = (float *)(uintptr_t)dy[2],
		    .rows1 = R1,
		    .rows2 = R2,
		    .ldy2 = R2 - R1,
		    .ldy3 = R - R2,
		};
		float *part = xmalloc(sizeof(float) * T * R);

		if (coli_gpu_dense_gemv(g_gpu, t, &j))
			return 1;
		download(part, dy[0], sizeof(float) * T * R1);
		for (int s = 0; s < T; s++)
			memcpy(got + (size_t)s * R, part + (size_t)s * R1, sizeof(float) * R1);
		download(part, dy[1], sizeof(float) * T * (R2 - R1));
		for (int s = 0; s < T; s++)
			memcpy(got + (size_t)s * R + R1, part + (size_t)s * (R2 - R1),
			       sizeof(float) * (R2 - R1));
		download(part, dy[2], sizeof(float) * T * (R - R2));
		for (int s = 0; s < T; s++)
			memcpy(got + (size_t)s * R + R2, part + (size_t)s * (R - R2),
			       sizeof(float) * (R - R2));
		free(part);
	}
	snprintf(what, sizeof(what), "dense %s %s q|k|v%s T=%d",
	         T >= COLI_GPU_DENSE_GEMM_MIN_T_KQ ? "gemm" : "gemv", coli_dtype_name(t),
	         odd ? " odd" : "", T);
	rc |= compare(what, got, want, (size_t)T * R);
	/* embedding rows of a V x K table (the matrix's first V rows) */
	for (int i = 0; i < 5; i++)
		coli_mat_row_f32(&m, ids[i], want + (size_t)i * K);
	dids = dev_copy(ids, sizeof(ids));
	dx = dev_poison(sizeof(float) * 5 * K);
	if (coli_gpu_embed(g_gpu, t, dw, 0, dids, dx, 5, K))
		return 1;
	download(got, dx, sizeof(float) * 5 * K);
	snprintf(what, sizeof(what), "embed %s (%d rows of %d)", coli_dtype_name(t), 5, V);
	rc |= compare(what, got, want, (size_t)5 * K);
	coli_gpu_free(g_gpu, dw), coli_gpu_free(g_gpu, dq), coli_gpu_free(g_gpu, dd);
	coli_gpu_free(g_gpu, ds), coli_gpu_free(g_gpu, dids), coli_gpu_free(g_gpu, dx);
	for (int i = 0; i < 3; i++)
		coli_gpu_free(g_gpu, dy[i]);
	free(w), free(x), free(want), free(got), free(xq), free(xd), free(xs);
	return rc;
}

int main(void)
{
	int rc = ptx_test_open();

	if (rc)
		return rc;
	rc |= test_act_quantize();
	rc |= test_silu();
	rc |= test_silu_q();
	rc |= test_swiglu_oai(0, 0);
	rc |= test_swiglu_oai(1, 0);
	rc |= test_swiglu_oai(1, 1);
	rc |= test_pair_bias();
	rc |= test_gemv(COLI_DTYPE_Q8_0);
	rc |= test_gemv(COLI_DTYPE_Q4_0);
	rc |= test_gemv(COLI_DTYPE_BF16);
	for (int t = COLI_DTYPE_Q4_1; t <= COLI_DTYPE_Q6_K; t++)
		rc |= test_gemv((enum coli_dtype)t) | test_dense_kq((enum coli_dtype)t, 9, 0) |
		      test_dense_kq((enum coli_dtype)t, 40, 0) |
		      test_dense_kq((enum coli_dtype)t, 9, 1);
	coli_gpu_close(g_gpu);
	return rc;
}
