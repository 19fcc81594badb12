/*
 * ptx/kquant.cu — expert GEMV kernels for GGUF's block types kept as stored
 * (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), bit for bit the CPU's
 * canonical reduction of these types (cpu/kquant/kquant.c, its top comment):
 *
 *   the unit is the 32-element activation block b, lane b % 16 of the row's
 *   16 canonical lanes (ptx/gemv.cuh: a half-warp a row, units ascending);
 *   per unit two exact integers A (weights x activations, group scales
 *   applied) and C (the min term), then
 *       l = fmaf((float)A, d * dx[b], l)
 *       l = fmaf((float)C, dm * dx[b], l)      (types with a min)
 *   with d * dx and dm * dx rounded to fp32 first; the fold of gemv.cuh.
 *
 * The integers come from dp4a over 4-byte words of quants, so their order is
 * free; the K-quants' per-group "- 32 x" (Q6_K) and "- 4 x" (Q3_K) offsets
 * become dp4a over unsigned quants minus the offset times the group's
 * activation sum (dp4a with 0x01010101), the same integer.
 *
 * Layout (cpu/dtype.h): a row is its K / elems blocks back to back exactly
 * as GGUF stores them, scales beside quants; the job's `scales` is unused.
 * Q5_0 (22 B), Q3_K (110 B) and Q6_K (210 B) blocks are only 2-byte
 * aligned in a row, so their words come from aligned words and a funnel
 * shift (ld_words2); the others read 4- or 16-byte words. A lane's unit of a K-quant is always
 * group b % 8 = lane % 8 of its block, so the group's shifts and scale
 * positions are fixed for the lane.
 *
 * A dtype is a struct with ELEMS and BYTES (its block), MIN (has a min term),
 * load(row, b, lane) (the unit's weight words into the struct) and ints(x, xs,
 * A, C) (the unit's integers for one token's activation words x[8] and
 * block sum xs), UNROLL (units a lane loads at once). RowKQ runs a lane's
 * units over the half-warp's rows with the weights loaded once for the S
 * tokens.
 */
#include "ptx/gemv.cuh"

typedef unsigned char u8;

/* Units a lane loads before it computes (U::UNROLL: their loads in flight
 * together, as GV_UNROLL in ptx/kernels.cu) and CTAs an SM (KQ_MB). H200,
 * `tests/ptx/dense_kernels --bench kquant`, qwen3-235b's gate+up table as a
 * fraction of copy bandwidth: 3 CTAs an SM over 2 took q4_k 0.43 -> 0.50,
 * q5_k 0.49 -> 0.54; 2 units took q6_k 0.32 -> 0.44 and q3_k 0.17 -> 0.24
 * (their funnel-shifted loads) but q4_k 0.43 -> 0.36 (registers). */
#define KQ_U1 1
#define KQ_MB 3

static __device__ __forceinline__ unsigned ld32(const u8 *p)
{
	return __ldg((const unsigned *)p);
}

static __device__ __forceinline__ float half_at(const u8 *p)
{
	return half_to_float(__ldg((const unsigned short *)p));
}

/* N words from a 2-byte aligned address: N + 1 aligned words and a funnel
 * shift each (half the loads of 16-bit ones, and no divergence between lanes
 * whose blocks start at 0 or 2 mod 4) */
template <int N> static __device__ __forceinline__ void ld_words2(unsigned *w, const u8 *p)
{
	const unsigned *a = (const unsigned *)((unsigned long long)p & ~3ull);
	const unsigned sh = ((unsigned)(unsigned long long)p & 2) * 8;
	unsigned v[N + 1];

#pragma unroll
	for (int i = 0; i <= N; i++)
		v[i] = __ldg(a + i);
#pragma unroll
	for (int i = 0; i < N; i++)
		w[i] = __funnelshift_r(v[i], v[i + 1], sh);
}

