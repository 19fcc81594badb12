/*
 * tests/cpu/quant_roundtrip.c — the weight formats of cpu/dtype.c:
 *  - fp16 <-> f32 and bf16 <-> f32 against independent implementations
 *    written here in double precision (nearest representable value, ties to
 *    even), on all 65536 halves / bfloats, on random floats, and on the
 *    corner cases: rounding ties, overflow to inf, subnormals, NaN, inf, -0;
 *  - Q8_0 / Q4_0 against GGUF's reference quantizers re-implemented here on
 *    GGUF's own block structs (34 / 18 bytes), bit for bit, then checked for
 *    the dequantization error bound;
 *  - the canonical activation quantization (cpu.h) and its error bound;
 *  - names, parsing and sizes.
 */
#include "helpers.h"

static int g_fails;
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			if (g_fails < 20)                                                          \
				fprintf(stderr, __VA_ARGS__);                                      \
			g_fails++;                                                                 \
		}                                                                                  \
	} while (0)

static uint32_t fbits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float bitsf(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* ---- independent half: value of a bit pattern, in double ---- */
static double half_value(uint16_t h)
{
	int e = (h >> 10) & 31, m = h & 1023;
	double v = e == 0    ? ldexp(m, -24)
	           : e == 31 ? (m ? NAN : INFINITY)
	                     : ldexp(1024 + m, e - 25);
	return (h & 0x8000) ? -v : v;
}

/* nearest half to finite f, ties to even, by bisection over the ordered
 * positive patterns 0..0x7bff; beyond the top the halfway point 65520 */
static uint16_t half_nearest(float f)
{
	double a = fabs((double)f);
	uint16_t s = (fbits(f) >> 16) & 0x8000;
	if (a >= 65520.0)
		return s | 0x7c00;
	unsigned lo = 0, hi = 0x7bff;
	while (lo < hi) { /* largest pattern with value <= a */
		unsigned mid = (lo + hi + 1) / 2;
		if (half_value((uint16_t)mid) <= a)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (lo == 0x7bff)
		return s | 0x7bff;
	double d0 = a - half_value((uint16_t)lo), d1 = half_value((uint16_t)(lo + 1)) - a;
	unsigned h = d0 < d1 ? lo : d1 < d0 ? lo + 1 : (lo & 1 ? lo + 1 : lo);
	return (uint16_t)(s | h);
}

/* nearest bf16 to finite f, ties to even */
static uint16_t bf16_nearest(float f)
{
	uint32_t u = fbits(f);
	uint16_t t = u >> 16;
	double a = (double)f, v0 = (double)bitsf((uint32_t)t << 16);
	uint32_t up = (uint32_t)(t + 1) << 16; /* next magnitude (may be inf) */
	double v1 =
	    ((up & 0x7f800000) == 0x7f800000 && (up & 0x7fffff)) ? INFINITY : (double)bitsf(up);
	if ((up & 0x7fffffff) == 0x7f800000) /* rounding past the largest finite */
		v1 = ldexp(1.0, 128) * (a < 0 ? -1 : 1);
	double d0 = fabs(a - v0), d1 = fabs(v1 - a);
	return d0 < d1 ? t : d1 < d0 ? (uint16_t)(t + 1) : (t & 1 ? (uint16_t)(t + 1) : t);
}

static void test_half(void)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float f = coli_fp16_to_f32((uint16_t)h);
		double v = half_value((uint16_t)h);
		if (isnan(v)) {
			CHECK(isnan(f) && (fbits(f) >> 31) == (h >> 15), "fp16 %04x: NaN lost\n",
			      h);
			CHECK((coli_f32_to_fp16(f) & 0x7c00) == 0x7c00 &&
			          (coli_f32_to_fp16(f) & 0x3ff),
			      "fp16 NaN %04x does not round-trip to a NaN\n", h);
			continue;
		}
		CHECK((double)f == v && (fbits(f) >> 31) == (h >> 15), "fp16 %04x -> %g, want %g\n",
		      h, f, v);
		CHECK(coli_f32_to_fp16(f) == h, "fp16 %04x does not round-trip\n", h);
	}
	/* ties and edges */
	struct {
		float f;
		uint16_t h;
	} c[] = {
	    {1.0f + 0x1p-11f, 0x3c00},
	    {1.0f + 3 * 0x1p-11f, 0x3c02},
	    {1.0f + 0x1p-11f + 0x1p-23f, 0x3c01},
	    {65504.0f, 0x7bff},
	    {65519.996f, 0x7bff},
	    {65520.0f, 0x7c00},
	    {1e10f, 0x7c00},
	    {-65520.0f, 0xfc00},
	    {0x1p-24f, 0x0001},
	    {0x1p-25f, 0x0000},
	    {0x1p-25f * 1.0000001f, 0x0001},
	    {3 * 0x1p-25f, 0x0002},
	    {5 * 0x1p-25f, 0x0002},
	    {0x1p-14f, 0x0400},
	    {0x1p-14f - 0x1p-25f, 0x0400},
	    {-0.0f, 0x8000},
	    {INFINITY, 0x7c00},
	    {-INFINITY, 0xfc00},
	    {1e-30f, 0x0000},
	    {-1e-30f, 0x8000},
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		CHECK(coli_f32_to_fp16(c[i].f) == c[i].h, "f32 %a -> fp16 %04x, want %04x\n",
		      c[i].f, coli_f32_to_fp16(c[i].f), c[i].h);
	for (int i = 0; i < 2000000; i++) {
		uint32_t u = (uint32_t)rng_u64();
		if (i & 1) /* concentrate on the half range */
			u = (u & 0x87ffffff) | 0x30000000;
		float f = bitsf(u);
		if (isnan(f))
			continue;
		uint16_t want = isinf(f) ? ((u >> 16) & 0x8000) | 0x7c00 : half_nearest(f);
		CHECK(coli_f32_to_fp16(f) == want, "f32 %a -> fp16 %04x, want %04x\n", f,
		      coli_f32_to_fp16(f), want);
	}
	CHECK((coli_f32_to_fp16(NAN) & 0x7fff) > 0x7c00, "NaN -> fp16 not NaN\n");
	CHECK((coli_f32_to_fp16(bitsf(0x7f800001)) & 0x7fff) > 0x7c00,
	      "signalling NaN with low payload -> fp16 not NaN\n");
}

static void test_bf16(void)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float f = coli_bf16_to_f32((uint16_t)h);
		CHECK(fbits(f) == h << 16, "bf16 %04x widened wrong\n", h);
		if (!isnan(f))
			CHECK(coli_f32_to_bf16(f) == h, "bf16 %04x does not round-trip\n", h);
		else
			CHECK(isnan(coli_bf16_to_f32(coli_f32_to_bf16(f))) &&
			          (coli_f32_to_bf16(f) & 0x40),
			      "bf16 NaN %04x not kept quiet\n", h);
	}
	CHECK(coli_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80, "bf16 tie to even (down) wrong\n");
	CHECK(coli_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82, "bf16 tie to even (up) wrong\n");
	CHECK(coli_f32_to_bf16(bitsf(0x7f7fffff)) == 0x7f80, "bf16 overflow to inf wrong\n");
	CHECK(coli_f32_to_bf16(bitsf(0x7f800001)) == 0x7fc0, "bf16 sNaN not quieted\n");
	CHECK(coli_f32_to_bf16(bitsf(0x00008000)) == 0x0000, "bf16 subnormal tie wrong\n");
	CHECK(coli_f32_to_bf16(bitsf(0x00018000)) == 0x0002, "bf16 subnormal tie up wrong\n");
	for (int i = 0; i < 2000000; i++) {
		float f = bitsf((uint32_t)rng_u64());
		if (isnan(f) || isinf(f))
			continue;
		CHECK(coli_f32_to_bf16(f) == bf16_nearest(f), "f32 %a -> bf16 %04x, want %04x\n", f,
		      coli_f32_to_bf16(f), bf16_nearest(f));
	}
}

