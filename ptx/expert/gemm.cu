/*
 * ptx/expert/gemm.cu — the batched expert GEMM of prefill on tensor cores: one
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
 *     fit). The CTA's four K groups take the blocks b % 4 == g: lanes g,
 *     g + 4, g + 8, g + 12, one subtree of the CPU's fold tree (h = 8, 4 ->
 *     l[g]); a group visits its lanes in the subtree's leaf order g, g + 8,
 *     g + 4, g + 12, blocks of a lane ascending, and folds a finished lane at
 *     once: acc in registers, the two waiting partial sums p1, p2 in shared
 *     memory (p1 in registers for the narrower tiles). The last two levels
 *     (h = 2, 1) meet through shared memory at the end. A lane without
 *     blocks (K < 512) folds its +0.0f like the CPU's does.
 *
 * bf16: bf16 mma with fp32 accumulation. The tensor core's summation order
 * and intermediate rounding are not ours, so this is exact only within
 * rounding — the one documented exception to the placement invariant
 * (docs/perf/kernels.md). The fp32 activations are split x = hi + lo into
 * two bf16 (two mmas), so the product keeps ~16 bits of x instead of 8.
 *
 * Tiling, q8/q4: a CTA of 512 threads (4 K groups of 4 warps, 2 x 2)
 * computes 64 rows x 64 tokens, warp tiles of 32 x 32 (2 x 4 mma tiles),
 * each group over its quarter of the blocks. Where K is a multiple of 128
 * the groups step together and the CTA stages their four blocks at once,
 * each row's bytes by adjacent lanes (LockLoader), behind the CTA's barrier;
 * else a group stages and reads its own shared memory and waits only on its
 * own named barrier. Runs of up to
 * 32 tokens take 64 x 32 tiles, of up to 16 128 x 16 (coli_gemm_<dtype>_n32,
 * _n16, chosen per run in ptx/gpu.c), warp tiles of 32 x 16. A K step
 * stages the next block of each group (q8: 3 stages, q4: 4), in dynamic
 * shared memory (COLI_GPU_GEMM_SMEM_Q: ~190 KB wide, 74-94 KB the others; a
 * GPU refusing the wide size runs the others only).
 * bf16: 8 warps (4 along rows x 2 along tokens) compute 128 rows x 64
 * tokens, a K step is 32 elements, 3 stages, static shared memory. Copies
 * are cp.async several steps ahead. Rows and tokens past the job's end are
 * zero-filled and never stored. Shared rows of 32 or 64 bytes have their
 * 16-byte chunks XOR-swizzled so ldmatrix reads 8 rows without bank
 * conflicts.
 *
 * Speed (docs/perf/kernels.md): q8/q4 11-17% of the bf16 matmul rate (was
 * 7-9% with two K groups of 4 warps and the fold stack in registers);
 * issue-bound: the canonical epilogue's 3 fp32 instructions per output and
 * block are ~40% of what a step issues.
 *
 * Grid: one CTA per tile of every job, jobs back to back (tile0, set by the
 * launcher in ptx/gpu.c), tokens fastest so CTAs that read the same weight
 * rows run together and the rows come from DRAM once.
 *
 * The frame (mma, operand loads, tiles, the K groups' fold, the store) is
 * ptx/expert/gemm_frame.cuh's, shared with GGUF's block types (ptx/expert/kquant_gemm.cu).
 */
#include <cuda_fp16.h>

#include "ptx/expert/gemm_frame.cuh"

#define BF_THREADS COLI_GPU_GEMM_THREADS_BF16
#define NF         4 /* mma token tiles per warp (8 tokens each), bf16 */

