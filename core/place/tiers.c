/*
 * core/place/tiers.c — where each routed expert lives: a RAM slot or the disk
 * (the GPU tier is the lead's: COLI_TIER_VRAM and a hook in acquire). It owns
 * the slot map and its reads: acquire, wait, release, prefetch, the heat of
 * every expert and the replacement policy. The open (the RAM budget, the
 * dense region, the slot arena mem/slots.c and the slab streamer io/stream.c)
 * and the usage file's load, warm-up and saves are in core/place/tiers_open.c;
 * the structures both share, in core/place/tiers_internal.h.
 *
 * Policy: LFRU. An expert's score is its access count decayed with a
 * half-life of HALF_TOKENS tokens (frequency and recency in one number).
 * Victims, in order: a free slot; an unpinned "transient" slot; the
 * unpinned cached slot with the lowest score that no pending prefetch
 * protects. Hysteresis: a demand miss that has to displace a cached expert
 * takes its slot but stays transient (first to go) unless its score beats
 * the victim's by MARGIN; transient experts become cached when their score
 * reaches PROMOTE. So a burst of cold experts churns through a few slots
 * instead of flushing the hot set. A prefetch may only take a free or
 * transient slot, or displace a cached expert it beats by MARGIN (its own
 * score counting the predicted use). Pinned slots (the layer being
 * computed) and slots prefetched for the next layer are never victims of
 * a prefetch; demand takes protected slots only when nothing else is left.
 *
 * Every access is counted (count[] and stats); the usage file (usage.c)
 * carries count[] across runs (core/place/tiers_open.c reads and writes it).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/place/tiers_internal.h"

#define HALF_TOKENS 256.0f
#define MARGIN      0.25f
#define PROMOTE     2.0f

static float score_now(const struct coli_tiers *t, const struct texp *x)
{
	if (x->score == 0 || t->tokens == x->last)
		return x->score;
	return x->score * exp2f(-(float)(t->tokens - x->last) / HALF_TOKENS);
}

static size_t slab_bytes(struct coli_tiers *t, int xl)
{
	return coli_io_container_expert_layer(t->c, xl)->slab_bytes;
}

/* A read of expert x is about to be queued: if its host copy was dropped
 * (CUDA_RELEASE_HOST) because a device held it, this read is a reload. */
static void count_reload(struct texp *x, size_t sb, struct coli_engine_stats *st)
{
	if (!x->host_dropped)
		return;
	x->host_dropped = 0;
	st->reloads++;
	st->reload_bytes += sb;
}

/* ---- slots ---- */

/* A LOADING slot whose read has landed becomes READY (or FREE on error). */
static int settle(struct coli_tiers *t, int i, int block, struct coli_engine_stats *st)
{
	struct tslot *sl = &t->s[i];
	int rc;

	if (sl->state != SL_LOADING || (!block && coli_io_stream_busy(t->io, i)))
		return 0;
	rc = coli_io_stream_wait(t->io, i);
	if (!rc) {
		sl->state = SL_READY;
		return 0;
	}
	evict(t, i, st);
	if (!sl->pins)
		coli_mem_slots_free(t->slots, i);
	return rc;
}

/* Victim for expert with score `cand`; demand may take protected slots and
 * must find one. *transient: how the newcomer should be marked. -1 if none. */
static int pick_victim(struct coli_tiers *t, int demand, float cand, int *transient,
                       struct coli_engine_stats *st)
{
	int best = -1, best_cls = 9;
	float best_score = 0;

	for (;;) {
		int i = coli_mem_slots_alloc(t->slots), loading = -1, freed = 0;

		if (i >= 0) {
			*transient = 0;
			return i;
		}
		best = -1;
		best_cls = 9;
		for (i = 0; i < t->n_slots; i++) {
			struct tslot *sl = &t->s[i];
			int cls;
			float sc;

			if (sl->pins)
				continue;
			if (sl->state == SL_LOADING)
				settle(t, i, 0, st);
			if (sl->state == SL_FREE) { /* its read failed: the slot is free again */
				freed = 1;
				continue;
			}
			if (sl->state == SL_LOADING) {
				loading = i;
				continue;
			}
			/* protection first: a slot just prefetched may be transient */
			cls = sl->protect > t->step ? 2 : sl->transient ? 0 : 1;
			if (!demand && cls == 2)
				continue;
			sc = score_now(t, X(t, sl->xl, sl->ex));
			if (cls < best_cls || (cls == best_cls && sc < best_score)) {
				best = i;
				best_cls = cls;
				best_score = sc;
			}
		}
		if (freed)
			continue;
		if (best >= 0)
			break;
		if (!demand || loading < 0)
			return -1;
		/* every unpinned slot is still loading: wait for one, then reuse it */
		settle(t, loading, 1, st);
	}
	if (best_cls == 0) {
		*transient = 1;
	} else {
		int beats = cand + (demand ? 0 : 1) > best_score * (1 + MARGIN);

		if (!demand && !beats)
			return -1;
		*transient = !beats;
	}
	evict(t, best, st);
	return best;
}

