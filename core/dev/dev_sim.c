/*
 * core/dev/dev_sim.c — a simulated expert device: host memory and the CPU
 * kernels behind the same ops as the GPU, so the scheduler's issue / take /
 * fallback paths (and COLI_GPU_FAIL_AFTER) run in CI without a GPU.
 *
 * "Device addresses" are host pointers. Async ops run immediately on the
 * calling thread (the stream is always drained); the kernels are the CPU's
 * (core/dev/dev_sim_ops.c), so the simulated device computes the same bits
 * the real one must (bf16 GEMM: the real one is within rounding of these).
 *
 * What running at once would hide: a GPU reads the source of an async
 * upload from registered (page-locked, mem/) host memory when the stream
 * gets there, so the host must not write it before a sync. The sim keeps a
 * hash of every such source and checks it at the next sync (or the wait
 * for a mark or the wait point recorded after it, or a download into it
 * queued behind); a staging copy's source (a pinned RAM-tier slab) until
 * the host asks whether the copy landed, or a sync drains the compute that
 * used it. A source written early aborts the process with what was written,
 * the bug a real device would turn into wrong numbers now and then. The
 * other way, a download lands in host memory when the stream gets there: the
 * sim keeps the bytes and writes them at the next sync (or the wait for a
 * later mark or wait point, or an upload that reads them), so a host that
 * reads them early reads what a GPU would have left there.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/dev/dev.h"
#include "core/dev/dev_sim.h"
#include "io/io.h"
#include "mem/mem.h"

#define SIM_MARKS   8
#define SIM_REGIONS 64
#define SIM_DEFER   64 /* ops behind a host wait */

/* an async upload's registered source, until the stream is known past it;
 * a staging copy's (slot >= 0) until the host learns it landed (its slot's
 * or a later fence's), or a sync drains the compute that waited for it */
struct pending {
	const void *src;
	size_t n;
	uint64_t hash, seq; /* seq: of uploads, or of staging copies */
	int slot, used;
};

/* what the host has just learned the device is past */
struct past {
	uint64_t uploads; /* uploads queued up to here (a sync, a mark) */
	const void *lo;   /* and those reading [lo, lo + n): a download there */
	size_t n;         /* follows them on the stream */
	int slot;         /* the staging copies of slot (-1: none) */
	uint64_t copies;  /* and every copy queued up to here (a fence) */
	int used;         /* and the copies compute waited for (a sync) */
};

/* a download the host may not see yet */
struct late {
	void *dst, *bytes;
	size_t n;
	uint64_t seq;
};

struct sim {
	size_t mem_bytes, used;
	int latency_us; /* each sync takes this long: device time the host can overlap */
	double marks[SIM_MARKS];
	uint64_t mark_seq[SIM_MARKS]; /* uploads and downloads queued before each mark */
	uint64_t seq, copy_seq;       /* uploads and downloads, staging copies so far */
	uint64_t point_seq;           /* uploads and downloads queued before the point */
	uint64_t *fence_at;           /* [slot]: copies queued before its fence */
	int n_fence;
	struct pending *pend;
	int n_pend, cap_pend;
	struct late *late;
	int n_late, cap_late;
	/* the stream waiting for the host (host_wait): the ops queued behind the
	 * wait, run when the host signals (only uploads, the MoE accumulate and
	 * the bias add before it, gpt-oss's down bias, may be: anything else
	 * queued, or waited for, then aborts) */
	uint32_t host_word, wait_seq;
	int waiting, n_def;
	struct deferred {
		int acc; /* 0: upload_async(dst, src, n); 1: moe_accumulate(a);
		          * 2: add_bias(b) */
		uint64_t dst;
		const void *src;
		size_t n;
		struct coli_dev_accumulate a;
		struct coli_dev_bias b;
	} def[SIM_DEFER];
};

/* An op the stream would run (or the host would wait for) behind a host
 * wait the host has not signalled: a real stream would run it after the
 * deferred ops (or hang), the sim cannot; the engine never does it. */
void coli_dev_sim_in_order(struct coli_dev *d, const char *op)
{
	const struct sim *s = d->impl;

	if (!s->waiting)
		return;
	fprintf(stderr, "coli: sim: %s queued behind a host wait not yet signalled\n", op);
	abort();
}

