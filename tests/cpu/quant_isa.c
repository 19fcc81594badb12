/*
 * tests/cpu/quant_isa.c — Q4_0 with a searched scale (COLI_ROUND_MSE, what
 * coli convert writes) gives the same bytes on every ISA this machine has:
 * the AVX2 error sum picks exactly the scalar form's scale for every block.
 * Normal and heavy-tailed rows, rows with values near fp16's and bf16's
 * ends (tiny blocks whose scale is subnormal, huge ones), exact ties (blocks
 * of a repeated value), and a full conversion split into row ranges as
 * core/convert/convert.c's threads split it (coli_quantize_rows) against one call.
 * And the search step itself, bit for bit: a block's squared error at a
 * scale (cpu/cpu_internal.h), AVX2 against scalar, over 20,000 blocks and
 * each one's 26 candidate scales (the selection alone hides a reordered sum:
 * it changes a choice only in a near-tie).
 */
#include "helpers.h"

#include "cpu/cpu_internal.h"

static float heavy(void)
{
	float u = rng_uniform();

	return u / (0.05f + fabsf(rng_uniform())); /* a ratio: heavy tails */
}

int main(void)
{
	enum { R = 96, K = 1024 };
	const size_t bytes = coli_dtype_mat_bytes(COLI_DTYPE_Q4_0, R, K);
	float *x = xmalloc(sizeof(float) * R * K);
	unsigned char *want = xmalloc(bytes), *got = xmalloc(bytes);
	enum coli_cpu_isa best = coli_cpu_isa();
	int fails = 0, isas = 0;

	for (int r = 0; r < R; r++)
		for (int k = 0; k < K; k++) {
			float *v = &x[(size_t)r * K + k];

			switch (r % 6) {
			case 0:
				*v = rng_normalish() * 0.05f;
				break;
			case 1:
				*v = heavy();
				break;
			case 2: /* tiny: scales near and under fp16's normal range */
				*v = rng_normalish() * 1e-6f;
				break;
			case 3: /* tinier: the scale's inverse overflows */
				*v = rng_normalish() * 1e-38f;
				break;
			case 4: /* large */
				*v = rng_normalish() * 3e4f;
				break;
			default: /* ties: a block of one value, or two */
				*v = (k / 32) % 2 ? 0.25f : (k % 2 ? -0.5f : 0.5f);
			}
		}
	/* the scalar form, one call: the reference */
	if (coli_cpu_isa_force(COLI_CPU_ISA_SCALAR))
		return 1;
	if (coli_quantize_mat_ex(COLI_DTYPE_Q4_0, x, R, K, want, COLI_ROUND_MSE))
		return 1;
	for (int isa = COLI_CPU_ISA_SCALAR; isa <= (int)best; isa++) {
		if (coli_cpu_isa_force((enum coli_cpu_isa)isa))
			continue;
		isas++;
		memset(got, 0xa5, bytes);
		if (coli_quantize_mat_ex(COLI_DTYPE_Q4_0, x, R, K, got, COLI_ROUND_MSE))
			return 1;
		if (memcmp(want, got, bytes)) {
			printf(
			    "FAIL: isa %s: the searched Q4_0 bytes differ from the scalar form's\n",
			    coli_cpu_isa_name((enum coli_cpu_isa)isa));
			fails++;
		}
		/* row ranges, as core/convert/convert.c's tasks fill one chunk */
		memset(got, 0x5a, bytes);
		for (int r0 = 0; r0 < R; r0 += 7)
			if (coli_quantize_rows(COLI_DTYPE_Q4_0, x, R, K, got, COLI_ROUND_MSE, r0,
			                       r0 + 7 < R ? r0 + 7 : R))
				return 1;
		if (memcmp(want, got, bytes)) {
			printf("FAIL: isa %s: row ranges differ from one call\n",
			       coli_cpu_isa_name((enum coli_cpu_isa)isa));
			fails++;
		}
	}
	coli_cpu_isa_force(best);
	if (best >= COLI_CPU_ISA_AVX2) {
		int bad = 0;

		for (int i = 0; i < 20000; i++) {
			float blk[32], db = 0.0f;

			for (int j = 0; j < 32; j++) {
				blk[j] = i % 2 ? heavy() : rng_normalish();
				db = fabsf(blk[j]) > fabsf(db) ? blk[j] : db;
			}
			db /= -8.0f;
			for (int k = -12; k <= 12 && db != 0.0f; k++) {
				float c = db * (1.0f + 0.02f * (float)k),
				      a = coli_q4_block_err_ref(blk, c),
				      b = coli_q4_block_err_avx2(blk, c);

				bad += memcmp(&a, &b, sizeof(a)) != 0;
			}
		}
		if (bad) {
			printf("FAIL: %d block errors differ between the AVX2 and scalar forms\n",
			       bad);
			fails++;
		}
	}
	printf("%d x %d Q4_0 (searched scale) on %d ISA(s): %s\n", R, K, isas,
	       fails ? "differ" : "the same bytes; the search step bit for bit");
	free(x), free(want), free(got);
	return fails != 0;
}
