/*
 * cpu/kquant/kquant_vnni.h — block forms of their own for AVX-512 VNNI
 * (included by cpu/kquant/kquant_simd.h where cpu/kquant/kquant_avx512.c
 * asks for them; kq_block takes them): Q4_K two units to a vector, against
 * the activation rearranged once a call, Q6_K's units into int32 at S = 1,
 * and Q2_K at S = 1 on 512-bit vectors. The integers are the generic
 * blocks', so the bits are; the activation's preparation (kq_prepare) is
 * the caller's.
 */
#ifdef KQ_Q4K_PAIRS
/* Q4_K below the panels (a decode step, coli_gemv, and batches of up to
 * COLI_PANEL_MIN_S - 1 activations), two units to a vector where
 * kq_q45k_block gives each its own: a block's 32 quant bytes j hold
 * units 2j (low nibbles) and 2j + 1 (high). Their first 16 bytes,
 * broadcast to both lanes and masked [0x0f | 0xf0], are [unit 2j's
 * elements 0..15 | 16 x unit 2j + 1's] (the high nibble left in place);
 * bytes 16..31 likewise give elements 16..31, and two vpdpbusd against the
 * activation rearranged once a call (kq_q4k_pairs_x, for K up to
 * KQ_PREP_BYTES: past DeepSeek-V3's largest, 18,432) leave [unit 2j: 4
 * partials | 16 x unit 2j + 1: 4]. Three vphaddd then give all eight units
 * where kq_hsum8x8 takes six and three more; a vpermd puts them in lane
 * order and a shift by [0 4 0 4 ..] removes the 16 (exact: the sums are
 * multiples of 16, |.| <= 32 * 240 * 127). The integers are kq_q45k_block's,
 * so the bits are; the scales and the fp32 steps are its own. */
/* xr: xq with the middle 16 bytes of every 64 swapped: [0..15 32..47 16..31
 * 48..63], the activation halves two units' pairs meet */
KQ_INLINE void kq_q4k_pairs_x(const int8_t *xq, int K, int8_t *xr)
{
	for (int c = 0; c < K; c += 64) {
		const __m256i a = kq_load(xq + c), b = kq_load(xq + c + 32);

		_mm256_storeu_si256((__m256i *)(xr + c), _mm256_permute2x128_si256(a, b, 0x20));
		_mm256_storeu_si256((__m256i *)(xr + c + 32), _mm256_permute2x128_si256(a, b, 0x31));
	}
}

/* Q4_K block i at bp against ns activations x[s] (xr[s] their rearranged
 * quants; ns 1 to KQ_NS, a constant once inlined) into acc[s] (8 lanes):
 * the weights' vectors and the scales once for all of them */
KQ_INLINE void kq_q4k_pairs_block(const uint8_t *bp, const struct coli_act *const *x,
                                  const int8_t *const *xr, int ns, int i, __m256 *acc)
{
	const __m256i mask = _mm256_setr_epi64x(0x0f0f0f0f0f0f0f0fll, 0x0f0f0f0f0f0f0f0fll,
	                                        (long long)0xf0f0f0f0f0f0f0f0ull,
	                                        (long long)0xf0f0f0f0f0f0f0f0ull);
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7),
	              sixteen = _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4);
	const uint8_t *qs = bp + 16;
	__m256i v[KQ_NS][4];
	uint32_t sc_lo, m_lo, sc_hi, m_hi;

#pragma GCC unroll 4
	for (int j = 0; j < 4; j++) {
		const __m256i w0 = _mm256_and_si256(
		                  _mm256_broadcastsi128_si256(
		                      _mm_loadu_si128((const __m128i *)(qs + 32 * j))),
		                  mask),
		              w1 = _mm256_and_si256(
		                  _mm256_broadcastsi128_si256(
		                      _mm_loadu_si128((const __m128i *)(qs + 32 * j + 16))),
		                  mask);

#pragma GCC unroll 4
		for (int s = 0; s < ns; s++) {
			const int8_t *xa = xr[s] + 256 * i + 64 * j;

			v[s][j] = DOTACC(DOTACC(_mm256_setzero_si256(), w0, kq_load(xa)), w1,
			                 kq_load(xa + 32));
		}
	}
