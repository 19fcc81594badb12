/*
 * cpu/gemv/gemv_avx2.c — AVX2 + FMA + F16C kernels of THE CANONICAL REDUCTION
 * (cpu.h), bit-identical to cpu/gemv/gemv_ref.c. Compiled with -mavx2 -mfma
 * -mf16c and called only after the dispatcher's cpuid check.
 *
 * The 16 canonical lanes of a row live in two ymm registers:
 *
 *   acc[0] = lanes 0..7,  acc[1] = lanes 8..15          (fp32)
 *
 * Float weights (F32/F16/BF16) have a file of their own,
 * cpu/gemv/gemv_float_avx2.c; the entry points below hand them there.
 *
 * Quantized weights (Q8_0/Q4_0): the unit is the 32-block, so 8 consecutive
 * blocks b..b+7 (b % 8 == 0) are one fmadd into acc[(b / 8) % 2]. The work is
 * cut into tiles of R rows (4, or 1 for leftovers) x T activations (1 or 2;
 * coli_gemv is T = 1) and, inside a tile, into groups of 8 blocks:
 *
 *   1. int32 block sums, exact:
 *        Q8_0: per block, maddubs(|w|, sign(x, w)) (pairs <= 2*128*127 fit
 *              int16) and madd with 1s give 8 int32 partials; a transposing
 *              hadd tree turns the 8 blocks' vectors into one vector of the
 *              8 block sums (6 hadds, a blend and a lane swap) instead of
 *              reducing each block on its own.
 *        Q4_0: 32 bytes of quants = 2 blocks; low nibbles [A 0..15 | B 0..15]
 *              meet x rearranged as [xA 0..15 | xB 0..15], high nibbles meet
 *              [xA 16..31 | xB 16..31]; maddubs(unsigned nibble, signed x)
 *              summed in int16 (|.| <= 7620), madd with 1s -> [A: 4 | B: 4];
 *              three hadds and a vpermd give the 8 block sums; the -8 offset
 *              is applied afterwards: s = dot(nib, xq) - 8*qsum.
 *   2. sumf = (float)s (exact: |s| < 2^24), scale = fp16->f32(dw) * dx
 *      (one fp32 rounding, like the reference), acc = fmadd(sumf, scale, acc).
 *
 * What a tile shares: a row's quants come from memory once and serve the T
 * activations (|w|, or Q4_0's unpacked nibbles, computed once per row and
 * group); an activation's loads (and Q4_0's rearrangement) serve the R rows.
 * coli_gemm walks row tiles outermost, so a tile's rows stay in L1 while all
 * S activations pass over them. Each row prefetches the same position one
 * tile ahead. The integer sums are exact, so the order in which the partial
 * products are added does not matter; the fp32 operations are the
 * reference's, lane by lane. A trailing group of fewer than 8 blocks (or 16
 * elements) is finished in scalar code on the stored lanes; the fold is the
 * canonical tree.
 *
 * Decode (one activation: coli_gemv, and coli_gemm at S = 1, which is how the
 * forward pass calls it) has its own paths. gemv_q4: the rearranged
 * activation, 8*qsum and dx are prepared once per call (on the stack, K <=
 * 16384), the row's lanes stay in q4_group's order (its scales are shuffled
 * to match instead of permuting the sums); gemv_q8: the tile path's group
 * on one row. Both run rows one at a time as one sequential,
 * software-prefetched stream. Q4_0 at S > 1 (K <= 16384) uses its steps too,
 * over blocks of rows kept in L2, two activations a pass sharing each
 * group's unpacked nibbles and scales (gemm_q4_blocked, q4_row2): the tile
 * path above was slower per activation.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "cpu/simd_avx2.h"

#define INLINE static inline __attribute__((always_inline))

/* ---------------- quantized weights ---------------- */

/* A tile is R rows (1..4) x T activations (1..2). T = 4 measured slower
 * (its 32 accumulators and 4x8 rearranged Q4_0 activations live on the
 * stack): in cache, one thread, S = 4: q8_0 1.29 vs 0.97, q4_0 0.93 vs 0.74
 * ns per block, row and activation. */
#define QROWS 4
#define QACTS 2

