/*
 * tests/core/forward_argmax.c — coli_engine_forward_argmax gives the token
 * greedy decoding would pick from coli_engine_forward's logits.
 *
 * For the qwen3_moe fixture (q8 and bf16): two engines on the same device,
 * one returning logits (the argmax taken here with coli_argmax, as
 * coli_sampler_pick at temperature 0), one returning the greedy id only; fed
 * the same 6-token prompt and then the first engine's choices for 48 steps.
 * Every step's id must match. Devices: the CPU ("off"), the simulated device
 * holding the dense part ("sim": the device-side argmax op), and GPU 0 when
 * this machine has one (the coli_argmax kernel after the lm_head, only the
 * index downloaded). A third engine takes each step's logits in place
 * (coli_engine_forward_last): byte-identical to the first's. Plus the
 * argument checks: next == NULL and logits == NULL are -EINVAL. Then every
 * row's greedy id at once (a verification of drafts: coli_engine_forward_
 * argmax_all, and with --parallel 2 the batch step's coli_engine_step_argmax)
 * against coli_argmax of the twin engine's rows, chunks of 1 to 8 tokens.
 */
#include <errno.h>

#include "cpu/cpu.h"
#include "fixture_util.h"
#include "ptx/ptx.h"

#define STEPS 48

static coli_engine_t *open_engine(const char *path, const char *gpu, int parallel)
{
	struct coli_opts o;
	coli_engine_t *e = NULL;
	char err[512];

	coli_opts_init(&o, NULL, 0);
	o.threads = 2;
	o.parallel = parallel;
	snprintf(o.gpu, sizeof(o.gpu), "%s", gpu);
	coli_opts_set(&o, "--usage", "off", NULL, 0);
	if (coli_engine_open(path, &o, &e, err, sizeof(err)))
		printf("open %s (gpu %s): %s\n", path, gpu, err);
	return e;
}

static int compare(const char *what, const char *path, const char *gpu)
{
	coli_engine_t *a = open_engine(path, gpu, 1), *b = open_engine(path, gpu, 1);
	coli_engine_t *c = open_engine(path, gpu, 1);
	struct coli_engine_stats st;
	int ids[6] = {1, 2, 3, 4, 5, 6}, want, got = -1, V, differ = 0, rc = 0, dense;
	int in_place = 0; /* steps whose in-place logits differ */
	const float *lc = NULL;
	float *logits;

	if (!a || !b || !c)
		return 1;
	V = coli_engine_config(a)->vocab;
	logits = malloc(sizeof(float) * V);
	if (!logits)
		return 1;
	rc |= coli_engine_forward(a, ids, 6, logits, 0);
	rc |= coli_engine_forward_argmax(b, ids, 6, &got);
	rc |= coli_engine_forward_last(c, ids, 6, &lc);
	want = coli_argmax(logits, V);
	differ += got != want;
	in_place += !lc || memcmp(lc, logits, sizeof(float) * V) != 0;
	for (int i = 0; i < STEPS && !rc; i++) {
		int id = want;

		got = -1;
		rc |= coli_engine_forward(a, &id, 1, logits, 0);
		rc |= coli_engine_forward_argmax(b, &id, 1, &got);
		rc |= coli_engine_forward_last(c, &id, 1, &lc);
		want = coli_argmax(logits, V);
		differ += got != want;
		in_place += !lc || memcmp(lc, logits, sizeof(float) * V) != 0;
	}
	coli_engine_stats(b, &st);
	dense = st.dense_on_device;
	printf("%-28s gpu %-3s dense on a device %d: %d of %d greedy ids differ, %d in-place "
	       "logits\n",
	       what, gpu, dense, differ, STEPS + 1, in_place);
	if (rc || differ || in_place) {
		printf("FAIL: %s\n", rc       ? "forward failed"
		                     : differ ? "the greedy ids differ"
		                              : "the in-place logits differ");
		rc = 1;
	}
	/* the device cases must have used the device's argmax */
	if (strcmp(gpu, "off") && !dense) {
		printf("FAIL: gpu %s: the dense part is not on the device\n", gpu);
		rc = 1;
	}
	if (coli_engine_forward_argmax(b, ids, 1, NULL) != -EINVAL) {
		printf("FAIL: next == NULL was accepted\n");
		rc = 1;
	}
	if (coli_engine_forward_last(c, ids, 1, NULL) != -EINVAL) {
		printf("FAIL: logits == NULL was accepted\n");
		rc = 1;
	}
	free(logits);
	coli_engine_close(a);
	coli_engine_close(b);
	coli_engine_close(c);
	return rc;
}

