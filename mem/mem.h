/*
 * mem/mem.h — host memory. Every large allocation of the engine goes through
 * here and names its NUMA node, so placement, huge pages and pinning for
 * io_uring fixed buffers and cuMemHostRegister happen in one place.
 *
 *   arena.c   anonymous mappings: NUMA policy, THP, mlock, the registry of
 *             regions that devices (io_uring, CUDA) attach to
 *   numa.c    --numa-bind resolution (auto = the GPU's node, else the caller's)
 *             and thread binding
 *   slots.c   fixed-size slab slots carved from one arena, O(1) alloc/free
 *
 * All functions return 0 / -errno (or NULL with errno set) and never exit.
 */
#ifndef COLI_MEM_H
#define COLI_MEM_H

#include <stddef.h>

#define COLI_MEM_NODE_ANY        (-1) /* no binding: first touch decides */
#define COLI_MEM_NODE_INTERLEAVE (-2) /* pages spread over every node */

/* Anonymous memory of `bytes`, 4 KiB aligned (2 MiB aligned and THP-advised
 * when >= 2 MiB), zero-filled, bound to `node` when node >= 0 and libnuma says
 * the node exists (preferred policy: a full node spills rather than failing),
 * interleaved for COLI_MEM_NODE_INTERLEAVE. Returns NULL on failure (errno set). */
void *coli_mem_alloc(size_t bytes, int node);
void coli_mem_free(void *p, size_t bytes);

/* Bytes currently held through coli_mem_alloc (for budgets and reports). */
size_t coli_mem_in_use(void);

/* mlock the range. 0, or -errno when refused (RLIMIT_MEMLOCK, EPERM); the
 * first refusal in the process prints one line on stderr saying how much was
 * asked, the limit, and how to raise it. Memory stays usable either way. */
int coli_mem_lock(void *p, size_t bytes, const char *what);

/* ---- registration ----
 * A registered region is host memory that devices read or write directly:
 * io_uring fixed buffers now, cuMemHostRegister later. coli_mem_register
 * records the region once; each consumer installs a hook that is called for
 * every region already recorded and for every later one (and again with
 * reg = 0 when the region goes). io/ registers its ring's buffers itself
 * from coli_mem_regions-style knowledge of its own slot arena; the GPU path
 * installs a hook that calls cuMemHostRegister. */
struct coli_mem_region {
	void *p;
	size_t bytes;
	int node;
};
typedef int (*coli_mem_reg_hook)(void *arg, void *p, size_t bytes, int reg);
int coli_mem_register(void *p, size_t bytes, int node);
void coli_mem_unregister(void *p);
/* Install a hook (at most 4); replays it over the regions already recorded.
 * A hook's failure is returned from coli_mem_register but the region stays
 * recorded (the consumer falls back to unregistered copies). */
int coli_mem_register_hook(coli_mem_reg_hook fn, void *arg);
void coli_mem_unregister_hook(coli_mem_reg_hook fn, void *arg);
/* n host buffers that devices copy to and from, carved from one registered
 * region (each 64-byte aligned): *dst[i] gets sz[i] bytes, *bytes the
 * region's size. NULL (errno set) if the memory is not there. Free with
 * coli_mem_free_buffers(region, bytes) after the devices are done with it. */
void *coli_mem_alloc_buffers(const size_t *sz, void **const *dst, int n, int node, size_t *bytes);
void coli_mem_free_buffers(void *p, size_t bytes);
/* Copies up to max recorded regions into out; returns how many there are. */
int coli_mem_regions(struct coli_mem_region *out, int max);

/* ---- NUMA (numa.c) ----
 * Resolve --numa-bind: "off" -> COLI_MEM_NODE_ANY, "interleave" ->
 * COLI_MEM_NODE_INTERLEAVE, "N" -> node N (must exist), "auto" -> the NUMA
 * node of the first NVIDIA GPU (PCI vendor 0x10de, from sysfs) when there is
 * one, else the node of the calling CPU; on a one-node machine auto is
 * COLI_MEM_NODE_ANY (nothing to choose). *why says how it was chosen
 * ("gpu 0000:17:00.0", "cpu 3", "one node", ...). -EINVAL for anything else. */
int coli_mem_numa_resolve(const char *spec, int *node, char *why, size_t whylen);
/* Run the calling thread (and threads it creates later) on `node`'s CPUs.
 * No-op for node < 0. 0 or -errno. */
int coli_mem_numa_bind_thread(int node);
/* Number of configured NUMA nodes (1 without libnuma support). */
int coli_mem_numa_nodes(void);
/* The node PCI device domain:bus:device.0 hangs off (sysfs), -1 where
 * unknown or where there is one node. */
int coli_mem_pci_node(unsigned domain, unsigned bus, unsigned device);

/* ---- slab slots (slots.c) ----
 * n fixed-size slots of slot_bytes (a multiple of 4 KiB) carved from one
 * arena on `node`, so one O_DIRECT read lands a whole slab in a slot and the
 * whole arena is one registration. alloc/free are O(1) (a free-index stack).
 * Not thread-safe: the tier manager owns it on the engine thread. */
typedef struct coli_mem_slots coli_mem_slots_t;
int coli_mem_slots_create(size_t slot_bytes, int n_slots, int node, coli_mem_slots_t **out);
void coli_mem_slots_destroy(coli_mem_slots_t *s);
/* A free slot's index, or -ENOSPC when all are taken. */
int coli_mem_slots_alloc(coli_mem_slots_t *s);
void coli_mem_slots_free(coli_mem_slots_t *s, int slot);
void *coli_mem_slots_ptr(const coli_mem_slots_t *s, int slot);
size_t coli_mem_slots_slot_bytes(const coli_mem_slots_t *s);
int coli_mem_slots_count(const coli_mem_slots_t *s);
int coli_mem_slots_free_count(const coli_mem_slots_t *s);
/* The arena: base and length (n_slots * slot_bytes). */
void *coli_mem_slots_base(const coli_mem_slots_t *s);
size_t coli_mem_slots_bytes(const coli_mem_slots_t *s);

#endif
