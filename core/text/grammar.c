/*
 * core/text/grammar.c — a JSON schema compiled into the nodes of a grammar
 * (core/text/grammar_internal.h), which grammar_run.c matches byte by byte
 * and grammar_mask.c turns into a token mask.
 *
 * The subset (anything else is refused, naming the keyword: never ignored):
 *
 *   type          object, array, string, number, integer, boolean, null, or a
 *                 list of them (one branch each)
 *   properties    written in the order the schema lists them; each optional
 *                 one may be left out, the required ones never
 *   required      names outside properties become properties of any value
 *   additionalProperties  false, true or a schema: with properties listed,
 *                 only those are written (a valid subset); without, any keys,
 *                 each value the additionalProperties schema (true: any)
 *   items, minItems, maxItems
 *   minLength, maxLength (code points; \uXXXX counts one, surrogates refused)
 *   enum, const   the values written as compact JSON (jansson), matched exactly
 *   anyOf, oneOf  branches told apart by their first byte: two objects, two
 *                 arrays, two strings, or integer and number are refused
 *   $ref          "#", "#/$defs/NAME", "#/definitions/NAME"; one reference
 *                 nests at most GRAMMAR_REF_DEPTH (5) times in itself (where
 *                 recursion must stop: an optional property, an empty
 *                 array, another branch), all of it within COLI_GRAMMAR_DEPTH
 *   annotations   title, description, $schema, $id, $comment, default,
 *                 examples, $defs, definitions, strict, and deprecated,
 *                 readOnly, writeOnly: no effect on what is valid
 *
 * The JSON written: no whitespace before the value or after it; between
 * tokens at most GRAMMAR_WS_MAX (8) bytes of space, tab, CR, LF; numbers of at
 * most GRAMMAR_DIGITS_MAX digits in each part; strings of valid UTF-8 with
 * no control bytes. Values of any type nest up to COLI_GRAMMAR_DEPTH.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text/grammar_internal.h"

struct build {
	struct coli_grammar *g;
	json_t *root;
	/* $ref targets compiled so far: (pointer text, node) */
	char *ref_name[256];
	int ref_node[256];
	int n_refs;
	char *err;
	size_t errlen;
};

