/*
 * tests/ptx/gemm_kernels.c — the prefill expert GEMM of ptx/expert/gemm.cu against
 * the CPU reference and against the GPU's own GEMV kernels.
 *
 *   q8_0 / q4_0   bit for bit (the placement invariant at prefill): every
 *                 job of one grouped launch equals coli_gemm on the CPU and
 *                 the GEMV kernels run on the same inputs 4 tokens at a time,
 *                 with each tile forced (64, 32, 16 tokens:
 *                 coli_gpu_gemm_tile), then each run on its own tile (one
 *                 launch mixing them), in a launch of 16 jobs (table in the
 *                 parameters) and of 28 (table in device memory)
 *   bf16          within rounding only (tensor cores): the error relative to
 *                 sum_k |w_k x_k| of the output is printed and bounded
 *
 * Shapes: Qwen3-30B-A3B experts (768 x 2048 gate/up, 2048 x 768 down) at
 * S = 5, 16, 64 and 200 between them; odd ones (rows not a multiple of the
 * tile, K < 512 so some canonical lanes are empty, an odd block count, S = 1
 * past a tile, a run that fills the 32-token tile; K a multiple of 128, whose
 * four K groups ptx/expert/gemm.cu stages together, with rows and tokens past
 * a tile);
 * one Mixtral-sized pair (14336 x 4096, 4096 x 14336). Outputs are poisoned
 * (0xff bytes = NaN) with a row stride wider than the matrix; inputs are
 * fresh random draws. Skips (77) without a usable GPU.
 *
 * `gemm_kernels --quick` leaves the Mixtral-sized shapes out.
 * `gemm_kernels --bench [--quick]` times the GEMM instead (not a test: no assertion):
 * a Qwen3-30B-A3B MoE layer at prefill (128 experts, gate+up in one launch,
 * down in another) and a Mixtral-sized one (8 experts), TOPS counted as
 * 2 * rows * K * S per job, next to the old path (GEMV jobs of 4 tokens).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx_test.h"

static coli_cpu_pool_t *g_pool;

/* One job's host data, its CPU reference and its device buffers. */
struct tjob {
	int R, K, S, ldy;
	void *w;
	size_t wbytes;
	float *x, *xd, *want, *absdot; /* x [S][K]; want, absdot [S][ldy] */
	int8_t *xq;
	int32_t *xs;
	uint64_t dw, dxq, dxd, dxs, dxf, dy, dy2; /* dy: GEMM out, dy2: GEMV out */
	struct coli_mat m;
};

static void tjob_make(struct tjob *t, enum coli_dtype dt, int R, int K, int S)
{
	int nb = K / 32;
	float *wf = malloc(sizeof(float) * R * K);
	struct coli_act *acts = malloc(sizeof(*acts) * S);

	memset(t, 0, sizeof(*t));
	t->R = R, t->K = K, t->S = S, t->ldy = R + 3;
	for (size_t i = 0; i < (size_t)R * K; i++)
		wf[i] = frand() * 0.1f;
	t->wbytes = coli_dtype_mat_bytes(dt, R, K);
	t->w = malloc(t->wbytes);
	coli_quantize_mat(dt, wf, R, K, t->w);
	coli_mat_view(&t->m, dt, R, K, t->w);
	t->x = malloc(sizeof(float) * S * K);
	t->xq = malloc((size_t)S * K);
	t->xd = malloc(sizeof(float) * S * nb);
	t->xs = malloc(4 * (size_t)S * nb);
	for (int s = 0; s < S; s++) {
		float scale = s % 3 == 0 ? 4.0f : s % 3 == 1 ? 0.01f : 1.0f;

		for (int k = 0; k < K; k++)
			t->x[(size_t)s * K + k] = frand() * scale;
		acts[s] = (struct coli_act){.n = K,
		                            .f = t->x + (size_t)s * K,
		                            .q = t->xq + (size_t)s * K,
		                            .d = t->xd + (size_t)s * nb,
		                            .qsum = t->xs + (size_t)s * nb};
		coli_act_quantize(&acts[s], t->x + (size_t)s * K, K);
	}
	t->want = malloc(sizeof(float) * S * t->ldy);
	coli_gemm_mt(g_pool, &t->m, acts, S, t->want, t->ldy);
	if (dt == COLI_DTYPE_BF16) { /* the scale of rounding: sum_k |w_k x_k| */
		int step = (double)R * K * S > 1e9 ? 7 : 1; /* big shapes: every 7th row */

		t->absdot = calloc((size_t)S * t->ldy, sizeof(float));
		for (int r = 0; r < R; r += step) {
			coli_mat_row_f32(&t->m, r, wf);
			for (int s = 0; s < S; s++) {
				double a = 0;

				for (int k = 0; k < K; k++)
					a += fabs((double)wf[k] * t->x[(size_t)s * K + k]);
				t->absdot[(size_t)s * t->ldy + r] = (float)a;
			}
		}
	}
	free(wf), free(acts);
	t->dw = dev_copy(t->w, t->wbytes);
	t->dxq = dev_copy(t->xq, (size_t)S * K);
	t->dxd = dev_copy(t->xd, sizeof(float) * S * nb);
	t->dxs = dev_copy(t->xs, 4 * (size_t)S * nb);
	t->dxf = dev_copy(t->x, sizeof(float) * S * K);
	t->dy = dev_poison(sizeof(float) * S * t->ldy);
	t->dy2 = dev_poison(sizeof(float) * S * t->ldy);
}

