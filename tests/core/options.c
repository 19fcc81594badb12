/*
 * tests/core/options.c — the options table (core/options.c) and the strict
 * number parser (core/parse.c).
 *
 * The rows are read back from coli_opts_help's own output, so every row of
 * the table is covered without this file listing them: each line names the
 * flag and/or environment variable and ends "[allowed; default D]", where
 * allowed is "a|b|c" (a choice), "LO..HI" or ">= LO" (a number), "on|off".
 * For every row: its default parses and is what coli_opts_init gives; a
 * choice takes each of its names and refuses another with a message naming
 * the option, the value and every choice; a number takes its bounds and
 * refuses one past them and junk ("abc", "5x", "", "99999999999"); the same
 * bad value in the environment makes coli_opts_init fail naming the
 * variable, and leaves the default.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"

static int g_fail;

#define EXPECT(cond, ...)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                                \
			printf(__VA_ARGS__);                                                       \
			printf("\n");                                                              \
			g_fail++;                                                                  \
		}                                                                                  \
	} while (0)

struct row {
	char flag[48], env[48], allowed[128], def[64];
};

/* "  --stream / COLI_STREAM   text [auto|off|only; default auto]" */
static int parse_help_line(const char *line, struct row *r)
{
	const char *lb = strrchr(line, '['), *semi, *dflt;
	char lhs[48];
	size_t n;

	memset(r, 0, sizeof(*r));
	if (strncmp(line, "  ", 2) || !lb || !(dflt = strstr(lb, "default ")))
		return -1;
	if (sscanf(line, " %47s", lhs) != 1)
		return -1;
	if (!strncmp(lhs, "--", 2)) {
		snprintf(r->flag, sizeof(r->flag), "%s", lhs);
		if (!strncmp(line + 2 + strlen(lhs), " / ", 3))
			sscanf(line + 2 + strlen(lhs) + 3, "%47s", r->env);
	} else {
		snprintf(r->env, sizeof(r->env), "%s", lhs);
	}
	semi = strchr(lb, ';');
	if (semi && semi < dflt) {
		n = (size_t)(semi - lb - 1);
		snprintf(r->allowed, sizeof(r->allowed), "%.*s", (int)n, lb + 1);
	}
	dflt += strlen("default ");
	n = strcspn(dflt, "]");
	snprintf(r->def, sizeof(r->def), "%.*s", (int)n, dflt);
	return 0;
}

static const char *name_of(const struct row *r)
{
	return r->flag[0] ? r->flag : r->env;
}

/* v refused through the flag (when the row has one) and the environment,
 * each message naming the option and v and containing want. */
static void expect_refused(const struct row *r, const char *v, const char *want)
{
	struct coli_opts o, d;
	char err[512], def[64], got[64];

	coli_opts_init(&d, NULL, 0);
	if (r->flag[0]) { /* --flag=V: a bare --profile or --verbose takes no separate value */
		char arg[128], *argv[] = {(char *)"x", arg};
		int i = 1, rc;

		snprintf(arg, sizeof(arg), "%s=%s", r->flag, v);
		o = d;
		rc = coli_opts_parse_arg(&o, 2, argv, &i, err, sizeof(err));
		EXPECT(rc == -EINVAL, "%s '%s' accepted", r->flag, v);
		EXPECT(rc != -EINVAL ||
		           (strstr(err, r->flag) && strstr(err, v) && strstr(err, want)),
		       "%s '%s': message '%s' does not name the option, value and '%s'", r->flag, v,
		       err, want);
	}
	if (r->env[0] && *v) { /* an empty variable counts as unset */
		setenv(r->env, v, 1);
		err[0] = 0;
		EXPECT(coli_opts_init(&o, err, sizeof(err)) == -EINVAL, "%s='%s' accepted", r->env,
		       v);
		EXPECT(strstr(err, r->env) && strstr(err, v) && strstr(err, want),
		       "%s='%s': message '%s' does not name the variable, value and '%s'", r->env,
		       v, err, want);
		coli_opts_get(&o, r->env, got, sizeof(got));
		coli_opts_get(&d, r->env, def, sizeof(def));
		EXPECT(!strcmp(got, def), "%s='%s' left %s, not the default %s", r->env, v, got,
		       def);
		unsetenv(r->env);
	}
}

static void expect_taken(const struct row *r, const char *v, const char *as)
{
	struct coli_opts o;
	char err[512] = "", got[64];
	int rc;

	coli_opts_init(&o, NULL, 0);
	rc = coli_opts_set(&o, name_of(r), v, err, sizeof(err));
	EXPECT(rc == 0, "%s '%s' refused: %s", name_of(r), v, err);
	coli_opts_get(&o, name_of(r), got, sizeof(got));
	EXPECT(rc || !strcmp(got, as), "%s '%s' reads back as '%s', not '%s'", name_of(r), v, got,
	       as);
}

static void check_choices(const struct row *r)
{
	char list[128], *save = NULL;

	snprintf(list, sizeof(list), "%s", r->allowed);
	for (char *c = strtok_r(list, "|", &save); c; c = strtok_r(NULL, "|", &save)) {
		expect_taken(r, c, c);
		expect_refused(r, "bogus", c); /* the message lists every choice */
	}
	expect_refused(r, "", "expected");
}

