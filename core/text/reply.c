/*
 * core/text/reply.c — a generated reply split as the OpenAI API returns it:
 * reasoning, content and tool calls, by the model family's own markers (the
 * formats its chat template writes for an assistant turn, which is what the
 * model was trained to produce):
 *
 *   chatml (Qwen3, Hermes)  <think>R</think> C <tool_call>{"name": N, "arguments":
 * {..}}</tool_call> glm (GLM-4.5)           <think>R</think> C
 * <tool_call>N<arg_key>K</arg_key><arg_value>V</arg_value>..</tool_call> minimax (MiniMax-M2)
 * <think>R</think> C <minimax:tool_call><invoke name="N"> <parameter
 * name="K">V</parameter>..</invoke>..</minimax:tool_call> deepseek (V3, V3.1)     R</think> C
 * <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>N<｜tool▁sep｜>{..}
 *                           <｜tool▁call▁end｜>..<｜tool▁calls▁end｜> (V3:
 * "function<｜tool▁sep｜>N\n```json\n{..}\n```") kimi (Kimi-K2)          C
 * <|tool_calls_section_begin|><|tool_call_begin|>functions.N:I
 *                           <|tool_call_argument_begin|>{..}<|tool_call_end|>..<|tool_calls_section_end|>
 *   harmony (gpt-oss)
 * <|channel|>analysis<|message|>R<|end|><|start|>assistant<|channel|>final<|message|>C or
 * ..to=functions.N<|channel|>commentary json<|message|>{..}<|call|> inst (Mistral)
 * [TOOL_CALLS][{"name": N, "arguments": {..}}, ..]
 *
 * think_open: the prompt ended inside a reasoning block (a generation prompt
 * that opens <think>, DeepSeek-V3.1's thinking mode), so the reply starts as
 * reasoning until its </think>. A tool call's arguments come back as JSON
 * text; GLM's and MiniMax's arguments are key/value pairs whose values are
 * JSON where the template wrote JSON (tojson: numbers, objects, booleans)
 * and raw text where it wrote a string: a value is taken as a string when
 * the tool's schema (tools, the request's list, or NULL) types it so, else
 * as JSON when it parses as JSON, else as a string. Text that does not
 * follow the format is left in the content: a reply is never lost.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"

/* A growing byte string. */
struct buf {
	char *p;
	size_t n, cap;
	int oom;
};

