/*
 * tests/ptx/mla.c — ptx/mla.cu's latent attention against a double-precision
 * reference computed here, softmax(q . C^T * scale) . C[:, :dv] per query
 * and head (exit 77 without a GPU). Shapes: the tiny fixtures' (dk 80, dv 64),
 * head counts that are not a multiple of the kernel's 16, DeepSeek-V3's
 * (128 heads, dk 576, dv 512) and Kimi-K2's (64 heads), a first token, a
 * prefill batch (causal within it), and contexts from one tile to many
 * splits. Cache rows hold values of N(0,1)-like size, the query is scaled so
 * that the softmax is neither flat nor one-hot.
 *
 * Both kernels: x3 (three tf32 products, ~fp32) within 2e-5 of the largest
 * output, x1 (one tf32 product, inputs rounded to 10 bits) within 4e-3; the
 * error of each is printed. Outputs are poisoned (NaN) before each launch;
 * cache rows past the last position are NaN too, so a read past it shows.
 */
#include <math.h>
#include <string.h>

#include "ptx_test.h"

/* out [T][nh][dv] for q [T][nh][dk] over C [n][ld]. */
static void reference(const float *q, const float *C, double *out, int T, int pos0, int nh, int dk,
                      int dv, int ld, float scale)
{
	double *s = xmalloc(sizeof(double) * (size_t)(pos0 + T));

	for (int t = 0; t < T; t++)
		for (int h = 0; h < nh; h++) {
			const float *qh = q + ((size_t)t * nh + h) * dk;
			double *o = out + ((size_t)t * nh + h) * dv, mx = -INFINITY, l = 0;
			int n = pos0 + t + 1;

			for (int p = 0; p < n; p++) {
				double d = 0;

				for (int k = 0; k < dk; k++)
					d += (double)qh[k] * C[(size_t)p * ld + k];
				s[p] = d * scale;
				mx = s[p] > mx ? s[p] : mx;
			}
			memset(o, 0, sizeof(double) * dv);
			for (int p = 0; p < n; p++) {
				double w = exp(s[p] - mx);

				l += w;
				for (int v = 0; v < dv; v++)
					o[v] += w * C[(size_t)p * ld + v];
			}
			for (int v = 0; v < dv; v++)
				o[v] /= l;
		}
	free(s);
}

static int run_case(int T, int pos0, int nh, int dk, int dv, int ld)
{
	const int n = pos0 + T, ctx = n + 37; /* rows past n: NaN */
	const size_t nq = (size_t)T * nh * dk, no = (size_t)T * nh * dv;
	float *q = xmalloc(4 * nq), *C = xmalloc(4 * (size_t)ctx * ld), *o = xmalloc(4 * no);
	double *ref = xmalloc(8 * no), big = 0;
	const float scale = 1.0f / sqrtf((float)dk);
	uint64_t dq, dc, dout;
	int rc = 0;

	for (size_t i = 0; i < nq; i++)
		q[i] = 2.5f * frand();
	for (size_t i = 0; i < (size_t)ctx * ld; i++)
		C[i] = (size_t)(i / ld) < (size_t)n ? 1.7f * frand() : NAN;
	reference(q, C, ref, T, pos0, nh, dk, dv, ld, scale);
	for (size_t i = 0; i < no; i++)
		big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
	dq = dev_copy(q, 4 * nq);
	dc = dev_copy(C, 4 * (size_t)ctx * ld);
	for (int x3 = 1; x3 >= 0; x3--) {
		const struct coli_gpu_mla a = {dq, dc, 0, T, pos0, nh, dk, dv, ld, scale, x3};
		struct coli_gpu_mla b = a;
		double err = 0, lim = x3 ? 2e-5 : 4e-3;
		int r;

		b.out = dout = dev_poison(4 * no);
		r = coli_gpu_mla_attention(g_gpu, &b);
		if (r || coli_gpu_sync(g_gpu)) {
			printf("  mla T=%d pos0=%d nh=%d dk=%d dv=%d x3=%d: launch failed (%d)\n",
			       T, pos0, nh, dk, dv, x3, r);
			return 1;
		}
		download(o, dout, 4 * no);
		for (size_t i = 0; i < no; i++) {
			double e = fabs(o[i] - ref[i]);

			err = e > err || e != e ? e : err;
		}
		printf("  mla T=%d pos0=%-5d nh=%-3d dk=%d dv=%d %s max err %.2e of %.2f (limit "
		       "%.0e)\n",
		       T, pos0, nh, dk, dv, x3 ? "x3" : "x1", err / big, big, lim);
		rc |= !(err <= lim * big);
		coli_gpu_free(g_gpu, dout);
	}
	coli_gpu_free(g_gpu, dq), coli_gpu_free(g_gpu, dc);
	free(q), free(C), free(o), free(ref);
	return rc;
}

int main(void)
{
	static const int cases[][6] = {
	    /* T, pos0, nh, dk, dv, ld */
	    {1, 0, 4, 80, 64, 80},         {1, 5, 4, 80, 64, 80},
	    {3, 40, 20, 80, 64, 84},       {17, 0, 4, 80, 64, 80},
	    {1, 4095, 128, 576, 512, 576}, {2, 1000, 64, 576, 512, 576},
	    {1, 31, 128, 576, 512, 576},   {1, 9000, 16, 576, 512, 576},
	};
	int rc = ptx_test_open();

	if (rc)
		return rc;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		rc |= run_case(cases[c][0], cases[c][1], cases[c][2], cases[c][3], cases[c][4],
		               cases[c][5]);
	return rc ? 1 : 0;
}
