/*
 * tools/cmd_bench.c — `coli bench SUBCOMMAND ...`: measurements printed next
 * to the bound they should approach (DESIGN.md, "The performance model").
 * Benchmarks never assert on wall time; they print ratios.
 *
 *   kernels      CPU GEMV/GEMM weight throughput vs host read bandwidth
 *                (tools/bench_kernels.c)
 *   decode, prefill, io, make-model   not built yet (exit 2)
 */
#include <stdio.h>
#include <string.h>

#include "tools/tools.h"

/* tools/bench_kernels.c; argv[0] = "kernels" */
int bench_kernels_main(int argc, char **argv);

static void usage(FILE *f)
{
	fprintf(f, "usage: coli bench SUBCOMMAND [ARGS]\n\n"
	           "  kernels [--threads N] [--mib M] [--reps R] [--json]\n"
	           "              CPU GEMV/GEMM weight GB/s for bf16/q8/q4, S = 1,2,4,8,\n"
	           "              next to the host read bandwidth measured in the same run\n"
	           "  decode | prefill | io | make-model   (not built yet)\n");
}

int cmd_bench(int argc, char **argv)
{
	static const char *const later[] = {"decode", "prefill", "io", "make-model"};

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "kernels"))
		return bench_kernels_main(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof(later) / sizeof(later[0]); i++) {
		if (!strcmp(argv[1], later[i])) {
			tool_err("bench", "'%s' is not built yet", argv[1]);
			return 2;
		}
	}
	tool_err("bench", "unknown subcommand '%s' (try: coli bench --help)", argv[1]);
	return 2;
}
