/*
 * cpu/attn/attention_avx2.c — decode attention with AVX2 (compiled with
 * -mavx2 -mfma): a group of up to eight heads of one key/value head as the
 * lanes of every vector (coli_attention_group_avx2, and its steps, which
 * cpu/attn/attention_mt.c splits across threads), and one head alone
 * (coli_attention_head_avx2). Each head's bits are coli_attention_head's
 * (cpu/attn_head.h): the scalar steps in the same order, fma for fma. And
 * a typed KV row decoded to fp32 (coli_kv_decode_avx2), here so that the
 * kernels' row reads inline it.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu/attn_head.h"
#include "cpu/simd_avx2.h"

/* bf16: the bits shifted up (exact); q8: (float)q * the scale of its
 * segment, one rounded product, as cpu/kvq.c's scalar form. */
void coli_kv_decode_avx2(const struct coli_kv_rows *r, const char *row, int i0, int n, float *tmp)
{
	int i = 0;

	if (r->type == COLI_KV_BF16) {
		const uint16_t *b = (const uint16_t *)row + i0;

		for (; i + 8 <= n; i += 8)
			_mm256_storeu_ps(tmp + i, bf16x8(b + i));
		for (; i < n; i++)
			tmp[i] = coli_bf16_to_f32(b[i]);
		return;
	}
	const signed char *q = (const signed char *)row;
	const float *s = (const float *)(row + r->soff);

	while (i < n) {
		const int k = (i0 + i) / r->seg, end = (k + 1) * r->seg - i0; /* segment's end */
		const int e = end < n ? end : n;
		const __m256 vs = _mm256_set1_ps(s[k]);

		for (; i + 8 <= e; i += 8)
			_mm256_storeu_ps(tmp + i, q8x8(q + i0 + i, vs));
		for (; i < e; i++)
			tmp[i] = (float)q[i0 + i] * s[k];
	}
}

/* Row p's elements [i0, i0 + n) as fp32: the fp32 cache in place, a typed
 * one decoded into tmp by coli_kv_decode_avx2 (this file: the call inlines,
 * where coli_kv_at's goes through cpu/kvq.c and the ISA test each row). */
static inline const float *kv_row(const struct coli_kv_rows *r, size_t p, int i0, int n, float *tmp)
{
	const char *row = coli_kv_rows_ptr(r, p);

	if (r->type == COLI_KV_F32)
		return (const float *)row + i0;
	coli_kv_decode_avx2(r, row, i0, n, tmp);
	return tmp;
}

/* Eight heads of one key/value head, each running coli_attention_head's
 * steps in its order (the dot product in eight fma chains folded ((0+4)+
 * (2+6))+((1+5)+(3+7)); max, coli_expf and the sum over positions in order;
 * the weight a division, each output summed by fma over a block of
 * COLI_ATTN_OUT_BLOCK positions in order, the blocks' sums added in order),
 * so each head's bits are that function's. The scores hold a head's chains in
 * one vector's lanes and fold them at the end (fold8); from the softmax on
 * the eight heads are the lanes of every vector, a value element broadcast
 * once for the eight heads, nothing folded across lanes. The steps (scores, their
 * max, exp, sum, weights, a block's outputs, the blocks' fold) are functions
 * over a share of the positions, the blocks or the outputs, so that threads
 * can split one group (coli_attention_groups_mt) with the same bits: nothing
 * a position, a block or an output computes depends on the share. sc:
 * [n_pos][8] scores, then weights. */

/* Four heads' dot products with two bf16 key rows (hd a multiple of 8), each
 * in eight chains, folded: [row 0's heads 0-3 | row 1's heads 0-3]. */
static inline __m256 scores2x4(const float *const *qh, const uint16_t *kb0, const uint16_t *kb1,
                               int hd)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0,
	       b3 = a0;

	for (int i = 0; i < hd; i += 8) {
		const __m256 k0 = bf16x8(kb0 + i), k1 = bf16x8(kb1 + i);
		__m256 qv;

#define SC2_FMA(h)                                                                                 \
	qv = _mm256_loadu_ps(qh[h] + i), a##h = _mm256_fmadd_ps(qv, k0, a##h),                     \
	b##h = _mm256_fmadd_ps(qv, k1, b##h)
		SC2_FMA(0), SC2_FMA(1), SC2_FMA(2), SC2_FMA(3);
#undef SC2_FMA
	}
	return fold8(a0, a1, a2, a3, b0, b1, b2, b3);
}

/* Scores of positions [p0, p1) (q: nh <= 8 heads [nh][hd], the free lanes
 * repeat the last) and their lanes' max (the scalar's test, first of equals).
 * A head's eight chains are one vector's lanes (dims 8v..8v+7, v in order),
 * so a position reads its key once for the eight heads and each q vector
 * from L1: one load and one fma a vector of dims and head. */
