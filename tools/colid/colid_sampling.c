/*
 * tools/colid/colid_sampling.c — a request's sampling fields made a sampler per
 * choice, the checks of them that need the model, and a job's token records
 * (struct colid_tok: the id, its text's place in job->text, and the
 * sampler's struct coli_sample_out) written in OpenAI's two logprobs formats:
 *
 *   chat          {"content": [{"token": "Hi", "logprob": -0.3,
 *                   "bytes": [72, 105], "top_logprobs": [{"token", "logprob",
 *                   "bytes"}, ...]}, ...]}
 *   completions   {"tokens": ["Hi", ...], "token_logprobs": [-0.3, ...],
 *                  "top_logprobs": [{"Hi": -0.3, " Hello": -1.9}, ...],
 *                  "text_offset": [0, ...]}
 *
 * A token's text is what it decodes to alone (coli_tokenizer_piece); when
 * those bytes are not whole UTF-8 (a byte-level token holding part of a
 * character) it is written "bytes:\xe2\x80" as OpenAI does, and "bytes"
 * has the exact bytes. The completions top_logprobs dict holds the top N
 * and the chosen token when it is not among them (up to N + 1 entries, as
 * OpenAI's legacy format says). A logprob of -inf (a token of probability 0
 * in float) is written -9999.0, OpenAI's floor, since JSON has no -inf.
 * text_offset counts bytes from the start of the completion text.
 * colid_grammar_of makes the grammar of response_format / a forced
 * tool_choice (core/text/grammar*.c); each choice's job owns a copy.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tools/colid/colid.h"

/* What needs the server: logit_bias ids within the vocabulary, the choices
 * (n times the prompts) within the queue (they are queued together). */
int colid_sampling_check(struct colid_server *s, const struct colid_request *r,
                         struct colid_error *e)
{
	for (int i = 0; i < r->n_bias; i++)
		if (r->bias[i].id >= s->cfg->vocab)
			return colid_error_set(e, 400, "invalid_request_error", NULL, "logit_bias",
			                       "'logit_bias' token id %d is outside the vocabulary "
			                       "(0..%d)",
			                       r->bias[i].id, s->cfg->vocab - 1);
	if (r->n * (r->n_prompts > 1 ? r->n_prompts : 1) > s->queue.cap)
		return colid_error_set(e, 400, "invalid_request_error", NULL, "n",
		                       "'n' is %d (%d choices with the prompts); this server "
		                       "queues at most %d generations (colid --queue)",
		                       r->n, r->n * (r->n_prompts > 1 ? r->n_prompts : 1),
		                       s->queue.cap);
	return 0;
}

int colid_grammar_of(struct colid_server *s, const struct colid_request *r, struct coli_grammar **g,
                     struct colid_error *e)
{
	const char *field = r->tool_required || r->tool_name ? "tool_choice" : "response_format";
	char err[512] = "";
	int rc = 0;

	*g = NULL;
	if ((r->tool_required || r->tool_name) && (r->json_object || r->schema_json))
		return colid_error_set(e, 400, "invalid_request_error", NULL, "tool_choice",
		                       "forcing a tool call and a 'response_format' of JSON "
		                       "cannot both hold; send one");
	if (r->tool_required || r->tool_name) {
		if (!r->tools_json)
			return colid_error_set(
			    e, 400, "invalid_request_error", NULL, "tool_choice",
			    "'tool_choice' forces a call but there are no 'tools'");
		rc = coli_grammar_tool_call(s->chat.family, r->tools_json, r->tool_name, g, err,
		                            sizeof(err));
	} else if (r->schema_json) {
		rc = coli_grammar_from_schema(r->schema_json, strlen(r->schema_json), g, err,
		                              sizeof(err));
	} else if (r->json_object) {
		rc = coli_grammar_json_object(g);
	}
	if (!rc && *g && !r->tool_required && !r->tool_name) /* (harmony: the final channel) */
		rc = coli_grammar_as_answer(*g, s->chat.family);
	if (rc && *g) {
		coli_grammar_free(*g);
		*g = NULL;
	}
	if (rc == -ENOMEM)
		return colid_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
	if (rc)
		return colid_error_set(e, 400, "invalid_request_error", NULL, field, "'%s': %s",
		                       field, err);
	return 0;
}

/* A choice's sampler: the request's values; choice c draws with seed +
 * c * 0x9e3779b97f4a7c15 (choice 0 with the seed itself). */