/* byte i (0..11) of three words */
static __device__ __forceinline__ int byte12(unsigned w0, unsigned w1, unsigned w2, int i)
{
	return (int)((i < 4 ? w0 : i < 8 ? w1 : w2) >> 8 * (i & 3) & 0xff);
}

/* sum of 4 words of int8 activations */
static __device__ __forceinline__ int xsum4(const int *x)
{
	int s = __dp4a(0x01010101, x[0], 0);

	s = __dp4a(0x01010101, x[1], s);
	s = __dp4a(0x01010101, x[2], s);
	return __dp4a(0x01010101, x[3], s);
}

static __device__ __forceinline__ int dot4(const unsigned *q, const int *x)
{
	int s = __dp4a((int)q[0], x[0], 0);

	s = __dp4a((int)q[1], x[1], s);
	s = __dp4a((int)q[2], x[2], s);
	return __dp4a((int)q[3], x[3], s);
}

/* bits 0..3 of v to bit 4 of bytes 0..3 (Q5_*'s fifth bit) */
static __device__ __forceinline__ unsigned spread4(unsigned v)
{
	return ((v & 1) | (v & 2) << 7 | (v & 4) << 14 | (v & 8) << 21) << 4;
}

/* ---- Q4_1: d, m, qs[16]; x = d q + m; byte j: elements j (low), j + 16 ---- */
struct KQ4_1 {
	enum { ELEMS = 32, BYTES = 20, MIN = 1, UNROLL = 2 };
	unsigned q[4];
	float fa, fc;
	__device__ __forceinline__ void load(const u8 *row, int b, int lane)
	{
		const u8 *bp = row + (size_t)b * BYTES;

		for (int i = 0; i < 4; i++)
			q[i] = ld32(bp + 4 + 4 * i);
		fa = half_at(bp), fc = half_at(bp + 2);
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		unsigned lo[4], hi[4];

		for (int i = 0; i < 4; i++)
			lo[i] = q[i] & 0x0f0f0f0fu, hi[i] = q[i] >> 4 & 0x0f0f0f0fu;
		A = dot4(lo, x) + dot4(hi, x + 4);
		C = xs;
	}
};

/* ---- Q5_0 (22 B, d, qh[4], qs[16]: x = d (q - 16)) and Q5_1 (24 B, d, m,
 * qh[4], qs[16]: x = d q + m); q = nibble | bit l of qh << 4 ---- */
template <int ONE> struct KQ5 {
	enum { ELEMS = 32, BYTES = ONE ? 24 : 22, MIN = ONE, UNROLL = 2 };
	unsigned q[4], qh;
	float fa, fc;
	__device__ __forceinline__ void load(const u8 *row, int b, int lane)
	{
		const u8 *bp = row + (size_t)b * BYTES;

		if (ONE) {
			qh = ld32(bp + 4);
			for (int i = 0; i < 4; i++)
				q[i] = ld32(bp + 8 + 4 * i);
			fa = half_at(bp), fc = half_at(bp + 2);
		} else {
			unsigned v[6]; /* bytes 0..23: d, qh, qs[16] and 2 past */

			ld_words2<6>(v, bp);
			qh = __funnelshift_r(v[0], v[1], 16);
			for (int i = 0; i < 4; i++)
				q[i] = __funnelshift_r(v[i + 1], v[i + 2], 16);
			fa = half_to_float((unsigned short)v[0]), fc = 0.0f;
		}
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		unsigned lo[4], hi[4];

		for (int i = 0; i < 4; i++) {
			lo[i] = (q[i] & 0x0f0f0f0fu) | spread4(qh >> 4 * i & 0xf);
			hi[i] = (q[i] >> 4 & 0x0f0f0f0fu) | spread4(qh >> (16 + 4 * i) & 0xf);
		}
		A = dot4(lo, x) + dot4(hi, x + 4) - (ONE ? 0 : 16 * xs);
		C = ONE ? xs : 0;
	}
};

/* ---- Q2_K (84 B / 256): sc[16] (scale low, min high nibble), qs[64], d,
 * dmin; unit u = groups 2u, 2u + 1 of 16; q at qs[u / 4 * 32 + l] >> 2 (u % 4) ---- */
