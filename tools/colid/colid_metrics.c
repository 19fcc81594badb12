/*
 * tools/colid/colid_metrics.c — colid's counters and their Prometheus text format
 * (GET /metrics, version 0.0.4 of the exposition format).
 *
 * Two sources: the server's own counters (requests by route and status
 * class, tokens, seconds in prefill/decode/queue), bumped under m->mu by
 * HTTP threads and the worker; and the engine's cumulative stats
 * (struct coli_engine_stats: tier hits and bytes, disk reads), which only the
 * worker may read, so it snapshots them into m->est after every job. Every
 * name starts with coli_; docs/api.md lists them.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/colid/colid.h"

static const char *g_route_names[COLID_R_N] = {"chat",    "completions", "models",     "health",
                                               "metrics", "tokenize",    "detokenize", "other"};
/* index into requests[][]: status classes kept apart where they matter */
static const char *g_code_names[6] = {"2xx", "4xx", "429", "5xx", "401", "413"};

/* Bucket upper bounds in seconds; the last is +Inf. TTFT and queue time
 * span a prefill of a few tokens on a GPU to minutes of a long prompt on a
 * CPU; inter-token gaps a fast GPU decode to a disk-bound CPU one. */
/* a step and its host work: a graphed GPU decode (~0.5 ms) to a long CPU prompt chunk */
#define STEP_BOUNDS                                                                                \
	{                                                                                          \
		0.00025, 0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.125, 0.25,     \
		    0.5, 1, 2.5, 5, HUGE_VAL                                                       \
	}
static const double g_bounds[COLID_H_N][COLID_HIST_BUCKETS] = {
    [COLID_H_TTFT] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
                      HUGE_VAL},
    [COLID_H_ITL] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.25, 0.5, 1,
                     2.5, 5, HUGE_VAL},
    [COLID_H_QUEUE] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
                       HUGE_VAL},
    [COLID_H_STEP] = STEP_BOUNDS,
    [COLID_H_STEP_HOST] = STEP_BOUNDS,
};
static const char *const g_hist_names[COLID_H_N][2] = {
    {"coli_time_to_first_token_seconds",
     "request arrival at the queue to its first generated token (first choice)"},
    {"coli_inter_token_latency_seconds", "gaps between successive generated tokens"},
    {"coli_queue_time_seconds", "request arrival at the queue to the engine starting it"},
    {"coli_step_forward_seconds", "a batch step's forward over every running sequence's rows"},
    {"coli_step_host_seconds",
     "a batch step's host work after its forward (tokens picked, streamed)"},
};

void colid_hist_observe(struct colid_hist *h, enum colid_hist_kind kind, double s)
{
	int k = 0;

	if (!(s >= 0)) /* a clock step or NaN: count it as 0 */
		s = 0;
	while (k < COLID_HIST_BUCKETS - 1 && s > g_bounds[kind][k])
		k++;
	h->le[k]++;
	h->count++;
	h->sum += s;
}

void colid_hist_add(struct colid_hist *to, const struct colid_hist *from)
{
	for (int k = 0; k < COLID_HIST_BUCKETS; k++)
		to->le[k] += from->le[k];
	to->count += from->count;
	to->sum += from->sum;
}

void colid_metrics_init(struct colid_metrics *m)
{
	memset(m, 0, sizeof(*m));
	pthread_mutex_init(&m->mu, NULL);
	m->started_s = colid_now_s();
}

void colid_metrics_request(struct colid_metrics *m, enum colid_route r, int status)
{
	int c = status == 429   ? 2
	        : status == 401 ? 4
	        : status == 413 ? 5
	        : status >= 500 ? 3
	        : status >= 400 ? 1
	                        : 0;

	pthread_mutex_lock(&m->mu);
	m->requests[r][c]++;
	pthread_mutex_unlock(&m->mu);
}

