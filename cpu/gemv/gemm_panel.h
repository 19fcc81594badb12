/*
 * cpu/gemv/gemm_panel.h — the K-quants (Q2_K ... Q6_K), Q4_0 and Q8_0 times several
 * activations, eight rows in the lanes of a 256-bit vector: the canonical
 * reduction (cpu/kquant/kquant.c) without a horizontal sum. Compiled twice:
 * cpu/gemv/gemm_panel_avx2.c (PANEL_VNNI 0: vpmaddubsw pairs summed in
 * int16, then vpmaddwd by the scales) and cpu/gemv/gemm_panel_avx512.c
 * (PANEL_VNNI 1: vpdpbusd into int32, then vpmulld by the scales: half the
 * instructions a chunk, the same integers); the includer defines PANEL_VNNI
 * and PANEL_NAME, the entry point's name.
 *
 * kquant_simd.h's GEMM holds one row's eight units in a vector, so each
 * unit's products must be summed across the vector (vphaddw trees) once per
 * activation. Here a panel of eight rows is unpacked once a call, into the
 * panel below: each unit's quants as bytes, the rows interleaved four quants
 * at a time (chunk c of unit u: row r's quants 4c..4c+3 at byte 4r), and
 * each unit's scale and min as vectors over the eight rows. Then, per
 * activation, a unit's integer sum for all eight rows is eight vpmaddubsw of
 * a chunk by the activation's four bytes broadcast (VNNI: eight vpdpbusd
 * into int32, then one vpmulld by the scales), summed in int16 (Q4_K:
 * eight pairs of at most 2 x 15 x 127 = 3,810 a lane; Q5_K's 2 x 31 x 127
 * four at a time), then vpmaddwd by the scales: lane r = row r's A. The
 * fp32 steps are the reference's, lane by lane: fmaf(A, d * dx), then
 * fmaf(C, dmin * dx) with C = -m * qsum (|C| <= 63 x 4,064: exact in fp32),
 * into canonical lane b % 16, a vector of the eight rows (a lane's units
 * are taken one after another, b = k, k + 16, ..., so its sum stays in a
 * register); the canonical fold is then vertical adds. So y is kq_gemm's,
 * bit for bit (tests/cpu/kquant_gemv).
 *
 * Q6_K's and Q3_K's quants are signed (q - 32; q - 4 where the high bit
 * is clear): |w| by x with w's sign (vpsignb), each group of 16 summed and
 * scaled apart, as Q2_K's unsigned ones. Q2_K's min term (a min a group of
 * 16) is the same product by each group's min bytes laid out as a chunk:
 * -sum_g m_g sum_{i in g} x_i for the eight rows at once.
 *
 * One core of the 2-vCPU development VM (Zen 3, AVX2), a 2048 x 2048
 * matrix, ms a call against kq_gemm (2026-12-05): Q4_K at S = 2 / 3 / 8 /
 * 16 0.28 / 0.35 / 0.71 / 1.25 against 0.25 / 0.40 / 0.96 / 1.94, Q6_K at
 * 16 1.45 against 2.23, Q3_K at 3 / 16 0.42 / 1.41 against 0.50 / 2.28,
 * Q2_K 0.47 / 1.79 against 0.54 / 2.65; the unpack costs about two activations' dots,
 * so the panel paid from 3 activations there; with the weights coming from
 * memory it pays from about 8 (COLI_PANEL_MIN_S, cpu/cpu_internal.h). The
 * small loops carry unroll pragmas:
 * without them GCC's generic tuning kept the transposes' arrays on the
 * stack (the unpack took 0.41 ms instead of 0.14).
 *
 * Q4_0 (cpu.h's planes) takes the panel too, from COLI_PANEL_MIN_S_Q4_0
 * activations: its own GEMM (gemv_avx2.c) prepares each activation once a
 * call and so runs close, 0.077 ms an activation against the panel's
 * 0.068, and the unpack (0.11 ms) pays from about a dozen. On AVX-512 its
 * rows go sixteen to a panel first (cpu/gemv/gemm_panel16_avx512.c); this
 * panel takes the eight left over. The transposes and Q4_0's unpack are
 * cpu/gemv/panel_unpack.h's.
 *
 * Q8_0 takes it on AVX2 from COLI_PANEL_MIN_S_Q8_0_AVX2 activations (AVX-512
 * has the sixteen-row panel): its signed quants as Q6_K's (|w| by x with w's
 * sign), each chunk's pairs (up to 2 x 128 x 127) into int32 at once.
 *
 * GGUF's 32-element block types (Q4_1, Q5_0, Q5_1) take it as Q4_0 does: one
 * unit a block, its quants unsigned (Q5_0 less 16 qsum; 5-bit quants summed
 * four chunks at a time in int16, as Q5_K's), then Q4_1's and Q5_1's
 * fmaf(qsum, m * dx) (kq_q32_group's steps).
 */
