/*
 * cpu/gemv/gemm_amx.c — coli_gemm on AMX int8 tiles (Sapphire Rapids and
 * later) for Q8_0, Q4_0 and every GGUF block type coli keeps (Q4_1, Q5_0,
 * Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), bit-identical to cpu/gemv/gemv_ref.c
 * and cpu/kquant/kquant.c: THE CANONICAL REDUCTION of cpu.h and its K-quant
 * form. Called only when cpu/dispatch.c found amx_tile + amx_int8 by cpuid
 * and Linux granted the tile state (arch_prctl ARCH_REQ_XCOMP_PERM), and only
 * for S >= coli_amx_min_s activations; below that the AVX-512 kernels are
 * faster.
 *
 * How the bits stay canonical. One TDPBSSD multiplies a weight tile A by an
 * activation tile B whose K is ONE 32-block (one canonical unit), so each
 * int32 of C is one unit's exact sum, never two units mixed:
 *
 *   A  16 weight rows x 32 int8 (unit b)         tmm2/3: 16 rows x 32 B
 *   B  8 x 16 x 4 int8: B[k/4][t][k%4] = xq[t][32b + k]  tmm4/5: 8 rows x 64 B
 *   C  16 rows x 16 tokens int32                 tmm0/1: 16 rows x 64 B
 *
 * Q2_K, Q3_K and Q6_K units are two groups of 16 with their own scales, so
 * theirs are two products of K = 16 (g_cfg_g16: A 16 x 16 B at + 0 and + 16
 * of the unit's bytes, B the first and last 4 rows of the unit's 8), two C
 * tiles a unit, each one group's exact sum.
 *
 * The canonical lanes are l[r][t][b % 16]. Lane j of all 16 x 16 outputs
 * is worked as one unit: its blocks j, j + 16, j + 32, ... ascending, 16
 * zmm accumulators (one per weight row, the 16 tokens in the zmm) kept in
 * registers:
 *
 *   acc[m] = fmadd(cvt(A[m][0..15]), d[r+m][b] * dx[0..15][b], acc[m])
 *   acc[m] = fmadd(cvt(C[m][0..15]), dm[r+m][b] * dx[0..15][b], acc[m])
 *
 * (the second for the types with a min) which is kquant.c's fmaf((float)A,
 * d * dx, l) then fmaf((float)C, dm * dx, l) element by element (each
 * product rounded to fp32 first, then one fused step). A and C are the
 * unit's integers: Q8_0 / Q4_0 / Q5_0 / Q4_1 / Q5_1 the tile's sum and the
 * activations' qsum; Q4_K / Q5_K sc * sum and -m * qsum; Q2_K / Q3_K / Q6_K
 * s0 * sum0 + s1 * sum1 and (Q2_K) -m0 * xsum0 - m1 * xsum1 (epilogue()
 * says why forming them in fp32 is exact). The 16 lanes go to lanes[j][m][t]
 * (16 KiB), are folded by the canonical tree (8, 4, 2, 1) and written to
 * y[t][r]. Lanes past the last block stay +0.0f, as in the reference. C
 * goes through memory (tilestored, then 16 zmm loads); two units' tiles
 * alternate so one unit's TDPBSSD runs while the previous one's epilogue
 * does.
 *
 * Operands. A is read straight from a Q8_0 matrix (row stride K bytes); a
 * panel of any other type is unpacked once to int8 [unit][16 rows][32 B],
 * with each unit's scale factors in [16 rows][unit] planes
 * (cpu/gemv/gemm_unpack_amx.c), and shared by all token tiles. B is built
 * once a call per token tile (16 activations; fewer are zero padded, their
 * outputs not written): a 16 x 16 dword transpose of two blocks of 16
 * activations at a time, plus dx, qsum and (Q2_K) the first half's sum
 * transposed to [block][16 tokens]. A last row panel of fewer than 16 rows
 * is computed as the matrix's last 16 rows (the overlap is computed twice,
 * stored once), so the tile shapes never change within a call.
 *
 * Limits: K <= COLI_AMX_MAX_K and rows >= 16, else the caller runs the VNNI
 * path (gemv_avx512.c). Scratch lives on the stack (~470 KiB at the largest
 * K): the kernels allocate nothing.
 */