static int s_mem_info(struct coli_dev *d, size_t *f, size_t *t)
{
	struct sim *s = d->impl;

	*t = s->mem_bytes;
	*f = s->mem_bytes - s->used;
	return 0;
}

/* Each allocation carries its size in front, for the memory accounting. */
static int s_alloc(struct coli_dev *d, size_t bytes, uint64_t *addr)
{
	struct sim *s = d->impl;
	size_t *p;

	if (s->used + bytes > s->mem_bytes)
		return -ENOMEM;
	p = aligned_alloc(64, 64 + ((bytes + 63) & ~(size_t)63));
	if (!p)
		return -ENOMEM;
	p[0] = bytes;
	s->used += bytes;
	*addr = (uint64_t)(uintptr_t)((char *)p + 64);
	return 0;
}

static void s_free(struct coli_dev *d, uint64_t addr)
{
	struct sim *s = d->impl;
	size_t *p = (size_t *)((char *)(uintptr_t)addr - 64);

	s->used -= p[0];
	free(p);
}

static int s_copy(struct coli_dev *d, uint64_t dst, const void *src, size_t n)
{
	memcpy((void *)(uintptr_t)dst, src, n);
	return 0;
}

/* Is [p, p + n) inside memory mem/ registered (what a GPU reads late)? */
static int registered(const void *p, size_t n)
{
	struct coli_mem_region r[SIM_REGIONS];
	int k = coli_mem_regions(r, SIM_REGIONS);

	for (int i = 0; i < k && i < SIM_REGIONS; i++)
		if ((const char *)p >= (const char *)r[i].p &&
		    (const char *)p + n <= (const char *)r[i].p + r[i].bytes)
			return 1;
	return 0;
}

static int remember(struct coli_dev *d, const void *src, size_t n, int slot, uint64_t seq)
{
	struct sim *s = d->impl;

	if (!n || !registered(src, n))
		return 0;
	if (s->n_pend == s->cap_pend) {
		int cap = s->cap_pend ? 2 * s->cap_pend : 64;
		struct pending *p = realloc(s->pend, sizeof(*p) * (size_t)cap);

		if (!p)
			return -ENOMEM;
		s->pend = p, s->cap_pend = cap;
	}
	s->pend[s->n_pend++] = (struct pending){
	    .src = src, .n = n, .hash = coli_io_xxh64(src, n), .seq = seq, .slot = slot};
	return 0;
}

/* Downloads queued up to seq (or, with n, those writing into [lo, lo + n)
 * and the ones before them) reach the host, in queue order. */
static void land(struct coli_dev *d, uint64_t seq, const void *lo, size_t n)
{
	struct sim *s = d->impl;
	int k = 0;

	for (int i = 0; n && i < s->n_late; i++) {
		const char *a = s->late[i].dst, *b = lo;

		if (a < b + n && b < a + s->late[i].n && s->late[i].seq > seq)
			seq = s->late[i].seq;
	}
	for (int i = 0; i < s->n_late; i++) {
		struct late *l = &s->late[i];

		if (l->seq > seq) {
			s->late[k++] = *l;
			continue;
		}
		memcpy(l->dst, l->bytes, l->n);
		free(l->bytes);
	}
	s->n_late = k;
}

static int defer(struct coli_dev *d, const struct deferred *op)
{
	struct sim *s = d->impl;

	if (s->n_def == SIM_DEFER)
		return -ENOMEM;
	s->def[s->n_def++] = *op;
	return 0;
}

static int s_upload_async(struct coli_dev *d, uint64_t dst, const void *src, size_t n)
{
	struct sim *s = d->impl;

	if (s->waiting)
		return defer(d, &(struct deferred){.dst = dst, .src = src, .n = n});
	land(d, 0, src, n); /* a download queued before writes what this reads */
	memcpy((void *)(uintptr_t)dst, src, n);
	s->seq++;
	return remember(d, src, n, -1, s->seq);
}

static int is_past(const struct pending *p, const struct past *w)
{
	const char *a = p->src, *b = w->lo;

	if (p->slot < 0)
		return p->seq <= w->uploads || (w->n && a < b + w->n && b < a + p->n);
	return p->slot == w->slot || p->seq <= w->copies || (w->used && p->used);
}

