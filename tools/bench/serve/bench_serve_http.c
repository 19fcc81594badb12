/*
 * tools/bench/serve/bench_serve_http.c — the HTTP/1.1 response reader of `coli bench
 * serve` (tools/bench/serve/bench_serve.c): a push parser fed whatever bytes a blocking
 * recv() returned, pure (no sockets, no clock), so tools/fuzz/fuzz_sse.c can throw
 * anything at it.
 *
 * States, in the order a response goes through them:
 *
 *   STATUS   "HTTP/1.1 200 OK\r\n"          -> status
 *   HEADERS  "Name: value\r\n" ... "\r\n"   -> Content-Length, Transfer-
 *                                             Encoding: chunked,
 *                                             Content-Type: text/event-stream
 *   body, one of:
 *     LENGTH     Content-Length bytes
 *     CHUNK_SIZE "1a;ext\r\n" -> CHUNK_DATA (size bytes) -> CHUNK_END "\r\n"
 *                ... size 0 -> TRAILER lines up to an empty one
 *     TO_EOF     neither: the body runs until the peer closes
 *   DONE / ERROR
 *
 * Lines (status, headers, chunk sizes, trailers) are kept in line[] up to
 * BENCH_HTTP_LINE bytes; a longer one is an error, as is a status line that
 * is not HTTP/1.x NNN, a size that is not hex or overflows, or a chunk not
 * followed by CRLF. Body bytes go to one of two places:
 *
 *   sse     (event-stream) split into lines (LF or CRLF); "data:" lines (one
 *           optional space after the colon) are joined with '\n' into ev[],
 *           and an empty line dispatches the event to on_event; other fields
 *           (event:, id:, retry:, comments ":...") are skipped. An event
 *           longer than BENCH_HTTP_EVENT bytes is an error.
 *   body[]  otherwise: the first BENCH_HTTP_BODY bytes kept (error messages, /metrics),
 *           the rest counted.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tools/bench/bench.h"

enum {
	ST_STATUS,
	ST_HEADERS,
	ST_LENGTH,
	ST_CHUNK_SIZE,
	ST_CHUNK_DATA,
	ST_CHUNK_END,
	ST_TRAILER,
	ST_TO_EOF,
	ST_DONE,
	ST_ERROR
};

void bench_http_init(struct bench_http *h, bench_http_event_fn on_event, void *arg)
{
	memset(h, 0, sizeof(*h));
	h->content_length = -1;
	h->on_event = on_event;
	h->arg = arg;
}

static int fail(struct bench_http *h, const char *why)
{
	h->state = ST_ERROR;
	h->error = why;
	return -EPROTO;
}

/* ---- the event stream ---- */

static int sse_line(struct bench_http *h, const char *s, size_t n)
{
	if (n == 0) { /* dispatch */
		int rc = 0;

		if (h->has_data && h->on_event)
			rc = h->on_event(h->arg, h->ev, h->ev_len);
		h->ev_len = 0;
		h->has_data = 0;
		h->events++;
		return rc ? -ECANCELED : 0;
	}
	if (n >= 5 && !memcmp(s, "data:", 5)) {
		s += 5;
		n -= 5;
		if (n && *s == ' ')
			s++, n--;
		if (h->ev_len + n + 2 > sizeof(h->ev))
			return fail(h, "server-sent event larger than the reader's buffer");
		if (h->has_data)
			h->ev[h->ev_len++] = '\n';
		memcpy(h->ev + h->ev_len, s, n);
		h->ev_len += n;
		h->ev[h->ev_len] = 0;
		h->has_data = 1;
	}
	return 0; /* event:, id:, retry:, comments: not needed */
}

