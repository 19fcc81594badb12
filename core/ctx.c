/*
 * core/ctx.c — the context the engine opens with when --ctx is 0: the
 * model's trained length (coli_config_ctx_trained: max_position_embeddings,
 * or with RoPE scaling what vLLM derives, YaRN's original * factor, linear's
 * max_position_embeddings * factor), capped by what the memory budget gives
 * the KV cache:
 *
 *   host    half of (--ram-gb, or 90% of MemAvailable without a budget or with
 *           --ram-gb 0) less the dense weights: the other half is left to the
 *           experts' slots and the scratch (a budget too small for those is
 *           refused as before by core/place/tiers_open.c, which names --ctx)
 *   device  when the dense part may go to a device (--gpu not off, --dense
 *           auto; its cache is the host pool's blocks again): with --vram-gb (the
 *           resident experts' budget) what the smallest device has left after
 *           it, the dense weights and the reserve; else a quarter of its
 *           memory, the rest holding the dense part and experts
 *
 * bytes per token: K and V of every layer as the host cache holds them
 * (core/forward/kv.c: rows of n_kv_heads * head_dim in --kv-type; MLA one
 * latent row of kv_lora + rope_dim). A capped context is rounded down to a multiple of
 * 1024 (256 below 4096), and is at least min(trained, 256). The tiny fixtures
 * and the demo model (512, 2048 trained) open at their trained length, as they
 * did under the former default (min(trained, 4096)); a 128k model opens at
 * 128k where memory holds it. core/engine.c says the choice at start when the
 * cap bit (and with --verbose). tests/core/ctx_default.
 *
 * With --parallel N the cache holds N slots of ctx positions: the budget is
 * shared by N (ctx at most budget / N). --parallel 0 (auto) resolves after
 * ctx to what the host budget holds of such slots, at most opts.parallel_auto
 * (1 for coli's commands, 8 for colid), and when the dense part may go to
 * a device, without --kv-gb, what the device's budget holds of them too
 * (its copy of the pool holds N x ctx then).
 *
 * --kv-gb G sizes the cache as a pool of blocks that the sequences share
 * (core/forward/kv.h) instead, on the host and on the dense device alike
 * (core/forward/dense_dev.c: the device's rows are the pool's blocks): the
 * cap on ctx is what one sequence may take of the pool (G / bytes a token),
 * on the device too (one sequence's bytes against the device's budget), and
 * --parallel 0 is opts.parallel_auto (colid admits what the pool holds).
 */
#include <stdio.h>
#include <string.h>

#include "core/core_internal.h"
#include "core/dev/dev.h"
#include "io/io.h"

/* K and V of one position over every layer in --kv-type, as
 * core/forward/kv.c allocates. */
static double kv_token_bytes(const struct coli_engine *e)
{
	int kt = COLI_KV_BF16, vt = COLI_KV_BF16;

	coli_kv_types_parse(e->opts.kv_type, &kt, &vt); /* checked with the options */
	return (double)coli_kv_token_bytes(&e->m.cfg, kt, vt) * e->m.cfg.n_layers;
}

static int round_down(double n)
{
	int q = n >= 4096 ? 1024 : 256;

	return n >= 1 << 24 ? 1 << 24 : (int)(n / q) * q;
}

/* What the KV cache may take on the host (*host) and on a device (*dev: 0
 * when the dense part stays on the host), in bytes. */
static void budgets(const struct coli_engine *e, double *host_out, double *dev_out)
{
	double host, dev = 0;
	uint64_t off, dense;

	coli_io_container_dense_region(e->m.c, &off, &dense);
	host = e->opts.ram_gb > 0 ? e->opts.ram_gb * 1e9 : coli_tiers_mem_available() * 0.9;
	host = host > dense ? (host - dense) / 2 : 0;
	if (strcmp(e->opts.gpu, "off") && e->opts.dense != COLI_OPT_DENSE_CPU) {
		double mem = (double)coli_dev_spec_mem(e->opts.gpu);

		dev = mem / 4;
		if (mem > 0 && e->opts.vram_gb >= 0) {
			dev = mem - e->opts.vram_gb * 1e9 - (double)dense - COLI_VRAM_RESERVE_BYTES;
			dev = dev > 1 ? dev : 1; /* nothing left: the floor below */
		}
	}
	*host_out = host, *dev_out = dev;
}

int coli_engine_parallel_default(const struct coli_engine *e, int ctx)
{
	double host, dev, slot = kv_token_bytes(e) * ctx;
	int most = e->opts.parallel_auto > 1 ? e->opts.parallel_auto : 1, n;

	budgets(e, &host, &dev);
	if (most == 1)
		return 1;
	n = host > 0 && e->opts.kv_gb <= 0 ? (int)(host / slot < most ? host / slot : most) : most;
	if (dev > 0 && e->opts.kv_gb <= 0) /* the device's pool holds every slot full */
		n = dev / slot < n ? (int)(dev / slot) : n;
	return n > 1 ? n : 1;
}

int coli_engine_ctx_default(const struct coli_engine *e, int n_seq, char *why, size_t len)
{
	const struct coli_model_config *c = &e->m.cfg;
	int trained = coli_config_ctx_trained(c), floor = trained < 256 ? trained : 256, ctx;
	double tok = kv_token_bytes(e) * (n_seq > 1 ? n_seq : 1), host, dev;
	/* a position's bytes on the device: the pool's (--kv-gb: one sequence
	 * may take all of it), else every slot's */
	double dtok = e->opts.kv_gb > 0 ? kv_token_bytes(e) : tok;
	const char *by = "RAM";
	int on_dev = 0; /* the device capped it */

	budgets(e, &host, &dev);
	ctx = trained;
	if (e->opts.kv_gb > 0) { /* the pool: one sequence may take all of it */
		host = e->opts.kv_gb * 1e9;
		by = "--kv-gb";
		if (host / kv_token_bytes(e) < ctx)
			ctx = round_down(host / kv_token_bytes(e));
	} else if (host > 0 && host / tok < ctx) {
		ctx = round_down(host / tok);
	}
	if (dev > 0 && dev / dtok < ctx) {
		ctx = round_down(dev / dtok);
		by = "device memory", on_dev = 1;
	}
	ctx = ctx > floor ? ctx : floor;
	if (ctx >= trained) {
		snprintf(why, len, "the model's trained length");
	} else {
		double may = on_dev ? dev : host, u = may >= 1e9 ? 1e9 : 1e6;

		char seqs[32] = "";

		if (e->opts.kv_gb > 0) /* one sequence's share of the pool */
			tok = kv_token_bytes(e), n_seq = 1;
		if (n_seq > 1)
			snprintf(seqs, sizeof(seqs), " (%d sequences)", n_seq);
		snprintf(
		    why, len,
		    "the model's trained %d, capped by %s: the KV cache%s takes %.2f %s of the "
		    "%.2f %s it may use",
		    trained, by, seqs, ctx * tok / u, u == 1e9 ? "GB" : "MB", may / u,
		    u == 1e9 ? "GB" : "MB");
	}
	return ctx;
}
