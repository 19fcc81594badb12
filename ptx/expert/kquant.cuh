/*
 * ptx/expert/kquant.cuh — GGUF's block types as the GPU reads them (Q4_1, Q5_0,
 * Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K; layouts in cpu/kquant/kquant.c), shared
 * by their GEMV (ptx/expert/kquant.cu) and their tensor-core GEMM
 * (ptx/expert/kquant_gemm.cu).
 *
 * A dtype is a struct with ELEMS and BYTES (its block), MIN (has a min
 * term), HALVES (a unit is two groups of 16 with their own scales: Q2_K,
 * Q3_K, Q6_K), PAIRS (the GEMV's pairs forms, KQ2KP, KQ3KP, KQ45KP and KQ6KP: the
 * distance of a lane's partner; 0 for the others),
 * load(row, b, lane) (unit b's weight words and scales into
 * the struct; lane % 8 must be b % 8, the unit's group in its K-quant
 * block) and then either
 *   ints(x, xs, A, C): the unit's canonical integers for one token's
 *     activation words x[8] and block sum xs (the GEMV, dp4a), or
 *   i8(o, rs, rm): the unit's 32 weights as int8 words o[8] (word i =
 *     elements 4i..4i+3, offsets such as Q6_K's -32 applied) and its scales
 *     as floats, rs = (d, dm, s0, s1) and rm = (c0, c1), so that the
 *     canonical A = s0 * dot(first 16) + s1 * dot(last 16) (HALVES; else
 *     s0 * dot(32)) and C = c0 * xsum(first 16) + c1 * xsum(last 16)
 *     (HALVES; else c0 * qsum): every value an exact small integer.
 *
 * load_blk<M>(bp, g) reads block bp's group g from global memory (MemG:
 * load(), the GEMM's staging) or from a shared-memory copy that keeps the
 * block's address mod 16 (MemS: the GEMV's staged steps, ptx/expert/kquant.cu):
 * Q5_0 (22 B), Q3_K (110 B) and Q6_K (210 B) blocks are only 2-byte aligned
 * in a row, so theirs come from aligned words and a funnel shift
 * (ld_words2: M::words2, which may read up to 10 bytes past the block);
 * the others read 4- or 16-byte words.
 */
#ifndef COLI_PTX_KQUANT_CUH
#define COLI_PTX_KQUANT_CUH

#include "ptx/expert/gemv.cuh"

typedef unsigned char u8;

/* Units a lane of the per-lane GEMV (ptx/expert/kquant.cu RowKQ, the bench's v0)
 * loads before it computes (U::UNROLL: their loads in
 * flight together, as GV_UNROLL in ptx/expert/kernels.cu). H200, `tests/ptx/
 * dense_kernels --bench kquant`, qwen3-235b's gate+up table as a fraction
 * of copy bandwidth: 2 units took q6_k 0.32 -> 0.44 and q3_k 0.17 -> 0.24
 * (their funnel-shifted loads) but q4_k 0.43 -> 0.36 (registers). */
#define KQ_U1 1

/* Where a dtype's loader reads a block (template argument M of load_blk):
 * MemG global memory through the read-only path (the GEMM's staging, the
 * embedding), MemS a copy in shared memory that keeps each byte's address
 * mod 16 (the GEMV's staged steps, ptx/expert/kquant.cu). The same bytes either
 * way, so the same integers.
 *
 * words2<N, W8>(w, p): N words from a 2-byte aligned address (Q5_0, Q3_K
 * and Q6_K blocks). MemG: N + 1 aligned words and a funnel shift each (half
 * the loads of 16-bit ones, and no divergence between lanes whose blocks
 * start at 0 or 2 mod 4); reads below p + 4 N + 4. MemS the same, or with
 * W8 N / 2 + 1 aligned 8-byte words (N even), then word o = (p & 4) / 4 of
 * them on and the funnel shift (half the shared-memory loads, a select a
 * word; reads up to p + 4 N + 8). H100, `tests/ptx/dense_kernels --bench
 * kquant`, 2026-12-07, 235b gate+up as a fraction of copy: the 4-byte form
 * (with Q3_K's scales by shifts) took q3_k 0.40 -> 0.46 and q5_0 0.70 ->
 * 0.72, but q6_k 0.76 -> 0.73: Q6_K keeps W8.
 * The aligned address is p less its low bits by pointer arithmetic, so a
 * shared-memory p stays one (ld.shared). */
