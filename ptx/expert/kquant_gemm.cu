/*
 * ptx/expert/kquant_gemm.cu — the batched expert GEMM of prefill for GGUF's block
 * types kept as stored (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) on
 * int8 tensor cores, bit for bit the CPU's canonical reduction of these
 * types (cpu/kquant/kquant.c, its top comment) and so their GEMV's
 * (ptx/expert/kquant.cu): the placement invariant holds at prefill for a Q4_K_M
 * file as for q8_0.
 *
 * The unit of the canonical reduction is the 32-element activation block b,
 * lane b % 16, as q8_0's block is: ptx/expert/gemm.cu's frame (ptx/expert/gemm_frame.cuh:
 * 4 K groups of 4 warps, group g the units b % 4 == g, one fold subtree a
 * group, the same tiles 64 x 64, 64 x 32, 128 x 16 chosen per job) runs
 * unchanged; only a unit's staging and its step differ:
 *
 *   - staging: a unit's weights are not a 16-byte copyable tile (a K-quant
 *     unit is a group inside a 144-210 byte block whose scales are packed
 *     beside it, and Q6_K / Q3_K / Q5_0 blocks are only 2-byte aligned), so
 *     thread i < BM of a group loads row i's unit with the GEMV's loader
 *     (ptx/expert/kquant.cuh U::load), one step ahead into registers, and after
 *     the step writes it to shared memory unpacked (U::i8): 32 int8 per row
 *     with the type's offset applied (Q6_K q - 32, Q3_K q - 4, Q5_0 q - 16:
 *     all fit int8, so one signed mma and no qsum correction), the row's
 *     (d, dm, s0, s1) and (c0, c1) as floats. Activations, dx and qsum come
 *     by cp.async as for q8_0. Two stages: the step being computed and the
 *     next one being filled.
 *   - step: one m16n8k32 s8 mma gives the unit's exact dot product for 16
 *     rows x 8 tokens (accumulator input 1.5 * 2^23: its bits are then the
 *     float 1.5 * 2^23 + dot, ptx/expert/gemm.cu); types whose unit is two groups
 *     of 16 (HALVES: Q2_K, Q3_K, Q6_K) take two m16n8k16 mmas instead (the
 *     k32 fragments split in two: registers a0 a1 | b0 hold elements 0-15,
 *     a2 a3 | b1 elements 16-31). Then, per output, in fp32, every value
 *     below 2^24 so every step is exact but the canonical two:
 *         A = s0 * dot                 (HALVES: fmaf(s1, dot_hi, s0 * dot_lo))
 *         C = c0 * qsum                (Q2_K: fmaf(c1, xs_hi, c0 * xs_lo),
 *                                       xs_lo summed from the staged bytes)
 *         l = fmaf(A, d * dx, l)
 *         l = fmaf(C, dm * dx, l)      (types with a min)
 *     with d * dx and dm * dx rounded first — kquant.c's unit_acc exactly
 *     (its integers A and C are these values; (float) of them is exact).
 *
 * Shared memory (dynamic, COLI_GPU_GEMM_SMEM_KQ(tile) bytes, set by
 * ptx/gpu.c): per stage and group a slot of a[BM][32] int8 (32-byte rows,
 * 16-byte chunks swizzled as ptx/expert/gemm.cu's), b[BN][32] int8, rs[BM] float4,
 * rm[BM] float2, d[BN], qs[BN]; then the fold's p2 (and p1 for the wide
 * tile) as q8_0's.
 *
 * Grid: one CTA per tile of every job, jobs back to back (tile0), tokens
 * fastest, as ptx/expert/gemm.cu.
 */
#include "ptx/expert/gemm_frame.cuh"
#include "ptx/expert/kquant.cuh"

#define KSTAGES COLI_GPU_GEMM_STAGES_KQ

/* The tile TILE of a block type (rows x tokens as q8_0's) */
template <int TILE> struct KTile {
	enum {
		BM = COLI_GPU_GEMM_TILE_ROWS(TILE),
		BN = COLI_GPU_GEMM_TILE_TOKENS(TILE),
		WM = BM / 32,     /* warps of a group along the rows */
		WT = BN * WM / 4, /* tokens of a warp tile */
		QN = WT / 8,      /* mma token tiles of a warp */
		NOUT = WT,        /* outputs a thread */
	};
	static constexpr bool P1S = NOUT > 16; /* p1 in shared memory (ptx/expert/gemm.cu) */
	struct slot {
		unsigned char a[BM * 32]; /* int8 weights of one unit, [row][32] swz32 */
		signed char b[BN * 32];   /* activations of one block, [token][32] swz32 */
		float4 rs[BM];            /* the row's (d, dm, s0, s1): kquant.cuh i8() */
		float2 rm[BM];            /* the row's (c0, c1) */
		float d[BN];              /* dx[token][b] */
		int qs[BN];               /* qsum[token][b] */
	};
	struct smem {
		slot s[KSTAGES][QG];                /* [stage][group] */
		float p2[QTHREADS][NOUT];           /* [thread][output]: part() */
		float p1[P1S ? QTHREADS : 0][NOUT]; /* the same for p1 */
	};
};
static_assert(sizeof(KTile<0>::smem) == COLI_GPU_GEMM_SMEM_KQ(0), "smem size");
static_assert(sizeof(KTile<1>::smem) == COLI_GPU_GEMM_SMEM_KQ(1), "smem size");
static_assert(sizeof(KTile<2>::smem) == COLI_GPU_GEMM_SMEM_KQ(2), "smem size");

