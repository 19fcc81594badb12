/*
 * core/jinja/jinja_ops.c — what the evaluator does to values, with Python's
 * and jinja2's meaning: attribute access (a dict's methods before its keys,
 * as Python's getattr finds them first; a namespace's attributes; loop.*),
 * subscripts (an item, else the attribute, as environment.getitem; negative
 * indexes; strings by code point), slices with steps, the arithmetic and
 * comparison operators (int stays int, / is float, // and % floor as Python
 * does, str and list + and *, ~ through str()), `in`, and what a for loop
 * iterates (a dict's keys, a string's code points, Undefined as empty).
 * A type Python refuses is an error naming the template line.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/jinja/jinja_internal.h"

#define FAIL(st, ...) jfail(&(st)->a, __VA_ARGS__)

/* ---- attribute and item access ---- */
static struct jv loop_attr(struct jstate *st, struct jloop *lp, const char *k)
{
	int n = lp->items->n, i = lp->i;

	if (!strcmp(k, "index"))
		return jv_int(i + 1);
	if (!strcmp(k, "index0"))
		return jv_int(i);
	if (!strcmp(k, "revindex"))
		return jv_int(n - i);
	if (!strcmp(k, "revindex0"))
		return jv_int(n - i - 1);
	if (!strcmp(k, "first"))
		return jv_bool(i == 0);
	if (!strcmp(k, "last"))
		return jv_bool(i == n - 1);
	if (!strcmp(k, "length"))
		return jv_int(n);
	if (!strcmp(k, "depth"))
		return jv_int(1);
	if (!strcmp(k, "depth0"))
		return jv_int(0);
	if (!strcmp(k, "previtem"))
		return i > 0 ? lp->items->v[i - 1] : jv_undef();
	if (!strcmp(k, "nextitem"))
		return i + 1 < n ? lp->items->v[i + 1] : jv_undef();
	if (!strcmp(k, "cycle")) {
		struct jv v = {.t = JV_LOOP, .lp = lp};

		return jbuiltin_method(st, v, "cycle");
	}
	return jv_undef();
}

struct jv jop_getattr(struct jstate *st, struct jv o, const char *k)
{
	struct jv *v;

	switch (o.t) {
	case JV_UNDEF:
		FAIL(st, "line %d: undefined value has no attribute '%s'", st->line, k);
	case JV_DICT:
		if (o.flag)
			return (v = jdict_gets(o.d, k)) ? *v : jv_undef();
		{
			struct jv m = jbuiltin_method(st, o, k);

			if (m.t != JV_UNDEF)
				return m;
		}
		return (v = jdict_gets(o.d, k)) ? *v : jv_undef();
	case JV_LOOP:
		return loop_attr(st, o.lp, k);
	default:
		return jbuiltin_method(st, o, k);
	}
}

struct jv jop_getitem(struct jstate *st, struct jv o, struct jv k)
{
	struct jv *v;

	switch (o.t) {
	case JV_UNDEF:
		FAIL(st, "line %d: undefined value has no item", st->line);
	case JV_DICT:
		if ((v = jdict_get(o.d, k)))
			return *v;
		break;
	case JV_LIST:
		if (o.flag == JL_GEN)
			return jv_undef(); /* a generator has no items */
		if (k.t == JV_INT || k.t == JV_BOOL) {
			int64_t i = k.i < 0 ? k.i + o.l->n : k.i;

			return i >= 0 && i < o.l->n ? o.l->v[i] : jv_undef();
		}
		break;
	case JV_STR:
		if (k.t == JV_INT || k.t == JV_BOOL) {
			size_t len = jutf8_len(o.s->p, o.s->n), a, b;
			int64_t i = k.i < 0 ? k.i + (int64_t)len : k.i;

			if (i < 0 || i >= (int64_t)len)
				return jv_undef();
			a = jutf8_off(o.s->p, o.s->n, i);
			b = jutf8_off(o.s->p, o.s->n, i + 1);
			return jv_str(&st->a, o.s->p + a, b - a);
		}
		break;
	case JV_LOOP:
		if (k.t == JV_STR)
			return loop_attr(st, o.lp, k.s->p);
		break;
	default:
		break;
	}
	if (k.t == JV_STR && o.t != JV_DICT)
		return jop_getattr(st, o, k.s->p);
	if (k.t == JV_STR && o.t == JV_DICT && !o.flag)
		return jbuiltin_method(st, o, k.s->p);
	return jv_undef();
}

