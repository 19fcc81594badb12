/*
 * ptx/expert/kquant.cu — expert GEMV kernels for GGUF's block types kept as stored
 * (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), bit for bit the CPU's
 * canonical reduction of these types (cpu/kquant/kquant.c, its top comment):
 *
 *   the unit is the 32-element activation block b, lane b % 16 of the row's
 *   16 canonical lanes (ptx/expert/gemv.cuh: a half-warp a row, units ascending);
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
 * The dtypes' structs (their loads and integers) are ptx/expert/kquant.cuh's,
 * shared with the GEMM of prefill (ptx/expert/kquant_gemm.cu).
 *
 * Staging (RowKS): the weights are loaded from global memory once, wide
 * and coalesced, and each lane picks its bits from shared memory. A step
 * is 16 consecutive units of a row, one a lane (two K-quant blocks: lanes
 * 0-7 the first block's groups, 8-15 the second's; or sixteen 32-element
 * blocks). The half-warp copies a step of each of its GV_RPH rows with
 * 16-byte cp.async, lane l chunks l, l + 16, ..., into its slot of a ring:
 *
 *   ring[stage][half-warp][row r][SLOT]   (u8; KQStage<U>::SLOT bytes a row)
 *   slot byte j = global byte (step start & ~15) + j
 *
 * so a byte's address mod 16 is kept (Q4_K/Q5_K blocks stay 16-byte
 * aligned, Q6_K/Q3_K/Q5_0 2-byte aligned as in global memory, and the same
 * loader, U::load_blk<MemS>, reads them). The ring holds KQStage<U>::NST
 * steps (2-4, what KQ_SMEM_MAX allows); NST - 1 are in flight while one is
 * computed, each a commit group of cp.async, a __syncwarp ordering the
 * copies before the reads and the reads before the slot's reuse (the
 * whole warp's: both half-warps run the loop, rows or none). The math is
 * the per-lane kernel's: the weights of a unit once for the S tokens and
 * both rows, the activations from global memory. Q2_K to Q6_K take
 * their pairs forms (ptx/expert/kquant.cuh KQ2KP, KQ3KP, KQ45KP, KQ6KP): two lanes whose
 * units share quant bytes each read half of them, form both units' halves
 * and swap one partial by a shuffle, so each lane reads and unpacks half
 * the bytes for the same integers.
 *
 * RowKQ, the per-lane kernel of 2026-12-02 (each lane loading its unit and
 * its block's header from global memory), is kept as
 * coli_gemv_<type>_v0_inl for the bench's A/B only (ptx/expert/gpu_expert.c
 * coli_gpu_gemv_kq_v0).
 */
#include "ptx/common/cp_async.cuh"
#include "ptx/expert/kquant.cuh"

/* ---- the launch shape, in one place ----
 *
 * The grid is every GEMV's (ptx/expert/gemv.cuh, ptx/expert/gpu_expert.c): 256 threads,
 * 32 rows a CTA, a half-warp two rows. What is the block types' own:
 *
 * KQ_MB: CTAs an SM (__launch_bounds__). 3, as q4_0's: 24 warps an SM to
 *   hide the shared-memory and activation latency of the math, and 3 x
 *   KQ_SMEM_MAX of staging fits the H200's 228 KiB. (The per-lane kernel
 *   measured 3 over 2: q4_k 0.43 -> 0.50, q5_k 0.49 -> 0.54 of copy.)
 * KQ_SMEM_MAX: a CTA's staging, bytes; static shared memory, so under the
 *   48 KiB a CTA may have without the opt-in attribute.
 * KQ_STAGES_MAX: steps a half-warp has in its ring at most (KQStage::NST,
 *   fewer where KQ_SMEM_MAX holds fewer: q5_0, q5_1, q5_k and q6_k 3). A
 *   stage holds one step (16 units) of each of the half-warp's two
 *   rows, and NST - 1 steps are in flight while one is computed: for q4_k
 *   3 x 2 x 288 B = 1728 B a half-warp, 81 KiB an SM at 3 CTAs; q6_k 2 x 2
 *   x 420 B, 79 KiB. Estimates, not measurements: the H200's bandwidth-
 *   latency product asks ~30 KiB of each SM (4.8 TB/s x ~0.8 us / 132
 *   SMs); q4_0's kernel (0.70 of copy) has 2 rows x 3 blocks x 18 B a lane
 *   in flight, ~80 KiB an SM. A deeper ring would only lengthen the
 *   prologue of short rows (K = 1536 is 3 steps). */
