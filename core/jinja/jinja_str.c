/*
 * core/jinja/jinja_str.c — Python's str, dict and list methods as templates
 * call them, and the globals transformers provides:
 *
 *   str.     strip lstrip rstrip split rsplit startswith endswith lower upper
 *            title capitalize replace find rfind count join splitlines
 *            isdigit isalpha isspace isalnum islower isupper
 *   dict.    items keys values get      list.  index count
 *   globals  range namespace dict raise_exception strftime_now
 *
 * Python's meaning is kept where a template can see it: lengths and offsets
 * in code points, strip() and split() without arguments on whitespace (ASCII
 * and the separators \x1c-\x1f), split() dropping empty fields then,
 * replace('', x) inserting x around every code point. Case mapping goes
 * through utf8proc. The mutating methods (append, update, pop, ...) fail as
 * they do in jinja2's immutable sandbox. strftime_now formats the render's
 * `now` in local time, as datetime.now() does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "core/jinja/jinja_internal.h"

#define AR(st)             (&(st)->a)
#define FAIL(st, fmt, ...) jfail(AR(st), "line %d: " fmt, (st)->line, ##__VA_ARGS__)
#define ARG(i, k)          jarg(args, nargs, kwn, kwv, nkw, i, k)

/* keyword argument k, else positional i, else NULL */
struct jv *jarg(struct jv *args, int nargs, const char **kwn, struct jv *kwv, int nkw, int i,
                const char *k)
{
	for (int j = 0; j < nkw; j++)
		if (!strcmp(kwn[j], k))
			return &kwv[j];
	return i >= 0 && i < nargs ? &args[i] : NULL;
}

struct jv jneed_str(struct jstate *st, struct jv v, const char *who)
{
	if (v.t != JV_STR)
		FAIL(st, "%s expects a string, got %s", who, jv_type_name(v));
	return v;
}

int jis_pyspace(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

/* ---- strings ---- */
struct jv jstr_case(struct jstate *st, struct jv v, int mode) /* 0 lower 1 upper 2 title 3 cap */
{
	struct jbuf b = {0};
	int prev_alpha = 0, first = 1;
	size_t i = 0;

	while (i < v.s->n) {
		utf8proc_int32_t cp;
		utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)v.s->p + i,
		                                      (utf8proc_ssize_t)(v.s->n - i), &cp);
		utf8proc_uint8_t enc[4];
		int up;

		if (l <= 0) { /* invalid byte: keep it */
			jbuf_put(AR(st), &b, v.s->p + i, 1);
			i++;
			continue;
		}
		if (mode == 0)
			up = 0;
		else if (mode == 1)
			up = 1;
		else if (mode == 2)
			up = !prev_alpha;
		else
			up = first;
		cp = up ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
		{
			utf8proc_category_t c = utf8proc_category(cp);

			prev_alpha = c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL ||
			             c == UTF8PROC_CATEGORY_LT || c == UTF8PROC_CATEGORY_LM ||
			             c == UTF8PROC_CATEGORY_LO;
		}
		jbuf_put(AR(st), &b, (const char *)enc, (size_t)utf8proc_encode_char(cp, enc));
		first = 0;
		i += (size_t)l;
	}
	return jv_str(AR(st), b.p ? b.p : "", b.n);
}

static int in_chars(const struct jv *chars, const char *s, size_t n)
{
	if (!chars || chars->t != JV_STR)
		return n == 1 && jis_pyspace((unsigned char)s[0]);
	for (size_t i = 0; i < chars->s->n;) {
		size_t k = i + 1;

		while (k < chars->s->n && ((unsigned char)chars->s->p[k] & 0xc0) == 0x80)
			k++;
		if (k - i == n && !memcmp(chars->s->p + i, s, n))
			return 1;
		i = k;
	}
	return 0;
}

size_t jcp_len_at(const char *s, size_t n, size_t i)
{
	size_t k = i + 1;

	while (k < n && ((unsigned char)s[k] & 0xc0) == 0x80)
		k++;
	return k - i;
}

struct jv jstrip(struct jstate *st, struct jv v, const struct jv *chars, int left, int right)
{
	size_t a = 0, b = v.s->n;

