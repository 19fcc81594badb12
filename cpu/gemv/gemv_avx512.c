/*
 * cpu/gemv/gemv_avx512.c — AVX-512 (F, BW, VL, DQ, VNNI) kernels of THE CANONICAL
 * REDUCTION (cpu.h), bit-identical to cpu/gemv/gemv_ref.c. Called only when cpuid
 * reports all of those (cpu/dispatch.c).
 *
 * One zmm holds the 16 canonical lanes of a row:   acc = lanes 0..15 (fp32)
 *
 * Float weights: 16 consecutive elements k..k+15 (k % 16 == 0) are one fmadd
 * into acc; four rows run together for four independent FMA chains, and up
 * to four activations over each widened weight vector (float_tile).
 *
 * Quantized weights: 16 consecutive blocks b..b+15 (b % 16 == 0, 512
 * elements) are one fmadd into acc:
 *
 *   1. int32 partial dot products with vpdpbusd (u8 x s8, 4 products per
 *      int32), arranged as t[j] = [blk 4j: 4 | blk 4j+1: 4 | blk 4j+2: 4 |
 *      blk 4j+3: 4] (one 128-bit lane per block):
 *        Q8_0: vpdpbusd needs an unsigned operand: w + 128 (= w ^ 0x80) meets
 *              the signed activations; sum((w+128)*x) = sum(w*x) + 128*qsum.
 *              A zmm of weights holds 2 blocks (8 int32 each); adding the
 *              matching 128-bit lanes of two such results gives t[j].
 *        Q4_0: 64 bytes of quants = 4 blocks; low nibbles [A 0..15 | B | C |
 *              D] meet x rearranged as [xA 0..15 | xB 0..15 | xC | xD], high
 *              nibbles meet [xA 16..31 | ...]; the nibbles are the unsigned
 *              operand, so sum(nib*x) - 8*qsum is the block sum.
 *   2. three emulated hadds (shuffle_ps even/odd + add, within 128-bit lanes)
 *      turn t[0..3] into 16 block sums in the order 4j+k at position 4k+j;
 *      one vpermd restores block order; then the qsum correction;
 *   3. acc = fmadd((float)s, fp16->f32(dw) * dx, acc) — the reference's fp32
 *      operations, lane by lane.
 *
 * The quantized work is cut into tiles of R rows (4, or 1 for leftovers) x T
 * activations (1..4; coli_gemv is T = 1), as in gemv_avx2.c: coli_gemm walks
 * row tiles outermost so a tile's rows, read from memory once, stay in L1
 * while all S activations pass over them, and each row prefetches the same
 * position one tile ahead.
 *
 * Q4_0 at S = 1 (decode) takes its own path, gemv_q4z: the activation is
 * rearranged once a call and the rows run one at a time as one prefetched
 * stream, lanes left in the hadd order (step 2 without its vpermd); on the
 * H200 host's Xeon it reads 0.73-0.81 of the host's bandwidth where the
 * 4-row tile read 0.65-0.70 (docs/perf/kernels.md).
 *
 * A trailing group of fewer than 16 blocks uses masked loads (zeros past the
 * end) and a masked fmadd that leaves the unused lanes untouched, exactly like
 * the reference, which never visits them. Everything in int32 is exact, so
 * only the fp32 steps need to follow the reference, and they do.
 */
#include <immintrin.h>
#include <math.h>

#include "cpu/cpu_internal.h"

#define INLINE static inline __attribute__((always_inline))

/* The canonical fold of 16 lanes: 8, 4, 2, 1. */
INLINE float fold16(__m512 a)
{
	__m256 v8 = _mm256_add_ps(_mm512_castps512_ps256(a),
	                          _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
	__m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
	__m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
	__m128 v1 = _mm_add_ss(v2, _mm_movehdup_ps(v2));
	return _mm_cvtss_f32(v1);
}

/* ---------------- float weights ---------------- */

INLINE __m512 load16(enum coli_dtype dt, const void *w, size_t k)
{
	if (dt == COLI_DTYPE_F32)
		return _mm512_loadu_ps((const float *)w + k);
	__m256i v = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k));
	if (dt == COLI_DTYPE_F16)
		return _mm512_cvtph_ps(v);
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

