/*
 * ptx/dense/gpu_dense.c — launch wrappers for the dense-part kernels of
 * ptx/dense/dense.cu and ptx/dense/route.cu (norms, RoPE, embedding, the dense GEMV,
 * routing and the MoE plan): one function per kernel, grid shapes and split
 * policies chosen here, everything stream-ordered on the device's one
 * stream. Attention's launchers are ptx/attn/gpu_attn.c's.
 *
 * Splits: at decode a dense matrix has too little work to fill the GPU, so
 * the GEMV splits K over several CTAs. Their partials go to one device
 * scratch (DENSE_SCRATCH_FLOATS floats, allocated at open here and shared
 * with attention's and MLA's splits) and the last CTA of a group combines
 * them in a fixed order, counted in by an integer counter (DENSE_COUNTERS of
 * them, zero between launches: the last CTA resets its own). A float GEMV's
 * split count depends on its matrix only (a prefill batch and a decode step
 * sum a token in the same order); a batch whose partials would not fit goes
 * in several launches. Quantized matrices are never split (the canonical
 * reduction runs over all of K) and take the tensor-core GEMM for prefill
 * chunks. One stream: two split launches never overlap.
 */
#include <errno.h>
#include <stdio.h>

#include "ptx/ptx.h"
#include "ptx/ptx_internal.h"

#ifdef COLI_HAVE_PTX
#define THREADS  256
#define DG_WARPS 8 /* rows per GEMV CTA (dgemv.cuh) */

int coli_gpu_dense_functions(struct coli_gpu *g)
{
	static const struct {
		const char *name;
		size_t off;
		int route; /* ptx/dense/route.cu's module, else ptx/dense/dense.cu's */
	} fns[] = {
#define F(field, name, route) {name, offsetof(struct coli_gpu, field), route}
	    F(f_rmsnorm, "coli_rmsnorm", 0),
	    F(f_add_bias, "coli_add_bias", 0),
	    F(f_add, "coli_add", 0),
	    F(f_rope, "coli_rope", 0),
	    F(f_embed, "coli_embed", 0),
	    F(f_gather, "coli_gather_rows", 0),
	    F(f_moe_acc, "coli_moe_accumulate", 0),
	    F(f_gated, "coli_gated_add", 0),
	    F(f_argmax, "coli_argmax", 0),
	    F(f_qk_rope, "coli_qk_rope_store", 0),
	    F(f_route, "coli_route", 1),
	    F(f_route_plan, "coli_route_plan", 1),
	    F(f_moe_plan, "coli_moe_plan", 1),
#undef F
	};

	static const char *const dt[5] = {"f32", "bf16", "q8_0", "q4_0", "q4_0h"};
	char name[64];

	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		CK(g->cu->ModuleGetFunction((CUfunction *)((char *)g + fns[i].off),
		                            fns[i].route ? g->mod_route : g->mod_dense,
		                            fns[i].name),
		   fns[i].name);
	for (int s = 0; s < COLI_GPU_MAX_S; s++) {
		snprintf(name, sizeof(name), "coli_dgemv_f32_plan_%d", s + 1);
		CK(g->cu->ModuleGetFunction(&g->f_dgemv_plan[s], g->mod_route, name), name);
	}
	for (int d = 0; d < 5; d++)
		for (int s = 0; s < COLI_GPU_MAX_S; s++) {
			snprintf(name, sizeof(name), "coli_dgemv_%s_%d", dt[d], s + 1);
			CK(g->cu->ModuleGetFunction(&g->f_dgemv[d][s], g->mod_dense, name), name);
		}
	for (int d = 0; d < 2; d++)
		for (int n = 0; n < 2; n++) {
			snprintf(name, sizeof(name), "coli_dgemm_few_%s_%d", dt[2 + d], n + 1);
			CK(g->cu->ModuleGetFunction(&g->f_dgemm_few[d][n], g->mod_dense, name),
			   name);
		}
	for (int d = 0; d < 2; d++) {
		snprintf(name, sizeof(name), "coli_dgemv_%s_16", dt[d]);
		CK(g->cu->ModuleGetFunction(&g->f_dgemv_wide[d], g->mod_dense, name), name);
	}
	for (int i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "coli_dgemm_f32_j%d", i + 1);
		CK(g->cu->ModuleGetFunction(&g->f_dgemm_f32[i], g->mod_dense, name), name);
		/* (a GPU refusing its 185 KB a block keeps the joined form) */
		if (g->cu->FuncSetAttribute(g->f_dgemm_f32[i],
		                            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
		                            COLI_GPU_DGEMM_SMEM) != CUDA_SUCCESS)
			g->f_dgemm_f32[i] = NULL;
	}
	CK(g->cu->DeviceGetAttribute(&g->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
	                             g->dev),
	   "cuDeviceGetAttribute(multiprocessors)");
	CK(g->cu->MemAlloc(&g->scratch, sizeof(float) * DENSE_SCRATCH_FLOATS),
	   "cuMemAlloc(dense scratch)");
	CK(g->cu->MemAlloc(&g->counts, sizeof(unsigned) * DENSE_COUNTERS),
	   "cuMemAlloc(dense counters)");
	/* (at open, before the streams exist: complete before any launch) */
	CK(g->cu->MemsetD8Async(g->counts, 0, sizeof(unsigned) * DENSE_COUNTERS, NULL),
	   "cuMemsetD8Async(dense counters)");
	CK(g->cu->CtxSynchronize(), "cuCtxSynchronize");
	return 0;
}

