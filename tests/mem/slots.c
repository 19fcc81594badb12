/*
 * tests/mem/slots.c — slab slots (alloc/free O(1), alignment, exhaustion,
 * double free ignored), the registration registry and its hooks, and
 * --numa-bind resolution.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mem/mem.h"

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x)) {                                                                        \
			printf("%s:%d: %s\n", __FILE__, __LINE__, #x);                             \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

static int g_hook_calls, g_hook_live;

static int hook(void *arg, void *p, size_t bytes, int reg)
{
	(void)arg, (void)p, (void)bytes;
	g_hook_calls++;
	g_hook_live += reg ? 1 : -1;
	return 0;
}

int main(void)
{
	coli_mem_slots_t *s;
	int seen[64] = {0}, node;
	char why[256];

	CHECK(coli_mem_slots_create(1000, 4, COLI_MEM_NODE_ANY, &s) == -EINVAL); /* not 4 KiB */
	CHECK(coli_mem_slots_create(4096, 0, COLI_MEM_NODE_ANY, &s) == -EINVAL);
	CHECK(coli_mem_register_hook(hook, NULL) == 0);
	CHECK(coli_mem_slots_create(3 * 4096, 64, COLI_MEM_NODE_ANY, &s) == 0);
	CHECK(g_hook_live == 1); /* the arena was registered through the hook */
	CHECK(((uintptr_t)coli_mem_slots_base(s) & 4095) == 0);
	CHECK(coli_mem_slots_bytes(s) == 64 * 3 * 4096);
	for (int i = 0; i < 64; i++) {
		int k = coli_mem_slots_alloc(s);

		CHECK(k >= 0 && k < 64 && !seen[k]);
		seen[k] = 1;
		memset(coli_mem_slots_ptr(s, k), k, 3 * 4096); /* every byte writable */
	}
	CHECK(coli_mem_slots_alloc(s) == -ENOSPC);
	CHECK(coli_mem_slots_free_count(s) == 0);
	coli_mem_slots_free(s, 17);
	coli_mem_slots_free(s, 17); /* double free: ignored */
	CHECK(coli_mem_slots_free_count(s) == 1);
	CHECK(coli_mem_slots_alloc(s) == 17);
	CHECK(((unsigned char *)coli_mem_slots_ptr(s, 5))[3 * 4096 - 1] == 5);
	CHECK(coli_mem_slots_ptr(s, 64) == NULL);
	{
		struct coli_mem_region r[8];

		CHECK(coli_mem_regions(r, 8) == 1 && r[0].p == coli_mem_slots_base(s));
	}
	coli_mem_slots_destroy(s);
	CHECK(g_hook_live == 0);
	coli_mem_unregister_hook(hook, NULL);

	/* a 2 MiB+ arena is 2 MiB aligned (THP) */
	{
		size_t b = (5u << 20) + 4096;
		void *p = coli_mem_alloc(b, 0);

		CHECK(p && ((uintptr_t)p & ((2u << 20) - 1)) == 0);
		memset(p, 1, b);
		coli_mem_free(p, b);
	}

	CHECK(coli_mem_numa_resolve("off", &node, why, sizeof(why)) == 0 &&
	      node == COLI_MEM_NODE_ANY);
	CHECK(coli_mem_numa_resolve("auto", &node, why, sizeof(why)) == 0);
	printf("numa auto: node %d (%s), %d node(s)\n", node, why, coli_mem_numa_nodes());
	CHECK(coli_mem_numa_resolve("interleave", &node, why, sizeof(why)) == 0);
	CHECK(coli_mem_numa_resolve("0", &node, why, sizeof(why)) == 0);
	CHECK(coli_mem_numa_resolve("9999", &node, why, sizeof(why)) == -EINVAL);
	CHECK(coli_mem_numa_resolve("bogus", &node, why, sizeof(why)) == -EINVAL);
	CHECK(coli_mem_numa_bind_thread(COLI_MEM_NODE_ANY) == 0);
	return 0;
}
