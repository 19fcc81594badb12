/*
 * core/engine.c — the engine object: opens the container, binds the model,
 * loads the tokenizer, sizes the KV cache and the scratch buffers, owns the
 * thread pool and the route trace. The forward pass lives in core/forward and
 * core/moe; this file allocates and frees, and installs the hooks the parts
 * below call up through (e->slab_moved).
 *
 * Memory: the KV cache is fp32, [n_layers][ctx][n_kv_heads*head_dim] for K
 * and again for V, allocated through mem/ (NUMA placement decided there).
 * Scratch is sized for tmax tokens per forward call (--ubatch, at most the
 * context); longer prompts are fed in chunks of tmax by the caller
 * (coli_engine_forward does it).
 *
 * NUMA and tiers: --numa-bind is resolved first (mem/numa.c) and the
 * opening thread is bound there before the CPU pool starts, so pool threads
 * (and the caller's threads started after open: colid's) inherit the node;
 * the KV cache, the dense copy and the expert slots are allocated on it.
 * This is the one place that applies the binding; colid asks
 * coli_engine_numa what it was. The tier manager (core/place/tiers_open.c) opens
 * last because its RAM budget counts the KV cache and scratch sized here.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core_internal.h"
#include "core/forward/dense_dev.h"
#include "core/dev/dev.h"
#include "core/moe/moe.h"
#include "mem/mem.h"
#include "ptx/ptx.h"

#define UBATCH_MAX 16384 /* --ubatch: tokens per forward call (prefill chunk) */
/* --ubatch 0 (the default): with a device, each chunk reads every expert it
 * routes once (and copies each streamed one over PCIe once), so larger chunks
 * pay less for the same prompt (measured from 512 to 2048 on the H200, all
 * resident and a quarter resident: docs/perf/history/2026-11-30.md) — where the experts' working
 * buffers for it take at most 1/UBATCH_MEM_SHARE of the smallest device (qwen3-30b's 0.48 GB,
 * qwen3-235b's 0.95 GB; the dense part's scratch comes on top). On the CPU the
 * chunk size does not matter (flat from 128 to 1024): the smaller scratch. */
#define UBATCH_DEV       2048
#define UBATCH_CPU       512
#define UBATCH_MEM_SHARE 20

static int ubatch_auto(const struct coli_engine *e)
{
	size_t mem = coli_dev_spec_mem(e->opts.gpu);

	return mem && coli_moe_dev_slot_bytes(&e->m.cfg, UBATCH_DEV) <= mem / UBATCH_MEM_SHARE
	           ? UBATCH_DEV
	           : UBATCH_CPU;
}

static int actbufs_alloc(struct coli_actbuf **out, int count, int n, int quant)
{
	struct coli_actbuf *a = calloc((size_t)count, sizeof(*a));

	if (!a)
		return -ENOMEM;
	*out = a;
	for (int i = 0; i < count; i++) {
		a[i].n = n;
		if (!quant)
			continue;
		a[i].q = malloc((size_t)n);
		a[i].d = malloc(sizeof(float) * (n / COLI_QBLOCK));
		a[i].qsum = malloc(sizeof(int32_t) * (n / COLI_QBLOCK));
		if (!a[i].q || !a[i].d || !a[i].qsum)
			return -ENOMEM;
	}
	return 0;
}

static void actbufs_free(struct coli_actbuf *a, int count)
{
	if (!a)
		return;
	for (int i = 0; i < count; i++) {
		free(a[i].q);
		free(a[i].d);
		free(a[i].qsum);
	}
	free(a);
}

static int max3(int a, int b, int c)
{
	int m = a > b ? a : b;

	return m > c ? m : c;
}

#define ALLOC(p, n)                                                                                \
	((p) = calloc((size_t)(n), sizeof(*(p))), e->scratch_bytes += (size_t)(n) * sizeof(*(p)),  \
	 (p) ? 0 : -ENOMEM)

/* What crosses to or from a device every layer (normed input, router
 * logits, per-pair outputs and lists) lives in one region that mem/
 * registers with the devices: an async copy from pageable memory first
 * waits for the device's stream to drain, and a small upload from
 * registered memory is pulled by a kernel instead of queuing behind the
 * copy engine's slab copies (ptx/gpu_mem.c). */
