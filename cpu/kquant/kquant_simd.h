/*
 * cpu/kquant/kquant_simd.h — the vector forms of the block types' canonical
 * reduction (cpu/kquant/kquant.c), written once over 256-bit integer vectors and
 * compiled twice: cpu/kquant/kquant_avx2.c (AVX2: a dot of four u8 x s8 products is
 * vpmaddubsw then vpmaddwd with ones) and cpu/kquant/kquant_avx512.c (AVX-512 VNNI
 * on 256-bit registers: one vpdpbusd). Both give the same int32 lanes, since
 * every pair of products fits int16 (an unsigned weight byte <= 63 times an
 * activation >= -127: |pair| <= 16002), so maddubs never saturates.
 *
 * Covered: all eight types (kq_gemv returns -ENOTSUP for another, and the
 * caller runs the reference: the same bits, slower).
 *
 * A 256-element block (K-quants), or eight 32-element blocks (Q4_1, Q5_*),
 * is eight units (activation blocks b .. b+7, b % 8 == 0), and so fills one
 * 8-lane fp32 accumulator: the i-th such group of a row goes to acc0 or
 * acc1 by i % 2 (lanes 0-7 or 8-15 of the canonical 16). Per unit the dot
 * of weight quants with xq is kept as eight int32 partials; a transposing
 * hadd tree (kq_hsum8x8) turns the eight units' vectors into one vector of
 * the eight unit sums, which is scaled (vpmulld by the group scales: exact)
 * and converted; the fp32 steps are the reference's, lane by lane:
 * fmadd(A, d*dx) then fmadd(C, dmin*dx). Where a unit has two groups of 16
 * (Q2_K, Q3_K, Q6_K), on both ISAs, vpmaddubsw gives a unit's 16 int16 pair
 * sums (8 a group), two levels of vphaddw sum them in int16 and one
 * vpmaddwd multiplies each group's sum by its scale into int32
 * (kq_scaled_sum16: no int32 partials, no vpmulld); signed quants are made
 * unsigned by an offset: Q6_K's (q) pair sums are subtracted in int16 first
 * (the difference is the signed pair sum: |.| <= 8128), Q3_K's (q + 4) and
 * Q2_K's mins are taken from the activation's sums of 16 (kq_sums16), as
 * Q5_0's 16 * qsum is subtracted from its unit sums. A 32-block type's last 1-7 blocks (K not a
 * multiple of 256) take the reference's steps on the stored lanes.
 *
 * On VNNI kq_block takes three block forms of their own (cpu/kquant/kquant_vnni.h),
 * the same integers: Q4_K two units to a vector (kq_q4k_pairs_block, up to
 * KQ_NS activations a pass) and, at one activation, Q6_K's units into
 * int32 without the int16 tree's per-unit offset (kq_q6k_dot32_block) and
 * Q2_K two units to a 512-bit vector (kq_q2k_zmm_block), each from the
 * activation's preparation a call makes once (kq_prep).
 *
 * coli_gemm (S > 1) runs each row against four activations at a time, then
 * two, then one: the weights unpacked and the scales decoded once, the dots
 * and the fp32 steps per activation (so each y is coli_gemv's).
 *
 * The includer defines DOTACC(acc, u, s): acc + the int32 dots of four bytes.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "cpu/gemv/panel_unpack.h"
#include "cpu/simd_avx2.h"

#define KQ_INLINE static inline __attribute__((always_inline))

/* lane g = the sum of v[g]'s eight int32 */
KQ_INLINE __m256i kq_hsum8x8(const __m256i *v)
{
	__m256i t0 = _mm256_hadd_epi32(v[0], v[1]), t1 = _mm256_hadd_epi32(v[2], v[3]);
	__m256i t2 = _mm256_hadd_epi32(v[4], v[5]), t3 = _mm256_hadd_epi32(v[6], v[7]);
	__m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);

	return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20),
	                        _mm256_permute2x128_si256(u0, u1, 0x31));
}

