/*
 * tests/ptx/mla.c — ptx/attn/mla.cu's latent attention against a double-precision
 * reference computed here, softmax(q . C^T * scale) . C[:, :dv] per query
 * and head (exit 77 without a GPU). Shapes: the tiny fixtures' (dk 80, dv 64),
 * head counts that are not a multiple of the kernels' 16 or 32, DeepSeek-V3's
 * (128 heads, dk 576, dv 512) and Kimi-K2's (64 heads), a first token,
 * decode batches of 1..16 queries, a prefill batch (causal within it), and
 * contexts from one tile to 40k positions. Cache rows hold values of
 * N(0,1)-like size, the query is scaled so that the softmax is neither flat
 * nor one-hot.
 *
 * Every case runs on each cache type (f32; bf16 and q8 rows as cpu/kvq.c
 * writes them, the reference over their values) and each kernel:
 *   tf32 x3  three tf32 products (~fp32), within 2e-5 of the largest output;
 *   tf32 x1  one tf32 product (inputs rounded to 10 bits), within 4e-3;
 *   dec N    ptx/attn/mla_decode.cuh: bf16 tensor cores,
 *            the query and P in N bf16 terms: N = 2 and 3 within 2e-5 (x3's
 *            limit: 16 bits of the query and P, the cache exact in bf16 or,
 *            f32, its hi and lo planes), N = 1 (8 bits) within 8e-3;
 *   pick     the dense forward's choice with the position read from device
 *            memory and head-major output (its form), within 2e-5.
 * The error of each is printed, and each kernel's outputs for the batch's
 * first, middle and last query launched alone must be the batch's bytes (a
 * query's split depends on its position only). Paged: the same cache's rows
 * scattered over a pool's blocks in scrambled order, as the second of two
 * slots' (the first's blocks NaN), read through the block table with each
 * query's position and slot from a row table, and through the slot's table
 * row alone (a prompt's chunk), must give the contiguous launch's bytes.
 * Then coli_mla_prep, the elementwise step before it, against cpu/ops.c's
 * coli_mla_rope, and paged: its cache rows at their blocks' rows, the bytes
 * of the contiguous launch's. Outputs are poisoned (NaN)
 * before each launch; cache rows past the last position are NaN too (q8: NaN
 * scales), so a read past it shows.
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

static uint16_t bf16_of(float x)
{
	uint32_t u;

	memcpy(&u, &x, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float float_of_bf16(uint16_t b)
{
	const uint32_t u = (uint32_t)b << 16;
	float x;

	memcpy(&x, &u, 4);
	return x;
}

/* The cache C [ctx][ld] f32 (rows past n NaN) as rows of type kt (1 bf16, 2
 * q8: int8 values, then one scale a segment of dv values, cpu/kvq.c's
 * layout), into *rows; C's values become the typed rows' (the reference's
 * input). Returns the bytes. */
static size_t typed_rows(float *C, int ctx, int n, int dk, int dv, int ld, int kt, void **rows)
{
	const int nseg = (dk + dv - 1) / dv;
	const size_t rb = kt == 1 ? 2 * (size_t)dk : ((size_t)dk + 3) / 4 * 4 + 4 * (size_t)nseg;
	unsigned char *r = xmalloc(rb * (size_t)ctx);

	memset(r, 0x5a, rb * (size_t)ctx);
	for (int p = 0; p < ctx; p++) {
		float *x = C + (size_t)p * ld;
		unsigned char *row = r + (size_t)p * rb;

		if (kt == 1) {
			for (int i = 0; i < dk; i++) {
				const uint16_t b = bf16_of(x[i]);

				memcpy(row + 2 * i, &b, 2);
				x[i] = float_of_bf16(b);
			}
			continue;
		}
		for (int s0 = 0, sg = 0; s0 < dk; s0 += dv, sg++) {
			const int s1 = s0 + dv < dk ? s0 + dv : dk;
			float amax = 0, sc;

			for (int i = s0; i < s1; i++)
				amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
			sc = p < n ? amax / 127.0f : NAN;
			memcpy(row + rb - 4 * (size_t)(nseg - sg), &sc, 4);
			for (int i = s0; i < s1 && p < n; i++) {
				float v = sc > 0 ? rintf(x[i] / sc) : 0.0f;

				v = v < -127 ? -127 : v > 127 ? 127 : v;
				row[i] = (unsigned char)(signed char)v;
				x[i] = (float)(signed char)v * sc;
			}
		}
	}
	*rows = r;
	return rb * (size_t)ctx;
}

