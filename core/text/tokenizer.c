/*
 * core/text/tokenizer.c — loading a Hugging Face tokenizer.json (jansson), and
 * the small accessors. The layout is described in core/text/tokenizer_internal.h;
 * encoding and decoding live in tokenizer_encode.c / tokenizer_decode.c.
 *
 * Loading is strict: every section that changes ids is either understood
 * or refused with -ENOTSUP and a message naming the JSON path and value
 * ("pre_tokenizer.pretokenizers[1].type: Whitespace is not supported"), so
 * an unsupported file never produces wrong ids silently. Accepted:
 *
 *   model        BPE: vocab, merges ("a b" or ["a","b"]), unk_token,
 *                byte_fallback, fuse_unk, ignore_merges; dropout must be
 *                null/0 and continuing_subword_prefix/end_of_word_suffix empty
 *   normalizer   null, NFC, NFD, NFKC, NFKD, Prepend, Replace(String), Sequence
 *   pre_tokenizer null, Split(Regex|String; Isolated, Removed,
 *                MergedWithPrevious, MergedWithNext; invert=false),
 *                ByteLevel(use_regex; add_prefix_space only as first step),
 *                Metaspace (first step only), Digits, Sequence
 *   decoder      ByteLevel, Metaspace, Sequence of Replace(String, " "),
 *                ByteFallback, Fuse, Strip(" ", n, 0); null
 *   added_tokens id, content, special, normalized, lstrip, rstrip, single_word
 *
 * Ignored on purpose (they do not change encode's ids as coli uses them):
 * post_processor (BOS/EOS templates: the engine adds BOS from its config),
 * truncation and padding (batch options).
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text/tokenizer_internal.h"

#define GPT2_REGEX                                                                                 \
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

struct load {
	struct coli_tokenizer *t;
	json_t *vocab;
	char *err;
	size_t errlen;
};

static int fail(struct load *l, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct load *l, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(l->err, l->errlen, fmt, ap);
	va_end(ap);
	return rc;
}

static const char *jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static int jbool(json_t *o, const char *k, int def)
{
	json_t *v = json_object_get(o, k);
	return json_is_boolean(v) ? json_is_true(v) : def;
}

static int add_str(struct load *l, json_t *s, struct tok_str *out)
{
	int rc = tok_arena_add(l->t, json_string_value(s), json_string_length(s), out);
	return rc ? fail(l, rc, "out of memory") : 0;
}

static int parse_norm(struct load *l, json_t *n, const char *path)
{
	struct coli_tokenizer *t = l->t;
	const char *type = jstr(n, "type");
	static const char *forms[] = {"NFC", "NFD", "NFKC", "NFKD"};

	if (json_is_null(n) || !n)
		return 0;
	if (!type)
		return fail(l, -EINVAL, "%s: no type", path);
	if (!strcmp(type, "Sequence")) {
		json_t *a = json_object_get(n, "normalizers"), *v;
		size_t i;
		char sub[128];
		json_array_foreach(a, i, v)
		{
			snprintf(sub, sizeof(sub), "%s.normalizers[%zu]", path, i);
			int rc = parse_norm(l, v, sub);
			if (rc)
				return rc;
		}
		return 0;
	}
	if (t->n_norm == TOK_MAX_NORM)
		return fail(l, -ENOTSUP, "%s: more than %d normalizer steps", path, TOK_MAX_NORM);
	struct tok_norm *st = &t->norm[t->n_norm];
	for (int k = 0; k < 4; k++)
		if (!strcmp(type, forms[k])) {
			st->kind = (enum tok_norm_kind)k;
			t->n_norm++;
			return 0;
		}
	if (!strcmp(type, "Prepend") && json_is_string(json_object_get(n, "prepend"))) {
		st->kind = TOK_NORM_PREPEND;
		t->n_norm++;
		return add_str(l, json_object_get(n, "prepend"), &st->a);
	}
	if (!strcmp(type, "Replace")) {
		json_t *pat = json_object_get(json_object_get(n, "pattern"), "String");
		json_t *c = json_object_get(n, "content");
		if (!json_is_string(pat) || !json_string_length(pat) || !json_is_string(c))
			return fail(l, -ENOTSUP,
			            "%s: Replace with a Regex pattern is not supported", path);
		st->kind = TOK_NORM_REPLACE;
		t->n_norm++;
		int rc = add_str(l, pat, &st->a);
		return rc ? rc : add_str(l, c, &st->b);
	}
	return fail(l, -ENOTSUP, "%s.type: normalizer %s is not supported", path, type);
}

static int parse_prepend(struct load *l, json_t *n, enum tok_prepend *out, const char *path)
{
	const char *s = jstr(n, "prepend_scheme");
	if (!s) { /* older files: add_prefix_space */
		*out = jbool(n, "add_prefix_space", 1) ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
		return 0;
	}
	if (!strcmp(s, "always"))
		*out = TOK_PREPEND_ALWAYS;
	else if (!strcmp(s, "first"))
		*out = TOK_PREPEND_FIRST;
	else if (!strcmp(s, "never"))
		*out = TOK_PREPEND_NEVER;
	else
		return fail(l, -ENOTSUP, "%s.prepend_scheme: %s is not supported", path, s);
	return 0;
}

