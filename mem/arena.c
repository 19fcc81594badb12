/*
 * mem/arena.c — large host allocations and the registry of pinned regions.
 *
 * An allocation is an anonymous private mapping. At 2 MiB and more it is
 * placed on a 2 MiB boundary (map 2 MiB extra, unmap the head and tail) and
 * advised MADV_HUGEPAGE, so transparent huge pages back it where the kernel
 * allows (THP "madvise" or "always"); the slot arena's TLB reach is what this
 * buys. NUMA policy: mbind MPOL_PREFERRED to one node, or MPOL_INTERLEAVE over
 * all, before first touch.
 *
 * Registry: up to REG_MAX regions {p, bytes, node} and up to HOOK_MAX hooks,
 * under one mutex (registration happens at engine open and close, never on
 * the token path). A hook sees every region, past and future.
 */
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "mem/mem.h"

#define HUGE_BYTES ((size_t)2 << 20)
#define REG_MAX    64
#define HOOK_MAX   4

static atomic_size_t g_in_use;
static atomic_int g_lock_warned;

static struct coli_mem_region g_regions[REG_MAX];
static int g_n_regions;
static struct {
	coli_mem_reg_hook fn;
	void *arg;
} g_hooks[HOOK_MAX];
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;

static void set_policy(void *p, size_t bytes, int node)
{
	unsigned long mask[16] = {0};
	const int bits = 8 * sizeof(unsigned long);

	if (numa_available() < 0)
		return;
	if (node == COLI_MEM_NODE_INTERLEAVE) {
		for (int n = 0; n <= numa_max_node() && n < 16 * bits; n++)
			mask[n / bits] |= 1UL << (n % bits);
		mbind(p, bytes, MPOL_INTERLEAVE, mask, sizeof(mask) * 8, 0);
	} else if (node >= 0 && node <= numa_max_node() && node < 16 * bits) {
		mask[node / bits] |= 1UL << (node % bits);
		/* Preferred, not strict: a full node spills rather than failing a load. */
		mbind(p, bytes, MPOL_PREFERRED, mask, sizeof(mask) * 8, 0);
	}
}

