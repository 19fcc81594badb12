/*
 * tests/tools/embed/example.c — a program that embeds libcoli, built by
 * tests/tools/install_pkgconfig.sh against the installed header and library
 * only (pkg-config --cflags/--libs coli), never by the Makefile's test rule
 * (it sits one folder below tests/MODULE/).
 *
 *   example MODEL.coli PROMPT N
 *
 * Opens the model with the default options (and the environment's, as coli
 * does), encodes PROMPT with the model's tokenizer, generates N tokens
 * greedily and writes their text to stdout, as `coli generate -m MODEL.coli
 * -p PROMPT -n N --temperature 0` does; the ids go to stderr, one line.
 */
#include <coli/coli.h>
#include <stdlib.h>
#include <string.h>

static int on_token(void *arg, int id, const char *text, size_t len)
{
	fprintf(stderr, "%s%d", *(int *)arg ? " " : "ids: ", id);
	*(int *)arg = 1;
	fwrite(text, 1, len, stdout);
	return 0;
}

int main(int argc, char **argv)
{
	struct coli_opts o;
	struct coli_sampler s;
	struct coli_gen_stats st;
	const coli_tokenizer_t *tok;
	coli_engine_t *e;
	int *ids = NULL, n_ids = 0, any = 0, rc;
	char err[512];

	if (argc != 4) {
		fprintf(stderr, "usage: example MODEL.coli PROMPT N\n");
		return 2;
	}
	if (coli_opts_init(&o, err, sizeof(err))) { /* a bad COLI_* environment variable */
		fprintf(stderr, "example: %s\n", err);
		return 2;
	}
	rc = coli_engine_open(argv[1], &o, &e, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "example: cannot open %s: %s\n", argv[1], err);
		return 1;
	}
	tok = coli_engine_tokenizer(e);
	if (!tok ||
	    coli_tokenizer_encode(tok, argv[2], strlen(argv[2]), &ids, &n_ids, err, sizeof(err)) ||
	    n_ids == 0) {
		fprintf(stderr, "example: cannot encode the prompt: %s\n",
		        tok ? err : "no tokenizer");
		rc = 1;
		goto out;
	}
	coli_sampler_init(&s, 0.0f, 1.0f, 0, 0);
	rc = coli_generate(e, ids, n_ids, atoi(argv[3]), &s, on_token, &any, &st);
	fprintf(stderr, "\n");
	if (rc)
		fprintf(stderr, "example: generation failed: %s\n", coli_engine_errmsg(e));
out:
	free(ids);
	coli_engine_close(e);
	return rc ? 1 : 0;
}
