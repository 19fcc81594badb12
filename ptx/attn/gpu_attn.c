/*
 * ptx/attn/gpu_attn.c — launch wrappers for the attention kernels of
 * ptx/attn/attention.cu (coli_attn_chunks_<hd>, coli_attention) and
 * ptx/attn/attn_prefill.cu (coli_attn_prefill_<hd>): loading their functions, one
 * set a KV mode (f32, bf16, q8, q8 K with bf16 V), and choosing the kernel,
 * its grid and its split for a launch on the device's one stream.
 *
 * What it owns:
 *   - the kernel's choice: coli_attn_tc for a bf16 or q8 cache at hd 64 or
 *     128 (a prefill batch in tiles of queries, decode a query a tile:
 *     attention_tc; a prefill batch that does not split over CTAs on
 *     coli_attn_tcp, ptx/attn/attn_tcp.cuh), unless the GPU cannot give a
 *     block its shared memory;
 *     otherwise coli_attn_prefill for one sequence's prefill
 *     batch of AP_MIN_T queries or more at hd 64 or 128 (unless the GPU's
 *     shared memory a block is too small, or coli_gpu_attn_prefill(g, 0)
 *     turned it off), its splits on CTAs of their own for a few queries
 *     after a long cache (attention_prefill); else coli_attn_chunks where hd
 *     is a power of two from 32 to 256; else coli_attention's tiles of
 *     AT_TILE positions.
 *   - the split policy: a query's positions go in chunks of AD_CHUNK over at
 *     most max_splits() CTAs (about two CTAs an SM over the kv heads, fewer
 *     where one query's partials would not fit the dense scratch), and each
 *     query's split is COLI_GPU_ATTN_CPS of its own position
 *     (ptx/kernels_abi.h): a function of the model and the device only, so a
 *     query gets the same bits in a prefill batch, a decode step or a graph.
 *   - the row table: with COLI_GPU_ROWS (several sequences, a row each) the
 *     grid covers the launch's furthest position, and a graph capture's grid
 *     covers its bucket (coli_gpu_attn_reach), so a replay at any length up
 *     to the bucket launches the same grid.
 *
 * Partials and their counters are ptx/dense/gpu_dense.c's scratch
 * (DENSE_SCRATCH_FLOATS floats, DENSE_COUNTERS counters, zero between
 * launches); queries go in batches whose partials fit it. One stream: two
 * split launches never overlap.
 */
#include <errno.h>
#include <stdio.h>

#include "ptx/ptx.h"
#include "ptx/ptx_internal.h"

#ifdef COLI_HAVE_PTX
#define THREADS  256
#define AT_TILE  256 /* positions per attention tile (attention.cu) */
#define AD_CHUNK 32  /* positions per decode-attention chunk (attention.cu) */
#define AT_MAXG  16
#define AT_MAXQ  2048
/* coli_attn_prefill_<hd> (attn_prefill.cu): 8 warps of AP_RW rows, the shared
 * memory of ApSmem (q rows, two K and two V chunks, weights, O), and the
 * batches that take it: from AP_MIN_T queries (below it too few CTAs: it
 * lost to the chunk kernel at 16 queries on the H200, won from 64;
 * docs/perf/history/2026-11-29.md) */
#define AP_RW(hd)   ((hd) == 64 ? 8 : 4)
#define AP_ROWS(hd) (8 * AP_RW(hd))
#define AP_SMEM(hd)                                                                                \
	(4 * (AP_ROWS(hd) * ((hd) + 4) + 4 * AD_CHUNK * ((hd) + 4) + AP_ROWS(hd) * AD_CHUNK +      \
	      AP_ROWS(hd) * (hd)))
#define AP_MIN_T 64
#define AP_SPLIT_REACH 16 /* positions a query, at least, for the split over CTAs */

/* Bytes a K and a V element of KV mode m (f32, bf16, q8, q8 K with bf16 V:
 * attention.cuh's kvmode). */
