/*
 * ptx/attn/mla.cu — multi-head latent attention (DeepSeek-V3, Kimi-K2) at decode,
 * in the absorbed form: every query head attends over one shared row per
 * position, the layer's latent cache.
 *
 *   q     [T][nh][dk]   the absorbed query: q_nope . W_UK folded into the
 *                       latent (kv_lora values), then the RoPE part (dk =
 *                       kv_lora + rope)
 *   C     [n_blocks][32][ld] the latent cache: c_kv (normalized) then k_pe, a
 *                       sequence's position p at row kv_at(tab, nbs, slot, p)
 *                       (ptx/attn/kv_rows.cuh; a tile of 32 positions is one
 *                       block), positions 0..pos0+T-1 valid, or each query's
 *                       own position and slot from the row table (rows,
 *                       COLI_GPU_ROWS); the values are the first dv of a row
 *                       (coli_attn_mla[_x3]_{bf16,q8}: typed rows of dk values,
 *                       ptx/attn/kv_rows.cuh, staged in shared memory as fp32)
 *   out   (t, h) at out + t * ldt + h * ldh: softmax(q . C^T * scale) . C[:, :dv],
 *                       per head (W_UV and o_proj come after, as GEMVs; the
 *                       dense forward asks for head-major rows, [nh][T][dv])
 *
 * It is attention with one KV head shared by all nh heads, a key of dk values
 * and a value of dv: each cache row is read once for a tile of COLI_GPU_MLA_HEADS heads, so
 * the work is two small matrix products per tile of positions, S = Q C^T and
 * O += P V, done on the tensor cores (mma.sync m16n8k8, tf32 in, fp32
 * accumulate). X3 = 1 splits every operand into a tf32 high part and a tf32
 * remainder and adds the three products that matter (the 3xTF32 scheme):
 * ~fp32 accuracy at three times the tensor work; X3 = 0 is one tf32 product
 * (inputs rounded to 10 mantissa bits). ptx/attn/gpu_mla.c picks; tests/ptx/mla.c
 * measures both against a double-precision reference.
 *
 * A CTA is (split, head tile, query t): 8 warps, COLI_GPU_MLA_HEADS = 16 heads, tiles of
 * COLI_GPU_MLA_TILE = 32 positions. Per tile:
 *   1. the tile's cache rows into shared memory (rows past the query's last
 *      position zero, so P . V adds exact zeros);
 *   2. S [16][32]: warp w computes positions 8 (w % 4) .. +7 over half of the
 *      key (w / 4), the two halves added in shared memory in a fixed order;
 *   3. online softmax, 16 threads a head: scale, mask, the running max and
 *      sum, P written back beside S, the correction exp(m_old - m_new);
 *   4. O [16][dv] in registers, warp w owning the dv columns of n-tiles w,
 *      w + 8, ... (dv <= 512: 8 n-tiles of 8 a warp), rescaled by the
 *      correction, += P V over the tile's 4 k-steps.
 * Shared memory: q [16][dk + 4], two tile buffers [2][32][dk + 4] (tile k + 1
 * streams in with cp.async while tile k is computed; the +4 makes the
 * fragment loads conflict-free), S/P [2][16][36]: 187 KB at dk = 576, one
 * CTA an SM.
 *
 * Splits: each query's positions go over CTAs (flash-decoding) so the GPU
 * fills at decode; each split writes (O [16][dv], m [16], l [16]) to the
 * scratch and a second launch, coli_attn_mla_combine, adds them in ascending
 * split order over many CTAs: fixed reduction order, no float atomics. A
 * query's split depends on its own position only (tiles of it a split from
 * the shape's most splits, ptx/attn/gpu_mla.c), so its bits are the same alone,
 * in a batch or in a prefill chunk. Like the rest of the dense part this
 * kernel is exempt from the placement invariant (it is deterministic, and
 * within rounding of fp32).
 *
 * The decode kernel (ptx/attn/mla_decode.cuh, included here: one module) is the
 * other form of the same attention: bf16 tensor cores (m16n8k16), 32 heads a
 * CTA with the query's fragments held in registers the whole launch, the
 * cache staged as bf16 (exact for the bf16 and q8 caches), the query and P
 * split into 1..3 bf16 terms. It writes its partials as this kernel's
 * 16-head tiles, so coli_attn_mla_combine serves both. ptx/attn/gpu_mla.c picks
 * it, with two terms, for the dense forward's decode steps and its prefill
 * (a prompt's tokens get the bits a decode step gives them); this kernel
 * stays for shapes the decode kernel does not take and as the x3 / x1
 * reference arms of tests/ptx/mla and `coli bench mla`.
 *
 * coli_mla_prep, at the end, is the elementwise step before it: the cache row
 * normed and roped, the query's RoPE part into its absorbed row and its
 * q_nope out head-major for W_UK^T (kernels_abi.h struct coli_gpu_mla_prep).
 */
