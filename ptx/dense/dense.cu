/*
 * ptx/dense/dense.cu — the dense part of a layer on the GPU: the dense GEMV (q/k/v/o,
 * routers, shared experts, dense MLPs, lm_head; its templates are
 * ptx/dense/dgemv.cuh, its entry points here), embedding rows, RMSNorm,
 * bias, RoPE, residual adds, the MoE weighted accumulate and the shared
 * expert's sigmoid gate. Attention over the KV cache is ptx/attn/attention.cu's,
 * routing and the device plan ptx/dense/route.cu's.
 * Routed experts do not come here: they use the canonical grouped kernels of
 * kernels.cu.
 *
 * The dense part is exempt from the placement invariant (it runs where it
 * runs): these kernels follow transformers' float32 math within rounding and
 * are deterministic (fixed reduction orders, no float atomics; split work is
 * combined in a fixed order by the last CTA, see last_arrival), so for a given
 * dense device the logits do not depend on where experts ran. Exact kernels:
 * coli_moe_accumulate reproduces core/moe/moe.c's order (pairs in ascending
 * expert id, product rounded then added), so routed-expert results combine
 * with the same bits on any device; the GEMV of q8_0/q4_0 matrices is the
 * canonical reduction (a prefill chunk's GEMM then gives the same bits).
 *
 * Layouts: rows are tokens, row-major, fp32. Launch shapes and the split
 * policies live in ptx/dense/gpu_dense.c; the split kernels share one device scratch
 * and one counter array there, which is safe because the device has one
 * stream (a launch starts after the previous one ended).
 */
#include <cuda_fp16.h>

#include "ptx/common/act_quant.cuh"
#include "ptx/dense/dgemm_f32.cuh"
#include "ptx/dense/dgemv.cuh"
#include "ptx/kernels_abi.h"
#include "ptx/attn/kv_rows.cuh"
#include "ptx/common/last_arrival.cuh"
#include "ptx/common/pdl.cuh"

/* ---- the dense GEMV's entry points (the templates: ptx/dense/dgemv.cuh) ---- */
#define DGEMV(dt, DT, S)                                                                           \
	extern "C" __global__ void __launch_bounds__(DG_WARPS * 32) coli_dgemv_##dt##_##S(         \
	    const struct coli_gpu_dense_gemv a, float *part, unsigned *count)                      \
	{                                                                                          \
		dgemv<DT, S>(a, part, count);                                                      \
	}
#define DGEMV_Q(dt, DT, S)                                                                         \
	extern "C" __global__ void __launch_bounds__(DG_WARPS * 32) coli_dgemv_##dt##_##S(         \
	    const struct coli_gpu_dense_gemv a, float *part, unsigned *count)                      \
	{                                                                                          \
		dgemv_q<DT, S>(a);                                                                 \
	}
#define DGEMV_Q4H(dt, DT, S)                                                                       \
	extern "C" __global__ void __launch_bounds__(DG_WARPS * 32) coli_dgemv_##dt##_##S(         \
	    const struct coli_gpu_dense_gemv a, float *part, unsigned *count)                      \
	{                                                                                          \
		dgemv_q4h<S>(a);                                                                   \
	}
#define DGEMV_S(M, dt, DT) M(dt, DT, 1) M(dt, DT, 2) M(dt, DT, 3) M(dt, DT, 4)
/* float matrices times a prefill chunk: 8 or 16 tokens a weight load, a
 * split row's ranges in one warp (a token's sum is the same whatever S; the
 * routers split K 16 ways, so S = 4 made 16384 CTAs of a 256-token chunk,
 * 105 us a launch on an H200) */
#define DGEMV_J(dt, DT, S)                                                                         \
	extern "C" __global__ void __launch_bounds__(DG_WARPS * 32)                                \
	    coli_dgemv_##dt##_##S(const struct coli_gpu_dense_gemv a, int splits)                  \
	{                                                                                          \
		dgemv_joined<DT, S>(a, splits);                                                    \
	}
/* f32 matrices times a prefill chunk as a tiled GEMM, the joined form's
 * bits (ptx/dense/dgemm_f32.cuh): J units a lane in each split */
