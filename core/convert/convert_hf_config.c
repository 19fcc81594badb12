/*
 * core/convert/convert_hf_config.c — a checkpoint's config.json (and
 * generation_config.json's token ids) -> struct coli_model_config, for every
 * family and both dialects transformers writes; what coli cannot run is
 * refused naming the key.
 *
 * Config dialects (keys seen in released checkpoints and in transformers'
 * config classes; defaults are the config classes' defaults, v5):
 *
 *   experts        num_experts (qwen*, olmoe) | num_local_experts (mixtral, qwen3 as
 *                  transformers 5 writes it) | n_routed_experts (glm4_moe)
 *   expert inter   moe_intermediate_size (qwen*, glm4_moe) | intermediate_size (olmoe,
 *                  mixtral)
 *   dense inter    intermediate_size (qwen*, glm4_moe)
 *   MoE layers     qwen*: i not in mlp_only_layers and (i+1) % decoder_sparse_step == 0
 *                  glm4_moe: i >= first_k_dense_replace (default 1)
 *                  olmoe, mixtral: every layer
 *   glm4_moe       sigmoid router with e_score_correction_bias; n_group, topk_group
 *                  (default 1), routed_scaling_factor (1.0), norm_topk_prob (default
 *                  true); n_shared_experts (1) ungated shared experts of
 *                  n_shared_experts * moe_intermediate_size; attention_bias (q/k/v only),
 *                  use_qk_norm (per head); partial_rotary_factor (0.5; top level or in
 *                  rope_parameters): rope_dim = head_dim * factor; layers past
 *                  num_hidden_layers (num_nextn_predict_layers | num_mtp_layers: MTP)
 *                  skipped
 *   minimax_m2     core/convert/convert_minimax.c (after the shared keys)
 *   gpt_oss        core/convert/convert_gptoss.c (after the shared keys): sinks, sliding
 *                  layers, q/k/v/o bias, router and expert biases, clamped SwiGLU;
 *                  YaRN as deepseek_v3's (truncate read)
 *   deepseek_v3    glm4_moe's routing and shared-expert keys (DeepseekV3Config's
 *                  defaults: n_group 8, topk_group 4, first_k_dense_replace 3,
 *                  routed_scaling_factor 2.5); MLA: q_lora_rank (null: a plain q_proj),
 *                  kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim
 *                  (head_dim becomes nope + rope, rope_dim rope); rope_interleave
 *                  (default true: convert de-interleaves the RoPE rows); attention_bias
 *                  refused; YaRN rope scaling
 *   rope theta     rope_theta | rope_parameters.rope_theta | rope_scaling.rope_theta;
 *                  default 10000 (mixtral 1e6)
 *   rope scaling   every family: "yarn" and "linear" (core/convert/convert_rope.c),
 *                  any other rope_type but "default" refused by name
 *   norm_topk_prob qwen3_moe/qwen2_moe/olmoe: key, default false; mixtral: always 1
 *   head_dim       key if present and not null, else hidden / n_heads
 *   n_kv_heads     num_key_value_heads, default n_heads
 *   qkv bias       qwen2_moe: qkv_bias (default true); glm4_moe: attention_bias;
 *                  qwen3_moe/olmoe: attention_bias (default false; true also biases
 *                  o_proj, which coli lacks -> refused)
 *   qk norm        qwen3_moe per head [head_dim]; olmoe whole projection [n*head_dim];
 *                  glm4_moe per head when use_qk_norm
 *   eos            union of generation_config.json's and config.json's eos_token_id
 *                  (int or list); bos_token_id likewise, -1 if none
 *   refused        hidden_act != silu, olmoe clip_qkv, qwen use_sliding_window,
 *                  mixtral sliding_window < max_position_embeddings
 *
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert/convert_internal.h"

/* An integer, or a double holding one (a file read with
 * JSON_DECODE_INT_AS_REAL): 0, or -1 when v is neither or out of range. */
