/*
 * core/model/config.c — the model config: coli's own JSON (the container's CONFIG
 * section) to and from struct coli_model_config, with range checks so that a
 * corrupt or hostile file cannot make the engine size buffers from nonsense.
 *
 * The JSON keys are the struct's field names; "quant" is a dtype name,
 * "arch" is the Hugging Face model_type, "moe_layers" lists the indices of
 * the layers whose MLP is a routed MoE block (the others are dense MLPs),
 * "eos" is an array of token ids. Unknown keys are ignored (forward
 * compatibility within a container version).
 *
 * The keys of g_opt_fields and "routed_scale" came with the sigmoid router
 * and partial RoPE (GLM-4.5, 2026-12): a container written before them has
 * none, and reads as their defaults (softmax routing, full RoPE, a gated
 * shared expert). _format writes them only when they differ from those
 * defaults, so an older family's CONFIG section is what it was. MLA's keys
 * (q_lora, kv_lora, qk_nope, v_head) and YaRN's (rope_factor, rope_orig_ctx,
 * g_optf_fields) follow the same rule (DeepSeek-V3, 2026-12), and gpt-oss's
 * (yarn_truncate, sliding_window and "sliding_layers", attn_sinks,
 * attn_o_bias, expert_bias, ffn_act, act_alpha, act_limit), and linear
 * RoPE scaling's rope_scaling (1; absent, rope_factor > 1 is YaRN as before).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/coli.h"

static const struct {
	enum coli_arch arch;
	const char *name;
} g_arch_names[] = {
    {COLI_ARCH_QWEN3_MOE, "qwen3_moe"},
    {COLI_ARCH_QWEN2_MOE, "qwen2_moe"},
    {COLI_ARCH_OLMOE, "olmoe"},
    {COLI_ARCH_MIXTRAL, "mixtral"},
    {COLI_ARCH_GLM4_MOE, "glm4_moe"},
    {COLI_ARCH_MINIMAX_M2, "minimax_m2"},
    {COLI_ARCH_DEEPSEEK_V3, "deepseek_v3"},
    {COLI_ARCH_GPT_OSS, "gpt_oss"},
};
#define N_ARCH (int)(sizeof(g_arch_names) / sizeof(g_arch_names[0]))

const char *coli_arch_name(enum coli_arch a)
{
	for (int i = 0; i < N_ARCH; i++)
		if (g_arch_names[i].arch == a)
			return g_arch_names[i].name;
	return "unknown";
}

int coli_arch_parse(const char *model_type, enum coli_arch *out)
{
	for (int i = 0; i < N_ARCH; i++) {
		if (!strcmp(model_type, g_arch_names[i].name)) {
			*out = g_arch_names[i].arch;
			return 0;
		}
	}
	return -EPROTONOSUPPORT;
}

const char *coli_arch_supported(void)
{
	return "qwen3_moe, qwen2_moe, olmoe, mixtral, glm4_moe, minimax_m2, deepseek_v3, gpt_oss";
}

void coli_config_init(struct coli_model_config *c)
{
	memset(c, 0, sizeof(*c));
	c->shared_gated = 1;
	c->router_kind = COLI_ROUTER_SOFTMAX;
	c->n_group = c->topk_group = 1;
	c->routed_scale = 1.0f;
	c->rope_factor = 1.0f;
	c->yarn_beta_fast = 32.0f;
	c->yarn_beta_slow = 1.0f;
	c->yarn_truncate = 1;
}

/* Integer fields: name, offset, minimum, maximum (inclusive). */
#define FIELD(f, lo, hi)                                                                           \
	{                                                                                          \
#f, offsetof(struct coli_model_config, f), lo, hi                                  \
	}
