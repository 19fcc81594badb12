/*
 * tools/colid_request.c — an HTTP body to a struct colid_request, or an
 * OpenAI-style error saying which field is wrong and why.
 *
 * Pure: no engine, no sockets, no globals, so tools/fuzz_request.c can drive
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
 *      top_logprobs) in parse_sampling, each with its range
 *   4. required fields present: messages (chat) or prompt (completions),
 *      not empty; a completions prompt is a string, token ids, or a batch
 *      of either (its prompts times n at most COLID_MAX_N choices)
 *
 * Chat messages may carry tool_calls, tool_call_id, reasoning_content and
 * thinking, and the role tool; they, tools and chat_template_kwargs are
 * kept as JSON text for the Jinja renderer (core/text/chat_jinja.c), which
 * passes them to the model's template; the built-in renderers refuse what
 * they cannot render when the prompt is rendered (colid_http.c).
 *
 * Strings are copied out of the jansson tree, which is freed before return.
 * Limits that need the model (context length, token ids in range) are
 * checked by the caller after tokenizing.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/colid.h"

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

#define BAD(e, param, ...)                                                                         \
	colid_error_set(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

static const char *type_name(const json_t *v)
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

static int want_number(const char *k, json_t *v, double lo, double hi, double *out,
                       struct colid_error *e)
{
	double x;

	if (!json_is_number(v))
		return BAD(e, k, "'%s' must be a number, got %s", k, type_name(v));
	x = json_number_value(v);
	if (!(x >= lo && x <= hi))
		return BAD(e, k, "'%s' must be between %g and %g, got %g", k, lo, hi, x);
	*out = x;
	return 0;
}

static int want_int(const char *k, json_t *v, long long lo, long long hi, long long *out,
                    struct colid_error *e)
{
	long long x;

	if (!json_is_integer(v))
		return BAD(e, k, "'%s' must be an integer, got %s", k, type_name(v));
	x = json_integer_value(v);
	if (x < lo || x > hi)
		return BAD(e, k, "'%s' must be between %lld and %lld, got %lld", k, lo, hi, x);
	*out = x;
	return 0;
}

static char *dup_n(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	if (p) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

/* message content: a string, or an array of {"type":"text","text":...} parts */
static int content_text(json_t *c, int i, char **out, struct colid_error *e)
{
	size_t idx, total = 0;
	json_t *part;
	char param[64];

	snprintf(param, sizeof(param), "messages[%d].content", i);
	if (json_is_null(c)) {
		*out = strdup("");
		return *out ? 0 : -ENOMEM;
	}
	if (json_is_string(c)) {
		*out = dup_n(json_string_value(c), json_string_length(c));
		return *out ? 0 : -ENOMEM;
	}
	if (!json_is_array(c))
		return BAD(e, param, "'%s' must be a string or an array of text parts, got %s",
		           param, type_name(c));
	json_array_foreach(c, idx, part)
	{
		json_t *t = json_object_get(part, "type"), *x = json_object_get(part, "text");

		if (!json_is_object(part) || !json_is_string(t) ||
		    strcmp(json_string_value(t), "text") || !json_is_string(x))
			return BAD(e, param,
			           "'%s[%zu]': only {\"type\": \"text\", \"text\": ...} "
			           "parts are supported",
			           param, idx);
		total += json_string_length(x);
	}
	*out = malloc(total + 1);
	if (!*out)
		return -ENOMEM;
	total = 0;
	json_array_foreach(c, idx, part)
	{
		json_t *x = json_object_get(part, "text");

		memcpy(*out + total, json_string_value(x), json_string_length(x));
		total += json_string_length(x);
	}
	(*out)[total] = 0;
	return 0;
}

/* The messages as the Jinja renderer sees them: as sent, but for the role
 * (developer -> system) and the content (parts joined), both as in r->msgs. */
static int messages_json(json_t *v, struct colid_request *r)
{
	json_t *a = json_deep_copy(v), *m;
	size_t i;

	if (!a)
		return -ENOMEM;
	json_array_foreach(a, i, m)
	{
		if (json_object_set_new(m, "role", json_string(r->msgs[i].role)) ||
		    (json_object_get(m, "content") &&
		     !json_is_null(json_object_get(m, "content")) &&
		     json_object_set_new(m, "content", json_string(r->msgs[i].content)))) {
			json_decref(a);
			return -ENOMEM;
		}
	}
	r->messages_json = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	return r->messages_json ? 0 : -ENOMEM;
}