/* Split: a regex or a literal, with one of the four behaviours. */
static int pre_split(struct load *l, json_t *n, struct tok_pre *st, const char *path)
{
	struct coli_tokenizer *t = l->t;
	json_t *pat = json_object_get(n, "pattern");
	json_t *re = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
	const char *bh = jstr(n, "behavior");
	static const char *names[] = {"Isolated", "Removed", "MergedWithPrevious",
	                              "MergedWithNext"};
	int k, rc;
	if (jbool(n, "invert", 0))
		return fail(l, -ENOTSUP, "%s: Split with invert=true is not supported", path);
	for (k = 0; k < 4 && bh && strcmp(bh, names[k]); k++)
		;
	if (!bh || k == 4)
		return fail(l, -ENOTSUP, "%s.behavior: %s is not supported", path,
		            bh ? bh : "(missing)");
	st->kind = TOK_PRE_SPLIT;
	st->behavior = (enum tok_split_behavior)k;
	if (json_is_string(re)) {
		rc = tok_regex_compile(json_string_value(re), json_string_length(re), &st->re,
		                       l->err, l->errlen);
	} else if (json_is_string(lit) && json_string_length(lit)) {
		rc = add_str(l, lit, &st->replacement);
	} else {
		return fail(l, -EINVAL, "%s.pattern: neither Regex nor String", path);
	}
	t->n_pre += !rc || st->re;
	return rc;
}

/* ByteLevel: bytes as GPT-2's printable characters, GPT-2's split regex
 * unless use_regex is false. */
static int pre_bytelevel(struct load *l, json_t *n, struct tok_pre *st, int first, const char *path)
{
	struct coli_tokenizer *t = l->t;
	st->kind = TOK_PRE_BYTELEVEL;
	st->add_prefix_space = jbool(n, "add_prefix_space", 1);
	if (st->add_prefix_space && !first)
		return fail(l, -ENOTSUP,
		            "%s: ByteLevel add_prefix_space is only supported as the first "
		            "pre-tokenizer",
		            path);
	t->byte_level = 1;
	t->n_pre++;
	if (jbool(n, "use_regex", 1))
		return tok_regex_compile(GPT2_REGEX, strlen(GPT2_REGEX), &st->re, l->err,
		                         l->errlen);
	return 0;
}

