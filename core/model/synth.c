/*
 * core/model/synth.c — synthetic models: a valid, loadable .coli in the shape of a
 * real MoE model, filled with seeded random weights, written at disk speed
 * (`coli bench make-model`). Benchmarks need models of real geometry (slab
 * sizes, expert counts, top-k, dense bytes per token) far more than they need
 * real weights, and a 100+ GB checkpoint is not something a test machine
 * downloads. The shapes are in core/model/synth_shapes.c (docs/shapes.md: their
 * numbers and sources).
 *
 * What is written (tensor names as in core/coli.h):
 *
 *   CONFIG       coli_config_format() of the shape (quant and --layers applied)
 *   HF_CONFIG    {"coli_synthetic": {shape, seed, source}}  (provenance only)
 *   tensors      tok_embd, out_norm, lm_head, blk.N.* as the converter plans them
 *                (MLA layers when the shape has kv_lora: DeepSeek-V3, Kimi-K2)
 *   slabs        one per (MoE layer, expert), io/io.h's slab layout
 *
 * No tokenizer section: benchmarks and `coli generate --ids` use token ids.
 *
 * Values. Matrices are written straight in the target format, never through
 * fp32 + coli_quantize_mat (that would cost ~20x the disk time):
 *
 *   Q8_0   quants: random int8 in [-127, 127] (never -128, as GGUF's rounding)
 *   Q4_0   quants: each nibble from 4 random bits, 0 mapped to 8: values
 *          -7..7 with 0 twice as likely, symmetric, so mean 0 (plain random
 *          nibbles have mean -0.5: every projection then carries one common
 *          direction, hidden states align and routing collapses onto a few
 *          experts; tests/bench/synth_routing.c)
 *   scales random fp16 d in [0.5, 1.5) * base, base chosen so the weights'
 *          standard deviation is ~0.02 (real checkpoints' init scale):
 *          q8: 0.02 / (73.6 * 1.04), q4: 0.02 / (4.18 * 1.04)
 *   BF16   random sign and 7-bit mantissa, exponent 2^-8 .. 2^-5 (std ~0.027)
 *   Q4_K / Q5_K / Q6_K (--quant q4k / q5k / q6k): llama.cpp's Q4_K_M mix
 *          (Q5_K_M for q5k): tok_embd, lm_head, attn_v and every down
 *          projection (dense, shared, expert: the slab's down_kind) in Q6_K,
 *          the other matrices in the named type; a matrix whose columns are
 *          not whole 256-blocks in Q8_0. Quant bytes random; each block's
 *          scales fixed (Q4_K / Q5_K: every group's 6-bit scale and min 16,
 *          dmin = 7.5 d / 15.5 d, so a weight is 16 d (q - 7.5): mean 0) or
 *          random in 8..23 (Q6_K's int8 scales, q - 32); d chosen for a
 *          standard deviation of ~0.02 as above
 *   f32    norms (and q/k norms) uniform in [0.9, 1.1]; routers and biases
 *          uniform in +-0.0346 (std 0.02)
 *
 * With those, rmsnormed activations ~1 give projections and router logits of
 * order 1, so the forward pass stays finite over any depth and routing varies
 * from token to token (different experts fire, as in a real model).
 *
 * Determinism and threads. Every object (tensor or slab) is a list of "fills"
 * (planes of one kind at an offset in the object). A fill is generated in
 * 4 KiB pieces, each from its own splitmix64 stream seeded by (seed, object,
 * fill, piece), so the file is a pure function of (shape, quant, layers, seed)
 * whatever the thread count. Work items are <= CHUNK-byte pieces of objects in
 * file order; threads take them from an atomic counter, generate into their
 * own buffer and pwrite at the final offset (the writer accepts concurrent
 * writes to disjoint ranges). The writer hashes what landed on disk at commit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/coli.h"
#include "cpu/cpu.h"
#include "io/io.h"

#define CHUNK       (8u << 20) /* bytes per work item */
#define PIECE       4096u      /* bytes per rng stream */
#define MAX_FILLS   6
#define MAX_THREADS 64

