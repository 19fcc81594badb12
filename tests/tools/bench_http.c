/*
 * tests/tools/bench_http.c — `coli bench serve`'s response reader
 * (tools/bench/serve/bench_serve_http.c, included: the unit under test), by round trip:
 * random event payloads are written as a server-sent event stream (LF or
 * CRLF lines, a payload with a newline written as two data: lines, comments
 * and event:/id: fields between), framed chunked (random chunk sizes, hex in
 * either case, extensions, a trailer), by Content-Length or to the close,
 * under a status line and headers in random case, then fed in random
 * pieces. The events read must be the payloads in order, the status the one
 * written, the response complete exactly at its end. Then the refusals: a
 * body cut short, a chunk size that is not hex, a chunk without its CRLF, a
 * status line that is not HTTP/1.x, an oversized event.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/serve/bench_serve_http.c"

#define N_EV 40
static char g_ev[N_EV][300];
static size_t g_got;
static int g_bad;

static uint64_t g_rng = 0x1234567;
static unsigned rnd(unsigned n)
{
	g_rng ^= g_rng << 13;
	g_rng ^= g_rng >> 7;
	g_rng ^= g_rng << 17;
	return (unsigned)(g_rng % n);
}

static int on_ev(void *arg, const char *d, size_t len)
{
	(void)arg;
	if (g_got >= N_EV || strlen(g_ev[g_got]) != len || memcmp(g_ev[g_got], d, len)) {
		fprintf(stderr, "event %zu: got '%.*s', want '%s'\n", g_got, (int)len, d,
		        g_got < N_EV ? g_ev[g_got] : "(none)");
		g_bad = 1;
	}
	g_got++;
	return 0;
}

struct buf {
	char p[1 << 17];
	size_t n;
};
static void put(struct buf *b, const char *s, size_t n)
{
	memcpy(b->p + b->n, s, n);
	b->n += n;
}
static void puts_(struct buf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* Feeds b in random pieces; 0 when the reader saw exactly the events and
 * the status, complete at the end. */
static int feed(const struct buf *b, int status, int to_eof, size_t n_ev)
{
	static struct bench_http h;
	size_t i = 0;
	int rc = 0;

	g_got = 0;
	g_bad = 0;
	bench_http_init(&h, on_ev, NULL);
	while (i < b->n && rc == 0) {
		size_t k = 1 + rnd(rnd(4) ? 7 : 3000);

		if (k > b->n - i)
			k = b->n - i;
		rc = bench_http_feed(&h, b->p + i, k);
		i += k;
	}
	if (to_eof && rc == 0)
		rc = bench_http_eof(&h) ? -1 : 1;
	if (rc != 1 || i != b->n || h.status != status || g_got != n_ev || g_bad) {
		fprintf(stderr, "rc %d (%s) at %zu/%zu, status %d, %zu events of %zu\n", rc,
		        h.error ? h.error : "", i, b->n, h.status, g_got, n_ev);
		return 1;
	}
	return 0;
}

static int expect_error(const char *resp, int eof)
{
	static struct bench_http h;
	int rc;

	bench_http_init(&h, NULL, NULL);
	rc = bench_http_feed(&h, resp, strlen(resp));
	if (rc == 0 && eof)
		rc = bench_http_eof(&h);
	if (rc != -EPROTO || !h.error) {
		fprintf(stderr, "not refused (rc %d): %s\n", rc, resp);
		return 1;
	}
	return 0;
}