static int xfer_alloc(struct coli_engine *e)
{
	const struct coli_model_config *c = &e->m.cfg;
	int T = e->tmax, H = c->hidden;
	size_t E1 = c->n_experts > 1 ? c->n_experts : 1, P = (size_t)T * c->top_k;
	size_t fast = (size_t)c->n_layers * COLI_GPU_MAX_S * c->top_k;
	size_t sz[] = {(size_t)T * H * 4,
	               (size_t)T * E1 * 4,
	               P * (H + 2) * 4,
	               P * 4,
	               P * 4,
	               (size_t)(T + 2) * 4,
	               P * 4,
	               P * 4,
	               fast * 4 + 4,
	               P * 4,
	               (size_t)c->vocab * 4};
	void **dst[] = {(void **)&e->xn,         (void **)&e->rlog,   (void **)&e->ey,
	                (void **)&e->pair_token, (void **)&e->pair_w, (void **)&e->xids,
	                (void **)&e->sel,        (void **)&e->selw,   (void **)&e->fast_sel,
	                (void **)&e->guess,      (void **)&e->xlogits};

	e->xfer = coli_mem_alloc_buffers(sz, dst, 11, COLI_MEM_NODE_ANY, &e->xfer_bytes);
	if (!e->xfer)
		return -ENOMEM;
	e->scratch_bytes += e->xfer_bytes;
	return 0;
}

/* The dense layers' rows [tmax][...] and the per-expert lists [n_experts]. */
static int layer_scratch_alloc(struct coli_engine *e, int inter, int quant)
{
	const struct coli_model_config *c = &e->m.cfg;
	int T = e->tmax, H = c->hidden, qd = c->n_heads * c->head_dim;
	int kvd = c->n_kv_heads * c->head_dim;
	int threads = coli_cpu_pool_threads(e->pool);
	int rc;

	rc = ALLOC(e->x, (size_t)T * H);
	rc = rc ? rc : ALLOC(e->q, (size_t)T * qd);
	rc = rc ? rc : ALLOC(e->kx, (size_t)T * kvd);
	rc = rc ? rc : ALLOC(e->vx, (size_t)T * kvd);
	rc = rc ? rc : ALLOC(e->att, (size_t)T * qd);
	rc = rc ? rc : ALLOC(e->scores, (size_t)threads * e->ctx * 8); /* attention's */
	rc = rc ? rc : ALLOC(e->attn, (size_t)T * c->n_kv_heads);
	rc = rc ? rc : ALLOC(e->mlp, (size_t)T * H);
	rc = rc ? rc : ALLOC(e->proj, (size_t)T * H);
	rc = rc ? rc : ALLOC(e->glogits, c->vocab);
	rc = rc ? rc : ALLOC(e->g, (size_t)T * inter);
	rc = rc ? rc : ALLOC(e->u, (size_t)T * inter);
	rc = rc ? rc : ALLOC(e->pair_expert, (size_t)T * c->top_k);
	rc = rc ? rc : ALLOC(e->assign, c->n_experts);
	rc = rc ? rc : ALLOC(e->la_idle, c->n_layers);
	rc = rc ? rc : ALLOC(e->streamed, c->n_experts);
	rc = rc ? rc : ALLOC(e->cand, c->n_experts);
	rc = rc ? rc : ALLOC(e->cand_n, c->n_experts);
	rc = rc ? rc : ALLOC(e->pair_first, c->n_experts);
	rc = rc ? rc : ALLOC(e->pair_n, c->n_experts);
	rc = rc ? rc : ALLOC(e->need, c->n_experts);
	rc = rc ? rc : ALLOC(e->redo, c->n_experts);
	rc = rc ? rc : ALLOC(e->slab_ptr, c->n_experts);
	rc = rc ? rc : ALLOC(e->host_slab, c->n_experts);
	rc = rc ? rc : ALLOC(e->ag, (size_t)T * c->top_k);
	rc = rc ? rc : ALLOC(e->inv_freq, c->head_dim / 2);
	rc = rc ? rc : actbufs_alloc(&e->ax, T, H, quant);
	rc = rc ? rc : actbufs_alloc(&e->ah, T, qd > inter ? qd : inter, quant);
	return rc;
}

