/*
 * ptx/attn/mla_decode.cuh — the decode form of ptx/attn/mla.cu's latent attention
 * (included by mla.cu: one module): bf16 tensor cores with split operands,
 * the query's heads 32 a CTA, the query and the softmax weights held in
 * registers as sums of bf16 terms.
 *
 * The cache operand is exact in bf16 where the cache is bf16 (the default
 * --kv-type) and where it is q8 (int8 values are bf16 integers; a row's two
 * scales, c_kv's and k_pe's, stay outside the product: the score's two
 * segment sums are scaled per position, and P is scaled by the row's c_kv
 * scale before P . V). An f32 cache is staged as two bf16 planes, hi and lo,
 * and the products add hi.lo's cross term. The other operand, the query
 * (fp32) and P (fp32), is split into NS bf16 terms x = t0 + t1 (+ t2), each
 * the rounding of what the terms before it left: NS = 1 is one bf16 product
 * (8 bits), 2 about 16 bits, 3 about 24 (~fp32). Every product is
 * mma.sync m16n8k16 bf16 with fp32 accumulation, small terms first.
 *
 * A CTA is (head group, split, query t): 8 warps, COLI_GPU_MLA_DEC_HEADS = 32
 * heads (two m16 tiles), tiles of COLI_GPU_MLA_DEC_TILE = 32 positions. The
 * grid's x is the head group, so the groups of one split are launched side
 * by side and read the same cache rows at about the same time: the first
 * group's read comes from HBM, the others' from L2. Warp w = (mt = w % 2,
 * quarter = w / 2):
 *   scores  S [16 heads of mt][32] over the key steps (16 values each)
 *           quarter, quarter + 4, ...: its query fragments stay in registers
 *           the whole launch (NS x 10 k-steps x 4 words at dk <= 640); the
 *           four quarters' partial sums meet in shared memory, added in a
 *           fixed order by the softmax;
 *   softmax 8 threads a head, 4 positions each: scale, mask, the running
 *           max and sum, P (q8: times the row's c_kv scale) over the
 *           partials, the correction exp(m_old - m_new);
 *   P . V   O [16 heads of mt][dv n-tiles quarter, quarter + 4, ...] (dv <=
 *           512: 16 n-tiles of 8 a warp, 64 fp32 registers), rescaled by the
 *           correction; P's fragments from shared memory split into NS terms,
 *           V's with ldmatrix.trans from the staged rows.
 * Shared memory: the staged tiles [2 buffers][planes][32][dk + 8] bf16 (the
 * +8 makes both the 32-bit fragment loads and ldmatrix conflict-free), the
 * four partials [4][32][36] fp32 (P written over the first), m, l,
 * correction [32], the q8 scales [2][32][2]: 94 KB at dk = 576 bf16, 169 KB
 * for an f32 cache. Tile k + 1 streams in with cp.async while tile k is
 * computed for a bf16 cache; f32 and q8 rows are loaded, converted and
 * stored before tile k's work (not overlapped: a later step).
 *
 * Splits, partials and their combine are mla.cu's (a query's split from its
 * own position): a split writes its two m16 tiles as two of mla.cu's 16-head
 * tiles ([queries][ceil(nh / 16)][splits][16 dv + 32]), and
 * coli_attn_mla_combine adds them in ascending split order. Deterministic:
 * fixed reduction orders, no atomics.
 */
#ifndef COLI_PTX_MLA_DECODE_CUH
#define COLI_PTX_MLA_DECODE_CUH

#include "ptx/attn/mma_bf16.cuh"

#define MD_H  COLI_GPU_MLA_DEC_HEADS
#define MD_P  COLI_GPU_MLA_DEC_TILE
#define MD_KQ COLI_GPU_MLA_DEC_KQ
#define MD_NT COLI_GPU_MLA_DEC_NT
#define MD_SP (MD_P + 4) /* a row of S / P in shared memory, floats */
/* the softmax's 8 threads a head of 4 positions, ldmatrix's 32 rows a tile,
 * 8 warps of (m-tile, quarter) */
static_assert(MD_P == 32 && MD_H == 32 && COLI_GPU_MLA_THREADS == 256, "mla_decode's shape");
static_assert(MD_P == KV_BLOCK, "a tile is one KV block: one kv_at");

