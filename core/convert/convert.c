/*
 * core/convert/convert.c — Hugging Face safetensors -> .coli, in bounded memory;
 * a GGUF is read as a checkpoint whose tensors may be ggml blocks
 * (core/convert/convert_gguf.c); an FP8 checkpoint's F8 weights are widened
 * with their block scales (core/convert/convert_fp8.c).
 *
 * Three passes, none of which holds more than one chunk of weights:
 *
 *   1. plan:  from the config alone, every canonical tensor (names at the top
 *      of core/coli.h) and every MoE layer's slab geometry is given to the
 *      writer, which lays the file out.
 *   2. map:   every tensor of every shard header is matched to a destination
 *      ("job"): a canonical tensor, or one part of one expert slab
 *      (core/convert/convert_map.c).
 *   3. write: shard by shard, jobs in file-offset order, each job's rows are
 *      read as stored in chunks of at most CHUNK_BYTES of fp32, widened to
 *      fp32 and converted to the destination format (coli_quantize_rows:
 *      bf16, q8_0, q4_0, f32; a chunk's rows split over a thread pool,
 *      --threads) and pwritten at their final offsets. GGUF Q8_0 / Q4_0
 *      rows bound for q8_0 / q4_0 skip fp32: their blocks are repacked
 *      (job.copy, coli_ggml_repack); so are, copied as they are, a GGUF's
 *      blocks of the other types coli keeps (q4_1 ... q6_k: rows of whole
 *      blocks, one piece) when --quant is left out (kept_dtype, which the
 *      plan asks per matrix, and expert_dtypes). A quantized matrix
 *      is planar (quants [rows][qrow] then fp16 scales [rows][cols/32]), so
 *      a chunk of rows lands as two pieces:
 *
 *        quants: base + r0 * qrow              (qrow = cols or cols/2)
 *        scales: base + rows * qrow + r0 * 2 * cols/32
 *
 * A matrix whose columns are not a multiple of COLI_QBLOCK cannot be q8_0 or
 * q4_0: under --quant q8/q4 it is kept as bf16 (which every kernel reads at
 * any width), an expert layer whole when its gate/up (hidden) or down
 * (moe_inter) columns are such; one line on stderr names them (mat_dtype).
 *
 * Peak memory is three chunk buffers (as stored: 2-byte sources only; fp32;
 * converted; an FP8 chunk's block scales besides: a row of them per block of
 * rows) plus headers and the job table: independent of model size
 * (docs/quant.md has the numbers). The pool's tasks widen and convert their
 * rows of a chunk.
 * The writer works on PATH.tmp.<pid> and renames only in _commit; any error
 * aborts it, so nothing is left behind.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/convert/convert_job.h"

#define CHUNK_BYTES (32u << 20) /* fp32 bytes per read chunk */

void coli_convert_opts_init(struct coli_convert_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->quant = COLI_DTYPE_BF16;
}

/* Where a K-quant target cannot go (columns of partial 256-blocks: an
 * expert's down of 128 or 768 columns), the 32-block type llama.cpp's
 * quantizer falls back to for it. */
static enum coli_dtype kq_fallback(enum coli_dtype t)
{
	return t == COLI_DTYPE_Q4_K   ? COLI_DTYPE_Q5_0
	       : t == COLI_DTYPE_Q5_K ? COLI_DTYPE_Q5_1
	                              : COLI_DTYPE_Q8_0;
}

static void note_name(char *list, size_t size, const char *name)
{
	size_t k = strlen(list);

	if (k + strlen(name) + 8 < size)
		snprintf(list + k, size - k, " %s", name);
	else if (!strstr(list, " ..."))
		snprintf(list + k, size - k, " ...");
}

/* Whether the matrix `name` ("lm_head", "blk.3.attn_v") is in the mix list:
 * the whole name or its part after "blk.N.". */
static int in_mix(const char *mix, const char *name)
{
	const char *base = name, *dot;
	size_t n;

	if (!strncmp(name, "blk.", 4) && (dot = strchr(name + 4, '.')))
		base = dot + 1;
	n = strlen(base);
	for (const char *p = mix; *p;) {
		const size_t k = strcspn(p, ",");

		if ((k == n && !memcmp(p, base, n)) || (k == strlen(name) && !memcmp(p, name, k)))
			return 1;
		p += k + (p[k] == ',');
	}
	return 0;
}

/* The dtype of a matrix of `cols` columns: the requested quant; for a
 * K-quant whose rows are not whole 256-blocks, its 32-block fallback; bf16
 * when the columns are not whole 32-blocks either (llama.cpp's quantizer
 * likewise keeps such tensors in a wider type); bf16 is exact for bf16
 * sources. */
