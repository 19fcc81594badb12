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
	/* deepseek_v3 (DeepSeek-V3, Kimi-K2): MLA attention (kv_lora > 0; head_dim
	 * is qk_nope + rope_dim, kv heads = heads) and YaRN RoPE scaling over
	 * rope_orig_ctx positions (rope_factor > 1); glm4_moe's routing fields */
	int q_lora, kv_lora, qk_nope, v_head, rope_orig_ctx;
	float rope_factor, beta_fast, beta_slow, mscale, mscale_all;
	/* gpt_oss: sinks, even layers sliding over `window` keys, q/k/v/o,
	 * router and expert biases, the clamped SwiGLU at act_limit, YaRN not
	 * truncated (the rest of gpt-oss is fixed: coli_synth_shape) */
	int window;
	float act_limit;
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
    /* gpt_oss: openai/gpt-oss-120b and -20b; every layer MoE, softmax over the
     * top-4 router logits (with the router's bias), sinks, sliding window 128
     * on even layers, biases everywhere, the clamped SwiGLU, YaRN x32 over
     * 4096 not truncated */
    {.name = "gpt-oss-120b",
     .model_type = "gpt_oss",
     .source = "openai/gpt-oss-120b config.json (transformers 5.24 GptOssConfig's defaults)",
     .n_layers = 36,
     .hidden = 2880,
     .n_heads = 64,
     .n_kv_heads = 8,
     .head_dim = 64,
     .vocab = 201088,
     .n_experts = 128,
     .top_k = 4,
     .moe_inter = 2880,
     .norm_topk_prob = 1,
     .max_ctx = 131072,
     .norm_eps = 1e-5f,
     .rope_theta = 1.5e5f,
     .bos = 199998,
     .eos0 = 200002,
     .eos1 = 199999,
     .eos2 = 200012,
     .rope_dim = 64,
     .n_group = 1,
     .topk_group = 1,
     .routed_scale = 1.0f,
     .qkv_bias = 1,
     .rope_orig_ctx = 4096,
     .rope_factor = 32.0f,
     .beta_fast = 32.0f,
     .beta_slow = 1.0f,
     .window = 128,
     .act_limit = 7.0f},
    {.name = "gpt-oss-20b",
     .model_type = "gpt_oss",
     .source = "openai/gpt-oss-20b config.json",
     .n_layers = 24,
     .hidden = 2880,
     .n_heads = 64,
     .n_kv_heads = 8,
     .head_dim = 64,
     .vocab = 201088,
     .n_experts = 32,
     .top_k = 4,
     .moe_inter = 2880,
     .norm_topk_prob = 1,
     .max_ctx = 131072,
     .norm_eps = 1e-5f,
     .rope_theta = 1.5e5f,
     .bos = 199998,
     .eos0 = 200002,
     .eos1 = 199999,
     .eos2 = 200012,
     .rope_dim = 64,
     .n_group = 1,
     .topk_group = 1,
     .routed_scale = 1.0f,
     .qkv_bias = 1,
     .rope_orig_ctx = 4096,
     .rope_factor = 32.0f,
     .beta_fast = 32.0f,
     .beta_slow = 1.0f,
     .window = 128,
     .act_limit = 7.0f},
    /* deepseek_v3: deepseek-ai/DeepSeek-V3 (the MTP layer left out, as convert
     * leaves it out); 3 dense layers, 256 routed experts top-8 in 8 groups
     * keeping 4, one shared expert, MLA, YaRN x40 over 4096 */
    {.name = "deepseek-v3",
     .model_type = "deepseek_v3",
     .source = "deepseek-ai/DeepSeek-V3 config.json",
     .n_layers = 61,
     .hidden = 7168,
     .n_heads = 128,
     .n_kv_heads = 128,
     .head_dim = 192,
     .vocab = 129280,
     .n_experts = 256,
     .top_k = 8,
     .moe_inter = 2048,
     .norm_topk_prob = 1,
     .max_ctx = 163840,
     .norm_eps = 1e-6f,
     .rope_theta = 1e4f,
     .bos = 0,
     .eos0 = 1,
     .eos1 = -1,
     .n_dense = 3,
     .dense_inter = 18432,
     .shared_inter = 2048,
     .rope_dim = 64,
     .n_group = 8,
     .topk_group = 4,
     .routed_scale = 2.5f,
     .q_lora = 1536,
     .kv_lora = 512,
     .qk_nope = 128,
     .v_head = 128,
     .rope_orig_ctx = 4096,
     .rope_factor = 40.0f,
     .beta_fast = 32.0f,
     .beta_slow = 1.0f,
     .mscale = 1.0f,
     .mscale_all = 1.0f},
    /* Kimi-K2 (moonshotai/Kimi-K2-Instruct, model_type kimi_k2 on the Hub,
     * DeepseekV3ForCausalLM): DeepSeek-V3's layout with 384 experts in one
     * group, 64 heads, one dense layer, YaRN x32 */
    {.name = "kimi-k2",
     .model_type = "deepseek_v3",
     .source = "moonshotai/Kimi-K2-Instruct config.json",
     .n_layers = 61,
     .hidden = 7168,
     .n_heads = 64,
     .n_kv_heads = 64,
     .head_dim = 192,
     .vocab = 163840,
     .n_experts = 384,
     .top_k = 8,
     .moe_inter = 2048,
     .norm_topk_prob = 1,
     .max_ctx = 131072,
     .norm_eps = 1e-6f,
     .rope_theta = 5e4f,
     .bos = 163584,
     .eos0 = 163585,
     .eos1 = -1,
     .n_dense = 1,
     .dense_inter = 18432,
     .shared_inter = 2048,
     .rope_dim = 64,
     .n_group = 1,
     .topk_group = 1,
     .routed_scale = 2.827f,
     .q_lora = 1536,
     .kv_lora = 512,
     .qk_nope = 128,
     .v_head = 128,
     .rope_orig_ctx = 4096,
     .rope_factor = 32.0f,
     .beta_fast = 1.0f,
     .beta_slow = 1.0f,
     .mscale = 1.0f,
     .mscale_all = 1.0f},
    /* a debug shape for tests: DeepSeek-V3's layout (MLA with q_lora, YaRN,
     * grouped sigmoid routing, shared expert, a dense first layer) in the
     * geometry of tests/fixtures/deepseek_v3, so that its tensor table can be
     * compared with the converted fixture's (tests/bench/make_model.sh) */
    {.name = "tiny-mla",
     .model_type = "deepseek_v3",
     .source = "coli (debug shape for tests: tests/fixtures/deepseek_v3's geometry)",
     .n_layers = 3,
     .hidden = 64,
     .n_heads = 4,
     .n_kv_heads = 4,
     .head_dim = 48,
     .vocab = 1024,
     .n_experts = 16,
     .top_k = 3,
     .moe_inter = 32,
     .norm_topk_prob = 1,
     .max_ctx = 512,
     .norm_eps = 1e-6f,
     .rope_theta = 2e4f,
     .bos = -1,
     .eos0 = 1023,
     .eos1 = -1,
     .n_dense = 1,
     .dense_inter = 96,
     .shared_inter = 32,
     .rope_dim = 16,
     .n_group = 4,
     .topk_group = 2,
     .routed_scale = 2.5f,
     .q_lora = 32,
     .kv_lora = 64,
     .qk_nope = 32,
     .v_head = 32,
     .rope_orig_ctx = 128,
     .rope_factor = 4.0f,
     .beta_fast = 32.0f,
     .beta_slow = 1.0f,
     .mscale = 1.0f,
     .mscale_all = 0.8f},
};
#define N_SHAPES (int)(sizeof(g_shapes) / sizeof(g_shapes[0]))

