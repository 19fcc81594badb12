/*
 * cpu/attn/attention_avx512.c — the two heaviest steps of a GQA unit's decode
 * attention (cpu/attn/attention_avx2.c) with 512-bit vectors, for a unit of
 * more than four heads over a bf16 cache, or a q8 one whose head's dims
 * share a scale: the scores of four positions a step (two a vector), the
 * outputs' sums sixteen dims a step. Each lane runs the AVX2 form's chain of
 * fmas in its order, so each head's bits are still coli_attention_head's;
 * everything else (fewer heads, an f32 cache, head sizes not a multiple of
 * 8 or 16) goes to the AVX2 steps.
 *
 * Why: per fma the AVX2 forms issue a load (a q vector, or a weight
 * broadcast) and keep eight chains that wait on the fma's latency. Here a
 * q vector serves four positions and a weight sixteen dims: on a Zen 4
 * (whose 512-bit fma is two 256-bit halves) the outputs ran 1.3-1.5x
 * faster in cache, the scores as fast as AVX2's; a core with two 512-bit
 * fma units (Sapphire Rapids) has twice the peak besides (unmeasured:
 * docs/perf/kernels.md).
 */
#include <immintrin.h>
#include <string.h>

#include "cpu/attn_head.h"
#include "cpu/simd_avx2.h"

/* [eight dims from i of row a | of row b] as fp32: bf16 widened, or q8
 * times its row's scale (the decode's one rounded product) */
static inline __m512 bf16x2x8(const uint16_t *a, const uint16_t *b)
{
	const __m256i t =
	    _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
	                            _mm_loadu_si128((const __m128i *)b), 1);

	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(t), 16));
}

static inline __m512 q8x2x8(const signed char *a, const signed char *b, __m512 scales)
{
	const __m128i t = _mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)a),
	                                     _mm_loadl_epi64((const __m128i *)b));

	return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(t)), scales);
}

/* Eight heads' dot products with the keys of four positions (hd a
 * multiple of 8), each in the AVX2 form's eight chains (dims 8v + c in
 * lane c, v in order), a position in each half of a vector (a: the first
 * two, b: the last two), each q vector loaded once for the four; folded by
 * fold8's order into s[0..3] (a position's eight heads each). */
#define SCORES4(load)                                                                              \
	do {                                                                                       \
		__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0,      \
		       a6 = a0, a7 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0,     \
		       b6 = a0, b7 = a0;                                                           \
		for (int i = 0; i < hd; i += 8) {                                                  \
			const __m512 ka = load(0, 1), kb = load(2, 3);                             \
			SC_FMA(0), SC_FMA(1), SC_FMA(2), SC_FMA(3);                                \
			SC_FMA(4), SC_FMA(5), SC_FMA(6), SC_FMA(7);                                \
		}                                                                                  \
		s[0] = fold8(LO(a0), LO(a1), LO(a2), LO(a3), LO(a4), LO(a5), LO(a6), LO(a7));      \
		s[1] = fold8(HI(a0), HI(a1), HI(a2), HI(a3), HI(a4), HI(a5), HI(a6), HI(a7));      \
		s[2] = fold8(LO(b0), LO(b1), LO(b2), LO(b3), LO(b4), LO(b5), LO(b6), LO(b7));      \
		s[3] = fold8(HI(b0), HI(b1), HI(b2), HI(b3), HI(b4), HI(b5), HI(b6), HI(b7));      \
	} while (0)
#define SC_FMA(h)                                                                                  \
	qv = _mm512_broadcast_f32x8(_mm256_loadu_ps(qh[h] + i)),                                   \
	a##h = _mm512_fmadd_ps(qv, ka, a##h), b##h = _mm512_fmadd_ps(qv, kb, b##h)
#define LO(v) _mm512_castps512_ps256(v)
#define HI(v) _mm512_extractf32x8_ps(v, 1)

void coli_attn8_scores_avx512(const float *q, int nh, const struct coli_kv_rows *K, int p0, int p1,
                              int hd, float scale, float *sc, float *mx8)
{
	const int bf = K->type == COLI_KV_BF16, q8 = kv_q8_one_scale(K, 0, hd);

	if (nh <= 4 || hd % 8 || !(bf || q8) || p1 - p0 < 4) {
		coli_attn8_scores_avx2(q, nh, K, p0, p1, hd, scale, sc, mx8);
		return;
	}
	const __m256 vscale = _mm256_set1_ps(scale);
	const int pf = kv_strided(K, hd), p2 = p0 + (p1 - p0) / 4 * 4;
	__m256 mx = _mm256_set1_ps(-__builtin_inff());
	const float *qh[8];
	float tail[8];

	for (int h = 0; h < 8; h++)
		qh[h] = q + (size_t)(h < nh ? h : nh - 1) * hd;
	for (int p = p0; p < p2; p += 4) {
		const char *r[4];
		__m256 s[4];
		__m512 qv;

		for (int j = 0; j < 4; j++) {
			r[j] = coli_kv_rows_ptr(K, (size_t)(p + j));
			if (pf && p + j + KV_PF_AHEAD < p1)
				kv_prefetch(K, (size_t)(p + j + KV_PF_AHEAD), 0, hd);
		}
		if (bf) {
#define LOAD_BF16(x, y) bf16x2x8((const uint16_t *)r[x] + i, (const uint16_t *)r[y] + i)
			SCORES4(LOAD_BF16);
#undef LOAD_BF16
		} else {
			const __m512 s01 = _mm512_insertf32x8(
			                 _mm512_set1_ps(kv_q8_scale(K, r[0], 0)),
			                 _mm256_set1_ps(kv_q8_scale(K, r[1], 0)), 1),
			             s23 = _mm512_insertf32x8(
			                 _mm512_set1_ps(kv_q8_scale(K, r[2], 0)),
			                 _mm256_set1_ps(kv_q8_scale(K, r[3], 0)), 1);
#define LOAD_Q8(x, y)                                                                              \
	q8x2x8((const signed char *)r[x] + i, (const signed char *)r[y] + i, (x) ? s23 : s01)
			SCORES4(LOAD_Q8);
#undef LOAD_Q8
		}
		for (int j = 0; j < 4; j++) {
			s[j] = _mm256_mul_ps(s[j], vscale);
			_mm256_storeu_ps(sc + (size_t)(p + j) * 8, s[j]);
			mx = _mm256_max_ps(s[j],
			                   mx); /* s > mx ? s : mx, the scalar's test, in order */
		}
	}
	_mm256_storeu_ps(mx8, mx);
	if (p2 < p1) { /* a last 1-3 positions: the AVX2 steps, its max joined in order */
		coli_attn8_scores_avx2(q, nh, K, p2, p1, hd, scale, sc, tail);
		_mm256_storeu_ps(mx8, _mm256_max_ps(_mm256_loadu_ps(tail), mx));
	}
}
#undef SC_FMA
#undef LO
#undef HI
#undef SCORES4