	if (chars && chars->t != JV_STR && chars->t != JV_NONE)
		FAIL(st, "strip arg must be None or str");
	while (left && a < b) {
		size_t l = jcp_len_at(v.s->p, b, a);

		if (!in_chars(chars, v.s->p + a, l))
			break;
		a += l;
	}
	while (right && b > a) {
		size_t k = b - 1;

		while (k > a && ((unsigned char)v.s->p[k] & 0xc0) == 0x80)
			k--;
		if (!in_chars(chars, v.s->p + k, b - k))
			break;
		b = k;
	}
	return jv_str(AR(st), v.s->p + a, b - a);
}

struct jv jsplit(struct jstate *st, struct jv v, const struct jv *sep, const struct jv *maxv,
                 int from_right)
{
	struct jv r = jv_list(AR(st), 4);
	int64_t max = maxv && maxv->t == JV_INT ? maxv->i : -1;
	const char *p = v.s->p;
	size_t n = v.s->n;

	if (!sep || sep->t == JV_NONE) {
		/* runs of whitespace; rsplit differs only with a limit, where
		 * it is approximated by split */
		size_t i = 0;

		while (i < n) {
			size_t j;

			while (i < n && jis_pyspace((unsigned char)p[i]))
				i++;
			if (i >= n)
				break;
			if (max >= 0 && r.l->n == max) {
				size_t e = n;

				while (e > i && jis_pyspace((unsigned char)p[e - 1]))
					e--;
				jlist_push(AR(st), r.l, jv_str(AR(st), p + i, e - i));
				break;
			}
			j = i;
			while (j < n && !jis_pyspace((unsigned char)p[j]))
				j++;
			jlist_push(AR(st), r.l, jv_str(AR(st), p + i, j - i));
			i = j;
		}
		return r;
	}
	jneed_str(st, *sep, "split");
	if (!sep->s->n)
		FAIL(st, "empty separator");
	if (from_right && max >= 0) {
		struct jv tmp = jv_list(AR(st), 4);
		size_t e = n;

		while (max-- > 0) {
			const char *hit = NULL;

			for (size_t k = e; k >= sep->s->n; k--)
				if (!memcmp(p + k - sep->s->n, sep->s->p, sep->s->n)) {
					hit = p + k - sep->s->n;
					break;
				}
			if (!hit)
				break;
			jlist_push(
			    AR(st), tmp.l,
			    jv_str(AR(st), hit + sep->s->n, (size_t)(p + e - hit) - sep->s->n));
			e = (size_t)(hit - p);
		}
		jlist_push(AR(st), r.l, jv_str(AR(st), p, e));
		for (int i = tmp.l->n - 1; i >= 0; i--)
			jlist_push(AR(st), r.l, tmp.l->v[i]);
		return r;
	}
	for (;;) {
		const char *hit = max != 0 ? memmem(p, n, sep->s->p, sep->s->n) : NULL;

		if (!hit) {
			jlist_push(AR(st), r.l, jv_str(AR(st), p, n));
			return r;
		}
		jlist_push(AR(st), r.l, jv_str(AR(st), p, (size_t)(hit - p)));
		n -= (size_t)(hit - p) + sep->s->n;
		p = hit + sep->s->n;
		if (max > 0)
			max--;
	}
}

struct jv jreplace(struct jstate *st, struct jv v, struct jv old, struct jv new,
                   const struct jv *count)
{
	struct jbuf b = {0};
	int64_t max = count && count->t == JV_INT ? count->i : -1;
	const char *p = v.s->p;
	size_t n = v.s->n;

	jneed_str(st, old, "replace");
	new = jv_to_str(AR(st), new);
	if (!old.s->n) { /* Python inserts new around every code point */
		for (size_t i = 0; i <= n; max--) {
			size_t l;

			if (max != 0)
				jbuf_put(AR(st), &b, new.s->p, new.s->n);
			if (i == n)
				break;
			l = jcp_len_at(p, n, i);
			jbuf_put(AR(st), &b, p + i, l);
			i += l;
		}
		return jv_str(AR(st), b.p ? b.p : "", b.n);
	}
	for (;;) {
		const char *hit = max != 0 ? memmem(p, n, old.s->p, old.s->n) : NULL;

		if (!hit) {
			jbuf_put(AR(st), &b, p, n);
			break;
		}
		jbuf_put(AR(st), &b, p, (size_t)(hit - p));
		jbuf_put(AR(st), &b, new.s->p, new.s->n);
		n -= (size_t)(hit - p) + old.s->n;
		p = hit + old.s->n;
		if (max > 0)
			max--;
	}
	return jv_str(AR(st), b.p ? b.p : "", b.n);
}

