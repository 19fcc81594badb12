/*
 * tests/bench/shapes.c — every synthetic shape (core/model/synth.c) yields a config
 * that survives coli_config_format -> coli_config_parse unchanged, has the
 * hyperparameters docs/shapes.md lists, and lays out as q4/q8/bf16 slabs.
 * Writes nothing: the real shapes are far too big for a test, so this is
 * how their configs are checked; tests/bench/make_model.sh writes the tiny one,
 * two-layer glm ones and tiny-mla (deepseek-v3's and kimi-k2's code path at
 * the width of tests/fixtures/deepseek_v3).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"
#include "io/io.h"

static const struct {
	const char *name, *arch;
	int layers, hidden, heads, kv, hd, vocab, experts, top_k, inter, ntp, qk;
	float theta;
} g_want[] = {
    {"qwen3-30b-a3b", "qwen3_moe", 48, 2048, 32, 4, 128, 151936, 128, 8, 768, 1, 1, 1e6f},
    {"qwen3-235b-a22b", "qwen3_moe", 94, 4096, 64, 4, 128, 151936, 128, 8, 1536, 1, 1, 1e6f},
    {"mixtral-8x7b", "mixtral", 32, 4096, 32, 8, 128, 32000, 8, 2, 14336, 1, 0, 1e6f},
    {"olmoe-1b-7b", "olmoe", 16, 2048, 16, 16, 128, 50304, 64, 8, 1024, 0, 2, 1e4f},
    {"tiny", "qwen3_moe", 2, 256, 4, 2, 64, 1024, 16, 4, 128, 1, 1, 1e6f},
    {"glm-4.5", "glm4_moe", 92, 5120, 96, 8, 128, 151552, 160, 8, 1536, 1, 1, 1e6f},
    {"glm-4.5-air", "glm4_moe", 46, 4096, 96, 8, 128, 151552, 128, 8, 1408, 1, 0, 1e6f},
    {"minimax-m2", "minimax_m2", 62, 3072, 48, 8, 128, 200064, 256, 8, 1536, 1, 2, 5e6f},
    {"deepseek-v3", "deepseek_v3", 61, 7168, 128, 128, 192, 129280, 256, 8, 2048, 1, 0, 1e4f},
    {"kimi-k2", "deepseek_v3", 61, 7168, 64, 64, 192, 163840, 384, 8, 2048, 1, 0, 5e4f},
    {"tiny-mla", "deepseek_v3", 3, 64, 4, 4, 48, 1024, 16, 3, 32, 1, 0, 2e4f},
    {"gpt-oss-120b", "gpt_oss", 36, 2880, 64, 8, 64, 201088, 128, 4, 2880, 1, 0, 1.5e5f},
    {"gpt-oss-20b", "gpt_oss", 24, 2880, 64, 8, 64, 201088, 32, 4, 2880, 1, 0, 1.5e5f},
};

/* gpt_oss's fields (docs/shapes.md, fifth table): 1 when c (shape name) differs
 * from them; every other shape has none of them */
static int oss_differs(const char *name, const struct coli_model_config *c)
{
	int sliding = 0;

	for (int l = 0; l < c->n_layers; l++)
		sliding += c->is_sliding_layer[l] && l % 2 == 0 && c->is_moe_layer[l];
	if (strncmp(name, "gpt-oss", 7))
		return c->sliding_window || c->attn_sinks || c->attn_o_bias || c->expert_bias ||
		       c->ffn_act != COLI_ACT_SWIGLU || !c->yarn_truncate;
	return c->sliding_window != 128 || sliding != (c->n_layers + 1) / 2 || !c->attn_sinks ||
	       !c->qkv_bias || !c->attn_o_bias || !c->expert_bias || !c->router_bias ||
	       c->router_kind != COLI_ROUTER_SOFTMAX || c->ffn_act != COLI_ACT_SWIGLU_OAI ||
	       c->act_alpha != 1.702f || c->act_limit != 7.0f || c->rope_factor != 32.0f ||
	       c->rope_orig_ctx != 4096 || c->yarn_truncate || c->yarn_beta_fast != 32.0f ||
	       c->yarn_beta_slow != 1.0f || c->norm_eps != 1e-5f || c->max_ctx != 131072 ||
	       c->bos != 199998 || c->n_eos != 3 || c->eos[0] != 200002 || c->eos[1] != 199999 ||
	       c->eos[2] != 200012;
}

/* glm4_moe's and minimax_m2's fields (docs/shapes.md, second and third
 * tables); the other shapes have the defaults: no dense layer, no shared
 * expert, softmax routing */
