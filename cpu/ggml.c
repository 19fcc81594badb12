/*
 * cpu/ggml.c — ggml's tensor types: the name and block table, the
 * dequantization of each type coli reads, and the repack of Q8_0 / Q4_0
 * blocks into coli's planar matrices, of the block types by copying
 * (cpu/ggml.h has the layouts).
 */
#include <errno.h>
#include <string.h>

#include "cpu/ggml.h"

#define QK_K 256

static const struct {
	uint32_t type;
	const char *name;
	unsigned elems, bytes;
} g_types[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 40},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
};
#define N_TYPES (int)(sizeof(g_types) / sizeof(g_types[0]))

const char *coli_ggml_type_name(uint32_t type)
{
	for (int i = 0; i < N_TYPES; i++)
		if (g_types[i].type == type)
			return g_types[i].name;
	return NULL;
}

int coli_ggml_type_block(uint32_t type, unsigned *elems, unsigned *bytes)
{
	for (int i = 0; i < N_TYPES; i++)
		if (g_types[i].type == type) {
			*elems = g_types[i].elems, *bytes = g_types[i].bytes;
			return 0;
		}
	*elems = *bytes = 0;
	return -ENOENT;
}

/* IEEE half to float, exactly (every half is a float). */
static float half(const uint8_t *p)
{
	uint32_t h = (uint32_t)p[0] | (uint32_t)p[1] << 8, s = (h & 0x8000u) << 16,
	         e = h >> 10 & 0x1f, m = h & 0x3ff, b;
	float f;

	if (e == 0x1f) {
		b = s | 0x7f800000u | m << 13;
	} else if (e) {
		b = s | (e + 112) << 23 | m << 13;
	} else if (m) { /* subnormal: normalize */
		e = 113;
		while (!(m & 0x400))
			m <<= 1, e--;
		b = s | e << 23 | (m & 0x3ff) << 13;
	} else {
		b = s;
	}
	memcpy(&f, &b, 4);
	return f;
}

static float bits_f32(uint32_t b)
{
	float f;

	memcpy(&f, &b, 4);
	return f;
}

/* byte j of a 32-element block: elements j (low nibble) and j + 16 */
static int nib(const uint8_t *qs, int p)
{
	return qs[p & 15] >> (p & 16 ? 4 : 0) & 0xf;
}

static void q4_0(const uint8_t *b, float *y)
{
	const float d = half(b);

	for (int p = 0; p < 32; p++)
		y[p] = d * (float)(nib(b + 2, p) - 8);
}

static void q4_1(const uint8_t *b, float *y)
{
	const float d = half(b), m = half(b + 2);

	for (int p = 0; p < 32; p++)
		y[p] = d * (float)nib(b + 4, p) + m;
}

static void q5_0(const uint8_t *b, float *y)
{
	const float d = half(b);
	uint32_t qh;

	memcpy(&qh, b + 2, 4);
	for (int p = 0; p < 32; p++)
		y[p] = d * (float)((nib(b + 6, p) | (int)(qh >> p & 1) << 4) - 16);
}

static void q5_1(const uint8_t *b, float *y)
{
	const float d = half(b), m = half(b + 2);
	uint32_t qh;

	memcpy(&qh, b + 4, 4);
	for (int p = 0; p < 32; p++)
		y[p] = d * (float)(nib(b + 8, p) | (int)(qh >> p & 1) << 4) + m;
}

static void q8_0(const uint8_t *b, float *y)
{
	const float d = half(b);

	for (int p = 0; p < 32; p++)
		y[p] = (float)(int8_t)b[2 + p] * d;
}

/* K-quants: element p of a 256 block sits in 32-byte chunk h = p / 128 at
 * shift 2 * (p / 32 % 4) of byte p % 32 (2-bit fields), or in chunk p / 64
 * at nibble p / 32 % 2 (4-bit fields) */
static void q2_k(const uint8_t *b, float *y)
{
	const uint8_t *sc = b, *qs = b + 16;
	const float d = half(b + 80), dmin = half(b + 82);

	for (int p = 0; p < QK_K; p++) {
		const int g = p / 16, q = qs[p / 128 * 32 + p % 32] >> (2 * (p / 32 % 4)) & 3;
		const float dl = d * (float)(sc[g] & 0xf), ml = dmin * (float)(sc[g] >> 4);

		y[p] = dl * (float)q - ml;
	}
}

