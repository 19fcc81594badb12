/*
 * ptx/gpu_none.c — the entry points of ptx/gpu*.c and of the launchers
 * ptx/<part>/gpu_*.c in a build without nvcc (no COLI_HAVE_PTX): each
 * reports -ENODEV, or does nothing where there is nothing to undo, so the
 * engine runs on the CPU and the simulated device.
 * (coli_gpu_probe and coli_gpu_open, which say why there is no GPU, keep
 * their own no-CUDA halves in ptx/gpu.c.)
 */
#ifndef COLI_HAVE_PTX
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "ptx/ptx.h"
#include "ptx/ptx_internal.h" /* coli_gpu_job_table: tests/ptx/job_ring links it */

#define NO_GPU return -ENODEV
int coli_gpu_mem_info(coli_gpu_t *g, size_t *f, size_t *t)
{
	NO_GPU;
}
int coli_gpu_alloc(coli_gpu_t *g, size_t b, uint64_t *d)
{
	NO_GPU;
}
void coli_gpu_free(coli_gpu_t *g, uint64_t d)
{
}
int coli_gpu_memset(coli_gpu_t *g, uint64_t d, unsigned char v, size_t n)
{
	NO_GPU;
}
int coli_gpu_upload(coli_gpu_t *g, uint64_t d, const void *s, size_t n)
{
	NO_GPU;
}
int coli_gpu_download(coli_gpu_t *g, void *d, uint64_t s, size_t n)
{
	NO_GPU;
}
int coli_gpu_upload_async(coli_gpu_t *g, uint64_t d, const void *s, size_t n)
{
	NO_GPU;
}
uint64_t coli_gpu_mapped(const coli_gpu_t *g, const void *p, size_t n)
{
	(void)g, (void)p, (void)n;
	return 0;
}
int coli_gpu_download_async(coli_gpu_t *g, void *d, uint64_t s, size_t n)
{
	NO_GPU;
}
int coli_gpu_download_many(coli_gpu_t *g, int n, void *const *d, const uint64_t *s, const size_t *b)
{
	NO_GPU;
}
int coli_gpu_point(coli_gpu_t *g)
{
	NO_GPU;
}
int coli_gpu_point_wait(coli_gpu_t *g)
{
	NO_GPU;
}
int coli_gpu_host_wait(coli_gpu_t *g, uint32_t seq)
{
	(void)seq;
	NO_GPU;
}
void coli_gpu_host_signal(coli_gpu_t *g, uint32_t seq)
{
	(void)g, (void)seq;
}
int coli_gpu_has_host_wait(const coli_gpu_t *g)
{
	(void)g;
	return 0;
}
int coli_gpu_sync(coli_gpu_t *g)
{
	NO_GPU;
}
int coli_gpu_capture_begin(coli_gpu_t *g)
{
	NO_GPU;
}
int coli_gpu_capture_end(coli_gpu_t *g, uint64_t *graph)
{
	*graph = 0;
	NO_GPU;
}
int coli_gpu_graph_launch(coli_gpu_t *g, uint64_t graph)
{
	NO_GPU;
}
void coli_gpu_graph_free(coli_gpu_t *g, uint64_t graph)
{
}
int coli_gpu_stage_init(coli_gpu_t *g, int n)
{
	NO_GPU;
}
int coli_gpu_stage_copy(coli_gpu_t *g, int slot, uint64_t dst, const void *src, size_t n)
{
	NO_GPU;
}
int coli_gpu_stage_use(coli_gpu_t *g, int slot)
{
	NO_GPU;
}
int coli_gpu_stage_done(coli_gpu_t *g, int slot)
{
	NO_GPU;
}
int coli_gpu_stage_landed(coli_gpu_t *g, int slot)
{
	NO_GPU;
}
int coli_gpu_stage_fence(coli_gpu_t *g, int slot)
{
	NO_GPU;
}
int coli_gpu_host_register(coli_gpu_t *g, void *p, size_t n)
{
	NO_GPU;
}
void coli_gpu_host_unregister(coli_gpu_t *g, void *p)
{
}
int coli_gpu_gemv(coli_gpu_t *g, enum coli_dtype t, const struct coli_gpu_gemv_job *j, int n)
{
	NO_GPU;
}
int coli_gpu_gemm(coli_gpu_t *g, enum coli_dtype t, const struct coli_gpu_gemm_job *j, int n)
{
	NO_GPU;
}
void coli_gpu_gemm_tile(coli_gpu_t *g, int tokens)
{
	(void)g, (void)tokens;
}
int coli_gpu_gemv_table(coli_gpu_t *g, enum coli_dtype t, uint64_t table, int n, int rows)
{
	NO_GPU;
}
int coli_gpu_job_table(coli_gpu_t *g, const void *jobs, size_t bytes, uint64_t *dptr)
{
	NO_GPU;
}
int coli_gpu_gemv_kq_v0(coli_gpu_t *g, enum coli_dtype t, const struct coli_gpu_gemv_job *j, int n)
{
	NO_GPU;
}
int coli_gpu_silu_mul(coli_gpu_t *g, uint64_t a, uint64_t b, uint64_t h, int n)
{
	NO_GPU;
}
int coli_gpu_act_quantize(coli_gpu_t *g, uint64_t x, uint64_t q, uint64_t d, uint64_t s, int n)
{
	NO_GPU;
}
int coli_gpu_swiglu_oai(coli_gpu_t *g, const struct coli_gpu_swiglu_oai *a)
{
	NO_GPU;
}
int coli_gpu_pair_bias(coli_gpu_t *g, uint64_t y, uint64_t b, uint64_t idx, int rows, int n)
{
	NO_GPU;
}
int coli_gpu_silu_mul_q(coli_gpu_t *g, uint64_t a, uint64_t b, uint64_t h, uint64_t q, uint64_t d,
                        uint64_t s, int n)
{
	NO_GPU;
}
int coli_gpu_mark(coli_gpu_t *g, int slot)
{
	NO_GPU;
}
int coli_gpu_elapsed_ms(coli_gpu_t *g, int a, int b, float *ms)
{
	NO_GPU;
}
#endif
