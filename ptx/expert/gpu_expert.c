/*
 * ptx/expert/gpu_expert.c — launch wrappers for the routed experts' kernels of
 * ptx/expert/kernels.cu, ptx/expert/gemm.cu and ptx/expert/kquant_gemm.cu (ptx/dense/gpu_dense.c
 * has the dense part's): the grouped GEMV over a job table (inline in the launch's parameters up to
 * COLI_GPU_INL_JOBS jobs, else read from the mapped ring), the tensor-core GEMM with its tile per
 * token count, SiLU-multiply and the activations' quantization. Everything is queued on the
 * device's compute stream.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ptx/ptx.h"
#include "ptx/ptx_internal.h"

#ifdef COLI_HAVE_PTX
int coli_gpu_gemv(coli_gpu_t *g, enum coli_dtype dtype, const struct coli_gpu_gemv_job *jobs,
                  int n_jobs)
{
	CUdeviceptr table;
	CUfunction f;
	int max_rows = 0;
	void *args[1];

	if ((unsigned)dtype >= sizeof(g->f_gemv) / sizeof(g->f_gemv[0]) || !g->f_gemv[dtype])
		return -ENOTSUP;
	if (n_jobs <= 0 || n_jobs > MAX_JOBS)
		return -EINVAL;
	f = g->f_gemv[dtype];
	for (int i = 0; i < n_jobs; i++) {
		if (jobs[i].S < 1 || jobs[i].S > COLI_GPU_MAX_S || jobs[i].K % 32)
			return -EINVAL;
		max_rows = jobs[i].rows > max_rows ? jobs[i].rows : max_rows;
	}
	if (n_jobs <= COLI_GPU_INL_JOBS) { /* small: the table rides in the parameters */
		struct coli_gpu_gemv_inline inl;

		memset(&inl, 0, sizeof(inl));
		memcpy(inl.j, jobs, sizeof(*jobs) * n_jobs);
		args[0] = &inl;
		return coli_gpu_launch(g, g->f_gemv_inl[dtype],
		                       (unsigned)(max_rows + COLI_GPU_GEMV_ROWS - 1) /
		                           COLI_GPU_GEMV_ROWS,
		                       (unsigned)n_jobs, 1, 256, 0, args, "cuLaunchKernel(gemv)");
	}
	{
		uint64_t t;
		int rc = coli_gpu_job_table(g, jobs, sizeof(*jobs) * n_jobs, &t);

		if (rc)
			return rc;
		table = t;
	}
	args[0] = &table;
	return coli_gpu_launch(g, f,
	                       (unsigned)(max_rows + COLI_GPU_GEMV_ROWS - 1) / COLI_GPU_GEMV_ROWS,
	                       (unsigned)n_jobs, 1, 256, 0, args, "cuLaunchKernel(gemv)");
}

/* The block types' per-lane GEMV of 2026-12-02 (ptx/expert/kquant.cu, RowKQ), kept
 * so that one run of `tests/ptx/dense_kernels --bench kquant` times it beside
 * the staged kernel coli_gpu_gemv launches; nothing else calls it. Its
 * function is looked up at each call (a bench's launches only). */
int coli_gpu_gemv_kq_v0(coli_gpu_t *g, enum coli_dtype dtype, const struct coli_gpu_gemv_job *jobs,
                        int n_jobs)
{
	struct coli_gpu_gemv_inline inl;
	void *args[] = {&inl};
	CUfunction f;
	char name[40];
	int max_rows = 0;

	if (dtype < COLI_DTYPE_Q4_1 || dtype > COLI_DTYPE_Q6_K)
		return -ENOTSUP;
	if (n_jobs <= 0 || n_jobs > COLI_GPU_INL_JOBS)
		return -EINVAL;
	for (int i = 0; i < n_jobs; i++) {
		if (jobs[i].S < 1 || jobs[i].S > COLI_GPU_MAX_S || jobs[i].K % 32)
			return -EINVAL;
		max_rows = jobs[i].rows > max_rows ? jobs[i].rows : max_rows;
	}
	snprintf(name, sizeof(name), "coli_gemv_%s_v0_inl", coli_dtype_name(dtype));
	CUR(g);
	CK(g->cu->ModuleGetFunction(&f, g->mod_kquant, name), name);
	memset(&inl, 0, sizeof(inl));
	memcpy(inl.j, jobs, sizeof(*jobs) * n_jobs);
	return coli_gpu_launch(g, f,
	                       (unsigned)(max_rows + COLI_GPU_GEMV_ROWS - 1) / COLI_GPU_GEMV_ROWS,
	                       (unsigned)n_jobs, 1, 256, 0, args, "cuLaunchKernel(gemv v0)");
}

int coli_gpu_gemv_table(coli_gpu_t *g, enum coli_dtype dtype, uint64_t table, int n_jobs,
                        int max_rows)
{
	CUdeviceptr t = table;
	void *args[] = {&t};

	if ((unsigned)dtype >= sizeof(g->f_gemv) / sizeof(g->f_gemv[0]) || !g->f_gemv[dtype])
		return -ENOTSUP;
	if (n_jobs <= 0 || n_jobs > 65535 || max_rows <= 0)
		return -EINVAL;
	return coli_gpu_launch(g, g->f_gemv[dtype],
	                       (unsigned)(max_rows + COLI_GPU_GEMV_ROWS - 1) / COLI_GPU_GEMV_ROWS,
	                       (unsigned)n_jobs, 1, 256, 0, args, "cuLaunchKernel(gemv)");
}

