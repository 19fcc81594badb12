/*
 * tests/ptx/kquant_gemm.c — the tensor-core GEMM of GGUF's block types
 * (ptx/expert/kquant_gemm.cu) against the CPU, bit for bit (the placement
 * invariant at prefill):
 *
 *   runs       every block type, S in {5, 16, 17, 33, 64, 100, 300} (every
 *              tile the launcher picks, partial token tiles), three matrices
 *              a launch with rows that are no tile multiple and K from one
 *              to sixteen 256-blocks (lanes without units, lanes with many)
 *   tiles      each tile forced (coli_gpu_gemm_tile) at S = 100
 *   mixed      an expert of a GGUF mix: gate and up of one type, down of
 *              another (Q4_K / Q6_K, Q5_K / Q6_K, Q3_K / Q5_K, Q2_K / Q4_K),
 *              two launches back to back as core/moe/moe_dev.c queues them
 *
 * Weights are random blocks (every bit pattern of quants and scales, finite
 * fp16 halves), activations fresh random draws quantized by
 * coli_act_quantize; outputs are poisoned (NaN) first; each line prints max
 * |error| and the mismatch count. Skips (77) without a usable GPU.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PTX_TEST_SEED 0x6a09e667f3bcc909ULL
#include "ptx_test.h"

/* One matrix on the host and the device, with its CPU outputs for S tokens. */
struct kq_mat {
	enum coli_dtype t;
	int R, K;
	void *w;
	uint64_t dw;
};

/* S tokens' activations, quantized, on the host and the device. */
struct kq_act {
	int S, K;
	int8_t *q;
	float *d;
	int32_t *qs;
	uint64_t dq, dd, ds;
};

static void mat_init(struct kq_mat *m, enum coli_dtype t, int R, int K)
{
	size_t bytes = coli_dtype_mat_bytes(t, R, K);

	m->t = t, m->R = R, m->K = K;
	m->w = xmalloc(bytes);
	random_blocks(t, m->w, R, K);
	m->dw = dev_copy(m->w, bytes);
}

static void act_init(struct kq_act *a, int S, int K)
{
	const int nb = K / 32;
	float *x = xmalloc(sizeof(float) * S * K);

	a->S = S, a->K = K;
	a->q = xmalloc((size_t)S * K);
	a->d = xmalloc(sizeof(float) * S * nb);
	a->qs = xmalloc(4 * (size_t)S * nb);
	for (size_t i = 0; i < (size_t)S * K; i++)
		x[i] = frand() * (i % 97 == 0 ? 40.0f : 2.0f);
	for (int s = 0; s < S; s++) {
		struct coli_act c = {.q = a->q + (size_t)s * K,
		                     .d = a->d + (size_t)s * nb,
		                     .qsum = a->qs + (size_t)s * nb};

		coli_act_quantize(&c, x + (size_t)s * K, K);
	}
	a->dq = dev_copy(a->q, (size_t)S * K);
	a->dd = dev_copy(a->d, sizeof(float) * S * nb);
	a->ds = dev_copy(a->qs, 4 * (size_t)S * nb);
	free(x);
}

static void mat_free(struct kq_mat *m)
{
	coli_gpu_free(g_gpu, m->dw);
	free(m->w);
}

static void act_free(struct kq_act *a)
{
	coli_gpu_free(g_gpu, a->dq), coli_gpu_free(g_gpu, a->dd), coli_gpu_free(g_gpu, a->ds);
	free(a->q), free(a->d), free(a->qs);
}

/* The CPU's y [S][R] */
static float *cpu_out(const struct kq_mat *m, const struct kq_act *a)
{
	float *y = xmalloc(sizeof(float) * a->S * m->R);
	const int nb = m->K / 32;
	struct coli_mat cm;

	coli_mat_view(&cm, m->t, m->R, m->K, m->w);
	for (int s = 0; s < a->S; s++) {
		struct coli_act c = {.n = m->K,
		                     .q = a->q + (size_t)s * m->K,
		                     .d = a->d + (size_t)s * nb,
		                     .qsum = a->qs + (size_t)s * nb};

		coli_gemv(&cm, &c, y + (size_t)s * m->R, 0, m->R);
	}
	return y;
}

static struct coli_gpu_gemm_job job_of(const struct kq_mat *m, const struct kq_act *a, uint64_t y)
{
	return (struct coli_gpu_gemm_job){
	    .w = (const void *)(uintptr_t)m->dw,
	    .xq = (const signed char *)(uintptr_t)a->dq,
	    .xd = (const float *)(uintptr_t)a->dd,
	    .xqsum = (const int *)(uintptr_t)a->ds,
	    .y = (float *)(uintptr_t)y,
	    .rows = m->R,
	    .K = m->K,
	    .S = a->S,
	    .ldy = m->R,
	};
}

/* got against want over n values: mismatches (bits) and max |error| into
 * *bad and *maxe */
static void tally(const float *got, const float *want, size_t n, size_t *bad, double *maxe)
{
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)got[i] - want[i]);

		*bad += memcmp(&got[i], &want[i], 4) != 0;
		if (e > *maxe || e != e)
			*maxe = e != e ? INFINITY : e;
	}
}

