/*
 * core/model/convert.c — Hugging Face safetensors -> .coli, in bounded memory;
 * a GGUF is read as a checkpoint whose tensors may be ggml blocks
 * (core/model/convert_gguf.c).
 *
 * Three passes, none of which holds more than one chunk of weights:
 *
 *   1. plan:  from the config alone, every canonical tensor (names at the top
 *      of core/coli.h) and every MoE layer's slab geometry is given to the
 *      writer, which lays the file out.
 *   2. map:   every tensor of every shard header is matched to a destination
 *      ("job"): a canonical tensor, or one part (gate/up/down) of one expert
 *      slab. A fused 3-D expert tensor becomes E (down_proj) or 2E
 *      (gate_up_proj) jobs. Shapes are checked against the config; unknown
 *      names, duplicates and anything still unfilled afterwards are errors
 *      naming the Hugging Face tensor.
 *   3. write: shard by shard, jobs in file-offset order, each job's rows are
 *      read as stored in chunks of at most CHUNK_BYTES of fp32, widened to
 *      fp32 and converted to the destination format (coli_quantize_rows:
 *      bf16, q8_0, q4_0, f32; a chunk's rows split over a thread pool,
 *      --threads) and pwritten at their final offsets. A quantized matrix
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
 * converted) plus headers and the job table: independent of model size
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

#include "core/model/convert_internal.h"
#include "cpu/cpu.h"

#define CHUNK_BYTES (32u << 20) /* fp32 bytes per read chunk */

enum dst_kind { DST_TENSOR, DST_SLAB };
enum { PART_GATE, PART_UP, PART_DOWN };

struct job {
	int shard;
	const struct coli_st_tensor *src;
	uint64_t src_row0; /* first source row (of `cols` elements) */
	uint64_t rows;     /* destination matrix rows == rows copied */
	uint64_t cols;
	enum dst_kind kind;
	int idx; /* writer tensor index, or expert layer index */
	uint32_t expert;
	uint64_t base; /* byte offset of the matrix inside the tensor/slab */
	enum coli_dtype dtype;
	int ggml; /* a GGUF block type (read and widened by blocks), or -1 */
};

/* One canonical tensor: what we expect and whether a source filled it. */
struct slot {
	char name[COLI_TENSOR_NAME_MAX];
	int ndim;
	uint64_t shape[2];
	enum coli_dtype dtype;
	int idx;             /* writer index */
	const char *hf_seen; /* source name once mapped */
};

struct cv {
	const struct coli_convert_opts *o;
	struct coli_convert_hf hf;
	struct coli_model_config *c;
	coli_io_writer_t *w;
	struct slot *slots;
	int n_slots;
	struct coli_expert_layer *el; /* [n_el] */
	int n_el;
	int layer_el[COLI_MAX_LAYERS]; /* expert layer index per layer, -1 dense */
	unsigned char *part_seen;      /* [n_el][n_experts][3] */
	struct job *jobs;
	size_t n_jobs, cap_jobs;
	char *errbuf;
	size_t errlen;
	int n_fb;              /* matrices (expert layers: one each) kept as bf16 */
	char fb[256];          /* the first of their names, for the line that says so */
	coli_cpu_pool_t *pool; /* converts a chunk's rows in parallel (--threads) */
	int mtp_skipped;       /* tensors of next-token-prediction layers left out */
	/* progress */
	uint64_t done, total;
	struct timespec t0;
	double last_draw;
};

void coli_convert_opts_init(struct coli_convert_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->quant = COLI_DTYPE_BF16;
}

/* The dtype of a matrix of `cols` columns: the requested quant, or bf16 when
 * its columns are not whole blocks (llama.cpp's quantizer likewise keeps
 * such tensors in a wider type); bf16 is exact for bf16 sources. */
static enum coli_dtype mat_dtype(struct cv *v, const char *name, uint64_t cols)
{
	size_t k = strlen(v->fb);

	if (!coli_dtype_is_quant(v->c->quant) || cols % COLI_QBLOCK == 0)
		return v->c->quant;
	if (k + strlen(name) + 8 < sizeof(v->fb))
		snprintf(v->fb + k, sizeof(v->fb) - k, " %s", name);
	else if (!strstr(v->fb, " ..."))
		snprintf(v->fb + k, sizeof(v->fb) - k, " ...");
	v->n_fb++;
	return COLI_DTYPE_BF16;
}