#include <errno.h>
#include <immintrin.h>
#include <string.h>

#include "cpu/cpu_internal.h"

#define INLINE static inline __attribute__((always_inline))

#define NB_MAX (COLI_AMX_MAX_K / COLI_QBLOCK) /* blocks of the longest row */
/* Activation scratch of a call: as many token tiles of B as fit, each
 * nb x (512 B of quants + 64 B of dx + 64 B of qsum + 64 B of half sums). */
#define XTILE_BYTES  704
#define XPANEL_BYTES (NB_MAX * XTILE_BYTES)

/* The tile palette 1 configuration (Intel SDM vol. 1, 3.2: 64 bytes). */
struct tilecfg {
	uint8_t palette;
	uint8_t start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} __attribute__((aligned(64)));

/* C tmm0/1 16 x 64 B, A tmm2/3 16 x 32 B, B tmm4/5 8 x 64 B. Constant data:
 * GCC 12 dropped the stores of a config built on the stack before
 * ldtilecfg (the tiles were left unconfigured: #UD at the first tileloadd). */
static const struct tilecfg g_cfg_gemm = {
    .palette = 1,
    .colsb = {64, 64, 32, 32, 64, 64},
    .rows = {16, 16, 16, 16, 8, 8},
};
/* Groups of 16 (Q2_K, Q3_K, Q6_K): C tmm0/1 and tmm6/7 16 x 64 B, A tmm2/3
 * 16 x 16 B (one group of 16 rows), B tmm4/5 4 x 64 B (its 16 elements of
 * 16 tokens). */
static const struct tilecfg g_cfg_g16 = {
    .palette = 1,
    .colsb = {64, 64, 16, 16, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 4, 4, 16, 16},
};
/* the peak probe: tmm0-3 C, tmm4/5 A, tmm6/7 B, all 16 x 64 B */
static const struct tilecfg g_cfg_peak = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

/* 16 x 16 dword transpose: u[k] dword i = r[i] dword k (r is clobbered). */
INLINE void transpose16(__m512i r[16], __m512i u[16])
{
	for (int i = 0; i < 16; i += 2) {
		u[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
		u[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
	}
	for (int i = 0; i < 16; i += 4) {
		r[i] = _mm512_unpacklo_epi64(u[i], u[i + 2]);
		r[i + 1] = _mm512_unpackhi_epi64(u[i], u[i + 2]);
		r[i + 2] = _mm512_unpacklo_epi64(u[i + 1], u[i + 3]);
		r[i + 3] = _mm512_unpackhi_epi64(u[i + 1], u[i + 3]);
	}
	/* r[4g + c] holds, in 128-bit lane q, dword 4q + c of rows 4g..4g+3:
	 * gather the lanes q of the four groups */
	for (int c = 0; c < 4; c++) {
		__m512i a = _mm512_shuffle_i32x4(r[c], r[4 + c], _MM_SHUFFLE(2, 0, 2, 0));
		__m512i b = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], _MM_SHUFFLE(2, 0, 2, 0));
		__m512i e = _mm512_shuffle_i32x4(r[c], r[4 + c], _MM_SHUFFLE(3, 1, 3, 1));
		__m512i f = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], _MM_SHUFFLE(3, 1, 3, 1));

		u[c] = _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0));      /* q 0 */
		u[8 + c] = _mm512_shuffle_i32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1));  /* q 2 */
		u[4 + c] = _mm512_shuffle_i32x4(e, f, _MM_SHUFFLE(2, 0, 2, 0));  /* q 1 */
		u[12 + c] = _mm512_shuffle_i32x4(e, f, _MM_SHUFFLE(3, 1, 3, 1)); /* q 3 */
	}
}

/* One token tile of B: xb [nb][8][64] int8, dxt [nb][16] fp32, qst [nb][16]
 * int32 (qsum, the min terms') and, with hst, hst [nb][16] int32 (the sum
 * of a block's first 16 quants: Q2_K's group mins), from the T (1..16)
 * activations x[0..T). */
