/*
 * ptx/attn/attn_tc.cuh — attention over a bf16 or q8 KV cache on tensor cores
 * (included by ptx/attn/attention.cu: one module): coli_attn_tc_<hd>_<type> for
 * head sizes 64 and 128, one kernel for a decode step's queries and a prefill
 * batch's, so a query gets the same bits in either (an f32 cache keeps the
 * fp32 kernels: coli_attn_chunks, coli_attn_prefill).
 *
 * A CTA is (tile of qt queries, kv head, split z); its columns are the
 * tile's (query, head) pairs, col = qi * group + h, at most TC_COLS (four
 * n-tiles of 8), and it walks its positions in chunks of AD_CHUNK = 32 (one
 * block of the cache), staged by cp.async three chunks ahead as the cache
 * stores them (a q8 chunk is then widened to bf16 in shared memory: int8
 * values are bf16 integers, the rows' scales stay outside the products).
 * Per chunk and column, whatever CTA or launch computes it:
 *   scores  S = (S_lo + S_hi) [* the row's K scale] * scale, S_lo / S_hi the
 *           dims' first and second halves, each an mma.sync m16n8k16 chain
 *           over its k-steps in order (A: the staged K rows by ldmatrix; B:
 *           the column's query split into TC_NS bf16 terms, smallest first);
 *           -inf from the column's last position on and before its window;
 *   softmax lane = position: the chunk's max, exp and shuffled sum, the
 *           running (m, l) and the correction cf = exp(m_old - m_new), as the
 *           fp32 kernels take them;
 *   P . V   acc = acc * cf, then for the chunk's two 16-position k-steps the
 *           weights [* the row's V scale] split into TC_NS terms, smallest
 *           first (A: V transposed by ldmatrix.trans).
 * The mma's sums are the hardware's (fp32 accumulate, the same for a column
 * whichever columns share its tile: columns and rows of an mma do not mix),
 * so the bits are the device's own; the dense part is exempt from the
 * placement invariant, and within it these kernels are deterministic.
 *
 * Splits: a column's positions split as coli_attn_chunks splits them
 * (COLI_GPU_ATTN_CPS chunks of its own position). With gridDim.z > 1 (a
 * decode step; a prefill's few queries after a long cache) CTA z takes split
 * z of every column and writes attention.cuh's partials, the last CTA of a
 * query combining them (attn_combine; attn_combine_cta over many splits, a
 * decode step's long fold shared by the last `ways` CTAs: arrival_share); a
 * tile whose columns split unlike stays whole in CTA 0. Whole (gridDim.z ==
 * 1), a CTA folds a column's splits as attn_combine does, at each split's
 * end (attn_fold: a running maximum M, O = O * exp(M - M') + acc * exp(m -
 * M')), and at the last out = O / L (sinks: attention.cuh); one pass over
 * the cache.
 *
 * Warps: scores unit (m-tile mt, n-tile, half) w and w + 8, the query's
 * fragments of the unit held in registers the whole launch; softmax columns
 * w, w + 8, w + 16, w + 24 (their m, l, M, L in registers); P . V the m-tile
 * of 16 dims w (hd 128: every n-tile) or w % 4 (hd 64: n-tiles w / 4, + 2).
 */
#ifndef COLI_PTX_ATTN_TC_CUH
#define COLI_PTX_ATTN_TC_CUH

#include "ptx/attn/attention.cuh"
#include "ptx/attn/mma_bf16.cuh"

/* A query's last CTA combines its splits with all its threads
 * (attn_combine_cta) once a thread's own chains would hold AT_CTA_COMBINE
 * folds (splits x outputs a thread), else a thread an output (attn_combine):
 * the CTA's version pays five barriers and a pass a head. H100, qwen3-30b
 * shape (`tests/ptx/dense_kernels --bench ops`): at 8, 32 and 64 folds (1k,
 * 4k, 8k positions, two heads a CTA) the thread's chains were 1.4, 0.6 and
 * 0.4 us a layer faster; at 256 (16k, eight heads) the CTA's 20 us. A decode
 * step after 3,300 positions (27 splits, eight heads: 108 folds) took 1,524
 * tok/s with the thread's chains and 1,662 after 3,968 positions with the
 * CTA's (`coli bench decode --ctx-fill`): the line lies between 64 and 108. */
