/*
 * tests/io/synth.h — a synthetic .coli container for the io tests: tensors of
 * every dtype and rank (a GGUF Q4_K block matrix among them), three expert
 * layers of different geometry and dtype (one with a q6_k down beside q4_k),
 * and the text sections, filled with bytes that are a pure function of
 * (object, position) so any reader can check every byte without keeping a
 * copy. synth_write() writes them out of order and in pieces, as the
 * converter does. The test helper header includes only public io/ API.
 */
#ifndef TESTS_IO_SYNTH_H
#define TESTS_IO_SYNTH_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"

#define SYNTH_CONFIG                                                                               \
	"{\"arch\": \"qwen3_moe\", \"n_layers\": 3, \"hidden\": 64, \"n_heads\": 4, "              \
	"\"n_kv_heads\": 2, \"head_dim\": 16, \"vocab\": 256, \"n_experts\": 4, \"top_k\": 2, "    \
	"\"moe_inter\": 32, \"shared_inter\": 0, \"dense_inter\": 128, \"norm_topk_prob\": 1, "    \
	"\"qk_norm\": 1, \"qkv_bias\": 0, \"tie_embeddings\": 0, \"max_ctx\": 512, \"bos\": -1, "  \
	"\"norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"quant\": \"q8_0\", "                    \
	"\"moe_layers\": [1, 2], \"eos\": [1]}"

static const struct {
	enum coli_section kind;
	const char *text;
} g_synth_sections[] = {
    {COLI_SECTION_CONFIG, SYNTH_CONFIG},
    {COLI_SECTION_TOKENIZER, "{\"model\": {\"type\": \"BPE\", \"vocab\": {}}}"},
    {COLI_SECTION_CHAT_TEMPLATE, "{% for m in messages %}{{ m.content }}{% endfor %}"},
    {COLI_SECTION_HF_CONFIG, "{\"model_type\": \"qwen3_moe\"}"},
    {COLI_SECTION_GEN_CONFIG, ""}, /* present but empty */
};
#define SYNTH_N_SECTIONS (int)(sizeof(g_synth_sections) / sizeof(g_synth_sections[0]))

static const struct {
	const char *name;
	enum coli_dtype dtype;
	int ndim;
	uint64_t shape[4];
	uint64_t bytes; /* expected, from cpu/cpu.h's formats */
} g_synth_tensors[] = {
    {"tok_embd", COLI_DTYPE_BF16, 2, {256, 64}, 256 * 64 * 2},
    {"out_norm", COLI_DTYPE_F32, 1, {64}, 64 * 4},
    {"blk.0.attn_q", COLI_DTYPE_Q8_0, 2, {64, 64}, 64 * 64 + 64 * 2 * 2},
    {"blk.0.ffn_gate", COLI_DTYPE_Q4_0, 2, {128, 64}, 128 * 32 + 128 * 2 * 2},
    {"blk.1.router", COLI_DTYPE_F32, 2, {4, 64}, 4 * 64 * 4},
    {"test.f16_3d", COLI_DTYPE_F16, 3, {2, 3, 64}, 2 * 3 * 64 * 2},
    {"test.f32_4d", COLI_DTYPE_F32, 4, {1, 2, 3, 4}, 24 * 4},
    {"test.q4_k", COLI_DTYPE_Q4_K, 2, {3, 512}, 3 * 2 * 144}, /* GGUF blocks as stored */
};
#define SYNTH_N_TENSORS (int)(sizeof(g_synth_tensors) / sizeof(g_synth_tensors[0]))

static const struct coli_expert_layer g_synth_layers[] = {
    {.layer = 1, .n_experts = 4, .dtype = COLI_DTYPE_Q8_0, .hidden = 64, .inter = 32},
    {.layer = 2, .n_experts = 5, .dtype = COLI_DTYPE_Q4_0, .hidden = 96, .inter = 64},
    /* a GGUF Q4_K_M layer: q4_k gate/up, q6_k down (down_kind = dtype + 1) */
    {.layer = 3,
     .n_experts = 2,
     .dtype = COLI_DTYPE_Q4_K,
     .down_kind = COLI_DTYPE_Q6_K + 1,
     .hidden = 256,
     .inter = 512},
};
#define SYNTH_N_LAYERS (int)(sizeof(g_synth_layers) / sizeof(g_synth_layers[0]))

