/*
 * core/jinja/jinja_builtin.c — jinja2's filters and tests, as chat templates
 * use them (jinja_internal.h lists the files; jinja_str.c has the methods of
 * str, dict and list and the globals).
 *
 *   filters  abs batch capitalize count d default dictsort e escape first float indent
 *            int items join last length list lower map max min reject rejectattr
 *            replace reverse round safe select selectattr sort string sum title
 *            tojson trim unique upper
 *   tests    boolean callable defined divisibleby eq equalto even false float
 *            ge gt in integer iterable le lower lt mapping ne none number odd
 *            sameas sequence string true undefined upper == != < <= > >=
 *
 * Python's and jinja2's meaning is kept where a template can see it: sort,
 * unique, min and max compare strings case-insensitively unless told
 * otherwise; map/selectattr take dotted attributes ("function.name");
 * tojson is transformers' json.dumps(ensure_ascii=False, indent, separators,
 * sort_keys); indent follows jinja2 3.x (first line and blank lines left
 * alone unless asked).
 */
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jinja/jinja_internal.h"

#define AR(st)             (&(st)->a)
#define FAIL(st, fmt, ...) jfail(AR(st), "line %d: " fmt, (st)->line, ##__VA_ARGS__)
#define ARG(i, k)          jarg(args, nargs, kwn, kwv, nkw, i, k)
/* ---- sequences ---- */
struct jv jas_list(struct jstate *st, struct jv v)
{
	struct jv r;

	if (v.t == JV_LIST) {
		jgen_check(st, v);
		return v;
	}
	r = jv_list(AR(st), 4);
	if (v.t == JV_UNDEF)
		return r;
	if (v.t == JV_DICT && !v.flag) {
		for (int i = 0; i < v.d->n; i++)
			jlist_push(AR(st), r.l, v.d->k[i]);
		return r;
	}
	if (v.t == JV_STR) {
		for (size_t i = 0; i < v.s->n; i += jcp_len_at(v.s->p, v.s->n, i))
			jlist_push(AR(st), r.l,
			           jv_str(AR(st), v.s->p + i, jcp_len_at(v.s->p, v.s->n, i)));
		return r;
	}
	FAIL(st, "'%s' object is not iterable", jv_type_name(v));
}

/* attribute "a.b" or "0" of x, as jinja2's make_attrgetter */
static struct jv attr_of(struct jstate *st, struct jv x, struct jv attr)
{
	const char *p, *e;

	if (attr.t != JV_STR)
		return st->getitem(st, x, attr);
	p = attr.s->p;
	for (;;) {
		size_t n;
		struct jv k;
		int digits = 1;

		e = strchr(p, '.');
		n = e ? (size_t)(e - p) : strlen(p);
		for (size_t i = 0; i < n; i++)
			digits &= p[i] >= '0' && p[i] <= '9';
		k = digits && n ? jv_int(strtoll(p, NULL, 10)) : jv_str(AR(st), p, n);
		x = st->getitem(st, x, k); /* an Undefined part fails, as in jinja2 */
		if (!e)
			return x;
		p = e + 1;
	}
}

static struct jv fold(struct jstate *st, struct jv v, int case_sensitive)
{
	return !case_sensitive && v.t == JV_STR ? jstr_case(st, v, 0) : v;
}

static struct jv sort(struct jstate *st, struct jv seq, int reverse, int cs, const struct jv *attr)
{
	struct jv l = jas_list(st, seq), r = jv_list(AR(st), l.l->n), *key;