void coli_attn8_scores_avx2(const float *q, int nh, const struct coli_kv_rows *K, int p0, int p1,
                            int hd, float scale, float *sc, float *mx8)
{
	const __m256 vscale = _mm256_set1_ps(scale);
	__m256 mx = _mm256_set1_ps(-__builtin_inff());
	const float *qh[8];
	const int h8 = hd & ~7;
	float kt[hd]; /* a typed row's values */

	for (int h = 0; h < 8; h++)
		qh[h] = q + (size_t)(h < nh ? h : nh - 1) * hd;
	/* bf16 rows whole vectors: widened in registers, not through kt */
	const int wide = K->type == COLI_KV_BF16 && h8 == hd, pf = kv_strided(K, hd);
	/* q8 rows of one scale (a kv head's segment): widened and scaled in
	 * registers, kv_row's product */
	const int q8w = h8 == hd && kv_q8_one_scale(K, 0, hd);

	int p = p0;

	/* bf16 keys of four heads or fewer, two positions a step: each q vector
	 * loaded once for both (eight heads: measured alike, 2026-12-04) */
	for (; wide && nh <= 4 && p + 2 <= p1; p += 2) {
		const uint16_t *kb0 = (const uint16_t *)coli_kv_rows_ptr(K, (size_t)p),
		               *kb1 = (const uint16_t *)coli_kv_rows_ptr(K, (size_t)p + 1);
		const __m256 f = _mm256_mul_ps(scores2x4(qh, kb0, kb1, hd), vscale);
		/* each spread to its row, the free lanes repeating head 3 */
		const __m256 s0 = _mm256_permutevar8x32_ps(
		                 f, _mm256_setr_epi32(0, 1, 2, 3, 3, 3, 3, 3)),
		             s1 = _mm256_permutevar8x32_ps(
		                 f, _mm256_setr_epi32(4, 5, 6, 7, 7, 7, 7, 7));

		if (pf && p + 1 + KV_PF_AHEAD < p1) {
			kv_prefetch(K, (size_t)(p + KV_PF_AHEAD), 0, hd);
			kv_prefetch(K, (size_t)(p + 1 + KV_PF_AHEAD), 0, hd);
		}
		_mm256_storeu_ps(sc + (size_t)p * 8, s0);
		_mm256_storeu_ps(sc + (size_t)p * 8 + 8, s1);
		mx = _mm256_max_ps(s0, mx);
		mx = _mm256_max_ps(s1, mx);
	}
	for (; p < p1; p++) {
		const uint16_t *kb = wide ? (const uint16_t *)coli_kv_rows_ptr(K, (size_t)p) : NULL;
		const signed char *kq =
		    q8w ? (const signed char *)coli_kv_rows_ptr(K, (size_t)p) : NULL;
		const float *k = wide || q8w ? NULL : kv_row(K, p, 0, hd, kt);
		const __m256 ks = _mm256_set1_ps(q8w ? kv_q8_scale(K, (const char *)kq, 0) : 0);
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0,
		       a6 = a0, a7 = a0, s;

		if (pf && p + KV_PF_AHEAD < p1)
			kv_prefetch(K, (size_t)(p + KV_PF_AHEAD), 0, hd);

			/* the eight heads' chains in named registers */
#define SC_FMA(h) a##h = _mm256_fmadd_ps(_mm256_loadu_ps(qh[h] + i), kv, a##h)
#define SC_DIMS(load, more)                                                                        \
	for (int i = 0; i < h8; i += 8) {                                                          \
		const __m256 kv = (load);                                                          \
		SC_FMA(0), SC_FMA(1), SC_FMA(2), SC_FMA(3);                                        \
		if (more)                                                                          \
			SC_FMA(4), SC_FMA(5), SC_FMA(6), SC_FMA(7);                                \
	}
		/* four heads or fewer: heads 4-7 repeat head 3, the last */
		if (wide && nh <= 4)
			SC_DIMS(bf16x8(kb + i), 0)
		else if (wide)
			SC_DIMS(bf16x8(kb + i), 1)
		else if (q8w && nh <= 4)
			SC_DIMS(q8x8(kq + i, ks), 0)
		else if (q8w)
			SC_DIMS(q8x8(kq + i, ks), 1)
		else if (nh <= 4)
			SC_DIMS(_mm256_loadu_ps(k + i), 0)
		else
			SC_DIMS(_mm256_loadu_ps(k + i), 1)
#undef SC_DIMS
#undef SC_FMA
		if (nh <= 4)
			a4 = a5 = a6 = a7 = a3;
		if (h8 < hd) { /* a last few dims: chain i & 7 */
			__m256 a[8] = {a0, a1, a2, a3, a4, a5, a6, a7};

			for (int h = 0; h < 8; h++) {
				float l[8];

				_mm256_storeu_ps(l, a[h]);
				for (int i = h8; i < hd; i++)
					l[i & 7] = fmaf(qh[h][i], k[i], l[i & 7]);
				a[h] = _mm256_loadu_ps(l);
			}
			a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
			a4 = a[4], a5 = a[5], a6 = a[6], a7 = a[7];
		}
		s = _mm256_mul_ps(fold8(a0, a1, a2, a3, a4, a5, a6, a7), vscale);
		_mm256_storeu_ps(sc + (size_t)p * 8, s);
		mx = _mm256_max_ps(s, mx); /* s > mx ? s : mx, the scalar's test */
	}
	_mm256_storeu_ps(mx8, mx);
}

