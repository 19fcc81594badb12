/*
 * ptx/kquant.cu — expert GEMV kernels for GGUF's block types kept as stored
 * (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), bit for bit the CPU's
 * canonical reduction of these types (cpu/kquant/kquant.c, its top comment):
 *
 *   the unit is the 32-element activation block b, lane b % 16 of the row's
 *   16 canonical lanes (ptx/gemv.cuh: a half-warp a row, units ascending);
 *   per unit two exact integers A (weights x activations, group scales
 *   applied) and C (the min term), then
 *       l = fmaf((float)A, d * dx[b], l)
 *       l = fmaf((float)C, dm * dx[b], l)      (types with a min)
 *   with d * dx and dm * dx rounded to fp32 first; the fold of gemv.cuh.
 *
 * The integers come from dp4a over 4-byte words of quants, so their order is
 * free; the K-quants' per-group "- 32 x" (Q6_K) and "- 4 x" (Q3_K) offsets
 * become dp4a over unsigned quants minus the offset times the group's
 * activation sum (dp4a with 0x01010101), the same integer.
 *
 * Layout (cpu/dtype.h): a row is its K / elems blocks back to back exactly
 * as GGUF stores them, scales beside quants; the job's `scales` is unused.
 * A lane's unit of a K-quant is always group b % 8 = lane % 8 of its block,
 * so the group's shifts and scale positions are fixed for the lane.
 *
 * The dtypes' structs (their loads and integers) are ptx/kquant.cuh's,
 * shared with the GEMM of prefill (ptx/kquant_gemm.cu). RowKQ runs a lane's
 * units over the half-warp's rows with the weights loaded once for the S
 * tokens (U::UNROLL units a lane at once).
 */
#include "ptx/kquant.cuh"

/* CTAs an SM. H200, `tests/ptx/dense_kernels --bench kquant`, qwen3-235b's
 * gate+up table as a fraction of copy bandwidth: 3 CTAs an SM over 2 took
 * q4_k 0.43 -> 0.50, q5_k 0.49 -> 0.54. */
#define KQ_MB 3

/* A lane's units b = lane, lane + 16, ... of the half-warp's rows: the
 * weights of U::UNROLL units loaded at once, then each token's canonical
 * update, unit after unit. */
template <class U> struct RowKQ {
	static __device__ __forceinline__ void run(const struct coli_gpu_gemv_job *jb, int row0,
	                                           int lane, float (*acc)[COLI_GPU_MAX_S])
	{
		const int K = jb->K, S = jb->S, nb = K / 32;
		const size_t rb = (size_t)(K / U::ELEMS) * U::BYTES;

		for (int b0 = lane; b0 < nb; b0 += LANES * U::UNROLL) {
			U w[U::UNROLL][GV_RPH];

#pragma unroll
			for (int k = 0; k < U::UNROLL; k++)
#pragma unroll
				for (int r = 0; r < GV_RPH; r++)
					if (row0 + 16 * r < jb->rows && b0 + k * LANES < nb)
						w[k][r].load((const u8 *)jb->w +
						                 (size_t)(row0 + 16 * r) * rb,
						             b0 + k * LANES, lane);
#pragma unroll
			for (int k = 0; k < U::UNROLL; k++) {
				const int b = b0 + k * LANES;

				if (b >= nb)
					break;
#pragma unroll
				for (int s = 0; s < COLI_GPU_MAX_S; s++) {
					if (s >= S)
						break;
					const signed char *xq = jb->xq + (size_t)s * K + b * 32;
					const int4 x0 = *(const int4 *)xq,
					           x1 = *(const int4 *)(xq + 16);
					const int x[8] = {x0.x, x0.y, x0.z, x0.w,
					                  x1.x, x1.y, x1.z, x1.w};
					const float xd = jb->xd[(size_t)s * nb + b];
					const int xs = jb->xqsum[(size_t)s * nb + b];

#pragma unroll
					for (int r = 0; r < GV_RPH; r++) {
						int A, C;

						if (row0 + 16 * r >= jb->rows)
							continue;
						w[k][r].ints(x, xs, A, C);
						acc[r][s] = __fmaf_rn(
						    (float)A, __fmul_rn(w[k][r].fa, xd), acc[r][s]);
						if (U::MIN)
							acc[r][s] = __fmaf_rn(
							    (float)C, __fmul_rn(w[k][r].fc, xd),
							    acc[r][s]);
					}
				}
			}
		}
	}
};

GEMV_KERNELS(q4_1, RowKQ<KQ4_1>, KQ_MB)
GEMV_KERNELS(q5_0, RowKQ<KQ5<0>>, KQ_MB)
GEMV_KERNELS(q5_1, RowKQ<KQ5<1>>, KQ_MB)
GEMV_KERNELS(q2_k, RowKQ<KQ2K>, KQ_MB)
GEMV_KERNELS(q3_k, RowKQ<KQ3K>, KQ_MB)
GEMV_KERNELS(q4_k, RowKQ<KQ45K<0>>, KQ_MB)
GEMV_KERNELS(q5_k, RowKQ<KQ45K<1>>, KQ_MB)
GEMV_KERNELS(q6_k, RowKQ<KQ6K>, KQ_MB)

