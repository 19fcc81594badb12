/*
 * core/text/tokenizer_encode.c — text to ids, in HF tokenizers' order:
 *
 *   1. validate UTF-8 (invalid input: -EILSEQ, err names the byte offset);
 *   2. split on added tokens whose "normalized" flag is false, matched in
 *      the raw text (leftmost, then longest; single_word / lstrip / rstrip
 *      as HF's AddedVocabulary::find_matches);
 *   3. normalize each remaining segment (NFC/NFD/NFKC/NFKD via utf8proc,
 *      Prepend, Replace), then split it on the "normalized" added tokens;
 *   4. pre-tokenize each remaining segment into pieces: a list of byte
 *      ranges of one working buffer, refined by each step (Split with a
 *      PCRE2 regex or a literal, ByteLevel with the GPT-2 regex, Metaspace);
 *   5. BPE each piece (tokenizer_bpe.c).
 *
 * Byte-level tokenizers never build the GPT-2 unicode string: vocab keys
 * were mapped back to bytes at load, so pieces go to BPE as raw bytes.
 *
 * Regexes are compiled with PCRE2_UTF | PCRE2_UCP (JIT when available). HF
 * uses Oniguruma, whose \s also matches U+0085 (NEL) where PCRE2's does
 * not; tok_regex_compile rewrites \s and \S so they agree. Matching uses
 * per-call match data and a per-call JIT stack, so a tokenizer can be
 * shared by threads.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/text/tokenizer_internal.h"

int tok_regex_compile(const char *pat, size_t n, void **out, char *err, size_t errlen)
{
	/* Rewrite \s -> [\s\x{85}] and \S -> [^\s\x{85}] (inside a class: \s
	 * -> \s\x{85}; \S inside a class is left alone). */
	char *p = malloc(n * 11 + 1);
	size_t k = 0;
	int in_class = 0;
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		char c = pat[i];
		if (c == '\\' && i + 1 < n) {
			char e = pat[++i];
			const char *rep = NULL;
			if (e == 's')
				rep = in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
			else if (e == 'S' && !in_class)
				rep = "[^\\s\\x{85}]";
			if (rep) {
				memcpy(p + k, rep, strlen(rep));
				k += strlen(rep);
			} else {
				p[k++] = '\\';
				p[k++] = e;
			}
			continue;
		}
		if (c == '[' && !in_class) {
			in_class = 1;
			p[k++] = c;
			if (i + 1 < n && pat[i + 1] == '^')
				p[k++] = pat[++i];
			if (i + 1 < n && pat[i + 1] == ']')
				p[k++] = pat[++i]; /* a literal ] first in a class */
			continue;
		}
		if (c == '[' && in_class && i + 1 < n && pat[i + 1] == ':') {
			const char *end = memchr(pat + i + 2, ']', n - i - 2);
			if (end) { /* POSIX class [:alpha:] */
				size_t l = (size_t)(end - (pat + i)) + 1;
				memcpy(p + k, pat + i, l);
				k += l;
				i += l - 1;
				continue;
			}
		}
		if (c == ']' && in_class)
			in_class = 0;
		p[k++] = c;
	}
	int ec;
	PCRE2_SIZE eo;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)p, k, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
	free(p);
	if (!re) {
		PCRE2_UCHAR msg[160];
		pcre2_get_error_message(ec, msg, sizeof(msg));
		snprintf(err, errlen, "regex %.*s: %s (near offset %zu)", (int)(n > 200 ? 200 : n),
		         pat, (char *)msg, (size_t)eo);
		return -EINVAL;
	}
	pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* interpreter if JIT is absent */
	*out = re;
	return 0;
}

void tok_regex_free(void *re)
{
	pcre2_code_free(re);
}

/* ---- Unicode predicates of Rust's char (for added-token flags) ---- */

static uint32_t cp_at(const char *s, size_t n, size_t i, int *len)
{
	int32_t cp = 0;
	utf8proc_ssize_t l =
	    utf8proc_iterate((const utf8proc_uint8_t *)s + i, (ssize_t)(n - i), &cp);
	*len = l > 0 ? (int)l : 1;
	return l > 0 ? (uint32_t)cp : 0xFFFD;
}

