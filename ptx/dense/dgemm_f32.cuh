/*
 * ptx/dense/dgemm_f32.cuh — a float matrix times a prefill chunk as a tiled
 * GEMM with the split GEMV's bits (ptx/dense/dgemv.cuh): the routers at
 * prefill (128 x 2048 f32 at the qwen3-30b shape, every token of the prompt).
 *
 * The order every output keeps, the one a decode step's split launch gives
 * the token alone (batch invariance): K in `splits` ranges of `span` units
 * (4 floats; span a multiple of 32, dg_split); in each, lane l of 32 chains
 * fmaf over units l, l + 32, ... in ascending order from +0; the 32 chains
 * fold by the warp's shuffle butterfly (level h adds lanes l and l + h); the
 * splits add in ascending order from +0 (one split: its fold itself).
 *
 * The joined form (dgemv_joined) computes this a warp a row and pays a
 * 5-shuffle fold per token and split: 309 us a layer of a 2,048-token chunk on
 * an H100, most of it shuffles. Here a thread holds 4 rows x 4 tokens and
 * computes lanes' chains itself from shared memory. The butterfly is a
 * pairwise sum over the lanes taken in bit-reversed order (its first level
 * pairs lanes rev(2m) and rev(2m + 1) = rev(2m) + 16, and so on up), so the
 * leaves are taken in that order and folded with a binary counter of partial
 * sums in registers (dt_push): no shuffles, the same additions.
 *
 * Tile: 128 rows (lane + 32 i) x 16 tokens, 16 warps: token group tg (4
 * tokens) x leaf group lg. Leaf group lg takes the fold's positions 8 lg ..
 * 8 lg + 7, a whole subtree; at a split's end the four subtrees' sums meet
 * through shared memory, (S0 + S1) + (S2 + S3), as the butterfly's last two
 * levels add them. (One warp a token group, all 32 leaves, left a scheduler
 * one warp: 169 us a layer at 2,048 tokens for ~80k instructions a warp.)
 *
 * A stage holds, for each leaf group, LB of its leaves with all J = span /
 * 32 units of each (4 LB J <= DT_UNITS units a row); 8 / LB stages a split,
 * two stages double-buffered with cp.async through L1 (cp16_ca: the fold
 * order takes scattered 16-byte units of a line, its other pieces come in
 * the next stages). Units past the split's end are neither loaded nor added;
 * rows and tokens past the matrix's are computed on zeros and not stored.
 */
#ifndef COLI_PTX_DGEMM_F32_CUH
#define COLI_PTX_DGEMM_F32_CUH

#include "ptx/common/cp_async.cuh"
#include "ptx/common/pdl.cuh"
#include "ptx/dense/dgemv.cuh"
#include "ptx/kernels_abi.h"

#define DT_ROWS    COLI_GPU_DGEMM_ROWS
#define DT_TOKS    COLI_GPU_DGEMM_TOKS
#define DT_UNITS   COLI_GPU_DGEMM_UNITS
#define DT_THREADS COLI_GPU_DGEMM_THREADS
#define DT_LD      (4 * DT_UNITS + 4) /* floats a staged row: +4 spreads 8 rows over the banks */
#define DT_GROUP   (DT_THREADS / 4)   /* threads of a leaf group */

struct DtStage {
	float w[DT_ROWS][DT_LD];
	float x[DT_TOKS][DT_LD];
};
struct DtSmem {
	DtStage st[2];
	float4 red[4][4][DT_GROUP]; /* [leaf group][output chunk][thread]: the subtrees' sums */
};
static_assert(sizeof(DtSmem) == COLI_GPU_DGEMM_SMEM, "dgemm smem");
static_assert(DT_TOKS == 16 && DT_THREADS == 512, "4 token groups of 4 x 4 leaf groups");

/* the 5-bit reversal of p (a compile-time constant where p is) */
static __device__ __forceinline__ int dt_rev5(int p)
{
	return (p & 1) << 4 | (p & 2) << 2 | (p & 4) | (p & 8) >> 2 | (p & 16) >> 4;
}

/* Leaves of each leaf group a stage for J units a leaf: the most whose 4 LB J
 * units fit DT_UNITS, a power of two (8 / LB stages make a split) */
