/*
 * cpu/cpu_internal.h — what the files of cpu/ share and nothing else sees:
 * the per-ISA kernel entry points the dispatcher (cpu/dispatch.c) chooses
 * among. Every entry computes THE CANONICAL REDUCTION of cpu.h, so all of
 * them return the same bits; they differ only in speed.
 */
#ifndef COLI_CPU_INTERNAL_H
#define COLI_CPU_INTERNAL_H

#include "cpu/cpu.h"

/* Rows a gemm pass keeps hot while it walks the S activations: small enough
 * that the row group stays in L1/L2 (4 rows x 2048 bf16 = 16 KiB). */
#define COLI_GEMM_ROWS 4

/* Q4_0's decode row stream (gemv_avx2.c gemv_q4, gemv_avx512.c gemv_q4z):
 * the 256 bytes of 16 blocks 2 KiB ahead of wq (the next rows follow a row
 * in memory). AVX2, two threads from DRAM, under load ~1.8: 0.44 -> 0.50-0.56
 * of the read bound; 1-4 KiB and a prefetch of the scales measured the same. */
static inline void coli_q4_prefetch16(const uint8_t *wq)
{
	for (int l = 0; l < 256; l += 64)
		__builtin_prefetch(wq + 2048 + l, 0, 3);
}

/* The scalar reference for one row: y = W[r] . x. */
float coli_gemv_ref_row(const struct coli_mat *w, const struct coli_act *x, int r);

void coli_gemv_avx2(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                    int row1);
void coli_gemm_avx2(const struct coli_mat *w, const struct coli_act *x, int S, float *y, int ldy,
                    int row0, int row1);
/* coli_gemm_avx2's float weights (F32, F16, BF16; cpu/gemv/gemv_float_avx2.c) */
void coli_gemm_float_avx2(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                          size_t ldy, int row0, int row1);
void coli_gemv_avx512(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                      int row1);
void coli_gemm_avx512(const struct coli_mat *w, const struct coli_act *x, int S, float *y, int ldy,
                      int row0, int row1);

/* AMX int8 tiles (cpu/gemv/gemm_amx.c): coli_gemm for Q8_0, Q4_0 and every GGUF
 * block type of cpu/kquant/kquant.c (Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K) weights
 * with K <= COLI_AMX_MAX_K and at least 16 rows; -ENOTSUP for anything else
 * (the caller runs coli_gemm_avx512, same bits). Used from COLI_AMX_MIN_S
 * activations up: on the 2-vCPU Sapphire Rapids VM, one thread, q8/q4
 * 768x2048 and 2048x768, the tiles ran 0.4-0.7x the VNNI path at S = 2,
 * 0.8-1.7x at 4, 1.3-2.2x at 6, 1.9-3.2x at 8, 4-5x from 16 (a token tile is
 * 16 wide: fewer are zero padded). Needs the tile state granted
 * (cpu/dispatch.c). */
#define COLI_AMX_MAX_K 8192
#define COLI_AMX_MIN_S 8
/* The K-quants unpack a panel's quants and per-unit scales before its tiles
 * and have a second fmaf or a second product a unit: Q4_K / Q5_K ran
 * 0.7-1.1x the AVX-512 kernels at S = 8-12 and 1.4-2x from 16 (same VM, one
 * thread); on 2026-12-02, 768 x 2048, one thread, the crossovers were about
 * S = 8 (Q6_K, Q2_K), 11 (Q3_K) and 13 (Q4_K), each 1.4-2.2x at 16. Q4_1,
 * Q5_0 and Q5_1 (one 32-block a unit) cross at 5-6 as Q4_0 does (1.4-1.8x
 * at 8) and take COLI_AMX_MIN_S. */
#define COLI_AMX_MIN_S_KQ 16
static inline int coli_amx_min_s(enum coli_dtype t)
{
	switch (t) {
	case COLI_DTYPE_Q2_K:
	case COLI_DTYPE_Q3_K:
	case COLI_DTYPE_Q4_K:
	case COLI_DTYPE_Q5_K:
	case COLI_DTYPE_Q6_K:
		return COLI_AMX_MIN_S_KQ;
	default:
		return COLI_AMX_MIN_S;
	}
}
/* The weight types coli_gemm_amx computes. */
static inline int coli_amx_has_dtype(enum coli_dtype t)
{
	switch (t) {
	case COLI_DTYPE_Q8_0:
	case COLI_DTYPE_Q4_0:
	case COLI_DTYPE_Q4_1:
	case COLI_DTYPE_Q5_0:
	case COLI_DTYPE_Q5_1:
	case COLI_DTYPE_Q2_K:
	case COLI_DTYPE_Q3_K:
	case COLI_DTYPE_Q4_K:
	case COLI_DTYPE_Q5_K:
	case COLI_DTYPE_Q6_K:
		return 1;
	default:
		return 0;
	}
}
/* A 16-row weight panel as the tiles read it (cpu/gemv/gemm_unpack_amx.c,
 * whose essay has each type's fields): q [nb][16][32] int8 quants, the rest
 * [16 rows][nb units] planes; a type fills the ones it has. */