static void check_number(const struct row *r)
{
	static const char *junk[] = {"abc", "5x", "", " 1", "99999999999", "1e999", "nan"};
	double lo, hi = INFINITY;
	int is_int;
	char v[64];

	if (!strncmp(r->allowed, ">= ", 3)) {
		lo = atof(r->allowed + 3);
	} else if (strstr(r->allowed, "..")) { /* "0..1": %lf would read "0." */
		lo = atof(r->allowed);
		hi = atof(strstr(r->allowed, "..") + 2);
	} else {
		EXPECT(0, "%s: cannot read its range '%s'", name_of(r), r->allowed);
		return;
	}
	is_int = !strchr(r->allowed, 'e') && lo == floor(lo) && (isinf(hi) || hi == floor(hi));
	for (size_t k = 0; k < sizeof(junk) / sizeof(junk[0]); k++)
		expect_refused(r, junk[k], "expected");
	snprintf(v, sizeof(v), "%.17g", lo);
	expect_taken(r, v, v);
	snprintf(v, sizeof(v), "%.17g", lo - 1);
	expect_refused(r, v, r->allowed);
	if (!isinf(hi)) {
		char as[64];

		snprintf(v, sizeof(v), "%.17g", hi);
		snprintf(as, sizeof(as), is_int ? "%.0f" : "%g", hi);
		expect_taken(r, v, as);
		snprintf(v, sizeof(v), "%.17g", hi + 1);
		expect_refused(r, v, r->allowed);
	}
}

static void check_rows(void)
{
	char *buf = NULL, *line, *save = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int n = 0, n_choice = 0, n_num = 0;
	struct coli_opts o;

	coli_opts_help(f);
	fclose(f);
	EXPECT(coli_opts_init(&o, NULL, 0) == 0, "defaults: coli_opts_init failed");
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct row r;
		char got[64];

		if (parse_help_line(line, &r))
			continue;
		n++;
		/* the default is a value of the row, and what init gives */
		if (strcmp(r.def, "unset")) {
			coli_opts_get(&o, name_of(&r), got, sizeof(got));
			EXPECT(!strcmp(got, r.def),
			       "%s: default reads back as '%s', help says '%s'", name_of(&r), got,
			       r.def);
			expect_taken(&r, r.def, r.def);
		}
		if (!r.allowed[0] || !strcmp(r.allowed, "on|off"))
			continue;
		if (strchr(r.allowed, '|')) {
			n_choice++;
			check_choices(&r);
		} else {
			n_num++;
			check_number(&r);
		}
	}
	free(buf);
	printf("%d rows: %d choices, %d numbers\n", n, n_choice, n_num);
	EXPECT(n >= 30 && n_choice >= 7 && n_num >= 15, "help lists too few rows");
}

static void check_parser(void)
{
	long l;
	int i;
	double d;
	uint64_t u;

	EXPECT(coli_parse_long("42", 0, 100, &l) == 0 && l == 42, "42");
	EXPECT(coli_parse_long("-3", -5, 5, &l) == 0 && l == -3, "-3 in -5..5");
	EXPECT(coli_parse_long("-3", 0, 5, &l) == -ERANGE, "-3 with min 0");
	EXPECT(coli_parse_long("abc", 0, 5, &l) == -EINVAL, "abc");
	EXPECT(coli_parse_long("5x", 0, 5, &l) == -EINVAL, "5x");
	EXPECT(coli_parse_long("", 0, 5, &l) == -EINVAL, "empty");
	EXPECT(coli_parse_long(NULL, 0, 5, &l) == -EINVAL, "NULL");
	EXPECT(coli_parse_long(" 5", 0, 5, &l) == -EINVAL, "leading blank");
	EXPECT(coli_parse_long("5 ", 0, 5, &l) == -EINVAL, "trailing blank");
	EXPECT(coli_parse_long("99999999999999999999", LONG_MIN, LONG_MAX, &l) == -ERANGE,
	       "long overflow");
	EXPECT(coli_parse_int("99999999999", INT_MIN, INT_MAX, &i) == -ERANGE, "int overflow");
	i = 7;
	EXPECT(coli_parse_int("8", 0, 5, &i) == -ERANGE && i == 7,
	       "out is written only on success");
	EXPECT(coli_parse_double("0.7", 0, 1, &d) == 0 && d == 0.7, "0.7");
	EXPECT(coli_parse_double("1e-3", 0, 1, &d) == 0 && d == 1e-3, "1e-3");
	EXPECT(coli_parse_double("nan", -1, 1, &d) == -EINVAL, "nan");
	EXPECT(coli_parse_double("inf", -1, 1e300, &d) == -ERANGE, "inf");
	EXPECT(coli_parse_double("1e999", -1, 1e300, &d) == -ERANGE, "1e999");
	EXPECT(coli_parse_double("1.5.2", 0, 9, &d) == -EINVAL, "1.5.2");
	EXPECT(coli_parse_double("-0.5", 0, 9, &d) == -ERANGE, "-0.5 with min 0");
	EXPECT(coli_parse_u64("18446744073709551615", UINT64_MAX, &u) == 0 && u == UINT64_MAX,
	       "u64 max");
	EXPECT(coli_parse_u64("18446744073709551616", UINT64_MAX, &u) == -ERANGE, "u64 overflow");
	EXPECT(coli_parse_u64("0x2a", UINT64_MAX, &u) == 0 && u == 42, "0x2a");
	EXPECT(coli_parse_u64("0x", UINT64_MAX, &u) == -EINVAL, "0x alone");
	EXPECT(coli_parse_u64("-1", UINT64_MAX, &u) == -EINVAL, "-1 as u64");
	EXPECT(coli_parse_u64("xyz", UINT64_MAX, &u) == -EINVAL, "xyz as u64");
}

