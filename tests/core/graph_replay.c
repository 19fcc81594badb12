/*
 * tests/core/graph_replay.c — decode layers replayed from captured CUDA
 * graphs (core/forward/forward_dev.c layer_run) give the bits of the same layers
 * launched kernel by kernel (COLI_DEV_GRAPH=0).
 *
 * For each fixture (q8 and q4 experts), on GPU 0: two engines, graphs on and
 * off, fed the same 240-token prompt (a prefill: no graphs) and then the graph
 * engine's greedy tokens for 40 steps, across position 256, where a step's
 * attention leaves the first bucket of positions its graphs cover
 * (kernels_abi.h coli_gpu_attn_reach); the logits of every step must be byte-identical. Placements:
 * every expert in VRAM (layers planned on the device), a few (host-planned layers with the rest on
 * the CPU), and the same with the VRAM experts preplanned. Asserted too: every layer ran from a
 * graph at every step; with every expert in VRAM the whole token is one graph, captured once a
 * bucket (core/forward/forward_dev.c token_run), else each layer has its own (two for a
 * host-planned layer: with and without the lookahead's guess) in each bucket. Skips without a GPU.
 */
#include "fixture_util.h"
#include "io/io.h"
#include "ptx/ptx.h"

#define STEPS   40
#define PROMPT  240
#define BUCKETS 2 /* the steps' positions 241..280 span two */

static coli_engine_t *open_engine(const char *path, int graph, double vram_gb, int preplan)
{
	struct coli_opts o;
	coli_engine_t *e = NULL;
	char err[512];

	coli_opts_init(&o, NULL, 0);
	o.threads = 2;
	o.vram_gb = vram_gb;
	o.dev_graph = graph;
	o.dev_preplan = preplan;
	snprintf(o.gpu, sizeof(o.gpu), "0");
	coli_opts_set(&o, "--stream", "off", NULL, 0);
	coli_opts_set(&o, "--usage", "off", NULL, 0);
	if (coli_engine_open(path, &o, &e, err, sizeof(err)))
		printf("open %s: %s\n", path, err);
	return e;
}

static int compare(const char *what, const char *path, double vram_gb, int preplan)
{
	const int whole = vram_gb < 0; /* every expert in VRAM: the token is one graph */
	coli_engine_t *g = open_engine(path, 1, vram_gb, preplan);
	coli_engine_t *k = open_engine(path, 0, vram_gb, preplan);
	struct coli_engine_stats s0, s1;
	int ids[PROMPT], id, V, differ = 0, rc = 0, n_layers;
	float *lg, *lk;

	if (!g || !k)
		return 1;
	V = coli_engine_config(g)->vocab;
	n_layers = coli_engine_config(g)->n_layers;
	for (int i = 0; i < PROMPT; i++)
		ids[i] = 1 + (i * 37) % (V - 1);
	lg = malloc(sizeof(float) * V);
	lk = malloc(sizeof(float) * V);
	rc |= coli_engine_forward(g, ids, PROMPT, lg, 0);
	rc |= coli_engine_forward(k, ids, PROMPT, lk, 0);
	differ += memcmp(lg, lk, sizeof(float) * V) != 0;
	coli_engine_stats(g, &s0);
	for (int i = 0; i < STEPS && !rc; i++) {
		id = fx_argmax(lg, V);
		rc |= coli_engine_forward(g, &id, 1, lg, 0);
		rc |= coli_engine_forward(k, &id, 1, lk, 0);
		differ += memcmp(lg, lk, sizeof(float) * V) != 0;
	}
	coli_engine_stats(g, &s1);
	printf("%-34s %d of %d steps differ; %llu layer calls replayed from %llu graphs\n", what,
	       differ, STEPS + 1, (unsigned long long)(s1.dev_graph_replays - s0.dev_graph_replays),
	       (unsigned long long)s1.dev_graph_captures);
	if (rc || differ) {
		printf("FAIL: %s\n", rc ? "forward failed" : "graph replay changed the logits");
		rc = 1;
	}
	/* a host-planned layer has two graphs once its lookahead idles
	 * (core/moe/lookahead.c: guessed at every 8th position only) */
	if (s1.dev_graph_replays - s0.dev_graph_replays != (uint64_t)STEPS * n_layers ||
	    (whole ? s1.dev_graph_captures != BUCKETS
	           : s1.dev_graph_captures < (uint64_t)BUCKETS * n_layers ||
	                 s1.dev_graph_captures > 2 * (uint64_t)BUCKETS * n_layers)) {
		printf("FAIL: expected %d layer replays of %s graphs\n", STEPS * n_layers,
		       whole ? "one token's" : "per-layer");
		rc = 1;
	}
	free(lg), free(lk);
	coli_engine_close(g);
	coli_engine_close(k);
	return rc;
}

int main(void)
{
	static const char *names[] = {"qwen3_moe", "qwen2_moe", "mixtral"};
	static const enum coli_dtype quants[] = {COLI_DTYPE_Q8_0, COLI_DTYPE_Q4_0};
	const char *why;
	int rc = 0;

	if (coli_ptx_probe(&why) <= 0) {
		printf("no GPU: %s\n", why);
		return 77;
	}
	for (size_t f = 0; f < sizeof(names) / sizeof(names[0]); f++)
		for (size_t q = 0; q < sizeof(quants) / sizeof(quants[0]); q++) {
			char path[8192], what[96];
			coli_container_t *c;
			double slab_gb;

			if (fx_convert(names[f], quants[q], fx_tmpdir(), path, sizeof(path)) ||
			    coli_io_container_open(path, &c))
				return 1;
			slab_gb = coli_io_container_expert_layer(c, 0)->slab_bytes / 1e9;
			coli_io_container_close(c);
			snprintf(what, sizeof(what), "%s %s all resident", names[f],
			         q ? "q4" : "q8");
			rc |= compare(what, path, -1, 0);
			snprintf(what, sizeof(what), "%s %s 5 experts resident", names[f],
			         q ? "q4" : "q8");
			rc |= compare(what, path, 5.5 * slab_gb, 0);
			snprintf(what, sizeof(what), "%s %s 5 resident, preplanned", names[f],
			         q ? "q4" : "q8");
			rc |= compare(what, path, 5.5 * slab_gb, 1);
		}
	return rc;
}