static int is_ws(uint32_t c) /* the White_Space property */
{
	return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
	       (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
	       c == 0x205F || c == 0x3000;
}

/* A word character for single_word, as HF's check behaves (measured against
 * tokenizers 0.23: letters, marks, Nd, Nl, Pc block; No such as U+00B2 does
 * not): Unicode \w, Alphabetic approximated by L* plus the circled and
 * squared letters. */
static int is_word(uint32_t c)
{
	utf8proc_category_t k = utf8proc_category((int32_t)c);
	return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_ME) ||
	       k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL ||
	       k == UTF8PROC_CATEGORY_PC || c == 0x200C || c == 0x200D ||
	       (c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) ||
	       (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189);
}

static size_t last_char_start(const char *s, size_t end)
{
	size_t i = end;
	while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
		i--;
	return i ? i - 1 : 0;
}

/* ---- the encode state ---- */

struct seg {
	size_t off, len;
	int id; /* added token id, or -1 for text */
};

struct enc {
	const struct coli_tokenizer *t;
	struct tok_ids *out;
	pcre2_match_data *md;
	pcre2_match_context *mc;
	pcre2_jit_stack *js;
	size_t *pc, *pn; /* pieces: (start, end) pairs, current and next */
	size_t n_pc, n_pn, cap_pc, cap_pn;
	char *err;
	size_t errlen;
};

static int segs_push(struct seg **v, size_t *n, size_t *cap, struct seg s)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		struct seg *nv = realloc(*v, c * sizeof(**v));
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = c;
	}
	(*v)[(*n)++] = s;
	return 0;
}

/* HF's AddedVocabulary::find_matches over s[0..n) for the added tokens of
 * one kind (normalized or not). */
static int split_added(const struct coli_tokenizer *t, const char *s, size_t n, int normalized,
                       struct seg **v, size_t *nv, size_t *cap)
{
	size_t from = 0, i = 0;
	int rc;

	*nv = 0;
	while (i < n) {
		unsigned char b = (unsigned char)s[i];
		const struct tok_added *a = NULL;
		for (int j = t->added_start[b]; j < t->added_start[b] + t->added_cnt[b]; j++) {
			const struct tok_added *c = &t->added[j];
			if (c->normalized == normalized && c->content.len <= n - i &&
			    !memcmp(s + i, tok_s(t, c->content), c->content.len)) {
				a = c; /* longest first within a bucket */
				break;
			}
		}
		if (!a) {
			i++;
			continue;
		}
		size_t start = i, stop = i + a->content.len;
		int l;
		i = stop; /* the next match starts after this one, kept or not */
		if (a->single_word) {
			int ws = start == 0 || !is_word(cp_at(s, n, last_char_start(s, start), &l));
			int we = stop == n || !is_word(cp_at(s, n, stop, &l));
			if (!ws || !we)
				continue;
		}
		if (a->lstrip) {
			size_t ns = start;
			while (ns > from) {
				size_t p = last_char_start(s, ns);
				if (!is_ws(cp_at(s, n, p, &l)))
					break;
				ns = p;
			}
			start = ns;
		}
		if (a->rstrip) {
			while (stop < n && is_ws(cp_at(s, n, stop, &l)))
				stop += (size_t)l;
			i = stop;
		}
		if (from < start &&
		    (rc = segs_push(v, nv, cap, (struct seg){from, start - from, -1})))
			return rc;
		if ((rc = segs_push(v, nv, cap, (struct seg){start, stop - start, a->id})))
			return rc;
		from = stop;
	}
	if (from < n)
		return segs_push(v, nv, cap, (struct seg){from, n - from, -1});
	return 0;
}