static int parse_messages(json_t *v, struct colid_request *r, struct colid_error *e)
{
	size_t i;
	json_t *m;

	if (!json_is_array(v))
		return BAD(e, "messages", "'messages' must be an array, got %s", type_name(v));
	if (json_array_size(v) == 0)
		return BAD(e, "messages", "'messages' must contain at least one message");
	if (json_array_size(v) > 4096)
		return BAD(e, "messages", "'messages' holds more than 4096 messages");
	r->msgs = calloc(json_array_size(v), sizeof(*r->msgs));
	if (!r->msgs)
		return -ENOMEM;
	json_array_foreach(v, i, m)
	{
		const char *key, *role;
		json_t *x;
		char param[64];
		int rc;

		snprintf(param, sizeof(param), "messages[%zu]", i);
		if (!json_is_object(m))
			return BAD(e, param, "'%s' must be an object, got %s", param, type_name(m));
		json_object_foreach(m, key, x)
		{
			if (strcmp(key, "role") && strcmp(key, "content") && strcmp(key, "name") &&
			    strcmp(key, "tool_calls") && strcmp(key, "tool_call_id") &&
			    strcmp(key, "reasoning_content") && strcmp(key, "thinking"))
				return BAD(e, param, "'%s': unrecognized field '%s'", param, key);
		}
		if (json_object_get(m, "tool_calls") &&
		    !json_is_array(json_object_get(m, "tool_calls")))
			return BAD(e, param, "'%s.tool_calls' must be an array", param);
		x = json_object_get(m, "role");
		if (!json_is_string(x))
			return BAD(e, param, "'%s.role' must be a string", param);
		role = json_string_value(x);
		if (!strcmp(role, "developer")) /* OpenAI's newer name for system */
			role = "system";
		if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") &&
		    strcmp(role, "tool"))
			return BAD(
			    e, param,
			    "'%s.role' is '%s'; supported roles: system, user, assistant, tool",
			    param, role);
		if (!json_object_get(m, "content") && !json_object_get(m, "tool_calls"))
			return BAD(e, param, "'%s.content' is missing", param);
		if (json_object_get(m, "name") && !json_is_string(json_object_get(m, "name")))
			return BAD(e, param, "'%s.name' must be a string", param);
		r->msgs[i].role = strdup(role);
		rc = r->msgs[i].role ? 0 : -ENOMEM;
		if (!rc)
			rc = content_text(json_object_get(m, "content")
			                      ? json_object_get(m, "content")
			                      : json_null(), /* tool_calls only */
			                  (int)i, (char **)&r->msgs[i].content, e);
		r->n_msgs = (int)i + 1;
		if (rc)
			return rc;
	}
	return messages_json(v, r);
}

/* One prompt of a completions request: text (name: its field, "prompt" or
 * "prompt[i]"), or an array of token ids. */
static int one_prompt(json_t *v, const char *name, struct colid_prompt *p, struct colid_error *e)
{
	json_t *x;
	size_t i;

	if (json_is_string(v)) {
		p->len = json_string_length(v);
		p->text = dup_n(json_string_value(v), p->len);
		if (!p->text)
			return -ENOMEM;
		return p->len ? 0 : BAD(e, "prompt", "'%s' is empty", name);
	}
	if (json_array_size(v) == 0)
		return BAD(e, "prompt", "'%s' is empty", name);
	if (json_array_size(v) > (1u << 20))
		return BAD(e, "prompt", "'%s' holds more than 1048576 token ids", name);
	p->ids = malloc(sizeof(int) * json_array_size(v));
	if (!p->ids)
		return -ENOMEM;
	json_array_foreach(v, i, x)
	{
		if (!json_is_integer(x) || json_integer_value(x) < 0 ||
		    json_integer_value(x) > INT32_MAX)
			return BAD(
			    e, "prompt", "'%s[%zu]' must be a token id (an integer >= 0), got %s",
			    name, i,
			    json_is_integer(x) ? "a negative or huge integer" : type_name(x));
		p->ids[i] = (int)json_integer_value(x);
	}
	p->n_ids = (int)json_array_size(v);
	return 0;
}

/* prompt: a string, an array of token ids, or a batch (OpenAI's forms): an
 * array of strings or of token-id arrays, one prompt each. */
