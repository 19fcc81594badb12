/*
 * tests/text/reply_parse.c — core/text/reply.c on what the models' templates
 * write for an assistant turn (tests/fixtures/chat/reply_cases.jsonl, made by
 * tools/ref/reply_cases.py with jinja2, the request's tools on its first line: GLM-4.5's,
 * MiniMax-M2's, DeepSeek-V3.1's and gpt-oss's templates; Qwen3's Hermes calls and Kimi-K2's
 * sections as their model cards document them): each text parsed back must give the turn's
 * reasoning, content and tool calls (names, and arguments equal as JSON). Then what no template
 * writes: the schema typing GLM's arguments, a reply cut short while thinking, and broken markup
 * left as content.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/coli.h"
#include "core/fixture_util.h"

static int fails;

#define CHECK(c, ...)                                                                              \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			fails++;                                                                   \
		}                                                                                  \
	} while (0)

static enum coli_chat_family family(const char *name)
{
	static const struct {
		const char *name;
		enum coli_chat_family f;
	} t[] = {{"chatml", COLI_CHAT_CHATML},   {"glm", COLI_CHAT_GLM},
	         {"minimax", COLI_CHAT_MINIMAX}, {"deepseek", COLI_CHAT_DEEPSEEK},
	         {"kimi", COLI_CHAT_KIMI},       {"harmony", COLI_CHAT_HARMONY},
	         {"inst", COLI_CHAT_INST}};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(name, t[i].name))
			return t[i].f;
	return COLI_CHAT_PLAIN;
}

static int same_str(const char *a, const char *b)
{
	return (!a || !*a) ? (!b || !*b) : b && !strcmp(a, b);
}

/* Parse text as family f; compare with the expected reply (JSON). */
static void check(const char *what, enum coli_chat_family f, const char *text, int think_open,
                  const char *tools, const char *reasoning, const char *content,
                  const json_t *calls)
{
	struct coli_reply r;
	size_t i;
	const json_t *c;

	if (coli_reply_parse(f, text, strlen(text), think_open, tools, &r)) {
		CHECK(0, "%s: parse failed", what);
		return;
	}
	CHECK(same_str(reasoning, r.reasoning), "%s: reasoning '%s', want '%s'", what,
	      r.reasoning ? r.reasoning : "(none)", reasoning ? reasoning : "(none)");
	CHECK(same_str(content, r.content), "%s: content '%s', want '%s'", what, r.content,
	      content);
	CHECK((size_t)r.n_calls == json_array_size(calls), "%s: %d tool calls, want %zu", what,
	      r.n_calls, json_array_size(calls));
	json_array_foreach(calls, i, c)
	{
		json_t *got;

		if (i >= (size_t)r.n_calls)
			break;
		got = json_loads(r.calls[i].arguments, JSON_DECODE_ANY, NULL);
		CHECK(!strcmp(r.calls[i].name, json_string_value(json_object_get(c, "name"))),
		      "%s: call %zu is %s", what, i, r.calls[i].name);
		CHECK(got && json_equal(got, json_object_get(c, "arguments")),
		      "%s: call %zu arguments %s", what, i, r.calls[i].arguments);
		json_decref(got);
	}
	coli_reply_free(&r);
}

int main(void)
{
	char path[4096];
	FILE *fp;
	char line[1 << 16], *tools = NULL;
	int n = 0;

	snprintf(path, sizeof(path), "%s/chat/reply_cases.jsonl", fx_root());
	fp = fopen(path, "r");
	if (!fp) {
		printf("cannot open %s\n", path);
		return 1;
	}
	while (fgets(line, sizeof(line), fp)) {
		json_t *c = json_loads(line, 0, NULL);
		char what[64];

		if (!c) {
			CHECK(0, "%s: line %d is not JSON", path, n + 1);
			break;
		}
		if (json_object_get(c, "tools")) { /* the first line: the request's tools */
			free(tools);
			tools = json_dumps(json_object_get(c, "tools"), 0);
			json_decref(c);
			continue;
		}
		snprintf(what, sizeof(what), "case %d (%s)", ++n,
		         json_string_value(json_object_get(c, "family")));
		check(what, family(json_string_value(json_object_get(c, "family"))),
		      json_string_value(json_object_get(c, "text")),
		      json_is_true(json_object_get(c, "think_open")), tools,
		      json_string_value(json_object_get(c, "reasoning")),
		      json_string_value(json_object_get(c, "content")),
		      json_object_get(c, "tool_calls"));
		json_decref(c);
	}
	fclose(fp);
	CHECK(tools && n >= 25, "%d cases in %s (and its tools line)", n, path);
	free(tools);

	/* GLM's values are raw text where the template wrote a string: "42" is
	 * a string when the schema says so, a number when it does not */
	{
		const char *text = "<think></think>\n<tool_call>f\n<arg_key>a</arg_key>\n"
		                   "<arg_value>42</arg_value>\n<arg_key>b</arg_key>\n"
		                   "<arg_value>42</arg_value>\n</tool_call>";
		const char *schema = "[{\"type\": \"function\", \"function\": {\"name\": \"f\", "
		                     "\"parameters\": {\"type\": \"object\", \"properties\": "
		                     "{\"a\": {\"type\": \"string\"}, \"b\": {\"type\": "
		                     "\"integer\"}}}}}]";
		json_t *want = json_pack("[{s:s, s:{s:s, s:i}}]", "name", "f", "arguments", "a",
		                         "42", "b", 42);

		check("glm schema", COLI_CHAT_GLM, text, 0, schema, NULL, "", want);
		json_decref(want);
	}
	{
		json_t *none = json_array();

		/* cut short while thinking: all reasoning, no content */
		check("cut thinking", COLI_CHAT_MINIMAX, "still thinking", 1, NULL,
		      "still thinking", "", none);
		/* a call that is not JSON: the text stays content */
		check("broken hermes", COLI_CHAT_CHATML, "a <tool_call>{not json</tool_call>", 0,
		      NULL, NULL, "a <tool_call>{not json</tool_call>", none);
		check("broken deepseek", COLI_CHAT_DEEPSEEK,
		      "x<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f{}<｜tool▁call▁end｜>", 0, NULL,
		      NULL, "x<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f{}<｜tool▁call▁end｜>",
		      none);
		check("plain", COLI_CHAT_PLAIN, " hello ", 0, NULL, NULL, "hello", none);
		json_decref(none);
	}
	/* Mistral's list */
	{
		json_t *want = json_pack("[{s:s, s:{s:i}}]", "name", "g", "arguments", "x", 1);

		check("inst", COLI_CHAT_INST,
		      "[TOOL_CALLS][{\"name\": \"g\", \"arguments\": {\"x\": 1}}]", 0, NULL, NULL,
		      "", want);
		json_decref(want);
	}
	printf("%d template cases and 6 more: %d failed\n", n, fails);
	return fails ? 1 : 0;
}