/* One kernel of the case: its arm name, terms, x3, and whether it takes the
 * position from device memory and writes head-major rows. */
struct arm {
	const char *name;
	int terms, x3, hm;
	double lim;
};

static const struct arm g_arms[] = {
    {"tf32 x3", COLI_GPU_MLA_TF32, 1, 0, 2e-5},
    {"tf32 x1", COLI_GPU_MLA_TF32, 0, 0, 4e-3},
    {"dec 1", 1, 0, 0, 8e-3},
    {"dec 2", 2, 0, 0, 2e-5},
    {"dec 3", 3, 0, 0, 2e-5},
    {"pick posp hm", 0, 1, 1, 2e-5},
};

/* The batch does not change bits: queries first, middle and last of the
 * launch a (its output o, head-major when hm) launched alone at their
 * positions give the same bytes. */
static int alone(const struct coli_gpu_mla *a, const float *o, int hm)
{
	const size_t row = (size_t)a->nh * a->dv;
	float *one = xmalloc(4 * row);
	int rc = 0;

	for (int k = 0; k < 3 && !rc; k++) {
		const int t = k == 0 ? 0 : k == 1 ? a->T / 2 : a->T - 1;
		struct coli_gpu_mla b = *a;
		size_t bad = 0;

		b.q = a->q + 4 * (size_t)t * a->nh * a->dk;
		b.T = 1, b.pos0 = a->pos0 + t, b.posp = 0, b.ldt = 0, b.ldh = 0;
		b.out = dev_poison(4 * row);
		if (coli_gpu_mla_attention(g_gpu, &b) || coli_gpu_sync(g_gpu)) {
			printf("  FAIL query %d alone: launch failed\n", t);
			rc = 1;
		} else {
			download(one, b.out, 4 * row);
			for (size_t i = 0; i < row; i++) { /* (h, c) */
				const size_t h = i / a->dv, c = i % a->dv;
				const float *got =
				    hm ? o + (h * a->T + t) * a->dv + c : o + t * row + i;

				bad += memcmp(got, one + i, 4) != 0;
			}
			if (bad) {
				printf("  FAIL query %d of %d alone: %zu of %zu values not the "
				       "batch's "
				       "bytes\n",
				       t, a->T, bad, row);
				rc = 1;
			}
		}
		coli_gpu_free(g_gpu, b.out);
	}
	free(one);
	return rc;
}

/* A pool of two slots' blocks (32 rows each, rb bytes a row) holding the
 * contiguous rows [ctx] (NULL: none) as slot 1's, its blocks in scrambled
 * order, every other row NaN: the pool on the device (*pool), the table [2][nbs] (*tab)
 * and, for T queries from pos0, the row table (pos, 1) (*rows). */
struct paged {
	uint64_t pool, tab, rows;
	int nbs, *htab;
};

static int gcd(int a, int b)
{
	return b ? gcd(b, a % b) : a;
}

static struct paged paged_open(const void *cont, size_t rb, int ctx, int T, int pos0)
{
	struct paged pg = {.nbs = (ctx + 31) / 32};
	const int nb = 2 * pg.nbs;
	unsigned char *pool = xmalloc(rb * 32 * (size_t)nb);
	int *rows = xmalloc(sizeof(int) * 2 * (size_t)T);

	int m = 7; /* block b of the flattened table is id (m b + 3) % nb: m prime to nb */

	while (gcd(m, nb) != 1)
		m += 2;
	pg.htab = xmalloc(sizeof(int) * (size_t)nb);
	for (int b = 0; b < nb; b++)
		pg.htab[b] = (int)(((long)m * b + 3) % nb);
	memset(pool, 0xff, rb * 32 * (size_t)nb); /* NaN floats, NaN q8 scales */
	for (int p = 0; cont && p < ctx; p++)
		memcpy(pool + ((size_t)pg.htab[pg.nbs + p / 32] * 32 + p % 32) * rb,
		       (const unsigned char *)cont + (size_t)p * rb, rb);
	for (int t = 0; t < T; t++)
		rows[2 * t] = pos0 + t, rows[2 * t + 1] = 1;
	pg.pool = dev_copy(pool, rb * 32 * (size_t)nb);
	pg.tab = dev_copy(pg.htab, sizeof(int) * (size_t)nb);
	pg.rows = dev_copy(rows, sizeof(int) * 2 * (size_t)T);
	free(pool), free(rows);
	return pg;
}

static void paged_close(struct paged *pg)
{
	coli_gpu_free(g_gpu, pg->pool), coli_gpu_free(g_gpu, pg->tab),
	    coli_gpu_free(g_gpu, pg->rows);
	free(pg->htab);
}

