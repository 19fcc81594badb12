/*
 * tools/cli/cmd_inspect.c — `coli inspect [-v] MODEL.coli`: what a container
 * holds. The model summary comes from the CONFIG section (core/model/config.c);
 * the layout (dense bytes, slab geometry per MoE layer, totals) from the
 * container's own tables, so a file whose config is unreadable still shows
 * its structure (and exits 1). -v adds the tensor table. A GGUF file (its
 * magic) is described by tools/cli/inspect_gguf.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"
#include "cpu/cpu.h"
#include "io/io.h"
#include "tools/tools.h"

static const char *human(uint64_t b, char *buf, size_t n)
{
	if (b >= (1ull << 30))
		snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
	else if (b >= (1ull << 20))
		snprintf(buf, n, "%.2f MiB", b / 1048576.0);
	else if (b >= 1024)
		snprintf(buf, n, "%.1f KiB", b / 1024.0);
	else
		snprintf(buf, n, "%llu B", (unsigned long long)b);
	return buf;
}

static int print_config(coli_container_t *c)
{
	struct coli_model_config *m;
	char err[256];
	const char *s;
	size_t n;
	int n_moe = 0, rc;

	s = coli_io_container_section(c, COLI_SECTION_CONFIG, &n);
	if (!s)
		return tool_err("inspect", "%s: no CONFIG section", coli_io_container_path(c));
	m = malloc(sizeof(*m));
	if (!m)
		return tool_err("inspect", "out of memory");
	rc = coli_config_parse(s, n, m, err, sizeof(err));
	if (rc) {
		free(m);
		return tool_err("inspect", "%s: %s", coli_io_container_path(c), err);
	}
	for (int l = 0; l < m->n_layers; l++)
		n_moe += m->is_moe_layer[l];
	printf("architecture   %s\n", coli_arch_name(m->arch));
	printf("layers         %d (%d dense, %d MoE)\n", m->n_layers, m->n_layers - n_moe, n_moe);
	printf("hidden         %d, heads %d (kv %d) x %d, vocab %d, max context %d\n", m->hidden,
	       m->n_heads, m->n_kv_heads, m->head_dim, m->vocab, m->max_ctx);
	printf("experts        %d per MoE layer, top-k %d, expert inter %d", m->n_experts, m->top_k,
	       m->moe_inter);
	if (m->shared_inter)
		printf(", shared expert inter %d%s", m->shared_inter,
		       m->shared_gated ? " (gated)" : "");
	if (m->dense_inter)
		printf(", dense MLP inter %d", m->dense_inter);
	printf("\nquant          %s\n", coli_dtype_name(m->quant));
	printf("norm eps       %g, rope theta %g, qk norm %d, qkv bias %d, tied embeddings %d\n",
	       m->norm_eps, m->rope_theta, m->qk_norm, m->qkv_bias, m->tie_embeddings);
	if (m->kv_lora)
		printf("attention      MLA: q_lora %d, kv_lora %d, qk nope %d + rope %d, v %d; KV "
		       "cache %d floats a token and layer\n",
		       m->q_lora, m->kv_lora, m->qk_nope, m->rope_dim, m->v_head,
		       m->kv_lora + m->rope_dim);
	else if (m->rope_dim != m->head_dim)
		printf("partial rope   %d of %d dims of a head\n", m->rope_dim, m->head_dim);
	{ /* cpu/cpu.h's row layout: q8 a scale a kv head (MLA: c_kv's and k_pe's) */
		int nv = m->kv_lora ? m->kv_lora + m->rope_dim : m->n_kv_heads * m->head_dim;
		int nseg = m->kv_lora ? (nv + m->kv_lora - 1) / m->kv_lora : m->n_kv_heads;
		size_t b[COLI_KV_TYPES];

		for (int t = 0; t < COLI_KV_TYPES; t++)
			b[t] = coli_kv_row_bytes(t, nv, nseg) * (m->kv_lora ? 1 : 2) * m->n_layers;
		printf("KV cache       bytes a token (all layers): bf16 %zu, f32 %zu, q8 %zu "
		       "(--kv-type)\n",
		       b[COLI_KV_BF16], b[COLI_KV_F32], b[COLI_KV_Q8]);
	}
	if (m->rope_factor > 1 && m->rope_scaling == COLI_ROPE_LINEAR)
		printf("rope scaling   linear x %g\n", m->rope_factor);
	else if (m->rope_factor > 1)
		printf("rope scaling   YaRN x %g of %d positions, beta %g/%g, mscale %g/%g\n",
		       m->rope_factor, m->rope_orig_ctx, m->yarn_beta_fast, m->yarn_beta_slow,
		       m->yarn_mscale, m->yarn_mscale_all);
	if (m->rope_factor > 1 && m->rope_scaling == COLI_ROPE_YARN && !m->yarn_truncate)
		printf("               (correction range not truncated)\n");
	{ /* what the default --ctx asks of memory before core/ctx.c's cap */
		int nv = m->kv_lora ? m->kv_lora + m->rope_dim : m->n_kv_heads * m->head_dim;
		int nseg = m->kv_lora ? (nv + m->kv_lora - 1) / m->kv_lora : m->n_kv_heads;
		double tok = (double)coli_kv_row_bytes(COLI_KV_BF16, nv, nseg) *
		             (m->kv_lora ? 1 : 2) * m->n_layers;
		int trained = coli_config_ctx_trained(m);

		printf(
		    "context        trained %d; KV cache %.1f KB a token (bf16), %.2f GB at %d\n",
		    trained, tok / 1e3, tok * trained / 1e9, trained);
	}
	if (m->sliding_window) {
		int ns = 0;

		for (int l = 0; l < m->n_layers; l++)
			ns += m->is_sliding_layer[l];
		printf("attention      %d of %d layers see the last %d keys%s%s\n", ns, m->n_layers,
		       m->sliding_window, m->attn_sinks ? "; a sink logit per head" : "",
		       m->attn_o_bias ? "; o_proj bias" : "");
	}
	if (m->ffn_act == COLI_ACT_SWIGLU_OAI || m->expert_bias)
		printf("experts act    %s (alpha %g, limit %g)%s%s\n",
		       m->ffn_act == COLI_ACT_SWIGLU_OAI ? "clamped SwiGLU" : "SwiGLU",
		       m->act_alpha, m->act_limit, m->expert_bias ? ", gate/up/down biases" : "",
		       m->router_bias && m->router_kind == COLI_ROUTER_SOFTMAX
		           ? "; router bias on the logits"
		           : "");
	if (m->router_kind == COLI_ROUTER_SIGMOID)
		printf("routing        sigmoid%s, %d groups (keep %d), weights x %g%s\n",
		       m->router_bias ? " + correction bias" : "", m->n_group, m->topk_group,
		       m->routed_scale, m->norm_topk_prob ? ", renormalised" : "");
	free(m);
	return 0;
}

