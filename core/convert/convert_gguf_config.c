/*
 * core/convert/convert_gguf_config.c — a GGUF's {arch}.* metadata (llama.cpp's
 * key names: gguf-py's constants.py, as convert_hf_to_gguf.py writes them)
 * -> struct coli_model_config, the model the Hugging Face path
 * (core/convert/convert_hf_config.c) builds from the same checkpoint.
 *
 * Every family: block_count, embedding_length, attention.head_count,
 * expert_count, expert_used_count (required); attention.head_count_kv,
 * key_length, value_length, expert_feed_forward_length, context_length,
 * attention.layer_norm_rms_epsilon, rope.freq_base; nextn_predict_layers:
 * the last that many blocks are MTP layers, skipped (n_layers = block_count
 * less them). Which layers are MoE and the dense and shared-expert widths
 * come from the tensors present (blk.N.ffn_gate_inp makes layer N MoE).
 * tokenizer.ggml.bos/eos/eot_token_id are the special ids.
 *
 *   qwen3moe, qwen2moe, olmoe, llama (with experts: Mixtral)
 *              full RoPE; expert_weights_norm (default: qwen3moe and llama
 *              normalize, the others not); qwen2moe's shared expert is
 *              gated (ffn_gate_inp_shexp)
 *   glm4moe    rope.dimension_count (partial RoPE; default head_dim / 2,
 *              Glm4MoeConfig's), expert_gating_func sigmoid (2; absent means
 *              it), blk.N.exp_probs_b the selection bias,
 *              expert_group_count / expert_group_used_count (1),
 *              expert_weights_scale (1), expert_weights_norm (default true),
 *              an ungated shared expert, q/k/v biases and per-head q/k norms
 *              when the tensors are there
 *   deepseek2  MLA: attention.kv_lora_rank, attention.q_lora_rank (absent or
 *              0: a plain attn_q), rope.dimension_count (the rope head),
 *              key_length_mla / value_length_mla (nope + rope, v head; older
 *              files: key_length / value_length, whose newer meaning is
 *              kv_lora + rope / kv_lora); head_count_kv is ignored (MQA in
 *              llama.cpp's terms, every head's in coli's); the RoPE rows stay
 *              interleaved as in the checkpoint (h->rope_interleave); routing
 *              as glm4moe's but expert_weights_norm absent means false (the
 *              converter writes it only when true) and the gating function
 *              must be sigmoid (DeepSeek-V2's softmax is refused); YaRN:
 *              rope.scaling.factor, .original_context_length, .yarn_beta_fast,
 *              .yarn_beta_slow, .yarn_attn_factor, and .yarn_log_multiplier,
 *              which is 0.1 * mscale_all_dim (mscale 1, DeepSeek's)
 *   gpt-oss    attention.sliding_window on every other layer (even layers
 *              slide, llama.cpp's swa pattern 2; an integer
 *              attention.sliding_window_pattern n: layer l slides when l % n
 *              < n - 1), attn_sinks, q/k/v/o biases, router and expert
 *              biases, the clamped SwiGLU with llama.cpp's constants (alpha
 *              1.702, limit 7: GGUF has no key for them), YaRN (keys as
 *              deepseek2's, the correction range not truncated: gpt-oss's
 *              "truncate": false)
 *   minimax-m2 rope.dimension_count, sigmoid routing with exp_probs_b,
 *              q/k norms over the whole projection, no shared expert
 *
 * Refused by name: RoPE scaling other than YaRN (and YaRN outside deepseek2
 * and gpt-oss), value_length != key_length outside MLA, a gating function
 * the family does not route with, an array sliding_window_pattern.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/convert/convert_gguf.h"

const struct coli_gguf_tensor *coli_convert_gguf_find(struct gg *s, const char *name)
{
	const struct coli_gguf_tensor *t = NULL;

	for (int p = 0; p < s->n_parts && !t; p++)
		t = coli_gguf_tensor_find(&s->parts[p], name);
	return t;
}

const struct coli_gguf_tensor *coli_convert_gguf_tensor(struct gg *s, int l, const char *suffix)
{
	char n[96];

	snprintf(n, sizeof(n), "blk.%d.%s", l, suffix);
	return coli_convert_gguf_find(s, n);
}

/* "{arch}.suffix" as an unsigned integer: -ENOENT when absent (*out = dflt). */
static int arch_u64(struct gg *s, const char *suffix, uint64_t dflt, uint64_t *out)
{
	char key[128];
	int rc;

	snprintf(key, sizeof(key), "%s.%s", s->arch, suffix);
	*out = dflt;
	rc = coli_gguf_get_u64(s->g, key, out);
	if (rc && rc != -ENOENT)
		return coli_convert_errf(s->errbuf, s->errlen, rc, "%s", coli_io_errmsg());
	if (rc == 0 && *out > (1u << 30))
		return coli_convert_errf(s->errbuf, s->errlen, -EINVAL,
		                         "%s: %s = %llu is out of range", s->path, key,
		                         (unsigned long long)*out);
	return rc;
}

