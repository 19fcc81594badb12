/*
 * tools/cli/cmd_logits.c — `coli logits -m MODEL (--text TEXT | --ids 1,2,3) -o FILE`:
 * teacher-forced logits of every position, float32 little-endian,
 * [n_tokens x vocab] row-major, the prompt run as one prefill.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"
#include "tools/tools.h"

static void help(FILE *f)
{
	fprintf(f, "usage: coli logits -m MODEL.coli (--text TEXT | --ids 1,2,3) -o FILE "
	           "[engine options]\n"
	           "  writes float32 little-endian logits, [n_tokens x vocab]\n\n");
	coli_opts_help(f);
}

int cmd_logits(int argc, char **argv)
{
	struct tool_engine_args a;
	const char *text = NULL, *ids_arg = NULL, *out = NULL;
	int *ids = NULL, n = 0, rc;
	float *logits = NULL;
	coli_engine_t *e;
	char err[512];
	FILE *f;

	if (tool_engine_args_init(&a, "coli logits"))
		return 2;
	for (int i = 1; i < argc;) {
		const char *o = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		rc = tool_engine_arg(&a, argc, argv, &i);
		if (rc < 0)
			return 2;
		if (rc)
			continue;
		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			help(stdout);
			return 0;
		}
		if (!v)
			return tool_err("logits", "%s needs a value (see --help)", o), 2;
		if (!strcmp(o, "--text"))
			text = v;
		else if (!strcmp(o, "--ids"))
			ids_arg = v;
		else if (!strcmp(o, "-o"))
			out = v;
		else
			return tool_err("logits", "unknown option '%s' (see --help)", o), 2;
		i += 2;
	}
	if (!a.model || !out || !!text == !!ids_arg) {
		help(stderr);
		return 2;
	}
	rc = coli_engine_open(a.model, &a.opts, &e, err, sizeof(err));
	if (rc)
		return tool_err("logits", "%s", err);
	rc = tool_prompt_ids(e, text, ids_arg, &ids, &n);
	if (rc)
		goto out;
	if (n > coli_engine_ctx(e)) {
		rc = tool_err("logits", "%d tokens exceed the context of %d (--ctx)", n,
		              coli_engine_ctx(e));
		goto out;
	}
	logits = malloc(sizeof(float) * (size_t)n * coli_engine_config(e)->vocab);
	if (!logits) {
		rc = tool_err("logits", "out of memory for %d x %d logits", n,
		              coli_engine_config(e)->vocab);
		goto out;
	}
	rc = coli_engine_forward(e, ids, n, logits, 1);
	if (rc) {
		rc = tool_err("logits", "forward failed: %s", coli_engine_errmsg(e));
		goto out;
	}
	f = fopen(out, "wb");
	if (!f || fwrite(logits, sizeof(float) * coli_engine_config(e)->vocab, (size_t)n, f) !=
	              (size_t)n) {
		rc = tool_err("logits", "cannot write '%s': %s", out, strerror(errno));
		if (f)
			fclose(f);
		goto out;
	}
	if (fclose(f)) {
		rc = tool_err("logits", "cannot write '%s': %s", out, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	free(logits);
	free(ids);
	coli_engine_close(e);
	return rc;
}
