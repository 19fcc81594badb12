/*
 * tools/colid/colid_answer.c — answering colid's generation endpoints once their
 * jobs are queued (tools/colid/colid_http.c routes and queues them): the reply
 * helpers, the wait on a job with the client's socket watched, the whole
 * reply (every choice's message, tools/colid/colid_reply.c's split, usage), and
 * the server-sent event stream (role, text or reasoning/content deltas with
 * their tokens' logprobs, the finish, usage, [DONE]) read by libmicrohttpd
 * through stream_reader.
 *
 * return_token_ids (docs/api.md, "Token ids") reads the job's token records
 * (struct colid_tok, kept as for logprobs): a chunk carries the ids of the
 * tokens whose text it completes, so a token without text (a model without
 * a tokenizer) wakes the stream on its own and goes out in a chunk of its
 * own, text "" and its id.
 */
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>

#include "tools/colid/colid_conn.h"

/* ---- replies ---- */

enum MHD_Result colid_reply(struct colid_server *s, struct MHD_Connection *mc, struct conn *k,
                            int status, char *body, const char *ctype, int retry_after)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (!body)
		body =
		    strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\"}}");
	r = MHD_create_response_from_buffer(body ? strlen(body) : 0, body, MHD_RESPMEM_MUST_FREE);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", ctype);
	if (retry_after > 0) {
		char v[16];

		snprintf(v, sizeof(v), "%d", retry_after);
		MHD_add_response_header(r, "Retry-After", v);
	}
	ret = MHD_queue_response(mc, (unsigned)status, r);
	MHD_destroy_response(r);
	colid_metrics_request(&s->metrics, k ? k->route : COLID_R_OTHER, status);
	if (k)
		k->status = status;
	return ret;
}

enum MHD_Result colid_reply_json(struct colid_server *s, struct MHD_Connection *mc, struct conn *k,
                                 int status, json_t *o)
{
	char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return colid_reply(s, mc, k, status, body, "application/json", 0);
}

enum MHD_Result colid_reply_error(struct colid_server *s, struct MHD_Connection *mc, struct conn *k,
                                  const struct colid_error *e, int retry_after)
{
	return colid_reply(s, mc, k, e->status, colid_error_json(e), "application/json",
	                   retry_after);
}

/* ---- the client's socket ---- */

/* 1 when the peer closed or reset the connection. A pipelined next request
 * shows as readable data, not as a hang-up, so it does not count. */
static int client_gone(struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct pollfd p;

	if (!ci)
		return 0;
	p.fd = ci->connect_fd;
	p.events = POLLRDHUP;
	p.revents = 0;
	if (poll(&p, 1, 0) <= 0)
		return 0;
	return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* 1 when token record `from` exists and its text lies within text[0, bound)
 * and the committed text. Caller holds j->mu. */
static int tok_ready(const struct colid_job *j, int from, size_t bound)
{
	return from >= 0 && from < j->n_toks && j->toks[from].end <= (int)bound &&
	       j->toks[from].end <= (int)j->committed;
}

/* Waits until the job is done, or (need_text) committed text past sent, or
 * token record tok_from (>= 0) is ready within tok_bound, or the client
 * leaves (then cancels the job and returns -ECONNRESET). Caller holds j->mu. */
static int wait_job(struct colid_job *j, struct MHD_Connection *mc, size_t sent, int need_text,
                    int tok_from, size_t tok_bound)
{
	while (!j->done && !(need_text && j->committed > sent) &&
	       !tok_ready(j, tok_from, tok_bound)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&j->cv, &j->mu, &ts);
		if (!j->done && client_gone(mc)) {
			atomic_store(&j->cancel, 1);
			return -ECONNRESET;
		}
	}
	return 0;
}

static const char *finish_name(enum colid_finish f)
{
	return f == COLID_FINISH_LENGTH ? "length" : "stop";
}

/* usage: the prompt once, every choice's tokens; cached_tokens, the prompt
 * tokens the KV cache already held for the first choice (the prefix cache). */