#include "ptx/common/cp_async.cuh"
#include "ptx/kernels_abi.h"
#include "ptx/attn/kv_rows.cuh"
#include "ptx/common/pdl.cuh"
#include "ptx/attn/mla_decode.cuh"

#define ML_SP                                                                                      \
	(COLI_GPU_MLA_TILE +                                                                       \
	 4) /* a row of S/P in shared memory (the shape: COLI_GPU_MLA_* in kernels_abi.h) */

static_assert(COLI_GPU_MLA_TILE == KV_BLOCK, "a tile is one KV block: one kv_at");

static __device__ __forceinline__ unsigned tf32_of(float x)
{
	unsigned r;

	asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
	return r;
}

/* d += a . b, one m16n8k8 tile (fragments as the PTX ISA lays them out:
 * g = lane / 4, c = lane % 4; a: (g, c) (g+8, c) (g, c+4) (g+8, c+4);
 * b: (k c, n g) (k c+4, n g); d: (g, 2c) (g, 2c+1) (g+8, 2c) (g+8, 2c+1)). */
static __device__ __forceinline__ void mma_tf32(float *d, const unsigned *a, const unsigned *b)
{
	asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
	             "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
	             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* d += a . b from fp32 fragments: one tf32 product, or (X3) the high parts'
 * product plus both cross terms, small terms first. */
template <int X3>
static __device__ __forceinline__ void mma_f32(float *d, const float *a, const float *b)
{
	unsigned ah[4], bh[2];

#pragma unroll
	for (int i = 0; i < 4; i++)
		ah[i] = tf32_of(a[i]);
#pragma unroll
	for (int i = 0; i < 2; i++)
		bh[i] = tf32_of(b[i]);
	if (X3) {
		unsigned al[4], bl[2];

#pragma unroll
		for (int i = 0; i < 4; i++)
			al[i] = tf32_of(a[i] - __uint_as_float(ah[i]));
#pragma unroll
		for (int i = 0; i < 2; i++)
			bl[i] = tf32_of(b[i] - __uint_as_float(bh[i]));
		mma_tf32(d, al, bh);
		mma_tf32(d, ah, bl);
	}
	mma_tf32(d, ah, bh);
}

/* The tile's positions p0 .. p0 + COLI_GPU_MLA_TILE - 1 into sc ([COLI_GPU_MLA_TILE][dk + 4]),
 * asynchronously (cp.async, one commit group), from C's rows row0 .. (the tile
 * is one KV block: kv_at once); positions at or past n are zero-filled.
 * dk % 4 == 0, ld % 4 == 0 (16-byte copies). */
template <int KT>
static __device__ __forceinline__ void load_tile(float *sc, const void *Cv, size_t row0, int p0,
                                                 int n, int dk, int dv, int ld)
{
	const int s = dk + 4, lane = threadIdx.x & 31;

	if (KT != 0) { /* a typed cache (rows of dk values, q8 scales of c_kv then k_pe after
		        * them): each element's fp32 value stored, plain stores made visible
		        * by the __syncthreads that follows the cp_wait */
		const size_t rb = kv_row_size(KT, dk, (dk + dv - 1) / dv);
		const int soff = (dk + 3) & ~3;

		for (int r = threadIdx.x >> 5; r < COLI_GPU_MLA_TILE;
		     r += COLI_GPU_MLA_THREADS / 32) {
			const bool in = p0 + r < n;
			const char *row = (const char *)Cv + (in ? (row0 + r) * rb : 0);

			for (int c = 4 * lane; c < dk; c += 128) {
				float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

				if (in)
					x = kv_ld4<KT>(row, c / 4,
					               kv_scale<KT>(row, soff + 4 * (c >= dv)));
				*(float4 *)(sc + r * s + c) = x;
			}
		}
		cp_commit();
		return;
	}
	const float *C = (const float *)Cv;

	/* a warp a row at a time, 16 bytes a lane (no division in the loop) */
	for (int r = threadIdx.x >> 5; r < COLI_GPU_MLA_TILE; r += COLI_GPU_MLA_THREADS / 32) {
		const bool in = p0 + r < n;
		const float *src = in ? C + (row0 + r) * ld : C;

		for (int c = 4 * lane; c < dk; c += 128)
			cp16(sc + r * s + c, in ? src + c : C, in);
	}
	cp_commit();
}

/* S for the warp's 8 positions over its half of the key, to ss[half]. */
template <int X3>
static __device__ __forceinline__ void tile_scores(const float *sq, const float *sc, float *ss,
                                                   int dk)
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
	const int n0 = (warp & 3) * 8, half = warp >> 2, s = dk + 4, steps = dk / 16;
	const float *qa = sq + g * s + half * (dk / 2) + c;
	const float *cb = sc + (n0 + g) * s + half * (dk / 2) + c;
	float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};

