/*
 * ptx/attn/attn_tcp.cuh — a prompt's causal attention over a bf16 or q8 KV
 * cache on tensor cores, the (query, head) pairs as the mma's rows (included
 * by ptx/attn/attention.cu after attn_tc.cuh: one module):
 * coli_attn_tcp_<hd>_<type> for head sizes 64 and 128, one sequence's
 * prefill batch, each tile walked whole by one CTA.
 *
 * coli_attn_tc puts a CTA's 32 (query, head) columns on the mma's n side and
 * passes scores and weights through shared memory, three barriers a chunk;
 * a 2,048-token prompt ran it at about 20 TFLOP/s on an H100. Here a CTA of
 * 8 warps takes COLI_GPU_TCP_ROWS = 128 rows of one kv head (128 / group
 * queries), a warp an m-tile of 16 rows, and a row's state stays in its
 * warp's registers: its query's bf16 terms (A fragments, loaded once), the
 * chunk's scores (C fragments of four n-tiles of 8 positions), the softmax
 * state, the weights (turned into P . V's A fragments in place) and the
 * accumulators of O. K and V chunks are copied as coli_attn_tc copies them.
 * With a bf16 cache, mbarriers track each stage: a warp waits for the chunk
 * it reads and, before refilling a stage, for that stage's last readers two
 * chunks back. The warps of a scheduler then drift apart, so one's softmax
 * runs beside the other's mma: 105-124 TFLOP/s at 2,048-4,096 tokens on an
 * H100, against 93-107 with a barrier of the whole CTA at every chunk. A q8
 * type keeps those barriers, since its chunk is widened to bf16 by all the
 * threads together. Both rows' softmax chains run side by side, and their
 * fold events come after P . V has issued.
 *
 * Bits: each row takes coli_attn_tc's steps for its column, so a query
 * gets here the bits of its decode step (tests/ptx/kv_types holds every
 * prefill case to the decode form's bytes):
 *   - the same mma chains with A and B exchanged (scores: q's terms as A
 *     against K as B; P . V: the weights' terms as A against V as B): every
 *     bf16 product is exact and the chains take the k-steps and the terms
 *     (smallest first) in the same order;
 *   - softmax: the chunk's maximum in any order (exact); the sum of its 32
 *     exps by the shuffles' tree over lane = position (xor 16, 8, 4, 2, 1):
 *     position 8j + 2c + e of a row is register (j, e) of lane 4g + c, so
 *     the tree's first two levels pair registers (j ^ 2, then j ^ 1), the
 *     next two lanes (^ 2, ^ 1), the last registers (e ^ 1); float addition
 *     commutes, so each pair's sum is the same whichever side holds it;
 *   - a row's splits (COLI_GPU_ATTN_CPS of its own position) folded at each
 *     split's end (attn_fold), O in shared memory, as coli_attn_tc whole,
 *     each output's last step (its division, or the sink's) at the store;
 *     -fmad=false (Makefile): no contraction differs between the kernels.
 * Rows past the batch (padding, a tile's tail) compute on zeros and are not
 * stored; a warp whose rows have all ended skips the chunk.
 */
#ifndef COLI_PTX_ATTN_TCP_CUH
#define COLI_PTX_ATTN_TCP_CUH

#include "ptx/attn/attn_tc.cuh"

#define TCP_ROWS  COLI_GPU_TCP_ROWS
#define TCP_WARPS (AT_THREADS / 32)
static_assert(TCP_ROWS == 16 * TCP_WARPS, "a warp an m-tile of 16 rows");
/* Chunks copied ahead of the one in use with a bf16 cache: the stage a warp
 * refills was last read two chunks back, so warps may drift a chunk apart
 * (one in its softmax while the other's mma run) */
#define TCP_AHEAD 2