int tok_normalize(const struct coli_tokenizer *t, const char *s, size_t n, char **out,
                  size_t *out_len)
{
	char *cur = malloc(n + 1);
	size_t len = n;
	if (!cur)
		return -ENOMEM;
	memcpy(cur, s, n);
	for (int k = 0; k < t->n_norm; k++) {
		const struct tok_norm *st = &t->norm[k];
		char *nx = NULL;
		size_t nl = 0;
		if (st->kind <= TOK_NORM_NFKD) {
			size_t i = 0;
			while (i < len && !((unsigned char)cur[i] & 0x80))
				i++;
			if (i == len)
				continue; /* ASCII is invariant under every form */
			static const int opt[] = {
			    UTF8PROC_STABLE | UTF8PROC_COMPOSE,
			    UTF8PROC_STABLE | UTF8PROC_DECOMPOSE,
			    UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT,
			    UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT,
			};
			utf8proc_uint8_t *d = NULL;
			utf8proc_ssize_t r =
			    utf8proc_map((const utf8proc_uint8_t *)cur, (ssize_t)len, &d,
			                 (utf8proc_option_t)opt[st->kind]);
			if (r < 0) {
				free(cur);
				return r == UTF8PROC_ERROR_NOMEM ? -ENOMEM : -EILSEQ;
			}
			nx = (char *)d;
			nl = (size_t)r;
		} else if (st->kind == TOK_NORM_PREPEND) {
			if (!len)
				continue;
			nl = st->a.len + len;
			if (!(nx = malloc(nl + 1)))
				goto nomem;
			memcpy(nx, tok_s(t, st->a), st->a.len);
			memcpy(nx + st->a.len, cur, len);
		} else { /* REPLACE, literal, left to right, non-overlapping */
			const char *a = tok_s(t, st->a), *b = tok_s(t, st->b);
			size_t cnt = 0;
			for (size_t i = 0; i + st->a.len <= len;)
				if (!memcmp(cur + i, a, st->a.len))
					cnt++, i += st->a.len;
				else
					i++;
			if (!cnt)
				continue;
			if (!(nx = malloc(len + cnt * st->b.len + 1)))
				goto nomem;
			for (size_t i = 0; i < len;) {
				if (i + st->a.len <= len && !memcmp(cur + i, a, st->a.len)) {
					memcpy(nx + nl, b, st->b.len);
					nl += st->b.len;
					i += st->a.len;
				} else {
					nx[nl++] = cur[i++];
				}
			}
		}
		free(cur);
		cur = nx;
		len = nl;
	}
	*out = cur;
	*out_len = len;
	return 0;
nomem:
	free(cur);
	return -ENOMEM;
}

static int pn_push(struct enc *e, size_t a, size_t b)
{
	if (a >= b)
		return 0;
	if (e->n_pn + 2 > e->cap_pn) {
		size_t c = e->cap_pn ? e->cap_pn * 2 : 64;
		size_t *v = realloc(e->pn, c * sizeof(*v));
		if (!v)
			return -ENOMEM;
		e->pn = v;
		e->cap_pn = c;
	}
	e->pn[e->n_pn++] = a;
	e->pn[e->n_pn++] = b;
	return 0;
}

/* The first match of the regex (re) or the literal (lit) in s[pos..b), the
 * regex matched over the piece s[a..b): 1 with [*ms, *me), 0 if none, or
 * -errno with e->err set. */
static int next_match(struct enc *e, const char *s, size_t a, size_t b, size_t pos, pcre2_code *re,
                      const char *lit, size_t lit_len, size_t *ms, size_t *me)
{
	if (re) {
		int r = pcre2_match(re, (PCRE2_SPTR)s + a, b - a, pos - a, PCRE2_NO_UTF_CHECK,
		                    e->md, e->mc);
		if (r == PCRE2_ERROR_NOMATCH)
			return 0;
		if (r < 0) {
			PCRE2_UCHAR msg[120];
			pcre2_get_error_message(r, msg, sizeof(msg));
			snprintf(e->err, e->errlen, "pre-tokenizer regex failed: %s", (char *)msg);
			return r == PCRE2_ERROR_NOMEMORY ? -ENOMEM : -EOVERFLOW;
		}
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
		*ms = a + ov[0];
		*me = a + ov[1];
		return 1;
	}
	const char *f = memmem(s + pos, b - pos, lit, lit_len);
	if (!f)
		return 0;
	*ms = (size_t)(f - s);
	*me = *ms + lit_len;
	return 1;
}

/* Splits piece s[a..b) by the regex (re) or literal (lit) matches, with HF's
 * SplitDelimiterBehavior, appending to e->pn. */