static json_t *usage_json(struct conn *k, int n_gen)
{
	int cached = 0;

	if (k->n_jobs) {
		pthread_mutex_lock(&k->jobs[0]->mu);
		cached = k->jobs[0]->st.n_cached;
		pthread_mutex_unlock(&k->jobs[0]->mu);
	}
	return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", k->n_prompt, "completion_tokens",
	                 n_gen, "total_tokens", k->n_prompt + n_gen, "prompt_tokens_details",
	                 "cached_tokens", cached);
}

/* A chunk or a whole completion object around `choices` (an array). */
static json_t *envelope(struct colid_server *s, struct conn *k, const char *object, json_t *choices)
{
	return json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", k->id, "object", object, "created",
	                 (json_int_t)k->created, "model", s->model_id, "choices", choices);
}

/* The logprobs of j's tokens [from, to), or null when the request has none.
 * Caller holds j->mu. */
static json_t *logprobs_of(struct colid_server *s, struct conn *k, struct colid_job *j, int from,
                           int to)
{
	json_t *o = NULL;

	if (k->req.logprobs >= 0)
		o = colid_logprobs_json(s->tok, j, from, to, k->req.ep == COLID_EP_CHAT);
	return o ? o : json_null();
}

/* ids[0, n) as a JSON array. */
static json_t *ids_json(const int *ids, int n)
{
	json_t *a = json_array();

	for (int i = 0; a && i < n; i++)
		json_array_append_new(a, json_integer(ids[i]));
	return a;
}

/* The ids of j's token records [from, to). Caller holds j->mu. */
static json_t *toks_json(const struct colid_job *j, int from, int to)
{
	json_t *a = json_array();

	for (int i = from; a && i < to; i++)
		json_array_append_new(a, json_integer(j->toks[i].id));
	return a;
}

/* return_token_ids on a chunk o of choice k->cur (NULL: none, nothing
 * done): its tokens' ids [from, to) as choices[0].token_ids, and the first
 * chunk of a choice its prompt's ids (completions: choices[0].prompt_token_ids,
 * each choice its own prompt; chat: prompt_token_ids beside choices, in the
 * stream's first chunk). Caller holds j->mu when to > from. */
static json_t *with_ids(struct conn *k, json_t *o, const struct colid_job *j, int from, int to)
{
	json_t *c = json_array_get(json_object_get(o, "choices"), 0);

	if (!o || !k->req.return_token_ids)
		return o;
	json_object_set_new(c, "token_ids", toks_json(j, from, to));
	if (!k->ids_begun && k->req.ep != COLID_EP_CHAT)
		json_object_set_new(c, "prompt_token_ids", ids_json(j->ids, j->n_ids));
	else if (!k->ids_begun && k->cur == 0)
		json_object_set_new(o, "prompt_token_ids", ids_json(j->ids, j->n_ids));
	k->ids_begun = 1;
	return o;
}

/* Completion tokens of every choice (the jobs are done). */
static int total_gen(struct conn *k)
{
	int n = 0;

	for (int c = 0; c < k->n_jobs; c++) {
		pthread_mutex_lock(&k->jobs[c]->mu);
		n += k->jobs[c]->n_gen;
		pthread_mutex_unlock(&k->jobs[c]->mu);
	}
	return n;
}

/* The tools a reply is read for calls of: the request's, unless tool_choice
 * is "none". */
static const char *calls_of(const struct conn *k)
{
	return k->req.tool_choice_none ? NULL : k->req.tools_json;
}

enum MHD_Result colid_answer_whole(struct colid_server *s, struct MHD_Connection *mc,
                                   struct conn *k)
{
	int chat = k->req.ep == COLID_EP_CHAT;
	json_t *choices = json_array(), *choice, *o;