struct coli_amx_panel {
	int8_t *q;      /* the A operand (not Q8_0: read in place) */
	float *d;       /* the unit's d (Q8_0 / Q4_0: the block scale) */
	float *dm;      /* the min term's factor: dmin or m */
	float *s0, *s1; /* Q2_K, Q3_K, Q6_K: the two groups' scales (Q4_K / Q5_K: s0) */
	float *n0, *n1; /* Q2_K: minus the two groups' mins (Q4_K / Q5_K: n0) */
};
/* Unpacks rows [rs, rs + 16) of w into u; -ENOTSUP for a type without tiles. */
int coli_amx_panel_unpack(const struct coli_mat *w, int rs, const struct coli_amx_panel *u);
int coli_gemm_amx(const struct coli_mat *w, const struct coli_act *x, int S, float *y, int ldy,
                  int row0, int row1);

/* coli_exp_scaled (cpu/ops.c): Cephes' expf steps, the constants every
 * form uses (range reduction by ln 2 in two parts, a degree-5 polynomial). */
#define COLI_EXP_LO    -87.33654f /* below: exp underflows, the result is 0 */
#define COLI_EXP_LOG2E 1.44269504088896341f
#define COLI_EXP_C1    0.693359375f
#define COLI_EXP_C2    -2.12194440e-4f
#define COLI_EXP_P0    1.9875691500e-4f
#define COLI_EXP_P1    1.3981999507e-3f
#define COLI_EXP_P2    8.3334519073e-3f
#define COLI_EXP_P3    4.1665795894e-2f
#define COLI_EXP_P4    1.6666665459e-1f
#define COLI_EXP_P5    5.0000001201e-1f
void coli_exp_scaled_ref(const float *x, int n, float m, float s, float *w);
void coli_exp_scaled_avx2(const float *x, int n, float m, float s, float *w);

/* coli_expf's constants (cpu/ops.c), and SwiGLU's forms: the AVX2 one is
 * coli_expf's steps eight at a time, the same bits (tests/cpu/silu_isa). */
#define COLI_EXPF_LOG2E  1.44269502f
#define COLI_EXPF_LN2_HI 0.693145751953125f
#define COLI_EXPF_LN2_LO 1.42860677e-06f
void coli_silu_mul_ref(const float *g, const float *u, float *h, int n);
void coli_silu_mul_avx2(const float *g, const float *u, float *h, int n);

/* coli_attention_head_kv compiled with hardware fma (cpu/attn_head.h). */
void coli_attention_head_avx2(const float *q, const struct coli_kv_rows *K,
                              const struct coli_kv_rows *V, int n_pos, int hd, int vd, float scale,
                              float sink, float *scores, float *out);
/* coli_attention_group's AVX2 form: eight heads in the lanes (a last block
 * of fewer repeats its last head in the free lanes). */
void coli_attention_group_avx2(const float *q, int G, const struct coli_kv_rows *K,
                               const struct coli_kv_rows *V, int n_pos, int hd, int vd, float scale,
                               const float *sink, float *sc, float *out);
/* Its steps for eight heads (nh <= 8 of them real) over a share of the
 * positions [p0, p1) or of the outputs [i0, i1), any split giving the same
 * bits (cpu/attn/attention_avx2.c; coli_attention_groups_mt runs them across a pool):
 * scores and their max, the max over shares' maxes, exp, the sum of all
 * exps (in position order), the weights, outputs by blocks of positions. */
void coli_attn8_scores_avx2(const float *q, int nh, const struct coli_kv_rows *K, int p0, int p1,
                            int hd, float scale, float *sc, float *mx8);
void coli_attn8_max_avx2(const float *maxes, int n, float *mx8);
void coli_attn8_exp_avx2(float *sc, int nh, int p0, int p1, const float *mx8);
void coli_attn8_sum_avx2(const float *sc, int n_pos, float *sum8);
void coli_attn8_div_avx2(float *sc, int p0, int p1, const float *sum8);
/* Sinks (sink [nh], the free lanes repeating the last): each lane's max
 * with its sink, then (after the sum) its sum + exp(sink - max), as
 * coli_attention_head_sink. */