#pragma unroll 4
	for (int k = 0; k < steps; k++) {
		const float a[4] = {qa[8 * k], qa[8 * s + 8 * k], qa[8 * k + 4],
		                    qa[8 * s + 8 * k + 4]};
		const float b[2] = {cb[8 * k], cb[8 * k + 4]};

		mma_f32<X3>(d, a, b);
	}
	float *o = ss + half * COLI_GPU_MLA_HEADS * ML_SP;
	o[g * ML_SP + n0 + 2 * c] = d[0];
	o[g * ML_SP + n0 + 2 * c + 1] = d[1];
	o[(g + 8) * ML_SP + n0 + 2 * c] = d[2];
	o[(g + 8) * ML_SP + n0 + 2 * c + 1] = d[3];
}

/* The online softmax over the tile, 16 threads a head (2 positions each):
 * P into ss[0], the running max and sum, and the correction of the output
 * so far in s_c. */
static __device__ __forceinline__ void tile_softmax(float *ss, float *s_m, float *s_l, float *s_c,
                                                    int p0, int n, float scale)
{
	const int h = threadIdx.x >> 4, j = (threadIdx.x & 15) * 2;
	float v[2], mx, sum, m_old = s_m[h], m_new, corr;

#pragma unroll
	for (int i = 0; i < 2; i++) {
		const int p = j + i;

		/* the halves in a fixed order */
		v[i] = p0 + p < n
		           ? (ss[h * ML_SP + p] + ss[COLI_GPU_MLA_HEADS * ML_SP + h * ML_SP + p]) *
		                 scale
		           : -INFINITY;
	}
	mx = fmaxf(v[0], v[1]);
	for (int off = 8; off; off >>= 1) /* within the head's 16 lanes */
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
	m_new = fmaxf(m_old, mx); /* finite: the tile holds a position */
	corr = expf(m_old - m_new);
	v[0] = expf(v[0] - m_new);
	v[1] = expf(v[1] - m_new);
	sum = v[0] + v[1];
	for (int off = 8; off; off >>= 1)
		sum += __shfl_xor_sync(0xffffffffu, sum, off);
	/* this thread read these two positions of both halves above, and only
	 * it writes them: P over half 0 */
	ss[h * ML_SP + j] = v[0];
	ss[h * ML_SP + j + 1] = v[1];
	if ((threadIdx.x & 15) == 0) {
		s_l[h] = s_l[h] * corr + sum;
		s_m[h] = m_new;
		s_c[h] = corr;
	}
}

