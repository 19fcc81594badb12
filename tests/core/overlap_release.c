/*
 * tests/core/overlap_release.c — the overlap scheduler, the streaming modes,
 * device faults and CUDA_RELEASE_HOST never change tokens.
 *
 * The trained demo model (skewed routing, so the VRAM tier adapts) at q4 and
 * q8: its prompt, one batched prefill, then 256 greedy tokens with every
 * expert on the CPU are the reference (all logits kept). Then, on one
 * simulated device and on two (sim:2) always, and on GPU 0 and GPUs 0 and 1
 * where this machine has them (make test-gpu), with the dense part on the CPU
 * so every device launch is an expert launch (with two devices, each gets
 * half of a case's VRAM fraction and the first is the one that fails):
 *
 *   overlap on and off (COLI_GROUP_ASYNC 1 / 0), streaming off, auto and only,
 *   at VRAM budgets of none, a fifth (experts swapped in between tokens),
 *   half and all; CUDA_RELEASE_HOST=1 without a fault (host copies dropped,
 *   no reload, also across VRAM swaps); and a device failure at issue and at
 *   take, with and without CUDA_RELEASE_HOST, overlapped and synchronous,
 *   and at a staging copy.
 *
 * Every run must give the reference's logits byte for byte and its ids. The
 * engine's counters prove what happened: a fault run fails exactly once and
 * where it was meant to (dev_fail_issue or dev_fail_take), and reloads are
 * > 0 (reload_bytes = reloads x slab) after a failure under
 * CUDA_RELEASE_HOST, 0 otherwise.
 *
 * Where a failure strikes: COLI_GPU_FAIL_AFTER = FAIL_AFTER device ops
 * (about token 64: a layer with device work makes a few launches and one
 * sync), then COLI_GPU_FAIL_AT = launch (an issue), sync (a take) or copy (a
 * staging copy: at issue, or a layer ahead) picks the first op of that kind.
 * (Counting alone could not aim: where a real device streams, the number of
 * ops per layer depends on timing.)
 */
#include <math.h>

#include "fixture_util.h"
#include "io/io.h"
#include "ptx/ptx.h"

#define STEPS      256
#define FIXTURE    "demo"
#define FAIL_AFTER (64 * 4 * 5)

enum fail_at { NONE, AT_ISSUE, AT_TAKE, AT_COPY };

struct cfg {
	const char *what;
	double vram_frac; /* of all expert slabs; -1: no budget (everything) */
	const char *stream;
	int async, release;
	enum fail_at fail;
};

struct model {
	char path[8192];
	const char *quant;
	const int *ids;
	int n, V;
	double slab_bytes, expert_bytes;
	float *ref; /* [n + STEPS][V] */
	int ref_ids[STEPS];
};

struct run {
	float *logits;
	int ids[STEPS];
	struct coli_engine_stats st;
};

static void opts_for(struct coli_opts *o, const char *gpu, const struct cfg *c, double vram_gb,
                     int fail_after)
{
	coli_opts_init(o, NULL, 0);
	o->threads = 2;
	coli_opts_set(o, "--usage", "off", NULL, 0);
	snprintf(o->gpu, sizeof(o->gpu), "%s", gpu);
	coli_opts_set(o, "--dense", "cpu", NULL, 0);
	coli_opts_set(o, "--stream", c ? c->stream : "off", NULL, 0);
	o->vram_gb = vram_gb;
	o->group_async = c ? c->async : 1;
	o->release_host = c ? c->release : 0;
	o->gpu_fail_after = fail_after;
	if (c) /* the failure strikes the kind of op the case is about */
		o->gpu_fail_at = c->fail == AT_TAKE    ? COLI_OPT_FAIL_AT_SYNC
		                 : c->fail == AT_ISSUE ? COLI_OPT_FAIL_AT_LAUNCH
		                 : c->fail == AT_COPY  ? COLI_OPT_FAIL_AT_COPY
		                                       : COLI_OPT_FAIL_AT_ANY;
}

/* Prefill then `steps` greedy tokens; logits of every position into r->logits
 * (NULL: not kept). */