static void q3_k(const uint8_t *b, float *y)
{
	const uint8_t *hm = b, *qs = b + 32, *s = b + 96;
	const float d = half(b + 108);

	for (int p = 0; p < QK_K; p++) {
		const int g = p / 16;
		const int lo = g < 8 ? s[g] & 0xf : s[g - 8] >> 4,
		          hi = s[8 + g % 4] >> (2 * (g / 4)) & 3;
		const float dl = d * (float)((int8_t)(lo | hi << 4) - 32);
		const int q = (qs[p / 128 * 32 + p % 32] >> (2 * (p / 32 % 4)) & 3) -
		              ((hm[p % 32] >> (p / 32) & 1) ? 0 : 4);

		y[p] = dl * (float)q;
	}
}

/* The 6-bit scale and min of group j (0-7) of a Q4_K/Q5_K block. */
static void scale_min(const uint8_t *s, int j, int *sc, int *m)
{
	if (j < 4) {
		*sc = s[j] & 63, *m = s[j + 4] & 63;
	} else {
		*sc = (s[j + 4] & 0xf) | (s[j - 4] >> 6) << 4;
		*m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
	}
}

static void q45_k(const uint8_t *b, float *y, int five)
{
	const float d = half(b), dmin = half(b + 2);
	const uint8_t *s = b + 4, *qh = b + 16, *qs = b + (five ? 48 : 16);

	for (int j = 0; j < 8; j++) {
		int sc, m;

		scale_min(s, j, &sc, &m);
		const float dl = d * (float)sc, ml = dmin * (float)m;

		for (int l = 0; l < 32; l++) {
			const int p = j * 32 + l;
			int q = qs[j / 2 * 32 + l] >> (j % 2 * 4) & 0xf;

			if (five)
				q |= (qh[l] >> j & 1) << 4;
			y[p] = dl * (float)q - ml;
		}
	}
}

static void q6_k(const uint8_t *b, float *y)
{
	const uint8_t *ql = b, *qh = b + 128;
	const int8_t *sc = (const int8_t *)(b + 192);
	const float d = half(b + 208);

	for (int p = 0; p < QK_K; p++) {
		const int h = p / 128, k = p % 128;
		const int lo = ql[h * 64 + k % 64] >> (k / 64 * 4) & 0xf;
		const int hi = qh[h * 32 + k % 32] >> (2 * (k / 32)) & 3;

		y[p] = d * (float)sc[p / 16] * (float)((int8_t)(lo | hi << 4) - 32);
	}
}

static void mxfp4(const uint8_t *b, float *y)
{
	static const int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
	/* 2^(e-127) / 2: the table holds twice the FP4 (E2M1) values */
	const uint32_t e = b[0];
	const float d = bits_f32(e < 2 ? 0x00200000u << e : (e - 1) << 23);

	for (int p = 0; p < 32; p++)
		y[p] = d * (float)kv[nib(b + 1, p)];
}

int coli_ggml_can_dequant(uint32_t type)
{
	switch (type) {
	case COLI_GGML_F32:
	case COLI_GGML_F16:
	case COLI_GGML_BF16:
	case COLI_GGML_Q4_0:
	case COLI_GGML_Q4_1:
	case COLI_GGML_Q5_0:
	case COLI_GGML_Q5_1:
	case COLI_GGML_Q8_0:
	case COLI_GGML_Q2_K:
	case COLI_GGML_Q3_K:
	case COLI_GGML_Q4_K:
	case COLI_GGML_Q5_K:
	case COLI_GGML_Q6_K:
	case COLI_GGML_MXFP4:
		return 1;
	}
	return 0;
}

