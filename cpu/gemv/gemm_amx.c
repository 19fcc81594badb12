/*
 * cpu/gemv/gemm_amx.c — coli_gemm for Q8_0, Q4_0, Q4_K and Q5_K weights on AMX
 * int8 tiles (Sapphire Rapids and later), bit-identical to cpu/gemv/gemv_ref.c
 * and cpu/kquant/kquant.c: THE CANONICAL REDUCTION of cpu.h and its K-quant
 * form. Called only when cpu/dispatch.c found amx_tile + amx_int8 by cpuid
 * and Linux granted the tile state (arch_prctl ARCH_REQ_XCOMP_PERM), and only
 * for S >= coli_amx_min_s activations; below that the AVX-512 kernels are
 * faster.
 *
 * How the bits stay canonical. One TDPBSSD multiplies a weight tile A by an
 * activation tile B whose K is ONE 32-block, so each int32 of C is one
 * block's exact sum, never two blocks mixed:
 *
 *   A  16 weight rows x 32 int8 (block b)        tmm2/3: 16 rows x 32 B
 *   B  8 x 16 x 4 int8: B[k/4][t][k%4] = xq[t][32b + k]  tmm4/5: 8 rows x 64 B
 *   C  16 rows x 16 tokens int32                 tmm0/1: 16 rows x 64 B
 *
 * The canonical lanes are l[r][t][b % 16]. Lane j of all 16 x 16 outputs
 * is worked as one unit: its blocks j, j + 16, j + 32, ... ascending, 16
 * zmm accumulators (one per weight row, the 16 tokens in the zmm) kept in
 * registers:
 *
 *   acc[m] = fmadd(cvt(C[m][0..15]), dw[r+m][b] * dx[0..15][b], acc[m])
 *
 * which is the reference's fmaf((float)s, dw * dx, l) element by element
 * (the product rounded to fp32 first, then one fused step). Q4_K / Q5_K:
 * a unit is one group of 32 of a superblock, its quants (0..15, 0..31) the
 * A tile's bytes, and the epilogue is kquant.c's: A = C * sc, then
 * fmadd(A, d * dx), then fmadd(-mn * qsum, dmin * dx). The 16 lanes go
 * to lanes[j][m][t] (16 KiB), are folded by the canonical tree (8, 4, 2,
 * 1) and written to y[t][r]. Lanes past the last block stay +0.0f, as in the
 * reference. C goes through memory (tilestored, then 16 zmm loads); two C
 * tiles alternate so one block's TDPBSSD runs while the previous one's
 * epilogue does.
 *
 * Operands. A is read straight from a Q8_0 matrix (row stride K bytes); a
 * Q4_0 row panel is unpacked once to int8 (nibble - 8) as [block][16 rows]
 * [32 B] and shared by all token tiles. B is built once a call per token
 * tile (16 activations; fewer are zero padded, their outputs not written):
 * a 16 x 16 dword transpose of two blocks of 16 activations at a time, plus
 * dx and qsum transposed to [block][16 tokens]. The weights' fp16 scales of
 * a panel are widened once to [16 rows][block]; a K-quant panel is unpacked
 * as Q4_0's, with each unit's scale, min, d and dmin beside it. A last row panel of fewer than 16
 * rows is computed as the matrix's last 16 rows (the overlap is computed
 * twice, stored once), so the tile shapes never change within a call.
 *
 * Limits: K <= COLI_AMX_MAX_K and rows >= 16, else the caller runs the VNNI
 * path (gemv_avx512.c). Scratch lives on the stack (~420 KiB at the largest
 * K, K-quants): the kernels allocate nothing.
 */
#include <errno.h>
#include <immintrin.h>
#include <string.h>

#include "cpu/cpu_internal.h"

#define INLINE static inline __attribute__((always_inline))

#define NB_MAX (COLI_AMX_MAX_K / COLI_QBLOCK) /* blocks of the longest row */
/* Activation scratch of a call: as many token tiles of B as fit, each
 * nb x (512 B of quants + 64 B of dx + 64 B of qsum). */
#define XPANEL_BYTES (NB_MAX * 640)

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

/* One token tile of B: xb [nb][8][64] int8, dxt [nb][16] fp32 and qst
 * [nb][16] int32 (qsum, for the K-quants' min term), from the T (1..16)
 * activations x[0..T). */
