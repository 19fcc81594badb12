/*
 * ptx/dense/route.cu — MoE routing on the dense device: the softmax router
 * (coli_route), the plan that turns a layer's routing into the expert
 * kernels' pair lists and jobs (coli_moe_plan), both at once
 * (coli_route_plan), and the router GEMV with the plan fused after it
 * (coli_dgemv_f32_plan_<S>: the GEMV's templates are ptx/dense/dgemv.cuh). The
 * sigmoid router with its correction bias and groups is ptx/dense/kinds.cu's.
 * Like the rest of the dense part these follow the host's steps in its order
 * (core/moe/moe.c), so the routing does not depend on where it ran; launch
 * shapes live in ptx/dense/gpu_dense.c.
 */
#include "ptx/dense/dgemv.cuh"
#include "ptx/kernels_abi.h"
#include "ptx/common/pdl.cuh"

/* ---- routing on the device ----
 *
 * coli_route: one warp per token (grid T). The softmax is core/moe/moe.c's:
 * x - max, expf, a double sum in ascending expert order (lane 0 walks it, as
 * the host does), p = x / sum rounded to float; then top_k rounds of a warp
 * argmax (larger p, then lower id) and the renormalisation in float, in
 * order. Only expf may differ from the host's libm in the last place, so
 * when the dense part is on a device every MoE layer routes here, whoever
 * computes its experts: the weights, and with them the logits, do not
 * depend on placement. */
/* One token's routing by one warp; p: E floats of shared memory, sum: a
 * shared double (both this warp's own). x: the logits, in global memory
 * written by an earlier launch, or in shared memory; x may be p (each lane
 * reads and writes only its own indices lane, lane + 32, ...). sel, selw:
 * the global outputs, or NULL (a plan CTA that only gathers). */
static __device__ void route_warp(const float *x, int E, int K, int norm, int *sel, float *selw,
                                  float *p, double *sum, int *sel_s = NULL, float *selw_s = NULL)
{
	const int lane = threadIdx.x & 31;
	float mx = -INFINITY;

	for (int i = lane; i < E; i += 32)
		mx = fmaxf(mx, x[i]);
	for (int o = 16; o; o >>= 1)
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
	/* The sum in double in ascending i, as the host: when every p is 0 or
	 * at least 2^(B - 30), 2^B > E >= any partial sum, every term and
	 * partial sum is a multiple of 2^(B - 53) below 2^B, so exact, and a
	 * warp's tree gives the loop's double; else one lane runs the loop. */
	int B = 1;

	while ((1 << B) <= E)
		B++;
	const float exact_min = ldexpf(1.0f, B - 30);
	double s = 0;
	bool ok = true;

	for (int i = lane; i < E; i += 32) {
		const float v = expf(x[i] - mx);

		p[i] = v;
		ok = ok && (v == 0.0f || v >= exact_min);
		s += v;
	}
	if (__all_sync(0xffffffffu, ok)) {
		for (int o = 16; o; o >>= 1)
			s += __shfl_xor_sync(0xffffffffu, s, o);
		if (lane == 0)
			*sum = s;
	} else {
		__syncwarp();
		if (lane == 0) {
			s = 0;
#pragma unroll 16
			for (int i = 0; i < E; i++)
				s += p[i];
			*sum = s;
		}
	}
	__syncwarp();
	for (int i = lane; i < E; i += 32)
		p[i] = (float)(p[i] / *sum);
	float wsum = 0.0f, w[16];
	int id[16];

	/* K rounds of: the largest p not taken, the lower id on ties (a NaN is
	 * never taken; none left: id E, weight -1). A probability is >= 0, so
	 * its bits order as it does: each lane's best as a key (bits + 1, 0 for
	 * none), the warp's largest key and then the lowest id holding it by
	 * two warp reductions; the lane owning that id marks it taken (-2) in
	 * its own slot of p, which only it reads. Rolled: one warp runs this
	 * once a layer, so unrolled code is code fetched cold. */
#pragma unroll 1
	for (int k = 0; k < K && k < 16; k++) {
		unsigned bk = 0;
		int bi = E;

		for (int i = lane; i < E; i += 32) {
			const float v = p[i];
			/* (-0 as +0: the mask; an expf over a sum is never -0) */
			const unsigned key =
			    v >= 0.0f ? (__float_as_uint(v) & 0x7fffffffu) + 1u : 0u;

			if (key > bk) /* ascending i: ties keep the lower id */
				bk = key, bi = i;
		}
		const unsigned m = __reduce_max_sync(0xffffffffu, bk);
		const int wi = __reduce_min_sync(0xffffffffu, m && bk == m ? bi : E);

		id[k] = m ? wi : E;
		w[k] = m ? __uint_as_float(m - 1u) : -1.0f;
		if (m && (wi & 31) == lane)
			p[wi] = -2.0f;
	}
	if (lane)
		return;
	if (norm) {
		for (int k = 0; k < K; k++)
			wsum = __fadd_rn(wsum, w[k]);
		for (int k = 0; k < K; k++)
			w[k] = __fdiv_rn(w[k], wsum);
	}
	for (int k = 0; sel && k < K; k++) {
		sel[k] = id[k];
		selw[k] = w[k];
	}
	if (sel_s) /* a shared copy for the plan in the same CTA */
		for (int k = 0; k < K; k++) {
			sel_s[k] = id[k];
			selw_s[k] = w[k];
		}
}

