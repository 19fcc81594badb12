/*
 * cpu/gemv_avx2.c — AVX2 + FMA + F16C kernels of THE CANONICAL REDUCTION
 * (cpu.h), bit-identical to cpu/gemv_ref.c. Compiled with -mavx2 -mfma
 * -mf16c and called only after the dispatcher's cpuid check.
 *
 * The 16 canonical lanes of a row live in two ymm registers:
 *
 *   acc[0] = lanes 0..7,  acc[1] = lanes 8..15          (fp32)
 *
 * Float weights (F32/F16/BF16): the unit is the element, so 16 consecutive
 * elements k..k+15 (k % 16 == 0) are exactly one fmadd into acc[0] (elements
 * k..k+7) and one into acc[1]. Four rows run together so eight independent
 * FMA chains hide the FMA latency; x is loaded once for the four.
 *
 * Quantized weights (Q8_0/Q4_0): the unit is the 32-block, so 8 consecutive
 * blocks b..b+7 (b % 8 == 0) are one fmadd into acc[(b / 8) % 2]:
 *
 *   1. int32 partial dot products, 4 per block, two blocks per ymm:
 *        Q8_0: maddubs(|w|, sign(x, w)) then madd with 1s gives 8 int32 of
 *              one block; the two 128-bit halves of two blocks are added
 *              into [blk A: 4 | blk B: 4].
 *        Q4_0: 32 bytes of quants = 2 blocks; low nibbles [A 0..15 | B 0..15]
 *              meet x rearranged as [xA 0..15 | xB 0..15], high nibbles meet
 *              [xA 16..31 | xB 16..31]; maddubs(unsigned nibble, signed x)
 *              summed in int16 (|.| <= 7620), madd with 1s -> [A: 4 | B: 4].
 *              The -8 offset is applied afterwards: s = dot(nib, xq) - 8*qsum.
 *   2. three hadd_epi32 fold 4 such vectors into the 8 block sums (in the
 *      order 0 2 4 6 | 1 3 5 7), one vpermd puts them in block order;
 *   3. sumf = (float)s (exact: |s| < 2^24), scale = fp16->f32(dw) * dx
 *      (one fp32 rounding, like the reference), acc = fmadd(sumf, scale, acc).
 *
 * The integer sums are exact, so the order in which the partial products are
 * added does not matter; the fp32 operations are the reference's, lane by lane.
 * A trailing group of fewer than 8 blocks (or 16 elements) is finished in
 * scalar code on the stored lanes; the fold is the canonical tree.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/cpu_internal.h"

#define INLINE static inline __attribute__((always_inline))

/* Fold acc[0..1] (lanes 0..15) by the canonical tree: h=8 is acc0 + acc1,
 * h=4 adds the 128-bit halves, h=2 and h=1 finish in one xmm. */
INLINE float fold2(__m256 a0, __m256 a1)
{
	__m256 v8 = _mm256_add_ps(a0, a1);
	__m128 v4 = _mm_add_ps(_mm256_castps256_ps128(v8), _mm256_extractf128_ps(v8, 1));
	__m128 v2 = _mm_add_ps(v4, _mm_movehl_ps(v4, v4));
	__m128 v1 = _mm_add_ss(v2, _mm_movehdup_ps(v2));
	return _mm_cvtss_f32(v1);
}

/* ---------------- float weights ---------------- */

/* 16 weights at w (element type by dt) as two fp32 vectors. */
INLINE void load16(enum coli_dtype dt, const void *w, size_t k, __m256 *lo, __m256 *hi)
{
	if (dt == COLI_DTYPE_F32) {
		*lo = _mm256_loadu_ps((const float *)w + k);
		*hi = _mm256_loadu_ps((const float *)w + k + 8);
	} else if (dt == COLI_DTYPE_F16) {
		*lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)w + k)));
		*hi = _mm256_cvtph_ps(
		    _mm_loadu_si128((const __m128i *)((const uint16_t *)w + k + 8)));
	} else {
		__m256i v = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k));
		__m256i a = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(v));
		__m256i b = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(v, 1));
		*lo = _mm256_castsi256_ps(_mm256_slli_epi32(a, 16));
		*hi = _mm256_castsi256_ps(_mm256_slli_epi32(b, 16));
	}
}

