/*
 * core/jinja/jinja_expr.c — expression tokens to the AST (struct jnode,
 * kinds in jinja_internal.h), by recursive descent with jinja2's grammar
 * and precedence, loosest first:
 *
 *   expr     := or ['if' or ['else' expr]]            (conditional)
 *   or       := and ('or' and)*
 *   and      := not ('and' not)*
 *   not      := 'not' not | compare
 *   compare  := math1 (('=='|'!='|'<'|'<='|'>'|'>='|'in'|'not' 'in') math1)*
 *   math1    := concat (('+'|'-') concat)*
 *   concat   := math2 ('~' math2)*
 *   math2    := pow (('*'|'/'|'//'|'%') pow)*
 *   pow      := unary ('**' unary)*
 *   unary    := ('-'|'+') unary | primary postfix* ('|' filter | 'is' test | call)*
 *   primary  := name | string+ | number | '(' tuple ')' | '[' list ']' | '{' dict '}'
 *   postfix  := '.' name | '[' subscript or slice ']' | '(' args ')'
 *
 * The helpers here (jp_*) are shared with jinja_parse.c, which parses the
 * statements. Expression depth is capped (MAX_PARSE_DEPTH) so that a
 * hostile template cannot exhaust the stack.
 */
#include <stdio.h>
#include <string.h>

#include "core/jinja/jinja_internal.h"

const struct jtok *jp_cur(struct parser *P)
{
	return &P->t[P->pos];
}

__attribute__((noreturn)) void jp_fail(struct parser *P, const char *what)
{
	const struct jtok *t = jp_cur(P);

	jfail(P->a, "line %d: %s", t->line, what);
}

int jp_is_op(struct parser *P, const char *op)
{
	const struct jtok *t = jp_cur(P);

	return t->type == JT_OP && !strcmp(t->s, op);
}

int jp_is_name(struct parser *P, const char *name)
{
	const struct jtok *t = jp_cur(P);

	return t->type == JT_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}

int jp_accept_op(struct parser *P, const char *op)
{
	if (!jp_is_op(P, op))
		return 0;
	P->pos++;
	return 1;
}

int jp_accept_name(struct parser *P, const char *name)
{
	if (!jp_is_name(P, name))
		return 0;
	P->pos++;
	return 1;
}

void jp_expect_op(struct parser *P, const char *op)
{
	char m[64];

	if (!jp_accept_op(P, op)) {
		snprintf(m, sizeof(m), "expected '%s'", op);
		jp_fail(P, m);
	}
}

const char *jp_name_str(struct parser *P)
{
	const struct jtok *t = jp_cur(P);
	char *s;

	if (t->type != JT_NAME)
		jp_fail(P, "expected a name");
	s = jarena_alloc(P->a, t->n + 1);
	memcpy(s, t->s, t->n);
	s[t->n] = 0;
	P->pos++;
	return s;
}

struct jnode *jp_node(struct parser *P, int kind)
{
	struct jnode *n = jarena_alloc(P->a, sizeof(*n));

	memset(n, 0, sizeof(*n));
	n->kind = kind;
	n->line = jp_cur(P)->line;
	return n;
}

void jp_nvec_push(struct parser *P, struct nvec *v, struct jnode *x, const char *name)
{
	if (v->n == v->cap) {
		int cap = v->cap ? v->cap * 2 : 4;
		struct jnode **nv = jarena_alloc(P->a, sizeof(*nv) * (size_t)cap);
		const char **nn = jarena_alloc(P->a, sizeof(*nn) * (size_t)cap);

		if (v->n) {
			memcpy(nv, v->v, sizeof(*nv) * (size_t)v->n);
			memcpy(nn, v->names, sizeof(*nn) * (size_t)v->n);
		}
		v->v = nv;
		v->names = nn;
		v->cap = cap;
	}
	v->v[v->n] = x;
	v->names[v->n++] = name;
}

static struct jnode *unary(struct parser *P, int with_filter);

void jp_enter(struct parser *P)
{
	if (++P->depth > MAX_PARSE_DEPTH)
		jp_fail(P, "template nested too deeply");
}

