/*
 * tests/convert/roundtrip.c — every checkpoint converts in every quant, the
 * container verifies, and every converted tensor matches its source:
 *
 *   f32 (norms, biases, routers)  bit-exact
 *   bf16 matrices                 bit-exact when the source is bf16,
 *                                 else exact round-to-nearest-even of the source
 *   q8_0 / q4_0                   dequantized relative RMS error below 1% / 12%
 *   (a matrix q8/q4 cannot take, columns not a multiple of 32, is bf16: exact)
 *
 *   MXFP4 experts (gpt-oss) -> q8_0 exact too: every dequantized value equal
 *
 * Checkpoints: every $FIXTURES/<arch>/config.json (the fixtures branch), plus
 * tiny ones generated here with tests/convert/mkckpt.py for each architecture,
 * a fused-experts sharded qwen3_moe with rope_parameters, and an f16/f32 one.
 * The HF -> coli name mapping is re-derived here independently of
 * core/convert/convert.c. Prints the relative RMS errors it saw (docs/quant.md).
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/coli.h"
#include "cpu/cpu.h"
#include "io/io.h"

static int g_fail;
static double g_err2[16], g_ref2[16]; /* per dtype: sum of squared error / reference */

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fputc('\n', stderr);                                                               \
		g_fail = 1;                                                                        \
	} while (0)

static const struct {
	const char *hf, *coli;
} g_names[] = {
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
    {"mlp.gate.e_score_correction_bias", "router_bias"},
    {"mlp.shared_experts.gate_proj.weight", "shexp_gate"},
    {"mlp.shared_experts.up_proj.weight", "shexp_up"},
    {"mlp.shared_experts.down_proj.weight", "shexp_down"},
    {"block_sparse_moe.e_score_correction_bias", "router_bias"},
    {"mlp.e_score_correction_bias", "router_bias"},
    {"self_attn.q_a_proj.weight", "attn_q_a"},
    {"self_attn.q_a_layernorm.weight", "attn_q_a_norm"},
    {"self_attn.kv_a_layernorm.weight", "attn_kv_a_norm"},
    {"self_attn.o_proj.bias", "attn_o_bias"},
    {"self_attn.sinks", "attn_sinks"},
    {"mlp.router.weight", "router"},
    {"mlp.router.bias", "router_bias"},
    {"mlp.experts.down_proj_bias", "exp_down_bias"},
};

static int g_exact_q8; /* MXFP4 -> q8: every value exact (checked in compare) */

/* Compares `rows` x `cols` source values with a stored matrix. */
static void compare(const char *what, const float *src, const void *stored, enum coli_dtype dt,
                    int srcbf16, int rows, int cols)
{
	struct coli_mat m;
	float *row = malloc(sizeof(float) * cols);
	double e2 = 0, r2 = 0;

	coli_mat_view(&m, dt, rows, cols, stored);
	for (int r = 0; r < rows; r++) {
		coli_mat_row_f32(&m, r, row);
		for (int k = 0; k < cols; k++) {
			float s = src[(size_t)r * cols + k], want = s;

			if (dt == COLI_DTYPE_BF16 && !srcbf16)
				want = coli_bf16_to_f32(coli_f32_to_bf16(s));
			if ((!coli_dtype_is_quant(dt) || (g_exact_q8 && dt == COLI_DTYPE_Q8_0)) &&
			    memcmp(&row[k], &want, 4)) {
				FAIL("%s [%d,%d]: stored %g, source %g (%s must be exact)", what, r,
				     k, row[k], want, coli_dtype_name(dt));
				free(row);
				return;
			}
			e2 += ((double)row[k] - s) * ((double)row[k] - s);
			r2 += (double)s * s;
		}
	}
	free(row);
	g_err2[dt] += e2;
	g_ref2[dt] += r2;
	if (coli_dtype_is_quant(dt) && r2 > 0) {
		double rel = sqrt(e2 / r2), lim = dt == COLI_DTYPE_Q8_0 ? 0.01 : 0.12;
		if (rel > lim)
			FAIL("%s: relative RMS error %.4f above %.2f for %s", what, rel, lim,
			     coli_dtype_name(dt));
	}
}

