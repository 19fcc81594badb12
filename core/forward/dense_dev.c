/*
 * core/forward/dense_dev.c — the dense part's residence on the devices: at open the
 * embeddings, norms, attention and router matrices, shared experts, dense
 * MLPs, lm_head and the KV cache are uploaded once — all on the first
 * device, or with several (--split layers) each device a contiguous range of
 * layers, the embeddings on the first, lm_head on the last (quantized matrices keep
 * their planes; q, k and v stacked when they can run as one GEMV) and the
 * working buffers allocated (core/forward/dense_dev.h draws them); after placement
 * the slab table device-planned layers read; at close everything is freed.
 * Before a step, a shared block's rows copied before the step writes over
 * them (coli_dense_dev_copy_block: core/forward/kv_pool.c's copy-on-write),
 * and
 * the device block tables brought up to the host pool's
 * (coli_dense_dev_tables).
 *
 * The KV cache is the host pool's blocks (core/forward/kv.h): each device
 * allocates [its layers][n_blocks][32] rows, the host's n_blocks and block
 * ids, and a device block table [n_seq][nbs]; kv_pool.c alone hands blocks out,
 * and the device's table follows the host's (dd->tab_up says what it
 * holds). VRAM holds the pool (--kv-gb), not n_seq x ctx; MLA's latent rows
 * are its blocks' rows too (core/forward/mla_dev.c).
 * The forward over it is core/forward/forward_dev.c (and layer_host.c); the
 * phase timer both charge the stats with, coli_dense_dev_phase_end, is here.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/forward/dense_dev.h"
#include "core/dev/dev.h"

static int dalloc(struct coli_dense_dev *dd, size_t bytes, uint64_t *addr)
{
	int rc;

	if (dd->n_allocs == dd->cap_allocs) {
		int cap = dd->cap_allocs ? 2 * dd->cap_allocs : 256;
		uint64_t *a = realloc(dd->allocs, sizeof(*a) * cap);

		if (!a)
			return -ENOMEM;
		dd->allocs = a;
		dd->cap_allocs = cap;
	}
	rc = coli_dev_alloc(dd->dev, bytes ? bytes : 4, addr);
	if (!rc)
		dd->allocs[dd->n_allocs++] = *addr;
	return rc;
}

static int up_vec(struct coli_engine *e, struct coli_dense_dev *dd, const float *v, int n,
                  uint64_t *addr)
{
	int rc;

	*addr = 0;
	if (!v)
		return 0;
	rc = dalloc(dd, sizeof(float) * n, addr);
	if (!rc) {
		rc = coli_dev_upload(dd->dev, *addr, v, sizeof(float) * n);
		e->est.h2d_const_bytes += sizeof(float) * n;
	}
	return rc;
}

static int up_mat(struct coli_engine *e, struct coli_dense_dev *dd, const struct coli_mat *m,
                  struct dmat *out)
{
	size_t bytes;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!m->data || !m->rows)
		return 0;
	bytes = coli_dtype_mat_bytes(m->dtype, m->rows, m->cols);
	out->dtype = m->dtype;
	out->rows = m->rows;
	out->cols = m->cols;
	rc = dalloc(dd, bytes, &out->w);
	if (rc)
		return rc;
	if (m->scales)
		out->scales = out->w + (uint64_t)((const char *)m->scales - (const char *)m->data);
	e->est.h2d_const_bytes += bytes;
	return coli_dev_upload(dd->dev, out->w, m->data, bytes);
}

/* q, k and v of a layer stacked: their weight planes one after the other,
 * then their scale planes, so one GEMV over qkv's rows computes the three
 * (coli_gpu_dense_gemv's y2/y3 send each range of rows to its buffer); q, k
 * and v stay usable alone, as views. Falls back to three uploads where the
 * dtypes or widths differ. */
static int up_qkv(struct coli_engine *e, struct coli_dense_dev *dd, const struct coli_layer *L,
                  struct dlayer *D)
{
	const struct coli_mat *m[3] = {&L->q, &L->k, &L->v};
	struct dmat *out[3] = {&D->q, &D->k, &D->v};
	size_t plane[3], all[3], planes = 0, total = 0, off = 0, soff;
	int rows = 0, rc;

