/*
 * tools/fuzz/fuzz_request.c — libFuzzer target for colid's request parser
 * (tools/colid/request/colid_request*.c): the input is an HTTP body, parsed as both a chat
 * and a completions request; an accepted one is rendered through every chat
 * family (core/text/chat.c) and through the Jinja renderer with Qwen3's and
 * gpt-oss's templates (core/text/chat_jinja.c: messages, tools and
 * chat_template_kwargs as JSON; read once from tests/fixtures/chat/, the
 * target runs from the repository's root), and a completions request's
 * prompts (1..COLID_MAX_N of them, times n at most COLID_MAX_N choices; each
 * text or token ids, not empty) tokenized with the fixture
 * tokenizer (tools/fuzz/fuzz_tok.h), and its error path is formatted, so a parser
 * that lets through something the renderer, the tokenizer or the JSON writer
 * cannot take shows up as an ASan/UBSan report; an accepted request's
 * sampling fields (n, logprobs, logit_bias, min_p, penalties) must lie in
 * their documented ranges; a chat request's response_format or forced
 * tool_choice is compiled as colid does (colid_grammar_of, ChatML): a
 * grammar, or a 4xx saying why. The first byte picks nothing: the body is the
 * whole input, so a corpus of real request bodies works as seeds.
 *
 * fuzz-sources: tools/colid/request/colid_request.c tools/colid/request/colid_request_input.c
 * fuzz-sources: tools/colid/request/colid_request_output.c tools/colid/colid_sampling.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jinja/jinja.h"
#include "tools/colid/colid.h"
#include "tools/fuzz/fuzz_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static coli_jinja_t *load_template(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	coli_jinja_t *t = NULL;
	char err[256];

	if (f)
		fclose(f);
	if (!n || coli_jinja_parse(buf, n, &t, err, sizeof(err)))
		abort(); /* run from the repository's root */
	return t;
}

static void render_jinja(const struct colid_request *r)
{
	static coli_jinja_t *tpl[2];
	struct coli_chat_template t = {.eot_id = -1};
	struct coli_chat_call c = {.msgs = r->msgs,
	                           .n_msgs = r->n_msgs,
	                           .messages_json = r->messages_json,
	                           .tools_json = r->tools_json,
	                           .kwargs_json = r->kwargs_json,
	                           .add_generation_prompt = 1,
	                           .enable_thinking = r->enable_thinking,
	                           .now = 0};

	if (!tpl[0]) {
		tpl[0] = load_template("tests/fixtures/chat/qwen3_chat_template.jinja");
		tpl[1] = load_template("tests/fixtures/chat/gpt_oss_chat_template.jinja");
	}
	strcpy(t.bos_token, "<s>");
	for (int i = 0; i < 2; i++) {
		char *s, err[256];
		size_t n;

		t.jinja = tpl[i];
		if (!coli_chat_render_call(&t, &c, &s, &n, err, sizeof(err))) {
			if (strlen(s) != n)
				abort();
			round_trip(fixture_tokenizer(), s, n);
			free(s);
		} else if (!err[0]) {
			abort(); /* a refusal says why */
		}
	}
}

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
		if (ep == COLID_EP_CHAT) {
			struct colid_server srv = {
			    .chat = {.family = COLI_CHAT_CHATML, .eot_id = -1}};
			struct coli_grammar *g = NULL;

			render_all(&r);
			render_jinja(&r);
			/* response_format / a forced call: the grammar colid would make,
			 * or a 4xx that says why */
			if (colid_grammar_of(&srv, &r, &g, &e) &&
			    (e.status < 400 || e.status > 599))
				abort();
			coli_grammar_free(g);
		} else {
			/* 1..COLID_MAX_N prompts, each text or ids, not empty; their
			 * choices within COLID_MAX_N */
			if (r.n_prompts < 1 || r.n_prompts * r.n > COLID_MAX_N)
				abort();
			for (int i = 0; i < r.n_prompts; i++) {
				const struct colid_prompt *p = &r.prompts[i];

				if (!p->text == !p->ids || (p->text && !p->len) ||
				    (p->ids && p->n_ids < 1))
					abort();
				for (int t = 0; p->ids && t < p->n_ids; t++)
					if (p->ids[t] < 0)
						abort();
				if (p->text)
					round_trip(fixture_tokenizer(), p->text, p->len);
			}
		}
		colid_request_free(&r);
	}
	return 0;
}