static int split_piece(struct enc *e, const char *s, size_t a, size_t b, pcre2_code *re,
                       const char *lit, size_t lit_len, enum tok_split_behavior bh)
{
	size_t pos = a, prev = a, ms, me;
	size_t cur_a = a, cur_b = a; /* the pending (merged) piece */
	int have = 0, prev_match = 0, rc;

	for (;;) {
		if (pos >= b)
			break;
		rc = next_match(e, s, a, b, pos, re, lit, lit_len, &ms, &me);
		if (rc < 0)
			return rc;
		if (!rc)
			break;
		if (me == ms) { /* empty match: step over one character */
			int l = tok_utf8_len((const unsigned char *)s + ms, b - ms);
			pos = ms + (l ? (size_t)l : 1);
			continue;
		}
		/* Walk (gap, match) in order; HF folds them per behaviour. */
		for (int part = 0; part < 2; part++) {
			size_t x = part ? ms : prev, y = part ? me : ms;
			int is_match = part;
			if (x >= y)
				continue;
			if (bh == TOK_SPLIT_ISOLATED || (bh == TOK_SPLIT_REMOVED && !is_match)) {
				if ((rc = pn_push(e, x, y)))
					return rc;
			} else if (bh == TOK_SPLIT_MERGED_PREV) {
				if (is_match && !prev_match && have) {
					cur_b = y;
				} else {
					if (have && (rc = pn_push(e, cur_a, cur_b)))
						return rc;
					cur_a = x, cur_b = y, have = 1;
				}
			} else if (bh == TOK_SPLIT_MERGED_NEXT) {
				if (have && !(prev_match && !is_match)) {
					if ((rc = pn_push(e, cur_a, cur_b)))
						return rc;
					have = 0;
				}
				if (have)
					cur_b = y; /* a lone match absorbs the gap after it */
				else
					cur_a = x, cur_b = y, have = 1;
			}
			prev_match = is_match;
		}
		prev = pos = me;
	}
	/* the tail gap */
	if (prev < b) {
		if (bh == TOK_SPLIT_ISOLATED || bh == TOK_SPLIT_REMOVED) {
			if ((rc = pn_push(e, prev, b)))
				return rc;
		} else if (bh == TOK_SPLIT_MERGED_NEXT && have && prev_match) {
			cur_b = b;
		} else {
			if (have && (rc = pn_push(e, cur_a, cur_b)))
				return rc;
			cur_a = prev, cur_b = b, have = 1;
		}
	}
	if (have && bh != TOK_SPLIT_ISOLATED && bh != TOK_SPLIT_REMOVED)
		return pn_push(e, cur_a, cur_b);
	return 0;
}

/* Pre-tokenizes s[0..n) (one normalized segment; first: it begins the
 * original text) and BPEs the pieces. */
static int pretokenize(struct enc *e, const char *s, size_t n, int first)
{
	const struct coli_tokenizer *t = e->t;
	char *own = NULL;
	int rc = 0;

	if (!n)
		return 0;
	/* Step 0 may rewrite the string (add_prefix_space, Metaspace). */
	if (t->n_pre && t->pre[0].kind == TOK_PRE_BYTELEVEL && t->pre[0].add_prefix_space &&
	    s[0] != ' ') {
		if (!(own = malloc(n + 1)))
			return -ENOMEM;
		own[0] = ' ';
		memcpy(own + 1, s, n);
		s = own, n = n + 1;
	} else if (t->n_pre && t->pre[0].kind == TOK_PRE_METASPACE) {
		const struct tok_pre *m = &t->pre[0];
		const char *r = tok_s(t, m->replacement);
		size_t rl = m->replacement.len, k = 0, spaces = 0;
		for (size_t i = 0; i < n; i++)
			spaces += s[i] == ' ';
		if (!(own = malloc(n + (spaces + 1) * rl + 1)))
			return -ENOMEM;
		int starts = (n && s[0] == ' ') || (n >= rl && !memcmp(s, r, rl));
		if (!starts && (m->prepend == TOK_PREPEND_ALWAYS ||
		                (m->prepend == TOK_PREPEND_FIRST && first))) {
			memcpy(own, r, rl);
			k = rl;
		}
		for (size_t i = 0; i < n; i++) {
			if (s[i] == ' ') {
				memcpy(own + k, r, rl);
				k += rl;
			} else {
				own[k++] = s[i];
			}
		}
		s = own, n = k;
	}
	e->n_pc = 0;
	e->n_pn = 0;
	if ((rc = pn_push(e, 0, n)))
		goto out;
	for (int k = 0; k < t->n_pre; k++) {
		const struct tok_pre *st = &t->pre[k];
		size_t *sw = e->pc, sc = e->cap_pc;
		e->pc = e->pn, e->cap_pc = e->cap_pn, e->n_pc = e->n_pn;
		e->pn = sw, e->cap_pn = sc, e->n_pn = 0;
		for (size_t i = 0; i < e->n_pc && !rc; i += 2) {
			size_t a = e->pc[i], b = e->pc[i + 1];
			if (st->kind == TOK_PRE_SPLIT)
				rc = split_piece(e, s, a, b, st->re, tok_s(t, st->replacement),
				                 st->replacement.len, st->behavior);
			else if (st->kind == TOK_PRE_BYTELEVEL && st->re)
				rc = split_piece(e, s, a, b, st->re, NULL, 0, TOK_SPLIT_ISOLATED);
			else if (st->kind == TOK_PRE_METASPACE && st->split)
				rc = split_piece(e, s, a, b, NULL, tok_s(t, st->replacement),
				                 st->replacement.len, TOK_SPLIT_MERGED_NEXT);
			else
				rc = pn_push(e, a, b);
		}
		if (rc)
			goto out;
	}
	for (size_t i = 0; i < e->n_pn && !rc; i += 2)
		rc = tok_bpe_word(t, s + e->pn[i], e->pn[i + 1] - e->pn[i], e->out);
out:
	free(own);
	return rc;
}

