/*
 * ptx/attn/attn_prefill.cu — causal attention for a prefill batch on the GPU:
 * coli_attn_prefill_<hd> (head sizes 64 and 128), tiles of queries against
 * chunks of K and V in shared memory, with the bits coli_attn_chunks
 * (ptx/attn/attention.cu) gives each query in a decode step. A typed KV cache
 * (coli_attn_prefill_<hd>_{bf16,q8,q8_bf16}: ptx/attn/kv_rows.cuh) is staged as
 * its fp32 values, the rest unchanged.
 */
#include "ptx/attn/attention.cuh"

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
 *   - the positions split as they split there (COLI_GPU_ATTN_CPS chunks a
 *     split, from the row's own position); a row with one split writes acc / l,
 *     otherwise splits are folded as attn_combine folds them, at each
 *     split's end in ascending order (attn_fold: a running maximum M, O =
 *     O * expf(M - M') + acc * expf(m - M')), out = O / L: one pass over
 *     the chunks, no partials in memory.
 * With gridDim.z > 1 (a few queries after a long cache, no window or sinks:
 * ptx/attn/gpu_attn.c) CTA z takes split z of every row of its tile and writes
 * coli_attn_chunks' partials, the last CTA of a query combining them as
 * there (attn_combine); a tile whose rows
 * split unlike (a query count on either side of a split's boundary) stays
 * whole in CTA 0.
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

/* A chunk's K and V rows c0.. into buffer b; rows from nmax on zero-filled.
 * The chunk (c0 a multiple of AD_CHUNK) is one block of the cache: its first
 * row kv_at(tab, nbs, 0, c0) (the launch's one sequence: tab is its slot's).
 * f32 rows go by cp.async; typed ones (KV mode M, attention.cuh) are loaded,
 * turned into their fp32 values and stored (plain stores, complete at the
 * __syncthreads that also orders the cp.async copies before a chunk's use). */
template <int HD, int RW, int KVM>
static __device__ __forceinline__ void ap_load(ApSmem<HD, RW> &sm, int b, const void *K,
                                               const void *V, int c0, int nmax, int kvd, int kvh,
                                               const int *tab, int nbs)
{
	enum { PER = HD / 4, LD = ApSmem<HD, RW>::LD };
	constexpr int KT = kvmode<KVM>::KT, VT = kvmode<KVM>::VT;
	const size_t krow = kv_row_size(KT, kvd, kvd / HD), vrow = kv_row_size(VT, kvd, kvd / HD);
	const int soff = ((kvd + 3) & ~3) + 4 * kvh;
	const size_t row0 = c0 < nmax ? kv_at(tab, nbs, 0, c0) : 0;

	for (int i = threadIdx.x; i < AD_CHUNK * PER; i += AT_THREADS) {
		const int r = i / PER, c = i % PER, p = c0 + r;
		const bool ok = p < nmax;
		const char *kr = (const char *)K + (ok ? (row0 + r) * krow : 0);
		const char *vr = (const char *)V + (ok ? (row0 + r) * vrow : 0);
		const float4 z = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

		if (KT == 0)
			cp16(&sm.k[b][r * LD + c * 4], kr + ((size_t)kvh * HD + c * 4) * 4, ok);
		else
			*(float4 *)&sm.k[b][r * LD + c * 4] =
			    ok ? kv_ld4<KT>(kr + (size_t)kvh * HD * kv_esz<KT>(), c,
			                    kv_scale<KT>(kr, soff))
			       : z;
		if (VT == 0)
			cp16(&sm.v[b][r * LD + c * 4], vr + ((size_t)kvh * HD + c * 4) * 4, ok);
		else
			*(float4 *)&sm.v[b][r * LD + c * 4] =
			    ok ? kv_ld4<VT>(vr + (size_t)kvh * HD * kv_esz<VT>(), c,
			                    kv_scale<VT>(vr, soff))
			       : z;
	}
}

/* x[i]: the score of the warp's row i against position `lane` of the chunk in
 * buffer b, scaled; -inf from the row's last position on (np[i] valid) and,
 * window > 0, before its window (k0 = n - window: lane < np[i] - window). */
template <int HD, int RW>
static __device__ __forceinline__ void ap_scores(const ApSmem<HD, RW> &sm, int b, int warp,
                                                 int lane, const int *np, int window, float scale,
                                                 float *x)
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
			x[i] = lane < np[i] && (window <= 0 || lane >= np[i] - window)
			           ? d[i] * scale
			           : -INFINITY;
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

template <int HD, int RW, int KVM>
static __device__ __forceinline__ void
attn_prefill(const float *q, const void *K, const void *V, float *out, int pos0, const int *posp,
             int nh, int nkv, float scale, int max_splits, int T, signed char *aq, float *ad,
             int *aqs, const float *sinks, int window, const int *tab, int nbs, float *part,
             unsigned *count, int tq0)
{
	typedef ApSmem<HD, RW> Smem;
	enum { LD = Smem::LD, VD = HD / 32, ROWS = AP_WARPS * RW };
	extern __shared__ __align__(16) unsigned char ap_raw[];
	Smem &sm = *(Smem *)ap_raw;
	const int group = nh / nkv, qt = ROWS / group, kvd = nkv * HD, kvh = blockIdx.y;
	/* the launch's queries [tq0, T), the heaviest tile first */
	const int t0 = tq0 + ((int)gridDim.x - 1 - (int)blockIdx.x) * qt;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int posb = posp ? *posp : pos0;
	const int nmax = posb + min(T, t0 + qt); /* the positions any row of the tile sees */
	const int nch = (nmax + AD_CHUNK - 1) / AD_CHUNK;
	/* gridDim.z > 1 (no window, no sinks: the host's choice): CTA z takes
	 * split z of every row of the tile, its partials to part (the chunk
	 * kernel's layout, count its counters), when the rows split alike */
	const int z = blockIdx.z, nq = group * HD;
	const size_t stride = (size_t)nq + 2 * group;
	int zcps = 0, c_begin = 0, c_end = nch;
	/* a sliding window: the tile's first query sees from chunk c_lo on */
	const int n_lo = posb + t0 + 1,
	          c_lo = window > 0 && n_lo > window ? (n_lo - window) / AD_CHUNK : 0;
	const struct attn_out ao = {out, aq, ad, aqs};
	int n[RW];   /* positions row i sees; 0: no query */
	int cps[RW]; /* chunks a split of row i (COLI_GPU_ATTN_CPS of n[i]) */
	/* every lane holds its rows' state (the same values: shuffled sums) */
	float m[RW], l[RW], acc[RW][VD], M[RW], L[RW];
	/* row i's first position (a sliding window's k0, else 0) and its sink,
	 * recomputed where used rather than held: registers are the limit here */
#define AP_K0(i)   (window > 0 && n[i] > window ? n[i] - window : 0)
#define AP_SINK(i) __ldg(sinks + (size_t)kvh * group + (warp * RW + (i)) % group)

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
		cps[i] = COLI_GPU_ATTN_CPS(n[i] > 0 ? n[i] : 1, max_splits);
		M[i] = sinks ? AP_SINK(i) : -INFINITY; /* the sink starts M (attn_combine's) */
		L[i] = 0.0f;
#pragma unroll
		for (int dd = 0; dd < VD; dd++)
			sm.o[r * HD + lane * VD + dd] = 0.0f; /* the lane's own: no barrier */
	}

	if (gridDim.z > 1) { /* (n and cps are the same in every lane of a warp) */
		__shared__ int s_cps[AP_WARPS], s_mixed;
		int mine = 0, mixed = 0;

		if (tid == 0)
			s_mixed = 0;
#pragma unroll
		for (int i = 0; i < RW; i++)
			if (n[i] > 0) {
				mixed = mixed || (mine && cps[i] != mine);
				mine = cps[i];
			}
		__syncthreads();
		if (lane == 0) {
			s_cps[warp] = mine;
			if (mixed)
				s_mixed = 1;
		}
		__syncthreads();
		mixed = s_mixed;
		for (int w = 0; w < AP_WARPS; w++) {
			mixed = mixed || (zcps && s_cps[w] && s_cps[w] != zcps);
			zcps = s_cps[w] ? s_cps[w] : zcps;
		}
		if (mixed) { /* CTA 0 takes the tile whole, as without the split */
			if (z)
				return;
			zcps = 0;
		} else {
			c_begin = z * zcps;
			c_end = min(nch, c_begin + zcps);
			if (c_begin >= nch)
				return;
		}
	}
	/* the chunk kernel's steps, row by row */
	c_begin = zcps ? c_begin : c_lo;
	ap_load<HD, RW, KVM>(sm, c_begin & 1, K, V, c_begin * AD_CHUNK, nmax, kvd, kvh, tab, nbs);
	cp_commit();
	for (int c = c_begin; c < c_end; c++) {
		const int b = c & 1;
		int np[RW];
		float x[RW], cf[RW];
		bool full = true;

		cp_wait<0>();
		__syncthreads();
		if (c + 1 < c_end)
			ap_load<HD, RW, KVM>(sm, (c + 1) & 1, K, V, (c + 1) * AD_CHUNK, nmax, kvd,
			                     kvh, tab, nbs);
		cp_commit();
#pragma unroll
		for (int i = 0; i < RW; i++) {
			np[i] = n[i] - c * AD_CHUNK;
			full = full && (np[i] >= AD_CHUNK || np[i] <= 0);
			/* a split starts, or the row's window does (up to its first
			 * chunk: what a chunk before it computed is dropped here) */
			if (c % cps[i] == 0 || c <= AP_K0(i) / AD_CHUNK) { /* attn_start's state */
				m[i] = -INFINITY;
				l[i] = 0.0f;
#pragma unroll
				for (int dd = 0; dd < VD; dd++)
					acc[i][dd] = 0.0f;
			}
		}
		ap_scores<HD, RW>(sm, b, warp, lane, np, window, scale, x);

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

			if (np[i] <= 0 || c < AP_K0(i) / AD_CHUNK ||
			    (c % cps[i] != cps[i] - 1 && np[i] > AD_CHUNK))
				continue;
			if ((n[i] - 1) / (cps[i] * AD_CHUNK) ==
			    AP_K0(i) / (cps[i] * AD_CHUNK)) { /* one split: attn_put_out */
				const float sk = sinks ? AP_SINK(i) : 0.0f;

#pragma unroll
				for (int dd = 0; dd < VD; dd++)
					y[dd] = sinks ? attn_sink_out(acc[i][dd], m[i], l[i], sk)
					              : acc[i][dd] / l[i];
			} else if (zcps) { /* split z's partial: attn_put_partial's layout */
				const int g = r % group;
				float *mine = part + ((size_t)(t0 + r / group - tq0) * nkv + kvh) *
				                         gridDim.z * stride +
				              z * stride;

#pragma unroll
				for (int dd = 0; dd < VD; dd++)
					mine[g * HD + lane * VD + dd] = acc[i][dd];
				if (lane == 0) {
					mine[nq + g] = m[i];
					mine[nq + group + g] = l[i];
				}
				continue;
			} else {
				float *o = &sm.o[r * HD + lane * VD], fo, fn;

				attn_fold(M[i], L[i], m[i], l[i], &fo, &fn);
#pragma unroll
				for (int dd = 0; dd < VD; dd++)
					o[dd] = o[dd] * fo + acc[i][dd] * fn;
				if (np[i] > AD_CHUNK)
					continue;
				if (sinks) /* the sink joins L last (attn_combine's order) */
					L[i] += expf(AP_SINK(i) - M[i]);
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
	/* split z's queries counted in; the last CTA of a query combines its
	 * splits as coli_attn_chunks' does (the same bits) */
	for (int qi = 0; zcps && qi < qt; qi++) {
		const int t = t0 + qi, span = zcps * AD_CHUNK;
		const int used = t < T ? (posb + t + 1 + span - 1) / span : 0;
		const size_t pair = (size_t)(t - tq0) * nkv + kvh, head0 = (size_t)t * nh + (size_t)kvh * group;

		if (used < 2 || z >= used || !last_arrival(&count[pair], used))
			continue;
		attn_combine({out + head0 * HD, aq ? aq + head0 * HD : NULL,
		              aq ? ad + head0 * HD / 32 : NULL, aq ? aqs + head0 * HD / 32 : NULL},
		             part + pair * gridDim.z * stride, 0, used, nq, group, HD, NULL);
	}
}

#undef AP_K0
#undef AP_SINK

/* coli_attn_prefill_<hd> (f32) and coli_attn_prefill_<hd>_<type> (typed caches) */
#define ATTN_PREFILL(hd, rw, sfx, m)                                                               \
	extern "C" __global__ void __launch_bounds__(AT_THREADS, 2) coli_attn_prefill_##hd##sfx(   \
	    const float *q, const void *K, const void *V, float *out, int pos0, const int *posp,   \
	    int nh, int nkv, float scale, int msp, int T, signed char *aq, float *ad, int *aqs,    \
	    const float *sinks, int window, const int *tab, int nbs, float *part,                  \
	    unsigned *count, int tq0)                                                              \
	{                                                                                          \
		pdl_entry();                                                                       \
		attn_prefill<hd, rw, m>(q, K, V, out, pos0, posp, nh, nkv, scale, msp, T, aq, ad,  \
		                        aqs, sinks, window, tab, nbs, part, count, tq0);           \
	}
#define ATTN_PREFILL_ALL(hd, rw)                                                                   \
	ATTN_PREFILL(hd, rw, , 0)                                                                  \
	ATTN_PREFILL(hd, rw, _bf16, 1)                                                             \
	ATTN_PREFILL(hd, rw, _q8, 2)                                                               \
	ATTN_PREFILL(hd, rw, _q8_bf16, 3)
ATTN_PREFILL_ALL(64, 8)
ATTN_PREFILL_ALL(128, 4)
