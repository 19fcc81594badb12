/*
 * core/chat_detect.c — which chat family a model's prompts use (see
 * core/text/chat.c for the families and their rendering): the container's stored
 * template text first (its markers "<|im_start|>", "[INST]", "[gMASK]", "]~b]",
 * DeepSeek's "<｜Assistant｜>", Kimi's "<|im_middle|>" or harmony's
 * "<|channel|>"), then the
 * tokenizer's added tokens, then the architecture. Also fills the BOS/EOS
 * text the [INST] family writes and the ChatML (GLM) end-of-turn id. Then
 * the Jinja renderer: unless --chat-template is "builtin", the template text
 * (the container's, or the file --chat-template names) is parsed by
 * core/jinja; a template that parses and renders a one-message request
 * renders every chat prompt (core/text/chat_jinja.c), one that does not
 * leaves the family renderer in charge and says why in t->jinja_why. It reads
 * an open engine (its container, config and tokenizer), so it sits at core's
 * top, above core/text.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core_internal.h"
#include "core/jinja/jinja.h"

/* DeepSeek's special tokens, fullwidth bars and U+2581 in UTF-8 */
#define DS_ASSISTANT                                                                               \
	"<\xef\xbd\x9c"                                                                            \
	"Assistant\xef\xbd\x9c>"
#define DS_EOS                                                                                     \
	"<\xef\xbd\x9c"                                                                            \
	"end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"

const char *coli_engine_chat_template(const coli_engine_t *e, size_t *len)
{
	const char *s;

	*len = 0;
	if (!e || !e->m.c)
		return NULL;
	s = coli_io_container_section(e->m.c, COLI_SECTION_CHAT_TEMPLATE, len);
	if (!s || !*len) {
		*len = 0;
		return NULL;
	}
	return s;
}

static int contains(const char *s, size_t n, const char *needle)
{
	return s && memmem(s, n, needle, strlen(needle)) != NULL;
}

static void copy_token(char *dst, size_t cap, const coli_tokenizer_t *tok, int id)
{
	const char *s = tok && id >= 0 ? coli_tokenizer_token_str(tok, id) : NULL;

	dst[0] = 0;
	if (s && strlen(s) < cap)
		strcpy(dst, s);
}

/* The Jinja renderer for t: the template of --chat-template FILE, else the
 * container's, parsed; t->jinja stays NULL (and t->jinja_why says why) when
 * the option is "builtin", there is no template, or it does not parse. */
static void jinja_init(const coli_engine_t *e, const char *tpl, size_t n,
                       struct coli_chat_template *t)
{
	const char *opt = e->opts.chat_template;
	char err[160], *file = NULL;
	int rc;

	t->jinja = NULL;
	if (!strcmp(opt, "builtin")) {
		snprintf(t->jinja_why, sizeof(t->jinja_why), "--chat-template builtin");
		return;
	}
	if (opt[0] && strcmp(opt, "auto")) {
		FILE *f = fopen(opt, "rb");
		long sz = -1;

		if (f && !fseek(f, 0, SEEK_END) && (sz = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET) &&
		    (file = malloc((size_t)sz + 1)) &&
		    fread(file, 1, (size_t)sz, f) == (size_t)sz) {
			tpl = file;
			n = (size_t)sz;
		} else {
			snprintf(t->jinja_why, sizeof(t->jinja_why), "--chat-template %.100s: %s",
			         opt, strerror(f ? EIO : errno));
			free(file);
			file = NULL;
			tpl = NULL;
		}
		if (f)
			fclose(f);
		if (!tpl)
			return;
	}
	if (!tpl) {
		snprintf(t->jinja_why, sizeof(t->jinja_why), "the model has no chat template");
		return;
	}
	rc = coli_jinja_parse(tpl, n, &t->jinja, err, sizeof(err));
	if (rc)
		snprintf(t->jinja_why, sizeof(t->jinja_why), "template not rendered: %.130s", err);
	else
		t->jinja_why[0] = 0;
	free(file);
	if (!rc) { /* and it must render the simplest request: one user message */
		static const struct coli_chat_msg hi = {"user", "Hi"};
		struct coli_chat_call c = {.msgs = &hi,
		                           .n_msgs = 1,
		                           .add_generation_prompt = 1,
		                           .enable_thinking = -1,
		                           .now = -1};
		char *out;
		size_t len;

		if (coli_chat_render_call(t, &c, &out, &len, err, sizeof(err))) {
			snprintf(t->jinja_why, sizeof(t->jinja_why),
			         "template does not render one user message: %.110s", err);
			coli_chat_template_free(t);
		} else {
			free(out);
		}
	}
}

