/*
 * core/forward/attn_dev.c — a layer's attention on the dense device, and the
 * shared expert: the attention norm (adding what the previous layer left:
 * PEND_*), q, k and v (one stacked GEMV where they could be stacked), their
 * biases, q/k norms and RoPE with k and v stored into the layer's KV cache
 * rows (one fused launch where coli_dense_dev_qk_fused allows), attention
 * over the cache (gpt-oss's sinks and sliding windows included), and o
 * (with its bias) into dd->proj. core/forward/forward_dev.c queues them
 * from layer_ops; core/forward/layer_host.c runs the shared expert after a
 * host-planned layer. Buffers: core/forward/dense_dev.h.
 *
 * Several sequences in a step (struct dstep's rows): the fused store and the
 * short runs' attention take every row's position and slot from the row
 * table (qk_store, attend); a run longer than COLI_GPU_MAX_S rows (a prompt's
 * chunk) attends in a launch of its own at its slot, the op-by-op path goes
 * a run at a time. Every launch addresses the cache (a layer's
 * [n_blocks][32] rows) through the device block table (dd->ktab: from slot
 * 0's row, or from the run's slot's row when the launch holds one run).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>

#include "core/core_internal.h"
#include "core/dev/dev.h"
#include "core/forward/dense_dev.h"

/* Whether q/k norms, RoPE and the KV store run as one launch that reads the
 * position from device memory (coli_qk_rope_store): not where the norm spans
 * the whole vector (qk_norm 2, OLMoE), the heads are too wide for it, or
 * RoPE is partial (GLM-4.5: coli_dev_rope's rd, op by op). */
int coli_dense_dev_qk_fused(const struct coli_model_config *c)
{
	return c->qk_norm != 2 && c->head_dim % 2 == 0 && c->head_dim <= 256 &&
	       c->rope_dim == c->head_dim;
}

/* Rows r0 .. r0 + T of q, k and v of one run at pos0 (posp: read on the
 * device, a graph's) or of several (rows), and where their keys and values
 * go: the layer's cache kc / vc through the block table from tab (slot 0's
 * row with rows, which name each row's slot; else the run's slot's). */
struct qk_rows {
	int r0, T, pos0, slot; /* slot: the run's (without rows) */
	uint64_t posp, rows, kc, vc, tab;
};

/* f32 rows k, v [T][kvd] of slot's positions pos0.. into the cache as they
 * are: a copy a run of consecutive rows (the host's table: a block's rows,
 * or more where the slot's blocks follow each other). */
static int copy_rows(struct coli_engine *e, struct coli_dense_dev *dd, const struct qk_rows *w,
                     uint64_t k, uint64_t v, size_t kvd)
{
	int rc = 0;

	for (int t = 0, n; !rc && t < w->T; t += n) {
		const size_t at = coli_kv_row(&e->kv, w->slot, w->pos0 + t);

		for (n = 1; t + n < w->T && coli_kv_row(&e->kv, w->slot, w->pos0 + t + n) == at + n;
		     n++)
			;
		rc = coli_dev_copy(dd->dev, &(struct coli_dev_copy){.dst = w->kc + at * kvd * 4,
		                                                    .src = k + t * kvd * 4,
		                                                    .n = n * kvd * 4});
		rc =
		    rc ? rc
		       : coli_dev_copy(dd->dev, &(struct coli_dev_copy){.dst = w->vc + at * kvd * 4,
		                                                        .src = v + t * kvd * 4,
		                                                        .n = n * kvd * 4});
	}
	return rc;
}

/* q/k norms, RoPE, and k and v into the cache rows: one fused launch
 * (coli_qk_rope_store) where coli_dense_dev_qk_fused allows, else op by op
 * (one run: the caller splits several). */
