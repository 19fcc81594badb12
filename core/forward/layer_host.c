/*
 * core/forward/layer_host.c — a MoE layer the host plans while the dense part runs
 * on a device (core/forward/forward_dev.c queued the layer's device part up to the
 * routing: layer_ops). The host waits for the routing, plans and runs the
 * experts as the CPU path does (core/moe/moe.c: issue to the devices, CPU rows,
 * take), then the outputs go back to the dense device and are accumulated
 * there in ascending expert order: the CPU's rows read in place from
 * registered memory or uploaded beside the device's, the pair lists with
 * them. A preplanned layer's tail (the accumulate of its plan's pairs) may be
 * queued ahead, beside the CPU rows, behind a stream wait the host releases
 * once its rows are written (tail_ahead). Decode layers are timed step by
 * step here (coli_engine_stats moe_layer).
 * The layers planned on the device leave the host only their counts: their
 * routing comes down with the forward's last downloads (coli_dense_dev_fast_down)
 * and is counted as take would count it (coli_dense_dev_fast_count).
 *
 * The layer call is a struct coli_moe_layer (core/moe/moe.h) on this file's
 * stack: forward_dev.c starts it (layer, tokens, the device's lookahead
 * guess, when the layer's launch began), coli_dense_dev_moe_host completes it
 * (the routing and the rows on the device, what was preplanned) and hands
 * the MoE part two hooks: rows_make, which makes the rows it deferred
 * (downloading them first when a prefill chunk left them on the device), and
 * tail_ahead.
 */
#include <errno.h>
#include <string.h>

#include "core/core_internal.h"
#include "core/forward/dense_dev.h"
#include "core/dev/dev.h"
#include "core/moe/moe.h"

/* The pairs device d did not compute (the CPU's and other devices', in
 * e->s.ey in pair order) go to their rows of d's y, beside d's outputs: one
 * upload per run of consecutive such pairs. Returns how many went up. */
static int host_rows(struct coli_engine *e, struct coli_dense_dev *dd, uint64_t y, int d)
{
	size_t row = (size_t)e->m.cfg.hidden * sizeof(float);
	int rc = 0, sent = 0;

	for (int p = 0; !rc && p < e->s.n_pairs;) {
		int n = 0;

		while (p + n < e->s.n_pairs && e->moe.assign[e->s.pair_expert[p + n]] != d)
			n++;
		if (n) {
			rc = coli_dev_upload_async(dd->dev, y + p * row,
			                           (const char *)e->s.ey + p * row, n * row);
			e->est.h2d_bytes += n * row;
			sent += n;
		}
		p += n ? n : 1;
	}
	return rc ? rc : sent;
}

/* The ax_make hook (core/moe/moe.h): e->s.ax for the ml->ax_defer rows of
 * e->s.xn the layer deferred (a prefill chunk whose experts all run on the
 * device never reads them). ctx: the dense device still holding them (a
 * prefill chunk's rows left there), or NULL: they are in e->s.xn. */
static void rows_make(struct coli_engine *e, struct coli_moe_layer *ml, void *ctx)
{
	const struct coli_dense_dev *dd = ctx;
	int H = e->m.cfg.hidden;

	/* only a fault downloads (its experts recomputed on the CPU). A device
	 * that fails this download fails the rest of the layer too, whose
	 * tokens are then rebuilt on the CPU (engine.c): these rows go unused */
	if (dd &&
	    !coli_dev_download_async(dd->dev, e->s.xn, dd->xn, sizeof(float) * ml->ax_defer * H))
		coli_dev_sync(dd->dev);
	coli_actbufs_set(e, e->s.ax, e->s.xn, ml->ax_defer, H);
}

/* Whether a host-planned prefill layer's routing sends a pair anywhere but
 * the dense device (the host then reads the normed rows); without the
 * routing on the device, always. */
static int host_reads_xn(const struct coli_engine *e, int l, int T)
{
	const struct coli_model_config *c = &e->m.cfg;
	const int E = c->n_experts, here = coli_dense_dev_at(e, l)->dev->index;

	if (!coli_dense_dev_at(e, l)->route_on_dev || !e->vram.where)
		return 1;
	for (int i = 0; i < T * c->top_k; i++)
		if (e->s.sel[i] >= 0 && e->vram.where[(size_t)l * E + e->s.sel[i]] != here)
			return 1;
	return 0;
}

/* A decode layer's host part, timed (coli_engine_stats moe_layer): the
 * host's time to queue its device part (layer_run), what it then waited for
 * its routing, then when its first slab copy was queued and when the issue,
 * the CPU rows, take and the whole part ended, counted by the copies the
 * layer made. */