static int json_long(const json_t *v, long *out)
{
	double d;

	if (json_is_integer(v)) {
		*out = (long)json_integer_value(v);
		return 0;
	}
	if (!json_is_real(v))
		return -1;
	d = json_real_value(v);
	if (!(d >= -9.007199254740992e15 && d <= 9.007199254740992e15) || d != (double)(long)d)
		return -1; /* past 2^53 a double no longer holds every integer */
	*out = (long)d;
	return 0;
}

/* Integer key with default; null counts as absent. -1 on a wrong type. */
static int get_int(json_t *o, const char *key, long dflt, long *out)
{
	json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v)) {
		*out = dflt;
		return 0;
	}
	if (json_is_boolean(v)) {
		*out = json_is_true(v);
		return 0;
	}
	return json_long(v, out);
}

/* eos_token_id / bos_token_id: int or list of ints; appended to ids[]. */
static void add_ids(json_t *v, int *ids, int *n, int max)
{
	json_t *e;
	size_t i;
	long x;

	if (!json_long(v, &x)) {
		for (int j = 0; j < *n; j++)
			if (ids[j] == x)
				return;
		if (*n < max && x >= 0)
			ids[(*n)++] = (int)x;
		return;
	}
	json_array_foreach(v, i, e) add_ids(e, ids, n, max);
}

/* RoPE's theta: the top level's, or a nest's. */
static double rope_theta(json_t *cfg, enum coli_arch arch)
{
	static const char *const nests[] = {"rope_parameters", "rope_scaling"};
	double theta = arch == COLI_ARCH_MIXTRAL ? 1e6 : 1e4;
	json_t *v = json_object_get(cfg, "rope_theta");

	if (json_is_number(v))
		theta = json_number_value(v);
	for (int i = 0; i < 2; i++) {
		json_t *p = json_object_get(cfg, nests[i]), *t;

		if (!json_is_object(p)) /* its scaling type: coli_convert_hf_rope */
			continue;
		t = json_object_get(p, "rope_theta");
		if (json_is_number(t))
			theta = json_number_value(t);
	}
	return theta;
}

/* config.json's sizes and flags as read, before they become h->cfg. */
struct hf_keys {
	long nl, hid, nh, nkv, hd, voc, ne, ne2, k, moe_i, inter, sh_i, step, ntp, bias, tie, ctx,
	    swin;
	long nre, n_sh, fkd, ngroup, tkg, nmtp, qkn; /* glm4_moe */
	long q_lora, kv_lora, nope, rope, vhd, ilv;  /* deepseek_v3's MLA */
	double eps, theta, scale, prf;
};

/* model_type -> c->arch (and c->model_type); only silu MLPs. */
static int parse_arch(struct coli_model_config *c, json_t *cfg, const char *path, char *errbuf,
                      size_t errlen)
{
	const char *mt = json_string_value(json_object_get(cfg, "model_type")), *act;

	if (!mt)
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: no \"model_type\" (supported: %s)", path,
		                         coli_arch_supported());
	if (coli_arch_parse(mt, &c->arch))
		return coli_convert_errf(errbuf, errlen, -EPROTONOSUPPORT,
		                         "%s: model_type '%s' is not supported (supported: %s)",
		                         path, mt, coli_arch_supported());
	snprintf(c->model_type, sizeof(c->model_type), "%s", mt);
	act = json_string_value(json_object_get(cfg, "hidden_act"));
	if (act && strcmp(act, "silu"))
		return coli_convert_errf(errbuf, errlen, -ENOTSUP,
		                         "%s: hidden_act '%s' is not supported (only silu)", path,
		                         act);
	return 0;
}