static void print_sections(coli_container_t *c)
{
	static const struct {
		enum coli_section kind;
		const char *name;
	} k[] = {{COLI_SECTION_CONFIG, "config"},
	         {COLI_SECTION_TOKENIZER, "tokenizer"},
	         {COLI_SECTION_CHAT_TEMPLATE, "chat-template"},
	         {COLI_SECTION_HF_CONFIG, "hf-config"},
	         {COLI_SECTION_GEN_CONFIG, "generation-config"},
	         {COLI_SECTION_TOKENIZER_CONFIG, "tokenizer-config"}};
	char h[32];
	size_t n;

	printf("sections      ");
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
		if (coli_io_container_section(c, k[i].kind, &n))
			printf(" %s (%s)", k[i].name, human(n, h, sizeof(h)));
	printf("\n");
}

static void print_tensors(coli_container_t *c)
{
	printf("\n%-40s %-5s %-24s %12s %12s\n", "tensor", "dtype", "shape", "offset", "bytes");
	for (int i = 0; i < coli_io_container_n_tensors(c); i++) {
		const struct coli_tensor_info *t = coli_io_container_tensor(c, i);
		char shape[96];
		int k = 0;

		for (int d = 0; d < t->ndim; d++)
			k += snprintf(shape + k, sizeof(shape) - (size_t)k, "%s%llu",
			              d ? " x " : "", (unsigned long long)t->shape[d]);
		printf("%-40s %-5s %-24s %12llu %12llu\n", t->name, coli_dtype_name(t->dtype),
		       shape, (unsigned long long)t->offset, (unsigned long long)t->bytes);
	}
}

