/*
 * ptx/dense/kinds.cu — the dense device's kernels for the layer kinds GLM-4.5 (and
 * DeepSeek-V3's routing) brought: sigmoid routing with a selection-only
 * correction bias and group-limited top-k, and partial RoPE. Their CPU
 * references are cpu/ops.c coli_route_sigmoid and coli_rope_part; the test
 * is tests/ptx/kinds.c. The dense device's RoPE op when rope_dim < head_dim
 * and its route op for a sigmoid router (core/dev/dev_gpu.c g_rope,
 * g_route); a planned layer then routes in a launch of its own before
 * coli_moe_plan (core/forward/forward_dev.c plan_route), not fused with it
 * as the softmax router is.
 *
 * coli_route_sigmoid: one warp per token (grid T, 32 threads), E <=
 * COLI_GPU_ROUTE_MAX_E, K <= 16. Every step is the host's, in its order:
 *   p[i] = 1 / (1 + expf(-x[i]))        (IEEE division; only expf may differ
 *                                         from the host's libm in the last place)
 *   c[i] = p[i] + bias[i]               (bias NULL: c = p)
 *   n_group > 1: group g's score = c[a] + c[b], a its first largest, b the
 *     first largest of the others (as the host's scan); the topk_group best
 *     groups kept (ties to the lower group), every other c = -inf
 *   K rounds of the largest c not taken (ties to the lower id)
 *   w = p[sel], / (sum in sel order + 1e-20) when norm, * scale
 * so with the host's p the ids and weights are the host's bits.
 *
 * coli_rope_part: coli_rope over the first rd dims of each head of hd: one
 * thread per (t, h, i < rd/2), i paired with i + rd/2; the rest untouched.
 */
#include "ptx/kernels_abi.h"
#include "ptx/common/pdl.cuh"

/* The warp's largest (v, i): larger v, then lower i (NaN never wins a
 * comparison, as in the host's scan, except where it stands first). */
static __device__ __forceinline__ void warp_best(float &v, int &i)
{
	for (int o = 16; o; o >>= 1) {
		const float ov = __shfl_xor_sync(0xffffffffu, v, o);
		const int oi = __shfl_xor_sync(0xffffffffu, i, o);

		if (oi >= 0 && (i < 0 || ov > v || (ov == v && oi < i)))
			v = ov, i = oi;
	}
}

extern "C" __global__ void __launch_bounds__(32)
    coli_route_sigmoid(const float *rlog, const float *bias, int E, int K, int n_group,
                       int topk_group, int norm, float scale, int *sel, float *selw)
{
	pdl_entry();
	__shared__ float p[COLI_GPU_ROUTE_MAX_E], c[COLI_GPU_ROUTE_MAX_E];
	__shared__ float gs_score[COLI_GPU_ROUTE_MAX_E / 2];
	__shared__ unsigned char taken[COLI_GPU_ROUTE_MAX_E];
	__shared__ int ids[16];
	const int lane = threadIdx.x, t = blockIdx.x;
	const float *x = rlog + (size_t)t * E;

	for (int i = lane; i < E; i += 32) {
		p[i] = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x[i])));
		c[i] = bias ? __fadd_rn(p[i], bias[i]) : p[i];
		taken[i] = 0;
	}
	__syncwarp();
	if (n_group > 1) {
		const int gs = E / n_group;

		for (int g = lane; g < n_group; g += 32) {
			const float *cg = c + g * gs;
			int a = 0, b = -1;

			for (int i = 1; i < gs; i++)
				if (cg[i] > cg[a])
					a = i;
			for (int i = 0; i < gs; i++)
				if (i != a && (b < 0 || cg[i] > cg[b]))
					b = i;
			gs_score[g] = __fadd_rn(cg[a], cg[b]);
		}
		__syncwarp();
		if (lane == 0) { /* a handful of groups: the host's loop */
			for (int j = 0; j < topk_group; j++) {
				int best = -1;

				for (int g = 0; g < n_group; g++)
					if (!taken[g] && (best < 0 || gs_score[g] > gs_score[best]))
						best = g;
				taken[best] = 1;
			}
		}
		__syncwarp();
		for (int i = lane; i < E; i += 32)
			if (!taken[i / gs])
				c[i] = -INFINITY;
		__syncwarp();
		for (int g = lane; g < n_group; g += 32)
			taken[g] = 0;
		__syncwarp();
	}
#pragma unroll 1
	for (int k = 0; k < K; k++) {
		float v = 0.0f;
		int bi = -1;

		for (int i = lane; i < E; i += 32) /* ascending i: ties keep the lower */
			if (!taken[i] && (bi < 0 || c[i] > v))
				v = c[i], bi = i;
		warp_best(v, bi);
		if (lane == 0) {
			ids[k] = bi;
			taken[bi] = 1;
		}
		__syncwarp();
	}
	if (lane)
		return;
	float w[16], sum = 0.0f;

	for (int k = 0; k < K; k++) {
		w[k] = p[ids[k]];
		sum = __fadd_rn(sum, w[k]);
	}
	sum = __fadd_rn(sum, 1e-20f);
	for (int k = 0; k < K; k++) {
		float wk = norm ? __fdiv_rn(w[k], sum) : w[k];

		sel[(size_t)t * K + k] = ids[k];
		selw[(size_t)t * K + k] = __fmul_rn(wk, scale);
	}
}

extern "C" __global__ void coli_rope_part(float *x, int T, int nh, int hd, int rd, int pos0,
                                          const float *inv_freq)
{
	pdl_entry();
	const int half = rd / 2;
	const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	double dc, ds;

	if (idx >= (size_t)T * nh * half)
		return;
	const int i = (int)(idx % half), h = (int)((idx / half) % nh),
	          t = (int)(idx / ((size_t)half * nh));
	const float ang = (float)(pos0 + t) * inv_freq[i];

	sincos((double)ang, &ds, &dc); /* one range reduction for both, as cos/sin */
	const float cs = (float)dc, sn = (float)ds;
	float *v = x + ((size_t)t * nh + h) * hd;
	const float x1 = v[i], x2 = v[i + half];

	v[i] = x1 * cs - x2 * sn;
	v[i + half] = x2 * cs + x1 * sn;
}
