/*
 * cpu/attn_head.h — the steps of coli_expf and of one attention head over a
 * (typed) KV cache, as static inline functions that cpu/ops.c compiles for
 * any x86-64 (fmaf a libm call) and cpu/attn/attention_avx2.c with hardware fma: fmaf
 * is one IEEE rounding either way, so both copies give the same bits, and a
 * host with AVX2 runs the fast one. And the prefetch the attention kernels
 * issue ahead of a strided walk over the cache's rows.
 */
#ifndef COLI_CPU_ATTN_HEAD_H
#define COLI_CPU_ATTN_HEAD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu_internal.h"

/* Positions ahead whose row a kernel asks the cache for, where a head's
 * elements are half a row or less (qwen3-30b's four kv heads: 256 of a
 * row's 1,024 bytes; the demo's two: 128 of 256): a strided stream the
 * hardware prefetchers follow poorly (a contiguous one needs no help: there
 * they cost 7-15%). 8 to 32 ahead measured alike (docs/perf/kernels.md). */
#define KV_PF_AHEAD 16

/* Positions whose value rows the outputs' kernels share (a tile, at most):
 * each slice of dims walks them from L1 (8 KB of bf16 rows at 128 dims). */
#define ATT_TILE 32

/* Whether r's rows hold at least twice the n elements a head reads. */
static inline int kv_strided(const struct coli_kv_rows *r, int n)
{
	return r->stride >= 2 * coli_kv_elem_bytes(r->type) * (size_t)n;
}

/* Whether elements [i0, i0 + n) of r's q8 rows share one scale (a GQA
 * head's segment): the kernels then widen and scale them in registers. */
static inline int kv_q8_one_scale(const struct coli_kv_rows *r, int i0, int n)
{
	return r->type == COLI_KV_Q8 && i0 / r->seg == (i0 + n - 1) / r->seg;
}

/* The scale of element i0's segment in a q8 row. */
static inline float kv_q8_scale(const struct coli_kv_rows *r, const char *row, int i0)
{
	return ((const float *)(row + r->soff))[i0 / r->seg];
}

/* One line into the cache: prefetcht0 as an asm statement (gcc 12 deleted
 * __builtin_prefetch and _mm_prefetch from these loops). */
static inline void kv_prefetch_line(const char *a)
{
	__asm__ volatile("prefetcht0 %0" : : "m"(*a));
}

/* Elements [i0, i0 + n) of position p's row (and a q8 row's scales) asked
 * for: the lines a later read will take. */
static inline void kv_prefetch(const struct coli_kv_rows *r, size_t p, int i0, int n)
{
	const char *row = coli_kv_rows_ptr(r, p);
	const int esz = (int)coli_kv_elem_bytes(r->type);

	for (int b = i0 * esz; b < (i0 + n) * esz; b += 64)
		kv_prefetch_line(row + b);
	if (r->type == COLI_KV_Q8)
		kv_prefetch_line(row + r->soff);
}

/* Part k of `parts` of the rows [t, t + tile) (none from `end` on), their
 * elements [i0, i0 + n) asked for. The outputs' kernels walk a tile of
 * positions once per slice of dims (a row's slices far apart in time), so
 * they fetch the next tile a part before each slice: the requests spread
 * over the tile's work instead of a burst the line-fill buffers drop (one
 * core of a Zen 4 read a contiguous bf16 cache from DRAM at 5.5 GB/s
 * prefetching rows 16 positions ahead, 7.5 so: docs/perf/kernels.md). */
static inline void kv_prefetch_part(const struct coli_kv_rows *r, int t, int tile, int end, int k,
                                    int parts, int i0, int n)
{
	const int per = (tile + parts - 1) / parts, p0 = t + k * per;

	for (int p = p0; p < p0 + per && p < t + tile && p < end; p++)
		kv_prefetch(r, (size_t)p, i0, n);
}

