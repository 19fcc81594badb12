/*
 * core/jinja/jinja_value.c — the arena and the values of the Jinja
 * interpreter (layout in jinja_internal.h), with Python's meaning for them:
 * str() and repr() (what {{ x }} prints: None, True, 1.5, ['a', 1],
 * {'k': 'v'}), json.dumps as transformers' tojson calls it (ensure_ascii
 * off unless asked, keys in insertion order unless sort_keys, ", " and ": " separators,
 * or "," and ": " with an indent), equality (1 == 1.0 == True, lists and
 * dicts by content) and ordering (numbers, strings by code point, lists).
 *
 * The arena hands out 16-byte aligned blocks from chunks of at least 64 KiB;
 * the sum of what it handed out is capped at a->cap, past which it fails the
 * call (jfail) instead of growing. A float prints as Python's repr: the
 * shortest digits that read back to the same double, fixed notation for
 * decimal exponents -4..15, else d.ddde+XX.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jinja/jinja_internal.h"

struct jchunk {
	struct jchunk *next;
	size_t used, cap;
	_Alignas(16) char mem[];
};

void jfail(struct jarena *a, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (a->err && a->errlen)
		vsnprintf(a->err, a->errlen, fmt, ap);
	va_end(ap);
	longjmp(*a->fail, 1);
}

void *jarena_alloc(struct jarena *a, size_t n)
{
	struct jchunk *c = a->head;
	void *p;

	n = (n + 15) & ~(size_t)15;
	if (n > a->cap - a->used || a->used > a->cap)
		jfail(a, "template used more than %zu bytes of memory", a->cap);
	if (!c || c->cap - c->used < n) {
		size_t sz = n > 65536 ? n : 65536;

		c = malloc(sizeof(*c) + sz);
		if (!c)
			jfail(a, "out of memory");
		c->cap = sz;
		c->used = 0;
		c->next = a->head;
		a->head = c;
	}
	p = c->mem + c->used;
	c->used += n;
	a->used += n;
	return p;
}

void jarena_free(struct jarena *a)
{
	while (a->head) {
		struct jchunk *c = a->head;

		a->head = c->next;
		free(c);
	}
	a->used = 0;
}

void jbuf_put(struct jarena *a, struct jbuf *b, const char *s, size_t n)
{
	if (b->max && n > b->max - b->n)
		jfail(a, "rendered text longer than %zu bytes", b->max);
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		char *p;

		while (cap < b->n + n + 1)
			cap *= 2;
		p = jarena_alloc(a, cap);
		if (b->n)
			memcpy(p, b->p, b->n);
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
}

void jbuf_puts(struct jarena *a, struct jbuf *b, const char *s)
{
	jbuf_put(a, b, s, strlen(s));
}

/* ---- constructors ---- */
struct jv jv_undef(void)
{
	return (struct jv){.t = JV_UNDEF};
}
struct jv jv_none(void)
{
	return (struct jv){.t = JV_NONE};
}
struct jv jv_bool(int b)
{
	return (struct jv){.t = JV_BOOL, .i = !!b};
}
struct jv jv_int(int64_t i)
{
	return (struct jv){.t = JV_INT, .i = i};
}
struct jv jv_float(double f)
{
	return (struct jv){.t = JV_FLOAT, .f = f};
}

struct jv jv_str(struct jarena *a, const char *s, size_t n)
{
	struct jv v = {.t = JV_STR};

	v.s = jarena_alloc(a, sizeof(struct jstr) + n + 1);
	v.s->n = n;
	if (n)
		memcpy(v.s->p, s, n);
	v.s->p[n] = 0;
	return v;
}

struct jv jv_cstr(struct jarena *a, const char *s)
{
	return jv_str(a, s, strlen(s));
}

struct jv jv_list(struct jarena *a, int cap)
{
	struct jv v = {.t = JV_LIST};

	v.l = jarena_alloc(a, sizeof(*v.l));
	v.l->n = 0;
	v.l->err = NULL;
	v.l->cap = cap > 0 ? cap : 4;
	v.l->v = jarena_alloc(a, sizeof(struct jv) * (size_t)v.l->cap);
	return v;
}

