/*
 * tests/ptx/kv_types.c — the GPU kernels over a typed KV cache (--kv-type
 * bf16, q8, and q8 keys with bf16 values: ptx/attn/kv_rows.cuh) against the CPU
 * (exit 77 without a GPU). The cache rows are made on the host by cpu/kvq.c
 * (coli_kv_row_store), so both sides read the same stored values:
 *
 *   attention   coli_gpu_attention_kv against coli_attention_head_kv on the
 *               same rows, within the fp32 attention test's bound (2e-5
 *               absolute on values in [-1, 1], growing as sqrt(n) past 10000
 *               positions: tests/ptx/dense_kernels), on the tensor-core
 *               kernel (hd 64 and 128, decode and prefill, groups of 1, 6,
 *               8, 12 and 16), the chunk kernel (hd 256) and the tiles
 *               kernel (hd 96), gpt-oss's sinks and sliding window too; the
 *               position read from device memory for a longer span gives
 *               the same bytes, and a prefill batch the bytes of its queries
 *               launched as decode steps; the output quantized in the same
 *               launch (for a quantized o projection) is coli_act_quantize's
 *               of its floats, which keep the bound;
 *   stores      coli_gpu_qk_rope_store_kv into a typed cache gives the bytes
 *               coli_kv_row_store makes of the rows the fp32 launch wrote
 *               (store_only: of the inputs), q8's scales and rints included;
 *   MLA         coli_gpu_mla_attention over typed latent rows (q8: c_kv's and
 *               k_pe's scales) against coli_attention_group_kv (x3: 2e-5 of
 *               the largest output, as tests/ptx/mla), and coli_mla_prep's
 *               typed row against coli_kv_row_store of its fp32 row;
 *   rows        several sequences in one launch (COLI_GPU_ROWS' table over a
 *               paged cache of 4 slots, its block table a scramble of the
 *               blocks: ptx/attn/kv_rows.cuh kv_at): the bytes of each row alone
 *               at its slot of a contiguous cache.
 *
 * Outputs are poisoned (NaN) before each launch.
 */
#include <math.h>
#include <string.h>

#include "ptx_test.h"

static const char *const k_mode[4] = {"f32", "bf16", "q8", "q8,bf16"};
static const int k_kt[4] = {0, 1, 2, 2}, k_vt[4] = {0, 1, 2, 1};

/* rows [n][nv] of f32 -> typed rows of type t (segments of seg), row bytes *rb */
static void *typed(const float *x, int n, int nv, int seg, int t, size_t *rb)
{
	char *out;

	*rb = coli_kv_row_bytes(t, nv, (nv + seg - 1) / seg);
	out = xmalloc(*rb * n);
	for (int p = 0; p < n; p++)
		coli_kv_row_store(t, out + *rb * p, x + (size_t)p * nv, nv, seg);
	return out;
}

static double max_err(const float *got, const float *want, size_t n)
{
	double e = 0;

	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]);

		e = d > e || d != d ? (d != d ? INFINITY : d) : e;
	}
	return e;
}

/* window, sinks: gpt-oss's sliding window (0: none) and a sink a head (1:
 * drawn in [-4, 4], as the scores), against coli_attention_head_kv over the
 * window's rows with the sink. */