struct KQ2K {
	enum { ELEMS = 256, BYTES = 84, MIN = 1, UNROLL = KQ_U1 };
	unsigned q[8], scm;
	float fa, fc;
	__device__ __forceinline__ void load(const u8 *row, int b, int lane)
	{
		const int u = lane & 7;
		const u8 *bp = row + (size_t)(b >> 3) * BYTES;
		const unsigned dd = ld32(bp + 80);

		for (int i = 0; i < 8; i++)
			q[i] = ld32(bp + 16 + (u >> 2) * 32 + 4 * i) >> 2 * (u & 3) & 0x03030303u;
		scm = ld32(bp + (u >> 1) * 4) >> 16 * (u & 1) & 0xffff;
		fa = half_to_float((unsigned short)dd),
		fc = half_to_float((unsigned short)(dd >> 16));
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		const int s0 = scm & 0xf, m0 = scm >> 4 & 0xf, s1 = scm >> 8 & 0xf, m1 = scm >> 12;

		A = s0 * dot4(q, x) + s1 * dot4(q + 4, x + 4);
		C = -(m0 * xsum4(x) + m1 * xsum4(x + 4));
	}
};

/* ---- Q3_K (110 B / 256): hm[32], qs[64], sc[12] (6-bit, -32), d; q = 2 bits
 * of qs - (bit u of hm[l] ? 0 : 4), taken here as (2 bits | hbit << 2) - 4 ---- */
struct KQ3K {
	enum { ELEMS = 256, BYTES = 110, MIN = 0, UNROLL = 2 };
	unsigned q[8];
	int s0, s1;
	float fa, fc;
	/* group g's 6-bit scale from sc[12] (three words), minus 32 */
	__device__ __forceinline__ static int scale(const unsigned *s, int g)
	{
		const int lo = g < 8 ? byte12(s[0], s[1], s[2], g) & 0xf
		                     : byte12(s[0], s[1], s[2], g - 8) >> 4;
		const int hi = byte12(s[0], s[1], s[2], 8 + g % 4) >> (2 * (g / 4)) & 3;

		return (lo | hi << 4) - 32;
	}
	__device__ __forceinline__ void load(const u8 *row, int b, int lane)
	{
		const int u = lane & 7;
		const u8 *bp = row + (size_t)(b >> 3) * BYTES;
		unsigned hm[8], qs[8], s[4];

		ld_words2<8>(hm, bp);
		ld_words2<8>(qs, bp + 32 + (u >> 2) * 32);
		ld_words2<4>(s, bp + 96); /* sc[12], d */
		for (int i = 0; i < 8; i++)
			q[i] = (qs[i] >> 2 * (u & 3) & 0x03030303u) | (hm[i] >> u & 0x01010101u)
			                                                  << 2;
		s0 = scale(s, 2 * u), s1 = scale(s, 2 * u + 1);
		fa = half_to_float((unsigned short)s[3]), fc = 0.0f;
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		A = s0 * (dot4(q, x) - 4 * xsum4(x)) + s1 * (dot4(q + 4, x + 4) - 4 * xsum4(x + 4));
		C = 0;
	}
};

/* ---- Q4_K (144 B) and Q5_K (176 B) / 256: d, dmin, sc[12] (6-bit scales and
 * mins of 8 groups of 32), [Q5_K: qh[32], bit g of qh[l]], qs[128]: group g
 * at qs[g / 2 * 32 + l], low nibble for even g. Blocks are 16-byte aligned. ---- */
