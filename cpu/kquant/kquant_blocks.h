/*
 * cpu/kquant/kquant_blocks.h — the K-quants' block forms over 256-bit integer
 * vectors (Q4_K and Q5_K, Q6_K, Q3_K, Q2_K): one 256-element block of a row
 * against up to KQ_NS activations, its eight units' exact integers and the
 * reference's fp32 steps into the row's accumulators. Included by
 * cpu/kquant/kquant_simd.h after the steps they share (kq_hsum8x8,
 * kq_scaled_sum16, the includer's DOTACC), and compiled with it for AVX2 and
 * for AVX-512 VNNI; the reduction they follow is that file's top comment.
 */
#ifndef COLI_CPU_KQUANT_BLOCKS_H
#define COLI_CPU_KQUANT_BLOCKS_H

/* The block functions below take ns (1, 2 or 4, a constant once inlined)
 * activations x[0..ns) and block i of a row: the weights are unpacked and
 * their scales decoded once, then dotted with each activation into acc[s]
 * (coli_gemm's S > 1 shares them; every activation's bits are coli_gemv's). */
#define KQ_NS 4 /* (four a row against two at S = 4, weights from memory on two Zen 4
                 * cores: q3_k 7.86 -> 7.08 ms a pass, q5_0 6.38 -> 5.62, q6_k 4.66 -> 4.32) */

/* A Q4_K / Q5_K block's 6-bit scales and mins of its eight groups, four
 * bytes a word (coli_kq_scale_min's fields): groups 0-3 in *sc_lo / *m_lo,
 * 4-7 in *sc_hi / *m_hi */
KQ_INLINE void kq_q45k_scales(const uint8_t *bp, uint32_t *sc_lo, uint32_t *sc_hi, uint32_t *m_lo,
                              uint32_t *m_hi)
{
	uint32_t u0, u1, u2;

	memcpy(&u0, bp + 4, 4), memcpy(&u1, bp + 8, 4), memcpy(&u2, bp + 12, 4);
	*sc_lo = u0 & 0x3f3f3f3fu, *m_lo = u1 & 0x3f3f3f3fu;
	*sc_hi = (u2 & 0x0f0f0f0fu) | (u0 >> 6 & 0x03030303u) << 4;
	*m_hi = (u2 >> 4 & 0x0f0f0f0fu) | (u1 >> 6 & 0x03030303u) << 4;
}

/* One Q4_K / Q5_K block at bp: activation blocks x[s]->q + 256 i, their
 * qsum and dx (8 each), into acc[s] (8 lanes). */
KQ_INLINE void kq_q45k_block(const uint8_t *bp, const struct coli_act *const *x, int ns, int i,
                             __m256 *acc, int five)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256();
	const uint8_t *qs = bp + (five ? 48 : 16);
	__m256i v[KQ_NS][8], h = five ? kq_load(bp + 16) : zero; /* KQ_HADD16: v[s][0..3] */
	uint32_t sc_lo, m_lo, sc_hi, m_hi;

#pragma GCC unroll 4
	for (int j = 0; j < 4; j++) {
		__m256i q = kq_load(qs + 32 * j);
		__m256i lo = _mm256_and_si256(q, m4),
		        hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);

		if (five) { /* bit g of qh[l] is element l's fifth bit in group g, moved
			     * to bit 4 of its byte (a 16-bit shift: what crosses from
			     * the neighbour byte lands outside bit 4) */
			const __m256i s16 = _mm256_set1_epi8(16);
			const __m256i h0 = 2 * j >= 4 ? _mm256_srli_epi16(h, 2 * j - 4)
			                              : _mm256_slli_epi16(h, 4 - 2 * j);
			const __m256i h1 = 2 * j + 1 >= 4 ? _mm256_srli_epi16(h, 2 * j + 1 - 4)
			                                  : _mm256_slli_epi16(h, 4 - 2 * j - 1);

			lo = _mm256_or_si256(lo, _mm256_and_si256(h0, s16));
			hi = _mm256_or_si256(hi, _mm256_and_si256(h1, s16));
		}
#pragma GCC unroll 4
		for (int s = 0; s < ns; s++) {
			const int8_t *xq = x[s]->q + 256 * i;

#ifdef KQ_HADD16 /* |pair| <= 2 * 31 * 127 */
			v[s][j] = kq_pairs2(_mm256_maddubs_epi16(lo, kq_load(xq + 64 * j)),
			                    _mm256_maddubs_epi16(hi, kq_load(xq + 64 * j + 32)));
#else
			v[s][2 * j] = DOTACC(zero, lo, kq_load(xq + 64 * j));
			v[s][2 * j + 1] = DOTACC(zero, hi, kq_load(xq + 64 * j + 32));
#endif
		}
	}
	kq_q45k_scales(bp, &sc_lo, &sc_hi, &m_lo, &m_hi);
#ifdef KQ_HADD16 /* the scales (<= 63) as int16 pairs */
	const __m128i sc8 = _mm_set_epi32(0, 0, (int)sc_hi, (int)sc_lo);
	const __m256i sp03 = KQ_SP(sc8, 0, 1, 2, 3, 0, 1, 2, 3),
	              sp47 = KQ_SP(sc8, 4, 5, 6, 7, 4, 5, 6, 7);