static int run(const struct model *m, const struct coli_opts *o, int steps, struct run *r)
{
	coli_engine_t *e;
	char err[512];
	float *last = malloc(sizeof(float) * m->V);
	int rc, id;

	if (!last)
		return -1;
	rc = coli_engine_open(m->path, o, &e, err, sizeof(err));
	if (rc) {
		printf("open %s (gpu %s): %s\n", m->path, o->gpu, err);
		free(last);
		return rc;
	}
	if (r->logits)
		for (size_t i = 0; i < (size_t)(m->n + STEPS) * m->V; i++)
			r->logits[i] = NAN; /* poison */
	rc = coli_engine_forward(e, m->ids, m->n, r->logits ? r->logits : last, r->logits != NULL);
	if (r->logits)
		memcpy(last, r->logits + (size_t)(m->n - 1) * m->V, sizeof(float) * m->V);
	for (int s = 0; !rc && s < steps; s++) {
		float *l = r->logits ? r->logits + (size_t)(m->n + s) * m->V : last;

		id = fx_argmax(last, m->V);
		r->ids[s] = id;
		rc = coli_engine_forward(e, &id, 1, l, 0);
		if (l != last)
			memcpy(last, l, sizeof(float) * m->V);
	}
	if (rc)
		printf("forward (gpu %s): %s\n", o->gpu, coli_engine_errmsg(e));
	coli_engine_stats(e, &r->st);
	coli_engine_close(e);
	free(last);
	return rc;
}

static int check(const struct model *m, const char *gpu, const struct cfg *c, struct run *got)
{
	/* a budget is a device's: with several, the fraction is split over them */
	int n_dev = !strcmp(gpu, "sim:2") || !strcmp(gpu, "0,1") ? 2 : 1;
	double vram_gb = c->vram_frac < 0 ? -1 : c->vram_frac * m->expert_bytes / 1e9 / n_dev;
	int fa = c->fail == NONE ? -1 : FAIL_AFTER / n_dev, fails = 0; /* a device's ops */
	struct coli_opts o;
	const struct coli_engine_stats *s = &got->st;

	opts_for(&o, gpu, c, vram_gb, fa);
	o.gpu_fail_dev =
	    0; /* of two, the first (the hottest experts) fails; the second carries on */
	if (run(m, &o, STEPS, got))
		return 1;
	if (memcmp(got->logits, m->ref, sizeof(float) * (size_t)(m->n + STEPS) * m->V) ||
	    memcmp(got->ids, m->ref_ids, sizeof(got->ids))) {
		printf("FAIL %s gpu %s %s: logits or ids differ from the CPU's\n", m->path, gpu,
		       c->what);
		fails++;
	}
#define EXPECT(cond)                                                                               \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("FAIL %s gpu %s %s: expected %s\n", m->path, gpu, c->what, #cond);  \
			fails++;                                                                   \
		}                                                                                  \
	} while (0)
	if (c->fail == AT_COPY) /* at issue, or a layer ahead (then the take fails) */
		EXPECT(s->dev_fail_issue + s->dev_fail_take == 1);
	else {
		EXPECT(s->dev_fail_issue == (c->fail == AT_ISSUE));
		EXPECT(s->dev_fail_take == (c->fail == AT_TAKE));
	}
	EXPECT(s->reload_bytes == s->reloads * (uint64_t)m->slab_bytes);
	if (c->release && c->vram_frac != 0)
		EXPECT(s->host_drops > 0);
	else
		EXPECT(s->host_drops == 0);
	if (c->release && c->fail != NONE)
		EXPECT(s->reloads > 0);
	else
		EXPECT(s->reloads == 0);
	if (strcmp(c->stream, "off") && c->vram_frac >= 0 && c->vram_frac < 1)
		EXPECT(s->stream_experts > 0);
	/* staging slots keep their experts: later tokens find some there */
	if (strcmp(c->stream, "off") && c->vram_frac >= 0 && c->vram_frac < 1 && c->fail == NONE)
		EXPECT(s->stream_staged_hits > 0 && s->stream_staged_hits <= s->stream_experts);
	if (!strcmp(c->stream, "off"))
		EXPECT(s->stream_experts == 0);
#undef EXPECT
	printf("%-8s %-4s %-34s fail_after %5d | issue %llu take %llu | VRAM %5llu streamed %5llu "
	       "swaps %3llu | dropped %4llu reloads %3llu (%.2f MB)\n",
	       m->quant, gpu, c->what, fa, (unsigned long long)s->dev_fail_issue,
	       (unsigned long long)s->dev_fail_take, (unsigned long long)s->hits[COLI_TIER_VRAM],
	       (unsigned long long)s->stream_experts, (unsigned long long)s->vram_swaps,
	       (unsigned long long)s->host_drops, (unsigned long long)s->reloads,
	       s->reload_bytes / 1e6);
	return fails;
}

