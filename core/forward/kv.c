/*
 * core/forward/kv.c — the host KV cache's allocation (core/forward/kv.h):
 * keys and values through mem/ on the engine's NUMA node, the token ids
 * beside them. An MLA model (cfg.kv_lora) caches one row a token and layer,
 * [c_kv (kv_lora) || k_pe (rope_dim)] in kcache, and has no vcache.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"
#include "core/forward/kv.h"
#include "mem/mem.h"

int coli_kv_alloc(struct coli_kv *kv, const struct coli_model_config *c, int ctx, int node)
{
	size_t kvd = (size_t)c->n_kv_heads * c->head_dim;

	if (c->kv_lora) /* MLA: one latent row a token, no values apart */
		kvd = (size_t)c->kv_lora + c->rope_dim;
	kv->ctx = ctx;
	kv->pos = 0;
	kv->bytes = sizeof(float) * (size_t)c->n_layers * ctx * kvd;
	kv->vbytes = c->kv_lora ? 0 : kv->bytes;
	kv->kcache = coli_mem_alloc(kv->bytes, node);
	kv->vcache = kv->vbytes ? coli_mem_alloc(kv->vbytes, node) : NULL;
	kv->hist = calloc((size_t)ctx, sizeof(int));
	return kv->kcache && (kv->vcache || !kv->vbytes) && kv->hist ? 0 : -ENOMEM;
}

void coli_kv_free(struct coli_kv *kv)
{
	coli_mem_free(kv->kcache, kv->bytes);
	if (kv->vcache)
		coli_mem_free(kv->vcache, kv->vbytes);
	free(kv->hist);
	memset(kv, 0, sizeof(*kv));
}
