/*
 * ptx/expert/gemm_frame.cuh — the frame the integer GEMMs of prefill share
 * (ptx/expert/gemm.cu: q8_0 / q4_0; ptx/expert/kquant_gemm.cu: GGUF's block types): the
 * int8 mma and its operand loads, the job and tile of a CTA, the four K
 * groups' walk over the canonical fold tree and the fold itself (leaves in
 * registers + shared memory, the last two levels across groups), the
 * store. ptx/expert/gemm.cu's top essay says how these reproduce the CPU's
 * canonical reduction bit for bit; a dtype adds its staging and its step.
 *
 * Warp tiles are 32 rows (MF = 2 mma tiles of 16) x 8 * QN tokens; output
 * o = (mf * QN + nf) * 4 + e of a thread is row wm*32 + mf*16 + g + 8*(e >= 2),
 * token wn*8*QN + nf*8 + 2*t4 + (e & 1) (the mma's C layout; g = lane / 4,
 * t4 = lane % 4).
 */
#ifndef COLI_PTX_GEMM_FRAME_CUH
#define COLI_PTX_GEMM_FRAME_CUH

#include "ptx/common/cp_async.cuh"
#include "ptx/kernels_abi.h"
#include "ptx/common/pdl.cuh"

#define MF 2 /* mma row tiles per warp (16 rows each) */

#define MAGIC_BITS 0x4B400000 /* 1.5 * 2^23 */
#define MAGIC_F    12582912.0f

#define QTHREADS COLI_GPU_GEMM_THREADS_Q

static __device__ __forceinline__ void ldsm4(unsigned *r, const void *p)
{
	asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
	             : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
	             : "r"(smem_addr(p)));
}

template <bool Q4>
static __device__ __forceinline__ void mma_i8(int *d, const unsigned *a, const unsigned *b,
                                              const int *c)
{
	if (Q4)
		asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0, %1, %2, %3}, "
		             "{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
		             : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
		             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
		               "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
	else
		asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, "
		             "{%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
		             : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
		             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
		               "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

/* The K groups of a CTA (ptx/expert/gemm.cu top): group g owns the blocks b with
 * b % 4 == g, i.e. the canonical lanes g, g + 4, g + 8, g + 12 — one subtree
 * of the fold tree — visited in the subtree's left-to-right leaf order. */
#define QG 4

/* Lane of leaf k (0-3) of group g's subtree: g, g + 8, g + 4, g + 12 */
static __device__ __forceinline__ int leaf_lane(int g, int k)
{
	return g + (k & 1) * 8 + (k >> 1) * 4;
}

/* From leaf k on, the first leaf with blocks (k = 4: none) and its first
 * block (nb: none). */
static __device__ __forceinline__ void first_block(int g, int &k, int &b, int nb)
{
	while (k < QG && leaf_lane(g, k) >= nb)
		k++;
	b = k < QG ? leaf_lane(g, k) : nb;
}

/* After block b of leaf k: the next block in leaf order. */
static __device__ __forceinline__ void next_block(int g, int &k, int &b, int nb)
{
	if ((b += 16) >= nb)
		k++, first_block(g, k, b, nb);
}

/* The job of this CTA: jobs[] is sorted by tile0. */
static __device__ __forceinline__ const struct coli_gpu_gemm_job *
find_job(const struct coli_gpu_gemm_job *jobs, int n_jobs)
{
	int lo = 0, hi = n_jobs - 1, bid = (int)blockIdx.x;

	while (lo < hi) {
		int mid = (lo + hi + 1) >> 1;

		if (jobs[mid].tile0 <= bid)
			lo = mid;
		else
			hi = mid - 1;
	}
	return &jobs[lo];
}

/* This CTA's tile of its job, tiles of BM rows x BN tokens, tokens
 * fastest: (first row, first token). */
template <int BM, int BN>
static __device__ __forceinline__ int2 tile_origin(const struct coli_gpu_gemm_job &jb)
{
	const int local = (int)blockIdx.x - jb.tile0, ntt = (jb.S + BN - 1) / BN;

	return make_int2(local / ntt * BM, local % ntt * BN);
}

/* One 32-byte row of a stage, 16-byte chunk c, swizzled by (row / 4) % 2. */
static __device__ __forceinline__ int swz32(int row, int c)
{
	return row * 32 + ((c ^ (row >> 2)) & 1) * 16;
}

/* A thread's N partial sums in shared memory: row r of a [QTHREADS][N]
 * array, read and written 4 outputs (16 bytes) at a time. Chunk c is stored
 * at c XOR the row (N = 16: row / 2), so the 8 threads of a 16-byte access
 * phase hit 8 different bank quads. */
template <int N> static __device__ __forceinline__ float4 *part(float *a, int r, int c)
{
	return (float4 *)(a + r * N) + ((c ^ (N >= 32 ? r : r >> 1)) & (N / 4 - 1));
}

