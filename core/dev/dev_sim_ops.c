/*
 * core/dev/dev_sim_ops.c — the simulated device's kernels: each op of struct
 * coli_dev_ops on its argument struct, computed at once on the calling
 * thread with the CPU kernels (cpu/), so --gpu sim gives the CPU path's bits
 * (GEMV and GEMM jobs through coli_gemv on views built from the job; the real
 * bf16 GEMM is within rounding of these). The device itself (memory, order,
 * the accumulate that reads host rows in place) is core/dev/dev_sim.c.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h" /* enum coli_ffn_act */
#include "core/dev/dev_sim.h"

/* y[s][ldy] = W . x_s for s < S with the CPU kernels: what a GEMV or GEMM
 * job means, bit for bit (the real bf16 GEMM differs only within rounding).
 * A quantized job's scales are where the job says (an expert's follow its
 * quants; a block of rows of a dense matrix, MLA's heads, has them apart). */
static void sim_job(enum coli_dtype t, const void *w, const unsigned short *scales, int rows, int K,
                    int S, const signed char *xq, const float *xd, const int *xqsum,
                    const float *xf, float *y, int ldy)
{
	struct coli_mat m;
	int nb = K / COLI_QBLOCK;

	if (rows <= 0) /* an empty job (coli_moe_plan: expert not resident) */
		return;
	coli_mat_view(&m, t, rows, K, w);
	if (scales)
		m.scales = scales;
	for (int s = 0; s < S; s++) {
		struct coli_act a = {
		    .n = K,
		    .f = xf ? xf + (size_t)s * K : NULL,
		    .q = xq ? (int8_t *)xq + (size_t)s * K : NULL,
		    .d = xd ? (float *)xd + (size_t)s * nb : NULL,
		    .qsum = xqsum ? (int32_t *)xqsum + (size_t)s * nb : NULL,
		};

		coli_gemv(&m, &a, y + (size_t)s * ldy, 0, rows);
	}
}

int coli_dev_sim_gemv(struct coli_dev *d, const struct coli_dev_jobs *a)
{
	IN_ORDER(d);
	if (a->n_jobs > COLI_GPU_MAX_JOBS)
		return -EINVAL; /* as the real launcher */
	for (int j = 0; j < a->n_jobs; j++) {
		const struct coli_gpu_gemv_job *jb = &a->jobs[j];

		sim_job(a->t, jb->w, jb->scales, jb->rows, jb->K, jb->S, jb->xq, jb->xd, jb->xqsum,
		        jb->xf, jb->y, jb->ldy);
	}
	return 0;
}

int coli_dev_sim_gemm(struct coli_dev *d, const struct coli_dev_jobs *a)
{
	IN_ORDER(d);
	for (int j = 0; j < a->n_jobs; j++) {
		const struct coli_gpu_gemm_job *jb = &a->gemm_jobs[j];
		unsigned elems = 32, bytes;

		/* rows of whole blocks (ptx/expert/kquant_gemm.cu) */
		if (coli_dtype_is_block(a->t))
			coli_dtype_block(a->t, &elems, &bytes);
		if (jb->S < 1 || jb->K % 32 || jb->K % (int)elems)
			return -EINVAL; /* as the real launcher */
		sim_job(a->t, jb->w, jb->scales, jb->rows, jb->K, jb->S, jb->xq, jb->xd, jb->xqsum,
		        jb->xf, jb->y, jb->ldy);
	}
	return 0;
}

/* x [nb * 32] quantized into q/dd/qs (act_quantize, and the ops that
 * quantize their output in the same launch) */
static int actq(struct coli_dev *d, uint64_t x, uint64_t q, uint64_t dd, uint64_t qs, int nb)
{
	IN_ORDER(d);
	struct coli_act a = {.q = (int8_t *)(uintptr_t)q,
	                     .d = (float *)(uintptr_t)dd,
	                     .qsum = (int32_t *)(uintptr_t)qs};

	coli_act_quantize(&a, (const float *)(uintptr_t)x, nb * COLI_QBLOCK);
	return 0;
}

