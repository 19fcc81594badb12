/*
 * cpu/dispatch.c — chooses the kernel ISA once by cpuid and routes coli_gemv /
 * coli_gemm / their pool-split forms to it.
 *
 * COLI never assumes AVX-512: the AVX-512 kernels need F, BW, VL, DQ and VNNI
 * (Ice Lake / Zen 4 and later) and are used only when cpuid reports all of
 * them; AVX2 needs AVX2, FMA and F16C; the scalar reference always works.
 * AMX (Sapphire Rapids and later) is AVX-512 plus amx_tile and amx_int8 by
 * cpuid and the tile state granted by Linux (arch_prctl
 * ARCH_REQ_XCOMP_PERM, once a process: a kernel that refuses it, or one
 * older than 5.16, leaves the ISA at AVX-512); it adds coli_gemm's int8
 * tile path (cpu/gemv/gemm_amx.c) from coli_amx_min_s(dtype) activations.
 * Since every ISA computes the canonical reduction, the choice changes speed,
 * never bits, and a type's kernels may come from another ISA than the one
 * chosen where they measured faster (int8_avx2 below). coli_cpu_isa_force
 * exists so tests and benchmarks can run each ISA the CPU has; it is not
 * meant to be called while kernels run.
 */
#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <math.h>

#include "cpu/cpu_internal.h"

static int g_isa = -1; /* enum coli_cpu_isa once chosen */

/* F16C is CPUID.1:ECX bit 29; read it directly because clang's
 * __builtin_cpu_supports does not know "f16c" (make fuzz builds with clang). */
static int has_f16c(void)
{
	unsigned a = 1, b, c = 0, d;

	__asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
	return (c >> 29) & 1;
}

/* AMX-TILE and AMX-INT8 are CPUID.(7,0):EDX bits 24 and 25; Linux then
 * hands the tile data state (XFEATURE_XTILEDATA = 18) to a process that
 * asks (ARCH_REQ_XCOMP_PERM = 0x1023); without that a tile instruction
 * faults. The permission covers every thread of the process. */
static int has_amx(void)
{
	unsigned a = 7, b, c = 0, d;

	__asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
	if (((d >> 24) & 3) != 3)
		return 0;
#ifdef SYS_arch_prctl
	return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#else
	return 0;
#endif
}

/* Where AVX2's Q8_0 / Q4_0 kernels beat AVX-512's for the few activations
 * below the panels, measured with `coli bench kernels --isa avx2` against
 * `--isa avx512`:
 *   - Zen 4 (AMD family 0x19; Zen 3 of that family has no AVX-512) runs a
 *     512-bit op as two 256-bit halves, and the AVX-512 kernels' cross-lane
 *     steps (vpermd, vshufi64x2, masked loads on zmm) cost it more: on a
 *     2-core EPYC (model 0x11), weight GB/s, q8_0 S = 1 36-38 vs 21-23, S = 8
 *     8.9 vs 5.8-6.2; q4_0 S = 1 33-35 vs 30-32, S = 8 6.8 vs 3.8-4.2
 *     (2026-12-05). Both types, every S below the panels: COLI_INT8_AVX2_ALL.
 *   - A GPU host's Xeon (16 cores, one thread each, 2026-12-06, `coli bench
 *     kernels --isa avx512,avx2 --reps 5`: the ISAs interleaved, ms a pass):
 *     q4_0 S = 1 3.14 vs 3.36, S = 2 3.63 vs 4.31, S = 4 5.20 vs 6.53, S = 8
 *     8.46 vs 10.94 (AVX-512's gemm_q4 tile path); q8_0 S = 1 2.55 vs 2.70,
 *     S = 2 2.64 vs 3.11, but S = 4 3.90 vs 3.59 and S = 8 5.81 vs 4.06:
 *     Q4_0 below its panel and Q8_0 below four activations, COLI_INT8_AVX2_XEON.
 * Other AMD families are unmeasured (Zen 5 executes 512 bits whole) and keep
 * the AVX-512 kernels. */
static int g_int8_avx2 = -1;

/* The Xeon's Q8_0 batches from this many activations on take AVX-512's kernels
 * (S = 4: 3.90 ms on AVX2, 3.59 on AVX-512, above) */
#define XEON_Q8_AVX512_FROM_S 4

static int int8_avx2_detect(void)
{
	unsigned a = 0, b, c = 0, d, fam;

	__asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
	if (b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e) /* "GenuineIntel" */
		return COLI_INT8_AVX2_XEON;
	if (b != 0x68747541 || d != 0x69746e65 || c != 0x444d4163) /* "AuthenticAMD" */
		return COLI_INT8_AVX2_OFF;
	a = 1, c = 0;
	__asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
	fam = (a >> 8) & 0xf;
	if (fam == 0xf)
		fam += (a >> 20) & 0xff;
	return fam == 0x19 ? COLI_INT8_AVX2_ALL : COLI_INT8_AVX2_OFF;
}

