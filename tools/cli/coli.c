/*
 * tools/cli/coli.c — the coli command line: one binary, one subcommand per file
 * (tools/cli/cmd_<name>.c defines `int cmd_<name>(int argc, char **argv)`, argv[0]
 * being the subcommand's name). Subcommands are declared weak so the table
 * can name every command the design promises while each lands on its own.
 */
#include <stdio.h>
#include <string.h>

#include "tools/tools.h"

#define CMD(name) int cmd_##name(int argc, char **argv) __attribute__((weak));
CMD(convert)
CMD(inspect)
CMD(verify)
CMD(tokenize)
CMD(generate)
CMD(logits)
CMD(bench)
CMD(perplexity)
CMD(trace_diff)
CMD(usage)
#undef CMD

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} g_cmds[] = {
    {"convert", cmd_convert, "HF_DIR|MODEL.gguf -o OUT.coli [--quant Q] convert a checkpoint"},
    {"inspect", cmd_inspect,
     "MODEL.coli                              print what a container holds"},
    {"verify", cmd_verify, "MODEL.coli                              check every checksum"},
    {"tokenize", cmd_tokenize, "-m MODEL.coli TEXT                      print token ids"},
    {"generate", cmd_generate, "-m MODEL.coli -p TEXT [-n N] ...         generate text"},
    {"logits", cmd_logits, "-m MODEL.coli (--text T | --ids I) -o F  teacher-forced logits"},
    {"bench", cmd_bench, "decode|prefill|stream|kernels|serve|...  measure against bounds"},
    {"perplexity", cmd_perplexity, "-m MODEL.coli -f FILE                    perplexity of a text"},
    {"trace-diff", cmd_trace_diff, "A B                                     first differing route"},
    {"usage", cmd_usage, "snapshot|restore MODEL.coli [FILE]       save / restore expert heat"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: coli COMMAND [ARGS]   (coli COMMAND --help for details)\n\n");
	for (size_t i = 0; i < sizeof(g_cmds) / sizeof(g_cmds[0]); i++)
		fprintf(f, "  %-11s %s%s\n", g_cmds[i].name, g_cmds[i].help,
		        g_cmds[i].fn ? "" : "  (not built yet)");
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (size_t i = 0; i < sizeof(g_cmds) / sizeof(g_cmds[0]); i++) {
		if (strcmp(argv[1], g_cmds[i].name))
			continue;
		if (!g_cmds[i].fn) {
			fprintf(stderr, "coli: '%s' is not part of this build yet\n", argv[1]);
			return 2;
		}
		return g_cmds[i].fn(argc - 1, argv + 1);
	}
	fprintf(stderr, "coli: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
