/*
 * tools/colid/colid_http.c — colid's HTTP face, on libmicrohttpd with one thread
 * per connection (so a handler may block on its job's condition variable).
 *
 * A request goes through the access handler three ways:
 *   1st call   headers only: allocate struct conn, pick the route; a request
 *              to /v1/ without the API key is refused now (401), and a
 *              body announced bigger than --max-body-bytes with "Expect:
 *              100-continue" too (413), before any body byte is read
 *   n-th call  body bytes: kept up to the limit, counted and dropped after
 *   last call  dispatch: route, method, then the endpoint
 *
 * Generation endpoints parse (colid_request.c), render the chat template,
 * tokenize (the tokenizer is immutable, so this runs here, not on the
 * engine's thread), check the context, and push a job. Then
 * (tools/colid/colid_answer.c):
 *   stream=false  wait on job->cv in the handler, polling the socket for
 *                 POLLRDHUP every 50 ms; a vanished client cancels the job
 *   stream=true   answer 200 at once with a chunked text/event-stream whose
 *                 reader callback turns committed text into OpenAI chunks,
 *                 with the same socket check while it waits
 * The request-completed callback cancels an unfinished job (the client went
 * away mid-stream) and drops the connection's reference to it.
 *
 * A request for n choices queues n jobs at once (all or none: 429), one
 * sampler each (choice c seeded seed + c * 0x9e3779b97f4a7c15), run one
 * after another or side by side in the worker's slots, the prompt taken
 * from the KV cache after the first (the prefix cache keeps it); the reply
 * lists them by index, a stream sends choice 0 whole, then choice 1, ...
 * A completions batch of P prompts (OpenAI's list of strings or of token-id
 * lists) queues P * n jobs, prompt p's choice c at index p * n + c, seeded
 * as prompt p alone would be. Token-id prompts are checked against the
 * model's vocabulary here; a model without a tokenizer takes only them.
 */
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "tools/colid/colid_conn.h"

static atomic_ullong g_req_seq;

/* ---- generation endpoints ---- */

/* Prompt p's token ids (chat: the rendered messages), or a 4xx/5xx in *e. */
static int prompt_ids(struct colid_server *s, struct conn *k, int p, int **ids, int *n,
                      struct colid_error *e)
{
	struct colid_request *r = &k->req;
	const struct colid_prompt *pr = r->ep == COLID_EP_CHAT ? NULL : &r->prompts[p];
	char err[256], name[32];
	char *text = NULL;
	size_t len = 0;
	int rc;

