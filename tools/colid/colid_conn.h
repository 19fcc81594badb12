/*
 * tools/colid/colid_conn.h — colid's HTTP connection (private to tools/colid/colid_http.c,
 * which routes requests, and tools/colid/colid_answer.c, which answers the
 * generation endpoints whole or as a stream): the per-connection state and
 * the reply helpers both use.
 */
#ifndef COLI_TOOLS_COLID_CONN_H
#define COLI_TOOLS_COLID_CONN_H

#include <jansson.h>
#include <microhttpd.h>

#include "tools/colid/colid.h"

enum stage { ST_ROLE, ST_TEXT, ST_END };

struct conn {
	enum colid_route route;
	char *body;
	size_t len, cap, seen;
	int too_big;
	int answered; /* a reply was queued at the headers */
	/* the access log's (--access-log): arrival at the headers, the request
	 * line, the status queued (0: none, the client left) */
	double t0;
	char method[16], path[160];
	int status;
	struct colid_request req;
	struct colid_job *jobs[COLID_MAX_N]; /* one per choice ('n'), run in order */
	int n_jobs;
	int n_prompt;
	char id[48];
	long created;
	/* streaming */
	struct colid_server *srv;
	struct MHD_Connection *mc;
	enum stage stage; /* of choice cur */
	int cur;
	size_t sent;   /* of choice cur's text */
	size_t looked; /* of its committed text (sent may lag: a marker held back) */
	int tok_sent;  /* of its token records (logprobs, token_ids) */
	int ids_begun; /* return_token_ids: its prompt's ids went out (first chunk) */
	/* chat replies (tools/colid/colid_reply.c): the prompt left a think block open;
	 * the stream's reasoning/content split; a stream held to its end (tools
	 * asked for, or harmony's channels; chat only: completions stream as
	 * generated whatever the family) */
	int think_open;
	struct colid_split split;
	int held;
	int calls; /* this choice's stream sent tool calls (finish_reason "tool_calls") */
	char *ev;  /* the event being written [ev_len], ev_off sent */
	size_t ev_len, ev_off;
};

/* Replies (tools/colid/colid_answer.c): a body (taken) with its content type; a
 * JSON object (taken); an error object. Each counts the status in the
 * metrics. */
enum MHD_Result colid_reply(struct colid_server *s, struct MHD_Connection *mc, struct conn *k,
                            int status, char *body, const char *ctype, int retry_after);
enum MHD_Result colid_reply_json(struct colid_server *s, struct MHD_Connection *mc, struct conn *k,
                                 int status, json_t *o);
enum MHD_Result colid_reply_error(struct colid_server *s, struct MHD_Connection *mc, struct conn *k,
                                  const struct colid_error *e, int retry_after);
/* Answer k's queued jobs: the whole reply once they are done, or a
 * server-sent event stream as their text commits. */
enum MHD_Result colid_answer_whole(struct colid_server *s, struct MHD_Connection *mc,
                                   struct conn *k);
enum MHD_Result colid_answer_stream(struct colid_server *s, struct MHD_Connection *mc,
                                    struct conn *k);

/* Answer the error now, from a function of (s, mc, k) returning an MHD_Result. */
#define FAIL(status, type, code, param, ...)                                                       \
	do {                                                                                       \
		struct colid_error e_;                                                             \
		colid_error_set(&e_, status, type, code, param, __VA_ARGS__);                      \
		return colid_reply_error(s, mc, k, &e_, 0);                                        \
	} while (0)

#endif
