/*
 * cpu/dtype.c — weight formats: names and sizes (cpu/dtype.h), views, exact
 * scalar fp16/bf16 conversions, GGUF-compatible Q8_0/Q4_0 weight
 * quantization, dequantization of a row, and the canonical per-32-block
 * quantization of activations.
 *
 * Planar layout of a quantized rows x K matrix (K % 32 == 0, nb = K/32):
 *
 *   Q8_0:  int8  q[rows][K]      then  uint16 d[rows][nb]   (fp16 scales)
 *   Q4_0:  uint8 q[rows][K/2]    then  uint16 d[rows][nb]
 *          within block b of a row, byte j (0..15) holds element 32b+j in its
 *          low nibble and element 32b+j+16 in its high nibble; value =
 *          d * (nibble - 8).
 *
 * The quantizers are GGUF's reference ones (ggml quantize_row_q{8,4}_0_ref):
 * the scale is computed in fp32, the values are quantized with the fp32
 * inverse scale id = 1/d (x * id, not x / d), and only then is d rounded to
 * fp16 for storage. They are written here from that description, so a matrix
 * quantized by coli and one imported from GGUF hold the same bits.
 *
 * All conversions are bit-level and independent of the FPU's rounding mode
 * (except the quantizers, which use the default round-to-nearest fp32 ops like
 * ggml does).
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "cpu/cpu_internal.h"
#include "cpu/ggml.h"

const char *coli_dtype_name(enum coli_dtype t)
{
	switch (t) {
	case COLI_DTYPE_F32:
		return "f32";
	case COLI_DTYPE_F16:
		return "f16";
	case COLI_DTYPE_BF16:
		return "bf16";
	case COLI_DTYPE_Q8_0:
		return "q8_0";
	case COLI_DTYPE_Q4_0:
		return "q4_0";
	case COLI_DTYPE_Q4_1:
		return "q4_1";
	case COLI_DTYPE_Q5_0:
		return "q5_0";
	case COLI_DTYPE_Q5_1:
		return "q5_1";
	case COLI_DTYPE_Q2_K:
		return "q2_k";
	case COLI_DTYPE_Q3_K:
		return "q3_k";
	case COLI_DTYPE_Q4_K:
		return "q4_k";
	case COLI_DTYPE_Q5_K:
		return "q5_k";
	case COLI_DTYPE_Q6_K:
		return "q6_k";
	}
	return "?";
}

int coli_dtype_parse(const char *s, enum coli_dtype *out)
{
	static const struct {
		const char *name;
		enum coli_dtype t;
	} names[] = {
	    {"f32", COLI_DTYPE_F32},   {"f16", COLI_DTYPE_F16},   {"bf16", COLI_DTYPE_BF16},
	    {"q8", COLI_DTYPE_Q8_0},   {"q8_0", COLI_DTYPE_Q8_0}, {"q4", COLI_DTYPE_Q4_0},
	    {"q4_0", COLI_DTYPE_Q4_0}, {"q4k", COLI_DTYPE_Q4_K},  {"q4_k", COLI_DTYPE_Q4_K},
	    {"q5k", COLI_DTYPE_Q5_K},  {"q5_k", COLI_DTYPE_Q5_K}, {"q6k", COLI_DTYPE_Q6_K},
	    {"q6_k", COLI_DTYPE_Q6_K},
	};
	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(s, names[i].name)) {
			*out = names[i].t;
			return 0;
		}
	}
	return -EINVAL;
}

int coli_dtype_is_quant(enum coli_dtype t)
{
	return t == COLI_DTYPE_Q8_0 || t == COLI_DTYPE_Q4_0 || coli_dtype_is_block(t);
}

int coli_dtype_block(enum coli_dtype t, unsigned *elems, unsigned *bytes)
{
	static const struct {
		enum coli_dtype t;
		unsigned elems, bytes;
	} blocks[] = {
	    {COLI_DTYPE_Q4_1, 32, 20},   {COLI_DTYPE_Q5_0, 32, 22},   {COLI_DTYPE_Q5_1, 32, 24},
	    {COLI_DTYPE_Q2_K, 256, 84},  {COLI_DTYPE_Q3_K, 256, 110}, {COLI_DTYPE_Q4_K, 256, 144},
	    {COLI_DTYPE_Q5_K, 256, 176}, {COLI_DTYPE_Q6_K, 256, 210},
	};
	for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++)
		if (blocks[i].t == t) {
			*elems = blocks[i].elems, *bytes = blocks[i].bytes;
			return 0;
		}
	*elems = *bytes = 0;
	return -EINVAL;
}

int coli_dtype_is_block(enum coli_dtype t)
{
	unsigned e, b;

	return coli_dtype_block(t, &e, &b) == 0;
}

size_t coli_dtype_row_bytes(enum coli_dtype t, size_t cols)
{
	unsigned e, b;

	switch (t) {
	case COLI_DTYPE_F32:
		return cols * 4;
	case COLI_DTYPE_F16:
	case COLI_DTYPE_BF16:
		return cols * 2;
	case COLI_DTYPE_Q8_0:
		return cols % COLI_QBLOCK ? 0 : cols;
	case COLI_DTYPE_Q4_0:
		return cols % COLI_QBLOCK ? 0 : cols / 2;
	default:
		if (coli_dtype_block(t, &e, &b) || cols % e)
			return 0;
		return cols / e * b;
	}
}

size_t coli_dtype_mat_bytes(enum coli_dtype t, size_t rows, size_t cols)
{
	size_t n = rows * cols;

	if (rows && n / rows != cols)
		return 0;
	switch (t) {
	case COLI_DTYPE_F32:
		return n * 4;
	case COLI_DTYPE_F16:
	case COLI_DTYPE_BF16:
		return n * 2;
	case COLI_DTYPE_Q8_0:
		if (cols % COLI_QBLOCK)
			return 0;
		return n + rows * (cols / COLI_QBLOCK) * 2;
	case COLI_DTYPE_Q4_0:
		if (cols % COLI_QBLOCK)
			return 0;
		return n / 2 + rows * (cols / COLI_QBLOCK) * 2;
	default: /* the block types: rows of whole blocks */
		return rows * coli_dtype_row_bytes(t, cols);
	}
}

