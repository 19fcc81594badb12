/*
 * ptx/attention.cu — causal attention over the KV cache on the GPU, decode
 * and prefill alike: q [T][nh][hd] against the layer's cache K, V
 * [ctx][nkv*hd] (fp32, rows 0..pos0+T-1 valid), out like q. Two kernels:
 * coli_attn_chunks_<hd> for head sizes 32, 64, 128 and 256 (chunks of 32
 * positions; it can also quantize its output for the o projection), and
 * coli_attention for the others (tiles of 256 positions).
 *
 * Split and combine: a few queries cannot fill the GPU, so both kernels split
 * a query's positions over CTAs (flash-decoding). Each split writes its
 * online-softmax state (acc, m, l) to the device scratch, and the last CTA to
 * arrive (an integer counter, see last_arrival) combines the splits in
 * ascending order: fixed reduction orders, no float atomics, so the result
 * does not depend on which CTA finished last. Like the rest of the dense part
 * (ptx/dense.cu) these kernels are exempt from the placement invariant: they
 * follow transformers' float32 math within rounding and are deterministic.
 *
 * Launch shapes and the split policies live in ptx/gpu_dense.c; the scratch
 * and the counters are shared with dense.cu's split-K GEMV, which is safe
 * because the device has one stream (a launch starts after the previous one
 * ended).
 */
#include "ptx/act_quant.cuh"
#include "ptx/cp_async.cuh"
#include "ptx/last_arrival.cuh"
#include "ptx/pdl.cuh"

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
 */
#define AT_THREADS 256
#define AT_TILE    256  /* positions per tile: one thread each for the scores */
#define AT_MAXG    16   /* q heads per kv head */
#define AT_MAXQ    2048 /* group * hd, floats of q in shared memory */
#define AT_ITEMS   (AT_MAXQ / AT_THREADS)
#define AT_PV      16 /* value rows loaded ahead in the weighted sum */

/* Both attention kernels end alike. A CTA's items are it = tid + k *
 * AT_THREADS (k < AT_ITEMS) of its heads' [group][hd] outputs. */

/* The online softmax's state before the first position: m = -inf, l = 0,
 * acc = 0. */
static __device__ __forceinline__ void attn_start(float *s_m, float *s_l, float *acc, int group)
{
	if ((int)threadIdx.x < group) {
		s_m[threadIdx.x] = -INFINITY;
		s_l[threadIdx.x] = 0.0f;
	}
#pragma unroll
	for (int k = 0; k < AT_ITEMS; k++)
		acc[k] = 0.0f;
}

/* Where the outputs go: o [nq] floats, and with q != NULL the same values
 * quantized per 32-block (coli_act_quantize's steps) into q [nq], d and qsum
 * [nq / 32] — the o projection's input, without a launch of its own. */
struct attn_out {
	float *o;
	signed char *q;
	float *d;
	int *qsum;
};

