/*
 * tools/colid/colid_reply.c — a chat reply as the OpenAI API shapes it: the
 * model's reasoning as `reasoning_content`, its tool calls as `tool_calls`,
 * the rest as `content` (core/text/reply.c reads the family's markers).
 *
 * Whole replies: the text parsed once at the end; tool calls only when the
 * request sent `tools` (without them a model's text is content, whatever
 * it holds), finish_reason "tool_calls" when there are some. A reply with
 * neither reasoning nor calls is the text as generated, byte for byte (as
 * `coli generate` prints it).
 *
 * Streams: reasoning and content go out as they are generated, split by a
 * small state machine over the committed text (struct colid_split):
 *   undecided  the reply so far is whitespace and a prefix of "<think>":
 *              nothing is sent until it is more or less than that
 *   reasoning  after "<think>" (or from the start when the prompt left a
 *              think block open): reasoning_content deltas up to
 *              "</think>", a possible prefix of it held back
 *   content    content deltas, as before
 * With `tools`, and for gpt-oss's harmony channels, a stream holds the reply
 * back: at the end its reasoning, content and every tool call go out in one
 * delta (each call whole, with its index), then the finish.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "tools/colid/colid.h"

static const char OPEN[] = "<think>", CLOSE[] = "</think>";

/* Whether content is text[0, n) but for surrounding whitespace. */
static int plain(const char *text, size_t n, const char *content)
{
	size_t c = strlen(content);

	while (n && strchr(" \t\r\n", *text))
		text++, n--;
	while (n && strchr(" \t\r\n", text[n - 1]))
		n--;
	return n == c && !memcmp(text, content, n);
}

json_t *colid_reply_message(enum coli_chat_family f, const char *text, size_t len, int think_open,
                            const char *tools_json, const char *id, int *n_calls)
{
	struct coli_reply r;
	json_t *m, *calls;

	*n_calls = 0;
	if (coli_reply_parse(f, text, len, think_open, tools_json, &r))
		return NULL;
	if (!tools_json && r.n_calls) { /* no tools asked for: calls stay text */
		coli_reply_free(&r);
		if (coli_reply_parse(COLI_CHAT_PLAIN, text, len, think_open, NULL, &r))
			return NULL;
	}
	if (!r.reasoning && !r.n_calls && plain(text, len, r.content)) {
		coli_reply_free(&r); /* nothing split off: the text as generated */
		return json_pack("{s:s,s:s%}", "role", "assistant", "content", text, len);
	}
	m = json_pack("{s:s,s:s}", "role", "assistant", "content", r.content);
	if (m && r.reasoning)
		json_object_set_new(m, "reasoning_content", json_string(r.reasoning));
	if (m && r.n_calls) {
		calls = json_array();
		for (int i = 0; calls && i < r.n_calls; i++) {
			char cid[96];

			snprintf(cid, sizeof(cid), "call_%s_%d", id, i);
			json_array_append_new(calls, json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", cid,
			                                       "type", "function", "function",
			                                       "name", r.calls[i].name, "arguments",
			                                       r.calls[i].arguments));
		}
		if (!r.content[0])
			json_object_set_new(m, "content", json_null());
		json_object_set_new(m, "tool_calls", calls);
		*n_calls = r.n_calls;
	}
	coli_reply_free(&r);
	return m;
}

/* The length of the longest suffix of s[0, n) that is a proper prefix of w. */
static size_t held(const char *s, size_t n, const char *w)
{
	size_t wl = strlen(w);

	for (size_t k = wl - 1 < n ? wl - 1 : n; k > 0; k--)
		if (!memcmp(s + n - k, w, k))
			return k;
	return 0;
}

void colid_split_init(struct colid_split *sp, int think_open)
{
	sp->phase = think_open ? COLID_SPLIT_REASON : COLID_SPLIT_UNDECIDED;
}

void colid_split_next(struct colid_split *sp, const char *text, size_t from, size_t avail, int done,
                      struct colid_span *reason, struct colid_span *content, size_t *upto)
{
	*reason = (struct colid_span){from, from};
	*content = (struct colid_span){from, from};
	*upto = from;
	if (sp->phase == COLID_SPLIT_UNDECIDED) {
		size_t i = from;

		while (i < avail && strchr(" \t\r\n", text[i]))
			i++;
		if (avail - i >= sizeof(OPEN) - 1 && !memcmp(text + i, OPEN, sizeof(OPEN) - 1)) {
			sp->phase = COLID_SPLIT_REASON;
			from = i + sizeof(OPEN) - 1;
		} else if (!done && avail - i < sizeof(OPEN) - 1 &&
		           !memcmp(text + i, OPEN, avail - i)) {
			return; /* whitespace and a prefix of <think> so far */
		} else {
			sp->phase = COLID_SPLIT_CONTENT;
		}
		*reason = *content = (struct colid_span){from, from};
		*upto = from;
	}
	if (sp->phase == COLID_SPLIT_REASON) {
		const char *c = NULL;

		for (size_t i = from; i + sizeof(CLOSE) - 1 <= avail && !c; i++)
			if (!memcmp(text + i, CLOSE, sizeof(CLOSE) - 1))
				c = text + i;
		if (!c) {
			size_t end = done ? avail : avail - held(text + from, avail - from, CLOSE);

			*reason = (struct colid_span){from, end};
			*upto = end;
			return;
		}
		*reason = (struct colid_span){from, (size_t)(c - text)};
		from = (size_t)(c - text) + sizeof(CLOSE) - 1;
		while (from < avail && strchr("\r\n", text[from]))
			from++;
		sp->phase = COLID_SPLIT_CONTENT;
	}
	*content = (struct colid_span){from, avail};
	*upto = avail;
}