/* ---- the MoE block's protocol ---- */

/* An access: count, heat, lookahead recall. */
static void count_access(struct coli_tiers *t, int xl, int ex, int uses,
                         struct coli_engine_stats *st)
{
	struct texp *x = X(t, xl, ex);

	t->count[(size_t)xl * t->E + ex] += (uint64_t)uses;
	x->score = score_now(t, x) + (float)uses;
	x->last = t->tokens;
	if (t->pred_xl == xl) {
		st->lookahead_routed++;
		st->lookahead_hit += t->pred[ex];
	}
}

/* An expert computed from a copy a device staged earlier (core/moe/moe_dev.c's
 * prefetch): served by the RAM tier, whose slab the copy read. */
void coli_tiers_served_staged(struct coli_engine *e, int l, int ex, int uses)
{
	struct coli_tiers *t = e->tiers;
	int xl = e->m.layers[l].xl;

	if (!t)
		return;
	count_access(t, xl, ex, uses, &e->est);
	e->est.hits[COLI_TIER_RAM]++;
	e->est.bytes[COLI_TIER_RAM] += slab_bytes(t, xl);
}

int coli_tiers_acquire(struct coli_engine *e, int l, const int *ex, const int *uses, int n,
                       const void **slabs)
{
	struct coli_tiers *t = e->tiers;
	struct coli_engine_stats *st = &e->est;
	int xl = e->m.layers[l].xl, k = n < t->n_slots ? n : t->n_slots, nb = 0, rc;
	size_t sb = slab_bytes(t, xl);

	t->n_acq = 0;
	/* hits first, pinned, so no miss below can pick them as victims */
	for (int j = 0; j < k; j++) {
		struct texp *x = X(t, xl, ex[j]);

		count_access(t, xl, ex[j], uses[j], st);
		if (x->slot >= 0) {
			struct tslot *sl = &t->s[x->slot];

			sl->pins++;
			if (sl->prefetched) {
				st->prefetch_used++;
				sl->prefetched = 0;
			}
			if (sl->transient && x->score >= PROMOTE)
				sl->transient = 0;
			st->hits[COLI_TIER_RAM]++;
			st->bytes[COLI_TIER_RAM] += sb;
		}
	}
	for (int j = 0; j < k; j++) {
		struct texp *x = X(t, xl, ex[j]);
		int i, tr;

		if (x->slot < 0) {
			i = pick_victim(t, 1, x->score, &tr, st);
			if (i < 0) /* cannot happen: k <= slots and all are unpinned */
				return -ENOSPC;
			assign(t, i, xl, ex[j], tr);
			t->s[i].pins = 1;
			t->batch[nb++] = (struct coli_io_read){xl, (uint32_t)ex[j], i};
			st->hits[COLI_TIER_DISK]++;
			st->bytes[COLI_TIER_DISK] += sb;
			count_reload(x, sb, st);
		}
		t->acq[t->n_acq++] = x->slot;
		slabs[j] = coli_mem_slots_ptr(t->slots, x->slot);
	}
	if (nb) {
		/* one batch: the layer's misses go to the kernel together */
		rc = coli_io_stream_submit(t->io, t->batch, nb, COLI_IO_DEMAND);
		if (rc) {
			snprintf(e->errmsg, sizeof(e->errmsg), "cannot queue %d slab reads: %s", nb,
			         strerror(-rc));
			for (int j = 0; j < t->n_acq; j++) {
				if (t->s[t->acq[j]].state == SL_LOADING) {
					evict(t, t->acq[j], st);
					coli_mem_slots_free(t->slots, t->acq[j]);
				}
				t->s[t->acq[j]].pins = 0;
			}
			t->n_acq = 0;
			return rc;
		}
	}
	return k;
}

