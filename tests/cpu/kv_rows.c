/*
 * tests/cpu/kv_rows.c — the KV cache's typed rows (cpu/kvq.c):
 *
 *   store   bf16: each element the nearest bf16 of the fp32 value, ties to
 *           even (checked against the two neighbours in double); q8: each
 *           segment's scale is amax / 127, its largest |q| 127, and every
 *           value read back within half a step (scale / 2) of the original;
 *           a segment of zeros reads back zeros;
 *   read    coli_kv_row_load on every ISA gives the same bits (the AVX2
 *           decode is the scalar's);
 *   attend  attention over typed rows gives exactly the bits of the fp32
 *           attention over their values read back, per head
 *           (coli_attention_head_kv), per group of 8 heads on every ISA
 *           (coli_attention_group_kv), and split across a pool of 16 threads
 *           (coli_attention_groups_mt: 600 positions, two groups) — K and V
 *           of different types, GQA heads at an offset (scale offsets) and
 *           MLA's latent row (two q8 segments, values the first kl);
 *   rows    a decode step's groups side by side in bf16 and q8 rows through
 *           coli_attention_groups_mt on 1-3 threads, their rows walked
 *           together: each group coli_attention_group_kv's bits.
 */
#include <math.h>
#include <string.h>

#include "cpu/cpu.h"
#include "helpers.h"

static int g_fails;

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, __VA_ARGS__);                                                      \
		g_fails++;                                                                         \
	} while (0)

static void check_store(int n, int seg)
{
	float *x = xmalloc(sizeof(float) * n), *back = xmalloc(sizeof(float) * n);
	char *row = xmalloc(coli_kv_row_bytes(COLI_KV_Q8, n, (n + seg - 1) / seg) + 4 * n);

	for (int i = 0; i < n; i++)
		x[i] =
		    rng_normalish() * (i / seg % 2 ? 30.0f : 0.5f); /* segments of other ranges */
	if (n > seg)
		memset(x + seg, 0, sizeof(float) * (n - seg < seg ? n - seg : seg)); /* zeros */
	/* bf16: the nearest, ties to even */
	coli_kv_row_store(COLI_KV_BF16, row, x, n, seg);
	for (int i = 0; i < n; i++) {
		uint16_t b = ((uint16_t *)row)[i];
		double v = coli_bf16_to_f32(b), lo = coli_bf16_to_f32((uint16_t)(b - 1)),
		       hi = coli_bf16_to_f32((uint16_t)(b + 1)), d = fabs(v - x[i]);

		if (d > fabs(lo - x[i]) || d > fabs(hi - x[i]) ||
		    ((d == fabs(lo - x[i]) || d == fabs(hi - x[i])) && (b & 1)))
			FAIL("bf16: x %a stored %a (neighbours %a %a)\n", x[i], v, lo, hi);
	}
	/* q8 */
	coli_kv_row_store(COLI_KV_Q8, row, x, n, seg);
	coli_kv_row_load(COLI_KV_Q8, row, back, n, seg);
	for (int s0 = 0, k = 0; s0 < n; s0 += seg, k++) {
		const float s = ((float *)(row + ((n + 3) & ~3)))[k];
		float amax = 0;
		int qmax = 0;

		for (int i = s0; i < n && i < s0 + seg; i++) {
			amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
			qmax = abs(((signed char *)row)[i]) > qmax ? abs(((signed char *)row)[i])
			                                           : qmax;
			if (!(fabs((double)back[i] - x[i]) <= s * 0.5 * (1 + 1e-6)))
				FAIL("q8: x %g read back %g, scale %g\n", x[i], back[i], s);
		}
		if (s != amax / 127.0f || (amax > 0 && qmax != 127) || (amax == 0 && qmax != 0))
			FAIL("q8: segment %d scale %g (amax %g), max |q| %d\n", k, s, amax, qmax);
	}
	/* the read on every ISA */
	for (int t = 1; t <= 2; t++) {
		float *ref = xmalloc(sizeof(float) * n);
		enum coli_cpu_isa best = coli_cpu_isa();

		coli_kv_row_store(t, row, x, n, seg);
		coli_cpu_isa_force(COLI_CPU_ISA_SCALAR);
		coli_kv_row_load(t, row, ref, n, seg);
		coli_cpu_isa_force(best);
		coli_kv_row_load(t, row, back, n, seg);
		if (memcmp(ref, back, sizeof(float) * n))
			FAIL("%s: the %s read differs from the scalar\n", coli_kv_type_name(t),
			     coli_cpu_isa_name(best));
		free(ref);
	}
	free(x), free(back), free(row);
}

