/*
 * core/text/chat.c — chat prompts without Jinja: the built-in renderers,
 * the fallback of core/text/chat_jinja.c (which renders the model's own
 * template with core/jinja when it has one that parses) and what
 * --chat-template builtin selects.
 *
 * A Hugging Face model ships its chat format as a Jinja template
 * (tokenizer_config.json "chat_template", stored verbatim in the container's
 * COLI_SECTION_CHAT_TEMPLATE). The MoE families coli reads use one of a few
 * formats, so instead of interpreting Jinja we recognise the family and write
 * the format in C:
 *
 *   family  recognised by                           renders
 *   CHATML  "<|im_start|>" in the template, else    <|im_start|>system\nS<|im_end|>\n
 *           an added token "<|im_start|>"           <|im_start|>user\nU<|im_end|>\n
 *                                                   <|im_start|>assistant\nA<|im_end|>\n
 *                                                   <|im_start|>assistant\n   (generation)
 *   INST    "[INST]" in the template, else the      BOS [INST] S\n\nU [/INST]A EOS[INST] U [/INST]
 *           mixtral architecture                    (BOS only if the template names bos_token)
 *   GLM     "[gMASK]" in the template, else an      [gMASK]<sop><|system|>\nS<|user|>\nU
 *           added token "[gMASK]"                   <|assistant|>\n<think></think>\nA
 *                                                   <|assistant|>   (generation)
 *   MINIMAX "]~b]" in the template, else an added   ]~!b[]~b]system\nS[e~[\n]~b]user\nU[e~[\n
 *           token "]~b]" (MiniMax-M2)               ]~b]ai\nA[e~[\n
 *                                                   ]~b]ai\n<think>\n   (generation)
 *   DEEPSEEK "<｜Assistant｜>" in the template, else  BOS S<｜User｜>U<｜Assistant｜></think>A
 *           an added token of that text             <｜end▁of▁sentence｜>
 *           (DeepSeek-V3.1)                         <｜Assistant｜></think>   (generation)
 *   KIMI    "<|im_middle|>" in the template, else   <|im_system|>system<|im_middle|>S<|im_end|>
 *           an added token "<|im_middle|>"          <|im_user|>user<|im_middle|>U<|im_end|>
 *           (Kimi-K2)                               <|im_assistant|>assistant<|im_middle|>A
 *                                                   <|im_end|>, the same opening (generation)
 *   HARMONY "<|channel|>" in the template, else an   <|start|>system<|message|>(its system text,
 *           added token "<|channel|>", else the     t->date)<|end|><|start|>developer
 *           gpt_oss architecture (gpt-oss)          <|message|># Instructions\n\nS\n\n<|end|>
 *                                                   <|start|>user<|message|>U<|end|>
 *                                                   <|start|>assistant<|channel|>final
 *                                                   <|message|>A<|end|>
 *                                                   <|start|>assistant   (generation)
 *   PLAIN   anything else (documented fallback)     System: S\n\nUser: U\nAssistant: A\n
 *                                                   ...Assistant:
 *
 * The renderer produces text; special tokens in it (<|im_start|>, <s>, EOS)
 * become their ids when the caller encodes it, since coli_tokenizer_encode
 * matches added tokens written in text. The end-of-turn id of ChatML
 * (<|im_end|>) is reported so that a server stops there even when the model's
 * EOS list lacks it (GLM's is <|user|>). GLM-4.5's thinking switch
 * (enable_thinking) is t->no_think: 0 renders what its template renders when
 * the switch is not given (thinking on), 1 what it renders with
 * enable_thinking=false. MiniMax-M2's and Kimi-K2's templates have no such
 * switch, so their renderers ignore no_think, as jinja2 ignores the keyword.
 * DeepSeek-V3.1's (thinking, or enable_thinking in llama.cpp's copy) is off
 * unless given: t->think_on renders it given true. Tool calls and tool
 * results are not rendered by any family (the roles are system, user,
 * assistant; harmony also takes developer). Harmony's reasoning effort is its
 * template's default (medium) and its date t->date. The _cases.jsonl files of tests/fixtures/chat/
 * hold jinja2's renderings of the four templates (tools/ref/chat_jinja_cases.py).
 * tests/fixtures/tokenizer/chat_cases.jsonl holds the text
 * transformers renders for the fixtures; tests/daemon/chat_render checks it.
 *
 * This file is pure (no engine), so colid's request fuzzer links it alone;
 * recognising the family of a model is core/chat_detect.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"

const char *coli_chat_family_name(enum coli_chat_family f)
{
	switch (f) {
	case COLI_CHAT_CHATML:
		return "chatml";
	case COLI_CHAT_INST:
		return "inst";
	case COLI_CHAT_GLM:
		return "glm";
	case COLI_CHAT_MINIMAX:
		return "minimax";
	case COLI_CHAT_DEEPSEEK:
		return "deepseek";
	case COLI_CHAT_KIMI:
		return "kimi";
	case COLI_CHAT_HARMONY:
		return "harmony";
	default:
		return "plain";
	}
}

/* ---- a growing string ---- */
struct sbuf {
	char *p;
	size_t len, cap;
	int err;
};