static enum coli_dtype mat_dtype(struct cv *v, const char *name, uint64_t cols)
{
	unsigned elems = COLI_QBLOCK, bytes;

	if (coli_dtype_is_block(v->c->quant))
		coli_dtype_block(v->c->quant, &elems, &bytes);
	if ((v->c->quant == COLI_DTYPE_Q4_K || v->c->quant == COLI_DTYPE_Q5_K) &&
	    cols % elems == 0 && in_mix(v->o->quant_mix ? v->o->quant_mix : COLI_QUANT_MIX, name))
		return COLI_DTYPE_Q6_K;
	if (!coli_dtype_is_quant(v->c->quant) || cols % elems == 0)
		return v->c->quant;
	if (cols % COLI_QBLOCK == 0) {
		note_name(v->kfb, sizeof(v->kfb), name);
		v->n_kfb++;
		return kq_fallback(v->c->quant);
	}
	note_name(v->fb, sizeof(v->fb), name);
	v->n_fb++;
	return COLI_DTYPE_BF16;
}

/* A GGUF without --quant keeps every matrix whose block type has a coli
 * twin (Q8_0, Q4_0, Q4_1, Q5_*, Q2_K..Q6_K: cpu/ggml.h) as stored: the
 * ggml type of the source tensor the checkpoint names hf, or -1 (a linear
 * search: a few thousand names, once per matrix, at plan time). */
static int src_ggml(const struct cv *v, const char *hf)
{
	for (int s = 0; hf && v->hf.ggml && s < v->hf.n_shards; s++)
		for (int i = 0; i < v->hf.st[s].n; i++)
			if (!strcmp(v->hf.st[s].t[i].name, hf))
				return v->hf.ggml[s][i];
	return -1;
}

/* 0 and *t when the matrix read from hf (cols columns) keeps its blocks. */
static int kept_dtype(const struct cv *v, const char *hf, uint64_t cols, enum coli_dtype *t)
{
	int g = v->keep ? src_ggml(v, hf) : -1;

	if (g < 0 || coli_ggml_dtype_of((uint32_t)g, t) || !coli_dtype_mat_bytes(*t, 1, cols))
		return -ENOENT;
	return 0;
}

/* An expert layer's dtypes: the config's (mat_dtype), or, keeping a GGUF's
 * blocks, gate/up's type when they share one and down's own (Q4_K_M: Q4_K
 * gate/up, Q6_K down; the container holds both: coli_io_expert_down_dtype). */
static void expert_dtypes(struct cv *v, struct coli_expert_layer *e, enum coli_dtype base,
                          enum coli_dtype base_down)
{
	static const char *const part[] = {"gate_proj", "up_proj", "down_proj"};
	enum coli_dtype t[3];
	int kept[3];
	char hf[160];

	for (int p = 0; p < 3; p++) {
		snprintf(hf, sizeof(hf), "model.layers.%u.mlp.experts.0.%s.weight", e->layer,
		         part[p]);
		kept[p] = !kept_dtype(v, hf, p == 2 ? e->inter : e->hidden, &t[p]);
	}
	e->dtype = kept[0] && kept[1] && t[0] == t[1] ? t[0] : base;
	t[2] = kept[2] ? t[2] : base_down;
	e->down_kind = t[2] != e->dtype ? (uint32_t)t[2] + 1 : 0;
}

static int add_slot(struct cv *v, const char *name, int ndim, uint64_t d0, uint64_t d1, int mat)
{
	char hf[160];
	struct slot *s = &v->slots[v->n_slots];

	snprintf(s->name, sizeof(s->name), "%s", name);
	s->ndim = ndim;
	s->shape[0] = d0;
	s->shape[1] = d1;
	/* MLA's per-head matrices keep no block type (Q5_0, Q4_K, ...): the
	 * device's per-head jobs take bf16, q8 and q4 (coli_model_dev_check), so
	 * the dense part of a DeepSeek GGUF stays on the GPU; Q8_0 and Q4_0 are
	 * their own twins */
	if (!mat || kept_dtype(v, coli_convert_slot_hf(v, name, hf, sizeof(hf)), d1, &s->dtype) ||
	    ((strstr(name, ".attn_k_b") || strstr(name, ".attn_v_b")) &&
	     coli_dtype_is_block(s->dtype)))
		s->dtype = mat ? mat_dtype(v, name, d1) : COLI_DTYPE_F32;
	s->idx = coli_io_writer_plan_tensor(v->w, name, s->dtype, ndim, s->shape);
	if (s->idx < 0) {
		snprintf(v->errbuf, v->errlen, "%s", coli_io_errmsg());
		return s->idx;
	}
	v->n_slots++;
	return 0;
}