/* The tile's positions p0 .. p0 + MD_P - 1, C's rows row0 .. (one KV block),
 * into dst ([planes][MD_P][dk + 8] bf16 bits) and, q8, their scales into qs
 * ([MD_P][2]: c_kv's, k_pe's); positions at or past n zero (scales too). One commit group (empty
 * but for bf16's cp.async); the plain stores of f32 and q8 are made visible by the __syncthreads
 * that follows the cp_wait. */
template <int KT>
static __device__ __forceinline__ void md_load(unsigned short *dst, float *qs, const void *Cv,
                                               size_t row0, int p0, int n, int dk, int dv, int ld)
{
	const int sr = dk + 8, lane = threadIdx.x & 31;

	/* a warp a row at a time */
	for (int r = threadIdx.x >> 5; r < MD_P; r += COLI_GPU_MLA_THREADS / 32) {
		const bool in = p0 + r < n;
		unsigned short *d = dst + r * sr;

		if (KT == 1) {
			const unsigned short *src =
			    (const unsigned short *)Cv + (in ? row0 + r : 0) * dk;

			for (int c = 8 * lane; c < dk; c += 256)
				cp16(d + c, src + c, in);
		} else if (KT == 0) {
			const float *src = (const float *)Cv + (in ? row0 + r : 0) * ld;

			for (int c = 4 * lane; c < dk; c += 128) {
				const float4 x = in ? __ldg((const float4 *)(src + c))
				                    : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
				const unsigned h0 = md_bf2(x.x, x.y), h1 = md_bf2(x.z, x.w);

				*(uint2 *)(d + c) = make_uint2(h0, h1);
				*(uint2 *)(d + MD_P * sr + c) =
				    make_uint2(md_bf2(x.x - __uint_as_float(h0 << 16),
				                      x.y - __uint_as_float(h0 & 0xffff0000u)),
				               md_bf2(x.z - __uint_as_float(h1 << 16),
				                      x.w - __uint_as_float(h1 & 0xffff0000u)));
			}
		} else {
			const size_t rb = kv_row_size(2, dk, (dk + dv - 1) / dv);
			const char *row = (const char *)Cv + (in ? (row0 + r) * rb : 0);
			const int soff = (dk + 3) & ~3;

			for (int c = 4 * lane; c < dk; c += 128) {
				const int w = in ? __ldg((const int *)(row + c)) : 0;

				*(uint2 *)(d + c) =
				    make_uint2(md_bf2((float)(signed char)(w & 0xff),
				                      (float)(signed char)((w >> 8) & 0xff)),
				               md_bf2((float)(signed char)((w >> 16) & 0xff),
				                      (float)(signed char)((w >> 24) & 0xff)));
			}
			if (lane < 2) /* k_pe's scale only where the row has a k_pe part */
				qs[2 * r + lane] = in && (lane == 0 || dk > dv)
				                       ? __ldg((const float *)(row + soff) + lane)
				                       : 0.0f;
		}
	}
	cp_commit();
}

/* Grid (ceil(nh / MD_H), splits, queries); dynamic shared memory as
 * mla_dec_smem in ptx/attn/gpu_mla.c. Query t = t0 + blockIdx.z of slot s at
 * position p (attn_row, as mla.cu's); a split covers tiles [split * tps, +tps)
 * of its positions 0 .. p (rows kv_at(tab, nbs, s, .)), tps =
 * ceil(tiles / msp) of its own tiles (mla.cu's split: a query's bits do not
 * depend on the launch); part as mla.cu's attn_mla. */
