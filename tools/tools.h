/*
 * tools/tools.h — what the command-line programs share: the subcommand
 * signature and small helpers for messages. Only tools/ may exit().
 */
#ifndef COLI_TOOLS_H
#define COLI_TOOLS_H

#include <stdint.h>
#include <stdio.h>

/* Every subcommand: argv[0] is its own name; returns the process exit code. */
typedef int (*coli_cmd_fn)(int argc, char **argv);

/* "coli <cmd>: <message>\n" on stderr; returns 1 for `return die(...)`. */
int tool_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Strict numbers for a program's options (core/parse.c: the whole string,
 * range checked): 0, or -1 after printing "PROG: OPT 'V': expected an
 * integer in MIN..MAX" (PROG: "coli generate", "colid"). */
int tool_int(const char *prog, const char *opt, const char *v, int min, int max, int *out);
int tool_double(const char *prog, const char *opt, const char *v, double min, double max,
                double *out);
/* Decimal or 0x hex, no sign (seeds, byte counts). */
int tool_u64(const char *prog, const char *opt, const char *v, uint64_t min, uint64_t max,
             uint64_t *out);

struct coli_opts;
#include "core/coli.h"

/* -m MODEL plus the engine options of core/options.c, shared by every
 * command that opens a model. */
struct tool_engine_args {
	const char *model;
	struct coli_opts opts;
};
/* Defaults and the environment; -1 after printing "PROG: NAME='V': expected
 * ..." when a variable of the table is malformed. */
int tool_engine_args_init(struct tool_engine_args *a, const char *prog);
/* Consumes argv[*i] if it is -m/--model or an engine flag: returns 1 (and
 * advances *i), 0 if not ours, -1 after printing an error. */
int tool_engine_arg(struct tool_engine_args *a, int argc, char **argv, int *i);
/* Prompt from text (through the model's tokenizer) or from "1,2,3"; ids is
 * malloc'd. Prints the error and returns 1 on failure. */
int tool_prompt_ids(coli_engine_t *e, const char *text, const char *ids_csv, int **ids, int *n);
/* The stderr summary of a generation; profile adds the overlap window split
 * and the device traffic (--profile, COLI_CUDA_PROFILE=1). */
void tool_print_gen_stats(coli_engine_t *e, const struct coli_gen_stats *st, int profile);
/* `coli inspect` of a GGUF file (tools/cli/inspect_gguf.c): 0, or 1 with the error printed. */
int inspect_gguf(const char *path, int verbose);

#endif