static int fail(struct build *b, int rc, const char *fmt, ...)
{
	va_list ap;

	if (b->err && b->errlen) {
		va_start(ap, fmt);
		vsnprintf(b->err, b->errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

static int grow(void **p, int *cap, int need, size_t size)
{
	int c = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	q = realloc(*p, size * (size_t)c);
	if (!q)
		return -ENOMEM;
	*p = q, *cap = c;
	return 0;
}

static int new_node(struct build *b, int kind)
{
	struct coli_grammar *g = b->g;

	if (g->n_nodes >= GRAMMAR_MAX_NODES)
		return fail(b, -E2BIG, "schema: more than %d nodes", GRAMMAR_MAX_NODES);
	if (grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(*g->nodes)))
		return -ENOMEM;
	memset(&g->nodes[g->n_nodes], 0, sizeof(*g->nodes));
	g->nodes[g->n_nodes].kind = (uint8_t)kind;
	g->nodes[g->n_nodes].child = -1;
	g->nodes[g->n_nodes].max = GRAMMAR_NOLIMIT;
	return g->n_nodes++;
}

/* A literal text (copied) going on with node next (-1: none); its index. */
static int add_lit(struct build *b, const char *text, size_t len, int next)
{
	struct coli_grammar *g = b->g;
	struct glit *l;

	if (grow((void **)&g->lits, &g->cap_lits, g->n_lits + 1, sizeof(*g->lits)))
		return -ENOMEM;
	l = &g->lits[g->n_lits];
	l->text = malloc(len + 1);
	if (!l->text)
		return -ENOMEM;
	memcpy(l->text, text, len);
	l->text[len] = 0;
	l->len = (uint32_t)len;
	l->next = next;
	return g->n_lits++;
}

static int add_kid(struct build *b, int node)
{
	struct coli_grammar *g = b->g;

	if (grow((void **)&g->kids, &g->cap_kids, g->n_kids + 1, sizeof(*g->kids)))
		return -ENOMEM;
	g->kids[g->n_kids] = node;
	return g->n_kids++;
}

/* A literal node of n texts (already added from index first). */
static int lit_node(struct build *b, int first, int n)
{
	int id = new_node(b, GK_LIT);

	if (id < 0)
		return id;
	b->g->nodes[id].first = first;
	b->g->nodes[id].n = n;
	return id;
}

/* A node matching exactly the compact JSON of v. */
static int value_lit(struct build *b, json_t *v, int *lit)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	int rc;

	if (!s)
		return -ENOMEM;
	rc = add_lit(b, s, strlen(s), -1);
	free(s);
	if (rc >= 0)
		*lit = rc;
	return rc < 0 ? rc : 0;
}

/* The fixed nodes every grammar starts with (GN_*). */
static int fixed_nodes(struct build *b)
{
	static const char *tfn[3] = {"true", "false", "null"};
	int id, first = -1;

	if (new_node(b, GK_ANY) != GN_ANY)
		return -ENOMEM;
	id = new_node(b, GK_OBJECT);
	if (id != GN_OBJECT)
		return -ENOMEM;
	b->g->nodes[id].child = GN_ANY;
	id = new_node(b, GK_ARRAY);
	if (id != GN_ARRAY)
		return -ENOMEM;
	b->g->nodes[id].child = GN_ANY;
	if (new_node(b, GK_STRING) != GN_STRING || new_node(b, GK_NUMBER) != GN_NUMBER)
		return -ENOMEM;
	for (int i = 0; i < 3; i++) {
		int l = add_lit(b, tfn[i], strlen(tfn[i]), -1);

		if (l < 0)
			return l;
		first = i ? first : l;
	}
	return lit_node(b, first, 3) == GN_BOOL_NULL ? 0 : -ENOMEM;
}

static int compile(struct build *b, json_t *s, int depth);

static const char *const annotations[] = {
    "title", "description", "$schema", "$id",        "$comment", "default",   "examples",
    "$defs", "definitions", "strict",  "deprecated", "readOnly", "writeOnly", NULL};
static const char *const handled[] = {"type",      "properties", "required", "additionalProperties",
                                      "items",     "minItems",   "maxItems", "minLength",
                                      "maxLength", "enum",       "const",    "anyOf",
                                      "oneOf",     "$ref",       NULL};

static int in_list(const char *const *l, const char *k)
{
	for (; *l; l++)
		if (!strcmp(*l, k))
			return 1;
	return 0;
}

/* Every keyword of s known, else -ENOTSUP naming it. */
static int check_keywords(struct build *b, json_t *s)
{
	const char *k;
	json_t *v;

	json_object_foreach(s, k, v)
	{
		if (in_list(annotations, k) || in_list(handled, k))
			continue;
		if (!strcmp(k, "uniqueItems") && json_is_false(v))
			continue;
		return fail(b, -ENOTSUP, "schema keyword '%s' is not supported", k);
	}
	return 0;
}

static int want_count(struct build *b, json_t *s, const char *k, uint32_t *out)
{
	json_t *v = json_object_get(s, k);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0x7fffffff)
		return fail(b, -EINVAL, "schema: '%s' must be a non-negative integer", k);
	*out = (uint32_t)json_integer_value(v);
	return 0;
}

/* $ref: the node of its target, compiled once (a cycle finds the node being
 * made). */
static int ref_target(struct build *b, const char *ref, int depth)
{
	json_t *t = NULL;
	int id;

	for (int i = 0; i < b->n_refs; i++)
		if (!strcmp(b->ref_name[i], ref))
			return b->ref_node[i];
	if (!strcmp(ref, "#"))
		t = b->root;
	else if (!strncmp(ref, "#/$defs/", 8))
		t = json_object_get(json_object_get(b->root, "$defs"), ref + 8);
	else if (!strncmp(ref, "#/definitions/", 14))
		t = json_object_get(json_object_get(b->root, "definitions"), ref + 14);
	else
		return fail(b, -ENOTSUP,
		            "schema '$ref' '%s': only \"#\", \"#/$defs/NAME\" and "
		            "\"#/definitions/NAME\" are supported",
		            ref);
	if (!t)
		return fail(b, -EINVAL, "schema '$ref' '%s' names nothing", ref);
	if (b->n_refs == 256)
		return fail(b, -E2BIG, "schema: more than 256 '$ref' targets");
	/* a sequence of one stands for the target (compiled after it: cycles
	 * find it), its frames counted on the stack to bound the recursion */
	id = new_node(b, GK_SEQ);
	if (id < 0)
		return id;
	b->ref_name[b->n_refs] = strdup(ref);
	if (!b->ref_name[b->n_refs])
		return -ENOMEM;
	b->ref_node[b->n_refs++] = id;
	{
		int body = compile(b, t, depth + 1), k;

		if (body < 0)
			return body;
		k = add_kid(b, body);
		if (k < 0)
			return k;
		b->g->nodes[id].first = k;
		b->g->nodes[id].n = 1;
		b->g->nodes[id].rec = 1;
	}
	return id;
}

