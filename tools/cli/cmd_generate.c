/*
 * tools/cli/cmd_generate.c — `coli generate -m MODEL -p TEXT [-n N] [--temperature T]
 * [--top-p P] [--top-k K] [--min-p P] [--presence-penalty X]
 * [--frequency-penalty X] [--repetition-penalty R] [--logit-bias ID=B,...]
 * [--seed S] [--chat [--system S]] [--json | --json-schema FILE] [--draft
 * DRAFT.coli] [engine options]`: the completion text
 * alone on stdout (streamed as it decodes), statistics on stderr. The
 * sampling values mean what colid's fields of the same names mean
 * (core/coli.h, docs/api.md). --chat renders TEXT as a user message (after S
 * as a system one) through the model's chat template (coli_chat_render_call:
 * its Jinja template, or the family renderer; --chat-template picks).
 * --json / --json-schema constrain the completion (core/text/grammar*.c).
 * --draft opens a second model, with the same engine options, whose greedy
 * steps draft tokens for speculative decoding (coli_engine_set_draft).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/coli.h"
#include "tools/tools.h"

#define P        "coli generate"
#define GEN_MAX  (1 << 24) /* -n, --top-k: --ctx's bound */
#define TEMP_MAX 100.0

static void help(FILE *f)
{
	fprintf(f,
	        "usage: coli generate -m MODEL.coli -p TEXT [-n N] [--temperature T] [--top-p P]\n"
	        "                     [--top-k K] [--min-p P] [--presence-penalty X]\n"
	        "                     [--frequency-penalty X] [--repetition-penalty R]\n"
	        "                     [--logit-bias ID=B,...] [--seed S] [--ids 1,2,3]\n"
	        "                     [--json | --json-schema FILE] [--draft DRAFT.coli]\n"
	        "                     [engine options]\n"
	        "  -n N            tokens to generate, 0..16777216 (default 64; 0: prefill only)\n"
	        "  --temperature T 0..100: 0 = greedy (default), else sampling\n"
	        "  --top-p P       nucleus sampling, (0, 1] (default 1: off)\n"
	        "  --top-k K       sample among the K likeliest, 0..16777216 (default 0: off)\n"
	        "  --min-p P       cut tokens below P times the likeliest's probability, 0..1\n"
	        "                  (default 0: off)\n"
	        "  --presence-penalty X   -2..2: minus X for a token already generated\n"
	        "  --frequency-penalty X  -2..2: minus X times its count so far\n"
	        "  --repetition-penalty R (0, 10]: a logit of a token in the prompt or\n"
	        "                  generated divided by R (positive) or times R (default 1)\n"
	        "  --logit-bias ID=B,...  add B (-100..100) to token ID's logit; -100 bans it\n"
	        "  --seed S        sampler seed, 64-bit, decimal or 0x hex (default 0)\n"
	        "  --ids LIST      prompt as token ids instead of text\n"
	        "  --chat          TEXT is a user message, rendered with the chat template\n"
	        "  --system S      with --chat: a system message first\n"
	        "  --json          the completion is a JSON object (constrained decoding)\n"
	        "  --json-schema FILE  the completion is JSON valid under FILE's schema\n"
	        "                  (the subset of docs/api.md, Structured output)\n"
	        "  --draft DRAFT.coli  speculative decoding with drafts from DRAFT's greedy\n"
	        "                  steps (a smaller model with the same tokenizer, opened with\n"
	        "                  the same engine options), verified several tokens a forward:\n"
	        "                  the same text; --spec off turns it off\n\n");
	coli_opts_help(f);
}

/* "ID=B,ID=B": *out malloc'd; 0, or 2 after saying what is wrong. */
/* --json-schema FILE: the file's schema compiled (errors said, naming the
 * keyword refused). */
static int read_schema(const char *path, struct coli_grammar **g)
{
	char err[512] = "";
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n = -1;
	int rc;

	if (f && !fseek(f, 0, SEEK_END))
		n = ftell(f);
	if (n >= 0 && n < (1l << 24) && !fseek(f, 0, SEEK_SET))
		buf = malloc((size_t)n + 1);
	if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		if (f)
			fclose(f);
		free(buf);
		return tool_err("generate", "--json-schema '%s': cannot read it", path), -EIO;
	}
	fclose(f);
	rc = coli_grammar_from_schema(buf, (size_t)n, g, err, sizeof(err));
	free(buf);
	if (rc)
		tool_err("generate", "--json-schema '%s': %s", path, err);
	return rc;
}