static void pack_tokens(const struct coli_act *x, int T, int nb, int8_t *xb, float *dxt,
                        int32_t *qst)
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
}

/* A Q4_0 panel's 16 rows (from row rs) as int8 [nb][16][32], nibble - 8,
 * low nibbles (elements 0..15) then high ones (16..31). */
static void unpack_q4(const struct coli_mat *w, int rs, int nb, int8_t *wa)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
	const __m512i ia = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
	const __m512i ib = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);

	for (int m = 0; m < 16; m++) {
		const uint8_t *q = (const uint8_t *)w->data + (size_t)(rs + m) * nb * 16;
		int b = 0;

		for (; b + 4 <= nb; b += 4) {
			__m512i v = _mm512_loadu_si512(q + (size_t)b * 16);
			__m512i lo = _mm512_sub_epi8(_mm512_and_si512(v, m4), eight);
			__m512i hi =
			    _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), eight);
			__m512i p = _mm512_permutex2var_epi64(lo, ia, hi); /* blocks b, b+1 */
			__m512i s = _mm512_permutex2var_epi64(lo, ib, hi); /* blocks b+2, b+3 */

			_mm256_store_si256((__m256i *)(wa + ((size_t)b * 16 + m) * 32),
			                   _mm512_castsi512_si256(p));
			_mm256_store_si256((__m256i *)(wa + ((size_t)(b + 1) * 16 + m) * 32),
			                   _mm512_extracti64x4_epi64(p, 1));
			_mm256_store_si256((__m256i *)(wa + ((size_t)(b + 2) * 16 + m) * 32),
			                   _mm512_castsi512_si256(s));
			_mm256_store_si256((__m256i *)(wa + ((size_t)(b + 3) * 16 + m) * 32),
			                   _mm512_extracti64x4_epi64(s, 1));
		}
		for (; b < nb; b++) {
			int8_t *o = wa + ((size_t)b * 16 + m) * 32;

			for (int j = 0; j < 16; j++) {
				o[j] = (int8_t)((q[b * 16 + j] & 15) - 8);
				o[j + 16] = (int8_t)((q[b * 16 + j] >> 4) - 8);
			}
		}
	}
}

/* The K-quants' per-unit values of a panel, [16 rows][nb units] each. */
struct kq_scales {
	int32_t *sc, *mn; /* the group's 6-bit scale and min */
	float *d, *dmin;  /* the superblock's halves, widened */
};

/* A Q4_K / Q5_K panel's 16 rows (from row rs): the quants of unit (group)
 * b as int8 [nb][16][32] (0..15, Q5_K 0..31), and each unit's scale, min,
 * d and dmin, as cpu/kquant/kquant.c's unit_ints reads them. */
static void unpack_kq(const struct coli_mat *w, int rs, int nb, int8_t *wa,
                      const struct kq_scales *ks)
{
	const int five = w->dtype == COLI_DTYPE_Q5_K, bb = five ? 176 : 144;
	const size_t rowb = (size_t)(nb / 8) * bb;
	const __m256i m4 = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);

	for (int m = 0; m < 16; m++) {
		const uint8_t *row = (const uint8_t *)w->data + (size_t)(rs + m) * rowb;
		float d = 0, dmin = 0;

		for (int b = 0; b < nb; b++) {
			const uint8_t *bp = row + (size_t)(b / 8) * bb;
			const int g = b % 8;
			__m256i v = _mm256_loadu_si256(
			    (const __m256i *)(bp + (five ? 48 : 16) + g / 2 * 32));
			__m256i q = _mm256_and_si256(_mm256_srli_epi16(v, g % 2 * 4), m4);
			int sc, mn;

			if (five) {
				__m256i h = _mm256_loadu_si256((const __m256i *)(bp + 16));

				h = _mm256_and_si256(_mm256_srli_epi16(h, g), one);
				q = _mm256_or_si256(q, _mm256_slli_epi16(h, 4));
			}
			_mm256_store_si256((__m256i *)(wa + ((size_t)b * 16 + m) * 32), q);
			coli_kq_scale_min(bp + 4, g, &sc, &mn);
			ks->sc[m * nb + b] = sc;
			ks->mn[m * nb + b] = -mn;
			if (!g) { /* the superblock's halves, widened exactly (F16C) */
				d = _cvtsh_ss((uint16_t)(bp[0] | bp[1] << 8));
				dmin = _cvtsh_ss((uint16_t)(bp[2] | bp[3] << 8));
			}
			ks->d[m * nb + b] = d;
			ks->dmin[m * nb + b] = dmin;
		}
	}
}

