/*
 * core/engine.c — the engine object: opens the container, binds the model,
 * loads the tokenizer, owns the thread pool and the route trace, and opens
 * and closes the engine's parts in order (core/core_internal.h lists them,
 * each with its owner): the KV cache (coli_kv_alloc), the forward's scratch
 * (coli_scratch_alloc), the MoE scheduler's lists (coli_moe_sched_alloc),
 * the RAM tier (coli_tiers_open), the devices, the dense part on them
 * (coli_dense_dev_open) and the VRAM tier (coli_moe_dev_place); close
 * releases each once, whatever open reached. The forward pass lives in
 * core/forward and core/moe; this file installs the hooks the parts below
 * call up through (e->vram.slab_moved).
 *
 * Memory: the KV cache is a pool of blocks of COLI_KV_BLOCK positions, each
 * [n_layers] rows of [n_kv_heads*head_dim] in --kv-type (bf16 by default;
 * core/forward/kv.h) for K and again for V, allocated through mem/ (NUMA
 * placement decided there): --kv-gb's worth, or by default --parallel x
 * ctx positions' (every slot full at once, as before the pool); ctx is
 * --ctx, or the model's trained length capped by the memory budget
 * (core/ctx.c), said at start when capped.
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
#include <limits.h>
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

/* The dense part and KV cache on the devices. Of several, one that cannot
 * hold its share (out of its memory, an error) is left out with one line and
 * the rest take the model over (split again, or whole on one), so a GPU short
 * of memory costs its share, not the other GPUs. rc != 0 (err set): the last
 * one could not either. */
