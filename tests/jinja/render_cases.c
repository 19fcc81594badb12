/*
 * tests/jinja/render_cases.c — core/jinja against jinja2: every line of the
 * tests/fixtures/chat/ *_render.jsonl files (written by
 * tools/ref/jinja_render_cases.py from jinja2 configured as transformers
 * configures it; tests/jinja/jinja2_cases.sh checks they are current) is a
 * template (a file of tests/fixtures/chat/ or inline source), a context (the
 * variables apply_chat_template passes: messages, tools,
 * add_generation_prompt, bos_token, eos_token, chat_template_kwargs...), the
 * time strftime_now sees, and jinja2's text or the fact that it raised.
 * coli's render must be that text byte for byte, or fail where jinja2
 * failed. Prints one line per file, and the first differing byte of a
 * mismatch.
 */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/jinja/jinja.h"

static int fails;

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *p = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (p = malloc((size_t)n + 1)) && fread(p, 1, (size_t)n, f) == (size_t)n) {
		p[n] = 0;
		*len = (size_t)n;
	} else {
		free(p);
		p = NULL;
	}
	fclose(f);
	return p;
}

static void diff(const char *what, int line, const char *want, const char *got)
{
	size_t i = 0;

	while (want[i] && want[i] == got[i])
		i++;
	fprintf(stderr, "FAIL %s:%d: differs at byte %zu\n  want: %.120s\n  got:  %.120s\n", what,
	        line, i, want + (i > 40 ? i - 40 : 0), got + (i > 40 ? i - 40 : 0));
}

static int one_file(const char *dir, const char *name)
{
	char path[4096], tpath[4096], err[512];
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	int n = 0, lineno = 0, bad = 0;
	char cur_tpl[256] = "";
	coli_jinja_t *t = NULL;
	int t_err = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "FAIL cannot open %s\n", path);
		return 1;
	}
	while (getline(&line, &cap, f) > 0) {
		json_error_t je;
		json_t *c = json_loads(line, 0, &je);
		const char *tpl, *src, *want;
		char *out = NULL;
		size_t len;
		int rc, want_err;

		lineno++;
		if (!c) {
			fprintf(stderr, "FAIL %s:%d: bad JSON: %s\n", name, lineno, je.text);
			bad++;
			continue;
		}
		tpl = json_string_value(json_object_get(c, "template"));
		src = json_string_value(json_object_get(c, "source"));
		want = json_string_value(json_object_get(c, "text"));
		want_err = json_object_get(c, "error") != NULL;
		if (src || !tpl || strcmp(tpl, cur_tpl)) {
			coli_jinja_free(t);
			t = NULL;
			cur_tpl[0] = 0;
			if (src) {
				t_err = coli_jinja_parse(src, strlen(src), &t, err, sizeof(err));
			} else {
				char *s;
				size_t sl;

				snprintf(tpath, sizeof(tpath), "%s/%s", dir, tpl ? tpl : "?");
				s = slurp(tpath, &sl);
				t_err = s ? coli_jinja_parse(s, sl, &t, err, sizeof(err)) : -2;
				free(s);
				snprintf(cur_tpl, sizeof(cur_tpl), "%s", tpl ? tpl : "");
			}
		}
		if (t_err) {
			if (!want_err) {
				fprintf(stderr, "FAIL %s:%d: parse: %s\n", name, lineno, err);
				bad++;
			}
			n++;
			json_decref(c);
			continue;
		}
		rc = coli_jinja_render(t, json_object_get(c, "context"),
		                       json_integer_value(json_object_get(c, "now")), NULL, &out,
		                       &len, err, sizeof(err));
		if (want_err) {
			if (!rc) {
				fprintf(stderr, "FAIL %s:%d: rendered where jinja2 raised (%s)\n",
				        name, lineno,
				        json_string_value(json_object_get(c, "error")));
				bad++;
			}
		} else if (rc) {
			fprintf(stderr, "FAIL %s:%d: %s\n", name, lineno, err);
			bad++;
		} else if (!want || len != strlen(want) || memcmp(out, want, len)) {
			diff(name, lineno, want ? want : "", out);
			bad++;
		}
		free(out);
		json_decref(c);
		n++;
	}
	free(line);
	fclose(f);
	coli_jinja_free(t);
	printf("%s  %s: %d cases, %d differ\n", bad ? "FAIL" : "ok  ", name, n, bad);
	return bad || n == 0;
}

int main(int argc, char **argv)
{
	const char *fx = getenv("FIXTURES");
	char dir[4096];
	struct dirent **ents;
	int n, files = 0;

	snprintf(dir, sizeof(dir), "%s/chat", fx ? fx : "tests/fixtures");
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			fails += one_file(dir, argv[i]);
		return fails ? 1 : 0;
	}
	n = scandir(dir, &ents, NULL, alphasort);
	if (n < 0) {
		fprintf(stderr, "FAIL cannot read %s\n", dir);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		size_t l = strlen(ents[i]->d_name);

		if (l > 13 && !strcmp(ents[i]->d_name + l - 13, "_render.jsonl")) {
			fails += one_file(dir, ents[i]->d_name);
			files++;
		}
		free(ents[i]);
	}
	free(ents);
	if (files < 6) {
		fprintf(stderr, "FAIL only %d _render.jsonl files in %s\n", files, dir);
		return 1;
	}
	return fails ? 1 : 0;
}
