/*
 * tools/cli/cmd_convert.c — `coli convert HF_DIR|MODEL.gguf -o OUT.coli [--quant bf16|q8|q4]`:
 * argument parsing around coli_convert() (core/convert/convert.c does the work).
 * Exit 0 on success, 1 on a conversion error (the message names the file
 * and the problem; no output file is left behind), 2 on a usage error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/coli.h"
#include "tools/tools.h"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: coli convert HF_DIR|MODEL.gguf -o OUT.coli [--quant bf16|q8|q4|q4k|q5k|q6k]\n"
	    "                    [--quant-mix LIST] [--threads N] [--progress|--quiet]\n"
	    "\n"
	    "Converts a Hugging Face checkpoint directory (config.json, model.safetensors or\n"
	    "model.safetensors.index.json + shards, tokenizer files) of a qwen3_moe,\n"
	    "qwen2_moe, olmoe, mixtral, glm4_moe, minimax_m2, deepseek_v3 (Kimi-K2) or gpt_oss\n"
	    "model into one .coli container; or a GGUF file (llama.cpp's format) of a\n"
	    "qwen3moe, qwen2moe, olmoe, Mixtral (llama with experts), glm4moe, deepseek2,\n"
	    "gpt-oss or minimax-m2 model, any tensor type coli reads (F32, F16, BF16,\n"
	    "Q4_0..Q8_0, Q2_K..Q6_K, MXFP4); of a split GGUF (-00001-of-0000N.gguf), give the\n"
	    "first part. Q8_0 blocks under q8 and Q4_0 blocks under q4 are copied as stored.\n"
	    "\n"
	    "  -o, --output FILE   the container to write (written as FILE.tmp.<pid>, renamed\n"
	    "                      only when complete)\n"
	    "  --quant Q           format of the matrices and expert slabs: bf16 (default),\n"
	    "                      q8 (Q8_0), q4 (Q4_0), or GGUF's K-quants q4k, q5k, q6k\n"
	    "                      (Q4_K, Q5_K, Q6_K; rows of partial 256-blocks take Q5_0,\n"
	    "                      Q5_1, Q8_0); norms, biases and routers stay f32.\n"
	    "                      A GGUF without --quant: q8 when its matrices are mostly\n"
	    "                      Q8_0/Q5/Q6_K (Q8_0: copied), q4 when mostly 4 bits or\n"
	    "                      fewer, else bf16; an FP8 checkpoint (quantization_config\n"
	    "                      fp8) without --quant: q8; an MXFP4 one (gpt-oss): q8, its\n"
	    "                      MXFP4 experts exactly (twice their bytes)\n"
	    "  --quant-mix LIST    under q4k / q5k, the matrices written Q6_K instead, by name\n"
	    "                      (comma-separated: lm_head, tok_embd, attn_v, experts.down,\n"
	    "                      blk.0.attn_q, ...; none for none; default\n"
	    "                      " COLI_QUANT_MIX ", as llama.cpp's Q4_K_M)\n"
	    "  --threads N         threads converting each chunk (default: all online CPUs)\n"
	    "  --progress          draw a progress bar on stderr (default when it is a tty)\n"
	    "  --quiet             no progress bar\n"
	    "\n"
	    "Memory use is bounded by a fixed chunk (about 80 MB), not by the model.\n");
}

int cmd_convert(int argc, char **argv)
{
	struct coli_convert_opts o;
	char err[2048];
	int rc;

	coli_convert_opts_init(&o);
	o.progress = isatty(2);
	o.quant_auto = 1; /* read for GGUF sources and FP8 / MXFP4 checkpoints only */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (++i >= argc)
				return tool_err("convert", "%s needs a file name", a) + 1;
			o.out_path = argv[i];
		} else if (!strcmp(a, "--quant") || !strncmp(a, "--quant=", 8)) {
			const char *q = a[7] == '=' ? a + 8 : (++i < argc ? argv[i] : NULL);

			o.quant_auto = 0;
			if (!q || coli_dtype_parse(q, &o.quant) ||
			    (o.quant != COLI_DTYPE_BF16 && o.quant != COLI_DTYPE_Q8_0 &&
			     o.quant != COLI_DTYPE_Q4_0 && o.quant != COLI_DTYPE_Q4_K &&
			     o.quant != COLI_DTYPE_Q5_K && o.quant != COLI_DTYPE_Q6_K))
				return tool_err(
				           "convert",
				           "--quant takes bf16, q8, q4, q4k, q5k or q6k (got '%s')",
				           q ? q : "") +
				       1;
		} else if (!strcmp(a, "--threads")) {
			if (++i >= argc)
				return tool_err("convert", "--threads needs a count") + 1;
			if (tool_int("coli convert", a, argv[i], 1, 4096, &o.threads))
				return 2;
		} else if (!strcmp(a, "--quant-mix")) {
			if (++i >= argc)
				return tool_err("convert",
				                "--quant-mix needs a list of matrix names "
				                "(or none)") +
				       1;
			o.quant_mix = argv[i];
		} else if (!strcmp(a, "--progress")) {
			o.progress = 1;
		} else if (!strcmp(a, "--quiet")) {
			o.progress = 0;
		} else if (a[0] == '-' && a[1]) {
			usage(stderr);
			return tool_err("convert", "unknown option '%s'", a) + 1;
		} else if (!o.hf_dir) {
			o.hf_dir = a;
		} else {
			return tool_err("convert", "unexpected argument '%s'", a) + 1;
		}
	}
	if (o.quant_mix && o.quant != COLI_DTYPE_Q4_K && o.quant != COLI_DTYPE_Q5_K)
		return tool_err("convert", "--quant-mix goes with --quant q4k or q5k") + 1;
	if (!o.hf_dir || !o.out_path) {
		usage(stderr);
		return 2;
	}
	rc = coli_convert(&o, err, sizeof(err));
	if (rc)
		return tool_err("convert", "%s", err);
	fprintf(stderr, "coli convert: wrote %s\n", o.out_path);
	return 0;
}
