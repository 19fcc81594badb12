/*
 * ptx/gemm.cu — the batched expert GEMM of prefill on tensor cores: one
 * launch runs many jobs, each one expert matrix W [rows x K] times S tokens
 * (struct coli_gpu_gemm_job, S up to the engine's tmax * top_k).
 *
 * q8_0 / q4_0: int8 mma.sync, and still THE CANONICAL REDUCTION of cpu/cpu.h
 * bit for bit (the placement invariant holds at prefill too):
 *
 *   - one m16n8k32 mma spans exactly one 32-block, so its int32 result is the
 *     block's exact dot product sum(wq * xq) for 16 rows x 8 tokens. q4_0
 *     runs u8 x s8 on the unsigned nibbles and subtracts 8 * qsum(x), as the
 *     GEMV kernels and the AVX code do; the integer is the same either way.
 *   - the accumulator input of that mma is the integer 0x4B400000 (the bits
 *     of 1.5 * 2^23), minus 8 * qsum for q4: the result's bits are then the
 *     float 1.5 * 2^23 + s, and one exact subtraction gives (float)s
 *     (|s| <= 32*127*127 < 2^22), which is cheaper than an I2F.
 *   - each output (row r, token t) then takes, per block b, exactly the CPU's
 *         l[b % 16] = fmaf((float)s, dw[r][b] * dx[t][b], l[b % 16])
 *     with dw * dx rounded to fp32 first (__fmul_rn, __fmaf_rn: -fmad=false).
 *   - the 16 lanes are not held at once (16 registers per output would not
 *     fit): blocks are visited lane by lane, lanes in the bit-reversed order
 *     0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15, blocks of a lane
 *     ascending. That is the left-to-right leaf order of the CPU's fold tree
 *     (h = 8, 4, 2, 1), so a finished lane is folded at once into a stack of
 *     partial sums (one per tree level, as in a binary counter). The CTA's
 *     two warp groups take the even and the odd lanes — the tree's two
 *     subtrees — each with a stack of 3 (4 registers per output instead of
 *     16), and the root y = o0 + o1 goes through shared memory at the end.
 *     A lane without blocks (K < 512) folds its +0.0f like the CPU's does.
 *
 * bf16: bf16 mma with fp32 accumulation. The tensor core's summation order
 * and intermediate rounding are not ours, so this is exact only within
 * rounding — the one documented exception to the placement invariant
 * (docs/perf/kernels.md). The fp32 activations are split x = hi + lo into
 * two bf16 (two mmas), so the product keeps ~16 bits of x instead of 8.
 *
 * Tiling, q8/q4: a CTA of 256 threads computes 64 rows x 64 tokens; each
 * warp group (4 warps, 2 x 2) covers the tile with warp tiles of 32 x 32
 * (2 x 4 mma tiles) over its half of the blocks. Launches of short runs
 * (coli_gemm_<dtype>_s, chosen in ptx/gpu.c) use 64 x 32 tiles, warp tiles
 * of 32 x 16: half the epilogue a K step, 170 registers without spills
 * where the wide tile takes 255 and spills ~80 bytes. A K step stages the next
 * block of each group (q8: 4 stages, q4: 5). bf16: 8 warps (4 along rows x
 * 2 along tokens) compute 128 rows x 64 tokens, a K step is 32 elements,
 * 3 stages. All shared memory is static (<= 48 KiB), filled by cp.async
 * several steps ahead. Rows and tokens past the job's end are zero-filled
 * and never stored. Shared rows of 32 or 64 bytes have their 16-byte chunks
 * XOR-swizzled so ldmatrix reads 8 rows without bank conflicts.
 *
 * Speed (docs/perf/kernels.md): 7-9% of the bf16 matmul rate for q8/q4,
 * bound by per-step overhead at one CTA (8 warps) per SM — the fold stack
 * takes half the registers — not by the tensor cores or the epilogue.
 *
 * Grid: one CTA per tile of every job, jobs back to back (tile0, set by the
 * launcher in ptx/gpu.c), tokens fastest so CTAs that read the same weight
 * rows run together and the rows come from DRAM once.
 */
#include <cuda_fp16.h>

#include "ptx/cp_async.cuh"
#include "ptx/kernels_abi.h"
#include "ptx/pdl.cuh"

#define THREADS 256 /* COLI_GPU_GEMM_THREADS_Q and _BF16 */
#define MF      2   /* mma row tiles per warp (16 rows each) */
#define NF      4   /* mma token tiles per warp (8 tokens each) */