/* coli_attn_tc's stages (TcTile), q8's widened rows, and O [row][hd]. */
template <int HD, int M> struct TcpSmem {
	typedef TcTile<HD, M> T;
	char st[T::NST][T::BYTES];
	unsigned short kw[T::KT == 2 ? AD_CHUNK * T::WR : 8];
	unsigned short vw[T::VT == 2 ? AD_CHUNK * T::WR : 8];
	float o[TCP_ROWS * (HD + 8)];     /* a row padded: a warp's float2 in two wavefronts */
	float fl[TCP_ROWS], fm[TCP_ROWS]; /* a row's divisor and (its one split's) m */
	int one[TCP_ROWS];                /* 1: the row had one split (event 3) */
};

/* A row's event at a chunk's end (coli_attn_tc's ev): 0 none; 1 a split's
 * end, folded into O (O = O * fo + acc * ff); 2 the last split's, folded
 * the same way, and O / fl is the output; 3 the only split's, O = acc, and
 * acc / fl (or attn_sink_out's) is the output. The last step of 2 and 3 (a
 * division, or the sink's) waits for the store: the same operations on the
 * same floats, once an output, and the loop's code stays small. */
struct tcp_event {
	int ev;
	float fo, ff;
};

/* Chunk c's K and V rows into stage st for the mbarrier stages (bf16: the
 * rows as kv_stage lays them, rows at or past nmax zero-filled): a thread's
 * pieces of 16 bytes are fixed for the launch, only the chunk's first row
 * moves, so the copies cost a table read and two adds a piece. */
template <int HD, int M>
static __device__ __forceinline__ void tcp_stage(char *st, const struct tc_kv &kv, int c)
{
	typedef TcTile<HD, M> Tl;
	constexpr int PR = HD * 2 / 16, NP = AD_CHUNK * PR / AT_THREADS; /* pieces a row, a thread */
	static_assert(AD_CHUNK * PR % AT_THREADS == 0, "whole pieces a thread");
	const size_t row0 = kv_at(kv.tab, kv.nbs, kv.slot, c * AD_CHUNK);
	const int nv = kv.nmax - c * AD_CHUNK;
	const char *kh = (const char *)kv.K + row0 * kv.krow + (size_t)kv.kvh * (HD * 2);
	const char *vh = (const char *)kv.V + row0 * kv.vrow + (size_t)kv.kvh * (HD * 2);

#pragma unroll
	for (int k = 0; k < NP; k++) {
		const unsigned i = threadIdx.x + k * AT_THREADS, r = i / PR, b = i % PR * 16;
		const bool in = (int)r < nv;

		cp16(st + r * Tl::KS + b, kh + (in ? r * kv.krow : 0) + b, in);
		cp16(st + Tl::V0 + r * Tl::VS + b, vh + (in ? r * kv.vrow : 0) + b, in);
	}
}