/* The eight units' sums from their int16 pair sums (vpmaddubsw's 16 a
 * unit: lane 0 its elements 0..15, lane 1 16..31), each scaled: for the
 * two-group types on both ISAs, for Q4_K / Q5_K under KQ_HADD16 (AVX2's,
 * where a dot into int32 costs vpmaddubsw and vpmaddwd). kq_pairs2 is the
 * first level of vphaddw over units 2j and 2j+1 (taken as soon as both are
 * there: fewer registers live), kq_scaled_sum16 the second (a unit's four
 * pairs a lane, exact in int16 where |pair| <= 8191, which the callers
 * state), then vpmaddwd by the scales (sp03: [s0 s0 s1 s1 s2 s2 s3 s3] a
 * lane, the lane's own scale where a unit has two groups of 16; sp47 for
 * units 4..7) into int32, the lanes' halves added: lane u = the scaled sum
 * of unit u, the integers kq_hsum8x8 and vpmulld give. */
#define kq_pairs2(p0, p1) _mm256_hadd_epi16((p0), (p1))
KQ_INLINE __m256i kq_scaled_sum16(const __m256i *h, __m256i sp03, __m256i sp47)
{
	const __m256i m03 = _mm256_madd_epi16(_mm256_hadd_epi16(h[0], h[1]), sp03);
	const __m256i m47 = _mm256_madd_epi16(_mm256_hadd_epi16(h[2], h[3]), sp47);

	return _mm256_add_epi32(_mm256_permute2x128_si256(m03, m47, 0x20),
	                        _mm256_permute2x128_si256(m03, m47, 0x31));
}

/* kq_scaled_sum16's scales from 16 int8 (s16): lane 0 of the result
 * [s(a0) s(a0) .. s(a3) s(a3)], lane 1 the same of b0..b3, as int16 */
#define KQ_SP(s16, a0, a1, a2, a3, b0, b1, b2, b3)                                                 \
	_mm256_cvtepi8_epi16(_mm_shuffle_epi8(                                                     \
	    (s16), _mm_setr_epi8(a0, a0, a1, a1, a2, a2, a3, a3, b0, b0, b1, b1, b2, b2, b3, b3)))

/* The two-group types' units, on both ISAs: unit u's int16 pair sums
 * (each |pair| <= 8191) into vv, pairs of units folded at once (kq_pairs2:
 * unit 2j's vector waits in vv[2j] for unit 2j+1's), and the eight units'
 * scaled int32 sums from vv by kq_scaled_sum16. On AVX-512 this beat each
 * unit scaled by its own vpmaddwd and kq_hsum8x8 (two Zen 4 cores, S = 1:
 * Q3_K 16-17 -> 18-20 GB/s, Q2_K 14-16 -> 16-19). */
#define KQ_UNIT(vv, u, pairs)                                                                      \
	((u) % 2 ? ((vv)[(u) / 2] = kq_pairs2((vv)[(u)-1], (pairs))) : ((vv)[(u)] = (pairs)))
#define KQ_UNITS(vv, sp03, sp47) kq_scaled_sum16((vv), (sp03), (sp47))
/* the two-group types' sp03 and sp47 from their 16 int8 scales: group 2u
 * (unit u's elements 0..15, lane 0) and 2u+1 (16..31, lane 1) */
#define KQ_SP03(s16) KQ_SP((s16), 0, 2, 4, 6, 1, 3, 5, 7)
#define KQ_SP47(s16) KQ_SP((s16), 8, 10, 12, 14, 9, 11, 13, 15)

KQ_INLINE float kq_half(const uint8_t *p)
{
	return _cvtsh_ss((unsigned short)(p[0] | p[1] << 8));
}

/* the halves at p and p + 2 as floats 0 and 1 of both 128-bit lanes (one
 * 4-byte load and one conversion where two of each had read them apart) */
KQ_INLINE __m256 kq_halves2(const uint8_t *p)
{
	uint32_t w;

	memcpy(&w, p, 4);
	return _mm256_cvtph_ps(_mm_set1_epi32((int)w));
}

