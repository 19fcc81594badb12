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
 * switch's texts are prefix-free.
 *
 * harmony (gpt-oss), as its template writes a call after the generation
 * prompt's "<|start|>assistant":
 *
 *    to=functions.NAME<|channel|>commentary json<|message|>ARGS<|call|>
 *
 * the special tokens as GK_TOKEN nodes (the mask allows their ids where
 * they come), <|call|> as the end id (colid adds it). A name ends where a
 * special token starts, so among several tools none may begin another.
 * coli_grammar_as_answer puts a JSON grammar (response_format) where the
 * family writes its answer: harmony's "<|channel|>final<|message|>" first.
 * Families whose markers are other special tokens in other places
 * (Mistral's [TOOL_CALLS], DeepSeek's, Kimi's) and GLM's and MiniMax's
 * non-JSON arguments are refused by name.
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

/* A node of one text (copied), -1 next; a special token's node by name. */
static int text_node(struct coli_grammar *g, const char *text, int kind)
{
	int lit = coli_grammar_add_lit(g, text, strlen(text), -1);

	return lit < 0 ? lit : coli_grammar_add_node(g, kind, &lit, 1);
}

/* harmony: the tool's branch goes on after its name with
 * <|channel|>commentary json<|message|>ARGS (the end, <|call|>, is an end id);
 * *text becomes the bare name. */
static int harmony_branch(struct coli_grammar *g, int args, char **text, const char *nm)
{
	int kids[4];

	free(*text);
	*text = strdup(nm);
	if (!*text)
		return -ENOMEM;
	kids[0] = text_node(g, "<|channel|>", GK_TOKEN);
	kids[1] = kids[0] < 0 ? kids[0] : text_node(g, "commentary json", GK_LIT);
	kids[2] = kids[1] < 0 ? kids[1] : text_node(g, "<|message|>", GK_TOKEN);
	kids[3] = args;
	return kids[2] < 0 ? kids[2] : coli_grammar_add_node(g, GK_SEQ, kids, 4);
}

/* harmony's names end where a special token starts: none may begin another */
static int prefix_free(char *const *text, int n, char *err, size_t errlen)
{
	for (int a = 0; a < n; a++)
		for (int b = 0; b < n; b++)
			if (a != b && !strncmp(text[a], text[b], strlen(text[a])))
				return err_out(
				    err, errlen, -ENOTSUP,
				    "forcing a call among tools whose names begin alike "
				    "('%s' begins another) is not supported for harmony; "
				    "name the function",
				    text[a]);
	return 0;
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
	if (f != COLI_CHAT_CHATML && f != COLI_CHAT_HARMONY)
		return err_out(err, errlen, -ENOTSUP,
		               "forcing a tool call is not supported for the %s chat format "
		               "(only chatml's <tool_call> and harmony's are)",
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
		if (node[n] >= 0 && f == COLI_CHAT_HARMONY)
			node[n] = harmony_branch(g, node[n], &text[n], nm);
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
	if (f == COLI_CHAT_HARMONY && (rc = prefix_free(text, n, err, errlen)))
		goto out;
	sw = coli_grammar_add_node(g, GK_LIT, &first, n);
	if (f == COLI_CHAT_HARMONY) { /* after "<|start|>assistant": " to=functions.NAME..." */
		rc = sw < 0 ? sw : coli_grammar_add_lit(g, " to=functions.", 14, sw);
		rc = rc < 0 ? rc : coli_grammar_add_node(g, GK_LIT, &rc, 1);
		if (rc >= 0) {
			g->root = rc;
			coli_grammar_finish(g);
			rc = 0;
		}
		goto out;
	}
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

int coli_grammar_as_answer(struct coli_grammar *g, enum coli_chat_family f)
{
	int kids[4];

	if (f != COLI_CHAT_HARMONY)
		return 0;
	kids[0] = text_node(g, "<|channel|>", GK_TOKEN);
	kids[1] = kids[0] < 0 ? kids[0] : text_node(g, "final", GK_LIT);
	kids[2] = kids[1] < 0 ? kids[1] : text_node(g, "<|message|>", GK_TOKEN);
	kids[3] = g->root;
	kids[0] = kids[2] < 0 ? kids[2] : coli_grammar_add_node(g, GK_SEQ, kids, 4);
	if (kids[0] < 0)
		return kids[0];
	g->root = kids[0];
	coli_grammar_finish(g);
	return 0;
}
