/*
 * ptx/attn/attention.cu — causal attention over the KV cache on the GPU: q
 * [T][nh][hd] against the layer's cache K, V [ctx] rows of [nkv*hd] (fp32,
 * or bf16 / q8 in the kernels named _bf16, _q8, _q8_bf16: attention.cuh's KV
 * modes, only the loads differ; rows 0..pos0+T-1 valid), out like q. Two kernels:
 * coli_attn_chunks_<hd> for head sizes 32, 64, 128 and 256 (chunks of 32 positions; it can also
 * quantize its output for the o projection), and coli_attention for the
 * others (tiles of 256 positions). Prefill batches of head size 64 and 128
 * take coli_attn_prefill_<hd> (ptx/attn/attn_prefill.cu), which gives each query
 * coli_attn_chunks' bits; what the kernels share is ptx/attn/attention.cuh. A bf16
 * or q8 cache at head sizes 64 and 128 takes coli_attn_tc_<hd>_<type>
 * instead, for decode and prefill alike (ptx/attn/attn_tc.cuh, included at the
 * end: one module), and a prompt's batch coli_attn_tcp_<hd>_<type> with the
 * same bits (ptx/attn/attn_tcp.cuh, included after it).
 *
 * Split and combine: a few queries cannot fill the GPU, so both kernels split
 * a query's positions over CTAs (flash-decoding). Each split writes its
 * online-softmax state (acc, m, l) to the device scratch, and the last CTA to
 * arrive (an integer counter, see last_arrival) combines the splits in
 * ascending order: fixed reduction orders, no float atomics, so the result
 * does not depend on which CTA finished last. Like the rest of the dense part
 * (ptx/dense/dense.cu) these kernels are exempt from the placement invariant: they
 * follow transformers' float32 math within rounding and are deterministic.
 *
 * Launch shapes and the split policies live in ptx/attn/gpu_attn.c; the scratch
 * and the counters are shared with dense.cu's split-K GEMV, which is safe
 * because the device has one stream (a launch starts after the previous one
 * ended).
 */
#include "ptx/attn/attention.cuh"

/* ---- attention over the KV cache, tiled over positions ----
 *
 * One CTA per (split, kv head, query t): it holds the group's q heads
 * (nh / nkv of them, [g][hd] in shared memory) and walks its range of
 * positions in tiles of AT_TILE with the online softmax: per tile, scores
 * (one thread a position), the tile max per head, the running sum and the
 * weighted values rescaled by exp(m_old - m_new). Shared memory does not grow
 * with the context, so any length works, and each K/V row is read once for
 * all heads of its group.
 *
 * Decode (few queries) splits the positions over `splits` CTAs per query
 * (flash-decoding): each writes its (acc[g][hd], m[g], l[g]) to the scratch,
 * and the last CTA to arrive (an integer counter, see last_arrival) combines
 * them in ascending split order — fixed order, no float atomics, so the
 * result does not depend on which CTA finished last. Causal: query t sees
 * positions p <= pos0 + t; a split past that contributes m = -inf, l = 0.
 * posp != NULL: pos0 is read there when the launch runs (graphs, as in
 * coli_qk_rope_store); the grid then covers the longest span the caller
 * allows, and splits past the position only add their empty partials.
 * rows != NULL: each query's own position and sequence slot (attn_row), the
 * queries of several sequences in one launch. A tile's rows: the first
 * rows of the blocks it spans (kv_at once a block, in s_blk), each
 * position's value at its block's row (a score's thread looks its own up).
 */

