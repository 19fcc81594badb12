/*
 * core/model/model.c — binding a container's tensors to the model: every tensor the
 * architecture needs is looked up by its coli name (core/coli.h lists them),
 * its shape and dtype are checked against the config, and a view (struct
 * coli_mat or a float pointer) into the mapped file is kept. Nothing is copied
 * here: with a RAM budget the tier manager copies the dense region into an
 * arena and re-points the views (coli_model_rebase); routed experts are
 * viewed in whichever slot holds their slab (coli_model_expert_at).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/core_internal.h"

struct bind_ctx {
	coli_container_t *c;
	char *err;
	size_t errlen;
	enum coli_dtype quant; /* the config's */
};

/* A quantized tensor in a model whose config is not q8/q4: refused, since
 * the engine prepares quantized activations (the same for q8_0 and q4_0)
 * only for a quantized model (core/engine.c scratch_alloc). Wider tensors
 * (bf16, f32) in a q8/q4 model are what convert keeps where the quant
 * cannot go. */
static int dtype_check(struct bind_ctx *b, const char *name, enum coli_dtype t)
{
	if (!coli_dtype_is_quant(t) || coli_dtype_is_quant(b->quant))
		return 0;
	snprintf(b->err, b->errlen, "%s: %s is %s in a %s model", coli_io_container_path(b->c),
	         name, coli_dtype_name(t), coli_dtype_name(b->quant));
	return -EINVAL;
}

static const struct coli_tensor_info *find(struct bind_ctx *b, const char *name, int required)
{
	const struct coli_tensor_info *t = coli_io_container_find(b->c, name);

	if (!t && required)
		snprintf(b->err, b->errlen, "%s: tensor '%s' is missing",
		         coli_io_container_path(b->c), name);
	return t;
}

/* A matrix [rows, cols] in any dtype. */
static int bind_mat(struct bind_ctx *b, struct coli_mat *m, const char *name, int rows, int cols,
                    int required)
{
	const struct coli_tensor_info *t = find(b, name, required);

	memset(m, 0, sizeof(*m));
	if (!t)
		return required ? -ENOENT : 0;
	if (t->ndim != 2 || t->shape[0] != (uint64_t)rows || t->shape[1] != (uint64_t)cols) {
		snprintf(b->err, b->errlen,
		         "%s: tensor '%s' has shape [%llu, %llu], expected [%d, %d]",
		         coli_io_container_path(b->c), name, (unsigned long long)t->shape[0],
		         (unsigned long long)(t->ndim > 1 ? t->shape[1] : 0), rows, cols);
		return -EINVAL;
	}
	if (dtype_check(b, name, t->dtype))
		return -EINVAL;
	coli_mat_view(m, t->dtype, rows, cols, coli_io_container_tensor_data(b->c, t));
	return 0;
}

/* An f32 vector of n values. */
static int bind_vec(struct bind_ctx *b, const float **v, const char *name, int n, int required)
{
	const struct coli_tensor_info *t = find(b, name, required);

	*v = NULL;
	if (!t)
		return required ? -ENOENT : 0;
	if (t->dtype != COLI_DTYPE_F32 || t->ndim != 1 || t->shape[0] != (uint64_t)n) {
		snprintf(b->err, b->errlen, "%s: tensor '%s' must be f32 [%d]",
		         coli_io_container_path(b->c), name, n);
		return -EINVAL;
	}
	*v = coli_io_container_tensor_data(b->c, t);
	return 0;
}

/* An f32 matrix [rows][cols] (gpt-oss's expert biases, an expert a row). */
static int bind_f32(struct bind_ctx *b, const float **v, const char *name, int rows, int cols)
{
	const struct coli_tensor_info *t = find(b, name, 1);

	*v = NULL;
	if (!t)
		return -ENOENT;
	if (t->dtype != COLI_DTYPE_F32 || t->ndim != 2 || t->shape[0] != (uint64_t)rows ||
	    t->shape[1] != (uint64_t)cols) {
		snprintf(b->err, b->errlen, "%s: tensor '%s' must be f32 [%d, %d]",
		         coli_io_container_path(b->c), name, rows, cols);
		return -EINVAL;
	}
	*v = coli_io_container_tensor_data(b->c, t);
	return 0;
}