void coli_mat_view(struct coli_mat *m, enum coli_dtype t, int rows, int cols, const void *p)
{
	m->dtype = t;
	m->rows = rows;
	m->cols = cols;
	m->data = p;
	m->scales = NULL;
	if (t == COLI_DTYPE_Q8_0)
		m->scales = (const uint16_t *)((const uint8_t *)p + (size_t)rows * cols);
	else if (t == COLI_DTYPE_Q4_0)
		m->scales = (const uint16_t *)((const uint8_t *)p + (size_t)rows * cols / 2);
}

/* ---- scalar conversions ---- */

static inline uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static inline float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* Matches F16C's vcvtph2ps: exact, subnormals widened, a signalling NaN
 * comes out quiet with its payload kept. */
float coli_fp16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;

	if (e == 0x1f)
		return bits_f32(sign | 0x7f800000 | (m << 13) | (m ? 0x400000 : 0));
	if (e == 0) {
		if (!m)
			return bits_f32(sign);
		/* subnormal: m * 2^-24; normalize so the top bit is the implicit 1 */
		e = 113; /* biased f32 exponent of 2^-14 */
		while (!(m & 0x400)) {
			m <<= 1;
			e--;
		}
		return bits_f32(sign | (e << 23) | ((m & 0x3ff) << 13));
	}
	return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t coli_f32_to_fp16(float f)
{
	uint32_t x = f32_bits(f);
	uint16_t sign = (x >> 16) & 0x8000;
	uint32_t e, m, h, rem, half, shift;

	x &= 0x7fffffff;
	if (x >= 0x7f800000) /* inf stays inf; NaN stays NaN, quiet, top payload kept */
		return sign | 0x7c00 | (x > 0x7f800000 ? 0x200 | ((x >> 13) & 0x3ff) : 0);
	if (x >= 0x477ff000) /* >= 65520 rounds to inf (ties go to the even inf) */
		return sign | 0x7c00;
	e = x >> 23;
	if (e >= 113) { /* normal half: keep 10 mantissa bits, round the other 13 */
		h = ((e - 112) << 10) | ((x >> 13) & 0x3ff);
		rem = x & 0x1fff;
		if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
			h++; /* a carry into the exponent is the right answer */
		return sign | h;
	}
	/* subnormal half: value / 2^-24 = m >> shift, rounded to nearest even */
	if (e < 102) /* below 2^-25: rounds to zero */
		return sign;
	m = (x & 0x7fffff) | 0x800000;
	shift = 126 - e; /* 14..24 */
	h = m >> shift;
	rem = m & ((1u << shift) - 1);
	half = 1u << (shift - 1);
	if (rem > half || (rem == half && (h & 1)))
		h++;
	return sign | h;
}

float coli_bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

