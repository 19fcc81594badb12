/*
 * tools/tools.h — what the command-line programs share: the subcommand
 * signature and small helpers for messages. Only tools/ may exit().
 */
#ifndef COLI_TOOLS_H
#define COLI_TOOLS_H

#include <stdio.h>

/* Every subcommand: argv[0] is its own name; returns the process exit code. */
typedef int (*coli_cmd_fn)(int argc, char **argv);

/* "coli <cmd>: <message>\n" on stderr; returns 1 for `return die(...)`. */
int tool_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