static void pack_tokens(const struct coli_act *x, int T, int nb, int8_t *xb, float *dxt,
                        int32_t *qst, int32_t *hst)
{
	const __mmask16 lo8 = 0x00ff;

	for (int b = 0; b < nb; b += 2) {
		const __mmask16 m = b + 1 < nb ? 0xffff : lo8;
		__m512i r[16], u[16];

		for (int t = 0; t < 16; t++)
			r[t] = t < T ? _mm512_maskz_loadu_epi32(m, x[t].q + (size_t)b * 32)
			             : _mm512_setzero_si512();
		transpose16(r, u);
		/* u[k] = dword k of the 16 tokens: k < 8 block b, else block b+1 */
		for (int k = 0; k < 8; k++)
			_mm512_store_si512(xb + (size_t)b * 512 + 64 * k, u[k]);
		if (b + 1 < nb)
			for (int k = 0; k < 8; k++)
				_mm512_store_si512(xb + (size_t)(b + 1) * 512 + 64 * k, u[8 + k]);
	}
	for (int b = 0; b < nb; b++)
		for (int t = 0; t < 16; t++) {
			dxt[(size_t)b * 16 + t] = t < T ? x[t].d[b] : 0.0f;
			qst[(size_t)b * 16 + t] = t < T ? x[t].qsum[b] : 0;
		}
	for (int t = 0; hst && t < 16; t++)
		for (int b = 0; b < nb; b++) {
			int32_t s = 0;

			for (int l = 0; t < T && l < 16; l++)
				s += x[t].q[(size_t)b * 32 + l];
			hst[(size_t)b * 16 + t] = s;
		}
}

/* How a unit's int32 tile sums become the canonical fp32 steps (kquant.c). */
enum epi {
	EPI_PLAIN, /* Q8_0, Q4_0, Q5_0: fmaf(A, d * dx) */
	EPI_MIN,   /* Q4_1, Q5_1: then fmaf(qsum, m * dx) */
	EPI_KQ,    /* Q4_K, Q5_K: A = sc * sum, C = -m * qsum */
	EPI_G16,   /* Q6_K, Q3_K: A = s0 * sum0 + s1 * sum1 (two tiles, K = 16) */
	EPI_Q2K,   /* Q2_K: that A, C = -m0 * xsum0 - m1 * xsum1 */
};

static enum epi epi_of(enum coli_dtype t)
{
	switch (t) {
	case COLI_DTYPE_Q4_1:
	case COLI_DTYPE_Q5_1:
		return EPI_MIN;
	case COLI_DTYPE_Q4_K:
	case COLI_DTYPE_Q5_K:
		return EPI_KQ;
	case COLI_DTYPE_Q6_K:
	case COLI_DTYPE_Q3_K:
		return EPI_G16;
	case COLI_DTYPE_Q2_K:
		return EPI_Q2K;
	default:
		return EPI_PLAIN;
	}
}

/* Operands of one (row panel, token tile). */
struct panel {
	const int8_t *a;                /* unit 0 of row 0 of the A operand */
	size_t a_blk;                   /* bytes from one unit to the next */
	size_t a_stride;                /* bytes from one row to the next */
	const int8_t *xb;               /* [nb][8][64] */
	const float *dxt;               /* [nb][16] */
	const int32_t *qst;             /* [nb][16] */
	const int32_t *hst;             /* [nb][16], Q2_K */
	const struct coli_amx_panel *u; /* the unit planes, [16][nb] */
	int nb;
};

/* Unit b's epilogue, 16 rows x 16 tokens: c (c1) the tile sums as stored
 * (EPI_G16 / EPI_Q2K: of the unit's first and second group of 16), then
 * kquant.c's steps in its order, acc[m] the lane's accumulators:
 *
 *   acc = fmaf((float)A, d * dx, acc)                 every type
 *   acc = fmaf((float)C, dm * dx, acc)                 types with a min
 *
 * each product with dx rounded to fp32 first. The integers A and C may be
 * formed in any order (kquant.c); EPI_G16 / EPI_Q2K form them in fp32 from
 * +0 by fmas of small integers, exact (every partial an integer of at most
 * 2^24 in magnitude: Q6_K's 2 x 16 x 32 x 128 x 128 at the extreme) and never
 * -0, so (float)A is the reference's to the bit; so do EPI_KQ's products
 * (|sc * sum| <= 63 x 31 x 32 x 128 < 2^23). */