	for (int i = 0; i < 3; i++)
		if (!m[i]->data || !m[i]->rows || m[i]->dtype != L->q.dtype ||
		    m[i]->cols != L->q.cols || !m[i]->scales != !L->q.scales) {
			rc = up_mat(e, dd, &L->q, &D->q);
			rc = rc ? rc : up_mat(e, dd, &L->k, &D->k);
			return rc ? rc : up_mat(e, dd, &L->v, &D->v);
		}
	for (int i = 0; i < 3; i++) {
		all[i] = coli_dtype_mat_bytes(m[i]->dtype, m[i]->rows, m[i]->cols);
		plane[i] = m[i]->scales
		               ? (size_t)((const char *)m[i]->scales - (const char *)m[i]->data)
		               : all[i];
		planes += plane[i];
		total += all[i];
		rows += m[i]->rows;
	}
	D->qkv = (struct dmat){.dtype = L->q.dtype, .rows = rows, .cols = L->q.cols};
	rc = dalloc(dd, total, &D->qkv.w);
	if (rc)
		return rc;
	if (L->q.scales)
		D->qkv.scales = D->qkv.w + planes;
	soff = planes;
	for (int i = 0; i < 3 && !rc; i++) {
		*out[i] = (struct dmat){.dtype = m[i]->dtype,
		                        .rows = m[i]->rows,
		                        .cols = m[i]->cols,
		                        .w = D->qkv.w + off,
		                        .scales = m[i]->scales ? D->qkv.w + soff : 0};
		rc = coli_dev_upload(dd->dev, out[i]->w, m[i]->data, plane[i]);
		if (!rc && m[i]->scales)
			rc = coli_dev_upload(dd->dev, out[i]->scales, m[i]->scales,
			                     all[i] - plane[i]);
		off += plane[i];
		soff += all[i] - plane[i];
	}
	e->est.h2d_const_bytes += total;
	return rc;
}

/* Layer l's norms, biases and matrices onto dd. */
static int up_layer(struct coli_engine *e, struct coli_dense_dev *dd, int l)
{
	const struct coli_model_config *c = &e->m.cfg;
	size_t H = c->hidden, qd = (size_t)c->n_heads * c->head_dim;
	size_t kvd = (size_t)c->n_kv_heads * c->head_dim;
	const struct coli_layer *L = &e->m.layers[l];
	struct dlayer *D = &dd->L[l];
	int qn = c->qk_norm == 1 ? c->head_dim : (int)qd,
	    kn = c->qk_norm == 1 ? c->head_dim : (int)kvd;
	int rc;

	rc = up_vec(e, dd, L->attn_norm, (int)H, &D->attn_norm);
	rc = rc ? rc : up_vec(e, dd, L->ffn_norm, (int)H, &D->ffn_norm);
	rc = rc ? rc : up_vec(e, dd, L->q_bias, (int)qd, &D->q_bias);
	rc = rc ? rc : up_vec(e, dd, L->k_bias, (int)kvd, &D->k_bias);
	rc = rc ? rc : up_vec(e, dd, L->v_bias, (int)kvd, &D->v_bias);
	rc = rc ? rc : up_vec(e, dd, L->q_norm, qn, &D->q_norm);
	rc = rc ? rc : up_vec(e, dd, L->k_norm, kn, &D->k_norm);
	rc = rc ? rc : up_vec(e, dd, L->router_bias, c->n_experts, &D->router_bias);
	rc = rc ? rc : up_vec(e, dd, L->o_bias, (int)H, &D->o_bias);
	rc = rc ? rc : up_vec(e, dd, L->sinks, c->n_heads, &D->sinks);
	if (c->kv_lora) { /* MLA: q (q_b or attn_q) alone, no k or v */
		rc = rc ? rc : up_vec(e, dd, L->q_a_norm, c->q_lora, &D->q_a_norm);
		rc = rc ? rc : up_vec(e, dd, L->kv_a_norm, c->kv_lora, &D->kv_a_norm);
		rc = rc ? rc : up_mat(e, dd, &L->q_a, &D->q_a);
		rc = rc ? rc : up_mat(e, dd, &L->kv_a, &D->kv_a);
		rc = rc ? rc : up_mat(e, dd, &L->k_b, &D->k_b);
		rc = rc ? rc : up_mat(e, dd, &L->v_b, &D->v_b);
		rc = rc ? rc : up_mat(e, dd, &L->q, &D->q);
	} else {
		rc = rc ? rc : up_qkv(e, dd, L, D);
	}
	rc = rc ? rc : up_mat(e, dd, &L->o, &D->o);
	rc = rc ? rc : up_mat(e, dd, &L->router, &D->router);
	rc = rc ? rc : up_mat(e, dd, &L->sh_gate, &D->sh_gate);
	rc = rc ? rc : up_mat(e, dd, &L->sh_up, &D->sh_up);
	rc = rc ? rc : up_mat(e, dd, &L->sh_down, &D->sh_down);
	rc = rc ? rc : up_mat(e, dd, &L->sh_router, &D->sh_router);
	rc = rc ? rc : up_mat(e, dd, &L->ffn_gate, &D->ffn_gate);
	rc = rc ? rc : up_mat(e, dd, &L->ffn_up, &D->ffn_up);
	rc = rc ? rc : up_mat(e, dd, &L->ffn_down, &D->ffn_down);
	return rc;
}

