/*
 * tests/cpu/gemm_amx.c — the AMX int8 tile GEMM (cpu/gemv/gemm_amx.c) returns
 * coli_gemv_ref's bits for every element: Q8_0 and Q4_0 matrices (quantized
 * from random floats, or raw random quants with -128 and random scales), and
 * every GGUF block type, Q4_1, Q5_0, Q5_1 and Q2_K .. Q6_K
 * (cpu/kquant/kquant.c's reduction: K whole superblocks for the K-quants),
 * encoded from random floats where coli has the encoder, else random blocks
 * (any quant and scale byte; halves random, or extreme: 0, the smallest
 * subnormal, 65504, negative), fresh random activations (a block of zeros now and then), S from 1
 * to 70 (full and partial token tiles), K with and without a trailing group of fewer than 16
 * blocks, up to COLI_AMX_MAX_K, row counts and sub-range starts that are not multiples of the
 * 16-row tile; called directly, through coli_gemm and through the pool's coli_gemm_mt. Outputs are
 * poisoned first; prints the max error. Skips (77) on a CPU without AMX or a kernel that does not
 * grant the tile state.
 */
#include <errno.h>

#include "helpers.h"

#include "cpu/cpu_internal.h"

static const int g_S[] = {1, 3, 8, 15, 16, 17, 31, 32, 33, 47, 64, 70};
static const int g_K[] = {32, 64, 96, 288, 544, 768, 2048, 2080, COLI_AMX_MAX_K};
static const int g_Kk[] = {256, 768, 2048, 2304, COLI_AMX_MAX_K}; /* K-quants: whole 256s */
static const enum coli_dtype g_dt[] = {
    COLI_DTYPE_Q8_0, COLI_DTYPE_Q4_0, COLI_DTYPE_Q4_K, COLI_DTYPE_Q5_K, COLI_DTYPE_Q6_K,
    COLI_DTYPE_Q3_K, COLI_DTYPE_Q2_K, COLI_DTYPE_Q4_1, COLI_DTYPE_Q5_0, COLI_DTYPE_Q5_1};

/* The offsets of a block's halves (d, and dmin or m where the type has one). */
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
	default: /* Q6_K */
		off[0] = 208;
		return 1;
	}
}

/* A rows x K matrix of random blocks of t: every byte random, then each
 * half random in +-0.02 or, one in eight, an extreme value. */
static void *rand_blocks(struct coli_mat *m, enum coli_dtype t, int rows, int K)
{
	static const uint16_t extreme[] = {0x0000, 0x0001, 0x7bff, 0xfbff, 0x8001, 0x0400};
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
			uint16_t v = rng_u64() % 8
			                 ? coli_f32_to_fp16((rng_uniform() - 0.5f) * 0.04f)
			                 : extreme[rng_u64() % 6];

			memcpy(p + i * bb + off[h], &v, 2);
		}
	coli_mat_view(m, t, rows, K, p);
	return p;
}

/* Q4_K, Q5_K, Q6_K, Q5_0 and Q5_1 have coli's encoders (kquant_enc.c). */
static int has_encoder(enum coli_dtype t)
{
	return t == COLI_DTYPE_Q4_K || t == COLI_DTYPE_Q5_K || t == COLI_DTYPE_Q6_K ||
	       t == COLI_DTYPE_Q5_0 || t == COLI_DTYPE_Q5_1;
}

/* Compares S rows of y (row stride ldy, rows [r0, rows)) with the
 * reference; returns the mismatches, raises *maxerr. */
static int check(const struct coli_mat *m, const struct coli_act *acts, int S, const float *y,
                 int ldy, int r0, int rows, float *yv, double *maxerr, const char *what)
{
	int bad = 0;

	for (int s = 0; s < S; s++) {
		const float *ys = y + (size_t)s * ldy;

		poison(yv, (size_t)rows);
		coli_gemv_ref(m, &acts[s], yv, r0, rows);
		for (int r = 0; r < rows - r0; r++) {
			double e = fabs((double)ys[r] - (double)yv[r]);

			if (e > *maxerr || isnan(ys[r]))
				*maxerr = isnan(ys[r]) ? INFINITY : e;
		}
		if (memcmp(yv, ys, (size_t)(rows - r0) * 4)) {
			if (!bad)
				fprintf(stderr, "%s %s S=%d s=%d K=%d rows=%d r0=%d: != gemv_ref\n",
				        what, coli_dtype_name(m->dtype), S, s, m->cols, rows, r0);
			bad++;
		}
	}
	return bad;
}