static int qk_heads(struct coli_engine *e, struct coli_dense_dev *dd, const struct dlayer *D,
                    const struct qk_rows *w)
{
	const struct coli_model_config *c = &e->m.cfg;
	int nh = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim, qd = nh * hd, kvd = nkv * hd;
	int rc = 0, T = w->T, pos0 = w->pos0;
	uint64_t kc = w->kc, vc = w->vc, q = dd->q + (size_t)w->r0 * qd * 4,
	         k = dd->k + (size_t)w->r0 * kvd * 4, v = dd->v + (size_t)w->r0 * kvd * 4;

	if (coli_dense_dev_qk_fused(c))
		return coli_dev_qk_rope_store(
		    dd->dev, &(struct coli_dev_qk_rope){.q = q,
		                                        .k = k,
		                                        .v = v,
		                                        .qw = c->qk_norm == 1 ? D->q_norm : 0,
		                                        .kw = c->qk_norm == 1 ? D->k_norm : 0,
		                                        .eps = c->norm_eps,
		                                        .T = T,
		                                        .nh = nh,
		                                        .nkv = nkv,
		                                        .hd = hd,
		                                        .pos0 = pos0,
		                                        .posp = w->posp,
		                                        .inv_freq = dd->inv_freq,
		                                        .kc = kc,
		                                        .vc = vc,
		                                        .kt = e->kv.kt,
		                                        .vt = e->kv.vt,
		                                        .f = e->s.rope_attn,
		                                        .rows = w->rows,
		                                        .tab = w->tab,
		                                        .nbs = e->kv.nbs});
	if (c->qk_norm) { /* 2: over the whole q and k, 1: per head */
		int whole = c->qk_norm == 2;
		struct coli_dev_norm nq = {.x = q, .w = D->q_norm, .y = q, .eps = c->norm_eps};
		struct coli_dev_norm nk = {.x = k, .w = D->k_norm, .y = k, .eps = c->norm_eps};

		nq.rows = whole ? T : T * nh, nq.n = whole ? qd : hd;
		nk.rows = whole ? T : T * nkv, nk.n = whole ? kvd : hd;
		rc = coli_dev_rmsnorm(dd->dev, &nq);
		rc = rc ? rc : coli_dev_rmsnorm(dd->dev, &nk);
	}
	struct coli_dev_rope rq = {.x = q,
	                           .inv_freq = dd->inv_freq,
	                           .T = T,
	                           .nh = nh,
	                           .hd = hd,
	                           .rd = c->rope_dim,
	                           .pos0 = pos0};
	struct coli_dev_rope rk = {.x = k,
	                           .inv_freq = dd->inv_freq,
	                           .T = T,
	                           .nh = nkv,
	                           .hd = hd,
	                           .rd = c->rope_dim,
	                           .pos0 = pos0};

	rc = rc ? rc : coli_dev_rope(dd->dev, &rq);
	rc = rc ? rc : coli_dev_rope(dd->dev, &rk);
	if (rc || (e->kv.kt == COLI_KV_F32 && e->kv.vt == COLI_KV_F32))
		return rc ? rc : copy_rows(e, dd, w, k, v, (size_t)kvd);
	/* rounded to the types, each row at its block's */
	return coli_dev_qk_rope_store(dd->dev, &(struct coli_dev_qk_rope){.q = q,
	                                                                  .k = k,
	                                                                  .v = v,
	                                                                  .T = T,
	                                                                  .nh = nh,
	                                                                  .nkv = nkv,
	                                                                  .hd = hd,
	                                                                  .pos0 = pos0,
	                                                                  .posp = w->posp,
	                                                                  .inv_freq = dd->inv_freq,
	                                                                  .kc = kc,
	                                                                  .vc = vc,
	                                                                  .kt = e->kv.kt,
	                                                                  .vt = e->kv.vt,
	                                                                  .store_only = 1,
	                                                                  .tab = w->tab,
	                                                                  .nbs = e->kv.nbs});
}

/* st's q/k heads into the cache: one sequence as before; several, the
 * table's rows in one fused launch, or op by op a run at a time. */
static int qk_store(struct coli_engine *e, struct coli_dense_dev *dd, const struct dlayer *D,
                    const struct dstep *st, uint64_t kc, uint64_t vc)
{
	int rc = 0;

	if (!st->rows)
		return qk_heads(
		    e, dd, D,
		    &(struct qk_rows){0, st->T, st->pos0, 0, dd->ids, 0, kc, vc, dd->ktab});
	if (coli_dense_dev_qk_fused(&e->m.cfg))
		return qk_heads(
		    e, dd, D,
		    &(struct qk_rows){0, st->T, 0, 0, 0, dd_rows(dd, e->s.tmax), kc, vc, dd->ktab});
	for (int r = 0; !rc && r < st->n_runs; r++) {
		const struct coli_fwd_run *R = &st->run[r];

		rc = qk_heads(e, dd, D,
		              &(struct qk_rows){R->r0, R->n, R->pos0, R->slot, 0, 0, kc, vc,
		                                dd_tab(dd, e->kv.nbs, R->slot)});
	}
	return rc;
}

/* The softmax scale of the device's attention. The CPU multiplies the
 * rotated dims of q and k by YaRN's cos/sin factor (core/forward/forward.c,
 * as transformers scales cos and sin): the fused launch does the same
 * (struct coli_dev_qk_rope's f), so the scale is the CPU's and the simulated
 * device gives its bits (gpt-oss). Op by op nothing multiplies q and k: with
 * every dim rotated (coli_model_dev_check keeps partial RoPE under YaRN off
 * the devices) q.k is then attn^2 q.k of the CPU's, so the scale takes the
 * factor squared instead, the same within rounding. */
