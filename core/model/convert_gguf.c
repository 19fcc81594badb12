/*
 * core/model/convert_gguf.c — reading a GGUF file (llama.cpp's format) as a
 * converter source: `coli convert MODEL.gguf -o OUT.coli`.
 *
 * The file becomes the same struct coli_convert_hf a Hugging Face directory
 * does, so core/model/convert.c plans, maps and streams it unchanged:
 *
 *   config     {arch}.* metadata -> struct coli_model_config (the table in
 *              read_config; which layers are MoE and the dense width come from
 *              the tensors present: blk.N.ffn_gate_inp makes layer N MoE)
 *   tensors    one "shard" (the GGUF itself, opened for pread) whose tensor
 *              table holds each GGUF tensor under its Hugging Face name and
 *              shape ([ne1, ne0]): token_embd -> model.embed_tokens.weight,
 *              blk.N.attn_q -> model.layers.N.self_attn.q_proj.weight, ...
 *              A stacked expert tensor (blk.N.ffn_gate_exps, ne = [cols, rows,
 *              E]) becomes E entries model.layers.N.mlp.experts.e.gate_proj.
 *              weight, each the byte range of that expert's rows, so an expert
 *              is read as a row range like any 2-D tensor.
 *   types      F32, F16 and BF16 tensors keep the safetensors dtypes (the same
 *              pread and widening as a checkpoint's); block types (Q8_0, Q4_K,
 *              ...) are COLI_ST_OTHER with their ggml type in h->ggml[i]:
 *              convert.c reads whole rows (ne0 is whole blocks) with
 *              coli_convert_gguf_read and widens them with coli_ggml_dequant.
 *   tokenizer  tokenizer.ggml.* ("gpt2" BPE: tokens, token_type, merges, the
 *              pre-tokenizer's name) written as a tokenizer.json text, so the
 *              engine's tokenizer loads it as it loads a checkpoint's; the chat
 *              template from tokenizer.chat_template.
 *
 * Refused, naming the thing, before any output exists: architectures other
 * than qwen3moe / qwen2moe, tensor types coli_ggml_dequant does not read,
 * unknown tensor names, RoPE scaling, tokenizer models other than gpt2 and
 * pre-tokenizer names without a regex here.
 *
 * --quant left out (opts->quant_auto): the file's matrices decide by element
 * count: mostly Q8_0 / Q5_* / Q6_K -> q8, mostly 4 bits or fewer -> q4,
 * otherwise bf16 (docs/quant.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/model/convert_internal.h"
#include "io/gguf.h"

int coli_convert_gguf_is(const char *path)
{
	char m[4];
	int fd = open(path, O_RDONLY | O_CLOEXEC), ok;
	struct stat st;

	if (fd < 0)
		return 0;
	ok = !fstat(fd, &st) && S_ISREG(st.st_mode) && pread(fd, m, 4, 0) == 4 &&
	     !memcmp(m, "GGUF", 4);
	close(fd);
	return ok;
}

uint64_t coli_convert_gguf_bytes(uint32_t type, uint64_t n)
{
	unsigned be = 0, bb = 0;

	coli_ggml_type_block(type, &be, &bb);
	return be ? n / be * bb : 0;
}

int coli_convert_src_read(const struct coli_st_file *f, const struct coli_st_tensor *t, int ggml,
                          uint64_t elem0, uint64_t n, void *dst, char *errbuf, size_t errlen)
{
	uint64_t off, len;
	unsigned char *p = dst;
	int rc;

	if (ggml < 0) {
		rc = coli_io_st_read_range_raw(f, t, elem0, n, dst);
		return rc ? coli_convert_errf(errbuf, errlen, rc, "%s", coli_io_errmsg()) : 0;
	}
	off = coli_convert_gguf_bytes((uint32_t)ggml, elem0);
	len = coli_convert_gguf_bytes((uint32_t)ggml, n);
	if (off > t->bytes || len > t->bytes - off)
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: tensor '%s': read past its end", f->path, t->name);
	while (len) {
		ssize_t r = pread(f->fd, p, len, (off_t)(t->offset + off));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return coli_convert_errf(
			    errbuf, errlen, r < 0 ? -errno : -EIO,
			    "%s: tensor '%s': cannot read: %s", f->path, t->name,
			    r < 0 ? strerror(errno) : "unexpected end of file");
		p += r, off += (uint64_t)r, len -= (uint64_t)r;
	}
	return 0;
}

int coli_convert_src_widen(int ggml, enum coli_st_dtype d, const void *src, uint64_t i0,
                           uint64_t i1, float *dst)
{
	if (ggml < 0) {
		coli_io_st_widen(d, src, i0, i1, dst);
		return 0;
	}
	return coli_ggml_dequant((uint32_t)ggml,
	                         (const char *)src + coli_convert_gguf_bytes((uint32_t)ggml, i0),
	                         dst + i0, i1 - i0);
}

/* One load: the file, its architecture's key prefix, where errors go. */
struct gg {
	struct coli_gguf *g;
	const char *path;
	char arch[32];
	char *errbuf;
	size_t errlen;
};

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

