/*
 * core/convert/convert_gptoss.c — the gpt_oss family (openai/gpt-oss-20b and
 * -120b: transformers' GptOssForCausalLM): its config.json keys, its fused
 * expert tensors in both forms a checkpoint holds them, and MXFP4's exact
 * conversion to q8.
 *
 * What the family is, as transformers 5.24 runs it:
 *   attention   GQA with q/k/v/o biases (attention_bias, default true); a
 *               learned logit per head (self_attn.sinks [n_heads]) joins each
 *               query's softmax as one more column and is dropped after it;
 *               layer_types alternate "sliding_attention" (a query sees its
 *               last sliding_window keys, itself included) and
 *               "full_attention" (default: even layers sliding; sliding_window
 *               null: none slides); YaRN RoPE
 *               (rope_scaling / rope_parameters, "truncate": false)
 *   router      logits = W x + b (mlp.router.weight, .bias); the top-k logits,
 *               softmax over those k: the same experts and weights as softmax
 *               over all then renormalised (norm_topk_prob 1), with the bias
 *               added to the logits (router_bias under softmax routing)
 *   experts     gate_up = x W_gu + b_gu, gate and up ALTERNATING columns
 *               (gate = [..., ::2], up = [..., 1::2]); h = (clamp(up, -L, L) + 1)
 *               * g sigmoid(alpha g), g = min(gate, L) (swiglu_limit L = 7,
 *               swiglu_alpha 1.702); y = h W_down + b_down (ffn_act
 *               swiglu_oai, expert_bias)
 *
 * Expert tensors of layer N (model.layers.N.mlp.experts.*), E experts, H
 * hidden, I = intermediate_size:
 *
 *   bf16 (transformers' own save)   gate_up_proj [E, H, 2I] (x @ W: input rows),
 *                                   down_proj [E, I, H]
 *   MXFP4 (the Hub's release)       gate_up_proj_blocks [E, 2I, H/32, 16] U8,
 *                                   gate_up_proj_scales [E, 2I, H/32] U8,
 *                                   down_proj_blocks [E, H, I/32, 16],
 *                                   down_proj_scales [E, H, I/32]
 *   both                            gate_up_proj_bias [E, 2I], down_proj_bias [E, H]
 *
 * An MXFP4 row is an output feature (gate rows even, up rows odd); a block
 * holds 32 E2M1 values of consecutive inputs, byte k the values 2k (low
 * nibble) and 2k + 1 (high), times 2^(scale - 127). E2M1 is 0, .5, 1, 1.5, 2,
 * 3, 4, 6 (and negatives), so twice a value is an integer |q| <= 12 and the
 * block is exactly q8_0's: int8 quants 2 x E2M1, fp16 scale 2^(scale - 128).
 * fp16 holds 2^-24 .. 2^15: a scale above 143 is refused (such weights
 * would be 2^16 and more); a block whose scale is below 104 is written as
 * zero (its values are under 12 x 2^-25 ~ 3.6e-7) and counted on stderr.
 * That is the default conversion of an MXFP4 checkpoint (--quant q8, said on
 * stderr): lossless, twice MXFP4's bytes (a native MXFP4 type is later
 * work). --quant bf16 dequantizes exactly too; q4 rounds. A GGUF's MXFP4
 * experts (ggml's blocks: e, then qs[16] with elements i and i + 16 in byte
 * i) take the same exact path (coli_convert_mxfp4_gguf, from convert.c).
 *
 * Refused by name: a layer_types entry other than the two, quant_method
 * "mxfp4" in another family, an expert tensor of another shape.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/convert/convert_job.h"

/* A number or boolean; absent or null -> dflt. -1 on another type. */
static int num(json_t *o, const char *key, double dflt, double *out)
{
	json_t *v = json_object_get(o, key);

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

/* layer_types (default: even layers sliding) -> c->is_sliding_layer. */
static int layer_types(json_t *cfg, const char *path, struct coli_model_config *c, char *errbuf,
                       size_t errlen)
{
	json_t *lt = json_object_get(cfg, "layer_types");

	if (lt && !json_is_null(lt) && json_array_size(lt) < (size_t)c->n_layers)
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: layer_types has %zu entries for %d layers", path,
		                         json_array_size(lt), c->n_layers);
	for (int l = 0; l < c->n_layers; l++) {
		const char *s = json_string_value(json_array_get(lt, (size_t)l));

		if (!json_is_array(lt))
			c->is_sliding_layer[l] = l % 2 == 0;
		else if (s && !strcmp(s, "sliding_attention"))
			c->is_sliding_layer[l] = 1;
		else if (!s || strcmp(s, "full_attention"))
			return coli_convert_errf(errbuf, errlen, -ENOTSUP,
			                         "%s: layer_types[%d] '%s' is not supported (only "
			                         "sliding_attention and full_attention)",
			                         path, l, s ? s : "(not a string)");
	}
	return 0;
}