/* n_pos rows of nkv heads of hd (MLA: nkv 1, hd = kl + r, seg kl, vd kl)
 * typed kt/vt; G query heads over head g. */
static void check_attend(int kt, int vt, int nkv, int hd, int seg, int vd, int G, int n_pos)
{
	const int n = nkv * hd, nseg = (n + seg - 1) / seg, g = nkv - 1, mla = vd != hd;
	const size_t kb = coli_kv_row_bytes(kt, n, nseg), vb = coli_kv_row_bytes(vt, n, nseg);
	const size_t ke = kt == 0 ? 4 : kt == 1 ? 2 : 1, ve = vt == 0 ? 4 : vt == 1 ? 2 : 1;
	const int so = ((n + 3) & ~3) + 4 * g;
	char *K = xmalloc(kb * n_pos), *V = xmalloc(vb * n_pos);
	float *x = xmalloc(sizeof(float) * n), *KF = xmalloc(sizeof(float) * n * n_pos),
	      *VF = xmalloc(sizeof(float) * n * n_pos);
	float *q = xmalloc(sizeof(float) * 2 * G * hd), *want = xmalloc(sizeof(float) * 2 * G * vd),
	      *got = xmalloc(sizeof(float) * 2 * G * vd),
	      *sc = xmalloc(sizeof(float) * 16 * coli_attn_slot_floats(n_pos, vd));
	const float scale = 1.0f / sqrtf((float)hd);
	struct coli_kv_rows kr =
	                        {K + g * hd * ke, kb, kt, (int)(so - g * hd * ke), seg, NULL, 0, 0},
	                    vr = {(mla ? K : V) + g * hd * (mla ? ke : ve),
	                          mla ? kb : vb,
	                          mla ? kt : vt,
	                          (int)(so - g * hd * (mla ? ke : ve)),
	                          seg,
	                          NULL,
	                          0,
	                          0};
	enum coli_cpu_isa best = coli_cpu_isa();
	coli_cpu_pool_t *pool = NULL;

	for (int p = 0; p < n_pos; p++) {
		for (int i = 0; i < n; i++)
			x[i] = rng_normalish();
		coli_kv_row_store(kt, K + kb * p, x, n, seg);
		coli_kv_row_load(kt, K + kb * p, KF + (size_t)n * p, n, seg);
		for (int i = 0; i < n; i++)
			x[i] = rng_normalish();
		coli_kv_row_store(vt, V + vb * p, x, n, seg);
		coli_kv_row_load(vt, V + vb * p, VF + (size_t)n * p, n, seg);
	}
	for (int i = 0; i < 2 * G * hd; i++)
		q[i] = 2.0f * rng_normalish();
	const float *VFh = (mla ? KF : VF) + g * hd;

	/* the reference: fp32 rows, one head at a time */
	for (int h = 0; h < 2 * G; h++)
		coli_attention_head(q + h * hd, KF + g * hd, VFh, h < G ? n_pos : n_pos - 1, n, hd,
		                    vd, scale, sc, want + h * vd);
	for (int h = 0; h < G; h++) {
		coli_attention_head_kv(q + h * hd, &kr, &vr, n_pos, hd, vd, scale, -INFINITY, sc,
		                       got + h * vd);
		if (memcmp(got + h * vd, want + h * vd, sizeof(float) * vd))
			FAIL("head: %s,%s hd %d head %d differs from fp32's\n",
			     coli_kv_type_name(kt), coli_kv_type_name(vt), hd, h);
	}
	for (int isa = COLI_CPU_ISA_SCALAR; isa <= (int)best; isa++) {
		if (coli_cpu_isa_force((enum coli_cpu_isa)isa))
			continue;
		memset(got, 0xff, sizeof(float) * G * vd);
		coli_attention_group_kv(q, G, &kr, &vr, n_pos, hd, vd, scale, NULL, sc, got);
		if (memcmp(got, want, sizeof(float) * G * vd))
			FAIL("group: %s,%s hd %d isa %s differs from fp32's\n",
			     coli_kv_type_name(kt), coli_kv_type_name(vt), hd,
			     coli_cpu_isa_name((enum coli_cpu_isa)isa));
	}
	coli_cpu_isa_force(best);
	/* split across 16 threads: two groups (a token and the one before) */
	if (coli_cpu_pool_create(16, &pool) == 0) {
		struct coli_attn_group a[2];

		for (int k = 0; k < 2; k++)
			a[k] = (struct coli_attn_group){.q = q + (size_t)k * G * hd,
			                                .K = kr.p,
			                                .V = vr.p,
			                                .out = got + (size_t)k * G * vd,
			                                .G = G,
			                                .n_pos = k ? n_pos - 1 : n_pos,
			                                .kt = kt,
			                                .vt = mla ? kt : vt,
			                                .kstride = kb,
			                                .vstride = vr.stride,
			                                .ksoff = kr.soff,
			                                .vsoff = vr.soff,
			                                .seg = seg};
		memset(got, 0xff, sizeof(float) * 2 * G * vd);
		coli_attention_groups_mt(pool, a, 2, n, hd, vd, scale, sc,
		                         coli_attn_slot_floats(n_pos, vd), 16);
		if (memcmp(got, want, sizeof(float) * 2 * G * vd))
			FAIL("mt: %s,%s hd %d %d positions differs from fp32's\n",
			     coli_kv_type_name(kt), coli_kv_type_name(vt), hd, n_pos);
		coli_cpu_pool_destroy(pool);
	}
	free(K), free(V), free(x), free(KF), free(VF), free(q), free(want), free(got), free(sc);
}