static int encode_text(struct enc *e, const char *text, size_t len)
{
	const struct coli_tokenizer *t = e->t;
	struct seg *s1 = NULL, *s2 = NULL;
	size_t n1 = 0, c1 = 0, n2 = 0, c2 = 0;
	int rc;

	if ((rc = split_added(t, text, len, 0, &s1, &n1, &c1)))
		goto out;
	for (size_t i = 0; i < n1 && !rc; i++) {
		if (s1[i].id >= 0) {
			rc = tok_ids_push(e->out, s1[i].id);
			continue;
		}
		char *norm;
		size_t nl;
		if ((rc = tok_normalize(t, text + s1[i].off, s1[i].len, &norm, &nl)))
			break;
		rc = split_added(t, norm, nl, 1, &s2, &n2, &c2);
		for (size_t j = 0; j < n2 && !rc; j++)
			rc = s2[j].id >= 0 ? tok_ids_push(e->out, s2[j].id)
			                   : pretokenize(e, norm + s2[j].off, s2[j].len,
			                                 s1[i].off == 0 && s2[j].off == 0);
		free(norm);
	}
out:
	free(s1);
	free(s2);
	return rc;
}

int coli_tokenizer_encode(const coli_tokenizer_t *t, const char *text, size_t len, int **ids,
                          int *n_ids, char *err, size_t errlen)
{
	struct tok_ids out = {0};
	struct enc e = {.t = t, .out = &out, .err = err, .errlen = errlen};
	char dummy[1];
	int rc;

	if (!err || !errlen)
		err = dummy, errlen = sizeof(dummy);
	*ids = NULL;
	*n_ids = 0;
	for (size_t i = 0; i < len;) {
		if (!((unsigned char)text[i] & 0x80)) {
			i++;
			continue;
		}
		int l = tok_utf8_len((const unsigned char *)text + i, len - i);
		if (!l) {
			snprintf(err, errlen, "invalid UTF-8 at byte offset %zu (byte 0x%02x)", i,
			         (unsigned char)text[i]);
			return -EILSEQ;
		}
		i += (size_t)l;
	}
	if (len > INT32_MAX) {
		snprintf(err, errlen, "input of %zu bytes is too long", len);
		return -E2BIG;
	}
	e.md = pcre2_match_data_create(1, NULL);
	e.mc = pcre2_match_context_create(NULL);
	e.js = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, NULL);
	if (!e.md || !e.mc || !e.js) {
		rc = -ENOMEM;
		goto out;
	}
	pcre2_jit_stack_assign(e.mc, NULL, e.js);
	rc = encode_text(&e, text, len);
out:
	pcre2_jit_stack_free(e.js);
	pcre2_match_context_free(e.mc);
	pcre2_match_data_free(e.md);
	free(e.pc);
	free(e.pn);
	if (rc) {
		if (rc == -ENOMEM)
			snprintf(err, errlen, "out of memory while encoding %zu bytes", len);
		free(out.v);
		return rc;
	}
	*ids = out.v ? out.v : malloc(sizeof(int));
	if (!*ids)
		return -ENOMEM;
	*n_ids = (int)out.n;
	return 0;
}