/* A stored tensor by name against want [rows][cols]. */
static void compare_named(coli_container_t *c, const char *name, const float *want, int bf,
                          int rows, int cols)
{
	const struct coli_tensor_info *ti = coli_io_container_find(c, name);

	if (!ti || ti->ndim != 2 || ti->shape[0] != (uint64_t)rows ||
	    ti->shape[1] != (uint64_t)cols) {
		FAIL("%s: %s missing or not [%d, %d]", coli_io_container_path(c), name, rows, cols);
		return;
	}
	compare(name, want, coli_io_container_tensor_data(c, ti), ti->dtype, bf, rows, cols);
}

/* MLA's tensors that convert rearranges (DeepSeek-V3): kv_b_proj [nh*(np+v),
 * kl] becomes attn_k_b (head h's block: the transpose of its np W_UK rows)
 * and attn_v_b (its v W_UV rows); q_b_proj / q_proj (each head: np rows,
 * then r RoPE rows) and kv_a_proj_with_mqa (kl rows, then r) have their RoPE
 * rows de-interleaved when the checkpoint interleaves them (row i < r/2 from
 * 2i, row r/2 + i from 2i + 1). Returns 1 when t was one of them. */
static int check_mla(coli_container_t *c, const struct coli_model_config *m, const char *rest,
                     int l, const float *src, int cols, int bf, int interleave)
{
	int nh = m->n_heads, np = m->qk_nope, r = m->rope_dim, kl = m->kv_lora, v = m->v_head;
	int kv_a = !strcmp(rest, "self_attn.kv_a_proj_with_mqa.weight");
	char name[96];

	if (!strcmp(rest, "self_attn.kv_b_proj.weight")) {
		float *kb = malloc(sizeof(float) * nh * kl * np),
		      *vb = malloc(sizeof(float) * nh * v * kl);

		for (int h = 0; h < nh; h++) {
			const float *w = src + (size_t)h * (np + v) * kl; /* head h's rows */

			for (int i = 0; i < kl; i++)
				for (int n = 0; n < np; n++)
					kb[((size_t)h * kl + i) * np + n] = w[(size_t)n * kl + i];
			memcpy(vb + (size_t)h * v * kl, w + (size_t)np * kl,
			       sizeof(float) * v * kl);
		}
		snprintf(name, sizeof(name), "blk.%d.attn_k_b", l);
		compare_named(c, name, kb, bf, nh * kl, np);
		snprintf(name, sizeof(name), "blk.%d.attn_v_b", l);
		compare_named(c, name, vb, bf, nh * v, kl);
		free(kb), free(vb);
		return 1;
	}
	if (!kv_a && strcmp(rest, "self_attn.q_b_proj.weight") &&
	    strcmp(rest, "self_attn.q_proj.weight"))
		return 0;
	int lead = kv_a ? kl : np, blocks = kv_a ? 1 : nh, per = lead + r;
	float *want = malloc(sizeof(float) * blocks * per * cols);

	memcpy(want, src, sizeof(float) * blocks * per * cols);
	for (int b = 0; interleave && b < blocks; b++)
		for (int i = 0; i < r; i++) {
			int from = i < r / 2 ? 2 * i : 2 * (i - r / 2) + 1;

			memcpy(want + ((size_t)b * per + lead + i) * cols,
			       src + ((size_t)b * per + lead + from) * cols, sizeof(float) * cols);
		}
	snprintf(name, sizeof(name), "blk.%d.%s", l,
	         kv_a                  ? "attn_kv_a"
	         : strstr(rest, "q_b") ? "attn_q_b"
	                               : "attn_q");
	compare_named(c, name, want, bf, blocks * per, cols);
	free(want);
	return 1;
}

