/*
 * tools/cli/cmd_tokenize.c — `coli tokenize`: text to ids (or ids to text) with
 * the tokenizer of a .coli container or of a bare tokenizer.json.
 *
 *   coli tokenize -m MODEL.coli TEXT              ids, space separated, one line
 *   coli tokenize --tokenizer-json FILE TEXT      the same from a tokenizer.json
 *   ... --decode ID...                            the text of ids (no newline added)
 *   ... --lines FILE                              batch: every line of FILE is a
 *                                                 JSON string; prints one line of
 *                                                 ids per line ("ERR <message>" for
 *                                                 text that fails to encode)
 *   ... --decode --lines FILE                     batch: every line is ids; prints
 *                                                 each decoded text as a JSON string
 *
 * TEXT "-" reads the text from stdin. Batch mode is what the HF parity test
 * drives thousands of cases through.
 */
#include <errno.h>
#include <limits.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"
#include "io/io.h"
#include "tools/tools.h"

static char *read_file(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	char *buf = NULL;
	size_t n = 0, cap = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (cap - n < 65536) {
			cap = cap ? 2 * cap : 1 << 20;
			char *nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
	}
	if (f != stdin)
		fclose(f);
	if (buf) {
		buf[n] = 0;
		*len = n;
	}
	return buf;
}

static int load(const char *model, const char *tj, coli_tokenizer_t **t)
{
	char err[512];
	size_t len = 0;
	int rc;

	if (tj) {
		char *json = read_file(tj, &len);
		if (!json)
			return tool_err("tokenize", "%s: cannot read", tj);
		rc = coli_tokenizer_load(json, len, t, err, sizeof(err));
		free(json);
	} else {
		coli_container_t *c;
		const char *json;

		if ((rc = coli_io_container_open(model, &c)))
			return tool_err("tokenize", "%s", coli_io_errmsg());
		json = coli_io_container_section(c, COLI_SECTION_TOKENIZER, &len);
		if (!json) {
			coli_io_container_close(c);
			return tool_err(
			    "tokenize",
			    "%s: this model has no tokenizer (converted without tokenizer.json)",
			    model);
		}
		rc = coli_tokenizer_load(json, len, t, err, sizeof(err));
		coli_io_container_close(c);
	}
	if (rc)
		return tool_err("tokenize", "%s: %s", tj ? tj : model, err);
	return 0;
}

static int print_ids(const coli_tokenizer_t *t, const char *text, size_t len, int batch)
{
	char err[256];
	int *ids, n;
	int rc = coli_tokenizer_encode(t, text, len, &ids, &n, err, sizeof(err));

	if (rc && batch)
		printf("ERR %s\n", err);
	else if (rc)
		tool_err("tokenize", "%s", err);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++)
		printf(i ? " %d" : "%d", ids[i]);
	putchar('\n');
	free(ids);
	return 0;
}

static int parse_ids(const char *s, int **ids, int *n)
{
	size_t cap = 16;
	char *end;

	*n = 0;
	*ids = malloc(cap * sizeof(int));
	while (*ids) {
		while (*s == ' ' || *s == ',' || *s == '\t' || *s == '\n' || *s == '\r')
			s++;
		if (!*s)
			return 0;
		long v = strtol(s, &end, 10);
		if (end == s || v < 0 || v > INT_MAX)
			break; /* not an id (LONG_MAX: an overflow) */
		if ((size_t)*n == cap) {
			int *nv = realloc(*ids, (cap *= 2) * sizeof(int));
			if (!nv)
				break;
			*ids = nv;
		}
		(*ids)[(*n)++] = (int)v;
		s = end;
	}
	free(*ids);
	*ids = NULL;
	return -EINVAL;
}

static int decode_line(const coli_tokenizer_t *t, const char *s, int as_json)
{
	int *ids, n, rc;
	char *text;
	size_t len;

	if ((rc = parse_ids(s, &ids, &n)))
		return tool_err("tokenize", "bad ids: %s", s);
	rc = coli_tokenizer_decode(t, ids, n, &text, &len);
	free(ids);
	if (rc)
		return tool_err("tokenize", "decode: %s", strerror(-rc));
	if (as_json) {
		json_t *j = json_stringn(text, len);
		char *d = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
		printf("%s\n", d ? d : "null");
		free(d);
		json_decref(j);
	} else {
		fwrite(text, 1, len, stdout);
	}
	free(text);
	return 0;
}

static int run_lines(const coli_tokenizer_t *t, const char *path, int decode)
{
	size_t len;
	char *buf = read_file(path, &len);
	int bad = 0;

	if (!buf)
		return tool_err("tokenize", "%s: cannot read", path);
	for (char *line = buf, *nl; line < buf + len; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(buf + len - line));
		if (!nl)
			nl = buf + len;
		*nl = 0;
		if (decode) {
			bad |= decode_line(t, line, 1) != 0;
			continue;
		}
		json_error_t je;
		json_t *j = json_loads(line, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
		if (!json_is_string(j)) {
			json_decref(j);
			free(buf);
			return tool_err("tokenize", "%s: a line is not a JSON string", path);
		}
		print_ids(t, json_string_value(j), json_string_length(j), 1);
		json_decref(j);
	}
	free(buf);
	fflush(stdout);
	return bad;
}

static int usage(void)
{
	fprintf(stderr, "usage: coli tokenize (-m MODEL.coli | --tokenizer-json FILE) "
	                "[--decode] (TEXT | ID... | --lines FILE)\n");
	return 2;
}

int cmd_tokenize(int argc, char **argv)
{
	const char *model = NULL, *tj = NULL, *lines = NULL;
	int decode = 0, i, rc;
	coli_tokenizer_t *t;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-m") && i + 1 < argc)
			model = argv[++i];
		else if (!strcmp(argv[i], "--tokenizer-json") && i + 1 < argc)
			tj = argv[++i];
		else if (!strcmp(argv[i], "--lines") && i + 1 < argc)
			lines = argv[++i];
		else if (!strcmp(argv[i], "--decode"))
			decode = 1;
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return usage() - 2;
		else if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if (argv[i][0] == '-' && argv[i][1] && !decode)
			return usage();
		else
			break;
	}
	if ((!model) == (!tj) || (!lines && i >= argc))
		return usage();
	if ((rc = load(model, tj, &t)))
		return rc;
	if (lines) {
		rc = run_lines(t, lines, decode);
	} else if (decode) {
		size_t cap = 0, n = 0;
		char *s = NULL;
		for (; i < argc; i++) { /* ids may be separate arguments or one list */
			size_t l = strlen(argv[i]);
			char *ns = realloc(s, (cap = n + l + 2));
			if (!ns)
				break;
			s = ns;
			memcpy(s + n, argv[i], l);
			n += l;
			s[n++] = ' ';
			s[n] = 0;
		}
		rc = s ? decode_line(t, s, 0) : 1;
		free(s);
	} else if (!strcmp(argv[i], "-")) {
		size_t len;
		char *text = read_file("-", &len);
		rc = text ? print_ids(t, text, len, 0) != 0
		          : tool_err("tokenize", "cannot read stdin");
		free(text);
	} else {
		rc = print_ids(t, argv[i], strlen(argv[i]), 0) != 0;
	}
	coli_tokenizer_free(t);
	return rc;
}