	key = jarena_alloc(AR(st), sizeof(struct jv) * (size_t)(l.l->n + 1));
	for (int i = 0; i < l.l->n; i++) {
		jlist_push(AR(st), r.l, l.l->v[i]);
		key[i] = fold(
		    st, attr && attr->t != JV_NONE ? attr_of(st, l.l->v[i], *attr) : l.l->v[i], cs);
	}
	for (int i = 1; i < r.l->n; i++) /* stable insertion sort */
		for (int j = i; j > 0; j--) {
			int c = jv_cmp(AR(st), key[j - 1], key[j]);
			struct jv t;

			if (reverse ? c >= 0 : c <= 0)
				break;
			t = key[j];
			key[j] = key[j - 1];
			key[j - 1] = t;
			t = r.l->v[j];
			r.l->v[j] = r.l->v[j - 1];
			r.l->v[j - 1] = t;
		}
	jstate_count(st, r.l->n);
	return r;
}

/* select/reject/selectattr/rejectattr: keep items whose (attribute's) test is want */
/* What jinja2 returns as a generator (map, select, unique, items...) fails
 * only when something iterates it. f's work is done now; a failure in it
 * becomes a generator that fails, with the same message, where consumed. */
struct lazy {
	const char *name;
	struct jv v, *args, *kwv;
	const char **kwn;
	int nargs, nkw;
};

static struct jv gen_now(struct jstate *st, const struct lazy *z);

static struct jv lazily(struct jstate *st, const struct lazy *z)
{
	jmp_buf jb, *saved = st->a.fail;
	struct jv r;

	if (setjmp(jb)) {
		struct jv g;

		st->a.fail = saved;
		g = jv_list(AR(st), 1);
		g.flag = JL_GEN;
		g.l->err = st->a.err && st->a.errlen && st->a.err[0]
		               ? jv_cstr(AR(st), st->a.err).s->p
		               : "a generator failed";
		if (st->a.err && st->a.errlen)
			st->a.err[0] = 0; /* not this render's error unless consumed */
		return g;
	}
	st->a.fail = &jb;
	r = gen_now(st, z);
	st->a.fail = saved;
	r.flag = JL_GEN;
	return r;
}

static struct jv select_(struct jstate *st, struct jv seq, int want, int by_attr, struct jv *args,
                         int nargs)
{
	struct jv l, r = jv_list(AR(st), 4);
	int k = 0;
	struct jv attr = jv_undef();

	if (!jv_truthy(seq)) /* jinja2: "if value:" before iterating */
		return r;
	l = jas_list(st, seq);

	if (by_attr) {
		if (nargs < 1)
			FAIL(st, "selectattr/rejectattr need an attribute");
		attr = args[k++];
	}
	for (int i = 0; i < l.l->n; i++) {
		struct jv x = by_attr ? attr_of(st, l.l->v[i], attr) : l.l->v[i];
		int ok;

		if (k < nargs) {
			jneed_str(st, args[k], "select test name");
			ok = jbuiltin_test(st, args[k].s->p, x, args + k + 1, nargs - k - 1);
		} else {
			ok = jv_truthy(x);
		}
		if (ok == want)
			jlist_push(AR(st), r.l, l.l->v[i]);
	}
	jstate_count(st, l.l->n);
	r.flag = JL_GEN;
	return r;
}

static struct jv tojson(struct jstate *st, struct jv v, struct jv *args, int nargs,
                        const char **kwn, struct jv *kwv, int nkw)
{
	struct jv *ea = ARG(0, "ensure_ascii"), *ind = ARG(1, "indent"),
	          *sep = ARG(2, "separators"), *sk = ARG(3, "sort_keys");
	int indent = -1;
	const char *is = ", ", *ks = ": ";
	struct jbuf b = {0};

	if (ind && ind->t != JV_NONE) {
		if (ind->t != JV_INT || ind->i < 0 || ind->i > 64)
			FAIL(st, "tojson: indent must be an integer in 0..64");
		indent = (int)ind->i;
		is = ",";
	}
	if (sep && sep->t != JV_NONE) {
		if (sep->t != JV_LIST || sep->l->n != 2 || sep->l->v[0].t != JV_STR ||
		    sep->l->v[1].t != JV_STR)
			FAIL(st, "tojson: separators must be a pair of strings");
		is = sep->l->v[0].s->p;
		ks = sep->l->v[1].s->p;
	}
	jv_json_to(
	    AR(st), &b, v, indent, is, ks,
	    (sk && jv_truthy(*sk) ? JJSON_SORT : 0) | (ea && jv_truthy(*ea) ? JJSON_ASCII : 0), 0);
	return jv_str(AR(st), b.p ? b.p : "", b.n);
}