/* dd's share of the weights: the embeddings on the first device, the output
 * norm and lm_head on the last, RoPE's frequencies, its layers. */
static int up_weights(struct coli_engine *e, struct coli_dense_dev *dd)
{
	const struct coli_model_config *c = &e->m.cfg;
	int rc = 0;

	if (dd->first)
		rc = up_mat(e, dd, &e->m.tok_embd, &dd->tok_embd);
	if (!rc && dd->last && c->tie_embeddings)
		dd->lm_head = dd->tok_embd;
	if (!rc && dd->last && (c->tie_embeddings ? !dd->first : 1))
		rc =
		    up_mat(e, dd, c->tie_embeddings ? &e->m.tok_embd : &e->m.lm_head, &dd->lm_head);
	if (dd->last)
		rc = rc ? rc : up_vec(e, dd, e->m.out_norm, (int)c->hidden, &dd->out_norm);
	rc = rc ? rc : up_vec(e, dd, e->s.inv_freq, c->rope_dim / 2, &dd->inv_freq);
	for (int l = dd->l0; !rc && l < dd->l1; l++)
		rc = up_layer(e, dd, l);
	return rc;
}

/* dd's KV cache rows and working buffers (drawn in core/forward/dense_dev.h);
 * I: the widest MLP. */
static int alloc_bufs(struct coli_engine *e, struct coli_dense_dev *dd, size_t I)
{
	const struct coli_model_config *c = &e->m.cfg;
	size_t T = (size_t)e->s.tmax, H = c->hidden, qd = (size_t)c->n_heads * c->head_dim;
	size_t kvd = (size_t)c->n_kv_heads * c->head_dim, P = T * c->top_k;
	size_t kr = (size_t)c->kv_lora + c->rope_dim, nh = c->n_heads;
	/* the host pool's blocks of its layers (core/forward/kv.h); MLA: the
	 * latent rows alone */
	size_t rows = (size_t)(dd->l1 - dd->l0) * dd->layer_rows;
	size_t kv_bytes = rows * e->kv.krow, v_bytes = rows * e->kv.vrow;
	size_t att = c->kv_lora ? nh * c->v_head : qd;
	int rc = 0;

#define B(f, n) (rc = rc ? rc : dalloc(dd, (n), &dd->f))
	B(kcache, kv_bytes);
	B(ktab, (size_t)e->kv.n_seq * e->kv.nbs * 4);
	if (!c->kv_lora) {
		B(vcache, v_bytes);
	} else {
		B(qa, T * (c->q_lora ? c->q_lora : 1) * 4);
		B(kva, T * kr * 4);
		B(qn, nh * T * c->qk_nope * 4);
		B(qrow, T * nh * kr * 4);
		B(lat, nh * T * c->kv_lora * 4);
		for (int l = dd->l0; l < dd->l1; l++) { /* the k_b / v_b heads' decode jobs */
			const size_t jb = sizeof(struct coli_gpu_gemv_job) *
			                  coli_dense_dev_mla_table((int)nh, COLI_GPU_STEP_T + 1);

			rc = rc ? rc : dalloc(dd, jb, &dd->L[l].kb_jobs);
			rc = rc ? rc : dalloc(dd, jb, &dd->L[l].vb_jobs);
		}
	}
	B(ids, (T + 1 + COLI_GPU_ROWS * T) * 4); /* the position, the token ids, dd_rows */
	B(x, T * H * 4);
	B(xn, T * H * 4);
	B(mlp, T * H * 4);
	B(proj, T * H * 4);
	B(shy, T * H * 4);
	B(q, T * qd * 4);
	B(att, T * att * 4);
	B(k, T * kvd * 4);
	B(v, T * kvd * 4);
	B(aq, T * dd->kmax);
	B(ad, T * dd->kmax / 32 * 4);
	B(aqs, T * dd->kmax / 32 * 4);
	B(g, T * I * 4);
	B(u, T * I * 4);
	B(h, T * I * 4);
	B(rlog, T * (c->n_experts > 0 ? c->n_experts : 1) * 4);
	B(gl, T * 4);
	B(ey, P * (H + 2) * 4); /* then the pair lists of a host-planned layer */
	B(ptok, P * 4);
	B(pw, P * 4);
	if (c->expert_bias) /* gpt-oss: the bias rows its plan's pairs read */
		B(pex, P * 4);
	if (dd->last) { /* lm_head's rows: a chunk's logits go down in pieces */
		B(logits, (T < COLI_DEV_LOGIT_ROWS ? T : COLI_DEV_LOGIT_ROWS) * c->vocab * 4);
		B(next, (T < COLI_DEV_LOGIT_ROWS ? T : COLI_DEV_LOGIT_ROWS) * 4);
	}
	B(sel, P * 4);
	B(selw, P * 4);
	B(grlog, T * (c->n_experts > 0 ? c->n_experts : 1) * 4);
	B(gsel, P * 4);
	B(gselw, P * 4);
	B(fsel, (size_t)c->n_layers * COLI_GPU_STEP_T * c->top_k * 4);
	B(gu_jobs, sizeof(struct coli_gpu_gemv_job) * 2 * COLI_GPU_STEP_T * c->top_k);
	B(down_jobs, sizeof(struct coli_gpu_gemv_job) * COLI_GPU_STEP_T * c->top_k);
#undef B
	return rc;
}