/* gpt-oss's fused experts (the layouts re-derived here from transformers'
 * GptOssExperts and convert_moe_packed_tensors): gate_up_proj [E, H, 2I]
 * (x @ W; gate columns even, up odd) and down_proj [E, I, H]; or MXFP4
 * <name>_blocks [E, rows, K/32, 16] (a row an output; byte k: elements 2k low
 * nibble, 2k + 1 high) with <name>_scales [E, rows, K/32] (2^(s - 127)), the
 * gate_up rows alternating gate, up; gate_up_proj_bias [E, 2I] alternating.
 * Returns 1 when t was one of them. */
static const float g_e2m1[16] = {0,    .5f,  1,  1.5f,  2,  3,  4,  6,
                                 -0.f, -.5f, -1, -1.5f, -2, -3, -4, -6};

static int check_gptoss(coli_container_t *c, const struct coli_st_file *f,
                        const struct coli_st_tensor *t, int l, const char *rest)
{
	const struct coli_expert_layer *el = coli_io_container_experts_of(c, (uint32_t)l);
	int li = -1, gu = !!strstr(rest, "gate_up_proj"), mx = !!strstr(rest, "_blocks");
	char name[96];

	if (strncmp(rest, "mlp.experts.", 12) || strstr(rest, "down_proj_bias") ||
	    strstr(rest, "_scales"))
		return strstr(rest, "_scales") != NULL; /* scales: read with the blocks */
	for (int i = 0; el && i < coli_io_container_n_expert_layers(c); i++)
		if (coli_io_container_expert_layer(c, i) == el)
			li = i;
	if (li < 0) {
		FAIL("%s: no expert layer for %s", coli_io_container_path(c), t->name);
		return 1;
	}
	int E = (int)el->n_experts, I = (int)el->inter, H = (int)el->hidden;
	int R = gu ? 2 * I : H, K = gu ? H : I; /* output rows, inputs */
	float *w = malloc(sizeof(float) * (size_t)E * R * K);

	if (!strcmp(rest, "mlp.experts.gate_up_proj_bias")) {
		float *b = malloc(sizeof(float) * (size_t)E * 2 * I), *g = w, *u = w + E * I;

		if (coli_io_st_read_f32(f, t, b))
			FAIL("%s", coli_io_errmsg());
		for (int e = 0; e < E; e++)
			for (int i = 0; i < I; i++) {
				g[e * I + i] = b[(size_t)e * 2 * I + 2 * i];
				u[e * I + i] = b[(size_t)e * 2 * I + 2 * i + 1];
			}
		snprintf(name, sizeof(name), "blk.%d.exp_gate_bias", l);
		compare_named(c, name, g, 1, E, I);
		snprintf(name, sizeof(name), "blk.%d.exp_up_bias", l);
		compare_named(c, name, u, 1, E, I);
		free(b), free(w);
		return 1;
	}
	if (mx) { /* w [E][R][K] dequantized here */
		char sn[256];
		const struct coli_st_tensor *st;
		size_t nb = (size_t)E * R * K / 32;
		unsigned char *blk = malloc(nb * 16), *sc = malloc(nb);

		snprintf(sn, sizeof(sn), "%.*s_scales", (int)(strlen(t->name) - 7), t->name);
		st = coli_io_st_find(f, sn);
		if (!st || pread(f->fd, blk, nb * 16, (off_t)t->offset) != (ssize_t)(nb * 16) ||
		    pread(f->fd, sc, nb, (off_t)st->offset) != (ssize_t)nb)
			FAIL("%s: cannot read %s and its scales", f->path, t->name);
		for (size_t b = 0; b < nb; b++)
			for (int i = 0; i < 32; i++)
				w[b * 32 + i] = ldexpf(
				    g_e2m1[blk[b * 16 + i / 2] >> (i % 2 * 4) & 15], sc[b] - 127);
		free(blk), free(sc);
	} else { /* [E][K][R] as stored -> [E][R][K] */
		float *src = malloc(sizeof(float) * (size_t)E * R * K);

		if (coli_io_st_read_f32(f, t, src))
			FAIL("%s", coli_io_errmsg());
		for (int e = 0; e < E; e++)
			for (int k = 0; k < K; k++)
				for (int r = 0; r < R; r++)
					w[((size_t)e * R + r) * K + k] =
					    src[((size_t)e * K + k) * R + r];
		free(src);
	}
	float *part = malloc(sizeof(float) * (size_t)R * K);
	g_exact_q8 = mx;
	for (int e = 0; e < E; e++) {
		const unsigned char *slab = coli_io_container_slab_data(c, li, (uint32_t)e);

		snprintf(name, sizeof(name), "layer %d expert %d %s%s", l, e,
		         gu ? "gate_up" : "down", mx ? " (MXFP4)" : "");
		if (!gu) {
			compare(name, w + (size_t)e * R * K, slab + el->down_off, el->dtype, 1, H,
			        I);
			continue;
		}
		for (int p = 0; p < 2; p++) { /* gate rows even, up rows odd */
			for (int i = 0; i < I; i++)
				memcpy(part + (size_t)i * K, w + ((size_t)e * R + 2 * i + p) * K,
				       sizeof(float) * K);
			compare(name, part, slab + (p ? el->up_off : el->gate_off), el->dtype, 1, I,
			        H);
		}
	}
	g_exact_q8 = 0;
	free(part), free(w);
	return 1;
}