int coli_convert_hf_gptoss(json_t *cfg, const char *path, struct coli_model_config *c, char *errbuf,
                           size_t errlen)
{
	double bias, win, alpha, limit, k, theta;
	json_t *rp = json_object_get(cfg, "rope_parameters"),
	       *rs = json_object_get(cfg, "rope_scaling");
	int rc;

	if (num(cfg, "attention_bias", 1, &bias) || num(cfg, "sliding_window", 128, &win) ||
	    num(cfg, "swiglu_alpha", 1.702, &alpha) || num(cfg, "swiglu_limit", 7.0, &limit) ||
	    num(cfg, "experts_per_token", c->top_k ? c->top_k : 4, &k))
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: a gpt_oss flag or size is not a number", path);
	if (!(win >= 0 && win <= 1 << 24) || win != (double)(long)win ||
	    !(alpha > 0 && alpha < 1e6) || !(limit > 0 && limit < 1e6) ||
	    !(k >= 1 && k <= c->n_experts && k <= 64))
		return coli_convert_errf(
		    errbuf, errlen, -EINVAL,
		    "%s: sliding_window %g, swiglu_alpha %g, swiglu_limit %g or "
		    "experts per token %g out of range",
		    path, win, alpha, limit, k);
	rc = layer_types(cfg, path, c, errbuf, errlen);
	if (rc)
		return rc;
	if (json_is_null(json_object_get(cfg, "sliding_window")) || win == 0) {
		win = 0; /* None (or 0): no layer slides, as transformers reads it */
		memset(c->is_sliding_layer, 0, sizeof(c->is_sliding_layer));
	}
	c->top_k = c->top_k ? c->top_k : (int)k; /* num_experts_per_tok first */
	c->qkv_bias = c->attn_o_bias = bias != 0;
	c->attn_sinks = 1;
	c->sliding_window = (int)win;
	c->router_kind = COLI_ROUTER_SOFTMAX;
	c->router_bias = 1;
	c->norm_topk_prob = 1; /* softmax over the top-k logits */
	c->expert_bias = 1;
	c->ffn_act = COLI_ACT_SWIGLU_OAI;
	c->act_alpha = (float)alpha;
	c->act_limit = (float)limit;
	c->shared_inter = 0;
	/* rope_theta's family default (150000) when no file key has one */
	if (!json_is_number(json_object_get(cfg, "rope_theta")) &&
	    !json_is_number(json_object_get(rp, "rope_theta")) &&
	    !json_is_number(json_object_get(rs, "rope_theta")) &&
	    !num(cfg, "rope_theta", 1.5e5, &theta))
		c->rope_theta = (float)theta;
	/* no rope nest at all: GptOssConfig's default YaRN */
	if (!json_is_object(rp) && !json_is_object(rs) && c->rope_factor == 1.0f) {
		c->rope_factor = 32.0f;
		c->rope_orig_ctx = 4096;
		c->yarn_beta_fast = 32.0f;
		c->yarn_beta_slow = 1.0f;
		c->yarn_truncate = 0;
	}
	return 0;
}

