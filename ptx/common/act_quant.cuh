/*
 * ptx/common/act_quant.cuh — the scalar steps of the canonical activation
 * quantization (cpu/ coli_act_quantize: per 32-block d = amax / 127, q =
 * round(v / d) clamped to +-127, a NaN to 0), shared by every kernel that
 * quantizes activations, so each gives coli_act_quantize's bits whatever its
 * thread layout (amax is a max and the block sum an integer sum: their order
 * does not matter).
 */
#ifndef COLI_PTX_ACT_QUANT_CUH
#define COLI_PTX_ACT_QUANT_CUH

/* |v| for the block maximum: a NaN never becomes the max */
static __device__ __forceinline__ float act_abs(float amax, float v)
{
	return fmaxf(amax, fabsf(v));
}

/* The block scale d = amax / 127 into *d; returns 1 / d (0 for an all-zero block). */
static __device__ __forceinline__ float act_inv(float amax, float *d)
{
	const float dd = __fdiv_rn(amax, 127.0f);

	*d = dd;
	return dd != 0.0f ? __fdiv_rn(1.0f, dd) : 0.0f;
}

static __device__ __forceinline__ int act_q(float v, float id)
{
	const float r = roundf(__fmul_rn(v, id));

	return r != r ? 0 : r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r;
}

#endif