static void put(struct buf *b, const char *s, size_t n)
{
	if (b->oom || !n)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		char *p;

		while (cap < b->n + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p, b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

/* s[0, n) with its leading and trailing whitespace dropped. */
static void trim(const char **s, size_t *n)
{
	while (*n && strchr(" \t\r\n", **s))
		(*s)++, (*n)--;
	while (*n && strchr(" \t\r\n", (*s)[*n - 1]))
		(*n)--;
}

static const char *find(const char *s, const char *end, const char *what)
{
	size_t w = strlen(what);

	for (const char *p = s; p + w <= end; p++)
		if (!memcmp(p, what, w))
			return p;
	return NULL;
}

static int add_call(struct coli_reply *r, const char *name, size_t nlen, json_t *args)
{
	struct coli_tool_call *c = realloc(r->calls, sizeof(*c) * (r->n_calls + 1));
	char *a = args ? json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");

	if (!c || !a) {
		free(a);
		if (c)
			r->calls = c;
		return -ENOMEM;
	}
	r->calls = c;
	c[r->n_calls].name = strndup(name, nlen);
	c[r->n_calls].arguments = a;
	if (!c[r->n_calls].name) {
		free(a);
		return -ENOMEM;
	}
	r->n_calls++;
	return 0;
}

/* JSON text s[0, n) (an object or any value), or NULL. */
static json_t *json_of(const char *s, size_t n)
{
	trim(&s, &n);
	return json_loadb(s, n, JSON_DECODE_ANY, NULL);
}

/* Whether tool `name`'s schema types parameter `key` as a string. */
static int string_param(const json_t *tools, const char *name, size_t nlen, const char *key)
{
	size_t i;
	const json_t *t;

	json_array_foreach(tools, i, t)
	{
		const json_t *f = json_object_get(t, "function");
		const char *fn = json_string_value(json_object_get(f ? f : t, "name"));

		if (fn && strlen(fn) == nlen && !memcmp(fn, name, nlen)) {
			const json_t *p = json_object_get(
			    json_object_get(json_object_get(f ? f : t, "parameters"), "properties"),
			    key);
			const char *ty = json_string_value(json_object_get(p, "type"));

			return ty && !strcmp(ty, "string");
		}
	}
	return 0;
}

/* A key/value argument: a string where the schema says so or where it is
 * not JSON, else the JSON value. */
static int set_arg(json_t *args, const json_t *tools, const char *name, size_t nlen, const char *k,
                   size_t kn, const char *v, size_t vn)
{
	char *key = strndup(k, kn);
	json_t *val = NULL;
	int rc;

	if (!key)
		return -ENOMEM;
	if (!string_param(tools, name, nlen, key))
		val = json_of(v, vn);
	if (!val)
		val = json_stringn(v, vn);
	rc = val && json_object_set_new(args, key, val) == 0 ? 0 : -ENOMEM;
	free(key);
	return rc;
}

/* Between open and close (each marker; close NULL: to the end): the body. */
static int between(const char *s, const char *end, const char *open, const char *close,
                   const char **b, const char **e, const char **next)
{
	const char *o = find(s, end, open), *c;

	if (!o)
		return 0;
	*b = o + strlen(open);
	c = close ? find(*b, end, close) : end;
	if (!c)
		return 0;
	*e = c;
	*next = c + (close ? strlen(close) : 0);
	return 1;
}

/* <tool_call>{"name": .., "arguments": {..}}</tool_call>, one call each. */
static int calls_hermes(struct coli_reply *r, const char *s, const char *end)
{
	const char *b, *e;

	while (between(s, end, "<tool_call>", "</tool_call>", &b, &e, &s)) {
		json_t *j = json_of(b, (size_t)(e - b));
		const char *name = json_string_value(json_object_get(j, "name"));
		json_t *args = json_object_get(j, "arguments");
		int rc;

		if (!name) {
			json_decref(j);
			return -EINVAL;
		}
		if (json_is_string(args)) /* some write the arguments as JSON text */
			args = json_of(json_string_value(args), json_string_length(args));
		else
			json_incref(args);
		rc = add_call(r, name, strlen(name), args);
		json_decref(args);
		json_decref(j);
		if (rc)
			return rc;
	}
	return 0;
}

/* <tool_call>N<arg_key>K</arg_key><arg_value>V</arg_value>..</tool_call> */
static int calls_glm(struct coli_reply *r, const char *s, const char *end, const json_t *tools)
{
	const char *b, *e;

	while (between(s, end, "<tool_call>", "</tool_call>", &b, &e, &s)) {
		const char *k = find(b, e, "<arg_key>"), *name = b, *kb, *ke, *vb, *ve, *p;
		size_t nlen = (size_t)((k ? k : e) - b);
		json_t *args = json_object();
		int rc = args ? 0 : -ENOMEM;

		trim(&name, &nlen);
		for (p = b; !rc && between(p, e, "<arg_key>", "</arg_key>", &kb, &ke, &p);) {
			if (!between(p, e, "<arg_value>", "</arg_value>", &vb, &ve, &p))
				break;
			rc = set_arg(args, tools, name, nlen, kb, (size_t)(ke - kb), vb,
			             (size_t)(ve - vb));
		}
		rc = rc ? rc : nlen ? add_call(r, name, nlen, args) : -EINVAL;
		json_decref(args);
		if (rc)
			return rc;
	}
	return 0;
}

/* <invoke name="N"><parameter name="K">V</parameter>..</invoke> */
static int calls_minimax(struct coli_reply *r, const char *s, const char *end, const json_t *tools)
{
	const char *b, *e;

	while (between(s, end, "<invoke name=\"", "</invoke>", &b, &e, &s)) {
		const char *q = find(b, e, "\">"), *p, *kb, *ke, *vb, *ve;
		json_t *args;
		int rc;

		if (!q)
			return -EINVAL;
		args = json_object();
		rc = args ? 0 : -ENOMEM;
		for (p = q + 2; !rc && between(p, e, "<parameter name=\"", "\">", &kb, &ke, &p);) {
			vb = p;
			ve = find(vb, e, "</parameter>");
			if (!ve)
				break;
			p = ve + strlen("</parameter>");
			rc = set_arg(args, tools, b, (size_t)(q - b), kb, (size_t)(ke - kb), vb,
			             (size_t)(ve - vb));
		}
		rc = rc ? rc : add_call(r, b, (size_t)(q - b), args);
		json_decref(args);
		if (rc)
			return rc;
	}
	return 0;
}

/* <｜tool▁call▁begin｜>N<｜tool▁sep｜>{..}<｜tool▁call▁end｜> (V3.1), or
 * "function<｜tool▁sep｜>N\n```json\n{..}\n```" (V3, R1). */
static int calls_deepseek(struct coli_reply *r, const char *s, const char *end)
{
	const char *b, *e;

	while (between(s, end, "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", &b, &e, &s)) {
		const char *sep = find(b, e, "<｜tool▁sep｜>"), *name = b, *a;
		size_t nlen;
		json_t *args;
		int rc;

		if (!sep)
			return -EINVAL;
		a = sep + strlen("<｜tool▁sep｜>");
		nlen = (size_t)(sep - b);
		if (nlen == 8 && !memcmp(b, "function", 8)) { /* V3: the name, then a json block */
			const char *nl = find(a, e, "\n"), *jb, *je, *rest;

			if (!nl || !between(nl, e, "```json", "```", &jb, &je, &rest))
				return -EINVAL;
			name = a, nlen = (size_t)(nl - a);
			args = json_of(jb, (size_t)(je - jb));
		} else {
			args = json_of(a, (size_t)(e - a));
		}
		trim(&name, &nlen);
		rc = args ? add_call(r, name, nlen, args) : -EINVAL;
		json_decref(args);
		if (rc)
			return rc;
	}
	return 0;
}

/* <|tool_call_begin|>functions.N:I<|tool_call_argument_begin|>{..}<|tool_call_end|> */
static int calls_kimi(struct coli_reply *r, const char *s, const char *end)
{
	const char *b, *e;

	while (between(s, end, "<|tool_call_begin|>", "<|tool_call_end|>", &b, &e, &s)) {
		const char *a = find(b, e, "<|tool_call_argument_begin|>"), *name = b, *colon;
		json_t *args;
		int rc;

		if (!a)
			return -EINVAL;
		if (a - b > 10 && !memcmp(b, "functions.", 10))
			name = b + 10;
		for (colon = a; colon > name && colon[-1] != ':'; colon--)
			;
		args = json_of(a + strlen("<|tool_call_argument_begin|>"),
		               (size_t)(e - a - strlen("<|tool_call_argument_begin|>")));
		rc = args ? add_call(r, name, (size_t)((colon > name ? colon - 1 : a) - name), args)
		          : -EINVAL;
		json_decref(args);
		if (rc)
			return rc;
	}
	return 0;
}

/* [TOOL_CALLS][{"name": N, "arguments": {..}}, ..] */
static int calls_inst(struct coli_reply *r, const char *s, const char *end)
{
	json_t *list = json_of(s, (size_t)(end - s)), *j;
	size_t i;
	int rc = json_is_array(list) ? 0 : -EINVAL;

	json_array_foreach(list, i, j)
	{
		const char *name = json_string_value(json_object_get(j, "name"));

		if (rc || !name) {
			rc = rc ? rc : -EINVAL;
			break;
		}
		rc = add_call(r, name, strlen(name), json_object_get(j, "arguments"));
	}
	json_decref(list);
	return rc;
}

/* harmony: messages "<|start|>assistant[ to=functions.N]<|channel|>C[ ...]<|message|>M"
 * ended by <|end|>, <|call|> or <|return|> (the first message's header may
 * be cut to its channel: the generation prompt wrote "<|start|>assistant"). */
static int split_harmony(struct coli_reply *r, const char *s, const char *end, struct buf *reason,
                         struct buf *content)
{
	while (s < end) {
		const char *m = find(s, end, "<|message|>"), *stop, *to, *ch;
		const char *ends[3] = {"<|end|>", "<|call|>", "<|return|>"};

		if (!m)
			break;
		stop = end;
		for (int i = 0; i < 3; i++) {
			const char *x = find(m, end, ends[i]);

			stop = x && x < stop ? x : stop;
		}
		ch = find(s, m, "<|channel|>");
		to = find(s, m, "to=functions.");
		if (to) {
			const char *n = to + strlen("to=functions."), *ne = n;
			json_t *args = json_of(m + 11, (size_t)(stop - m - 11));
			int rc;

			while (ne < m && !strchr(" <", *ne))
				ne++;
			rc = args ? add_call(r, n, (size_t)(ne - n), args) : -EINVAL;
			json_decref(args);
			if (rc)
				return rc;
		} else if (ch && find(ch, m, "analysis")) {
			put(reason, m + 11, (size_t)(stop - m - 11));
		} else {
			put(content, m + 11, (size_t)(stop - m - 11));
		}
		s = stop;
		for (int i = 0; i < 3; i++)
			if ((size_t)(end - s) >= strlen(ends[i]) &&
			    !memcmp(s, ends[i], strlen(ends[i])))
				s += strlen(ends[i]);
	}
	return 0;
}

int coli_reply_parse(enum coli_chat_family f, const char *text, size_t n, int think_open,
                     const char *tools_json, struct coli_reply *out)
{
	const char *s = text, *end = text + n, *tc = NULL;
	struct buf reason = {0}, content = {0};
	json_t *tools = tools_json ? json_loads(tools_json, 0, NULL) : NULL;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (f == COLI_CHAT_HARMONY) {
		rc = split_harmony(out, s, end, &reason, &content);
		if (!rc && !content.n && !reason.n && !out->n_calls && !find(s, end, "<|message|>"))
			put(&content, s, n); /* no harmony header: plain text */
		goto done;
	}
	/* reasoning: <think>..</think> at the start, or to the first </think>
	 * when the prompt left a think block open */
	{
		const char *t = s, *b, *e, *next;
		size_t tn = n;

		trim(&t, &tn);
		if (think_open && (e = find(s, end, "</think>"))) {
			put(&reason, s, (size_t)(e - s));
			s = e + strlen("</think>");
		} else if (tn >= 7 && !memcmp(t, "<think>", 7) &&
		           between(t, end, "<think>", "</think>", &b, &e, &next)) {
			put(&reason, b, (size_t)(e - b));
			s = next;
		} else if (think_open) { /* cut short while still thinking */
			put(&reason, s, n);
			s = end;
		}
	}
	switch (f) {
	case COLI_CHAT_CHATML:
	case COLI_CHAT_GLM:
		tc = find(s, end, "<tool_call>");
		break;
	case COLI_CHAT_MINIMAX:
		tc = find(s, end, "<minimax:tool_call>");
		break;
	case COLI_CHAT_DEEPSEEK:
		tc = find(s, end, "<｜tool▁calls▁begin｜>");
		if (!tc)
			tc = find(s, end, "<｜tool▁call▁begin｜>");
		break;
	case COLI_CHAT_KIMI:
		tc = find(s, end, "<|tool_calls_section_begin|>");
		break;
	case COLI_CHAT_INST:
		tc = find(s, end, "[TOOL_CALLS]");
		break;
	default:
		break;
	}
	if (tc) {
		rc = f == COLI_CHAT_CHATML     ? calls_hermes(out, tc, end)
		     : f == COLI_CHAT_GLM      ? calls_glm(out, tc, end, tools)
		     : f == COLI_CHAT_MINIMAX  ? calls_minimax(out, tc, end, tools)
		     : f == COLI_CHAT_DEEPSEEK ? calls_deepseek(out, tc, end)
		     : f == COLI_CHAT_KIMI     ? calls_kimi(out, tc, end)
		                               : calls_inst(out, tc + strlen("[TOOL_CALLS]"), end);
		if (rc == -EINVAL || !out->n_calls) { /* not the format after all: all content */
			coli_reply_free(out);
			tc = NULL;
			rc = rc == -EINVAL ? 0 : rc;
		}
	}
	{
		const char *c = s;
		size_t cn = (size_t)((tc ? tc : end) - s);

		trim(&c, &cn);
		put(&content, c, cn);
	}
done:
	json_decref(tools);
	if (rc || reason.oom || content.oom) {
		free(reason.p), free(content.p);
		coli_reply_free(out);
		return rc ? rc : -ENOMEM;
	}
	{
		const char *rp = reason.p ? reason.p : "";
		size_t rn = reason.n;

		trim(&rp, &rn);
		out->reasoning = rn ? strndup(rp, rn) : NULL;
	}
	out->content = content.p ? content.p : strdup("");
	free(reason.p);
	if (!out->content) {
		coli_reply_free(out);
		return -ENOMEM;
	}
	return 0;
}

void coli_reply_free(struct coli_reply *r)
{
	for (int i = 0; i < r->n_calls; i++) {
		free(r->calls[i].name);
		free(r->calls[i].arguments);
	}
	free(r->calls);
	free(r->reasoning);
	free(r->content);
	memset(r, 0, sizeof(*r));
}
