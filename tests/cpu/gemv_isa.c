/*
 * tests/cpu/gemv_isa.c — every kernel ISA this CPU has returns the scalar
 * reference's bits for every dtype and many shapes (K = 32, 64, 96: fewer
 * than 16 blocks; K = 2048; rows not a multiple of the vector width; row
 * sub-ranges), and the reference itself is within rounding of a double
 * precision dot product of the same (dequantized) values.
 */
#include "helpers.h"

static const int g_K[] = {32, 64, 96, 160, 256, 288, 512, 544, 768, 2048, 2080};
static const int g_rows[] = {1, 3, 4, 5, 8, 17, 33, 71};

/* Check the reference against double precision; returns max relative error
 * (|y - exact| / sum|terms|) and counts failures. */
static double check_ref(const struct coli_mat *m, const struct test_act *t, const float *y,
                        int *fails)
{
	int K = m->cols;
	float *wr = xmalloc((size_t)K * sizeof(float));
	double maxrel = 0;

	for (int r = 0; r < m->rows; r++) {
		double dot = 0, mag = 0;
		coli_mat_row_f32(m, r, wr);
		for (int k = 0; k < K; k++) {
			double xv = coli_dtype_is_quant(m->dtype)
			                ? (double)t->a.q[k] * (double)t->a.d[k / 32]
			                : (double)t->x[k];
			dot += (double)wr[k] * xv;
			mag += fabs((double)wr[k] * xv);
		}
		double err = fabs((double)y[r] - dot);
		/* fp32 rounding: ~K/16 + 4 roundings of relative 2^-24 on |terms|,
		 * plus the dw*dx product's rounding for quant types */
		double tol = (K / 16.0 + 8.0) * 1.2e-7 * mag + 1e-30;
		double rel = mag > 0 ? err / mag : err;
		if (rel > maxrel)
			maxrel = rel;
		if (!(err <= tol)) {
			if (*fails < 5)
				fprintf(stderr, "ref vs double: %s K=%d row %d: %.9g vs %.9g\n",
				        coli_dtype_name(m->dtype), K, r, y[r], dot);
			(*fails)++;
		}
	}
	free(wr);
	return maxrel;
}

int main(void)
{
	int fails = 0, cases = 0;
	double maxrel[N_DTYPES] = {0};
	enum coli_cpu_isa best = coli_cpu_isa();

	/* each ISA's own kernels, q8_0 and q4_0 under AVX-512 too where the
	 * engine runs AVX2's (coli_cpu_int8_avx2: those are the avx2 pass's) */
	coli_cpu_int8_avx2_set(0);
	for (int isa = COLI_CPU_ISA_SCALAR; isa <= COLI_CPU_ISA_AMX; isa++) {
		if (coli_cpu_isa_force((enum coli_cpu_isa)isa)) {
			printf("isa %-7s not supported by this CPU: not tested here\n",
			       coli_cpu_isa_name((enum coli_cpu_isa)isa));
			continue;
		}
		int isa_fails = fails;
		for (int di = 0; di < N_DTYPES; di++) {
			enum coli_dtype dt = g_dtypes[di];
			for (size_t ki = 0; ki < sizeof(g_K) / sizeof(g_K[0]); ki++) {
				for (size_t ri = 0; ri < sizeof(g_rows) / sizeof(g_rows[0]); ri++) {
					int K = g_K[ki], rows = g_rows[ri];
					int raw = (int)(rng_u64() & 1);
					struct coli_mat m;
					struct test_act t;
					void *buf = rand_mat(&m, dt, rows, K, raw);
					float *yr = xmalloc((size_t)rows * 4);
					float *yv = xmalloc((size_t)rows * 4);

					act_alloc(&t, K);
					act_rand(&t, K);
					poison(yr, rows);
					poison(yv, rows);
					coli_gemv_ref(&m, &t.a, yr, 0, rows);
					coli_gemv(&m, &t.a, yv, 0, rows);
					cases++;
					if (memcmp(yr, yv, (size_t)rows * 4)) {
						if (fails < 10)
							fprintf(stderr,
							        "%s %s K=%d rows=%d raw=%d: "
							        "differs from reference\n",
							        coli_cpu_isa_name(isa),
							        coli_dtype_name(dt), K, rows, raw);
						fails++;
					}
					/* a row sub-range writes only its rows */
					if (rows > 2) {
						poison(yv, rows);
						coli_gemv(&m, &t.a, yv, 1, rows - 1);
						if (memcmp(yr + 1, yv, (size_t)(rows - 2) * 4) ||
						    !isnan(yv[rows - 2])) {
							if (fails < 10)
								fprintf(
								    stderr,
								    "%s %s K=%d rows=%d: sub-range "
								    "wrong\n",
								    coli_cpu_isa_name(isa),
								    coli_dtype_name(dt), K, rows);
							fails++;
						}
					}
					if (isa == COLI_CPU_ISA_SCALAR && !raw) {
						double e = check_ref(&m, &t, yr, &fails);
						if (e > maxrel[di])
							maxrel[di] = e;
					}
					act_free(&t);
					free(yr);
					free(yv);
					free(buf);
				}
			}
		}
		printf("isa %-7s %s\n", coli_cpu_isa_name((enum coli_cpu_isa)isa),
		       fails == isa_fails ? "bit-identical to gemv_ref on every case" : "FAILED");
	}
	coli_cpu_isa_force(best);
	for (int di = 0; di < N_DTYPES; di++)
		printf("reference vs double: %-5s max |err| / sum|w*x| = %.3g\n",
		       coli_dtype_name(g_dtypes[di]), maxrel[di]);
	printf("%d cases, %d failures\n", cases, fails);
	return fails ? 1 : 0;
}