#if !defined(PANEL_VNNI) || !defined(PANEL_NAME)
#error "the includer defines PANEL_VNNI and PANEL_NAME"
#endif
#include <immintrin.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "cpu/gemv/panel_unpack.h"

#define INLINE static inline __attribute__((always_inline))

enum kind { Q40, Q80, Q2K, Q3K, Q4K, Q5K, Q6K, Q41, Q50, Q51 };

/* signed quants (|w| by x with w's sign); two groups of 16 a unit */
#define SIGNED(k) ((k) == Q3K || (k) == Q6K || (k) == Q80)
#define G16(k)    ((k) == Q2K || (k) == Q3K || (k) == Q6K)
/* a unit a 32-element block: its own d, no scale (Q4_1, Q5_1: a min) */
#define UNIT32(k) ((k) == Q40 || (k) == Q80 || (k) == Q41 || (k) == Q50 || (k) == Q51)

#define PANEL_MAX_U (COLI_PANEL_MAX_K / 32)
#define PANEL_MAX_B (COLI_PANEL_MAX_K / 256)

struct panel {
	uint8_t q[PANEL_MAX_U * 256];  /* unit u's 8 chunks of 32 bytes at 256 u
	                                * (Q3_K, Q6_K: the signed q as int8) */
	int16_t sc[PANEL_MAX_U * 16];  /* unit u: row r's group scale at 16 u + 2r, 2r + 1 */
	int16_t sc2[PANEL_MAX_U * 16]; /* Q2_K, Q3_K, Q6_K: the unit's second group of 16 */
	uint8_t mb[PANEL_MAX_U * 64];  /* Q2_K: the groups' mins, row r's at bytes 4r..4r+3
	                                * of each group's 32 */
	float mn[PANEL_MAX_U * 8];     /* unit u: minus row r's group min at 8 u + r (Q4_1,
	                                * Q5_1: row r's m) */
	float d[PANEL_MAX_B * 8];      /* block i: row r's d at 8 i + r */
	float du[PANEL_MAX_U * 8];     /* UNIT32: unit u's d of row r at 8 u + r */
	float dm[PANEL_MAX_B * 8];     /* and its dmin */
};

/* Unit u's integer sums for the eight rows and activations xq[0..ns): per
 * chunk the weights are loaded once and multiplied by each activation's
 * four bytes broadcast, pairs summed in int16, then scaled into int32 by
 * vpmaddwd. Q4_K: eight pairs a lane (<= 8 x 3,810); Q5_K: four (<= 4 x
 * 7,874), so the halves are scaled apart; Q6_K: signed quants (|q - 32| <=
 * 32) as |w| by x with w's sign (vpsignb), four pairs a group of 16 (<= 4 x
 * 8,128), each group by its own scales (sc, sc2). */
#if PANEL_VNNI
/* acc + chunk c's u8 x s8 fours for the eight rows (vpdpbusd: exact in int32) */
INLINE __m256i dots(__m256i acc, __m256i w, __m256i aw, const int8_t *xq, int c, enum kind kind)
{
	__m256i x = _mm256_set1_epi32(*(const int32_t *)(xq + 4 * c));

	if (SIGNED(kind))
		x = _mm256_sign_epi8(x, w);
	return _mm256_dpbusd_epi32(acc, aw, x);
}

/* unit_a below with int32 sums: the same A and C. sc and sc2 hold a row's
 * scale in both int16 halves of its dword: >> 16 is the scale in int32. */
