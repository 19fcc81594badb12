/*
 * core/convert/convert_fp8.c — block-scaled FP8 checkpoints as a converter
 * source (DeepSeek-V3's layout, transformers' "fp8" quant_method).
 *
 * config.json says so:
 *
 *   "quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
 *                           "activation_scheme": "dynamic",
 *                           "weight_block_size": [128, 128]}
 *
 * and every quantized linear weight W [.., R, C] is stored F8_E4M3 (or
 * F8_E5M2) next to a tensor "<W's name>_scale_inv" [.., ceil(R/br),
 * ceil(C/bc)] of F32 (or BF16/F16, or F8_E8M0 with scale_fmt "ue8m0"):
 *
 *   W[.., r, c] = fp8(W[.., r, c]) * scale_inv[.., r / br, c / bc]
 *
 * blocks of br x bc = weight_block_size (edge blocks partial; a 3-D tensor
 * restarts its blocks at each leading index; weight_block_size null: one
 * scale per matrix). The product is one fp32 multiply, rounded to nearest
 * even, as transformers dequantizes to float32; --quant then applies to it
 * as to any fp32 row (bf16 rounds it once more: the same bits as a bf16
 * checkpoint dequantized that way). Embeddings, norms, routers and lm_head
 * stay BF16/F32 in the releases and are read as usual.
 *
 * The scale tensors are consumed, never mapped: a job of an F8 source holds
 * its scale tensor (coli_convert_fp8_bind), and each chunk of rows reads only
 * the scale rows its rows fall in (coli_convert_fp8_chunk, into a buffer the
 * conversion owns: a few floats per 128 rows), so memory stays a chunk's.
 * The fp8 bytes travel in the raw buffer a 2-byte source would, widened by the
 * pool's tasks (coli_convert_fp8_widen).
 *
 * Refused before anything is written: any other quant_method (naming it),
 * static activation scales, FP4 experts, a block size that is not two
 * positive integers; at map time an F8 tensor without an fp8
 * quantization_config, a missing scale tensor or one of the wrong shape or
 * dtype (naming it); at write time a NaN encoding or a non-finite product
 * (naming the tensor and its rows).
 *
 * --quant left out (opts->quant_auto): an FP8 checkpoint becomes q8 — 8 bits
 * a weight as published, at Q8_0's error (docs/quant.md).
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/convert/convert_job.h"

#define SCALE_SUFFIX "_scale_inv"

static int is_f8(enum coli_st_dtype d)
{
	return d == COLI_ST_F8_E4M3 || d == COLI_ST_F8_E5M2;
}

/* A positive integer (jansson may hold it as a real: JSON_DECODE_INT_AS_REAL). */
static int block_dim(const json_t *v, uint64_t *out)
{
	double d = json_is_integer(v) ? (double)json_integer_value(v)
	           : json_is_real(v)  ? json_real_value(v)
	                              : 0;

	if (!(d >= 1 && d <= 1 << 30) || d != (double)(uint64_t)d)
		return -1;
	*out = (uint64_t)d;
	return 0;
}

/* A string key of qc that, when present, must be one of `ok` (case-insensitive). */
static int check_str(const json_t *qc, const char *key, const char *const *ok, int n_ok,
                     const char *path, const char *what, char *errbuf, size_t errlen)
{
	const char *s = json_string_value(json_object_get(qc, key));

	if (!json_object_get(qc, key) || json_is_null(json_object_get(qc, key)))
		return 0;
	for (int i = 0; s && i < n_ok; i++)
		if (!strcasecmp(s, ok[i]))
			return 0;
	return coli_convert_errf(errbuf, errlen, -ENOTSUP,
	                         "%s: quantization_config.%s %s%s%s is not supported (%s)", path,
	                         key, s ? "'" : "", s ? s : "(not a string)", s ? "'" : "", what);
}

/* quantization_config (an object) -> h->fp8*. "fmt" ("e4m3", or spelled
 * "float8_e4m3fn") is not read: each tensor's dtype says which FP8 it is. */