#pragma GCC unroll 4
	for (int s = 0; s < ns; s++) /* v[s][0]: the eight units in lane order */
		v[s][0] = _mm256_srav_epi32(
		    _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(_mm256_hadd_epi32(v[s][0], v[s][1]),
		                                                  _mm256_hadd_epi32(v[s][2], v[s][3])),
		                                order),
		    sixteen);
	kq_q45k_scales(bp, &sc_lo, &sc_hi, &m_lo, &m_hi);
	const __m256i sc = _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, (int)sc_hi, (int)sc_lo)),
	              mn = _mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, (int)m_hi, (int)m_lo));
	const __m256 dd = kq_halves2(bp);
	const __m256 d = _mm256_permute_ps(dd, 0x00), dmin = _mm256_permute_ps(dd, 0x55);

#pragma GCC unroll 4
	for (int s = 0; s < ns; s++) {
		const __m256i A = _mm256_mullo_epi32(v[s][0], sc),
		              M = _mm256_mullo_epi32(
		                  mn, _mm256_loadu_si256((const __m256i *)(x[s]->qsum + 8 * i)));
		const __m256 dxv = _mm256_loadu_ps(x[s]->d + 8 * i);

		acc[s] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(A), _mm256_mul_ps(d, dxv), acc[s]);
		acc[s] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(M), _mm256_mul_ps(dmin, dxv), acc[s]);
	}
}
#endif

#ifdef KQ_Q6K_DOT32
/* Q6_K at S = 1 (a decode step, or a batch's last activation): a unit's quants (0..63, the
 * offset not applied) into int32 by vpdpbusd, [group 2u: 4 partials |
 * group 2u + 1: 4], where kq_q6k_block takes two vpmaddubsw and a vpsubw a
 * unit to keep its int16 tree in range. Six vphaddd give the sixteen group
 * sums in two vectors ([0 2 4 6 | 1 3 5 7] and [8 .. 14 | 9 .. 15]), each
 * times its scales in that order (vpmulld), the lanes' halves added: lane
 * u = s(2u) G(2u) + s(2u+1) G(2u+1); the offset 32 (s(2u) X(2u) +
 * s(2u+1) X(2u+1)) is one vpmaddwd of the scales by the activation's sums
 * of 16 (kq_sums16), shifted by 5. The same integers (|.| < 2^25 on the
 * way, A below 2^24), so the same bits. */
KQ_INLINE void kq_q6k_dot32_block(const uint8_t *bp, const struct coli_act *x, const int16_t *x16,
                                  int i, __m256 *acc)
{
	const __m128i sc16 = _mm_loadu_si128((const __m128i *)(bp + 192)); /* int8 [16] */
	const __m128i sc_ab = _mm_shuffle_epi8(
	    sc16, _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15));
	const __m256 d = _mm256_set1_ps(kq_half(bp + 208));
	const int8_t *xq = x->q + 256 * i;
	__m256i v[8];

#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) {
		__m256i q[4];

		kq_q6k_quants(bp, h, q);

#pragma GCC unroll 4
		for (int k = 0; k < 4; k++)
			v[h * 4 + k] = DOTACC(_mm256_setzero_si256(), q[k],
			                      kq_load(xq + 32 * (h * 4 + k)));
	}
	const __m256i ga = _mm256_mullo_epi32(
	                  _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]),
	                                    _mm256_hadd_epi32(v[2], v[3])),
	                  _mm256_cvtepi8_epi32(sc_ab)),
	              gb = _mm256_mullo_epi32(
	                  _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]),
	                                    _mm256_hadd_epi32(v[6], v[7])),
	                  _mm256_cvtepi8_epi32(_mm_srli_si128(sc_ab, 8)));
	const __m256i G = _mm256_add_epi32(_mm256_permute2x128_si256(ga, gb, 0x20),
	                                   _mm256_permute2x128_si256(ga, gb, 0x31));
	const __m256i off = _mm256_slli_epi32(
	    _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc16), kq_load(x16 + 16 * i)), 5);

	*acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(G, off)),
	                       _mm256_mul_ps(d, _mm256_loadu_ps(x->d + 8 * i)), *acc);
}
#endif