KQ_INLINE __m256i kq_load(const void *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

/* A block's bytes (cpu/dtype.h; inline, so a constant t folds). */
KQ_INLINE size_t kq_block_bytes(enum coli_dtype t)
{
	switch (t) {
	case COLI_DTYPE_Q4_1:
		return 20;
	case COLI_DTYPE_Q5_0:
		return 22;
	case COLI_DTYPE_Q5_1:
		return 24;
	case COLI_DTYPE_Q2_K:
		return 84;
	case COLI_DTYPE_Q3_K:
		return 110;
	case COLI_DTYPE_Q4_K:
		return 144;
	case COLI_DTYPE_Q5_K:
		return 176;
	default:
		return 210;
	}
}

/* The K-quants' block forms (Q4_K / Q5_K, Q6_K, Q3_K, Q2_K) */
#include "cpu/kquant/kquant_blocks.h"

/* The activation's sums of 16: out[g] = sum of xq over elements 16g ..
 * 16g + 15 (|.| <= 2032), for K a multiple of 256. Q2_K's min term and
 * Q3_K's offset term are these times the groups' mins or scales: one
 * vpmaddwd a block (kq_q2k_block, kq_q3k_block) instead of a vpmaddubsw by
 * ones and a sum a unit, taken once a call instead of once a row (on two
 * Zen 4 cores, S = 1, about a third fewer instructions a Q2_K block). */
#define KQ_SUMS16_MAX_K 65536 /* a larger K (no model has one) runs the reference */
#define KQ_SUMS16_BUF   16384 /* int16 on the stack: the sums of 4 activations at the largest K */
KQ_INLINE int kq_needs_sums16(enum coli_dtype t)
{
#ifdef KQ_Q6K_DOT32 /* (its int32 form at one activation) */
	if (t == COLI_DTYPE_Q6_K)
		return 1;
#endif
	return t == COLI_DTYPE_Q2_K || t == COLI_DTYPE_Q3_K;
}

KQ_INLINE void kq_sums16(const struct coli_act *x, int K, int16_t *out)
{
	const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1),
	              order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);

	for (int k = 0; k < K; k += 128) {
		__m256i q[4];

		/* groups 2j (lane 0) and 2j + 1 (lane 1) of 32 bytes as four
		 * sums of four each */
		for (int j = 0; j < 4; j++)
			q[j] = _mm256_madd_epi16(
			    _mm256_maddubs_epi16(ones8, kq_load(x->q + k + 32 * j)), ones16);
		/* lane 0: groups 0 2 4 6, lane 1: 1 3 5 7 */
		const __m256i g = _mm256_permutevar8x32_epi32(
		    _mm256_hadd_epi32(_mm256_hadd_epi32(q[0], q[1]), _mm256_hadd_epi32(q[2], q[3])),
		    order);

		_mm_storeu_si128(
		    (__m128i *)(out + k / 16),
		    _mm_packs_epi32(_mm256_castsi256_si128(g), _mm256_extracti128_si256(g, 1)));
	}
}

/* Every cache line of the bytes [p, p + n) at KQ_PREFETCH ahead (rows lie
 * one after the other, so this runs into the next rows). The hardware's
 * prefetcher alone left the S = 1 rows waiting on memory: one line a block
 * fetched ahead gave Q4_K 18-20 GB/s on two Zen 4 cores against 26-30 with
 * every line, of a 33 GB/s read bound (`coli bench kernels --threads 2`);
 * 1 and 4 KiB ahead were no better than 2. */
#define KQ_PREFETCH 2048
KQ_INLINE void kq_prefetch(const uint8_t *p, size_t n)
{
	for (size_t o = 0; o < n; o += 64)
		__builtin_prefetch(p + KQ_PREFETCH + o, 0, 3);
}

#if defined(KQ_Q4K_PAIRS) || defined(KQ_Q6K_DOT32) || defined(KQ_Q2K_ZMM)
#include "cpu/kquant/kquant_vnni.h"
#endif

