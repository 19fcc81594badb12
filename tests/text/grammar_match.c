/*
 * tests/text/grammar_match.c — the JSON-schema automaton (core/text/grammar*.c)
 * on hand cases: byte strings it must take whole (2), take as a prefix only
 * (1) or refuse (0), per schema; the schemas it must refuse with the
 * keyword named; the tool-call grammar. Every expectation is written from
 * JSON's grammar and the schema's meaning, not from a run.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/coli.h"

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

struct tcase {
	const char *text;
	int want; /* 2 whole, 1 prefix, 0 refused */
};

static void run(const char *schema, const struct tcase *c)
{
	struct coli_grammar *g = NULL;
	char err[256] = "";
	int rc = schema ? coli_grammar_from_schema(schema, strlen(schema), &g, err, sizeof(err))
	                : coli_grammar_json_object(&g);

	CHECK(!rc, "schema %s: %d %s", schema ? schema : "(json_object)", rc, err);
	if (rc)
		return;
	for (; c->text; c++) {
		int got = coli_grammar_match(g, c->text, strlen(c->text));

		CHECK(got == c->want, "schema %s, text '%s': %d, want %d",
		      schema ? schema : "(json_object)", c->text, got, c->want);
	}
	coli_grammar_free(g);
}

static void refused(const char *schema, int want_rc, const char *word)
{
	struct coli_grammar *g = NULL;
	char err[256] = "";
	int rc = coli_grammar_from_schema(schema, strlen(schema), &g, err, sizeof(err));

	CHECK(rc == want_rc && !g, "schema %s: rc %d, want %d", schema, rc, want_rc);
	CHECK(strstr(err, word), "schema %s: message '%s' does not name '%s'", schema, err, word);
	coli_grammar_free(g);
}

