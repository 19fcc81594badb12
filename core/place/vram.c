/*
 * core/place/vram.c — the VRAM expert tier: which routed experts are resident on
 * which device, decided at open and adapted between tokens.
 *
 * Placement (at open, coli_moe_dev_place): each device gets working buffers
 * for tmax*top_k (token, expert) pairs and its staging slots (made here,
 * used by core/moe/moe_dev.c),
 * then whole expert slabs are uploaded — hottest first by the usage file's
 * heat, ties interleaved across layers (expert 0 of every MoE layer, then
 * expert 1, ...) so every layer gets the same share — until --vram-gb (or the
 * device's free memory less a reserve) is used, the first device before the
 * next. With several devices, the layers wholly among the experts that fit
 * go whole to the device holding their dense part (all of it on the first,
 * or each device its range of layers: --split), so they are planned there
 * and not split over devices (whole_layers_first); a device of several that
 * holds none of the dense part and cannot take its buffers is left out
 * (coli_vram_device_drop, which core/engine.c also calls for a device that
 * cannot hold its share of the dense part at open). The slab keeps its
 * container layout in VRAM. where[l][e] says which device holds an expert
 * (-1: host), dev_slab[l][e] where.
 *
 * Adaptation (between tokens, coli_moe_dev_adapt): a clearly hotter host
 * expert replaces the coldest resident one of its layer, in place; the cold
 * one is read back into RAM in the background (coli_tiers_readmit).
 * CUDA_RELEASE_HOST=1 drops a resident slab's host copies (core/place/tiers.c).
 *
 * What this part needs of the dense part's placement it reads from the
 * engine (e->dense.dd_dev, e->dense.dd_of: coli_dense_dev_of, _holds), and a swap tells
 * the dense device through the hook the engine installed (e->vram.slab_moved):
 * core/place never calls core/forward.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_internal.h"
#include "core/dev/dev.h"
#include "mem/mem.h"

/* Device d cannot hold its share (the dense part's layers at open, or, not
 * holding any, its working buffers at placement): it is closed and the
 * devices after it move up, so the others carry on with every index still
 * dense. */
void coli_vram_device_drop(struct coli_engine *e, int d)
{
	coli_moe_dev_slot_free(&e->vram.slot[d]);
	coli_dev_close(e->vram.devs[d]);
	for (int i = d; i + 1 < e->vram.n_devs; i++) {
		e->vram.devs[i] = e->vram.devs[i + 1];
		e->vram.devs[i]->index = i;
		e->vram.slot[i] = e->vram.slot[i + 1];
	}
	e->vram.n_devs--;
	memset(&e->vram.slot[e->vram.n_devs], 0, sizeof(e->vram.slot[0]));
}

int coli_dense_dev_holds(const struct coli_engine *e, const struct coli_dev *dev)
{
	for (int i = 0; i < e->dense.n_dd; i++)
		if (e->dense.dd_dev[i] == dev)
			return 1;
	return 0;
}

int coli_dense_dev_of(const struct coli_engine *e, int l)
{
	return e->dense.n_dd ? e->dense.dd_dev[e->dense.dd_of[l]]->index : -1;
}

/* qsort has no context argument in C11: placement runs once, at open, on the
 * opening thread, so a file-static engine pointer is safe here. */
static struct coli_engine *g_sort_e;

static uint64_t heat_of(struct coli_engine *e, int i)
{
	int E = e->m.cfg.n_experts;

	return coli_tiers_heat(e, e->m.layers[i / E].xl, i % E);
}

/* Descending heat; equal heat keeps the interleaved order (the index order). */
static int cmp_heat(const void *a, const void *b)
{
	int i = *(const int *)a, j = *(const int *)b;
	uint64_t hi = heat_of(g_sort_e, i), hj = heat_of(g_sort_e, j);

	int E = g_sort_e->m.cfg.n_experts, L = g_sort_e->m.cfg.n_layers;
	int pi = (i % E) * L + i / E, pj = (j % E) * L + j / E; /* interleaved position */

	if (hi != hj)
		return hi > hj ? -1 : 1;
	return pi - pj;
}

/* Upload expert x of layer l to device d's VRAM tier: 0, -ENOMEM (no room
 * on d), or another error (the upload failed; nothing is placed). */
