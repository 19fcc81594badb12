/*
 * core/model/rope.c — RoPE's frequencies and factors from the model config,
 * as transformers computes them (modeling_rope_utils.py, the "default",
 * "linear" and "yarn" rope types; DeepSeek-V3's softmax scale in
 * modeling_deepseek_v3.py), and the context the model was trained for:
 *
 *   plain   inv_freq[i] = 1 / theta^(2i/d)                     (fp32, d = rope_dim)
 *   linear  inv_freq[i] = (1 / theta^(2i/d)) / factor          (fp32, the plain
 *           value divided, as inv_freq /= factor there); attention factor 1
 *   YaRN    pos[i] = theta^(2i/d); low/high = the dims where beta_fast and
 *           beta_slow rotations fit in rope_orig_ctx (floored / ceiled
 *           unless yarn_truncate is 0, as gpt-oss's "truncate": false; clamped
 *           to [0, d-1]); ramp[i] = clamp((i - low) / (high - low), 0, 1);
 *           inv_freq[i] = 1/(factor pos[i]) ramp[i] + 1/pos[i] (1 - ramp[i])
 *           attention factor (cos and sin are multiplied by it):
 *           yarn_attn if given, else mscale(f, yarn_mscale) / mscale(f,
 *           yarn_mscale_all) when both are set, else mscale(f, 1), with
 *           mscale(f, m) = 0.1 m ln f + 1 (1 when f <= 1)
 *           softmax scale: head_dim^-0.5 * mscale(f, yarn_mscale_all)^2
 *           when yarn_mscale_all is set
 *
 * The fp32 steps are fp32 here as there (torch.float32 tensors), the
 * Python-float ones double.
 */
#include <math.h>

#include "core/coli.h"

static double mscale(double f, double m)
{
	return f <= 1 ? 1.0 : 0.1 * m * log(f) + 1.0;
}

/* The dimension (of d) whose wavelength turns n_rot times in ctx positions. */
static double corr_dim(double n_rot, int d, double base, int ctx)
{
	return (d * log(ctx / (n_rot * 2 * M_PI))) / (2 * log(base));
}

void coli_config_rope(const struct coli_model_config *c, float *inv_freq, float *attn, float *scale)
{
	int d = c->rope_dim, half = d / 2;
	double f = c->rope_factor, low, high;

	*scale = (float)(1.0 / sqrt((double)c->head_dim));
	*attn = 1.0f;
	if (!(f > 1) || c->rope_scaling == COLI_ROPE_LINEAR) {
		/* as before YaRN (and bit for bit): 1 / theta^(2i/d) in fp32;
		 * linear: that over the factor, in fp32 too */
		for (int i = 0; i < half; i++) {
			inv_freq[i] = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)d);
			if (f > 1)
				inv_freq[i] /= (float)f;
		}
		/* the plain scale, as core/forward's 1.0f / sqrtf(hd) */
		if (f > 1)
			*scale = 1.0f / sqrtf((float)c->head_dim);
		return;
	}
	low = corr_dim(c->yarn_beta_fast, d, c->rope_theta, c->rope_orig_ctx);
	high = corr_dim(c->yarn_beta_slow, d, c->rope_theta, c->rope_orig_ctx);
	if (c->yarn_truncate) {
		low = floor(low);
		high = ceil(high);
	}
	low = low > 0 ? low : 0;
	high = high < d - 1 ? high : d - 1;
	if (low == high)
		high += 0.001;
	for (int i = 0; i < half; i++) {
		float pos = powf(c->rope_theta, (float)(2 * i) / (float)d);
		/* (i - low) / (high - low): the tensor minus a Python float, over
		 * the Python difference (the same bits for whole low and high) */
		float ramp = ((float)i - (float)low) / (float)(high - low);
		float extra;

		ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
		extra = 1.0f - ramp;
		inv_freq[i] = 1.0f / ((float)f * pos) * (1.0f - extra) + 1.0f / pos * extra;
	}
	if (c->yarn_attn > 0)
		*attn = c->yarn_attn;
	else if (c->yarn_mscale > 0 && c->yarn_mscale_all > 0)
		*attn = (float)(mscale(f, c->yarn_mscale) / mscale(f, c->yarn_mscale_all));
	else
		*attn = (float)mscale(f, 1.0);
	if (c->yarn_mscale_all > 0) {
		double m = mscale(f, c->yarn_mscale_all);

		*scale = (float)(pow((double)c->head_dim, -0.5) * m * m);
	}
}

int coli_config_ctx_trained(const struct coli_model_config *c)
{
	double n = c->max_ctx;

	if (c->rope_factor > 1)
		n = (c->rope_scaling == COLI_ROPE_LINEAR ? c->max_ctx : c->rope_orig_ctx) *
		    (double)c->rope_factor;
	return n < 1 << 24 ? (int)n : 1 << 24;
}