int coli_cpu_int8_avx2(void)
{
	int v = __atomic_load_n(&g_int8_avx2, __ATOMIC_RELAXED);

	if (v < 0) {
		v = int8_avx2_detect();
		__atomic_store_n(&g_int8_avx2, v, __ATOMIC_RELAXED);
	}
	return v;
}

void coli_cpu_int8_avx2_set(int mode)
{
	__atomic_store_n(&g_int8_avx2, mode < 0 ? -1 : mode, __ATOMIC_RELAXED);
}

/* w's kernels for S activations under the AVX-512 ISA are AVX2's
 * (coli_cpu_int8_avx2); not the batches that take a VNNI panel, AVX-512's
 * (cpu/gemv/gemm_panel.h: on the Zen 4 VM a Q4_0 prefill of 512 tokens
 * 899-901 tok/s on AVX2's, 1016-1037 on VNNI's; cpu/gemv/gemm_panel16_avx512.c
 * for Q4_0 and Q8_0) */
static int int8_on_avx2(const struct coli_mat *w, int S)
{
	switch (coli_cpu_int8_avx2()) {
	case COLI_INT8_AVX2_ALL:
		return (w->dtype == COLI_DTYPE_Q8_0 && S < COLI_PANEL_MIN_S_Q8_0) ||
		       (w->dtype == COLI_DTYPE_Q4_0 && S < COLI_PANEL_MIN_S_Q4_0);
	case COLI_INT8_AVX2_XEON:
		return (w->dtype == COLI_DTYPE_Q8_0 && S < XEON_Q8_AVX512_FROM_S) ||
		       (w->dtype == COLI_DTYPE_Q4_0 && S < COLI_PANEL_MIN_S_Q4_0);
	default:
		return 0;
	}
}

static enum coli_cpu_isa detect(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512vnni"))
		return has_amx() ? COLI_CPU_ISA_AMX : COLI_CPU_ISA_AVX512;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
		return COLI_CPU_ISA_AVX2;
	return COLI_CPU_ISA_SCALAR;
}

/* The best ISA of this CPU (cached; the race on first use is benign: every
 * thread computes the same value). */
static enum coli_cpu_isa best(void)
{
	static int best_isa = -1;
	int v = __atomic_load_n(&best_isa, __ATOMIC_RELAXED);

	if (v < 0) {
		v = detect();
		__atomic_store_n(&best_isa, v, __ATOMIC_RELAXED);
	}
	return (enum coli_cpu_isa)v;
}

enum coli_cpu_isa coli_cpu_isa(void)
{
	int v = __atomic_load_n(&g_isa, __ATOMIC_RELAXED);

	if (v < 0) {
		v = best();
		__atomic_store_n(&g_isa, v, __ATOMIC_RELAXED);
	}
	return (enum coli_cpu_isa)v;
}

enum coli_cpu_isa coli_cpu_isa_best(void)
{
	return best();
}

const char *coli_cpu_isa_name(enum coli_cpu_isa isa)
{
	switch (isa) {
	case COLI_CPU_ISA_SCALAR:
		return "scalar";
	case COLI_CPU_ISA_AVX2:
		return "avx2";
	case COLI_CPU_ISA_AVX512:
		return "avx512";
	case COLI_CPU_ISA_AMX:
		return "avx512+amx";
	}
	return "?";
}

int coli_cpu_isa_force(enum coli_cpu_isa isa)
{
	if ((int)isa < COLI_CPU_ISA_SCALAR || isa > best())
		return -ENOTSUP;
	__atomic_store_n(&g_isa, (int)isa, __ATOMIC_RELAXED);
	return 0;
}

void coli_gemv(const struct coli_mat *w, const struct coli_act *x, float *y, int row0, int row1)
{
	switch (coli_cpu_isa()) {
	case COLI_CPU_ISA_AMX:
	case COLI_CPU_ISA_AVX512:
		if (int8_on_avx2(w, 1))
			coli_gemv_avx2(w, x, y, row0, row1);
		else
			coli_gemv_avx512(w, x, y, row0, row1);
		return;
	case COLI_CPU_ISA_AVX2:
		coli_gemv_avx2(w, x, y, row0, row1);
		return;
	default:
		coli_gemv_ref(w, x, y, row0, row1);
	}
}