static void timeline(struct coli_engine *e, const struct coli_moe_timeline *tl, double t_wait,
                     double t_route)
{
	int k = tl->copies < COLI_TL_CLASSES - 1 ? tl->copies : COLI_TL_CLASSES - 1;
	double *m = e->est.moe_layer[k];

	m[0] += 1;
	m[1] += t_wait - tl->launch;
	m[2] += t_route - t_wait;
	m[3] += tl->copy > 0 ? tl->copy - t_route : 0;
	m[4] += tl->issue > 0 ? tl->issue - t_route : 0;
	m[5] += tl->cpu - t_route;
	m[6] += tl->take - t_route;
	m[7] += coli_now_s() - t_route;
}

/* The pairs device d did not compute as a mask (bit p: pair p's row is the
 * host's, in e->s.ey) and *hy, where d's kernels read e->s.ey in place; 0 and
 * *hy = 0 where they cannot (more than 64 pairs, e->s.ey not mapped): then
 * host_rows uploads them. */
static uint64_t host_mask(struct coli_engine *e, struct coli_dense_dev *dd, int d, uint64_t *hy)
{
	size_t row = (size_t)e->m.cfg.hidden * sizeof(float);
	uint64_t m = 0;

	*hy = 0;
	if (e->s.n_pairs > 64)
		return 0;
	for (int p = 0; p < e->s.n_pairs; p++)
		if (e->moe.assign[e->s.pair_expert[p]] != d)
			m |= 1ull << p;
	if (m && (*hy = coli_dev_host_addr(dd->dev, e->s.ey, e->s.n_pairs * row)))
		e->est.h2d_bytes += (uint64_t)__builtin_popcountll(m) * row;
	return *hy ? m : 0;
}

/* gpt-oss's down bias on the n_pairs rows of a layer its plan left in the
 * plan device's y, in pair order (dd->pex, the pairs' experts): y + b, one
 * rounding, as core/moe/block.c adds it before the weight. Nothing for
 * experts without one. */
int coli_dense_dev_down_bias(struct coli_engine *e, struct coli_dense_dev *dd, int l, int n_pairs)
{
	const struct coli_dev_slot *v = &e->vram.slot[dd->plan_dev];

	if (!e->m.layers[l].exp_down_bias)
		return 0;
	return coli_dev_add_bias(
	    dd->dev, &(struct coli_dev_bias){.y = v->y,
	                                     .b = coli_moe_dev_xbias(e, v, l, COLI_XBIAS_DOWN),
	                                     .rows = n_pairs,
	                                     .n = e->m.cfg.hidden,
	                                     .idx = dd->pex});
}

/* A preplanned layer's device tail: the accumulate with the pair lists its
 * plan left on the dense device, the host's rows read in place beside the
 * device's (or uploaded to their pair rows of its y first), the shared
 * expert. gpt-oss: the host's rows go up, the down bias joins every row
 * there (they are all in y then), then the accumulate. */
static int pre_tail(struct coli_engine *e, const struct coli_moe_layer *ml, const struct dlayer *D,
                    int xq)
{
	struct coli_dense_dev *dd = coli_dense_dev_at(e, ml->l);
	int on = ml->moe_on_dense, T = ml->T, bias = e->m.layers[ml->l].exp_down_bias != NULL;
	uint64_t y = e->vram.slot[on].y, hy = 0;
	uint64_t m = bias ? 0 : host_mask(e, dd, on, &hy);
	int rc = hy ? 0 : host_rows(e, dd, y, on);

	if (rc < 0)
		return rc;
	rc = coli_dense_dev_down_bias(e, dd, ml->l, e->s.n_pairs);
	rc = rc ? rc
	        : coli_dev_moe_accumulate(dd->dev,
	                                  &(struct coli_dev_accumulate){.out = dd->mlp,
	                                                                .y = y,
	                                                                .pair_token = dd->ptok,
	                                                                .pair_w = dd->pw,
	                                                                .n_pairs = e->s.n_pairs,
	                                                                .T = T,
	                                                                .H = e->m.cfg.hidden,
	                                                                .hy = hy,
	                                                                .hmask = m});
	e->est.moe_layers_dev_preplanned++;
	return rc ? rc : coli_dense_dev_shared_expert(e, dd, D, T, xq);
}

/* The tail_ahead hook (COLI_TAIL_AHEAD; core/moe/moe.c calls it once the
 * layer's experts are issued, beside the CPU rows): the tail queued now
 * behind a stream wait for the host, which core/moe/moe.c releases
 * (ml->tail_dev, ml->tail_seq) once the CPU rows' outputs are in e->s.ey. The host's tail launches
 * (~8 us a layer on the H200) then leave the layer's critical path: the device starts the tail the
 * moment the rows are there, while the host takes and queues the next
 * layer. Only where nothing the tail reads can change after the issue: one
 * device, the layer preplanned on it (its outputs stay there), no shared
 * expert (coli_dense_dev_moe_host decides, ml->tail_ok). ctx: the dense
 * device. */