/* One thread's share of staging a unit for its group (i = tid % 128):
 * i < BM row i's weights (through registers: fetch, then put), activations
 * 2 threads a token (i < 2 * BN), i < BN the token's qsum, i - BM % 128 in
 * [0, BN) its dx (the copies as ptx/expert/gemm.cu's QuantLoader). Rows and tokens
 * past the job's end are zeros. */
template <class U, int TILE> struct KLoader {
	typedef KTile<TILE> T;
	const u8 *row; /* row i's first block */
	const char *x; /* activations at block 0 */
	const float *d;
	const int *qs;
	unsigned ok; /* bits: OKR weights, OKX activations, OKD dx, OKQ qsum */
	enum { OKR = 1, OKX = 2, OKD = 4, OKQ = 8 };
	unsigned o[8]; /* the fetched unit, unpacked (U::i8), until put() */
	float4 rs;
	float2 rm;

	__device__ __forceinline__ KLoader(const struct coli_gpu_gemm_job &jb, int row0, int tok0)
	{
		const int i = threadIdx.x & 127, K = jb.K, nb = K / 32, n = i >> 1;
		const int nd = i - T::BM % 128;
		const bool okr = i < T::BM && row0 + i < jb.rows;
		const bool okx = i < 2 * T::BN && tok0 + n < jb.S;
		const bool okd = nd >= 0 && nd < T::BN && tok0 + nd < jb.S;
		const bool okq = i < T::BN && tok0 + i < jb.S;

		row = (const u8 *)jb.w +
		      (okr ? (size_t)(row0 + i) * (size_t)(K / U::ELEMS) * U::BYTES : 0);
		x = (const char *)jb.xq + (okx ? (size_t)(tok0 + n) * K + (i & 1) * 16 : 0);
		d = jb.xd + (okd ? (size_t)(tok0 + nd) * nb : 0);
		qs = jb.xqsum + (okq ? (size_t)(tok0 + i) * nb : 0);
		ok = okr * OKR | okx * OKX | okd * OKD | okq * OKQ;
	}

	/* unit b's activations by cp.async, its weights into registers */
	__device__ __forceinline__ void fetch(typename T::slot &sl, int b)
	{
		const int i = threadIdx.x & 127, nd = i - T::BM % 128;

		if (i < 2 * T::BN)
			cp16(&sl.b[swz32(i >> 1, i & 1)], x + b * 32, ok & OKX);
		if (i < T::BN)
			cp4(&sl.qs[i], qs + b, ok & OKQ);
		if (nd >= 0 && nd < T::BN)
			cp4(&sl.d[nd], d + b, ok & OKD);
		if (ok & OKR) {
			U u;

			u.load(row, b, b);
			u.i8(o, rs, rm);
		} else {
			for (int k = 0; k < 8; k++)
				o[k] = 0;
			rs = make_float4(0.0f, 0.0f, 0.0f, 0.0f), rm = make_float2(0.0f, 0.0f);
		}
	}

	/* the fetched weights, unpacked, into the slot fetch() filled */
	__device__ __forceinline__ void put(typename T::slot &sl) const
	{
		const int i = threadIdx.x & 127;

		if (i >= T::BM)
			return;
		*(uint4 *)&sl.a[swz32(i, 0)] = make_uint4(o[0], o[1], o[2], o[3]);
		*(uint4 *)&sl.a[swz32(i, 1)] = make_uint4(o[4], o[5], o[6], o[7]);
		sl.rs[i] = rs;
		sl.rm[i] = rm;
	}
};

static __device__ __forceinline__ void mma_k16(int *d, unsigned a0, unsigned a1, unsigned b, int c)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, "
	             "{%4, %5}, {%6}, {%7, %8, %9, %10};\n"
	             : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
	             : "r"(a0), "r"(a1), "r"(b), "r"(c), "r"(c), "r"(c), "r"(c));
}

/* The exact float of an mma result whose accumulator input was MAGIC_BITS */
static __device__ __forceinline__ float unmagic(int d)
{
	return __fsub_rn(__int_as_float(d), MAGIC_F);
}

