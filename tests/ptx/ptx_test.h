/*
 * tests/ptx/ptx_test.h — what the GPU kernel tests share: a xorshift draw,
 * the device (GPU 0, or exit 77 with one line saying why there is none), and
 * device buffers filled from the host or poisoned (0xff bytes = NaN floats),
 * random matrices of GGUF's block types (random_blocks).
 * Define PTX_TEST_SEED before including to pick the draw's seed.
 */
#ifndef COLI_TESTS_PTX_TEST_H
#define COLI_TESTS_PTX_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h" /* the CPU reference the kernels must match */
#include "ptx/ptx.h"

#ifndef PTX_TEST_SEED
#define PTX_TEST_SEED 0x2545f4914f6cdd1dULL
#endif

static uint64_t g_rng = PTX_TEST_SEED;
static coli_gpu_t *g_gpu;

static uint64_t rnd(void)
{
	g_rng ^= g_rng << 13;
	g_rng ^= g_rng >> 7;
	g_rng ^= g_rng << 17;
	return g_rng;
}

static inline float frand(void) /* uniform [-1, 1) */
{
	return (float)((rnd() >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

/* Opens GPU 0 into g_gpu: 0, or the exit code (77 none here, 1 failed). */
static int ptx_test_open(void)
{
	const char *why;
	char err[512] = "";

	if (coli_ptx_probe(&why) == 0) {
		printf("no GPU: %s\n", why);
		return 77;
	}
	if (coli_gpu_open(0, 0, &g_gpu, err, sizeof(err))) {
		printf("GPU 0 did not open: %s\n", err);
		return 1;
	}
	printf("device: %s\n", coli_gpu_name(g_gpu));
	return 0;
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

static inline void download(void *dst, uint64_t src, size_t n)
{
	if (coli_gpu_download(g_gpu, dst, src, n)) {
		fprintf(stderr, "download failed\n");
		exit(1);
	}
}

static inline uint64_t dev_copy(const void *p, size_t n)
{
	uint64_t d = 0;

	if (coli_gpu_alloc(g_gpu, n ? n : 1, &d) || (n && coli_gpu_upload(g_gpu, d, p, n))) {
		fprintf(stderr, "device allocation/upload of %zu bytes failed\n", n);
		exit(1);
	}
	return d;
}

static inline uint64_t dev_poison(size_t n)
{
	uint64_t d = 0;

	if (coli_gpu_alloc(g_gpu, n ? n : 1, &d) || coli_gpu_memset(g_gpu, d, 0xff, n)) {
		fprintf(stderr, "device allocation of %zu bytes failed\n", n);
		exit(1);
	}
	return d;
}

/* n values quantized per 32-block on the device (a kernel's quantized
 * output: int8 rows, block scales, block sums), poisoned until written. */
struct dev_act {
	uint64_t q, d, qsum;
	size_t n;
};

static inline struct dev_act dev_act_poison(size_t n)
{
	return (struct dev_act){dev_poison(n), dev_poison(4 * (n / 32)), dev_poison(4 * (n / 32)),
	                        n};
}

static inline void dev_act_free(struct dev_act a)
{
	coli_gpu_free(g_gpu, a.q), coli_gpu_free(g_gpu, a.d), coli_gpu_free(g_gpu, a.qsum);
}

/* 1 when a's rows are not coli_act_quantize's of x[a.n], byte for byte. */
static inline int dev_act_differs(struct dev_act a, const float *x)
{
	const size_t nb = a.n / 32;
	struct coli_act ref = {.q = xmalloc(a.n), .d = xmalloc(4 * nb), .qsum = xmalloc(4 * nb)};
	struct coli_act dev = {.q = xmalloc(a.n), .d = xmalloc(4 * nb), .qsum = xmalloc(4 * nb)};
	int bad;

	download(dev.q, a.q, a.n);
	download(dev.d, a.d, 4 * nb);
	download(dev.qsum, a.qsum, 4 * nb);
	coli_act_quantize(&ref, x, (int)a.n);
	bad = memcmp(ref.q, dev.q, a.n) || memcmp(ref.d, dev.d, 4 * nb) ||
	      memcmp(ref.qsum, dev.qsum, 4 * nb);
	free(ref.q), free(ref.d), free(ref.qsum), free(dev.q), free(dev.d), free(dev.qsum);
	return bad;
}

/* How many of n floats of a and b differ in their bytes (0: identical). */
static inline size_t bytes_differ(const float *a, const float *b, size_t n)
{
	size_t bad = 0;

	if (!memcmp(a, b, sizeof(float) * n))
		return 0;
	for (size_t i = 0; i < n; i++)
		bad += memcmp(&a[i], &b[i], sizeof(float)) != 0;
	return bad;
}

/* A rows x K matrix of a GGUF block type (cpu/kquant/kquant.c's table) as
 * random bytes, its fp16 scale fields (d, and m / dmin where the type has
 * one) drawn in [2^-10, 2^-5) with a random sign: every quant and packed
 * scale pattern, never an Inf or NaN scale. coli has no encoder for these
 * types; random blocks are what a kernel must read like the CPU. */
static inline void random_blocks(enum coli_dtype t, void *w, int rows, int K)
{
	static const struct {
		enum coli_dtype t;
		int halves[2]; /* byte offsets of the block's fp16 fields, -1: none */
	} f[] = {{COLI_DTYPE_Q4_1, {0, 2}},    {COLI_DTYPE_Q5_0, {0, -1}},
	         {COLI_DTYPE_Q5_1, {0, 2}},    {COLI_DTYPE_Q2_K, {80, 82}},
	         {COLI_DTYPE_Q3_K, {108, -1}}, {COLI_DTYPE_Q4_K, {0, 2}},
	         {COLI_DTYPE_Q5_K, {0, 2}},    {COLI_DTYPE_Q6_K, {208, -1}}};
	unsigned elems, bytes;
	unsigned char *p = w;
	size_t n;

	if (coli_dtype_block(t, &elems, &bytes))
		exit(1);
	n = (size_t)rows * (K / elems);
	for (size_t i = 0; i < n * bytes; i++)
		p[i] = (unsigned char)rnd();
	for (size_t k = 0; k < sizeof(f) / sizeof(f[0]); k++)
		if (f[k].t == t)
			for (size_t b = 0; b < n; b++)
				for (int h = 0; h < 2; h++)
					if (f[k].halves[h] >= 0) {
						/* exponent 5..9 (2^-10..2^-6), any mantissa */
						unsigned v = (unsigned)(rnd() & 0x83ff) |
						             (unsigned)(5 + rnd() % 5) << 10;

						p[b * bytes + f[k].halves[h]] = (unsigned char)v;
						p[b * bytes + f[k].halves[h] + 1] =
						    (unsigned char)(v >> 8);
					}
}

#endif