/* Pass 1: everything the config implies. */
static int plan(struct cv *v)
{
	const struct coli_model_config *c = v->c;
	uint64_t H = c->hidden, qd = (uint64_t)c->n_heads * c->head_dim,
	         kvd = (uint64_t)c->n_kv_heads * c->head_dim;
	char n[COLI_TENSOR_NAME_MAX];
	enum coli_dtype base, down;
	int rc = 0;

	v->slots = calloc(3 + (size_t)c->n_layers * 24, sizeof(*v->slots));
	v->el = calloc(c->n_layers, sizeof(*v->el));
	if (!v->slots || !v->el)
		return -ENOMEM;
	rc = add_slot(v, "tok_embd", 2, c->vocab, H, 1);
	if (!rc)
		rc = add_slot(v, "out_norm", 1, H, 0, 0);
	if (!rc && !c->tie_embeddings)
		rc = add_slot(v, "lm_head", 2, c->vocab, H, 1);
	for (int l = 0; l < c->n_layers && !rc; l++) {
		uint64_t qn = c->qk_norm == 1 ? (uint64_t)c->head_dim : qd;
		uint64_t kn = c->qk_norm == 1 ? (uint64_t)c->head_dim : kvd;
		uint64_t I = c->dense_inter, S = c->shared_inter;
#define SLOT(suffix, nd, a, b, mat)                                                                \
	do {                                                                                       \
		snprintf(n, sizeof(n), "blk.%d." suffix, l);                                       \
		if (!rc)                                                                           \
			rc = add_slot(v, n, nd, a, b, mat);                                        \
	} while (0)
		SLOT("attn_norm", 1, H, 0, 0);
		if (c->kv_lora) { /* MLA: core/coli.h lists the tensors */
			uint64_t nh = c->n_heads, ql = c->q_lora, kl = c->kv_lora;

			if (ql) {
				SLOT("attn_q_a", 2, ql, H, 1);
				SLOT("attn_q_a_norm", 1, ql, 0, 0);
				SLOT("attn_q_b", 2, qd, ql, 1);
			} else {
				SLOT("attn_q", 2, qd, H, 1);
			}
			SLOT("attn_kv_a", 2, kl + c->rope_dim, H, 1);
			SLOT("attn_kv_a_norm", 1, kl, 0, 0);
			SLOT("attn_k_b", 2, nh * kl, c->qk_nope, 1);
			SLOT("attn_v_b", 2, nh * c->v_head, kl, 1);
			SLOT("attn_o", 2, H, nh * c->v_head, 1);
		} else {
			SLOT("attn_q", 2, qd, H, 1);
			SLOT("attn_k", 2, kvd, H, 1);
			SLOT("attn_v", 2, kvd, H, 1);
			SLOT("attn_o", 2, H, qd, 1);
		}
		if (c->qkv_bias) {
			SLOT("attn_q_bias", 1, qd, 0, 0);
			SLOT("attn_k_bias", 1, kvd, 0, 0);
			SLOT("attn_v_bias", 1, kvd, 0, 0);
		}
		if (c->qk_norm) {
			SLOT("attn_q_norm", 1, qn, 0, 0);
			SLOT("attn_k_norm", 1, kn, 0, 0);
		}
		if (c->attn_o_bias)
			SLOT("attn_o_bias", 1, H, 0, 0);
		if (c->attn_sinks)
			SLOT("attn_sinks", 1, c->n_heads, 0, 0);
		SLOT("ffn_norm", 1, H, 0, 0);
		v->layer_el[l] = -1;
		if (!c->is_moe_layer[l]) {
			SLOT("ffn_gate", 2, I, H, 1);
			SLOT("ffn_up", 2, I, H, 1);
			SLOT("ffn_down", 2, H, I, 1);
			continue;
		}
		SLOT("router", 2, c->n_experts, H, 0);
		if (c->router_bias)
			SLOT("router_bias", 1, c->n_experts, 0, 0);
		if (c->expert_bias) { /* gpt-oss: f32, an expert a row */
			SLOT("exp_gate_bias", 2, c->n_experts, c->moe_inter, 0);
			SLOT("exp_up_bias", 2, c->n_experts, c->moe_inter, 0);
			SLOT("exp_down_bias", 2, c->n_experts, H, 0);
		}
		if (S) {
			SLOT("shexp_gate", 2, S, H, 1);
			SLOT("shexp_up", 2, S, H, 1);
			SLOT("shexp_down", 2, H, S, 1);
			if (c->shared_gated)
				SLOT("shexp_router", 2, 1, H, 0);
		}
#undef SLOT
		if (rc)
			break;
		struct coli_expert_layer *e = &v->el[v->n_el];
		e->layer = (uint32_t)l;
		e->n_experts = (uint32_t)c->n_experts;
		snprintf(n, sizeof(n), "blk.%d.experts", l);
		e->hidden = (uint32_t)H;
		e->inter = (uint32_t)c->moe_inter;
		if (coli_dtype_is_block(c->quant)) { /* gate/up's and down's own, as matrices */
			snprintf(n, sizeof(n), "blk.%d.experts.gate_up", l);
			base = mat_dtype(v, n, H);
			snprintf(n, sizeof(n), "blk.%d.experts.down", l);
			down = mat_dtype(v, n, (uint64_t)c->moe_inter);
			if (coli_dtype_is_quant(base) != coli_dtype_is_quant(down))
				base = down = COLI_DTYPE_BF16; /* one of them is not whole blocks */
		} else {
			base = down = mat_dtype(v, n, H % COLI_QBLOCK ? H : (uint64_t)c->moe_inter);
		}
		expert_dtypes(v, e, base, down);
		rc = coli_io_slab_layout(e);
		if (!rc)
			rc = coli_io_writer_plan_experts(v->w, e);
		if (rc < 0) {
			snprintf(v->errbuf, v->errlen, "%s: experts of layer %d: %s", v->hf.dir, l,
			         coli_io_errmsg());
			return rc;
		}
		v->layer_el[l] = v->n_el++;
		rc = 0;
	}
	if (rc)
		return rc;
	v->part_seen = calloc((size_t)v->n_el * c->n_experts * 3 + 1, 1);
	return v->part_seen ? 0 : -ENOMEM;
}

