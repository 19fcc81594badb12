/*
 * core/jinja/jinja_internal.h — what the files of the Jinja interpreter share
 * (core/jinja/jinja.h is the folder's public face).
 *
 *   jinja_lex.c     template text -> one token stream (text, tags, expression tokens),
 *                   whitespace control as transformers configures jinja2
 *   jinja_expr.c    tokens -> AST: expressions, and the parser's helpers
 *   jinja_parse.c   tokens -> AST: statements (struct jnode)
 *   jinja_value.c   the arena, values, Python's str()/repr(), json.dumps, ==, <
 *   jinja_eval.c    the evaluator: scopes, statements, expressions, limits
 *   jinja_ops.c     operators, attribute/item access, slices, iteration
 *   jinja_builtin.c filters and tests
 *   jinja_str.c     methods of str/dict/list, the global functions
 *
 * Memory: everything a parse or a render allocates comes from one arena
 * (struct jarena, a list of chunks) owned by the template or by the render
 * call, freed at once; so values are plain structs of pointers, shared the
 * way Python shares them (a namespace or a list is one object however many
 * names hold it), and nothing is reference counted. Errors unwind with
 * longjmp to the public entry (coli_jinja_parse or _render), which frees the
 * arena: no partial state survives a failed call. The arena's size is
 * capped (struct coli_jinja_limits), so a hostile template fails with a
 * message instead of exhausting memory.
 *
 * A value (struct jv, 16 bytes) is a type and a payload:
 *
 *   JV_UNDEF  jinja2's Undefined: prints "", false, iterates empty
 *   JV_NONE, JV_BOOL (i), JV_INT (i, int64), JV_FLOAT (f, double)
 *   JV_STR    s -> {n, bytes[n], NUL}, UTF-8; lengths/indexes in code points
 *   JV_LIST   l -> {n, cap, v[]}; flag 1: a tuple (printed with parentheses),
 *             flag 2 (JL_GEN): what jinja2 returns as a generator (map, select,
 *             selectattr, unique, items, reverse...): always true, no len(),
 *             no index, not JSON, equal only to itself; `| list` makes a list
 *   JV_DICT   d -> {n, cap, k[], v[]}, insertion ordered; flag 1: a namespace()
 *   JV_MACRO  m -> a macro node (and the caller of a {% call %} block)
 *   JV_FUNC   fn -> a global function or a method bound to a value
 *   JV_LOOP   lp -> a for loop's state (loop.index, .first, ...)
 */
#ifndef COLI_JINJA_INTERNAL_H
#define COLI_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "core/jinja/jinja.h"