static int read_qc(struct coli_convert_hf *h, const json_t *qc, const char *path, char *errbuf,
                   size_t errlen)
{
	static const char *const dyn[] = {"dynamic"}, *const sfmt[] = {"float", "ue8m0"},
	                         *const exp[] = {"fp8"};
	const char *m = json_string_value(json_object_get(qc, "quant_method"));
	const json_t *bs = json_object_get(qc, "weight_block_size");
	int rc;

	if (!m || strcasecmp(m, "fp8"))
		return coli_convert_errf(
		    errbuf, errlen, -ENOTSUP,
		    "%s: quantization_config.quant_method '%s' is not supported: coli converts "
		    "unquantized checkpoints (F32, F16, BF16) and block-scaled FP8 ones "
		    "(quant_method \"fp8\": F8_E4M3 weights with <name>_scale_inv); use the "
		    "model's BF16 or FP8 release, or a GGUF of it",
		    path, m ? m : "(none)");
	if ((rc = check_str(qc, "activation_scheme", dyn, 1, path,
	                    "coli reads dynamic FP8: static activation scales are not read", errbuf,
	                    errlen)) ||
	    (rc = check_str(qc, "scale_fmt", sfmt, 2, path, "scales are float or ue8m0", errbuf,
	                    errlen)) ||
	    (rc = check_str(qc, "expert_dtype", exp, 1, path, "coli reads fp8 experts, not fp4",
	                    errbuf, errlen)))
		return rc;
	h->fp8_block[0] = h->fp8_block[1] = 128; /* FineGrainedFP8Config's default */
	if (json_is_null(bs)) {
		h->fp8_block[0] = h->fp8_block[1] = 0; /* one scale per matrix */
	} else if (bs && (json_array_size(bs) != 2 ||
	                  block_dim(json_array_get(bs, 0), &h->fp8_block[0]) ||
	                  block_dim(json_array_get(bs, 1), &h->fp8_block[1]))) {
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s: quantization_config.weight_block_size must be two "
		                         "positive integers [rows, cols] (or null)",
		                         path);
	}
	h->fp8 = 1;
	return 0;
}

/* --quant left out: q8, said on stderr; the CONFIG section follows. */
static int pick_quant(struct coli_convert_hf *h, char *errbuf, size_t errlen)
{
	char *cjson;

	h->cfg.quant = COLI_DTYPE_Q8_0;
	cjson = coli_config_format(&h->cfg);
	if (!cjson)
		return coli_convert_errf(errbuf, errlen, -ENOMEM, "out of memory");
	free(h->section[COLI_SECTION_CONFIG]);
	h->section[COLI_SECTION_CONFIG] = cjson;
	h->section_bytes[COLI_SECTION_CONFIG] = strlen(cjson);
	fprintf(stderr, "coli convert: %s: %s checkpoint: --quant q8 (%spass --quant to choose)\n",
	        h->dir, h->mxfp4 ? "MXFP4" : "FP8",
	        h->mxfp4 ? "its MXFP4 experts exactly, at twice their bytes; " : "");
	return 0;
}

int coli_convert_fp8_load(const struct coli_convert_opts *o, struct coli_convert_hf *h,
                          char *errbuf, size_t errlen)
{
	const char *text = h->section[COLI_SECTION_HF_CONFIG];
	char *path;
	json_error_t jerr;
	json_t *cfg, *qc;
	int rc = 0;

	if (h->ggml || !text)
		return 0; /* a GGUF: its types say all */
	path = coli_convert_path_join(h->dir, "config.json");
	if (!path)
		return coli_convert_errf(errbuf, errlen, -ENOMEM, "out of memory");
	/* read before (convert_hf.c): valid JSON, maybe with integers past 64 bits */
	cfg = json_loadb(text, h->section_bytes[COLI_SECTION_HF_CONFIG], JSON_DECODE_INT_AS_REAL,
	                 &jerr);
	qc = json_object_get(cfg, "quantization_config");
	if (!cfg)
		rc = coli_convert_errf(errbuf, errlen, -EINVAL, "%s: not JSON (line %d: %s)", path,
		                       jerr.line, jerr.text);
	else if (qc && !json_is_null(qc) && !json_is_object(qc))
		rc = coli_convert_errf(errbuf, errlen, -EINVAL,
		                       "%s: quantization_config is not an object", path);
	else if (json_is_object(qc) &&
	         !strcasecmp(json_string_value(json_object_get(qc, "quant_method")) ?: "", "mxfp4"))
		rc = coli_convert_mxfp4_load(h, qc, path, errbuf, errlen); /* convert_gptoss.c */
	else if (json_is_object(qc))
		rc = read_qc(h, qc, path, errbuf, errlen);
	if (!rc && (h->fp8 || h->mxfp4) && o->quant_auto)
		rc = pick_quant(h, errbuf, errlen);
	json_decref(cfg);
	free(path);
	return rc;
}