static int parse_prompt(json_t *v, struct colid_request *r, struct colid_error *e)
{
	json_t *first = json_array_get(v, 0), *x;
	int batch = json_is_string(first) || json_is_array(first);
	size_t i, n = batch ? json_array_size(v) : 1;

	if (!json_is_string(v) && !json_is_array(v))
		return BAD(e, "prompt",
		           "'prompt' must be a string, an array of token ids, or an array of "
		           "strings or of token-id arrays; got %s",
		           type_name(v));
	if (n > COLID_MAX_N)
		return BAD(e, "prompt", "'prompt' holds %zu prompts; at most %d", n, COLID_MAX_N);
	r->prompts = calloc(n, sizeof(*r->prompts));
	if (!r->prompts)
		return -ENOMEM;
	if (!batch) {
		r->n_prompts = 1;
		return one_prompt(v, "prompt", &r->prompts[0], e);
	}
	r->prompt_batch = 1;
	json_array_foreach(v, i, x)
	{
		char name[32];
		int rc;

		snprintf(name, sizeof(name), "prompt[%zu]", i);
		if (json_typeof(x) != json_typeof(first))
			return BAD(e, "prompt",
			           "'prompt' is a batch of %s; '%s' is %s (send all strings or "
			           "all token-id arrays)",
			           json_is_string(first) ? "strings" : "token-id arrays", name,
			           type_name(x));
		r->n_prompts = (int)i + 1;
		if ((rc = one_prompt(x, name, &r->prompts[i], e)))
			return rc;
	}
	return 0;
}

static int parse_stop(json_t *v, struct colid_request *r, struct colid_error *e)
{
	json_t *x;
	size_t i;

	if (json_is_null(v))
		return 0;
	if (json_is_string(v)) {
		json_t *a = json_array();
		int rc;

		if (!a)
			return -ENOMEM;
		json_array_append(a, v);
		rc = parse_stop(a, r, e);
		json_decref(a);
		return rc;
	}
	if (!json_is_array(v))
		return BAD(e, "stop", "'stop' must be a string or an array of strings, got %s",
		           type_name(v));
	if (json_array_size(v) > COLID_MAX_STOP)
		return BAD(e, "stop", "'stop' holds more than %d strings", COLID_MAX_STOP);
	json_array_foreach(v, i, x)
	{
		if (!json_is_string(x))
			return BAD(e, "stop", "'stop[%zu]' must be a string, got %s", i,
			           type_name(x));
		if (json_string_length(x) == 0 || json_string_length(x) > COLID_MAX_STOP_LEN ||
		    strlen(json_string_value(x)) != json_string_length(x))
			return BAD(e, "stop", "'stop[%zu]' must hold 1 to %d bytes", i,
			           COLID_MAX_STOP_LEN);
		r->stop[r->n_stop] = strdup(json_string_value(x));
		if (!r->stop[r->n_stop])
			return -ENOMEM;
		r->n_stop++;
	}
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
		return BAD(e, k, "'user' must be a string, got %s", type_name(v));
	}
	return BAD(e, k, "Unrecognized request argument supplied: %s", k);
}

/* logit_bias: {"token id": bias}, ids as decimal strings (OpenAI's form),
 * biases in [-100, 100]; ids are checked against the vocabulary later. */
static int parse_bias(json_t *v, struct colid_request *r, struct colid_error *e)
{
	const char *key;
	json_t *x;

	if (!json_is_object(v))
		return BAD(e, "logit_bias",
		           "'logit_bias' must be an object of token ids to biases, got %s",
		           type_name(v));
	if (json_object_size(v) > COLID_MAX_BIAS)
		return BAD(e, "logit_bias", "'logit_bias' holds more than %d entries",
		           COLID_MAX_BIAS);
	free(r->bias);
	r->n_bias = 0;
	r->bias = malloc(sizeof(*r->bias) * (json_object_size(v) ? json_object_size(v) : 1));
	if (!r->bias)
		return -ENOMEM;
	json_object_foreach(v, key, x)
	{
		int id;

		if (coli_parse_int(key, 0, INT32_MAX, &id))
			return BAD(e, "logit_bias",
			           "'logit_bias': key '%.40s' is not a token id (a decimal "
			           "integer >= 0)",
			           key);
		if (!json_is_number(x) || !(json_number_value(x) >= -100) ||
		    !(json_number_value(x) <= 100))
			return BAD(e, "logit_bias",
			           "'logit_bias[\"%d\"]' must be a number between -100 and 100",
			           id);
		r->bias[r->n_bias++] = (struct coli_logit_bias){id, (float)json_number_value(x)};
	}
	return 0;
}

/* n, min_p, the penalties, logit_bias, logprobs and top_logprobs (1: not
 * one of them). */
