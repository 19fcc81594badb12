/*
 * tools/bench/serve/bench_serve.h — what the files of `coli bench serve` share
 * (private to them): tools/bench/serve/bench_serve.c (options, the load, the clients)
 * hands tools/bench/serve/bench_serve_report.c (figures, medians, ratios, the report)
 * each round's request results; tools/bench/serve/bench_serve_colid.c starts and stops
 * the colid of -m.
 */
#ifndef COLI_TOOLS_BENCH_SERVE_H
#define COLI_TOOLS_BENCH_SERVE_H

#include <stdint.h>
#include <sys/types.h>

#define BENCH_SERVE_ARMS 8

struct range {
	int lo, hi;
};

struct opts {
	const char *url;
	char host[256], port[16], base[256]; /* from the URL */
	const char *model_name;
	const char *key_file;
	char *key;
	const char *colid; /* --colid: the colid -m starts (NULL: the one next to coli) */
	int clients;       /* the largest of arms[] (colid's queue is sized by it) */
	int arms[BENCH_SERVE_ARMS], n_arms; /* --clients N[,M...]: one arm each */
	int requests, warmup, rounds, id_range, json;
	int token_ids; /* --token-ids: -1 auto (until resolved), 0 off, 1 on */
	double seconds, shared, timeout_s;
	int prefix_tokens;
	struct range prompt, out;
	uint64_t seed;
};

/* One request's outcome (tools/bench/serve/bench_serve.c fills it). */
struct result {
	int ok;
	int status;
	int tokens, chunks, usage_tokens; /* usage_tokens: -1 when not sent */
	int id_chunks, id_tokens;         /* events with token ids, and the ids */
	int outs;                         /* events timed: with ids (or text, without ids) */
	double start_s, ttft_s, end_s;
	double *gaps; /* [n_gaps] seconds between tokens: an event's gap since the
	               * previous one, spread over its ids (one per text event) */
	int n_gaps, cap_gaps;
	double last_s;
	int done_seen;
	char why[160];
};

/* A round's figures. */
struct figures {
	int requests, errors;
	long long tokens, chunks; /* chunks: text-bearing events */
	long long id_chunks;      /* events carrying token ids */
	double wall_s, req_s, tok_s;
	double ttft_p50, ttft_p99, itl_p50, itl_p99, e2e_p50, e2e_p99;
	double queue_s; /* -1: the server does not say */
	const char *tokens_by;
	char first_error[160];
};

/* The colid that -m starts (tools/bench/serve/bench_serve_colid.c). */
struct bench_serve_daemon {
	pid_t pid;    /* 0: none */
	char log[64]; /* its stdout and stderr */
};
/* Starts colid with eargv[n_eargs] (engine options), --port 0 and --queue
 * clients + 16; sets o's host and port from its "listening on" line. */
int bench_serve_daemon_start(struct bench_serve_daemon *d, char **eargv, int n_eargs, int clients,
                             struct opts *o);
/* Stops it (or says how it ended during the run, with its log's tail). */
void bench_serve_daemon_stop(struct bench_serve_daemon *d);
/* The last 4 KiB of the file at path, on stderr. */
void bench_serve_log_tail(const char *path);

/* A round's figures from its results r[n] (sorts their gap arrays' copies). */
void bench_serve_figures(const struct result *r, int n, struct figures *f);
/* f[round * o->n_arms + arm]: every arm's report, then the ratios of the
 * later arms to the first; JSON on stdout with json, else text. */
void bench_serve_report(const struct opts *o, const struct figures *f, int rounds, int json);

#endif