/* Eight int32 partial-sum vectors, v[k] = 8 partials of block k (4 per
 * 128-bit half) -> the 8 block sums in block order. The hadds transpose as
 * they add: after two levels q0 = [b0 b1 b2 b3 (low halves) | b0 b1 b2 b3
 * (high halves)], q1 the same for b4..b7; one blend and one lane swap pair
 * the halves. */
INLINE __m256i reduce8x8(const __m256i *v)
{
	__m256i q0 =
	    _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
	__m256i q1 =
	    _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
	return _mm256_add_epi32(_mm256_blend_epi32(q0, q1, 0xf0),
	                        _mm256_permute2x128_si256(q0, q1, 0x21));
}

/* |w| of blocks b..b+7 of a Q8_0 row (as unsigned bytes: |-128| = 128),
 * computed once for the T activations. */
INLINE void q8_abs(const int8_t *wq, __m256i *aw)
{
#pragma GCC unroll 8
	for (int k = 0; k < 8; k++) {
		__m256i wv = _mm256_loadu_si256((const __m256i *)(wq + 32 * k));
		aw[k] = _mm256_sign_epi8(wv, wv);
	}
}

/* Exact int32 sums of blocks b..b+7 of a Q8_0 row (wq, xq at block b; aw =
 * q8_abs(wq)): maddubs(|w|, sign(x, w)) = w*x in pairs (|pair| <= 2*128*127
 * < 2^15), madd with 1s widens to 8 int32 per block. */
INLINE __m256i q8_group(const int8_t *wq, const __m256i *aw, const int8_t *xq)
{
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i v[8];

#pragma GCC unroll 8
	for (int k = 0; k < 8; k++) {
		__m256i wv = _mm256_loadu_si256((const __m256i *)(wq + 32 * k));
		__m256i xv = _mm256_loadu_si256((const __m256i *)(xq + 32 * k));
		v[k] =
		    _mm256_madd_epi16(_mm256_maddubs_epi16(aw[k], _mm256_sign_epi8(xv, wv)), ones);
	}
	return reduce8x8(v);
}

/* Activations of blocks b..b+7 rearranged for Q4_0's nibble planes: for the
 * block pair (2i, 2i+1), xr[2i] = [x(2i) 0..15 | x(2i+1) 0..15] meets the
 * low nibbles of the pair's 32 quant bytes, xr[2i+1] = [x(2i) 16..31 |
 * x(2i+1) 16..31] the high nibbles. */
INLINE void q4_xprep(const int8_t *xq, __m256i *xr)
{
#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		__m256i xa = _mm256_loadu_si256((const __m256i *)(xq + 64 * i));
		__m256i xb = _mm256_loadu_si256((const __m256i *)(xq + 64 * i + 32));
		xr[2 * i] = _mm256_permute2x128_si256(xa, xb, 0x20);
		xr[2 * i + 1] = _mm256_permute2x128_si256(xa, xb, 0x31);
	}
}

/* A Q4_0 row's quants of blocks b..b+7 as nibbles: nib[2i] low, nib[2i+1]
 * high nibbles of the 32 bytes of block pair (2i, 2i+1), values 0..15. */
INLINE void q4_unpack(const uint8_t *wq, __m256i *nib)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f);

#pragma GCC unroll 4
	for (int i = 0; i < 4; i++) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(wq + 32 * i));
		nib[2 * i] = _mm256_and_si256(v, m4);
		nib[2 * i + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
	}
}

/* Exact int32 sums of 8 Q4_0 blocks without the -8 offset, in the order
 * [b0 b2 b4 b6 | b1 b3 b5 b7]. Per block pair, maddubs(nibble, x) gives
 * pairs (|.| <= 2*15*128 = 3840), low + high nibbles add in int16 (<= 7680)
 * to p = [A: 8 | B: 8]; two levels of hadd_epi16 stay exact in int16 (<=
 * 15360, then <= 30720 < 2^15) and transpose the 4 pairs' vectors into one;
 * a single madd with 1s widens to the 8 int32 block sums. */
INLINE __m256i q4_group(const __m256i *nib, const __m256i *xr)
{
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i p[4];

#pragma GCC unroll 4
	for (int i = 0; i < 4; i++)
		p[i] = _mm256_add_epi16(_mm256_maddubs_epi16(nib[2 * i], xr[2 * i]),
		                        _mm256_maddubs_epi16(nib[2 * i + 1], xr[2 * i + 1]));
	/* hadd16(p0, p1) = [b0: 4 | b2: 4 || b1: 4 | b3: 4] (lanes of 128 bits) */
	__m256i h = _mm256_hadd_epi16(_mm256_hadd_epi16(p[0], p[1]), _mm256_hadd_epi16(p[2], p[3]));
	return _mm256_madd_epi16(h, ones);
}