int main(void)
{
	int fails = 0, cases = 0;
	double maxerr = 0;
	enum coli_cpu_isa best = coli_cpu_isa();
	coli_cpu_pool_t *pool;

	if (best < COLI_CPU_ISA_AMX) {
		printf("no AMX int8 tiles here (cpu kernels: %s)\n", coli_cpu_isa_name(best));
		return 77;
	}
	if (coli_cpu_pool_create(3, &pool)) {
		fprintf(stderr, "coli_cpu_pool_create failed\n");
		return 1;
	}
	for (int di = 0; di < (int)(sizeof(g_dt) / sizeof(g_dt[0])); di++) {
		enum coli_dtype dt = g_dt[di];
		const int blk = coli_dtype_is_block(dt); /* a GGUF block type */
		unsigned be = 32, bb;

		if (blk)
			coli_dtype_block(dt, &be, &bb);

		/* every S once, then half of them again at other sizes (~20 s a run
		 * on a loaded 2-core VM) */
		for (size_t ci = 0; ci < 3 * sizeof(g_S) / sizeof(g_S[0]) / 2; ci++) {
			int S = g_S[ci % (sizeof(g_S) / sizeof(g_S[0]))];
			int K = be == 256 ? g_Kk[rng_u64() % (sizeof(g_Kk) / sizeof(g_Kk[0]))]
			                  : g_K[rng_u64() % (sizeof(g_K) / sizeof(g_K[0]))];
			int rows = 16 + (int)(rng_u64() % 90);
			int ldy = rows + (int)(rng_u64() % 5);
			int r0 = (int)(rng_u64() % 20);
			struct coli_mat m;
			void *buf;
			struct test_act *t = xmalloc((size_t)S * sizeof(*t));
			struct coli_act *acts = xmalloc((size_t)S * sizeof(*acts));
			float *y = xmalloc((size_t)S * ldy * 4);
			float *yv = xmalloc((size_t)rows * 4);

			if (K == COLI_AMX_MAX_K && S > 33)
				K = 2048; /* keep the test short */
			if (blk && (!has_encoder(dt) || rng_u64() % 2))
				buf = rand_blocks(&m, dt, rows, K);
			else
				buf = rand_mat(&m, dt, rows, K, blk ? 0 : (int)(rng_u64() & 1));
			if (r0 >= rows)
				r0 = 0;
			for (int s = 0; s < S; s++) {
				act_alloc(&t[s], K);
				act_rand(&t[s], K);
				acts[s] = t[s].a;
			}
			poison(y, (size_t)S * ldy);
			if (coli_gemm_amx(&m, acts, S, y, ldy, r0, rows)) {
				fprintf(stderr, "coli_gemm_amx refused %s %dx%d\n",
				        coli_dtype_name(dt), rows, K);
				fails++;
			} else {
				fails += check(&m, acts, S, y, ldy, r0, rows, yv, &maxerr, "amx");
			}
			poison(y, (size_t)S * ldy);
			coli_gemm(&m, acts, S, y, ldy, r0, rows);
			fails += check(&m, acts, S, y, ldy, r0, rows, yv, &maxerr, "coli_gemm");
			poison(y, (size_t)S * ldy);
			coli_gemm_mt(pool, &m, acts, S, y, ldy);
			fails += check(&m, acts, S, y, ldy, 0, rows, yv, &maxerr, "coli_gemm_mt");
			cases += 3 * S;
			for (int s = 0; s < S; s++)
				act_free(&t[s]);
			free(t);
			free(acts);
			free(y);
			free(yv);
			free(buf);
		}
	}
	/* what the tiles do not cover is refused, not computed wrong */
	{
		struct coli_mat m;
		struct test_act t;
		float y[16];
		void *b1 = rand_mat(&m, COLI_DTYPE_Q8_0, 15, 64, 0);

		act_alloc(&t, 64);
		act_rand(&t, 64);
		if (coli_gemm_amx(&m, &t.a, 1, y, 15, 0, 15) != -ENOTSUP) {
			fprintf(stderr, "15 rows: not refused\n");
			fails++;
		}
		free(b1);
		b1 = rand_mat(&m, COLI_DTYPE_F32, 16, 64, 0);
		if (coli_gemm_amx(&m, &t.a, 1, y, 16, 0, 16) != -ENOTSUP) {
			fprintf(stderr, "f32: not refused\n");
			fails++;
		}
		free(b1);
		act_free(&t);
	}
	coli_cpu_pool_destroy(pool);
	printf("%d outputs rows compared, %d mismatches, max error %g (cpu kernels: %s)\n", cases,
	       fails, maxerr, coli_cpu_isa_name(best));
	return fails ? 1 : 0;
}