template <int FIVE> struct KQ45K {
	enum { ELEMS = 256, BYTES = FIVE ? 176 : 144, MIN = 1, UNROLL = KQ_U1 };
	unsigned q[8];
	int sc, m;
	float fa, fc;
	__device__ __forceinline__ void load(const u8 *row, int b, int lane)
	{
		const int g = lane & 7;
		const u8 *bp = row + (size_t)(b >> 3) * BYTES;
		const int4 *qp = (const int4 *)(bp + (FIVE ? 48 : 16) + (g >> 1) * 32);
		const int4 q0 = __ldg(qp), q1 = __ldg(qp + 1), hd = __ldg((const int4 *)bp);
		const unsigned w[8] = {(unsigned)q0.x, (unsigned)q0.y, (unsigned)q0.z,
		                       (unsigned)q0.w, (unsigned)q1.x, (unsigned)q1.y,
		                       (unsigned)q1.z, (unsigned)q1.w};
		const unsigned j = 8 * (g & 3); /* hd: d, dmin, then sc[12] */
		const int b0 = (int)((unsigned)hd.y >> j & 0xff),
		          b1 = (int)((unsigned)hd.z >> j & 0xff),
		          b2 = (int)((unsigned)hd.w >> j & 0xff);

		for (int i = 0; i < 8; i++)
			q[i] = w[i] >> 4 * (g & 1) & 0x0f0f0f0fu;
		if (FIVE) {
			const int4 *hp = (const int4 *)(bp + 16);
			const int4 h0 = __ldg(hp), h1 = __ldg(hp + 1);
			const unsigned hw[8] = {(unsigned)h0.x, (unsigned)h0.y, (unsigned)h0.z,
			                        (unsigned)h0.w, (unsigned)h1.x, (unsigned)h1.y,
			                        (unsigned)h1.z, (unsigned)h1.w};

			for (int i = 0; i < 8; i++)
				q[i] |= (hw[i] >> g & 0x01010101u) << 4;
		}
		/* group g's scale and min: bytes g and g + 4 (g < 4), else the low
		 * and high nibble of byte g + 4 with the top bits of g - 4 and g */
		if (g < 4) {
			sc = b0 & 63, m = b1 & 63;
		} else {
			sc = (b2 & 0xf) | (b0 >> 6) << 4;
			m = (b2 >> 4) | (b1 >> 6) << 4;
		}
		fa = half_to_float((unsigned short)hd.x);
		fc = half_to_float((unsigned short)((unsigned)hd.x >> 16));
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		A = sc * (dot4(q, x) + dot4(q + 4, x + 4));
		C = -m * xs;
	}
};

/* ---- Q6_K (210 B / 256): ql[128], qh[64], sc[16] (int8), d; unit u = groups
 * 2u, 2u + 1 of 16; q = (ql[u / 4 * 64 + u % 2 * 32 + l] >> 4 (u % 4 / 2) &
 * 15 | (qh[u / 4 * 32 + l] >> 2 (u % 4) & 3) << 4) - 32 ---- */
struct KQ6K {
	enum { ELEMS = 256, BYTES = 210, MIN = 0, UNROLL = 2 };
	unsigned q[8];
	int s0, s1;
	float fa, fc;
	__device__ __forceinline__ void load(const u8 *row, int b, int lane)
	{
		const int u = lane & 7, h = u >> 2;
		const u8 *bp = row + (size_t)(b >> 3) * BYTES;
		const unsigned short sw = __ldg((const unsigned short *)(bp + 192 + 2 * u));
		unsigned ql[8], qh[8];

		ld_words2<8>(ql, bp + h * 64 + (u & 1) * 32);
		ld_words2<8>(qh, bp + 128 + h * 32);
		for (int i = 0; i < 8; i++)
			q[i] = (ql[i] >> 4 * (u >> 1 & 1) & 0x0f0f0f0fu) |
			       (qh[i] >> 2 * (u & 3) & 0x03030303u) << 4;
		s0 = (signed char)(sw & 0xff), s1 = (signed char)(sw >> 8);
		fa = half_at(bp + 208), fc = 0.0f;
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		A = s0 * (dot4(q, x) - 32 * xsum4(x)) +
		    s1 * (dot4(q + 4, x + 4) - 32 * xsum4(x + 4));
		C = 0;
	}
};

