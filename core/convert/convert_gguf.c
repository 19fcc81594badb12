/*
 * core/convert/convert_gguf.c — reading a GGUF file (llama.cpp's format) as a
 * converter source: `coli convert MODEL.gguf -o OUT.coli`.
 *
 * The file becomes the same struct coli_convert_hf a Hugging Face directory
 * does, so core/convert/convert.c plans, maps and streams it unchanged:
 *
 *   config     {arch}.* metadata -> struct coli_model_config, per family
 *              (core/convert/convert_gguf_config.c; which layers are MoE and
 *              the dense width come from the tensors present)
 *   parts      a split model (PREFIX-00001-of-0000N.gguf ..: io/gguf.c's
 *              coli_gguf_open_split) is N files: metadata from the first,
 *              tensors from each, a shard per part (below)
 *   tensors    one "shard" per file (opened for pread) whose tensor
 *              table holds each GGUF tensor under its Hugging Face name and
 *              shape ([ne1, ne0]): token_embd -> model.embed_tokens.weight,
 *              blk.N.attn_q -> model.layers.N.self_attn.q_proj.weight, ...
 *              (the same names for every family: llama.cpp's are shared;
 *              g_names). Blocks past the config's layers (MTP: nextn_
 *              predict_layers) get no entry. MLA's attn_k_b / attn_v_b
 *              ([nh, rows, cols]) fold their heads into rows; an attn_kv_b
 *              beside them gets none (the pair is read).
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
 *              for bit (coli_ggml_repack; convert_map.c marks the job `copy`;
 *              MLA's de-interleaved RoPE rows move whole rows of blocks, a
 *              transposed kv_b is dequantized and converted).
 *   families   qwen3moe, qwen2moe, olmoe (q/k norms over the whole
 *              projection), "llama" with {arch}.expert_count (Mixtral),
 *              glm4moe, deepseek2 (MLA, its RoPE rows interleaved as the
 *              checkpoint's: h->rope_interleave), gpt-oss (gate and up
 *              experts and their biases apart: named per expert, and
 *              mlp.experts.{gate,up}_proj_bias; MXFP4 experts -> q8 exactly
 *              in convert.c), minimax-m2.
 *              llama.cpp's converter permutes a llama's attn_q / attn_k rows
 *              into ggml's interleaved RoPE order; h->rope_interleaved has
 *              convert.c read them back into the checkpoint's order.
 *   tokenizer  tokenizer.ggml.* as a tokenizer.json text
 *              (core/convert/convert_gguf_tok.c); the chat template from
 *              tokenizer.chat_template.
 *
 * coli_convert_gguf_meta is the metadata alone (family, config, text
 * sections) for tools/fuzz/fuzz_gguf.c.
 *
 * Refused, naming the thing, before any output exists: other architectures
 * (a llama without experts among them), tensor types coli_ggml_dequant does not read,
 * unknown tensor names, what convert_gguf_config.c refuses (RoPE scaling
 * other than linear and YaRN: core/convert/convert_rope.c; a gating function
 * the family does not route with, ...),
 * tokenizer models other than gpt2 and pre-tokenizer names without a regex
 * here.
 *
 * --quant left out (opts->quant_auto): every matrix of a type with a coli
 * twin (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K) keeps its blocks as
 * stored (core/convert/convert.c kept_dtype); the others (F16, BF16, MXFP4)
 * become the config's quant, which the file's matrices decide by element
 * count: mostly Q8_0 / Q5_* / Q6_K / MXFP4 -> q8, mostly 4 bits or fewer -> q4,
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

#include "core/convert/convert_gguf.h"

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

/* general.architecture -> coli's family ("llama" is Mixtral-style only:
 * with {arch}.expert_count). */