struct jv jv_dict(struct jarena *a, int cap)
{
	struct jv v = {.t = JV_DICT};

	v.d = jarena_alloc(a, sizeof(*v.d));
	v.d->n = 0;
	v.d->cap = cap > 0 ? cap : 4;
	v.d->k = jarena_alloc(a, sizeof(struct jv) * (size_t)v.d->cap);
	v.d->v = jarena_alloc(a, sizeof(struct jv) * (size_t)v.d->cap);
	return v;
}

void jlist_push(struct jarena *a, struct jlist *l, struct jv v)
{
	if (l->n == l->cap) {
		struct jv *p = jarena_alloc(a, sizeof(struct jv) * (size_t)l->cap * 2);

		memcpy(p, l->v, sizeof(struct jv) * (size_t)l->n);
		l->v = p;
		l->cap *= 2;
	}
	l->v[l->n++] = v;
}

struct jv *jdict_get(const struct jdict *d, struct jv k)
{
	for (int i = 0; i < d->n; i++)
		if (jv_eq(d->k[i], k))
			return &d->v[i];
	return NULL;
}

struct jv *jdict_gets(const struct jdict *d, const char *k)
{
	size_t n = strlen(k);

	for (int i = 0; i < d->n; i++)
		if (d->k[i].t == JV_STR && d->k[i].s->n == n && !memcmp(d->k[i].s->p, k, n))
			return &d->v[i];
	return NULL;
}

void jdict_set(struct jarena *a, struct jdict *d, struct jv k, struct jv v)
{
	struct jv *old = jdict_get(d, k);

	if (old) {
		*old = v;
		return;
	}
	if (d->n == d->cap) {
		struct jv *nk = jarena_alloc(a, sizeof(struct jv) * (size_t)d->cap * 2);
		struct jv *nv = jarena_alloc(a, sizeof(struct jv) * (size_t)d->cap * 2);

		memcpy(nk, d->k, sizeof(struct jv) * (size_t)d->n);
		memcpy(nv, d->v, sizeof(struct jv) * (size_t)d->n);
		d->k = nk;
		d->v = nv;
		d->cap *= 2;
	}
	d->k[d->n] = k;
	d->v[d->n++] = v;
}

/* ---- UTF-8 ---- */
size_t jutf8_len(const char *s, size_t n)
{
	size_t c = 0;

	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xc0) != 0x80;
	return c;
}

size_t jutf8_off(const char *s, size_t n, int64_t i)
{
	size_t off = 0;

	if (i <= 0)
		return 0;
	while (off < n) {
		off++;
		while (off < n && ((unsigned char)s[off] & 0xc0) == 0x80)
			off++;
		if (--i == 0)
			break;
	}
	return off;
}

/* ---- truth, equality, order ---- */
int jv_truthy(struct jv v)
{
	switch (v.t) {
	case JV_UNDEF:
	case JV_NONE:
		return 0;
	case JV_BOOL:
	case JV_INT:
		return v.i != 0;
	case JV_FLOAT:
		return v.f != 0;
	case JV_STR:
		return v.s->n != 0;
	case JV_LIST:
		return v.flag == JL_GEN || v.l->n != 0; /* a generator object is true */
	case JV_DICT:
		return v.flag || v.d->n != 0; /* a namespace is an object: true */
	default:
		return 1;
	}
}

static int is_num(struct jv v)
{
	return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT;
}

static double num(struct jv v)
{
	return v.t == JV_FLOAT ? v.f : (double)v.i;
}