/* Launch a over the paged cache, through the row table and through slot
 * 1's table row alone: each must give o's bytes. */
static int paged_same(const struct coli_gpu_mla *a, const float *o, const struct paged *pg)
{
	const size_t no = (size_t)a->T * a->nh * a->dv;
	float *got = xmalloc(4 * no);
	int rc = 0;

	for (int k = 0; k < 2 && !rc; k++) {
		struct coli_gpu_mla b = *a;
		size_t bad = 0;

		b.cache = pg->pool, b.nbs = pg->nbs;
		if (k == 0) /* the row table: pos0 the furthest position + 1 */
			b.rows = pg->rows, b.tab = pg->tab, b.pos0 = a->pos0 + a->T, b.posp = 0;
		else /* slot 1's row of the table, positions from pos0 */
			b.tab = pg->tab + 4 * (uint64_t)pg->nbs, b.posp = 0;
		b.out = dev_poison(4 * no);
		if (coli_gpu_mla_attention(g_gpu, &b) || coli_gpu_sync(g_gpu)) {
			printf("  FAIL paged (%s): launch failed\n",
			       k ? "slot's table" : "row table");
			rc = 1;
		} else {
			download(got, b.out, 4 * no);
			for (size_t i = 0; i < no; i++)
				bad += memcmp(got + i, o + i, 4) != 0;
			if (bad) {
				printf("  FAIL paged (%s): %zu of %zu values not the contiguous "
				       "bytes\n",
				       k ? "slot's table" : "row table", bad, no);
				rc = 1;
			}
		}
		coli_gpu_free(g_gpu, b.out);
	}
	free(got);
	return rc;
}

static int run_case(int T, int pos0, int nh, int dk, int dv, int ld, int kt)
{
	static const char *const kname[3] = {"f32", "bf16", "q8"};
	const int n = pos0 + T, ctx = n + 37; /* rows past n: NaN */
	const size_t nq = (size_t)T * nh * dk, no = (size_t)T * nh * dv;
	float *q = xmalloc(4 * nq), *C = xmalloc(4 * (size_t)ctx * ld), *o = xmalloc(4 * no);
	double *ref = xmalloc(8 * no), big = 0;
	const float scale = 1.0f / sqrtf((float)dk);
	void *rows = C;
	size_t cbytes = 4 * (size_t)ctx * ld;
	uint64_t dq, dc, dout, dpos;
	int rc = 0;

	for (size_t i = 0; i < nq; i++)
		q[i] = 2.5f * frand();
	for (size_t i = 0; i < (size_t)ctx * ld; i++)
		C[i] = (size_t)(i / ld) < (size_t)n ? 1.7f * frand() : NAN;
	if (kt)
		cbytes = typed_rows(C, ctx, n, dk, dv, ld, kt, &rows);
	reference(q, C, ref, T, pos0, nh, dk, dv, ld, scale);
	for (size_t i = 0; i < no; i++)
		big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
	dq = dev_copy(q, 4 * nq);
	dc = dev_copy(rows, cbytes);
	dpos = dev_copy(&pos0, sizeof(pos0));
	struct paged pg = paged_open(rows, cbytes / ctx, ctx, T, pos0);

	for (size_t k = 0; k < sizeof(g_arms) / sizeof(g_arms[0]); k++) {
		const struct arm *m = &g_arms[k];
		const int hm = m->hm;
		const struct coli_gpu_mla a = {.q = dq,
		                               .cache = dc,
		                               .T = T,
		                               .nh = nh,
		                               .dk = dk,
		                               .dv = dv,
		                               .ld = ld,
		                               .scale = scale,
		                               .x3 = m->x3,
		                               .kt = kt,
		                               .terms = m->terms,
		                               .posp = hm ? dpos : 0,
		                               .pos0 = pos0, /* the value posp holds */
		                               .span = ctx,
		                               .ldt = hm ? dv : 0,
		                               .ldh = hm ? T * dv : 0};
		struct coli_gpu_mla b = a;
		double err = 0;
		int r;

		b.out = dout = dev_poison(4 * no);
		r = coli_gpu_mla_attention(g_gpu, &b);
		if (r || coli_gpu_sync(g_gpu)) {
			printf("  mla T=%d pos0=%d nh=%d dk=%d dv=%d %s %s: launch failed (%d)\n",
			       T, pos0, nh, dk, dv, kname[kt], m->name, r);
			return 1;
		}
		download(o, dout, 4 * no);
		for (size_t i = 0; i < no; i++) {
			/* output i is (t, h, c) of [T][nh][dv]; head-major: [nh][T][dv] */
			const size_t t = i / ((size_t)nh * dv), h = i / dv % nh, c = i % dv;
			const float got = hm ? o[(h * T + t) * dv + c] : o[i];
			double e = fabs(got - ref[i]);

			err = e > err || e != e ? e : err;
		}
		printf("  mla T=%-2d pos0=%-5d nh=%-3d dk=%d dv=%d %-4s %-12s max err %.2e of %.2f "
		       "(limit %.0e)%s\n",
		       T, pos0, nh, dk, dv, kname[kt], m->name, err / big, big, m->lim,
		       err <= m->lim * big ? "" : "  FAIL");
		rc |= !(err <= m->lim * big);
		rc |= alone(&a, o, hm);
		rc |= paged_same(&a, o, &pg);
		coli_gpu_free(g_gpu, dout);
	}
	paged_close(&pg);
	coli_gpu_free(g_gpu, dq), coli_gpu_free(g_gpu, dc), coli_gpu_free(g_gpu, dpos);
	if (rows != C)
		free(rows);
	free(q), free(C), free(o), free(ref);
	return rc;
}

