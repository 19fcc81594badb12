/*
 * cpu/ops.c — the dense elementwise ops of the forward pass: a portable exp,
 * SwiGLU's silu(g)*u, RMSNorm, softmax.
 *
 * coli_expf (its steps: cpu/attn_head.h) is written with IEEE-exact steps
 * only (one rounded multiply, floor, fmaf Cody-Waite reduction, a degree-7
 * Horner polynomial in fmaf, scaling by an exact power of two), so the GPU's
 * copy of it and the AVX2 lanes give the same bits; libm's
 * expf and CUDA's expf differ in the last ulp on some inputs. Max error vs the
 * true exp is about 1 ulp on [-87, 88.7].
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/attn_head.h"

float coli_expf(float x)
{
	return expf_steps(x);
}

void coli_silu_mul_ref(const float *g, const float *u, float *h, int n)
{
	for (int i = 0; i < n; i++)
		h[i] = g[i] / (1.0f + coli_expf(-g[i])) * u[i];
}

void coli_swiglu_oai(const float *g, const float *u, float *h, int n, float alpha, float limit)
{
	for (int i = 0; i < n; i++) {
		float gc = g[i] < limit ? g[i] : limit; /* gate.clamp(max=limit) */
		float uc = u[i] < -limit ? -limit : u[i] > limit ? limit : u[i];
		float sig = 1.0f / (1.0f + coli_expf(-(gc * alpha)));

		h[i] = (uc + 1.0f) * (gc * sig);
	}
}

