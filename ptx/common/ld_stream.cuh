/*
 * ptx/common/ld_stream.cuh — the load of weights that are read once a token: 16
 * bytes through the read-only path without allocating in L1, so the
 * activations every row shares keep the cache. Shared by the GEMV kernels of
 * ptx/expert/kernels.cu (experts) and ptx/dense/dense.cu (dense matrices).
 */
#ifndef COLI_PTX_LD_STREAM_CUH
#define COLI_PTX_LD_STREAM_CUH

static __device__ __forceinline__ int4 ld_stream(const void *p)
{
	int4 v;

	asm volatile("ld.global.nc.L1::no_allocate.v4.s32 {%0, %1, %2, %3}, [%4];"
	             : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
	             : "l"(p));
	return v;
}

#endif