template <int M>
static __device__ __forceinline__ void
attention_tiles(const float *q, const void *K, const void *V, float *out, int pos0, const int *posp,
                int nh, int nkv, int hd, float scale, int tiles_per_split, float *part,
                unsigned *count, const float *sinks, int window, const int *rows, const int *tab,
                int nbs)
{
	constexpr int KT = kvmode<M>::KT, VT = kvmode<M>::VT;
	__shared__ __align__(16) float sq[AT_MAXQ]; /* [g][hd] */
	__shared__ float ss[AT_MAXG * AT_TILE];     /* [g][p]: scores, then weights */
	__shared__ float s_m[AT_MAXG], s_l[AT_MAXG], s_c[AT_MAXG];
	/* the first rows of the blocks a tile's positions fall in (a window's
	 * tiles start anywhere in a block: one more) */
	__shared__ size_t s_blk[AT_TILE / KV_BLOCK + 1];
	const int split = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z, splits = gridDim.x;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int group = nh / nkv, kvd = nkv * hd, nq = group * hd;
	/* typed rows: krow / vrow bytes a position, this head's values at Kh, Vh
	 * in a row, its q8 scale soff bytes into the row */
	const size_t krow = kv_row_size(KT, kvd, nkv), vrow = kv_row_size(VT, kvd, nkv);
	int slot;
	const int n = attn_row(pos0, posp, rows, t, &slot), span = tiles_per_split * AT_TILE;
	/* a sliding window's first position k0: the splits before it walk nothing
	 * (their partials add +0) */
	const int k0 = window > 0 && n > window ? n - window : 0;
	const int p0 = max(split * span, k0), p1 = min(n, split * span + span);
	const float *qg = q + ((size_t)t * nh + (size_t)kvh * group) * hd;
	const float *sink = sinks ? sinks + (size_t)kvh * group : NULL;
	const int soff = ((kvd + 3) & ~3) + 4 * kvh;
	const char *Kh = (const char *)K + (size_t)kvh * hd * kv_esz<KT>();
	const char *Vh = (const char *)V + (size_t)kvh * hd * kv_esz<VT>();
	const bool same_i = (AT_THREADS % hd) == 0; /* a thread's items share one dim */
	float acc[AT_ITEMS];

	for (int i = tid; i < nq; i += AT_THREADS)
		sq[i] = qg[i];
	attn_start(s_m, s_l, acc, group);
	__syncthreads(); /* sq, s_m, s_l visible to all */

	/* position p's row, p in the tile (s_blk written; the tile's own for
	 * p < p1, any block of it past that, whose weight is 0) */
#define TILE_ROW(p)                                                                                \
	(s_blk[min((p) >> KV_BLOCK_SHIFT, (p1 - 1) >> KV_BLOCK_SHIFT) -                            \
	       (tile >> KV_BLOCK_SHIFT)] +                                                         \
	 ((p) & (KV_BLOCK - 1)))
	for (int tile = p0; tile < p1; tile += AT_TILE) {
		const int np = min(AT_TILE, p1 - tile);

		/* scores: a short tile (decode, few positions) slices the group's heads
		 * over hs thread groups so that more threads share the work: thread
		 * tid owns position tile + tid % per for heads [h_lo, h_hi); a full
		 * tile is one slice (hs 1). A head's dot product takes the same
		 * steps whichever thread computes it. */
		int hs = 1;

		while (hs * 2 <= group && group % (hs * 2) == 0 && np * hs * 2 <= AT_THREADS)
			hs *= 2;
		const int per = AT_THREADS / hs, pp = tid % per;
		const int h_lo = tid / per * (group / hs), h_hi = h_lo + group / hs;

		for (int i = tid; i < group * AT_TILE; i += AT_THREADS)
			if (i % AT_TILE >= np)
				ss[i] = -INFINITY; /* past the tile's positions, every head */
		/* (read after the barrier below; the last tile's readers passed the
		 * one at its end) */
		if (tid <= ((tile + np - 1) >> KV_BLOCK_SHIFT) - (tile >> KV_BLOCK_SHIFT))
			s_blk[tid] = kv_at(tab, nbs, slot,
			                   ((tile >> KV_BLOCK_SHIFT) + tid) << KV_BLOCK_SHIFT);
		for (int g0 = h_lo; g0 < h_hi; g0 += 8) {
			float d[8];

#pragma unroll
			for (int gg = 0; gg < 8; gg++)
				d[gg] = 0.0f;
			if (pp < np) {
				const size_t kr = kv_at(tab, nbs, slot, tile + pp);
				const char *k = Kh + kr * krow;
				const float ks = kv_scale<KT>((const char *)K + kr * krow, soff);

				/* 8 loads in flight, then their FMAs: latency, not bandwidth,
				 * bounds a decode tile */
				for (int i0 = 0; i0 < hd; i0 += 32) {
					float4 kv[8];

#pragma unroll
					for (int u = 0; u < 8; u++)
						if (i0 + 4 * u < hd)
							kv[u] = kv_ld4<KT>(k, i0 / 4 + u, ks);
#pragma unroll
					for (int u = 0; u < 8; u++) {
						const int i = i0 + 4 * u;

						if (i >= hd)
							break;
#pragma unroll
						for (int gg = 0; gg < 8; gg++) {
							if (g0 + gg < h_hi) {
								const float4 qq =
								    *(const float4
								          *)&sq[(g0 + gg) * hd + i];

								d[gg] =
								    __fmaf_rn(qq.x, kv[u].x, d[gg]);
								d[gg] =
								    __fmaf_rn(qq.y, kv[u].y, d[gg]);
								d[gg] =
								    __fmaf_rn(qq.z, kv[u].z, d[gg]);
								d[gg] =
								    __fmaf_rn(qq.w, kv[u].w, d[gg]);
							}
						}
					}
				}
			}
#pragma unroll
			for (int gg = 0; gg < 8; gg++)
				if (g0 + gg < h_hi && pp < np)
					ss[(g0 + gg) * AT_TILE + pp] = d[gg] * scale;
		}
		__syncthreads(); /* scores complete before the per-head max */

		/* online softmax: warp w owns heads w, w + 8 */
		for (int g = warp; g < group; g += AT_THREADS / 32) {
			float *sg = ss + g * AT_TILE;
			float m = -INFINITY, s = 0.0f, mo, mn;

			for (int j = lane; j < AT_TILE; j += 32)
				m = fmaxf(m, sg[j]);
			m = warp_max(m);
			mo = s_m[g];
			mn = fmaxf(mo, m);
			for (int j = lane; j < AT_TILE; j += 32) {
				float e = expf(sg[j] - mn); /* -inf (past np) -> 0 */

				sg[j] = e;
				s += e;
			}
			for (int off = 16; off; off >>= 1)
				s += __shfl_xor_sync(0xffffffffu, s, off);
			__syncwarp(); /* every lane's read of s_m[g] before lane 0 rewrites it */
			if (lane == 0) {
				float c = expf(mo - mn); /* first tile: exp(-inf) = 0 */

				s_c[g] = c;
				s_l[g] = s_l[g] * c + s;
				s_m[g] = mn;
			}
		}
		__syncthreads(); /* weights and corrections visible before P.V */

		/* acc[g][i] = acc * c[g] + sum_p w[g][p] * V[p][i]; item = tid + k * AT_THREADS */
		if (same_i) {
			const int i = tid % hd;

#pragma unroll
			for (int k = 0; k < AT_ITEMS; k++) {
				const int it = tid + k * AT_THREADS;

				if (it < nq)
					acc[k] *= s_c[it / hd];
			}
			/* AT_PV loads in flight per thread; weights past np are 0 */
			for (int j0 = 0; j0 < np; j0 += AT_PV) {
				float v[AT_PV];

#pragma unroll
				for (int u = 0; u < AT_PV; u++) {
					const size_t p = TILE_ROW(tile + j0 + u);

					v[u] =
					    j0 + u < np
					        ? kv_ld1<VT>(Vh + p * vrow, i,
					                     kv_scale<VT>(
					                         (const char *)V + p * vrow, soff))
					        : 0.0f;
				}
#pragma unroll
				for (int k = 0; k < AT_ITEMS; k++) {
					const int it = tid + k * AT_THREADS;
					const float *w = ss + (it / hd) * AT_TILE + j0;

					if (it < nq) {
						float a = acc[k];

#pragma unroll
						for (int u = 0; u < AT_PV; u++)
							a = __fmaf_rn(w[u], v[u], a);
						acc[k] = a;
					}
				}
			}
		} else {
#pragma unroll
			for (int k = 0; k < AT_ITEMS; k++) {
				const int it = tid + k * AT_THREADS, g = it / hd, i = it % hd;
				float a;

				if (it >= nq)
					continue;
				a = acc[k] * s_c[g];
#pragma unroll 8
				for (int j = 0; j < np; j++) {
					const size_t p = TILE_ROW(tile + j);

					a = __fmaf_rn(
					    ss[g * AT_TILE + j],
					    kv_ld1<VT>(
					        Vh + p * vrow, i,
					        kv_scale<VT>((const char *)V + p * vrow, soff)),
					    a);
				}
				acc[k] = a;
			}
		}
		__syncthreads(); /* ss and s_blk are rewritten by the next tile's */
	}
#undef TILE_ROW

	if (splits == 1) {
		attn_put_out({out + ((size_t)t * nh + (size_t)kvh * group) * hd, NULL, NULL, NULL},
		             acc, s_m, s_l, nq, hd, sink);
		return;
	}
	{
		const size_t stride = (size_t)nq + 2 * group;
		float *all = part + ((size_t)t * nkv + kvh) * splits * stride;

		attn_put_partial(all + split * stride, acc, s_m, s_l, nq, group);
		if (!last_arrival(&count[(size_t)t * nkv + kvh], splits))
			return;
		attn_combine({out + ((size_t)t * nh + (size_t)kvh * group) * hd, NULL, NULL, NULL},
		             all, 0, min(splits, (n + span - 1) / span), nq, group, hd, sink);
	}
}