/* The max over several shares' maxes (in position order), in mx8 on return. */
void coli_attn8_max_avx2(const float *maxes, int n, float *mx8)
{
	__m256 mx = _mm256_set1_ps(-__builtin_inff());

	for (int b = 0; b < n; b++)
		mx = _mm256_max_ps(_mm256_loadu_ps(maxes + (size_t)b * 8), mx);
	_mm256_storeu_ps(mx8, mx);
}

/* exp(score - max) of positions [p0, p1), coli_expf's bits (expf8). Four
 * heads or fewer: two positions' four lanes in one expf8, spread back with
 * lanes 4-7 repeating head 3 (the same values their own exps give). */
void coli_attn8_exp_avx2(float *sc, int nh, int p0, int p1, const float *mx8)
{
	const __m256 mx = _mm256_loadu_ps(mx8);
	const __m256 m4 = _mm256_permute2f128_ps(mx, mx, 0x00); /* lanes 0-3 twice */
	int p = p0;

	for (; nh <= 4 && p + 2 <= p1; p += 2) {
		float *s = sc + (size_t)p * 8;
		const __m256 x = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(s)),
		                                      _mm_loadu_ps(s + 8), 1),
		             e = expf8(_mm256_sub_ps(x, m4));

		_mm256_storeu_ps(
		    s, _mm256_permutevar8x32_ps(e, _mm256_setr_epi32(0, 1, 2, 3, 3, 3, 3, 3)));
		_mm256_storeu_ps(
		    s + 8, _mm256_permutevar8x32_ps(e, _mm256_setr_epi32(4, 5, 6, 7, 7, 7, 7, 7)));
	}
	for (; p < p1; p++)
		_mm256_storeu_ps(sc + (size_t)p * 8,
		                 expf8(_mm256_sub_ps(_mm256_loadu_ps(sc + (size_t)p * 8), mx)));
}

/* The sum of the exps of all n_pos positions, in position order. */
void coli_attn8_sum_avx2(const float *sc, int n_pos, float *sum8)
{
	__m256 sum = _mm256_setzero_ps();

	for (int p = 0; p < n_pos; p++)
		sum = _mm256_add_ps(sum, _mm256_loadu_ps(sc + (size_t)p * 8));
	_mm256_storeu_ps(sum8, sum);
}

/* The weights of positions [p0, p1): their exp over the sum. */
void coli_attn8_div_avx2(float *sc, int p0, int p1, const float *sum8)
{
	const __m256 sum = _mm256_loadu_ps(sum8);

	for (int p = p0; p < p1; p++)
		_mm256_storeu_ps(sc + (size_t)p * 8,
		                 _mm256_div_ps(_mm256_loadu_ps(sc + (size_t)p * 8), sum));
}

/* One block's sums of outputs [i0, i1) (positions [p0, p1) of one
 * COLI_ATTN_OUT_BLOCK, each in order from zero) into acc [i1 - i0][8 heads]:
 * eight outputs at a time (eight vectors in registers) over a tile of
 * positions, tile after tile. A tile's value rows (the share's dims) are
 * decoded once into vt (16 KB at 128 dims), which the output blocks then
 * walk from L1. */
/* The same sums for four heads or fewer (lanes 4-7 repeating head 3): the
 * heads' weights broadcast and the dims in lanes, sixteen dims of the four
 * heads (eight vectors) over a tile at a time, so no lane repeats a head's
 * work. Each output is the same chain of fmas in the same order, its bits
 * the eight-lane form's; bf16 rows, and q8 rows of one scale, are widened
 * in registers. at: [4][w]. */
