/*
 * core/forward/mla.c — multi-head latent attention (MLA: DeepSeek-V3, Kimi-K2)
 * on the CPU, in the absorbed form for prefill and decode alike (one path).
 *
 * Shapes, per token t (nh heads; kl = kv_lora, r = rope_dim, np = qk_nope,
 * hd = np + r, v = v_head):
 *   q      [nh][hd]       q_b(rmsnorm(q_a(xn))) or attn_q(xn); head = [q_nope || q_pe]
 *   kva    [kl + r]       kv_a(xn) = [c_kv || k_pe]; c_kv normed by kv_a_norm,
 *                         k_pe roped; this row is the token's KV cache row
 *   qrow   [nh][kl + r]   [q_abs || q_pe], q_abs[h] = W_UK^T[h] . q_nope[h]
 *                         (attn_k_b's block of head h, [kl][np])
 *   lat    [nh][kl]       softmax(qrow[h] . cache rows * scale) . c_kv rows
 *   att    [nh][v]        W_UV[h] . lat[h] (attn_v_b's block of head h, [v][kl])
 *   out    x += attn_o . att
 * Every cached row is [c_kv || k_pe]: the scores are MQA over kl + r values
 * with one KV head shared by all nh heads, the values the first kl of the
 * same row, so coli_attention_groups_mt runs it (hd = kl + r, vd = kl, K = V).
 * It equals transformers' expanded form (k_nope = W_UK c_kv, v = W_UV c_kv)
 * up to fp32 rounding: q_nope . (W_UK c_kv) = (W_UK^T q_nope) . c_kv.
 *
 * RoPE: rotate-half over the last r dims of each query head and of k_pe,
 * with YaRN's inv_freq and its cos/sin factor (s->rope_attn, multiplied
 * into the rotated values) when the config has rope_factor. A checkpoint
 * with rope_interleave (DeepSeek-V3's default) had the RoPE rows of its q_b /
 * q_proj and kv_a_proj_with_mqa de-interleaved by coli convert
 * (core/convert/convert_map.c), so rotate-half here is transformers'
 * interleaved rotation, exactly. The softmax scale is s->attn_scale
 * (hd^-0.5, times YaRN's mscale^2: core/model/rope.c).
 *
 * On a device the same steps run op for op (core/forward/mla_dev.c), the
 * elementwise one shared with the simulated device (cpu/ops.c
 * coli_mla_rope), so --gpu sim gives these bits.
 */
#include <string.h>

#include "core/core_internal.h"

/* Head h's block of rows [h*rows, (h+1)*rows) of w, as a matrix of its own
 * (the planar q8/q4 layout: quants of every row, then every row's scales;
 * the other dtypes: whole rows). */
static struct coli_mat head_view(const struct coli_mat *w, int h, int rows)
{
	struct coli_mat m = *w;
	size_t r0 = (size_t)h * rows, qrow = coli_dtype_row_bytes(w->dtype, (size_t)w->cols);

	m.rows = rows;
	m.data = (const char *)w->data + r0 * qrow;
	if (w->scales)
		m.scales = w->scales + r0 * (w->cols / COLI_QBLOCK);
	return m;
}

/* y = w . x for T rows of n contiguous values (prepared in e->s.ah). */
static void matmul(struct coli_engine *e, const struct coli_mat *w, const float *x, int n, int T,
                   float *y, int ldy)
{
	coli_actbufs_set(e, e->s.ah, x, T, n);
	for (int t = 0; t < T; t++)
		e->s.ag[t] = e->s.ah[t].act;
	coli_gemm_mt(e->pool, w, e->s.ag, T, y, ldy);
}

/* Per head h: y[t] + h*ldh = w_h . x[t][h] for the T tokens, w_h the block of
 * `rows` rows of head h in w, x[t][h] the n values at x + t*ldt + h*ldh_x.
 * The heads go as one batch of GEMMs (coli_gemm_batch_mt: each y is
 * coli_gemm's), as many a batch as e->s.mla_cap rows hold: a decode step's
 * all at once. */
static void matmul_heads(struct coli_engine *e, const struct coli_mat *w, int rows, const float *x,
                         int ldt, int ldh_x, int n, int T, float *y, int ldy, int ldh)
{
	int nh = e->m.cfg.n_heads, per = e->s.mla_cap / T;
	float *rows_in = e->s.mla_rows; /* [mla_cap][n] */
	struct coli_mat views[nh];
	struct coli_gemm_job jobs[nh];

	for (int h0 = 0; h0 < nh; h0 += per) {
		int nb = nh - h0 < per ? nh - h0 : per;

		for (int b = 0; b < nb; b++)
			for (int t = 0; t < T; t++)
				memcpy(rows_in + ((size_t)b * T + t) * n,
				       x + (size_t)t * ldt + (size_t)(h0 + b) * ldh_x,
				       sizeof(float) * n);
		coli_actbufs_set(e, e->s.mla_ab, rows_in, nb * T, n);
		for (int b = 0; b < nb; b++) {
			views[b] = head_view(w, h0 + b, rows);
			for (int t = 0; t < T; t++)
				e->s.mla_acts[b * T + t] = e->s.mla_ab[b * T + t].act;
			jobs[b] = (struct coli_gemm_job){.w = &views[b],
			                                 .x = e->s.mla_acts + (size_t)b * T,
			                                 .S = T,
			                                 .y = y + (size_t)(h0 + b) * ldh,
			                                 .ldy = ldy};
		}
		coli_gemm_batch_mt(e->pool, jobs, nb);
	}
}