/* The device is past w: the sources it read must be as they were queued. */
static void check_pending(struct coli_dev *d, const struct past *w)
{
	struct sim *s = d->impl;
	int k = 0;

	for (int i = 0; i < s->n_pend; i++) {
		const struct pending *p = &s->pend[i];

		if (!is_past(p, w)) {
			s->pend[k++] = *p;
			continue;
		}
		if (coli_io_xxh64(p->src, p->n) != p->hash) {
			fprintf(stderr,
			        "coli: %s: the host wrote %zu bytes at %p, the source of an async "
			        "%s, before the stream had read them (a GPU would have "
			        "copied the new bytes)\n",
			        d->name, p->n, p->src, p->slot < 0 ? "upload" : "staging copy");
			/* an assertion (CONVENTIONS 3: invariants), not an error to return:
			 * failing the device would send its work to the CPU and hide the
			 * bug behind correct tokens; tests/core/sim_async_check expects it */
			abort();
		}
	}
	s->n_pend = k;
}

static int s_download(struct coli_dev *d, void *dst, uint64_t src, size_t n)
{
	IN_ORDER(d);
	struct sim *s = d->impl;
	struct past w = {.lo = dst, .n = n, .slot = -1}; /* uploads that read dst */
	void *bytes = malloc(n ? n : 1);

	if (!bytes)
		return -ENOMEM;
	check_pending(d, &w);
	if (s->n_late == s->cap_late) {
		int cap = s->cap_late ? 2 * s->cap_late : 16;
		struct late *l = realloc(s->late, sizeof(*l) * (size_t)cap);

		if (!l) {
			free(bytes);
			return -ENOMEM;
		}
		s->late = l, s->cap_late = cap;
	}
	memcpy(bytes, (const void *)(uintptr_t)src, n); /* what the device holds now */
	s->late[s->n_late++] = (struct late){.dst = dst, .bytes = bytes, .n = n, .seq = ++s->seq};
	return 0;
}

static int s_sync(struct coli_dev *d)
{
	IN_ORDER(d);
	struct sim *s = d->impl;

	check_pending(d, &(struct past){.uploads = s->seq, .slot = -1, .used = 1});
	land(d, s->seq, NULL, 0);
	if (s->latency_us > 0)
		usleep((useconds_t)s->latency_us);
	return 0;
}

/* The bias add: deferred behind a host wait (a preplanned gpt-oss layer's
 * tail: its down bias joins the pairs' rows before the accumulate). */
static int s_add_bias(struct coli_dev *d, const struct coli_dev_bias *a)
{
	struct sim *s = d->impl;

	if (s->waiting)
		return defer(d, &(struct deferred){.acc = 2, .b = *a});
	return coli_dev_sim_add_bias(d, a);
}

/* Is pair p's row host memory read in place (moe_accumulate's hmask)? */
static int in_host(uint64_t hy, uint64_t hmask, int p)
{
	return hy && p < 64 && (hmask >> p & 1);
}

static int s_moe_acc(struct coli_dev *d, const struct coli_dev_accumulate *a)
{
	struct sim *s = d->impl;
	const uint64_t out = a->out, y = a->y, pw = a->pair_w, hy = a->hy, hmask = a->hmask;
	const int n_pairs = a->n_pairs, T = a->T, H = a->H;
	const int *tok = (const int *)(uintptr_t)a->pair_token;
	const size_t row = sizeof(float) * (size_t)H;
	int rc = 0;

	if (s->waiting)
		return defer(d, &(struct deferred){.acc = 1, .a = *a});

	memset(F(out), 0, sizeof(float) * (size_t)T * H);
	for (int p = 0; p < n_pairs; p++) {
		float w = F(pw)[p], *o = F(out) + (size_t)tok[p] * H;
		const float *yy = F(in_host(hy, hmask, p) ? hy : y) + (size_t)p * H;

		for (int j = 0; j < H; j++)
			o[j] = o[j] + w * yy[j];
	}
	/* the host rows read in place are read when the stream gets here on a
	 * GPU: checked as an upload's source is (written before the next sync:
	 * abort) */
	for (int p = 0; !rc && p < n_pairs; p++)
		if (in_host(hy, hmask, p)) {
			land(d, 0, (const char *)F(hy) + p * row, row);
			s->seq++;
			rc = remember(d, (const char *)F(hy) + p * row, row, -1, s->seq);
		}
	return rc;
}

/* registered host memory is where the sim's kernels read it */
static uint64_t s_host_addr(struct coli_dev *d, const void *p, size_t n)
{
	(void)d;
	return registered(p, n) ? (uint64_t)(uintptr_t)p : 0;
}