static float dev_scale(const struct coli_engine *e)
{
	const struct coli_model_config *c = &e->m.cfg;
	float a = e->s.rope_attn, s = 1.0f / sqrtf((float)c->head_dim);

	if (coli_dense_dev_qk_fused(c))
		return c->rope_factor > 1 ? e->s.attn_scale : s;
	return a == 1.0f ? s : s * a * a;
}

/* a's queries and outputs from row r0 on (the quantized outputs too: int8
 * [T][qd], and a float and an int a 32-block) */
static struct coli_dev_attention from_row(struct coli_dev_attention a, int r0)
{
	const size_t qd = (size_t)a.nh * a.hd;

	a.q += r0 * qd * 4, a.out += r0 * qd * 4;
	if (a.aq)
		a.aq += r0 * qd, a.ad += r0 * qd / 8, a.aqs += r0 * qd / 8;
	return a;
}

/* Attention's launches for st's rows: one sequence, one launch (pos0 read
 * from dd->ids in a graph); several, coli_dense_dev_launch_next's, where
 * the prefill kernel may take a long run's. */
static int attend(struct coli_engine *e, struct coli_dense_dev *dd, struct coli_dev_attention a,
                  const struct dstep *st)
{
	struct dlaunch L;
	int rc = 0;

	if (!st->rows)
		return coli_dev_attention(dd->dev, &a);
	for (int i = 0; !rc && coli_dense_dev_launch_next(st, &i, &L);) {
		struct coli_dev_attention one = from_row(a, L.r0);

		one.T = L.T, one.pos0 = L.pos0;
		if (L.rows) {
			one.rows = dd_rows(dd, e->s.tmax) + (uint64_t)L.r0 * COLI_GPU_ROWS * 4;
		} else {
			one.tab = dd_tab(dd, e->kv.nbs, L.slot);
			one.posp = 0, one.rows = 0;
		}
		rc = coli_dev_attention(dd->dev, &one);
	}
	return rc;
}

/* Attention of layer l for st's rows; first, when `pending` (every layer but the first),
 * the previous layer's MLP output is added to the residual stream in the same
 * launch as this layer's norm. Leaves the projection in dd->proj: the caller
 * adds it with the ffn norm. */