static __device__ __forceinline__ void mma_bf16(float *d, const unsigned *a, const unsigned *b)
{
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
	             "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* ---- q8_0 / q4_0 ----
 *
 * Four K groups of four warps (512 threads). Group g (warps 4g..4g+3) owns
 * the blocks b % 4 == g: leaves 4g..4g+3 of the canonical tree's second
 * level, lanes g, g + 8, g + 4, g + 12 in leaf order. A warp folds them with
 * acc in registers and the partial sums that wait (p1, p2) in shared memory,
 * each thread its own row of them (part(); p1 in registers for the narrower
 * tiles); the groups' sums l[0..3] meet in shared memory at the end (h = 2,
 * then h = 1). Each group's 4 warps tile the CTA's BM rows x BN tokens with
 * warp tiles of 32 rows x WT tokens: wide 64 x 64 as 2 x 2 tiles of
 * 32 x 32, 64 x 32 as 2 x 1 tiles of 32 x 16, 128 x 16 as 4 x 1 tiles of
 * 32 x 16. A K step stages four blocks, the next one of each group (a group
 * with fewer blocks stops earlier). */
/* The q8/q4 tile TILE (COLI_GPU_GEMM_TILE_ROWS x _TOKENS): the narrower
 * ones do the same work a warp as each other on fewer tokens, so a short
 * run is mostly not padding. Dynamic shared memory (COLI_GPU_GEMM_SMEM_Q
 * bytes, set by ptx/gpu.c). */
template <bool Q4, int TILE> struct QTile {
	enum {
		BM = COLI_GPU_GEMM_TILE_ROWS(TILE),
		BN = COLI_GPU_GEMM_TILE_TOKENS(TILE),
		WM = BM / 32,          /* warps of a group along the rows */
		WT = BN * WM / 4,      /* tokens of a warp tile */
		QN = WT / 8,           /* mma token tiles of a warp */
		NOUT = WT,             /* outputs a thread: 32 x WT over 32 lanes */
		ABYTES = Q4 ? 16 : 32, /* bytes of a block row */
		STAGES = COLI_GPU_GEMM_STAGES_Q(Q4)
	};
	static_assert(QN % 2 == 0, "dx and qsum are read 4 tokens at a time");
	/* p1 in shared memory too for 32 outputs a thread: acc, p1 and a
	 * step's 8 mma results would take all of the 128 registers 512
	 * threads may have, and the loader's addresses would be recomputed
	 * every step */
	static constexpr bool P1S = NOUT > 16;
	struct slot {
		unsigned char a[BM * ABYTES]; /* weights of one block, [row][ABYTES] */
		signed char b[BN * 32];       /* activations of one block, [token][32] */
		unsigned w[BM];               /* the fp16 scale pair holding dw[row][b]: wperm() */
		float d[BN];                  /* dx[token][b] */
		int qs[BN];                   /* qsum[token][b] (q4) */
	};
	struct smem {
		slot s[STAGES][QG];                 /* [stage][group] */
		float p2[QTHREADS][NOUT];           /* [thread][output]: part() */
		float p1[P1S ? QTHREADS : 0][NOUT]; /* the same for p1 */
	};
};
static_assert(sizeof(QTile<false, 0>::smem) == COLI_GPU_GEMM_SMEM_Q(0, 0), "smem size");
static_assert(sizeof(QTile<true, 0>::smem) == COLI_GPU_GEMM_SMEM_Q(1, 0), "smem size");
static_assert(sizeof(QTile<false, 1>::smem) == COLI_GPU_GEMM_SMEM_Q(0, 1), "smem size");
static_assert(sizeof(QTile<true, 1>::smem) == COLI_GPU_GEMM_SMEM_Q(1, 1), "smem size");
static_assert(sizeof(QTile<false, 2>::smem) == COLI_GPU_GEMM_SMEM_Q(0, 2), "smem size");
static_assert(sizeof(QTile<true, 2>::smem) == COLI_GPU_GEMM_SMEM_Q(1, 2), "smem size");

/* Where row r's scale pair sits in a slot's w[]: within each 32 rows, rows
 * g, g + 8, g + 16, g + 24 side by side, so the 4 a thread needs in a step
 * (quant_step) are one 16-byte load. */
static __device__ __forceinline__ int wperm(int r)
{
	return (r & ~31) | (r & 7) << 2 | (r >> 3 & 3);
}