static void out4(const float *sc, const struct coli_kv_rows *V, int p0, int p1, int i0, int w,
                 float *acc)
{
	const int pf = kv_strided(V, w), wide = V->type == COLI_KV_BF16,
	          q8w = kv_q8_one_scale(V, i0, w);
	const int tile = w * ATT_TILE > 4096 ? (4096 / w > 1 ? 4096 / w : 1) : ATT_TILE;
	float at[4][w], vt[wide || q8w ? 1 : tile * w], vs[ATT_TILE];
	const float *vr[ATT_TILE];
	const uint16_t *vb[ATT_TILE];
	const signed char *vq[ATT_TILE]; /* q8 rows of one scale, vs */

	memset(at, 0, sizeof(at));
	for (int t0 = p0; t0 < p1; t0 += tile) {
		const int t1 = p1 - t0 < tile ? p1 : t0 + tile;
		int b = 0;

		for (int p = t0; p < t1; p++) {
			if (pf && !wide && !q8w && p + KV_PF_AHEAD < p1) /* decoded here */
				kv_prefetch(V, (size_t)(p + KV_PF_AHEAD), i0, w);
			if (wide) {
				vb[p - t0] = (const uint16_t *)coli_kv_rows_ptr(V, (size_t)p) + i0;
			} else if (q8w) {
				const char *row = coli_kv_rows_ptr(V, (size_t)p);

				vq[p - t0] = (const signed char *)row + i0;
				vs[p - t0] = kv_q8_scale(V, row, i0);
			} else
				vr[p - t0] = kv_row(V, p, i0, w, vt + (size_t)(p - t0) * w);
		}
		/* sixteen dims (then eight) of the four heads in named registers */
#define OUT4_FMA(h, k) a##h##k = _mm256_fmadd_ps(_mm256_broadcast_ss(wp + h), v##k, a##h##k)
#define OUT4_PF(b)     /* the next tile, a part a slice (rows read in place) */                    \
	do {                                                                                       \
		if (wide || q8w)                                                                   \
			kv_prefetch_part(V, t1, tile, p1, (b) / 16, (w + 15) / 16, i0, w);         \
	} while (0)
#define OUT4_16(load)                                                                              \
	for (; b + 16 <= w; b += 16) {                                                             \
		OUT4_PF(b);                                                                        \
		__m256 a00 = _mm256_loadu_ps(&at[0][b]), a01 = _mm256_loadu_ps(&at[0][b + 8]),     \
		       a10 = _mm256_loadu_ps(&at[1][b]), a11 = _mm256_loadu_ps(&at[1][b + 8]),     \
		       a20 = _mm256_loadu_ps(&at[2][b]), a21 = _mm256_loadu_ps(&at[2][b + 8]),     \
		       a30 = _mm256_loadu_ps(&at[3][b]), a31 = _mm256_loadu_ps(&at[3][b + 8]);     \
		for (int p = t0; p < t1; p++) {                                                    \
			const float *wp = sc + (size_t)p * 8;                                      \
			const __m256 v0 = load(p, b), v1 = load(p, b + 8);                         \
			OUT4_FMA(0, 0), OUT4_FMA(1, 0), OUT4_FMA(2, 0), OUT4_FMA(3, 0);            \
			OUT4_FMA(0, 1), OUT4_FMA(1, 1), OUT4_FMA(2, 1), OUT4_FMA(3, 1);            \
		}                                                                                  \
		_mm256_storeu_ps(&at[0][b], a00), _mm256_storeu_ps(&at[0][b + 8], a01);            \
		_mm256_storeu_ps(&at[1][b], a10), _mm256_storeu_ps(&at[1][b + 8], a11);            \
		_mm256_storeu_ps(&at[2][b], a20), _mm256_storeu_ps(&at[2][b + 8], a21);            \
		_mm256_storeu_ps(&at[3][b], a30), _mm256_storeu_ps(&at[3][b + 8], a31);            \
	}                                                                                          \
	for (; b + 8 <= w; b += 8) {                                                               \
		OUT4_PF(b);                                                                        \
		__m256 a00 = _mm256_loadu_ps(&at[0][b]), a10 = _mm256_loadu_ps(&at[1][b]),         \
		       a20 = _mm256_loadu_ps(&at[2][b]), a30 = _mm256_loadu_ps(&at[3][b]);         \
		for (int p = t0; p < t1; p++) {                                                    \
			const float *wp = sc + (size_t)p * 8;                                      \
			const __m256 v0 = load(p, b);                                              \
			OUT4_FMA(0, 0), OUT4_FMA(1, 0), OUT4_FMA(2, 0), OUT4_FMA(3, 0);            \
		}                                                                                  \
		_mm256_storeu_ps(&at[0][b], a00), _mm256_storeu_ps(&at[1][b], a10);                \
		_mm256_storeu_ps(&at[2][b], a20), _mm256_storeu_ps(&at[3][b], a30);                \
	}
#define LOAD_BF16(p, i) bf16x8(vb[(p)-t0] + (i))
#define LOAD_F32(p, i)  _mm256_loadu_ps(vr[(p)-t0] + (i))
#define LOAD_Q8(p, i)   q8x8(vq[(p)-t0] + (i), _mm256_set1_ps(vs[(p)-t0]))
		if (wide) {
			OUT4_16(LOAD_BF16)
		} else if (q8w) {
			OUT4_16(LOAD_Q8)
		} else {
			OUT4_16(LOAD_F32)
		}
#undef LOAD_Q8
#undef LOAD_F32
#undef LOAD_BF16
#undef OUT4_16
#undef OUT4_PF
#undef OUT4_FMA
		for (; b < w; b++) /* a last few dims, one at a time */
			for (int p = t0; p < t1; p++) {
				const float v = wide  ? coli_bf16_to_f32(vb[p - t0][b])
				                : q8w ? (float)vq[p - t0][b] * vs[p - t0]
				                      : vr[p - t0][b];

				for (int h = 0; h < 4; h++)
					at[h][b] = fmaf(sc[(size_t)p * 8 + h], v, at[h][b]);
			}
	}
	for (int i = 0; i < w; i++)
		for (int h = 0; h < 8; h++)
			acc[i * 8 + h] = at[h < 4 ? h : 3][i];
}