/* Metaspace (first only): spaces to the replacement, and the prepend scheme. */
static int pre_metaspace(struct load *l, json_t *n, struct tok_pre *st, int first, const char *path)
{
	struct coli_tokenizer *t = l->t;
	json_t *r = json_object_get(n, "replacement");
	int rc;
	if (!first)
		return fail(l, -ENOTSUP, "%s: Metaspace is only supported first", path);
	if (!json_is_string(r) || !json_string_length(r))
		return fail(l, -EINVAL, "%s.replacement: missing", path);
	st->kind = TOK_PRE_METASPACE;
	st->split = jbool(n, "split", 1);
	if ((rc = parse_prepend(l, n, &st->prepend, path)))
		return rc;
	t->n_pre++;
	return add_str(l, r, &st->replacement);
}

static int parse_pre(struct load *l, json_t *n, const char *path)
{
	struct coli_tokenizer *t = l->t;
	const char *type = jstr(n, "type");
	int rc;

	if (json_is_null(n) || !n)
		return 0;
	if (!type)
		return fail(l, -EINVAL, "%s: no type", path);
	if (!strcmp(type, "Sequence")) {
		json_t *a = json_object_get(n, "pretokenizers"), *v;
		size_t i;
		char sub[128];
		json_array_foreach(a, i, v)
		{
			snprintf(sub, sizeof(sub), "%s.pretokenizers[%zu]", path, i);
			if ((rc = parse_pre(l, v, sub)))
				return rc;
		}
		return 0;
	}
	if (t->n_pre == TOK_MAX_PRE)
		return fail(l, -ENOTSUP, "%s: more than %d pre-tokenizer steps", path, TOK_MAX_PRE);
	struct tok_pre *st = &t->pre[t->n_pre];
	int first = t->n_pre == 0;
	if (!strcmp(type, "Split"))
		return pre_split(l, n, st, path);
	if (!strcmp(type, "ByteLevel"))
		return pre_bytelevel(l, n, st, first, path);
	if (!strcmp(type, "Metaspace"))
		return pre_metaspace(l, n, st, first, path);
	if (!strcmp(type, "Digits")) {
		const char *re = jbool(n, "individual_digits", 0) ? "[0-9]" : "[0-9]+";
		st->kind = TOK_PRE_SPLIT;
		st->behavior = TOK_SPLIT_ISOLATED;
		t->n_pre++;
		return tok_regex_compile(re, strlen(re), &st->re, l->err, l->errlen);
	}
	return fail(l, -ENOTSUP, "%s.type: pre-tokenizer %s is not supported", path, type);
}

static int parse_decoder_step(struct load *l, json_t *n, const char *path)
{
	struct coli_tokenizer *t = l->t;
	const char *type = jstr(n, "type");

	if (!type)
		return fail(l, -EINVAL, "%s: no type", path);
	if (!strcmp(type, "Replace")) {
		json_t *pat = json_object_get(json_object_get(n, "pattern"), "String");
		const char *c = jstr(n, "content");
		if (!json_is_string(pat) || !json_string_length(pat) || !c || strcmp(c, " "))
			return fail(l, -ENOTSUP,
			            "%s: only Replace(String, \" \") is supported as a decoder",
			            path);
		t->dec_kind = TOK_DEC_SPM;
		return add_str(l, pat, &t->dec_repl);
	}
	if (!strcmp(type, "ByteFallback")) {
		t->dec_byte_fallback = 1;
		return 0;
	}
	if (!strcmp(type, "Fuse"))
		return 0;
	if (!strcmp(type, "Strip")) {
		const char *c = jstr(n, "content");
		json_int_t start = json_integer_value(json_object_get(n, "start"));
		json_int_t stop = json_integer_value(json_object_get(n, "stop"));
		if (!c || strcmp(c, " ") || stop != 0 || start < 0 || start > 64)
			return fail(l, -ENOTSUP, "%s: only Strip(\" \", n, 0) is supported", path);
		t->dec_strip_start = (int)start;
		return 0;
	}
	if (!strcmp(type, "Metaspace")) {
		json_t *r = json_object_get(n, "replacement");
		enum tok_prepend p;
		int rc = parse_prepend(l, n, &p, path);
		if (rc)
			return rc;
		if (!json_is_string(r) || !json_string_length(r))
			return fail(l, -EINVAL, "%s.replacement: missing", path);
		t->dec_kind = TOK_DEC_SPM;
		t->dec_strip_first = p != TOK_PREPEND_NEVER;
		return add_str(l, r, &t->dec_repl);
	}
	return fail(l, -ENOTSUP, "%s.type: decoder %s is not supported here", path, type);
}

