/*
 * ptx/driver.c — finding the CUDA driver. libcuda.so.1 is opened with dlopen
 * (never linked) and every entry point coli uses is resolved by name, taking
 * the _v2 variants where the driver API versioned them, so one binary runs
 * CPU-only on a machine without a GPU and says why once.
 *
 * CUresult values are mapped to -errno here, at the ptx/ boundary, and logged
 * with their names (cuGetErrorName): nothing above ptx/ sees CUDA types.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "mem/mem.h"
#include "ptx/ptx.h"
#include "ptx/ptx_internal.h"

static struct coli_cu g_cu;
static int g_cu_rc = 1; /* 1: not tried yet */
static const char *g_cu_why;
static pthread_once_t g_cu_once = PTHREAD_ONCE_INIT;

#ifdef COLI_HAVE_PTX
static int resolve(void *h)
{
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
#define S(field, name) {name, offsetof(struct coli_cu, field)}
	    S(Init, "cuInit"),
	    S(DeviceGetCount, "cuDeviceGetCount"),
	    S(DeviceGet, "cuDeviceGet"),
	    S(DeviceGetName, "cuDeviceGetName"),
	    S(DeviceGetAttribute, "cuDeviceGetAttribute"),
	    S(DeviceTotalMem, "cuDeviceTotalMem_v2"),
	    S(CtxCreate, "cuCtxCreate_v2"),
	    S(CtxDestroy, "cuCtxDestroy_v2"),
	    S(CtxSetCurrent, "cuCtxSetCurrent"),
	    S(CtxSynchronize, "cuCtxSynchronize"),
	    S(MemGetInfo, "cuMemGetInfo_v2"),
	    S(ModuleLoadDataEx, "cuModuleLoadDataEx"),
	    S(ModuleUnload, "cuModuleUnload"),
	    S(ModuleGetFunction, "cuModuleGetFunction"),
	    S(FuncSetAttribute, "cuFuncSetAttribute"),
	    S(OccupancyMaxActiveBlocksPerMultiprocessor,
	      "cuOccupancyMaxActiveBlocksPerMultiprocessor"),
	    S(MemAlloc, "cuMemAlloc_v2"),
	    S(MemFree, "cuMemFree_v2"),
	    S(MemcpyHtoD, "cuMemcpyHtoD_v2"),
	    S(MemcpyDtoH, "cuMemcpyDtoH_v2"),
	    S(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
	    S(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
	    S(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
	    S(MemsetD8Async, "cuMemsetD8Async"),
	    S(MemHostAlloc, "cuMemHostAlloc"),
	    S(MemFreeHost, "cuMemFreeHost"),
	    S(MemHostRegister, "cuMemHostRegister_v2"),
	    S(MemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
	    S(MemHostUnregister, "cuMemHostUnregister"),
	    S(StreamCreate, "cuStreamCreate"),
	    S(StreamDestroy, "cuStreamDestroy_v2"),
	    S(StreamSynchronize, "cuStreamSynchronize"),
	    S(StreamWaitEvent, "cuStreamWaitEvent"),
	    S(EventCreate, "cuEventCreate"),
	    S(EventDestroy, "cuEventDestroy_v2"),
	    S(EventRecord, "cuEventRecord"),
	    S(EventSynchronize, "cuEventSynchronize"),
	    S(EventQuery, "cuEventQuery"),
	    S(EventElapsedTime, "cuEventElapsedTime"),
	    S(LaunchKernel, "cuLaunchKernel"),
	    S(GetErrorName, "cuGetErrorName"),
	};
	/* optional: without them (a driver older than CUDA 11.4) no graphs */
	static const struct {
		const char *name;
		size_t off;
	} opt[] = {
	    S(StreamBeginCapture, "cuStreamBeginCapture_v2"),
	    S(StreamEndCapture, "cuStreamEndCapture"),
	    S(GraphInstantiate, "cuGraphInstantiateWithFlags"),
	    S(GraphLaunch, "cuGraphLaunch"),
	    S(GraphExecDestroy, "cuGraphExecDestroy"),
	    S(GraphDestroy, "cuGraphDestroy"),
	    S(EventRecordWithFlags, "cuEventRecordWithFlags"),
#undef S
	};
	int have_graphs = 1;

	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *p = dlsym(h, syms[i].name);

		if (!p) {
			g_cu_why = "libcuda.so.1 lacks an entry point coli needs (driver too old)";
			return -ENOSYS;
		}
		*(void **)((char *)&g_cu + syms[i].off) = p;
	}
	for (size_t i = 0; i < sizeof(opt) / sizeof(opt[0]); i++)
		have_graphs &=
		    (*(void **)((char *)&g_cu + opt[i].off) = dlsym(h, opt[i].name)) != NULL;
	g_cu.have_graphs = have_graphs;
	*(void **)&g_cu.LaunchKernelEx = dlsym(h, "cuLaunchKernelEx");
	*(void **)&g_cu.StreamWaitValue32 = dlsym(h, "cuStreamWaitValue32_v2");
	return 0;
}
#endif

static void load_once(void)
{
#ifndef COLI_HAVE_PTX
	g_cu_why = "built without nvcc: GPU path compiled out";
	g_cu_rc = -ENODEV;
#else
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	int n = 0;

	if (!h) {
		g_cu_why = "libcuda.so.1 not found (no NVIDIA driver)";
		g_cu_rc = -ENODEV;
		return;
	}
	g_cu_rc = resolve(h);
	if (g_cu_rc)
		return;
	if (g_cu.Init(0) != CUDA_SUCCESS) {
		g_cu_why = "cuInit failed (driver present, no usable device)";
		g_cu_rc = -ENODEV;
	} else if (g_cu.DeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
		g_cu_why = "no CUDA device";
		g_cu_rc = -ENODEV;
	}
#endif
}

int coli_cu_load(const struct coli_cu **out, const char **why)
{
	pthread_once(&g_cu_once, load_once);
	*out = g_cu_rc ? NULL : &g_cu;
	if (why)
		*why = g_cu_why;
	return g_cu_rc;
}

int coli_cu_check(CUresult r, const char *what)
{
	const char *name = "CUDA_ERROR_UNKNOWN";

	if (r == CUDA_SUCCESS)
		return 0;
	if (g_cu.GetErrorName)
		g_cu.GetErrorName(r, &name);
	fprintf(stderr, "coli: %s: %s (%d)\n", what, name, r);
	switch (r) {
	case 2: /* CUDA_ERROR_OUT_OF_MEMORY */
		return -ENOMEM;
	case 1: /* CUDA_ERROR_INVALID_VALUE */
		return -EINVAL;
	case 100: /* CUDA_ERROR_NO_DEVICE */
	case 101: /* CUDA_ERROR_INVALID_DEVICE */
		return -ENODEV;
	default:
		return -EIO;
	}
}

int coli_ptx_probe(const char **why)
{
	const struct coli_cu *cu;
	int n = 0;

	if (coli_cu_load(&cu, why))
		return 0;
	cu->DeviceGetCount(&n);
	return n;
}

int coli_ptx_numa_node(int ordinal)
{
	const struct coli_cu *cu;
	const char *why;
	CUdevice dev;
	int dom = 0, bus = 0, slot = 0;

	if (coli_cu_load(&cu, &why) || cu->DeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
	    cu->DeviceGetAttribute(&dom, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev) != CUDA_SUCCESS ||
	    cu->DeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev) != CUDA_SUCCESS ||
	    cu->DeviceGetAttribute(&slot, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev) != CUDA_SUCCESS)
		return -1;
	return coli_mem_pci_node((unsigned)dom, (unsigned)bus, (unsigned)slot);
}

size_t coli_ptx_total_mem(int ordinal)
{
	const struct coli_cu *cu;
	const char *why;
	CUdevice dev;
	size_t bytes = 0;

	if (coli_cu_load(&cu, &why) || cu->DeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
	    cu->DeviceTotalMem(&bytes, dev) != CUDA_SUCCESS)
		return 0;
	return bytes;
}
