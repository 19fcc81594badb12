/*
 * tests/ptx/job_ring.c — the ring of page-locked memory launch job tables
 * travel through (ptx/gpu_mem.c coli_gpu_job_table): every table lies inside
 * the ring and inside one segment, and what the device reads at its address
 * is the table's bytes. The sizes walk the ring many times over and land
 * exactly on segment boundaries and on the ring's end: a table ending on a
 * boundary once made the next one start past the ring (a write out of
 * bounds, then cuEventRecord on a garbage event: colid's crash at 25% VRAM
 * with 8 clients, 2026-12-03). Skips (77) without a GPU.
 */
#include <errno.h>
#include <string.h>

#include "ptx_test.h" /* ptx/ptx.h first: ptx_internal.h takes its types */
#include "ptx/ptx_internal.h"

int main(void)
{
	const size_t seg = JOB_RING / JOB_SEGS;
	/* a whole segment; half and its remainder; 256-byte steps that sum to
	 * a segment; odd sizes that round up to 256; one byte */
	const size_t sizes[] = {seg, seg / 2, seg / 2, 3 * 256, seg - 3 * 256, 1000, 24, 1, seg};
	const int n_sizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
	unsigned char *src = xmalloc(seg), *back = xmalloc(seg);
	int rc = ptx_test_open(), fails = 0, calls = 0;

	if (rc)
		return rc;
	for (int pass = 0; pass < 3 * JOB_SEGS; pass++)
		for (int i = 0; i < n_sizes; i++) {
			const size_t n = sizes[i];
			uint64_t d = 0, at;

			for (size_t k = 0; k < n; k++)
				src[k] = (unsigned char)(rnd() >> 24);
			if (coli_gpu_job_table(g_gpu, src, n, &d)) {
				printf("table %d (%zu bytes): coli_gpu_job_table failed\n", calls,
				       n);
				return 1;
			}
			at = d - g_gpu->ring_dev;
			if (d < g_gpu->ring_dev || at + n > JOB_RING ||
			    at / seg != (at + n - 1) / seg) {
				printf(
				    "table %d (%zu bytes) at ring offset %llu: outside the ring or "
				    "across a segment boundary\n",
				    calls, n, (unsigned long long)at);
				fails++;
				break;
			}
			if (n <= 4096 || i == 0) { /* the device reads what was written */
				download(back, d, n);
				if (memcmp(back, src, n)) {
					printf(
					    "table %d (%zu bytes): the device read other bytes\n",
					    calls, n);
					fails++;
				}
			}
			calls++;
		}
	if (coli_gpu_job_table(g_gpu, src, seg + 1, &(uint64_t){0}) != -E2BIG) {
		printf("a table larger than a segment was not refused\n");
		fails++;
	}
	printf("%d tables through a ring of %d segments of %zu bytes: %s\n", calls, JOB_SEGS, seg,
	       fails ? "FAILED" : "ok");
	free(src);
	free(back);
	coli_gpu_close(g_gpu);
	return fails ? 1 : 0;
}