	*ids = NULL;
	*n = 0;
	if (r->prompt_batch)
		snprintf(name, sizeof(name), "prompt[%d]", p);
	else
		snprintf(name, sizeof(name), "prompt");
	if (pr && pr->ids) {
		int vocab = s->cfg->vocab;

		for (int i = 0; i < pr->n_ids; i++)
			if (pr->ids[i] >= vocab)
				return colid_error_set(e, 400, "invalid_request_error", NULL,
				                       "prompt",
				                       "'%s[%d]' is token id %d, outside the "
				                       "vocabulary (0..%d)",
				                       name, i, pr->ids[i], vocab - 1);
		*ids = malloc(sizeof(int) * (size_t)pr->n_ids);
		if (!*ids)
			return colid_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
		memcpy(*ids, pr->ids, sizeof(int) * (size_t)pr->n_ids);
		*n = pr->n_ids;
		return 0;
	}
	if (!s->tok && pr)
		return colid_error_set(e, 400, "invalid_request_error", NULL, "prompt",
		                       "this model has no tokenizer: send '%s' as token ids (an "
		                       "array of integers 0..%d), not text",
		                       name, s->cfg->vocab - 1);
	if (!s->tok)
		return colid_error_set(e, 400, "invalid_request_error", NULL, "messages",
		                       "this model has no tokenizer, so chat messages cannot be "
		                       "encoded; use /v1/completions with 'prompt' as token ids");
	if (r->ep == COLID_EP_CHAT) {
		struct coli_chat_call c = {.msgs = r->msgs,
		                           .n_msgs = r->n_msgs,
		                           .messages_json = r->messages_json,
		                           .tools_json = r->tools_json,
		                           .kwargs_json = r->kwargs_json,
		                           .add_generation_prompt = 1,
		                           .enable_thinking = r->enable_thinking,
		                           .now = -1};
		char why[320];

		rc = coli_chat_render_call(&s->chat, &c, &text, &len, why, sizeof(why));
		if (!rc) { /* the generation prompt opens a think block (MiniMax-M2, ...) */
			size_t t = len;

			while (t && strchr(" \t\r\n", text[t - 1]))
				t--;
			k->think_open = t >= 7 && !memcmp(text + t - 7, "<think>", 7);
		}
		if (rc)
			return colid_error_set(
			    e, rc == -ENOMEM ? 500 : 400,
			    rc == -ENOMEM ? "server_error" : "invalid_request_error", NULL,
			    r->tools_json && rc == -ENOTSUP ? "tools" : "messages",
			    "cannot render the messages: %s", why[0] ? why : strerror(-rc));
	}
	rc = coli_tokenizer_encode(s->tok, text ? text : pr->text, text ? len : pr->len, ids, n,
	                           err, sizeof(err));
	free(text);
	if (rc == -EILSEQ)
		return colid_error_set(e, 400, "invalid_request_error", NULL, "prompt", "%s", err);
	if (rc)
		return colid_error_set(e, 500, "server_error", NULL, NULL, "tokenizer: %s", err);
	if (*n == 0) {
		free(*ids);
		*ids = NULL;
		return colid_error_set(e, 400, "invalid_request_error", NULL, "prompt",
		                       "'%s' encodes to no tokens", name);
	}
	return 0;
}

/* Every prompt's ids (chat: one) and its max_tokens, in ids[p], n[p],
 * max_new[p], with the context checked: 0, or a 4xx/5xx in *e (nothing
 * left to free). */
static int prompts_of(struct colid_server *s, struct conn *k, int **ids, int *n, int *max_new,
                      struct colid_error *e)
{
	struct colid_request *r = &k->req;
	int chat = r->ep == COLID_EP_CHAT, n_p = chat ? 1 : r->n_prompts, p;

	for (p = 0; p < n_p; p++) {
		int m = r->max_tokens;

		if (prompt_ids(s, k, p, &ids[p], &n[p], e))
			goto err;
		k->n_prompt += n[p];
		if (m <
		    0) /* OpenAI's defaults: 16 for completions, the rest of the context for chat */
			m = chat ? s->ctx - n[p] : (s->ctx - n[p] < 16 ? s->ctx - n[p] : 16);
		max_new[p] = m;
		if (n[p] >= s->ctx || (long)n[p] + m > s->ctx) {
			char what[32];

			snprintf(what, sizeof(what), chat ? "messages" : "prompt");
			if (r->prompt_batch)
				snprintf(what, sizeof(what), "prompt[%d]", p);
			colid_error_set(
			    e, 400, "invalid_request_error", "context_length_exceeded",
			    chat ? "messages" : "prompt",
			    "This model's maximum context length is %d tokens. However, "
			    "you requested %ld tokens (%d in the %s, %d for the "
			    "completion). Please reduce the length of the %s or of "
			    "max_tokens.",
			    s->ctx, (long)n[p] + (m > 0 ? m : 0), n[p], what, m > 0 ? m : 0, what);
			free(ids[p]);
			goto err;
		}
		if ((long)n[p] + m > s->kv_tokens) { /* --kv-gb below the context */
			colid_error_set(
			    e, 400, "invalid_request_error", "kv_cache_exceeded",
			    chat ? "messages" : "prompt",
			    "This request needs %ld tokens of KV cache (%d in the prompt, "
			    "%d for the completion) but the server's KV cache pool holds "
			    "%d tokens (--kv-gb). Please reduce the prompt or max_tokens.",
			    (long)n[p] + m, n[p], m, s->kv_tokens);
			free(ids[p]);
			goto err;
		}
	}
	return 0;
err:
	while (p-- > 0)
		free(ids[p]);
	k->n_prompt = 0;
	return -EINVAL;
}