static const int kesz[COLI_GPU_KV_MODES] = {4, 2, 1, 1}, vesz[COLI_GPU_KV_MODES] = {4, 2, 1, 2};

/* coli_attn_chunks_<hd> of KV mode m: its dynamic shared memory. */
static int chunks_smem(int hd, int m)
{
	return COLI_GPU_AD_SMEM(hd, kesz[m], vesz[m]);
}

/* coli_attn_tc_<hd> of KV mode m (1..3): its dynamic shared memory. */
static int tc_smem(int hd, int m)
{
	return COLI_GPU_TC_SMEM(hd, kesz[m], vesz[m]);
}

/* coli_attn_tcp_<hd> of KV mode m (1..3): its dynamic shared memory. */
static int tcp_smem(int hd, int m)
{
	return COLI_GPU_TCP_SMEM(hd, kesz[m], vesz[m]);
}

/* The attention kernels' handles, a set a KV mode (at open, before the dense
 * ones: nothing is allocated yet if one is missing). */
int coli_gpu_attn_functions(struct coli_gpu *g)
{
	static const char *const kv_sfx[COLI_GPU_KV_MODES] = {"", "_bf16", "_q8", "_q8_bf16"};
	char name[64];

	for (int m = 0; m < COLI_GPU_KV_MODES; m++) { /* a kernel set a KV mode */
		for (int i = 0; i < 4; i++) {
			snprintf(name, sizeof(name), "coli_attn_chunks_%d%s", 32 << i, kv_sfx[m]);
			CK(g->cu->ModuleGetFunction(&g->f_attn_chunks[m][i], g->mod_attn, name),
			   name);
			/* its staged chunks: up to 64 KiB past the static 48 */
			CK(g->cu->FuncSetAttribute(g->f_attn_chunks[m][i],
			                           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
			                           chunks_smem(32 << i, m)),
			   name);
		}
		snprintf(name, sizeof(name), "coli_attention%s", kv_sfx[m]);
		CK(g->cu->ModuleGetFunction(&g->f_attn[m], g->mod_attn, name), name);
		for (int i = 0; i < 2; i++) { /* hd 64, 128: shared memory past the static 48 KiB */
			snprintf(name, sizeof(name), "coli_attn_prefill_%d%s", 64 << i, kv_sfx[m]);
			CK(g->cu->ModuleGetFunction(&g->f_attn_prefill[m][i], g->mod_attn_prefill,
			                            name),
			   name);
			/* a GPU with less shared memory a block (sm_86/89: 99 KB; hd 128
			 * takes 105) keeps the chunk kernel for that head size */
			if (g->cu->FuncSetAttribute(g->f_attn_prefill[m][i],
			                            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
			                            AP_SMEM(64 << i)) != CUDA_SUCCESS)
				g->f_attn_prefill[m][i] = NULL;
			if (m == 0) /* an f32 cache keeps the fp32 kernels */
				continue;
			snprintf(name, sizeof(name), "coli_attn_tc_%d%s", 64 << i, kv_sfx[m]);
			CK(g->cu->ModuleGetFunction(&g->f_attn_tc[m][i], g->mod_attn, name), name);
			/* (a GPU whose blocks cannot take its ~97 KB keeps the fp32 kernels) */
			if (g->cu->FuncSetAttribute(g->f_attn_tc[m][i],
			                            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
			                            tc_smem(64 << i, m)) != CUDA_SUCCESS)
				g->f_attn_tc[m][i] = NULL;
			else if (g->cu->OccupancyMaxActiveBlocksPerMultiprocessor(
			             &g->tc_held[m][i], g->f_attn_tc[m][i], THREADS,
			             (size_t)tc_smem(64 << i, m)) != CUDA_SUCCESS)
				g->tc_held[m][i] = 0; /* (no shared folds: tc_ways) */
			snprintf(name, sizeof(name), "coli_attn_tcp_%d%s", 64 << i, kv_sfx[m]);
			CK(g->cu->ModuleGetFunction(&g->f_attn_tcp[m][i], g->mod_attn, name), name);
			/* (hd 128 takes ~135 KB: a GPU with less a block keeps coli_attn_tc) */
			if (g->cu->FuncSetAttribute(g->f_attn_tcp[m][i],
			                            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
			                            tcp_smem(64 << i, m)) != CUDA_SUCCESS)
				g->f_attn_tcp[m][i] = NULL;
		}
	}
	return 0;
}