INLINE float widen1(enum coli_dtype dt, const void *w, size_t k)
{
	if (dt == COLI_DTYPE_F32)
		return ((const float *)w)[k];
	if (dt == COLI_DTYPE_F16)
		return coli_fp16_to_f32(((const uint16_t *)w)[k]);
	return coli_bf16_to_f32(((const uint16_t *)w)[k]);
}

/* Rows r..r+R (1 or 4) of a float-type matrix x activations x[0..T) (1..4)
 * into y[t * ldy + i]: sixteen lanes of fmadd along the row, then the
 * canonical fold (the reference's trailing columns into their lanes first),
 * each weight vector widened once for the T activations. The unroll pragmas
 * keep the accumulators in registers: without them gcc leaves the row loop
 * rolled and the accumulators in memory (a decode step of the demo model's
 * bf16 weights 1.4-1.7x slower). */
INLINE void float_tile(enum coli_dtype dt, const struct coli_mat *w, const struct coli_act *x,
                       float *y, size_t ldy, int r, const int R, const int T)
{
	const size_t K = (size_t)w->cols, K16 = K & ~(size_t)15;
	const size_t esz = dt == COLI_DTYPE_F32 ? 4 : 2;
	const char *base = (const char *)w->data + (size_t)r * K * esz;
	__m512 acc[4][4];

#pragma GCC unroll 4
	for (int i = 0; i < R; i++)
#pragma GCC unroll 4
		for (int t = 0; t < T; t++)
			acc[i][t] = _mm512_setzero_ps();
	for (size_t k = 0; k < K16; k += 16) {
		__m512 wv[4];

#pragma GCC unroll 4
		for (int i = 0; i < R; i++) {
			/* the next tile's row at this offset (the rows follow in memory) */
			_mm_prefetch(base + (i + R) * K * esz + k * esz, _MM_HINT_T0);
			wv[i] = load16(dt, base + i * K * esz, k);
		}
#pragma GCC unroll 4
		for (int t = 0; t < T; t++) {
			const __m512 xv = _mm512_loadu_ps(x[t].f + k);

#pragma GCC unroll 4
			for (int i = 0; i < R; i++)
				acc[i][t] = _mm512_fmadd_ps(wv[i], xv, acc[i][t]);
		}
	}
	for (int i = 0; i < R; i++)
		for (int t = 0; t < T; t++) {
			if (K16 == K) {
				y[t * ldy + i] = fold16(acc[i][t]);
				continue;
			}
			float l[16];
			_mm512_storeu_ps(l, acc[i][t]);
			for (size_t k = K16; k < K; k++)
				l[k % 16] =
				    fmaf(widen1(dt, base + i * K * esz, k), x[t].f[k], l[k % 16]);
			y[t * ldy + i] = coli_lanes_fold(l);
		}
}

/* Rows [row0, row1) x S activations: tiles of 4 rows (1 for the leftovers)
 * x 4 activations (1..3 for the rest), rows outermost so a tile's rows stay
 * in L1 while every activation passes over them. */
INLINE void float_row_tile(enum coli_dtype dt, const struct coli_mat *w, const struct coli_act *x,
                           int S, float *y, size_t ldy, int r, const int R)
{
	int s = 0;

	for (; s + 4 <= S; s += 4)
		float_tile(dt, w, x + s, y + (size_t)s * ldy, ldy, r, R, 4);
	if (S - s == 3)
		float_tile(dt, w, x + s, y + (size_t)s * ldy, ldy, r, R, 3);
	else if (S - s == 2)
		float_tile(dt, w, x + s, y + (size_t)s * ldy, ldy, r, R, 2);
	else if (S - s == 1)
		float_tile(dt, w, x + s, y + (size_t)s * ldy, ldy, r, R, 1);
}

INLINE void gemm_float(enum coli_dtype dt, const struct coli_mat *w, const struct coli_act *x,
                       int S, float *y, size_t ldy, int row0, int row1)
{
	int r = row0;

	for (; r + 4 <= row1; r += 4)
		float_row_tile(dt, w, x, S, y + (r - row0), ldy, r, 4);
	for (; r < row1; r++)
		float_row_tile(dt, w, x, S, y + (r - row0), ldy, r, 1);
}

/* ---------------- quantized weights ---------------- */

/* Per 128-bit lane: [a0+a1, a2+a3, b0+b1, b2+b3] (int32). */
INLINE __m512i hadd32(__m512i a, __m512i b)
{
	__m512 fa = _mm512_castsi512_ps(a), fb = _mm512_castsi512_ps(b);
	__m512i ev = _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, _MM_SHUFFLE(2, 0, 2, 0)));
	__m512i od = _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, _MM_SHUFFLE(3, 1, 3, 1)));
	return _mm512_add_epi32(ev, od);
}