static int parse_sampling(const char *k, json_t *v, struct colid_request *r, struct colid_error *e)
{
	int chat = r->ep == COLID_EP_CHAT, rc = 1;
	long long i;
	double d;

	if (!strcmp(k, "n")) {
		rc = want_int(k, v, 1, COLID_MAX_N, &i, e);
		r->n = (int)i;
	} else if (!strcmp(k, "min_p")) {
		rc = want_number(k, v, 0, 1, &d, e);
		r->min_p = d;
	} else if (!strcmp(k, "presence_penalty") || !strcmp(k, "frequency_penalty")) {
		rc = want_number(k, v, -2, 2, &d, e);
		*(k[0] == 'p' ? &r->presence_penalty : &r->frequency_penalty) = d;
	} else if (!strcmp(k, "repetition_penalty")) {
		rc = want_number(k, v, 0, 10, &d, e);
		if (!rc && d <= 0)
			return BAD(e, k, "'repetition_penalty' must be greater than 0");
		r->repetition_penalty = d;
	} else if (!strcmp(k, "logit_bias")) {
		rc = parse_bias(v, r, e);
	} else if (!strcmp(k, "logprobs") && chat) {
		if (!json_is_boolean(v))
			return BAD(e, k, "'logprobs' must be a boolean, got %s", type_name(v));
		r->logprobs = json_is_true(v) ? 0 : -1;
		rc = 0;
	} else if (!strcmp(k, "logprobs")) { /* completions: how many top ones, or null */
		rc = want_int(k, v, 0, COLI_SAMPLER_MAX_TOP, &i, e);
		r->logprobs = (int)i;
	} else if (!strcmp(k, "top_logprobs") && chat) {
		rc = want_int(k, v, 0, COLI_SAMPLER_MAX_TOP, &i, e);
		r->top_logprobs = (int)i;
	}
	return rc;
}

/* chat_template_kwargs (vLLM's and SGLang's field): variables for the
 * model's Jinja template, kept as JSON (r->kwargs_json). enable_thinking, a
 * boolean, is also the switch of the built-in family renderers, which read
 * no other variable (as jinja2 ignores a variable a template does not read). */
static int parse_template_kwargs(json_t *v, struct colid_request *r, struct colid_error *e)
{
	json_t *x = json_object_get(v, "enable_thinking"), *rest;

	if (!json_is_object(v))
		return BAD(e, "chat_template_kwargs",
		           "'chat_template_kwargs' must be an object, got %s", type_name(v));
	if (x && !json_is_null(x) && !json_is_boolean(x))
		return BAD(e, "chat_template_kwargs",
		           "'chat_template_kwargs.enable_thinking' must be a boolean, got %s",
		           type_name(x));
	if (x && !json_is_null(x))
		r->enable_thinking = json_is_true(x);
	rest = json_copy(v);
	if (!rest)
		return -ENOMEM;
	json_object_del(rest, "enable_thinking");
	if (json_object_size(rest)) {
		r->kwargs_json = json_dumps(rest, JSON_COMPACT);
		if (!r->kwargs_json) {
			json_decref(rest);
			return -ENOMEM;
		}
	}
	json_decref(rest);
	return 0;
}

/* tools: an array of tool schemas, rendered by the model's Jinja template */
static int parse_tools(json_t *v, struct colid_request *r, struct colid_error *e)
{
	size_t i;
	json_t *t;

	if (!json_is_array(v))
		return BAD(e, "tools", "'tools' must be an array, got %s", type_name(v));
	json_array_foreach(v, i, t)
	{
		if (!json_is_object(t))
			return BAD(e, "tools", "'tools[%zu]' must be an object, got %s", i,
			           type_name(t));
	}
	r->tools_json = json_dumps(v, JSON_COMPACT);
	return r->tools_json ? 0 : -ENOMEM;
}

/* tool_choice: "auto" (what happens), "none" (the tools still reach the
 * template, the reply is not read for calls), "required" or
 * {"type": "function", "function": {"name": N}} (the output constrained to a
 * call: colid_grammar_of). response_format: {"type": "text"}, {"type":
 * "json_object"} or {"type": "json_schema", "json_schema": {"name": ..,
 * "schema": {..}, "strict": ..}} (strict or not, the schema is enforced). */
