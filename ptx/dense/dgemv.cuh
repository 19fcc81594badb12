/*
 * ptx/dense/dgemv.cuh — the dense GEMV of ptx/dense/dense.cu as device templates: float
 * matrices (split-K for small ones, the joined form for prefill chunks) and
 * q8_0 / q4_0 matrices on the canonical reduction (a warp a row, or a
 * half-warp a row for long q4 matrices). dense.cu instantiates the entry
 * points (coli_dgemv_<dtype>_<S>) and the router's GEMV fused with the plan;
 * launch shapes and split policies are ptx/dense/gpu_dense.c's.
 */
#ifndef COLI_PTX_DGEMV_CUH
#define COLI_PTX_DGEMV_CUH

#include <cuda_fp16.h>

#include "ptx/kernels_abi.h"
#include "ptx/common/last_arrival.cuh"
#include "ptx/common/ld_stream.cuh"
#include "ptx/common/pdl.cuh"

/* ---- the dense GEMV: y[t][r] = W[r] . x[t] for the dense matrices ----
 *
 * f32 and bf16 matrices: not the canonical reduction (the dense part only
 * has to be deterministic; quantized matrices follow the canonical one, see
 * dgemv_q below). One warp a row; a unit is
 * 16 bytes of weights (f32: 4 elements, bf16: 8, q8_0: 16 = half a block,
 * q4_0: 32 = one block), lane l reads units l, l+32, ... of its K range with
 * DG_UNROLL loads in flight, so a warp-wide load is 512 contiguous bytes; the
 * warp folds with shfl_xor in a fixed order. Up to S <= 4 tokens share each
 * weight load (blockIdx.z walks chunks of S tokens for longer inputs).
 *
 * Small float matrices (the router: 128 rows) cannot fill the GPU one warp a
 * row, so K is split over gridDim.y CTAs (split-K): each writes its partial sums
 * to the scratch [split][T][rows], and the last CTA of a row group to arrive
 * adds them in ascending split order and writes y.
 */
#define DG_WARPS  8 /* rows per CTA */
#define DG_UNROLL 4

/* dtype codes as enum coli_dtype: 0 f32, 2 bf16, 8 q8_0, 9 q4_0 */
template <int DT> struct Unit;

template <> struct Unit<0> {
	static constexpr int elems = 4;
	template <int S>
	static __device__ __forceinline__ void dot(const struct coli_gpu_dense_gemv &a, int row,
	                                           int u, int4 wv, int t0, int ns, float *acc)
	{
		const float w0 = __int_as_float(wv.x), w1 = __int_as_float(wv.y),
		            w2 = __int_as_float(wv.z), w3 = __int_as_float(wv.w);
#pragma unroll
		for (int s = 0; s < S; s++) {
			if (s < ns) {
				const float4 x =
				    __ldg((const float4 *)(a.xf + (size_t)(t0 + s) * a.K) + u);
				float v = acc[s];

				v = __fmaf_rn(w0, x.x, v);
				v = __fmaf_rn(w1, x.y, v);
				v = __fmaf_rn(w2, x.z, v);
				acc[s] = __fmaf_rn(w3, x.w, v);
			}
		}
	}
};