static int cmp_job(const void *a, const void *b)
{
	const struct job *x = a, *y = b;
	uint64_t ox =
	    x->src->offset + coli_convert_src_bytes(x, x->src_row0 * coli_convert_src_cols(x));
	uint64_t oy =
	    y->src->offset + coli_convert_src_bytes(y, y->src_row0 * coli_convert_src_cols(y));

	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return ox < oy ? -1 : ox > oy;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* "[#####.....]  1234 / 5678 MB  210 MB/s" redrawn at most 10 times a second. */
static void progress(struct cv *v, int final)
{
	double t = now_s(), el = t - v->last_draw;
	double mb = v->done / 1e6, tot = v->total / 1e6,
	       since = t - v->t0.tv_sec - v->t0.tv_nsec * 1e-9;
	char bar[31];
	int fill;

	if (!v->o->progress || (!final && el < 0.1))
		return;
	v->last_draw = t;
	fill = v->total ? (int)(30.0 * v->done / v->total) : 30;
	for (int i = 0; i < 30; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[30] = 0;
	fprintf(stderr, "\r[%s] %8.0f / %.0f MB  %6.0f MB/s%s", bar, mb, tot,
	        since > 0 ? mb / since : 0.0, final ? "\n" : "");
}

/* A chunk's conversion split by rows over the pool: each task fills its rows
 * of the chunk's planar output (the bits do not depend on the split). */
struct quant_job {
	enum coli_dtype dtype;
	enum coli_st_dtype src_dtype;
	int ggml;        /* a GGUF block type, or -1: src_dtype says */
	int copy;        /* raw's blocks are dtype's: repacked, not widened */
	const void *raw; /* the rows as stored, or NULL: `in` holds them already */
	float *in;
	int rows, cols;
	unsigned char *out;
	int rc;                      /* the first failure, any task's */
	const struct fp8_chunk *fp8; /* an F8 source's block scales, or NULL */
};

static void quant_task(void *arg, int t, int n_tasks)
{
	struct quant_job *q = arg;
	int r0 = (int)((long)q->rows * t / n_tasks), r1 = (int)((long)q->rows * (t + 1) / n_tasks);
	int rc = 0;

	if (q->copy) { /* the GGUF's own blocks, bit for bit */
		rc = coli_ggml_repack((uint32_t)q->ggml, q->raw, q->rows, q->cols, q->out, r0, r1);
		if (rc)
			__atomic_store_n(&q->rc, rc, __ATOMIC_RELAXED);
		return;
	}
	if (q->fp8)
		rc = coli_convert_fp8_widen(q->fp8, q->src_dtype, q->raw, (uint64_t)q->cols,
		                            (uint64_t)r0 * q->cols, (uint64_t)r1 * q->cols, q->in);
	else if (q->raw) /* widened here, by rows: the read itself stays one pread */
		rc = coli_convert_src_widen(q->ggml, q->src_dtype, q->raw, (uint64_t)r0 * q->cols,
		                            (uint64_t)r1 * q->cols, q->in);
	rc = rc ? rc
	        : coli_quantize_rows(q->dtype, q->in, q->rows, q->cols, q->out, COLI_ROUND_MSE, r0,
	                             r1);

	if (rc) /* any task's error will do: the message names the chunk */
		__atomic_store_n(&q->rc, rc, __ATOMIC_RELAXED);
}

/* Rows [r0, r0+n) of j's destination, already in its format (planar quants
 * then scales for q8/q4) in out, written where they go. */
static int write_planar(struct cv *v, const struct job *j, uint64_t r0, uint64_t n,
                        const unsigned char *out)
{
	uint64_t qrow, srow, pieces[2][2]; /* {offset, bytes} */
	int np = 1, rc;

	r0 += j->dst_row0;                   /* a part of a larger matrix (MLA's per-head jobs) */
	if (coli_dtype_is_block(j->dtype)) { /* rows of whole blocks, no planes */
		qrow = coli_dtype_row_bytes(j->dtype, j->cols);
		pieces[0][0] = j->base + r0 * qrow;
		pieces[0][1] = n * qrow;
	} else if (coli_dtype_is_quant(j->dtype)) {
		qrow = j->dtype == COLI_DTYPE_Q8_0 ? j->cols : j->cols / 2;
		srow = j->cols / COLI_QBLOCK * 2;
		pieces[0][0] = j->base + r0 * qrow;
		pieces[0][1] = n * qrow;
		pieces[1][0] = j->base + (j->dst_rows ? j->dst_rows : j->rows) * qrow + r0 * srow;
		pieces[1][1] = n * srow;
		np = 2;
	} else {
		qrow = j->cols * (j->dtype == COLI_DTYPE_F32 ? 4 : 2);
		pieces[0][0] = j->base + r0 * qrow;
		pieces[0][1] = n * qrow;
	}
	for (int i = 0; i < np; i++) {
		rc = j->kind == DST_TENSOR
		         ? coli_io_writer_write_tensor(v->w, j->idx, pieces[i][0], out,
		                                       (size_t)pieces[i][1])
		         : coli_io_writer_write_slab(v->w, j->idx, j->expert, pieces[i][0], out,
		                                     (size_t)pieces[i][1]);
		if (rc) {
			snprintf(v->errbuf, v->errlen, "%s", coli_io_errmsg());
			return rc;
		}
		out += pieces[i][1];
	}
	return 0;
}

/* Convert rows [r0, r0+n) of a job's destination from `raw` (as stored; NULL:
 * already fp32 in `in`; fp8: an F8 source's block scales) and write them. */
static int write_rows(struct cv *v, const struct job *j, uint64_t r0, uint64_t n, const void *raw,
                      const struct fp8_chunk *fp8, float *in, unsigned char *out)
{
	struct quant_job q = {j->dtype, j->src->dtype, j->ggml, j->copy, raw, in,
	                      (int)n,   (int)j->cols,  out,     0,       fp8};
	int rc, tasks = coli_cpu_pool_threads(v->pool);

	/* the pool's barrier orders the tasks' writes of `out` before the pwrite */
	coli_cpu_pool_run(v->pool, quant_task, &q, (int)n < tasks ? (int)n : tasks);
	rc = q.rc;
	if (rc) {
		snprintf(v->errbuf, v->errlen,
		         "%s: tensor '%s' rows %llu..%llu: cannot convert to %s (NaN or Inf in "
		         "the weights%s?)",
		         v->hf.shards[j->shard],
		         coli_convert_src_label(j->ggml >= 0, j->src->name, (char[256]){0}, 256),
		         (unsigned long long)(j->src_row0 + r0),
		         (unsigned long long)(j->src_row0 + r0 + n), coli_dtype_name(j->dtype),
		         fp8 ? ", an FP8 NaN encoding or scale" : "");
		return rc;
	}
	return write_planar(v, j, r0, n, out);
}

/* Rows [r0, r0+n) of a job's source as stored into dst: one read, or for
 * rows in ggml's interleaved RoPE order (j->unrope = head dim hd) one read
 * a row: the checkpoint's row h*hd + i*hd/2 + k is the GGUF's h*hd + 2k + i. */
static int read_rows(struct cv *v, const struct job *j, uint64_t r0, uint64_t n, void *dst)
{
	const struct coli_st_file *f = &v->hf.st[j->shard];
	uint64_t hd = (uint64_t)j->unrope, rb = coli_convert_src_bytes(j, j->cols);
	int rc = 0;

	if (!hd)
		return coli_convert_src_read(f, j->src, j->ggml, (j->src_row0 + r0) * j->cols,
		                             n * j->cols, dst, v->errbuf, v->errlen);
	for (uint64_t r = r0; r < r0 + n && !rc; r++) {
		uint64_t in = r % hd, src = r - in + 2 * (in % (hd / 2)) + in / (hd / 2);

		rc = coli_convert_src_read(f, j->src, j->ggml, (j->src_row0 + src) * j->cols,
		                           j->cols, (char *)dst + (r - r0) * rb, v->errbuf,
		                           v->errlen);
	}
	return rc;
}

/* A de-interleaving or transposing job (MLA's, a head's block of at most
 * 1024 x 16384 values; gpt-oss's bf16 experts, 2 x 2880 x 2880): read whole, widened (an F8 source
 * with its block scales: the source rows' blocks), rearranged into fp32, written. */
static int write_xf(struct cv *v, const struct job *j, unsigned char *out)
{
	const struct coli_st_file *f = &v->hf.st[j->shard];
	uint64_t sc = coli_convert_src_cols(j);
	uint64_t n = (j->xf == XF_PAIR || j->xf == XF_TRANSPOSE_PAIR ? 2 : 1) * j->rows * j->cols;
	float *src = malloc(n * 4), *in = malloc(n * 4);
	void *raw = malloc(n * 4);
	int rc = -ENOMEM;

	if (!src || !in || !raw)
		goto out;
	rc = coli_convert_src_read(f, j->src, j->ggml, j->src_row0 * sc, n,
	                           j->src->dtype == COLI_ST_F32 ? (void *)src : raw, v->errbuf,
	                           v->errlen);
	if (!rc && j->scale) { /* an F8 block: value x its block's scale */
		struct fp8_chunk fc;

		rc = coli_convert_fp8_chunk(v, j, 0, n / sc, &fc);
		if (!rc && coli_convert_fp8_widen(&fc, j->src->dtype, raw, sc, 0, n, src))
			rc = coli_convert_errf(
			    v->errbuf, v->errlen, -EINVAL,
			    "%s: tensor '%s' rows %llu..%llu: an FP8 NaN encoding "
			    "or a non-finite scaled value",
			    v->hf.shards[j->shard], j->src->name, (unsigned long long)j->src_row0,
			    (unsigned long long)(j->src_row0 + n / sc));
	} else if (!rc && j->src->dtype != COLI_ST_F32) {
		rc = coli_convert_src_widen(j->ggml, j->src->dtype, raw, 0, n, src);
	}
	if (rc)
		goto out;
	if (j->copy) { /* XF_DEINTERLEAVE of kept blocks: whole rows moved, not requantized */
		uint64_t rb = coli_convert_src_bytes(j, j->cols), h = j->rows / 2;

		for (uint64_t r = 0; r < j->rows; r++)
			memcpy((char *)src + r * rb,
			       (const char *)raw + (r < h ? 2 * r : 2 * (r - h) + 1) * rb, rb);
		rc = write_rows(v, j, 0, j->rows, src, NULL, in, out);
		v->done += coli_convert_src_bytes(j, n);
		goto out;
	}
	for (uint64_t r = 0; r < j->rows; r++)
		for (uint64_t c = 0; c < j->cols; c++)
			in[r * j->cols + c] =
			    j->xf == XF_TRANSPOSE        ? src[c * j->rows + r]
			    : j->xf == XF_TRANSPOSE_PAIR ? src[c * sc + 2 * r + j->pair]
			    : j->xf == XF_PAIR           ? src[r * sc + 2 * c + j->pair]
			    : r < j->rows / 2            ? src[2 * r * j->cols + c]
			                      : src[(2 * (r - j->rows / 2) + 1) * j->cols + c];
	rc = write_rows(v, j, 0, j->rows, NULL, NULL, in, out);
	v->done += coli_convert_src_bytes(j, n);
out:
	free(src), free(in), free(raw);
	return rc;
}

/* Pass 3: every job, shard by shard, in source-offset order. */
static int write_all(struct cv *v)
{
	size_t cap = 0;
	float *in = NULL;
	unsigned char *out = NULL;
	uint16_t *raw = NULL;   /* a chunk of a 2-byte source (or GGUF blocks, FP8) as stored */
	int rc = 0, narrow = 0; /* some source is not F32 (an F32 one reads into `in`) */

	qsort(v->jobs, v->n_jobs, sizeof(*v->jobs), cmp_job);
	for (size_t k = 0; k < v->n_jobs; k++)
		narrow |= v->jobs[k].src->dtype != COLI_ST_F32; /* GGUF blocks: < 2 bytes each */
	clock_gettime(CLOCK_MONOTONIC, &v->t0);
	for (size_t k = 0; k < v->n_jobs && !rc; k++) {
		const struct job *j = &v->jobs[k];
		uint64_t chunk = CHUNK_BYTES / 4 / j->cols;

		if (!chunk)
			chunk = 1;
		if (chunk > j->rows || j->xf != XF_NONE)
			chunk = j->rows;
		if (chunk * j->cols > cap) {
			cap = chunk * j->cols;
			free(in);
			free(out);
			free(raw);
			in = malloc(cap * 4);
			out = malloc(cap * 4);
			raw = narrow ? malloc(cap * 2) : NULL;
			if (!in || !out || (narrow && !raw)) {
				snprintf(v->errbuf, v->errlen, "out of memory for a %zu-byte chunk",
				         cap * 4);
				rc = -ENOMEM;
				break;
			}
		}
		if (j->xf != XF_NONE) {
			rc = write_xf(v, j, out);
			progress(v, 0);
			continue;
		}
		for (uint64_t r0 = 0; j->mx_scales && r0 < j->rows && rc >= 0; r0 += chunk) {
			/* gpt-oss's MXFP4 experts: q8 as they are, or fp32 converted */
			uint64_t n = j->rows - r0 < chunk ? j->rows - r0 : chunk;

			rc = coli_convert_mxfp4_rows(v, j, r0, n, in, out);
			rc = rc == 1   ? write_planar(v, j, r0, n, out)
			     : rc == 0 ? write_rows(v, j, r0, n, NULL, NULL, in, out)
			               : rc;
			v->done += coli_convert_src_bytes(j, n * j->cols);
			progress(v, 0);
		}
		if (j->mx_scales)
			continue;
		for (uint64_t r0 = 0; r0 < j->rows && !rc; r0 += chunk) {
			uint64_t n = j->rows - r0 < chunk ? j->rows - r0 : chunk;
			struct fp8_chunk fc;

			const int wide = j->src->dtype == COLI_ST_F32;

			rc = read_rows(v, j, r0, n, wide ? (void *)in : (void *)raw);
			if (!rc && j->scale) /* the block scales of these rows */
				rc = coli_convert_fp8_chunk(v, j, r0, n, &fc);
			if (rc)
				break;
			if (j->ggml == COLI_GGML_MXFP4 && j->dtype == COLI_DTYPE_Q8_0) {
				/* a GGUF's MXFP4 blocks: q8 exactly (convert_gptoss.c) */
				rc = coli_convert_mxfp4_gguf(
				    v, j, r0, n, (const unsigned char *)raw, out,
				    coli_convert_src_label(1, j->src->name, (char[256]){0}, 256));
				rc = rc ? rc : write_planar(v, j, r0, n, out);
			} else {
				rc = write_rows(v, j, r0, n, wide ? NULL : raw,
				                j->scale ? &fc : NULL, in, out);
			}
			v->done += coli_convert_src_bytes(j, n * j->cols);
			progress(v, 0);
		}
	}
	free(in);
	free(out);
	free(raw);
	if (!rc)
		progress(v, 1);
	return rc;
}

int coli_convert(const struct coli_convert_opts *o, char *errbuf, size_t errlen)
{
	struct cv v = {.o = o, .errbuf = errbuf, .errlen = errlen};
	int rc;

	errbuf[0] = 0;
	if (o->quant != COLI_DTYPE_BF16 && o->quant != COLI_DTYPE_Q8_0 &&
	    o->quant != COLI_DTYPE_Q4_0 && o->quant != COLI_DTYPE_Q4_K &&
	    o->quant != COLI_DTYPE_Q5_K && o->quant != COLI_DTYPE_Q6_K) {
		snprintf(errbuf, errlen,
		         "quant %s is not a conversion target (bf16, q8, q4, q4k, q5k, q6k)",
		         coli_dtype_name(o->quant));
		return -EINVAL;
	}
	rc = coli_convert_gguf_is(o->hf_dir)
	         ? coli_convert_gguf_load(o, &v.hf, errbuf, errlen)
	         : coli_convert_hf_load(o->hf_dir, o->quant, &v.hf, errbuf, errlen);
	if (rc)
		return rc;
	v.c = &v.hf.cfg;
	v.keep = v.hf.ggml && o->quant_auto;
	rc = coli_convert_fp8_load(o, &v.hf, errbuf, errlen); /* before any output */
	if (!rc && !v.hf.ggml) /* a GGUF's one shard is open already */
		rc = coli_convert_hf_open_shards(&v.hf, errbuf, errlen);
	if (rc)
		goto out;
	rc = coli_io_writer_create(o->out_path, &v.w);
	if (rc) {
		snprintf(errbuf, errlen, "%s", coli_io_errmsg());
		v.w = NULL;
		goto out;
	}
	for (int s = 1; s < COLI_CONVERT_N_SECTIONS && !rc; s++)
		if (v.hf.section[s])
			rc = coli_io_writer_set_section(v.w, (enum coli_section)s, v.hf.section[s],
			                                v.hf.section_bytes[s]);
	if (rc) {
		snprintf(errbuf, errlen, "%s", coli_io_errmsg());
		goto out;
	}
	rc = plan(&v);
	if (!rc && v.n_fb)
		fprintf(stderr,
		        "coli convert: %d tensors kept as bf16 (columns not a multiple of %d, "
		        "which %s needs):%s\n",
		        v.n_fb, COLI_QBLOCK, coli_dtype_name(o->quant), v.fb);
	if (!rc && v.n_kfb)
		fprintf(stderr,
		        "coli convert: %d tensors as %s (columns not a multiple of 256, which %s "
		        "needs):%s\n",
		        v.n_kfb, coli_dtype_name(kq_fallback(o->quant)), coli_dtype_name(o->quant),
		        v.kfb);
	for (int s = 0; s < v.hf.n_shards && !rc; s++)
		for (int i = 0; i < v.hf.st[s].n && !rc; i++)
			rc = coli_convert_map_tensor(&v, s, &v.hf.st[s].t[i]);
	if (!rc && v.mtp_skipped)
		fprintf(stderr,
		        "coli convert: skipping %d tensors of %d next-token-prediction layer(s) "
		        "(model.layers.%d and up): coli does not run them\n",
		        v.mtp_skipped, v.hf.n_mtp, v.c->n_layers);
	if (!rc && v.n_blocks && v.keep) /* which GGUF matrices the conversion rounds again */
		fprintf(stderr,
		        "coli convert: %zu of %zu block-quantized matrices copied as stored "
		        "(every type with a coli twin: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K), "
		        "%zu dequantized and converted to %s\n",
		        v.n_copied, v.n_blocks, v.n_blocks - v.n_copied,
		        coli_dtype_name(v.c->quant));
	else if (!rc && v.n_blocks)
		fprintf(stderr,
		        "coli convert: %zu of %zu block-quantized matrices copied as stored "
		        "(%s), %zu dequantized and converted to %s\n",
		        v.n_copied, v.n_blocks,
		        v.c->quant == COLI_DTYPE_Q8_0   ? "GGUF Q8_0 is q8_0"
		        : v.c->quant == COLI_DTYPE_Q4_0 ? "GGUF Q4_0 is q4_0"
		                                        : "only Q8_0 -> q8, Q4_0 -> q4 copy",
		        v.n_blocks - v.n_copied, coli_dtype_name(v.c->quant));
	if (!rc && v.n_mx_exact) /* among those "converted": no rounding */
		fprintf(
		    stderr,
		    "coli convert: %zu of them MXFP4, converted to q8_0 exactly (int8 quants 2 x "
		    "E2M1, fp16 scales 2^(e-128))\n",
		    v.n_mx_exact);
	if (!rc)
		rc = coli_convert_check_complete(&v);
	if (!rc) {
		rc = coli_io_writer_layout(v.w);
		if (rc)
			snprintf(errbuf, errlen, "%s", coli_io_errmsg());
	}
	if (!rc) {
		rc = coli_cpu_pool_create(o->threads, &v.pool);
		if (rc)
			snprintf(errbuf, errlen, "a thread pool of %d: %s", o->threads,
			         strerror(-rc));
	}
	if (!rc)
		rc = write_all(&v);
	if (!rc && v.mx_flushed)
		fprintf(
		    stderr,
		    "coli convert: %llu MXFP4 block(s) with a scale under 2^-24 (q8's fp16 block "
		    "scale cannot hold it) written as zero: their values are under 3.6e-7\n",
		    (unsigned long long)v.mx_flushed);
	if (!rc) {
		rc = coli_io_writer_commit(v.w); /* frees w in every case */
		v.w = NULL;
		if (rc)
			snprintf(errbuf, errlen, "%s", coli_io_errmsg());
	}
out:
	if (rc && !errbuf[0])
		snprintf(errbuf, errlen, "%s: conversion failed: %s", o->hf_dir, strerror(-rc));
	if (v.w)
		coli_io_writer_abort(v.w);
	coli_cpu_pool_destroy(v.pool);
	free(v.slots);
	free(v.el);
	free(v.part_seen);
	free(v.jobs);
	free(v.fp8_scale);
	coli_convert_hf_free(&v.hf);
	return rc;
}