INLINE void unit_a(const uint8_t *q, const uint8_t *mb, const int8_t *const *xq, int ns,
                   enum kind kind, __m256i sc, __m256i sc2, __m256i *A, __m256i *C)
{
	__m256i h00 = _mm256_setzero_si256(), h01 = h00, h10 = h00, h11 = h00, c0 = h00, c1 = h00;

#pragma GCC unroll 8
	for (int c = 0; c < 8; c++) {
		const __m256i w = _mm256_load_si256((const __m256i *)(q + 32 * c)),
		              aw = SIGNED(kind) ? _mm256_abs_epi8(w) : w;

		if (kind == Q2K) {
			const __m256i m = _mm256_load_si256((const __m256i *)(mb + 32 * (c / 4)));

			c0 = dots(c0, m, m, xq[0], c, kind);
			if (ns > 1)
				c1 = dots(c1, m, m, xq[1], c, kind);
		}
		if (c < 4 || kind == Q4K || UNIT32(kind)) {
			h00 = dots(h00, w, aw, xq[0], c, kind);
			if (ns > 1)
				h10 = dots(h10, w, aw, xq[1], c, kind);
		} else {
			h01 = dots(h01, w, aw, xq[0], c, kind);
			if (ns > 1)
				h11 = dots(h11, w, aw, xq[1], c, kind);
		}
	}
	if (UNIT32(kind)) { /* no scale: the quants' sum */
		A[0] = h00, A[1] = h10;
	} else if (kind == Q4K) {
		const __m256i s32 = _mm256_srai_epi32(sc, 16);

		A[0] = _mm256_mullo_epi32(h00, s32);
		A[1] = _mm256_mullo_epi32(h10, s32);
	} else { /* Q5_K: sc2 is sc (its halves split for the int16 form only) */
		const __m256i s32 = _mm256_srai_epi32(sc, 16), t32 = _mm256_srai_epi32(sc2, 16);

		A[0] = _mm256_add_epi32(_mm256_mullo_epi32(h00, s32), _mm256_mullo_epi32(h01, t32));
		A[1] = _mm256_add_epi32(_mm256_mullo_epi32(h10, s32), _mm256_mullo_epi32(h11, t32));
	}
	if (kind == Q2K) { /* C = -sum_g m_g * sum_{i in g} x_i */
		C[0] = _mm256_sub_epi32(_mm256_setzero_si256(), c0);
		C[1] = _mm256_sub_epi32(_mm256_setzero_si256(), c1);
	}
}
#else
INLINE __m256i pairs(__m256i w, __m256i aw, const int8_t *xq, int c, enum kind kind)
{
	__m256i x = _mm256_set1_epi32(*(const int32_t *)(xq + 4 * c));

	if (SIGNED(kind))
		x = _mm256_sign_epi8(x, w);
	return _mm256_maddubs_epi16(aw, x);
}

INLINE void unit_a(const uint8_t *q, const uint8_t *mb, const int8_t *const *xq, int ns,
                   enum kind kind, __m256i sc, __m256i sc2, __m256i *A, __m256i *C)
{
	/* (named, not arrays: GCC kept arrays of these on the stack) */
	__m256i h00 = _mm256_setzero_si256(), h01 = h00, h10 = h00, h11 = h00, c0 = h00, c1 = h00;

#pragma GCC unroll 8
	for (int c = 0; c < 8; c++) {
		const __m256i w = _mm256_load_si256((const __m256i *)(q + 32 * c)),
		              aw = SIGNED(kind) ? _mm256_abs_epi8(w) : w;

		if (kind == Q80) { /* a pair is up to 2 x 128 x 127: into int32 at once */
			const __m256i one = _mm256_set1_epi16(1);

			h00 = _mm256_add_epi32(
			    h00, _mm256_madd_epi16(pairs(w, aw, xq[0], c, kind), one));
			if (ns > 1)
				h10 = _mm256_add_epi32(
				    h10, _mm256_madd_epi16(pairs(w, aw, xq[1], c, kind), one));
			continue;
		}
		if (kind == Q2K) { /* the min term: a group's m by the chunk's x, per row
			            * (<= 8 pairs of 2 x 15 x 127 a lane) */
			const __m256i m = _mm256_load_si256((const __m256i *)(mb + 32 * (c / 4)));

			c0 = _mm256_add_epi16(c0, pairs(m, m, xq[0], c, kind));
			if (ns > 1)
				c1 = _mm256_add_epi16(c1, pairs(m, m, xq[1], c, kind));
		}

		if (c < 4 || kind == Q4K || kind == Q40 || kind == Q41) { /* 4-bit: 8 pairs */
			h00 = _mm256_add_epi16(h00, pairs(w, aw, xq[0], c, kind));
			if (ns > 1)
				h10 = _mm256_add_epi16(h10, pairs(w, aw, xq[1], c, kind));
		} else {
			h01 = _mm256_add_epi16(h01, pairs(w, aw, xq[0], c, kind));
			if (ns > 1)
				h11 = _mm256_add_epi16(h11, pairs(w, aw, xq[1], c, kind));
		}
	}
	if (kind == Q80) { /* the sums, in int32 already */
		A[0] = h00, A[1] = h10;
	} else if (kind == Q4K || kind == Q40 || kind == Q41) { /* UNIT32: sc = ones */
		A[0] = _mm256_madd_epi16(h00, sc);
		A[1] = _mm256_madd_epi16(h10, sc);
	} else {
		A[0] = _mm256_add_epi32(_mm256_madd_epi16(h00, sc), _mm256_madd_epi16(h01, sc2));
		A[1] = _mm256_add_epi32(_mm256_madd_epi16(h10, sc), _mm256_madd_epi16(h11, sc2));
	}
	if (kind == Q2K) { /* C = -sum_g m_g * sum_{i in g} x_i */
		const __m256i one = _mm256_set1_epi16(1), z = _mm256_setzero_si256();

		C[0] = _mm256_sub_epi32(z, _mm256_madd_epi16(c0, one));
		C[1] = _mm256_sub_epi32(z, _mm256_madd_epi16(c1, one));
	}
}