/* An optional number: absent is dflt. */
static int arch_f64(struct gg *s, const char *suffix, double dflt, double *out)
{
	char key[128];
	int rc;

	snprintf(key, sizeof(key), "%s.%s", s->arch, suffix);
	*out = dflt;
	rc = coli_gguf_get_f64(s->g, key, out);
	if (rc && rc != -ENOENT)
		return coli_convert_errf(s->errbuf, s->errlen, rc, "%s", coli_io_errmsg());
	if (!rc && !(*out >= -1e30 && *out <= 1e30))
		return coli_convert_errf(s->errbuf, s->errlen, -EINVAL, "%s: %s is not finite",
		                         s->path, key);
	return 0;
}

/* The keys a family needs. */
static int need(struct gg *s, const char *suffix, uint64_t *out)
{
	int rc = arch_u64(s, suffix, 0, out);

	if (rc == -ENOENT)
		return coli_convert_errf(s->errbuf, s->errlen, -EINVAL, "%s: no %s.%s key", s->path,
		                         s->arch, suffix);
	return rc;
}

/* An optional key: absent is its default, not an error. */
static int opt(struct gg *s, const char *suffix, uint64_t dflt, uint64_t *out)
{
	int rc = arch_u64(s, suffix, dflt, out);

	return rc == -ENOENT ? 0 : rc;
}

/* A boolean key: dflt when absent. */
static int arch_bool(struct gg *s, const char *suffix, int dflt)
{
	char key[128];
	const struct coli_gguf_kv *kv;

	snprintf(key, sizeof(key), "%s.%s", s->arch, suffix);
	kv = coli_gguf_find(s->g, key);
	return kv && kv->type == COLI_GGUF_BOOL ? !!kv->v.u : dflt;
}

/* Which layers are MoE, and the widths the tensors imply where no key says. */
static int layer_kinds(struct gg *s, struct coli_model_config *c)
{
	const struct coli_gguf_tensor *t;
	uint64_t v;
	int rc;

	c->dense_inter = 0;
	for (int l = 0; l < c->n_layers; l++) {
		c->is_moe_layer[l] = coli_convert_gguf_tensor(s, l, "ffn_gate_inp.weight") != NULL;
		t = coli_convert_gguf_tensor(s, l, "ffn_gate.weight");
		if (!c->is_moe_layer[l] && t && !c->dense_inter)
			c->dense_inter = (int)t->ne[1];
		if (c->is_moe_layer[l] && !c->moe_inter &&
		    (t = coli_convert_gguf_tensor(s, l, "ffn_gate_exps.weight")))
			c->moe_inter = (int)t->ne[1];
		if (c->is_moe_layer[l] && !c->shared_inter &&
		    (t = coli_convert_gguf_tensor(s, l, "ffn_gate_shexp.weight")))
			c->shared_inter = (int)t->ne[1];
	}
	rc = arch_u64(s, "feed_forward_length", 0, &v);
	if (rc && rc != -ENOENT)
		return rc;
	for (int l = 0; l < c->n_layers && !c->dense_inter; l++)
		if (!c->is_moe_layer[l])
			c->dense_inter = (int)v;
	return 0;
}