static void put_n(struct sbuf *b, const char *s, size_t n)
{
	if (b->err)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->err = -ENOMEM;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

static void put(struct sbuf *b, const char *s)
{
	put_n(b, s, strlen(s));
}

enum role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT, ROLE_DEVELOPER, ROLE_BAD };

static enum role role_of(const char *r)
{
	if (!r)
		return ROLE_BAD;
	if (!strcmp(r, "system"))
		return ROLE_SYSTEM;
	if (!strcmp(r, "user"))
		return ROLE_USER;
	if (!strcmp(r, "assistant"))
		return ROLE_ASSISTANT;
	if (!strcmp(r, "developer"))
		return ROLE_DEVELOPER;
	return ROLE_BAD;
}

static void render_chatml(struct sbuf *b, const struct coli_chat_msg *m, int n, int gen)
{
	for (int i = 0; i < n; i++) {
		put(b, "<|im_start|>");
		put(b, m[i].role);
		put(b, "\n");
		put(b, m[i].content);
		put(b, "<|im_end|>\n");
	}
	if (gen)
		put(b, "<|im_start|>assistant\n");
}

/* Mixtral: user turns in [INST] ... [/INST], assistant turns closed by EOS.
 * The system text goes before the first user message, separated by a blank
 * line (what Mistral's later templates do; Mixtral's own refuses it). */
static void render_inst(struct sbuf *b, const struct coli_chat_template *t,
                        const struct coli_chat_msg *m, int n)
{
	const char *sys = NULL;

	put(b, t->bos);
	for (int i = 0; i < n; i++) {
		switch (role_of(m[i].role)) {
		case ROLE_SYSTEM:
			sys = m[i].content;
			break;
		case ROLE_USER:
			put(b, "[INST] ");
			if (sys) {
				put(b, sys);
				put(b, "\n\n");
				sys = NULL;
			}
			put(b, m[i].content);
			put(b, " [/INST]");
			break;
		default:
			put(b, m[i].content);
			put(b, t->eos);
			break;
		}
	}
	if (sys) { /* a system message with no user message after it */
		put(b, "[INST] ");
		put(b, sys);
		put(b, " [/INST]");
	}
}

static void render_plain(struct sbuf *b, const struct coli_chat_msg *m, int n, int gen)
{
	for (int i = 0; i < n; i++) {
		switch (role_of(m[i].role)) {
		case ROLE_SYSTEM:
			put(b, "System: ");
			put(b, m[i].content);
			put(b, "\n\n");
			break;
		case ROLE_USER:
			put(b, "User: ");
			put(b, m[i].content);
			put(b, "\n");
			break;
		default:
			put(b, "Assistant: ");
			put(b, m[i].content);
			put(b, "\n");
			break;
		}
	}
	if (gen)
		put(b, "Assistant:");
}

/* ---- GLM-4.5 ---- */

/* The bytes Python's str.strip() removes, ASCII only (the template strips
 * assistant text; Unicode spaces are kept here, a documented difference). */
