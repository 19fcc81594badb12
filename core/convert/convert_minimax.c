/*
 * core/convert/convert_minimax.c — the minimax_m2 family's config.json keys
 * (MiniMaxAI/MiniMax-M2, M2.1, M2.5: transformers' MiniMaxM2ForCausalLM),
 * applied to the config core/convert/convert_hf.c has filled from the keys
 * every family shares (sizes, experts from num_local_experts, the expert
 * width from intermediate_size, bos/eos).
 *
 * What the family is, as transformers 5.24 runs it:
 *   attention    GQA, no bias; QK norm is one RMSNorm over the whole q
 *                projection [n_heads * head_dim] and one over the whole k
 *                projection, before the split into heads (qk_norm 2, as
 *                OLMoE); partial RoPE on the first rotary_dim dims of each
 *                head, rotate-half layout (rope_dim)
 *   router       sigmoid scores, selection on score + e_score_correction_bias,
 *                top-k, the chosen unbiased scores renormalised, no scale, no
 *                groups (router_kind sigmoid, router_bias, norm_topk_prob 1)
 *   MLP          every layer MoE, no shared expert
 *
 * Keys, in both dialects (the Hub's config.json written for the remote code,
 * and transformers 5's): rotary_dim (Hub) or partial_rotary_factor (top level
 * or in rope_parameters; default 1, the whole head); rope_theta likewise
 * (default 5e6); rms_norm_eps (1e-6); max_position_embeddings (196608);
 * use_qk_norm (true) and qk_norm_type ("per_layer"); use_routing_bias (true);
 * scoring_func ("sigmoid"); use_mtp / num_mtp_modules: that many layers past
 * num_hidden_layers are multi-token-prediction modules, skipped.
 *
 * Refused by name rather than run wrong: attn_type_list naming a linear
 * (lightning) attention layer (0), a sliding window (sliding_window or
 * attn_window_size) shorter than the context, qk_norm_type other than
 * per_layer, scoring_func other than sigmoid, shared_intermediate_size > 0,
 * num_expert_group > 1, routed_scaling_factor != 1 and layernorm_*_beta != 1
 * (MiniMax-Text-01's knobs, which transformers' class ignores).
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/convert/convert_internal.h"

/* The message into errbuf, rc back. (Not coli_convert_errf: convert_hf.c
 * calls this file, so this file calls nothing of convert_hf.c's.) */
__attribute__((format(printf, 4, 5))) static int errf(char *errbuf, size_t errlen, int rc,
                                                      const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errbuf, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

/* A number or boolean; absent or null -> dflt. -1 on another type. */
static int num(json_t *cfg, const char *key, double dflt, double *out)
{
	json_t *v = json_object_get(cfg, key);

	*out = dflt;
	if (!v || json_is_null(v))
		return 0;
	if (json_is_boolean(v)) {
		*out = json_is_true(v);
		return 0;
	}
	if (!json_is_number(v))
		return -1;
	*out = json_number_value(v);
	return 0;
}

/* A window (a number, null, or one entry of a list) shorter than ctx. */
static int short_window(json_t *w, long ctx)
{
	return json_is_number(w) && json_number_value(w) > 0 && json_number_value(w) < (double)ctx;
}

/* Attention layouts coli does not run: linear attention layers, windows. */
static int refuse_layers(json_t *cfg, const char *path, long ctx, char *errbuf, size_t errlen)
{
	static const char *const wins[] = {"sliding_window", "attn_window_size"};
	json_t *types = json_object_get(cfg, "attn_type_list");

	for (size_t i = 0; i < json_array_size(types); i++) {
		json_t *t = json_array_get(types, i);

		if (!json_is_integer(t) || json_integer_value(t) != 1)
			return errf(errbuf, errlen, -ENOTSUP,
			            "%s: attn_type_list[%zu] is not 1 (full attention): "
			            "linear (lightning) attention layers are not "
			            "supported",
			            path, i);
	}
	for (int k = 0; k < 2; k++) {
		json_t *w = json_object_get(cfg, wins[k]);
		size_t n = json_is_array(w) ? json_array_size(w) : 1;

		for (size_t j = 0; j < n; j++) {
			json_t *one = json_is_array(w) ? json_array_get(w, j) : w;

			if (short_window(one, ctx))
				return errf(errbuf, errlen, -ENOTSUP,
				            "%s: %s %g < max_position_embeddings %ld: "
				            "sliding-window attention is not supported",
				            path, wins[k], json_number_value(one), ctx);
		}
	}
	return 0;
}

/* The knobs that must keep their neutral value, and the string keys. */
static int refuse_knobs(json_t *cfg, const char *path, char *errbuf, size_t errlen)
{
	static const struct {
		const char *key;
		double neutral;
	} knobs[] = {
	    {"shared_intermediate_size", 0},        {"num_expert_group", 1},
	    {"routed_scaling_factor", 1},           {"layernorm_full_attention_beta", 1},
	    {"layernorm_linear_attention_beta", 1}, {"layernorm_mlp_beta", 1},
	};
	const char *qt = json_string_value(json_object_get(cfg, "qk_norm_type"));
	const char *sf = json_string_value(json_object_get(cfg, "scoring_func"));
	double x;

	for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		if (num(cfg, knobs[i].key, knobs[i].neutral, &x))
			return errf(errbuf, errlen, -EINVAL, "%s: %s is not a number", path,
			            knobs[i].key);
		if (x != knobs[i].neutral)
			return errf(errbuf, errlen, -ENOTSUP,
			            "%s: %s %g is not supported for minimax_m2 "
			            "(only %g)",
			            path, knobs[i].key, x, knobs[i].neutral);
	}
	if (qt && strcmp(qt, "per_layer"))
		return errf(errbuf, errlen, -ENOTSUP,
		            "%s: qk_norm_type '%s' is not supported (only "
		            "per_layer: one norm over the whole q and k)",
		            path, qt);
	if (sf && strcmp(sf, "sigmoid"))
		return errf(errbuf, errlen, -ENOTSUP,
		            "%s: scoring_func '%s' is not supported for minimax_m2 "
		            "(only sigmoid)",
		            path, sf);
	return 0;
}

