/*
 * tools/cli/cmd_perplexity.c — `coli perplexity -m MODEL -f FILE [--window N]`:
 * the model's perplexity on a text file. The protocol is the demo trainer's
 * (tools/ref/train_demo_moe.py): the text is tokenized without special tokens
 * and cut into consecutive windows of N tokens (default 512; a tail shorter
 * than 2 tokens is dropped), each an independent sequence from position 0;
 * the loss is the mean next-token cross-entropy (natural log) over every
 * predicted position. Prints the loss, the perplexity and the uniform
 * baseline (perplexity = vocabulary size).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/coli.h"
#include "tools/tools.h"

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		if (buf) {
			buf[n] = 0;
			*len = (size_t)n;
		}
	}
	fclose(f);
	return buf;
}

int cmd_perplexity(int argc, char **argv)
{
	struct tool_engine_args a;
	const char *file = NULL;
	int window = 512, rc, *ids = NULL, n = 0, V;
	char *text = NULL, err[512];
	size_t len = 0;
	float *logits = NULL;
	double nll = 0;
	long predicted = 0;
	coli_engine_t *e;

	if (tool_engine_args_init(&a, "coli perplexity"))
		return 2;
	for (int i = 1; i < argc;) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		rc = tool_engine_arg(&a, argc, argv, &i);
		if (rc < 0)
			return 2;
		if (rc)
			continue;
		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			printf("usage: coli perplexity -m MODEL.coli -f FILE [--window N] [engine "
			       "options]\n");
			return 0;
		}
		if (!v)
			return tool_err("perplexity", "%s needs a value", o), 2;
		if (!strcmp(o, "-f"))
			file = v;
		else if (!strcmp(o, "--window")) {
			if (tool_int("coli perplexity", o, v, 2, 1 << 24, &window))
				return 2;
		} else
			return tool_err("perplexity", "unknown option '%s'", o), 2;
		i += 2;
	}
	if (!a.model || !file || window < 2) {
		fprintf(stderr, "usage: coli perplexity -m MODEL.coli -f FILE [--window N >= 2]\n");
		return 2;
	}
	text = read_all(file, &len);
	if (!text)
		return tool_err("perplexity", "cannot read '%s'", file);
	rc = coli_engine_open(a.model, &a.opts, &e, err, sizeof(err));
	if (rc) {
		free(text);
		return tool_err("perplexity", "%s", err);
	}
	if (!coli_engine_tokenizer(e)) {
		rc = tool_err("perplexity", "%s has no tokenizer", a.model);
		goto out;
	}
	if (coli_tokenizer_encode(coli_engine_tokenizer(e), text, len, &ids, &n, err,
	                          sizeof(err))) {
		rc = tool_err("perplexity", "%s: %s", file, err);
		goto out;
	}
	if (window > coli_engine_ctx(e))
		window = coli_engine_ctx(e);
	V = coli_engine_config(e)->vocab;
	logits = malloc(sizeof(float) * (size_t)window * V);
	if (!logits) {
		rc = tool_err("perplexity", "out of memory");
		goto out;
	}
	for (int w0 = 0; w0 < n; w0 += window) {
		int wn = n - w0 < window ? n - w0 : window;

		if (wn < 2)
			break;
		coli_engine_reset(e);
		rc = coli_engine_forward(e, ids + w0, wn, logits, 1);
		if (rc) {
			rc = tool_err("perplexity", "forward failed: %s", strerror(-rc));
			goto out;
		}
		for (int t = 0; t + 1 < wn; t++) {
			const float *l = logits + (size_t)t * V;
			double mx = l[0], s = 0;

			for (int v = 1; v < V; v++)
				mx = l[v] > mx ? l[v] : mx;
			for (int v = 0; v < V; v++)
				s += exp(l[v] - mx);
			nll += mx + log(s) - l[ids[w0 + t + 1]];
			predicted++;
		}
		if (isatty(2))
			fprintf(stderr, "\rcoli perplexity: %d/%d tokens", w0 + wn, n);
	}
	if (isatty(2))
		fputc('\n', stderr);
	if (!predicted) {
		rc = tool_err("perplexity", "%s: fewer than 2 tokens", file);
		goto out;
	}
	printf("tokens %d  predicted %ld  loss %.4f  perplexity %.3f  (uniform: %d)\n", n,
	       predicted, nll / predicted, exp(nll / predicted), V);
	rc = 0;
out:
	free(logits);
	free(ids);
	free(text);
	coli_engine_close(e);
	return rc;
}
