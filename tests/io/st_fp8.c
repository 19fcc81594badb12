/*
 * tests/io/st_fp8.c — the safetensors reader's 8-bit floats, every encoding:
 * a file holding tensors F8_E4M3, F8_E5M2 and F8_E8M0 of the 256 bytes
 * 0..255 is read (whole, and in ranges: the in-place widening from the tail
 * of the fp32 buffer) and each value compared bit for bit with the formats'
 * definitions computed another way (ldexp of sign, mantissa and exponent):
 *
 *   e4m3fn  bias 7, subnormals m x 2^-9, no infinities, S.1111.111 NaN
 *   e5m2    bias 15 (IEEE: fp16's upper byte), S.11111.00 Inf, else NaN
 *   e8m0    2^(e - 127), 0xff NaN
 */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "io/io.h"

#define PATH "fp8.safetensors"

static float ref_e4m3(int b)
{
	int s = b >> 7, e = (b >> 3) & 15, m = b & 7;

	if (e == 15 && m == 7)
		return NAN;
	return (s ? -1.0f : 1.0f) * ldexpf((float)(e ? 8 + m : m), (e ? e : 1) - 10);
}

static float ref_e5m2(int b)
{
	int s = b >> 7, e = (b >> 2) & 31, m = b & 3;

	if (e == 31)
		return m ? NAN : (s ? -INFINITY : INFINITY);
	return (s ? -1.0f : 1.0f) * ldexpf((float)(e ? 4 + m : m), (e ? e : 1) - 17);
}

static float ref_e8m0(int b)
{
	return b == 255 ? NAN : ldexpf(1.0f, b - 127);
}

static int same(float a, float b)
{
	return (isnan(a) && isnan(b)) || !memcmp(&a, &b, 4);
}

static int write_file(void)
{
	static const char *const dt[] = {"F8_E4M3", "F8_E5M2", "F8_E8M0"};
	char hdr[512];
	unsigned char data[768];
	uint64_t n;
	int k = snprintf(hdr, sizeof(hdr), "{"), fd;

	for (int i = 0; i < 3; i++)
		k += snprintf(hdr + k, sizeof(hdr) - (size_t)k,
		              "%s\"%s\": {\"dtype\": \"%s\", \"shape\": [16, 16], "
		              "\"data_offsets\": [%d, %d]}",
		              i ? ", " : "", dt[i], dt[i], 256 * i, 256 * (i + 1));
	k += snprintf(hdr + k, sizeof(hdr) - (size_t)k, "}");
	while (k % 8)
		hdr[k++] = ' ';
	for (int i = 0; i < 768; i++)
		data[i] = (unsigned char)i;
	n = (uint64_t)k;
	fd = open(PATH, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, &n, 8) != 8 || write(fd, hdr, (size_t)k) != k ||
	    write(fd, data, sizeof(data)) != (ssize_t)sizeof(data)) {
		perror(PATH);
		return -1;
	}
	close(fd);
	return 0;
}

int main(void)
{
	static const char *const dt[] = {"F8_E4M3", "F8_E5M2", "F8_E8M0"};
	float (*const ref[])(int) = {ref_e4m3, ref_e5m2, ref_e8m0};
	struct coli_st_file f;
	float out[256];
	int bad = 0, rc;

	if (write_file())
		return 1;
	rc = coli_io_st_open(PATH, &f);
	if (rc) {
		printf("FAIL: open: %s\n", coli_io_errmsg());
		return 1;
	}
	for (int i = 0; i < 3; i++) {
		const struct coli_st_tensor *t = coli_io_st_find(&f, dt[i]);
		int wrong = 0;

		if (!t || coli_io_st_dtype_bytes(t->dtype) != 1) {
			printf("FAIL: %s: not found, or not 1 byte an element\n", dt[i]);
			bad = 1;
			continue;
		}
		/* whole, then [37, 37 + 100): both widened in place */
		for (int pass = 0; pass < 2; pass++) {
			uint64_t e0 = pass ? 37 : 0, n = pass ? 100 : 256;

			memset(out, 0xa5, sizeof(out));
			rc = coli_io_st_read_range_f32(&f, t, e0, n, out);
			for (uint64_t j = 0; !rc && j < n; j++) {
				if (same(out[j], ref[i]((int)(e0 + j))))
					continue;
				if (wrong++ < 4)
					printf("FAIL: %s byte 0x%02x: got %a, want %a\n", dt[i],
					       (unsigned)(e0 + j), out[j], ref[i]((int)(e0 + j)));
			}
			if (rc) {
				printf("FAIL: %s: read: %s\n", dt[i], coli_io_errmsg());
				wrong++;
			}
		}
		if (!wrong)
			printf("ok: %s: the 256 encodings read exactly (largest finite %g)\n",
			       dt[i],
			       i == 0   ? 448.0
			       : i == 1 ? 57344.0
			                : ldexp(1, 127));
		bad |= wrong != 0;
	}
	coli_io_st_close(&f);
	unlink(PATH);
	return bad;
}
