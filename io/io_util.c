/*
 * io/io_util.c — io/'s small shared services: the per-thread error message
 * behind coli_io_errmsg(), xxh64 (the only place that links libxxhash), and
 * pread/pwrite loops that survive short transfers and EINTR.
 *
 * The message buffer is thread-local so the converter's writer threads and a
 * verifying tool can fail independently; it holds the last error of the
 * calling thread only.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include <xxhash.h>

#include "io/io_internal.h"

static __thread char g_errmsg[1024];

const char *coli_io_errmsg(void)
{
	return g_errmsg;
}

int io_err(int rc, const char *path, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(g_errmsg, sizeof(g_errmsg), "%s: ", path ? path : "(no file)");
	if (n < 0 || (size_t)n >= sizeof(g_errmsg))
		return rc;
	va_start(ap, fmt);
	vsnprintf(g_errmsg + n, sizeof(g_errmsg) - (size_t)n, fmt, ap);
	va_end(ap);
	return rc;
}

uint64_t coli_io_xxh64(const void *p, size_t n)
{
	return XXH64(p, n, 0);
}

int io_pwrite_full(int fd, const void *p, size_t n, uint64_t off)
{
	const char *c = p;

	while (n) {
		ssize_t w = pwrite(fd, c, n, (off_t)off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0) /* no progress and no error: treat as a full device */
			return -ENOSPC;
		c += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

int io_pread_full(int fd, void *p, size_t n, uint64_t off)
{
	char *c = p;

	while (n) {
		ssize_t r = pread(fd, c, n, (off_t)off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		c += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}