static struct jv indent(struct jstate *st, struct jv v, struct jv *args, int nargs,
                        const char **kwn, struct jv *kwv, int nkw)
{
	struct jv *w = ARG(0, "width"), *first = ARG(1, "first"), *blank = ARG(2, "blank");
	struct jbuf ind = {0}, b = {0};
	struct jv s = v;
	size_t i = 0, n;
	int line = 0;

	if (v.t != JV_STR) /* jinja2 appends "\n" to it: a str only */
		FAIL(st, "indent: unsupported operand type(s) for +=: '%s' and 'str'",
		     jv_type_name(v));

	if (!w || w->t == JV_INT)
		for (int64_t k = 0; k < (w ? w->i : 4) && k < 256; k++)
			jbuf_put(AR(st), &ind, " ", 1);
	else if (w->t == JV_STR)
		jbuf_put(AR(st), &ind, w->s->p, w->s->n);
	if (!ind.p)
		jbuf_put(AR(st), &ind, "", 0);
	if (first && jv_truthy(*first))
		jbuf_put(AR(st), &b, ind.p, ind.n);
	n = s.s->n;
	while (i < n) { /* lines as str.splitlines() of s + "\n" */
		size_t e = i, next;

		while (e < n && !strchr("\n\r\v\f\x1c\x1d\x1e", s.s->p[e]))
			e++;
		next =
		    e < n ? e + 1 + (s.s->p[e] == '\r' && e + 1 < n && s.s->p[e + 1] == '\n') : n;
		if (line) {
			jbuf_put(AR(st), &b, "\n", 1);
			if (e > i || (blank && jv_truthy(*blank)))
				jbuf_put(AR(st), &b, ind.p, ind.n);
		}
		jbuf_put(AR(st), &b, s.s->p + i, e - i);
		line++;
		i = next;
	}
	return jv_str(AR(st), b.p ? b.p : "", b.n);
}

/* jinja2's title filter (not str.title): each chunk between runs of
 * whitespace, '-', '(', '{', '[' and '<' gets its first character upper
 * case and the rest lower case */
static struct jv title(struct jstate *st, struct jv s)
{
	struct jbuf b = {0};
	size_t i = 0, n = s.s->n;

	while (i < n) {
		size_t j = i;
		int delim = strchr(" \t\n\r\f\v-({[<", s.s->p[i]) != NULL && s.s->p[i];

		while (j < n &&
		       delim == (strchr(" \t\n\r\f\v-({[<", s.s->p[j]) != NULL && s.s->p[j]))
			j++;
		if (delim) {
			jbuf_put(AR(st), &b, s.s->p + i, j - i);
		} else {
			size_t k = jcp_len_at(s.s->p, n, i);
			struct jv head = jstr_case(st, jv_str(AR(st), s.s->p + i, k), 1),
			          rest =
			              jstr_case(st, jv_str(AR(st), s.s->p + i + k, j - i - k), 0);

			jbuf_put(AR(st), &b, head.s->p, head.s->n);
			jbuf_put(AR(st), &b, rest.s->p, rest.s->n);
		}
		i = j;
	}
	return jv_str(AR(st), b.p ? b.p : "", b.n);
}

static int is_gen_filter(const char *name)
{
	static const char *const gen[] = {"map",    "select", "reject", "selectattr", "rejectattr",
	                                  "unique", "items",  "batch",  NULL};

	for (int i = 0; gen[i]; i++)
		if (!strcmp(gen[i], name))
			return 1;
	return 0;
}