template <int HD, int M>
static __device__ __forceinline__ void
attn_tcp(const float *q, const void *K, const void *V, float *out, int pos0, const int *posp, int nh,
         int nkv, float scale, int max_splits, int T, signed char *aq, float *ad, int *aqs,
         const float *sinks, int window, const int *tab, int nbs, int tq0, int qt)
{
	typedef TcTile<HD, M> Tl;
	typedef TcpSmem<HD, M> Sm;
	constexpr int KT = Tl::KT, VT = Tl::VT;
	constexpr bool BARS = KT != 2 && VT != 2 && Tl::NST >= TCP_AHEAD + 2;
	constexpr int KH = HD / 32, NK = HD / 16, ND = HD / 8; /* k-steps a half, in all; dim n-tiles */
	extern __shared__ __align__(16) unsigned char tcp_raw[];
	Sm &sm = *(Sm *)tcp_raw;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g4 = lane >> 2,
	          c4 = lane & 3;
	const int group = nh / nkv, kvh = blockIdx.y, hb = kvh * group, kvd = nkv * HD;
	const int t0 = tq0 + ((int)gridDim.x - 1 - (int)blockIdx.x) * qt; /* heaviest tile first */
	const int ncol = qt * group;
	const size_t krow = kv_row_size(KT, kvd, nkv), vrow = kv_row_size(VT, kvd, nkv);
	const int soff = ((kvd + 3) & ~3) + 4 * kvh;
	const struct attn_out ao = {out, aq, ad, aqs};
	const int n_first = (posp ? *posp : pos0) + t0 + 1; /* one sequence: slot 0 */
	const int nmax = n_first + min(T - t0, qt) - 1;
	const int nch = (nmax + AD_CHUNK - 1) / AD_CHUNK;
	const int c_lo = window > 0 && n_first > window ? (n_first - window) / AD_CHUNK : 0;
	/* rows g4, g4 + 8 of the warp's m-tile: positions, window start, its
	 * chunk, one split or more, and c % cps kept as c steps (no division) */
	int rn[2], rk0[2], rk0c[2], rcps[2], rone[2], rph[2];
	float m[2], l[2], Mx[2], L[2], sk[2];
	unsigned qf[NK][TC_NS][4]; /* the rows' query terms: A fragments a k-step */
	float acc[ND][4];          /* P . V: [dim n-tile][C fragment] */

	if (t0 >= T)
		return;
#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int r = warp * 16 + g4 + 8 * i, t = t0 + r / group;
		const int n = r < ncol && t < T ? n_first + t - t0 : 0;

		rn[i] = n;
		rk0[i] = window > 0 && n > window ? n - window : 0;
		rcps[i] = COLI_GPU_ATTN_CPS(n > 0 ? n : 1, max_splits);
		rk0c[i] = rk0[i] / AD_CHUNK;
		rone[i] = n > 0 && (n - 1) / (rcps[i] * AD_CHUNK) == rk0[i] / (rcps[i] * AD_CHUNK);
		rph[i] = (c_lo + rcps[i] - 1) % rcps[i]; /* c_lo - 1's: the loop steps first */
		sk[i] = sinks && r < ncol ? __ldg(sinks + hb + r % group) : -INFINITY;
		m[i] = -INFINITY;
		l[i] = 0.0f;
		Mx[i] = sk[i];
		L[i] = 0.0f;
#pragma unroll
		for (int kk = 0; kk < NK; kk++) {
			const float *qr = q + ((size_t)(n ? t : 0) * nh + hb + r % group) * HD + kk * 16;
			const float2 zz = make_float2(0.0f, 0.0f);

			/* a0 / a1: dims 2c.. of rows g4 / g4 + 8; a2 / a3: dims 2c + 8.. */
			md_split<TC_NS>(n ? *(const float2 *)(qr + 2 * c4) : zz, &qf[kk][0][i], 4);
			md_split<TC_NS>(n ? *(const float2 *)(qr + 8 + 2 * c4) : zz, &qf[kk][0][2 + i],
			                4);
		}
	}
#pragma unroll
	for (int i = 0; i < ND; i++)