static void tjob_free(struct tjob *t)
{
	uint64_t d[] = {t->dw, t->dxq, t->dxd, t->dxs, t->dxf, t->dy, t->dy2};

	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
		coli_gpu_free(g_gpu, d[i]);
	free(t->w), free(t->x), free(t->xq), free(t->xd), free(t->xs), free(t->want);
	free(t->absdot);
}

static void gemm_job(const struct tjob *t, struct coli_gpu_gemm_job *j)
{
	memset(j, 0, sizeof(*j));
	j->w = (const void *)(uintptr_t)t->dw;
	j->scales = t->m.scales
	                ? (const unsigned short *)(uintptr_t)(t->dw + ((const char *)t->m.scales -
	                                                               (const char *)t->w))
	                : NULL;
	j->xq = (const signed char *)(uintptr_t)t->dxq;
	j->xd = (const float *)(uintptr_t)t->dxd;
	j->xqsum = (const int *)(uintptr_t)t->dxs;
	j->xf = (const float *)(uintptr_t)t->dxf;
	j->y = (float *)(uintptr_t)t->dy;
	j->rows = t->R, j->K = t->K, j->S = t->S, j->ldy = t->ldy;
}

/* The same job as GEMV jobs of up to COLI_GPU_MAX_S tokens, into dy2. */
static int gemv_jobs(const struct tjob *t, struct coli_gpu_gemv_job *out)
{
	struct coli_gpu_gemm_job g;
	int n = 0, nb = t->K / 32;

	gemm_job(t, &g);
	for (int s0 = 0; s0 < t->S; s0 += COLI_GPU_MAX_S, n++) {
		struct coli_gpu_gemv_job *j = &out[n];

		memset(j, 0, sizeof(*j));
		j->w = g.w, j->scales = g.scales;
		j->xq = g.xq + (size_t)s0 * t->K;
		j->xd = g.xd + (size_t)s0 * nb;
		j->xqsum = g.xqsum + (size_t)s0 * nb;
		j->xf = g.xf + (size_t)s0 * t->K;
		j->y = (float *)(uintptr_t)t->dy2 + (size_t)s0 * t->ldy;
		j->rows = t->R, j->K = t->K, j->ldy = t->ldy;
		j->S = t->S - s0 < COLI_GPU_MAX_S ? t->S - s0 : COLI_GPU_MAX_S;
	}
	return n;
}

/* Compare the valid part [S][R] of two [S][ldy] outputs. */
static size_t count_bad(const struct tjob *t, const float *got, const float *want, double *maxe,
                        int *first)
{
	size_t bad = 0;

	*first = -1;
	for (int s = 0; s < t->S; s++)
		for (int r = 0; r < t->R; r++) {
			size_t i = (size_t)s * t->ldy + r;
			double e = fabs((double)got[i] - want[i]);

			if (memcmp(&got[i], &want[i], 4)) {
				if (!bad)
					*first = (int)i;
				bad++;
			}
			if (e > *maxe || e != e)
				*maxe = e != e ? INFINITY : e;
		}
	return bad;
}