INLINE void epilogue(const int32_t *c, const int32_t *c1, const struct panel *p, int b,
                     __m512 acc[16], const enum epi e)
{
	const __m512 dx = _mm512_load_ps(p->dxt + (size_t)b * 16), zero = _mm512_setzero_ps();
	const __m512i qs = _mm512_load_si512(p->qst + (size_t)b * 16);
	const struct coli_amx_panel *u = p->u;
	__m512 qsf = zero, h0 = zero, h1 = zero;

	if (e == EPI_MIN || e == EPI_KQ)
		qsf = _mm512_cvtepi32_ps(qs);
	if (e == EPI_Q2K) {
		const __m512i hs = _mm512_load_si512(p->hst + (size_t)b * 16);

		h0 = _mm512_cvtepi32_ps(hs);
		h1 = _mm512_cvtepi32_ps(_mm512_sub_epi32(qs, hs));
	}
#pragma GCC unroll 16
	for (int m = 0; m < 16; m++) {
		const int i = m * p->nb + b;
		const __m512i s = _mm512_load_si512(c + 16 * m);
		__m512 A, C;

		if (e == EPI_KQ)
			A = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(u->s0[i]), zero);
		else if (e == EPI_G16 || e == EPI_Q2K)
			A = _mm512_fmadd_ps(
			    _mm512_cvtepi32_ps(_mm512_load_si512(c1 + 16 * m)),
			    _mm512_set1_ps(u->s1[i]),
			    _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(u->s0[i]), zero));
		else
			A = _mm512_cvtepi32_ps(s);
		acc[m] = _mm512_fmadd_ps(A, _mm512_mul_ps(_mm512_set1_ps(u->d[i]), dx), acc[m]);
		if (e == EPI_PLAIN || e == EPI_G16)
			continue;
		if (e == EPI_KQ)
			C = _mm512_fmadd_ps(qsf, _mm512_set1_ps(u->n0[i]), zero);
		else if (e == EPI_Q2K)
			C = _mm512_fmadd_ps(h1, _mm512_set1_ps(u->n1[i]),
			                    _mm512_fmadd_ps(h0, _mm512_set1_ps(u->n0[i]), zero));
		else
			C = qsf;
		acc[m] = _mm512_fmadd_ps(C, _mm512_mul_ps(_mm512_set1_ps(u->dm[i]), dx), acc[m]);
	}
}

/* lanes[j][m][t] for j < 16 of one (row panel, token tile), unfolded. Lane
 * j's units b = j, j + 16, ... in order, two at a time (b and b + 16 in C
 * tiles 0 / 1, their epilogues after both products). The groups of 16
 * (EPI_G16, EPI_Q2K) take g_cfg_g16: each unit two K = 16 products, A
 * tiles at + 0 / + 16 of the unit's row bytes, B at its first / last four
 * rows, C tiles 0 / 1 (unit b) and 6 / 7 (unit b + 16). */