extern "C" __global__ void __launch_bounds__(32)
    coli_route(const float *rlog, int E, int K, int norm, int *sel, float *selw)
{
	pdl_entry();
	__shared__ float p[COLI_GPU_ROUTE_MAX_E];
	__shared__ double sum;
	const int t = blockIdx.x;

	route_warp(rlog + (size_t)t * E, E, K, norm, sel + (size_t)t * K, selw + (size_t)t * K, p,
	           &sum);
}

/* coli_moe_plan: a thread per pair (token t = i / K). A pair's rank
 * in ascending (expert, token) order is the number of pairs before it; it
 * writes its GEMV jobs and list entries there (see struct coli_gpu_moe_plan).
 * The same layout core/moe/moe_dev.c builds on the host, one pair a job, or
 * grouped (a.gq): an expert's pairs in jobs of up to COLI_GPU_MAX_S, their
 * rows gathered by plan_gather. sel, selw: the routing in shared memory
 * (every thread reads every pair: from global memory that was a chain of
 * round trips); slabs: a.slabs, or a shared copy of it; s_tok: shared [P],
 * each rank's token for plan_gather. Grouped, the launch has plan_ctas(P)
 * CTAs: each ranks every pair for its share of the gather (one CTA moved
 * 13 GB/s: 9 of a step of 8 tokens' 18 us on an H200), and only CTA 0
 * (`lead`) writes the plan. */
static __device__ void plan_pair(const struct coli_gpu_moe_plan &a, int i, const int *sel,
                                 const float *selw, const unsigned long long *slabs, int *s_tok,
                                 bool lead)
{
	const int ex = sel[i], t = i / a.K;
	int r = 0, o = 0, n = 0; /* rank; the pair's place in its expert's run, the run's length */

	/* by token, then its K experts: no division a pair (at 128 pairs the
	 * loop with j / K was most of the plan's 9 us on an H200) */
	for (int tj = 0, j = 0; tj < a.T; tj++) {
		const bool before = tj < t;

#pragma unroll 8
		for (int k = 0; k < a.K; k++, j++) {
			const int ej = sel[j];

			r += ej < ex || (ej == ex && before);
			o += ej == ex && before;
			n += ej == ex;
		}
	}
	s_tok[r] = t;
	if (!lead)
		return;
	/* (a NaN routing's id E has no slab: its pairs' jobs are empty) */
	const unsigned long long slab = ex < a.E ? slabs[ex] : 0;
	const int H = a.H, I = a.I, group = a.gq != NULL;
	/* grouped: the run's first pair of every COLI_GPU_MAX_S takes them */
	const int S = !group ? 1 : o % COLI_GPU_MAX_S ? 0 : min(COLI_GPU_MAX_S, n - o);
	const size_t xr = group ? r : t; /* its activation row */
	struct coli_gpu_gemv_job j;

	j.xq = (group ? a.gq : a.xq) + xr * H;
	j.xd = (group ? a.gd : a.xd) + xr * (H / 32);
	j.xqsum = (group ? a.gqs : a.xqsum) + xr * (H / 32);
	j.xf = (group ? a.gf : a.xf) + xr * H;
	j.rows = slab && S ? I : 0, j.K = H, j.S = S ? S : 1, j.ldy = I; /* not resident: empty */
	for (int m = 0; m < 2; m++) {
		const unsigned long long w = slab + (m ? a.up_off : a.gate_off);

		j.w = (const void *)w;
		j.scales = a.scale_gu ? (const unsigned short *)(w + a.scale_gu) : NULL;
		j.y = (m ? a.u : a.g) + (size_t)r * I;
		a.gu_jobs[2 * r + m] = j;
	}
	j.w = (const void *)(slab + a.down_off);
	j.scales = a.scale_d ? (const unsigned short *)(slab + a.down_off + a.scale_d) : NULL;
	j.xq = a.hq + (size_t)r * I;
	j.xd = a.hd + (size_t)r * (I / 32);
	j.xqsum = a.hqs + (size_t)r * (I / 32);
	j.xf = a.h + (size_t)r * I;
	j.rows = slab && S ? H : 0, j.K = I, j.S = S ? S : 1, j.ldy = H;
	j.y = a.y + (size_t)r * H;
	a.down_jobs[r] = j;
	a.pair_token[r] = t;
	a.pair_w[r] = selw[i];
	if (a.pair_expert)
		a.pair_expert[r] = ex < a.E ? ex : a.E - 1;
}