int jv_eq(struct jv a, struct jv b)
{
	if (is_num(a) && is_num(b)) {
		if (a.t != JV_FLOAT && b.t != JV_FLOAT)
			return a.i == b.i;
		return num(a) == num(b);
	}
	if (a.t != b.t)
		return 0;
	switch (a.t) {
	case JV_UNDEF:
	case JV_NONE:
		return 1;
	case JV_STR:
		return a.s->n == b.s->n && !memcmp(a.s->p, b.s->p, a.s->n);
	case JV_LIST:
		if (a.flag == JL_GEN || b.flag == JL_GEN)
			return a.l == b.l;
		if (a.l->n != b.l->n || a.flag != b.flag)
			return 0;
		for (int i = 0; i < a.l->n; i++)
			if (!jv_eq(a.l->v[i], b.l->v[i]))
				return 0;
		return 1;
	case JV_DICT:
		if (a.flag || b.flag)
			return a.d == b.d;
		if (a.d->n != b.d->n)
			return 0;
		for (int i = 0; i < a.d->n; i++) {
			struct jv *o = jdict_get(b.d, a.d->k[i]);

			if (!o || !jv_eq(a.d->v[i], *o))
				return 0;
		}
		return 1;
	case JV_MACRO:
		return a.m == b.m;
	case JV_FUNC:
		return a.fn == b.fn;
	default:
		return a.lp == b.lp;
	}
}

int jv_cmp(struct jarena *ar, struct jv x, struct jv y)
{
	if (is_num(x) && is_num(y)) {
		if (x.t != JV_FLOAT && y.t != JV_FLOAT)
			return (x.i > y.i) - (x.i < y.i);
		return (num(x) > num(y)) - (num(x) < num(y));
	}
	if (x.t == JV_STR && y.t == JV_STR) {
		size_t n = x.s->n < y.s->n ? x.s->n : y.s->n;
		int c = memcmp(x.s->p, y.s->p, n);

		if (c)
			return c < 0 ? -1 : 1;
		return (x.s->n > y.s->n) - (x.s->n < y.s->n);
	}
	if (x.t == JV_LIST && y.t == JV_LIST && x.flag == y.flag && x.flag != JL_GEN) {
		for (int i = 0; i < x.l->n && i < y.l->n; i++) {
			if (!jv_eq(x.l->v[i], y.l->v[i]))
				return jv_cmp(ar, x.l->v[i], y.l->v[i]);
		}
		return (x.l->n > y.l->n) - (x.l->n < y.l->n);
	}
	jfail(ar, "cannot compare %s with %s", jv_type_name(x), jv_type_name(y));
}

const char *jv_type_name(struct jv v)
{
	static const char *names[] = {"undefined", "NoneType", "bool",       "int",
	                              "float",     "str",      "list",       "dict",
	                              "macro",     "function", "LoopContext"};

	if (v.t == JV_LIST && v.flag)
		return v.flag == JL_GEN ? "generator" : "tuple";
	if (v.t == JV_DICT && v.flag)
		return "Namespace";
	return names[v.t];
}

/* ---- printing ---- */
static void put_float(struct jarena *a, struct jbuf *b, double f)
{
	char dig[40], out[64];
	int prec, exp10, nd;
	char *e;

	if (isnan(f)) {
		jbuf_puts(a, b, "nan");
		return;
	}
	if (isinf(f)) {
		jbuf_puts(a, b, f < 0 ? "-inf" : "inf");
		return;
	}
	for (prec = 1; prec <= 17; prec++) {
		snprintf(dig, sizeof(dig), "%.*e", prec - 1, f);
		if (strtod(dig, NULL) == f)
			break;
	}
	/* dig: [-]d[.ddd]e[+-]XX */
	e = strchr(dig, 'e');
	exp10 = atoi(e + 1);
	*e = 0;
	{
		char digits[24];
		int neg = dig[0] == '-', k = 0;

		for (char *p = dig + neg; *p; p++)
			if (*p != '.')
				digits[k++] = *p;
		digits[k] = 0;
		nd = k;
		int o = 0;
		if (neg)
			out[o++] = '-';
		if (exp10 >= -4 && exp10 < 16) {
			if (exp10 < 0) {
				out[o++] = '0';
				out[o++] = '.';
				for (int i = 0; i < -exp10 - 1; i++)
					out[o++] = '0';
				for (int i = 0; i < nd; i++)
					out[o++] = digits[i];
			} else {
				for (int i = 0; i <= exp10; i++)
					out[o++] = i < nd ? digits[i] : '0';
				out[o++] = '.';
				if (nd > exp10 + 1)
					for (int i = exp10 + 1; i < nd; i++)
						out[o++] = digits[i];
				else
					out[o++] = '0';
			}
			out[o] = 0;
		} else {
			out[o++] = digits[0];
			if (nd > 1) {
				out[o++] = '.';
				for (int i = 1; i < nd; i++)
					out[o++] = digits[i];
			}
			snprintf(out + o, sizeof(out) - (size_t)o, "e%c%02d", exp10 < 0 ? '-' : '+',
			         exp10 < 0 ? -exp10 : exp10);
		}
	}
	jbuf_puts(a, b, out);
}

