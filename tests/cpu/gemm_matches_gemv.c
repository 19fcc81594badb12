/*
 * tests/cpu/gemm_matches_gemv.c — coli_gemm (S activation vectors) returns, for
 * every s, exactly coli_gemv's bits (checked against coli_gemv_ref directly), on every ISA this CPU
 * has, for S = 1..8, 13 and 33 (full and partial tiles of activations), K with and without a
 * trailing group of fewer than 8 or 16 blocks, row counts and sub-range starts
 * that are not multiples of the row tile, a row stride larger than the row
 * count; the pool-split forms (coli_gemv_mt / coli_gemm_mt / coli_gemm_batch_mt) too. Every
 * (dtype, S) runs with several random shapes.
 */
#include "helpers.h"

static const int g_S[] = {1, 2, 3, 4, 5, 6, 7, 8, 13, 33};
static const int g_K[] = {32, 64, 96, 288, 544, 768, 2048, 2080};

int main(void)
{
	int fails = 0, cases = 0;
	enum coli_cpu_isa best = coli_cpu_isa();
	coli_cpu_pool_t *pool;

	if (coli_cpu_pool_create(3, &pool)) {
		fprintf(stderr, "coli_cpu_pool_create failed\n");
		return 1;
	}
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
			for (size_t ci = 0; ci < 3 * sizeof(g_S) / sizeof(g_S[0]); ci++) {
				enum coli_dtype dt = g_dtypes[di];
				int S = g_S[ci % (sizeof(g_S) / sizeof(g_S[0]))];
				int K = g_K[rng_u64() % (sizeof(g_K) / sizeof(g_K[0]))];
				int rows = 1 + (int)(rng_u64() % 70);
				int ldy = rows + (int)(rng_u64() % 5);
				int r0 = (int)(rng_u64() % 6);
				if (r0 >= rows)
					r0 = 0;
				struct coli_mat m;
				void *buf = rand_mat(&m, dt, rows, K, (int)(rng_u64() & 1));
				struct test_act *t = xmalloc((size_t)S * sizeof(*t));
				struct coli_act *acts = xmalloc((size_t)S * sizeof(*acts));
				float *yg = xmalloc((size_t)S * ldy * 4);
				float *yv = xmalloc((size_t)rows * 4);

				for (int s = 0; s < S; s++) {
					act_alloc(&t[s], K);
					act_rand(&t[s], K);
					acts[s] = t[s].a;
				}
				poison(yg, (size_t)S * ldy);
				coli_gemm(&m, acts, S, yg, ldy, r0, rows);
				for (int s = 0; s < S; s++) {
					poison(yv, rows);
					/* the reference itself: gemm's tiles are not gemv's */
					coli_gemv_ref(&m, &acts[s], yv, r0, rows);
					cases++;
					if (memcmp(yv, yg + (size_t)s * ldy,
					           (size_t)(rows - r0) * 4)) {
						if (fails < 10)
							fprintf(
							    stderr,
							    "%s %s S=%d s=%d K=%d rows=%d: gemm "
							    "!= gemv\n",
							    coli_cpu_isa_name(isa),
							    coli_dtype_name(dt), S, s, K, rows);
						fails++;
					}
				}
				/* the pool-split forms, whole matrix */
				poison(yg, (size_t)S * ldy);
				coli_gemm_mt(pool, &m, acts, S, yg, ldy);
				for (int s = 0; s < S; s++) {
					poison(yv, rows);
					coli_gemv(&m, &acts[s], yv, 0, rows);
					if (memcmp(yv, yg + (size_t)s * ldy, (size_t)rows * 4)) {
						if (fails < 10)
							fprintf(stderr,
							        "%s %s S=%d: gemm_mt != gemv\n",
							        coli_cpu_isa_name(isa),
							        coli_dtype_name(dt), S);
						fails++;
					}
					poison(yg, rows);
					coli_gemv_mt(pool, &m, &acts[s], yg);
					if (memcmp(yv, yg, (size_t)rows * 4)) {
						if (fails < 10)
							fprintf(stderr, "%s %s: gemv_mt != gemv\n",
							        coli_cpu_isa_name(isa),
							        coli_dtype_name(dt));
						fails++;
					}
				}
				/* one dispatch for several GEMMs: the matrix twice, the
				 * second time over activations 1..S-1 (rows split
				 * across jobs at 16-row units) */
				{
					float *yb = malloc(sizeof(float) * (size_t)S * ldy);
					struct coli_gemm_job jobs[2] = {
					    {&m, acts, S, yg, ldy}, {&m, acts + 1, S - 1, yb, ldy}};

					poison(yg, (size_t)S * ldy);
					poison(yb, (size_t)S * ldy);
					coli_gemm_batch_mt(pool, jobs, 2);
					for (int s = 0; yb && s < S; s++) {
						poison(yv, rows);
						coli_gemv(&m, &acts[s], yv, 0, rows);
						cases++;
						if (memcmp(yv, yg + (size_t)s * ldy,
						           (size_t)rows * 4) ||
						    (s && memcmp(yv, yb + (size_t)(s - 1) * ldy,
						                 (size_t)rows * 4))) {
							if (fails < 10)
								fprintf(
								    stderr,
								    "%s %s S=%d: gemm_batch_mt != "
								    "gemv\n",
								    coli_cpu_isa_name(isa),
								    coli_dtype_name(dt), S);
							fails++;
						}
					}
					free(yb);
				}
				for (int s = 0; s < S; s++)
					act_free(&t[s]);
				free(t);
				free(acts);
				free(yg);
				free(yv);
				free(buf);
			}
		}
		printf("isa %-7s %s\n", coli_cpu_isa_name((enum coli_cpu_isa)isa),
		       fails == isa_fails ? "gemm == gemv bits on every case" : "FAILED");
	}
	coli_cpu_isa_force(best);
	coli_cpu_pool_destroy(pool);
	printf("%d (case, s) pairs, %d failures\n", cases, fails);
	return fails ? 1 : 0;
}
