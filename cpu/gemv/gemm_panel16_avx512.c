/*
 * cpu/gemv/gemm_panel16_avx512.c — Q4_0, Q8_0 and the K-quants times many
 * activations (a prefill chunk's experts and projections) on AVX-512 VNNI
 * with sixteen rows in a 512-bit vector's lanes: cpu/gemv/gemm_panel.h's
 * panel at twice the rows, walked once for four activations instead of
 * two; Q8_0 the same way, its quants plus 128 as the unsigned bytes (the
 * row kernels it replaces from COLI_PANEL_MIN_S_Q8_0 activations sum each
 * row apart). Q6_K's and Q3_K's quants are signed, and the eight-row panel's
 * |w| by x with w's sign needs vpsignb, which has no 512-bit form: here the
 * activation is the unsigned side instead, x + 128 (one xor a walk of the
 * panel), against the signed quants, and each group of 16 loses 128 times
 * its quants' sum, a row's constant taken once a panel (ko below).
 * GGUF's 32-element block types (Q4_1, Q5_0, Q5_1: rows whose length is not
 * a multiple of 256) take it as Q4_0 does, their quants unsigned (Q5_0
 * less 16 qsum), Q4_1 / Q5_1 then fmaf(qsum, m * dx) a unit.
 *
 * Why: the eight-row panel issues three loads (the chunk, two activations'
 * broadcast fours) for two vpdpbusd of 32 products; here five loads feed
 * four vpdpbusd of 64, and the fp32 steps after each unit cover sixteen
 * rows a vector. A Zen 4 core runs a 512-bit vpdpbusd as two 256-bit halves,
 * so the products a cycle are the same; what shrinks is the loads and
 * instructions around them.
 *
 * The panel: chunk c of unit u (quants 4c..4c+3 of the sixteen rows, row r's
 * at byte 4r) at 512 u + 64 c, written as two eight-row halves by
 * cpu/gemv/panel_unpack.h's unpacks, and the scales beside it, sixteen
 * rows a vector. Per activation s and unit u, lane r of the vpdpbusd sum is
 * row r's sum of quant x activation (exact in int32): Q4_0 minus 8 qsum and
 * Q8_0 minus 128 qsum give the unit's integer sum, Q4_K / Q5_K times the
 * unit's 6-bit scale its A, Q2_K each group of 16 times its scale. The fp32
 * steps are the reference's lane by lane, units in order: fmaf(A, d * dx)
 * into canonical lane u % 16 (Q4_K, Q5_K: then fmaf(-m qsum, dmin * dx);
 * Q2_K: fmaf(C, dmin * dx), C = -sum_g m_g sum_{i in g} x_i), then the
 * canonical fold. So y is
 * coli_gemm's, bit for bit (tests/cpu/gemm_matches_gemv, tests/cpu/kquant_gemv).
 */
#include <immintrin.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "cpu/gemv/panel_unpack.h"

#define P16_MAX_U (COLI_PANEL_MAX_K / 32)
#define P16_MAX_B (COLI_PANEL_MAX_K / 256)
#define P16_NS    4 /* activations a walk of the panel */

enum p16_kind {
	P16_Q40,
	P16_Q80,
	P16_Q45K,
	P16_Q2K,
	P16_SGN, /* Q6_K, Q3_K */
	P16_Q50, /* Q5_0 */
	P16_Q41, /* Q4_1, Q5_1: a min */
};

struct panel16 {
	uint8_t q[P16_MAX_U * 512]; /* unit u's chunk c at 512 u + 64 c */
	float du[P16_MAX_U * 16];   /* 32-element units: unit u's d of row r at 16 u + r */
	int16_t sc[P16_MAX_U * 32]; /* K-quants: unit u's scale of row r at 32 u + 2r, 2r + 1 */
	int16_t sc2[P16_MAX_U * 32]; /* Q2_K: its second group's */
	float mn[P16_MAX_U * 16];   /* Q4_K, Q5_K: its min, negated; Q4_1, Q5_1: its m */
	uint8_t mb[P16_MAX_U * 128]; /* Q2_K: group g's mins, row r's at bytes 4r..4r+3 of
	                              * 128 u + 64 g */
	float d[P16_MAX_B * 16];    /* ... block i's d and dmin of row r at 16 i + r */
	float dm[P16_MAX_B * 16];
	int32_t ko[P16_MAX_U * 16]; /* Q6_K, Q3_K: unit u's 128 (s1 sum w1 + s2 sum w2), row r
	                             * at 16 u + r (w1, w2: its groups' signed quants) */
};

