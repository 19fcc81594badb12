/*
 * tests/cpu/argmax.c — cpu/ coli_argmax against the plain loop (first index
 * of the largest, NaNs never chosen, x[0] NaN gives 0) on random vectors of
 * many lengths with ties, NaNs, infinities and maxima at block edges.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu/cpu.h"

static int plain(const float *x, int n)
{
	int b = 0;

	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

int main(void)
{
	enum { N = 151936 };
	float *x = malloc(sizeof(float) * N);
	unsigned s = 12345;
	int fails = 0, cases = 0;

	for (int k = 0; k < 400; k++) {
		int n = k < 40 ? k + 1 : k < 200 ? 500 + k * 7 : N - k;
		int kind = k % 5;

		for (int i = 0; i < n; i++) {
			s = s * 1103515245u + 12345u;
			x[i] = kind == 0   ? (float)(s >> 8)
			       : kind == 1 ? (float)((s >> 16) % 7)
			       : kind == 2 ? -(float)(s >> 9)
			                   : (float)(s >> 8) * 1e-6f - 8000.0f;
		}
		if (kind == 3) /* NaNs sprinkled, one maybe first */
			for (int i = k % 2 ? 0 : 3; i < n; i += 97)
				x[i] = NAN;
		if (kind == 4 && n > 600) { /* the maximum on a block edge, twice */
			x[511] = INFINITY;
			x[n - 1] = INFINITY;
		}
		cases++;
		if (coli_argmax(x, n) != plain(x, n)) {
			printf("FAIL n=%d kind %d: %d, plain loop %d\n", n, kind, coli_argmax(x, n),
			       plain(x, n));
			fails++;
		}
	}
	printf("%d cases, %d failed\n", cases, fails);
	free(x);
	return fails ? 1 : 0;
}