int main(void)
{
	static const struct cfg cases[] = {
	    {"overlap, stream off, vram 1/2", 0.5, "off", 1, 0, NONE},
	    {"sync, stream off, vram 1/2", 0.5, "off", 0, 0, NONE},
	    {"overlap, stream auto, vram 1/2", 0.5, "auto", 1, 0, NONE},
	    {"sync, stream auto, vram 1/2", 0.5, "auto", 0, 0, NONE},
	    {"overlap, stream only, vram 1/2", 0.5, "only", 1, 0, NONE},
	    {"overlap, stream only, vram 0", 0, "only", 1, 0, NONE},
	    {"overlap, stream auto, vram 0", 0, "auto", 1, 0, NONE},
	    {"release, stream off, vram all", -1, "off", 1, 1, NONE},
	    {"release, stream auto, vram 1/5", 0.2, "auto", 1, 1, NONE},
	    {"release, fail at issue, auto 1/2", 0.5, "auto", 1, 1, AT_ISSUE},
	    {"release, fail at take, auto 1/2", 0.5, "auto", 1, 1, AT_TAKE},
	    {"release, fail at take, sync, all", -1, "off", 0, 1, AT_TAKE},
	    {"release, fail at issue, sync, all", -1, "off", 0, 1, AT_ISSUE},
	    {"no release, fail at take, auto 1/2", 0.5, "auto", 1, 0, AT_TAKE},
	    {"no release, fail at issue, only 0", 0, "only", 1, 0, AT_ISSUE},
	    {"release, fail at a copy, only 1/2", 0.5, "only", 1, 1, AT_COPY},
	};
	enum coli_dtype quants[] = {COLI_DTYPE_Q4_0, COLI_DTYPE_Q8_0};
	const char *why, *devs[4] = {"sim", "sim:2", "0", "0,1"};
	int n_gpus = coli_ptx_probe(&why), fails = 0, runs = 0, n;
	int n_devs = n_gpus >= 2 ? 4 : n_gpus > 0 ? 3 : 2;
	int *ids = fx_read_ints(FIXTURE, "ids.txt", &n);

	setvbuf(stdout, NULL, _IOLBF, 0); /* lines whole among the engine's stderr */
	if (!ids) {
		printf("no %s fixture under %s\n", FIXTURE, fx_root());
		return 1;
	}
	if (n_gpus <= 0)
		printf("no GPU (%s): simulated devices only\n", why);
	for (int q = 0; q < 2; q++) {
		struct model m = {.ids = ids, .n = n, .quant = coli_dtype_name(quants[q])};
		struct run ref = {0}, got = {0};
		struct coli_opts o;
		coli_container_t *c;

		if (fx_convert(FIXTURE, quants[q], fx_tmpdir(), m.path, sizeof(m.path)) ||
		    coli_io_container_open(m.path, &c))
			return 1;
		for (int i = 0; i < coli_io_container_n_expert_layers(c); i++) {
			const struct coli_expert_layer *xl = coli_io_container_expert_layer(c, i);

			m.slab_bytes = (double)xl->slab_bytes;
			m.expert_bytes += (double)xl->slab_bytes * xl->n_experts;
		}
		coli_io_container_close(c);
		opts_for(&o, "off", NULL, -1, -1);
		{
			coli_engine_t *e;
			char err[512];

			if (coli_engine_open(m.path, &o, &e, err, sizeof(err))) {
				printf("%s: %s\n", m.path, err);
				return 1;
			}
			m.V = coli_engine_config(e)->vocab;
			coli_engine_close(e);
		}
		ref.logits = malloc(sizeof(float) * (size_t)(n + STEPS) * m.V);
		got.logits = malloc(sizeof(float) * (size_t)(n + STEPS) * m.V);
		if (!ref.logits || !got.logits || run(&m, &o, STEPS, &ref))
			return 1;
		m.ref = ref.logits;
		memcpy(m.ref_ids, ref.ids, sizeof(m.ref_ids));
		for (int d = 0; d < n_devs; d++)
			for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
				/* q8 repeats the fault cases only: the rest is q4's */
				if (q == 1 && cases[k].fail == NONE && !cases[k].release)
					continue;
				fails += check(&m, devs[d], &cases[k], &got);
				runs++;
			}
		free(ref.logits), free(got.logits);
	}
	free(ids);
	printf("%d runs of %d greedy tokens compared with the CPU, %d checks failed\n", runs, STEPS,
	       fails);
	return fails != 0;
}