static int compile_object(struct build *b, json_t *s, int depth)
{
	json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
	json_t *add = json_object_get(s, "additionalProperties"), *v;
	struct coli_grammar *g = b->g;
	const char *k;
	size_t i;
	int id, first = g->n_props, n = 0, add_node = GN_ANY;

	if (props && !json_is_object(props))
		return fail(b, -EINVAL, "schema: 'properties' must be an object");
	if (req && !json_is_array(req))
		return fail(b, -EINVAL, "schema: 'required' must be an array");
	if (add && json_is_false(add))
		add_node = -1;
	else if (add && !json_is_true(add)) {
		add_node = compile(b, add, depth + 1);
		if (add_node < 0)
			return add_node;
	}
	/* the properties first (their nodes are made in between: reserve) */
	if (json_object_size(props) + json_array_size(req) > GRAMMAR_MAX_PROPS)
		return fail(b, -E2BIG, "schema: more than %d properties in an object",
		            GRAMMAR_MAX_PROPS);
	if (grow((void **)&g->props, &g->cap_props,
	         g->n_props + (int)(json_object_size(props) + json_array_size(req)),
	         sizeof(*g->props)))
		return -ENOMEM;
	if (json_object_size(props) + json_array_size(req))
		memset(g->props + first, 0,
		       sizeof(*g->props) * (json_object_size(props) + json_array_size(req)));
	g->n_props += (int)(json_object_size(props) + json_array_size(req));
	json_object_foreach(props, k, v)
	{
		json_t *ks = json_string(k);
		char *e = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
		int node;

		json_decref(ks);
		if (!e)
			return -ENOMEM;
		g->props[first + n].key = e; /* "..." : the quotes dropped below */
		g->props[first + n].len = (uint32_t)strlen(e) - 2;
		memmove(e, e + 1, strlen(e) - 2);
		e[strlen(e) - 2] = 0;
		g->props[first + n].node = -1;
		n++;
		node = compile(b, v, depth + 1);
		if (node < 0)
			return node;
		g->props[first + n - 1].node = node;
	}
	id = new_node(b, GK_OBJECT);
	if (id < 0)
		return id;
	json_array_foreach(req, i, v)
	{
		const char *name = json_string_value(v);
		int p = -1;

		if (!name)
			return fail(b, -EINVAL, "schema: 'required' must list strings");
		for (int j = 0; j < n; j++) {
			json_t *ks = json_string(name);
			char *e = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;

			json_decref(ks);
			if (!e)
				return -ENOMEM;
			if (strlen(e) - 2 == g->props[first + j].len &&
			    !memcmp(e + 1, g->props[first + j].key, g->props[first + j].len))
				p = j;
			free(e);
		}
		if (p < 0) { /* required but not listed: a property of any value */
			json_t *ks = json_string(name);
			char *e = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;

			json_decref(ks);
			if (!e)
				return -ENOMEM;
			if (add_node == -1) {
				free(e);
				return fail(b, -EINVAL,
				            "schema: '%s' is required but neither in "
				            "'properties' nor allowed by 'additionalProperties'",
				            name);
			}
			memmove(e, e + 1, strlen(e) - 2);
			e[strlen(e) - 2] = 0;
			p = n++;
			g->props[first + p] = (struct gprop){e, (uint32_t)strlen(e), add_node};
		}
		g->nodes[id].required |= 1ull << p;
	}
	g->nodes[id].first = first;
	g->nodes[id].n = n;
	g->nodes[id].child = n ? -1 : add_node; /* listed: only those are written */
	return id;
}

