/*
 * core/convert/convert_gguf.c — reading a GGUF file (llama.cpp's format) as a
 * converter source: `coli convert MODEL.gguf -o OUT.coli`.
 *
 * The file becomes the same struct coli_convert_hf a Hugging Face directory
 * does, so core/convert/convert.c plans, maps and streams it unchanged:
 *
 *   config     {arch}.* metadata -> struct coli_model_config (the table in
 *              read_config; which layers are MoE and the dense width come from
 *              the tensors present: blk.N.ffn_gate_inp makes layer N MoE)
 *   parts      a split model (PREFIX-00001-of-0000N.gguf ..: io/gguf.c's
 *              coli_gguf_open_split) is N files: metadata from the first,
 *              tensors from each, a shard per part (below)
 *   tensors    one "shard" per file (opened for pread) whose tensor
 *              table holds each GGUF tensor under its Hugging Face name and
 *              shape ([ne1, ne0]): token_embd -> model.embed_tokens.weight,
 *              blk.N.attn_q -> model.layers.N.self_attn.q_proj.weight, ...
 *              (the same names for every family: llama.cpp's are shared).
 *              A stacked expert tensor (blk.N.ffn_gate_exps, ne = [cols, rows,
 *              E]) becomes E entries model.layers.N.mlp.experts.e.gate_proj.
 *              weight, each the byte range of that expert's rows, so an expert
 *              is read as a row range like any 2-D tensor.
 *   types      F32, F16 and BF16 tensors keep the safetensors dtypes (the same
 *              pread and widening as a checkpoint's); block types (Q8_0, Q4_K,
 *              ...) are COLI_ST_OTHER with their ggml type in h->ggml[s][i]:
 *              convert.c reads whole rows (ne0 is whole blocks) with
 *              coli_convert_src_read and widens them with coli_ggml_dequant,
 *              except where the blocks are the destination's own (Q8_0 ->
 *              q8, Q4_0 -> q4, and without --quant every block type coli
 *              keeps: q4_k, q6_k, ...): those are repacked or copied, bit
 *              for bit (coli_ggml_repack; convert_map.c marks the job `copy`).
 *   families   qwen3moe, qwen2moe, olmoe (q/k norms over the whole
 *              projection), and "llama" with {arch}.expert_count (Mixtral).
 *              llama.cpp's converter permutes a llama's attn_q / attn_k rows
 *              into ggml's interleaved RoPE order; h->rope_interleaved has
 *              convert.c read them back into the checkpoint's order.
 *   tokenizer  tokenizer.ggml.* as a tokenizer.json text
 *              (core/convert/convert_gguf_tok.c); the chat template from
 *              tokenizer.chat_template.
 *
 * Refused, naming the thing, before any output exists: other architectures
 * (a llama without experts among them), tensor types coli_ggml_dequant does not read,
 * unknown tensor names, RoPE scaling other than linear and YaRN
 * (core/convert/convert_rope.c), tokenizer models other than gpt2 and
 * pre-tokenizer names without a regex here.
 *
 * --quant left out (opts->quant_auto): every matrix of a type with a coli
 * twin (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K) keeps its blocks as
 * stored (core/convert/convert.c kept_dtype); the others (F16, BF16, MXFP4)
 * become the config's quant, which the file's matrices decide by element
 * count: mostly Q8_0 / Q5_* / Q6_K -> q8, mostly 4 bits or fewer -> q4,
 * otherwise bf16, or q8 when some matrix keeps its blocks (they need
 * quantized activations) (docs/quant.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/convert/convert_internal.h"
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
	char lb[256];
	int rc;

	if (ggml < 0) {
		rc = coli_io_st_read_range_raw(f, t, elem0, n, dst);
		return rc ? coli_convert_errf(errbuf, errlen, rc, "%s", coli_io_errmsg()) : 0;
	}
	off = coli_convert_gguf_bytes((uint32_t)ggml, elem0);
	len = coli_convert_gguf_bytes((uint32_t)ggml, n);
	if (off > t->bytes || len > t->bytes - off)
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: tensor '%s': read past its end", f->path,
		                         coli_convert_src_label(1, t->name, lb, sizeof(lb)));
	while (len) {
		ssize_t r = pread(f->fd, p, len, (off_t)(t->offset + off));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return coli_convert_errf(errbuf, errlen, r < 0 ? -errno : -EIO,
			                         "%s: tensor '%s': cannot read: %s", f->path,
			                         coli_convert_src_label(1, t->name, lb, sizeof(lb)),
			                         r < 0 ? strerror(errno)
			                               : "unexpected end of file");
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

/* One load: the file (its metadata: part 1 of a split), every part, its
 * architecture's key prefix, where errors go. */