#define DGEMM_F32(J)                                                                               \
	extern "C" __global__ void __launch_bounds__(COLI_GPU_DGEMM_THREADS)                       \
	    coli_dgemm_f32_j##J(const struct coli_gpu_dense_gemv a, int splits)                   \
	{                                                                                          \
		dgemm_f32<J>(a, splits);                                                           \
	}
/* q8_0 / q4_0 times a few tokens on the tensor cores: NT chunks of 8; two
 * CTAs an SM (64 registers a thread) */
#define DGEMM_FEW(dt, DT, NT)                                                                      \
	extern "C" __global__ void __launch_bounds__(DM_WARPS * 32, 2)                             \
	    coli_dgemm_few_##dt##_##NT(const struct coli_gpu_dense_gemv a)                         \
	{                                                                                          \
		dgemm_q_few<DT, NT>(a);                                                            \
	}
/* clang-format off */
DGEMM_FEW(q8_0, 8, 1)
DGEMM_FEW(q8_0, 8, 2)
DGEMM_FEW(q4_0, 9, 1)
DGEMM_FEW(q4_0, 9, 2)
DGEMV_S(DGEMV, f32, 0)
DGEMV_S(DGEMV, bf16, 2)
DGEMV_S(DGEMV_Q, q8_0, 8)
DGEMV_S(DGEMV_Q, q4_0, 9)
DGEMV_S(DGEMV_Q4H, q4_0h, 9)
DGEMV_J(f32, 0, 16)
DGEMV_J(bf16, 2, 16)
DGEMM_F32(1)
DGEMM_F32(2)
DGEMM_F32(3)
DGEMM_F32(4)
DGEMM_F32(5)
DGEMM_F32(6)
DGEMM_F32(7)
DGEMM_F32(8)
/* clang-format on */

/* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w   (w may be NULL).
 * G threads a row (a power of two, 32..1024, G >= n/4 when possible), so a
 * 2048 row is one float4 per thread held in registers, and per-head norms
 * (n = 128) are a warp each: blockDim / G rows per CTA. The sum of squares is
 * taken in double (as the CPU), per thread then over the group in a fixed
 * order: deterministic. x and y may alias (in place). add (may be NULL):
 * first x += add, written back (the residual add before a norm, fused; then
 * y must not alias x). q (may be NULL): y also quantized per 32-block into
 * q/d/qsum with coli_act_quantize's steps (ptx/common/act_quant.cuh); a block is
 * the float4s of 8 neighbouring threads, so this needs the register path
 * (n % 32 == 0, n <= RN_REG * 4 * G: the launcher checks). py != NULL (add
 * NULL): the add is a MoE layer's np pairs (outputs py [np][n], tokens pt,
 * weights pw) summed as coli_moe_accumulate does, so the layer needs no
 * accumulate launch of its own. */
#define RN_REG  4  /* float4 per thread kept in registers; larger rows re-read x */
#define RN_ROWS 8  /* rows a CTA at most: 256 threads, 32 a row (ptx/dense/gpu_dense.c) */
#define RN_PL   32 /* a row's pairs listed ahead (a top-k); a row with more scans them all */
/* Row `row`'s sum of a MoE layer's pairs at element i: coli_moe_accumulate's
 * order (pairs ascending, product rounded then added, from +0). */
static __device__ __forceinline__ float pairs_sum(const float *py, const int *pt, const float *pw,
                                                  int np, int row, int n, int i)
{
	float o = 0.0f;

	for (int p = 0; p < np; p++)
		if (__ldg(pt + p) == row)
			o = __fadd_rn(o, __fmul_rn(__ldg(pw + p), __ldg(py + (size_t)p * n + i)));
	return o;
}

/* Row `row`'s pairs (pt[p] == row), ascending, into list[0..RN_PL) and their
 * count (which may pass RN_PL) into *count: one warp, 32 pairs a ballot. */