static enum MHD_Result generate(struct colid_server *s, struct MHD_Connection *mc, struct conn *k,
                                enum colid_endpoint ep)
{
	struct colid_request *r = &k->req;
	struct colid_error e;
	struct coli_sampler smp;
	int *ids[COLID_MAX_N], n[COLID_MAX_N], max_new[COLID_MAX_N], n_p, rc;
	uint64_t seed;
	uint64_t seq = atomic_fetch_add(&g_req_seq, 1) + 1;

	if (colid_request_parse(k->body ? k->body : "", k->len, ep, r, &e))
		return colid_reply_error(s, mc, k, &e, 0);
	n_p = ep == COLID_EP_CHAT ? 1 : r->n_prompts;
	if (prompts_of(s, k, ids, n, max_new, &e))
		return colid_reply_error(s, mc, k, &e, 0);
	if (colid_sampling_check(s, r, &e)) {
		for (int p = 0; p < n_p; p++)
			free(ids[p]);
		return colid_reply_error(s, mc, k, &e, 0);
	}
	seed = r->has_seed ? r->seed : (uint64_t)time(NULL) * 2654435761u + seq;
	/* choice p * n + c: prompt p's choice c, seeded as if p were alone */
	for (int p = 0; p < n_p && k->n_jobs == p * r->n; p++)
		for (int c = 0; c < r->n; c++) {
			struct coli_grammar *g = NULL;
			struct colid_job *j;
			int at = p * r->n + c;

			if (colid_grammar_of(s, r, &g, &e)) { /* (each job owns its grammar) */
				if (at) /* out of memory past the first: the 500 below */
					break;
				for (int q = 0; q < n_p; q++)
					free(ids[q]);
				return colid_reply_error(s, mc, k, &e, 0);
			}
			colid_sampler_of(r, seed + (uint64_t)c * 0x9e3779b97f4a7c15ull, &smp);
			smp.grammar = g;
			if (g) /* the output is the grammar's (JSON, a call), never a think block */
				k->think_open = 0;
			if (g && ep == COLID_EP_CHAT &&
			    s->chat.eot_id >= 0) /* the turn's end ends it */
				smp.end_ids[smp.n_end_ids++] = s->chat.eot_id;
			if (g && ep == COLID_EP_CHAT && s->chat.eot2_id >= 0)
				smp.end_ids[smp.n_end_ids++] = s->chat.eot2_id;
			j = colid_job_new(ids[p], n[p], max_new[p], &smp, r->stop, r->n_stop,
			                  ep == COLID_EP_CHAT ? s->chat.eot_id : -1);
			if (!j) {
				coli_grammar_free(g);
				break;
			}
			j->grammar = g;
			j->eot2_id = ep == COLID_EP_CHAT ? s->chat.eot2_id : -1;
			j->want_ids = r->return_token_ids;
			j->choice = at;
			k->jobs[at] = j;
			k->n_jobs = at + 1;
		}
	for (int p = 0; p < n_p; p++)
		free(ids[p]);
	if (k->n_jobs) /* released in on_completed */
		atomic_fetch_add(&s->inflight, 1);
	if (k->n_jobs < n_p * r->n)
		FAIL(500, "server_error", NULL, NULL, "out of memory");
	snprintf(k->id, sizeof(k->id), "%s-%llx%06llx", ep == COLID_EP_CHAT ? "chatcmpl" : "cmpl",
	         (unsigned long long)s->created, (unsigned long long)seq);
	k->created = (long)time(NULL);
	rc = colid_queue_push_n(&s->queue, k->jobs, k->n_jobs);
	if (rc == -EAGAIN) {
		/* the queue ahead and this request, --parallel of them at a time */
		int depth = colid_queue_depth(&s->queue), par = coli_engine_n_seq(s->engine);
		double wait = (double)((depth + par) / par) * colid_metrics_job_s(&s->metrics);
		int after = wait < 1 ? 1 : (int)(wait + 0.999);

		colid_error_set(&e, 429, "rate_limit_error", "queue_full", NULL,
		                "the server is busy (%d requests queued); retry after %d s", depth,
		                after);
		return colid_reply_error(s, mc, k, &e, after);
	}
	if (rc)
		FAIL(503, "server_error", "shutting_down", NULL, "the server is shutting down");
	return r->stream ? colid_answer_stream(s, mc, k) : colid_answer_whole(s, mc, k);
}