static int dense_open(struct coli_engine *e, char *err, size_t errlen)
{
	int rc;

	while ((rc = coli_dense_dev_open(e, err, errlen)) && e->vram.n_devs > 1 &&
	       e->dense.n_dd > 0 && err[0]) {
		int bad = e->dense.dds[e->dense.n_dd - 1]->dev->index;

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
		fprintf(stderr, "coli: device %s: %s: %s; running on the CPU\n",
		        e->vram.devs[0]->name, what, strerror(-rc));
	err[0] = 0;
	if (e->vram.where)
		coli_moe_dev_release(e);
	e->vram.where = NULL;
	e->vram.dev_slab = NULL;
	coli_dense_dev_close(e);
	for (int d = 0; d < e->vram.n_devs; d++)
		coli_dev_close(e->vram.devs[d]);
	memset(e->vram.slot, 0, sizeof(e->vram.slot));
	e->vram.n_devs = 0;
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
	int rc = 0, gn = -1, ord;

	/* auto on several nodes: the node of the GPU the engine will call its
	 * first, as CUDA numbers them (mem/'s own guess is the first in PCI
	 * order, which CUDA_VISIBLE_DEVICES or --gpu 1 need not use) */
	if (!strcmp(e->opts.numa_bind, "auto") && coli_mem_numa_nodes() > 1)
		gn = coli_dev_spec_node(e->opts.gpu, &ord);
	if (gn >= 0) {
		e->numa_node = gn;
		snprintf(why, sizeof(why), "auto: node %d of GPU %d", gn, ord);
	} else {
		rc = coli_mem_numa_resolve(e->opts.numa_bind, &e->numa_node, why, sizeof(why));
	}

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

/* The KV pool's blocks: --kv-gb's worth, or 0 (coli_kv_alloc's default:
 * every slot full at once); -EINVAL with err when --kv-gb holds less than
 * one block. */
static int kv_pool_blocks(const struct coli_engine *e, int kt, int vt, char *err, size_t errlen)
{
	double block =
	    (double)coli_kv_token_bytes(&e->m.cfg, kt, vt) * e->m.cfg.n_layers * COLI_KV_BLOCK;
	double n = e->opts.kv_gb * 1e9 / block;

	if (e->opts.kv_gb <= 0)
		return 0;
	if (n < 1 || n > INT_MAX / COLI_KV_BLOCK) {
		snprintf(err, errlen,
		         "--kv-gb %g: a block of %d tokens of this model takes %.3f MB (--kv-type "
		         "%s); give room for 1 to %d of them",
		         e->opts.kv_gb, COLI_KV_BLOCK, block / 1e6, e->opts.kv_type,
		         INT_MAX / COLI_KV_BLOCK);
		return -EINVAL;
	}
	return (int)n;
}

/* The CPU pool, the KV cache (e->kv.ctx tokens), the batch size and the
 * scratch buffers it sizes. */
static int host_open(struct coli_engine *e, char *err, size_t errlen)
{
	int rc,
	    threads = e->opts.threads > 0 ? e->opts.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	int ctx, kt, vt, n_seq, blocks, trained = coli_config_ctx_trained(&e->m.cfg);
	char why[160];

	if (e->opts.ctx > trained && !e->opts.ctx_override) {
		const struct coli_model_config *c = &e->m.cfg;

		if (c->rope_factor > 1 && c->rope_scaling == COLI_ROPE_YARN)
			snprintf(why, sizeof(why), "YaRN: original %d x factor %g",
			         c->rope_orig_ctx, c->rope_factor);
		else if (c->rope_factor > 1)
			snprintf(why, sizeof(why), "linear RoPE scaling: %d x factor %g",
			         c->max_ctx, c->rope_factor);
		else
			snprintf(why, sizeof(why), "max_position_embeddings");
		snprintf(err, errlen,
		         "--ctx %d is above the model's trained context of %d tokens "
		         "(%s): give --ctx %d or less, or add "
		         "--ctx-override to run past it",
		         e->opts.ctx, trained, why, trained);
		return -EINVAL;
	}
	if (e->opts.cpu_isa != COLI_OPT_CPU_ISA_AUTO &&
	    (rc = coli_cpu_isa_force((enum coli_cpu_isa)(e->opts.cpu_isa - 1)))) {
		snprintf(err, errlen, "--cpu-isa %s: this CPU (or its kernel) does not offer it",
		         coli_cpu_isa_name((enum coli_cpu_isa)(e->opts.cpu_isa - 1)));
		return rc;
	}
	if (e->opts.verbose)
		fprintf(stderr, "coli: cpu kernels: %s\n", coli_cpu_isa_name(coli_cpu_isa()));
	rc = coli_cpu_pool_create(threads, &e->pool);
	if (rc) {
		snprintf(err, errlen, "cannot start %d CPU threads", threads);
		return rc;
	}
	ctx = e->opts.ctx;
	if (ctx <= 0) {
		ctx = coli_engine_ctx_default(e, e->opts.parallel, why, sizeof(why));
		if (ctx < trained || e->opts.verbose)
			fprintf(stderr, "coli: ctx %d (%s; --ctx sets it)\n", ctx, why);
	}
	/* --parallel 0: what the budget holds of ctx-long slots (core/ctx.c) */
	n_seq = e->opts.parallel > 0 ? e->opts.parallel : coli_engine_parallel_default(e, ctx);
	coli_kv_types_parse(e->opts.kv_type, &kt, &vt); /* checked with the options */
	blocks = kv_pool_blocks(e, kt, vt, err, errlen);
	if (blocks < 0)
		return blocks;
	rc = coli_kv_alloc(&e->kv, &e->m.cfg, n_seq, ctx, kt, vt, blocks, e->numa_node);
	if (rc) {
		snprintf(err, errlen,
		         "cannot allocate the KV cache (%zu MB: %d blocks of %d tokens of %s)",
		         (e->kv.bytes + e->kv.vbytes) >> 20, e->kv.n_blocks, COLI_KV_BLOCK,
		         e->opts.kv_type);
		return rc;
	}
	if (e->opts.kv_scramble)
		coli_kv_scramble(&e->kv);
	if (e->opts.verbose || e->opts.kv_gb > 0) /* (a dense device holds the same blocks) */
		fprintf(stderr,
		        "coli: KV cache %s: %d blocks of %d tokens (%d tokens; %d sequences of up "
		        "to %d) x %zu bytes = %.3g GB\n",
		        e->opts.kv_type, e->kv.n_blocks, COLI_KV_BLOCK,
		        e->kv.n_blocks * COLI_KV_BLOCK, n_seq, ctx,
		        (e->kv.bytes + e->kv.vbytes) / ((size_t)e->kv.n_blocks * COLI_KV_BLOCK),
		        (e->kv.bytes + e->kv.vbytes) / 1e9);
	if (e->opts.ubatch == 0)
		e->opts.ubatch = ubatch_auto(e);
	if (e->opts.ubatch < 1 || e->opts.ubatch > UBATCH_MAX) {
		snprintf(err, errlen,
		         "--ubatch %d: expected 1 to %d tokens (0: %d with a GPU that has room, %d "
		         "without)",
		         e->opts.ubatch, UBATCH_MAX, UBATCH_DEV, UBATCH_CPU);
		return -EINVAL;
	}
	e->s.tmax = e->opts.ubatch < e->kv.ctx ? e->opts.ubatch : e->kv.ctx;
	rc = coli_scratch_alloc(&e->s, &e->m.cfg, e->s.tmax, e->kv.ctx, e->kv.n_seq,
	                        coli_cpu_pool_threads(e->pool));
	rc = rc ? rc : coli_moe_sched_alloc(&e->moe, &e->m.cfg, e->s.tmax);
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
	                       e->opts.pdl, gpu_flags, e->vram.devs, COLI_MAX_DEVS, &e->vram.n_devs,
	                       err, errlen);
	if (rc)
		return rc;
	for (int i = 0; i < e->vram.n_devs; i++) {
		static const enum coli_dev_fail_at at[] = {
		    [COLI_OPT_FAIL_AT_ANY] = COLI_FAIL_AT_ANY,
		    [COLI_OPT_FAIL_AT_LAUNCH] = COLI_FAIL_AT_LAUNCH,
		    [COLI_OPT_FAIL_AT_COPY] = COLI_FAIL_AT_COPY,
		    [COLI_OPT_FAIL_AT_SYNC] = COLI_FAIL_AT_SYNC,
		    [COLI_OPT_FAIL_AT_ALLOC] = COLI_FAIL_AT_ALLOC,
		};

		if (e->opts.gpu_fail_dev >= 0 && e->opts.gpu_fail_dev != i)
			e->vram.devs[i]->fail_after = -1;
		e->vram.devs[i]->fail_at = at[e->opts.gpu_fail_at];
	}
	return 0;
}

/* The dense part first: it must fit; experts then take what is left. A
 * device of several that cannot hold its share is left out (dense_open);
 * when none can, or the experts' buffers fail on a device holding the dense
 * part, every device is given up with a message: the model then runs on the
 * CPU. So this cannot fail. A model whose matrices the device kernels
 * cannot take (columns not a multiple of 32, GGUF's block types kept as
 * stored, gpt-oss's sinks, windows, biases and clamped SwiGLU:
 * coli_model_dev_check) keeps its dense part on the CPU, or, when its experts are such, runs on the
 * CPU. */
static void devices_place(struct coli_engine *e, char *err, size_t errlen)
{
	char why[160];
	int rc, oai = 1; /* every device has gpt-oss's expert activation */

	for (int d = 0; d < e->vram.n_devs; d++)
		oai = oai && coli_dev_can(e->vram.devs[d], COLI_DEV_CAP_SWIGLU_OAI);
	if (e->vram.n_devs && (rc = coli_model_dev_check(&e->m, oai ? 2 : 1, why, sizeof(why)))) {
		snprintf(err, errlen, "%s", why);
		devices_off(e, "the experts", rc, err);
	}
	/* a K,V pair the GPU's attention has no kernels for (ptx/attn/kv_rows.cuh) */
	for (int d = 0; d < e->vram.n_devs; d++)
		if (e->kv.kt != e->kv.vt && !(e->kv.kt == COLI_KV_Q8 && e->kv.vt == COLI_KV_BF16) &&
		    !coli_dev_can(e->vram.devs[d], COLI_DEV_CAP_KV_ANY) &&
		    e->opts.dense != COLI_OPT_DENSE_CPU) {
			fprintf(stderr,
			        "coli: --kv-type %s: no GPU kernels for that pair (equal types, or "
			        "q8,bf16): the dense part runs on the CPU\n",
			        e->opts.kv_type);
			e->opts.dense = COLI_OPT_DENSE_CPU;
		}
	if (e->vram.n_devs && e->opts.dense != COLI_OPT_DENSE_CPU &&
	    coli_model_dev_check(&e->m, 0, why, sizeof(why))) {
		fprintf(stderr, "coli: %s: the dense part runs on the CPU\n", why);
	} else if (e->vram.n_devs && e->opts.dense != COLI_OPT_DENSE_CPU) {
		rc = dense_open(e, err, errlen);
		if (rc)
			devices_off(e, "the dense part and KV cache", rc, err);
	}
	if (e->vram.n_devs) {
		e->vram.slab_moved =
		    coli_dense_dev_slab_set; /* vram.c's adaptation tells the dense part */
		rc = coli_moe_dev_place(e, err, errlen);
		if (!rc && (rc = coli_dense_dev_plan_init(e)))
			snprintf(err, errlen, "device %s: routing tables: %s",
			         e->vram.devs[0]->name, strerror(-rc));
		if (rc)
			devices_off(e, "the experts' buffers", rc, err);
	}
	if (e->dense.dd) { /* the dense devices hold every layer's KV rows */
		fprintf(stderr,
		        "coli: host KV rows not kept (%.3g GB of RAM): the dense device holds the "
		        "cache; a failover rebuilds them from the token ids\n",
		        (e->kv.bytes + e->kv.vbytes) / 1e9);
		coli_kv_rows_drop(&e->kv);
	} else { /* touched now: the prefix cache fills the whole pool in time, and the
		  * RSS should say so from the start (the planner counted it) */
		memset(e->kv.kcache, 0, e->kv.bytes);
		if (e->kv.vcache)
			memset(e->kv.vcache, 0, e->kv.vbytes);
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

const struct coli_vocab_trie *coli_engine_vocab_trie(coli_engine_t *e)
{
	if (!e->trie && e->tok) {
		double t0 = coli_now_s();

		if (!coli_vocab_trie_build(e->tok, &e->trie)) /* (NULL again: out of memory) */
			fprintf(stderr,
			        "coli: constrained decoding: vocabulary trie built in %.0f ms, "
			        "%.1f MB\n",
			        (coli_now_s() - t0) * 1e3, coli_vocab_trie_bytes(e->trie) / 1e6);
	}
	return e->trie;
}

void coli_engine_close(coli_engine_t *e)
{
	if (!e)
		return;
	coli_vocab_trie_free(e->trie);
	if (e->trace)
		fclose(e->trace);
	coli_tiers_close(e);
	if (e->vram.n_devs)
		coli_moe_dev_release(e);
	coli_dense_dev_close(e);
	for (int d = 0; d < e->vram.n_devs; d++)
		coli_dev_close(e->vram.devs[d]);
	coli_moe_sched_free(&e->moe);
	coli_scratch_free(&e->s); /* after the devices are closed */
	coli_kv_free(&e->kv);
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
	return e->kv.ctx;
}

int coli_engine_ubatch(const coli_engine_t *e)
{
	return e->s.tmax;
}

int coli_engine_pos(const coli_engine_t *e)
{
	return e->kv.seq[0].pos;
}

void coli_engine_reset(coli_engine_t *e)
{
	int shared;

	coli_kv_open(&e->kv, 0, NULL, 0, 0, &shared); /* (a closed slot 0 held again, empty) */
}

int coli_engine_rewind(coli_engine_t *e, int pos)
{
	if (pos < 0 || pos > e->kv.seq[0].pos)
		return -EINVAL;
	e->kv.seq[0].pos = pos; /* a device's cache is addressed by each call's position */
	return 0;
}

/* Tokens i .. i + n of slot s's history forwarded again into its cache
 * (its position at i), with no logits: on the dense device(s), or the CPU. */
static int replay(struct coli_engine *e, int s, int i, int n)
{
	const struct coli_run r = {.slot = s, .n = n, .ids = e->kv.seq[s].hist + i};
	const struct coli_batch b = {.n_runs = 1, .runs = &r};

	if (!e->dense.dd)
		return coli_forward_batch(e, &b, NULL);
	return e->kv.n_seq > 1 ? coli_forward_dev_batch(e, &b, NULL, NULL)
	                       : coli_forward_dev(e, r.ids, n, NULL, 0, NULL);
}

/* The dense part moved after why (coli_engine_dense_moved, whose words
 * hold), every held slot's rows written again; a device that fails during
 * the rebuild moves it again. */
static int move_and_rebuild(struct coli_engine *e, int why)
{
	char err[256] = "";
	int failed = 0, rc, cached = 0;

	for (int i = 0; i < e->dense.n_dd; i++)
		failed |= e->dense.dds[i]->dev->failed;
	for (int s = 0; s < e->kv.n_seq; s++)
		cached += e->kv.seq[s].pos;
	fprintf(stderr, "coli: the dense device failed (%s); %d cached tokens to rebuild\n",
	        strerror(-why), cached);
	coli_dense_dev_close(e);
	/* only a device marked failed is left out: anything else would fail again */
	if (!failed || coli_dense_dev_open(e, err, sizeof(err)) || coli_dense_dev_plan_init(e)) {
		coli_dense_dev_close(e); /* a partial open */
		fprintf(stderr, "coli: the dense part runs on the CPU from now on%s%s\n",
		        err[0] ? ": " : "", err);
		rc = coli_kv_rows_alloc(&e->kv); /* (counted in the RAM budget all along) */
		if (rc) {
			fprintf(stderr, "coli: cannot allocate the host KV rows (%.3g GB) again\n",
			        (e->kv.bytes + e->kv.vbytes) / 1e9);
			return rc;
		}
	}
	e->kv.rebuild = 1; /* (coli_kv_grow only extends) */
	for (int s = 0; s < e->kv.n_seq; s++) {
		int had = e->kv.seq[s].pos;

		e->kv.seq[s].pos = 0;
		for (int i = 0, n; i < had; i += n) {
			n = had - i < e->s.tmax ? had - i : e->s.tmax;
			rc = replay(e, s, i, n);
			if (rc) { /* another fell: again, fewer (what was rebuilt stays) */
				e->kv.seq[s].pos = had;
				e->kv.rebuild = 0;
				return e->dense.dd ? move_and_rebuild(e, rc) : rc;
			}
		}
	}
	e->kv.rebuild = 0;
	return 0;
}

/* A device holding (part of) the dense part failed with why: the dense
 * part moves to the devices left, when there are and they can hold it, else
 * to the CPU; either way every slot's KV cache is rebuilt there from its
 * token history (the tokens before the failed step), so no token is lost.
 * Closed slots' own rows too (held for it, released after); cached blocks
 * no slot lists are given up (coli_kv_flush); a block several tables share
 * gets the same rows from each. */
int coli_engine_dense_moved(struct coli_engine *e, int why)
{
	unsigned char closed[COLI_MAX_SEQ];
	int rc;

	for (int s = 0; s < e->kv.n_seq; s++)
		closed[s] = !e->kv.seq[s].held;
	coli_kv_flush(&e->kv);
	rc = move_and_rebuild(e, why);
	for (int s = 0; s < e->kv.n_seq; s++) {
		if (closed[s] && rc)
			e->kv.seq[s].pos = 0; /* not rebuilt: nothing of it is kept */
		if (closed[s])
			coli_kv_release(&e->kv, s);
	}
	return rc;
}

void coli_argmax_rows(const struct coli_engine *e, const float *logits, int n, int *next)
{
	for (int j = 0; j < n; j++)
		next[j] = coli_argmax(logits + (size_t)j * e->m.cfg.vocab, e->m.cfg.vocab);
}

/* A chunk of slot 0 on the dense device(s); with several slots open, as
 * a batch of one run. */
static int dev_chunk(struct coli_engine *e, const int *ids, int T, float *logits, int all_logits,
                     int *next)
{
	const struct coli_run r = {.slot = 0,
	                           .n = T,
	                           .ids = ids,
	                           .logits = all_logits       ? 2
	                                     : logits || next ? 1
	                                                      : 0};

	if (e->kv.n_seq == 1)
		return coli_forward_dev(e, ids, T, logits, all_logits, next);
	return coli_forward_dev_batch(e, &(struct coli_batch){.n_runs = 1, .runs = &r}, logits,
	                              next);
}

/* One chunk on the dense device(s), or on the CPU. If a dense device fails,
 * the dense part moves (coli_engine_dense_moved) and the chunk runs again: no token is
 * lost. */
/* next != NULL: *next = the greedy id after the last token, next[T] after
 * each with all_logits (on the dense device when there is one, else
 * coli_argmax of the CPU's logits: with all_logits in logits [T][vocab]). */
static int forward_chunk(struct coli_engine *e, const int *ids, int T, float *logits,
                         int all_logits, int *next)
{
	int pos0 = e->kv.seq[0].pos, rc;

	while (e->dense.dd) {
		rc = dev_chunk(e, ids, T, logits, all_logits, next);
		if (rc == 0 || rc == -E2BIG || rc == -EINVAL || rc == -ENOSPC) {
			if (rc == 0)
				memcpy(e->kv.seq[0].hist + pos0, ids, sizeof(int) * T);
			return rc;
		}
		rc = coli_engine_dense_moved(e, rc);
		if (rc)
			return rc;
	}
	rc = coli_forward(e, ids, T, next && !all_logits ? e->s.glogits : logits, all_logits);
	if (rc == 0 && next) /* (slot 0's history recorded by the forward) */
		coli_argmax_rows(e, all_logits ? logits : e->s.glogits, all_logits ? T : 1, next);
	return rc;
}

/* The forward of n tokens in chunks of tmax; the logits (or with next, the
 * greedy id) of the last token only, unless all_logits: every token's (with
 * next, next[n], and logits a buffer [n][vocab] where they come to the host). */
static int forward(coli_engine_t *e, const int *ids, int n, float *logits, int all_logits,
                   int *next)
{
	int V = e->m.cfg.vocab;

	if (n <= 0)
		return -EINVAL;
	if (e->kv.seq[0].pos + n > e->kv.ctx)
		return -E2BIG;
	for (int i = 0; i < n; i += e->s.tmax) {
		int chunk = n - i < e->s.tmax ? n - i : e->s.tmax, last = i + chunk == n;
		float *dst = NULL;
		int rc;

		if (logits && all_logits)
			dst = logits + (size_t)i * V;
		else if (logits && last)
			dst = logits;
		rc = forward_chunk(e, ids + i, chunk, dst, all_logits,
		                   !next        ? NULL
		                   : all_logits ? next + i
		                   : last       ? next
		                                : NULL);
		if (!rc && e->vram.n_devs)
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

int coli_engine_forward_argmax_all(coli_engine_t *e, const int *ids, int n, float *buf, int *next)
{
	return next && buf ? forward(e, ids, n, buf, 1, next) : -EINVAL;
}

int coli_engine_forward_last(coli_engine_t *e, const int *ids, int n, const float **logits)
{
	/* where a decode step's logits arrive from the dense device (else the
	 * CPU's own buffer): coli_forward_dev then copies nothing */
	float *buf = e->s.xlogits ? e->s.xlogits : e->s.glogits;
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
	st->dense_on_device = e->dense.dd != NULL;
	st->kv_bytes = e->kv.bytes + e->kv.vbytes;
	st->kv_token_bytes =
	    e->kv.n_blocks ? st->kv_bytes / ((size_t)e->kv.n_blocks * COLI_KV_BLOCK) : 0;
	st->kv_blocks = e->kv.n_blocks;
	st->kv_block_tokens = COLI_KV_BLOCK;
	st->kv_blocks_free = e->kv.n_free;
	if (e->kv.seq)
		coli_kv_counts(&e->kv, &st->kv_blocks_used, &st->kv_blocks_cached);
	st->kv_seqs = e->kv.n_seq;
	st->kv_seqs_open = 0;
	for (int s = 0; s < e->kv.n_seq; s++)
		st->kv_seqs_open += e->kv.seq[s].open;
	coli_tiers_stats((struct coli_engine *)e, st); /* the streamer's counters */
	st->dev_ops = 0;
	for (int d = 0; d < e->vram.n_devs; d++)
		st->dev_ops += (uint64_t)e->vram.devs[d]->launches;
	st->cost_bw_cpu = e->moe.bw_cpu;
	st->cost_bw_stream = e->vram.n_devs ? e->moe.bw_stream : 0;
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
