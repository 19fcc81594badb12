/*
 * core/jinja/jinja_eval.c — runs the AST: statements write to the current
 * output buffer, expressions return values (jinja_internal.h).
 *
 * Scopes follow jinja2's: a chain of struct scope, innermost first, then
 * the render's variables (the JSON context), then the globals (range,
 * namespace, raise_exception, strftime_now, dict). {% set %} binds in the
 * innermost scope; {% if %} opens none, each iteration of a {% for %} opens
 * a fresh one (a set inside a loop is gone after it, and from one iteration
 * to the next, which is why templates use namespace()), a macro call opens
 * one under the scope the macro was defined in, {% with %} opens one.
 * Names are looked up innermost first, so a body reads an outer value until
 * it sets its own.
 *
 * Limits (struct coli_jinja_limits): loop iterations, range() items and
 * macro calls count as steps; macro nesting and expression depth are
 * capped; the output buffer and the arena are capped. Any breach, a runtime
 * type error, or raise_exception(msg) longjmps to coli_jinja_render with a
 * message "line N: ...".
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/jinja/jinja_internal.h"

struct coli_jinja {
	struct jarena a;
	struct jnode *root;
};

struct scope {
	struct scope *up;
	int n, cap;
	const char **k;
	struct jv *v;
};

static struct scope *scope_new(struct jstate *st, struct scope *up)
{
	struct scope *s = jarena_alloc(&st->a, sizeof(*s));

	memset(s, 0, sizeof(*s));
	s->up = up;
	return s;
}

static void scope_set(struct jstate *st, struct scope *s, const char *k, struct jv v)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->k[i], k)) {
			s->v[i] = v;
			return;
		}
	if (s->n == s->cap) {
		int cap = s->cap ? s->cap * 2 : 8;
		const char **nk = jarena_alloc(&st->a, sizeof(*nk) * (size_t)cap);
		struct jv *nv = jarena_alloc(&st->a, sizeof(*nv) * (size_t)cap);

		if (s->n) {
			memcpy(nk, s->k, sizeof(*nk) * (size_t)s->n);
			memcpy(nv, s->v, sizeof(*nv) * (size_t)s->n);
		}
		s->k = nk;
		s->v = nv;
		s->cap = cap;
	}
	s->k[s->n] = k;
	s->v[s->n++] = v;
}

static struct jv lookup(struct jstate *st, struct scope *s, const char *k)
{
	struct jv *v;

	if (!*k)
		return st->hole;
	for (; s; s = s->up)
		for (int i = s->n - 1; i >= 0; i--)
			if (!strcmp(s->k[i], k))
				return s->v[i];
	if ((v = jdict_gets(st->ctx, k)))
		return *v;
	return jbuiltin_global(st, k);
}

#define FAIL(st, ...) jfail(&(st)->a, __VA_ARGS__)

static struct jv eval(struct jstate *st, struct scope *s, const struct jnode *n);
static void exec(struct jstate *st, struct scope *s, const struct jnode *n);

/* ---- calls ---- */
struct args {
	struct jv *v, *kwv;
	const char **kwn;
	int n, nkw;
};

static void eval_args(struct jstate *st, struct scope *s, const struct jnode *n, struct args *a)
{
	a->n = n->n;
	a->nkw = n->n2;
	a->kwn = n->names;
	a->v = jarena_alloc(&st->a, sizeof(struct jv) * (size_t)(n->n + 1));
	a->kwv = jarena_alloc(&st->a, sizeof(struct jv) * (size_t)(n->n2 + 1));
	for (int i = 0; i < n->n; i++)
		a->v[i] = eval(st, s, n->list[i]);
	for (int i = 0; i < n->n2; i++)
		a->kwv[i] = eval(st, s, n->list2[i]);
}

