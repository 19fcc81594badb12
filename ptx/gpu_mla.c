/*
 * ptx/gpu_mla.c — the launch of ptx/mla.cu's latent attention: the split of
 * a query's positions over CTAs and the kernel's shared memory, on the
 * device's compute stream. Its limits are checked here (-ENOTSUP), so a
 * caller may fall back to the host.
 */
#include <errno.h>
#include <stdio.h>
#include <stddef.h>

#include "ptx/ptx.h"
#include "ptx/ptx_internal.h"

#ifdef COLI_HAVE_PTX
#define ML_MAX_DV (8 * 8 * COLI_GPU_MLA_NT) /* kernels_abi.h: mla.cu's shape */
#define ML_MAX_DK 640                       /* shared memory: 211 KB at 640 */

/* mla.cu's dynamic shared memory: q [16][dk + 4], two tiles [2][32][dk + 4],
 * S/P [2][16][36], m, l, correction [16] each. */
static unsigned mla_smem(int dk)
{
	return (unsigned)(sizeof(float) *
	                  ((size_t)(COLI_GPU_MLA_HEADS + 2 * COLI_GPU_MLA_TILE) * (dk + 4) +
	                   2 * COLI_GPU_MLA_HEADS * (COLI_GPU_MLA_TILE + 4) +
	                   3 * COLI_GPU_MLA_HEADS));
}

int coli_gpu_mla_functions(struct coli_gpu *g)
{
	static const char *const name[2] = {"coli_attn_mla", "coli_attn_mla_x3"};
	static const char *const sfx[3] = {"", "_bf16", "_q8"}; /* the cache's type */
	char fn[64];

	CK(g->cu->ModuleGetFunction(&g->f_mla_comb, g->mod_mla, "coli_attn_mla_combine"),
	   "coli_attn_mla_combine");
	CK(g->cu->ModuleGetFunction(&g->f_mla_prep, g->mod_mla, "coli_mla_prep"), "coli_mla_prep");
	for (int t = 0; t < 3; t++)
		for (int i = 0; i < 2; i++) {
			snprintf(fn, sizeof(fn), "%s%s", name[i], sfx[t]);
			CK(g->cu->ModuleGetFunction(&g->f_mla[t][i], g->mod_mla, fn), fn);
			/* past the static 48 KiB; a GPU with less a block (sm_86/89: 99 KB)
			 * takes what fits: coli_gpu_mla_attention checks per call */
			if (g->cu->FuncSetAttribute(g->f_mla[t][i],
			                            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
			                            mla_smem(ML_MAX_DK)) != CUDA_SUCCESS)
				g->f_mla[t][i] = NULL;
		}
	return 0;
}

/* Splits: about one CTA an SM (the kernel's shared memory holds one) over
 * the (query, head tile) pairs, each split at least one tile, at most
 * COLI_GPU_MLA_MAX_SPLITS, the partials within the scratch. The split count
 * depends on the shape and the positions the launch covers only: the longest
 * query's, or with posp in a capture the reach of its bucket (splits past a
 * query's position leave empty partials). More than one split: a second
 * launch combines them (mla.cu). */
int coli_gpu_mla_attention(coli_gpu_t *g, const struct coli_gpu_mla *a)
{
	CUdeviceptr q = a->q, c = a->cache, o = a->out, pp = a->posp, part = g->scratch;
	int pos0 = a->pos0, nh = a->nh, dk = a->dk, dv = a->dv, ld = a->ld, tps, splits, rc;
	int ldt = a->ldt ? a->ldt : nh * dv, ldh = a->ldh ? a->ldh : dv;
	float scale = a->scale;
	void *args[] = {&q,  &c,  &o,   &pos0, &pp,    &nh,  &dk,
	                &dv, &ld, &ldt, &ldh,  &scale, &tps, &part};
	void *cargs[] = {&part, &o, &nh, &dv, &ldt, &ldh, &splits};
	const int reach =
	    a->posp && g->capturing ? coli_gpu_attn_reach(pos0 + a->T, a->span) : pos0 + a->T;
	const int ht = (nh + COLI_GPU_MLA_HEADS - 1) / COLI_GPU_MLA_HEADS,
	          tiles = (reach + COLI_GPU_MLA_TILE - 1) / COLI_GPU_MLA_TILE;
	const long base = (long)a->T * ht;
	const size_t per =
	    (size_t)COLI_GPU_MLA_HEADS * dv + 2 * COLI_GPU_MLA_HEADS; /* floats a split's partial */

	if (a->T < 1 || nh < 1 || pos0 < 0 || dk < 16 || dk % 16 || dk > ML_MAX_DK || dv < 8 ||
	    dv % 8 || dv > dk || dv > ML_MAX_DV || ld < dk || ld % 4 || ldt % 4 || ldh % 4 ||
	    (a->posp && a->span < pos0 + a->T) || a->kt < 0 || a->kt > 2)
		return -EINVAL;
	/* a typed row's scales: c_kv's (dv values) and the rest's, at most two */
	if (!g->f_mla[a->kt][!!a->x3] || base > 65535 || (a->kt && dk - dv > dv))
		return -ENOTSUP;
	splits = (int)((g->sm_count + base - 1) / base);
	splits = splits < tiles ? splits : tiles;
	splits = splits < COLI_GPU_MLA_MAX_SPLITS ? splits : COLI_GPU_MLA_MAX_SPLITS;
	while (splits > 1 && (size_t)splits * base * per > DENSE_SCRATCH_FLOATS)
		splits--;
	tps = (tiles + splits - 1) / splits;
	splits = (tiles + tps - 1) / tps; /* no split starts past the last tile */
	rc = coli_gpu_launch(g, g->f_mla[a->kt][!!a->x3], (unsigned)splits, (unsigned)ht,
	                     (unsigned)a->T, COLI_GPU_MLA_THREADS, mla_smem(dk), args,
	                     "launch attn_mla");
	if (rc || splits == 1)
		return rc;
	return coli_gpu_launch(
	    g, g->f_mla_comb,
	    (unsigned)((COLI_GPU_MLA_HEADS * dv + COLI_GPU_MLA_COMB - 1) / COLI_GPU_MLA_COMB),
	    (unsigned)ht, (unsigned)a->T, COLI_GPU_MLA_THREADS, 0, cargs,
	    "launch attn_mla_combine");
}

int coli_gpu_mla_prep(coli_gpu_t *g, const struct coli_gpu_mla_prep *a)
{
	struct coli_gpu_mla_prep p = *a;
	void *args[] = {&p};

	if (a->T < 1 || a->nh < 1 || a->np < 0 || a->r < 2 || a->r % 2 || a->kl < 1 ||
	    a->pos0 < 0 || a->kt < 0 || a->kt > 2 ||
	    (a->kt && a->kl + a->r > COLI_GPU_MLA_PREP_MAXROW))
		return -EINVAL;
	return coli_gpu_launch(g, g->f_mla_prep, (unsigned)a->T, (unsigned)a->nh + 1, 1, 128, 0,
	                       args, "launch mla_prep");
}
#else
int coli_gpu_mla_attention(coli_gpu_t *g, const struct coli_gpu_mla *a)
{
	return -ENODEV;
}

int coli_gpu_mla_prep(coli_gpu_t *g, const struct coli_gpu_mla_prep *a)
{
	return -ENODEV;
}
#endif