int coli_convert_fp8_screen(struct cv *v, int shard, const struct coli_st_tensor *t)
{
	size_t n = strlen(t->name), k = strlen(SCALE_SUFFIX);

	if (is_f8(t->dtype) && !v->hf.fp8)
		return coli_convert_errf(v->errbuf, v->errlen, -ENOTSUP,
		                         "%s: tensor '%s' has dtype %s, but config.json has no "
		                         "quantization_config with quant_method \"fp8\" (coli "
		                         "reads FP8 weights only with their block scales)",
		                         v->hf.shards[shard], t->name, t->dtype_name);
	return v->hf.fp8 && n > k && !strcmp(t->name + n - k, SCALE_SUFFIX);
}

/* "<name>_scale_inv": the tensor after t in its shard (headers list names
 * sorted), else anywhere in that shard, else in any shard. */
static const struct coli_st_tensor *find_scale(const struct cv *v, int shard,
                                               const struct coli_st_tensor *t, int *where)
{
	const struct coli_st_file *f = &v->hf.st[shard];
	size_t n = strlen(t->name);
	char *want = malloc(n + sizeof(SCALE_SUFFIX));
	const struct coli_st_tensor *s = NULL;

	if (!want)
		return NULL;
	memcpy(want, t->name, n);
	memcpy(want + n, SCALE_SUFFIX, sizeof(SCALE_SUFFIX));
	*where = shard;
	if (t + 1 < f->t + f->n && !strcmp(t[1].name, want))
		s = t + 1;
	if (!s)
		s = coli_io_st_find(f, want);
	for (int i = 0; !s && i < v->hf.n_shards; i++)
		if ((s = coli_io_st_find(&v->hf.st[i], want)))
			*where = i;
	free(want);
	return s;
}

/* "[a, b, c]" of a tensor's shape. */
static void shape_str(const uint64_t *d, int nd, char *buf, size_t len)
{
	size_t k = (size_t)snprintf(buf, len, "[");

	for (int i = 0; i < nd && k < len; i++)
		k += (size_t)snprintf(buf + k, len - k, "%s%llu", i ? ", " : "",
		                      (unsigned long long)d[i]);
	if (k < len)
		snprintf(buf + k, len - k, "]");
}