/* The same sums for eight heads over bf16 rows, or q8 rows whose dims
 * [i0, i0 + w) share one scale: eight dims of the eight heads (eight
 * vectors) over a tile at a time, the rows widened (and scaled: the
 * decode's product) in registers instead of decoded into a tile (each
 * output the same chain of fmas in the same order). at: [8][w]. */
static void out8_wide(const float *sc, const struct coli_kv_rows *V, int p0, int p1, int i0, int w,
                      float *acc)
{
	const int q8 = V->type == COLI_KV_Q8;
	float at[8][w], vs[ATT_TILE];
	const char *vp[ATT_TILE];

	memset(at, 0, sizeof(at));
	for (int t0 = p0; t0 < p1; t0 += ATT_TILE) {
		const int t1 = p1 - t0 < ATT_TILE ? p1 : t0 + ATT_TILE;
		int b = 0;

		for (int p = t0; p < t1; p++) {
			const char *row = coli_kv_rows_ptr(V, (size_t)p);

			vp[p - t0] = row + (size_t)i0 * (q8 ? 1 : 2);
			vs[p - t0] = q8 ? kv_q8_scale(V, row, i0) : 0;
		}
#define OUT8_FMA(h) a##h = _mm256_fmadd_ps(_mm256_broadcast_ss(wp + h), v, a##h)
#define OUT8(load)                                                                                 \
	for (; b + 8 <= w; b += 8) {                                                               \
		kv_prefetch_part(V, t1, ATT_TILE, p1, b / 8, w / 8 > 0 ? w / 8 : 1, i0, w);        \
		__m256 a0 = _mm256_loadu_ps(&at[0][b]), a1 = _mm256_loadu_ps(&at[1][b]),           \
		       a2 = _mm256_loadu_ps(&at[2][b]), a3 = _mm256_loadu_ps(&at[3][b]),           \
		       a4 = _mm256_loadu_ps(&at[4][b]), a5 = _mm256_loadu_ps(&at[5][b]),           \
		       a6 = _mm256_loadu_ps(&at[6][b]), a7 = _mm256_loadu_ps(&at[7][b]);           \
		for (int p = t0; p < t1; p++) {                                                    \
			const float *wp = sc + (size_t)p * 8;                                      \
			const __m256 v = (load);                                                   \
			OUT8_FMA(0), OUT8_FMA(1), OUT8_FMA(2), OUT8_FMA(3);                        \
			OUT8_FMA(4), OUT8_FMA(5), OUT8_FMA(6), OUT8_FMA(7);                        \
		}                                                                                  \
		_mm256_storeu_ps(&at[0][b], a0), _mm256_storeu_ps(&at[1][b], a1);                  \
		_mm256_storeu_ps(&at[2][b], a2), _mm256_storeu_ps(&at[3][b], a3);                  \
		_mm256_storeu_ps(&at[4][b], a4), _mm256_storeu_ps(&at[5][b], a5);                  \
		_mm256_storeu_ps(&at[6][b], a6), _mm256_storeu_ps(&at[7][b], a7);                  \
	}
		if (q8) {
			OUT8(q8x8((const signed char *)vp[p - t0] + b, _mm256_set1_ps(vs[p - t0])))
		} else {
			OUT8(bf16x8((const uint16_t *)vp[p - t0] + b))
		}
#undef OUT8
#undef OUT8_FMA
		for (; b < w; b++) /* a last few dims, one at a time */
			for (int p = t0; p < t1; p++) {
				const float v =
				    q8 ? (float)((const signed char *)vp[p - t0])[b] * vs[p - t0]
				       : coli_bf16_to_f32(((const uint16_t *)vp[p - t0])[b]);

				for (int h = 0; h < 8; h++)
					at[h][b] = fmaf(sc[(size_t)p * 8 + h], v, at[h][b]);
			}
	}
	for (int i = 0; i < w; i++)
		for (int h = 0; h < 8; h++)
			acc[i * 8 + h] = at[h][i];
}

