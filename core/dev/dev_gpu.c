/*
 * core/dev/dev_gpu.c — the CUDA device as an expert-execution backend: each op
 * forwards to ptx/ (driver API, embedded PTX kernels).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/dev/dev.h"
#include "mem/mem.h"
#include "ptx/ptx.h"

#define G(d) ((coli_gpu_t *)(d)->impl)

static int g_mem_info(struct coli_dev *d, size_t *f, size_t *t)
{
	return coli_gpu_mem_info(G(d), f, t);
}
static int g_alloc(struct coli_dev *d, size_t bytes, uint64_t *addr)
{
	return coli_gpu_alloc(G(d), bytes, addr);
}
static void g_free(struct coli_dev *d, uint64_t addr)
{
	coli_gpu_free(G(d), addr);
}
static int g_upload(struct coli_dev *d, uint64_t dst, const void *src, size_t n)
{
	return coli_gpu_upload(G(d), dst, src, n);
}
static int g_upload_async(struct coli_dev *d, uint64_t dst, const void *src, size_t n)
{
	return coli_gpu_upload_async(G(d), dst, src, n);
}
static int g_download_async(struct coli_dev *d, void *dst, uint64_t src, size_t n)
{
	return coli_gpu_download_async(G(d), dst, src, n);
}
static int g_download_many(struct coli_dev *d, const struct coli_dev_down *v, int n)
{
	void *dst[COLI_DEV_DOWN_MAX];
	uint64_t src[COLI_DEV_DOWN_MAX];
	size_t bytes[COLI_DEV_DOWN_MAX];

	for (int i = 0; i < n; i++)
		dst[i] = v[i].dst, src[i] = v[i].src, bytes[i] = v[i].n;
	return coli_gpu_download_many(G(d), n, dst, src, bytes);
}
static int g_point(struct coli_dev *d)
{
	return coli_gpu_point(G(d));
}
static int g_point_wait(struct coli_dev *d)
{
	return coli_gpu_point_wait(G(d));
}
static int g_host_wait(struct coli_dev *d, uint32_t seq)
{
	return coli_gpu_host_wait(G(d), seq);
}
static uint64_t g_host_addr(struct coli_dev *d, const void *p, size_t n)
{
	return coli_gpu_mapped(G(d), p, n);
}
static void g_host_signal(struct coli_dev *d, uint32_t seq)
{
	coli_gpu_host_signal(G(d), seq);
}
static int g_gemv(struct coli_dev *d, const struct coli_dev_jobs *a)
{
	return coli_gpu_gemv(G(d), a->t, a->jobs, a->n_jobs);
}
static int g_gemm(struct coli_dev *d, const struct coli_dev_jobs *a)
{
	return coli_gpu_gemm(G(d), a->t, a->gemm_jobs, a->n_jobs);
}
static int g_silu(struct coli_dev *d, const struct coli_dev_silu *a)
{
	if (a->kind) /* gpt-oss's (COLI_ACT_SWIGLU_OAI) */
		return coli_gpu_swiglu_oai(G(d), &(struct coli_gpu_swiglu_oai){.g = a->g,
		                                                               .u = a->u,
		                                                               .bg = a->bg,
		                                                               .bu = a->bu,
		                                                               .idx = a->idx,
		                                                               .h = a->h,
		                                                               .q = a->q,
		                                                               .qd = a->qd,
		                                                               .qsum = a->qsum,
		                                                               .n = a->n,
		                                                               .I = a->I,
		                                                               .alpha = a->alpha,
		                                                               .limit = a->limit});
	if (a->q)
		return coli_gpu_silu_mul_q(G(d), a->g, a->u, a->h, a->q, a->qd, a->qsum, a->n / 32);
	return coli_gpu_silu_mul(G(d), a->g, a->u, a->h, a->n);
}
static int g_actq(struct coli_dev *d, const struct coli_dev_quantize *a)
{
	return coli_gpu_act_quantize(G(d), a->x, a->q, a->qd, a->qsum, a->n_blocks);
}
static int g_sync(struct coli_dev *d)
{
	return coli_gpu_sync(G(d));
}
static int g_copy(struct coli_dev *d, const struct coli_dev_copy *a)
{
	return coli_gpu_copy(G(d), a->dst, a->src, a->n);
}
static int g_rmsnorm(struct coli_dev *d, const struct coli_dev_norm *a)
{
	return coli_gpu_rmsnorm(G(d), a->x, a->w, a->y, a->rows, a->n, a->eps);
}
static int g_add_bias(struct coli_dev *d, const struct coli_dev_bias *a)
{
	if (a->idx) /* a bias row per row (gpt-oss's down bias): ptx/expert/kernels.cu's */
		return coli_gpu_pair_bias(G(d), a->y, a->b, a->idx, a->rows, a->n);
	return coli_gpu_add_bias(G(d), a->y, a->b, a->rows, a->n);
}
static int g_add(struct coli_dev *d, const struct coli_dev_add *a)
{
	return coli_gpu_add(G(d), a->x, a->y, a->n);
}
static int g_rope(struct coli_dev *d, const struct coli_dev_rope *a)
{
	if (a->rd && a->rd != a->hd) /* partial (ptx/dense/kinds.cu) */
		return coli_gpu_rope_part(G(d), a->x, a->T, a->nh, a->hd, a->rd, a->pos0,
		                          a->inv_freq);
	return coli_gpu_rope(G(d), a->x, a->T, a->nh, a->hd, a->pos0, a->inv_freq);
}
static int g_attention(struct coli_dev *d, const struct coli_dev_attention *a)
{
	return coli_gpu_attention_kv(G(d), a->q, a->k, a->v, a->out, a->T, a->pos0, a->posp,
	                             a->span, a->nh, a->nkv, a->hd, a->scale, a->aq, a->ad, a->aqs,
	                             a->kt, a->vt, a->sinks, a->window, a->rows, a->tab, a->nbs);
}
static int g_gather_rows(struct coli_dev *d, const struct coli_dev_gather *a)
{
	return coli_gpu_gather_rows(G(d), a->dst, a->src, a->idx, a->n, a->row_bytes);
}