/* A lane's units b = lane, lane + 16, ... of the half-warp's rows: the
 * weights of U::UNROLL units loaded at once, then each token's canonical
 * update, unit after unit. */
template <class U> struct RowKQ {
	static __device__ __forceinline__ void run(const struct coli_gpu_gemv_job *jb, int row0,
	                                           int lane, float (*acc)[COLI_GPU_MAX_S])
	{
		const int K = jb->K, S = jb->S, nb = K / 32;
		const size_t rb = (size_t)(K / U::ELEMS) * U::BYTES;

		for (int b0 = lane; b0 < nb; b0 += LANES * U::UNROLL) {
			U w[U::UNROLL][GV_RPH];

#pragma unroll
			for (int k = 0; k < U::UNROLL; k++)
#pragma unroll
				for (int r = 0; r < GV_RPH; r++)
					if (row0 + 16 * r < jb->rows && b0 + k * LANES < nb)
						w[k][r].load((const u8 *)jb->w +
						                 (size_t)(row0 + 16 * r) * rb,
						             b0 + k * LANES, lane);
#pragma unroll
			for (int k = 0; k < U::UNROLL; k++) {
				const int b = b0 + k * LANES;

				if (b >= nb)
					break;
#pragma unroll
				for (int s = 0; s < COLI_GPU_MAX_S; s++) {
					if (s >= S)
						break;
					const signed char *xq = jb->xq + (size_t)s * K + b * 32;
					const int4 x0 = *(const int4 *)xq,
					           x1 = *(const int4 *)(xq + 16);
					const int x[8] = {x0.x, x0.y, x0.z, x0.w,
					                  x1.x, x1.y, x1.z, x1.w};
					const float xd = jb->xd[(size_t)s * nb + b];
					const int xs = jb->xqsum[(size_t)s * nb + b];

#pragma unroll
					for (int r = 0; r < GV_RPH; r++) {
						int A, C;

						if (row0 + 16 * r >= jb->rows)
							continue;
						w[k][r].ints(x, xs, A, C);
						acc[r][s] = __fmaf_rn(
						    (float)A, __fmul_rn(w[k][r].fa, xd), acc[r][s]);
						if (U::MIN)
							acc[r][s] = __fmaf_rn(
							    (float)C, __fmul_rn(w[k][r].fc, xd),
							    acc[r][s]);
					}
				}
			}
		}
	}
};

GEMV_KERNELS(q4_1, RowKQ<KQ4_1>, KQ_MB)
GEMV_KERNELS(q5_0, RowKQ<KQ5<0>>, KQ_MB)
GEMV_KERNELS(q5_1, RowKQ<KQ5<1>>, KQ_MB)
GEMV_KERNELS(q2_k, RowKQ<KQ2K>, KQ_MB)
GEMV_KERNELS(q3_k, RowKQ<KQ3K>, KQ_MB)
GEMV_KERNELS(q4_k, RowKQ<KQ45K<0>>, KQ_MB)
GEMV_KERNELS(q5_k, RowKQ<KQ45K<1>>, KQ_MB)
GEMV_KERNELS(q6_k, RowKQ<KQ6K>, KQ_MB)

/* ---- embedding rows of a block-type table ----
 *
 * x[t] = row ids[t] of table [vocab][H] dequantized, value for value the
 * CPU's (cpu/ggml.c, the gguf package's formulas; -fmad=false keeps each
 * product rounded as there). One CTA a token, a thread an element. */
enum { /* enum coli_dtype's values (cpu/dtype.h) */
       COLI_DTYPE_Q4_1 = 10,
       COLI_DTYPE_Q5_0 = 11,
       COLI_DTYPE_Q5_1 = 12,
       COLI_DTYPE_Q2_K = 13,
       COLI_DTYPE_Q3_K = 14,
       COLI_DTYPE_Q4_K = 15,
       COLI_DTYPE_Q5_K = 16,
       COLI_DTYPE_Q6_K = 17,
};

