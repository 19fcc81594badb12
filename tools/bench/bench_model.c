/*
 * tools/bench/bench_model.c — `coli bench make-model --shape NAME [--layers N]
 * [--quant q4|q8|bf16|q4k|q5k|q6k] [--seed S] [--threads N] -o FILE.coli`: a synthetic
 * model of a real shape with seeded random weights (core/model/synth.c), for
 * benchmarks that need real geometry but not real weights. The shapes and
 * their sources are in docs/shapes.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/coli.h"
#include "io/io.h"
#include "tools/bench/bench.h"
#include "tools/tools.h"

static void help(FILE *f)
{
	fprintf(f,
	        "usage: coli bench make-model --shape NAME -o FILE.coli [--layers N]\n"
	        "                             [--quant q4|q8|bf16|q4k|q5k|q6k] [--seed S] "
	        "[--threads N]\n"
	        "  --shape NAME   %s\n"
	        "  --layers N     depth (default: the shape's); dense layers (glm) come first,\n"
	        "                 the last layer is always a MoE layer\n"
	        "  --quant Q      q4 (default), q8, bf16, or q4k / q5k (Q4_K_M / Q5_K_M mixes:\n"
	        "                 Q6_K downs, attn_v, embeddings, lm_head) or q6k\n"
	        "  --seed S       weights are a pure function of shape, quant, layers and seed\n"
	        "  --threads N    generator threads (default: online CPUs)\n",
	        coli_synth_shapes());
}

#define P "coli bench make-model"

int bench_model_main(int argc, char **argv)
{
	struct coli_synth_opts o;
	struct coli_model_config c;
	char err[512];
	double t0;
	int rc;

	coli_synth_opts_init(&o);
	o.progress = isatty(STDERR_FILENO);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			help(stdout);
			return 0;
		}
		if (!v)
			return tool_err("bench make-model", "%s needs a value (see --help)", a), 2;
		if (!strcmp(a, "--shape"))
			o.shape = v;
		else if (!strcmp(a, "-o"))
			o.out_path = v;
		else if (!strcmp(a, "--layers")) {
			if (tool_int(P, a, v, 0, COLI_MAX_LAYERS, &o.n_layers))
				return 2;
		} else if (!strcmp(a, "--seed")) {
			if (tool_u64(P, a, v, 0, UINT64_MAX, &o.seed))
				return 2;
		} else if (!strcmp(a, "--threads")) {
			if (tool_int(P, a, v, 0, 4096, &o.threads))
				return 2;
		} else if (!strcmp(a, "--quant")) {
			if (coli_dtype_parse(v, &o.quant))
				return tool_err("bench make-model",
				                "--quant %s: use q4, q8, bf16, q4k, q5k or q6k", v),
				       2;
		} else
			return tool_err("bench make-model", "unknown option '%s' (see --help)", a),
			       2;
		i++;
	}
	if (!o.shape || !o.out_path) {
		help(stderr);
		return 2;
	}
	if (o.n_layers < 0 || o.n_layers > COLI_MAX_LAYERS)
		return tool_err("bench make-model", "--layers must be 1..%d", COLI_MAX_LAYERS), 2;
	if (coli_synth_shape(o.shape, o.quant, o.n_layers, &c, NULL))
		return tool_err("bench make-model", "unknown shape '%s' (shapes: %s)", o.shape,
		                coli_synth_shapes()),
		       2;
	t0 = bench_now_s();
	rc = coli_synth_write(&o, err, sizeof(err));
	if (rc)
		return tool_err("bench make-model", "%s", err);
	double s = bench_now_s() - t0;
	coli_container_t *ct;
	uint64_t bytes = 0;

	if (!coli_io_container_open(o.out_path, &ct)) {
		bytes = coli_io_container_file_bytes(ct);
		coli_io_container_close(ct);
	}
	fprintf(stderr,
	        "coli bench make-model: %s, %s %s, %d layers x %d experts (top-%d), %.2f GB in "
	        "%.1f s (%.0f MB/s, including the writer's checksum pass)\n",
	        o.out_path, o.shape, coli_dtype_name(o.quant), c.n_layers, c.n_experts, c.top_k,
	        bytes / 1e9, s, s > 0 ? bytes / 1e6 / s : 0.0);
	return 0;
}