#else
	const __m256i sc = _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, (int)sc_hi, (int)sc_lo));
#endif
	const __m256i mn = _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, (int)m_hi, (int)m_lo));
	const __m256 dd = kq_halves2(bp); /* d, dmin */
	const __m256 d = _mm256_permute_ps(dd, 0x00), dmin = _mm256_permute_ps(dd, 0x55);

#pragma GCC unroll 4
	for (int s = 0; s < ns; s++) {
#ifdef KQ_HADD16
		const __m256i A = kq_scaled_sum16(v[s], sp03, sp47);
#else
		const __m256i A = _mm256_mullo_epi32(kq_hsum8x8(v[s]), sc);
#endif
		/* M = m * qsum, the min term C = -M: fnmadd(cvt(M), ..) is
		 * fmadd(cvt(-M), ..) bit for bit (the conversion is odd) */
#ifdef KQ_HADD16 /* |qsum| <= 32 * 127 and the mins' high halves 0: one vpmaddwd */
		const __m256i M = _mm256_madd_epi16(
		    mn, _mm256_loadu_si256((const __m256i *)(x[s]->qsum + 8 * i)));
#else
		const __m256i M = _mm256_mullo_epi32(
		    mn, _mm256_loadu_si256((const __m256i *)(x[s]->qsum + 8 * i)));
#endif
		const __m256 dxv = _mm256_loadu_ps(x[s]->d + 8 * i);

		acc[s] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(A), _mm256_mul_ps(d, dxv), acc[s]);
		acc[s] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(M), _mm256_mul_ps(dmin, dxv), acc[s]);
	}
}

/* Units 4h .. 4h + 3 of a Q6_K block's quants (0..63, unsigned: the offset
 * 32 not applied) into q[4]: low nibbles from ql bytes h*64 + (u%2)*32 ..
 * +32 (low nibble for u%4 < 2, high otherwise), two high bits from qh bytes
 * h*32 .. +32 at shift 2*(u%4) */
KQ_INLINE void kq_q6k_quants(const uint8_t *bp, int h, __m256i *q)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3);
	const __m256i A = kq_load(bp + h * 64), B = kq_load(bp + h * 64 + 32),
	              H = kq_load(bp + 128 + h * 32);

	q[0] = _mm256_or_si256(_mm256_and_si256(A, m4),
	                       _mm256_slli_epi16(_mm256_and_si256(H, m3), 4));
	q[1] = _mm256_or_si256(_mm256_and_si256(B, m4),
	                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 2), m3), 4));
	q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4),
	                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 4), m3), 4));
	q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m4),
	                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(H, 6), m3), 4));
}

/* One Q6_K block (its units' quants: kq_q6k_quants). */
KQ_INLINE void kq_q6k_block(const uint8_t *bp, const struct coli_act *const *x, int ns, int i,
                            __m256 *acc)
{
	const __m256i k32 = _mm256_set1_epi8(32);
	const __m128i sc16 = _mm_loadu_si128((const __m128i *)(bp + 192)); /* int8 [16] */
	const __m256 d = _mm256_set1_ps(kq_half(bp + 208));
	__m256i v[KQ_NS][8];

#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) {
		__m256i q[4];

		kq_q6k_quants(bp, h, q);
#pragma GCC unroll 4
		for (int k = 0; k < 4; k++) {
			const int u = h * 4 + k;

#pragma GCC unroll 4
			for (int s = 0; s < ns; s++) {
				const __m256i xv = kq_load(x[s]->q + 256 * i + 32 * u);

				/* pairs of products in int16 (|q x + q' x'| <= 16002, the
				 * offset's <= 8128, their difference <= 8128: four of
				 * them still fit int16 in kq_scaled_sum16) */
				KQ_UNIT(v[s], u,
				        _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], xv),
				                         _mm256_maddubs_epi16(k32, xv)));
			}
		}
	}
#pragma GCC unroll 4
	for (int s = 0; s < ns; s++)
		acc[s] = _mm256_fmadd_ps(
		    _mm256_cvtepi32_ps(KQ_UNITS(v[s], KQ_SP03(sc16), KQ_SP47(sc16))),
		    _mm256_mul_ps(d, _mm256_loadu_ps(x[s]->d + 8 * i)), acc[s]);
}

/* One Q3_K block. Unit u (0..7): two-bit fields from qs bytes (u/4)*32 ..
 * +32 at shift 2*(u%4), the high bit from hm bit u; val = q + 4 = low |
 * high << 2 (0..7, unsigned), so A = sum s * val * x - 4 * sum s * x. The
 * 6-bit scales (coli_kq_q3_scale) decoded to int8 first. */
