/*
 * tools/colid/colid.h — what the files of colid share. colid serves one engine
 * over an OpenAI-compatible HTTP API (docs/api.md):
 *
 *   colid.c          main: flags, NUMA binding, engine, signals, shutdown
 *   colid_http.c     libmicrohttpd: routing, auth, bodies, JSON and SSE replies
 *   colid_request.c  request bodies -> struct colid_request (pure; fuzzed),
 *                    with colid_request_input.c (messages, prompt, tools) and
 *                    colid_request_output.c (stop, sampling, response_format)
 *   colid_tokenize.c /tokenize and /detokenize bodies (pure; fuzzed)
 *   colid_sampling.c the sampling fields -> a sampler per choice; logprobs JSON
 *   colid_queue.c    the bounded FIFO, the one worker that owns the engine, jobs
 *   colid_metrics.c  counters and the Prometheus text of /metrics
 *   colid_guard.c    slow clients: request deadlines, headroom under the limit
 *
 * The pure body parsers (colid_request*.c, colid_tokenize.c and
 * colid_request.h, private to them) are in tools/colid/request/, the rest here.
 *
 * Threads: libmicrohttpd runs one thread per connection; it parses, tokenizes
 * (the tokenizer is immutable) and renders replies. Exactly one worker thread
 * calls the engine. They meet in a struct colid_job: the HTTP side fills its
 * input and pushes it; the worker appends generated text under job->mu and
 * signals job->cv; the HTTP side copies committed text out. A job is
 * reference counted (HTTP side + queue/worker) and freed by the last one.
 */
#ifndef COLI_COLID_H
#define COLI_COLID_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/coli.h"

#define COLID_MAX_STOP     4    /* stop strings per request, as OpenAI */
#define COLID_MAX_STOP_LEN 256  /* bytes per stop string */
#define COLID_MAX_N        16   /* choices per request ('n') */
#define COLID_MAX_BIAS     1024 /* logit_bias entries per request */

