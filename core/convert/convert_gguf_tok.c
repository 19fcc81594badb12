/*
 * core/convert/convert_gguf_tok.c — a GGUF's tokenizer.ggml.* keys as a
 * Hugging Face tokenizer.json text, so the engine's tokenizer loads a GGUF's
 * vocabulary as it loads a checkpoint's (core/convert/convert_gguf.c calls it).
 *
 *   tokenizer.ggml.model   "gpt2" (byte-level BPE); others refused by name
 *   .tokens, .token_type   model.vocab; control tokens are special added
 *                          tokens, user-defined ones plain added tokens
 *   .merges                model.merges ("a b")
 *   .pre                   the pre-tokenizer's Split regex (g_pre: qwen2;
 *                          glm4 / chatglm-bpe, Llama 3's; deepseek-v3,
 *                          DeepSeek-V3's three Splits in turn; kimi-k2,
 *                          Kimi's pattern with tiktoken's whole-piece rule
 *                          (convert_tiktoken.c's); gpt-4o and
 *                          minimax-m2, o200k's; default, gpt-2 and olmo are
 *                          ByteLevel's own GPT-2 regex); another name is
 *                          refused with the name
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/convert/convert_internal.h"
#include "io/gguf.h"

/* One call's file and where its errors go. */
struct tk {
	const struct coli_gguf *g;
	const char *path;
	char *errbuf;
	size_t errlen;
};

#define O200K                                                                                      \
	"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}"        \
	"\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}"       \
	"\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| " \
	"?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* tokenizer.ggml.pre -> the Split regex of the Hugging Face tokenizer that
 * name stands for (NULL: GPT-2's, ByteLevel's own), and its NFC. */
/* DeepSeek-V3's (llama.cpp's deepseek3_llm type): three Splits in turn,
 * digits in threes, then CJK runs, then the rest; CR and LF are the
 * characters themselves, as in the tokenizer.json */