int coli_dev_sim_act_quantize(struct coli_dev *d, const struct coli_dev_quantize *a)
{
	return actq(d, a->x, a->q, a->qd, a->qsum, a->n_blocks);
}

int coli_dev_sim_silu_mul(struct coli_dev *d, const struct coli_dev_silu *a)
{
	IN_ORDER(d);
	if (a->kind == COLI_ACT_SWIGLU_OAI) { /* gpt-oss: coli_act_ffn's steps */
		float *g = (float *)(uintptr_t)a->g, *u = (float *)(uintptr_t)a->u;
		const float *bg = (const float *)(uintptr_t)a->bg,
		            *bu = (const float *)(uintptr_t)a->bu;
		const int *idx = (const int *)(uintptr_t)a->idx; /* row r's bias row */

		for (int i = 0; (bg || bu) && i < a->n; i++) {
			size_t bi = (idx ? (size_t)idx[i / a->I] * a->I : 0) + i % a->I;

			if (bg)
				g[i] = g[i] + bg[bi];
			if (bu)
				u[i] = u[i] + bu[bi];
		}
		coli_swiglu_oai(g, u, (float *)(uintptr_t)a->h, a->n, a->alpha, a->limit);
		return a->q ? actq(d, a->h, a->q, a->qd, a->qsum, a->n / COLI_QBLOCK) : 0;
	}
	coli_silu_mul((const float *)(uintptr_t)a->g, (const float *)(uintptr_t)a->u,
	              (float *)(uintptr_t)a->h, a->n);
	return a->q ? actq(d, a->h, a->q, a->qd, a->qsum, a->n / COLI_QBLOCK) : 0;
}

int coli_dev_sim_copy(struct coli_dev *d, const struct coli_dev_copy *a)
{
	IN_ORDER(d);
	memmove((void *)(uintptr_t)a->dst, (const void *)(uintptr_t)a->src, a->n);
	return 0;
}

int coli_dev_sim_rmsnorm(struct coli_dev *d, const struct coli_dev_norm *a)
{
	IN_ORDER(d);
	for (int r = 0; r < a->rows; r++)
		coli_rmsnorm(F(a->x) + (size_t)r * a->n, a->w ? F(a->w) : NULL,
		             F(a->y) + (size_t)r * a->n, a->n, a->eps);
	return 0;
}

int coli_dev_sim_add_bias(struct coli_dev *d, const struct coli_dev_bias *a)
{
	IN_ORDER(d);
	const int *idx = (const int *)(uintptr_t)a->idx; /* row r's bias row, or none */

	for (size_t i = 0; i < (size_t)a->rows * a->n; i++)
		F(a->y)[i] += F(a->b)[(idx ? (size_t)idx[i / a->n] * a->n : 0) + i % a->n];
	return 0;
}

int coli_dev_sim_add(struct coli_dev *d, const struct coli_dev_add *a)
{
	IN_ORDER(d);
	for (int i = 0; i < a->n; i++)
		F(a->x)[i] += F(a->y)[i];
	return 0;
}

int coli_dev_sim_add_rmsnorm(struct coli_dev *d, const struct coli_dev_norm *a)
{
	IN_ORDER(d);
	if (a->add)
		coli_dev_sim_add(
		    d, &(struct coli_dev_add){.x = a->x, .y = a->add, .n = a->rows * a->n});
	coli_dev_sim_rmsnorm(d, a);
	return a->q ? actq(d, a->y, a->q, a->qd, a->qsum, a->rows * a->n / COLI_QBLOCK) : 0;
}

/* Row t's position and its slot: COLI_GPU_ROWS's table (several
 * sequences), or pos0 + t (pos0 read at posp when given) of slot 0. */
static int row_pos(uint64_t rows, uint64_t posp, int pos0, int t, int *slot)
{
	const int *r = (const int *)(uintptr_t)rows;

	*slot = r ? r[COLI_GPU_ROWS * t + 1] : 0;
	return r ? r[COLI_GPU_ROWS * t] : (posp ? *(const int *)(uintptr_t)posp : pos0) + t;
}