static struct jv call_macro(struct jstate *st, struct jv mv, struct jv *args, int nargs,
                            const char **kwn, struct jv *kwv, int nkw)
{
	const struct jnode *m = mv.m->node;
	struct scope *s = scope_new(st, mv.m->closure);
	struct jbuf buf = {.max = st->max_output}, *saved = st->out;
	int line = st->line, ctl = st->ctl;

	if (++st->depth > st->max_depth)
		FAIL(st, "line %d: macro calls nested deeper than %d", st->line, st->max_depth);
	jstate_count(st, 1);
	if (nargs > m->nnames)
		FAIL(st, "line %d: macro '%s' takes not more than %d argument(s)", st->line,
		     m->kind == N_MACRO ? m->s : "caller", m->nnames);
	for (int i = 0; i < nkw; i++) {
		int k = -1;

		for (int j = 0; j < m->nnames; j++)
			if (!strcmp(m->names[j], kwn[i]))
				k = j;
		if (k < 0)
			FAIL(st, "line %d: macro '%s' takes no keyword argument '%s'", st->line,
			     m->kind == N_MACRO ? m->s : "caller", kwn[i]);
		if (k < nargs)
			FAIL(st, "line %d: macro got multiple values for argument '%s'", st->line,
			     kwn[i]);
	}
	for (int j = 0; j < m->nnames; j++) {
		struct jv v = jv_undef();
		int given = 0;

		if (j < nargs) {
			v = args[j];
			given = 1;
		}
		for (int i = 0; i < nkw; i++)
			if (!strcmp(m->names[j], kwn[i])) {
				v = kwv[i];
				given = 1;
			}
		if (!given && m->list[j])
			v = eval(st, s, m->list[j]);
		scope_set(st, s, m->names[j], v);
	}
	if (mv.m->caller) {
		struct jv c = {.t = JV_MACRO, .m = mv.m->caller};

		scope_set(st, s, "caller", c);
	}
	st->out = &buf;
	exec(st, s, m->b);
	st->out = saved;
	st->ctl = ctl;
	st->line = line;
	st->depth--;
	return jv_str(&st->a, buf.p ? buf.p : "", buf.n);
}

static struct jv call(struct jstate *st, struct scope *s, const struct jnode *n)
{
	struct jv f = eval(st, s, n->a);
	struct args a;

	eval_args(st, s, n, &a);
	st->line = n->line;
	if (f.t == JV_MACRO)
		return call_macro(st, f, a.v, a.n, a.kwn, a.kwv, a.nkw);
	if (f.t == JV_FUNC)
		return jbuiltin_call(st, f.fn, a.v, a.n, a.kwn, a.kwv, a.nkw);
	if (f.t == JV_UNDEF)
		FAIL(st, "line %d: '%s' is undefined", n->line,
		     n->a->kind == E_NAME   ? n->a->s
		     : n->a->kind == E_ATTR ? n->a->s
		                            : "callee");
	FAIL(st, "line %d: '%s' object is not callable", n->line, jv_type_name(f));
}

/* ---- expressions ---- */
static struct jv eval_expr(struct jstate *st, struct scope *s, const struct jnode *n)
{
	struct jv a, b;

