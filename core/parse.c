/*
 * core/parse.c — strict numbers from text, for the options table
 * (core/options.c) and for every option of the coli and colid programs.
 *
 * Strict means: the whole string is the number (no leading blanks, no
 * trailing junk, no empty string), an overflow of the C type is an error
 * (errno from strtol/strtoull/strtod, not a wrapped value), and the value
 * lies in [min, max]. No unit suffixes: an option that takes "5x" or "1G"
 * would say so in its help, and none does.
 *
 *   integers: optional sign, decimal digits            "-1", "+8", "1024"
 *   u64:      decimal, or hexadecimal after 0x; no sign "42", "0x2a"
 *   doubles:  what strtod reads, finite: "0.7", "1e-3", "-1"; not nan, inf
 *
 * Returns 0, -EINVAL for text that is not a number of that kind, -ERANGE for
 * a number outside [min, max] or the type. *out is written only on success.
 * coli_parse_expect_* say in words what a caller's range allows, for the
 * messages ("expected an integer in 0..65535").
 *
 * A leaf: it uses libc only, so every part of core/ may call it, and tools/
 * (tools/check_layers.py knows it as core/parse).
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/coli.h"

/* Text the strto* family would read past: blanks before the number. */
static int bad_start(const char *s)
{
	return !s || !*s || isspace((unsigned char)*s);
}

int coli_parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (bad_start(s))
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end)
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int coli_parse_int(const char *s, int min, int max, int *out)
{
	long v;
	int rc = coli_parse_long(s, min, max, &v);

	if (!rc)
		*out = (int)v;
	return rc;
}

int coli_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	int hex = s && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	unsigned long long v;
	char *end;

	/* strtoull takes "-1" as ULLONG_MAX: a sign is refused before it sees one */
	if (bad_start(s) || *s == '-' || *s == '+' || (hex && !isxdigit((unsigned char)s[2])))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, hex ? 16 : 10);
	if (end == s || *end)
		return -EINVAL;
	if (errno == ERANGE || v > max)
		return -ERANGE;
	*out = (uint64_t)v;
	return 0;
}

int coli_parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	if (bad_start(s))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end || isnan(v))
		return -EINVAL;
	/* strtod's ERANGE also flags underflow (1e-400 -> 0 or a denormal),
	 * which the range decides; an overflow comes back as inf */
	if (isinf(v) || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

void coli_parse_expect_long(long min, long max, char *buf, size_t len)
{
	if (max == LONG_MAX || max == INT_MAX)
		snprintf(buf, len, "an integer >= %ld", min);
	else
		snprintf(buf, len, "an integer in %ld..%ld", min, max);
}

void coli_parse_expect_double(double min, double max, char *buf, size_t len)
{
	snprintf(buf, len, "a number in %g..%g", min, max);
}