static const int g_shapes[][3] = {
    {768, 2048, 5}, {768, 2048, 16}, {200, 384, 33},    {768, 2048, 200},
    {100, 128, 9},  {2048, 768, 16}, {2048, 768, 64},   {2048, 768, 200},
    {17, 32, 7},    {100, 96, 65},   {130, 544, 33},    {64, 1024, 129},
    {200, 1568, 6}, {96, 352, 32},   {14336, 4096, 64}, {4096, 14336, 16},
};
#define N_SHAPES ((int)(sizeof(g_shapes) / sizeof(g_shapes[0])))

static int g_quick; /* --quick: leave out the Mixtral-sized shapes (the CPU reference is slow) */

/* One grouped launch of every shape (reps > 1: the shapes but the two
 * Mixtral-sized ones, reps times over, fresh draws each: more than
 * COLI_GPU_INL_JOBS jobs, so the table goes through device memory). */
static int test_gemm(enum coli_dtype dt, int reps)
{
	const int n_base = g_quick || reps > 1 ? N_SHAPES - 2 : N_SHAPES;
	const int n_shapes = n_base * reps;
	struct tjob t[N_SHAPES * 3];
	struct coli_gpu_gemm_job gj[N_SHAPES * 3];
	struct coli_gpu_gemv_job *vj = malloc(sizeof(*vj) * 4096);
	int nvj = 0, rc = 0, quant = dt != COLI_DTYPE_BF16;
	double worst_rel = 0, worst_abs = 0;
	size_t total = 0, bad_cpu = 0, bad_gemv = 0;

	for (int i = 0; i < n_shapes; i++) {
		const int *sh = g_shapes[i % n_base];

		tjob_make(&t[i], dt, sh[0], sh[1], sh[2]);
		gemm_job(&t[i], &gj[i]);
		nvj += gemv_jobs(&t[i], vj + nvj);
	}
	if (coli_gpu_gemm(g_gpu, dt, gj, n_shapes) ||
	    (quant && coli_gpu_gemv(g_gpu, dt, vj, nvj)) || coli_gpu_sync(g_gpu)) {
		printf("  gemm %s: launch failed\n", coli_dtype_name(dt));
		return 1;
	}
	for (int i = 0; i < n_shapes; i++) {
		struct tjob *q = &t[i];
		size_t n = (size_t)q->S * q->ldy;
		float *got = malloc(sizeof(float) * n), *got2 = malloc(sizeof(float) * n);
		double maxe = 0, rel = 0;
		int first;

		if (coli_gpu_download(g_gpu, got, q->dy, sizeof(float) * n) ||
		    coli_gpu_download(g_gpu, got2, q->dy2, sizeof(float) * n))
			return 1;
		total += (size_t)q->S * q->R;
		if (quant) {
			size_t b1 = count_bad(q, got, q->want, &maxe, &first), b2;
			double e2 = 0;
			int first2;

			b2 = count_bad(q, got, got2, &e2, &first2);
			if (b1 || b2) {
				printf("  gemm %s %dx%d S=%d: %zu differ from the CPU (max|err| "
				       "%.3g), "
				       "%zu from the GEMV",
				       coli_dtype_name(dt), q->R, q->K, q->S, b1, maxe, b2);
				if (first >= 0)
					printf("; first: token %d row %d got %.9g want %.9g",
					       first / q->ldy, first % q->ldy, got[first],
					       q->want[first]);
				printf("\n");
			}
			bad_cpu += b1, bad_gemv += b2;
			worst_abs = maxe > worst_abs ? maxe : worst_abs;
		} else {
			for (int s = 0; s < q->S; s++)
				for (int r = 0; r < q->R; r++) {
					size_t k = (size_t)s * q->ldy + r;
					double e = fabs((double)got[k] - q->want[k]);
					double x = e / (q->absdot[k] + 1e-30);

					if (q->absdot[k] == 0)
						x = 0; /* a row the sampling skipped */
					if (e != e)
						x = INFINITY;
					rel = x > rel ? x : rel;
					maxe = e > maxe ? e : maxe;
				}
			printf("  gemm bf16 %5dx%-5d S=%-3d  max|err| %.3g  max err/sum|wx| %.3g\n",
			       q->R, q->K, q->S, maxe, rel);
			worst_rel = rel > worst_rel ? rel : worst_rel;
			worst_abs = maxe > worst_abs ? maxe : worst_abs;
		}
		free(got), free(got2);
	}
	if (quant) {
		printf("  gemm %-5s %d jobs, one call: %zu values, mismatches vs CPU %zu, vs GEMV "
		       "%zu, max|err| %.3g\n",
		       coli_dtype_name(dt), n_shapes, total, bad_cpu, bad_gemv, worst_abs);
		rc = bad_cpu || bad_gemv;
	} else {
		/* split-bf16 activations keep ~16 bits of x; fp32 tensor-core sums */
		printf("  gemm bf16  %d jobs, one call: %zu values, max err/sum|wx| %.3g (bound "
		       "1e-4), max|err| %.3g\n",
		       n_shapes, total, worst_rel, worst_abs);
		rc = !(worst_rel <= 1e-4);
	}
	for (int i = 0; i < n_shapes; i++)
		tjob_free(&t[i]);
	free(vj);
	return rc;
}