static int place_one(struct coli_engine *e, int d, int l, int x)
{
	const struct coli_model_config *c = &e->m.cfg;
	const struct coli_expert_layer *xl =
	    coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl);
	struct coli_dev_slot *v = &e->vram.slot[d];
	uint64_t addr;

	if (v->used + xl->slab_bytes > v->budget || coli_dev_alloc(v->dev, xl->slab_bytes, &addr))
		return -ENOMEM;
	if (coli_dev_upload(v->dev, addr,
	                    coli_io_container_slab_data(e->m.c, e->m.layers[l].xl, (uint32_t)x),
	                    xl->slab_bytes)) {
		coli_dev_free(v->dev, addr);
		return -EIO;
	}
	v->used += xl->slab_bytes;
	v->n_experts++;
	e->est.h2d_const_bytes += xl->slab_bytes;
	e->vram.dev_slab[(size_t)l * c->n_experts + x] = addr;
	e->vram.where[(size_t)l * c->n_experts + x] = (signed char)d;
	if (e->opts.release_host)
		coli_tiers_drop_host(e, l, x);
	return 0;
}

/* ---- a device's working buffers and staging slots (core/moe/moe_dev.c uses them) ---- */

/* The working buffers for tmax tokens a forward call, in the order of
 * slot_buffer_fields: xq xd xqs xf | g u h hq hd hqs | y tok. */
#define N_SLOT_BUFS 12
static void slot_buffer_sizes(const struct coli_model_config *c, int tmax, size_t sz[N_SLOT_BUFS])
{
	size_t P = (size_t)tmax * c->top_k, H = c->hidden, I = c->moe_inter;
	const size_t s[N_SLOT_BUFS] = {P * H,          P * H / 32 * 4, P * H / 32 * 4, P * H * 4,
	                               P * I * 4,      P * I * 4,      P * I * 4,      P * I,
	                               P * I / 32 * 4, P * I / 32 * 4, P * H * 4,      P * 4};

	memcpy(sz, s, sizeof(s));
}

/* gpt-oss's expert biases on a device: a MoE layer's gate [E][I], up [E][I]
 * and down [E][H] f32, the layers one after another (by expert layer). */
static size_t xbias_layer_floats(const struct coli_model_config *c)
{
	return (size_t)c->n_experts * (2 * (size_t)c->moe_inter + (size_t)c->hidden);
}

static size_t xbias_bytes(const struct coli_model_config *c)
{
	int n = 0;

	for (int l = 0; c->expert_bias && l < c->n_layers; l++)
		n += c->is_moe_layer[l];
	return (size_t)n * xbias_layer_floats(c) * sizeof(float);
}

size_t coli_moe_dev_slot_bytes(const struct coli_model_config *c, int tmax)
{
	size_t sz[N_SLOT_BUFS], sum = xbias_bytes(c);

	slot_buffer_sizes(c, tmax, sz);
	for (int i = 0; i < N_SLOT_BUFS; i++)
		sum += sz[i];
	return sum;
}

uint64_t coli_moe_dev_xbias(const struct coli_engine *e, const struct coli_dev_slot *v, int l,
                            int part)
{
	const struct coli_model_config *c = &e->m.cfg;
	size_t at = (size_t)e->m.layers[l].xl * xbias_layer_floats(c) +
	            (size_t)part * c->n_experts * c->moe_inter;

	return v->xbias ? v->xbias + at * sizeof(float) : 0;
}

/* The biases uploaded once (a constant: no decode-time copy). */
static int xbias_upload(struct coli_engine *e, struct coli_dev_slot *v)
{
	const struct coli_model_config *c = &e->m.cfg;
	size_t gu = (size_t)c->n_experts * c->moe_inter * sizeof(float);
	size_t dn = (size_t)c->n_experts * c->hidden * sizeof(float);
	int rc = coli_dev_alloc(v->dev, xbias_bytes(c), &v->xbias);

	for (int l = 0; !rc && l < c->n_layers; l++) {
		const struct coli_layer *L = &e->m.layers[l];

		if (!L->moe)
			continue;
		rc = coli_dev_upload(v->dev, coli_moe_dev_xbias(e, v, l, COLI_XBIAS_GATE),
		                     L->exp_gate_bias, gu);
		rc = rc ? rc
		        : coli_dev_upload(v->dev, coli_moe_dev_xbias(e, v, l, COLI_XBIAS_UP),
		                          L->exp_up_bias, gu);
		rc = rc ? rc
		        : coli_dev_upload(v->dev, coli_moe_dev_xbias(e, v, l, COLI_XBIAS_DOWN),
		                          L->exp_down_bias, dn);
		e->est.h2d_const_bytes += 2 * gu + dn;
	}
	return rc;
}