INLINE float widen1(enum coli_dtype dt, const void *w, size_t k)
{
	if (dt == COLI_DTYPE_F32)
		return ((const float *)w)[k];
	if (dt == COLI_DTYPE_F16)
		return coli_fp16_to_f32(((const uint16_t *)w)[k]);
	return coli_bf16_to_f32(((const uint16_t *)w)[k]);
}

/* y[0..R) = rows r..r+R of a float-type matrix; R is 1 or 4. */
INLINE void float_rows(enum coli_dtype dt, const struct coli_mat *w, const float *x, float *y,
                       int r, const int R)
{
	const size_t K = (size_t)w->cols, K16 = K & ~(size_t)15;
	const size_t esz = dt == COLI_DTYPE_F32 ? 4 : 2;
	const char *base = (const char *)w->data + (size_t)r * K * esz;
	__m256 acc[4][2];

	for (int i = 0; i < R; i++)
		acc[i][0] = acc[i][1] = _mm256_setzero_ps();
	for (size_t k = 0; k < K16; k += 16) {
		__m256 x0 = _mm256_loadu_ps(x + k), x1 = _mm256_loadu_ps(x + k + 8);
		for (int i = 0; i < R; i++) {
			__m256 lo, hi;
			load16(dt, base + i * K * esz, k, &lo, &hi);
			acc[i][0] = _mm256_fmadd_ps(lo, x0, acc[i][0]);
			acc[i][1] = _mm256_fmadd_ps(hi, x1, acc[i][1]);
		}
	}
	for (int i = 0; i < R; i++) {
		if (K16 == K) {
			y[i] = fold2(acc[i][0], acc[i][1]);
			continue;
		}
		float l[16];
		_mm256_storeu_ps(l, acc[i][0]);
		_mm256_storeu_ps(l + 8, acc[i][1]);
		for (size_t k = K16; k < K; k++)
			l[k % 16] = fmaf(widen1(dt, base + i * K * esz, k), x[k], l[k % 16]);
		y[i] = coli_lanes_fold(l);
	}
}

static void gemv_float(enum coli_dtype dt, const struct coli_mat *w, const float *x, float *y,
                       int row0, int row1)
{
	int r = row0;

	for (; r + 4 <= row1; r += 4)
		float_rows(dt, w, x, y + (r - row0), r, 4);
	for (; r < row1; r++)
		float_rows(dt, w, x, y + (r - row0), r, 1);
}

/* ---------------- quantized weights ---------------- */

/* hadd tree: p[i] = [blk 2i: 4 partials | blk 2i+1: 4 partials] -> 8 block
 * sums in block order. */
INLINE __m256i reduce8(__m256i p0, __m256i p1, __m256i p2, __m256i p3)
{
	__m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
	/* h = [b0 b2 b4 b6 | b1 b3 b5 b7] */
	return _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Exact int32 sums of blocks b..b+7 of a Q8_0 row (wq at block b). */
INLINE __m256i q8_sums8(const int8_t *wq, const int8_t *xq)
{
	const __m256i ones = _mm256_set1_epi16(1);
	__m256i p[4];

	for (int i = 0; i < 4; i++) {
		__m256i wa = _mm256_loadu_si256((const __m256i *)(wq + 64 * i));
		__m256i wb = _mm256_loadu_si256((const __m256i *)(wq + 64 * i + 32));
		__m256i xa = _mm256_loadu_si256((const __m256i *)(xq + 64 * i));
		__m256i xb = _mm256_loadu_si256((const __m256i *)(xq + 64 * i + 32));
		/* |w| * (x * sign(w)) = w * x; pairs <= 2*128*127 fit in int16 */
		__m256i pa = _mm256_madd_epi16(
		    _mm256_maddubs_epi16(_mm256_sign_epi8(wa, wa), _mm256_sign_epi8(xa, wa)), ones);
		__m256i pb = _mm256_madd_epi16(
		    _mm256_maddubs_epi16(_mm256_sign_epi8(wb, wb), _mm256_sign_epi8(xb, wb)), ones);
		p[i] = _mm256_add_epi32(_mm256_permute2x128_si256(pa, pb, 0x20),
		                        _mm256_permute2x128_si256(pa, pb, 0x31));
	}
	return reduce8(p[0], p[1], p[2], p[3]);
}

/* Exact int32 sums of blocks b..b+7 of a Q4_0 row (wq at block b, 16 B/block),
 * including the -8 offset through qsum. */
INLINE __m256i q4_sums8(const uint8_t *wq, const int8_t *xq, const int32_t *qsum)
{
	const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0f);
	__m256i p[4];

	for (int i = 0; i < 4; i++) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(wq + 32 * i));
		__m256i lo = _mm256_and_si256(v, m4);
		__m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
		__m256i xa = _mm256_loadu_si256((const __m256i *)(xq + 64 * i));
		__m256i xb = _mm256_loadu_si256((const __m256i *)(xq + 64 * i + 32));
		__m256i xlo = _mm256_permute2x128_si256(xa, xb, 0x20);
		__m256i xhi = _mm256_permute2x128_si256(xa, xb, 0x31);
		__m256i s16 =
		    _mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo), _mm256_maddubs_epi16(hi, xhi));
		p[i] = _mm256_madd_epi16(s16, ones);
	}
	__m256i s = reduce8(p[0], p[1], p[2], p[3]);
	__m256i qs = _mm256_loadu_si256((const __m256i *)qsum);
	return _mm256_sub_epi32(s, _mm256_slli_epi32(qs, 3));
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

