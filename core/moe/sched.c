/*
 * core/moe/sched.c — the MoE scheduler's lists and CPU rows (core/moe/
 * sched.h), sized at open for tmax tokens a call; every byte is counted in
 * sched->bytes, which the RAM tier's budget takes off (core/place/
 * tiers_open.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_internal.h"
#include "core/moe/sched.h"

#define ALLOC(p, n)                                                                                \
	((p) = calloc((size_t)(n), sizeof(*(p))), sched->bytes += (size_t)(n) * sizeof(*(p)),      \
	 (p) ? 0 : -ENOMEM)

/* The routed experts' per-pair rows [tmax * top_k][moe_inter]. */
static int rows_alloc(struct coli_moe_sched *sched, const struct coli_model_config *c, int tmax,
                      int quant)
{
	size_t P = (size_t)tmax * c->top_k, I = (size_t)c->moe_inter;
	int rc;

	rc = ALLOC(sched->pg, P * I);
	rc = rc ? rc : ALLOC(sched->pu, P * I);
	rc = rc ? rc : ALLOC(sched->hag, P);
	rc = rc ? rc : ALLOC(sched->xview, c->n_experts);
	rc = rc ? rc : ALLOC(sched->xjobs, 3 * (size_t)c->n_experts);
	rc = rc ? rc : ALLOC(sched->xpairs, P);
	sched->n_ph = (int)P;
	rc = rc ? rc : coli_actbufs_alloc(&sched->ph, (int)P, c->moe_inter, quant);
	if (quant)
		sched->bytes += P * I * 2;
	return rc;
}

int coli_moe_sched_alloc(struct coli_moe_sched *sched, const struct coli_model_config *c, int tmax)
{
	int rc;

	rc = ALLOC(sched->assign, c->n_experts);
	rc = rc ? rc : ALLOC(sched->la_idle, c->n_layers);
	rc = rc ? rc : ALLOC(sched->streamed, c->n_experts);
	rc = rc ? rc : ALLOC(sched->cand, c->n_experts);
	rc = rc ? rc : ALLOC(sched->cand_n, c->n_experts);
	rc = rc ? rc : ALLOC(sched->pair_first, c->n_experts);
	rc = rc ? rc : ALLOC(sched->pair_n, c->n_experts);
	rc = rc ? rc : ALLOC(sched->need, c->n_experts);
	rc = rc ? rc : ALLOC(sched->redo, c->n_experts);
	rc = rc ? rc : ALLOC(sched->slab_ptr, c->n_experts);
	rc = rc ? rc : ALLOC(sched->host_slab, c->n_experts);
	if (!rc && c->n_experts > 1)
		rc = rows_alloc(sched, c, tmax, coli_dtype_is_quant(c->quant));
	return rc;
}
#undef ALLOC

void coli_moe_sched_free(struct coli_moe_sched *sched)
{
	free(sched->assign), free(sched->la_idle), free(sched->streamed);
	free(sched->cand), free(sched->cand_n);
	free(sched->pair_first), free(sched->pair_n), free(sched->need), free(sched->redo);
	free((void *)sched->slab_ptr), free((void *)sched->host_slab);
	coli_actbufs_free(sched->ph, sched->n_ph);
	free(sched->pg), free(sched->pu), free(sched->hag), free(sched->xview), free(sched->xjobs);
	free(sched->xpairs);
	memset(sched, 0, sizeof(*sched));
}
