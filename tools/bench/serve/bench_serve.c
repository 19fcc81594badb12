/*
 * tools/bench/serve/bench_serve.c — `coli bench serve`: N concurrent clients against an
 * OpenAI-compatible server, timed from the client's side.
 *
 *   coli bench serve -m MODEL.coli [engine options]   starts colid itself
 *   coli bench serve --url http://HOST:PORT            any such server
 *
 * The server: with -m the bench runs colid (tools/bench/serve/bench_serve_colid.c:
 * next to this coli binary, or --colid PATH) with --port 0 and the engine options
 * given here, reads the port from its "listening on" line (its log goes to
 * a temporary file, printed when it fails), and stops it with SIGTERM at
 * the end. The queue is sized clients + 16 so that a run measures waiting,
 * not 429s.
 *
 * The load: request i (0-based) is a pure function of (--seed, i): a prompt
 * of A..B tokens and max_tokens C..D (uniform), and with probability
 * --shared-prefix P its first min(K, length) tokens are the run's common
 * prefix (--prefix-tokens K). Prompts are token ids, drawn uniformly from
 * [1, --id-range) (default 1000, inside every vocabulary this repo meets),
 * sent as /v1/completions {"prompt": [ids], "stream": true,
 * "stream_options": {"include_usage": true}}, so prompt lengths are exact
 * whatever the tokenizer. Clients are threads with blocking sockets, one
 * connection per request (Connection: close), taking the next index from a
 * shared counter until --requests R are taken or --seconds S have passed.
 * Round r of arm a takes the indexes from (r * arms + a) * 2^21: fresh
 * prompts in every round and arm, the same load in each.
 *
 * Token ids (--token-ids auto|on|off; auto: on when the server is colid,
 * the one -m started or one whose /v1/models says owned_by "coli"): the
 * request asks "return_token_ids": true, and each chunk's
 * choices[0].token_ids says which tokens it carries, text or not (a model
 * without a tokenizer streams none). Any other server is sent the plain
 * OpenAI request (--token-ids on asks it anyway: vLLM takes the field).
 *
 * What a request records: TTFT = send to the first event carrying tokens
 * (token ids when the event has the field, else text); inter-token latency
 * per token: an event's gap since the previous one, spread evenly over the
 * k ids it carries (k gaps of gap / k; a first event's other tokens none),
 * or one gap per text-bearing event without ids (a server that packs
 * several tokens in one chunk then shows fewer, longer gaps); output tokens
 * = usage.completion_tokens of the last chunk when the server sends it,
 * else the ids, else the count of text-bearing chunks ("tokens_by" says
 * which). An error is any status other than 200, a malformed response, an
 * "error" object in the stream, or a stream without [DONE]. A server that
 * streams neither text nor ids (colid serving a model without a tokenizer,
 * --token-ids off) gives TTFT = the whole request and no ITL; the report
 * says so.
 *
 * Figures per round (tools/bench/serve/bench_serve_report.c): requests/s and output
 * tok/s over the round's wall time (first send to last byte), TTFT, ITL and
 * end-to-end latency p50/p99 (nearest rank), and queue time, the mean of
 * what colid's /metrics counted during the round
 * (coli_queue_wait_seconds_total over coli_generations_total; absent for a
 * server without them). --warmup W requests run first, untimed; with
 * --rounds N every figure is the median over rounds with [min..max]
 * (docs/perf/README.md, "The method").
 *
 * Arms: --clients 1,8 runs one arm per count, interleaved in every round
 * (1 8 1 8 ...), and gives for each later arm the ratios of its output
 * tok/s, TTFT p99 and ITL p99 to the first arm's, the median of the rounds'
 * own ratios (a host's drift cancels within a round): issue 39's targets,
 * 8 streams against one, in one run.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "tools/bench/bench.h"
#include "tools/bench/serve/bench_serve.h"
#include "tools/tools.h"

#define P "coli bench serve"

struct run {
	struct opts *o;
	int *prefix; /* [prefix_tokens] */
	atomic_int next;
	atomic_int ran;   /* requests run (the first `ran` indexes: taken before the stop) */
	int base, limit;  /* request indexes [base, limit); r[i - base] */
	double deadline;  /* 0: none */
	struct result *r; /* [cap] */
	int cap;
	pthread_mutex_t mu;
};

