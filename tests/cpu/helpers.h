/*
 * tests/cpu/helpers.h — what the cpu/ tests share: a seeded RNG, random
 * matrices/activations in every format, and the ISA loop.
 */
#ifndef COLI_TESTS_CPU_HELPERS_H
#define COLI_TESTS_CPU_HELPERS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static inline uint64_t rng_u64(void)
{
	/* splitmix64 */
	uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline float rng_uniform(void) /* [-1, 1) */
{
	return (float)((double)(rng_u64() >> 40) / (double)(1ull << 23) - 1.0);
}

static inline float rng_normalish(void)
{
	return (rng_uniform() + rng_uniform() + rng_uniform()) * 0.6f;
}

static inline void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return p;
}

/* A random rows x K matrix in format t: quantized from random floats, or,
 * when raw != 0 and t is quantized, raw random quants (any byte, -128 too)
 * with random finite fp16 scales. Returns the buffer; fills *m. */
static inline void *rand_mat(struct coli_mat *m, enum coli_dtype t, int rows, int K, int raw)
{
	size_t bytes = coli_dtype_mat_bytes(t, rows, K);
	float *src = xmalloc((size_t)rows * K * sizeof(float));
	uint8_t *buf = xmalloc(bytes);
	float scale = 0.05f + (float)(rng_u64() % 100) * 0.01f;

	for (size_t i = 0; i < (size_t)rows * K; i++)
		src[i] = rng_normalish() * scale;
	if (coli_quantize_mat(t, src, rows, K, buf)) {
		fprintf(stderr, "coli_quantize_mat(%s, %dx%d) failed\n", coli_dtype_name(t), rows,
		        K);
		exit(1);
	}
	coli_mat_view(m, t, rows, K, buf);
	if (raw && coli_dtype_is_quant(t)) {
		size_t nq =
		    (size_t)(t == COLI_DTYPE_Q8_0 ? rows * (size_t)K : rows * (size_t)K / 2);
		for (size_t i = 0; i < nq; i++)
			buf[i] = (uint8_t)rng_u64();
		for (size_t i = 0; i < (size_t)rows * (K / 32); i++)
			((uint16_t *)m->scales)[i] = coli_f32_to_fp16(rng_uniform() * 0.01f);
	}
	free(src);
	return buf;
}

/* Activation buffers for length K. */
struct test_act {
	struct coli_act a;
	float *x;
};

static inline void act_alloc(struct test_act *t, int K)
{
	t->x = xmalloc((size_t)K * sizeof(float));
	t->a.q = xmalloc((size_t)K);
	t->a.d = xmalloc((size_t)(K / 32 + 1) * sizeof(float));
	t->a.qsum = xmalloc((size_t)(K / 32 + 1) * sizeof(int32_t));
}

static inline void act_rand(struct test_act *t, int K)
{
	float scale = 0.1f + (float)(rng_u64() % 300) * 0.01f;
	for (int k = 0; k < K; k++)
		t->x[k] = rng_normalish() * scale;
	if (rng_u64() % 4 == 0) /* a block of zeros: d = 0 */
		memset(t->x, 0, (size_t)(K < 32 ? K : 32) * sizeof(float));
	coli_act_quantize(&t->a, t->x, K);
}

static inline void act_free(struct test_act *t)
{
	free(t->x);
	free(t->a.q);
	free(t->a.d);
	free(t->a.qsum);
}

static inline void poison(float *y, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = NAN;
}

static const enum coli_dtype g_dtypes[] = {COLI_DTYPE_F32, COLI_DTYPE_F16, COLI_DTYPE_BF16,
                                           COLI_DTYPE_Q8_0, COLI_DTYPE_Q4_0};
#define N_DTYPES ((int)(sizeof(g_dtypes) / sizeof(g_dtypes[0])))

#endif