/* Where token n of a tile sits in a slot's d[] and qs[]: a warp's WT tokens
 * in the order its threads read them, thread t4's tokens nf * 8 + 2 t4 + k
 * (nf < QN, k < 2) at 2 QN t4 + 2 nf + k, so each thread's are contiguous
 * (quant_step reads them 16 bytes at a time). */
template <int WT> static __device__ __forceinline__ int tperm(int n)
{
	const int r = n % WT, nf = r >> 3, t4 = (r & 7) >> 1;

	return n - r + (WT / 4) * t4 + 2 * nf + (r & 1);
}

/* One thread's share of staging a block for its group: which bytes it
 * copies is fixed for the CTA, only the block b moves them (address + b *
 * stride), so the addresses are worked out once. Index i = tid % 128 of the
 * group: the weights' 16-byte chunks (q8 2 a row, q4 1), CPT consecutive
 * ones a thread; activations 2 threads a token (i < 2 * BN); the 4-byte
 * copies: i < BM the row's scale pair (and for q4, i < BN, the token's
 * qsum), i - BM % 128 in [0, BN) the token's dx. Rows and tokens past the
 * job's end are zero-filled (src stays a valid address). */
template <bool Q4, int TILE> struct QuantLoader {
	typedef QTile<Q4, TILE> T;
	enum { ACH = Q4 ? 1 : 2, NCH = T::BM * ACH, CPT = NCH >= 128 ? NCH / 128 : 1 };
	enum { LOCK = 0 }; /* a group's own stages (quant_steps) */
	const char *a, *x; /* weights (first chunk) and activations at block 0 */
	const float *d;    /* dx at block 0 */
	const int *qs;     /* qsum at block 0 (q4) */
	const unsigned short *scales;
	unsigned e0; /* the row's first scale: row * nb */
	unsigned ok; /* bits: OKA weights, OKX activations, OKW scales, OKD dx, OKQ qsum */
	enum { OKA = 1, OKX = 2, OKW = 4, OKD = 8, OKQ = 16 };

	__device__ __forceinline__ QuantLoader(const struct coli_gpu_gemm_job &jb, int row0,
	                                       int tok0)
	{
		const int i = threadIdx.x & 127, K = jb.K, nb = K / 32;
		const int ra = i * CPT / ACH, ca = i * CPT % ACH, n = i >> 1;
		const int nd = i - T::BM % 128;
		const bool oka = i * CPT < NCH && row0 + ra < jb.rows;
		const bool okx = i < 2 * T::BN && tok0 + n < jb.S;
		const bool okw = i < T::BM && row0 + i < jb.rows;
		const bool okd = nd >= 0 && nd < T::BN && tok0 + nd < jb.S;
		const bool okq = Q4 && i < T::BN && tok0 + i < jb.S;

		a = (const char *)jb.w +
		    (oka ? (size_t)(row0 + ra) * (Q4 ? K / 2 : K) + ca * 16 : 0);
		x = (const char *)jb.xq + (okx ? (size_t)(tok0 + n) * K + (i & 1) * 16 : 0);
		e0 = okw ? (unsigned)(row0 + i) * (unsigned)nb : 0;
		scales = jb.scales;
		d = jb.xd + (okd ? (size_t)(tok0 + nd) * nb : 0);
		qs = jb.xqsum + (okq ? (size_t)(tok0 + i) * nb : 0);
		ok = oka * OKA | okx * OKX | okw * OKW | okd * OKD | okq * OKQ;
	}

	__device__ __forceinline__ void load(typename T::slot &sl, int b) const
	{
		const int i = threadIdx.x & 127, nd = i - T::BM % 128;

		if (i * CPT < NCH)
			for (int j = 0; j < CPT; j++) { /* chunk c = i * CPT + j */
				const int c = i * CPT + j;

				cp16(&sl.a[Q4 ? c * 16 : swz32(c >> 1, c & 1)],
				     a + j * 16 + b * T::ABYTES, ok & OKA);
			}
		if (i < 2 * T::BN)
			cp16(&sl.b[swz32(i >> 1, i & 1)], x + b * 32, ok & OKX);
		if (i < T::BM) { /* the 4-byte aligned pair holding element (row, b) */
			cp4(&sl.w[wperm(i)], scales + ((e0 + b) & ~1u), ok & OKW);
			if (Q4 && i < T::BN)
				cp4(&sl.qs[tperm<T::WT>(i)], qs + b, ok & OKQ);
		}
		if (nd >= 0 && nd < T::BN)
			cp4(&sl.d[tperm<T::WT>(nd)], d + b, ok & OKD);
	}
};