/* Python's slice indices for a sequence of len items */
static int slice_idx(struct jstate *st, const struct jv *x, int64_t dflt, int64_t len, int64_t step,
                     int64_t *out)
{
	int64_t i;

	if (!x || x->t == JV_NONE) {
		*out = dflt;
		return 0;
	}
	if (x->t != JV_INT && x->t != JV_BOOL)
		FAIL(st, "line %d: slice indices must be integers", st->line);
	i = x->i;
	if (i < 0) {
		i += len;
		if (i < 0)
			i = step < 0 ? -1 : 0;
	} else if (i >= len) {
		i = step < 0 ? len - 1 : len;
	}
	*out = i;
	return 0;
}

struct jv jop_slice(struct jstate *st, struct jv o, const struct jv *a, const struct jv *b,
                    const struct jv *c)
{
	int64_t len, step = 1, lo, hi;
	struct jv r;

	if (c && c->t != JV_NONE) {
		if (c->t != JV_INT)
			FAIL(st, "line %d: slice step must be an integer", st->line);
		step = c->i;
		if (!step)
			FAIL(st, "line %d: slice step cannot be zero", st->line);
	}
	if (o.t == JV_LIST && o.flag == JL_GEN)
		FAIL(st, "line %d: 'generator' object is not subscriptable", st->line);
	if (o.t == JV_LIST)
		len = o.l->n;
	else if (o.t == JV_STR)
		len = (int64_t)jutf8_len(o.s->p, o.s->n);
	else if (o.t == JV_UNDEF)
		FAIL(st, "line %d: cannot slice an undefined value", st->line);
	else
		FAIL(st, "line %d: cannot slice %s", st->line, jv_type_name(o));
	slice_idx(st, a, step < 0 ? len - 1 : 0, len, step, &lo);
	slice_idx(st, b, step < 0 ? -1 : len, len, step, &hi);
	if (o.t == JV_LIST) {
		r = jv_list(&st->a, 4);
		r.flag = o.flag;
		for (int64_t i = lo; step > 0 ? i < hi : i > hi;
		     i = __builtin_add_overflow(i, step, &i) ? hi : i)
			jlist_push(&st->a, r.l, o.l->v[i]);
		return r;
	}
	{
		struct jbuf buf = {0};
		size_t *off = jarena_alloc(&st->a, sizeof(size_t) * (size_t)(len + 1)), p = 0;

		for (int64_t i = 0; i <= len; i++) {
			off[i] = p;
			if (p < o.s->n) {
				p++;
				while (p < o.s->n && ((unsigned char)o.s->p[p] & 0xc0) == 0x80)
					p++;
			}
		}
		for (int64_t i = lo; step > 0 ? i < hi : i > hi;
		     i = __builtin_add_overflow(i, step, &i) ? hi : i)
			jbuf_put(&st->a, &buf, o.s->p + off[i], off[i + 1] - off[i]);
		return jv_str(&st->a, buf.p ? buf.p : "", buf.n);
	}
}

/* ---- operators ---- */
static int is_num(struct jv v)
{
	return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT;
}
static double num(struct jv v)
{
	return v.t == JV_FLOAT ? v.f : (double)v.i;
}

static int contains(struct jstate *st, struct jv hay, struct jv x)
{
	switch (hay.t) {
	case JV_STR:
		if (x.t != JV_STR)
			FAIL(st, "line %d: 'in <string>' requires string as left operand, not %s",
			     st->line, jv_type_name(x));
		return !x.s->n || memmem(hay.s->p, hay.s->n, x.s->p, x.s->n) != NULL;
	case JV_LIST:
		jgen_check(st, hay);
		for (int i = 0; i < hay.l->n; i++)
			if (jv_eq(hay.l->v[i], x))
				return 1;
		return 0;
	case JV_DICT:
		if (x.t == JV_LIST && !x.flag)
			FAIL(st, "line %d: unhashable type: 'list'", st->line);
		if (x.t == JV_DICT && !x.flag)
			FAIL(st, "line %d: unhashable type: 'dict'", st->line);
		return jdict_get(hay.d, x) != NULL;
	case JV_UNDEF:
		return 0;
	default:
		FAIL(st, "line %d: argument of type '%s' is not iterable", st->line,
		     jv_type_name(hay));
	}
}

/* Python's float floor division (float_floor_div): through fmod, so that
 * 1 // 0.1 is 9.0 as in Python, not floor(1 / 0.1) = 10.0 */
static double py_floordiv(double vx, double wx)
{
	double mod = fmod(vx, wx), div = (vx - mod) / wx, fd;

	if (mod != 0 && ((wx < 0) != (mod < 0)))
		div -= 1.0;
	if (div != 0) {
		fd = floor(div);
		if (div - fd > 0.5)
			fd += 1.0;
	} else {
		fd = copysign(0, vx / wx);
	}
	return fd;
}