/* Upload dd's share (dd->l0..l1, first, last) and allocate its buffers. */
static int open_one(struct coli_engine *e, struct coli_dense_dev *dd)
{
	const struct coli_model_config *c = &e->m.cfg;
	size_t T = (size_t)e->s.tmax, H = c->hidden, qd = (size_t)c->n_heads * c->head_dim;
	size_t I = (size_t)(c->moe_inter > c->shared_inter ? c->moe_inter : c->shared_inter);
	int rc;

	I = I > (size_t)c->dense_inter ? I : (size_t)c->dense_inter;
	dd->kmax = (int)(H > qd ? H : qd);
	dd->kmax = dd->kmax > (int)I ? dd->kmax : (int)I;
	if (c->kv_lora) { /* MLA's GEMV inputs: qa, every head's q_nope, latent, values */
		int m[4] = {c->q_lora, c->n_heads * c->qk_nope, c->n_heads * c->kv_lora,
		            c->n_heads * c->v_head};

		for (int i = 0; i < 4; i++)
			dd->kmax = dd->kmax > m[i] ? dd->kmax : m[i];
	}
	dd->L = calloc((size_t)c->n_layers, sizeof(*dd->L));
	dd->jobs = malloc(sizeof(*dd->jobs) * (T + COLI_GPU_MAX_S) / COLI_GPU_MAX_S * 2);
	if (!dd->L || !dd->jobs)
		return -ENOMEM;
	rc = up_weights(e, dd);
	rc = rc ? rc : alloc_bufs(e, dd, I);
	if (c->kv_lora)
		rc = rc ? rc : coli_dense_dev_mla_tables(e, dd);
	dd->route_on_dev = c->n_experts > 0 && c->n_experts <= COLI_GPU_ROUTE_MAX_E &&
	                   c->top_k >= 1 && c->top_k <= 16 && e->opts.dev_route;
	dd->plan_dev = -1;
	dd->full = calloc((size_t)c->n_layers, 1);
	dd->part = calloc((size_t)c->n_layers, 1);
	dd->fast_T = calloc((size_t)c->n_layers, sizeof(int));
	dd->seg =
	    calloc((size_t)c->n_layers * COLI_GPU_STEP_T * 2 * COLI_ATTN_BUCKETS, sizeof(*dd->seg));
	dd->tab_up = malloc(sizeof(int) * (size_t)e->kv.n_seq * e->kv.nbs);
	if (!rc && (!dd->full || !dd->part || !dd->fast_T || !dd->seg || !dd->tab_up))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < (size_t)e->kv.n_seq * e->kv.nbs; i++)
		dd->tab_up[i] = -1; /* nothing written yet */
	return rc;
}