/* ---- the load: request i as a function of (seed, i) ---- */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int draw(uint64_t *s, struct range r)
{
	return r.lo + (int)(splitmix(s) % (uint64_t)(r.hi - r.lo + 1));
}

/* The body of request i, malloc'd. */
static char *request_body(const struct run *ru, int i)
{
	const struct opts *o = ru->o;
	uint64_t s = o->seed * 0x2545f4914f6cdd1dull + (uint64_t)i;
	int n = draw(&s, o->prompt), max = draw(&s, o->out);
	int shared = (double)(splitmix(&s) >> 11) / 9007199254740992.0 < o->shared;
	json_t *ids = json_array(), *b;
	char *txt;

	for (int t = 0; t < n; t++)
		json_array_append_new(
		    ids, json_integer(shared && t < o->prefix_tokens
		                          ? ru->prefix[t]
		                          : 1 + (int)(splitmix(&s) % (uint64_t)(o->id_range - 1))));
	b = json_pack("{s:s,s:o,s:i,s:b,s:{s:b},s:I}", "model", o->model_name ? o->model_name : "",
	              "prompt", ids, "max_tokens", max, "stream", 1, "stream_options",
	              "include_usage", 1, "seed", (json_int_t)(s >> 1 & 0x7fffffff));
	if (b && o->token_ids > 0)
		json_object_set_new(b, "return_token_ids", json_true());
	txt = b ? json_dumps(b, JSON_COMPACT) : NULL;
	json_decref(b);
	return txt;
}

/* ---- HTTP over a blocking socket ---- */

static int dial(const struct opts *o)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai, *a;
	int fd = -1, rc = getaddrinfo(o->host, o->port, &hints, &ai);

	if (rc)
		return -EHOSTUNREACH;
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0)
			continue;
		if (!connect(fd, a->ai_addr, a->ai_addrlen)) {
			struct timeval tv = {
			    .tv_sec = (time_t)o->timeout_s,
			    .tv_usec = (long)((o->timeout_s - (time_t)o->timeout_s) * 1e6)};

			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
			break;
		}
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd < 0 ? -ECONNREFUSED : fd;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One request and its whole response through h. 0, or -errno with h's
 * error or errno's name the reason. */
static int exchange(const struct opts *o, const char *method, const char *path, const char *body,
                    struct bench_http *h)
{
	char head[1024], buf[16384];
	int fd = dial(o), rc, n;

	if (fd < 0)
		return fd;
	n = snprintf(head, sizeof(head),
	             "%s %s%s HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n"
	             "Accept: text/event-stream, application/json\r\n%s%s%s"
	             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
	             method, o->base, path, o->host, o->port,
	             o->key ? "Authorization: Bearer " : "", o->key ? o->key : "",
	             o->key ? "\r\n" : "", body ? strlen(body) : 0);
	rc = send_all(fd, head, (size_t)n);
	if (!rc && body)
		rc = send_all(fd, body, strlen(body));
	while (!rc) {
		ssize_t got = recv(fd, buf, sizeof(buf), 0);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			rc = errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
			break;
		}
		if (got == 0) {
			rc = bench_http_eof(h);
			break;
		}
		rc = bench_http_feed(h, buf, (size_t)got);
		if (rc == 1) {
			rc = 0;
			break;
		}
	}
	close(fd);
	return rc;
}

/* ---- one streamed completion ---- */