template <> struct Unit<2> {
	static constexpr int elems = 8;
	template <int S>
	static __device__ __forceinline__ void dot(const struct coli_gpu_dense_gemv &a, int row,
	                                           int u, int4 wv, int t0, int ns, float *acc)
	{
		const int q[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
		for (int s = 0; s < S; s++) {
			if (s < ns) {
				const float4 *xp =
				    (const float4 *)(a.xf + (size_t)(t0 + s) * a.K) + 2 * u;
				const float4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
				const float x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
				float v = acc[s];

#pragma unroll
				for (int i = 0; i < 4; i++) {
					v = __fmaf_rn(__int_as_float(q[i] << 16), x[2 * i], v);
					v = __fmaf_rn(__int_as_float(q[i] & 0xffff0000),
					              x[2 * i + 1], v);
				}
				acc[s] = v;
			}
		}
	}
};

/* Where row `row` of token t goes (stacked matrices: see kernels_abi.h). */
static __device__ __forceinline__ float *dg_out(const struct coli_gpu_dense_gemv &a, int t, int row)
{
	if (!a.y2 || row < a.rows1)
		return a.y + (size_t)t * a.ldy + row;
	if (row < a.rows2)
		return a.y2 + (size_t)t * a.ldy2 + (row - a.rows1);
	return a.y3 + (size_t)t * a.ldy3 + (row - a.rows2);
}

/* Units [u0, u1) of row `row` (< a.rows) for the chunk's tokens into acc[],
 * folded over the warp (every lane ends with the sum). wv: the range's first
 * DG_UNROLL loads, already issued by the caller (dg_first). */
template <int DT, int S>
static __device__ __forceinline__ void dg_range(const struct coli_gpu_dense_gemv &a, int row,
                                                int lane, int u0, int u1, int t0, int ns, int4 *wv,
                                                float *acc)
{
	const int4 *w = (const int4 *)a.w + (size_t)row * (a.K / Unit<DT>::elems);

#pragma unroll
	for (int s = 0; s < S; s++)
		acc[s] = 0.0f;
	for (int base = u0 + lane; base < u1; base += 32 * DG_UNROLL) {
#pragma unroll
		for (int i = 0; i < DG_UNROLL; i++)
			if (base + 32 * i < u1)
				Unit<DT>::template dot<S>(a, row, base + 32 * i, wv[i], t0, ns,
				                          acc);
#pragma unroll
		for (int i = 0; i < DG_UNROLL; i++)
			if (base + 32 * (DG_UNROLL + i) < u1)
				wv[i] = ld_stream(w + base + 32 * (DG_UNROLL + i));
	}
	/* the whole warp folds (a row is a warp, so validity is warp-uniform) */
#pragma unroll
	for (int s = 0; s < S; s++)
		for (int off = 16; off; off >>= 1)
			acc[s] = __fadd_rn(acc[s], __shfl_xor_sync(0xffffffffu, acc[s], off));
}

/* A range's first weight loads: they do not depend on the inputs, so they
 * go before the programmatic-launch wait */
template <int DT>
static __device__ __forceinline__ void dg_first(const struct coli_gpu_dense_gemv &a, int row,
                                                int lane, int u0, int u1, int4 *wv)
{
	const int4 *w = (const int4 *)a.w + (size_t)row * (a.K / Unit<DT>::elems);

#pragma unroll
	for (int i = 0; i < DG_UNROLL; i++)
		if (u0 + lane + 32 * i < u1)
			wv[i] = ld_stream(w + u0 + lane + 32 * i);
}

/* Split k of `splits`: its units [u0, u1), whole warp loads */
static __device__ __forceinline__ void dg_split(int nu, int splits, int k, int *u0, int *u1)
{
	const int span = ((nu + splits - 1) / splits + 31) & ~31;

	*u0 = k * span;
	*u1 = min(nu, *u0 + span);
}

/* This CTA's rows over its split of K (blockIdx.y of gridDim.y): into y
 * when there is one split, else into the scratch part [split][T][rows]. Calls
 * pdl_entry() itself, after its first weight loads (ptx/common/pdl.cuh). */
template <int DT, int S>
static __device__ __forceinline__ void dgemv_part(const struct coli_gpu_dense_gemv &a, float *part)
{
	const int lane = threadIdx.x & 31;
	const int row = blockIdx.x * DG_WARPS + (threadIdx.x >> 5);
	const int splits = gridDim.y, t0 = blockIdx.z * S, ns = min(S, a.T - t0);
	float acc[S];
	int4 wv[DG_UNROLL];
	int u0, u1;

	dg_split(a.K / Unit<DT>::elems, splits, blockIdx.y, &u0, &u1);
	if (row < a.rows)
		dg_first<DT>(a, row, lane, u0, u1, wv);
	pdl_entry();
	if (row < a.rows)
		dg_range<DT, S>(a, row, lane, u0, u1, t0, ns, wv, acc);
	if (lane == 0 && row < a.rows)
		for (int s = 0; s < ns; s++) {
			if (splits == 1)
				*dg_out(a, t0 + s, row) = acc[s];
			else
				part[((size_t)blockIdx.y * a.T + t0 + s) * a.rows + row] = acc[s];
		}
}

/* Row `row` of token t: the splits' partials added in ascending split order
 * from +0 (the combine every split launch uses, so a token's bits do not
 * depend on which kernel combined them). */
static __device__ __forceinline__ float dg_combine(const struct coli_gpu_dense_gemv &a,
                                                   const float *part, int splits, int t, int row)
{
	float v = 0.0f;

	for (int k = 0; k < splits; k++)
		v = __fadd_rn(v, __ldcg(part + ((size_t)k * a.T + t) * a.rows + row));
	return v;
}

/* dgemv_part, then with splits the last CTA of the row group to arrive adds
 * its rows' partials in ascending split order from +0 and writes y. Returns
 * whether this CTA wrote its row group's y (CTA-uniform): every CTA without
 * a split, the last of the group's splits with one. */
template <int DT, int S>
static __device__ __forceinline__ bool dgemv(const struct coli_gpu_dense_gemv &a, float *part,
                                             unsigned *count)
{
	const int lane = threadIdx.x & 31;
	const int row = blockIdx.x * DG_WARPS + (threadIdx.x >> 5);
	const int splits = gridDim.y, t0 = blockIdx.z * S, ns = min(S, a.T - t0);

	dgemv_part<DT, S>(a, part);
	if (splits == 1)
		return true;
	if (!last_arrival(&count[blockIdx.z * gridDim.x + blockIdx.x], splits))
		return false;
	if (lane == 0 && row < a.rows)
		for (int s = 0; s < ns; s++)
			*dg_out(a, t0 + s, row) = dg_combine(a, part, splits, t0 + s, row);
	return true;
}

/* A prefill chunk of a float matrix: one warp takes all `splits` ranges of
 * its row in turn and adds them in split order from +0, the bits of the
 * split launches and their combine without their CTAs (a router's 16 a row
 * group), partials or counters. */
template <int DT, int S>
static __device__ __forceinline__ void dgemv_joined(const struct coli_gpu_dense_gemv &a, int splits)
{
	const int lane = threadIdx.x & 31;
	const int row = blockIdx.x * DG_WARPS + (threadIdx.x >> 5);
	const int t0 = blockIdx.z * S, ns = min(S, a.T - t0), nu = a.K / Unit<DT>::elems;
	float acc[S], v[S];
	int4 wv[DG_UNROLL];
	int u0, u1;

	dg_split(nu, splits, 0, &u0, &u1);
	if (row < a.rows)
		dg_first<DT>(a, row, lane, u0, u1, wv);
	pdl_entry();
	if (row >= a.rows) /* warp-uniform */
		return;
#pragma unroll
	for (int s = 0; s < S; s++)
		v[s] = 0.0f;
	for (int k = 0; k < splits; k++) {
		if (k) {
			dg_split(nu, splits, k, &u0, &u1);
			dg_first<DT>(a, row, lane, u0, u1, wv);
		}
		dg_range<DT, S>(a, row, lane, u0, u1, t0, ns, wv, acc);
		/* one split alone: y is its sum itself, as the split launch writes it */
#pragma unroll
		for (int s = 0; s < S; s++)
			v[s] = splits == 1 ? acc[s] : __fadd_rn(v[s], acc[s]);
	}
	if (lane == 0)
		for (int s = 0; s < ns; s++)
			*dg_out(a, t0 + s, row) = v[s];
}

/* ---- q8_0 / q4_0: the canonical reduction ----
 *
 * Quantized dense matrices are summed as the CPU sums them (cpu/cpu.h, THE
 * CANONICAL REDUCTION), so the tensor-core GEMM of ptx/expert/gemm.cu, which a
 * prefill chunk's dense matrices use, gives a token the bits this GEMV gives
 * it at decode. Still one warp a row, 16-byte units, 32 units a warp-wide
 * load; a step of the loop covers units U .. U+31 (U a multiple of 32):
 *   q8_0 (a unit is half a block): threads 2m and 2m+1 hold the halves of
 *        block U/2 + m, whose canonical lane is m; their int sums add (exact)
 *        and thread 2m keeps lane m's accumulator;
 *   q4_0 (a unit is a block): thread t holds block U + t, lane t % 16;
 *        thread t < 16 keeps lane t and, after its own block, adds the one
 *        thread t + 16 passes down (lane order: U + t, then U + t + 16);
 *        long matrices take dgemv_q4h below instead.
 * Then the 16 lanes fold by the tree. A row is never split over CTAs: its
 * canonical lanes run over all of K. */

/* dw * dx, rounded, then s: the block's term (cpu/cpu.h) */
template <int S>
static __device__ __forceinline__ void q_scale(const struct coli_gpu_dense_gemv &a, float wd, int b,
                                               int t0, int ns, float *dd)
{
	const int nb = a.K / 32;

#pragma unroll
	for (int s = 0; s < S; s++)
		dd[s] = s < ns ? __fmul_rn(wd, __ldg(a.xd + (size_t)(t0 + s) * nb + b)) : 0.0f;
}

/* q8_0: the int sum of a half block (unit u) for each token */
template <int S>
static __device__ __forceinline__ void q8_half(const struct coli_gpu_dense_gemv &a, int u, int4 wv,
                                               int t0, int ns, int *is)
{
#pragma unroll
	for (int s = 0; s < S; s++) {
		is[s] = 0;
		if (s < ns) {
			const int4 x = __ldg((const int4 *)(a.xq + (size_t)(t0 + s) * a.K) + u);

			is[s] = __dp4a(wv.w, x.w,
			               __dp4a(wv.z, x.z, __dp4a(wv.y, x.y, __dp4a(wv.x, x.x, 0))));
		}
	}
}

/* q4_0: the int sum of block b, nibbles minus 8 (byte j holds elements j and
 * j + 16), for each token */
template <int S>
static __device__ __forceinline__ void q4_block(const struct coli_gpu_dense_gemv &a, int b, int4 wv,
                                                int t0, int ns, int *is)
{
	const int nb = a.K / 32;
	const int q[4] = {wv.x, wv.y, wv.z, wv.w};

#pragma unroll
	for (int s = 0; s < S; s++) {
		is[s] = 0;
		if (s < ns) {
			const int4 *xp = (const int4 *)(a.xq + (size_t)(t0 + s) * a.K) + 2 * b;
			const int4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
			const int xl[4] = {x0.x, x0.y, x0.z, x0.w};
			const int xh[4] = {x1.x, x1.y, x1.z, x1.w};
			int v = 0;

#pragma unroll
			for (int i = 0; i < 4; i++) {
				v = __dp4a(q[i] & 0x0f0f0f0f, xl[i], v);
				v = __dp4a((q[i] >> 4) & 0x0f0f0f0f, xh[i], v);
			}
			is[s] = v - 8 * __ldg(a.xqsum + (size_t)(t0 + s) * nb + b);
		}
	}
}

/* A step's terms: unit U + lane's int sums and dw * dx for each token
 * (q8: of its half block). `valid`: the unit is below nu (else zeros). */
template <int DT, int S>
static __device__ __forceinline__ void q_terms(const struct coli_gpu_dense_gemv &a, int U, int lane,
                                               bool valid, int4 wv, float wd, int t0, int ns,
                                               int *is, float *dd)
{
	const int b = DT == 8 ? (U + lane) >> 1 : U + lane;

	q_scale<S>(a, wd, valid ? b : 0, t0, ns, dd);
	if (DT == 8)
		q8_half<S>(a, valid ? U + lane : 0, valid ? wv : make_int4(0, 0, 0, 0), t0, ns, is);
	else
		q4_block<S>(a, valid ? b : 0, valid ? wv : make_int4(0, 0, 0, 0), t0, ns, is);
}

/* A step's terms into the canonical lanes' sums (see above: q8 lane m in
 * thread 2m, q4 lane t in thread t adding thread t + 16's block second). */
template <int DT, int S>
static __device__ __forceinline__ void q_add(int U, int lane, int nu, int *is, const float *dd,
                                             float *acc)
{
	if (DT == 8) {
#pragma unroll
		for (int s = 0; s < S; s++)
			is[s] += __shfl_xor_sync(0xffffffffu, is[s], 1);
		if (U + lane < nu && !(lane & 1))
#pragma unroll
			for (int s = 0; s < S; s++)
				acc[s] = __fmaf_rn((float)is[s], dd[s], acc[s]);
	} else {
		float f2[S], d2[S];

#pragma unroll
		for (int s = 0; s < S; s++) {
			f2[s] = __shfl_down_sync(0xffffffffu, (float)is[s], 16);
			d2[s] = __shfl_down_sync(0xffffffffu, dd[s], 16);
		}
		if (lane < 16 && U + lane < nu)
#pragma unroll
			for (int s = 0; s < S; s++) {
				acc[s] = __fmaf_rn((float)is[s], dd[s], acc[s]);
				if (U + lane + 16 < nu)
					acc[s] = __fmaf_rn(f2[s], d2[s], acc[s]);
			}
	}
}

/* A CTA's rows are consecutive: their sums (out[s][i]: token s, the CTA's
 * i-th row, set by the threads that hold them) leave as one store a token,
 * thread i of a group of R writing row i, so a token's R rows are one
 * 4R-byte write. y may be mapped host memory (a decode step's logits go
 * straight to the host: core/forward/forward_dev.c), where a lone 4-byte store is a
 * bus transaction of its own. Every thread of the CTA calls it. */
template <int S, int R>
static __device__ __forceinline__ void q_store(const struct coli_gpu_dense_gemv &a, float (*out)[R],
                                               int row0, int t0, int ns)
{
	const int s = threadIdx.x / R, r = row0 + threadIdx.x % R;

	__syncthreads();
	if (s < ns && r < a.rows)
		*dg_out(a, t0 + s, r) = out[s][threadIdx.x % R];
}

template <int DT, int S>
static __device__ __forceinline__ void dgemv_q(const struct coli_gpu_dense_gemv &a)
{
	const int lane = threadIdx.x & 31;
	const int row = blockIdx.x * DG_WARPS + (threadIdx.x >> 5);
	const int t0 = blockIdx.z * S, ns = min(S, a.T - t0);
	const int nu = a.K / (DT == 8 ? 16 : 32), nb = a.K / 32;
	const int4 *w = (const int4 *)a.w + (size_t)row * nu;
	const unsigned short *sc = a.scales + (size_t)row * nb;
	const bool live = row < a.rows; /* warp-uniform: the warp's shuffles stay whole */
	__shared__ float out[S][DG_WARPS];
	float acc[S];
	int4 wv[DG_UNROLL] = {};
	float wd[DG_UNROLL] = {};

#pragma unroll
	for (int s = 0; s < S; s++)
		acc[s] = 0.0f;
	/* the first weights and their scales are loaded before waiting for the
	 * inputs; a unit's scale is its block's (q8: two units a block) */
	if (live)
#pragma unroll
		for (int i = 0; i < DG_UNROLL; i++) {
			const int u = 32 * i + lane;

			if (u < nu) {
				wv[i] = ld_stream(w + u);
				wd[i] = __half2float(
				    __ushort_as_half(__ldg(sc + (DT == 8 ? u >> 1 : u))));
			}
		}
	pdl_entry();
	for (int U = 0; live && U < nu; U += 32 * DG_UNROLL) {
		int is[DG_UNROLL][S];
		float dd[DG_UNROLL][S];

		/* every load of the step first, then the shuffles and sums */
#pragma unroll
		for (int i = 0; i < DG_UNROLL; i++)
			if (U + 32 * i < nu) /* warp-uniform */
				q_terms<DT, S>(a, U + 32 * i, lane, U + 32 * i + lane < nu, wv[i],
				               wd[i], t0, ns, is[i], dd[i]);
#pragma unroll
		for (int i = 0; i < DG_UNROLL; i++) {
			const int u = U + 32 * (DG_UNROLL + i) + lane;

			if (u < nu) {
				wv[i] = ld_stream(w + u);
				wd[i] = __half2float(
				    __ushort_as_half(__ldg(sc + (DT == 8 ? u >> 1 : u))));
			}
		}
#pragma unroll
		for (int i = 0; i < DG_UNROLL; i++)
			if (U + 32 * i < nu)
				q_add<DT, S>(U + 32 * i, lane, nu, is[i], dd[i], acc);
	}
	/* fold the 16 lanes: q8 holds lane m in thread 2m, q4 in thread m */
#pragma unroll
	for (int s = 0; s < S; s++)
		for (int off = DT == 8 ? 16 : 8; off >= (DT == 8 ? 2 : 1); off >>= 1)
			acc[s] = __fadd_rn(acc[s], __shfl_xor_sync(0xffffffffu, acc[s], off));
	if (live && lane == 0)
		for (int s = 0; s < ns; s++)
			out[s][threadIdx.x >> 5] = acc[s];
	q_store<S, DG_WARPS>(a, out, blockIdx.x * DG_WARPS, t0, ns);
}

/* q4_0 for long matrices (lm_head): a half-warp a row, thread j the
 * canonical lane j reading blocks j, j + 16, ... (a half-warp load is 256
 * contiguous bytes): no shuffle a step, half the threads' instructions a
 * byte. Same bits as dgemv_q; ptx/dense/gpu_dense.c picks by the row count. */
template <int S>
static __device__ __forceinline__ void dgemv_q4h(const struct coli_gpu_dense_gemv &a)
{
	const int j = threadIdx.x & 15;
	const int row = blockIdx.x * (2 * DG_WARPS) + (threadIdx.x >> 4);
	const bool live = row < a.rows; /* dead half-warps still shuffle */
	const int t0 = blockIdx.z * S, ns = min(S, a.T - t0), nb = a.K / 32;
	__shared__ float out[S][2 * DG_WARPS];
	const int4 *w = (const int4 *)a.w + (size_t)(live ? row : 0) * nb;
	const unsigned short *sc = a.scales + (size_t)(live ? row : 0) * nb;
	float acc[S] = {};
	int4 wv[DG_UNROLL] = {};
	float wd[DG_UNROLL] = {};

	/* the first weights and scales before waiting for the inputs */
#pragma unroll
	for (int i = 0; i < DG_UNROLL; i++)
		if (live && j + 16 * i < nb) {
			wv[i] = ld_stream(w + j + 16 * i);
			wd[i] = __half2float(__ushort_as_half(__ldg(sc + j + 16 * i)));
		}
	pdl_entry();
	for (int B = 0; B < nb; B += 16 * DG_UNROLL) {
		int is[DG_UNROLL][S];
		float dd[DG_UNROLL][S];

#pragma unroll
		for (int i = 0; i < DG_UNROLL; i++) {
			const int b = B + 16 * i + j;

			if (live && b < nb) {
				q_scale<S>(a, wd[i], b, t0, ns, dd[i]);
				q4_block<S>(a, b, wv[i], t0, ns, is[i]);
			}
		}
#pragma unroll
		for (int i = 0; i < DG_UNROLL; i++) {
			const int b = B + 16 * (DG_UNROLL + i) + j;

			if (live && b < nb) {
				wv[i] = ld_stream(w + b);
				wd[i] = __half2float(__ushort_as_half(__ldg(sc + b)));
			}
		}
#pragma unroll
		for (int i = 0; i < DG_UNROLL; i++)
			if (live && B + 16 * i + j < nb)
#pragma unroll
				for (int s = 0; s < S; s++)
					acc[s] = __fmaf_rn((float)is[i][s], dd[i][s], acc[s]);
	}
#pragma unroll
	for (int s = 0; s < S; s++)
		for (int off = 8; off; off >>= 1)
			acc[s] = __fadd_rn(acc[s], __shfl_xor_sync(0xffffffffu, acc[s], off, 16));
	if (live && j == 0)
		for (int s = 0; s < ns; s++)
			out[s][threadIdx.x >> 4] = acc[s];
	q_store<S, 2 * DG_WARPS>(a, out, blockIdx.x * 2 * DG_WARPS, t0, ns);
}

/* ---- q8_0 / q4_0 times a few tokens, on the tensor cores ----
 *
 * A decode step of several sequences (T from COLI_GPU_DMMA_MIN_T up to the
 * GEMM's COLI_GPU_DENSE_GEMM_MIN_T): the GEMV above re-reads the tokens'
 * activations for every row and spends its dot products a token at a time
 * (q 4096 x 2048 at T = 8: 17 us on an H200 against 3 at T = 1). Here a
 * CTA is 16 rows x a chunk of 8 * NT tokens (blockIdx.z walks the chunks)
 * and DM_WARPS = 16 warps, warp w the canonical lane w: it takes blocks w,
 * w + 16, ... in ascending order as the CPU's lane does, each an int8
 * m16n8k32 mma (one 32-block: each (row, token)'s exact int dot), then
 * acc = fmaf(dot [q4: - 8 * xqsum], dw * dx rounded, acc). The 16 lanes meet
 * in shared memory and fold by the tree (lane j + lane j + 8, then + 4, + 2,
 * + 1): dgemv_q's bits, so a token's rows do not depend on T or the kernel.
 * A operand (16 x 32, rows g and g + 8 of the mma, g = lane / 4, columns
 * 4c .. 4c + 3 and 16 + 4c .. 16 + 4c + 3, c = lane % 4): q8_0 bytes as they
 * are; q4_0 byte j holds elements j (low nibble) and j + 16 (high), so one
 * 4-byte load at 4c gives both halves, unsigned (u8 x s8, the nibble's - 8
 * folded into xqsum as dgemv_q does). Rows past the matrix and tokens past
 * the chunk are computed on clamped addresses and not stored. */
#define DM_WARPS 16
/* blocks a warp loads before its first product at NT = 1 (1 at NT = 2): two
 * CTAs an SM fit in 64 registers a thread */
#define DM_UNROLL 2

template <bool Q4>
static __device__ __forceinline__ void dm_mma(int *d, const unsigned *a, unsigned b0, unsigned b1)
{
	const int z = 0;

	if (Q4)
		asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0, %1, %2, %3}, "
		    "{%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"
		    : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
		    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(z));
	else
		asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, "
		    "{%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"
		    : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
		    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(z));
}

