/*
 * tools/colid/request/colid_request.h — what the three files of colid's request parser
 * share (private to tools/colid/request/colid_request.c, colid_request_input.c and
 * colid_request_output.c; the rest of colid sees colid_request_parse in
 * tools/colid/colid.h): the 400 every field error is, the typed getters, and the
 * field parsers colid_request.c's walk over a body's keys hands on to.
 *
 * Every parser here takes a key's value v (a jansson node the caller owns)
 * and the request r being filled, and returns 0, -EINVAL with e filled (a
 * 400 naming the field), or -ENOMEM; what it allocated before an error
 * stays in r, for colid_request_free.
 */
#ifndef COLI_TOOLS_COLID_REQUEST_H
#define COLI_TOOLS_COLID_REQUEST_H

#include <jansson.h>

#include "tools/colid/colid.h"

/* A field error: a 400 invalid_request_error naming param (returns -EINVAL). */
#define BAD(e, param, ...)                                                                         \
	colid_error_set(e, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

/* "an object", "a string", ... for messages ("got a string"). */
const char *colid_json_type(const json_t *v);
/* v, named k in the error, a number within [lo, hi] into *out. */
int colid_json_number(const char *k, json_t *v, double lo, double hi, double *out,
                      struct colid_error *e);
/* v, named k in the error, an integer within [lo, hi] into *out. */
int colid_json_int(const char *k, json_t *v, long long lo, long long hi, long long *out,
                   struct colid_error *e);

/* colid_request_input.c: messages (chat), prompt (completions), tools and
 * chat_template_kwargs (chat). */
int colid_request_messages_parse(json_t *v, struct colid_request *r, struct colid_error *e);
int colid_request_prompt_parse(json_t *v, struct colid_request *r, struct colid_error *e);
int colid_request_tools_parse(json_t *v, struct colid_request *r, struct colid_error *e);
int colid_request_kwargs_parse(json_t *v, struct colid_request *r, struct colid_error *e);

/* colid_request_output.c: stop; the sampling field k (n, min_p, the
 * penalties, logit_bias, logprobs, top_logprobs; 1 when k is none of them);
 * tool_choice or response_format, as k says (chat). */
int colid_request_stop_parse(json_t *v, struct colid_request *r, struct colid_error *e);
int colid_request_sampling_parse(const char *k, json_t *v, struct colid_request *r,
                                 struct colid_error *e);
int colid_request_choice_parse(const char *k, json_t *v, struct colid_request *r,
                               struct colid_error *e);

#endif
