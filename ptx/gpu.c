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
 * (ptx/common/pdl.cuh) until that one's writes are visible. COLI_PDL=0
 * (coli_gpu_plain_launches) turns the attribute off, same modules, for A/B;
 * older drivers and GPUs launch plainly.
 *
 * This file opens and closes the device, loads the modules and their kernel
 * handles, and launches (coli_gpu_launch). Its other parts: ptx/gpu_mem.c
 * (memory, copies, registered regions, the job-table ring), ptx/gpu_stream.c
 * (sync, graphs, staging slots, marks, wait points), ptx/expert/gpu_expert.c (the
 * routed experts' launch wrappers), ptx/dense/gpu_dense.c (the dense part's),
 * ptx/attn/gpu_attn.c (attention's).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem/mem.h"
#include "ptx/ptx.h"
#include "ptx/ptx_internal.h"

#ifdef COLI_HAVE_PTX
static void unload_modules(coli_gpu_t *g)
{
	CUmodule *m[] = {
	    &g->mod,      &g->mod_dense, &g->mod_route, &g->mod_attn,   &g->mod_attn_prefill,
	    &g->mod_gemm, &g->mod_kinds, &g->mod_mla,   &g->mod_kquant, &g->mod_kquant_gemm};

	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		if (*m[i])
			g->cu->ModuleUnload(*m[i]);
		*m[i] = NULL;
	}
}