	st->line = n->line;
	switch (n->kind) {
	case E_CONST:
		return n->val;
	case E_NAME:
		return lookup(st, s, n->s);
	case E_LIST:
	case E_TUPLE:
		a = jv_list(&st->a, n->n);
		a.flag = n->kind == E_TUPLE;
		for (int i = 0; i < n->n; i++)
			jlist_push(&st->a, a.l, eval(st, s, n->list[i]));
		return a;
	case E_DICT:
		a = jv_dict(&st->a, n->n);
		for (int i = 0; i < n->n; i++) {
			struct jv k = eval(st, s, n->list[i]);

			jdict_set(&st->a, a.d, k, eval(st, s, n->list2[i]));
		}
		return a;
	case E_ATTR:
		a = eval(st, s, n->a);
		st->line = n->line;
		return jop_getattr(st, a, n->s);
	case E_ITEM:
		a = eval(st, s, n->a);
		b = eval(st, s, n->b);
		st->line = n->line;
		return jop_getitem(st, a, b);
	case E_SLICE: {
		struct jv x[3];

		a = eval(st, s, n->a);
		if (n->b)
			x[0] = eval(st, s, n->b);
		if (n->c)
			x[1] = eval(st, s, n->c);
		if (n->d)
			x[2] = eval(st, s, n->d);
		st->line = n->line;
		return jop_slice(st, a, n->b ? &x[0] : NULL, n->c ? &x[1] : NULL,
		                 n->d ? &x[2] : NULL);
	}
	case E_CALL:
		return call(st, s, n);
	case E_FILTER: {
		struct args ar;

		a = eval(st, s, n->a);
		eval_args(st, s, n, &ar);
		st->line = n->line;
		return jbuiltin_filter(st, n->s, a, ar.v, ar.n, ar.kwn, ar.kwv, ar.nkw);
	}
	case E_TEST: {
		struct args ar;
		int r;

		a = eval(st, s, n->a);
		eval_args(st, s, n, &ar);
		st->line = n->line;
		r = jbuiltin_test(st, n->s, a, ar.v, ar.n);
		return jv_bool(n->op ? !r : r);
	}
	case E_NEG:
	case E_POS:
		a = eval(st, s, n->a);
		if (a.t == JV_INT || a.t == JV_BOOL)
			return jv_int(n->kind == E_NEG ? jint_sub(st, 0, a.i) : a.i);
		if (a.t == JV_FLOAT)
			return jv_float(n->kind == E_NEG ? -a.f : a.f);
		FAIL(st, "line %d: bad operand type for unary %c: '%s'", n->line,
		     n->kind == E_NEG ? '-' : '+', jv_type_name(a));
	case E_NOT:
		return jv_bool(!jv_truthy(eval(st, s, n->a)));
	case E_AND:
		a = eval(st, s, n->a);
		return jv_truthy(a) ? eval(st, s, n->b) : a;
	case E_OR:
		a = eval(st, s, n->a);
		return jv_truthy(a) ? a : eval(st, s, n->b);
	case E_BIN:
		a = eval(st, s, n->a);
		b = eval(st, s, n->b);
		st->line = n->line;
		return jop_arith(st, n->op, a, b);
	case E_CMP:
		a = eval(st, s, n->list[0]);
		for (int i = 1; i < n->n; i++) {
			b = eval(st, s, n->list[i]);
			st->line = n->line;
			if (!jop_compare(st, n->ops[i - 1], a, b))
				return jv_bool(0);
			a = b;
		}
		return jv_bool(1);
	case E_COND:
		if (jv_truthy(eval(st, s, n->a)))
			return eval(st, s, n->b);
		return n->c ? eval(st, s, n->c) : jv_undef();
	default:
		FAIL(st, "line %d: not an expression", n->line);
	}
}

/* ---- statements ---- */

static void bind_targets(struct jstate *st, struct scope *s, const struct jnode *n, struct jv v)
{
	if (n->nnames == 1) {
		scope_set(st, s, n->names[0], v);
		return;
	}
	if (v.t == JV_STR || (v.t == JV_DICT && !v.flag))
		v = jop_iterable(st, v);
	if (v.t != JV_LIST)
		FAIL(st, "line %d: cannot unpack a %s", n->line, jv_type_name(v));
	if (v.l->n != n->nnames)
		FAIL(st, "line %d: expected %d values to unpack, got %d", n->line, n->nnames,
		     v.l->n);
	for (int i = 0; i < n->nnames; i++)
		scope_set(st, s, n->names[i], v.l->v[i]);
}

static void exec_for(struct jstate *st, struct scope *s, const struct jnode *n)
{
	struct jv all = jop_iterable(st, eval(st, s, n->a)), items;
	struct jloop *lp = jarena_alloc(&st->a, sizeof(*lp));
	struct jv loopv = {.t = JV_LOOP, .lp = lp};

	/* One scope, emptied at each iteration: a fresh scope each time for the
	 * template (jinja2's semantics), without an allocation per iteration. */
	struct scope *f = scope_new(st, s);

	if (n->d) {
		items = jv_list(&st->a, all.l->n);
		for (int i = 0; i < all.l->n; i++) {
			f->n = 0;
			jstate_count(st, 1);
			bind_targets(st, f, n, all.l->v[i]);
			if (jv_truthy(eval(st, f, n->d)))
				jlist_push(&st->a, items.l, all.l->v[i]);
		}
	} else {
		items = all;
	}
	lp->items = items.l;
	for (lp->i = 0; lp->i < items.l->n; lp->i++) {
		f->n = 0;
		jstate_count(st, 1);
		bind_targets(st, f, n, items.l->v[lp->i]);
		scope_set(st, f, "loop", loopv);
		exec(st, f, n->b);
		if (st->ctl == 1) {
			st->ctl = 0;
			break;
		}
		st->ctl = 0;
	}
	if (!items.l->n && n->c)
		exec(st, s, n->c);
}

