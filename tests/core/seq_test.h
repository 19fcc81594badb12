/*
 * tests/core/seq_test.h — shared by the tests that step several sequences
 * on one engine and compare each with the same prompt alone (kv_pool.c,
 * prefix_cache.c): a case's engine options and engine (a pool of so many
 * blocks), the case loop, a prompt's reference alone, a sequence being
 * stepped, and the step loop.
 *
 * A reference is SQ_GEN greedy tokens of a prompt on a --parallel 1 engine
 * from empty (coli_engine_forward) and the raw logits each was picked from:
 * out [SQ_GEN] ids, logits [SQ_GEN][vocab]. A stepped sequence (struct sq)
 * feeds its prompt in chunks of SQ_CHUNK tokens, then one greedy token a
 * step; each token and its logits row must equal its reference's, byte for
 * byte, while it has one.
 */
#ifndef COLI_TEST_SEQ_TEST_H
#define COLI_TEST_SEQ_TEST_H

#include "fixture_util.h"
#include "ptx/ptx.h"

#define SQ_GEN   6  /* greedy tokens a reference holds */
#define SQ_CHUNK 17 /* prompt tokens a step: a prompt takes several steps */
#define SQ_CTX   256

struct sq_ref {
	int out[SQ_GEN];
	float *logits; /* [SQ_GEN][V] */
};

/* One sequence on the batched engine: its prompt, how far it is, and until
 * when to step it (want tokens; more: on after that, as a running source). */
struct sq {
	const int *ids;
	int n, slot, fed, gen, next, want, more;
	const struct sq_ref *ref; /* compared with, or NULL */
};

/* A case: the fixture, its expert type, where it runs and the KV type. */
struct sq_cfg {
	const char *fixture;
	enum coli_dtype q;
	const char *gpu, *dense, *split, *kv;
	int fail; /* COLI_GPU_FAIL_AFTER of the batched engines (0: never) */
};

/* c's options for an engine of `parallel` slots (ctx SQ_CTX, 2 threads,
 * no usage file). */
static inline struct coli_opts sq_opts(const struct sq_cfg *c, int parallel)
{
	struct coli_opts o;

	coli_opts_init(&o, NULL, 0);
	o.threads = 2;
	o.ctx = SQ_CTX;
	o.parallel = parallel;
	o.kv_scramble = 1; /* no block table is the identity: a wrong address shows */
	o.gpu_fail_after = parallel > 1 && c->fail ? c->fail : -1;
	snprintf(o.gpu, sizeof(o.gpu), "%s", c->gpu);
	snprintf(o.kv_type, sizeof(o.kv_type), "%s", c->kv);
	coli_opts_set(&o, "--dense", c->dense, NULL, 0);
	coli_opts_set(&o, "--split", c->split, NULL, 0);
	coli_opts_set(&o, "--usage", "off", NULL, 0);
	return o;
}

/* A KV block's bytes / 1e9 (the reference engine's stats: sq_block_gb_of),
 * which sq_open_engine's pool sizes are counted in. */
static double g_sq_block_gb;

static inline void sq_block_gb_of(const struct coli_engine_stats *st)
{
	g_sq_block_gb = (double)st->kv_token_bytes * st->kv_block_tokens / 1e9;
}

/* An engine of c with `parallel` slots and a pool of `blocks` KV blocks (0:
 * the default pool); 1 (said) when it does not open. */
static inline int sq_open_engine(const char *path, const struct sq_cfg *c, int parallel,
                                 int blocks, coli_engine_t **e)
{
	struct coli_opts o = sq_opts(c, parallel);
	char err[512];

	o.kv_gb = blocks ? (blocks + 0.5) * g_sq_block_gb : 0; /* (floor: blocks) */
	if (coli_engine_open(path, &o, e, err, sizeof(err))) {
		printf("open %s: %s\n", path, err);
		return 1;
	}
	return 0;
}

/* run over cases[n], GPU 0's skipped (said) when there is none; the
 * failures. */
static inline int sq_cases(const struct sq_cfg *cases, size_t n, int (*run)(const struct sq_cfg *))
{
	const char *why;
	const int gpu = coli_ptx_probe(&why) > 0;
	int fails = 0;

	for (size_t i = 0; i < n; i++) {
		if (!strcmp(cases[i].gpu, "0") && !gpu) {
			printf("%-14s %-4s gpu 0: skipped (%s)\n", cases[i].fixture,
			       coli_dtype_name(cases[i].q), why ? why : "no GPU");
			continue;
		}
		fails += run(&cases[i]);
	}
	return fails;
}