/* A decode step's nkv groups of G heads (one token, each group its head's
 * slice of the same typed rows, as core/forward/forward.c lays them out)
 * through coli_attention_groups_mt on pools of 1-3 threads with a slot a
 * group: their rows walked together where each task gets two groups or more
 * (returns 2 where the CPU has AVX2; else a task a group), each group the
 * bits of coli_attention_group_kv on its own rows. */
static int check_rows(int kt, int nkv, int hd, int G, int n_pos)
{
	const int n = nkv * hd;
	const size_t rb = coli_kv_row_bytes(kt, n, nkv), slot = (size_t)n_pos * 8;
	char *K = xmalloc(rb * n_pos), *V = xmalloc(rb * n_pos);
	float *x = xmalloc(sizeof(float) * n), *q = xmalloc(sizeof(float) * nkv * G * hd);
	float *want = xmalloc(sizeof(float) * nkv * G * hd),
	      *got = xmalloc(sizeof(float) * nkv * G * hd),
	      *sc = xmalloc(sizeof(float) * nkv * slot);
	const float scale = 1.0f / sqrtf((float)hd);
	struct coli_attn_group a[16];
	int cases = 0;

	for (int p = 0; p < n_pos; p++) {
		for (int i = 0; i < n; i++)
			x[i] = rng_normalish();
		coli_kv_row_store(kt, K + rb * p, x, n, hd);
		for (int i = 0; i < n; i++)
			x[i] = rng_normalish();
		coli_kv_row_store(kt, V + rb * p, x, n, hd);
	}
	for (int i = 0; i < nkv * G * hd; i++)
		q[i] = 2.0f * rng_normalish();
	for (int g = 0; g < nkv; g++) {
		size_t off;
		int soff;

		coli_kv_seg_offsets(kt, n, g, hd, &off, &soff);
		const struct coli_kv_rows kr = {K + off, rb, kt, soff, hd, NULL, 0, 0},
		                          vr = {V + off, rb, kt, soff, hd, NULL, 0, 0};

		coli_attention_group_kv(q + (size_t)g * G * hd, G, &kr, &vr, n_pos, hd, hd, scale,
		                        NULL, sc, want + (size_t)g * G * hd);
		a[g] = (struct coli_attn_group){.q = q + (size_t)g * G * hd,
		                                .K = K + off,
		                                .V = V + off,
		                                .out = got + (size_t)g * G * hd,
		                                .G = G,
		                                .n_pos = n_pos,
		                                .kt = kt,
		                                .vt = kt,
		                                .kstride = rb,
		                                .vstride = rb,
		                                .ksoff = soff,
		                                .vsoff = soff,
		                                .seg = hd};
	}
	for (int threads = 1; threads <= 3; threads++, cases++) {
		coli_cpu_pool_t *pool = NULL;
		int how;

		if (coli_cpu_pool_create(threads, &pool))
			continue;
		memset(got, 0xff, sizeof(float) * nkv * G * hd);
		how = coli_attention_groups_mt(pool, a, nkv, n, hd, hd, scale, sc, slot, nkv);
		if (memcmp(got, want, sizeof(float) * nkv * G * hd))
			FAIL("rows: %s, %d groups of %d, hd %d, %d positions, %d threads: differs "
			     "from each group's\n",
			     coli_kv_type_name(kt), nkv, G, hd, n_pos, threads);
		/* together where each task gets two groups or more */
		if (how != (coli_cpu_isa() >= COLI_CPU_ISA_AVX2 && nkv >= 2 * threads ? 2 : 0))
			FAIL("rows: %d groups on %d threads ran as %d\n", nkv, threads, how);
		coli_cpu_pool_destroy(pool);
	}
	free(K), free(V), free(x), free(q), free(want), free(got), free(sc);
	return cases;
}

