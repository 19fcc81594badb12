/*
 * tools/colid/request/colid_tokenize.c — the bodies of POST /tokenize and POST /detokenize
 * to a struct colid_tokenize_req, or an OpenAI-style error (docs/api.md,
 * "Tokenizing"). Pure, as colid_request.c is: tools/fuzz/fuzz_tokenize.c drives
 * it with arbitrary bytes; colid_http.c runs the tokenizer and replies.
 *
 * The shapes are vLLM's, with llama-server's names accepted beside them:
 *
 *   /tokenize    {"prompt" | "content": TEXT,
 *                 "add_special_tokens" | "add_special": BOOL,   optional
 *                 "model": STRING}                              optional
 *             -> {"tokens": [ID...], "count": N, "max_model_len": CTX}
 *   /detokenize  {"tokens": [ID...], "model": STRING}
 *             -> {"prompt": TEXT, "content": TEXT}   (the same text twice)
 *
 * Each a 400 unless said: an empty body, invalid UTF-8, malformed JSON, a
 * root that is not an object, an unknown key (named), a key of the wrong
 * type, both "prompt" and "content", the text or "tokens" missing, a token
 * id that is negative or not an integer (its index named), more than
 * COLID_MAX_TOKENIZE ids. Ids past the vocabulary need the model: the
 * caller checks them. The body's size is --max-body-bytes's (413).
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tools/colid/colid.h"

#define BAD(e, param, ...)                                                                         \
	colid_error_set(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

static int text_field(const char *k, json_t *v, struct colid_tokenize_req *r, struct colid_error *e)
{
	if (r->text)
		return BAD(e, k, "send one of 'prompt' and 'content', not both");
	if (!json_is_string(v))
		return BAD(e, k, "'%s' must be a string", k);
	r->len = json_string_length(v);
	r->text = malloc(r->len + 1);
	if (!r->text)
		return -ENOMEM;
	memcpy(r->text, json_string_value(v), r->len + 1);
	return 0;
}

static int ids_field(json_t *v, struct colid_tokenize_req *r, struct colid_error *e)
{
	size_t i, n;
	json_t *x;

	if (!json_is_array(v))
		return BAD(e, "tokens", "'tokens' must be an array of token ids");
	n = json_array_size(v);
	if (n > COLID_MAX_TOKENIZE)
		return BAD(e, "tokens", "'tokens' has %zu ids; at most %d", n, COLID_MAX_TOKENIZE);
	r->ids = malloc(sizeof(int) * (n ? n : 1));
	if (!r->ids)
		return -ENOMEM;
	json_array_foreach(v, i, x)
	{
		json_int_t id;

		if (!json_is_integer(x))
			return BAD(e, "tokens", "'tokens'[%zu] must be an integer token id", i);
		id = json_integer_value(x);
		if (id < 0 || id > 0x7fffffff)
			return BAD(e, "tokens", "'tokens'[%zu] = %lld is not a token id", i,
			           (long long)id);
		r->ids[i] = (int)id;
	}
	r->n_ids = (int)n;
	r->has_ids = 1;
	return 0;
}

int colid_tokenize_parse(const char *body, size_t len, int detok, struct colid_tokenize_req *r,
                         struct colid_error *e)
{
	json_error_t jerr;
	json_t *root, *v;
	const char *k;
	long bad;
	int rc = 0;

	memset(r, 0, sizeof(*r));
	r->add_special = 1;
	if (!len)
		return BAD(e, NULL, "the request body is empty; send a JSON object");
	bad = colid_utf8_invalid_at(body, len);
	if (bad >= 0)
		return BAD(e, NULL, "the request body is not valid UTF-8 (byte offset %ld, 0x%02x)",
		           bad, (unsigned char)body[bad]);
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (!root)
		return BAD(e, NULL, "malformed JSON at line %d column %d: %s", jerr.line,
		           jerr.column, jerr.text);
	if (!json_is_object(root)) {
		rc = BAD(e, NULL, "the request body must be a JSON object");
		goto out;
	}
	json_object_foreach(root, k, v)
	{
		if (!strcmp(k, "model")) {
			if (!json_is_string(v))
				rc = BAD(e, k, "'model' must be a string");
		} else if (!detok && (!strcmp(k, "prompt") || !strcmp(k, "content"))) {
			rc = text_field(k, v, r, e);
		} else if (!detok &&
		           (!strcmp(k, "add_special_tokens") || !strcmp(k, "add_special"))) {
			if (!json_is_boolean(v))
				rc = BAD(e, k, "'%s' must be a boolean", k);
			else
				r->add_special = json_is_true(v);
		} else if (detok && !strcmp(k, "tokens")) {
			rc = ids_field(v, r, e);
		} else {
			rc = BAD(e, k, "Unrecognized request argument supplied: %s", k);
		}
		if (rc)
			goto out;
	}
	if (!detok && !r->text)
		rc = BAD(e, "prompt", "'prompt' (or 'content') is required");
	else if (detok && !r->has_ids)
		rc = BAD(e, "tokens", "'tokens' is required");
out:
	json_decref(root);
	if (rc == -ENOMEM)
		colid_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
	if (rc)
		colid_tokenize_free(r);
	return rc;
}

void colid_tokenize_free(struct colid_tokenize_req *r)
{
	free(r->text);
	free(r->ids);
	memset(r, 0, sizeof(*r));
}