static const struct {
	const char *key;
	size_t off;
	long lo, hi;
} g_int_fields[] = {
    FIELD(n_layers, 1, COLI_MAX_LAYERS),
    FIELD(hidden, 32, 1 << 16),
    FIELD(n_heads, 1, 1024),
    FIELD(n_kv_heads, 1, 1024),
    FIELD(head_dim, 16, 1024),
    FIELD(vocab, 1, 1 << 22),
    FIELD(n_experts, 1, 4096),
    FIELD(top_k, 1, 64),
    FIELD(moe_inter, 32, 1 << 17),
    FIELD(shared_inter, 0, 1 << 17),
    FIELD(dense_inter, 0, 1 << 18),
    FIELD(norm_topk_prob, 0, 1),
    FIELD(qk_norm, 0, 2),
    FIELD(qkv_bias, 0, 1),
    FIELD(tie_embeddings, 0, 1),
    FIELD(max_ctx, 1, 1 << 24),
    FIELD(bos, -1, 1 << 22),
};
#define N_INT (int)(sizeof(g_int_fields) / sizeof(g_int_fields[0]))

/* Optional integer fields: as above plus the value an absent key means
 * (rope_dim: -1, head_dim). */
#define OPT(f, lo, hi, dflt)                                                                       \
	{                                                                                          \
#f, offsetof(struct coli_model_config, f), lo, hi, dflt                            \
	}
static const struct {
	const char *key;
	size_t off;
	long lo, hi, dflt;
} g_opt_fields[] = {
    OPT(shared_gated, 0, 1, 1),
    OPT(rope_dim, 2, 1024, -1),
    OPT(router_kind, COLI_ROUTER_SOFTMAX, COLI_ROUTER_SIGMOID, COLI_ROUTER_SOFTMAX),
    OPT(router_bias, 0, 1, 0),
    OPT(n_group, 1, 4096, 1),
    OPT(topk_group, 1, 4096, 1),
    OPT(q_lora, 0, 1 << 16, 0),
    OPT(kv_lora, 0, 1 << 14, 0),
    OPT(qk_nope, 0, 1024, 0),
    OPT(v_head, 0, 1024, 0),
    OPT(rope_orig_ctx, 0, 1 << 24, 0),
    OPT(yarn_truncate, 0, 1, 1),
    OPT(rope_scaling, COLI_ROPE_YARN, COLI_ROPE_LINEAR, COLI_ROPE_YARN),
    OPT(sliding_window, 0, 1 << 24, 0),
    OPT(attn_sinks, 0, 1, 0),
    OPT(attn_o_bias, 0, 1, 0),
    OPT(expert_bias, 0, 1, 0),
    OPT(ffn_act, COLI_ACT_SWIGLU, COLI_ACT_SWIGLU_OAI, COLI_ACT_SWIGLU),
};
#undef OPT
#undef FIELD
#define N_OPT (int)(sizeof(g_opt_fields) / sizeof(g_opt_fields[0]))

/* Optional float fields (MLA's YaRN, 2026-12): key, offset, the value an
 * absent key means; a present one must be finite, >= 0 and < 1e6. */
#define OPTF(f, dflt)                                                                              \
	{                                                                                          \
#f, offsetof(struct coli_model_config, f), dflt                                    \
	}
static const struct {
	const char *key;
	size_t off;
	float dflt;
} g_optf_fields[] = {
    OPTF(rope_factor, 1.0f), OPTF(yarn_beta_fast, 32.0f), OPTF(yarn_beta_slow, 1.0f),
    OPTF(yarn_mscale, 0.0f), OPTF(yarn_mscale_all, 0.0f), OPTF(yarn_attn, 0.0f),
    OPTF(act_alpha, 0.0f),   OPTF(act_limit, 0.0f),
};
#undef OPTF
#define N_OPTF (int)(sizeof(g_optf_fields) / sizeof(g_optf_fields[0]))

static int fail(char *errbuf, size_t errlen, const char *fmt, const char *what)
{
	snprintf(errbuf, errlen, fmt, what);
	return -EINVAL;
}

