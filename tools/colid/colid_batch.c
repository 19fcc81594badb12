/*
 * tools/colid/colid_batch.c — continuous batching: the worker's loop over the
 * engine's sequence slots (--parallel N; one slot runs a job at a time
 * through the same loop, so its blocks feed the prefix index as N slots'
 * do).
 *
 * Up to N jobs run at once, each in a slot of its own (coli_engine_seq_open:
 * the free slot whose history shares the longest prefix with its prompt;
 * that prefix is not prefilled again). Each step is one coli_engine_step
 * over every running job's run: one token of each decoding job first, then
 * the prompts still being prefilled, in the order they came, in chunks of
 * what is left of --ubatch rows (so a long prompt never stalls the running
 * streams: it takes as many steps as its chunks). A job's run and its token
 * come from its struct coli_seq_gen (core/generate.c), which picks and
 * streams tokens through colid_job_token as coli_generate does: a request's
 * tokens are those it gets alone (the engine's rows are batch-invariant).
 * While one sequence runs, it drafts and verifies as coli_generate does
 * (--spec: coli_seq_gen_spec), the same tokens in fewer steps.
 *
 * A job that finishes (EOS, max_tokens, a stop string) or is cancelled (its
 * client left: checked every step, prefilling or not) frees its slot at
 * once, and a waiting job takes it before the next step. `n` > 1 choices are
 * separate jobs, so separate sequences.
 *
 * A step the KV pool cannot give every run's blocks (-ENOSPC: nothing
 * changed; admit's promises keep it from happening unless
 * --debug-kv-no-promise) runs again without its last run, and so on (and
 * without its first, when that one alone cannot grow): the runs left out
 * wait, slots and blocks kept, and come again next step. Only when no run
 * fits alone does a job end: the newest, its blocks freed for the others. A
 * step that fails otherwise (a device error the engine could not fail over)
 * ends every job in it with the error.
 *
 * Locks: the queue's mutex while taking jobs off the ring and updating the
 * running list (read by /metrics); the engine is this thread's alone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/colid/colid.h"

/* j's end: its text flushed, its slot closed, then colid_job_end (finish
 * reason, /metrics, marked done) and its place in q->run given up. */
static void end_job(struct colid_queue *q, struct colid_job *j, int rc)
{
	coli_seq_gen_end(q->engine, &j->gen, rc);
	coli_engine_seq_close(q->engine, j->slot);
	colid_job_end(q, j, rc, &j->gen.st);
	pthread_mutex_lock(&q->mu);
	for (int i = 0; i < q->n_run; i++)
		if (q->run[i] == j) {
			memmove(q->run + i, q->run + i + 1, sizeof(*q->run) * (q->n_run - i - 1));
			q->n_run--;
			break;
		}
	pthread_mutex_unlock(&q->mu);
	colid_job_put(j);
}

/* The KV positions j may take: its prompt and max_tokens. */
static int positions(const struct colid_job *j)
{
	return j->n_ids + (j->max_tokens > 0 ? j->max_tokens : 0);
}

/* A job taken off the ring: a slot and its generator, or its end. */
static void start_job(struct colid_queue *q, struct colid_job *j)
{
	int cached = 0, rc;

	j->started_s = colid_now_s();
	if (atomic_load(&j->cancel)) { /* the client left while it waited */
		colid_job_end(q, j, -ECANCELED, NULL);
		colid_job_put(j);
		return;
	}
	j->slot = coli_engine_seq_open(q->engine, j->ids, j->n_ids, &cached);
	rc = j->slot < 0 ? j->slot : 0;
	/* its blocks promised (admit saw they fit): it never waits for one mid-way
	 * (unless --debug-kv-no-promise) */
	if (!rc && !q->no_promise)
		rc = coli_engine_seq_reserve(q->engine, j->slot, positions(j));
	rc = rc ? rc
	        : coli_seq_gen_begin(q->engine, &j->gen, j->slot, cached, j->ids, j->n_ids,
	                             j->max_tokens, &j->sampler, colid_job_token, j);
	if (rc) {
		if (j->slot >= 0)
			coli_engine_seq_close(q->engine, j->slot);
		colid_job_end(q, j, rc, NULL);
		colid_job_put(j);
		return;
	}
	pthread_mutex_lock(&q->mu);
	q->run[q->n_run++] = j;
	pthread_mutex_unlock(&q->mu);
}