void *coli_mem_alloc(size_t bytes, int node)
{
	size_t len = bytes, extra = 0;
	char *p;

	if (!bytes) {
		errno = EINVAL;
		return NULL;
	}
	if (bytes >= HUGE_BYTES) {
		len = (bytes + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1);
		extra = HUGE_BYTES;
	}
	p = mmap(NULL, len + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (extra) {
		uintptr_t a = ((uintptr_t)p + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1);
		size_t head = a - (uintptr_t)p;

		if (head)
			munmap(p, head);
		if (extra - head)
			munmap((char *)a + len, extra - head);
		p = (char *)a;
		madvise(p, len, MADV_HUGEPAGE); /* advisory: fine if THP is off */
	}
	set_policy(p, len, node);
	atomic_fetch_add(&g_in_use, bytes);
	return p;
}

void coli_mem_free(void *p, size_t bytes)
{
	size_t orig = bytes;

	if (!p)
		return;
	if (bytes >= HUGE_BYTES)
		bytes = (bytes + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1);
	munmap(p, bytes);
	atomic_fetch_sub(&g_in_use, orig);
}

size_t coli_mem_in_use(void)
{
	return atomic_load(&g_in_use);
}

int coli_mem_lock(void *p, size_t bytes, const char *what)
{
	struct rlimit rl;

	if (!p || !bytes)
		return 0;
	if (!mlock(p, bytes))
		return 0;
	if (!atomic_exchange(&g_lock_warned, 1)) {
		int e = errno;

		getrlimit(RLIMIT_MEMLOCK, &rl);
		if (rl.rlim_cur == RLIM_INFINITY)
			fprintf(stderr,
			        "coli: mlock of %s (%.3g MB) refused (%s); it may be swapped out\n",
			        what, bytes / 1e6, e == EPERM ? "not permitted" : "no memory");
		else
			fprintf(stderr,
			        "coli: mlock of %s (%.3g MB) refused: RLIMIT_MEMLOCK is %.3g MB; "
			        "it may "
			        "be swapped out (raise 'ulimit -l' to pin it)\n",
			        what, bytes / 1e6, rl.rlim_cur / 1e6);
		errno = e;
	}
	return -errno;
}

int coli_mem_register(void *p, size_t bytes, int node)
{
	int rc = 0;

	pthread_mutex_lock(&g_reg_mu);
	if (g_n_regions == REG_MAX) {
		pthread_mutex_unlock(&g_reg_mu);
		return -ENOSPC;
	}
	g_regions[g_n_regions++] = (struct coli_mem_region){p, bytes, node};
	for (int i = 0; i < HOOK_MAX; i++)
		if (g_hooks[i].fn) {
			int r = g_hooks[i].fn(g_hooks[i].arg, p, bytes, 1);

			rc = rc ? rc : r;
		}
	pthread_mutex_unlock(&g_reg_mu);
	return rc;
}

void coli_mem_unregister(void *p)
{
	pthread_mutex_lock(&g_reg_mu);
	for (int i = 0; i < g_n_regions; i++) {
		if (g_regions[i].p != p)
			continue;
		for (int h = 0; h < HOOK_MAX; h++)
			if (g_hooks[h].fn)
				g_hooks[h].fn(g_hooks[h].arg, p, g_regions[i].bytes, 0);
		g_regions[i] = g_regions[--g_n_regions];
		break;
	}
	pthread_mutex_unlock(&g_reg_mu);
}

void *coli_mem_alloc_buffers(const size_t *sz, void **const *dst, int n, int node, size_t *bytes)
{
	size_t off = 0;
	char *p;

	for (int i = 0; i < n; i++)
		off += (sz[i] + 63) & ~(size_t)63;
	p = coli_mem_alloc(off, node);
	if (!p)
		return NULL;
	coli_mem_register(p, off, node); /* a hook's failure leaves it pageable, still usable */
	*bytes = off;
	off = 0;
	for (int i = 0; i < n; i++) {
		*dst[i] = p + off;
		off += (sz[i] + 63) & ~(size_t)63;
	}
	return p;
}

void coli_mem_free_buffers(void *p, size_t bytes)
{
	if (!p)
		return;
	coli_mem_unregister(p);
	coli_mem_free(p, bytes);
}

int coli_mem_register_hook(coli_mem_reg_hook fn, void *arg)
{
	int rc = -ENOSPC;

	pthread_mutex_lock(&g_reg_mu);
	for (int i = 0; i < HOOK_MAX; i++) {
		if (g_hooks[i].fn)
			continue;
		g_hooks[i].fn = fn;
		g_hooks[i].arg = arg;
		rc = 0;
		for (int r = 0; r < g_n_regions; r++) {
			int x = fn(arg, g_regions[r].p, g_regions[r].bytes, 1);

			rc = rc ? rc : x;
		}
		break;
	}
	pthread_mutex_unlock(&g_reg_mu);
	return rc;
}

void coli_mem_unregister_hook(coli_mem_reg_hook fn, void *arg)
{
	pthread_mutex_lock(&g_reg_mu);
	for (int i = 0; i < HOOK_MAX; i++)
		if (g_hooks[i].fn == fn && g_hooks[i].arg == arg) {
			for (int r = 0; r < g_n_regions; r++)
				fn(arg, g_regions[r].p, g_regions[r].bytes, 0);
			g_hooks[i].fn = NULL;
		}
	pthread_mutex_unlock(&g_reg_mu);
}

int coli_mem_regions(struct coli_mem_region *out, int max)
{
	int n;

	pthread_mutex_lock(&g_reg_mu);
	n = g_n_regions;
	for (int i = 0; i < n && i < max; i++)
		out[i] = g_regions[i];
	pthread_mutex_unlock(&g_reg_mu);
	return n;
}