/* bos, and eos then eot (llama.cpp's end of turn) as the stop ids. */
static void special_ids(struct gg *s, struct coli_model_config *c)
{
	uint64_t id;

	c->bos = -1;
	if (!coli_gguf_get_u64(s->g, "tokenizer.ggml.bos_token_id", &id) && id < (1u << 30))
		c->bos = (int)id;
	for (int i = 0; i < 2; i++) {
		const char *k = i ? "tokenizer.ggml.eot_token_id" : "tokenizer.ggml.eos_token_id";

		if (!coli_gguf_get_u64(s->g, k, &id) && id < (1u << 30) &&
		    !(c->n_eos && c->eos[0] == (int)id))
			c->eos[c->n_eos++] = (int)id;
	}
}

/* expert_gating_func (llama.cpp: 1 softmax, 2 sigmoid) must be want;
 * absent reads as dflt (deepseek2: softmax, DeepSeek-V2's files). */
static int gating(struct gg *s, uint64_t want, uint64_t dflt)
{
	uint64_t f;
	int absent = arch_u64(s, "expert_gating_func", dflt, &f) == -ENOENT;
	int rc = opt(s, "expert_gating_func", dflt, &f);

	if (rc)
		return rc;
	if (f != want)
		return coli_convert_errf(s->errbuf, s->errlen, -ENOTSUP,
		                         "%s: %s.expert_gating_func %llu%s is not supported for %s "
		                         "(only %s)",
		                         s->path, s->arch, (unsigned long long)f,
		                         absent ? " (absent: softmax)" : "", s->arch,
		                         want == 2 ? "2, sigmoid" : "1, softmax");
	return 0;
}

/* Sigmoid routing with a selection bias, groups, scale (glm4moe, deepseek2,
 * minimax-m2); norm: expert_weights_norm's default. */
static int sigmoid_router(struct gg *s, struct coli_model_config *c, int norm)
{
	uint64_t ng, tg;
	double scale;
	int rc;

	if ((rc = gating(s, 2, s->family == COLI_ARCH_DEEPSEEK_V3 ? 1 : 2)) ||
	    (rc = opt(s, "expert_group_count", 1, &ng)) ||
	    (rc = opt(s, "expert_group_used_count", 1, &tg)) ||
	    (rc = arch_f64(s, "expert_weights_scale", 1.0, &scale)))
		return rc;
	c->router_kind = COLI_ROUTER_SIGMOID;
	c->router_bias = 1;
	c->n_group = ng ? (int)ng : 1;
	c->topk_group = tg ? (int)tg : 1;
	c->routed_scale = scale > 0 ? (float)scale : 1.0f; /* 0: llama.cpp's "no scale" */
	c->norm_topk_prob = arch_bool(s, "expert_weights_norm", norm);
	c->shared_gated = 0;
	return 0;
}

/* rope.dimension_count: even, at most the head. */
static int rope_dims(struct gg *s, struct coli_model_config *c, uint64_t dflt)
{
	uint64_t rd;
	int rc = opt(s, "rope.dimension_count", dflt, &rd);

	if (rc)
		return rc;
	if (!rd || rd % 2 || rd > (uint64_t)c->head_dim)
		return coli_convert_errf(s->errbuf, s->errlen, -EINVAL,
		                         "%s: %s.rope.dimension_count %llu: need an even count "
		                         "up to the head (%d)",
		                         s->path, s->arch, (unsigned long long)rd, c->head_dim);
	c->rope_dim = (int)rd;
	return 0;
}

/* rope.scaling.*: none, or YaRN where the family has it (yarn != 0): deepseek2's
 * and gpt-oss's, with llama.cpp's attn_factor and log multiplier. */
