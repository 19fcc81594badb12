/*
 * ptx/expert/kernels.cu — coli's GPU kernels, compiled to PTX at build time and
 * embedded in the binary (no CUDA runtime, no toolkit at run time).
 *
 * Every kernel that touches a routed expert reproduces the CPU kernels' bits
 * (cpu/cpu.h, "THE CANONICAL REDUCTION"): the placement invariant says a
 * token's logits do not depend on where its experts ran. So:
 *   - only IEEE-exact intrinsics (__fmaf_rn, __fmul_rn, __fadd_rn, __fdiv_rn);
 *     the file is also compiled with -fmad=false -prec-div=true -ftz=false;
 *   - a row of a GEMV is owned by 16 consecutive threads (a half-warp);
 *     thread j of the half-warp is the canonical lane j: it visits units
 *     u = j, j+16, j+32, ... in ascending order (unit = element for bf16,
 *     32-block for q8/q4) and accumulates with one fmaf each;
 *   - the 16 lanes fold with shfl_xor over offsets 8, 4, 2, 1, which equals
 *     the CPU's tree l[j] = l[j] + l[j+h];
 *   - integer block sums (dp4a) are exact, so their order is free.
 *
 * Launch shapes: GEMV kernels take an array of jobs (one matrix times up to
 * COLI_GPU_MAX_S activation vectors each); blockIdx.y picks the job,
 * blockIdx.x a group of COLI_GPU_GEMV_ROWS rows (256 threads), so all experts of a layer run
 * in one launch.
 */
#include <cuda_fp16.h>

#include "ptx/common/act_quant.cuh"
#include "ptx/expert/gemv.cuh"
#include "ptx/common/ld_stream.cuh"
#include "ptx/kernels_abi.h"
#include "ptx/common/pdl.cuh"

/* Blocks a lane loads before it computes (q4: K = 1536 is 3 blocks a lane,
 * one round trip; K = 2048 two). The accumulation still visits the lane's
 * blocks in ascending order. 3, not 4: with the accumulators in registers
 * (the S loops below are unrolled) 4 spilled at the 85 registers that 3 CTAs
 * an SM allow. H200, `tests/ptx/dense_kernels --bench`, S = 1 tables as a
 * fraction of copy bandwidth, q4_0 (4 blocks, S loop rolled: acc in local
 * memory -> 3 blocks, unrolled): qwen3-235b gate+up 0.60 -> 0.70, down 0.47
 * -> 0.61; qwen3-30b gate+up 0.46 -> 0.52, down 0.24 -> 0.28 (unrolled with 4
 * blocks: spills, 0.58 / 0.47; at 2 CTAs an SM: 0.64 / 0.51). */
#define GV_UNROLL    3
#define GV_UNROLL_Q8 2 /* q8 blocks are twice the bytes: as many in flight, half the blocks */

/* ---- Q8_0 ---- */
struct RowQ8 {
	enum { WARP_WIDE = 0 };
	static __device__ __forceinline__ void run(const struct coli_gpu_gemv_job *jb, int row0,
	                                           int lane, float (*acc)[COLI_GPU_MAX_S])
	{
		const int K = jb->K, S = jb->S, nb = K / 32;

		for (int b0 = lane; b0 < nb; b0 += LANES * GV_UNROLL_Q8) {
			int4 w0[GV_RPH][GV_UNROLL_Q8], w1[GV_RPH][GV_UNROLL_Q8];
			float wd[GV_RPH][GV_UNROLL_Q8];

#pragma unroll
			for (int r = 0; r < GV_RPH; r++) {
				const int row = row0 + 16 * r;
				const signed char *w = (const signed char *)jb->w + (size_t)row * K;
				const unsigned short *dw = jb->scales + (size_t)row * nb;

#pragma unroll
				for (int u = 0; u < GV_UNROLL_Q8; u++) {
					const int b = b0 + u * LANES;

					if (row < jb->rows && b < nb) {
						w0[r][u] = ld_stream(w + b * 32);
						w1[r][u] = ld_stream(w + b * 32 + 16);
						wd[r][u] = half_to_float(dw[b]);
					}
				}
			}
#pragma unroll
			for (int u = 0; u < GV_UNROLL_Q8; u++) {
				const int b = b0 + u * LANES;

				if (b >= nb)
					break;
#pragma unroll
				for (int s = 0; s < COLI_GPU_MAX_S; s++) {
					if (s >= S)
						break;
					const signed char *xq = jb->xq + (size_t)s * K + b * 32;
					const int4 x0 = *(const int4 *)xq,
					           x1 = *(const int4 *)(xq + 16);
					const float xd = jb->xd[(size_t)s * nb + b];

#pragma unroll
					for (int r = 0; r < GV_RPH; r++) {
						int isum = 0;

						if (row0 + 16 * r >= jb->rows)
							continue;
						isum = __dp4a(w0[r][u].x, x0.x, isum);
						isum = __dp4a(w0[r][u].y, x0.y, isum);
						isum = __dp4a(w0[r][u].z, x0.z, isum);
						isum = __dp4a(w0[r][u].w, x0.w, isum);
						isum = __dp4a(w1[r][u].x, x1.x, isum);
						isum = __dp4a(w1[r][u].y, x1.y, isum);
						isum = __dp4a(w1[r][u].z, x1.z, isum);
						isum = __dp4a(w1[r][u].w, x1.w, isum);
						acc[r][s] =
						    __fmaf_rn((float)isum, __fmul_rn(wd[r][u], xd),
						              acc[r][s]);
					}
				}
			}
		}
	}
};