/* Where device d's host staging lives: with --numa-bind auto on a host of
 * several nodes, the node d hangs off, so its copies cross no link between
 * sockets; else no binding of its own (the opening thread, bound to the
 * engine's node, touches it first). */
static int stage_node(const struct coli_engine *e, const struct coli_dev *d)
{
	return !strcmp(e->opts.numa_bind, "auto") && d->numa_node >= 0 ? d->numa_node
	                                                               : COLI_MEM_NODE_ANY;
}

int coli_moe_dev_slot_alloc(struct coli_engine *e, struct coli_dev_slot *v)
{
	const struct coli_model_config *c = &e->m.cfg;
	size_t P = (size_t)e->s.tmax * c->top_k, H = c->hidden, dsz[N_SLOT_BUFS];
	uint64_t *const slot_buffer_fields[N_SLOT_BUFS] = {&v->xq, &v->xd,  &v->xqs, &v->xf,
	                                                   &v->g,  &v->u,   &v->h,   &v->hq,
	                                                   &v->hd, &v->hqs, &v->y,   &v->tok};
	int rc = 0;

	v->pmax = (int)P;
	slot_buffer_sizes(c, e->s.tmax, dsz);
	for (int i = 0; !rc && i < N_SLOT_BUFS; i++)
		rc = coli_dev_alloc(v->dev, dsz[i], slot_buffer_fields[i]);
	if (rc)
		return rc;
	{
		/* a pageable source or destination would make the async copies wait
		 * for the stream to drain: the staging is one registered region */
		size_t sz[] = {P * H, P * H / 32 * 4, P * H / 32 * 4, P * H * 4, P * H * 4, P * 4};
		void **dst[] = {(void **)&v->sx_q, (void **)&v->sx_d, (void **)&v->sx_s,
		                (void **)&v->sx_f, (void **)&v->sy,   (void **)&v->sx_tok};

		const int node = stage_node(e, v->dev);

		v->host = coli_mem_alloc_buffers(sz, dst, 6, node, &v->host_bytes);
		if (!v->host)
			return -ENOMEM;
		if (e->opts.verbose && node >= 0)
			fprintf(stderr, "coli: %s: host staging on NUMA node %d (its own)\n",
			        v->dev->name, node);
	}
	v->jobs = malloc(sizeof(*v->jobs) * (2 * P + 2 * (size_t)c->n_experts + 8));
	v->gjobs = malloc(sizeof(*v->gjobs) * (2 * (size_t)c->n_experts + 8));
	v->runs = malloc(sizeof(*v->runs) * c->n_experts);
	if (!v->jobs || !v->gjobs || !v->runs)
		return -ENOMEM;
	return c->expert_bias ? xbias_upload(e, v) : 0;
}

void coli_moe_dev_slot_free(struct coli_dev_slot *v)
{
	uint64_t *bufs[] = {&v->xq, &v->xd, &v->xqs, &v->xf, &v->g,     &v->u,   &v->h,
	                    &v->hq, &v->hd, &v->hqs, &v->y,  &v->stage, &v->tok, &v->xbias};

	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		coli_dev_free(v->dev, *bufs[i]);
	coli_mem_free_buffers(v->host, v->host_bytes);
	free(v->jobs), free(v->gjobs), free(v->runs), free(v->st);
}

/* Staging slots for streamed slabs (on top of an explicit --vram-gb, out of
 * the free memory otherwise), and a first measure of the streaming bandwidth
 * (best of three slab-sized uploads). */