static int rope_scaling(struct gg *s, struct coli_model_config *c, int yarn)
{
	const struct coli_gguf_kv *kv;
	uint64_t orig;
	double f, bf, bs, attn, lm;
	char key[128];
	int rc;

	snprintf(key, sizeof(key), "%s.rope.scaling.type", s->arch);
	kv = coli_gguf_find(s->g, key);
	if (!kv || kv->type != COLI_GGUF_STR || (kv->len == 4 && !memcmp(kv->s, "none", 4)))
		return 0;
	if (!yarn || kv->len != 4 || memcmp(kv->s, "yarn", 4))
		return coli_convert_errf(s->errbuf, s->errlen, -ENOTSUP,
		                         "%s: %s '%.*s' is not supported for %s (%s)", s->path, key,
		                         (int)(kv->len < 64 ? kv->len : 64), kv->s, s->arch,
		                         yarn ? "only yarn" : "only default RoPE");
	if ((rc = arch_f64(s, "rope.scaling.factor", 0, &f)) ||
	    (rc = opt(s, "rope.scaling.original_context_length", 0, &orig)) ||
	    (rc = arch_f64(s, "rope.scaling.yarn_beta_fast", 32, &bf)) ||
	    (rc = arch_f64(s, "rope.scaling.yarn_beta_slow", 1, &bs)) ||
	    (rc = arch_f64(s, "rope.scaling.yarn_attn_factor", 0, &attn)) ||
	    (rc = arch_f64(s, "rope.scaling.yarn_log_multiplier", 0, &lm)))
		return rc;
	if (!(f >= 1 && f < 1e6) || !orig || orig > (1u << 24) || !(bf > 0 && bf < 1e6) ||
	    !(bs > 0 && bs < 1e6) || !(attn >= 0 && attn < 1e6) || !(lm >= 0 && lm < 1e5))
		return coli_convert_errf(
		    s->errbuf, s->errlen, -EINVAL,
		    "%s: %s.rope.scaling: YaRN factor %g (1..1e6), "
		    "original_context_length %llu, beta_fast %g, beta_slow %g, "
		    "attn_factor %g or yarn_log_multiplier %g out of range",
		    s->path, s->arch, f, (unsigned long long)orig, bf, bs, attn, lm);
	c->rope_factor = (float)f;
	c->rope_orig_ctx = (int)orig;
	c->yarn_beta_fast = (float)bf;
	c->yarn_beta_slow = (float)bs;
	c->yarn_attn = (float)attn;
	/* deepseek2: 0.1 * mscale_all_dim, stored as f32: back to the config's
	 * decimal (6 digits) so the float is the one config.json gives */
	if (lm > 0) {
		c->yarn_mscale = 1.0f;
		c->yarn_mscale_all = (float)(round(lm / 0.1 * 1e6) / 1e6);
	}
	c->yarn_truncate = s->family != COLI_ARCH_GPT_OSS;
	return 0;
}

/* deepseek2's MLA sizes. */
static int mla(struct gg *s, struct coli_model_config *c)
{
	uint64_t kvl, ql, kl, vl;
	char key[128];
	int rc, new_keys;

	snprintf(key, sizeof(key), "%s.attention.key_length_mla", s->arch);
	new_keys = coli_gguf_find(s->g, key) != NULL;
	if ((rc = need(s, "attention.kv_lora_rank", &kvl)) ||
	    (rc = opt(s, "attention.q_lora_rank", 0, &ql)) ||
	    (rc = need(s, new_keys ? "attention.key_length_mla" : "attention.key_length", &kl)) ||
	    (rc = need(s, new_keys ? "attention.value_length_mla" : "attention.value_length", &vl)))
		return rc;
	c->head_dim = (int)kl;
	if ((rc = rope_dims(s, c, 0)))
		return rc;
	if (!kvl || kvl > 1 << 14 || ql > 1 << 16 || kl <= (uint64_t)c->rope_dim || kl < 16 ||
	    kl > 1024 || !vl || vl > 1024)
		return coli_convert_errf(s->errbuf, s->errlen, -EINVAL,
		                         "%s: MLA sizes out of range (kv_lora_rank %llu, "
		                         "q_lora_rank %llu, key_length%s %llu, value_length%s "
		                         "%llu, rope.dimension_count %d)",
		                         s->path, (unsigned long long)kvl, (unsigned long long)ql,
		                         new_keys ? "_mla" : "", (unsigned long long)kl,
		                         new_keys ? "_mla" : "", (unsigned long long)vl,
		                         c->rope_dim);
	c->kv_lora = (int)kvl;
	c->q_lora = (int)ql;
	c->qk_nope = (int)kl - c->rope_dim;
	c->v_head = (int)vl;
	c->n_kv_heads = c->n_heads;
	c->qk_norm = 0;
	c->qkv_bias = 0;
	return 0;
}

