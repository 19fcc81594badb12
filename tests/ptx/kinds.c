/*
 * tests/ptx/kinds.c — ptx/dense/kinds.cu against its CPU references (exit 77
 * without a GPU):
 *
 *   route_sigmoid  vs cpu/ops.c coli_route_sigmoid: E 8..1024, K 1..16, with
 *                  and without the correction bias, groups (1, 4 of 16, 8 of
 *                  256, 64 of 1024 ...), renormalised or not, scaled. Logits
 *                  and biases on coarse grids (ties are common, and any two
 *                  different choice scores are far more than the device's
 *                  expf error apart) or drawn freely: the same experts, in
 *                  the same order, weights within 4 ulp (only expf differs
 *                  from the host's libm)
 *   rope_part      vs coli_rope_part, rd 16 of 32, 64 of 128 and 128 of 128
 *                  (the full rotation), the unrotated dims untouched
 *
 * Outputs are poisoned (0xff: NaN) before each launch.
 */
#include <math.h>
#include <string.h>

#include "ptx_test.h"

static int test_route_sigmoid(void)
{
	static const int cases[][8] = {/* T, E, K, n_group, topk_group, norm, bias, coarse */
	                               {1, 8, 2, 1, 1, 0, 1, 1},   {4, 16, 3, 4, 2, 1, 1, 1},
	                               {3, 16, 4, 8, 3, 1, 0, 1},  {4, 128, 8, 1, 1, 1, 1, 0},
	                               {2, 160, 8, 1, 1, 1, 1, 1}, {4, 256, 8, 8, 4, 1, 1, 1},
	                               {4, 256, 8, 8, 4, 1, 1, 0}, {5, 1024, 16, 64, 8, 0, 1, 1},
	                               {1, 32, 1, 16, 1, 1, 1, 0}, {4, 64, 16, 4, 4, 1, 0, 0}};
	int rc = 0;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const int T = cases[c][0], E = cases[c][1], K = cases[c][2], G = cases[c][3],
		          TG = cases[c][4], norm = cases[c][5], has_bias = cases[c][6],
		          coarse = cases[c][7];
		const float scale = c % 2 ? 2.5f : 1.0f;
		float *lg = xmalloc(4 * (size_t)T * E), *p = xmalloc(4 * (size_t)E);
		float *bias = xmalloc(4 * (size_t)E);
		float *w = xmalloc(4 * (size_t)T * K), *gw = xmalloc(4 * (size_t)T * K);
		int *s = xmalloc(4 * (size_t)T * K), *gs = xmalloc(4 * (size_t)T * K);
		const struct coli_route_sig r = {has_bias ? bias : NULL, G, TG, norm, scale};
		uint64_t dl, db, ds, dw;
		size_t bad = 0;
		double ulp = 0;

		for (int i = 0; i < T * E; i++)
			lg[i] = coarse ? (float)((int)(frand() * 8)) * 0.5f : 4 * frand();
		for (int i = 0; i < E; i++)
			bias[i] = coarse ? (float)((int)(frand() * 4)) * 0.125f : 0.3f * frand();
		for (int t = 0; t < T; t++) {
			memcpy(p, lg + (size_t)t * E, 4 * (size_t)E);
			coli_route_sigmoid(p, E, K, &r, s + (size_t)t * K, w + (size_t)t * K);
		}
		dl = dev_copy(lg, 4 * (size_t)T * E);
		db = dev_copy(bias, 4 * (size_t)E);
		ds = dev_poison(4 * (size_t)T * K);
		dw = dev_poison(4 * (size_t)T * K);
		if (coli_gpu_route_sigmoid(g_gpu, dl, has_bias ? db : 0, T, E, K, G, TG, norm,
		                           scale, ds, dw)) {
			printf("  route_sigmoid T=%d E=%d K=%d: launch failed\n", T, E, K);
			return 1;
		}
		download(gs, ds, 4 * (size_t)T * K);
		download(gw, dw, 4 * (size_t)T * K);
		for (int i = 0; i < T * K; i++) {
			double u = fabs((double)gw[i] - w[i]) / (nextafterf(w[i], INFINITY) - w[i]);

			bad += gs[i] != s[i] || !(u <= 4);
			ulp = u > ulp || u != u ? u : ulp;
		}
		printf("  route_sigmoid T=%d E=%-4d K=%-2d groups %2d/%-2d norm=%d bias=%d %-6s "
		       "mismatches %zu, max %.0f ulp\n",
		       T, E, K, TG, G, norm, has_bias, coarse ? "coarse" : "free", bad, ulp);
		rc |= bad != 0;
		coli_gpu_free(g_gpu, dl), coli_gpu_free(g_gpu, db);
		coli_gpu_free(g_gpu, ds), coli_gpu_free(g_gpu, dw);
		free(lg), free(p), free(bias), free(w), free(gw), free(s), free(gs);
	}
	return rc;
}

static int test_rope_part(void)
{
	static const int cases[][3] = {/* nh, hd, rd */ {4, 32, 16}, {32, 128, 64}, {8, 128, 128}};
	const int T = 3, pos0 = 39990;
	int rc = 0;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const int nh = cases[c][0], hd = cases[c][1], rd = cases[c][2];
		const size_t N = (size_t)T * nh * hd;
		float *x = xmalloc(4 * N), *want = xmalloc(4 * N), *got = xmalloc(4 * N), f[64];
		uint64_t dx, df;
		size_t bad = 0;
		double maxe = 0;

		for (int i = 0; i < rd / 2; i++)
			f[i] = (float)pow(4e4, -2.0 * i / rd);
		for (size_t i = 0; i < N; i++)
			x[i] = want[i] = frand();
		coli_rope_part(want, T, nh, hd, rd, pos0, f);
		dx = dev_copy(x, 4 * N);
		df = dev_copy(f, sizeof(f));
		if (coli_gpu_rope_part(g_gpu, dx, T, nh, hd, rd, pos0, df)) {
			printf("  rope_part: launch failed\n");
			return 1;
		}
		download(got, dx, 4 * N);
		for (size_t i = 0; i < N; i++) {
			double e = fabs((double)got[i] - want[i]);
			int rotated = (int)(i % hd) < rd;

			/* rotated: within 1e-6 (the device's sincos); the rest exact */
			bad += rotated ? !(e <= 1e-6) : memcmp(&got[i], &x[i], 4) != 0;
			maxe = e > maxe || e != e ? e : maxe;
		}
		printf(
		    "  rope_part T=%d nh=%-2d hd=%-3d rd=%-3d at %d %14s bad %zu, max|err| %.3g\n",
		    T, nh, hd, rd, pos0, "", bad, maxe);
		rc |= bad != 0;
		coli_gpu_free(g_gpu, dx), coli_gpu_free(g_gpu, df);
		free(x), free(want), free(got);
	}
	return rc;
}

int main(void)
{
	int rc = ptx_test_open();

	if (rc)
		return rc;
	rc |= test_route_sigmoid();
	rc |= test_rope_part();
	coli_gpu_close(g_gpu);
	return rc ? 1 : 0;
}
