/*
 * tools/colid/request/colid_request_output.c — the fields of a request body that shape
 * the model's output (tools/colid/request/colid_request.c walks the body and hands them
 * here), each checked for its type and range:
 *
 *   stop                   a string or up to COLID_MAX_STOP strings of 1 to
 *                          COLID_MAX_STOP_LEN bytes (no NUL), r->stop
 *   n, min_p, presence_penalty, frequency_penalty, repetition_penalty,
 *   logprobs, top_logprobs the sampling fields beyond temperature / top_p /
 *                          top_k (the completions logprobs a count, the
 *                          chat one a boolean with top_logprobs beside it)
 *   logit_bias             {"token id": bias}: r->bias[r->n_bias], ids
 *                          checked against the vocabulary later
 *                          (colid_sampling_check)
 *   tool_choice,           chat: the switches of constrained decoding
 *   response_format        (r->tool_required, r->tool_name, r->json_object,
 *                          r->schema_json), compiled to a grammar by
 *                          colid_grammar_of (tools/colid/colid_sampling.c)
 *
 * Each parser fills r and returns 0, -EINVAL with e filled (a 400 naming
 * the field and why), or -ENOMEM; what it allocated before an error is r's,
 * freed by colid_request_free. Pure, as its caller.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tools/colid/request/colid_request.h"

/* stop: null (none), a string, or an array of strings (a string: as an
 * array of one). */
int colid_request_stop_parse(json_t *v, struct colid_request *r, struct colid_error *e)
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
		rc = colid_request_stop_parse(a, r, e);
		json_decref(a);
		return rc;
	}
	if (!json_is_array(v))
		return BAD(e, "stop", "'stop' must be a string or an array of strings, got %s",
		           colid_json_type(v));
	if (json_array_size(v) > COLID_MAX_STOP)
		return BAD(e, "stop", "'stop' holds more than %d strings", COLID_MAX_STOP);
	json_array_foreach(v, i, x)
	{
		if (!json_is_string(x))
			return BAD(e, "stop", "'stop[%zu]' must be a string, got %s", i,
			           colid_json_type(x));
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

/* logit_bias: {"token id": bias}, ids as decimal strings (OpenAI's form),
 * biases in [-100, 100]; ids are checked against the vocabulary later. */
static int parse_bias(json_t *v, struct colid_request *r, struct colid_error *e)
{
	const char *key;
	json_t *x;

	if (!json_is_object(v))
		return BAD(e, "logit_bias",
		           "'logit_bias' must be an object of token ids to biases, got %s",
		           colid_json_type(v));
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
int colid_request_sampling_parse(const char *k, json_t *v, struct colid_request *r,
                                 struct colid_error *e)
{
	int chat = r->ep == COLID_EP_CHAT, rc = 1;
	long long i;
	double d;

	if (!strcmp(k, "n")) {
		rc = colid_json_int(k, v, 1, COLID_MAX_N, &i, e);
		r->n = (int)i;
	} else if (!strcmp(k, "min_p")) {
		rc = colid_json_number(k, v, 0, 1, &d, e);
		r->min_p = d;
	} else if (!strcmp(k, "presence_penalty") || !strcmp(k, "frequency_penalty")) {
		rc = colid_json_number(k, v, -2, 2, &d, e);
		*(k[0] == 'p' ? &r->presence_penalty : &r->frequency_penalty) = d;
	} else if (!strcmp(k, "repetition_penalty")) {
		rc = colid_json_number(k, v, 0, 10, &d, e);
		if (!rc && d <= 0)
			return BAD(e, k, "'repetition_penalty' must be greater than 0");
		r->repetition_penalty = d;
	} else if (!strcmp(k, "logit_bias")) {
		rc = parse_bias(v, r, e);
	} else if (!strcmp(k, "logprobs") && chat) {
		if (!json_is_boolean(v))
			return BAD(e, k, "'logprobs' must be a boolean, got %s",
			           colid_json_type(v));
		r->logprobs = json_is_true(v) ? 0 : -1;
		rc = 0;
	} else if (!strcmp(k, "logprobs")) { /* completions: how many top ones, or null */
		rc = colid_json_int(k, v, 0, COLI_SAMPLER_MAX_TOP, &i, e);
		r->logprobs = (int)i;
	} else if (!strcmp(k, "top_logprobs") && chat) {
		rc = colid_json_int(k, v, 0, COLI_SAMPLER_MAX_TOP, &i, e);
		r->top_logprobs = (int)i;
	}
	return rc;
}

/* tool_choice: "auto" (what happens), "none" (the tools still reach the
 * template, the reply is not read for calls), "required" or
 * {"type": "function", "function": {"name": N}} (the output constrained to a
 * call: colid_grammar_of). response_format: {"type": "text"}, {"type":
 * "json_object"} or {"type": "json_schema", "json_schema": {"name": ..,
 * "schema": {..}, "strict": ..}} (strict or not, the schema is enforced). */
int colid_request_choice_parse(const char *k, json_t *v, struct colid_request *r,
                               struct colid_error *e)
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