int main(void)
{
	static const int tv[][2] = {{1, 1}, {2, 2}, {2, 1}, {1, 2}, {0, 2}};
	int cases = 0;

	check_store(128, 128);
	check_store(576, 512); /* MLA's latent row */
	check_store(4 * 96, 96);
	check_store(13, 5); /* a short last segment, padding */
	for (size_t k = 0; k < sizeof(tv) / sizeof(tv[0]); k++) {
		check_attend(tv[k][0], tv[k][1], 4, 128, 128, 128, 8, 600);
		check_attend(tv[k][0], tv[k][1], 2, 64, 64, 64, 4, 300);
		check_attend(tv[k][0], tv[k][1], 3, 40, 40, 40, 5, 97);
		cases += 3;
	}
	for (int t = 1; t <= 2; t++, cases++) /* MLA: K = V, the values the first kl */
		check_attend(t, t, 1, 80, 64, 64, 16, 400);
	for (int t = 1; t <= 2; t++) { /* a decode step's groups, rows walked together */
		cases += check_rows(t, 4, 128, 8, 600); /* qwen3-30b's, a short last block */
		cases += check_rows(t, 2, 64, 4, 300);  /* the demo's */
		cases += check_rows(t, 8, 128, 6, 257); /* groups of 6, a last block of one */
	}
	printf("typed rows: 4 store shapes, %d attention cases (head, group on every ISA, "
	       "16-thread split): %d differ\n",
	       cases, g_fails);
	return g_fails ? 1 : 0;
}
