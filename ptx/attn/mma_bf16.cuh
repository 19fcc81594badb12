/*
 * ptx/attn/mma_bf16.cuh — bf16 tensor-core steps with fp32 operands split into
 * bf16 terms, shared by the latent attention's decode kernel
 * (ptx/attn/mla_decode.cuh) and the typed-cache attention (ptx/attn/attn_tc.cuh):
 * packing and splitting floats, one mma.sync m16n8k16, and ldmatrix.
 */
#ifndef COLI_PTX_MMA_BF16_CUH
#define COLI_PTX_MMA_BF16_CUH

#include "ptx/common/cp_async.cuh"

/* Two floats to bf16 (round to nearest even), packed: lo in the low half. */
static __device__ __forceinline__ unsigned md_bf2(float lo, float hi)
{
	unsigned r;

	asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
	return r;
}

/* x.x (low half), x.y split into NS packed bf16 terms, r[0], r[stride], ...:
 * each term the rounding of what the terms before it left (exact fp32
 * differences). */
template <int NS> static __device__ __forceinline__ void md_split(float2 x, unsigned *r, int stride)
{
#pragma unroll
	for (int s = 0; s < NS; s++) {
		const unsigned p = md_bf2(x.x, x.y);

		r[s * stride] = p;
		x.x -= __uint_as_float(p << 16);
		x.y -= __uint_as_float(p & 0xffff0000u);
	}
}

/* d += a . b, one m16n8k16 tile, bf16 in, fp32 accumulate (fragments as the
 * PTX ISA lays them out: g = lane / 4, c = lane % 4; a: (g, 2c..) (g+8, 2c..)
 * (g, 2c+8..) (g+8, 2c+8..); b: (k 2c.., n g) (k 2c+8.., n g); d: (g, 2c)
 * (g, 2c+1) (g+8, 2c) (g+8, 2c+1)). */
static __device__ __forceinline__ void md_mma(float *d, const unsigned *a, unsigned b0, unsigned b1)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
	             "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Four 8x8 bf16 matrices transposed, rows at the lanes' addresses (lanes 8m
 * .. 8m + 7 matrix m): the B fragments of two k-steps of a row-major [k][n]
 * tile, lane l pointing at row l. */
static __device__ __forceinline__ void md_ldsm4t(unsigned *r, const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(smem_addr(p))
	             : "memory");
}

/* Four 8x8 bf16 matrices as stored, rows at the lanes' addresses (lanes 8m
 * .. 8m + 7 matrix m): the A fragment of a row-major [m][k] tile, lane l
 * pointing at row (l & 7) + 8 ((l >> 3) & 1), column 8 (l >> 4). */
static __device__ __forceinline__ void md_ldsm4(unsigned *r, const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(smem_addr(p))
	             : "memory");
}

#endif