static int is_space(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* Writes s[0, n) without its leading and trailing spaces; 0 if nothing is left. */
static int put_stripped(struct sbuf *b, const char *s, size_t n)
{
	while (n && is_space(*s))
		s++, n--;
	while (n && is_space(s[n - 1]))
		n--;
	put_n(b, s, n);
	return n > 0;
}

static int has_text(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_space(s[i]))
			return 1;
	return 0;
}

/* The last occurrence of needle in s[0, n), or NULL. */
static const char *last_of(const char *s, size_t n, const char *needle)
{
	size_t k = strlen(needle);
	const char *hit = NULL, *p;

	while (n >= k && (p = memmem(s, n, needle, k))) {
		hit = p;
		n -= (size_t)(p + 1 - s);
		s = p + 1;
	}
	return hit;
}

/* An assistant turn: the template splits "<think>R</think>A" into reasoning
 * R (kept only for turns after the last user message) and answer A; a turn
 * with no reasoning gets an empty <think></think>. */
static void glm_assistant(struct sbuf *b, const char *c, int after_last_user)
{
	const char *close = strstr(c, "</think>"), *r = c, *a = c, *open;
	size_t rn = 0, end;

	if (close) {
		end = (size_t)(close - c);
		while (end && c[end - 1] == '\n')
			end--;
		open = last_of(c, end, "<think>");
		r = open ? open + strlen("<think>") : c;
		while (r < c + end && *r == '\n')
			r++;
		rn = (size_t)(c + end - r);
		a = last_of(c, strlen(c), "</think>") + strlen("</think>");
		while (*a == '\n')
			a++;
	}
	put(b, "<|assistant|>");
	if (after_last_user && rn) {
		put(b, "\n<think>");
		put_stripped(b, r, rn);
		put(b, "</think>");
	} else {
		put(b, "\n<think></think>");
	}
	if (has_text(a, strlen(a))) {
		put(b, "\n");
		put_stripped(b, a, strlen(a));
	}
}

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);

	return n >= k && !memcmp(s + n - k, tail, k);
}

/* ---- MiniMax-M2 ---- */

/* s[0, *n) without its leading and trailing '\n' (Python's strip('\n')). */
static void trim_nl(const char **s, size_t *n)
{
	while (*n && **s == '\n')
		(*s)++, (*n)--;
	while (*n && (*s)[*n - 1] == '\n')
		(*n)--;
}

/* An assistant turn's text. With a </think> in it the template splits it:
 * reasoning R is the text before the first </think>, after the last <think>
 * there, the answer A the text after the last </think>, each without its
 * outer newlines; "<think>\nR\n</think>\n\n" is kept only for a non-empty R
 * in a turn after the last user message. Without one the text is as sent. */
static void minimax_assistant(struct sbuf *b, const char *c, int after_last_user)
{
	const char *close = strstr(c, "</think>"), *r = c, *a = c, *open;
	size_t rn = close ? (size_t)(close - c) : 0, an = strlen(c);

	if (close) {
		trim_nl(&r, &rn);
		open = last_of(r, rn, "<think>");
		if (open) {
			rn -= (size_t)(open + strlen("<think>") - r);
			r = open + strlen("<think>");
		}
		trim_nl(&r, &rn);
		a = last_of(c, an, "</think>") + strlen("</think>");
		an = strlen(a);
		trim_nl(&a, &an);
		if (after_last_user && rn) {
			put(b, "<think>\n");
			put_n(b, r, rn);
			put(b, "\n</think>\n\n");
		}
	}
	put_n(b, a, an);
}

/* A first system message is the system text (empty or absent: the
 * template's default identity); later system messages are dropped, as the
 * template drops them. Its template has no thinking switch: the generation
 * prompt always opens a <think> block, whatever t->no_think says. */
static void render_minimax(struct sbuf *b, const struct coli_chat_msg *m, int n, int gen)
{
	int first = n > 0 && role_of(m[0].role) == ROLE_SYSTEM, last_user = -1;

	put(b, "]~!b[]~b]system\n");
	put(b, first && *m[0].content ? m[0].content : "You are a helpful assistant.");
	put(b, "[e~[\n");
	for (int i = first; i < n; i++)
		if (role_of(m[i].role) == ROLE_USER)
			last_user = i;
	for (int i = first; i < n; i++) {
		switch (role_of(m[i].role)) {
		case ROLE_USER:
			put(b, "]~b]user\n");
			put(b, m[i].content);
			put(b, "[e~[\n");
			break;
		case ROLE_ASSISTANT:
			put(b, "]~b]ai\n");
			minimax_assistant(b, m[i].content, i > last_user);
			put(b, "[e~[\n");
			break;
		default:
			break;
		}
	}
	if (gen)
		put(b, "]~b]ai\n<think>\n");
}