/* ---- GGUF's blocks and reference quantizers, as GGUF stores them ---- */
struct gguf_q8_0 {
	uint16_t d;
	int8_t qs[32];
};
struct gguf_q4_0 {
	uint16_t d;
	uint8_t qs[16];
};

static void gguf_quantize_q8_0(const float *x, struct gguf_q8_0 *y, int k)
{
	for (int i = 0; i < k / 32; i++) {
		float amax = 0.0f;
		for (int j = 0; j < 32; j++) {
			const float v = x[i * 32 + j];
			amax = amax > fabsf(v) ? amax : fabsf(v);
		}
		const float d = amax / ((1 << 7) - 1);
		const float id = d ? 1.0f / d : 0.0f;
		y[i].d = half_nearest(d);
		for (int j = 0; j < 32; ++j)
			y[i].qs[j] = (int8_t)roundf(x[i * 32 + j] * id);
	}
}

static void gguf_quantize_q4_0(const float *x, struct gguf_q4_0 *y, int k)
{
	for (int i = 0; i < k / 32; i++) {
		float amax = 0.0f, max = 0.0f;
		for (int j = 0; j < 32; j++) {
			const float v = x[i * 32 + j];
			if (amax < fabsf(v)) {
				amax = fabsf(v);
				max = v;
			}
		}
		const float d = max / -8;
		const float id = d ? 1.0f / d : 0.0f;
		y[i].d = half_nearest(d);
		for (int j = 0; j < 16; ++j) {
			const float x0 = x[i * 32 + j] * id, x1 = x[i * 32 + 16 + j] * id;
			const int8_t a = (int8_t)(x0 + 8.5f), b = (int8_t)(x1 + 8.5f);
			const uint8_t xi0 = a < 15 ? (uint8_t)a : 15,
			              xi1 = b < 15 ? (uint8_t)b : 15;
			y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
		}
	}
}