static int g_embed(struct coli_dev *d, const struct coli_dev_embed *a)
{
	return coli_gpu_embed(G(d), a->t, a->table, a->scales, a->ids, a->x, a->T, a->H);
}
static int g_moe_acc(struct coli_dev *d, const struct coli_dev_accumulate *a)
{
	return coli_gpu_moe_accumulate(G(d), a->out, a->y, a->pair_token, a->pair_w, a->n_pairs,
	                               a->T, a->H, a->hy, a->hmask);
}
static int g_gated(struct coli_dev *d, const struct coli_dev_gated *a)
{
	return coli_gpu_gated_add(G(d), a->out, a->y, a->gate, a->T, a->H);
}
static int g_argmax(struct coli_dev *d, const struct coli_dev_argmax *a)
{
	return coli_gpu_argmax(G(d), a->x, a->n, a->out);
}
static int g_dense_gemv(struct coli_dev *d, const struct coli_dev_dense *a)
{
	return coli_gpu_dense_gemv(G(d), a->t, a->m);
}
static int g_add_rmsnorm(struct coli_dev *d, const struct coli_dev_norm *a)
{
	return coli_gpu_add_rmsnorm(G(d), a->x, a->add, a->w, a->y, a->q, a->qd, a->qsum, a->rows,
	                            a->n, a->eps);
}
static int g_acc_rmsnorm(struct coli_dev *d, const struct coli_dev_norm *a)
{
	return coli_gpu_acc_rmsnorm(G(d), a->x, a->pairs, a->w, a->y, a->q, a->qd, a->qsum, a->rows,
	                            a->n, a->eps);
}
static int g_mla_prep(struct coli_dev *d, const struct coli_gpu_mla_prep *a)
{
	return coli_gpu_mla_prep(G(d), a);
}
/* 3xTF32 (~fp32): the dense part's attention within rounding of the CPU's */
static int g_mla_attention(struct coli_dev *d, const struct coli_dev_mla *a)
{
	return coli_gpu_mla_attention(G(d), &(struct coli_gpu_mla){.q = a->q,
	                                                           .cache = a->cache,
	                                                           .out = a->out,
	                                                           .posp = a->posp,
	                                                           .T = a->T,
	                                                           .pos0 = a->pos0,
	                                                           .span = a->span,
	                                                           .nh = a->nh,
	                                                           .dk = a->dk,
	                                                           .dv = a->dv,
	                                                           .ld = a->ld,
	                                                           .ldt = a->ldt,
	                                                           .ldh = a->ldh,
	                                                           .scale = a->scale,
	                                                           .x3 = 1,
	                                                           .kt = a->kt,
	                                                           .rows = a->rows,
	                                                           .tab = a->tab,
	                                                           .nbs = a->nbs});
}
static int g_qk_rope_store(struct coli_dev *d, const struct coli_dev_qk_rope *a)
{
	return coli_gpu_qk_rope_store_kv(G(d), a->q, a->k, a->v, a->qw, a->kw, a->eps, a->T, a->nh,
	                                 a->nkv, a->hd, a->pos0, a->posp, a->inv_freq, a->kc, a->vc,
	                                 a->kt, a->vt, a->store_only, a->f, a->rows, a->tab,
	                                 a->nbs);
}
static int g_route(struct coli_dev *d, const struct coli_dev_route *a)
{
	if (a->sigmoid) /* ptx/dense/kinds.cu */
		return coli_gpu_route_sigmoid(G(d), a->rlog, a->bias, a->T, a->E, a->K, a->n_group,
		                              a->topk_group, a->norm, a->scale, a->sel, a->selw);
	return coli_gpu_route(G(d), a->rlog, a->T, a->E, a->K, a->norm, a->sel, a->selw);
}
static int g_moe_plan(struct coli_dev *d, const struct coli_gpu_moe_plan *a)
{
	return coli_gpu_moe_plan(G(d), a);
}
static int g_router_plan(struct coli_dev *d, const struct coli_dev_router_plan *a)
{
	return coli_gpu_router_plan(G(d), a->r, a->plan);
}
static int g_gemv_table(struct coli_dev *d, const struct coli_dev_jobs *a)
{
	return coli_gpu_gemv_table(G(d), a->t, a->table, a->n_jobs, a->max_rows);
}
/* mem/'s registration hook: every host region mem/ records (the tier
 * manager's slot arena above all) is page-locked for DMA, so streamed slabs
 * copy at the PCIe rate instead of through a pageable bounce buffer. */