/* The integer keys, with each architecture's defaults. */
static int read_sizes(json_t *cfg, enum coli_arch arch, const char *path, struct hf_keys *s,
                      char *errbuf, size_t errlen)
{
	if (get_int(cfg, "num_hidden_layers", 0, &s->nl) ||
	    get_int(cfg, "hidden_size", 0, &s->hid) ||
	    get_int(cfg, "num_attention_heads", 0, &s->nh) ||
	    get_int(cfg, "num_key_value_heads", s->nh, &s->nkv) ||
	    get_int(cfg, "vocab_size", 0, &s->voc) || get_int(cfg, "num_experts", 0, &s->ne) ||
	    get_int(cfg, "num_local_experts", 0, &s->ne2) ||
	    get_int(cfg, "num_experts_per_tok", 0, &s->k) ||
	    get_int(cfg, "moe_intermediate_size", 0, &s->moe_i) ||
	    get_int(cfg, "intermediate_size", 0, &s->inter) ||
	    get_int(cfg, "shared_expert_intermediate_size", arch == COLI_ARCH_QWEN2_MOE ? 5632 : 0,
	            &s->sh_i) ||
	    get_int(cfg, "decoder_sparse_step", 1, &s->step) ||
	    get_int(cfg, "norm_topk_prob",
	            arch == COLI_ARCH_GLM4_MOE || arch == COLI_ARCH_DEEPSEEK_V3, &s->ntp) ||
	    get_int(cfg, "tie_word_embeddings", 0, &s->tie) ||
	    get_int(cfg, "sliding_window", 0, &s->swin))
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: a size or flag key is not an integer", path);
	if (s->nh <= 0 || s->hid <= 0 || s->nl <= 0)
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: needs positive num_hidden_layers, hidden_size and "
		                         "num_attention_heads",
		                         path);
	if (get_int(cfg, "head_dim", s->hid / s->nh, &s->hd) ||
	    get_int(cfg, "max_position_embeddings",
	            arch == COLI_ARCH_OLMOE || arch == COLI_ARCH_DEEPSEEK_V3 ? 4096
	            : arch == COLI_ARCH_MIXTRAL || arch == COLI_ARCH_GLM4_MOE ||
	                    arch == COLI_ARCH_GPT_OSS
	                ? 131072
	                : 32768,
	            &s->ctx))
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: head_dim or max_position_embeddings "
		                         "is not an integer",
		                         path);
	return 0;
}

/* glm4_moe's keys (Glm4MoeConfig's defaults): routing, shared experts,
 * dense layers, partial RoPE, QK norm, MTP layers; ds: deepseek_v3's
 * (DeepseekV3Config's defaults, full RoPE of its rope head). */
static int read_glm(json_t *cfg, int ds, const char *path, struct hf_keys *s, char *errbuf,
                    size_t errlen)
{
	json_t *rp = json_object_get(cfg, "rope_parameters"), *v;

	if (get_int(cfg, "n_routed_experts", 0, &s->nre) ||
	    get_int(cfg, "n_shared_experts", 1, &s->n_sh) ||
	    get_int(cfg, "first_k_dense_replace", ds ? 3 : 1, &s->fkd) ||
	    get_int(cfg, "n_group", ds ? 8 : 1, &s->ngroup) ||
	    get_int(cfg, "topk_group", ds ? 4 : 1, &s->tkg) ||
	    get_int(cfg, "num_mtp_layers", 0, &s->nmtp) || /* transformers 5's spelling */
	    get_int(cfg, "num_nextn_predict_layers", s->nmtp, &s->nmtp) ||
	    get_int(cfg, "use_qk_norm", 0, &s->qkn))
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: a glm4_moe size or flag is not an integer", path);
	if (s->nre)
		s->ne = s->nre;
	v = json_object_get(cfg, "routed_scaling_factor");
	s->scale = json_is_number(v) ? json_number_value(v) : ds ? 2.5 : 1.0;
	/* transformers 5 moves partial_rotary_factor into rope_parameters */
	v = json_object_get(cfg, "partial_rotary_factor");
	if (!json_is_number(v) && json_is_object(rp))
		v = json_object_get(rp, "partial_rotary_factor");
	s->prf = json_is_number(v) ? json_number_value(v) : ds ? 1.0 : 0.5;
	if (!(s->prf > 0 && s->prf <= 1) || (long)(s->hd * s->prf) % 2 || s->n_sh < 0 ||
	    s->nmtp < 0 || s->fkd < 0)
		return coli_convert_errf(
		    errbuf, errlen, -EINVAL,
		    "%s: partial_rotary_factor %g (head_dim %ld), n_shared_experts, "
		    "first_k_dense_replace or num_nextn_predict_layers out of range",
		    path, s->prf, s->hd);
	return 0;
}

