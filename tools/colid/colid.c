/*
 * tools/colid/colid.c — `colid -m MODEL.coli [--host H] [--port P] [engine flags]`:
 * the OpenAI-compatible server (docs/api.md). This file is the process: flags,
 * the engine, the worker, the listener, and an orderly stop.
 *
 * Start:  parse flags -> open the engine (it resolves --numa-bind and runs
 *         this thread on the node before its pool starts; the worker and the
 *         HTTP threads, created after, inherit the CPU affinity) -> print the
 *         binding (coli_engine_numa) -> detect the chat family -> start the
 *         worker -> listen,
 *         printing "colid: listening on http://HOST:PORT" (--port 0: a free
 *         port, which tests read from this line).
 * Stop:   SIGTERM or SIGINT (a handler writes to a self-pipe that main
 *         waits on) -> /health says 503 (the listener stays open while
 *         draining; new generation requests get 503), queued jobs end with
 *         503, the running one finishes within --shutdown-grace seconds (a
 *         second signal cancels it at once) -> the listening socket and the
 *         connections close -> the engine closes (mem/'s tier map writes the
 *         usage file there) -> exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/colid/colid.h"
#include "tools/tools.h"

#define P "colid"

static void help(FILE *f)
{
	fprintf(
	    f,
	    "usage: colid -m MODEL.coli [--host 127.0.0.1] [--port 8080] [options] [engine "
	    "options]\n"
	    "  --host ADDR            numeric IPv4/IPv6 address to listen on (default "
	    "127.0.0.1)\n"
	    "  --port N               TCP port 0..65535 (default 8080; 0: any free port)\n"
	    "  --api-key-file FILE    require 'Authorization: Bearer KEY' on /v1/* (first "
	    "line of FILE)\n"
	    "  --model-name NAME      id shown by /v1/models (default: file name without "
	    ".coli)\n"
	    "  --queue N              requests waiting for the engine before 429, 1..1048576 "
	    "(default 16)\n"
	    "  --max-body-bytes N     larger request bodies get 413, 64..2^40 (default 1048576)\n"
	    "  --max-connections N    simultaneous connections, 1..1048576 (default 64)\n"
	    "  --max-conn-per-ip N    simultaneous connections from one address, 1..1048576 "
	    "(default 16)\n"
	    "  --header-timeout S     seconds a connection has to send a whole request "
	    "(headers and body; from its accept or its previous request's end), 0.1..1e6 "
	    "(default 10)\n"
	    "  --timeout S            idle connection timeout in whole seconds, >= 1 (default "
	    "300)\n"
	    "  --shutdown-grace S     seconds a running request may finish after SIGTERM, "
	    "0..1e9 (default 30)\n"
	    "  --access-log FILE|-    a line per request (time, method, path, status, tokens, "
	    "TTFT, total ms) appended to FILE, or stdout (default: none)\n"
	    "  --draft DRAFT.coli     speculative decoding (--spec) drafts with DRAFT's greedy "
	    "steps (a smaller model with the same tokenizer, the same engine options, one "
	    "sequence) instead of n-grams\n"
	    "  --debug-token-delay-ms N  sleep N ms per generated token, 0..60000 (tests "
	    "only)\n"
	    "  --debug-kv-no-promise 1   admit a request when its prompt fits "
	    "the KV pool, promising it nothing, so a step can run short of blocks (tests "
	    "only)\n\n");
	coli_opts_help(f);
}

static int die(const char *fmt, const char *arg)
{
	fprintf(stderr, "colid: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	return 2;
}

/* The key file's first line, whole (any length), trailing CR/LF/spaces cut. */
static int read_key(const char *path, char **key, size_t *len)
{
	FILE *f = fopen(path, "r");
	ssize_t got;
	size_t cap = 0;
	char *line = NULL;

	if (!f)
		return -errno;
	got = getline(&line, &cap, f);
	fclose(f);
	if (got < 0) {
		free(line);
		return -ENODATA;
	}
	while (got && (line[got - 1] == '\n' || line[got - 1] == '\r' || line[got - 1] == ' '))
		line[--got] = 0;
	if (!got) {
		free(line);
		return -ENODATA;
	}
	*key = line;
	*len = (size_t)got;
	return 0;
}

static void model_id(const char *path, char *out, size_t cap)
{
	const char *b = strrchr(path, '/');
	size_t n;

	b = b ? b + 1 : path;
	n = strlen(b);
	if (n > 5 && !strcmp(b + n - 5, ".coli"))
		n -= 5;
	snprintf(out, cap, "%.*s", (int)n, b);
}

/* SIGINT/SIGTERM land in a self-pipe: a handler, not a blocked mask, because
 * libraries may start threads before main whose masks we do not control, and
 * a signal delivered there would kill the process. */
static int g_sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
	unsigned char c = (unsigned char)sig;
	int saved = errno;

	if (write(g_sig_pipe[1], &c, 1) < 0) {
		/* the pipe is full: enough signals are pending already */
	}
	errno = saved;
}