/* One unit (a staged slot) into the running lane accumulators acc[]
 * (outputs as ptx/expert/gemm_frame.cuh's store_tile). */
template <class U, int TILE>
static __device__ __forceinline__ void kq_step(const typename KTile<TILE>::slot &sl, int wm, int wn,
                                               float *acc)
{
	typedef KTile<TILE> T;
	constexpr int QN = T::QN;
	const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
	const int lr = lane & 7, lm = lane >> 3; /* ldmatrix: row in matrix, matrix */
	unsigned a[MF][4], bq[QN][2];
	float dx[QN][2], xs[QN][2], xl[QN][2];

	/* A: matrices (rows 0-7 | 8-15) x (bytes 0-15 | 16-31) of each 16-row
	 * tile -> a0..a3, the k32 fragment (ptx/expert/gemm.cu's q8_0 load) */
	for (int mf = 0; mf < MF; mf++)
		ldsm4(a[mf], &sl.a[swz32(wm * 32 + mf * 16 + (lm & 1) * 8 + lr, lm >> 1)]);
	/* B: matrices (tokens 0-7 | bytes 0-15), (0-7 | 16-31), (8-15 | 0-15), (8-15 | 16-31) */
	for (int h = 0; h < QN / 2; h++) {
		unsigned r[4];

		ldsm4(r, &sl.b[swz32(wn * T::WT + h * 16 + (lm >> 1) * 8 + lr, lm & 1)]);
		bq[2 * h][0] = r[0], bq[2 * h][1] = r[1];
		bq[2 * h + 1][0] = r[2], bq[2 * h + 1][1] = r[3];
	}
	for (int nf = 0; nf < QN; nf++)
		for (int k = 0; k < 2; k++) {
			const int n = wn * T::WT + nf * 8 + 2 * t4 + k;

			dx[nf][k] = sl.d[n];
			xs[nf][k] = (float)sl.qs[n];
			xl[nf][k] = 0.0f;
			if (U::HALVES && U::MIN) { /* Q2_K: the sums of each half */
				const uint4 w = *(const uint4 *)&sl.b[swz32(n, 0)];
				int s = __dp4a((int)w.x, 0x01010101, 0);

				s = __dp4a((int)w.y, 0x01010101, s);
				s = __dp4a((int)w.z, 0x01010101, s);
				s = __dp4a((int)w.w, 0x01010101, s);
				xl[nf][k] = (float)s;
				xs[nf][k] = (float)(sl.qs[n] - s);
			}
		}
	for (int mf = 0; mf < MF; mf++) {
		float4 rs[2];
		float2 rm[2];

		for (int hi = 0; hi < 2; hi++) { /* rows g and g + 8 of the 16-row tile */
			const int row = wm * 32 + mf * 16 + g + 8 * hi;

			rs[hi] = sl.rs[row];
			if (U::MIN)
				rm[hi] = sl.rm[row];
		}
		for (int nf = 0; nf < QN; nf++) {
			int d[4], d2[4];

			if (U::HALVES) {
				mma_k16(d, a[mf][0], a[mf][1], bq[nf][0], MAGIC_BITS);
				for (int e = 0; e < 4; e++) /* s0 * dot_lo, exact */
					d[e] =
					    __float_as_int(__fmul_rn(rs[e >> 1].z, unmagic(d[e])));
				mma_k16(d2, a[mf][2], a[mf][3], bq[nf][1], MAGIC_BITS);
			} else {
				const int cc[4] = {MAGIC_BITS, MAGIC_BITS, MAGIC_BITS, MAGIC_BITS};

				mma_i8<false>(d, a[mf], bq[nf], cc);
			}
			for (int e = 0; e < 4; e++) {
				const float4 r = rs[e >> 1];
				const float x = dx[nf][e & 1];
				float *l = &acc[(mf * QN + nf) * 4 + e], A, C;

				if (U::HALVES)
					A = __fmaf_rn(r.w, unmagic(d2[e]), __int_as_float(d[e]));
				else
					A = __fmul_rn(r.z, unmagic(d[e]));
				*l = __fmaf_rn(A, __fmul_rn(r.x, x), *l);
				if (U::MIN) {
					const float2 m = rm[e >> 1];

					if (U::HALVES)
						C = __fmaf_rn(m.y, xs[nf][e & 1],
						              __fmul_rn(m.x, xl[nf][e & 1]));
					else
						C = __fmul_rn(m.x, xs[nf][e & 1]);
					*l = __fmaf_rn(C, __fmul_rn(r.y, x), *l);
				}
			}
		}
	}
}