int main(void)
{
	static const struct tcase any_obj[] = {{"{}", 2},
	                                       {"{\"a\": 1}", 2},
	                                       {"{\"a\":[1,2.5e3,\"x\",true,null,{}]}", 2},
	                                       {"{", 1},
	                                       {"{\"a\"", 1},
	                                       {"{\"a\":", 1},
	                                       {"[1]", 0},
	                                       {"1", 0},
	                                       {"\"s\"", 0},
	                                       {"{\"a\" 1}", 0},
	                                       {"{,}", 0},
	                                       {"{\"a\":1,}", 0},
	                                       {"{} ", 0},
	                                       {" {}", 0},
	                                       {"{\"a\":01}", 0},
	                                       {"{\"a\":-}", 0},
	                                       {"{\"a\":1.}", 0},
	                                       {"{\"a\":tru}", 0},
	                                       {"{\"a\":\"\\q\"}", 0},
	                                       {"{\"a\":\"\\u00e9\"}", 2},
	                                       {"{\"a\":\"\\ud800\"}", 0},
	                                       {"{\"a\":\"\xc3\xa9\"}", 2},
	                                       {"{\"a\":\"\xc3\"}", 0},
	                                       {"{\"a\":\"\xed\xa0\x80\"}", 0},
	                                       {"{\"a\":\"\x01\"}", 0},
	                                       {"{\n  \"a\": 1\n}", 2},
	                                       {NULL, 0}};
	static const struct tcase props[] = {
	    /* name required, age optional, in the listed order */
	    {"{\"name\":\"x\"}", 2},
	    {"{\"name\":\"x\",\"age\":3}", 2},
	    {"{\"age\":3,\"name\":\"x\"}", 0}, /* schema order */
	    {"{\"age\":3}", 0},
	    {"{}", 0},
	    {"{\"name\":\"x\",\"other\":1}", 0}, /* additionalProperties false */
	    {"{\"name\":3}", 0},
	    {"{\"name\":\"x\",\"age\":3.5}", 0}, /* integer */
	    {"{\"name\":\"x\",\"age\":-0}", 2},
	    {"{\"nam", 1},
	    {"{\"name\":\"x\",\"age\":12", 1},
	    {NULL, 0}};
	static const struct tcase arr[] = {{"[1,2]", 2},     {"[1]", 0},       {"[1,2,3]", 2},
	                                   {"[1,2,3,4]", 0}, {"[]", 0},        {"[1,", 1},
	                                   {"[\"a\"]", 0},   {"[ 1 , 2 ]", 2}, {NULL, 0}};
	static const struct tcase en[] = {{"\"red\"", 2},  {"1", 2}, {"12", 2},   {"null", 2},
	                                  {"\"blue\"", 0}, {"2", 0}, {"\"re", 1}, {"123", 0},
	                                  {"true", 0},     {NULL, 0}};
	static const struct tcase str[] = {{"\"ab\"", 2},
	                                   {"\"a\"", 0},
	                                   {"\"abcd\"", 2},
	                                   {"\"abcde\"", 0},
	                                   {"\"\xc3\xa9\xc3\xa9\"", 2},
	                                   {"\"\\n\\t\"", 2},
	                                   {NULL, 0}};
	static const struct tcase uni[] = {{"\"x\"", 2},   {"null", 2}, {"[1]", 2},
	                                   {"[\"x\"]", 0}, {"3", 0},    {NULL, 0}};
	static const struct tcase ref[] = {
	    {"{\"v\":1}", 2},
	    {"{\"v\":1,\"next\":{\"v\":2}}", 2},
	    {"{\"v\":1,\"next\":{\"v\":2,\"next\":null}}", 2},
	    {"{\"v\":1,\"next\":{}}", 0},
	    /* the recursion bound: 5 levels of the same $ref, not 6 */
	    {"{\"v\":1,\"next\":{\"v\":1,\"next\":{\"v\":1,\"next\":{\"v\":1,\"next\":{\"v\":1}}}}"
	     "}",
	     2},
	    {"{\"v\":1,\"next\":{\"v\":1,\"next\":{\"v\":1,\"next\":{\"v\":1,\"next\":{\"v\":1,"
	     "\"next\":null}}}}}",
	     2},
	    {"{\"v\":1,\"next\":{\"v\":1,\"next\":{\"v\":1,\"next\":{\"v\":1,\"next\":{\"v\":1,"
	     "\"next\":{",
	     0},
	    {NULL, 0}};
	static const struct tcase cst[] = {
	    {"{\"k\":\"on\"}", 2}, {"{\"k\":\"off\"}", 0}, {NULL, 0}};
	static const struct tcase num[] = {{"1.5", 2}, {"-2e-3", 2}, {"1e", 1}, {"1e+", 1},
	                                   {"+1", 0},  {".5", 0},    {"00", 0}, {NULL, 0}};

	run(NULL, any_obj);
	run("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{"
	    "\"type\":\"integer\"}},\"required\":[\"name\"],\"additionalProperties\":false}",
	    props);
	run("{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}",
	    arr);
	run("{\"enum\":[\"red\",1,12,null]}", en);
	run("{\"type\":\"string\",\"minLength\":2,\"maxLength\":4}", str);
	run("{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"},{\"type\":\"array\",\"items\":"
	    "{\"type\":\"number\"}}]}",
	    uni);
	run("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":"
	    "\"integer\"},\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},"
	    "\"required\":[\"v\"]}},\"$ref\":\"#/$defs/node\"}",
	    ref);
	run("{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"on\"}},\"required\":[\"k\"]}",
	    cst);
	run("{\"type\":\"number\"}", num);

	refused("{\"type\":\"string\",\"pattern\":\"^a\"}", -ENOTSUP, "pattern");
	refused("{\"type\":\"integer\",\"minimum\":3}", -ENOTSUP, "minimum");
	refused("{\"allOf\":[{\"type\":\"string\"}]}", -ENOTSUP, "allOf");
	refused("{\"anyOf\":[{\"type\":\"object\"},{\"type\":\"object\"}]}", -ENOTSUP, "anyOf");
	refused("{\"$ref\":\"http://x/y\"}", -ENOTSUP, "$ref");
	refused("{\"type\":\"strin\"}", -EINVAL, "strin");
	refused("{\"type\":\"string\",\"minLength\":3,\"maxLength\":2}", -EINVAL, "minLength");
	refused("{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", -EINVAL, "minItems");
	refused("{\"type\":\"object\"", -EINVAL, "malformed");

	{ /* a forced call of "get" among two tools, in ChatML's syntax */
		const char *tools =
		    "[{\"type\":\"function\",\"function\":{\"name\":\"get\",\"parameters\":{"
		    "\"type\":"
		    "\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":["
		    "\"city\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"getx\"}}]";
		const char *ok = "<tool_call>\n{\"name\": \"get\", \"arguments\": "
		                 "{\"city\": \"Paris\"}}\n</tool_call>";
		const char *x =
		    "<tool_call>\n{\"name\": \"getx\", \"arguments\": {}}\n</tool_call>";
		struct coli_grammar *g = NULL;
		char err[256] = "";
		int rc =
		    coli_grammar_tool_call(COLI_CHAT_CHATML, tools, "get", &g, err, sizeof(err));

		CHECK(!rc, "tool grammar: %d %s", rc, err);
		if (!rc) {
			CHECK(coli_grammar_match(g, ok, strlen(ok)) == 2, "named call refused");
			CHECK(coli_grammar_match(g, x, strlen(x)) == 0, "another tool taken");
			CHECK(coli_grammar_match(g, ok, strlen(ok) - 3) == 1, "prefix");
		}
		coli_grammar_free(g);
		rc = coli_grammar_tool_call(COLI_CHAT_CHATML, tools, NULL, &g, err, sizeof(err));
		CHECK(!rc, "tool grammar (any): %d %s", rc, err);
		if (!rc) {
			CHECK(coli_grammar_match(g, ok, strlen(ok)) == 2, "required: get refused");
			CHECK(coli_grammar_match(g, x, strlen(x)) == 2, "required: getx refused");
		}
		coli_grammar_free(g);
		rc = coli_grammar_tool_call(COLI_CHAT_CHATML, tools, "nope", &g, err, sizeof(err));
		CHECK(rc == -EINVAL && strstr(err, "nope"), "unknown tool: %d %s", rc, err);
		{ /* "parameters": {} still makes the arguments an object */
			const char *t2 = "[{\"type\":\"function\",\"function\":{\"name\":\"h\","
			                 "\"parameters\":{}}}]";
			const char *obj = "<tool_call>\n{\"name\": \"h\", \"arguments\": {\"a\": "
			                  "[1]}}\n</tool_call>";
			const char *s1 = "<tool_call>\n{\"name\": \"h\", \"arguments\": \"a\"}\n"
			                 "</tool_call>";

			rc = coli_grammar_tool_call(COLI_CHAT_CHATML, t2, NULL, &g, err,
			                            sizeof(err));
			CHECK(!rc, "tool grammar ({} parameters): %d %s", rc, err);
			if (!rc) {
				CHECK(coli_grammar_match(g, obj, strlen(obj)) == 2,
				      "{} params: object");
				CHECK(coli_grammar_match(g, s1, strlen(s1)) == 0,
				      "{} params: string");
			}
			coli_grammar_free(g);
		}
		rc = coli_grammar_tool_call(COLI_CHAT_GLM, tools, NULL, &g, err, sizeof(err));
		CHECK(rc == -ENOTSUP && strstr(err, "glm"), "glm: %d %s", rc, err);
		/* harmony: "get" begins "getx": refused among both, fine when named */
		rc = coli_grammar_tool_call(COLI_CHAT_HARMONY, tools, NULL, &g, err, sizeof(err));
		CHECK(rc == -ENOTSUP && strstr(err, "'get'"), "harmony prefix: %d %s", rc, err);
		rc = coli_grammar_tool_call(COLI_CHAT_HARMONY, tools, "get", &g, err, sizeof(err));
		CHECK(!rc, "harmony named: %d %s", rc, err);
		if (!rc) /* bytes up to the first special token (grammar_harmony goes on) */
			CHECK(coli_grammar_match(g, " to=functions.get", 17) == 1 &&
			          coli_grammar_match(g, " to=functions.getx", 18) == 0 &&
			          coli_grammar_match(g, " to=functions.get{", 18) == 0,
			      "harmony bytes");
		coli_grammar_free(g);
	}
	if (fails)
		return 1;
	printf("grammar_match: ok\n");
	return 0;
}