static int attention_case(int mode, int T, int pos0, int nh, int nkv, int hd, int window, int sinks)
{
	const int n = pos0 + T, kvd = nkv * hd, group = nh / nkv, kt = k_kt[mode], vt = k_vt[mode];
	const size_t qn = (size_t)T * nh * hd;
	const float scale = 1.0f / sqrtf((float)hd), tol = 2e-5f * fmaxf(1.0f, sqrtf(n / 1e4f));
	float *q = xmalloc(4 * qn), *K = xmalloc(4 * (size_t)n * kvd),
	      *V = xmalloc(4 * (size_t)n * kvd);
	float *want = xmalloc(4 * qn), *got = xmalloc(4 * qn), *got2 = xmalloc(4 * qn);
	float *sc = xmalloc(4 * (size_t)n), *sk = xmalloc(4 * (size_t)nh);
	size_t kb, vb;
	void *Kt, *Vt;
	uint64_t dq, dk, dv, dout, dpos, dsk = 0;
	double e;
	int rc = 0;

	for (size_t i = 0; i < qn; i++)
		q[i] = 4.0f * frand();
	for (size_t i = 0; i < (size_t)n * kvd; i++)
		K[i] = frand(), V[i] = frand();
	for (int h = 0; h < nh; h++)
		sk[h] = 4.0f * frand();
	Kt = typed(K, n, kvd, hd, kt, &kb);
	Vt = typed(V, n, kvd, hd, vt, &vb);
	for (int t = 0; t < T; t++)
		for (int h = 0; h < nh; h++) {
			const int g = h / group;
			const size_t ko = (size_t)g * hd * (kt == 0 ? 4 : kt == 1 ? 2 : 1);
			const size_t vo = (size_t)g * hd * (vt == 0 ? 4 : vt == 1 ? 2 : 1);
			const int so = ((kvd + 3) & ~3) + 4 * g;
			const int nt = pos0 + t + 1, k0 = window && nt > window ? nt - window : 0;
			struct coli_kv_rows kr = {(char *)Kt + ko + (size_t)k0 * kb,
			                          kb,
			                          kt,
			                          (int)(so - ko),
			                          hd,
			                          NULL,
			                          0,
			                          0};
			struct coli_kv_rows vr = {(char *)Vt + vo + (size_t)k0 * vb,
			                          vb,
			                          vt,
			                          (int)(so - vo),
			                          hd,
			                          NULL,
			                          0,
			                          0};

			coli_attention_head_kv(q + ((size_t)t * nh + h) * hd, &kr, &vr, nt - k0, hd,
			                       hd, scale, sinks ? sk[h] : -INFINITY, sc,
			                       want + ((size_t)t * nh + h) * hd);
		}
	if (sinks)
		dsk = dev_copy(sk, 4 * (size_t)nh);
	dq = dev_copy(q, 4 * qn);
	dk = dev_copy(Kt, kb * n);
	dv = dev_copy(Vt, vb * n);
	dout = dev_poison(4 * qn);
	if (coli_gpu_attention_kv(g_gpu, dq, dk, dv, dout, T, pos0, 0, 0, nh, nkv, hd, scale, 0, 0,
	                          0, kt, vt, dsk, window, 0, 0, 0)) {
		printf("  FAIL attention %s T=%d pos0=%d: launch failed\n", k_mode[mode], T, pos0);
		return 1;
	}
	download(got, dout, 4 * qn);
	e = max_err(got, want, qn);
	printf("  attention %-7s T=%-3d n=%-5d nh=%-2d nkv=%-2d hd=%-3d%s%s max err %.2e (limit "
	       "%.1e)\n",
	       k_mode[mode], T, n, nh, nkv, hd, window ? " window" : "", sinks ? " sinks" : "", e,
	       tol);
	rc |= !(e <= tol);
	/* the same launch writing the output quantized too (a quantized o
	 * projection reads it: core/forward/attn_dev.c): the same floats, and
	 * the rows coli_act_quantize makes of them */
	if (qn % 32 == 0) {
		const struct dev_act aq = dev_act_poison(qn);
		int qbad;

		coli_gpu_free(g_gpu, dout);
		dout = dev_poison(4 * qn);
		if (coli_gpu_attention_kv(g_gpu, dq, dk, dv, dout, T, pos0, 0, 0, nh, nkv, hd,
		                          scale, aq.q, aq.d, aq.qsum, kt, vt, dsk, window, 0, 0,
		                          0)) {
			printf("  FAIL attention %s T=%d pos0=%d quantized: launch failed\n",
			       k_mode[mode], T, pos0);
			return 1;
		}
		download(got2, dout, 4 * qn);
		e = max_err(got2, want, qn);
		qbad = dev_act_differs(aq, got2);
		if (!(e <= tol) || qbad) {
			printf("  FAIL attention %s T=%d pos0=%d nh=%d nkv=%d hd=%d, the output "
			       "quantized too: max err %.2e, the quantized rows %s "
			       "coli_act_quantize's\n",
			       k_mode[mode], T, pos0, nh, nkv, hd, e, qbad ? "are not" : "are");
			rc = 1;
		}
		dev_act_free(aq);
	}
	/* the position from device memory, the grid split for a longer span */
	dpos = dev_copy(&pos0, sizeof(pos0));
	coli_gpu_free(g_gpu, dout);
	dout = dev_poison(4 * qn);
	if (coli_gpu_attention_kv(g_gpu, dq, dk, dv, dout, T, pos0 + 1, dpos, n + 3000, nh, nkv, hd,
	                          scale, 0, 0, 0, kt, vt, dsk, window, 0, 0, 0)) {
		printf("  FAIL attention %s from memory: launch failed\n", k_mode[mode]);
		return 1;
	}
	download(got2, dout, 4 * qn);
	e = max_err(got2, want, qn);
	if (!(e <= tol)) {
		printf("  FAIL attention %s T=%d: position from memory: max err %.2e\n",
		       k_mode[mode], T, e);
		rc = 1;
	}
	/* a decode step's fold of its splits on the last CTA alone and shared by
	 * three (shares of unlike sizes) gives the bytes of the default's shares
	 * (coli_gpu_attn_ways) */
	for (int w = 1; T < 64 && w <= 3; w += 2) {
		coli_gpu_free(g_gpu, dout);
		dout = dev_poison(4 * qn);
		coli_gpu_attn_ways(g_gpu, w);
		rc |= coli_gpu_attention_kv(g_gpu, dq, dk, dv, dout, T, pos0, 0, 0, nh, nkv, hd,
		                            scale, 0, 0, 0, kt, vt, dsk, window, 0, 0, 0) != 0;
		coli_gpu_attn_ways(g_gpu, 0);
		download(got2, dout, 4 * qn);
		size_t bad = bytes_differ(got, got2, qn);

		if (bad) {
			printf(
			    "  FAIL attention %s T=%d pos0=%d: the fold on %d CTA(s): %zu of %zu "
			    "values differ from the default's\n",
			    k_mode[mode], T, pos0, w, bad, qn);
			rc = 1;
		}
	}
	/* a prefill batch (hd 64, 128; 64 queries or more), on coli_attn_tcp's
	 * rows (got, the default) and on coli_attn_tc's columns, gives each
	 * query the bits of its decode form (a query a CTA) */
	if (T >= 64 && (hd == 64 || hd == 128)) {
		static const int level[2] = {COLI_GPU_PREFILL_OFF, COLI_GPU_PREFILL_COLS};
		float *dec = xmalloc(4 * qn);

		for (int lv = 0; lv < 2; lv++) {
			coli_gpu_free(g_gpu, dout);
			dout = dev_poison(4 * qn);
			coli_gpu_attn_prefill(g_gpu, level[lv]);
			rc |= coli_gpu_attention_kv(g_gpu, dq, dk, dv, dout, T, pos0, 0, 0, nh, nkv,
			                            hd, scale, 0, 0, 0, kt, vt, dsk, window, 0, 0,
			                            0) != 0;
			coli_gpu_attn_prefill(g_gpu, COLI_GPU_PREFILL_ROWS);
			download(lv ? got2 : dec, dout, 4 * qn);
		}
		size_t bad = bytes_differ(got, dec, qn), badc = bytes_differ(got2, dec, qn);

		if (bad || badc) {
			printf("  FAIL attention %s T=%d pos0=%d: of %zu values, %zu (rows) and %zu "
			       "(columns) differ from the decode form's\n",
			       k_mode[mode], T, pos0, qn, bad, badc);
			rc = 1;
		}
		free(dec);
	}
	coli_gpu_free(g_gpu, dq), coli_gpu_free(g_gpu, dk), coli_gpu_free(g_gpu, dv);
	coli_gpu_free(g_gpu, dout), coli_gpu_free(g_gpu, dpos);
	if (dsk)
		coli_gpu_free(g_gpu, dsk);
	free(q), free(K), free(V), free(want), free(got), free(got2), free(sc), free(Kt), free(Vt);
	free(sk);
	return rc;
}