int coli_mla_attend(coli_cpu_pool_t *pool, const float *qrow, const struct coli_attn_group *cache,
                    int T, int nh, int kl, int r, int pos0, float scale, float *lat,
                    struct coli_attn_group *g, float *scores, size_t slot, int n_slots)
{
	int kr = kl + r;

	for (int t = 0; t < T; t++) {
		g[t] = *cache; /* the typed rows: K = V, the latent row */
		g[t].q = qrow + (size_t)t * nh * kr;
		g[t].out = lat + (size_t)t * nh * kl;
		g[t].G = nh;
		g[t].n_pos = pos0 + t + 1;
	}
	return coli_attention_groups_mt(pool, g, T, kr, kr, kl, scale, scores, slot, n_slots);
}

void coli_forward_mla(struct coli_engine *e, int l, const struct coli_fwd *f)
{
	const struct coli_model_config *c = &e->m.cfg;
	const struct coli_layer *L = &e->m.layers[l];
	int H = c->hidden, nh = c->n_heads, hd = c->head_dim, np = c->qk_nope, r = c->rope_dim;
	int kl = c->kv_lora, kr = kl + r, v = c->v_head, ql = c->q_lora, T = f->T;
	float *qa = e->s.mla;                    /* [T][ql] */
	float *kva = qa + (size_t)T * ql;        /* [T][kr] */
	float *qrow = kva + (size_t)T * kr;      /* [T][nh][kr] */
	float *lat = qrow + (size_t)T * nh * kr; /* [T][nh][kl] */

	coli_rows_rmsnorm(e, e->s.x, L->attn_norm, e->s.xn, T, H, c->norm_eps);
	coli_actbufs_set(e, e->s.ax, e->s.xn, T, H);
	for (int t = 0; t < T; t++)
		e->s.ag[t] = e->s.ax[t].act;
	coli_gemm_mt(e->pool, &L->kv_a, e->s.ag, T, kva, kr);
	if (ql) {
		coli_gemm_mt(e->pool, &L->q_a, e->s.ag, T, qa, ql);
		coli_rows_rmsnorm(e, qa, L->q_a_norm, qa, T, ql, c->norm_eps);
		matmul(e, &L->q, qa, ql, T, e->s.q, nh * hd);
	} else {
		coli_gemm_mt(e->pool, &L->q, e->s.ag, T, e->s.q, nh * hd);
	}
	/* each run's cache rows: c_kv normed, k_pe roped; q_pe roped; appended to
	 * its slot (rounded to the cache's type) */
	for (int i = 0; i < f->n_runs; i++) {
		const struct coli_fwd_run *R = &f->run[i];

		coli_mla_rope(kva + (size_t)R->r0 * kr, e->s.q + (size_t)R->r0 * nh * hd,
		              L->kv_a_norm, e->s.inv_freq, R->n, nh, np, kl, r, R->pos0,
		              c->norm_eps, e->s.rope_attn);
		coli_kv_append(&e->kv, R->slot, l, R->pos0, R->n, kva + (size_t)R->r0 * kr, NULL);
	}
	/* the query rows: q_abs[h] = W_UK^T[h] . q_nope[h], then q_pe */
	matmul_heads(e, &L->k_b, kl, e->s.q, nh * hd, hd, np, T, qrow, nh * kr, kr);
	for (size_t th = 0; th < (size_t)T * nh; th++)
		memcpy(qrow + th * kr + kl, e->s.q + th * hd + np, sizeof(float) * r);
	/* each run against its slot's rows */
	double t0 = coli_now_s();

	for (int i = 0; i < f->n_runs; i++) {
		const struct coli_fwd_run *R = &f->run[i];
		struct coli_attn_group cache = {0};

		coli_kv_group_rows(&e->kv, R->slot, l, 0, kr, 0, &cache);
		coli_mla_attend(e->pool, qrow + (size_t)R->r0 * nh * kr, &cache, R->n, nh, kl, r,
		                R->pos0, e->s.attn_scale, lat + (size_t)R->r0 * nh * kl,
		                e->s.attn + R->r0, e->s.scores, e->s.slot, e->s.n_slots);
	}
	e->est.attn_core_s += coli_now_s() - t0;
	/* each head's values back from the latent: W_UV[h] . lat[h] */
	matmul_heads(e, &L->v_b, v, lat, nh * kl, kl, kl, T, e->s.att, nh * v, v);
	matmul(e, &L->o, e->s.att, nh * v, T, e->s.proj, H);
	coli_rows_add(e, e->s.x, e->s.proj, T, H);
}