static int compile_type(struct build *b, json_t *s, const char *t, int depth)
{
	int id;

	if (!strcmp(t, "object"))
		return compile_object(b, s, depth);
	if (!strcmp(t, "array")) {
		json_t *items = json_object_get(s, "items");
		int child = GN_ANY;

		if (items) {
			child = compile(b, items, depth + 1);
			if (child < 0)
				return child;
		}
		id = new_node(b, GK_ARRAY);
		if (id < 0)
			return id;
		b->g->nodes[id].child = child;
		if (want_count(b, s, "minItems", &b->g->nodes[id].min) ||
		    want_count(b, s, "maxItems", &b->g->nodes[id].max))
			return -EINVAL;
		if (b->g->nodes[id].min > b->g->nodes[id].max)
			return fail(b, -EINVAL,
			            "schema: 'minItems' exceeds 'maxItems' (no value fits)");
		return id;
	}
	if (!strcmp(t, "string")) {
		id = new_node(b, GK_STRING);
		if (id < 0)
			return id;
		if (want_count(b, s, "minLength", &b->g->nodes[id].min) ||
		    want_count(b, s, "maxLength", &b->g->nodes[id].max))
			return -EINVAL;
		if (b->g->nodes[id].min > b->g->nodes[id].max)
			return fail(b, -EINVAL,
			            "schema: 'minLength' exceeds 'maxLength' (no value fits)");
		return id;
	}
	if (!strcmp(t, "number"))
		return new_node(b, GK_NUMBER);
	if (!strcmp(t, "integer"))
		return new_node(b, GK_INTEGER);
	if (!strcmp(t, "boolean") || !strcmp(t, "null")) {
		int first = add_lit(b, t[0] == 'n' ? "null" : "true", 4, -1);

		if (first < 0 || (t[0] == 'b' && add_lit(b, "false", 5, -1) < 0))
			return -ENOMEM;
		return lit_node(b, first, t[0] == 'n' ? 1 : 2);
	}
	return fail(b, -EINVAL, "schema: unknown 'type' \"%s\"", t);
}

/* Is v an instance of type t (enum values kept where a type is given)? */
static int of_type(json_t *v, const char *t)
{
	if (!strcmp(t, "integer"))
		return json_is_integer(v) ||
		       (json_is_real(v) &&
		        json_real_value(v) == (double)(long long)json_real_value(v));
	return (!strcmp(t, "object") && json_is_object(v)) ||
	       (!strcmp(t, "array") && json_is_array(v)) ||
	       (!strcmp(t, "string") && json_is_string(v)) ||
	       (!strcmp(t, "number") && json_is_number(v)) ||
	       (!strcmp(t, "boolean") && json_is_boolean(v)) ||
	       (!strcmp(t, "null") && json_is_null(v));
}

static int typed(json_t *v, json_t *type)
{
	size_t i;
	json_t *t;

	if (!type)
		return 1;
	if (json_is_string(type))
		return of_type(v, json_string_value(type));
	json_array_foreach(type, i,
	                   t) if (json_is_string(t) && of_type(v, json_string_value(t))) return 1;
	return 0;
}

/* A union node of the n nodes in alts (first bytes must not overlap). */
static int union_of(struct build *b, const int *alts, int n, const char *kw)
{
	uint8_t seen[32] = {0}, f[32];
	int id, first = -1;

	if (n == 1)
		return alts[0];
	for (int i = 0; i < n; i++) {
		coli_gnode_firsts(b->g, alts[i], f);
		for (int j = 0; j < 32; j++)
			if (seen[j] & f[j])
				return fail(b, -ENOTSUP,
				            "schema '%s': branches that can begin with the same "
				            "byte (two objects, arrays or strings, integer and "
				            "number) are not supported",
				            kw);
		for (int j = 0; j < 32; j++)
			seen[j] |= f[j];
	}
	for (int i = 0; i < n; i++) {
		int k = add_kid(b, alts[i]);

		if (k < 0)
			return k;
		first = i ? first : k;
	}
	id = new_node(b, GK_UNION);
	if (id < 0)
		return id;
	b->g->nodes[id].first = first;
	b->g->nodes[id].n = n;
	return id;
}

