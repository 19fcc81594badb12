/*
 * ptx/attn/attention.cuh — what the attention kernels share (ptx/attn/attention.cu for
 * decode, ptx/attn/attn_prefill.cu for prefill): the CTA shape, the online
 * softmax's start state, and the ends of a CTA's work (its output, or its
 * split's partial and the last CTA's combine). See ptx/attn/attention.cu's top for
 * the split-and-combine scheme.
 */
#ifndef COLI_PTX_ATTENTION_CUH
#define COLI_PTX_ATTENTION_CUH

#include "ptx/common/act_quant.cuh"
#include "ptx/common/cp_async.cuh"
#include "ptx/kernels_abi.h"
#include "ptx/attn/kv_rows.cuh"
#include "ptx/common/last_arrival.cuh"
#include "ptx/common/pdl.cuh"

#define AT_THREADS 256
#define AT_TILE    256  /* positions per tile: one thread each for the scores */
#define AT_MAXG    16   /* q heads per kv head */
#define AT_MAXQ    2048 /* group * hd, floats of q in shared memory */
#define AT_ITEMS   (AT_MAXQ / AT_THREADS)
#define AT_PV      16 /* value rows loaded ahead in the weighted sum */
/* the chunk kernel's positions a chunk and threads a position (ptx/attn/attention.cu);
 * the prefill kernel takes its steps exactly */
#define AD_CHUNK 32
#define AD_SL    8
static_assert(AD_CHUNK == KV_BLOCK, "a chunk is one block of the cache: one table lookup");

/* A chunk's rows row0 .. row0 + nv - 1 of kv head kvh (one block of the
 * cache: consecutive rows) into shared memory at st by cp.async, as the
 * cache stores them: K rows KS bytes apart from st, V rows VS bytes apart
 * from st + V0, then with a q8 type the rows' scales at st + S0, K's
 * [AD_CHUNK] then V's; rows from nv on zero-filled (+0 values and scales, as
 * P.V needs past the last position). 16-byte pieces; q8 rows (align4(kvd) +
 * 4 nkv bytes: 4-byte aligned only) in 4. Both kernels' stages
 * (attention.cu's AdTile, attn_tc.cuh's TcTile). */
template <int HD, int M, int KS, int VS, int V0, int S0>
static __device__ __forceinline__ void kv_stage(char *st, const void *K, const void *V, size_t row0,
                                                int nv, int kvh, size_t krow, size_t vrow, int soff)
{
	constexpr int KT = kvmode<M>::KT, VT = kvmode<M>::VT;
	constexpr int KB = HD * kv_esz<KT>(), VB = HD * kv_esz<VT>(); /* bytes a row's head */
	const char *kh = (const char *)K + row0 * krow + (size_t)kvh * KB;
	const char *vh = (const char *)V + row0 * vrow + (size_t)kvh * VB;

#define KV_PIECES(base, row, B, S, t, dst)                                                         \
	do {                                                                                       \
		constexpr int PB = (t) == 2 ? 4 : 16, PR = (B) / PB;                               \
		_Pragma("unroll") for (int k = 0;                                                  \
		                       k < (AD_CHUNK * PR + AT_THREADS - 1) / AT_THREADS; k++)     \
		{                                                                                  \
			const int i = threadIdx.x + k * AT_THREADS, r = i / PR, c = i % PR;        \
			if (i >= AD_CHUNK * PR)                                                    \
				break;                                                             \
			const char *src = (base) + (r < nv ? r * (row) : 0) + c * PB;              \
			if (PB == 16)                                                              \
				cp16((dst) + r * (S) + c * PB, src, r < nv);                       \
			else                                                                       \
				cp4((dst) + r * (S) + c * PB, src, r < nv);                        \
		}                                                                                  \
	} while (0)
	KV_PIECES(kh, krow, KB, KS, KT, st);
	KV_PIECES(vh, vrow, VB, VS, VT, st + V0);
#undef KV_PIECES
	if (KT == 2 && (int)threadIdx.x < AD_CHUNK) {
		const int r = threadIdx.x;

		cp4(st + S0 + 4 * r, (const char *)K + (row0 + (r < nv ? r : 0)) * krow + soff,
		    r < nv);
	}
	if (VT == 2 && (int)threadIdx.x >= 32 && (int)threadIdx.x < 32 + AD_CHUNK) {
		const int r = threadIdx.x - 32;

		cp4(st + S0 + 4 * (AD_CHUNK + r),
		    (const char *)V + (row0 + (r < nv ? r : 0)) * vrow + soff, r < nv);
	}
}

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

