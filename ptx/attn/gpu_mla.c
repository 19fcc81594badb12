/*
 * ptx/attn/gpu_mla.c — the launch of ptx/attn/mla.cu's latent attention: the split of
 * a query's positions over CTAs and the kernel's shared memory, on the
 * device's compute stream. Its limits are checked here (-ENOTSUP), so a
 * caller may fall back to the host.
 *
 * Two kernels: the decode kernel (ptx/attn/mla_decode.cuh: bf16 tensor cores, the
 * query and P split into 1..3 bf16 terms, 32 heads a CTA) and the tf32 one (mla.cu: 16 heads a
 * CTA). terms (ptx.h struct coli_gpu_mla) picks; 0, the dense forward's, takes the decode kernel
 * with COLI_GPU_MLA_PICK_TERMS terms wherever its shape limits allow, decode and prefill alike
 * (tests/ptx/mla measures its error against the tf32 x3's), and the tf32 kernel elsewhere. Either
 * way a query's bits depend on its position only, not on the queries beside it (the split below).
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

/* Whether the decode kernel takes this shape (any T). */
static int mla_dec_fits(const struct coli_gpu_mla *a)
{
	return a->dv % 16 == 0 && a->dk <= 4 * 16 * COLI_GPU_MLA_DEC_KQ &&
	       a->dv <= 4 * 8 * COLI_GPU_MLA_DEC_NT && (a->kt != 1 || a->dk % 8 == 0);
}

/* Splits: a query's positions go over at most msp CTAs, msp from the shape
 * alone (about one CTA an SM over the head groups a query has: either kernel
 * holds one an SM, shared memory and registers; at most
 * COLI_GPU_MLA_MAX_SPLITS; one query's partials within the scratch), each
 * split ceil(tiles / msp) of the query's own tiles (the kernels): a query's
 * split and so its bits depend on its position only, alone, in a decode
 * batch or in a prefill. The grid covers the longest query's splits: the
 * launch's, or with posp in a capture the reach of its bucket (splits past
 * a query's position leave empty partials, which the combine adds as exact
 * zeros). Queries go in launches whose partials fit the scratch, each
 * followed by the combine when the grid has more than one split (mla.cu). */
int coli_gpu_mla_attention(coli_gpu_t *g, const struct coli_gpu_mla *a)
{
	CUdeviceptr q = a->q, c = a->cache, o = a->out, pp = a->posp, part = g->scratch,
	            rows = a->rows, tab = a->tab;
	int pos0 = a->pos0, nh = a->nh, dk = a->dk, dv = a->dv, ld = a->ld, nbs = a->nbs, msp,
	    splits, t0, tb;
	int ldt = a->ldt ? a->ldt : nh * dv, ldh = a->ldh ? a->ldh : dv, rc = 0;
	float scale = a->scale;
	void *args[] = {&q,   &c,   &o,     &pos0, &pp,   &nh, &dk,   &dv,  &ld,
	                &ldt, &ldh, &scale, &msp,  &part, &t0, &rows, &tab, &nbs};
	void *cargs[] = {&part, &o, &nh, &dv, &ldt, &ldh, &splits, &t0};
	/* the furthest position seen + 1 (rows: pos0 is that already) */
	const int last = a->rows ? pos0 : pos0 + a->T;
	const int reach =
	    (a->posp || a->rows) && g->capturing ? coli_gpu_attn_reach(last, a->span) : last;
	const int ht = (nh + COLI_GPU_MLA_HEADS - 1) / COLI_GPU_MLA_HEADS,
	          tiles = (reach + COLI_GPU_MLA_TILE - 1) / COLI_GPU_MLA_TILE;
	/* CTAs a split of a query: its head tiles, or the decode kernel's head
	 * groups (two of the 16-head tiles whose partials it writes) */
	const int grp = (nh + COLI_GPU_MLA_DEC_HEADS - 1) / COLI_GPU_MLA_DEC_HEADS;
	const size_t per =
	    (size_t)COLI_GPU_MLA_HEADS * dv + 2 * COLI_GPU_MLA_HEADS; /* floats a split's partial */
	int terms = a->terms, units;
	CUfunction f;

	if (a->T < 1 || nh < 1 || pos0 < 0 || dk < 16 || dk % 16 || dk > ML_MAX_DK || dv < 8 ||
	    dv % 8 || dv > dk || dv > ML_MAX_DV || ld < dk || ld % 4 || ldt % 4 || ldh % 4 ||
	    ((a->posp || a->rows) && a->span < last) || a->kt < 0 || a->kt > 2 || nbs < 0 ||
	    (a->rows && !a->tab && !nbs) || terms < COLI_GPU_MLA_TF32 || terms > 3)
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
	if (!f)
		return -ENOTSUP;
	units = terms > 0 ? grp : ht;
	msp = (g->sm_count + units - 1) / units;
	msp = msp < COLI_GPU_MLA_MAX_SPLITS ? msp : COLI_GPU_MLA_MAX_SPLITS;
	while (msp > 1 && (size_t)msp * ht * per > DENSE_SCRATCH_FLOATS)
		msp--;
	splits = msp < tiles ? msp : tiles;
	tb = (int)(DENSE_SCRATCH_FLOATS / ((size_t)splits * ht * per));
	tb = tb < 65535 ? tb : 65535; /* the grid's z */
	if (tb < 1)
		return -ENOTSUP;
	for (t0 = 0; !rc && t0 < a->T; t0 += tb) {
		const unsigned nq = (unsigned)(a->T - t0 < tb ? a->T - t0 : tb);

		if (terms >
		    0) /* grid (head groups, splits, queries): a split's groups side by side */
			rc = coli_gpu_launch(g, f, (unsigned)grp, (unsigned)splits, nq,
			                     COLI_GPU_MLA_THREADS, mla_dec_smem(dk, a->kt), args,
			                     "launch attn_mla_dec");
		else
			rc = coli_gpu_launch(g, f, (unsigned)splits, (unsigned)ht, nq,
			                     COLI_GPU_MLA_THREADS, mla_smem(dk), args,
			                     "launch attn_mla");
		if (!rc && splits > 1)
			rc = coli_gpu_launch(
			    g, g->f_mla_comb,
			    (unsigned)((COLI_GPU_MLA_HEADS * dv + COLI_GPU_MLA_COMB - 1) /
			               COLI_GPU_MLA_COMB),
			    (unsigned)ht, nq, COLI_GPU_MLA_THREADS, 0, cargs,
			    "launch attn_mla_combine");
	}
	return rc;
}

int coli_gpu_mla_prep(coli_gpu_t *g, const struct coli_gpu_mla_prep *a)
{
	struct coli_gpu_mla_prep p = *a;
	void *args[] = {&p};

	if (a->T < 1 || a->nh < 1 || a->np < 0 || a->r < 2 || a->r % 2 || a->kl < 1 ||
	    a->pos0 < 0 || a->kt < 0 || a->kt > 2 || a->nbs < 0 ||
	    (a->rows && !a->tab && !a->nbs) || (a->kt && a->kl + a->r > COLI_GPU_MLA_PREP_MAXROW))
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
