/*
 * core/model/act.c — activation rows as the model's matrices read them: a
 * row's fp32 values and, for q8/q4 matrices, its int8 form per 32-block with
 * the blocks' scales and sums (coli_act_quantize, cpu/). The forward fills
 * them before each matrix (core/forward/forward.c), the MoE part for its
 * SwiGLU outputs (core/moe/); both call here, so neither calls the other.
 *
 *   struct coli_actbuf (core/core_internal.h): f [n], q int8 [n],
 *   d / qsum [n/32]; act views them for coli_gemm
 *
 * coli_actbufs_alloc makes the row sets of the forward's scratch and of the
 * MoE part's, both allocated at open.
 *
 * The routed experts' activation is chosen here too, by the model's kind
 * (cfg.ffn_act): silu(g) * u, or gpt-oss's clamped SwiGLU over biased gate
 * and up (coli_act_ffn).
 */
#include <errno.h>
#include <stdlib.h>

#include "core/core_internal.h"

int coli_actbufs_alloc(struct coli_actbuf **out, int count, int n, int quant)
{
	struct coli_actbuf *a = calloc((size_t)count, sizeof(*a));

	if (!a)
		return -ENOMEM;
	*out = a;
	for (int i = 0; i < count; i++) {
		a[i].n = n;
		if (!quant)
			continue;
		a[i].q = malloc((size_t)n);
		a[i].d = malloc(sizeof(float) * (n / COLI_QBLOCK));
		a[i].qsum = malloc(sizeof(int32_t) * (n / COLI_QBLOCK));
		if (!a[i].q || !a[i].d || !a[i].qsum)
			return -ENOMEM;
	}
	return 0;
}

void coli_actbufs_free(struct coli_actbuf *a, int count)
{
	if (!a)
		return;
	for (int i = 0; i < count; i++) {
		free(a[i].q);
		free(a[i].d);
		free(a[i].qsum);
	}
	free(a);
}

void coli_actbuf_set(struct coli_actbuf *a, const float *x)
{
	a->act.n = a->n;
	a->act.f = x;
	a->act.q = a->q;
	a->act.d = a->d;
	a->act.qsum = a->qsum;
	if (a->q)
		coli_act_quantize(&a->act, x, a->n);
}

struct rows_mt {
	void (*fn)(void *arg, int t0, int t1);
	void *arg;
	int T;
};

static void rows_mt_task(void *arg, int task, int n_tasks)
{
	const struct rows_mt *r = arg;
	const int t0 = (int)((long)r->T * task / n_tasks), t1 = (int)((long)r->T * (task + 1) / n_tasks);

	if (t0 < t1)
		r->fn(r->arg, t0, t1);
}

void coli_rows_mt(struct coli_engine *e, int T, void (*fn)(void *arg, int t0, int t1), void *arg)
{
	struct rows_mt r = {fn, arg, T};

	/* a decode step's few rows cost less than a pool round (~2 us) */
	if (T < 16 || coli_cpu_pool_threads(e->pool) <= 1) {
		if (T > 0)
			fn(arg, 0, T);
		return;
	}
	coli_cpu_pool_run(e->pool, rows_mt_task, &r, coli_cpu_pool_tasks(e->pool, T));
}

struct rows_norm {
	const float *x, *w;
	float *out;
	int n;
	float eps;
};

static void rows_norm(void *arg, int t0, int t1)
{
	const struct rows_norm *r = arg;

	for (size_t t = (size_t)t0; t < (size_t)t1; t++)
		coli_rmsnorm(r->x + t * r->n, r->w, r->out + t * r->n, r->n, r->eps);
}

void coli_rows_rmsnorm(struct coli_engine *e, const float *x, const float *w, float *out, int T,
                       int n, float eps)
{
	struct rows_norm r = {x, w, out, n, eps};

	coli_rows_mt(e, T, rows_norm, &r);
}

struct rows_add {
	float *x;
	const float *y;
	int n;
};

static void rows_add(void *arg, int t0, int t1)
{
	const struct rows_add *r = arg;

	for (size_t i = (size_t)t0 * r->n; i < (size_t)t1 * r->n; i++)
		r->x[i] += r->y[i];
}

void coli_rows_add(struct coli_engine *e, float *x, const float *y, int T, int n)
{
	struct rows_add r = {x, y, n};

	coli_rows_mt(e, T, rows_add, &r);
}

struct rows_set {
	struct coli_actbuf *ab;
	const float *x;
	int n;
};

static void rows_set(void *arg, int t0, int t1)
{
	const struct rows_set *r = arg;

	for (int t = t0; t < t1; t++) {
		r->ab[t].n = r->n;
		coli_actbuf_set(&r->ab[t], r->x + (size_t)t * r->n);
	}
}

void coli_actbufs_set(struct coli_engine *e, struct coli_actbuf *ab, const float *x, int T, int n)
{
	struct rows_set r = {ab, x, n};

	coli_rows_mt(e, T, rows_set, &r);
}

void coli_act_ffn(const struct coli_model_config *c, const struct coli_layer *L, int ex, float *g,
                  float *u, float *h)
{
	int I = c->moe_inter;

	if (c->ffn_act != COLI_ACT_SWIGLU_OAI) {
		coli_silu_mul(g, u, h, I);
		return;
	}
	/* gate_up = x W + b: the biases first, each sum rounded once */
	if (L->exp_gate_bias) {
		const float *bg = L->exp_gate_bias + (size_t)ex * I,
		            *bu = L->exp_up_bias + (size_t)ex * I;

		for (int i = 0; i < I; i++) {
			g[i] = g[i] + bg[i];
			u[i] = u[i] + bu[i];
		}
	}
	coli_swiglu_oai(g, u, h, I, c->act_alpha, c->act_limit);
}