/* Scalar block sum for the tail (fewer than 8 blocks left). */
static int32_t block_sum1(enum coli_dtype dt, const void *wrow, const int8_t *xq, int b)
{
	int32_t s = 0;

	if (dt == COLI_DTYPE_Q8_0) {
		const int8_t *q = (const int8_t *)wrow + b * 32;
		for (int j = 0; j < 32; j++)
			s += (int32_t)q[j] * xq[b * 32 + j];
	} else {
		const uint8_t *q = (const uint8_t *)wrow + b * 16;
		for (int j = 0; j < 16; j++)
			s += ((int32_t)(q[j] & 15) - 8) * xq[b * 32 + j] +
			     ((int32_t)(q[j] >> 4) - 8) * xq[b * 32 + j + 16];
	}
	return s;
}

/* A quantized row's result from its lanes acc0 (0..7) and acc1 (8..15), in
 * block order, after blocks [0, b): blocks b..nb-1 (fewer than 8) in scalar
 * code on the stored lanes, then the canonical fold. */
INLINE float finish_row(enum coli_dtype dt, __m256 acc0, __m256 acc1, const void *wrow,
                        const uint16_t *dw, const struct coli_act *x, int b, int nb)
{
	float l[16];

	if (b == nb)
		return fold16(acc0, acc1);
	_mm256_storeu_ps(l, acc0);
	_mm256_storeu_ps(l + 8, acc1);
	for (int k = b; k < nb; k++) {
		float sc = coli_fp16_to_f32(dw[k]) * x->d[k];
		l[k % 16] = fmaf((float)block_sum1(dt, wrow, x->q, k), sc, l[k % 16]);
	}
	return coli_lanes_fold(l);
}

/* One tile's view of a quantized matrix. */
struct qtile {
	const uint8_t *wrow[QROWS]; /* quants of row r+i at block 0 */
	const uint16_t *dw[QROWS];  /* fp16 scales of row r+i */
	size_t bpb;                 /* quant bytes per block: 32 (Q8_0) or 16 */
	size_t pf;                  /* prefetch distance: one tile, in bytes */
};

/* Blocks b..b+7 of the tile into acc[i][s] (the canonical lanes 8h..8h+7,
 * h = (b / 8) % 2): s = exact block sums, acc = fmadd((float)s, dw*dx, acc),
 * the reference's fp32 operations lane by lane. The quants (and Q4_0's
 * unpacked nibbles) of a row are loaded once for the T activations; the
 * activations (and Q4_0's rearrangement of them) once for the R rows. */
INLINE void quant_group(const enum coli_dtype dt, const struct qtile *t, const struct coli_act *x,
                        const int T, const int R, int b, __m256 acc[QROWS][QACTS])
{
	__m256i xr[QACTS][8], qs8[QACTS];
	__m256 dx[QACTS];

#pragma GCC unroll 4
	for (int s = 0; s < T; s++) {
		if (dt == COLI_DTYPE_Q4_0) {
			q4_xprep(x[s].q + b * 32, xr[s]);
			qs8[s] = _mm256_slli_epi32(
			    _mm256_loadu_si256((const __m256i *)(x[s].qsum + b)), 3);
		}

		dx[s] = _mm256_loadu_ps(x[s].d + b);
	}
#pragma GCC unroll 4
	for (int i = 0; i < R; i++) {
		const uint8_t *wq = t->wrow[i] + (size_t)b * t->bpb;
		__m256 dwf = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(t->dw[i] + b)));
		__m256i nib[8]; /* Q4_0: unpacked nibbles; Q8_0: |w| */

		/* The same position in row r+i+R, i.e. the next tile: the rows of
		 * a tile are R interleaved streams that the hardware prefetcher
		 * alone keeps too few lines ahead of (one thread, q8_0, 256 MiB:
		 * 8 -> 11-12 GB/s against a 15.5 GB/s read bound). */
		const char *pf = (const char *)wq + t->pf;
		_mm_prefetch(pf, _MM_HINT_T0);
		_mm_prefetch(pf + 64, _MM_HINT_T0);
		if (dt == COLI_DTYPE_Q8_0) {
			_mm_prefetch(pf + 128, _MM_HINT_T0);
			_mm_prefetch(pf + 192, _MM_HINT_T0);
			if (T > 1)
				q8_abs((const int8_t *)wq, nib);
		} else {
			q4_unpack(wq, nib);
		}