int coli_convert_fp8_bind(struct cv *v, struct job *j)
{
	const struct coli_st_tensor *t = j->src, *s;
	const char *sh = v->hf.shards[j->shard];
	uint64_t want[4], numel = 1, R, C;
	char got[96], need[96];
	int nd = t->ndim, ok;

	if (!is_f8(t->dtype))
		return 0; /* F8 without an fp8 config: refused by _screen */
	if (nd < 2)
		return coli_convert_errf(v->errbuf, v->errlen, -ENOTSUP,
		                         "%s: tensor '%s' is %s with %d dimension(s): coli reads "
		                         "FP8 matrices only",
		                         sh, t->name, t->dtype_name, nd);
	s = find_scale(v, j->shard, t, &j->scale_shard);
	if (!s)
		return coli_convert_errf(
		    v->errbuf, v->errlen, -ENOENT,
		    "%s: missing tensor '%s" SCALE_SUFFIX "' (the block scales of FP8 tensor '%s')",
		    v->hf.index_path ? v->hf.index_path : sh, t->name, t->name);
	if (s->dtype != COLI_ST_F32 && s->dtype != COLI_ST_BF16 && s->dtype != COLI_ST_F16 &&
	    s->dtype != COLI_ST_F8_E8M0)
		return coli_convert_errf(v->errbuf, v->errlen, -ENOTSUP,
		                         "%s: tensor '%s' has dtype %s; FP8 block scales are read "
		                         "as F32, BF16, F16 or F8_E8M0",
		                         v->hf.shards[j->scale_shard], s->name, s->dtype_name);
	R = t->shape[nd - 2], C = t->shape[nd - 1];
	memcpy(want, t->shape, sizeof(want));
	want[nd - 2] = v->hf.fp8_block[0] ? (R + v->hf.fp8_block[0] - 1) / v->hf.fp8_block[0] : 1;
	want[nd - 1] = v->hf.fp8_block[1] ? (C + v->hf.fp8_block[1] - 1) / v->hf.fp8_block[1] : 1;
	ok = s->ndim == nd;
	for (int i = 0; i < s->ndim; i++) {
		numel *= s->shape[i];
		ok = ok && s->shape[i] == want[i];
	}
	if (ok || (!v->hf.fp8_block[0] && !v->hf.fp8_block[1] && nd == 2 && numel == 1)) {
		j->scale = s;
		return 0;
	}
	shape_str(s->shape, s->ndim, got, sizeof(got));
	shape_str(want, nd, need, sizeof(need));
	return coli_convert_errf(v->errbuf, v->errlen, -EINVAL,
	                         "%s: tensor '%s' has shape %s, but FP8 tensor '%s' in blocks of "
	                         "[%llu, %llu] (quantization_config.weight_block_size) needs %s",
	                         v->hf.shards[j->scale_shard], s->name, got, t->name,
	                         (unsigned long long)v->hf.fp8_block[0],
	                         (unsigned long long)v->hf.fp8_block[1], need);
}

int coli_convert_fp8_chunk(struct cv *v, const struct job *j, uint64_t r0, uint64_t n,
                           struct fp8_chunk *fc)
{
	const struct coli_st_tensor *t = j->src;
	uint64_t R = t->shape[t->ndim - 2], C = t->shape[t->ndim - 1];
	uint64_t sr0 = j->src_row0 + r0, e = sr0 / R, nrb, first, count;
	int rc;

	fc->rr0 = sr0 % R; /* a job's rows lie in one matrix: rr0 + n <= R */
	fc->br = v->hf.fp8_block[0] ? v->hf.fp8_block[0] : R;
	fc->bc = v->hf.fp8_block[1] ? v->hf.fp8_block[1] : C;
	nrb = (R + fc->br - 1) / fc->br;
	fc->ncb = (C + fc->bc - 1) / fc->bc;
	first = fc->rr0 / fc->br;
	count = ((fc->rr0 + n - 1) / fc->br - first + 1) * fc->ncb;
	if (count > v->fp8_cap) {
		float *p = realloc(v->fp8_scale, count * sizeof(*p));

		if (!p)
			return coli_convert_errf(v->errbuf, v->errlen, -ENOMEM, "out of memory");
		v->fp8_scale = p;
		v->fp8_cap = count;
	}
	rc = coli_io_st_read_range_f32(&v->hf.st[j->scale_shard], j->scale,
	                               (e * nrb + first) * fc->ncb, count, v->fp8_scale);
	if (rc)
		return coli_convert_errf(v->errbuf, v->errlen, rc, "%s", coli_io_errmsg());
	fc->scale = v->fp8_scale;
	return 0;
}

/* Thread rules: called by the pool's tasks on disjoint [i0, i1); reads fc. */
int coli_convert_fp8_widen(const struct fp8_chunk *fc, enum coli_st_dtype d, const void *src,
                           uint64_t cols, uint64_t i0, uint64_t i1, float *dst)
{
	coli_io_st_widen(d, src, i0, i1, dst); /* exact; a NaN encoding becomes NaN */
	for (uint64_t i = i0; i < i1;) {
		uint64_t r = i / cols, c = i % cols, end = i - c + cols < i1 ? i - c + cols : i1;
		const float *srow =
		    fc->scale + ((fc->rr0 + r) / fc->br - fc->rr0 / fc->br) * fc->ncb;

		for (; i < end; i++, c++) {
			float x = dst[i] * srow[c / fc->bc];

			if (!isfinite(x))
				return -EINVAL;
			dst[i] = x;
		}
	}
	return 0;
}