static void close_one(struct coli_engine *e, struct coli_dense_dev *dd)
{
	/* what the stream still has queued (a forward cut short by another
	 * device's failure) reads host buffers the next forward rewrites, and
	 * the memory freed here */
	coli_dev_sync(dd->dev);
	for (int i = 0; dd->seg && i < e->m.cfg.n_layers * COLI_GPU_STEP_T * 2 * COLI_ATTN_BUCKETS;
	     i++)
		coli_dev_graph_free(dd->dev, dd->seg[i].graph);
	for (int i = 0; i < COLI_GPU_STEP_T; i++)
		for (int b = 0; b < COLI_ATTN_BUCKETS; b++)
			coli_dev_graph_free(dd->dev, dd->tok[i][b].graph);
	free(dd->seg);
	for (int i = 0; i < dd->n_allocs; i++)
		coli_dev_free(dd->dev, dd->allocs[i]);
	free(dd->allocs);
	free(dd->L);
	free(dd->jobs);
	free(dd->mla_jobs);
	free(dd->full);
	free(dd->part);
	free(dd->fast_T);
	free(dd->tab_up);
	free(dd);
}

/* --split auto: whether the model — dense part, KV cache, every expert —
 * fits the first device alone (its --vram-gb, or its free memory less a
 * reserve), so that a second one would only add a hand-over a token. */
static int fits_first(struct coli_engine *e, struct coli_dev *first)
{
	uint64_t off, dense, experts = 0;
	size_t free_b = 0, total_b = 0;
	/* its cache: the pool's blocks */
	double kv =
	    (double)e->kv.n_blocks * COLI_KV_BLOCK * e->kv.n_layers * (e->kv.krow + e->kv.vrow);

	coli_io_container_dense_region(e->m.c, &off, &dense);
	for (int i = 0; i < coli_io_container_n_expert_layers(e->m.c); i++) {
		const struct coli_expert_layer *xl = coli_io_container_expert_layer(e->m.c, i);

		experts += (uint64_t)xl->slab_bytes * xl->n_experts;
	}
	if (e->opts.vram_gb >= 0)
		return experts <= e->opts.vram_gb * 1e9;
	coli_dev_mem_info(first, &free_b, &total_b);
	return dense + kv + experts + COLI_VRAM_RESERVE_BYTES <= (double)free_b;
}

/* Why dd's share did not fit, when the cache is what does not: its weights
 * (the dense region's share of dd's layers) and its KV cache against the
 * device's free memory before the open, and about how many tokens of cache
 * would fit beside the weights (less COLI_VRAM_RESERVE_BYTES for the working
 * buffers), in blocks of COLI_KV_BLOCK: ", ..." appended to out. Estimates:
 * the open's own buffers come on top. */
