/*
 * cpu/kquant/kquant_panel_avx2.c — Q4_K and Q5_K times many activations on
 * AVX2, eight rows in the lanes of a vector: the canonical reduction
 * (cpu/kquant/kquant.c) without a horizontal sum.
 *
 * kquant_simd.h's GEMM holds one row's eight units in a vector, so each
 * unit's products must be summed across the vector (vphaddw trees) once per
 * activation. Here a panel of eight rows is unpacked once a call, into the
 * panel below: each unit's quants as bytes, the rows interleaved four quants
 * at a time (chunk c of unit u: row r's quants 4c..4c+3 at byte 4r), and
 * each unit's scale and min as vectors over the eight rows. Then, per
 * activation, a unit's integer sum for all eight rows is eight vpmaddubsw of
 * a chunk by the activation's four bytes broadcast, summed in int16 (Q4_K:
 * eight pairs of at most 2 x 15 x 127 = 3,810 a lane; Q5_K's 2 x 31 x 127
 * four at a time), then vpmaddwd by the scales: lane r = row r's A. The
 * fp32 steps are the reference's, lane by lane: fmaf(A, d * dx), then
 * fmaf(C, dmin * dx) with C = -m * qsum (|C| <= 63 x 4,064: exact in fp32),
 * into canonical lane b % 16, which is one of 16 vectors (each the eight
 * rows'); the canonical fold is then vertical adds. So y is kq_gemm's, bit
 * for bit (tests/cpu/kquant_gemv).
 *
 * The unpack costs about as much as five activations' dots (a 2048 x 2048
 * Q4_K matrix on a Zen 3 core: 0.23 ms, and 0.068 ms an activation against
 * kq_gemm's 0.122), so kquant_avx2.c takes this path from
 * COLI_KQ_PANEL_MIN_S activations.
 */
#include <immintrin.h>
#include <string.h>

#include "cpu/cpu_internal.h"

#define INLINE static inline __attribute__((always_inline))

#define PANEL_MAX_U (COLI_KQ_PANEL_MAX_K / 32)
#define PANEL_MAX_B (COLI_KQ_PANEL_MAX_K / 256)

struct panel {
	uint8_t q[PANEL_MAX_U * 256];  /* unit u's 8 chunks of 32 bytes at 256 u */
	int16_t sc[PANEL_MAX_U * 16];  /* unit u: row r's group scale at 16 u + 2r, 2r + 1 */
	float mn[PANEL_MAX_U * 8];     /* unit u: minus row r's group min at 8 u + r */
	float d[PANEL_MAX_B * 8];      /* block i: row r's d at 8 i + r */
	float dm[PANEL_MAX_B * 8];     /* and its dmin */
};