/* t[j] lane k = 4 partials of block 4j+k  ->  16 block sums in block order. */
INLINE __m512i reduce16(__m512i t0, __m512i t1, __m512i t2, __m512i t3)
{
	__m512i h = hadd32(hadd32(t0, t1), hadd32(t2, t3)); /* pos 4k+j = blk 4j+k */
	const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
	return _mm512_permutexvar_epi32(idx, h);
}

/* Byte mask of the first `bytes` (0..64) bytes of a zmm. */
INLINE __mmask64 bmask(int bytes)
{
	return bytes <= 0 ? 0 : bytes >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << bytes) - 1);
}

/* Exact int32 sums of blocks b..b+nblk-1 (nblk 1..16; zeros past nblk) of a
 * Q8_0 row (wq and xq at block b). */
INLINE __m512i q8_sums16(const int8_t *wq, const int8_t *xq, const int32_t *qsum, int nblk)
{
	const __m512i off = _mm512_set1_epi8((char)0x80);
	__m512i p[8], t[4];

	for (int i = 0; i < 8; i++) {
		__mmask64 m = bmask((nblk - 2 * i) * 32);
		__m512i wv = _mm512_maskz_loadu_epi8(m, wq + 64 * i);
		__m512i xv = _mm512_maskz_loadu_epi8(m, xq + 64 * i);
		/* masked-off bytes: (0 ^ 0x80) * 0 = 0 */
		p[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(wv, off), xv);
	}
	for (int j = 0; j < 4; j++) {
		/* p = [blk 2i: L0 L1 | blk 2i+1: L2 L3] -> [2i | 2i+1 | 2i+2 | 2i+3] */
		__m512i a = p[2 * j], b = p[2 * j + 1];
		t[j] = _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
		                        _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
	}
	__m512i s = reduce16(t[0], t[1], t[2], t[3]);
	__m512i qs = _mm512_maskz_loadu_epi32((__mmask16)((1u << nblk) - 1), qsum);
	return _mm512_sub_epi32(s, _mm512_slli_epi32(qs, 7));
}

/* The same for a Q4_0 row (wq at block b, 16 B per block). */
INLINE __m512i q4_sums16(const uint8_t *wq, const int8_t *xq, const int32_t *qsum, int nblk)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	__m512i t[4];

	for (int i = 0; i < 4; i++) {
		__m512i v = _mm512_maskz_loadu_epi8(bmask((nblk - 4 * i) * 16), wq + 64 * i);
		__m512i lo = _mm512_and_si512(v, m4);
		__m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
		__m512i xa = _mm512_maskz_loadu_epi8(bmask((nblk - 4 * i) * 32), xq + 128 * i);
		__m512i xb =
		    _mm512_maskz_loadu_epi8(bmask((nblk - 4 * i - 2) * 32), xq + 128 * i + 64);
		/* xa = [A 0..15 | A 16..31 | B 0..15 | B 16..31], xb likewise C, D */
		__m512i xlo = _mm512_shuffle_i64x2(xa, xb, _MM_SHUFFLE(2, 0, 2, 0));
		__m512i xhi = _mm512_shuffle_i64x2(xa, xb, _MM_SHUFFLE(3, 1, 3, 1));
		__m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xlo);
		t[i] = _mm512_dpbusd_epi32(acc, hi, xhi);
	}
	__m512i s = reduce16(t[0], t[1], t[2], t[3]);
	__m512i qs = _mm512_maskz_loadu_epi32((__mmask16)((1u << nblk) - 1), qsum);
	return _mm512_sub_epi32(s, _mm512_slli_epi32(qs, 3));
}

/* acc (+)= sums * (dw * dx) on the first nblk lanes; the others untouched. */
INLINE __m512 scale_fma(__m512i s, const uint16_t *dw, const float *dx, int nblk, __m512 acc)
{
	__mmask16 m = (__mmask16)((1u << nblk) - 1);
	__m512 w = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, dw));
	__m512 sc = _mm512_mul_ps(w, _mm512_maskz_loadu_ps(m, dx));
	return _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc, m);
}

/* A tile is R rows (1..QROWS) x T activations (1..QACTS); the R*T zmm
 * accumulators stay in registers. Prefetch runs one tile ahead (the next R
 * rows follow these in memory), as in gemv_avx2.c. */