static void tail_ahead(struct coli_engine *e, struct coli_moe_layer *ml, void *ctx)
{
	struct coli_dense_dev *dd = ctx;
	uint32_t seq = e->dense.tail_seq + 1;
	int rc = coli_dev_host_wait(dd->dev, seq);

	ml->tail_ok = 0;
	if (rc <= 0)
		return; /* no stream waits here (the host part queues the tail), or failed */
	e->dense.tail_seq = seq;
	ml->tail_dev = dd->dev, ml->tail_seq = seq; /* signalled whatever follows */
	if (pre_tail(e, ml, &dd->L[ml->l], 0) == 0) {
		e->est.tail_ahead++;
		ml->tail_queued = 1;
	}
}

/* The rest of the layer call's value (ml: layer, tokens, guess and launch
 * time set by forward_dev.c): the routing and the rows on the dense device,
 * what was preplanned there, the hooks. A prefill chunk's rows stay on the
 * device when nothing on the host reads them (pend: rows_make downloads them
 * if a fault makes the host read them after all). */
static void layer_value(struct coli_engine *e, struct coli_moe_layer *ml, int pre, int xq, int pend)
{
	struct coli_dense_dev *dd = coli_dense_dev_at(e, ml->l);

	ml->dense_dev = coli_dense_dev_of(e, ml->l);
	ml->ax_defer = ml->T; /* quantized on the host only if something there reads them */
	ml->ax_make = (struct coli_moe_hook){rows_make, pend ? dd : NULL};
	ml->routed = dd->route_on_dev;
	ml->preplanned = pre ? dd->plan_dev : -1;
	ml->moe_on_dense = -1;
	/* the experts of this device gather their rows here (xq: quantized by
	 * the ffn norm; else the f32 rows) */
	ml->dev_rows.dev = dd->dev;
	ml->dev_rows.q = xq ? dd->aq : 0, ml->dev_rows.d = dd->ad, ml->dev_rows.qs = dd->aqs;
	ml->dev_rows.f = xq ? 0 : dd->xn;
	ml->tail_ok = pre && ml->T <= COLI_GPU_MAX_S && e->opts.tail_ahead && e->opts.group_async &&
	              e->vram.n_devs == 1 && !e->m.cfg.shared_inter && !e->opts.profile;
	ml->tail_ahead = (struct coli_moe_hook){tail_ahead, dd};
}

/* The host's part of a layer layer_ops planned on the host (SEG_HOST/PRE):
 * wait for the routing, plan and run the experts (core/moe/moe.c), then the
 * outputs back on the device and accumulated there, the shared expert. */