#pragma GCC unroll 4
		for (int s = 0; s < T; s++) {
			__m256i sum;
			if (dt == COLI_DTYPE_Q8_0) {
				if (T == 1)
					q8_abs((const int8_t *)wq, nib);
				sum = q8_group((const int8_t *)wq, nib, x[s].q + b * 32);
			} else {
				sum = _mm256_permutevar8x32_epi32(
				    q4_group(nib, xr[s]),
				    _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
				sum = _mm256_sub_epi32(sum, qs8[s]);
			}
			acc[i][s] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum),
			                            _mm256_mul_ps(dwf, dx[s]), acc[i][s]);
		}
	}
}

/* Y[s][i] = rows r..r+R of a quantized matrix against activations x[0..T),
 * y at row r of activation 0, ldy between activations. */
INLINE void quant_tile(const enum coli_dtype dt, const struct coli_mat *w, const struct coli_act *x,
                       const int T, float *y, size_t ldy, int r, const int R)
{
	const int nb = w->cols / COLI_QBLOCK;
	struct qtile t;
	__m256 acc0[QROWS][QACTS], acc1[QROWS][QACTS];
	int b = 0;

	t.bpb = dt == COLI_DTYPE_Q8_0 ? 32 : 16;
	t.pf = (size_t)R * nb * t.bpb;
#pragma GCC unroll 4
	for (int i = 0; i < R; i++) {
		t.wrow[i] = (const uint8_t *)w->data + (size_t)(r + i) * nb * t.bpb;
		t.dw[i] = w->scales + (size_t)(r + i) * nb;
#pragma GCC unroll 4
		for (int s = 0; s < T; s++)
			acc0[i][s] = acc1[i][s] = _mm256_setzero_ps();
	}
	for (; b + 16 <= nb; b += 16) {
		quant_group(dt, &t, x, T, R, b, acc0);
		quant_group(dt, &t, x, T, R, b + 8, acc1);
	}
	if (b + 8 <= nb) {
		quant_group(dt, &t, x, T, R, b, acc0);
		b += 8;
	}
#pragma GCC unroll 4
	for (int i = 0; i < R; i++) {
#pragma GCC unroll 4
		for (int s = 0; s < T; s++)
			y[(size_t)s * ldy + i] = finish_row(dt, acc0[i][s], acc1[i][s], t.wrow[i],
			                                    t.dw[i], &x[s], b, nb);
	}
}

/* Rows [row0, row1) against T activations, T fixed: tiles of QROWS rows,
 * then single rows. */
INLINE void quant_rows_t(const enum coli_dtype dt, const struct coli_mat *w,
                         const struct coli_act *x, const int T, float *y, size_t ldy, int row0,
                         int row1)
{
	int r = row0;

	for (; r + QROWS <= row1; r += QROWS)
		quant_tile(dt, w, x, T, y + (r - row0), ldy, r, QROWS);
	for (; r < row1; r++)
		quant_tile(dt, w, x, T, y + (r - row0), ldy, r, 1);
}

/* One tile of R rows (1 or QROWS) x T activations (1 or QACTS = 2). */
INLINE void quant_tile_any(const enum coli_dtype dt, const struct coli_mat *w,
                           const struct coli_act *x, int T, float *y, size_t ldy, int r, int R)
{
	if (R == QROWS) {
		if (T == 1)
			quant_tile(dt, w, x, 1, y, ldy, r, QROWS);
		else
			quant_tile(dt, w, x, QACTS, y, ldy, r, QROWS);
		return;
	}
	for (int i = 0; i < R; i++) {
		if (T == 1)
			quant_tile(dt, w, x, 1, y + i, ldy, r + i, 1);
		else
			quant_tile(dt, w, x, QACTS, y + i, ldy, r + i, 1);
	}
}

/* Rows [row0, row1) x S activations: each group of QROWS rows is read from
 * memory once and then serves all S activations from L1, QACTS at a time. */