/* O (the warp's n-tiles) rescaled by the correction, += P V over the tile. */
template <int X3>
static __device__ __forceinline__ void tile_pv(float (*o)[4], const float *ss, const float *sc,
                                               const float *s_c, int dk, int dv)
{
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
	const int s = dk + 4;
	const float c0 = s_c[g], c1 = s_c[g + 8];
	float a[COLI_GPU_MLA_TILE / 8][4];

#pragma unroll
	for (int k = 0; k < COLI_GPU_MLA_TILE / 8; k++) {
		a[k][0] = ss[g * ML_SP + 8 * k + c];
		a[k][1] = ss[(g + 8) * ML_SP + 8 * k + c];
		a[k][2] = ss[g * ML_SP + 8 * k + c + 4];
		a[k][3] = ss[(g + 8) * ML_SP + 8 * k + c + 4];
	}
#pragma unroll
	for (int i = 0; i < COLI_GPU_MLA_NT; i++) {
		const int n0 = (warp + 8 * i) * 8;

		if (n0 >= dv)
			break;
		o[i][0] *= c0, o[i][1] *= c0, o[i][2] *= c1, o[i][3] *= c1;
#pragma unroll
		for (int k = 0; k < COLI_GPU_MLA_TILE / 8; k++) {
			const float b[2] = {sc[(8 * k + c) * s + n0 + g],
			                    sc[(8 * k + c + 4) * s + n0 + g]};

			mma_f32<X3>(o[i], a[k], b);
		}
	}
}

/* The warp's outputs (rows g, g + 8 of its n-tiles) through put(h, col, v). */
#define ML_EACH_OUT(body)                                                                          \
	do {                                                                                       \
		const int lane_ = threadIdx.x & 31, warp_ = threadIdx.x >> 5;                      \
		const int g_ = lane_ >> 2, c_ = lane_ & 3;                                         \
		for (int i_ = 0; i_ < COLI_GPU_MLA_NT && (warp_ + 8 * i_) * 8 < dv; i_++)          \
			for (int e_ = 0; e_ < 4; e_++) {                                           \
				const int h = g_ + (e_ >> 1) * 8;                                  \
				const int col = (warp_ + 8 * i_) * 8 + 2 * c_ + (e_ & 1);          \
				const float v = o[i_][e_];                                         \
				body;                                                              \
			}                                                                          \
	} while (0)

/* Grid (splits, ceil(nh / COLI_GPU_MLA_HEADS), queries); dynamic shared memory as mla_smem
 * in ptx/attn/gpu_mla.c. Query t = t0 + blockIdx.z of slot s at position p
 * (attn_row: rows, or slot 0 at pos0 + t); a split covers tiles [split * tps, +tps) of
 * its positions 0 .. p (rows kv_at(tab, nbs, s, .)), tps = ceil(tiles / msp) of its own tiles: a
 * query's split, and so its bits, do not depend on the launch's other queries or its grid (splits
 * past the query's last tile leave empty partials). part: the scratch, [queries][head tiles]
 * [splits][COLI_GPU_MLA_HEADS * dv + 2 * COLI_GPU_MLA_HEADS], combined by
 * coli_attn_mla_combine. */