/* ptx/attn/kv_rows.cuh's kv_at: slot's position p in a layer's [n_blocks][32]
 * rows through the block table tab [n_seq][nbs] (0: the identity table).
 * 32 positions a block: KV_BLOCK there, COLI_KV_BLOCK in core/forward/kv.h. */
#define KV_BLOCK_SHIFT 5
static size_t kv_at(uint64_t tab, int nbs, int slot, int p)
{
	const size_t j = (size_t)slot * nbs + (size_t)(p >> KV_BLOCK_SHIFT);
	const size_t b = tab ? (size_t)((const int *)(uintptr_t)tab)[j] : j;

	return b << KV_BLOCK_SHIFT | (size_t)(p & ((1 << KV_BLOCK_SHIFT) - 1));
}

int coli_dev_sim_qk_rope_store(struct coli_dev *d, const struct coli_dev_qk_rope *a)
{
	IN_ORDER(d);
	const int T = a->T, nh = a->nh, nkv = a->nkv, hd = a->hd;
	size_t kvd = (size_t)nkv * hd;
	int slot;

	if (a->qw && !a->store_only)
		coli_dev_sim_rmsnorm(
		    d,
		    &(struct coli_dev_norm){
		        .x = a->q, .w = a->qw, .y = a->q, .rows = T * nh, .n = hd, .eps = a->eps});
	if (a->kw && !a->store_only)
		coli_dev_sim_rmsnorm(
		    d,
		    &(struct coli_dev_norm){
		        .x = a->k, .w = a->kw, .y = a->k, .rows = T * nkv, .n = hd, .eps = a->eps});
	for (int t = 0; !a->store_only && t < T; t++) { /* each token at its position */
		int p = row_pos(a->rows, a->posp, a->pos0, t, &slot);

		coli_rope(F(a->q) + (size_t)t * nh * hd, 1, nh, hd, p, F(a->inv_freq));
		coli_rope(F(a->k) + (size_t)t * kvd, 1, nkv, hd, p, F(a->inv_freq));
	}
	if (!a->store_only) {
		/* YaRN's factor after the rotation, as the CPU's rope_attn */
		for (size_t i = 0; a->f != 0.0f && a->f != 1.0f && i < (size_t)T * nh * hd; i++)
			F(a->q)[i] *= a->f;
		for (size_t i = 0; a->f != 0.0f && a->f != 1.0f && i < (size_t)T * kvd; i++)
			F(a->k)[i] *= a->f;
	}
	{ /* the rows in the cache's types, as the host's (core/forward/kv.c) */
		size_t kb = coli_kv_row_bytes(a->kt, (int)kvd, nkv);
		size_t vb = coli_kv_row_bytes(a->vt, (int)kvd, nkv);

		for (int t = 0; t < T; t++) {
			int p = row_pos(a->rows, a->posp, a->pos0, t, &slot);
			size_t at = kv_at(a->tab, a->nbs, slot, p);

			coli_kv_row_store(a->kt, (char *)F(a->kc) + at * kb,
			                  F(a->k) + (size_t)t * kvd, (int)kvd, hd);
			coli_kv_row_store(a->vt, (char *)F(a->vc) + at * vb,
			                  F(a->v) + (size_t)t * kvd, (int)kvd, hd);
		}
	}
	return 0;
}

int coli_dev_sim_rope(struct coli_dev *d, const struct coli_dev_rope *a)
{
	IN_ORDER(d);
	coli_rope_part(F(a->x), a->T, a->nh, a->hd, a->rd ? a->rd : a->hd, a->pos0, F(a->inv_freq));
	return 0;
}

/* Kv head g's view of a cache of rows [nseg][seg] values of type t (the
 * layout of cpu/cpu.h: q8's scales after the values, a segment each). */
static struct coli_kv_rows head_rows(uint64_t base, int t, int n, int nseg, int seg, int g)
{
	const size_t off = (size_t)g * seg * coli_kv_elem_bytes(t);