/* "arch" -> c->arch and c->model_type. */
static int read_arch(json_t *root, struct coli_model_config *c, char *errbuf, size_t errlen)
{
	const char *s = json_string_value(json_object_get(root, "arch"));

	if (!s)
		return fail(errbuf, errlen, "model config lacks \"%s\"", "arch");
	if (coli_arch_parse(s, &c->arch)) {
		snprintf(errbuf, errlen, "unsupported architecture '%s' (supported: %s)", s,
		         coli_arch_supported());
		return -EPROTONOSUPPORT;
	}
	snprintf(c->model_type, sizeof(c->model_type), "%s", s);
	return 0;
}

/* Every g_int_fields key, present, an integer, in its range. */
static int read_ints(json_t *root, struct coli_model_config *c, char *errbuf, size_t errlen)
{
	for (int i = 0; i < N_INT; i++) {
		json_t *jv = json_object_get(root, g_int_fields[i].key);
		long x;

		if (!json_is_integer(jv))
			return fail(errbuf, errlen,
			            "model config: \"%s\" missing or not an integer",
			            g_int_fields[i].key);
		x = (long)json_integer_value(jv);
		if (x < g_int_fields[i].lo || x > g_int_fields[i].hi)
			return fail(errbuf, errlen, "model config: \"%s\" out of range",
			            g_int_fields[i].key);
		*(int *)((char *)c + g_int_fields[i].off) = (int)x;
	}
	return 0;
}

/* The optional keys (g_opt_fields, routed_scale): absent is the default,
 * present must be in range; then how they must agree with the shapes. */
static int read_optional(json_t *root, struct coli_model_config *c, char *errbuf, size_t errlen)
{
	json_t *v;

	for (int i = 0; i < N_OPT; i++) {
		long x = g_opt_fields[i].dflt;

		v = json_object_get(root, g_opt_fields[i].key);
		if (v && !json_is_integer(v))
			return fail(errbuf, errlen, "model config: \"%s\" not an integer",
			            g_opt_fields[i].key);
		if (v)
			x = (long)json_integer_value(v);
		if (v && (x < g_opt_fields[i].lo || x > g_opt_fields[i].hi))
			return fail(errbuf, errlen, "model config: \"%s\" out of range",
			            g_opt_fields[i].key);
		*(int *)((char *)c + g_opt_fields[i].off) = (int)x;
	}
	for (int i = 0; i < N_OPTF; i++) {
		float x = g_optf_fields[i].dflt;

		v = json_object_get(root, g_optf_fields[i].key);
		if (v)
			x = (float)json_number_value(v);
		if (v && !(json_is_number(v) && x >= 0 && x < 1e6f))
			return fail(errbuf, errlen, "model config: \"%s\" invalid",
			            g_optf_fields[i].key);
		*(float *)((char *)c + g_optf_fields[i].off) = x;
	}
	if (c->rope_dim < 0)
		c->rope_dim = c->head_dim;
	if (c->kv_lora && (c->head_dim != c->qk_nope + c->rope_dim || c->n_kv_heads != c->n_heads ||
	                   !c->v_head || !c->qk_nope))
		return fail(errbuf, errlen, "model config: %s",
		            "MLA shapes inconsistent (head_dim != qk_nope + rope_dim, kv heads != "
		            "heads, or v_head/qk_nope 0)");
	if (c->rope_factor < 1 ||
	    (c->rope_factor > 1 && c->rope_scaling == COLI_ROPE_YARN && !c->rope_orig_ctx))
		return fail(errbuf, errlen, "model config: %s",
		            "rope_factor below 1, or YaRN without rope_orig_ctx");
	if (c->rope_scaling == COLI_ROPE_LINEAR && c->rope_factor <= 1)
		return fail(errbuf, errlen, "model config: %s",
		            "linear RoPE scaling without a rope_factor above 1");
	if (c->ffn_act == COLI_ACT_SWIGLU_OAI && !(c->act_alpha > 0 && c->act_limit > 0))
		return fail(errbuf, errlen, "model config: %s",
		            "ffn_act swiglu_oai without a positive act_alpha and act_limit");
	v = json_object_get(root, "routed_scale");
	c->routed_scale = v ? (float)json_number_value(v) : 1.0f;
	if (!(c->routed_scale > 0 && c->routed_scale < 1e6f))
		return fail(errbuf, errlen, "model config: %s", "routed_scale invalid");
	/* rope_dim even and within the head; groups divide the experts, hold two
	 * each (a group's score is its two best) and the kept ones hold top_k */
	if (c->rope_dim > c->head_dim || c->rope_dim % 2)
		return fail(errbuf, errlen, "model config: %s",
		            "rope_dim odd or larger than head_dim");
	if (c->n_group > 1 &&
	    (c->n_experts % c->n_group || c->n_experts / c->n_group < 2 ||
	     c->topk_group > c->n_group || c->topk_group * (c->n_experts / c->n_group) < c->top_k))
		return fail(errbuf, errlen, "model config: %s",
		            "n_group/topk_group do not fit n_experts and top_k");
	return 0;
}