template <int X3, int KT>
static __device__ void attn_mla(const float *q, const void *C, float *out, int pos0,
                                const int *posp, int nh, int dk, int dv, int ld, int ldt, int ldh,
                                float scale, int msp, float *part, int t0, const int *rows,
                                const int *tab, int nbs)
{
	extern __shared__ __align__(16) float sm[];
	float *sq = sm, *sc = sq + COLI_GPU_MLA_HEADS * (dk + 4),
	      *ss = sc + 2 * COLI_GPU_MLA_TILE * (dk + 4);
	float *s_m = ss + 2 * COLI_GPU_MLA_HEADS * ML_SP, *s_l = s_m + COLI_GPU_MLA_HEADS,
	      *s_c = s_l + COLI_GPU_MLA_HEADS;
	const int split = blockIdx.x, ht = blockIdx.y, tl = blockIdx.z, t = t0 + tl;
	const int splits = gridDim.x;
	float o[COLI_GPU_MLA_NT][4];

	pdl_entry();
	int slot; /* (posp: a replayed graph's position, which the kernel ahead may have written) */
	const int h0 = ht * COLI_GPU_MLA_HEADS, n = attn_row(pos0, posp, rows, t, &slot),
	          tiles = (n + COLI_GPU_MLA_TILE - 1) / COLI_GPU_MLA_TILE;
	const int tps = (tiles + msp - 1) / msp, k0 = split * tps, k1 = min(k0 + tps, tiles);

	for (int i = threadIdx.x; i < COLI_GPU_MLA_HEADS * dk; i += COLI_GPU_MLA_THREADS) {
		const int h = i / dk, k = i % dk;

		sq[h * (dk + 4) + k] = h0 + h < nh ? q[((size_t)t * nh + h0 + h) * dk + k] : 0.0f;
	}
	if (threadIdx.x < COLI_GPU_MLA_HEADS) {
		s_m[threadIdx.x] = -INFINITY;
		s_l[threadIdx.x] = 0.0f;
	}
#pragma unroll
	for (int i = 0; i < COLI_GPU_MLA_NT; i++)
		o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
	/* two tile buffers: tile k + 1 streams in while tile k is computed */
	if (k0 < k1)
		load_tile<KT>(sc, C, kv_at(tab, nbs, slot, k0 * COLI_GPU_MLA_TILE),
		              k0 * COLI_GPU_MLA_TILE, n, dk, dv, ld);
	for (int k = k0; k < k1; k++) {
		float *cur = sc + ((k - k0) & 1) * COLI_GPU_MLA_TILE * (dk + 4);

		__syncthreads(); /* the previous tile's readers are done with the other buffer, ss
		                  */
		if (k + 1 < k1) {
			load_tile<KT>(sc + ((k + 1 - k0) & 1) * COLI_GPU_MLA_TILE * (dk + 4), C,
			              kv_at(tab, nbs, slot, (k + 1) * COLI_GPU_MLA_TILE),
			              (k + 1) * COLI_GPU_MLA_TILE, n, dk, dv, ld);
			cp_wait<1>();
		} else {
			cp_wait<0>();
		}
		__syncthreads(); /* tile k (every thread's copies) visible */
		tile_scores<X3>(sq, cur, ss, dk);
		__syncthreads();
		tile_softmax(ss, s_m, s_l, s_c, k * COLI_GPU_MLA_TILE, n, scale);
		__syncthreads();
		tile_pv<X3>(o, ss, cur, s_c, dk, dv);
	}
	__syncthreads(); /* s_l, s_m final */
	const size_t stride = (size_t)COLI_GPU_MLA_HEADS * dv + 2 * COLI_GPU_MLA_HEADS;
	float *mine = part + (((size_t)tl * gridDim.y + ht) * splits + split) * stride;

	if (splits == 1) {
		ML_EACH_OUT(if (h0 + h < nh) out[(size_t)t * ldt + (size_t)(h0 + h) * ldh + col] =
		                v / s_l[h]);
		return;
	}
	/* a split with no tile (past the query's position) leaves m = -inf, l = 0, O = 0 */
	ML_EACH_OUT(mine[h * dv + col] = v);
	if (threadIdx.x < COLI_GPU_MLA_HEADS) {
		mine[COLI_GPU_MLA_HEADS * dv + threadIdx.x] = s_m[threadIdx.x];
		mine[COLI_GPU_MLA_HEADS * dv + COLI_GPU_MLA_HEADS + threadIdx.x] = s_l[threadIdx.x];
	}
}

/* The splits' partials of one (query, head tile) combined: grid (outputs /
 * COLI_GPU_MLA_COMB, head tiles, T), a thread four outputs of one head (dv % 8 == 0),
 * each split's weight exp(m - M) and the total l computed once a CTA.
 * Ascending split order: the fixed reduction order. A launch of its own so
 * that many CTAs share the partials' reads (one CTA alone, the last of the
 * splits to arrive, spent most of a decode step's time here). */
