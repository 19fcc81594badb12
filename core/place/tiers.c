/*
 * core/place/tiers.c — where each routed expert lives: a RAM slot or the disk
 * (the GPU tier is the lead's: COLI_TIER_VRAM and a hook in acquire). It owns
 * the slot arena (mem/slots.c), the slab streamer (io/stream.c), the heat of
 * every expert, the replacement policy and the RAM budget.
 *
 * Data:
 *   x[xl][e]   {slot or -1, score, last}  per (expert layer, expert)
 *   count[xl][e]  accesses ((token, expert) pairs), usage file included
 *   s[slot]    {xl, e, state FREE|LOADING|READY, pins, transient,
 *               prefetched, protect}
 *
 * Budget (--ram-gb B, GB = 1e9 bytes), checked at open:
 *   fixed     = dense region (copied into an arena) + KV cache (K and V)
 *               + scratch buffers
 *   min_slots = top_k: the slabs one decode layer needs at once
 *   B >= fixed + min_slots * slot_bytes, else the engine refuses to start
 *   saying how much is needed; slots = min(all slabs, (B - fixed) / slot).
 *   B = 0: exactly the working set. B < 0 (default): as many slots as
 *   90% of MemAvailable allows (at most every slab), dense part left on the
 *   container's mapping; so the default behaves as "everything resident
 *   after first use" on machines that can hold the model, and as a cache
 *   rather than an OOM kill on those that cannot.
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
 * carries count[] across runs, and the hottest experts are read at open
 * (as background-class reads: io/stream.c serves them last, one at a time)
 * up to the slots the budget allows.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/core_internal.h"
#include "mem/mem.h"

#define HALF_TOKENS 256.0f
#define MARGIN      0.25f
#define PROMOTE     2.0f
#define GB          1e9

enum { SL_FREE = 0, SL_LOADING = 1, SL_READY = 2 };

struct tslot {
	int xl, ex;
	int state, pins;
	int transient;    /* holds a non-admitted expert: evicted first */
	int prefetched;   /* issued by lookahead, not used yet */
	int pf_xl;        /* layer it was prefetched for */
	uint64_t protect; /* prefetched for layer step `protect` */
};

struct texp {
	int slot;
	float score;
	uint64_t last;    /* token clock at the last score update */
	int host_dropped; /* CUDA_RELEASE_HOST dropped it after upload: a read is a reload */
};

struct coli_tiers {
	coli_container_t *c;
	coli_mem_slots_t *slots;
	coli_io_stream_t *io;
	int nxl, E, n_slots, min_slots, total;
	size_t slot_bytes;
	struct tslot *s;
	struct texp *x;  /* [nxl * E] */
	uint64_t *count; /* [nxl * E] */
	struct coli_usage usage;
	char usage_path[600];
	int usage_on;
	uint64_t tokens, last_save;
	uint64_t step; /* MoE layer calls so far */
	int *acq;      /* [n_slots] slots pinned by the current acquire */
	int n_acq;
	struct coli_io_read *batch; /* [nxl * E] */
	int pred_xl;                /* lookahead: layer the guess is for, or -1 */
	unsigned char *pred;        /* [E] */
	void *dense;
	size_t dense_bytes;
};

static float score_now(const struct coli_tiers *t, const struct texp *x)
{
	if (x->score == 0 || t->tokens == x->last)
		return x->score;
	return x->score * exp2f(-(float)(t->tokens - x->last) / HALF_TOKENS);
}