/* The routed experts' per-pair rows [tmax * top_k][moe_inter]. */
static int expert_scratch_alloc(struct coli_engine *e, int quant)
{
	const struct coli_model_config *c = &e->m.cfg;
	size_t P = (size_t)e->tmax * c->top_k, I = (size_t)c->moe_inter;
	int rc;

	rc = ALLOC(e->pg, P * I);
	rc = rc ? rc : ALLOC(e->pu, P * I);
	rc = rc ? rc : ALLOC(e->hag, P);
	rc = rc ? rc : ALLOC(e->xview, c->n_experts);
	rc = rc ? rc : ALLOC(e->xjobs, 3 * (size_t)c->n_experts);
	rc = rc ? rc : ALLOC(e->xpairs, P);
	rc = rc ? rc : actbufs_alloc(&e->ph, (int)P, c->moe_inter, quant);
	if (quant)
		e->scratch_bytes += P * I * 2;
	return rc;
}

static int scratch_alloc(struct coli_engine *e)
{
	const struct coli_model_config *c = &e->m.cfg;
	int T = e->tmax, H = c->hidden, qd = c->n_heads * c->head_dim;
	int inter = max3(c->moe_inter, c->shared_inter, c->dense_inter);
	int quant = coli_dtype_is_quant(c->quant);
	int rc;

	rc = xfer_alloc(e);
	rc = rc ? rc : layer_scratch_alloc(e, inter, quant);
	if (!rc && c->n_experts > 1)
		rc = expert_scratch_alloc(e, quant);
	if (quant) /* int8 values, fp32 scales and int32 sums per 32-block */
		e->scratch_bytes += (size_t)T * (H + (qd > inter ? qd : inter)) * 2;
	if (rc)
		return rc;
	/* as transformers computes it: inv_freq = 1 / theta^(2i/hd), in fp32 */
	/* over the rotated dims only (rope_dim, head_dim unless partial) */
	for (int i = 0; i < c->rope_dim / 2; i++)
		e->inv_freq[i] = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->rope_dim);
	return 0;
}
#undef ALLOC

/* The dense part and KV cache on the devices. Of several, one that cannot
 * hold its share (out of its memory, an error) is left out with one line and
 * the rest take the model over (split again, or whole on one), so a GPU short
 * of memory costs its share, not the other GPUs. rc != 0 (err set): the last
 * one could not either. */
static int dense_open(struct coli_engine *e, char *err, size_t errlen)
{
	int rc;

	while ((rc = coli_dense_dev_open(e, err, errlen)) && e->n_devs > 1 && e->n_dd > 0 &&
	       err[0]) {
		int bad = e->dds[e->n_dd - 1]->dev->index;

		fprintf(stderr, "coli: %s; going on without it\n", err);
		err[0] = 0;
		coli_dense_dev_close(e);
		coli_vram_device_drop(e, bad);
	}
	return rc;
}

/* Setting the devices up at open failed (rc, err): say so once and go on
 * CPU-only, as with --gpu off. Experts whose host copies CUDA_RELEASE_HOST
 * dropped meanwhile are read from the model file again by the tiers. */
static void devices_off(struct coli_engine *e, const char *what, int rc, char *err)
{
	if (err[0]) /* it names the device */
		fprintf(stderr, "coli: %s; running on the CPU\n", err);
	else
		fprintf(stderr, "coli: device %s: %s: %s; running on the CPU\n", e->devs[0]->name,
		        what, strerror(-rc));
	err[0] = 0;
	if (e->where)
		coli_moe_dev_release(e);
	e->where = NULL;
	e->dev_slab = NULL;
	coli_dense_dev_close(e);
	for (int d = 0; d < e->n_devs; d++)
		coli_dev_close(e->devs[d]);
	memset(e->vram, 0, sizeof(e->vram));
	e->n_devs = 0;
}

_Static_assert(COLI_MEM_NODE_ANY == -1 && COLI_MEM_NODE_INTERLEAVE == -2,
               "coli_engine_numa's documented values are mem/'s");

/* --numa-bind: resolved by mem/ (mem/numa.c), applied to the opening thread
 * before the CPU pool starts, so the pool's threads and every thread the
 * caller starts after coli_engine_open (colid's worker and HTTP threads)
 * inherit the node; the KV cache, the dense copy and the expert slots are
 * allocated on it. e->numa_why says what was chosen and why, for
 * coli_engine_numa. */