uint16_t coli_f32_to_bf16(float f)
{
	uint32_t x = f32_bits(f);

	if ((x & 0x7fffffff) > 0x7f800000)
		return (x >> 16) | 0x40; /* NaN: keep sign and top payload, force quiet */
	return (x + 0x7fff + ((x >> 16) & 1)) >> 16;
}

/* ---- weight quantization ---- */

static int quantize_q8_0_row(const float *x, int K, int8_t *q, uint16_t *d)
{
	for (int b = 0; b < K / COLI_QBLOCK; b++, x += COLI_QBLOCK, q += COLI_QBLOCK) {
		float amax = 0.0f;
		for (int j = 0; j < COLI_QBLOCK; j++) {
			if (!isfinite(x[j]))
				return -EINVAL;
			amax = fmaxf(amax, fabsf(x[j]));
		}
		const float db = amax / 127.0f;
		const float id = db != 0.0f ? 1.0f / db : 0.0f;
		d[b] = coli_f32_to_fp16(db);
		for (int j = 0; j < COLI_QBLOCK; j++)
			q[j] = (int8_t)roundf(x[j] * id); /* |x*id| <= 127.00002 */
	}
	return 0;
}

/* The nibble of x at inverse scale id, q = floor(x * id + 8.5) clamped to
 * [0, 15], as a float (every form computes it in float: NaN and -inf give 0,
 * +inf 15). */
static inline float q4_nibble(float x, float id)
{
	float q = floorf(x * id + 8.5f);

	q = q > 0.0f ? q : 0.0f; /* NaN fails the test: 0 */
	return q < 15.0f ? q : 15.0f;
}

/* Squared error of block x[32] stored with scale d (as fp16) and GGUF's
 * nibble rounding at that scale: element j's squared error into lane j % 8,
 * in order, the lanes folded ((0+4)+(2+6))+((1+5)+(3+7)) — the order of the
 * AVX2 form (cpu/gemv/quant_avx2.c), so the search picks the same scale on every
 * ISA. */