/* One source tensor against the container. */
static void check_tensor(coli_container_t *c, const struct coli_st_file *f,
                         const struct coli_st_tensor *t, const struct coli_model_config *m,
                         int interleave)
{
	int n_layers = m->n_layers;
	uint64_t n = coli_io_st_numel(t);
	float *src = malloc(sizeof(float) * n);
	char coli[128] = "", rest[160];
	int l = -1, e = -1, off = 0, bf = t->dtype == COLI_ST_BF16;

	if (m->arch == COLI_ARCH_GPT_OSS && sscanf(t->name, "model.layers.%d.%n", &l, &off) == 1 &&
	    off && check_gptoss(c, f, t, l, t->name + off))
		goto out;
	if (coli_io_st_read_f32(f, t, src)) {
		FAIL("%s", coli_io_errmsg());
		goto out;
	}
	if (!strcmp(t->name, "model.embed_tokens.weight"))
		strcpy(coli, "tok_embd");
	else if (!strcmp(t->name, "model.norm.weight"))
		strcpy(coli, "out_norm");
	else if (!strcmp(t->name, "lm_head.weight"))
		strcpy(coli, "lm_head");
	else if (sscanf(t->name, "model.layers.%d.%n", &l, &off) == 1 && off && l >= n_layers)
		goto out; /* a next-token-prediction layer: skipped by the converter */
	else if (sscanf(t->name, "model.layers.%d.%n", &l, &off) == 1 && off) {
		snprintf(rest, sizeof(rest), "%s", t->name + off);
		if (m->kv_lora && check_mla(c, m, rest, l, src, t->ndim == 2 ? (int)t->shape[1] : 1,
		                            bf, interleave))
			goto out;
		for (size_t i = 0; i < sizeof(g_names) / sizeof(g_names[0]); i++)
			if (!strcmp(rest, g_names[i].hf))
				snprintf(coli, sizeof(coli), "blk.%d.%s", l, g_names[i].coli);
	}
	if (*coli) {
		const struct coli_tensor_info *ti = coli_io_container_find(c, coli);
		int rows = ti && ti->ndim == 2 ? (int)ti->shape[0] : 1;

		if (!ti) {
			FAIL("%s: %s (from %s) missing", coli_io_container_path(c), coli, t->name);
			goto out;
		}
		compare(coli, src, coli_io_container_tensor_data(c, ti), ti->dtype, bf, rows,
		        (int)(n / rows));
		goto out;
	}
	/* experts */
	const struct coli_expert_layer *el = coli_io_container_experts_of(c, (uint32_t)l);
	int li = -1, part = -1, fused = 0;
	char pn[32] = "";

	for (int i = 0; el && i < coli_io_container_n_expert_layers(c); i++)
		if (coli_io_container_expert_layer(c, i) == el)
			li = i;
	if (li < 0) {
		FAIL("%s: no expert layer for %s", coli_io_container_path(c), t->name);
		goto out;
	}
	if (sscanf(rest, "mlp.experts.%d.%31[a-z_0-9]", &e, pn) == 2 ||
	    sscanf(rest, "block_sparse_moe.experts.%d.%31[a-z_0-9]", &e, pn) == 2) {
		part = !strcmp(pn, "gate_proj") || !strcmp(pn, "w1") ? 0
		       : !strcmp(pn, "up_proj") || !strcmp(pn, "w3") ? 1
		                                                     : 2;
	} else if (strstr(rest, "experts.gate_up_proj")) {
		fused = 1;
	} else if (strstr(rest, "experts.down_proj")) {
		fused = 1, part = 2;
	} else {
		FAIL("test does not know %s", t->name);
		goto out;
	}
	int I = (int)el->inter, H = (int)el->hidden;
	for (int x = fused ? 0 : e; x < (fused ? (int)el->n_experts : e + 1); x++) {
		const unsigned char *slab = coli_io_container_slab_data(c, li, (uint32_t)x);
		const float *base = src + (fused ? (size_t)x * (part == 2 ? H * I : 2 * I * H) : 0);
		char what[96];

		snprintf(what, sizeof(what), "layer %d expert %d", l, x);
		if (part == 2) {
			compare(what, base, slab + el->down_off, el->dtype, bf, H, I);
		} else if (fused) {
			compare(what, base, slab + el->gate_off, el->dtype, bf, I, H);
			compare(what, base + (size_t)I * H, slab + el->up_off, el->dtype, bf, I, H);
		} else {
			compare(what, base, slab + (part ? el->up_off : el->gate_off), el->dtype,
			        bf, I, H);
		}
	}
out:
	free(src);
}