#define QROWS 4
#define QACTS 4

/* Blocks b..b+n-1 (n 1..16) of the tile into acc[i][s]: the rows' quants
 * come from memory once, the other activations find them in L1. */
INLINE void quant_group(const enum coli_dtype dt, const uint8_t *const *wrow,
                        const uint16_t *const *dw, size_t bpb, size_t pf, const struct coli_act *x,
                        const int T, const int R, int b, int n, __m512 acc[QROWS][QACTS])
{
#pragma GCC unroll 4
	for (int i = 0; i < R; i++) {
		const uint8_t *wq = wrow[i] + (size_t)b * bpb;
		const char *p = (const char *)wq + pf;
#pragma GCC unroll 8
		for (size_t l = 0; l < 16 * bpb; l += 64)
			_mm_prefetch(p + l, _MM_HINT_T0);
#pragma GCC unroll 4
		for (int s = 0; s < T; s++) {
			__m512i sum =
			    dt == COLI_DTYPE_Q8_0
			        ? q8_sums16((const int8_t *)wq, x[s].q + b * 32, x[s].qsum + b, n)
			        : q4_sums16(wq, x[s].q + b * 32, x[s].qsum + b, n);
			acc[i][s] = scale_fma(sum, dw[i] + b, x[s].d + b, n, acc[i][s]);
		}
	}
}

/* Y[s][i] = rows r..r+R against activations x[0..T); y at row r of
 * activation 0, ldy between activations. */
INLINE void quant_tile(const enum coli_dtype dt, const struct coli_mat *w, const struct coli_act *x,
                       const int T, float *y, size_t ldy, int r, const int R)
{
	const int nb = w->cols / COLI_QBLOCK, nb16 = nb & ~15;
	const size_t bpb = dt == COLI_DTYPE_Q8_0 ? 32 : 16;
	const size_t pf = (size_t)R * nb * bpb;
	const uint8_t *wrow[QROWS];
	const uint16_t *dw[QROWS];
	__m512 acc[QROWS][QACTS];
	int b = 0;

#pragma GCC unroll 4
	for (int i = 0; i < R; i++) {
		wrow[i] = (const uint8_t *)w->data + (size_t)(r + i) * nb * bpb;
		dw[i] = w->scales + (size_t)(r + i) * nb;
#pragma GCC unroll 4
		for (int s = 0; s < T; s++)
			acc[i][s] = _mm512_setzero_ps();
	}
	for (; b < nb16; b += 16)
		quant_group(dt, wrow, dw, bpb, pf, x, T, R, b, 16, acc);
	if (b < nb)
		quant_group(dt, wrow, dw, bpb, pf, x, T, R, b, nb - b, acc);
#pragma GCC unroll 4
	for (int i = 0; i < R; i++)
#pragma GCC unroll 4
		for (int s = 0; s < T; s++)
			y[(size_t)s * ldy + i] = fold16(acc[i][s]);
}