/* The panel's rows' y for activations x[0..NS), y[s][0..16): each unit's
 * integer sums, then at once its fp32 steps into lane u % 16 (a lane's
 * units in order: the canonical order). */
PANEL_INLINE void dot16(const struct panel16 *p, int nu, const struct coli_act *const *x,
                        const int NS, const enum p16_kind kind, float (*y)[16])
{
	const __m512i zero = _mm512_setzero_si512();
	__m512 l[P16_NS][16];

	for (int s = 0; s < NS; s++)
		for (int k = 0; k < 16; k++)
			l[s][k] = _mm512_setzero_ps();
	for (int u = 0; u < nu; u++) {
		const uint8_t *q = p->q + 512 * u;
		/* h: the unit's sums (two-group kinds: its first group of 16), g:
		 * their second group, m: Q2_K's min term, sum_g m_g sum_{i in g} x_i */
		__m512i h[P16_NS] = {zero, zero, zero, zero}, g[P16_NS] = {zero, zero, zero, zero},
		        m[P16_NS] = {zero, zero, zero, zero};

#pragma GCC unroll 8
		for (int c = 0; c < 8; c++) {
			const __m512i w = _mm512_load_si512((const void *)(q + 64 * c));
			const __m512i mg = kind == P16_Q2K ? _mm512_load_si512((const void *)(
			                                         p->mb + 128 * u + 64 * (c / 4)))
			                                   : zero;

#pragma GCC unroll 4
			for (int s = 0; s < NS; s++) {
				const __m512i xb =
				    _mm512_set1_epi32(*(const int32_t *)(x[s]->q + 32 * u + 4 * c));

				if (kind == P16_SGN && c >= 4) /* x + 128 unsigned by signed w */
					g[s] = _mm512_dpbusd_epi32(g[s], xb, w);
				else if (kind == P16_SGN)
					h[s] = _mm512_dpbusd_epi32(h[s], xb, w);
				else if (kind == P16_Q2K && c >= 4)
					g[s] = _mm512_dpbusd_epi32(g[s], w, xb);
				else
					h[s] = _mm512_dpbusd_epi32(h[s], w, xb);
				if (kind == P16_Q2K)
					m[s] = _mm512_dpbusd_epi32(m[s], mg, xb);
			}
		}
		const int unit_d = kind == P16_Q40 || kind == P16_Q80 || kind == P16_Q50 ||
		                   kind == P16_Q41; /* a d a unit, not a block */
		const __m512 d = _mm512_load_ps(unit_d ? p->du + 16 * u : p->d + 16 * (u / 8));

#pragma GCC unroll 4
		for (int s = 0; s < NS; s++) {
			const __m512 dx = _mm512_set1_ps(x[s]->d[u]);
			__m512 *lk = &l[s][u % 16];
			__m512i A;

			if (!unit_d) /* scales: >> 16 of their int16 pairs */
				A = _mm512_mullo_epi32(
				    h[s], _mm512_srai_epi32(_mm512_load_si512((const void *)(p->sc + 32 * u)),
				                            16));
			else if (kind == P16_Q41) /* unsigned quants and a min: no offset */
				A = h[s];
			else /* the quants' offset: 8 (Q4_0), 16 (Q5_0) or 128 (Q8_0) times qsum */
				A = _mm512_sub_epi32(h[s], _mm512_set1_epi32((kind == P16_Q80   ? 128
				                                              : kind == P16_Q50 ? 16
				                                                                : 8) *
				                                             x[s]->qsum[u]));
			if (kind == P16_Q2K || kind == P16_SGN)
				A = _mm512_add_epi32(
				    A, _mm512_mullo_epi32(
				           g[s], _mm512_srai_epi32(
				                     _mm512_load_si512((const void *)(p->sc2 + 32 * u)), 16)));
			if (kind == P16_SGN) /* the sums of (x + 128) w, less 128 sum w */
				A = _mm512_sub_epi32(A, _mm512_load_si512((const void *)(p->ko + 16 * u)));
			*lk = _mm512_fmadd_ps(_mm512_cvtepi32_ps(A), _mm512_mul_ps(d, dx), *lk);
			if (kind == P16_Q2K) /* C = -m (|C| <= 15 x 32 x 127), by dmin * dx */
				*lk = _mm512_fmadd_ps(
				    _mm512_cvtepi32_ps(_mm512_sub_epi32(zero, m[s])),
				    _mm512_mul_ps(_mm512_load_ps(p->dm + 16 * (u / 8)), dx), *lk);
			if (kind == P16_Q41) /* qsum by m * dx (kq_q32_group's second fma) */
				*lk = _mm512_fmadd_ps(
				    _mm512_cvtepi32_ps(_mm512_set1_epi32(x[s]->qsum[u])),
				    _mm512_mul_ps(_mm512_load_ps(p->mn + 16 * u), dx), *lk);
			if (kind == P16_Q45K) { /* C = -m * qsum (exact), by dmin * dx */
				const __m512 cm =
				    _mm512_mul_ps(_mm512_load_ps(p->mn + 16 * u),
				                  _mm512_cvtepi32_ps(_mm512_set1_epi32(x[s]->qsum[u])));

				*lk = _mm512_fmadd_ps(
				    cm, _mm512_mul_ps(_mm512_load_ps(p->dm + 16 * (u / 8)), dx), *lk);
			}
		}
	}
	for (int s = 0; s < NS; s++) {
		for (int hh = 8; hh >= 1; hh /= 2) /* the canonical fold */
#pragma GCC unroll 8
			for (int k = 0; k < hh; k++)
				l[s][k] = _mm512_add_ps(l[s][k], l[s][k + hh]);
		_mm512_storeu_ps(y[s], l[s][0]);
	}
}