void colid_metrics_job(struct colid_metrics *m, const struct colid_job *j, int status,
                       const struct coli_engine_stats *est, double queue_s)
{
	pthread_mutex_lock(&m->mu);
	m->jobs++;
	if (status == -ECANCELED)
		m->cancelled++;
	if (est) {
		int prefilled = j->st.n_prompt - j->st.n_cached; /* a prefix-cache hit's kept
		                                                  * tokens are not prefilled */

		m->ran++;
		m->est = *est;
		m->prompt_tokens += (uint64_t)j->st.n_prompt;
		m->prefill_tokens += (uint64_t)prefilled;
		m->completion_tokens += (uint64_t)j->n_gen;
		m->spec_drafted += (uint64_t)j->st.spec_drafted;
		m->spec_accepted += (uint64_t)j->st.spec_accepted;
		m->prefill_s += j->st.prefill_s;
		m->decode_s += j->st.decode_s;
		m->queue_s += queue_s;
		if (j->choice == 0) {
			colid_hist_observe(&m->hist[COLID_H_QUEUE], COLID_H_QUEUE, queue_s);
			if (j->n_gen > 0)
				colid_hist_observe(&m->hist[COLID_H_TTFT], COLID_H_TTFT,
				                   j->first_s - j->enqueued_s);
		}
		colid_hist_add(&m->hist[COLID_H_ITL], &j->itl);
		if (j->st.prefill_s > 0)
			m->last_prefill_tps = prefilled / j->st.prefill_s;
		if (j->st.n_gen > 1 && j->st.decode_s > 0) {
			m->decode_tokens += (uint64_t)(j->st.n_gen - 1);
			m->last_decode_tps = (j->st.n_gen - 1) / j->st.decode_s;
		}
	}
	pthread_mutex_unlock(&m->mu);
}

double colid_metrics_job_s(struct colid_metrics *m)
{
	double s = 1;

	pthread_mutex_lock(&m->mu);
	if (m->ran)
		s = (m->prefill_s + m->decode_s) / (double)m->ran;
	pthread_mutex_unlock(&m->mu);
	return s;
}

/* ---- text building ---- */
struct out {
	char *p;
	size_t len, cap;
};

static void __attribute__((format(printf, 2, 3))) emit(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(o->p ? o->p + o->len : NULL, o->p ? o->cap - o->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (o->p && o->len + (size_t)n < o->cap) {
			o->len += (size_t)n;
			return;
		}
		size_t cap = o->cap ? o->cap * 2 : 4096;
		while (cap < o->len + (size_t)n + 1)
			cap *= 2;
		char *p = realloc(o->p, cap);
		if (!p)
			return;
		o->p = p;
		o->cap = cap;
	}
}