/* deepseek_v3's MLA sizes (DeepseekV3Config's defaults). */
static int read_mla(json_t *cfg, const char *path, struct hf_keys *s, char *errbuf, size_t errlen)
{
	if (get_int(cfg, "q_lora_rank", 1536, &s->q_lora) ||
	    get_int(cfg, "kv_lora_rank", 512, &s->kv_lora) ||
	    get_int(cfg, "qk_nope_head_dim", 128, &s->nope) ||
	    get_int(cfg, "qk_rope_head_dim", 64, &s->rope) ||
	    get_int(cfg, "v_head_dim", 128, &s->vhd) ||
	    get_int(cfg, "rope_interleave", 1, &s->ilv) ||
	    get_int(cfg, "attention_bias", 0, &s->bias))
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: an MLA size or flag is not an integer", path);
	/* q_lora_rank null is a plain q_proj: get_int reads null as absent */
	if (json_is_null(json_object_get(cfg, "q_lora_rank")))
		s->q_lora = 0;
	if (s->bias)
		return coli_convert_errf(errbuf, errlen, -ENOTSUP,
		                         "%s: attention_bias=true is not supported for deepseek_v3 "
		                         "(q_a_proj and kv_a_proj_with_mqa biases)",
		                         path);
	if (s->q_lora < 0 || s->q_lora > 1 << 16 || s->kv_lora <= 0 || s->kv_lora > 1 << 14 ||
	    s->nope <= 0 || s->rope <= 0 || s->rope % 2 || s->vhd <= 0 || s->nope + s->rope < 16 ||
	    s->nope + s->rope > 1024 || s->vhd > 1024)
		return coli_convert_errf(
		    errbuf, errlen, -EINVAL,
		    "%s: MLA sizes out of range (q_lora_rank %ld, kv_lora_rank "
		    "%ld, qk_nope_head_dim %ld, qk_rope_head_dim %ld (even), "
		    "v_head_dim %ld)",
		    path, s->q_lora, s->kv_lora, s->nope, s->rope, s->vhd);
	return 0;
}

/* The attention and RoPE variants coli runs, and the ones it refuses; the
 * norm's eps and RoPE's theta. */
static int read_attention(json_t *cfg, enum coli_arch arch, const char *mt, const char *path,
                          struct hf_keys *s, char *errbuf, size_t errlen)
{
	int qwen = arch == COLI_ARCH_QWEN3_MOE || arch == COLI_ARCH_QWEN2_MOE;
	json_t *v;

	if (arch == COLI_ARCH_QWEN2_MOE) {
		if (get_int(cfg, "qkv_bias", 1, &s->bias))
			return coli_convert_errf(errbuf, errlen, -EINVAL,
			                         "%s: qkv_bias not a boolean", path);
	} else if (arch == COLI_ARCH_DEEPSEEK_V3) { /* read_mla refuses a bias */
	} else if (arch == COLI_ARCH_GPT_OSS) {     /* q/k/v/o: convert_gptoss.c */
	} else if (arch == COLI_ARCH_GLM4_MOE) {    /* q, k and v only: o_proj has none */
		if (get_int(cfg, "attention_bias", 0, &s->bias))
			return coli_convert_errf(errbuf, errlen, -EINVAL,
			                         "%s: attention_bias not a boolean", path);
	} else if (get_int(cfg, "attention_bias", 0, &s->bias) || s->bias) {
		return coli_convert_errf(
		    errbuf, errlen, -ENOTSUP,
		    "%s: attention_bias=true is not supported for %s (it adds an o_proj "
		    "bias coli does not have)",
		    path, mt);
	}
	if (arch == COLI_ARCH_OLMOE && json_is_number(json_object_get(cfg, "clip_qkv")))
		return coli_convert_errf(errbuf, errlen, -ENOTSUP, "%s: clip_qkv is not supported",
		                         path);
	if (qwen && json_is_true(json_object_get(cfg, "use_sliding_window")))
		return coli_convert_errf(errbuf, errlen, -ENOTSUP,
		                         "%s: use_sliding_window=true is not supported", path);
	if (arch == COLI_ARCH_MIXTRAL && s->swin > 0 && s->swin < s->ctx)
		return coli_convert_errf(
		    errbuf, errlen, -ENOTSUP,
		    "%s: sliding_window %ld < max_position_embeddings is not supported", path,
		    s->swin);
	v = json_object_get(cfg, "rms_norm_eps");
	s->eps = json_is_number(v) ? json_number_value(v) : qwen ? 1e-6 : 1e-5;
	s->theta = rope_theta(cfg, arch);
	if (!(s->theta > 0))
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: rope_theta %g is not positive", path, s->theta);
	return 0;
}