#define MAGIC_BITS 0x4B400000 /* 1.5 * 2^23 */
#define MAGIC_F    12582912.0f

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

static __device__ __forceinline__ void mma_bf16(float *d, const unsigned *a, const unsigned *b)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
	             "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* Canonical lane of the i-th leaf of the fold tree (4-bit reversal). */
static __device__ __forceinline__ int leaf_lane(int i)
{
	return (int)(__brev((unsigned)i) >> 28);
}

/* The next K step in leaf order: block b of leaf i -> the next block of the
 * same lane, else the first block of the next leaf (before end) with blocks. */
static __device__ __forceinline__ void next_block(int &i, int &b, int nb, int end)
{
	b += 16;
	if (b < nb)
		return;
	do
		i++;
	while (i < end && leaf_lane(i) >= nb);
	b = i < end ? leaf_lane(i) : nb; /* nb: no more */
}

/* The job and tile of this CTA: jobs[] is sorted by tile0; tiles of a job
 * are BM-row x BN-token, tokens fastest. */
template <int BM, int BN>
static __device__ __forceinline__ const struct coli_gpu_gemm_job *
find_job(const struct coli_gpu_gemm_job *jobs, int n_jobs, int *row0, int *tok0)
{
	int lo = 0, hi = n_jobs - 1, bid = (int)blockIdx.x, local, ntt;

	while (lo < hi) {
		int mid = (lo + hi + 1) >> 1;

		if (jobs[mid].tile0 <= bid)
			lo = mid;
		else
			hi = mid - 1;
	}
	local = bid - jobs[lo].tile0;
	ntt = (jobs[lo].S + BN - 1) / BN;
	*row0 = local / ntt * BM;
	*tok0 = local % ntt * BN;
	return &jobs[lo];
}

/* ---- q8_0 / q4_0 ----
 *
 * Two warp groups split the canonical lanes: group 0 (warps 0-3) owns the
 * even lanes, i.e. the even blocks, leaves 0-7 of the tree; group 1 (warps
 * 4-7) the odd ones, leaves 8-15. Each group's leaves form one subtree, so
 * a warp folds its 8 lanes into o0 / o1 with a stack of 3 (acc + p1..p3 = 4
 * registers per output), and the last level y = o0 + o1 goes through shared
 * memory at the end. Each group's 4 warps tile the CTA's 64 rows x 64 tokens
 * as 2 x 2 warp tiles of 32 x 32. A K step stages two blocks, the next one of
 * each group (group 1 has one fewer when the block count is odd). */
#define QBM COLI_GPU_GEMM_ROWS_Q

/* BN: tokens a CTA tile, 64 (COLI_GPU_GEMM_TOKENS) or 32 (COLI_GPU_GEMM_TOKENS_S,
 * for launches of short runs: a warp tile of 32 x 16 holds half the outputs,
 * so the fold stack takes 64 registers, not 128, and two CTAs fit an SM) */
template <bool Q4, int BN> struct QuantSmem {
	enum { ABYTES = Q4 ? 16 : 32, STAGES = Q4 ? 5 : 4 };
	struct slot {
		unsigned char a[QBM * ABYTES]; /* weights of one block, [row][ABYTES] */
		signed char b[BN * 32];        /* activations of one block, [token][32] */
		unsigned w[QBM];               /* the fp16 scale pair holding dw[row][b] */
		float d[BN];                   /* dx[token][b] */
		int qs[BN];                    /* qsum[token][b] (q4) */
	} s[STAGES][2];                        /* [stage][group] */
};

/* One 32-byte row of a stage, 16-byte chunk c, swizzled by (row / 4) % 2. */
static __device__ __forceinline__ int swz32(int row, int c)
{
	return row * 32 + ((c ^ (row >> 2)) & 1) * 16;
}