static int parse_bias(const char *v, struct coli_logit_bias **out, int *n)
{
	char *copy = strdup(v), *save = NULL, *item;
	int cap = 1;

	for (const char *p = v; *p; p++)
		cap += *p == ',';
	*out = calloc((size_t)cap, sizeof(**out));
	*n = 0;
	if (!copy || !*out) {
		free(copy);
		return tool_err("generate", "out of memory"), 2;
	}
	for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		double b;
		int id;

		if (eq)
			*eq = 0;
		if (!eq || coli_parse_int(item, 0, GEN_MAX, &id) ||
		    coli_parse_double(eq + 1, -100, 100, &b)) {
			tool_err("generate",
			         "--logit-bias '%s': expected ID=BIAS[,ID=BIAS...], a token id and "
			         "a number in -100..100",
			         v);
			free(copy);
			return 2;
		}
		(*out)[(*n)++] = (struct coli_logit_bias){id, (float)b};
	}
	free(copy);
	return 0;
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
	const char *prompt = NULL, *ids_arg = NULL, *system = NULL, *schema_file = NULL;
	const char *draft_path = NULL;
	coli_engine_t *draft = NULL;
	struct coli_grammar *grammar = NULL;
	int json = 0, eot = -1, eot2 = -1;
	char *chat_text = NULL;
	int chat = 0;
	double temp = 0, top_p = 1, min_p = 0, pres = 0, freq = 0, rep = 1;
	struct coli_logit_bias *bias = NULL;
	int n_bias = 0;
	int top_k = 0, n = 64, rc, n_ids = 0;
	uint64_t seed = 0;
	int *ids = NULL;
	coli_engine_t *e;
	char err[512];

	if (tool_engine_args_init(&a, "coli generate"))
		return 2;
	for (int i = 1; i < argc;) {
		const char *o = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		rc = tool_engine_arg(&a, argc, argv, &i);
		if (rc < 0)
			goto usage;
		if (rc)
			continue;
		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			help(stdout);
			free(bias);
			return 0;
		}
		if (!strcmp(o, "--chat") || !strcmp(o, "--json")) {
			chat |= o[2] == 'c';
			json |= o[2] == 'j';
			i++;
			continue;
		}
		if (!v) {
			tool_err("generate", "%s needs a value (see --help)", o);
			goto usage;
		}
		if (!strcmp(o, "-p") || !strcmp(o, "--prompt"))
			prompt = v;
		else if (!strcmp(o, "--system"))
			system = v;
		else if (!strcmp(o, "--json-schema"))
			schema_file = v;
		else if (!strcmp(o, "--draft"))
			draft_path = v;
		else if (!strcmp(o, "--ids"))
			ids_arg = v;
		else if (!strcmp(o, "-n"))
			bad = tool_int(P, o, v, 0, GEN_MAX, &n);
		else if (!strcmp(o, "--temperature"))
			bad = tool_double(P, o, v, 0, TEMP_MAX, &temp);
		else if (!strcmp(o, "--top-p"))
			bad = tool_double(P, o, v, 0, 1, &top_p);
		else if (!strcmp(o, "--top-k"))
			bad = tool_int(P, o, v, 0, GEN_MAX, &top_k);
		else if (!strcmp(o, "--seed"))
			bad = tool_u64(P, o, v, 0, UINT64_MAX, &seed);
		else if (!strcmp(o, "--min-p"))
			bad = tool_double(P, o, v, 0, 1, &min_p);
		else if (!strcmp(o, "--presence-penalty"))
			bad = tool_double(P, o, v, -2, 2, &pres);
		else if (!strcmp(o, "--frequency-penalty"))
			bad = tool_double(P, o, v, -2, 2, &freq);
		else if (!strcmp(o, "--repetition-penalty"))
			bad = tool_double(P, o, v, 0, 10, &rep) ||
			      (rep == 0 &&
			       tool_err("generate",
			                "--repetition-penalty '0': expected a number in (0, 10]"));
		else if (!strcmp(o, "--logit-bias")) {
			free(bias);
			bad = parse_bias(v, &bias, &n_bias);
		} else {
			tool_err("generate", "unknown option '%s' (see --help)", o);
			goto usage;
		}
		if (bad)
			goto usage;
		i += 2;
	}
	if (!a.model || (!prompt && !ids_arg)) {
		help(stderr);
		goto usage;
	}
	if (top_p == 0) {
		tool_err("generate", "--top-p '0': expected a number in (0, 1]");
		goto usage;
	}
	if (json || schema_file) { /* the grammar first: a bad schema costs no model load */
		rc = schema_file ? read_schema(schema_file, &grammar)
		                 : coli_grammar_json_object(&grammar);
		if (rc)
			goto usage;
	}
	rc = coli_engine_open(a.model, &a.opts, &e, err, sizeof(err));
	if (rc) {
		coli_grammar_free(grammar);
		free(bias);
		return tool_err("generate", "%s", err);
	}
	if (draft_path) {
		rc = coli_engine_open(draft_path, &a.opts, &draft, err, sizeof(err));
		if (rc)
			tool_err("generate", "--draft '%s': %s", draft_path, err);
		else if ((rc = coli_engine_set_draft(e, draft, err, sizeof(err))))
			tool_err("generate", "--draft '%s': %s", draft_path, err);
		if (rc) {
			rc = 1;
			goto out;
		}
	}
	if (chat && prompt) {
		struct coli_chat_template t;
		struct coli_chat_msg m[2] = {{"system", system}, {"user", prompt}};
		struct coli_chat_call c = {.msgs = system ? m : m + 1,
		                           .n_msgs = system ? 2 : 1,
		                           .add_generation_prompt = 1,
		                           .enable_thinking = -1,
		                           .now = -1};
		size_t len;

		coli_chat_template_init(e, &t);
		eot = t.eot_id;
		eot2 = t.eot2_id;
		if (grammar &&
		    coli_grammar_as_answer(grammar, t.family)) { /* (harmony's channel) */
			coli_chat_template_free(&t);
			tool_err("generate", "out of memory");
			rc = 1;
			goto out;
		}
		if (!t.jinja) /* say why the model's template is not the one in use */
			fprintf(stderr, "coli generate: chat template: built-in %s renderer (%s)\n",
			        coli_chat_family_name(t.family), t.jinja_why);
		rc = coli_chat_render_call(&t, &c, &chat_text, &len, err, sizeof(err));
		if (rc)
			tool_err("generate", "chat template (%s): %s", coli_chat_renderer_name(&t),
			         err);
		coli_chat_template_free(&t);
		if (rc) {
			rc = 1;
			goto out;
		}
		prompt = chat_text;
	}
	rc = tool_prompt_ids(e, prompt, ids_arg, &ids, &n_ids);
	if (rc)
		goto out;
	for (int i = 0; i < n_bias; i++)
		if (bias[i].id >= coli_engine_config(e)->vocab) {
			tool_err("generate",
			         "--logit-bias: token id %d is outside the vocabulary "
			         "(0..%d)",
			         bias[i].id, coli_engine_config(e)->vocab - 1);
			rc = 2;
			goto out;
		}
	coli_sampler_init(&s, (float)temp, (float)top_p, top_k, seed);
	s.min_p = (float)min_p;
	s.presence_penalty = (float)pres;
	s.frequency_penalty = (float)freq;
	s.repetition_penalty = (float)rep;
	s.bias = bias;
	s.n_bias = n_bias;
	s.grammar = grammar;
	if (eot >= 0) /* the chat turn's end ends the JSON too */
		s.end_ids[s.n_end_ids++] = eot;
	if (eot2 >= 0)
		s.end_ids[s.n_end_ids++] = eot2;
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
	free(chat_text);
	free(ids);
	free(bias);
	coli_engine_close(e);
	coli_engine_close(draft);
	coli_grammar_free(grammar);
	return rc == 2 ? 2 : rc ? 1 : 0;
usage: /* a bad command line, the engine not opened */
	free(bias);
	return 2;
}