/* A panel's fp16 scales (16 rows of nb, row stride nb) as fp32 [16][nb]. */
static void widen_scales(const uint16_t *s, int nb, float *dwf)
{
	for (int m = 0; m < 16; m++)
		for (int b = 0; b < nb; b += 16) {
			__mmask16 k = nb - b >= 16 ? 0xffff : (__mmask16)((1u << (nb - b)) - 1);
			__m512 v =
			    _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, s + (size_t)m * nb + b));

			_mm512_mask_storeu_ps(dwf + (size_t)m * nb + b, k, v);
		}
}

/* acc[m] (+)= C[m] * (dw[m][b] * dx) for block b; c is C as stored, dw
 * the panel's [16][nb] scales at block b. */
INLINE void epilogue(const int32_t *c, const float *dwb, size_t nb, const float *dxb,
                     __m512 acc[16])
{
	const __m512 dx = _mm512_load_ps(dxb);

#pragma GCC unroll 16
	for (int m = 0; m < 16; m++) {
		__m512 s = _mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * m));
		__m512 sc = _mm512_mul_ps(_mm512_set1_ps(dwb[m * nb]), dx);

		acc[m] = _mm512_fmadd_ps(s, sc, acc[m]);
	}
}

/* Operands of one (row panel, token tile). */
struct panel {
	const int8_t *a;            /* block 0 of row 0 of the A operand */
	size_t a_blk;               /* bytes from one block to the next */
	size_t a_stride;            /* bytes from one row to the next */
	const int8_t *xb;           /* [nb][8][64] */
	const float *dxt;           /* [nb][16] */
	const int32_t *qst;         /* [nb][16] */
	const float *dwf;           /* [16][nb] (K-quants: d) */
	const struct kq_scales *ks; /* K-quants, else NULL */
	int nb;
};

/* The K-quants' unit b (cpu/kquant/kquant.c): A = sc * sum, C = -mn *
 * qsum, then fmaf(A, d * dx) and fmaf(C, dmin * dx), in that order. */
INLINE void epilogue_kq(const int32_t *c, const struct panel *p, int b, __m512 acc[16])
{
	const __m512 dx = _mm512_load_ps(p->dxt + (size_t)b * 16);
	const __m512i qs = _mm512_load_si512(p->qst + (size_t)b * 16);
	const struct kq_scales *ks = p->ks;

#pragma GCC unroll 16
	for (int m = 0; m < 16; m++) {
		const int i = m * p->nb + b;
		__m512i A =
		    _mm512_mullo_epi32(_mm512_load_si512(c + 16 * m), _mm512_set1_epi32(ks->sc[i]));
		__m512i C = _mm512_mullo_epi32(_mm512_set1_epi32(ks->mn[i]), qs);

		acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(A),
		                         _mm512_mul_ps(_mm512_set1_ps(ks->d[i]), dx), acc[m]);
		acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(C),
		                         _mm512_mul_ps(_mm512_set1_ps(ks->dmin[i]), dx), acc[m]);
	}
}