#define AT_CTA_COMBINE 96
/* ... and shares it between CTAs (up to `ways`, arrival_share) from
 * AT_SHARE_COMBINE folds a thread: H100, the same shape and bench, shared
 * by 8 at 32, 128 and 256 folds the fold cost 2.0 us more, 0.1 less and 1.6
 * less a layer (1k, 4k and 8k positions). */
#define AT_SHARE_COMBINE 192

#define TC_COLS COLI_GPU_TC_COLS
/* bf16 terms of q and of P: ~16 bits, twice the bits of the cache's values
 * (MLA's kernel takes as many); a third costs half as many mma again */
#define TC_NS   2
#define TC_SP   COLI_GPU_TC_SP

/* A staged chunk (COLI_GPU_TC_TILE): K rows [AD_CHUNK][KS bytes] as the cache
 * stores them, +16 bytes a row (ldmatrix's 8 rows in 8 bank groups), V rows
 * [AD_CHUNK][VS], and with a q8 type the rows' scales, K's then V's. */
template <int HD, int M> struct TcTile {
	static constexpr int KT = kvmode<M>::KT, VT = kvmode<M>::VT;
	static constexpr int KS = HD * kv_esz<KT>() + 16, VS = HD * kv_esz<VT>() + 16;
	static constexpr int V0 = AD_CHUNK * KS, S0 = V0 + AD_CHUNK * VS;
	static constexpr int BYTES = COLI_GPU_TC_TILE(HD, kv_esz<KT>(), kv_esz<VT>());
	static constexpr int NST = COLI_GPU_TC_STAGES(BYTES);
	static constexpr int WR = HD + 8; /* bf16 a widened row (q8), padded as KS */
};

template <int HD, int M> struct TcSmem {
	typedef TcTile<HD, M> T;
	char st[T::NST][T::BYTES];
	unsigned short kw[T::KT == 2 ? AD_CHUNK * T::WR : 8]; /* q8 K widened to bf16 */
	unsigned short vw[T::VT == 2 ? AD_CHUNK * T::WR : 8];
	float s[2][TC_COLS * TC_SP]; /* [half][col][p]: scores; s[0] then the weights */
	float o[TC_COLS * HD];       /* [col][dim]: O of the fold, then the outputs */
	float cf[TC_COLS], fo[TC_COLS], ff[TC_COLS], fl[TC_COLS], fm[TC_COLS];
	int ev[TC_COLS], cn[TC_COLS], ck0[TC_COLS], cps[TC_COLS];
};

/* q8 rows of a landed stage widened to bf16 (exact), into w [AD_CHUNK][WR]. */
template <int HD>
static __device__ __forceinline__ void tc_widen(unsigned short *w, const char *rows, int rs)
{
	for (int i = threadIdx.x; i < AD_CHUNK * HD / 4; i += AT_THREADS) {
		const int r = i / (HD / 4), c = i % (HD / 4);
		const int x = *(const int *)(rows + r * rs + 4 * c);

		*(uint2 *)(w + r * (HD + 8) + 4 * c) = make_uint2(
		    md_bf2((float)(signed char)(x & 0xff), (float)(signed char)((x >> 8) & 0xff)),
		    md_bf2((float)(signed char)((x >> 16) & 0xff), (float)(signed char)(x >> 24)));
	}
}

/* Where a CTA's K/V chunks come from: one sequence's slot of the paged
 * cache, kv head kvh, positions below nmax (the rest zero-filled). */
struct tc_kv {
	const void *K, *V;
	const int *tab;
	int nbs, slot, nmax, kvh, soff;
	size_t krow, vrow;
};

/* Chunk c's rows into stage c % NST of sm (TcSmem or TcpSmem). */
template <int HD, int M, class Sm>
static __device__ __forceinline__ void tc_stage(Sm &sm, const struct tc_kv &kv, int c)
{
	typedef TcTile<HD, M> Tl;

	kv_stage<HD, M, Tl::KS, Tl::VS, Tl::V0, Tl::S0>(
	    sm.st[c % Tl::NST], kv.K, kv.V, kv_at(kv.tab, kv.nbs, kv.slot, c * AD_CHUNK),
	    min(AD_CHUNK, kv.nmax - c * AD_CHUNK), kv.kvh, kv.krow, kv.vrow, kv.soff);
}