static void check_strings(void)
{
	static const char *gpu_bad[] = {"0,0", "sim:9", "sim:0", "sim:", "1,", ",1", "64", "x"};
	static const char *gpu_ok[] = {"auto", "off", "sim", "sim:2", "0", "0,1", "3,1"};
	struct coli_opts o;
	char err[512];

	coli_opts_init(&o, NULL, 0);
	for (size_t k = 0; k < sizeof(gpu_bad) / sizeof(gpu_bad[0]); k++)
		EXPECT(coli_opts_set(&o, "--gpu", gpu_bad[k], err, sizeof(err)) == -EINVAL &&
		           strstr(err, "--gpu") && strstr(err, gpu_bad[k]),
		       "--gpu '%s' accepted (or a message without the option: %s)", gpu_bad[k],
		       err);
	for (size_t k = 0; k < sizeof(gpu_ok) / sizeof(gpu_ok[0]); k++)
		EXPECT(coli_opts_set(&o, "--gpu", gpu_ok[k], err, sizeof(err)) == 0 &&
		           !strcmp(o.gpu, gpu_ok[k]),
		       "--gpu '%s' refused: %s", gpu_ok[k], err);
	{ /* --kv-type T or K,V */
		static const char *kv_bad[] = {"q4",          "",     "bf16,", ",q8",
		                               "q8,bf16,f32", "BF16", "f32 ",  "bf16bf16bf16,q8"};
		static const char *kv_ok[] = {"bf16", "f32", "q8", "q8,bf16", "f32,q8"};

		EXPECT(!strcmp(o.kv_type, "bf16"), "--kv-type default %s, want bf16", o.kv_type);
		for (size_t k = 0; k < sizeof(kv_bad) / sizeof(kv_bad[0]); k++)
			EXPECT(coli_opts_set(&o, "--kv-type", kv_bad[k], err, sizeof(err)) ==
			               -EINVAL &&
			           strstr(err, "--kv-type"),
			       "--kv-type '%s' accepted", kv_bad[k]);
		for (size_t k = 0; k < sizeof(kv_ok) / sizeof(kv_ok[0]); k++)
			EXPECT(coli_opts_set(&o, "--kv-type", kv_ok[k], err, sizeof(err)) == 0 &&
			           !strcmp(o.kv_type, kv_ok[k]),
			       "--kv-type '%s' refused: %s", kv_ok[k], err);
	}
	EXPECT(coli_opts_set(&o, "--numa-bind", "north", err, sizeof(err)) == -EINVAL,
	       "--numa-bind north accepted");
	EXPECT(coli_opts_set(&o, "--numa-bind", "1", err, sizeof(err)) == 0, "--numa-bind 1");
	EXPECT(coli_opts_set(&o, "--usage", "off", err, sizeof(err)) == 0 && o.usage_off &&
	           !o.usage[0],
	       "--usage off");
	EXPECT(coli_opts_set(&o, "--usage", "u.bin", err, sizeof(err)) == 0 && !o.usage_off &&
	           !strcmp(o.usage, "u.bin"),
	       "--usage FILE after off");
	EXPECT(coli_opts_set(&o, "--no-such", "1", err, sizeof(err)) == -ENOENT, "unknown name");
	/* a struct filled by hand is checked at open */
	coli_opts_init(&o, NULL, 0);
	EXPECT(coli_opts_check(&o, err, sizeof(err)) == 0, "defaults fail the check: %s", err);
	o.stream = (enum coli_opt_stream)7;
	EXPECT(coli_opts_check(&o, err, sizeof(err)) == -EINVAL && strstr(err, "--stream"),
	       "stream 7 passes the check (%s)", err);
	coli_opts_init(&o, NULL, 0);
	o.threads = -3;
	EXPECT(coli_opts_check(&o, err, sizeof(err)) == -EINVAL && strstr(err, "--threads") &&
	           strstr(err, "-3"),
	       "threads -3 passes the check (%s)", err);
}

int main(void)
{
	check_parser();
	check_rows();
	check_strings();
	if (g_fail)
		printf("%d failures\n", g_fail);
	else
		printf("ok\n");
	return g_fail ? 1 : 0;
}