static int compile(struct build *b, json_t *s, int depth)
{
	json_t *type, *x;
	int alts[16], n = 0, rc;

	if (depth > 64)
		return fail(b, -E2BIG, "schema: nested more than 64 deep");
	if (json_is_true(s))
		return GN_ANY;
	if (!json_is_object(s))
		return fail(b, -EINVAL, "schema: a schema must be an object or true");
	rc = check_keywords(b, s);
	if (rc)
		return rc;
	if ((x = json_object_get(s, "$ref"))) {
		if (!json_is_string(x))
			return fail(b, -EINVAL, "schema: '$ref' must be a string");
		if (json_object_size(s) > 1) {
			const char *k;
			json_t *v;

			json_object_foreach(
			    s, k, v) if (strcmp(k, "$ref") &&
			                 !in_list(annotations,
			                          k)) return fail(b, -ENOTSUP,
			                                          "schema keyword '%s' beside "
			                                          "'$ref' is not supported",
			                                          k);
		}
		return ref_target(b, json_string_value(x), depth);
	}
	type = json_object_get(s, "type");
	if (type && !json_is_string(type) && !json_is_array(type))
		return fail(b, -EINVAL, "schema: 'type' must be a string or a list");
	if ((x = json_object_get(s, "const")) || (x = json_object_get(s, "enum"))) {
		int first = -1, lit;
		size_t i;
		json_t *v;

		if (json_object_get(s, "const") && json_object_get(s, "enum"))
			return fail(b, -ENOTSUP, "schema: 'const' beside 'enum' is not supported");
		if (json_object_get(s, "enum") && !json_is_array(x))
			return fail(b, -EINVAL, "schema: 'enum' must be a list");
		if (json_object_get(s, "anyOf") || json_object_get(s, "oneOf"))
			return fail(b, -ENOTSUP,
			            "schema: 'enum'/'const' beside 'anyOf' is not supported");
		if (json_object_get(s, "const")) {
			if (!typed(x, type))
				return fail(b, -EINVAL, "schema: 'const' is not of its 'type'");
			rc = value_lit(b, x, &first);
			return rc ? rc : lit_node(b, first, 1);
		}
		if (json_array_size(x) > GRAMMAR_MAX_LITS)
			return fail(b, -E2BIG, "schema: 'enum' of more than %d values",
			            GRAMMAR_MAX_LITS);
		json_array_foreach(x, i, v)
		{
			if (!typed(v, type))
				continue;
			rc = value_lit(b, v, &lit);
			if (rc)
				return rc;
			first = n++ ? first : lit;
		}
		if (!n)
			return fail(b, -EINVAL, "schema: 'enum' has no value of its 'type'");
		return lit_node(b, first, n);
	}
	if ((x = json_object_get(s, "anyOf")) || (x = json_object_get(s, "oneOf"))) {
		const char *kw = json_object_get(s, "anyOf") ? "anyOf" : "oneOf";
		size_t i;
		json_t *v;

		if (json_object_get(s, "anyOf") && json_object_get(s, "oneOf"))
			return fail(b, -ENOTSUP, "schema: 'anyOf' beside 'oneOf' is not supported");
		if (type)
			return fail(b, -ENOTSUP, "schema: 'type' beside '%s' is not supported", kw);
		if (!json_is_array(x) || !json_array_size(x) || json_array_size(x) > 16)
			return fail(b, -EINVAL, "schema: '%s' must be a list of 1 to 16 schemas",
			            kw);
		json_array_foreach(x, i, v)
		{
			rc = compile(b, v, depth + 1);
			if (rc < 0)
				return rc;
			alts[n++] = rc;
		}
		return union_of(b, alts, n, kw);
	}
	if (!type) { /* any value; object keywords: an object */
		const char *k;
		json_t *v;

		if (json_object_get(s, "properties") || json_object_get(s, "required") ||
		    json_object_get(s, "additionalProperties"))
			return compile_type(b, s, "object", depth);
		json_object_foreach(s, k, v) if (!in_list(annotations, k)) return fail(
		    b, -ENOTSUP, "schema keyword '%s' without 'type' is not supported", k);
		return GN_ANY;
	}
	if (json_is_string(type))
		return compile_type(b, s, json_string_value(type), depth);
	{
		size_t i;
		json_t *t;
		int has_int = 0, has_num = 0;

		json_array_foreach(type, i, t)
		{
			has_int |= json_is_string(t) && !strcmp(json_string_value(t), "integer");
			has_num |= json_is_string(t) && !strcmp(json_string_value(t), "number");
		}
		if (!json_array_size(type) || json_array_size(type) > 7)
			return fail(b, -EINVAL, "schema: 'type' must list 1 to 7 types");
		json_array_foreach(type, i, t)
		{
			if (!json_is_string(t))
				return fail(b, -EINVAL, "schema: 'type' must list strings");
			if (has_num && !strcmp(json_string_value(t), "integer"))
				continue; /* every integer is a number */
			rc = compile_type(b, s, json_string_value(t), depth);
			if (rc < 0)
				return rc;
			alts[n++] = rc;
		}
		(void)has_int;
		return union_of(b, alts, n, "type");
	}
}