void coli_attn8_sink_max(const float *sink, int nh, float *mx8);
void coli_attn8_sink_sum(const float *sink, int nh, const float *mx8, float *sum8);
/* Outputs: one block's sums (positions [p0, p1) within one
 * COLI_ATTN_OUT_BLOCK) of the dims [i0, i1) into acc [i1 - i0][8 lanes]
 * (nh: the heads sc holds; the free lanes repeat the last); the blocks
 * folded in order (acc += blk, n floats); acc's dims [i0, i1) stored to
 * out [nh][hd]. */
void coli_attn8_out_avx2(const float *sc, int nh, const struct coli_kv_rows *V, int p0, int p1,
                         int i0, int i1, float *acc);
void coli_attn8_fold_avx2(float *acc, const float *blk, int n);
/* The steps from the scores' max (mx8) to the weights, in their order (the
 * sinks' max, exp, the sum, the sinks' term, the division; sink NULL:
 * none), and one output block from p0 summed into acc (blk the block's
 * sums when p0 > 0): the group's and the rows-walk's compositions. */
void coli_attn8_weights(float *sc, int nh, int n_pos, const float *sink, float *mx8);
void coli_attn8_out_block(const float *sc, int nh, const struct coli_kv_rows *V, int p0, int n_pos,
                          int vd, float *acc, float *blk);
void coli_attn8_store(const float *acc, int nh, int hd, int i0, int i1, float *out);
/* The scores and the outputs' sums with 512-bit vectors, the same bits
 * (cpu/attn/attention_avx512.c: units of five heads or more over a bf16 or
 * one-scale q8 cache; the rest through the AVX2 steps), and the pair the
 * ISA in force picks. */
void coli_attn8_scores_avx512(const float *q, int nh, const struct coli_kv_rows *K, int p0, int p1,
                              int hd, float scale, float *sc, float *mx8);
void coli_attn8_out_avx512(const float *sc, int nh, const struct coli_kv_rows *V, int p0, int p1,
                           int i0, int i1, float *acc);
static inline void coli_attn8_scores(const float *q, int nh, const struct coli_kv_rows *K, int p0,
                                     int p1, int hd, float scale, float *sc, float *mx8)
{
	if (coli_cpu_isa() >= COLI_CPU_ISA_AVX512)
		coli_attn8_scores_avx512(q, nh, K, p0, p1, hd, scale, sc, mx8);
	else
		coli_attn8_scores_avx2(q, nh, K, p0, p1, hd, scale, sc, mx8);
}
static inline void coli_attn8_out(const float *sc, int nh, const struct coli_kv_rows *V, int p0,
                                  int p1, int i0, int i1, float *acc)
{
	if (coli_cpu_isa() >= COLI_CPU_ISA_AVX512)
		coli_attn8_out_avx512(sc, nh, V, p0, p1, i0, i1, acc);
	else
		coli_attn8_out_avx2(sc, nh, V, p0, p1, i0, i1, acc);
}
/* A typed row's elements [i0, i0 + n) as fp32 into tmp (cpu/kvq.c's
 * values, eight at a time). */
void coli_kv_decode_avx2(const struct coli_kv_rows *r, const char *row, int i0, int n, float *tmp);
/* coli_kv_rows_at with fp32 read in place without a call. */
static inline const float *coli_kv_at(const struct coli_kv_rows *r, size_t p, int i0, int n,
                                      float *tmp)
{
	if (r->type == COLI_KV_F32)
		return (const float *)coli_kv_rows_ptr(r, p) + i0;
	return coli_kv_rows_at(r, p, i0, n, tmp);
}

/* Q4_0's scale search (cpu/dtype.c): a block's squared error at scale d,
 * summed in 8 lanes folded ((0+4)+(2+6))+((1+5)+(3+7)); the AVX2 form is the
 * same steps, a lane each (tests/cpu/quant_isa). */
float coli_q4_block_err_ref(const float *x, float d);
float coli_q4_block_err_avx2(const float *x, float d);

/* GGUF's block types (cpu/kquant/kquant.c): one row's canonical dot at row (its
 * blocks), every row of [row0, row1); the halves-and-sixes of the K-quants'
 * packed scales. The vector forms (cpu/kquant/kquant_simd.h) return -ENOTSUP for a
 * type they do not cover, and the caller runs the reference (same bits). */
