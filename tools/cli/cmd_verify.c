/*
 * tools/cli/cmd_verify.c — `coli verify MODEL.coli`: open the container (which
 * checks its structure) and hash every section, tensor and slab. Prints "ok"
 * and exits 0, or prints what is corrupt and exits 1. A progress bar is
 * drawn on stderr when stderr is a terminal.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/io.h"
#include "tools/tools.h"

struct bar {
	int on;
	double t0, last;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void draw(void *arg, uint64_t done, uint64_t total)
{
	struct bar *b = arg;
	double t = now_s(), frac = total ? (double)done / total : 1.0;
	char line[41];
	int fill = (int)(frac * 40);

	if (!b->on || (t - b->last < 0.1 && done != total))
		return;
	b->last = t;
	memset(line, '#', (size_t)fill);
	memset(line + fill, '.', (size_t)(40 - fill));
	line[40] = 0;
	fprintf(stderr, "\rverify [%s] %3d%%  %.2f / %.2f GiB  %.2f GB/s ", line, (int)(frac * 100),
	        done / 1073741824.0, total / 1073741824.0,
	        t > b->t0 ? done / (t - b->t0) / 1e9 : 0.0);
	if (done == total)
		fputc('\n', stderr);
}

int cmd_verify(int argc, char **argv)
{
	struct bar b = {0};
	coli_container_t *c;
	const char *path = NULL;
	int rc, quiet = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
			quiet = 1;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: coli verify [-q] MODEL.coli\n"
			       "  check every checksum; exit 0 and print ok, or exit 1 naming the "
			       "corrupt part\n");
			return 0;
		} else if (!path && argv[i][0] != '-') {
			path = argv[i];
		} else {
			return tool_err("verify", "unexpected argument '%s' (see --help)", argv[i]);
		}
	}
	if (!path)
		return tool_err("verify", "usage: coli verify [-q] MODEL.coli");
	rc = coli_io_container_open(path, &c);
	if (rc)
		return tool_err("verify", "%s", coli_io_errmsg());
	b.on = !quiet && isatty(STDERR_FILENO);
	b.t0 = b.last = now_s();
	b.last -= 1;
	rc = coli_io_container_verify(c, draw, &b);
	coli_io_container_close(c);
	if (rc) {
		if (b.on)
			fputc('\n', stderr);
		return tool_err("verify", "%s", coli_io_errmsg());
	}
	printf("%s: ok\n", path);
	return 0;
}