static void kv_fit_hint(const struct coli_engine *e, const struct coli_dense_dev *dd, size_t free_b,
                        char *out, size_t outlen)
{
	const struct coli_model_config *c = &e->m.cfg;
	const double tok = (double)(dd->l1 - dd->l0) * (e->kv.krow + e->kv.vrow); /* bytes */
	const double kv = (double)dd->layer_rows * tok;
	uint64_t off, dense;
	double w, room;
	long fit;

	coli_io_container_dense_region(e->m.c, &off, &dense);
	w = (double)dense * (dd->l1 - dd->l0) / c->n_layers;
	room = (double)free_b - w - (double)COLI_VRAM_RESERVE_BYTES;
	if (!free_b || tok <= 0 || w + kv <= (double)free_b)
		return; /* not known, or not the cache's size */
	fit = room > 0 ? (long)(room / tok) / COLI_KV_BLOCK * COLI_KV_BLOCK : 0;
	if (fit < COLI_KV_BLOCK)
		snprintf(
		    out, outlen,
		    ": its %.2f GB of weights and a %.2f GB KV cache against %.2f GB free; the "
		    "weights alone leave no room for a cache",
		    w / 1e9, kv / 1e9, free_b / 1e9);
	else
		snprintf(out, outlen,
		         ": its %.2f GB of weights and a KV cache of %zu tokens (%.2f GB) against "
		         "%.2f GB free; about %ld tokens of cache fit beside the weights (--kv-gb "
		         "%.2f, or a smaller --ctx or --parallel)",
		         w / 1e9, dd->layer_rows, kv / 1e9, free_b / 1e9, fit,
		         fit * (double)c->n_layers * (e->kv.krow + e->kv.vrow) / 1e9);
}

/* The dense part on the devices of e->vram.devs that have not failed: on the
 * first only, or split (--split layers, or auto when the model does not fit
 * the first device alone) in contiguous equal ranges of layers, one a device
 * (a model with fewer layers than devices uses as many devices as it has
 * layers). A device that cannot hold its share fails the open, last in
 * e->dense.dds, err naming it (core/engine.c leaves it out and tries the others
 * again at open; mid-run, after a device failed, it moves the dense part
 * here once more). */
int coli_dense_dev_open(struct coli_engine *e, char *err, size_t errlen)
{
	const struct coli_model_config *c = &e->m.cfg;
	int use[COLI_MAX_DEVS], n_use = 0, split, n, L = c->n_layers;

	for (int d = 0; d < e->vram.n_devs; d++)
		if (!e->vram.devs[d]->failed)
			use[n_use++] = d;
	if (!n_use) {
		snprintf(err, errlen, "no device left");
		return -ENODEV;
	}
	split = e->opts.split == COLI_OPT_SPLIT_LAYERS ||
	        (e->opts.split == COLI_OPT_SPLIT_AUTO && n_use > 1 &&
	         !fits_first(e, e->vram.devs[use[0]]));
	n = split ? n_use : 1;
	n = n < L ? n : L;
	n = n > 0 ? n : 1;
	e->dense.dd_of = calloc((size_t)L, 1);
	if (!e->dense.dd_of)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct coli_dense_dev *dd = calloc(1, sizeof(*dd));
		double t0 = e->est.h2d_const_bytes;
		int rc;

		if (!dd)
			return -ENOMEM;
		e->dense.dd_dev[e->dense.n_dd] = e->vram.devs[use[i]];
		e->dense.dds[e->dense.n_dd++] = dd;
		dd->dev = e->vram.devs[use[i]];
		dd->l0 = L * i / n, dd->l1 = L * (i + 1) / n;
		dd->layer_rows = (size_t)e->kv.n_blocks * COLI_KV_BLOCK;
		dd->first = i == 0, dd->last = i == n - 1;
		for (int l = dd->l0; l < dd->l1; l++)
			e->dense.dd_of[l] = (signed char)i;
		size_t free_b = 0, total_b = 0;

		coli_dev_mem_info(dd->dev, &free_b, &total_b);
		rc = open_one(e, dd);
		if (rc) {
			int k = snprintf(err, errlen, "device %s: cannot hold the dense part (%s)",
			                 dd->dev->name, strerror(-rc));

			if (k > 0 && (size_t)k < errlen)
				kv_fit_hint(e, dd, free_b, err + k, errlen - (size_t)k);
			return rc;
		}
		/* its KV cache: the pool's blocks of its layers */
		double kv_gb =
		    (double)(dd->l1 - dd->l0) * dd->layer_rows * (e->kv.krow + e->kv.vrow) / 1e9;

		if (n == 1)
			fprintf(
			    stderr,
			    "coli: dense part and KV cache on %s (%.2f GB uploaded; KV cache %.3g "
			    "GB: the pool's blocks)\n",
			    dd->dev->name, (e->est.h2d_const_bytes - t0) / 1e9, kv_gb);
		else
			fprintf(stderr,
			        "coli: dense part and KV cache of layers %d-%d on %s (%.2f GB "
			        "uploaded; KV cache %.3g GB: the pool's blocks)\n",
			        dd->l0, dd->l1 - 1, dd->dev->name,
			        (e->est.h2d_const_bytes - t0) / 1e9, kv_gb);
	}
	e->dense.dd = e->dense.dds[0];
	return 0;
}