void coli_synth_opts_init(struct coli_synth_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->quant = COLI_DTYPE_Q4_0;
	o->seed = 1;
}

/* ---- objects and fills ---- */

enum fill_kind { F_Q8, F_Q4, F_SCALE8, F_SCALE4, F_BF16, F_NORM, F_SMALL, F_Q4K, F_Q5K, F_Q6K };

struct fill {
	uint64_t off, bytes; /* within the object */
	enum fill_kind kind;
};

/* A K-quant synthetic model's matrix types: Q6_K for the mix's names (the
 * Q4_K_M / Q5_K_M choice), the quant's own type otherwise, Q8_0 where the
 * columns are not whole superblocks. */
static enum coli_dtype mat_dtype(enum coli_dtype quant, const char *name, uint64_t cols)
{
	static const char *const six[] = {"tok_embd", "lm_head",    "attn_v",
	                                  "ffn_down", "shexp_down", "exp_down"};

	if (!coli_dtype_is_block(quant))
		return quant;
	if (cols % 256)
		return COLI_DTYPE_Q8_0;
	for (size_t i = 0; i < sizeof(six) / sizeof(six[0]); i++) {
		const char *p = strstr(name, six[i]);

		if (p && !p[strlen(six[i])])
			return COLI_DTYPE_Q6_K;
	}
	return quant;
}

struct object {
	int tensor;      /* writer tensor index, or -1 for a slab */
	int li;          /* expert layer index (slabs) */
	uint32_t expert; /* (slabs) */
	uint64_t bytes;  /* object size (slab_bytes for slabs) */
	int n_fills;
	struct fill f[MAX_FILLS];
};

struct item {
	uint32_t obj;
	uint64_t off, bytes;
};

struct synth {
	const struct coli_synth_opts *o;
	struct coli_model_config c;
	coli_io_writer_t *w;
	struct object *obj;
	uint32_t n_obj, cap_obj;
	struct item *items;
	uint64_t n_items;
	uint64_t next;  /* atomic: next item */
	uint64_t done;  /* atomic: bytes written */
	uint64_t total; /* bytes to write */
	int rc;         /* first error (atomic CAS from 0) */
	char *err;
	size_t errlen;
	pthread_mutex_t err_mu;
	uint16_t scale8[256], scale4[256]; /* fp16 scale tables */
	uint8_t sym4[256];                 /* random byte -> two symmetric Q4_0 nibbles */
	uint8_t kq_half[3][4];             /* Q4_K, Q5_K: d, dmin; Q6_K: d (fp16 bytes) */
	struct timespec t0;
	double last_draw;
};

/* Add the fills of a rows x cols matrix in dtype t at offset off. */
static void add_mat(struct object *ob, enum coli_dtype t, uint64_t rows, uint64_t cols,
                    uint64_t off)
{
	if (t == COLI_DTYPE_BF16) {
		ob->f[ob->n_fills++] = (struct fill){off, rows * cols * 2, F_BF16};
		return;
	}
	if (coli_dtype_is_block(t)) {
		ob->f[ob->n_fills++] = (struct fill){off, coli_dtype_mat_bytes(t, rows, cols),
		                                     t == COLI_DTYPE_Q4_K   ? F_Q4K
		                                     : t == COLI_DTYPE_Q5_K ? F_Q5K
		                                                            : F_Q6K};
		return;
	}
	uint64_t qrow = t == COLI_DTYPE_Q8_0 ? cols : cols / 2;

	ob->f[ob->n_fills++] = (struct fill){off, rows * qrow, t == COLI_DTYPE_Q8_0 ? F_Q8 : F_Q4};
	ob->f[ob->n_fills++] = (struct fill){off + rows * qrow, rows * (cols / COLI_QBLOCK) * 2,
	                                     t == COLI_DTYPE_Q8_0 ? F_SCALE8 : F_SCALE4};
}