/* coli_attn_chunks and coli_attn_prefill: the splits a query's positions
 * may take, about two CTAs per SM over the kv heads (what fits at once: 128
 * registers a thread), fewer where the partials of one query would not fit
 * the scratch. A function of the model and the device only: each query's
 * split is COLI_GPU_ATTN_CPS of its own position (ptx/kernels_abi.h), the
 * same in a prefill batch, a decode step or a graph, and however long the
 * cache is. Queries go in batches whose partials fit the scratch. Splits
 * past a query's position return at once, and splits past `reach` (the
 * positions any query of the launch sees, a graph's bucket when captured)
 * are not launched. */
static int max_splits(const coli_gpu_t *g, int nkv, int group, int hd)
{
	const size_t per = (size_t)nkv * ((size_t)group * hd + 2 * group); /* a query's split */
	int splits = (2 * g->sm_count + nkv - 1) / nkv;

	while (splits > 1 && (size_t)splits * per > DENSE_SCRATCH_FLOATS)
		splits--;
	return splits;
}

/* The splits a launch's grid covers for queries of up to `chunks` chunks:
 * the most any of them takes (a shorter query may take more than the
 * longest: COLI_GPU_ATTN_CPS grows in steps). */
static int splits_of(int chunks, int msp)
{
	const int fine = (chunks + COLI_GPU_ATTN_MIN_CPS - 1) / COLI_GPU_ATTN_MIN_CPS;

	return fine < msp ? fine : msp;
}

/* A decode launch (a query a CTA row, both decode kernels): its heads'
 * slices over CTAs (*hs), its splits (*zs) and its queries a launch (*tb).
 * While the grid is under a wave a step's time is a CTA's latency, which
 * grows with the heads it holds: then two heads a CTA, the group's slices
 * side by side, as long as the grid stays within one wave (two CTAs an SM,
 * max_splits' figure). Past that the whole group, each K/V row read once: a
 * second wave costs more than the heads save. H100, qwen3-30b shape: a
 * layer's attention after 8,192 positions 50.0 -> 23.1 us (4 waves of
 * two-head CTAs before); decode with an 8,192-token span after 5,000 and
 * 7,000 tokens 1,361 / 1,200 -> 1,608 / 1,541 tok/s. A graph's grid covers
 * its bucket (coli_gpu_attn_reach), so early in the 4,096 bucket, where half
 * its splits return at once, two heads a CTA were faster: after 2,048 tokens
 * 1,702 -> 1,634 (after 3,968: 1,524 -> 1,664). A prefill batch has CTAs
 * enough: the whole group (the same bits either way). Every query's used
 * splits, ceil(chunks / cps) <= min(msp, chunks): the grid covers the
 * launch's longest. */
static void decode_split(const coli_gpu_t *g, int T, int reach, int nkv, int group, int hd,
                         int msp, int *hs, int *zs, int *tb)
{
	const size_t per = (size_t)nkv * ((size_t)group * hd + 2 * group); /* a query's split */
	const int chunks = (reach + AD_CHUNK - 1) / AD_CHUNK;

	*zs = splits_of(chunks, msp);
	*hs = T <= COLI_GPU_MAX_S && group >= 4 && group % 2 == 0 &&
	              (size_t)T * *zs * nkv * (group / 2) <= 2 * (size_t)g->sm_count
	          ? group / 2
	          : 1;
	*tb = *zs > 1 ? (int)(DENSE_SCRATCH_FLOATS / ((size_t)*zs * per)) : T;
	*tb = *tb < DENSE_COUNTERS / (nkv * *hs) ? *tb : DENSE_COUNTERS / (nkv * *hs);
}