/* ids[n] alone from empty on e (slot 0): SQ_GEN greedy tokens and their
 * logits into r. */
static inline int sq_alone(coli_engine_t *e, const int *ids, int n, struct sq_ref *r, int V)
{
	int rc;

	coli_engine_reset(e);
	rc = coli_engine_forward(e, ids, n, r->logits, 0);
	for (int g = 0; !rc && g < SQ_GEN; g++) {
		r->out[g] = fx_argmax(r->logits + (size_t)g * V, V);
		if (g + 1 < SQ_GEN)
			rc = coli_engine_forward(e, &r->out[g], 1, r->logits + (size_t)(g + 1) * V,
			                         0);
	}
	return rc;
}

/* Opens q for ids[n] (SQ_GEN tokens wanted, compared with ref when not
 * NULL): its slot must report `cached` tokens kept. 1 (said) when not. */
static inline int sq_open(coli_engine_t *e, struct sq *q, const int *ids, int n, int cached,
                          const struct sq_ref *ref, const char *what)
{
	int got = -1;

	*q = (struct sq){.ids = ids, .n = n, .want = SQ_GEN, .ref = ref};
	q->slot = coli_engine_seq_open(e, ids, n, &got);
	if (q->slot < 0 || got != cached) {
		printf("%s: slot %d, %d tokens cached, want %d\n", what, q->slot, got, cached);
		return 1;
	}
	q->fed = got;
	return 0;
}

/* The runs of one step of q[nq] (those short of their tokens, or on for
 * more): a prompt chunk or a token each, who[r] the sequence of runs[r]. */
static inline int sq_runs(const struct sq *q, int nq, struct coli_run *runs, int *who)
{
	int nr = 0;

	for (int i = 0; i < nq; i++) {
		const struct sq *s = &q[i];
		int n = s->fed < s->n ? s->n - s->fed : 1;

		if (s->gen >= s->want && !s->more)
			continue;
		n = n < SQ_CHUNK ? n : SQ_CHUNK;
		runs[nr] = (struct coli_run){.slot = s->slot,
		                             .n = n,
		                             .ids = s->fed < s->n ? s->ids + s->fed : &s->next,
		                             .logits = s->fed >= s->n || s->fed + n == s->n};
		who[nr++] = i;
	}
	return nr;
}

/* Steps q[nq] (at most 4) together until each has its wanted tokens
 * (stop_fed > 0: or until q[0] fed that many), comparing those with a
 * reference; logits: [nq][V], a row a sequence. The mismatches, -1 on an
 * engine error. */
static inline int sq_steps(coli_engine_t *e, struct sq *q, int nq, int V, float *logits,
                           int stop_fed, const char *what)
{
	struct coli_run runs[4];
	int who[4], bad = 0;

	for (;;) {
		int nr = sq_runs(q, nq, runs, who), k = 0, left = 0;

		for (int i = 0; i < nq; i++)
			left += q[i].gen < q[i].want;
		if (!left || (stop_fed && q[0].fed >= stop_fed))
			return bad;
		if (coli_engine_step(e, &(struct coli_batch){.n_runs = nr, .runs = runs}, logits)) {
			printf("%s: step: %s\n", what, coli_engine_errmsg(e));
			return -1;
		}
		for (int r = 0; r < nr; r++) {
			struct sq *s = &q[who[r]];
			const float *l;

			if (s->fed < s->n)
				s->fed += runs[r].n;
			if (!runs[r].logits)
				continue;
			l = logits + (size_t)k++ * V;
			s->next = fx_argmax(l, V);
			if (s->ref && s->gen < SQ_GEN &&
			    (s->next != s->ref->out[s->gen] ||
			     memcmp(l, s->ref->logits + (size_t)s->gen * V, sizeof(float) * V)) &&
			    bad++ < 4)
				printf("%s: slot %d token %d: id %d vs %d alone, logits differ\n",
				       what, s->slot, s->gen, s->next, s->ref->out[s->gen]);
			s->gen++;
		}
	}
}

#endif