const char *coli_synth_shapes(void)
{
	return "qwen3-30b-a3b, qwen3-235b-a22b, mixtral-8x7b, olmoe-1b-7b, glm-4.5, glm-4.5-air, "
	       "minimax-m2, deepseek-v3, kimi-k2, gpt-oss-120b, gpt-oss-20b, tiny, tiny-mla";
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
	if (c->arch == COLI_ARCH_GLM4_MOE || c->arch == COLI_ARCH_MINIMAX_M2 ||
	    c->arch == COLI_ARCH_DEEPSEEK_V3) {
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
	if (c->arch == COLI_ARCH_GPT_OSS) { /* as convert_gptoss.c reads it */
		c->qkv_bias = c->attn_o_bias = s->qkv_bias;
		c->attn_sinks = 1;
		c->sliding_window = s->window;
		for (int l = 0; l < c->n_layers; l++)
			c->is_sliding_layer[l] = l % 2 == 0;
		c->router_bias = 1;
		c->expert_bias = 1;
		c->ffn_act = COLI_ACT_SWIGLU_OAI;
		c->act_alpha = 1.702f;
		c->act_limit = s->act_limit;
		c->yarn_truncate = 0;
	}
	if (s->kv_lora) { /* MLA, as convert_hf.c's fill_config */
		c->q_lora = s->q_lora;
		c->kv_lora = s->kv_lora;
		c->qk_nope = s->qk_nope;
		c->v_head = s->v_head;
	}
	if (s->rope_factor > 1) { /* YaRN, as convert_rope.c reads it */
		c->rope_factor = s->rope_factor;
		c->rope_orig_ctx = s->rope_orig_ctx;
		c->yarn_beta_fast = s->beta_fast;
		c->yarn_beta_slow = s->beta_slow;
		c->yarn_mscale = s->mscale;
		c->yarn_mscale_all = s->mscale_all;
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