/* rope_dim from rotary_dim, else partial_rotary_factor (top level, then
 * rope_parameters); rope_theta's family default when no file key has one. */
static int rope(json_t *cfg, const char *path, struct coli_model_config *c, char *errbuf,
                size_t errlen)
{
	json_t *rp = json_object_get(cfg, "rope_parameters");
	double rd, prf, theta;

	if (num(cfg, "partial_rotary_factor", 1, &prf) ||
	    (json_is_object(rp) && !json_object_get(cfg, "partial_rotary_factor") &&
	     num(rp, "partial_rotary_factor", 1, &prf)) ||
	    num(cfg, "rotary_dim", prf * c->head_dim, &rd))
		return errf(errbuf, errlen, -EINVAL,
		            "%s: rotary_dim or partial_rotary_factor is not a number", path);
	if (!(rd >= 2 && rd <= c->head_dim) || (long)rd % 2 || rd != (double)(long)rd)
		return errf(errbuf, errlen, -EINVAL,
		            "%s: rotary dims %g: not an even count within head_dim %d", path, rd,
		            c->head_dim);
	c->rope_dim = (int)rd;
	if (num(cfg, "rope_theta", 5e6, &theta) ||
	    (json_is_object(rp) && !json_object_get(cfg, "rope_theta") &&
	     num(rp, "rope_theta", theta, &theta)))
		return errf(errbuf, errlen, -EINVAL, "%s: rope_theta is not a number", path);
	c->rope_theta = (float)theta;
	return 0;
}

int coli_convert_hf_minimax(json_t *cfg, const char *path, struct coli_model_config *c, int *n_mtp,
                            char *errbuf, size_t errlen)
{
	double qkn, bias, mtp, n_mtp_mod, eps, ctx;
	int rc;

	if (num(cfg, "use_qk_norm", 1, &qkn) || num(cfg, "use_routing_bias", 1, &bias) ||
	    num(cfg, "use_mtp", 1, &mtp) || num(cfg, "num_mtp_modules", 0, &n_mtp_mod) ||
	    num(cfg, "rms_norm_eps", 1e-6, &eps) ||
	    num(cfg, "max_position_embeddings", 196608, &ctx))
		return errf(errbuf, errlen, -EINVAL,
		            "%s: a minimax_m2 flag or size is not a number", path);
	if (!(n_mtp_mod >= 0 && n_mtp_mod <= 64) || !(eps > 0 && eps < 1) ||
	    !(ctx >= 1 && ctx <= 1 << 24))
		return errf(errbuf, errlen, -EINVAL,
		            "%s: num_mtp_modules %g, rms_norm_eps %g or "
		            "max_position_embeddings %g out of range",
		            path, n_mtp_mod, eps, ctx);
	rc = refuse_layers(cfg, path, (long)ctx, errbuf, errlen);
	rc = rc ? rc : refuse_knobs(cfg, path, errbuf, errlen);
	rc = rc ? rc : rope(cfg, path, c, errbuf, errlen);
	if (rc)
		return rc;
	c->qk_norm = qkn ? 2 : 0;
	c->qkv_bias = 0;
	c->shared_inter = 0;
	c->norm_topk_prob = 1;
	c->router_kind = COLI_ROUTER_SIGMOID;
	c->router_bias = bias != 0;
	c->n_group = c->topk_group = 1;
	c->routed_scale = 1.0f;
	c->norm_eps = (float)eps;
	c->max_ctx = (int)ctx;
	*n_mtp = mtp ? (int)n_mtp_mod : 0;
	return 0;
}
