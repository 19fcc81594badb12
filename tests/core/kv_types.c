/*
 * tests/core/kv_types.c — the KV cache's types (--kv-type) against the fp32
 * cache, on every fixture converted to bf16, teacher-forced over its prompt:
 *
 *   bf16    max|Δlogit| <= BF16_TOL * max|f32 logit| over the random fixtures
 *   q8      max|Δlogit| <= Q8_TOL * max|f32 logit|, top-1 agreement >= 97%
 *   q8,bf16 (keys q8, values bf16) within q8's bound
 *
 * The trained demo model is printed apart (it amplifies rounding: its bf16
 * weights alone move logits by 3% against fp32, tests/core/fixture_logits);
 * its figures are reported. Also the bytes: coli_engine_stats' kv_token_bytes
 * must be the layout docs/engine.md states (fp32 4 bytes a value, bf16 2,
 * q8 1 and a 4-byte scale a kv head, MLA's latent row two scales) times the
 * layers, and kv_bytes that times ctx.
 */
#include <math.h>

#include "fixture_util.h"

#define CTX      256
#define BF16_TOL 2e-3
#define Q8_TOL   5e-3

static const char *const k_types[] = {"f32", "bf16", "q8", "q8,bf16"};
#define N_TYPES 4

/* Expected bytes of one token, all layers: the layout as documented. */
static uint64_t want_bytes(const struct coli_model_config *c, int kt, int vt)
{
	int n = c->kv_lora ? c->kv_lora + c->rope_dim : c->n_kv_heads * c->head_dim;
	int nseg = c->kv_lora ? 2 : c->n_kv_heads;
	uint64_t row[3] = {4ull * n, 2ull * n, ((n + 3ull) & ~3ull) + 4ull * nseg};

	return (uint64_t)c->n_layers * (row[kt] + (c->kv_lora ? 0 : row[vt]));
}

static int run(const char *path, int type, const int *ids, int n, float *out)
{
	static const int kt[N_TYPES] = {0, 1, 2, 2}, vt[N_TYPES] = {0, 1, 2, 1};
	struct coli_engine_stats st;
	struct coli_opts o;
	coli_engine_t *e;
	char err[512];
	int rc;

	coli_opts_init(&o, NULL, 0);
	o.threads = 2;
	o.ctx = CTX;
	snprintf(o.kv_type, sizeof(o.kv_type), "%s", k_types[type]);
	rc = coli_engine_open(path, &o, &e, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "open %s: %s\n", path, err);
		return rc;
	}
	rc = coli_engine_forward(e, ids, n, out, 1);
	coli_engine_stats(e, &st);
	{
		uint64_t w = want_bytes(coli_engine_config(e), kt[type], vt[type]);

		if (st.kv_token_bytes != w || st.kv_bytes != w * CTX) {
			printf("%s --kv-type %s: kv_token_bytes %llu, kv_bytes %llu: want %llu, "
			       "%llu\n",
			       path, k_types[type], (unsigned long long)st.kv_token_bytes,
			       (unsigned long long)st.kv_bytes, (unsigned long long)w,
			       (unsigned long long)w * CTX);
			rc = -1;
		}
	}
	coli_engine_close(e);
	return rc;
}

int main(void)
{
	char names[MAX_FIXTURES][64];
	int nf = fx_list(names, MAX_FIXTURES), fails = 0;
	long agree[N_TYPES] = {0}, total = 0;
	double worst[N_TYPES] = {0};

	if (nf == 0) {
		printf("no fixtures under %s\n", fx_root());
		return 1;
	}
	for (int f = 0; f < nf; f++) {
		char path[8192], line[512];
		int n, V, demo = !strcmp(names[f], "demo"), len;
		int *ids = fx_read_ints(names[f], "ids.txt", &n);
		size_t nref;
		float *ref = fx_read_floats(names[f], "logits.f32", &nref), *l[N_TYPES];

		if (!ids || !ref || n == 0 || nref % n || n > CTX) {
			printf("%s: unreadable references\n", names[f]);
			return 1;
		}
		V = (int)(nref / n);
		if (fx_convert(names[f], COLI_DTYPE_BF16, fx_tmpdir(), path, sizeof(path)))
			return 1;
		len = snprintf(line, sizeof(line), "%-20s", names[f]);
		for (int k = 0; k < N_TYPES; k++) {
			l[k] = malloc(nref * sizeof(float));
			for (size_t i = 0; i < nref; i++)
				l[k][i] = NAN; /* poison */
			if (run(path, k, ids, n, l[k]))
				return 1;
		}
		for (int k = 1; k < N_TYPES; k++) {
			double mr = 0, md = 0;
			long a = 0;

			for (int t = 0; t < n; t++) {
				for (int v = 0; v < V; v++) {
					double r = l[0][(size_t)t * V + v],
					       d = fabs(l[k][(size_t)t * V + v] - r);

					mr = fabs(r) > mr ? fabs(r) : mr;
					md = d > md || d != d ? (d != d ? INFINITY : d) : md;
				}
				a += fx_argmax(l[k] + (size_t)t * V, V) ==
				     fx_argmax(l[0] + (size_t)t * V, V);
			}
			len += snprintf(line + len, sizeof(line) - len, "  %s %.2g (top-1 %ld/%d)",
			                k_types[k], md / mr, a, n);
			if (demo)
				continue;
			worst[k] = md / mr > worst[k] ? md / mr : worst[k];
			agree[k] += a;
			if (!(md / mr <= (k == 1 ? BF16_TOL : Q8_TOL))) {
				printf("%s --kv-type %s: max|d| %.3g > %g * max|f32| %.3g\n",
				       names[f], k_types[k], md, k == 1 ? BF16_TOL : Q8_TOL, mr);
				fails++;
			}
		}
		if (!demo)
			total += n;
		printf("%s%s\n", line, demo ? " (reported)" : "");
		for (int k = 0; k < N_TYPES; k++)
			free(l[k]);
		free(ref), free(ids);
	}
	for (int k = 1; k < N_TYPES; k++) {
		printf("random fixtures, --kv-type %s vs f32: worst max|d|/max|logit| %.2g, top-1 "
		       "%ld/%ld\n",
		       k_types[k], worst[k], agree[k], total);
		if (k > 1 && agree[k] < 0.97 * total) {
			printf("FAIL: --kv-type %s top-1 agreement below 97%%\n", k_types[k]);
			fails++;
		}
	}
	if (fails)
		printf("FAIL: %d\n", fails);
	return fails ? 1 : 0;
}
