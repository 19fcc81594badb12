/*
 * core/forward/kv.c — the host KV cache (core/forward/kv.h): the pool's
 * rows through mem/ on the engine's NUMA node, the slots' tables and token
 * ids (which block is whose: core/forward/kv_pool.c), the forward's stores into it, the typed views attention
 * reads it through and a block's copy-on-write, each addressed by a
 * sequence slot and a position (coli_kv_row: its block's row). An MLA
 * model (cfg.kv_lora) caches one row a token and layer, [c_kv (kv_lora) ||
 * k_pe (rope_dim)] in kcache, and has no vcache.
 *
 * The rows may be released while a dense device holds every layer's
 * (coli_kv_rows_drop) and allocated again when the dense part moves to the
 * CPU (coli_kv_rows_alloc, then rebuilt from the token ids); the tables and
 * the ids stay here throughout.
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
                  int vt, int n_blocks, int node)
{
	int nbs = coli_kv_blocks_of(ctx), nseg, ok;
	size_t rows;

	if (n_blocks <= 0)
		n_blocks = n_seq * nbs;
	rows = (size_t)n_blocks * COLI_KV_BLOCK * c->n_layers;
	shape(c, &kv->n, &kv->seg, &nseg);
	kv->node = node;
	kv->ctx = ctx;
	kv->n_seq = n_seq;
	kv->n_layers = c->n_layers;
	kv->n_blocks = n_blocks;
	kv->nbs = nbs;
	kv->kt = kt;
	kv->vt = c->kv_lora ? kt : vt;
	kv->krow = coli_kv_row_bytes(kt, kv->n, nseg);
	kv->vrow = c->kv_lora ? 0 : coli_kv_row_bytes(vt, kv->n, nseg);
	kv->bytes = kv->krow * rows;
	kv->vbytes = kv->vrow * rows;
	kv->kcache = coli_mem_alloc(kv->bytes, node);
	kv->vcache = kv->vbytes ? coli_mem_alloc(kv->vbytes, node) : NULL;
	kv->seq = calloc((size_t)n_seq, sizeof(*kv->seq));
	ok = kv->kcache && (kv->vcache || !kv->vbytes) && kv->seq && !coli_kv_pool_alloc(kv);
	for (int s = 0; ok && s < n_seq; s++) {
		kv->seq[s].held = 1; /* (an empty table, slot 0's until opened) */
		ok = (kv->seq[s].hist = calloc((size_t)ctx, sizeof(int))) &&
		     (kv->seq[s].blk = malloc(sizeof(int) * (size_t)nbs)) &&
		     (kv->seq[s].bgen = malloc(sizeof(uint64_t) * (size_t)nbs));
	}
	return ok ? 0 : -ENOMEM;
}

void coli_kv_rows_drop(struct coli_kv *kv)
{
	if (kv->kcache)
		coli_mem_free(kv->kcache, kv->bytes);
	if (kv->vcache)
		coli_mem_free(kv->vcache, kv->vbytes);
	kv->kcache = kv->vcache = NULL;
}

int coli_kv_rows_alloc(struct coli_kv *kv)
{
	if (kv->kcache)
		return 0;
	kv->kcache = coli_mem_alloc(kv->bytes, kv->node);
	kv->vcache = kv->vbytes ? coli_mem_alloc(kv->vbytes, kv->node) : NULL;
	if (kv->kcache && (kv->vcache || !kv->vbytes))
		return 0;
	coli_kv_rows_drop(kv);
	return -ENOMEM;
}

void coli_kv_free(struct coli_kv *kv)
{
	if (kv->kcache)
		coli_mem_free(kv->kcache, kv->bytes);
	if (kv->vcache)
		coli_mem_free(kv->vcache, kv->vbytes);
	for (int s = 0; kv->seq && s < kv->n_seq; s++)
		free(kv->seq[s].hist), free(kv->seq[s].blk), free(kv->seq[s].bgen);
	free(kv->seq);
	coli_kv_pool_free(kv);
	memset(kv, 0, sizeof(*kv));
}

/* ---- rows ---- */

/* Row of slot seq's layer l position pos in a cache array. */
static size_t row_of(const struct coli_kv *kv, int seq, int l, int pos)
{
	return (size_t)l * kv->n_blocks * COLI_KV_BLOCK + coli_kv_row(kv, seq, pos);
}

void coli_kv_append(struct coli_kv *kv, int seq, int l, int pos0, int T, const float *k,
                    const float *v)
{
	for (int t = 0; t < T; t++) {
		size_t r = row_of(kv, seq, l, pos0 + t);

		coli_kv_row_store(kv->kt, (char *)kv->kcache + r * kv->krow, k + (size_t)t * kv->n,
		                  kv->n, kv->seg);
		if (kv->vcache && v)
			coli_kv_row_store(kv->vt, (char *)kv->vcache + r * kv->vrow,
			                  v + (size_t)t * kv->n, kv->n, kv->seg);
	}
}

void coli_kv_copy_block(struct coli_kv *kv, const struct coli_kv_cow *c)
{
	for (int l = 0; l < kv->n_layers; l++) {
		const size_t layer = (size_t)l * kv->n_blocks * COLI_KV_BLOCK,
		             src = layer + (size_t)c->src * COLI_KV_BLOCK,
		             dst = layer + (size_t)c->dst * COLI_KV_BLOCK;

		memcpy((char *)kv->kcache + dst * kv->krow, (char *)kv->kcache + src * kv->krow,
		       (size_t)c->rows * kv->krow);
		if (kv->vcache)
			memcpy((char *)kv->vcache + dst * kv->vrow,
			       (char *)kv->vcache + src * kv->vrow, (size_t)c->rows * kv->vrow);
	}
}

void coli_kv_group_rows(const struct coli_kv *kv, int seq, int l, int g, int hd, int k0,
                        struct coli_attn_group *a)
{
	const size_t base = (size_t)l * kv->n_blocks * COLI_KV_BLOCK; /* the layer's rows */
	const char *kc = (const char *)kv->kcache + base * kv->krow;
	const char *vc = kv->vcache ? (const char *)kv->vcache + base * kv->vrow : kc;
	size_t ko, vo;

	coli_kv_seg_offsets(kv->kt, kv->n, g, hd, &ko, &a->ksoff);
	coli_kv_seg_offsets(kv->vt, kv->n, g, hd, &vo, &a->vsoff);
	a->K = kc + ko;
	a->V = vc + vo;
	a->kt = kv->kt, a->vt = kv->vt;
	a->kstride = kv->krow;
	a->vstride = kv->vcache ? kv->vrow : kv->krow;
	a->seg = kv->seg;
	a->blk = kv->seq[seq].blk;
	a->p0 = k0;
	a->bshift = COLI_KV_BLOCK_SHIFT;
}