float coli_kq_row_ref(enum coli_dtype t, const uint8_t *row, const struct coli_act *x, int K);
/* Unit b of a row (cpu/kquant/kquant.c's steps) into its lane of l[16]: the vector
 * forms finish a row's last units (fewer than 8) with it. */
void coli_kq_unit_acc(enum coli_dtype t, const uint8_t *row, const struct coli_act *x, int b,
                      float *l);
void coli_kq_gemv_ref(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                      int row1);
void coli_kq_scale_min(const uint8_t *s, int j, int *sc, int *m);
int coli_kq_q3_scale(const uint8_t *s, int g);
int coli_kq_gemv_avx2(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                      int row1);
int coli_kq_gemv_avx512(const struct coli_mat *w, const struct coli_act *x, float *y, int row0,
                        int row1);
/* The same for S activations (coli_gemm's contract: y[s * ldy + r - row0]). */
int coli_kq_gemm_avx2(const struct coli_mat *w, const struct coli_act *x, int S, float *y, int ldy,
                      int row0, int row1);
int coli_kq_gemm_avx512(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                        int ldy, int row0, int row1);
/* GGUF's block types and Q4_0 on AVX2 with eight rows in a vector's lanes
 * (cpu/gemv/gemm_panel.h): the rows of [row0, row1) in whole panels of
 * eight, the same bits; returns the first row not done (row0 for another
 * type or K > COLI_PANEL_MAX_K). coli_kq_gemm_avx2 and _avx512 take it from
 * COLI_PANEL_MIN_S activations, coli_gemm_avx2's Q4_0 from
 * COLI_PANEL_MIN_S_Q4_0 (its own GEMM is close behind). Below 8 the row
 * kernels' two activations a row win once the weights come from memory, as
 * a decode step of several sequences reads them (the Zen 4 VM, `coli bench
 * kernels --mib 64`, S = 4, ms a pass, rows against the panel: AVX-512 q6_k
 * 4.6 / 10.6, q4_k 5.8 / 8.7, q2_k 9.2 / 14.6; AVX2 q6_k 5.2 / 11.6, q5_0 7.4
 * / 9.4); at 8 they were level (AVX2 q4_k 11.6-14.1 / 12.6-13.1, q5_0 15.3 /
 * 12.5, q6_k 10.9 / 14.5); the panel wins from about 16. (A cache-resident
 * matrix on a Zen 3 had the panel ahead from 3.) */
#define COLI_PANEL_MAX_K      8192
#define COLI_PANEL_MIN_S      8
#define COLI_PANEL_MIN_S_Q4_0 12
/* Q8_0 on AVX2 takes the eight-row panel from 8 activations: on the Zen 4 VM
 * (`coli bench kernels --isa avx2 --threads 2 --mib 128`, ms a pass, the tile
 * path against the panel, interleaved twice) S = 4 12.4 / 13.8 against 14.9 /
 * 13.8, S = 8 22.0 / 22.0 against 20.7 / 19.5, S = 16 41.5 / 43.7 against
 * 35.2 / 30.9 (2026-12-06). */
#define COLI_PANEL_MIN_S_Q8_0_AVX2 8
int coli_gemm_panel_avx2(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                         size_t ldy, int row0, int row1);
/* The same with AVX-512 VNNI's int32 dots (cpu/gemv/gemm_panel_avx512.c). */
int coli_gemm_panel_avx512(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                           size_t ldy, int row0, int row1);
/* Q4_0, Q8_0 and GGUF's block types, sixteen rows in a 512-bit vector's lanes and four
 * activations a walk (cpu/gemv/gemm_panel16_avx512.c): whole panels of
 * sixteen rows, the same bits; returns the first row not done (row0 for
 * another type or K > COLI_PANEL_MAX_K). Q8_0 from COLI_PANEL_MIN_S_Q8_0
 * activations. */
#define COLI_PANEL_MIN_S_Q8_0 4
/* the block types from 8 (on the Zen 4 VM at 4 the eight-row panel's two walks
 * of two ran as fast: 35 against 37 ms a pass; at 16 it took 74 against 64) */
#define COLI_PANEL16_MIN_S_KQ 8
int coli_gemm_panel16_avx512(const struct coli_mat *w, const struct coli_act *x, int S, float *y,
                             size_t ldy, int row0, int row1);

/* Fold 16 lanes by the canonical tree (h = 8, 4, 2, 1); l is clobbered. */
static inline float coli_lanes_fold(float *l)
{
	for (int h = 8; h >= 1; h >>= 1)
		for (int j = 0; j < h; j++)
			l[j] = l[j] + l[j + h];
	return l[0];
}

#endif
