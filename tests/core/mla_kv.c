/*
 * tests/core/mla_kv.c — an MLA model's KV cache holds one latent row a token
 * and layer: coli_engine_stats' kv_bytes is n_layers * P * (kv_lora +
 * rope_dim) * 4 for the deepseek_v3 fixtures (with and without q_lora), and
 * still 2 * n_layers * P * n_kv_heads * head_dim * 4 (keys and values) for
 * a GQA fixture, P the pool's positions: ctx (300) in whole blocks of 32
 * (core/forward/kv.h), 320. Also the MLA config as coli convert wrote it: the ranks, the
 * query/key head (nope + rope), and YaRN read from the Hub's rope_scaling.
 */
#include "fixture_util.h"

#define CTX 300
#define POS ((CTX + 31) / 32 * 32) /* the pool's positions: whole blocks */

static int check(const char *name, int mla)
{
	struct coli_engine_stats st;
	const struct coli_model_config *c;
	struct coli_opts o;
	coli_engine_t *e = NULL;
	char path[8192], err[512];
	uint64_t want;
	int rc = 0;

	if (fx_convert(name, COLI_DTYPE_BF16, fx_tmpdir(), path, sizeof(path)))
		return 1;
	coli_opts_init(&o, NULL, 0);
	snprintf(o.kv_type, sizeof(o.kv_type),
	         "f32"); /* fp32 rows (tests/core/kv_types: the others) */
	o.threads = 2;
	o.ctx = CTX;
	if (coli_engine_open(path, &o, &e, err, sizeof(err))) {
		fprintf(stderr, "open %s: %s\n", path, err);
		return 1;
	}
	c = coli_engine_config(e);
	coli_engine_stats(e, &st);
	want = mla ? (uint64_t)c->n_layers * POS * (c->kv_lora + c->rope_dim) * 4
	           : 2ull * c->n_layers * POS * c->n_kv_heads * c->head_dim * 4;
	printf("%-20s kv_lora %d rope %d head_dim %d: kv_bytes %llu, want %llu\n", name, c->kv_lora,
	       c->rope_dim, c->head_dim, (unsigned long long)st.kv_bytes, (unsigned long long)want);
	if (st.kv_bytes != want || !mla != !c->kv_lora)
		rc = 1;
	if (mla && (c->kv_lora != 64 || c->rope_dim != 16 || c->qk_nope != 32 || c->v_head != 32 ||
	            c->head_dim != 48 || c->n_kv_heads != c->n_heads)) {
		printf("%s: MLA shapes read wrong\n", name);
		rc = 1;
	}
	if (mla == 1 && (c->q_lora != 32 || c->rope_factor != 4.0f || c->rope_orig_ctx != 128 ||
	                 c->yarn_mscale != 1.0f || c->yarn_mscale_all != 0.8f)) {
		printf("%s: q_lora %d or YaRN (factor %g, original %d, mscale %g/%g) read wrong\n",
		       name, c->q_lora, c->rope_factor, c->rope_orig_ctx, c->yarn_mscale,
		       c->yarn_mscale_all);
		rc = 1;
	}
	if (mla == 2 && (c->q_lora != 0 || c->rope_factor != 1.0f)) {
		printf("%s: q_lora %d, rope_factor %g: want 0, 1\n", name, c->q_lora,
		       c->rope_factor);
		rc = 1;
	}
	coli_engine_close(e);
	return rc;
}

int main(void)
{
	char names[MAX_FIXTURES][64];
	int nf = fx_list(names, MAX_FIXTURES), have = 0, rc = 0;

	for (int f = 0; f < nf; f++)
		have +=
		    !strcmp(names[f], "deepseek_v3") || !strcmp(names[f], "deepseek_v3_noqlora");
	if (have < 2) {
		printf("the deepseek_v3 fixtures are not under %s\n", fx_root());
		return 77;
	}
	rc |= check("deepseek_v3", 1);
	rc |= check("deepseek_v3_noqlora", 2);
	rc |= check("qwen3_moe", 0);
	return rc;
}