	for (int c = 0; c < k->n_jobs; c++) { /* the choices in order: each waited for */
		struct colid_job *j = k->jobs[c];

		pthread_mutex_lock(&j->mu);
		if (wait_job(j, mc, 0, 0, -1, 0)) {
			pthread_mutex_unlock(&j->mu);
			json_decref(choices);
			colid_metrics_request(&s->metrics, k->route, 499);
			k->status = 499;
			return MHD_NO; /* nobody to answer: close (the rest cancelled) */
		}
		if (j->status == -ESHUTDOWN ||
		    (j->status == -ECANCELED && atomic_load(&s->stopping))) {
			pthread_mutex_unlock(&j->mu);
			json_decref(choices);
			FAIL(503, "server_error", "shutting_down", NULL,
			     "the server is shutting down; retry on another instance");
		}
		if (j->status) {
			int st = j->status;

			pthread_mutex_unlock(&j->mu);
			json_decref(choices);
			FAIL(500, "server_error", NULL, NULL, "generation failed: %s",
			     strerror(-st));
		}
		if (chat) {
			int n_calls;
			json_t *m =
			    colid_reply_message(s->chat.family, j->text, j->len, k->think_open,
			                        calls_of(k), k->id, &n_calls);

			choice = json_pack(
			    "{s:i,s:o,s:o,s:s}", "index", c, "message", m ? m : json_null(),
			    "logprobs", logprobs_of(s, k, j, 0, j->n_toks), "finish_reason",
			    n_calls && j->finish == COLID_FINISH_STOP ? "tool_calls"
			                                              : finish_name(j->finish));
		} else
			choice = json_pack("{s:s%,s:i,s:o,s:s}", "text", j->text, j->len, "index",
			                   c, "logprobs", logprobs_of(s, k, j, 0, j->n_toks),
			                   "finish_reason", finish_name(j->finish));
		if (choice && k->req.return_token_ids) { /* (vLLM's places) */
			if (!chat)
				json_object_set_new(choice, "prompt_token_ids",
				                    ids_json(j->ids, j->n_ids));
			json_object_set_new(choice, "token_ids", toks_json(j, 0, j->n_toks));
		}
		pthread_mutex_unlock(&j->mu);
		json_array_append_new(choices, choice);
	}
	o = envelope(s, k, chat ? "chat.completion" : "text_completion", choices);
	if (o && chat && k->req.return_token_ids && k->n_jobs) /* one prompt, every choice's */
		json_object_set_new(o, "prompt_token_ids",
		                    ids_json(k->jobs[0]->ids, k->jobs[0]->n_ids));
	if (o)
		json_object_set_new(o, "usage", usage_json(k, total_gen(k)));
	return colid_reply_json(s, mc, k, 200, o);
}

/* ---- server-sent events ---- */

/* k->ev = "data: A\n\n" ["data: B\n\n"] ["data: [DONE]\n\n"]; takes a and b. */
static int set_event(struct conn *k, json_t *a, json_t *b, int done)
{
	char *sa = a ? json_dumps(a, JSON_COMPACT) : NULL;
	char *sb = b ? json_dumps(b, JSON_COMPACT) : NULL;
	size_t n = (sa ? strlen(sa) : 0) + (sb ? strlen(sb) : 0) + 64;

	json_decref(a);
	json_decref(b);
	free(k->ev);
	k->ev = malloc(n);
	k->ev_len = k->ev_off = 0;
	if (k->ev) {
		if (sa)
			k->ev_len += (size_t)sprintf(k->ev + k->ev_len, "data: %s\n\n", sa);
		if (sb)
			k->ev_len += (size_t)sprintf(k->ev + k->ev_len, "data: %s\n\n", sb);
		if (done)
			k->ev_len += (size_t)sprintf(k->ev + k->ev_len, "data: [DONE]\n\n");
	}
	free(sa);
	free(sb);
	return k->ev ? 0 : -ENOMEM;
}

/* A chat chunk of choice k->cur carrying `delta` (taken) and its tokens'
 * logprobs (lp, taken; NULL: null). */
static json_t *chunk_delta(struct colid_server *s, struct conn *k, json_t *delta, json_t *lp)
{
	return envelope(s, k, "chat.completion.chunk",
	                json_pack("[{s:i,s:o,s:o,s:n}]", "index", k->cur, "delta", delta,
	                          "logprobs", lp ? lp : json_null(), "finish_reason"));
}

/* The delta of text spans: reasoning_content and content, each when not empty. */
static json_t *split_delta(const char *text, struct colid_span r, struct colid_span c)
{
	json_t *d = json_object();

	if (d && r.to > r.from)
		json_object_set_new(d, "reasoning_content",
		                    json_stringn(text + r.from, r.to - r.from));
	if (d && c.to > c.from)
		json_object_set_new(d, "content", json_stringn(text + c.from, c.to - c.from));
	return d;
}

/* A chunk of choice k->cur: text (or none), a finish reason (or none), the
 * role's opening (chat), its tokens' logprobs (lp, taken; NULL: null). */