/* gpt-oss's sinks: a logit s per head that joins the softmax's denominator
 * and no value. One split's state (acc, m, l) with its head's sink: the
 * combine below of that one split, step for step (M = max(m, s), O = acc *
 * f, L = l * f, then L + expf(s - M)), so ptx/attn/attn_prefill.cu, which ends a
 * row with one split by this, gives the same bits. */
static __device__ __forceinline__ float attn_sink_out(float acc, float m, float l, float s)
{
	const float M = fmaxf(m, s), f = expf(m - M);
	float O = 0.0f, L = 0.0f;

	O += acc * f; /* -fmad=false (Makefile): a product, then a sum, as everywhere */
	L += l * f;
	L += expf(s - M);
	return O / L;
}

/* One split alone: the output, acc / l per head; with sinks (the CTA's
 * first head's, or NULL) attn_sink_out. */
static __device__ __forceinline__ void attn_put_out(const struct attn_out &a, const float *acc,
                                                    const float *s_m, const float *s_l, int nq,
                                                    int hd, const float *sink)
{
#pragma unroll
	for (int k = 0; k < AT_ITEMS; k++) {
		const int it = threadIdx.x + k * AT_THREADS, g = it / hd;

		if (it < nq) /* nq % 32 == 0: whole warps */
			attn_store(a, it,
			           sink ? attn_sink_out(acc[k], s_m[g], s_l[g], __ldg(sink + g))
			                : acc[k] / s_l[g]);
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

/* The last CTA to arrive: the splits [first, used) holding positions (first
 * > 0: a sliding window's), folded in ascending order with a running maximum
 * M: at split c, M' = max(M, m_c), O = O * exp(M - M') + acc_c * exp(m_c - M'),
 * L likewise with l_c (the whole-mode folds of attn_tc.cuh and
 * attn_prefill.cu take these steps at each split's end, so they need no
 * first pass for the maximum). A split past the position adds nothing (m =
 * -inf, l = 0, acc = 0). With sinks (the CTA's first head's, or NULL) the
 * head's sink starts M and joins L last. */
static __device__ __forceinline__ void attn_fold(float &M, float &L, float m, float l, float *fo,
                                                 float *fn)
{
	const float Mn = fmaxf(M, m);

	/* 1 where a term holds the maximum (exp(0), exact), so an empty split
	 * (m = -inf, l = 0, acc = 0) after nothing (M = -inf) adds 0, not NaN */
	*fo = M == Mn ? 1.0f : expf(M - Mn);
	*fn = m == Mn ? 1.0f : expf(m - Mn);
	L = L * *fo + l * *fn; /* -fmad=false (Makefile): products, then the sum */
	M = Mn;
}

static __device__ __forceinline__ void attn_combine(const struct attn_out &a, const float *all,
                                                    int first, int used, int nq, int group, int hd,
                                                    const float *sink, int o0 = 0, int o1 = -1)
{
	const size_t stride = (size_t)nq + 2 * group;

	for (int it = o0 + threadIdx.x; it < (o1 < 0 ? nq : o1); it += AT_THREADS) {
		const int g = it / hd;
		const float s = sink ? __ldg(sink + g) : -INFINITY;
		float M = s, O = 0.0f, L = 0.0f;

#pragma unroll 8
		for (int c = first; c < used; c++) {
			const float *pc = all + c * stride;
			float fo, fn;

			attn_fold(M, L, __ldcg(pc + nq + g), __ldcg(pc + nq + group + g), &fo, &fn);
			O = O * fo + __ldcg(pc + it) * fn;
		}
		if (sink)
			L += expf(s - M);
		attn_store(a, it, O / L);
	}
}

/* attn_combine's result, bit for bit, over the outputs [o0, o1) (whole
 * warps: multiples of 32; several CTAs share a query's fold this way,
 * arrival_share) with the CTA's threads side by side: the splits' maxima and
 * sums of the slice's heads into shared memory, then a warp a head for its
 * running maximum, every split's two factors (attn_fold's fo and fn) and L
 * as attn_fold sums it, then the items' O chains. (One thread folding a
 * head's 66 splits at 32k positions took about as long as the splits
 * themselves: ncu's samples, docs/perf/history/2026-12-06.md.) Where the
 * slice's partials fit beside the factors they are staged in shared memory
 * first, every copy in flight at once and under the head passes; else the
 * chains load them from L2. sb: nsb floats of shared memory free for it (5
 * a split and head, and the staged partials); where the factors do not fit,
 * attn_combine. Every thread of the CTA calls it. */
template <int IL>
static __device__ __forceinline__ void
attn_combine_cta(const struct attn_out &a, const float *all, int first, int used, int nq, int group,
                 int hd, const float *sink, float *sb, int nsb, int o0, int o1)
{
	const size_t stride = (size_t)nq + 2 * group;
	const int n = used - first, no = o1 - o0, g0 = o0 / hd, gn = (o1 - 1) / hd + 1 - g0;
	const int ng = n * gn, xo = (5 * ng + gn + 3) & ~3; /* xs: 16-byte aligned */
	float *const sm_m = sb, *const sm_l = sb + ng, *const sfo = sb + 2 * ng,
	             *const sfn = sb + 3 * ng, *const sL = sb + 4 * ng, *const xs = sb + xo;
	const bool staged = xo + n * no <= nsb && stride % 4 == 0 && o0 % 4 == 0;

	if (5 * ng + gn > nsb) {
		attn_combine(a, all, first, used, nq, group, hd, sink, o0, o1);
		return;
	}
	__syncthreads(); /* sb free: every thread past its earlier use */
	if (staged) { /* xs [split][output] */
		for (int i = threadIdx.x; i < n * (no / 4); i += AT_THREADS) {
			const int c = i / (no / 4), k = 4 * (i % (no / 4));

			cp16(xs + c * no + k, all + (size_t)(first + c) * stride + o0 + k, true);
		}
		cp_commit();
	}
	for (int i = threadIdx.x; i < ng; i += AT_THREADS) {
		const float *pc = all + (size_t)(first + i / gn) * stride + nq + g0 + i % gn;

		sm_m[i] = __ldcg(pc);
		sm_l[i] = __ldcg(pc + group);
	}
	__syncthreads();
	/* a warp a head: its running maximum M (from the sink) as a prefix
	 * maximum over 32 splits at a time (fmaxf: exact in any order), each
	 * split's two factors (attn_fold's fo, fn), then L folded in split
	 * order */
	for (int g = threadIdx.x / 32; g < gn; g += AT_THREADS / 32) {
		const int lane = threadIdx.x & 31;
		const float s = sink ? __ldg(sink + g0 + g) : -INFINITY;
		float M = s, L = 0.0f;

		for (int c0 = 0; c0 < n; c0 += 32) {
			const int c = c0 + lane;
			const float m = c < n ? sm_m[c * gn + g] : -INFINITY;
			float Mn = fmaxf(M, m), Mo, fo, fn;

			for (int off = 1; off < 32; off <<= 1) {
				const float y = __shfl_up_sync(0xffffffffu, Mn, off);

				if (lane >= off)
					Mn = fmaxf(Mn, y);
			}
			Mo = __shfl_up_sync(0xffffffffu, Mn, 1); /* the maximum before split c */
			Mo = lane ? Mo : M;
			fo = Mo == Mn ? 1.0f : expf(Mo - Mn);
			fn = m == Mn ? 1.0f : expf(m - Mn);
			if (c < n) {
				sfo[c * gn + g] = fo;
				sfn[c * gn + g] = fn;
			}
			M = __shfl_sync(0xffffffffu, Mn, 31);
		}
		__syncwarp(); /* the head's factors, then L (every lane alike: its loads
		               * do not wait on L, only its products and sums do) */
#pragma unroll 8
		for (int c = 0; c < n; c++)
			L = L * sfo[c * gn + g] + sm_l[c * gn + g] * sfn[c * gn + g];
		if (sink) /* the sink joins L last */
			L += expf(s - M);
		if (lane == 0)
			sL[g] = L;
	}
	if (staged) {
		cp_wait<0>();
		__syncthreads(); /* the partials landed, every head's L */
		for (int it = threadIdx.x; it < no; it += AT_THREADS) { /* whole warps */
			const int g = (o0 + it) / hd - g0;
			float O = 0.0f;

#pragma unroll 8
			for (int c = 0; c < n; c++)
				O = O * sfo[c * gn + g] + xs[c * no + it] * sfn[c * gn + g];
			attn_store(a, o0 + it, O / sL[g]);
		}
		return;
	}
	__syncthreads();
	if (no % 128 == 0 && o0 % 128 == 0 && stride % 4 == 0) {
		/* four adjacent outputs a thread (one head's: hd % 4 == 0), a float4
		 * a split: a quarter of the load instructions, and 16 splits' loads
		 * in flight (64 KB an SM, where a load a split and output kept 16 KB
		 * in flight for the 270 KB a 32k step's fold reads through one SM).
		 * A warp holds 128 outputs, so whole warps store (attn_store_v). */
		for (int it = o0 + 4 * threadIdx.x; it < o1; it += 4 * AT_THREADS) {
			const int g = it / hd - g0;
			float O[4] = {0.0f, 0.0f, 0.0f, 0.0f};

#pragma unroll 16
			for (int c = 0; c < n; c++) {
				const float4 x =
				    __ldcg((const float4 *)(all + (size_t)(first + c) * stride + it));
				const float fo = sfo[c * gn + g], fn = sfn[c * gn + g];

				O[0] = O[0] * fo + x.x * fn;
				O[1] = O[1] * fo + x.y * fn;
				O[2] = O[2] * fo + x.z * fn;
				O[3] = O[3] * fo + x.w * fn;
			}
#pragma unroll
			for (int j = 0; j < 4; j++)
				O[j] = O[j] / sL[g];
			attn_store_v<4>(a, (size_t)it, threadIdx.x & 31, O);
		}
		return;
	}
	for (int it0 = o0 + threadIdx.x; it0 < o1; it0 += IL * AT_THREADS) {
		float O[IL];
		int it[IL], g[IL];

#pragma unroll
		for (int j = 0; j < IL; j++) {
			/* an item past o1 repeats it0's (computed, not stored) */
			it[j] = it0 + j * AT_THREADS < o1 ? it0 + j * AT_THREADS : it0;
			g[j] = it[j] / hd - g0;
			O[j] = 0.0f;
		}
#pragma unroll 4
		for (int c = 0; c < n; c++) {
			const float *pc = all + (size_t)(first + c) * stride;

#pragma unroll
			for (int j = 0; j < IL; j++)
				O[j] = O[j] * sfo[c * gn + g[j]] + __ldcg(pc + it[j]) * sfn[c * gn + g[j]];
		}
#pragma unroll
		for (int j = 0; j < IL; j++)
			if (it0 + j * AT_THREADS < o1)
				attn_store(a, it[j], O[j] / sL[g[j]]);
	}
}

#endif