static int add_slot(struct cv *v, const char *name, int ndim, uint64_t d0, uint64_t d1, int mat)
{
	struct slot *s = &v->slots[v->n_slots];

	snprintf(s->name, sizeof(s->name), "%s", name);
	s->ndim = ndim;
	s->shape[0] = d0;
	s->shape[1] = d1;
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
		SLOT("attn_q", 2, qd, H, 1);
		SLOT("attn_k", 2, kvd, H, 1);
		SLOT("attn_v", 2, kvd, H, 1);
		SLOT("attn_o", 2, H, qd, 1);
		if (c->qkv_bias) {
			SLOT("attn_q_bias", 1, qd, 0, 0);
			SLOT("attn_k_bias", 1, kvd, 0, 0);
			SLOT("attn_v_bias", 1, kvd, 0, 0);
		}
		if (c->qk_norm) {
			SLOT("attn_q_norm", 1, qn, 0, 0);
			SLOT("attn_k_norm", 1, kn, 0, 0);
		}
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
		e->dtype = mat_dtype(v, n, H % COLI_QBLOCK ? H : (uint64_t)c->moe_inter);
		e->hidden = (uint32_t)H;
		e->inter = (uint32_t)c->moe_inter;
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

/* Bytes of n elements (whole rows) of a job's source as stored. */
static uint64_t src_bytes(const struct job *j, uint64_t n)
{
	return j->ggml >= 0 ? coli_convert_gguf_bytes((uint32_t)j->ggml, n)
	                    : n * coli_io_st_dtype_bytes(j->src->dtype);
}

static int add_job(struct cv *v, const struct job *j)
{
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
	d->ggml = v->hf.ggml ? v->hf.ggml[d->src - v->hf.st[d->shard].t] : -1;
	v->total += src_bytes(d, d->rows * d->cols);
	return 0;
}

static int shape_error(struct cv *v, int shard, const struct coli_st_tensor *t, const char *want)
{
	char got[96] = "";
	size_t k = 0;

	for (int i = 0; i < t->ndim && k < sizeof(got) - 24; i++)
		k += (size_t)snprintf(got + k, sizeof(got) - k, "%s%llu", i ? ", " : "",
		                      (unsigned long long)t->shape[i]);
	snprintf(v->errbuf, v->errlen, "%s: tensor '%s' has shape [%s], but config.json implies %s",
	         v->hf.shards[shard], t->name, got, want);
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
		         "%s: tensor '%s' is an expert weight, but config.json makes layer %d "
		         "dense",
		         v->hf.shards[shard], t->name, l);
		return -EINVAL;
	}
	if (!fused && (uint64_t)expert >= E) {
		snprintf(v->errbuf, v->errlen,
		         "%s: tensor '%s': expert %d, but config.json has %llu experts",
		         v->hf.shards[shard], t->name, expert, (unsigned long long)E);
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
			    .dtype = v->el[li].dtype,
			};

			if (*seen) {
				snprintf(
				    v->errbuf, v->errlen,
				    "%s: tensor '%s' supplies expert %llu of layer %d a second "
				    "time",
				    v->hf.shards[shard], t->name, (unsigned long long)e, l);
				return -EINVAL;
			}
			*seen = 1;
			rc = add_job(v, &j);
			if (rc)
				return rc;
		}
	}
	return 0;
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
    /* glm4_moe (appended: check_complete names mixtral's router by index) */
    {"mlp.gate.e_score_correction_bias", "router_bias"},
    {"mlp.shared_experts.gate_proj.weight", "shexp_gate"},
    {"mlp.shared_experts.up_proj.weight", "shexp_up"},
    {"mlp.shared_experts.down_proj.weight", "shexp_down"},
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

static int map_tensor(struct cv *v, int shard, const struct coli_st_tensor *t)
{
	const char *nm = t->name, *rest;
	char coli[COLI_TENSOR_NAME_MAX] = "", want[64];
	int expert, part, l = -1;
	struct slot *s = NULL;

	if (t->dtype == COLI_ST_OTHER && !v->hf.ggml) {
		snprintf(v->errbuf, v->errlen,
		         "%s: tensor '%s' has dtype %s; only F32, F16 and BF16 checkpoints can be "
		         "converted",
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
				if (!strcmp(rest, g_layer_names[k].hf))
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
		         "%s: tensor '%s' is not part of a %s model with this config.json "
		         "(unknown name, or a layer/bias/norm the config does not have)",
		         v->hf.shards[shard], nm, v->c->model_type);
		return -EINVAL;
	}
	if (s->hf_seen) {
		snprintf(v->errbuf, v->errlen, "%s: tensor '%s' appears twice (also as '%s')",
		         v->hf.shards[shard], nm, s->hf_seen);
		return -EINVAL;
	}
	if (s->ndim == 1)
		snprintf(want, sizeof(want), "[%llu]", (unsigned long long)s->shape[0]);
	else
		snprintf(want, sizeof(want), "[%llu, %llu]", (unsigned long long)s->shape[0],
		         (unsigned long long)s->shape[1]);
	if (t->ndim != s->ndim || t->shape[0] != s->shape[0] ||
	    (s->ndim == 2 && t->shape[1] != s->shape[1]))
		return shape_error(v, shard, t, want);
	s->hf_seen = t->name;
	struct job j = {
	    .shard = shard,
	    .src = t,
	    .rows = s->ndim == 2 ? s->shape[0] : 1,
	    .cols = s->ndim == 2 ? s->shape[1] : s->shape[0],
	    .kind = DST_TENSOR,
	    .idx = s->idx,
	    .dtype = s->dtype,
	};
	return add_job(v, &j);
}

