/*
 * ptx/common/last_arrival.cuh — the handshake that ends a split launch: the CTAs of
 * a group each write their partial to a scratch, and the last to arrive,
 * counted in by an integer counter, combines them in a fixed order. Shared by
 * the split-K GEMV of ptx/dense/dgemv.cuh and the split-position attention of
 * ptx/attn/attention.cu. The scratch and the counters are ptx/dense/gpu_dense.c's (a
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

#endif