INLINE void gemm_quant(const enum coli_dtype dt, const struct coli_mat *w, const struct coli_act *x,
                       int S, float *y, size_t ldy, int row0, int row1)
{
	for (int r = row0; r < row1; r += QROWS) {
		int R = row1 - r < QROWS ? row1 - r : QROWS;
		for (int s = 0; s < S; s += QACTS) {
			int T = S - s < QACTS ? S - s : QACTS;
			quant_tile_any(dt, w, x + s, T, y + (size_t)s * ldy + (r - row0), ldy, r,
			               R);
		}
	}
}

static void gemm_q8(const struct coli_mat *w, const struct coli_act *x, int S, float *y, size_t ldy,
                    int row0, int row1)
{
	gemm_quant(COLI_DTYPE_Q8_0, w, x, S, y, ldy, row0, row1);
}

static void gemm_q4(const struct coli_mat *w, const struct coli_act *x, int S, float *y, size_t ldy,
                    int row0, int row1)
{
	gemm_quant(COLI_DTYPE_Q4_0, w, x, S, y, ldy, row0, row1);
}

/* ---------------- Q4_0 decode GEMV (one activation) ----------------
 *
 * coli_gemv on Q4_0 prepares the activation once per call instead of once
 * per row tile and group, and keeps each row's canonical lanes in the order
 * q4_group returns its sums, so no lane permute is left in the inner loop:
 *
 *   xr  int8  [nb8][32]  q4_xprep's rearrangement of blocks 0..nb8-1
 *   qs8 int32 [nb8]      8 * qsum,   per group of 8 in the order P
 *   dx  fp32  [nb8]      block scale, per group of 8 in the order P
 *
 * P = [b0 b2 b4 b6 | b1 b3 b5 b7]: vector lane j of a group holds block
 * b + P[j]. acc[g % 2] lane j therefore carries canonical lane 8(g % 2) +
 * P[j]; the row's fp16 scales are put in the order P with one in-lane byte
 * shuffle before their widening, and the two accumulators are put back in
 * block order once per row, before the canonical fold. Every fp32 operation
 * is the reference's, lane by lane; only the lanes sit elsewhere.
 *
 * Rows run one at a time, each a sequential stream of quants and scales
 * (the prepared activation stays in L1 for all rows). nb8 = (K/32) & ~7 is
 * at most Q4_PREP_BLOCKS (K <= 16384) for this path; larger K takes the tile
 * path above. */
#define Q4_PREP_BLOCKS 512

struct q4_prep {
	int8_t xr[Q4_PREP_BLOCKS * 32] __attribute__((aligned(32)));
	int32_t qs8[Q4_PREP_BLOCKS] __attribute__((aligned(32)));
	float dx[Q4_PREP_BLOCKS] __attribute__((aligned(32)));
};

static void q4_prep(struct q4_prep *p, const struct coli_act *x, int nb8)
{
	const __m256i perm = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);

	for (int b = 0; b < nb8; b += 8) {
		q4_xprep(x->q + b * 32, (__m256i *)(p->xr + b * 32));
		__m256i qs = _mm256_loadu_si256((const __m256i *)(x->qsum + b));
		_mm256_store_si256((__m256i *)(p->qs8 + b),
		                   _mm256_slli_epi32(_mm256_permutevar8x32_epi32(qs, perm), 3));
		_mm256_store_ps(p->dx + b,
		                _mm256_permutevar8x32_ps(_mm256_loadu_ps(x->d + b), perm));
	}
}

/* The row's fp16 scales of blocks b..b+7, widened, in the order P. */
INLINE __m256 q4_row_scales(const uint16_t *dw, int b)
{
	const __m128i shuf = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);

	return _mm256_cvtph_ps(_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(dw + b)), shuf));
}

/* Blocks b..b+7 of a row, unpacked (nib) with their scales (wsc), against
 * one prepared activation into acc (lanes in the order P). */
INLINE __m256 q4_row_acc(const __m256i *nib, __m256 wsc, const struct q4_prep *p, int b, __m256 acc)
{
	__m256i s = q4_group(nib, (const __m256i *)(p->xr + b * 32));

	s = _mm256_sub_epi32(s, _mm256_load_si256((const __m256i *)(p->qs8 + b)));
	__m256 sc = _mm256_mul_ps(wsc, _mm256_load_ps(p->dx + b));
	return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), sc, acc);
}

