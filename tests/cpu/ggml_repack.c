/*
 * tests/cpu/ggml_repack.c — ggml's Q8_0 / Q4_0 blocks repacked into coli's
 * planar q8_0 / q4_0 (cpu/ggml.c, the GGUF import's copy), and the block
 * types (Q4_1 ... Q6_K) copied into coli's twins of them, hold the same
 * values: every row read back through coli_mat_row_f32 equals, bit for bit,
 * coli_ggml_dequant of the blocks as stored. Random blocks (scales random
 * finite halves, quants random bytes), filled by two row ranges as the
 * converter's threads do; then the pairs that are not twins are refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/ggml.h"

#define ROWS     7
#define MAX_COLS 512

static uint16_t random_half(void)
{
	uint16_t h;

	do /* exponent 31 is Inf/NaN: a GGUF block never holds one */
		h = (uint16_t)(rand() & 0xffff);
	while (((h >> 10) & 31) == 31);
	return h;
}

static int check(uint32_t type, enum coli_dtype t, int COLS)
{
	unsigned be, bb;
	size_t src_bytes, dst_bytes = coli_dtype_mat_bytes(t, ROWS, COLS);
	unsigned char *src, *dst;
	float want[MAX_COLS], got[MAX_COLS];
	struct coli_mat m;
	int bad = 0;

	coli_ggml_type_block(type, &be, &bb);
	src_bytes = (size_t)ROWS * COLS / be * bb;
	src = malloc(src_bytes);
	dst = malloc(dst_bytes);
	if (!src || !dst)
		return 1;
	for (size_t i = 0; i < src_bytes; i++)
		src[i] = (unsigned char)rand();
	for (size_t b = 0; b < src_bytes / bb; b++) {
		uint16_t h = random_half();

		memcpy(src + b * bb, &h, 2);
	}
	memset(dst, 0xa5, dst_bytes); /* poisoned: every byte must be written */
	if (!coli_ggml_same_blocks(type, t) || coli_ggml_repack(type, src, ROWS, COLS, dst, 0, 3) ||
	    coli_ggml_repack(type, src, ROWS, COLS, dst, 3, ROWS)) {
		printf("FAIL: %s: not repacked into %s\n", coli_ggml_type_name(type),
		       coli_dtype_name(t));
		return 1;
	}
	coli_mat_view(&m, t, ROWS, COLS, dst);
	for (int r = 0; r < ROWS; r++) {
		coli_ggml_dequant(type, src + (size_t)r * COLS / be * bb, want, COLS);
		coli_mat_row_f32(&m, r, got);
		bad += memcmp(want, got, (size_t)COLS * 4) != 0;
	}
	printf("%s %s: %d x %d, %d rows differ\n", bad ? "FAIL:" : "ok:", coli_ggml_type_name(type),
	       ROWS, COLS, bad);
	free(src);
	free(dst);
	return bad != 0;
}

int main(void)
{
	unsigned char buf[64] = {0};
	int fail = 0;

	srand(38);
	fail |= check(2 /* Q4_0 */, COLI_DTYPE_Q4_0, 96);
	fail |= check(8 /* Q8_0 */, COLI_DTYPE_Q8_0, 96);
	/* the block types: rows copied as stored */
	fail |= check(3 /* Q4_1 */, COLI_DTYPE_Q4_1, 96);
	fail |= check(6 /* Q5_0 */, COLI_DTYPE_Q5_0, 96);
	fail |= check(7 /* Q5_1 */, COLI_DTYPE_Q5_1, 96);
	fail |= check(10 /* Q2_K */, COLI_DTYPE_Q2_K, 512);
	fail |= check(11 /* Q3_K */, COLI_DTYPE_Q3_K, 256);
	fail |= check(12 /* Q4_K */, COLI_DTYPE_Q4_K, 512);
	fail |= check(13 /* Q5_K */, COLI_DTYPE_Q5_K, 256);
	fail |= check(14 /* Q6_K */, COLI_DTYPE_Q6_K, 512);
	/* Q4_1 has a min coli's q4 lacks (it is coli's q4_1); Q8_0 is not q4;
	 * MXFP4 has no twin; a block type's rows must be whole blocks */
	if (coli_ggml_same_blocks(3, COLI_DTYPE_Q4_0) ||
	    !coli_ggml_same_blocks(3, COLI_DTYPE_Q4_1) ||
	    coli_ggml_same_blocks(8, COLI_DTYPE_Q4_0) ||
	    coli_ggml_same_blocks(8, COLI_DTYPE_BF16) ||
	    coli_ggml_repack(39, buf, 1, 32, buf, 0, 1) != -EINVAL ||
	    coli_ggml_repack(12, buf, 1, 128, buf, 0, 1) != -EINVAL ||
	    coli_ggml_repack(8, buf, 1, 48, buf, 0, 1) != -EINVAL) {
		printf("FAIL: a pair without the same blocks was accepted\n");
		fail = 1;
	} else {
		printf("ok: Q4_1, Q8_0 -> q4 and Q8_0 -> bf16 refused\n");
	}
	return fail;
}