int coli_moe_dev_stage_alloc(struct coli_engine *e, struct coli_dev_slot *v)
{
	const struct coli_model_config *c = &e->m.cfg;
	const int node = stage_node(e, v->dev);
	size_t best = 0;
	double t_best = 1e30;
	void *tmp;
	int rc;

	for (int i = 0; i < coli_io_container_n_expert_layers(e->m.c); i++) {
		size_t b = coli_io_container_expert_layer(e->m.c, i)->slab_bytes;

		best = b > best ? b : best;
	}
	if (!best || c->n_experts == 0)
		return 0;
	v->stage_bytes = best;
	v->n_stage = e->opts.stream_slots;
	v->st = malloc(sizeof(*v->st) * (size_t)v->n_stage);
	if (!v->st)
		return -ENOMEM;
	for (int i = 0; i < v->n_stage; i++)
		v->st[i] = (struct dev_stage){.l = -1, .ex = -1, .used = 0};
	rc = coli_dev_alloc(v->dev, v->stage_bytes * v->n_stage, &v->stage);
	/* one more: the fence behind a layer's own copies (copies_landed) */
	rc = rc ? rc : coli_dev_stage_init(v->dev, v->n_stage + 1);
	if (rc)
		return rc;
	if (e->opts.vram_gb < 0) /* budget = free memory: the slots come out of it */
		v->used += v->stage_bytes * v->n_stage;
	/* measured from registered memory, as the tier slots it streams from */
	tmp = coli_mem_alloc(v->stage_bytes, node);
	if (!tmp)
		return -ENOMEM;
	coli_mem_register(tmp, v->stage_bytes, node);
	for (int i = 0; i < 3; i++) {
		double t0 = coli_now_s();

		if (coli_dev_upload(v->dev, v->stage, tmp, v->stage_bytes) == 0 &&
		    coli_now_s() - t0 < t_best)
			t_best = coli_now_s() - t0;
	}
	coli_mem_unregister(tmp);
	coli_mem_free(tmp, v->stage_bytes);
	if (t_best < 1e29 && t_best > 0)
		e->moe.bw_stream = v->stage_bytes / t_best;
	return 0;
}

/* ---- placement ---- */

/* The device whose dense part runs layer l (layer split), else the first. */
static int home_dev(const struct coli_engine *e, int l)
{
	int d = coli_dense_dev_of(e, l);

	return d >= 0 ? d : 0;
}

/* Several devices: of the experts the budgets hold together (the hottest,
 * `order`'s head), the MoE layers that are wholly among them go whole to
 * their home device — the one with their dense part — while they fit, so
 * those layers are planned there (core/forward/dense_dev.c) instead of being split
 * over devices, which makes every such layer host-planned (H200, two GPUs:
 * docs/perf/history/2026-11-30.md). The rest of them try
 * their home device first too. Placed entries of order become -1.
 * Returns how many entries of order are left to place by heat, or -EIO (an
 * upload failed). */
static int whole_layers_first(struct coli_engine *e, int *order, int n_order)
{
	const struct coli_model_config *c = &e->m.cfg;
	int E = c->n_experts, n_take = 0;
	size_t room = 0, slots = (size_t)c->n_layers * E;
	int *pos = malloc(sizeof(int) * slots); /* slot -> its index in order, or -1 */

	if (!pos)
		return n_order; /* heat order alone: slower, not wrong */
	for (int d = 0; d < e->vram.n_devs; d++)
		room += e->vram.slot[d].budget > e->vram.slot[d].used
		            ? e->vram.slot[d].budget - e->vram.slot[d].used
		            : 0;
	for (size_t i = 0; i < slots; i++)
		pos[i] = -1;
	for (; n_take < n_order; n_take++) {
		int l = order[n_take] / E;
		size_t b = coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl)->slab_bytes;

		if (b > room)
			break;
		room -= b;
		pos[order[n_take]] = n_take;
	}
	for (int l = 0; l < c->n_layers; l++) {
		const int home = home_dev(e, l);
		const struct coli_dev_slot *v = &e->vram.slot[home];
		size_t b =
		    c->is_moe_layer[l]
		        ? coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl)->slab_bytes
		        : 0;
		int whole = c->is_moe_layer[l] && v->used + b * E <= v->budget;

		for (int x = 0; whole && x < E; x++)
			whole = pos[(size_t)l * E + x] >= 0;
		for (int x = 0; whole && x < E; x++) {
			int rc = place_one(e, home, l, x);

			if (rc == -ENOMEM)
				break; /* the rest of the layer goes by heat */
			if (rc) {
				free(pos);
				return rc;
			}
			order[pos[(size_t)l * E + x]] = -1;
		}
	}
	free(pos);
	return n_take;
}

/* Each device's working buffers and staging slots, and its budget for
 * resident experts; a device of several that holds none of the dense part
 * and cannot take them is left out. */