/* The chunks [c0, c1) through the stages, NST - 1 copies in flight: the
 * first ones before the loop (tc_stage_first), then at the top of chunk c
 * (tc_stage_next) its rows landed and seen by every thread, the copy NST - 1
 * ahead issued and a q8 chunk widened to bf16 (sm.kw, sm.vw): returns chunk
 * c's stage. Every thread of the CTA calls both (barriers). */
template <int HD, int M, class Sm>
static __device__ __forceinline__ void tc_stage_first(Sm &sm, const struct tc_kv &kv, int c0,
                                                      int c1)
{
	for (int i = 0; i < TcTile<HD, M>::NST - 1; i++) {
		if (c0 + i < c1)
			tc_stage<HD, M>(sm, kv, c0 + i);
		cp_commit();
	}
}

template <int HD, int M, class Sm>
static __device__ __forceinline__ const char *tc_stage_next(Sm &sm, const struct tc_kv &kv, int c,
                                                            int c1)
{
	typedef TcTile<HD, M> Tl;
	const char *st = sm.st[c % Tl::NST];

	cp_wait<Tl::NST - 2>();
	__syncthreads(); /* chunk c landed; every thread past chunk c - 1 */
	if (c + Tl::NST - 1 < c1)
		tc_stage<HD, M>(sm, kv, c + Tl::NST - 1);
	cp_commit();
	if (Tl::KT == 2 || Tl::VT == 2) {
		if (Tl::KT == 2)
			tc_widen<HD>(sm.kw, st, Tl::KS);
		if (Tl::VT == 2)
			tc_widen<HD>(sm.vw, st + Tl::V0, Tl::VS);
		__syncthreads(); /* the widened rows before their ldmatrix */
	}
	return st;
}

template <bool B> struct tc_bool {
	static constexpr bool value = B;
};

