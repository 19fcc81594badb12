/*
 * tools/cli/cmd_usage.c — `coli usage snapshot|restore`: the expert usage
 * file (per-expert heat, docs/tiers.md) saved and put back, so A/B runs can
 * start from identical heat.
 *
 *   coli usage snapshot MODEL.coli [-o FILE] [--usage CUR]
 *       copy the model's usage file (CUR, default MODEL.coli.usage) to FILE
 *       (default MODEL.coli.usage.snapshot)
 *   coli usage restore MODEL.coli FILE [--usage CUR]
 *       make FILE the model's usage file (atomically)
 * Every copy is checked against the model (hash and shape) first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"
#include "tools/tools.h"

static void help(FILE *f)
{
	fprintf(f, "usage: coli usage snapshot MODEL.coli [-o FILE] [--usage CUR]\n"
	           "       coli usage restore MODEL.coli FILE [--usage CUR]\n"
	           "  CUR is the model's usage file (default MODEL.coli.usage)\n");
}

int cmd_usage(int argc, char **argv)
{
	const char *verb = argc > 1 ? argv[1] : NULL, *model = NULL, *file = NULL, *out = NULL;
	const char *cur_arg = NULL;
	char cur[4096], snap[4200], err[1024];
	int rc;

	if (!verb || !strcmp(verb, "-h") || !strcmp(verb, "--help")) {
		help(verb ? stdout : stderr);
		return verb ? 0 : 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "--usage") && i + 1 < argc)
			cur_arg = argv[++i];
		else if (argv[i][0] == '-')
			return tool_err("usage", "unknown option '%s'", argv[i]), 2;
		else if (!model)
			model = argv[i];
		else if (!file)
			file = argv[i];
		else
			return tool_err("usage", "too many arguments"), 2;
	}
	if (!model) {
		help(stderr);
		return 2;
	}
	if (cur_arg)
		snprintf(cur, sizeof(cur), "%s", cur_arg);
	else
		coli_usage_default_path(model, cur, sizeof(cur));
	if (!strcmp(verb, "snapshot")) {
		if (file)
			return tool_err("usage", "snapshot takes -o FILE"), 2;
		if (!out) {
			snprintf(snap, sizeof(snap), "%s.snapshot", cur);
			out = snap;
		}
		rc = coli_usage_copy(model, cur, out, err, sizeof(err));
		if (rc)
			return tool_err("usage", "%s", err);
		fprintf(stderr, "coli usage: %s -> %s\n", cur, out);
		return 0;
	}
	if (!strcmp(verb, "restore")) {
		if (!file)
			return tool_err("usage", "restore needs the snapshot FILE"), 2;
		rc = coli_usage_copy(model, file, cur, err, sizeof(err));
		if (rc)
			return tool_err("usage", "%s", err);
		fprintf(stderr, "coli usage: %s -> %s\n", file, cur);
		return 0;
	}
	return tool_err("usage", "unknown verb '%s' (snapshot or restore)", verb), 2;
}