static int g_reg_hook(void *arg, void *p, size_t bytes, int reg)
{
	coli_gpu_t *g = arg;

	if (reg)
		return coli_gpu_host_register(g, p, bytes);
	coli_gpu_host_unregister(g, p);
	return 0;
}

static int g_stage_init(struct coli_dev *d, int n)
{
	return coli_gpu_stage_init(G(d), n);
}
static int g_stage_copy(struct coli_dev *d, int slot, uint64_t dst, const void *src, size_t n)
{
	return coli_gpu_stage_copy(G(d), slot, dst, src, n);
}
static int g_stage_use(struct coli_dev *d, int slot)
{
	return coli_gpu_stage_use(G(d), slot);
}
static int g_stage_done(struct coli_dev *d, int slot)
{
	return coli_gpu_stage_done(G(d), slot);
}
static int g_stage_landed(struct coli_dev *d, int slot)
{
	return coli_gpu_stage_landed(G(d), slot);
}
static int g_stage_fence(struct coli_dev *d, int slot)
{
	return coli_gpu_stage_fence(G(d), slot);
}

static int g_mark(struct coli_dev *d, int slot)
{
	return coli_gpu_mark(G(d), slot);
}
static int g_elapsed(struct coli_dev *d, int from, int to, double *s)
{
	float ms = 0;
	int rc = coli_gpu_elapsed_ms(G(d), from, to, &ms);

	*s = ms / 1e3;
	return rc;
}

