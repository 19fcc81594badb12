/*
 * ptx/gpu_dense.c — launch wrappers for the dense-part kernels of
 * ptx/dense.cu: one function per kernel, grid shapes chosen here, everything
 * stream-ordered on the device's one stream.
 */
#include <errno.h>
#include <stdio.h>

#include "ptx/ptx.h"
#include "ptx/ptx_internal.h"

#ifdef COLI_HAVE_PTX
#define THREADS 256

int coli_gpu_dense_functions(struct coli_gpu *g)
{
	static const struct {
		const char *name;
		size_t off;
	} fns[] = {
#define F(field, name) {name, offsetof(struct coli_gpu, field)}
	    F(f_rmsnorm, "coli_rmsnorm"),
	    F(f_add_bias, "coli_add_bias"),
	    F(f_add, "coli_add"),
	    F(f_rope, "coli_rope"),
	    F(f_attn, "coli_attention"),
	    F(f_embed, "coli_embed"),
	    F(f_moe_acc, "coli_moe_accumulate"),
	    F(f_gated, "coli_gated_add"),
#undef F
	};

	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		CK(g->cu->ModuleGetFunction((CUfunction *)((char *)g + fns[i].off), g->mod_dense,
		                            fns[i].name),
		   fns[i].name);
	return 0;
}

static int launch(struct coli_gpu *g, CUfunction f, unsigned gx, unsigned gy, unsigned bx,
                  unsigned shmem, void **args, const char *what)
{
	CUR(g);
	CK(g->cu->LaunchKernel(f, gx, gy, 1, bx, 1, 1, shmem, g->stream, args, NULL), what);
	return 0;
}

int coli_gpu_copy(coli_gpu_t *g, uint64_t dst, uint64_t src, size_t n)
{
	CUR(g);
	CK(g->cu->MemcpyDtoDAsync(dst, src, n, g->stream), "cuMemcpyDtoDAsync");
	return 0;
}

int coli_gpu_rmsnorm(coli_gpu_t *g, uint64_t x, uint64_t w, uint64_t y, int rows, int n, float eps)
{
	CUdeviceptr a = x, b = w, c = y;
	void *args[] = {&a, &b, &c, &n, &eps};

	return launch(g, g->f_rmsnorm, (unsigned)rows, 1, THREADS, 0, args, "launch rmsnorm");
}

int coli_gpu_add_bias(coli_gpu_t *g, uint64_t y, uint64_t b, int rows, int n)
{
	CUdeviceptr a = y, c = b;
	void *args[] = {&a, &c, &rows, &n};

	return launch(g, g->f_add_bias, (unsigned)(((size_t)rows * n + THREADS - 1) / THREADS), 1,
	              THREADS, 0, args, "launch add_bias");
}

int coli_gpu_add(coli_gpu_t *g, uint64_t x, uint64_t y, int n)
{
	CUdeviceptr a = x, b = y;
	void *args[] = {&a, &b, &n};

	return launch(g, g->f_add, (unsigned)((n + THREADS - 1) / THREADS), 1, THREADS, 0, args,
	              "launch add");
}

int coli_gpu_rope(coli_gpu_t *g, uint64_t x, int T, int nh, int hd, int pos0, uint64_t inv_freq)
{
	CUdeviceptr a = x, f = inv_freq;
	void *args[] = {&a, &T, &nh, &hd, &pos0, &f};
	size_t n = (size_t)T * nh * (hd / 2);

	return launch(g, g->f_rope, (unsigned)((n + THREADS - 1) / THREADS), 1, THREADS, 0, args,
	              "launch rope");
}

int coli_gpu_attention(coli_gpu_t *g, uint64_t q, uint64_t K, uint64_t V, uint64_t out, int T,
                       int pos0, int nh, int nkv, int hd, float scale)
{
	CUdeviceptr a = q, b = K, c = V, d = out;
	void *args[] = {&a, &b, &c, &d, &pos0, &nh, &nkv, &hd, &scale};
	unsigned shmem = (unsigned)(sizeof(float) * (pos0 + T));

	if (shmem > 48 * 1024)
		return -E2BIG; /* > 12k positions: needs the tiled kernel (not yet) */
	return launch(g, g->f_attn, (unsigned)T, (unsigned)nh, 128, shmem, args,
	              "launch attention");
}

int coli_gpu_embed(coli_gpu_t *g, enum coli_dtype t, uint64_t table, uint64_t scales, uint64_t ids,
                   uint64_t x, int T, int H)
{
	CUdeviceptr a = table, b = scales, c = ids, d = x;
	int dt = (int)t;
	void *args[] = {&a, &b, &dt, &c, &d, &H};

	return launch(g, g->f_embed, (unsigned)T, 1, THREADS, 0, args, "launch embed");
}

int coli_gpu_moe_accumulate(coli_gpu_t *g, uint64_t out, uint64_t y, uint64_t pair_token,
                            uint64_t pair_w, int n_pairs, int T, int H)
{
	CUdeviceptr a = out, b = y, c = pair_token, d = pair_w;
	void *args[] = {&a, &b, &c, &d, &n_pairs, &H};

	return launch(g, g->f_moe_acc, (unsigned)T, 1, THREADS, 0, args, "launch moe_accumulate");
}

int coli_gpu_gated_add(coli_gpu_t *g, uint64_t out, uint64_t y, uint64_t gate, int T, int H)
{
	CUdeviceptr a = out, b = y, c = gate;
	void *args[] = {&a, &b, &c, &H};

	return launch(g, g->f_gated, (unsigned)T, 1, THREADS, 0, args, "launch gated_add");
}

#else
#define NO_GPU return -ENODEV
int coli_gpu_copy(coli_gpu_t *g, uint64_t d, uint64_t s, size_t n)
{
	NO_GPU;
}
int coli_gpu_rmsnorm(coli_gpu_t *g, uint64_t x, uint64_t w, uint64_t y, int r, int n, float e)
{
	NO_GPU;
}
int coli_gpu_add_bias(coli_gpu_t *g, uint64_t y, uint64_t b, int r, int n)
{
	NO_GPU;
}
int coli_gpu_add(coli_gpu_t *g, uint64_t x, uint64_t y, int n)
{
	NO_GPU;
}
int coli_gpu_rope(coli_gpu_t *g, uint64_t x, int T, int nh, int hd, int p, uint64_t f)
{
	NO_GPU;
}
int coli_gpu_attention(coli_gpu_t *g, uint64_t q, uint64_t K, uint64_t V, uint64_t o, int T, int p,
                       int nh, int nkv, int hd, float s)
{
	NO_GPU;
}
int coli_gpu_embed(coli_gpu_t *g, enum coli_dtype t, uint64_t a, uint64_t s, uint64_t i, uint64_t x,
                   int T, int H)
{
	NO_GPU;
}
int coli_gpu_moe_accumulate(coli_gpu_t *g, uint64_t o, uint64_t y, uint64_t t, uint64_t w, int n,
                            int T, int H)
{
	NO_GPU;
}
int coli_gpu_gated_add(coli_gpu_t *g, uint64_t o, uint64_t y, uint64_t gt, int T, int H)
{
	NO_GPU;
}
#endif