static int numa_bind(struct coli_engine *e, char *err, size_t errlen)
{
	char why[128];
	int rc = coli_mem_numa_resolve(e->opts.numa_bind, &e->numa_node, why, sizeof(why));

	if (rc) {
		snprintf(err, errlen, "--numa-bind: %s", why);
		return rc;
	}
	if (e->numa_node == COLI_MEM_NODE_INTERLEAVE)
		snprintf(e->numa_why, sizeof(e->numa_why), "memory interleaved over %d nodes",
		         coli_mem_numa_nodes());
	else if (e->numa_node < 0 && !strcmp(why, "off"))
		snprintf(e->numa_why, sizeof(e->numa_why), "off");
	else if (e->numa_node < 0)
		snprintf(e->numa_why, sizeof(e->numa_why), "off (%s)", why);
	else
		snprintf(e->numa_why, sizeof(e->numa_why), "node %d (%s)", e->numa_node, why);
	if (e->numa_node >= 0 && (rc = coli_mem_numa_bind_thread(e->numa_node)))
		fprintf(stderr, "coli: cannot run on NUMA node %d (%s); threads left unbound\n",
		        e->numa_node, strerror(-rc));
	if (e->opts.verbose)
		fprintf(stderr, "coli: numa-bind %s -> %s\n", e->opts.numa_bind, e->numa_why);
	return 0;
}

/* e->opts from o (NULL: the defaults and the environment), checked. */
static int opts_setup(struct coli_engine *e, const struct coli_opts *o, char *err, size_t errlen)
{
	int rc;

	if (o)
		e->opts = *o;
	else if ((rc = coli_opts_init(&e->opts, err, errlen)))
		return rc;
	rc = coli_opts_check(&e->opts, err, errlen);
	if (rc)
		return rc;
	if (e->opts.verbose) {
		fprintf(stderr, "coli: options (value, allowed):\n");
		coli_opts_print(&e->opts, stderr);
	}
	return 0;
}

/* The model file bound into e->m (which then owns the container), and its
 * tokenizer when it has one. */
static int model_open(struct coli_engine *e, const char *path, char *err, size_t errlen)
{
	coli_container_t *c = NULL;
	const void *tj;
	size_t tlen;
	int rc;

	rc = coli_io_container_open(path, &c);
	if (rc) {
		snprintf(err, errlen, "%s", coli_io_errmsg());
		return rc;
	}
	rc = coli_model_bind(&e->m, c, err, errlen);
	if (rc) {
		coli_io_container_close(c);
		return rc;
	}
	tj = coli_io_container_section(e->m.c, COLI_SECTION_TOKENIZER, &tlen);
	if (tj)
		return coli_tokenizer_load(tj, tlen, &e->tok, err, errlen);
	return 0;
}

/* The CPU pool, the KV cache (e->ctx tokens), the batch size and the
 * scratch buffers it sizes. */
static int host_open(struct coli_engine *e, char *err, size_t errlen)
{
	int rc,
	    threads = e->opts.threads > 0 ? e->opts.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	size_t kvd;

	if (e->opts.ctx > e->m.cfg.max_ctx && !e->opts.ctx_override) {
		snprintf(err, errlen,
		         "--ctx %d is above the model's trained context of %d tokens "
		         "(max_position_embeddings): give --ctx %d or less, or add "
		         "--ctx-override to run past it",
		         e->opts.ctx, e->m.cfg.max_ctx, e->m.cfg.max_ctx);
		return -EINVAL;
	}
	rc = coli_cpu_pool_create(threads, &e->pool);
	if (rc) {
		snprintf(err, errlen, "cannot start %d CPU threads", threads);
		return rc;
	}
	e->ctx =
	    e->opts.ctx > 0 ? e->opts.ctx : (e->m.cfg.max_ctx < 4096 ? e->m.cfg.max_ctx : 4096);
	kvd = (size_t)e->m.cfg.n_kv_heads * e->m.cfg.head_dim;
	e->kv_bytes = sizeof(float) * (size_t)e->m.cfg.n_layers * e->ctx * kvd;
	e->kcache = coli_mem_alloc(e->kv_bytes, e->numa_node);
	e->vcache = coli_mem_alloc(e->kv_bytes, e->numa_node);
	if (!e->kcache || !e->vcache) {
		snprintf(err, errlen, "cannot allocate the KV cache (%zu MB for %d tokens)",
		         2 * e->kv_bytes >> 20, e->ctx);
		return -ENOMEM;
	}
	if (e->opts.ubatch == 0)
		e->opts.ubatch = ubatch_auto(e);
	if (e->opts.ubatch < 1 || e->opts.ubatch > UBATCH_MAX) {
		snprintf(err, errlen,
		         "--ubatch %d: expected 1 to %d tokens (0: %d with a GPU that has room, %d "
		         "without)",
		         e->opts.ubatch, UBATCH_MAX, UBATCH_DEV, UBATCH_CPU);
		return -EINVAL;
	}
	e->tmax = e->opts.ubatch < e->ctx ? e->opts.ubatch : e->ctx;
	rc = scratch_alloc(e);
	if (rc)
		snprintf(err, errlen, "out of memory for scratch buffers");
	return rc;
}