static int parse_decoder(struct load *l, json_t *n)
{
	const char *type = jstr(n, "type");
	int rc;

	if (!n || json_is_null(n)) {
		l->t->dec_kind = TOK_DEC_NONE;
	} else if (type && !strcmp(type, "ByteLevel")) {
		l->t->dec_kind = TOK_DEC_BYTELEVEL;
	} else if (type && !strcmp(type, "Sequence")) {
		json_t *a = json_object_get(n, "decoders"), *v;
		size_t i;
		char sub[64];
		json_array_foreach(a, i, v)
		{
			snprintf(sub, sizeof(sub), "decoder.decoders[%zu]", i);
			if ((rc = parse_decoder_step(l, v, sub)))
				return rc;
		}
	} else if ((rc = parse_decoder_step(l, n, "decoder"))) {
		return rc;
	}
	if (l->t->byte_level != (l->t->dec_kind == TOK_DEC_BYTELEVEL))
		return fail(l, -ENOTSUP,
		            "a ByteLevel pre-tokenizer needs a ByteLevel decoder and vice versa");
	return 0;
}

/* ---- model and added tokens ---- */

static int vocab_id(struct load *l, const char *s)
{
	json_t *v = json_object_get(l->vocab, s);
	return json_is_integer(v) ? (int)json_integer_value(v) : -1;
}

static int parse_merges(struct load *l, json_t *merges)
{
	struct coli_tokenizer *t = l->t;
	size_t i, cap = 256;
	json_t *m;
	char *buf = malloc(cap);
	int rc = 0;

	if (!buf)
		return fail(l, -ENOMEM, "out of memory");
	if ((rc = tok_merges_init(t, json_array_size(merges))))
		goto out;
	json_array_foreach(merges, i, m)
	{
		const char *a, *b;
		size_t la, lb;
		if (json_is_string(m)) {
			const char *s = json_string_value(m), *sp = strchr(s, ' ');
			if (!sp || strchr(sp + 1, ' ')) {
				rc = fail(l, -EINVAL, "model.merges[%zu]: \"%s\" is not \"a b\"", i,
				          s);
				goto out;
			}
			a = s, la = (size_t)(sp - s), b = sp + 1, lb = strlen(b);
		} else if (json_is_array(m) && json_array_size(m) == 2 &&
		           json_is_string(json_array_get(m, 0)) &&
		           json_is_string(json_array_get(m, 1))) {
			a = json_string_value(json_array_get(m, 0)), la = strlen(a);
			b = json_string_value(json_array_get(m, 1)), lb = strlen(b);
		} else {
			rc = fail(l, -EINVAL,
			          "model.merges[%zu]: neither \"a b\" nor [\"a\", \"b\"]", i);
			goto out;
		}
		if (la + lb + 2 > cap) {
			cap = 2 * (la + lb + 2);
			char *nb = realloc(buf, cap);
			if (!nb) {
				rc = fail(l, -ENOMEM, "out of memory");
				goto out;
			}
			buf = nb;
		}
		memcpy(buf, a, la);
		buf[la] = 0;
		int ia = vocab_id(l, buf);
		memcpy(buf, b, lb);
		buf[lb] = 0;
		int ib = vocab_id(l, buf);
		memcpy(buf, a, la);
		memcpy(buf + la, b, lb);
		buf[la + lb] = 0;
		int im = vocab_id(l, buf);
		if (ia < 0 || ib < 0 || im < 0) {
			rc = fail(l, -EINVAL, "model.merges[%zu]: \"%s\" is not in the vocab", i,
			          ia < 0   ? a
			          : ib < 0 ? b
			                   : buf);
			goto out;
		}
		tok_merges_put(t, ia, ib, (int)i, im); /* a repeated pair keeps its first rank */
	}
out:
	free(buf);
	return rc;
}