/* qk_rope_store into typed rows: the bytes of coli_kv_row_store of the
 * fp32 launch's rows (store_only: of the inputs) */
static int store_case(int mode, int T, int pos0, int nh, int nkv, int hd, int store_only)
{
	const int kvd = nkv * hd, ctx = pos0 + T, kt = k_kt[mode], vt = k_vt[mode];
	const size_t qn = (size_t)T * nh * hd, kn = (size_t)T * kvd;
	float *q = xmalloc(4 * qn), *k = xmalloc(4 * kn), *v = xmalloc(4 * kn);
	float *w = xmalloc(4 * hd), *fr = xmalloc(4 * hd / 2), *kf = xmalloc(4 * (size_t)ctx * kvd);
	size_t kb = coli_kv_row_bytes(kt, kvd, nkv), vb = coli_kv_row_bytes(vt, kvd, nkv);
	char *gk = xmalloc(kb * ctx), *gv = xmalloc(vb * ctx), *wk = xmalloc(kb), *wv = xmalloc(vb);
	uint64_t d[10];
	int rc = 0, bad = 0;

	for (size_t i = 0; i < qn; i++)
		q[i] = 2.0f * frand();
	for (size_t i = 0; i < kn; i++)
		k[i] = 3.0f * frand(), v[i] = frand();
	k[0] = 0.0f; /* a zero among the values; and a row of zeros below (scale 0) */
	if (nkv > 1)
		memset(v + hd, 0, 4 * (size_t)hd);
	for (int i = 0; i < hd; i++)
		w[i] = 1.0f + 0.3f * frand();
	for (int i = 0; i < hd / 2; i++)
		fr[i] = powf(10000.0f, -2.0f * i / hd);
	d[0] = dev_copy(q, 4 * qn), d[1] = dev_copy(k, 4 * kn), d[2] = dev_copy(v, 4 * kn);
	d[3] = dev_copy(w, 4 * hd), d[4] = dev_copy(fr, 4 * hd / 2), d[5] = dev_copy(&pos0, 4);
	d[6] = dev_poison(4 * (size_t)ctx * kvd), d[7] = dev_poison(4 * (size_t)ctx * kvd);
	d[8] = dev_poison(kb * ctx), d[9] = dev_poison(vb * ctx);
	if (!store_only) { /* the fp32 rows (q is roped in place: a copy of it) */
		uint64_t q2 = dev_copy(q, 4 * qn);

		rc = coli_gpu_qk_rope_store(g_gpu, q2, d[1], d[2], d[3], d[3], 1e-6f, T, nh, nkv,
		                            hd, pos0, d[5], d[4], d[6], d[7]);
		coli_gpu_free(g_gpu, q2);
	}
	rc =
	    rc ? rc
	       : coli_gpu_qk_rope_store_kv(g_gpu, d[0], d[1], d[2], store_only ? 0 : d[3],
	                                   store_only ? 0 : d[3], 1e-6f, T, nh, nkv, hd, pos0, d[5],
	                                   d[4], d[8], d[9], kt, vt, store_only, 1.0f, 0, 0, 0);
	if (rc || coli_gpu_sync(g_gpu)) {
		printf("  FAIL qk_rope_store %s: launch failed\n", k_mode[mode]);
		return 1;
	}
	download(kf, d[6], 4 * (size_t)ctx * kvd);
	download(gk, d[8], kb * ctx);
	download(gv, d[9], vb * ctx);
	for (int t = 0; t < T; t++) {
		const float *kr = store_only ? k + (size_t)t * kvd : kf + (size_t)(pos0 + t) * kvd;

		coli_kv_row_store(kt, wk, kr, kvd, hd);
		coli_kv_row_store(vt, wv, v + (size_t)t * kvd, kvd, hd);
		bad += memcmp(wk, gk + kb * (pos0 + t), kb) != 0;
		bad += memcmp(wv, gv + vb * (pos0 + t), vb) != 0;
	}
	printf("  qk_rope_store %-7s T=%d nkv=%d hd=%d%s: %d of %d rows differ from "
	       "coli_kv_row_store's bytes\n",
	       k_mode[mode], T, nkv, hd, store_only ? " store_only" : "", bad, 2 * T);
	for (int i = 0; i < 10; i++)
		coli_gpu_free(g_gpu, d[i]);
	free(q), free(k), free(v), free(w), free(fr), free(kf), free(gk), free(gv), free(wk),
	    free(wv);
	return bad != 0;
}