static int parse_choice(const char *k, json_t *v, struct colid_request *r, struct colid_error *e)
{
	const char *s = json_string_value(v), *t = json_string_value(json_object_get(v, "type"));

	if (!strcmp(k, "tool_choice")) {
		json_t *fn = json_object_get(v, "function");
		const char *name = json_string_value(json_object_get(fn, "name"));

		if (s && (!strcmp(s, "auto") || !strcmp(s, "none") || !strcmp(s, "required"))) {
			r->tool_choice_none = !strcmp(s, "none");
			r->tool_required = !strcmp(s, "required");
			return 0;
		}
		if (json_is_object(v) && t && !strcmp(t, "function") && name) {
			r->tool_name = strdup(name);
			return r->tool_name ? 0 : -ENOMEM;
		}
		return BAD(e, k,
		           "'tool_choice' may be \"auto\", \"none\", \"required\" or "
		           "{\"type\": \"function\", \"function\": {\"name\": NAME}}");
	}
	if (json_is_object(v) && t && !strcmp(t, "text") && json_object_size(v) == 1)
		return 0;
	if (json_is_object(v) && t && !strcmp(t, "json_object") && json_object_size(v) == 1) {
		r->json_object = 1;
		return 0;
	}
	if (json_is_object(v) && t && !strcmp(t, "json_schema")) {
		json_t *js = json_object_get(v, "json_schema"),
		       *schema = json_object_get(js, "schema");

		if (!json_is_object(js) || !json_is_string(json_object_get(js, "name")))
			return BAD(e, k,
			           "'response_format.json_schema' must be an object with a "
			           "'name' (and a 'schema')");
		if (schema && !json_is_object(schema) && !json_is_boolean(schema))
			return BAD(e, k, "'response_format.json_schema.schema' must be an object");
		r->schema_json =
		    schema ? json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("{}");
		return r->schema_json ? 0 : -ENOMEM;
	}
	return BAD(e, k,
	           "'response_format' may be {\"type\": \"text\"}, {\"type\": "
	           "\"json_object\"} or {\"type\": \"json_schema\", \"json_schema\": "
	           "{\"name\": .., \"schema\": {..}}}");
}

static int parse_field(const char *k, json_t *v, struct colid_request *r, struct colid_error *e)
{
	int chat = r->ep == COLID_EP_CHAT;
	long long i;
	double d;
	int rc;

	if (!strcmp(k, "model")) {
		if (!json_is_string(v))
			return BAD(e, k, "'model' must be a string, got %s", type_name(v));
		r->model = strdup(json_string_value(v));
		return r->model ? 0 : -ENOMEM;
	}
	if (chat && !strcmp(k, "messages"))
		return parse_messages(v, r, e);
	if (!chat && !strcmp(k, "prompt"))
		return parse_prompt(v, r, e);
	if (json_is_null(v) && strcmp(k, "messages") && strcmp(k, "prompt"))
		return 0; /* null: the default, as the OpenAI clients send it */
	if (!strcmp(k, "max_tokens") || (chat && !strcmp(k, "max_completion_tokens"))) {
		rc = want_int(k, v, 1, INT32_MAX, &i, e);
		r->max_tokens = (int)i;
		return rc;
	}
	if (!strcmp(k, "temperature")) {
		rc = want_number(k, v, 0, 2, &d, e);
		r->temperature = d;
		return rc;
	}
	if (!strcmp(k, "top_p")) {
		rc = want_number(k, v, 0, 1, &d, e);
		if (!rc && d <= 0)
			return BAD(e, k, "'top_p' must be greater than 0");
		r->top_p = d;
		return rc;
	}
	if (!strcmp(k, "top_k")) {
		rc = want_int(k, v, 0, INT32_MAX, &i, e);
		r->top_k = (int)i;
		return rc;
	}
	if (!strcmp(k, "seed")) {
		if (!json_is_integer(v))
			return BAD(e, k, "'seed' must be an integer, got %s", type_name(v));
		r->seed = (uint64_t)json_integer_value(v);
		r->has_seed = 1;
		return 0;
	}
	if (!strcmp(k, "stop"))
		return parse_stop(v, r, e);
	if (!strcmp(k, "stream")) {
		if (!json_is_boolean(v))
			return BAD(e, k, "'stream' must be a boolean, got %s", type_name(v));
		r->stream = json_is_true(v);
		return 0;
	}
	if (!strcmp(k, "return_token_ids")) {
		if (!json_is_boolean(v))
			return BAD(e, k, "'return_token_ids' must be a boolean, got %s",
			           type_name(v));
		r->return_token_ids = json_is_true(v);
		return 0;
	}
	if (!strcmp(k, "stream_options")) {
		json_t *u = json_object_get(v, "include_usage");
		const char *key;
		json_t *x;

		if (!json_is_object(v))
			return BAD(e, k, "'stream_options' must be an object, got %s",
			           type_name(v));
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
		return parse_template_kwargs(v, r, e);
	if (chat && !strcmp(k, "tools"))
		return parse_tools(v, r, e);
	if (chat && (!strcmp(k, "tool_choice") || !strcmp(k, "response_format")))
		return parse_choice(k, v, r, e);
	rc = parse_sampling(k, v, r, e);
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
		rc =
		    BAD(e, NULL, "the request body must be a JSON object, got %s", type_name(root));
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