int coli_convert_mxfp4_load(struct coli_convert_hf *h, const json_t *qc, const char *path,
                            char *errbuf, size_t errlen)
{
	(void)qc; /* modules_to_not_convert: the tensors' dtypes say which are MXFP4 */
	if (h->cfg.arch != COLI_ARCH_GPT_OSS)
		return coli_convert_errf(errbuf, errlen, -ENOTSUP,
		                         "%s: quantization_config.quant_method 'mxfp4' is read for "
		                         "gpt_oss only, not %s",
		                         path, h->cfg.model_type);
	h->mxfp4 = 1;
	return 0;
}

/* The tensor named `name` in any shard (its own first), or NULL. */
static const struct coli_st_tensor *find_tensor(const struct cv *v, int shard, const char *name,
                                                int *where)
{
	for (int i = -1; i < v->hf.n_shards; i++) {
		int s = i < 0 ? shard : i;
		const struct coli_st_tensor *t = coli_io_st_find(&v->hf.st[s], name);

		if (t) {
			*where = s;
			return t;
		}
	}
	return NULL;
}

static int shape_err(struct cv *v, int shard, const struct coli_st_tensor *t, const char *want)
{
	char got[96] = "";
	size_t n = 0;

	for (int i = 0; i < t->ndim && n < sizeof(got) - 24; i++)
		n += (size_t)snprintf(got + n, sizeof(got) - n, "%s%llu", i ? ", " : "",
		                      (unsigned long long)t->shape[i]);
	return coli_convert_errf(v->errbuf, v->errlen, -EINVAL,
	                         "%s: tensor '%s' has shape [%s] (%s), but config.json implies %s",
	                         v->hf.shards[shard], t->name, got, t->dtype_name, want);
}

/* A canonical slot of layer l ("blk.l.<suffix>"), marked seen by t. */
static struct slot *slot_of(struct cv *v, int l, const char *suffix, const struct coli_st_tensor *t)
{
	char n[COLI_TENSOR_NAME_MAX];

	snprintf(n, sizeof(n), "blk.%d.%s", l, suffix);
	for (int i = 0; i < v->n_slots; i++)
		if (!strcmp(v->slots[i].name, n)) {
			if (v->slots[i].hf_seen)
				return NULL;
			v->slots[i].hf_seen = t->name;
			return &v->slots[i];
		}
	return NULL;
}

static int dims_are(const struct coli_st_tensor *t, int nd, uint64_t a, uint64_t b, uint64_t c,
                    uint64_t d)
{
	const uint64_t want[4] = {a, b, c, d};

	if (t->ndim != nd)
		return 0;
	for (int i = 0; i < nd; i++)
		if (t->shape[i] != want[i])
			return 0;
	return 1;
}

/* The jobs a tensor becomes, handed back to convert_map.c (which adds them:
 * this file calls nothing of the converter's files above it). */
struct jobs {
	struct job *j;
	size_t n, cap;
};

static int push(struct cv *v, struct jobs *out, const struct job *j)
{
	if (out->n == out->cap) {
		size_t cap = out->cap ? out->cap * 2 : 64;
		struct job *p = realloc(out->j, cap * sizeof(*p));

		if (!p)
			return coli_convert_errf(v->errbuf, v->errlen, -ENOMEM, "out of memory");
		out->j = p, out->cap = cap;
	}
	out->j[out->n++] = *j;
	return 0;
}

/* The biases: gate_up [E, 2I] (alternating) -> exp_gate_bias, exp_up_bias
 * [E, I]; down [E, H] -> exp_down_bias. */
static int map_bias(struct cv *v, int shard, const struct coli_st_tensor *t, int l, int gu,
                    struct jobs *out)
{
	const struct coli_model_config *c = v->c;
	uint64_t E = c->n_experts, I = c->moe_inter, H = c->hidden;
	char want[64];
	int rc = 0;