/* ---- the other routes ---- */

static enum MHD_Result models(struct colid_server *s, struct MHD_Connection *mc, struct conn *k,
                              const char *which)
{
	json_t *m = json_pack("{s:s,s:s,s:I,s:s}", "id", s->model_id, "object", "model", "created",
	                      (json_int_t)s->created, "owned_by", "coli");

	if (!which)
		return colid_reply_json(s, mc, k, 200,
		                        json_pack("{s:s,s:[o]}", "object", "list", "data", m));
	if (strcmp(which, s->model_id)) {
		json_decref(m);
		FAIL(404, "invalid_request_error", "model_not_found", "model",
		     "The model '%s' does not exist; this server has '%s'", which, s->model_id);
	}
	return colid_reply_json(s, mc, k, 200, m);
}

static enum MHD_Result health(struct colid_server *s, struct MHD_Connection *mc, struct conn *k)
{
	int stopping = atomic_load(&s->stopping);

	return colid_reply_json(s, mc, k, stopping ? 503 : 200,
	                        json_pack("{s:s,s:s,s:i,s:i}", "status",
	                                  stopping ? "stopping" : "ok", "model", s->model_id,
	                                  "queue_depth", colid_queue_depth(&s->queue),
	                                  "queue_capacity", s->queue.cap));
}

/* POST /tokenize, /detokenize (tools/colid/request/colid_tokenize.c has the shapes). */
static enum MHD_Result tokenize(struct colid_server *s, struct MHD_Connection *mc, struct conn *k,
                                int detok)
{
	struct colid_tokenize_req t;
	struct colid_error e;
	char err[256];
	char *text = NULL;
	size_t len = 0;
	int *ids = NULL, n = 0, rc;
	json_t *o = NULL, *a;

	if (colid_tokenize_parse(k->body ? k->body : "", k->len, detok, &t, &e))
		return colid_reply_error(s, mc, k, &e, 0);
	if (!s->tok) {
		colid_tokenize_free(&t);
		FAIL(400, "invalid_request_error", NULL, NULL,
		     "this model has no tokenizer: %s; /v1/completions takes and "
		     "(return_token_ids) gives token ids",
		     detok ? "/detokenize has no text for ids" : "/tokenize cannot encode text");
	}
	if (detok) {
		int vocab = coli_tokenizer_n_vocab(s->tok);

		for (int i = 0; i < t.n_ids; i++)
			if (t.ids[i] >= vocab) {
				colid_error_set(
				    &e, 400, "invalid_request_error", NULL, "tokens",
				    "'tokens'[%d] = %d is outside the vocabulary (0..%d)", i,
				    t.ids[i], vocab - 1);
				colid_tokenize_free(&t);
				return colid_reply_error(s, mc, k, &e, 0);
			}
		rc = coli_tokenizer_decode(s->tok, t.ids, t.n_ids, &text, &len);
		colid_tokenize_free(&t);
		if (rc)
			FAIL(500, "server_error", NULL, NULL, "detokenize: %s", strerror(-rc));
		o = json_pack("{s:s%,s:s%}", "prompt", text, len, "content", text, len);
		free(text);
		return colid_reply_json(s, mc, k, 200, o);
	}
	rc = coli_tokenizer_encode(s->tok, t.text, t.len, &ids, &n, err, sizeof(err));
	colid_tokenize_free(&t);
	if (rc) {
		free(ids);
		if (rc == -EILSEQ)
			FAIL(400, "invalid_request_error", NULL, "prompt", "%s", err);
		FAIL(500, "server_error", NULL, NULL, "tokenizer: %s", err);
	}
	a = json_array();
	for (int i = 0; a && i < n; i++)
		json_array_append_new(a, json_integer(ids[i]));
	free(ids);
	if (a)
		o = json_pack("{s:o,s:i,s:i}", "tokens", a, "count", n, "max_model_len", s->ctx);
	return colid_reply_json(s, mc, k, 200, o);
}