/* An MLA layer's attention (core/coli.h lists the tensors). */
static int bind_mla(struct bind_ctx *b, struct coli_model *m, int l)
{
	const struct coli_model_config *c = &m->cfg;
	struct coli_layer *L = &m->layers[l];
	int H = c->hidden, nh = c->n_heads, qd = nh * c->head_dim, kl = c->kv_lora;
	char n[COLI_TENSOR_NAME_MAX];
	int rc = 0;

#define NAME(s) (snprintf(n, sizeof(n), "blk.%d.%s", l, s), n)
	if (c->q_lora) {
		rc = rc ? rc : bind_mat(b, &L->q_a, NAME("attn_q_a"), c->q_lora, H, 1);
		rc = rc ? rc : bind_vec(b, &L->q_a_norm, NAME("attn_q_a_norm"), c->q_lora, 1);
		rc = rc ? rc : bind_mat(b, &L->q, NAME("attn_q_b"), qd, c->q_lora, 1);
	} else {
		rc = rc ? rc : bind_mat(b, &L->q, NAME("attn_q"), qd, H, 1);
	}
	rc = rc ? rc : bind_mat(b, &L->kv_a, NAME("attn_kv_a"), kl + c->rope_dim, H, 1);
	rc = rc ? rc : bind_vec(b, &L->kv_a_norm, NAME("attn_kv_a_norm"), kl, 1);
	rc = rc ? rc : bind_mat(b, &L->k_b, NAME("attn_k_b"), nh * kl, c->qk_nope, 1);
	rc = rc ? rc : bind_mat(b, &L->v_b, NAME("attn_v_b"), nh * c->v_head, kl, 1);
	rc = rc ? rc : bind_mat(b, &L->o, NAME("attn_o"), H, nh * c->v_head, 1);
#undef NAME
	return rc;
}