/* out[c] dword r = v[r] dword c (an 8 x 8 dword transpose, in place) */
INLINE void transpose8x32(__m256i v[8])
{
	__m256i t[8], u[8];

	for (int i = 0; i < 4; i++) {
		t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
		t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
	}
	for (int i = 0; i < 2; i++) {
		u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
		u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
		u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
	}
	for (int i = 0; i < 4; i++) {
		v[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
		v[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
	}
}

/* out[g] int16 r = v[r] int16 g (8 x 8 int16, in place) */
INLINE void transpose8x16(__m128i v[8])
{
	__m128i a[8], b[8];

	for (int i = 0; i < 4; i++) {
		a[2 * i] = _mm_unpacklo_epi16(v[2 * i], v[2 * i + 1]);
		a[2 * i + 1] = _mm_unpackhi_epi16(v[2 * i], v[2 * i + 1]);
	}
	for (int i = 0; i < 2; i++) {
		b[4 * i] = _mm_unpacklo_epi32(a[4 * i], a[4 * i + 2]);
		b[4 * i + 1] = _mm_unpackhi_epi32(a[4 * i], a[4 * i + 2]);
		b[4 * i + 2] = _mm_unpacklo_epi32(a[4 * i + 1], a[4 * i + 3]);
		b[4 * i + 3] = _mm_unpackhi_epi32(a[4 * i + 1], a[4 * i + 3]);
	}
	for (int i = 0; i < 4; i++) {
		v[2 * i] = _mm_unpacklo_epi64(b[i], b[i + 4]);
		v[2 * i + 1] = _mm_unpackhi_epi64(b[i], b[i + 4]);
	}
}

/* Block i of rows row[0..8) (Q4_K, or Q5_K when five) into the panel. */
INLINE void unpack_block(const uint8_t *const *row, int i, int five, struct panel *p)
{
	const size_t bb = five ? 176 : 144;
	const __m256i m4 = _mm256_set1_epi8(0x0f), b4 = _mm256_set1_epi8(0x10);
	__m128i sc[8], mn[8];

	for (int r = 0; r < 8; r++) {
		const uint8_t *bp = row[r] + i * bb;
		uint32_t u[3];

		p->d[8 * i + r] = _cvtsh_ss((uint16_t)(bp[0] | bp[1] << 8));
		p->dm[8 * i + r] = _cvtsh_ss((uint16_t)(bp[2] | bp[3] << 8));
		memcpy(u, bp + 4, 12); /* coli_kq_scale_min's fields, four groups at a time */
		sc[r] = _mm_cvtepu8_epi16(_mm_set_epi32(
		    0, 0, (int)((u[2] & 0x0f0f0f0fu) | (u[0] >> 6 & 0x03030303u) << 4),
		    (int)(u[0] & 0x3f3f3f3fu)));
		mn[r] = _mm_cvtepu8_epi16(_mm_set_epi32(
		    0, 0, (int)((u[2] >> 4 & 0x0f0f0f0fu) | (u[1] >> 6 & 0x03030303u) << 4),
		    (int)(u[1] & 0x3f3f3f3fu)));
	}
	transpose8x16(sc); /* sc[g] = group g's scale of rows 0..7 */
	transpose8x16(mn);
	for (int g = 0; g < 8; g++) {
		const int u = 8 * i + g;

		_mm256_store_si256((__m256i *)(p->sc + 16 * u),
		                   _mm256_set_m128i(_mm_unpackhi_epi16(sc[g], sc[g]),
		                                    _mm_unpacklo_epi16(sc[g], sc[g])));
		_mm256_store_ps(p->mn + 8 * u,
		                _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_setzero_si256(),
		                                                    _mm256_cvtepi16_epi32(mn[g]))));
	}
	/* groups 2j and 2j + 1 share 32 quant bytes: low and high nibbles (Q5_K:
	 * bit g of qh[l] is element l's fifth bit in group g) */
	for (int j = 0; j < 4; j++) {
		__m256i lo[8], hi[8];

		for (int r = 0; r < 8; r++) {
			const uint8_t *bp = row[r] + i * bb;
			const __m256i q = _mm256_loadu_si256((const __m256i *)(bp + (five ? 48 : 16) + 32 * j));

			lo[r] = _mm256_and_si256(q, m4);
			hi[r] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
			if (five) {
				const __m256i h = _mm256_loadu_si256((const __m256i *)(bp + 16));

				lo[r] = _mm256_or_si256(lo[r], _mm256_and_si256(_mm256_slli_epi16(
				                                                    _mm256_srli_epi16(h, 2 * j), 4), b4));
				hi[r] = _mm256_or_si256(hi[r], _mm256_and_si256(_mm256_slli_epi16(
				                                                    _mm256_srli_epi16(h, 2 * j + 1), 4), b4));
			}
		}
		transpose8x32(lo);
		transpose8x32(hi);
		for (int c = 0; c < 8; c++) {
			_mm256_store_si256((__m256i *)(p->q + 256 * (8 * i + 2 * j) + 32 * c), lo[c]);
			_mm256_store_si256((__m256i *)(p->q + 256 * (8 * i + 2 * j + 1) + 32 * c), hi[c]);
		}
	}
}

/* chunk c of unit u times the activation's quants 4c..4c+3, pairs in int16 */
#define PAIRS(q, xq, c)                                                                            \
	_mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)((q) + 32 * (c))),                \
	                     _mm256_set1_epi32(*(const int32_t *)((xq) + 4 * (c))))

/* Unit u's A for the eight rows: int16 sums of eight pairs a lane (Q4_K) or
 * of four (Q5_K: 4 x 7,874), scaled into int32 by vpmaddwd. */
