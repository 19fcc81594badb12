/*
 * tools/colid/colid_queue.c — the bounded FIFO of generation jobs and the one
 * worker thread that owns the engine.
 *
 * The engine is not thread-safe, so exactly one thread calls it. HTTP threads
 * push jobs into a ring of `cap` slots (full: -EAGAIN, which the server turns
 * into 429 + Retry-After); the worker (colid_batch.c's loop) takes them in
 * order into the engine's sequence slots, up to --parallel of them running
 * together, and publishes text as it decodes (colid_job_token):
 *
 *   job->text  [len]        everything decoded so far (complete UTF-8 only)
 *   job->committed          prefix that is final: the last (longest stop - 1)
 *                           bytes are held back until no stop string can
 *                           begin there; a match truncates text at the match
 *
 * Under job->mu the worker appends, moves `committed`, and broadcasts
 * job->cv; readers wait on the same cv. Generation stops at the model's EOS
 * (the engine), at the template's end-of-turn id (ChatML <|im_end|>, which
 * some models lack in their EOS list), at a stop string, at max_tokens, or
 * when job->cancel is set (the client went away, or shutdown), checked at
 * every token. A job whose client left while queued is skipped.
 *
 * A job's end is colid_job_end (colid_batch.c's loop, after its sequence's
 * last step, or for a job that never ran): its finish reason, -ECANCELED
 * when its client left, its count in /metrics, then done.
 *
 * Lock order: queue->mu, then job->mu; never the reverse.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/colid/colid.h"

double colid_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct colid_job *colid_job_new(const int *ids, int n_ids, int max_tokens,
                                const struct coli_sampler *s, char *const *stop, int n_stop,
                                int eot_id)
{
	struct colid_job *j = calloc(1, sizeof(*j));

	if (!j)
		return NULL;
	pthread_mutex_init(&j->mu, NULL);
	pthread_cond_init(&j->cv, NULL);
	j->refs = 1;
	j->ids = malloc(sizeof(int) * (size_t)n_ids);
	j->cap = 256;
	j->text = malloc(j->cap);
	if (!j->ids || !j->text)
		goto err;
	j->text[0] = 0;
	memcpy(j->ids, ids, sizeof(int) * (size_t)n_ids);
	j->n_ids = n_ids;
	j->max_tokens = max_tokens;
	j->sampler = *s;
	if (s->n_bias > 0) { /* the sampler reads the job's copy */
		j->bias = malloc(sizeof(*j->bias) * (size_t)s->n_bias);
		if (!j->bias)
			goto err;
		memcpy(j->bias, s->bias, sizeof(*j->bias) * (size_t)s->n_bias);
		j->sampler.bias = j->bias;
	}
	j->eot_id = eot_id;
	j->eot2_id = -1;
	for (int i = 0; i < n_stop && i < COLID_MAX_STOP; i++) {
		j->stop[i] = strdup(stop[i]);
		if (!j->stop[i])
			goto err;
		j->n_stop = i + 1;
	}
	atomic_init(&j->cancel, 0);
	j->enqueued_s = colid_now_s();
	return j;
err:
	colid_job_put(j);
	return NULL;
}

void colid_job_put(struct colid_job *j)
{
	int last;

	if (!j)
		return;
	pthread_mutex_lock(&j->mu);
	last = --j->refs == 0;
	pthread_mutex_unlock(&j->mu);
	if (!last)
		return;
	for (int i = 0; i < j->n_stop; i++)
		free(j->stop[i]);
	free(j->ids);
	free(j->text);
	free(j->toks);
	free(j->bias);
	coli_grammar_free(j->grammar);
	pthread_mutex_destroy(&j->mu);
	pthread_cond_destroy(&j->cv);
	free(j);
}

/* Caller holds j->mu. Marks the job finished and wakes its reader. */
static void mark_done(struct colid_job *j, int status)
{
	j->status = status;
	j->committed = j->len;
	j->done = 1;
	pthread_cond_broadcast(&j->cv);
}