static __device__ __forceinline__ void pairs_list(const int *pt, int np, int row, int *list,
                                                  int *count)
{
	const int lane = threadIdx.x & 31;
	int c = 0;

	for (int p0 = 0; p0 < np; p0 += 32) {
		const int p = p0 + lane;
		const bool m = p < np && __ldg(pt + p) == row;
		const unsigned b = __ballot_sync(0xffffffffu, m);
		const int at = c + __popc(b & ((1u << lane) - 1u));

		if (m && at < RN_PL)
			list[at] = p;
		c += __popc(b);
	}
	if (lane == 0)
		*count = c;
}

/* pairs_sum of elements i..i+3 over a listed row's m pairs: the same order
 * and roundings, four pairs' loads issued before their adds (the scan's
 * load-then-add a pair was latency-bound: 10.8 us a norm at 8 rows on an H200). */
static __device__ __forceinline__ float4 pairs_sum4(const float *py, const float *pw,
                                                    const int *list, int m, int n, int i)
{
	float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

	for (int k = 0; k < m; k += 4) {
		float4 v[4];
		float wt[4];

#pragma unroll
		for (int j = 0; j < 4; j++)
			if (k + j < m) {
				const int p = list[k + j];

				wt[j] = __ldg(pw + p);
				v[j] = __ldg((const float4 *)(py + (size_t)p * n + i));
			}
#pragma unroll
		for (int j = 0; j < 4; j++)
			if (k + j < m) {
				o.x = __fadd_rn(o.x, __fmul_rn(wt[j], v[j].x));
				o.y = __fadd_rn(o.y, __fmul_rn(wt[j], v[j].y));
				o.z = __fadd_rn(o.z, __fmul_rn(wt[j], v[j].z));
				o.w = __fadd_rn(o.w, __fmul_rn(wt[j], v[j].w));
			}
	}
	return o;
}