/* Several sequences in one launch (rows: COLI_GPU_ROWS, a row's position
 * and its slot): qk_rope_store and attention over a paged cache of 4 slots
 * (blocks of 32 rows handed out by a scramble: slot s's block j is block
 * (97 (s nbs + j) + 13) mod S nbs) give each row the bytes it gets alone at
 * its slot of a contiguous cache (a launch of T = 1 at its position, the
 * cache pointers at its slot, no table), q's rotation and the stored K rows
 * (block for block) included. Rows 1 and 2 are one run (consecutive
 * positions of slot 2); row 3 a long context. A slot appears in one run at
 * most (a batch's rule), so no row stores where another of its launch reads. */
static int rows_case(int mode, int nh, int nkv, int hd, int window, int sinks)
{
	enum { T = 5, S = 4, SPAN = 6016, NBS = SPAN / 32, NB = S * NBS };
	static const int slot[T] = {0, 2, 2, 1, 3}, pos[T] = {700, 33, 34, 5000, 1};
	const int kvd = nkv * hd, kt = k_kt[mode], vt = k_vt[mode], qd = nh * hd;
	const size_t kb = coli_kv_row_bytes(kt, kvd, nkv), vb = coli_kv_row_bytes(vt, kvd, nkv);
	const size_t qn = (size_t)T * qd, kn = (size_t)T * kvd, rows_n = (size_t)S * SPAN;
	const float scale = 1.0f / sqrtf((float)hd);
	float *x = xmalloc(4 * (size_t)SPAN * kvd), *q = xmalloc(4 * qn), *k = xmalloc(4 * kn);
	float *v = xmalloc(4 * kn), *fr = xmalloc(4 * hd / 2), *sk = xmalloc(4 * (size_t)nh);
	float *got = xmalloc(4 * qn), *one = xmalloc(4 * qn), *q1 = xmalloc(4 * qn);
	float *q2 = xmalloc(4 * qn);
	char *c1 = xmalloc(kb * rows_n), *c2 = xmalloc(kb * rows_n);
	int rt[T * COLI_GPU_ROWS], bad = 0, rc = 0, *tab = xmalloc(sizeof(int) * NB);
	uint64_t dk[2], dv[2], dq[2], dkk, dvv, dfr, drows, dout, dsk = 0, dtab;

	for (int b = 0; b < NB; b++) /* 97 and S * NBS = 752 are coprime: a permutation */
		tab[b] = (97 * b + 13) % NB;

	for (int i = 0; i < hd / 2; i++)
		fr[i] = powf(10000.0f, -2.0f * i / hd);
	for (int h = 0; h < nh; h++)
		sk[h] = 4.0f * frand();
	for (size_t i = 0; i < qn; i++)
		q[i] = 4.0f * frand();
	for (size_t i = 0; i < kn; i++)
		k[i] = frand(), v[i] = frand();
	for (int t = 0; t < T; t++)
		rt[COLI_GPU_ROWS * t] = pos[t], rt[COLI_GPU_ROWS * t + 1] = slot[t];
	/* two caches of the same random rows: paged for the table's launches,
	 * contiguous for the rows alone */
	for (int c = 0; c < 2; c++) {
		dk[c] = dev_poison(kb * rows_n), dv[c] = dev_poison(vb * rows_n);
		dq[c] = dev_copy(q, 4 * qn);
	}
	for (int sl = 0; sl < S; sl++) {
		void *Kt, *Vt;
		size_t b1, b2;

		for (size_t i = 0; i < (size_t)SPAN * kvd; i++)
			x[i] = frand();
		Kt = typed(x, SPAN, kvd, hd, kt, &b1);
		Vt = typed(x, SPAN, kvd, hd, vt, &b2); /* (the same values: it does not matter) */
		coli_gpu_upload(g_gpu, dk[1] + sl * SPAN * kb, Kt, kb * SPAN);
		coli_gpu_upload(g_gpu, dv[1] + sl * SPAN * vb, Vt, vb * SPAN);
		for (int j = 0; j < NBS; j++) {
			const size_t at = (size_t)tab[sl * NBS + j] * 32;

			coli_gpu_upload(g_gpu, dk[0] + at * kb, (char *)Kt + (size_t)j * 32 * kb,
			                32 * kb);
			coli_gpu_upload(g_gpu, dv[0] + at * vb, (char *)Vt + (size_t)j * 32 * vb,
			                32 * vb);
		}
		free(Kt), free(Vt);
	}
	dkk = dev_copy(k, 4 * kn), dvv = dev_copy(v, 4 * kn), dfr = dev_copy(fr, 4 * hd / 2);
	drows = dev_copy(rt, sizeof(rt));
	dtab = dev_copy(tab, sizeof(int) * NB);
	dsk = sinks ? dev_copy(sk, 4 * (size_t)nh) : 0;
	dout = dev_poison(4 * qn);
	/* the table: rows stored, then attended, each launch once */
	rc |= coli_gpu_qk_rope_store_kv(g_gpu, dq[0], dkk, dvv, 0, 0, 1e-6f, T, nh, nkv, hd, 0, 0,
	                                dfr, dk[0], dv[0], kt, vt, 0, 1.0f, drows, dtab, NBS);
	rc |= coli_gpu_attention_kv(g_gpu, dq[0], dk[0], dv[0], dout, T, 5001, 0, SPAN, nh, nkv, hd,
	                            scale, 0, 0, 0, kt, vt, dsk, window, drows, dtab, NBS);
	download(got, dout, 4 * qn);
	download(q1, dq[0], 4 * qn);
	/* alone: a launch a row at its slot (the run's second row after its first) */
	for (int t = 0; !rc && t < T; t++) {
		size_t o = (size_t)t * qd * 4;
		uint64_t kc = dk[1] + slot[t] * SPAN * kb, vc = dv[1] + slot[t] * SPAN * vb;

		rc |= coli_gpu_qk_rope_store_kv(
		    g_gpu, dq[1] + o, dkk + (size_t)t * kvd * 4, dvv + (size_t)t * kvd * 4, 0, 0,
		    1e-6f, 1, nh, nkv, hd, pos[t], 0, dfr, kc, vc, kt, vt, 0, 1.0f, 0, 0, 0);
		rc |= coli_gpu_attention_kv(g_gpu, dq[1] + o, kc, vc, dout + o, 1, pos[t], 0, 0, nh,
		                            nkv, hd, scale, 0, 0, 0, kt, vt, dsk, window, 0, 0, 0);
	}
	download(one, dout, 4 * qn);
	download(q2, dq[1], 4 * qn);
	if (rc || coli_gpu_sync(g_gpu)) {
		printf("  FAIL rows %s: launch failed\n", k_mode[mode]);
		return 1;
	}
	download(c1, dk[0], kb * rows_n);
	download(c2, dk[1], kb * rows_n);
	for (int b = 0, diff = 0; b < NB; b++) /* block b of the contiguous cache, paged */
		if (!diff &&
		    memcmp(c1 + (size_t)tab[b] * 32 * kb, c2 + (size_t)b * 32 * kb, 32 * kb))
			bad += diff = 1;
	bad += memcmp(q1, q2, 4 * qn) != 0;
	for (int t = 0; t < T; t++)
		bad += memcmp(got + (size_t)t * qd, one + (size_t)t * qd, 4 * (size_t)qd) != 0;
	printf("  rows %-7s T=%d over %d slots nh=%d nkv=%d hd=%d%s%s: %d of %d differ from the "
	       "rows alone (K cache, q, %d outputs)\n",
	       k_mode[mode], T, S, nh, nkv, hd, window ? " window" : "", sinks ? " sinks" : "", bad,
	       T + 2, T);
	for (int c = 0; c < 2; c++) {
		coli_gpu_free(g_gpu, dk[c]), coli_gpu_free(g_gpu, dv[c]);
		coli_gpu_free(g_gpu, dq[c]);
	}
	coli_gpu_free(g_gpu, dkk), coli_gpu_free(g_gpu, dvv), coli_gpu_free(g_gpu, dfr);
	coli_gpu_free(g_gpu, drows), coli_gpu_free(g_gpu, dout), coli_gpu_free(g_gpu, dtab);
	if (dsk)
		coli_gpu_free(g_gpu, dsk);
	free(tab);
	free(x), free(q), free(k), free(v), free(fr), free(sk), free(got), free(one), free(q1);
	free(q2), free(c1), free(c2);
	return bad != 0;
}

