/*
 * ptx/gpu.c — one CUDA device as coli uses it: a context, the embedded PTX
 * modules with their kernel handles, two streams (compute; copy, for the
 * staging slots of streamed slabs, ordered by per-slot events), a ring of
 * mapped page-locked memory for large GEMV job tables, the host regions
 * registered with it, and a few events for profiling.
 *
 * Nothing on the compute stream uses the copy engine while the copy stream
 * may be busy with slabs (it would queue behind them), and no asynchronous
 * copy reads pageable memory (CUDA makes that wait for the stream to drain):
 *   - GEMV job tables of up to COLI_GPU_INL_JOBS jobs ride in the launch's
 *     parameters; larger ones are read in place from the mapped ring, whose
 *     segments are reused only after an event says the stream left them;
 *   - uploads of up to PULL_MAX bytes from a registered region are pulled
 *     by a kernel (coli_pull) reading the mapped host pages; downloads of up
 *     to PUSH_MAX bytes into one are written by the same kernel.
 * Kernel launches go through coli_gpu_launch with the argument-pointer array.
 * A build without nvcc compiles ptx/gpu_none.c's stubs in place of the rest.
 *
 * On sm_90+ the compute_90 build of the modules is loaded and kernels are
 * launched with programmatic stream serialization (cuLaunchKernelEx): each
 * may be scheduled while the one before it drains, and waits in pdl_entry()
 * (ptx/pdl.cuh) until that one's writes are visible. COLI_PDL=0
 * (coli_gpu_plain_launches) turns the attribute off, same modules, for A/B;
 * older drivers and GPUs launch plainly.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptx/ptx.h"
#include "ptx/ptx_internal.h"

#ifdef COLI_HAVE_PTX
static void unload_modules(coli_gpu_t *g)
{
	CUmodule *m[] = {&g->mod, &g->mod_dense, &g->mod_attn, &g->mod_gemm};

	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		if (*m[i])
			g->cu->ModuleUnload(*m[i]);
		*m[i] = NULL;
	}
}

/* The four modules of one build (sm90: the compute_90 one). */
static CUresult load_build(coli_gpu_t *g, int sm90, char *elog)
{
	static char info[JIT_LOG_SZ];
	int opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
	              CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[] = {info, (void *)(uintptr_t)JIT_LOG_SZ, elog, (void *)(uintptr_t)JIT_LOG_SZ};
	CUresult r;

	/* injected (COLI_GPU_FAIL_JIT_*): PTX the JIT refuses, with its own log */
	static const char broken[] = ".version 99.9\n.target sm_90\n.address_size 64\n";
	const int fail = g->open_flags & (sm90 ? COLI_GPU_FAIL_JIT_90 | COLI_GPU_FAIL_JIT_ALL
	                                       : COLI_GPU_FAIL_JIT_ALL);

	r = g->cu->ModuleLoadDataEx(&g->mod,
	                            fail   ? broken
	                            : sm90 ? coli_ptx_kernels_90
	                                   : coli_ptx_kernels,
	                            4, opts, vals);
	if (r == CUDA_SUCCESS)
		r = g->cu->ModuleLoadDataEx(
		    &g->mod_dense, sm90 ? coli_ptx_dense_90 : coli_ptx_dense, 4, opts, vals);
	if (r == CUDA_SUCCESS)
		r = g->cu->ModuleLoadDataEx(
		    &g->mod_attn, sm90 ? coli_ptx_attention_90 : coli_ptx_attention, 4, opts, vals);
	if (r == CUDA_SUCCESS)
		r = g->cu->ModuleLoadDataEx(&g->mod_gemm, sm90 ? coli_ptx_gemm_90 : coli_ptx_gemm,
		                            4, opts, vals);
	if (r != CUDA_SUCCESS)
		unload_modules(g);
	return r;
}

/* The compute_90 build on sm_90+; if its JIT fails, the compute_80 one with
 * plain launches (said once); if that fails too, the error and its log. */