static const struct {
	const char *name;
	int dense, dense_inter, shared_inter, bias, rope_dim, n_group, topk_group, n_eos;
	float scale, eps;
} g_glm[] = {
    {"glm-4.5", 3, 12288, 1536, 1, 64, 1, 1, 3, 2.5f, 1e-5f},
    {"glm-4.5-air", 1, 10944, 1408, 1, 64, 1, 1, 3, 1.0f, 1e-5f},
    {"minimax-m2", 0, 0, 0, 0, 64, 1, 1, 1, 1.0f, 1e-6f},
    {"deepseek-v3", 3, 18432, 2048, 0, 64, 8, 4, 1, 2.5f, 1e-6f},
    {"kimi-k2", 1, 18432, 2048, 0, 64, 1, 1, 1, 2.827f, 1e-6f},
    {"tiny-mla", 1, 96, 32, 0, 16, 4, 2, 1, 2.5f, 1e-6f},
};

/* deepseek_v3's MLA and YaRN fields (docs/shapes.md, fourth table) and
 * bos / eos; every other shape has none of them */
static const struct {
	const char *name;
	int q_lora, kv_lora, nope, v, orig, bos, eos;
	float factor, beta_fast, beta_slow, mscale, mscale_all;
} g_mla[] = {
    {"deepseek-v3", 1536, 512, 128, 128, 4096, 0, 1, 40.0f, 32.0f, 1.0f, 1.0f, 1.0f},
    {"kimi-k2", 1536, 512, 128, 128, 4096, 163584, 163585, 32.0f, 1.0f, 1.0f, 1.0f, 1.0f},
    {"tiny-mla", 32, 64, 32, 32, 128, -1, 1023, 4.0f, 32.0f, 1.0f, 1.0f, 0.8f},
};

/* The MLA / YaRN fields of c (shape name) differ from g_mla: 1. */
static int mla_differs(const char *name, const struct coli_model_config *c)
{
	for (size_t i = 0; i < sizeof(g_mla) / sizeof(g_mla[0]); i++) {
		if (strcmp(name, g_mla[i].name))
			continue;
		return c->q_lora != g_mla[i].q_lora || c->kv_lora != g_mla[i].kv_lora ||
		       c->qk_nope != g_mla[i].nope || c->v_head != g_mla[i].v ||
		       c->head_dim != c->qk_nope + c->rope_dim || c->n_kv_heads != c->n_heads ||
		       c->rope_orig_ctx != g_mla[i].orig || c->rope_factor != g_mla[i].factor ||
		       c->yarn_beta_fast != g_mla[i].beta_fast ||
		       c->yarn_beta_slow != g_mla[i].beta_slow ||
		       c->yarn_mscale != g_mla[i].mscale ||
		       c->yarn_mscale_all != g_mla[i].mscale_all || c->bos != g_mla[i].bos ||
		       c->n_eos != 1 || c->eos[0] != g_mla[i].eos;
	}
	return c->q_lora || c->kv_lora || c->qk_nope || c->v_head ||
	       (c->arch != COLI_ARCH_GPT_OSS && (c->rope_factor != 1.0f || c->rope_orig_ctx));
}

/* The glm fields of c (shape name) differ from g_glm: 1. */
static int glm_differs(const char *name, const struct coli_model_config *c)
{
	for (size_t i = 0; i < sizeof(g_glm) / sizeof(g_glm[0]); i++) {
		if (strcmp(name, g_glm[i].name))
			continue;
		int dense = 0;

		for (int l = 0; l < c->n_layers; l++)
			dense += !c->is_moe_layer[l] && dense == l;
		return dense != g_glm[i].dense || c->dense_inter != g_glm[i].dense_inter ||
		       c->shared_inter != g_glm[i].shared_inter || c->shared_gated ||
		       c->qkv_bias != g_glm[i].bias || c->rope_dim != g_glm[i].rope_dim ||
		       c->router_kind != COLI_ROUTER_SIGMOID || !c->router_bias ||
		       c->n_group != g_glm[i].n_group || c->topk_group != g_glm[i].topk_group ||
		       c->n_eos != g_glm[i].n_eos || c->routed_scale != g_glm[i].scale ||
		       c->norm_eps != g_glm[i].eps || (c->bos != -1 && !c->kv_lora);
	}
	return c->dense_inter || c->shared_inter || c->router_kind != COLI_ROUTER_SOFTMAX ||
	       (c->router_bias && c->arch != COLI_ARCH_GPT_OSS) || c->rope_dim != c->head_dim ||
	       !c->is_moe_layer[0];
}

