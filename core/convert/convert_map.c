/*
 * core/convert/convert_map.c — the converter's map pass: every tensor of every
 * shard header (or of a GGUF, under its checkpoint name) is matched to its
 * destination, a canonical tensor or one part (gate/up/down) of one expert
 * slab, as jobs (core/convert/convert_job.h). A fused 3-D expert tensor
 * becomes E (down_proj) or 2E (gate_up_proj) jobs. Shapes are checked
 * against the config; unknown names, duplicates and anything still unfilled
 * afterwards are errors naming the checkpoint's tensor.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert/convert_job.h"

int coli_convert_add_job(struct cv *v, const struct job *j)
{
	int rc;

	if (v->n_jobs == v->cap_jobs) {
		size_t cap = v->cap_jobs ? v->cap_jobs * 2 : 1024;
		struct job *p = realloc(v->jobs, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		v->jobs = p;
		v->cap_jobs = cap;
	}
	struct job *d = &v->jobs[v->n_jobs++];

	*d = *j;
	d->ggml = v->hf.ggml ? v->hf.ggml[d->shard][d->src - v->hf.st[d->shard].t] : -1;
	/* blocks are moved whole rows at a time: a transpose or a column pair
	 * is dequantized and converted instead */
	d->copy = d->ggml >= 0 && coli_ggml_same_blocks((uint32_t)d->ggml, d->dtype) &&
	          (d->xf == XF_NONE || d->xf == XF_DEINTERLEAVE);
	v->n_blocks += d->ggml >= 0;
	v->n_copied += (size_t)d->copy;
	v->n_mx_exact += d->ggml == COLI_GGML_MXFP4 && d->dtype == COLI_DTYPE_Q8_0;
	d->scale = NULL;
	rc = coli_convert_fp8_bind(v, d); /* an F8 source: its block scales */
	if (rc)
		return rc;
	v->total += coli_convert_src_bytes(d, d->rows * d->cols);
	return 0;
}

/* A source tensor's name for a message: a GGUF's own name first, then the
 * checkpoint name it was read as; a checkpoint's as is. */
#define SRC(name) coli_convert_src_label(v->hf.ggml != NULL, (name), (char[256]){0}, 256)
/* Where the shapes come from. */
#define CFG(v) ((v)->hf.ggml ? "the GGUF's metadata" : "config.json")

static int shape_error(struct cv *v, int shard, const struct coli_st_tensor *t, const char *want)
{
	char got[96] = "";
	size_t k = 0;

	for (int i = 0; i < t->ndim && k < sizeof(got) - 24; i++)
		k += (size_t)snprintf(got + k, sizeof(got) - k, "%s%llu", i ? ", " : "",
		                      (unsigned long long)t->shape[i]);
	snprintf(v->errbuf, v->errlen, "%s: tensor '%s' has shape [%s], but %s implies %s",
	         v->hf.shards[shard], SRC(t->name), got, CFG(v), want);
	return -EINVAL;
}