static int install_signals(void)
{
	struct sigaction sa;

	if (pipe2(g_sig_pipe, O_CLOEXEC | O_NONBLOCK))
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

/* Waits for SIGINT/SIGTERM for up to timeout_s (<0: forever); the signal or 0. */
static int wait_signal(double timeout_s)
{
	struct pollfd p = {.fd = g_sig_pipe[0], .events = POLLIN};
	unsigned char c;

	if (poll(&p, 1, timeout_s < 0 ? -1 : (int)(timeout_s * 1000)) <= 0)
		return 0;
	return read(g_sig_pipe[0], &c, 1) == 1 ? c : 0;
}

static void shutdown_server(struct colid_server *s, double grace_s)
{
	double t0 = colid_now_s();

	/* The listener stays open while the queue drains, so a load balancer's
	 * /health probe sees 503 "stopping" rather than a refused connection;
	 * new generation requests get 503 too (colid_http.c). */
	atomic_store(&s->stopping, 1);
	colid_queue_close(&s->queue);
	while (colid_queue_join(&s->queue, 0.1) == -ETIMEDOUT) {
		if (wait_signal(0)) {
			fprintf(stderr, "colid: second signal: cancelling the running request\n");
			colid_queue_cancel_running(&s->queue);
		} else if (colid_now_s() - t0 > grace_s) {
			fprintf(stderr,
			        "colid: --shutdown-grace %.0f s over: cancelling the "
			        "running request\n",
			        grace_s);
			colid_queue_cancel_running(&s->queue);
			t0 = 1e300; /* once */
		}
	}
	/* Nothing left to cancel: a late signal must not kill the exit path
	 * (LeakSanitizer's stop-the-world at exit changes signal masks). */
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	colid_http_quiesce(s);
	colid_http_stop(s, 10);
}

int main(int argc, char **argv)
{
	static struct colid_server srv; /* large; and signal-free, so static is fine */
	struct tool_engine_args a;
	const char *host = "127.0.0.1", *key_file = NULL, *name = NULL, *access = NULL;
	const char *draft_path = NULL;
	coli_engine_t *draft = NULL;
	int port = 8080, queue = 16, rc, sig;
	int max_conn = 64, timeout_s = 300, delay_ms = 0, no_promise = 0;
	uint64_t max_body = 1 << 20;
	double grace = 30, header_s = 10;
	int per_ip = 16;
	char err[512];

	if (tool_engine_args_init(&a, P))
		return 2;
	for (int i = 1; i < argc;) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		rc = tool_engine_arg(&a, argc, argv, &i);
		if (rc < 0)
			return 2;
		if (rc)
			continue;
		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			help(stdout);
			return 0;
		}
		if (!v)
			return die("%s needs a value (see --help)", o);
		if (!strcmp(o, "--host"))
			host = v;
		else if (!strcmp(o, "--port"))
			bad = tool_int(P, o, v, 0, 65535, &port);
		else if (!strcmp(o, "--api-key-file"))
			key_file = v;
		else if (!strcmp(o, "--model-name"))
			name = v;
		else if (!strcmp(o, "--queue"))
			bad = tool_int(P, o, v, 1, 1 << 20, &queue);
		else if (!strcmp(o, "--max-body-bytes"))
			bad = tool_u64(P, o, v, 64, (uint64_t)1 << 40, &max_body);
		else if (!strcmp(o, "--max-connections"))
			bad = tool_int(P, o, v, 1, 1 << 20, &max_conn);
		else if (!strcmp(o, "--max-conn-per-ip"))
			bad = tool_int(P, o, v, 1, 1 << 20, &per_ip);
		else if (!strcmp(o, "--header-timeout"))
			bad = tool_double(P, o, v, 0.1, 1e6, &header_s);
		else if (!strcmp(o, "--timeout"))
			bad = tool_int(P, o, v, 1, INT_MAX, &timeout_s);
		else if (!strcmp(o, "--shutdown-grace"))
			bad = tool_double(P, o, v, 0, 1e9, &grace);
		else if (!strcmp(o, "--access-log"))
			access = v;
		else if (!strcmp(o, "--draft"))
			draft_path = v;
		else if (!strcmp(o, "--debug-token-delay-ms"))
			bad = tool_int(P, o, v, 0, 60000, &delay_ms);
		else if (!strcmp(o, "--debug-kv-no-promise"))
			bad = tool_int(P, o, v, 0, 1, &no_promise);
		else
			return die("unknown option '%s' (see --help)", o);
		if (bad)
			return 2;
		i += 2;
	}
	if (!a.model) {
		help(stderr);
		return 2;
	}
	srv.max_body = max_body;
	srv.max_conn = max_conn;
	srv.timeout_s = timeout_s;
	srv.max_conn_per_ip = per_ip;
	srv.header_timeout_s = header_s;
	if (key_file && (rc = read_key(key_file, &srv.api_key, &srv.api_key_len)))
		return die("--api-key-file: cannot read a key from '%s' (empty, or unreadable)",
		           key_file);

	pthread_mutex_init(&srv.log_mu, NULL);
	if (access && !strcmp(access, "-"))
		srv.access_log = stdout;
	else if (access && !(srv.access_log = fopen(access, "ae")))
		return die("--access-log: cannot open '%s' for appending", access);
	if (install_signals())
		return die("%s", "cannot install signal handlers");

	/* The engine applies --numa-bind to this thread: the worker and the HTTP
	 * threads started below inherit it. */
	a.opts.parallel_auto = 8; /* --parallel 0: what the memory holds, at most 8 */
	rc = coli_engine_open(a.model, &a.opts, &srv.engine, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "colid: %s\n", err);
		return 1;
	}
	if (draft_path) { /* drafts for one sequence at a time: one slot */
		struct coli_opts d = a.opts;

		d.parallel = 1;
		rc = coli_engine_open(draft_path, &d, &draft, err, sizeof(err));
		if (!rc)
			rc = coli_engine_set_draft(srv.engine, draft, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "colid: --draft '%s': %s\n", draft_path, err);
			coli_engine_close(draft);
			coli_engine_close(srv.engine);
			return 1;
		}
	}
	{
		const char *why;

		coli_engine_numa(srv.engine, &why);
		fprintf(stderr, "colid: numa-bind %s -> %s\n", a.opts.numa_bind, why);
	}
	srv.tok = coli_engine_tokenizer(srv.engine);
	srv.cfg = coli_engine_config(srv.engine);
	srv.ctx = coli_engine_ctx(srv.engine);
	srv.kv_tokens = coli_engine_kv_tokens(srv.engine);
	srv.created = (long)time(NULL);
	coli_chat_template_init(srv.engine, &srv.chat);
	if (name)
		snprintf(srv.model_id, sizeof(srv.model_id), "%s", name);
	else
		model_id(a.model, srv.model_id, sizeof(srv.model_id));
	fprintf(stderr,
	        "colid: model %s (%s), context %d tokens, %d sequence%s at once (--parallel), "
	        "KV pool %d tokens (%d blocks), chat template %s (family %s%s%s%s)\n",
	        srv.model_id, coli_arch_name(srv.cfg->arch), srv.ctx, coli_engine_n_seq(srv.engine),
	        coli_engine_n_seq(srv.engine) > 1 ? "s" : "", srv.kv_tokens, srv.kv_tokens / 32,
	        coli_chat_renderer_name(&srv.chat), coli_chat_family_name(srv.chat.family),
	        srv.chat.from_template ? "" : ", detected from the tokenizer",
	        srv.chat.jinja ? "" : "; built-in renderer: ",
	        srv.chat.jinja ? "" : srv.chat.jinja_why);
	if (coli_engine_n_seq(srv.engine) > coli_engine_ubatch(srv.engine))
		fprintf(stderr,
		        "colid: --parallel %d but %d rows a step (--ubatch, --ctx): at most %d "
		        "sequences run at once, the others wait in the queue\n",
		        coli_engine_n_seq(srv.engine), coli_engine_ubatch(srv.engine),
		        coli_engine_ubatch(srv.engine));
	colid_metrics_init(&srv.metrics);
	if ((rc = colid_queue_init(&srv.queue, queue, srv.engine, &srv.metrics)) ||
	    (srv.queue.delay_us = (unsigned)delay_ms * 1000u, 0) ||
	    (srv.queue.no_promise = no_promise, 0) || (rc = colid_queue_start(&srv.queue))) {
		fprintf(stderr, "colid: cannot start the worker: %s\n", strerror(-rc));
		goto out_engine;
	}
	rc = colid_http_start(&srv, host, port, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "colid: %s\n", err);
		colid_queue_close(&srv.queue);
		colid_queue_join(&srv.queue, 1e9);
		goto out_queue;
	}
	fprintf(stderr, "colid: listening on http://%s%s%s:%u%s\n", strchr(host, ':') ? "[" : "",
	        host, strchr(host, ':') ? "]" : "", srv.port,
	        srv.api_key ? " (API key required)" : "");

	while (!(sig = wait_signal(-1)))
		;
	fprintf(stderr, "colid: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
	shutdown_server(&srv, grace);
	fprintf(stderr,
	        "colid: stopped after %llu generations; slow connections shut down: %llu past "
	        "--header-timeout, %llu for headroom\n",
	        (unsigned long long)srv.metrics.jobs, (unsigned long long)srv.guard.timed_out,
	        (unsigned long long)srv.guard.evicted);
out_queue:
	colid_queue_free(&srv.queue);
out_engine:
	coli_chat_template_free(&srv.chat);
	coli_engine_close(srv.engine); /* mem/'s tier map saves the usage file here */
	coli_engine_close(draft);
	free(srv.api_key);
	if (srv.access_log && srv.access_log != stdout)
		fclose(srv.access_log);
	return rc ? 1 : 0;
}