static void check_dir(const char *dir, const char *label)
{
	static const enum coli_dtype q[] = {COLI_DTYPE_BF16, COLI_DTYPE_Q8_0, COLI_DTYPE_Q4_0};
	char out[512], err[2048];

	for (int qi = 0; qi < 3; qi++) {
		struct coli_convert_opts o;
		coli_container_t *c;
		const void *sec;
		size_t bytes;
		int rc;

		coli_convert_opts_init(&o);
		snprintf(out, sizeof(out), "%s-%s.coli", label, coli_dtype_name(q[qi]));
		o.hf_dir = dir;
		o.out_path = out;
		o.quant = q[qi];
		rc = coli_convert(&o, err, sizeof(err));
		if (rc) {
			FAIL("convert %s --quant %s: %s", dir, coli_dtype_name(q[qi]), err);
			continue;
		}
		if (coli_io_container_open(out, &c)) {
			FAIL("%s", coli_io_errmsg());
			continue;
		}
		if (coli_io_container_verify(c, NULL, NULL))
			FAIL("verify %s: %s", out, coli_io_errmsg());
		sec = coli_io_container_section(c, COLI_SECTION_CONFIG, &bytes);
		struct coli_model_config cfg;
		if (!sec || coli_config_parse(sec, bytes, &cfg, err, sizeof(err)) ||
		    cfg.quant != q[qi])
			FAIL("%s: CONFIG section missing or bad: %s", out, sec ? err : "absent");
		const char *hf = coli_io_container_section(c, COLI_SECTION_HF_CONFIG, &bytes);
		if (!hf)
			FAIL("%s: HF config section missing", out);
		/* MLA: RoPE rows interleaved unless "rope_interleave": false */
		int interleave = 1;
		for (const char *k = hf;
		     hf && (k = memmem(k, bytes - (size_t)(k - hf), "\"rope_interleave\"", 17));
		     k += 17)
			interleave = !memmem(
			    k, bytes - (size_t)(k - hf) < 32 ? bytes - (size_t)(k - hf) : 32,
			    "false", 5);
		/* every source tensor, from the index or the single file */
		DIR *d = opendir(dir);
		struct dirent *de;
		while (d && (de = readdir(d))) {
			size_t n = strlen(de->d_name);
			struct coli_st_file f;
			char p[1024];

			if (n < 12 || strcmp(de->d_name + n - 12, ".safetensors"))
				continue;
			snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
			if (coli_io_st_open(p, &f)) {
				FAIL("%s", coli_io_errmsg());
				continue;
			}
			for (int i = 0; i < f.n; i++)
				check_tensor(c, &f, &f.t[i], &cfg, interleave);
			coli_io_st_close(&f);
		}
		if (d)
			closedir(d);
		coli_io_container_close(c);
		unlink(out);
		printf("%-40s %-5s ok\n", label, coli_dtype_name(q[qi]));
	}
}

