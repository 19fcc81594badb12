/*
 * tools/bench/bench_spec.c — `coli bench spec`: what speculative decoding's
 * drafting (core/spec.c) would gain on a text, at a verification cost
 * measured on this engine and at costs given, without a second run per
 * setting.
 *
 * For each of --excerpts places in --text (at i / N of its bytes, from the
 * next line's start; --chars long), or each of --excerpts prompts of --random
 * seeded random ids (a model without a tokenizer: coli bench make-model's,
 * where drafts are rarely right), the model generates --tokens greedily
 * with drafting off: the text every --spec setting produces (speculation is
 * lossless). Then the cost of a verification is measured here: a plain
 * greedy step (coli_engine_forward_argmax) and a forward of 8 tokens with
 * every row's argmax (coli_engine_forward_argmax_all: a verification of 7
 * drafts), alternated, medians; g = (t8 - t1) / (7 t1), the extra steps a
 * draft token costs. Then core/spec.c's own drafting replays each
 * generation: coli_spec_draft on the history as the decode loop would call
 * it, the drafts accepted while they equal the generated tokens, and a cost
 * of 1 a plain step and 1 + g k a verification of k drafts fed back
 * (coli_spec_step, coli_spec_result: --spec auto's cost model learns from
 * them as it would from seconds). Policies: auto (the cost model) and ngram
 * (the fixed schedule).
 *
 * figure: the modeled speedup, tokens over the steps' worth of cost; bound:
 * every verification 7 drafts all accepted, 8 / (1 + 7 g); ratio = figure /
 * bound. The modeled speedup leaves out what the model does not see: the
 * draft's own scan (microseconds), a verification whose cost strays from
 * linear in k (a streamed MoE's grows with the union of its experts).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_internal.h"
#include "tools/bench/bench.h"
#include "tools/tools.h"

#define P       "coli bench spec"
#define MAX_G   8
#define REPS    15 /* alternated timings of each forward (medians) */
#define VERIFY  (COLI_SPEC_KMAX + 1)

static void usage(FILE *f)
{
	fprintf(f, "usage: coli bench spec -m MODEL (--text FILE | --random L) [--excerpts N]\n"
	           "          [--chars C] [--tokens T] [--g G,G,..] [engine options]\n"
	           "  greedy text from N places of FILE (default 4, C = 1200 chars each, T = 256\n"
	           "  tokens; --random: N prompts of L seeded random ids, for a model without a\n"
	           "  tokenizer), then --spec auto's and ngram's drafting replayed on it at the\n"
	           "  verification cost measured here (g: extra steps a draft token) and at\n"
	           "  each --g: modeled speedup, the bound (all 7 drafts accepted), ratio\n");
}

struct gen {
	int *ids, n, cap;
};