#define KQ_MB         3
#define KQ_SMEM_MAX   (46 * 1024)
#define KQ_STAGES_MAX 4

#define KQ_HALFWARPS (ROWS_PER_CTA / GV_RPH) /* a CTA's half-warps: 16 */

/* A dtype's staging: a step is 16 consecutive units of a row (two K-quant
 * blocks, or sixteen 32-element blocks), STEP bytes of it; a slot holds one
 * row's step as the 16-byte chunks from the boundary at or below its first
 * byte (so a byte's address mod 16 is the same in the slot as in global
 * memory, and a block's loader reads it as from global), and 16 bytes more
 * that ld_words2's over-reads past a block's end may touch (never used). */
template <class U> struct KQStage {
	enum {
		UPB = U::ELEMS / 32,               /* units a block */
		STEP = 16 / UPB * U::BYTES,        /* bytes of 16 units of a row */
		SLOT = (STEP + 30) / 16 * 16 + 16, /* chunks covering a step, + 16 */
		FIT = KQ_SMEM_MAX / (ROWS_PER_CTA * SLOT),
		NST = FIT < KQ_STAGES_MAX ? FIT : KQ_STAGES_MAX, /* ring depth */
	};
	static_assert(NST >= 2, "a ring of two steps at least: one computed, one in flight");
	static_assert((STEP + 30) / 16 <= 2 * LANES, "a step's chunks: two a lane at most");
};

/* Where a lane copies a half-warp row's steps from: the row's first byte
 * less its offset from the 16-byte boundary below (`lo`), plus the lane's
 * first chunk (16 lane); every offset below is 32-bit (a row is far below
 * 4 GiB). */
struct KQRow {
	const u8 *src;
	unsigned lo;
};

/* Issue step i of the half-warp's rows into the ring stage at shared
 * address dst (this lane's chunk of row 0's slot; row r's is r SLOT on):
 * lane l copies chunks l and l + 16 of each row's step, 16-byte cp.async
 * (coalesced: the half-warp's 16 lanes take 256 consecutive bytes). A
 * step's range is [i STEP, min((i + 1) STEP, rb)) of the row; the chunks
 * cover it from the 16-byte boundary below to the one above, bytes of the
 * neighbouring data that are never used (an aligned chunk holding a byte of
 * the matrix is mapped as that byte is). Rows past the matrix (r >= nr):
 * nothing. */
template <class U>
static __device__ __forceinline__ void kq_issue(unsigned dst, const KQRow *row, unsigned rb, int nr,
                                                int i, int lane)
{
	typedef KQStage<U> G;

#pragma unroll
	for (int r = 0; r < GV_RPH; r++) {
		if (r >= nr)
			continue;
		const unsigned o0 = (unsigned)i * G::STEP,
		               o1 = min(o0 + G::STEP, rb) + row[r].lo;
		const unsigned a = (o0 + row[r].lo) & ~15u, nch = (o1 - a + 15) >> 4;

		if ((unsigned)lane < nch)
			cp16_s(dst + r * G::SLOT, row[r].src + a);
		if ((unsigned)lane + LANES < nch)
			cp16_s(dst + r * G::SLOT + 16 * LANES, row[r].src + a + 16 * LANES);
	}
}

/* The activations unit b's integers take, x[8]: its block's 32 int8 (two
 * 16-byte loads), or for a PAIRS type (ptx/expert/kquant.cuh KQ2KP, KQ3KP, KQ45KP, KQ6KP;
 * partners b and b ^ PAIRS) the half (b & PAIRS ? 1 : 0) of unit
 * b & ~PAIRS and the same half of unit b | PAIRS (XOwn: of unit b, then of
 * unit b ^ PAIRS). xq: the token's activations. */