/* ---- embedding rows of a block-type table ----
 *
 * x[t] = row ids[t] of table [vocab][H] dequantized, value for value the
 * CPU's (cpu/ggml.c, the gguf package's formulas; -fmad=false keeps each
 * product rounded as there). One CTA a token, a thread an element. */
enum { /* enum coli_dtype's values (cpu/dtype.h) */
       COLI_DTYPE_Q4_1 = 10,
       COLI_DTYPE_Q5_0 = 11,
       COLI_DTYPE_Q5_1 = 12,
       COLI_DTYPE_Q2_K = 13,
       COLI_DTYPE_Q3_K = 14,
       COLI_DTYPE_Q4_K = 15,
       COLI_DTYPE_Q5_K = 16,
       COLI_DTYPE_Q6_K = 17,
};

static __device__ float kq_elem(int dtype, const u8 *row, int p)
{
	const int j = p % 32;

	switch (dtype) {
	case COLI_DTYPE_Q4_1: {
		const u8 *b = row + (size_t)(p / 32) * 20;
		const int q = b[4 + (j & 15)] >> (j & 16 ? 4 : 0) & 15;

		return half_at(b) * (float)q + half_at(b + 2);
	}
	case COLI_DTYPE_Q5_0:
	case COLI_DTYPE_Q5_1: {
		const int one = dtype == COLI_DTYPE_Q5_1;
		const u8 *b = row + (size_t)(p / 32) * (one ? 24 : 22), *qh = b + (one ? 4 : 2);
		const int q = (b[(one ? 8 : 6) + (j & 15)] >> (j & 16 ? 4 : 0) & 15) |
		              (qh[j / 8] >> (j % 8) & 1) << 4;

		return one ? half_at(b) * (float)q + half_at(b + 2) : half_at(b) * (float)(q - 16);
	}
	case COLI_DTYPE_Q2_K: {
		const u8 *b = row + (size_t)(p / 256) * 84;
		const int k = p % 256, g = k / 16;
		const int q = b[16 + k / 128 * 32 + k % 32] >> (2 * (k / 32 % 4)) & 3;
		const float dl = half_at(b + 80) * (float)(b[g] & 0xf),
		            ml = half_at(b + 82) * (float)(b[g] >> 4);

		return dl * (float)q - ml;
	}
	case COLI_DTYPE_Q3_K: {
		const u8 *b = row + (size_t)(p / 256) * 110, *s = b + 96;
		const int k = p % 256, g = k / 16;
		const int lo = g < 8 ? s[g] & 0xf : s[g - 8] >> 4,
		          hi = s[8 + g % 4] >> (2 * (g / 4)) & 3;
		const int q = (b[32 + k / 128 * 32 + k % 32] >> (2 * (k / 32 % 4)) & 3) -
		              ((b[k % 32] >> (k / 32) & 1) ? 0 : 4);

		return half_at(b + 108) * (float)((lo | hi << 4) - 32) * (float)q;
	}
	case COLI_DTYPE_Q4_K:
	case COLI_DTYPE_Q5_K: {
		const int five = dtype == COLI_DTYPE_Q5_K;
		const u8 *b = row + (size_t)(p / 256) * (five ? 176 : 144), *s = b + 4;
		const int k = p % 256, g = k / 32;
		int sc, m, q = b[(five ? 48 : 16) + g / 2 * 32 + j] >> (g % 2 * 4) & 0xf;

		if (five)
			q |= (b[16 + j] >> g & 1) << 4;
		if (g < 4) {
			sc = s[g] & 63, m = s[g + 4] & 63;
		} else {
			sc = (s[g + 4] & 0xf) | (s[g - 4] >> 6) << 4;
			m = (s[g + 4] >> 4) | (s[g] >> 6) << 4;
		}
		return half_at(b) * (float)sc * (float)q - half_at(b + 2) * (float)m;
	}
	case COLI_DTYPE_Q6_K: {
		const u8 *b = row + (size_t)(p / 256) * 210;
		const int k = p % 256, h = k / 128, i = k % 128;
		const int lo = b[h * 64 + i % 64] >> (i / 64 * 4) & 0xf;
		const int hi = b[128 + h * 32 + i % 32] >> (2 * (i / 32)) & 3;

		return half_at(b + 208) * (float)(signed char)b[192 + k / 16] *
		       (float)((lo | hi << 4) - 32);
	}
	}
	return __int_as_float(0x7fc00000);
}

extern "C" __global__ void coli_embed_kq(const u8 *table, int dtype, unsigned long long row_bytes,
                                         const int *ids, float *x, int H)
{
	pdl_entry();
	const u8 *row = table + (size_t)ids[blockIdx.x] * row_bytes;

	for (int i = threadIdx.x; i < H; i += blockDim.x)
		x[(size_t)blockIdx.x * H + i] = kq_elem(dtype, row, i);
}