/* norm_eps, rope_theta and quant, and the shapes they must agree with. */
static int read_numbers(json_t *root, struct coli_model_config *c, char *errbuf, size_t errlen)
{
	const char *s;
	json_t *v;

	v = json_object_get(root, "norm_eps");
	c->norm_eps = (float)json_number_value(v);
	v = json_object_get(root, "rope_theta");
	c->rope_theta = (float)json_number_value(v);
	if (!(c->norm_eps > 0 && c->norm_eps < 1) || !(c->rope_theta > 0))
		return fail(errbuf, errlen, "model config: %s", "norm_eps or rope_theta invalid");
	s = json_string_value(json_object_get(root, "quant"));
	if (!s || coli_dtype_parse(s, &c->quant))
		return fail(errbuf, errlen, "model config: quant '%s' unknown",
		            s ? s : "(missing)");
	/* quant is what convert was asked for: a matrix whose columns are not
	 * whole blocks is bf16 in a q8/q4 model (core/convert/convert.c), each
	 * tensor's dtype is in the tensor table (core/model/model.c checks it) */
	if (c->n_heads % c->n_kv_heads || c->top_k > c->n_experts)
		return fail(
		    errbuf, errlen, "model config: %s",
		    "inconsistent shapes (heads not a multiple of kv heads, or top_k > experts)");
	return 0;
}

/* moe_layers (required), eos (optional), and bos inside the vocabulary. */
static int read_layers_ids(json_t *root, struct coli_model_config *c, char *errbuf, size_t errlen)
{
	json_t *v = json_object_get(root, "moe_layers");

	if (!json_is_array(v))
		return fail(errbuf, errlen, "model config lacks \"%s\"", "moe_layers");
	for (size_t i = 0; i < json_array_size(v); i++) {
		json_t *e = json_array_get(v, i);
		long l = json_is_integer(e) ? (long)json_integer_value(e) : -1;

		if (l < 0 || l >= c->n_layers)
			return fail(errbuf, errlen, "model config: %s",
			            "moe_layers entry out of range");
		c->is_moe_layer[l] = 1;
	}
	v = json_object_get(root, "sliding_layers"); /* optional (gpt-oss) */
	for (size_t i = 0; i < json_array_size(v); i++) {
		json_t *e = json_array_get(v, i);
		long l = json_is_integer(e) ? (long)json_integer_value(e) : -1;

		if (l < 0 || l >= c->n_layers || !c->sliding_window)
			return fail(errbuf, errlen, "model config: %s",
			            "sliding_layers entry out of range, or no sliding_window");
		c->is_sliding_layer[l] = 1;
	}
	v = json_object_get(root, "eos");
	if (json_is_array(v)) {
		for (size_t i = 0; i < json_array_size(v) && c->n_eos < COLI_MAX_EOS; i++) {
			json_t *e = json_array_get(v, i);
			long id = json_is_integer(e) ? (long)json_integer_value(e) : -1;

			if (id < 0 || id >= c->vocab)
				return fail(errbuf, errlen, "model config: %s",
				            "eos id out of range");
			c->eos[c->n_eos++] = (int)id;
		}
	}
	if (c->bos >= c->vocab)
		return fail(errbuf, errlen, "model config: %s", "bos id out of range");
	return 0;
}