/* ---- --bench ---- */

struct bset {
	int E, n;        /* experts, tokens per expert */
	int H, I;        /* gate/up [I x H], down [H x I] */
	uint64_t *w;     /* [E][3] device matrices: gate, up, down */
	uint64_t x, h;   /* activations [E*n][H] and [E*n][I]: q, d, qsum, f planes */
	uint64_t y1, y2; /* gate/up out [2][E*n][I], down out [E*n][H] */
};

static void fill_random(void *p, size_t n, enum coli_dtype dt)
{
	uint16_t *h = p;

	if (dt == COLI_DTYPE_BF16) {
		for (size_t i = 0; i < n / 2; i++)
			h[i] = coli_f32_to_bf16(frand() * 0.05f);
		return;
	}
	for (size_t i = 0; i < n / 8; i++)
		((uint64_t *)p)[i] = rnd();
}

/* Device planes of an activation set [T][K]: q (int8), d, qsum, f. */
static uint64_t act_planes(int T, int K)
{
	size_t nq = (size_t)T * K, nb = (size_t)T * K / 32;
	char *h = malloc(nq + 8 * nb + 4 * nq);
	uint64_t d;

	for (size_t i = 0; i < nq; i++)
		h[i] = (char)(rnd() % 255 - 127);
	for (size_t i = 0; i < nb; i++) {
		((float *)(h + nq))[i] = 0.01f;
		((int *)(h + nq + 4 * nb))[i] = 0;
	}
	for (size_t i = 0; i < nq; i++)
		((float *)(h + nq + 8 * nb))[i] = frand();
	d = dev_copy(h, nq + 8 * nb + 4 * nq);
	free(h);
	return d;
}

static void plane_ptrs(uint64_t base, int T, int K, size_t row, const signed char **q,
                       const float **d, const int **s, const float **f)
{
	size_t nq = (size_t)T * K, nb = nq / 32;

	*q = (const signed char *)(uintptr_t)(base + row * K);
	*d = (const float *)(uintptr_t)(base + nq + row * (K / 32) * 4);
	*s = (const int *)(uintptr_t)(base + nq + 4 * nb + row * (K / 32) * 4);
	*f = (const float *)(uintptr_t)(base + nq + 8 * nb + row * K * 4);
}

/* Jobs of one launch: gate+up (which = 0) or down (1), as GEMM or GEMV-of-4. */
static int bench_jobs(const struct bset *b, enum coli_dtype dt, int which, int gemv,
                      struct coli_gpu_gemm_job *gj, struct coli_gpu_gemv_job *vj, double *ops)
{
	int n = 0, T = b->E * b->n, nm = which ? 1 : 2;
	int R = which ? b->H : b->I, K = which ? b->I : b->H;
	size_t qb = dt == COLI_DTYPE_Q8_0   ? (size_t)R * K
	            : dt == COLI_DTYPE_Q4_0 ? (size_t)R * K / 2
	                                    : 0;