static __device__ __forceinline__ float4 add4(float4 a, float4 b)
{
	return make_float4(__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y), __fadd_rn(a.z, b.z),
	                   __fadd_rn(a.w, b.w));
}

/* Leaf k of the group's subtree is done (its lane's sum in acc): the
 * canonical tree's h = 8 and h = 4 levels. Leaves 0 and 2 wait in p1; leaf
 * 1 completes l[g] + l[g + 8], kept in p2; leaf 3 completes l[g + 4] +
 * l[g + 12] and adds it to p2: acc = l[g] after h = 4. p2, and p1 when P1S,
 * are this thread's row of shared memory (part()); else p1 is registers
 * (p1r). k is warp-uniform. */
template <int N, bool P1S> /* outputs a thread */
static __device__ __forceinline__ void fold_leaf(int k, float *acc, float *p1r, float *p1,
                                                 float *p2)
{
	const int r = threadIdx.x;

	for (int c = 0; c < N / 4; c++) {
		float4 *a = (float4 *)&acc[4 * c],
		       *q1 = P1S ? part<N>(p1, r, c) : (float4 *)&p1r[4 * c];

		if (!(k & 1))
			*q1 = *a;
		else if (k == 1)
			*part<N>(p2, r, c) = add4(*q1, *a);
		else
			*a = add4(*part<N>(p2, r, c), add4(*q1, *a));
		if (k != 3)
			*a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
	}
}

/* y of a warp tile of 32 rows x 8 * QN tokens: rows wm*32.., tokens
 * wn*8*QN.. of the CTA tile at (row0, tok0) */
template <int QN>
static __device__ __forceinline__ void store_tile(const struct coli_gpu_gemm_job &jb, int row0,
                                                  int tok0, int wm, int wn, const float *acc)
{
	const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;

	for (int mf = 0; mf < MF; mf++)
		for (int nf = 0; nf < QN; nf++)
			for (int e = 0; e < 4; e++) {
				const int r = row0 + wm * 32 + mf * 16 + g + (e >> 1) * 8;
				const int t = tok0 + wn * 8 * QN + nf * 8 + 2 * t4 + (e & 1);

				if (r < jb.rows && t < jb.S)
					jb.y[(size_t)t * jb.ldy + r] = acc[(mf * QN + nf) * 4 + e];
			}
}

/* The canonical tree's last levels, h = 2 (l[0] + l[2], l[1] + l[3]) and
 * h = 1, through the p2 rows (every group is past its last use of them:
 * the caller has drained its copies), then group 0 stores y. */
template <int NOUT, int QN>
static __device__ __forceinline__ void fold_groups(const struct coli_gpu_gemm_job &jb, int row0,
                                                   int tok0, int wm, int wn, int grp, float *acc,
                                                   float *p2)
{
	const int tid = threadIdx.x;

	__syncthreads();
	if (grp >= 2)
		for (int c = 0; c < NOUT / 4; c++)
			*part<NOUT>(p2, tid - 256, c) = *(float4 *)&acc[4 * c];
	__syncthreads();
	if (grp < 2)
		for (int c = 0; c < NOUT / 4; c++)
			*(float4 *)&acc[4 * c] =
			    add4(*(float4 *)&acc[4 * c], *part<NOUT>(p2, tid, c));
	if (grp == 1) /* into group 2's rows, idle now (group 0 still reads its own) */
		for (int c = 0; c < NOUT / 4; c++)
			*part<NOUT>(p2, tid + 128, c) = *(float4 *)&acc[4 * c];
	__syncthreads();
	if (grp == 0) {
		for (int c = 0; c < NOUT / 4; c++)
			*(float4 *)&acc[4 * c] =
			    add4(*(float4 *)&acc[4 * c], *part<NOUT>(p2, tid + 256, c));
		store_tile<QN>(jb, row0, tok0, wm, wn, acc);
	}
}

/* Two entry points per kernel: the job table in device memory, or (up to
 * COLI_GPU_INL_JOBS jobs: a prefill chunk's dense matrices, a small MoE
 * layer) in the launch's parameters, with nothing to copy first. */
#define GEMM_KERNELS(name, fn, threads)                                                            \
	extern "C" __global__ void __launch_bounds__(threads, 1)                                   \
	    coli_gemm_##name(const struct coli_gpu_gemm_job *jobs, int n_jobs)                     \
	{                                                                                          \
		pdl_entry();                                                                       \
		fn(jobs, n_jobs);                                                                  \
	}                                                                                          \
	extern "C" __global__ void __launch_bounds__(threads, 1) coli_gemm_##name##_inl(           \
	    const __grid_constant__ struct coli_gpu_gemm_inline p, int n_jobs)                     \
	{                                                                                          \
		pdl_entry();                                                                       \
		fn(p.j, n_jobs);                                                                   \
	}

#endif