KQ_INLINE void kq_q3k_block(const uint8_t *bp, const struct coli_act *const *x,
                            const int16_t *const *x16, int ns, int i, __m256 *acc)
{
	const __m256i m3 = _mm256_set1_epi8(3), b2 = _mm256_set1_epi8(4), H = kq_load(bp);
	const __m256 d = _mm256_set1_ps(kq_half(bp + 108));
	const __m128i s16 = q3k_scales(bp); /* cpu/gemv/panel_unpack.h */
	__m256i v[KQ_NS][8];

#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) {
		const __m256i Q = kq_load(bp + 32 + 32 * h);

#pragma GCC unroll 4
		for (int k = 0; k < 4; k++) {
			const int u = h * 4 + k;
			const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(Q, 2 * k), m3);
			const __m256i hb = _mm256_and_si256(
			    u >= 2 ? _mm256_srli_epi16(H, u - 2) : _mm256_slli_epi16(H, 2 - u), b2);
			const __m256i val = _mm256_or_si256(lo, hb);

#pragma GCC unroll 4
			for (int s = 0; s < ns; s++) /* |pair| <= 2 * 7 * 127 */
				KQ_UNIT(
				    v[s], u,
				    _mm256_maddubs_epi16(val, kq_load(x[s]->q + 256 * i + 32 * u)));
		}
	}
	const __m256i s16w = _mm256_cvtepi8_epi16(s16);

#pragma GCC unroll 4
	for (int s = 0; s < ns; s++) {
		/* the offset's term, 4 * sum s * x: lane u of vpmaddwd is unit
		 * u's two groups (kq_sums16) times their scales */
		const __m256i off = _mm256_madd_epi16(s16w, kq_load(x16[s] + 16 * i));
		const __m256i A = _mm256_sub_epi32(KQ_UNITS(v[s], KQ_SP03(s16), KQ_SP47(s16)),
		                                   _mm256_slli_epi32(off, 2));

		acc[s] =
		    _mm256_fmadd_ps(_mm256_cvtepi32_ps(A),
		                    _mm256_mul_ps(d, _mm256_loadu_ps(x[s]->d + 8 * i)), acc[s]);
	}
}

/* A Q2_K block's header: its 16 scales and mins (the nibbles of sc[16],
 * 0..15: int8 too), the mins widened to int16, and d and dmin broadcast */
struct kq_q2k_head {
	__m128i s16, m16;
	__m256i m16w;
	__m256 d, dmin;
};

KQ_INLINE struct kq_q2k_head kq_q2k_header(const uint8_t *bp)
{
	const __m128i raw = _mm_loadu_si128((const __m128i *)bp), n4 = _mm_set1_epi8(0x0f);
	const __m256 dd = kq_halves2(bp + 80); /* d, dmin */
	struct kq_q2k_head hd;

	hd.s16 = _mm_and_si128(raw, n4);
	hd.m16 = _mm_and_si128(_mm_srli_epi16(raw, 4), n4);
	hd.m16w = _mm256_cvtepu8_epi16(hd.m16);
	hd.d = _mm256_permute_ps(dd, 0x00), hd.dmin = _mm256_permute_ps(dd, 0x55);
	return hd;
}

/* A Q2_K block's fp32 steps into acc from its units' scaled sums A: M, lane
 * u of vpmaddwd, is unit u's two groups' activation sums (kq_sums16 at x16)
 * times their mins; the min term C = -M, by fnmadd (as Q4_K's) */
KQ_INLINE __m256 kq_q2k_steps(const struct kq_q2k_head *hd, __m256i A, const int16_t *x16,
                              const float *dx, __m256 acc)
{
	const __m256 dxv = _mm256_loadu_ps(dx);
	const __m256i M = _mm256_madd_epi16(hd->m16w, kq_load(x16));

	acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(A), _mm256_mul_ps(hd->d, dxv), acc);
	return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(M), _mm256_mul_ps(hd->dmin, dxv), acc);
}

/* One Q2_K block: unit u's two-bit quants as Q3_K's low bits (qs at 16),
 * scale and min the nibbles of sc[2u], sc[2u+1]; A = sum s * q * x, C = -sum
 * m * x (the dot of ones with x: pairs of x a lane). */
KQ_INLINE void kq_q2k_block(const uint8_t *bp, const struct coli_act *const *x,
                            const int16_t *const *x16, int ns, int i, __m256 *acc)
{
	const __m256i m3 = _mm256_set1_epi8(3);
	const struct kq_q2k_head hd = kq_q2k_header(bp);
	__m256i v[KQ_NS][8];

#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) {
		const __m256i Q = kq_load(bp + 16 + 32 * h);

#pragma GCC unroll 4
		for (int k = 0; k < 4; k++) {
			const int u = h * 4 + k;
			const __m256i q = _mm256_and_si256(_mm256_srli_epi16(Q, 2 * k), m3);

#pragma GCC unroll 4
			for (int s = 0; s < ns; s++)
				KQ_UNIT(
				    v[s], u,
				    _mm256_maddubs_epi16(q, kq_load(x[s]->q + 256 * i + 32 * u)));
		}
	}

#pragma GCC unroll 4
	for (int s = 0; s < ns; s++)
		acc[s] = kq_q2k_steps(&hd, KQ_UNITS(v[s], KQ_SP03(hd.s16), KQ_SP47(hd.s16)),
		                      x16[s] + 16 * i, x[s]->d + 8 * i, acc[s]);
}

#endif