static int is_gguf(const char *path)
{
	char m[4] = {0};
	FILE *f = fopen(path, "rb");

	if (!f)
		return 0;
	if (fread(m, 1, 4, f) != 4)
		m[0] = 0;
	fclose(f);
	return !memcmp(m, "GGUF", 4);
}

int cmd_inspect(int argc, char **argv)
{
	const char *path = NULL;
	coli_container_t *c;
	uint64_t dense = 0, experts = 0;
	char h[32];
	int verbose = 0, rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) {
			verbose = 1;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: coli inspect [-v] MODEL.coli|FILE.gguf\n"
			       "  print the model config and the container layout (a GGUF: its "
			       "metadata and tensor types); -v adds the tensor table\n");
			return 0;
		} else if (!path && argv[i][0] != '-') {
			path = argv[i];
		} else {
			return tool_err("inspect", "unexpected argument '%s' (see --help)",
			                argv[i]);
		}
	}
	if (!path)
		return tool_err("inspect", "usage: coli inspect [-v] MODEL.coli|FILE.gguf");
	if (is_gguf(path))
		return inspect_gguf(path, verbose);
	rc = coli_io_container_open(path, &c);
	if (rc)
		return tool_err("inspect", "%s", coli_io_errmsg());
	printf("file           %s\n", path);
	printf("container      v%d, %llu bytes (%s)\n", COLI_CONTAINER_VERSION,
	       (unsigned long long)coli_io_container_file_bytes(c),
	       human(coli_io_container_file_bytes(c), h, sizeof(h)));
	rc = print_config(c);
	print_sections(c);
	for (int i = 0; i < coli_io_container_n_tensors(c); i++)
		dense += coli_io_container_tensor(c, i)->bytes;
	printf("dense tensors  %d, %llu bytes (%s)\n", coli_io_container_n_tensors(c),
	       (unsigned long long)dense, human(dense, h, sizeof(h)));
	printf("expert layers  %d\n", coli_io_container_n_expert_layers(c));
	if (coli_io_container_n_expert_layers(c))
		printf("  %5s %7s %5s %5s %6s %6s %12s %12s %12s\n", "layer", "experts", "dtype",
		       "down", "hidden", "inter", "offset", "slab bytes", "layer bytes");
	for (int i = 0; i < coli_io_container_n_expert_layers(c); i++) {
		const struct coli_expert_layer *l = coli_io_container_expert_layer(c, i);

		printf("  %5u %7u %5s %5s %6u %6u %12llu %12llu %12llu\n", l->layer, l->n_experts,
		       coli_dtype_name(l->dtype), coli_dtype_name(coli_io_expert_down_dtype(l)),
		       l->hidden, l->inter, (unsigned long long)l->offset,
		       (unsigned long long)l->slab_bytes,
		       (unsigned long long)(l->slab_bytes * l->n_experts));
		experts += l->slab_bytes * l->n_experts;
	}
	printf("expert bytes   %llu (%s)\n", (unsigned long long)experts,
	       human(experts, h, sizeof(h)));
	printf("file total     %llu (%s)\n", (unsigned long long)coli_io_container_file_bytes(c),
	       human(coli_io_container_file_bytes(c), h, sizeof(h)));
	if (verbose)
		print_tensors(c);
	coli_io_container_close(c);
	return rc ? 1 : 0;
}