/* An expert part (or a range of them, from a fused tensor) -> jobs. */
static int map_expert(struct cv *v, int shard, const struct coli_st_tensor *t, int l, int expert,
                      int part)
{
	const struct coli_model_config *c = v->c;
	int li = v->layer_el[l];
	uint64_t H = c->hidden, I = c->moe_inter, E = c->n_experts;
	char want[96];
	int fused = expert < 0, rc;

	if (li < 0) {
		snprintf(v->errbuf, v->errlen,
		         "%s: tensor '%s' is an expert weight, but %s makes layer %d "
		         "dense",
		         v->hf.shards[shard], SRC(t->name), CFG(v), l);
		return -EINVAL;
	}
	if (!fused && (uint64_t)expert >= E) {
		snprintf(v->errbuf, v->errlen,
		         "%s: tensor '%s': expert %d, but %s has %llu experts", v->hf.shards[shard],
		         SRC(t->name), expert, CFG(v), (unsigned long long)E);
		return -EINVAL;
	}
	/* part < 0: fused gate_up [E, 2I, H] (gate rows first, as transformers'
	 * chunk(2, dim=-1) splits them); fused down [E, H, I]. */
	uint64_t rows = part == PART_DOWN ? H : I, cols = part == PART_DOWN ? I : H;
	uint64_t src_rows = part < 0 ? 2 * I : rows;
	if (fused)
		snprintf(want, sizeof(want), "[%llu, %llu, %llu]", (unsigned long long)E,
		         (unsigned long long)src_rows, (unsigned long long)cols);
	else
		snprintf(want, sizeof(want), "[%llu, %llu]", (unsigned long long)rows,
		         (unsigned long long)cols);
	if (fused ? (t->ndim != 3 || t->shape[0] != E || t->shape[1] != src_rows ||
	             t->shape[2] != cols)
	          : (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols))
		return shape_error(v, shard, t, want);
	for (uint64_t e = fused ? 0 : (uint64_t)expert; e < (fused ? E : (uint64_t)expert + 1);
	     e++) {
		for (int p = part < 0 ? PART_GATE : part; p <= (part < 0 ? PART_UP : part); p++) {
			unsigned char *seen = &v->part_seen[((size_t)li * E + e) * 3 + p];
			struct job j = {
			    .shard = shard,
			    .src = t,
			    .src_row0 = fused ? e * src_rows + (p == PART_UP ? I : 0) : 0,
			    .rows = rows,
			    .cols = cols,
			    .kind = DST_SLAB,
			    .idx = li,
			    .expert = (uint32_t)e,
			    .base = p == PART_GATE ? v->el[li].gate_off
			            : p == PART_UP ? v->el[li].up_off
			                           : v->el[li].down_off,
			    .dtype = p == PART_DOWN ? coli_io_expert_down_dtype(&v->el[li])
			                            : v->el[li].dtype,
			};

			if (*seen) {
				snprintf(
				    v->errbuf, v->errlen,
				    "%s: tensor '%s' supplies expert %llu of layer %d a second "
				    "time",
				    v->hf.shards[shard], SRC(t->name), (unsigned long long)e, l);
				return -EINVAL;
			}
			*seen = 1;
			rc = coli_convert_add_job(v, &j);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* MLA's kv_b_proj [nh*(nope+v), kv_lora] (head h: nope rows of W_UK, then v
 * rows of W_UV) -> blk.N.attn_k_b [nh*kv_lora, nope], head h's block the
 * transpose of its W_UK (row c = column c of those nope rows), and
 * blk.N.attn_v_b [nh*v, kv_lora], the W_UV rows as they are: one job a head
 * and part. kb: the attn_k_b slot (attn_v_b follows it). */
static int map_kv_b(struct cv *v, int shard, const struct coli_st_tensor *t, struct slot *kb)
{
	const struct coli_model_config *c = v->c;
	uint64_t nh = c->n_heads, kl = c->kv_lora, np = c->qk_nope, vh = c->v_head;
	struct slot *vb = kb + 1;
	char want[64];
	int rc = 0;

	snprintf(want, sizeof(want), "[%llu, %llu]", (unsigned long long)(nh * (np + vh)),
	         (unsigned long long)kl);
	if (t->ndim != 2 || t->shape[0] != nh * (np + vh) || t->shape[1] != kl)
		return shape_error(v, shard, t, want);
	kb->hf_seen = vb->hf_seen = t->name;
	for (uint64_t h = 0; h < nh && !rc; h++) {
		struct job k = {.shard = shard,
		                .src = t,
		                .src_row0 = h * (np + vh),
		                .rows = kl,
		                .cols = np,
		                .kind = DST_TENSOR,
		                .idx = kb->idx,
		                .dtype = kb->dtype,
		                .xf = XF_TRANSPOSE,
		                .dst_row0 = h * kl,
		                .dst_rows = nh * kl};
		struct job u = {.shard = shard,
		                .src = t,
		                .src_row0 = h * (np + vh) + np,
		                .rows = vh,
		                .cols = kl,
		                .kind = DST_TENSOR,
		                .idx = vb->idx,
		                .dtype = vb->dtype,
		                .dst_row0 = h * vh,
		                .dst_rows = nh * vh};

		rc = coli_convert_add_job(v, &k);
		rc = rc ? rc : coli_convert_add_job(v, &u);
	}
	return rc;
}

/* MLA's RoPE rows when the checkpoint interleaves them (rope_interleave):
 * attn_q / attn_q_b (each head: nope rows as they are, then rope rows) and
 * attn_kv_a (kv_lora rows, then rope rows) with their rope rows
 * de-interleaved, so that the engine's rotate-half RoPE computes what
 * transformers' interleaved one does. */
static int map_rope_rows(struct cv *v, int shard, const struct coli_st_tensor *t,
                         const struct slot *s, int kv_a)
{
	const struct coli_model_config *c = v->c;
	uint64_t R = c->rope_dim, lead = kv_a ? (uint64_t)c->kv_lora : (uint64_t)c->qk_nope;
	uint64_t n = kv_a ? 1 : (uint64_t)c->n_heads, per = lead + R, cols = t->shape[1];
	int rc = 0;

	for (uint64_t h = 0; h < n && !rc; h++) {
		struct job a = {.shard = shard,
		                .src = t,
		                .src_row0 = h * per,
		                .rows = lead,
		                .cols = cols,
		                .kind = DST_TENSOR,
		                .idx = s->idx,
		                .dtype = s->dtype,
		                .dst_row0 = h * per,
		                .dst_rows = n * per};
		struct job b = a;

		b.src_row0 = b.dst_row0 = h * per + lead;
		b.rows = R;
		b.xf = XF_DEINTERLEAVE;
		rc = coli_convert_add_job(v, &a);
		rc = rc ? rc : coli_convert_add_job(v, &b);
	}
	return rc;
}

/* HF per-layer suffix -> canonical suffix. */
static const struct {
	const char *hf, *coli;
} g_layer_names[] = {
    {"input_layernorm.weight", "attn_norm"},
    {"post_attention_layernorm.weight", "ffn_norm"},
    {"self_attn.q_proj.weight", "attn_q"},
    {"self_attn.k_proj.weight", "attn_k"},
    {"self_attn.v_proj.weight", "attn_v"},
    {"self_attn.o_proj.weight", "attn_o"},
    {"self_attn.q_proj.bias", "attn_q_bias"},
    {"self_attn.k_proj.bias", "attn_k_bias"},
    {"self_attn.v_proj.bias", "attn_v_bias"},
    {"self_attn.q_norm.weight", "attn_q_norm"},
    {"self_attn.k_norm.weight", "attn_k_norm"},
    {"mlp.gate.weight", "router"},
    {"block_sparse_moe.gate.weight", "router"},
    {"mlp.shared_expert.gate_proj.weight", "shexp_gate"},
    {"mlp.shared_expert.up_proj.weight", "shexp_up"},
    {"mlp.shared_expert.down_proj.weight", "shexp_down"},
    {"mlp.shared_expert_gate.weight", "shexp_router"},
    {"mlp.gate_proj.weight", "ffn_gate"},
    {"mlp.up_proj.weight", "ffn_up"},
    {"mlp.down_proj.weight", "ffn_down"},
    /* glm4_moe */
    {"mlp.gate.e_score_correction_bias", "router_bias"},
    {"mlp.shared_experts.gate_proj.weight", "shexp_gate"},
    {"mlp.shared_experts.up_proj.weight", "shexp_up"},
    {"mlp.shared_experts.down_proj.weight", "shexp_down"},
    /* minimax_m2: the Hub's spelling, and transformers 5's */
    {"block_sparse_moe.e_score_correction_bias", "router_bias"},
    {"mlp.e_score_correction_bias", "router_bias"},
    /* deepseek_v3's MLA (kv_b_proj becomes two tensors: map_kv_b) */
    {"self_attn.q_a_proj.weight", "attn_q_a"},
    {"self_attn.q_a_layernorm.weight", "attn_q_a_norm"},
    {"self_attn.q_b_proj.weight", "attn_q_b"},
    {"self_attn.kv_a_proj_with_mqa.weight", "attn_kv_a"},
    {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm"},
    {"self_attn.kv_b_proj.weight", "attn_k_b"},
    {"self_attn.kv_b_proj.weight", "attn_v_b"},
    /* a GGUF's split kv_b (llama.cpp's attn_k_b [nh, kv_lora, nope], attn_v_b
     * [nh, v, kv_lora]: coli's layout already, heads folded into rows) */
    {"self_attn.k_b_proj.weight", "attn_k_b"},
    {"self_attn.v_b_proj.weight", "attn_v_b"},
    /* gpt_oss (its experts and their biases: core/convert/convert_gptoss.c;
     * the expert bias names here only name a missing tensor) */
    {"self_attn.o_proj.bias", "attn_o_bias"},
    {"self_attn.sinks", "attn_sinks"},
    {"mlp.router.weight", "router"},
    {"mlp.router.bias", "router_bias"},
    {"mlp.experts.gate_up_proj_bias", "exp_gate_bias"},
    {"mlp.experts.gate_up_proj_bias", "exp_up_bias"},
    {"mlp.experts.down_proj_bias", "exp_down_bias"},
    /* gpt-oss from a GGUF: gate and up biases apart, [E, I] each */
    {"mlp.experts.gate_proj_bias", "exp_gate_bias"},
    {"mlp.experts.up_proj_bias", "exp_up_bias"},
};

/* Per-expert part suffixes (after "<prefix>experts.<e>."). */
static const struct {
	const char *hf;
	int part;
} g_expert_parts[] = {
    {"gate_proj.weight", PART_GATE}, {"up_proj.weight", PART_UP}, {"down_proj.weight", PART_DOWN},
    {"w1.weight", PART_GATE},        {"w3.weight", PART_UP},      {"w2.weight", PART_DOWN},
};

/* The expert part of a layer suffix: "mlp.experts.3.up_proj.weight",
 * "block_sparse_moe.experts.3.w3.weight", "mlp.experts.gate_up_proj".
 * Returns 1 and sets *expert (-1 fused) and *part (-1 gate_up), else 0. */
static int parse_expert(const char *s, int *expert, int *part)
{
	static const char *const pre[] = {"mlp.experts.", "block_sparse_moe.experts."};
	char *end;

	for (int i = 0; i < 2; i++) {
		size_t n = strlen(pre[i]);
		long e;

		if (strncmp(s, pre[i], n))
			continue;
		s += n;
		if (!strcmp(s, "gate_up_proj") || !strcmp(s, "gate_up_proj.weight")) {
			*expert = -1, *part = -1;
			return 1;
		}
		if (!strcmp(s, "down_proj") || !strcmp(s, "down_proj.weight")) {
			*expert = -1, *part = PART_DOWN;
			return 1;
		}
		if (*s < '0' || *s > '9')
			return 0;
		e = strtol(s, &end, 10);
		if (*end != '.' || e > 1 << 20)
			return 0;
		for (size_t k = 0; k < sizeof(g_expert_parts) / sizeof(g_expert_parts[0]); k++) {
			if (!strcmp(end + 1, g_expert_parts[k].hf)) {
				*expert = (int)e, *part = g_expert_parts[k].part;
				return 1;
			}
		}
	}
	return 0;
}

int coli_convert_map_tensor(struct cv *v, int shard, const struct coli_st_tensor *t)
{
	const char *nm = t->name, *rest;
	char coli[COLI_TENSOR_NAME_MAX] = "", want[64];
	int expert, part, l = -1, rc;
	struct slot *s = NULL;

	rc = coli_convert_fp8_screen(v, shard, t);
	if (rc) /* 1: a scale, read with its F8 weight (core/convert/convert_fp8.c) */
		return rc < 0 ? rc : 0;
	if ((t->dtype == COLI_ST_OTHER || t->dtype == COLI_ST_F8_E8M0) && !v->hf.ggml &&
	    !(v->hf.mxfp4 && !strcmp(t->dtype_name, "U8"))) { /* U8: MXFP4's, checked there */
		snprintf(v->errbuf, v->errlen,
		         "%s: tensor '%s' has dtype %s; only F32, F16, BF16 and block-scaled FP8 "
		         "checkpoints can be converted",
		         v->hf.shards[shard], nm, t->dtype_name);
		return -ENOTSUP;
	}
	if (!strcmp(nm, "model.embed_tokens.weight"))
		snprintf(coli, sizeof(coli), "tok_embd");
	else if (!strcmp(nm, "model.norm.weight"))
		snprintf(coli, sizeof(coli), "out_norm");
	else if (!strcmp(nm, "lm_head.weight"))
		snprintf(coli, sizeof(coli), "lm_head");
	else if (!strncmp(nm, "model.layers.", 13) && nm[13] >= '0' && nm[13] <= '9') {
		char *end;
		long ll = strtol(nm + 13, &end, 10);

		if (*end == '.' && ll >= v->c->n_layers && ll < v->c->n_layers + v->hf.n_mtp) {
			v->mtp_skipped++; /* a next-token-prediction layer: never run */
			return 0;
		}
		if (*end == '.' && ll < v->c->n_layers) {
			l = (int)ll;
			rest = end + 1;
			if (v->c->arch == COLI_ARCH_GPT_OSS) {
				struct job *gj;
				size_t ng;

				rc = coli_convert_gptoss_map(v, shard, t, l, rest, &gj, &ng);
				for (size_t i = 0; rc == 0 && i < ng; i++)
					rc = coli_convert_add_job(v, &gj[i]);
				free(gj);
				if (rc <= 0)
					return rc;
			}
			if (parse_expert(rest, &expert, &part))
				return map_expert(v, shard, t, l, expert, part);
			if (strstr(rest, "rotary_emb.inv_freq")) {
				fprintf(stderr,
				        "coli convert: ignoring %s (recomputed from rope_theta)\n",
				        nm);
				return 0;
			}
			for (size_t k = 0; k < sizeof(g_layer_names) / sizeof(g_layer_names[0]);
			     k++)
				if (!*coli && !strcmp(rest, g_layer_names[k].hf))
					snprintf(coli, sizeof(coli), "blk.%d.%s", l,
					         g_layer_names[k].coli);
		}
	}
	if (!strcmp(coli, "lm_head") && v->c->tie_embeddings)
		return 0; /* a tied checkpoint may still carry a copy */
	for (int i = 0; *coli && i < v->n_slots && !s; i++)
		if (!strcmp(v->slots[i].name, coli))
			s = &v->slots[i];
	if (!s) {
		snprintf(v->errbuf, v->errlen,
		         "%s: tensor '%s' is not part of a %s model with this %s "
		         "(unknown name, or a layer/bias/norm the config does not have)",
		         v->hf.shards[shard], SRC(nm), v->c->model_type, CFG(v));
		return -EINVAL;
	}
	if (s->hf_seen) {
		snprintf(v->errbuf, v->errlen, "%s: tensor '%s' appears twice (also as '%s')",
		         v->hf.shards[shard], SRC(nm), s->hf_seen);
		return -EINVAL;
	}
	if (v->c->kv_lora && strstr(coli, ".attn_k_b") && strstr(nm, ".kv_b_proj."))
		return map_kv_b(v, shard, t, s);
	if (s->ndim == 1)
		snprintf(want, sizeof(want), "[%llu]", (unsigned long long)s->shape[0]);
	else
		snprintf(want, sizeof(want), "[%llu, %llu]", (unsigned long long)s->shape[0],
		         (unsigned long long)s->shape[1]);
	if (t->ndim != s->ndim || t->shape[0] != s->shape[0] ||
	    (s->ndim == 2 && t->shape[1] != s->shape[1]))
		return shape_error(v, shard, t, want);
	s->hf_seen = t->name;
	if (v->c->kv_lora && v->hf.rope_interleave &&
	    (strstr(coli, ".attn_q_b") || strstr(coli, ".attn_kv_a") ||
	     (strstr(coli, ".attn_q") && !strstr(coli, "_q_"))) &&
	    !strstr(coli, "_norm"))
		return map_rope_rows(v, shard, t, s, strstr(coli, ".attn_kv_a") != NULL);
	struct job j = {
	    .shard = shard,
	    .src = t,
	    .rows = s->ndim == 2 ? s->shape[0] : 1,
	    .cols = s->ndim == 2 ? s->shape[1] : s->shape[0],
	    .kind = DST_TENSOR,
	    .idx = s->idx,
	    .dtype = s->dtype,
	};
	size_t sl = strlen(s->name);

	if (v->hf.rope_interleaved && sl > 7 &&
	    (!strcmp(s->name + sl - 7, ".attn_q") || !strcmp(s->name + sl - 7, ".attn_k")))
		j.unrope = v->c->head_dim;
	return coli_convert_add_job(v, &j);
}

/* "missing tensor NAME (coli's CN)": a GGUF's name first, then the
 * checkpoint name it would be read as. */
static void missing(struct cv *v, const char *where, const char *hf, const char *cn)
{
	char g[128];

	if (v->hf.ggml && !coli_convert_gguf_name(hf, g, sizeof(g)))
		snprintf(v->errbuf, v->errlen, "%s: missing tensor %s (read as %s, coli's %s)",
		         where, g, hf, cn);
	else
		snprintf(v->errbuf, v->errlen, "%s: missing tensor %s (coli's %s)", where, hf, cn);
}

const char *coli_convert_slot_hf(const struct cv *v, const char *cn, char *buf, size_t n)
{
	int mixtral = v->c->arch == COLI_ARCH_MIXTRAL || v->c->arch == COLI_ARCH_MINIMAX_M2;
	int oss = v->c->arch == COLI_ARCH_GPT_OSS; /* its router is mlp.router */
	int l = -1, off = 0;

	if (!strcmp(cn, "tok_embd"))
		return "model.embed_tokens.weight";
	if (!strcmp(cn, "out_norm"))
		return "model.norm.weight";
	if (!strcmp(cn, "lm_head"))
		return "lm_head.weight";
	if (sscanf(cn, "blk.%d.%n", &l, &off) == 1 && off)
		for (size_t k = 0; k < sizeof(g_layer_names) / sizeof(g_layer_names[0]); k++)
			if (!strcmp(cn + off, g_layer_names[k].coli) &&
			    !(mixtral && !strncmp(g_layer_names[k].hf, "mlp.", 4) &&
			      !strncmp(cn + off, "router", 6)) &&
			    !(oss && !strncmp(cn + off, "router", 6) &&
			      strncmp(g_layer_names[k].hf, "mlp.router.", 11))) {
				snprintf(buf, n, "model.layers.%d.%s", l, g_layer_names[k].hf);
				return buf;
			}
	return NULL;
}

/* After mapping: anything the config needs that no shard supplied, named
 * the way the checkpoint's architecture spells it (and a GGUF's). */
int coli_convert_check_complete(struct cv *v)
{
	static const char *const pn[] = {"gate_proj", "up_proj", "down_proj"};
	static const char *const mx[] = {"w1", "w3", "w2"};
	const char *where = v->hf.index_path ? v->hf.index_path : v->hf.shards[0];
	int mixtral = v->c->arch == COLI_ARCH_MIXTRAL || v->c->arch == COLI_ARCH_MINIMAX_M2;

	for (int i = 0; i < v->n_slots; i++) {
		const char *cn = v->slots[i].name, *hf;
		char buf[160];

		if (v->slots[i].hf_seen)
			continue;
		hf = coli_convert_slot_hf(v, cn, buf, sizeof(buf));
		missing(v, where, hf ? hf : cn, cn);
		return -ENOENT;
	}
	for (int li = 0; li < v->n_el; li++)
		for (uint32_t e = 0; e < v->el[li].n_experts; e++)
			for (int p = 0; p < 3; p++)
				if (!v->part_seen[((size_t)li * v->el[li].n_experts + e) * 3 + p]) {
					char hf[160], cn[64];

					snprintf(hf, sizeof(hf), "model.layers.%u.%s.%u.%s.weight",
					         v->el[li].layer,
					         mixtral ? "block_sparse_moe.experts"
					                 : "mlp.experts",
					         e, mixtral ? mx[p] : pn[p]);
					if (v->c->arch == COLI_ARCH_GPT_OSS) /* fused only */
						snprintf(hf, sizeof(hf),
						         "model.layers.%u.mlp.experts.%s",
						         v->el[li].layer,
						         p == PART_DOWN ? "down_proj"
						                        : "gate_up_proj");
					snprintf(cn, sizeof(cn), "blk.%u.experts slab %u",
					         v->el[li].layer, e);
					missing(v, where, hf, cn);
					return -ENOENT;
				}
	return 0;
}
