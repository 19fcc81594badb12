/*
 * mem/arena.c — large host allocations: mmap'd anonymous memory, bound to a
 * NUMA node with mbind (libnuma) and advised for transparent huge pages.
 * Small objects use malloc; anything sized by the model comes here.
 */
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>

#include "mem/mem.h"

#define HUGE_BYTES ((size_t)2 << 20)

static atomic_size_t g_in_use;

void *coli_mem_alloc(size_t bytes, int node)
{
	void *p;

	if (!bytes) {
		errno = EINVAL;
		return NULL;
	}
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (bytes >= HUGE_BYTES)
		madvise(p, bytes, MADV_HUGEPAGE); /* advisory: fine if THP is off */
	if (node >= 0 && numa_available() >= 0 && node <= numa_max_node()) {
		unsigned long mask[16] = {0};

		mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
		/* Preferred, not strict: a full node spills rather than failing a load. */
		mbind(p, bytes, MPOL_PREFERRED, mask, sizeof(mask) * 8, 0);
	}
	atomic_fetch_add(&g_in_use, bytes);
	return p;
}

void coli_mem_free(void *p, size_t bytes)
{
	if (!p)
		return;
	munmap(p, bytes);
	atomic_fetch_sub(&g_in_use, bytes);
}

size_t coli_mem_in_use(void)
{
	return atomic_load(&g_in_use);
}