/* coli_mla_prep against the CPU's coli_mla_rope (cpu/ops.c): T tokens of
 * nh heads at positions pos0.. (read from device memory), YaRN factor f.
 * The same operations in the same order, but for the norm's sum of squares
 * (double, another order) and sincos: within 1e-6 of the largest value. */
static int prep_case(int T, int pos0, int nh, int np, int r, int kl, float f)
{
	const int kr = kl + r, hd = np + r, ctx = pos0 + T;
	float *kva = xmalloc(4 * (size_t)T * kr), *q = xmalloc(4 * (size_t)T * nh * hd);
	float *w = xmalloc(4 * (size_t)kl), *fr = xmalloc(4 * (size_t)r / 2);
	float *cache = xmalloc(4 * (size_t)ctx * kr), *qn = xmalloc(4 * (size_t)nh * T * np);
	float *qrow = xmalloc(4 * (size_t)T * nh * kr);
	double err = 0, big = 0;
	uint64_t d[8];

	for (size_t i = 0; i < (size_t)T * kr; i++)
		kva[i] = 3.0f * frand();
	for (size_t i = 0; i < (size_t)T * nh * hd; i++)
		q[i] = 2.0f * frand();
	for (int i = 0; i < kl; i++)
		w[i] = 1.0f + 0.5f * frand();
	for (int i = 0; i < r / 2; i++)
		fr[i] = powf(10000.0f, -2.0f * i / r);
	d[0] = dev_copy(kva, 4 * (size_t)T * kr), d[1] = dev_copy(q, 4 * (size_t)T * nh * hd);
	d[2] = dev_copy(w, 4 * (size_t)kl), d[3] = dev_copy(fr, 4 * (size_t)r / 2);
	d[4] = dev_copy(&pos0, 4), d[5] = dev_poison(4 * (size_t)ctx * kr);
	d[6] = dev_poison(4 * (size_t)nh * T * np), d[7] = dev_poison(4 * (size_t)T * nh * kr);
	const struct coli_gpu_mla_prep a = {
	    .kva = (const float *)(uintptr_t)d[0],
	    .q = (const float *)(uintptr_t)d[1],
	    .w = (const float *)(uintptr_t)d[2],
	    .inv_freq = (const float *)(uintptr_t)d[3],
	    .posp = (const int *)(uintptr_t)d[4],
	    .cache = (float *)(uintptr_t)d[5],
	    .qn = (float *)(uintptr_t)d[6],
	    .qrow = (float *)(uintptr_t)d[7],
	    .T = T,
	    .nh = nh,
	    .np = np,
	    .r = r,
	    .kl = kl,
	    .eps = 1e-6f,
	    .f = f,
	};
	if (coli_gpu_mla_prep(g_gpu, &a) || coli_gpu_sync(g_gpu)) {
		printf("  mla_prep T=%d: launch failed\n", T);
		return 1;
	}
	download(cache, d[5], 4 * (size_t)ctx * kr);
	download(qn, d[6], 4 * (size_t)nh * T * np);
	download(qrow, d[7], 4 * (size_t)T * nh * kr);
	coli_mla_rope(kva, q, w, fr, T, nh, np, kl, r, pos0, 1e-6f, f); /* the reference */
	for (int t = 0; t < T; t++) {
		for (int i = 0; i < kr; i++) {
			const double want = kva[(size_t)t * kr + i];

			big = fabs(want) > big ? fabs(want) : big;
			err = fmax(err, fabs(cache[(size_t)(pos0 + t) * kr + i] - want));
		}
		for (int h = 0; h < nh; h++)
			for (int i = 0; i < hd; i++) {
				const double want = q[((size_t)t * nh + h) * hd + i];
				const float got =
				    i < np ? qn[((size_t)h * T + t) * np + i]
				           : qrow[((size_t)t * nh + h) * kr + kl + i - np];

				big = fabs(want) > big ? fabs(want) : big;
				err = fabs(got - want) > err || got != got ? fabs(got - want) : err;
			}
	}
	printf("  mla_prep T=%d pos0=%d nh=%d np=%d r=%d kl=%d f=%.3f max err %.2e of %.2f "
	       "(limit 1e-6)\n",
	       T, pos0, nh, np, r, kl, f, err / big, big);
	/* paged: each token's row at its slot's block row, the same bytes */
	{
		struct paged pg = paged_open(NULL, 4 * (size_t)kr, ctx, T, pos0);
		struct coli_gpu_mla_prep b = a;
		float *pool = xmalloc(4 * (size_t)kr * 64 * pg.nbs);
		size_t bad = 0;

		b.cache = (float *)(uintptr_t)pg.pool, b.posp = NULL, b.pos0 = 0;
		b.rows = (const int *)(uintptr_t)pg.rows, b.tab = (const int *)(uintptr_t)pg.tab;
		b.nbs = pg.nbs;
		if (coli_gpu_mla_prep(g_gpu, &b) || coli_gpu_sync(g_gpu)) {
			printf("  mla_prep T=%d paged: launch failed\n", T);
			return 1;
		}
		download(pool, pg.pool, 4 * (size_t)kr * 64 * pg.nbs);
		for (int t = 0; t < T; t++) {
			const int p = pos0 + t, blk = pg.htab[pg.nbs + p / 32];

			bad += memcmp(pool + ((size_t)blk * 32 + p % 32) * kr,
			              cache + (size_t)p * kr, 4 * (size_t)kr) != 0;
		}
		printf("  mla_prep T=%d paged: %zu of %d rows not the contiguous bytes%s\n", T, bad,
		       T, bad ? "  FAIL" : "");
		err = bad ? INFINITY : err;
		paged_close(&pg);
		free(pool);
	}
	for (int i = 0; i < 8; i++)
		coli_gpu_free(g_gpu, d[i]);
	free(kva), free(q), free(w), free(fr), free(cache), free(qn), free(qrow);
	return !(err <= 1e-6 * big);
}