/* After mapping: anything the config needs that no shard supplied, named
 * the way the checkpoint's architecture spells it. */
static int check_complete(struct cv *v)
{
	static const char *const pn[] = {"gate_proj", "up_proj", "down_proj"};
	static const char *const mx[] = {"w1", "w3", "w2"};
	const char *where = v->hf.index_path ? v->hf.index_path : v->hf.shards[0];
	int mixtral = v->c->arch == COLI_ARCH_MIXTRAL;

	for (int i = 0; i < v->n_slots; i++) {
		const char *cn = v->slots[i].name, *hf = NULL;
		char buf[160];
		int l = -1, off = 0;

		if (v->slots[i].hf_seen)
			continue;
		if (!strcmp(cn, "tok_embd"))
			hf = "model.embed_tokens.weight";
		else if (!strcmp(cn, "out_norm"))
			hf = "model.norm.weight";
		else if (!strcmp(cn, "lm_head"))
			hf = "lm_head.weight";
		else if (sscanf(cn, "blk.%d.%n", &l, &off) == 1 && off)
			for (size_t k = 0; k < sizeof(g_layer_names) / sizeof(g_layer_names[0]);
			     k++)
				if (!strcmp(cn + off, g_layer_names[k].coli) &&
				    (!mixtral || strcmp(cn + off, "router") || k == 12)) {
					snprintf(buf, sizeof(buf), "model.layers.%d.%s", l,
					         g_layer_names[k].hf);
					hf = buf;
					break;
				}
		snprintf(v->errbuf, v->errlen, "%s: missing tensor %s (coli's %s)", where,
		         hf ? hf : cn, cn);
		return -ENOENT;
	}
	for (int li = 0; li < v->n_el; li++)
		for (uint32_t e = 0; e < v->el[li].n_experts; e++)
			for (int p = 0; p < 3; p++)
				if (!v->part_seen[((size_t)li * v->el[li].n_experts + e) * 3 + p]) {
					snprintf(
					    v->errbuf, v->errlen,
					    "%s: missing tensor model.layers.%u.%s.%u.%s.weight",
					    where, v->el[li].layer,
					    mixtral ? "block_sparse_moe.experts" : "mlp.experts", e,
					    mixtral ? mx[p] : pn[p]);
					return -ENOENT;
				}
	return 0;
}

static int cmp_job(const void *a, const void *b)
{
	const struct job *x = a, *y = b;
	uint64_t ox = x->src->offset + src_bytes(x, x->src_row0 * x->cols);
	uint64_t oy = y->src->offset + src_bytes(y, y->src_row0 * y->cols);

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
	const void *raw; /* the rows as stored, or NULL: `in` holds them already */
	float *in;
	int rows, cols;
	unsigned char *out;
	int rc; /* the first failure, any task's */
};

static void quant_task(void *arg, int t, int n_tasks)
{
	struct quant_job *q = arg;
	int r0 = (int)((long)q->rows * t / n_tasks), r1 = (int)((long)q->rows * (t + 1) / n_tasks);
	int rc = 0;

	if (q->raw) /* widened here, by rows: the read itself stays one pread */
		rc = coli_convert_src_widen(q->ggml, q->src_dtype, q->raw, (uint64_t)r0 * q->cols,
		                            (uint64_t)r1 * q->cols, q->in);
	rc = rc ? rc
	        : coli_quantize_rows(q->dtype, q->in, q->rows, q->cols, q->out, COLI_ROUND_MSE, r0,
	                             r1);

	if (rc) /* any task's error will do: the message names the chunk */
		__atomic_store_n(&q->rc, rc, __ATOMIC_RELAXED);
}

/* Convert rows [r0, r0+n) of a job's destination from `raw` (as stored; NULL:
 * already fp32 in `in`) and write them. */