static int body_bytes(struct bench_http *h, const char *p, size_t n)
{
	h->body_bytes += n;
	if (!h->sse) {
		size_t keep = sizeof(h->body) - 1 - h->body_len;

		if (keep > n)
			keep = n;
		memcpy(h->body + h->body_len, p, keep);
		h->body_len += keep;
		h->body[h->body_len] = 0;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		char c = p[i];
		int rc;

		if (c != '\n') {
			if (h->sse_len >= sizeof(h->sse_line))
				return fail(h, "server-sent event line longer than the buffer");
			h->sse_line[h->sse_len++] = c;
			continue;
		}
		if (h->sse_len && h->sse_line[h->sse_len - 1] == '\r')
			h->sse_len--;
		rc = sse_line(h, h->sse_line, h->sse_len);
		h->sse_len = 0;
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- lines of the head and of the chunk framing ---- */

static int parse_hex(const char *s, size_t n, long long *out)
{
	long long v = 0;
	size_t i = 0;

	for (; i < n; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
		        : c >= 'a' && c <= 'f' ? c - 'a' + 10
		        : c >= 'A' && c <= 'F' ? c - 'A' + 10
		                               : -1;
		if (d < 0)
			break;
		if (v > (1LL << 40))
			return -ERANGE;
		v = v * 16 + d;
	}
	if (i == 0)
		return -EINVAL;
	while (i < n && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i < n && s[i] != ';')
		return -EINVAL;
	*out = v;
	return 0;
}

static int header(struct bench_http *h, char *s, size_t n)
{
	char *colon = memchr(s, ':', n), *v;
	size_t name_len, vlen;

	if (!colon)
		return fail(h, "a header line without ':'");
	name_len = (size_t)(colon - s);
	v = colon + 1;
	vlen = n - name_len - 1;
	while (vlen && (*v == ' ' || *v == '\t'))
		v++, vlen--;
	while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
		vlen--;
	v[vlen] = 0;
	if (name_len == 14 && !strncasecmp(s, "Content-Length", 14)) {
		char *end;
		long long cl = strtoll(v, &end, 10);

		if (!vlen || *end || cl < 0)
			return fail(h, "a Content-Length that is not a number");
		h->content_length = cl;
	} else if (name_len == 17 && !strncasecmp(s, "Transfer-Encoding", 17)) {
		h->chunked = strcasestr(v, "chunked") != NULL;
	} else if (name_len == 12 && !strncasecmp(s, "Content-Type", 12)) {
		h->sse = strncasecmp(v, "text/event-stream", 17) == 0;
	}
	return 0;
}

static int line(struct bench_http *h, char *s, size_t n)
{
	long long v;

	switch (h->state) {
	case ST_STATUS:
		if (n < 12 || memcmp(s, "HTTP/1.", 7) || s[8] != ' ' || s[9] < '1' || s[9] > '5' ||
		    s[10] < '0' || s[10] > '9' || s[11] < '0' || s[11] > '9' ||
		    (n > 12 && s[12] != ' '))
			return fail(h, "not an HTTP/1.x status line");
		h->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
		h->state = ST_HEADERS;
		return 0;
	case ST_HEADERS:
		if (n)
			return header(h, s, n);
		if (h->status / 100 == 1) { /* 100 Continue: the real head follows */
			h->state = ST_STATUS;
			h->content_length = -1;
			h->chunked = h->sse = 0;
			return 0;
		}
		h->head_done = 1;
		if (h->chunked)
			h->state = ST_CHUNK_SIZE;
		else if (h->content_length >= 0)
			h->state = h->content_length ? ST_LENGTH : ST_DONE;
		else
			h->state = ST_TO_EOF;
		h->left = h->content_length;
		return 0;
	case ST_CHUNK_SIZE:
		if (parse_hex(s, n, &v))
			return fail(h, "a chunk size that is not hex");
		h->left = v;
		h->state = v ? ST_CHUNK_DATA : ST_TRAILER;
		return 0;
	case ST_CHUNK_END:
		if (n)
			return fail(h, "a chunk not followed by CRLF");
		h->state = ST_CHUNK_SIZE;
		return 0;
	case ST_TRAILER:
		if (!n)
			h->state = ST_DONE;
		return 0;
	default:
		return fail(h, "internal: a line in a body state");
	}
}

static int line_state(int st)
{
	return st == ST_STATUS || st == ST_HEADERS || st == ST_CHUNK_SIZE || st == ST_CHUNK_END ||
	       st == ST_TRAILER;
}

int bench_http_feed(struct bench_http *h, const char *p, size_t n)
{
	size_t i = 0;
	int rc;

	while (i < n) {
		if (h->state == ST_DONE)
			return 1; /* bytes past the end: ignored (Connection: close sent) */
		if (h->state == ST_ERROR)
			return -EPROTO;
		if (line_state(h->state)) {
			char c = p[i++];

			if (c != '\n') {
				if (h->line_len >= sizeof(h->line) - 1)
					return fail(h, "a head or framing line longer than 8 KiB");
				h->line[h->line_len++] = c;
				continue;
			}
			if (h->line_len && h->line[h->line_len - 1] == '\r')
				h->line_len--;
			h->line[h->line_len] = 0;
			rc = line(h, h->line, h->line_len);
			h->line_len = 0;
			if (rc)
				return rc;
			continue;
		}
		size_t take = n - i;

		if (h->state != ST_TO_EOF && (long long)take > h->left)
			take = (size_t)h->left;
		if ((rc = body_bytes(h, p + i, take)))
			return rc;
		i += take;
		if (h->state == ST_TO_EOF)
			continue;
		h->left -= (long long)take;
		if (!h->left)
			h->state = h->state == ST_LENGTH ? ST_DONE : ST_CHUNK_END;
	}
	if (h->state == ST_ERROR)
		return -EPROTO;
	return h->state == ST_DONE;
}

int bench_http_eof(struct bench_http *h)
{
	if (h->state == ST_TO_EOF) {
		h->state = ST_DONE;
		if (h->sse && h->sse_len) /* a last line without its newline */
			body_bytes(h, "\n", 1);
		if (h->sse && h->has_data)
			sse_line(h, "", 0);
	}
	if (h->state == ST_DONE)
		return 0;
	if (h->state != ST_ERROR)
		fail(h, h->head_done ? "the connection closed inside the body"
		                     : "the connection closed before a whole response head");
	return -EPROTO;
}