/* coli_attention (f32) and its typed forms, a KV mode each (attention.cuh) */
#define ATTN_TILES(name, m)                                                                        \
	extern "C" __global__ void __launch_bounds__(AT_THREADS, 1) name(                          \
	    const float *q, const void *K, const void *V, float *out, int pos0, const int *posp,   \
	    int nh, int nkv, int hd, float scale, int tps, float *part, unsigned *count,           \
	    const float *sinks, int window, const int *rows, const int *tab, int nbs)              \
	{                                                                                          \
		pdl_entry();                                                                       \
		attention_tiles<m>(q, K, V, out, pos0, posp, nh, nkv, hd, scale, tps, part, count, \
		                   sinks, window, rows, tab, nbs);                                 \
	}
ATTN_TILES(coli_attention, 0)
ATTN_TILES(coli_attention_bf16, 1)
ATTN_TILES(coli_attention_q8, 2)
ATTN_TILES(coli_attention_q8_bf16, 3)

/* ---- attention in chunks of a warp's width ----
 *
 * coli_attention above walks tiles of 256 positions with one thread a
 * position, so a short context is a long chain of dependent loads in a few
 * CTAs. This kernel splits the positions into chunks of AD_CHUNK = 32 and
 * gives each CTA one chunk or a few: the CTA's threads copy a chunk's K and
 * V rows into shared memory (cp.async, up to three chunks ahead of the one in
 * use: kv_stage), then
 *   scores   AD_SL = 8 threads a position, each a slice of hd / 8 dims of
 *            every head the CTA holds, folded over the 8 with shfl_xor;
 *   softmax  warp w takes heads w, w + 8, lane = position;
 *   P.V      thread tid owns dim tid % hd of its heads (256 % hd == 0),
 * with the same online-softmax state as coli_attention. Partials are combined
 * as there (last CTA, ascending split order), over the splits that hold
 * positions only: the grid covers the launch's longest context (a graph's:
 * the bucket it replays in) and the shorter queries' later splits are empty.
 * The split of a query's positions depends on its own position and the
 * launcher's max_splits only (COLI_GPU_ATTN_CPS, ptx/kernels_abi.h), so a
 * query gets the same bits in a prefill batch (queries t0 + blockIdx.z,
 * launched in batches that fit the scratch) as in a decode step, and a short
 * context in a long cache is spread over the SMs as a long one is. A CTA holds all heads of its kv
 * head's group or a slice of them (blockIdx.y, hsplit: the launcher's choice, same bits either
 * way). Not the same bits as coli_attention (the dense part is exempt from the placement
 * invariant). hd % 32 == 0 and 256 % hd == 0 (the launcher checks; other shapes use
 * coli_attention). */