/* One tile of R rows (1..QROWS) x T activations (1..QACTS). */
INLINE void quant_tile_any(const enum coli_dtype dt, const struct coli_mat *w,
                           const struct coli_act *x, int T, float *y, size_t ldy, int r, int R)
{
	if (R == QROWS) {
		switch (T) {
		case 1:
			quant_tile(dt, w, x, 1, y, ldy, r, QROWS);
			return;
		case 2:
			quant_tile(dt, w, x, 2, y, ldy, r, QROWS);
			return;
		case 3:
			quant_tile(dt, w, x, 3, y, ldy, r, QROWS);
			return;
		default:
			quant_tile(dt, w, x, 4, y, ldy, r, QROWS);
			return;
		}
	}
	for (int i = 0; i < R; i++) {
		switch (T) {
		case 1:
			quant_tile(dt, w, x, 1, y + i, ldy, r + i, 1);
			break;
		case 2:
			quant_tile(dt, w, x, 2, y + i, ldy, r + i, 1);
			break;
		case 3:
			quant_tile(dt, w, x, 3, y + i, ldy, r + i, 1);
			break;
		default:
			quant_tile(dt, w, x, 4, y + i, ldy, r + i, 1);
			break;
		}
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
 * As gemv_avx2.c's gemv_q4: the activation rearranged once per call, rows
 * one at a time as one sequential, software-prefetched stream, and the row's
 * lanes left in the order reduce16's hadds produce them (position 4k + j
 * holds block 4j + k of a group), so the inner loop has no permute of the
 * sums: the prepared 8 * qsum and dx, and the row's fp16 scales (one vpermw),
 * are put in that order instead, and the accumulator is put back in block
 * order once per row. Every fp32 operation is scale_fma's, lane by lane; a
 * trailing group of fewer than 16 blocks is quant_group's, on the lanes in
 * block order. The tile path (above) stays for S > 1 and K > 16384. */
#define Q4Z_GROUPS 32 /* groups of 16 blocks prepared: K <= 16384 */

struct q4z_prep {
	__m512i x[Q4Z_GROUPS][8]; /* per 4 blocks: [xlo, xhi] as q4_sums16 pairs them */
	__m512i qs8[Q4Z_GROUPS];  /* 8 * qsum, hadd order */
	__m512 dx[Q4Z_GROUPS];    /* block scales, hadd order */
};

/* hadd order: position 4k + j holds block 4j + k (its own inverse) */
static const int32_t q4z_ord32[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
static const int16_t q4z_ord16[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

static void q4z_prep(struct q4z_prep *p, const struct coli_act *x, int ng)
{
	const __m512i ord = _mm512_loadu_si512(q4z_ord32);

	for (int g = 0; g < ng; g++) {
		const int8_t *xq = x->q + (size_t)g * 512;

		for (int i = 0; i < 4; i++) {
			__m512i xa = _mm512_loadu_si512(xq + 128 * i);
			__m512i xb = _mm512_loadu_si512(xq + 128 * i + 64);

			p->x[g][2 * i] = _mm512_shuffle_i64x2(xa, xb, _MM_SHUFFLE(2, 0, 2, 0));
			p->x[g][2 * i + 1] = _mm512_shuffle_i64x2(xa, xb, _MM_SHUFFLE(3, 1, 3, 1));
		}
		p->qs8[g] = _mm512_slli_epi32(
		    _mm512_permutexvar_epi32(ord, _mm512_loadu_si512(x->qsum + g * 16)), 3);
		p->dx[g] = _mm512_permutexvar_ps(ord, _mm512_loadu_ps(x->d + g * 16));
	}
}

/* Blocks 16g..16g+15 of one row into acc (lanes in hadd order). */
INLINE __m512 q4z_group(const uint8_t *wq, const uint16_t *dw, const struct q4z_prep *p, int g,
                        __m512 acc)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	const __m256i ord16 = _mm256_loadu_si256((const __m256i *)q4z_ord16);
	__m512i t[4];

	for (int i = 0; i < 4; i++) {
		__m512i v = _mm512_loadu_si512(wq + 64 * i);
		__m512i lo = _mm512_and_si512(v, m4);
		__m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);

		t[i] = _mm512_dpbusd_epi32(
		    _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, p->x[g][2 * i]), hi,
		    p->x[g][2 * i + 1]);
	}
	__m512i s = _mm512_sub_epi32(hadd32(hadd32(t[0], t[1]), hadd32(t[2], t[3])), p->qs8[g]);
	__m256i h = _mm256_permutexvar_epi16(ord16, _mm256_loadu_si256((const __m256i *)dw));
	__m512 sc = _mm512_mul_ps(_mm512_cvtph_ps(h), p->dx[g]);

	return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc);
}

/* y[0] = row r against the prepared activation (and x for the tail). */
INLINE float q4z_row(const struct coli_mat *w, const struct q4z_prep *p, const struct coli_act *x,
                     int r)
{
	const int nb = w->cols / COLI_QBLOCK, ng = nb / 16;
	const uint8_t *wq = (const uint8_t *)w->data + (size_t)r * nb * 16;
	const uint16_t *dw = w->scales + (size_t)r * nb;
	const __m512i unord = _mm512_loadu_si512(q4z_ord32);
	__m512 acc = _mm512_setzero_ps();

	for (int g = 0; g < ng; g++) {
		coli_q4_prefetch16(wq + (size_t)g * 256);
		acc = q4z_group(wq + (size_t)g * 256, dw + g * 16, p, g, acc);
	}
	acc = _mm512_permutexvar_ps(unord, acc);
	if (ng * 16 < nb) { /* the tile path's masked group */
		const int b = ng * 16, n = nb - b;
		__m512i sum = q4_sums16(wq + (size_t)b * 16, x->q + b * 32, x->qsum + b, n);

		acc = scale_fma(sum, dw + b, x->d + b, n, acc);
	}
	return fold16(acc);
}