static int added_cmp(const void *x, const void *y)
{
	const struct tok_added *a = x, *b = y;
	unsigned ca = a->content.len ? (unsigned char)a->first : 0;
	unsigned cb = b->content.len ? (unsigned char)b->first : 0;
	if (ca != cb)
		return ca < cb ? -1 : 1;
	if (a->content.len != b->content.len)
		return a->content.len > b->content.len ? -1 : 1;
	return a->id - b->id;
}

static int parse_model(struct load *l, json_t *model)
{
	struct coli_tokenizer *t = l->t;
	const char *type = jstr(model, "type");
	json_t *v;

	if (!json_is_object(model))
		return fail(l, -EINVAL, "no model object");
	if (type && strcmp(type, "BPE"))
		return fail(l, -ENOTSUP, "model.type: %s is not supported (only BPE)", type);
	l->vocab = json_object_get(model, "vocab");
	if (!json_is_object(l->vocab) || !json_is_array(json_object_get(model, "merges")))
		return fail(l, -EINVAL, "model: vocab (object) and merges (array) are required");
	v = json_object_get(model, "dropout");
	if (json_is_number(v) && json_number_value(v) > 0)
		return fail(l, -ENOTSUP, "model.dropout: BPE dropout is not supported");
	const char *pfx = jstr(model, "continuing_subword_prefix");
	const char *sfx = jstr(model, "end_of_word_suffix");
	if ((pfx && *pfx) || (sfx && *sfx))
		return fail(l, -ENOTSUP,
		            "model: continuing_subword_prefix / end_of_word_suffix "
		            "are not supported");
	t->byte_fallback = jbool(model, "byte_fallback", 0);
	t->fuse_unk = jbool(model, "fuse_unk", 0);
	t->ignore_merges = jbool(model, "ignore_merges", 0);
	return 0;
}

static int set_vocab(struct load *l)
{
	struct coli_tokenizer *t = l->t;
	const char *k;
	json_t *v;
	char *buf = NULL;
	size_t cap = 0;
	int rc = 0;

	json_object_foreach(l->vocab, k, v)
	{
		int id = (int)json_integer_value(v);
		size_t n = strlen(k);
		if (t->text[id].off)
			continue; /* two strings with one id: the first wins */
		if ((rc = tok_arena_add(t, k, n, &t->text[id])))
			break;
		if (!t->byte_level) {
			t->key[id] = t->text[id];
			continue;
		}
		if (cap < n + 1 && !(buf = realloc(buf, cap = 2 * n + 16))) {
			rc = -ENOMEM;
			break;
		}
		int m = tok_bytelevel_unmap(k, n, buf);
		if (m >= 0 && (rc = tok_arena_add(t, buf, (size_t)m, &t->key[id])))
			break;
		/* m < 0: not reachable from byte-level input; no key */
	}
	free(buf);
	return rc ? fail(l, rc, "out of memory") : 0;
}