int main(void)
{
	static const char *const gen[][2] = {
	    {"qwen3_moe", "--arch qwen3_moe"},
	    {"qwen2_moe", "--arch qwen2_moe"},
	    {"olmoe", "--arch olmoe"},
	    {"mixtral", "--arch mixtral"},
	    {"mixtral_fused_sharded", "--arch mixtral --fused --shards 2"},
	    {"qwen3_fused_sharded_rope", "--arch qwen3_moe --fused --shards 3 --rope-params"},
	    {"olmoe_f16", "--arch olmoe --dtype f16"},
	    {"qwen2_f32", "--arch qwen2_moe --dtype f32"},
	    {"glm4_moe", "--arch glm4_moe"},
	    /* transformers 5's dialect, fused experts, an MTP layer to skip */
	    {"glm4_fused_rope_mtp", "--arch glm4_moe --fused --rope-params --mtp --shards 2"},
	    {"minimax_m2", "--arch minimax_m2"},
	    /* transformers 5's dialect: fused experts, rope_parameters */
	    {"minimax_m2_fused_rope_mtp", "--arch minimax_m2 --fused --rope-params --mtp"},
	    /* MLA: Hub dialect (rope_scaling yarn); v5's, fused, q_proj, an MTP layer */
	    {"deepseek_v3", "--arch deepseek_v3"},
	    {"deepseek_v3_fused_rope_mtp",
	     "--arch deepseek_v3 --fused --rope-params --mtp --no-qlora --shards 2"},
	    /* q8/q4 keep attn_o (80 columns) and the experts (40) as bf16: exact */
	    {"qwen3_odd_cols", "--arch qwen3_moe --head-dim 20 --moe-inter 40"},
	};
	const char *root = getenv("ROOT"), *fx = getenv("FIXTURES");
	char cmd[2048], dir[1024];
	int n = 0;

	if (!root)
		root = ".";
	for (size_t i = 0; i < sizeof(gen) / sizeof(gen[0]); i++) {
		snprintf(dir, sizeof(dir), "gen_%s", gen[i][0]);
		snprintf(cmd, sizeof(cmd), "python3 %s/tests/convert/mkckpt.py %s %s", root, dir,
		         gen[i][1]);
		if (system(cmd)) {
			printf(
			    "python3 with tests/convert/mkckpt.py is needed to make checkpoints\n");
			return 77;
		}
		check_dir(dir, dir);
		n++;
	}
	DIR *d = fx ? opendir(fx) : NULL;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char cfg[1200];

		if (de->d_name[0] == '.')
			continue;
		snprintf(dir, sizeof(dir), "%s/%s", fx, de->d_name);
		snprintf(cfg, sizeof(cfg), "%s/config.json", dir);
		if (access(cfg, R_OK))
			continue;
		snprintf(cfg, sizeof(cfg), "fixture_%s", de->d_name);
		check_dir(dir, cfg);
		n++;
	}
	if (d)
		closedir(d);
	for (int t = 0; t < 16; t++)
		if (g_ref2[t] > 0)
			printf("relative RMS error over all %s weights: %.5f\n",
			       coli_dtype_name((enum coli_dtype)t), sqrt(g_err2[t] / g_ref2[t]));
	printf("%d checkpoints x 3 quants\n", n);
	return g_fail;
}