/* Block i of a row at row into acc[0..ns). */
KQ_INLINE void kq_block(enum coli_dtype t, const uint8_t *row, const struct coli_act *const *x,
                        const int16_t *const *x16, const int8_t *const *xr, int ns, int i,
                        __m256 *acc)
{
	const uint8_t *bp = row + (size_t)i * kq_block_bytes(t);

	kq_prefetch(bp, kq_block_bytes(t));
	if (t == COLI_DTYPE_Q6_K) {
#ifdef KQ_Q6K_DOT32
		if (ns == 1) {
			kq_q6k_dot32_block(bp, x[0], x16[0], i, acc);
			return;
		}
#endif
		kq_q6k_block(bp, x, ns, i, acc);
	} else if (t == COLI_DTYPE_Q3_K) {
		kq_q3k_block(bp, x, x16, ns, i, acc);
	} else if (t == COLI_DTYPE_Q2_K) {
#ifdef KQ_Q2K_ZMM
		if (ns == 1) {
			kq_q2k_zmm_block(bp, x[0], x16[0], i, acc);
			return;
		}
#endif
		kq_q2k_block(bp, x, x16, ns, i, acc);
	} else {
#ifdef KQ_Q4K_PAIRS
		if (t == COLI_DTYPE_Q4_K && xr[0]) {
			kq_q4k_pairs_block(bp, x, xr, ns, i, acc);
			return;
		}
#endif
		kq_q45k_block(bp, x, ns, i, acc, t == COLI_DTYPE_Q5_K);
	}
}

/* One row of K (a multiple of 256) elements of type t at row against ns
 * activations, into out[s]: even blocks into acc0 (lanes 0-7), odd ones
 * into acc1 (8-15), two a step so that the accumulators stay in registers. */
KQ_INLINE void kq_row(enum coli_dtype t, const uint8_t *row, const struct coli_act *const *x,
                      const int16_t *const *x16, const int8_t *const *xr, int ns, int K,
                      float *out)
{
	__m256 acc0[KQ_NS], acc1[KQ_NS];
	int i = 0;

	for (int s = 0; s < ns; s++)
		acc0[s] = acc1[s] = _mm256_setzero_ps();
	for (; i + 2 <= K / 256; i += 2) {
		kq_block(t, row, x, x16, xr, ns, i, acc0);
		kq_block(t, row, x, x16, xr, ns, i + 1, acc1);
	}
	if (i < K / 256)
		kq_block(t, row, x, x16, xr, ns, i, acc0);
	for (int s = 0; s < ns; s++)
		out[s] = fold16(acc0[s], acc1[s]);
}

/* Eight halves as a vector, from registers (eight 2-byte stores read back
 * by one 16-byte load would miss store forwarding). */
#define KQ_HALVES8(h)                                                                              \
	_mm_set_epi16((short)(h)[7], (short)(h)[6], (short)(h)[5], (short)(h)[4], (short)(h)[3],   \
	              (short)(h)[2], (short)(h)[1], (short)(h)[0])

/* Eight Q4_1 / Q5_0 / Q5_1 blocks from block g of a row (units g .. g+7,
 * g % 8 == 0) against each activation's blocks, into acc[s]: A = the dot
 * (Q5_0: minus 16 * qsum, its q - 16), C = qsum (Q4_1 / Q5_1, times m). */
KQ_INLINE void kq_q32_group(enum coli_dtype t, const uint8_t *row, const struct coli_act *const *x,
                            int ns, int g, __m256 *acc)
{
	const size_t bb = kq_block_bytes(t);
	const int oqh = t == COLI_DTYPE_Q5_0 ? 2 : 4, oqs = t == COLI_DTYPE_Q4_1   ? 4
	                                                    : t == COLI_DTYPE_Q5_0 ? 6
	                                                                           : 8;
	const uint8_t *bp = row + (size_t)g * bb;
	const __m256i zero = _mm256_setzero_si256();
	__m256i v[KQ_NS][8];
	uint16_t dh[8], mh[8]; /* the halves, gathered in registers (below) */

#pragma GCC unroll 8
	for (int k = 0; k < 8; k++) {
		const uint8_t *b = bp + k * bb;
		__m256i q = q32_nibbles(b + oqs);

		if (t != COLI_DTYPE_Q4_1)
			q = _mm256_or_si256(q, q32_fifth_bits(b + oqh));
#pragma GCC unroll 4
		for (int s = 0; s < ns; s++)
			v[s][k] = DOTACC(zero, q, kq_load(x[s]->q + 32 * (g + k)));
		memcpy(&dh[k], b, 2);
		memcpy(&mh[k], b + 2, 2); /* Q5_0: not a min; unused */
	}
	const __m256 d = _mm256_cvtph_ps(KQ_HALVES8(dh)), m = _mm256_cvtph_ps(KQ_HALVES8(mh));

#pragma GCC unroll 4
	for (int s = 0; s < ns; s++) {
		const __m256i qs = _mm256_loadu_si256((const __m256i *)(x[s]->qsum + g));
		const __m256 dxv = _mm256_loadu_ps(x[s]->d + g);
		__m256i A = kq_hsum8x8(v[s]);

		if (t == COLI_DTYPE_Q5_0)
			A = _mm256_sub_epi32(A, _mm256_slli_epi32(qs, 4));
		acc[s] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(A), _mm256_mul_ps(d, dxv), acc[s]);
		if (t != COLI_DTYPE_Q5_0)
			acc[s] =
			    _mm256_fmadd_ps(_mm256_cvtepi32_ps(qs), _mm256_mul_ps(m, dxv), acc[s]);
	}
}