/* The group loaders above read 16 bytes of a row (one block) per group and
 * step, and the 4-byte copies (scale pair, dx, qsum) a sector per row or
 * token per group: on an H100 (ncu, prefill of 2,048 tokens, 2026-12-07)
 * those copies took 16-32 L1 wavefronts an instruction, and 120M of the
 * kernel's 209M shared-memory wavefronts were above the ideal, nearly all
 * theirs. When nb % 4 == 0 the four groups walk the same leaf sequence,
 * so at every step they take the blocks x, x + 1, x + 2, x + 3 of group 0's
 * x: LockLoader stages all four at once with the CTA's 512 threads, each
 * row's and token's bytes by adjacent lanes (one sector for four 4-byte
 * copies), and the step's barrier is the CTA's. The same bytes land in the
 * same slots, so quant_step and the fold are unchanged. */
template <bool Q4, int TILE> struct LockLoader {
	typedef QTile<Q4, TILE> T;
	enum {
		WCH = Q4 ? 4 : 8, /* 16-byte weight chunks of a row's four blocks */
		NW = T::BM * WCH, /* weight copies */
		NX = T::BN * 8,   /* activation copies (two a token and block) */
		NS = T::BM * 4,   /* scale pairs (a row's four blocks' pairs) */
		NT = T::BN * 4,   /* dx and qsum (a token's four blocks) */
		IW = (NW + QTHREADS - 1) / QTHREADS,
		IX = (NX + QTHREADS - 1) / QTHREADS,
		IS = (NS + QTHREADS - 1) / QTHREADS,
		IT = (NT + QTHREADS - 1) / QTHREADS,
		LOCK = 1 /* the four groups' stages together (quant_steps) */
	};
	const struct coli_gpu_gemm_job &jb;
	/* byte offsets at x = 0 (os: the element of the row's scale) and a
	 * validity bit an item (rows and tokens past the job's end: zero-fill,
	 * from offset 0 on, a valid address) */
	unsigned ow[IW], ox[IX], os[IS], ot[IT];
	unsigned okw, okx, oks, okt;

	__device__ __forceinline__ LockLoader(const struct coli_gpu_gemm_job &job, int row0,
	                                      int tok0)
	    : jb(job), okw(0), okx(0), oks(0), okt(0)
	{
		const int K = jb.K, nb = K / 32, tid = threadIdx.x;

		for (int i = 0; i < IW; i++) {
			const int k = tid + i * QTHREADS, r = k / WCH, c = k % WCH;
			const bool ok = k < NW && row0 + r < jb.rows;

			ow[i] = ok ? (unsigned)(row0 + r) * (unsigned)(Q4 ? K / 2 : K) + c * 16 : 0;
			okw |= (unsigned)ok << i;
		}
		for (int i = 0; i < IX; i++) {
			const int k = tid + i * QTHREADS, n = k >> 3;
			const bool ok = k < NX && tok0 + n < jb.S;

			ox[i] = ok ? (unsigned)(tok0 + n) * (unsigned)K + (k & 7) * 16 : 0;
			okx |= (unsigned)ok << i;
		}
		for (int i = 0; i < IS; i++) {
			const int k = tid + i * QTHREADS, r = k >> 2;
			const bool ok = k < NS && row0 + r < jb.rows;

			os[i] = ok ? (unsigned)(row0 + r) * (unsigned)nb + (k & 3) : 0;
			oks |= (unsigned)ok << i;
		}
		for (int i = 0; i < IT; i++) {
			const int k = tid + i * QTHREADS, n = k >> 2;
			const bool ok = k < NT && tok0 + n < jb.S;

			ot[i] = ok ? ((unsigned)(tok0 + n) * (unsigned)nb + (k & 3)) * 4 : 0;
			okt |= (unsigned)ok << i;
		}
	}

	/* blocks x .. x + 3 into the groups' slots st[0..3] of a stage */
	__device__ __forceinline__ void load(typename T::slot *st, unsigned x) const
	{
		const int tid = threadIdx.x;

		for (int i = 0; i < IW; i++) {
			const int k = tid + i * QTHREADS, r = k / WCH, c = k % WCH;

			if (k < NW)
				cp16(&st[Q4 ? c : c >> 1].a[Q4 ? r * 16 : swz32(r, c & 1)],
				     (const char *)jb.w + (ow[i] + x * T::ABYTES), okw >> i & 1);
		}
		for (int i = 0; i < IX; i++) {
			const int k = tid + i * QTHREADS, c = k & 7;

			if (k < NX)
				cp16(&st[c >> 1].b[swz32(k >> 3, c & 1)],
				     (const char *)jb.xq + (ox[i] + x * 32), okx >> i & 1);
		}
		for (int i = 0; i < IS; i++) {
			const int k = tid + i * QTHREADS;

			if (k < NS)
				cp4(&st[k & 3].w[wperm(k >> 2)],
				    (const char *)jb.scales + ((os[i] + x) * 2 & ~3u),
				    oks >> i & 1);
		}
		for (int i = 0; i < IT; i++) {
			const int k = tid + i * QTHREADS, n = tperm<T::WT>(k >> 2);

			if (k < NT) {
				cp4(&st[k & 3].d[n], (const char *)jb.xd + (ot[i] + x * 4),
				    okt >> i & 1);
				if (Q4)
					cp4(&st[k & 3].qs[n],
					    (const char *)jb.xqsum + (ot[i] + x * 4), okt >> i & 1);
			}
		}
	}
};