void coli_gpu_dense_release(struct coli_gpu *g)
{
	if (g->scratch)
		g->cu->MemFree(g->scratch);
	if (g->counts)
		g->cu->MemFree(g->counts);
	g->scratch = g->counts = 0;
}

static int launch(struct coli_gpu *g, CUfunction f, unsigned gx, unsigned gy, unsigned bx,
                  unsigned shmem, void **args, const char *what)
{
	return coli_gpu_launch(g, f, gx, gy, 1, bx, shmem, args, what);
}

static int launch3(struct coli_gpu *g, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                   unsigned bx, void **args, const char *what)
{
	return coli_gpu_launch(g, f, gx, gy, gz, bx, 0, args, what);
}

int coli_gpu_copy(coli_gpu_t *g, uint64_t dst, uint64_t src, size_t n)
{
	CUR(g);
	CK(g->cu->MemcpyDtoDAsync(dst, src, n, g->stream), "cuMemcpyDtoDAsync");
	return 0;
}

/* G threads a row: the power of two >= n/4 (one float4 each), 32..1024;
 * rows of G < 256 threads share a CTA of 256. */
int coli_gpu_rmsnorm(coli_gpu_t *g, uint64_t x, uint64_t w, uint64_t y, int rows, int n, float eps)
{
	return coli_gpu_add_rmsnorm(g, x, 0, w, y, 0, 0, 0, rows, n, eps);
}

#define RN_REG 4 /* as ptx/dense/dense.cu: float4 per thread held in registers */

static int rmsnorm_launch(coli_gpu_t *g, uint64_t x, uint64_t add, const struct coli_gpu_pairs *p,
                          uint64_t w, uint64_t y, uint64_t q, uint64_t qd, uint64_t qsum, int rows,
                          int n, float eps)
{
	CUdeviceptr a = x, d = add, b = w, c = y, e = q, f = qd, h = qsum;
	CUdeviceptr py = p ? p->y : 0, pt = p ? p->token : 0, pw = p ? p->w : 0;
	int G = 32, rc, fused, np = p ? p->n : 0;
	void *args[] = {&a, &d, &b, &c, &e, &f, &h, &rows, &n, &eps, &G, &py, &pt, &pw, &np};
	unsigned bx, per;

	if (rows <= 0 || n <= 0)
		return rows == 0 ? 0 : -EINVAL;
	while (G < 1024 && G * 4 < n)
		G *= 2;
	fused = n % 32 == 0 && n <= RN_REG * 4 * G; /* the kernel's register path */
	if (!fused)
		e = 0;
	bx = G < THREADS ? THREADS : (unsigned)G;
	per = bx / (unsigned)G;
	rc = launch(g, g->f_rmsnorm, ((unsigned)rows + per - 1) / per, 1, bx, 0, args,
	            "launch rmsnorm");
	if (rc || !q || fused)
		return rc;
	return coli_gpu_act_quantize(g, y, q, qd, qsum, rows * n / 32);
}

int coli_gpu_add_rmsnorm(coli_gpu_t *g, uint64_t x, uint64_t add, uint64_t w, uint64_t y,
                         uint64_t q, uint64_t qd, uint64_t qsum, int rows, int n, float eps)
{
	return rmsnorm_launch(g, x, add, NULL, w, y, q, qd, qsum, rows, n, eps);
}

int coli_gpu_acc_rmsnorm(coli_gpu_t *g, uint64_t x, const struct coli_gpu_pairs *p, uint64_t w,
                         uint64_t y, uint64_t q, uint64_t qd, uint64_t qsum, int rows, int n,
                         float eps)
{
	if (!p || p->n < 0 || (p->n && (!p->y || !p->token || !p->w)))
		return -EINVAL;
	return rmsnorm_launch(g, x, 0, p, w, y, q, qd, qsum, rows, n, eps);
}

int coli_gpu_add_bias(coli_gpu_t *g, uint64_t y, uint64_t b, int rows, int n)
{
	CUdeviceptr a = y, c = b;
	void *args[] = {&a, &c, &rows, &n};

	return launch(g, g->f_add_bias, (unsigned)(((size_t)rows * n + THREADS - 1) / THREADS), 1,
	              THREADS, 0, args, "launch add_bias");
}

