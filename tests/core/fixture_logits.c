/*
 * tests/core/fixture_logits.c — the CPU forward pass against transformers.
 *
 * For every fixture (every architecture): convert to bf16, run the prompt
 * teacher-forced, and require max|Δlogit| <= 1e-3 * max|ref logit| at every
 * position against transformers' float32 logits. Then q8: top-1 agreement
 * with the bf16 engine >= 99% over the random fixtures' positions. The trained
 * demo model (tests/fixtures/demo -> models/demo) is printed apart: it is
 * more sensitive to rounding — transformers itself with Q8_0-rounded weights
 * agrees with bf16 on 97.9% of its positions (docs/quant.md) — so its figure
 * is reported, not held to the random fixtures' bound. q4: KL(bf16 || q4)
 * and top-1 agreement are printed, not asserted. gpt-oss's fixtures (the
 * gpt_oss ones) run bf16 once more with the dense part on the simulated
 * device (its sinks, windows and biases: device ops since 2026-12-02), held
 * to the same bound; tests/core/placement holds it byte-identical to the CPU.
 */
#include <math.h>

#include "fixture_util.h"

/* gpu: --gpu (NULL: the default); *on_dev (or NULL): the dense part ran on
 * a device */
static int run_logits_on(const char *path, const char *gpu, const int *ids, int n, float *out,
                         int *on_dev)
{
	struct coli_opts o;
	coli_engine_t *e;
	char err[512];
	int rc;

	coli_opts_init(&o, NULL, 0);
	snprintf(o.kv_type, sizeof(o.kv_type), "f32"); /* the exact cache vs transformers */
	if (gpu)
		snprintf(o.gpu, sizeof(o.gpu), "%s", gpu);
	o.threads = 2;
	rc = coli_engine_open(path, &o, &e, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "open %s: %s\n", path, err);
		return rc;
	}
	rc = coli_engine_forward(e, ids, n, out, 1);
	if (on_dev) {
		struct coli_engine_stats st;

		coli_engine_stats(e, &st);
		*on_dev = st.dense_on_device;
	}
	coli_engine_close(e);
	return rc;
}

static int run_logits(const char *path, const int *ids, int n, float *out)
{
	return run_logits_on(path, NULL, ids, n, out, NULL);
}

/* max over positions of max|a - ref| / max|ref| (NaN: infinite) */
static double worst_ratio(const float *a, const float *ref, int n, int V)
{
	double w = 0;

	for (int t = 0; t < n; t++) {
		double mr = 0, md = 0;

		for (int v = 0; v < V; v++) {
			double r = ref[(size_t)t * V + v], d = a[(size_t)t * V + v] - r;

			mr = fabs(r) > mr ? fabs(r) : mr;
			md = fabs(d) > md || d != d ? (d != d ? INFINITY : fabs(d)) : md;
		}
		w = md / mr > w || md != md ? md / mr : w;
	}
	return w;
}

/* KL(p || q) of softmax(a), softmax(b) in nats. */
static double kl(const float *a, const float *b, int n)
{
	double ma = a[0], mb = b[0], sa = 0, sb = 0, k = 0;

	for (int i = 1; i < n; i++) {
		ma = a[i] > ma ? a[i] : ma;
		mb = b[i] > mb ? b[i] : mb;
	}
	for (int i = 0; i < n; i++) {
		sa += exp(a[i] - ma);
		sb += exp(b[i] - mb);
	}
	for (int i = 0; i < n; i++) {
		double lp = a[i] - ma - log(sa), lq = b[i] - mb - log(sb);

		k += exp(lp) * (lp - lq);
	}
	return k;
}