/* The bearer token against the key, in constant time over the longer of the
 * two (neither the key's length nor a common prefix shows in the timing). */
static int authorized(struct colid_server *s, struct MHD_Connection *mc)
{
	const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
	size_t n = s->api_key_len, m, len;
	unsigned char diff = 0;

	if (!s->api_key)
		return 1;
	if (!h || strncasecmp(h, "Bearer ", 7))
		return 0;
	h += 7;
	m = strlen(h);
	len = m > n ? m : n;
	for (size_t i = 0; i < len; i++)
		diff |=
		    (unsigned char)(i < n ? s->api_key[i] : 0) ^ (unsigned char)(i < m ? h[i] : 0);
	return !diff && m == n;
}

static enum colid_route route_of(const char *url)
{
	if (!strcmp(url, "/v1/chat/completions"))
		return COLID_R_CHAT;
	if (!strcmp(url, "/v1/completions"))
		return COLID_R_COMPLETIONS;
	if (!strcmp(url, "/v1/models") || !strncmp(url, "/v1/models/", 11))
		return COLID_R_MODELS;
	if (!strcmp(url, "/health"))
		return COLID_R_HEALTH;
	if (!strcmp(url, "/metrics"))
		return COLID_R_METRICS;
	if (!strcmp(url, "/tokenize"))
		return COLID_R_TOKENIZE;
	if (!strcmp(url, "/detokenize"))
		return COLID_R_DETOKENIZE;
	return COLID_R_OTHER;
}

