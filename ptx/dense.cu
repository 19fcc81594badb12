/*
 * ptx/dense.cu — the dense part of a layer on the GPU: embedding rows,
 * RMSNorm, bias, RoPE, attention over the KV cache, residual adds, the MoE
 * weighted accumulate and the shared expert's sigmoid gate. (The GEMVs are
 * the grouped kernels of kernels.cu, which also serve q/k/v/o, routers,
 * shared experts and lm_head.)
 *
 * The dense part is exempt from the placement invariant (it runs where it
 * runs), so these kernels only follow transformers' float32 math within
 * rounding; the one exception is coli_moe_accumulate, which reproduces
 * core/moe.c's order exactly (pairs in ascending expert id, product rounded
 * then added), so routed-expert results combine with the same bits on any
 * device. Layouts: rows are tokens, row-major, fp32.
 */
#include <cuda_fp16.h>

static __device__ float block_sum(float v, float *red)
{
	/* warp shuffles, then one value per warp through shared memory */
	for (int off = 16; off; off >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, off);
	if ((threadIdx.x & 31) == 0)
		red[threadIdx.x >> 5] = v;
	__syncthreads();
	if (threadIdx.x < 32) {
		v = threadIdx.x < (blockDim.x >> 5) ? red[threadIdx.x] : 0.0f;
		for (int off = 16; off; off >>= 1)
			v += __shfl_xor_sync(0xffffffffu, v, off);
		if (threadIdx.x == 0)
			red[32] = v;
	}
	__syncthreads();
	v = red[32];
	__syncthreads();
	return v;
}

/* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w   (w may be NULL); one CTA per row */
extern "C" __global__ void coli_rmsnorm(const float *x, const float *w, float *y, int n, float eps)
{
	__shared__ float red[33];
	const float *xr = x + (size_t)blockIdx.x * n;
	float *yr = y + (size_t)blockIdx.x * n;
	float ss = 0.0f, inv;

	for (int i = threadIdx.x; i < n; i += blockDim.x)
		ss += xr[i] * xr[i];
	ss = block_sum(ss, red);
	inv = rsqrtf(ss / n + eps);
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		yr[i] = w ? w[i] * (xr[i] * inv) : xr[i] * inv;
}

/* y[r][i] += b[i] over rows*n elements */
extern "C" __global__ void coli_add_bias(float *y, const float *b, int rows, int n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < (size_t)rows * n)
		y[i] += b[i % n];
}

/* x += y over n elements */
extern "C" __global__ void coli_add(float *x, const float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] += y[i];
}

/* Rotate-half RoPE in place: x [T][nh][hd], one thread per (t, h, i < hd/2). */
extern "C" __global__ void coli_rope(float *x, int T, int nh, int hd, int pos0,
                                     const float *inv_freq)
{
	int half = hd / 2;
	size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	int i, h, t;
	float ang, cs, sn, x1, x2, *v;

	if (idx >= (size_t)T * nh * half)
		return;
	i = (int)(idx % half);
	h = (int)((idx / half) % nh);
	t = (int)(idx / ((size_t)half * nh));
	ang = (float)(pos0 + t) * inv_freq[i];
	cs = (float)cos((double)ang);
	sn = (float)sin((double)ang);
	v = x + ((size_t)t * nh + h) * hd;
	x1 = v[i];
	x2 = v[i + half];
	v[i] = x1 * cs - x2 * sn;
	v[i + half] = x2 * cs + x1 * sn;
}

/* Causal attention, one CTA per (query t, head h): scores over positions
 * p <= pos0 + t in dynamic shared memory ([ctx] floats), softmax, then the
 * weighted sum of values. K, V: the layer's cache [ctx][nkv*hd]. */