/* The devices --gpu names, with their injected faults (--gpu-fail-*). */
static int devices_open(struct coli_engine *e, char *err, size_t errlen)
{
	unsigned gpu_flags = e->opts.ptx_fail == COLI_OPT_PTX_FAIL_90    ? COLI_GPU_FAIL_JIT_90
	                     : e->opts.ptx_fail == COLI_OPT_PTX_FAIL_ALL ? COLI_GPU_FAIL_JIT_ALL
	                                                                 : 0;
	int rc;

	rc = coli_dev_open_all(e->opts.gpu, e->opts.gpu_fail_after, e->opts.sim_latency_us,
	                       e->opts.pdl, gpu_flags, e->devs, COLI_MAX_DEVS, &e->n_devs, err,
	                       errlen);
	if (rc)
		return rc;
	for (int i = 0; i < e->n_devs; i++) {
		static const enum coli_dev_fail_at at[] = {
		    [COLI_OPT_FAIL_AT_ANY] = COLI_FAIL_AT_ANY,
		    [COLI_OPT_FAIL_AT_LAUNCH] = COLI_FAIL_AT_LAUNCH,
		    [COLI_OPT_FAIL_AT_COPY] = COLI_FAIL_AT_COPY,
		    [COLI_OPT_FAIL_AT_SYNC] = COLI_FAIL_AT_SYNC,
		    [COLI_OPT_FAIL_AT_ALLOC] = COLI_FAIL_AT_ALLOC,
		};

		if (e->opts.gpu_fail_dev >= 0 && e->opts.gpu_fail_dev != i)
			e->devs[i]->fail_after = -1;
		e->devs[i]->fail_at = at[e->opts.gpu_fail_at];
	}
	return 0;
}

/* The dense part first: it must fit; experts then take what is left. A
 * device of several that cannot hold its share is left out (dense_open);
 * when none can, or the experts' buffers fail on a device holding the dense
 * part, every device is given up with a message: the model then runs on the
 * CPU. So this cannot fail. */
static void devices_place(struct coli_engine *e, char *err, size_t errlen)
{
	int rc;

	if (e->n_devs && e->opts.dense != COLI_OPT_DENSE_CPU) {
		rc = dense_open(e, err, errlen);
		if (rc)
			devices_off(e, "the dense part and KV cache", rc, err);
	}
	if (e->n_devs) {
		e->slab_moved =
		    coli_dense_dev_slab_set; /* vram.c's adaptation tells the dense part */
		rc = coli_moe_dev_place(e, err, errlen);
		if (!rc && (rc = coli_dense_dev_plan_init(e)))
			snprintf(err, errlen, "device %s: routing tables: %s", e->devs[0]->name,
			         strerror(-rc));
		if (rc)
			devices_off(e, "the experts' buffers", rc, err);
	}
}

/* --route-trace: the file every routing decision is written to. */
static int trace_open(struct coli_engine *e, char *err, size_t errlen)
{
	if (!e->opts.route_trace[0])
		return 0;
	e->trace = fopen(e->opts.route_trace, "w");
	if (!e->trace) {
		int rc = -errno;

		snprintf(err, errlen, "ROUTE_TRACE: cannot write '%s'", e->opts.route_trace);
		return rc;
	}
	fprintf(e->trace, "# coli route trace v1: pos layer expert:weight...\n");
	return 0;
}

/* Each step leaves what it made in e and returns 0 or -errno with err set;
 * the first failure closes e once, whatever the steps before it made
 * (coli_engine_close takes a half-open engine). */