template <int HD, int M>
static __device__ __forceinline__ void
attn_tc(const float *q, const void *K, const void *V, float *out, int pos0, const int *posp, int nh,
        int nkv, float scale, int max_splits, int T, signed char *aq, float *ad, int *aqs,
        const float *sinks, int window, const int *rows, const int *tab, int nbs, float *part,
        unsigned *count, int tq0, int qt, int ways)
{
	typedef TcTile<HD, M> Tl;
	typedef TcSmem<HD, M> Sm;
	constexpr int KT = Tl::KT, VT = Tl::VT, KH = HD / 32; /* k-steps a half */
	constexpr int NPV = HD == 128 ? 4 : 2; /* n-tiles a warp's P . V, at most */
	extern __shared__ __align__(16) unsigned char tc_raw[];
	Sm &sm = *(Sm *)tc_raw;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g4 = lane >> 2,
	          c4 = lane & 3;
	/* blockIdx.y: kv head kvh and slice hs of its heads (gridDim.y / nkv
	 * slices of `group` heads from hb: a decode step's choice, the same bits) */
	const int hsl = gridDim.y / nkv, kvh = blockIdx.y / hsl, group = nh / nkv / hsl;
	const int hb = kvh * (nh / nkv) + blockIdx.y % hsl * group; /* the CTA's first head */
	const int kvd = nkv * HD, z = blockIdx.z;
	const int t0 = tq0 + ((int)gridDim.x - 1 - (int)blockIdx.x) * qt; /* heaviest tile first */
	const int ncol = qt * group, nt = (ncol + 7) >> 3, nq = group * HD;
	const size_t krow = kv_row_size(KT, kvd, nkv), vrow = kv_row_size(VT, kvd, nkv);
	const size_t stride = (size_t)nq + 2 * group;
	const int soff = ((kvd + 3) & ~3) + 4 * kvh;
	const int md = HD == 128 ? warp : warp & 3, nv0 = HD == 128 ? 0 : warp >> 2;
	const struct attn_out ao = {out, aq, ad, aqs};
	int slot;
	/* the tile's queries are one sequence's (rows: a tile of one query) */
	const int n_first = t0 < T ? attn_row(pos0, posp, rows, t0, &slot) : 0;
	const int nmax = rows ? n_first : n_first + min(T - t0, qt) - 1;
	const int nch = (nmax + AD_CHUNK - 1) / AD_CHUNK;
	const int c_lo = window > 0 && n_first > window ? (n_first - window) / AD_CHUNK : 0;
	float m[4], l[4], Mx[4], L[4]; /* softmax columns warp + 8 i */
	float acc[NPV][4];             /* P . V: n-tile nv0 + 2 i (hd 64) or i (hd 128) */
	unsigned qf[2][KH][2][TC_NS];  /* scores units warp, warp + 8: k-step, word, term */
	int zcps = 0, c_begin = c_lo, c_end = nch;

	if (t0 >= T)
		return;
	if (tid < TC_COLS) { /* column tid: its query's positions, window start, split */
		const int t = t0 + tid / group;
		const int n = tid < ncol && t < T ? (rows ? n_first : n_first + t - t0) : 0;

		sm.cn[tid] = n;
		sm.ck0[tid] = window > 0 && n > window ? n - window : 0;
		sm.cps[tid] = COLI_GPU_ATTN_CPS(n > 0 ? n : 1, max_splits);
		sm.ev[tid] = 0;
		sm.cf[tid] = 0.0f; /* (a padding column's, read by P . V) */
	}
#pragma unroll
	for (int uu = 0; uu < 2; uu++) { /* the query's fragments of each scores unit */
		const int u = warp + 8 * uu, nti = u >> 2, h = u & 1, col = nti * 8 + g4;
		const int t = t0 + col / group;
		const bool ok = u < 4 * nt && col < ncol && t < T;
		const float *qr = q + ((size_t)(ok ? t : 0) * nh + hb + col % group) * HD;

#pragma unroll
		for (int k = 0; k < KH; k++) {
			const int d0 = (h * KH + k) * 16 + 2 * c4;
			const float2 zz = make_float2(0.0f, 0.0f);

			md_split<TC_NS>(ok ? *(const float2 *)(qr + d0) : zz, &qf[uu][k][0][0], 1);
			md_split<TC_NS>(ok ? *(const float2 *)(qr + d0 + 8) : zz, &qf[uu][k][1][0],
			                1);
		}
	}
#pragma unroll
	for (int i = 0; i < 4; i++) {
		const int j = warp + 8 * i;

		m[i] = -INFINITY;
		l[i] = 0.0f;
		Mx[i] = sinks && j < ncol ? __ldg(sinks + hb + j % group) : -INFINITY;
		L[i] = 0.0f;
	}
#pragma unroll
	for (int i = 0; i < NPV; i++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			acc[i][e] = 0.0f;
	for (int i = tid; i < TC_COLS * HD; i += AT_THREADS)
		sm.o[i] = 0.0f;
	__syncthreads(); /* the column table */

	if (gridDim.z > 1) { /* split z of every column, when the columns split alike */
		const int last = min(ncol, (min(T, t0 + qt) - t0) * group) - 1;

		zcps = sm.cps[0] == sm.cps[last] ? sm.cps[0] : 0; /* cps grows with n */
		if (!zcps && z)
			return; /* CTA 0 takes the tile whole */
		if (zcps) {
			c_begin = max(z * zcps, c_lo);
			c_end = min(nch, (z + 1) * zcps);
			if (c_begin >= c_end)
				return; /* past the positions, or before the window */
		}
	}

	const struct tc_kv kv = {K, V, tab, nbs, slot, nmax, kvh, soff, krow, vrow};

	/* The chunk loop compiled twice, SPLIT a constant in each: a split launch's
	 * (its own m and l, no fold) and a whole one's (a split starting and
	 * ending inside the walk: the fold's events). One loop holding both was
	 * ~3,800 SASS instructions, past the instruction cache (ncu: the back
	 * edge's "no instruction" stalls); the split one alone is ~660. */
	const auto chunks = [&](auto sp) {
		constexpr bool SPLIT = decltype(sp)::value;

		tc_stage_first<HD, M>(sm, kv, c_begin, c_end);
		for (int c = c_begin; c < c_end; c++) {
			const char *st = tc_stage_next<HD, M>(sm, kv, c, c_end);

			/* scores: units (mt, n-tile, half) warp and warp + 8 */
			{
				const unsigned short *kt =
				    KT == 2 ? sm.kw : (const unsigned short *)st; /* rows of WR */

#pragma unroll
				for (int uu = 0; uu < 2; uu++) {
					const int u = warp + 8 * uu, nti = u >> 2, mt = (u >> 1) & 1,
					          h = u & 1;
					float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};

					if (u >= 4 * nt)
						break;
#pragma unroll
					for (int k = 0; k < KH; k++) {
						unsigned a[4];

						md_ldsm4(
						    a, kt +
						           (mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) *
						               Tl::WR +
						           (h * KH + k) * 16 + (lane >> 4) * 8);
#pragma unroll
						for (int s = TC_NS - 1; s >= 0; s--)
							md_mma(d, a, qf[uu][k][0][s], qf[uu][k][1][s]);
					}
					{
						float *S = sm.s[h];
						const int p = mt * 16 + g4, ca = nti * 8 + 2 * c4;

						S[ca * TC_SP + p] = d[0];
						S[(ca + 1) * TC_SP + p] = d[1];
						S[ca * TC_SP + p + 8] = d[2];
						S[(ca + 1) * TC_SP + p + 8] = d[3];
					}
				}
			}
			__syncthreads(); /* both halves of every score before the softmax */

			/* softmax: columns warp + 8 i, lane = position */
#pragma unroll
			for (int i = 0; i < 4; i++) {
				const int j = warp + 8 * i, n = j < ncol ? sm.cn[j] : 0;
				const int k0 = sm.ck0[j], cps = sm.cps[j], np = n - c * AD_CHUNK;
				float x;

				if (j >= ncol)
					break;
				x = __fadd_rn(sm.s[0][j * TC_SP + lane], sm.s[1][j * TC_SP + lane]);
				if (KT == 2)
					x = x * ((const float *)(st + Tl::S0))[lane];
				x = lane < np && c * AD_CHUNK + lane >= k0 ? x * scale : -INFINITY;
				if (!SPLIT && (c % cps == 0 || c <= k0 / AD_CHUNK)) { /* a split starts */
					m[i] = -INFINITY;
					l[i] = 0.0f;
				}
				{
					const float mn = fmaxf(m[i], warp_max(x));
					const float e = expf(x - mn); /* -inf -> 0 */
					float s = e, cf;

					for (int off = 16; off; off >>= 1)
						s += __shfl_xor_sync(0xffffffffu, s, off);
					cf = expf(m[i] - mn); /* a split's first chunk: 0 */
					l[i] = l[i] * cf + s;
					m[i] = mn;
					sm.s[0][j * TC_SP + lane] =
					    VT == 2 ? e * ((const float *)(st + Tl::S0))[AD_CHUNK + lane]
					            : e;
					if (lane == 0)
						sm.cf[j] = cf;
				}
				if (SPLIT || lane)
					continue;
				/* whole: a split's end (its last chunk, or the column's) */
				if (np <= 0 || c < k0 / AD_CHUNK || (c % cps != cps - 1 && np > AD_CHUNK)) {
					sm.ev[j] = 0;
				} else if ((n - 1) / (cps * AD_CHUNK) == k0 / (cps * AD_CHUNK)) {
					sm.ev[j] = 3; /* one split: attn_put_out's */
					sm.fm[j] = m[i];
					sm.fl[j] = l[i];
				} else {
					attn_fold(Mx[i], L[i], m[i], l[i], &sm.fo[j], &sm.ff[j]);
					sm.ev[j] = np > AD_CHUNK ? 1 : 2;
					if (np <= AD_CHUNK && sinks) /* the sink joins L last */
						L[i] += expf(__ldg(sinks + hb + j % group) - Mx[i]);
					sm.fl[j] = L[i];
				}
			}
			__syncthreads(); /* weights, corrections and the fold's events */

			/* P . V: acc [16 dims of md][8 columns] a n-tile */
			{
				const unsigned short *vt =
				    VT == 2 ? sm.vw : (const unsigned short *)(st + Tl::V0);

#pragma unroll
				for (int i = 0; i < NPV; i++) {
					const int nti = nv0 + (HD == 128 ? i : 2 * i),
					          ca = nti * 8 + 2 * c4;

					if (nti >= nt)
						break;
#pragma unroll
					for (int e = 0; e < 4; e++) {
						const int j = ca + (e & 1), k0 = sm.ck0[j], cps = sm.cps[j];

						if (!SPLIT && (c % cps == 0 || c <= k0 / AD_CHUNK))
							acc[i][e] = 0.0f; /* a split starts */
						acc[i][e] = acc[i][e] * sm.cf[j];
					}
				}
#pragma unroll
				for (int k2 = 0; k2 < 2; k2++) {
					unsigned a[4];

					md_ldsm4t(a, vt +
					                 (k2 * 16 + (lane & 7) + (lane >> 4) * 8) * Tl::WR +
					                 md * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
					for (int i = 0; i < NPV; i++) {
						const int nti = nv0 + (HD == 128 ? i : 2 * i);
						const float *pr =
						    sm.s[0] + (nti * 8 + g4) * TC_SP + k2 * 16 + 2 * c4;
						unsigned pb[2][TC_NS];

						if (nti >= nt)
							break;
						md_split<TC_NS>(*(const float2 *)pr, pb[0], 1);
						md_split<TC_NS>(*(const float2 *)(pr + 8), pb[1], 1);
#pragma unroll
						for (int s = TC_NS - 1; s >= 0; s--)
							md_mma(acc[i], a, pb[0][s], pb[1][s]);
					}
				}
				/* whole: the fold's events, element by element */
				if constexpr (!SPLIT) {
#pragma unroll
					for (int i = 0; i < NPV; i++) {
						const int nti = nv0 + (HD == 128 ? i : 2 * i),
						          ca = nti * 8 + 2 * c4;

						if (nti >= nt)
							break;
#pragma unroll
						for (int e = 0; e < 4; e++) {
							const int j = ca + (e & 1), ev = sm.ev[j];
							float *o = &sm.o[j * HD + md * 16 + g4 + (e >> 1) * 8];

							if (ev == 1) {
								*o = *o * sm.fo[j] + acc[i][e] * sm.ff[j];
							} else if (ev == 2) {
								*o = (*o * sm.fo[j] + acc[i][e] * sm.ff[j]) /
								     sm.fl[j];
							} else if (ev == 3) {
								*o = sinks ? attn_sink_out(
								                 acc[i][e], sm.fm[j], sm.fl[j],
								                 __ldg(sinks + hb + j % group))
								           : acc[i][e] / sm.fl[j];
							}
						}
					}
				}
			}
		}
	};
	if (zcps)
		chunks(tc_bool<true>());
	else
		chunks(tc_bool<false>());
	cp_wait<0>();

	if (zcps) { /* split z's state: one split writes its output, else a partial */
		const int span = zcps * AD_CHUNK;

#pragma unroll
		for (int i = 0; i < 4; i++) {
			const int j = warp + 8 * i;

			if (j < ncol && lane == 0) {
				sm.fm[j] = m[i];
				sm.fl[j] = l[i];
			}
		}
		__syncthreads(); /* every column's m and l before the outputs and partials */
#pragma unroll
		for (int i = 0; i < NPV; i++) {
			const int nti = nv0 + (HD == 128 ? i : 2 * i), ca = nti * 8 + 2 * c4;

			if (nti >= nt)
				break;
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int j = ca + (e & 1), n = sm.cn[j], k0 = sm.ck0[j];
				const int d = md * 16 + g4 + (e >> 1) * 8, qi = j / group,
				          h = j % group;

				if (n == 0)
					continue;
				if ((n - 1) / span == k0 / span) /* one split: attn_put_out's */
					sm.o[j * HD + d] =
					    sinks ? attn_sink_out(acc[i][e], sm.fm[j], sm.fl[j],
					                          __ldg(sinks + hb + h))
					          : acc[i][e] / sm.fl[j];
				else
					part[((size_t)(t0 + qi - tq0) * gridDim.y + blockIdx.y) *
					         gridDim.z * stride +
					     z * stride + (size_t)h * HD + d] = acc[i][e];
			}
		}
		if (tid < ncol && sm.cn[tid] > 0 && (sm.cn[tid] - 1) / span != sm.ck0[tid] / span) {
			const int qi = tid / group, h = tid % group;
			float *mine = part +
			              ((size_t)(t0 + qi - tq0) * gridDim.y + blockIdx.y) *
			                  gridDim.z * stride +
			              z * stride;

			mine[nq + h] = sm.fm[tid];
			mine[nq + group + h] = sm.fl[tid];
		}
	}
	__syncthreads(); /* the outputs in sm.o */
	for (int r = warp; r < ncol * (HD / 32); r += AT_THREADS / 32) {
		const int j = r / (HD / 32), d = r % (HD / 32) * 32 + lane, n = sm.cn[j];
		const int span = zcps * AD_CHUNK, t = t0 + j / group;

		if (n == 0 || (zcps && (n - 1) / span != sm.ck0[j] / span))
			continue; /* (warp-uniform) no query, or a split's partial */
		attn_store(ao, ((size_t)t * nh + hb + j % group) * HD + d, sm.o[j * HD + d]);
	}
	/* split z's queries counted in; the last CTAs of a query combine them,
	 * `ways` of them (a decode launch's choice, ptx/attn/gpu_attn.c) each a
	 * share of its outputs in whole 32-output blocks */
	for (int qi = 0; zcps && qi < qt && t0 + qi < T; qi++) {
		const int j = qi * group, n = sm.cn[j], span = zcps * AD_CHUNK;
		const int first = sm.ck0[j] / span, used = (n + span - 1) / span;
		const size_t pair = (size_t)(t0 + qi - tq0) * gridDim.y + blockIdx.y;
		const size_t head0 = (size_t)(t0 + qi) * nh + hb;
		const int w = (used - first) * nq < AT_SHARE_COMBINE * AT_THREADS
		                  ? 1
		                  : min(min(ways, used - first), nq / 32);
		const struct attn_out ao = {out + head0 * HD, aq ? aq + head0 * HD : NULL,
		                            aq ? ad + head0 * HD / 32 : NULL,
		                            aq ? aqs + head0 * HD / 32 : NULL};
		int sh;

		if (used - first < 2 || (sh = arrival_share(&count[pair], used - first, w)) < 0)
			continue;
		const float *pp = part + pair * gridDim.z * stride, *sk = sinks ? sinks + hb : NULL;

		/* the same bits either way (AT_CTA_COMBINE) */
		if (w == 1 && (used - first) * nq < AT_CTA_COMBINE * AT_THREADS)
			attn_combine(ao, pp, first, used, nq, group, HD, sk);
		else
			attn_combine_cta<4>(ao, pp, first, used, nq, group, HD, sk, (float *)sm.st,
			                    (int)(sizeof(sm.st) / sizeof(float)),
			                    32 * (sh * (nq / 32) / w), 32 * ((sh + 1) * (nq / 32) / w));
	}
}