int coli_gpu_add(coli_gpu_t *g, uint64_t x, uint64_t y, int n)
{
	CUdeviceptr a = x, b = y;
	void *args[] = {&a, &b, &n};

	return launch(g, g->f_add, (unsigned)((n + THREADS - 1) / THREADS), 1, THREADS, 0, args,
	              "launch add");
}

int coli_gpu_qk_rope_store(coli_gpu_t *g, uint64_t q, uint64_t k, uint64_t v, uint64_t qw,
                           uint64_t kw, float eps, int T, int nh, int nkv, int hd, int pos0,
                           uint64_t posp, uint64_t inv_freq, uint64_t kc, uint64_t vc)
{
	return coli_gpu_qk_rope_store_kv(g, q, k, v, qw, kw, eps, T, nh, nkv, hd, pos0, posp,
	                                 inv_freq, kc, vc, 0, 0, 0, 1.0f, 0, 0, 0);
}

int coli_gpu_qk_rope_store_kv(coli_gpu_t *g, uint64_t q, uint64_t k, uint64_t v, uint64_t qw,
                              uint64_t kw, float eps, int T, int nh, int nkv, int hd, int pos0,
                              uint64_t posp, uint64_t inv_freq, uint64_t kc, uint64_t vc, int kt,
                              int vt, int store_only, float yf, uint64_t rows, uint64_t tab,
                              int nbs)
{
	CUdeviceptr a = q, b = k, c = v, d = qw, e = kw, f = inv_freq, h = kc, i = vc, p = posp;
	CUdeviceptr r = rows, tb = tab;
	float fy = yf == 0.0f ? 1.0f : yf; /* 0: none */
	void *args[] = {&a, &b, &c, &d,  &e,  &eps,        &nh, &nkv, &hd, &pos0, &p,
	                &f, &h, &i, &kt, &vt, &store_only, &fy, &r,   &tb, &nbs};
	unsigned bx = (unsigned)((hd / 2 + 31) / 32 * 32);

	if (hd % 2 || hd > 256 || T <= 0 || kt < 0 || kt > 2 || vt < 0 || vt > 2)
		return -ENOTSUP;
	if (nbs < 0 || (rows && !tab && !nbs))
		return -EINVAL;
	return launch(g, g->f_qk_rope, (unsigned)(nh + nkv), (unsigned)T, bx, 0, args,
	              "launch qk_rope_store");
}

int coli_gpu_rope(coli_gpu_t *g, uint64_t x, int T, int nh, int hd, int pos0, uint64_t inv_freq)
{
	CUdeviceptr a = x, f = inv_freq;
	void *args[] = {&a, &T, &nh, &hd, &pos0, &f};
	size_t n = (size_t)T * nh * (hd / 2);

	return launch(g, g->f_rope, (unsigned)((n + THREADS - 1) / THREADS), 1, THREADS, 0, args,
	              "launch rope");
}

/* Grid (row groups of 8, or 16 for q4_0h, splits, chunks of S <= 4 tokens). */
/* The dense GEMV's shape: the kernel's dtype index, row groups of DG_WARPS
 * and the K split. The split count depends on the matrix only, never on T: a
 * token's sum must have the same order in a prefill batch as alone at
 * decode. A matrix with at least half the warps wanted runs unsplit: the
 * split's combine (a fence, a count, a read of the partials) cost more than
 * the missing warps (o, 2048 x 4096 q4: 6.3 us split in two, where q,
 * 4096 x 2048, takes 4.6 unsplit). */
static int dgemv_shape(const coli_gpu_t *g, enum coli_dtype dtype,
                       const struct coli_gpu_dense_gemv *a, int *di, int *groups, int *splits)
{
	long want = 16L * g->sm_count; /* warps: two CTAs of 8 an SM */
	int nu, per;

	switch (dtype) {
	case COLI_DTYPE_F32:
		*di = 0, nu = a->K / 4;
		break;
	case COLI_DTYPE_BF16:
		*di = 1, nu = a->K / 8;
		break;
	case COLI_DTYPE_Q8_0:
		*di = 2, nu = a->K / 16;
		break;
	case COLI_DTYPE_Q4_0:
		*di = 3, nu = a->K / 32;
		break;
	default:
		return -ENOTSUP;
	}
	if (a->rows <= 0 || a->T <= 0 || a->K <= 0 || a->K % 32 ||
	    a->ldy < (a->y2 ? a->rows1 : a->rows) ||
	    (a->y2 && (!a->y3 || a->rows1 < 0 || a->rows2 < a->rows1 || a->rows < a->rows2 ||
	               a->ldy2 < a->rows2 - a->rows1 || a->ldy3 < a->rows - a->rows2)))
		return -EINVAL;
	/* q4_0 past 64 rows an SM: the half-warp-a-row kernel (same bits). At
	 * qwen3-30b's shapes on an H200 it read lm_head (151936 rows) in 45.8
	 * us against 66 a warp a row, but q (4096 rows) in 4.7 us against 3.2 */
	if (*di == 3 && a->rows >= 64L * g->sm_count)
		*di = 4;
	per = *di == 4 ? 2 * DG_WARPS : DG_WARPS;
	*groups = (a->rows + per - 1) / per;
	*splits = 1;
	/* quantized rows are the canonical reduction over all of K: never split */
	if (*di < 2 && a->rows * 2 <= want && *groups <= DENSE_COUNTERS) {
		*splits = (int)((want + a->rows - 1) / a->rows);
		*splits = *splits < nu / 32 ? *splits : nu / 32; /* a unit a lane at least */
		*splits = *splits < 32 ? *splits : 32;
		*splits = *splits > 1 ? *splits : 1;
	}
	return 0;
}

