/*
 * tests/core/no_const_h2d.c — no decode-time host-to-device copy of a
 * constant (DESIGN.md invariant). With the dense part and every expert on a
 * device (the simulated one here, GPU 0 too when present), weights — norms,
 * routers, attention, lm_head, expert slabs — are uploaded once at open
 * (h2d_const_bytes); decoding then moves only token ids and activations.
 * Asserted: h2d_const_bytes does not change while decoding, the per-token
 * traffic stays under what the activations alone can need, and every MoE
 * layer's outputs stay on the device (moe_layers_on_dense).
 */
#include "fixture_util.h"
#include "ptx/ptx.h"

static int check(const char *path, const char *gpu)
{
	struct coli_opts o;
	struct coli_engine_stats s0, s1;
	coli_engine_t *e;
	char err[512];
	int ids[4] = {1, 2, 3, 4}, id = 5, steps = 24, rc = 0;
	const struct coli_model_config *c;
	float *logits;
	double per_tok, cap;
	int n_moe = 0;

	coli_opts_init(&o, NULL, 0);
	o.threads = 2;
	snprintf(o.gpu, sizeof(o.gpu), "%s", gpu);
	coli_opts_set(&o, "--stream", "off", NULL, 0);
	if (coli_engine_open(path, &o, &e, err, sizeof(err))) {
		printf("open (gpu %s): %s\n", gpu, err);
		return 1;
	}
	c = coli_engine_config(e);
	logits = malloc(sizeof(float) * c->vocab);
	coli_engine_forward(e, ids, 4, logits, 0);
	coli_engine_stats(e, &s0);
	for (int i = 0; i < steps && !rc; i++)
		rc = coli_engine_forward(e, &id, 1, logits, 0);
	coli_engine_stats(e, &s1);
	for (int l = 0; l < c->n_layers; l++)
		n_moe += c->is_moe_layer[l];
	per_tok = (double)(s1.h2d_bytes - s0.h2d_bytes) / steps;
	/* per MoE layer: the routed pairs' activations (f32 worst case) up to the
	 * expert device and their outputs back to the dense device, plus ids */
	cap = (double)n_moe * c->top_k * (2.0 * c->hidden * 4 + 64) + 64;
	printf("gpu %-4s dense on device %d: weights uploaded at open %.2f MB, during %d decode "
	       "steps %llu bytes; activations %.0f bytes/token (cap %.0f)\n",
	       gpu, s1.dense_on_device, s0.h2d_const_bytes / 1e6, steps,
	       (unsigned long long)(s1.h2d_const_bytes - s0.h2d_const_bytes), per_tok, cap);
	if (rc || !s1.dense_on_device || s0.h2d_const_bytes == 0 ||
	    s1.h2d_const_bytes != s0.h2d_const_bytes || per_tok <= 0 || per_tok > cap) {
		printf(
		    "FAIL: constants crossed the bus while decoding, or the dense part is not on "
		    "the device\n");
		rc = 1;
	}
	/* every expert resident on the dense part's device: no MoE output leaves it */
	if (s1.moe_layers_on_dense - s0.moe_layers_on_dense != (uint64_t)steps * n_moe) {
		printf("FAIL: %llu of %d MoE layer calls kept their outputs on the device\n",
		       (unsigned long long)(s1.moe_layers_on_dense - s0.moe_layers_on_dense),
		       steps * n_moe);
		rc = 1;
	}
	free(logits);
	coli_engine_close(e);
	return rc;
}

int main(void)
{
	char path[8192];
	const char *why;
	int rc;

	if (fx_convert("qwen2_moe", COLI_DTYPE_Q8_0, fx_tmpdir(), path, sizeof(path)))
		return 1;
	rc = check(path, "sim");
	if (coli_ptx_probe(&why) > 0)
		rc |= check(path, "0");
	return rc;
}
