/*
 * tools/fuzz/fuzz_sse.c — libFuzzer target for `coli bench serve`'s HTTP/1.1
 * response reader (tools/bench/serve/bench_serve_http.c): status line, headers, bodies
 * by Content-Length, chunked or to the close, and the server-sent events of
 * an event-stream body. The first byte picks how the input is cut into
 * recv()-sized pieces (1..256 bytes, as a socket may hand them over); the
 * rest is the response. Checked beyond ASan/UBSan: every dispatched event's
 * data is NUL-terminated at its length, the kept body too, and feeding the
 * same bytes whole gives the same status, outcome and event count as
 * feeding them in pieces.
 *
 * fuzz-sources: tools/bench/serve/bench_serve_http.c
 * fuzz-max-len: 131072
 */
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_event(void *arg, const char *d, size_t len)
{
	(*(unsigned long *)arg)++;
	if (d[len] != 0 || strlen(d) > len)
		abort();
	return 0;
}

static int run(struct bench_http *h, const uint8_t *p, size_t n, size_t piece, unsigned long *ev)
{
	int rc = 0;

	*ev = 0;
	bench_http_init(h, on_event, ev);
	for (size_t i = 0; i < n && rc == 0; i += piece)
		rc = bench_http_feed(h, (const char *)p + i, n - i < piece ? n - i : piece);
	if (rc == 0)
		rc = bench_http_eof(h) ? -1 : 2;
	if (h->body_len >= sizeof(h->body) || h->body[h->body_len] != 0)
		abort();
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct bench_http a, b;
	unsigned long ea, eb;
	int ra, rb;

	if (size < 1)
		return 0;
	ra = run(&a, data + 1, size - 1, 1 + data[0], &ea);
	rb = run(&b, data + 1, size - 1, size, &eb);
	if (ra != rb || a.status != b.status || ea != eb || a.events != b.events)
		abort();
	return 0;
}