void colid_sampler_of(const struct colid_request *r, uint64_t seed, struct coli_sampler *smp)
{
	coli_sampler_init(smp, (float)r->temperature, (float)r->top_p, r->top_k, seed);
	smp->min_p = (float)r->min_p;
	smp->presence_penalty = (float)r->presence_penalty;
	smp->frequency_penalty = (float)r->frequency_penalty;
	smp->repetition_penalty = (float)r->repetition_penalty;
	smp->bias = r->bias; /* copied by colid_job_new */
	smp->n_bias = r->n_bias;
	smp->logprobs = r->logprobs;
}

static json_t *lp_real(float x)
{
	return json_real(isfinite(x) ? (double)x : -9999.0);
}

/* The token's text: its bytes when they are valid UTF-8, else "bytes:\xNN..". */
static json_t *tok_text(const coli_tokenizer_t *t, int id)
{
	size_t n = 0;
	const char *p = t ? coli_tokenizer_piece(t, id, &n) : NULL;
	char buf[4 * 64 + 8];
	size_t k;

	if (!p) {
		snprintf(buf, sizeof(buf), "<%d>", id); /* no tokenizer: the id */
		return json_string(buf);
	}
	if (colid_utf8_invalid_at(p, n) < 0 && !memchr(p, 0, n))
		return json_stringn(p, n);
	k = (size_t)snprintf(buf, sizeof(buf), "bytes:");
	for (size_t i = 0; i < n && k + 5 < sizeof(buf); i++)
		k += (size_t)snprintf(buf + k, sizeof(buf) - k, "\\x%02x", (unsigned char)p[i]);
	return json_string(buf);
}

static json_t *tok_bytes(const coli_tokenizer_t *t, int id)
{
	size_t n = 0;
	const char *p = t ? coli_tokenizer_piece(t, id, &n) : NULL;
	json_t *a = json_array();

	for (size_t i = 0; a && p && i < n; i++)
		json_array_append_new(a, json_integer((unsigned char)p[i]));
	return a;
}

static json_t *chat_entry(const coli_tokenizer_t *t, int id, float lp)
{
	return json_pack("{s:o,s:o,s:o}", "token", tok_text(t, id), "logprob", lp_real(lp), "bytes",
	                 tok_bytes(t, id));
}

static json_t *chat_json(const coli_tokenizer_t *t, const struct colid_tok *x, int n)
{
	json_t *content = json_array();

	for (int i = 0; content && i < n; i++) {
		json_t *e = chat_entry(t, x[i].id, x[i].out.logprob), *top = json_array();

		for (int k = 0; top && k < x[i].out.n_top; k++)
			json_array_append_new(
			    top, chat_entry(t, x[i].out.top_id[k], x[i].out.top_logprob[k]));
		if (!e || !top) {
			json_decref(e), json_decref(top), json_decref(content);
			return NULL;
		}
		json_object_set_new(e, "top_logprobs", top);
		json_array_append_new(content, e);
	}
	return content ? json_pack("{s:o}", "content", content) : NULL;
}

/* A dict's key: the token's text as a C string (json_object_setn takes
 * lengths, so the text may hold anything valid). */
static void dict_put(json_t *d, const coli_tokenizer_t *t, int id, float lp)
{
	json_t *s = tok_text(t, id);

	if (s)
		json_object_setn_new(d, json_string_value(s), json_string_length(s), lp_real(lp));
	json_decref(s);
}

static json_t *completions_json(const coli_tokenizer_t *t, const struct colid_tok *x, int n)
{
	json_t *toks = json_array(), *lps = json_array(), *tops = json_array();
	json_t *offs = json_array();

	for (int i = 0; toks && lps && tops && offs && i < n; i++) {
		json_t *d = json_object();
		int chosen_in = 0;

		for (int k = 0; d && k < x[i].out.n_top; k++) {
			dict_put(d, t, x[i].out.top_id[k], x[i].out.top_logprob[k]);
			chosen_in |= x[i].out.top_id[k] == x[i].id;
		}
		if (d && !chosen_in)
			dict_put(d, t, x[i].id, x[i].out.logprob);
		json_array_append_new(toks, tok_text(t, x[i].id));
		json_array_append_new(lps, lp_real(x[i].out.logprob));
		json_array_append_new(tops, d);
		json_array_append_new(offs, json_integer(x[i].start));
	}
	if (!toks || !lps || !tops || !offs) {
		json_decref(toks), json_decref(lps), json_decref(tops), json_decref(offs);
		return NULL;
	}
	return json_pack("{s:o,s:o,s:o,s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs",
	                 tops, "text_offset", offs);
}

json_t *colid_logprobs_json(const coli_tokenizer_t *tok, const struct colid_job *j, int from,
                            int to, int chat)
{
	const struct colid_tok *x = j->toks ? j->toks + from : NULL;
	int n = to > from ? to - from : 0;

	return chat ? chat_json(tok, x, n) : completions_json(tok, x, n);
}