/* Blocks b..b+7 of one row into acc (lanes in the order P). */
INLINE __m256 q4_row_group(const uint8_t *wq, const uint16_t *dw, const struct q4_prep *p, int b,
                           __m256 acc)
{
	__m256i nib[8];

	q4_unpack(wq, nib);
	return q4_row_acc(nib, q4_row_scales(dw, b), p, b, acc);
}

/* y[0] = row r against the prepared activation (and x for the tail). */
INLINE float q4_row(const struct coli_mat *w, const struct q4_prep *p, const struct coli_act *x,
                    int r)
{
	const int nb = w->cols / COLI_QBLOCK, nb8 = nb & ~7;
	const uint8_t *wq = (const uint8_t *)w->data + (size_t)r * nb * 16;
	const uint16_t *dw = w->scales + (size_t)r * nb;
	const __m256i unperm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	__m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
	int b = 0;

	for (; b + 16 <= nb8; b += 16) {
		coli_q4_prefetch16(wq + b * 16);
		acc0 = q4_row_group(wq + b * 16, dw, p, b, acc0);
		acc1 = q4_row_group(wq + (b + 8) * 16, dw, p, b + 8, acc1);
	}
	if (b < nb8) {
		acc0 = q4_row_group(wq + b * 16, dw, p, b, acc0);
		b += 8;
	}
	acc0 = _mm256_permutevar8x32_ps(acc0, unperm);
	acc1 = _mm256_permutevar8x32_ps(acc1, unperm);
	return finish_row(COLI_DTYPE_Q4_0, acc0, acc1, wq, dw, x, b, nb);
}

static void gemv_q4(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                    int row1)
{
	const int nb8 = (w->cols / COLI_QBLOCK) & ~7;
	struct q4_prep p;

	if (nb8 > Q4_PREP_BLOCKS) {
		gemm_q4(w, x, 1, y, 0, row0, row1);
		return;
	}
	q4_prep(&p, x, nb8);
	for (int r = row0; r < row1; r++)
		y[r - row0] = q4_row(w, &p, x, r);
}

/* Row r against two prepared activations: each group's nibbles and fp16
 * scales are unpacked once for both; per activation the steps are
 * q4_row_acc's, so each result has q4_row's bits. */
INLINE void q4_row2(const struct coli_mat *w, const struct q4_prep *p0, const struct q4_prep *p1,
                    const struct coli_act *x0, const struct coli_act *x1, int r, float *y0,
                    float *y1)
{
	const int nb = w->cols / COLI_QBLOCK, nb8 = nb & ~7;
	const uint8_t *wq = (const uint8_t *)w->data + (size_t)r * nb * 16;
	const uint16_t *dw = w->scales + (size_t)r * nb;
	const __m256i unperm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	__m256 acc[2][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()},
	                    {_mm256_setzero_ps(), _mm256_setzero_ps()}};
	const struct q4_prep *pp[2] = {p0, p1};
	int b = 0;

	for (; b < nb8; b += 8) {
		__m256i nib[8];

		if (!(b & 8)) /* as q4_row: once every 16 blocks */
			coli_q4_prefetch16(wq + b * 16);
		q4_unpack(wq + b * 16, nib);
		__m256 wsc = q4_row_scales(dw, b);

#pragma GCC unroll 2
		for (int a = 0; a < 2; a++)
			acc[a][(b >> 3) & 1] = q4_row_acc(nib, wsc, pp[a], b, acc[a][(b >> 3) & 1]);
	}
	*y0 = finish_row(COLI_DTYPE_Q4_0, _mm256_permutevar8x32_ps(acc[0][0], unperm),
	                 _mm256_permutevar8x32_ps(acc[0][1], unperm), wq, dw, x0, b, nb);
	*y1 = finish_row(COLI_DTYPE_Q4_0, _mm256_permutevar8x32_ps(acc[1][0], unperm),
	                 _mm256_permutevar8x32_ps(acc[1][1], unperm), wq, dw, x1, b, nb);
}

/* Q4_0 at S > 1: blocks of Q4_RB rows (32 KiB of quants at K = 2048) stay
 * in L2 while the activations pass over them two at a time (q4_row2: a
 * group unpacked once for both), each prepared once per block; an odd one
 * out takes the decode GEMV. */
#define Q4_RB 32

