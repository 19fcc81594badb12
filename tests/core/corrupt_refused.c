/*
 * tests/core/corrupt_refused.c — corruption in a model file is caught with
 * the default options on every run, whatever the timing, and never becomes a
 * token: a checksum mismatch is an error naming the tensor or the expert.
 *
 *   garbage    every slab of one expert layer overwritten with random bytes
 *   expert bit one bit flipped in one expert's down matrix
 *   dense bit  one bit flipped in tok_embd
 *
 * Each corrupt file is opened and asked for a prompt's logits and 8 greedy
 * tokens (the prompt routes through every expert of the fixture) ten times,
 * with no RAM budget (the dense part read in place, every slab read in the
 * background at open) and with --ram-gb 0 (dense part copied, slabs read on
 * demand); the checksums are left as the writer made them. The untouched
 * file must give its tokens in the same runs (the control), and
 * --verify-slabs off must let the dense-bit file open (the documented way
 * out).
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

#define RUNS 10

static unsigned char *g_good;
static size_t g_n;
static int g_fail;
static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	g_rng ^= g_rng << 13;
	g_rng ^= g_rng >> 7;
	g_rng ^= g_rng << 17;
	return g_rng;
}

static unsigned char *table(unsigned char *b, uint32_t kind)
{
	unsigned char *e = edit_sec_entry(b, kind);

	if (!e) {
		fprintf(stderr, "no section %u\n", kind);
		exit(1);
	}
	return b + le64(e + SE_OFFSET);
}

/* Generate from the file at path: 0 and the tokens, or the error. */
static int run(const char *path, const char *ram_gb, const char *verify, char *err, size_t errlen)
{
	static const char prompt[] = "def main():\n    for i in range(10):\n        print(i * i)\n";
	struct coli_opts o;
	coli_engine_t *e;
	int *ids = NULL, n = 0, rc, next;

	coli_opts_init(&o, err, errlen);
	o.threads = 2;
	if (coli_opts_set(&o, "--gpu", "off", err, errlen) ||
	    coli_opts_set(&o, "--usage", "off", err, errlen) ||
	    coli_opts_set(&o, "--ram-gb", ram_gb, err, errlen) ||
	    coli_opts_set(&o, "--verify-slabs", verify, err, errlen))
		return -EINVAL;
	rc = coli_engine_open(path, &o, &e, err, errlen);
	if (rc)
		return rc;
	rc = coli_tokenizer_encode(coli_engine_tokenizer(e), prompt, sizeof(prompt) - 1, &ids, &n,
	                           err, errlen);
	for (int t = 0; !rc && t < 8; t++) {
		rc = coli_engine_forward_argmax(e, ids, n, &next);
		if (rc)
			snprintf(err, errlen, "%s", coli_engine_errmsg(e));
		ids[0] = next, n = 1;
	}
	free(ids);
	coli_engine_close(e);
	return rc;
}

static void write_case(const char *path, const unsigned char *b)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(b, 1, g_n, f) != g_n || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* RUNS runs of each budget must fail with a message holding `needle`. */
static void expect_refused(const char *name, const unsigned char *b, const char *needle)
{
	static const char *const budgets[] = {"-1", "0"};
	char path[4096], err[512];
	int refused = 0;

	snprintf(path, sizeof(path), "%s/corrupt.coli", fx_tmpdir());
	write_case(path, b);
	for (int k = 0; k < 2; k++)
		for (int r = 0; r < RUNS; r++) {
			err[0] = 0;
			if (run(path, budgets[k], "first", err, sizeof(err)) == 0) {
				printf("  FAIL %s, --ram-gb %s, run %d: generated\n", name,
				       budgets[k], r);
				g_fail++;
			} else if (!strstr(err, needle)) {
				printf("  FAIL %s: message '%s' lacks '%s'\n", name, err, needle);
				g_fail++;
			} else {
				refused++;
			}
		}
	printf("%-11s refused %d of %d runs: %s\n", name, refused, 2 * RUNS, err);
}

int main(void)
{
	char path[4096], err[512];
	unsigned char *b, *lt, *te;
	struct stat st;
	FILE *f;

	if (fx_convert("qwen3_moe", COLI_DTYPE_Q8_0, fx_tmpdir(), path, sizeof(path)))
		return 1;
	if (stat(path, &st) || !(g_good = malloc(st.st_size)) || !(b = malloc(st.st_size)) ||
	    !(f = fopen(path, "rb"))) {
		perror(path);
		return 1;
	}
	g_n = fread(g_good, 1, st.st_size, f);
	fclose(f);
	if (run(path, "-1", "first", err, sizeof(err)) ||
	    run(path, "0", "first", err, sizeof(err))) {
		printf("  FAIL: the untouched model does not run: %s\n", err);
		return 1;
	}

	/* garbage: every slab of the second expert layer */
	memcpy(b, g_good, g_n);
	lt = table(b, CT_SECTION_EXPERT_LAYERS) + CT_LAYER_ENTRY;
	for (uint64_t i = 0; i < le32(lt + LE_N_EXPERTS) * le64(lt + LE_SLAB_BYTES); i++)
		b[le64(lt + LE_OFFSET) + i] = (unsigned char)rnd();
	expect_refused("garbage", b, "is corrupt");

	/* one bit of expert 5 of the first expert layer, in its down matrix */
	memcpy(b, g_good, g_n);
	lt = table(b, CT_SECTION_EXPERT_LAYERS);
	b[le64(lt + LE_OFFSET) + 5 * le64(lt + LE_SLAB_BYTES) + le64(lt + LE_DOWN_OFF) + 17] ^=
	    0x10;
	expect_refused("expert bit", b, "expert 5");

	/* one bit of tok_embd */
	memcpy(b, g_good, g_n);
	te = table(b, CT_SECTION_TENSORS);
	for (uint32_t i = 0; strcmp((const char *)te + TE_NAME, "tok_embd");
	     i++, te += CT_TENSOR_ENTRY)
		if (i > 100000) {
			printf("  FAIL: no tok_embd\n");
			return 1;
		}
	b[le64(te + TE_OFFSET) + 1000] ^= 0x01;
	expect_refused("dense bit", b, "tok_embd");
	snprintf(path, sizeof(path), "%s/corrupt.coli", fx_tmpdir());
	if (run(path, "-1", "off", err, sizeof(err))) {
		printf("  FAIL: --verify-slabs off refused the dense-bit file: %s\n", err);
		g_fail++;
	}
	free(b);
	free(g_good);
	return g_fail ? 1 : 0;
}