static int on_event(void *arg, const char *data, size_t len)
{
	struct result *r = arg;
	double now = bench_now_s();
	json_t *j, *ch, *u, *t, *ids;
	json_error_t je;
	int k;

	(void)len;
	if (!strcmp(data, "[DONE]")) {
		r->done_seen = 1;
		return 0;
	}
	j = json_loads(data, JSON_ALLOW_NUL, &je);
	if (!j) {
		snprintf(r->why, sizeof(r->why), "an event that is not JSON (%.60s): %.60s",
		         je.text, data);
		return 1;
	}
	if (json_object_get(j, "error")) {
		t = json_object_get(json_object_get(j, "error"), "message");
		snprintf(r->why, sizeof(r->why), "error in the stream: %s",
		         json_is_string(t) ? json_string_value(t) : "?");
		json_decref(j);
		return 1;
	}
	ch = json_array_get(json_object_get(j, "choices"), 0);
	t = json_object_get(ch, "text");
	ids = json_object_get(ch, "token_ids");
	if (!t) /* a chat server's chunk */
		t = json_object_get(json_object_get(ch, "delta"), "content");
	k = json_is_array(ids) ? (int)json_array_size(ids) : 0;
	r->chunks += json_is_string(t) && json_string_length(t) > 0;
	r->id_chunks += k > 0;
	r->id_tokens += k;
	/* timed: an event with ids, k tokens (a server that sends ids), else
	 * one with text, as one */
	if (!json_is_array(ids))
		k = json_is_string(t) && json_string_length(t) > 0;
	if (k > 0) {
		if (!r->outs++)
			r->ttft_s = now - r->start_s; /* its other tokens: no gap */
		else
			for (int g = 0; g < k && r->n_gaps < r->cap_gaps; g++)
				r->gaps[r->n_gaps++] = (now - r->last_s) / k;
		r->last_s = now;
	}
	u = json_object_get(j, "usage");
	if (json_is_object(u) && json_is_integer(json_object_get(u, "completion_tokens")))
		r->usage_tokens = (int)json_integer_value(json_object_get(u, "completion_tokens"));
	json_decref(j);
	return 0;
}

static void one_request(struct run *ru, int i, struct result *r)
{
	struct bench_http *h = malloc(sizeof(*h));
	char *body = request_body(ru, i);
	int rc;

	memset(r, 0, sizeof(*r));
	r->usage_tokens = -1;
	r->cap_gaps = ru->o->out.hi + 1;
	r->gaps = malloc(sizeof(double) * (size_t)r->cap_gaps);
	if (!h || !body || !r->gaps) {
		snprintf(r->why, sizeof(r->why), "out of memory");
		goto out;
	}
	bench_http_init(h, on_event, r);
	r->start_s = bench_now_s();
	rc = exchange(ru->o, "POST", "/v1/completions", body, h);
	r->end_s = bench_now_s();
	r->status = h->status;
	if (rc && !r->why[0])
		snprintf(r->why, sizeof(r->why), "%s",
		         rc == -EPROTO      ? h->error
		         : rc == -ECANCELED ? "stopped"
		                            : strerror(-rc));
	else if (!rc && h->status != 200)
		snprintf(r->why, sizeof(r->why), "HTTP %d: %.120s", h->status, h->body);
	else if (!rc && !r->done_seen)
		snprintf(r->why, sizeof(r->why), "the stream ended without [DONE]");
	r->ok = !r->why[0];
	r->tokens = r->usage_tokens >= 0 ? r->usage_tokens
	            : r->id_chunks       ? r->id_tokens
	                                 : r->chunks;
out:
	free(body);
	free(h);
}

static void *client_main(void *arg)
{
	struct run *ru = arg;

	for (;;) {
		int i = atomic_fetch_add(&ru->next, 1);

		if (i >= ru->limit || (ru->deadline && bench_now_s() >= ru->deadline))
			break;
		i -= ru->base;
		{ /* --seconds: grow the results */
			pthread_mutex_lock(&ru->mu);
			while (i >= ru->cap) {
				int cap = ru->cap * 2;
				struct result *r = realloc(ru->r, sizeof(*r) * (size_t)cap);

				if (!r) {
					pthread_mutex_unlock(&ru->mu);
					return NULL;
				}
				memset(r + ru->cap, 0, sizeof(*r) * (size_t)(cap - ru->cap));
				ru->r = r;
				ru->cap = cap;
			}
			pthread_mutex_unlock(&ru->mu);
		}
		struct result tmp;

		one_request(ru, ru->base + i, &tmp);
		pthread_mutex_lock(&ru->mu);
		ru->r[i] = tmp;
		pthread_mutex_unlock(&ru->mu);
		atomic_fetch_add(&ru->ran, 1);
	}
	return NULL;
}