static void gemm_q4_blocked(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                            size_t ldy, int row0, int row1)
{
	const int nb8 = (w->cols / COLI_QBLOCK) & ~7;
	struct q4_prep p[2];

	if (nb8 > Q4_PREP_BLOCKS) {
		gemm_q4(w, x, S, y, ldy, row0, row1);
		return;
	}
	for (int r = row0; r < row1; r += Q4_RB) {
		int r1 = r + Q4_RB < row1 ? r + Q4_RB : row1, s = 0;

		for (; s + 2 <= S; s += 2) {
			float *y0 = y + (size_t)s * ldy + (r - row0), *y1 = y0 + ldy;

			q4_prep(&p[0], &x[s], nb8);
			q4_prep(&p[1], &x[s + 1], nb8);
			for (int i = r; i < r1; i++)
				q4_row2(w, &p[0], &p[1], &x[s], &x[s + 1], i, y0 + (i - r),
				        y1 + (i - r));
		}
		if (s < S)
			gemv_q4(w, &x[s], y + (size_t)s * ldy + (r - row0), r, r1);
	}
}

/* ---------------- Q8_0 decode GEMV (one activation) ----------------
 *
 * The same single-stream shape as gemv_q4: rows one at a time, each a
 * sequential, software-prefetched stream of quants, blocks in order
 * (q8_group gives the block sums in block order, so nothing is permuted).
 * Nothing of the activation can be prepared once: the sign trick needs the
 * row's weights. Every fp32 operation is the tile path's. */

/* y[s * ldy] = row r against x[s], s < N (1 or 2): the row's quants, their
 * |w| and its scales loaded once for the N activations; per activation the
 * same steps. */
INLINE void q8_row_n(const struct coli_mat *w, const struct coli_act *x, const int N, int r,
                     float *y, size_t ldy)
{
	const int nb = w->cols / COLI_QBLOCK, nb8 = nb & ~7;
	const int8_t *wq = (const int8_t *)w->data + (size_t)r * nb * 32;
	const uint16_t *dw = w->scales + (size_t)r * nb;
	__m256 acc[2][2] = {{_mm256_setzero_ps(), _mm256_setzero_ps()},
	                    {_mm256_setzero_ps(), _mm256_setzero_ps()}};
	__m256i aw[8];
	int b = 0;

	for (; b < nb8; b += 8) {
		/* 2 KiB ahead in the quant stream (the next rows follow) */
		const char *pf = (const char *)(wq + b * 32) + 2048;

#pragma GCC unroll 4
		for (int l = 0; l < 256; l += 64)
			_mm_prefetch(pf + l, _MM_HINT_T0);
		q8_abs(wq + b * 32, aw);
		const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dw + b)));

#pragma GCC unroll 2
		for (int s = 0; s < N; s++) {
			const __m256i sum = q8_group(wq + b * 32, aw, x[s].q + b * 32);

			acc[s][(b >> 3) & 1] = _mm256_fmadd_ps(
			    _mm256_cvtepi32_ps(sum), _mm256_mul_ps(d, _mm256_loadu_ps(x[s].d + b)),
			    acc[s][(b >> 3) & 1]);
		}
	}
#pragma GCC unroll 2
	for (int s = 0; s < N; s++)
		y[s * ldy] =
		    finish_row(COLI_DTYPE_Q8_0, acc[s][0], acc[s][1], wq, dw, &x[s], b, nb);
}

static void gemv_q8(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                    int row1)
{
	for (int r = row0; r < row1; r++)
		q8_row_n(w, x, 1, r, y + (r - row0), 0);
}

/* Q8_0 at S > 1 below the panels: blocks of Q8_RB rows (64 KiB of quants at
 * K = 2048) stay in L2 while the activations pass over them two at a time
 * (q8_row_n), an odd one out on gemv_q8. On the Zen 4 VM (`coli bench kernels
 * --isa avx2 --threads 2`) the tile path it replaces took 2.4x a decode
 * GEMV's time at S = 2; on an AVX2-only EPYC VM (`coli bench kernels --dtypes
 * q8 --threads 2`, three runs) at S = 4 it took 2.53-3.01x, the blocks
 * 2.03-2.19x (the tile's 4 x 2 x 2 accumulators fill AVX2's 16 registers). */
#define Q8_RB         32
#define Q8_TILE_MIN_S 8 /* the tile path from here, where the panels start too */