	snprintf(want, sizeof(want), "[%llu, %llu]", (unsigned long long)E,
	         (unsigned long long)(gu ? 2 * I : H));
	if (!dims_are(t, 2, E, gu ? 2 * I : H, 0, 0) || !coli_io_st_dtype_bytes(t->dtype))
		return shape_err(v, shard, t, want);
	for (int p = 0; p < (gu ? 2 : 1) && !rc; p++) {
		struct slot *s =
		    slot_of(v, l, gu ? (p ? "exp_up_bias" : "exp_gate_bias") : "exp_down_bias", t);
		struct job j = {.shard = shard,
		                .src = t,
		                .rows = E,
		                .cols = gu ? I : H,
		                .kind = DST_TENSOR,
		                .xf = gu ? XF_PAIR : XF_NONE,
		                .pair = p};

		if (!s)
			return coli_convert_errf(
			    v->errbuf, v->errlen, -EINVAL,
			    "%s: tensor '%s' appears twice, or layer %d has no "
			    "experts",
			    v->hf.shards[shard], t->name, l);
		j.idx = s->idx;
		j.dtype = s->dtype;
		rc = push(v, out, &j);
	}
	return rc;
}

/* Expert part p of expert e of expert layer li, the job j made whole. */
static int slab_job(struct cv *v, int li, uint32_t e, int p, struct job *j, int l, struct jobs *out)
{
	const struct coli_expert_layer *el = &v->el[li];
	unsigned char *seen = &v->part_seen[((size_t)li * v->c->n_experts + e) * 3 + p];

	if (*seen)
		return coli_convert_errf(v->errbuf, v->errlen, -EINVAL,
		                         "%s: tensor '%s' supplies expert %u of layer %d a second "
		                         "time",
		                         v->hf.shards[j->shard], j->src->name, e, l);
	*seen = 1;
	j->kind = DST_SLAB;
	j->idx = li;
	j->expert = e;
	j->base = p == PART_GATE ? el->gate_off : p == PART_UP ? el->up_off : el->down_off;
	j->dtype = el->dtype;
	return push(v, out, j);
}

/* The fused experts: bf16 gate_up_proj / down_proj (input rows: transposed,
 * gate_up's columns alternating), or MXFP4 <name>_blocks with their
 * <name>_scales (output rows, gate_up's alternating). */
static int map_experts(struct cv *v, int shard, const struct coli_st_tensor *t, int l, int gu,
                       int mx, struct jobs *out)
{
	const struct coli_model_config *c = v->c;
	uint64_t E = c->n_experts, I = c->moe_inter, H = c->hidden;
	uint64_t R = gu ? 2 * I : H, C = gu ? H : I; /* the output rows, input columns */
	const struct coli_st_tensor *sc = NULL;
	int li = v->layer_el[l], s_shard = shard, rc = 0;
	char want[128];

	if (li < 0)
		return coli_convert_errf(
		    v->errbuf, v->errlen, -EINVAL,
		    "%s: tensor '%s' is an expert weight, but layer %d is dense",
		    v->hf.shards[shard], t->name, l);
	if (mx) {
		char sn[512];

		snprintf(want, sizeof(want), "[%llu, %llu, %llu, 16] U8", (unsigned long long)E,
		         (unsigned long long)R, (unsigned long long)(C / 32));
		if (C % 32 || strcmp(t->dtype_name, "U8") || !dims_are(t, 4, E, R, C / 32, 16))
			return shape_err(v, shard, t, want);
		snprintf(sn, sizeof(sn), "%.*s_scales", (int)(strlen(t->name) - 7), t->name);
		sc = find_tensor(v, shard, sn, &s_shard);
		if (!sc)
			return coli_convert_errf(v->errbuf, v->errlen, -ENOENT,
			                         "%s: tensor '%s' has no %s beside it",
			                         v->hf.shards[shard], t->name, sn);
		snprintf(want, sizeof(want), "[%llu, %llu, %llu] U8", (unsigned long long)E,
		         (unsigned long long)R, (unsigned long long)(C / 32));
		if (strcmp(sc->dtype_name, "U8") || !dims_are(sc, 3, E, R, C / 32, 0))
			return shape_err(v, s_shard, sc, want);
	} else {
		snprintf(want, sizeof(want), "[%llu, %llu, %llu] (x @ W: input rows)",
		         (unsigned long long)E, (unsigned long long)C, (unsigned long long)R);
		if (!dims_are(t, 3, E, C, R, 0) || !coli_io_st_dtype_bytes(t->dtype))
			return shape_err(v, shard, t, want);
	}
	for (uint32_t e = 0; e < E && !rc; e++)
		for (int p = gu ? PART_GATE : PART_DOWN; p <= (gu ? PART_UP : PART_DOWN) && !rc;
		     p++) {
			struct job j = {.shard = shard, .src = t, .rows = gu ? I : H, .cols = C};

			if (mx) { /* output rows: gate_up's alternate */
				j.mx_scales = sc;
				j.mx_shard = s_shard;
				j.mx_stride = gu ? 2 : 1;
				j.src_row0 = e * R + (p == PART_UP);
			} else { /* input rows of R values: columns become rows */
				j.xf = gu ? XF_TRANSPOSE_PAIR : XF_TRANSPOSE;
				j.pair = p == PART_UP;
				j.src_row0 = e * C;
			}
			rc = slab_job(v, li, e, p, &j, l, out);
		}
	return rc;
}