template <int KT, int NS>
static __device__ void attn_mla_dec(const float *q, const void *C, float *out, int pos0,
                                    const int *posp, int nh, int dk, int dv, int ld, int ldt,
                                    int ldh, float scale, int msp, float *part, int t0,
                                    const int *rows, const int *tab, int nbs)
{
	constexpr int PL = KT == 0 ? 2 : 1; /* bf16 planes a staged row: f32 hi, lo */
	extern __shared__ __align__(16) unsigned char md_sm[];
	const int sr = dk + 8;                          /* bf16 a staged row */
	unsigned short *tb = (unsigned short *)md_sm;   /* [2][PL][MD_P][sr] */
	float *ss = (float *)(tb + 2 * PL * MD_P * sr); /* [4][MD_H][MD_SP] */
	float *s_m = ss + 4 * MD_H * MD_SP, *s_l = s_m + MD_H, *s_c = s_l + MD_H;
	float *s_qs = s_c + MD_H; /* [2][MD_P][2] */
	const int grp = blockIdx.x, split = blockIdx.y, tl = blockIdx.z, t = t0 + tl;
	const int splits = gridDim.y;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
	const int mt = warp & 1, wq = warp >> 1, ksteps = dk / 16;
	unsigned qa[NS][MD_KQ][4]; /* the query's fragments: term, k-step wq + 4 i, word */
	float o[MD_NT][4];         /* O: n-tile wq + 4 i */

	pdl_entry();
	int slot; /* (posp: a replayed graph's position, which the kernel ahead may have written) */
	const int h0 = grp * MD_H, n = attn_row(pos0, posp, rows, t, &slot),
	          tiles = (n + MD_P - 1) / MD_P;
	const int tps = (tiles + msp - 1) / msp, k0 = split * tps, k1 = min(k0 + tps, tiles);

	{ /* rows g, g + 8 of the warp's m-tile; heads past nh are zero */
		const int r0 = h0 + 16 * mt + g, r1 = r0 + 8;
		const float *q0 = q + ((size_t)t * nh + (r0 < nh ? r0 : 0)) * dk;
		const float *q1 = q + ((size_t)t * nh + (r1 < nh ? r1 : 0)) * dk;

#pragma unroll
		for (int i = 0; i < MD_KQ; i++) {
			const int kk = 16 * (wq + 4 * i) + 2 * c;
			const bool kin = wq + 4 * i < ksteps;
			const float2 z = make_float2(0.0f, 0.0f);

			md_split<NS>(kin && r0 < nh ? __ldg((const float2 *)(q0 + kk)) : z,
			             &qa[0][i][0], MD_KQ * 4);
			md_split<NS>(kin && r1 < nh ? __ldg((const float2 *)(q1 + kk)) : z,
			             &qa[0][i][1], MD_KQ * 4);
			md_split<NS>(kin && r0 < nh ? __ldg((const float2 *)(q0 + kk + 8)) : z,
			             &qa[0][i][2], MD_KQ * 4);
			md_split<NS>(kin && r1 < nh ? __ldg((const float2 *)(q1 + kk + 8)) : z,
			             &qa[0][i][3], MD_KQ * 4);
		}
	}
	if (threadIdx.x < MD_H) {
		s_m[threadIdx.x] = -INFINITY;
		s_l[threadIdx.x] = 0.0f;
	}
#pragma unroll
	for (int i = 0; i < MD_NT; i++)
		o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
	if (k0 < k1)
		md_load<KT>(tb, s_qs, C, kv_at(tab, nbs, slot, k0 * MD_P), k0 * MD_P, n, dk, dv,
		            ld);
	for (int k = k0; k < k1; k++) {
		const int b = (k - k0) & 1, p0 = k * MD_P;
		const unsigned short *cur = tb + b * PL * MD_P * sr;
		const float *qs = s_qs + b * 2 * MD_P;

		__syncthreads(); /* the previous tile's readers are done with the other
		                  * buffer and with ss */
		if (k + 1 < k1) {
			md_load<KT>(tb + (b ^ 1) * PL * MD_P * sr, s_qs + (b ^ 1) * 2 * MD_P, C,
			            kv_at(tab, nbs, slot, p0 + MD_P), p0 + MD_P, n, dk, dv, ld);
			cp_wait<1>();
		} else {
			cp_wait<0>();
		}
		__syncthreads(); /* tile k (every thread's copies and stores) visible */
		{                /* S partial of the warp's key steps: [16 heads][32 positions] */
			float s[4][4], sp[4][4]; /* c_kv's steps; q8: k_pe's apart */
			const unsigned short *cb = cur + g * sr + 2 * c;

#pragma unroll
			for (int j = 0; j < 4; j++)
				s[j][0] = s[j][1] = s[j][2] = s[j][3] = sp[j][0] = sp[j][1] =
				    sp[j][2] = sp[j][3] = 0.0f;
#pragma unroll
			for (int i = 0; i < MD_KQ; i++) {
				const int kj = wq + 4 * i;

				if (kj >= ksteps)
					break;
				const bool pe = KT == 2 && 16 * kj >= dv;

#pragma unroll
				for (int j = 0; j < 4; j++) {
					const unsigned short *bp = cb + 8 * j * sr + 16 * kj;
					const unsigned b0 = *(const unsigned *)bp,
					               b1 = *(const unsigned *)(bp + 8);

					if (pe) {
#pragma unroll
						for (int st = NS - 1; st >= 0; st--)
							md_mma(sp[j], qa[st][i], b0, b1);
						continue;
					}
					if (KT == 0) /* the cache's lo plane times the query's
					              * first term */
						md_mma(s[j], qa[0][i],
						       *(const unsigned *)(bp + MD_P * sr),
						       *(const unsigned *)(bp + MD_P * sr + 8));
#pragma unroll
					for (int st = NS - 1; st >= 0; st--)
						md_mma(s[j], qa[st][i], b0, b1);
				}
			}
			float *my = ss + (wq * MD_H + 16 * mt) * MD_SP;

#pragma unroll
			for (int j = 0; j < 4; j++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					const int row = g + 8 * (e >> 1),
					          col = 8 * j + 2 * c + (e & 1);

					my[row * MD_SP + col] =
					    KT == 2
					        ? s[j][e] * qs[2 * col] + sp[j][e] * qs[2 * col + 1]
					        : s[j][e];
				}
		}
		__syncthreads(); /* the four partials written */
		{                /* online softmax: head hh, positions j0 .. j0 + 3 */
			const int hh = threadIdx.x >> 3, j0 = (threadIdx.x & 7) * 4;
			float v[4], mx = -INFINITY, sum = 0.0f;
			const float m_old = s_m[hh];

#pragma unroll
			for (int i = 0; i < 4; i++) {
				const float *x = ss + hh * MD_SP + j0 + i;

				/* the quarters in a fixed order */
				v[i] = p0 + j0 + i < n
				           ? ((x[0] + x[MD_H * MD_SP]) +
				              (x[2 * MD_H * MD_SP] + x[3 * MD_H * MD_SP])) *
				                 scale
				           : -INFINITY;
				mx = fmaxf(mx, v[i]);
			}
			for (int off = 4; off; off >>= 1) /* within the head's 8 lanes */
				mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
			const float m_new =
			    fmaxf(m_old, mx); /* finite: the tile holds a position */
			const float corr = expf(m_old - m_new);

#pragma unroll
			for (int i = 0; i < 4; i++) {
				v[i] = expf(v[i] - m_new);
				sum += v[i];
			}
			for (int off = 4; off; off >>= 1)
				sum += __shfl_xor_sync(0xffffffffu, sum, off);
				/* only this thread read these four positions of the partials: P
				 * over the first (q8: times the row's c_kv scale, 0 past n) */
#pragma unroll
			for (int i = 0; i < 4; i++)
				ss[hh * MD_SP + j0 + i] = KT == 2 ? v[i] * qs[2 * (j0 + i)] : v[i];
			if ((threadIdx.x & 7) == 0) {
				s_l[hh] = s_l[hh] * corr + sum;
				s_m[hh] = m_new;
				s_c[hh] = corr;
			}
		}
		__syncthreads(); /* P and the correction written */
		{                /* O = O * corr + P . V over the tile's two k-steps */
			const float *pr0 = ss + (16 * mt + g) * MD_SP + 2 * c,
			            *pr1 = pr0 + 8 * MD_SP;
			const float c0 = s_c[16 * mt + g], c1 = s_c[16 * mt + g + 8];
			unsigned pa[NS][2][4]; /* term, k-step, word */

#pragma unroll
			for (int ks = 0; ks < 2; ks++) {
				md_split<NS>(*(const float2 *)(pr0 + 16 * ks), &pa[0][ks][0], 8);
				md_split<NS>(*(const float2 *)(pr1 + 16 * ks), &pa[0][ks][1], 8);
				md_split<NS>(*(const float2 *)(pr0 + 16 * ks + 8), &pa[0][ks][2],
				             8);
				md_split<NS>(*(const float2 *)(pr1 + 16 * ks + 8), &pa[0][ks][3],
				             8);
			}
#pragma unroll
			for (int i = 0; i < MD_NT; i++) {
				const int n0 = 8 * (wq + 4 * i);
				unsigned bv[4];

				if (n0 >= dv)
					break;
				o[i][0] *= c0, o[i][1] *= c0, o[i][2] *= c1, o[i][3] *= c1;
				if (KT == 0) { /* P's first term times the values' lo plane */
					md_ldsm4t(bv, cur + MD_P * sr + lane * sr + n0);
					md_mma(o[i], pa[0][0], bv[0], bv[1]);
					md_mma(o[i], pa[0][1], bv[2], bv[3]);
				}
				md_ldsm4t(bv, cur + lane * sr + n0);
#pragma unroll
				for (int st = NS - 1; st >= 0; st--) {
					md_mma(o[i], pa[st][0], bv[0], bv[1]);
					md_mma(o[i], pa[st][1], bv[2], bv[3]);
				}
			}
		}
	}
	__syncthreads(); /* s_l, s_m final */
	const size_t stride = (size_t)COLI_GPU_MLA_HEADS * dv + 2 * COLI_GPU_MLA_HEADS;
	const int ht16 = (nh + COLI_GPU_MLA_HEADS - 1) / COLI_GPU_MLA_HEADS, ht = 2 * grp + mt;

#pragma unroll
	for (int i = 0; i < MD_NT; i++) {
		const int n0 = 8 * (wq + 4 * i);

		if (n0 >= dv)
			break;
#pragma unroll
		for (int e = 0; e < 4; e++) {
			const int hl = g + 8 * (e >> 1), col = n0 + 2 * c + (e & 1);

			if (splits == 1) {
				if (h0 + 16 * mt + hl < nh)
					out[(size_t)t * ldt + (size_t)(h0 + 16 * mt + hl) * ldh +
					    col] = o[i][e] / s_l[16 * mt + hl];
			} else if (ht < ht16) {
				/* a split with no tile leaves m = -inf, l = 0, O = 0 */
				part[(((size_t)tl * ht16 + ht) * splits + split) * stride +
				     (size_t)hl * dv + col] = o[i][e];
			}
		}
	}
	if (splits > 1 && threadIdx.x < MD_H && 2 * grp + threadIdx.x / COLI_GPU_MLA_HEADS < ht16) {
		float *mine =
		    part +
		    (((size_t)tl * ht16 + 2 * grp + threadIdx.x / COLI_GPU_MLA_HEADS) * splits +
		     split) *
		        stride +
		    (size_t)COLI_GPU_MLA_HEADS * dv + threadIdx.x % COLI_GPU_MLA_HEADS;

		mine[0] = s_m[threadIdx.x];
		mine[COLI_GPU_MLA_HEADS] = s_l[threadIdx.x];
	}
}