static struct jv capture(struct jstate *st, struct scope *s, const struct jnode *body)
{
	struct jbuf buf = {.max = st->max_output}, *saved = st->out;

	st->out = &buf;
	exec(st, s, body);
	st->out = saved;
	return jv_str(&st->a, buf.p ? buf.p : "", buf.n);
}

static struct jv apply_chain(struct jstate *st, struct scope *s, const struct jnode *chain,
                             struct jv v)
{
	struct jv saved = st->hole, r;

	if (!chain)
		return v;
	st->hole = v;
	r = eval(st, s, chain);
	st->hole = saved;
	return r;
}

static void exec_stmt(struct jstate *st, struct scope *s, const struct jnode *n)
{
	st->line = n->line;
	switch (n->kind) {
	case N_BODY:
		for (int i = 0; i < n->n && !st->ctl; i++)
			exec(st, s, n->list[i]);
		return;
	case N_TEXT:
		jbuf_put(&st->a, st->out, n->s, (size_t)n->val.i);
		return;
	case N_OUT: {
		struct jv v = eval(st, s, n->a);

		jv_str_to(&st->a, st->out, v);
		return;
	}
	case N_IF:
		if (jv_truthy(eval(st, s, n->a)))
			exec(st, s, n->b);
		else if (n->c)
			exec(st, s, n->c);
		return;
	case N_FOR:
		exec_for(st, s, n);
		return;
	case N_SET: {
		struct jv v = eval(st, s, n->a);

		if (n->s2) {
			struct jv ns = lookup(st, s, n->s);

			st->line = n->line;
			if (ns.t != JV_DICT || !ns.flag)
				FAIL(st,
				     "line %d: can only set attributes of a namespace() ('%s' is "
				     "%s)",
				     n->line, n->s, jv_type_name(ns));
			jdict_set(&st->a, ns.d, jv_cstr(&st->a, n->s2), v);
			return;
		}
		bind_targets(st, s, n, v);
		return;
	}
	case N_SETBLOCK:
		scope_set(st, s, n->s, apply_chain(st, s, n->a, capture(st, s, n->b)));
		return;
	case N_MACRO: {
		struct jmacro *m = jarena_alloc(&st->a, sizeof(*m));
		struct jv v = {.t = JV_MACRO, .m = m};

		m->node = n;
		m->caller = NULL;
		m->closure = s;
		scope_set(st, s, n->s, v);
		return;
	}
	case N_CALLBLK: {
		struct jv f = eval(st, s, n->a->a);
		struct jmacro *m, *c;
		struct args a;
		struct jv r;

		if (f.t != JV_MACRO)
			FAIL(st, "line %d: {%% call %%} of something that is not a macro", n->line);
		c = jarena_alloc(&st->a, sizeof(*c));
		c->node = n;
		c->caller = NULL;
		c->closure = s;
		m = jarena_alloc(&st->a, sizeof(*m));
		*m = *f.m;
		m->caller = c;
		f.m = m;
		eval_args(st, s, n->a, &a);
		r = call_macro(st, f, a.v, a.n, a.kwn, a.kwv, a.nkw);
		jbuf_put(&st->a, st->out, r.s->p, r.s->n);
		return;
	}
	case N_FILTBLK:
		jv_str_to(&st->a, st->out, apply_chain(st, s, n->a, capture(st, s, n->b)));
		return;
	case N_WITH: {
		struct scope *f = scope_new(st, s);

		for (int i = 0; i < n->n; i++)
			scope_set(st, f, n->names[i], eval(st, s, n->list[i]));
		exec(st, f, n->b);
		return;
	}
	case N_BREAK:
		st->ctl = 1;
		return;
	case N_CONTINUE:
		st->ctl = 2;
		return;
	default:
		FAIL(st, "line %d: not a statement", n->line);
	}
}

