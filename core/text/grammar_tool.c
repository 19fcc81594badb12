/*
 * core/text/grammar_tool.c — the grammar of one tool call in a family's own
 * syntax, its arguments constrained by the tool's parameters schema
 * (tool_choice "required" or a named function).
 *
 * ChatML (Qwen3, Hermes; what core/text/reply.c reads back):
 *
 *   <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
 *
 * as a sequence of nodes: a literal going on with a switch over the tools'
 * names (each name's text, `NAME", "arguments": `, going on with that tool's
 * parameters), then the closing literal. Names end with their quote, so the
 * switch's texts are prefix-free. Families whose markers are special tokens
 * (harmony's <|call|>, Mistral's [TOOL_CALLS], DeepSeek's, Kimi's) cannot be
 * written by a trie that leaves special tokens out, and GLM's and MiniMax's
 * argument syntax is not JSON: all are refused by name.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text/grammar_internal.h"

static int err_out(char *err, size_t errlen, int rc, const char *msg, const char *arg)
{
	if (err && errlen)
		snprintf(err, errlen, msg, arg);
	return rc;
}

/* One tool's branch of the switch: the node of its arguments (returned)
 * and its text, NAME", "arguments": (*text, malloc'd). */
static int tool_branch(struct coli_grammar *g, json_t *fn, char **text, char *err, size_t errlen)
{
	json_t *name = json_object_get(fn, "name"), *params = json_object_get(fn, "parameters");
	json_t *ks = json_string(json_string_value(name));
	char *e = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
	int node;

	json_decref(ks);
	if (!e)
		return -ENOMEM;
	if (params) {
		node = coli_grammar_add_schema(g, params, err, errlen);
		node = node == GN_ANY ? GN_OBJECT : node; /* ({}: arguments are an object) */
	} else {                                          /* no parameters: {} */
		json_t *empty = json_pack("{s:s, s:{}, s:b}", "type", "object", "properties",
		                          "additionalProperties", 0);

		node = empty ? coli_grammar_add_schema(g, empty, err, errlen) : -ENOMEM;
		json_decref(empty);
	}
	*text = node < 0 ? NULL : malloc(strlen(e) + 32);
	if (node >= 0 && !*text)
		node = -ENOMEM;
	if (node >= 0) /* e is "NAME" with its quotes */
		snprintf(*text, strlen(e) + 32, "%s, \"arguments\": ", e + 1);
	free(e);
	return node;
}

int coli_grammar_tool_call(enum coli_chat_family f, const char *tools_json, const char *name,
                           struct coli_grammar **out, char *err, size_t errlen)
{
	static const char open[] = "<tool_call>\n{\"name\": \"", close[] = "}\n</tool_call>";
	json_error_t je;
	json_t *tools = NULL, *t;
	struct coli_grammar *g = NULL;
	int rc, first = -1, n = 0, sw, kids[2], node[GRAMMAR_MAX_LITS];
	char *text[GRAMMAR_MAX_LITS] = {0};
	size_t i;

	*out = NULL;
	if (f != COLI_CHAT_CHATML)
		return err_out(err, errlen, -ENOTSUP,
		               "forcing a tool call is not supported for the %s chat format "
		               "(only chatml's <tool_call> is)",
		               coli_chat_family_name(f));
	tools = tools_json ? json_loads(tools_json, 0, &je) : NULL;
	if (!json_is_array(tools) || !json_array_size(tools)) {
		json_decref(tools);
		return err_out(err, errlen, -EINVAL, "forcing a tool call needs 'tools'%s", "");
	}
	rc = coli_grammar_begin(&g);
	if (rc)
		goto out;
	json_array_foreach(tools, i, t)
	{
		json_t *fn = json_object_get(t, "function");
		const char *nm = json_string_value(json_object_get(fn, "name"));

		if (!nm) {
			rc = err_out(err, errlen, -EINVAL, "'tools[%s]' has no function name", "");
			goto out;
		}
		if (name && strcmp(nm, name))
			continue;
		if (n == GRAMMAR_MAX_LITS) {
			rc = err_out(err, errlen, -E2BIG, "more than 64 tools%s", "");
			goto out;
		}
		node[n] = tool_branch(g, fn, &text[n], err, errlen);
		if (node[n] < 0) {
			rc = node[n];
			goto out;
		}
		n++;
	}
	for (int k = 0; k < n; k++) { /* the switch's texts, one run of lits */
		int lit = coli_grammar_add_lit(g, text[k], strlen(text[k]), node[k]);

		if (lit < 0) {
			rc = lit;
			goto out;
		}
		first = k ? first : lit;
	}
	if (!n) {
		rc = err_out(err, errlen, -EINVAL, "no tool named '%s' in 'tools'",
		             name ? name : "");
		goto out;
	}
	sw = coli_grammar_add_node(g, GK_LIT, &first, n);
	rc = sw < 0 ? sw : coli_grammar_add_lit(g, open, strlen(open), sw);
	if (rc >= 0)
		rc = kids[0] = coli_grammar_add_node(g, GK_LIT, &rc, 1);
	rc = rc < 0 ? rc : coli_grammar_add_lit(g, close, strlen(close), -1);
	if (rc >= 0)
		rc = kids[1] = coli_grammar_add_node(g, GK_LIT, &rc, 1);
	rc = rc < 0 ? rc : coli_grammar_add_node(g, GK_SEQ, kids, 2);
	if (rc >= 0) {
		g->root = rc;
		coli_grammar_finish(g);
		rc = 0;
	}
out:
	for (int k = 0; k < GRAMMAR_MAX_LITS; k++)
		free(text[k]);
	json_decref(tools);
	if (rc) {
		coli_grammar_free(g);
		g = NULL;
	}
	*out = g;
	return rc;
}