	return (struct coli_kv_rows){.p = (const char *)F(base) + off,
	                             .stride = coli_kv_row_bytes(t, n, nseg),
	                             .type = t,
	                             .soff = (int)(((size_t)(n + 3) & ~(size_t)3) + 4 * g - off),
	                             .seg = seg};
}

int coli_dev_sim_attention(struct coli_dev *d, const struct coli_dev_attention *a)
{
	IN_ORDER(d);
	const uint64_t q = a->q, K = a->k, V = a->v, out = a->out;
	const int T = a->T, nh = a->nh, hd = a->hd, group = nh / a->nkv, kvd = a->nkv * hd;
	const float scale = a->scale;
	/* the CPU walks positions in one order whatever the split (span) */
	int most = 0, slot;
	float *sc;

	for (int t = 0; t < T; t++) {
		int p = row_pos(a->rows, a->posp, a->pos0, t, &slot);

		most = p + 1 > most ? p + 1 : most;
	}
	sc = malloc(sizeof(float) * (size_t)most);
	if (!sc)
		return -ENOMEM;
	for (int t = 0; t < T; t++)
		for (int h = 0; h < nh; h++) {
			struct coli_kv_rows kr = head_rows(K, a->kt, kvd, a->nkv, hd, h / group);
			struct coli_kv_rows vr = head_rows(V, a->vt, kvd, a->nkv, hd, h / group);
			/* a sliding layer: the last `window` keys, as the CPU's groups */
			const int n = row_pos(a->rows, a->posp, a->pos0, t, &slot) + 1,
			          k0 = a->window && n > a->window ? n - a->window : 0;

			/* the slot's table (kv_at's): position k0 + i at its block's row */
			if (a->tab) {
				kr.blk = vr.blk =
				    (const int *)(uintptr_t)a->tab + (size_t)slot * a->nbs;
				kr.p0 = vr.p0 = k0;
				kr.bshift = vr.bshift = KV_BLOCK_SHIFT;
			} else {
				size_t at = kv_at(0, a->nbs, slot, k0);

				kr.p = (const char *)kr.p + at * kr.stride;
				vr.p = (const char *)vr.p + at * vr.stride;
			}
			coli_attention_head_kv(F(q) + ((size_t)t * nh + h) * hd, &kr, &vr, n - k0,
			                       hd, hd, scale, a->sinks ? F(a->sinks)[h] : -INFINITY,
			                       sc, F(out) + ((size_t)t * nh + h) * hd);
		}
	free(sc);
	return a->aq ? actq(d, out, a->aq, a->ad, a->aqs, T * nh * hd / COLI_QBLOCK) : 0;
}

/* coli_mla_rope on copies of kva and q (the op leaves its inputs as they
 * are, as the GPU's does), a token at a time at its position, then the rows
 * to their places: the cache row through the slot's block table. */
int coli_dev_sim_mla_prep(struct coli_dev *d, const struct coli_gpu_mla_prep *a)
{
	IN_ORDER(d);
	const int T = a->T, nh = a->nh, np = a->np, r = a->r, kl = a->kl, kr = kl + r, hd = np + r;
	const size_t rb = coli_kv_row_bytes(a->kt, kr, (kr + kl - 1) / kl);
	float *kva = malloc(sizeof(float) * (size_t)T * kr);
	float *q = malloc(sizeof(float) * (size_t)T * nh * hd);
	int slot;

	if (!kva || !q) {
		free(kva), free(q);
		return -ENOMEM;
	}
	memcpy(kva, a->kva, sizeof(float) * (size_t)T * kr);
	memcpy(q, a->q, sizeof(float) * (size_t)T * nh * hd);
	for (int t = 0; t < T; t++) {
		const int p = row_pos((uintptr_t)a->rows, (uintptr_t)a->posp, a->pos0, t, &slot);
		float *kt = kva + (size_t)t * kr;

		coli_mla_rope(kt, q + (size_t)t * nh * hd, a->w, a->inv_freq, 1, nh, np, kl, r, p,
		              a->eps, a->f);
		/* c_kv's scale and k_pe's under q8 */
		coli_kv_row_store(a->kt,
		                  (char *)a->cache + kv_at((uintptr_t)a->tab, a->nbs, slot, p) * rb,
		                  kt, kr, kl);
	}
	for (int t = 0; t < T; t++)
		for (int h = 0; h < nh; h++) {
			const float *x = q + ((size_t)t * nh + h) * hd;

			memcpy(a->qn + ((size_t)h * T + t) * np, x, sizeof(float) * np);
			memcpy(a->qrow + ((size_t)t * nh + h) * kr + kl, x + np, sizeof(float) * r);
		}
	free(kva), free(q);
	return 0;
}

