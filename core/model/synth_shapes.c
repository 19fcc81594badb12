/*
 * core/model/synth_shapes.c — the shapes of `coli bench make-model`: the
 * geometry of real MoE models (layers, widths, experts, top-k, routing and
 * attention variants) as a struct coli_model_config, for core/model/synth.c
 * to fill with seeded random weights. docs/shapes.md lists the values and
 * their sources; tests/bench/shapes.c checks them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/coli.h"
/* ---- shapes (docs/shapes.md: values and sources) ---- */

struct shape {
	const char *name, *model_type, *source;
	int n_layers, hidden, n_heads, n_kv_heads, head_dim, vocab;
	int n_experts, top_k, moe_inter, norm_topk_prob, qk_norm, max_ctx;
	float norm_eps, rope_theta;
	int bos, eos0, eos1; /* -1: none */
	/* glm4_moe and minimax_m2 (zero for the other shapes): the first n_dense
	 * layers are dense MLPs of width dense_inter; MoE layers add an ungated
	 * shared expert of width shared_inter; sigmoid routing with a correction
	 * bias */
	int n_dense, dense_inter, shared_inter, qkv_bias, rope_dim, n_group, topk_group;
	float routed_scale;
	int eos2; /* a third eos id, 0: none */
};

static const struct shape g_shapes[] = {
    {.name = "qwen3-30b-a3b",
     .model_type = "qwen3_moe",
     .source = "Qwen/Qwen3-30B-A3B config.json",
     .n_layers = 48,
     .hidden = 2048,
     .n_heads = 32,
     .n_kv_heads = 4,
     .head_dim = 128,
     .vocab = 151936,
     .n_experts = 128,
     .top_k = 8,
     .moe_inter = 768,
     .norm_topk_prob = 1,
     .qk_norm = 1,
     .max_ctx = 40960,
     .norm_eps = 1e-6f,
     .rope_theta = 1e6f,
     .bos = 151643,
     .eos0 = 151645,
     .eos1 = 151643},
    {.name = "qwen3-235b-a22b",
     .model_type = "qwen3_moe",
     .source = "Qwen/Qwen3-235B-A22B config.json",
     .n_layers = 94,
     .hidden = 4096,
     .n_heads = 64,
     .n_kv_heads = 4,
     .head_dim = 128,
     .vocab = 151936,
     .n_experts = 128,
     .top_k = 8,
     .moe_inter = 1536,
     .norm_topk_prob = 1,
     .qk_norm = 1,
     .max_ctx = 40960,
     .norm_eps = 1e-6f,
     .rope_theta = 1e6f,
     .bos = 151643,
     .eos0 = 151645,
     .eos1 = 151643},
    {.name = "mixtral-8x7b",
     .model_type = "mixtral",
     .source = "mistralai/Mixtral-8x7B-v0.1 config.json",
     .n_layers = 32,
     .hidden = 4096,
     .n_heads = 32,
     .n_kv_heads = 8,
     .head_dim = 128,
     .vocab = 32000,
     .n_experts = 8,
     .top_k = 2,
     .moe_inter = 14336,
     .norm_topk_prob = 1,
     .max_ctx = 32768,
     .norm_eps = 1e-5f,
     .rope_theta = 1e6f,
     .bos = 1,
     .eos0 = 2,
     .eos1 = -1},
    {.name = "olmoe-1b-7b",
     .model_type = "olmoe",
     .source = "allenai/OLMoE-1B-7B-0924 config.json",
     .n_layers = 16,
     .hidden = 2048,
     .n_heads = 16,
     .n_kv_heads = 16,
     .head_dim = 128,
     .vocab = 50304,
     .n_experts = 64,
     .top_k = 8,
     .moe_inter = 1024,
     .qk_norm = 2,
     .max_ctx = 4096,
     .norm_eps = 1e-5f,
     .rope_theta = 1e4f,
     .bos = -1,
     .eos0 = 50279,
     .eos1 = -1},
    /* a debug shape for tests: every dimension small, q4/q8-compatible */
    {.name = "tiny",
     .model_type = "qwen3_moe",
     .source = "coli (debug shape for tests)",
     .n_layers = 2,
     .hidden = 256,
     .n_heads = 4,
     .n_kv_heads = 2,
     .head_dim = 64,
     .vocab = 1024,
     .n_experts = 16,
     .top_k = 4,
     .moe_inter = 128,
     .norm_topk_prob = 1,
     .qk_norm = 1,
     .max_ctx = 4096,
     .norm_eps = 1e-6f,
     .rope_theta = 1e6f,
     .bos = -1,
     .eos0 = 1,
     .eos1 = -1},
    /* glm4_moe: zai-org/GLM-4.5 and GLM-4.5-Air (MTP layer left out) */
    {.name = "glm-4.5",
     .model_type = "glm4_moe",
     .source = "zai-org/GLM-4.5 config.json",
     .n_layers = 92,
     .hidden = 5120,
     .n_heads = 96,
     .n_kv_heads = 8,
     .head_dim = 128,
     .vocab = 151552,
     .n_experts = 160,
     .top_k = 8,
     .moe_inter = 1536,
     .norm_topk_prob = 1,
     .qk_norm = 1,
     .max_ctx = 131072,
     .norm_eps = 1e-5f,
     .rope_theta = 1e6f,
     .bos = -1,
     .eos0 = 151329,
     .eos1 = 151336,
     .n_dense = 3,
     .dense_inter = 12288,
     .shared_inter = 1536,
     .qkv_bias = 1,
     .rope_dim = 64,
     .n_group = 1,
     .topk_group = 1,
     .routed_scale = 2.5f,
     .eos2 = 151338},
    {.name = "glm-4.5-air",
     .model_type = "glm4_moe",
     .source = "zai-org/GLM-4.5-Air config.json",
     .n_layers = 46,
     .hidden = 4096,
     .n_heads = 96,
     .n_kv_heads = 8,
     .head_dim = 128,
     .vocab = 151552,
     .n_experts = 128,
     .top_k = 8,
     .moe_inter = 1408,
     .norm_topk_prob = 1,
     .qk_norm = 0,
     .max_ctx = 131072,
     .norm_eps = 1e-5f,
     .rope_theta = 1e6f,
     .bos = -1,
     .eos0 = 151329,
     .eos1 = 151336,
     .n_dense = 1,
     .dense_inter = 10944,
     .shared_inter = 1408,
     .qkv_bias = 1,
     .rope_dim = 64,
     .n_group = 1,
     .topk_group = 1,
     .routed_scale = 1.0f,
     .eos2 = 151338},
    /* minimax_m2: MiniMaxAI/MiniMax-M2 (MTP modules left out); every layer MoE,
     * no shared expert, QK norm over the whole q / k, sigmoid routing with the
     * correction bias, renormalised, no groups, no scale */
    {.name = "minimax-m2",
     .model_type = "minimax_m2",
     .source = "MiniMaxAI/MiniMax-M2 config.json",
     .n_layers = 62,
     .hidden = 3072,
     .n_heads = 48,
     .n_kv_heads = 8,
     .head_dim = 128,
     .vocab = 200064,
     .n_experts = 256,
     .top_k = 8,
     .moe_inter = 1536,
     .norm_topk_prob = 1,
     .qk_norm = 2,
     .max_ctx = 196608,
     .norm_eps = 1e-6f,
     .rope_theta = 5e6f,
     .bos = -1,
     .eos0 = 200020,
     .eos1 = -1,
     .rope_dim = 64,
     .n_group = 1,
     .topk_group = 1,
     .routed_scale = 1.0f},
};
#define N_SHAPES (int)(sizeof(g_shapes) / sizeof(g_shapes[0]))