/* str % args, Python's printf-style formatting for %s %r %d %i %%: one
 * value or a tuple of them; other conversions are refused */
static struct jv percent(struct jstate *st, struct jv f, struct jv x)
{
	struct jarena *ar = &st->a;
	struct jbuf b = {0};
	int k = 0, n = x.t == JV_LIST && x.flag == JL_TUPLE ? x.l->n : 1;

	if (!memchr(f.s->p, '%', f.s->n)) {
		if (x.t == JV_DICT || x.t == JV_UNDEF || (x.t == JV_LIST && x.flag == 0) ||
		    (x.t == JV_LIST && x.flag == JL_TUPLE && !x.l->n))
			return f; /* a mapping-like argument and no conversion: Python allows it */
		FAIL(st, "line %d: not all arguments converted during string formatting", st->line);
	}
	for (size_t i = 0; i < f.s->n; i++) {
		char c = f.s->p[i], t;
		struct jv v;

		if (c != '%') {
			jbuf_put(ar, &b, &c, 1);
			continue;
		}
		t = ++i < f.s->n ? f.s->p[i] : 0;
		if (t == '%') {
			jbuf_put(ar, &b, "%", 1);
			continue;
		}
		if (t != 's' && t != 'r' && t != 'd' && t != 'i')
			FAIL(st, "line %d: string formatting: only %%s %%r %%d %%i are supported",
			     st->line);
		if (k >= n)
			FAIL(st, "line %d: not enough arguments for format string", st->line);
		v = x.t == JV_LIST && x.flag == JL_TUPLE ? x.l->v[k] : x;
		k++;
		if (t == 's')
			jv_str_to(ar, &b, v);
		else if (t == 'r')
			jv_repr_to(ar, &b, v);
		else if (v.t == JV_INT || v.t == JV_BOOL)
			jv_str_to(ar, &b, jv_int(v.i));
		else if (v.t == JV_FLOAT)
			jv_str_to(ar, &b, jv_int(jint_of(st, v.f)));
		else
			FAIL(st, "line %d: %%d format: a real number is required, not %s", st->line,
			     jv_type_name(v));
	}
	if (k < n)
		FAIL(st, "line %d: not all arguments converted during string formatting", st->line);
	return jv_str(ar, b.p ? b.p : "", b.n);
}

struct jv jop_arith(struct jstate *st, int op, struct jv a, struct jv b)
{
	struct jarena *ar = &st->a;

