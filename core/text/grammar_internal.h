/*
 * core/text/grammar_internal.h — what core/text/grammar*.c share: the
 * compiled grammar (a graph of nodes made from a JSON schema), the run-time
 * state of its pushdown automaton over bytes, and the vocabulary trie.
 *
 * A grammar is an array of nodes; nodes 0..GN_FIXED-1 are the same in every
 * grammar (any value, any object, any array, any string, any number, the
 * literals true/false/null), the schema's start after them. Objects list
 * their properties (props[first..first+n)), literals and switches their
 * texts (lits[...]), unions and sequences their members (kids[...]).
 *
 * A state is a stack of frames, one per node being matched, the innermost
 * last; depth 0 after the root value ended. A frame is 24 bytes; a step
 * touches the top one or two, and the mask copies only the used ones.
 */
#ifndef COLI_TEXT_GRAMMAR_INTERNAL_H
#define COLI_TEXT_GRAMMAR_INTERNAL_H

#include <jansson.h>
#include <stdint.h>

#include "core/coli.h"

enum gkind {
	GK_ANY,     /* any JSON value: the first byte picks one of the fixed nodes */
	GK_OBJECT,  /* {"k": v, ...}: props in schema order, or any keys (n_props 0) */
	GK_ARRAY,   /* [v, ...]: items node, min..max items */
	GK_STRING,  /* "...": min..max characters (code points) */
	GK_NUMBER,  /* -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?, digits bounded */
	GK_INTEGER, /* -?(0|[1-9]d*) */
	GK_LIT,     /* one of the texts lits[first..first+n); each may go on with a node */
	GK_UNION,   /* one of kids[first..first+n), told apart by their first byte */
	GK_SEQ,     /* kids[first..first+n) one after the other (a $ref: one kid, rec set) */
	GK_TOKEN,   /* one special token, lits[first].text its name: no bytes match it, the
	             * mask allows its id (a sequence's next kid) and accepting it moves on */
};

/* the fixed nodes, at the start of every grammar */
enum {
	GN_ANY,
	GN_OBJECT,
	GN_ARRAY,
	GN_STRING,
	GN_NUMBER,
	GN_BOOL_NULL, /* true, false, null */
	GN_FIXED
};

#define GRAMMAR_MAX_PROPS  64 /* per object: the candidate keys are a uint64_t mask */
#define GRAMMAR_MAX_LITS   64 /* per enum / switch */
#define GRAMMAR_MAX_NODES  4096
#define GRAMMAR_WS_MAX     8  /* whitespace bytes in one gap between tokens of JSON */
#define GRAMMAR_REF_DEPTH  5  /* a $ref's frames on the stack at once: its recursion */
#define GRAMMAR_DIGITS_MAX 16 /* digits in each part of a number */
#define GRAMMAR_NOLIMIT    0xffffffffu

struct gnode {
	uint8_t kind;
	uint8_t rec;      /* a $ref: at most GRAMMAR_REF_DEPTH of its frames nest */
	int32_t first, n; /* props / lits / kids */
	int32_t child;    /* array: items; object: value of any other key (-1: none) */
	uint32_t min, max;
	uint64_t required;  /* object: required props, bit i = props[first + i] */
	uint8_t firsts[32]; /* bit set of the bytes the node's text can start with */
};

struct gprop {
	char *key; /* the key as JSON writes it between its quotes (escaped) */
	uint32_t len;
	int32_t node;
};

struct glit {
	char *text;
	uint32_t len;
	int32_t next; /* node matched after the text, -1: none */
};

struct coli_grammar {
	struct gnode *nodes;
	int n_nodes, cap_nodes;
	struct gprop *props;
	int n_props, cap_props;
	struct glit *lits;
	int n_lits, cap_lits;
	int32_t *kids;
	int n_kids, cap_kids;
	int root;
};

struct gframe {
	int32_t node;
	uint8_t phase;
	uint8_t ws;  /* whitespace bytes in the current gap */
	uint8_t sub; /* string: escape state; number: digits in the part */
	uint8_t u8;  /* string: UTF-8 continuation bytes still due */
	uint32_t n;  /* object: next prop; array: items; string: chars; lit: bytes; seq: next kid */
	uint32_t k;  /* object: key bytes; string: next byte's range (lo | hi << 8) or \u value */
	uint64_t mask; /* object: candidate keys; lit: candidate texts */
};

struct coli_grammar_state {
	int depth; /* frames in use; 0: the value is complete */
	int dead;  /* a byte was refused: nothing more is accepted */
	struct gframe f[COLI_GRAMMAR_DEPTH];
};

/* core/text/grammar.c: a grammar with only the fixed nodes; schema s added
 * to g (its node, or -errno with err filled) */
int coli_grammar_begin(struct coli_grammar **out);
int coli_grammar_add_schema(struct coli_grammar *g, json_t *s, char *err, size_t errlen);
int coli_grammar_add_lit(struct coli_grammar *g, const char *text, size_t len, int next);
int coli_grammar_add_node(struct coli_grammar *g, int kind, const int *kids, int n);
void coli_grammar_finish(struct coli_grammar *g); /* every node's firsts */

/* core/text/grammar_mask.c: a token's bytes in the trie (*len 0: left out) */
const char *coli_vocab_trie_piece(const struct coli_vocab_trie *v, int id, size_t *len);
/* a special token's id by name, or -1; a special token's name, or NULL */
int coli_vocab_trie_special_id(const struct coli_vocab_trie *v, const char *name);
const char *coli_vocab_trie_special_name(const struct coli_vocab_trie *v, int id);

/* core/text/grammar_run.c */
void coli_gstate_init(const struct coli_grammar *g, struct coli_grammar_state *s);
/* 1: c taken (s advanced), 0: refused (s unspecified: copy it before). */
int coli_gstate_step(const struct coli_grammar *g, struct coli_grammar_state *s, unsigned char c);
/* 1 when the text so far is a whole value (EOS may come). */
int coli_gstate_accepting(const struct coli_grammar *g, const struct coli_grammar_state *s);
void coli_gnode_firsts(const struct coli_grammar *g, int node, uint8_t set[32]);
/* The special token s expects next (its name), or NULL; taking it: 1, or 0
 * when s expects none. */
const char *coli_gstate_token(const struct coli_grammar *g, const struct coli_grammar_state *s);
int coli_gstate_take_token(const struct coli_grammar *g, struct coli_grammar_state *s);
/* key = s with what no step can tell apart made equal (an unbounded string's
 * or array's count past its minimum, a string's stale k): two states of one
 * key have one mask. coli_gstate_same compares two keys. */
void coli_gstate_key(const struct coli_grammar *g, const struct coli_grammar_state *s,
                     struct coli_grammar_state *key);
int coli_gstate_same(const struct coli_grammar_state *a, const struct coli_grammar_state *b);

#endif