extern "C" __global__ void __launch_bounds__(1024)
    coli_rmsnorm(float *x, const float *add, const float *w, float *y, signed char *q, float *qd,
                 int *qsum, int rows, int n, float eps, int G, const float *py, const int *pt,
                 const float *pw, int np)
{
	__shared__ double red[32];
	__shared__ int s_pl[RN_ROWS][RN_PL], s_np[RN_ROWS];
	const int gi = threadIdx.x / G, lt = threadIdx.x % G, wpg = G >> 5;
	const int row = blockIdx.x * (blockDim.x / G) + gi;
	const bool ok = row < rows, vec = (n & 3) == 0 && n <= RN_REG * 4 * G;
	/* the pairs listed per row (CTA-uniform) */
	const bool listed = py && !add && vec && (int)blockDim.x / G <= RN_ROWS;
	float *xr = x + (size_t)row * n;
	const float *ar = add + (size_t)row * n;
	float *yr = y + (size_t)row * n;
	float4 v[RN_REG];

	/* the weights are the model's (no kernel writes them): fetched into L2
	 * before waiting for the kernel ahead, so their DRAM latency overlaps it
	 * (into L2, not registers: at 1024 threads a CTA a thread has 64) */
	if (ok && vec && w)
#pragma unroll
		for (int k = 0; k < RN_REG; k++) {
			const int i = (lt + k * G) * 4;

			if (i < n && i % 32 == 0) /* a 128-byte line each */
				asm volatile("prefetch.global.L2 [%0];" ::"l"(w + i));
		}
	pdl_entry();
	double ss = 0.0;
	float inv;
	int npl = RN_PL + 1; /* a row's listed pairs; past RN_PL: the scan */

	if (listed) {
		if (ok && lt < 32) /* the row group's first warp */
			pairs_list(pt, np, row, s_pl[gi], &s_np[gi]);
		__syncthreads(); /* the lists written, read by every thread */
		npl = ok ? s_np[gi] : npl;
	}
	if (ok && vec) {
#pragma unroll
		for (int k = 0; k < RN_REG; k++) {
			int i = (lt + k * G) * 4;

			v[k] = i < n ? *(const float4 *)(xr + i) : make_float4(0, 0, 0, 0);
			if ((add || py) && i < n) {
				const float4 b =
				    add ? *(const float4 *)(ar + i)
				    : npl <= RN_PL
				        ? pairs_sum4(py, pw, s_pl[gi], npl, n, i)
				        : make_float4(pairs_sum(py, pt, pw, np, row, n, i),
				                      pairs_sum(py, pt, pw, np, row, n, i + 1),
				                      pairs_sum(py, pt, pw, np, row, n, i + 2),
				                      pairs_sum(py, pt, pw, np, row, n, i + 3));

				v[k] = make_float4(v[k].x + b.x, v[k].y + b.y, v[k].z + b.z,
				                   v[k].w + b.w);
				*(float4 *)(xr + i) = v[k];
			}
		}
#pragma unroll
		for (int k = 0; k < RN_REG; k++)
			ss += (double)v[k].x * v[k].x + (double)v[k].y * v[k].y +
			      (double)v[k].z * v[k].z + (double)v[k].w * v[k].w;
	} else if (ok) {
		for (int i = lt; i < n; i += G) {
			if (add) /* this thread reads it back below: no other writer */
				xr[i] += ar[i];
			else if (py)
				xr[i] += pairs_sum(py, pt, pw, np, row, n, i);
			ss += (double)xr[i] * xr[i];
		}
	}
	for (int off = 16; off; off >>= 1)
		ss += __shfl_xor_sync(0xffffffffu, ss, off);
	if (wpg > 1) {
		/* red[warp] written before the barrier, read after it */
		if ((threadIdx.x & 31) == 0)
			red[threadIdx.x >> 5] = ss;
		__syncthreads();
		ss = 0.0;
		for (int k = 0; k < wpg; k++)
			ss += red[gi * wpg + k];
	}
	if (!ok)
		return;
	inv = (float)(1.0 / sqrt(ss / n + eps));
	if (vec) {
#pragma unroll
		for (int k = 0; k < RN_REG; k++) {
			int i = (lt + k * G) * 4;
			float4 o;

			if (i >= n)
				break;
			o = make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);
			if (w) {
				const float4 ww = __ldg((const float4 *)(w + i));

				o = make_float4(ww.x * o.x, ww.y * o.y, ww.z * o.z, ww.w * o.w);
			}
			*(float4 *)(yr + i) = o;
			if (q) { /* lanes 8m..8m+7 hold the block of i */
				const unsigned m8 = 0xffu << (threadIdx.x & 24);
				const size_t at = (size_t)row * n + i;
				float am = act_abs(act_abs(act_abs(act_abs(0.0f, o.x), o.y), o.z),
				                   o.w),
				      dd;

				for (int off = 4; off; off >>= 1)
					am = fmaxf(am, __shfl_xor_sync(m8, am, off));
				const float id = act_inv(am, &dd);
				const int q0 = act_q(o.x, id), q1 = act_q(o.y, id),
				          q2 = act_q(o.z, id), q3 = act_q(o.w, id);
				int s = q0 + q1 + q2 + q3;

				*(char4 *)(q + at) = make_char4((signed char)q0, (signed char)q1,
				                                (signed char)q2, (signed char)q3);
				for (int off = 4; off; off >>= 1)
					s += __shfl_xor_sync(m8, s, off);
				if ((threadIdx.x & 7) == 0) {
					qd[at / 32] = dd;
					qsum[at / 32] = s;
				}
			}
		}
	} else {
		for (int i = lt; i < n; i += G)
			yr[i] = w ? w[i] * (xr[i] * inv) : xr[i] * inv;
	}
}

/* The per-head steps between the q/k/v GEMVs and attention, in one launch,
 * for T tokens at positions pos0 + t: q heads normed (qw: q_norm per head,
 * NULL: none) and rotated in place; k heads the same (kw), written to the
 * cache row pos0 + t; v heads copied there. Grid (nh + nkv, T), blockDim a
 * multiple of 32 >= hd / 2: thread i holds elements i and i + hd/2 (the
 * rotated pair). The norm is coli_rmsnorm's (double sum of squares in a fixed
 * order, w * (x * inv)), the rotation coli_rope's. posp != NULL: pos0 is read
 * there, when the launch runs (a launch captured in a graph replays with the
 * position of the token at hand). The cache rows are of types kt, vt
 * (ptx/attn/kv_rows.cuh; q8: a kv head's scale after the row's nkv * hd values,
 * the head's max over its CTA); store_only: k and v stored as they are, q
 * untouched (the op-by-op path's store). f != 1: q and k times f after the
 * rotation (YaRN's cos/sin factor, applied as the CPU applies it). rows !=
 * NULL: token t's own position and sequence slot (ptx/kernels_abi.h
 * COLI_GPU_ROWS), tokens of several sequences in one launch; NULL: slot 0.
 * kc / vc are a layer's [n_blocks][32] rows: position p of slot s at row
 * kv_at(tab, nbs, s, p) (ptx/attn/kv_rows.cuh; tab NULL: contiguous). */
