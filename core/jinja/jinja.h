/*
 * core/jinja/jinja.h — a Jinja interpreter for chat templates.
 *
 * Hugging Face models ship their prompt format as a Jinja template, which
 * transformers renders with jinja2's ImmutableSandboxedEnvironment(
 * trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols]), a tojson
 * filter that is json.dumps(ensure_ascii=False) and the globals
 * raise_exception and strftime_now. This folder renders the subset of Jinja
 * such templates use, byte for byte as that environment does (tests/core/
 * jinja_render checks it against jinja2's renderings of the committed
 * templates; docs/api.md, "Chat templates", lists what is covered):
 *
 *   {{ expr }}, {% if/elif/else %}, {% for a, b in xs if c %} with loop.*
 *   and {% else %}, {% set %} (also ns.attr and the block form), namespace(),
 *   {% macro %} and {% call %}, {% filter %}, {% with %}, {% break %},
 *   {% continue %}, {% generation %}, comments, {%- -%} and {%+ +%}.
 *   Expressions: literals, lists, dicts, tuples, attribute/subscript access,
 *   slices, calls, filters, tests, arithmetic, ~, comparisons, in, and/or/not,
 *   a if c else b.
 *
 * Sandbox: templates see only the data they are given (no Python objects),
 * and every render is bounded by struct coli_jinja_limits; going over a
 * limit, a runtime error, or raise_exception() fail the render with -EINVAL
 * and a message naming the template line.
 *
 * A parsed template is immutable: renders of one template may run on many
 * threads at once.
 */
#ifndef COLI_JINJA_H
#define COLI_JINJA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct coli_jinja coli_jinja_t;

struct coli_jinja_limits {
	size_t max_output_bytes; /* rendered text; 0: 4 MiB */
	size_t max_memory_bytes; /* the render's arena; 0: 256 MiB */
	long max_steps;          /* loop iterations, range items, macro calls; 0: 10^7 */
	int max_depth;           /* nested macro calls and expression depth; 0: 64 */
};

/* Parses src[0..len) into *out. 0; -EINVAL with err filled ("line N: ...")
 * for a template outside the subset; -ENOMEM. */
int coli_jinja_parse(const char *src, size_t len, coli_jinja_t **out, char *err, size_t errlen);
void coli_jinja_free(coli_jinja_t *t);

/* Renders t with the variables of the JSON object ctx (messages, tools,
 * add_generation_prompt, bos_token, ...). now: the time strftime_now
 * formats (seconds since the epoch, UTC; < 0: the clock). lim may be NULL.
 * *out is malloc'd and NUL-terminated, *len without the NUL. 0, or -EINVAL
 * with err filled. */
int coli_jinja_render(const coli_jinja_t *t, const json_t *ctx, int64_t now,
                      const struct coli_jinja_limits *lim, char **out, size_t *len, char *err,
                      size_t errlen);

#endif