static int load_module(coli_gpu_t *g, char *err, size_t errlen)
{
	static char elog[JIT_LOG_SZ];
	CUresult r = CUDA_ERROR_NOT_READY;

	if (g->cc_major >= 9) {
		r = load_build(g, 1, elog);
		if (r != CUDA_SUCCESS) {
			fprintf(stderr,
			        "coli: %s: the compute_90 PTX did not load (%.200s); using the "
			        "compute_80 build without programmatic dependent launch\n",
			        g->name, elog);
			g->pdl = 0;
		}
	}
	if (r != CUDA_SUCCESS)
		r = load_build(g, 0, elog);
	if (r != CUDA_SUCCESS) {
		snprintf(err, errlen, "loading the embedded PTX failed; JIT log: %s", elog);
		return coli_cu_check(r, "cuModuleLoadDataEx");
	}
	return 0;
}

static int get_functions(coli_gpu_t *g)
{
	CUresult r;

	CK(g->cu->ModuleGetFunction(&g->f_gemv[COLI_DTYPE_Q8_0], g->mod, "coli_gemv_q8_0"),
	   "cuModuleGetFunction(coli_gemv_q8_0)");
	CK(g->cu->ModuleGetFunction(&g->f_gemv_inl[COLI_DTYPE_Q8_0], g->mod, "coli_gemv_q8_0_inl"),
	   "cuModuleGetFunction(coli_gemv_q8_0_inl)");
	CK(g->cu->ModuleGetFunction(&g->f_gemv[COLI_DTYPE_Q4_0], g->mod, "coli_gemv_q4_0"),
	   "cuModuleGetFunction(coli_gemv_q4_0)");
	CK(g->cu->ModuleGetFunction(&g->f_gemv_inl[COLI_DTYPE_Q4_0], g->mod, "coli_gemv_q4_0_inl"),
	   "cuModuleGetFunction(coli_gemv_q4_0_inl)");
	CK(g->cu->ModuleGetFunction(&g->f_gemv[COLI_DTYPE_BF16], g->mod, "coli_gemv_bf16"),
	   "cuModuleGetFunction(coli_gemv_bf16)");
	CK(g->cu->ModuleGetFunction(&g->f_gemv_inl[COLI_DTYPE_BF16], g->mod, "coli_gemv_bf16_inl"),
	   "cuModuleGetFunction(coli_gemv_bf16_inl)");
	CK(g->cu->ModuleGetFunction(&g->f_gemv[COLI_DTYPE_F32], g->mod, "coli_gemv_f32"),
	   "cuModuleGetFunction(coli_gemv_f32)");
	CK(g->cu->ModuleGetFunction(&g->f_gemv_inl[COLI_DTYPE_F32], g->mod, "coli_gemv_f32_inl"),
	   "cuModuleGetFunction(coli_gemv_f32_inl)");
	for (int i = 0; i < 6; i++) { /* coli_gemm_<dtype>[_inl] */
		static const enum coli_dtype gt[3] = {COLI_DTYPE_Q8_0, COLI_DTYPE_Q4_0,
		                                      COLI_DTYPE_BF16};
		const enum coli_dtype dt = gt[i / 2];
		const int q4 = dt == COLI_DTYPE_Q4_0;
		CUfunction *f = i % 2 ? &g->f_gemm_inl[dt] : &g->f_gemm[dt];
		char name[40];

		snprintf(name, sizeof(name), "coli_gemm_%s%s", coli_dtype_name(dt),
		         i % 2 ? "_inl" : "");
		CK(g->cu->ModuleGetFunction(f, g->mod_gemm, name), name);
		if (dt == COLI_DTYPE_BF16)
			continue;
		/* q8/q4 tiles take their shared memory dynamically, past the
		 * static 48 KiB; a GPU that refuses the wide tile's (sm_86/89
		 * allow 99 KB a block) runs long runs on the 64 x 32 tile */
		r = g->cu->FuncSetAttribute(*f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
		                            COLI_GPU_GEMM_SMEM_Q(q4, 0));
		if (r != CUDA_SUCCESS) {
			const int s1 = COLI_GPU_GEMM_SMEM_Q(q4, 1),
			          s2 = COLI_GPU_GEMM_SMEM_Q(q4, 2);

			g->gemm_wide_no = 1;
			r = g->cu->FuncSetAttribute(
			    *f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, s1 > s2 ? s1 : s2);
		}
		CK(r, name);
	}
	CK(g->cu->ModuleGetFunction(&g->f_silu, g->mod, "coli_silu_mul"),
	   "cuModuleGetFunction(coli_silu_mul)");
	CK(g->cu->ModuleGetFunction(&g->f_actq, g->mod, "coli_act_quantize"),
	   "cuModuleGetFunction(coli_act_quantize)");
	CK(g->cu->ModuleGetFunction(&g->f_siluq, g->mod, "coli_silu_mul_q"),
	   "cuModuleGetFunction(coli_silu_mul_q)");
	CK(g->cu->ModuleGetFunction(&g->f_pull, g->mod, "coli_pull"),
	   "cuModuleGetFunction(coli_pull)");
	return coli_gpu_dense_functions(g);
}
#endif

