/*
 * core/forward/mla_dev.c — multi-head latent attention (DeepSeek-V3, Kimi-K2)
 * on the dense device: core/forward/mla.c's absorbed form op for op, so the
 * simulated device computes that file's bits. After the attention norm
 * (core/forward/attn_dev.c), for T tokens (shapes as in mla.c: nh heads, kl =
 * kv_lora, r = rope_dim, np = qk_nope, hd = np + r, v = v_head, ql = q_lora):
 *
 *   kva  [T][kl + r]     kv_a . xn
 *   qa   [T][ql]         rmsnorm(q_a . xn)          (without q_lora: none)
 *   q    [T][nh][hd]     q_b . qa (or attn_q . xn)
 *   mla_prep             t's cache row = [norm(c_kv) || rope(k_pe)] (its slot's
 *                        position, a row of the pool's blocks: attend below),
 *                        qrow[t][h][kl..] = rope(q_pe), qn = q_nope head-major
 *   qn   [nh][T][np]     head h's q_nope rows: one GEMV job input per head
 *   qrow [T][nh][kl + r] q_abs = W_UK^T[h] . q_nope[h] at [0, kl) (k_b heads)
 *   lat  [nh][T][kl]     mla_attention's output, head-major for v_b's jobs
 *   att  [T][nh][v]      W_UV[h] . lat[h] (v_b heads), then o into dd->proj
 *
 * The per-head matrices (k_b: nh blocks of [kl][np]; v_b: nh blocks of
 * [v][kl]) run as one grouped launch of nh jobs, a job a head, reading its
 * head-major input rows: at decode (T <= COLI_GPU_STEP_T, in jobs of
 * COLI_GPU_MAX_S tokens at most) from job tables built here at open for each
 * T (fixed addresses: a captured graph replays them), in a prefill on the
 * GEMM from a host job list. A quantized matrix
 * reads its input quantized (act_quantize over the head-major rows: a head's
 * 32-blocks are the blocks mla.c's per-head rows quantize to).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_internal.h"
#include "core/dev/dev.h"
#include "core/forward/dense_dev.h"

/* Head h's block of `rows` rows of m, a matrix of its own (the planar
 * layout: every row's quants, then every row's scales). */
static struct dmat head_rows(const struct dmat *m, int h, int rows)
{
	const size_t sb = m->scales ? (size_t)m->cols / COLI_QBLOCK * 2 : 0; /* a row's scales */
	const size_t qb = coli_dtype_row_bytes(m->dtype, m->cols);
	struct dmat v = *m;

	v.rows = rows;
	v.w = m->w + (uint64_t)h * rows * qb;
	v.scales = m->scales ? m->scales + (uint64_t)h * rows * sb : 0;
	return v;
}

/* The job of head h of m (rows a head) over the S tokens t0.. of T: their
 * input rows [S][K] at head h's place in the head-major x ([nh][T][K]; and
 * in aq/ad/aqs, quantized), their output rows y + h * ldh floats apart by
 * ldy from token t0's. */
static struct coli_gpu_gemm_job head_job(const struct coli_dense_dev *dd, const struct dmat *m,
                                         int h, int rows, int T, int t0, int S, uint64_t x,
                                         uint64_t y, int ldy, int ldh)
{
	const struct dmat w = head_rows(m, h, rows);
	const size_t at = ((size_t)h * T + t0) * m->cols; /* the first input value */
	const int quant = coli_dtype_is_quant(m->dtype);

	return (struct coli_gpu_gemm_job){
	    .w = (const void *)(uintptr_t)w.w,
	    .scales = (const unsigned short *)(uintptr_t)w.scales,
	    .xq = quant ? (const signed char *)(uintptr_t)(dd->aq + at) : NULL,
	    .xd = quant ? (const float *)(uintptr_t)(dd->ad + at / COLI_QBLOCK * 4) : NULL,
	    .xqsum = quant ? (const int *)(uintptr_t)(dd->aqs + at / COLI_QBLOCK * 4) : NULL,
	    .xf = quant ? NULL : (const float *)(uintptr_t)(x + at * 4),
	    .y = (float *)(uintptr_t)(y + ((uint64_t)h * ldh + (uint64_t)t0 * ldy) * 4),
	    .rows = rows,
	    .K = m->cols,
	    .S = S,
	    .ldy = ldy,
	};
}

/* Layer D's k_b (which 0) or v_b (1) jobs, every head, for T tokens in
 * pieces of S (the last one shorter): nh * ceil(T / S) jobs, head by head. */
static int fill_jobs(const struct coli_engine *e, const struct coli_dense_dev *dd,
                     const struct dlayer *D, int T, int S, int which,
                     struct coli_gpu_gemm_job *jobs)
{
	const struct coli_model_config *c = &e->m.cfg;
	const int nh = c->n_heads, kl = c->kv_lora, kr = kl + c->rope_dim, v = c->v_head;
	int n = 0;