static int bind_layer(struct bind_ctx *b, struct coli_model *m, int l)
{
	const struct coli_model_config *cfg = &m->cfg;
	struct coli_layer *L = &m->layers[l];
	int H = cfg->hidden, qd = cfg->n_heads * cfg->head_dim,
	    kd = cfg->n_kv_heads * cfg->head_dim;
	char n[COLI_TENSOR_NAME_MAX];
	int rc = 0;

#define NAME(s) (snprintf(n, sizeof(n), "blk.%d.%s", l, s), n)
	rc = rc ? rc : bind_vec(b, &L->attn_norm, NAME("attn_norm"), H, 1);
	rc = rc ? rc : bind_vec(b, &L->ffn_norm, NAME("ffn_norm"), H, 1);
	if (cfg->kv_lora) {
		rc = rc ? rc : bind_mla(b, m, l);
	} else {
		rc = rc ? rc : bind_mat(b, &L->q, NAME("attn_q"), qd, H, 1);
		rc = rc ? rc : bind_mat(b, &L->k, NAME("attn_k"), kd, H, 1);
		rc = rc ? rc : bind_mat(b, &L->v, NAME("attn_v"), kd, H, 1);
		rc = rc ? rc : bind_mat(b, &L->o, NAME("attn_o"), H, qd, 1);
	}
	if (cfg->qkv_bias) {
		rc = rc ? rc : bind_vec(b, &L->q_bias, NAME("attn_q_bias"), qd, 1);
		rc = rc ? rc : bind_vec(b, &L->k_bias, NAME("attn_k_bias"), kd, 1);
		rc = rc ? rc : bind_vec(b, &L->v_bias, NAME("attn_v_bias"), kd, 1);
	}
	if (cfg->qk_norm) {
		int per_head = cfg->qk_norm == 1;

		rc = rc ? rc
		        : bind_vec(b, &L->q_norm, NAME("attn_q_norm"),
		                   per_head ? cfg->head_dim : qd, 1);
		rc = rc ? rc
		        : bind_vec(b, &L->k_norm, NAME("attn_k_norm"),
		                   per_head ? cfg->head_dim : kd, 1);
	}
	if (cfg->attn_o_bias)
		rc = rc ? rc : bind_vec(b, &L->o_bias, NAME("attn_o_bias"), H, 1);
	if (cfg->attn_sinks)
		rc = rc ? rc : bind_vec(b, &L->sinks, NAME("attn_sinks"), cfg->n_heads, 1);
	L->window = cfg->is_sliding_layer[l] ? cfg->sliding_window : 0;
	L->moe = cfg->is_moe_layer[l];
	if (L->moe && cfg->expert_bias) {
		int E = cfg->n_experts, I = cfg->moe_inter;

		rc = rc ? rc : bind_f32(b, &L->exp_gate_bias, NAME("exp_gate_bias"), E, I);
		rc = rc ? rc : bind_f32(b, &L->exp_up_bias, NAME("exp_up_bias"), E, I);
		rc = rc ? rc : bind_f32(b, &L->exp_down_bias, NAME("exp_down_bias"), E, H);
	}
	if (L->moe) {
		const struct coli_expert_layer *xl = coli_io_container_experts_of(b->c, l);

		rc = rc ? rc : bind_mat(b, &L->router, NAME("router"), cfg->n_experts, H, 1);
		if (!rc && L->router.dtype != COLI_DTYPE_F32) {
			snprintf(b->err, b->errlen, "%s: router of layer %d must be f32",
			         coli_io_container_path(b->c), l);
			rc = -EINVAL;
		}
		if (cfg->router_bias)
			rc = rc ? rc
			        : bind_vec(b, &L->router_bias, NAME("router_bias"), cfg->n_experts,
			                   1);
		if (!rc && (!xl || xl->n_experts != (uint32_t)cfg->n_experts ||
		            xl->hidden != (uint32_t)H || xl->inter != (uint32_t)cfg->moe_inter)) {
			snprintf(
			    b->err, b->errlen,
			    "%s: expert slabs of layer %d are missing or do not match the config",
			    coli_io_container_path(b->c), l);
			rc = -EINVAL;
		}
		rc = rc ? rc : dtype_check(b, NAME("experts"), xl->dtype);
		rc = rc ? rc : dtype_check(b, NAME("experts"), coli_io_expert_down_dtype(xl));
		for (int i = 0; !rc && i < coli_io_container_n_expert_layers(b->c); i++)
			if (coli_io_container_expert_layer(b->c, i) == xl)
				L->xl = i;
		if (cfg->shared_inter) {
			int S = cfg->shared_inter;

			rc = rc ? rc : bind_mat(b, &L->sh_gate, NAME("shexp_gate"), S, H, 1);
			rc = rc ? rc : bind_mat(b, &L->sh_up, NAME("shexp_up"), S, H, 1);
			rc = rc ? rc : bind_mat(b, &L->sh_down, NAME("shexp_down"), H, S, 1);
			if (cfg->shared_gated)
				rc = rc ? rc
				        : bind_mat(b, &L->sh_router, NAME("shexp_router"), 1, H, 1);
		}
	} else {
		int D = cfg->dense_inter;

		rc = rc ? rc : bind_mat(b, &L->ffn_gate, NAME("ffn_gate"), D, H, 1);
		rc = rc ? rc : bind_mat(b, &L->ffn_up, NAME("ffn_up"), D, H, 1);
		rc = rc ? rc : bind_mat(b, &L->ffn_down, NAME("ffn_down"), H, D, 1);
	}
#undef NAME
	return rc;
}

int coli_model_bind(struct coli_model *m, coli_container_t *c, char *err, size_t errlen)
{
	struct bind_ctx b = {c, err, errlen, COLI_DTYPE_BF16};
	const void *js;
	size_t len;
	int rc;

	memset(m, 0, sizeof(*m));
	m->c = c;
	js = coli_io_container_section(c, COLI_SECTION_CONFIG, &len);
	if (!js) {
		snprintf(err, errlen, "%s: no model config section", coli_io_container_path(c));
		m->c = NULL;
		return -EINVAL;
	}
	rc = coli_config_parse(js, len, &m->cfg, err, errlen);
	if (rc) {
		m->c = NULL;
		return rc;
	}
	b.quant = m->cfg.quant;
	rc = bind_mat(&b, &m->tok_embd, "tok_embd", m->cfg.vocab, m->cfg.hidden, 1);
	if (!rc)
		rc = bind_vec(&b, &m->out_norm, "out_norm", m->cfg.hidden, 1);
	if (!rc) {
		if (m->cfg.tie_embeddings)
			m->lm_head = m->tok_embd;
		else
			rc = bind_mat(&b, &m->lm_head, "lm_head", m->cfg.vocab, m->cfg.hidden, 1);
	}
	for (int l = 0; !rc && l < m->cfg.n_layers; l++)
		rc = bind_layer(&b, m, l);
	if (rc)
		m->c = NULL; /* the caller still owns c */
	return rc;
}