/* dot16 for a kind with NS constant, and for ns activations: each call
 * below has constant arguments, so the steps other kinds and counts need
 * fold away. */
PANEL_INLINE void dot16_kind(const struct panel16 *p, int nu, const struct coli_act *const *x,
                             const int NS, enum p16_kind kind, float (*y)[16])
{
	switch (kind) {
	case P16_Q40:
		dot16(p, nu, x, NS, P16_Q40, y);
		return;
	case P16_Q80:
		dot16(p, nu, x, NS, P16_Q80, y);
		return;
	case P16_Q2K:
		dot16(p, nu, x, NS, P16_Q2K, y);
		return;
	case P16_SGN:
		dot16(p, nu, x, NS, P16_SGN, y);
		return;
	case P16_Q50:
		dot16(p, nu, x, NS, P16_Q50, y);
		return;
	case P16_Q41:
		dot16(p, nu, x, NS, P16_Q41, y);
		return;
	default:
		dot16(p, nu, x, NS, P16_Q45K, y);
	}
}

static void dot16_any(const struct panel16 *p, int nu, const struct coli_act *const *x, int ns,
                      enum p16_kind kind, float (*y)[16])
{
	switch (ns) {
	case 1:
		dot16_kind(p, nu, x, 1, kind, y);
		return;
	case 2:
		dot16_kind(p, nu, x, 2, kind, y);
		return;
	case 3:
		dot16_kind(p, nu, x, 3, kind, y);
		return;
	default:
		dot16_kind(p, nu, x, 4, kind, y);
	}
}

