/*
 * tests/cpu/kquant_gemv.c — GGUF's block types kept as stored (Q4_1, Q5_0,
 * Q5_1, Q2_K ... Q6_K; cpu/kquant/kquant.c): on random blocks (any quant byte,
 * random finite halves for d / dmin / m, a block of zero scale among them),
 *
 *   1. every kernel ISA this CPU has gives the scalar reference's bits, in
 *      coli_gemv, coli_gemm (S = 9 over 17 and 25 rows, each s: past
 *      COLI_PANEL_MIN_S, an odd count; over 25 AVX-512's sixteen-row panel,
 *      four activations a walk and one, then a panel of eight and a row; S =
 *      7 over 1 and 3 rows: the row kernels' four, two and one a row) and row sub-ranges of both (K up to 4096, and 40960 for
 *      the K-quants; for the 32-block types also K of 1-7 blocks past a
 *      multiple of 8, the vector forms' scalar tail);
 *   2. the reference is within fp32 rounding of a double dot product of the
 *      dequantized weights (coli_mat_row_f32: the gguf package's values,
 *      tests/cpu/ggml_dequant) with the quantized activations, the bound
 *      counting the min terms that may cancel (|w| + |w at q = 0|);
 *   3. and within the activation quantization's bound of the dot with the
 *      float activations (|error| <= sum |w| * dx / 2, plus rounding).
 *
 * It prints each type's largest relative errors.
 */
#include "helpers.h"

static const enum coli_dtype g_types[] = {COLI_DTYPE_Q4_1, COLI_DTYPE_Q5_0, COLI_DTYPE_Q5_1,
                                          COLI_DTYPE_Q2_K, COLI_DTYPE_Q3_K, COLI_DTYPE_Q4_K,
                                          COLI_DTYPE_Q5_K, COLI_DTYPE_Q6_K};
#define N_TYPES (int)(sizeof(g_types) / sizeof(g_types[0]))

/* Byte ranges of a block that hold quants (the rest: scales and halves). */
static void quant_bytes(enum coli_dtype t, int *a, int *b)
{
	switch (t) {
	case COLI_DTYPE_Q4_1:
		*a = 4, *b = 20;
		return;
	case COLI_DTYPE_Q5_0:
		*a = 2, *b = 22;
		return;
	case COLI_DTYPE_Q5_1:
		*a = 4, *b = 24;
		return;
	case COLI_DTYPE_Q2_K:
		*a = 16, *b = 80;
		return;
	case COLI_DTYPE_Q3_K:
		*a = 0, *b = 96;
		return;
	case COLI_DTYPE_Q4_K:
		*a = 16, *b = 144;
		return;
	case COLI_DTYPE_Q5_K:
		*a = 16, *b = 176;
		return;
	default: /* Q6_K */
		*a = 0, *b = 192;
		return;
	}
}

/* The offsets of a block's halves. */
static int halves(enum coli_dtype t, int *off)
{
	switch (t) {
	case COLI_DTYPE_Q4_1:
	case COLI_DTYPE_Q5_1:
	case COLI_DTYPE_Q4_K:
	case COLI_DTYPE_Q5_K:
		off[0] = 0, off[1] = 2;
		return 2;
	case COLI_DTYPE_Q5_0:
		off[0] = 0;
		return 1;
	case COLI_DTYPE_Q2_K:
		off[0] = 80, off[1] = 82;
		return 2;
	case COLI_DTYPE_Q3_K:
		off[0] = 108;
		return 1;
	default:
		off[0] = 208;
		return 1;
	}
}

static uint8_t *rand_blocks(enum coli_dtype t, int rows, int K)
{
	unsigned be, bb;
	size_t n;
	uint8_t *p;
	int off[2], nh;

	coli_dtype_block(t, &be, &bb);
	n = (size_t)rows * (K / be);
	p = xmalloc(n * bb);
	nh = halves(t, off);
	for (size_t i = 0; i < n * bb; i++)
		p[i] = (uint8_t)rng_u64();
	for (size_t i = 0; i < n; i++)
		for (int h = 0; h < nh; h++) {
			uint16_t v = coli_f32_to_fp16(i == 1 ? 0.0f : rng_uniform() * 0.02f);

			memcpy(p + i * bb + off[h], &v, 2);
		}
	return p;
}