/* One row of a 32-element block type against ns activations, into out[s]:
 * groups of 8 blocks, even groups into acc0 (lanes 0-7), odd ones into
 * acc1; a last 1..7 blocks (K not a multiple of 256: why a GGUF holds these
 * types) by the reference's steps on the lanes stored. */
KQ_INLINE void kq_row32(enum coli_dtype t, const uint8_t *row, const struct coli_act *const *x,
                        int ns, int K, float *out)
{
	const size_t bb = kq_block_bytes(t);
	const int nb = K / 32;
	__m256 acc0[KQ_NS], acc1[KQ_NS];
	int g = 0;

	for (int s = 0; s < ns; s++)
		acc0[s] = acc1[s] = _mm256_setzero_ps();
	for (; g + 16 <= nb; g += 16) {
		kq_prefetch(row + g * bb, 16 * bb);
		kq_q32_group(t, row, x, ns, g, acc0);
		kq_q32_group(t, row, x, ns, g + 8, acc1);
	}
	if (g + 8 <= nb) {
		kq_q32_group(t, row, x, ns, g, acc0);
		g += 8;
	}
	for (int s = 0; s < ns; s++) {
		float l[COLI_LANES];

		if (g == nb) {
			out[s] = fold16(acc0[s], acc1[s]);
			continue;
		}
		_mm256_storeu_ps(l, acc0[s]);
		_mm256_storeu_ps(l + 8, acc1[s]);
		for (int b = g; b < nb; b++)
			coli_kq_unit_acc(t, row, x[s], b, l);
		out[s] = coli_lanes_fold(l);
	}
}

/* A row of type t against ns activations into out[s] */
KQ_INLINE void kq_row_any(enum coli_dtype t, const uint8_t *row, const struct coli_act *const *x,
                          const int16_t *const *x16, const int8_t *const *xr, int ns, int K,
                          float *out)
{
	if (t == COLI_DTYPE_Q4_1 || t == COLI_DTYPE_Q5_0 || t == COLI_DTYPE_Q5_1)
		kq_row32(t, row, x, ns, K, out);
	else
		kq_row(t, row, x, x16, xr, ns, K, out);
}

/* F(type, ...) with the type a constant in each case (so that every
 * instance is compiled for its type); returns 0, or -ENOTSUP for a type not
 * covered */
#define KQ_DISPATCH(t, F, ...)                                                                     \
	switch (t) {                                                                               \
	case COLI_DTYPE_Q4_1:                                                                      \
		F(COLI_DTYPE_Q4_1, __VA_ARGS__);                                                   \
		return 0;                                                                          \
	case COLI_DTYPE_Q5_0:                                                                      \
		F(COLI_DTYPE_Q5_0, __VA_ARGS__);                                                   \
		return 0;                                                                          \
	case COLI_DTYPE_Q5_1:                                                                      \
		F(COLI_DTYPE_Q5_1, __VA_ARGS__);                                                   \
		return 0;                                                                          \
	case COLI_DTYPE_Q2_K:                                                                      \
		F(COLI_DTYPE_Q2_K, __VA_ARGS__);                                                   \
		return 0;                                                                          \
	case COLI_DTYPE_Q3_K:                                                                      \
		F(COLI_DTYPE_Q3_K, __VA_ARGS__);                                                   \
		return 0;                                                                          \
	case COLI_DTYPE_Q4_K:                                                                      \
		F(COLI_DTYPE_Q4_K, __VA_ARGS__);                                                   \
		return 0;                                                                          \
	case COLI_DTYPE_Q5_K:                                                                      \
		F(COLI_DTYPE_Q5_K, __VA_ARGS__);                                                   \
		return 0;                                                                          \
	case COLI_DTYPE_Q6_K:                                                                      \
		F(COLI_DTYPE_Q6_K, __VA_ARGS__);                                                   \
		return 0;                                                                          \
	default:                                                                                   \
		return -ENOTSUP;                                                                   \
	}