/* Block types whose unit is two groups of 16 (two mmas a unit): their wide
 * tile spilled registers (ptxas, sm_90), so ptx/expert/kquant_gemm.cu has none and
 * their long runs take the 64 x 32 tile. */
static int kq_halves(enum coli_dtype t)
{
	return t == COLI_DTYPE_Q2_K || t == COLI_DTYPE_Q3_K || t == COLI_DTYPE_Q6_K;
}

/* The q8/q4 tile of a run of S tokens: the smallest that holds it (on an
 * H200, qwen3-30b experts: 128 x 16 0.42 ms a layer at 2-16 tokens where
 * 64 x 32 takes 0.54-0.55 and 64 x 64 0.75-0.77; 64 x 32 0.58 at 32 tokens
 * where the others take 0.80; 64 x 64 1.3x faster than 64 x 32 at 128).
 * The block types (ptx/expert/kquant_gemm.cu) take the same tiles. coli_gpu_gemm_tile
 * forces one (tests, the bench). */
static int quant_tile(const coli_gpu_t *g, enum coli_dtype dtype, int S)
{
	int t = 0;

	if (g->gemm_bn)
		S = g->gemm_bn;
	while (t < COLI_GPU_GEMM_TILES_Q - 1 && S <= COLI_GPU_GEMM_TILE_TOKENS(t + 1))
		t++;
	/* ptx/expert/kquant_gemm.cu: not Q2_K, Q3_K, Q6_K */
	if (t == 0 && coli_dtype_is_block(dtype))
		return g->gemm_kq_wide_no || kq_halves(dtype) ? 1 : 0;
	return t == 0 && g->gemm_wide_no ? 1 : t;
}

/* Dynamic shared memory of a q8/q4 or block-type CTA of tile t */
static unsigned quant_smem(enum coli_dtype dtype, int t)
{
	return coli_dtype_is_block(dtype) ? COLI_GPU_GEMM_SMEM_KQ(t)
	                                  : COLI_GPU_GEMM_SMEM_Q(dtype == COLI_DTYPE_Q4_0, t);
}

/* One launch: one CTA per tile of every job, numbered job after job (tile0),
 * so a CTA finds its job by binary search over the table. bf16 tiles are
 * COLI_GPU_GEMM_ROWS_BF16 x _TOKENS; a q8/q4 job has its own (quant_tile),
 * the wide ones first (their CTAs take longest). */
int coli_gpu_gemm(coli_gpu_t *g, enum coli_dtype dtype, const struct coli_gpu_gemm_job *jobs,
                  int n_jobs)
{
	const int quant =
	    dtype == COLI_DTYPE_Q8_0 || dtype == COLI_DTYPE_Q4_0 || coli_dtype_is_block(dtype);
	unsigned elems = 32, bytes;
	const unsigned threads = quant ? COLI_GPU_GEMM_THREADS_Q : COLI_GPU_GEMM_THREADS_BF16;
	int n[COLI_GPU_GEMM_TILES_Q] = {0}, at[COLI_GPU_GEMM_TILES_Q];
	unsigned smem = 0;
	long tiles = 0;
	void *args[2];

	if ((unsigned)dtype >= sizeof(g->f_gemm) / sizeof(g->f_gemm[0]) || !g->f_gemm[dtype])
		return -ENOTSUP;
	if (n_jobs <= 0 || n_jobs > MAX_JOBS)
		return -EINVAL;
	if (coli_dtype_is_block(dtype)) /* rows of whole blocks */
		coli_dtype_block(dtype, &elems, &bytes);
	for (int i = 0; i < n_jobs; i++) {
		const struct coli_gpu_gemm_job *j = &jobs[i];

		if (j->S < 1 || j->rows < 1 || j->K < 32 || j->K % 32 || j->K % (int)elems ||
		    j->ldy < j->rows)
			return -EINVAL;
		n[quant ? quant_tile(g, dtype, j->S) : 0]++;
	}
	for (int t = 0, a = 0; t < COLI_GPU_GEMM_TILES_Q; t++) { /* wide first */
		const unsigned st = quant ? quant_smem(dtype, t) : 0;

		at[t] = a, a += n[t];
		if (n[t] && st > smem)
			smem = st;
	}
	for (int i = 0; i < n_jobs; i++) {
		const int t = quant ? quant_tile(g, dtype, jobs[i].S) : 0;

		g->gjobs_host[at[t]] = jobs[i];
		g->gjobs_host[at[t]++].tile = t;
	}
	for (int i = 0; i < n_jobs; i++) {
		struct coli_gpu_gemm_job *j = &g->gjobs_host[i];
		const int bm = quant ? COLI_GPU_GEMM_TILE_ROWS(j->tile) : COLI_GPU_GEMM_ROWS_BF16;
		const int bn = quant ? COLI_GPU_GEMM_TILE_TOKENS(j->tile) : COLI_GPU_GEMM_TOKENS;

		j->tile0 = (int)tiles;
		tiles += (long)((j->rows + bm - 1) / bm) * ((j->S + bn - 1) / bn);
		if (tiles > 0x7fffffffL)
			return -EINVAL;
	}
	CUR(g);
	if (n_jobs <= COLI_GPU_INL_JOBS) { /* small: the table rides in the parameters */
		struct coli_gpu_gemm_inline inl;

		memset(&inl, 0, sizeof(inl));
		memcpy(inl.j, g->gjobs_host, sizeof(*jobs) * n_jobs);
		args[0] = &inl;
		args[1] = &n_jobs;
		return coli_gpu_launch(g, g->f_gemm_inl[dtype], (unsigned)tiles, 1, 1, threads,
		                       smem, args, "cuLaunchKernel(gemm)");
	}
	/* a long table: every CTA binary-searches it, so it goes to device
	 * memory, pulled by the SMs from the mapped job ring (coli_pull, after
	 * the previous GEMM launch has read the last one: stream order and
	 * pdl_entry). Neither a copy from pageable memory (the host would wait
	 * for the stream to drain) nor one on the copy engine (behind the
	 * staging copies) */
	{
		uint64_t table;
		int rc = coli_gpu_job_table(g, g->gjobs_host, sizeof(*jobs) * n_jobs, &table);

		rc = rc ? rc : coli_gpu_pull(g, g->gjobs, table, sizeof(*jobs) * n_jobs);
		if (rc)
			return rc;
	}
	args[0] = &g->gjobs;
	args[1] = &n_jobs;
	return coli_gpu_launch(g, g->f_gemm[dtype], (unsigned)tiles, 1, 1, threads, smem, args,
	                       "cuLaunchKernel(gemm)");
}