static struct object *new_object(struct synth *s)
{
	if (s->n_obj == s->cap_obj) {
		uint32_t cap = s->cap_obj ? s->cap_obj * 2 : 256;
		struct object *p = realloc(s->obj, cap * sizeof(*p));

		if (!p)
			return NULL;
		s->obj = p;
		s->cap_obj = cap;
	}
	memset(&s->obj[s->n_obj], 0, sizeof(s->obj[0]));
	return &s->obj[s->n_obj++];
}

/* Plan one tensor: a matrix in the model's quant (mat) or an f32 vector/matrix. */
static int plan_tensor(struct synth *s, const char *name, uint64_t d0, uint64_t d1, int mat,
                       enum fill_kind f32kind)
{
	enum coli_dtype t = mat ? mat_dtype(s->c.quant, name, d1) : COLI_DTYPE_F32;
	uint64_t shape[2] = {d0, d1};
	int ndim = d1 ? 2 : 1, idx;
	struct object *ob;

	idx = coli_io_writer_plan_tensor(s->w, name, t, ndim, shape);
	if (idx < 0)
		return idx;
	ob = new_object(s);
	if (!ob)
		return -ENOMEM;
	ob->tensor = idx;
	ob->bytes = coli_dtype_mat_bytes(t, d0, d1 ? d1 : 1);
	if (mat)
		add_mat(ob, t, d0, d1, 0);
	else
		ob->f[ob->n_fills++] = (struct fill){0, ob->bytes, f32kind};
	return 0;
}

/* The tensors of layer l, named and shaped as core/convert/convert.c plans them. */
static int plan_layer(struct synth *s, int l)
{
	const struct coli_model_config *c = &s->c;
	uint64_t H = c->hidden, qd = (uint64_t)c->n_heads * c->head_dim,
	         kvd = (uint64_t)c->n_kv_heads * c->head_dim;
	uint64_t qn = c->qk_norm == 1 ? (uint64_t)c->head_dim : qd;
	uint64_t kn = c->qk_norm == 1 ? (uint64_t)c->head_dim : kvd;
	uint64_t I = c->dense_inter, S = c->shared_inter;
	char n[COLI_TENSOR_NAME_MAX];
	int rc = 0;

#define T(suffix, a, b, mat, k)                                                                    \
	do {                                                                                       \
		snprintf(n, sizeof(n), "blk.%d." suffix, l);                                       \
		rc = rc ? rc : plan_tensor(s, n, a, b, mat, k);                                    \
	} while (0)
	T("attn_norm", H, 0, 0, F_NORM);
	if (c->kv_lora) { /* MLA: core/coli.h lists the tensors */
		uint64_t nh = c->n_heads, ql = c->q_lora, kl = c->kv_lora;

		if (ql) {
			T("attn_q_a", ql, H, 1, 0);
			T("attn_q_a_norm", ql, 0, 0, F_NORM);
			T("attn_q_b", qd, ql, 1, 0);
		} else {
			T("attn_q", qd, H, 1, 0);
		}
		T("attn_kv_a", kl + c->rope_dim, H, 1, 0);
		T("attn_kv_a_norm", kl, 0, 0, F_NORM);
		T("attn_k_b", nh * kl, c->qk_nope, 1, 0);
		T("attn_v_b", nh * c->v_head, kl, 1, 0);
		T("attn_o", H, nh * c->v_head, 1, 0);
	} else {
		T("attn_q", qd, H, 1, 0);
		T("attn_k", kvd, H, 1, 0);
		T("attn_v", kvd, H, 1, 0);
		T("attn_o", H, qd, 1, 0);
	}
	if (c->qkv_bias) {
		T("attn_q_bias", qd, 0, 0, F_SMALL);
		T("attn_k_bias", kvd, 0, 0, F_SMALL);
		T("attn_v_bias", kvd, 0, 0, F_SMALL);
	}
	if (c->qk_norm) {
		T("attn_q_norm", qn, 0, 0, F_NORM);
		T("attn_k_norm", kn, 0, 0, F_NORM);
	}
	if (c->attn_o_bias)
		T("attn_o_bias", H, 0, 0, F_SMALL);
	if (c->attn_sinks)
		T("attn_sinks", c->n_heads, 0, 0, F_SMALL);
	T("ffn_norm", H, 0, 0, F_NORM);
	if (!c->is_moe_layer[l]) {
		T("ffn_gate", I, H, 1, 0);
		T("ffn_up", I, H, 1, 0);
		T("ffn_down", H, I, 1, 0);
		return rc;
	}
	T("router", c->n_experts, H, 0, F_SMALL);
	if (c->router_bias)
		T("router_bias", c->n_experts, 0, 0, F_SMALL);
	if (c->expert_bias) { /* gpt-oss: f32, an expert a row */
		T("exp_gate_bias", c->n_experts, c->moe_inter, 0, F_SMALL);
		T("exp_up_bias", c->n_experts, c->moe_inter, 0, F_SMALL);
		T("exp_down_bias", c->n_experts, H, 0, F_SMALL);
	}
	if (S) {
		T("shexp_gate", S, H, 1, 0);
		T("shexp_up", S, H, 1, 0);
		T("shexp_down", H, S, 1, 0);
		if (c->shared_gated)
			T("shexp_router", 1, H, 0, F_SMALL);
	}
#undef T
	return rc;
}