static int attention_chunks(coli_gpu_t *g, void **args, int T, int reach, int nkv, int group,
                            int hd, int mode)
{
	int msp = max_splits(g, nkv, group, hd), splits, t0, tb, k = 0;
	int rc = 0, hsplit;

	while (32 << k < hd)
		k++;
	decode_split(g, T, reach, nkv, group, hd, msp, &hsplit, &splits, &tb);
	args[10] = &msp;
	args[13] = &t0;
	args[14] = &hsplit;
	for (t0 = 0; !rc && t0 < T; t0 += tb)
		rc = coli_gpu_launch(g, g->f_attn_chunks[mode][k], (unsigned)splits,
		                     (unsigned)(nkv * hsplit), (unsigned)(T - t0 < tb ? T - t0 : tb),
		                     THREADS, (unsigned)chunks_smem(hd, mode), args,
		                     "launch attention");
	return rc;
}

/* coli_attn_prefill: a CTA a tile of queries of one kv head (all their
 * heads), each query's positions split as coli_attn_chunks splits them:
 * each query gets the bits it gets there. Grid (tiles, nkv, zs). With tiles
 * for at most half the SMs and a cache long against the batch (a prompt's
 * few last tokens after a prefix-cache hit) and no window or sinks, the
 * splits go to CTAs of their own (zs: the most any query of the launch
 * takes; the partials and the combine of coli_attn_chunks, queries in
 * batches whose partials fit the scratch); else one CTA walks a tile's
 * splits in turn, which wins as soon as the partials' traffic outweighs the
 * idle SMs (H200: 64 queries at 3,000 positions 588 -> 398 us a layer, 256
 * at 3,800 1,358 -> 2,165 had they split: docs/perf/kernels.md). reach: the
 * positions the launch's last query sees, at most (0: not known, a graph's).
 * prefill_split: that choice for tiles of qt queries (coli_attn_tc's too),
 * the split over CTAs *zs (1: none) and the queries a launch *tb. */
static void prefill_split(const coli_gpu_t *g, int T, int reach, int qt, int nkv, int group,
                          int hd, int msp, int plain, int *zs, int *tb)
{
	const size_t per = (size_t)nkv * ((size_t)group * hd + 2 * group); /* a query's split */
	const int tiles = (T + qt - 1) / qt;

	*zs = 1, *tb = T;
	if (!plain && reach >= AP_SPLIT_REACH * T && (long)tiles * nkv * 2 <= g->sm_count) {
		const int chunks = (reach + AD_CHUNK - 1) / AD_CHUNK;

		*zs = splits_of(chunks, msp);
		*tb = *zs > 1 ? (int)(DENSE_SCRATCH_FLOATS / ((size_t)*zs * per)) : T;
		*tb = *tb < DENSE_COUNTERS / nkv ? *tb : DENSE_COUNTERS / nkv;
		*tb = *tb / qt * qt;
		if (*zs < 2 || *tb < qt)
			*zs = 1, *tb = T;
	}
}

static int attention_prefill(coli_gpu_t *g, void **args, int T, int reach, int nkv, int group,
                             int hd, int mode, int plain)
{
	const int qt = AP_ROWS(hd) / group;
	int msp = max_splits(g, nkv, group, hd), zs, tb, tq0, end, rc = 0;

	prefill_split(g, T, reach, qt, nkv, group, hd, msp, plain, &zs, &tb);
	args[9] = &msp;
	args[10] = &end;
	args[20] = &tq0;
	for (tq0 = 0; !rc && tq0 < T; tq0 += tb) {
		end = T - tq0 < tb ? T : tq0 + tb;
		rc = coli_gpu_launch(g, g->f_attn_prefill[mode][hd == 128],
		                     (unsigned)((end - tq0 + qt - 1) / qt), (unsigned)nkv,
		                     (unsigned)zs, THREADS, AP_SMEM(hd), args,
		                     "launch attention prefill");
	}
	return rc;
}