template <class U> static __device__ __forceinline__ void kq_act(const signed char *xq, int b, int *x)
{
	const signed char *p =
	    U::PAIRS ? xq + (XOwn<U>::v ? b : b & ~U::PAIRS) * 32 + (b & U::PAIRS ? 16 : 0)
	             : xq + b * 32;
	/* the second half's offset from the first: the partner unit's (XOwn:
	 * before or after the own one), the same unit's, or the next 16 bytes */
	const int d = XOwn<U>::v ? (b & U::PAIRS ? -32 : 32) * U::PAIRS : U::PAIRS ? 32 * U::PAIRS : 16;
	const int4 x0 = *(const int4 *)p, x1 = *(const int4 *)(p + d);

	x[0] = x0.x, x[1] = x0.y, x[2] = x0.z, x[3] = x0.w;
	x[4] = x1.x, x[5] = x1.y, x[6] = x1.z, x[7] = x1.w;
}

/* A lane's units b = lane, lane + 16, ... of the half-warp's rows, in
 * ascending order (the canonical lane b % 16). Unit b is step b / 16's lane
 * b % 16: the step's block b % 16 / UPB, its group b % UPB. The weights come
 * from the half-warp's ring in shared memory, filled NST - 1 steps ahead;
 * the activations from global memory as every GEMV reads them. */
template <class U> struct RowKS {
	/* the frame runs both half-warps of a warp, rows or none, so the
	 * barriers below are whole-warp ones (a constant mask: one
	 * instruction, where a half-warp's mask costs a convergence check) */
	enum { WARP_WIDE = 1 };
	static __device__ __forceinline__ void run(const struct coli_gpu_gemv_job *jb, int row0,
	                                           int lane, float (*acc)[COLI_GPU_MAX_S])
	{
		typedef KQStage<U> G;
		/* [stage][half-warp][row of the half-warp][SLOT] */
		__shared__ __align__(16) u8 ring[G::NST][KQ_HALFWARPS][GV_RPH][G::SLOT];
		const int K = jb->K, S = jb->S, nb = K / 32, rows = jb->rows;
		/* the token arrays in registers: jb is a copy in shared memory,
		 * which the ring's cp.async writes, so its fields were read again
		 * every step */
		const signed char *const xq = jb->xq;
		const float *const xdp = jb->xd;
		const int *const xqs = jb->xqsum;
		const int nsteps = (nb + LANES - 1) / LANES, hw = threadIdx.x >> 4;
		const unsigned rb = (unsigned)(K / U::ELEMS) * U::BYTES;
		/* the half-warp's rows that exist: 0 to GV_RPH */
		const int nr = rows <= row0 ? 0 : min(GV_RPH, (rows - row0 + 15) / 16);
		KQRow row[GV_RPH];
		/* this lane's chunk of row 0's slot in stage 0; a stage is
		 * STAGE bytes on */
		const unsigned dst0 = smem_addr(&ring[0][hw][0][16 * lane]);
		enum { STAGE = KQ_HALFWARPS * GV_RPH * G::SLOT };
		int ist = G::NST - 1; /* the stage step i + NST - 1 is issued into */

#pragma unroll
		for (int r = 0; r < GV_RPH; r++) {
			const u8 *rp = (const u8 *)jb->w + (size_t)(row0 + 16 * r) * rb;

			row[r].lo = (unsigned)(unsigned long long)rp & 15;
			row[r].src = rp - row[r].lo + 16 * lane;
		}
#pragma unroll
		for (int p = 0; p < G::NST - 1; p++) {
			if (p < nsteps)
				kq_issue<U>(dst0 + p * STAGE, row, rb, nr, p, lane);
			cp_commit(); /* one group a step, empty or not: the wait counts them */
		}
		for (int i = 0; i < nsteps; i++) {
			const int n = i + G::NST - 1, st = ist + 1 == G::NST ? 0 : ist + 1,
			          b = i * LANES + lane;

			if (n < nsteps)
				kq_issue<U>(dst0 + ist * STAGE, row, rb, nr, n, lane);
			cp_commit();
			ist = st; /* step i's stage: step i + NST is issued there next */
			/* group i (step i) is complete for this lane's copies once
			 * at most NST - 1 younger groups are pending; the barrier
			 * then makes every lane's copies of it visible to all */
			cp_wait<G::NST - 1>();
			__syncwarp();
			/* a PAIRS type's ints() shuffles, so every lane of the
			 * warp takes the math together: lanes without a unit (past
			 * the row's end) or without a row compute on a unit that
			 * is not there and keep nothing of it */
			if (U::PAIRS || (b < nb && nr > 0)) {
				const bool live = b < nb;
				const int bx = live ? b : 0; /* a unit that exists */
				U wt[GV_RPH];

#pragma unroll
				for (int r = 0; r < GV_RPH; r++) {
					const unsigned off = ((row[r].lo + (unsigned)i * G::STEP) & 15) +
					                     lane / G::UPB * U::BYTES;

					if (U::PAIRS || r < nr)
						wt[r].template load_blk<MemS>(&ring[st][hw][r][off],
						                              lane % G::UPB);
				}
#pragma unroll
				for (int s = 0; s < COLI_GPU_MAX_S; s++) {
					if (s >= S)
						break;
					int x[8];

					kq_act<U>(xq + (size_t)s * K, bx, x);
					const float xd = xdp[(size_t)s * nb + bx];
					const int xs = xqs[(size_t)s * nb + bx];

#pragma unroll
					for (int r = 0; r < GV_RPH; r++) {
						int A, C;

						if (!U::PAIRS && r >= nr)
							continue;
						wt[r].ints(x, xs, A, C);
						if (!live)
							continue;
						acc[r][s] = __fmaf_rn(
						    (float)A, __fmul_rn(wt[r].fa, xd), acc[r][s]);
						if (U::MIN)
							acc[r][s] = __fmaf_rn(
							    (float)C, __fmul_rn(wt[r].fc, xd),
							    acc[r][s]);
					}
				}
			}
			/* every lane is past its reads of slot st before the next
			 * iteration issues step i + NST into it */
			__syncwarp();
		}
	}
};