void coli_gpu_gemm_tile(coli_gpu_t *g, int tokens)
{
	g->gemm_bn = tokens;
}

int coli_gpu_silu_mul(coli_gpu_t *g, uint64_t gate, uint64_t up, uint64_t h, int n)
{
	CUdeviceptr a = gate, b = up, c = h;
	void *args[] = {&a, &b, &c, &n};

	return coli_gpu_launch(g, g->f_silu, (unsigned)(n + 255) / 256, 1, 1, 256, 0, args,
	                       "cuLaunchKernel(silu_mul)");
}

int coli_gpu_silu_mul_q(coli_gpu_t *g, uint64_t gate, uint64_t up, uint64_t h, uint64_t q,
                        uint64_t d, uint64_t qsum, int n_blocks)
{
	CUdeviceptr a = gate, b = up, c = h, e = q, f = d, s = qsum;
	void *args[] = {&a, &b, &c, &e, &f, &s, &n_blocks};

	return coli_gpu_launch(g, g->f_siluq, (unsigned)(n_blocks + 7) / 8, 1, 1, 256, 0, args,
	                       "cuLaunchKernel(silu_mul_q)");
}

int coli_gpu_swiglu_oai(coli_gpu_t *g, const struct coli_gpu_swiglu_oai *a)
{
	CUdeviceptr ga = a->g, u = a->u, bg = a->bg, bu = a->bu, x = a->idx, h = a->h, q = a->q,
	            d = a->qd, s = a->qsum;
	int n = a->n, I = a->I;
	float alpha = a->alpha, limit = a->limit;
	void *args[] = {&ga, &u, &bg, &bu, &x, &h, &q, &d, &s, &n, &I, &alpha, &limit};

	if (n <= 0 || I <= 0 || (a->q && n % 32))
		return -EINVAL;
	/* a warp a 32-element block, 8 a CTA */
	return coli_gpu_launch(g, g->f_swiglu_oai, (unsigned)((n + 31) / 32 + 7) / 8, 1, 1, 256, 0,
	                       args, "cuLaunchKernel(swiglu_oai)");
}

int coli_gpu_pair_bias(coli_gpu_t *g, uint64_t y, uint64_t b, uint64_t idx, int rows, int n)
{
	CUdeviceptr a = y, c = b, x = idx;
	void *args[] = {&a, &c, &x, &rows, &n};

	if (rows <= 0 || n <= 0 || !y || !b || !idx)
		return -EINVAL;
	return coli_gpu_launch(g, g->f_pair_bias, (unsigned)(((size_t)rows * n + 255) / 256), 1, 1,
	                       256, 0, args, "cuLaunchKernel(pair_bias)");
}

int coli_gpu_act_quantize(coli_gpu_t *g, uint64_t x, uint64_t q, uint64_t d, uint64_t qsum,
                          int n_blocks)
{
	CUdeviceptr a = x, b = q, c = d, e = qsum;
	void *args[] = {&a, &b, &c, &e, &n_blocks};

	/* 8 warps per CTA, one warp per 32-block */
	return coli_gpu_launch(g, g->f_actq, (unsigned)(n_blocks + 7) / 8, 1, 1, 256, 0, args,
	                       "cuLaunchKernel(act_quantize)");
}

#endif