int main(void)
{
	/* K-quants: whole 256-blocks; the 32-block types also fewer than 8
	 * blocks, and 8k + 1..7 (the vector forms' scalar tail) */
	/* 40960: Q2_K / Q3_K take their activations' sums of 16 in batches
	 * (cpu/kquant/kquant_simd.h kq_rows: 6 of S = 9 at this K) */
	static const int Ks_k[] = {256, 512, 768, 2048, 4096, 40960},
	                 Ks_32[] = {32, 96, 256, 288, 544, 800, 2080, 4096};
	/* 17: two panels of 8 and a row; 25 (with S = 9): a panel of 16, one of 8, a row */
	static const int rows_of[] = {1, 3, 17, 25};
	double maxq[N_TYPES] = {0}, maxf[N_TYPES] = {0};
	int fails = 0, cases = 0;
	enum coli_cpu_isa best = coli_cpu_isa();

	for (int ti = 0; ti < N_TYPES; ti++) {
		const enum coli_dtype t = g_types[ti];

		const unsigned be =
		    t == COLI_DTYPE_Q4_1 || t == COLI_DTYPE_Q5_0 || t == COLI_DTYPE_Q5_1 ? 32 : 256;
		const int *Ks = be == 32 ? Ks_32 : Ks_k;
		const size_t nk =
		    be == 32 ? sizeof(Ks_32) / sizeof(Ks_32[0]) : sizeof(Ks_k) / sizeof(Ks_k[0]);

		for (size_t ki = 0; ki < nk; ki++) {
			for (size_t ri = 0; ri < sizeof(rows_of) / sizeof(rows_of[0]); ri++) {
				const int K = Ks[ki], rows = rows_of[ri], S = rows < 8 ? 7 : 9;
				uint8_t *blk = rand_blocks(t, rows, K), *zq;
				struct coli_mat m, mz;
				struct test_act ta[9];
				float *ref = xmalloc((size_t)S * rows * sizeof(float)),
				      *y = xmalloc((size_t)S * rows * sizeof(float)),
				      *w = xmalloc((size_t)K * sizeof(float)),
				      *w0 = xmalloc((size_t)K * sizeof(float));
				struct coli_act acts[9];
				unsigned bb, be2;
				int qa, qb;

				coli_mat_view(&m, t, rows, K, blk);
				/* the same blocks with every quant byte 0: the offset terms */
				coli_dtype_block(t, &be2, &bb);
				quant_bytes(t, &qa, &qb);
				zq = xmalloc((size_t)rows * (K / be) * bb);
				memcpy(zq, blk, (size_t)rows * (K / be) * bb);
				for (size_t i = 0; i < (size_t)rows * (K / be); i++)
					memset(zq + i * bb + qa, 0, (size_t)(qb - qa));
				coli_mat_view(&mz, t, rows, K, zq);
				for (int s = 0; s < S; s++) {
					act_alloc(&ta[s], K);
					act_rand(&ta[s], K);
					acts[s] = ta[s].a;
				}
				coli_cpu_isa_force(COLI_CPU_ISA_SCALAR);
				for (int s = 0; s < S; s++)
					coli_gemv_ref(&m, &acts[s], ref + (size_t)s * rows, 0,
					              rows);
				/* 1. every ISA, gemv / gemm / sub-ranges, the same bits */
				for (int isa = COLI_CPU_ISA_SCALAR; isa <= (int)best; isa++) {
					if (coli_cpu_isa_force((enum coli_cpu_isa)isa))
						continue;
					poison(y, (size_t)S * rows);
					coli_gemm(&m, acts, S, y, rows, 0, rows);
					for (int s = 0; s < S; s++) {
						if (memcmp(y + (size_t)s * rows,
						           ref + (size_t)s * rows,
						           (size_t)rows * 4)) {
							if (fails++ < 5)
								printf(
								    "FAIL %s K=%d rows=%d isa %s: "
								    "gemm s=%d "
								    "differs from the reference\n",
								    coli_dtype_name(t), K, rows,
								    coli_cpu_isa_name(
								        (enum coli_cpu_isa)isa),
								    s);
						}
						cases++;
					}
					/* rows [1, rows): panels that start off row 0 */
					poison(y, (size_t)S * rows);
					coli_gemm(&m, acts, S, y, rows, rows > 2, rows);
					for (int s = 0; s < S; s++) {
						int r0 = rows > 2 ? 1 : 0;

						if (memcmp(y + (size_t)s * rows,
						           ref + (size_t)s * rows + r0,
						           (size_t)(rows - r0) * 4)) {
							if (fails++ < 5)
								printf(
								    "FAIL %s K=%d rows=%d isa %s: "
								    "gemm [%d, %d) s=%d differs\n",
								    coli_dtype_name(t), K, rows,
								    coli_cpu_isa_name(
								        (enum coli_cpu_isa)isa),
								    r0, rows, s);
						}
						poison(y, (size_t)rows);
						coli_gemv(&m, &acts[s], y, r0, rows);
						if (memcmp(y, ref + (size_t)s * rows + r0,
						           (size_t)(rows - r0) * 4)) {
							if (fails++ < 5)
								printf("FAIL %s K=%d rows=%d isa "
								       "%s: gemv "
								       "[%d, %d) differs: %.9g vs "
								       "%.9g\n",
								       coli_dtype_name(t), K, rows,
								       coli_cpu_isa_name(
								           (enum coli_cpu_isa)isa),
								       r0, rows, y[0],
								       ref[s * rows + r0]);
						}
						cases++;
					}
				}
				/* 2, 3: against double dots of the dequantized weights */
				for (int r = 0; r < rows; r++) {
					coli_mat_row_f32(&m, r, w);
					coli_mat_row_f32(&mz, r, w0);
					for (int s = 0; s < S; s++) {
						const struct coli_act *a = &acts[s];
						double dq = 0, df = 0, mag = 0, magw = 0, aq = 0;

						for (int k = 0; k < K; k++) {
							const double xq =
							    (double)a->q[k] * a->d[k / 32];

							dq += (double)w[k] * xq;
							df += (double)w[k] * ta[s].x[k];
							mag +=
							    (fabs(w[k]) + fabs(w0[k])) * fabs(xq);
							magw += fabs(w[k]) * fabs(ta[s].x[k]);
							aq += fabs(w[k]) * a->d[k / 32] * 0.5;
						}
						const double got = ref[(size_t)s * rows + r];
						const double tq =
						    (K / 16.0 + 8.0) * 2.4e-7 * mag + 1e-30;
						const double tf = aq * 1.001 + tq;
						const double eq = fabs(got - dq),
						             ef = fabs(got - df);

						if (mag > 0 && eq / mag > maxq[ti])
							maxq[ti] = eq / mag;
						if (magw > 0 && ef / magw > maxf[ti])
							maxf[ti] = ef / magw;
						if (!(eq <= tq) || !(ef <= tf)) {
							if (fails++ < 5)
								printf("FAIL %s K=%d row %d: %.9g, "
								       "double %.9g "
								       "(tolerance %.3g), float x "
								       "%.9g (%.3g)\n",
								       coli_dtype_name(t), K, r,
								       got, dq, tq, df, tf);
						}
					}
				}
				for (int s = 0; s < S; s++)
					act_free(&ta[s]);
				free(blk), free(zq), free(ref), free(y), free(w), free(w0);
			}
		}
	}
	coli_cpu_isa_force(best);
	for (int ti = 0; ti < N_TYPES; ti++)
		printf("  %-5s max error / sum|terms|: %.3g vs the quantized x (double), %.3g vs "
		       "the float x\n",
		       coli_dtype_name(g_types[ti]), maxq[ti], maxf[ti]);
	printf("%d ISA cases up to %s, %d failures\n", cases, coli_cpu_isa_name(best), fails);
	return fails ? 1 : 0;
}