int coli_convert_gptoss_map(struct cv *v, int shard, const struct coli_st_tensor *t, int l,
                            const char *rest, struct job **jobs, size_t *n_jobs)
{
	static const char pre[] = "mlp.experts.";
	const char *s = rest + sizeof(pre) - 1;
	struct jobs out = {0};
	int rc = 1;

	*jobs = NULL, *n_jobs = 0;
	if (strncmp(rest, pre, sizeof(pre) - 1))
		return 1;
	if (!strcmp(s, "gate_up_proj_bias") || !strcmp(s, "down_proj_bias"))
		rc = map_bias(v, shard, t, l, s[0] == 'g', &out);
	else if (!strcmp(s, "gate_up_proj") || !strcmp(s, "down_proj"))
		rc = map_experts(v, shard, t, l, s[0] == 'g', 0, &out);
	else if (v->hf.mxfp4 &&
	         (!strcmp(s, "gate_up_proj_blocks") || !strcmp(s, "down_proj_blocks")))
		rc = map_experts(v, shard, t, l, s[0] == 'g', 1, &out);
	else if (v->hf.mxfp4 &&
	         (!strcmp(s, "gate_up_proj_scales") || !strcmp(s, "down_proj_scales")))
		rc = 0; /* read with its blocks */
	if (rc < 0)
		free(out.j);
	else
		*jobs = out.j, *n_jobs = out.n;
	return rc;
}

/* 2 x E2M1 by nibble: the int8 quants of a q8 block. */
static const int8_t g_e2m1x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* fp16 bits of 2^x, x in [-24, 15] (subnormal below -14). */
static uint16_t half_pow2(int x)
{
	return x >= -14 ? (uint16_t)((x + 15) << 10) : (uint16_t)(1u << (x + 24));
}

static int pread_all(int fd, void *dst, size_t n, uint64_t off)
{
	for (size_t done = 0; done < n;) {
		ssize_t r = pread(fd, (char *)dst + done, n - done, (off_t)(off + done));

		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		done += (size_t)r;
	}
	return 0;
}