int coli_ggml_dequant(uint32_t type, const void *src, float *dst, uint64_t n)
{
	const uint8_t *b = src;
	unsigned be, bb;

	if (!coli_ggml_can_dequant(type))
		return -ENOTSUP;
	coli_ggml_type_block(type, &be, &bb);
	if (n % be)
		return -EINVAL;
	for (uint64_t i = 0; i < n; i += be, b += bb, dst += be) {
		switch (type) {
		case COLI_GGML_F32:
			memcpy(dst, b, 4);
			break;
		case COLI_GGML_F16:
			*dst = half(b);
			break;
		case COLI_GGML_BF16:
			*dst = bits_f32((uint32_t)b[0] << 16 | (uint32_t)b[1] << 24);
			break;
		case COLI_GGML_Q4_0:
			q4_0(b, dst);
			break;
		case COLI_GGML_Q4_1:
			q4_1(b, dst);
			break;
		case COLI_GGML_Q5_0:
			q5_0(b, dst);
			break;
		case COLI_GGML_Q5_1:
			q5_1(b, dst);
			break;
		case COLI_GGML_Q8_0:
			q8_0(b, dst);
			break;
		case COLI_GGML_Q2_K:
			q2_k(b, dst);
			break;
		case COLI_GGML_Q3_K:
			q3_k(b, dst);
			break;
		case COLI_GGML_Q4_K:
			q45_k(b, dst, 0);
			break;
		case COLI_GGML_Q5_K:
			q45_k(b, dst, 1);
			break;
		case COLI_GGML_Q6_K:
			q6_k(b, dst);
			break;
		case COLI_GGML_MXFP4:
			mxfp4(b, dst);
			break;
		}
	}
	return 0;
}

static const struct {
	uint32_t type;
	enum coli_dtype t;
} g_twins[] = {
    {COLI_GGML_Q8_0, COLI_DTYPE_Q8_0}, {COLI_GGML_Q4_0, COLI_DTYPE_Q4_0},
    {COLI_GGML_Q4_1, COLI_DTYPE_Q4_1}, {COLI_GGML_Q5_0, COLI_DTYPE_Q5_0},
    {COLI_GGML_Q5_1, COLI_DTYPE_Q5_1}, {COLI_GGML_Q2_K, COLI_DTYPE_Q2_K},
    {COLI_GGML_Q3_K, COLI_DTYPE_Q3_K}, {COLI_GGML_Q4_K, COLI_DTYPE_Q4_K},
    {COLI_GGML_Q5_K, COLI_DTYPE_Q5_K}, {COLI_GGML_Q6_K, COLI_DTYPE_Q6_K},
};
#define N_TWINS (int)(sizeof(g_twins) / sizeof(g_twins[0]))

int coli_ggml_dtype_of(uint32_t type, enum coli_dtype *t)
{
	for (int i = 0; i < N_TWINS; i++)
		if (g_twins[i].type == type) {
			*t = g_twins[i].t;
			return 0;
		}
	return -ENOENT;
}

int coli_ggml_of_dtype(enum coli_dtype t)
{
	for (int i = 0; i < N_TWINS; i++)
		if (g_twins[i].t == t)
			return (int)g_twins[i].type;
	return -1;
}

int coli_ggml_same_blocks(uint32_t type, enum coli_dtype t)
{
	enum coli_dtype k;

	return !coli_ggml_dtype_of(type, &k) && k == t;
}

/* One block is {fp16 d, quants}: d goes to the scale plane, the quants (32
 * int8, or 16 bytes of nibble pairs) to the quant plane, both unchanged. */
int coli_ggml_repack(uint32_t type, const void *src, int rows, int cols, void *dst, int row0,
                     int row1)
{
	const int q8 = type == COLI_GGML_Q8_0, nb = cols / 32;
	const size_t qb = q8 ? 32 : 16, bb = 2 + qb, qrow = (size_t)nb * qb;
	uint8_t *quants = dst, *scales = (uint8_t *)dst + (size_t)rows * qrow;
	enum coli_dtype t;
	unsigned be, bsz;

	if (cols <= 0 || row0 < 0 || row1 > rows || row0 > row1 || coli_ggml_dtype_of(type, &t))
		return -EINVAL;
	if (coli_dtype_is_block(t)) { /* rows of whole blocks, as stored */
		coli_dtype_block(t, &be, &bsz);
		if (cols % be)
			return -EINVAL;
		memcpy((uint8_t *)dst + (size_t)row0 * (cols / be) * bsz,
		       (const uint8_t *)src + (size_t)row0 * (cols / be) * bsz,
		       (size_t)(row1 - row0) * (cols / be) * bsz);
		return 0;
	}
	if (cols % 32)
		return -EINVAL;
	for (int r = row0; r < row1; r++) {
		const uint8_t *b = (const uint8_t *)src + (size_t)r * nb * bb;

		for (int k = 0; k < nb; k++, b += bb) {
			memcpy(scales + ((size_t)r * nb + k) * 2, b, 2);
			memcpy(quants + (size_t)r * qrow + k * qb, b + 2, qb);
		}
	}
	return 0;
}