int coli_tiers_ready(struct coli_engine *e)
{
	const struct coli_tiers *t = e->tiers;

	for (int j = 0; j < t->n_acq; j++)
		if (t->s[t->acq[j]].state == SL_LOADING || coli_io_stream_busy(t->io, t->acq[j]))
			return 0;
	return 1;
}

int coli_tiers_wait(struct coli_engine *e)
{
	struct coli_tiers *t = e->tiers;
	double t0 = 0;
	int rc = 0;

	for (int j = 0; j < t->n_acq; j++) {
		int i = t->acq[j], r;

		/* belt and braces: a slot the streamer still writes is waited on
		 * whatever the map says, so no expert is computed from a slab in flight */
		if (t->s[i].state != SL_LOADING && !coli_io_stream_busy(t->io, i))
			continue;
		t->s[i].state = SL_LOADING;
		if (!t0)
			t0 = coli_now_s();
		r = settle(t, i, 1, &e->est);
		if (r && !rc) {
			rc = r;
			snprintf(e->errmsg, sizeof(e->errmsg), "%s", coli_io_errmsg());
		}
	}
	if (t0)
		e->est.disk_wait_s += coli_now_s() - t0;
	return rc;
}

void coli_tiers_release(struct coli_engine *e)
{
	struct coli_tiers *t = e->tiers;

	for (int j = 0; j < t->n_acq; j++) {
		struct tslot *sl = &t->s[t->acq[j]];

		if (sl->pins && --sl->pins == 0 && sl->state == SL_FREE)
			coli_mem_slots_free(t->slots, t->acq[j]);
	}
	t->n_acq = 0;
}

/* The streaming path's prefetch (core/moe/moe_dev.c): pin expert ex of layer l
 * if its slab is ready in a RAM slot, so a copy to a device can read it
 * while later layers acquire and evict; NULL if it is not (on disk, being
 * read, or no tiers). Counts no access: the layer that uses it does. */
const void *coli_tiers_pin_ready(struct coli_engine *e, int l, int ex, int *slot)
{
	struct coli_tiers *t = e->tiers;
	struct texp *x;

	if (!t || !e->m.layers[l].moe)
		return NULL;
	x = X(t, e->m.layers[l].xl, ex);
	if (x->slot < 0 || t->s[x->slot].state != SL_READY || coli_io_stream_busy(t->io, x->slot))
		return NULL;
	t->s[x->slot].pins++;
	*slot = x->slot;
	return coli_mem_slots_ptr(t->slots, x->slot);
}

void coli_tiers_unpin(struct coli_engine *e, int slot)
{
	struct tslot *sl = &e->tiers->s[slot];

	if (sl->pins && --sl->pins == 0 && sl->state == SL_FREE)
		coli_mem_slots_free(e->tiers->slots, slot);
}

void coli_tiers_layer_end(struct coli_engine *e, int l)
{
	struct coli_tiers *t = e->tiers;
	int xl = e->m.layers[l].xl;

	/* guesses for this layer that it did not route: wasted reads */
	for (int i = 0; i < t->n_slots; i++)
		if (t->s[i].prefetched && t->s[i].pf_xl == xl) {
			t->s[i].prefetched = 0;
			e->est.prefetch_wasted++;
		}
	if (t->pred_xl == xl)
		t->pred_xl = -1;
	t->step++;
}

int coli_tiers_layer_held(struct coli_engine *e, int l)
{
	struct coli_tiers *t = e->tiers;
	int xl = e->m.layers[l].xl;

	for (int ex = 0; ex < t->E; ex++)
		if (X(t, xl, ex)->slot < 0)
			return 0;
	return 1;
}

int coli_tiers_prefetch(struct coli_engine *e, int l_next, const unsigned char *mask)
{
	struct coli_tiers *t = e->tiers;
	int xl = e->m.layers[l_next].xl, nb = 0;

	t->pred_xl = xl;
	memcpy(t->pred, mask, (size_t)t->E);
	for (int ex = 0; ex < t->E; ex++) {
		struct texp *x = X(t, xl, ex);
		int i, tr;

		if (!mask[ex] || x->slot >= 0)
			continue;
		i = pick_victim(t, 0, score_now(t, x), &tr, &e->est);
		if (i < 0)
			break; /* no room worth taking: the rest come on demand */
		assign(t, i, xl, ex, tr);
		/* pinned until submitted: a LOADING slot the stream does not know
		 * yet must not be settled (it would read as landed) nor taken */
		t->s[i].pins = 1;
		t->s[i].prefetched = 1;
		t->s[i].pf_xl = xl;
		t->s[i].protect = t->step + 1;
		t->batch[nb++] = (struct coli_io_read){xl, (uint32_t)ex, i};
		count_reload(x, slab_bytes(t, xl), &e->est);
	}
	for (int j = 0; j < nb; j++)
		t->s[t->batch[j].slot].pins = 0;
	if (nb && coli_io_stream_submit(t->io, t->batch, nb, COLI_IO_PREFETCH)) {
		for (int j = 0; j < nb; j++) { /* could not queue: forget them */
			t->s[t->batch[j].slot].prefetched = 0;
			evict(t, t->batch[j].slot, &e->est);
			coli_mem_slots_free(t->slots, t->batch[j].slot);
		}
		nb = 0;
	}
	e->est.prefetch_issued += (uint64_t)nb;
	return nb;
}