extern "C" __global__ void __launch_bounds__(128)
    coli_qk_rope_store(float *q, const float *k, const float *v, const float *qw, const float *kw,
                       float eps, int nh, int nkv, int hd, int pos0, const int *posp,
                       const float *inv_freq, void *kc, void *vc, int kt, int vt, int store_only,
                       float f, const int *rows, const int *tab, int nbs)
{
	__shared__ double red[4];
	__shared__ float redm[32];
	const int h = blockIdx.x, t = blockIdx.y, half = hd / 2, i = threadIdx.x;
	const bool isk = h >= nh, in = i < half;
	const int hh = isk ? h - nh : h;
	const float *x = isk ? k + ((size_t)t * nkv + hh) * hd : q + ((size_t)t * nh + hh) * hd;
	const float *w = store_only ? NULL : isk ? kw : qw;
	/* the model's constants before waiting for the kernel ahead (as rmsnorm) */
	const float w1 = w && in ? __ldg(w + i) : 0.0f, w2 = w && in ? __ldg(w + i + half) : 0.0f;
	const float fr = in ? __ldg(inv_freq + i) : 0.0f;

	pdl_entry();
	if (store_only && !isk)
		return; /* q as it is */
	float x1 = in ? x[i] : 0.0f, x2 = in ? x[i + half] : 0.0f;

	/* row t's position p and slot (COLI_GPU_ROWS: several sequences), stored
	 * at the cache row at */
	const int p = rows ? rows[COLI_GPU_ROWS * t] : (posp ? *posp : pos0) + t;
	const int slot = rows ? rows[COLI_GPU_ROWS * t + 1] : 0;

	if (w) {
		double ss = (double)x1 * x1 + (double)x2 * x2;

		for (int off = 16; off; off >>= 1)
			ss += __shfl_xor_sync(0xffffffffu, ss, off);
		if ((i & 31) == 0)
			red[i >> 5] = ss;
		__syncthreads();
		ss = 0.0;
		for (int k2 = 0; k2 < (int)(blockDim.x >> 5); k2++)
			ss += red[k2];
		const float inv = (float)(1.0 / sqrt(ss / hd + eps));

		if (in) {
			x1 = w1 * (x1 * inv);
			x2 = w2 * (x2 * inv);
		}
	}
	float o1 = x1, o2 = x2;

	if (!store_only) {
		const float ang = (float)p * fr;
		double dc, ds;

		sincos((double)ang, &ds, &dc);
		const float cs = (float)dc, sn = (float)ds;

		o1 = x1 * cs - x2 * sn, o2 = x2 * cs + x1 * sn;
		if (f != 1.0f) /* YaRN's factor, a rounding of its own (the CPU's rope_attn) */
			o1 = __fmul_rn(o1, f), o2 = __fmul_rn(o2, f);
	}
	if (!isk) {
		if (in) {
			q[((size_t)t * nh + hh) * hd + i] = o1;
			q[((size_t)t * nh + hh) * hd + i + half] = o2;
		}
		return;
	}
	const int kvd = nkv * hd, soff = ((kvd + 3) & ~3) + 4 * hh;
	const size_t at = kv_at(tab, nbs, slot, p);
	char *kr = (char *)kc + at * kv_row_size(kt, kvd, nkv);
	char *vrw = (char *)vc + at * kv_row_size(vt, kvd, nkv);
	const float *vr = v + ((size_t)t * nkv + hh) * hd;
	const float v1 = in ? vr[i] : 0.0f, v2 = in ? vr[i + half] : 0.0f;
	float ks = 0.0f, vs = 0.0f;

	if (kt == 2) /* block-uniform: every thread reaches the barriers */
		ks = kv_q8_scale(kv_block_max(fmaxf(fabsf(o1), fabsf(o2)), redm));
	if (vt == 2)
		vs = kv_q8_scale(kv_block_max(fmaxf(fabsf(v1), fabsf(v2)), redm));
	if (!in)
		return;
	kv_put(kr, kt, hh * hd + i, o1, ks);
	kv_put(kr, kt, hh * hd + i + half, o2, ks);
	kv_put(vrw, vt, hh * hd + i, v1, vs);
	kv_put(vrw, vt, hh * hd + i + half, v2, vs);
	if (i == 0 && kt == 2)
		*(float *)(kr + soff) = ks;
	if (i == 0 && vt == 2)
		*(float *)(vrw + soff) = vs;
}