/* A chunk's rows in shared memory, as the cache stores them (kv_stage):
 * K [AD_CHUNK][hd] then V [AD_CHUNK][hd] of the CTA's kv head, then with a
 * q8 type the rows' scales, K's [AD_CHUNK] and V's [AD_CHUNK]. Stage sizes
 * and counts: COLI_GPU_AD_TILE / COLI_GPU_AD_STAGES (ptx/kernels_abi.h, the
 * launcher's dynamic shared memory). */
template <int HD, int M> struct AdTile {
	static constexpr int KT = kvmode<M>::KT, VT = kvmode<M>::VT;
	static constexpr int KB = HD * kv_esz<KT>(), VB = HD * kv_esz<VT>(); /* bytes a row */
	static constexpr int V0 = AD_CHUNK * KB, S0 = V0 + AD_CHUNK * VB;
	static constexpr int BYTES = COLI_GPU_AD_TILE(HD, kv_esz<KT>(), kv_esz<VT>());
	static constexpr int STAGES = COLI_GPU_AD_STAGES(BYTES);
};

/* NF4 = hd / 32: the float4s of K a thread reads a position (one kernel per
 * head size). The chunks' rows come through shared memory, STAGES - 1
 * chunks ahead (cp.async: the loads in flight hold no registers, and a
 * stage's rows are at constant offsets). */