static enum MHD_Result dispatch(struct colid_server *s, struct MHD_Connection *mc, struct conn *k,
                                const char *url, const char *method)
{
	int post = !strcmp(method, "POST"), get = !strcmp(method, "GET");

	if (k->route == COLID_R_OTHER)
		FAIL(404, "invalid_request_error", "not_found", NULL, "Invalid URL (%s %s)", method,
		     url);
	if (k->route == COLID_R_TOKENIZE || k->route == COLID_R_DETOKENIZE) {
		if (!post)
			FAIL(405, "invalid_request_error", "method_not_allowed", NULL,
			     "%s needs POST, not %s", url, method);
		if (k->too_big)
			FAIL(413, "invalid_request_error", "request_too_large", NULL,
			     "the request body (%zu bytes) is larger than the limit of %zu bytes "
			     "(colid --max-body-bytes)",
			     k->seen, s->max_body);
		return tokenize(s, mc, k, k->route == COLID_R_DETOKENIZE);
	}
	if (k->route == COLID_R_CHAT || k->route == COLID_R_COMPLETIONS) {
		if (!post)
			FAIL(405, "invalid_request_error", "method_not_allowed", NULL,
			     "%s needs POST, not %s", url, method);
		if (k->too_big)
			FAIL(413, "invalid_request_error", "request_too_large", NULL,
			     "the request body (%zu bytes) is larger than the limit of %zu bytes "
			     "(colid --max-body-bytes)",
			     k->seen, s->max_body);
		if (atomic_load(&s->stopping))
			FAIL(503, "server_error", "shutting_down", NULL,
			     "the server is shutting down");
		return generate(s, mc, k,
		                k->route == COLID_R_CHAT ? COLID_EP_CHAT : COLID_EP_COMPLETIONS);
	}
	if (!get)
		FAIL(405, "invalid_request_error", "method_not_allowed", NULL,
		     "%s needs GET, not %s", url, method);
	if (k->route == COLID_R_MODELS)
		return models(s, mc, k, url[10] == '/' ? url + 11 : NULL);
	if (k->route == COLID_R_HEALTH)
		return health(s, mc, k);
	return colid_reply(s, mc, k, 200, colid_metrics_text(&s->metrics, &s->queue),
	                   "text/plain; version=0.0.4; charset=utf-8", 0);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *data_size, void **con_cls)
{
	struct colid_server *s = cls;
	struct conn *k = *con_cls;

	if (!k) { /* headers only */
		const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Length");
		const char *ex = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Expect");

		k = calloc(1, sizeof(*k));
		if (!k)
			return MHD_NO;
		k->route = route_of(url);
		k->t0 = colid_now_s();
		snprintf(k->method, sizeof(k->method), "%s", method);
		snprintf(k->path, sizeof(k->path), "%s", url);
		*con_cls = k;
		if (k->route != COLID_R_OTHER &&
		    (!strncmp(url, "/v1/", 4) || k->route == COLID_R_TOKENIZE ||
		     k->route == COLID_R_DETOKENIZE) &&
		    !authorized(s, mc)) { /* before any body byte is read */
			k->answered = 1;
			FAIL(401, "invalid_request_error", "invalid_api_key", NULL,
			     "Incorrect or missing API key: send 'Authorization: Bearer KEY'");
		}
		if (cl && ex && !strcasecmp(ex, "100-continue") &&
		    strtoull(cl, NULL, 10) > s->max_body) {
			k->too_big = 1;
			k->answered = 1;
			k->seen = strtoull(cl, NULL, 10);
			FAIL(413, "invalid_request_error", "request_too_large", NULL,
			     "the request body (%zu bytes) is larger than the limit of %zu bytes "
			     "(colid --max-body-bytes)",
			     k->seen, s->max_body);
		}
		return MHD_YES;
	}
	if (*data_size) { /* body bytes: keep up to the limit, count the rest */
		size_t n = *data_size;

		k->seen += n;
		*data_size = 0;
		if (k->too_big || k->len + n > s->max_body) {
			k->too_big = 1;
			return MHD_YES;
		}
		if (k->len + n + 1 > k->cap) {
			size_t cap = k->cap ? k->cap : 4096;
			char *p;

			while (cap < k->len + n + 1)
				cap *= 2;
			p = realloc(k->body, cap);
			if (!p)
				return MHD_NO;
			k->body = p;
			k->cap = cap;
		}
		memcpy(k->body + k->len, data, n);
		k->len += n;
		k->body[k->len] = 0;
		return MHD_YES;
	}
	if (colid_guard_received(&s->guard, mc))
		return MHD_NO; /* shut down as too slow */
	if (k->answered)       /* refused at the headers already */
		return MHD_YES;
	return dispatch(s, mc, k, url, method);
}

/* One line of --access-log, logfmt: time (UTC, ms), method, path (control
 * characters, spaces and quotes as '?'), status (499: the client left
 * before a reply; a stream's is 200 however it ended), the prompt and
 * completion tokens (every choice's), TTFT from the request's arrival to
 * its first choice's first token and the total from arrival to the end of
 * the reply in ms ("-" where there is none). */