	if (op == JOP_CONCAT) {
		struct jbuf buf = {0};

		jv_str_to(ar, &buf, a);
		jv_str_to(ar, &buf, b);
		return jv_str(ar, buf.p ? buf.p : "", buf.n);
	}
	if (is_num(a) && is_num(b)) {
		int fl = a.t == JV_FLOAT || b.t == JV_FLOAT;

		switch (op) {
		case JOP_ADD:
			return fl ? jv_float(num(a) + num(b)) : jv_int(jint_add(st, a.i, b.i));
		case JOP_SUB:
			return fl ? jv_float(num(a) - num(b)) : jv_int(jint_sub(st, a.i, b.i));
		case JOP_MUL:
			return fl ? jv_float(num(a) * num(b)) : jv_int(jint_mul(st, a.i, b.i));
		case JOP_DIV:
			if (num(b) == 0)
				FAIL(st, "line %d: division by zero", st->line);
			return jv_float(num(a) / num(b));
		case JOP_FLOORDIV:
			if (num(b) == 0)
				FAIL(st, "line %d: division by zero", st->line);
			if (fl)
				return jv_float(py_floordiv(num(a), num(b)));
			{
				int64_t q;

				if (a.i == INT64_MIN && b.i == -1)
					FAIL(st, "line %d: integer overflow (beyond 64 bits)",
					     st->line);
				q = a.i / b.i;

				if ((a.i % b.i != 0) && ((a.i < 0) != (b.i < 0)))
					q--;
				return jv_int(q);
			}
		case JOP_MOD:
			if (num(b) == 0)
				FAIL(st, "line %d: modulo by zero", st->line);
			if (fl) {
				double m = fmod(num(a), num(b));

				if (m != 0 && ((m < 0) != (num(b) < 0)))
					m += num(b);
				else if (m == 0)
					m = copysign(
					    0,
					    num(b)); /* Python: a zero takes the divisor's sign */
				return jv_float(m);
			}
			{
				int64_t m = b.i == -1 ? 0 : a.i % b.i;

				if (m != 0 && ((m < 0) != (b.i < 0)))
					m += b.i;
				return jv_int(m);
			}
		case JOP_POW:
			if (!fl && b.i >= 0) {
				int64_t r = 1;

				for (int64_t i = 0; i < b.i && i < 64; i++)
					r = jint_mul(st, r, a.i);
				return jv_int(r);
			}
			if (num(a) == 0 && num(b) < 0)
				FAIL(st, "line %d: 0.0 cannot be raised to a negative power",
				     st->line);
			return jv_float(pow(num(a), num(b)));
		}
	}
	if (op == JOP_MOD && a.t == JV_STR)
		return percent(st, a, b);
	if (op == JOP_ADD && a.t == JV_STR && b.t == JV_STR) {
		struct jbuf buf = {0};

		jbuf_put(ar, &buf, a.s->p, a.s->n);
		jbuf_put(ar, &buf, b.s->p, b.s->n);
		return jv_str(ar, buf.p ? buf.p : "", buf.n);
	}
	if (op == JOP_MUL && (b.t == JV_STR || (b.t == JV_LIST && b.flag != JL_GEN)) &&
	    (a.t == JV_INT || a.t == JV_BOOL))
		return jop_arith(st, op, b, a); /* 3 * 'ab' as 'ab' * 3 */
	if (op == JOP_ADD && a.t == JV_LIST && b.t == JV_LIST && a.flag != JL_GEN &&
	    a.flag == b.flag) { /* list + list, tuple + tuple */
		struct jv r = jv_list(ar, a.l->n + b.l->n);

		r.flag = a.flag;
		for (int i = 0; i < a.l->n; i++)
			jlist_push(ar, r.l, a.l->v[i]);
		for (int i = 0; i < b.l->n; i++)
			jlist_push(ar, r.l, b.l->v[i]);
		return r;
	}
	if (op == JOP_MUL && (a.t == JV_STR || (a.t == JV_LIST && a.flag != JL_GEN)) &&
	    (b.t == JV_INT || b.t == JV_BOOL)) {
		struct jv r = a.t == JV_STR ? jv_str(ar, "", 0) : jv_list(ar, 4);

		r.flag = a.t == JV_LIST ? a.flag : 0; /* a tuple stays a tuple */
		struct jbuf buf = {0};

		jstate_count(st, b.i > 0 ? (long)b.i : 0);
		for (int64_t i = 0; i < b.i; i++) {
			if (a.t == JV_STR)
				jbuf_put(ar, &buf, a.s->p, a.s->n);
			else
				for (int j = 0; j < a.l->n; j++)
					jlist_push(ar, r.l, a.l->v[j]);
		}
		return a.t == JV_STR ? jv_str(ar, buf.p ? buf.p : "", buf.n) : r;
	}
	if (a.t == JV_UNDEF || b.t == JV_UNDEF)
		FAIL(st, "line %d: an operand is undefined", st->line);
	FAIL(st, "line %d: unsupported operand types for an operator: '%s' and '%s'", st->line,
	     jv_type_name(a), jv_type_name(b));
}

int jop_compare(struct jstate *st, int op, struct jv a, struct jv b)
{
	switch (op) {
	case JOP_EQ:
		return jv_eq(a, b);
	case JOP_NE:
		return !jv_eq(a, b);
	case JOP_IN:
		return contains(st, b, a);
	case JOP_NOTIN:
		return !contains(st, b, a);
	}
	{
		int c = jv_cmp(&st->a, a, b);

		switch (op) {
		case JOP_LT:
			return c < 0;
		case JOP_LE:
			return c <= 0;
		case JOP_GT:
			return c > 0;
		default:
			return c >= 0;
		}
	}
}

struct jv jop_iterable(struct jstate *st, struct jv v)
{
	struct jv r;

	switch (v.t) {
	case JV_LIST:
		jgen_check(st, v);
		return v;
	case JV_UNDEF:
		return jv_list(&st->a, 1);
	case JV_DICT:
		if (v.flag)
			break;
		r = jv_list(&st->a, v.d->n);
		for (int i = 0; i < v.d->n; i++)
			jlist_push(&st->a, r.l, v.d->k[i]);
		return r;
	case JV_STR:
		r = jv_list(&st->a, 4);
		for (size_t p = 0; p < v.s->n;) {
			size_t q = p + 1;

			while (q < v.s->n && ((unsigned char)v.s->p[q] & 0xc0) == 0x80)
				q++;
			jlist_push(&st->a, r.l, jv_str(&st->a, v.s->p + p, q - p));
			p = q;
		}
		return r;
	default:
		break;
	}
	FAIL(st, "line %d: '%s' object is not iterable", st->line, jv_type_name(v));
}