	*ops = 0;
	for (int e = 0; e < b->E; e++)
		for (int m = 0; m < nm; m++)
			for (int s0 = 0; s0 < b->n; s0 += gemv ? COLI_GPU_MAX_S : b->n) {
				struct coli_gpu_gemm_job j;
				size_t row = (size_t)e * b->n + s0;
				uint64_t w = b->w[e * 3 + (which ? 2 : m)];

				memset(&j, 0, sizeof(j));
				j.w = (const void *)(uintptr_t)w;
				j.scales = qb ? (const unsigned short *)(uintptr_t)(w + qb) : NULL;
				plane_ptrs(which ? b->h : b->x, T, K, row, &j.xq, &j.xd, &j.xqsum,
				           &j.xf);
				j.y = (float *)(uintptr_t)(which ? b->y2 + row * R * 4
				                                 : b->y1 + ((size_t)m * T + row) *
				                                               R * 4);
				j.rows = R, j.K = K, j.ldy = R;
				j.S =
				    gemv ? (b->n - s0 < COLI_GPU_MAX_S ? b->n - s0 : COLI_GPU_MAX_S)
				         : b->n;
				*ops += 2.0 * R * K * j.S;
				if (gemv) {
					struct coli_gpu_gemv_job *v = &vj[n];

					memset(v, 0, sizeof(*v));
					v->w = j.w, v->scales = j.scales, v->xq = j.xq,
					v->xd = j.xd;
					v->xqsum = j.xqsum, v->xf = j.xf, v->y = j.y;
					v->rows = R, v->K = K, v->S = j.S, v->ldy = R;
				} else {
					gj[n] = j;
				}
				n++;
			}
	return n;
}

static void bench_one(const char *name, int E, int n, int H, int I, enum coli_dtype dt)
{
	struct bset b = {.E = E, .n = n, .H = H, .I = I};
	size_t wb = coli_dtype_mat_bytes(dt, I, H), T = (size_t)E * n;
	void *hw = malloc(wb);
	struct coli_gpu_gemm_job *gj = malloc(sizeof(*gj) * 4096);
	struct coli_gpu_gemv_job *vj = malloc(sizeof(*vj) * 4096);
	const int reps = 10;

	fill_random(hw, wb, dt);
	b.w = malloc(sizeof(uint64_t) * 3 * E);
	for (int i = 0; i < 3 * E; i++) /* down [H x I] has the bytes of gate [I x H] */
		b.w[i] = dev_copy(hw, wb);
	b.x = act_planes((int)T, H);
	b.h = act_planes((int)T, I);
	b.y1 = dev_poison(sizeof(float) * 2 * T * I);
	b.y2 = dev_poison(sizeof(float) * T * H);
	/* arms: the GEMM with each tile (q8/q4; bf16 has one), the GEMV path */
	for (int arm = 0; arm < 4; arm++) {
		static const char *const names[4] = {"gemm", "n32", "n16", "gemv"};
		const int gemv = arm == 3;
		double ops_t = 0, ms_t = 0;

		if (gemv && (dt == COLI_DTYPE_BF16 || n > 32))
			continue; /* the old path, once, for scale */
		if ((arm == 1 || arm == 2) && dt == COLI_DTYPE_BF16)
			continue;
		coli_gpu_gemm_tile(g_gpu, COLI_GPU_GEMM_TILE_TOKENS(gemv ? 0 : arm));
		for (int which = 0; which < 2; which++) {
			double ops;
			int nj = bench_jobs(&b, dt, which, gemv, gj, vj, &ops);
			float best = 1e30f;

			if (nj > 4096) {
				printf("  %s: %d jobs, too many for one launch\n", name, nj);
				continue;
			}
			for (int r = 0; r < reps + 2; r++) {
				float ms = 0;
				int rc = coli_gpu_mark(g_gpu, 0);

				rc = rc     ? rc
				     : gemv ? coli_gpu_gemv(g_gpu, dt, vj, nj)
				            : coli_gpu_gemm(g_gpu, dt, gj, nj);
				rc = rc ? rc : coli_gpu_mark(g_gpu, 1);
				rc = rc ? rc : coli_gpu_elapsed_ms(g_gpu, 0, 1, &ms);
				if (rc) {
					printf("  %s: launch failed (%d)\n", name, rc);
					return;
				}
				if (r >= 2 && ms < best)
					best = ms;
			}
			printf("  %-10s %-5s %-6s %-7s E=%-3d n=%-4d %8.3f ms %7.1f TOPS\n", name,
			       coli_dtype_name(dt), names[arm], which ? "down" : "gate+up", E, n,
			       best, ops / best / 1e9);
			ops_t += ops, ms_t += best;
		}
		printf("  %-10s %-5s %-6s layer    E=%-3d n=%-4d %8.3f ms %7.1f TOPS\n", name,
		       coli_dtype_name(dt), names[arm], E, n, ms_t, ops_t / ms_t / 1e9);
	}
	coli_gpu_gemm_tile(g_gpu, 0);
	for (int i = 0; i < 3 * E; i++)
		coli_gpu_free(g_gpu, b.w[i]);
	coli_gpu_free(g_gpu, b.x), coli_gpu_free(g_gpu, b.h);
	coli_gpu_free(g_gpu, b.y1), coli_gpu_free(g_gpu, b.y2);
	free(b.w), free(hw), free(gj), free(vj);
}