struct gg {
	struct coli_gguf *g;
	struct coli_gguf *parts; /* [n_parts]; parts[0] is g */
	int n_parts;
	const char *path;
	char arch[32];
	enum coli_arch family;
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

/* A tensor by name, in whichever part holds it. */
static const struct coli_gguf_tensor *find(struct gg *s, const char *name)
{
	const struct coli_gguf_tensor *t = NULL;

	for (int p = 0; p < s->n_parts && !t; p++)
		t = coli_gguf_tensor_find(&s->parts[p], name);
	return t;
}

static const struct coli_gguf_tensor *tensor(struct gg *s, int l, const char *suffix)
{
	char n[96];

	snprintf(n, sizeof(n), "blk.%d.%s", l, suffix);
	return find(s, n);
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

/* general.architecture -> coli's family ("llama" is Mixtral-style only:
 * with {arch}.expert_count). */
static const struct {
	const char *name;
	enum coli_arch arch;
} g_archs[] = {
    {"qwen3moe", COLI_ARCH_QWEN3_MOE},
    {"qwen2moe", COLI_ARCH_QWEN2_MOE},
    {"olmoe", COLI_ARCH_OLMOE},
    {"llama", COLI_ARCH_MIXTRAL},
};
#define ARCH_NAMES "qwen3moe, qwen2moe, olmoe, llama with experts (Mixtral)"

/* {arch}.* -> c (llama.cpp's key names, gguf-py's constants.py). */
static int read_config(struct gg *s, struct coli_model_config *c, enum coli_dtype quant)
{
	const struct coli_gguf_tensor *emb = find(s, "token_embd.weight");
	const struct coli_gguf_kv *kv;
	uint64_t nl, hid, nh, nkv, hd, vd, ne, k, mi, si, ctx;
	double eps, theta;
	char key[128];
	int rc, qwen3 = s->family == COLI_ARCH_QWEN3_MOE, mixtral = s->family == COLI_ARCH_MIXTRAL;

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
	c->n_layers = (int)nl;
	c->hidden = (int)hid;
	c->n_heads = (int)nh;
	c->n_kv_heads = (int)nkv;
	c->head_dim = (int)hd;
	c->rope_dim = c->head_dim; /* every family here rotates the whole head */
	c->vocab = (int)(emb->ne[1] < (1u << 30) ? emb->ne[1] : 0);
	c->n_experts = (int)ne;
	c->top_k = (int)k;
	c->moe_inter = (int)mi;
	c->shared_inter = c->arch == COLI_ARCH_QWEN2_MOE ? (int)si : 0;
	/* llama.cpp normalizes qwen3moe's and Mixtral's top-k weights and not
	 * qwen2moe's or olmoe's unless {arch}.expert_weights_norm says otherwise */
	snprintf(key, sizeof(key), "%s.expert_weights_norm", s->arch);
	kv = coli_gguf_find(s->g, key);
	c->norm_topk_prob = kv && kv->type == COLI_GGUF_BOOL ? !!kv->v.u : qwen3 || mixtral;
	c->qk_norm = qwen3 ? 1 : c->arch == COLI_ARCH_OLMOE ? 2 : 0; /* olmoe: whole width */
	c->qkv_bias = !qwen3 && !mixtral && tensor(s, 0, "attn_q.bias");
	c->tie_embeddings = !find(s, "output.weight");
	c->max_ctx = (int)ctx;
	c->norm_eps = (float)eps;
	c->rope_theta = (float)theta;
	c->quant = quant;
	if ((rc = coli_convert_gguf_rope(s->g, s->arch, c, s->path, s->errbuf, s->errlen)))
		return rc;
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

int coli_convert_gguf_name(const char *hf, char *out, size_t n)
{
	static const char *const exps[][2] = {
	    {"gate_proj.weight", "ffn_gate_exps"}, {"w1.weight", "ffn_gate_exps"},
	    {"up_proj.weight", "ffn_up_exps"},     {"w3.weight", "ffn_up_exps"},
	    {"down_proj.weight", "ffn_down_exps"}, {"w2.weight", "ffn_down_exps"},
	};
	const char *rest;
	int l, e, off = 0, eo = 0;

	if (!strcmp(hf, "model.embed_tokens.weight"))
		return snprintf(out, n, "token_embd.weight"), 0;
	if (!strcmp(hf, "model.norm.weight"))
		return snprintf(out, n, "output_norm.weight"), 0;
	if (!strcmp(hf, "lm_head.weight"))
		return snprintf(out, n, "output.weight"), 0;
	if (sscanf(hf, "model.layers.%d.%n", &l, &off) != 1 || !off)
		return -ENOENT;
	rest = hf + off;
	if ((sscanf(rest, "mlp.experts.%d.%n", &e, &eo) == 1 && eo) ||
	    (sscanf(rest, "block_sparse_moe.experts.%d.%n", &e, &eo) == 1 && eo)) {
		for (size_t i = 0; i < sizeof(exps) / sizeof(exps[0]); i++)
			if (!strcmp(rest + eo, exps[i][0]))
				return snprintf(out, n, "blk.%d.%s.weight, expert %d", l,
				                exps[i][1], e),
				       0;
		return -ENOENT;
	}
	if (!strcmp(rest, "block_sparse_moe.gate.weight"))
		rest = "mlp.gate.weight";
	for (size_t k = 0; k < FIRST_EXP; k++)
		if (!strcmp(rest, g_names[k].hf))
			return snprintf(out, n, "blk.%d.%s", l, g_names[k].gguf), 0;
	return -ENOENT;
}

const char *coli_convert_src_label(int gguf, const char *hf, char *buf, size_t n)
{
	char g[128];

	if (!gguf || coli_convert_gguf_name(hf, g, sizeof(g)))
		return hf;
	snprintf(buf, n, "%s (read as %s)", g, hf);
	return buf;
}

/* One entry of the virtual shard: name, shape (numpy order: ne reversed, the
 * expert dimension dropped), dtype, byte range. */
static int add_entry(struct coli_convert_hf *h, int part, const struct coli_gguf_tensor *gt, int k,
                     const char *hf, uint64_t e, int stacked)
{
	struct coli_st_file *f = &h->st[part];
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
	h->ggml[part][f->n] = t->dtype == COLI_ST_OTHER ? (int)gt->type : -1;
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

/* One GGUF tensor: a name coli maps, a type it reads, 3 dims if stacked.
 * Returns its g_names index (hf_name), or an error. */
static int check_tensor(struct gg *s, const struct coli_gguf *g, const struct coli_gguf_tensor *t,
                        char *hf, size_t n)
{
	const char *tn = coli_ggml_type_name(t->type);
	int l, k = hf_name(t->name, &l, hf, n);

	if (k < 0)
		return coli_convert_errf(s->errbuf, s->errlen, -EINVAL,
		                         "%s: tensor '%s' is not part of a %s model coli reads",
		                         g->path, t->name, s->arch);
	if (!coli_ggml_can_dequant(t->type))
		return coli_convert_errf(s->errbuf, s->errlen, -ENOTSUP,
		                         "%s: tensor '%s' has type %s (ggml type %u), which coli "
		                         "cannot read yet",
		                         g->path, t->name, tn ? tn : "unknown", t->type);
	if (k >= (int)FIRST_EXP && k < (int)N_NAMES && t->ndim != 3)
		return coli_convert_errf(s->errbuf, s->errlen, -EINVAL,
		                         "%s: tensor '%s' has %d dims; stacked experts have 3",
		                         g->path, t->name, t->ndim);
	return k;
}

/* Every tensor of a type coli cannot read (IQ*, TQ*, ...), named with its
 * type in one message, before anything else is looked at. */
static int refuse_types(struct gg *s)
{
	char list[512] = "";
	size_t k = 0;
	int n = 0;

	for (int p = 0; p < s->n_parts; p++)
		for (int i = 0; i < s->parts[p].n_tensors; i++) {
			const struct coli_gguf_tensor *t = &s->parts[p].t[i];
			const char *tn = coli_ggml_type_name(t->type);

			if (coli_ggml_can_dequant(t->type))
				continue;
			if (k + strlen(t->name) + 40 < sizeof(list))
				k += (size_t)snprintf(list + k, sizeof(list) - k, "%s%s (%s)",
				                      n ? ", " : "", t->name, tn ? tn : "unknown");
			else if (!strstr(list, ", ..."))
				k += (size_t)snprintf(list + k, sizeof(list) - k, ", ...");
			n++;
		}
	if (!n)
		return 0;
	return coli_convert_errf(s->errbuf, s->errlen, -ENOTSUP,
	                         "%s: %d tensor%s of a type coli cannot read yet: %s (coli reads "
	                         "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, "
	                         "Q5_K, Q6_K and MXFP4)",
	                         s->path, n, n > 1 ? "s" : "", list);
}

/* Part p's tensors into the virtual shard h->st[p] (its table allocated
 * for them: a stacked expert tensor is E entries). */
static int map_part(struct gg *s, struct coli_convert_hf *h, int p, int *ggml)
{
	const struct coli_gguf *g = &s->parts[p];
	char hf[160];
	int k, rc;

	h->ggml[p] = ggml;
	for (int i = 0; i < g->n_tensors; i++) {
		const struct coli_gguf_tensor *t = &g->t[i];
		int stacked;

		k = check_tensor(s, g, t, hf, sizeof(hf));
		stacked = k >= (int)FIRST_EXP && k < (int)N_NAMES;
		for (uint64_t e = 0; e < (stacked ? t->ne[2] : 1); e++)
			if ((rc = add_entry(h, p, t, k, hf, e, stacked)))
				return rc;
	}
	return 0;
}

/* The GGUF's tensors as one virtual shard per part, each opened for pread;
 * h->ggml[p][i]: entry i's ggml block type (one allocation: the row
 * pointers, then every part's entries). Every shard is closable (fd -1, n
 * the entries filled) whenever this returns. */
static int map_tensors(struct gg *s, struct coli_convert_hf *h)
{
	uint64_t total = 0;
	char hf[160];
	int k, rc, *next;

	h->st = calloc((size_t)s->n_parts, sizeof(*h->st));
	h->shards = calloc((size_t)s->n_parts, sizeof(*h->shards));
	if (!h->st || !h->shards)
		return -ENOMEM;
	h->n_shards = s->n_parts;
	for (int p = 0; p < s->n_parts; p++)
		h->st[p].fd = -1;
	for (int p = 0; p < s->n_parts; p++) {
		const struct coli_gguf *g = &s->parts[p];
		uint64_t n = 0;

		for (int i = 0; i < g->n_tensors; i++) {
			const struct coli_gguf_tensor *t = &g->t[i];

			if ((k = check_tensor(s, g, t, hf, sizeof(hf))) < 0)
				return k;
			n += k >= (int)FIRST_EXP && k < (int)N_NAMES ? t->ne[2] : 1;
		}
		if (!(h->st[p].t = calloc(n + 1, sizeof(*h->st[p].t))))
			return -ENOMEM;
		total += n;
	}
	h->ggml = calloc(1, s->n_parts * sizeof(int *) + (total + 1) * sizeof(int));
	if (!h->ggml)
		return -ENOMEM;
	next = (int *)(h->ggml + s->n_parts);
	for (int p = 0; p < s->n_parts; p++) {
		if ((rc = map_part(s, h, p, next)))
			return rc;
		next += h->st[p].n;
		h->shards[p] = strdup(s->parts[p].path);
		h->st[p].path = strdup(s->parts[p].path);
		if (!h->shards[p] || !h->st[p].path)
			return -ENOMEM;
		h->st[p].fd = open(s->parts[p].path, O_RDONLY | O_CLOEXEC);
		if (h->st[p].fd < 0)
			return coli_convert_errf(s->errbuf, s->errlen, -errno,
			                         "%s: cannot open for reading: %s",
			                         s->parts[p].path, strerror(errno));
	}
	return 0;
}

/* --quant left out: the element-weighted majority of the matrices' types. */
static enum coli_dtype pick_quant(const struct coli_gguf *parts, int n_parts)
{
	uint64_t n8 = 0, n4 = 0, nw = 0;

	for (int p = 0; p < n_parts; p++)
		for (int i = 0; i < parts[p].n_tensors; i++) {
			const struct coli_gguf_tensor *t = &parts[p].t[i];
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
	/* mostly wide, but the blocks kept as stored need quantized activations */
	return n8 + n4 ? COLI_DTYPE_Q8_0 : COLI_DTYPE_BF16;
}

/* The text sections: tokenizer.json, the chat template, coli's config. */
static int sections(struct gg *s, struct coli_convert_hf *h)
{
	const char *tpl;
	uint64_t n;
	char tmp[512];
	struct coli_model_config back;
	int rc = coli_convert_gguf_tokenizer(s->g, s->path, &h->section[COLI_SECTION_TOKENIZER],
	                                     s->errbuf, s->errlen);

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
	struct gg s = {.path = o->hf_dir, .errbuf = errbuf, .errlen = errlen};
	enum coli_dtype quant = o->quant;
	const char *arch;
	uint64_t al;
	int rc;

	memset(h, 0, sizeof(*h));
	errbuf[0] = 0;
	h->dir = strdup(o->hf_dir);
	if (!h->dir) {
		rc = -ENOMEM;
		goto err;
	}
	rc = coli_gguf_open_split(o->hf_dir, &s.parts, &s.n_parts);
	if (rc) {
		coli_convert_errf(errbuf, errlen, rc, "%s", coli_io_errmsg());
		goto err;
	}
	s.g = &s.parts[0];
	rc = -EPROTONOSUPPORT;
	if (coli_gguf_get_str(s.g, "general.architecture", &arch, &al)) {
		coli_convert_errf(errbuf, errlen, rc,
		                  "%s: no general.architecture (supported: " ARCH_NAMES ")",
		                  o->hf_dir);
		goto err;
	}
	for (size_t i = 0; i < sizeof(g_archs) / sizeof(g_archs[0]) && !s.family; i++)
		if (strlen(g_archs[i].name) == al && !memcmp(arch, g_archs[i].name, al))
			s.family = g_archs[i].arch;
	if (!s.family) {
		coli_convert_errf(errbuf, errlen, rc,
		                  "%s: architecture '%.*s' is not supported for GGUF import "
		                  "(supported: " ARCH_NAMES ")",
		                  o->hf_dir, (int)(al < 64 ? al : 64), arch);
		goto err;
	}
	memcpy(s.arch, arch, al);
	if ((rc = refuse_types(&s)))
		goto err;
	if (o->quant_auto) {
		quant = pick_quant(s.parts, s.n_parts);
		fprintf(stderr,
		        "coli convert: %s: --quant %s from the file's types, for the matrices "
		        "not kept as stored (Q8_0, Q4_0, Q4_1, Q5_*, Q2_K..Q6_K are; pass "
		        "--quant to convert every matrix)\n",
		        o->hf_dir, coli_dtype_name(quant));
	}
	if (s.n_parts > 1)
		fprintf(stderr, "coli convert: %s: a split model, %d parts\n", o->hf_dir,
		        s.n_parts);
	h->rope_interleaved = s.family == COLI_ARCH_MIXTRAL;
	if ((rc = read_config(&s, &h->cfg, quant)) || (rc = map_tensors(&s, h)) ||
	    (rc = sections(&s, h)))
		goto err;
	coli_gguf_close_split(s.parts, s.n_parts); /* what the conversion needs is copied out */
	return 0;
err:
	if (!errbuf[0])
		coli_convert_errf(errbuf, errlen, rc, "%s: %s", o->hf_dir, strerror(-rc));
	coli_gguf_close_split(s.parts, s.n_parts);
	coli_convert_hf_free(h);
	return rc;
}
