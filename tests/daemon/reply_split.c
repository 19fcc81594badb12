/*
 * tests/daemon/reply_split.c — tools/colid/colid_reply.c (included: the unit under
 * test) on the replies of tests/fixtures/chat/reply_cases.jsonl (what the
 * models' templates write; tools/ref/reply_cases.py):
 *   whole   colid_reply_message gives the case's reasoning_content, content
 *           (null beside tool calls when empty) and tool_calls (ids, names,
 *           arguments equal as JSON) with the request's tools; without
 *           tools no tool_calls, the text stays content
 *   stream  colid_split_next over the text committed a byte at a time and
 *           in random pieces: the reasoning and content deltas, joined,
 *           are the whole reply's (for the families whose reasoning is a
 *           think block)
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fixture_util.h"
#include "tools/colid/colid_reply.c"

static int fails;

#define CHECK(c, ...)                                                                              \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			fails++;                                                                   \
		}                                                                                  \
	} while (0)

static enum coli_chat_family family(const char *name)
{
	static const char *const names[] = {"plain",   "chatml",   "inst", "glm",
	                                    "minimax", "deepseek", "kimi", "harmony"};

	for (int i = 0; i < 8; i++)
		if (!strcmp(name, names[i]))
			return (enum coli_chat_family)i;
	return COLI_CHAT_PLAIN;
}

/* s without leading and trailing whitespace, in buf. */
static const char *trimmed(const char *s, size_t n, char *buf, size_t cap)
{
	while (n && strchr(" \t\r\n", *s))
		s++, n--;
	while (n && strchr(" \t\r\n", s[n - 1]))
		n--;
	n = n < cap - 1 ? n : cap - 1;
	memcpy(buf, s, n);
	buf[n] = 0;
	return buf;
}

/* The text streamed in pieces of `step` bytes (0: random sizes): the joined
 * reasoning and content, trimmed, must be the case's. */
static void stream(const char *what, const char *text, int think_open, int step,
                   const char *reasoning, const char *content)
{
	size_t n = strlen(text), sent = 0, avail = 0, rl = 0, cl = 0;
	char *r = calloc(n + 1, 1), *c = calloc(n + 1, 1), b1[4096], b2[4096];
	struct colid_split sp;

	colid_split_init(&sp, think_open);
	while (sent < n) {
		struct colid_span rs, cs;
		size_t upto;
		int done;

		avail += step ? (size_t)step : (size_t)(rand() % 9);
		avail = avail < n ? avail : n;
		done = avail == n;
		colid_split_next(&sp, text, sent, avail, done, &rs, &cs, &upto);
		CHECK(upto >= sent && upto <= avail && rs.from >= sent && cs.to <= upto,
		      "%s: spans out of order", what);
		memcpy(r + rl, text + rs.from, rs.to - rs.from), rl += rs.to - rs.from;
		memcpy(c + cl, text + cs.from, cs.to - cs.from), cl += cs.to - cs.from;
		sent = upto;
		if (done && sent < n) {
			CHECK(0, "%s: the whole text was not consumed", what);
			break;
		}
	}
	CHECK(!strcmp(trimmed(r, rl, b1, sizeof(b1)), reasoning ? reasoning : ""),
	      "%s (step %d): reasoning '%s'", what, step, b1);
	CHECK(!strcmp(trimmed(c, cl, b2, sizeof(b2)), content), "%s (step %d): content '%s'", what,
	      step, b2);
	free(r), free(c);
}

int main(void)
{
	char path[4096], line[1 << 16], *tools = NULL;
	FILE *fp;
	int n = 0, streamed = 0;

	snprintf(path, sizeof(path), "%s/chat/reply_cases.jsonl", fx_root());
	fp = fopen(path, "r");
	if (!fp) {
		printf("cannot open %s\n", path);
		return 1;
	}
	srand(7);
	while (fgets(line, sizeof(line), fp)) {
		json_t *c = json_loads(line, 0, NULL), *m, *calls, *want;
		const char *text, *reasoning, *content;
		enum coli_chat_family f;
		int n_calls, think_open;
		char what[64];

		if (!c)
			break;
		if (json_object_get(c, "tools")) {
			tools = json_dumps(json_object_get(c, "tools"), 0);
			json_decref(c);
			continue;
		}
		f = family(json_string_value(json_object_get(c, "family")));
		text = json_string_value(json_object_get(c, "text"));
		reasoning = json_string_value(json_object_get(c, "reasoning"));
		content = json_string_value(json_object_get(c, "content"));
		think_open = json_is_true(json_object_get(c, "think_open"));
		want = json_object_get(c, "tool_calls");
		snprintf(what, sizeof(what), "case %d (%s)", ++n, coli_chat_family_name(f));

		m = colid_reply_message(f, text, strlen(text), think_open, tools, "x", &n_calls);
		calls = json_object_get(m, "tool_calls");
		CHECK(m && (size_t)n_calls == json_array_size(want) &&
		          json_array_size(calls) == json_array_size(want),
		      "%s: %d tool calls", what, n_calls);
		for (size_t i = 0; m && i < json_array_size(calls) && i < json_array_size(want);
		     i++) {
			json_t *fn = json_object_get(json_array_get(calls, i), "function");
			json_t *args =
			    json_loads(json_string_value(json_object_get(fn, "arguments")),
			               JSON_DECODE_ANY, NULL);
			char id[32];

			snprintf(id, sizeof(id), "call_x_%zu", i);
			CHECK(!strcmp(json_string_value(
			                  json_object_get(json_array_get(calls, i), "id")),
			              id),
			      "%s: call %zu id", what, i);
			CHECK(!strcmp(json_string_value(json_object_get(fn, "name")),
			              json_string_value(
			                  json_object_get(json_array_get(want, i), "name"))),
			      "%s: call %zu name", what, i);
			CHECK(
			    json_equal(args, json_object_get(json_array_get(want, i), "arguments")),
			    "%s: call %zu arguments", what, i);
			json_decref(args);
		}
		CHECK(
		    m && (json_array_size(want) && !content[0]
		              ? json_is_null(json_object_get(m, "content"))
		              : !strcmp(json_string_value(json_object_get(m, "content")), content)),
		    "%s: content", what);
		CHECK(m &&
		          (reasoning ? json_string_value(json_object_get(m, "reasoning_content")) &&
		                           !strcmp(json_string_value(
		                                       json_object_get(m, "reasoning_content")),
		                                   reasoning)
		                     : !json_object_get(m, "reasoning_content")),
		      "%s: reasoning_content", what);
		json_decref(m);
		/* without tools: no calls, the tool markup stays in the content */
		m = colid_reply_message(f, text, strlen(text), think_open, NULL, "x", &n_calls);
		CHECK(m && !n_calls && !json_object_get(m, "tool_calls"), "%s: calls without tools",
		      what);
		json_decref(m);
		/* streamed: the think-block families without tool calls */
		if (!json_array_size(want) && f != COLI_CHAT_HARMONY) {
			stream(what, text, think_open, 1, reasoning, content);
			stream(what, text, think_open, 0, reasoning, content);
			stream(what, text, think_open, 1 << 20, reasoning, content);
			streamed++;
		}
		json_decref(c);
	}
	fclose(fp);
	free(tools);
	CHECK(n >= 25 && streamed >= 8, "%d cases, %d streamed", n, streamed);
	printf("%d replies whole, %d streamed three ways: %d failed\n", n, streamed, fails);
	return fails ? 1 : 0;
}