INLINE void panel_lanes_of(const struct panel *p, float (*lanes)[16][16], const enum epi e)
{
	const int g16 = e == EPI_G16 || e == EPI_Q2K;
	int32_t cbuf[4][256] __attribute__((aligned(64)));

	for (int j = 0; j < 16; j++) {
		__m512 acc[16];

		for (int m = 0; m < 16; m++)
			acc[m] = _mm512_setzero_ps();
		for (int b = j; b < p->nb; b += 32) {
			const int b1 = b + 16;
			const int8_t *a = p->a + (size_t)b * p->a_blk,
			             *xb = p->xb + (size_t)b * 512;
			const int8_t *a1 = p->a + (size_t)b1 * p->a_blk,
			             *xb1 = p->xb + (size_t)b1 * 512;

			if (g16) {
				_tile_zero(0);
				_tile_zero(1);
				_tile_loadd(2, a, p->a_stride);
				_tile_loadd(3, a + 16, p->a_stride);
				_tile_loadd(4, xb, 64);
				_tile_loadd(5, xb + 256, 64);
				_tile_dpbssd(0, 2, 4);
				_tile_dpbssd(1, 3, 5);
				_tile_stored(0, cbuf[0], 64);
				_tile_stored(1, cbuf[1], 64);
				if (b1 < p->nb) {
					_tile_zero(6);
					_tile_zero(7);
					_tile_loadd(2, a1, p->a_stride);
					_tile_loadd(3, a1 + 16, p->a_stride);
					_tile_loadd(4, xb1, 64);
					_tile_loadd(5, xb1 + 256, 64);
					_tile_dpbssd(6, 2, 4);
					_tile_dpbssd(7, 3, 5);
					_tile_stored(6, cbuf[2], 64);
					_tile_stored(7, cbuf[3], 64);
				}
			} else {
				_tile_zero(0);
				_tile_loadd(2, a, p->a_stride);
				_tile_loadd(4, xb, 64);
				_tile_dpbssd(0, 2, 4);
				_tile_stored(0, cbuf[0], 64);
				if (b1 < p->nb) {
					_tile_zero(1);
					_tile_loadd(3, a1, p->a_stride);
					_tile_loadd(5, xb1, 64);
					_tile_dpbssd(1, 3, 5);
					_tile_stored(1, cbuf[2], 64);
				}
			}
			epilogue(cbuf[0], cbuf[1], p, b, acc, e);
			if (b1 < p->nb)
				epilogue(cbuf[2], cbuf[3], p, b1, acc, e);
		}
		for (int m = 0; m < 16; m++)
			_mm512_store_ps(lanes[j][m], acc[m]);
	}
}

static void panel_lanes(const struct panel *p, float (*lanes)[16][16], enum epi e)
{
	switch (e) {
	case EPI_PLAIN:
		panel_lanes_of(p, lanes, EPI_PLAIN);
		return;
	case EPI_MIN:
		panel_lanes_of(p, lanes, EPI_MIN);
		return;
	case EPI_KQ:
		panel_lanes_of(p, lanes, EPI_KQ);
		return;
	case EPI_G16:
		panel_lanes_of(p, lanes, EPI_G16);
		return;
	case EPI_Q2K:
		panel_lanes_of(p, lanes, EPI_Q2K);
		return;
	}
}

/* The canonical fold of a panel's lanes, then its outputs: rows
 * [rs + m0, rs + m1) of tokens [0, T) to y (row rs + m at y[t * ldy + m -
 * m0]). */
static void panel_store(float (*lanes)[16][16], int m0, int m1, int T, float *y, size_t ldy)
{
	__m512i r[16], u[16];
	const __mmask16 want = (__mmask16)(((1u << m1) - 1) & ~((1u << m0) - 1));

	for (int m = 0; m < 16; m++) {
		__m512 l[16];

		for (int j = 0; j < 16; j++)
			l[j] = _mm512_load_ps(lanes[j][m]);
		for (int h = 8; h >= 1; h >>= 1)
			for (int j = 0; j < h; j++)
				l[j] = _mm512_add_ps(l[j], l[j + h]);
		r[m] = _mm512_castps_si512(l[0]); /* [t] of row m */
	}
	transpose16(r, u); /* u[t] = [m] of token t */
	for (int t = 0; t < T; t++) {
		__m512 v = _mm512_castsi512_ps(u[t]);

		if (m0)
			v = _mm512_maskz_compress_ps(want, v);
		_mm512_mask_storeu_ps(y + (size_t)t * ldy, (__mmask16)((1u << (m1 - m0)) - 1), v);
	}
}

/* The unit planes of a panel, [16 rows][NB_MAX units] each. */
struct planes {
	float d[NB_MAX * 16], dm[NB_MAX * 16], s0[NB_MAX * 16], s1[NB_MAX * 16];
	float n0[NB_MAX * 16], n1[NB_MAX * 16];
};

