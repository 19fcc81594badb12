/*
 * core/text/grammar_run.c — the pushdown automaton of a grammar, one byte at
 * a time: a stack of frames (core/text/grammar_internal.h), one per node
 * being matched. A frame takes the byte, or pushes the node that must take
 * it, or, when its node may end there (a number, an enum value, a finished
 * sequence), pops and hands the byte to the frame below (one byte of
 * lookahead, the only kind JSON needs). Objects, arrays and strings end on
 * their own closing byte.
 *
 * Phases of a frame, by kind:
 *
 *   object  START -{-> OPEN -"-> KEY ... -"-> COLON -:-> VALUE -v-> AFTER
 *           AFTER -,-> COMMA -"-> KEY;  OPEN/AFTER -}-> popped
 *           (n: the next property in schema order; mask: the keys still
 *           matching the bytes of the key being written, k of them so far;
 *           after the key, k: the value's node)
 *   array   START -[-> OPEN -v-> AFTER -,-> ITEM -v-> AFTER -]-> popped
 *   string  START -"-> IN (sub: 1 after a backslash, 2..5 in \uXXXX; u8:
 *           UTF-8 continuation bytes due, k their allowed range)
 *   number  START, MINUS, ZERO, INT, DOT, FRAC, E, ESIGN, EXP (ZERO, INT,
 *           FRAC, EXP may end)
 *   seq     n: the next kid; a kid that is a special token (GK_TOKEN) takes no
 *           byte: coli_gstate_token names it (looking below frames that
 *           ended) and coli_gstate_take_token moves n past it when its id
 *           is accepted
 *
 * Every state the automaton reaches can still be completed (a string's
 * \uD8.. is refused at its second digit, not its fourth), so a mask built
 * from it never leads into a dead end, except where nesting deeper than
 * COLI_GRAMMAR_DEPTH, or a $ref deeper than GRAMMAR_REF_DEPTH in itself, is
 * the only way on (a schema recursing without an exit): there the mask is
 * empty and the sampler lets the end token through.
 */
#include <string.h>

#include "core/text/grammar_internal.h"

enum { OB_START, OB_OPEN, OB_KEY, OB_COLON, OB_VALUE, OB_AFTER, OB_COMMA };
enum { AR_START, AR_OPEN, AR_AFTER, AR_ITEM };
enum { ST_START, ST_IN };
enum { NU_START, NU_MINUS, NU_ZERO, NU_INT, NU_DOT, NU_FRAC, NU_E, NU_ESIGN, NU_EXP };

static int has(const uint8_t set[32], unsigned c)
{
	return set[c >> 3] >> (c & 7) & 1;
}

static void add(uint8_t set[32], unsigned c)
{
	set[c >> 3] |= (uint8_t)(1u << (c & 7));
}

static void firsts_rec(const struct coli_grammar *g, int node, uint8_t set[32], int depth)
{
	const struct gnode *n = &g->nodes[node];
	const char *any = "{[\"-0123456789tfn";

	if (depth > 32)
		return;
	switch (n->kind) {
	case GK_ANY:
		for (const char *p = any; *p; p++)
			add(set, (unsigned char)*p);
		break;
	case GK_OBJECT:
		add(set, '{');
		break;
	case GK_ARRAY:
		add(set, '[');
		break;
	case GK_STRING:
		add(set, '"');
		break;
	case GK_NUMBER:
	case GK_INTEGER:
		for (const char *p = any + 3; *p != 't'; p++)
			add(set, (unsigned char)*p);
		break;
	case GK_LIT:
		for (int i = 0; i < n->n; i++)
			if (g->lits[n->first + i].len)
				add(set, (unsigned char)g->lits[n->first + i].text[0]);
		break;
	case GK_UNION:
		for (int i = 0; i < n->n; i++)
			firsts_rec(g, g->kids[n->first + i], set, depth + 1);
		break;
	case GK_SEQ:
		if (n->n)
			firsts_rec(g, g->kids[n->first], set, depth + 1);
		break;
	}
}

void coli_gnode_firsts(const struct coli_grammar *g, int node, uint8_t set[32])
{
	memset(set, 0, 32);
	firsts_rec(g, node, set, 0);
}

