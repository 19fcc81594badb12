/*
 * core/chat_detect.c — which chat family a model's prompts use (see
 * core/text/chat.c for the families and their rendering): the container's stored
 * template text first (its markers "<|im_start|>", "[INST]", "[gMASK]", "]~b]",
 * DeepSeek's "<｜Assistant｜>", Kimi's "<|im_middle|>" or harmony's
 * "<|channel|>"), then the
 * tokenizer's added tokens, then the architecture. Also fills the BOS/EOS
 * text the [INST] family writes and the ChatML (GLM) end-of-turn id. It reads
 * an open engine (its container, config and tokenizer), so it sits at core's
 * top, above core/text.
 */
#include <string.h>
#include <time.h>

#include "core/core_internal.h"

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

void coli_chat_template_init(const coli_engine_t *e, struct coli_chat_template *t)
{
	const struct coli_model_config *c = coli_engine_config(e);
	const coli_tokenizer_t *tok = coli_engine_tokenizer(e);
	size_t n = 0;
	const char *tpl = coli_engine_chat_template(e, &n);

	memset(t, 0, sizeof(*t));
	t->eot_id = -1;
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

		if (tok)
			t->eot_id = coli_tokenizer_token_id(tok, "<|return|>");
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
}