/* MLA over typed latent rows [n][dk] (q8: scales of dv and of dk - dv) */
static int mla_case(int kt, int T, int pos0, int nh, int dk, int dv)
{
	const int n = pos0 + T;
	const size_t nq = (size_t)T * nh * dk, no = (size_t)T * nh * dv;
	float *q = xmalloc(4 * nq), *C = xmalloc(4 * (size_t)n * dk), *o = xmalloc(4 * no);
	float *want = xmalloc(4 * no), *sc = xmalloc(4 * (size_t)n * 8);
	const float scale = 1.0f / sqrtf((float)dk);
	size_t rb;
	void *Ct;
	uint64_t dq, dc, dout;
	double big = 0, e;
	int rc;

	for (size_t i = 0; i < nq; i++)
		q[i] = 2.5f * frand();
	for (size_t i = 0; i < (size_t)n * dk; i++)
		C[i] = 1.7f * frand();
	Ct = typed(C, n, dk, dv, kt, &rb);
	{
		struct coli_kv_rows r = {Ct, rb, kt, (dk + 3) & ~3, dv, NULL, 0, 0};

		for (int t = 0; t < T; t++)
			coli_attention_group_kv(q + (size_t)t * nh * dk, nh, &r, &r, pos0 + t + 1,
			                        dk, dv, scale, NULL, sc,
			                        want + (size_t)t * nh * dv);
	}
	for (size_t i = 0; i < no; i++)
		big = fabs(want[i]) > big ? fabs(want[i]) : big;
	dq = dev_copy(q, 4 * nq), dc = dev_copy(Ct, rb * n), dout = dev_poison(4 * no);
	rc = coli_gpu_mla_attention(g_gpu, &(struct coli_gpu_mla){.q = dq,
	                                                          .cache = dc,
	                                                          .out = dout,
	                                                          .T = T,
	                                                          .pos0 = pos0,
	                                                          .nh = nh,
	                                                          .dk = dk,
	                                                          .dv = dv,
	                                                          .ld = dk,
	                                                          .scale = scale,
	                                                          .x3 = 1,
	                                                          .kt = kt});
	if (rc) {
		printf("  FAIL mla %s: launch failed (%d)\n", k_mode[kt], rc);
		return 1;
	}
	download(o, dout, 4 * no);
	e = max_err(o, want, no);
	printf("  mla %-4s T=%d n=%d nh=%d dk=%d dv=%d max err %.2e of %.2f (limit 2e-5)\n",
	       k_mode[kt], T, n, nh, dk, dv, e / big, big);
	coli_gpu_free(g_gpu, dq), coli_gpu_free(g_gpu, dc), coli_gpu_free(g_gpu, dout);
	free(q), free(C), free(o), free(want), free(sc), free(Ct);
	return !(e <= 2e-5 * big);
}

