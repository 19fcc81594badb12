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
 * once its rows are written (coli_dense_dev_tail_ahead). Decode layers are
 * timed step by step here (coli_engine_stats moe_layer).
 */
#include <errno.h>
#include <string.h>

#include "core/core_internal.h"
#include "core/forward/dense_dev.h"
#include "core/dev/dev.h"

/* The pairs device d did not compute (the CPU's and other devices', in
 * e->ey in pair order) go to their rows of d's y, beside d's outputs: one
 * upload per run of consecutive such pairs. Returns how many went up. */
static int host_rows(struct coli_engine *e, uint64_t y, int d)
{
	size_t row = (size_t)e->m.cfg.hidden * sizeof(float);
	int rc = 0, sent = 0;

	for (int p = 0; !rc && p < e->n_pairs;) {
		int n = 0;

		while (p + n < e->n_pairs && e->assign[e->pair_expert[p + n]] != d)
			n++;
		if (n) {
			rc = coli_dev_upload_async(e->dd->dev, y + p * row,
			                           (const char *)e->ey + p * row, n * row);
			e->est.h2d_bytes += n * row;
			sent += n;
		}
		p += n ? n : 1;
	}
	return rc ? rc : sent;
}

void coli_dense_dev_xn(struct coli_engine *e)
{
	/* only a fault gets here (its experts recomputed on the CPU). A device
	 * that fails this download fails the rest of the layer too, whose
	 * tokens are then rebuilt on the CPU (engine.c): these rows go unused */
	if (!coli_dev_download_async(e->xn_dev, e->xn, e->xn_pend,
	                             sizeof(float) * e->ax_defer * e->m.cfg.hidden))
		coli_dev_sync(e->xn_dev);
	e->xn_pend = 0;
}

/* Whether a host-planned prefill layer's routing sends a pair anywhere but
 * the dense device (the host then reads the normed rows); without the
 * routing on the device, always. */
static int host_reads_xn(const struct coli_engine *e, int l, int T)
{
	const struct coli_model_config *c = &e->m.cfg;
	const int E = c->n_experts, here = e->dd->dev->index;

	if (!e->dd->route_on_dev || !e->where)
		return 1;
	for (int i = 0; i < T * c->top_k; i++)
		if (e->sel[i] >= 0 && e->where[(size_t)l * E + e->sel[i]] != here)
			return 1;
	return 0;
}

/* A decode layer's host part, timed (coli_engine_stats moe_layer): the
 * host's time to queue its device part (layer_run), what it then waited for
 * its routing, then when its first slab copy was queued and when the issue,
 * the CPU rows, take and the whole part ended, counted by the copies the
 * layer made. */
static void timeline(struct coli_engine *e, double t_wait, double t_route)
{
	int k = e->tl.copies < COLI_TL_CLASSES - 1 ? e->tl.copies : COLI_TL_CLASSES - 1;
	double *m = e->est.moe_layer[k];

	m[0] += 1;
	m[1] += t_wait - e->tl.launch;
	m[2] += t_route - t_wait;
	m[3] += e->tl.copy > 0 ? e->tl.copy - t_route : 0;
	m[4] += e->tl.issue > 0 ? e->tl.issue - t_route : 0;
	m[5] += e->tl.cpu - t_route;
	m[6] += e->tl.take - t_route;
	m[7] += coli_now_s() - t_route;
}

/* The pairs device d did not compute as a mask (bit p: pair p's row is the
 * host's, in e->ey) and *hy, where d's kernels read e->ey in place; 0 and
 * *hy = 0 where they cannot (more than 64 pairs, e->ey not mapped): then
 * host_rows uploads them. */
static uint64_t host_mask(struct coli_engine *e, int d, uint64_t *hy)
{
	size_t row = (size_t)e->m.cfg.hidden * sizeof(float);
	uint64_t m = 0;

	*hy = 0;
	if (e->n_pairs > 64)
		return 0;
	for (int p = 0; p < e->n_pairs; p++)
		if (e->assign[e->pair_expert[p]] != d)
			m |= 1ull << p;
	if (m && (*hy = coli_dev_host_addr(e->dd->dev, e->ey, e->n_pairs * row)))
		e->est.h2d_bytes += (uint64_t)__builtin_popcountll(m) * row;
	return *hy ? m : 0;
}

/* A preplanned layer's device tail: the accumulate with the pair lists its
 * plan left on the dense device, the host's rows read in place beside the
 * device's (or uploaded to their pair rows of its y first), the shared
 * expert. */
static int pre_tail(struct coli_engine *e, const struct dlayer *D, int T, int xq)
{
	struct coli_dense_dev *dd = e->dd;
	uint64_t y = e->vram[e->moe_on_dense].y, hy;
	uint64_t m = host_mask(e, e->moe_on_dense, &hy);
	int rc = hy ? 0 : host_rows(e, y, e->moe_on_dense);

	if (rc < 0)
		return rc;
	rc = coli_dev_moe_accumulate(dd->dev, &(struct coli_dev_accumulate){.out = dd->mlp,
	                                                                    .y = y,
	                                                                    .pair_token = dd->ptok,
	                                                                    .pair_w = dd->pw,
	                                                                    .n_pairs = e->n_pairs,
	                                                                    .T = T,
	                                                                    .H = e->m.cfg.hidden,
	                                                                    .hy = hy,
	                                                                    .hmask = m});
	e->est.moe_layers_dev_preplanned++;
	return rc ? rc : coli_dense_dev_shared_expert(e, D, T, xq);
}

