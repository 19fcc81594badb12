/*
 * tools/colid/request/colid_request_input.c — the fields of a request body that say what
 * the model reads (tools/colid/request/colid_request.c walks the body and hands them here):
 *
 *   messages              chat: an array of {role, content, name,
 *                         tool_calls, tool_call_id, reasoning_content,
 *                         thinking}; the role developer read as system, the
 *                         content a string or text parts joined; kept as
 *                         r->msgs and, for the Jinja renderer, as JSON text
 *                         (r->messages_json: as sent but for role and content)
 *   prompt                completions: a string, token ids, or a batch of
 *                         either (r->prompts, 1..COLID_MAX_N)
 *   tools                 chat: an array of tool schemas, kept as JSON text
 *   chat_template_kwargs  chat: enable_thinking read, the rest kept as JSON
 *
 * Chat messages may carry tool_calls, tool_call_id, reasoning_content and
 * thinking, and the role tool; they, tools and chat_template_kwargs are
 * kept as JSON text for the Jinja renderer (core/text/chat_jinja.c), which
 * passes them to the model's template; the built-in renderers refuse what
 * they cannot render when the prompt is rendered (colid_http.c).
 *
 * Each parser fills r and returns 0, -EINVAL with e filled (a 400 naming
 * the field, the index within it, and why), or -ENOMEM; what it allocated
 * before an error is r's, freed by colid_request_free. Pure, as its caller.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/colid/request/colid_request.h"

/* s[0, n) copied and NUL-terminated (a JSON string may hold NULs: its length
 * is json_string_length's, not strlen's). */
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
		           param, colid_json_type(c));
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

int colid_request_messages_parse(json_t *v, struct colid_request *r, struct colid_error *e)
{
	size_t i;
	json_t *m;

	if (!json_is_array(v))
		return BAD(e, "messages", "'messages' must be an array, got %s",
		           colid_json_type(v));
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
			return BAD(e, param, "'%s' must be an object, got %s", param,
			           colid_json_type(m));
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
			    json_is_integer(x) ? "a negative or huge integer" : colid_json_type(x));
		p->ids[i] = (int)json_integer_value(x);
	}
	p->n_ids = (int)json_array_size(v);
	return 0;
}

/* prompt: a string, an array of token ids, or a batch (OpenAI's forms): an
 * array of strings or of token-id arrays, one prompt each. */
int colid_request_prompt_parse(json_t *v, struct colid_request *r, struct colid_error *e)
{
	json_t *first = json_array_get(v, 0), *x;
	int batch = json_is_string(first) || json_is_array(first);
	size_t i, n = batch ? json_array_size(v) : 1;

	if (!json_is_string(v) && !json_is_array(v))
		return BAD(e, "prompt",
		           "'prompt' must be a string, an array of token ids, or an array of "
		           "strings or of token-id arrays; got %s",
		           colid_json_type(v));
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
			           colid_json_type(x));
		r->n_prompts = (int)i + 1;
		if ((rc = one_prompt(x, name, &r->prompts[i], e)))
			return rc;
	}
	return 0;
}

/* chat_template_kwargs (vLLM's and SGLang's field): variables for the
 * model's Jinja template, kept as JSON (r->kwargs_json). enable_thinking, a
 * boolean, is also the switch of the built-in family renderers, which read
 * no other variable (as jinja2 ignores a variable a template does not read). */
int colid_request_kwargs_parse(json_t *v, struct colid_request *r, struct colid_error *e)
{
	json_t *x = json_object_get(v, "enable_thinking"), *rest;

	if (!json_is_object(v))
		return BAD(e, "chat_template_kwargs",
		           "'chat_template_kwargs' must be an object, got %s", colid_json_type(v));
	if (x && !json_is_null(x) && !json_is_boolean(x))
		return BAD(e, "chat_template_kwargs",
		           "'chat_template_kwargs.enable_thinking' must be a boolean, got %s",
		           colid_json_type(x));
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
int colid_request_tools_parse(json_t *v, struct colid_request *r, struct colid_error *e)
{
	size_t i;
	json_t *t;

	if (!json_is_array(v))
		return BAD(e, "tools", "'tools' must be an array, got %s", colid_json_type(v));
	json_array_foreach(v, i, t)
	{
		if (!json_is_object(t))
			return BAD(e, "tools", "'tools[%zu]' must be an object, got %s", i,
			           colid_json_type(t));
	}
	r->tools_json = json_dumps(v, JSON_COMPACT);
	return r->tools_json ? 0 : -ENOMEM;
}
