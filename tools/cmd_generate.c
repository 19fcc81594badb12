/*
 * tools/cmd_generate.c — `coli generate -m MODEL -p TEXT [-n N] [--temperature T]
 * [--top-p P] [--top-k K] [--seed S] [engine options]`: the completion text
 * alone on stdout (streamed as it decodes), statistics on stderr.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/coli.h"
#include "tools/tools.h"

static void help(FILE *f)
{
	fprintf(f,
	        "usage: coli generate -m MODEL.coli -p TEXT [-n N] [--temperature T] [--top-p P]\n"
	        "                     [--top-k K] [--seed S] [--ids 1,2,3] [engine options]\n"
	        "  -n N            tokens to generate (default 64; 0: prefill only)\n"
	        "  --temperature T 0 = greedy (default), else sampling\n"
	        "  --ids LIST      prompt as token ids instead of text\n\n");
	coli_opts_help(f);
}

static int on_token(void *arg, int id, const char *text, size_t len)
{
	(void)arg;
	(void)id;
	fwrite(text, 1, len, stdout);
	fflush(stdout);
	return 0;
}

int cmd_generate(int argc, char **argv)
{
	struct tool_engine_args a;
	struct coli_sampler s;
	struct coli_gen_stats st;
	const char *prompt = NULL, *ids_arg = NULL;
	float temp = 0, top_p = 1;
	int top_k = 0, n = 64, rc, n_ids = 0;
	unsigned long long seed = 0;
	int *ids = NULL;
	coli_engine_t *e;
	char err[512];

	if (tool_engine_args_init(&a, "coli generate"))
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
			return tool_err("generate", "%s needs a value (see --help)", o), 2;
		if (!strcmp(o, "-p") || !strcmp(o, "--prompt"))
			prompt = v;
		else if (!strcmp(o, "--ids"))
			ids_arg = v;
		else if (!strcmp(o, "-n"))
			n = atoi(v);
		else if (!strcmp(o, "--temperature"))
			temp = strtof(v, NULL);
		else if (!strcmp(o, "--top-p"))
			top_p = strtof(v, NULL);
		else if (!strcmp(o, "--top-k"))
			top_k = atoi(v);
		else if (!strcmp(o, "--seed"))
			seed = strtoull(v, NULL, 0);
		else
			return tool_err("generate", "unknown option '%s' (see --help)", o), 2;
		i += 2;
	}
	if (!a.model || (!prompt && !ids_arg)) {
		help(stderr);
		return 2;
	}
	if (n < 0 || temp < 0 || top_p <= 0 || top_p > 1 || top_k < 0)
		return tool_err("generate", "invalid sampling settings"), 2;
	rc = coli_engine_open(a.model, &a.opts, &e, err, sizeof(err));
	if (rc)
		return tool_err("generate", "%s", err);
	rc = tool_prompt_ids(e, prompt, ids_arg, &ids, &n_ids);
	if (rc)
		goto out;
	coli_sampler_init(&s, temp, top_p, top_k, seed);
	rc = coli_generate(e, ids, n_ids, n, &s, on_token, NULL, &st);
	if (rc == -E2BIG) {
		tool_err("generate",
		         "prompt (%d tokens) plus %d new tokens exceeds the context of %d", n_ids,
		         n, coli_engine_ctx(e));
		rc = 1;
		goto out;
	}
	if (rc) {
		tool_err("generate", "generation failed: %s", coli_engine_errmsg(e));
		rc = 1;
		goto out;
	}
	if (isatty(STDOUT_FILENO))
		fputc('\n', stdout);
	tool_print_gen_stats(e, &st, a.opts.profile || a.opts.cuda_profile);
out:
	free(ids);
	coli_engine_close(e);
	return rc ? 1 : 0;
}