/* coli_attn_tc_<hd>_<type>: grid (query tiles, nkv x head slices, splits), AT_THREADS
 * threads, COLI_GPU_TC_SMEM bytes of dynamic shared memory */
#define ATTN_TC(hd, sfx, m)                                                                        \
	extern "C" __global__ void __launch_bounds__(AT_THREADS, 2) coli_attn_tc_##hd##sfx(        \
	    const float *q, const void *K, const void *V, float *out, int pos0, const int *posp,   \
	    int nh, int nkv, float scale, int msp, int T, signed char *aq, float *ad, int *aqs,    \
	    const float *sinks, int window, const int *rows, const int *tab, int nbs, float *part, \
	    unsigned *count, int tq0, int qt, int ways)                                            \
	{                                                                                          \
		static_assert(sizeof(TcSmem<hd, m>) == COLI_GPU_TC_SMEM(hd,                        \
		                                                        kv_esz<kvmode<m>::KT>(),   \
		                                                        kv_esz<kvmode<m>::VT>()),  \
		              "COLI_GPU_TC_SMEM");                                                 \
		pdl_entry();                                                                       \
		attn_tc<hd, m>(q, K, V, out, pos0, posp, nh, nkv, scale, msp, T, aq, ad, aqs,      \
		               sinks, window, rows, tab, nbs, part, count, tq0, qt, ways);         \
	}
#define ATTN_TC_ALL(hd)                                                                            \
	ATTN_TC(hd, _bf16, 1)                                                                      \
	ATTN_TC(hd, _q8, 2)                                                                        \
	ATTN_TC(hd, _q8_bf16, 3)

#endif