static json_t *chunk(struct colid_server *s, struct conn *k, const char *text, size_t n,
                     const char *finish, int role, json_t *lp)
{
	int chat = k->req.ep == COLID_EP_CHAT, i = k->cur;
	json_t *fin = finish ? json_string(finish) : json_null(), *c;

	if (!lp)
		lp = json_null();
	if (chat)
		c = role   ? json_pack("{s:i,s:{s:s,s:s},s:o,s:o}", "index", i, "delta", "role",
		                       "assistant", "content", "", "logprobs", lp, "finish_reason",
		                       fin)
		    : text ? json_pack("{s:i,s:{s:s%},s:o,s:o}", "index", i, "delta", "content",
		                       text, n, "logprobs", lp, "finish_reason", fin)
		           : json_pack("{s:i,s:{},s:o,s:o}", "index", i, "delta", "logprobs", lp,
		                       "finish_reason", fin);
	else
		c = json_pack("{s:s%,s:i,s:o,s:o}", "text", text ? text : "", text ? n : 0, "index",
		              i, "logprobs", lp, "finish_reason", fin);
	return envelope(s, k, chat ? "chat.completion.chunk" : "text_completion",
	                json_pack("[o]", c));
}

/* Builds the next event into k->ev; -1 when the stream must end in error.
 * Choices go one after another: choice c's role, text chunks (each with the
 * logprobs of the tokens whose text it completes) and finish, then c + 1;
 * after the last, the usage chunk (include_usage) and [DONE]. */
