/*
 * ptx/gpu_mla.c — the launch of ptx/mla.cu's latent attention: the split of
 * a query's positions over CTAs and the kernel's shared memory, on the
 * device's compute stream. Its limits are checked here (-ENOTSUP), so a
 * caller may fall back to the host.
 *
 * Two kernels: the decode kernel (ptx/mla_decode.cuh: bf16 tensor cores, the
 * query and P split into 1..3 bf16 terms, 32 heads a CTA, T <= 16) and the
 * tf32 one (mla.cu: 16 heads a CTA, any T: prefill). terms (ptx.h struct
 * coli_gpu_mla) picks; 0, the dense forward's, takes the decode kernel with
 * COLI_GPU_MLA_PICK_TERMS terms wherever it applies (tests/ptx/mla measures
 * its error against the tf32 x3's) and the tf32 kernel with x3 elsewhere.
 */
#include <errno.h>
#include <stdio.h>
#include <stddef.h>

#include "ptx/ptx.h"
#include "ptx/ptx_internal.h"

#ifdef COLI_HAVE_PTX
#define ML_MAX_DV (8 * 8 * COLI_GPU_MLA_NT) /* kernels_abi.h: mla.cu's shape */
#define ML_MAX_DK 640                       /* shared memory: 211 KB at 640 (tf32) */

/* mla.cu's dynamic shared memory: q [16][dk + 4], two tiles [2][32][dk + 4],
 * S/P [2][16][36], m, l, correction [16] each. */
static unsigned mla_smem(int dk)
{
	return (unsigned)(sizeof(float) *
	                  ((size_t)(COLI_GPU_MLA_HEADS + 2 * COLI_GPU_MLA_TILE) * (dk + 4) +
	                   2 * COLI_GPU_MLA_HEADS * (COLI_GPU_MLA_TILE + 4) +
	                   3 * COLI_GPU_MLA_HEADS));
}

/* mla_decode.cuh's: tiles [2][planes][32][dk + 8] bf16 (f32: two planes),
 * the partials [4][32][36], m, l, correction [32], q8 scales [2][32][2]. */
static unsigned mla_dec_smem(int dk, int kt)
{
	const size_t planes = kt == 0 ? 2 : 1;

	return (unsigned)(2 * 2 * planes * COLI_GPU_MLA_DEC_TILE * (size_t)(dk + 8) +
	                  sizeof(float) *
	                      (4 * COLI_GPU_MLA_DEC_HEADS * (COLI_GPU_MLA_DEC_TILE + 4) +
	                       3 * COLI_GPU_MLA_DEC_HEADS + 4 * COLI_GPU_MLA_DEC_TILE));
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
	for (int t = 0; t < 3; t++)
		for (int i = 0; i < 3; i++) {
			snprintf(fn, sizeof(fn), "coli_attn_mla_dec%d%s", i + 1, sfx[t]);
			CK(g->cu->ModuleGetFunction(&g->f_mla_dec[t][i], g->mod_mla, fn), fn);
			if (g->cu->FuncSetAttribute(g->f_mla_dec[t][i],
			                            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
			                            mla_dec_smem(ML_MAX_DK, t)) != CUDA_SUCCESS)
				g->f_mla_dec[t][i] = NULL;
		}
	return 0;
}

/* Whether the decode kernel takes this launch (its shape limits). */
static int mla_dec_fits(const struct coli_gpu_mla *a)
{
	return a->T <= COLI_GPU_MLA_DEC_MAX_T && a->dv % 16 == 0 &&
	       a->dk <= 4 * 16 * COLI_GPU_MLA_DEC_KQ && a->dv <= 4 * 8 * COLI_GPU_MLA_DEC_NT &&
	       (a->kt != 1 || a->dk % 8 == 0);
}

/* Splits: about one CTA an SM (either kernel holds one an SM: shared
 * memory, registers) over the (query, head tile or group) pairs, each split at least one tile, at
 * most COLI_GPU_MLA_MAX_SPLITS, the partials within the scratch. The split count depends on the
 * shape and the positions the launch covers only: the longest query's, or with posp in a capture
 * the reach of its bucket (splits past a query's position leave empty partials). More than one
 * split: a second launch combines them (mla.cu). */
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
	/* CTAs a split: (head tile, query) pairs; the decode kernel's head
	 * groups hold two of the 16-head tiles whose partials it writes */
	const int grp = (nh + COLI_GPU_MLA_DEC_HEADS - 1) / COLI_GPU_MLA_DEC_HEADS;
	const size_t per =
	    (size_t)COLI_GPU_MLA_HEADS * dv + 2 * COLI_GPU_MLA_HEADS; /* floats a split's partial */
	int terms = a->terms;
	long base;
	CUfunction f;

	if (a->T < 1 || nh < 1 || pos0 < 0 || dk < 16 || dk % 16 || dk > ML_MAX_DK || dv < 8 ||
	    dv % 8 || dv > dk || dv > ML_MAX_DV || ld < dk || ld % 4 || ldt % 4 || ldh % 4 ||
	    (a->posp && a->span < pos0 + a->T) || a->kt < 0 || a->kt > 2 ||
	    terms < COLI_GPU_MLA_TF32 || terms > 3)
		return -EINVAL;
	/* a typed row's scales: c_kv's (dv values) and the rest's, at most two */
	if (a->kt && dk - dv > dv)
		return -ENOTSUP;
	if (terms == 0)
		terms = mla_dec_fits(a) && g->f_mla_dec[a->kt][COLI_GPU_MLA_PICK_TERMS - 1]
		            ? COLI_GPU_MLA_PICK_TERMS
		            : COLI_GPU_MLA_TF32;
	if (terms > 0 && !mla_dec_fits(a))
		return -ENOTSUP;
	f = terms > 0 ? g->f_mla_dec[a->kt][terms - 1] : g->f_mla[a->kt][!!a->x3];
	base = (long)a->T * (terms > 0 ? grp : ht);
	if (!f || (long)a->T * ht > 65535)
		return -ENOTSUP;
	splits = (int)((g->sm_count + base - 1) / base);
	splits = splits < tiles ? splits : tiles;
	splits = splits < COLI_GPU_MLA_MAX_SPLITS ? splits : COLI_GPU_MLA_MAX_SPLITS;
	while (splits > 1 && (size_t)splits * a->T * ht * per > DENSE_SCRATCH_FLOATS)
		splits--;
	tps = (tiles + splits - 1) / splits;
	splits = (tiles + tps - 1) / tps; /* no split starts past the last tile */
	if (terms > 0) /* grid (head groups, splits, T): a split's groups side by side */
		rc = coli_gpu_launch(g, f, (unsigned)grp, (unsigned)splits, (unsigned)a->T,
		                     COLI_GPU_MLA_THREADS, mla_dec_smem(dk, a->kt), args,
		                     "launch attn_mla_dec");
	else
		rc = coli_gpu_launch(g, f, (unsigned)splits, (unsigned)ht, (unsigned)a->T,
		                     COLI_GPU_MLA_THREADS, mla_smem(dk), args, "launch attn_mla");
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