/* colid's queue counters from /metrics: 0, or -ENOENT without them. */
static int server_queue(const struct opts *o, double *wait_s, double *jobs)
{
	struct bench_http *h = malloc(sizeof(*h));
	const char *a, *b;
	int rc = -ENOMEM;

	if (!h)
		return rc;
	bench_http_init(h, NULL, NULL);
	rc = exchange(o, "GET", "/metrics", NULL, h);
	/* both lines lie within the first BENCH_HTTP_BODY bytes kept */
	a = strstr(h->body, "\ncoli_queue_wait_seconds_total ");
	b = strstr(h->body, "\ncoli_generations_total ");
	if (rc || h->status != 200 || !a || !b)
		rc = -ENOENT;
	else {
		*wait_s = strtod(a + 31, NULL);
		*jobs = strtod(b + 24, NULL);
	}
	free(h);
	return rc;
}

/* The first model id of /v1/models, malloc'd, or NULL (said why unless
 * quiet); *colid: 1 when its owner is "coli" (colid's /v1/models). */
static char *first_model(const struct opts *o, int quiet, int *colid)
{
	struct bench_http *h = malloc(sizeof(*h));
	char *id = NULL;
	json_t *j;
	int rc;

	*colid = 0;
	if (!h)
		return NULL;
	bench_http_init(h, NULL, NULL);
	rc = exchange(o, "GET", "/v1/models", NULL, h);
	if (rc && !quiet)
		tool_err("bench serve", "GET %s:%s%s/v1/models: %s", o->host, o->port, o->base,
		         rc == -EPROTO ? h->error : strerror(-rc));
	else if (h->status != 200 && !quiet)
		tool_err("bench serve", "GET /v1/models: HTTP %d %.200s", h->status, h->body);
	if (!rc && h->status == 200 && (j = json_loads(h->body, 0, NULL))) {
		json_t *m = json_array_get(json_object_get(j, "data"), 0);
		const char *owner = json_string_value(json_object_get(m, "owned_by"));

		if (json_is_string(json_object_get(m, "id")))
			id = strdup(json_string_value(json_object_get(m, "id")));
		*colid = owner && !strcmp(owner, "coli");
		json_decref(j);
	}
	free(h);
	return id;
}

/* ---- one round ---- */

static int run_round(struct run *ru, int clients, int base, int count, double seconds,
                     struct figures *f)
{
	const struct opts *o = ru->o;
	pthread_t *th = calloc((size_t)clients, sizeof(*th));
	double w0 = 0, j0 = 0, w1, j1;
	int have_q = !server_queue(o, &w0, &j0), n, started = 0;

	if (!th)
		return -ENOMEM;
	ru->cap = count ? count : 1024;
	ru->r = calloc((size_t)ru->cap, sizeof(*ru->r));
	if (!ru->r) {
		free(th);
		return -ENOMEM;
	}
	atomic_store(&ru->next, base);
	atomic_store(&ru->ran, 0);
	ru->base = base;
	ru->limit = count ? base + count : INT_MAX;
	ru->deadline = seconds > 0 ? bench_now_s() + seconds : 0;
	for (int c = 0; c < clients; c++)
		started += !pthread_create(&th[c], NULL, client_main, ru);
	for (int c = 0; c < started; c++)
		pthread_join(th[c], NULL);
	free(th);
	n = atomic_load(&ru->ran);
	bench_serve_figures(ru->r, n, f);
	f->queue_s = -1;
	if (have_q && !server_queue(o, &w1, &j1) && j1 > j0)
		f->queue_s = (w1 - w0) / (j1 - j0);
	for (int i = 0; i < ru->cap; i++)
		free(ru->r[i].gaps);
	free(ru->r);
	ru->r = NULL;
	return started ? 0 : -EAGAIN;
}

/* ---- options ---- */