/* The CTAs that share a decode launch's fold of each query's splits
 * (arrival_share, ptx/common/last_arrival.cuh): a share waits for the
 * query's other splits, so the shares that may wait at once (ways - 1 a
 * (query, CTA row) pair) stay under half of the CTAs the GPU holds, and a
 * CTA they wait for always finds an SM. (Which CTAs fold changes no bits.)
 * H100, qwen3-30b shape: the fold of a decode step after 32k positions
 * (66 splits of 8 heads) on one CTA was 8 of the layer's 40.6 us
 * (docs/perf/history/2026-12-07.md). */
static int tc_ways(const coli_gpu_t *g, int held, long pairs)
{
	int w = g->attn_ways;

	while (w > 1 && pairs * (w - 1) * 2 > held)
		w--;
	return w > 1 ? w : 1;
}

/* coli_attn_tc (bf16 and q8 caches, hd 64 and 128): one kernel for decode
 * and prefill, so a query's bits are the same in either. A prefill batch of
 * one sequence (AP_MIN_T queries or more, unless COLI_GPU_PREFILL_OFF)
 * goes in tiles of COLI_GPU_TC_COLS / group queries, split over CTAs as
 * attention_prefill splits (plain: a window or sinks, never); a batch that
 * does not split takes coli_attn_tcp instead (COLI_GPU_PREFILL_ROWS, where
 * the GPU gives a block its shared memory): tiles of COLI_GPU_TCP_ROWS /
 * group queries, the same bits (ptx/attn/attn_tcp.cuh). Otherwise a tile a
 * query, its positions over min(max_splits, chunks of reach) CTAs, its heads
 * over hs of them at short reach, queries in batches whose partials and
 * counters fit. */
static int attention_tc(coli_gpu_t *g, void **args, int T, int reach, int nkv, int group, int hd,
                        int mode, int whole, int plain)
{
	int qt = 1, hs = 1, msp = max_splits(g, nkv, group, hd), zs, tb, tq0, end, ways = 1, rc = 0;
	CUfunction f = g->f_attn_tc[mode][hd == 128];
	int smem = tc_smem(hd, mode);

	if (whole) {
		qt = COLI_GPU_TC_COLS / group;
		prefill_split(g, T, reach, qt, nkv, group, hd, msp, plain, &zs, &tb);
		if (zs == 1 && g->f_attn_tcp[mode][hd == 128] &&
		    g->attn_prefill == COLI_GPU_PREFILL_ROWS) {
			f = g->f_attn_tcp[mode][hd == 128];
			smem = tcp_smem(hd, mode);
			qt = COLI_GPU_TCP_ROWS / group;
		}
	} else {
		decode_split(g, T, reach, nkv, group, hd, msp, &hs, &zs, &tb);
		ways = tc_ways(g, g->tc_held[mode][hd == 128] * g->sm_count,
		               (long)(T < tb ? T : tb) * nkv * hs);
	}
	args[9] = &msp;
	args[10] = &end;
	args[21] = &tq0;
	args[22] = &qt;
	args[23] = &ways;
	for (tq0 = 0; !rc && tq0 < T; tq0 += tb) {
		end = T - tq0 < tb ? T : tq0 + tb;
		rc = coli_gpu_launch(g, f, (unsigned)((end - tq0 + qt - 1) / qt),
		                     (unsigned)(nkv * hs), (unsigned)zs, THREADS, (unsigned)smem,
		                     args, "launch attention (tensor cores)");
	}
	return rc;
}