void colid_job_end(struct colid_queue *q, struct colid_job *j, int rc,
                   const struct coli_gen_stats *st)
{
	struct coli_engine_stats est;

	if (st)
		coli_engine_stats(q->engine, &est);
	pthread_mutex_lock(&j->mu);
	if (st) {
		j->st = *st;
		if (!j->finish && !rc) /* no stop string or end id set one */
			j->finish = st->stopped_eos || j->n_gen < j->max_tokens
			                ? COLID_FINISH_STOP
			                : COLID_FINISH_LENGTH;
	}
	if (!rc && atomic_load(&j->cancel))
		rc = -ECANCELED;
	pthread_mutex_unlock(&j->mu);
	/* Counted before the job is marked done, so a client that has its
	 * whole reply finds its request in /metrics. (The fields read are the
	 * worker's own.) */
	colid_metrics_job(q->metrics, j, rc, st ? &est : NULL,
	                  st ? j->started_s - j->enqueued_s : 0);
	pthread_mutex_lock(&j->mu);
	mark_done(j, rc);
	pthread_mutex_unlock(&j->mu);
}

/* ---- the generation callback: runs on the worker, once per token ---- */

static size_t longest_stop(const struct colid_job *j)
{
	size_t m = 0;

	for (int i = 0; i < j->n_stop; i++)
		if (strlen(j->stop[i]) > m)
			m = strlen(j->stop[i]);
	return m;
}

static int append(struct colid_job *j, const char *s, size_t n)
{
	if (j->len + n + 1 > j->cap) {
		size_t cap = j->cap * 2;
		char *p;

		while (cap < j->len + n + 1)
			cap *= 2;
		p = realloc(j->text, cap);
		if (!p)
			return -ENOMEM;
		j->text = p;
		j->cap = cap;
	}
	memcpy(j->text + j->len, s, n);
	j->len += n;
	j->text[j->len] = 0;
	return 0;
}

/* After appending: look for a stop string that ends in the new bytes, else
 * commit all but the last (longest - 1) bytes, backed off to a character
 * boundary so a reader never gets half a UTF-8 sequence. */
static void scan_stops(struct colid_job *j, size_t old_len)
{
	size_t hold = longest_stop(j), from, best = (size_t)-1, c;

	if (!hold) {
		j->committed = j->len;
		return;
	}
	from = old_len > hold - 1 ? old_len - (hold - 1) : 0;
	for (int i = 0; i < j->n_stop; i++) {
		const char *p =
		    memmem(j->text + from, j->len - from, j->stop[i], strlen(j->stop[i]));

		if (p && (size_t)(p - j->text) < best)
			best = (size_t)(p - j->text);
	}
	if (best != (size_t)-1) {
		j->len = best;
		j->text[best] = 0;
		j->committed = best;
		j->stopped = 1;
		j->finish = COLID_FINISH_STOP;
		return;
	}
	c = j->len > hold - 1 ? j->len - (hold - 1) : 0;
	while (c > j->committed && ((unsigned char)j->text[c] & 0xc0) == 0x80)
		c--;
	if (c > j->committed)
		j->committed = c;
}

/* A completion token's record (logprobs or return_token_ids asked):
 * text[start..end) after the stop scan, and what the sampler reported for it. */
static int record(struct colid_job *j, int id, size_t start)
{
	struct colid_tok *t;

	if (j->n_toks == j->cap_toks) {
		int cap = j->cap_toks ? 2 * j->cap_toks : 64;

		t = realloc(j->toks, sizeof(*t) * (size_t)cap);
		if (!t)
			return -ENOMEM;
		j->toks = t;
		j->cap_toks = cap;
	}
	t = &j->toks[j->n_toks++];
	t->id = id;
	t->start = (int)start;
	t->end = (int)j->len;
	t->out = j->sampler.out;
	if (t->out.id != id) /* (greedy on the engine: no logprobs were asked) */
		t->out.n_top = 0;
	return 0;
}