/* Each query's nh heads as one group over its slot's latent rows (the CPU
 * forward's coli_attention_groups_mt: each group's bits are
 * coli_attention_group's), then the heads to their places. */
int coli_dev_sim_mla_attention(struct coli_dev *d, const struct coli_dev_mla *a)
{
	IN_ORDER(d);
	const int T = a->T, nh = a->nh, dv = a->dv;
	const int ldt = a->ldt ? a->ldt : nh * dv, ldh = a->ldh ? a->ldh : dv;
	int most = 0, slot;
	float *sc, *o;

	for (int t = 0; t < T; t++) {
		const int p = row_pos(a->rows, a->posp, a->pos0, t, &slot);

		most = p + 1 > most ? p + 1 : most;
	}
	sc = malloc(sizeof(float) * (size_t)most * 8);
	o = malloc(sizeof(float) * (size_t)nh * dv);
	if (!sc || !o) {
		free(sc), free(o);
		return -ENOMEM;
	}
	for (int t = 0; t < T; t++) {
		const int n = row_pos(a->rows, a->posp, a->pos0, t, &slot) + 1;
		/* the latent rows: ld floats apart (f32), or typed rows of dk values */
		struct coli_kv_rows c =
		    head_rows(a->cache, a->kt, a->dk, (a->dk + dv - 1) / dv, dv, 0);

		if (a->kt == COLI_KV_F32)
			c.stride = sizeof(float) * (size_t)a->ld;
		if (a->tab) { /* the slot's table (kv_at's) */
			c.blk = (const int *)(uintptr_t)a->tab + (size_t)slot * a->nbs;
			c.bshift = KV_BLOCK_SHIFT;
		} else {
			c.p = (const char *)c.p + kv_at(0, a->nbs, slot, 0) * c.stride;
		}
		coli_attention_group_kv(F(a->q) + (size_t)t * nh * a->dk, nh, &c, &c, n, a->dk, dv,
		                        a->scale, NULL, sc, o);
		for (int h = 0; h < nh; h++)
			memcpy(F(a->out) + (size_t)t * ldt + (size_t)h * ldh, o + (size_t)h * dv,
			       sizeof(float) * dv);
	}
	free(sc), free(o);
	return 0;
}

int coli_dev_sim_gather_rows(struct coli_dev *d, const struct coli_dev_gather *a)
{
	IN_ORDER(d);
	const int *id = (const int *)(uintptr_t)a->idx;
	const size_t row = a->row_bytes;

	for (int r = 0; r < a->n; r++)
		memcpy((char *)(uintptr_t)a->dst + (size_t)r * row,
		       (const char *)(uintptr_t)a->src + (size_t)id[r] * row, row);
	return 0;
}

int coli_dev_sim_embed(struct coli_dev *d, const struct coli_dev_embed *a)
{
	IN_ORDER(d);
	struct coli_mat m;
	const int *id = (const int *)(uintptr_t)a->ids;

	coli_mat_view(&m, a->t, 1, a->H, (const void *)(uintptr_t)a->table);
	m.scales = (const uint16_t *)(uintptr_t)a->scales; /* rows index both planes */
	for (int i = 0; i < a->T; i++)
		coli_mat_row_f32(&m, id[i], F(a->x) + (size_t)i * a->H);
	return 0;
}