/* Rows [row0, row1) of w (type t, a constant once inlined) against one
 * activation into y */
KQ_INLINE void kq_rows1(enum coli_dtype t, const struct coli_mat *w,
                        const struct coli_act *const *x, const int16_t *const *x16,
                        const int8_t *const *xr, float *y, int row0, int row1)
{
	const size_t rb = coli_dtype_row_bytes(t, (size_t)w->cols);

	for (int r = row0; r < row1; r++)
		kq_row_any(t, (const uint8_t *)w->data + (size_t)r * rb, x, x16, xr, 1, w->cols,
		           y + (r - row0));
}

/* What a call prepares from each activation once, for all its rows, in a
 * buffer of KQ_PREP_BYTES: the sums of 16 (kq_needs_sums16; past
 * KQ_SUMS16_MAX_K -ENOTSUP, the caller runs the reference), Q4_K's
 * rearranged quants (its pairs on VNNI; past KQ_PREP_BYTES its generic
 * block), or nothing. */
enum { KQ_PREP_NONE, KQ_PREP_SUMS16, KQ_PREP_PAIRS };
#define KQ_PREP_BYTES (2 * KQ_SUMS16_BUF)
KQ_INLINE int kq_prep(enum coli_dtype t, int K)
{
	if (kq_needs_sums16(t))
		return K <= KQ_SUMS16_MAX_K ? KQ_PREP_SUMS16 : -ENOTSUP;
#ifdef KQ_Q4K_PAIRS
	if (t == COLI_DTYPE_Q4_K && K <= KQ_PREP_BYTES)
		return KQ_PREP_PAIRS;
#endif
	return KQ_PREP_NONE;
}

/* The bytes of one activation's preparation */
KQ_INLINE size_t kq_prep_bytes(int prep, int K)
{
	return prep == KQ_PREP_SUMS16 ? (size_t)K / 8 : prep == KQ_PREP_PAIRS ? (size_t)K : 0;
}

/* Activation x's preparation (kq_prep) into the buffer at dst */
KQ_INLINE void kq_prepare(int prep, const struct coli_act *x, int K, void *dst)
{
	if (prep == KQ_PREP_SUMS16)
		kq_sums16(x, K, (int16_t *)dst);
#ifdef KQ_Q4K_PAIRS
	else if (prep == KQ_PREP_PAIRS)
		kq_q4k_pairs_x(x->q, K, (int8_t *)dst);
#endif
}

/* A row of type t against activations s .. s + n - 1 (n 1, 2 or 4, a
 * constant once inlined; their sums of 16 at buf from activation s0 on) into
 * column s + j of yr, ldy apart. */
KQ_INLINE void kq_row_at(enum coli_dtype t, const uint8_t *row, const struct coli_act *x,
                         int prep, const uint8_t *buf, int s, int s0, int K, const int n,
                         float *yr, size_t ldy)
{
	const struct coli_act *xs[KQ_NS];
	const int16_t *x16[KQ_NS];
	const int8_t *xr[KQ_NS];
	float o[KQ_NS];

	for (int j = 0; j < n; j++) {
		const uint8_t *p = buf + (size_t)(s + j - s0) * kq_prep_bytes(prep, K);

		xs[j] = &x[s + j];
		x16[j] = prep == KQ_PREP_SUMS16 ? (const int16_t *)p : NULL;
		xr[j] = prep == KQ_PREP_PAIRS ? (const int8_t *)p : NULL;
	}
	kq_row_any(t, row, xs, x16, xr, n, K, o);
	for (int j = 0; j < n; j++)
		yr[(size_t)(s + j) * ldy] = o[j];
}

