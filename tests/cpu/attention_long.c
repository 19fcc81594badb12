/*
 * tests/cpu/attention_long.c — decode attention at a long context (4096
 * positions and one fewer: a token and the one before) over typed KV rows
 * gives, split across a pool of 1, 2, 3 or 16 threads
 * (coli_attention_groups_mt), exactly the bits of the reference
 * (coli_attention_head_kv, one head at a time over the same typed rows):
 * K and V both bf16 (the default) with G = 1..16 query heads a key/value
 * head on every pool; both f32, both q8, and K bf16 with V q8, with G 1, 3,
 * 8, 12, 16 on 1 and 16 threads (two key/value heads, so that 16 threads
 * split them and one thread does not); gpt-oss's sinks off and on; then heads
 * of 20 dims (bf16, q8; G 2..9 on every pool), whose last dims are not a
 * vector's. The outputs are
 * poisoned (all ones: a NaN) before every call, so an output a split never
 * writes fails. The cache rows are strided as the engine's (both heads'
 * rows in one position's row).
 */
#include <math.h>
#include <string.h>

#include "cpu/cpu.h"
#include "helpers.h"

#define N_POS 4096
#define NKV   2
#define SLOTS 16

/* dims a head: 128, then 20 (sixteen dims in vectors, eight, four alone) */
static int g_hd = 128;

static int g_fails;

struct cache {
	int kt, vt;
	size_t kb, vb; /* bytes a position's row (NKV heads) */
	char *K, *V;   /* [N_POS][row] */
};

static void cache_fill(struct cache *c, int kt, int vt)
{
	float x[NKV * g_hd];

	c->kt = kt, c->vt = vt;
	c->kb = coli_kv_row_bytes(kt, NKV * g_hd, NKV),
	c->vb = coli_kv_row_bytes(vt, NKV * g_hd, NKV);
	c->K = xmalloc(c->kb * N_POS), c->V = xmalloc(c->vb * N_POS);
	for (int p = 0; p < N_POS; p++) {
		for (int i = 0; i < NKV * g_hd; i++)
			x[i] = rng_normalish();
		coli_kv_row_store(kt, c->K + c->kb * p, x, NKV * g_hd, g_hd);
		for (int i = 0; i < NKV * g_hd; i++)
			x[i] = rng_normalish();
		coli_kv_row_store(vt, c->V + c->vb * p, x, NKV * g_hd, g_hd);
	}
}

/* Key/value head g's rows in c: its first element and its scales' offset
 * from there (q8: the scales after the row's NKV * g_hd values). */
static struct coli_kv_rows head_rows(const struct cache *c, int v, int g)
{
	const int t = v ? c->vt : c->kt, e = t == COLI_KV_F32 ? 4 : t == COLI_KV_BF16 ? 2 : 1;
	const int so = ((NKV * g_hd + 3) & ~3) + 4 * g - g * g_hd * e;

	return (struct coli_kv_rows){.p = (v ? c->V : c->K) + (size_t)g * g_hd * e,
	                             .stride = v ? c->vb : c->kb,
	                             .type = t,
	                             .soff = so,
	                             .seg = g_hd};
}

/* Tokens k = 0, 1 (k 1 one position shorter) of G heads over the NKV heads:
 * groups k * NKV + g; want/got [2 * NKV * G][g_hd]. */