int main(void)
{
	static const int cases[][6] = {
	    /* T, pos0, nh, dk, dv, ld */
	    {1, 0, 4, 80, 64, 80},
	    {1, 5, 4, 80, 64, 80},
	    {3, 40, 20, 80, 64, 84},
	    {17, 0, 4, 80, 64, 80},
	    {51, 0, 4, 80, 64, 80}, /* the fixture's prompt: four decode launches */
	    {1, 4095, 128, 576, 512, 576},
	    {2, 1000, 64, 576, 512, 576},
	    {1, 31, 128, 576, 512, 576},
	    {1, 9000, 16, 576, 512, 576},
	    /* the decode kernel's range: one position, batches up to 16, 40k */
	    {1, 0, 16, 576, 512, 576},
	    {16, 20, 16, 80, 64, 80},
	    {16, 300, 128, 576, 512, 576},
	    {8, 2000, 64, 576, 512, 576},
	    {5, 700, 100, 576, 512, 576},
	    {1, 39999, 128, 576, 512, 576},
	    /* prefill: 40 queries in one launch; at 128 heads in launches of
	     * 7 (the partials the scratch holds) */
	    {40, 100, 16, 576, 512, 576},
	    {20, 3000, 128, 576, 512, 576},
	};
	int rc = ptx_test_open();

	if (rc)
		return rc;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
		for (int kt = 0; kt < 3; kt++)
			rc |= run_case(cases[c][0], cases[c][1], cases[c][2], cases[c][3],
			               cases[c][4], cases[c][5], kt);
	rc |= prep_case(1, 0, 4, 32, 16, 64, 1.0f);        /* the tiny fixtures */
	rc |= prep_case(5, 300, 4, 32, 16, 64, 1.1386f);   /* YaRN's factor */
	rc |= prep_case(2, 4000, 128, 128, 64, 512, 1.0f); /* DeepSeek-V3 */
	return rc ? 1 : 0;
}