/* Thread tid fills group tid/128's slot: index i = tid % 128. */
template <bool Q4, int BN>
static __device__ __forceinline__ void quant_load(typename QuantSmem<Q4, BN>::slot &sl, int b,
                                                  const struct coli_gpu_gemm_job &jb, int row0,
                                                  int tok0)
{
	const int i = threadIdx.x & 127, K = jb.K, nb = K / 32;

	if (!Q4 || i < QBM) {
		const int r = Q4 ? i : i >> 1, c = Q4 ? 0 : i & 1;
		const bool ok = row0 + r < jb.rows;
		const size_t off = Q4 ? (size_t)(row0 + r) * (K / 2) + b * 16
		                      : (size_t)(row0 + r) * K + b * 32 + c * 16;

		cp16(&sl.a[Q4 ? r * 16 : swz32(r, c)], (const char *)jb.w + (ok ? off : 0), ok);
	}
	if (i < 2 * BN) {
		const int n = i >> 1, c = i & 1;
		const bool ok = tok0 + n < jb.S;

		cp16(&sl.b[swz32(n, c)],
		     jb.xq + (ok ? (size_t)(tok0 + n) * K + b * 32 + c * 16 : 0), ok);
	}
	if (i < QBM) {
		const bool ok = row0 + i < jb.rows;
		/* the 4-byte aligned pair holding element (row, b) of the fp16 plane */
		const size_t e = ok ? ((size_t)(row0 + i) * nb + b) & ~(size_t)1 : 0;

		cp4(&sl.w[i], jb.scales + e, ok);
		if (Q4 && i < BN) {
			const bool okt = tok0 + i < jb.S;

			cp4(&sl.qs[i], jb.xqsum + (okt ? (size_t)(tok0 + i) * nb + b : 0), okt);
		}
	} else if (i - QBM < BN) {
		const int n = i - QBM;
		const bool ok = tok0 + n < jb.S;

		cp4(&sl.d[n], jb.xd + (ok ? (size_t)(tok0 + n) * nb + b : 0), ok);
	}
}

/* One block b (a staged slot) into the running lane accumulators acc[].
 * With QN = BN / 16 token tiles a warp: output o = (mf * QN + nf) * 4 + e is
 * row wm*32 + mf*16 + g + 8*(e >= 2), token wn*BN/2 + nf*8 + 2*t4 + (e & 1)
 * of the tile (the mma's C layout). */
template <bool Q4, int BN>
static __device__ __forceinline__ void quant_step(const typename QuantSmem<Q4, BN>::slot &sl, int b,
                                                  int nb, int row0, int wm, int wn, float *acc)
{
	constexpr int QN = BN / 16;
	const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
	const int lr = lane & 7, lm = lane >> 3; /* ldmatrix: row in matrix, matrix */
	unsigned a[MF][4], bq[QN][2];
	float dw[MF][2], dx[QN][2];
	int c[QN][2];

	/* A: q8 matrices (rows 0-7 | 8-15) x (bytes 0-15 | 16-31) of each 16-row
	 * tile -> a0..a3; q4: rows 0-7 | 8-15 of tile 0, then tile 1, packed;
	 * byte j of a q4 block holds elements j (low nibble) and j + 16 */
	if (Q4) {
		unsigned p[4];

		ldsm4(p, &sl.a[(wm * 32 + lm * 8 + lr) * 16]);
		for (int mf = 0; mf < MF; mf++) {
			a[mf][0] = p[2 * mf] & 0x0f0f0f0fu;
			a[mf][1] = p[2 * mf + 1] & 0x0f0f0f0fu;
			a[mf][2] = (p[2 * mf] >> 4) & 0x0f0f0f0fu;
			a[mf][3] = (p[2 * mf + 1] >> 4) & 0x0f0f0f0fu;
		}
	} else {
		for (int mf = 0; mf < MF; mf++)
			ldsm4(a[mf], &sl.a[swz32(wm * 32 + mf * 16 + (lm & 1) * 8 + lr, lm >> 1)]);
	}
	/* B: matrices (tokens 0-7 | bytes 0-15), (0-7 | 16-31), (8-15 | 0-15), (8-15 | 16-31) */
	for (int h = 0; h < QN / 2; h++) {
		unsigned r[4];

		ldsm4(r, &sl.b[swz32(wn * (BN / 2) + h * 16 + (lm >> 1) * 8 + lr, lm & 1)]);
		bq[2 * h][0] = r[0], bq[2 * h][1] = r[1];
		bq[2 * h + 1][0] = r[2], bq[2 * h + 1][1] = r[3];
	}
	for (int mf = 0; mf < MF; mf++)
		for (int hi = 0; hi < 2; hi++) {
			const int row = wm * 32 + mf * 16 + hi * 8 + g;
			const unsigned pair = sl.w[row];
			const int odd = (int)(((size_t)(row0 + row) * nb + b) & 1);

			dw[mf][hi] = __half2float(
			    __ushort_as_half((unsigned short)(odd ? pair >> 16 : pair & 0xffffu)));
		}
	for (int nf = 0; nf < QN; nf++)
		for (int k = 0; k < 2; k++) {
			const int n = wn * (BN / 2) + nf * 8 + 2 * t4 + k;

			dx[nf][k] = sl.d[n];
			c[nf][k] = Q4 ? MAGIC_BITS - 8 * sl.qs[n] : MAGIC_BITS;
		}
	for (int mf = 0; mf < MF; mf++)
		for (int nf = 0; nf < QN; nf++) {
			const int cc[4] = {c[nf][0], c[nf][1], c[nf][0], c[nf][1]};
			int d[4];

			mma_i8<Q4>(d, a[mf], bq[nf], cc);
			for (int e = 0; e < 4; e++) {
				const float s = __fsub_rn(__int_as_float(d[e]), MAGIC_F);
				const float scale = __fmul_rn(dw[mf][e >> 1], dx[nf][e & 1]);
				float *l = &acc[(mf * QN + nf) * 4 + e];

				*l = __fmaf_rn(s, scale, *l);
			}
		}
}