void coli_model_expert_at(const struct coli_model *m, int layer, const void *slab,
                          struct coli_expert_view *v)
{
	const struct coli_expert_layer *xl =
	    coli_io_container_expert_layer(m->c, m->layers[layer].xl);
	const char *p = slab;
	int H = (int)xl->hidden, I = (int)xl->inter;

	coli_mat_view(&v->gate, xl->dtype, I, H, p + xl->gate_off);
	coli_mat_view(&v->up, xl->dtype, I, H, p + xl->up_off);
	coli_mat_view(&v->down, coli_io_expert_down_dtype(xl), H, I, p + xl->down_off);
}

struct rebase {
	const char *lo, *hi, *to;
};

static void rb_ptr(const struct rebase *r, const void **p)
{
	const char *q = *p;

	if (q && q >= r->lo && q < r->hi)
		*p = r->to + (q - r->lo);
}

static void rb_vec(const struct rebase *r, const float **v)
{
	rb_ptr(r, (const void **)v);
}

static void rb_mat(const struct rebase *r, struct coli_mat *m)
{
	rb_ptr(r, &m->data);
	rb_ptr(r, (const void **)&m->scales);
}

void coli_model_rebase(struct coli_model *m, const void *from, size_t bytes, const void *to)
{
	struct rebase r = {from, (const char *)from + bytes, to};

	rb_mat(&r, &m->tok_embd);
	rb_mat(&r, &m->lm_head);
	rb_vec(&r, &m->out_norm);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		struct coli_layer *L = &m->layers[l];

		rb_vec(&r, &L->attn_norm), rb_vec(&r, &L->ffn_norm);
		rb_mat(&r, &L->q), rb_mat(&r, &L->k), rb_mat(&r, &L->v), rb_mat(&r, &L->o);
		rb_vec(&r, &L->q_bias), rb_vec(&r, &L->k_bias), rb_vec(&r, &L->v_bias);
		rb_vec(&r, &L->q_norm), rb_vec(&r, &L->k_norm);
		rb_mat(&r, &L->q_a), rb_mat(&r, &L->kv_a), rb_mat(&r, &L->k_b), rb_mat(&r, &L->v_b);
		rb_vec(&r, &L->q_a_norm), rb_vec(&r, &L->kv_a_norm);
		rb_mat(&r, &L->router);
		rb_vec(&r, &L->router_bias);
		rb_vec(&r, &L->o_bias), rb_vec(&r, &L->sinks);
		rb_vec(&r, &L->exp_gate_bias), rb_vec(&r, &L->exp_up_bias);
		rb_vec(&r, &L->exp_down_bias);
		rb_mat(&r, &L->sh_gate), rb_mat(&r, &L->sh_up), rb_mat(&r, &L->sh_down);
		rb_mat(&r, &L->sh_router);
		rb_mat(&r, &L->ffn_gate), rb_mat(&r, &L->ffn_up), rb_mat(&r, &L->ffn_down);
	}
}

/* The devices' GEMVs take K % 32 == 0 only (GGUF's block types whole
 * blocks: the CPU's rule too). The simulated device follows the same rules
 * (core/engine.c asks here), so its placement is the GPU's. */
static int dev_cols(const struct coli_mat *w, const char *name, int l, char *why, size_t len)
{
	char at[64];

	if (!w->data || w->cols % COLI_QBLOCK == 0)
		return 0;
	if (l < 0)
		snprintf(at, sizeof(at), "%s", name);
	else
		snprintf(at, sizeof(at), "blk.%d.%s", l, name);
	snprintf(why, len, "%s has %d columns (the device kernels need multiples of 32)", at,
	         w->cols);
	return -ENOTSUP;
}