/* ---- arena ---- */
struct jchunk;
struct jarena {
	struct jchunk *head;
	size_t used, cap; /* bytes handed out, and the limit */
	jmp_buf *fail;    /* where an exhausted arena jumps (with errbuf set) */
	char *err;
	size_t errlen;
};
void *jarena_alloc(struct jarena *a, size_t n);
void jarena_free(struct jarena *a);
/* Fills a->err with "fmt..." and longjmps to a->fail. */
void jfail(struct jarena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* ---- values ---- */
enum jv_type {
	JV_UNDEF = 0,
	JV_NONE,
	JV_BOOL,
	JV_INT,
	JV_FLOAT,
	JV_STR,
	JV_LIST,
	JV_DICT,
	JV_MACRO,
	JV_FUNC,
	JV_LOOP
};
struct jstr {
	size_t n;
	char p[];
};
struct jlist;
struct jdict;
struct jnode;
struct jfunc;
struct jloop;
struct jmacro;
struct jv {
	int t;
	int flag;
	union {
		int64_t i;
		double f;
		struct jstr *s;
		struct jlist *l;
		struct jdict *d;
		struct jmacro *m;
		struct jfunc *fn;
		struct jloop *lp;
	};
};
#define JL_TUPLE 1
#define JL_GEN   2
struct jlist {
	int n, cap;
	struct jv *v;
	const char *err; /* JL_GEN: the error its consumer raises (jinja2's
	                  * generators fail when iterated, not when made), or NULL */
};
struct jdict {
	int n, cap;
	struct jv *k, *v;
};
struct jfunc {
	const char *name; /* "range", or a method name */
	struct jv self;   /* JV_UNDEF for a global function */
};

/* growable byte buffer in the arena */
struct jbuf {
	char *p;
	size_t n, cap;
	size_t max; /* 0: unbounded, else the output limit */
};
void jbuf_put(struct jarena *a, struct jbuf *b, const char *s, size_t n);
void jbuf_puts(struct jarena *a, struct jbuf *b, const char *s);

struct jv jv_undef(void);
struct jv jv_none(void);
struct jv jv_bool(int b);
struct jv jv_int(int64_t i);
struct jv jv_float(double f);
struct jv jv_str(struct jarena *a, const char *s, size_t n);
struct jv jv_cstr(struct jarena *a, const char *s);
struct jv jv_list(struct jarena *a, int cap);
struct jv jv_dict(struct jarena *a, int cap);
void jlist_push(struct jarena *a, struct jlist *l, struct jv v);
/* dict set (replaces an equal key in place), get (NULL if missing) */
void jdict_set(struct jarena *a, struct jdict *d, struct jv k, struct jv v);
struct jv *jdict_get(const struct jdict *d, struct jv k);
struct jv *jdict_gets(const struct jdict *d, const char *k);

int jv_truthy(struct jv v);
int jv_eq(struct jv a, struct jv b);
/* -1, 0, 1; jfail for types Python cannot order */
int jv_cmp(struct jarena *a, struct jv x, struct jv y);
const char *jv_type_name(struct jv v);
/* Python's str(v) and repr(v), appended to b */
void jv_str_to(struct jarena *a, struct jbuf *b, struct jv v);
void jv_repr_to(struct jarena *a, struct jbuf *b, struct jv v);
/* str(v) as a JV_STR value (v itself when it is one) */
struct jv jv_to_str(struct jarena *a, struct jv v);
/* json.dumps(v, ensure_ascii, indent, separators, sort_keys) as
 * transformers' tojson filter: indent < 0 for None; flags JJSON_* */
#define JJSON_SORT  1 /* sort_keys */
#define JJSON_ASCII 2 /* ensure_ascii */
void jv_json_to(struct jarena *a, struct jbuf *b, struct jv v, int indent, const char *item_sep,
                const char *key_sep, int flags, int depth);
/* a JSON document (jansson) as a value */
struct jv jv_from_json(struct jarena *a, const json_t *j, int depth);
/* UTF-8: code points in s[0..n), the byte offset of code point i (clamped) */
size_t jutf8_len(const char *s, size_t n);
size_t jutf8_off(const char *s, size_t n, int64_t i);

/* ---- tokens (jinja_lex.c) ---- */
enum jtok_type {
	JT_EOF = 0,
	JT_TEXT,
	JT_BLOCK_BEGIN,
	JT_BLOCK_END,
	JT_VAR_BEGIN,
	JT_VAR_END,
	JT_NAME,
	JT_STRING,
	JT_INT,
	JT_FLOAT,
	JT_OP /* s holds the operator text */
};
struct jtok {
	int type;
	int line;
	const char *s; /* text, name, string value (unescaped), operator */
	size_t n;
	int64_t i;
	double f;
};
/* Tokenizes src (newlines normalized, one trailing newline dropped, as jinja2
 * does) into *toks (arena); jfail on an unclosed tag or bad token. */
int jlex(struct jarena *a, const char *src, size_t len, struct jtok **toks);

/* ---- the AST (jinja_parse.c) ---- */
enum jnode_kind {
	/* statements */
	N_BODY = 1, /* list: statements */
	N_TEXT,     /* s */
	N_OUT,      /* a: expression */
	N_IF,       /* a: cond, b: body, c: else (a body or an N_IF) */
	N_FOR,      /* names: targets, a: iterable, b: body, c: else, d: filter */
	N_SET,      /* names: targets (1: name, or s: name and s2: attribute), a: expr */
	N_SETBLOCK, /* s: name, b: body, a: filter chain on an E_NAME "" (or NULL) */
	N_MACRO,    /* s: name, names: params, list: defaults (NULL = none), b: body */
	N_CALLBLK,  /* a: the call, names/list: caller's params, b: body */
	N_FILTBLK,  /* a: filter chain on E_NAME "", b: body */
	N_WITH,     /* names, list: values, b: body */
	N_BREAK,
	N_CONTINUE,
	/* expressions */
	E_CONST,  /* val */
	E_NAME,   /* s */
	E_LIST,   /* list */
	E_TUPLE,  /* list */
	E_DICT,   /* list: keys, list2: values */
	E_ATTR,   /* a, s */
	E_ITEM,   /* a, b */
	E_SLICE,  /* a, b: start, c: stop, d: step (each may be NULL) */
	E_CALL,   /* a: callee, list: args, names/list2: keyword args */
	E_FILTER, /* a: operand, s: name, list/names/list2: args */
	E_TEST,   /* a: operand, s: name, list: args, op: 1 negated */
	E_NEG,
	E_POS,
	E_NOT,
	E_AND,
	E_OR,
	E_BIN,  /* op: one of the JOP_ values, a, b */
	E_CMP,  /* list: operands, ops[n-1] */
	E_COND, /* a: cond, b: then, c: else (NULL: undefined) */
};
enum jop {
	JOP_ADD = 1,
	JOP_SUB,
	JOP_MUL,
	JOP_DIV,
	JOP_FLOORDIV,
	JOP_MOD,
	JOP_POW,
	JOP_CONCAT,
	JOP_EQ,
	JOP_NE,
	JOP_LT,
	JOP_LE,
	JOP_GT,
	JOP_GE,
	JOP_IN,
	JOP_NOTIN
};
struct jnode {
	int kind;
	int line;
	int op;
	const char *s, *s2;
	struct jnode *a, *b, *c, *d;
	struct jnode **list, **list2;
	int n, n2;
	const char **names;
	int nnames;
	int *ops;
	struct jv val;
};
struct jmacro {
	const struct jnode *node; /* N_MACRO, or the N_CALLBLK of a caller() */
	struct jmacro *caller;    /* the {% call %} body as a macro, or NULL */
	void *closure;            /* the scope the macro was defined in */
};
struct jnode *jparse(struct jarena *a, const struct jtok *toks);

/* ---- the parser's shared state and helpers (jinja_expr.c; jinja_parse.c
 * parses the statements with them) ---- */
#define MAX_PARSE_DEPTH 200
struct parser {
	struct jarena *a;
	const struct jtok *t;
	int pos;
	int depth;
};

/* a growable array of node pointers / names */
struct nvec {
	struct jnode **v;
	const char **names;
	int n, cap;
};

const struct jtok *jp_cur(struct parser *P);
void jp_fail(struct parser *P, const char *what) __attribute__((noreturn));
int jp_is_op(struct parser *P, const char *op);
int jp_is_name(struct parser *P, const char *name);
int jp_accept_op(struct parser *P, const char *op);
int jp_accept_name(struct parser *P, const char *name);
void jp_expect_op(struct parser *P, const char *op);
const char *jp_name_str(struct parser *P); /* the name token's text, copied */
struct jnode *jp_node(struct parser *P, int kind);
void jp_nvec_push(struct parser *P, struct nvec *v, struct jnode *x, const char *name);
void jp_enter(struct parser *P); /* one level deeper, against MAX_PARSE_DEPTH */
void jp_call_args(struct parser *P, struct jnode *n); /* after '(' */
struct jnode *jp_expr(struct parser *P);
struct jnode *jp_or_expr(struct parser *P);
struct jnode *jp_tuple_expr(struct parser *P); /* expr or "a, b" */
struct jnode *jp_filter_expr(struct parser *P, struct jnode *n);

/* ---- the evaluator (jinja_eval.c) and builtins (jinja_builtin.c) ---- */
struct scope;
/* one render's state: the evaluator's (jinja_eval.c); the builtins use
 * a, line, now, steps and getitem */
struct jstate {
	struct jarena a;
	int line;    /* the template line being run, for messages */
	int64_t now; /* strftime_now's time */
	long steps, max_steps;
	/* obj[k] as jinja2's environment.getitem (the item, else the attribute):
	 * the evaluator's, handed down so that the builtins below it never call up */
	struct jv (*getitem)(struct jstate *st, struct jv obj, struct jv k);
	struct jbuf *out;
	struct scope *root;
	struct jdict *ctx;
	int depth, max_depth;
	int frames;        /* nested eval/exec calls (jinja_eval.c MAX_FRAMES) */
	int ctl;           /* 1: break, 2: continue pending */
	struct jv hole;    /* the value of E_NAME "" in filter chains */
	size_t max_output; /* for the top-level buffer */
};

struct jloop {
	struct jlist *items;
	int i;
};
/* the operators and access (jinja_ops.c) */
struct jv jop_getattr(struct jstate *st, struct jv o, const char *k);
struct jv jop_getitem(struct jstate *st, struct jv o, struct jv k);
struct jv jop_slice(struct jstate *st, struct jv o, const struct jv *a, const struct jv *b,
                    const struct jv *c);
struct jv jop_arith(struct jstate *st, int op, struct jv a, struct jv b); /* JOP_ADD..JOP_CONCAT */
int jop_compare(struct jstate *st, int op, struct jv a, struct jv b);     /* JOP_EQ..JOP_NOTIN */
struct jv jop_iterable(struct jstate *st, struct jv v); /* what a for loop walks, as a list */

/* int64 arithmetic that fails (a message, not undefined behaviour) where
 * Python's integers would grow past 64 bits */
static inline int64_t jint_checked(struct jstate *st, int ovf, int64_t r)
{
	if (ovf)
		jfail(&st->a, "line %d: integer overflow (beyond 64 bits)", st->line);
	return r;
}
static inline int64_t jint_add(struct jstate *st, int64_t a, int64_t b)
{
	int64_t r;
	int ovf = __builtin_add_overflow(a, b, &r);

	return jint_checked(st, ovf, r);
}
static inline int64_t jint_sub(struct jstate *st, int64_t a, int64_t b)
{
	int64_t r;
	int ovf = __builtin_sub_overflow(a, b, &r);

	return jint_checked(st, ovf, r);
}
static inline int64_t jint_mul(struct jstate *st, int64_t a, int64_t b)
{
	int64_t r;
	int ovf = __builtin_mul_overflow(a, b, &r);

	return jint_checked(st, ovf, r);
}
/* a double to int64 as Python's int(), failing outside the range */
static inline int64_t jint_of(struct jstate *st, double d)
{
	return jint_checked(st, !(d > -9.3e18 && d < 9.3e18),
	                    d > -9.3e18 && d < 9.3e18 ? (int64_t)d : 0);
}

/* a generator that failed when it was made fails where it is consumed */
static inline void jgen_check(struct jstate *st, struct jv v)
{
	if (v.t == JV_LIST && v.l->err)
		jfail(&st->a, "%s", v.l->err);
}

/* loop iterations, range items and the like, against the limit */
static inline void jstate_count(struct jstate *st, long steps)
{
	st->steps += steps;
	if (st->steps > st->max_steps)
		jfail(&st->a,
		      "line %d: template ran more than %ld steps (loops, range, macro calls)",
		      st->line, st->max_steps);
}
/* shared by the filters and the methods (jinja_str.c) */
struct jv *jarg(struct jv *args, int nargs, const char **kwn, struct jv *kwv, int nkw, int i,
                const char *k); /* keyword k, else positional i, else NULL */
struct jv jneed_str(struct jstate *st, struct jv v, const char *who);
int jis_pyspace(unsigned char c);
size_t jcp_len_at(const char *s, size_t n, size_t i);
struct jv jstr_case(struct jstate *st, struct jv v, int mode); /* 0 lower 1 upper 2 title 3 cap */
struct jv jstrip(struct jstate *st, struct jv v, const struct jv *chars, int left, int right);
struct jv jsplit(struct jstate *st, struct jv v, const struct jv *sep, const struct jv *maxv,
                 int from_right);
struct jv jreplace(struct jstate *st, struct jv v, struct jv old, struct jv new,
                   const struct jv *count);
int jaffix(struct jstate *st, struct jv v, struct jv x, int end);
struct jv jjoin(struct jstate *st, struct jv seq, struct jv sep, const struct jv *attr);
struct jv jas_list(struct jstate *st, struct jv v); /* list(v) */
struct jv jbuiltin_filter(struct jstate *st, const char *name, struct jv v, struct jv *args,
                          int nargs, const char **kwn, struct jv *kwv, int nkw);
int jbuiltin_test(struct jstate *st, const char *name, struct jv v, struct jv *args, int nargs);
/* a global function by name (range, namespace, ...), JV_UNDEF if none */
struct jv jbuiltin_global(struct jstate *st, const char *name);
/* obj.name: a method bound to obj, or JV_UNDEF */
struct jv jbuiltin_method(struct jstate *st, struct jv obj, const char *name);
struct jv jbuiltin_call(struct jstate *st, struct jfunc *fn, struct jv *args, int nargs,
                        const char **kwn, struct jv *kwv, int nkw);

#endif
