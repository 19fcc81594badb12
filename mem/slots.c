/*
 * mem/slots.c — fixed-size slab slots.
 *
 *   base                                                     base + n*slot_bytes
 *   +-------------+-------------+-- ... --+-------------+
 *   |  slot 0     |  slot 1     |         |  slot n-1   |   each slot_bytes,
 *   +-------------+-------------+-- ... --+-------------+   4 KiB aligned
 *
 *   free[0..n_free)  indices of free slots, a stack: alloc pops, free pushes
 *
 * One arena (mem/arena.c: NUMA node, THP) so that the whole slot space is
 * one registered region: io_uring fixed buffers and, later, one
 * cuMemHostRegister. Slot size is the largest slab rounded to 4 KiB, so any
 * slab fits any slot and an O_DIRECT read lands at an aligned address.
 */
#include <errno.h>
#include <stdlib.h>

#include "mem/mem.h"

struct coli_mem_slots {
	char *base;
	size_t slot_bytes, bytes;
	int n, n_free, node;
	int *free;     /* [n] stack of free indices */
	char *is_free; /* [n] guards double free */
};

int coli_mem_slots_create(size_t slot_bytes, int n_slots, int node, coli_mem_slots_t **out)
{
	struct coli_mem_slots *s;

	*out = NULL;
	if (!slot_bytes || slot_bytes % 4096 || n_slots <= 0 ||
	    slot_bytes > ((size_t)-1) / (size_t)n_slots)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->slot_bytes = slot_bytes;
	s->n = n_slots;
	s->node = node;
	s->bytes = slot_bytes * (size_t)n_slots;
	s->free = malloc(sizeof(int) * (size_t)n_slots);
	s->is_free = malloc((size_t)n_slots);
	s->base = coli_mem_alloc(s->bytes, node);
	if (!s->free || !s->is_free || !s->base) {
		coli_mem_slots_destroy(s);
		return -ENOMEM;
	}
	/* pop order 0, 1, 2, ...: low slots first, so small runs touch little */
	for (int i = 0; i < n_slots; i++) {
		s->free[i] = n_slots - 1 - i;
		s->is_free[i] = 1;
	}
	s->n_free = n_slots;
	coli_mem_register(s->base, s->bytes, node);
	*out = s;
	return 0;
}

void coli_mem_slots_destroy(coli_mem_slots_t *s)
{
	if (!s)
		return;
	if (s->base) {
		coli_mem_unregister(s->base);
		coli_mem_free(s->base, s->bytes);
	}
	free(s->free);
	free(s->is_free);
	free(s);
}

int coli_mem_slots_alloc(coli_mem_slots_t *s)
{
	int i;

	if (!s->n_free)
		return -ENOSPC;
	i = s->free[--s->n_free];
	s->is_free[i] = 0;
	return i;
}

void coli_mem_slots_free(coli_mem_slots_t *s, int slot)
{
	if (slot < 0 || slot >= s->n || s->is_free[slot])
		return;
	s->is_free[slot] = 1;
	s->free[s->n_free++] = slot;
}

void *coli_mem_slots_ptr(const coli_mem_slots_t *s, int slot)
{
	return slot >= 0 && slot < s->n ? s->base + (size_t)slot * s->slot_bytes : NULL;
}

size_t coli_mem_slots_slot_bytes(const coli_mem_slots_t *s)
{
	return s->slot_bytes;
}

int coli_mem_slots_count(const coli_mem_slots_t *s)
{
	return s->n;
}

int coli_mem_slots_free_count(const coli_mem_slots_t *s)
{
	return s->n_free;
}

void *coli_mem_slots_base(const coli_mem_slots_t *s)
{
	return s->base;
}

size_t coli_mem_slots_bytes(const coli_mem_slots_t *s)
{
	return s->bytes;
}