/* One launch of three matrices of type t times S tokens; one line. */
static int test_runs(enum coli_dtype t, int S, const char *tag)
{
	unsigned elems, bytes;
	/* rows: no tile multiple; K: 1, 3 and 16 blocks of 256 (the 32-element
	 * types also a K of 3 blocks of 32: lanes without units) */
	int shapes[3][2] = {{67, 256}, {200, 768}, {129, 4096}};
	struct kq_mat m[3];
	struct kq_act a[3];
	struct coli_gpu_gemm_job j[3];
	uint64_t dy[3];
	size_t bad = 0, n = 0;
	double maxe = 0;
	int rc = 0;

	coli_dtype_block(t, &elems, &bytes);
	if (elems == 32)
		shapes[0][1] = 96;
	for (int i = 0; i < 3; i++) {
		mat_init(&m[i], t, shapes[i][0], shapes[i][1]);
		act_init(&a[i], S, shapes[i][1]);
		dy[i] = dev_poison(sizeof(float) * S * m[i].R);
		j[i] = job_of(&m[i], &a[i], dy[i]);
	}
	if (coli_gpu_gemm(g_gpu, t, j, 3) || coli_gpu_sync(g_gpu)) {
		printf("  gemm %s S=%d: launch failed\n", coli_dtype_name(t), S);
		return 1;
	}
	for (int i = 0; i < 3; i++) {
		float *want = cpu_out(&m[i], &a[i]), *got = xmalloc(sizeof(float) * S * m[i].R);

		download(got, dy[i], sizeof(float) * S * m[i].R);
		tally(got, want, (size_t)S * m[i].R, &bad, &maxe);
		n += (size_t)S * m[i].R;
		free(want), free(got);
		coli_gpu_free(g_gpu, dy[i]);
		mat_free(&m[i]), act_free(&a[i]);
	}
	printf("  gemm %-5s S=%-3d %-10s %8zu values  max|err| %.3g  mismatches %zu\n",
	       coli_dtype_name(t), S, tag, n, maxe, bad);
	rc |= bad != 0;
	return rc;
}

/* An expert of a mixed file: gate and up (type tg, I x H) of S tokens, then
 * down (type td, H x I) of other activations, two launches back to back. */
static int test_mixed(enum coli_dtype tg, enum coli_dtype td, int S)
{
	const int H = 512, I = 768;
	struct kq_mat gate, up, down;
	struct kq_act x, h;
	struct coli_gpu_gemm_job j[2];
	uint64_t dg, du, dd;
	size_t bad = 0;
	double maxe = 0;
	float *want, *got = xmalloc(sizeof(float) * S * (I > H ? I : H));

	mat_init(&gate, tg, I, H), mat_init(&up, tg, I, H), mat_init(&down, td, H, I);
	act_init(&x, S, H), act_init(&h, S, I);
	dg = dev_poison(sizeof(float) * S * I), du = dev_poison(sizeof(float) * S * I);
	dd = dev_poison(sizeof(float) * S * H);
	j[0] = job_of(&gate, &x, dg), j[1] = job_of(&up, &x, du);
	if (coli_gpu_gemm(g_gpu, tg, j, 2))
		return 1;
	j[0] = job_of(&down, &h, dd);
	if (coli_gpu_gemm(g_gpu, td, j, 1) || coli_gpu_sync(g_gpu))
		return 1;
	want = cpu_out(&gate, &x), download(got, dg, sizeof(float) * S * I);
	tally(got, want, (size_t)S * I, &bad, &maxe), free(want);
	want = cpu_out(&up, &x), download(got, du, sizeof(float) * S * I);
	tally(got, want, (size_t)S * I, &bad, &maxe), free(want);
	want = cpu_out(&down, &h), download(got, dd, sizeof(float) * S * H);
	tally(got, want, (size_t)S * H, &bad, &maxe), free(want);
	printf("  mixed %s gate/up + %s down S=%-3d %8d values  max|err| %.3g  mismatches %zu\n",
	       coli_dtype_name(tg), coli_dtype_name(td), S, S * (2 * I + H), maxe, bad);
	coli_gpu_free(g_gpu, dg), coli_gpu_free(g_gpu, du), coli_gpu_free(g_gpu, dd);
	mat_free(&gate), mat_free(&up), mat_free(&down), act_free(&x), act_free(&h);
	free(got);
	return bad != 0;
}

int main(void)
{
	static const int Ss[] = {5, 16, 17, 33, 64, 100, 300};
	static const enum coli_dtype mix[][2] = {{COLI_DTYPE_Q4_K, COLI_DTYPE_Q6_K},
	                                         {COLI_DTYPE_Q5_K, COLI_DTYPE_Q6_K},
	                                         {COLI_DTYPE_Q3_K, COLI_DTYPE_Q5_K},
	                                         {COLI_DTYPE_Q2_K, COLI_DTYPE_Q4_K}};
	int rc = ptx_test_open();

	if (rc)
		return rc;
	for (int t = COLI_DTYPE_Q4_1; t <= COLI_DTYPE_Q6_K; t++) {
		for (size_t i = 0; i < sizeof(Ss) / sizeof(Ss[0]); i++)
			rc |= test_runs((enum coli_dtype)t, Ss[i], "");
		for (int bn = 64; bn >= 16; bn /= 2) { /* each tile forced */
			char tag[16];

			snprintf(tag, sizeof(tag), "tile x%d", bn);
			coli_gpu_gemm_tile(g_gpu, bn);
			rc |= test_runs((enum coli_dtype)t, 100, tag);
		}
		coli_gpu_gemm_tile(g_gpu, 0);
	}
	for (size_t i = 0; i < sizeof(mix) / sizeof(mix[0]); i++)
		rc |= test_mixed(mix[i][0], mix[i][1], 40);
	coli_gpu_close(g_gpu);
	return rc;
}