void coli_gpu_attn_prefill(coli_gpu_t *g, int level)
{
	g->attn_prefill = level;
}

void coli_gpu_attn_ways(coli_gpu_t *g, int ways)
{
	g->attn_ways = ways > 0 ? ways : COLI_GPU_ATTN_WAYS;
}

/* Grid (splits, nkv, T). hd a power of two from 32 to 256: coli_attn_chunks
 * (above). Otherwise coli_attention's tiles: few queries split so that about
 * two CTAs per SM run, each at least one tile; many (prefill): one CTA per
 * (query, kv head) walks all its positions, no partials. */
int coli_gpu_attention(coli_gpu_t *g, uint64_t q, uint64_t K, uint64_t V, uint64_t out, int T,
                       int pos0, uint64_t posp, int span, int nh, int nkv, int hd, float scale,
                       uint64_t aq, uint64_t ad, uint64_t aqs)
{
	return coli_gpu_attention_kv(g, q, K, V, out, T, pos0, posp, span, nh, nkv, hd, scale, aq,
	                             ad, aqs, 0, 0, 0, 0, 0, 0, 0);
}

/* Several sequences (rows): pos0 is the launch's furthest position + 1 (the
 * longest query's positions), and a capture's grid covers its bucket. */
static int reach_rows(const coli_gpu_t *g, int n, int span)
{
	return g->capturing ? coli_gpu_attn_reach(n, span) : n;
}