static void put_int(struct jarena *a, struct jbuf *b, int64_t i)
{
	char t[32];

	snprintf(t, sizeof(t), "%lld", (long long)i);
	jbuf_puts(a, b, t);
}

/* Python's repr of a str: quotes chosen as Python does, escapes of \\, the
 * quote, \n \r \t and other control characters */
static void repr_str(struct jarena *a, struct jbuf *b, const struct jstr *s)
{
	int sq = memchr(s->p, '\'', s->n) != NULL, dq = memchr(s->p, '"', s->n) != NULL;
	char q = sq && !dq ? '"' : '\'';

	jbuf_put(a, b, &q, 1);
	for (size_t i = 0; i < s->n; i++) {
		unsigned char c = (unsigned char)s->p[i];
		char t[8];

		if (c == '\\' || c == (unsigned char)q) {
			t[0] = '\\';
			t[1] = (char)c;
			jbuf_put(a, b, t, 2);
		} else if (c == '\n') {
			jbuf_puts(a, b, "\\n");
		} else if (c == '\r') {
			jbuf_puts(a, b, "\\r");
		} else if (c == '\t') {
			jbuf_puts(a, b, "\\t");
		} else if (c < 0x20 || c == 0x7f) {
			snprintf(t, sizeof(t), "\\x%02x", c);
			jbuf_puts(a, b, t);
		} else {
			jbuf_put(a, b, (const char *)&c, 1);
		}
	}
	jbuf_put(a, b, &q, 1);
}

void jv_repr_to(struct jarena *a, struct jbuf *b, struct jv v)
{
	switch (v.t) {
	case JV_UNDEF: /* inside a list or dict: repr(Undefined) */
		jbuf_puts(a, b, "Undefined");
		return;
	case JV_STR:
		repr_str(a, b, v.s);
		return;
	case JV_LIST:
		if (v.flag == JL_GEN) { /* Python prints an address: no template depends on it */
			jbuf_puts(a, b, "<generator object>");
			return;
		}
		jbuf_puts(a, b, v.flag ? "(" : "[");
		for (int i = 0; i < v.l->n; i++) {
			if (i)
				jbuf_puts(a, b, ", ");
			jv_repr_to(a, b, v.l->v[i]);
		}
		jbuf_puts(a, b, v.flag ? (v.l->n == 1 ? ",)" : ")") : "]");
		return;
	case JV_DICT:
		if (v.flag) {
			jbuf_puts(a, b, "<Namespace>");
			return;
		}
		jbuf_puts(a, b, "{");
		for (int i = 0; i < v.d->n; i++) {
			if (i)
				jbuf_puts(a, b, ", ");
			jv_repr_to(a, b, v.d->k[i]);
			jbuf_puts(a, b, ": ");
			jv_repr_to(a, b, v.d->v[i]);
		}
		jbuf_puts(a, b, "}");
		return;
	default:
		jv_str_to(a, b, v);
	}
}

void jv_str_to(struct jarena *a, struct jbuf *b, struct jv v)
{
	switch (v.t) {
	case JV_UNDEF:
		return;
	case JV_NONE:
		jbuf_puts(a, b, "None");
		return;
	case JV_BOOL:
		jbuf_puts(a, b, v.i ? "True" : "False");
		return;
	case JV_INT:
		put_int(a, b, v.i);
		return;
	case JV_FLOAT:
		put_float(a, b, v.f);
		return;
	case JV_STR:
		jbuf_put(a, b, v.s->p, v.s->n);
		return;
	case JV_LIST:
	case JV_DICT:
		jv_repr_to(a, b, v);
		return;
	case JV_MACRO:
		jbuf_puts(a, b, "<Macro>");
		return;
	case JV_FUNC:
		jbuf_puts(a, b, "<function>");
		return;
	default:
		jbuf_puts(a, b, "<LoopContext>");
	}
}

