/*
 * ptx/dense/gpu_kinds.c — launch wrappers for ptx/dense/kinds.cu: the sigmoid router
 * (one warp per token) and partial RoPE (one thread per rotated pair), on the
 * device's compute stream. Their limits are checked here (-ENOTSUP), so a
 * caller may fall back to the host.
 */
#include <errno.h>
#include <stddef.h>

#include "ptx/ptx.h"
#include "ptx/ptx_internal.h"

#ifdef COLI_HAVE_PTX
#define THREADS 256

int coli_gpu_kinds_functions(struct coli_gpu *g)
{
	CK(g->cu->ModuleGetFunction(&g->f_route_sig, g->mod_kinds, "coli_route_sigmoid"),
	   "cuModuleGetFunction(coli_route_sigmoid)");
	CK(g->cu->ModuleGetFunction(&g->f_rope_part, g->mod_kinds, "coli_rope_part"),
	   "cuModuleGetFunction(coli_rope_part)");
	return 0;
}

int coli_gpu_route_sigmoid(coli_gpu_t *g, uint64_t rlog, uint64_t bias, int T, int E, int K,
                           int n_group, int topk_group, int norm, float scale, uint64_t sel,
                           uint64_t selw)
{
	CUdeviceptr r = rlog, b = bias, s = sel, w = selw;
	void *args[] = {&r, &b, &E, &K, &n_group, &topk_group, &norm, &scale, &s, &w};
	int gs = n_group > 0 ? E / n_group : 0;

	if (T < 1 || E < 1 || E > COLI_GPU_ROUTE_MAX_E || K < 1 || K > 16 || K > E || n_group < 1 ||
	    topk_group < 1 || topk_group > n_group ||
	    (n_group > 1 && (E % n_group || gs < 2 || topk_group * gs < K)))
		return -ENOTSUP;
	return coli_gpu_launch(g, g->f_route_sig, (unsigned)T, 1, 1, 32, 0, args,
	                       "launch route_sigmoid");
}

int coli_gpu_rope_part(coli_gpu_t *g, uint64_t x, int T, int nh, int hd, int rd, int pos0,
                       uint64_t inv_freq)
{
	CUdeviceptr a = x, f = inv_freq;
	void *args[] = {&a, &T, &nh, &hd, &rd, &pos0, &f};
	size_t n = (size_t)T * nh * (rd / 2);

	if (rd < 2 || rd > hd || rd % 2)
		return -EINVAL;
	if (!n)
		return 0;
	return coli_gpu_launch(g, g->f_rope_part, (unsigned)((n + THREADS - 1) / THREADS), 1, 1,
	                       THREADS, 0, args, "launch rope_part");
}
#else
#define NO_GPU return -ENODEV
int coli_gpu_route_sigmoid(coli_gpu_t *g, uint64_t r, uint64_t b, int T, int E, int K, int ng,
                           int tg, int n, float sc, uint64_t s, uint64_t w)
{
	NO_GPU;
}
int coli_gpu_rope_part(coli_gpu_t *g, uint64_t x, int T, int nh, int hd, int rd, int p, uint64_t f)
{
	NO_GPU;
}
#endif