INLINE float quant_row(enum coli_dtype dt, const struct coli_mat *w, const struct coli_act *x,
                       int r)
{
	const int nb = w->cols / COLI_QBLOCK, nb8 = nb & ~7;
	const size_t rb = dt == COLI_DTYPE_Q8_0 ? (size_t)w->cols : (size_t)w->cols / 2;
	const uint8_t *wrow = (const uint8_t *)w->data + (size_t)r * rb;
	const uint16_t *dw = w->scales + (size_t)r * nb;
	__m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};

	for (int b = 0; b < nb8; b += 8) {
		__m256i s = dt == COLI_DTYPE_Q8_0
		                ? q8_sums8((const int8_t *)wrow + b * 32, x->q + b * 32)
		                : q4_sums8(wrow + b * 16, x->q + b * 32, x->qsum + b);
		__m256 sc =
		    _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dw + b))),
		                  _mm256_loadu_ps(x->d + b));
		acc[(b >> 3) & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), sc, acc[(b >> 3) & 1]);
	}
	if (nb8 == nb)
		return fold2(acc[0], acc[1]);
	float l[16];
	_mm256_storeu_ps(l, acc[0]);
	_mm256_storeu_ps(l + 8, acc[1]);
	for (int b = nb8; b < nb; b++) {
		float sc = coli_fp16_to_f32(dw[b]) * x->d[b];
		l[b % 16] = fmaf((float)block_sum1(dt, wrow, x->q, b), sc, l[b % 16]);
	}
	return coli_lanes_fold(l);
}

static void gemv_quant(enum coli_dtype dt, const struct coli_mat *w, const struct coli_act *x,
                       float *y, int row0, int row1)
{
	for (int r = row0; r < row1; r++)
		y[r - row0] = quant_row(dt, w, x, r);
}

/* ---------------- entry points ---------------- */

void coli_gemv_avx2(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                    int row1)
{
	switch (w->dtype) {
	case COLI_DTYPE_F32:
		gemv_float(COLI_DTYPE_F32, w, x->f, y, row0, row1);
		return;
	case COLI_DTYPE_F16:
		gemv_float(COLI_DTYPE_F16, w, x->f, y, row0, row1);
		return;
	case COLI_DTYPE_BF16:
		gemv_float(COLI_DTYPE_BF16, w, x->f, y, row0, row1);
		return;
	case COLI_DTYPE_Q8_0:
		gemv_quant(COLI_DTYPE_Q8_0, w, x, y, row0, row1);
		return;
	case COLI_DTYPE_Q4_0:
		gemv_quant(COLI_DTYPE_Q4_0, w, x, y, row0, row1);
		return;
	}
}

/* Each group of COLI_GEMM_ROWS rows is read from memory once and reused from
 * L1 for the S activations; per (row, s) the computation is coli_gemv's, so
 * the bits are too. */
void coli_gemm_avx2(const struct coli_mat *w, const struct coli_act *x, int S, float *y, int ldy,
                    int row0, int row1)
{
	for (int r = row0; r < row1; r += COLI_GEMM_ROWS) {
		int r1 = r + COLI_GEMM_ROWS < row1 ? r + COLI_GEMM_ROWS : row1;
		for (int s = 0; s < S; s++)
			coli_gemv_avx2(w, &x[s], y + (size_t)s * ldy + (r - row0), r, r1);
	}
}