/* Grouped: row r of the gathered activations = token s_tok[r]'s, in 16-byte
 * words, this CTA's rows [P * x / n, P * (x + 1) / n) of CTA x of n (after
 * plan_pair and a __syncthreads). */
static __device__ void plan_gather(const struct coli_gpu_moe_plan &a, const int *s_tok, int x,
                                   int n)
{
	const int P = a.T * a.K, r0 = P * x / n, r1 = P * (x + 1) / n;

	if (!a.gq)
		return;
	if (a.xquant) { /* int8 rows, then a float and an int a 32-block */
		const int w = a.H / 16, b = a.H / 32;

		for (int u = r0 * w + threadIdx.x; u < r1 * w; u += blockDim.x)
			((int4 *)a.gq)[u] =
			    __ldg((const int4 *)a.xq + (size_t)s_tok[u / w] * w + u % w);
		for (int u = r0 * b + threadIdx.x; u < r1 * b; u += blockDim.x) {
			const size_t from = (size_t)s_tok[u / b] * b + u % b;

			a.gd[u] = __ldg(a.xd + from);
			a.gqs[u] = __ldg(a.xqsum + from);
		}
	} else {
		const int w = a.H / 4;

		for (int u = r0 * w + threadIdx.x; u < r1 * w; u += blockDim.x)
			((float4 *)a.gf)[u] =
			    __ldg((const float4 *)a.xf + (size_t)s_tok[u / w] * w + u % w);
	}
}

extern "C" __global__ void __launch_bounds__(COLI_GPU_PLAN_MAX_P)
    coli_moe_plan(const __grid_constant__ struct coli_gpu_moe_plan a)
{
	pdl_entry();
	__shared__ int sel[COLI_GPU_PLAN_MAX_P];
	__shared__ float selw[COLI_GPU_PLAN_MAX_P];
	__shared__ int s_tok[COLI_GPU_PLAN_MAX_P];
	const int i = threadIdx.x;

	if (i < a.T * a.K) {
		sel[i] = a.sel[i];
		selw[i] = a.selw[i];
	}
	__syncthreads();
	if (i < a.T * a.K)
		plan_pair(a, i, sel, selw, a.slabs, s_tok, blockIdx.x == 0);
	__syncthreads();
	plan_gather(a, s_tok, blockIdx.x, gridDim.x);
}

/* coli_route of the logits lg [T][ld] (a.rlog, or the caller's shared p) into
 * a.sel/selw, then coli_moe_plan, by one CTA of COLI_GPU_PLAN_MAX_P threads:
 * warp w routes tokens w, w + COLI_GPU_PLAN_WARPS, ... (T <= COLI_GPU_STEP_T)
 * with row w of p, shared [COLI_GPU_PLAN_WARPS][MAX_E] or fewer rows, as its
 * scratch (lg may be p when T <= the rows of p: each token routed in place);
 * CTA x of n plan CTAs (plan_pair). */