/* A dense GEMV's rows as up to three stacked matrices (q, k and v in one
 * launch): range i is rows [r[i], r[i + 1]), written to y[i] with stride
 * ldy[i]; one range when y2 is NULL (the others empty). */
struct stacked {
	int r[4];
	float *y[3];
	int ldy[3];
};

static struct stacked stacked_of(const struct coli_gpu_dense_gemv *a)
{
	return (struct stacked){
	    .r = {0, a->y2 ? a->rows1 : a->rows, a->y2 ? a->rows2 : a->rows, a->rows},
	    .y = {a->y, a->y2, a->y3},
	    .ldy = {a->ldy, a->ldy2, a->ldy3},
	};
}

/* A quantized matrix times a prefill chunk (T >= COLI_GPU_DENSE_GEMM_MIN_T; a
 * wide one, lm_head, from COLI_GPU_MAX_S + 1: a decode step of several) runs
 * on the tensor-core GEMM of ptx/expert/gemm.cu, one job per stacked range of rows:
 * the canonical reduction like the GEMV, so a token gets the bits it gets
 * at decode, but the weights are read once per 64 tokens instead of once
 * per 4. Returns 1 where it does not apply (the GEMV runs: same bits). */
static int dense_gemm(coli_gpu_t *g, enum coli_dtype dtype, const struct coli_gpu_dense_gemv *a)
{
	const size_t rb = dtype == COLI_DTYPE_Q4_0 ? (size_t)a->K / 2 : (size_t)a->K;
	const int nb = a->K / 32;
	const struct stacked st = stacked_of(a);
	const int *r = st.r, *ldy = st.ldy;
	float *const *y = st.y;
	struct coli_gpu_gemm_job j[3];
	int n = 0;

	if ((dtype != COLI_DTYPE_Q8_0 && dtype != COLI_DTYPE_Q4_0) ||
	    a->T < (a->rows >= COLI_GPU_DENSE_GEMM_WIDE_ROWS ? COLI_GPU_MAX_S + 1
	                                                     : COLI_GPU_DENSE_GEMM_MIN_T))
		return 1;
	for (int i = 0; i < 3; i++) {
		const char *w = (const char *)a->w + r[i] * rb;
		const unsigned short *sc = a->scales + (size_t)r[i] * nb;

		if (r[i + 1] == r[i])
			continue;
		/* the GEMM's copies: 16-byte weight and activation rows, 4-byte
		 * pairs of scales */
		if ((uintptr_t)w % 16 || (uintptr_t)sc % 4 || (uintptr_t)a->xq % 16)
			return 1;
		j[n++] = (struct coli_gpu_gemm_job){
		    .w = w,
		    .scales = sc,
		    .xq = a->xq,
		    .xd = a->xd,
		    .xqsum = a->xqsum,
		    .y = y[i],
		    .rows = r[i + 1] - r[i],
		    .K = a->K,
		    .S = a->T,
		    .ldy = ldy[i],
		};
	}
	return coli_gpu_gemm(g, dtype, j, n);
}

/* A matrix of GGUF's block types (no dense kernel of their own): a prefill
 * chunk of COLI_GPU_DENSE_GEMM_MIN_T_KQ tokens or more as the tensor-core
 * GEMM's jobs (ptx/expert/kquant_gemm.cu), one per stacked range of rows, the
 * weights read once per tile of tokens; fewer tokens as the expert GEMV's
 * jobs (ptx/expert/kquant.cu), one per stacked range and COLI_GPU_MAX_S tokens, in
 * launches of up to 64. The same canonical reduction either way, so the
 * CPU's bits. */