static void help(FILE *f)
{
	fprintf(f,
	        "usage: coli bench serve (-m MODEL.coli [engine options] | --url URL) [options]\n"
	        "  --url URL             an OpenAI-compatible server, http://HOST:PORT[/PREFIX]\n"
	        "  --colid PATH          the colid -m starts (default: the one next to coli)\n"
	        "  --api-key-file FILE   send 'Authorization: Bearer' with FILE's first line\n"
	        "  --model-name NAME     the request's model (default: the first of /v1/models)\n"
	        "  --clients N[,M...]    concurrent clients, 1..1024 (default 4); several: one\n"
	        "                        arm each, interleaved in every round, with the ratios\n"
	        "                        of tok/s, TTFT p99 and ITL p99 to the first arm's\n"
	        "  --requests R          requests per round (default 32)\n"
	        "  --seconds S           instead: send for S seconds per round\n"
	        "  --prompt-tokens A[:B] prompt length, uniform in A..B (default 64)\n"
	        "  --max-tokens C[:D]    max_tokens, uniform in C..D (default 32)\n"
	        "  --shared-prefix P     share of requests starting with the common prefix, "
	        "0..1 (default 0)\n"
	        "  --prefix-tokens K     its length (default 32)\n"
	        "  --id-range N          prompt token ids drawn from [1, N) (default 1000)\n"
	        "  --seed N              the load's seed (default 1)\n"
	        "  --warmup W            untimed requests first (default 1)\n"
	        "  --rounds N            timed rounds; figures are medians [min..max] (default 1)\n"
	        "  --timeout S           a request with no byte for S seconds fails (default 600)\n"
	        "  --token-ids auto|on|off  ask return_token_ids and time tokens by the ids of\n"
	        "                        each chunk (auto: when the server is colid)\n"
	        "  --json                one JSON object on stdout\n"
	        "Engine options (coli --help) go to the colid started with -m.\n");
}

static int parse_range(const char *opt, const char *v, int lo, struct range *r)
{
	char a[32];
	const char *colon = strchr(v, ':');
	size_t n = colon ? (size_t)(colon - v) : strlen(v);

	if (n >= sizeof(a))
		return tool_err("bench serve", "%s '%s': expected A or A:B", opt, v), -1;
	memcpy(a, v, n);
	a[n] = 0;
	if (tool_int(P, opt, a, lo, 1 << 20, &r->lo))
		return -1;
	r->hi = r->lo;
	if (colon && tool_int(P, opt, colon + 1, r->lo, 1 << 20, &r->hi))
		return -1;
	return 0;
}

/* --clients N[,M...]: 1..1024 each, at most BENCH_SERVE_ARMS. */
static int parse_arms(const char *opt, const char *v, struct opts *o)
{
	char one[32];

	o->n_arms = 0;
	o->clients = 0;
	while (*v) {
		size_t n = strcspn(v, ",");

		if (n >= sizeof(one) || o->n_arms == BENCH_SERVE_ARMS)
			return tool_err("bench serve", "%s: at most %d counts of 1..1024", opt,
			                BENCH_SERVE_ARMS),
			       -1;
		memcpy(one, v, n);
		one[n] = 0;
		if (tool_int(P, opt, one, 1, 1024, &o->arms[o->n_arms]))
			return -1;
		if (o->arms[o->n_arms] > o->clients)
			o->clients = o->arms[o->n_arms];
		o->n_arms++;
		v += n + (v[n] == ',');
	}
	return o->n_arms ? 0 : (tool_int(P, opt, "", 1, 1024, &o->clients), -1);
}

static int parse_url(struct opts *o)
{
	const char *p = o->url, *slash, *colon;

	if (strncmp(p, "http://", 7))
		return tool_err("bench serve", "--url '%s': only http:// URLs", o->url), -1;
	p += 7;
	slash = strchr(p, '/');
	if (!slash)
		slash = p + strlen(p);
	colon = memchr(p, ':', (size_t)(slash - p));
	if (*p == '[') { /* [v6]:port */
		const char *rb = memchr(p, ']', (size_t)(slash - p));

		if (!rb)
			return tool_err("bench serve", "--url '%s': no ']'", o->url), -1;
		snprintf(o->host, sizeof(o->host), "%.*s", (int)(rb - p - 1), p + 1);
		colon = rb[1] == ':' ? rb + 1 : NULL;
	} else {
		snprintf(o->host, sizeof(o->host), "%.*s", (int)((colon ? colon : slash) - p), p);
	}
	snprintf(o->port, sizeof(o->port), "%.*s", colon ? (int)(slash - colon - 1) : 2,
	         colon ? colon + 1 : "80");
	snprintf(o->base, sizeof(o->base), "%s", slash);
	while (o->base[0] && o->base[strlen(o->base) - 1] == '/')
		o->base[strlen(o->base) - 1] = 0;
	/* a URL ending in /v1 means the same server */
	if (strlen(o->base) >= 3 && !strcmp(o->base + strlen(o->base) - 3, "/v1"))
		o->base[strlen(o->base) - 3] = 0;
	return 0;
}

