/*
 * tests/bench/synth_routing.c — a synthetic model routes like a trained one
 * does, to many experts: the benchmarks' tiers, streaming and VRAM budgets
 * mean nothing if every token picks the same few. For the tiny shape in q4,
 * q8 and bf16: 8 prompt + 120 decode tokens of pseudo-random ids on the CPU,
 * then the usage file's counts per MoE layer: at least 3/4 of the experts
 * used and the busiest quarter of them taking at most 75% of the picks (even
 * routing: 25%). Q4_0 quants drawn as plain random bytes have mean -0.5:
 * every projection then carries one common direction, the hidden states
 * align and the busiest quarter took 95% in layer 1; core/model/synth.c draws them
 * symmetric (now 41-68%: random attention still averages a common part into
 * the residual, which skews the layers after the first).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/coli.h"
#include "core/core_internal.h"
#include "io/io.h"

#define TOKENS 128

static int check(enum coli_dtype q, const char *dir)
{
	char path[480], upath[512], err[512];
	coli_container_t *ct;
	struct coli_synth_opts so;
	struct coli_opts o;
	struct coli_usage u = {0};
	coli_engine_t *e;
	float *logits;
	int fails = 0, V, id;

	snprintf(path, sizeof(path), "%.440s/tiny-%s.coli", dir, coli_dtype_name(q));
	snprintf(upath, sizeof(upath), "%s.usage", path);
	unlink(upath); /* counts accumulate across runs */
	coli_synth_opts_init(&so);
	so.shape = "tiny", so.quant = q, so.out_path = path, so.threads = 2;
	if (coli_synth_write(&so, err, sizeof(err))) {
		printf("FAIL make %s: %s\n", path, err);
		return 1;
	}
	coli_opts_init(&o, NULL, 0);
	snprintf(o.gpu, sizeof(o.gpu), "off");
	coli_opts_set(&o, "--usage", upath, NULL, 0);
	o.threads = 2;
	if (coli_engine_open(path, &o, &e, err, sizeof(err))) {
		printf("FAIL open %s: %s\n", path, err);
		return 1;
	}
	V = coli_engine_config(e)->vocab;
	logits = malloc(sizeof(float) * (size_t)V);
	for (int i = 0; i < TOKENS && logits; i++) {
		id = (int)((7 + 2654435761ull * (unsigned)(i + 1)) % (unsigned)V);
		if (coli_engine_forward(e, &id, 1, logits, 0)) {
			printf("FAIL forward %s: %s\n", path, coli_engine_errmsg(e));
			fails++;
			break;
		}
	}
	free(logits);
	coli_engine_close(e);
	if (!fails && coli_io_container_open(path, &ct) == 0) {
		u.model_hash = coli_io_container_hash(ct);
		u.n_layers = coli_io_container_n_expert_layers(ct);
		u.n_experts = (int)coli_io_container_expert_layer(ct, 0)->n_experts;
		u.counts = calloc((size_t)u.n_layers * u.n_experts, sizeof(uint64_t));
		coli_io_container_close(ct);
	}
	if (fails || !u.counts || coli_usage_read(upath, &u, err, sizeof(err))) {
		printf("FAIL usage of %s: %s\n", path, fails ? "no run" : err);
		return 1;
	}
	for (int l = 0; l < u.n_layers; l++) {
		const uint64_t *c = u.counts + (size_t)l * u.n_experts;
		uint64_t sum = 0, top = 0, s[256];
		int used = 0, n = u.n_experts < 256 ? u.n_experts : 256;

		for (int x = 0; x < n; x++) /* s: counts, largest first */
			for (int y = x, v = (int)c[x]; y >= 0; y--)
				if (!y || s[y - 1] >= (uint64_t)v) {
					memmove(s + y + 1, s + y, sizeof(s[0]) * (size_t)(x - y));
					s[y] = (uint64_t)v;
					break;
				}
		for (int x = 0; x < n; x++)
			sum += s[x], used += s[x] > 0, top += x < n / 4 ? s[x] : 0;
		printf("%-5s layer %d: %d of %d experts used, the busiest quarter took %.0f%% "
		       "(even: 25%%)\n",
		       coli_dtype_name(q), l, used, n, sum ? 100.0 * top / sum : 0.0);
		if (!sum || 4 * used < 3 * n || 4 * top > 3 * sum) {
			printf("FAIL %s layer %d: routing collapsed onto few experts\n", path, l);
			fails++;
		}
	}
	free(u.counts);
	return fails;
}

int main(void)
{
	const char *dir = getenv("TEST_TMP") ? getenv("TEST_TMP") : "/tmp";
	int fails = 0;

	fails += check(COLI_DTYPE_Q4_0, dir);
	fails += check(COLI_DTYPE_Q8_0, dir);
	fails += check(COLI_DTYPE_BF16, dir);
	return fails ? 1 : 0;
}