/* y[r][i] += b[i] over rows*n elements */
extern "C" __global__ void coli_add_bias(float *y, const float *b, int rows, int n)
{
	pdl_entry();
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)rows * n)
		y[i] += b[i % n];
}

/* x += y over n elements */
extern "C" __global__ void coli_add(float *x, const float *y, int n)
{
	pdl_entry();
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] += y[i];
}

/* Rotate-half RoPE in place: x [T][nh][hd], one thread per (t, h, i < hd/2). */
extern "C" __global__ void coli_rope(float *x, int T, int nh, int hd, int pos0,
                                     const float *inv_freq)
{
	pdl_entry();
	int half = hd / 2;
	size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	int i, h, t;
	float ang, cs, sn, x1, x2, *v;
	double dc, ds;

	if (idx >= (size_t)T * nh * half)
		return;
	i = (int)(idx % half);
	h = (int)((idx / half) % nh);
	t = (int)(idx / ((size_t)half * nh));
	ang = (float)(pos0 + t) * inv_freq[i];
	sincos((double)ang, &ds, &dc); /* one range reduction for both, as cos/sin */
	cs = (float)dc;
	sn = (float)ds;
	v = x + ((size_t)t * nh + h) * hd;
	x1 = v[i];
	x2 = v[i + half];
	v[i] = x1 * cs - x2 * sn;
	v[i + half] = x2 * cs + x1 * sn;
}

/* x[t] = row ids[t] of an embedding table [vocab][H], dequantized. dtype: 2 bf16,
 * 8 q8_0, 9 q4_0 (enum coli_dtype), 0 f32; scales: the fp16 plane (quant). */
/* dst row r = src row idx[r], rows of w4 32-bit words: a MoE layer's pair
 * activations gathered from the token rows already on the device (no host
 * gather, no upload of the rows). One CTA a row. */
extern "C" __global__ void coli_gather_rows(unsigned *dst, const unsigned *src, const int *idx,
                                            int w4)
{
	pdl_entry();
	const unsigned *s = src + (size_t)idx[blockIdx.x] * w4;
	unsigned *d = dst + (size_t)blockIdx.x * w4;

	for (int i = threadIdx.x; i < w4; i += blockDim.x)
		d[i] = s[i];
}

extern "C" __global__ void coli_embed(const void *table, const unsigned short *scales, int dtype,
                                      const int *ids, float *x, int H)
{
	pdl_entry();
	const int t = blockIdx.x, r = ids[t];

	for (int i = threadIdx.x; i < H; i += blockDim.x) {
		float v;

		if (dtype == 2) {
			v = __uint_as_float(
			    (unsigned int)((const unsigned short *)table)[(size_t)r * H + i] << 16);
		} else if (dtype == 8) {
			float d =
			    __half2float(__ushort_as_half(scales[(size_t)r * (H / 32) + i / 32]));

			v = d * (float)((const signed char *)table)[(size_t)r * H + i];
		} else if (dtype == 9) {
			const unsigned char *b =
			    (const unsigned char *)table + (size_t)r * (H / 2) + (i / 32) * 16;
			int j = i % 32;
			int q = j < 16 ? (b[j] & 15) : (b[j - 16] >> 4);
			float d =
			    __half2float(__ushort_as_half(scales[(size_t)r * (H / 32) + i / 32]));

			v = d * (float)(q - 8);
		} else {
			v = ((const float *)table)[(size_t)r * H + i];
		}
		x[(size_t)t * H + i] = v;
	}
}