static __device__ float kq_elem(int dtype, const u8 *row, int p)
{
	const int j = p % 32;

	switch (dtype) {
	case COLI_DTYPE_Q4_1: {
		const u8 *b = row + (size_t)(p / 32) * 20;
		const int q = b[4 + (j & 15)] >> (j & 16 ? 4 : 0) & 15;

		return half_at(b) * (float)q + half_at(b + 2);
	}
	case COLI_DTYPE_Q5_0:
	case COLI_DTYPE_Q5_1: {
		const int one = dtype == COLI_DTYPE_Q5_1;
		const u8 *b = row + (size_t)(p / 32) * (one ? 24 : 22), *qh = b + (one ? 4 : 2);
		const int q = (b[(one ? 8 : 6) + (j & 15)] >> (j & 16 ? 4 : 0) & 15) |
		              (qh[j / 8] >> (j % 8) & 1) << 4;

		return one ? half_at(b) * (float)q + half_at(b + 2) : half_at(b) * (float)(q - 16);
	}
	case COLI_DTYPE_Q2_K: {
		const u8 *b = row + (size_t)(p / 256) * 84;
		const int k = p % 256, g = k / 16;
		const int q = b[16 + k / 128 * 32 + k % 32] >> (2 * (k / 32 % 4)) & 3;
		const float dl = half_at(b + 80) * (float)(b[g] & 0xf),
		            ml = half_at(b + 82) * (float)(b[g] >> 4);

		return dl * (float)q - ml;
	}
	case COLI_DTYPE_Q3_K: {
		const u8 *b = row + (size_t)(p / 256) * 110, *s = b + 96;
		const int k = p % 256, g = k / 16;
		const int lo = g < 8 ? s[g] & 0xf : s[g - 8] >> 4,
		          hi = s[8 + g % 4] >> (2 * (g / 4)) & 3;
		const int q = (b[32 + k / 128 * 32 + k % 32] >> (2 * (k / 32 % 4)) & 3) -
		              ((b[k % 32] >> (k / 32) & 1) ? 0 : 4);

		return half_at(b + 108) * (float)((lo | hi << 4) - 32) * (float)q;
	}
	case COLI_DTYPE_Q4_K:
	case COLI_DTYPE_Q5_K: {
		const int five = dtype == COLI_DTYPE_Q5_K;
		const u8 *b = row + (size_t)(p / 256) * (five ? 176 : 144), *s = b + 4;
		const int k = p % 256, g = k / 32;
		int sc, m, q = b[(five ? 48 : 16) + g / 2 * 32 + j] >> (g % 2 * 4) & 0xf;

		if (five)
			q |= (b[16 + j] >> g & 1) << 4;
		if (g < 4) {
			sc = s[g] & 63, m = s[g + 4] & 63;
		} else {
			sc = (s[g + 4] & 0xf) | (s[g - 4] >> 6) << 4;
			m = (s[g + 4] >> 4) | (s[g] >> 6) << 4;
		}
		return half_at(b) * (float)sc * (float)q - half_at(b + 2) * (float)m;
	}
	case COLI_DTYPE_Q6_K: {
		const u8 *b = row + (size_t)(p / 256) * 210;
		const int k = p % 256, h = k / 128, i = k % 128;
		const int lo = b[h * 64 + i % 64] >> (i / 64 * 4) & 0xf;
		const int hi = b[128 + h * 32 + i % 32] >> (2 * (i / 32)) & 3;

		return half_at(b + 208) * (float)(signed char)b[192 + k / 16] *
		       (float)((lo | hi << 4) - 32);
	}
	}
	return __int_as_float(0x7fc00000);
}

extern "C" __global__ void coli_embed_kq(const u8 *table, int dtype, unsigned long long row_bytes,
                                         const int *ids, float *x, int H)
{
	pdl_entry();
	const u8 *row = table + (size_t)ids[blockIdx.x] * row_bytes;

	for (int i = threadIdx.x; i < H; i += blockDim.x)
		x[(size_t)blockIdx.x * H + i] = kq_elem(dtype, row, i);
}