/* the pairs summed into a scratch row block first (moe_accumulate's order),
 * then the residual add and the norm */
static int s_acc_rmsnorm(struct coli_dev *d, const struct coli_dev_norm *a)
{
	IN_ORDER(d);
	const struct coli_gpu_pairs *p = a->pairs;
	float *sum = malloc(sizeof(float) * (size_t)a->rows * a->n);
	struct coli_dev_norm b = *a;
	int rc;

	if (!sum)
		return -ENOMEM;
	s_moe_acc(d, &(struct coli_dev_accumulate){.out = (uint64_t)(uintptr_t)sum,
	                                           .y = p->y,
	                                           .pair_token = p->token,
	                                           .pair_w = p->w,
	                                           .n_pairs = p->n,
	                                           .T = a->rows,
	                                           .H = a->n});
	b.add = (uint64_t)(uintptr_t)sum;
	rc = coli_dev_sim_add_rmsnorm(d, &b);
	free(sum);
	return rc;
}

static void s_close(struct coli_dev *d)
{
	struct sim *s = d->impl;

	free(s->pend);
	free(s->fence_at);
	for (int i = 0; i < s->n_late; i++)
		free(s->late[i].bytes);
	free(s->late);
	free(d->impl);
	free(d);
}

/* Staging: the copy happens at once; its source is remembered (above). */
static int s_stage_init(struct coli_dev *d, int n)
{
	struct sim *s = d->impl;

	free(s->fence_at);
	s->fence_at = calloc((size_t)n, sizeof(*s->fence_at));
	s->n_fence = s->fence_at ? n : 0;
	return s->fence_at || !n ? 0 : -ENOMEM;
}
static int s_stage_copy(struct coli_dev *d, int slot, uint64_t dst, const void *src, size_t n)
{
	struct sim *s = d->impl;

	s_copy(d, dst, src, n);
	if (slot < s->n_fence)
		s->fence_at[slot] = 0;
	return remember(d, src, n, slot, ++s->copy_seq);
}
static int s_stage_fence(struct coli_dev *d, int slot)
{
	struct sim *s = d->impl;

	if (slot < 0 || slot >= s->n_fence)
		return -EINVAL;
	s->fence_at[slot] = s->copy_seq;
	return 0;
}
static int s_stage_use(struct coli_dev *d, int slot)
{
	IN_ORDER(d);
	struct sim *s = d->impl;

	for (int i = 0; i < s->n_pend; i++)
		if (s->pend[i].slot == slot)
			s->pend[i].used = 1; /* a sync drains compute that waited for it */
	return 0;
}
static int s_stage_nop(struct coli_dev *d, int slot)
{
	(void)d, (void)slot;
	return 0;
}
static int s_stage_landed(struct coli_dev *d, int slot)
{
	struct sim *s = d->impl;

	check_pending(
	    d, &(struct past){.slot = slot, .copies = slot < s->n_fence ? s->fence_at[slot] : 0});
	return 1;
}

/* Marks: the host clock when recorded (the sim computes as it is called). */
static int s_mark(struct coli_dev *d, int slot)
{
	IN_ORDER(d);
	struct sim *s = d->impl;
	struct timespec ts;

	if (slot < 0 || slot >= SIM_MARKS)
		return -EINVAL;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	s->marks[slot] = ts.tv_sec + ts.tv_nsec * 1e-9;
	s->mark_seq[slot] = s->seq;
	return 0;
}
static int s_elapsed(struct coli_dev *d, int from, int to, double *t)
{
	IN_ORDER(d);
	struct sim *s = d->impl;

	if (from < 0 || from >= SIM_MARKS || to < 0 || to >= SIM_MARKS)
		return -EINVAL;
	/* a GPU waits for the mark */
	check_pending(d, &(struct past){.uploads = s->mark_seq[to], .slot = -1});
	land(d, s->mark_seq[to], NULL, 0);
	*t = s->marks[to] - s->marks[from];
	return 0;
}

/* The wait point: what was queued before it lands when the host waits. */
static int s_point(struct coli_dev *d)
{
	IN_ORDER(d);
	struct sim *s = d->impl;

	s->point_seq = s->seq;
	return 0;
}
static int s_point_wait(struct coli_dev *d)
{
	IN_ORDER(d);
	struct sim *s = d->impl;

	check_pending(d, &(struct past){.uploads = s->point_seq, .slot = -1});
	land(d, s->point_seq, NULL, 0);
	if (s->latency_us > 0)
		usleep((useconds_t)s->latency_us);
	return 0;
}