/* The kernel of the cache's KV mode: the same split, the loads typed. */
int coli_gpu_attention_kv(coli_gpu_t *g, uint64_t q, uint64_t K, uint64_t V, uint64_t out, int T,
                          int pos0, uint64_t posp, int span, int nh, int nkv, int hd, float scale,
                          uint64_t aq, uint64_t ad, uint64_t aqs, int kt, int vt, uint64_t sinks,
                          int window, uint64_t rows, uint64_t tab, int nbs)
{
	const int mode = coli_gpu_kv_mode(kt, vt);
	CUdeviceptr a = q, b = K, c = V, d = out, p = posp, part = g->scratch, cnt = g->counts;
	CUdeviceptr qa = aq, qd = ad, qs = aqs, sk = sinks, r = rows, tb = tab;
	int group, tiles, splits = 1, tps, rc;
	long base, want = 2L * g->sm_count;
	/* coli_attn_chunks' parameters; coli_attention takes the first 13, then
	 * the sinks, the window, the rows and the table */
	void *args[] = {&a,   &b,   &c,   &d,  &pos0, &p,  &nh, &nkv,    &hd, &scale, &tps, &part,
	                &cnt, NULL, NULL, &qa, &qd,   &qs, &sk, &window, &r,  &tb,    &nbs};
	void *targs[] = {&a,     &b,   &c,    &d,   &pos0, &p,      &nh, &nkv, &hd,
	                 &scale, &tps, &part, &cnt, &sk,   &window, &r,  &tb,  &nbs};

	if (T <= 0 || nkv <= 0 || nh % nkv || hd <= 0 || hd % 4 || (posp && span < T) ||
	    (aq && (nh * hd) % 32) || window < 0 || (rows && span < 1) || nbs < 0 ||
	    (rows && !tab && !nbs))
		return -EINVAL;
	group = nh / nkv;
	if (group > AT_MAXG || group * hd > AT_MAXQ || mode < 0)
		return -ENOTSUP; /* the shared-memory q block of attention.cu; a KV pair with
		                  * no kernels */
	if ((hd == 64 || hd == 128) && g->f_attn_tc[mode][hd == 128] && nh <= DENSE_COUNTERS) {
		void *ta[] = {&a,     &b,   &c,   &d,    &pos0, &p,   &nh,  &nkv,
		              &scale, NULL, NULL, &qa,   &qd,   &qs,  &sk,  &window,
		              &r,     &tb,  &nbs, &part, &cnt,  NULL, NULL, NULL};
		const int whole = !rows && T >= AP_MIN_T && g->attn_prefill != COLI_GPU_PREFILL_OFF;

		/* (a captured prefill does not split: its reach is not known) */
		return attention_tc(g, ta, T,
		                    whole && posp && g->capturing ? 0
		                    : rows                        ? reach_rows(g, pos0, span)
		                    : posp && g->capturing        ? coli_gpu_attn_reach(pos0 + T, span)
		                                                  : pos0 + T,
		                    nkv, group, hd, mode, whole, window > 0 || sinks);
	}
	/* (a prefill CTA's queries share their K/V chunks: one sequence's) */
	if (!rows && T >= AP_MIN_T && (hd == 64 || hd == 128) && AP_ROWS(hd) % group == 0 &&
	    g->f_attn_prefill[mode][hd == 128] && g->attn_prefill != COLI_GPU_PREFILL_OFF) {
		void *pa[] = {&a,  &b,  &c,  &d,      &pos0, &p,  &nh,    &nkv,  &scale, NULL, NULL,
		              &qa, &qd, &qs, &sk,     &window, &tb, &nbs, &part, &cnt,  NULL};

		return attention_prefill(g, pa, T, posp && g->capturing ? 0 : pos0 + T, nkv, group,
		                         hd, mode, window > 0 || sinks);
	}
	if (hd % 32 == 0 && THREADS % hd == 0 && nh <= DENSE_COUNTERS)
		return attention_chunks(g, args, T,
		                        rows                   ? reach_rows(g, pos0, span)
		                        : posp && g->capturing ? coli_gpu_attn_reach(pos0 + T, span)
		                                               : pos0 + T,
		                        nkv, group, hd, mode);
	base = (long)T * nkv;
	tiles = ((posp || rows ? span : pos0 + T) + AT_TILE - 1) / AT_TILE;
	if (base < want && base <= DENSE_COUNTERS) {
		size_t per = (size_t)base * ((size_t)group * hd + 2 * group); /* floats a split */

		splits = (int)((want + base - 1) / base);
		splits = splits < tiles ? splits : tiles;
		while (splits > 1 && (size_t)splits * per > DENSE_SCRATCH_FLOATS)
			splits--;
	}
	tps = (tiles + splits - 1) / splits;
	splits = (tiles + tps - 1) / tps; /* no split starts past the last position */
	rc = coli_gpu_launch(g, g->f_attn[mode], (unsigned)splits, (unsigned)nkv, (unsigned)T, 256,
	                     0, targs, "launch attention");
	/* coli_attention's items do not make whole blocks a warp: quantize apart */
	return rc || !aq ? rc : coli_gpu_act_quantize(g, out, aq, ad, aqs, T * nh * hd / 32);
}

#else
#define NO_GPU return -ENODEV
int coli_gpu_attention(coli_gpu_t *g, uint64_t q, uint64_t K, uint64_t V, uint64_t o, int T, int p,
                       uint64_t pp, int span, int nh, int nkv, int hd, float s, uint64_t aq,
                       uint64_t ad, uint64_t aqs)
{
	NO_GPU;
}
int coli_gpu_attention_kv(coli_gpu_t *g, uint64_t q, uint64_t K, uint64_t V, uint64_t o, int T,
                          int p, uint64_t pp, int span, int nh, int nkv, int hd, float s,
                          uint64_t aq, uint64_t ad, uint64_t aqs, int kt, int vt, uint64_t sk,
                          int w, uint64_t rows, uint64_t tab, int nbs)
{
	NO_GPU;
}
void coli_gpu_attn_prefill(coli_gpu_t *g, int level)
{
	(void)g, (void)level;
}
void coli_gpu_attn_ways(coli_gpu_t *g, int ways)
{
	(void)g, (void)ways;
}
#endif