extern "C" __global__ void coli_attention(const float *q, const float *K, const float *V,
                                          float *out, int pos0, int nh, int nkv, int hd,
                                          float scale)
{
	extern __shared__ float sc[];
	__shared__ float red[33];
	const int t = blockIdx.x, h = blockIdx.y, kvh = h / (nh / nkv), kvd = nkv * hd;
	const int n = pos0 + t + 1;
	const float *qv = q + ((size_t)t * nh + h) * hd;
	float mx = -INFINITY, sum = 0.0f;

	for (int p = threadIdx.x; p < n; p += blockDim.x) {
		const float *k = K + (size_t)p * kvd + kvh * hd;
		float s = 0.0f;

		for (int i = 0; i < hd; i++)
			s += qv[i] * k[i];
		sc[p] = s * scale;
		mx = fmaxf(mx, sc[p]);
	}
	/* block max through the same shuffle pattern */
	for (int off = 16; off; off >>= 1)
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
	if ((threadIdx.x & 31) == 0)
		red[threadIdx.x >> 5] = mx;
	__syncthreads();
	if (threadIdx.x == 0) {
		float m = red[0];

		for (int w = 1; w < (int)(blockDim.x >> 5); w++)
			m = fmaxf(m, red[w]);
		red[32] = m;
	}
	__syncthreads();
	mx = red[32];
	__syncthreads();
	for (int p = threadIdx.x; p < n; p += blockDim.x) {
		sc[p] = expf(sc[p] - mx);
		sum += sc[p];
	}
	sum = block_sum(sum, red);
	for (int i = threadIdx.x; i < hd; i += blockDim.x) {
		float acc = 0.0f;

		for (int p = 0; p < n; p++)
			acc += (sc[p] / sum) * V[(size_t)p * kvd + kvh * hd + i];
		out[((size_t)t * nh + h) * hd + i] = acc;
	}
}

/* x[t] = row ids[t] of an embedding table [vocab][H], dequantized. dtype: 2 bf16,
 * 8 q8_0, 9 q4_0 (enum coli_dtype), 0 f32; scales: the fp16 plane (quant). */
extern "C" __global__ void coli_embed(const void *table, const unsigned short *scales, int dtype,
                                      const int *ids, float *x, int H)
{
	const int t = blockIdx.x, r = ids[t];

	for (int i = threadIdx.x; i < H; i += blockDim.x) {
		float v;

		if (dtype == 2) {
			v = __uint_as_float(
			    (unsigned int)((const unsigned short *)table)[(size_t)r * H + i] << 16);
		} else if (dtype == 8) {
			float d =
			    __half2float(__ushort_as_half(scales[(size_t)r * (H / 32) + i / 32]));

			v = d * (float)((const signed char *)table)[(size_t)r * H + i];
		} else if (dtype == 9) {
			const unsigned char *b =
			    (const unsigned char *)table + (size_t)r * (H / 2) + (i / 32) * 16;
			int j = i % 32;
			int q = j < 16 ? (b[j] & 15) : (b[j - 16] >> 4);
			float d =
			    __half2float(__ushort_as_half(scales[(size_t)r * (H / 32) + i / 32]));

			v = d * (float)(q - 8);
		} else {
			v = ((const float *)table)[(size_t)r * H + i];
		}
		x[(size_t)t * H + i] = v;
	}
}

/* out[t] = sum over the pairs of token t, in pair order (ascending expert id),
 * of w_p * y_p: product rounded, then added, from +0 — core/moe.c's bits. */
extern "C" __global__ void coli_moe_accumulate(float *out, const float *y, const int *pair_token,
                                               const float *pair_w, int n_pairs, int H)
{
	const int t = blockIdx.x;

	for (int j = threadIdx.x; j < H; j += blockDim.x) {
		float o = 0.0f;

		for (int p = 0; p < n_pairs; p++)
			if (pair_token[p] == t)
				o = __fadd_rn(o, __fmul_rn(pair_w[p], y[(size_t)p * H + j]));
		out[(size_t)t * H + j] = o;
	}
}

/* out[t] += sigmoid(gate[t]) * y[t]  (Qwen2-MoE shared expert) */
extern "C" __global__ void coli_gated_add(float *out, const float *y, const float *gate, int H)
{
	const int t = blockIdx.x;
	const float g = 1.0f / (1.0f + expf(-gate[t]));

	for (int j = threadIdx.x; j < H; j += blockDim.x)
		out[(size_t)t * H + j] += g * y[(size_t)t * H + j];
}
