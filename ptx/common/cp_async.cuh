/*
 * ptx/common/cp_async.cuh — asynchronous global -> shared copies (sm_80's
 * cp.async), shared by the kernels that stage tiles in shared memory: the
 * expert GEMM (ptx/expert/gemm.cu) and prefill attention (ptx/attn/attn_prefill.cu),
 * and the mbarriers (sm_80) that let a CTA's warps wait for a stage's copies,
 * or for the stage's readers, without a whole-CTA barrier (ptx/attn/attn_tcp.cuh).
 */
#ifndef COLI_PTX_CP_ASYNC_CUH
#define COLI_PTX_CP_ASYNC_CUH

static __device__ __forceinline__ unsigned smem_addr(const void *p)
{
	return (unsigned)__cvta_generic_to_shared(p);
}

/* 16 (or 4) bytes global -> shared, asynchronously; valid == false zero-fills
 * (nothing is read, src only has to be a valid address). */
static __device__ __forceinline__ void cp16(void *dst, const void *src, bool valid)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
	             "l"(src), "r"(valid ? 16 : 0));
}

/* cp16 through L1 (.ca): for a tile whose stages take alternate 16-byte
 * pieces of the same lines (ptx/dense/dgemm_f32.cuh), so the second stage's
 * pieces come from L1 instead of a second L2 sector read */
static __device__ __forceinline__ void cp16_ca(void *dst, const void *src, bool valid)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)),
	             "l"(src), "r"(valid ? 16 : 0));
}

static __device__ __forceinline__ void cp4(void *dst, const void *src, bool valid)
{
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)),
	             "l"(src), "r"(valid ? 4 : 0));
}

/* cp16 to a shared-memory address already converted (smem_addr): for loops
 * that keep their destinations as 32-bit offsets */
static __device__ __forceinline__ void cp16_s(unsigned dst, const void *src)
{
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

static __device__ __forceinline__ void cp_commit(void)
{
	asm volatile("cp.async.commit_group;\n" ::);
}

/* wait until at most N committed groups are still in flight */
template <int N> static __device__ __forceinline__ void cp_wait(void)
{
	asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* An mbarrier (8 bytes of shared memory): a phase completes when `count`
 * arrivals have been made; the phases alternate parity 0, 1, 0, ... */
static __device__ __forceinline__ void mbar_init(unsigned long long *b, unsigned count)
{
	asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(smem_addr(b)), "r"(count)
	             : "memory");
}

/* This thread's arrival, made when every cp.async it issued before has
 * landed (not counted ahead: mbar_init's count holds it) */
static __device__ __forceinline__ void mbar_cp_arrive(unsigned long long *b)
{
	asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(smem_addr(b))
	             : "memory");
}

/* This thread's arrival now (release: its shared-memory reads and writes
 * before it are done for whoever sees the phase complete) */
static __device__ __forceinline__ void mbar_arrive(unsigned long long *b)
{
	asm volatile(
	    "{\n\t.reg .b64 st;\n\tmbarrier.arrive.shared.b64 st, [%0];\n}\n" ::"r"(smem_addr(b))
	    : "memory");
}

/* Wait until the phase of this parity has completed (acquire: what the
 * arrivals released, and the copies they tracked, are visible after it);
 * sm_90's try_wait may suspend the thread a while, sm_80 has test_wait */
#if __CUDA_ARCH__ >= 900
#define MBAR_WAIT_PARITY "mbarrier.try_wait.parity.shared.b64"
#else
#define MBAR_WAIT_PARITY "mbarrier.test_wait.parity.shared.b64"
#endif
static __device__ __forceinline__ void mbar_wait(unsigned long long *b, unsigned parity)
{
	unsigned done;

	do
		asm volatile("{\n\t.reg .pred p;\n\t" MBAR_WAIT_PARITY " p, [%1], %2;\n\t"
		             "selp.u32 %0, 1, 0, p;\n}\n"
		             : "=r"(done)
		             : "r"(smem_addr(b)), "r"(parity)
		             : "memory");
	while (!done);
}

#endif