int coli_dev_sim_gated_add(struct coli_dev *d, const struct coli_dev_gated *a)
{
	IN_ORDER(d);
	const int H = a->H;

	for (int t = 0; t < a->T; t++) {
		float g = 1.0f / (1.0f + expf(-F(a->gate)[t]));
		float *out = F(a->out) + (size_t)t * H;
		const float *y = F(a->y) + (size_t)t * H;

		for (int j = 0; j < H; j++)
			out[j] = out[j] + g * y[j];
	}
	return 0;
}

int coli_dev_sim_argmax(struct coli_dev *d, const struct coli_dev_argmax *a)
{
	IN_ORDER(d);
	*(int *)(uintptr_t)a->out = coli_argmax(F(a->x), a->n);
	return 0;
}

/* The CPU path's GEMV, row by row: the simulated dense device is the CPU. */
int coli_dev_sim_dense_gemv(struct coli_dev *d, const struct coli_dev_dense *op)
{
	IN_ORDER(d);
	const struct coli_gpu_dense_gemv *m = op->m;
	const enum coli_dtype t = op->t;
	struct coli_mat w;
	int nb = m->K / COLI_QBLOCK;

	coli_mat_view(&w, t, m->rows, m->K, m->w);
	if (m->scales)
		w.scales = m->scales;
	for (int s = 0; s < m->T; s++) {
		struct coli_act a = {
		    .n = m->K,
		    .f = m->xf ? (float *)m->xf + (size_t)s * m->K : NULL,
		    .q = m->xq ? (int8_t *)m->xq + (size_t)s * m->K : NULL,
		    .d = m->xd ? (float *)m->xd + (size_t)s * nb : NULL,
		    .qsum = m->xqsum ? (int32_t *)m->xqsum + (size_t)s * nb : NULL,
		};

		if (!m->y2) {
			coli_gemv(&w, &a, m->y + (size_t)s * m->ldy, 0, m->rows);
			continue;
		}
		/* stacked matrices (q, k, v): each range of rows to its own output */
		coli_gemv(&w, &a, m->y + (size_t)s * m->ldy, 0, m->rows1);
		coli_gemv(&w, &a, m->y2 + (size_t)s * m->ldy2, m->rows1, m->rows2);
		coli_gemv(&w, &a, m->y3 + (size_t)s * m->ldy3, m->rows2, m->rows);
	}
	return 0;
}

int coli_dev_sim_route(struct coli_dev *d, const struct coli_dev_route *a)
{
	IN_ORDER(d);
	const uint64_t rlog = a->rlog, sel = a->sel, selw = a->selw;
	const int T = a->T, E = a->E, K = a->K, norm = a->norm;
	float *p = malloc(sizeof(float) * (size_t)E);

	if (!p)
		return -ENOMEM;
	const struct coli_route_sig sig = {.bias = a->bias ? F(a->bias) : NULL,
	                                   .n_group = a->n_group,
	                                   .topk_group = a->topk_group,
	                                   .norm = norm,
	                                   .scale = a->scale};

	for (int t = 0; t < T; t++) {
		memcpy(p, F(rlog) + (size_t)t * E, sizeof(float) * (size_t)E);
		if (a->sigmoid)
			coli_route_sigmoid(p, E, K, &sig, (int *)(uintptr_t)sel + (size_t)t * K,
			                   F(selw) + (size_t)t * K);
		else
			coli_route(p, E, K, norm, (int *)(uintptr_t)sel + (size_t)t * K,
			           F(selw) + (size_t)t * K);
	}
	free(p);
	return 0;
}