extern "C" __global__ void __launch_bounds__(COLI_GPU_MLA_THREADS)
    coli_attn_mla_combine(const float *part, float *out, int nh, int dv, int ldt, int ldh,
                          int splits, int t0)
{
	__shared__ float s_w[COLI_GPU_MLA_MAX_SPLITS * COLI_GPU_MLA_HEADS],
	    s_lt[COLI_GPU_MLA_HEADS];
	const int ht = blockIdx.y, t = t0 + blockIdx.z, h0 = ht * COLI_GPU_MLA_HEADS;
	const size_t stride = (size_t)COLI_GPU_MLA_HEADS * dv + 2 * COLI_GPU_MLA_HEADS;
	const float *all = part + ((size_t)blockIdx.z * gridDim.y + ht) * splits * stride;
	const int i = blockIdx.x * COLI_GPU_MLA_COMB + 4 * threadIdx.x, h = i / dv;

	pdl_entry();
	for (int k = threadIdx.x; k < splits * COLI_GPU_MLA_HEADS; k += COLI_GPU_MLA_THREADS)
		s_w[k] = all[(k / COLI_GPU_MLA_HEADS) * stride + COLI_GPU_MLA_HEADS * dv +
		             k % COLI_GPU_MLA_HEADS];
	__syncthreads();
	if (threadIdx.x < COLI_GPU_MLA_HEADS) {
		const int hh = threadIdx.x;
		float M = -INFINITY, L = 0.0f;

		for (int sp = 0; sp < splits; sp++)
			M = fmaxf(M, s_w[sp * COLI_GPU_MLA_HEADS + hh]);
		for (int sp = 0; sp < splits; sp++) { /* ascending: the fixed order */
			const float m = s_w[sp * COLI_GPU_MLA_HEADS + hh],
			            w = m == -INFINITY ? 0.0f : expf(m - M);

			L += all[sp * stride + COLI_GPU_MLA_HEADS * dv + COLI_GPU_MLA_HEADS + hh] *
			     w;
			s_w[sp * COLI_GPU_MLA_HEADS + hh] = w;
		}
		s_lt[hh] = L;
	}
	__syncthreads();
	if (i >= COLI_GPU_MLA_HEADS * dv || h0 + h >= nh)
		return;
	float4 O = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

#pragma unroll 8
	for (int sp = 0; sp < splits; sp++) { /* ascending: the fixed order */
		const float4 v = *(const float4 *)(all + sp * stride + i);
		const float w = s_w[sp * COLI_GPU_MLA_HEADS + h];

		O.x += v.x * w, O.y += v.y * w, O.z += v.z * w, O.w += v.w * w;
	}
	*(float4 *)(out + (size_t)t * ldt + (size_t)(h0 + h) * ldh + i % dv) =
	    make_float4(O.x / s_lt[h], O.y / s_lt[h], O.z / s_lt[h], O.w / s_lt[h]);
}

/* coli_attn_mla[_x3] over an fp32 cache, coli_attn_mla[_x3]_{bf16,q8} over a
 * typed one (attention.cuh's KV types: only the tile loads differ) */
#define ATTN_MLA(name, x3, kt)                                                                     \
	extern "C" __global__ void __launch_bounds__(COLI_GPU_MLA_THREADS, 1)                      \
	    name(const float *q, const void *C, float *out, int pos0, const int *posp, int nh,     \
	         int dk, int dv, int ld, int ldt, int ldh, float scale, int msp, float *part,      \
	         int t0, const int *rows, const int *tab, int nbs)                                 \
	{                                                                                          \
		attn_mla<x3, kt>(q, C, out, pos0, posp, nh, dk, dv, ld, ldt, ldh, scale, msp,      \
		                 part, t0, rows, tab, nbs);                                        \
	}
ATTN_MLA(coli_attn_mla, 0, 0)
ATTN_MLA(coli_attn_mla_x3, 1, 0)
ATTN_MLA(coli_attn_mla_bf16, 0, 1)
ATTN_MLA(coli_attn_mla_x3_bf16, 1, 1)
ATTN_MLA(coli_attn_mla_q8, 0, 2)
ATTN_MLA(coli_attn_mla_x3_q8, 1, 2)

/* kernels_abi.h struct coli_gpu_mla_prep. Grid (T, nh + 1), 128 threads: CTA
 * (t, 0) normalizes and ropes token t's kva row into its slot's cache row at
 * its position (attn_row, kv_at), CTA (t, 1 + h)
 * copies head h's q_nope to qn and ropes its q_pe into qrow. The norm is
 * coli_rmsnorm's (a double sum of squares, here in a fixed tree order), the
 * rotation coli_rope_part's (angle (float)pos * inv_freq, cos and sin in
 * double), f multiplied after it as the CPU does. */