/* gpt-oss: sliding layers, sinks, biases, the clamped SwiGLU. */
static int gpt_oss(struct gg *s, struct coli_model_config *c)
{
	const struct coli_gguf_kv *kv;
	uint64_t win, n;
	char key[128];
	int rc;

	if ((rc = gating(s, 1, 1)) || (rc = opt(s, "attention.sliding_window", 0, &win)))
		return rc;
	snprintf(key, sizeof(key), "%s.attention.sliding_window_pattern", s->arch);
	kv = coli_gguf_find(s->g, key);
	if (kv && kv->type == COLI_GGUF_ARR)
		return coli_convert_errf(s->errbuf, s->errlen, -ENOTSUP,
		                         "%s: %s as an array is not supported (only a period)",
		                         s->path, key);
	if ((rc = opt(s, "attention.sliding_window_pattern", 2, &n)))
		return rc;
	for (int l = 0; l < c->n_layers; l++)
		c->is_sliding_layer[l] = win && n && (uint64_t)l % n < n - 1;
	c->sliding_window = (int)win;
	c->qkv_bias = c->attn_o_bias = coli_convert_gguf_tensor(s, 0, "attn_q.bias") != NULL;
	c->attn_sinks = 1;
	c->router_kind = COLI_ROUTER_SOFTMAX;
	c->router_bias = 1;
	c->norm_topk_prob = 1; /* softmax over the top-k logits */
	c->expert_bias = 1;
	c->ffn_act = COLI_ACT_SWIGLU_OAI;
	c->act_alpha = 1.702f; /* llama.cpp's gpt-oss graph: no key holds them */
	c->act_limit = 7.0f;
	c->shared_inter = 0;
	return 0;
}

/* The family's own keys over what the shared ones filled. */
static int family(struct gg *s, struct coli_convert_hf *h)
{
	struct coli_model_config *c = &h->cfg;
	int rc = 0;

	switch (s->family) {
	case COLI_ARCH_GLM4_MOE:
		rc = rope_dims(s, c, (uint64_t)c->head_dim / 2);
		rc = rc ? rc : sigmoid_router(s, c, 1);
		c->qkv_bias = coli_convert_gguf_tensor(s, 0, "attn_q.bias") != NULL;
		c->qk_norm = coli_convert_gguf_tensor(s, 0, "attn_q_norm.weight") ? 1 : 0;
		break;
	case COLI_ARCH_DEEPSEEK_V3:
		rc = mla(s, c);
		rc = rc ? rc : sigmoid_router(s, c, 0);
		h->rope_interleave = 1; /* the checkpoint's order: llama.cpp ropes pairs */
		break;
	case COLI_ARCH_GPT_OSS:
		rc = gpt_oss(s, c);
		break;
	case COLI_ARCH_MINIMAX_M2:
		rc = rope_dims(s, c, (uint64_t)c->head_dim);
		rc = rc ? rc : sigmoid_router(s, c, 1);
		c->qk_norm = coli_convert_gguf_tensor(s, 0, "attn_q_norm.weight") ? 2 : 0;
		c->shared_inter = 0;
		break;
	default:
		break;
	}
	/* deepseek2 and gpt-oss: their YaRN with llama.cpp's corrections (above);
	 * the others: none, linear or plain YaRN (core/convert/convert_rope.c) */
	if (!rc && (s->family == COLI_ARCH_DEEPSEEK_V3 || s->family == COLI_ARCH_GPT_OSS))
		rc = rope_scaling(s, c, 1);
	else if (!rc)
		rc = coli_convert_gguf_rope(s->g, s->arch, c, s->path, s->errbuf, s->errlen);
	return rc;
}