static int next_event(struct conn *k)
{
	struct colid_server *s = k->srv;
	struct colid_job *j = k->jobs[k->cur];
	const char *object =
	    k->req.ep == COLID_EP_CHAT ? "chat.completion.chunk" : "text_completion";
	json_t *o, *u = NULL;
	int to, ids;

	if (k->stage == ST_ROLE) {
		k->stage = ST_TEXT;
		colid_split_init(&k->split, k->think_open);
		/* held: a chat reply whose calls or harmony channels are parsed
		 * at its end; a completion is text as generated, never held */
		k->held = k->req.ep == COLID_EP_CHAT &&
		          (calls_of(k) || s->chat.family == COLI_CHAT_HARMONY);
		if (k->req.ep == COLID_EP_CHAT)
			return set_event(
			    k, with_ids(k, chunk(s, k, NULL, 0, NULL, 1, NULL), j, 0, 0), NULL, 0);
	}
	pthread_mutex_lock(&j->mu);
	/* chat: new text past what was looked at (a held marker waits for more;
	 * a held reply, the job's end: else the end chunk would go out first);
	 * completions: past what was sent; return_token_ids: a token whose text
	 * went out (chat) or is committed (completions), so a token without
	 * text (a model without a tokenizer) has its chunk at once */
	ids = k->req.return_token_ids && !k->held ? k->tok_sent : -1;
	if (wait_job(j, k->mc, k->req.ep == COLID_EP_CHAT ? k->looked : k->sent, !k->held, ids,
	             k->req.ep == COLID_EP_CHAT ? k->sent : j->committed)) {
		pthread_mutex_unlock(&j->mu);
		return -1;
	}
	if (k->req.ep == COLID_EP_CHAT && !j->status &&
	    (k->held ? j->done && k->sent < j->len
	             : j->committed > k->looked || (j->done && k->sent < j->len) ||
	                   tok_ready(j, ids, k->sent))) {
		int done = j->done, n_calls = 0;
		json_t *d;

		k->looked = j->committed;
		if (k->held) { /* the whole reply at once: reasoning, content, tool calls */
			json_t *m =
			    colid_reply_message(s->chat.family, j->text, j->len, k->think_open,
			                        calls_of(k), k->id, &n_calls);
			json_t *calls = m ? json_object_get(m, "tool_calls") : NULL, *x;
			size_t i;

			json_array_foreach(calls, i, x)
			    json_object_set_new(x, "index", json_integer((json_int_t)i));
			if (m)
				json_object_del(m, "role");
			if (m && json_is_null(json_object_get(m, "content")))
				json_object_del(m, "content");
			d = m;
			k->sent = j->len;
			to = j->n_toks;
		} else {
			struct colid_span r, c;
			size_t upto;

			colid_split_next(&k->split, j->text, k->sent, done ? j->len : j->committed,
			                 done, &r, &c, &upto);
			d = split_delta(j->text, r, c);
			k->sent = upto;
			for (to = k->tok_sent; to < j->n_toks && j->toks[to].end <= (int)k->sent;)
				to++;
		}
		if (n_calls)
			k->calls = 1;
		o = d && (json_object_size(d) || (ids >= 0 && to > k->tok_sent))
		        ? with_ids(k,
		                   chunk_delta(s, k, d,
		                               k->req.logprobs >= 0
		                                   ? logprobs_of(s, k, j, k->tok_sent, to)
		                                   : NULL),
		                   j, k->tok_sent, to)
		        : NULL;
		if (!o)
			json_decref(d);
		k->tok_sent = o ? to : k->tok_sent;
		pthread_mutex_unlock(&j->mu);
		if (o)
			return set_event(k, o, NULL, 0);
		return next_event(k); /* held back: wait for more */
	}
	if (k->req.ep != COLID_EP_CHAT &&
	    (j->committed > k->sent || tok_ready(j, ids, j->committed))) {
		for (to = k->tok_sent; to < j->n_toks && j->toks[to].end <= (int)j->committed;)
			to++;
		o = with_ids(
		    k,
		    chunk(s, k, j->text + k->sent, j->committed - k->sent, NULL, 0,
		          k->req.logprobs >= 0 ? logprobs_of(s, k, j, k->tok_sent, to) : NULL),
		    j, k->tok_sent, to);
		k->sent = j->committed;
		k->tok_sent = to;
		pthread_mutex_unlock(&j->mu);
		return set_event(k, o, NULL, 0);
	}
	if (j->status) { /* headers are gone already: the error travels as an event */
		int shut = j->status == -ESHUTDOWN;

		k->stage = ST_END;
		o = json_pack("{s:{s:s,s:s,s:n,s:o}}", "error", "message",
		              shut ? "the server is shutting down" : strerror(-j->status), "type",
		              "server_error", "param", "code",
		              shut ? json_string("shutting_down") : json_null());
		pthread_mutex_unlock(&j->mu);
		return set_event(k, o, NULL, 1);
	}
	o = with_ids(k,
	             chunk(s, k, NULL, 0,
	                   k->calls && j->finish == COLID_FINISH_STOP ? "tool_calls"
	                                                              : finish_name(j->finish),
	                   0,
	                   k->req.logprobs >= 0 && k->tok_sent < j->n_toks
	                       ? logprobs_of(s, k, j, k->tok_sent, j->n_toks)
	                       : NULL),
	             j, k->tok_sent, j->n_toks);
	pthread_mutex_unlock(&j->mu);
	k->cur++, k->sent = 0, k->looked = 0, k->tok_sent = 0, k->calls = 0, k->ids_begun = 0;
	if (k->cur < k->n_jobs) { /* the next choice */
		k->stage = ST_ROLE;
		return set_event(k, o, NULL, 0);
	}
	k->stage = ST_END;
	if (k->req.include_usage) {
		u = json_pack("{s:s,s:s,s:I,s:s,s:[],s:o}", "id", k->id, "object", object,
		              "created", (json_int_t)k->created, "model", s->model_id, "choices",
		              "usage", usage_json(k, total_gen(k)));
	}
	return set_event(k, o, u, 1);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct conn *k = cls;

	for (;;) {
		if (k->ev_off < k->ev_len) {
			size_t n = k->ev_len - k->ev_off < max ? k->ev_len - k->ev_off : max;

			memcpy(buf, k->ev + k->ev_off, n);
			k->ev_off += n;
			return (ssize_t)n;
		}
		if (k->stage == ST_END)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (next_event(k) < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
}

enum MHD_Result colid_answer_stream(struct colid_server *s, struct MHD_Connection *mc,
                                    struct conn *k)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	k->srv = s;
	k->mc = mc;
	r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, k, NULL);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	MHD_add_response_header(r, "Cache-Control", "no-cache");
	ret = MHD_queue_response(mc, 200, r);
	MHD_destroy_response(r);
	colid_metrics_request(&s->metrics, k->route, 200);
	k->status = 200;
	return ret;
}