static int dense_kq(coli_gpu_t *g, enum coli_dtype dtype, const struct coli_gpu_dense_gemv *a)
{
	const size_t rb = coli_dtype_row_bytes(dtype, (size_t)a->K);
	const int nb = a->K / 32;
	const struct stacked st = stacked_of(a);
	const int *r = st.r, *ldy = st.ldy;
	float *const *y = st.y;
	struct coli_gpu_gemv_job j[64];
	int n = 0, rc = 0;

	/* the GEMM's copies: 16-byte activation rows (the weights are read as
	 * the GEMV reads them) */
	if (a->T >= COLI_GPU_DENSE_GEMM_MIN_T_KQ && (uintptr_t)a->xq % 16 == 0) {
		struct coli_gpu_gemm_job gj[3];

		for (int i = 0; i < 3; i++) {
			if (r[i + 1] == r[i])
				continue;
			gj[n++] = (struct coli_gpu_gemm_job){
			    .w = (const char *)a->w + r[i] * rb,
			    .xq = a->xq,
			    .xd = a->xd,
			    .xqsum = a->xqsum,
			    .y = y[i],
			    .rows = r[i + 1] - r[i],
			    .K = a->K,
			    .S = a->T,
			    .ldy = ldy[i],
			};
		}
		return coli_gpu_gemm(g, dtype, gj, n);
	}
	for (int t = 0; t < a->T && !rc; t += COLI_GPU_MAX_S)
		for (int i = 0; i < 3 && !rc; i++) {
			if (r[i + 1] == r[i])
				continue;
			j[n++] = (struct coli_gpu_gemv_job){
			    .w = (const char *)a->w + r[i] * rb,
			    .xq = a->xq + (size_t)t * a->K,
			    .xd = a->xd + (size_t)t * nb,
			    .xqsum = a->xqsum + (size_t)t * nb,
			    .y = y[i] + (size_t)t * ldy[i],
			    .rows = r[i + 1] - r[i],
			    .K = a->K,
			    .S = a->T - t < COLI_GPU_MAX_S ? a->T - t : COLI_GPU_MAX_S,
			    .ldy = ldy[i],
			};
			if (n == (int)(sizeof(j) / sizeof(j[0]))) {
				rc = coli_gpu_gemv(g, dtype, j, n);
				n = 0;
			}
		}
	return rc || !n ? rc : coli_gpu_gemv(g, dtype, j, n);
}

/* The tiled f32 GEMM for a prefill chunk of a float matrix and its grid
 * (gx x 1 x gz), or NULL for the joined form. Taken where there is a kernel
 * for its J (span / 32 units a lane, up to 8), half its 128-row tile is used
 * at least (the routers: 128 experts and up; Mixtral's 8 keep the joined
 * form), and the grid covers 7/8 of the SMs: a CTA's time hardly depends on
 * T, where the joined form's grows with it. On an H100 a 128 x 2048 router at
 * 512 tokens (32 CTAs) took 70 us tiled against 58 joined (ccbdf51); at
 * 2,048 tokens the joined form took 309 us (docs/perf/history/2026-12-06.md). */
static CUfunction dgemm_f32_kernel(const coli_gpu_t *g, const struct coli_gpu_dense_gemv *a,
                                   int splits, unsigned *gx, unsigned *gz)
{
	const int nu = a->K / 4, J = (((nu + splits - 1) / splits + 31) & ~31) / 32;

	*gx = (unsigned)((a->rows + COLI_GPU_DGEMM_ROWS - 1) / COLI_GPU_DGEMM_ROWS);
	*gz = (unsigned)((a->T + COLI_GPU_DGEMM_TOKS - 1) / COLI_GPU_DGEMM_TOKS);
	if (a->rows < COLI_GPU_DGEMM_ROWS / 2 || J > 8 || g->dgemm_tiled == COLI_GPU_DGEMM_OFF ||
	    (g->dgemm_tiled == COLI_GPU_DGEMM_AUTO && (long)*gx * *gz * 8 < 7L * g->sm_count))
		return NULL;
	return g->f_dgemm_f32[J - 1];
}

void coli_gpu_dense_tiled(coli_gpu_t *g, int mode)
{
	g->dgemm_tiled = mode;
}

