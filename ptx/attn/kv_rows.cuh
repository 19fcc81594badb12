/*
 * ptx/attn/kv_rows.cuh — the KV cache's rows in their types (cpu/cpu.h "typed
 * KV cache rows", cpu/kvq.c the CPU's form), read by the attention kernels
 * (ptx/attn/attention.cu, attn_prefill.cu, mla.cu) and written by the kernels
 * that fill the cache (ptx/dense/dense.cu coli_qk_rope_store, ptx/attn/mla.cu
 * coli_mla_prep).
 *
 * Addressing: a layer's cache is [n_blocks][KV_BLOCK] rows, the host pool's
 * blocks (core/forward/kv.h: the same block ids, kv.c their one owner);
 * slot s's position p is row kv_at(tab, nbs, s, p) of it, through the
 * device block table tab [n_seq][nbs] (core/forward/dense_dev.c keeps it
 * current before a step's launches). Every reader and writer of the dense
 * cache goes through kv_at; a chunk of KV_BLOCK positions aligned to
 * KV_BLOCK (the attention's AD_CHUNK) is one block: one lookup, then its
 * rows are consecutive.
 *
 * Writing: fp32 as is, bf16 rounded to
 * nearest even (NaN kept quiet), q8 with one fp32 scale a segment, scale =
 * amax / 127 and q = rint(x / scale) by IEEE divisions (__fdiv_rn), 0 where
 * amax is 0: the CPU's bits for the same fp32 values.
 */
#ifndef COLI_PTX_KV_ROWS_CUH
#define COLI_PTX_KV_ROWS_CUH

#include "ptx/kernels_abi.h" /* COLI_GPU_ROWS */

#define KV_BLOCK       32 /* positions a block: COLI_KV_BLOCK (core/forward/kv.h) */
#define KV_BLOCK_SHIFT 5

/* Row of slot's position p in a layer's [n_blocks][KV_BLOCK] rows:
 * tab[slot * nbs + p / KV_BLOCK] * KV_BLOCK + p % KV_BLOCK. tab NULL: the
 * identity table (slot s's blocks s * nbs ..: a contiguous [n_seq][nbs *
 * KV_BLOCK] cache, the kernel tests' and MLA's). The table does not change
 * during a launch (uploaded on the stream before it): a read-only load. */
static __device__ __forceinline__ size_t kv_at(const int *tab, int nbs, int slot, int p)
{
	const size_t j = (size_t)slot * nbs + (p >> KV_BLOCK_SHIFT);
	const size_t b = tab ? (size_t)__ldg(tab + j) : j;

	return b << KV_BLOCK_SHIFT | (size_t)(p & (KV_BLOCK - 1));
}

/* Query t's positions seen (its position + 1) and its sequence's slot
 * (*slot; the cache's rows are kv_at(tab, nbs, *slot, p), ptx/attn/kv_rows.cuh):
 * the row table's when the launch holds several sequences (rows,
 * COLI_GPU_ROWS: ptx/kernels_abi.h); else slot 0 (the caller's table
 * starts at the run's slot) at pos0 + t, pos0 read at posp when given. */
static __device__ __forceinline__ int attn_row(int pos0, const int *posp, const int *rows, int t,
                                               int *slot)
{
	if (!rows) {
		*slot = 0;
		return (posp ? *posp : pos0) + t + 1;
	}
	*slot = rows[COLI_GPU_ROWS * t + 1];
	return rows[COLI_GPU_ROWS * t] + 1;
}

