/*
 * core/convert/convert_util.c — what every converter source shares: the error
 * message with its code, and a path inside the checkpoint's directory. A leaf:
 * it calls nothing of the converter's, so any part may call it.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert/convert_internal.h"

int coli_convert_errf(char *errbuf, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(errbuf, errlen, fmt, ap);
	va_end(ap);
	return rc;
}

char *coli_convert_path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = malloc(a + b + 2);

	if (p)
		snprintf(p, a + b + 2, "%s%s%s", dir, a && dir[a - 1] == '/' ? "" : "/", name);
	return p;
}