	for (int h = 0; h < nh; h++)
		for (int t0 = 0; t0 < T; t0 += S) {
			const int s = T - t0 < S ? T - t0 : S;

			jobs[n++] = which == 0 ? head_job(dd, &D->k_b, h, kl, T, t0, s, dd->qn,
			                                  dd->qrow, nh * kr, kr)
			                       : head_job(dd, &D->v_b, h, v, T, t0, s, dd->lat,
			                                  dd->att, nh * v, v);
		}
	return n;
}

/* A decode step's T rows (one sequence's, or a token of each of several)
 * take GEMV jobs of COLI_GPU_MAX_S tokens at most from a device table
 * written at open: T's table starts at job coli_dense_dev_mla_table(nh, T)
 * (T = COLI_GPU_STEP_T + 1: every table's jobs). Fixed addresses, so a
 * captured graph replays them. */
static int step_jobs(int nh, int T) /* T rows' jobs: nh a piece of COLI_GPU_MAX_S */
{
	return nh * ((T + COLI_GPU_MAX_S - 1) / COLI_GPU_MAX_S);
}

size_t coli_dense_dev_mla_table(int nh, int T)
{
	size_t at = 0;

	for (int u = 1; u < T; u++)
		at += (size_t)step_jobs(nh, u);
	return at;
}

/* At open, after the buffers (core/forward/dense_dev.c allocates the
 * tables): the decode jobs of dd's layers, and the host list a prefill's
 * jobs are written into. */
int coli_dense_dev_mla_tables(struct coli_engine *e, struct coli_dense_dev *dd)
{
	const int nh = e->m.cfg.n_heads, most = step_jobs(nh, COLI_GPU_STEP_T);
	struct coli_gpu_gemm_job *jobs = malloc(sizeof(*jobs) * most);
	struct coli_gpu_gemv_job *gv = malloc(sizeof(*gv) * most);
	int rc = jobs && gv ? 0 : -ENOMEM;

	dd->mla_jobs = calloc((size_t)nh, sizeof(*dd->mla_jobs));
	rc = rc ? rc : dd->mla_jobs ? 0 : -ENOMEM;
	for (int l = dd->l0; !rc && l < dd->l1; l++) {
		struct dlayer *D = &dd->L[l];

		for (int which = 0; !rc && which < 2; which++) {
			const uint64_t table = which ? D->vb_jobs : D->kb_jobs;

			for (int T = 1; !rc && T <= COLI_GPU_STEP_T; T++) {
				const int n = fill_jobs(e, dd, D, T, COLI_GPU_MAX_S, which, jobs);

				for (int j = 0; j < n;
				     j++) /* a GEMM job starts with a GEMV job's fields */
					memcpy(&gv[j], &jobs[j], sizeof(gv[j]));
				rc = coli_dev_upload(
				    dd->dev, table + sizeof(*gv) * coli_dense_dev_mla_table(nh, T),
				    gv, sizeof(*gv) * n);
			}
		}
	}
	free(jobs), free(gv);
	return rc;
}

/* Every head of k_b (which 0) or v_b (1) over the T tokens' head-major input:
 * a decode step's from its table, a prefill chunk's on the GEMM. */
static int heads(struct coli_engine *e, struct coli_dense_dev *dd, const struct dlayer *D, int T,
                 int which)
{
	const struct dmat *m = which ? &D->v_b : &D->k_b;
	const int nh = e->m.cfg.n_heads;

	if (T <= COLI_GPU_STEP_T)
		return coli_dev_gemv_table(
		    dd->dev, &(struct coli_dev_jobs){.t = m->dtype,
		                                     .table = (which ? D->vb_jobs : D->kb_jobs) +
		                                              sizeof(struct coli_gpu_gemv_job) *
		                                                  coli_dense_dev_mla_table(nh, T),
		                                     .n_jobs = step_jobs(nh, T),
		                                     .max_rows = m->rows / nh});
	fill_jobs(e, dd, D, T, T, which, dd->mla_jobs);
	return coli_dev_gemm(dd->dev, &(struct coli_dev_jobs){
	                                  .t = m->dtype, .gemm_jobs = dd->mla_jobs, .n_jobs = nh});
}

/* The latent attention's launches for st's rows (a's fields those of the
 * whole step): one sequence, one launch; several, coli_dense_dev_launch_next's
 * (the queries and the head-major outputs from the launch's first row on). */
static int attend(struct coli_engine *e, struct coli_dense_dev *dd, struct coli_dev_mla a,
                  const struct dstep *st)
{
	struct dlaunch L;
	int rc = 0;

	if (!st->rows)
		return coli_dev_mla_attention(dd->dev, &a);
	for (int i = 0; !rc && coli_dense_dev_launch_next(st, &i, &L);) {
		struct coli_dev_mla one = a;

		one.q += (uint64_t)L.r0 * a.nh * a.dk * 4, one.out += (uint64_t)L.r0 * a.ldt * 4;
		one.T = L.T, one.pos0 = L.pos0, one.posp = 0;
		if (L.rows)
			one.rows = dd_rows(dd, e->s.tmax) + (uint64_t)L.r0 * COLI_GPU_ROWS * 4;
		else
			one.tab = dd_tab(dd, e->kv.nbs, L.slot);
		rc = coli_dev_mla_attention(dd->dev, &one);
	}
	return rc;
}