/* ---- errors: an OpenAI error object and its HTTP status ---- */
struct colid_error {
	int status;       /* 400, 401, 404, 405, 413, 429, 500, 503 */
	const char *type; /* "invalid_request_error", "server_error", ... */
	const char *code; /* "context_length_exceeded" ... or NULL */
	char param[64];   /* the offending field, or "" */
	char message[320];
};
/* Fills e and returns -EINVAL (for `return colid_error_set(...)`). */
int colid_error_set(struct colid_error *e, int status, const char *type, const char *code,
                    const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* {"error":{"message","type","param","code"}}, malloc'd. */
char *colid_error_json(const struct colid_error *e);

/* ---- requests (colid_request.c; its fields in colid_request_input.c and
 * colid_request_output.c, tools/colid/request/colid_request.h between them) ---- */
enum colid_endpoint { COLID_EP_COMPLETIONS = 0, COLID_EP_CHAT = 1 };

/* A completions prompt: text, or token ids given directly (checked against
 * the vocabulary by the caller). */
struct colid_prompt {
	char *text; /* [len] bytes, NUL-terminated; NULL when ids */
	size_t len;
	int *ids; /* [n_ids], each >= 0; NULL when text */
	int n_ids;
};

struct colid_request {
	enum colid_endpoint ep;
	char *model;                /* as sent, or NULL */
	struct coli_chat_msg *msgs; /* chat: n_msgs messages (strings owned here) */
	int n_msgs;
	/* completions: the prompts, 1..COLID_MAX_N (a batch: OpenAI's list of
	 * strings or of token-id lists); choices p * n .. p * n + n - 1 are
	 * prompt p's */
	struct colid_prompt *prompts;
	int n_prompts;
	int prompt_batch;     /* prompt was a list of prompts (errors name prompt[i]) */
	int return_token_ids; /* the ids of the prompt and of each choice (vLLM's field) */
	int max_tokens;       /* -1: not given */
	double temperature;   /* default 1, as OpenAI */
	double top_p;         /* default 1 */
	int top_k;            /* extension; 0 = off */
	uint64_t seed;
	int has_seed;
	char *stop[COLID_MAX_STOP];
	int n_stop;
	int stream;
	int include_usage; /* stream_options.include_usage */
	/* chat: chat_template_kwargs.enable_thinking, -1 not given (the
	 * template's default), 0 off (the renderer's no_think), 1 on */
	int enable_thinking;
	/* sampling beyond temperature / top_p / top_k (docs/api.md, core/coli.h) */
	int n;                                      /* choices, 1..COLID_MAX_N */
	double min_p;                               /* 0: off */
	double presence_penalty, frequency_penalty; /* 0: off */
	double repetition_penalty;                  /* 1: off */
	struct coli_logit_bias *bias;               /* [n_bias]; ids checked against the
	                                             * vocabulary by the caller */
	int n_bias;
	int logprobs;     /* -1: none; else the top_logprobs count, 0..20 (chat: logprobs
	                   * true and top_logprobs; completions: logprobs N) */
	int top_logprobs; /* chat, as sent (-1: not given); folded into logprobs */
	/* chat, for the Jinja renderer (core/text/chat_jinja.c): the messages as
	 * JSON (developer -> system, content parts joined as in msgs), the tools
	 * array, the other chat_template_kwargs; NULL when absent */
	char *messages_json;
	char *tools_json;
	int tool_choice_none; /* tool_choice "none": the reply is not read for calls */
	char *kwargs_json;
	/* constrained decoding (docs/api.md, Structured output): response_format
	 * json_object (json_object set) or json_schema (schema_json, the schema's
	 * text); tool_choice "required" (tool_required) or a named function
	 * (tool_name) */
	int json_object, tool_required;
	char *schema_json, *tool_name;
};
/* Parses and validates a body. 0, or -EINVAL with e filled (4xx). On error
 * nothing needs freeing; on success call colid_request_free. */
int colid_request_parse(const char *body, size_t len, enum colid_endpoint ep,
                        struct colid_request *r, struct colid_error *e);
void colid_request_free(struct colid_request *r);
/* ---- /tokenize and /detokenize bodies (colid_tokenize.c; pure, fuzzed) ---- */
#define COLID_MAX_TOKENIZE (1 << 20) /* ids per /detokenize request */
struct colid_tokenize_req {
	char *text; /* /tokenize: [len] bytes, NUL-terminated (may hold NULs) */
	size_t len;
	int add_special; /* add_special_tokens, default 1 (nothing to add: docs/api.md) */
	int *ids;        /* /detokenize: [n_ids], each >= 0 */
	int n_ids;
	int has_ids;
};
/* detok: the /detokenize shape, else /tokenize's. 0, or -EINVAL with e
 * filled; on success call colid_tokenize_free. */
int colid_tokenize_parse(const char *body, size_t len, int detok, struct colid_tokenize_req *r,
                         struct colid_error *e);
void colid_tokenize_free(struct colid_tokenize_req *r);
/* Offset of the first invalid UTF-8 byte, or -1 if s[0..n) is valid. */
long colid_utf8_invalid_at(const char *s, size_t n);

/* ---- latency histograms (colid_metrics.c) ----
 * Prometheus histograms of seconds; bucket upper bounds in
 * colid_hist_bounds (docs/api.md, "Metrics"), the last one +Inf. */
enum colid_hist_kind {
	COLID_H_TTFT,
	COLID_H_ITL,
	COLID_H_QUEUE,
	COLID_H_STEP,      /* a step's forward (coli_engine_step_last) */
	COLID_H_STEP_HOST, /* and its host work after: tokens picked and streamed */
	COLID_H_N
};
#define COLID_HIST_BUCKETS 16
struct colid_hist {
	uint64_t le[COLID_HIST_BUCKETS]; /* observations <= bound k (not cumulative) */
	uint64_t count;
	double sum;
};
void colid_hist_observe(struct colid_hist *h, enum colid_hist_kind kind, double s);
void colid_hist_add(struct colid_hist *to, const struct colid_hist *from);

/* ---- jobs and the queue (colid_queue.c) ---- */
enum colid_finish { COLID_FINISH_NONE = 0, COLID_FINISH_STOP, COLID_FINISH_LENGTH };

/* A completion token and what the sampler said of it; its text is
 * job->text[start..end) (end <= start when a stop string cut it away). */
struct colid_tok {
	int id;
	int start, end;
	struct coli_sample_out out;
};

struct colid_job {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int refs; /* under mu */
	/* input: set before colid_queue_push, read-only after */
	int *ids;
	int n_ids;
	int max_tokens;
	struct coli_sampler sampler;
	char *stop[COLID_MAX_STOP];
	int n_stop;
	int eot_id;   /* extra end-of-turn id (ChatML <|im_end|>), or -1 */
	int eot2_id;  /* a second one (harmony's <|call|>), or -1 */
	int want_ids; /* return_token_ids: a token record each, as for logprobs */
	double enqueued_s;
	/* output: under mu */
	char *text; /* generated text [len], NUL-terminated */
	size_t len, cap;
	size_t committed; /* text[0..committed) is final (stop strings held back) */
	int n_gen;        /* completion tokens */
	int done;         /* the worker is finished with it */
	int status;       /* 0, or -errno (-ESHUTDOWN: dropped at shutdown) */
	enum colid_finish finish;
	struct coli_gen_stats st;
	/* set by the HTTP side when the client is gone, read by the worker */
	atomic_int cancel;
	/* logprobs (sampler.logprobs >= 0) or want_ids: one record per
	 * completion token, under mu like the text */
	struct colid_tok *toks;
	int n_toks, cap_toks;
	struct coli_logit_bias *bias; /* the sampler's, owned here */
	struct coli_grammar *grammar; /* the sampler's, owned here (constrained) */
	/* timing, the worker's: choice (0: the request's first job, whose
	 * TTFT and queue time /metrics counts), the first and the latest token's
	 * time, and the gaps between tokens (merged into /metrics at the end) */
	int choice;
	double started_s, first_s, last_s;
	struct colid_hist itl;
	/* the worker's private state */
	int stopped;
	int slot;                /* the engine's sequence slot */
	struct coli_seq_gen gen; /* ... and the sequence's generator (colid_batch.c) */
	unsigned delay_us;       /* --debug-token-delay-ms, for tests */
};

/* A job holding one reference; ids are copied. */
struct colid_job *colid_job_new(const int *ids, int n_ids, int max_tokens,
                                const struct coli_sampler *s, char *const *stop, int n_stop,
                                int eot_id);
void colid_job_put(struct colid_job *j);
struct colid_queue;
/* The worker's end of job j, whichever loop ran it (colid_queue.c):
 * st, the generation's stats (copied to j->st), or NULL when the engine
 * never ran it (its client left while it waited, it got no slot); then its
 * finish reason when no stop string or end id set one (length when it
 * reached max_tokens, else stop), -ECANCELED for rc 0 when its client left,
 * counted in /metrics, and marked done with that status, waking its
 * reader. The caller keeps its reference. */
void colid_job_end(struct colid_queue *q, struct colid_job *j, int rc,
                   const struct coli_gen_stats *st);
/* The generation callback, once a token (coli_gen_cb; arg: the job). */
int colid_job_token(void *arg, int id, const char *text, size_t len);
/* The worker's loop with several sequence slots (colid_batch.c). */
void *colid_batch_main(void *arg);

struct colid_metrics;
struct colid_queue {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct colid_job **ring; /* [cap] */
	int cap, head, n;
	int closing;                         /* no more pushes; the worker drains and exits */
	struct colid_job *run[COLI_MAX_SEQ]; /* the jobs in the engine's slots */
	int n_run;
	coli_engine_t *engine; /* owned by the worker while it runs */
	struct colid_metrics *metrics;
	pthread_t worker;
	int worker_started;
	unsigned delay_us; /* sleep per token (tests of cancellation, 429, shutdown) */
	int no_promise;    /* --debug-kv-no-promise: admit on the prompt, reserve nothing */
	long kv_short;     /* steps run without some of their runs (the pool ran short) */
};
int colid_queue_init(struct colid_queue *q, int cap, coli_engine_t *e, struct colid_metrics *m);
/* Starts the worker thread. */
int colid_queue_start(struct colid_queue *q);
/* Takes a reference on success. -EAGAIN when full, -ESHUTDOWN when closing. */
int colid_queue_push(struct colid_queue *q, struct colid_job *j);
/* Push all n jobs or none (in order): -EAGAIN when fewer than n slots are free. */
int colid_queue_push_n(struct colid_queue *q, struct colid_job **j, int n);
int colid_queue_depth(struct colid_queue *q); /* waiting, not counting the running one */
/* Stop taking jobs: queued ones end with -ESHUTDOWN (their clients get
 * 503), the running one goes on; the worker exits when it is done. */
void colid_queue_close(struct colid_queue *q);
/* Cancel the jobs the engine is on (shutdown grace over, second signal). */
void colid_queue_cancel_running(struct colid_queue *q);
/* Join the worker; -ETIMEDOUT if it is still busy after timeout_s. */
int colid_queue_join(struct colid_queue *q, double timeout_s);
void colid_queue_free(struct colid_queue *q);

/* ---- metrics (colid_metrics.c) ---- */
enum colid_route {
	COLID_R_CHAT,
	COLID_R_COMPLETIONS,
	COLID_R_MODELS,
	COLID_R_HEALTH,
	COLID_R_METRICS,
	COLID_R_TOKENIZE,
	COLID_R_DETOKENIZE,
	COLID_R_OTHER,
	COLID_R_N
};
struct colid_metrics {
	pthread_mutex_t mu;
	uint64_t requests[COLID_R_N][6]; /* by status class: 2xx 4xx(other) 429 5xx 401 413 */
	uint64_t prompt_tokens, completion_tokens;
	uint64_t prefill_tokens; /* prompt tokens prefilled: less a prefix-cache hit's */
	uint64_t spec_drafted, spec_accepted; /* --spec draft tokens verified, accepted */
	uint64_t jobs, cancelled;
	uint64_t ran; /* jobs the engine ran (the others ended waiting or without a slot) */
	double prefill_s, decode_s, queue_s;
	double last_prefill_tps, last_decode_tps;
	uint64_t decode_tokens;            /* tokens behind decode_s (n_gen - 1 per job) */
	struct colid_hist hist[COLID_H_N]; /* TTFT, inter-token latency, queue time */
	struct coli_engine_stats est;      /* snapshot taken by the worker after each job */
	double started_s;
};
void colid_metrics_init(struct colid_metrics *m);
void colid_metrics_request(struct colid_metrics *m, enum colid_route r, int status);
/* Called by the worker after a job ends with status (0 or -errno), before
 * it is marked done, with the engine's cumulative stats (NULL: the job did
 * not run). */
void colid_metrics_job(struct colid_metrics *m, const struct colid_job *j, int status,
                       const struct coli_engine_stats *est, double queue_s);
/* The mean seconds of a job the engine ran (prefill and decode; 1 before
 * the first), for Retry-After. */
double colid_metrics_job_s(struct colid_metrics *m);
/* The Prometheus text exposition, malloc'd. */
char *colid_metrics_text(struct colid_metrics *m, struct colid_queue *q);

double colid_now_s(void);

/* ---- slow clients (colid_guard.c) ---- */
struct MHD_Connection;
struct colid_slot;
struct colid_guard {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct colid_slot *head, *tail; /* every connection, oldest pending first */
	int n_pending;                  /* connections without a whole request yet */
	int max_pending;                /* more shuts the oldest pending one down */
	double deadline_s;              /* --header-timeout */
	uint64_t evicted, timed_out;    /* under mu: printed at exit */
	pthread_t thread;
	int started, quit;
};
/* max_pending = max_conn less a quarter (all of it below 4). Starts the
 * watchdog thread. */
int colid_guard_start(struct colid_guard *g, double deadline_s, int max_conn);
/* After MHD_stop_daemon. */
void colid_guard_stop(struct colid_guard *g);
/* The request on mc was received whole: no deadline while it is answered.
 * -ECONNRESET when the guard shut the connection down already. */
int colid_guard_received(struct colid_guard *g, struct MHD_Connection *mc);
/* The request on mc is over: the connection is pending again. */
void colid_guard_answered(struct colid_guard *g, struct MHD_Connection *mc);
#ifdef MHD_VERSION
/* MHD_OPTION_NOTIFY_CONNECTION's callback; cls is the guard. */
void colid_guard_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                        enum MHD_ConnectionNotificationCode code);
#endif