template <class U, int TILE>
static __device__ __forceinline__ void gemm_kquant(const struct coli_gpu_gemm_job &jb)
{
	typedef KTile<TILE> T;
	typedef typename T::smem Smem;
	constexpr int NOUT = T::NOUT;
	extern __shared__ __align__(128) unsigned char smem_raw[];
	Smem &sm = *(Smem *)smem_raw;
	const int2 at = tile_origin<T::BM, T::BN>(jb);
	const int row0 = at.x, tok0 = at.y;
	const int warp = threadIdx.x >> 5, grp = warp >> 2, wm = warp % T::WM,
	          wn = (warp & 3) / T::WM;
	const int nb = jb.K / 32, ns = (nb - grp + QG - 1) / QG; /* steps: the group's units */
	KLoader<U, TILE> ld(jb, row0, tok0);
	float acc[NOUT], p1r[T::P1S ? 4 : NOUT], *p2 = &sm.p2[0][0];
	float *p1 = T::P1S ? &sm.p1[0][0] : p1r;
	int pk = 0, pb, ck = 0, cb; /* producer and consumer: leaf, unit */

	/* the next unit's weights held in registers across the step */
	constexpr bool AHEAD = !U::HALVES;

	static_assert(KSTAGES == 2, "the loop below fills the one slot it does not read");
	for (int o = 0; o < NOUT; o++)
		acc[o] = 0.0f;
	first_block(grp, pk, pb, nb);
	while (ck < QG && leaf_lane(grp, ck) >= nb) /* lanes without units fold +0 */
		fold_leaf<NOUT, T::P1S>(ck++, acc, p1r, p1, p2);
	cb = ck < QG ? leaf_lane(grp, ck) : nb;
	/* prologue: step 0 staged; each group stages its own */
	if (pb < nb) {
		ld.fetch(sm.s[0][grp], pb);
		ld.put(sm.s[0][grp]);
		next_block(grp, pk, pb, nb);
	}
	cp_commit();
	for (int s = 0; s < ns; s++) {
		typename T::slot &cur = sm.s[s & 1][grp], &nxt = sm.s[(s & 1) ^ 1][grp];
		const bool more = pb < nb;

		cp_wait<0>();
		/* step s's slot is complete for every thread of the group (its
		 * copies landed, its weights were put after step s - 1), and the
		 * group's warps are past step s - 1, which read the slot the
		 * fetch below refills: a group stages and reads only its own
		 * slots, so it waits for its own 4 warps (named barrier 1 + grp) */
		asm volatile("bar.sync %0, 128;\n" ::"r"(1 + grp) : "memory");
		if (more) {
			ld.fetch(nxt, pb);
			if (!AHEAD)
				ld.put(nxt);
		}
		cp_commit();
		kq_step<U, TILE>(cur, wm, wn, acc);
		if (more) { /* AHEAD: the loads had the step's time to land */
			if (AHEAD)
				ld.put(nxt);
			next_block(grp, pk, pb, nb);
		}
		if ((cb += 16) >= nb) { /* leaf ck is done: fold it and the empty ones after it */
			do
				fold_leaf<NOUT, T::P1S>(ck++, acc, p1r, p1, p2);
			while (ck < QG && leaf_lane(grp, ck) >= nb);
			cb = ck < QG ? leaf_lane(grp, ck) : nb;
		}
	}
	cp_wait<0>();
	fold_groups<NOUT, T::QN>(jb, row0, tok0, wm, wn, grp, acc, p2);
}

/* Each job has its tile (jb.tile, set by ptx/expert/gpu_expert.c); the branch is
 * the same for the whole CTA. */
template <class U>
static __device__ __forceinline__ void gemm_kq(const struct coli_gpu_gemm_job *jobs, int n_jobs)
{
	const struct coli_gpu_gemm_job jb = *find_job(jobs, n_jobs);

	if (jb.tile == 2)
		gemm_kquant<U, 2>(jb);
	else if (jb.tile == 1 || U::HALVES)
		gemm_kquant<U, 1>(jb);
	else
		gemm_kquant<U, 0>(jb);
}

GEMM_KERNELS(q4_1, gemm_kq<KQ4_1>, QTHREADS)
GEMM_KERNELS(q5_0, gemm_kq<KQ5<0>>, QTHREADS)
GEMM_KERNELS(q5_1, gemm_kq<KQ5<1>>, QTHREADS)
GEMM_KERNELS(q2_k, gemm_kq<KQ2K>, QTHREADS)
GEMM_KERNELS(q3_k, gemm_kq<KQ3K>, QTHREADS)
GEMM_KERNELS(q4_k, gemm_kq<KQ45K<0>>, QTHREADS)
GEMM_KERNELS(q5_k, gemm_kq<KQ45K<1>>, QTHREADS)
GEMM_KERNELS(q6_k, gemm_kq<KQ6K>, QTHREADS)