static struct jv filter(struct jstate *st, const char *name, struct jv v, struct jv *args,
                        int nargs, const char **kwn, struct jv *kwv, int nkw);

struct jv jbuiltin_filter(struct jstate *st, const char *name, struct jv v, struct jv *args,
                          int nargs, const char **kwn, struct jv *kwv, int nkw)
{
	struct lazy z = {name, v, args, kwv, kwn, nargs, nkw};

	return is_gen_filter(name) ? lazily(st, &z)
	                           : filter(st, name, v, args, nargs, kwn, kwv, nkw);
}

static struct jv gen_now(struct jstate *st, const struct lazy *z)
{
	return filter(st, z->name, z->v, z->args, z->nargs, z->kwn, z->kwv, z->nkw);
}

static struct jv filter(struct jstate *st, const char *name, struct jv v, struct jv *args,
                        int nargs, const char **kwn, struct jv *kwv, int nkw)
{
	struct jarena *a = AR(st);
	struct jv *x;

	if (!strcmp(name, "default") || !strcmp(name, "d")) {
		struct jv *dv = ARG(0, "default_value"), *bo = ARG(1, "boolean");

		if (v.t == JV_UNDEF || (bo && jv_truthy(*bo) && !jv_truthy(v)))
			return dv ? *dv : jv_str(a, "", 0);
		return v;
	}
	if (!strcmp(name, "length") || !strcmp(name, "count")) {
		switch (v.t) {
		case JV_UNDEF:
			return jv_int(0);
		case JV_STR:
			return jv_int((int64_t)jutf8_len(v.s->p, v.s->n));
		case JV_LIST:
			if (v.flag == JL_GEN)
				FAIL(st, "object of type 'generator' has no len()");
			return jv_int(v.l->n);
		case JV_DICT:
			return jv_int(v.d->n);
		default:
			FAIL(st, "object of type '%s' has no len()", jv_type_name(v));
		}
	}
	if (!strcmp(name, "string"))
		return jv_to_str(a, v);
	if (!strcmp(name, "safe")) /* Markup(v): a str */
		return jv_to_str(a, v);
	if (!strcmp(name, "tojson"))
		return tojson(st, v, args, nargs, kwn, kwv, nkw);
	if (!strcmp(name, "trim"))
		return jstrip(st, jv_to_str(a, v), ARG(0, "chars"), 1, 1);
	if (!strcmp(name, "title"))
		return title(st, jv_to_str(a, v));
	if (!strcmp(name, "lower") || !strcmp(name, "upper") || !strcmp(name, "capitalize"))
		return jstr_case(st, jv_to_str(a, v),
		                 name[0] == 'l'   ? 0
		                 : name[0] == 'u' ? 1
		                 : name[0] == 't' ? 2
		                                  : 3);
	if (!strcmp(name, "replace")) {
		if (!ARG(0, "old") || !ARG(1, "new"))
			FAIL(st, "replace needs old and new");
		return jreplace(st, jv_to_str(a, v), *ARG(0, "old"), *ARG(1, "new"),
		                ARG(2, "count"));
	}
	if (!strcmp(name, "join"))
		return jjoin(st, v, (x = ARG(0, "d")) ? *x : jv_str(a, "", 0), ARG(1, "attribute"));
	if (!strcmp(name, "first") || !strcmp(name, "last")) {
		struct jv l = jas_list(st, v);

		if (name[0] == 'l' && v.t == JV_LIST && v.flag == JL_GEN)
			FAIL(st, "'generator' object is not reversible");
		if (!l.l->n)
			return jv_undef();
		return name[0] == 'f' ? l.l->v[0] : l.l->v[l.l->n - 1];
	}
	if (!strcmp(name, "list")) {
		struct jv l = jas_list(st, v), r;

		if (v.t == JV_LIST && !v.flag)
			return v;
		r = jv_list(a, l.l->n); /* a tuple or a generator becomes a list */
		for (int i = 0; i < l.l->n; i++)
			jlist_push(a, r.l, l.l->v[i]);
		return r;
	}
	if (!strcmp(name, "items")) {
		struct jv r = jv_list(a, 4);

		if (v.t == JV_UNDEF)
			return r;
		if (v.t != JV_DICT)
			FAIL(st, "items expects a mapping, got %s", jv_type_name(v));
		for (int i = 0; i < v.d->n; i++) {
			struct jv t = jv_list(a, 2);

			t.flag = JL_TUPLE;
			jlist_push(a, t.l, v.d->k[i]);
			jlist_push(a, t.l, v.d->v[i]);
			jlist_push(a, r.l, t);
		}
		r.flag = JL_GEN;
		return r;
	}
	if (!strcmp(name, "dictsort")) { /* items sorted by key (by_value=true: by value) */
		struct jv *cs = ARG(0, "case_sensitive"), *by = ARG(1, "by"),
		          *rv = ARG(2, "reverse");
		struct jv items, idx = jv_int(by && by->t == JV_STR && !strcmp(by->s->p, "value"));

		if (v.t != JV_DICT || v.flag)
			FAIL(st, "dictsort expects a mapping, got %s", jv_type_name(v));
		items = jbuiltin_filter(st, "items", v, NULL, 0, NULL, NULL, 0);
		return sort(st, items, rv && jv_truthy(*rv), cs && jv_truthy(*cs), &idx);
	}
	if (!strcmp(name, "reverse")) {
		if (v.t == JV_STR) {
			struct jv l = jas_list(st, v);
			struct jbuf b = {0};

			for (int i = l.l->n - 1; i >= 0; i--)
				jbuf_put(a, &b, l.l->v[i].s->p, l.l->v[i].s->n);
			return jv_str(a, b.p ? b.p : "", b.n);
		} else {
			struct jv l = jas_list(st, v), r = jv_list(a, l.l->n);

			for (int i = l.l->n - 1; i >= 0; i--)
				jlist_push(a, r.l, l.l->v[i]);
			/* reversed(x): an iterator; a generator has none, jinja2 makes a list */
			r.flag = v.t == JV_LIST && v.flag == JL_GEN ? 0 : JL_GEN;
			return r;
		}
	}
	if (!strcmp(name, "sort")) {
		struct jv *rv = ARG(0, "reverse"), *cs = ARG(1, "case_sensitive");

		return sort(st, v, rv && jv_truthy(*rv), cs && jv_truthy(*cs), ARG(2, "attribute"));
	}
	if (!strcmp(name, "unique") || !strcmp(name, "min") || !strcmp(name, "max")) {
		struct jv *cs = ARG(0, "case_sensitive"), *at = ARG(1, "attribute");
		struct jv l = jas_list(st, v), r = jv_list(a, 4), keys = jv_list(a, 4);
		int c = cs && jv_truthy(*cs);

		for (int i = 0; i < l.l->n; i++) {
			struct jv k = fold(
			    st, at && at->t != JV_NONE ? attr_of(st, l.l->v[i], *at) : l.l->v[i],
			    c);
			int seen = 0;

			if (name[0] == 'u') {
				if ((k.t == JV_LIST && k.flag != JL_TUPLE) ||
				    (k.t == JV_DICT && !k.flag))
					FAIL(st, "unhashable type: '%s'", jv_type_name(k));
				for (int j = 0; j < keys.l->n && !seen; j++)
					seen = jv_eq(keys.l->v[j], k);
				if (!seen) {
					jlist_push(a, keys.l, k);
					jlist_push(a, r.l, l.l->v[i]);
				}
			} else {
				/* max keeps the first largest, min the first smallest, as
				 * Python's; comparing Undefined fails there too */
				int o = r.l->n ? jv_cmp(a, k, keys.l->v[0]) : 0;

				if (r.l->n && (name[1] == 'a' ? o <= 0 : o >= 0))
					continue;
				keys.l->n = r.l->n = 0;
				jlist_push(a, keys.l, k);
				jlist_push(a, r.l, l.l->v[i]);
			}
		}
		if (name[0] == 'u') {
			r.flag = JL_GEN;
			return r;
		}
		return r.l->n ? r.l->v[0] : jv_undef();
	}
	if (!strcmp(name, "sum")) {
		struct jv *at = ARG(0, "attribute"), *s0 = ARG(1, "start");
		struct jv l = jas_list(st, v), acc = s0 ? *s0 : jv_int(0);

		for (int i = 0; i < l.l->n; i++) {
			struct jv it =
			    at && at->t != JV_NONE ? attr_of(st, l.l->v[i], *at) : l.l->v[i];

			if ((acc.t != JV_INT && acc.t != JV_FLOAT) ||
			    (it.t != JV_INT && it.t != JV_FLOAT && it.t != JV_BOOL))
				FAIL(st, "sum of non-numbers");
			acc = acc.t == JV_FLOAT || it.t == JV_FLOAT
			          ? jv_float((acc.t == JV_FLOAT ? acc.f : (double)acc.i) +
			                     (it.t == JV_FLOAT ? it.f : (double)it.i))
			          : jv_int(jint_add(st, acc.i, it.i));
		}
		return acc;
	}
	if (!strcmp(name, "batch")) { /* lists of n items, the last filled with fill_with */
		struct jv *nv = ARG(0, "linecount"), *fill = ARG(1, "fill_with");
		struct jv l = jas_list(st, v), r = jv_list(a, 4), cur = jv_list(a, 4);

		if (!nv || (nv->t != JV_INT && nv->t != JV_BOOL) || nv->i < 1)
			FAIL(st, "batch needs a count of at least 1");
		for (int i = 0; i < l.l->n; i++) {
			jlist_push(a, cur.l, l.l->v[i]);
			if (cur.l->n == nv->i) {
				jlist_push(a, r.l, cur);
				cur = jv_list(a, 4);
			}
		}
		if (cur.l->n) {
			while (fill && fill->t != JV_NONE && cur.l->n < nv->i)
				jlist_push(a, cur.l, *fill);
			jlist_push(a, r.l, cur);
		}
		jstate_count(st, l.l->n);
		return r;
	}
	if (!strcmp(name, "map")) {
		struct jv l, r = jv_list(a, 4);
		struct jv *at = ARG(-1, "attribute");

		if (!jv_truthy(v)) /* jinja2: "if value:" before iterating */
			return r;
		l = jas_list(st, v);

		for (int i = 0; i < l.l->n; i++) {
			if (at) {
				struct jv y = attr_of(st, l.l->v[i], *at), *df = ARG(-1, "default");

				jlist_push(a, r.l, y.t == JV_UNDEF && df ? *df : y);
			} else {
				if (nargs < 1 || args[0].t != JV_STR)
					FAIL(st, "map needs a filter name or attribute=");
				jlist_push(a, r.l,
				           jbuiltin_filter(st, args[0].s->p, l.l->v[i], args + 1,
				                           nargs - 1, NULL, NULL, 0));
			}
		}
		jstate_count(st, l.l->n);
		r.flag = JL_GEN;
		return r;
	}
	if (!strcmp(name, "select") || !strcmp(name, "reject"))
		return select_(st, v, name[0] == 's', 0, args, nargs);
	if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr"))
		return select_(st, v, name[0] == 's', 1, args, nargs);
	if (!strcmp(name, "abs")) {
		if (v.t == JV_INT || v.t == JV_BOOL)
			return jv_int(v.i < 0 ? jint_sub(st, 0, v.i) : v.i);
		if (v.t == JV_FLOAT)
			return jv_float(fabs(v.f));
		FAIL(st, "bad operand type for abs(): '%s'", jv_type_name(v));
	}
	if ((!strcmp(name, "int") || !strcmp(name, "float")) && v.t == JV_UNDEF)
		FAIL(st, "%s of an undefined value", name); /* int(Undefined) raises */
	if (!strcmp(name, "int") || !strcmp(name, "float")) {
		struct jv *df = ARG(0, "default");
		int fl = name[0] == 'f';
		struct jv dflt = df ? *df : fl ? jv_float(0) : jv_int(0);

		if (v.t == JV_INT || v.t == JV_BOOL)
			return fl ? jv_float((double)v.i) : jv_int(v.i);
		if (v.t == JV_FLOAT)
			return fl ? v : jv_int(jint_of(st, v.f));
		if (v.t == JV_STR) {
			char *end;
			double d = strtod(v.s->p, &end);

			while (*end && jis_pyspace((unsigned char)*end))
				end++;
			if (end == v.s->p || *end)
				return dflt;
			return fl ? jv_float(d) : jv_int(jint_of(st, d));
		}
		return dflt;
	}
	if (!strcmp(name, "round")) {
		struct jv *p = ARG(0, "precision"), *m = ARG(1, "method");
		double f = v.t == JV_FLOAT ? v.f : (double)v.i, sc = 1;
		int64_t prec = p && p->t == JV_INT ? p->i : 0;

		if (v.t != JV_FLOAT && v.t != JV_INT && v.t != JV_BOOL)
			FAIL(st, "round expects a number");
		if (v.t != JV_FLOAT && !(m && m->t == JV_STR && strcmp(m->s->p, "common")))
			return jv_int(v.i); /* Python's round(int, n) is the int */
		for (int64_t i = 0; i < prec && i < 20; i++)
			sc *= 10;
		if (m && m->t == JV_STR && !strcmp(m->s->p, "floor"))
			f = floor(f * sc) / sc;
		else if (m && m->t == JV_STR && !strcmp(m->s->p, "ceil"))
			f = ceil(f * sc) / sc;
		else
			f = nearbyint(f * sc) / sc;
		return jv_float(f);
	}
	if (!strcmp(name, "indent"))
		return indent(st, v, args, nargs, kwn, kwv, nkw);
	if (!strcmp(name, "escape") || !strcmp(name, "e")) {
		struct jv s = jv_to_str(a, v);
		struct jbuf b = {0};

		for (size_t i = 0; i < s.s->n; i++) {
			char c = s.s->p[i];

			if (c == '&')
				jbuf_puts(a, &b, "&amp;");
			else if (c == '<')
				jbuf_puts(a, &b, "&lt;");
			else if (c == '>')
				jbuf_puts(a, &b, "&gt;");
			else if (c == '"')
				jbuf_puts(a, &b, "&#34;");
			else if (c == '\'')
				jbuf_puts(a, &b, "&#39;");
			else
				jbuf_put(a, &b, &c, 1);
		}
		return jv_str(a, b.p ? b.p : "", b.n);
	}
	FAIL(st, "no filter named '%s'", name);
}