int jaffix(struct jstate *st, struct jv v, struct jv x, int end)
{
	if (x.t == JV_LIST) {
		for (int i = 0; i < x.l->n; i++)
			if (jaffix(st, v, x.l->v[i], end))
				return 1;
		return 0;
	}
	jneed_str(st, x, end ? "endswith" : "startswith");
	if (x.s->n > v.s->n)
		return 0;
	return !memcmp(v.s->p + (end ? v.s->n - x.s->n : 0), x.s->p, x.s->n);
}

struct jv jjoin(struct jstate *st, struct jv seq, struct jv sep, const struct jv *attr)
{
	struct jbuf b = {0};
	struct jv l = seq;

	if (seq.t == JV_UNDEF)
		return jv_str(AR(st), "", 0);
	jgen_check(st, seq);
	if (seq.t != JV_LIST) {
		struct jv it = jv_list(AR(st), 4);

		if (seq.t == JV_DICT && !seq.flag)
			for (int i = 0; i < seq.d->n; i++)
				jlist_push(AR(st), it.l, seq.d->k[i]);
		else if (seq.t == JV_STR)
			for (size_t i = 0; i < seq.s->n; i += jcp_len_at(seq.s->p, seq.s->n, i))
				jlist_push(AR(st), it.l,
				           jv_str(AR(st), seq.s->p + i,
				                  jcp_len_at(seq.s->p, seq.s->n, i)));
		else
			FAIL(st, "join expects a sequence, got %s", jv_type_name(seq));
		l = it;
	}
	sep = jv_to_str(AR(st), sep);
	for (int i = 0; i < l.l->n; i++) {
		struct jv x = l.l->v[i];

		if (attr && attr->t != JV_NONE)
			x = st->getitem(st, x, *attr);
		if (i)
			jbuf_put(AR(st), &b, sep.s->p, sep.s->n);
		jv_str_to(AR(st), &b, x);
	}
	return jv_str(AR(st), b.p ? b.p : "", b.n);
}

/* ---- methods and globals ---- */
static const char *const STR_METHODS[] = {
    "strip",      "lstrip",  "rstrip",     "split",   "rsplit",  "startswith", "endswith", "lower",
    "upper",      "title",   "capitalize", "replace", "find",    "rfind",      "count",    "join",
    "splitlines", "isdigit", "isalpha",    "isspace", "isalnum", "islower",    "isupper",  NULL};
static const char *const DICT_METHODS[] = {"items",   "keys",   "values", "get",
                                           "pop",     "update", "clear",  "setdefault",
                                           "popitem", "copy",   NULL};
static const char *const LIST_METHODS[] = {"index",  "count",   "append", "extend", "insert", "pop",
                                           "remove", "reverse", "sort",   "clear",  "copy",   NULL};
static const char *const GLOBALS[] = {"range",           "namespace",    "dict",
                                      "raise_exception", "strftime_now", NULL};

static const char *find_name(const char *const *names, const char *k)
{
	for (int i = 0; names[i]; i++)
		if (!strcmp(names[i], k))
			return names[i];
	return NULL;
}

static struct jv func(struct jstate *st, const char *name, struct jv self)
{
	struct jfunc *f = jarena_alloc(AR(st), sizeof(*f));
	struct jv v = {.t = JV_FUNC, .fn = f};

	f->name = name;
	f->self = self;
	return v;
}

struct jv jbuiltin_global(struct jstate *st, const char *name)
{
	const char *n = find_name(GLOBALS, name);

	return n ? func(st, n, jv_undef()) : jv_undef();
}

struct jv jbuiltin_method(struct jstate *st, struct jv obj, const char *name)
{
	const char *n = NULL;

	if (obj.t == JV_STR)
		n = find_name(STR_METHODS, name);
	else if (obj.t == JV_DICT && !obj.flag)
		n = find_name(DICT_METHODS, name);
	else if (obj.t == JV_LIST && obj.flag != JL_GEN) /* a generator has no methods */
		n = find_name(LIST_METHODS, name);
	else if (obj.t == JV_LOOP && !strcmp(name, "cycle"))
		n = "cycle";
	return n ? func(st, n, obj) : jv_undef();
}

static struct jv range(struct jstate *st, struct jv *args, int nargs)
{
	int64_t a = 0, b, step = 1;
	struct jv r;