static void access_line(struct colid_server *s, struct conn *k, enum MHD_RequestTerminationCode toe)
{
	char when[32], path[sizeof(k->path)], ttft[32] = "-";
	struct timespec ts;
	struct tm tm;
	int gen = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	for (size_t i = 0;; i++) {
		unsigned char c = (unsigned char)k->path[i];

		path[i] = c && (c <= ' ' || c == '"' || c == 0x7f) ? '?' : (char)c;
		if (!c)
			break;
	}
	for (int c = 0; c < k->n_jobs; c++) {
		pthread_mutex_lock(&k->jobs[c]->mu);
		gen += k->jobs[c]->n_gen;
		if (c == 0 && k->jobs[c]->n_gen > 0)
			snprintf(ttft, sizeof(ttft), "%.1f", (k->jobs[c]->first_s - k->t0) * 1e3);
		pthread_mutex_unlock(&k->jobs[c]->mu);
	}
	pthread_mutex_lock(&s->log_mu);
	fprintf(s->access_log,
	        "time=%s.%03ldZ method=%s path=\"%s\" status=%d prompt_tokens=%d "
	        "completion_tokens=%d ttft_ms=%s total_ms=%.1f\n",
	        when, ts.tv_nsec / 1000000, k->method, path,
	        k->status                                    ? k->status
	        : toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? 200
	                                                     : 499,
	        k->n_prompt, gen, ttft, (colid_now_s() - k->t0) * 1e3);
	fflush(s->access_log);
	pthread_mutex_unlock(&s->log_mu);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
	struct conn *k = *con_cls;

	colid_guard_answered(&((struct colid_server *)cls)->guard, mc);
	if (!k)
		return;
	if (((struct colid_server *)cls)->access_log)
		access_line(cls, k, toe);
	for (int c = 0; c < k->n_jobs; c++) {
		pthread_mutex_lock(&k->jobs[c]->mu);
		if (!k->jobs[c]->done) /* the client left mid-stream */
			atomic_store(&k->jobs[c]->cancel, 1);
		pthread_mutex_unlock(&k->jobs[c]->mu);
		colid_job_put(k->jobs[c]);
	}
	if (k->n_jobs)
		atomic_fetch_sub(&((struct colid_server *)cls)->inflight, 1);
	colid_request_free(&k->req);
	free(k->body);
	free(k->ev);
	free(k);
	*con_cls = NULL;
}

int colid_http_start(struct colid_server *s, const char *host, int port, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	                 MHD_USE_ITC | MHD_USE_ERROR_LOG;
	const union MHD_DaemonInfo *di;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons((uint16_t)port);
	} else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons((uint16_t)port);
		flags |= MHD_USE_IPv6;
	} else {
		snprintf(err, errlen, "--host '%s' is not a numeric IPv4 or IPv6 address", host);
		return -EINVAL;
	}
	if (colid_guard_start(&s->guard, s->header_timeout_s, s->max_conn)) {
		snprintf(err, errlen, "cannot start the slow-client watchdog thread");
		return -EAGAIN;
	}
	s->mhd = MHD_start_daemon(
	    flags, (uint16_t)port, NULL, NULL, on_request, s, MHD_OPTION_NOTIFY_COMPLETED,
	    on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, colid_guard_notify, &s->guard,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned)s->max_conn, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->max_conn_per_ip,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->timeout_s, MHD_OPTION_END);
	if (!s->mhd) {
		colid_guard_stop(&s->guard);
		snprintf(err, errlen,
		         "cannot listen on %s port %d (in use, or not an address of "
		         "this host?)",
		         host, port);
		return -EADDRINUSE;
	}
	di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
	s->port = di ? di->port : (unsigned short)port;
	return 0;
}

void colid_http_quiesce(struct colid_server *s)
{
	MHD_socket fd;

	if (!s->mhd)
		return;
	fd = MHD_quiesce_daemon(s->mhd);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
}

void colid_http_stop(struct colid_server *s, double timeout_s)
{
	double t0 = colid_now_s();

	/* Jobs are all finished here; let their last bytes go out. */
	while (atomic_load(&s->inflight) > 0 && colid_now_s() - t0 < timeout_s)
		usleep(10000);
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	s->mhd = NULL;
	colid_guard_stop(&s->guard);
}