GEMV_KERNELS(q8_0, RowQ8, 2)

/* ---- Q4_0: byte j of a block holds element j (low nibble) and j+16 (high) ---- */
struct RowQ4 {
	enum { WARP_WIDE = 0 };
	static __device__ __forceinline__ void run(const struct coli_gpu_gemv_job *jb, int row0,
	                                           int lane, float (*acc)[COLI_GPU_MAX_S])
	{
		const int K = jb->K, S = jb->S, nb = K / 32;

		for (int b0 = lane; b0 < nb; b0 += LANES * GV_UNROLL) {
			int4 qv[GV_RPH][GV_UNROLL];
			float wd[GV_RPH][GV_UNROLL];

#pragma unroll
			for (int r = 0; r < GV_RPH; r++) {
				const int row = row0 + 16 * r;
				const unsigned char *w =
				    (const unsigned char *)jb->w + (size_t)row * (K / 2);
				const unsigned short *dw = jb->scales + (size_t)row * nb;

#pragma unroll
				for (int u = 0; u < GV_UNROLL; u++) {
					const int b = b0 + u * LANES;

					if (row < jb->rows && b < nb) {
						qv[r][u] = ld_stream(w + b * 16);
						wd[r][u] = half_to_float(dw[b]);
					}
				}
			}
#pragma unroll
			for (int u = 0; u < GV_UNROLL; u++) {
				const int b = b0 + u * LANES;

				if (b >= nb)
					break;
#pragma unroll
				for (int s = 0; s < COLI_GPU_MAX_S; s++) {
					if (s >= S) /* unrolled: acc stays in registers (a
					               rolled loop indexed it in local memory) */
						break;
					const signed char *xq = jb->xq + (size_t)s * K + b * 32;
					const int4 x0 = *(const int4 *)xq,
					           x1 = *(const int4 *)(xq + 16);
					const int xl[4] = {x0.x, x0.y, x0.z, x0.w};
					const int xh[4] = {x1.x, x1.y, x1.z, x1.w};
					const float xd = jb->xd[(size_t)s * nb + b];
					const int xs = 8 * jb->xqsum[(size_t)s * nb + b];

#pragma unroll
					for (int r = 0; r < GV_RPH; r++) {
						const int qw[4] = {qv[r][u].x, qv[r][u].y,
						                   qv[r][u].z, qv[r][u].w};
						int isum = 0;

						if (row0 + 16 * r >= jb->rows)
							continue;
#pragma unroll
						for (int i = 0; i < 4; i++) {
							isum =
							    __dp4a(qw[i] & 0x0f0f0f0f, xl[i], isum);
							isum = __dp4a((qw[i] >> 4) & 0x0f0f0f0f,
							              xh[i], isum);
						}
						isum -= xs;
						acc[r][s] =
						    __fmaf_rn((float)isum, __fmul_rn(wd[r][u], xd),
						              acc[r][s]);
					}
				}
			}
		}
	}
};

GEMV_KERNELS(q4_0, RowQ4, 3)