static void gemv_q4z(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                     int row1)
{
	const int ng = w->cols / COLI_QBLOCK / 16;
	struct q4z_prep p __attribute__((aligned(64)));

	if (ng > Q4Z_GROUPS) {
		gemm_q4(w, x, 1, y, 0, row0, row1);
		return;
	}
	q4z_prep(&p, x, ng);
	for (int r = row0; r < row1; r++)
		y[r - row0] = q4z_row(w, &p, x, r);
}

/* ---------------- entry points ---------------- */

void coli_gemv_avx512(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                      int row1)
{
	switch (w->dtype) {
	case COLI_DTYPE_F32:
		gemm_float(COLI_DTYPE_F32, w, x, 1, y, 0, row0, row1);
		return;
	case COLI_DTYPE_F16:
		gemm_float(COLI_DTYPE_F16, w, x, 1, y, 0, row0, row1);
		return;
	case COLI_DTYPE_BF16:
		gemm_float(COLI_DTYPE_BF16, w, x, 1, y, 0, row0, row1);
		return;
	case COLI_DTYPE_Q8_0:
		gemm_q8(w, x, 1, y, 0, row0, row1);
		return;
	case COLI_DTYPE_Q4_0:
		gemv_q4z(w, x, y, row0, row1);
		return;
	default: /* the block types: cpu/kquant/kquant_avx512.c, else the reference */
		if (coli_kq_gemv_avx512(w, x, y, row0, row1))
			coli_kq_gemv_ref(w, x, y, row0, row1);
		return;
	}
}

/* As in gemv_avx2.c: a row group read once, reused for the S activations. */
void coli_gemm_avx512(const struct coli_mat *w, const struct coli_act *x, int S, float *y, int ldy,
                      int row0, int row1)
{
	/* GGUF's block types: each row unpacked once for two activations
	 * (cpu/kquant/kquant_avx512.c) */
	if (coli_dtype_is_block(w->dtype) && !coli_kq_gemm_avx512(w, x, S, y, ldy, row0, row1))
		return;
	if (w->dtype == COLI_DTYPE_Q8_0) {
		/* a batch: sixteen rows in a vector's lanes, the rest here */
		const int r = S >= COLI_PANEL_MIN_S_Q8_0
		                  ? coli_gemm_panel16_avx512(w, x, S, y, (size_t)ldy, row0, row1)
		                  : row0;

		if (r < row1)
			gemm_q8(w, x, S, y + (r - row0), (size_t)ldy, r, row1);
		return;
	}
	if (w->dtype == COLI_DTYPE_Q4_0) {
		/* a large batch: sixteen rows in a vector's lanes
		 * (cpu/gemv/gemm_panel16_avx512.c), then eight (cpu/gemv/gemm_panel.h,
		 * VNNI), the rows past their panels here */
		int r = row0;

		if (S >= COLI_PANEL_MIN_S_Q4_0) {
			r = coli_gemm_panel16_avx512(w, x, S, y, (size_t)ldy, row0, row1);
			r = coli_gemm_panel_avx512(w, x, S, y + (r - row0), (size_t)ldy, r, row1);
		}

		if (S == 1)
			gemv_q4z(w, x, y, row0, row1);
		else if (r < row1)
			gemm_q4(w, x, S, y + (r - row0), (size_t)ldy, r, row1);
		return;
	}
	switch (w->dtype) {
	case COLI_DTYPE_F32:
		gemm_float(COLI_DTYPE_F32, w, x, S, y, (size_t)ldy, row0, row1);
		return;
	case COLI_DTYPE_F16:
		gemm_float(COLI_DTYPE_F16, w, x, S, y, (size_t)ldy, row0, row1);
		return;
	case COLI_DTYPE_BF16:
		gemm_float(COLI_DTYPE_BF16, w, x, S, y, (size_t)ldy, row0, row1);
		return;
	default:
		break;
	}
	for (int r = row0; r < row1; r += COLI_GEMM_ROWS) {
		int r1 = r + COLI_GEMM_ROWS < row1 ? r + COLI_GEMM_ROWS : row1;
		for (int s = 0; s < S; s++)
			coli_gemv_avx512(w, &x[s], y + (size_t)s * ldy + (r - row0), r, r1);
	}
}