static int slots_alloc(struct coli_engine *e, char *err, size_t errlen)
{
	const struct coli_model_config *c = &e->m.cfg;

	for (int d = 0; d < e->vram.n_devs; d++) {
		struct coli_dev_slot *v = &e->vram.slot[d];
		size_t free_b = 0, total_b = 0;
		char what[96]; /* what it could not hold */
		int rc;

		snprintf(what, sizeof(what),
		         "the working buffers of %d-token chunks (%.2f GB; --ubatch sets it)",
		         e->s.tmax, coli_moe_dev_slot_bytes(c, e->s.tmax) / 1e9);
		v->dev = e->vram.devs[d];
		rc = coli_moe_dev_slot_alloc(e, v);
		if (!rc) {
			coli_dev_mem_info(v->dev, &free_b, &total_b);
			if (e->opts.vram_gb >= 0)
				v->budget = (size_t)(e->opts.vram_gb * 1e9);
			else
				v->budget = free_b > COLI_VRAM_RESERVE_BYTES
				                ? free_b - COLI_VRAM_RESERVE_BYTES
				                : 0;
			if (v->budget > free_b)
				v->budget = free_b;
		}
		if (!rc && e->opts.stream != COLI_OPT_STREAM_OFF && e->opts.stream_slots > 0) {
			rc = coli_moe_dev_stage_alloc(e, v);
			snprintf(what, sizeof(what), "%d staging slots", e->opts.stream_slots);
		}
		if (rc && e->vram.n_devs > 1 && !coli_dense_dev_holds(e, v->dev)) {
			fprintf(stderr, "coli: device %s: no memory for %s; going on without it\n",
			        v->dev->name, what);
			coli_vram_device_drop(e, d--);
			continue;
		}
		if (rc) {
			snprintf(err, errlen, "device %s: no memory for %s", v->dev->name, what);
			return rc;
		}
	}
	return 0;
}

int coli_moe_dev_place(struct coli_engine *e, char *err, size_t errlen)
{
	const struct coli_model_config *c = &e->m.cfg;
	size_t n_slots = (size_t)c->n_layers * c->n_experts;
	int dev = 0, n_order, *order, rc;

	e->vram.where = malloc(n_slots);
	e->vram.dev_slab = calloc(n_slots, sizeof(uint64_t));
	if (!e->vram.where || !e->vram.dev_slab)
		return -ENOMEM;
	memset(e->vram.where, -1, n_slots);
	rc = slots_alloc(e, err, errlen);
	if (rc)
		return rc;
	/* hottest first (the usage file's heat); ties, and a model without heat,
	 * interleave: expert x of every MoE layer before expert x+1 */
	order = malloc(sizeof(int) * n_slots);
	if (!order)
		return -ENOMEM;
	n_order = 0;
	for (int x = 0; x < c->n_experts; x++)
		for (int l = 0; l < c->n_layers; l++)
			if (c->is_moe_layer[l])
				order[n_order++] = l * c->n_experts + x;
	g_sort_e = e;
	qsort(order, (size_t)n_order, sizeof(int), cmp_heat);
	if (e->vram.n_devs > 1)
		n_order = whole_layers_first(e, order, n_order);
	if (n_order < 0) {
		free(order);
		snprintf(err, errlen, "device %s: uploading experts failed",
		         e->vram.slot[0].dev->name);
		return -EIO;
	}
	for (int i = 0; i < n_order && dev < e->vram.n_devs; i++) {
		int l, x;
		size_t b;

		if (order[i] < 0)
			continue; /* placed with its whole layer */
		l = order[i] / c->n_experts, x = order[i] % c->n_experts;
		b = coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl)->slab_bytes;
		/* its home device first, then the first with room */
		rc = e->vram.n_devs > 1 ? place_one(e, home_dev(e, l), l, x) : -ENOMEM;
		if (rc == -ENOMEM) {
			while (dev < e->vram.n_devs &&
			       e->vram.slot[dev].used + b > e->vram.slot[dev].budget)
				dev++;
			if (dev == e->vram.n_devs)
				break;
			rc = place_one(e, dev, l, x);
			if (rc == -ENOMEM) {
				dev++; /* full after all: try the next device */
				continue;
			}
		}
		if (rc) {
			free(order);
			snprintf(err, errlen, "device %s: uploading experts failed",
			         e->vram.slot[dev].dev->name);
			return -EIO;
		}
	}
	free(order);
	for (int d = 0; d < e->vram.n_devs; d++)
		fprintf(stderr, "coli: %s: %d experts resident (%.2f GB of %.2f GB budget)\n",
		        e->vram.slot[d].dev->name, e->vram.slot[d].n_experts,
		        e->vram.slot[d].used / 1e9, e->vram.slot[d].budget / 1e9);
	return 0;
}