/* The modules of one build (sm90: the compute_90 one). */
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
		r = g->cu->ModuleLoadDataEx(&g->mod_attn_prefill,
		                            sm90 ? coli_ptx_attn_prefill_90 : coli_ptx_attn_prefill,
		                            4, opts, vals);
	if (r == CUDA_SUCCESS)
		r = g->cu->ModuleLoadDataEx(&g->mod_gemm, sm90 ? coli_ptx_gemm_90 : coli_ptx_gemm,
		                            4, opts, vals);
	if (r == CUDA_SUCCESS)
		r = g->cu->ModuleLoadDataEx(
		    &g->mod_route, sm90 ? coli_ptx_route_90 : coli_ptx_route, 4, opts, vals);
	if (r == CUDA_SUCCESS)
		r = g->cu->ModuleLoadDataEx(
		    &g->mod_kinds, sm90 ? coli_ptx_kinds_90 : coli_ptx_kinds, 4, opts, vals);
	if (r == CUDA_SUCCESS)
		r = g->cu->ModuleLoadDataEx(&g->mod_mla, sm90 ? coli_ptx_mla_90 : coli_ptx_mla, 4,
		                            opts, vals);
	if (r == CUDA_SUCCESS)
		r = g->cu->ModuleLoadDataEx(
		    &g->mod_kquant, sm90 ? coli_ptx_kquant_90 : coli_ptx_kquant, 4, opts, vals);
	if (r == CUDA_SUCCESS)
		r = g->cu->ModuleLoadDataEx(&g->mod_kquant_gemm,
		                            sm90 ? coli_ptx_kquant_gemm_90 : coli_ptx_kquant_gemm,
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

/* A block type's GEMM entry points (ptx/expert/kquant_gemm.cu) and their dynamic
 * shared memory: the wide tile's where the GPU allows it, else the others'
 * (gemm_kq_wide_no: its long runs take the 64 x 32 tile). */
static int gemm_kq_function(coli_gpu_t *g, enum coli_dtype t)
{
	CUresult r;

	for (int inl = 0; inl < 2; inl++) {
		CUfunction *f = inl ? &g->f_gemm_inl[t] : &g->f_gemm[t];
		char name[40];

		snprintf(name, sizeof(name), "coli_gemm_%s%s", coli_dtype_name(t),
		         inl ? "_inl" : "");
		CK(g->cu->ModuleGetFunction(f, g->mod_kquant_gemm, name), name);
		r = g->cu->FuncSetAttribute(*f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
		                            COLI_GPU_GEMM_SMEM_KQ(0));
		if (r != CUDA_SUCCESS) {
			const int s1 = COLI_GPU_GEMM_SMEM_KQ(1), s2 = COLI_GPU_GEMM_SMEM_KQ(2);

			g->gemm_kq_wide_no = 1;
			r = g->cu->FuncSetAttribute(
			    *f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, s1 > s2 ? s1 : s2);
		}
		CK(r, name);
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
	for (int t = COLI_DTYPE_Q4_1; t <= COLI_DTYPE_Q6_K; t++) /* ptx/expert/kquant.cu */
		for (int inl = 0; inl < 2; inl++) {
			char name[40];

			snprintf(name, sizeof(name), "coli_gemv_%s%s", coli_dtype_name(t),
			         inl ? "_inl" : "");
			CK(g->cu->ModuleGetFunction(inl ? &g->f_gemv_inl[t] : &g->f_gemv[t],
			                            g->mod_kquant, name),
			   name);
		}
	CK(g->cu->ModuleGetFunction(&g->f_embed_kq, g->mod_kquant, "coli_embed_kq"),
	   "cuModuleGetFunction(coli_embed_kq)");
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
	for (int t = COLI_DTYPE_Q4_1; t <= COLI_DTYPE_Q6_K; t++) { /* ptx/expert/kquant_gemm.cu */
		int rc = gemm_kq_function(g, (enum coli_dtype)t);

		if (rc)
			return rc;
	}
	CK(g->cu->ModuleGetFunction(&g->f_silu, g->mod, "coli_silu_mul"),
	   "cuModuleGetFunction(coli_silu_mul)");
	CK(g->cu->ModuleGetFunction(&g->f_actq, g->mod, "coli_act_quantize"),
	   "cuModuleGetFunction(coli_act_quantize)");
	CK(g->cu->ModuleGetFunction(&g->f_swiglu_oai, g->mod, "coli_swiglu_oai"),
	   "coli_swiglu_oai");
	CK(g->cu->ModuleGetFunction(&g->f_pair_bias, g->mod, "coli_pair_bias"),
	   "cuModuleGetFunction(coli_pair_bias)");
	CK(g->cu->ModuleGetFunction(&g->f_siluq, g->mod, "coli_silu_mul_q"),
	   "cuModuleGetFunction(coli_silu_mul_q)");
	CK(g->cu->ModuleGetFunction(&g->f_pull, g->mod, "coli_pull"),
	   "cuModuleGetFunction(coli_pull)");
	{
		int rc = coli_gpu_attn_functions(g);

		rc = rc ? rc : coli_gpu_dense_functions(g);
		rc = rc ? rc : coli_gpu_kinds_functions(g);
		return rc ? rc : coli_gpu_mla_functions(g);
	}
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

#ifdef COLI_HAVE_PTX
/* The device's handle, name and compute capability, and its context. */
static int ctx_create(coli_gpu_t *g, int ordinal)
{
	const struct coli_cu *cu = g->cu;
	int rc;

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
	return rc;
}

/* The compute and copy streams, the mapped job-table ring with its
 * segments' events, and the host word streams may wait on. */
static int streams_create(coli_gpu_t *g)
{
	const struct coli_cu *cu = g->cu;
	int rc;

	rc = coli_cu_check(cu->StreamCreate(&g->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
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
	return rc;
}

/* The GEMM job table (device and host copies), the profiling marks and the
 * wait point. */
static int jobs_events_create(coli_gpu_t *g)
{
	const struct coli_cu *cu = g->cu;
	int rc;

	rc = coli_cu_check(cu->MemAlloc(&g->gjobs, sizeof(struct coli_gpu_gemm_job) * MAX_JOBS),
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
	return rc;
}
#endif

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
	g->attn_prefill = COLI_GPU_PREFILL_ROWS;
	g->attn_ways = COLI_GPU_ATTN_WAYS;
	g->dgemm_tiled = COLI_GPU_DGEMM_AUTO;
	rc = ctx_create(g, ordinal);
	if (!rc)
		rc = load_module(g, err, errlen);
	if (!rc)
		rc = get_functions(g);
	if (!rc)
		rc = streams_create(g);
	if (!rc)
		rc = jobs_events_create(g);
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

int coli_gpu_numa_node(const coli_gpu_t *g)
{
#ifdef COLI_HAVE_PTX
	int dom = 0, bus = 0, dev = 0;

	if (g->cu->DeviceGetAttribute(&dom, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, g->dev) ||
	    g->cu->DeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, g->dev) ||
	    g->cu->DeviceGetAttribute(&dev, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, g->dev))
		return -1;
	return coli_mem_pci_node((unsigned)dom, (unsigned)bus, (unsigned)dev);
#else
	(void)g;
	return -1;
#endif
}

void coli_gpu_plain_launches(coli_gpu_t *g)
{
	g->pdl = 0;
}
