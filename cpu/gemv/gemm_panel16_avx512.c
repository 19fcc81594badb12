/*
 * cpu/gemv/gemm_panel16_avx512.c — Q4_0 and Q8_0 times many activations (a
 * prefill chunk's experts and projections) on AVX-512 VNNI with sixteen rows
 * in a 512-bit vector's lanes: cpu/gemv/gemm_panel.h's Q4_0 panel at twice
 * the rows, walked once for four activations instead of two; Q8_0 the same
 * way, its quants plus 128 as the unsigned bytes (the row kernels it
 * replaces from COLI_PANEL_MIN_S_Q8_0 activations sum each row apart).
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
 * cpu/gemv/panel_unpack.h's unpacks; unit u's scales at du[16 u + r]. Per
 * activation s and unit u, lane r of the vpdpbusd sum is row r's sum of
 * nibble (Q8_0: quant + 128) x activation (exact in int32); minus 8 qsum
 * (128 qsum) it is the unit's integer sum, and the fp32 steps are the
 * reference's lane by lane: fmaf(A, d * dx) into canonical lane u % 16,
 * then the canonical fold. So y is coli_gemm's, bit for bit
 * (tests/cpu/gemm_matches_gemv).
 */
#include <immintrin.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "cpu/gemv/panel_unpack.h"

#define P16_MAX_U (COLI_PANEL_MAX_K / 32)
#define P16_NS    4 /* activations a walk of the panel */

struct panel16 {
	uint8_t q[P16_MAX_U * 512];
	float du[P16_MAX_U * 16];
};

/* The panel's rows' y for activations x[0..NS), y[s][0..16). ia: unit u's
 * sums of activation s at ia[s * P16_MAX_U + u]. */
PANEL_INLINE void dot16(const struct panel16 *p, int nu, const struct coli_act *const *x,
                        const int NS, int off, float (*y)[16], __m512i *ia)
{
	const __m512i zero = _mm512_setzero_si512();

	for (int u = 0; u < nu; u++) {
		const uint8_t *q = p->q + 512 * u;
		__m512i h0 = zero, h1 = zero, h2 = zero, h3 = zero;

#pragma GCC unroll 8
		for (int c = 0; c < 8; c++) {
			const __m512i w = _mm512_load_si512((const void *)(q + 64 * c));

#define P16_DOT(h, s)                                                                              \
	h = _mm512_dpbusd_epi32(h, w,                                                              \
	                        _mm512_set1_epi32(*(const int32_t *)(x[s]->q + 32 * u + 4 * c)))
			P16_DOT(h0, 0);
			if (NS > 1)
				P16_DOT(h1, 1);
			if (NS > 2)
				P16_DOT(h2, 2);
			if (NS > 3)
				P16_DOT(h3, 3);
#undef P16_DOT
		}
		ia[u] = h0;
		if (NS > 1)
			ia[P16_MAX_U + u] = h1;
		if (NS > 2)
			ia[2 * P16_MAX_U + u] = h2;
		if (NS > 3)
			ia[3 * P16_MAX_U + u] = h3;
	}
	for (int s = 0; s < NS; s++) {
		__m512 l[16];

		/* lane k's units one after the other (u = k, k + 16, ...) */
		for (int k = 0; k < 16; k++) {
			__m512 acc = _mm512_setzero_ps();

			for (int u = k; u < nu; u += 16) {
				const __m512i A =
				    _mm512_sub_epi32(ia[s * P16_MAX_U + u],
				                     _mm512_set1_epi32(off * x[s]->qsum[u]));

				acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(A),
				                      _mm512_mul_ps(_mm512_load_ps(p->du + 16 * u),
				                                    _mm512_set1_ps(x[s]->d[u])),
				                      acc);
			}
			l[k] = acc;
		}
		for (int h = 8; h >= 1; h /= 2) /* the canonical fold */
#pragma GCC unroll 8
			for (int k = 0; k < h; k++)
				l[k] = _mm512_add_ps(l[k], l[k + h]);
		_mm512_storeu_ps(y[s], l[0]);
	}
}

int coli_gemm_panel16_avx512(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                             size_t ldy, int row0, int row1)
{
	const int K = w->cols, nu = K / 32;
	struct panel16 p __attribute__((aligned(64)));
	__m512i ia[P16_NS * P16_MAX_U];
	int r = row0;

	const int q8 = w->dtype == COLI_DTYPE_Q8_0, off = q8 ? 128 : 8; /* the quants' offset */

	if ((!q8 && w->dtype != COLI_DTYPE_Q4_0) || K > COLI_PANEL_MAX_K)
		return row0;
	for (; r + 16 <= row1; r += 16) {
		for (int h = 0; h < 2; h++) /* rows r + 8h .. + 7: the lanes' halves */
			if (q8)
				unpack_q8_0(w, r + 8 * h, nu, p.q + 32 * h, 512, 64, p.du + 8 * h, 16);
			else
				unpack_q4_0(w, r + 8 * h, nu, p.q + 32 * h, 512, 64, p.du + 8 * h, 16);
		for (int s = 0; s < S; s += P16_NS) {
			const int ns = S - s < P16_NS ? S - s : P16_NS;
			const struct coli_act *xs[P16_NS];
			float t[P16_NS][16];

			for (int j = 0; j < P16_NS; j++)
				xs[j] = &x[s + (j < ns ? j : ns - 1)];
			switch (ns) { /* a constant count: the unused dots fold away */
			case 1:
				dot16(&p, nu, xs, 1, off, t, ia);
				break;
			case 2:
				dot16(&p, nu, xs, 2, off, t, ia);
				break;
			case 3:
				dot16(&p, nu, xs, 3, off, t, ia);
				break;
			default:
				dot16(&p, nu, xs, 4, off, t, ia);
			}
			for (int j = 0; j < ns; j++)
				memcpy(y + (size_t)(s + j) * ldy + (r - row0), t[j], sizeof(t[j]));
		}
	}
	return r;
}