void coli_attn8_out_avx2(const float *sc, int nh, const struct coli_kv_rows *V, int p0, int p1,
                         int i0, int i1, float *acc)
{
	const int w = i1 - i0, pf = kv_strided(V, w);

	if (w <= 0)
		return;
	if (nh <= 4) {
		out4(sc, V, p0, p1, i0, w, acc);
		return;
	}
	if (V->type == COLI_KV_BF16 || kv_q8_one_scale(V, i0, w)) {
		out8_wide(sc, V, p0, p1, i0, w, acc);
		return;
	}
	/* a tile's decoded rows within 16 KB (MLA's 512 dims: 8 positions) */
	const int tile = w * ATT_TILE > 4096 ? (4096 / w > 1 ? 4096 / w : 1) : ATT_TILE;
	float vt[tile * w];        /* [tile positions][w]: the share's value elements */
	const float *vr[ATT_TILE]; /* each position's w elements (vt, or the fp32 row) */

	for (int i = 0; i < w * 8; i++)
		acc[i] = 0.0f;
	for (int t0 = p0; t0 < p1; t0 += tile) {
		const int t1 = p1 - t0 < tile ? p1 : t0 + tile;

		for (int p = t0; p < t1; p++) {
			if (pf && p + KV_PF_AHEAD < p1)
				kv_prefetch(V, (size_t)(p + KV_PF_AHEAD), i0, w);
			vr[p - t0] = kv_row(V, p, i0, w, vt + (size_t)(p - t0) * w);
		}
		int b = 0;

		for (; b + 8 <= w; b += 8) { /* eight outputs in named registers */
			float *c = acc + b * 8;
			__m256 a0 = _mm256_loadu_ps(c), a1 = _mm256_loadu_ps(c + 8),
			       a2 = _mm256_loadu_ps(c + 16), a3 = _mm256_loadu_ps(c + 24),
			       a4 = _mm256_loadu_ps(c + 32), a5 = _mm256_loadu_ps(c + 40),
			       a6 = _mm256_loadu_ps(c + 48), a7 = _mm256_loadu_ps(c + 56);

			for (int p = t0; p < t1; p++) {
				const __m256 wt = _mm256_loadu_ps(sc + (size_t)p * 8);
				const float *v = vr[p - t0] + b;

#define OUT_ACC(k) a##k = _mm256_fmadd_ps(wt, _mm256_broadcast_ss(v + k), a##k)
				OUT_ACC(0), OUT_ACC(1), OUT_ACC(2), OUT_ACC(3);
				OUT_ACC(4), OUT_ACC(5), OUT_ACC(6), OUT_ACC(7);
#undef OUT_ACC
			}
			_mm256_storeu_ps(c, a0), _mm256_storeu_ps(c + 8, a1);
			_mm256_storeu_ps(c + 16, a2), _mm256_storeu_ps(c + 24, a3);
			_mm256_storeu_ps(c + 32, a4), _mm256_storeu_ps(c + 40, a5);
			_mm256_storeu_ps(c + 48, a6), _mm256_storeu_ps(c + 56, a7);
		}
		for (; b < w; b++) { /* a last few outputs, one at a time */
			__m256 a = _mm256_loadu_ps(acc + b * 8);

			for (int p = t0; p < t1; p++)
				a = _mm256_fmadd_ps(_mm256_loadu_ps(sc + (size_t)p * 8),
				                    _mm256_broadcast_ss(vr[p - t0] + b), a);
			_mm256_storeu_ps(acc + b * 8, a);
		}
	}
}

/* acc[n] += blk[n] (n a multiple of 8): the next block's sums. */
void coli_attn8_fold_avx2(float *acc, const float *blk, int n)
{
	for (int i = 0; i < n; i += 8)
		_mm256_storeu_ps(acc + i,
		                 _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_loadu_ps(blk + i)));
}

/* acc [vd][8 lanes] -> out [nh][hd] (hd: the value dims), outputs [i0, i1). */
void coli_attn8_store(const float *acc, int nh, int hd, int i0, int i1, float *out)
{
	for (int h = 0; h < nh; h++)
		for (int i = i0; i < i1; i++)
			out[(size_t)h * hd + i] = acc[(i - i0) * 8 + h];
}

void coli_attn8_sink_max(const float *sink, int nh, float *mx8)
{
	for (int h = 0; h < 8; h++) {
		float s = sink[h < nh ? h : nh - 1];

		mx8[h] = s > mx8[h] ? s : mx8[h];
	}
}

void coli_attn8_sink_sum(const float *sink, int nh, const float *mx8, float *sum8)
{
	for (int h = 0; h < 8; h++)
		sum8[h] += expf_steps(sink[h < nh ? h : nh - 1] - mx8[h]);
}

/* One head's outputs over bf16 value rows [t0, t1) (a tile inside one
 * COLI_ATTN_OUT_BLOCK): b[i] = fma(w[p], v_p[i], b[i]) in position order,
 * 64 dims in registers at a time (vd a multiple of 8). */