int main(void)
{
	char names[MAX_FIXTURES][64];
	int nf = fx_list(names, MAX_FIXTURES), fails = 0;
	long q8_agree = 0, q4_agree = 0, total = 0, d8 = 0, d4 = 0, dn = 0;
	double q4_kl = 0;

	if (nf == 0) {
		printf("no fixtures with references under %s\n", fx_root());
		return 1;
	}
	for (int f = 0; f < nf; f++) {
		char p16[8192], p8[8192], p4[8192];
		int n, V;
		int *ids = fx_read_ints(names[f], "ids.txt", &n);
		size_t nref;
		float *ref = fx_read_floats(names[f], "logits.f32", &nref);
		float *l16, *l8, *l4;
		double maxref = 0, maxd = 0;

		if (!ids || !ref || n == 0 || nref % n) {
			printf("%s: unreadable references\n", names[f]);
			return 1;
		}
		V = (int)(nref / n);
		if (fx_convert(names[f], COLI_DTYPE_BF16, fx_tmpdir(), p16, sizeof(p16)) ||
		    fx_convert(names[f], COLI_DTYPE_Q8_0, fx_tmpdir(), p8, sizeof(p8)) ||
		    fx_convert(names[f], COLI_DTYPE_Q4_0, fx_tmpdir(), p4, sizeof(p4)))
			return 1;
		l16 = malloc(nref * sizeof(float));
		l8 = malloc(nref * sizeof(float));
		l4 = malloc(nref * sizeof(float));
		for (size_t i = 0; i < nref; i++)
			l16[i] = l8[i] = l4[i] = NAN; /* poison */
		if (run_logits(p16, ids, n, l16) || run_logits(p8, ids, n, l8) ||
		    run_logits(p4, ids, n, l4))
			return 1;
		for (int t = 0; t < n; t++) {
			double mr = 0, md = 0;

			for (int v = 0; v < V; v++) {
				double r = ref[(size_t)t * V + v], d = l16[(size_t)t * V + v] - r;

				mr = fabs(r) > mr ? fabs(r) : mr;
				md = fabs(d) > md || d != d ? (d != d ? INFINITY : fabs(d)) : md;
			}
			if (!(md <= 1e-3 * mr)) {
				if (!fails)
					printf("%s: position %d: max|d| %.3g > 1e-3 * %.3g\n",
					       names[f], t, md, mr);
				fails++;
			}
			maxref = mr > maxref ? mr : maxref;
			maxd = md > maxd ? md : maxd;
			if (!strcmp(names[f], "demo")) {
				d8 += fx_argmax(l8 + (size_t)t * V, V) ==
				      fx_argmax(l16 + (size_t)t * V, V);
				d4 += fx_argmax(l4 + (size_t)t * V, V) ==
				      fx_argmax(l16 + (size_t)t * V, V);
				dn++;
				continue;
			}
			q8_agree +=
			    fx_argmax(l8 + (size_t)t * V, V) == fx_argmax(l16 + (size_t)t * V, V);
			q4_agree +=
			    fx_argmax(l4 + (size_t)t * V, V) == fx_argmax(l16 + (size_t)t * V, V);
			q4_kl += kl(l16 + (size_t)t * V, l4 + (size_t)t * V, V);
			total++;
		}
		printf(
		    "%-20s bf16 vs transformers: %d positions, max|d| %.3g, max|ref| %.3g, ratio "
		    "%.2g\n",
		    names[f], n, maxd, maxref, maxd / maxref);
		if (!strncmp(names[f], "gpt_oss", 7)) { /* the dense part on the sim */
			int on = 0;
			double w;

			for (size_t i = 0; i < nref; i++)
				l8[i] = NAN;
			if (run_logits_on(p16, "sim", ids, n, l8, &on))
				return 1;
			w = worst_ratio(l8, ref, n, V);
			printf("%-20s bf16, dense part on sim: worst position ratio %.2g%s\n",
			       names[f], w, on ? "" : " (the dense part stayed on the CPU)");
			if (!on || !(w <= 1e-3)) {
				printf("FAIL: %s with the dense part on sim\n", names[f]);
				fails++;
			}
		}
		free(l16), free(l8), free(l4), free(ref), free(ids);
	}
	printf("random fixtures: q8 top-1 agreement with bf16: %ld/%ld = %.2f%%\n", q8_agree, total,
	       100.0 * q8_agree / total);
	printf("q4 top-1 agreement with bf16: %ld/%ld = %.2f%%, mean KL %.4g nats\n", q4_agree,
	       total, 100.0 * q4_agree / total, q4_kl / total);
	if (dn)
		printf("demo model: q8 top-1 agreement %ld/%ld, q4 %ld/%ld (reported)\n", d8, dn,
		       d4, dn);
	if (fails) {
		printf("FAIL: %d positions outside 1e-3 relative\n", fails);
		return 1;
	}
	if (q8_agree * 100 < total * 99) {
		printf("FAIL: q8 top-1 agreement below 99%%\n");
		return 1;
	}
	return 0;
}