/* The outputs' sums of one COLI_ATTN_OUT_BLOCK's positions [p0, p1) for
 * eight heads over dims [i0, i0 + w) (w a multiple of 16), each from zero,
 * into acc [w][8 heads]: sixteen dims of the eight heads (eight vectors in
 * registers) over a tile of positions at a time, a weight broadcast per
 * head and position; each output the AVX2 form's chain of fmas in position
 * order. */
void coli_attn8_out_avx512(const float *sc, int nh, const struct coli_kv_rows *V, int p0, int p1,
                           int i0, int i1, float *acc)
{
	const int w = i1 - i0, q8 = kv_q8_one_scale(V, i0, w);

	if (nh <= 4 || w <= 0 || w % 16 || !(V->type == COLI_KV_BF16 || q8)) {
		coli_attn8_out_avx2(sc, nh, V, p0, p1, i0, i1, acc);
		return;
	}
	float at[8][w], vs[ATT_TILE];
	const char *vp[ATT_TILE];

	memset(at, 0, sizeof(at));
	for (int t0 = p0; t0 < p1; t0 += ATT_TILE) {
		const int t1 = p1 - t0 < ATT_TILE ? p1 : t0 + ATT_TILE;

		for (int p = t0; p < t1; p++) {
			const char *row = coli_kv_rows_ptr(V, (size_t)p);

			vp[p - t0] = row + (size_t)i0 * (q8 ? 1 : 2);
			vs[p - t0] = q8 ? kv_q8_scale(V, row, i0) : 0;
		}
#define OUT_FMA(h) a##h = _mm512_fmadd_ps(_mm512_set1_ps(wp[h]), v, a##h)
#define OUT16(load)                                                                                \
	for (int b = 0; b < w; b += 16) {                                                          \
		kv_prefetch_part(V, t1, ATT_TILE, p1, b / 16, w / 16, i0, w);                      \
		__m512 a0 = _mm512_loadu_ps(&at[0][b]), a1 = _mm512_loadu_ps(&at[1][b]),           \
		       a2 = _mm512_loadu_ps(&at[2][b]), a3 = _mm512_loadu_ps(&at[3][b]),           \
		       a4 = _mm512_loadu_ps(&at[4][b]), a5 = _mm512_loadu_ps(&at[5][b]),           \
		       a6 = _mm512_loadu_ps(&at[6][b]), a7 = _mm512_loadu_ps(&at[7][b]);           \
		for (int p = t0; p < t1; p++) {                                                    \
			const float *wp = sc + (size_t)p * 8;                                      \
			const __m512 v = (load);                                                   \
			OUT_FMA(0), OUT_FMA(1), OUT_FMA(2), OUT_FMA(3);                            \
			OUT_FMA(4), OUT_FMA(5), OUT_FMA(6), OUT_FMA(7);                            \
		}                                                                                  \
		_mm512_storeu_ps(&at[0][b], a0), _mm512_storeu_ps(&at[1][b], a1);                  \
		_mm512_storeu_ps(&at[2][b], a2), _mm512_storeu_ps(&at[3][b], a3);                  \
		_mm512_storeu_ps(&at[4][b], a4), _mm512_storeu_ps(&at[5][b], a5);                  \
		_mm512_storeu_ps(&at[6][b], a6), _mm512_storeu_ps(&at[7][b], a7);                  \
	}
		if (q8) {
			OUT16(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(
			                        (const __m128i *)(vp[p - t0] + b)))),
			                    _mm512_set1_ps(vs[p - t0])))
		} else {
			OUT16(_mm512_castsi512_ps(_mm512_slli_epi32(
			    _mm512_cvtepu16_epi32(_mm256_loadu_si256(
			        (const __m256i *)((const uint16_t *)vp[p - t0] + b))),
			    16)))
		}
#undef OUT16
#undef OUT_FMA
	}
	for (int i = 0; i < w; i++)
		for (int h = 0; h < 8; h++)
			acc[i * 8 + h] = at[h][i];
}
