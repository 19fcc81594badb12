/*
 * ptx/gpu_mem.c — a device's memory as coli uses it (ptx/gpu.c opens the
 * device): allocations, synchronous and stream-ordered copies (small ones
 * through a registered host region pulled or pushed by the SMs, coli_pull:
 * up to PULL_MAX bytes up, PUSH_MAX down, so the compute stream never queues
 * behind the copy engine's slabs), the host regions registered with the
 * context, and the mapped ring GEMV job tables travel through. The rules
 * these follow are in ptx/gpu.c's file-top comment.
 */
#include <errno.h>
#include <string.h>

#include "ptx/ptx.h"
#include "ptx/ptx_internal.h"

#ifdef COLI_HAVE_PTX
int coli_gpu_mem_info(coli_gpu_t *g, size_t *free_bytes, size_t *total_bytes)
{
	CUR(g);
	CK(g->cu->MemGetInfo(free_bytes, total_bytes), "cuMemGetInfo");
	return 0;
}

int coli_gpu_alloc(coli_gpu_t *g, size_t bytes, uint64_t *dptr)
{
	CUdeviceptr p;

	CUR(g);
	CK(g->cu->MemAlloc(&p, bytes), "cuMemAlloc");
	*dptr = p;
	return 0;
}

void coli_gpu_free(coli_gpu_t *g, uint64_t dptr)
{
	if (dptr && !g->cu->CtxSetCurrent(g->ctx))
		g->cu->MemFree(dptr);
}

int coli_gpu_memset(coli_gpu_t *g, uint64_t dptr, unsigned char v, size_t n)
{
	CUR(g);
	/* on the stream (non-blocking: the legacy stream's cuMemsetD8 would not
	 * order with it, and a copy or kernel queued after could run first) */
	CK(g->cu->MemsetD8Async(dptr, v, n, g->stream), "cuMemsetD8Async");
	CK(g->cu->StreamSynchronize(g->stream), "cuStreamSynchronize");
	return 0;
}

int coli_gpu_upload(coli_gpu_t *g, uint64_t dst, const void *src, size_t n)
{
	CUR(g);
	CK(g->cu->MemcpyHtoDAsync(dst, src, n, g->stream), "cuMemcpyHtoDAsync");
	CK(g->cu->StreamSynchronize(g->stream), "cuStreamSynchronize");
	return 0;
}

int coli_gpu_download(coli_gpu_t *g, void *dst, uint64_t src, size_t n)
{
	CUR(g);
	CK(g->cu->MemcpyDtoHAsync(dst, src, n, g->stream), "cuMemcpyDtoHAsync");
	CK(g->cu->StreamSynchronize(g->stream), "cuStreamSynchronize");
	return 0;
}

#define PULL_MAX ((size_t)4 << 20) /* larger uploads are the copy engine's */

/* The ranges of p copied by the SMs (coli_pull) in stream order:
 * device-mapped host memory to the device (small uploads) or the device to
 * mapped host memory (small downloads). The callers give each range's size
 * in bytes (% 4 == 0) in n4; it is made words here, as the kernel counts. */
static int pull_ranges(coli_gpu_t *g, struct coli_gpu_pulls *p)
{
	unsigned long long most = 0;
	unsigned blocks;
	void *args[] = {p};

	for (int r = 0; r < p->n; r++) {
		p->n4[r] /= 4;
		most = p->n4[r] > most ? p->n4[r] : most;
	}
	if (!most)
		return 0;
	blocks = (unsigned)((most + 255) / 256);
	blocks = blocks > 264 ? 264 : blocks;
	return coli_gpu_launch(g, g->f_pull, blocks, 1, 1, 256, 0, args, "cuLaunchKernel(pull)");
}

int coli_gpu_pull(coli_gpu_t *g, CUdeviceptr d, CUdeviceptr s, size_t n)
{
	struct coli_gpu_pulls p = {.dst = {d}, .src = {s}, .n4 = {n}, .n = 1};

	return pull_ranges(g, &p);
}

/* The device's address of host bytes [h, h + n) when a region this context
 * registered and mapped holds them all, else 0. */
uint64_t coli_gpu_mapped(const coli_gpu_t *g, const void *h, size_t n)
{
	const char *p = h;

	for (int i = 0; i < g->n_regs; i++)
		if (g->regs[i].d && p >= g->regs[i].p && p + n <= g->regs[i].p + g->regs[i].n)
			return g->regs[i].d + (CUdeviceptr)(p - g->regs[i].p);
	return 0;
}

/* Small uploads from registered memory are pulled by a kernel reading the
 * mapped host pages (coli_pull), so they do not wait behind the staging
 * copies queued on the copy engine; the rest go through cuMemcpyHtoDAsync. */
int coli_gpu_upload_async(coli_gpu_t *g, uint64_t dst, const void *src, size_t n)
{
	CUdeviceptr s;

	CUR(g);
	if (n <= PULL_MAX && n % 4 == 0 && dst % 4 == 0 && (uintptr_t)src % 4 == 0 &&
	    (s = coli_gpu_mapped(g, src, n)))
		return coli_gpu_pull(g, dst, s, n);
	CK(g->cu->MemcpyHtoDAsync(dst, src, n, g->stream), "cuMemcpyHtoDAsync");
	return 0;
}