/* One block b (a staged slot) into the running lane accumulators acc[].
 * With QN token tiles a warp: output o = (mf * QN + nf) * 4 + e is row
 * wm*32 + mf*16 + g + 8*(e >= 2), token wn*WT + nf*8 + 2*t4 + (e & 1) of the
 * tile (the mma's C layout). */
template <bool Q4, int TILE>
static __device__ __forceinline__ void quant_step(const typename QTile<Q4, TILE>::slot &sl, int b,
                                                  int par, int wm, int wn, float *acc)
{
	typedef QTile<Q4, TILE> T;
	constexpr int QN = T::QN;
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

		ldsm4(r, &sl.b[swz32(wn * T::WT + h * 16 + (lm >> 1) * 8 + lr, lm & 1)]);
		bq[2 * h][0] = r[0], bq[2 * h][1] = r[1];
		bq[2 * h + 1][0] = r[2], bq[2 * h + 1][1] = r[3];
	}
	/* dw[row][b] is the high half of its pair when row * nb + b is odd;
	 * the rows of a thread are 8 apart, so par (row * nb of its first row,
	 * mod 2) holds for all of them */
	const int sh = ((par ^ b) & 1) * 16;
	const uint4 pairs = *(const uint4 *)&sl.w[wperm(wm * 32 + g)]; /* rows g + 8 * (2mf + hi) */
	const unsigned pr[4] = {pairs.x, pairs.y, pairs.z, pairs.w};

	for (int mf = 0; mf < MF; mf++)
		for (int hi = 0; hi < 2; hi++)
			dw[mf][hi] =
			    __half2float(__ushort_as_half((unsigned short)(pr[mf * 2 + hi] >> sh)));
	/* the thread's 2 QN tokens side by side (tperm): QN / 2 16-byte loads
	 * each for dx and qsum, 4 addresses a warp */
	const int n0 = wn * T::WT + 2 * QN * t4;

	for (int h = 0; h < QN / 2; h++) {
		const float4 d4 = *(const float4 *)&sl.d[n0 + 4 * h];

		dx[2 * h][0] = d4.x, dx[2 * h][1] = d4.y;
		dx[2 * h + 1][0] = d4.z, dx[2 * h + 1][1] = d4.w;
		if (Q4) {
			const int4 q4 = *(const int4 *)&sl.qs[n0 + 4 * h];

			c[2 * h][0] = MAGIC_BITS - 8 * q4.x, c[2 * h][1] = MAGIC_BITS - 8 * q4.y;
			c[2 * h + 1][0] = MAGIC_BITS - 8 * q4.z;
			c[2 * h + 1][1] = MAGIC_BITS - 8 * q4.w;
		} else {
			c[2 * h][0] = c[2 * h][1] = c[2 * h + 1][0] = c[2 * h + 1][1] = MAGIC_BITS;
		}
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

/* The K steps of a group (grp) with either loader. L::LOCK (LockLoader): group 0's
 * walk gives x and the CTA's barrier orders the stages; else each group
 * loads and waits for its own (named barrier 1 + grp). */
template <bool Q4, int TILE, class L>
static __device__ __forceinline__ void quant_steps(typename QTile<Q4, TILE>::smem &sm, const L &ld,
                                                   int grp, int nb, int par, int wm, int wn,
                                                   float *acc, float *p1r, float *p1, float *p2)
{
	typedef QTile<Q4, TILE> T;
	constexpr int NOUT = T::NOUT;
	constexpr bool LOCK = L::LOCK;
	const int ns = (nb - grp + QG - 1) / QG; /* steps: the group's blocks */
	const int wg = LOCK ? 0 : grp;           /* whose walk the loads follow */
	int pk = 0, pb, ck = 0, cb;              /* producer and consumer: leaf, block */

	first_block(wg, pk, pb, nb);
	while (ck < QG && leaf_lane(grp, ck) >= nb) /* lanes without blocks fold +0 */
		fold_leaf<NOUT, T::P1S>(ck++, acc, p1r, p1, p2);
	cb = ck < QG ? leaf_lane(grp, ck) : nb;
	/* prologue: the first STAGES-1 steps in flight */
	for (int s = 0; s < T::STAGES - 1; s++) {
		if (pb < nb) {
			if constexpr (LOCK)
				ld.load(sm.s[s], pb);
			else
				ld.load(sm.s[s][grp], pb);
			next_block(wg, pk, pb, nb);
		}
		cp_commit();
	}
	for (int s = 0, sc = 0, sp = T::STAGES - 1; s < ns; s++) { /* stages: consumed, filled */
		cp_wait<T::STAGES - 2>();
		/* step s's stage has landed for every thread that loads it, and
		 * they are past step s-1, whose slot the load below overwrites: a
		 * group that stages its own slots waits for its own 4 warps, not
		 * the CTA */
		if (LOCK)
			__syncthreads();
		else
			asm volatile("bar.sync %0, 128;\n" ::"r"(1 + grp) : "memory");
		if (pb < nb) {
			if constexpr (LOCK)
				ld.load(sm.s[sp], pb);
			else
				ld.load(sm.s[sp][grp], pb);
			next_block(wg, pk, pb, nb);
		}
		cp_commit();
		sp = sp == T::STAGES - 1 ? 0 : sp + 1;
		quant_step<Q4, TILE>(sm.s[sc][grp], cb, par, wm, wn, acc);
		sc = sc == T::STAGES - 1 ? 0 : sc + 1;
		if ((cb += 16) >= nb) { /* leaf ck is done: fold it and the empty ones after it */
			do
				fold_leaf<NOUT, T::P1S>(ck++, acc, p1r, p1, p2);
			while (ck < QG && leaf_lane(grp, ck) >= nb);
			cb = ck < QG ? leaf_lane(grp, ck) : nb;
		}
	}
	cp_wait<0>();
}

template <bool Q4, int TILE>
static __device__ __forceinline__ void gemm_quant(const struct coli_gpu_gemm_job &jb)
{
	typedef QTile<Q4, TILE> T;
	typedef typename T::smem Smem;
	constexpr int NOUT = T::NOUT;
	extern __shared__ __align__(128) unsigned char smem_raw[];
	Smem &sm = *(Smem *)smem_raw;
	const int2 at = tile_origin<T::BM, T::BN>(jb);
	const int row0 = at.x, tok0 = at.y;
	const int warp = threadIdx.x >> 5, grp = warp >> 2, wm = warp % T::WM,
	          wn = (warp & 3) / T::WM;
	const int nb = jb.K / 32;
	const int par = ((row0 + wm * 32 + ((threadIdx.x & 31) >> 2)) * nb) & 1;
	float acc[NOUT], p1r[T::P1S ? 4 : NOUT], *p2 = &sm.p2[0][0];
	float *p1 = T::P1S ? &sm.p1[0][0] : p1r;

	for (int o = 0; o < NOUT; o++)
		acc[o] = 0.0f;
	if (nb % QG == 0) /* (uniform across the CTA) */
		quant_steps<Q4, TILE>(sm, LockLoader<Q4, TILE>(jb, row0, tok0), grp, nb, par, wm,
		                      wn, acc, p1r, p1, p2);
	else
		quant_steps<Q4, TILE>(sm, QuantLoader<Q4, TILE>(jb, row0, tok0), grp, nb, par, wm,
		                      wn, acc, p1r, p1, p2);
	fold_groups<NOUT, T::QN>(jb, row0, tok0, wm, wn, grp, acc, p2);
}

/* ---- bf16 (exact within rounding only) ---- */

#define BF_STAGES 3
#define BF_BM     COLI_GPU_GEMM_ROWS_BF16 /* 8 warps: 4 along rows x 2 along tokens */
#define BF_BN     COLI_GPU_GEMM_TOKENS

struct Bf16Smem {
	unsigned short a[BF_STAGES][BF_BM * 32]; /* bf16 [row][32], 64-byte rows */
	float b[BF_STAGES][BF_BN * 32];          /* fp32 [token][32], 128-byte rows */
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

	for (int i = tid; i < BF_BM * 4; i += BF_THREADS) {
		const int r = i >> 2, c = i & 3;
		const bool ok = row0 + r < jb.rows;
		const unsigned short *src =
		    (const unsigned short *)jb.w + (ok ? (size_t)(row0 + r) * K + k0 + c * 8 : 0);

		cp16(&sm.a[st][swz64(r, c)], src, ok);
	}
	for (int i = tid; i < BF_BN * 8; i += BF_THREADS) {
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
	const struct coli_gpu_gemm_job jb = *find_job(jobs, n_jobs);
	const int2 at = tile_origin<BF_BM, BF_BN>(jb);
	const int row0 = at.x, tok0 = at.y;
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

/* q8/q4: each job has its tile (jb.tile, the smallest that holds its run,
 * set by ptx/gpu.c), so one launch runs short and long runs side by side;
 * the branch is the same for the whole CTA. */
template <bool Q4>
static __device__ __forceinline__ void gemm_q(const struct coli_gpu_gemm_job *jobs, int n_jobs)
{
	const struct coli_gpu_gemm_job jb = *find_job(jobs, n_jobs);

	if (jb.tile == 2)
		gemm_quant<Q4, 2>(jb);
	else if (jb.tile == 1)
		gemm_quant<Q4, 1>(jb);
	else
		gemm_quant<Q4, 0>(jb);
}

GEMM_KERNELS(q8_0, gemm_q<false>, QTHREADS)
GEMM_KERNELS(q4_0, gemm_q<true>, QTHREADS)
GEMM_KERNELS(bf16, gemm_bf16, COLI_GPU_GEMM_THREADS_BF16)