int coli_dense_dev_attention(struct coli_engine *e, int l, const struct dstep *st, int pend)
{
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_dense_dev *dd = coli_dense_dev_at(e, l);
	const struct dlayer *D = &dd->L[l];
	int H = c->hidden, nh = c->n_heads, nkv = c->n_kv_heads, hd = c->head_dim;
	int qd = nh * hd, kvd = nkv * hd, rc, oq, T = st->T;
	/* the layer's [n_blocks][32] rows */
	uint64_t kc = dd->kcache + ((size_t)(l - dd->l0) * dd->layer_rows) * e->kv.krow;
	uint64_t vc = dd->vcache + ((size_t)(l - dd->l0) * dd->layer_rows) * e->kv.vrow;

	/* the norm also quantizes its rows for q, k and v (one prep for the three;
	 * MLA: kv_a and q_a, or q) */
	const struct dmat *xn_reader = c->kv_lora ? &D->kv_a : &D->q;
	/* (plan_dev -1: no expert of these layers on this device, no pairs to add) */
	const struct coli_gpu_pairs p = {.y = dd->plan_dev >= 0 ? e->vram.slot[dd->plan_dev].y : 0,
	                                 .token = dd->ptok,
	                                 .w = dd->pw,
	                                 .n = T * c->top_k};
	const struct coli_dev_norm nm = {.x = dd->x,
	                                 .add = pend == PEND_MLP ? dd->mlp : 0,
	                                 .pairs = &p, /* read by acc_rmsnorm only */
	                                 .w = D->attn_norm,
	                                 .y = dd->xn,
	                                 .q = coli_dtype_is_quant(xn_reader->dtype) ? dd->aq : 0,
	                                 .qd = dd->ad,
	                                 .qsum = dd->aqs,
	                                 .rows = T,
	                                 .n = H,
	                                 .eps = c->norm_eps};

	rc = pend == PEND_PAIRS
	         ? coli_dev_acc_rmsnorm(dd->dev, &nm) /* the previous layer's pairs */
	         : coli_dev_add_rmsnorm(dd->dev, &nm);
	if (c->kv_lora)
		return rc ? rc : coli_dense_dev_mla(e, dd, D, l, st);
	if (D->qkv.rows) { /* one launch, each range of rows to its buffer */
		struct coli_gpu_dense_gemv a = gemv_args(dd, &D->qkv, dd->xn, T, dd->q, qd);

		a.y2 = (float *)(uintptr_t)dd->k;
		a.y3 = (float *)(uintptr_t)dd->v;
		a.rows1 = qd, a.rows2 = qd + kvd;
		a.ldy2 = a.ldy3 = kvd;
		rc = rc ? rc
		        : coli_dev_dense_gemv(dd->dev,
		                              &(struct coli_dev_dense){.t = D->qkv.dtype, .m = &a});
	} else {
		rc = rc ? rc : gemm(dd, &D->q, dd->xn, T, dd->q, qd);
		rc = rc ? rc : gemm(dd, &D->k, dd->xn, T, dd->k, kvd);
		rc = rc ? rc : gemm(dd, &D->v, dd->xn, T, dd->v, kvd);
	}
	if (!rc && D->q_bias) {
		struct coli_dev_bias bq = {.y = dd->q, .b = D->q_bias, .rows = T, .n = qd};
		struct coli_dev_bias bk = {.y = dd->k, .b = D->k_bias, .rows = T, .n = kvd};
		struct coli_dev_bias bv = {.y = dd->v, .b = D->v_bias, .rows = T, .n = kvd};

		rc = coli_dev_add_bias(dd->dev, &bq);
		rc = rc ? rc : coli_dev_add_bias(dd->dev, &bk);
		rc = rc ? rc : coli_dev_add_bias(dd->dev, &bv);
	}
	rc = rc ? rc : qk_store(e, dd, D, st, kc, vc);
	/* a quantized o reads the attention output quantized: in the same launch */
	oq = coli_dtype_is_quant(D->o.dtype);
	rc = rc ? rc
	        : attend(e, dd,
	                 (struct coli_dev_attention){.q = dd->q,
	                                             .k = kc,
	                                             .v = vc,
	                                             .out = dd->att,
	                                             .T = T,
	                                             .pos0 = st->pos0,
	                                             .posp = dd->ids,
	                                             .span = e->kv.ctx,
	                                             .nh = nh,
	                                             .nkv = nkv,
	                                             .hd = hd,
	                                             .scale = dev_scale(e),
	                                             .aq = oq ? dd->aq : 0,
	                                             .ad = oq ? dd->ad : 0,
	                                             .aqs = oq ? dd->aqs : 0,
	                                             .kt = e->kv.kt,
	                                             .vt = e->kv.vt,
	                                             .sinks = D->sinks,
	                                             .window = e->m.layers[l].window,
	                                             .tab = dd->ktab,
	                                             .nbs = e->kv.nbs},
	                 st);
	rc = rc ? rc : gemm(dd, &D->o, dd->att, T, dd->proj, H);
	if (!rc && D->o_bias) /* gpt-oss: proj = o . att + b, as the CPU's */
		rc = coli_dev_add_bias(
		    dd->dev,
		    &(struct coli_dev_bias){.y = dd->proj, .b = D->o_bias, .rows = T, .n = H});
	return rc;
}

/* The shared expert: mlp += sigmoid(gate . xn) * swiglu(xn) (Qwen2-MoE), or
 * mlp += swiglu(xn) (GLM-4.5: not shared_gated; the host's 1 * y is y, so
 * a plain add is its bits); xn_ready: dd->aq holds xn quantized (by the ffn
 * norm). */
int coli_dense_dev_shared_expert(struct coli_engine *e, struct coli_dense_dev *dd,
                                 const struct dlayer *D, int T, int xn_ready)
{
	int rc;

	if (!e->m.cfg.shared_inter)
		return 0;
	rc = swiglu(dd, &D->sh_gate, &D->sh_up, &D->sh_down, dd->xn, xn_ready, T, dd->shy);
	if (!e->m.cfg.shared_gated)
		return rc ? rc
		          : coli_dev_add(dd->dev, &(struct coli_dev_add){.x = dd->mlp,
		                                                         .y = dd->shy,
		                                                         .n = T * e->m.cfg.hidden});
	rc = rc ? rc : prep(dd, &D->sh_router, dd->xn, T);
	rc = rc ? rc : gemm(dd, &D->sh_router, dd->xn, T, dd->gl, 1);
	return rc ? rc
	          : coli_dev_gated_add(dd->dev, &(struct coli_dev_gated){.out = dd->mlp,
	                                                                 .y = dd->shy,
	                                                                 .gate = dd->gl,
	                                                                 .T = T,
	                                                                 .H = e->m.cfg.hidden});
}