int bench_serve_main(int argc, char **argv)
{
	struct opts o = {.clients = 4,
	                 .arms = {4},
	                 .n_arms = 1,
	                 .requests = 32,
	                 .warmup = 1,
	                 .rounds = 1,
	                 .id_range = 1000,
	                 .prefix_tokens = 32,
	                 .prompt = {64, 64},
	                 .out = {32, 32},
	                 .seed = 1,
	                 .timeout_s = 600,
	                 .token_ids = -1};
	struct tool_engine_args ea;
	struct bench_serve_daemon d = {0};
	struct run ru = {.o = &o};
	struct figures *f = NULL;
	char **eargv = calloc((size_t)argc + 1, sizeof(char *));
	int n_eargs = 0, rc = 2, colid = 0; /* 2: a usage error, until the arguments are read */
	char *found = NULL;
	uint64_t s;

	if (!eargv || tool_engine_args_init(&ea, P))
		goto out;
	for (int i = 1; i < argc;) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int at = i, bad = 0, r;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			help(stdout);
			free(eargv);
			return 0;
		}
		if (!strcmp(a, "--json")) {
			o.json = 1;
			i++;
			continue;
		}
		r = tool_engine_arg(&ea, argc, argv, &i);
		if (r < 0)
			goto out;
		if (r) { /* for colid, as given */
			while (at < i)
				eargv[n_eargs++] = argv[at++];
			continue;
		}
		if (!v) {
			tool_err("bench serve", "%s needs a value (see --help)", a);
			goto out;
		}
		if (!strcmp(a, "--url"))
			o.url = v;
		else if (!strcmp(a, "--colid"))
			o.colid = v;
		else if (!strcmp(a, "--model-name"))
			o.model_name = v;
		else if (!strcmp(a, "--api-key-file"))
			o.key_file = v;
		else if (!strcmp(a, "--clients"))
			bad = parse_arms(a, v, &o);
		else if (!strcmp(a, "--requests"))
			bad = tool_int(P, a, v, 1, 1 << 24, &o.requests);
		else if (!strcmp(a, "--seconds"))
			bad = tool_double(P, a, v, 0.001, 1e6, &o.seconds);
		else if (!strcmp(a, "--prompt-tokens"))
			bad = parse_range(a, v, 1, &o.prompt);
		else if (!strcmp(a, "--max-tokens"))
			bad = parse_range(a, v, 1, &o.out);
		else if (!strcmp(a, "--shared-prefix"))
			bad = tool_double(P, a, v, 0, 1, &o.shared);
		else if (!strcmp(a, "--prefix-tokens"))
			bad = tool_int(P, a, v, 1, 1 << 20, &o.prefix_tokens);
		else if (!strcmp(a, "--id-range"))
			bad = tool_int(P, a, v, 2, INT_MAX, &o.id_range);
		else if (!strcmp(a, "--seed"))
			bad = tool_u64(P, a, v, 0, UINT64_MAX, &o.seed);
		else if (!strcmp(a, "--warmup"))
			bad = tool_int(P, a, v, 0, 1 << 20, &o.warmup);
		else if (!strcmp(a, "--timeout"))
			bad = tool_double(P, a, v, 0.001, 1e6, &o.timeout_s);
		else if (!strcmp(a, "--rounds"))
			bad = tool_int(P, a, v, 1, 64, &o.rounds);
		else if (!strcmp(a, "--token-ids")) {
			o.token_ids = !strcmp(v, "auto") ? -1 : !strcmp(v, "on") ? 1 : 0;
			if (strcmp(v, "auto") && strcmp(v, "on") && strcmp(v, "off")) {
				tool_err("bench serve",
				         "--token-ids '%s': expected auto, on or off", v);
				goto out;
			}
		} else {
			tool_err("bench serve", "unknown option '%s' (see --help)", a);
			goto out;
		}
		if (bad)
			goto out;
		i += 2;
	}
	if (!!o.url == !!ea.model) {
		help(stderr);
		tool_err("bench serve", "give one of -m MODEL.coli and --url URL");
		goto out;
	}
	if (o.url && (n_eargs > 0 || o.colid)) {
		tool_err("bench serve", "%s go%s with -m, not with --url",
		         o.colid ? "--colid" : "engine options", o.colid ? "es" : "");
		goto out;
	}
	if (o.key_file) {
		FILE *kf = fopen(o.key_file, "r");
		size_t cap = 0;
		ssize_t got = kf ? getline(&o.key, &cap, kf) : -1;

		if (kf)
			fclose(kf);
		while (got > 0 && (o.key[got - 1] == '\n' || o.key[got - 1] == '\r'))
			o.key[--got] = 0;
		if (got <= 0) {
			tool_err("bench serve", "--api-key-file: cannot read '%s'", o.key_file);
			goto out;
		}
	}
	rc = 1; /* the run's failures from here on */
	signal(SIGPIPE, SIG_IGN);
	if (o.url ? parse_url(&o) : bench_serve_daemon_start(&d, eargv, n_eargs, o.clients, &o))
		goto out;
	if (!o.model_name && !(o.model_name = found = first_model(&o, 0, &colid))) {
		tool_err("bench serve", "no model id from /v1/models; pass --model-name NAME");
		goto out;
	}
	if (o.token_ids < 0 && o.url && o.model_name != found) /* (no answer: not colid) */
		free(first_model(&o, 1, &colid));
	if (o.token_ids < 0) /* colid: the one started here, or one that says so */
		o.token_ids = !o.url || colid;
	ru.prefix = malloc(sizeof(int) * (size_t)o.prefix_tokens);
	f = calloc((size_t)(o.rounds * o.n_arms), sizeof(*f));
	if (!ru.prefix || !f)
		goto out;
	s = o.seed ^ 0x5bd1e995u;
	for (int t = 0; t < o.prefix_tokens; t++)
		ru.prefix[t] = 1 + (int)(splitmix(&s) % (uint64_t)(o.id_range - 1));
	pthread_mutex_init(&ru.mu, NULL);
	if (o.warmup) { /* indexes past every round's, so the timed prompts are fresh */
		struct figures w;

		if (run_round(&ru, o.arms[0], 1 << 30, o.warmup, 0, &w))
			goto out;
		if (w.errors) {
			tool_err("bench serve", "warm-up request failed: %s", w.first_error);
			goto out;
		}
	}
	/* arms interleaved: A B A B ...; each round of each arm fresh requests (its own
	 * 2^21 indexes, 64 rounds x 8 arms below the warm-up's: a prefix cache sees
	 * only the shared prefix again, not an earlier round's or arm's prompts) */
	for (int r = 0; r < o.rounds; r++)
		for (int a = 0; a < o.n_arms; a++)
			if (run_round(&ru, o.arms[a], (r * o.n_arms + a) << 21,
			              o.seconds > 0 ? 0 : o.requests, o.seconds,
			              &f[r * o.n_arms + a]))
				goto out;
	bench_serve_report(&o, f, o.rounds, o.json);
	rc = 0;
	for (int r = 0; r < o.rounds * o.n_arms; r++)
		rc |= f[r].errors > 0;
	if (rc && !o.url && d.log[0]) { /* what colid said about them */
		tool_err("bench serve", "requests failed; colid's log:");
		bench_serve_log_tail(d.log);
	}
out:
	bench_serve_daemon_stop(&d);
	free(f);
	free(ru.prefix);
	free(eargv);
	free(o.key);
	free(found);
	return rc;
}