/* ---- the server (colid_http.c) ---- */
struct MHD_Daemon;
struct colid_server {
	coli_engine_t *engine; /* used only by the queue's worker */
	const coli_tokenizer_t *tok;
	const struct coli_model_config *cfg;
	struct coli_chat_template chat;
	char model_id[128];
	int ctx;
	int kv_tokens; /* the KV pool's positions (--kv-gb): a request needing more gets a 400 */
	struct colid_queue queue;
	struct colid_metrics metrics;
	char *api_key;      /* malloc'd, NULL = no auth */
	size_t api_key_len; /* any length: the key file's first line, whole */
	size_t max_body;    /* bytes */
	int max_conn;
	int timeout_s;           /* idle connection timeout */
	int max_conn_per_ip;     /* --max-conn-per-ip */
	double header_timeout_s; /* --header-timeout: a whole request within */
	struct colid_guard guard;
	atomic_int stopping;
	atomic_int inflight; /* requests holding a job whose reply is not yet sent */
	long created;        /* unix time of start, for /v1/models */
	struct MHD_Daemon *mhd;
	unsigned short port;
	FILE *access_log; /* --access-log: a line per request (colid_http.c), or NULL */
	pthread_mutex_t log_mu;
};
/* ---- sampling fields (colid_sampling.c) ---- */
/* What needs the server: logit_bias ids within the vocabulary, the choices
 * (n times the prompts) within the queue. 0, or -EINVAL with e filled (400). */