/* The tail ahead (COLI_TAIL_AHEAD; core/moe/moe.c calls it once the layer's
 * experts are issued, beside the CPU rows): the tail queued now behind a
 * stream wait for the host, which core/moe/moe.c releases once the CPU rows'
 * outputs are in e->ey. The host's tail launches (~8 us a layer on the H200)
 * then leave the layer's critical path: the device starts the tail the
 * moment the rows are there, while the host takes and queues the next
 * layer. Only where nothing the tail reads can change after the issue: one
 * device, the layer preplanned on it (its outputs stay there), no shared
 * expert (coli_dense_dev_moe_host decides, e->tail_ok). */
void coli_dense_dev_tail_ahead(struct coli_engine *e, int l, int T)
{
	struct coli_dense_dev *dd = e->dd;
	uint32_t seq = e->tail_seq + 1;
	int rc = coli_dev_host_wait(dd->dev, seq);

	e->tail_ok = 0;
	if (rc <= 0)
		return; /* no stream waits here (the host part queues the tail), or failed */
	e->tail_dev = dd->dev, e->tail_seq = seq; /* signalled whatever follows */
	if (pre_tail(e, &dd->L[l], T, 0) == 0)
		e->est.tail_ahead++;
}

/* The host's part of a layer layer_ops planned on the host (SEG_HOST/PRE):
 * wait for the routing, plan and run the experts (core/moe/moe.c), then the
 * outputs back on the device and accumulated there, the shared expert. */
int coli_dense_dev_moe_host(struct coli_engine *e, int l, int T, int pre, int xq)
{
	const struct coli_model_config *c = &e->m.cfg;
	struct coli_dense_dev *dd = e->dd;
	const struct dlayer *D = &dd->L[l];
	int H = c->hidden, rc;
	uint64_t y = dd->ey, est_tail;
	double t_wait = coli_now_s(), t_route;

	rc = dd->point ? coli_dev_point_wait(dd->dev) : coli_dev_sync(dd->dev);
	dd->point = 0;
	t_route = coli_now_s();
	if (!rc && !e->opts.profile) /* the layer's attention is done */
		coli_dense_dev_phase_end(e, &e->est.attention_s, 0);
	if (!rc && T > COLI_GPU_MAX_S) { /* a prefill chunk's rows: see layer_ops */
		if (host_reads_xn(e, l, T)) {
			rc = coli_dev_download_async(dd->dev, e->xn, dd->xn, sizeof(float) * T * H);
			rc = rc ? rc : coli_dev_sync(dd->dev);
		} else {
			e->xn_dev = dd->dev, e->xn_pend = dd->xn;
		}
	}
	if (rc)
		return rc;
	e->ax_defer = T; /* quantized on the host only if something there reads them */
	e->routed = dd->route_on_dev;
	e->preplanned = pre ? dd->plan_dev : -1;
	/* the experts of this device gather their rows here (xq: quantized by
	 * the ffn norm; else the f32 rows) */
	e->dev_rows.dev = dd->dev;
	e->dev_rows.q = xq ? dd->aq : 0, e->dev_rows.d = dd->ad, e->dev_rows.qs = dd->aqs;
	e->dev_rows.f = xq ? 0 : dd->xn;
	e->tail_ok = pre && T <= COLI_GPU_MAX_S && e->opts.tail_ahead && e->opts.group_async &&
	             e->n_devs == 1 && !e->m.cfg.shared_inter && !e->opts.profile;
	est_tail = e->est.tail_ahead;
	rc = coli_moe_experts(e, l, T);
	e->tail_ok = 0;
	e->ax_defer = 0; /* the next layer's rows replace them */
	e->xn_pend = 0;
	e->dev_rows.dev = NULL;
	e->routed = 0;
	e->preplanned = -1;
	if (rc)
		return rc;
	/* the outputs this device computed are in its y, in pair order (core/moe/moe.c
	 * moe_on_dense): the others go up beside them. The pair lists go behind
	 * the outputs in e->ey even then: the uploads read e->ey when they run. */
	size_t n = (size_t)e->n_pairs, off = n * H, from = 0;

	if (pre && e->moe_on_dense >= 0) { /* the pair lists are here too */
		rc = 0;
		if (e->est.tail_ahead == est_tail) /* not queued ahead (core/moe/moe.c) */
			rc = pre_tail(e, D, T, xq);
		else if (dd->dev->failed)
			rc = -EIO;
		if (!rc && T <= COLI_GPU_MAX_S)
			timeline(e, t_wait, t_route);
		return rc;
	}
	if (e->moe_on_dense >= 0) {
		y = e->vram[e->moe_on_dense].y;
		from = off;
		rc = host_rows(e, y, e->moe_on_dense);
		if (rc < 0)
			return rc;
		e->est.moe_layers_on_dense += rc == 0;
		rc = 0;
	}
	/* one upload: the outputs when they are all the host's and behind them
	 * the pair lists, copied into e->ey's tail (a small upload is a launch
	 * of its own: ptx/gpu.c) */
	memcpy(e->ey + off, e->pair_token, n * sizeof(int));
	memcpy(e->ey + off + n, e->pair_w, n * sizeof(float));
	rc = coli_dev_upload_async(dd->dev, dd->ey + 4 * from, e->ey + from,
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
	rc = rc ? rc : coli_dense_dev_shared_expert(e, D, T, xq);
	if (!rc && T <= COLI_GPU_MAX_S)
		timeline(e, t_wait, t_route);
	/* no wait: the uploads read e->ey and the pair lists when they run, and
	 * the host writes those again only after the next layer's router
	 * download has synchronized this stream (or the forward's last sync) */
	return rc;
}