/* ---- BF16: unit = element; lane j takes k = j, j+16, ... ---- */
struct RowBF16 {
	enum { WARP_WIDE = 0 };
	static __device__ __forceinline__ void run(const struct coli_gpu_gemv_job *jb, int row0,
	                                           int lane, float (*acc)[COLI_GPU_MAX_S])
	{
		const int K = jb->K, S = jb->S;
		const unsigned short *w[GV_RPH];
		bool ok[GV_RPH];

#pragma unroll
		for (int r = 0; r < GV_RPH; r++) {
			ok[r] = row0 + 16 * r < jb->rows;
			w[r] = (const unsigned short *)jb->w + (size_t)(row0 + 16 * r) * K;
		}
		/* the half-warp's rows side by side: their loads in flight together */
		for (int k = lane; k < K; k += LANES) {
			float wf[GV_RPH];

#pragma unroll
			for (int r = 0; r < GV_RPH; r++)
				wf[r] = ok[r] ? bf16_to_float(w[r][k]) : 0.0f;
#pragma unroll
			for (int s = 0; s < COLI_GPU_MAX_S; s++) {
				if (s >= S) /* unrolled, as q4: bf16 tables 0.14 -> 0.31
				               (gate+up), 0.19 -> 0.36 (down) of copy */
					break;
				const float x = jb->xf[(size_t)s * K + k];

#pragma unroll
				for (int r = 0; r < GV_RPH; r++)
					acc[r][s] = __fmaf_rn(wf[r], x, acc[r][s]);
			}
		}
	}
};

GEMV_KERNELS(bf16, RowBF16, 3)

/* ---- F32 (routers): unit = element, as bf16 ---- */
struct RowF32 {
	enum { WARP_WIDE = 0 };
	static __device__ __forceinline__ void run(const struct coli_gpu_gemv_job *jb, int row0,
	                                           int lane, float (*acc)[COLI_GPU_MAX_S])
	{
		for (int r = 0; r < GV_RPH; r++)
			if (row0 + 16 * r < jb->rows)
				one(jb, row0 + 16 * r, lane, acc[r]);
	}
	static __device__ __forceinline__ void one(const struct coli_gpu_gemv_job *jb, int row,
	                                           int lane, float *acc)
	{
		const int K = jb->K, S = jb->S;
		const float *w = (const float *)jb->w + (size_t)row * K;

		for (int k = lane; k < K; k += LANES)
			for (int s = 0; s < S; s++)
				acc[s] = __fmaf_rn(w[k], jb->xf[(size_t)s * K + k], acc[s]);
	}
};

GEMV_KERNELS(f32, RowF32, 3)

/* ---- exp and SwiGLU, step for step as cpu/ops.c ---- */
static __device__ float coli_expf_dev(float x)
{
	const float log2e = 1.44269502f;
	const float ln2_hi = 0.693145751953125f;
	const float ln2_lo = 1.42860677e-06f;
	float n, r, p;

	if (x != x)
		return x;
	if (x > 88.7f)
		return __int_as_float(0x7f800000);
	if (x < -87.0f)
		return 0.0f;
	n = floorf(__fadd_rn(__fmul_rn(x, log2e), 0.5f));
	r = __fmaf_rn(-n, ln2_hi, x);
	r = __fmaf_rn(-n, ln2_lo, r);
	p = 1.0f / 5040.0f;
	p = __fmaf_rn(p, r, 1.0f / 720.0f);
	p = __fmaf_rn(p, r, 1.0f / 120.0f);
	p = __fmaf_rn(p, r, 1.0f / 24.0f);
	p = __fmaf_rn(p, r, 1.0f / 6.0f);
	p = __fmaf_rn(p, r, 0.5f);
	p = __fmaf_rn(p, r, 1.0f);
	p = __fmaf_rn(p, r, 1.0f);
	if (n > 127.0f) {
		p = __fmul_rn(p, 2.0f);
		n = __fadd_rn(n, -1.0f);
	}
	return __fmul_rn(p, __int_as_float(((int)n + 127) << 23));
}

/* h[i] = silu(g[i]) * u[i] over n elements */
extern "C" __global__ void coli_silu_mul(const float *g, const float *u, float *h, int n)
{
	pdl_entry();
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n) {
		float gi = g[i];
		float e = coli_expf_dev(-gi);

		h[i] = __fmul_rn(__fdiv_rn(gi, __fadd_rn(1.0f, e)), u[i]);
	}
}

/* Canonical quantization of 32-block b, lane's value v (one warp a block). */
static __device__ __forceinline__ void quant_block(float v, int lane, int b, signed char *q,
                                                   float *d, int *qsum)
{
	float amax = act_abs(0.0f, v), dd, id;
	int qi, sum;

	for (int off = 16; off; off >>= 1)
		amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
	id = act_inv(amax, &dd);
	qi = act_q(v, id);
	q[(size_t)b * 32 + lane] = (signed char)qi;
	sum = qi;
	for (int off = 16; off; off >>= 1)
		sum += __shfl_xor_sync(0xffffffffu, sum, off);
	if (lane == 0) {
		d[b] = dd;
		qsum[b] = sum;
	}
}