static int plan(struct synth *s)
{
	const struct coli_model_config *c = &s->c;
	uint64_t H = c->hidden;
	int rc, li = 0;

	rc = plan_tensor(s, "tok_embd", c->vocab, H, 1, 0);
	rc = rc ? rc : plan_tensor(s, "out_norm", H, 0, 0, F_NORM);
	rc = rc ? rc : plan_tensor(s, "lm_head", c->vocab, H, 1, 0);
	for (int l = 0; l < c->n_layers && !rc; l++)
		rc = plan_layer(s, l);
	if (rc)
		return rc;
	for (int l = 0; l < c->n_layers; l++) {
		if (!c->is_moe_layer[l])
			continue;
		struct coli_expert_layer e = {.layer = (uint32_t)l,
		                              .n_experts = (uint32_t)c->n_experts,
		                              .dtype = mat_dtype(c->quant, "exp_gate", H),
		                              .hidden = (uint32_t)H,
		                              .inter = (uint32_t)c->moe_inter};
		const enum coli_dtype dd = mat_dtype(c->quant, "exp_down", (uint64_t)c->moe_inter);

		if (dd != e.dtype)
			e.down_kind = (uint32_t)dd + 1;

		rc = coli_io_slab_layout(&e);
		if (rc)
			return rc;
		rc = coli_io_writer_plan_experts(s->w, &e);
		if (rc < 0)
			return rc;
		for (uint32_t x = 0; x < e.n_experts; x++) {
			struct object *ob = new_object(s);

			if (!ob)
				return -ENOMEM;
			ob->tensor = -1;
			ob->li = li;
			ob->expert = x;
			ob->bytes = e.slab_bytes;
			add_mat(ob, e.dtype, e.inter, e.hidden, e.gate_off);
			add_mat(ob, e.dtype, e.inter, e.hidden, e.up_off);
			add_mat(ob, dd, e.hidden, e.inter, e.down_off);
		}
		li++;
	}
	return 0;
}

static int make_items(struct synth *s)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < s->n_obj; i++)
		n += (s->obj[i].bytes + CHUNK - 1) / CHUNK;
	s->items = malloc(n * sizeof(*s->items) + 1);
	if (!s->items)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->n_obj; i++)
		for (uint64_t off = 0; off < s->obj[i].bytes; off += CHUNK) {
			uint64_t b = s->obj[i].bytes - off;

			s->items[s->n_items++] = (struct item){i, off, b < CHUNK ? b : CHUNK};
			s->total += b < CHUNK ? b : CHUNK;
		}
	return 0;
}

/* ---- generation ---- */

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Byte j of a K-quant block (F_Q4K, F_Q5K, F_Q6K) from the random byte r:
 * the quants are r, the scales and halves as the essay says (each byte a
 * function of its position alone, so a block may straddle pieces). */