static int s_host_wait(struct coli_dev *d, uint32_t seq)
{
	struct sim *s = d->impl;

	IN_ORDER(d); /* one wait at a time */
	s->waiting = (int32_t)(s->host_word - seq) < 0;
	s->wait_seq = seq;
	return 0;
}

/* The host's signal: the ops queued behind the wait run now, in order. */
static void s_host_signal(struct coli_dev *d, uint32_t seq)
{
	struct sim *s = d->impl;

	if ((int32_t)(seq - s->host_word) > 0)
		s->host_word = seq;
	if (!s->waiting || (int32_t)(s->host_word - s->wait_seq) < 0)
		return;
	s->waiting = 0;
	for (int i = 0; i < s->n_def; i++) {
		const struct deferred *o = &s->def[i];

		if (o->acc == 1)
			s_moe_acc(d, &o->a);
		else if (o->acc == 2)
			coli_dev_sim_add_bias(d, &o->b);
		else
			s_upload_async(d, o->dst, o->src, o->n);
	}
	s->n_def = 0;
}

static const struct coli_dev_ops g_sim_ops = {
    .mem_info = s_mem_info,
    .alloc = s_alloc,
    .free = s_free,
    .upload = s_copy,
    .upload_async = s_upload_async,
    .download_async = s_download,
    .gemv = coli_dev_sim_gemv,
    .gemm = coli_dev_sim_gemm,
    .silu_mul = coli_dev_sim_silu_mul,
    .act_quantize = coli_dev_sim_act_quantize,
    .sync = s_sync,
    .close = s_close,
    .stage_init = s_stage_init,
    .stage_copy = s_stage_copy,
    .stage_use = s_stage_use,
    .stage_done = s_stage_nop,
    .stage_landed = s_stage_landed,
    .stage_fence = s_stage_fence,
    .mark = s_mark,
    .elapsed = s_elapsed,
    .point = s_point,
    .point_wait = s_point_wait,
    .host_wait = s_host_wait,
    .host_signal = s_host_signal,
    .host_addr = s_host_addr,
    .copy = coli_dev_sim_copy,
    .rmsnorm = coli_dev_sim_rmsnorm,
    .add_bias = s_add_bias,
    .add = coli_dev_sim_add,
    .rope = coli_dev_sim_rope,
    .attention = coli_dev_sim_attention,
    .mla_prep = coli_dev_sim_mla_prep,
    .mla_attention = coli_dev_sim_mla_attention,
    .embed = coli_dev_sim_embed,
    .gather_rows = coli_dev_sim_gather_rows,
    .moe_accumulate = s_moe_acc,
    .gated_add = coli_dev_sim_gated_add,
    .argmax = coli_dev_sim_argmax,
    .dense_gemv = coli_dev_sim_dense_gemv,
    .route = coli_dev_sim_route,
    .add_rmsnorm = coli_dev_sim_add_rmsnorm,
    .acc_rmsnorm = s_acc_rmsnorm,
    .qk_rope_store = coli_dev_sim_qk_rope_store,
    .moe_plan = coli_dev_sim_moe_plan,
    .router_plan = coli_dev_sim_router_plan,
    .gemv_table = coli_dev_sim_gemv_table,
};

int coli_dev_sim_open(struct coli_dev **out, int index, size_t mem_bytes, int latency_us)
{
	struct coli_dev *d = calloc(1, sizeof(*d));
	struct sim *s = calloc(1, sizeof(*s));

	if (!d || !s) {
		free(d);
		free(s);
		return -ENOMEM;
	}
	s->mem_bytes = mem_bytes;
	s->latency_us = latency_us;
	d->ops = &g_sim_ops;
	d->impl = s;
	d->fail_after = -1;
	d->numa_node = -1;
	d->index = index;
	/* no bandwidth of its own; gpt-oss's experts, as the GPU's */
	d->caps = COLI_DEV_CAP_HOST_WAIT | COLI_DEV_CAP_SWIGLU_OAI | COLI_DEV_CAP_KV_ANY;
	snprintf(d->name, sizeof(d->name), "sim:%d (host memory)", index);
	*out = d;
	return 0;
}
