/*
 * core/jinja/jinja_parse.c — the statements of a template to the AST: the
 * tags {% if %} {% for %} {% set %} {% macro %} {% call %} {% filter %}
 * {% with %} {% break %} {% continue %} {% generation %} with their end
 * tags, text and {{ }} output, into N_BODY lists (kinds in
 * jinja_internal.h); expressions are jinja_expr.c's. Any other tag name is
 * an error naming its line; nesting is capped (MAX_PARSE_DEPTH) with the
 * expressions' depth, so a hostile template cannot exhaust the stack.
 *
 *   {% for a, b in xs if c %}...{% else %}...{% endfor %}
 *     -> N_FOR names [a, b], a: xs, d: c, b: body, c: else body
 *   {% if x %}...{% elif y %}...{% else %}...{% endif %}
 *     -> N_IF a: x, b: body, c: N_IF (a: y, b: body, c: else body)
 */
#include <stdio.h>
#include <string.h>

#include "core/jinja/jinja_internal.h"

/* ---- statements ---- */
static struct jnode *body(struct parser *P, const char *const *ends, int *which);

static void end_tag(struct parser *P)
{
	if (jp_cur(P)->type != JT_BLOCK_END)
		jp_fail(P, "expected the end of the tag");
	P->pos++;
}

/* target names of for/set/with: "a" or "a, b" or "(a, b)" */
static void targets(struct parser *P, struct jnode *n)
{
	struct nvec v = {0};
	int paren = jp_accept_op(P, "(");

	do {
		if (paren && jp_is_op(P, ")"))
			break;
		jp_nvec_push(P, &v, NULL, jp_name_str(P));
	} while (jp_accept_op(P, ","));
	if (paren)
		jp_expect_op(P, ")");
	n->names = v.names;
	n->nnames = v.n;
}

/* an optional chain of |filters applied to the placeholder E_NAME "" */
static struct jnode *filter_chain(struct parser *P)
{
	struct jnode *hole;

	if (!jp_is_op(P, "|") && jp_cur(P)->type != JT_NAME)
		return NULL;
	hole = jp_node(P, E_NAME);
	hole->s = "";
	if (jp_cur(P)->type == JT_NAME) { /* {% filter upper %}: the first name is a filter */
		struct jnode *x = jp_node(P, E_FILTER);

		x->a = hole;
		x->s = jp_name_str(P);
		if (jp_accept_op(P, "("))
			jp_call_args(P, x);
		hole = x;
	}
	return jp_filter_expr(P, hole);
}

static struct jnode *statement(struct parser *P)
{
	struct jnode *n;
	static const char *const end_if[] = {"elif", "else", "endif", NULL};
	static const char *const end_for[] = {"else", "endfor", NULL};
	int which;

