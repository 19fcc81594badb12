/*
 * tests/convert/fp8_widen.c — coli_convert_fp8_widen on chunks that do not
 * start at a block boundary (the converter's chunks are CHUNK_BYTES of rows,
 * rarely a multiple of 128; the fixtures of tests/convert/fp8_import.sh fit
 * in one chunk): a 37 x 50 F8_E4M3 matrix in blocks of 8 x 16 (partial edge
 * blocks both ways), widened as chunks starting at rows 0, 3, 13 and 29 and
 * split over two "tasks" mid-chunk, each element compared bit for bit with
 * fp8 x scale[r / 8][c / 16] as one fp32 multiply. Then a NaN encoding and an
 * overflowing product are refused (-EINVAL).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert/convert_job.h"

#define R   37
#define C   50
#define BR  8
#define BC  16
#define NRB ((R + BR - 1) / BR)
#define NCB ((C + BC - 1) / BC)

int main(void)
{
	static const uint64_t starts[] = {0, 3, 13, 29};
	unsigned char w[R * C];
	float scale[NRB * NCB], dec[R * C], out[R * C];
	int bad = 0, rc;

	srand(7);
	for (int i = 0; i < R * C; i++) {
		w[i] = (unsigned char)(rand() & 0xff);
		if ((w[i] & 0x7f) == 0x7f) /* NaN: tested below */
			w[i] ^= 1;
	}
	for (int i = 0; i < NRB * NCB; i++)
		scale[i] = (float)rand() / (float)RAND_MAX * 1e-3f + 1e-5f;
	coli_io_st_widen(COLI_ST_F8_E4M3, w, 0, R * C, dec); /* tests/io/st_fp8.c */
	for (size_t s = 0; s < sizeof(starts) / sizeof(starts[0]); s++) {
		uint64_t r0 = starts[s], n = R - r0, split = n * C / 3 + 5;
		struct fp8_chunk fc = {scale + (r0 / BR) * NCB, r0, BR, BC, NCB};
		const unsigned char *src = w + r0 * C;
		int wrong = 0;

		memset(out, 0xa5, sizeof(out));
		rc = coli_convert_fp8_widen(&fc, COLI_ST_F8_E4M3, src, C, 0, split, out);
		rc = rc ? rc
		        : coli_convert_fp8_widen(&fc, COLI_ST_F8_E4M3, src, C, split, n * C, out);
		for (uint64_t i = 0; !rc && i < n * C; i++) {
			uint64_t r = r0 + i / C, c = i % C;
			float want = dec[r * C + c] * scale[(r / BR) * NCB + c / BC];

			if (!memcmp(&want, &out[i], 4))
				continue;
			if (wrong++ < 4)
				printf(
				    "FAIL: chunk at row %llu: row %llu col %llu: got %a, want %a\n",
				    (unsigned long long)r0, (unsigned long long)r,
				    (unsigned long long)c, out[i], want);
		}
		if (rc) {
			printf("FAIL: chunk at row %llu: rc %d\n", (unsigned long long)r0, rc);
			wrong++;
		}
		if (!wrong)
			printf("ok: chunk of rows %llu..%d (split at element %llu): every element "
			       "is fp8 x its block's scale\n",
			       (unsigned long long)r0, R, (unsigned long long)split);
		bad |= wrong != 0;
	}
	{
		struct fp8_chunk fc = {scale, 0, BR, BC, NCB};
		float big[NRB * NCB];

		w[77] = 0xff; /* -NaN */
		rc = coli_convert_fp8_widen(&fc, COLI_ST_F8_E4M3, w, C, 0, R * C, out);
		printf("%s: a NaN encoding: rc %d (want %d)\n", rc == -EINVAL ? "ok" : "FAIL", rc,
		       -EINVAL);
		bad |= rc != -EINVAL;
		w[77] = 0x7e; /* 448 */
		for (int i = 0; i < NRB * NCB; i++)
			big[i] = 3e38f;
		fc.scale = big;
		rc = coli_convert_fp8_widen(&fc, COLI_ST_F8_E4M3, w, C, 0, R * C, out);
		printf("%s: 448 x 3e38 overflows: rc %d (want %d)\n", rc == -EINVAL ? "ok" : "FAIL",
		       rc, -EINVAL);
		bad |= rc != -EINVAL;
	}
	return bad;
}