#ifdef KQ_Q2K_ZMM
/* Q2_K at S = 1 on 512-bit vectors: units u and u + 1 (u even) in one
 * register, their 32 shared quant bytes broadcast to both halves and the
 * fields masked in place ([3 << 4k | 12 << 4k] a byte, u = 4h + 2k: 4^(unit % 4) times
 * the quant, at most 192, unsigned), one vpdpbusd against the two units'
 * 64 contiguous activation bytes: [group 2u | 2u + 1 | 2u + 2 | 2u + 3], four
 * int32 partials each. kq_q2k_block takes a vpmaddubsw a unit (256 bits)
 * and a vphaddw tree: three-uop shuffles where this form's reduction is
 * one-uop unpacks. The four registers of a block (64 partials) fold into
 * the sixteen group sums by two levels of unpack and add (lane L of the
 * result: groups L, 4 + L, 8 + L, 12 + L), one vpermd puts the even groups
 * in the low half and the odd ones in the high, a vpsravd takes each back
 * by its 4^(unit % 4) (exact: the sums are multiples of it), each times its
 * scale (vpmulld, the scales in the same order), the halves added: lane u =
 * s(2u) G(2u) + s(2u + 1) G(2u + 1), kq_q2k_block's A. The header and the
 * fp32 steps are kq_q2k_block's (kq_q2k_header, kq_q2k_steps). */
KQ_INLINE void kq_q2k_zmm_block(const uint8_t *bp, const struct coli_act *x, const int16_t *x16,
                                int i, __m256 *acc)
{
	/* group g of the folded sums sits at 4 (g % 4) + g / 4 */
	const __m512i order =
	    _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
	const struct kq_q2k_head hd = kq_q2k_header(bp);
	const __m512i sc = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(
	    hd.s16, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
	const int8_t *xq = x->q + 256 * i;
	__m512i z[4];

#pragma GCC unroll 2
	for (int h = 0; h < 2; h++) {
		const __m512i Q = _mm512_broadcast_i64x4(kq_load(bp + 16 + 32 * h));

#pragma GCC unroll 2
		for (int k = 0; k < 2; k++) { /* units 4h + 2k, 4h + 2k + 1 */
			/* the fields in place, 4^(unit % 4) times the quant */
			const __m512i q = _mm512_and_si512(
			    Q, _mm512_mask_blend_epi64(0xf0, _mm512_set1_epi8((char)(3 << 4 * k)),
			                               _mm512_set1_epi8((char)(12 << 4 * k))));

			z[2 * h + k] = _mm512_dpbusd_epi32(
			    _mm512_setzero_si512(), q,
			    _mm512_loadu_si512((const void *)(xq + 32 * (4 * h + 2 * k))));
		}
	}
	const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[0], z[1]),
	                                     _mm512_unpackhi_epi32(z[0], z[1])),
	              s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[2], z[3]),
	                                     _mm512_unpackhi_epi32(z[2], z[3]));
	const __m512i g = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23),
	                                   _mm512_unpackhi_epi64(s01, s23));
	const __m512i G = _mm512_mullo_epi32(
	    _mm512_srav_epi32(_mm512_permutexvar_epi32(order, g),
	                      _mm512_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6)),
	    sc);
	const __m256i A =
	    _mm256_add_epi32(_mm512_castsi512_si256(G), _mm512_extracti64x4_epi64(G, 1));

	*acc = kq_q2k_steps(&hd, A, x16 + 16 * i, x->d + 8 * i, *acc);
}
#endif