static const char *const g_deepseek3[] = {
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
    "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};

static const struct {
	const char *name, *regex;
	int nfc;
	const char *const *more; /* Splits after regex's (2 of them), or NULL */
	int whole;               /* ignore_merges: a piece that is a token is it */
} g_pre[] = {
    {"qwen2",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     1, NULL, 0},
    /* GLM-4.5's (llama.cpp's chatglm4 type): Llama 3's, digits in threes */
    {"glm4",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     0, NULL, 0},
    {"chatglm-bpe",
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
     "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     0, NULL, 0},
    {"deepseek-v3", "\\p{N}{1,3}", 0, g_deepseek3, 0},
    /* Kimi-K2's (tiktoken's rules: a piece that is a token is that token) */
    {"kimi-k2", coli_convert_kimi_regex, 0, NULL, 1},
    /* o200k (gpt-oss's tokenizer.json; llama.cpp reads minimax-m2's the same) */
    {"gpt-4o", O200K, 0, NULL, 0},
    {"minimax-m2", O200K, 0, NULL, 0},
    {"default", NULL, 0, NULL, 0},
    {"gpt-2", NULL, 0, NULL, 0},
    {"olmo", NULL, 0, NULL, 0}, /* OLMo's and OLMoE's: llama.cpp splits them with GPT-2's regex */
};

/* ggml's token types (llama.cpp's llama_token_type). */
enum { TOK_NORMAL = 1, TOK_UNKNOWN = 2, TOK_CONTROL = 3, TOK_USER = 4, TOK_UNUSED = 5 };

/* tokens (+ token_type) -> model.vocab and added_tokens: control tokens are
 * special added tokens, user-defined ones plain added tokens. */
static int vocab(struct tk *s, json_t *voc, json_t *added)
{
	const struct coli_gguf_kv *tok = coli_gguf_find(s->g, "tokenizer.ggml.tokens");
	const struct coli_gguf_kv *ty = coli_gguf_find(s->g, "tokenizer.ggml.token_type");

	if (!tok || tok->type != COLI_GGUF_ARR || tok->atype != COLI_GGUF_STR)
		return coli_convert_errf(
		    s->errbuf, s->errlen, -EINVAL,
		    "%s: tokenizer.ggml.tokens is missing or not a string array", s->path);
	if (ty && (ty->type != COLI_GGUF_ARR || ty->n != tok->n))
		return coli_convert_errf(
		    s->errbuf, s->errlen, -EINVAL,
		    "%s: tokenizer.ggml.token_type does not have one entry per token", s->path);
	for (uint64_t i = 0; i < tok->n; i++) {
		uint64_t len;
		const char *str = coli_gguf_arr_str(tok, i, &len);
		int64_t type = ty ? coli_gguf_arr_i64(ty, i) : TOK_NORMAL;
		json_t *js = json_stringn(str, len), *a;

		if (!js)
			return coli_convert_errf(s->errbuf, s->errlen, -EINVAL,
			                         "%s: token %llu is not valid UTF-8", s->path,
			                         (unsigned long long)i);
		if (type == TOK_CONTROL || type == TOK_USER) {
			a = json_pack("{s:I, s:o, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)i,
			              "content", js, "single_word", 0, "lstrip", 0, "rstrip", 0,
			              "normalized", 0, "special", type == TOK_CONTROL);
			if (!a || json_array_append_new(added, a))
				return -ENOMEM;
			continue;
		}
		if (json_object_getn(voc, str, len)) { /* the first of two equal strings */
			json_decref(js);
			continue;
		}
		if (json_object_setn_new(voc, str, len, json_integer((json_int_t)i))) {
			json_decref(js);
			return -ENOMEM;
		}
		json_decref(js);
	}
	return 0;
}

/* tokenizer.ggml.* -> a tokenizer.json text in *out (NULL, with a warning,
 * when the file has no tokenizer). */
static int tokenizer_json(struct tk *s, char **out)
{
	const struct coli_gguf_kv *mg = coli_gguf_find(s->g, "tokenizer.ggml.merges");
	json_t *voc = json_object(), *added = json_array(), *merges = json_array();
	const char *model, *pre = "default";
	uint64_t ml, pl = 7;
	int p = -1, rc;

	*out = NULL;
	if (coli_gguf_get_str(s->g, "tokenizer.ggml.model", &model, &ml)) {
		fprintf(stderr,
		        "coli convert: warning: %s has no tokenizer.ggml.model; the container "
		        "will refuse text commands (token ids still work)\n",
		        s->path);
		rc = 0;
		goto out;
	}
	rc = -ENOTSUP;
	if (ml != 4 || memcmp(model, "gpt2", 4)) {
		coli_convert_errf(
		    s->errbuf, s->errlen, rc,
		    "%s: tokenizer.ggml.model '%.*s' is not supported (only gpt2 BPE)", s->path,
		    (int)(ml < 64 ? ml : 64), model);
		goto out;
	}
	coli_gguf_get_str(s->g, "tokenizer.ggml.pre", &pre, &pl);
	for (size_t i = 0; i < sizeof(g_pre) / sizeof(g_pre[0]) && p < 0; i++)
		if (strlen(g_pre[i].name) == pl && !memcmp(g_pre[i].name, pre, pl))
			p = (int)i;
	if (p < 0) {
		coli_convert_errf(
		    s->errbuf, s->errlen, rc,
		    "%s: tokenizer.ggml.pre '%.*s' is not supported (known: qwen2, glm4, "
		    "chatglm-bpe, deepseek-v3, kimi-k2, gpt-4o, minimax-m2, default, gpt-2, olmo)",
		    s->path, (int)(pl < 64 ? pl : 64), pre);
		goto out;
	}
	rc = -ENOMEM;
	if (!voc || !added || !merges)
		goto out;
	if ((rc = vocab(s, voc, added)))
		goto out;
	for (uint64_t i = 0; mg && i < mg->n; i++) {
		uint64_t len;
		const char *m = coli_gguf_arr_str(mg, i, &len);
		json_t *js = m ? json_stringn(m, len) : NULL;

		if (!js || json_array_append_new(merges, js)) {
			rc = coli_convert_errf(
			    s->errbuf, s->errlen, -EINVAL,
			    "%s: tokenizer.ggml.merges[%llu] is not a UTF-8 string", s->path,
			    (unsigned long long)i);
			goto out;
		}
	}
	struct coli_convert_tok w = {.vocab = voc,
	                             .merges = merges,
	                             .added = added,
	                             .regex = g_pre[p].regex,
	                             .more = g_pre[p].more,
	                             .n_more = g_pre[p].more ? 2 : 0,
	                             .ignore_merges = g_pre[p].whole,
	                             .nfc = g_pre[p].nfc};

	rc = coli_convert_tok_write(&w, out);
out:
	if (rc == -ENOMEM && !s->errbuf[0])
		coli_convert_errf(s->errbuf, s->errlen, rc,
		                  "%s: out of memory building the tokenizer", s->path);
	json_decref(voc);
	json_decref(added);
	json_decref(merges);
	return rc;
}

int coli_convert_gguf_tokenizer(const struct coli_gguf *g, const char *path, char **out,
                                char *errbuf, size_t errlen)
{
	struct tk s = {g, path, errbuf, errlen};

	return tokenizer_json(&s, out);
}
