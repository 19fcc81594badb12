/*
 * tools/fuzz/fuzz_schema.c — libFuzzer target for constrained decoding's schema
 * compiler and automaton (core/text/grammar*.c): the schema of a request's
 * response_format, or its tools array for a forced call, then bytes matched
 * against the grammar it made.
 *
 * Input: a mode byte (even: a JSON schema; odd: a tools array, the call
 * forced in ChatML's syntax, harmony's with bit 2, to "f" with bit 1, else
 * to any tool), the schema's text, a NUL, the
 * text to match. A compile must succeed or fail with a message; a grammar
 * must match any bytes without a fault, within its bounds (nesting, $ref
 * recursion), and a whole match must stay whole when matched again.
 * Seeds: tools/fuzz/seed/fuzz_schema.seed.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul;
	struct coli_grammar *g = NULL;
	char err[256] = "";
	size_t n;
	int rc;

	if (size < 1)
		return 0;
	nul = memchr(data + 1, 0, size - 1);
	n = nul ? (size_t)(nul - data - 1) : size - 1;
	if (data[0] & 1) {
		char *tools = malloc(n + 1);

		if (!tools)
			return 0;
		memcpy(tools, data + 1, n);
		tools[n] = 0;
		rc = coli_grammar_tool_call(data[0] & 4 ? COLI_CHAT_HARMONY : COLI_CHAT_CHATML, tools,
		                            data[0] & 2 ? "f" : NULL, &g, err, sizeof(err));
		free(tools);
	} else {
		rc = coli_grammar_from_schema((const char *)data + 1, n, &g, err, sizeof(err));
	}
	if (rc) {
		if (!err[0] && rc != -12)
			__builtin_trap(); /* a refusal always says why */
		return 0;
	}
	if (nul) {
		const char *t = (const char *)nul + 1;
		size_t tn = size - (size_t)(nul + 1 - data);
		int m = coli_grammar_match(g, t, tn);

		if (m == 2 && coli_grammar_match(g, t, tn) != 2)
			__builtin_trap();
	}
	coli_grammar_free(g);
	return 0;
}