struct jv jv_to_str(struct jarena *a, struct jv v)
{
	struct jbuf b = {0};

	if (v.t == JV_STR)
		return v;
	jv_str_to(a, &b, v);
	return jv_str(a, b.p ? b.p : "", b.n);
}

/* ---- json.dumps ---- */
/* ensure_ascii: every code point outside ' '..'~' as \uXXXX (a surrogate
 * pair above U+FFFF), lower-case hex, as json.dumps writes it */
static size_t json_ascii(struct jarena *a, struct jbuf *b, const char *s, size_t n, size_t i)
{
	unsigned char c = (unsigned char)s[i];
	unsigned cp = c;
	size_t len = 1;
	char t[16];

	if (c >= 0xc0 && c < 0xe0 && i + 1 < n)
		cp = (c & 0x1fu) << 6 | ((unsigned char)s[i + 1] & 0x3fu), len = 2;
	else if (c >= 0xe0 && c < 0xf0 && i + 2 < n)
		cp = (c & 0x0fu) << 12 | ((unsigned char)s[i + 1] & 0x3fu) << 6 |
		     ((unsigned char)s[i + 2] & 0x3fu),
		len = 3;
	else if (c >= 0xf0 && i + 3 < n)
		cp = (c & 0x07u) << 18 | ((unsigned char)s[i + 1] & 0x3fu) << 12 |
		     ((unsigned char)s[i + 2] & 0x3fu) << 6 | ((unsigned char)s[i + 3] & 0x3fu),
		len = 4;
	if (cp >= 0x10000) {
		cp -= 0x10000;
		snprintf(t, sizeof(t), "\\u%04x\\u%04x", 0xd800 + (cp >> 10),
		         0xdc00 + (cp & 0x3ff));
	} else {
		snprintf(t, sizeof(t), "\\u%04x", cp);
	}
	jbuf_puts(a, b, t);
	return len;
}

static void json_str(struct jarena *a, struct jbuf *b, const char *s, size_t n, int ascii)
{
	jbuf_puts(a, b, "\"");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char t[8];

		if (ascii && c >= 0x7f) {
			i += json_ascii(a, b, s, n, i) - 1;
			continue;
		}
		switch (c) {
		case '"':
			jbuf_puts(a, b, "\\\"");
			break;
		case '\\':
			jbuf_puts(a, b, "\\\\");
			break;
		case '\n':
			jbuf_puts(a, b, "\\n");
			break;
		case '\r':
			jbuf_puts(a, b, "\\r");
			break;
		case '\t':
			jbuf_puts(a, b, "\\t");
			break;
		case '\b':
			jbuf_puts(a, b, "\\b");
			break;
		case '\f':
			jbuf_puts(a, b, "\\f");
			break;
		default:
			if (c < 0x20) {
				snprintf(t, sizeof(t), "\\u%04x", c);
				jbuf_puts(a, b, t);
			} else {
				jbuf_put(a, b, (const char *)&c, 1);
			}
		}
	}
	jbuf_puts(a, b, "\"");
}

static void json_nl(struct jarena *a, struct jbuf *b, int indent, int depth)
{
	jbuf_puts(a, b, "\n");
	for (int i = 0; i < indent * depth; i++)
		jbuf_puts(a, b, " ");
}