static int write_rows(struct cv *v, const struct job *j, uint64_t r0, uint64_t n, const void *raw,
                      float *in, unsigned char *out)
{
	uint64_t qrow, srow, pieces[2][2]; /* {offset, bytes} */
	struct quant_job q = {j->dtype, j->src->dtype, j->ggml, raw, in,
	                      (int)n,   (int)j->cols,  out,     0};
	int np = 1, rc, tasks = coli_cpu_pool_threads(v->pool);

	/* the pool's barrier orders the tasks' writes of `out` before the pwrite */
	coli_cpu_pool_run(v->pool, quant_task, &q, (int)n < tasks ? (int)n : tasks);
	rc = q.rc;
	if (rc) {
		snprintf(v->errbuf, v->errlen,
		         "%s: tensor '%s' rows %llu..%llu: cannot convert to %s (NaN or Inf in "
		         "the weights?)",
		         v->hf.shards[j->shard], j->src->name,
		         (unsigned long long)(j->src_row0 + r0),
		         (unsigned long long)(j->src_row0 + r0 + n), coli_dtype_name(j->dtype));
		return rc;
	}
	if (coli_dtype_is_quant(j->dtype)) {
		qrow = j->dtype == COLI_DTYPE_Q8_0 ? j->cols : j->cols / 2;
		srow = j->cols / COLI_QBLOCK * 2;
		pieces[0][0] = j->base + r0 * qrow;
		pieces[0][1] = n * qrow;
		pieces[1][0] = j->base + j->rows * qrow + r0 * srow;
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

/* Pass 3: every job, shard by shard, in source-offset order. */
static int write_all(struct cv *v)
{
	size_t cap = 0;
	float *in = NULL;
	unsigned char *out = NULL;
	uint16_t *raw = NULL;   /* a chunk of a 2-byte source (or GGUF blocks) as stored */
	int rc = 0, narrow = 0; /* some source is not F32 (an F32 one reads into `in`) */

	qsort(v->jobs, v->n_jobs, sizeof(*v->jobs), cmp_job);
	for (size_t k = 0; k < v->n_jobs; k++)
		narrow |= v->jobs[k].src->dtype != COLI_ST_F32; /* GGUF blocks: < 2 bytes each */
	clock_gettime(CLOCK_MONOTONIC, &v->t0);
	for (size_t k = 0; k < v->n_jobs && !rc; k++) {
		const struct job *j = &v->jobs[k];
		const struct coli_st_file *f = &v->hf.st[j->shard];
		uint64_t chunk = CHUNK_BYTES / 4 / j->cols;

		if (!chunk)
			chunk = 1;
		if (chunk > j->rows)
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
		for (uint64_t r0 = 0; r0 < j->rows && !rc; r0 += chunk) {
			uint64_t n = j->rows - r0 < chunk ? j->rows - r0 : chunk;

			const int wide = j->src->dtype == COLI_ST_F32;

			rc = coli_convert_src_read(f, j->src, j->ggml, (j->src_row0 + r0) * j->cols,
			                           n * j->cols, wide ? (void *)in : (void *)raw,
			                           v->errbuf, v->errlen);
			if (rc)
				break;
			rc = write_rows(v, j, r0, n, wide ? NULL : raw, in, out);
			v->done += src_bytes(j, n * j->cols);
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
	    o->quant != COLI_DTYPE_Q4_0) {
		snprintf(errbuf, errlen, "quant %s is not a conversion target (bf16, q8, q4)",
		         coli_dtype_name(o->quant));
		return -EINVAL;
	}
	rc = coli_convert_gguf_is(o->hf_dir)
	         ? coli_convert_gguf_load(o, &v.hf, errbuf, errlen)
	         : coli_convert_hf_load(o->hf_dir, o->quant, &v.hf, errbuf, errlen);
	if (rc)
		return rc;
	v.c = &v.hf.cfg;
	if (!v.hf.ggml) /* a GGUF's one shard is open already */
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
	for (int s = 0; s < v.hf.n_shards && !rc; s++)
		for (int i = 0; i < v.hf.st[s].n && !rc; i++)
			rc = map_tensor(&v, s, &v.hf.st[s].t[i]);
	if (!rc && v.mtp_skipped)
		fprintf(stderr,
		        "coli convert: skipping %d tensors of %d next-token-prediction layer(s) "
		        "(model.layers.%d and up): coli does not run them\n",
		        v.mtp_skipped, v.hf.n_mtp, v.c->n_layers);
	if (!rc)
		rc = check_complete(&v);
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
	coli_convert_hf_free(&v.hf);
	return rc;
}