/* Leaf i of the fold tree is done (its lane's sum in acc): fold it into the
 * partial sums of its group's subtree (leaves 0-7 or 8-15). The leaf is a
 * right child at every level where its bit is set; after leaf 7 or 15, acc
 * holds the subtree's sum o0 / o1. i is warp-uniform. */
template <int N> /* outputs a thread */
static __device__ __forceinline__ void fold_leaf(int i, float *acc, float *p1, float *p2, float *p3)
{
	if (!(i & 1)) {
		for (int o = 0; o < N; o++)
			p1[o] = acc[o], acc[o] = 0.0f;
		return;
	}
	for (int o = 0; o < N; o++)
		acc[o] = __fadd_rn(p1[o], acc[o]);
	if (!(i & 2)) {
		for (int o = 0; o < N; o++)
			p2[o] = acc[o], acc[o] = 0.0f;
		return;
	}
	for (int o = 0; o < N; o++)
		acc[o] = __fadd_rn(p2[o], acc[o]);
	if (!(i & 4)) {
		for (int o = 0; o < N; o++)
			p3[o] = acc[o], acc[o] = 0.0f;
		return;
	}
	for (int o = 0; o < N; o++)
		acc[o] = __fadd_rn(p3[o], acc[o]);
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

template <bool Q4, int BN>
static __device__ __forceinline__ void gemm_quant(const struct coli_gpu_gemm_job *jobs, int n_jobs)
{
	typedef QuantSmem<Q4, BN> Smem;
	constexpr int QN = BN / 16, NOUT_Q = MF * QN * 4;
	__shared__ __align__(128) Smem sm;
	int row0, tok0;
	const struct coli_gpu_gemm_job jb = *find_job<QBM, BN>(jobs, n_jobs, &row0, &tok0);
	const int nb = jb.K / 32, ns = (nb + 1) / 2; /* steps: group 0's block count */
	const int warp = threadIdx.x >> 5, grp = warp >> 2, wm = warp & 1, wn = (warp >> 1) & 1;
	const int lgrp = threadIdx.x >> 7,
	          lend = 8 * lgrp + 8; /* the group this thread loads for */
	const int end = 8 * grp + 8;
	float acc[NOUT_Q], p1[NOUT_Q], p2[NOUT_Q], p3[NOUT_Q];
	int pi = 8 * lgrp, pb = lgrp; /* producer: leaf, block (leaf 8g is lane g) */
	int ci = 8 * grp, cb = grp;   /* consumer */

	for (int o = 0; o < NOUT_Q; o++)
		acc[o] = 0.0f;
	/* prologue: the first STAGES-1 steps in flight */
	for (int s = 0; s < Smem::STAGES - 1; s++) {
		if (pb < nb) {
			quant_load<Q4, BN>(sm.s[s][lgrp], pb, jb, row0, tok0);
			next_block(pi, pb, nb, lend);
		}
		cp_commit();
	}
	for (int s = 0; s < ns; s++) {
		cp_wait<Smem::STAGES - 2>();
		/* step s's stage has landed for every thread, and every warp is past
		 * step s-1, whose stage the load below overwrites */
		__syncthreads();
		if (pb < nb) {
			quant_load<Q4, BN>(sm.s[(s + Smem::STAGES - 1) % Smem::STAGES][lgrp], pb,
			                   jb, row0, tok0);
			next_block(pi, pb, nb, lend);
		}
		cp_commit();
		if (cb >= nb)
			continue; /* group 1 past its last block (odd count) */
		quant_step<Q4, BN>(sm.s[s % Smem::STAGES][grp], cb, nb, row0, wm, wn, acc);
		cb += 16;
		if (cb >= nb) { /* leaf ci is complete; fold it and the empty leaves after it */
			do {
				fold_leaf<NOUT_Q>(ci, acc, p1, p2, p3);
				ci++;
			} while (ci < end && leaf_lane(ci) >= nb);
			cb = ci < end ? leaf_lane(ci) : nb;
		}
	}
	while (ci < end) /* a group without any block (K = 32): its lanes are +0 */
		fold_leaf<NOUT_Q>(ci++, acc, p1, p2, p3);
	/* y = o0 + o1: group 1 hands its sums over in (now idle) shared memory */
	cp_wait<0>();
	__syncthreads();
	{
		float *x = (float *)&sm + (warp & 3) * NOUT_Q * 32 + (threadIdx.x & 31);

		if (grp == 1)
			for (int o = 0; o < NOUT_Q; o++)
				x[o * 32] = acc[o];
		__syncthreads();
		if (grp == 0) {
			for (int o = 0; o < NOUT_Q; o++)
				acc[o] = __fadd_rn(acc[o], x[o * 32]);
			store_tile<QN>(jb, row0, tok0, wm, wn, acc);
		}
	}
}

/* ---- bf16 (exact within rounding only) ---- */

#define BF_STAGES 3
#define BM        COLI_GPU_GEMM_ROWS_BF16 /* 8 warps: 4 along rows x 2 along tokens */
#define BN        COLI_GPU_GEMM_TOKENS

struct Bf16Smem {
	unsigned short a[BF_STAGES][BM * 32]; /* bf16 [row][32], 64-byte rows */
	float b[BF_STAGES][BN * 32];          /* fp32 [token][32], 128-byte rows */
};

/* 64-byte rows (4 chunks), chunks XOR (row / 2) % 4: conflict-free ldmatrix */
static __device__ __forceinline__ int swz64(int row, int c)
{
	return row * 32 + ((c ^ (row >> 1)) & 3) * 8; /* in bf16 elements */
}

/* 128-byte rows (8 chunks), chunks XOR row % 8 */
static __device__ __forceinline__ int swz128(int row, int c)
{
	return row * 32 + ((c ^ row) & 7) * 4; /* in floats */
}

static __device__ __forceinline__ void
bf16_load(Bf16Smem &sm, int st, int k0, const struct coli_gpu_gemm_job &jb, int row0, int tok0)
{
	const int tid = threadIdx.x, K = jb.K;

	for (int i = tid; i < BM * 4; i += THREADS) {
		const int r = i >> 2, c = i & 3;
		const bool ok = row0 + r < jb.rows;
		const unsigned short *src =
		    (const unsigned short *)jb.w + (ok ? (size_t)(row0 + r) * K + k0 + c * 8 : 0);

		cp16(&sm.a[st][swz64(r, c)], src, ok);
	}
	for (int i = tid; i < BN * 8; i += THREADS) {
		const int n = i >> 3, c = i & 7;
		const bool ok = tok0 + n < jb.S;
		const float *src = jb.xf + (ok ? (size_t)(tok0 + n) * K + k0 + c * 4 : 0);

		cp16(&sm.b[st][swz128(n, c)], src, ok);
	}
}

/* x0 (lower k) and x1 as bf16 hi + lo pairs for an mma B register */
static __device__ __forceinline__ void split_bf16(float x0, float x1, unsigned *hi, unsigned *lo)
{
	unsigned h, l;

	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(h) : "f"(x1), "f"(x0));
	x0 = __fsub_rn(x0, __uint_as_float(h << 16)); /* exact: x - bf16(x) */
	x1 = __fsub_rn(x1, __uint_as_float(h & 0xffff0000u));
	asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(l) : "f"(x1), "f"(x0));
	*hi = h;
	*lo = l;
}