static int set_added(struct load *l, json_t *added)
{
	struct coli_tokenizer *t = l->t;
	json_t *a;
	size_t i;
	int rc;

	t->added = calloc(json_array_size(added) + 1, sizeof(*t->added));
	if (!t->added)
		return fail(l, -ENOMEM, "out of memory");
	json_array_foreach(added, i, a)
	{
		struct tok_added *d = &t->added[t->n_added];
		json_t *c = json_object_get(a, "content");
		int id = (int)json_integer_value(json_object_get(a, "id"));
		/* HF: content already in the model vocab takes the vocab's id
		 * (consistent files have the same id in both places) */
		if (json_string_length(c) == strlen(json_string_value(c)) &&
		    vocab_id(l, json_string_value(c)) >= 0)
			id = vocab_id(l, json_string_value(c));
		d->id = id;
		d->special = (uint8_t)jbool(a, "special", 0);
		d->normalized = (uint8_t)jbool(a, "normalized", !d->special);
		d->lstrip = (uint8_t)jbool(a, "lstrip", 0);
		d->rstrip = (uint8_t)jbool(a, "rstrip", 0);
		d->single_word = (uint8_t)jbool(a, "single_word", 0);
		t->special[id] = d->special;
		if ((rc = add_str(l, c, &t->text[id]))) /* HF: added content names the id */
			return rc;
		if (!json_string_length(c))
			continue; /* an empty token never matches */
		if (d->normalized && t->n_norm) {
			char *norm;
			size_t nl;
			if ((rc = tok_normalize(t, json_string_value(c), json_string_length(c),
			                        &norm, &nl)))
				return fail(l, rc, "added_tokens[%zu]: cannot normalize", i);
			rc = tok_arena_add(t, norm, nl, &d->content);
			free(norm);
			if (rc)
				return fail(l, rc, "out of memory");
		} else if ((rc = add_str(l, c, &d->content))) {
			return rc;
		}
		if (!d->content.len)
			continue;
		d->first = (unsigned char)tok_s(t, d->content)[0];
		t->n_added++;
	}
	qsort(t->added, (size_t)t->n_added, sizeof(*t->added), added_cmp);
	for (int j = t->n_added - 1; j >= 0; j--) {
		t->added_start[t->added[j].first] = j;
		t->added_cnt[t->added[j].first]++;
	}
	return 0;
}

/* Checks ids and finds n_vocab = 1 + the largest id. */
static int count_ids(struct load *l, json_t *added)
{
	const char *k;
	json_t *v;
	size_t i;
	json_int_t max = -1;

	json_object_foreach(l->vocab, k, v)
	{
		json_int_t id = json_integer_value(v);
		if (!json_is_integer(v) || id < 0 || id >= (1 << 24))
			return fail(l, -EINVAL, "model.vocab[\"%s\"]: bad id", k);
		max = id > max ? id : max;
	}
	if (added && !json_is_array(added))
		return fail(l, -EINVAL, "added_tokens: not an array");
	json_array_foreach(added, i, v)
	{
		json_int_t id = json_integer_value(json_object_get(v, "id"));
		if (!json_is_integer(json_object_get(v, "id")) || id < 0 || id >= (1 << 24) ||
		    !json_is_string(json_object_get(v, "content")))
			return fail(l, -EINVAL, "added_tokens[%zu]: needs id and content", i);
		max = id > max ? id : max;
	}
	if (max < 0)
		return fail(l, -EINVAL, "empty vocabulary");
	l->t->n_vocab = (int)max + 1;
	return 0;
}

static int build_tables(struct load *l)
{
	struct coli_tokenizer *t = l->t;
	char name[8];

	if (tok_hash_init(&t->key_hash, (size_t)t->n_vocab) ||
	    tok_hash_init(&t->text_hash, (size_t)t->n_vocab))
		return fail(l, -ENOMEM, "out of memory");
	for (int i = 0; i < t->n_added; i++)
		tok_hash_put(&t->text_hash, t, t->text, t->added[i].id);
	for (int id = 0; id < t->n_vocab; id++) {
		if (t->key[id].off)
			tok_hash_put(&t->key_hash, t, t->key, id);
		if (t->text[id].off)
			tok_hash_put(&t->text_hash, t, t->text, id);
	}
	for (int b = 0; b < 256; b++) {
		char c = (char)b;
		t->byte_id[b] = t->byte_level ? tok_hash_get(&t->key_hash, t, t->key, &c, 1) : -1;
		snprintf(name, sizeof(name), "<0x%02X>", b);
		t->fallback_id[b] = vocab_id(l, name);
	}
	return 0;
}

