/*
 * tests/core/open_corrupt.c — a model file whose checksums are valid but
 * whose model config or tensor table is wrong is refused by
 * coli_engine_open with a message, and every resource is released once (a
 * failed open used to close the container twice: "double free or
 * corruption"). The cases edit a converted fixture at the offsets
 * io/io_internal.h documents and re-seal the checksums as a writer would, so
 * the structural checks behind them are what is exercised:
 *
 *   - the config section not JSON, empty JSON, or JSON whose numbers lie
 *   - the config saying bf16 over q8_0 tensors (a bf16 model has no
 *     quantized activations to read them with: core/model/model.c)
 *   - bounded random byte edits of the config and the tensor table (a fixed
 *     seed, so a failure replays): each open either fails with a message or
 *     succeeds and then runs a forward token
 *
 * Run it under `make SAN=address,undefined` to see a leak or a double free
 * as a report rather than a crash.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/coli.h"
#include "core/fixture_util.h"
#include "io/edit.h"

static unsigned char *g_good;
static size_t g_n;
static int g_fail, g_refused, g_opened;
static uint64_t g_rng = 0x853c49e6748fea9bULL;

static uint64_t rnd(void)
{
	g_rng ^= g_rng << 13;
	g_rng ^= g_rng >> 7;
	g_rng ^= g_rng << 17;
	return g_rng;
}

static int put_file(const char *path, const unsigned char *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int ok = fd >= 0 && (size_t)write(fd, p, n) == n;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* Open b (resealed) as a model. must_fail: a case that cannot be a model. */
static void try_open(const char *name, unsigned char *b, int must_fail)
{
	char path[4096], err[512] = "";
	struct coli_opts o;
	coli_engine_t *e = NULL;
	int rc;

	edit_reseal(b, g_n);
	snprintf(path, sizeof(path), "%s/corrupt.coli", fx_tmpdir());
	if (put_file(path, b, g_n)) {
		printf("  FAIL %s: cannot write %s\n", name, path);
		g_fail++;
		return;
	}
	coli_opts_init(&o, NULL, 0);
	o.threads = 2;
	snprintf(o.gpu, sizeof(o.gpu), "off");
	coli_opts_set(&o, "--usage", "off", NULL, 0);
	rc = coli_engine_open(path, &o, &e, err, sizeof(err));
	if (rc) {
		g_refused++;
		if (rc > 0 || !err[0]) {
			printf("  FAIL %s: open returned %d with message '%s'\n", name, rc, err);
			g_fail++;
		}
		return;
	}
	g_opened++;
	if (must_fail) {
		printf("  FAIL %s: opened\n", name);
		g_fail++;
	} else { /* whatever opened must run without a crash */
		const int ids[2] = {1, 2};
		int next = -1;

		(void)coli_engine_forward_argmax(e, ids, 2, &next);
	}
	coli_engine_close(e);
}

static unsigned char *copy(void)
{
	unsigned char *b = malloc(g_n);

	if (!b) {
		perror("malloc");
		exit(1);
	}
	memcpy(b, g_good, g_n);
	return b;
}

/* The config section's bytes [off, off + n) in b. */
static unsigned char *config(unsigned char *b, size_t *n)
{
	unsigned char *e = edit_sec_entry(b, COLI_SECTION_CONFIG);

	*n = le64(e + SE_BYTES);
	return b + le64(e + SE_OFFSET);
}

static void fixed_cases(void)
{
	unsigned char *b, *c, *q;
	size_t n;

	b = copy(), c = config(b, &n);
	c[0] = 'x';
	try_open("config not JSON", b, 1);
	free(b);

	b = copy(), c = config(b, &n);
	memset(c, ' ', n);
	c[0] = '{', c[1] = '}';
	try_open("config {}", b, 1);
	free(b);

	/* every digit of the config doubled where it stays a number: shapes
	 * that no longer match the tensor table */
	b = copy(), c = config(b, &n);
	for (size_t i = 0; i < n; i++)
		if (c[i] >= '1' && c[i] <= '4')
			c[i] = (unsigned char)('0' + 2 * (c[i] - '0'));
	try_open("config numbers doubled", b, 1);
	free(b);

	b = copy(), c = config(b, &n);
	q = memmem(c, n, "\"q8_0\"", 6);
	if (!q) {
		printf("  FAIL: no \"q8_0\" in the config\n");
		g_fail++;
	} else {
		memcpy(q, "\"bf16\"", 6);
		try_open("config bf16 over q8_0 tensors", b, 1);
	}
	free(b);
}

static void random_cases(int count)
{
	unsigned char *ten = edit_sec_entry(g_good, CT_SECTION_TENSORS);
	size_t toff = le64(ten + SE_OFFSET), tbytes = le64(ten + SE_BYTES), cn;
	size_t coff = (size_t)(config(g_good, &cn) - g_good);

	for (int i = 0; i < count; i++) {
		unsigned char *b = copy();
		int edits = 1 + (int)(rnd() % 4);
		char name[64];

		for (int k = 0; k < edits; k++) {
			size_t at = rnd() % 2 ? coff + rnd() % cn : toff + rnd() % tbytes;

			b[at] = (unsigned char)(rnd() % 3 ? rnd() : b[at] ^ (1u << (rnd() % 8)));
		}
		snprintf(name, sizeof(name), "random edit %d", i);
		try_open(name, b, 0);
		free(b);
	}
}

int main(void)
{
	char path[4096];
	struct stat st;
	FILE *f;
	int count = 200;

	if (fx_convert("qwen3_moe", COLI_DTYPE_Q8_0, fx_tmpdir(), path, sizeof(path)))
		return 1;
	if (stat(path, &st) || !(g_good = malloc(st.st_size)) || !(f = fopen(path, "rb"))) {
		perror(path);
		return 1;
	}
	g_n = fread(g_good, 1, st.st_size, f);
	fclose(f);
	if (g_n != (size_t)st.st_size || !edit_sec_entry(g_good, COLI_SECTION_CONFIG) ||
	    !edit_sec_entry(g_good, CT_SECTION_TENSORS)) {
		printf("  FAIL: %s is not the container this test expects\n", path);
		return 1;
	}
	fixed_cases();
	random_cases(count);
	printf("%d cases: %d refused, %d opened (and ran a token), %d failed\n", 4 + count,
	       g_refused, g_opened, g_fail);
	free(g_good);
	return g_fail ? 1 : 0;
}