static void test_quant(void)
{
	const int shapes[][2] = {{1, 32}, {3, 64}, {7, 96}, {16, 2048}, {33, 768}};
	double max_err8 = 0, max_err4 = 0;

	for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++) {
		int rows = shapes[si][0], K = shapes[si][1], nb = K / 32;
		size_t n = (size_t)rows * K;
		float *x = xmalloc(n * 4), *row = xmalloc((size_t)K * 4);
		uint8_t *b8 = xmalloc(coli_dtype_mat_bytes(COLI_DTYPE_Q8_0, rows, K));
		uint8_t *b4 = xmalloc(coli_dtype_mat_bytes(COLI_DTYPE_Q4_0, rows, K));
		struct gguf_q8_0 *g8 = xmalloc((size_t)rows * nb * sizeof(*g8));
		struct gguf_q4_0 *g4 = xmalloc((size_t)rows * nb * sizeof(*g4));
		struct coli_mat m8, m4;

		for (size_t i = 0; i < n; i++)
			x[i] = rng_normalish() * (i % 97 == 0 ? 40.0f : 0.3f);
		for (int i = 0; i < K && i < 64; i++) /* zero block, exact ties */
			x[i] = i < 32 ? 0.0f : (float)(i - 48) * 0.5f;
		CHECK(!coli_quantize_mat(COLI_DTYPE_Q8_0, x, rows, K, b8), "q8 quantize failed\n");
		CHECK(!coli_quantize_mat(COLI_DTYPE_Q4_0, x, rows, K, b4), "q4 quantize failed\n");
		coli_mat_view(&m8, COLI_DTYPE_Q8_0, rows, K, b8);
		coli_mat_view(&m4, COLI_DTYPE_Q4_0, rows, K, b4);
		CHECK((uint8_t *)m8.scales == b8 + n && (uint8_t *)m4.scales == b4 + n / 2,
		      "scale planes misplaced\n");
		for (int r = 0; r < rows; r++) {
			gguf_quantize_q8_0(x + (size_t)r * K, g8 + (size_t)r * nb, K);
			gguf_quantize_q4_0(x + (size_t)r * K, g4 + (size_t)r * nb, K);
		}
		for (int r = 0; r < rows; r++) {
			for (int b = 0; b < nb; b++) {
				const struct gguf_q8_0 *q8 = &g8[r * nb + b];
				const struct gguf_q4_0 *q4 = &g4[r * nb + b];
				CHECK(m8.scales[r * nb + b] == q8->d &&
				          !memcmp(b8 + (size_t)r * K + b * 32, q8->qs, 32),
				      "q8 %dx%d row %d block %d differs from GGUF\n", rows, K, r,
				      b);
				CHECK(m4.scales[r * nb + b] == q4->d &&
				          !memcmp(b4 + (size_t)r * K / 2 + b * 16, q4->qs, 16),
				      "q4 %dx%d row %d block %d differs from GGUF\n", rows, K, r,
				      b);
			}
			/* dequantization error: Q8 |e| <= d/2 + 127 |d - fp16(d)|,
			 * Q4 |e| <= d (the clamp at 15 costs a full step) */
			coli_mat_row_f32(&m8, r, row);
			for (int k = 0; k < K; k++) {
				double d = half_value(m8.scales[r * nb + k / 32]);
				double e = fabs((double)row[k] - x[(size_t)r * K + k]);
				CHECK(e <= d * (0.5 + 127 * 0x1p-11) + 1e-30,
				      "q8 error %g > bound (d=%g)\n", e, d);
				if (d > 0 && e / d > max_err8)
					max_err8 = e / d;
			}
			coli_mat_row_f32(&m4, r, row);
			for (int k = 0; k < K; k++) {
				double d = fabs(half_value(m4.scales[r * nb + k / 32]));
				double e = fabs((double)row[k] - x[(size_t)r * K + k]);
				CHECK(e <= d * (1.0 + 16 * 0x1p-11) + 1e-30,
				      "q4 error %g > bound (d=%g)\n", e, d);
				if (d > 0 && e / d > max_err4)
					max_err4 = e / d;
			}
		}
		free(x);
		free(row);
		free(b8);
		free(b4);
		free(g8);
		free(g4);
	}
	float bad[32] = {0};
	uint8_t out[34];
	bad[5] = NAN;
	CHECK(coli_quantize_mat(COLI_DTYPE_Q8_0, bad, 1, 32, out) == -22, "NaN input accepted\n");
	CHECK(coli_quantize_mat(COLI_DTYPE_Q4_0, bad, 1, 30, out) == -22, "K=30 accepted\n");
	printf("q8_0 max |dequant - x| / d = %.4f, q4_0 = %.4f; GGUF blocks bit-identical\n",
	       max_err8, max_err4);
}

