/*
 * core/convert/convert_rope.c — a Hugging Face config's RoPE scaling into the
 * model config, for every family: rope_scaling (the Hub's files: "type" or
 * "rope_type", rope_theta at the top) or rope_parameters (transformers 5:
 * "rope_type", rope_theta inside), read as transformers 5.24's
 * modeling_rope_utils.py reads them:
 *
 *   "default", none   rope_factor 1
 *   "yarn"            keys factor, original_max_position_embeddings,
 *                     beta_fast, beta_slow, mscale, mscale_all_dim,
 *                     attention_factor, truncate (gpt-oss: false); an absent,
 *                     null or 0 one keeps coli_config_init's default, an absent
 *                     factor is max_position_embeddings / original, an absent
 *                     original is a top-level original_max_position_embeddings
 *                     or else max_position_embeddings (standardize_rope_params)
 *                     (DeepSeek-V3, Kimi-K2, gpt-oss as published; Qwen3-MoE
 *                     and Qwen2-MoE with the factor 4 / 32768 their model cards
 *                     tell users to add)
 *   "linear"          factor (>= 1): rope_scaling COLI_ROPE_LINEAR
 *   anything else     refused by name: "dynamic" (NTK) rescales theta from
 *                     the length of each call's sequence, so a token's logits
 *                     would depend on what it is batched with and the cache
 *                     would hold keys rotated at older frequencies; "llama3",
 *                     "longrope" and the others belong to no family coli reads
 *
 * GGUF (coli_convert_gguf_rope; llama.cpp's keys, gguf-py's constants.py):
 * {arch}.rope.scaling.type "none" or absent: plain; "linear": .factor (or
 * the older {arch}.rope.scale_linear); "yarn": .factor, .original_context_length
 * (needed: llama.cpp's converter writes it from original_max_position_embeddings),
 * .yarn_beta_fast / .yarn_beta_slow when present. llama.cpp multiplies its
 * YaRN mscale by .attn_factor / .yarn_attn_factor and adds .yarn_log_multiplier
 * terms, which transformers' config has no spelling of: a value other than
 * their neutral one (1, 1, 0; .yarn_ext_factor -1 or 1) is refused by name,
 * as is any other type.
 *
 * Ranges are the CONFIG section's (core/model/config.c), so what convert
 * writes opens. core/model/rope.c computes what they mean.
 */
#include <jansson.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/convert/convert_internal.h"
#include "io/gguf.h"

/* A nest's "factor": *f, or -errno. A number >= 1 and < 1e6 when present. */
static int read_factor(json_t *p, const char *path, const char *type, double *f, char *errbuf,
                       size_t errlen)
{
	json_t *v = json_object_get(p, "factor");

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v) || !(json_number_value(v) >= 1 && json_number_value(v) < 1e6))
		return coli_convert_errf(errbuf, errlen, -ENOTSUP,
		                         "%s: %s rope scaling with a factor that is not a number "
		                         "in [1, 1e6) is not supported",
		                         path, type);
	*f = json_number_value(v);
	return 0;
}