/* glm4_moe's fields of c, after fill_config. */
static void fill_glm(struct coli_model_config *c, const struct hf_keys *s)
{
	c->shared_inter = (int)(s->n_sh * s->moe_i);
	c->shared_gated = 0;
	c->qkv_bias = !!s->bias;
	c->qk_norm = s->qkn ? 1 : 0;
	c->rope_dim = (int)(s->hd * s->prf);
	c->router_kind = COLI_ROUTER_SIGMOID;
	c->router_bias = 1;
	c->n_group = (int)s->ngroup;
	c->topk_group = (int)s->tkg;
	c->routed_scale = (float)s->scale;
}

static void fill_config(struct coli_model_config *c, const struct hf_keys *s, int qwen,
                        enum coli_dtype quant)
{
	c->n_layers = (int)s->nl;
	c->hidden = (int)s->hid;
	c->n_heads = (int)s->nh;
	c->n_kv_heads = (int)s->nkv;
	c->head_dim = (int)s->hd;
	c->vocab = (int)s->voc;
	c->n_experts = (int)(s->ne ? s->ne : s->ne2);
	c->top_k = (int)s->k;
	c->moe_inter = (int)(qwen ? s->moe_i : s->inter);
	c->shared_inter = c->arch == COLI_ARCH_QWEN2_MOE ? (int)s->sh_i : 0;
	c->norm_topk_prob = c->arch == COLI_ARCH_MIXTRAL ? 1 : !!s->ntp;
	c->qk_norm = c->arch == COLI_ARCH_QWEN3_MOE ? 1 : c->arch == COLI_ARCH_OLMOE ? 2 : 0;
	c->qkv_bias = c->arch == COLI_ARCH_QWEN2_MOE ? !!s->bias : 0;
	c->tie_embeddings = !!s->tie;
	c->max_ctx = (int)s->ctx;
	c->norm_eps = (float)s->eps;
	c->rope_theta = (float)s->theta;
	c->rope_dim = c->head_dim;
	c->quant = quant;
	if (c->arch == COLI_ARCH_GLM4_MOE || c->arch == COLI_ARCH_DEEPSEEK_V3)
		fill_glm(c, s);
	if (c->arch == COLI_ARCH_DEEPSEEK_V3) { /* MLA: the query/key head is nope + rope */
		c->qk_norm = 0;
		c->qkv_bias = 0;
		c->n_kv_heads = c->n_heads;
		c->head_dim = (int)(s->nope + s->rope);
		c->rope_dim = (int)s->rope;
		c->q_lora = (int)s->q_lora;
		c->kv_lora = (int)s->kv_lora;
		c->qk_nope = (int)s->nope;
		c->v_head = (int)s->vhd;
	}
}

/* Which layers are MoE (Qwen: every decoder_sparse_step-th, less
 * mlp_only_layers), and the dense MLP's width when any is not. */