/* The byte at position i of object `id` (tensor t: id = t; slab: 1000 + 100*li + e). */
static inline unsigned char synth_byte(uint32_t id, uint64_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)id << 40 | id);

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	return (unsigned char)(x >> 56);
}

static inline void synth_fill(unsigned char *p, uint32_t id, uint64_t off, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = synth_byte(id, off + i);
}

#define SYNTH_SLAB_ID(li, e) (1000u + 100u * (uint32_t)(li) + (uint32_t)(e))

/* Write the synthetic container at path. small = one tensor and one expert
 * layer of 2 experts (a fuzz seed). Returns 0 or -errno (message in
 * coli_io_errmsg()); on failure the writer has been aborted. */
static int synth_write(const char *path, int small)
{
	int nt = small ? 2 : SYNTH_N_TENSORS, nl = small ? 1 : SYNTH_N_LAYERS, rc, idx[16], li[4];
	coli_io_writer_t *w;
	unsigned char *buf;

	rc = coli_io_writer_create(path, &w);
	if (rc)
		return rc;
	for (int i = 0; i < (small ? 1 : SYNTH_N_SECTIONS); i++) {
		rc = coli_io_writer_set_section(w, g_synth_sections[i].kind,
		                                g_synth_sections[i].text,
		                                strlen(g_synth_sections[i].text));
		if (rc)
			goto err;
	}
	for (int i = 0; i < nt; i++) {
		idx[i] =
		    coli_io_writer_plan_tensor(w, g_synth_tensors[i].name, g_synth_tensors[i].dtype,
		                               g_synth_tensors[i].ndim, g_synth_tensors[i].shape);
		if (idx[i] < 0) {
			rc = idx[i];
			goto err;
		}
	}
	for (int i = 0; i < nl; i++) {
		struct coli_expert_layer l = g_synth_layers[i];

		if (small)
			l.n_experts = 2;
		li[i] = coli_io_writer_plan_experts(w, &l);
		if (li[i] < 0) {
			rc = li[i];
			goto err;
		}
	}
	rc = coli_io_writer_layout(w);
	if (rc)
		goto err;
	buf = malloc(1 << 20);
	if (!buf) {
		rc = -ENOMEM;
		goto err;
	}
	/* slabs first, last layer first, each slab's second half before its first */
	for (int i = nl - 1; i >= 0 && !rc; i--) {
		struct coli_expert_layer l = g_synth_layers[i];

		coli_io_slab_layout(&l);
		for (uint32_t e = 0; e < (small ? 2 : l.n_experts) && !rc; e++) {
			uint64_t half = l.slab_bytes / 2;

			synth_fill(buf, SYNTH_SLAB_ID(i, e), half, (size_t)(l.slab_bytes - half));
			rc = coli_io_writer_write_slab(w, li[i], e, half, buf, l.slab_bytes - half);
			synth_fill(buf, SYNTH_SLAB_ID(i, e), 0, (size_t)half);
			if (!rc)
				rc = coli_io_writer_write_slab(w, li[i], e, 0, buf, half);
		}
	}
	/* tensors in reverse order, in 1000-byte pieces */
	for (int i = nt - 1; i >= 0 && !rc; i--) {
		for (uint64_t off = 0; off < g_synth_tensors[i].bytes && !rc; off += 1000) {
			uint64_t n = g_synth_tensors[i].bytes - off;

			n = n < 1000 ? n : 1000;
			synth_fill(buf, (uint32_t)i, off, (size_t)n);
			rc = coli_io_writer_write_tensor(w, idx[i], off, buf, n);
		}
	}
	free(buf);
	if (rc)
		goto err;
	return coli_io_writer_commit(w);
err:
	coli_io_writer_abort(w);
	return rc;
}

#endif