/* coli_attn_mla_dec{1,2,3}[_bf16|_q8]: NS terms, the cache's type */
#define ATTN_MLA_DEC(name, kt, ns)                                                                 \
	extern "C" __global__ void __launch_bounds__(COLI_GPU_MLA_THREADS, 1)                      \
	    name(const float *q, const void *C, float *out, int pos0, const int *posp, int nh,     \
	         int dk, int dv, int ld, int ldt, int ldh, float scale, int msp, float *part,      \
	         int t0, const int *rows, const int *tab, int nbs)                                 \
	{                                                                                          \
		attn_mla_dec<kt, ns>(q, C, out, pos0, posp, nh, dk, dv, ld, ldt, ldh, scale, msp,  \
		                     part, t0, rows, tab, nbs);                                    \
	}
ATTN_MLA_DEC(coli_attn_mla_dec1, 0, 1)
ATTN_MLA_DEC(coli_attn_mla_dec2, 0, 2)
ATTN_MLA_DEC(coli_attn_mla_dec3, 0, 3)
ATTN_MLA_DEC(coli_attn_mla_dec1_bf16, 1, 1)
ATTN_MLA_DEC(coli_attn_mla_dec2_bf16, 1, 2)
ATTN_MLA_DEC(coli_attn_mla_dec3_bf16, 1, 3)
ATTN_MLA_DEC(coli_attn_mla_dec1_q8, 2, 1)
ATTN_MLA_DEC(coli_attn_mla_dec2_q8, 2, 2)
ATTN_MLA_DEC(coli_attn_mla_dec3_q8, 2, 3)

#endif