void coli_moe_dev_release(struct coli_engine *e)
{
	const struct coli_model_config *c = &e->m.cfg;

	for (int d = 0; d < e->vram.n_devs; d++) {
		struct coli_dev_slot *v = &e->vram.slot[d];

		if (!v->dev)
			continue;
		if (e->vram.dev_slab)
			for (size_t i = 0; i < (size_t)c->n_layers * c->n_experts; i++)
				if (e->vram.where[i] == d)
					coli_dev_free(v->dev, e->vram.dev_slab[i]);
		coli_moe_dev_slot_free(v);
	}
	free(e->vram.where);
	free(e->vram.dev_slab);
}

#define ADAPT_TOKENS 128  /* tokens between two adaptation rounds */
#define ADAPT_MARGIN 1.25 /* a newcomer must be this much hotter, plus ADAPT_MIN */
#define ADAPT_MIN    16

/* Between tokens: per MoE layer, if the hottest expert not in VRAM is clearly
 * hotter than the coldest resident one (hysteresis: ADAPT_MARGIN x + ADAPT_MIN
 * accesses), its slab replaces the cold one in place (same layer, same slab
 * size). One swap per layer per round keeps the upload small; the tokens do
 * not change, only who computes them. */
void coli_moe_dev_adapt(struct coli_engine *e)
{
	const struct coli_model_config *c = &e->m.cfg;
	int E = c->n_experts;

	if (!e->vram.where || e->est.tokens < e->vram.adapt_at)
		return;
	e->vram.adapt_at = e->est.tokens + ADAPT_TOKENS;
	for (int l = 0; l < c->n_layers; l++) {
		int xli = e->m.layers[l].xl, hot = -1, cold = -1, ts = -1, rc;
		uint64_t h_hot = 0, h_cold = UINT64_MAX;
		const void *src;
		const struct coli_expert_layer *xl;
		struct coli_dev *dev;

		if (!c->is_moe_layer[l])
			continue;
		for (int x = 0; x < E; x++) {
			uint64_t h = coli_tiers_heat(e, xli, x);
			int d = e->vram.where[(size_t)l * E + x];

			if (d < 0 && (hot < 0 || h > h_hot))
				hot = x, h_hot = h;
			if (d >= 0 && !e->vram.devs[d]->failed && h < h_cold)
				cold = x, h_cold = h;
		}
		if (hot < 0 || cold < 0 || (double)h_hot <= ADAPT_MARGIN * h_cold + ADAPT_MIN)
			continue;
		xl = coli_io_container_expert_layer(e->m.c, xli);
		dev = e->vram.devs[e->vram.where[(size_t)l * E + cold]];
		/* from its RAM slot when it has one (registered memory; the
		 * container's mapping may fault the slab in from disk) */
		src = coli_tiers_pin_ready(e, l, hot, &ts);
		if (!src)
			src = coli_io_container_slab_data(e->m.c, xli, (uint32_t)hot), ts = -1;
		rc = coli_dev_upload(dev, e->vram.dev_slab[(size_t)l * E + cold], src,
		                     xl->slab_bytes);
		if (ts >= 0)
			coli_tiers_unpin(e, ts);
		if (rc)
			continue; /* a failed device: it is marked, its experts go to the CPU */
		e->vram.dev_slab[(size_t)l * E + hot] = e->vram.dev_slab[(size_t)l * E + cold];
		e->vram.where[(size_t)l * E + hot] = e->vram.where[(size_t)l * E + cold];
		e->vram.dev_slab[(size_t)l * E + cold] = 0;
		e->vram.where[(size_t)l * E + cold] = -1;
		/* the dense device's table of what it may plan (a failure fails the
		 * device: the next forward then runs on the CPU) */
		if (e->vram.slab_moved) {
			e->vram.slab_moved(e, l, hot, e->vram.dev_slab[(size_t)l * E + hot]);
			e->vram.slab_moved(e, l, cold, 0);
		}
		if (e->opts.release_host) {
			coli_tiers_drop_host(e, l, hot);
			coli_tiers_host_back(e, l, cold);
		}
		/* the cold one is the host's again: in RAM before its next use
		 * (H200, a streamed 2048-token prefill: the demand reads of the
		 * experts that adaptation sent back were 0.055 of 0.103 ms a token) */
		coli_tiers_readmit(e, l, cold);
		e->est.h2d_bytes += xl->slab_bytes; /* an expert, not a constant */
		e->est.vram_swaps++;
	}
}