int coli_gpu_dense_gemv(coli_gpu_t *g, enum coli_dtype dtype, const struct coli_gpu_dense_gemv *m)
{
	struct coli_gpu_dense_gemv a = *m;
	CUdeviceptr part = g->scratch, cnt = g->counts;
	void *args[] = {&a, &part, &cnt};
	int di, S, chunks, groups, splits, rc;

	if (coli_dtype_is_block(dtype))
		return m->T < 1 || m->K % 32 || !m->xq ? -EINVAL : dense_kq(g, dtype, m);
	rc = dgemv_shape(g, dtype, &a, &di, &groups, &splits);
	if (rc || (rc = dense_gemm(g, dtype, &a)) <= 0)
		return rc;
	/* float weights at prefill: the joined form (a warp takes all of its
	 * row's splits: no partials, no counters). Not for a decode step of
	 * several sequences: at T = 8 the router (128 rows) ran in 16 CTAs,
	 * 18.7 us a layer on an H200, against the split launch's few us */
	if (di < 2 && a.T > COLI_GPU_STEP_T) {
		void *jargs[] = {&a, &splits};
		unsigned gx, gz;
		CUfunction tiled = di == 0 ? dgemm_f32_kernel(g, &a, splits, &gx, &gz) : NULL;

		if (tiled)
			return coli_gpu_launch(g, tiled, gx, 1, gz, COLI_GPU_DGEMM_THREADS,
			                       COLI_GPU_DGEMM_SMEM, jargs, "launch dense gemm f32");

		S = 16;
		return launch3(g, g->f_dgemv_wide[di], (unsigned)groups, 1,
		               (unsigned)((a.T + S - 1) / S), DG_WARPS * 32, jargs,
		               "launch dense gemv");
	}
	/* q8_0 / q4_0 (not the long q4 rows of lm_head) times a few tokens: the
	 * mma kernel, chunks of 16 tokens (8 when T is) */
	if ((di == 2 || di == 3) && a.T >= COLI_GPU_DMMA_MIN_T) {
		const int nt = a.T <= 8 ? 1 : 2;
		void *margs[] = {&a};

		return launch3(g, g->f_dgemm_few[di - 2][nt - 1], (unsigned)((a.rows + 15) / 16), 1,
		               (unsigned)((a.T + 8 * nt - 1) / (8 * nt)), 16 * 32, margs,
		               "launch dense gemm (few tokens)");
	}
	S = a.T < COLI_GPU_MAX_S ? a.T : COLI_GPU_MAX_S;
	/* tokens per launch: a split launch's partials [splits][T][rows] and its
	 * counters [chunks][groups] must fit; longer inputs go in several */
	int tb = a.T;

	if (splits > 1) {
		long fit = (long)(DENSE_SCRATCH_FLOATS / ((size_t)splits * a.rows));
		long by_cnt = (long)(DENSE_COUNTERS / groups) * S;

		fit = fit < by_cnt ? fit : by_cnt;
		tb = fit < a.T ? (int)(fit / S * S) : a.T;
		tb = tb > 0 ? tb : 1;
	}
	for (int t = 0; t < m->T; t += tb) {
		a.T = m->T - t < tb ? m->T - t : tb;
		a.xf = m->xf ? m->xf + (size_t)t * m->K : NULL;
		a.xq = m->xq ? m->xq + (size_t)t * m->K : NULL;
		a.xd = m->xd ? m->xd + (size_t)t * (m->K / 32) : NULL;
		a.xqsum = m->xqsum ? m->xqsum + (size_t)t * (m->K / 32) : NULL;
		a.y = m->y + (size_t)t * m->ldy;
		a.y2 = m->y2 ? m->y2 + (size_t)t * m->ldy2 : NULL;
		a.y3 = m->y3 ? m->y3 + (size_t)t * m->ldy3 : NULL;
		chunks = (a.T + S - 1) / S;
		rc = launch3(g, g->f_dgemv[di][S - 1], (unsigned)groups, (unsigned)splits,
		             (unsigned)chunks, DG_WARPS * 32, args, "launch dense gemv");
		if (rc)
			return rc;
	}
	return 0;
}

int coli_gpu_embed(coli_gpu_t *g, enum coli_dtype t, uint64_t table, uint64_t scales, uint64_t ids,
                   uint64_t x, int T, int H)
{
	CUdeviceptr a = table, b = scales, c = ids, d = x;
	int dt = (int)t;
	void *args[] = {&a, &b, &dt, &c, &d, &H};

	if (coli_dtype_is_block(t)) { /* ptx/expert/kquant.cu */
		unsigned long long rb = coli_dtype_row_bytes(t, (size_t)H);
		void *kargs[] = {&a, &dt, &rb, &c, &d, &H};

		return launch(g, g->f_embed_kq, (unsigned)T, 1, THREADS, 0, kargs,
		              "launch embed_kq");
	}
	return launch(g, g->f_embed, (unsigned)T, 1, THREADS, 0, args, "launch embed");
}

int coli_gpu_gather_rows(coli_gpu_t *g, uint64_t dst, uint64_t src, uint64_t idx, int n,
                         size_t row_bytes)
{
	CUdeviceptr a = dst, b = src, c = idx;
	int w4 = (int)(row_bytes / 4);
	void *args[] = {&a, &b, &c, &w4};

	if (n < 0 || row_bytes % 4 || row_bytes > ((size_t)1 << 30))
		return -EINVAL;
	return n ? launch(g, g->f_gather, (unsigned)n, 1, THREADS, 0, args, "launch gather_rows")
	         : 0;
}