static const struct {
	const char *name;
	enum coli_arch arch;
} g_archs[] = {
    {"qwen3moe", COLI_ARCH_QWEN3_MOE}, {"qwen2moe", COLI_ARCH_QWEN2_MOE},
    {"olmoe", COLI_ARCH_OLMOE},        {"llama", COLI_ARCH_MIXTRAL},
    {"glm4moe", COLI_ARCH_GLM4_MOE},   {"deepseek2", COLI_ARCH_DEEPSEEK_V3},
    {"gpt-oss", COLI_ARCH_GPT_OSS},    {"minimax-m2", COLI_ARCH_MINIMAX_M2},
};
#define ARCH_NAMES                                                                                 \
	"qwen3moe, qwen2moe, olmoe, llama with experts (Mixtral), glm4moe, deepseek2, gpt-oss, "   \
	"minimax-m2"

/* How a GGUF tensor becomes entries of the virtual shard. */
enum {
	AS_IS = 0,   /* one entry, numpy's shape (ne reversed) */
	AS_ROW = 1,  /* a 1-D vector as a [1, n] matrix (qwen2moe's shexp gate) */
	AS_FLAT = 2, /* leading dims folded into rows: [ne2 * ne1, ne0] (MLA k_b, v_b) */
	AS_EXPS = 3, /* stacked experts [cols, rows, E]: E entries, one per expert */
	SKIPPED = 4, /* a block past n_main (an MTP layer): no entry */
};

/* GGUF per-layer suffix -> Hugging Face suffix (the names convert_map.c
 * reads; llama.cpp's are shared across families) and how it is read. */
