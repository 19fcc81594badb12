/*
 * tools/fuzz/fuzz_jinja.c — libFuzzer target for core/jinja: the input is a
 * template. It is parsed; one that parses is rendered against a fixed
 * context shaped like a chat request (messages with a tool call, a tool
 * result and reasoning, two tool schemas, bos/eos tokens, a thinking
 * switch) under small limits, so that a hostile template (deep nesting,
 * runaway loops, huge strings, recursion through macros) must fail with a
 * message, in bounded time and memory, never crash. Seeds: the templates of
 * tests/fixtures/chat/ and the inline ones of tools/ref/jinja_render_cases.py
 * (tools/fuzz/seed/fuzz_jinja.seed.sh), and tests/fuzz/jinja/.
 * fuzz-max-len: 65536
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/jinja/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char CTX[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"You are terse.\"},"
    " {\"role\": \"user\", \"content\": \"Weather in Paris? \\u00e9\\ud83d\\ude42\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"plan\","
    "  \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\":"
    "   {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}}]},"
    " {\"role\": \"tool\", \"content\": \"{\\\"temp\\\": 21.5}\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>x</think>21.5 C\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"thanks\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\","
    "   \"description\": \"Weather.\", \"parameters\": {\"type\": \"object\", \"properties\":"
    "   {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\", \"default\": 1},"
    "    \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}},"
    "   \"required\": [\"city\"]}}},"
    "  {\"type\": \"function\", \"function\": {\"name\": \"noop\", \"parameters\": {}}}],"
    " \"documents\": null, \"add_generation_prompt\": true, \"bos_token\": \"<s>\","
    " \"eos_token\": \"</s>\", \"enable_thinking\": false, \"n\": 3, \"f\": -2.5}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static json_t *ctx;
	const struct coli_jinja_limits lim = {.max_output_bytes = 1 << 20,
	                                      .max_memory_bytes = 64u << 20,
	                                      .max_steps = 20000,
	                                      .max_depth = 16};
	coli_jinja_t *t;
	char err[256], *out;
	size_t len;

	if (!ctx && !(ctx = json_loads(CTX, 0, NULL)))
		__builtin_trap();
	err[0] = 0;
	if (coli_jinja_parse((const char *)data, size, &t, err, sizeof(err))) {
		if (!err[0])
			__builtin_trap(); /* a refusal always says why */
		return 0;
	}
	if (coli_jinja_render(t, ctx, 1764633600, &lim, &out, &len, err, sizeof(err)) == 0) {
		if (strlen(out) > len || len > lim.max_output_bytes)
			__builtin_trap();
		free(out);
	} else if (!err[0]) {
		__builtin_trap();
	}
	coli_jinja_free(t);
	return 0;
}