/* (args, name=kw) after '(' was consumed, into n->list/n / names/list2/n2 */
void jp_call_args(struct parser *P, struct jnode *n)
{
	struct nvec pos = {0}, kw = {0};

	while (!jp_accept_op(P, ")")) {
		if (pos.n + kw.n && !jp_accept_op(P, ","))
			jp_fail(P, "expected ',' or ')' in call arguments");
		if (jp_accept_op(P, ")"))
			break;
		if (jp_cur(P)->type == JT_NAME && P->t[P->pos + 1].type == JT_OP &&
		    !strcmp(P->t[P->pos + 1].s, "=")) {
			const char *k = jp_name_str(P);

			P->pos++;
			jp_nvec_push(P, &kw, jp_expr(P), k);
		} else {
			if (kw.n)
				jp_fail(P, "positional argument after keyword argument");
			jp_nvec_push(P, &pos, jp_expr(P), NULL);
		}
	}
	n->list = pos.v;
	n->n = pos.n;
	n->list2 = kw.v;
	n->names = kw.names;
	n->n2 = kw.n;
}

static struct jnode *primary(struct parser *P)
{
	const struct jtok *t = jp_cur(P);
	struct jnode *n;

	jp_enter(P);
	if (t->type == JT_NAME) {
		const char *s = jp_name_str(P);

		n = jp_node(P, E_CONST);
		if (!strcmp(s, "true") || !strcmp(s, "True"))
			n->val = jv_bool(1);
		else if (!strcmp(s, "false") || !strcmp(s, "False"))
			n->val = jv_bool(0);
		else if (!strcmp(s, "none") || !strcmp(s, "None"))
			n->val = jv_none();
		else {
			n->kind = E_NAME;
			n->s = s;
		}
	} else if (t->type == JT_STRING) {
		struct jbuf b = {0};

		n = jp_node(P, E_CONST);
		while (jp_cur(P)->type == JT_STRING) { /* 'a' 'b' is 'ab' */
			jbuf_put(P->a, &b, jp_cur(P)->s, jp_cur(P)->n);
			P->pos++;
		}
		n->val = jv_str(P->a, b.p ? b.p : "", b.n);
	} else if (t->type == JT_INT || t->type == JT_FLOAT) {
		n = jp_node(P, E_CONST);
		n->val = t->type == JT_INT ? jv_int(t->i) : jv_float(t->f);
		P->pos++;
	} else if (jp_accept_op(P, "(")) {
		struct nvec v = {0};
		int tuple = 0;

		n = NULL;
		while (!jp_accept_op(P, ")")) {
			if (v.n && !jp_accept_op(P, ","))
				jp_fail(P, "expected ',' or ')'");
			if (v.n) {
				tuple = 1;
				if (jp_accept_op(P, ")"))
					break;
			}
			jp_nvec_push(P, &v, jp_expr(P), NULL);
		}
		if (v.n == 1 && !tuple) {
			n = v.v[0];
		} else {
			n = jp_node(P, E_TUPLE);
			n->list = v.v;
			n->n = v.n;
		}
	} else if (jp_accept_op(P, "[")) {
		struct nvec v = {0};

		n = jp_node(P, E_LIST);
		while (!jp_accept_op(P, "]")) {
			if (v.n && !jp_accept_op(P, ","))
				jp_fail(P, "expected ',' or ']'");
			if (jp_accept_op(P, "]"))
				break;
			jp_nvec_push(P, &v, jp_expr(P), NULL);
		}
		n->list = v.v;
		n->n = v.n;
	} else if (jp_accept_op(P, "{")) {
		struct nvec k = {0}, v = {0};

		n = jp_node(P, E_DICT);
		while (!jp_accept_op(P, "}")) {
			if (k.n && !jp_accept_op(P, ","))
				jp_fail(P, "expected ',' or '}'");
			if (jp_accept_op(P, "}"))
				break;
			jp_nvec_push(P, &k, jp_expr(P), NULL);
			jp_expect_op(P, ":");
			jp_nvec_push(P, &v, jp_expr(P), NULL);
		}
		n->list = k.v;
		n->list2 = v.v;
		n->n = k.n;
	} else {
		jp_fail(P, "expected an expression");
	}
	P->depth--;
	return n;
}

static struct jnode *postfix(struct parser *P, struct jnode *n)
{
	for (;;) {
		if (jp_accept_op(P, ".")) {
			struct jnode *x = jp_node(P, E_ATTR);

			x->a = n;
			if (jp_cur(P)->type == JT_INT) { /* x.0 is x[0] */
				x->kind = E_ITEM;
				x->b = jp_node(P, E_CONST);
				x->b->val = jv_int(jp_cur(P)->i);
				P->pos++;
			} else {
				x->s = jp_name_str(P);
			}
			n = x;
		} else if (jp_accept_op(P, "[")) {
			struct jnode *x = jp_node(P, E_ITEM), *parts[3] = {0};
			int k = 0, slice = 0;

			x->a = n;
			for (;;) {
				if (jp_is_op(P, ":")) {
					P->pos++;
					slice = 1;
					if (++k > 2)
						jp_fail(P, "bad slice");
					continue;
				}
				if (jp_is_op(P, "]"))
					break;
				if (parts[k])
					jp_fail(P, "expected ']'");
				parts[k] = jp_expr(P);
			}
			jp_expect_op(P, "]");
			if (slice) {
				x->kind = E_SLICE;
				x->b = parts[0];
				x->c = parts[1];
				x->d = parts[2];
			} else {
				if (!parts[0])
					jp_fail(P, "empty subscript");
				x->b = parts[0];
			}
			n = x;
		} else if (jp_accept_op(P, "(")) {
			struct jnode *x = jp_node(P, E_CALL);

			x->a = n;
			jp_call_args(P, x);
			n = x;
		} else {
			return n;
		}
	}
}