static int is_ws(unsigned c)
{
	return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

/* A fresh frame for node on top; 0 when the stack is full. */
static int push(const struct coli_grammar *g, struct coli_grammar_state *s, int node)
{
	struct gframe *f;
	int n = g->nodes[node].n;

	if (s->depth == COLI_GRAMMAR_DEPTH)
		return 0;
	if (g->nodes[node].rec) { /* a $ref: its recursion bounded */
		int k = 0;

		for (int i = 0; i < s->depth; i++)
			k += s->f[i].node == node;
		if (k >= GRAMMAR_REF_DEPTH)
			return 0;
	}
	f = &s->f[s->depth++];
	memset(f, 0, sizeof(*f));
	f->node = node;
	if (g->nodes[node].kind == GK_LIT)
		f->mask = n >= 64 ? ~0ull : (1ull << n) - 1;
	return 1;
}

/* The top frame becomes node's (a union or "any" choosing its branch). */
static int become(const struct coli_grammar *g, struct coli_grammar_state *s, int node)
{
	s->depth--;
	return push(g, s, node);
}

/* Whitespace between tokens: at most GRAMMAR_WS_MAX bytes in one gap. */
static int gap(struct gframe *f, unsigned c)
{
	if (!is_ws(c) || f->ws >= GRAMMAR_WS_MAX)
		return 0;
	f->ws++;
	return 1;
}

/* The keys a key may be at object frame f: the properties from f->n on, up
 * to and including the first required one. */
static uint64_t key_candidates(const struct gnode *n, const struct gframe *f)
{
	uint64_t m = 0;

	for (int q = (int)f->n; q < n->n; q++) {
		m |= 1ull << q;
		if (n->required >> q & 1)
			break;
	}
	return m;
}

static int closable(const struct gnode *n, const struct gframe *f)
{
	return f->n >= 64 || !(n->required >> f->n);
}

/* A key opens ('"' read) at object frame f. */
static int key_open(const struct coli_grammar *g, struct coli_grammar_state *s,
                    const struct gnode *n, struct gframe *f)
{
	if (!n->n) { /* any key: a string, then the value of any other key */
		if (n->child < 0)
			return 0;
		f->phase = OB_COLON;
		f->k = (uint32_t)n->child;
		return push(g, s, GN_STRING) && coli_gstate_step(g, s, '"');
	}
	f->mask = key_candidates(n, f);
	if (!f->mask)
		return 0;
	f->phase = OB_KEY;
	f->k = 0;
	return 1;
}

static int key_byte(const struct coli_grammar *g, const struct gnode *n, struct gframe *f,
                    unsigned c)
{
	uint64_t m = 0;

	for (int q = 0; q < n->n; q++) {
		const struct gprop *p = &g->props[n->first + q];

		if (!(f->mask >> q & 1))
			continue;
		if (c == '"' && p->len == f->k) { /* the key ends (keys are distinct) */
			f->n = (uint32_t)q + 1;
			f->k = (uint32_t)p->node;
			f->phase = OB_COLON;
			return 1;
		}
		if (f->k < p->len && (unsigned char)p->key[f->k] == c)
			m |= 1ull << q;
	}
	if (!m)
		return 0;
	f->mask = m;
	f->k++;
	return 1;
}

static int object_step(const struct coli_grammar *g, struct coli_grammar_state *s, unsigned c)
{
	struct gframe *f = &s->f[s->depth - 1];
	const struct gnode *n = &g->nodes[f->node];

	switch (f->phase) {
	case OB_START:
		f->phase = OB_OPEN;
		return c == '{';
	case OB_OPEN:
	case OB_AFTER:
	case OB_COMMA:
		if (gap(f, c))
			return 1;
		f->ws = 0;
		if (c == '}' && f->phase != OB_COMMA && closable(n, f)) {
			s->depth--;
			return 1;
		}
		if (c == ',' && f->phase == OB_AFTER) {
			if (!(n->n ? key_candidates(n, f) != 0 : n->child >= 0))
				return 0;
			f->phase = OB_COMMA;
			return 1;
		}
		if (c == '"' && f->phase != OB_AFTER)
			return key_open(g, s, n, f);
		return 0;
	case OB_KEY:
		return key_byte(g, n, f, c);
	case OB_COLON:
		if (gap(f, c))
			return 1;
		f->ws = 0;
		if (c != ':')
			return 0;
		f->phase = OB_VALUE;
		return 1;
	case OB_VALUE:
		if (gap(f, c))
			return 1;
		f->ws = 0;
		f->phase = OB_AFTER;
		return push(g, s, (int)f->k) ? -1 : 0; /* -1: the new top takes c */
	}
	return 0;
}

static int array_step(const struct coli_grammar *g, struct coli_grammar_state *s, unsigned c)
{
	struct gframe *f = &s->f[s->depth - 1];
	const struct gnode *n = &g->nodes[f->node];

	switch (f->phase) {
	case AR_START:
		f->phase = AR_OPEN;
		return c == '[';
	case AR_OPEN:
	case AR_AFTER:
	case AR_ITEM:
		if (gap(f, c))
			return 1;
		f->ws = 0;
		if (c == ']' && f->phase != AR_ITEM && f->n >= n->min) {
			s->depth--;
			return 1;
		}
		if (c == ',' && f->phase == AR_AFTER) {
			if (f->n >= n->max)
				return 0;
			f->phase = AR_ITEM;
			return 1;
		}
		if (f->phase == AR_AFTER || f->n >= n->max)
			return 0;
		f->phase = AR_AFTER;
		f->n++;
		return push(g, s, n->child) ? -1 : 0;
	}
	return 0;
}

static int hex(unsigned c)
{
	return c >= '0' && c <= '9'                 ? (int)c - '0'
	       : (c | 32) >= 'a' && (c | 32) <= 'f' ? (int)(c | 32) - 'a' + 10
	                                            : -1;
}

static int string_step(const struct coli_grammar *g, struct coli_grammar_state *s, unsigned c)
{
	struct gframe *f = &s->f[s->depth - 1];
	const struct gnode *n = &g->nodes[f->node];

	if (f->phase == ST_START) {
		f->phase = ST_IN;
		return c == '"';
	}
	if (f->u8) { /* a continuation byte within the range allowed */
		if (c < (f->k & 0xff) || c > (f->k >> 8))
			return 0;
		f->u8--;
		f->k = 0x80 | 0xbf << 8;
		return 1;
	}
	if (f->sub == 1) { /* after a backslash */
		if (c == 'u') {
			f->sub = 2;
			f->k = 0;
			return 1;
		}
		if (!strchr("\"\\/bfnrt", (int)c) || !c)
			return 0;
		f->sub = 0;
		f->n++;
		return 1;
	}
	if (f->sub >= 2) { /* \uXXXX, no surrogates: D800-DFFF refused at the 2nd digit */
		int v = hex(c);

		if (v < 0 || (f->sub == 3 && f->k == 0xd && v >= 8))
			return 0;
		f->k = f->k << 4 | (uint32_t)v;
		if (++f->sub == 6) {
			f->sub = 0;
			f->n++;
		}
		return 1;
	}
	if (c == '"') {
		if (f->n < n->min)
			return 0;
		s->depth--;
		return 1;
	}
	if (c < 0x20 || f->n >= n->max)
		return 0;
	if (c == '\\') {
		f->sub = 1;
		return 1;
	}
	if (c < 0x80) {
		f->n++;
		return 1;
	}
	/* a UTF-8 lead byte: continuations due and the next one's range */
	if (c >= 0xc2 && c <= 0xdf)
		f->u8 = 1, f->k = 0x80 | 0xbf << 8;
	else if (c == 0xe0)
		f->u8 = 2, f->k = 0xa0 | 0xbf << 8;
	else if (c == 0xed)
		f->u8 = 2, f->k = 0x80 | 0x9f << 8;
	else if (c >= 0xe1 && c <= 0xef)
		f->u8 = 2, f->k = 0x80 | 0xbf << 8;
	else if (c == 0xf0)
		f->u8 = 3, f->k = 0x90 | 0xbf << 8;
	else if (c >= 0xf1 && c <= 0xf3)
		f->u8 = 3, f->k = 0x80 | 0xbf << 8;
	else if (c == 0xf4)
		f->u8 = 3, f->k = 0x80 | 0x8f << 8;
	else
		return 0;
	f->n++;
	return 1;
}

/* 1 taken, 0 refused, -1 the number ended before c (pop and hand it down). */
static int number_step(struct gframe *f, int integer, unsigned c)
{
	int digit = c >= '0' && c <= '9';

	switch (f->phase) {
	case NU_START:
		if (c == '-') {
			f->phase = NU_MINUS;
			return 1;
		}
		/* fall through */
	case NU_MINUS:
		if (!digit)
			return 0;
		f->phase = c == '0' ? NU_ZERO : NU_INT;
		f->sub = 1;
		return 1;
	case NU_INT:
		if (digit) {
			if (f->sub >= GRAMMAR_DIGITS_MAX)
				return 0;
			f->sub++;
			return 1;
		}
		/* fall through */
	case NU_ZERO:
		if (!integer && c == '.') {
			f->phase = NU_DOT;
			return 1;
		}
		if (!integer && (c == 'e' || c == 'E')) {
			f->phase = NU_E;
			return 1;
		}
		return digit ? 0 : -1;
	case NU_DOT:
		if (!digit)
			return 0;
		f->phase = NU_FRAC;
		f->sub = 1;
		return 1;
	case NU_FRAC:
		if (digit) {
			if (f->sub >= GRAMMAR_DIGITS_MAX)
				return 0;
			f->sub++;
			return 1;
		}
		if (c == 'e' || c == 'E') {
			f->phase = NU_E;
			return 1;
		}
		return -1;
	case NU_E:
		if (c == '+' || c == '-') {
			f->phase = NU_ESIGN;
			return 1;
		}
		/* fall through */
	case NU_ESIGN:
		if (!digit)
			return 0;
		f->phase = NU_EXP;
		f->sub = 1;
		return 1;
	case NU_EXP:
		if (digit) {
			if (f->sub >= 3)
				return 0;
			f->sub++;
			return 1;
		}
		return -1;
	}
	return 0;
}

/* 1 taken, 0 refused, -1 the literal ended before c. */
static int lit_step(const struct coli_grammar *g, struct coli_grammar_state *s, unsigned c)
{
	struct gframe *f = &s->f[s->depth - 1];
	const struct gnode *n = &g->nodes[f->node];
	uint64_t m = 0;
	int ended = 0;

	for (int i = 0; i < n->n; i++) {
		const struct glit *l = &g->lits[n->first + i];

		if (!(f->mask >> i & 1))
			continue;
		if (l->len == f->n && l->next < 0)
			ended = 1;
		if (f->n < l->len && (unsigned char)l->text[f->n] == c)
			m |= 1ull << i;
	}
	if (!m)
		return ended ? -1 : 0;
	f->mask = m;
	f->n++;
	for (int i = 0; i < n->n; i++) { /* a text that goes on with a node (prefix-free) */
		const struct glit *l = &g->lits[n->first + i];

		if ((m >> i & 1) && l->len == f->n && l->next >= 0)
			return become(g, s, l->next);
	}
	return 1;
}

int coli_gstate_step(const struct coli_grammar *g, struct coli_grammar_state *s, unsigned char c)
{
	for (int guard = 0; guard < 2 * COLI_GRAMMAR_DEPTH + 8; guard++) {
		struct gframe *f;
		const struct gnode *n;
		int r = 0;

		if (s->dead || !s->depth)
			return 0;
		f = &s->f[s->depth - 1];
		n = &g->nodes[f->node];
		switch (n->kind) {
		case GK_ANY: {
			int to = c == '{'                             ? GN_OBJECT
			         : c == '['                           ? GN_ARRAY
			         : c == '"'                           ? GN_STRING
			         : c == '-' || (c >= '0' && c <= '9') ? GN_NUMBER
			         : c == 't' || c == 'f' || c == 'n'   ? GN_BOOL_NULL
			                                              : -1;

			if (to < 0 || !become(g, s, to))
				return 0;
			r = -2; /* the new frame takes c */
			break;
		}
		case GK_UNION: {
			int i;

			for (i = 0; i < n->n; i++)
				if (has(g->nodes[g->kids[n->first + i]].firsts, c))
					break;
			if (i == n->n || !become(g, s, g->kids[n->first + i]))
				return 0;
			r = -2;
			break;
		}
		case GK_SEQ:
			if (f->n < (uint32_t)n->n) {
				f->n++;
				r = push(g, s, g->kids[n->first + f->n - 1]) ? -2 : 0;
			} else {
				r = -1;
			}
			break;
		case GK_OBJECT:
			r = object_step(g, s, c);
			r = r == -1 ? -2 : r;
			break;
		case GK_ARRAY:
			r = array_step(g, s, c);
			r = r == -1 ? -2 : r;
			break;
		case GK_STRING:
			r = string_step(g, s, c);
			break;
		case GK_NUMBER:
		case GK_INTEGER:
			r = number_step(f, n->kind == GK_INTEGER, c);
			break;
		case GK_LIT:
			r = lit_step(g, s, c);
			break;
		case GK_TOKEN: /* no bytes: only its id (coli_gstate_take_token) */
			return 0;
		}
		if (r == 1)
			return 1;
		if (r == 0)
			return 0;
		if (r == -1) /* the top ended before c: the frame below takes it */
			s->depth--;
		/* r == -2: a new top takes c */
	}
	return 0;
}

static int endable(const struct coli_grammar *g, const struct gframe *f)
{
	const struct gnode *n = &g->nodes[f->node];

	switch (n->kind) {
	case GK_NUMBER:
	case GK_INTEGER:
		return f->phase == NU_ZERO || f->phase == NU_INT || f->phase == NU_FRAC ||
		       f->phase == NU_EXP;
	case GK_LIT:
		for (int i = 0; i < n->n; i++)
			if ((f->mask >> i & 1) && g->lits[n->first + i].len == f->n &&
			    g->lits[n->first + i].next < 0)
				return 1;
		return 0;
	case GK_SEQ:
		return f->n == (uint32_t)n->n;
	}
	return 0;
}

/* The frame whose next kid is a special token, looking below frames that
 * may end (an ended literal still on top), or -1. */
static int token_frame(const struct coli_grammar *g, const struct coli_grammar_state *s)
{
	for (int i = s->dead ? -1 : s->depth - 1; i >= 0; i--) {
		const struct gframe *f = &s->f[i];
		const struct gnode *n = &g->nodes[f->node];

		if (n->kind == GK_SEQ && f->n < (uint32_t)n->n &&
		    g->nodes[g->kids[n->first + f->n]].kind == GK_TOKEN)
			return i;
		if (!endable(g, f))
			return -1;
	}
	return -1;
}

const char *coli_gstate_token(const struct coli_grammar *g, const struct coli_grammar_state *s)
{
	int i = token_frame(g, s);
	const struct gframe *f = i >= 0 ? &s->f[i] : NULL;

	return f ? g->lits[g->nodes[g->kids[g->nodes[f->node].first + f->n]].first].text : NULL;
}

int coli_gstate_take_token(const struct coli_grammar *g, struct coli_grammar_state *s)
{
	int i = token_frame(g, s);

	if (i < 0)
		return 0;
	s->depth = i + 1; /* the frames that ended before it */
	s->f[i].n++;
	return 1;
}

int coli_gstate_accepting(const struct coli_grammar *g, const struct coli_grammar_state *s)
{
	if (s->dead)
		return 0;
	for (int i = s->depth - 1; i >= 0; i--)
		if (!endable(g, &s->f[i]))
			return 0;
	return 1;
}

void coli_gstate_init(const struct coli_grammar *g, struct coli_grammar_state *s)
{
	s->depth = 0;
	s->dead = 0;
	push(g, s, g->root);
}

void coli_gstate_key(const struct coli_grammar *g, const struct coli_grammar_state *s,
                     struct coli_grammar_state *key)
{
	memset(key, 0, sizeof(*key));
	key->depth = s->depth;
	key->dead = s->dead;
	for (int i = 0; i < s->depth; i++) {
		struct gframe *f = &key->f[i];
		const struct gnode *n = &g->nodes[s->f[i].node];

		*f = s->f[i];
		if (n->kind == GK_STRING && !f->u8 && f->sub < 2)
			f->k = 0; /* (left over from a \uXXXX or a UTF-8 range) */
		if ((n->kind == GK_STRING || n->kind == GK_ARRAY) && n->max == GRAMMAR_NOLIMIT &&
		    f->n > n->min)
			f->n = n->min; /* only n < min is ever asked */
	}
}

int coli_gstate_same(const struct coli_grammar_state *a, const struct coli_grammar_state *b)
{
	return a->depth == b->depth && a->dead == b->dead &&
	       !memcmp(a->f, b->f, sizeof(a->f[0]) * (size_t)(a->depth > 0 ? a->depth : 0));
}