static void check(const struct cache *c, int G, int sinks, coli_cpu_pool_t **pools,
                  const int *threads, int n_pools, float *sc)
{
	const int nh = 2 * NKV * G;
	const float scale = 1.0f / sqrtf((float)g_hd);
	float *q = xmalloc(sizeof(float) * nh * g_hd), *want = xmalloc(sizeof(float) * nh * g_hd),
	      *got = xmalloc(sizeof(float) * nh * g_hd), *sink = xmalloc(sizeof(float) * NKV * G);
	struct coli_attn_group a[2 * NKV];

	for (int i = 0; i < nh * g_hd; i++)
		q[i] = 2.0f * rng_normalish();
	for (int i = 0; i < NKV * G; i++)
		sink[i] = 2.0f * rng_normalish();
	for (int k = 0; k < 2; k++)
		for (int g = 0; g < NKV; g++) {
			const struct coli_kv_rows kr = head_rows(c, 0, g), vr = head_rows(c, 1, g);
			const int t = k * NKV + g;

			for (int h = 0; h < G; h++)
				coli_attention_head_kv(q + ((size_t)t * G + h) * g_hd, &kr, &vr,
				                       N_POS - k, g_hd, g_hd, scale,
				                       sinks ? sink[g * G + h] : -INFINITY, sc,
				                       want + ((size_t)t * G + h) * g_hd);
			a[t] = (struct coli_attn_group){.q = q + (size_t)t * G * g_hd,
			                                .K = kr.p,
			                                .V = vr.p,
			                                .out = got + (size_t)t * G * g_hd,
			                                .G = G,
			                                .n_pos = N_POS - k,
			                                .sink = sinks ? sink + g * G : NULL,
			                                .kt = c->kt,
			                                .vt = c->vt,
			                                .kstride = c->kb,
			                                .vstride = c->vb,
			                                .ksoff = kr.soff,
			                                .vsoff = vr.soff,
			                                .seg = g_hd};
		}
	for (int i = 0; i < n_pools; i++) {
		memset(got, 0xff, sizeof(float) * nh * g_hd);
		coli_attention_groups_mt(pools[i], a, 2 * NKV, NKV * g_hd, g_hd, g_hd, scale, sc,
		                         coli_attn_slot_floats(N_POS, g_hd), SLOTS);
		for (int h = 0; h < nh; h++)
			if (memcmp(got + (size_t)h * g_hd, want + (size_t)h * g_hd,
			           sizeof(float) * g_hd)) {
				fprintf(stderr,
				        "%s,%s G %d sinks %d, %d threads: group %d head %d differs "
				        "(out[0] %a, want %a)\n",
				        coli_kv_type_name(c->kt), coli_kv_type_name(c->vt), G,
				        sinks, threads[i], h / G, h % G, got[(size_t)h * g_hd],
				        want[(size_t)h * g_hd]);
				g_fails++;
				break;
			}
	}
	free(q), free(want), free(got), free(sink);
}

int main(void)
{
	static const int tv[][2] = {{COLI_KV_F32, COLI_KV_F32},
	                            {COLI_KV_BF16, COLI_KV_BF16},
	                            {COLI_KV_Q8, COLI_KV_Q8},
	                            {COLI_KV_BF16, COLI_KV_Q8}};
	static const int threads[] = {1, 2, 3, 16};
	coli_cpu_pool_t *pools[4];
	float *sc = xmalloc(sizeof(float) * SLOTS * coli_attn_slot_floats(N_POS, g_hd));
	int cases = 0;

	for (int i = 0; i < 4; i++)
		if (coli_cpu_pool_create(threads[i], &pools[i])) {
			printf("cannot make a pool of %d threads\n", threads[i]);
			return 77;
		}
	for (size_t k = 0; k < sizeof(tv) / sizeof(tv[0]); k++) {
		struct cache c;

		cache_fill(&c, tv[k][0], tv[k][1]);
		/* bf16 (the default): G 1..16 on every pool; the other types G 1, 3,
		 * 8, 12, 16 on 1 and 16 threads (the reference's cost: ~20 s) */
		for (int G = 1; G <= 16; G++) {
			if (tv[k][0] != COLI_KV_BF16 || tv[k][1] != COLI_KV_BF16) {
				if (G != 1 && G != 3 && G != 8 && G != 12 && G != 16)
					continue;
			}
			for (int sinks = 0; sinks < 2; sinks++, cases++) {
				if (k == 1) {
					check(&c, G, sinks, pools, threads, 4, sc);
					continue;
				}
				check(&c, G, sinks, pools, threads, 1, sc);
				check(&c, G, sinks, pools + 3, threads + 3, 1, sc);
			}
		}
		free(c.K), free(c.V);
	}
	/* a head of 20 dims, bf16 and q8: the kernels' last few dims */
	g_hd = 20;
	for (size_t k = 1; k < 3; k++) {
		struct cache c;

		cache_fill(&c, tv[k][0], tv[k][1]);
		for (int G = 2; G <= 9; G++, cases++)
			check(&c, G, G & 1, pools, threads, 4, sc);
		free(c.K), free(c.V);
	}
	for (int i = 0; i < 4; i++)
		coli_cpu_pool_destroy(pools[i]);
	free(sc);
	printf("long decode attention: %d positions, %d cases (KV types, G 1..16, sinks), "
	       "pools of 1-16 threads: %d differ\n",
	       N_POS, cases, g_fails);
	return g_fails ? 1 : 0;
}