struct jnode *jp_filter_expr(struct parser *P, struct jnode *n)
{
	for (;;) {
		if (jp_accept_op(P, "|")) {
			struct jnode *x = jp_node(P, E_FILTER);

			x->a = n;
			x->s = jp_name_str(P);
			while (jp_accept_op(P, ".")) { /* dotted filter names: keep the last part */
				x->s = jp_name_str(P);
			}
			if (jp_accept_op(P, "("))
				jp_call_args(P, x);
			n = x;
		} else if (jp_is_name(P, "is")) {
			struct jnode *x = jp_node(P, E_TEST);
			const struct jtok *t;

			P->pos++;
			x->a = n;
			x->op = jp_accept_name(P, "not");
			x->s = jp_name_str(P);
			t = jp_cur(P);
			if (jp_accept_op(P, "(")) {
				jp_call_args(P, x);
			} else if ((t->type == JT_NAME || t->type == JT_STRING ||
			            t->type == JT_INT || t->type == JT_FLOAT || jp_is_op(P, "[") ||
			            jp_is_op(P, "{")) &&
			           !jp_is_name(P, "else") && !jp_is_name(P, "or") &&
			           !jp_is_name(P, "and")) {
				if (jp_is_name(P, "is"))
					jp_fail(P, "you cannot chain multiple tests with is");
				x->list = jarena_alloc(P->a, sizeof(struct jnode *));
				x->list[0] = postfix(P, primary(P));
				x->n = 1;
			}
			n = x;
		} else if (jp_accept_op(P, "(")) {
			struct jnode *x = jp_node(P, E_CALL);

			x->a = n;
			jp_call_args(P, x);
			n = x;
		} else {
			return n;
		}
	}
}

static struct jnode *unary(struct parser *P, int with_filter)
{
	struct jnode *n;

	jp_enter(P);
	if (jp_is_op(P, "-") || jp_is_op(P, "+")) {
		n = jp_node(P, jp_is_op(P, "-") ? E_NEG : E_POS);
		P->pos++;
		n->a = unary(P, 0);
	} else {
		n = primary(P);
	}
	n = postfix(P, n);
	if (with_filter)
		n = jp_filter_expr(P, n);
	P->depth--;
	return n;
}

static struct jnode *binary(struct parser *P, int op, struct jnode *a, struct jnode *b)
{
	struct jnode *n = jp_node(P, E_BIN);

	n->op = op;
	n->a = a;
	n->b = b;
	return n;
}

/* an expression jinja2's optimizer folds to a constant: literals and
 * operators over them */
static int is_const(const struct jnode *n)
{
	switch (n->kind) {
	case E_CONST:
		return 1;
	case E_NEG:
	case E_POS:
	case E_NOT:
		return is_const(n->a);
	case E_BIN:
	case E_AND:
	case E_OR:
		return is_const(n->a) && is_const(n->b);
	case E_LIST:
	case E_TUPLE:
	case E_CMP:
		for (int i = 0; i < n->n; i++)
			if (!is_const(n->list[i]))
				return 0;
		return 1;
	default:
		return 0;
	}
}

/* -a ** b: jinja2 parses (-a) ** b, but unless the optimizer folds it to a
 * constant its generated Python reads "-a ** b", which Python takes as
 * -(a ** b); that is what templates get, so that is what coli computes */
static struct jnode *pow_expr(struct parser *P)
{
	struct jnode *n = unary(P, 1);

	while (jp_accept_op(P, "**")) {
		struct jnode *r = unary(P, 1), *x = binary(P, JOP_POW, n, r);

		if ((n->kind == E_NEG || n->kind == E_POS) && !is_const(x)) {
			x->a = n->a;
			n->a = x;
			x = n;
		}
		n = x;
	}
	return n;
}

static struct jnode *math2(struct parser *P)
{
	struct jnode *n = pow_expr(P);