template <int DT, int NT>
static __device__ __forceinline__ void dgemm_q_few(const struct coli_gpu_dense_gemv &a)
{
	const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
	const int row0 = blockIdx.x * 16, t0 = blockIdx.z * 8 * NT, nt = min(8 * NT, a.T - t0);
	const int nb = a.K / 32;
	constexpr int U = NT == 1 ? DM_UNROLL : 1;
	const size_t rb = DT == 8 ? (size_t)a.K : (size_t)a.K / 2; /* bytes a row */
	const int r0 = min(row0 + g, a.rows - 1), r1 = min(row0 + g + 8, a.rows - 1);
	const unsigned char *w0 = (const unsigned char *)a.w + r0 * rb + 4 * c;
	const unsigned char *w1 = (const unsigned char *)a.w + r1 * rb + 4 * c;
	const unsigned short *s0 = a.scales + (size_t)r0 * nb, *s1 = a.scales + (size_t)r1 * nb;
	__shared__ float leaf[DM_WARPS][8 * NT][17]; /* [lane][token][row], padded */
	float acc[NT][4];
	int tb[NT], ta[NT][2]; /* the tokens a thread's B and C fragments hold */

#pragma unroll
	for (int n = 0; n < NT; n++) {
		tb[n] = t0 + min(8 * n + g, nt - 1);
		ta[n][0] = t0 + min(8 * n + 2 * c, nt - 1);
		ta[n][1] = t0 + min(8 * n + 2 * c + 1, nt - 1);
		acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
	}
	pdl_entry();
	for (int b0 = w; b0 < nb; b0 += DM_WARPS * U) {
		unsigned A[U][4], B[U][NT][2];
		float d0[U], d1[U], dx[U][NT][2];
		int q[U][NT][2];

		/* every load of the round first (the mma's operands, then the
		 * epilogue's scales and sums), then the products */
#pragma unroll
		for (int i = 0; i < U; i++) {
			const int b = min(b0 + DM_WARPS * i, nb - 1); /* past nb: not summed */

			if (DT == 8) {
				A[i][0] = __ldg((const unsigned *)(w0 + 32 * (size_t)b));
				A[i][1] = __ldg((const unsigned *)(w1 + 32 * (size_t)b));
				A[i][2] = __ldg((const unsigned *)(w0 + 32 * (size_t)b + 16));
				A[i][3] = __ldg((const unsigned *)(w1 + 32 * (size_t)b + 16));
			} else {
				A[i][0] = __ldg((const unsigned *)(w0 + 16 * (size_t)b));
				A[i][1] = __ldg((const unsigned *)(w1 + 16 * (size_t)b));
			}
			d0[i] = __half2float(__ushort_as_half(__ldg(s0 + b)));
			d1[i] = __half2float(__ushort_as_half(__ldg(s1 + b)));
#pragma unroll
			for (int n = 0; n < NT; n++) {
				const unsigned *xb = (const unsigned *)(a.xq + (size_t)tb[n] * a.K +
				                                        32 * (size_t)b) +
				                     c;

				B[i][n][0] = __ldg(xb), B[i][n][1] = __ldg(xb + 4);
#pragma unroll
				for (int h = 0; h < 2; h++) {
					const size_t xi = (size_t)ta[n][h] * nb + b;

					dx[i][n][h] = __ldg(a.xd + xi);
					q[i][n][h] = DT == 9 ? 8 * __ldg(a.xqsum + xi) : 0;
				}
			}
		}
#pragma unroll
		for (int i = 0; i < U; i++) {
			if (b0 + DM_WARPS * i >= nb) /* warp-uniform */
				break;
			if (DT == 9) { /* low nibbles: elements j; high: j + 16 */
				const unsigned x = A[i][0], y = A[i][1];

				A[i][0] = x & 0x0f0f0f0fu, A[i][1] = y & 0x0f0f0f0fu;
				A[i][2] = (x >> 4) & 0x0f0f0f0fu, A[i][3] = (y >> 4) & 0x0f0f0f0fu;
			}
#pragma unroll
			for (int n = 0; n < NT; n++) {
				int D[4];

				dm_mma<DT == 9>(D, A[i], B[i][n][0], B[i][n][1]);
#pragma unroll
				for (int h = 0; h < 2;
				     h++) { /* C: tokens 2c, 2c + 1; rows g, g + 8 */
					acc[n][h] =
					    __fmaf_rn((float)(D[h] - q[i][n][h]),
					              __fmul_rn(d0[i], dx[i][n][h]), acc[n][h]);
					acc[n][2 + h] =
					    __fmaf_rn((float)(D[2 + h] - q[i][n][h]),
					              __fmul_rn(d1[i], dx[i][n][h]), acc[n][2 + h]);
				}
			}
		}
	}
#pragma unroll
	for (int n = 0; n < NT; n++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			leaf[w][8 * n + 2 * c + (e & 1)][g + 8 * (e >> 1)] = acc[n][e];
	__syncthreads();
	for (int i = threadIdx.x; i < 16 * 8 * NT; i += blockDim.x) {
		const int r = i & 15, t = i >> 4;
		float l[16];

		if (t >= nt || row0 + r >= a.rows)
			continue;
#pragma unroll
		for (int j = 0; j < 16; j++)
			l[j] = leaf[j][t][r];
#pragma unroll
		for (int off = 8; off; off >>= 1)
#pragma unroll
			for (int j = 0; j < off; j++)
				l[j] = __fadd_rn(l[j], l[j + off]);
		*dg_out(a, t0 + t, row0 + r) = l[0];
	}
}

#endif
