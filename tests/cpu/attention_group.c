/*
 * tests/cpu/attention_group.c — coli_attention_group (the G query heads of one
 * key/value head) gives, for every head, exactly coli_attention_head's bits,
 * on every ISA this machine has: G 1..24 (the AVX2 form takes G >= 4, a
 * last block of fewer than 8 heads padded: G 4, 12), head sizes with and without a multiple of
 * 8, 1..1500 positions, keys and values strided as in the KV cache, scales that make the softmax
 * nearly one-hot (exp underflowing to 0), and outputs poisoned first. And
 * coli_attention_groups_mt (groups split across a pool by positions and
 * outputs) gives coli_attention_group's bits, split where it should be.
 * gpt-oss's sinks (g_sink): all of the above again with a sink per head.
 * MLA's latent form (check_latent): keys and values one row [kl + r] (K = V,
 * key dims kl + r, value dims the first kl), every ISA and pool split giving
 * the per-head bits, and those within 1e-5 of a double softmax over the rows;
 * and over the q8 cache's latent rows (two scales a row), the scalar ISA's
 * per-head bits.
 */
#include "helpers.h"

/* gpt-oss's sinks: when set, every check draws a sink logit per head (2 N,
 * about a score's spread, so it changes the weights) and compares the _sink
 * forms: coli_attention_group_sink and a group's .sink against
 * coli_attention_head_sink, and that against a double softmax whose
 * denominator has exp(sink) (within 1e-5). */
static int g_sink;

/* Head h's output in double: softmax over [q . k_p * scale, sink] (sink
 * -inf: none), the sink's column dropped; max |out - got| / max |v| (the
 * values' scale: with the sink taking nearly all the weight the output
 * itself is ~0, and float's underflow to 0 is right there). */
static double ref_error(const float *q, const float *K, const float *V, int n_pos, int stride,
                        int hd, float scale, double sink, const float *got)
{
	double mx = sink, sum = 0, err = 0, big = 0, w[n_pos > 0 ? n_pos : 1];

	for (int p = 0; p < n_pos; p++) {
		double s = 0;

		for (int i = 0; i < hd; i++)
			s += (double)q[i] * K[(size_t)p * stride + i];
		w[p] = s * scale;
		mx = w[p] > mx ? w[p] : mx;
	}
	for (int p = 0; p < n_pos; p++)
		sum += w[p] = exp(w[p] - mx);
	sum += exp(sink - mx);
	for (int i = 0; i < hd; i++) {
		double o = 0;

		for (int p = 0; p < n_pos; p++) {
			o += w[p] / sum * V[(size_t)p * stride + i];
			big = fabs(V[(size_t)p * stride + i]) > big
			          ? fabs(V[(size_t)p * stride + i])
			          : big;
		}
		err = fabs(o - got[i]) > err ? fabs(o - got[i]) : err;
	}
	return big > 0 ? err / big : err;
}