int coli_gemm_amx(const struct coli_mat *w, const struct coli_act *x, int S, float *y, int ldy,
                  int row0, int row1)
{
	const int nb = w->cols / COLI_QBLOCK;
	const enum epi e = epi_of(w->dtype);
	const int q8 = w->dtype == COLI_DTYPE_Q8_0, g16 = e == EPI_G16 || e == EPI_Q2K;
	/* token tiles whose B fits the scratch */
	const int tiles_max =
	    XPANEL_BYTES / (nb * XTILE_BYTES) > 0 ? XPANEL_BYTES / (nb * XTILE_BYTES) : 1;
	int8_t xpanel[XPANEL_BYTES] __attribute__((aligned(64)));
	int8_t wun[q8 ? 64 : NB_MAX * 512] __attribute__((aligned(64)));
	struct planes pl __attribute__((aligned(64)));
	float lanes[16][16][16] __attribute__((aligned(64)));
	const struct coli_amx_panel up = {wun, pl.d, pl.dm, pl.s0, pl.s1, pl.n0, pl.n1};

	if (!coli_amx_has_dtype(w->dtype) || w->cols > COLI_AMX_MAX_K || w->rows < 16 ||
	    row0 >= row1)
		return row0 >= row1 ? 0 : -ENOTSUP;
	_tile_loadconfig(g16 ? &g_cfg_g16 : &g_cfg_gemm);
	for (int s0 = 0; s0 < S; s0 += 16 * tiles_max) {
		const int ntok = S - s0 < 16 * tiles_max ? S - s0 : 16 * tiles_max;
		const int ntiles = (ntok + 15) / 16;
		int8_t *xb = xpanel;
		float *dxt = (float *)(xpanel + (size_t)ntiles * nb * 512);
		int32_t *qst = (int32_t *)(dxt + (size_t)ntiles * nb * 16);
		int32_t *hst = qst + (size_t)ntiles * nb * 16;

		for (int i = 0; i < ntiles; i++) {
			int T = ntok - 16 * i < 16 ? ntok - 16 * i : 16;
			pack_tokens(x + s0 + 16 * i, T, nb, xb + (size_t)i * nb * 512,
			            dxt + (size_t)i * nb * 16, qst + (size_t)i * nb * 16,
			            e == EPI_Q2K ? hst + (size_t)i * nb * 16 : NULL);
		}
		for (int r = row0; r < row1; r += 16) {
			const int rs = r + 16 <= w->rows ? r : w->rows - 16; /* panel start */
			const int re = r + 16 < row1 ? r + 16 : row1;        /* rows stored */
			struct panel p = {
			    .a = wun, .a_blk = 512, .a_stride = 32, .u = &up, .nb = nb};

			coli_amx_panel_unpack(w, rs, &up);
			if (q8) {
				p.a = (const int8_t *)w->data + (size_t)rs * nb * 32;
				p.a_blk = 32;
				p.a_stride = (size_t)nb * 32;
			}
			for (int i = 0; i < ntiles; i++) {
				const int T = ntok - 16 * i < 16 ? ntok - 16 * i : 16;
				float *yt = y + (size_t)(s0 + 16 * i) * ldy - row0;

				p.xb = xb + (size_t)i * nb * 512;
				p.dxt = dxt + (size_t)i * nb * 16;
				p.qst = qst + (size_t)i * nb * 16;
				p.hst = hst + (size_t)i * nb * 16;
				panel_lanes(&p, lanes, e);
				panel_store(lanes, r - rs, re - rs, T, yt + r, (size_t)ldy);
			}
		}
	}
	_tile_release();
	return 0;
}

int64_t coli_cpu_amx_peak_run(long n)
{
	static const int8_t a[16 * 64] __attribute__((aligned(64))) = {1};
	if (coli_cpu_isa_best() < COLI_CPU_ISA_AMX)
		return -ENOTSUP;
	_tile_loadconfig(&g_cfg_peak);
	_tile_loadd(4, a, 64);
	_tile_loadd(5, a, 64);
	_tile_loadd(6, a, 64);
	_tile_loadd(7, a, 64);
	_tile_zero(0);
	_tile_zero(1);
	_tile_zero(2);
	_tile_zero(3);
	for (long i = 0; i < n; i++) {
		_tile_dpbssd(0, 4, 6);
		_tile_dpbssd(1, 4, 7);
		_tile_dpbssd(2, 5, 6);
		_tile_dpbssd(3, 5, 7);
	}
	_tile_release();
	return (int64_t)n * 4 * 2 * 16 * 16 * 64;
}