/* Rows [row0, row1) of w (type t, a constant once inlined) against S >= 2
 * activations x[S] into y[s][ldy] (row r at y + s * ldy + r - row0): each
 * row unpacked once for four activations at a time (then two, then one:
 * below COLI_PANEL_MIN_S the panels do not take them). The type's switch is
 * taken once a call (kq_range), not once a row: a batch over an expert's
 * down matrix (K = 768, three blocks a row) spent a fifth of its time on it.
 * A decode step (S = 1) takes it once a call too (kq_gemv, kq_rows1): on
 * one Zen 4 core, against a switch a row, q2_k, q3_k and q5_k 7-11% less
 * time a pass, q4_1 and q5_* 4-6%, q6_k 2-3% more (a Zen 3 micro-bench had
 * once found Q6_K 15-25% slower this way). */
KQ_INLINE void kq_rows(enum coli_dtype t, const struct coli_mat *w, const struct coli_act *x, int S,
                       float *y, size_t ldy, int row0, int row1)
{
	const size_t rb = coli_dtype_row_bytes(t, (size_t)w->cols);
	const int K = w->cols, prep = kq_prep(t, K);
	/* the preparations of as many activations as the buffer holds (one
	 * at least: kq_prep), each row taken once for them */
	const int per = prep ? (int)(KQ_PREP_BYTES / kq_prep_bytes(prep, K)) : S;
	uint8_t buf[prep ? KQ_PREP_BYTES : 1] __attribute__((aligned(32)));

	for (int s0 = 0; s0 < S; s0 += per) {
		const int s1 = S - s0 < per ? S : s0 + per;

		for (int s = s0; prep && s < s1; s++)
			kq_prepare(prep, &x[s], K, buf + (size_t)(s - s0) * kq_prep_bytes(prep, K));
		for (int r = row0; r < row1; r++) {
			const uint8_t *row = (const uint8_t *)w->data + (size_t)r * rb;
			float *yr = y + (r - row0);
			int s = s0;

			for (; s + 4 <= s1; s += 4)
				kq_row_at(t, row, x, prep, buf, s, s0, K, 4, yr, ldy);
			for (; s + 2 <= s1; s += 2)
				kq_row_at(t, row, x, prep, buf, s, s0, K, 2, yr, ldy);
			if (s < s1)
				kq_row_at(t, row, x, prep, buf, s, s0, K, 1, yr, ldy);
		}
	}
}

/* kq_rows for w's type; -ENOTSUP for a type not covered */
KQ_INLINE int kq_range(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                       size_t ldy, int row0, int row1)
{
	if (kq_prep(w->dtype, w->cols) < 0)
		return -ENOTSUP;
	KQ_DISPATCH(w->dtype, kq_rows, w, x, S, y, ldy, row0, row1)
}

/* rows [row0, row1) of w; -ENOTSUP for a type not covered */
KQ_INLINE int kq_gemv(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                      int row1)
{
	uint8_t buf[KQ_PREP_BYTES] __attribute__((aligned(32)));
	const int prep = coli_dtype_is_block(w->dtype) ? kq_prep(w->dtype, w->cols) : -ENOTSUP;
	const struct coli_act *xs[1] = {x};
	const int16_t *x16[1] = {prep == KQ_PREP_SUMS16 ? (const int16_t *)buf : NULL};
	const int8_t *xr[1] = {prep == KQ_PREP_PAIRS ? (const int8_t *)buf : NULL};

	if (prep < 0)
		return -ENOTSUP;
	kq_prepare(prep, x, w->cols, buf);
	KQ_DISPATCH(w->dtype, kq_rows1, w, xs, x16, xr, y, row0, row1)
}

/* S activations x[S], y[s][ldy] (row r at y + s * ldy + r - row0) */
KQ_INLINE int kq_gemm(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                      size_t ldy, int row0, int row1)
{
	return S == 1 ? kq_gemv(w, x, y, row0, row1) : kq_range(w, x, S, y, ldy, row0, row1);
}
