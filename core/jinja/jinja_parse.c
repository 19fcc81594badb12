/*
 * core/jinja/jinja_parse.c — tokens to the AST (struct jnode, kinds in
 * jinja_internal.h), by recursive descent with jinja2's grammar and
 * precedence, loosest first:
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
 * Statements are the tags {% if %} {% for %} {% set %} {% macro %} {% call %}
 * {% filter %} {% with %} {% break %} {% continue %} {% generation %} with
 * their end tags; any other tag name is an error naming its line. Depth of
 * nesting (statements and expressions) is capped so that a hostile
 * template cannot exhaust the stack.
 */
#include <string.h>

#include "core/jinja/jinja_internal.h"

#define MAX_PARSE_DEPTH 200

struct parser {
	struct jarena *a;
	const struct jtok *t;
	int pos;
	int depth;
};

static const struct jtok *cur(struct parser *P)
{
	return &P->t[P->pos];
}

static __attribute__((noreturn)) void fail(struct parser *P, const char *what)
{
	const struct jtok *t = cur(P);

	jfail(P->a, "line %d: %s", t->line, what);
}

static int is_op(struct parser *P, const char *op)
{
	const struct jtok *t = cur(P);

	return t->type == JT_OP && !strcmp(t->s, op);
}

static int is_name(struct parser *P, const char *name)
{
	const struct jtok *t = cur(P);

	return t->type == JT_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}

static int accept_op(struct parser *P, const char *op)
{
	if (!is_op(P, op))
		return 0;
	P->pos++;
	return 1;
}

static int accept_name(struct parser *P, const char *name)
{
	if (!is_name(P, name))
		return 0;
	P->pos++;
	return 1;
}

static void expect_op(struct parser *P, const char *op)
{
	char m[64];

	if (!accept_op(P, op)) {
		snprintf(m, sizeof(m), "expected '%s'", op);
		fail(P, m);
	}
}

static const char *name_str(struct parser *P)
{
	const struct jtok *t = cur(P);
	char *s;

	if (t->type != JT_NAME)
		fail(P, "expected a name");
	s = jarena_alloc(P->a, t->n + 1);
	memcpy(s, t->s, t->n);
	s[t->n] = 0;
	P->pos++;
	return s;
}

static struct jnode *node(struct parser *P, int kind)
{
	struct jnode *n = jarena_alloc(P->a, sizeof(*n));

	memset(n, 0, sizeof(*n));
	n->kind = kind;
	n->line = cur(P)->line;
	return n;
}

/* a growable array of node pointers / names */
struct nvec {
	struct jnode **v;
	const char **names;
	int n, cap;
};

static void nvec_push(struct parser *P, struct nvec *v, struct jnode *x, const char *name)
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

static struct jnode *expr(struct parser *P);
static struct jnode *or_expr(struct parser *P);
static struct jnode *unary(struct parser *P, int with_filter);

static void enter(struct parser *P)
{
	if (++P->depth > MAX_PARSE_DEPTH)
		fail(P, "template nested too deeply");
}