/* One nest of type "yarn": its keys into c. */
static int read_yarn(json_t *cfg, json_t *p, struct coli_model_config *c, const char *path,
                     char *errbuf, size_t errlen)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
	    {"beta_fast", offsetof(struct coli_model_config, yarn_beta_fast)},
	    {"beta_slow", offsetof(struct coli_model_config, yarn_beta_slow)},
	    {"mscale", offsetof(struct coli_model_config, yarn_mscale)},
	    {"mscale_all_dim", offsetof(struct coli_model_config, yarn_mscale_all)},
	    {"attention_factor", offsetof(struct coli_model_config, yarn_attn)},
	};
	json_t *v = json_object_get(p, "original_max_position_embeddings");
	double x = c->max_ctx, f;
	int rc;

	if (!v || json_is_null(v)) /* transformers: the top level's, else max_position_embeddings */
		v = json_object_get(cfg, "original_max_position_embeddings");
	if (v && !json_is_null(v) &&
	    (!json_is_number(v) || !((x = json_number_value(v)) >= 1 && x <= 1 << 24)))
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: YaRN rope scaling's original_max_position_embeddings "
		                         "is not a number in 1..2^24",
		                         path);
	c->rope_orig_ctx = (int)x;
	/* transformers: no factor is max_position_embeddings / the original */
	f = (double)c->max_ctx / c->rope_orig_ctx;
	if ((rc = read_factor(p, path, "YaRN", &f, errbuf, errlen)))
		return rc;
	c->rope_factor = (float)f;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		v = json_object_get(p, keys[k].key);
		if (v && !json_is_null(v) &&
		    !(json_is_number(v) && json_number_value(v) >= 0 && json_number_value(v) < 1e6))
			return coli_convert_errf(errbuf, errlen, -EINVAL,
			                         "%s: YaRN's %s is not a number in [0, 1e6)", path,
			                         keys[k].key);
		if (json_is_number(v) && json_number_value(v) > 0) /* 0: absent, as there */
			*(float *)((char *)c + keys[k].off) = (float)json_number_value(v);
	}
	if (!(c->rope_factor >= 1 && c->rope_factor < 1e6f))
		return coli_convert_errf(errbuf, errlen, -ENOTSUP,
		                         "%s: YaRN with factor %g (below 1 or from 1e6) is "
		                         "not supported",
		                         path, c->rope_factor);
	/* gpt-oss: the correction range not rounded to whole dims */
	c->yarn_truncate = !json_is_false(json_object_get(p, "truncate"));
	return 0;
}

int coli_convert_hf_rope(json_t *cfg, struct coli_model_config *c, const char *path, char *errbuf,
                         size_t errlen)
{
	static const char *const nests[] = {"rope_parameters", "rope_scaling"};

	for (int i = 0; i < 2; i++) {
		json_t *p = json_object_get(cfg, nests[i]);
		const char *type;
		double f = 0;
		int rc;

		if (!json_is_object(p))
			continue;
		type = json_string_value(json_object_get(p, "rope_type"));
		if (!type)
			type = json_string_value(json_object_get(p, "type"));
		if (!type || !strcmp(type, "default"))
			continue;
		if (!strcmp(type, "yarn"))
			return read_yarn(cfg, p, c, path, errbuf, errlen);
		if (!strcmp(type, "linear")) {
			if ((rc = read_factor(p, path, "linear", &f, errbuf, errlen)))
				return rc;
			if (!(f >= 1))
				return coli_convert_errf(
				    errbuf, errlen, -EINVAL,
				    "%s: %s: linear rope scaling needs a factor", path, nests[i]);
			c->rope_factor = (float)f;
			c->rope_scaling = f > 1 ? COLI_ROPE_LINEAR : COLI_ROPE_YARN;
			return 0;
		}
		if (!strcmp(type, "dynamic"))
			return coli_convert_errf(
			    errbuf, errlen, -ENOTSUP,
			    "%s: %s.rope_type 'dynamic' is not supported: dynamic NTK scaling "
			    "rescales RoPE by the length of each call's sequence, so a token's "
			    "logits would depend on its batch and the KV cache would hold keys "
			    "rotated at older frequencies",
			    path, nests[i]);
		return coli_convert_errf(errbuf, errlen, -ENOTSUP,
		                         "%s: %s.rope_type '%s' is not supported (coli reads "
		                         "default, linear and yarn)",
		                         path, nests[i], type);
	}
	return 0;
}

/* "{arch}.rope.SUFFIX" as a number: 0 (v set), -ENOENT absent, else -errno
 * with errbuf set. */
static int gg_num(const struct coli_gguf *g, const char *arch, const char *suffix, double *v,
                  const char *path, char *errbuf, size_t errlen)
{
	char key[128];
	int rc;

	snprintf(key, sizeof(key), "%s.rope.%s", arch, suffix);
	rc = coli_gguf_get_f64(g, key, v);
	if (rc == -ENOENT)
		return rc;
	if (rc || !(*v > -1e6 && *v < 1e6))
		return coli_convert_errf(errbuf, errlen, rc ? rc : -EINVAL,
		                         "%s: %s is not a number in (-1e6, 1e6)", path, key);
	return 0;
}