static __device__ __forceinline__ float warp_max(float v)
{
	for (int off = 16; off; off >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
	return v;
}

/* Outputs it .. it + VD - 1 of a lane, values v[VD]: plain and, with a.q,
 * quantized per 32-block, a block held by 32 / VD lanes (it = their base +
 * lane * VD), so its scale and sum are reductions over those lanes (a max
 * and an integer sum: their order is free). */
template <int VD>
static __device__ __forceinline__ void attn_store_v(const struct attn_out &a, size_t it, int lane,
                                                    const float *v)
{
#pragma unroll
	for (int dd = 0; dd < VD; dd++)
		a.o[it + dd] = v[dd];
	if (a.q) {
		float amax = 0.0f, d;
		int s = 0, qv[VD];

#pragma unroll
		for (int dd = 0; dd < VD; dd++)
			amax = act_abs(amax, v[dd]);
		for (int off = 32 / VD / 2; off; off >>= 1)
			amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
		const float id = act_inv(amax, &d);
#pragma unroll
		for (int dd = 0; dd < VD; dd++) {
			qv[dd] = act_q(v[dd], id);
			s += qv[dd];
			a.q[it + dd] = (signed char)qv[dd];
		}
		for (int off = 32 / VD / 2; off; off >>= 1)
			s += __shfl_xor_sync(0xffffffffu, s, off);
		if ((lane & (32 / VD - 1)) == 0) {
			a.d[it / 32] = d;
			a.qsum[it / 32] = s;
		}
	}
}

/* Element it of the outputs, value v; the 32 lanes of a warp hold one
 * aligned block (it = warp base + lane). */
static __device__ __forceinline__ void attn_store(const struct attn_out &a, int it, float v)
{
	attn_store_v<1>(a, (size_t)it, it & 31, &v);
}

/* One split alone: the output, acc / l per head. */
static __device__ __forceinline__ void attn_put_out(const struct attn_out &a, const float *acc,
                                                    const float *s_l, int nq, int hd)
{
#pragma unroll
	for (int k = 0; k < AT_ITEMS; k++) {
		const int it = threadIdx.x + k * AT_THREADS;

		if (it < nq) /* nq % 32 == 0: whole warps */
			attn_store(a, it, acc[k] / s_l[it / hd]);
	}
}

/* A split's partial: acc [nq], then m [group], l [group]. */
static __device__ __forceinline__ void attn_put_partial(float *mine, const float *acc,
                                                        const float *s_m, const float *s_l, int nq,
                                                        int group)
{
#pragma unroll
	for (int k = 0; k < AT_ITEMS; k++) {
		const int it = threadIdx.x + k * AT_THREADS;

		if (it < nq)
			mine[it] = acc[k];
	}
	if ((int)threadIdx.x < group) {
		mine[nq + threadIdx.x] = s_m[threadIdx.x];
		mine[nq + group + threadIdx.x] = s_l[threadIdx.x];
	}
}

/* The last CTA to arrive: the `used` splits holding positions, combined in
 * ascending order (a split past the position would add exactly +0: m = -inf,
 * l = 0, acc = 0). */
static __device__ __forceinline__ void attn_combine(const struct attn_out &a, const float *all,
                                                    int used, int nq, int group, int hd)
{
	const size_t stride = (size_t)nq + 2 * group;

	for (int it = threadIdx.x; it < nq; it += AT_THREADS) {
		const int g = it / hd;
		float M = -INFINITY, O = 0.0f, L = 0.0f;

		for (int c = 0; c < used; c++)
			M = fmaxf(M, __ldcg(all + c * stride + nq + g));
#pragma unroll 8
		for (int c = 0; c < used; c++) {
			const float *pc = all + c * stride;
			const float f = expf(__ldcg(pc + nq + g) - M);

			O += __ldcg(pc + it) * f;
			L += __ldcg(pc + nq + group + g) * f;
		}
		attn_store(a, it, O / L);
	}
}

extern "C" __global__ void __launch_bounds__(AT_THREADS, 1)
    coli_attention(const float *q, const float *K, const float *V, float *out, int pos0,
                   const int *posp, int nh, int nkv, int hd, float scale, int tiles_per_split,
                   float *part, unsigned *count)
{
	pdl_entry();
	__shared__ __align__(16) float sq[AT_MAXQ]; /* [g][hd] */
	__shared__ float ss[AT_MAXG * AT_TILE];     /* [g][p]: scores, then weights */
	__shared__ float s_m[AT_MAXG], s_l[AT_MAXG], s_c[AT_MAXG];
	const int split = blockIdx.x, kvh = blockIdx.y, t = blockIdx.z, splits = gridDim.x;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int group = nh / nkv, kvd = nkv * hd, nq = group * hd;
	const int n = (posp ? *posp : pos0) + t + 1, span = tiles_per_split * AT_TILE;
	const int p0 = split * span, p1 = min(n, p0 + span);
	const float *qg = q + ((size_t)t * nh + (size_t)kvh * group) * hd;
	const float *Kh = K + (size_t)kvh * hd, *Vh = V + (size_t)kvh * hd;
	const bool same_i = (AT_THREADS % hd) == 0; /* a thread's items share one dim */
	float acc[AT_ITEMS];

	for (int i = tid; i < nq; i += AT_THREADS)
		sq[i] = qg[i];
	attn_start(s_m, s_l, acc, group);
	__syncthreads(); /* sq, s_m, s_l visible to all */

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
		for (int g0 = h_lo; g0 < h_hi; g0 += 8) {
			float d[8];

#pragma unroll
			for (int gg = 0; gg < 8; gg++)
				d[gg] = 0.0f;
			if (pp < np) {
				const float *k = Kh + (size_t)(tile + pp) * kvd;

				/* 8 loads in flight, then their FMAs: latency, not bandwidth,
				 * bounds a decode tile */
				for (int i0 = 0; i0 < hd; i0 += 32) {
					float4 kv[8];

#pragma unroll
					for (int u = 0; u < 8; u++)
						if (i0 + 4 * u < hd)
							kv[u] =
							    __ldg((const float4 *)(k + i0 + 4 * u));
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
			const float *vp = Vh + (size_t)tile * kvd + i;

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
				for (int u = 0; u < AT_PV; u++)
					v[u] =
					    j0 + u < np ? __ldg(vp + (size_t)(j0 + u) * kvd) : 0.0f;
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
				for (int j = 0; j < np; j++)
					a = __fmaf_rn(ss[g * AT_TILE + j],
					              __ldg(Vh + (size_t)(tile + j) * kvd + i), a);
				acc[k] = a;
			}
		}
		__syncthreads(); /* ss is rewritten by the next tile's scores */
	}

	if (splits == 1) {
		attn_put_out({out + ((size_t)t * nh + (size_t)kvh * group) * hd, NULL, NULL, NULL},
		             acc, s_l, nq, hd);
		return;
	}
	{
		const size_t stride = (size_t)nq + 2 * group;
		float *all = part + ((size_t)t * nkv + kvh) * splits * stride;

		attn_put_partial(all + split * stride, acc, s_m, s_l, nq, group);
		if (!last_arrival(&count[(size_t)t * nkv + kvh], splits))
			return;
		attn_combine({out + ((size_t)t * nh + (size_t)kvh * group) * hd, NULL, NULL, NULL},
		             all, min(splits, (n + span - 1) / span), nq, group, hd);
	}
}

/* ---- attention in chunks of a warp's width ----
 *
 * coli_attention above walks tiles of 256 positions with one thread a
 * position, so a short context is a long chain of dependent loads in a few
 * CTAs. This kernel splits the positions into chunks of AD_CHUNK = 32 and
 * gives each CTA one chunk or a few: every thread issues its K slice and its
 * 32 V values of a chunk at once (one round trip to memory a chunk), then
 *   scores   AD_SL = 8 threads a position, each a slice of hd / 8 dims of
 *            every head the CTA holds, folded over the 8 with shfl_xor;
 *   softmax  warp w takes heads w, w + 8, lane = position;
 *   P.V      thread tid owns dim tid % hd of its heads (256 % hd == 0),
 * with the same online-softmax state as coli_attention. Partials are combined
 * as there (last CTA, ascending split order), over the splits that hold
 * positions only: with posp the grid covers the longest context and most
 * splits are empty. The split of the positions is the launcher's and depends
 * on the span and nkv only, so a query gets the same bits in a prefill batch
 * (queries t0 + blockIdx.z, launched in batches that fit the scratch) as in a
 * decode step. A CTA holds all heads of its kv head's group or a slice of
 * them (blockIdx.y, hsplit: the launcher's choice, same bits either way).
 * Not the same bits as coli_attention (the dense part is exempt
 * from the placement invariant). hd % 32 == 0 and 256 % hd == 0 (the launcher
 * checks; other shapes use coli_attention). */
#define AD_CHUNK 32
#define AD_SL    8

/* NF4 = hd / 32: the float4s of K a thread loads (one kernel per head size) */
template <int NF4>
static __device__ __forceinline__ void
attn_chunks(const float *q, const float *K, const float *V, float *out, int pos0, const int *posp,
            int nh, int nkv, int hd, float scale, int chunks_per_split, float *part,
            unsigned *count, int t0, int hsplit, signed char *aq, float *ad, int *aqs)
{
	__shared__ __align__(16) float sq[AT_MAXQ];            /* [g][hd] */
	__shared__ __align__(16) float ss[AT_MAXG * AD_CHUNK]; /* [g][p]: scores, weights */
	__shared__ float s_m[AT_MAXG], s_l[AT_MAXG], s_c[AT_MAXG];
	/* blockIdx.y: kv head kvh, and slice hs of its group's heads (hsplit
	 * slices of `group` heads: each head's steps are the same in any slice) */
	const int split = blockIdx.x, kvh = blockIdx.y / hsplit, tb = blockIdx.z, t = t0 + tb;
	const int splits = gridDim.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int group = nh / nkv / hsplit, kvd = nkv * hd, nq = group * hd;
	const size_t head0 = (size_t)t * nh + (size_t)blockIdx.y * group; /* this CTA's first */
	const size_t pair = (size_t)tb * gridDim.y + blockIdx.y;          /* partials and counter */
	const struct attn_out ao = {out + head0 * hd, aq ? aq + head0 * hd : NULL,
	                            aq ? ad + head0 * hd / 32 : NULL,
	                            aq ? aqs + head0 * hd / 32 : NULL};
	const int n = (posp ? *posp : pos0) + t + 1, span = chunks_per_split * AD_CHUNK;
	const int p0 = split * span, p1 = min(n, p0 + span);
	const int pp = tid / AD_SL, sl = tid % AD_SL, di = tid % hd;
	const float *Kh = K + (size_t)kvh * hd + sl * (hd / AD_SL), *Vh = V + (size_t)kvh * hd + di;
	float acc[AT_ITEMS];
	float4 kv[NF4];
	float v[AD_CHUNK];

	/* the splits holding positions: only they count in, and one alone writes
	 * the output itself (the combine of one partial, M = m and f = 1, gives
	 * the same bits) */
	const int used = min(splits, (n + span - 1) / span);

	if (p0 >= n) /* an empty split: the grid covers a longer context */
		return;
#define AD_LOAD_K(c0, np)                                                                          \
	do {                                                                                       \
		_Pragma("unroll") for (int u = 0; u < NF4; u++) kv[u] =                            \
		    pp < (np) ? __ldg((const float4 *)(Kh + (size_t)((c0) + pp) * kvd) + u)        \
		              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);                               \
	} while (0)
#define AD_LOAD_V(c0, np)                                                                          \
	do {                                                                                       \
		_Pragma("unroll") for (int j = 0; j < AD_CHUNK; j++) v[j] =                        \
		    j < (np) ? __ldg(Vh + (size_t)((c0) + j) * kvd) : 0.0f;                        \
	} while (0)
	/* a chunk's K slice and V column, each set of loads in flight together;
	 * the next chunk's K is loaded once the scores have used this one's, its
	 * V once P.V has (no extra registers: the loads overlap the other phases).
	 * The first chunk's go before q's. */
	AD_LOAD_K(p0, min(AD_CHUNK, p1 - p0));
	AD_LOAD_V(p0, min(AD_CHUNK, p1 - p0));
	{
		const float4 *qg = (const float4 *)(q + head0 * hd);

		for (int i = tid; i < nq / 4; i += AT_THREADS)
			((float4 *)sq)[i] = qg[i];
	}
	attn_start(s_m, s_l, acc, group);

	for (int c0 = p0; c0 < p1; c0 += AD_CHUNK) {
		const int np = min(AD_CHUNK, p1 - c0), nn = min(AD_CHUNK, p1 - c0 - AD_CHUNK);

		__syncthreads(); /* sq, s_m, s_l visible; the last chunk's ss consumed */

		/* scores: slice sl of position pp against every head, folded over the 8 */
#pragma unroll 1
		for (int g = 0; g < group; g++) {
			const float4 *qs = (const float4 *)(sq + g * hd + sl * (hd / AD_SL));
			float d = 0.0f;

#pragma unroll
			for (int u = 0; u < NF4; u++) {
				const float4 qq = qs[u];

				d = __fmaf_rn(qq.x, kv[u].x, d);
				d = __fmaf_rn(qq.y, kv[u].y, d);
				d = __fmaf_rn(qq.z, kv[u].z, d);
				d = __fmaf_rn(qq.w, kv[u].w, d);
			}
			d = __fadd_rn(d, __shfl_xor_sync(0xffffffffu, d, 4));
			d = __fadd_rn(d, __shfl_xor_sync(0xffffffffu, d, 2));
			d = __fadd_rn(d, __shfl_xor_sync(0xffffffffu, d, 1));
			if (sl == (g & (AD_SL - 1)))
				ss[g * AD_CHUNK + pp] = pp < np ? d * scale : -INFINITY;
		}
		if (nn > 0)
			AD_LOAD_K(c0 + AD_CHUNK, nn);
		__syncthreads();

		/* online softmax over the chunk: warp w owns heads w, w + 8 */
		for (int g = warp; g < group; g += AT_THREADS / 32) {
			const float x = ss[g * AD_CHUNK + lane], mo = s_m[g];
			float m = x, s, e, mn;

			m = warp_max(m);
			mn = fmaxf(mo, m);
			e = expf(x - mn); /* -inf (past np) -> 0 */
			ss[g * AD_CHUNK + lane] = e;
			s = e;
			for (int off = 16; off; off >>= 1)
				s += __shfl_xor_sync(0xffffffffu, s, off);
			if (lane == 0) {
				const float cf = expf(mo - mn); /* first chunk: exp(-inf) = 0 */

				s_c[g] = cf;
				s_l[g] = s_l[g] * cf + s;
				s_m[g] = mn;
			}
		}
		__syncthreads();

		/* acc[g][di] = acc * c[g] + sum_j w[g][j] * V[j][di] */
#pragma unroll
		for (int k = 0; k < AT_ITEMS; k++) {
			const int it = tid + k * AT_THREADS, g = it / hd;

			if (it < nq) {
				const float4 *w = (const float4 *)(ss + g * AD_CHUNK);
				float a = acc[k] * s_c[g];

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
		if (nn > 0)
			AD_LOAD_V(c0 + AD_CHUNK, nn);
	}

	if (used == 1) {
		attn_put_out(ao, acc, s_l, nq, hd);
		return;
	}
	{
		const size_t stride = (size_t)nq + 2 * group;
		float *all = part + pair * splits * stride;

		attn_put_partial(all + split * stride, acc, s_m, s_l, nq, group);
		if (!last_arrival(&count[pair], used))
			return;
		attn_combine(ao, all, used, nq, group, hd);
	}
#undef AD_LOAD_K
#undef AD_LOAD_V
}

#define ATTN_CHUNKS(hd)                                                                            \
	extern "C" __global__ void __launch_bounds__(AT_THREADS, 2) coli_attn_chunks_##hd(         \
	    const float *q, const float *K, const float *V, float *out, int pos0, const int *posp, \
	    int nh, int nkv, int hdim, float scale, int cps, float *part, unsigned *count, int t0, \
	    int hsplit, signed char *aq, float *ad, int *aqs)                                      \
	{                                                                                          \
		pdl_entry();                                                                       \
		attn_chunks<hd / 32>(q, K, V, out, pos0, posp, nh, nkv, hdim, scale, cps, part,    \
		                     count, t0, hsplit, aq, ad, aqs);                              \
	}
ATTN_CHUNKS(32)
ATTN_CHUNKS(64)
ATTN_CHUNKS(128)
ATTN_CHUNKS(256)

/* ---- prefill: tiles of queries against chunks in shared memory ----
 *
 * coli_attn_chunks gives every (split, kv head, query) a CTA of its own, so a
 * prefill batch of T queries reads each K/V row once per query (~T^2/2 rows
 * out of L2) and pays a CTA's fixed costs every 32 positions. Here a CTA of 8
 * warps takes AP_RW (query, head) rows a warp, the queries of a tile with all
 * heads of one kv head (coli_attn_prefill_128: 32 rows = 4 queries of a
 * group of 8), walks their positions chunk by chunk with each chunk's K and V
 * in shared memory for all its rows (cp.async, two buffers), and takes
 * coli_attn_chunks' steps for every row exactly, so each query gets the bits
 * a decode step at its position gets:
 *   - a score is the tree (shfl_xor 4, 2, 1) of AD_SL slice sums, each an fma
 *     chain over hd / AD_SL dims from 0: the slices are visited in the
 *     tree's leaf order (0, 4, 2, 6, 1, 5, 3, 7) and folded into a stack;
 *   - lane = position: the chunk's max, exp and sum with the same shuffles;
 *     the running (m, l) per row updated as there;
 *   - P.V: acc * c, then an fma chain over the chunk's 32 positions (past a
 *     row's last position the value is +0, as the chunk kernel loads it);
 *   - the positions split as the launcher splits them for that kernel (cps
 *     chunks a split, from the span); a row with one split writes acc / l,
 *     otherwise splits are combined as attn_combine does: M = the largest
 *     split maximum, then in ascending order O += acc * expf(m - M),
 *     L += l * expf(m - M), out = O / L. M is the largest of all the row's
 *     scores, so a first pass over the chunks (K only, scores and max) finds
 *     it before the second: a third more arithmetic, no partials in memory.
 * Warp w owns rows w * AP_RW.. in every phase (scores: lane = position; P.V:
 * lane = hd / 32 dims of each row), so a warp waits only for itself between
 * its softmax and its P.V; the CTA syncs once a chunk, for the buffers. Tiles
 * go heaviest (latest queries) first, so the causal tail is short tiles. */
#define AP_WARPS (AT_THREADS / 32)

template <int HD, int RW> struct ApSmem {
	enum { LD = HD + 4 }; /* a padded row: a lane's float4 rows 4 banks apart */
	float q[AP_WARPS * RW * LD];
	float k[2][AD_CHUNK * LD];
	float v[2][AD_CHUNK * LD];
	float w[AP_WARPS * RW * AD_CHUNK]; /* softmax weights [row][position] */
	float o[AP_WARPS * RW * HD];       /* the combine's sum O [row][dim] */
};

/* A chunk's K (and V) rows c0.. into buffer b; rows from nmax on zero-filled. */
template <int HD, int RW>
static __device__ __forceinline__ void ap_load(ApSmem<HD, RW> &sm, int b, bool with_v,
                                               const float *K, const float *V, int c0, int nmax,
                                               int kvd, int kvh)
{
	enum { PER = HD / 4, LD = ApSmem<HD, RW>::LD };

	for (int i = threadIdx.x; i < AD_CHUNK * PER; i += AT_THREADS) {
		const int r = i / PER, c = i % PER, p = c0 + r;
		const bool ok = p < nmax;
		const size_t off = ok ? (size_t)p * kvd + (size_t)kvh * HD + c * 4 : 0;

		cp16(&sm.k[b][r * LD + c * 4], K + off, ok);
		if (with_v)
			cp16(&sm.v[b][r * LD + c * 4], V + off, ok);
	}
}

/* x[i]: the score of the warp's row i against position `lane` of the chunk in
 * buffer b, scaled; -inf from the row's last position on (np[i] valid). */
template <int HD, int RW>
static __device__ __forceinline__ void ap_scores(const ApSmem<HD, RW> &sm, int b, int warp,
                                                 int lane, const int *np, float scale, float *x)
{
	enum { SD = HD / AD_SL, LD = ApSmem<HD, RW>::LD };
	const float *kr = &sm.k[b][lane * LD];
	const float *qr = &sm.q[warp * RW * LD];
	float p1[RW], p2[RW], p3[RW];

#pragma unroll
	for (int leaf = 0; leaf < AD_SL; leaf++) {
		const int s = (leaf & 1) << 2 | (leaf & 2) | (leaf >> 2); /* 3-bit reversal */
		float d[RW];

#pragma unroll
		for (int i = 0; i < RW; i++)
			d[i] = 0.0f;
#pragma unroll
		for (int u = 0; u < SD / 4; u++) {
			const float4 k4 = *(const float4 *)(kr + s * SD + 4 * u);

#pragma unroll
			for (int i = 0; i < RW; i++) {
				const float4 q4 = *(const float4 *)(qr + i * LD + s * SD + 4 * u);

				d[i] = __fmaf_rn(q4.x, k4.x, d[i]);
				d[i] = __fmaf_rn(q4.y, k4.y, d[i]);
				d[i] = __fmaf_rn(q4.z, k4.z, d[i]);
				d[i] = __fmaf_rn(q4.w, k4.w, d[i]);
			}
		}
		/* the leaf into the stack: a right child adds its left sibling */
#pragma unroll
		for (int i = 0; i < RW; i++) {
			if (!(leaf & 1)) {
				p1[i] = d[i];
				continue;
			}
			d[i] = __fadd_rn(p1[i], d[i]);
			if (!(leaf & 2)) {
				p2[i] = d[i];
				continue;
			}
			d[i] = __fadd_rn(p2[i], d[i]);
			if (!(leaf & 4)) {
				p3[i] = d[i];
				continue;
			}
			d[i] = __fadd_rn(p3[i], d[i]);
			x[i] = lane < np[i] ? d[i] * scale : -INFINITY;
		}
	}
}

/* acc[i] += sum_j w[i][j] * V[j] (lane's dims), j ascending. MASK: a chunk
 * where some row ends (np[i] < AD_CHUNK): the values past a row's end are
 * +0 for it, as coli_attn_chunks loads them (a select a product; the other
 * chunks go without). */
template <int HD, int RW, bool MASK>
static __device__ __forceinline__ void ap_pv(const ApSmem<HD, RW> &sm, int b, int warp, int lane,
                                             const int *np, float (*acc)[HD / 32])
{
	enum { VD = HD / 32, LD = ApSmem<HD, RW>::LD };
	const float *vb = &sm.v[b][lane * VD];
	const float *wr = &sm.w[warp * RW * AD_CHUNK];

#pragma unroll 2
	for (int j = 0; j < AD_CHUNK; j += 4) {
		float vv[4][VD];

#pragma unroll
		for (int jj = 0; jj < 4; jj++)
#pragma unroll
			for (int dd = 0; dd < VD; dd++)
				vv[jj][dd] = vb[(j + jj) * LD + dd];
#pragma unroll
		for (int i = 0; i < RW; i++) {
			const float4 w4 = *(const float4 *)(wr + i * AD_CHUNK + j);
			const float ww[4] = {w4.x, w4.y, w4.z, w4.w};

#pragma unroll
			for (int jj = 0; jj < 4; jj++)
#pragma unroll
				for (int dd = 0; dd < VD; dd++)
					acc[i][dd] = __fmaf_rn(
					    ww[jj], !MASK || j + jj < np[i] ? vv[jj][dd] : 0.0f,
					    acc[i][dd]);
		}
	}
}

template <int HD, int RW>
static __device__ __forceinline__ void
attn_prefill(const float *q, const float *K, const float *V, float *out, int pos0, const int *posp,
             int nh, int nkv, float scale, int cps, int T, signed char *aq, float *ad, int *aqs)
{
	typedef ApSmem<HD, RW> Smem;
	enum { LD = Smem::LD, VD = HD / 32, ROWS = AP_WARPS * RW };
	extern __shared__ __align__(16) unsigned char ap_raw[];
	Smem &sm = *(Smem *)ap_raw;
	const int group = nh / nkv, qt = ROWS / group, kvd = nkv * HD, kvh = blockIdx.y;
	const int t0 = ((int)gridDim.x - 1 - (int)blockIdx.x) * qt; /* heaviest first */
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int posb = posp ? *posp : pos0, span = cps * AD_CHUNK;
	const int nmax = posb + min(T, t0 + qt); /* the positions any row of the tile sees */
	const int nch = (nmax + AD_CHUNK - 1) / AD_CHUNK;
	const struct attn_out ao = {out, aq, ad, aqs};
	int n[RW]; /* positions row i sees; 0: no query */
	/* every lane holds its rows' state (the same values: shuffled sums) */
	float m[RW], l[RW], acc[RW][VD], M[RW], L[RW];

	/* the tile's q rows (row r: query t0 + r / group, head kvh * group + r % group) */
	for (int i = tid; i < ROWS * (HD / 4); i += AT_THREADS) {
		const int r = i / (HD / 4), c = i % (HD / 4), t = t0 + r / group;
		const float4 *src =
		    (const float4 *)(q + ((size_t)t * nh + (size_t)kvh * group + r % group) * HD);

		*(float4 *)&sm.q[r * LD + c * 4] =
		    r < qt * group && t < T ? src[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
	}
#pragma unroll
	for (int i = 0; i < RW; i++) {
		const int r = warp * RW + i, t = t0 + r / group;

		n[i] = r < qt * group && t < T ? posb + t + 1 : 0;
		M[i] = -INFINITY;
		L[i] = 0.0f;
#pragma unroll
		for (int dd = 0; dd < VD; dd++)
			sm.o[r * HD + lane * VD + dd] = 0.0f; /* the lane's own: no barrier */
	}

	/* pass 1: each row's largest score, when some row spans two splits */
	if (nmax > span) {
		ap_load<HD, RW>(sm, 0, false, K, V, 0, nmax, kvd, kvh);
		cp_commit();
		for (int c = 0; c < nch; c++) {
			int np[RW];
			float x[RW];

			cp_wait<0>();
			__syncthreads(); /* chunk c landed; every warp is past chunk c - 1 */
			if (c + 1 < nch)
				ap_load<HD, RW>(sm, (c + 1) & 1, false, K, V, (c + 1) * AD_CHUNK,
				                nmax, kvd, kvh);
			cp_commit();
#pragma unroll
			for (int i = 0; i < RW; i++)
				np[i] = n[i] - c * AD_CHUNK;
			ap_scores<HD, RW>(sm, c & 1, warp, lane, np, scale, x);
#pragma unroll
			for (int i = 0; i < RW; i++) {
				const float mx = warp_max(x[i]);

				if (np[i] > 0)
					M[i] = fmaxf(M[i], mx);
			}
		}
		__syncthreads(); /* the buffers are free again */
	}

	/* pass 2: the chunk kernel's steps, row by row */
	ap_load<HD, RW>(sm, 0, true, K, V, 0, nmax, kvd, kvh);
	cp_commit();
	for (int c = 0; c < nch; c++) {
		const int b = c & 1;
		int np[RW];
		float x[RW], cf[RW];
		bool full = true;

		cp_wait<0>();
		__syncthreads();
		if (c + 1 < nch)
			ap_load<HD, RW>(sm, (c + 1) & 1, true, K, V, (c + 1) * AD_CHUNK, nmax, kvd,
			                kvh);
		cp_commit();
#pragma unroll
		for (int i = 0; i < RW; i++) {
			np[i] = n[i] - c * AD_CHUNK;
			full = full && (np[i] >= AD_CHUNK || np[i] <= 0);
			if (c % cps == 0) { /* a split starts: attn_start's state */
				m[i] = -INFINITY;
				l[i] = 0.0f;
#pragma unroll
				for (int dd = 0; dd < VD; dd++)
					acc[i][dd] = 0.0f;
			}
		}
		ap_scores<HD, RW>(sm, b, warp, lane, np, scale, x);

		/* online softmax over the chunk (rows past their positions: dead values) */
#pragma unroll
		for (int i = 0; i < RW; i++) {
			const float mn = fmaxf(m[i], warp_max(x[i]));
			const float e = expf(x[i] - mn); /* -inf (past the row's end) -> 0 */
			float s = e;

			for (int off = 16; off; off >>= 1)
				s += __shfl_xor_sync(0xffffffffu, s, off);
			cf[i] = expf(m[i] - mn); /* a split's first chunk: exp(-inf) = 0 */
			l[i] = l[i] * cf[i] + s;
			m[i] = mn;
			sm.w[(warp * RW + i) * AD_CHUNK + lane] = e;
		}
		__syncwarp();

		/* acc = acc * c + sum_j w[j] * V[j], j ascending */
#pragma unroll
		for (int i = 0; i < RW; i++)
#pragma unroll
			for (int dd = 0; dd < VD; dd++)
				acc[i][dd] = acc[i][dd] * cf[i];
		if (full) {
			ap_pv<HD, RW, false>(sm, b, warp, lane, np, acc);
		} else {
			ap_pv<HD, RW, true>(sm, b, warp, lane, np, acc);
		}

		/* a split ends (its last chunk, or the row's): out, or into the combine */
#pragma unroll
		for (int i = 0; i < RW; i++) {
			const int r = warp * RW + i;
			float y[VD];

			if (np[i] <= 0 || (c % cps != cps - 1 && np[i] > AD_CHUNK))
				continue;
			if (n[i] <= span) { /* one split: attn_put_out */
#pragma unroll
				for (int dd = 0; dd < VD; dd++)
					y[dd] = acc[i][dd] / l[i];
			} else {
				const float f = expf(m[i] - M[i]);
				float *o = &sm.o[r * HD + lane * VD];

#pragma unroll
				for (int dd = 0; dd < VD; dd++)
					o[dd] += acc[i][dd] * f;
				L[i] += l[i] * f;
				if (np[i] > AD_CHUNK)
					continue;
#pragma unroll
				for (int dd = 0; dd < VD; dd++)
					y[dd] = o[dd] / L[i];
			}
			attn_store_v<VD>(
			    ao,
			    ((size_t)(t0 + r / group) * nh + (size_t)kvh * group + r % group) * HD +
			        lane * VD,
			    lane, y);
		}
	}
}

#define ATTN_PREFILL(hd, rw)                                                                       \
	extern "C" __global__ void __launch_bounds__(AT_THREADS, 2) coli_attn_prefill_##hd(        \
	    const float *q, const float *K, const float *V, float *out, int pos0, const int *posp, \
	    int nh, int nkv, float scale, int cps, int T, signed char *aq, float *ad, int *aqs)    \
	{                                                                                          \
		pdl_entry();                                                                       \
		attn_prefill<hd, rw>(q, K, V, out, pos0, posp, nh, nkv, scale, cps, T, aq, ad,     \
		                     aqs);                                                         \
	}
ATTN_PREFILL(64, 8)
ATTN_PREFILL(128, 4)
