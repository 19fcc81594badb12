/*
 * tools/fuzz/fuzz_config.c — libFuzzer target for the Hugging Face files coli
 * convert reads before any tensor: config.json (every dialect), the
 * optional generation_config.json, tokenizer_config.json (its chat
 * template, transformers' past-64-bit integers) and
 * model.safetensors.index.json (the shard list), through
 * coli_convert_hf_load exactly as `coli convert` calls it, then the
 * config it produced through the engine's own formatter and parser.
 *
 * Input: a quant byte (bf16, q8, q4 by value % 3), then the four files
 * separated by NUL bytes in that order (config, tokenizer_config,
 * generation_config, index); a missing or empty part is an absent file.
 * The parts are written to a directory of their own under $TMPDIR (made
 * once; a tmpfs keeps that cheap) with an empty model.safetensors and a
 * "{}" tokenizer.json, so the reader needs no change to be fuzzed.
 * A load must succeed or fail with a message; a config it accepts must
 * format and parse back. Seeds: tools/fuzz/seed/fuzz_config.seed.sh (the fixtures'
 * files).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/convert/convert_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const parts[] = {"config.json", "tokenizer_config.json",
                                    "generation_config.json", "model.safetensors.index.json"};

static int put(const char *dir, const char *name, const uint8_t *p, size_t n)
{
	char path[4200];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!p) {
		unlink(path);
		return 0;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n))
		__builtin_trap(); /* our own directory: the environment, not the input */
	close(fd);
	return 0;
}

static char g_dir[4096];

/* At exit (libFuzzer's exit() after -runs or -max_total_time): the
 * directory and what is in it. */
static void cleanup(void)
{
	static const char *const fixed[] = {"model.safetensors", "tokenizer.json"};

	for (int i = 0; i < 4; i++)
		put(g_dir, parts[i], NULL, 0);
	for (int i = 0; i < 2; i++)
		put(g_dir, fixed[i], NULL, 0);
	rmdir(g_dir);
}

static const char *workdir(void)
{
	char *dir = g_dir;

	if (!dir[0]) {
		const char *t = getenv("TMPDIR");

		snprintf(dir, sizeof(g_dir), "%s/coli-fuzz-config.XXXXXX",
		         access("/dev/shm", W_OK) == 0 ? "/dev/shm"
		         : t                           ? t
		                                       : "/tmp");
		if (!mkdtemp(dir))
			__builtin_trap();
		put(dir, "model.safetensors", (const uint8_t *)"", 0);
		put(dir, "tokenizer.json", (const uint8_t *)"{}", 2);
		atexit(cleanup);
	}
	return dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum coli_dtype quants[] = {COLI_DTYPE_BF16, COLI_DTYPE_Q8_0, COLI_DTYPE_Q4_0};
	const char *dir = workdir();
	const uint8_t *p = data + 1, *end = data + size;
	struct coli_convert_hf h;
	char err[512] = "";

	if (!size)
		return 0;
	for (int i = 0; i < 4; i++) {
		const uint8_t *nul = p < end ? memchr(p, 0, (size_t)(end - p)) : NULL;
		const uint8_t *e = nul ? nul : end;

		put(dir, parts[i], p < e ? p : NULL, (size_t)(e - p));
		p = nul ? nul + 1 : end;
	}
	if (coli_convert_hf_load(dir, quants[data[0] % 3], &h, err, sizeof(err))) {
		if (!err[0])
			__builtin_trap(); /* a refusal always says why */
		return 0;
	}
	/* what convert stores as the CONFIG section parses back */
	struct coli_model_config back;

	if (!h.section[COLI_SECTION_CONFIG] ||
	    coli_config_parse(h.section[COLI_SECTION_CONFIG], h.section_bytes[COLI_SECTION_CONFIG],
	                      &back, err, sizeof(err)) ||
	    back.n_layers != h.cfg.n_layers || back.n_experts != h.cfg.n_experts)
		__builtin_trap();
	coli_convert_hf_free(&h);
	return 0;
}
