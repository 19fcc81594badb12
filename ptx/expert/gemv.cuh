/*
 * ptx/expert/gemv.cuh — the frame every expert GEMV kernel shares (ptx/expert/kernels.cu:
 * q8_0, q4_0, bf16, f32; ptx/expert/kquant.cu: GGUF's block types): a job and a
 * group of rows from the grid, 16 canonical lanes a row, the fold and the
 * store. A dtype supplies only its lane loop (struct Row*::run).
 */
#ifndef COLI_PTX_GEMV_CUH
#define COLI_PTX_GEMV_CUH

#include <cuda_fp16.h>

#include "ptx/kernels_abi.h"
#include "ptx/common/pdl.cuh"

#define LANES 16

static __device__ __forceinline__ float fold16(float v)
{
	/* lanes j and j^h hold l[j], l[j+h]: after the step both hold their sum */
	v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 8, 16));
	v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 4, 16));
	v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2, 16));
	v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1, 16));
	return v;
}

static __device__ __forceinline__ float half_to_float(unsigned short h)
{
	return __half2float(__ushort_as_half(h));
}

static __device__ __forceinline__ float bf16_to_float(unsigned short h)
{
	return __uint_as_float((unsigned int)h << 16);
}

/* Rows a half-warp computes, their weight loads issued together: a layer's
 * gate+up table (16 jobs of 768 rows) at one row a half-warp was 768 CTAs,
 * two waves on an H200; two rows make it one wave with twice the loads in
 * flight a thread. Each row is still summed by its canonical lanes. */
#define GV_RPH       2
#define ROWS_PER_CTA (16 * GV_RPH)
static_assert(ROWS_PER_CTA == COLI_GPU_GEMV_ROWS, "the launchers' grid (ptx/gpu.c)");

/* The frame every GEMV kernel shares: job and rows from the grid, 16 lanes
 * per row, rows row0 + 16 r (r < GV_RPH) per half-warp, accumulators from +0,
 * then the canonical fold and the store. Row supplies the dtype's lane loop
 * (the units of lane `lane`, ascending, for each of the half-warp's rows;
 * rows past jb->rows are skipped). Row::WARP_WIDE: run is entered by every
 * half-warp, rows or none (it syncs the whole warp); else only by those
 * with a row. */
template <class Row>
static __device__ __forceinline__ void gemv(const struct coli_gpu_gemv_job *jobs)
{
	/* the table is in the launch's parameters or in mapped host memory
	 * (ptx/gpu.c): read it once per CTA */
	__shared__ struct coli_gpu_gemv_job sj;

	static_assert(sizeof(sj) % 4 == 0 && sizeof(sj) / 4 <= 256, "job copy");
	if (threadIdx.x < sizeof(sj) / 4)
		((unsigned *)&sj)[threadIdx.x] = ((const unsigned *)&jobs[blockIdx.y])[threadIdx.x];
	__syncthreads();
	const struct coli_gpu_gemv_job *jb = &sj;
	const int lane = threadIdx.x & (LANES - 1);
	const int row0 = blockIdx.x * ROWS_PER_CTA + (threadIdx.x >> 4);
	float acc[GV_RPH][COLI_GPU_MAX_S];

#pragma unroll
	for (int r = 0; r < GV_RPH; r++)
#pragma unroll
		for (int s = 0; s < COLI_GPU_MAX_S; s++)
			acc[r][s] = 0.0f;
	if (Row::WARP_WIDE || row0 < jb->rows)
		Row::run(jb, row0, lane, acc);
		/* every lane folds, valid or not: shfl_xor needs the whole warp */
#pragma unroll
	for (int r = 0; r < GV_RPH; r++) {
		const int row = row0 + 16 * r;

#pragma unroll
		for (int s = 0; s < COLI_GPU_MAX_S; s++) {
			if (s >= jb->S)
				break;
			float v = fold16(acc[r][s]);

			if (row < jb->rows && lane == 0)
				jb->y[(size_t)s * jb->ldy + row] = v;
		}
	}
}

/* A dtype's two entry points: the job table in memory, or in the launch's
 * parameters (_inl, up to COLI_GPU_INL_JOBS jobs); min_blocks per SM for
 * __launch_bounds__. */
#define GEMV_KERNELS(name, Row, min_blocks)                                                        \
	extern "C" __global__ void __launch_bounds__(256, min_blocks)                              \
	    coli_gemv_##name(const struct coli_gpu_gemv_job *jobs)                                 \
	{                                                                                          \
		pdl_entry();                                                                       \
		gemv<Row>(jobs);                                                                   \
	}                                                                                          \
	extern "C" __global__ void __launch_bounds__(256, min_blocks)                              \
	    coli_gemv_##name##_inl(const __grid_constant__ struct coli_gpu_gemv_inline p)          \
	{                                                                                          \
		pdl_entry();                                                                       \
		gemv<Row>(p.j);                                                                    \
	}

#endif