/* coli_expf (cpu/cpu.h) */
static inline float expf_steps(float x)
{
	const float log2e = COLI_EXPF_LOG2E;
	const float ln2_hi = COLI_EXPF_LN2_HI; /* 0x3f317200: exact n*ln2_hi for |n| < 2^11 */
	const float ln2_lo = COLI_EXPF_LN2_LO;
	float n, r, p;
	uint32_t bits;
	float scale;

	if (x != x)
		return x;
	if (x > 88.7f)
		return INFINITY;
	if (x < -87.0f)
		return 0.0f;
	n = floorf(x * log2e + 0.5f);
	r = fmaf(-n, ln2_hi, x);
	r = fmaf(-n, ln2_lo, r);
	p = 1.0f / 5040.0f;
	p = fmaf(p, r, 1.0f / 720.0f);
	p = fmaf(p, r, 1.0f / 120.0f);
	p = fmaf(p, r, 1.0f / 24.0f);
	p = fmaf(p, r, 1.0f / 6.0f);
	p = fmaf(p, r, 0.5f);
	p = fmaf(p, r, 1.0f);
	p = fmaf(p, r, 1.0f);
	/* n is in [-126, 128]: 2^n as a normal float; p*2^n rounds at most once. */
	if (n > 127.0f) {
		p *= 2.0f;
		n -= 1.0f;
	}
	bits = (uint32_t)((int)n + 127) << 23;
	memcpy(&scale, &bits, sizeof(scale));
	return p * scale;
}

/* coli_attention_head_kv (cpu/cpu.h). A typed cache's elements are read as
 * fp32 (coli_kv_at: the fp32 cache in place, bf16 and q8 decoded a row at a
 * time into a local), the arithmetic the same for every type. */
static inline void attention_head_steps(const float *q, const struct coli_kv_rows *K,
                                        const struct coli_kv_rows *V, int n_pos, int hd, int vd,
                                        float scale, float sink, float *scores, float *out)
{
	float mx = -INFINITY, sum = 0;
	const int kpf = kv_strided(K, hd), vpf = kv_strided(V, vd);

	for (int p = 0; p < n_pos; p++) {
		float kt[hd];
		const float *k = coli_kv_at(K, p, 0, hd, kt);
		float l[8] = {0}, s;
		int i = 0;

		if (kpf && p + KV_PF_AHEAD < n_pos)
			kv_prefetch(K, (size_t)(p + KV_PF_AHEAD), 0, hd);

		/* eight independent chains of fmas (one vector's lanes; the
		 * adds' latency no longer serializes the dot product) */
		for (; i + 8 <= hd; i += 8)
			for (int j = 0; j < 8; j++)
				l[j] = fmaf(q[i + j], k[i + j], l[j]);
		for (; i < hd; i++)
			l[i & 7] = fmaf(q[i], k[i], l[i & 7]);
		s = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
		scores[p] = s * scale;
		mx = scores[p] > mx ? scores[p] : mx;
	}
	if (sink != -INFINITY) /* none: the bits without */
		mx = sink > mx ? sink : mx;
	for (int p = 0; p < n_pos; p++) {
		scores[p] = expf_steps(scores[p] - mx);
		sum += scores[p];
	}
	if (sink != -INFINITY)
		sum += expf_steps(sink - mx);
	{
		/* each out[i] sums over a block's positions in order, then the
		 * blocks' sums in order; locals the compiler knows are not V let
		 * it do the i's four at a time */
		float acc[vd], blk[vd], vt[vd];

		for (int p0 = 0; p0 < n_pos; p0 += COLI_ATTN_OUT_BLOCK) {
			const int p1 =
			    n_pos - p0 < COLI_ATTN_OUT_BLOCK ? n_pos : p0 + COLI_ATTN_OUT_BLOCK;
			float *b = p0 ? blk : acc;

			memset(b, 0, sizeof(acc));
			for (int p = p0; p < p1; p++) {
				const float *v = coli_kv_at(V, p, 0, vd, vt);
				float w = scores[p] / sum;

				if (vpf && p + KV_PF_AHEAD < n_pos)
					kv_prefetch(V, (size_t)(p + KV_PF_AHEAD), 0, vd);

				for (int i = 0; i < vd; i++)
					b[i] = fmaf(w, v[i], b[i]);
			}
			if (p0)
				for (int i = 0; i < vd; i++)
					acc[i] += blk[i];
		}
		if (n_pos <= 0)
			memset(acc, 0, sizeof(acc));
		memcpy(out, acc, sizeof(acc));
	}
}

#endif