void coli_dense_dev_close(struct coli_engine *e)
{
	for (int i = 0; i < e->dense.n_dd; i++)
		close_one(e, e->dense.dds[i]);
	memset(e->dense.dds, 0, sizeof(e->dense.dds));
	memset(e->dense.dd_dev, 0, sizeof(e->dense.dd_dev));
	e->dense.n_dd = 0;
	free(e->dense.dd_of);
	e->dense.dd_of = NULL;
	e->dense.dd = NULL;
}

/* After placement: which MoE layers have every expert resident on the dense
 * device (planned there at decode) and which some (their resident experts
 * preplanned there, see moe_preplanned), and the slab table of resident
 * experts uploaded (0: not resident). The VRAM adaptation keeps it current
 * (coli_dense_dev_slab_set). */
static int plan_init_one(struct coli_engine *e, struct coli_dense_dev *dd)
{
	const struct coli_model_config *c = &e->m.cfg;
	int E = c->n_experts, any = 0, d = dd->dev->index, rc;
	uint64_t *tab;

	if (!dd->route_on_dev || c->top_k * COLI_GPU_STEP_T > COLI_GPU_PLAN_MAX_P)
		return 0;
	for (int l = dd->l0; l < dd->l1; l++) {
		int n = 0;

		for (int x = 0; e->m.layers[l].moe && e->vram.where && x < E; x++)
			n += e->vram.where[(size_t)l * E + x] == d;
		dd->full[l] = n == E;
		dd->part[l] = n > 0 && e->vram.n_devs == 1 && e->opts.dev_preplan;
		any |= n > 0;
	}
	if (!any)
		return 0;
	tab = calloc((size_t)c->n_layers * E, sizeof(*tab));
	if (!tab)
		return -ENOMEM;
	for (size_t i = 0; i < (size_t)c->n_layers * E; i++)
		tab[i] = e->vram.where[i] == d ? e->vram.dev_slab[i] : 0;
	rc = dalloc(dd, sizeof(*tab) * c->n_layers * E, &dd->slabs);
	rc = rc ? rc : coli_dev_upload(dd->dev, dd->slabs, tab, sizeof(*tab) * c->n_layers * E);
	e->est.h2d_const_bytes += sizeof(*tab) * c->n_layers * E;
	free(tab);
	if (!rc)
		dd->plan_dev = d;
	return rc;
}

int coli_dense_dev_plan_init(struct coli_engine *e)
{
	int rc = 0;

	for (int i = 0; !rc && i < e->dense.n_dd; i++)
		rc = plan_init_one(e, e->dense.dds[i]);
	return rc;
}

/* The VRAM adaptation moved expert ex of layer l (addr 0: out of VRAM). */
int coli_dense_dev_slab_set(struct coli_engine *e, int l, int ex, uint64_t addr)
{
	struct coli_dense_dev *dd = e->dense.n_dd ? e->dense.dds[e->dense.dd_of[l]] : NULL;
	const struct coli_model_config *c = &e->m.cfg;

	if (!dd || dd->plan_dev < 0)
		return 0;
	if (addr && e->vram.where[(size_t)l * c->n_experts + ex] != dd->plan_dev)
		addr = 0; /* resident elsewhere: not this device's to plan */
	return coli_dev_upload(dd->dev, dd->slabs + ((size_t)l * c->n_experts + ex) * 8, &addr, 8);
}

