/*
 * tests/cpu/ggml_dequant.c — cpu/ggml.c's dequantization of every ggml type
 * it reads against the `gguf` Python package's (llama.cpp's reference), bit
 * for bit, on random blocks (tests/cpu/ggml_ref.py makes them: 64 blocks a
 * type, scales random finite halves with zero, -0, a subnormal and the
 * largest among them; F16 and BF16 over 4096 random finite values); then the
 * errors: a partial block, a type it cannot read. The block types coli keeps
 * as stored (Q4_1 ... Q6_K) read as coli matrices (coli_mat_row_f32) give
 * the same bits.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cpu/cpu.h"
#include "cpu/ggml.h"

static void *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	void *p = NULL;
	long len;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (len = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET) &&
	    (p = malloc((size_t)len)) && fread(p, 1, (size_t)len, f) != (size_t)len) {
		free(p);
		p = NULL;
	}
	*n = p ? (size_t)len : 0;
	fclose(f);
	return p;
}

static int check(uint32_t type)
{
	const char *name = coli_ggml_type_name(type);
	char path[256];
	size_t nb, nf, bad = 0, mat_bad = 0;
	unsigned be, bb;
	enum coli_dtype t;
	float row[256];
	void *blocks;
	float *want, *got;
	int rc;

	snprintf(path, sizeof(path), "%s.blocks", name);
	blocks = slurp(path, &nb);
	snprintf(path, sizeof(path), "%s.f32", name);
	want = slurp(path, &nf);
	coli_ggml_type_block(type, &be, &bb);
	if (!blocks || !want || nb / bb * be != nf / 4) {
		printf("FAIL %s: reference files missing or inconsistent\n", name);
		return 1;
	}
	got = malloc(nf);
	rc = coli_ggml_dequant(type, blocks, got, nf / 4);
	for (size_t i = 0; !rc && i < nf / 4; i++)
		if (memcmp(&got[i], &want[i], 4)) {
			if (!bad)
				printf("  %s: element %zu: %.9g, the package %.9g\n", name, i,
				       got[i], want[i]);
			bad++;
		}
	/* a block type kept as stored (cpu/dtype.h): coli_mat_row_f32 over the
	 * same blocks as a matrix, one block a row, gives the same bits */
	if (!coli_ggml_dtype_of(type, &t) && coli_dtype_is_block(t)) {
		struct coli_mat m;

		coli_mat_view(&m, t, (int)(nb / bb), (int)be, blocks);
		for (int r = 0; r < m.rows; r++) {
			coli_mat_row_f32(&m, r, row);
			if (memcmp(row, want + (size_t)r * be, be * 4))
				mat_bad++;
		}
	}
	printf("  %-6s %6zu values, %zu differ from the gguf package%s", name, nf / 4, bad,
	       rc ? " (dequant failed)" : "");
	if (!coli_ggml_dtype_of(type, &t) && coli_dtype_is_block(t))
		printf("; as coli %s rows: %zu rows differ", coli_dtype_name(t), mat_bad);
	printf("\n");
	bad += mat_bad;
	free(blocks), free(want), free(got);
	return rc || bad;
}

int main(void)
{
	static const uint32_t types[] = {
	    COLI_GGML_F16,  COLI_GGML_BF16, COLI_GGML_Q4_0, COLI_GGML_Q4_1, COLI_GGML_Q5_0,
	    COLI_GGML_Q5_1, COLI_GGML_Q8_0, COLI_GGML_Q2_K, COLI_GGML_Q3_K, COLI_GGML_Q4_K,
	    COLI_GGML_Q5_K, COLI_GGML_Q6_K, COLI_GGML_MXFP4};
	unsigned char blk[256] = {0};
	float y[256];
	int fail = 0, st;

	/* the references, with the venv of tests/io/gguf_venv */
	st = system("sh -c '. \"$ROOT/tests/io/gguf_venv\" && "
	            "exec \"$PY\" \"$ROOT/tests/cpu/ggml_ref.py\" .'");
	if (!WIFEXITED(st) || WEXITSTATUS(st)) /* 77: its line said why */
		return WIFEXITED(st) && WEXITSTATUS(st) == 77 ? 77 : 1;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		fail |= check(types[i]);
	if (coli_ggml_dequant(COLI_GGML_Q4_K, blk, y, 255) != -EINVAL ||
	    coli_ggml_dequant(16 /* IQ2_XXS */, blk, y, 256) != -ENOTSUP ||
	    coli_ggml_can_dequant(16) || strcmp(coli_ggml_type_name(16), "IQ2_XXS") ||
	    coli_ggml_type_name(31)) {
		printf("FAIL: a partial block or an unread type was not refused\n");
		fail = 1;
	}
	return fail;
}