int coli_engine_open(const char *path, const struct coli_opts *o, coli_engine_t **out, char *err,
                     size_t errlen)
{
	struct coli_engine *e = calloc(1, sizeof(*e));
	int rc;

	if (!e)
		return -ENOMEM;
	rc = opts_setup(e, o, err, errlen);
	rc = rc ? rc : model_open(e, path, err, errlen);
	rc = rc ? rc : numa_bind(e, err, errlen);
	rc = rc ? rc : host_open(e, err, errlen);
	/* host tiers first: the RAM budget counts the dense part and the KV cache */
	rc = rc ? rc : coli_tiers_open(e, err, errlen);
	rc = rc ? rc : devices_open(e, err, errlen);
	if (rc)
		goto err;
	e->hist = calloc((size_t)e->ctx, sizeof(int));
	if (!e->hist) {
		rc = -ENOMEM;
		goto err;
	}
	devices_place(e, err, errlen);
	rc = trace_open(e, err, errlen);
	if (rc)
		goto err;
	*out = e;
	return 0;
err:
	coli_engine_close(e);
	return rc;
}

void coli_engine_close(coli_engine_t *e)
{
	if (!e)
		return;
	if (e->trace)
		fclose(e->trace);
	coli_tiers_close(e);
	coli_mem_free(e->kcache, e->kv_bytes);
	coli_mem_free(e->vcache, e->kv_bytes);
	free(e->x), free(e->q), free(e->kx), free(e->vx), free(e->att);
	free(e->scores), free(e->attn), free(e->mlp), free(e->proj), free(e->glogits);
	free(e->g), free(e->u), free(e->ag);
	free(e->inv_freq);
	free(e->pair_expert);
	free(e->assign), free(e->la_idle), free(e->streamed), free(e->cand), free(e->cand_n);
	free(e->pair_first), free(e->pair_n), free(e->need), free(e->redo);
	free((void *)e->slab_ptr), free((void *)e->host_slab);
	if (e->n_devs)
		coli_moe_dev_release(e);
	coli_dense_dev_close(e);
	free(e->hist);
	for (int d = 0; d < e->n_devs; d++)
		coli_dev_close(e->devs[d]);
	coli_mem_free_buffers(e->xfer, e->xfer_bytes); /* after the devices are closed */
	actbufs_free(e->ax, e->tmax);
	actbufs_free(e->ah, e->tmax);
	actbufs_free(e->ph, e->tmax * e->m.cfg.top_k);
	free(e->pg), free(e->pu), free(e->hag), free(e->xview), free(e->xjobs), free(e->xpairs);
	if (e->pool)
		coli_cpu_pool_destroy(e->pool);
	if (e->tok)
		coli_tokenizer_free(e->tok);
	if (e->m.c)
		coli_io_container_close(e->m.c);
	free(e);
}

const struct coli_model_config *coli_engine_config(const coli_engine_t *e)
{
	return &e->m.cfg;
}

const coli_tokenizer_t *coli_engine_tokenizer(const coli_engine_t *e)
{
	return e->tok;
}

int coli_engine_ctx(const coli_engine_t *e)
{
	return e->ctx;
}

int coli_engine_ubatch(const coli_engine_t *e)
{
	return e->tmax;
}

int coli_engine_pos(const coli_engine_t *e)
{
	return e->pos;
}

void coli_engine_reset(coli_engine_t *e)
{
	e->pos = 0;
}

/* A device holding (part of) the dense part failed with why: the dense
 * part moves to the devices left, when there are and they can hold it, else
 * to the CPU; either way the KV cache is rebuilt there from the token
 * history (pos0 tokens), so no token is lost. */
static int dense_moved(struct coli_engine *e, int pos0, int why)
{
	char err[256] = "";
	int failed = 0, rc;

	for (int i = 0; i < e->n_dd; i++)
		failed |= e->dds[i]->dev->failed;
	fprintf(stderr, "coli: the dense device failed (%s); %d cached tokens to rebuild\n",
	        strerror(-why), pos0);
	coli_dense_dev_close(e);
	e->pos = 0;
	/* only a device marked failed is left out: anything else would fail again */
	if (!failed || coli_dense_dev_open(e, err, sizeof(err)) || coli_dense_dev_plan_init(e)) {
		coli_dense_dev_close(e); /* a partial open */
		fprintf(stderr, "coli: the dense part runs on the CPU from now on%s%s\n",
		        err[0] ? ": " : "", err);
	}
	for (int i = 0, n; i < pos0; i += n) {
		n = pos0 - i < e->tmax ? pos0 - i : e->tmax;
		rc = e->dd ? coli_forward_dev(e, e->hist + i, n, NULL, 0, NULL)
		           : coli_forward(e, e->hist + i, n, NULL, 0);
		if (rc)
			return e->dd ? dense_moved(e, pos0, rc)
			             : rc; /* another fell: again, fewer */
	}
	return 0;
}