static int g_capture_begin(struct coli_dev *d)
{
	return coli_gpu_capture_begin(G(d));
}
static int g_capture_end(struct coli_dev *d, uint64_t *graph)
{
	return coli_gpu_capture_end(G(d), graph);
}
static int g_graph_launch(struct coli_dev *d, uint64_t graph)
{
	return coli_gpu_graph_launch(G(d), graph);
}
static void g_graph_free(struct coli_dev *d, uint64_t graph)
{
	coli_gpu_graph_free(G(d), graph);
}

static void g_close(struct coli_dev *d)
{
	coli_mem_unregister_hook(g_reg_hook, G(d));
	coli_gpu_close(G(d));
	free(d);
}

static const struct coli_dev_ops g_gpu_ops = {
    .mem_info = g_mem_info,
    .alloc = g_alloc,
    .free = g_free,
    .upload = g_upload,
    .upload_async = g_upload_async,
    .download_async = g_download_async,
    .download_many = g_download_many,
    .gemv = g_gemv,
    .gemm = g_gemm,
    .silu_mul = g_silu,
    .act_quantize = g_actq,
    .sync = g_sync,
    .close = g_close,
    .stage_init = g_stage_init,
    .stage_copy = g_stage_copy,
    .stage_use = g_stage_use,
    .stage_done = g_stage_done,
    .stage_landed = g_stage_landed,
    .stage_fence = g_stage_fence,
    .mark = g_mark,
    .elapsed = g_elapsed,
    .point = g_point,
    .point_wait = g_point_wait,
    .host_wait = g_host_wait,
    .host_signal = g_host_signal,
    .host_addr = g_host_addr,
    .copy = g_copy,
    .rmsnorm = g_rmsnorm,
    .add_bias = g_add_bias,
    .add = g_add,
    .rope = g_rope,
    .attention = g_attention,
    .mla_prep = g_mla_prep,
    .mla_attention = g_mla_attention,
    .embed = g_embed,
    .gather_rows = g_gather_rows,
    .moe_accumulate = g_moe_acc,
    .gated_add = g_gated,
    .argmax = g_argmax,
    .route = g_route,
    .add_rmsnorm = g_add_rmsnorm,
    .acc_rmsnorm = g_acc_rmsnorm,
    .qk_rope_store = g_qk_rope_store,
    .moe_plan = g_moe_plan,
    .router_plan = g_router_plan,
    .gemv_table = g_gemv_table,
    .dense_gemv = g_dense_gemv,
    .capture_begin = g_capture_begin,
    .capture_end = g_capture_end,
    .graph_launch = g_graph_launch,
    .graph_free = g_graph_free,
};

int coli_dev_gpu_open(int ordinal, int pdl, unsigned flags, struct coli_dev **out, char *err,
                      size_t errlen)
{
	struct coli_dev *d = calloc(1, sizeof(*d));
	coli_gpu_t *g;
	int rc;

	if (!d)
		return -ENOMEM;
	rc = coli_gpu_open(ordinal, flags, &g, err, errlen);
	if (rc) {
		free(d);
		return rc;
	}
	if (!pdl)
		coli_gpu_plain_launches(g);
	d->ops = &g_gpu_ops;
	d->impl = g;
	d->fail_after = -1;
	/* graphs: a driver without them fails capture_begin with -ENOTSUP, and
	 * the caller runs the ops directly */
	d->caps = COLI_DEV_CAP_BANDWIDTH | COLI_DEV_CAP_GRAPHS | COLI_DEV_CAP_SWIGLU_OAI |
	          (coli_gpu_has_host_wait(g) ? COLI_DEV_CAP_HOST_WAIT : 0);
	snprintf(d->name, sizeof(d->name), "cuda:%d (%s)", ordinal, coli_gpu_name(g));
	d->numa_node = coli_gpu_numa_node(g);
	if (coli_mem_register_hook(g_reg_hook, g))
		fprintf(stderr,
		        "coli: %s: host memory not page-locked (cuMemHostRegister "
		        "failed): streamed experts copy at pageable speed\n",
		        d->name);
	*out = d;
	return 0;
}