static void test_act(void)
{
	struct test_act t;
	double maxe = 0;

	act_alloc(&t, 2048);
	for (int it = 0; it < 50; it++) {
		act_rand(&t, 2048);
		for (int b = 0; b < 64; b++) {
			int32_t s = 0;
			float amax = 0;
			for (int j = 0; j < 32; j++)
				amax = fmaxf(amax, fabsf(t.x[b * 32 + j]));
			CHECK(t.a.d[b] == amax / 127.0f, "act d wrong\n");
			for (int j = 0; j < 32; j++) {
				int q = t.a.q[b * 32 + j];
				s += q;
				double e = fabs((double)q * t.a.d[b] - t.x[b * 32 + j]);
				CHECK(q >= -127 && q <= 127 && e <= t.a.d[b] * 0.50001,
				      "act q wrong\n");
				if (t.a.d[b] > 0 && e / t.a.d[b] > maxe)
					maxe = e / t.a.d[b];
			}
			CHECK(s == t.a.qsum[b], "act qsum wrong\n");
		}
	}
	act_free(&t);
	printf("activations: max |q*d - x| / d = %.4f\n", maxe);
}

static void test_names(void)
{
	enum coli_dtype t;
	CHECK(!coli_dtype_parse("q4", &t) && t == COLI_DTYPE_Q4_0, "parse q4\n");
	CHECK(!coli_dtype_parse("q8_0", &t) && t == COLI_DTYPE_Q8_0, "parse q8_0\n");
	CHECK(!coli_dtype_parse("bf16", &t) && t == COLI_DTYPE_BF16, "parse bf16\n");
	CHECK(coli_dtype_parse("q5", &t) == -22, "parse q5 accepted\n");
	for (int i = 0; i < N_DTYPES; i++)
		CHECK(!coli_dtype_parse(coli_dtype_name(g_dtypes[i]), &t) && t == g_dtypes[i],
		      "name/parse of %d disagree\n", g_dtypes[i]);
	CHECK(coli_dtype_mat_bytes(COLI_DTYPE_Q8_0, 768, 2048) == 768 * 2048 + 768 * 64 * 2,
	      "q8 bytes\n");
	CHECK(coli_dtype_mat_bytes(COLI_DTYPE_Q4_0, 768, 2048) == 768 * 1024 + 768 * 64 * 2,
	      "q4 bytes\n");
	CHECK(coli_dtype_mat_bytes(COLI_DTYPE_Q4_0, 3, 33) == 0, "q4 K=33 accepted\n");
	CHECK(coli_dtype_mat_bytes(COLI_DTYPE_BF16, 3, 33) == 198, "bf16 bytes\n");
}

int main(void)
{
	test_names();
	test_half();
	test_bf16();
	test_quant();
	test_act();
	printf("%d failures\n", g_fails);
	return g_fails ? 1 : 0;
}