static int on_token(void *arg, int id, const char *text, size_t len)
{
	struct gen *g = arg;

	(void)text, (void)len;
	if (id < 0)
		return 0;
	if (g->n == g->cap) {
		int *p = realloc(g->ids, sizeof(int) * (size_t)(g->cap = g->cap ? 2 * g->cap : 256));

		if (!p)
			return 1;
		g->ids = p;
	}
	g->ids[g->n++] = id;
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median seconds of a plain greedy step and of an 8-token verification
 * at the cache's end (each rewound), alternated REPS times. */
static int measure(coli_engine_t *e, const int *ids, double *t1, double *t8)
{
	const int pos = coli_engine_pos(e), V = coli_engine_config(e)->vocab;
	double a[REPS], b[REPS];
	int next[VERIFY], rc = 0;
	float *buf = malloc(sizeof(float) * (size_t)V * VERIFY);

	if (!buf)
		return -ENOMEM;
	for (int r = 0; !rc && r < REPS; r++) {
		double t = coli_now_s();

		rc = coli_engine_forward_argmax(e, ids, 1, next);
		a[r] = coli_now_s() - t;
		rc = rc ? rc : coli_engine_rewind(e, pos);
		t = coli_now_s();
		rc = rc ? rc : coli_engine_forward_argmax_all(e, ids, VERIFY, buf, next);
		b[r] = coli_now_s() - t;
		rc = rc ? rc : coli_engine_rewind(e, pos);
	}
	free(buf);
	qsort(a, REPS, sizeof(double), cmp_d), qsort(b, REPS, sizeof(double), cmp_d);
	*t1 = a[REPS / 2], *t8 = b[REPS / 2];
	return rc;
}

struct replay {
	double cost; /* in plain steps */
	int tokens, rounds, drafted, accepted;
};

/* core/spec.c's drafting over hist = prompt and the greedy tokens gen[0, n)
 * (gen[0] from the prompt's forward), as coli_generate's loop calls it. */
static struct replay replay(const coli_engine_t *e, const int *hist, int n_prompt, int n, double g,
                            int guard)
{
	struct replay r = {0};
	struct coli_spec sp;
	int d[COLI_SPEC_KMAX], i = 0;

	coli_spec_init(&sp, e); /* (e's own --spec is off: the text is the plain loop's) */
	sp.on = 1, sp.guard = guard;
	while (i < n - 1) { /* gen[i] known and not yet forwarded */
		const int room = n - i - 2, kmax = room < COLI_SPEC_KMAX ? room : COLI_SPEC_KMAX;
		int k = kmax > 0 ? coli_spec_draft(&sp, hist, n_prompt + i + 1, kmax, d) : 0, a = 0;

		if (k <= 0) {
			coli_spec_step(&sp, 1.0);
			r.cost += 1, i++;
			continue;
		}
		while (a < k && d[a] == hist[n_prompt + i + 1 + a])
			a++;
		coli_spec_result(&sp, k, a, 1 + g * k);
		r.cost += 1 + g * k, r.rounds++, r.drafted += k, r.accepted += a;
		i += a + 1;
	}
	r.tokens = n - 1;
	return r;
}

/* n ids in [0, vocab), xorshift from seed: a model without a tokenizer. */
static int *random_prompt(int n, int vocab, uint64_t seed)
{
	int *ids = malloc(sizeof(int) * (size_t)n);

	seed = seed * 0x9e3779b97f4a7c15ull + 1;
	for (int i = 0; ids && i < n; i++) {
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		ids[i] = (int)(seed % (uint64_t)vocab);
	}
	return ids;
}

static int parse_g(const char *v, double *g, int *n)
{
	char *end;

	for (*n = 0; *v && *n < MAX_G; v = *end ? end + 1 : end) {
		g[*n] = strtod(v, &end);
		if (end == v || (*end && *end != ',') || g[*n] < 0 || g[*n] > 100)
			return tool_err(P, "--g: expected numbers 0..100, comma separated"), -1;
		++*n;
	}
	return 0;
}

int bench_spec_main(int argc, char **argv)
{
	struct tool_engine_args a;
	const char *file = NULL;
	int excerpts = 4, chars = 1200, tokens = 256, n_g = 0, rc, n_text = 0, random = 0;
	double g[MAX_G + 1], sum[MAX_G + 1][2] = {{0}};
	char *text = NULL, err[512];
	coli_engine_t *e = NULL;
	FILE *f;

	if (tool_engine_args_init(&a, P))
		return 2;
	for (int i = 1; i < argc;) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		rc = tool_engine_arg(&a, argc, argv, &i);
		if (rc < 0)
			return 2;
		if (rc)
			continue;
		if (!strcmp(o, "-h") || !strcmp(o, "--help"))
			return usage(stdout), 0;
		if (!v)
			return tool_err(P, "%s needs a value", o), 2;
		if (!strcmp(o, "--text"))
			file = v;
		else if (!strcmp(o, "--random")   ? tool_int(P, o, v, 2, 1 << 16, &random)
		         : !strcmp(o, "--excerpts") ? tool_int(P, o, v, 1, 64, &excerpts)
		         : !strcmp(o, "--chars")  ? tool_int(P, o, v, 16, 1 << 20, &chars)
		         : !strcmp(o, "--tokens") ? tool_int(P, o, v, 2, 1 << 16, &tokens)
		         : !strcmp(o, "--g")      ? parse_g(v, g + 1, &n_g)
		                                  : (tool_err(P, "unknown option '%s'", o), -1))
			return 2;
		i += 2;
	}
	if (!a.model || !file == !random)
		return usage(stderr), 2;
	if (file && !(f = fopen(file, "rb")))
		return tool_err(P, "cannot read '%s': %s", file, strerror(errno)), 1;
	if (file && (fseek(f, 0, SEEK_END) || (n_text = (int)ftell(f)) <= 0 ||
	             fseek(f, 0, SEEK_SET) || !(text = malloc((size_t)n_text + 1)) ||
	             fread(text, 1, (size_t)n_text, f) != (size_t)n_text)) {
		fclose(f), free(text);
		return tool_err(P, "cannot read '%s' (empty?)", file), 1;
	}
	if (file)
		fclose(f), text[n_text] = 0;
	a.opts.spec = COLI_OPT_SPEC_OFF; /* the text; drafting is replayed below */
	if (coli_engine_open(a.model, &a.opts, &e, err, sizeof(err))) {
		free(text);
		return tool_err(P, "%s", err), 1;
	}
	rc = 0;
	if (file)
		printf("%s: %s, %d excerpts of %s (%d chars each), %d greedy tokens each\n", P,
		       a.model, excerpts, file, chars, tokens);
	else
		printf("%s: %s, %d prompts of %d seeded random ids, %d greedy tokens each\n", P,
		       a.model, excerpts, random, tokens);
	printf("%-8s %7s %6s %-6s %6s %9s %8s %6s %6s\n", "excerpt", "at", "g", "policy",
	       "verify", "accepted", "speedup", "bound", "ratio");
	for (int x = 0; !rc && x < excerpts; x++) {
		long at = (long)n_text * x / excerpts;
		struct gen gen = {0};
		struct coli_gen_stats st;
		struct coli_sampler s;
		int *prompt = NULL, n_prompt = 0, *hist;
		double t1, t8;

		while (at > 0 && at < n_text && text[at - 1] != '\n')
			at++; /* from a line's start */
		if (at + chars > n_text)
			at = n_text - chars > 0 ? n_text - chars : 0;
		if (random && (prompt = random_prompt(random, coli_engine_config(e)->vocab, x + 1))) {
			n_prompt = random, at = x + 1; /* (the seed) */
		} else if (random) {
			rc = tool_err(P, "out of memory");
			break;
		} else { /* the excerpt alone through the tokenizer */
			const long end = at + chars < n_text ? at + chars : n_text;
			const char keep = text[end];

			text[end] = 0;
			rc = tool_prompt_ids(e, text + at, NULL, &prompt, &n_prompt);
			text[end] = keep;
			if (rc)
				break;
		}
		coli_sampler_init(&s, 0.0f, 1.0f, 0, 1);
		rc = coli_generate(e, prompt, n_prompt, tokens, &s, on_token, &gen, &st);
		coli_sampler_end(&s);
		if (!rc && gen.n >= 1)
			rc = measure(e, gen.ids, &t1, &t8);
		if (rc || gen.n < 2 || !(hist = malloc(sizeof(int) * (size_t)(n_prompt + gen.n)))) {
			if (!rc && gen.n < 2)
				fprintf(stderr, "%s: excerpt %d: %d tokens before the end of text\n", P,
				        x, gen.n);
			free(prompt), free(gen.ids);
			rc = rc ? tool_err(P, "excerpt %d: %s", x, coli_engine_errmsg(e)) : 0;
			continue;
		}
		g[0] = (t8 - t1) / (7 * t1);
		printf("excerpt %d: %d tokens; a step %.3f ms, a verification of 8 tokens %.3f ms: "
		       "g = %.3f\n",
		       x, gen.n, t1 * 1e3, t8 * 1e3, g[0]);
		memcpy(hist, prompt, sizeof(int) * (size_t)n_prompt);
		memcpy(hist + n_prompt, gen.ids, sizeof(int) * (size_t)gen.n);
		for (int j = 0; j <= n_g; j++)
			for (int guard = 1; guard >= 0; guard--) {
				struct replay r = replay(e, hist, n_prompt, gen.n, g[j], guard);
				const double sp = r.tokens / r.cost, bound = 8 / (1 + 7 * g[j]);

				sum[j][!guard] += sp;
				printf("%-8d %7ld %6.3f %-6s %6d %4d/%-4d %8.3f %6.3f %6.3f\n", x, at, g[j],
				       guard ? "auto" : "ngram", r.rounds, r.accepted, r.drafted, sp, bound,
				       sp / bound);
			}
		free(hist), free(prompt), free(gen.ids);
	}
	for (int j = 0; !rc && j <= n_g; j++) {
		if (j)
			printf("mean over the excerpts at g = %.3f:", g[j]);
		else
			printf("mean over the excerpts at the g measured:");
		printf(" auto %.3f, ngram %.3f\n", sum[j][0] / excerpts, sum[j][1] / excerpts);
	}
	coli_engine_close(e);
	free(text);
	return rc ? 1 : 0;
}