#pragma unroll
		for (int e = 0; e < 4; e++)
			acc[i][e] = 0.0f;
	for (int i = tid; i < TCP_ROWS * (HD + 8); i += AT_THREADS)
		sm.o[i] = 0.0f;

	const struct tc_kv kv = {K, V, tab, nbs, 0, nmax, kvh, soff, krow, vrow};
	/* bf16 rows (nothing to widen): [landed | released][stage], so that a
	 * warp waits for the chunk it reads and for the readers of the stage
	 * it refills, not for every warp at every chunk */
	__shared__ unsigned long long bar[2][Tl::NST];

	if (BARS) {
		if (tid == 0)
			for (int s = 0; s < Tl::NST; s++)
				mbar_init(&bar[0][s], AT_THREADS), mbar_init(&bar[1][s], AT_THREADS);
		__syncthreads(); /* the barriers set up (and O zeroed) before any use */
		for (int c = c_lo; c < c_lo + TCP_AHEAD && c < nch; c++) {
			const unsigned si = (unsigned)c % Tl::NST;

			tcp_stage<HD, M>(sm.st[si], kv, c);
			mbar_cp_arrive(&bar[0][si]);
		}
	} else {
		tc_stage_first<HD, M>(sm, kv, c_lo, nch);
	}
	for (int c = c_lo; c < nch; c++) {
		const unsigned si = (unsigned)c % Tl::NST; /* chunk c's stage (BARS) */
		const char *st;

		if (BARS) {
			/* u: chunk c's use of its stage is the (u / NST)-th (its
			 * phases' parity); the stage refilled now was last read by
			 * the chunk NST - TCP_AHEAD back */
			const unsigned u = c - c_lo, sa = (unsigned)(c + TCP_AHEAD) % Tl::NST;
			constexpr unsigned back = Tl::NST - TCP_AHEAD;

			if (c + TCP_AHEAD < nch) {
				if (u >= back)
					mbar_wait(&bar[1][sa], ((u - back) / Tl::NST) & 1);
				tcp_stage<HD, M>(sm.st[sa], kv, c + TCP_AHEAD);
				mbar_cp_arrive(&bar[0][sa]);
			}
			mbar_wait(&bar[0][si], (u / Tl::NST) & 1); /* chunk c landed */
			st = sm.st[si];
		} else {
			st = tc_stage_next<HD, M>(sm, kv, c, nch);
		}

		if (!__any_sync(0xffffffffu, rn[0] > c * AD_CHUNK || rn[1] > c * AD_CHUNK)) {
			if (BARS)
				mbar_arrive(&bar[1][si]);
			continue; /* every row of the warp has ended */
		}

		/* scores: [half of the dims][n-tile of positions][C fragment] */
		float sc[2][4][4];
		{
			const unsigned short *kt = KT == 2 ? sm.kw : (const unsigned short *)st;

#pragma unroll
			for (int h = 0; h < 2; h++) {
#pragma unroll
				for (int j = 0; j < 4; j++)
#pragma unroll
					for (int e = 0; e < 4; e++)
						sc[h][j][e] = 0.0f;
#pragma unroll
				for (int k = 0; k < KH; k++) {
					const int d0 = (h * KH + k) * 16;
					unsigned b[2][4]; /* n-tiles 2pp, 2pp + 1: b0 b1 each */

#pragma unroll
					for (int pp = 0; pp < 2; pp++)
						md_ldsm4(b[pp],
						         kt +
						             (16 * pp + (lane & 7) + ((lane >> 4) & 1) * 8) *
						                 Tl::WR +
						             d0 + ((lane >> 3) & 1) * 8);
#pragma unroll
					for (int j = 0; j < 4; j++)
#pragma unroll
						for (int s = TC_NS - 1; s >= 0; s--)
							md_mma(sc[h][j], qf[h * KH + k][s],
							       b[j >> 1][2 * (j & 1)],
							       b[j >> 1][2 * (j & 1) + 1]);
				}
			}
		}

		/* softmax: row i of the thread, positions 8j + 2c4 + e; both rows'
		 * chains side by side (no branch between them), their fold events
		 * after P . V has issued */
		float w[2][4][2], cf[2];
		int reset[2], np[2], ph[2];
#pragma unroll
		for (int i = 0; i < 2; i++) {
			const int k0 = rk0[i];
			float x[4][2], mx = -INFINITY;

			np[i] = rn[i] - c * AD_CHUNK;
			ph[i] = rph[i] = rph[i] + 1 == rcps[i] ? 0 : rph[i] + 1; /* c % cps */
			/* position p is seen when k0 <= c * AD_CHUNK + p < n: p - lo in
			 * [0, span) as unsigned, one compare */
			const int lo = k0 - c * AD_CHUNK;
			const unsigned span = np[i] > lo ? (unsigned)(np[i] - lo) : 0u;
#pragma unroll
			for (int j = 0; j < 4; j++)
#pragma unroll
				for (int e = 0; e < 2; e++) {
					const int p = 8 * j + 2 * c4 + e;
					float v = __fadd_rn(sc[0][j][2 * i + e], sc[1][j][2 * i + e]);

					if (KT == 2)
						v = v * ((const float *)(st + Tl::S0))[p];
					v = (unsigned)(p - lo) < span ? v * scale : -INFINITY;
					x[j][e] = v;
					mx = fmaxf(mx, v);
				}
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
			reset[i] = ph[i] == 0 || c <= rk0c[i]; /* a split starts */
			if (reset[i]) {
				m[i] = -INFINITY;
				l[i] = 0.0f;
			}
			const float mn = fmaxf(m[i], mx);
			float ex[4][2], lv[2];

#pragma unroll
			for (int j = 0; j < 4; j++)
#pragma unroll
				for (int e = 0; e < 2; e++)
					ex[j][e] = expf(x[j][e] - mn); /* -inf -> 0 */
#pragma unroll
			for (int e = 0; e < 2; e++) { /* the tree: xor 16, 8 here, 4, 2 across */
				lv[e] = (ex[0][e] + ex[2][e]) + (ex[1][e] + ex[3][e]);
				lv[e] += __shfl_xor_sync(0xffffffffu, lv[e], 2);
				lv[e] += __shfl_xor_sync(0xffffffffu, lv[e], 1);
			}
			cf[i] = expf(m[i] - mn); /* a split's first chunk: 0 */
			l[i] = l[i] * cf[i] + (lv[0] + lv[1]);
			m[i] = mn;
#pragma unroll
			for (int j = 0; j < 4; j++)
#pragma unroll
				for (int e = 0; e < 2; e++)
					w[i][j][e] =
					    VT == 2 ? ex[j][e] * ((const float *)(st + Tl::S0))
					                             [AD_CHUNK + 8 * j + 2 * c4 + e]
					            : ex[j][e];
		}

		/* P . V: acc = acc * cf (0 first where a split starts), then the
		 * weights' terms of each 16 positions against V's rows; the zeroing
		 * only in the chunks where a row of the warp starts a split (one in
		 * COLI_GPU_ATTN_CPS(n) chunks: 15 at 31k positions on an H100),
		 * so the others skip its 64 selects */
		if (__any_sync(0xffffffffu, reset[0] || reset[1])) {
#pragma unroll
			for (int nt = 0; nt < ND; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++) {
					if (reset[e >> 1])
						acc[nt][e] = 0.0f;
					acc[nt][e] = acc[nt][e] * cf[e >> 1];
				}
		} else {
#pragma unroll
			for (int nt = 0; nt < ND; nt++)
#pragma unroll
				for (int e = 0; e < 4; e++)
					acc[nt][e] = acc[nt][e] * cf[e >> 1];
		}
		{
			const unsigned short *vt =
			    VT == 2 ? sm.vw : (const unsigned short *)(st + Tl::V0);

#pragma unroll
			for (int k2 = 0; k2 < 2; k2++) {
				unsigned pa[TC_NS][4]; /* a0..a3: (row i, n-tile 2 k2 + (reg >> 1)) */

#pragma unroll
				for (int r = 0; r < 4; r++)
					md_split<TC_NS>(make_float2(w[r & 1][2 * k2 + (r >> 1)][0],
					                            w[r & 1][2 * k2 + (r >> 1)][1]),
					                &pa[0][r], 4);
#pragma unroll
				for (int pp = 0; pp < HD / 16; pp++) {
					unsigned b[4]; /* dim n-tiles 2pp, 2pp + 1: b0 b1 each */

					md_ldsm4t(b, vt +
					                 (16 * k2 + (lane & 7) + ((lane >> 3) & 1) * 8) *
					                     Tl::WR +
					                 16 * pp + (lane >> 4) * 8);
#pragma unroll
					for (int s = TC_NS - 1; s >= 0; s--) {
						md_mma(acc[2 * pp], pa[s], b[0], b[1]);
						md_mma(acc[2 * pp + 1], pa[s], b[2], b[3]);
					}
				}
			}
		}

		if (BARS)
			mbar_arrive(&bar[1][si]); /* this thread's reads of the stage done */

		/* each row's event at the chunk's end (the split's last chunk, or
		 * the row's) */
		struct tcp_event evt[2];
#pragma unroll
		for (int i = 0; i < 2; i++) {
			evt[i].ev = 0;
			if (np[i] <= 0 || c < rk0c[i] || (ph[i] != rcps[i] - 1 && np[i] > AD_CHUNK)) {
			} else if (rone[i]) {
				evt[i].ev = 3; /* one split: attn_put_out's */
				if (c4 == 0) {
					const int r = warp * 16 + g4 + 8 * i;

					sm.fm[r] = m[i];
					sm.fl[r] = l[i];
					sm.one[r] = 1;
				}
			} else {
				attn_fold(Mx[i], L[i], m[i], l[i], &evt[i].fo, &evt[i].ff);
				evt[i].ev = np[i] > AD_CHUNK ? 1 : 2;
				if (np[i] <= AD_CHUNK && sinks) /* the sink joins L last */
					L[i] += expf(sk[i] - Mx[i]);
				if (np[i] <= AD_CHUNK && c4 == 0) {
					const int r = warp * 16 + g4 + 8 * i;

					sm.fl[r] = L[i];
					sm.one[r] = 0;
				}
			}
		}

		/* the fold's events, element by element (two a float2) */
#pragma unroll
		for (int i = 0; i < 2; i++) {
			const struct tcp_event ev = evt[i];
			float2 *o = (float2 *)&sm.o[(warp * 16 + g4 + 8 * i) * (HD + 8) + 2 * c4];

			if (!ev.ev)
				continue;
#pragma unroll
			for (int nt = 0; nt < ND; nt++) {
				const float2 a = make_float2(acc[nt][2 * i], acc[nt][2 * i + 1]);

				if (ev.ev == 3) {
					o[4 * nt] = a;
				} else {
					const float2 p = o[4 * nt];

					o[4 * nt] = make_float2(p.x * ev.fo + a.x * ev.ff,
					                        p.y * ev.fo + a.y * ev.ff);
				}
			}
		}
	}
	cp_wait<0>();
	__syncthreads(); /* every row's O, divisor and kind in shared memory */
	for (int r = warp; r < ncol * (HD / 32); r += TCP_WARPS) {
		const int j = r / (HD / 32), d = r % (HD / 32) * 32 + lane, t = t0 + j / group;
		const float v = sm.o[j * (HD + 8) + d];

		if (t >= T)
			continue; /* (warp-uniform) past the batch */
		attn_store(ao, ((size_t)t * nh + hb + j % group) * HD + d,
		           sinks && sm.one[j] ? attn_sink_out(v, sm.fm[j], sm.fl[j],
		                                              __ldg(sinks + hb + j % group))
		                              : v / sm.fl[j]);
	}
}

