/*
 * core/jinja/jinja_lex.c — template text to one token stream, as jinja2's
 * lexer makes it under transformers' settings (trim_blocks, lstrip_blocks,
 * keep_trailing_newline off):
 *
 *   "a {%- if x %}\n  b{{ y }}"  ->  TEXT "a"  BLOCK_BEGIN NAME if NAME x
 *                                     BLOCK_END  TEXT "  b"  VAR_BEGIN NAME y VAR_END
 *
 * Before lexing, "\r\n" and "\r" become "\n" and one final "\n" is dropped.
 * Whitespace control, applied to the text before a tag:
 *   {%- {{- {#-   strip all whitespace before the tag
 *   {%+           keep it
 *   {% {#         (lstrip_blocks) strip spaces and tabs back to the line's
 *                 start, when only those stand between the line start (or a
 *                 tag that ended a line) and the tag
 * and after one:
 *   -%} -}} -#}   strip all whitespace after the tag
 *   %} #}         (trim_blocks) drop one "\n" right after the tag
 *   +%}           keep it
 * Inside a tag, tokens are names, strings ('..' or ".." with Python's
 * escapes), integers, floats and operators; a closing }} inside braces
 * belongs to the expression (a dict literal). {# comments #} and
 * {% raw %}...{% endraw %} produce no tokens / one text token.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/jinja/jinja_internal.h"

struct lexer {
	struct jarena *a;
	const char *s;
	size_t n, pos;
	int line;
	struct jtok *t;
	int nt, cap;
};

static struct jtok *emit(struct lexer *L, int type)
{
	if (L->nt == L->cap) {
		int cap = L->cap ? L->cap * 2 : 256;
		struct jtok *t = jarena_alloc(L->a, sizeof(*t) * (size_t)cap);

		if (L->nt)
			memcpy(t, L->t, sizeof(*t) * (size_t)L->nt);
		L->t = t;
		L->cap = cap;
	}
	memset(&L->t[L->nt], 0, sizeof(L->t[0]));
	L->t[L->nt].type = type;
	L->t[L->nt].line = L->line;
	return &L->t[L->nt++];
}

static int count_nl(const char *s, size_t n)
{
	int c = 0;

	for (size_t i = 0; i < n; i++)
		c += s[i] == '\n';
	return c;
}

static int is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* position after the whitespace at p */
static size_t skip_ws(const struct lexer *L, size_t p)
{
	while (p < L->n && is_ws(L->s[p]))
		p++;
	return p;
}

static void text(struct lexer *L, size_t from, size_t to)
{
	if (to > from) {
		struct jtok *t = emit(L, JT_TEXT);

		t->s = L->s + from;
		t->n = to - from;
	}
	L->line += count_nl(L->s + from, to - from);
}