/* Every expression and statement goes through these two, which bound the
 * C stack a render uses: MAX_FRAMES nested evaluations (nested macro calls
 * times the nesting inside each) whatever the template. */
#define MAX_FRAMES 4000

static struct jv eval(struct jstate *st, struct scope *s, const struct jnode *n)
{
	struct jv v;

	if (++st->frames > MAX_FRAMES)
		FAIL(st, "line %d: template nested too deeply at run time", n->line);
	v = eval_expr(st, s, n);
	st->frames--;
	return v;
}

static void exec(struct jstate *st, struct scope *s, const struct jnode *n)
{
	if (++st->frames > MAX_FRAMES)
		FAIL(st, "line %d: template nested too deeply at run time", n->line);
	exec_stmt(st, s, n);
	st->frames--;
}

/* ---- the public entries ---- */
int coli_jinja_parse(const char *src, size_t len, coli_jinja_t **out, char *err, size_t errlen)
{
	coli_jinja_t *t = calloc(1, sizeof(*t));
	jmp_buf jb;
	struct jtok *toks;

	*out = NULL;
	if (err && errlen)
		err[0] = 0;
	if (!t)
		return -ENOMEM;
	t->a.cap = 64u << 20;
	t->a.fail = &jb;
	t->a.err = err;
	t->a.errlen = errlen;
	if (setjmp(jb)) {
		jarena_free(&t->a);
		free(t);
		return -EINVAL;
	}
	jlex(&t->a, src, len, &toks);
	t->root = jparse(&t->a, toks);
	t->a.fail = NULL;
	t->a.err = NULL;
	*out = t;
	return 0;
}

void coli_jinja_free(coli_jinja_t *t)
{
	if (!t)
		return;
	jarena_free(&t->a);
	free(t);
}

int coli_jinja_render(const coli_jinja_t *t, const json_t *ctx, int64_t now,
                      const struct coli_jinja_limits *lim, char **out, size_t *len, char *err,
                      size_t errlen)
{
	struct jstate *st = calloc(1, sizeof(*st));
	struct jbuf buf = {0};
	jmp_buf jb;
	struct jv c;

	*out = NULL;
	*len = 0;
	if (err && errlen)
		err[0] = 0;
	if (!st)
		return -ENOMEM;
	st->a.cap = lim && lim->max_memory_bytes ? lim->max_memory_bytes : 256u << 20;
	st->a.fail = &jb;
	st->a.err = err;
	st->a.errlen = errlen;
	st->max_output = lim && lim->max_output_bytes ? lim->max_output_bytes : 4u << 20;
	st->max_steps = lim && lim->max_steps ? lim->max_steps : 10000000;
	st->max_depth = lim && lim->max_depth ? lim->max_depth : 64;
	st->now = now >= 0 ? now : (int64_t)time(NULL);
	st->getitem = jop_getitem;
	if (setjmp(jb)) {
		jarena_free(&st->a);
		free(st);
		return -EINVAL;
	}
	c = ctx && json_is_object(ctx) ? jv_from_json(&st->a, ctx, 0) : jv_dict(&st->a, 1);
	st->ctx = c.d;
	st->root = scope_new(st, NULL);
	buf.max = st->max_output;
	st->out = &buf;
	exec(st, st->root, t->root);
	*out = malloc(buf.n + 1);
	if (!*out) {
		jarena_free(&st->a);
		free(st);
		return -ENOMEM;
	}
	if (buf.n)
		memcpy(*out, buf.p, buf.n);
	(*out)[buf.n] = 0;
	*len = buf.n;
	jarena_free(&st->a);
	free(st);
	return 0;
}
