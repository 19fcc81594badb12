/*
 * tools/tools_util.c — helpers shared by the command-line programs.
 */
#include <stdarg.h>
#include <stdio.h>

#include "tools/tools.h"

int tool_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "coli %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}