/* out[t] = sum over the pairs of token t, in pair order (ascending expert id),
 * of w_p * y_p: product rounded, then added, from +0 — core/moe/moe.c's bits.
 * Grid (ceil(H / 256), T): each CTA first lists token t's pairs in ascending
 * order (8 warps scan 8 slices; ballot counts, then ordered writes), then one
 * thread per element j sums them — the per-element order is the pair order,
 * whatever the grid. Tokens with more than ACC_MAXP pairs fall back to a
 * scan of all pairs in the same order. Pair p < 64 with bit p of hmask set
 * has its row at hy (host memory read through the mapping: the CPU's rows,
 * read here instead of pulled up first); a thread loads ACC_BATCH pairs'
 * elements before it sums them, so those reads cross the bus together, not
 * one round trip after another. */
#define ACC_MAXP  512
#define ACC_BATCH 8
static __device__ __forceinline__ const float *acc_row(const float *y, const float *hy,
                                                       unsigned long long hmask, int p, int H)
{
	return (p < 64 && (hmask >> p & 1) ? hy : y) + (size_t)p * H;
}

extern "C" __global__ void __launch_bounds__(256)
    coli_moe_accumulate(float *out, const float *y, const int *pair_token, const float *pair_w,
                        int n_pairs, int H, const float *hy, unsigned long long hmask)
{
	pdl_entry();
	__shared__ int list[ACC_MAXP];
	__shared__ int wcount[8], total;
	const int t = blockIdx.y;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int slice = ((n_pairs + 8 * 32 - 1) / (8 * 32)) * 32;
	const int b0 = warp * slice, b1 = min(n_pairs, b0 + slice);
	const unsigned lt = (1u << lane) - 1;
	int cnt = 0, base;

	for (int b = b0; b < b1; b += 32) {
		const bool hit = b + lane < b1 && __ldg(pair_token + b + lane) == t;

		cnt += __popc(__ballot_sync(0xffffffffu, hit));
	}
	if (lane == 0)
		wcount[warp] = cnt;
	__syncthreads(); /* per-warp counts, then each warp's offset */
	base = 0;
	for (int w = 0; w < warp; w++)
		base += wcount[w];
	if (threadIdx.x == 0) {
		int s = 0;

		for (int w = 0; w < 8; w++)
			s += wcount[w];
		total = s;
	}
	for (int b = b0; b < b1 && base < ACC_MAXP; b += 32) {
		const bool hit = b + lane < b1 && __ldg(pair_token + b + lane) == t;
		const unsigned m = __ballot_sync(0xffffffffu, hit);
		const int at = base + __popc(m & lt);

		if (hit && at < ACC_MAXP)
			list[at] = b + lane;
		base += __popc(m);
	}
	__syncthreads(); /* the list and total complete */
	/* a row's elements by the grid's x (one CTA a row for a prompt's many
	 * rows: the scan above is then paid once a row, not once a slice) */
	for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < H; j += gridDim.x * blockDim.x) {
		float o = 0.0f;

		if (total <= ACC_MAXP) {
			for (int k0 = 0; k0 < total; k0 += ACC_BATCH) {
				float v[ACC_BATCH], w[ACC_BATCH];

#pragma unroll
				for (int u = 0; u < ACC_BATCH; u++)
					if (k0 + u < total) {
						const int p = list[k0 + u];

						w[u] = __ldg(pair_w + p);
						v[u] = acc_row(y, hy, hmask, p, H)[j];
					}
#pragma unroll
				for (int u = 0; u < ACC_BATCH; u++)
					if (k0 + u < total)
						o = __fadd_rn(o, __fmul_rn(w[u], v[u]));
			}
		} else {
			for (int p = 0; p < n_pairs; p++)
				if (__ldg(pair_token + p) == t)
					o = __fadd_rn(o, __fmul_rn(__ldg(pair_w + p),
					                           acc_row(y, hy, hmask, p, H)[j]));
		}
		out[(size_t)t * H + j] = o;
	}
}