void coli_silu_mul(const float *g, const float *u, float *h, int n)
{
	if (coli_cpu_isa() >= COLI_CPU_ISA_AVX2)
		coli_silu_mul_avx2(g, u, h, n);
	else
		coli_silu_mul_ref(g, u, h, n);
}

void coli_attention_group(const float *q, int G, const float *K, const float *V, int n_pos,
                          int stride, int hd, int vd, float scale, float *scores, float *out)
{
	coli_attention_group_sink(q, G, K, V, n_pos, stride, hd, vd, scale, NULL, scores, out);
}

void coli_attention_group_sink(const float *q, int G, const float *K, const float *V, int n_pos,
                               int stride, int hd, int vd, float scale, const float *sink,
                               float *scores, float *out)
{
	const struct coli_kv_rows kr = {.p = K, .stride = sizeof(float) * (size_t)stride},
	                          vr = {.p = V, .stride = sizeof(float) * (size_t)stride};

	coli_attention_group_kv(q, G, &kr, &vr, n_pos, hd, vd, scale, sink, scores, out);
}

void coli_exp_scaled(const float *x, int n, float m, float s, float *w)
{
	if (coli_cpu_isa() >= COLI_CPU_ISA_AVX2)
		coli_exp_scaled_avx2(x, n, m, s, w);
	else
		coli_exp_scaled_ref(x, n, m, s, w);
}

void coli_gemm(const struct coli_mat *w, const struct coli_act *x, int S, float *y, int ldy,
               int row0, int row1)
{
	switch (coli_cpu_isa()) {
	case COLI_CPU_ISA_AMX:
		/* the tiles refuse what they do not cover: AVX-512's kernels, same bits */
		if (S >= coli_amx_min_s(w->dtype) && !coli_gemm_amx(w, x, S, y, ldy, row0, row1))
			return;
		/* fall through */
	case COLI_CPU_ISA_AVX512:
		if (int8_on_avx2(w, S))
			coli_gemm_avx2(w, x, S, y, ldy, row0, row1);
		else
			coli_gemm_avx512(w, x, S, y, ldy, row0, row1);
		return;
	case COLI_CPU_ISA_AVX2:
		coli_gemm_avx2(w, x, S, y, ldy, row0, row1);
		return;
	default:
		for (int s = 0; s < S; s++)
			coli_gemv_ref(w, &x[s], y + (size_t)s * ldy, row0, row1);
	}
}

/* ---- split across the pool by row ranges ---- */

struct split {
	const struct coli_mat *w;
	const struct coli_act *x;
	int S;    /* 0: gemv */
	float *y; /* gemv: [rows]; gemm: [S][ldy] */
	int ldy;
};

/* Rows of task t of n: equal shares, boundaries on multiples of 16 rows so
 * two threads never write the same cache line of y. */
static void task_rows(int rows, int t, int n, int *r0, int *r1)
{
	int units = (rows + 15) / 16;
	int a = (int)((long)units * t / n) * 16, b = (int)((long)units * (t + 1) / n) * 16;

	*r0 = a < rows ? a : rows;
	*r1 = b < rows ? b : rows;
}

static void split_task(void *arg, int t, int n)
{
	const struct split *sp = arg;
	int r0, r1;

	task_rows(sp->w->rows, t, n, &r0, &r1);
	if (r0 >= r1)
		return;
	if (sp->S)
		coli_gemm(sp->w, sp->x, sp->S, sp->y + r0, sp->ldy, r0, r1);
	else
		coli_gemv(sp->w, sp->x, sp->y + r0, r0, r1);
}

void coli_gemv_mt(coli_cpu_pool_t *p, const struct coli_mat *w, const struct coli_act *x, float *y)
{
	struct split sp = {w, x, 0, y, 0};

	if (coli_cpu_pool_threads(p) <= 1 || w->rows < 32) {
		coli_gemv(w, x, y, 0, w->rows);
		return;
	}
	coli_cpu_pool_run(p, split_task, &sp, coli_cpu_pool_tasks(p, (w->rows + 15) / 16));
}

/* ---- the AMX tiles' split: tiles of (16 rows x a token chunk) ----
 *
 * coli_gemm_amx transposes its activations into the tiles' layout once a
 * call, a cost of the tokens alone that the rows it computes pay back: a
 * task that owned a few rows and every token of a prompt paid it for all of
 * them (16 threads, a 512-row k projection: 16 rows a task, the transpose
 * about half its work). So the units here are (token chunk, 16-row panel),
 * chunk-major: a task's contiguous units are mostly one chunk's panels, and
 * it transposes that chunk once. A chunk is 64 tokens (four tiles, over
 * which a Q4_0 panel's unpacking is shared), halved down to 16 while there
 * are fewer than four units a thread. Each unit's outputs are coli_gemm's,
 * so the split never changes a bit. */
