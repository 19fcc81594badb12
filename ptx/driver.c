/*
 * ptx/driver.c — finding the CUDA driver. libcuda.so.1 is opened with dlopen
 * (never linked), so a machine without a GPU runs the same binary CPU-only.
 * Kernel loading and launches land here with the GPU path (issue #6).
 */
#include <dlfcn.h>
#include <stddef.h>

#include "ptx/ptx.h"

typedef int (*cu_init_fn)(unsigned int);
typedef int (*cu_device_get_count_fn)(int *);

int coli_ptx_probe(const char **why)
{
#ifndef COLI_HAVE_PTX
	*why = "built without nvcc: GPU path compiled out";
	return 0;
#else
	static int n = -1;
	static const char *reason = NULL;
	void *h;
	cu_init_fn cu_init;
	cu_device_get_count_fn cu_count;

	if (n >= 0) {
		*why = reason;
		return n;
	}
	n = 0;
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		reason = "libcuda.so.1 not found (no NVIDIA driver)";
	} else {
		cu_init = (cu_init_fn)dlsym(h, "cuInit");
		cu_count = (cu_device_get_count_fn)dlsym(h, "cuDeviceGetCount");
		if (!cu_init || !cu_count)
			reason = "libcuda.so.1 lacks cuInit/cuDeviceGetCount";
		else if (cu_init(0) != 0)
			reason = "cuInit failed (no usable device)";
		else if (cu_count(&n) != 0 || n == 0)
			reason = "no CUDA device";
	}
	*why = reason;
	return n;
#endif
}