/* coli_attn_tcp_<hd>_<type>: grid (tiles of qt = COLI_GPU_TCP_ROWS / group
 * queries, nkv), AT_THREADS threads, COLI_GPU_TCP_SMEM bytes of dynamic
 * shared memory; coli_attn_tc's parameters (rows, part and count unused) */
#define ATTN_TCP(hd, sfx, m)                                                                       \
	extern "C" __global__ void __launch_bounds__(AT_THREADS, 1) coli_attn_tcp_##hd##sfx(       \
	    const float *q, const void *K, const void *V, float *out, int pos0, const int *posp,   \
	    int nh, int nkv, float scale, int msp, int T, signed char *aq, float *ad, int *aqs,    \
	    const float *sinks, int window, const int *rows, const int *tab, int nbs, float *part, \
	    unsigned *count, int tq0, int qt)                                                      \
	{                                                                                          \
		static_assert(sizeof(TcpSmem<hd, m>) ==                                            \
		                  COLI_GPU_TCP_SMEM(hd, kv_esz<kvmode<m>::KT>(),                   \
		                                    kv_esz<kvmode<m>::VT>()),                      \
		              "COLI_GPU_TCP_SMEM");                                                \
		(void)rows, (void)part, (void)count;                                               \
		pdl_entry();                                                                       \
		attn_tcp<hd, m>(q, K, V, out, pos0, posp, nh, nkv, scale, msp, T, aq, ad, aqs,     \
		                sinks, window, tab, nbs, tq0, qt);                                 \
	}
#define ATTN_TCP_ALL(hd)                                                                           \
	ATTN_TCP(hd, _bf16, 1)                                                                     \
	ATTN_TCP(hd, _q8, 2)                                                                       \
	ATTN_TCP(hd, _q8_bf16, 3)

#endif
