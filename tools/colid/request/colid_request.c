/*
 * tools/colid/request/colid_request.c — an HTTP body to a struct colid_request, or an
 * OpenAI-style error saying which field is wrong and why.
 *
 * Pure: no engine, no sockets, no globals, so tools/fuzz/fuzz_request.c can drive
 * it with arbitrary bytes. The order of checks, each a 400 unless said:
 *
 *   1. empty body; invalid UTF-8 (byte offset named) — before JSON, so the
 *      message is about the encoding rather than a parse position
 *   2. JSON syntax (jansson's line/column), root not an object
 *   3. every key: known for this endpoint, of the right type and range;
 *      an unknown key is refused by name, as OpenAI does ("Unrecognized
 *      request argument supplied: X"); OpenAI fields coli does not implement
 *      are accepted only at their neutral value (best_of 1, echo false);
 *      the sampling fields (n, min_p, penalties, logit_bias, logprobs,
 *      top_logprobs) in colid_request_sampling_parse, each with its range
 *   4. required fields present: messages (chat) or prompt (completions),
 *      not empty; a completions prompt is a string, token ids, or a batch
 *      of either (its prompts times n at most COLID_MAX_N choices)
 *
 * The parser is three files, sharing tools/colid/request/colid_request.h:
 *
 *   colid_request.c         this one: the body (steps 1, 2, 4), the walk
 *                           over its keys (parse_field: the scalar fields
 *                           max_tokens, temperature, top_p, top_k, seed,
 *                           stream, stream_options, return_token_ids; the
 *                           rest handed on), the neutral fields, the error
 *                           object, the UTF-8 check and the typed getters
 *   colid_request_input.c   what the model reads: chat messages, the
 *                           completions prompt, tools, chat_template_kwargs
 *   colid_request_output.c  what shapes its output: stop, the sampling
 *                           fields and logit_bias, tool_choice and
 *                           response_format
 *
 * Strings are copied out of the jansson tree, which is freed before return.
 * Limits that need the model (context length, token ids in range) are
 * checked by the caller after tokenizing.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/colid/request/colid_request.h"

int colid_error_set(struct colid_error *e, int status, const char *type, const char *code,
                    const char *param, const char *fmt, ...)
{
	va_list ap;

	e->status = status;
	e->type = type;
	e->code = code;
	snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

char *colid_error_json(const struct colid_error *e)
{
	json_t *o = json_pack("{s:{s:s,s:s,s:o,s:o}}", "error", "message", e->message, "type",
	                      e->type ? e->type : "invalid_request_error", "param",
	                      e->param[0] ? json_string(e->param) : json_null(), "code",
	                      e->code ? json_string(e->code) : json_null());
	char *s;

	if (!o) /* a message truncated inside a UTF-8 sequence: say less */
		o = json_pack("{s:{s:s,s:s,s:n,s:n}}", "error", "message", "invalid request",
		              "type", e->type ? e->type : "invalid_request_error", "param", "code");
	s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	return s;
}

long colid_utf8_invalid_at(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < n) {
		unsigned c = p[i];
		size_t k;
		unsigned cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			k = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			k = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			k = 3, cp = c & 0x07;
		else
			return (long)i;
		for (size_t j = 1; j <= k; j++) {
			if (i + j >= n || (p[i + j] & 0xc0) != 0x80)
				return (long)i;
			cp = cp << 6 | (p[i + j] & 0x3f);
		}
		if ((k == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
		    (k == 3 && (cp < 0x10000 || cp > 0x10ffff)))
			return (long)i;
		i += k + 1;
	}
	return -1;
}