static uint8_t kq_byte(const struct synth *s, enum fill_kind k, unsigned j, uint8_t r)
{
	if (k == F_Q6K) {
		if (j >= 208)
			return s->kq_half[2][j - 208];
		return j >= 192 ? (uint8_t)(8 + (r & 15)) : r;
	}
	if (j < 4)
		return s->kq_half[k == F_Q5K][j];
	if (j < 16) /* 6-bit scale and min of every group 16 */
		return j < 12 ? 0x50 : 0x00;
	return r;
}

/* One PIECE-sized (or shorter, at a fill's end) run of values from stream x;
 * dst[0] is byte off of the fill. */
static void gen_piece(const struct synth *s, enum fill_kind k, uint64_t x, uint64_t off,
                      uint8_t *dst, size_t n)
{
	size_t i = 0;

	switch (k) {
	case F_Q4K:
	case F_Q5K:
	case F_Q6K: {
		const unsigned bb = k == F_Q4K ? 144 : k == F_Q5K ? 176 : 210;
		unsigned j = (unsigned)(off % bb);

		for (; i < n; i++, j = j + 1 == bb ? 0 : j + 1)
			dst[i] = kq_byte(s, k, j, (uint8_t)splitmix(&x));
		return;
	}
	case F_Q4:
	case F_Q8:
		for (; i + 8 <= n; i += 8) {
			uint64_t r = splitmix(&x);
			memcpy(dst + i, &r, 8);
		}
		for (; i < n; i++)
			dst[i] = (uint8_t)splitmix(&x);
		if (k == F_Q8)
			for (i = 0; i < n; i++)
				dst[i] = dst[i] == 0x80 ? 0x81 : dst[i];
		else
			for (i = 0; i < n; i++)
				dst[i] = s->sym4[dst[i]];
		return;
	case F_SCALE8:
	case F_SCALE4: {
		const uint16_t *tab = k == F_SCALE8 ? s->scale8 : s->scale4;
		uint64_t r = 0;

		for (; i + 2 <= n; i += 2) {
			if (!(i & 15))
				r = splitmix(&x);
			uint16_t h = tab[(r >> (4 * (i & 15))) & 0xff];
			memcpy(dst + i, &h, 2);
		}
		return;
	}
	case F_BF16: {
		uint64_t r = 0;

		for (; i + 2 <= n; i += 2) {
			if (!(i & 7))
				r = splitmix(&x);
			uint16_t v = (uint16_t)(r >> (8 * (i & 7)));
			uint16_t h =
			    (uint16_t)((v & 0x8000) | ((119u + ((v >> 7) & 3)) << 7) | (v & 0x7f));
			memcpy(dst + i, &h, 2);
		}
		return;
	}
	case F_NORM:
	case F_SMALL:
		for (; i + 4 <= n; i += 4) {
			float u = (float)(splitmix(&x) >> 40) * (1.0f / 16777216.0f) - 0.5f;
			float v = k == F_NORM ? 1.0f + 0.2f * u : 0.0693f * u;
			memcpy(dst + i, &v, 4);
		}
		return;
	}
}

/* Bytes [a, b) of fill fi of object oi into dst (dst[0] is fill byte a). */
static void gen_fill(const struct synth *s, uint32_t oi, int fi, uint64_t a, uint64_t b,
                     uint8_t *dst, uint8_t *tmp)
{
	const struct fill *f = &s->obj[oi].f[fi];

	for (uint64_t p = a / PIECE; p * PIECE < b; p++) {
		uint64_t p0 = p * PIECE, p1 = p0 + PIECE < f->bytes ? p0 + PIECE : f->bytes;
		uint64_t lo = a > p0 ? a : p0, hi = b < p1 ? b : p1;
		uint64_t x = s->o->seed * 0x2545f4914f6cdd1dull ^ ((uint64_t)oi << 40) ^
		             ((uint64_t)fi << 36) ^ p;

		splitmix(&x);
		if (lo == p0 && hi == p1) {
			gen_piece(s, f->kind, x, p0, dst + (lo - a), (size_t)(hi - lo));
		} else {
			gen_piece(s, f->kind, x, p0, tmp, (size_t)(p1 - p0));
			memcpy(dst + (lo - a), tmp + (lo - p0), (size_t)(hi - lo));
		}
	}
}