struct MemG {
	static __device__ __forceinline__ unsigned u32(const u8 *p)
	{
		return __ldg((const unsigned *)p);
	}
	static __device__ __forceinline__ unsigned short u16(const u8 *p)
	{
		return __ldg((const unsigned short *)p);
	}
	static __device__ __forceinline__ int4 v4(const u8 *p)
	{
		return __ldg((const int4 *)p);
	}
	template <int N, bool W8>
	static __device__ __forceinline__ void words2(unsigned *w, const u8 *p)
	{
		const unsigned lo = (unsigned)(unsigned long long)p & 2;
		const u8 *a = p - lo;
		const unsigned sh = lo * 8;
		unsigned v[N + 1];

#pragma unroll
		for (int i = 0; i <= N; i++)
			v[i] = __ldg((const unsigned *)(a + 4 * i));
#pragma unroll
		for (int i = 0; i < N; i++)
			w[i] = __funnelshift_r(v[i], v[i + 1], sh);
	}
};

struct MemS {
	static __device__ __forceinline__ unsigned u32(const u8 *p)
	{
		return *(const unsigned *)p;
	}
	static __device__ __forceinline__ unsigned short u16(const u8 *p)
	{
		return *(const unsigned short *)p;
	}
	static __device__ __forceinline__ int4 v4(const u8 *p)
	{
		return *(const int4 *)p;
	}
	template <int N, bool W8>
	static __device__ __forceinline__ void words2(unsigned *w, const u8 *p)
	{
		static_assert(!W8 || N % 2 == 0, "whole 8-byte words");
		if (W8) {
			const unsigned lo = (unsigned)(unsigned long long)p & 6;
			const u8 *a = p - lo;
			const unsigned sh = (lo & 2) * 8, o = lo >> 2;
			unsigned v[N + 2];

#pragma unroll
			for (int i = 0; i < N / 2 + 1; i++) {
				const uint2 t = *(const uint2 *)(a + 8 * i);

				v[2 * i] = t.x, v[2 * i + 1] = t.y;
			}
#pragma unroll
			for (int i = 0; i < N; i++)
				w[i] = __funnelshift_r(o ? v[i + 1] : v[i], o ? v[i + 2] : v[i + 1],
				                       sh);
			return;
		}
		const unsigned lo = (unsigned)(unsigned long long)p & 2;
		const u8 *a = p - lo;
		unsigned v[N + 1];

#pragma unroll
		for (int i = 0; i < N + 1; i++)
			v[i] = *(const unsigned *)(a + 4 * i);
#pragma unroll
		for (int i = 0; i < N; i++)
			w[i] = __funnelshift_r(v[i], v[i + 1], lo * 8);
	}
};

static __device__ __forceinline__ float half_at(const u8 *p)
{
	return half_to_float(MemG::u16(p));
}

