/*
 * ptx/common/pdl.cuh — programmatic dependent launch (Hopper and later).
 *
 * Every kernel starts with pdl_entry(). In the compute_90 build (the module
 * ptx/gpu.c loads on sm_90+) a kernel launched with the programmatic-
 * serialization attribute may be put on the SMs while the kernel before it on
 * the stream is still running: griddepcontrol.wait holds it until that kernel
 * has finished and its writes are visible, then launch_dependents lets the
 * next one be scheduled in turn. So a chain of short kernels (a decode layer)
 * overlaps each launch and CTA ramp-up with the tail of the kernel before,
 * and no kernel touches global memory before its inputs are complete. In the
 * compute_80 build (and for a launch without the attribute) both are no-ops.
 */
#ifndef COLI_PTX_PDL_CUH
#define COLI_PTX_PDL_CUH

static __device__ __forceinline__ void pdl_entry(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
	asm volatile("griddepcontrol.wait;\n" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/* A kernel may read what no kernel writes (model weights) before its
 * pdl_entry(): the dense GEMV loads its first weights there, rmsnorm fetches
 * its weights into L2 and qk_rope_store loads its norm weights and
 * frequencies, so their DRAM latency overlaps the kernel before. Every thread
 * still calls pdl_entry() before any other global access. */

#endif