/* ptx/dense/route.cu coli_moe_plan, one pair at a time. */
int coli_dev_sim_moe_plan(struct coli_dev *d, const struct coli_gpu_moe_plan *a)
{
	IN_ORDER(d);
	const int P = a->T * a->K, H = a->H, I = a->I;

	if (a->rlog) { /* coli_route_plan: route first */
		int rc = coli_dev_sim_route(
		    d, &(struct coli_dev_route){.rlog = (uint64_t)(uintptr_t)a->rlog,
		                                .sel = (uint64_t)(uintptr_t)a->sel,
		                                .selw = (uint64_t)(uintptr_t)a->selw,
		                                .T = a->T,
		                                .E = a->E,
		                                .K = a->K,
		                                .norm = a->norm});

		if (rc)
			return rc;
	}
	for (int i = 0; i < P; i++) {
		const int ex = a->sel[i], t = i / a->K, group = a->gq != NULL;
		const uint64_t slab = ex < a->E ? a->slabs[ex] : 0;
		int r = 0, o = 0, n = 0, S;

		for (int k = 0; k < P; k++) {
			r += a->sel[k] < ex || (a->sel[k] == ex && k / a->K < t);
			o += a->sel[k] == ex && k / a->K < t;
			n += a->sel[k] == ex;
		}
		S = !group                   ? 1
		    : o % COLI_GPU_MAX_S     ? 0
		    : n - o < COLI_GPU_MAX_S ? n - o
		                             : COLI_GPU_MAX_S;
		struct coli_gpu_gemv_job j = {
		    .rows = slab && S ? I : 0, .K = H, .S = S ? S : 1, .ldy = I};
		const size_t xr = group ? (size_t)r : (size_t)t;

		j.xq = (group ? a->gq : a->xq) + xr * H;
		j.xd = (group ? a->gd : a->xd) + xr * (H / 32);
		j.xqsum = (group ? a->gqs : a->xqsum) + xr * (H / 32);
		j.xf = (group ? a->gf : a->xf) + xr * H;
		for (int m = 0; m < 2; m++) {
			const uint64_t w = slab + (m ? a->up_off : a->gate_off);

			j.w = (const void *)(uintptr_t)w;
			j.scales = a->scale_gu
			               ? (const unsigned short *)(uintptr_t)(w + a->scale_gu)
			               : NULL;
			j.y = (m ? a->u : a->g) + (size_t)r * I;
			a->gu_jobs[2 * r + m] = j;
		}
		j = (struct coli_gpu_gemv_job){
		    .rows = slab && S ? H : 0, .K = I, .S = S ? S : 1, .ldy = H};
		j.w = (const void *)(uintptr_t)(slab + a->down_off);
		j.scales =
		    a->scale_d
		        ? (const unsigned short *)(uintptr_t)(slab + a->down_off + a->scale_d)
		        : NULL;
		j.xq = a->hq + (size_t)r * I;
		j.xd = a->hd + (size_t)r * (I / 32);
		j.xqsum = a->hqs + (size_t)r * (I / 32);
		j.xf = a->h + (size_t)r * I;
		j.y = a->y + (size_t)r * H;
		a->down_jobs[r] = j;
		a->pair_token[r] = t;
		a->pair_w[r] = a->selw[i];
		if (a->pair_expert)
			a->pair_expert[r] = ex < a->E ? ex : a->E - 1;
	}
	for (int r = 0; a->gq && r < P; r++) { /* grouped: the rows in pair order */
		const size_t t = (size_t)a->pair_token[r], b = H / 32;

		if (a->xquant) {
			memcpy(a->gq + r * (size_t)H, a->xq + t * H, (size_t)H);
			memcpy(a->gd + r * b, a->xd + t * b, b * sizeof(float));
			memcpy(a->gqs + r * b, a->xqsum + t * b, b * sizeof(int));
		} else {
			memcpy(a->gf + r * (size_t)H, a->xf + t * H, (size_t)H * sizeof(float));
		}
	}
	return 0;
}

int coli_dev_sim_router_plan(struct coli_dev *d, const struct coli_dev_router_plan *a)
{
	IN_ORDER(d);
	int rc =
	    coli_dev_sim_dense_gemv(d, &(struct coli_dev_dense){.t = COLI_DTYPE_F32, .m = a->r});

	return rc ? rc : coli_dev_sim_moe_plan(d, a->plan);
}

int coli_dev_sim_gemv_table(struct coli_dev *d, const struct coli_dev_jobs *a)
{
	IN_ORDER(d);
	return coli_dev_sim_gemv(
	    d,
	    &(struct coli_dev_jobs){.t = a->t,
	                            .jobs = (const struct coli_gpu_gemv_job *)(uintptr_t)a->table,
	                            .n_jobs = a->n_jobs});
}