int coli_convert_gguf_rope(const struct coli_gguf *g, const char *arch, struct coli_model_config *c,
                           const char *path, char *errbuf, size_t errlen)
{
	static const struct {
		const char *suffix;
		double neutral, or ;
	} llama_only[] = {{"scaling.attn_factor", 1, 1},
	                  {"scaling.yarn_attn_factor", 1, 1},
	                  {"scaling.yarn_log_multiplier", 0, 0},
	                  {"scaling.yarn_ext_factor", -1, 1}};
	char key[128];
	const char *type = "none";
	uint64_t len = 4, orig;
	double f = 1, v;
	int rc;

	snprintf(key, sizeof(key), "%s.rope.scaling.type", arch);
	rc = coli_gguf_get_str(g, key, &type, &len);
	if (rc && rc != -ENOENT)
		return coli_convert_errf(errbuf, errlen, rc, "%s: %s is not a string", path, key);
	if (len == 4 && !memcmp(type, "none", 4)) {
		/* older files: a linear factor of its own */
		rc = gg_num(g, arch, "scale_linear", &f, path, errbuf, errlen);
		if (rc == -ENOENT || (!rc && f == 1))
			return 0;
		if (rc)
			return rc;
		type = "linear", len = 6;
	} else if ((rc = gg_num(g, arch, "scaling.factor", &f, path, errbuf, errlen))) {
		return rc == -ENOENT
		           ? coli_convert_errf(errbuf, errlen, -EINVAL,
		                               "%s: %s '%.*s' without %s.rope.scaling.factor", path,
		                               key, (int)(len < 64 ? len : 64), type, arch)
		           : rc;
	}
	if (!(len == 6 && !memcmp(type, "linear", 6)) && !(len == 4 && !memcmp(type, "yarn", 4)))
		return coli_convert_errf(errbuf, errlen, -ENOTSUP,
		                         "%s: %s '%.*s' is not supported (coli reads none, linear "
		                         "and yarn)",
		                         path, key, (int)(len < 64 ? len : 64), type);
	if (!(f >= 1))
		return coli_convert_errf(errbuf, errlen, -ENOTSUP,
		                         "%s: %s.rope.scaling.factor %g below 1 is not supported",
		                         path, arch, f);
	c->rope_factor = (float)f;
	if (len == 6) {
		c->rope_scaling = f > 1 ? COLI_ROPE_LINEAR : COLI_ROPE_YARN;
		return 0;
	}
	for (size_t i = 0; i < sizeof(llama_only) / sizeof(llama_only[0]); i++) {
		rc = gg_num(g, arch, llama_only[i].suffix, &v, path, errbuf, errlen);
		if (rc == -ENOENT)
			continue;
		if (rc)
			return rc;
		if (v != llama_only[i].neutral && v != llama_only[i].or)
			return coli_convert_errf(
			    errbuf, errlen, -ENOTSUP,
			    "%s: %s.rope.%s %g is not supported (llama.cpp's "
			    "YaRN correction; transformers' configs have none)",
			    path, arch, llama_only[i].suffix, v);
	}
	snprintf(key, sizeof(key), "%s.rope.scaling.original_context_length", arch);
	rc = coli_gguf_get_u64(g, key, &orig);
	if (rc || !orig || orig > 1 << 24)
		return coli_convert_errf(errbuf, errlen, rc && rc != -ENOENT ? rc : -EINVAL,
		                         "%s: YaRN rope scaling needs %s (1..2^24)", path, key);
	c->rope_orig_ctx = (int)orig;
	if (!gg_num(g, arch, "scaling.yarn_beta_fast", &v, path, errbuf, errlen) && v > 0)
		c->yarn_beta_fast = (float)v;
	if (!gg_num(g, arch, "scaling.yarn_beta_slow", &v, path, errbuf, errlen) && v > 0)
		c->yarn_beta_slow = (float)v;
	return 0;
}
