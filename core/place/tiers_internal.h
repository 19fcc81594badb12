/*
 * core/place/tiers_internal.h — the expert tiers' state, shared by
 * core/place/tiers.c (the slot map, reads, policy) and core/place/tiers_open.c
 * (open, close, budget, dense region, usage file). Nothing outside
 * core/place/tiers*.c includes it.
 *
 * Data:
 *   x[xl][e]   {slot or -1, score, last}  per (expert layer, expert)
 *   count[xl][e]  accesses ((token, expert) pairs), usage file included
 *   s[slot]    {xl, e, state FREE|LOADING|READY, pins, transient,
 *               prefetched, protect}
 */
#ifndef COLI_CORE_PLACE_TIERS_INTERNAL_H
#define COLI_CORE_PLACE_TIERS_INTERNAL_H

#include <stdint.h>

#include "core/core_internal.h"
#include "mem/mem.h"

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

static inline struct texp *X(struct coli_tiers *t, int xl, int ex)
{
	return &t->x[(size_t)xl * t->E + ex];
}

static inline void evict(struct coli_tiers *t, int i, struct coli_engine_stats *st)
{
	struct tslot *sl = &t->s[i];

	if (sl->state != SL_FREE)
		X(t, sl->xl, sl->ex)->slot = -1;
	if (sl->prefetched)
		st->prefetch_wasted++;
	sl->prefetched = 0;
	sl->state = SL_FREE;
}

static inline void assign(struct coli_tiers *t, int i, int xl, int ex, int transient)
{
	struct tslot *sl = &t->s[i];

	*sl = (struct tslot){.xl = xl, .ex = ex, .state = SL_LOADING, .transient = transient};
	X(t, xl, ex)->slot = i;
}

#endif