float coli_q4_block_err_ref(const float *x, float d)
{
	float dq = coli_fp16_to_f32(coli_f32_to_fp16(d)), id = 1.0f / d, l[8] = {0};

	for (int j = 0; j < COLI_QBLOCK; j++) {
		float r = x[j] - dq * (q4_nibble(x[j], id) - 8.0f);

		l[j & 7] = l[j & 7] + r * r;
	}
	return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

/* rounding: COLI_ROUND_GGUF takes GGUF's scale (max / -8); COLI_ROUND_MSE
 * tries 25 scales from 0.76x to 1.24x of it and keeps the one with the least
 * squared error. Either way the block is a valid Q4_0 block (value =
 * d * (nibble - 8)); only the choice of d differs. */
static int quantize_q4_0_row(const float *x, int K, uint8_t *q, uint16_t *d,
                             enum coli_quant_rounding rounding)
{
	float (*q4_block_err)(const float *, float) =
	    coli_cpu_isa() >= COLI_CPU_ISA_AVX2 ? coli_q4_block_err_avx2 : coli_q4_block_err_ref;

	for (int b = 0; b < K / COLI_QBLOCK; b++, x += COLI_QBLOCK, q += COLI_QBLOCK / 2) {
		float amax = 0.0f, max = 0.0f; /* max: the signed value of largest magnitude */
		for (int j = 0; j < COLI_QBLOCK; j++) {
			if (!isfinite(x[j]))
				return -EINVAL;
			if (amax < fabsf(x[j])) {
				amax = fabsf(x[j]);
				max = x[j];
			}
		}
		float db = max / -8.0f;
		if (rounding == COLI_ROUND_MSE && db != 0.0f) {
			float best = db, best_e = q4_block_err(x, db);

			for (int k = -12; k <= 12; k++) {
				float cand = db * (1.0f + 0.02f * (float)k),
				      err = q4_block_err(x, cand);

				if (err < best_e) {
					best_e = err;
					best = cand;
				}
			}
			db = best;
		}
		const float id = db != 0.0f ? 1.0f / db : 0.0f;
		d[b] = coli_f32_to_fp16(db);
		for (int j = 0; j < COLI_QBLOCK / 2; j++) {
			/* GGUF's scale puts x*id + 8.5 in [0.49, 16.5]; a searched one may
			 * step outside, so clamp both ends */
			int lo = (int)q4_nibble(x[j], id), hi = (int)q4_nibble(x[j + 16], id);

			q[j] = (uint8_t)(lo | hi << 4);
		}
	}
	return 0;
}

int coli_quantize_rows(enum coli_dtype t, const float *src, int rows, int cols, void *dst,
                       enum coli_quant_rounding rounding, int row0, int row1)
{
	struct coli_mat m;
	int nb = cols / COLI_QBLOCK, err;
	size_t a = (size_t)row0 * cols, b = (size_t)row1 * cols;

	if (rows < 0 || cols <= 0 || !coli_dtype_mat_bytes(t, rows, cols) || row0 < 0 ||
	    row1 > rows || row0 > row1)
		return -EINVAL;
	coli_mat_view(&m, t, rows, cols, dst);
	switch (t) {
	case COLI_DTYPE_F32:
		memcpy((float *)dst + a, src + a, (b - a) * 4);
		return 0;
	case COLI_DTYPE_F16:
		for (size_t i = a; i < b; i++)
			((uint16_t *)dst)[i] = coli_f32_to_fp16(src[i]);
		return 0;
	case COLI_DTYPE_BF16:
		for (size_t i = a; i < b; i++)
			((uint16_t *)dst)[i] = coli_f32_to_bf16(src[i]);
		return 0;
	case COLI_DTYPE_Q8_0:
		for (int r = row0; r < row1; r++) {
			err = quantize_q8_0_row(src + (size_t)r * cols, cols,
			                        (int8_t *)dst + (size_t)r * cols,
			                        (uint16_t *)m.scales + (size_t)r * nb);
			if (err)
				return err;
		}
		return 0;
	case COLI_DTYPE_Q4_0:
		for (int r = row0; r < row1; r++) {
			err = quantize_q4_0_row(src + (size_t)r * cols, cols,
			                        (uint8_t *)dst + (size_t)r * cols / 2,
			                        (uint16_t *)m.scales + (size_t)r * nb, rounding);
			if (err)
				return err;
		}
		return 0;
	default: /* GGUF's block types: rows of whole blocks (cpu/kquant/kquant_enc.c) */
		for (int r = row0; r < row1; r++) {
			err = coli_kq_encode_row(
			    t, src + (size_t)r * cols, cols,
			    (uint8_t *)dst + (size_t)r * coli_dtype_row_bytes(t, (size_t)cols));
			if (err)
				return err;
		}
		return 0;
	}
}

int coli_quantize_mat_ex(enum coli_dtype t, const float *src, int rows, int cols, void *dst,
                         enum coli_quant_rounding rounding)
{
	return coli_quantize_rows(t, src, rows, cols, dst, rounding, 0, rows);
}

int coli_quantize_mat(enum coli_dtype t, const float *src, int rows, int cols, void *dst)
{
	return coli_quantize_mat_ex(t, src, rows, cols, dst, COLI_ROUND_GGUF);
}

void coli_mat_row_f32(const struct coli_mat *m, int r, float *out)
{
	size_t K = (size_t)m->cols, nb = K / COLI_QBLOCK;

	switch (m->dtype) {
	case COLI_DTYPE_F32:
		memcpy(out, (const float *)m->data + r * K, K * 4);
		return;
	case COLI_DTYPE_F16:
		for (size_t k = 0; k < K; k++)
			out[k] = coli_fp16_to_f32(((const uint16_t *)m->data)[r * K + k]);
		return;
	case COLI_DTYPE_BF16:
		for (size_t k = 0; k < K; k++)
			out[k] = coli_bf16_to_f32(((const uint16_t *)m->data)[r * K + k]);
		return;
	case COLI_DTYPE_Q8_0: {
		const int8_t *q = (const int8_t *)m->data + r * K;
		for (size_t b = 0; b < nb; b++) {
			float d = coli_fp16_to_f32(m->scales[r * nb + b]);
			for (int j = 0; j < COLI_QBLOCK; j++)
				out[b * 32 + j] = (float)q[b * 32 + j] * d;
		}
		return;
	}
	case COLI_DTYPE_Q4_0: {
		const uint8_t *q = (const uint8_t *)m->data + r * K / 2;
		for (size_t b = 0; b < nb; b++) {
			float d = coli_fp16_to_f32(m->scales[r * nb + b]);
			for (int j = 0; j < 16; j++) {
				out[b * 32 + j] = (float)((q[b * 16 + j] & 15) - 8) * d;
				out[b * 32 + j + 16] = (float)((q[b * 16 + j] >> 4) - 8) * d;
			}
		}
		return;
	}
	default: /* the block types: the gguf package's values (cpu/ggml.c) */
		coli_ggml_dequant(coli_ggml_of_dtype(m->dtype),
		                  (const uint8_t *)m->data + r * coli_dtype_row_bytes(m->dtype, K),
		                  out, K);
		return;
	}
}

/* ---- activations: the canonical rule of cpu.h ---- */

/* The rule, per 32-block: amax = the largest |x| (a NaN skipped, as fmaxf
 * does), d = amax / 127, id = 1 / d (0 for d = 0), q = roundf(x * id)
 * clamped to +-127 with NaN -> 0 (the clamp and NaN only keep non-finite
 * inputs defined; clamping before rounding is the same), qsum = sum of q.
 * roundf without libm: truncate, then one step away from zero when the
 * dropped fraction is at least a half (s - t is exact for |s| < 2^31).
 * gcc made libm calls of fmaxf and roundf here, 8.5 ns an element: a
 * 256-token prefill chunk's activations took 4.6 ms a layer on the H200
 * host. The SSE2 form computes the same bits four at a time
 * (tests/cpu/act_quantize checks both against roundf). */
static inline float block_scale(float amax, float *id)
{
	const float d = amax / 127.0f;

	*id = d != 0.0f ? 1.0f / d : 0.0f;
	return d;
}

#if defined(__SSE2__)
#include <emmintrin.h>

static void quantize_block(const float *xb, int8_t *q, float *d, int32_t *qsum)
{
	const __m128 sign = _mm_set1_ps(-0.0f), hi = _mm_set1_ps(127.0f), lo = _mm_set1_ps(-127.0f),
	             half = _mm_set1_ps(0.5f), mhalf = _mm_set1_ps(-0.5f);
	__m128 m = _mm_setzero_ps(), idv;
	__m128i sum = _mm_setzero_si128(), qi[8];
	float amax4[4], amax, id;
	int32_t s4[4];

	for (int j = 0; j < 32; j += 4) /* max(v, m) = v > m ? v : m: NaN skipped */
		m = _mm_max_ps(_mm_andnot_ps(sign, _mm_loadu_ps(xb + j)), m);
	_mm_storeu_ps(amax4, m);
	amax = amax4[0];
	for (int i = 1; i < 4; i++)
		amax = amax4[i] > amax ? amax4[i] : amax;
	*d = block_scale(amax, &id);
	idv = _mm_set1_ps(id);
	for (int k = 0; k < 8; k++) {
		__m128 s = _mm_mul_ps(_mm_loadu_ps(xb + 4 * k), idv), f;
		__m128i t;

		s = _mm_and_ps(s, _mm_cmpeq_ps(s, s)); /* NaN -> +0 */
		s = _mm_max_ps(_mm_min_ps(s, hi), lo);
		t = _mm_cvttps_epi32(s);
		f = _mm_sub_ps(s, _mm_cvtepi32_ps(t));
		/* the compares are all-ones (-1) where true */
		t = _mm_sub_epi32(t, _mm_castps_si128(_mm_cmpge_ps(f, half)));
		qi[k] = _mm_add_epi32(t, _mm_castps_si128(_mm_cmple_ps(f, mhalf)));
		sum = _mm_add_epi32(sum, qi[k]);
	}
	for (int k = 0; k < 8; k += 4) /* |q| <= 127: the saturating packs are exact */
		_mm_storeu_si128((__m128i *)(q + 4 * k),
		                 _mm_packs_epi16(_mm_packs_epi32(qi[k], qi[k + 1]),
		                                 _mm_packs_epi32(qi[k + 2], qi[k + 3])));
	_mm_storeu_si128((__m128i *)s4, sum);
	*qsum = s4[0] + s4[1] + s4[2] + s4[3];
}
#else
static void quantize_block(const float *xb, int8_t *q, float *d, int32_t *qsum)
{
	float amax = 0.0f, id;
	int32_t sum = 0;

	for (int j = 0; j < 32; j++) {
		const float v = fabsf(xb[j]);

		amax = v > amax ? v : amax;
	}
	*d = block_scale(amax, &id);
	for (int j = 0; j < 32; j++) {
		float s = xb[j] * id, f;
		int t;

		s = s == s ? s : 0.0f;
		s = s > 127.0f ? 127.0f : s < -127.0f ? -127.0f : s;
		t = (int)s;
		f = s - (float)t;
		t += (f >= 0.5f) - (f <= -0.5f);
		q[j] = (int8_t)t;
		sum += t;
	}
	*qsum = sum;
}
#endif

void coli_act_quantize(struct coli_act *a, const float *x, int n)
{
	a->n = n;
	a->f = x;
	for (int b = 0; b < n / COLI_QBLOCK; b++)
		quantize_block(x + b * COLI_QBLOCK, a->q + b * COLI_QBLOCK, &a->d[b], &a->qsum[b]);
}