#endif

/* y[0..8) of the panel's rows for activations x[0..ns) (ns 1 or 2), the
 * canonical lanes l[s][16] held as vectors of the eight rows. Two passes:
 * every unit's integers in memory order (ia, ic: exact, so where they wait
 * changes no bit), then the fp32 steps lane by lane. One pass that took a
 * lane's units one after another (b = k, k + 16, ...) walked the panel 4 KB
 * apart and kept the integer and fp32 work live together, more than sixteen
 * registers: 10-16% slower at S = 8 and 16 on a Zen 3 (2026-12-05). */
INLINE void panel_dot(const struct panel *p, int nu, const struct coli_act *const *x, int ns,
                      enum kind kind, float *const *y)
{
	__m256 l[2][16];
	__m256i ia[2][PANEL_MAX_U], ic[2][PANEL_MAX_U]; /* unit u's A and (Q2_K) C, per row */

	for (int u = 0; u < nu; u++) {
		const __m256i sc = UNIT32(kind)
		                       ? _mm256_set1_epi16(1)
		                       : _mm256_load_si256((const __m256i *)(p->sc + 16 * u)),
		              sc2 = G16(kind)
		                        ? _mm256_load_si256((const __m256i *)(p->sc2 + 16 * u))
		                        : sc;
		const int8_t *xq[2] = {x[0]->q + 32 * u, x[ns - 1]->q + 32 * u};
		__m256i A[2], C[2];

		unit_a(p->q + 256 * u, p->mb + 64 * u, xq, ns, kind, sc, sc2, A, C);
		for (int s = 0; s < ns; s++) {
			ia[s][u] = A[s];
			if (kind == Q2K)
				ic[s][u] = C[s];
		}
	}
	/* lane k's units one after the other (b = k, k + 16, ...: its order),
	 * its sum in a register */
	for (int k = 0; k < 16; k++) {
		__m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};

		for (int u = k; u < nu; u += 16) {
			const __m256 d =
			    _mm256_load_ps(UNIT32(kind) ? p->du + 8 * u : p->d + 8 * (u / 8));

#pragma GCC unroll 2
			for (int s = 0; s < ns; s++) {
				const __m256 dx = _mm256_broadcast_ss(x[s]->d + u);
				__m256i A = ia[s][u];

				if (kind == Q40 || kind == Q50) /* the quants' - 8 or - 16 */
					A = _mm256_sub_epi32(
					    A, _mm256_set1_epi32((kind == Q40 ? 8 : 16) *
					                         x[s]->qsum[u]));

				acc[s] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(A),
				                         _mm256_mul_ps(d, dx), acc[s]);
				if (kind == Q2K) /* |C| <= 15 x 32 x 127 */
					acc[s] = _mm256_fmadd_ps(
					    _mm256_cvtepi32_ps(ic[s][u]),
					    _mm256_mul_ps(_mm256_load_ps(p->dm + 8 * (u / 8)), dx),
					    acc[s]);
				if (kind == Q41 || kind == Q51) /* qsum by m * dx */
					acc[s] = _mm256_fmadd_ps(
					    _mm256_cvtepi32_ps(_mm256_set1_epi32(x[s]->qsum[u])),
					    _mm256_mul_ps(_mm256_load_ps(p->mn + 8 * u), dx),
					    acc[s]);
				/* Q4_K, Q5_K: C = -m * qsum (|C| <= 63 x 4,064, exact) */
				if (kind == Q4K || kind == Q5K) {
					const __m256 cm = _mm256_mul_ps(
					    _mm256_load_ps(p->mn + 8 * u),
					    _mm256_cvtepi32_ps(_mm256_set1_epi32(x[s]->qsum[u])));

					acc[s] = _mm256_fmadd_ps(
					    cm,
					    _mm256_mul_ps(_mm256_load_ps(p->dm + 8 * (u / 8)), dx),
					    acc[s]);
				}
			}
		}
		for (int s = 0; s < ns; s++)
			l[s][k] = acc[s];
	}
	for (int s = 0; s < ns; s++) {
		for (int h = 8; h >= 1; h /= 2) /* the canonical fold */
#pragma GCC unroll 8
			for (int k = 0; k < h; k++)
				l[s][k] = _mm256_add_ps(l[s][k], l[s][k + h]);
		_mm256_storeu_ps(y[s], l[s][0]);
	}
}