static void head_out_bf16(const float *w, const struct coli_kv_rows *V, int t0, int t1, int vd,
                          float *b)
{
	int i = 0;

	for (; i + 64 <= vd; i += 64) {
		__m256 a0 = _mm256_loadu_ps(b + i), a1 = _mm256_loadu_ps(b + i + 8),
		       a2 = _mm256_loadu_ps(b + i + 16), a3 = _mm256_loadu_ps(b + i + 24),
		       a4 = _mm256_loadu_ps(b + i + 32), a5 = _mm256_loadu_ps(b + i + 40),
		       a6 = _mm256_loadu_ps(b + i + 48), a7 = _mm256_loadu_ps(b + i + 56);

		for (int p = t0; p < t1; p++) {
			const uint16_t *v = (const uint16_t *)coli_kv_rows_ptr(V, (size_t)p) + i;
			const __m256 wp = _mm256_set1_ps(w[p]);

#define HEAD_OUT(k) a##k = _mm256_fmadd_ps(wp, bf16x8(v + 8 * k), a##k)
			HEAD_OUT(0), HEAD_OUT(1), HEAD_OUT(2), HEAD_OUT(3);
			HEAD_OUT(4), HEAD_OUT(5), HEAD_OUT(6), HEAD_OUT(7);
#undef HEAD_OUT
		}
		_mm256_storeu_ps(b + i, a0), _mm256_storeu_ps(b + i + 8, a1);
		_mm256_storeu_ps(b + i + 16, a2), _mm256_storeu_ps(b + i + 24, a3);
		_mm256_storeu_ps(b + i + 32, a4), _mm256_storeu_ps(b + i + 40, a5);
		_mm256_storeu_ps(b + i + 48, a6), _mm256_storeu_ps(b + i + 56, a7);
	}
	for (; i < vd; i += 8) { /* a last few vectors, one at a time */
		__m256 a = _mm256_loadu_ps(b + i);

		for (int p = t0; p < t1; p++)
			a = _mm256_fmadd_ps(
			    _mm256_set1_ps(w[p]),
			    bf16x8((const uint16_t *)coli_kv_rows_ptr(V, (size_t)p) + i), a);
		_mm256_storeu_ps(b + i, a);
	}
}

/* One head in vectors (head sizes a multiple of 8; else its steps as
 * written, cpu/attn_head.h): bf16 keys eight positions a step (a position's
 * eight chains one vector, fold8 making eight scores), eight positions' exps
 * one expf8, the weights divided in vectors, an output's sums the lanes of
 * vectors of dims; the softmax sum stays scalar, in position order. */
void coli_attention_head_avx2(const float *q, const struct coli_kv_rows *K,
                              const struct coli_kv_rows *V, int n_pos, int hd, int vd, float scale,
                              float sink, float *scores, float *out)
{
	if (hd % 8 || vd % 8) {
		attention_head_steps(q, K, V, n_pos, hd, vd, scale, sink, scores, out);
		return;
	}
	const int kpf = kv_strided(K, hd), vpf = kv_strided(V, vd);
	float mx = -INFINITY, sum = 0, kt[hd], vt[vd], acc[vd], blk[vd];
	int p = 0;

	if (K->type == COLI_KV_BF16) { /* eight positions a step, one a vector's lanes */
		__m256 m8 = _mm256_set1_ps(-INFINITY);
		float ml[8];

		for (; p + 8 <= n_pos; p += 8) {
			const uint16_t *kb[8];
			__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0,
			       a5 = a0, a6 = a0, a7 = a0;

			for (int j = 0; j < 8; j++) {
				kb[j] = (const uint16_t *)coli_kv_rows_ptr(K, (size_t)(p + j));
				if (kpf && p + j + KV_PF_AHEAD < n_pos)
					kv_prefetch(K, (size_t)(p + j + KV_PF_AHEAD), 0, hd);
			}
			for (int i = 0; i < hd; i += 8) {
				const __m256 qv = _mm256_loadu_ps(q + i);

#define HEAD_FMA(j) a##j = _mm256_fmadd_ps(qv, bf16x8(kb[j] + i), a##j)
				HEAD_FMA(0), HEAD_FMA(1), HEAD_FMA(2), HEAD_FMA(3);
				HEAD_FMA(4), HEAD_FMA(5), HEAD_FMA(6), HEAD_FMA(7);
#undef HEAD_FMA
			}
			const __m256 s = _mm256_mul_ps(fold8(a0, a1, a2, a3, a4, a5, a6, a7),
			                               _mm256_set1_ps(scale));

			_mm256_storeu_ps(scores + p, s);
			m8 = _mm256_max_ps(s, m8); /* s > m ? s : m, the scalar's test */
		}
		_mm256_storeu_ps(ml, m8);
		for (int j = 0; j < 8; j++)
			mx = ml[j] > mx ? ml[j] : mx;
	}
	for (; p < n_pos; p++) {
		const float *k = kv_row(K, (size_t)p, 0, hd, kt);
		__m256 a = _mm256_setzero_ps();
		float l[8];

		if (kpf && p + KV_PF_AHEAD < n_pos)
			kv_prefetch(K, (size_t)(p + KV_PF_AHEAD), 0, hd);
		for (int i = 0; i < hd; i += 8)
			a = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(k + i), a);
		_mm256_storeu_ps(l, a);
		scores[p] =
		    (((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))) * scale;
		mx = scores[p] > mx ? scores[p] : mx;
	}
	if (sink != -INFINITY) /* none: the bits without */
		mx = sink > mx ? sink : mx;
	for (p = 0; p + 8 <= n_pos; p += 8)
		_mm256_storeu_ps(scores + p, expf8(_mm256_sub_ps(_mm256_loadu_ps(scores + p),
		                                                 _mm256_set1_ps(mx))));
	for (; p < n_pos; p++)
		scores[p] = expf_steps(scores[p] - mx);
	for (p = 0; p < n_pos; p++)
		sum += scores[p];
	if (sink != -INFINITY)
		sum += expf_steps(sink - mx);
	for (p = 0; p + 8 <= n_pos; p += 8) /* the weights: each exp over the sum */
		_mm256_storeu_ps(scores + p,
		                 _mm256_div_ps(_mm256_loadu_ps(scores + p), _mm256_set1_ps(sum)));
	for (; p < n_pos; p++)
		scores[p] /= sum;
	for (int p0 = 0; p0 < n_pos; p0 += COLI_ATTN_OUT_BLOCK) {
		const int p1 = n_pos - p0 < COLI_ATTN_OUT_BLOCK ? n_pos : p0 + COLI_ATTN_OUT_BLOCK;
		float *b = p0 ? blk : acc;

		memset(b, 0, sizeof(acc));
		if (V->type == COLI_KV_BF16) { /* tiles of positions, 64 dims in registers */
			for (int t0 = p0; t0 < p1; t0 += ATT_TILE) {
				const int t1 = p1 - t0 < ATT_TILE ? p1 : t0 + ATT_TILE;

				for (p = t0; p < t1; p++)
					if (vpf && p + KV_PF_AHEAD < n_pos)
						kv_prefetch(V, (size_t)(p + KV_PF_AHEAD), 0, vd);
				head_out_bf16(scores, V, t0, t1, vd, b);
			}
			goto block_done;
		}
		for (p = p0; p < p1; p++) {
			const float *v = kv_row(V, (size_t)p, 0, vd, vt);
			const __m256 w = _mm256_set1_ps(scores[p]);

			if (vpf && p + KV_PF_AHEAD < n_pos)
				kv_prefetch(V, (size_t)(p + KV_PF_AHEAD), 0, vd);
			for (int i = 0; i < vd; i += 8)
				_mm256_storeu_ps(b + i, _mm256_fmadd_ps(w, _mm256_loadu_ps(v + i),
				                                        _mm256_loadu_ps(b + i)));
		}
	block_done:
		if (p0)
			coli_attn8_fold_avx2(acc, blk, vd);
	}
	if (n_pos <= 0)
		memset(acc, 0, sizeof(acc));
	memcpy(out, acc, sizeof(acc));
}