/* rows from which coli_moe_accumulate takes one CTA a row: enough CTAs to
 * fill the SMs without slices */
#define ACC_ROW_CTA_T 256
int coli_gpu_moe_accumulate(coli_gpu_t *g, uint64_t out, uint64_t y, uint64_t pair_token,
                            uint64_t pair_w, int n_pairs, int T, int H, uint64_t hy, uint64_t hmask)
{
	CUdeviceptr a = out, b = y, c = pair_token, d = pair_w, h = hy;
	unsigned long long m = hy ? hmask : 0;
	void *args[] = {&a, &b, &c, &d, &n_pairs, &H, &h, &m};

	/* a CTA scans every pair for its row's: for a prompt's rows one CTA a
	 * row (its slices in turn), so the scan is not repeated a slice (2,048
	 * rows x 8 slices of 16,384 pairs: 3.1 ms of an 8-layer prefill's 43 on
	 * an H100); a decode step's few rows keep a CTA a slice */
	unsigned gx = T >= ACC_ROW_CTA_T ? 1 : (unsigned)((H + THREADS - 1) / THREADS);

	return launch(g, g->f_moe_acc, gx, (unsigned)T, THREADS, 0, args,
	              "launch moe_accumulate");
}

/* A grid of up to two CTAs an SM, each thread ~4 loads (coli_argmax); the
 * partials in the scratch, counted in by the second-to-last counter. */
int coli_gpu_argmax(coli_gpu_t *g, uint64_t x, int n, uint64_t out)
{
	CUdeviceptr a = x, b = out, part = g->scratch,
	            cnt = g->counts + sizeof(unsigned) * (DENSE_COUNTERS - 2);
	void *args[] = {&a, &n, &b, &part, &cnt};
	long blocks = ((long)n + 4 * 256 - 1) / (4 * 256);

	if (n <= 0)
		return -EINVAL;
	blocks = blocks < 2L * g->sm_count ? blocks : 2L * g->sm_count;
	return launch(g, g->f_argmax, (unsigned)blocks, 1, 256, 0, args, "launch argmax");
}

int coli_gpu_gated_add(coli_gpu_t *g, uint64_t out, uint64_t y, uint64_t gate, int T, int H)
{
	CUdeviceptr a = out, b = y, c = gate;
	void *args[] = {&a, &b, &c, &H};

	return launch(g, g->f_gated, (unsigned)T, 1, THREADS, 0, args, "launch gated_add");
}

int coli_gpu_route(coli_gpu_t *g, uint64_t rlog, int T, int E, int K, int norm, uint64_t sel,
                   uint64_t selw)
{
	CUdeviceptr a = rlog, b = sel, c = selw;
	void *args[] = {&a, &E, &K, &norm, &b, &c};

	if (E < 1 || E > COLI_GPU_ROUTE_MAX_E || K < 1 || K > 16 || K > E)
		return -ENOTSUP;
	return launch(g, g->f_route, (unsigned)T, 1, 32, 0, args, "launch route");
}

int coli_gpu_moe_plan(coli_gpu_t *g, const struct coli_gpu_moe_plan *a)
{
	void *args[] = {(void *)a};

	if (a->T < 1 || a->T * a->K > COLI_GPU_PLAN_MAX_P)
		return -ENOTSUP;
	if (a->rlog && (a->T > COLI_GPU_STEP_T || a->E < 1 || a->E > COLI_GPU_ROUTE_MAX_E ||
	                a->K > 16 || a->K > a->E))
		return -ENOTSUP;
	/* grouped: the gather over a CTA per 8 pairs' rows (ptx/dense/route.cu plan_pair) */
	const int ctas =
	    a->gq ? (a->T * a->K + COLI_GPU_PLAN_GATHER - 1) / COLI_GPU_PLAN_GATHER : 1;

	return launch(g, a->rlog ? g->f_route_plan : g->f_moe_plan, (unsigned)ctas, 1,
	              COLI_GPU_PLAN_MAX_P, 0, args, "launch moe_plan");
}

/* Grid (row groups, splits, 1), as coli_gpu_dense_gemv; the last counter of
 * the array counts the grid's CTAs in (zero between launches like the
 * others: the last to arrive resets it). */
