/*
 * ptx/common/last_arrival.cuh — the handshake that ends a split launch: the CTAs of
 * a group each write their partial to a scratch, and the last to arrive,
 * counted in by an integer counter, combines them in a fixed order. Shared by
 * the split-K GEMV of ptx/dense/dgemv.cuh and the split-position attention of
 * ptx/attn/attention.cu; arrival_share lets the last few CTAs of a group
 * share the fold. The scratch and the counters are ptx/dense/gpu_dense.c's (a
 * counter is zero between launches: the last CTA resets its own).
 */
#ifndef COLI_PTX_LAST_ARRIVAL_CUH
#define COLI_PTX_LAST_ARRIVAL_CUH

/* Split-K / split-position handshake: every CTA of a group publishes its
 * partials, then counts itself in; the one that brings the count to n is
 * last, sees every partial (fence on both sides), and resets the counter for
 * the next launch on the stream. Integer atomics only: which CTA is last
 * changes nothing in the result, since it sums in a fixed order. */
static __device__ bool last_arrival(unsigned *count, unsigned n)
{
	__shared__ bool last;

	__threadfence(); /* release: this thread's partial stores before the count */
	__syncthreads();
	if (threadIdx.x == 0) {
		last = atomicAdd(count, 1u) == n - 1;
		if (last)
			atomicExch(count, 0u);
	}
	__syncthreads();
	if (last)
		__threadfence(); /* acquire: the other CTAs' partials after the count */
	return last;
}

/* The handshake with the fold shared: the last w CTAs of n to arrive each
 * take a share of the outputs (0 .. w - 1, the n-th arrival w - 1; -1: not
 * one of them), a share waiting until all n have arrived. The counter counts
 * on to n + w as the shares leave, and the last to leave resets it. Waiting
 * on other CTAs is safe only while they can all get an SM: the launcher keeps
 * the CTAs that may wait at once (w - 1 a group) under half of what the GPU
 * holds of the kernel, so a waiting share never keeps out a CTA it waits for
 * (ptx/attn/gpu_attn.c, tc_ways). w == 1 is last_arrival. */
static __device__ int arrival_share(unsigned *count, unsigned n, unsigned w)
{
	__shared__ int share;

	if (w <= 1)
		return last_arrival(count, n) ? 0 : -1;
	__threadfence(); /* release, as last_arrival */
	__syncthreads();
	if (threadIdx.x == 0) {
		const unsigned a = atomicAdd(count, 1u);

		share = a + w >= n ? (int)(a + w - n) : -1;
		if (share >= 0) {
			/* an atomic read: the count in L2, never a stale L1 line */
			for (unsigned v = a + 1; v < n; v = atomicAdd(count, 0u))
				__nanosleep(128);
			if (atomicAdd(count, 1u) == n + w - 1)
				atomicExch(count, 0u);
		}
	}
	__syncthreads();
	if (share >= 0)
		__threadfence(); /* acquire */
	return share;
}

#endif