/* *out = the index of the largest of x[0..n), the first on ties; NaNs are
 * never the largest and a NaN x[0] gives 0: cpu/ coli_argmax's result (its
 * plain loop's), so greedy decoding picks the same token whichever side
 * looks. Better = larger, or equal with a lower index: a total order, so any
 * fold gives the loop's answer. Each thread keeps the best of its strided
 * share (a few loads in flight, the grid spread over the SMs), the warps and
 * the CTA fold, each CTA writes its best to part[2 * block] as (value,
 * index bits), and the last CTA to arrive (ptx/common/last_arrival.cuh) folds the
 * grid's. One CTA alone read the vocabulary at one SM's rate (~20 us for
 * 152k logits on the H200). */
#define AM_THREADS 256
static __device__ __forceinline__ void am_take(float &bv, int &bi, float v, int i)
{
	if (v == v && (bi < 0 || v > bv || (v == bv && i < bi)))
		bv = v, bi = i;
}

/* The CTA's fold of each thread's (bv, bi); every thread returns the CTA's.
 * Two folds in one CTA need a barrier between them (coli_argmax has the last
 * arrival's): the second writes what the first reads. */
static __device__ __forceinline__ void am_fold(float &bv, int &bi)
{
	__shared__ float sv[AM_THREADS / 32];
	__shared__ int si[AM_THREADS / 32];
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

	for (int off = 16; off; off >>= 1) {
		const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
		const int oi = __shfl_xor_sync(0xffffffffu, bi, off);

		if (oi >= 0)
			am_take(bv, bi, ov, oi);
	}
	if (lane == 0)
		sv[warp] = bv, si[warp] = bi;
	__syncthreads();
	bv = 0.0f, bi = -1;
	for (int w = 0; w < AM_THREADS / 32; w++)
		if (si[w] >= 0)
			am_take(bv, bi, sv[w], si[w]);
}

extern "C" __global__ void __launch_bounds__(AM_THREADS)
    coli_argmax(const float *x, int n, int *out, float *part, unsigned *count)
{
	pdl_entry();
	const int stride = gridDim.x * AM_THREADS;
	float bv = 0.0f;
	int bi = -1;

	for (int i0 = blockIdx.x * AM_THREADS + threadIdx.x; i0 < n; i0 += 4 * stride) {
		float v[4];

#pragma unroll
		for (int k = 0; k < 4; k++) /* the loads first, then the compares */
			v[k] = i0 + k * stride < n ? __ldg(x + i0 + k * stride) : 0.0f;
#pragma unroll
		for (int k = 0; k < 4; k++)
			if (i0 + k * stride < n)
				am_take(bv, bi, v[k], i0 + k * stride);
	}
	am_fold(bv, bi);
	if (threadIdx.x == 0) {
		part[2 * blockIdx.x] = bv;
		part[2 * blockIdx.x + 1] = __int_as_float(bi);
	}
	if (!last_arrival(count, gridDim.x))
		return;
	bv = 0.0f, bi = -1;
	for (int b = threadIdx.x; b < (int)gridDim.x; b += AM_THREADS) {
		const int i = __float_as_int(__ldcg(part + 2 * b + 1));

		if (i >= 0)
			am_take(bv, bi, __ldcg(part + 2 * b), i);
	}
	am_fold(bv, bi);
	if (threadIdx.x == 0)
		*out = x[0] != x[0] || bi < 0 ? 0 : bi;
}

/* out[t] += sigmoid(gate[t]) * y[t]  (Qwen2-MoE shared expert) */
extern "C" __global__ void coli_gated_add(float *out, const float *y, const float *gate, int H)
{
	pdl_entry();
	const int t = blockIdx.x;
	const float g = 1.0f / (1.0f + expf(-gate[t]));

	for (int j = threadIdx.x; j < H; j += blockDim.x)
		out[(size_t)t * H + j] += g * y[(size_t)t * H + j];
}