static void set_err(struct synth *s, int rc, const char *msg)
{
	pthread_mutex_lock(&s->err_mu);
	if (!s->rc) {
		s->rc = rc;
		snprintf(s->err, s->errlen, "%s", msg);
	}
	pthread_mutex_unlock(&s->err_mu);
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void progress(struct synth *s, int final)
{
	double t = now_s(), el = t - (s->t0.tv_sec + s->t0.tv_nsec * 1e-9);
	uint64_t d = __atomic_load_n(&s->done, __ATOMIC_RELAXED);

	if (!s->o->progress || (!final && t - s->last_draw < 0.2))
		return;
	s->last_draw = t;
	fprintf(stderr, "\rcoli: %8.0f / %.0f MB  %6.0f MB/s%s", d / 1e6, s->total / 1e6,
	        el > 0 ? d / 1e6 / el : 0.0, final ? "\n" : "");
}

struct worker {
	struct synth *s;
	int id;
	pthread_t th;
};

static void *work(void *arg)
{
	struct worker *wk = arg;
	struct synth *s = wk->s;
	uint8_t *buf = malloc(CHUNK), *tmp = malloc(PIECE);

	if (!buf || !tmp) {
		set_err(s, -ENOMEM, "out of memory for a generation buffer");
		goto out;
	}
	for (;;) {
		uint64_t k = __atomic_fetch_add(&s->next, 1, __ATOMIC_RELAXED);
		const struct item *it;
		const struct object *ob;
		uint64_t covered = 0;
		int rc;

		if (k >= s->n_items || __atomic_load_n(&s->rc, __ATOMIC_RELAXED))
			break;
		it = &s->items[k];
		ob = &s->obj[it->obj];
		for (int fi = 0; fi < ob->n_fills; fi++) {
			const struct fill *f = &ob->f[fi];
			uint64_t a = it->off > f->off ? it->off : f->off;
			uint64_t b = it->off + it->bytes < f->off + f->bytes ? it->off + it->bytes
			                                                     : f->off + f->bytes;
			if (a < b)
				covered += b - a;
		}
		if (covered < it->bytes) /* padding between and after matrices reads as 0 */
			memset(buf, 0, (size_t)it->bytes);
		for (int fi = 0; fi < ob->n_fills; fi++) {
			const struct fill *f = &ob->f[fi];
			uint64_t a = it->off > f->off ? it->off : f->off;
			uint64_t b = it->off + it->bytes < f->off + f->bytes ? it->off + it->bytes
			                                                     : f->off + f->bytes;
			if (a < b)
				gen_fill(s, it->obj, fi, a - f->off, b - f->off,
				         buf + (a - it->off), tmp);
		}
		rc = ob->tensor >= 0 ? coli_io_writer_write_tensor(s->w, ob->tensor, it->off, buf,
		                                                   (size_t)it->bytes)
		                     : coli_io_writer_write_slab(s->w, ob->li, ob->expert, it->off,
		                                                 buf, (size_t)it->bytes);
		if (rc) {
			set_err(s, rc, coli_io_errmsg());
			break;
		}
		__atomic_fetch_add(&s->done, it->bytes, __ATOMIC_RELAXED);
		if (wk->id == 0)
			progress(s, 0);
	}
out:
	free(buf);
	free(tmp);
	return NULL;
}

static int run_workers(struct synth *s)
{
	int n = s->o->threads > 0 ? s->o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	struct worker wk[MAX_THREADS];
	int started = 1;

	if (n < 1)
		n = 1;
	if (n > MAX_THREADS)
		n = MAX_THREADS;
	clock_gettime(CLOCK_MONOTONIC, &s->t0);
	for (int i = 0; i < n; i++)
		wk[i] = (struct worker){.s = s, .id = i};
	for (int i = 1; i < n; i++, started++)
		if (pthread_create(&wk[i].th, NULL, work, &wk[i]))
			break;
	work(&wk[0]);
	for (int i = 1; i < started; i++)
		pthread_join(wk[i].th, NULL);
	if (!s->rc)
		progress(s, 1);
	return s->rc;
}

int coli_synth_write(const struct coli_synth_opts *o, char *err, size_t errlen)
{
	struct synth s = {.o = o, .err = err, .errlen = errlen};
	const char *source = NULL;
	char *cfg = NULL, prov[512];
	int rc;

	err[0] = 0;
	pthread_mutex_init(&s.err_mu, NULL);
	if (o->quant != COLI_DTYPE_BF16 && o->quant != COLI_DTYPE_Q8_0 &&
	    o->quant != COLI_DTYPE_Q4_0 && o->quant != COLI_DTYPE_Q4_K &&
	    o->quant != COLI_DTYPE_Q5_K && o->quant != COLI_DTYPE_Q6_K) {
		snprintf(err, errlen,
		         "quant %s is not a model format (bf16, q8, q4, q4k, q5k, q6k)",
		         coli_dtype_name(o->quant));
		return -EINVAL;
	}
	rc = coli_synth_shape(o->shape ? o->shape : "", o->quant, o->n_layers, &s.c, &source);
	if (rc) {
		snprintf(err, errlen,
		         rc == -ENOENT ? "unknown shape '%s' (shapes: %s)"
		                       : "shape '%s': --layers must be 1..256 (%s)",
		         o->shape ? o->shape : "", coli_synth_shapes());
		return rc;
	}
	for (int i = 0; i < 256; i++) {
		float u = 0.5f + ((float)i + 0.5f) / 256.0f;

		s.scale8[i] = coli_f32_to_fp16(u * 0.02f / (73.6f * 1.04f));
		s.scale4[i] = coli_f32_to_fp16(u * 0.02f / (4.18f * 1.04f));
		s.sym4[i] = (uint8_t)(((i & 15) ? i & 15 : 8) | ((i >> 4) ? i & 0xf0 : 0x80));
	}
	{ /* K-quant halves: std 0.02 = d * scale * std(q) (uniform q: 4.61, 9.23, 18.47) */
		const float d[3] = {0.02f / (16 * 4.61f), 0.02f / (16 * 9.23f),
		                    0.02f / (16.1f * 18.47f)};
		const float dm[3] = {7.5f * d[0], 15.5f * d[1], 0.0f};

		for (int t = 0; t < 3; t++) {
			uint16_t h[2] = {coli_f32_to_fp16(d[t]), coli_f32_to_fp16(dm[t])};

			memcpy(s.kq_half[t], h, 4);
		}
	}
	cfg = coli_config_format(&s.c);
	snprintf(prov, sizeof(prov),
	         "{\"coli_synthetic\": {\"shape\": \"%s\", \"layers\": %d, \"quant\": \"%s\", "
	         "\"seed\": %llu, \"source\": \"%s\"}}",
	         o->shape, s.c.n_layers, coli_dtype_name(o->quant), (unsigned long long)o->seed,
	         source);
	rc = cfg ? coli_io_writer_create(o->out_path, &s.w) : -ENOMEM;
	if (rc)
		goto out;
	rc = coli_io_writer_set_section(s.w, COLI_SECTION_CONFIG, cfg, strlen(cfg));
	rc = rc ? rc : coli_io_writer_set_section(s.w, COLI_SECTION_HF_CONFIG, prov, strlen(prov));
	rc = rc ? rc : plan(&s);
	rc = rc ? rc : coli_io_writer_layout(s.w);
	rc = rc ? rc : make_items(&s);
	if (rc)
		goto out;
	rc = run_workers(&s);
	if (rc)
		goto out;
	rc = coli_io_writer_commit(s.w); /* frees w in every case */
	s.w = NULL;
out:
	if (rc && !err[0])
		snprintf(err, errlen, "%s", rc == -ENOMEM ? "out of memory" : coli_io_errmsg());
	if (s.w)
		coli_io_writer_abort(s.w);
	free(cfg);
	free(s.obj);
	free(s.items);
	pthread_mutex_destroy(&s.err_mu);
	return rc;
}