int coli_convert_gguf_config(struct gg *s, struct coli_convert_hf *h, enum coli_dtype quant)
{
	struct coli_model_config *c = &h->cfg;
	const struct coli_gguf_tensor *emb = coli_convert_gguf_find(s, "token_embd.weight");
	uint64_t nl, hid, nh, nkv, hd, vd, ne, k, mi, si, ctx, mtp;
	double eps, theta;
	int rc, qwen3 = s->family == COLI_ARCH_QWEN3_MOE, mixtral = s->family == COLI_ARCH_MIXTRAL;
	int mla_fam = s->family == COLI_ARCH_DEEPSEEK_V3;

	coli_config_init(c);
	c->arch = s->family;
	snprintf(c->model_type, sizeof(c->model_type), "%s", coli_arch_name(c->arch));
	if (mixtral && arch_u64(s, "expert_count", 0, &ne) == -ENOENT)
		return coli_convert_errf(s->errbuf, s->errlen, -EPROTONOSUPPORT,
		                         "%s: architecture 'llama' without llama.expert_count is a "
		                         "dense model, which coli does not run",
		                         s->path);
	if ((rc = need(s, "block_count", &nl)) || (rc = need(s, "embedding_length", &hid)) ||
	    (rc = need(s, "attention.head_count", &nh)) || (rc = need(s, "expert_count", &ne)) ||
	    (rc = need(s, "expert_used_count", &k)) ||
	    (rc = opt(s, "nextn_predict_layers", 0, &mtp)))
		return rc;
	if (mtp >= nl)
		return coli_convert_errf(s->errbuf, s->errlen, -EINVAL,
		                         "%s: nextn_predict_layers %llu of %llu blocks leaves none",
		                         s->path, (unsigned long long)mtp, (unsigned long long)nl);
	nl -= mtp; /* the MTP blocks come last: skipped */
	if (!nl || nl > COLI_MAX_LAYERS || !nh || !hid)
		return coli_convert_errf(
		    s->errbuf, s->errlen, -EINVAL,
		    "%s: block_count %llu, embedding_length %llu, head_count %llu: need "
		    "1..%d layers and positive sizes",
		    s->path, (unsigned long long)nl, (unsigned long long)hid,
		    (unsigned long long)nh, COLI_MAX_LAYERS);
	if (!emb || emb->ndim != 2)
		return coli_convert_errf(s->errbuf, s->errlen, -EINVAL,
		                         "%s: no 2-D token_embd.weight", s->path);
	if ((rc = opt(s, "attention.head_count_kv", nh, &nkv)) ||
	    (rc = opt(s, "attention.key_length", hid / nh, &hd)) ||
	    (rc = opt(s, "attention.value_length", hd, &vd)) ||
	    (rc = opt(s, "expert_feed_forward_length", 0, &mi)) ||
	    (rc = opt(s, "expert_shared_feed_forward_length", 0, &si)) ||
	    (rc = opt(s, "context_length", 32768, &ctx)) ||
	    (rc = arch_f64(s, "attention.layer_norm_rms_epsilon", 1e-6, &eps)) ||
	    (rc = arch_f64(s, "rope.freq_base", 10000, &theta)))
		return rc;
	if (vd != hd && !mla_fam)
		return coli_convert_errf(
		    s->errbuf, s->errlen, -ENOTSUP,
		    "%s: attention.value_length %llu != key_length %llu is not supported", s->path,
		    (unsigned long long)vd, (unsigned long long)hd);
	s->n_main = (int)nl;
	h->n_mtp = (int)mtp;
	c->n_layers = (int)nl;
	c->hidden = (int)hid;
	c->n_heads = (int)nh;
	c->n_kv_heads = (int)nkv;
	c->head_dim = (int)hd;
	c->rope_dim = c->head_dim; /* full RoPE unless the family's key says */
	c->vocab = (int)(emb->ne[1] < (1u << 30) ? emb->ne[1] : 0);
	c->n_experts = (int)ne;
	c->top_k = (int)k;
	c->moe_inter = (int)mi;
	c->shared_inter = c->arch == COLI_ARCH_QWEN2_MOE ? (int)si : 0;
	/* llama.cpp normalizes qwen3moe's and Mixtral's top-k weights and not
	 * qwen2moe's or olmoe's unless {arch}.expert_weights_norm says otherwise */
	c->norm_topk_prob = arch_bool(s, "expert_weights_norm", qwen3 || mixtral);
	c->qk_norm = qwen3 ? 1 : c->arch == COLI_ARCH_OLMOE ? 2 : 0; /* olmoe: whole width */
	c->qkv_bias = (c->arch == COLI_ARCH_QWEN2_MOE || c->arch == COLI_ARCH_OLMOE) &&
	              coli_convert_gguf_tensor(s, 0, "attn_q.bias");
	c->tie_embeddings = !coli_convert_gguf_find(s, "output.weight");
	c->max_ctx = (int)ctx;
	c->norm_eps = (float)eps;
	c->rope_theta = (float)theta;
	c->quant = quant;
	special_ids(s, c);
	if ((rc = family(s, h)))
		return rc;
	return layer_kinds(s, c);
}