int main(void)
{
	static struct buf body, resp;
	int fails = 0;

	for (int round = 0; round < 300; round++) {
		int framing = round % 3, crlf = rnd(2), status = rnd(4) ? 200 : rnd(8) ? 201 + (int)rnd(399) : 100;
		const char *nl = crlf ? "\r\n" : "\n";
		size_t n_ev = 1 + rnd(N_EV);

		body.n = resp.n = 0;
		for (size_t e = 0; e < n_ev; e++) {
			size_t len = rnd(200), split = len ? rnd((unsigned)len) : 0;

			for (size_t c = 0; c < len; c++)
				g_ev[e][c] = (char)(' ' + rnd(95));
			g_ev[e][len] = 0;
			if (rnd(5) == 0)
				puts_(&body, ": a comment\n");
			if (rnd(5) == 0) {
				puts_(&body, "event: completion");
				puts_(&body, nl);
			}
			if (split && rnd(3) == 0) { /* two data: lines joined by '\n' */
				g_ev[e][split] = '\n';
				if (g_ev[e][split + 1] == ' ') /* one leading space is eaten */
					g_ev[e][split + 1] = 'x';
				puts_(&body, "data: ");
				put(&body, g_ev[e], split);
				puts_(&body, nl);
				puts_(&body, rnd(2) ? "data:" : "data: ");
				puts_(&body, g_ev[e] + split + 1);
			} else {
				puts_(&body, rnd(2) ? "data: " : "data:");
				if (g_ev[e][0] == ' ') /* one leading space is eaten */
					g_ev[e][0] = 'x';
				puts_(&body, g_ev[e]);
			}
			puts_(&body, nl);
			puts_(&body, nl);
		}
		char head[256];

		if (status == 100) /* an interim response first */
			status = 200, puts_(&resp, "HTTP/1.1 100 Continue\r\n\r\n");
		snprintf(head, sizeof(head), "HTTP/1.%d %d Whatever%s%s: text/event-stream%s",
		         (int)rnd(2), status, nl, rnd(2) ? "Content-Type" : "content-TYPE", nl);
		puts_(&resp, head);
		if (framing == 0) {
			puts_(&resp, "Transfer-Encoding: chunked");
			puts_(&resp, nl);
			puts_(&resp, nl);
			for (size_t i = 0; i < body.n;) {
				size_t k = 1 + rnd(rnd(2) ? 16 : 4096);
				char sz[64];

				if (k > body.n - i)
					k = body.n - i;
				snprintf(sz, sizeof(sz), rnd(2) ? "%zx" : "%zX", k);
				puts_(&resp, sz);
				if (rnd(4) == 0)
					puts_(&resp, ";name=value");
				puts_(&resp, nl);
				put(&resp, body.p + i, k);
				puts_(&resp, nl);
				i += k;
			}
			puts_(&resp, "0");
			puts_(&resp, nl);
			if (rnd(2)) {
				puts_(&resp, "X-Trailer: 1");
				puts_(&resp, nl);
			}
			puts_(&resp, nl);
		} else if (framing == 1) {
			char cl[64];

			snprintf(cl, sizeof(cl), "Content-Length: %zu%s%s", body.n, nl, nl);
			puts_(&resp, cl);
			put(&resp, body.p, body.n);
		} else {
			puts_(&resp, nl);
			put(&resp, body.p, body.n);
		}
		if (feed(&resp, status, framing == 2, n_ev)) {
			fprintf(stderr, "FAIL round %d (framing %d, crlf %d)\n", round, framing,
			        crlf);
			fails++;
		}
	}
	fails += expect_error("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 1);
	fails += expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0);
	fails += expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n", 0);
	fails += expect_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab", 1);
	fails += expect_error("SMTP ready\r\n", 0);
	fails += expect_error("HTTP/1.1 2x0 OK\r\n", 0);
	fails += expect_error("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0);
	fails += expect_error("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", 0);
	fails += expect_error("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n", 1);
	{
		static char big[BENCH_HTTP_EVENT + 200];

		strcpy(big, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: ");
		memset(big + strlen(big), 'a', BENCH_HTTP_EVENT);
		fails += expect_error(big, 0);
	}
	if (fails)
		return 1;
	printf("ok: 300 responses round-tripped in random pieces, 10 refusals\n");
	return 0;
}