template <int J> struct DtLeaves {
	enum { LB = J == 1 ? 8 : J == 2 ? 4 : J <= 4 ? 2 : 1 };
	static_assert(J >= 1 && J <= 8 && 4 * LB * J <= DT_UNITS, "units a leaf");
};

/* Stage b of the split [u0, u1): for leaf group g, its leaves 8 g + b LB +
 * q (q < LB) in fold order, lane rev5(p)'s units u0 + lane + 32 j (j < J)
 * at column ((g LB + q) J + j), for the tile's rows then its tokens. */
template <int J>
static __device__ __forceinline__ void dt_stage(const struct coli_gpu_dense_gemv &a, DtStage &s,
                                                int r0, int t0, int u0, int u1, int b)
{
	constexpr int LB = DtLeaves<J>::LB, per = 4 * LB * J, n = (DT_ROWS + DT_TOKS) * per;

	if constexpr (DT_THREADS % per == 0) { /* a thread's column is the same in every row */
		constexpr int step = DT_THREADS / per;
		static_assert(DT_ROWS % step == 0 && DT_TOKS == step,
		              "rows, then one token a thread");
		const int c = threadIdx.x % per, r = threadIdx.x / per, gq = c / J, j = c % J;
		const int u = u0 + dt_rev5(8 * (gq / LB) + b * LB + gq % LB) + 32 * j;
		const float *src = (const float *)a.w + (size_t)(r0 + r) * a.K + 4 * u;

#pragma unroll
		for (int row = r; row < DT_ROWS; row += step, src += (size_t)step * a.K) {
			const bool ok = u < u1 && r0 + row < a.rows;

			cp16_ca(&s.w[row][4 * c], ok ? src : a.xf, ok);
		}
		const bool ok = u < u1 && t0 + r < a.T;

		cp16_ca(&s.x[r][4 * c], ok ? a.xf + (size_t)(t0 + r) * a.K + 4 * u : a.xf, ok);
	} else {
#pragma unroll 2
		for (int i = threadIdx.x; i < n; i += DT_THREADS) {
			const int row = i / per, c = i - row * per, gq = c / J, j = c - gq * J;
			const int u = u0 + dt_rev5(8 * (gq / LB) + b * LB + gq % LB) + 32 * j;
			const float *src;
			float *dst;
			bool ok = u < u1;

			if (row < DT_ROWS) {
				ok = ok && r0 + row < a.rows;
				src = (const float *)a.w + (size_t)(r0 + row) * a.K + 4 * u;
				dst = &s.w[row][4 * c];
			} else {
				ok = ok && t0 + row - DT_ROWS < a.T;
				src = a.xf + (size_t)(t0 + row - DT_ROWS) * a.K + 4 * u;
				dst = &s.x[row - DT_ROWS][4 * c];
			}
			cp16_ca(dst, ok ? src : a.xf, ok);
		}
	}
}

/* Leaf p (0..7 of its group) into the group's subtree: a binary counter
 * whose level h holds the sum of the last 2^h leaves while bit h of p is
 * clear. p is a compile-time constant, so stk stays in registers. Returns
 * the subtree's sum in c at p == 7. */
static __device__ __forceinline__ void dt_push(int p, float (&c)[4][4], float (&stk)[3][4][4])
{
#pragma unroll
	for (int h = 0; h < 3; h++) {
		if (!(p >> h & 1)) {
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int t = 0; t < 4; t++)
					stk[h][i][t] = c[i][t];
			return;
		}
#pragma unroll
		for (int i = 0; i < 4; i++)
#pragma unroll
			for (int t = 0; t < 4; t++)
				c[i][t] = __fadd_rn(stk[h][i][t], c[i][t]);
	}
}

/* y = W x for a chunk of tokens, W f32 [rows][K]; `splits` as dgemv_shape
 * gave the decode launch, J = span / 32 its units a lane (the launcher's
 * choice of kernel). Dynamic shared memory: DtSmem. */