static void head(struct out *o, const char *name, const char *type, const char *help)
{
	emit(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

char *colid_metrics_text(struct colid_metrics *m, struct colid_queue *q)
{
	static const char *tiers[COLI_TIER_N] = {"vram", "ram", "disk"};
	struct colid_metrics s;
	struct out o = {0};
	int depth = colid_queue_depth(q), running;

	pthread_mutex_lock(&q->mu);
	running = q->n_run;
	pthread_mutex_unlock(&q->mu);
	pthread_mutex_lock(&m->mu);
	s = *m; /* a consistent copy; the mutex field of the copy is not used */
	pthread_mutex_unlock(&m->mu);

	head(&o, "coli_requests_total", "counter", "HTTP requests answered, by route and status");
	for (int r = 0; r < COLID_R_N; r++)
		for (int c = 0; c < 6; c++)
			emit(&o, "coli_requests_total{route=\"%s\",code=\"%s\"} %llu\n",
			     g_route_names[r], g_code_names[c],
			     (unsigned long long)s.requests[r][c]);
	head(&o, "coli_generations_total", "counter", "generation jobs run by the engine");
	emit(&o, "coli_generations_total %llu\n", (unsigned long long)s.jobs);
	head(&o, "coli_generations_cancelled_total", "counter",
	     "jobs stopped because the client went away or the server stopped");
	emit(&o, "coli_generations_cancelled_total %llu\n", (unsigned long long)s.cancelled);
	head(&o, "coli_prompt_tokens_total", "counter", "prompt tokens prefilled");
	emit(&o, "coli_prompt_tokens_total %llu\n", (unsigned long long)s.prompt_tokens);
	head(&o, "coli_prefill_tokens_total", "counter",
	     "prompt tokens run through prefill (less those a prefix-cache hit kept)");
	emit(&o, "coli_prefill_tokens_total %llu\n", (unsigned long long)s.prefill_tokens);
	head(&o, "coli_completion_tokens_total", "counter", "tokens generated");
	emit(&o, "coli_completion_tokens_total %llu\n", (unsigned long long)s.completion_tokens);
	head(&o, "coli_spec_draft_tokens_total", "counter",
	     "speculative draft tokens verified (--spec), by outcome");
	emit(&o, "coli_spec_draft_tokens_total{outcome=\"accepted\"} %llu\n",
	     (unsigned long long)s.spec_accepted);
	emit(&o, "coli_spec_draft_tokens_total{outcome=\"rejected\"} %llu\n",
	     (unsigned long long)(s.spec_drafted - s.spec_accepted));
	head(&o, "coli_prefill_seconds_total", "counter", "seconds spent in prefill");
	emit(&o, "coli_prefill_seconds_total %.6f\n", s.prefill_s);
	head(&o, "coli_decode_seconds_total", "counter", "seconds spent decoding");
	emit(&o, "coli_decode_seconds_total %.6f\n", s.decode_s);
	head(&o, "coli_queue_wait_seconds_total", "counter", "seconds jobs waited in the queue");
	emit(&o, "coli_queue_wait_seconds_total %.6f\n", s.queue_s);
	head(&o, "coli_prefill_tokens_per_second", "gauge",
	     "a sequence's prefill rate (tokens prefilled): all jobs (avg), last job");
	emit(&o, "coli_prefill_tokens_per_second{window=\"all\"} %.3f\n",
	     s.prefill_s > 0 ? s.prefill_tokens / s.prefill_s : 0);
	emit(&o, "coli_prefill_tokens_per_second{window=\"last\"} %.3f\n", s.last_prefill_tps);
	head(&o, "coli_decode_tokens_per_second", "gauge",
	     "a sequence's decode rate: all jobs (avg), last job (batched sequences share "
	     "steps: the server's rate is coli_completion_tokens_total's)");
	emit(&o, "coli_decode_tokens_per_second{window=\"all\"} %.3f\n",
	     s.decode_s > 0 ? s.decode_tokens / s.decode_s : 0);
	emit(&o, "coli_decode_tokens_per_second{window=\"last\"} %.3f\n", s.last_decode_tps);
	head(&o, "coli_queue_depth", "gauge", "jobs waiting for the engine");
	emit(&o, "coli_queue_depth %d\n", depth);
	head(&o, "coli_queue_capacity", "gauge", "queue slots (a full queue answers 429)");
	emit(&o, "coli_queue_capacity %d\n", q->cap);
	head(&o, "coli_running", "gauge", "sequences the engine is generating (prefilling too)");
	emit(&o, "coli_running %d\n", running);
	head(&o, "coli_sequence_slots", "gauge",
	     "sequence slots in the KV cache (--parallel), and those held by a sequence");
	emit(&o, "coli_sequence_slots{state=\"total\"} %d\n", coli_engine_n_seq(q->engine));
	emit(&o, "coli_sequence_slots{state=\"in_use\"} %d\n", running);
	head(&o, "coli_engine_steps_total", "counter",
	     "forward steps (CPU dense part), and the sequences they ran: their ratio is the "
	     "batch");
	emit(&o, "coli_engine_steps_total %llu\n", (unsigned long long)s.est.steps);
	emit(&o, "coli_engine_step_sequences_total %llu\n", (unsigned long long)s.est.step_runs);
	head(&o, "coli_prefix_cache_hits_total", "counter",
	     "prompts that kept a cached prefix of an earlier sequence's");
	emit(&o, "coli_prefix_cache_hits_total %llu\n", (unsigned long long)s.est.prefix_hits);
	head(&o, "coli_prefix_cache_saved_tokens_total", "counter",
	     "prompt tokens those kept: not prefilled again");
	emit(&o, "coli_prefix_cache_saved_tokens_total %llu\n",
	     (unsigned long long)s.est.prefix_saved);
	head(&o, "coli_prefix_cache_shared_tokens_total", "counter",
	     "of the saved tokens, those in blocks another request wrote (the prefix index)");
	emit(&o, "coli_prefix_cache_shared_tokens_total %llu\n",
	     (unsigned long long)s.est.prefix_shared);
	head(&o, "coli_engine_tokens_total", "counter", "tokens through the forward pass");
	emit(&o, "coli_engine_tokens_total %llu\n", (unsigned long long)s.est.tokens);
	head(&o, "coli_expert_uses_total", "counter", "(token, routed expert) pairs");
	emit(&o, "coli_expert_uses_total %llu\n", (unsigned long long)s.est.expert_uses);
	head(&o, "coli_tier_hits_total", "counter", "expert-layer loads served by each tier");
	for (int t = 0; t < COLI_TIER_N; t++)
		emit(&o, "coli_tier_hits_total{tier=\"%s\"} %llu\n", tiers[t],
		     (unsigned long long)s.est.hits[t]);
	head(&o, "coli_tier_bytes_total", "counter", "slab bytes served by each tier");
	for (int t = 0; t < COLI_TIER_N; t++)
		emit(&o, "coli_tier_bytes_total{tier=\"%s\"} %llu\n", tiers[t],
		     (unsigned long long)s.est.bytes[t]);
	head(&o, "coli_disk_reads_total", "counter", "slab reads issued (demand + prefetch)");
	emit(&o, "coli_disk_reads_total %llu\n", (unsigned long long)s.est.disk_reads);
	head(&o, "coli_disk_read_bytes_total", "counter", "bytes read from disk");
	emit(&o, "coli_disk_read_bytes_total %llu\n", (unsigned long long)s.est.disk_bytes_read);
	head(&o, "coli_disk_read_seconds_total", "counter",
	     "wall seconds with disk reads in flight");
	emit(&o, "coli_disk_read_seconds_total %.6f\n", s.est.disk_read_s);
	head(&o, "coli_disk_gigabytes_per_second", "gauge", "disk read rate while reading");
	emit(&o, "coli_disk_gigabytes_per_second %.4f\n",
	     s.est.disk_read_s > 0 ? s.est.disk_bytes_read / s.est.disk_read_s / 1e9 : 0);
	head(&o, "coli_disk_wait_seconds_total", "counter",
	     "seconds the forward pass blocked on disk");
	emit(&o, "coli_disk_wait_seconds_total %.6f\n", s.est.disk_wait_s);
	head(&o, "coli_prefetch_total", "counter", "router-lookahead prefetches by outcome");
	emit(&o, "coli_prefetch_total{outcome=\"issued\"} %llu\n",
	     (unsigned long long)s.est.prefetch_issued);
	emit(&o, "coli_prefetch_total{outcome=\"used\"} %llu\n",
	     (unsigned long long)s.est.prefetch_used);
	emit(&o, "coli_prefetch_total{outcome=\"wasted\"} %llu\n",
	     (unsigned long long)s.est.prefetch_wasted);
	head(
	    &o, "coli_kv_cache_bytes", "gauge",
	    "the host KV cache in --kv-type (keys and values of every position; 0 before the first "
	    "job)");
	emit(&o, "coli_kv_cache_bytes %llu\n", (unsigned long long)s.est.kv_bytes);
	head(&o, "coli_kv_bytes_per_token", "gauge", "KV cache bytes of one token, all layers");
	emit(&o, "coli_kv_bytes_per_token %llu\n", (unsigned long long)s.est.kv_token_bytes);
	head(&o, "coli_kv_blocks_total", "gauge",
	     "the KV cache pool's blocks (--kv-gb; coli_kv_block_tokens positions each)");
	emit(&o, "coli_kv_blocks_total %d\n", s.est.kv_blocks);
	head(&o, "coli_kv_block_tokens", "gauge", "positions a KV block holds");
	emit(&o, "coli_kv_block_tokens %d\n", s.est.kv_block_tokens);
	head(&o, "coli_kv_blocks_used", "gauge", "KV blocks held by running sequences");
	emit(&o, "coli_kv_blocks_used %d\n", s.est.kv_blocks_used);
	head(&o, "coli_kv_blocks_cached", "gauge",
	     "KV blocks held by finished sequences: their prefixes, reclaimed when needed");
	emit(&o, "coli_kv_blocks_cached %d\n", s.est.kv_blocks_cached);
	head(&o, "coli_kv_blocks_free", "gauge", "KV blocks held by no sequence");
	emit(&o, "coli_kv_blocks_free %d\n", s.est.kv_blocks_free);
	head(&o, "coli_h2d_bytes_total", "counter", "host to device copies");
	emit(&o, "coli_h2d_bytes_total %llu\n", (unsigned long long)s.est.h2d_bytes);
	for (int h = 0; h < COLID_H_N; h++) {
		uint64_t cum = 0;

		head(&o, g_hist_names[h][0], "histogram", g_hist_names[h][1]);
		for (int k = 0; k < COLID_HIST_BUCKETS; k++) {
			cum += s.hist[h].le[k];
			if (k == COLID_HIST_BUCKETS - 1)
				emit(&o, "%s_bucket{le=\"+Inf\"} %llu\n", g_hist_names[h][0],
				     (unsigned long long)cum);
			else
				emit(&o, "%s_bucket{le=\"%g\"} %llu\n", g_hist_names[h][0],
				     g_bounds[h][k], (unsigned long long)cum);
		}
		emit(&o, "%s_sum %.6f\n", g_hist_names[h][0], s.hist[h].sum);
		emit(&o, "%s_count %llu\n", g_hist_names[h][0],
		     (unsigned long long)s.hist[h].count);
	}
	head(&o, "coli_uptime_seconds", "gauge", "seconds since colid started");
	emit(&o, "coli_uptime_seconds %.3f\n", colid_now_s() - s.started_s);
	return o.p;
}