/* Canonical activation quantization: one warp per 32-block of x[n_blocks*32]. */
extern "C" __global__ void coli_act_quantize(const float *x, signed char *q, float *d, int *qsum,
                                             int n_blocks)
{
	pdl_entry();
	const int lane = threadIdx.x & 31;
	const int b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);

	if (b >= n_blocks)
		return; /* whole warps exit together: b is uniform per warp */
	quant_block(x[(size_t)b * 32 + lane], lane, b, q, d, qsum);
}

/* coli_silu_mul then coli_act_quantize of the result, in one launch: one warp
 * per 32-block; the same operations, so the same bits as the two. */
extern "C" __global__ void coli_silu_mul_q(const float *g, const float *u, float *h, signed char *q,
                                           float *d, int *qsum, int n_blocks)
{
	pdl_entry();
	const int lane = threadIdx.x & 31;
	const int b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	const size_t i = (size_t)b * 32 + lane;

	if (b >= n_blocks)
		return;
	const float gi = g[i];
	const float v = __fmul_rn(__fdiv_rn(gi, __fadd_rn(1.0f, coli_expf_dev(-gi))), u[i]);

	h[i] = v;
	quant_block(v, lane, b, q, d, qsum);
}

/* gpt-oss's clamped SwiGLU (cpu/ops.c coli_swiglu_oai) over rows of I: the
 * bias rows bg and bu (or NULL) first added to g and u in place, as
 * core/model/act.c coli_act_ffn does, then h; q != NULL: h also quantized as
 * coli_act_quantize (n % 32 == 0). idx != NULL (a device-planned layer's
 * pairs, coli_moe_plan's pair_expert): row r's biases are row idx[r] of bg
 * and bu, [E][I] each; NULL: row 0 for every row (one expert's run). A warp
 * a 32-element block; the same operations in the same order, so the CPU's
 * bits. */
extern "C" __global__ void coli_swiglu_oai(float *g, float *u, const float *bg, const float *bu,
                                           const int *idx, float *h, signed char *q, float *d,
                                           int *qsum, int n, int I, float alpha, float limit)
{
	pdl_entry();
	const int lane = threadIdx.x & 31;
	const int b = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	const size_t i = (size_t)b * 32 + lane;
	float v = 0.0f;

	if ((size_t)b * 32 >= (size_t)n)
		return;
	if (i < (size_t)n) {
		const size_t bi = (idx ? (size_t)idx[i / I] * I : 0) + i % I;
		float gi = g[i], ui = u[i];

		if (bg)
			g[i] = gi = __fadd_rn(gi, bg[bi]);
		if (bu)
			u[i] = ui = __fadd_rn(ui, bu[bi]);
		const float gc = gi < limit ? gi : limit; /* gate.clamp(max=limit) */
		const float uc = ui < -limit ? -limit : ui > limit ? limit : ui;
		const float sig =
		    __fdiv_rn(1.0f, __fadd_rn(1.0f, coli_expf_dev(-__fmul_rn(gc, alpha))));

		v = __fmul_rn(__fadd_rn(uc, 1.0f), __fmul_rn(gc, sig));
		h[i] = v;
	}
	if (q)
		quant_block(v, lane, b, q, d, qsum);
}

/* gpt-oss's down bias on a device-planned layer's outputs: row r of y
 * [rows][n] plus row idx[r] of b [E][n], one rounding (y + b, as
 * core/moe/block.c adds it before the pair's weight). */
extern "C" __global__ void coli_pair_bias(float *y, const float *b, const int *idx, int rows, int n)
{
	pdl_entry();
	const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= (size_t)rows * n)
		return;
	y[i] = __fadd_rn(y[i], b[(size_t)idx[i / n] * n + i % n]);
}

/* Copy 32-bit words with the SMs instead of a copy engine, between
 * page-locked host memory the device maps and device memory: a small upload
 * on the compute stream must not queue behind the slab copies that keep the
 * H2D engine busy (ptx/gpu.c coli_gpu_upload_async), and a small download
 * costs the stream less as a kernel than as a transfer (coli_gpu_download_async).
 * Up to COLI_GPU_PULLS ranges in one launch: a host-planned decode layer's
 * routing, weights and normed rows come down as one dependent step of the
 * stream, not three (coli_gpu_download_many). */
extern "C" __global__ void coli_pull(struct coli_gpu_pulls p)
{
	pdl_entry();
	for (int r = 0; r < p.n; r++) {
		unsigned *dst = (unsigned *)p.dst[r];
		const unsigned *src = (const unsigned *)p.src[r];

		for (unsigned long long i =
		         blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
		     i < p.n4[r]; i += (unsigned long long)gridDim.x * blockDim.x)
			dst[i] = src[i];
	}
}