/* Thread: the engine's, before a step: one copy a layer for K and one for
 * V, each c->rows consecutive rows. */
int coli_dense_dev_copy_block(struct coli_engine *e, const struct coli_kv_cow *c)
{
	const struct coli_kv *kv = &e->kv;
	const size_t src = (size_t)c->src * COLI_KV_BLOCK, dst = (size_t)c->dst * COLI_KV_BLOCK;
	int rc = 0;

	for (int i = 0; !rc && i < e->dense.n_dd; i++) {
		const struct coli_dense_dev *dd = e->dense.dds[i];

		for (int l = 0; !rc && l < dd->l1 - dd->l0; l++) {
			const size_t s = l * dd->layer_rows + src, d = l * dd->layer_rows + dst;

			rc = coli_dev_copy(
			    dd->dev, &(struct coli_dev_copy){.dst = dd->kcache + d * kv->krow,
			                                     .src = dd->kcache + s * kv->krow,
			                                     .n = (size_t)c->rows * kv->krow});
			if (!rc && kv->vrow) /* (MLA: the latent rows alone) */
				rc = coli_dev_copy(dd->dev, &(struct coli_dev_copy){
				                                .dst = dd->vcache + d * kv->vrow,
				                                .src = dd->vcache + s * kv->vrow,
				                                .n = (size_t)c->rows * kv->vrow});
		}
	}
	return rc;
}

/* Thread: the engine's, before a step. The uploads read dd->tab_up, which
 * changes only here: the previous step's uploads were read by its end (a
 * step ends on the device's sync). */
int coli_dense_dev_tables(struct coli_engine *e, const int *slot, int n)
{
	const struct coli_kv *kv = &e->kv;
	int rc = 0;

	for (int i = 0; !rc && i < e->dense.n_dd; i++) {
		struct coli_dense_dev *dd = e->dense.dds[i];

		for (int k = 0; !rc && dd->ktab && k < n; k++) {
			const struct coli_kv_seq *q = &kv->seq[slot[k]];
			int *up = dd->tab_up + (size_t)slot[k] * kv->nbs, lo = -1, hi = -1;

			for (int j = 0; j < q->n_blk; j++)
				if (up[j] != q->blk[j]) {
					up[j] = q->blk[j];
					lo = lo < 0 ? j : lo, hi = j;
				}
			if (lo < 0)
				continue;
			rc = coli_dev_upload_async(dd->dev,
			                           dd_tab(dd, kv->nbs, slot[k]) + (size_t)lo * 4,
			                           up + lo, sizeof(int) * (size_t)(hi - lo + 1));
			e->est.h2d_bytes += sizeof(int) * (size_t)(hi - lo + 1);
		}
	}
	return rc;
}

/* The phase split (coli_engine_stats attention_s, moe_s, dense_mlp_s,
 * lm_head_s) on an asynchronous device: a phase is over when the device has
 * finished it, which the host knows only where it waits. Without --profile
 * nothing extra waits: a phase is charged the wall time up to the host's
 * next wait that follows it (the router download in moe(), the end of
 * moe(), the logits download), so attention_s also holds the ffn norm and
 * the router GEMV, and a dense MLP layer's device time lands in the next
 * attention. A device-planned layer has no wait at all: its phases are
 * charged the host's time to queue them and the device time lands at the
 * forward's last wait (lm_head). With --profile the device is synchronized
 * at every phase end (one more round trip per phase, so tok/s drops a
 * little) and the split is exact. forward_s is exact either way. */
int coli_dense_dev_phase_end(struct coli_dense_dev *dd, double *acc, int sync)
{
	int rc = sync ? coli_dev_sync(dd->dev) : 0;
	double now = coli_now_s();

	*acc += now - dd->phase_t;
	dd->phase_t = now;
	return rc;
}