/* Rows r .. r + 15 of w into the panel, as two eight-row halves. */
static void unpack16(const struct coli_mat *w, int r, enum p16_kind kind, struct panel16 *p)
{
	const int K = w->cols, nu = K / 32;
	const size_t rb = coli_dtype_row_bytes(w->dtype, (size_t)K);

	for (int h = 0; h < 2; h++) { /* rows r + 8h .. + 7: the lanes' halves */
		if (kind == P16_Q80) {
			unpack_q8_0(w, r + 8 * h, nu, p->q + 32 * h, 512, 64, p->du + 8 * h, 16, 1);
		} else if (kind == P16_Q40) {
			unpack_q4_0(w, r + 8 * h, nu, p->q + 32 * h, 512, 64, p->du + 8 * h, 16);
		} else if (kind == P16_Q50 || kind == P16_Q41) {
			unpack_q32(w, r + 8 * h, nu, p->q + 32 * h, 512, 64, p->du + 8 * h,
			           p->mn + 8 * h, 16);
		} else {
			const struct panel_dst o = {p->q + 32 * h,  512,           64,
			                            p->sc + 16 * h, p->sc2 + 16 * h, 32,
			                            p->mn + 8 * h,  16,            p->d + 8 * h,
			                            p->dm + 8 * h,  16,            p->mb + 32 * h,
			                            128,            64};
			const uint8_t *row[8];

			for (int k = 0; k < 8; k++)
				row[k] = (const uint8_t *)w->data + (size_t)(r + 8 * h + k) * rb;
			for (int i = 0; i < K / 256; i++)
				if (w->dtype == COLI_DTYPE_Q6_K)
					unpack_q6k_block(row, i, &o);
				else if (kind == P16_Q2K || kind == P16_SGN)
					unpack_q23k_block(row, i, kind == P16_SGN, &o);
				else
					unpack_q45k_block(row, i, w->dtype == COLI_DTYPE_Q5_K, &o);
		}
	}
	if (kind != P16_SGN)
		return;
	/* ko: each unit's 128 (s1 sum w1 + s2 sum w2) a row, its groups' quant
	 * sums by vpdpbusd of ones (|ko| <= 128 x 2 x 128 x 16 x 32 < 2^31) */
	for (int u = 0; u < nu; u++) {
		const __m512i one = _mm512_set1_epi8(1);
		__m512i w1 = _mm512_setzero_si512(), w2 = w1;

		for (int c = 0; c < 8; c++) {
			const __m512i q = _mm512_load_si512((const void *)(p->q + 512 * u + 64 * c));

			if (c < 4)
				w1 = _mm512_dpbusd_epi32(w1, one, q);
			else
				w2 = _mm512_dpbusd_epi32(w2, one, q);
		}
		const __m512i s1 = _mm512_srai_epi32(_mm512_load_si512((const void *)(p->sc + 32 * u)), 16),
		              s2 = _mm512_srai_epi32(_mm512_load_si512((const void *)(p->sc2 + 32 * u)), 16);

		_mm512_store_si512((void *)(p->ko + 16 * u),
		                   _mm512_slli_epi32(_mm512_add_epi32(_mm512_mullo_epi32(w1, s1),
		                                                      _mm512_mullo_epi32(w2, s2)),
		                                     7));
	}
}

int coli_gemm_panel16_avx512(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                             size_t ldy, int row0, int row1)
{
	const int K = w->cols, nu = K / 32;
	const enum p16_kind kind = w->dtype == COLI_DTYPE_Q8_0   ? P16_Q80
	                           : w->dtype == COLI_DTYPE_Q4_0 ? P16_Q40
	                           : w->dtype == COLI_DTYPE_Q2_K ? P16_Q2K
	                           : w->dtype == COLI_DTYPE_Q6_K || w->dtype == COLI_DTYPE_Q3_K
	                               ? P16_SGN
	                           : w->dtype == COLI_DTYPE_Q5_0 ? P16_Q50
	                           : w->dtype == COLI_DTYPE_Q4_1 || w->dtype == COLI_DTYPE_Q5_1
	                               ? P16_Q41
	                               : P16_Q45K;
	struct panel16 p __attribute__((aligned(64)));
	/* P16_SGN: the walk's activations plus 128 (their q xored with 0x80) */
	int8_t xu[kind == P16_SGN ? P16_NS : 1][kind == P16_SGN ? COLI_PANEL_MAX_K : 64]
	    __attribute__((aligned(64)));
	struct coli_act xa[P16_NS];
	int r = row0;

	if ((kind == P16_Q45K && w->dtype != COLI_DTYPE_Q4_K && w->dtype != COLI_DTYPE_Q5_K) ||
	    K > COLI_PANEL_MAX_K)
		return row0;
	for (; r + 16 <= row1; r += 16) {
		unpack16(w, r, kind, &p);
		for (int s = 0; s < S; s += P16_NS) {
			const int ns = S - s < P16_NS ? S - s : P16_NS;
			const struct coli_act *xs[P16_NS];
			float t[P16_NS][16];

			for (int j = 0; j < P16_NS; j++)
				xs[j] = &x[s + (j < ns ? j : ns - 1)];
			for (int j = 0; kind == P16_SGN && j < ns; j++) {
				for (int k = 0; k < K; k += 64)
					_mm512_store_si512(
					    (void *)(xu[j] + k),
					    _mm512_xor_si512(_mm512_loadu_si512((const void *)(xs[j]->q + k)),
					                     _mm512_set1_epi8((char)0x80)));
				xa[j] = *xs[j];
				xa[j].q = xu[j];
				xs[j] = &xa[j];
			}
			dot16_any(&p, nu, xs, ns, kind, t);
			for (int j = 0; j < ns; j++)
				memcpy(y + (size_t)(s + j) * ldy + (r - row0), t[j], sizeof(t[j]));
		}
	}
	return r;
}