static struct texp *X(struct coli_tiers *t, int xl, int ex)
{
	return &t->x[(size_t)xl * t->E + ex];
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

static void evict(struct coli_tiers *t, int i, struct coli_engine_stats *st)
{
	struct tslot *sl = &t->s[i];

	if (sl->state != SL_FREE)
		X(t, sl->xl, sl->ex)->slot = -1;
	if (sl->prefetched)
		st->prefetch_wasted++;
	sl->prefetched = 0;
	sl->state = SL_FREE;
}

static void assign(struct coli_tiers *t, int i, int xl, int ex, int transient)
{
	struct tslot *sl = &t->s[i];

	*sl = (struct tslot){.xl = xl, .ex = ex, .state = SL_LOADING, .transient = transient};
	X(t, xl, ex)->slot = i;
}

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

/* ---- usage ---- */

static void usage_save(struct coli_engine *e)
{
	struct coli_tiers *t = e->tiers;
	char err[700];

	if (!t->usage_on)
		return;
	t->usage.tokens += t->tokens - t->last_save;
	t->last_save = t->tokens;
	if (coli_usage_write(t->usage_path, &t->usage, err, sizeof(err))) {
		fprintf(stderr, "coli: usage file not saved: %s\n", err);
		t->usage_on = 0; /* said once */
	}
}

void coli_tiers_tokens(struct coli_engine *e, int T)
{
	struct coli_tiers *t = e->tiers;

	if (!t)
		return;
	t->tokens += (uint64_t)T;
	if (e->opts.usage_every > 0 && t->tokens - t->last_save >= (uint64_t)e->opts.usage_every)
		usage_save(e);
}

static int cmp_heat(const void *a, const void *b, void *arg)
{
	const uint64_t *c = arg;
	uint64_t x = c[*(const int *)a], y = c[*(const int *)b];

	return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

/* Read the usage file into count[] (--usage off: none). 1 if it gave a heat,
 * else 0 with count[] zero. */
static int usage_load(struct coli_engine *e, const char *model)
{
	struct coli_tiers *t = e->tiers;
	char err[700];
	int rc;

	if (e->opts.usage_off)
		return 0;
	if (e->opts.usage[0])
		snprintf(t->usage_path, sizeof(t->usage_path), "%s", e->opts.usage);
	else
		coli_usage_default_path(model, t->usage_path, sizeof(t->usage_path));
	t->usage_on = 1;
	t->usage.model_hash = coli_io_container_hash(t->c);
	t->usage.n_layers = t->nxl;
	t->usage.n_experts = t->E;
	t->usage.counts = t->count;
	rc = coli_usage_read(t->usage_path, &t->usage, err, sizeof(err));
	if (!rc)
		return 1;
	if (rc != -ENOENT)
		fprintf(stderr, "coli: usage file ignored: %s\n", err);
	memset(t->count, 0, (size_t)t->nxl * t->E * sizeof(*t->count));
	t->usage.tokens = 0;
	return 0;
}

/* Load the usage file and queue the warm-up reads: the hottest experts,
 * then the ones it never saw, as far as the RAM slots go. When every expert
 * fits, all are read (with no usage file, or --usage off, too): a model that
 * fits in RAM is read once, in the background, instead of on first use
 * mid-token (or, for an expert placed in VRAM at open, when the VRAM tier's
 * adaptation sends it back). */
static void usage_open(struct coli_engine *e, const char *model)
{
	struct coli_tiers *t = e->tiers;
	size_t n = (size_t)t->nxl * t->E;
	int *order, room, nb = 0, all_fit = t->n_slots >= t->total;
	uint64_t maxc = 0;

	if (!usage_load(e, model) && !all_fit)
		return;
	order = malloc(n * sizeof(int));
	if (!order)
		return;
	for (size_t i = 0; i < n; i++) {
		order[i] = (int)i;
		maxc = t->count[i] > maxc ? t->count[i] : maxc;
	}
	qsort_r(order, n, sizeof(int), cmp_heat, t->count);
	room = all_fit ? t->total : t->n_slots - t->min_slots; /* else keep slots for misses */
	for (size_t j = 0; j < n && nb < room; j++) {
		int xl = order[j] / t->E, ex = order[j] % t->E, i;

		if (ex >= (int)coli_io_container_expert_layer(t->c, xl)->n_experts)
			continue;
		i = coli_mem_slots_alloc(t->slots);
		if (i < 0)
			break;
		assign(t, i, xl, ex, 0);
		/* start heat from the file, scaled so a live expert can catch up */
		X(t, xl, ex)->score = maxc ? 8.0f * (float)t->count[order[j]] / (float)maxc : 0;
		t->batch[nb++] = (struct coli_io_read){xl, (uint32_t)ex, i};
	}
	if (nb && coli_io_stream_submit(t->io, t->batch, nb, COLI_IO_BACKGROUND))
		for (int j = 0; j < nb; j++) {
			evict(t, t->batch[j].slot, &e->est);
			coli_mem_slots_free(t->slots, t->batch[j].slot);
		}
	free(order);
}

/* ---- open / close ---- */

static void fmt_bytes(char *b, size_t n, double bytes)
{
	if (bytes >= 1e9)
		snprintf(b, n, "%.2f GB", bytes / 1e9);
	else if (bytes >= 1e6)
		snprintf(b, n, "%.2f MB", bytes / 1e6);
	else
		snprintf(b, n, "%.1f KB", bytes / 1e3);
}

static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/* Every dense tensor's xxh64 over its bytes, before anything reads them:
 * in the arena's copy of the dense region (which starts at file offset off),
 * or with no arena in the container's mapping. */
static int dense_verify(const coli_container_t *c, const char *arena, uint64_t off, char *err,
                        size_t errlen)
{
	for (int i = 0; i < coli_io_container_n_tensors(c); i++) {
		const struct coli_tensor_info *ti = coli_io_container_tensor(c, i);
		const char *p = arena ? arena + (ti->offset - off)
		                      : (const char *)coli_io_container_tensor_data(c, ti);

		if (coli_io_xxh64(p, ti->bytes) != ti->xxh64) {
			snprintf(err, errlen,
			         "%s: tensor %s is corrupt: its checksum does not match (run 'coli "
			         "verify'; --verify-slabs off skips the check)",
			         coli_io_container_path(c), ti->name);
			return -EBADMSG;
		}
	}
	return 0;
}

/* The dense region into an arena on our node, so the budget counts it. */
static int dense_load(struct coli_engine *e, int verify, char *err, size_t errlen)
{
	struct coli_tiers *t = e->tiers;
	const char *path = coli_io_container_path(t->c);
	uint64_t off, bytes;
	int fd, rc = 0;

	coli_io_container_dense_region(t->c, &off, &bytes);
	if (!bytes)
		return 0;
	t->dense = coli_mem_alloc(bytes, e->numa_node);
	if (!t->dense) {
		snprintf(err, errlen, "cannot allocate %.3g MB for the dense weights", bytes / 1e6);
		return -ENOMEM;
	}
	t->dense_bytes = bytes;
	fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	for (uint64_t done = 0; fd >= 0 && done < bytes && !rc;) {
		size_t n = bytes - done > (64u << 20) ? (64u << 20) : bytes - done;
		ssize_t r = pread(fd, (char *)t->dense + done, n, (off_t)(off + done));

		if (r < 0 && errno == EINVAL && done == 0) { /* O_DIRECT refused */
			close(fd);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			rc = r < 0 ? -errno : -EIO;
		else
			done += (uint64_t)r;
	}
	if (fd < 0)
		rc = -errno;
	else
		close(fd);
	if (rc) {
		snprintf(err, errlen, "%s: cannot read the dense weights: %s", path, strerror(-rc));
		return rc;
	}
	if (verify) {
		rc = dense_verify(t->c, t->dense, off, err, errlen);
		if (rc)
			return rc;
	}
	coli_mem_lock(t->dense, bytes, "dense weights");
	if (coli_io_container_n_tensors(t->c) > 0) {
		const struct coli_tensor_info *t0 = coli_io_container_tensor(t->c, 0);
		const char *map0 = (const char *)coli_io_container_tensor_data(t->c, t0);

		coli_model_rebase(&e->m, map0 - (t0->offset - off), bytes, t->dense);
	}
	return 0;
}

static int budget(struct coli_engine *e, const char *model, char *err, size_t errlen)
{
	struct coli_tiers *t = e->tiers;
	struct coli_engine_stats *st = &e->est;
	double B = e->opts.ram_gb;
	uint64_t dense_off, dense, fixed, need, avail;
	char a[32], b[32], c[32], d[32], f[32];

	coli_io_container_dense_region(t->c, &dense_off, &dense);
	fixed = 2 * (uint64_t)e->kv_bytes + e->scratch_bytes + (B >= 0 ? dense : 0);
	need = fixed + (uint64_t)t->min_slots * t->slot_bytes;
	st->ram_fixed_bytes = fixed;
	if (B < 0) {
		avail = mem_available() * 9 / 10;
		avail = avail > fixed ? avail - fixed : 0;
		t->n_slots =
		    (int)(avail / t->slot_bytes < (uint64_t)t->total ? avail / t->slot_bytes
		                                                     : (uint64_t)t->total);
		if (t->n_slots < t->min_slots)
			t->n_slots = t->min_slots;
		st->ram_budget_bytes = 0;
	} else if (B == 0) {
		t->n_slots = t->min_slots;
		st->ram_budget_bytes = need;
	} else {
		uint64_t bytes = (uint64_t)(B * GB);

		if (bytes < need) {
			fmt_bytes(a, sizeof(a), (double)dense);
			fmt_bytes(b, sizeof(b), 2.0 * e->kv_bytes);
			fmt_bytes(c, sizeof(c), (double)e->scratch_bytes);
			fmt_bytes(d, sizeof(d), (double)t->min_slots * t->slot_bytes);
			fmt_bytes(f, sizeof(f), (double)need);
			snprintf(
			    err, errlen,
			    "%s: --ram-gb %g cannot hold the engine: dense weights %s + KV cache "
			    "%s (%d tokens) + scratch %s + working set %s (%d experts of %zu KB) "
			    "= %s; pass --ram-gb %.4g or more (or --ram-gb 0 for exactly that), "
			    "or a smaller --ctx",
			    model, B, a, b, e->ctx, c, d, t->min_slots, t->slot_bytes >> 10, f,
			    ceil(need / GB * 1e4) / 1e4);
			return -ENOMEM;
		}
		t->n_slots = (int)((bytes - fixed) / t->slot_bytes < (uint64_t)t->total
		                       ? (bytes - fixed) / t->slot_bytes
		                       : (uint64_t)t->total);
		st->ram_budget_bytes = bytes;
	}
	st->slot_bytes = t->slot_bytes;
	st->ram_slots = (uint64_t)t->n_slots;
	st->min_slots = (uint64_t)t->min_slots;
	st->total_slabs = (uint64_t)t->total;
	return 0;
}

int coli_tiers_open(struct coli_engine *e, char *err, size_t errlen)
{
	struct coli_tiers *t = calloc(1, sizeof(*t));
	struct coli_io_stream_opts so;
	const char *model = coli_io_container_path(e->m.c);
	size_t n;
	int rc;

	if (!t)
		return -ENOMEM;
	e->tiers = t;
	t->c = e->m.c;
	t->nxl = coli_io_container_n_expert_layers(t->c);
	t->pred_xl = -1;
	for (int i = 0; i < t->nxl; i++) {
		const struct coli_expert_layer *xl = coli_io_container_expert_layer(t->c, i);

		t->E = (int)xl->n_experts > t->E ? (int)xl->n_experts : t->E;
		t->slot_bytes = xl->slab_bytes > t->slot_bytes ? xl->slab_bytes : t->slot_bytes;
		t->total += (int)xl->n_experts;
	}
	if (!t->nxl)
		return 0; /* a dense model: nothing to tier */
	t->slot_bytes = (t->slot_bytes + 4095) & ~(size_t)4095;
	t->min_slots = e->m.cfg.top_k > 0 ? e->m.cfg.top_k : 1;
	if (t->min_slots > t->total)
		t->min_slots = t->total;
	rc = budget(e, model, err, errlen);
	if (rc)
		return rc;
	n = (size_t)t->nxl * t->E;
	t->x = calloc(n, sizeof(*t->x));
	t->count = calloc(n, sizeof(*t->count));
	t->s = calloc((size_t)t->n_slots, sizeof(*t->s));
	t->acq = calloc((size_t)t->n_slots, sizeof(*t->acq));
	t->batch = calloc(n, sizeof(*t->batch));
	t->pred = calloc((size_t)t->E, 1);
	if (!t->x || !t->count || !t->s || !t->acq || !t->batch || !t->pred) {
		snprintf(err, errlen, "out of memory for the tier map");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		t->x[i].slot = -1;
	if (e->opts.ram_gb >= 0) {
		rc = dense_load(e, e->opts.verify_slabs != COLI_OPT_VERIFY_OFF, err, errlen);
		if (rc)
			return rc;
	} else if (e->opts.verify_slabs != COLI_OPT_VERIFY_OFF) {
		/* no budget: the tensors are read in place from the mapping */
		rc = dense_verify(t->c, NULL, 0, err, errlen);
		if (rc)
			return rc;
	}
	rc = coli_mem_slots_create(t->slot_bytes, t->n_slots, e->numa_node, &t->slots);
	if (rc) {
		snprintf(err, errlen, "cannot allocate %d expert slots of %zu KB (%.3g GB)",
		         t->n_slots, t->slot_bytes >> 10, (double)t->n_slots * t->slot_bytes / GB);
		return rc;
	}
	if (e->opts.ram_gb >= 0)
		coli_mem_lock(coli_mem_slots_base(t->slots), coli_mem_slots_bytes(t->slots),
		              "expert slots");
	coli_io_stream_opts_init(&so);
	so.backend = e->opts.io == COLI_OPT_IO_PREAD   ? COLI_IO_PREAD
	             : e->opts.io == COLI_OPT_IO_URING ? COLI_IO_URING
	                                               : COLI_IO_AUTO;
	so.verify = e->opts.verify_slabs == COLI_OPT_VERIFY_ON    ? COLI_IO_VERIFY_ON
	            : e->opts.verify_slabs == COLI_OPT_VERIFY_OFF ? COLI_IO_VERIFY_OFF
	                                                          : COLI_IO_VERIFY_FIRST;
	rc = coli_io_stream_create(t->c, t->slots, &so, &t->io);
	if (rc) {
		snprintf(err, errlen, "%s", coli_io_errmsg());
		return rc;
	}
	usage_open(e, model);
	if (e->opts.verbose)
		fprintf(stderr,
		        "coli: tiers: %d RAM slots of %zu KB for %d experts (working set %d), %s\n",
		        t->n_slots, t->slot_bytes >> 10, t->total, t->min_slots,
		        coli_io_stream_describe(t->io));
	return 0;
}

void coli_tiers_close(struct coli_engine *e)
{
	struct coli_tiers *t = e->tiers;

	if (!t)
		return;
	if (t->io) {
		usage_save(e);
		coli_io_stream_destroy(t->io);
	}
	coli_mem_slots_destroy(t->slots);
	if (t->dense)
		coli_mem_free(t->dense, t->dense_bytes);
	free(t->x), free(t->count), free(t->s), free(t->acq), free(t->batch), free(t->pred);
	free(t);
	e->tiers = NULL;
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
