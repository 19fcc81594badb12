/*
 * core/forward/kv.h — the KV cache on the host: the keys and values of the
 * tokens seen so far, and those tokens' ids. The forward (core/forward/
 * forward.c on the CPU) writes it and advances pos; core/engine.c sizes it
 * at open (coli_kv_alloc), rewinds it (coli_engine_reset) and frees it at
 * close (coli_kv_free). The dense device keeps its own copy of its layers'
 * (core/forward/dense_dev.c); hist lets the CPU rebuild this one from the
 * token ids if that device fails.
 */
#ifndef COLI_CORE_FORWARD_KV_H
#define COLI_CORE_FORWARD_KV_H

#include <stddef.h>

struct coli_model_config;

struct coli_kv {
	int ctx;                /* positions it holds */
	int pos;                /* tokens in the cache */
	float *kcache, *vcache; /* [n_layers][ctx][n_kv*hd], fp32, through mem/; MLA:
	                         * kcache [n_layers][ctx][kv_lora + rope_dim]
	                         * ([c_kv normed || k_pe roped]), vcache NULL */
	size_t bytes;           /* of kcache */
	size_t vbytes;          /* of vcache (0 under MLA) */
	int *hist;              /* [ctx] token ids in the cache, to rebuild it on the
	                         * CPU if the dense device fails */
};

/* kv for ctx positions of model c, on NUMA node `node` (mem/'s values).
 * -ENOMEM: kv holds what was allocated; coli_kv_free releases it. */
int coli_kv_alloc(struct coli_kv *kv, const struct coli_model_config *c, int ctx, int node);
/* Releases what coli_kv_alloc made (a zeroed kv: nothing); kv is zeroed. */
void coli_kv_free(struct coli_kv *kv);

#endif