static __device__ __forceinline__ unsigned short kv_bf16(float x)
{
	const unsigned u = __float_as_uint(x);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (unsigned short)((u >> 16) | 0x40);
	return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* q8 scale of a segment whose |max| is amax. */
static __device__ __forceinline__ float kv_q8_scale(float amax)
{
	return __fdiv_rn(amax, 127.0f);
}

/* Element i of a row at `row` of type t (0 f32, 1 bf16, 2 q8 with scale s). */
static __device__ __forceinline__ void kv_put(void *row, int t, int i, float x, float s)
{
	if (t == 0) {
		((float *)row)[i] = x;
	} else if (t == 1) {
		((unsigned short *)row)[i] = kv_bf16(x);
	} else {
		float r = s > 0.0f ? rintf(__fdiv_rn(x, s)) : 0.0f;

		r = fminf(fmaxf(r, -127.0f), 127.0f);
		((signed char *)row)[i] = (signed char)(int)r;
	}
}

/* The max of v over the CTA's threads (blockDim.x a multiple of 32, at most
 * 32 warps); red: 32 floats of shared memory. Every thread gets it. */
static __device__ __forceinline__ float kv_block_max(float v, float *red)
{
	for (int off = 16; off; off >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
	__syncthreads(); /* red's previous use read by all */
	if ((threadIdx.x & 31) == 0)
		red[threadIdx.x >> 5] = v;
	__syncthreads(); /* every warp's max written */
	v = 0.0f;
	for (int w = 0; w < (int)(blockDim.x >> 5); w++)
		v = fmaxf(v, red[w]);
	return v;
}

/* Bytes of a row of n values in nseg q8 segments. */
static __device__ __forceinline__ size_t kv_row_size(int t, int n, int nseg)
{
	return t == 0   ? 4 * (size_t)n
	       : t == 1 ? 2 * (size_t)n
	                : (((size_t)n + 3) & ~(size_t)3) + 4 * (size_t)nseg;
}

/* Reading. A kernel is instantiated for a KV mode M: the key type KT(M) and the value
 * type VT(M), 0 f32, 1 bf16, 2 q8 (an int8 row of a kv head's hd values,
 * its fp32 scale after the row's values: at byte align4(nkv * hd) + 4 *
 * kvh). Modes: 0 f32, 1 bf16, 2 q8, 3 q8 keys with bf16 values. Only the
 * loads depend on the type: a bf16 element is its bits shifted up (exact), a
 * q8 one (float)q * scale (one rounded product, __fmul_rn: the CPU's bits
 * for that value), and the arithmetic after them is the f32 kernel's. */
#define KV_MODES 4
template <int M> struct kvmode {
	static constexpr int KT = M == 0 ? 0 : M == 1 ? 1 : 2;
	static constexpr int VT = M == 0 ? 0 : M == 1 ? 1 : M == 2 ? 2 : 1;
};
template <int T> static __device__ __forceinline__ constexpr int kv_esz()
{
	return T == 0 ? 4 : T == 1 ? 2 : 1;
}
/* The q8 scale of the row at `row` (byte soff), else 1 (unused). */
template <int T> static __device__ __forceinline__ float kv_scale(const char *row, int soff)
{
	if (T == 2)
		return __ldg((const float *)(row + soff));
	return 1.0f;
}
/* A read-only load: __ldg from global memory, or a plain one from shared
 * memory (SH: a row staged there, ptx/attn/attention.cu's chunk kernel). */
template <bool SH, typename X> static __device__ __forceinline__ X kv_load(const X *p)
{
	if constexpr (SH)
		return *p;
	else
		return __ldg(p);
}
/* Elements 4u .. 4u + 3 of the values at h (a head's in one row). */
template <int T, bool SH = false>
static __device__ __forceinline__ float4 kv_ld4(const char *h, int u, float s)
{
	if (T == 0)
		return kv_load<SH>((const float4 *)h + u);
	if (T == 1) {
		const uint2 w = kv_load<SH>((const uint2 *)h + u);

		return make_float4(__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xffff0000u),
		                   __uint_as_float(w.y << 16), __uint_as_float(w.y & 0xffff0000u));
	}
	const int w = kv_load<SH>((const int *)h + u);

	return make_float4(__fmul_rn((float)(signed char)(w & 0xff), s),
	                   __fmul_rn((float)(signed char)((w >> 8) & 0xff), s),
	                   __fmul_rn((float)(signed char)((w >> 16) & 0xff), s),
	                   __fmul_rn((float)(signed char)((w >> 24) & 0xff), s));
}
/* Element i of the values at h. */
template <int T, bool SH = false>
static __device__ __forceinline__ float kv_ld1(const char *h, int i, float s)
{
	if (T == 0)
		return kv_load<SH>((const float *)h + i);
	if (T == 1)
		return __uint_as_float((unsigned)kv_load<SH>((const unsigned short *)h + i) << 16);
	return __fmul_rn((float)kv_load<SH>((const signed char *)h + i), s);
}

#endif