/* lanes[j][m][t] for j < 16 of one (row panel, token tile), unfolded. */
INLINE void panel_lanes_of(const struct panel *p, float (*lanes)[16][16], const int kq)
{
	int32_t cbuf[2][256] __attribute__((aligned(64)));

	for (int j = 0; j < 16; j++) {
		__m512 acc[16];

		for (int m = 0; m < 16; m++)
			acc[m] = _mm512_setzero_ps();
		for (int b = j; b < p->nb; b += 32) {
			const int b1 = b + 16;

			_tile_zero(0);
			_tile_loadd(2, p->a + (size_t)b * p->a_blk, p->a_stride);
			_tile_loadd(4, p->xb + (size_t)b * 512, 64);
			_tile_dpbssd(0, 2, 4);
			_tile_stored(0, cbuf[0], 64);
			if (b1 < p->nb) {
				_tile_zero(1);
				_tile_loadd(3, p->a + (size_t)b1 * p->a_blk, p->a_stride);
				_tile_loadd(5, p->xb + (size_t)b1 * 512, 64);
				_tile_dpbssd(1, 3, 5);
				_tile_stored(1, cbuf[1], 64);
			}
			if (kq)
				epilogue_kq(cbuf[0], p, b, acc);
			else
				epilogue(cbuf[0], p->dwf + b, p->nb, p->dxt + (size_t)b * 16, acc);
			if (b1 < p->nb && kq)
				epilogue_kq(cbuf[1], p, b1, acc);
			else if (b1 < p->nb)
				epilogue(cbuf[1], p->dwf + b1, p->nb, p->dxt + (size_t)b1 * 16,
				         acc);
		}
		for (int m = 0; m < 16; m++)
			_mm512_store_ps(lanes[j][m], acc[m]);
	}
}

static void panel_lanes(const struct panel *p, float (*lanes)[16][16])
{
	if (p->ks)
		panel_lanes_of(p, lanes, 1);
	else
		panel_lanes_of(p, lanes, 0);
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

int coli_gemm_amx(const struct coli_mat *w, const struct coli_act *x, int S, float *y, int ldy,
                  int row0, int row1)
{
	const int nb = w->cols / COLI_QBLOCK;
	const int q4 = w->dtype == COLI_DTYPE_Q4_0;
	const int kq = w->dtype == COLI_DTYPE_Q4_K || w->dtype == COLI_DTYPE_Q5_K;
	/* token tiles whose B fits the scratch */
	const int tiles_max = XPANEL_BYTES / (nb * 640) > 0 ? XPANEL_BYTES / (nb * 640) : 1;
	int8_t xpanel[XPANEL_BYTES] __attribute__((aligned(64)));
	int8_t wun[q4 || kq ? NB_MAX * 512 : 64] __attribute__((aligned(64)));
	int32_t ksc[kq ? NB_MAX * 16 : 1], kmn[kq ? NB_MAX * 16 : 1];
	float kdmin[kq ? NB_MAX * 16 : 1];
	float dwf[NB_MAX * 16] __attribute__((aligned(64)));
	float lanes[16][16][16] __attribute__((aligned(64)));
	const struct kq_scales ks = {ksc, kmn, dwf, kdmin};

	if ((w->dtype != COLI_DTYPE_Q8_0 && !q4 && !kq) || w->cols > COLI_AMX_MAX_K ||
	    w->rows < 16 || row0 >= row1)
		return row0 >= row1 ? 0 : -ENOTSUP;
	_tile_loadconfig(&g_cfg_gemm);
	for (int s0 = 0; s0 < S; s0 += 16 * tiles_max) {
		const int ntok = S - s0 < 16 * tiles_max ? S - s0 : 16 * tiles_max;
		const int ntiles = (ntok + 15) / 16;
		int8_t *xb = xpanel;
		float *dxt = (float *)(xpanel + (size_t)ntiles * nb * 512);
		int32_t *qst = (int32_t *)(dxt + (size_t)ntiles * nb * 16);

		for (int i = 0; i < ntiles; i++) {
			int T = ntok - 16 * i < 16 ? ntok - 16 * i : 16;
			pack_tokens(x + s0 + 16 * i, T, nb, xb + (size_t)i * nb * 512,
			            dxt + (size_t)i * nb * 16, qst + (size_t)i * nb * 16);
		}
		for (int r = row0; r < row1; r += 16) {
			const int rs = r + 16 <= w->rows ? r : w->rows - 16; /* panel start */
			const int re = r + 16 < row1 ? r + 16 : row1;        /* rows stored */
			struct panel p = {.dwf = dwf, .nb = nb, .a_blk = 512, .a_stride = 32};

			if (kq) {
				unpack_kq(w, rs, nb, wun, &ks);
				p.a = wun;
				p.ks = &ks;
			} else if (q4) {
				widen_scales(w->scales + (size_t)rs * nb, nb, dwf);
				unpack_q4(w, rs, nb, wun);
				p.a = wun;
			} else {
				widen_scales(w->scales + (size_t)rs * nb, nb, dwf);
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
				panel_lanes(&p, lanes);
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