int coli_gpu_launch(struct coli_gpu *g, CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                    unsigned bx, unsigned shmem, void **args, const char *what)
{
#ifdef COLI_HAVE_PTX
	CUresult r;

	CUR(g);
	if (g->pdl) {
		CUlaunchAttribute at;
		CUlaunchConfig cfg = {gx, gy, gz, bx, 1, 1, shmem, g->stream, &at, 1};

		memset(&at, 0, sizeof(at));
		at.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
		at.value.i = 1;
		r = g->cu->LaunchKernelEx(&cfg, f, args, NULL);
		if (r != CUDA_ERROR_INVALID_VALUE && r != CUDA_ERROR_NOT_SUPPORTED) {
			CK(r, what);
			return 0;
		}
		/* the driver refuses the attribute: plain launches from now on */
		fprintf(stderr,
		        "coli: %s: programmatic dependent launch refused (%s); launching "
		        "plainly\n",
		        g->name, what);
		g->pdl = 0;
	}
	CK(g->cu->LaunchKernel(f, gx, gy, gz, bx, 1, 1, shmem, g->stream, args, NULL), what);
	return 0;
#else
	(void)g, (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)shmem, (void)args;
	(void)what;
	return -ENODEV;
#endif
}

int coli_gpu_open(int ordinal, unsigned flags, coli_gpu_t **out, char *err, size_t errlen)
{
#ifndef COLI_HAVE_PTX
	(void)ordinal, (void)flags;
	(void)out;
	snprintf(err, errlen, "built without nvcc: GPU path compiled out");
	return -ENODEV;
#else
	const struct coli_cu *cu;
	const char *why;
	coli_gpu_t *g;
	int rc, n = 0;

	if (coli_cu_load(&cu, &why)) {
		snprintf(err, errlen, "%s", why);
		return -ENODEV;
	}
	cu->DeviceGetCount(&n);
	if (ordinal < 0 || ordinal >= n) {
		snprintf(err, errlen, "no CUDA device %d (this machine has %d)", ordinal, n);
		return -ENODEV;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->cu = cu;
	g->open_flags = flags;
	rc = coli_cu_check(cu->DeviceGet(&g->dev, ordinal), "cuDeviceGet");
	if (!rc)
		rc = coli_cu_check(cu->DeviceGetName(g->name, sizeof(g->name), g->dev),
		                   "cuDeviceGetName");
	if (!rc)
		rc = coli_cu_check(
		    cu->DeviceGetAttribute(&g->cc_major,
		                           CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g->dev),
		    "cuDeviceGetAttribute");
	if (!rc) {
		g->pdl = g->cc_major >= 9 && cu->LaunchKernelEx;
		rc = coli_cu_check(cu->CtxCreate(&g->ctx, 0, g->dev), "cuCtxCreate");
	}
	if (!rc)
		rc = load_module(g, err, errlen);
	if (!rc)
		rc = get_functions(g);
	if (!rc)
		rc = coli_cu_check(cu->StreamCreate(&g->stream, CU_STREAM_NON_BLOCKING),
		                   "cuStreamCreate");
	if (!rc)
		rc = coli_cu_check(cu->StreamCreate(&g->copy, CU_STREAM_NON_BLOCKING),
		                   "cuStreamCreate");
	if (!rc)
		rc = coli_cu_check(
		    cu->MemHostAlloc((void **)&g->ring_host, JOB_RING, CU_MEMHOSTALLOC_DEVICEMAP),
		    "cuMemHostAlloc(job ring)");
	if (!rc)
		rc = coli_cu_check(cu->MemHostGetDevicePointer(&g->ring_dev, g->ring_host, 0),
		                   "cuMemHostGetDevicePointer(job ring)");
	/* the host word: without it (no stream waits) the engine queues nothing
	 * behind the host */
	if (!rc && cu->StreamWaitValue32 &&
	    cu->MemHostAlloc((void **)&g->host_word, 64, CU_MEMHOSTALLOC_DEVICEMAP) ==
	        CUDA_SUCCESS) {
		*g->host_word = 0;
		if (cu->MemHostGetDevicePointer(&g->host_word_dev, (void *)g->host_word, 0) !=
		    CUDA_SUCCESS) {
			cu->MemFreeHost((void *)g->host_word);
			g->host_word = NULL;
		}
	}
	for (int i = 0; !rc && i < JOB_SEGS; i++)
		rc = coli_cu_check(cu->EventCreate(&g->ring_left[i], CU_EVENT_DISABLE_TIMING),
		                   "cuEventCreate");
	if (!rc)
		rc = coli_cu_check(
		    cu->MemAlloc(&g->gjobs, sizeof(struct coli_gpu_gemm_job) * MAX_JOBS),
		    "cuMemAlloc(GEMM job table)");
	if (!rc) {
		g->gjobs_host = malloc(sizeof(struct coli_gpu_gemm_job) * MAX_JOBS);
		rc = g->gjobs_host ? 0 : -ENOMEM;
	}
	for (int i = 0; !rc && i < N_MARKS; i++)
		rc =
		    coli_cu_check(cu->EventCreate(&g->marks[i], CU_EVENT_DEFAULT), "cuEventCreate");
	if (!rc)
		rc = coli_cu_check(cu->EventCreate(&g->point, CU_EVENT_DISABLE_TIMING),
		                   "cuEventCreate");
	if (rc) {
		if (!err[0])
			snprintf(err, errlen, "CUDA device %d: initialisation failed", ordinal);
		coli_gpu_close(g);
		return rc;
	}
	*out = g;
	return 0;
#endif
}

void coli_gpu_close(coli_gpu_t *g)
{
	if (!g)
		return;
#ifdef COLI_HAVE_PTX
	if (g->ctx) {
		g->cu->CtxSetCurrent(g->ctx);
		for (int i = 0; i < N_MARKS; i++)
			if (g->marks[i])
				g->cu->EventDestroy(g->marks[i]);
		if (g->point)
			g->cu->EventDestroy(g->point);
		for (int i = 0; i < JOB_SEGS; i++)
			if (g->ring_left[i])
				g->cu->EventDestroy(g->ring_left[i]);
		if (g->ring_host)
			g->cu->MemFreeHost(g->ring_host);
		if (g->host_word)
			g->cu->MemFreeHost((void *)g->host_word);
		for (int i = 0; i < g->n_stage; i++) {
			if (g->st_full[i])
				g->cu->EventDestroy(g->st_full[i]);
			if (g->st_free[i])
				g->cu->EventDestroy(g->st_free[i]);
		}
		free(g->st_full), free(g->st_free);
		if (g->copy)
			g->cu->StreamDestroy(g->copy);
		if (g->gjobs)
			g->cu->MemFree(g->gjobs);
		coli_gpu_dense_release(g);
		if (g->stream)
			g->cu->StreamDestroy(g->stream);
		unload_modules(g);
		g->cu->CtxDestroy(g->ctx);
	}
	free(g->gjobs_host);
#endif
	free(g);
}

const char *coli_gpu_name(const coli_gpu_t *g)
{
	return g->name;
}

void coli_gpu_plain_launches(coli_gpu_t *g)
{
	g->pdl = 0;
}

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
	CK(g->cu->MemsetD8(dptr, v, n), "cuMemsetD8");
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

static int pull(coli_gpu_t *g, CUdeviceptr d, CUdeviceptr s, size_t n)
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
		return pull(g, dst, s, n);
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
		return pull(g, d, src, n);
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

int coli_gpu_sync(coli_gpu_t *g)
{
	CUR(g);
	CK(g->cu->StreamSynchronize(g->stream), "cuStreamSynchronize");
	return 0;
}

/* Graphs: what the compute stream is given between capture_begin and
 * capture_end is recorded, not run (relaxed mode: other threads may use the
 * driver meanwhile), and instantiated into one executable graph that
 * graph_launch replays with the parameters it was captured with. */
int coli_gpu_capture_begin(coli_gpu_t *g)
{
	if (!g->cu->have_graphs)
		return -ENOTSUP;
	CUR(g);
	CK(g->cu->StreamBeginCapture(g->stream, CU_STREAM_CAPTURE_MODE_RELAXED),
	   "cuStreamBeginCapture");
	g->capturing = 1;
	return 0;
}

int coli_gpu_capture_end(coli_gpu_t *g, uint64_t *graph)
{
	CUgraph gr = NULL;
	CUgraphExec ex = NULL;
	CUresult r;

	*graph = 0;
	CUR(g);
	g->capturing = 0;
	r = g->cu->StreamEndCapture(g->stream, &gr);
	if (r == CUDA_SUCCESS && gr)
		r = g->cu->GraphInstantiate(&ex, gr, 0);
	if (gr)
		g->cu->GraphDestroy(gr);
	CK(r, "cuStreamEndCapture / cuGraphInstantiate");
	*graph = (uint64_t)(uintptr_t)ex;
	return 0;
}

int coli_gpu_graph_launch(coli_gpu_t *g, uint64_t graph)
{
	CUR(g);
	CK(g->cu->GraphLaunch((CUgraphExec)(uintptr_t)graph, g->stream), "cuGraphLaunch");
	return 0;
}

void coli_gpu_graph_free(coli_gpu_t *g, uint64_t graph)
{
	if (graph && g->cu->CtxSetCurrent(g->ctx) == CUDA_SUCCESS)
		g->cu->GraphExecDestroy((CUgraphExec)(uintptr_t)graph);
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
	size_t at = g->ring_off;

	if (bytes > seg)
		return -E2BIG;
	CUR(g);
	if (at % seg + bytes > seg) { /* leave this segment for the next one */
		size_t next = (at / seg + 1) % JOB_SEGS;

		CK(g->cu->EventRecord(g->ring_left[at / seg], g->stream), "cuEventRecord");
		CK(g->cu->EventSynchronize(g->ring_left[next]), "cuEventSynchronize");
		at = next * seg;
	}
	memcpy(g->ring_host + at, jobs, bytes);
	*dptr = g->ring_dev + at;
	g->ring_off = at + ((bytes + 255) & ~(size_t)255);
	return 0;
}

int coli_gpu_gemv(coli_gpu_t *g, enum coli_dtype dtype, const struct coli_gpu_gemv_job *jobs,
                  int n_jobs)
{
	CUdeviceptr table;
	CUfunction f;
	int max_rows = 0;
	void *args[1];

	if ((unsigned)dtype >= sizeof(g->f_gemv) / sizeof(g->f_gemv[0]) || !g->f_gemv[dtype])
		return -ENOTSUP;
	if (n_jobs <= 0 || n_jobs > MAX_JOBS)
		return -EINVAL;
	f = g->f_gemv[dtype];
	for (int i = 0; i < n_jobs; i++) {
		if (jobs[i].S < 1 || jobs[i].S > COLI_GPU_MAX_S || jobs[i].K % 32)
			return -EINVAL;
		max_rows = jobs[i].rows > max_rows ? jobs[i].rows : max_rows;
	}
	if (n_jobs <= COLI_GPU_INL_JOBS) { /* small: the table rides in the parameters */
		struct coli_gpu_gemv_inline inl;

		memset(&inl, 0, sizeof(inl));
		memcpy(inl.j, jobs, sizeof(*jobs) * n_jobs);
		args[0] = &inl;
		return coli_gpu_launch(g, g->f_gemv_inl[dtype],
		                       (unsigned)(max_rows + COLI_GPU_GEMV_ROWS - 1) /
		                           COLI_GPU_GEMV_ROWS,
		                       (unsigned)n_jobs, 1, 256, 0, args, "cuLaunchKernel(gemv)");
	}
	{
		uint64_t t;
		int rc = coli_gpu_job_table(g, jobs, sizeof(*jobs) * n_jobs, &t);

		if (rc)
			return rc;
		table = t;
	}
	args[0] = &table;
	return coli_gpu_launch(g, f,
	                       (unsigned)(max_rows + COLI_GPU_GEMV_ROWS - 1) / COLI_GPU_GEMV_ROWS,
	                       (unsigned)n_jobs, 1, 256, 0, args, "cuLaunchKernel(gemv)");
}

int coli_gpu_gemv_table(coli_gpu_t *g, enum coli_dtype dtype, uint64_t table, int n_jobs,
                        int max_rows)
{
	CUdeviceptr t = table;
	void *args[] = {&t};

	if ((unsigned)dtype >= sizeof(g->f_gemv) / sizeof(g->f_gemv[0]) || !g->f_gemv[dtype])
		return -ENOTSUP;
	if (n_jobs <= 0 || n_jobs > 65535 || max_rows <= 0)
		return -EINVAL;
	return coli_gpu_launch(g, g->f_gemv[dtype],
	                       (unsigned)(max_rows + COLI_GPU_GEMV_ROWS - 1) / COLI_GPU_GEMV_ROWS,
	                       (unsigned)n_jobs, 1, 256, 0, args, "cuLaunchKernel(gemv)");
}

/* The q8/q4 tile of a run of S tokens: the smallest that holds it (on an
 * H200, qwen3-30b experts: 128 x 16 0.42 ms a layer at 2-16 tokens where
 * 64 x 32 takes 0.54-0.55 and 64 x 64 0.75-0.77; 64 x 32 0.58 at 32 tokens
 * where the others take 0.80; 64 x 64 1.3x faster than 64 x 32 at 128).
 * coli_gpu_gemm_tile forces one (tests, the bench). */
static int quant_tile(const coli_gpu_t *g, int S)
{
	int t = 0;

	if (g->gemm_bn)
		S = g->gemm_bn;
	while (t < COLI_GPU_GEMM_TILES_Q - 1 && S <= COLI_GPU_GEMM_TILE_TOKENS(t + 1))
		t++;
	return t == 0 && g->gemm_wide_no ? 1 : t;
}

/* One launch: one CTA per tile of every job, numbered job after job (tile0),
 * so a CTA finds its job by binary search over the table. bf16 tiles are
 * COLI_GPU_GEMM_ROWS_BF16 x _TOKENS; a q8/q4 job has its own (quant_tile),
 * the wide ones first (their CTAs take longest). */
int coli_gpu_gemm(coli_gpu_t *g, enum coli_dtype dtype, const struct coli_gpu_gemm_job *jobs,
                  int n_jobs)
{
	const int quant = dtype == COLI_DTYPE_Q8_0 || dtype == COLI_DTYPE_Q4_0;
	const unsigned threads = quant ? COLI_GPU_GEMM_THREADS_Q : COLI_GPU_GEMM_THREADS_BF16;
	int n[COLI_GPU_GEMM_TILES_Q] = {0}, at[COLI_GPU_GEMM_TILES_Q];
	unsigned smem = 0;
	long tiles = 0;
	void *args[2];

	if ((unsigned)dtype >= sizeof(g->f_gemm) / sizeof(g->f_gemm[0]) || !g->f_gemm[dtype])
		return -ENOTSUP;
	if (n_jobs <= 0 || n_jobs > MAX_JOBS)
		return -EINVAL;
	for (int i = 0; i < n_jobs; i++) {
		const struct coli_gpu_gemm_job *j = &jobs[i];

		if (j->S < 1 || j->rows < 1 || j->K < 32 || j->K % 32 || j->ldy < j->rows)
			return -EINVAL;
		n[quant ? quant_tile(g, j->S) : 0]++;
	}
	for (int t = 0, a = 0; t < COLI_GPU_GEMM_TILES_Q; t++) { /* wide first */
		const unsigned st = quant ? COLI_GPU_GEMM_SMEM_Q(dtype == COLI_DTYPE_Q4_0, t) : 0;

		at[t] = a, a += n[t];
		if (n[t] && st > smem)
			smem = st;
	}
	for (int i = 0; i < n_jobs; i++) {
		const int t = quant ? quant_tile(g, jobs[i].S) : 0;

		g->gjobs_host[at[t]] = jobs[i];
		g->gjobs_host[at[t]++].tile = t;
	}
	for (int i = 0; i < n_jobs; i++) {
		struct coli_gpu_gemm_job *j = &g->gjobs_host[i];
		const int bm = quant ? COLI_GPU_GEMM_TILE_ROWS(j->tile) : COLI_GPU_GEMM_ROWS_BF16;
		const int bn = quant ? COLI_GPU_GEMM_TILE_TOKENS(j->tile) : COLI_GPU_GEMM_TOKENS;

		j->tile0 = (int)tiles;
		tiles += (long)((j->rows + bm - 1) / bm) * ((j->S + bn - 1) / bn);
		if (tiles > 0x7fffffffL)
			return -EINVAL;
	}
	CUR(g);
	if (n_jobs <= COLI_GPU_INL_JOBS) { /* small: the table rides in the parameters */
		struct coli_gpu_gemm_inline inl;

		memset(&inl, 0, sizeof(inl));
		memcpy(inl.j, g->gjobs_host, sizeof(*jobs) * n_jobs);
		args[0] = &inl;
		args[1] = &n_jobs;
		return coli_gpu_launch(g, g->f_gemm_inl[dtype], (unsigned)tiles, 1, 1, threads,
		                       smem, args, "cuLaunchKernel(gemm)");
	}
	/* a long table: every CTA binary-searches it, so it goes to device
	 * memory, pulled by the SMs from the mapped job ring (coli_pull, after
	 * the previous GEMM launch has read the last one: stream order and
	 * pdl_entry). Neither a copy from pageable memory (the host would wait
	 * for the stream to drain) nor one on the copy engine (behind the
	 * staging copies) */
	{
		uint64_t table;
		int rc = coli_gpu_job_table(g, g->gjobs_host, sizeof(*jobs) * n_jobs, &table);

		rc = rc ? rc : pull(g, g->gjobs, table, sizeof(*jobs) * n_jobs);
		if (rc)
			return rc;
	}
	args[0] = &g->gjobs;
	args[1] = &n_jobs;
	return coli_gpu_launch(g, g->f_gemm[dtype], (unsigned)tiles, 1, 1, threads, smem, args,
	                       "cuLaunchKernel(gemm)");
}

void coli_gpu_gemm_tile(coli_gpu_t *g, int tokens)
{
	g->gemm_bn = tokens;
}

int coli_gpu_silu_mul(coli_gpu_t *g, uint64_t gate, uint64_t up, uint64_t h, int n)
{
	CUdeviceptr a = gate, b = up, c = h;
	void *args[] = {&a, &b, &c, &n};

	return coli_gpu_launch(g, g->f_silu, (unsigned)(n + 255) / 256, 1, 1, 256, 0, args,
	                       "cuLaunchKernel(silu_mul)");
}

int coli_gpu_silu_mul_q(coli_gpu_t *g, uint64_t gate, uint64_t up, uint64_t h, uint64_t q,
                        uint64_t d, uint64_t qsum, int n_blocks)
{
	CUdeviceptr a = gate, b = up, c = h, e = q, f = d, s = qsum;
	void *args[] = {&a, &b, &c, &e, &f, &s, &n_blocks};

	return coli_gpu_launch(g, g->f_siluq, (unsigned)(n_blocks + 7) / 8, 1, 1, 256, 0, args,
	                       "cuLaunchKernel(silu_mul_q)");
}

int coli_gpu_act_quantize(coli_gpu_t *g, uint64_t x, uint64_t q, uint64_t d, uint64_t qsum,
                          int n_blocks)
{
	CUdeviceptr a = x, b = q, c = d, e = qsum;
	void *args[] = {&a, &b, &c, &e, &n_blocks};

	/* 8 warps per CTA, one warp per 32-block */
	return coli_gpu_launch(g, g->f_actq, (unsigned)(n_blocks + 7) / 8, 1, 1, 256, 0, args,
	                       "cuLaunchKernel(act_quantize)");
}

/* ---- staging slots: two streams ordered by events ----
 * A streamed slab is copied on the copy stream while the compute stream runs
 * whatever it has queued (the dense part of a layer, another layer's
 * experts). Per slot, st_full says the copy landed (the compute stream waits
 * on it before the launches that read the slot) and st_free says the last
 * launch reading it is done (the copy stream waits on it before writing the
 * slot again). Neither wait blocks the host. */
int coli_gpu_stage_init(coli_gpu_t *g, int n)
{
	CUR(g);
	g->st_full = calloc((size_t)n, sizeof(CUevent));
	g->st_free = calloc((size_t)n, sizeof(CUevent));
	if (!g->st_full || !g->st_free)
		return -ENOMEM;
	for (int i = 0; i < n; i++, g->n_stage = i) {
		CK(g->cu->EventCreate(&g->st_full[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
		CK(g->cu->EventCreate(&g->st_free[i], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
	}
	g->n_stage = n;
	return 0;
}

int coli_gpu_stage_copy(coli_gpu_t *g, int slot, uint64_t dst, const void *src, size_t n)
{
	if (slot < 0 || slot >= g->n_stage)
		return -EINVAL;
	CUR(g);
	CK(g->cu->StreamWaitEvent(g->copy, g->st_free[slot], 0), "cuStreamWaitEvent");
	CK(g->cu->MemcpyHtoDAsync(dst, src, n, g->copy), "cuMemcpyHtoDAsync(stage)");
	CK(g->cu->EventRecord(g->st_full[slot], g->copy), "cuEventRecord");
	return 0;
}

int coli_gpu_stage_use(coli_gpu_t *g, int slot)
{
	if (slot < 0 || slot >= g->n_stage)
		return -EINVAL;
	CUR(g);
	CK(g->cu->StreamWaitEvent(g->stream, g->st_full[slot], 0), "cuStreamWaitEvent");
	return 0;
}

int coli_gpu_stage_fence(coli_gpu_t *g, int slot)
{
	if (slot < 0 || slot >= g->n_stage)
		return -EINVAL;
	CUR(g);
	CK(g->cu->EventRecord(g->st_full[slot], g->copy), "cuEventRecord");
	return 0;
}

int coli_gpu_stage_done(coli_gpu_t *g, int slot)
{
	if (slot < 0 || slot >= g->n_stage)
		return -EINVAL;
	CUR(g);
	CK(g->cu->EventRecord(g->st_free[slot], g->stream), "cuEventRecord");
	return 0;
}

int coli_gpu_stage_landed(coli_gpu_t *g, int slot)
{
	CUresult r;

	if (slot < 0 || slot >= g->n_stage)
		return -EINVAL;
	CUR(g);
	r = g->cu->EventQuery(g->st_full[slot]);
	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	CK(r, "cuEventQuery");
	return 1;
}

int coli_gpu_mark(coli_gpu_t *g, int slot)
{
	if (slot < 0 || slot >= N_MARKS)
		return -EINVAL;
	CUR(g);
	CK(g->cu->EventRecord(g->marks[slot], g->stream), "cuEventRecord");
	return 0;
}

/* The host's wait point: inside a capture an event record node of the graph
 * (each replay records it), else a plain record. */
int coli_gpu_point(coli_gpu_t *g)
{
	CUR(g);
	if (g->capturing)
		CK(g->cu->EventRecordWithFlags(g->point, g->stream, CU_EVENT_RECORD_EXTERNAL),
		   "cuEventRecordWithFlags");
	else
		CK(g->cu->EventRecord(g->point, g->stream), "cuEventRecord");
	return 0;
}

int coli_gpu_point_wait(coli_gpu_t *g)
{
	CUR(g);
	CK(g->cu->EventSynchronize(g->point), "cuEventSynchronize");
	return 0;
}

/* The compute stream waits until the host word equals seq (equality: the
 * word wraps after 2^32 signals, and a wait never has more than one signal
 * outstanding). */
int coli_gpu_host_wait(coli_gpu_t *g, uint32_t seq)
{
	if (!g->host_word)
		return -ENOTSUP;
	CUR(g);
	CK(g->cu->StreamWaitValue32(g->stream, g->host_word_dev, seq, CU_STREAM_WAIT_VALUE_EQ),
	   "cuStreamWaitValue32");
	return 0;
}

/* A store the device sees over the bus; release: what the host wrote before
 * (rows the ops behind the wait read) is visible first (x86 keeps stores in
 * order, the fence keeps the compiler from moving them) */
void coli_gpu_host_signal(coli_gpu_t *g, uint32_t seq)
{
	if (g->host_word)
		__atomic_store_n(g->host_word, seq, __ATOMIC_RELEASE);
}

int coli_gpu_has_host_wait(const coli_gpu_t *g)
{
	return g->host_word != NULL;
}

int coli_gpu_elapsed_ms(coli_gpu_t *g, int from_slot, int to_slot, float *ms)
{
	if (from_slot < 0 || from_slot >= N_MARKS || to_slot < 0 || to_slot >= N_MARKS)
		return -EINVAL;
	CUR(g);
	CK(g->cu->EventSynchronize(g->marks[to_slot]), "cuEventSynchronize");
	CK(g->cu->EventElapsedTime(ms, g->marks[from_slot], g->marks[to_slot]),
	   "cuEventElapsedTime");
	return 0;
}

#endif