static __device__ __forceinline__ void route_plan(const struct coli_gpu_moe_plan &a,
                                                  const float *lg, int ld,
                                                  float (*p)[COLI_GPU_ROUTE_MAX_E], int x, int n)
{
	__shared__ double sum[COLI_GPU_PLAN_WARPS];
	__shared__ int sel[COLI_GPU_PLAN_MAX_P];
	__shared__ float selw[COLI_GPU_PLAN_MAX_P];
	__shared__ unsigned long long slabs[COLI_GPU_ROUTE_MAX_E];
	__shared__ int s_tok[COLI_GPU_PLAN_MAX_P];
	const int w = threadIdx.x >> 5;
	const bool lead = x == 0; /* plan CTA x of n: the others only gather (plan_pair) */

	/* the slab table, read while the routing runs rather than after it */
	for (int e = threadIdx.x; e < a.E; e += blockDim.x)
		slabs[e] = a.slabs[e];
	for (int t = w; t < a.T; t += COLI_GPU_PLAN_WARPS) {
		route_warp(lg + (size_t)t * ld, a.E, a.K, a.norm,
		           lead ? (int *)a.sel + (size_t)t * a.K : NULL,
		           lead ? (float *)a.selw + (size_t)t * a.K : NULL, p[w], &sum[w],
		           sel + t * a.K, selw + t * a.K);
		__syncwarp(); /* p[w] is the next token's scratch */
	}
	__syncthreads(); /* the routing's and the slab table's shared copies are visible */
	if ((int)threadIdx.x < a.T * a.K)
		plan_pair(a, threadIdx.x, sel, selw, slabs, s_tok, lead);
	__syncthreads();
	plan_gather(a, s_tok, x, n);
}

extern "C" __global__ void __launch_bounds__(COLI_GPU_PLAN_MAX_P)
    coli_route_plan(const __grid_constant__ struct coli_gpu_moe_plan a)
{
	__shared__ float p[COLI_GPU_PLAN_WARPS][COLI_GPU_ROUTE_MAX_E];

	pdl_entry();
	route_plan(a, a.rlog, a.E, p, blockIdx.x, gridDim.x);
}

/* The router's GEMV (f32, T <= COLI_GPU_MAX_S tokens into p.rlog: a row of p
 * each, routed in place), then
 * route_plan, in one launch: every CTA writes its split's sums (dgemv_part)
 * and counts itself in at *done; the last of the grid adds each logit's
 * splits in ascending order from +0, as dgemv's combine does, writes the
 * logits and routes them from shared memory, then plans (its 256 threads are
 * a plan CTA's). One launch and one round trip less a layer than
 * coli_dgemv_f32 then coli_route_plan, and one handshake where a split GEMV
 * has two; the same bits (the same sums in the same order, then the same
 * routing of the same logits). */
static_assert(DG_WARPS * 32 == COLI_GPU_PLAN_MAX_P, "a GEMV CTA plans");
template <int S>
static __device__ __forceinline__ void dgemv_plan(const struct coli_gpu_dense_gemv &a, float *part,
                                                  unsigned *done,
                                                  const struct coli_gpu_moe_plan &pl)
{
	__shared__ float p[COLI_GPU_MAX_S][COLI_GPU_ROUTE_MAX_E];
	const int splits = gridDim.y, n = a.T * a.rows;

	dgemv_part<0, S>(a, part);
	if (!last_arrival(done, gridDim.x * gridDim.y * gridDim.z))
		return;
	for (int j = threadIdx.x; j < n; j += blockDim.x) {
		const int t = j / a.rows, row = j % a.rows;
		float v;

		if (splits == 1) { /* each CTA wrote its rows' logits itself */
			v = __ldcg(a.y + (size_t)t * a.ldy + row);
		} else {
			v = dg_combine(a, part, splits, t, row);
			a.y[(size_t)t * a.ldy + row] = v;
		}
		p[t][row] = v;
	}
	__syncthreads();
	route_plan(pl, &p[0][0], COLI_GPU_ROUTE_MAX_E, p, 0, 1); /* the last CTA alone */
}

#define DGEMV_PLAN(S)                                                                              \
	extern "C" __global__ void __launch_bounds__(DG_WARPS * 32)                                \
	    coli_dgemv_f32_plan_##S(const struct coli_gpu_dense_gemv a, float *part,               \
	                            unsigned *done, const struct coli_gpu_moe_plan p)              \
	{                                                                                          \
		dgemv_plan<S>(a, part, done, p);                                                   \
	}
DGEMV_PLAN(1)
DGEMV_PLAN(2)
DGEMV_PLAN(3)
DGEMV_PLAN(4)