void coli_chat_template_init(const coli_engine_t *e, struct coli_chat_template *t)
{
	const struct coli_model_config *c = coli_engine_config(e);
	const coli_tokenizer_t *tok = coli_engine_tokenizer(e);
	size_t n = 0;
	const char *tpl = coli_engine_chat_template(e, &n);

	memset(t, 0, sizeof(*t));
	t->eot_id = -1;
	t->eot2_id = -1;
	t->from_template = 1;
	if (contains(tpl, n, "<|im_start|>"))
		t->family = COLI_CHAT_CHATML;
	else if (contains(tpl, n, "[INST]"))
		t->family = COLI_CHAT_INST;
	else if (contains(tpl, n, "[gMASK]"))
		t->family = COLI_CHAT_GLM;
	else if (contains(tpl, n, "]~b]"))
		t->family = COLI_CHAT_MINIMAX;
	else if (contains(tpl, n, DS_ASSISTANT))
		t->family = COLI_CHAT_DEEPSEEK;
	else if (contains(tpl, n, "<|im_middle|>"))
		t->family = COLI_CHAT_KIMI;
	else if (contains(tpl, n, "<|channel|>"))
		t->family = COLI_CHAT_HARMONY;
	else {
		t->from_template = 0;
		/* Kimi's tokenizer before ChatML's marker, in case it has both */
		if (tok && coli_tokenizer_token_id(tok, "<|im_middle|>") >= 0)
			t->family = COLI_CHAT_KIMI;
		else if (tok && coli_tokenizer_token_id(tok, "<|im_start|>") >= 0)
			t->family = COLI_CHAT_CHATML;
		else if (tok && coli_tokenizer_token_id(tok, "[gMASK]") >= 0)
			t->family = COLI_CHAT_GLM;
		else if (tok && coli_tokenizer_token_id(tok, "]~b]") >= 0)
			t->family = COLI_CHAT_MINIMAX;
		else if (tok && coli_tokenizer_token_id(tok, DS_ASSISTANT) >= 0)
			t->family = COLI_CHAT_DEEPSEEK;
		else if ((tok && coli_tokenizer_token_id(tok, "<|channel|>") >= 0) ||
		         c->arch == COLI_ARCH_GPT_OSS)
			t->family = COLI_CHAT_HARMONY;
		else if (c->arch == COLI_ARCH_MIXTRAL)
			t->family = COLI_CHAT_INST;
		else
			t->family = COLI_CHAT_PLAIN;
	}
	if (t->family == COLI_CHAT_CHATML && tok)
		t->eot_id = coli_tokenizer_token_id(tok, "<|im_end|>");
	/* GLM's turn ends where the next one would start (GLM-4.5's
	 * generation_config lists <|user|> among its EOS ids). */
	if (t->family == COLI_CHAT_GLM && tok)
		t->eot_id = coli_tokenizer_token_id(tok, "<|user|>");
	if (t->family == COLI_CHAT_MINIMAX && tok)
		t->eot_id = coli_tokenizer_token_id(tok, "[e~[");
	if (t->family == COLI_CHAT_KIMI && tok)
		t->eot_id = coli_tokenizer_token_id(tok, "<|im_end|>");
	if (t->family == COLI_CHAT_DEEPSEEK && tok)
		t->eot_id = coli_tokenizer_token_id(tok, DS_EOS);
	/* harmony: the answer ends at <|return|> (its <|end|> closes the
	 * analysis channel before it); its date is today's, as strftime_now */
	if (t->family == COLI_CHAT_HARMONY) {
		time_t now = time(NULL);
		struct tm tm;

		if (tok) { /* a call ends the turn too, where generation_config does not say so */
			t->eot_id = coli_tokenizer_token_id(tok, "<|return|>");
			t->eot2_id = coli_tokenizer_token_id(tok, "<|call|>");
		}
		if (localtime_r(&now, &tm))
			strftime(t->date, sizeof(t->date), "%Y-%m-%d", &tm);
	}
	if (t->family == COLI_CHAT_INST) {
		/* Mixtral's own template starts with {{ bos_token }}; without a
		 * template we follow it, with one we do what it says. */
		if (c->bos >= 0 && (!tpl || contains(tpl, n, "bos_token")))
			copy_token(t->bos, sizeof(t->bos), tok, c->bos);
		if (c->n_eos > 0)
			copy_token(t->eos, sizeof(t->eos), tok, c->eos[0]);
	}
	if (c->bos >= 0)
		copy_token(t->bos_token, sizeof(t->bos_token), tok, c->bos);
	if (c->n_eos > 0)
		copy_token(t->eos_token, sizeof(t->eos_token), tok, c->eos[0]);
	jinja_init(e, tpl, n, t);
}
