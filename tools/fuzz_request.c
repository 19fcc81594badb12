/*
 * tools/fuzz_request.c — libFuzzer target for colid's request parser
 * (tools/colid_request.c): the input is an HTTP body, parsed as both a chat
 * and a completions request; an accepted one is rendered through every chat
 * family (core/text/chat.c) and the prompt tokenized with the fixture
 * tokenizer (tools/fuzz_tok.h), and its error path is formatted, so a parser
 * that lets through something the renderer, the tokenizer or the JSON writer
 * cannot take shows up as an ASan/UBSan report; an accepted request's
 * sampling fields (n, logprobs, logit_bias, min_p, penalties) must lie in
 * their documented ranges. The first byte picks nothing: the body is the
 * whole input, so a corpus of real request bodies works as seeds.
 *
 * fuzz-sources: tools/colid_request.c
 */
#include <stdlib.h>
#include <string.h>

#include "tools/colid.h"
#include "tools/fuzz_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void render_all(const struct colid_request *r)
{
	struct coli_chat_template t = {.eot_id = -1};

	strcpy(t.bos, "<s>");
	strcpy(t.eos, "</s>");
	for (int f = COLI_CHAT_PLAIN; f <= COLI_CHAT_KIMI; f++) {
		char *s;
		size_t n;

		t.family = (enum coli_chat_family)f;
		if (!coli_chat_render(&t, r->msgs, r->n_msgs, 1, &s, &n)) {
			if (strlen(s) != n) /* contents hold no NUL: jansson refuses \u0000 */
				abort();
			round_trip(fixture_tokenizer(), s, n);
			free(s);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int ep = COLID_EP_COMPLETIONS; ep <= COLID_EP_CHAT; ep++) {
		struct colid_request r;
		struct colid_error e;

		memset(&e, 0, sizeof(e));
		if (colid_request_parse((const char *)data, size, (enum colid_endpoint)ep, &r,
		                        &e)) {
			char *js = colid_error_json(&e);

			if (!js || e.status < 400 || e.status > 599)
				abort();
			free(js);
			continue;
		}
		/* the sampling fields: within their documented ranges once accepted */
		if (r.n < 1 || r.n > COLID_MAX_N || r.logprobs < -1 ||
		    r.logprobs > COLI_SAMPLER_MAX_TOP || r.n_bias < 0 ||
		    r.n_bias > COLID_MAX_BIAS || !(r.min_p >= 0 && r.min_p <= 1) ||
		    !(r.repetition_penalty > 0) ||
		    !(r.presence_penalty >= -2 && r.presence_penalty <= 2) ||
		    !(r.frequency_penalty >= -2 && r.frequency_penalty <= 2))
			abort();
		for (int i = 0; i < r.n_bias; i++)
			if (r.bias[i].id < 0 || !(r.bias[i].bias >= -100 && r.bias[i].bias <= 100))
				abort();
		if (ep == COLID_EP_CHAT)
			render_all(&r);
		else if (!r.prompt && !r.n_prompt_ids)
			abort();
		else if (r.prompt)
			round_trip(fixture_tokenizer(), r.prompt, r.prompt_len);
		colid_request_free(&r);
	}
	return 0;
}