int colid_sampling_check(struct colid_server *s, const struct colid_request *r,
                         struct colid_error *e);
/* The grammar the request's output is constrained to (*g NULL: none):
 * response_format json_object / json_schema, tool_choice required / named.
 * 0, or -EINVAL / -ENOTSUP with e filled (400 naming the field and the
 * schema keyword refused). */
int colid_grammar_of(struct colid_server *s, const struct colid_request *r, struct coli_grammar **g,
                     struct colid_error *e);
/* Choice c's sampler, seed = the request's + c * 0x9e3779b97f4a7c15. */
void colid_sampler_of(const struct colid_request *r, uint64_t seed, struct coli_sampler *smp);
/* tools/colid/colid_reply.c: a chat reply's message (content, reasoning_content,
 * tool_calls: calls only when tools_json, the request's tools, is given;
 * *n_calls of them, ids "call_ID_i"), NULL when out of memory; and the
 * stream's split of committed text into reasoning and content. */
struct json_t;
struct json_t *colid_reply_message(enum coli_chat_family f, const char *text, size_t len,
                                   int think_open, const char *tools_json, const char *id,
                                   int *n_calls);
enum { COLID_SPLIT_UNDECIDED, COLID_SPLIT_REASON, COLID_SPLIT_CONTENT };
struct colid_split {
	int phase;
};
struct colid_span {
	size_t from, to; /* bytes [from, to) of the text */
};
void colid_split_init(struct colid_split *sp, int think_open);
/* From text[from, avail) (done: the text is complete): what is reasoning,
 * what is content, and *upto, how far the text is consumed (a possible
 * prefix of a marker held back until more comes). */
void colid_split_next(struct colid_split *sp, const char *text, size_t from, size_t avail, int done,
                      struct colid_span *reason, struct colid_span *content, size_t *upto);
/* The logprobs of j's token records [from, to) in OpenAI's format, chat:
 * {"content": [{token, logprob, bytes, top_logprobs: [...]}]}, completions:
 * {tokens, token_logprobs, top_logprobs, text_offset}. Caller holds j->mu;
 * NULL when out of memory. */
struct json_t;
struct json_t *colid_logprobs_json(const coli_tokenizer_t *tok, const struct colid_job *j, int from,
                                   int to, int chat);

/* Listens on host:port (port 0: any free one, stored in s->port). */
int colid_http_start(struct colid_server *s, const char *host, int port, char *err, size_t errlen);
/* Stop accepting connections (open ones are served). */
void colid_http_quiesce(struct colid_server *s);
/* Wait (up to timeout_s) for replies of finished jobs to be sent, then
 * close every connection and join their threads. */
void colid_http_stop(struct colid_server *s, double timeout_s);

#endif