/* Expert ex of layer l left the VRAM tier (core/place/vram.c's adaptation): its
 * slab is read back into RAM in the background where a slot is free or worth
 * taking (a prefetch's rules), so its next use is a RAM hit and not a demand
 * read the layer waits for. An expert placed on a device at open never had a
 * RAM copy; under CUDA_RELEASE_HOST none has. Returns 1 if a read was queued. */
int coli_tiers_readmit(struct coli_engine *e, int l, int ex)
{
	struct coli_tiers *t = e->tiers;
	struct texp *x;
	int xl, i, tr;

	if (!t || !t->x)
		return 0;
	xl = e->m.layers[l].xl;
	x = X(t, xl, ex);
	if (x->slot >= 0)
		return 0;
	i = pick_victim(t, 0, score_now(t, x), &tr, &e->est);
	if (i < 0)
		return 0;
	assign(t, i, xl, ex, tr);
	t->batch[0] = (struct coli_io_read){xl, (uint32_t)ex, i};
	if (coli_io_stream_submit(t->io, t->batch, 1, COLI_IO_PREFETCH)) {
		evict(t, i, &e->est);
		coli_mem_slots_free(t->slots, i);
		return 0;
	}
	count_reload(x, slab_bytes(t, xl), &e->est);
	e->est.vram_readmits++;
	return 1;
}

/* ---- CUDA_RELEASE_HOST ---- */

void coli_tiers_drop_host(struct coli_engine *e, int l, int ex)
{
	struct coli_tiers *t = e->tiers;
	int xl = e->m.layers[l].xl;
	struct texp *x;

	if (!t || !t->x)
		return;
	x = X(t, xl, ex);
	if (x->slot >= 0) {
		int i = x->slot;

		if (t->s[i].pins)
			return;           /* in use by the layer being computed: keep it */
		settle(t, i, 1, &e->est); /* a read in flight lands before the slot goes */
		if (t->s[i].state != SL_FREE) {
			evict(t, i, &e->est);
			coli_mem_slots_free(t->slots, i);
		}
	}
	coli_io_container_slab_drop(t->c, xl, (uint32_t)ex); /* advice: failure is harmless */
	x->host_dropped = 1;
	e->est.host_drops++;
}

void coli_tiers_host_back(struct coli_engine *e, int l, int ex)
{
	struct coli_tiers *t = e->tiers;

	if (t && t->x)
		X(t, e->m.layers[l].xl, ex)->host_dropped = 0;
}

void coli_tiers_settle_all(struct coli_engine *e)
{
	struct coli_tiers *t = e->tiers;

	for (int i = 0; t && t->s && i < t->n_slots; i++)
		if (!t->s[i].pins)
			settle(t, i, 1, &e->est);
}

void coli_tiers_stats(struct coli_engine *e, struct coli_engine_stats *st)
{
	struct coli_io_stream_stats io;

	if (!e->tiers || !e->tiers->io)
		return;
	coli_io_stream_stats(e->tiers->io, &io);
	st->disk_reads = io.reads;
	st->disk_bytes_read = io.bytes;
	st->disk_read_s = io.busy_s;
	st->disk_retries = io.retries;
}

uint64_t coli_tiers_heat(struct coli_engine *e, int xl, int ex)
{
	struct coli_tiers *t = e->tiers;

	return t && xl >= 0 && xl < t->nxl && ex >= 0 && ex < t->E
	           ? t->count[(size_t)xl * t->E + ex]
	           : 0;
}

void coli_tiers_count(struct coli_engine *e, int l, int ex, int uses)
{
	struct coli_tiers *t = e->tiers;

	if (t)
		t->count[(size_t)e->m.layers[l].xl * t->E + ex] += (uint64_t)uses;
}