/* a string literal at L->pos (the quote); Python's escapes */
static void string_lit(struct lexer *L)
{
	char q = L->s[L->pos];
	size_t p = L->pos + 1, o = 0;
	char *out;
	struct jtok *t;

	while (p < L->n && L->s[p] != q)
		p += L->s[p] == '\\' ? 2 : 1;
	if (p >= L->n)
		jfail(L->a, "line %d: unterminated string", L->line);
	out = jarena_alloc(L->a, p - L->pos + 1);
	t = emit(L, JT_STRING);
	for (size_t i = L->pos + 1; i < p; i++) {
		char c = L->s[i];
		unsigned cp;
		int hex = 0;

		if (c != '\\') {
			out[o++] = c;
			continue;
		}
		c = L->s[++i];
		switch (c) {
		case 'n':
			out[o++] = '\n';
			break;
		case 't':
			out[o++] = '\t';
			break;
		case 'r':
			out[o++] = '\r';
			break;
		case '\\':
		case '\'':
		case '"':
			out[o++] = c;
			break;
		case 'a':
			out[o++] = '\a';
			break;
		case 'b':
			out[o++] = '\b';
			break;
		case 'f':
			out[o++] = '\f';
			break;
		case 'v':
			out[o++] = '\v';
			break;
		case '\n':
			break;
		case 'x':
			hex = 2;
			break;
		case 'u':
			hex = 4;
			break;
		case 'U':
			hex = 8;
			break;
		default:
			if (c >= '0' && c <= '7') {
				cp = 0;
				for (int k = 0; k < 3 && i < p && L->s[i] >= '0' && L->s[i] <= '7';
				     k++)
					cp = cp * 8 + (unsigned)(L->s[i++] - '0');
				i--;
				goto put_cp;
			}
			out[o++] = '\\';
			out[o++] = c;
		}
		if (!hex)
			continue;
		cp = 0;
		for (int k = 0; k < hex; k++) {
			char h = ++i < p ? L->s[i] : 0;

			if (!isxdigit((unsigned char)h))
				jfail(L->a, "line %d: truncated \\%c escape", L->line, c);
			cp = cp * 16 + (unsigned)(isdigit((unsigned char)h)
			                              ? h - '0'
			                              : tolower((unsigned char)h) - 'a' + 10);
		}
	put_cp:
		if (cp > 0x10ffff)
			jfail(L->a, "line %d: bad escape", L->line);
		if (cp < 0x80) {
			out[o++] = (char)cp;
		} else if (cp < 0x800) {
			out[o++] = (char)(0xc0 | cp >> 6);
			out[o++] = (char)(0x80 | (cp & 0x3f));
		} else if (cp < 0x10000) {
			out[o++] = (char)(0xe0 | cp >> 12);
			out[o++] = (char)(0x80 | (cp >> 6 & 0x3f));
			out[o++] = (char)(0x80 | (cp & 0x3f));
		} else {
			out[o++] = (char)(0xf0 | cp >> 18);
			out[o++] = (char)(0x80 | (cp >> 12 & 0x3f));
			out[o++] = (char)(0x80 | (cp >> 6 & 0x3f));
			out[o++] = (char)(0x80 | (cp & 0x3f));
		}
	}
	out[o] = 0;
	t->s = out;
	t->n = o;
	L->line += count_nl(L->s + L->pos, p - L->pos);
	L->pos = p + 1;
}

static void number(struct lexer *L)
{
	size_t p = L->pos;
	int is_float = 0;
	char buf[64];
	size_t k = 0;
	struct jtok *t;

	while (p < L->n && (isdigit((unsigned char)L->s[p]) || L->s[p] == '_'))
		p++;
	if (p + 1 < L->n && L->s[p] == '.' && isdigit((unsigned char)L->s[p + 1])) {
		is_float = 1;
		p++;
		while (p < L->n && (isdigit((unsigned char)L->s[p]) || L->s[p] == '_'))
			p++;
	}
	if (p < L->n && (L->s[p] == 'e' || L->s[p] == 'E')) {
		size_t q = p + 1;

		if (q < L->n && (L->s[q] == '+' || L->s[q] == '-'))
			q++;
		if (q < L->n && isdigit((unsigned char)L->s[q])) {
			is_float = 1;
			p = q;
			while (p < L->n && isdigit((unsigned char)L->s[p]))
				p++;
		}
	}
	for (size_t i = L->pos; i < p && k < sizeof(buf) - 1; i++)
		if (L->s[i] != '_')
			buf[k++] = L->s[i];
	buf[k] = 0;
	t = emit(L, is_float ? JT_FLOAT : JT_INT);
	if (is_float)
		t->f = strtod(buf, NULL);
	else
		t->i = strtoll(buf, NULL, 10);
	L->pos = p;
}

static const char *const OPS[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*",
                                  "/",  "%",  "~",  "<",  ">",  "=",  "(", ")", "[",
                                  "]",  "{",  "}",  ",",  ".",  ":",  "|", ";"};