/* ---- tests ---- */
int jbuiltin_test(struct jstate *st, const char *name, struct jv v, struct jv *args, int nargs)
{
	struct jv o = nargs > 0 ? args[0] : jv_undef();

	if (!strcmp(name, "defined"))
		return v.t != JV_UNDEF;
	if (!strcmp(name, "undefined"))
		return v.t == JV_UNDEF;
	if (!strcmp(name, "none"))
		return v.t == JV_NONE;
	if (!strcmp(name, "boolean"))
		return v.t == JV_BOOL;
	if (!strcmp(name, "true"))
		return v.t == JV_BOOL && v.i;
	if (!strcmp(name, "false"))
		return v.t == JV_BOOL && !v.i;
	if (!strcmp(name, "integer"))
		return v.t == JV_INT;
	if (!strcmp(name, "float"))
		return v.t == JV_FLOAT;
	if (!strcmp(name, "number"))
		return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
	if (!strcmp(name, "string"))
		return v.t == JV_STR;
	if (!strcmp(name, "mapping"))
		return v.t == JV_DICT && !v.flag;
	if (!strcmp(name, "iterable"))
		return v.t == JV_STR || v.t == JV_LIST || (v.t == JV_DICT && !v.flag) ||
		       v.t == JV_UNDEF;
	if (!strcmp(name, "sequence"))
		return v.t == JV_STR || (v.t == JV_LIST && v.flag != JL_GEN) ||
		       (v.t == JV_DICT && !v.flag) || v.t == JV_UNDEF;
	if (!strcmp(name, "callable")) /* jinja2's Undefined is callable (calling it fails) */
		return v.t == JV_MACRO || v.t == JV_FUNC || v.t == JV_UNDEF;
	if (!strcmp(name, "sameas")) {
		if (v.t != o.t)
			return 0;
		if (v.t == JV_NONE || v.t == JV_UNDEF || v.t == JV_BOOL)
			return v.t != JV_BOOL || v.i == o.i;
		return jv_eq(v, o) && (v.t == JV_INT || v.t == JV_FLOAT || v.l == o.l);
	}
	if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "=="))
		return jv_eq(v, o);
	if (!strcmp(name, "ne") || !strcmp(name, "!="))
		return !jv_eq(v, o);
	if (!strcmp(name, "lt") || !strcmp(name, "lessthan") || !strcmp(name, "<"))
		return jv_cmp(AR(st), v, o) < 0;
	if (!strcmp(name, "le") || !strcmp(name, "<="))
		return jv_cmp(AR(st), v, o) <= 0;
	if (!strcmp(name, "gt") || !strcmp(name, "greaterthan") || !strcmp(name, ">"))
		return jv_cmp(AR(st), v, o) > 0;
	if (!strcmp(name, "ge") || !strcmp(name, ">="))
		return jv_cmp(AR(st), v, o) >= 0;
	if (!strcmp(name, "in")) {
		if (o.t == JV_STR && v.t == JV_STR)
			return memmem(o.s->p, o.s->n, v.s->p, v.s->n) != NULL || !v.s->n;
		if (o.t == JV_LIST) {
			for (int i = 0; i < o.l->n; i++)
				if (jv_eq(o.l->v[i], v))
					return 1;
			return 0;
		}
		if (o.t == JV_DICT)
			return jdict_get(o.d, v) != NULL;
		FAIL(st, "'in' test on %s", jv_type_name(o));
	}
	if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
		/* value % d as Python computes it: bools are ints, floats allowed */
		struct jv d = name[0] == 'd' ? o : jv_int(2), m;

		if ((v.t != JV_INT && v.t != JV_BOOL && v.t != JV_FLOAT) ||
		    (d.t != JV_INT && d.t != JV_BOOL && d.t != JV_FLOAT))
			FAIL(st, "%s: unsupported operand types %s and %s", name, jv_type_name(v),
			     jv_type_name(d));
		m = jop_arith(st, JOP_MOD, v, d);
		return name[0] == 'o' ? jv_eq(m, jv_int(1)) : jv_eq(m, jv_int(0));
	}
	if (!strcmp(name, "lower") || !strcmp(name, "upper")) { /* str(v).islower() */
		struct jv s = jv_to_str(AR(st), v), f = {.t = JV_FUNC};
		struct jfunc fn = {name[0] == 'l' ? "islower" : "isupper", s};

		f.fn = &fn;
		return jv_truthy(jbuiltin_call(st, f.fn, NULL, 0, NULL, NULL, 0));
	}
	if (!strcmp(name, "escaped"))
		return 0;
	FAIL(st, "no test named '%s'", name);
}