	if (jp_cur(P)->type != JT_NAME)
		jp_fail(P, "expected a tag name");
	jp_enter(P);
	if (jp_accept_name(P, "if")) {
		struct jnode *top = jp_node(P, N_IF), *x = top;

		x->a = jp_tuple_expr(P);
		end_tag(P);
		for (;;) {
			x->b = body(P, end_if, &which);
			if (which == 0) { /* elif */
				struct jnode *y = jp_node(P, N_IF);

				y->a = jp_tuple_expr(P);
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
	} else if (jp_accept_name(P, "for")) {
		n = jp_node(P, N_FOR);
		targets(P, n);
		if (!jp_accept_name(P, "in"))
			jp_fail(P, "expected 'in'");
		{ /* the iterable: a tuple of or-expressions (an 'if' here filters) */
			struct jnode *it = jp_or_expr(P);

			if (jp_is_op(P, ",")) {
				struct nvec v = {0};

				jp_nvec_push(P, &v, it, NULL);
				while (jp_accept_op(P, ","))
					jp_nvec_push(P, &v, jp_or_expr(P), NULL);
				it = jp_node(P, E_TUPLE);
				it->list = v.v;
				it->n = v.n;
			}
			n->a = it;
		}
		if (jp_accept_name(P, "if"))
			n->d = jp_expr(P);
		if (jp_accept_name(P, "recursive"))
			jp_fail(P, "recursive loops are not supported");
		end_tag(P);
		n->b = body(P, end_for, &which);
		if (which == 0) {
			static const char *const end_else[] = {"endfor", NULL};

			end_tag(P);
			n->c = body(P, end_else, &which);
		}
		end_tag(P);
	} else if (jp_accept_name(P, "set")) {
		n = jp_node(P, N_SET);
		if (jp_cur(P)->type == JT_NAME && P->t[P->pos + 1].type == JT_OP &&
		    !strcmp(P->t[P->pos + 1].s, ".")) {
			n->s = jp_name_str(P);
			P->pos++;
			n->s2 = jp_name_str(P);
		} else {
			targets(P, n);
		}
		if (jp_accept_op(P, "=")) {
			n->a = jp_tuple_expr(P);
			end_tag(P);
		} else {
			static const char *const end_set[] = {"endset", NULL};

			if (n->s2 || n->nnames != 1)
				jp_fail(P, "a {% set %} block takes one name");
			n->kind = N_SETBLOCK;
			n->s = n->names[0];
			n->a = filter_chain(P);
			end_tag(P);
			n->b = body(P, end_set, &which);
			end_tag(P);
		}
	} else if (jp_accept_name(P, "macro")) {
		static const char *const end_macro[] = {"endmacro", NULL};
		struct nvec v = {0};

		n = jp_node(P, N_MACRO);
		n->s = jp_name_str(P);
		jp_expect_op(P, "(");
		while (!jp_accept_op(P, ")")) {
			const char *pn;

			if (v.n && !jp_accept_op(P, ","))
				jp_fail(P, "expected ',' or ')' in macro parameters");
			if (jp_accept_op(P, ")"))
				break;
			pn = jp_name_str(P);
			jp_nvec_push(P, &v, jp_accept_op(P, "=") ? jp_expr(P) : NULL, pn);
		}
		n->names = v.names;
		n->nnames = v.n;
		n->list = v.v;
		n->n = v.n;
		end_tag(P);
		n->b = body(P, end_macro, &which);
		if (jp_cur(P)->type == JT_NAME)
			P->pos++; /* {% endmacro name %} */
		end_tag(P);
	} else if (jp_accept_name(P, "call")) {
		static const char *const end_call[] = {"endcall", NULL};
		struct nvec v = {0};

		n = jp_node(P, N_CALLBLK);
		if (jp_accept_op(P, "(")) {
			while (!jp_accept_op(P, ")")) {
				const char *pn;

				if (v.n && !jp_accept_op(P, ","))
					jp_fail(P, "expected ',' or ')'");
				pn = jp_name_str(P);
				jp_nvec_push(P, &v, jp_accept_op(P, "=") ? jp_expr(P) : NULL, pn);
			}
		}
		n->names = v.names;
		n->nnames = v.n;
		n->list = v.v;
		n->n = v.n;
		n->a = jp_expr(P);
		if (n->a->kind != E_CALL)
			jp_fail(P, "{% call %} needs a macro call");
		end_tag(P);
		n->b = body(P, end_call, &which);
		end_tag(P);
	} else if (jp_accept_name(P, "filter")) {
		static const char *const end_filter[] = {"endfilter", NULL};

		n = jp_node(P, N_FILTBLK);
		n->a = filter_chain(P);
		if (!n->a)
			jp_fail(P, "{% filter %} needs a filter");
		end_tag(P);
		n->b = body(P, end_filter, &which);
		end_tag(P);
	} else if (jp_accept_name(P, "with")) {
		static const char *const end_with[] = {"endwith", NULL};
		struct nvec v = {0};

		n = jp_node(P, N_WITH);
		while (jp_cur(P)->type != JT_BLOCK_END) {
			const char *pn;

			if (v.n && !jp_accept_op(P, ","))
				jp_fail(P, "expected ','");
			pn = jp_name_str(P);
			jp_expect_op(P, "=");
			jp_nvec_push(P, &v, jp_expr(P), pn);
		}
		n->names = v.names;
		n->nnames = v.n;
		n->list = v.v;
		n->n = v.n;
		end_tag(P);
		n->b = body(P, end_with, &which);
		end_tag(P);
	} else if (jp_accept_name(P, "generation")) {
		static const char *const end_gen[] = {"endgeneration", NULL};

		end_tag(P);
		n = body(P, end_gen, &which);
		end_tag(P);
	} else if (jp_accept_name(P, "break")) {
		n = jp_node(P, N_BREAK);
		end_tag(P);
	} else if (jp_accept_name(P, "continue")) {
		n = jp_node(P, N_CONTINUE);
		end_tag(P);
	} else {
		char m[96];
		const struct jtok *t = jp_cur(P);

		snprintf(m, sizeof(m), "unknown tag '%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
		jp_fail(P, m);
	}
	P->depth--;
	return n;
}

/* statements up to one of the tags ends (NULL-terminated; NULL itself: up to
 * the end of the template); *which: the index of the tag that ended it, whose
 * name is consumed (its tag end is not) */
static struct jnode *body(struct parser *P, const char *const *ends, int *which)
{
	struct jnode *n = jp_node(P, N_BODY);
	struct nvec v = {0};

	for (;;) {
		const struct jtok *t = jp_cur(P);

		if (t->type == JT_EOF) {
			if (ends) {
				char m[64];

				snprintf(m, sizeof(m), "missing {%% %s %%}", ends[0]);
				jp_fail(P, m);
			}
			break;
		}
		if (t->type == JT_TEXT) {
			struct jnode *x = jp_node(P, N_TEXT);

			x->s = t->s;
			x->val = jv_int((int64_t)t->n);
			P->pos++;
			jp_nvec_push(P, &v, x, NULL);
		} else if (t->type == JT_VAR_BEGIN) {
			struct jnode *x = jp_node(P, N_OUT);

			P->pos++;
			x->a = jp_tuple_expr(P);
			if (jp_cur(P)->type != JT_VAR_END)
				jp_fail(P, "expected '}}'");
			P->pos++;
			jp_nvec_push(P, &v, x, NULL);
		} else if (t->type == JT_BLOCK_BEGIN) {
			int k = -1;

			P->pos++;
			for (int i = 0; ends && ends[i]; i++)
				if (jp_is_name(P, ends[i]))
					k = i;
			if (k >= 0) {
				P->pos++;
				*which = k;
				break;
			}
			jp_nvec_push(P, &v, statement(P), NULL);
		} else {
			jp_fail(P, "unexpected token");
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