int coli_model_dev_check(const struct coli_model *m, int experts, char *why, size_t len)
{
	/* gpt-oss: its experts add biases to gate and up and clamp their SwiGLU:
	 * a device's silu op has that form where it says so (experts 2: every
	 * device has COLI_DEV_CAP_SWIGLU_OAI, the sim's and the GPU's do); the
	 * down bias joins on the host (core/moe/block.c) */
	if (experts == 1 && (m->cfg.expert_bias || m->cfg.ffn_act != COLI_ACT_SWIGLU)) {
		snprintf(why, len,
		         "its experts add biases and a clamped SwiGLU (%s), which a device "
		         "here has no kernel for",
		         coli_arch_name(m->cfg.arch));
		return -ENOTSUP;
	}
	for (int l = 0; experts && l < m->cfg.n_layers; l++) {
		const struct coli_expert_layer *xl;

		if (!m->layers[l].moe)
			continue;
		xl = coli_io_container_expert_layer(m->c, m->layers[l].xl);
		if (xl->hidden % COLI_QBLOCK || xl->inter % COLI_QBLOCK) {
			snprintf(why, len,
			         "the experts of layer %d are %u x %u (the device kernels need "
			         "multiples of 32)",
			         l, xl->inter, xl->hidden);
			return -ENOTSUP;
		}
		if (coli_dtype_is_quant(xl->dtype) !=
		    coli_dtype_is_quant(coli_io_expert_down_dtype(xl))) {
			/* h goes to down quantized or not, as gate and up's input */
			snprintf(why, len,
			         "the experts of layer %d are %s with a %s down, which the "
			         "device kernels do not take",
			         l, coli_dtype_name(xl->dtype),
			         coli_dtype_name(coli_io_expert_down_dtype(xl)));
			return -ENOTSUP;
		}
	}
	if (experts)
		return 0;
	/* ptx/attn/gpu_mla.c's limits; per-head jobs on the GEMM at prefill */
	if (m->cfg.kv_lora) {
		const struct coli_model_config *c = &m->cfg;
		const int kr = c->kv_lora + c->rope_dim;
		const enum coli_dtype t = m->layers[0].k_b.dtype;

		if (kr % 16 || kr > 640 || c->kv_lora % 8 || c->kv_lora > 512) {
			snprintf(why, len,
			         "its MLA latent rows are %d + %d values (the device kernel takes "
			         "kv_lora <= 512 with kv_lora + rope <= 640, a multiple of 16)",
			         c->kv_lora, c->rope_dim);
			return -ENOTSUP;
		}
		if (t != COLI_DTYPE_BF16 && (!coli_dtype_is_quant(t) || coli_dtype_is_block(t))) {
			snprintf(why, len,
			         "its MLA matrices are %s (the device runs bf16, q8 and q4)",
			         coli_dtype_name(t));
			return -ENOTSUP;
		}
	}
	/* YaRN's cos/sin factor on partial RoPE: the device folds the factor into
	 * the softmax scale (core/forward/attn_dev.c), which is right only when
	 * every dim of q and k rotates; MLA's kernel applies it itself */
	float inv_freq[512], attn, scale;

	coli_config_rope(&m->cfg, inv_freq, &attn, &scale); /* rope_dim <= 1024 */
	if (!m->cfg.kv_lora && attn != 1.0f && m->cfg.rope_dim != m->cfg.head_dim) {
		snprintf(why, len,
		         "its YaRN attention factor scales %d of %d dims a head, which the "
		         "device attention does not apply",
		         m->cfg.rope_dim, m->cfg.head_dim);
		return -ENOTSUP;
	}
	if (dev_cols(&m->tok_embd, "tok_embd", -1, why, len) ||
	    dev_cols(&m->lm_head, "lm_head", -1, why, len))
		return -ENOTSUP;
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct coli_layer *L = &m->layers[l];
		const struct {
			const char *name;
			const struct coli_mat *w;
		} mats[] = {{"attn_q", &L->q},          {"attn_k", &L->k},
		            {"attn_v", &L->v},          {"attn_o", &L->o},
		            {"attn_q_a", &L->q_a},      {"attn_kv_a", &L->kv_a},
		            {"attn_k_b", &L->k_b},      {"attn_v_b", &L->v_b},
		            {"router", &L->router},     {"shexp_gate", &L->sh_gate},
		            {"shexp_up", &L->sh_up},    {"shexp_down", &L->sh_down},
		            {"ffn_gate", &L->ffn_gate}, {"ffn_up", &L->ffn_up},
		            {"ffn_down", &L->ffn_down}};

		for (size_t i = 0; i < sizeof(mats) / sizeof(mats[0]); i++)
			if (dev_cols(mats[i].w, mats[i].name, l, why, len))
				return -ENOTSUP;
	}
	return 0;
}