INLINE int panel_rows(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                      size_t ldy, int row0, int row1, enum kind kind)
{
	const int K = w->cols;
	const size_t rb = coli_dtype_row_bytes(w->dtype, (size_t)K);
	struct panel p __attribute__((aligned(32)));
	const struct panel_dst dst = {p.q, 256, 32,   p.sc, p.sc2, 16, p.mn,
	                              8,   p.d, p.dm, 8,    p.mb,  64, 32};
	int r = row0;

	for (; r + 8 <= row1; r += 8) {
		const uint8_t *row[8];
		float t[2][8];

#pragma GCC unroll 8
		for (int k = 0; k < 8; k++)
			row[k] = (const uint8_t *)w->data + (size_t)(r + k) * rb;
		if (kind == Q40)
			unpack_q4_0(w, r, K / 32, p.q, 256, 32, p.du, 8);
		else if (kind == Q80)
			unpack_q8_0(w, r, K / 32, p.q, 256, 32, p.du, 8, 0);
		else if (UNIT32(kind))
			unpack_q32(w, r, K / 32, p.q, 256, 32, p.du, p.mn, 8);
		for (int i = 0; !UNIT32(kind) && i < K / 256; i++) {
			if (kind == Q6K)
				unpack_q6k_block(row, i, &dst);
			else if (kind == Q2K || kind == Q3K)
				unpack_q23k_block(row, i, kind == Q3K, &dst);
			else
				unpack_q45k_block(row, i, kind == Q5K, &dst);
		}
		for (int s = 0; s < S; s += 2) {
			const int ns = S - s < 2 ? 1 : 2;
			const struct coli_act *xs[2] = {&x[s], &x[s + ns - 1]};
			float *ys[2] = {t[0], t[1]};

			if (ns == 2)
				panel_dot(&p, K / 32, xs, 2, kind, ys);
			else
				panel_dot(&p, K / 32, xs, 1, kind, ys);
			for (int j = 0; j < ns; j++)
#pragma GCC unroll 8
				for (int k = 0; k < 8; k++)
					y[(size_t)(s + j) * ldy + (r - row0) + k] = t[j][k];
		}
	}
	return r;
}

int PANEL_NAME(const struct coli_mat *w, const struct coli_act *x, int S, float *y, size_t ldy,
               int row0, int row1)
{
	if (w->cols > COLI_PANEL_MAX_K)
		return row0;
	switch (w->dtype) {
	case COLI_DTYPE_Q4_0:
		return panel_rows(w, x, S, y, ldy, row0, row1, Q40);
	case COLI_DTYPE_Q8_0:
		return panel_rows(w, x, S, y, ldy, row0, row1, Q80);
	case COLI_DTYPE_Q2_K:
		return panel_rows(w, x, S, y, ldy, row0, row1, Q2K);
	case COLI_DTYPE_Q3_K:
		return panel_rows(w, x, S, y, ldy, row0, row1, Q3K);
	case COLI_DTYPE_Q4_K:
		return panel_rows(w, x, S, y, ldy, row0, row1, Q4K);
	case COLI_DTYPE_Q5_K:
		return panel_rows(w, x, S, y, ldy, row0, row1, Q5K);
	case COLI_DTYPE_Q6_K:
		return panel_rows(w, x, S, y, ldy, row0, row1, Q6K);
	case COLI_DTYPE_Q4_1:
		return panel_rows(w, x, S, y, ldy, row0, row1, Q41);
	case COLI_DTYPE_Q5_0:
		return panel_rows(w, x, S, y, ldy, row0, row1, Q50);
	case COLI_DTYPE_Q5_1:
		return panel_rows(w, x, S, y, ldy, row0, row1, Q51);
	default:
		return row0;
	}
}