/* Small downloads into registered memory are pushed by the same kernel
 * writing the mapped host pages: a copy-engine transfer costs the stream
 * 2.7-4.6 us between two kernels on the H200, a kernel 2.4-3.7 (a
 * host-planned decode layer downloads its routing, weights and normed rows);
 * the host reads them after synchronizing the stream, as it would a copy's. */
#define PUSH_MAX ((size_t)256 << 10)

int coli_gpu_download_async(coli_gpu_t *g, void *dst, uint64_t src, size_t n)
{
	CUdeviceptr d;

	CUR(g);
	if (n <= PUSH_MAX && n % 4 == 0 && src % 4 == 0 && (uintptr_t)dst % 4 == 0 &&
	    (d = coli_gpu_mapped(g, dst, n)))
		return coli_gpu_pull(g, d, src, n);
	CK(g->cu->MemcpyDtoHAsync(dst, src, n, g->stream), "cuMemcpyDtoHAsync");
	return 0;
}

/* n downloads as one: up to COLI_GPU_PULLS that coli_gpu_download_async
 * would push by kernel go in one coli_pull launch; otherwise each as
 * coli_gpu_download_async does it. */
int coli_gpu_download_many(coli_gpu_t *g, int n, void *const *dst, const uint64_t *src,
                           const size_t *bytes)
{
	struct coli_gpu_pulls p = {.n = n};
	CUdeviceptr d;
	int rc = 0;

	CUR(g);
	for (int i = 0; i < n && n <= COLI_GPU_PULLS; i++) {
		if (bytes[i] > PUSH_MAX || bytes[i] % 4 || src[i] % 4 || (uintptr_t)dst[i] % 4 ||
		    !(d = coli_gpu_mapped(g, dst[i], bytes[i])))
			break;
		p.dst[i] = d, p.src[i] = src[i], p.n4[i] = bytes[i];
		if (i == n - 1)
			return pull_ranges(g, &p);
	}
	for (int i = 0; i < n && !rc; i++)
		rc = coli_gpu_download_async(g, dst[i], src[i], bytes[i]);
	return rc;
}

/* Registration is PORTABLE: one context page-locks a region for all. A
 * region another context registered (another engine's, when mem/ offers every
 * region it knows to every device) is already usable and stays that one's to
 * release: it is not recorded here, and unregister leaves it alone. */
int coli_gpu_host_register(coli_gpu_t *g, void *p, size_t n)
{
	CUdeviceptr d = 0;
	CUresult r;

	if (g->n_regs == (int)(sizeof(g->regs) / sizeof(g->regs[0])))
		return -ENOSPC; /* left pageable: still correct, slower */
	CUR(g);
	r = g->cu->MemHostRegister(p, n,
	                           CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
	if (r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
		return 0;
	CK(r, "cuMemHostRegister");
	/* this context's now; mapped too: small uploads from it are pulled by a
	 * kernel (d = 0: the mapping query failed, they are copied) */
	if (g->cu->MemHostGetDevicePointer(&d, p, 0) != CUDA_SUCCESS)
		d = 0;
	g->regs[g->n_regs++] = (struct coli_gpu_reg){p, n, d};
	return 0;
}

void coli_gpu_host_unregister(coli_gpu_t *g, void *p)
{
	for (int i = 0; i < g->n_regs; i++)
		if (g->regs[i].p == p) {
			g->regs[i] = g->regs[--g->n_regs];
			if (!g->cu->CtxSetCurrent(g->ctx))
				g->cu->MemHostUnregister(p);
			return;
		}
}

/* A launch's job table lives in a ring of page-locked host memory that the
 * device maps; the kernel reads it in place. No copy: from pageable memory
 * cuMemcpyHtoDAsync first waits for the stream to drain (CUDA's rule for
 * pageable sources), and any H2D copy on the compute stream queues behind the
 * slab copies that keep the copy engine busy. Each table takes the next bytes
 * of the ring; entering a segment waits for the event recorded when the
 * stream last left it, so a table is never rewritten while a queued launch
 * may still read it. Returns the table's device address in *dptr. */
int coli_gpu_job_table(coli_gpu_t *g, const void *jobs, size_t bytes, uint64_t *dptr)
{
	const size_t seg = JOB_RING / JOB_SEGS;
	size_t cur = g->ring_seg, off = g->ring_off, at;

	if (bytes > seg)
		return -E2BIG;
	CUR(g);
	/* off may equal seg (the last table ended on the boundary): a table
	 * never starts in the next segment without that segment's wait */
	if (off + bytes > seg) {
		size_t next = (cur + 1) % JOB_SEGS;

		CK(g->cu->EventRecord(g->ring_left[cur], g->stream), "cuEventRecord");
		CK(g->cu->EventSynchronize(g->ring_left[next]), "cuEventSynchronize");
		cur = next;
		off = 0;
	}
	at = cur * seg + off;
	memcpy(g->ring_host + at, jobs, bytes);
	*dptr = g->ring_dev + at;
	g->ring_seg = cur;
	g->ring_off = off + ((bytes + 255) & ~(size_t)255);
	return 0;
}

#endif