template <int NF4, int M>
static __device__ __forceinline__ void
attn_chunks(const float *q, const void *K, const void *V, float *out, int pos0, const int *posp,
            int nh, int nkv, int hd, float scale, int max_splits, float *part, unsigned *count,
            int t0, int hsplit, signed char *aq, float *ad, int *aqs, const float *sinks,
            int window, const int *rows, const int *tab, int nbs)
{
	constexpr int HD = NF4 * 32; /* the head size, known: no divisions by a runtime hd */
	/* q in shared memory, [g][slice][SQS]: a slice's SD floats padded to an
	 * odd number of 4-bank groups, so the 8 slice threads of a position read
	 * their float4s from 8 different groups (unpadded, 16-float slices put 4
	 * threads on each group) */
	constexpr int SD = HD / AD_SL, SQS = SD + ((SD / 4) % 2 ? 0 : 4), SQH = AD_SL * SQS;
	typedef AdTile<HD, M> Tl;
	extern __shared__ __align__(16) char ad_tiles[]; /* [STAGES][Tl::BYTES] */
	__shared__ __align__(16) float sq[AT_MAXQ / HD * SQH]; /* [g][AD_SL][SQS] */
	/* chunks a step: two where four stages hold them and the two ahead */
	constexpr int CW = Tl::STAGES >= 4 ? 2 : 1;
	__shared__ __align__(16) float ss[CW * AT_MAXG * AD_CHUNK]; /* [c][g][p]: scores, weights */
	__shared__ float s_m[AT_MAXG], s_l[AT_MAXG], s_c[CW * AT_MAXG];
	/* blockIdx.y: kv head kvh, and slice hs of its group's heads (hsplit
	 * slices of `group` heads: each head's steps are the same in any slice) */
	const int split = blockIdx.x, kvh = blockIdx.y / hsplit, tb = blockIdx.z, t = t0 + tb;
	const int splits = gridDim.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int group = nh / nkv / hsplit, kvd = nkv * HD, nq = group * HD;
	const size_t head0 = (size_t)t * nh + (size_t)blockIdx.y * group; /* this CTA's first */
	const size_t pair = (size_t)tb * gridDim.y + blockIdx.y;          /* partials and counter */
	const struct attn_out ao = {out + head0 * HD, aq ? aq + head0 * HD : NULL,
	                            aq ? ad + head0 * HD / 32 : NULL,
	                            aq ? aqs + head0 * HD / 32 : NULL};
	/* typed rows (attention.cuh): krow / vrow bytes a position in the cache,
	 * the q8 scale soff into it */
	constexpr int KT = Tl::KT, VT = Tl::VT, NST = Tl::STAGES;
	const size_t krow = kv_row_size(KT, kvd, nkv), vrow = kv_row_size(VT, kvd, nkv);
	int slot;
	const int n = attn_row(pos0, posp, rows, t, &slot),
	          span = COLI_GPU_ATTN_CPS(n, max_splits) * AD_CHUNK;
	/* a sliding window (gpt-oss): positions from k0 on. The chunks stay
	 * aligned to AD_CHUNK (the prefill kernel's, for its bits): the window's
	 * first split starts at k0's chunk, its positions before k0 score -inf */
	const int k0 = window > 0 && n > window ? n - window : 0, first = k0 / span;
	const int p0 = max(split * span, k0 / AD_CHUNK * AD_CHUNK),
	          p1 = min(n, split * span + span);
	const float *sink = sinks ? sinks + (size_t)blockIdx.y * group : NULL;
	/* scores: thread (pp, sl) holds slice sl of position pp's key; P.V:
	 * dim di of its heads' values */
	const int pp = tid / AD_SL, sl = tid % AD_SL, di = tid % HD;
	const int soff = ((kvd + 3) & ~3) + 4 * kvh;
	const int nch = (p1 - p0 + AD_CHUNK - 1) / AD_CHUNK; /* this CTA's chunks */
	float acc[AT_ITEMS];

	/* the splits holding positions: only they count in, and one alone writes
	 * the output itself (the combine of one partial, M = m and f = 1, gives
	 * the same bits) */
	const int used = min(splits, (n + span - 1) / span);

	if (p0 >= n || split < first) /* an empty split: a longer context, or before the window */
		return;
	/* chunk i's rows into stage i % NST (its first row: one table lookup) */
#define AD_STAGE(i)                                                                                \
	kv_stage<HD, M, Tl::KB, Tl::VB, Tl::V0, Tl::S0>(                                           \
	    ad_tiles + ((i) % NST) * Tl::BYTES, K, V, kv_at(tab, nbs, slot, p0 + (i) * AD_CHUNK),  \
	    min(AD_CHUNK, p1 - p0 - (i) * AD_CHUNK), kvh, krow, vrow, soff)
	/* the first chunks' copies go before q's: NST - CW of them, a commit
	 * group a chunk (empty past nch) */
	for (int i = 0; i < NST - CW; i++) {
		if (i < nch)
			AD_STAGE(i);
		cp_commit();
	}
	{
		const float4 *qg = (const float4 *)(q + head0 * HD);

		for (int i = tid; i < nq / 4; i += AT_THREADS) {
			const int g = i / (HD / 4), f = i % (HD / 4);

			*(float4 *)&sq[g * SQH + f / (SD / 4) * SQS + f % (SD / 4) * 4] = qg[i];
		}
	}
	attn_start(s_m, s_l, acc, group);

	/* a step: chunks i .. i + nc - 1 (nc <= CW), each chunk's steps as if
	 * alone, in order (the running m, l and acc pass from one to the next) */
	for (int i = 0; i < nch; i += CW) {
		const int nc = min(CW, nch - i);

		if (NST == 1) { /* one stage: it is free once the last chunk's P.V is done */
			__syncthreads();
			AD_STAGE(i);
			cp_commit();
			cp_wait<0>();
		} else {
			cp_wait<NST - 2 * CW>(); /* chunks i .. i + CW - 1 landed (this thread's) */
		}
		__syncthreads(); /* the step's chunks visible; sq, s_m, s_l; the last step's
		                  * ss and stages consumed */
		if (NST > 1) { /* the chunks NST - CW ahead, into the stages the last step used */
			for (int j = 0; j < CW; j++) {
				if (i + NST - CW + j < nch)
					AD_STAGE(i + NST - CW + j);
				cp_commit();
			}
		}

		/* scores: slice sl of position pp against every head, folded over the
		 * 8; the step's chunks side by side (one q load for both) */
		{
			float4 kv[CW][NF4];
			float ks[CW];
			const char *kr[CW];

#pragma unroll
			for (int c = 0; c < CW; c++) {
				const char *st = ad_tiles + ((i + c) % NST) * Tl::BYTES;

				ks[c] = KT == 2 && c < nc ? ((const float *)(st + Tl::S0))[pp] : 1.0f;
				kr[c] = st + pp * Tl::KB + sl * (Tl::KB / AD_SL);
			}
#pragma unroll
			for (int c = 0; c < CW; c++)
#pragma unroll
				for (int u = 0; u < NF4; u++)
					kv[c][u] = c < nc ? kv_ld4<KT, true>(kr[c], u, ks[c]) : kv[0][u];
#pragma unroll(3 - CW) /* two chains a thread either way */
			for (int g = 0; g < group; g++) {
				const float4 *qs = (const float4 *)(sq + g * SQH + sl * SQS);
				float d[CW];

#pragma unroll
				for (int c = 0; c < CW; c++)
					d[c] = 0.0f;
#pragma unroll
				for (int u = 0; u < NF4; u++) {
					const float4 qq = qs[u];

#pragma unroll
					for (int c = 0; c < CW; c++) {
						d[c] = __fmaf_rn(qq.x, kv[c][u].x, d[c]);
						d[c] = __fmaf_rn(qq.y, kv[c][u].y, d[c]);
						d[c] = __fmaf_rn(qq.z, kv[c][u].z, d[c]);
						d[c] = __fmaf_rn(qq.w, kv[c][u].w, d[c]);
					}
				}
#pragma unroll
				for (int c = 0; c < CW; c++) {
					const int c0 = p0 + (i + c) * AD_CHUNK, np = min(AD_CHUNK, p1 - c0);

					d[c] = __fadd_rn(d[c], __shfl_xor_sync(0xffffffffu, d[c], 4));
					d[c] = __fadd_rn(d[c], __shfl_xor_sync(0xffffffffu, d[c], 2));
					d[c] = __fadd_rn(d[c], __shfl_xor_sync(0xffffffffu, d[c], 1));
					if (c < nc && sl == (g & (AD_SL - 1)))
						ss[(c * AT_MAXG + g) * AD_CHUNK + pp] =
						    pp < np && c0 + pp >= k0 ? d[c] * scale : -INFINITY;
				}
			}
		}
		__syncthreads();

		/* online softmax over each chunk in turn: warp w owns heads w, w + 8 */
		for (int g = warp; g < group; g += AT_THREADS / 32) {
			const float mo = s_m[g];
			float mn = mo, cf[CW], sum[CW];

#pragma unroll
			for (int c = 0; c < CW; c++) {
				float *x = &ss[(c * AT_MAXG + g) * AD_CHUNK + lane];
				float mc, e, s;

				if (c >= nc)
					break;
				mc = fmaxf(mn, warp_max(*x));
				e = expf(*x - mc); /* -inf (past np) -> 0 */
				*x = e;
				s = e;
				for (int off = 16; off; off >>= 1)
					s += __shfl_xor_sync(0xffffffffu, s, off);
				cf[c] = expf(mn - mc); /* first chunk: exp(-inf) = 0 */
				sum[c] = s;
				mn = mc;
			}
			__syncwarp(); /* every lane's read of s_m[g] before lane 0 rewrites it */
			if (lane == 0) {
				float l = s_l[g];

#pragma unroll
				for (int c = 0; c < CW; c++) {
					if (c >= nc)
						break;
					s_c[c * AT_MAXG + g] = cf[c];
					l = l * cf[c] + sum[c];
				}
				s_l[g] = l;
				s_m[g] = mn;
			}
		}
		__syncthreads();

		/* acc[g][di] = acc * c[g] + sum_j w[g][j] * V[j][di] (rows past np
		 * are +0), chunk by chunk: the chunk's values of dim di read once,
		 * then each item's chain in j order */
#pragma unroll
		for (int c = 0; c < CW; c++) {
			const char *st = ad_tiles + ((i + c) % NST) * Tl::BYTES;
			const char *vr = st + Tl::V0;
			const float *vs = (const float *)(st + Tl::S0) + AD_CHUNK;
			float v[AD_CHUNK];

			if (c >= nc)
				break;
#pragma unroll
			for (int j = 0; j < AD_CHUNK; j++)
				v[j] = kv_ld1<VT, true>(vr + j * Tl::VB, di, VT == 2 ? vs[j] : 1.0f);
#pragma unroll
			for (int k = 0; k < AT_ITEMS; k++) {
				const int it = tid + k * AT_THREADS, g = it / HD;

				if (it < nq) {
					const float4 *w =
					    (const float4 *)(ss + (c * AT_MAXG + g) * AD_CHUNK);
					float a = acc[k] * s_c[c * AT_MAXG + g];

#pragma unroll
					for (int j = 0; j < AD_CHUNK; j += 4) {
						const float4 w4 = w[j / 4]; /* four weights a load */

						a = __fmaf_rn(w4.x, v[j], a);
						a = __fmaf_rn(w4.y, v[j + 1], a);
						a = __fmaf_rn(w4.z, v[j + 2], a);
						a = __fmaf_rn(w4.w, v[j + 3], a);
					}
					acc[k] = a;
				}
			}
		}
	}
#undef AD_STAGE

	if (used - first == 1) {
		attn_put_out(ao, acc, s_m, s_l, nq, HD, sink);
		return;
	}
	{
		const size_t stride = (size_t)nq + 2 * group;
		float *all = part + pair * splits * stride;

		attn_put_partial(all + split * stride, acc, s_m, s_l, nq, group);
		if (!last_arrival(&count[pair], used - first))
			return;
		attn_combine(ao, all, first, used, nq, group, HD, sink);
	}
}