void jv_json_to(struct jarena *a, struct jbuf *b, struct jv v, int indent, const char *item_sep,
                const char *key_sep, int flags, int depth)
{
	if (depth > 200)
		jfail(a, "tojson: nesting deeper than 200");
	switch (v.t) {
	case JV_NONE:
		jbuf_puts(a, b, "null");
		return;
	case JV_BOOL:
		jbuf_puts(a, b, v.i ? "true" : "false");
		return;
	case JV_INT:
		put_int(a, b, v.i);
		return;
	case JV_FLOAT:
		if (isnan(v.f))
			jbuf_puts(a, b, "NaN");
		else if (isinf(v.f))
			jbuf_puts(a, b, v.f < 0 ? "-Infinity" : "Infinity");
		else
			put_float(a, b, v.f);
		return;
	case JV_STR:
		json_str(a, b, v.s->p, v.s->n, flags & JJSON_ASCII);
		return;
	case JV_LIST:
		if (v.flag == JL_GEN)
			break;
		if (!v.l->n) {
			jbuf_puts(a, b, "[]");
			return;
		}
		jbuf_puts(a, b, "[");
		for (int i = 0; i < v.l->n; i++) {
			if (i)
				jbuf_puts(a, b, item_sep);
			if (indent >= 0)
				json_nl(a, b, indent, depth + 1);
			jv_json_to(a, b, v.l->v[i], indent, item_sep, key_sep, flags, depth + 1);
		}
		if (indent >= 0)
			json_nl(a, b, indent, depth);
		jbuf_puts(a, b, "]");
		return;
	case JV_DICT: {
		int n = v.d->n, *ord;

		if (v.flag)
			break;
		if (!n) {
			jbuf_puts(a, b, "{}");
			return;
		}
		ord = jarena_alloc(a, sizeof(int) * (size_t)n);
		for (int i = 0; i < n; i++)
			ord[i] = i;
		if (flags & JJSON_SORT) /* insertion sort: dicts here are small */
			for (int i = 1; i < n; i++)
				for (int j = i;
				     j > 0 && jv_cmp(a, v.d->k[ord[j - 1]], v.d->k[ord[j]]) > 0;
				     j--) {
					int t = ord[j];
					ord[j] = ord[j - 1];
					ord[j - 1] = t;
				}
		jbuf_puts(a, b, "{");
		for (int i = 0; i < n; i++) {
			struct jv k = v.d->k[ord[i]];

			if (i)
				jbuf_puts(a, b, item_sep);
			if (indent >= 0)
				json_nl(a, b, indent, depth + 1);
			if (k.t == JV_STR) {
				json_str(a, b, k.s->p, k.s->n, flags & JJSON_ASCII);
			} else if (k.t == JV_NONE || k.t == JV_BOOL || k.t == JV_INT ||
			           k.t == JV_FLOAT) {
				struct jbuf t = {0};

				jv_json_to(a, &t, k, -1, ", ", ": ", 0, depth + 1);
				json_str(a, b, t.p, t.n, flags & JJSON_ASCII);
			} else {
				jfail(a,
				      "tojson: keys must be str, int, float, bool or None, not %s",
				      jv_type_name(k));
			}
			jbuf_puts(a, b, key_sep);
			jv_json_to(a, b, v.d->v[ord[i]], indent, item_sep, key_sep, flags,
			           depth + 1);
		}
		if (indent >= 0)
			json_nl(a, b, indent, depth);
		jbuf_puts(a, b, "}");
		return;
	}
	default:
		break;
	}
	jfail(a, "tojson: Object of type %s is not JSON serializable", jv_type_name(v));
}

struct jv jv_from_json(struct jarena *a, const json_t *j, int depth)
{
	struct jv v;

	if (depth > 200)
		jfail(a, "input JSON nested deeper than 200");
	switch (json_typeof(j)) {
	case JSON_OBJECT: {
		const char *k;
		json_t *x;

		v = jv_dict(a, (int)json_object_size(j));
		json_object_foreach((json_t *)j, k, x)
		{
			jdict_set(a, v.d, jv_cstr(a, k), jv_from_json(a, x, depth + 1));
		}
		return v;
	}
	case JSON_ARRAY: {
		size_t i;
		json_t *x;

		v = jv_list(a, (int)json_array_size(j));
		json_array_foreach(j, i, x) jlist_push(a, v.l, jv_from_json(a, x, depth + 1));
		return v;
	}
	case JSON_STRING:
		return jv_str(a, json_string_value(j), json_string_length(j));
	case JSON_INTEGER:
		return jv_int(json_integer_value(j));
	case JSON_REAL:
		return jv_float(json_real_value(j));
	case JSON_TRUE:
		return jv_bool(1);
	case JSON_FALSE:
		return jv_bool(0);
	default:
		return jv_none();
	}
}