/* Every row's greedy id (coli_engine_forward_argmax_all; with --parallel 2 a
 * slot's coli_engine_step_argmax, the batch path) against coli_argmax of the
 * same rows' logits from a twin engine: a 6-token prompt, then 8 chunks of 1
 * to 8 tokens (a verification's shapes), each starting at the last row's id. */
static int compare_rows(const char *what, const char *path, const char *gpu, int parallel)
{
	coli_engine_t *a = open_engine(path, gpu, parallel), *b = open_engine(path, gpu, parallel);
	int ids[8] = {1, 2, 3, 4, 5, 6}, nx[8], n = 6, V, differ = 0, rows = 0, rc = 0;
	int sa = 0, sb = 0;
	float *la, *lb;

	if (!a || !b)
		return 1;
	V = coli_engine_config(a)->vocab;
	la = malloc(sizeof(float) * V * 8), lb = malloc(sizeof(float) * V * 8);
	if (!la || !lb)
		return 1;
	if (parallel > 1) {
		sa = coli_engine_seq_open(a, ids, n, NULL),
		sb = coli_engine_seq_open(b, ids, n, NULL);
		rc |= sa < 0 || sb < 0;
	}
	for (int c = 0; c < 9 && !rc; c++) {
		const struct coli_run ra = {.slot = sa, .n = n, .ids = ids, .logits = 2};
		const struct coli_run rb = {.slot = sb, .n = n, .ids = ids, .logits = 2};

		for (int j = 0; j < n; j++)
			nx[j] = -1;
		if (parallel > 1) {
			rc |=
			    coli_engine_step(a, &(struct coli_batch){.n_runs = 1, .runs = &ra}, la);
			rc |= coli_engine_step_argmax(
			    b, &(struct coli_batch){.n_runs = 1, .runs = &rb}, lb, nx);
		} else {
			rc |= coli_engine_forward(a, ids, n, la, 1);
			rc |= coli_engine_forward_argmax_all(b, ids, n, lb, nx);
		}
		for (int j = 0; j < n; j++)
			differ += nx[j] != coli_argmax(la + (size_t)j * V, V), rows++;
		ids[0] = coli_argmax(la + (size_t)(n - 1) * V, V);
		n = 1 + c % 8;
		for (int j = 1; j < n; j++)
			ids[j] = (ids[j - 1] * 7 + 3) % V;
	}
	printf("%-28s gpu %-3s parallel %d: %d of %d rows' greedy ids differ\n", what, gpu,
	       parallel, differ, rows);
	if (rc || differ) {
		printf("FAIL: %s\n", rc ? "forward failed" : "the rows' greedy ids differ");
		rc = 1;
	}
	if (coli_engine_forward_argmax_all(b, ids, 1, NULL, nx) != -EINVAL ||
	    coli_engine_forward_argmax_all(b, ids, 1, lb, NULL) != -EINVAL) {
		printf("FAIL: a NULL buffer or next was accepted\n");
		rc = 1;
	}
	free(la), free(lb);
	coli_engine_close(a);
	coli_engine_close(b);
	return rc;
}

int main(void)
{
	static const enum coli_dtype quants[] = {COLI_DTYPE_Q8_0, COLI_DTYPE_BF16};
	const char *why, *devs[3] = {"off", "sim", "0"};
	int n_devs = coli_ptx_probe(&why) > 0 ? 3 : 2, rc = 0;

	if (n_devs == 2)
		printf("no GPU (%s): CPU and simulated device only\n", why);
	for (size_t q = 0; q < sizeof(quants) / sizeof(quants[0]); q++) {
		char path[8192], what[64];

		if (fx_convert("qwen3_moe", quants[q], fx_tmpdir(), path, sizeof(path)))
			return 1;
		snprintf(what, sizeof(what), "qwen3_moe %s", coli_dtype_name(quants[q]));
		for (int d = 0; d < n_devs; d++) {
			rc |= compare(what, path, devs[d]);
			rc |= compare_rows(what, path, devs[d], 1);
			rc |= compare_rows(what, path, devs[d], 2);
		}
	}
	return rc;
}