const char *colid_json_type(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

int colid_json_number(const char *k, json_t *v, double lo, double hi, double *out,
                      struct colid_error *e)
{
	double x;

	if (!json_is_number(v))
		return BAD(e, k, "'%s' must be a number, got %s", k, colid_json_type(v));
	x = json_number_value(v);
	if (!(x >= lo && x <= hi))
		return BAD(e, k, "'%s' must be between %g and %g, got %g", k, lo, hi, x);
	*out = x;
	return 0;
}

int colid_json_int(const char *k, json_t *v, long long lo, long long hi, long long *out,
                   struct colid_error *e)
{
	long long x;

	if (!json_is_integer(v))
		return BAD(e, k, "'%s' must be an integer, got %s", k, colid_json_type(v));
	x = json_integer_value(v);
	if (x < lo || x > hi)
		return BAD(e, k, "'%s' must be between %lld and %lld, got %lld", k, lo, hi, x);
	*out = x;
	return 0;
}

/* OpenAI fields coli accepts only at the value that means "off". */
static int neutral(const char *k, json_t *v, struct colid_error *e)
{
	if (json_is_null(v))
		return 0;
	if (!strcmp(k, "best_of")) {
		if (json_is_integer(v) && json_integer_value(v) == 1)
			return 0;
		return BAD(e, k, "'best_of' must be 1: coli returns every choice it makes ('n')");
	}
	if (!strcmp(k, "echo")) {
		if (json_is_false(v))
			return 0;
		return BAD(e, k, "'echo' is not supported");
	}
	if (!strcmp(k, "user")) {
		if (json_is_string(v))
			return 0;
		return BAD(e, k, "'user' must be a string, got %s", colid_json_type(v));
	}
	return BAD(e, k, "Unrecognized request argument supplied: %s", k);
}

static int parse_field(const char *k, json_t *v, struct colid_request *r, struct colid_error *e)
{
	int chat = r->ep == COLID_EP_CHAT;
	long long i;
	double d;
	int rc;

	if (!strcmp(k, "model")) {
		if (!json_is_string(v))
			return BAD(e, k, "'model' must be a string, got %s", colid_json_type(v));
		r->model = strdup(json_string_value(v));
		return r->model ? 0 : -ENOMEM;
	}
	if (chat && !strcmp(k, "messages"))
		return colid_request_messages_parse(v, r, e);
	if (!chat && !strcmp(k, "prompt"))
		return colid_request_prompt_parse(v, r, e);
	if (json_is_null(v) && strcmp(k, "messages") && strcmp(k, "prompt"))
		return 0; /* null: the default, as the OpenAI clients send it */
	if (!strcmp(k, "max_tokens") || (chat && !strcmp(k, "max_completion_tokens"))) {
		rc = colid_json_int(k, v, 1, INT32_MAX, &i, e);
		r->max_tokens = (int)i;
		return rc;
	}
	if (!strcmp(k, "temperature")) {
		rc = colid_json_number(k, v, 0, 2, &d, e);
		r->temperature = d;
		return rc;
	}
	if (!strcmp(k, "top_p")) {
		rc = colid_json_number(k, v, 0, 1, &d, e);
		if (!rc && d <= 0)
			return BAD(e, k, "'top_p' must be greater than 0");
		r->top_p = d;
		return rc;
	}
	if (!strcmp(k, "top_k")) {
		rc = colid_json_int(k, v, 0, INT32_MAX, &i, e);
		r->top_k = (int)i;
		return rc;
	}
	if (!strcmp(k, "seed")) {
		if (!json_is_integer(v))
			return BAD(e, k, "'seed' must be an integer, got %s", colid_json_type(v));
		r->seed = (uint64_t)json_integer_value(v);
		r->has_seed = 1;
		return 0;
	}
	if (!strcmp(k, "stop"))
		return colid_request_stop_parse(v, r, e);
	if (!strcmp(k, "stream")) {
		if (!json_is_boolean(v))
			return BAD(e, k, "'stream' must be a boolean, got %s", colid_json_type(v));
		r->stream = json_is_true(v);
		return 0;
	}
	if (!strcmp(k, "return_token_ids")) {
		if (!json_is_boolean(v))
			return BAD(e, k, "'return_token_ids' must be a boolean, got %s",
			           colid_json_type(v));
		r->return_token_ids = json_is_true(v);
		return 0;
	}
	if (!strcmp(k, "stream_options")) {
		json_t *u = json_object_get(v, "include_usage");
		const char *key;
		json_t *x;

		if (!json_is_object(v))
			return BAD(e, k, "'stream_options' must be an object, got %s",
			           colid_json_type(v));
		json_object_foreach(v, key, x)
		{
			if (strcmp(key, "include_usage"))
				return BAD(e, k, "'stream_options': unrecognized field '%s'", key);
		}
		if (u && !json_is_boolean(u))
			return BAD(e, k, "'stream_options.include_usage' must be a boolean");
		r->include_usage = json_is_true(u);
		return 0;
	}
	if (chat && !strcmp(k, "chat_template_kwargs"))
		return colid_request_kwargs_parse(v, r, e);
	if (chat && !strcmp(k, "tools"))
		return colid_request_tools_parse(v, r, e);
	if (chat && (!strcmp(k, "tool_choice") || !strcmp(k, "response_format")))
		return colid_request_choice_parse(k, v, r, e);
	rc = colid_request_sampling_parse(k, v, r, e);
	return rc <= 0 ? rc : neutral(k, v, e);
}

int colid_request_parse(const char *body, size_t len, enum colid_endpoint ep,
                        struct colid_request *r, struct colid_error *e)
{
	json_error_t jerr;
	json_t *root, *v;
	const char *k;
	long bad;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	r->ep = ep;
	r->max_tokens = -1;
	r->enable_thinking = -1;
	r->temperature = 1;
	r->top_p = 1;
	r->n = 1;
	r->repetition_penalty = 1;
	r->logprobs = -1;
	r->top_logprobs = -1;
	if (!len)
		return BAD(e, NULL, "the request body is empty; send a JSON object");
	bad = colid_utf8_invalid_at(body, len);
	if (bad >= 0)
		return BAD(e, NULL, "the request body is not valid UTF-8 (byte offset %ld, 0x%02x)",
		           bad, (unsigned char)body[bad]);
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return BAD(e, NULL, "malformed JSON at line %d column %d: %s", jerr.line,
		           jerr.column, jerr.text);
	if (!json_is_object(root)) {
		rc = BAD(e, NULL, "the request body must be a JSON object, got %s",
		         colid_json_type(root));
		goto out;
	}
	json_object_foreach(root, k, v)
	{
		rc = parse_field(k, v, r, e);
		if (rc)
			goto out;
	}
	if (ep == COLID_EP_CHAT && !r->msgs)
		rc = BAD(e, "messages", "'messages' is required");
	else if (ep == COLID_EP_COMPLETIONS && !r->n_prompts)
		rc = BAD(e, "prompt", "'prompt' is required");
	else if (r->n_prompts * r->n > COLID_MAX_N)
		rc = BAD(e, "n",
		         "%d prompts of 'n' %d choices each make %d; at most %d choices a request",
		         r->n_prompts, r->n, r->n_prompts * r->n, COLID_MAX_N);
	else if (r->top_logprobs >= 0 && r->logprobs < 0)
		rc = BAD(e, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
	else if (r->top_logprobs >= 0)
		r->logprobs = r->top_logprobs;
out:
	json_decref(root);
	if (rc == -ENOMEM)
		colid_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
	if (rc)
		colid_request_free(r);
	return rc;
}

void colid_request_free(struct colid_request *r)
{
	for (int i = 0; i < r->n_msgs; i++) {
		free((char *)r->msgs[i].role);
		free((char *)r->msgs[i].content);
	}
	free(r->msgs);
	free(r->messages_json);
	free(r->tools_json);
	free(r->kwargs_json);
	free(r->schema_json);
	free(r->tool_name);
	free(r->model);
	for (int i = 0; i < r->n_prompts; i++) {
		free(r->prompts[i].text);
		free(r->prompts[i].ids);
	}
	free(r->prompts);
	for (int i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	free(r->bias);
	memset(r, 0, sizeof(*r));
}