struct tsplit {
	const struct coli_mat *w;
	const struct coli_act *x;
	int S, chunk, panels; /* tokens a chunk, 16-row panels */
	float *y;             /* [S][ldy] */
	int ldy;
};

static int amx_fits(const struct coli_mat *w, int S)
{
	return coli_cpu_isa() == COLI_CPU_ISA_AMX && S >= coli_amx_min_s(w->dtype) &&
	       coli_amx_has_dtype(w->dtype) && w->cols <= COLI_AMX_MAX_K && w->rows >= 16;
}

static void tsplit_task(void *arg, int t, int n)
{
	const struct tsplit *ts = arg;
	int chunks = (ts->S + ts->chunk - 1) / ts->chunk, units = chunks * ts->panels;
	int u0 = (int)((long)units * t / n), u1 = (int)((long)units * (t + 1) / n);

	while (u0 < u1) {
		int c = u0 / ts->panels, pe = (c + 1) * ts->panels < u1 ? (c + 1) * ts->panels : u1;
		int r0 = (u0 - c * ts->panels) * 16, r1 = (pe - c * ts->panels) * 16;
		int s0 = c * ts->chunk, sn = ts->S - s0 < ts->chunk ? ts->S - s0 : ts->chunk;

		if (r1 > ts->w->rows)
			r1 = ts->w->rows;
		coli_gemm(ts->w, ts->x + s0, sn, ts->y + (size_t)s0 * ts->ldy + r0, ts->ldy, r0,
		          r1);
		u0 = pe;
	}
}

void coli_gemm_mt(coli_cpu_pool_t *p, const struct coli_mat *w, const struct coli_act *x, int S,
                  float *y, int ldy)
{
	struct split sp = {w, x, S, y, ldy};

	if (S <= 0)
		return;
	if (coli_cpu_pool_threads(p) > 1 && amx_fits(w, S)) {
		struct tsplit ts = {w, x, S, 64, (w->rows + 15) / 16, y, ldy};
		int want = 4 * coli_cpu_pool_threads(p);

		while (ts.chunk > 16 && ts.panels * ((S + ts.chunk - 1) / ts.chunk) < want)
			ts.chunk /= 2;
		coli_cpu_pool_run(
		    p, tsplit_task, &ts,
		    coli_cpu_pool_tasks(p, ts.panels * ((S + ts.chunk - 1) / ts.chunk)));
		return;
	}
	if (coli_cpu_pool_threads(p) <= 1 || w->rows < 32) {
		coli_gemm(w, x, S, y, ldy, 0, w->rows);
		return;
	}
	coli_cpu_pool_run(p, split_task, &sp, coli_cpu_pool_tasks(p, (w->rows + 15) / 16));
}

/* units: 16-row groups over every job */
int coli_gemm_batch_init(struct coli_gemm_batch *b, const struct coli_gemm_job *jobs, int n)
{
	*b = (struct coli_gemm_batch){jobs, n, 0};
	for (int j = 0; j < n; j++)
		b->units += (jobs[j].w->rows + 15) / 16;
	return b->units;
}

void coli_gemm_batch_task(void *arg, int t, int n_tasks)
{
	const struct coli_gemm_batch *b = arg;
	int u0 = (int)((long)b->units * t / n_tasks),
	    u1 = (int)((long)b->units * (t + 1) / n_tasks);
	int base = 0; /* first unit of job j */

	for (int j = 0; j < b->n && base < u1; j++) {
		const struct coli_gemm_job *jb = &b->jobs[j];
		int uj = (jb->w->rows + 15) / 16, a = u0 > base ? u0 - base : 0;
		int z = u1 - base < uj ? u1 - base : uj;

		if (a < z && jb->S > 0) {
			int r0 = a * 16, r1 = z * 16 < jb->w->rows ? z * 16 : jb->w->rows;

			coli_gemm(jb->w, jb->x, jb->S, jb->y + r0, jb->ldy, r0, r1);
		}
		base += uj;
	}
}

void coli_gemm_batch_mt(coli_cpu_pool_t *p, const struct coli_gemm_job *jobs, int n)
{
	struct coli_gemm_batch b;
	int threads = p ? coli_cpu_pool_threads(p) : 1;

	if (!coli_gemm_batch_init(&b, jobs, n))
		return;
	if (threads <= 1)
		coli_gemm_batch_task(&b, 0, 1);
	else
		coli_cpu_pool_run(p, coli_gemm_batch_task, &b, coli_cpu_pool_tasks(p, b.units));
}