static __device__ __forceinline__ void bf16_step(const Bf16Smem &sm, int st, int wm, int wn,
                                                 float (*acc)[NF][4])
{
	const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
	const int lr = lane & 7, lm = lane >> 3;

	for (int ks = 0; ks < 2; ks++) {
		unsigned a[MF][4], bh[NF][2], bl[NF][2];

		for (int mf = 0; mf < MF; mf++) {
			const int row = wm * 32 + mf * 16 + (lm & 1) * 8 + lr;

			ldsm4(a[mf], &sm.a[st][swz64(row, ks * 2 + (lm >> 1))]);
		}
		for (int nf = 0; nf < NF; nf++) {
			const int n = wn * 32 + nf * 8 + g;
			const int c = ks * 4 + (t4 >> 1), off = (t4 & 1) * 2;
			const float2 x01 = *(const float2 *)&sm.b[st][swz128(n, c) + off];
			const float2 x23 = *(const float2 *)&sm.b[st][swz128(n, c + 2) + off];

			split_bf16(x01.x, x01.y, &bh[nf][0], &bl[nf][0]);
			split_bf16(x23.x, x23.y, &bh[nf][1], &bl[nf][1]);
		}
		for (int mf = 0; mf < MF; mf++)
			for (int nf = 0; nf < NF; nf++) {
				mma_bf16(acc[mf][nf], a[mf], bh[nf]);
				mma_bf16(acc[mf][nf], a[mf], bl[nf]);
			}
	}
}