/* tokens of one tag, up to and including its end; returns 1 if the end
 * swallowed a "\n" (a line starts after it) */
static int tag(struct lexer *L, int block)
{
	int depth = 0;

	for (;;) {
		const char *s;
		size_t rest;

		L->line += count_nl(L->s + L->pos, skip_ws(L, L->pos) - L->pos);
		L->pos = skip_ws(L, L->pos);
		if (L->pos >= L->n)
			jfail(L->a, "line %d: unclosed %s", L->line, block ? "'{%'" : "'{{'");
		s = L->s + L->pos;
		rest = L->n - L->pos;
		if (depth == 0) {
			const char *end = block ? "%}" : "}}";

			if (rest >= 3 && s[0] == '-' && !memcmp(s + 1, end, 2)) {
				size_t p = skip_ws(L, L->pos + 3);

				emit(L, block ? JT_BLOCK_END : JT_VAR_END);
				L->line += count_nl(L->s + L->pos, p - L->pos);
				L->pos = p;
				return p > 0 && L->s[p - 1] == '\n';
			}
			if (block && rest >= 3 && s[0] == '+' && !memcmp(s + 1, end, 2)) {
				emit(L, JT_BLOCK_END);
				L->pos += 3;
				return 0;
			}
			if (rest >= 2 && !memcmp(s, end, 2)) {
				emit(L, block ? JT_BLOCK_END : JT_VAR_END);
				L->pos += 2;
				if (block && L->pos < L->n && L->s[L->pos] == '\n') {
					L->pos++;
					L->line++;
					return 1;
				}
				return 0;
			}
		}
		if (isalpha((unsigned char)*s) || *s == '_') {
			size_t p = L->pos;
			struct jtok *t;

			while (p < L->n && (isalnum((unsigned char)L->s[p]) || L->s[p] == '_'))
				p++;
			t = emit(L, JT_NAME);
			t->s = s;
			t->n = p - L->pos;
			L->pos = p;
			continue;
		}
		if (isdigit((unsigned char)*s)) {
			number(L);
			continue;
		}
		if (*s == '\'' || *s == '"') {
			string_lit(L);
			continue;
		}
		{
			size_t k;

			for (k = 0; k < sizeof(OPS) / sizeof(OPS[0]); k++) {
				size_t ln = strlen(OPS[k]);

				if (rest >= ln && !memcmp(s, OPS[k], ln)) {
					struct jtok *t = emit(L, JT_OP);

					t->s = OPS[k];
					t->n = ln;
					L->pos += ln;
					if (*s == '(' || *s == '[' || *s == '{')
						depth++;
					else if ((*s == ')' || *s == ']' || *s == '}') && depth > 0)
						depth--;
					break;
				}
			}
			if (k == sizeof(OPS) / sizeof(OPS[0]))
				jfail(L->a, "line %d: unexpected character '%c'", L->line, *s);
		}
	}
}

/* {% raw %} ... {% endraw %}: the text in between, verbatim */
static int raw_block(struct lexer *L, size_t tag_at)
{
	size_t p = tag_at + 2;
	const char *s;

	if (p < L->n && (L->s[p] == '-' || L->s[p] == '+'))
		p++;
	p = skip_ws(L, p);
	if (L->n - p < 3 || memcmp(L->s + p, "raw", 3))
		return 0;
	p = skip_ws(L, p + 3);
	if (p < L->n && L->s[p] == '-')
		p++;
	if (L->n - p < 2 || memcmp(L->s + p, "%}", 2))
		return 0;
	p += 2;
	for (s = L->s + p; (s = memmem(s, (size_t)(L->s + L->n - s), "{%", 2)); s += 2) {
		size_t q = (size_t)(s - L->s) + 2, e;

		if (q < L->n && (L->s[q] == '-' || L->s[q] == '+'))
			q++;
		q = skip_ws(L, q);
		if (L->n - q < 6 || memcmp(L->s + q, "endraw", 6))
			continue;
		e = skip_ws(L, q + 6);
		if (e < L->n && L->s[e] == '-')
			e++;
		if (L->n - e < 2 || memcmp(L->s + e, "%}", 2))
			continue;
		L->line += count_nl(L->s + tag_at, p - tag_at);
		text(L, p, (size_t)(s - L->s));
		L->pos = e + 2;
		if (L->pos < L->n && L->s[L->pos] == '\n') {
			L->pos++;
			L->line++;
		}
		return 1;
	}
	jfail(L->a, "line %d: {%% raw %%} without {%% endraw %%}", L->line);
}