template <int J>
static __device__ __forceinline__ void dgemm_f32(const struct coli_gpu_dense_gemv &a, int splits)
{
	constexpr int LB = DtLeaves<J>::LB;
	extern __shared__ __align__(16) unsigned char dt_raw[];
	DtSmem &sm = *(DtSmem *)dt_raw;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int tw = 4 * (warp & 3), lg = warp >> 2, gi = threadIdx.x % DT_GROUP;
	const int r0 = blockIdx.x * DT_ROWS, t0 = blockIdx.z * DT_TOKS, nu = a.K / 4;
	const int span = 32 * J;
	float v[4][4], c[4][4], stk[3][4][4];
	int s = 0;

	pdl_entry();
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int t = 0; t < 4; t++)
			v[i][t] = 0.0f;
	dt_stage<J>(a, sm.st[0], r0, t0, 0, min(nu, span), 0);
	cp_commit();
	for (int k = 0; k < splits; k++) {
		const int u0 = k * span, u1 = min(nu, u0 + span);

#pragma unroll
		for (int b = 0; b < 8 / LB; b++) {
			cp_wait<0>();
			__syncthreads(); /* stage s is in; every thread is done with s - 1 */
			{
				const int nk = b + 1 < 8 / LB ? k : k + 1, nb = (b + 1) % (8 / LB);

				if (nk < splits)
					dt_stage<J>(a, sm.st[(s + 1) & 1], r0, t0, nk * span,
					            min(nu, nk * span + span), nb);
				cp_commit();
			}
			const DtStage &S = sm.st[s++ & 1];

#pragma unroll
			for (int q = 0; q < LB; q++) {
				const int p = b * LB + q, l = dt_rev5(8 * lg + p);

#pragma unroll
				for (int i = 0; i < 4; i++)
#pragma unroll
					for (int t = 0; t < 4; t++)
						c[i][t] = 0.0f;
#pragma unroll
				for (int j = 0; j < J; j++) {
					const int col = 4 * ((lg * LB + q) * J + j);
					float4 w[4];

					if (u0 + l + 32 * j >=
					    u1) /* warp-uniform: the split's end */
						break;
#pragma unroll
					for (int i = 0; i < 4; i++)
						w[i] = *(const float4 *)&S.w[lane + 32 * i][col];
#pragma unroll
					for (int t = 0; t < 4; t++) {
						const float4 x = *(const float4 *)&S.x[tw + t][col];

#pragma unroll
						for (int i = 0; i < 4; i++) {
							float e = c[i][t];

							e = __fmaf_rn(w[i].x, x.x, e);
							e = __fmaf_rn(w[i].y, x.y, e);
							e = __fmaf_rn(w[i].z, x.z, e);
							c[i][t] = __fmaf_rn(w[i].w, x.w, e);
						}
					}
				}
				dt_push(p, c, stk);
			}
		}
		/* the subtrees meet: (S0 + S1) + (S2 + S3), in group 0's threads.
		 * red is free: its last readers passed this split's first barrier */
#pragma unroll
		for (int i = 0; i < 4; i++)
			sm.red[lg][i][gi] = make_float4(c[i][0], c[i][1], c[i][2], c[i][3]);
		__syncthreads();
		if (lg == 0) {
#pragma unroll
			for (int i = 0; i < 4; i++) {
				const float4 s1 = sm.red[1][i][gi], s2 = sm.red[2][i][gi],
				             s3 = sm.red[3][i][gi];
				const float o1[4] = {s1.x, s1.y, s1.z, s1.w};
				const float o2[4] = {s2.x, s2.y, s2.z, s2.w};
				const float o3[4] = {s3.x, s3.y, s3.z, s3.w};

#pragma unroll
				for (int t = 0; t < 4; t++) {
					const float f = __fadd_rn(__fadd_rn(c[i][t], o1[t]),
					                          __fadd_rn(o2[t], o3[t]));

					v[i][t] = splits == 1 ? f : __fadd_rn(v[i][t], f);
				}
			}
		}
	}
	if (lg == 0)
#pragma unroll
		for (int i = 0; i < 4; i++)
#pragma unroll
			for (int t = 0; t < 4; t++)
				if (r0 + lane + 32 * i < a.rows && t0 + tw + t < a.T)
					*dg_out(a, t0 + tw + t, r0 + lane + 32 * i) = v[i][t];
}

#endif