void coli_rmsnorm(const float *x, const float *w, float *y, int n, float eps)
{
	double ss = 0;
	float inv;

	for (int i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	inv = (float)(1.0 / sqrt(ss / n + eps));
	for (int i = 0; i < n; i++)
		y[i] = w ? w[i] * (x[i] * inv) : x[i] * inv;
}

void coli_softmax(float *x, int n)
{
	float mx = x[0];
	double sum = 0;

	for (int i = 1; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	for (int i = 0; i < n; i++) {
		x[i] = expf(x[i] - mx);
		sum += x[i];
	}
	for (int i = 0; i < n; i++)
		x[i] = (float)(x[i] / sum);
}

#define ARGMAX_BLOCK 512

int coli_argmax(const float *x, int n)
{
	float best = n > 0 ? x[0] : 0.0f;
	int b0 = 0;

	if (n <= 0 || best != best)
		return 0;
	/* the block holding the first maximum: the first whose maximum beats
	 * every earlier one; maxima of 8 independent lanes (no chain through
	 * the running index) */
	for (int b = 0; b < n; b += ARGMAX_BLOCK) {
		int e = b + ARGMAX_BLOCK < n ? b + ARGMAX_BLOCK : n, i = b;
		float m[8], bm;

		for (int j = 0; j < 8; j++)
			m[j] = best;
		for (; i + 8 <= e; i += 8)
			for (int j = 0; j < 8; j++)
				m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
		for (; i < e; i++)
			m[0] = x[i] > m[0] ? x[i] : m[0];
		bm = m[0];
		for (int j = 1; j < 8; j++)
			bm = m[j] > bm ? m[j] : bm;
		if (bm > best) {
			best = bm;
			b0 = b;
		}
	}
	for (int i = b0; i < n; i++)
		if (x[i] == best)
			return i;
	return 0;
}

void coli_exp_scaled_ref(const float *x, int n, float m, float s, float *w)
{
	for (int i = 0; i < n; i++) {
		float v = (x[i] - m) * s, fx, z, y;
		int under = v < COLI_EXP_LO;
		uint32_t e;

		v = v > COLI_EXP_LO ? v : COLI_EXP_LO; /* as _mm256_max_ps(v, lo) */
		fx = rintf(v * COLI_EXP_LOG2E);
		v = fmaf(-fx, COLI_EXP_C1, v);
		v = fmaf(-fx, COLI_EXP_C2, v);
		z = v * v;
		y = COLI_EXP_P0;
		y = fmaf(y, v, COLI_EXP_P1);
		y = fmaf(y, v, COLI_EXP_P2);
		y = fmaf(y, v, COLI_EXP_P3);
		y = fmaf(y, v, COLI_EXP_P4);
		y = fmaf(y, v, COLI_EXP_P5);
		y = fmaf(y, z, v) + 1.0f;
		e = (uint32_t)((int)fx + 127) << 23;
		memcpy(&fx, &e, 4);
		w[i] = under ? 0.0f : y * fx;
	}
}

void coli_route(float *p, int E, int K, int norm, int *sel, float *w)
{
	coli_softmax(p, E);
	for (int j = 0; j < K; j++) {
		int best = -1;

		for (int i = 0; i < E; i++) {
			int taken = 0;

			for (int q = 0; q < j; q++)
				taken |= sel[q] == i;
			if (!taken && (best < 0 || p[i] > p[best]))
				best = i;
		}
		sel[j] = best;
		w[j] = p[best];
	}
	if (norm) {
		float sum = 0;

		for (int j = 0; j < K; j++)
			sum += w[j];
		for (int j = 0; j < K; j++)
			w[j] /= sum;
	}
}

/* The index of the largest x[i] not taken (the lower id on ties), marked
 * taken; -1 when every one is. */
static int best_free(const float *x, int n, unsigned char *taken)
{
	int best = -1;

	for (int i = 0; i < n; i++)
		if (!taken[i] && (best < 0 || x[i] > x[best]))
			best = i;
	if (best >= 0)
		taken[best] = 1;
	return best;
}

/* Group limiting: the topk_group groups with the best (top-1 + top-2) of
 * choice[] are kept, the other experts' choice scores set to -inf. */
static void route_groups(float *choice, int E, int n_group, int topk_group)
{
	static _Thread_local float gscore[COLI_ROUTE_MAX_E];
	static _Thread_local unsigned char taken[COLI_ROUTE_MAX_E];
	int gs = E / n_group;

	for (int g = 0; g < n_group; g++) {
		const float *c = choice + (size_t)g * gs;
		int a = 0, b = -1;

		for (int i = 1; i < gs; i++)
			if (c[i] > c[a])
				a = i;
		for (int i = 0; i < gs; i++)
			if (i != a && (b < 0 || c[i] > c[b]))
				b = i;
		gscore[g] = c[a] + c[b];
	}
	memset(taken, 0, (size_t)n_group);
	for (int j = 0; j < topk_group; j++)
		best_free(gscore, n_group, taken);
	for (int g = 0; g < n_group; g++)
		if (!taken[g])
			for (int i = 0; i < gs; i++)
				choice[(size_t)g * gs + i] = -INFINITY;
}

void coli_route_sigmoid(float *p, int E, int K, const struct coli_route_sig *r, int *sel, float *w)
{
	static _Thread_local float choice[COLI_ROUTE_MAX_E];
	static _Thread_local unsigned char taken[COLI_ROUTE_MAX_E];

	for (int i = 0; i < E; i++) {
		p[i] = 1.0f / (1.0f + expf(-p[i]));
		choice[i] = r->bias ? p[i] + r->bias[i] : p[i];
	}
	if (r->n_group > 1)
		route_groups(choice, E, r->n_group, r->topk_group);
	memset(taken, 0, (size_t)E);
	for (int j = 0; j < K; j++) {
		sel[j] = best_free(choice, E, taken);
		w[j] = p[sel[j]];
	}
	if (r->norm) {
		float sum = 0;

		for (int j = 0; j < K; j++)
			sum += w[j];
		sum += 1e-20f;
		for (int j = 0; j < K; j++)
			w[j] /= sum;
	}
	for (int j = 0; j < K; j++)
		w[j] *= r->scale;
}

void coli_rope(float *x, int T, int nh, int hd, int pos0, const float *inv_freq)
{
	coli_rope_part(x, T, nh, hd, hd, pos0, inv_freq);
}

void coli_rope_part(float *x, int T, int nh, int hd, int rd, int pos0, const float *inv_freq)
{
	int half = rd / 2;

	for (int t = 0; t < T; t++) {
		float p = (float)(pos0 + t);

		for (int i = 0; i < half; i++) {
			float ang = p * inv_freq[i];
			float cs = (float)cos((double)ang), sn = (float)sin((double)ang);

			for (int h = 0; h < nh; h++) {
				float *v = x + ((size_t)t * nh + h) * hd;
				float x1 = v[i], x2 = v[i + half];

				v[i] = x1 * cs - x2 * sn;
				v[i + half] = x2 * cs + x1 * sn;
			}
		}
	}
}

void coli_mla_rope(float *kva, float *q, const float *w, const float *inv_freq, int T, int nh,
                   int np, int kl, int r, int pos0, float eps, float f)
{
	const int kr = kl + r, hd = np + r;

	for (int t = 0; t < T; t++)
		coli_rmsnorm(kva + (size_t)t * kr, w, kva + (size_t)t * kr, kl, eps);
	coli_rope_part(kva + kl, T, 1, kr, r, pos0, inv_freq);
	coli_rope_part(q + np, T, nh, hd, r, pos0, inv_freq);
	if (f == 1.0f)
		return;
	for (int t = 0; t < T; t++) {
		for (int d = kl; d < kr; d++)
			kva[(size_t)t * kr + d] *= f;
		for (int h = 0; h < nh; h++)
			for (int d = np; d < hd; d++)
				q[((size_t)t * nh + h) * hd + d] *= f;
	}
}

void coli_attention_head(const float *q, const float *K, const float *V, int n_pos, int stride,
                         int hd, int vd, float scale, float *scores, float *out)
{
	coli_attention_head_sink(q, K, V, n_pos, stride, hd, vd, scale, -INFINITY, scores, out);
}

void coli_attention_head_sink(const float *q, const float *K, const float *V, int n_pos, int stride,
                              int hd, int vd, float scale, float sink, float *scores, float *out)
{
	const struct coli_kv_rows kr = {.p = K, .stride = sizeof(float) * (size_t)stride},
	                          vr = {.p = V, .stride = sizeof(float) * (size_t)stride};

	coli_attention_head_kv(q, &kr, &vr, n_pos, hd, vd, scale, sink, scores, out);
}

/* One head's steps (cpu/attn_head.h): with AVX2 its copy compiled with
 * hardware fma (cpu/attn/attention_avx2.c), else this one (fmaf from libm); the same
 * bits. */
void coli_attention_head_kv(const float *q, const struct coli_kv_rows *K,
                            const struct coli_kv_rows *V, int n_pos, int hd, int vd, float scale,
                            float sink, float *scores, float *out)
{
	if (coli_cpu_isa() >= COLI_CPU_ISA_AVX2) {
		coli_attention_head_avx2(q, K, V, n_pos, hd, vd, scale, sink, scores, out);
		return;
	}
	attention_head_steps(q, K, V, n_pos, hd, vd, scale, sink, scores, out);
}