/* ---- DeepSeek-V3.1 ---- */

/* DeepSeek's special tokens are written with fullwidth bars and U+2581. */
#define DS_BOS                                                                                     \
	"<\xef\xbd\x9c"                                                                            \
	"begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DS_EOS                                                                                     \
	"<\xef\xbd\x9c"                                                                            \
	"end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define DS_ASSISTANT                                                                               \
	"<\xef\xbd\x9c"                                                                            \
	"Assistant\xef\xbd\x9c>"

/* BOS, then every system message joined by blank lines, then the turns: a
 * user turn, an assistant turn opened (only right after a user turn) by
 * <｜Assistant｜></think> and closed by EOS, its text after the first
 * </think> (the reasoning is never kept). The generation prompt follows only
 * a user turn and opens the answer (</think>) unless t->think_on, the
 * template's thinking=true, opens the reasoning (<think>); the template's
 * default is thinking off, so no_think changes nothing. */
static void render_deepseek(struct sbuf *b, const struct coli_chat_template *t,
                            const struct coli_chat_msg *m, int n, int gen)
{
	int first_sys = 1, after_user = 0;

	put(b, DS_BOS);
	for (int i = 0; i < n; i++)
		if (role_of(m[i].role) == ROLE_SYSTEM) {
			if (!first_sys)
				put(b, "\n\n");
			put(b, m[i].content);
			first_sys = 0;
		}
	for (int i = 0; i < n; i++) {
		const char *c = m[i].content, *close;

		switch (role_of(m[i].role)) {
		case ROLE_USER:
			put(b, DS_USER);
			put(b, c);
			after_user = 1;
			break;
		case ROLE_ASSISTANT:
			if (after_user)
				put(b, DS_ASSISTANT "</think>");
			after_user = 0;
			close = strstr(c, "</think>");
			put(b, close ? close + strlen("</think>") : c);
			put(b, DS_EOS);
			break;
		default:
			break;
		}
	}
	if (gen && after_user)
		put(b, t->think_on ? DS_ASSISTANT "<think>" : DS_ASSISTANT "</think>");
}

/* ---- Kimi-K2 ---- */

/* <|im_system|>, <|im_user|> or <|im_assistant|>, the role, <|im_middle|>,
 * the text, <|im_end|>; a conversation that does not open with a system
 * message gets the template's default one. No thinking switch. */
static void render_kimi(struct sbuf *b, const struct coli_chat_msg *m, int n, int gen)
{
	if (n > 0 && role_of(m[0].role) != ROLE_SYSTEM)
		put(b, "<|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|>");
	for (int i = 0; i < n; i++) {
		switch (role_of(m[i].role)) {
		case ROLE_SYSTEM:
			put(b, "<|im_system|>system<|im_middle|>");
			break;
		case ROLE_USER:
			put(b, "<|im_user|>user<|im_middle|>");
			break;
		default:
			put(b, "<|im_assistant|>assistant<|im_middle|>");
			break;
		}
		put(b, m[i].content);
		put(b, "<|im_end|>");
	}
	if (gen)
		put(b, "<|im_assistant|>assistant<|im_middle|>");
}

/* ---- gpt-oss (harmony) ---- */

/* The system turn the template writes itself (no tools, no builtin tools,
 * the default identity and reasoning effort), with t->date; then a first
 * system or developer message as the developer turn's instructions (an empty
 * one: no developer turn); later system and developer messages are dropped,
 * as the template drops them. Earlier turns' reasoning (analysis) is never
 * rendered for inference: an assistant message is its final channel, ended
 * by <|end|>, or by <|return|> when it ends a conversation rendered without
 * a generation prompt. Content carrying a channel header is refused, as the
 * template raises. */