const char *coli_synth_shapes(void)
{
	return "qwen3-30b-a3b, qwen3-235b-a22b, mixtral-8x7b, olmoe-1b-7b, glm-4.5, glm-4.5-air, "
	       "minimax-m2, tiny";
}

int coli_synth_shape(const char *name, enum coli_dtype quant, int n_layers,
                     struct coli_model_config *c, const char **source)
{
	const struct shape *s = NULL;

	for (int i = 0; i < N_SHAPES && !s; i++)
		if (!strcmp(name, g_shapes[i].name))
			s = &g_shapes[i];
	if (!s)
		return -ENOENT;
	if (n_layers < 0 || n_layers > COLI_MAX_LAYERS)
		return -EINVAL;
	coli_config_init(c);
	if (coli_arch_parse(s->model_type, &c->arch))
		return -EINVAL;
	snprintf(c->model_type, sizeof(c->model_type), "%s", s->model_type);
	c->n_layers = n_layers ? n_layers : s->n_layers;
	c->hidden = s->hidden;
	c->n_heads = s->n_heads;
	c->n_kv_heads = s->n_kv_heads;
	c->head_dim = s->head_dim;
	c->rope_dim = s->head_dim;
	c->vocab = s->vocab;
	c->n_experts = s->n_experts;
	c->top_k = s->top_k;
	c->moe_inter = s->moe_inter;
	c->norm_topk_prob = s->norm_topk_prob;
	c->qk_norm = s->qk_norm;
	c->max_ctx = s->max_ctx;
	c->norm_eps = s->norm_eps;
	c->rope_theta = s->rope_theta;
	c->quant = quant;
	/* dense layers first, as the real model; --layers keeps at least one MoE layer */
	for (int l = 0; l < c->n_layers; l++)
		c->is_moe_layer[l] = l >= s->n_dense || l == c->n_layers - 1;
	if (c->arch == COLI_ARCH_GLM4_MOE || c->arch == COLI_ARCH_MINIMAX_M2) {
		c->dense_inter = s->dense_inter;
		c->shared_inter = s->shared_inter;
		c->shared_gated = 0;
		c->qkv_bias = s->qkv_bias;
		c->rope_dim = s->rope_dim;
		c->router_kind = COLI_ROUTER_SIGMOID;
		c->router_bias = 1;
		c->n_group = s->n_group;
		c->topk_group = s->topk_group;
		c->routed_scale = s->routed_scale;
	}
	c->bos = s->bos;
	c->eos[c->n_eos++] = s->eos0;
	if (s->eos1 >= 0)
		c->eos[c->n_eos++] = s->eos1;
	if (s->eos2 > 0)
		c->eos[c->n_eos++] = s->eos2;
	if (source)
		*source = s->source;
	return 0;
}
