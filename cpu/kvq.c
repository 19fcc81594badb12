/*
 * cpu/kvq.c — the KV cache's element types (cpu/cpu.h "typed KV cache
 * rows"): storing a row of fp32 keys or values as fp32, bf16 or q8, and
 * reading elements back as fp32 for attention.
 *
 * Row layout, n values in segments of seg dims (the last the remainder):
 *
 *   f32   | x[0] .. x[n-1]          |                      4n bytes
 *   bf16  | b[0] .. b[n-1]          |                      2n bytes
 *   q8    | q[0] .. q[n-1] | pad    | s[0] .. s[nseg-1]  | align4(n) + 4 nseg
 *           int8, q = rint(x / s)     fp32, s = amax / 127 of the segment
 *
 * The q8 choice: one fp32 scale a (token, kv head) row of hd values
 * (hd + 4 bytes at hd 128: 0.26 of fp32), an fp32 scale so that the value
 * read back is one rounded product, the same on every device; MLA's latent
 * row takes two (seg = kv_lora): c_kv is RMS-normed, k_pe is roped raw
 * projection, their ranges differ. The division x / s rather than a
 * multiply by 127 / amax: a device can give the same bits with an IEEE
 * division (__fdiv_rn), no reciprocal to agree on.
 *
 * Reading: bf16 is exact (the bits shifted up); q8 is (float)q * s.
 * coli_kv_rows_at decodes a run of elements of one position into a small
 * buffer (AVX2: eight at a time, the same bits) or, for fp32, points into
 * the cache; attention's arithmetic is then the fp32 path's.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "cpu/cpu_internal.h"

static const char *const k_names[COLI_KV_TYPES] = {"f32", "bf16", "q8"};

int coli_kv_type_parse(const char *s)
{
	for (int t = 0; t < COLI_KV_TYPES; t++)
		if (!strcmp(s, k_names[t]))
			return t;
	return -EINVAL;
}

const char *coli_kv_type_name(int type)
{
	return type >= 0 && type < COLI_KV_TYPES ? k_names[type] : "?";
}

size_t coli_kv_row_bytes(int type, int n, int nseg)
{
	switch (type) {
	case COLI_KV_BF16:
		return 2 * (size_t)n;
	case COLI_KV_Q8:
		return (((size_t)n + 3) & ~(size_t)3) + 4 * (size_t)nseg;
	default:
		return 4 * (size_t)n;
	}
}

void coli_kv_seg_offsets(int type, int n, int g, int hd, size_t *off, int *soff)
{
	*off = (size_t)g * hd * coli_kv_elem_bytes(type);
	*soff = (int)((((size_t)n + 3) & ~(size_t)3) + 4 * (size_t)g - *off);
}

/* One segment x[n] -> q[n] and its scale. */
static float q8_segment(signed char *q, const float *x, int n)
{
	float amax = 0.0f, s;

	for (int i = 0; i < n; i++)
		amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
	s = amax / 127.0f;
	for (int i = 0; i < n; i++) {
		float r = s > 0.0f ? rintf(x[i] / s) : 0.0f;

		q[i] = (signed char)(r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r);
	}
	return s;
}

void coli_kv_row_store(int type, void *dst, const float *x, int n, int seg)
{
	if (type == COLI_KV_BF16) {
		for (int i = 0; i < n; i++)
			((uint16_t *)dst)[i] = coli_f32_to_bf16(x[i]);
	} else if (type == COLI_KV_Q8) {
		signed char *q = dst;
		float *s = (float *)(q + ((n + 3) & ~3));

		for (int i = n; i < ((n + 3) & ~3); i++)
			q[i] = 0;
		for (int i0 = 0, k = 0; i0 < n; i0 += seg, k++)
			s[k] = q8_segment(q + i0, x + i0, n - i0 < seg ? n - i0 : seg);
	} else {
		memcpy(dst, x, sizeof(float) * n);
	}
}

void coli_kv_row_load(int type, const void *row, float *dst, int n, int seg)
{
	struct coli_kv_rows r = {
	    .p = row, .stride = 0, .type = type, .soff = (n + 3) & ~3, .seg = seg};
	const float *v = coli_kv_rows_at(&r, 0, 0, n, dst);

	if (v != dst)
		memcpy(dst, v, sizeof(float) * n);
}

const float *coli_kv_rows_at(const struct coli_kv_rows *r, size_t p, int i0, int n, float *tmp)
{
	const char *row = coli_kv_rows_ptr(r, p);

	if (r->type == COLI_KV_F32)
		return (const float *)row + i0;
	if (coli_cpu_isa() >= COLI_CPU_ISA_AVX2) {
		coli_kv_decode_avx2(r, row, i0, n, tmp);
		return tmp;
	}
	if (r->type == COLI_KV_BF16) {
		for (int i = 0; i < n; i++)
			tmp[i] = coli_bf16_to_f32(((const uint16_t *)row)[i0 + i]);
	} else {
		const float *s = (const float *)(row + r->soff);

		for (int i = 0; i < n; i++)
			tmp[i] = (float)((const signed char *)row)[i0 + i] * s[(i0 + i) / r->seg];
	}
	return tmp;
}

void coli_attention_group_kv(const float *q, int G, const struct coli_kv_rows *K,
                             const struct coli_kv_rows *V, int n_pos, int hd, int vd, float scale,
                             const float *sink, float *scores, float *out)
{
	/* from two heads one walk of the rows for all of them pays (one head:
	 * the head in vectors is twice as fast; docs/perf/kernels.md) */
	if (coli_cpu_isa() >= COLI_CPU_ISA_AVX2 && G >= 2) {
		coli_attention_group_avx2(q, G, K, V, n_pos, hd, vd, scale, sink, scores, out);
		return;
	}
	for (int h = 0; h < G; h++)
		coli_attention_head_kv(q + (size_t)h * hd, K, V, n_pos, hd, vd, scale,
		                       sink ? sink[h] : -INFINITY, scores, out + (size_t)h * vd);
}
