/*
 * tests/core/corpus_open.c — the fuzzers' files through the real engine
 * open path: each file of a corpus (tools/fuzz/fuzz.sh writes them to
 * build/fuzz/<target>/corpus; the committed ones are tests/fuzz/container/
 * and tests/fuzz/model/) gets its section and superblock checksums re-sealed
 * as a writer would (tests/io/edit.h; the fuzz build skips the checksums,
 * this build does not), is written to a file and opened with
 * coli_engine_open (CPU), which must refuse it with a message or open it,
 * run one forward token and close. Built with `make SAN=address,undefined`,
 * a leak, double free or bad read on any of those paths is a report.
 *
 * Usage: corpus_open [FILE|DIR]...   (no argument: the committed corpora
 * and those of the last fuzz run, $BUILD/fuzz/{container,model}/corpus;
 * when there is none, as on a fresh clone, the fuzzers' own seeds
 * (tools/fuzz/seed/fuzz_{container,model}.seed.sh) and MUTANTS copies of each with a
 * few bytes changed, the same every run). Prints one line of counts.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/coli.h"
#include "core/fixture_util.h"
#include "io/edit.h"

#define MUTANTS 24 /* mutated copies of each seed when there is no corpus */

static int g_files, g_refused, g_opened, g_fail;

static unsigned char *slurp_file(const char *path, size_t *n)
{
	struct stat st;
	unsigned char *b;
	FILE *f = fopen(path, "rb");

	if (!f)
		return NULL;
	if (fstat(fileno(f), &st) || !(b = malloc(st.st_size ? st.st_size : 1))) {
		fclose(f);
		return NULL;
	}
	*n = fread(b, 1, st.st_size, f);
	fclose(f);
	return b;
}

/* Re-seal only when the superblock and the whole section table lie inside
 * the file (edit_reseal reads them unchecked). */
static void reseal(unsigned char *b, size_t n)
{
	if (n >= CT_SEC_TABLE_OFF + (size_t)CT_SEC_ENTRY * CT_MAX_SECTIONS &&
	    n >= CT_SUPER_SUM_OFF + 8)
		edit_reseal(b, n);
}

static void one(const char *path)
{
	char tmp[4096], err[512] = "";
	struct coli_opts o;
	coli_engine_t *e = NULL;
	size_t n = 0;
	unsigned char *b = slurp_file(path, &n);
	int fd, rc;

	if (!b) {
		printf("  FAIL %s: cannot read\n", path);
		g_fail++;
		return;
	}
	g_files++;
	reseal(b, n);
	snprintf(tmp, sizeof(tmp), "%s/corpus.coli", fx_tmpdir());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || (size_t)write(fd, b, n) != n) {
		printf("  FAIL %s: cannot write\n", tmp);
		g_fail++;
		if (fd >= 0)
			close(fd);
		free(b);
		return;
	}
	close(fd);
	free(b);
	coli_opts_init(&o, NULL, 0);
	o.threads = 1;
	o.ctx = 16;
	snprintf(o.gpu, sizeof(o.gpu), "off");
	coli_opts_set(&o, "--usage", "off", NULL, 0);
	rc = coli_engine_open(tmp, &o, &e, err, sizeof(err));
	if (rc) {
		g_refused++;
		if (rc > 0 || !err[0]) {
			printf("  FAIL %s: open returned %d with message '%s'\n", path, rc, err);
			g_fail++;
		}
		return;
	}
	g_opened++;
	const int ids[2] = {1, 2};
	int next = -1;

	(void)coli_engine_forward_argmax(e, ids, 2, &next);
	coli_engine_close(e);
}

static void walk(const char *path)
{
	struct stat st;
	struct dirent *d;
	DIR *dir;

	if (stat(path, &st))
		return;
	if (!S_ISDIR(st.st_mode)) {
		one(path);
		return;
	}
	if (!(dir = opendir(path)))
		return;
	while ((d = readdir(dir))) {
		char p[4096];

		if (d->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, d->d_name);
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode))
			one(p);
	}
	closedir(dir);
}

/* The seeds the fuzz targets start from, written to seeds/ (tests run in a
 * scratch directory), and MUTANTS copies of each with 1-8 bytes set to
 * values from a fixed LCG: a corpus for a fresh clone. */
static void make_seeds(const char *root, const char *build)
{
	static const char *const t[] = {"container", "model"};
	unsigned long long x = 2026;
	char cmd[8192], cwd[4096];
	DIR *dir;
	struct dirent *d;

	if (!getcwd(cwd, sizeof(cwd)) || mkdir("seeds", 0755))
		return;
	for (int i = 0; i < 2; i++) {
		snprintf(cmd, sizeof(cmd),
		         "cd '%s' && BUILD='%s' sh tools/fuzz/seed/fuzz_%s.seed.sh '%s/seeds'",
		         root, build, t[i], cwd);
		if (system(cmd))
			return;
	}
	if (!(dir = opendir("seeds")))
		return;
	while ((d = readdir(dir))) {
		char p[4096];
		size_t n;
		unsigned char *b;

		if (d->d_name[0] == '.' || strstr(d->d_name, ".mut"))
			continue;
		snprintf(p, sizeof(p), "seeds/%s", d->d_name);
		if (!(b = slurp_file(p, &n)) || !n) {
			free(b);
			continue;
		}
		for (int m = 0; m < MUTANTS; m++) {
			unsigned char *c = malloc(n);
			FILE *f;

			memcpy(c, b, n);
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			for (int k = 0, nk = 1 + (int)(x >> 61); k < nk; k++) {
				x = x * 6364136223846793005ull + 1442695040888963407ull;
				c[(x >> 16) % n] = (unsigned char)(x >> 56);
			}
			snprintf(p, sizeof(p), "seeds/%s.mut%d", d->d_name, m);
			if ((f = fopen(p, "wb"))) {
				fwrite(c, 1, n, f);
				fclose(f);
			}
			free(c);
		}
		free(b);
	}
	closedir(dir);
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			walk(argv[i]);
	} else {
		const char *root = getenv("ROOT") ? getenv("ROOT") : ".";
		const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
		static const char *const t[] = {"container", "model"};
		char p[4096];

		for (int i = 0; i < 2; i++) {
			snprintf(p, sizeof(p), "%s/tests/fuzz/%s", root, t[i]);
			walk(p);
			snprintf(p, sizeof(p), "%s/%s/fuzz/%s/corpus", root, build, t[i]);
			walk(p);
		}
	}
	if (!g_files && !g_fail && argc == 1) { /* a fresh clone: the seeds and mutants */
		make_seeds(getenv("ROOT") ? getenv("ROOT") : ".",
		           getenv("BUILD") ? getenv("BUILD") : "build");
		walk("seeds");
	}
	if (!g_files && !g_fail) {
		printf("no corpus files and no seeds "
		       "(tools/fuzz/seed/fuzz_{container,model}.seed.sh need "
		       "coli and the container round-trip test built)\n");
		return 77;
	}
	printf("%d files: %d refused, %d opened (and ran a token), %d failed\n", g_files, g_refused,
	       g_opened, g_fail);
	return g_fail ? 1 : 0;
}