static const struct {
	const char *gguf, *hf;
	int as;
} g_names[] = {
    {"attn_norm.weight", "input_layernorm.weight", AS_IS},
    {"ffn_norm.weight", "post_attention_layernorm.weight", AS_IS},
    {"post_attention_norm.weight", "post_attention_layernorm.weight", AS_IS}, /* glm, gpt-oss */
    {"attn_q.weight", "self_attn.q_proj.weight", AS_IS},
    {"attn_k.weight", "self_attn.k_proj.weight", AS_IS},
    {"attn_v.weight", "self_attn.v_proj.weight", AS_IS},
    {"attn_q.bias", "self_attn.q_proj.bias", AS_IS},
    {"attn_k.bias", "self_attn.k_proj.bias", AS_IS},
    {"attn_v.bias", "self_attn.v_proj.bias", AS_IS},
    {"attn_output.weight", "self_attn.o_proj.weight", AS_IS},
    {"attn_output.bias", "self_attn.o_proj.bias", AS_IS},
    {"attn_q_norm.weight", "self_attn.q_norm.weight", AS_IS},
    {"attn_k_norm.weight", "self_attn.k_norm.weight", AS_IS},
    {"attn_sinks.weight", "self_attn.sinks", AS_IS},
    {"attn_q_a.weight", "self_attn.q_a_proj.weight", AS_IS}, /* deepseek2's MLA */
    {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight", AS_IS},
    {"attn_q_b.weight", "self_attn.q_b_proj.weight", AS_IS},
    {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight", AS_IS},
    {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight", AS_IS},
    {"attn_kv_b.weight", "self_attn.kv_b_proj.weight", AS_IS},
    {"attn_k_b.weight", "self_attn.k_b_proj.weight", AS_FLAT},
    {"attn_v_b.weight", "self_attn.v_b_proj.weight", AS_FLAT},
    {"ffn_gate_inp.weight", "mlp.gate.weight", AS_IS},
    {"ffn_gate_inp.bias", "mlp.router.bias", AS_IS},
    {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias", AS_IS},
    {"ffn_gate.weight", "mlp.gate_proj.weight", AS_IS},
    {"ffn_up.weight", "mlp.up_proj.weight", AS_IS},
    {"ffn_down.weight", "mlp.down_proj.weight", AS_IS},
    {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight", AS_IS},
    {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight", AS_IS},
    {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight", AS_IS},
    {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight", AS_ROW},
    {"ffn_gate_exps.bias", "mlp.experts.gate_proj_bias", AS_IS}, /* gpt-oss: [E, I] */
    {"ffn_up_exps.bias", "mlp.experts.up_proj_bias", AS_IS},
    {"ffn_down_exps.bias", "mlp.experts.down_proj_bias", AS_IS},
    {"ffn_gate_exps.weight", "gate_proj.weight", AS_EXPS},
    {"ffn_up_exps.weight", "up_proj.weight", AS_EXPS},
    {"ffn_down_exps.weight", "down_proj.weight", AS_EXPS},
};
#define N_NAMES (sizeof(g_names) / sizeof(g_names[0]))

/* A GGUF tensor's Hugging Face name (printf pattern: "%llu" is the expert of
 * a stacked one) into hf; returns its AS_* (SKIPPED for any tensor of a block
 * n_main or later), or -1 for a name not known here. */
static int hf_name(const char *nm, int n_main, char *hf, size_t n)
{
	char *end;
	long l;

	if (!strcmp(nm, "token_embd.weight"))
		return snprintf(hf, n, "model.embed_tokens.weight"), AS_IS;
	if (!strcmp(nm, "output_norm.weight"))
		return snprintf(hf, n, "model.norm.weight"), AS_IS;
	if (!strcmp(nm, "output.weight"))
		return snprintf(hf, n, "lm_head.weight"), AS_IS;
	if (strncmp(nm, "blk.", 4) || nm[4] < '0' || nm[4] > '9')
		return -1;
	l = strtol(nm + 4, &end, 10);
	if (*end != '.' || l >= COLI_MAX_LAYERS)
		return -1;
	if (l >= n_main)
		return SKIPPED;
	for (size_t k = 0; k < N_NAMES; k++) {
		if (strcmp(end + 1, g_names[k].gguf))
			continue;
		if (g_names[k].as == AS_EXPS)
			snprintf(hf, n, "model.layers.%ld.mlp.experts.%%llu.%s", l, g_names[k].hf);
		else
			snprintf(hf, n, "model.layers.%ld.%s", l, g_names[k].hf);
		return g_names[k].as;
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
	if (!strcmp(rest, "block_sparse_moe.gate.weight") || !strcmp(rest, "mlp.router.weight"))
		rest = "mlp.gate.weight";
	if (!strcmp(rest, "block_sparse_moe.e_score_correction_bias"))
		rest = "mlp.gate.e_score_correction_bias";
	for (size_t k = 0; k < N_NAMES; k++)
		if (g_names[k].as != AS_EXPS && !strcmp(rest, g_names[k].hf))
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

/* One entry of the virtual shard: name, shape (numpy order: ne reversed,
 * the expert dimension dropped, or leading dims folded), dtype, byte range. */
static int add_entry(struct coli_convert_hf *h, int part, const struct coli_gguf_tensor *gt, int as,
                     const char *hf, uint64_t e)
{
	struct coli_st_file *f = &h->st[part];
	struct coli_st_tensor *t = &f->t[f->n];
	uint64_t rows = gt->ndim > 1 ? gt->ne[1] : 1;
	uint64_t row_bytes = coli_convert_gguf_bytes(gt->type, gt->ne[0]);
	char name[160];
	int nd = as == AS_EXPS || as == AS_FLAT ? 2 : gt->ndim;

	if (as == AS_EXPS) {
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
	if (as == AS_FLAT) /* [ne3 * ne2 * ne1, ne0] */
		t->shape[0] = gt->ne[1] * gt->ne[2] * gt->ne[3];
	if (as == AS_ROW && gt->ndim == 1) { /* shared-expert gate: [1, H] */
		t->ndim = 2;
		t->shape[0] = 1;
		t->shape[1] = gt->ne[0];
	}
	t->offset = gt->offset + (as == AS_EXPS ? e * rows * row_bytes : 0);
	t->bytes = as == AS_EXPS ? rows * row_bytes : gt->bytes;
	f->n++;
	return 0;
}

/* One GGUF tensor: a name coli maps, a type it reads, 3 dims if stacked.
 * Returns its AS_* (hf_name), or an error. */
static int check_tensor(struct gg *s, const struct coli_gguf *g, const struct coli_gguf_tensor *t,
                        char *hf, size_t n)
{
	const char *tn = coli_ggml_type_name(t->type);
	int as = hf_name(t->name, s->n_main, hf, n);

	if (as < 0)
		return coli_convert_errf(s->errbuf, s->errlen, -EINVAL,
		                         "%s: tensor '%s' is not part of a %s model coli reads",
		                         g->path, t->name, s->arch);
	if (!coli_ggml_can_dequant(t->type))
		return coli_convert_errf(s->errbuf, s->errlen, -ENOTSUP,
		                         "%s: tensor '%s' has type %s (ggml type %u), which coli "
		                         "cannot read yet",
		                         g->path, t->name, tn ? tn : "unknown", t->type);
	if (as == AS_IS && strstr(t->name, ".attn_kv_b.weight")) {
		char kb[96];

		snprintf(kb, sizeof(kb), "%.*sattn_k_b.weight",
		         (int)(strstr(t->name, "attn_kv_b.weight") - t->name), t->name);
		if (coli_convert_gguf_find(s, kb)) /* both: the split pair is read */
			return SKIPPED;
	}
	if (as == AS_EXPS && t->ndim != 3)
		return coli_convert_errf(s->errbuf, s->errlen, -EINVAL,
		                         "%s: tensor '%s' has %d dims; stacked experts have 3",
		                         g->path, t->name, t->ndim);
	return as;
}

/* How many entries tensor t becomes (as: check_tensor's). */
static uint64_t n_entries(const struct coli_gguf_tensor *t, int as)
{
	return as == SKIPPED ? 0 : as == AS_EXPS ? t->ne[2] : 1;
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
	int as, rc;

	h->ggml[p] = ggml;
	for (int i = 0; i < g->n_tensors; i++) {
		const struct coli_gguf_tensor *t = &g->t[i];

		as = check_tensor(s, g, t, hf, sizeof(hf));
		for (uint64_t e = 0; e < n_entries(t, as); e++)
			if ((rc = add_entry(h, p, t, as, hf, e)))
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
			n += n_entries(t, k);
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
			else if ((be && bb * 8.0 / be > 4.75) || t->type == COLI_GGML_MXFP4)
				n8 += n; /* Q5_*, Q6_K, Q8_0; MXFP4: exactly q8 (convert.c) */
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

/* general.architecture -> s->family and s->arch, or refused naming it. */
static int family_of(struct gg *s)
{
	const char *arch;
	uint64_t al;

	if (coli_gguf_get_str(s->g, "general.architecture", &arch, &al))
		return coli_convert_errf(s->errbuf, s->errlen, -EPROTONOSUPPORT,
		                         "%s: no general.architecture (supported: " ARCH_NAMES ")",
		                         s->path);
	for (size_t i = 0; i < sizeof(g_archs) / sizeof(g_archs[0]) && !s->family; i++)
		if (strlen(g_archs[i].name) == al && !memcmp(arch, g_archs[i].name, al))
			s->family = g_archs[i].arch;
	if (!s->family)
		return coli_convert_errf(s->errbuf, s->errlen, -EPROTONOSUPPORT,
		                         "%s: architecture '%.*s' is not supported for GGUF import "
		                         "(supported: " ARCH_NAMES ")",
		                         s->path, (int)(al < 64 ? al : 64), arch);
	memcpy(s->arch, arch, al);
	return 0;
}

int coli_convert_gguf_meta(struct coli_gguf *g, const char *path, struct coli_convert_hf *h,
                           char *errbuf, size_t errlen)
{
	struct gg s = {
	    .g = g, .parts = g, .n_parts = 1, .path = path, .errbuf = errbuf, .errlen = errlen};
	int rc;

	memset(h, 0, sizeof(*h));
	errbuf[0] = 0;
	if ((rc = family_of(&s)) || (rc = coli_convert_gguf_config(&s, h, COLI_DTYPE_BF16)))
		return rc;
	return sections(&s, h);
}

int coli_convert_gguf_load(const struct coli_convert_opts *o, struct coli_convert_hf *h,
                           char *errbuf, size_t errlen)
{
	struct gg s = {.path = o->hf_dir, .errbuf = errbuf, .errlen = errlen};
	enum coli_dtype quant = o->quant;
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
	if ((rc = family_of(&s)) || (rc = refuse_types(&s)))
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
	if ((rc = coli_convert_gguf_config(&s, h, quant)) || (rc = map_tensors(&s, h)) ||
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
