/*
 * tests/mem/numa_pages.c — memory sits on the NUMA node it was placed on,
 * checked with move_pages' query form (the kernel's answer, not the
 * policy asked for). On a host of two nodes or more:
 *
 *   mem    for every node n, coli_mem_alloc and coli_mem_alloc_buffers
 *          (registered staging) bound to n and touched have every page on
 *          n; an interleaved allocation spreads over more than one node
 *   engine the demo fixture opened with --numa-bind auto (GPUs, if any:
 *          each device's host staging on the node it hangs off, the rest on
 *          the engine's node), a prompt forwarded: every registered region
 *          bound to a node (coli_mem_regions) has its touched pages there,
 *          and the engine's node is the one it reports (coli_engine_numa)
 *          and, with a GPU, the one CUDA's first device hangs off
 *
 * A host of one node skips: there is nothing to place.
 */
#include <numa.h>
#include <numaif.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dev/dev.h"
#include "core/fixture_util.h"
#include "mem/mem.h"

/* Pages of [p, p + bytes) on node `want` / elsewhere (not present: neither);
 * *other the first other node seen. Returns -1 when move_pages fails. */
static int count_pages(const void *p, size_t bytes, int want, long *on, long *off, int *other)
{
	enum { CHUNK = 512 }; /* pages a move_pages query */
	const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	void *pages[CHUNK];
	int status[CHUNK];
	uintptr_t a = (uintptr_t)p & ~(page - 1), end = (uintptr_t)p + bytes;

	while (a < end) {
		int n = 0;

		for (; n < CHUNK && a < end; n++, a += page)
			pages[n] = (void *)a;
		if (move_pages(0, (unsigned long)n, pages, NULL, status, 0))
			return -1;
		for (int i = 0; i < n; i++) {
			if (status[i] < 0) /* -ENOENT: never touched */
				continue;
			if (status[i] == want)
				(*on)++;
			else {
				(*off)++;
				*other = status[i];
			}
		}
	}
	return 0;
}

static int check_mem(int nodes)
{
	int fails = 0;

	for (int n = 0; n < nodes; n++) {
		const size_t big = 8u << 20, sz[2] = {3u << 20, 1u << 20};
		char *a = coli_mem_alloc(big, n), *b0, *b1;
		void **dst[2] = {(void **)&b0, (void **)&b1};
		size_t bb = 0;
		char *b = coli_mem_alloc_buffers(sz, dst, 2, n, &bb);
		long on = 0, off = 0;
		int other = -1;

		if (!a || !b) {
			printf("node %d: allocation failed\n", n);
			return 1;
		}
		memset(a, 1, big);
		memset(b, 1, bb);
		if (count_pages(a, big, n, &on, &off, &other) ||
		    count_pages(b, bb, n, &on, &off, &other)) {
			perror("move_pages");
			return 1;
		}
		printf("node %d: %ld pages there, %ld elsewhere\n", n, on, off);
		if (off || !on) {
			printf("  FAIL: bound to node %d, %ld pages on node %d\n", n, off, other);
			fails++;
		}
		coli_mem_free(a, big);
		coli_mem_free_buffers(b, bb);
	}
	{
		const size_t big = 16u << 20;
		char *a = coli_mem_alloc(big, COLI_MEM_NODE_INTERLEAVE);
		long on = 0, off = 0;
		int other = -1;

		if (!a)
			return fails + 1;
		memset(a, 1, big);
		if (count_pages(a, big, 0, &on, &off, &other))
			return fails + 1;
		printf("interleaved: %ld pages on node 0, %ld on others\n", on, off);
		if (!on || !off) {
			printf("  FAIL: interleaved memory on one node\n");
			fails++;
		}
		coli_mem_free(a, big);
	}
	return fails;
}

static int check_engine(void)
{
	struct coli_opts o;
	struct coli_mem_region r[64];
	coli_engine_t *e;
	char path[4096], err[512];
	const char *why = "";
	int nr, fails = 0, ids[16], node, checked = 0, gn, ord;
	float *logits;

	if (fx_convert("demo", COLI_DTYPE_Q8_0, fx_tmpdir(), path, sizeof(path)))
		return 1;
	coli_opts_init(&o, NULL, 0);
	snprintf(o.numa_bind, sizeof(o.numa_bind), "auto");
	o.threads = 2;
	if (coli_engine_open(path, &o, &e, err, sizeof(err))) {
		printf("open: %s\n", err);
		return 1;
	}
	node = coli_engine_numa(e, &why);
	printf("engine: numa-bind auto -> %d (%s)\n", node, why);
	/* with a GPU: the node of the one CUDA calls first (o.gpu: auto) */
	if ((gn = coli_dev_spec_node(o.gpu, &ord)) >= 0 && node != gn) {
		printf("FAIL: GPU %d hangs off node %d, the engine chose %d\n", ord, gn, node);
		fails++;
	}
	for (int i = 0; i < 16; i++)
		ids[i] = 100 + 37 * i;
	logits = malloc(sizeof(float) * 16 * 8192);
	if (!logits || coli_engine_forward(e, ids, 16, logits, 1)) {
		printf("forward failed\n");
		coli_engine_close(e);
		free(logits);
		return 1;
	}
	nr = coli_mem_regions(r, 64);
	for (int i = 0; i < nr && i < 64; i++) {
		long on = 0, off = 0;
		int other = -1;

		if (r[i].node < 0)
			continue;
		if (count_pages(r[i].p, r[i].bytes, r[i].node, &on, &off, &other)) {
			perror("move_pages");
			fails++;
			continue;
		}
		printf("region %d (%zu bytes): bound to node %d, %ld pages there, %ld elsewhere\n",
		       i, r[i].bytes, r[i].node, on, off);
		checked += on > 0;
		if (off) {
			printf("  FAIL: %ld pages on node %d\n", off, other);
			fails++;
		}
	}
	if (node >= 0 && !checked) {
		printf(
		    "FAIL: the engine is on node %d but no registered region holds a page there\n",
		    node);
		fails++;
	}
	coli_engine_close(e);
	free(logits);
	return fails;
}

int main(void)
{
	int nodes = coli_mem_numa_nodes(), fails;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (nodes < 2 || numa_available() < 0) {
		printf("one NUMA node here: nothing to place\n");
		return 77;
	}
	fails = check_mem(nodes);
	fails += check_engine();
	printf("%d checks failed\n", fails);
	return fails ? 1 : 0;
}
