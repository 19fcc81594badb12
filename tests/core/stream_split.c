/*
 * tests/core/stream_split.c — the cost model's decode split (core/moe/moe.c
 * coli_moe_decode_split): of n RAM-tier experts, a slab each, the k streamed
 * must minimize max(k / bw_stream, (n - k) / bw_cpu), ties to the CPU.
 *
 * Checked against a brute force written here over 20,000 random (n,
 * bandwidths), and on the H200 cases that motivated it (docs/perf/history/
 * 2026-11-30.md: a link at ~38 GB/s beside CPU rows at ~86 GB/s): five experts
 * stream one, where rounding 5 x 38 / (38 + 86) streamed two; two stay on
 * the CPU; a link far faster than the CPU takes them all; n = 0 streams none.
 */
#include <stdio.h>

#include "core/core_internal.h"
#include "core/moe/moe.h"

static double cost(int n, int k, double bs, double bc)
{
	return k / bs > (n - k) / bc ? k / bs : (n - k) / bc;
}

int main(void)
{
	static const struct {
		int n;
		double bs, bc;
		int want;
	} cases[] = {
	    {5, 38, 86, 1},  {3, 38, 86, 1},  {2, 38, 86, 0}, {10, 50, 50, 5},
	    {4, 1000, 1, 4}, {4, 1, 1000, 0}, {0, 38, 86, 0}, {7, 40, 80, 2},
	};
	unsigned long long x = 12345;
	int fails = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int k = coli_moe_decode_split(cases[i].n, cases[i].bs, cases[i].bc);

		printf("n %2d  stream %6.1f  cpu %6.1f GB/s: streams %d (want %d)\n", cases[i].n,
		       cases[i].bs, cases[i].bc, k, cases[i].want);
		fails += k != cases[i].want;
	}
	for (int t = 0; t < 20000; t++) {
		int n, k, best = 0;
		double bs, bc;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		n = (int)(x >> 59); /* 0..31 */
		bs = 1 + (double)((x >> 20) % 2000) / 10;
		bc = 1 + (double)((x >> 40) % 2000) / 10;
		for (int j = 1; j <= n; j++)
			if (cost(n, j, bs, bc) < cost(n, best, bs, bc))
				best = j;
		k = coli_moe_decode_split(n, bs, bc);
		if (k != best) {
			if (fails < 5)
				printf("FAIL n %d stream %.1f cpu %.1f: streams %d, the minimum is "
				       "at %d\n",
				       n, bs, bc, k, best);
			fails++;
		}
	}
	printf("%s: %d failures\n", fails ? "FAIL" : "ok", fails);
	return fails != 0;
}