/* Waits for work; takes waiting jobs, in order, while slots are free and
 * the KV pool can hold the first one's prompt and max_tokens beside what
 * the running ones hold and were promised, less what its prompt shares with
 * the prefix cache (coli_engine_kv_fits_prompt: a running sequence's blocks
 * are never taken; the first waits for one to end, and one that cannot fit
 * even with none running ends with -E2BIG). 0 when closing and nothing is
 * left. */
static int admit(struct colid_queue *q, int n_seq)
{
	int more;

	pthread_mutex_lock(&q->mu);
again:
	while (!q->n && !q->n_run && !q->closing)
		pthread_cond_wait(&q->cv, &q->mu);
	while (q->n && q->n_run < n_seq) {
		struct colid_job *j = q->ring[q->head];

		/* (the engine is this thread's: reading it under mu is safe) */
		int fits = coli_engine_kv_fits_prompt(q->engine, j->ids, j->n_ids,
		                                      q->no_promise ? j->n_ids : positions(j));

		if (fits == 0 && q->n_run) /* the first waits for a running one to end */
			break;
		q->head = (q->head + 1) % q->cap;
		q->n--;
		pthread_mutex_unlock(&q->mu);
		if (fits > 0) {
			start_job(q, j); /* (takes mu to join q->run) */
		} else {
			/* never fits, even alone: the request checks should have
			 * refused it; it ends rather than waiting forever */
			colid_job_end(q, j, fits < 0 ? fits : -E2BIG, NULL);
			colid_job_put(j);
		}
		pthread_mutex_lock(&q->mu);
	}
	/* a job whose client left while it waited ends as it starts: none may
	 * run now, and returning 0 would end this thread while the server still
	 * takes requests (they would wait forever) */
	if (!q->n_run && !q->n && !q->closing)
		goto again;
	more = q->n_run > 0;
	pthread_mutex_unlock(&q->mu);
	return more;
}

/* A step's forward and its host work after, into /metrics' histograms. */
static void step_times(struct colid_metrics *m, double forward_s, double host_s)
{
	pthread_mutex_lock(&m->mu);
	colid_hist_observe(&m->hist[COLID_H_STEP], COLID_H_STEP, forward_s);
	colid_hist_observe(&m->hist[COLID_H_STEP_HOST], COLID_H_STEP_HOST, host_s);
	pthread_mutex_unlock(&m->mu);
}

/* The step over runs[0, *nr). When the KV pool cannot give every run the
 * blocks it grows into (-ENOSPC: the engine changed nothing), the step again
 * without its last run, and so on (prompt chunks come last: they wait
 * first); when the first run alone cannot grow, the same over the runs after
 * it. The runs that ran: [*lo, *nr). The others' jobs keep their slots and
 * blocks, and their runs come again next step. -ENOSPC still when no run
 * fits alone (each was tried alone last). (At most 8 runs: 36 failed steps,
 * each refused before any work.) */
static int step_runs(struct colid_queue *q, struct coli_run *runs, int *lo, int *nr,
                     const float **logits)
{
	int a = 0, n = *nr, rc;

	for (;;) {
		struct coli_batch b = {.n_runs = n - a, .runs = runs + a};

		rc = coli_engine_step_last(q->engine, &b, logits);
		if (rc != -ENOSPC)
			break;
		if (n - a > 1)
			n--;
		else if (++a < *nr)
			n = *nr; /* runs[a - 1] cannot grow even alone: the others without it */
		else
			break;
	}
	if (!rc && n - a < *nr && !q->kv_short++)
		fprintf(stderr,
		        "colid: the KV pool ran short: %d of a step's %d runs wait for blocks "
		        "(said once)\n",
		        *nr - (n - a), *nr);
	*lo = a, *nr = n;
	return rc;
}