int main(void)
{
	static const enum coli_dtype qs[] = {COLI_DTYPE_Q4_0, COLI_DTYPE_Q8_0, COLI_DTYPE_BF16};
	struct coli_model_config c, back;
	char err[256];
	int fails = 0;

	for (size_t i = 0; i < sizeof(g_want) / sizeof(g_want[0]); i++) {
		for (int q = 0; q < 3; q++) {
			const char *src = NULL;
			int rc = coli_synth_shape(g_want[i].name, qs[q], 0, &c, &src);
			char *js;

			if (rc || !src) {
				printf("FAIL %s: coli_synth_shape %d\n", g_want[i].name, rc);
				return 1;
			}
			if (strcmp(c.model_type, g_want[i].arch) ||
			    c.n_layers != g_want[i].layers || c.hidden != g_want[i].hidden ||
			    c.n_heads != g_want[i].heads || c.n_kv_heads != g_want[i].kv ||
			    c.head_dim != g_want[i].hd || c.vocab != g_want[i].vocab ||
			    c.n_experts != g_want[i].experts || c.top_k != g_want[i].top_k ||
			    c.moe_inter != g_want[i].inter || c.norm_topk_prob != g_want[i].ntp ||
			    c.qk_norm != g_want[i].qk || c.rope_theta != g_want[i].theta ||
			    c.quant != qs[q] || glm_differs(g_want[i].name, &c) ||
			    mla_differs(g_want[i].name, &c) || oss_differs(g_want[i].name, &c)) {
				printf("FAIL %s: hyperparameters differ from docs/shapes.md\n",
				       g_want[i].name);
				fails++;
			}
			js = coli_config_format(&c);
			rc = js ? coli_config_parse(js, strlen(js), &back, err, sizeof(err))
			        : -ENOMEM;
			free(js);
			if (rc || memcmp(&c, &back, sizeof(c))) {
				printf("FAIL %s %s: config round trip (%s)\n", g_want[i].name,
				       coli_dtype_name(qs[q]), rc ? err : "fields differ");
				fails++;
			}
			struct coli_expert_layer l = {.n_experts = (uint32_t)c.n_experts,
			                              .dtype = qs[q],
			                              .hidden = (uint32_t)c.hidden,
			                              .inter = (uint32_t)c.moe_inter};
			if (coli_io_slab_layout(&l) || l.slab_bytes % COLI_SLAB_ALIGN ||
			    l.slab_bytes < 3 * coli_dtype_mat_bytes(qs[q], c.moe_inter, c.hidden)) {
				printf("FAIL %s %s: slab layout\n", g_want[i].name,
				       coli_dtype_name(qs[q]));
				fails++;
			}
			if (q == 0)
				printf("ok   %-16s %s, q4 slab %.2f MB, experts per layer %.1f MB "
				       "(%s)\n",
				       g_want[i].name, c.model_type, l.slab_bytes / 1e6,
				       l.slab_bytes * (double)c.n_experts / 1e6, src);
		}
	}
	if (coli_synth_shape("tiny", COLI_DTYPE_Q4_0, 5, &c, NULL) || c.n_layers != 5 ||
	    !c.is_moe_layer[4] || c.is_moe_layer[5]) {
		printf("FAIL --layers 5 not applied\n");
		fails++;
	}
	/* --layers below the dense count keeps the last layer a MoE layer */
	if (coli_synth_shape("glm-4.5", COLI_DTYPE_Q4_0, 2, &c, NULL) || c.n_layers != 2 ||
	    c.is_moe_layer[0] || !c.is_moe_layer[1]) {
		printf("FAIL glm-4.5 --layers 2: not one dense then one MoE layer\n");
		fails++;
	}
	/* deepseek-v3's three dense layers come first; kimi-k2 has one */
	if (coli_synth_shape("deepseek-v3", COLI_DTYPE_Q4_0, 0, &c, NULL) || c.is_moe_layer[2] ||
	    !c.is_moe_layer[3] || !c.is_moe_layer[60] ||
	    coli_synth_shape("kimi-k2", COLI_DTYPE_Q4_0, 0, &c, NULL) || c.is_moe_layer[0] ||
	    !c.is_moe_layer[1]) {
		printf("FAIL deepseek-v3 / kimi-k2: dense layers not first_k_dense_replace\n");
		fails++;
	}
	if (coli_synth_shape("nope", COLI_DTYPE_Q4_0, 0, &c, NULL) != -ENOENT) {
		printf("FAIL unknown shape not -ENOENT\n");
		fails++;
	}
	return fails ? 1 : 0;
}