int jlex(struct jarena *a, const char *src, size_t len, struct jtok **toks)
{
	struct lexer L = {.a = a, .line = 1};
	char *s = jarena_alloc(a, len + 1);
	size_t n = 0;
	int line_start = 1;

	/* newlines to "\n", one trailing newline dropped */
	for (size_t i = 0; i < len; i++) {
		if (src[i] == '\r') {
			s[n++] = '\n';
			if (i + 1 < len && src[i + 1] == '\n')
				i++;
		} else {
			s[n++] = src[i];
		}
	}
	if (n && s[n - 1] == '\n')
		n--;
	s[n] = 0;
	L.s = s;
	L.n = n;
	while (L.pos < L.n) {
		const char *m = NULL;
		size_t at, from = L.pos, end;
		char kind, sign;

		for (const char *p = L.s + L.pos; (p = memchr(p, '{', (size_t)(L.s + L.n - p)));
		     p++) {
			if (p + 1 < L.s + L.n && (p[1] == '{' || p[1] == '%' || p[1] == '#')) {
				m = p;
				break;
			}
		}
		if (!m) {
			text(&L, from, L.n);
			break;
		}
		at = (size_t)(m - L.s);
		kind = m[1];
		sign = at + 2 < L.n ? m[2] : 0;
		end = at;
		if (sign == '-') {
			while (end > from && is_ws(L.s[end - 1]))
				end--;
		} else if (sign != '+' && kind != '{') {
			size_t l = end;

			while (l > from && L.s[l - 1] != '\n')
				l--;
			if ((l > from || line_start) && l < end) {
				size_t k = l;

				while (k < end &&
				       (L.s[k] == ' ' || L.s[k] == '\t' || L.s[k] == '\r' ||
				        L.s[k] == '\f' || L.s[k] == '\v'))
					k++;
				if (k == end)
					end = l;
			}
		}
		text(&L, from, end);
		L.line += count_nl(L.s + end, at - end);
		if (kind == '#') {
			const char *c = memmem(L.s + at + 2, L.n - at - 2, "#}", 2);
			size_t p;

			if (!c)
				jfail(a, "line %d: unclosed comment", L.line);
			p = (size_t)(c - L.s);
			L.line += count_nl(L.s + at, p - at);
			L.pos = p + 2;
			line_start = 0;
			if (p > at + 2 && L.s[p - 1] == '-' && p - 1 > at + 2) {
				size_t q = skip_ws(&L, L.pos);

				L.line += count_nl(L.s + L.pos, q - L.pos);
				L.pos = q;
				line_start = q > 0 && L.s[q - 1] == '\n';
			} else if (!(p > at + 2 && L.s[p - 1] == '+') && L.pos < L.n &&
			           L.s[L.pos] == '\n') {
				L.pos++;
				L.line++;
				line_start = 1;
			}
			continue;
		}
		if (kind == '%' && raw_block(&L, at)) {
			line_start = L.s[L.pos - 1] == '\n';
			continue;
		}
		emit(&L, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN);
		L.pos = at + 2 + (sign == '-' || sign == '+');
		line_start = tag(&L, kind == '%');
	}
	emit(&L, JT_EOF);
	*toks = L.t;
	return 0;
}