/* One step over the running jobs: their runs (decoding ones first), the
 * forward, then each job's token. */
static void step(struct colid_queue *q, int V, int ubatch)
{
	const float *logits = NULL; /* the engine's: a row a run at most */
	struct coli_run runs[COLI_MAX_SEQ];
	struct colid_job *who[COLI_MAX_SEQ], *snap[COLI_MAX_SEQ];
	int n_snap, nr = 0, lo = 0, rows = 0, k = 0, rc;
	double t0, t1;

	pthread_mutex_lock(&q->mu);
	n_snap = q->n_run;
	memcpy(snap, q->run, sizeof(*snap) * n_snap);
	pthread_mutex_unlock(&q->mu);
	for (int i = 0; i < n_snap; i++) /* a client gone: its slot now */
		if (atomic_load(&snap[i]->cancel) || snap[i]->gen.done)
			end_job(q, snap[i], 0);
	pthread_mutex_lock(&q->mu);
	n_snap = q->n_run;
	memcpy(snap, q->run, sizeof(*snap) * n_snap);
	pthread_mutex_unlock(&q->mu);
	/* one sequence alone (none waits: admit gave it a slot): its drafts */
	if (n_snap == 1 && (rc = coli_seq_gen_spec(q->engine, &snap[0]->gen))) {
		if (rc < 0 || snap[0]->gen.done || atomic_load(&snap[0]->cancel))
			end_job(q, snap[0], rc < 0 ? rc : 0);
		return;
	}
	for (int pass = 0; pass < 2; pass++) /* decoding, then prefilling */
		for (int i = 0; i < n_snap; i++) {
			struct colid_job *j = snap[i];
			int prefill = j->gen.fed < j->gen.n_prompt, n;

			if (prefill != pass)
				continue;
			n = coli_seq_gen_run(&j->gen, ubatch - rows, &runs[nr]);
			if (n > 0)
				who[nr++] = j, rows += n;
		}
	if (!nr)
		return;
	t0 = colid_now_s();
	rc = step_runs(q, runs, &lo, &nr, &logits);
	if (rc == -ENOSPC) { /* no run fits alone: the newest job ends, its blocks free */
		fprintf(stderr,
		        "colid: the KV pool cannot grow any running sequence: the newest of %d "
		        "ends\n",
		        n_snap);
		end_job(q, snap[n_snap - 1], rc);
		return;
	}
	if (rc) /* every job of the step ends with it: say why once, here */
		fprintf(stderr, "colid: a step of %d runs (%d rows) failed: %s\n", nr, rows,
		        coli_engine_errmsg(q->engine));
	t1 = colid_now_s();
	for (int r = lo; r < nr; r++) {
		struct colid_job *j = who[r];
		const float *l = runs[r].logits ? logits + (size_t)k++ * V : NULL;

		int jrc = rc ? rc : coli_seq_gen_after(q->engine, &j->gen, &runs[r], l);

		if (jrc) { /* the step failed (a device error the engine could not
			    * fail over): every job in it ends with the error */
			end_job(q, j, jrc);
			continue;
		}
		if (j->gen.done || atomic_load(&j->cancel))
			end_job(q, j, 0);
	}
	step_times(q->metrics, t1 - t0, colid_now_s() - t1);
}

void *colid_batch_main(void *arg)
{
	struct colid_queue *q = arg;
	int n_seq = coli_engine_n_seq(q->engine), V = coli_engine_config(q->engine)->vocab;
	int ubatch = coli_engine_ubatch(q->engine);

	if (n_seq > COLI_MAX_SEQ)
		n_seq = COLI_MAX_SEQ;
	if (n_seq > ubatch) /* more could not all decode in one step: colid.c says so */
		n_seq = ubatch;
	while (admit(q, n_seq))
		step(q, V, ubatch);
	return NULL;
}