static void gemm_q8_blocked(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                            size_t ldy, int row0, int row1)
{
	for (int r = row0; r < row1; r += Q8_RB) {
		const int r1 = r + Q8_RB < row1 ? r + Q8_RB : row1;
		int s = 0;

		for (; s + 2 <= S; s += 2) {
			float *y0 = y + (size_t)s * ldy + (r - row0);

			for (int i = r; i < r1; i++)
				q8_row_n(w, &x[s], 2, i, y0 + (i - r), ldy);
		}
		if (s < S)
			gemv_q8(w, &x[s], y + (size_t)s * ldy + (r - row0), r, r1);
	}
}

/* ---------------- entry points ---------------- */

void coli_gemv_avx2(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                    int row1)
{
	switch (w->dtype) {
	case COLI_DTYPE_F32:
	case COLI_DTYPE_F16:
	case COLI_DTYPE_BF16: /* cpu/gemv/gemv_float_avx2.c */
		coli_gemm_float_avx2(w, x, 1, y, 0, row0, row1);
		return;
	case COLI_DTYPE_Q8_0:
		gemv_q8(w, x, y, row0, row1);
		return;
	case COLI_DTYPE_Q4_0:
		gemv_q4(w, x, y, row0, row1);
		return;
	default: /* the block types: cpu/kquant/kquant_avx2.c, else the reference */
		if (coli_kq_gemv_avx2(w, x, y, row0, row1))
			coli_kq_gemv_ref(w, x, y, row0, row1);
		return;
	}
}

/* Each group of COLI_GEMM_ROWS rows is read from memory once and reused from
 * L1 for the S activations; per (row, s) the computation is coli_gemv's, so
 * the bits are too. */
void coli_gemm_avx2(const struct coli_mat *w, const struct coli_act *x, int S, float *y, int ldy,
                    int row0, int row1)
{
	/* GGUF's block types: each row unpacked once for two activations
	 * (cpu/kquant/kquant_avx2.c) */
	if (coli_dtype_is_block(w->dtype) && !coli_kq_gemm_avx2(w, x, S, y, ldy, row0, row1))
		return;
	/* one activation (a decode step): the decode GEMVs, 1.6-1.8x the tile
	 * path on a Zen 3 (docs/perf/kernels.md) */
	if (w->dtype == COLI_DTYPE_Q8_0) {
		if (S == 1) {
			gemv_q8(w, x, y, row0, row1);
		} else if (S < Q8_TILE_MIN_S) {
			gemm_q8_blocked(w, x, S, y, (size_t)ldy, row0, row1);
		} else { /* a batch: eight rows in a vector's lanes (cpu/gemv/gemm_panel.h),
			  * the rows past its panels on the tile path */
			const int r =
			    S >= COLI_PANEL_MIN_S_Q8_0_AVX2
			        ? coli_gemm_panel_avx2(w, x, S, y, (size_t)ldy, row0, row1)
			        : row0;

			if (r < row1)
				gemm_q8(w, x, S, y + (r - row0), (size_t)ldy, r, row1);
		}
		return;
	}
	if (w->dtype == COLI_DTYPE_Q4_0) {
		/* a large batch: eight rows in a vector's lanes
		 * (cpu/gemv/gemm_panel.h), the rows past its panels here */
		const int r = S >= COLI_PANEL_MIN_S_Q4_0
		                  ? coli_gemm_panel_avx2(w, x, S, y, (size_t)ldy, row0, row1)
		                  : row0;

		if (S == 1)
			gemv_q4(w, x, y, row0, row1);
		else if (r < row1)
			gemm_q4_blocked(w, x, S, y + (r - row0), (size_t)ldy, r, row1);
		return;
	}
	switch (w->dtype) {
	case COLI_DTYPE_F32:
	case COLI_DTYPE_F16:
	case COLI_DTYPE_BF16:
		coli_gemm_float_avx2(w, x, S, y, (size_t)ldy, row0, row1);
		return;
	default:
		break;
	}
	for (int r = row0; r < row1; r += COLI_GEMM_ROWS) {
		int r1 = r + COLI_GEMM_ROWS < row1 ? r + COLI_GEMM_ROWS : row1;
		for (int s = 0; s < S; s++)
			coli_gemv_avx2(w, &x[s], y + (size_t)s * ldy + (r - row0), r, r1);
	}
}
