/*
 * core/convert/convert_yarn.c — a Hugging Face config's YaRN RoPE scaling
 * (DeepSeek-V3, Kimi-K2) into the model config: rope_scaling (the Hub's
 * files: "type": "yarn", rope_theta at the top) or rope_parameters
 * (transformers 5: "rope_type": "yarn"), keys factor,
 * original_max_position_embeddings, beta_fast, beta_slow, mscale,
 * mscale_all_dim, attention_factor, truncate (gpt-oss: false); an absent, null or 0 one keeps
 * coli_config_init's default (as transformers reads them), an absent factor
 * is max_position_embeddings / original. Ranges are the CONFIG section's
 * (core/model/config.c), so what convert writes opens. core/model/rope.c
 * computes what they mean.
 */
#include <jansson.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/convert/convert_internal.h"

/* One nest of type "yarn": its keys into c. */
static int read_nest(json_t *p, struct coli_model_config *c, const char *path, char *errbuf,
                     size_t errlen)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
	    {"factor", offsetof(struct coli_model_config, rope_factor)},
	    {"beta_fast", offsetof(struct coli_model_config, yarn_beta_fast)},
	    {"beta_slow", offsetof(struct coli_model_config, yarn_beta_slow)},
	    {"mscale", offsetof(struct coli_model_config, yarn_mscale)},
	    {"mscale_all_dim", offsetof(struct coli_model_config, yarn_mscale_all)},
	    {"attention_factor", offsetof(struct coli_model_config, yarn_attn)},
	};
	json_t *v = json_object_get(p, "original_max_position_embeddings");
	double x;

	if (!json_is_number(v) || !((x = json_number_value(v)) >= 1 && x <= 1 << 24))
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: YaRN rope scaling needs "
		                         "original_max_position_embeddings (1..2^24)",
		                         path);
	c->rope_orig_ctx = (int)x;
	/* transformers: no factor is max_position_embeddings / the original */
	c->rope_factor = (float)((double)c->max_ctx / c->rope_orig_ctx);
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

int coli_convert_hf_yarn(json_t *cfg, struct coli_model_config *c, const char *path, char *errbuf,
                         size_t errlen)
{
	static const char *const nests[] = {"rope_parameters", "rope_scaling"};

	for (int i = 0; i < 2; i++) {
		json_t *p = json_object_get(cfg, nests[i]);
		const char *type;

		if (!json_is_object(p))
			continue;
		type = json_string_value(json_object_get(p, "rope_type"));
		if (!type)
			type = json_string_value(json_object_get(p, "type"));
		if (type && !strcmp(type, "yarn"))
			return read_nest(p, c, path, errbuf, errlen);
	}
	return 0;
}
