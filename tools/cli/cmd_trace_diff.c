/*
 * tools/cli/cmd_trace_diff.c — `coli trace-diff A B`: compare two ROUTE_TRACE
 * files line by line and print the first (position, layer) where the routed
 * experts differ (exit 1), or "identical" (exit 0). Weights are compared as
 * written (6 decimals), so a weight change is reported too.
 */
#include <stdio.h>
#include <string.h>

#include "tools/tools.h"

static int next_line(FILE *f, char *buf, size_t n)
{
	while (fgets(buf, (int)n, f))
		if (buf[0] != '#')
			return 1;
	return 0;
}

int cmd_trace_diff(int argc, char **argv)
{
	char la[4096], lb[4096];
	FILE *a, *b;
	long line = 0;
	int rc = 0;

	if (argc != 3) {
		fprintf(stderr,
		        "usage: coli trace-diff A B   (files written with ROUTE_TRACE=FILE)\n");
		return 2;
	}
	a = fopen(argv[1], "r");
	b = fopen(argv[2], "r");
	if (!a || !b) {
		tool_err("trace-diff", "cannot open '%s'", !a ? argv[1] : argv[2]);
		if (a)
			fclose(a);
		if (b)
			fclose(b);
		return 2;
	}
	for (;;) {
		int ha = next_line(a, la, sizeof(la)), hb = next_line(b, lb, sizeof(lb));
		int pos = -1, layer = -1;

		line++;
		if (!ha && !hb) {
			printf("identical (%ld routing decisions)\n", line - 1);
			break;
		}
		if (ha != hb) {
			printf("%s ends first after %ld routing decisions\n",
			       ha ? argv[2] : argv[1], line - 1);
			rc = 1;
			break;
		}
		if (strcmp(la, lb)) {
			sscanf(la, "%d %d", &pos, &layer);
			la[strcspn(la, "\n")] = lb[strcspn(lb, "\n")] = 0;
			printf("first difference at position %d, layer %d:\n  %s: %s\n  %s: %s\n",
			       pos, layer, argv[1], la, argv[2], lb);
			rc = 1;
			break;
		}
	}
	fclose(a);
	fclose(b);
	return rc;
}