void coli_attn8_weights(float *sc, int nh, int n_pos, const float *sink, float *mx8)
{
	float sum[8];

	if (sink)
		coli_attn8_sink_max(sink, nh, mx8);
	coli_attn8_exp_avx2(sc, nh, 0, n_pos, mx8);
	coli_attn8_sum_avx2(sc, n_pos, sum);
	if (sink)
		coli_attn8_sink_sum(sink, nh, mx8, sum);
	coli_attn8_div_avx2(sc, 0, n_pos, sum);
}

void coli_attn8_out_block(const float *sc, int nh, const struct coli_kv_rows *V, int p0, int n_pos,
                          int vd, float *acc, float *blk)
{
	const int p1 = n_pos - p0 < COLI_ATTN_OUT_BLOCK ? n_pos : p0 + COLI_ATTN_OUT_BLOCK;

	coli_attn8_out(sc, nh, V, p0, p1, 0, vd, p0 ? blk : acc);
	if (p0)
		coli_attn8_fold_avx2(acc, blk, vd * 8);
}

void coli_attention_group_avx2(const float *q, int G, const struct coli_kv_rows *K,
                               const struct coli_kv_rows *V, int n_pos, int hd, int vd, float scale,
                               const float *sink, float *sc, float *out)
{
	/* a last block of fewer than eight heads (G = 4: Mixtral) repeats its
	 * last head in the free lanes; a lane's steps never see another's */
	for (int h = 0; h < G; h += 8) {
		const int nh = G - h < 8 ? G - h : 8;
		float mx[8], acc[vd * 8], blk[vd * 8]; /* [vd][8 lanes]: outputs, a block's */

		coli_attn8_scores(q + (size_t)h * hd, nh, K, 0, n_pos, hd, scale, sc, mx);
		coli_attn8_weights(sc, nh, n_pos, sink ? sink + h : NULL, mx);
		for (int p0 = 0; p0 < n_pos; p0 += COLI_ATTN_OUT_BLOCK)
			coli_attn8_out_block(sc, nh, V, p0, n_pos, vd, acc, blk);
		if (n_pos <= 0)
			memset(acc, 0, sizeof(acc));
		coli_attn8_store(acc, nh, vd, 0, vd, out + (size_t)h * vd);
	}
}
