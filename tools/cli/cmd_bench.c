/*
 * tools/cli/cmd_bench.c — `coli bench SUBCOMMAND ...`: measurements printed next
 * to the bound they should approach (DESIGN.md, "The performance model").
 * Benchmarks never assert on wall time; they print ratios.
 *
 *   kernels      CPU GEMV/GEMM weight throughput vs host read bandwidth
 *                (tools/bench/bench_kernels.c)
 *   make-model   a synthetic model of a real shape (tools/bench/bench_model.c)
 *   decode       tok/s per arm next to the bound (tools/bench/run/bench_run.c)
 *   prefill      the same for a prompt batch
 *   stream       the streaming-weight path's five arms (tools/bench/run/bench_run.c)
 *   io           slab streaming vs sequential O_DIRECT (tools/bench/bench_io.c)
 *   mla          latent attention of a decode step vs device bandwidth
 *                (tools/bench/bench_mla.c)
 *   attention    the CPU's attention of a decode token vs the host read
 *                (tools/bench/bench_cpu_attn.c)
 *   constrain    a constrained step's token mask at 151936 tokens vs 5% of a
 *                decode step (tools/bench/bench_constrain.c)
 *   spec         speculative decoding's drafts replayed on a model's greedy text
 *                at the verification cost measured and given: modeled speedup
 *                vs all drafts accepted (tools/bench/bench_spec.c)
 *   serve        concurrent clients against colid or any OpenAI-compatible
 *                server: requests/s, tok/s, TTFT and inter-token latency
 *                (tools/bench/serve/bench_serve.c)
 *
 * The measurements they share live in tools/bench/bench_measure.c (tools/bench/bench.h).
 */
#include <stdio.h>
#include <string.h>

#include "tools/bench/bench.h"
#include "tools/tools.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: coli bench SUBCOMMAND [ARGS]\n\n"
	           "  kernels [--threads N] [--mib M] [--reps R] [--isa LIST] [--shape 30b|235b]\n"
	           "          [--dtypes LIST] [--read-only] [--json]\n"
	           "              CPU GEMV/GEMM weight GB/s for bf16/q8/q4 and GGUF's block\n"
	           "              types, S = 1 (a pool round a matrix, and 1L: a layer's\n"
	           "              matrices a round, as the engine), 2,4,8,16, on qwen3-30b's\n"
	           "              or 235b's expert matrices, next to the host read bandwidth\n"
	           "              measured in the same run; the thread pool's round with\n"
	           "              nothing to do; --isa: that ISA's own kernels (default the\n"
	           "              engine's choice), several (avx512,avx2) interleaved;\n"
	           "              --dtypes: only these (q4_k,q6_k; default every one)\n"
	           "  make-model --shape NAME -o FILE [--layers N] [--quant q4|q8|bf16]\n"
	           "              a synthetic model of a real shape, seeded random weights\n"
	           "  decode  -m MODEL [--tokens N] [--arms A,B,..] [--json] [engine options]\n"
	           "  prefill -m MODEL [--prompt N] [--arms A,B,..] [--json] [engine options]\n"
	           "              tok/s per arm (median, spread), bytes per tier per token,\n"
	           "              per-phase split, the bound from bandwidths measured in the run;\n"
	           "              with --profile, where the MoE window went (host slabs, device\n"
	           "              issue, devices busy, slab copy GB/s)\n"
	           "  stream  -m MODEL [--gpu sim|auto] [--vram-frac F] [--tokens N] [--json]\n"
	           "              the streaming-weight path: arms sync, overlap, overlap+stream,\n"
	           "              stream-only, cpu-only at a VRAM budget of 25%% of the experts,\n"
	           "              each from the same heat; tok/s, overlap window, streamed GB/s,\n"
	           "              ratio to the bound\n"
	           "  io      -m MODEL [--slabs N] [--qd Q] [--json]\n"
	           "              random slab reads vs the file's sequential O_DIRECT bandwidth\n"
	           "  mla     [--ctx N] [--heads H]\n"
	           "              the GPU's latent attention (DeepSeek-V3 / Kimi-K2) at a decode\n"
	           "              step vs the device bandwidth measured in the run\n"
	           "  attention [--ctx N] [--threads T] [--kv-type T] [--isa LIST]\n"
	           "              the CPU's attention of a decode token over N cached positions\n"
	           "              per kernel ISA vs the host read bandwidth measured in the run\n"
	           "  constrain [--tokenizer FILE] [--vocab N] [--decode-ms MS]\n"
	           "              the token mask of constrained decoding (JSON schema) over a\n"
	           "              padded 151936-token vocabulary vs 5%% of a decode step\n"
	           "  spec    -m MODEL (--text FILE | --random L) [--excerpts N] [--chars C]\n"
	           "          [--tokens T] [--g G,..] [engine options]\n"
	           "              greedy text from N places of FILE (or N prompts of L seeded\n"
	           "              random ids), then --spec auto's and\n"
	           "              ngram's drafts replayed on it at the verification cost\n"
	           "              measured (g: extra steps a draft token) and at each --g:\n"
	           "              modeled speedup, the bound (every draft accepted), ratio\n"
	           "  serve   (-m MODEL [engine options] | --url URL) [--clients N,..]\n"
	           "          [--requests R] [--prompt-tokens A:B] [--max-tokens C:D]\n"
	           "              N streaming clients against colid (started from -m) or\n"
	           "              an OpenAI-compatible server: requests/s, output tok/s,\n"
	           "              TTFT and inter-token latency p50/p99, queue time\n"
	           "(coli bench SUBCOMMAND --help for each)\n");
}

int cmd_bench(int argc, char **argv)
{
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
	if (!strcmp(argv[1], "make-model"))
		return bench_model_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "decode") || !strcmp(argv[1], "prefill") || !strcmp(argv[1], "stream"))
		return bench_run_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "io"))
		return bench_io_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "mla"))
		return bench_mla_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "attention"))
		return bench_cpu_attn_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "constrain"))
		return bench_constrain_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "spec"))
		return bench_spec_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "serve"))
		return bench_serve_main(argc - 1, argv + 1);
	tool_err("bench", "unknown subcommand '%s' (try: coli bench --help)", argv[1]);
	return 2;
}