int coli_tokenizer_load(const char *json, size_t len, coli_tokenizer_t **out, char *err,
                        size_t errlen)
{
	struct coli_tokenizer *t = calloc(1, sizeof(*t));
	char dummy[1];
	struct load l = {.t = t,
	                 .err = err && errlen ? err : dummy,
	                 .errlen = err && errlen ? errlen : sizeof(dummy)};
	json_error_t je;
	json_t *root = NULL;
	struct tok_str empty;
	int rc;

	*out = NULL;
	if (!t)
		return fail(&l, -ENOMEM, "out of memory");
	t->unk_id = -1;
	if ((rc = tok_arena_add(t, "", 0, &empty))) /* offset 0 means "absent" */
		goto err;
	root = json_loadb(json, len, 0, &je);
	if (!root) {
		rc = fail(&l, -EINVAL, "tokenizer.json: line %d column %d: %s", je.line, je.column,
		          je.text);
		goto err;
	}
	json_t *model = json_object_get(root, "model");
	json_t *added = json_object_get(root, "added_tokens");
	if ((rc = parse_model(&l, model)) || (rc = count_ids(&l, added)))
		goto err;
	t->text = calloc((size_t)t->n_vocab, sizeof(*t->text));
	t->key = calloc((size_t)t->n_vocab, sizeof(*t->key));
	t->special = calloc((size_t)t->n_vocab, 1);
	if (!t->text || !t->key || !t->special) {
		rc = fail(&l, -ENOMEM, "out of memory");
		goto err;
	}
	if ((rc = parse_norm(&l, json_object_get(root, "normalizer"), "normalizer")) ||
	    (rc = parse_pre(&l, json_object_get(root, "pre_tokenizer"), "pre_tokenizer")) ||
	    (rc = parse_decoder(&l, json_object_get(root, "decoder"))) || (rc = set_vocab(&l)) ||
	    (rc = set_added(&l, added)) || (rc = build_tables(&l)) ||
	    (rc = parse_merges(&l, json_object_get(model, "merges"))))
		goto err;
	const char *unk = jstr(model, "unk_token");
	if (unk && (t->unk_id = vocab_id(&l, unk)) < 0) {
		rc = fail(&l, -EINVAL, "model.unk_token: \"%s\" is not in the vocab", unk);
		goto err;
	}
	if ((rc = tok_decode_build(t))) {
		rc = fail(&l, rc, "out of memory");
		goto err;
	}
	json_decref(root);
	*out = t;
	return 0;
err:
	json_decref(root);
	coli_tokenizer_free(t);
	return rc;
}

void coli_tokenizer_free(coli_tokenizer_t *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->n_pre; i++)
		if (t->pre[i].re)
			tok_regex_free(t->pre[i].re);
	tok_hash_free(&t->key_hash);
	tok_hash_free(&t->text_hash);
	free(t->merges);
	free(t->added);
	free(t->text);
	free(t->key);
	free(t->dec);
	free(t->special);
	free(t->arena);
	free(t);
}

int coli_tokenizer_n_vocab(const coli_tokenizer_t *t)
{
	return t->n_vocab;
}

int coli_tokenizer_token_id(const coli_tokenizer_t *t, const char *token_str)
{
	return tok_hash_get(&t->text_hash, t, t->text, token_str, strlen(token_str));
}

const char *coli_tokenizer_token_str(const coli_tokenizer_t *t, int id)
{
	if (id < 0 || id >= t->n_vocab || !t->text[id].off)
		return NULL;
	return tok_s(t, t->text[id]);
}

int coli_tokenizer_is_special(const coli_tokenizer_t *t, int id)
{
	return id >= 0 && id < t->n_vocab && t->special[id];
}