static int arch_f64(struct gg *s, const char *suffix, double dflt, double *out)
{
	char key[128];
	int rc;

	snprintf(key, sizeof(key), "%s.%s", s->arch, suffix);
	*out = dflt;
	rc = coli_gguf_get_f64(s->g, key, out);
	if (rc && rc != -ENOENT)
		return coli_convert_errf(s->errbuf, s->errlen, rc, "%s", coli_io_errmsg());
	return 0;
}

static const struct coli_gguf_tensor *tensor(struct gg *s, int l, const char *suffix)
{
	char n[96];

	snprintf(n, sizeof(n), "blk.%d.%s", l, suffix);
	return coli_gguf_tensor_find(s->g, n);
}

/* The keys every supported architecture needs. */
static int need(struct gg *s, const char *suffix, uint64_t *out)
{
	int rc = arch_u64(s, suffix, 0, out);

	if (rc == -ENOENT)
		return coli_convert_errf(s->errbuf, s->errlen, -EINVAL, "%s: no %s.%s key", s->path,
		                         s->arch, suffix);
	return rc;
}

/* Which layers are MoE, and the widths the tensors imply where no key says. */
static int layer_kinds(struct gg *s, struct coli_model_config *c)
{
	const struct coli_gguf_tensor *t;
	uint64_t v;
	int rc;

	c->dense_inter = 0;
	for (int l = 0; l < c->n_layers; l++) {
		c->is_moe_layer[l] = tensor(s, l, "ffn_gate_inp.weight") != NULL;
		t = tensor(s, l, "ffn_gate.weight");
		if (!c->is_moe_layer[l] && t && !c->dense_inter)
			c->dense_inter = (int)t->ne[1];
		if (c->is_moe_layer[l] && !c->moe_inter &&
		    (t = tensor(s, l, "ffn_gate_exps.weight")))
			c->moe_inter = (int)t->ne[1];
		if (c->is_moe_layer[l] && !c->shared_inter &&
		    (t = tensor(s, l, "ffn_gate_shexp.weight")))
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

/* An optional key: absent is its default, not an error. */
static int opt(struct gg *s, const char *suffix, uint64_t dflt, uint64_t *out)
{
	int rc = arch_u64(s, suffix, dflt, out);

	return rc == -ENOENT ? 0 : rc;
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

/* {arch}.* -> c (llama.cpp's key names, gguf-py's constants.py). */
static int read_config(struct gg *s, struct coli_model_config *c, enum coli_dtype quant)
{
	const struct coli_gguf_tensor *emb = coli_gguf_tensor_find(s->g, "token_embd.weight");
	const struct coli_gguf_kv *kv;
	uint64_t nl, hid, nh, nkv, hd, vd, ne, k, mi, si, ctx;
	double eps, theta;
	char key[128];
	int rc, qwen3 = !strcmp(s->arch, "qwen3moe");

	coli_config_init(c);
	c->arch = qwen3 ? COLI_ARCH_QWEN3_MOE : COLI_ARCH_QWEN2_MOE;
	snprintf(c->model_type, sizeof(c->model_type), "%s", coli_arch_name(c->arch));
	if ((rc = need(s, "block_count", &nl)) || (rc = need(s, "embedding_length", &hid)) ||
	    (rc = need(s, "attention.head_count", &nh)) || (rc = need(s, "expert_count", &ne)) ||
	    (rc = need(s, "expert_used_count", &k)))
		return rc;
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
	if (vd != hd)
		return coli_convert_errf(
		    s->errbuf, s->errlen, -ENOTSUP,
		    "%s: attention.value_length %llu != key_length %llu is not supported", s->path,
		    (unsigned long long)vd, (unsigned long long)hd);
	snprintf(key, sizeof(key), "%s.rope.scaling.type", s->arch);
	kv = coli_gguf_find(s->g, key);
	if (kv && kv->type == COLI_GGUF_STR && !(kv->len == 4 && !memcmp(kv->s, "none", 4)))
		return coli_convert_errf(s->errbuf, s->errlen, -ENOTSUP,
		                         "%s: %s '%.*s' is not supported (only default RoPE)",
		                         s->path, key, (int)(kv->len < 64 ? kv->len : 64), kv->s);
	c->n_layers = (int)nl;
	c->hidden = (int)hid;
	c->n_heads = (int)nh;
	c->n_kv_heads = (int)nkv;
	c->head_dim = (int)hd;
	c->rope_dim = c->head_dim; /* qwen2moe, qwen3moe: the whole head rotates */
	c->vocab = (int)(emb->ne[1] < (1u << 30) ? emb->ne[1] : 0);
	c->n_experts = (int)ne;
	c->top_k = (int)k;
	c->moe_inter = (int)mi;
	c->shared_inter = qwen3 ? 0 : (int)si;
	/* llama.cpp normalizes qwen3moe's top-k weights and not qwen2moe's
	 * unless {arch}.expert_weights_norm says otherwise */
	snprintf(key, sizeof(key), "%s.expert_weights_norm", s->arch);
	kv = coli_gguf_find(s->g, key);
	c->norm_topk_prob = kv && kv->type == COLI_GGUF_BOOL ? !!kv->v.u : qwen3;
	c->qk_norm = qwen3;
	c->qkv_bias = !qwen3 && tensor(s, 0, "attn_q.bias");
	c->tie_embeddings = !coli_gguf_tensor_find(s->g, "output.weight");
	c->max_ctx = (int)ctx;
	c->norm_eps = (float)eps;
	c->rope_theta = (float)theta;
	c->quant = quant;
	special_ids(s, c);
	return layer_kinds(s, c);
}

/* GGUF per-layer suffix -> Hugging Face suffix; the last three are stacked
 * experts ([cols, rows, E]), named per expert. */
static const struct {
	const char *gguf, *hf;
} g_names[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_gate_inp.weight", "mlp.gate.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
    {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"},
    {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"},
    {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"},
    {"ffn_gate_exps.weight", "gate_proj.weight"},
    {"ffn_up_exps.weight", "up_proj.weight"},
    {"ffn_down_exps.weight", "down_proj.weight"},
};
#define N_NAMES   (sizeof(g_names) / sizeof(g_names[0]))
#define FIRST_EXP (N_NAMES - 3)

/* A GGUF tensor's Hugging Face name (printf pattern: "%llu" is the expert of
 * a stacked one) into hf; returns the g_names index, N_NAMES for a top-level
 * tensor, or -1 for a name not known here. */
static int hf_name(const char *nm, int *layer, char *hf, size_t n)
{
	char *end;
	long l;

	*layer = -1;
	if (!strcmp(nm, "token_embd.weight"))
		return snprintf(hf, n, "model.embed_tokens.weight"), (int)N_NAMES;
	if (!strcmp(nm, "output_norm.weight"))
		return snprintf(hf, n, "model.norm.weight"), (int)N_NAMES;
	if (!strcmp(nm, "output.weight"))
		return snprintf(hf, n, "lm_head.weight"), (int)N_NAMES;
	if (strncmp(nm, "blk.", 4) || nm[4] < '0' || nm[4] > '9')
		return -1;
	l = strtol(nm + 4, &end, 10);
	if (*end != '.' || l >= COLI_MAX_LAYERS)
		return -1;
	*layer = (int)l;
	for (size_t k = 0; k < N_NAMES; k++) {
		if (strcmp(end + 1, g_names[k].gguf))
			continue;
		if (k >= FIRST_EXP)
			snprintf(hf, n, "model.layers.%ld.mlp.experts.%%llu.%s", l, g_names[k].hf);
		else
			snprintf(hf, n, "model.layers.%ld.%s", l, g_names[k].hf);
		return (int)k;
	}
	return -1;
}

/* One entry of the virtual shard: name, shape (numpy order: ne reversed, the
 * expert dimension dropped), dtype, byte range. */
static int add_entry(struct coli_convert_hf *h, const struct coli_gguf_tensor *gt, int k,
                     const char *hf, uint64_t e, int stacked)
{
	struct coli_st_file *f = &h->st[0];
	struct coli_st_tensor *t = &f->t[f->n];
	uint64_t rows = gt->ndim > 1 ? gt->ne[1] : 1;
	uint64_t row_bytes = coli_convert_gguf_bytes(gt->type, gt->ne[0]);
	char name[160];
	int nd = stacked ? 2 : gt->ndim;

	if (stacked) {
		snprintf(name, sizeof(name), hf, (unsigned long long)e);
		hf = name;
	}
	t->name = strdup(hf);
	if (!t->name)
		return -ENOMEM;
	t->dtype = gt->type == COLI_GGML_F32    ? COLI_ST_F32
	           : gt->type == COLI_GGML_F16  ? COLI_ST_F16
	           : gt->type == COLI_GGML_BF16 ? COLI_ST_BF16
	                                        : COLI_ST_OTHER;
	h->ggml[f->n] = t->dtype == COLI_ST_OTHER ? (int)gt->type : -1;
	snprintf(t->dtype_name, sizeof(t->dtype_name), "%s", coli_ggml_type_name(gt->type));
	t->ndim = nd;
	for (int i = 0; i < nd; i++)
		t->shape[i] = gt->ne[nd - 1 - i];
	if (k == (int)FIRST_EXP - 1 && gt->ndim == 1) { /* shared-expert gate: [1, H] */
		t->ndim = 2;
		t->shape[0] = 1;
		t->shape[1] = gt->ne[0];
	}
	t->offset = gt->offset + (stacked ? e * rows * row_bytes : 0);
	t->bytes = stacked ? rows * row_bytes : gt->bytes;
	f->n++;
	return 0;
}

/* The GGUF's tensors as the virtual shard h->st[0]. */
static int map_tensors(struct gg *s, struct coli_convert_hf *h)
{
	uint64_t n = 0;
	char hf[160];
	int l, k, rc;

	for (int i = 0; i < s->g->n_tensors; i++) {
		const struct coli_gguf_tensor *t = &s->g->t[i];
		const char *tn = coli_ggml_type_name(t->type);

		k = hf_name(t->name, &l, hf, sizeof(hf));
		if (k < 0)
			return coli_convert_errf(
			    s->errbuf, s->errlen, -EINVAL,
			    "%s: tensor '%s' is not part of a %s model coli reads", s->path,
			    t->name, s->arch);
		if (!coli_ggml_can_dequant(t->type))
			return coli_convert_errf(
			    s->errbuf, s->errlen, -ENOTSUP,
			    "%s: tensor '%s' has type %s (ggml type %u), which coli cannot "
			    "read yet",
			    s->path, t->name, tn ? tn : "unknown", t->type);
		if (k >= (int)FIRST_EXP && k < (int)N_NAMES && t->ndim != 3)
			return coli_convert_errf(
			    s->errbuf, s->errlen, -EINVAL,
			    "%s: tensor '%s' has %d dims; stacked experts have 3", s->path, t->name,
			    t->ndim);
		n += k >= (int)FIRST_EXP && k < (int)N_NAMES ? t->ne[2] : 1;
	}
	h->st = calloc(1, sizeof(*h->st));
	if (!h->st)
		return -ENOMEM;
	h->n_shards = 1;
	h->st[0].fd = -1;
	h->st[0].t = calloc(n + 1, sizeof(*h->st[0].t));
	h->ggml = calloc(n + 1, sizeof(*h->ggml));
	if (!h->st[0].t || !h->ggml)
		return -ENOMEM;
	for (int i = 0; i < s->g->n_tensors; i++) {
		const struct coli_gguf_tensor *t = &s->g->t[i];
		int stacked;

		k = hf_name(t->name, &l, hf, sizeof(hf));
		stacked = k >= (int)FIRST_EXP && k < (int)N_NAMES;
		for (uint64_t e = 0; e < (stacked ? t->ne[2] : 1); e++)
			if ((rc = add_entry(h, t, k, hf, e, stacked)))
				return rc;
	}
	return 0;
}

/* --quant left out: the element-weighted majority of the matrices' types. */
static enum coli_dtype pick_quant(const struct coli_gguf *g)
{
	uint64_t n8 = 0, n4 = 0, nw = 0;

	for (int i = 0; i < g->n_tensors; i++) {
		const struct coli_gguf_tensor *t = &g->t[i];
		uint64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
		unsigned be = 0, bb = 0;

		if (t->ndim < 2)
			continue;
		coli_ggml_type_block(t->type, &be, &bb);
		if (t->type == COLI_GGML_F32 || t->type == COLI_GGML_F16 ||
		    t->type == COLI_GGML_BF16)
			nw += n;
		else if (be && bb * 8.0 / be > 4.75) /* Q5_*, Q6_K, Q8_0 */
			n8 += n;
		else
			n4 += n;
	}
	if (n8 > n4 && n8 > nw)
		return COLI_DTYPE_Q8_0;
	if (n4 > n8 && n4 > nw)
		return COLI_DTYPE_Q4_0;
	return COLI_DTYPE_BF16;
}

/* tokenizer.ggml.pre -> the Split regex of the Hugging Face tokenizer that
 * name stands for (NULL: GPT-2's, ByteLevel's own), and its NFC. */
static const struct {
	const char *name, *regex;
	int nfc;
} g_pre[] = {
    {"qwen2",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     1},
    {"default", NULL, 0},
    {"gpt-2", NULL, 0},
};

/* ggml's token types (llama.cpp's llama_token_type). */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5 };

/* tokens (+ token_type) -> model.vocab and added_tokens: control tokens are
 * special added tokens, user-defined ones plain added tokens. */
static int vocab(struct gg *s, json_t *voc, json_t *added)
{
	const struct coli_gguf_kv *tok = coli_gguf_find(s->g, "tokenizer.ggml.tokens");
	const struct coli_gguf_kv *ty = coli_gguf_find(s->g, "tokenizer.ggml.token_type");

	if (!tok || tok->type != COLI_GGUF_ARR || tok->atype != COLI_GGUF_STR)
		return coli_convert_errf(
		    s->errbuf, s->errlen, -EINVAL,
		    "%s: tokenizer.ggml.tokens is missing or not a string array", s->path);
	if (ty && (ty->type != COLI_GGUF_ARR || ty->n != tok->n))
		return coli_convert_errf(
		    s->errbuf, s->errlen, -EINVAL,
		    "%s: tokenizer.ggml.token_type does not have one entry per token", s->path);
	for (uint64_t i = 0; i < tok->n; i++) {
		uint64_t len;
		const char *str = coli_gguf_arr_str(tok, i, &len);
		int64_t type = ty ? coli_gguf_arr_i64(ty, i) : TOK_NORMAL;
		json_t *js = json_stringn(str, len), *a;

		if (!js)
			return coli_convert_errf(s->errbuf, s->errlen, -EINVAL,
			                         "%s: token %llu is not valid UTF-8", s->path,
			                         (unsigned long long)i);
		if (type == TOK_CONTROL || type == TOK_USER) {
			a = json_pack("{s:I, s:o, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)i,
			              "content", js, "single_word", 0, "lstrip", 0, "rstrip", 0,
			              "normalized", 0, "special", type == TOK_CONTROL);
			if (!a || json_array_append_new(added, a))
				return -ENOMEM;
			continue;
		}
		if (json_object_getn(voc, str, len)) { /* the first of two equal strings */
			json_decref(js);
			continue;
		}
		if (json_object_setn_new(voc, str, len, json_integer((json_int_t)i))) {
			json_decref(js);
			return -ENOMEM;
		}
		json_decref(js);
	}
	return 0;
}

/* tokenizer.ggml.* -> a tokenizer.json text in *out (NULL, with a warning,
 * when the file has no tokenizer). */
static int tokenizer_json(struct gg *s, char **out)
{
	const struct coli_gguf_kv *mg = coli_gguf_find(s->g, "tokenizer.ggml.merges");
	json_t *voc = json_object(), *added = json_array(), *merges = json_array();
	const char *model, *pre = "default";
	uint64_t ml, pl = 7;
	int p = -1, rc;

	*out = NULL;
	if (coli_gguf_get_str(s->g, "tokenizer.ggml.model", &model, &ml)) {
		fprintf(stderr,
		        "coli convert: warning: %s has no tokenizer.ggml.model; the container "
		        "will refuse text commands (token ids still work)\n",
		        s->path);
		rc = 0;
		goto out;
	}
	rc = -ENOTSUP;
	if (ml != 4 || memcmp(model, "gpt2", 4)) {
		coli_convert_errf(
		    s->errbuf, s->errlen, rc,
		    "%s: tokenizer.ggml.model '%.*s' is not supported (only gpt2 BPE)", s->path,
		    (int)(ml < 64 ? ml : 64), model);
		goto out;
	}
	coli_gguf_get_str(s->g, "tokenizer.ggml.pre", &pre, &pl);
	for (size_t i = 0; i < sizeof(g_pre) / sizeof(g_pre[0]) && p < 0; i++)
		if (strlen(g_pre[i].name) == pl && !memcmp(g_pre[i].name, pre, pl))
			p = (int)i;
	if (p < 0) {
		coli_convert_errf(
		    s->errbuf, s->errlen, rc,
		    "%s: tokenizer.ggml.pre '%.*s' is not supported (known: qwen2, default, "
		    "gpt-2)",
		    s->path, (int)(pl < 64 ? pl : 64), pre);
		goto out;
	}
	rc = -ENOMEM;
	if (!voc || !added || !merges)
		goto out;
	if ((rc = vocab(s, voc, added)))
		goto out;
	for (uint64_t i = 0; mg && i < mg->n; i++) {
		uint64_t len;
		const char *m = coli_gguf_arr_str(mg, i, &len);
		json_t *js = m ? json_stringn(m, len) : NULL;

		if (!js || json_array_append_new(merges, js)) {
			rc = coli_convert_errf(
			    s->errbuf, s->errlen, -EINVAL,
			    "%s: tokenizer.ggml.merges[%llu] is not a UTF-8 string", s->path,
			    (unsigned long long)i);
			goto out;
		}
	}
	struct coli_convert_tok w = {.vocab = voc,
	                             .merges = merges,
	                             .added = added,
	                             .regex = g_pre[p].regex,
	                             .nfc = g_pre[p].nfc};

	rc = coli_convert_tok_write(&w, out);
out:
	if (rc == -ENOMEM && !s->errbuf[0])
		coli_convert_errf(s->errbuf, s->errlen, rc,
		                  "%s: out of memory building the tokenizer", s->path);
	json_decref(voc);
	json_decref(added);
	json_decref(merges);
	return rc;
}

/* The text sections: tokenizer.json, the chat template, coli's config. */
static int sections(struct gg *s, struct coli_convert_hf *h)
{
	const char *tpl;
	uint64_t n;
	char tmp[512];
	struct coli_model_config back;
	int rc = tokenizer_json(s, &h->section[COLI_SECTION_TOKENIZER]);

	if (rc)
		return rc;
	if (h->section[COLI_SECTION_TOKENIZER])
		h->section_bytes[COLI_SECTION_TOKENIZER] =
		    strlen(h->section[COLI_SECTION_TOKENIZER]);
	if (!coli_gguf_get_str(s->g, "tokenizer.chat_template", &tpl, &n)) {
		h->section[COLI_SECTION_CHAT_TEMPLATE] = strndup(tpl, n);
		if (!h->section[COLI_SECTION_CHAT_TEMPLATE])
			return -ENOMEM;
		h->section_bytes[COLI_SECTION_CHAT_TEMPLATE] =
		    strlen(h->section[COLI_SECTION_CHAT_TEMPLATE]);
	}
	/* round trip through the engine's own parser: its range checks apply */
	h->section[COLI_SECTION_CONFIG] = coli_config_format(&h->cfg);
	if (!h->section[COLI_SECTION_CONFIG])
		return -ENOMEM;
	h->section_bytes[COLI_SECTION_CONFIG] = strlen(h->section[COLI_SECTION_CONFIG]);
	rc = coli_config_parse(h->section[COLI_SECTION_CONFIG],
	                       h->section_bytes[COLI_SECTION_CONFIG], &back, tmp, sizeof(tmp));
	if (rc)
		coli_convert_errf(s->errbuf, s->errlen, rc, "%s: %s", s->path, tmp);
	return rc;
}

int coli_convert_gguf_load(const struct coli_convert_opts *o, struct coli_convert_hf *h,
                           char *errbuf, size_t errlen)
{
	struct coli_gguf g = {0};
	struct gg s = {.g = &g, .path = o->hf_dir, .errbuf = errbuf, .errlen = errlen};
	enum coli_dtype quant = o->quant;
	const char *arch;
	uint64_t al;
	int rc;

	memset(h, 0, sizeof(*h));
	errbuf[0] = 0;
	h->dir = strdup(o->hf_dir);
	h->shards = calloc(1, sizeof(char *));
	h->n_shards = h->shards != NULL;
	if (!h->dir || !h->shards || !(h->shards[0] = strdup(o->hf_dir))) {
		rc = -ENOMEM;
		goto err;
	}
	rc = coli_gguf_open(o->hf_dir, s.g);
	if (rc) {
		coli_convert_errf(errbuf, errlen, rc, "%s", coli_io_errmsg());
		goto err;
	}
	rc = -EPROTONOSUPPORT;
	if (coli_gguf_get_str(s.g, "general.architecture", &arch, &al)) {
		coli_convert_errf(errbuf, errlen, rc,
		                  "%s: no general.architecture (supported: qwen3moe, qwen2moe)",
		                  o->hf_dir);
		goto err;
	}
	if (!(al == 8 && (!memcmp(arch, "qwen3moe", 8) || !memcmp(arch, "qwen2moe", 8)))) {
		coli_convert_errf(
		    errbuf, errlen, rc,
		    "%s: architecture '%.*s' is not supported for GGUF import (supported: "
		    "qwen3moe, qwen2moe)",
		    o->hf_dir, (int)(al < 64 ? al : 64), arch);
		goto err;
	}
	memcpy(s.arch, arch, al);
	if (o->quant_auto) {
		quant = pick_quant(s.g);
		fprintf(stderr,
		        "coli convert: %s: --quant %s from the file's types (pass --quant "
		        "to choose)\n",
		        o->hf_dir, coli_dtype_name(quant));
	}
	if ((rc = read_config(&s, &h->cfg, quant)) || (rc = map_tensors(&s, h)) ||
	    (rc = sections(&s, h)))
		goto err;
	h->st[0].path = strdup(o->hf_dir);
	h->st[0].fd = open(o->hf_dir, O_RDONLY | O_CLOEXEC);
	if (!h->st[0].path || h->st[0].fd < 0) {
		rc = h->st[0].path ? -errno : -ENOMEM;
		coli_convert_errf(errbuf, errlen, rc, "%s: cannot open for reading: %s", o->hf_dir,
		                  strerror(-rc));
		goto err;
	}
	coli_gguf_close(&g); /* what the conversion needs is copied out */
	return 0;
err:
	if (!errbuf[0])
		coli_convert_errf(errbuf, errlen, rc, "%s: %s", o->hf_dir, strerror(-rc));
	coli_gguf_close(&g);
	coli_convert_hf_free(h);
	return rc;
}