static void bench(int quick)
{
	enum coli_dtype dts[] = {COLI_DTYPE_Q8_0, COLI_DTYPE_Q4_0, COLI_DTYPE_BF16};

	printf("best of 10 launches each; TOPS = 2*rows*K*S / time\n");
	/* where the GEMM overtakes GEMV jobs of 4 (COLI_GPU_GEMM_MIN_S) */
	for (int d = 0; d < 2; d++) {
		static const int ns[] = {2, 3, 4, 6, 8, 12, 16};

		for (int k = 0; k < 7; k++)
			bench_one("qwen3-30b", 128, ns[k], 2048, 768, dts[d]);
	}
	if (quick)
		return;
	for (int i = 0; i < 3; i++) {
		bench_one("qwen3-30b", 128, 32, 2048, 768, dts[i]);
		bench_one("qwen3-30b", 128, 128, 2048, 768, dts[i]);
		bench_one("qwen3-30b", 128, 512, 2048, 768, dts[i]);
		bench_one("mixtral", 8, 512, 4096, 14336, dts[i]);
	}
}

int main(int argc, char **argv)
{
	int rc = ptx_test_open();

	if (rc)
		return rc;
	g_quick = argc > 1 && !strcmp(argv[argc - 1], "--quick");
	if (argc > 1 && !strcmp(argv[1], "--bench")) {
		bench(g_quick);
		coli_gpu_close(g_gpu);
		return 0;
	}
	if (coli_cpu_pool_create(8, &g_pool)) {
		printf("no thread pool\n");
		return 1;
	}
	/* q8/q4: each tile (64 x 64, 64 x 32, 128 x 16) bit for bit; then as
	 * the engine launches (each run on the smallest tile that holds it, in
	 * one launch), with a table in the parameters and a long one */
	for (int t = 0; t < COLI_GPU_GEMM_TILES_Q; t++) {
		const int bn = COLI_GPU_GEMM_TILE_TOKENS(t);

		printf("token tile %d:\n", bn);
		coli_gpu_gemm_tile(g_gpu, bn);
		rc |= test_gemm(COLI_DTYPE_Q8_0, 1);
		rc |= test_gemm(COLI_DTYPE_Q4_0, 1);
	}
	coli_gpu_gemm_tile(g_gpu, 0);
	printf("token tile by run:\n");
	for (int reps = 1; reps <= 2; reps++) {
		rc |= test_gemm(COLI_DTYPE_Q8_0, reps);
		rc |= test_gemm(COLI_DTYPE_Q4_0, reps);
	}
	rc |= test_gemm(COLI_DTYPE_BF16, 1);
	rc |= test_gemm(COLI_DTYPE_BF16, 2);
	coli_cpu_pool_destroy(g_pool);
	coli_gpu_close(g_gpu);
	return rc;
}