extern "C" __global__ void __launch_bounds__(128) coli_mla_prep(struct coli_gpu_mla_prep a)
{
	__shared__ double red[4];
	const int t = blockIdx.x, y = blockIdx.y, half = a.r / 2, kr = a.kl + a.r;

	pdl_entry();
	int slot;
	const int pos = attn_row(a.pos0, a.posp, a.rows, t, &slot) - 1;
	const size_t at = kv_at(a.tab, a.nbs, slot, pos); /* its cache row */

	if (y == 0) {
		const float *x = a.kva + (size_t)t * kr;
		/* f32: straight into the cache row; typed: the row's values first
		 * in shared memory, then stored (q8: c_kv's scale, then k_pe's) */
		__shared__ float srow[COLI_GPU_MLA_PREP_MAXROW];
		__shared__ float redm[32];
		float *row = a.kt ? srow : (float *)a.cache + at * kr;
		double ss = 0.0;

		for (int i = threadIdx.x; i < a.kl; i += 128)
			ss += (double)x[i] * x[i];
		for (int off = 16; off; off >>= 1)
			ss += __shfl_xor_sync(0xffffffffu, ss, off);
		if ((threadIdx.x & 31) == 0)
			red[threadIdx.x >> 5] = ss;
		__syncthreads(); /* the four warps' sums */
		ss = (red[0] + red[1]) + (red[2] + red[3]);
		const float inv = (float)(1.0 / sqrt(ss / a.kl + a.eps));

		for (int i = threadIdx.x; i < a.kl; i += 128)
			row[i] = a.w[i] * (x[i] * inv);
		for (int i = threadIdx.x; i < half; i += 128) {
			const float ang = (float)pos * a.inv_freq[i], x1 = x[a.kl + i],
			            x2 = x[a.kl + i + half];
			double dc, ds;

			sincos((double)ang, &ds, &dc);
			row[a.kl + i] = (x1 * (float)dc - x2 * (float)ds) * a.f;
			row[a.kl + i + half] = (x2 * (float)dc + x1 * (float)ds) * a.f;
		}
		if (!a.kt)
			return;
		__syncthreads(); /* the row in srow */
		char *dst = (char *)a.cache + at * kv_row_size(a.kt, kr, (kr + a.kl - 1) / a.kl);
		const int soff = (kr + 3) & ~3;

		for (int s0 = 0, g = 0; s0 < kr; s0 += a.kl, g++) {
			const int s1 = min(kr, s0 + a.kl);
			float am = 0.0f, sc = 0.0f;

			if (a.kt == 2) {
				for (int i = s0 + threadIdx.x; i < s1; i += 128)
					am = fmaxf(am, fabsf(srow[i]));
				sc = kv_q8_scale(kv_block_max(am, redm));
				if (threadIdx.x == 0)
					*(float *)(dst + soff + 4 * g) = sc;
			}
			for (int i = s0 + threadIdx.x; i < s1; i += 128)
				kv_put(dst, a.kt, i, srow[i], sc);
		}
		if (a.kt == 2)
			for (int i = kr + threadIdx.x; i < soff; i += 128)
				dst[i] = 0; /* the row's padding, as the CPU's */
		return;
	}
	const int h = y - 1;
	const float *x = a.q + ((size_t)t * a.nh + h) * (a.np + a.r);
	float *qn = a.qn + ((size_t)h * gridDim.x + t) * a.np;
	float *qr = a.qrow + ((size_t)t * a.nh + h) * kr + a.kl;

	for (int i = threadIdx.x; i < a.np; i += 128)
		qn[i] = x[i];
	for (int i = threadIdx.x; i < half; i += 128) {
		const float ang = (float)pos * a.inv_freq[i], x1 = x[a.np + i],
		            x2 = x[a.np + i + half];
		double dc, ds;

		sincos((double)ang, &ds, &dc);
		qr[i] = (x1 * (float)dc - x2 * (float)ds) * a.f;
		qr[i + half] = (x2 * (float)dc + x1 * (float)ds) * a.f;
	}
}