int coli_dense_dev_moe_host(struct coli_engine *e, struct coli_moe_layer *ml, int pre, int xq)
{
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_dense_dev *dd = coli_dense_dev_at(e, ml->l);
	const struct dlayer *D = &dd->L[ml->l];
	int H = c->hidden, T = ml->T, pend = 0, rc;
	uint64_t y = dd->ey;
	double t_wait = coli_now_s(), t_route;

	rc = dd->point ? coli_dev_point_wait(dd->dev) : coli_dev_sync(dd->dev);
	dd->point = 0;
	t_route = coli_now_s();
	if (!rc && !e->opts.profile) /* the layer's attention is done */
		coli_dense_dev_phase_end(dd, &e->est.attention_s, 0);
	if (!rc && T > COLI_GPU_MAX_S) { /* a prefill chunk's rows: see layer_ops */
		if (host_reads_xn(e, ml->l, T)) {
			rc = coli_dev_download_async(dd->dev, e->s.xn, dd->xn,
			                             sizeof(float) * T * H);
			rc = rc ? rc : coli_dev_sync(dd->dev);
		} else {
			pend = 1;
		}
	}
	if (rc)
		return rc;
	layer_value(e, ml, pre, xq, pend);
	rc = coli_moe_experts(e, ml);
	if (rc)
		return rc;
	/* the outputs this device computed are in its y, in pair order (core/moe/moe.c
	 * moe_on_dense): the others go up beside them. The pair lists go behind
	 * the outputs in e->s.ey even then: the uploads read e->s.ey when they run. */
	size_t n = (size_t)e->s.n_pairs, off = n * H, from = 0;

	if (pre && ml->moe_on_dense >= 0) { /* the pair lists are here too */
		rc = 0;
		if (!ml->tail_queued) /* not queued ahead (core/moe/moe.c) */
			rc = pre_tail(e, ml, D, xq);
		else if (dd->dev->failed)
			rc = -EIO;
		if (!rc && T <= COLI_GPU_MAX_S)
			timeline(e, &ml->tl, t_wait, t_route);
		return rc;
	}
	if (ml->moe_on_dense >= 0) {
		y = e->vram.slot[ml->moe_on_dense].y;
		from = off;
		rc = host_rows(e, dd, y, ml->moe_on_dense);
		if (rc < 0)
			return rc;
		e->est.moe_layers_on_dense += rc == 0;
		rc = 0;
	}
	/* gpt-oss: each expert's down bias joins its rows here, all of them the
	 * host's (core/moe/moe.c outputs_where): y + b, one rounding, as
	 * core/moe/block.c adds it before the weight */
	if (e->m.layers[ml->l].exp_down_bias)
		for (size_t p = 0; p < n; p++) {
			const float *b =
			    e->m.layers[ml->l].exp_down_bias + (size_t)e->s.pair_expert[p] * H;
			float *yr = e->s.ey + p * H;

			for (int j = 0; j < H; j++)
				yr[j] = yr[j] + b[j];
		}
	/* one upload: the outputs when they are all the host's and behind them
	 * the pair lists, copied into e->s.ey's tail (a small upload is a launch
	 * of its own: ptx/gpu.c) */
	memcpy(e->s.ey + off, e->s.pair_token, n * sizeof(int));
	memcpy(e->s.ey + off + n, e->s.pair_w, n * sizeof(float));
	rc = coli_dev_upload_async(dd->dev, dd->ey + 4 * from, e->s.ey + from,
	                           sizeof(float) * (off - from + 2 * n));
	e->est.h2d_bytes += sizeof(float) * (off - from + 2 * n);
	rc = rc ? rc
	        : coli_dev_moe_accumulate(
	              dd->dev, &(struct coli_dev_accumulate){.out = dd->mlp,
	                                                     .y = y,
	                                                     .pair_token = dd->ey + 4 * off,
	                                                     .pair_w = dd->ey + 4 * (off + n),
	                                                     .n_pairs = (int)n,
	                                                     .T = T,
	                                                     .H = H});
	rc = rc ? rc : coli_dense_dev_shared_expert(e, dd, D, T, xq);
	if (!rc && T <= COLI_GPU_MAX_S)
		timeline(e, &ml->tl, t_wait, t_route);
	/* no wait: the uploads read e->s.ey and the pair lists when they run, and
	 * the host writes those again only after the next layer's router
	 * download has synchronized this stream (or the forward's last sync) */
	return rc;
}

/* The routing of the layers planned on device dd this forward, down into
 * e->s.fast_sel in one transfer (of its whole layer range: coli_dense_dev_fast_count reads
 * only the planned layers' rows), queued before the sync that ends the
 * device's part of the forward: appended to the downloads v[*n] queued
 * there as one op. */
void coli_dense_dev_fast_down(struct coli_engine *e, struct coli_dense_dev *dd,
                              struct coli_dev_down *v, int *n)
{
	const size_t row = (size_t)COLI_GPU_STEP_T * e->m.cfg.top_k;

	if (!dd->fast_any)
		return;
	dd->fast_any = 0;
	v[(*n)++] = (struct coli_dev_down){e->s.fast_sel + (size_t)dd->l0 * row,
	                                   dd->fsel + (size_t)dd->l0 * row * 4,
	                                   sizeof(int) * (size_t)(dd->l1 - dd->l0) * row};
}

/* After the forward's last sync: what the host path counts for each layer
 * it plans (core/moe/moe.c, core/moe/moe_dev.c take), for the device-planned ones. */
void coli_dense_dev_fast_count(struct coli_engine *e)
{
	const struct coli_model_config *c = &e->m.cfg;
	int K = c->top_k;

	for (int l = 0; l < c->n_layers; l++) {
		struct coli_dense_dev *dd = e->dense.dds[e->dense.dd_of[l]];
		const int *s = e->s.fast_sel + (size_t)l * COLI_GPU_STEP_T * K;
		const struct coli_expert_layer *xl;
		int P = dd->fast_T[l] * K;

		if (!P)
			continue;
		xl = coli_io_container_expert_layer(e->m.c, e->m.layers[l].xl);
		e->est.expert_uses += P;
		e->est.moe_layers_on_dense++;
		e->est.moe_layers_dev_planned++;
		for (int i = 0; i < P; i++) {
			int first = 1;

			for (int j = 0; j < i; j++)
				first &= s[j] != s[i];
			coli_tiers_count(e, l, s[i], 1);
			if (first) { /* one hit per expert and layer call, as take counts */
				e->est.hits[COLI_TIER_VRAM]++;
				e->est.bytes[COLI_TIER_VRAM] += xl->slab_bytes;
			}
		}
		dd->fast_T[l] = 0;
	}
}
