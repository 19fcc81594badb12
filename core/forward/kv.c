/*
 * core/forward/kv.c — the host KV cache (core/forward/kv.h): its allocation
 * through mem/ on the engine's NUMA node, the token ids beside it, the
 * forward's stores into it, the typed views attention reads it through and
 * the copy of a prefix's rows from one slot to another (core/seq.c), each
 * addressed by a sequence slot (slot s: the s-th [n_layers][ctx] block).
 * An MLA model (cfg.kv_lora) caches one row a token and layer, [c_kv
 * (kv_lora) || k_pe (rope_dim)] in kcache, and has no vcache.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"
#include "core/forward/kv.h"
#include "cpu/cpu.h"
#include "mem/mem.h"

int coli_kv_types_parse(const char *s, int *kt, int *vt)
{
	char a[8];
	const char *comma = strchr(s, ',');
	size_t n = comma ? (size_t)(comma - s) : strlen(s);

	if (n >= sizeof(a))
		return -EINVAL;
	memcpy(a, s, n);
	a[n] = 0;
	*kt = coli_kv_type_parse(a);
	*vt = comma ? coli_kv_type_parse(comma + 1) : *kt;
	return *kt < 0 || *vt < 0 ? -EINVAL : 0;
}

/* Values a row, dims a q8 scale, scales a row. */
static void shape(const struct coli_model_config *c, int *n, int *seg, int *nseg)
{
	*n = c->kv_lora ? c->kv_lora + c->rope_dim : c->n_kv_heads * c->head_dim;
	*seg = c->kv_lora ? c->kv_lora : c->head_dim;
	*nseg = (*n + *seg - 1) / *seg;
}

size_t coli_kv_token_bytes(const struct coli_model_config *c, int kt, int vt)
{
	int n, seg, nseg;

	shape(c, &n, &seg, &nseg);
	return coli_kv_row_bytes(kt, n, nseg) + (c->kv_lora ? 0 : coli_kv_row_bytes(vt, n, nseg));
}

int coli_kv_alloc(struct coli_kv *kv, const struct coli_model_config *c, int n_seq, int ctx, int kt,
                  int vt, int node)
{
	size_t rows = (size_t)n_seq * c->n_layers * ctx;
	int nseg, ok;

	shape(c, &kv->n, &kv->seg, &nseg);
	kv->ctx = ctx;
	kv->n_seq = n_seq;
	kv->n_layers = c->n_layers;
	kv->kt = kt;
	kv->vt = c->kv_lora ? kt : vt;
	kv->krow = coli_kv_row_bytes(kt, kv->n, nseg);
	kv->vrow = c->kv_lora ? 0 : coli_kv_row_bytes(vt, kv->n, nseg);
	kv->bytes = kv->krow * rows;
	kv->vbytes = kv->vrow * rows;
	kv->kcache = coli_mem_alloc(kv->bytes, node);
	kv->vcache = kv->vbytes ? coli_mem_alloc(kv->vbytes, node) : NULL;
	kv->seq = calloc((size_t)n_seq, sizeof(*kv->seq));
	ok = kv->kcache && (kv->vcache || !kv->vbytes) && kv->seq;
	for (int s = 0; ok && s < n_seq; s++)
		ok = (kv->seq[s].hist = calloc((size_t)ctx, sizeof(int))) != NULL;
	return ok ? 0 : -ENOMEM;
}

void coli_kv_free(struct coli_kv *kv)
{
	if (kv->kcache)
		coli_mem_free(kv->kcache, kv->bytes);
	if (kv->vcache)
		coli_mem_free(kv->vcache, kv->vbytes);
	for (int s = 0; kv->seq && s < kv->n_seq; s++)
		free(kv->seq[s].hist);
	free(kv->seq);
	memset(kv, 0, sizeof(*kv));
}

/* Rows before slot seq's layer l position pos. */
static size_t row_of(const struct coli_kv *kv, int seq, int l, int pos)
{
	return ((size_t)seq * kv->n_layers + l) * kv->ctx + pos;
}

void coli_kv_append(struct coli_kv *kv, int seq, int l, int pos0, int T, const float *k,
                    const float *v)
{
	char *kc = (char *)kv->kcache + row_of(kv, seq, l, pos0) * kv->krow;
	char *vc = kv->vcache ? (char *)kv->vcache + row_of(kv, seq, l, pos0) * kv->vrow : NULL;

	for (int t = 0; t < T; t++) {
		coli_kv_row_store(kv->kt, kc + t * kv->krow, k + (size_t)t * kv->n, kv->n, kv->seg);
		if (vc && v)
			coli_kv_row_store(kv->vt, vc + t * kv->vrow, v + (size_t)t * kv->n, kv->n,
			                  kv->seg);
	}
}

void coli_kv_copy_rows(struct coli_kv *kv, int from, int to, int r0, int r1)
{
	for (int l = 0; l < kv->n_layers && r1 > r0; l++) {
		size_t src = row_of(kv, from, l, r0), dst = row_of(kv, to, l, r0);

		memcpy((char *)kv->kcache + dst * kv->krow, (char *)kv->kcache + src * kv->krow,
		       (size_t)(r1 - r0) * kv->krow);
		if (kv->vcache)
			memcpy((char *)kv->vcache + dst * kv->vrow,
			       (char *)kv->vcache + src * kv->vrow, (size_t)(r1 - r0) * kv->vrow);
	}
}

/* Bytes into a row of head g's first value (type t), and from there to its
 * q8 scale. */
static void head_offsets(const struct coli_kv *kv, int t, int g, int hd, size_t *off, int *soff)
{
	size_t esz = t == COLI_KV_F32 ? 4 : t == COLI_KV_BF16 ? 2 : 1;

	*off = (size_t)g * hd * esz;
	*soff = (int)((((size_t)kv->n + 3) & ~(size_t)3) + 4 * (size_t)g - *off);
}

void coli_kv_group_rows(const struct coli_kv *kv, int seq, int l, int g, int hd, int k0,
                        struct coli_attn_group *a)
{
	const char *kc = (const char *)kv->kcache + row_of(kv, seq, l, k0) * kv->krow;
	const char *vc =
	    kv->vcache ? (const char *)kv->vcache + row_of(kv, seq, l, k0) * kv->vrow : kc;
	size_t ko, vo;

	head_offsets(kv, kv->kt, g, hd, &ko, &a->ksoff);
	head_offsets(kv, kv->vt, g, hd, &vo, &a->vsoff);
	a->K = kc + ko;
	a->V = vc + vo;
	a->kt = kv->kt, a->vt = kv->vt;
	a->kstride = kv->krow;
	a->vstride = kv->vcache ? kv->vrow : kv->krow;
	a->seg = kv->seg;
}
