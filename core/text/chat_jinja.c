/*
 * core/text/chat_jinja.c — a chat request rendered with the model's own
 * Jinja template (core/jinja), or with its family's C renderer
 * (core/text/chat.c) when the template is missing, outside core/jinja's
 * subset, or --chat-template builtin asked for the family.
 *
 * The Jinja context is what transformers' apply_chat_template passes to
 * jinja2's render(), as one JSON object:
 *
 *   {"messages": [...],            the request's messages as given (tool_calls,
 *                                  reasoning_content, the tool role, content
 *                                  parts), or {role, content} built from msgs
 *    "tools": [...] | null,        the tool schemas
 *    "documents": null,
 *    "add_generation_prompt": b,
 *    "bos_token": "...", "eos_token": "...",   the tokenizer's (kwargs may override)
 *    "enable_thinking": b,         only when given
 *    ...chat_template_kwargs}      any other variable the template reads
 *
 * A kwargs key naming one of messages, tools, documents or
 * add_generation_prompt is refused (Python refuses the duplicate keyword).
 * Pure (no engine): colid's request fuzzer links it.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"
#include "core/jinja/jinja.h"

void coli_chat_template_free(struct coli_chat_template *t)
{
	coli_jinja_free(t->jinja);
	t->jinja = NULL;
}

const char *coli_chat_renderer_name(const struct coli_chat_template *t)
{
	return t->jinja ? "jinja" : coli_chat_family_name(t->family);
}

static json_t *load(const char *text, const char *what, json_type want, char *err, size_t errlen)
{
	json_error_t je;
	json_t *j = json_loads(text, JSON_DECODE_ANY, &je);

	if (!j) {
		snprintf(err, errlen, "%s: bad JSON: %s", what, je.text);
		return NULL;
	}
	if (json_typeof(j) != want && !(want == JSON_ARRAY && json_is_null(j))) {
		snprintf(err, errlen, "%s must be %s", what,
		         want == JSON_ARRAY ? "an array" : "an object");
		json_decref(j);
		return NULL;
	}
	return j;
}

static json_t *context(const struct coli_chat_template *t, const struct coli_chat_call *c,
                       char *err, size_t errlen)
{
	json_t *ctx = json_object(), *msgs = NULL, *tools = NULL, *kw = NULL;

	if (!ctx)
		goto nomem;
	if (c->messages_json) {
		if (!(msgs = load(c->messages_json, "messages", JSON_ARRAY, err, errlen)))
			goto bad;
	} else {
		msgs = json_array();
		for (int i = 0; msgs && i < c->n_msgs; i++) {
			json_t *m =
			    json_pack("{s:s,s:s}", "role", c->msgs[i].role ? c->msgs[i].role : "",
			              "content", c->msgs[i].content ? c->msgs[i].content : "");

			if (!m || json_array_append_new(msgs, m))
				goto nomem;
		}
	}
	if (c->tools_json && !(tools = load(c->tools_json, "tools", JSON_ARRAY, err, errlen)))
		goto bad;
	if (c->kwargs_json &&
	    !(kw = load(c->kwargs_json, "chat_template_kwargs", JSON_OBJECT, err, errlen)))
		goto bad;
	if (!msgs || json_object_set_new(ctx, "messages", msgs) ||
	    json_object_set_new(ctx, "tools", tools ? tools : json_null()) ||
	    json_object_set_new(ctx, "documents", json_null()) ||
	    json_object_set_new(ctx, "add_generation_prompt",
	                        json_boolean(c->add_generation_prompt)) ||
	    json_object_set_new(ctx, "bos_token", json_string(t->bos_token)) ||
	    json_object_set_new(ctx, "eos_token", json_string(t->eos_token))) {
		msgs = tools = NULL;
		goto nomem;
	}
	msgs = tools = NULL;
	if (c->enable_thinking >= 0 &&
	    json_object_set_new(ctx, "enable_thinking", json_boolean(c->enable_thinking)))
		goto nomem;
	if (kw) {
		const char *k;
		json_t *v;

		json_object_foreach(kw, k, v)
		{
			if (!strcmp(k, "messages") || !strcmp(k, "tools") ||
			    !strcmp(k, "documents") || !strcmp(k, "add_generation_prompt")) {
				snprintf(err, errlen,
				         "chat_template_kwargs: '%s' is set by the request itself",
				         k);
				goto bad;
			}
			if (json_object_set(ctx, k, v))
				goto nomem;
		}
		json_decref(kw);
	}
	return ctx;
nomem:
	snprintf(err, errlen, "out of memory");
bad:
	json_decref(ctx);
	json_decref(msgs);
	json_decref(tools);
	json_decref(kw);
	return NULL;
}

int coli_chat_render_call(const struct coli_chat_template *t, const struct coli_chat_call *c,
                          char **out, size_t *len, char *err, size_t errlen)
{
	json_t *ctx;
	int rc;

	*out = NULL;
	*len = 0;
	if (err && errlen)
		err[0] = 0;
	if (!t->jinja) {
		struct coli_chat_template f = *t;

		if (c->tools_json && strcmp(c->tools_json, "null")) {
			snprintf(
			    err, errlen,
			    "the built-in %s renderer does not render tools (the model's Jinja "
			    "template does: %s)",
			    coli_chat_family_name(t->family),
			    t->jinja_why[0] ? t->jinja_why : "not in use");
			return -ENOTSUP;
		}
		if (c->enable_thinking >= 0)
			f.no_think = !c->enable_thinking;
		f.think_on = c->enable_thinking == 1;
		rc = coli_chat_render(&f, c->msgs, c->n_msgs, c->add_generation_prompt, out, len);
		if (rc == -EINVAL)
			snprintf(err, errlen,
			         "the built-in %s renderer takes the roles system, user and "
			         "assistant with text content",
			         coli_chat_family_name(t->family));
		return rc;
	}
	ctx = context(t, c, err, errlen);
	if (!ctx)
		return -EINVAL;
	rc = coli_jinja_render(t->jinja, ctx, c->now, NULL, out, len, err, errlen);
	json_decref(ctx);
	return rc;
}