int coli_convert_mxfp4_rows(struct cv *v, const struct job *j, uint64_t r0, uint64_t n, float *in,
                            unsigned char *out)
{
	const struct coli_st_file *fb = &v->hf.st[j->shard], *fs = &v->hf.st[j->mx_shard];
	const uint64_t nb = j->cols / 32, st = (uint64_t)j->mx_stride, span = (n - 1) * st + 1;
	const uint64_t row0 = j->src_row0 + r0 * st; /* source row of destination row r0 */
	const int exact = j->dtype == COLI_DTYPE_Q8_0;
	unsigned char *blk = malloc(span * nb * 16), *scl = malloc(span * nb);
	int8_t *q = (int8_t *)out;
	uint16_t *d = (uint16_t *)(out + n * j->cols); /* q8's scale plane */
	int rc = blk && scl ? 0 : -ENOMEM;

	rc = rc ? rc : pread_all(fb->fd, blk, span * nb * 16, j->src->offset + row0 * nb * 16);
	rc = rc ? rc : pread_all(fs->fd, scl, span * nb, j->mx_scales->offset + row0 * nb);
	if (rc) {
		rc = coli_convert_errf(v->errbuf, v->errlen, rc, "%s: tensor '%s': %s", fb->path,
		                       j->src->name, strerror(-rc));
		goto out;
	}
	for (uint64_t r = 0; r < n; r++)
		for (uint64_t b = 0; b < nb; b++) {
			const unsigned char *k = blk + (r * st * nb + b) * 16;
			int e = scl[r * st * nb + b], x = e - 128, zero = exact && x < -24;

			if (x > 15) {
				rc = coli_convert_errf(
				    v->errbuf, v->errlen, -ERANGE,
				    "%s: tensor '%s' row %llu block %llu: MXFP4 scale %d (2^%d) is "
				    "past fp16's range (q8's block scale); weights of 2^16 and "
				    "more "
				    "are not a model's",
				    fs->path, j->mx_scales->name,
				    (unsigned long long)(row0 + r * st), (unsigned long long)b, e,
				    e - 127);
				goto out;
			}
			v->mx_flushed += zero; /* convert.c says how many at the end */
			for (int i = 0; i < 32; i++) {
				int v2 = zero ? 0 : g_e2m1x2[k[i / 2] >> (i % 2 * 4) & 15];
				uint64_t at = r * j->cols + b * 32 + (uint64_t)i;

				if (exact)
					q[at] = (int8_t)v2;
				else /* 2 x E2M1 x 2^(e-128): exact in fp32 */
					in[at] = ldexpf((float)v2, x);
			}
			if (exact)
				d[r * nb + b] = zero ? 0 : half_pow2(x);
		}
	rc = exact; /* 1: out holds the rows as stored */
out:
	free(blk);
	free(scl);
	return rc;
}

int coli_convert_mxfp4_gguf(struct cv *v, const struct job *j, uint64_t r0, uint64_t n,
                            const unsigned char *raw, unsigned char *out, const char *label)
{
	const uint64_t nb = j->cols / 32;
	int8_t *q = (int8_t *)out;
	uint16_t *d = (uint16_t *)(out + n * j->cols); /* q8's scale plane */

	for (uint64_t r = 0; r < n; r++)
		for (uint64_t b = 0; b < nb; b++) {
			const unsigned char *k = raw + (r * nb + b) * 17;
			int x = k[0] - 128, zero = x < -24;

			if (x > 15)
				return coli_convert_errf(
				    v->errbuf, v->errlen, -ERANGE,
				    "%s: tensor '%s' row %llu block %llu: MXFP4 scale %d (2^%d) is "
				    "past fp16's range (q8's block scale); weights of 2^16 and "
				    "more "
				    "are not a model's",
				    v->hf.shards[j->shard], label,
				    (unsigned long long)(j->src_row0 + r0 + r),
				    (unsigned long long)b, k[0], k[0] - 127);
			v->mx_flushed += zero; /* convert.c says how many at the end */
			for (int i = 0; i < 32; i++)
				q[r * j->cols + b * 32 + (uint64_t)i] =
				    zero ? 0 : g_e2m1x2[k[1 + i % 16] >> (i / 16 * 4) & 15];
			d[r * nb + b] = zero ? 0 : half_pow2(x);
		}
	return 0;
}
