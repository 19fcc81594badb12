/*
 * tests/core/fixture_greedy.c — greedy decoding against transformers, and
 * prefill == decode.
 *
 * For every fixture (bf16): prefill the prompt, then decode greedily one
 * token at a time over the KV cache; the ids must equal transformers' greedy
 * continuation up to the first step whose reference top-1/top-2 margin is
 * below 1e-2 (beyond it, rounding may legitimately pick the other token).
 * Also, for q8: the logits of the last prompt position computed by one batched
 * prefill must be byte-identical to those computed by feeding the prompt one
 * token at a time (same kernels, same order: the batch must not change bits).
 */
#include "fixture_util.h"

static coli_engine_t *open_model(const char *path)
{
	struct coli_opts o;
	coli_engine_t *e = NULL;
	char err[512];

	coli_opts_init(&o, NULL, 0);
	snprintf(o.kv_type, sizeof(o.kv_type), "f32"); /* the exact cache vs transformers */
	o.threads = 2;
	if (coli_engine_open(path, &o, &e, err, sizeof(err)))
		fprintf(stderr, "open %s: %s\n", path, err);
	return e;
}

static int greedy(const char *name, const char *path)
{
	int n, ng, nm, checked = 0, rc = 0;
	int *ids = fx_read_ints(name, "ids.txt", &n);
	int *ref = fx_read_ints(name, "greedy.txt", &ng);
	float *margin = fx_read_margins(name, &nm);
	coli_engine_t *e = open_model(path);
	const struct coli_model_config *c;
	float *logits;

	if (!ids || !ref || !margin || !e || nm < ng)
		return 1;
	c = coli_engine_config(e);
	logits = malloc(sizeof(float) * c->vocab);
	if (coli_engine_forward(e, ids, n, logits, 0))
		return 1;
	for (int i = 0; i < ng; i++) {
		int id = fx_argmax(logits, c->vocab);

		if (margin[i] < 1e-2f)
			break;
		if (id != ref[i]) {
			printf("%s: greedy step %d: coli %d, transformers %d (margin %.3g)\n", name,
			       i, id, ref[i], margin[i]);
			rc = 1;
			break;
		}
		checked++;
		if (coli_engine_forward(e, &id, 1, logits, 0))
			return 1;
	}
	printf("%-20s greedy: %d/%d steps identical (stopped at margin < 1e-2 or end)\n", name,
	       checked, ng);
	free(logits), free(ids), free(ref), free(margin);
	coli_engine_close(e);
	return rc;
}

static int prefill_vs_decode(const char *name, const char *path)
{
	int n;
	int *ids = fx_read_ints(name, "ids.txt", &n);
	coli_engine_t *a = open_model(path), *b = open_model(path);
	int V, rc = 0;
	float *la, *lb;

	if (!ids || !a || !b)
		return 1;
	V = coli_engine_config(a)->vocab;
	la = malloc(sizeof(float) * V);
	lb = malloc(sizeof(float) * V);
	if (coli_engine_forward(a, ids, n, la, 0))
		return 1;
	for (int i = 0; i < n; i++)
		if (coli_engine_forward(b, ids + i, 1, lb, 0))
			return 1;
	if (memcmp(la, lb, sizeof(float) * V)) {
		printf("%s: batched prefill and token-by-token logits differ\n", name);
		rc = 1;
	}
	free(la), free(lb), free(ids);
	coli_engine_close(a);
	coli_engine_close(b);
	return rc;
}

int main(void)
{
	char names[MAX_FIXTURES][64];
	int nf = fx_list(names, MAX_FIXTURES), rc = 0;

	if (nf == 0) {
		printf("no fixtures with references under %s\n", fx_root());
		return 1;
	}
	for (int f = 0; f < nf; f++) {
		char p16[8192], p8[8192];

		if (fx_convert(names[f], COLI_DTYPE_BF16, fx_tmpdir(), p16, sizeof(p16)) ||
		    fx_convert(names[f], COLI_DTYPE_Q8_0, fx_tmpdir(), p8, sizeof(p8)))
			return 1;
		rc |= greedy(names[f], p16);
		rc |= prefill_vs_decode(names[f], p8);
	}
	return rc;
}