INLINE __m256i unit_a(const uint8_t *q, const int8_t *xq, __m256i sc, int five)
{
	__m256i a = PAIRS(q, xq, 0), b;

	for (int c = 1; c < 4; c++)
		a = _mm256_add_epi16(a, PAIRS(q, xq, c));
	b = PAIRS(q, xq, 4);
	for (int c = 5; c < 8; c++)
		b = _mm256_add_epi16(b, PAIRS(q, xq, c));
	if (!five)
		return _mm256_madd_epi16(_mm256_add_epi16(a, b), sc);
	return _mm256_add_epi32(_mm256_madd_epi16(a, sc), _mm256_madd_epi16(b, sc));
}

/* y[0..8) of the panel's rows for activations x[0..ns) (ns 1 or 2), the
 * canonical lanes l[s][16] held as vectors of the eight rows */
INLINE void panel_dot(const struct panel *p, int nu, const struct coli_act *const *x, int ns,
                      int five, float *const *y)
{
	__m256 l[2][16];

	for (int s = 0; s < ns; s++)
		for (int k = 0; k < 16; k++)
			l[s][k] = _mm256_setzero_ps();
	for (int u = 0; u < nu; u++) {
		const uint8_t *q = p->q + 256 * u;
		const __m256i sc = _mm256_load_si256((const __m256i *)(p->sc + 16 * u));
		const __m256 d = _mm256_load_ps(p->d + 8 * (u / 8)), dm = _mm256_load_ps(p->dm + 8 * (u / 8));
		const __m256 mn = _mm256_load_ps(p->mn + 8 * u);

#pragma GCC unroll 2
		for (int s = 0; s < ns; s++) {
			const __m256 dx = _mm256_set1_ps(x[s]->d[u]);
			const __m256 A = _mm256_cvtepi32_ps(unit_a(q, x[s]->q + 32 * u, sc, five));
			const __m256 C = _mm256_mul_ps(mn, _mm256_set1_ps((float)x[s]->qsum[u]));
			__m256 *lk = &l[s][u % 16];

			*lk = _mm256_fmadd_ps(A, _mm256_mul_ps(d, dx), *lk);
			*lk = _mm256_fmadd_ps(C, _mm256_mul_ps(dm, dx), *lk);
		}
	}
	for (int s = 0; s < ns; s++) {
		for (int h = 8; h >= 1; h /= 2) /* the canonical fold */
			for (int k = 0; k < h; k++)
				l[s][k] = _mm256_add_ps(l[s][k], l[s][k + h]);
		_mm256_storeu_ps(y[s], l[s][0]);
	}
}

INLINE int panel_rows(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                      size_t ldy, int row0, int row1, int five)
{
	const int K = w->cols;
	const size_t rb = coli_dtype_row_bytes(w->dtype, (size_t)K);
	struct panel p __attribute__((aligned(32)));
	int r = row0;

	for (; r + 8 <= row1; r += 8) {
		const uint8_t *row[8];
		float t[2][8];

		for (int k = 0; k < 8; k++)
			row[k] = (const uint8_t *)w->data + (size_t)(r + k) * rb;
		for (int i = 0; i < K / 256; i++)
			unpack_block(row, i, five, &p);
		for (int s = 0; s < S; s += 2) {
			const int ns = S - s < 2 ? 1 : 2;
			const struct coli_act *xs[2] = {&x[s], &x[s + ns - 1]};
			float *ys[2] = {t[0], t[1]};

			if (ns == 2)
				panel_dot(&p, K / 32, xs, 2, five, ys);
			else
				panel_dot(&p, K / 32, xs, 1, five, ys);
			for (int j = 0; j < ns; j++)
				for (int k = 0; k < 8; k++)
					y[(size_t)(s + j) * ldy + (r - row0) + k] = t[j][k];
		}
	}
	return r;
}

int coli_kq_panel_avx2(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                       size_t ldy, int row0, int row1)
{
	if (w->cols > COLI_KQ_PANEL_MAX_K)
		return row0;
	if (w->dtype == COLI_DTYPE_Q4_K)
		return panel_rows(w, x, S, y, ldy, row0, row1, 0);
	if (w->dtype == COLI_DTYPE_Q5_K)
		return panel_rows(w, x, S, y, ldy, row0, row1, 1);
	return row0;
}