	for (int i = 0; i < nargs; i++)
		if (args[i].t != JV_INT && args[i].t != JV_BOOL)
			FAIL(st, "range() takes integers");
	if (nargs == 1) {
		b = args[0].i;
	} else if (nargs == 2 || nargs == 3) {
		a = args[0].i;
		b = args[1].i;
		if (nargs == 3)
			step = args[2].i;
	} else {
		FAIL(st, "range() takes 1 to 3 arguments");
	}
	if (!step)
		FAIL(st, "range() step must not be zero");
	r = jv_list(AR(st), 4);
	for (int64_t i = a; step > 0 ? i < b : i > b;
	     i = __builtin_add_overflow(i, step, &i) ? b : i) {
		jstate_count(st, 1);
		jlist_push(AR(st), r.l, jv_int(i));
	}
	return r;
}

struct jv jbuiltin_call(struct jstate *st, struct jfunc *fn, struct jv *args, int nargs,
                        const char **kwn, struct jv *kwv, int nkw)
{
	struct jarena *a = AR(st);
	struct jv self = fn->self, *x;
	const char *m = fn->name;

	if (self.t == JV_UNDEF) { /* globals */
		if (!strcmp(m, "range"))
			return range(st, args, nargs);
		if (!strcmp(m, "namespace") || !strcmp(m, "dict")) {
			struct jv d = jv_dict(a, nkw + 1);

			if (nargs == 1 && args[0].t == JV_DICT)
				for (int i = 0; i < args[0].d->n; i++)
					jdict_set(a, d.d, args[0].d->k[i], args[0].d->v[i]);
			else if (nargs)
				FAIL(st, "%s() takes keyword arguments or one mapping", m);
			for (int i = 0; i < nkw; i++)
				jdict_set(a, d.d, jv_cstr(a, kwn[i]), kwv[i]);
			d.flag = m[0] == 'n';
			return d;
		}
		if (!strcmp(m, "raise_exception")) {
			struct jv s = nargs ? jv_to_str(a, args[0]) : jv_cstr(a, "");

			FAIL(st, "raise_exception: %s", s.s->p);
		}
		if (!strcmp(m, "strftime_now")) {
			time_t t = (time_t)st->now;
			struct tm tm;
			char out[256];
			size_t n;

			if (nargs < 1 || args[0].t != JV_STR)
				FAIL(st, "strftime_now takes a format string");
			localtime_r(&t, &tm);
			n = strftime(out, sizeof(out), args[0].s->p, &tm);
			return jv_str(a, out, n);
		}
	}
	if (self.t == JV_STR) {
		struct jv s = self;

		if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip"))
			return jstrip(st, s, ARG(0, "chars"), m[0] != 'r', m[0] != 'l');
		if (!strcmp(m, "split") || !strcmp(m, "rsplit"))
			return jsplit(st, s, ARG(0, "sep"), ARG(1, "maxsplit"), m[0] == 'r');
		if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
			if (nargs < 1)
				FAIL(st, "%s takes an argument", m);
			return jv_bool(jaffix(st, s, args[0], m[0] == 'e'));
		}
		if (!strcmp(m, "lower") || !strcmp(m, "upper") || !strcmp(m, "title") ||
		    !strcmp(m, "capitalize"))
			return jstr_case(st, s,
			                 m[0] == 'l'   ? 0
			                 : m[0] == 'u' ? 1
			                 : m[0] == 't' ? 2
			                               : 3);
		if (!strcmp(m, "replace")) {
			if (nargs < 2)
				FAIL(st, "replace takes old and new");
			return jreplace(st, s, args[0], args[1], nargs > 2 ? &args[2] : NULL);
		}
		if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "count")) {
			const char *hit = NULL;
			int64_t c = 0;
			struct jv sub = nargs ? jneed_str(st, args[0], m) : jv_undef();

			if (sub.t != JV_STR)
				FAIL(st, "%s takes a string", m);
			for (size_t i = 0; i + sub.s->n <= s.s->n;) {
				if (!memcmp(s.s->p + i, sub.s->p, sub.s->n)) {
					if (!hit || m[0] == 'r')
						hit = s.s->p + i;
					c++;
					if (m[0] == 'f')
						break;
					i += sub.s->n ? sub.s->n : 1;
				} else {
					i++;
				}
			}
			if (m[0] == 'c')
				return jv_int(sub.s->n ? c
				                       : (int64_t)jutf8_len(s.s->p, s.s->n) + 1);
			return jv_int(hit ? (int64_t)jutf8_len(s.s->p, (size_t)(hit - s.s->p))
			                  : -1);
		}
		if (!strcmp(m, "join"))
			return jjoin(st, nargs ? args[0] : jv_undef(), s, NULL);
		if (!strcmp(m, "splitlines")) {
			struct jv r = jv_list(a, 4);
			size_t i = 0, n = s.s->n;

			while (i < n) {
				size_t e = i;

				while (e < n && !strchr("\n\r\v\f\x1c\x1d\x1e", s.s->p[e]))
					e++;
				jlist_push(a, r.l, jv_str(a, s.s->p + i, e - i));
				i = e < n ? e + 1 +
				                (s.s->p[e] == '\r' && e + 1 < n &&
				                 s.s->p[e + 1] == '\n')
				          : n;
			}
			return r;
		}
		if (!strncmp(m, "is", 2)) { /* by code point, with utf8proc's categories */
			int ok = s.s->n > 0, cased = 0;

			for (size_t i = 0; i < s.s->n;) {
				utf8proc_int32_t c;
				utf8proc_ssize_t l =
				    utf8proc_iterate((const utf8proc_uint8_t *)s.s->p + i,
				                     (utf8proc_ssize_t)(s.s->n - i), &c);
				utf8proc_category_t k;
				int upper, lower, alpha;

				if (l <= 0) {
					c = (unsigned char)s.s->p[i];
					l = 1;
				}
				i += (size_t)l;
				k = utf8proc_category(c);
				upper = k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LT;
				lower = k == UTF8PROC_CATEGORY_LL;
				alpha = upper || lower || k == UTF8PROC_CATEGORY_LM ||
				        k == UTF8PROC_CATEGORY_LO;
				if (!strcmp(m, "isdigit"))
					ok &= k == UTF8PROC_CATEGORY_ND;
				else if (!strcmp(m, "isalpha"))
					ok &= alpha;
				else if (!strcmp(m, "isalnum"))
					ok &= alpha || k == UTF8PROC_CATEGORY_ND;
				else if (!strcmp(m, "isspace"))
					ok &= c < 0x80 ? jis_pyspace((unsigned char)c)
					               : k == UTF8PROC_CATEGORY_ZS || c == 0x85 ||
					                     c == 0x2028 || c == 0x2029;
				else if (!strcmp(m, "islower"))
					ok &= !upper, cased |= lower;
				else
					ok &= !lower, cased |= upper;
			}
			if (!strcmp(m, "islower") || !strcmp(m, "isupper"))
				ok = ok && cased;
			return jv_bool(ok);
		}
	}
	if (self.t == JV_DICT) {
		struct jdict *d = self.d;

		if (!strcmp(m, "items")) {
			struct jv r = jv_list(a, d->n);

			for (int i = 0; i < d->n; i++) {
				struct jv t = jv_list(a, 2);

				t.flag = 1;
				jlist_push(a, t.l, d->k[i]);
				jlist_push(a, t.l, d->v[i]);
				jlist_push(a, r.l, t);
			}
			return r;
		}
		if (!strcmp(m, "keys") || !strcmp(m, "values")) {
			struct jv r = jv_list(a, d->n);

			for (int i = 0; i < d->n; i++)
				jlist_push(a, r.l, m[0] == 'k' ? d->k[i] : d->v[i]);
			return r;
		}
		if (!strcmp(m, "get")) {
			if (nargs < 1)
				FAIL(st, "get takes a key");
			x = jdict_get(d, args[0]);
			return x ? *x : nargs > 1 ? args[1] : jv_none();
		}
	}
	if (self.t == JV_LIST && (!strcmp(m, "index") || !strcmp(m, "count"))) {
		int64_t c = 0;

		if (nargs < 1)
			FAIL(st, "%s takes a value", m);
		for (int i = 0; i < self.l->n; i++)
			if (jv_eq(self.l->v[i], args[0])) {
				if (m[0] == 'i')
					return jv_int(i);
				c++;
			}
		if (m[0] == 'i')
			FAIL(st, "value is not in list");
		return jv_int(c);
	}
	if (self.t == JV_LOOP && !strcmp(m, "cycle")) {
		struct jv idx = st->getitem(st, self, jv_cstr(a, "index0"));

		if (!nargs)
			FAIL(st, "no items for cycling given");
		return args[idx.i % nargs];
	}
	FAIL(st, "access to '%s' of a %s is unsafe or unsupported", m, jv_type_name(self));
}