/* coli_attn_chunks_<hd> (f32) and coli_attn_chunks_<hd>_<type> (typed caches) */
#define ATTN_CHUNKS(hd, sfx, m)                                                                    \
	extern "C" __global__ void __launch_bounds__(AT_THREADS, 2) coli_attn_chunks_##hd##sfx(    \
	    const float *q, const void *K, const void *V, float *out, int pos0, const int *posp,   \
	    int nh, int nkv, int hdim, float scale, int msp, float *part, unsigned *count, int t0, \
	    int hsplit, signed char *aq, float *ad, int *aqs, const float *sinks, int window,      \
	    const int *rows, const int *tab, int nbs)                                              \
	{                                                                                          \
		pdl_entry();                                                                       \
		attn_chunks<hd / 32, m>(q, K, V, out, pos0, posp, nh, nkv, hdim, scale, msp, part, \
		                        count, t0, hsplit, aq, ad, aqs, sinks, window, rows, tab,  \
		                        nbs);                                                      \
	}
#define ATTN_CHUNKS_ALL(hd)                                                                        \
	ATTN_CHUNKS(hd, , 0)                                                                       \
	ATTN_CHUNKS(hd, _bf16, 1)                                                                  \
	ATTN_CHUNKS(hd, _q8, 2)                                                                    \
	ATTN_CHUNKS(hd, _q8_bf16, 3)
ATTN_CHUNKS_ALL(32)
ATTN_CHUNKS_ALL(64)
ATTN_CHUNKS_ALL(128)
ATTN_CHUNKS_ALL(256)

#include "ptx/attn/attn_tc.cuh"
ATTN_TC_ALL(64)
ATTN_TC_ALL(128)

#include "ptx/attn/attn_tcp.cuh"
ATTN_TCP_ALL(64)
ATTN_TCP_ALL(128)