	for (;;) {
		if (jp_accept_op(P, "*"))
			n = binary(P, JOP_MUL, n, pow_expr(P));
		else if (jp_accept_op(P, "//"))
			n = binary(P, JOP_FLOORDIV, n, pow_expr(P));
		else if (jp_accept_op(P, "/"))
			n = binary(P, JOP_DIV, n, pow_expr(P));
		else if (jp_accept_op(P, "%"))
			n = binary(P, JOP_MOD, n, pow_expr(P));
		else
			return n;
	}
}

static struct jnode *concat(struct parser *P)
{
	struct jnode *n = math2(P);

	while (jp_accept_op(P, "~"))
		n = binary(P, JOP_CONCAT, n, math2(P));
	return n;
}

static struct jnode *math1(struct parser *P)
{
	struct jnode *n = concat(P);

	for (;;) {
		if (jp_accept_op(P, "+"))
			n = binary(P, JOP_ADD, n, concat(P));
		else if (jp_accept_op(P, "-"))
			n = binary(P, JOP_SUB, n, concat(P));
		else
			return n;
	}
}

static int cmp_op(struct parser *P)
{
	static const struct {
		const char *s;
		int op;
	} ops[] = {{"==", JOP_EQ}, {"!=", JOP_NE}, {"<", JOP_LT},
	           {"<=", JOP_LE}, {">", JOP_GT},  {">=", JOP_GE}};

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (jp_accept_op(P, ops[i].s))
			return ops[i].op;
	if (jp_accept_name(P, "in"))
		return JOP_IN;
	if (jp_is_name(P, "not") && P->t[P->pos + 1].type == JT_NAME && P->t[P->pos + 1].n == 2 &&
	    !memcmp(P->t[P->pos + 1].s, "in", 2)) {
		P->pos += 2;
		return JOP_NOTIN;
	}
	return 0;
}

static struct jnode *compare(struct parser *P)
{
	struct jnode *first = math1(P), *n;
	struct nvec v = {0};
	int ops[64], k = 0, op;

	while ((op = cmp_op(P))) {
		if (!v.n)
			jp_nvec_push(P, &v, first, NULL);
		if (k == 64)
			jp_fail(P, "comparison chain too long");
		ops[k++] = op;
		jp_nvec_push(P, &v, math1(P), NULL);
	}
	if (!v.n)
		return first;
	n = jp_node(P, E_CMP);
	n->list = v.v;
	n->n = v.n;
	n->ops = jarena_alloc(P->a, sizeof(int) * (size_t)k);
	memcpy(n->ops, ops, sizeof(int) * (size_t)k);
	return n;
}

static struct jnode *not_expr(struct parser *P)
{
	if (jp_accept_name(P, "not")) {
		struct jnode *n = jp_node(P, E_NOT);

		jp_enter(P);
		n->a = not_expr(P);
		P->depth--;
		return n;
	}
	return compare(P);
}

static struct jnode *and_expr(struct parser *P)
{
	struct jnode *n = not_expr(P);

	while (jp_accept_name(P, "and")) {
		struct jnode *x = jp_node(P, E_AND);

		x->a = n;
		x->b = not_expr(P);
		n = x;
	}
	return n;
}

struct jnode *jp_or_expr(struct parser *P)
{
	struct jnode *n = and_expr(P);

	while (jp_accept_name(P, "or")) {
		struct jnode *x = jp_node(P, E_OR);

		x->a = n;
		x->b = and_expr(P);
		n = x;
	}
	return n;
}

struct jnode *jp_expr(struct parser *P)
{
	struct jnode *n;

	jp_enter(P);
	n = jp_or_expr(P);
	while (jp_accept_name(P, "if")) {
		struct jnode *x = jp_node(P, E_COND);

		x->b = n;
		x->a = jp_or_expr(P);
		if (jp_accept_name(P, "else"))
			x->c = jp_expr(P);
		n = x;
	}
	P->depth--;
	return n;
}

/* expr or "a, b, c" (a tuple without parentheses) */
struct jnode *jp_tuple_expr(struct parser *P)
{
	struct jnode *n = jp_expr(P), *t;
	struct nvec v = {0};

	if (!jp_is_op(P, ","))
		return n;
	jp_nvec_push(P, &v, n, NULL);
	while (jp_accept_op(P, ",")) {
		if (jp_cur(P)->type == JT_BLOCK_END || jp_cur(P)->type == JT_VAR_END)
			break;
		jp_nvec_push(P, &v, jp_expr(P), NULL);
	}
	t = jp_node(P, E_TUPLE);
	t->list = v.v;
	t->n = v.n;
	return t;
}