/* Layer l's attention for st's rows after its norm (dd->xn, quantized where
 * kv_a is), into dd->proj. The latent rows are the pool's blocks, as the
 * other families' keys (core/forward/attn_dev.c): through the device block
 * table, each row at its slot's position. */
int coli_dense_dev_mla(struct coli_engine *e, struct coli_dense_dev *dd, const struct dlayer *D,
                       int l, const struct dstep *st)
{
	const struct coli_model_config *c = &e->m.cfg;
	const int H = c->hidden, nh = c->n_heads, hd = c->head_dim, np = c->qk_nope,
	          r = c->rope_dim, kl = c->kv_lora, kr = kl + r, ql = c->q_lora, T = st->T;
	/* the layer's [n_blocks][32] rows */
	const uint64_t cache = dd->kcache + (uint64_t)(l - dd->l0) * dd->layer_rows * e->kv.krow;
	int rc;

	/* xn (quantized by the norm where the matrices are) into kv_a and q_a / q */
	rc = gemm(dd, &D->kv_a, dd->xn, T, dd->kva, kr);
	if (ql) {
		rc = rc ? rc : gemm(dd, &D->q_a, dd->xn, T, dd->qa, ql);
		rc = rc ? rc
		        : coli_dev_rmsnorm(dd->dev, &(struct coli_dev_norm){.x = dd->qa,
		                                                            .w = D->q_a_norm,
		                                                            .y = dd->qa,
		                                                            .rows = T,
		                                                            .n = ql,
		                                                            .eps = c->norm_eps});
		rc = rc ? rc : prep(dd, &D->q, dd->qa, T);
		rc = rc ? rc : gemm(dd, &D->q, dd->qa, T, dd->q, nh * hd);
	} else {
		rc = rc ? rc : gemm(dd, &D->q, dd->xn, T, dd->q, nh * hd);
	}
	rc = rc ? rc
	        : coli_dev_mla_prep(
	              dd->dev,
	              &(struct coli_gpu_mla_prep){
	                  .kva = (const float *)(uintptr_t)dd->kva,
	                  .q = (const float *)(uintptr_t)dd->q,
	                  .w = (const float *)(uintptr_t)D->kv_a_norm,
	                  .inv_freq = (const float *)(uintptr_t)dd->inv_freq,
	                  .posp = st->rows ? NULL : (const int *)(uintptr_t)dd->ids,
	                  .cache = (void *)(uintptr_t)cache,
	                  .kt = e->kv.kt,
	                  .qn = (float *)(uintptr_t)dd->qn,
	                  .qrow = (float *)(uintptr_t)dd->qrow,
	                  .T = T,
	                  .nh = nh,
	                  .np = np,
	                  .r = r,
	                  .kl = kl,
	                  .pos0 = st->pos0,
	                  .eps = c->norm_eps,
	                  .f = e->s.rope_attn,
	                  .rows = st->rows ? (const int *)(uintptr_t)dd_rows(dd, e->s.tmax) : NULL,
	                  .tab = (const int *)(uintptr_t)dd->ktab,
	                  .nbs = e->kv.nbs});
	/* q_abs = W_UK^T[h] . q_nope[h] beside q_pe */
	rc = rc ? rc : prep(dd, &D->k_b, dd->qn, T * nh);
	rc = rc ? rc : heads(e, dd, D, T, 0);
	rc = rc ? rc
	        : attend(e, dd,
	                 (struct coli_dev_mla){.q = dd->qrow,
	                                       .cache = cache,
	                                       .out = dd->lat,
	                                       .posp = dd->ids,
	                                       .T = T,
	                                       .pos0 = st->pos0,
	                                       .span = e->kv.ctx,
	                                       .nh = nh,
	                                       .dk = kr,
	                                       .dv = kl,
	                                       .ld = kr,
	                                       .ldt = kl,
	                                       .ldh = T * kl,
	                                       .scale = e->s.attn_scale,
	                                       .kt = e->kv.kt,
	                                       .tab = dd->ktab,
	                                       .nbs = e->kv.nbs},
	                 st);
	/* each head's values from the latent, W_UV[h] . lat[h], then o */
	rc = rc ? rc : prep(dd, &D->v_b, dd->lat, T * nh);
	rc = rc ? rc : heads(e, dd, D, T, 1);
	rc = rc ? rc : prep(dd, &D->o, dd->att, T);
	return rc ? rc : gemm(dd, &D->o, dd->att, T, dd->proj, H);
}