static int check(int G, int hd, int n_pos, float scale)
{
	const int nkv = 3, stride = nkv * hd; /* the head's K/V at offset hd */
	float *q = xmalloc(sizeof(float) * G * hd);
	float *K = xmalloc(sizeof(float) * n_pos * stride);
	float *V = xmalloc(sizeof(float) * n_pos * stride);
	float *want = xmalloc(sizeof(float) * G * hd), *got = xmalloc(sizeof(float) * G * hd);
	float *sc = xmalloc(sizeof(float) * n_pos * 8), sink[G];
	enum coli_cpu_isa best = coli_cpu_isa();
	int fails = 0;

	for (int i = 0; i < G * hd; i++)
		q[i] = rng_normalish();
	for (int i = 0; i < n_pos * stride; i++) {
		K[i] = rng_normalish();
		V[i] = rng_normalish();
	}
	for (int h = 0; h < G; h++)
		sink[h] = 2.0f * rng_normalish();
	for (int h = 0; h < G; h++) {
		if (g_sink)
			coli_attention_head_sink(q + h * hd, K + hd, V + hd, n_pos, stride, hd, hd,
			                         scale, sink[h], sc, want + h * hd);
		else
			coli_attention_head(q + h * hd, K + hd, V + hd, n_pos, stride, hd, hd,
			                    scale, sc, want + h * hd);
	}
	if (g_sink) {
		double e = ref_error(q, K + hd, V + hd, n_pos, stride, hd, scale, sink[0], want);

		if (!(e <= 1e-5)) {
			fprintf(stderr, "sink: G %d hd %d n_pos %d scale %g: error %.3g\n", G, hd,
			        n_pos, scale, e);
			fails++;
		}
	}
	for (int isa = COLI_CPU_ISA_SCALAR; isa <= (int)best; isa++) {
		if (coli_cpu_isa_force((enum coli_cpu_isa)isa))
			continue;
		poison(got, (size_t)G * hd);
		coli_attention_group_sink(q, G, K + hd, V + hd, n_pos, stride, hd, hd, scale,
		                          g_sink ? sink : NULL, sc, got);
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

/* coli_attention_groups_mt: n groups of G heads over n_pos positions (one
 * group a key/value head of one token, as the decode step), on a pool of
 * `threads`: every output the bits of coli_attention_group; split (returns
 * 1) exactly where it must be: AVX2, fewer units or fewer groups than
 * threads, >= 256 positions, slots with room for the output blocks' sums
 * (coli_attn_slot_floats; the scores' room alone: never), a slot a unit
 * (the engine's scratch gives them where the groups are fewer). */
static int check_mt(coli_cpu_pool_t *pool, int threads, int n, int G, int hd, int n_pos)
{
	const int stride = n * hd;
	float *q = xmalloc(sizeof(float) * n * G * hd);
	float *K = xmalloc(sizeof(float) * n_pos * stride);
	float *V = xmalloc(sizeof(float) * n_pos * stride);
	float *want = xmalloc(sizeof(float) * n * G * hd),
	      *got = xmalloc(sizeof(float) * n * G * hd);
	const size_t slot = coli_attn_slot_floats(n_pos, hd);
	const int units = n * ((G + 7) / 8), n_slots = coli_attn_n_slots(threads, n, units);
	float *sc = xmalloc(sizeof(float) * n_slots * slot);
	struct coli_attn_group g[n];
	float scale = 1.0f / sqrtf((float)hd), *sink = xmalloc(sizeof(float) * n * G);
	int fails = 0, split, want_split;

	for (int i = 0; i < n * G * hd; i++)
		q[i] = rng_normalish();
	for (int i = 0; i < n_pos * stride; i++) {
		K[i] = rng_normalish();
		V[i] = rng_normalish();
	}
	for (int i = 0; i < n * G; i++)
		sink[i] = 2.0f * rng_normalish();
	poison(got, (size_t)n * G * hd);
	for (int k = 0; k < n; k++) {
		const float *sk = g_sink ? sink + (size_t)k * G : NULL;

		g[k] = (struct coli_attn_group){.q = q + (size_t)k * G * hd,
		                                .K = K + k * hd,
		                                .V = V + k * hd,
		                                .out = got + (size_t)k * G * hd,
		                                .G = G,
		                                .n_pos = n_pos - k, /* lengths differ by token */
		                                .sink = sk};
		coli_attention_group_sink(q + (size_t)k * G * hd, G, K + k * hd, V + k * hd,
		                          n_pos - k, stride, hd, hd, scale, sk, sc,
		                          want + (size_t)k * G * hd);
	}
	/* a slot of the scores alone has no room for the output blocks: not split */
	split = coli_attention_groups_mt(pool, g, n, stride, hd, hd, scale, sc, (size_t)n_pos * 8,
	                                 n_slots);
	if (split || memcmp(want, got, sizeof(float) * n * G * hd)) {
		fprintf(stderr,
		        "mt: %d threads, %d groups of %d, %d positions, small slots: split %d, "
		        "bits %s\n",
		        threads, n, G, n_pos, split,
		        memcmp(want, got, sizeof(float) * n * G * hd) ? "differ" : "equal");
		fails++;
	}
	poison(got, (size_t)n * G * hd);
	split = coli_attention_groups_mt(pool, g, n, stride, hd, hd, scale, sc, slot, n_slots);
	want_split = coli_cpu_isa() >= COLI_CPU_ISA_AVX2 && (units < threads || n < threads) &&
	             n_pos - n + 1 >= 256;
	if ((split == 1) != want_split) {
		fprintf(stderr,
		        "mt: %d threads, %d groups of %d, %d positions: split %d, want %d\n",
		        threads, n, G, n_pos, split, want_split);
		fails++;
	}
	for (int i = 0; i < n * G * hd; i++)
		if (memcmp(&want[i], &got[i], sizeof(float))) {
			fprintf(stderr,
			        "mt: %d threads, %d groups of %d, hd %d, %d positions: group %d "
			        "head %d out[%d] %a, want %a\n",
			        threads, n, G, hd, n_pos, i / (G * hd), i / hd % G, i % hd, got[i],
			        want[i]);
			fails++;
			break;
		}
	free(q), free(K), free(V), free(want), free(got), free(sc), free(sink);
	return fails;
}

/* T tokens of G heads against n_pos latent rows [kl + r] (the query rows
 * [G][kl + r], out [G][kl]), through coli_attention_groups_mt on a pool of
 * `threads`: each head's bits are coli_attention_head's with hd = kl + r and
 * vd = kl, and within 1e-5 (relative to max |out|) of softmax(q . row *
 * scale) . row[:kl] in double. */
/* The same rows in the q8 cache's layout (two scales a row: c_kv's kl
 * values, then k_pe's r): every head's bits through a pool equal
 * coli_attention_head_kv's on the scalar ISA over the same typed rows. */
static int check_latent_q8(coli_cpu_pool_t *pool, int threads, int T, int G, int kl, int r,
                           int n_pos)
{
	const int kr = kl + r;
	const size_t rb = coli_kv_row_bytes(COLI_KV_Q8, kr, 2),
	             slot = coli_attn_slot_floats(n_pos, kl);
	char *C = xmalloc(rb * n_pos);
	float *x = xmalloc(sizeof(float) * kr), *q = xmalloc(sizeof(float) * T * G * kr);
	float *want = xmalloc(sizeof(float) * T * G * kl),
	      *got = xmalloc(sizeof(float) * T * G * kl);
	/* a slot a unit (the engine's scratch): T < threads splits the heads */
	const int n_slots = coli_attn_n_slots(threads, T, T * ((G + 7) / 8));
	float *sc = xmalloc(sizeof(float) * slot * n_slots), scale = 1.0f / sqrtf((float)kr);
	struct coli_attn_group g[8] = {0};
	const enum coli_cpu_isa isa = coli_cpu_isa();
	size_t off;
	int soff, fails = 0;

	coli_kv_seg_offsets(COLI_KV_Q8, kr, 0, kl, &off, &soff);
	for (int p = 0; p < n_pos; p++) {
		for (int i = 0; i < kr; i++)
			x[i] = rng_normalish();
		coli_kv_row_store(COLI_KV_Q8, C + rb * p, x, kr, kl);
	}
	for (int i = 0; i < T * G * kr; i++)
		q[i] = rng_normalish();
	const struct coli_kv_rows rows = {
	    .p = C, .stride = rb, .type = COLI_KV_Q8, .soff = soff, .seg = kl};

	coli_cpu_isa_force(COLI_CPU_ISA_SCALAR);
	for (int t = 0; t < T; t++) {
		const int np = n_pos - T + 1 + t;

		for (int h = 0; h < G; h++)
			coli_attention_head_kv(q + ((size_t)t * G + h) * kr, &rows, &rows, np, kr,
			                       kl, scale, -INFINITY, sc,
			                       want + ((size_t)t * G + h) * kl);
		g[t] = (struct coli_attn_group){.q = q + (size_t)t * G * kr,
		                                .K = C,
		                                .V = C,
		                                .out = got + (size_t)t * G * kl,
		                                .G = G,
		                                .n_pos = np,
		                                .kt = COLI_KV_Q8,
		                                .vt = COLI_KV_Q8,
		                                .kstride = rb,
		                                .vstride = rb,
		                                .ksoff = soff,
		                                .vsoff = soff,
		                                .seg = kl};
	}
	coli_cpu_isa_force(isa);
	poison(got, (size_t)T * G * kl);
	coli_attention_groups_mt(pool, g, T, kr, kr, kl, scale, sc, slot, n_slots);
	if (memcmp(want, got, sizeof(float) * T * G * kl)) {
		fprintf(stderr,
		        "latent q8: %d threads, T %d, G %d, kl %d, r %d, %d positions: differ\n",
		        threads, T, G, kl, r, n_pos);
		fails++;
	}
	free(C), free(x), free(q), free(want), free(got), free(sc);
	return fails;
}

static int check_latent(coli_cpu_pool_t *pool, int threads, int T, int G, int kl, int r, int n_pos)
{
	const int kr = kl + r;
	float *q = xmalloc(sizeof(float) * T * G * kr), *C = xmalloc(sizeof(float) * n_pos * kr);
	float *want = xmalloc(sizeof(float) * T * G * kl),
	      *got = xmalloc(sizeof(float) * T * G * kl);
	const size_t slot = coli_attn_slot_floats(n_pos, kl);
	/* a slot a unit (the engine's scratch): T < threads splits the heads */
	const int n_slots = coli_attn_n_slots(threads, T, T * ((G + 7) / 8));
	float *sc = xmalloc(sizeof(float) * slot * n_slots);
	double *p = xmalloc(sizeof(double) * n_pos), err = 0, mx = 0;
	struct coli_attn_group g[8] = {0};
	float scale = 1.0f / sqrtf((float)kr);
	int fails = 0;

	for (int i = 0; i < T * G * kr; i++)
		q[i] = rng_normalish();
	for (int i = 0; i < n_pos * kr; i++)
		C[i] = rng_normalish();
	poison(got, (size_t)T * G * kl);
	for (int t = 0; t < T; t++) {
		int np = n_pos - T + 1 + t; /* causal: token t sees its prefix */

		g[t] = (struct coli_attn_group){.q = q + (size_t)t * G * kr,
		                                .K = C,
		                                .V = C,
		                                .out = got + (size_t)t * G * kl,
		                                .G = G,
		                                .n_pos = np};
		for (int h = 0; h < G; h++) {
			const float *qh = q + ((size_t)t * G + h) * kr;
			double m = -1e300, sum = 0;

			coli_attention_head(qh, C, C, np, kr, kr, kl, scale, sc,
			                    want + ((size_t)t * G + h) * kl);
			for (int k = 0; k < np; k++) {
				p[k] = 0;
				for (int i = 0; i < kr; i++)
					p[k] += (double)qh[i] * C[(size_t)k * kr + i];
				p[k] *= scale;
				m = p[k] > m ? p[k] : m;
			}
			for (int k = 0; k < np; k++)
				sum += p[k] = exp(p[k] - m);
			for (int i = 0; i < kl; i++) {
				double o = 0;

				for (int k = 0; k < np; k++)
					o += p[k] / sum * C[(size_t)k * kr + i];
				err = fmax(err, fabs(o - want[((size_t)t * G + h) * kl + i]));
				mx = fmax(mx, fabs(o));
			}
		}
	}
	coli_attention_groups_mt(pool, g, T, kr, kr, kl, scale, sc, slot, n_slots);
	if (memcmp(want, got, sizeof(float) * T * G * kl) || !(err <= 1e-5 * mx)) {
		fprintf(stderr,
		        "latent: %d threads, T %d, G %d, kl %d, r %d, %d positions: bits %s, max "
		        "error %.3g of %.3g\n",
		        threads, T, G, kl, r, n_pos,
		        memcmp(want, got, sizeof(float) * T * G * kl) ? "differ" : "equal", err,
		        mx);
		fails++;
	}
	free(q), free(C), free(want), free(got), free(sc), free(p);
	return fails;
}

int main(void)
{
	static const int Gs[] = {1, 2, 4, 5, 8, 16, 12, 24};
	static const int hds[] = {128, 64, 36, 8, 5};
	static const int ns[] = {1, 2, 7, 100, 1500};
	int fails = 0, runs = 0;

	for (g_sink = 0; g_sink < 2; g_sink++) {
		runs = 0;
		for (size_t g = 0; g < sizeof(Gs) / sizeof(Gs[0]); g++)
			for (size_t h = 0; h < sizeof(hds) / sizeof(hds[0]); h++)
				for (size_t n = 0; n < sizeof(ns) / sizeof(ns[0]); n++) {
					float scale = 1.0f / sqrtf((float)hds[h]);

					fails += check(Gs[g], hds[h], ns[n], scale);
					fails += check(Gs[g], hds[h], ns[n],
					               300.0f * scale); /* ~one-hot */
					runs += 2;
				}
		printf("%d cases (G, hd, positions, scale; %s) on every ISA, %d differ from the "
		       "per-head bits (best ISA %s)\n",
		       runs, g_sink ? "with sinks, each head's also against double" : "no sinks",
		       fails, coli_cpu_isa_name(coli_cpu_isa()));
		{
			static const int threads[] = {2, 5, 16};
			static const int mt[][4] = {/* groups, G, hd, positions */ {1, 8, 128, 256},
			                            {4, 8, 128, 1500},
			                            {1, 4, 64, 700},
			                            {2, 12, 36, 300},
			                            {3, 2, 128, 999},
			                            {1, 24, 128, 4000},
			                            {4, 8, 128, 200},
			                            {1, 128, 64, 600}, /* 16 units, MLA's heads */
			                            {2, 40, 32, 300}};
			int mt_fails = 0, mt_runs = 0;

			enum coli_cpu_isa best = coli_cpu_isa();

			for (int isa = COLI_CPU_ISA_SCALAR; isa <= (int)best; isa++) {
				if (coli_cpu_isa_force((enum coli_cpu_isa)isa))
					continue;
				for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++) {
					coli_cpu_pool_t *pool;

					if (coli_cpu_pool_create(threads[t], &pool))
						return 1;
					for (size_t m = 0; m < sizeof(mt) / sizeof(mt[0]);
					     m++, mt_runs++)
						mt_fails += check_mt(pool, threads[t], mt[m][0],
						                     mt[m][1], mt[m][2], mt[m][3]);
					coli_cpu_pool_destroy(pool);
				}
			}
			coli_cpu_isa_force(best);
			printf("coli_attention_groups_mt: %d cases (pool sizes 2, 5, 16, every "
			       "ISA; %s), %d "
			       "differ or split where they should not\n",
			       mt_runs, g_sink ? "sinks" : "no sinks", mt_fails);
			fails += mt_fails;
		}
	}
	g_sink = 0;
	{
		/* tokens, heads, kv_lora, rope, positions: the fixture's, DeepSeek-V3's */
		static const int lt[][5] = {{1, 4, 64, 16, 60},
		                            {5, 4, 64, 16, 51},
		                            {1, 16, 512, 64, 700},
		                            {2, 128, 512, 64, 300},
		                            {1, 3, 40, 8, 9}};
		enum coli_cpu_isa best = coli_cpu_isa();
		int lf = 0, ln = 0;

		for (int isa = COLI_CPU_ISA_SCALAR; isa <= (int)best; isa++) {
			coli_cpu_pool_t *pool;

			if (coli_cpu_isa_force((enum coli_cpu_isa)isa) ||
			    coli_cpu_pool_create(isa == (int)best ? 16 : 2, &pool))
				continue;
			for (size_t k = 0; k < sizeof(lt) / sizeof(lt[0]); k++, ln++)
				lf += check_latent(pool, isa == (int)best ? 16 : 2, lt[k][0],
				                   lt[k][1], lt[k][2], lt[k][3], lt[k][4]) +
				      check_latent_q8(pool, isa == (int)best ? 16 : 2, lt[k][0],
				                      lt[k][1], lt[k][2], lt[k][3], lt[k][4]);
			coli_cpu_pool_destroy(pool);
		}
		coli_cpu_isa_force(best);
		printf("MLA latent rows (K = V, vd < hd; fp32 and q8 rows): %d cases, %d differ\n",
		       ln, lf);
		fails += lf;
	}
	return fails != 0;
}