int colid_job_token(void *arg, int id, const char *text, size_t len)
{
	struct colid_job *j = arg;
	size_t old;
	int rc = 0;

	if (j->stopped)
		return 1; /* the flush after a stop: nothing more belongs to the reply */
	if (atomic_load(&j->cancel)) {
		j->stopped = 1;
		return 1;
	}
	if (j->delay_us)
		usleep(j->delay_us);
	if (id >= 0 && (id == j->eot_id || id == j->eot2_id)) {
		j->stopped = 1;
		j->finish = COLID_FINISH_STOP;
		return 1;
	}
	pthread_mutex_lock(&j->mu);
	if (id >= 0) {
		double now = colid_now_s();

		if (!j->n_gen++)
			j->first_s = now;
		else
			colid_hist_observe(&j->itl, COLID_H_ITL, now - j->last_s);
		j->last_s = now;
	}
	old = j->len;
	if (len && append(j, text, len))
		rc = j->stopped = 1;
	else
		scan_stops(j, old);
	if (id >= 0 && (j->sampler.logprobs >= 0 || j->want_ids) && record(j, id, old))
		rc = j->stopped = 1;
	/* a reader waits for text, or for token records (a model without a
	 * tokenizer has no text: its ids are what a stream sends) */
	if (j->committed > 0 || j->stopped || j->want_ids)
		pthread_cond_broadcast(&j->cv);
	pthread_mutex_unlock(&j->mu);
	return rc || j->stopped;
}

int colid_queue_init(struct colid_queue *q, int cap, coli_engine_t *e, struct colid_metrics *m)
{
	memset(q, 0, sizeof(*q));
	if (cap < 1)
		return -EINVAL;
	q->ring = calloc((size_t)cap, sizeof(*q->ring));
	if (!q->ring)
		return -ENOMEM;
	q->cap = cap;
	q->engine = e;
	q->metrics = m;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	return 0;
}

int colid_queue_start(struct colid_queue *q)
{
	int rc = pthread_create(&q->worker, NULL, colid_batch_main, q);

	if (rc)
		return -rc;
	q->worker_started = 1;
	return 0;
}

int colid_queue_push_n(struct colid_queue *q, struct colid_job **j, int n)
{
	int rc = 0;

	pthread_mutex_lock(&q->mu);
	if (q->closing)
		rc = -ESHUTDOWN;
	else if (q->cap - q->n < n)
		rc = -EAGAIN;
	for (int i = 0; !rc && i < n; i++) {
		pthread_mutex_lock(&j[i]->mu);
		j[i]->refs++;
		j[i]->enqueued_s = colid_now_s();
		j[i]->delay_us = q->delay_us;
		pthread_mutex_unlock(&j[i]->mu);
		q->ring[(q->head + q->n) % q->cap] = j[i];
		q->n++;
	}
	if (!rc)
		pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	return rc;
}

int colid_queue_push(struct colid_queue *q, struct colid_job *j)
{
	return colid_queue_push_n(q, &j, 1);
}

int colid_queue_depth(struct colid_queue *q)
{
	int n;

	pthread_mutex_lock(&q->mu);
	n = q->n;
	pthread_mutex_unlock(&q->mu);
	return n;
}

void colid_queue_close(struct colid_queue *q)
{
	pthread_mutex_lock(&q->mu);
	q->closing = 1;
	/* Waiting jobs end now; their readers answer 503. */
	while (q->n) {
		struct colid_job *j = q->ring[q->head];

		q->head = (q->head + 1) % q->cap;
		q->n--;
		pthread_mutex_lock(&j->mu);
		mark_done(j, -ESHUTDOWN);
		pthread_mutex_unlock(&j->mu);
		colid_job_put(j);
	}
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

void colid_queue_cancel_running(struct colid_queue *q)
{
	pthread_mutex_lock(&q->mu);
	for (int i = 0; i < q->n_run; i++)
		atomic_store(&q->run[i]->cancel, 1);
	pthread_mutex_unlock(&q->mu);
}

int colid_queue_join(struct colid_queue *q, double timeout_s)
{
	struct timespec ts;
	int rc;

	if (!q->worker_started)
		return 0;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)timeout_s;
	ts.tv_nsec += (long)((timeout_s - (time_t)timeout_s) * 1e9);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	rc = pthread_timedjoin_np(q->worker, NULL, &ts);
	if (rc)
		return -rc;
	q->worker_started = 0;
	return 0;
}

void colid_queue_free(struct colid_queue *q)
{
	free(q->ring);
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cv);
	memset(q, 0, sizeof(*q));
}