static __device__ __forceinline__ void gemm_bf16(const struct coli_gpu_gemm_job *jobs, int n_jobs)
{
	__shared__ __align__(128) Bf16Smem sm;
	int row0, tok0;
	const struct coli_gpu_gemm_job jb = *find_job<BM, BN>(jobs, n_jobs, &row0, &tok0);
	const int nk = jb.K / 32, wm = (threadIdx.x >> 5) & 3, wn = threadIdx.x >> 7;
	float acc[MF][NF][4];

	for (int mf = 0; mf < MF; mf++)
		for (int nf = 0; nf < NF; nf++)
			for (int e = 0; e < 4; e++)
				acc[mf][nf][e] = 0.0f;
	for (int s = 0; s < BF_STAGES - 1; s++) {
		if (s < nk)
			bf16_load(sm, s, s * 32, jb, row0, tok0);
		cp_commit();
	}
	for (int s = 0; s < nk; s++) {
		const int sn = s + BF_STAGES - 1;

		cp_wait<BF_STAGES - 2>();
		__syncthreads(); /* as in gemm_quant: stage s landed, stage s-1 free */
		if (sn < nk)
			bf16_load(sm, sn % BF_STAGES, sn * 32, jb, row0, tok0);
		cp_commit();
		bf16_step(sm, s % BF_STAGES, wm, wn, acc);
	}
	store_tile<NF>(jb, row0, tok0, wm, wn, &acc[0][0][0]);
}

/* The quantized kernels' tile widths: 64 tokens (one CTA an SM) and 32
 * (coli_gemm_<dtype>_s: launches whose runs are short; two CTAs an SM). */
static __device__ __forceinline__ void gemm_q8(const struct coli_gpu_gemm_job *j, int n)
{
	gemm_quant<false, COLI_GPU_GEMM_TOKENS>(j, n);
}
static __device__ __forceinline__ void gemm_q4(const struct coli_gpu_gemm_job *j, int n)
{
	gemm_quant<true, COLI_GPU_GEMM_TOKENS>(j, n);
}
static __device__ __forceinline__ void gemm_q8_s(const struct coli_gpu_gemm_job *j, int n)
{
	gemm_quant<false, COLI_GPU_GEMM_TOKENS_S>(j, n);
}
static __device__ __forceinline__ void gemm_q4_s(const struct coli_gpu_gemm_job *j, int n)
{
	gemm_quant<true, COLI_GPU_GEMM_TOKENS_S>(j, n);
}

/* Two entry points per kernel: the job table in device memory, or (up to
 * COLI_GPU_INL_JOBS jobs: a prefill chunk's dense matrices, a small MoE
 * layer) in the launch's parameters, with nothing to copy first. */
#define GEMM_KERNELS(name, fn, ctas)                                                               \
	extern "C" __global__ void __launch_bounds__(THREADS, ctas)                                \
	    coli_gemm_##name(const struct coli_gpu_gemm_job *jobs, int n_jobs)                     \
	{                                                                                          \
		pdl_entry();                                                                       \
		fn(jobs, n_jobs);                                                                  \
	}                                                                                          \
	extern "C" __global__ void __launch_bounds__(THREADS, ctas) coli_gemm_##name##_inl(        \
	    const __grid_constant__ struct coli_gpu_gemm_inline p, int n_jobs)                     \
	{                                                                                          \
		pdl_entry();                                                                       \
		fn(p.j, n_jobs);                                                                   \
	}
GEMM_KERNELS(q8_0, gemm_q8, 1)
GEMM_KERNELS(q4_0, gemm_q4, 1)
GEMM_KERNELS(q8_0_s, gemm_q8_s, 1)
GEMM_KERNELS(q4_0_s, gemm_q4_s, 1)
GEMM_KERNELS(bf16, gemm_bf16, 1)
