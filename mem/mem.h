/*
 * mem/mem.h — host memory. Every large allocation of the engine goes through
 * here and names its NUMA node, so placement, huge pages and (later) pinning
 * for io_uring fixed buffers and cuMemHostRegister happen in one place.
 */
#ifndef COLI_MEM_H
#define COLI_MEM_H

#include <stddef.h>

#define COLI_MEM_NODE_ANY (-1) /* no binding: first touch decides */

/* Anonymous memory of `bytes`, 4 KiB aligned (2 MiB aligned and THP-advised
 * when >= 2 MiB), zero-filled, bound to `node` when node >= 0 and libnuma says
 * the node exists. Returns NULL on failure (errno set). */
void *coli_mem_alloc(size_t bytes, int node);
void coli_mem_free(void *p, size_t bytes);

/* Bytes currently held through coli_mem_alloc (for budgets and reports). */
size_t coli_mem_in_use(void);

#endif