/* ---- the per-lane GEMV of 2026-12-02, for an A/B in one run ----
 *
 * Each lane loads its own unit's bytes (and its block's header) straight
 * from global memory, U::UNROLL units at once: the kernel the staged one
 * replaced. Only coli_gpu_gemv_kq_v0 (ptx/expert/gpu_expert.c) launches it, for
 * `tests/ptx/dense_kernels --bench kquant`'s side-by-side line. Same bits. */
template <class U> struct RowKQ {
	enum { WARP_WIDE = 0 };
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

/* coli_gemv_<type>_v0_inl: the job table in the launch's parameters only */
#define GEMV_V0(name, Row)                                                                         \
	extern "C" __global__ void __launch_bounds__(256, KQ_MB)                                   \
	    coli_gemv_##name##_v0_inl(const __grid_constant__ struct coli_gpu_gemv_inline p)       \
	{                                                                                          \
		pdl_entry();                                                                       \
		gemv<Row>(p.j);                                                                    \
	}

GEMV_V0(q4_1, RowKQ<KQ4_1>)
GEMV_V0(q5_0, RowKQ<KQ5<0>>)
GEMV_V0(q5_1, RowKQ<KQ5<1>>)
GEMV_V0(q2_k, RowKQ<KQ2K>)
GEMV_V0(q3_k, RowKQ<KQ3K>)
GEMV_V0(q4_k, RowKQ<KQ45K<0>>)
GEMV_V0(q5_k, RowKQ<KQ45K<1>>)
GEMV_V0(q6_k, RowKQ<KQ6K>)

/* The kernel each type's coli_gemv_<type> runs, decided here only (the same
 * bits either way): the staged one (RowKS), except where `tests/ptx/
 * dense_kernels --bench kquant` showed the per-lane one (v0) ahead on the
 * H200 at 7a55226: q4_1 (0.65 / 0.57 of copy against 0.64 / 0.55) and q5_1
 * (0.66 / 0.56 against 0.55 / 0.50), whose blocks a lane reads whole. */
GEMV_KERNELS(q4_1, RowKQ<KQ4_1>, KQ_MB)
GEMV_KERNELS(q5_0, RowKS<KQ5<0>>, KQ_MB)
GEMV_KERNELS(q5_1, RowKQ<KQ5<1>>, KQ_MB)
GEMV_KERNELS(q2_k, RowKS<KQ2KP>, KQ_MB)
GEMV_KERNELS(q3_k, RowKS<KQ3KP>, KQ_MB)
GEMV_KERNELS(q4_k, RowKS<KQ45KP<0>>, KQ_MB)
GEMV_KERNELS(q5_k, RowKS<KQ45KP<1>>, KQ_MB)
GEMV_KERNELS(q6_k, RowKS<KQ6KP>, KQ_MB)

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