/* (args, name=kw) after '(' was consumed, into n->list/n / names/list2/n2 */
static void call_args(struct parser *P, struct jnode *n)
{
	struct nvec pos = {0}, kw = {0};

	while (!accept_op(P, ")")) {
		if (pos.n + kw.n && !accept_op(P, ","))
			fail(P, "expected ',' or ')' in call arguments");
		if (accept_op(P, ")"))
			break;
		if (cur(P)->type == JT_NAME && P->t[P->pos + 1].type == JT_OP &&
		    !strcmp(P->t[P->pos + 1].s, "=")) {
			const char *k = name_str(P);

			P->pos++;
			nvec_push(P, &kw, expr(P), k);
		} else {
			if (kw.n)
				fail(P, "positional argument after keyword argument");
			nvec_push(P, &pos, expr(P), NULL);
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
	const struct jtok *t = cur(P);
	struct jnode *n;

	enter(P);
	if (t->type == JT_NAME) {
		const char *s = name_str(P);

		n = node(P, E_CONST);
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

		n = node(P, E_CONST);
		while (cur(P)->type == JT_STRING) { /* 'a' 'b' is 'ab' */
			jbuf_put(P->a, &b, cur(P)->s, cur(P)->n);
			P->pos++;
		}
		n->val = jv_str(P->a, b.p ? b.p : "", b.n);
	} else if (t->type == JT_INT || t->type == JT_FLOAT) {
		n = node(P, E_CONST);
		n->val = t->type == JT_INT ? jv_int(t->i) : jv_float(t->f);
		P->pos++;
	} else if (accept_op(P, "(")) {
		struct nvec v = {0};
		int tuple = 0;

		n = NULL;
		while (!accept_op(P, ")")) {
			if (v.n && !accept_op(P, ","))
				fail(P, "expected ',' or ')'");
			if (v.n) {
				tuple = 1;
				if (accept_op(P, ")"))
					break;
			}
			nvec_push(P, &v, expr(P), NULL);
		}
		if (v.n == 1 && !tuple) {
			n = v.v[0];
		} else {
			n = node(P, E_TUPLE);
			n->list = v.v;
			n->n = v.n;
		}
	} else if (accept_op(P, "[")) {
		struct nvec v = {0};

		n = node(P, E_LIST);
		while (!accept_op(P, "]")) {
			if (v.n && !accept_op(P, ","))
				fail(P, "expected ',' or ']'");
			if (accept_op(P, "]"))
				break;
			nvec_push(P, &v, expr(P), NULL);
		}
		n->list = v.v;
		n->n = v.n;
	} else if (accept_op(P, "{")) {
		struct nvec k = {0}, v = {0};

		n = node(P, E_DICT);
		while (!accept_op(P, "}")) {
			if (k.n && !accept_op(P, ","))
				fail(P, "expected ',' or '}'");
			if (accept_op(P, "}"))
				break;
			nvec_push(P, &k, expr(P), NULL);
			expect_op(P, ":");
			nvec_push(P, &v, expr(P), NULL);
		}
		n->list = k.v;
		n->list2 = v.v;
		n->n = k.n;
	} else {
		fail(P, "expected an expression");
	}
	P->depth--;
	return n;
}

static struct jnode *postfix(struct parser *P, struct jnode *n)
{
	for (;;) {
		if (accept_op(P, ".")) {
			struct jnode *x = node(P, E_ATTR);

			x->a = n;
			if (cur(P)->type == JT_INT) { /* x.0 is x[0] */
				x->kind = E_ITEM;
				x->b = node(P, E_CONST);
				x->b->val = jv_int(cur(P)->i);
				P->pos++;
			} else {
				x->s = name_str(P);
			}
			n = x;
		} else if (accept_op(P, "[")) {
			struct jnode *x = node(P, E_ITEM), *parts[3] = {0};
			int k = 0, slice = 0;

			x->a = n;
			for (;;) {
				if (is_op(P, ":")) {
					P->pos++;
					slice = 1;
					if (++k > 2)
						fail(P, "bad slice");
					continue;
				}
				if (is_op(P, "]"))
					break;
				if (parts[k])
					fail(P, "expected ']'");
				parts[k] = expr(P);
			}
			expect_op(P, "]");
			if (slice) {
				x->kind = E_SLICE;
				x->b = parts[0];
				x->c = parts[1];
				x->d = parts[2];
			} else {
				if (!parts[0])
					fail(P, "empty subscript");
				x->b = parts[0];
			}
			n = x;
		} else if (accept_op(P, "(")) {
			struct jnode *x = node(P, E_CALL);

			x->a = n;
			call_args(P, x);
			n = x;
		} else {
			return n;
		}
	}
}

static struct jnode *filter_expr(struct parser *P, struct jnode *n)
{
	for (;;) {
		if (accept_op(P, "|")) {
			struct jnode *x = node(P, E_FILTER);

			x->a = n;
			x->s = name_str(P);
			while (accept_op(P, ".")) { /* dotted filter names: keep the last part */
				x->s = name_str(P);
			}
			if (accept_op(P, "("))
				call_args(P, x);
			n = x;
		} else if (is_name(P, "is")) {
			struct jnode *x = node(P, E_TEST);
			const struct jtok *t;

			P->pos++;
			x->a = n;
			x->op = accept_name(P, "not");
			x->s = name_str(P);
			t = cur(P);
			if (accept_op(P, "(")) {
				call_args(P, x);
			} else if ((t->type == JT_NAME || t->type == JT_STRING ||
			            t->type == JT_INT || t->type == JT_FLOAT || is_op(P, "[") ||
			            is_op(P, "{")) &&
			           !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and")) {
				if (is_name(P, "is"))
					fail(P, "you cannot chain multiple tests with is");
				x->list = jarena_alloc(P->a, sizeof(struct jnode *));
				x->list[0] = postfix(P, primary(P));
				x->n = 1;
			}
			n = x;
		} else if (accept_op(P, "(")) {
			struct jnode *x = node(P, E_CALL);

			x->a = n;
			call_args(P, x);
			n = x;
		} else {
			return n;
		}
	}
}

static struct jnode *unary(struct parser *P, int with_filter)
{
	struct jnode *n;

	enter(P);
	if (is_op(P, "-") || is_op(P, "+")) {
		n = node(P, is_op(P, "-") ? E_NEG : E_POS);
		P->pos++;
		n->a = unary(P, 0);
	} else {
		n = primary(P);
	}
	n = postfix(P, n);
	if (with_filter)
		n = filter_expr(P, n);
	P->depth--;
	return n;
}

static struct jnode *binary(struct parser *P, int op, struct jnode *a, struct jnode *b)
{
	struct jnode *n = node(P, E_BIN);

	n->op = op;
	n->a = a;
	n->b = b;
	return n;
}

static struct jnode *pow_expr(struct parser *P)
{
	struct jnode *n = unary(P, 1);

	while (accept_op(P, "**"))
		n = binary(P, JOP_POW, n, unary(P, 1));
	return n;
}

static struct jnode *math2(struct parser *P)
{
	struct jnode *n = pow_expr(P);

	for (;;) {
		if (accept_op(P, "*"))
			n = binary(P, JOP_MUL, n, pow_expr(P));
		else if (accept_op(P, "//"))
			n = binary(P, JOP_FLOORDIV, n, pow_expr(P));
		else if (accept_op(P, "/"))
			n = binary(P, JOP_DIV, n, pow_expr(P));
		else if (accept_op(P, "%"))
			n = binary(P, JOP_MOD, n, pow_expr(P));
		else
			return n;
	}
}

static struct jnode *concat(struct parser *P)
{
	struct jnode *n = math2(P);

	while (accept_op(P, "~"))
		n = binary(P, JOP_CONCAT, n, math2(P));
	return n;
}

static struct jnode *math1(struct parser *P)
{
	struct jnode *n = concat(P);

	for (;;) {
		if (accept_op(P, "+"))
			n = binary(P, JOP_ADD, n, concat(P));
		else if (accept_op(P, "-"))
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
		if (accept_op(P, ops[i].s))
			return ops[i].op;
	if (accept_name(P, "in"))
		return JOP_IN;
	if (is_name(P, "not") && P->t[P->pos + 1].type == JT_NAME && P->t[P->pos + 1].n == 2 &&
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
			nvec_push(P, &v, first, NULL);
		if (k == 64)
			fail(P, "comparison chain too long");
		ops[k++] = op;
		nvec_push(P, &v, math1(P), NULL);
	}
	if (!v.n)
		return first;
	n = node(P, E_CMP);
	n->list = v.v;
	n->n = v.n;
	n->ops = jarena_alloc(P->a, sizeof(int) * (size_t)k);
	memcpy(n->ops, ops, sizeof(int) * (size_t)k);
	return n;
}

static struct jnode *not_expr(struct parser *P)
{
	if (accept_name(P, "not")) {
		struct jnode *n = node(P, E_NOT);

		enter(P);
		n->a = not_expr(P);
		P->depth--;
		return n;
	}
	return compare(P);
}

static struct jnode *and_expr(struct parser *P)
{
	struct jnode *n = not_expr(P);

	while (accept_name(P, "and")) {
		struct jnode *x = node(P, E_AND);

		x->a = n;
		x->b = not_expr(P);
		n = x;
	}
	return n;
}

static struct jnode *or_expr(struct parser *P)
{
	struct jnode *n = and_expr(P);

	while (accept_name(P, "or")) {
		struct jnode *x = node(P, E_OR);

		x->a = n;
		x->b = and_expr(P);
		n = x;
	}
	return n;
}

static struct jnode *expr(struct parser *P)
{
	struct jnode *n;

	enter(P);
	n = or_expr(P);
	while (accept_name(P, "if")) {
		struct jnode *x = node(P, E_COND);

		x->b = n;
		x->a = or_expr(P);
		if (accept_name(P, "else"))
			x->c = expr(P);
		n = x;
	}
	P->depth--;
	return n;
}

/* expr or "a, b, c" (a tuple without parentheses) */
static struct jnode *tuple_expr(struct parser *P)
{
	struct jnode *n = expr(P), *t;
	struct nvec v = {0};

	if (!is_op(P, ","))
		return n;
	nvec_push(P, &v, n, NULL);
	while (accept_op(P, ",")) {
		if (cur(P)->type == JT_BLOCK_END || cur(P)->type == JT_VAR_END)
			break;
		nvec_push(P, &v, expr(P), NULL);
	}
	t = node(P, E_TUPLE);
	t->list = v.v;
	t->n = v.n;
	return t;
}

/* ---- statements ---- */
static struct jnode *body(struct parser *P, const char *const *ends, int *which);

static void end_tag(struct parser *P)
{
	if (cur(P)->type != JT_BLOCK_END)
		fail(P, "expected the end of the tag");
	P->pos++;
}

/* target names of for/set/with: "a" or "a, b" or "(a, b)" */
static void targets(struct parser *P, struct jnode *n)
{
	struct nvec v = {0};
	int paren = accept_op(P, "(");

	do {
		if (paren && is_op(P, ")"))
			break;
		nvec_push(P, &v, NULL, name_str(P));
	} while (accept_op(P, ","));
	if (paren)
		expect_op(P, ")");
	n->names = v.names;
	n->nnames = v.n;
}

/* an optional chain of |filters applied to the placeholder E_NAME "" */
static struct jnode *filter_chain(struct parser *P)
{
	struct jnode *hole;

	if (!is_op(P, "|") && cur(P)->type != JT_NAME)
		return NULL;
	hole = node(P, E_NAME);
	hole->s = "";
	if (cur(P)->type == JT_NAME) { /* {% filter upper %}: the first name is a filter */
		struct jnode *x = node(P, E_FILTER);

		x->a = hole;
		x->s = name_str(P);
		if (accept_op(P, "("))
			call_args(P, x);
		hole = x;
	}
	return filter_expr(P, hole);
}

static struct jnode *statement(struct parser *P)
{
	struct jnode *n;
	static const char *const end_if[] = {"elif", "else", "endif", NULL};
	static const char *const end_for[] = {"else", "endfor", NULL};
	int which;

	if (cur(P)->type != JT_NAME)
		fail(P, "expected a tag name");
	enter(P);
	if (accept_name(P, "if")) {
		struct jnode *top = node(P, N_IF), *x = top;

		x->a = tuple_expr(P);
		end_tag(P);
		for (;;) {
			x->b = body(P, end_if, &which);
			if (which == 0) { /* elif */
				struct jnode *y = node(P, N_IF);

				y->a = tuple_expr(P);
				end_tag(P);
				x->c = y;
				x = y;
				continue;
			}
			if (which == 1) {
				static const char *const end_else[] = {"endif", NULL};

				end_tag(P);
				x->c = body(P, end_else, &which);
			}
			end_tag(P);
			break;
		}
		n = top;
	} else if (accept_name(P, "for")) {
		n = node(P, N_FOR);
		targets(P, n);
		if (!accept_name(P, "in"))
			fail(P, "expected 'in'");
		{ /* the iterable: a tuple of or-expressions (an 'if' here filters) */
			struct jnode *it = or_expr(P);

			if (is_op(P, ",")) {
				struct nvec v = {0};

				nvec_push(P, &v, it, NULL);
				while (accept_op(P, ","))
					nvec_push(P, &v, or_expr(P), NULL);
				it = node(P, E_TUPLE);
				it->list = v.v;
				it->n = v.n;
			}
			n->a = it;
		}
		if (accept_name(P, "if"))
			n->d = expr(P);
		if (accept_name(P, "recursive"))
			fail(P, "recursive loops are not supported");
		end_tag(P);
		n->b = body(P, end_for, &which);
		if (which == 0) {
			static const char *const end_else[] = {"endfor", NULL};

			end_tag(P);
			n->c = body(P, end_else, &which);
		}
		end_tag(P);
	} else if (accept_name(P, "set")) {
		n = node(P, N_SET);
		if (cur(P)->type == JT_NAME && P->t[P->pos + 1].type == JT_OP &&
		    !strcmp(P->t[P->pos + 1].s, ".")) {
			n->s = name_str(P);
			P->pos++;
			n->s2 = name_str(P);
		} else {
			targets(P, n);
		}
		if (accept_op(P, "=")) {
			n->a = tuple_expr(P);
			end_tag(P);
		} else {
			static const char *const end_set[] = {"endset", NULL};

			if (n->s2 || n->nnames != 1)
				fail(P, "a {% set %} block takes one name");
			n->kind = N_SETBLOCK;
			n->s = n->names[0];
			n->a = filter_chain(P);
			end_tag(P);
			n->b = body(P, end_set, &which);
			end_tag(P);
		}
	} else if (accept_name(P, "macro")) {
		static const char *const end_macro[] = {"endmacro", NULL};
		struct nvec v = {0};

		n = node(P, N_MACRO);
		n->s = name_str(P);
		expect_op(P, "(");
		while (!accept_op(P, ")")) {
			const char *pn;

			if (v.n && !accept_op(P, ","))
				fail(P, "expected ',' or ')' in macro parameters");
			if (accept_op(P, ")"))
				break;
			pn = name_str(P);
			nvec_push(P, &v, accept_op(P, "=") ? expr(P) : NULL, pn);
		}
		n->names = v.names;
		n->nnames = v.n;
		n->list = v.v;
		n->n = v.n;
		end_tag(P);
		n->b = body(P, end_macro, &which);
		if (cur(P)->type == JT_NAME)
			P->pos++; /* {% endmacro name %} */
		end_tag(P);
	} else if (accept_name(P, "call")) {
		static const char *const end_call[] = {"endcall", NULL};
		struct nvec v = {0};

		n = node(P, N_CALLBLK);
		if (accept_op(P, "(")) {
			while (!accept_op(P, ")")) {
				const char *pn;

				if (v.n && !accept_op(P, ","))
					fail(P, "expected ',' or ')'");
				pn = name_str(P);
				nvec_push(P, &v, accept_op(P, "=") ? expr(P) : NULL, pn);
			}
		}
		n->names = v.names;
		n->nnames = v.n;
		n->list = v.v;
		n->n = v.n;
		n->a = expr(P);
		if (n->a->kind != E_CALL)
			fail(P, "{% call %} needs a macro call");
		end_tag(P);
		n->b = body(P, end_call, &which);
		end_tag(P);
	} else if (accept_name(P, "filter")) {
		static const char *const end_filter[] = {"endfilter", NULL};

		n = node(P, N_FILTBLK);
		n->a = filter_chain(P);
		if (!n->a)
			fail(P, "{% filter %} needs a filter");
		end_tag(P);
		n->b = body(P, end_filter, &which);
		end_tag(P);
	} else if (accept_name(P, "with")) {
		static const char *const end_with[] = {"endwith", NULL};
		struct nvec v = {0};

		n = node(P, N_WITH);
		while (cur(P)->type != JT_BLOCK_END) {
			const char *pn;

			if (v.n && !accept_op(P, ","))
				fail(P, "expected ','");
			pn = name_str(P);
			expect_op(P, "=");
			nvec_push(P, &v, expr(P), pn);
		}
		n->names = v.names;
		n->nnames = v.n;
		n->list = v.v;
		n->n = v.n;
		end_tag(P);
		n->b = body(P, end_with, &which);
		end_tag(P);
	} else if (accept_name(P, "generation")) {
		static const char *const end_gen[] = {"endgeneration", NULL};

		end_tag(P);
		n = body(P, end_gen, &which);
		end_tag(P);
	} else if (accept_name(P, "break")) {
		n = node(P, N_BREAK);
		end_tag(P);
	} else if (accept_name(P, "continue")) {
		n = node(P, N_CONTINUE);
		end_tag(P);
	} else {
		char m[96];
		const struct jtok *t = cur(P);

		snprintf(m, sizeof(m), "unknown tag '%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
		fail(P, m);
	}
	P->depth--;
	return n;
}

/* statements up to one of the tags ends (NULL-terminated; NULL itself: up to
 * the end of the template); *which: the index of the tag that ended it, whose
 * name is consumed (its tag end is not) */
static struct jnode *body(struct parser *P, const char *const *ends, int *which)
{
	struct jnode *n = node(P, N_BODY);
	struct nvec v = {0};

	for (;;) {
		const struct jtok *t = cur(P);

		if (t->type == JT_EOF) {
			if (ends) {
				char m[64];

				snprintf(m, sizeof(m), "missing {%% %s %%}", ends[0]);
				fail(P, m);
			}
			break;
		}
		if (t->type == JT_TEXT) {
			struct jnode *x = node(P, N_TEXT);

			x->s = t->s;
			x->val = jv_int((int64_t)t->n);
			P->pos++;
			nvec_push(P, &v, x, NULL);
		} else if (t->type == JT_VAR_BEGIN) {
			struct jnode *x = node(P, N_OUT);

			P->pos++;
			x->a = tuple_expr(P);
			if (cur(P)->type != JT_VAR_END)
				fail(P, "expected '}}'");
			P->pos++;
			nvec_push(P, &v, x, NULL);
		} else if (t->type == JT_BLOCK_BEGIN) {
			int k = -1;

			P->pos++;
			for (int i = 0; ends && ends[i]; i++)
				if (is_name(P, ends[i]))
					k = i;
			if (k >= 0) {
				P->pos++;
				*which = k;
				break;
			}
			nvec_push(P, &v, statement(P), NULL);
		} else {
			fail(P, "unexpected token");
		}
	}
	n->list = v.v;
	n->n = v.n;
	return n;
}

struct jnode *jparse(struct jarena *a, const struct jtok *toks)
{
	struct parser P = {.a = a, .t = toks};
	int which;

	return body(&P, NULL, &which);
}