/* N words from a 2-byte aligned address p, as M reads them (W8: MemS's 8-byte form) */
template <class M, int N, bool W8 = false>
static __device__ __forceinline__ void ld_words2(unsigned *w, const u8 *p)
{
	M::template words2<N, W8>(w, p);
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

/* dp4a of unsigned weight bytes q (up to 255) and signed activations x */
static __device__ __forceinline__ int dot4_us(const unsigned *q, const int *x)
{
	int s = 0;

#pragma unroll
	for (int i = 0; i < 4; i++)
		asm("dp4a.u32.s32 %0, %1, %2, %0;" : "+r"(s) : "r"(q[i]), "r"(x[i]));
	return s;
}

/* bits 0..3 of v to bit 4 of bytes 0..3 (Q5_*'s fifth bit) */
static __device__ __forceinline__ unsigned spread4(unsigned v)
{
	return ((v & 1) | (v & 2) << 7 | (v & 4) << 14 | (v & 8) << 21) << 4;
}

/* Each byte of v, an unsigned N-bit value u (N < 8), as the int8 u - 2^(N-1):
 * u ^ 2^(N-1) is that value's N-bit two's complement; the sign bit times
 * 2^8 - 2^N / 2^(N-1) fills the byte's top bits (no carry leaves a byte).
 * Q3_K's q - 4 (N = 3), Q5_0's q - 16 (5), Q6_K's q - 32 (6) for the GEMM's
 * signed mma. */
template <int N> static __device__ __forceinline__ unsigned sext_bytes(unsigned v)
{
	const unsigned sign = 0x01010101u << (N - 1), t = v ^ sign;

	return t | (t & sign) * ((256u - (1u << N)) >> (N - 1));
}

/* ---- Q4_1: d, m, qs[16]; x = d q + m; byte j: elements j (low), j + 16 ---- */
struct KQ4_1 {
	enum { ELEMS = 32, BYTES = 20, MIN = 1, UNROLL = 2, HALVES = 0, PAIRS = 0 };
	unsigned q[4];
	float fa, fc;
	template <class M> __device__ __forceinline__ void load_blk(const u8 *bp, int g)
	{
		const unsigned dm = M::u32(bp);

		for (int i = 0; i < 4; i++)
			q[i] = M::u32(bp + 4 + 4 * i);
		fa = half_to_float((unsigned short)dm),
		fc = half_to_float((unsigned short)(dm >> 16));
	}
	__device__ __forceinline__ void load(const u8 *row, int b, int lane)
	{
		load_blk<MemG>(row + (size_t)b * BYTES, 0);
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		unsigned lo[4], hi[4];

		for (int i = 0; i < 4; i++)
			lo[i] = q[i] & 0x0f0f0f0fu, hi[i] = q[i] >> 4 & 0x0f0f0f0fu;
		A = dot4(lo, x) + dot4(hi, x + 4);
		C = xs;
	}
	__device__ __forceinline__ void i8(unsigned *o, float4 &rs, float2 &rm) const
	{
		for (int i = 0; i < 4; i++)
			o[i] = q[i] & 0x0f0f0f0fu, o[4 + i] = q[i] >> 4 & 0x0f0f0f0fu;
		rs = make_float4(fa, fc, 1.0f, 1.0f), rm = make_float2(1.0f, 1.0f);
	}
};

/* ---- Q5_0 (22 B, d, qh[4], qs[16]: x = d (q - 16)) and Q5_1 (24 B, d, m,
 * qh[4], qs[16]: x = d q + m); q = nibble | bit l of qh << 4 ---- */
template <int ONE> struct KQ5 {
	enum { ELEMS = 32, BYTES = ONE ? 24 : 22, MIN = ONE, UNROLL = 2, HALVES = 0, PAIRS = 0 };
	unsigned q[4], qh;
	float fa, fc;
	template <class M> __device__ __forceinline__ void load_blk(const u8 *bp, int g)
	{
		if (ONE) {
			const unsigned dm = M::u32(bp);

			qh = M::u32(bp + 4);
			for (int i = 0; i < 4; i++)
				q[i] = M::u32(bp + 8 + 4 * i);
			fa = half_to_float((unsigned short)dm),
			fc = half_to_float((unsigned short)(dm >> 16));
		} else {
			unsigned v[6]; /* bytes 0..23: d, qh, qs[16] and 2 past */

			ld_words2<M, 6>(v, bp);
			qh = __funnelshift_r(v[0], v[1], 16);
			for (int i = 0; i < 4; i++)
				q[i] = __funnelshift_r(v[i + 1], v[i + 2], 16);
			fa = half_to_float((unsigned short)v[0]), fc = 0.0f;
		}
	}
	__device__ __forceinline__ void load(const u8 *row, int b, int lane)
	{
		load_blk<MemG>(row + (size_t)b * BYTES, 0);
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
	__device__ __forceinline__ void i8(unsigned *o, float4 &rs, float2 &rm) const
	{
		for (int i = 0; i < 4; i++) {
			o[i] = (q[i] & 0x0f0f0f0fu) | spread4(qh >> 4 * i & 0xf);
			o[4 + i] = (q[i] >> 4 & 0x0f0f0f0fu) | spread4(qh >> (16 + 4 * i) & 0xf);
			if (!ONE)
				o[i] = sext_bytes<5>(o[i]), o[4 + i] = sext_bytes<5>(o[4 + i]);
		}
		rs = make_float4(fa, fc, 1.0f, 1.0f), rm = make_float2(1.0f, 1.0f);
	}
};

/* ---- Q2_K (84 B / 256): sc[16] (scale low, min high nibble), qs[64], d,
 * dmin; unit u = groups 2u, 2u + 1 of 16; q at qs[u / 4 * 32 + l] >> 2 (u % 4).
 * The quants are kept in place, 4^(u % 4) q (at most 192: unsigned bytes),
 * and the dots' scaled sum shifted back by 2 (u % 4) bits: exact, as the sum
 * is a multiple of 4^(u % 4); a mask a word instead of a shift and a mask ---- */
struct KQ2K {
	enum { ELEMS = 256, BYTES = 84, MIN = 1, UNROLL = KQ_U1, HALVES = 1, PAIRS = 0 };
	unsigned q[8], scm;
	int sh;
	float fa, fc;
	template <class M> __device__ __forceinline__ void load_blk(const u8 *bp, int u)
	{
		const unsigned dd = M::u32(bp + 80);

		sh = 2 * (u & 3);
		for (int i = 0; i < 8; i++)
			q[i] = M::u32(bp + 16 + (u >> 2) * 32 + 4 * i) & 0x03030303u << sh;
		scm = M::u32(bp + (u >> 1) * 4) >> 16 * (u & 1) & 0xffff;
		fa = half_to_float((unsigned short)dd),
		fc = half_to_float((unsigned short)(dd >> 16));
	}
	__device__ __forceinline__ void load(const u8 *row, int b, int lane)
	{
		load_blk<MemG>(row + (size_t)(b >> 3) * BYTES, lane & 7);
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		const int s0 = scm & 0xf, m0 = scm >> 4 & 0xf, s1 = scm >> 8 & 0xf, m1 = scm >> 12;

		A = s0 * dot4_us(q, x) + s1 * dot4_us(q + 4, x + 4) >> sh;
		C = -(m0 * xsum4(x) + m1 * xsum4(x + 4));
	}
	__device__ __forceinline__ void i8(unsigned *o, float4 &rs, float2 &rm) const
	{
		for (int i = 0; i < 8; i++)
			o[i] = q[i] >> sh;
		rs = make_float4(fa, fc, (float)(scm & 0xf), (float)(scm >> 8 & 0xf));
		rm = make_float2(-(float)(scm >> 4 & 0xf), -(float)(scm >> 12));
	}
};

/* ---- Q2_K in pairs (the GEMV only): units u and u ^ 1 of a block (lanes u
 * and u ^ 1) take their fields from the same 32 bytes qs[u / 4 * 32 ..]
 * (shifts 2 (u % 4) and 2 (u % 4 ^ 1)). Lane u reads half h = u % 2 of them
 * (16 B, where KQ2K reads 32) and forms group h of its own unit and of its
 * partner's, in place as KQ2K keeps them; it scales each and shifts it back
 * (exact: a multiple of 4^(u % 4)), keeps its own and sends the other to its
 * partner (one shfl_xor of 1): A is KQ2K's integer. The min term needs no
 * shuffle: the own unit's other group sums to the block sum xs less this
 * half's, so C is KQ2K's integer too. Activations own unit first (XOwn), as
 * KQ3KP's. ints() shuffles: the warp calls it together. ---- */
struct KQ2KP {
	enum { ELEMS = 256, BYTES = 84, MIN = 1, HALVES = 1, PAIRS = 1 };
	unsigned qa[4], qb[4];
	int sha, shb, sa, sb, ma, mo;
	float fa, fc;
	template <class M> __device__ __forceinline__ void load_blk(const u8 *bp, int u)
	{
		const int h = u & 1;
		const unsigned dd = M::u32(bp + 80), sm = M::u32(bp + (u >> 1) * 4);

		sha = 2 * (u & 3), shb = 2 * ((u ^ 1) & 3);
		for (int i = 0; i < 4; i++) {
			const unsigned w = M::u32(bp + 16 + (u >> 2) * 32 + 16 * h + 4 * i);

			qa[i] = w & 0x03030303u << sha, qb[i] = w & 0x03030303u << shb;
		}
		/* sm = sc[4 (u / 2) ..], groups 2 ua .. 2 ua + 3 (ua = u & ~1), scale
		 * low nibble and min high: the own unit's group h is byte 3 h, its
		 * other group byte 1 + h, the partner's group h byte 2 - h */
		sa = sm >> 24 * h & 0xf, ma = sm >> (24 * h + 4) & 0xf;
		sb = sm >> 8 * (2 - h) & 0xf, mo = sm >> (8 * (1 + h) + 4) & 0xf;
		fa = half_to_float((unsigned short)dd),
		fc = half_to_float((unsigned short)(dd >> 16));
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		const int xh = xsum4(x), ta = sa * dot4_us(qa, x) >> sha,
		          tb = sb * dot4_us(qb, x + 4) >> shb;

		A = ta + __shfl_xor_sync(0xffffffffu, tb, 1);
		C = -(ma * xh + mo * (xs - xh));
	}
};

/* ---- Q3_K (110 B / 256): hm[32], qs[64], sc[12] (6-bit, -32), d; q = 2 bits
 * of qs - (bit u of hm[l] ? 0 : 4), taken here as (2 bits | hbit << 2) - 4 ---- */
struct KQ3K {
	enum { ELEMS = 256, BYTES = 110, MIN = 0, UNROLL = 2, HALVES = 1, PAIRS = 0 };
	unsigned q[8];
	int s0, s1;
	float fa, fc;
	/* unit u's two 6-bit scales (groups 2u, 2u + 1; coli_kq_q3_scale) from
	 * sc[12] as three words, minus 32: the low nibbles are bytes 2u % 8
	 * and the next of the first two words (the high nibbles from u = 4),
	 * the top bits the two-bit fields 2 (u / 2) of bytes 2 (u % 2) and the
	 * next of the third */
	__device__ __forceinline__ static void scales(const unsigned *s, int u, int &s0, int &s1)
	{
		const unsigned lo = (u & 2 ? s[1] : s[0]) >> 16 * (u & 1) >> 4 * (u >> 2) & 0x0f0fu,
		               hi = s[2] >> 16 * (u & 1) >> 2 * (u >> 1) & 0x0303u,
		               v = lo | hi << 4;

		s0 = (int)(v & 0xff) - 32, s1 = (int)(v >> 8) - 32;
	}
	template <class M> __device__ __forceinline__ void load_blk(const u8 *bp, int u)
	{
		unsigned hm[8], qs[8], s[4];

		ld_words2<M, 8>(hm, bp);
		ld_words2<M, 8>(qs, bp + 32 + (u >> 2) * 32);
		ld_words2<M, 4>(s, bp + 96); /* sc[12], d */
		for (int i = 0; i < 8; i++)
			q[i] = (qs[i] >> 2 * (u & 3) & 0x03030303u) | (hm[i] >> u & 0x01010101u)
			                                                  << 2;
		scales(s, u, s0, s1);
		fa = half_to_float((unsigned short)s[3]), fc = 0.0f;
	}
	__device__ __forceinline__ void load(const u8 *row, int b, int lane)
	{
		load_blk<MemG>(row + (size_t)(b >> 3) * BYTES, lane & 7);
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		A = s0 * (dot4(q, x) - 4 * xsum4(x)) + s1 * (dot4(q + 4, x + 4) - 4 * xsum4(x + 4));
		C = 0;
	}
	__device__ __forceinline__ void i8(unsigned *o, float4 &rs, float2 &rm) const
	{
		for (int i = 0; i < 8; i++)
			o[i] = sext_bytes<3>(q[i]);
		rs = make_float4(fa, 0.0f, (float)s0, (float)s1), rm = make_float2(0.0f, 0.0f);
	}
};

/* ---- Q3_K in pairs (the GEMV only): units u and u ^ 1 of a block (lanes u
 * and u ^ 1) take their two-bit fields from the same 32 bytes qs[u / 4 * 32
 * ..] (shifts 2 (u % 4) and 2 (u % 4 ^ 1)) and their high bits from the
 * same hm[32] (bits u and u ^ 1). Lane u reads half h = u % 2 of both (16 B
 * each, where KQ3K reads 32 + 32) and forms group h (elements 16h..16h +
 * 15) of its own unit and of its partner's, each whole in the lane: it
 * scales both (the offset applied), keeps its own and sends the other to
 * its partner (one shfl_xor of 1): A is KQ3K's integer. Activations
 * (kq_act, XOwn): x[0..3] elements 16h.. of unit u, x[4..7] those of unit
 * u ^ 1, so no lane selects between the two. ints() shuffles: the warp
 * calls it together (RowKS runs PAIRS types warp-wide). ---- */
struct KQ3KP {
	enum { ELEMS = 256, BYTES = 110, MIN = 0, HALVES = 1, PAIRS = 1 };
	unsigned qa[4], qb[4];
	int sa, sb;
	float fa, fc;
	template <class M> __device__ __forceinline__ void load_blk(const u8 *bp, int u)
	{
		const int h = u & 1, ua = u & ~1, p = u ^ 1;
		unsigned hm[4], qs[4], s[4];

		ld_words2<M, 4>(hm, bp + 16 * h);
		ld_words2<M, 4>(qs, bp + 32 + (u >> 2) * 32 + 16 * h);
		ld_words2<M, 4>(s, bp + 96); /* sc[12], d */
		for (int i = 0; i < 4; i++) {
			qa[i] = (qs[i] >> 2 * (u & 3) & 0x03030303u) | (hm[i] >> u & 0x01010101u) << 2;
			qb[i] = (qs[i] >> 2 * (p & 3) & 0x03030303u) | (hm[i] >> p & 0x01010101u) << 2;
		}
		/* groups 2 ua + h and 2 ua + 2 + h (coli_kq_q3_scale: the own
		 * unit's group h is the first for h = 0, the second for h = 1):
		 * their low nibbles are bytes h and h + 2 of word ua / 2 % 2 of
		 * sc, high ones from ua = 4, their top bits fields ua / 2 of
		 * bytes 8 + h and 10 + h; both scales in one word's bytes 0 and 2 */
		const unsigned lo = (ua & 2 ? s[1] : s[0]) >> (8 * h + 4 * (ua >> 2)) & 0x000f000fu,
		               top = s[2] >> (8 * h + ua) & 0x00030003u, v = lo | top << 4;

		sa = (int)(v >> 16 * h & 0xff) - 32, sb = (int)(v >> (16 - 16 * h) & 0xff) - 32;
		fa = half_to_float((unsigned short)s[3]), fc = 0.0f;
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		const int ta = sa * (dot4(qa, x) - 4 * xsum4(x)),
		          tb = sb * (dot4(qb, x + 4) - 4 * xsum4(x + 4));

		A = ta + __shfl_xor_sync(0xffffffffu, tb, 1);
		C = 0;
	}
};

/* A PAIRS type whose activations come own unit first (kq_act): 1 */
template <class U> struct XOwn {
	enum { v = 0 };
};
template <> struct XOwn<KQ3KP> {
	enum { v = 1 };
};
template <> struct XOwn<KQ2KP> {
	enum { v = 1 };
};

/* A Q4_K / Q5_K block's header hd (d, dmin, then sc[12]) for group g:
 * its 6-bit scale and min, and d and dmin as floats. Bytes g and g + 4
 * (g < 4), else the low and high nibble of byte g + 4 with the top bits of
 * g - 4 and g. */
static __device__ __forceinline__ void kq45_header(int4 hd, int g, int &sc, int &m, float &d,
                                                   float &dmin)
{
	const unsigned j = 8 * (g & 3);
	const int b0 = (int)((unsigned)hd.y >> j & 0xff), b1 = (int)((unsigned)hd.z >> j & 0xff),
	          b2 = (int)((unsigned)hd.w >> j & 0xff);

	if (g < 4) {
		sc = b0 & 63, m = b1 & 63;
	} else {
		sc = (b2 & 0xf) | (b0 >> 6) << 4;
		m = (b2 >> 4) | (b1 >> 6) << 4;
	}
	d = half_to_float((unsigned short)hd.x);
	dmin = half_to_float((unsigned short)((unsigned)hd.x >> 16));
}

/* ---- Q4_K (144 B) and Q5_K (176 B) / 256: d, dmin, sc[12] (6-bit scales and
 * mins of 8 groups of 32), [Q5_K: qh[32], bit g of qh[l]], qs[128]: group g
 * at qs[g / 2 * 32 + l], low nibble for even g. Blocks are 16-byte aligned. ---- */
template <int FIVE> struct KQ45K {
	enum { ELEMS = 256, BYTES = FIVE ? 176 : 144, MIN = 1, UNROLL = KQ_U1, HALVES = 0, PAIRS = 0 };
	unsigned q[8];
	int sc, m;
	float fa, fc;
	template <class M> __device__ __forceinline__ void load_blk(const u8 *bp, int g)
	{
		const u8 *qp = bp + (FIVE ? 48 : 16) + (g >> 1) * 32;
		const int4 q0 = M::v4(qp), q1 = M::v4(qp + 16), hd = M::v4(bp);
		const unsigned w[8] = {(unsigned)q0.x, (unsigned)q0.y, (unsigned)q0.z,
		                       (unsigned)q0.w, (unsigned)q1.x, (unsigned)q1.y,
		                       (unsigned)q1.z, (unsigned)q1.w};
		for (int i = 0; i < 8; i++)
			q[i] = w[i] >> 4 * (g & 1) & 0x0f0f0f0fu;
		if (FIVE) {
			const int4 h0 = M::v4(bp + 16), h1 = M::v4(bp + 32);
			const unsigned hw[8] = {(unsigned)h0.x, (unsigned)h0.y, (unsigned)h0.z,
			                        (unsigned)h0.w, (unsigned)h1.x, (unsigned)h1.y,
			                        (unsigned)h1.z, (unsigned)h1.w};

			for (int i = 0; i < 8; i++)
				q[i] |= (hw[i] >> g & 0x01010101u) << 4;
		}
		kq45_header(hd, g, sc, m, fa, fc);
	}
	__device__ __forceinline__ void load(const u8 *row, int b, int lane)
	{
		load_blk<MemG>(row + (size_t)(b >> 3) * BYTES, lane & 7);
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		A = sc * (dot4(q, x) + dot4(q + 4, x + 4));
		C = -m * xs;
	}
	__device__ __forceinline__ void i8(unsigned *o, float4 &rs, float2 &rm) const
	{
		for (int i = 0; i < 8; i++)
			o[i] = q[i];
		rs = make_float4(fa, fc, (float)sc, (float)sc),
		rm = make_float2(-(float)m, -(float)m);
	}
};

/* ---- Q4_K and Q5_K in pairs (the GEMV only): lanes 2k and 2k + 1 hold
 * groups 2k and 2k + 1 of a block, whose quants share the 32 bytes
 * qs[k * 32 ..] (group 2k the low nibbles; Q5_K's fifth bits are bits 2k
 * and 2k + 1 of the same qh[32]). Lane 2k + h reads half h of those bytes
 * (16 B of qs and, for Q5_K, 16 of qh, where KQ45K reads 32 and 32) and
 * forms both groups' elements 16h..16h + 15: the low ones against group
 * 2k's activations, the high ones against group 2k + 1's (Q4_K's kept as
 * 16 q, the dot shifted back: exact). Each lane keeps the partial dot of
 * its own group and sends the other to its partner (one shfl_xor), so each
 * ends with its group's whole dot: the same integer, so the same A and C as
 * KQ45K. ints() shuffles: every lane of the warp must call it together
 * (RowKS runs PAIRS types warp-wide). The activations are x[0..3] elements
 * 16h.. of group 2k and x[4..7] those of group 2k + 1 (kq_act). ---- */
template <int FIVE> struct KQ45KP {
	enum { ELEMS = 256, BYTES = FIVE ? 176 : 144, MIN = 1, HALVES = 0, PAIRS = 1 };
	unsigned q[4], qh[FIVE ? 4 : 1];
	int sc, m, g;
	float fa, fc;
	template <class M> __device__ __forceinline__ void load_blk(const u8 *bp, int gi)
	{
		const int h = gi & 1;
		const int4 qv = M::v4(bp + (FIVE ? 48 : 16) + (gi >> 1) * 32 + h * 16),
		           hd = M::v4(bp);
		q[0] = (unsigned)qv.x, q[1] = (unsigned)qv.y, q[2] = (unsigned)qv.z,
		q[3] = (unsigned)qv.w;
		if (FIVE) {
			const int4 hv = M::v4(bp + 16 + h * 16);
			qh[0] = (unsigned)hv.x, qh[FIVE] = (unsigned)hv.y,
			qh[2 * FIVE] = (unsigned)hv.z, qh[3 * FIVE] = (unsigned)hv.w;
		}
		g = gi;
		kq45_header(hd, gi, sc, m, fa, fc);
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		const int e = g & ~1; /* the pair's even group: fifth bits e, e + 1 */
		unsigned lo[4], hi[4];
		int pl, ph;

		for (int i = 0; i < 4; i++) {
			lo[i] = q[i] & 0x0f0f0f0fu, hi[i] = q[i] & 0xf0f0f0f0u;
			if (FIVE) {
				lo[i] |= (qh[FIVE * i] >> e & 0x01010101u) << 4;
				hi[i] = hi[i] >> 4 | (qh[FIVE * i] >> (e + 1) & 0x01010101u) << 4;
			}
		}
		pl = dot4(lo, x);
		/* Q4_K's high nibbles as 16 q (bytes up to 240: the unsigned dp4a) */
		ph = FIVE ? dot4(hi, x + 4) : dot4_us(hi, x + 4) >> 4;
		const int mine = g & 1 ? ph : pl, theirs = g & 1 ? pl : ph;

		A = sc * (mine + __shfl_xor_sync(0xffffffffu, theirs, 1));
		C = -m * xs;
	}
};

/* ---- Q6_K (210 B / 256): ql[128], qh[64], sc[16] (int8), d; unit u = groups
 * 2u, 2u + 1 of 16; q = (ql[u / 4 * 64 + u % 2 * 32 + l] >> 4 (u % 4 / 2) &
 * 15 | (qh[u / 4 * 32 + l] >> 2 (u % 4) & 3) << 4) - 32 ---- */
struct KQ6K {
	enum { ELEMS = 256, BYTES = 210, MIN = 0, UNROLL = 2, HALVES = 1, PAIRS = 0 };
	unsigned q[8];
	int s0, s1;
	float fa, fc;
	template <class M> __device__ __forceinline__ void load_blk(const u8 *bp, int u)
	{
		const int h = u >> 2;
		const unsigned short sw = M::u16(bp + 192 + 2 * u);
		unsigned ql[8], qh[8];

		ld_words2<M, 8, true>(ql, bp + h * 64 + (u & 1) * 32);
		ld_words2<M, 8, true>(qh, bp + 128 + h * 32);
		for (int i = 0; i < 8; i++)
			q[i] = (ql[i] >> 4 * (u >> 1 & 1) & 0x0f0f0f0fu) |
			       (qh[i] >> 2 * (u & 3) & 0x03030303u) << 4;
		s0 = (signed char)(sw & 0xff), s1 = (signed char)(sw >> 8);
		fa = half_to_float(M::u16(bp + 208)), fc = 0.0f;
	}
	__device__ __forceinline__ void load(const u8 *row, int b, int lane)
	{
		load_blk<MemG>(row + (size_t)(b >> 3) * BYTES, lane & 7);
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		A = s0 * (dot4(q, x) - 32 * xsum4(x)) +
		    s1 * (dot4(q + 4, x + 4) - 32 * xsum4(x + 4));
		C = 0;
	}
	__device__ __forceinline__ void i8(unsigned *o, float4 &rs, float2 &rm) const
	{
		for (int i = 0; i < 8; i++)
			o[i] = sext_bytes<6>(q[i]);
		rs = make_float4(fa, 0.0f, (float)s0, (float)s1), rm = make_float2(0.0f, 0.0f);
	}
};


/* ---- Q6_K in pairs (the GEMV only): units u and u ^ 2 of a block (u < 8;
 * lanes u and u ^ 2) take their quants' low bits from the same 32 bytes
 * ql[u / 4 * 64 + u % 2 * 32 ..] (the unit with bit 1 clear the low
 * nibbles) and their high bits from the same qh[u / 4 * 32 ..]. Lane u
 * reads half h = u / 2 % 2 of both (16 B each, where KQ6K reads 32 + 32)
 * and forms both units' group h (elements 16h..16h + 15): each group of 16
 * is whole in one lane, so the lane scales both (s q x, the offset
 * applied), keeps its own unit's and sends the other to its partner (one
 * shfl_xor of 2): A is the same integer as KQ6K's. Activations (kq_act):
 * x[0..3] elements 16h.. of unit u & ~2, x[4..7] those of unit u | 2.
 * ints() shuffles: the warp calls it together (RowKS runs PAIRS types
 * warp-wide). ---- */
struct KQ6KP {
	enum { ELEMS = 256, BYTES = 210, MIN = 0, HALVES = 1, PAIRS = 2 };
	unsigned qa[4], qb[4];
	int sa, sb, hi;
	float fa, fc;
	template <class M> __device__ __forceinline__ void load_blk(const u8 *bp, int u)
	{
		const int h = u >> 1 & 1, ua = u & ~2;
		const u8 *half = bp + (u >> 2) * 64 + (u & 1) * 32 + h * 16;
		unsigned ql[4], qh[4];

		ld_words2<M, 4, true>(ql, half);
		ld_words2<M, 4, true>(qh, bp + 128 + (u >> 2) * 32 + h * 16);
		/* ua's high bits at 2 (ua % 4), u | 2's two bits above them */
		const unsigned sh = 2 * (ua & 3);

		for (int i = 0; i < 4; i++) {
			qa[i] = (ql[i] & 0x0f0f0f0fu) | (qh[i] >> sh & 0x03030303u) << 4;
			qb[i] = (ql[i] >> 4 & 0x0f0f0f0fu) | (qh[i] >> (sh + 4) & 0x03030303u) << 4;
		}
		/* group h of units ua and ua + 2: scales sc[2 ua + h], sc[2 ua + 4 + h] */
		sa = (signed char)(M::u16(bp + 192 + 2 * ua) >> 8 * h);
		sb = (signed char)(M::u16(bp + 196 + 2 * ua) >> 8 * h);
		hi = h;
		fa = half_to_float(M::u16(bp + 208)), fc = 0.0f;
	}
	__device__ __forceinline__ void ints(const int *x, int xs, int &A, int &C) const
	{
		const int ta = sa * (dot4(qa, x) - 32 * xsum4(x)),
		          tb = sb * (dot4(qb, x + 4) - 32 * xsum4(x + 4));
		const int mine = hi ? tb : ta, theirs = hi ? ta : tb;

		A = mine + __shfl_xor_sync(0xffffffffu, theirs, 2);
		C = 0;
	}
};

#endif