/* One chunk on the dense device(s), or on the CPU. If a dense device fails,
 * the dense part moves (dense_moved) and the chunk runs again: no token is
 * lost. */
/* next != NULL: logits NULL; *next = the greedy id after the last token
 * (on the dense device when there is one, else coli_argmax of the CPU's). */
static int forward_chunk(struct coli_engine *e, const int *ids, int T, float *logits,
                         int all_logits, int *next)
{
	int pos0 = e->pos, rc;

	while (e->dd) {
		rc = coli_forward_dev(e, ids, T, logits, all_logits, next);
		if (rc == 0 || rc == -E2BIG || rc == -EINVAL) {
			if (rc == 0)
				memcpy(e->hist + pos0, ids, sizeof(int) * T);
			return rc;
		}
		rc = dense_moved(e, pos0, rc);
		if (rc)
			return rc;
	}
	rc = coli_forward(e, ids, T, next ? e->glogits : logits, all_logits);
	if (rc == 0) {
		memcpy(e->hist + pos0, ids, sizeof(int) * T);
		if (next)
			*next = coli_argmax(e->glogits, e->m.cfg.vocab);
	}
	return rc;
}

/* The forward of n tokens in chunks of tmax; the logits (or with next, the
 * greedy id) of the last chunk only, unless all_logits. */
static int forward(coli_engine_t *e, const int *ids, int n, float *logits, int all_logits,
                   int *next)
{
	int V = e->m.cfg.vocab;

	if (n <= 0)
		return -EINVAL;
	if (e->pos + n > e->ctx)
		return -E2BIG;
	for (int i = 0; i < n; i += e->tmax) {
		int chunk = n - i < e->tmax ? n - i : e->tmax, last = i + chunk == n;
		float *dst = NULL;
		int rc;

		if (logits && all_logits)
			dst = logits + (size_t)i * V;
		else if (logits && last)
			dst = logits;
		rc = forward_chunk(e, ids + i, chunk, dst, all_logits, last ? next : NULL);
		if (!rc && e->n_devs)
			coli_moe_dev_adapt(e);
		if (rc) {
			if (!e->errmsg[0])
				snprintf(e->errmsg, sizeof(e->errmsg), "%s", strerror(-rc));
			return rc;
		}
	}
	return 0;
}

int coli_engine_forward(coli_engine_t *e, const int *ids, int n, float *logits, int all_logits)
{
	return forward(e, ids, n, logits, all_logits, NULL);
}

int coli_engine_forward_argmax(coli_engine_t *e, const int *ids, int n, int *next)
{
	return next ? forward(e, ids, n, NULL, 0, next) : -EINVAL;
}

int coli_engine_forward_last(coli_engine_t *e, const int *ids, int n, const float **logits)
{
	/* where a decode step's logits arrive from the dense device (else the
	 * CPU's own buffer): coli_forward_dev then copies nothing */
	float *buf = e->xlogits ? e->xlogits : e->glogits;
	int rc;

	if (!logits)
		return -EINVAL;
	rc = forward(e, ids, n, buf, 0, NULL);
	*logits = rc ? NULL : buf;
	return rc;
}

void coli_engine_stats(const coli_engine_t *e, struct coli_engine_stats *st)
{
	*st = e->est;
	st->dense_on_device = e->dd != NULL;
	coli_tiers_stats((struct coli_engine *)e, st); /* the streamer's counters */
	st->dev_ops = 0;
	for (int d = 0; d < e->n_devs; d++)
		st->dev_ops += (uint64_t)e->devs[d]->launches;
	st->cost_bw_cpu = e->bw_cpu;
	st->cost_bw_stream = e->n_devs ? e->bw_stream : 0;
}

void coli_engine_settle(coli_engine_t *e)
{
	coli_tiers_settle_all(e);
}

const char *coli_engine_errmsg(const coli_engine_t *e)
{
	return e->errmsg;
}

int coli_engine_numa(const coli_engine_t *e, const char **why)
{
	if (why)
		*why = e->numa_why;
	return e->numa_node;
}