/* coli_mla_prep's typed row: coli_kv_row_store of the fp32 launch's row */
static int mla_prep_case(int kt, int T, int pos0, int nh, int np, int r, int kl)
{
	const int kr = kl + r, hd = np + r, ctx = pos0 + T;
	float *kva = xmalloc(4 * (size_t)T * kr), *q = xmalloc(4 * (size_t)T * nh * hd);
	float *w = xmalloc(4 * (size_t)kl), *fr = xmalloc(4 * (size_t)r / 2);
	float *f32 = xmalloc(4 * (size_t)ctx * kr);
	size_t rb = coli_kv_row_bytes(kt, kr, (kr + kl - 1) / kl);
	char *got = xmalloc(rb * ctx), *want = xmalloc(rb);
	uint64_t d[9];
	int bad = 0;

	for (size_t i = 0; i < (size_t)T * kr; i++)
		kva[i] = 2.0f * frand();
	for (size_t i = 0; i < (size_t)T * nh * hd; i++)
		q[i] = frand();
	for (int i = 0; i < kl; i++)
		w[i] = 1.0f + 0.5f * frand();
	for (int i = 0; i < r / 2; i++)
		fr[i] = powf(10000.0f, -2.0f * i / r);
	d[0] = dev_copy(kva, 4 * (size_t)T * kr), d[1] = dev_copy(q, 4 * (size_t)T * nh * hd);
	d[2] = dev_copy(w, 4 * (size_t)kl), d[3] = dev_copy(fr, 4 * (size_t)r / 2);
	d[4] = dev_poison(4 * (size_t)ctx * kr), d[5] = dev_poison(rb * ctx);
	d[6] = dev_poison(4 * (size_t)nh * T * np), d[7] = dev_poison(4 * (size_t)T * nh * kr);
	d[8] = dev_copy(&pos0, 4);
	for (int typed_run = 0; typed_run < 2; typed_run++) {
		const struct coli_gpu_mla_prep a = {
		    .kva = (const float *)(uintptr_t)d[0],
		    .q = (const float *)(uintptr_t)d[1],
		    .w = (const float *)(uintptr_t)d[2],
		    .inv_freq = (const float *)(uintptr_t)d[3],
		    .posp = (const int *)(uintptr_t)d[8],
		    .cache = (void *)(uintptr_t)d[typed_run ? 5 : 4],
		    .qn = (float *)(uintptr_t)d[6],
		    .qrow = (float *)(uintptr_t)d[7],
		    .T = T,
		    .nh = nh,
		    .np = np,
		    .r = r,
		    .kl = kl,
		    .eps = 1e-6f,
		    .f = 1.0f,
		    .kt = typed_run ? kt : 0,
		};
		if (coli_gpu_mla_prep(g_gpu, &a) || coli_gpu_sync(g_gpu)) {
			printf("  FAIL mla_prep %s: launch failed\n", k_mode[kt]);
			return 1;
		}
	}
	download(f32, d[4], 4 * (size_t)ctx * kr);
	download(got, d[5], rb * ctx);
	for (int t = 0; t < T; t++) {
		coli_kv_row_store(kt, want, f32 + (size_t)(pos0 + t) * kr, kr, kl);
		bad += memcmp(want, got + rb * (pos0 + t), rb) != 0;
	}
	printf("  mla_prep %-4s T=%d kl=%d r=%d: %d of %d rows differ from coli_kv_row_store's "
	       "bytes\n",
	       k_mode[kt], T, kl, r, bad, T);
	for (int i = 0; i < 9; i++)
		coli_gpu_free(g_gpu, d[i]);
	free(kva), free(q), free(w), free(fr), free(f32), free(got), free(want);
	return bad != 0;
}