void coli_grammar_free(struct coli_grammar *g)
{
	if (!g)
		return;
	for (int i = 0; i < g->n_props; i++)
		free(g->props[i].key);
	for (int i = 0; i < g->n_lits; i++)
		free(g->lits[i].text);
	free(g->nodes), free(g->props), free(g->lits), free(g->kids);
	free(g);
}

/* A grammar with its fixed nodes (b set up for it). */
int coli_grammar_begin(struct coli_grammar **out)
{
	struct build b = {0};

	*out = NULL;
	b.g = calloc(1, sizeof(*b.g));
	if (!b.g)
		return -ENOMEM;
	if (fixed_nodes(&b)) {
		coli_grammar_free(b.g);
		return -ENOMEM;
	}
	*out = b.g;
	return 0;
}

/* Compile schema s into g (begun); its node, or -errno (err filled). */
int coli_grammar_add_schema(struct coli_grammar *g, json_t *s, char *err, size_t errlen)
{
	struct build b = {.g = g, .root = s, .err = err, .errlen = errlen};
	int rc = compile(&b, s, 0);

	for (int i = 0; i < b.n_refs; i++)
		free(b.ref_name[i]);
	if (rc == -ENOMEM)
		fail(&b, rc, "schema: out of memory");
	return rc;
}

int coli_grammar_add_lit(struct coli_grammar *g, const char *text, size_t len, int next)
{
	struct build b = {.g = g};

	return add_lit(&b, text, len, next);
}

int coli_grammar_add_node(struct coli_grammar *g, int kind, const int *kids, int n)
{
	struct build b = {.g = g};
	int id, first = -1;

	if (kind == GK_LIT || kind == GK_TOKEN) {
		id = lit_node(&b, kids[0], n);
		if (id >= 0)
			g->nodes[id].kind = (uint8_t)kind;
		return id;
	}
	for (int i = 0; i < n; i++) {
		int k = add_kid(&b, kids[i]);

		if (k < 0)
			return k;
		first = i ? first : k;
	}
	id = new_node(&b, kind);
	if (id >= 0) {
		g->nodes[id].first = first;
		g->nodes[id].n = n;
	}
	return id;
}

void coli_grammar_finish(struct coli_grammar *g)
{
	for (int i = 0; i < g->n_nodes; i++)
		coli_gnode_firsts(g, i, g->nodes[i].firsts);
}

int coli_grammar_from_schema(const char *schema, size_t len, struct coli_grammar **out, char *err,
                             size_t errlen)
{
	json_error_t je;
	json_t *s = json_loadb(schema, len, 0, &je);
	int rc;

	*out = NULL;
	if (!s) {
		if (err)
			snprintf(err, errlen, "schema: malformed JSON at line %d: %s", je.line,
			         je.text);
		return -EINVAL;
	}
	rc = coli_grammar_begin(out);
	if (!rc) {
		rc = coli_grammar_add_schema(*out, s, err, errlen);
		if (rc >= 0) {
			(*out)->root = rc;
			coli_grammar_finish(*out);
			rc = 0;
		} else {
			coli_grammar_free(*out);
			*out = NULL;
		}
	}
	json_decref(s);
	return rc;
}

int coli_grammar_json_object(struct coli_grammar **out)
{
	int rc = coli_grammar_begin(out);

	if (!rc) {
		(*out)->root = GN_OBJECT;
		coli_grammar_finish(*out);
	}
	return rc;
}

int coli_grammar_match(const struct coli_grammar *g, const char *text, size_t len)
{
	struct coli_grammar_state s;

	coli_gstate_init(g, &s);
	for (size_t i = 0; i < len; i++)
		if (!coli_gstate_step(g, &s, (unsigned char)text[i]))
			return 0;
	return coli_gstate_accepting(g, &s) ? 2 : 1;
}