static void render_harmony(struct sbuf *b, const struct coli_chat_template *t,
                           const struct coli_chat_msg *m, int n, int gen)
{
	int first =
	    n > 0 && (role_of(m[0].role) == ROLE_SYSTEM || role_of(m[0].role) == ROLE_DEVELOPER);

	put(b, "<|start|>system<|message|>You are ChatGPT, a large language model trained by "
	       "OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: ");
	put(b, t->date);
	put(b, "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. "
	       "Channel must be included for every message.<|end|>");
	if (first && *m[0].content) {
		put(b, "<|start|>developer<|message|># Instructions\n\n");
		put(b, m[0].content);
		put(b, "\n\n<|end|>");
	}
	for (int i = first; i < n; i++) {
		switch (role_of(m[i].role)) {
		case ROLE_USER:
			put(b, "<|start|>user<|message|>");
			put(b, m[i].content);
			put(b, "<|end|>");
			break;
		case ROLE_ASSISTANT:
			put(b, "<|start|>assistant<|channel|>final<|message|>");
			put(b, m[i].content);
			put(b, i == n - 1 && !gen ? "<|return|>" : "<|end|>");
			break;
		default:
			break;
		}
	}
	if (gen)
		put(b, "<|start|>assistant");
}

/* What harmony's template refuses: an assistant text carrying a channel header. */
static int harmony_bad(const struct coli_chat_msg *m)
{
	return role_of(m->role) == ROLE_ASSISTANT &&
	       (strstr(m->content, "<|channel|>analysis<|message|>") ||
	        strstr(m->content, "<|channel|>final<|message|>"));
}

static void render_glm(struct sbuf *b, const struct coli_chat_template *t,
                       const struct coli_chat_msg *m, int n, int gen)
{
	int last_user = -1;

	for (int i = 0; i < n; i++)
		if (role_of(m[i].role) == ROLE_USER)
			last_user = i;
	put(b, "[gMASK]<sop>");
	for (int i = 0; i < n; i++) {
		switch (role_of(m[i].role)) {
		case ROLE_SYSTEM:
			put(b, "<|system|>\n");
			put(b, m[i].content);
			break;
		case ROLE_USER:
			put(b, "<|user|>\n");
			put(b, m[i].content);
			if (t->no_think && !ends_with(m[i].content, "/nothink"))
				put(b, "/nothink");
			break;
		default:
			glm_assistant(b, m[i].content, i > last_user);
			break;
		}
	}
	if (gen)
		put(b, t->no_think ? "<|assistant|>\n<think></think>" : "<|assistant|>");
}

int coli_chat_render(const struct coli_chat_template *t, const struct coli_chat_msg *m, int n,
                     int add_generation_prompt, char **out, size_t *len)
{
	struct sbuf b = {0};

	*out = NULL;
	*len = 0;
	for (int i = 0; i < n; i++) {
		enum role r = role_of(m[i].role);

		if (r == ROLE_BAD || !m[i].content ||
		    (r == ROLE_DEVELOPER && t->family != COLI_CHAT_HARMONY) ||
		    (t->family == COLI_CHAT_HARMONY && harmony_bad(&m[i])))
			return -EINVAL;
	}
	put(&b, ""); /* an empty conversation is an empty string, not NULL */
	switch (t->family) {
	case COLI_CHAT_CHATML:
		render_chatml(&b, m, n, add_generation_prompt);
		break;
	case COLI_CHAT_INST:
		render_inst(&b, t, m, n);
		break;
	case COLI_CHAT_GLM:
		render_glm(&b, t, m, n, add_generation_prompt);
		break;
	case COLI_CHAT_MINIMAX:
		render_minimax(&b, m, n, add_generation_prompt);
		break;
	case COLI_CHAT_DEEPSEEK:
		render_deepseek(&b, t, m, n, add_generation_prompt);
		break;
	case COLI_CHAT_KIMI:
		render_kimi(&b, m, n, add_generation_prompt);
		break;
	case COLI_CHAT_HARMONY:
		render_harmony(&b, t, m, n, add_generation_prompt);
		break;
	default:
		render_plain(&b, m, n, add_generation_prompt);
		break;
	}
	if (b.err) {
		free(b.p);
		return b.err;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}
