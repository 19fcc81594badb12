/*
 * tests/cpu/attention_group.c — coli_attention_group (the G query heads of one
 * key/value head) gives, for every head, exactly coli_attention_head's bits,
 * on every ISA this machine has: G 1..24 (the AVX2 form takes G >= 4, a
 * last block of fewer than 8 heads padded: G 4, 12), head sizes with and without a multiple of
 * 8, 1..1500 positions, keys and values strided as in the KV cache, scales that make the softmax
 * nearly one-hot (exp underflowing to 0), and outputs poisoned first.
 */
#include "helpers.h"

static int check(int G, int hd, int n_pos, float scale)
{
	const int nkv = 3, stride = nkv * hd; /* the head's K/V at offset hd */
	float *q = xmalloc(sizeof(float) * G * hd);
	float *K = xmalloc(sizeof(float) * n_pos * stride);
	float *V = xmalloc(sizeof(float) * n_pos * stride);
	float *want = xmalloc(sizeof(float) * G * hd), *got = xmalloc(sizeof(float) * G * hd);
	float *sc = xmalloc(sizeof(float) * n_pos * 8);
	enum coli_cpu_isa best = coli_cpu_isa();
	int fails = 0;

	for (int i = 0; i < G * hd; i++)
		q[i] = rng_normalish();
	for (int i = 0; i < n_pos * stride; i++) {
		K[i] = rng_normalish();
		V[i] = rng_normalish();
	}
	for (int h = 0; h < G; h++)
		coli_attention_head(q + h * hd, K + hd, V + hd, n_pos, stride, hd, scale, sc,
		                    want + h * hd);
	for (int isa = COLI_CPU_ISA_SCALAR; isa <= (int)best; isa++) {
		if (coli_cpu_isa_force((enum coli_cpu_isa)isa))
			continue;
		poison(got, (size_t)G * hd);
		coli_attention_group(q, G, K + hd, V + hd, n_pos, stride, hd, scale, sc, got);
		for (int i = 0; i < G * hd; i++)
			if (memcmp(&want[i], &got[i], sizeof(float))) {
				fprintf(stderr,
				        "G %d hd %d n_pos %d scale %g isa %s: head %d out[%d] %a, "
				        "per head %a\n",
				        G, hd, n_pos, scale,
				        coli_cpu_isa_name((enum coli_cpu_isa)isa), i / hd, i % hd,
				        got[i], want[i]);
				fails++;
				break;
			}
	}
	coli_cpu_isa_force(best);
	free(q), free(K), free(V), free(want), free(got), free(sc);
	return fails;
}

int main(void)
{
	static const int Gs[] = {1, 2, 4, 5, 8, 16, 12, 24};
	static const int hds[] = {128, 64, 36, 8, 5};
	static const int ns[] = {1, 2, 7, 100, 1500};
	int fails = 0, runs = 0;

	for (size_t g = 0; g < sizeof(Gs) / sizeof(Gs[0]); g++)
		for (size_t h = 0; h < sizeof(hds) / sizeof(hds[0]); h++)
			for (size_t n = 0; n < sizeof(ns) / sizeof(ns[0]); n++) {
				float scale = 1.0f / sqrtf((float)hds[h]);

				fails += check(Gs[g], hds[h], ns[n], scale);
				fails += check(Gs[g], hds[h], ns[n], 300.0f * scale); /* ~one-hot */
				runs += 2;
			}
	printf("%d cases (G, hd, positions, scale) on every ISA, %d differ from the "
	       "per-head bits (best ISA %s)\n",
	       runs, fails, coli_cpu_isa_name(coli_cpu_isa()));
	return fails != 0;
}