static void moe_layers(struct coli_model_config *c, json_t *cfg, const struct hf_keys *s, int qwen)
{
	json_t *mlp_only = json_object_get(cfg, "mlp_only_layers");
	int any_dense = 0;

	for (int i = 0; i < c->n_layers; i++) {
		int moe = c->n_experts > 0;

		if (c->arch == COLI_ARCH_GLM4_MOE || c->arch == COLI_ARCH_DEEPSEEK_V3)
			moe = moe && i >= s->fkd;
		else if (qwen) {
			json_t *e;
			size_t j;

			moe = moe && s->step > 0 && (i + 1) % s->step == 0;
			json_array_foreach(mlp_only, j, e)
			{
				long x;

				if (!json_long(e, &x) && x == i)
					moe = 0;
			}
		}
		c->is_moe_layer[i] = moe;
		any_dense |= !moe;
	}
	c->dense_inter = any_dense ? (int)s->inter : 0;
}

/* bos (generation_config.json first) and every eos id of both files. */
static void special_ids(struct coli_model_config *c, json_t *cfg, json_t *gen)
{
	int bos[1], nb = 0;

	c->bos = -1;
	add_ids(json_object_get(gen, "bos_token_id"), bos, &nb, 1);
	add_ids(json_object_get(cfg, "bos_token_id"), bos, &nb, 1);
	if (nb)
		c->bos = bos[0];
	add_ids(json_object_get(gen, "eos_token_id"), c->eos, &c->n_eos, COLI_MAX_EOS);
	add_ids(json_object_get(cfg, "eos_token_id"), c->eos, &c->n_eos, COLI_MAX_EOS);
}

/* config.json -> h->cfg. */
int coli_convert_hf_config(struct coli_convert_hf *h, json_t *cfg, json_t *gen,
                           enum coli_dtype quant, char *errbuf, size_t errlen)
{
	struct coli_model_config *c = &h->cfg;
	struct hf_keys s = {0};
	char path[4096];
	int qwen, rc;

	snprintf(path, sizeof(path), "%s/config.json", h->dir);
	coli_config_init(c);
	rc = parse_arch(c, cfg, path, errbuf, errlen);
	if (rc)
		return rc;
	/* qwen: moe_intermediate_size and intermediate_size are the expert's and
	 * the dense layers' (glm4_moe spells them the same) */
	qwen = c->arch == COLI_ARCH_QWEN3_MOE || c->arch == COLI_ARCH_QWEN2_MOE ||
	       c->arch == COLI_ARCH_GLM4_MOE || c->arch == COLI_ARCH_DEEPSEEK_V3;
	rc = read_sizes(cfg, c->arch, path, &s, errbuf, errlen);
	if (!rc && (c->arch == COLI_ARCH_GLM4_MOE || c->arch == COLI_ARCH_DEEPSEEK_V3))
		rc = read_glm(cfg, c->arch == COLI_ARCH_DEEPSEEK_V3, path, &s, errbuf, errlen);
	if (!rc && c->arch == COLI_ARCH_DEEPSEEK_V3)
		rc = read_mla(cfg, path, &s, errbuf, errlen);
	h->n_mtp = (int)s.nmtp;
	h->rope_interleave = c->arch == COLI_ARCH_DEEPSEEK_V3 && s.ilv;
	rc = rc ? rc : read_attention(cfg, c->arch, c->model_type, path, &s, errbuf, errlen);
	if (rc)
		return rc;
	fill_config(c, &s, qwen, quant);
	if ((rc = coli_convert_hf_rope(cfg, c, path, errbuf, errlen)))
		return rc;
	if (s.nl > COLI_MAX_LAYERS)
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: %ld layers (coli supports at most %d)", path, s.nl,
		                         COLI_MAX_LAYERS);
	if (c->arch == COLI_ARCH_MINIMAX_M2) {
		rc = coli_convert_hf_minimax(cfg, path, c, &h->n_mtp, errbuf, errlen);
		if (rc)
			return rc;
	}
	if (c->arch == COLI_ARCH_GPT_OSS &&
	    (rc = coli_convert_hf_gptoss(cfg, path, c, errbuf, errlen)))
		return rc;
	moe_layers(c, cfg, &s, qwen);
	special_ids(c, cfg, gen);
	return 0;
}