int main(void)
{
	static const int att[][7] = {
	    /* T, pos0, nh, nkv, hd, window, sinks: chunks (decode), prefill hd 128
	     * and 64, tiles, hd 256; then gpt-oss's (hd 64, groups of 8, a
	     * sliding window of 128 with sinks): decode and prefill */
	    {1, 4999, 32, 4, 128, 0, 0},  {4, 12285, 32, 4, 128, 0, 0},
	    {64, 300, 32, 4, 128, 0, 0},  {200, 100, 16, 4, 64, 0, 0},
	    {3, 517, 8, 8, 96, 0, 0},     {2, 1000, 16, 2, 256, 0, 0},
	    {1, 4999, 64, 8, 64, 128, 1}, {200, 100, 64, 8, 64, 128, 1},
	    /* prefill after a long cache (several chunks a split): the chunk
	     * kernel's bits */
	    {64, 5000, 32, 4, 128, 0, 0}, {70, 3000, 16, 4, 64, 0, 0},
	    /* prompts of several splits a query (a split of 4 chunks: folds),
	     * a tile's last queries past the batch */
	    {300, 0, 32, 4, 128, 0, 0},   {150, 600, 64, 4, 128, 0, 0},
	    /* the other families' groups on the tensor-core kernel, decode at
	     * short and long reach and a prefill: 16 (qwen3-235b), 12 (GLM-4.5),
	     * 6 (MiniMax-M2: two padding columns a tile), 1 (OLMoE); decode at
	     * 32k (66 splits on an H100: the fold shared, arrival_share) */
	    {1, 9000, 64, 4, 128, 0, 0},  {1, 700, 64, 4, 128, 0, 0},
	    {80, 400, 64, 4, 128, 0, 0},  {1, 9000, 96, 8, 128, 0, 0},
	    {80, 400, 96, 8, 128, 0, 0},  {1, 700, 48, 8, 128, 0, 0},
	    {80, 400, 48, 8, 128, 0, 0},  {1, 9000, 16, 16, 128, 0, 0},
	    {80, 400, 16, 16, 128, 0, 0}, {1, 32767, 32, 4, 128, 0, 0},
	    /* the demo model's shape (hd 64, groups of 4): a prompt of 54 tokens
	     * from the start (below the whole-prompt kernel's 64), a decode step
	     * after it, and a prompt of 111 from the start (the whole-prompt
	     * kernel: tools/ref/dense_dev_diff.sh's text) */
	    {54, 0, 8, 2, 64, 0, 0},      {1, 54, 8, 2, 64, 0, 0},
	    {111, 0, 8, 2, 64, 0, 0},
	};
	int rc = ptx_test_open();

	if (rc)
		return rc;
	for (int m = 1; m < 4; m++) {
		for (size_t c = 0; c < sizeof(att) / sizeof(att[0]); c++)
			rc |= attention_case(m, att[c][0], att[c][1], att[c][2], att[c][3],
			                     att[c][4], att[c][5], att[c][6]);
		rc |= store_case(m, 3, 40, 8, 4, 128, 0);
		rc |= store_case(m, 2, 7, 4, 2, 64, 1);
		rc |= rows_case(m, 32, 4, 128, 0, 0);
		rc |= rows_case(m, 64, 8, 64, 128, 1); /* gpt-oss's window and sinks */
	}
	rc |= rows_case(0, 16, 2, 256, 0, 0); /* f32 */
	for (int kt = 1; kt < 3; kt++) {
		rc |= mla_case(kt, 1, 5, 4, 80, 64);        /* the tiny fixtures */
		rc |= mla_case(kt, 3, 40, 20, 80, 64);      /* a batch */
		rc |= mla_case(kt, 1, 4095, 128, 576, 512); /* DeepSeek-V3 */
		rc |= mla_prep_case(kt, 2, 30, 4, 32, 16, 64);
		rc |= mla_prep_case(kt, 1, 4000, 128, 128, 64, 512);
	}
	printf("%s\n", rc ? "FAIL" : "ok");
	return rc ? 1 : 0;
}