int coli_config_parse(const char *json, size_t len, struct coli_model_config *c, char *errbuf,
                      size_t errlen)
{
	json_error_t jerr;
	json_t *root;
	int rc;

	memset(c, 0, sizeof(*c));
	root = json_loadb(json, len, 0, &jerr);
	if (!root) {
		snprintf(errbuf, errlen, "model config is not valid JSON (line %d: %s)", jerr.line,
		         jerr.text);
		return -EINVAL;
	}
	if (!json_is_object(root))
		rc = fail(errbuf, errlen, "model config is not a JSON object%s", "");
	else
		rc = read_arch(root, c, errbuf, errlen);
	rc = rc ? rc : read_ints(root, c, errbuf, errlen);
	rc = rc ? rc : read_numbers(root, c, errbuf, errlen);
	rc = rc ? rc : read_optional(root, c, errbuf, errlen);
	rc = rc ? rc : read_layers_ids(root, c, errbuf, errlen);
	json_decref(root);
	return rc;
}

char *coli_config_format(const struct coli_model_config *c)
{
	json_t *root = json_object(), *layers = json_array(), *eos = json_array();
	char *s;

	json_object_set_new(root, "arch", json_string(coli_arch_name(c->arch)));
	for (int i = 0; i < N_INT; i++)
		json_object_set_new(
		    root, g_int_fields[i].key,
		    json_integer(*(const int *)((const char *)c + g_int_fields[i].off)));
	for (int i = 0; i < N_OPT; i++) {
		int x = *(const int *)((const char *)c + g_opt_fields[i].off);
		long dflt = g_opt_fields[i].off == offsetof(struct coli_model_config, rope_dim)
		                ? c->head_dim
		                : g_opt_fields[i].dflt;

		if (x != dflt)
			json_object_set_new(root, g_opt_fields[i].key, json_integer(x));
	}
	for (int i = 0; i < N_OPTF; i++) {
		float x = *(const float *)((const char *)c + g_optf_fields[i].off);

		if (x != g_optf_fields[i].dflt)
			json_object_set_new(root, g_optf_fields[i].key, json_real(x));
	}
	if (c->routed_scale != 1.0f)
		json_object_set_new(root, "routed_scale", json_real(c->routed_scale));
	json_object_set_new(root, "norm_eps", json_real(c->norm_eps));
	json_object_set_new(root, "rope_theta", json_real(c->rope_theta));
	json_object_set_new(root, "quant", json_string(coli_dtype_name(c->quant)));
	for (int l = 0; l < c->n_layers && l < COLI_MAX_LAYERS; l++)
		if (c->is_moe_layer[l])
			json_array_append_new(layers, json_integer(l));
	json_object_set_new(root, "moe_layers", layers);
	if (c->sliding_window) {
		json_t *sl = json_array();

		for (int l = 0; l < c->n_layers && l < COLI_MAX_LAYERS; l++)
			if (c->is_sliding_layer[l])
				json_array_append_new(sl, json_integer(l));
		json_object_set_new(root, "sliding_layers", sl);
	}
	for (int i = 0; i < c->n_eos; i++)
		json_array_append_new(eos, json_integer(c->eos[i]));
	json_object_set_new(root, "eos", eos);
	s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
	json_decref(root);
	return s;
}