int coli_gpu_router_plan(coli_gpu_t *g, const struct coli_gpu_dense_gemv *r,
                         const struct coli_gpu_moe_plan *p)
{
	struct coli_gpu_dense_gemv a = *r;
	struct coli_gpu_moe_plan pl = *p;
	CUdeviceptr part = g->scratch, done = g->counts + sizeof(unsigned) * (DENSE_COUNTERS - 1);
	void *args[] = {&a, &part, &done, &pl};
	int di, groups, splits, rc = dgemv_shape(g, COLI_DTYPE_F32, &a, &di, &groups, &splits);

	if (rc)
		return rc;
	if (a.T > COLI_GPU_MAX_S || a.y2 || !p->rlog ||
	    (uint64_t)(uintptr_t)p->rlog != (uint64_t)(uintptr_t)a.y || a.ldy != p->E ||
	    a.rows != p->E || p->T != a.T || p->T * p->K > COLI_GPU_PLAN_MAX_P ||
	    p->E > COLI_GPU_ROUTE_MAX_E || p->K > 16 || p->K > p->E ||
	    (size_t)splits * a.T * a.rows > DENSE_SCRATCH_FLOATS)
		return -EINVAL;
	return launch3(g, g->f_dgemv_plan[a.T - 1], (unsigned)groups, (unsigned)splits, 1,
	               DG_WARPS * 32, args, "launch router + plan");
}

#else
#define NO_GPU return -ENODEV
void coli_gpu_dense_tiled(coli_gpu_t *g, int mode)
{
	(void)g, (void)mode;
}
int coli_gpu_copy(coli_gpu_t *g, uint64_t d, uint64_t s, size_t n)
{
	NO_GPU;
}
int coli_gpu_rmsnorm(coli_gpu_t *g, uint64_t x, uint64_t w, uint64_t y, int r, int n, float e)
{
	NO_GPU;
}
int coli_gpu_add_rmsnorm(coli_gpu_t *g, uint64_t x, uint64_t a, uint64_t w, uint64_t y, uint64_t q,
                         uint64_t qd, uint64_t qs, int r, int n, float e)
{
	NO_GPU;
}
int coli_gpu_acc_rmsnorm(coli_gpu_t *g, uint64_t x, const struct coli_gpu_pairs *p, uint64_t w,
                         uint64_t y, uint64_t q, uint64_t qd, uint64_t qs, int r, int n, float e)
{
	NO_GPU;
}
int coli_gpu_qk_rope_store(coli_gpu_t *g, uint64_t q, uint64_t k, uint64_t v, uint64_t qw,
                           uint64_t kw, float eps, int T, int nh, int nkv, int hd, int pos0,
                           uint64_t pp, uint64_t f, uint64_t kc, uint64_t vc)
{
	NO_GPU;
}
int coli_gpu_qk_rope_store_kv(coli_gpu_t *g, uint64_t q, uint64_t k, uint64_t v, uint64_t qw,
                              uint64_t kw, float eps, int T, int nh, int nkv, int hd, int pos0,
                              uint64_t pp, uint64_t f, uint64_t kc, uint64_t vc, int kt, int vt,
                              int so, float yf, uint64_t rows, uint64_t tab, int nbs)
{
	NO_GPU;
}
int coli_gpu_add_bias(coli_gpu_t *g, uint64_t y, uint64_t b, int r, int n)
{
	NO_GPU;
}
int coli_gpu_add(coli_gpu_t *g, uint64_t x, uint64_t y, int n)
{
	NO_GPU;
}
int coli_gpu_rope(coli_gpu_t *g, uint64_t x, int T, int nh, int hd, int p, uint64_t f)
{
	NO_GPU;
}
int coli_gpu_dense_gemv(coli_gpu_t *g, enum coli_dtype t, const struct coli_gpu_dense_gemv *m)
{
	NO_GPU;
}
int coli_gpu_embed(coli_gpu_t *g, enum coli_dtype t, uint64_t a, uint64_t s, uint64_t i, uint64_t x,
                   int T, int H)
{
	NO_GPU;
}
int coli_gpu_moe_accumulate(coli_gpu_t *g, uint64_t o, uint64_t y, uint64_t t, uint64_t w, int n,
                            int T, int H, uint64_t hy, uint64_t hmask)
{
	NO_GPU;
}
int coli_gpu_gather_rows(coli_gpu_t *g, uint64_t d, uint64_t s, uint64_t i, int n, size_t b)
{
	NO_GPU;
}
int coli_gpu_gated_add(coli_gpu_t *g, uint64_t o, uint64_t y, uint64_t gt, int T, int H)
{
	NO_GPU;
}
int coli_gpu_argmax(coli_gpu_t *g, uint64_t x, int n, uint64_t out)
{
	NO_GPU;
}
int coli_gpu_route(coli_gpu_t *g, uint64_t r, int T, int E, int K, int n, uint64_t s, uint64_t w)
{
	NO_GPU;
}
int coli_gpu_moe_plan(coli_gpu_t *g, const struct coli_gpu_moe_plan *a)
{
	NO_GPU;
}
int coli_gpu_router_plan(coli_gpu_t *g, const struct coli_gpu_dense_gemv *r,
                         const struct coli_gpu_moe_plan *p)
{
	NO_GPU;
}
#endif
