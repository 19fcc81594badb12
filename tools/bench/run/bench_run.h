/*
 * tools/bench/run/bench_run.h — private to tools/bench/run/bench_run.c (decode, prefill: arms,
 * rounds), tools/bench/run/bench_run_report.c (medians, the bound, the report) and
 * tools/bench/run/bench_stream.c (the stream benchmark's arms, heat and table on top of
 * them).
 */
#ifndef COLI_TOOLS_BENCH_RUN_H
#define COLI_TOOLS_BENCH_RUN_H

#include "core/coli.h"
#include "tools/bench/bench.h"

#define MAX_ARMS   16
#define MAX_ROUNDS 101
#define N_PHASES   5
#define N_PROF     6

struct round {
	double tok_s, host_gbs;
	double tier_b[COLI_TIER_N]; /* bytes per token */
	double dense_b;
	double stream_b;           /* streamed slab bytes per token (part of tier_b RAM/DISK) */
	double stream_copy_b;      /* of which copied over PCIe (the rest hit staged copies) */
	int dense_dev;             /* the dense part ran on a device */
	double uses;               /* routed (token, expert) pairs per token */
	double hits;               /* expert-layer loads per token */
	double phase_ms[N_PHASES]; /* per token */
	double win_ms[4];          /* overlap window per token: pack+issue | cpu-rows | take;
	                            * then attention's core (attn_core_s) */
	double prof_ms[N_PROF];    /* --profile: inside the window, per token (g_prof) */
	double stream_gbs;         /* streamed slab bytes / timed seconds */
	double kv_b;               /* KV cache bytes attention read per token (part of dense_b) */
	double reloads, reload_b;  /* CUDA_RELEASE_HOST reloads in the round, their bytes */
	double layer[COLI_TL_CLASSES][COLI_TL_FIELDS]; /* moe_layer over the timed steps */
};

struct arm {
	char name[128];
	struct coli_opts opts;
	coli_engine_t *e;
	coli_cpu_pool_t *pool; /* for the host read, the engine's thread count */
	int threads;
	struct round r[MAX_ROUNDS];
	/* medians */
	double tok_s, tok_s_min, tok_s_max, host_gbs, tier_b[COLI_TIER_N], dense_b, uses, hits;
	double stream_b, stream_copy_b;
	int dense_dev;
	double phase_ms[N_PHASES];
	double win_ms[4], stream_gbs, reloads, reload_b; /* medians; reloads: totals */
	double kv_b;                                     /* median */
	int filled, fill_next; /* --ctx-fill: the cache holds the fill; its argmax */
	double prof_ms[N_PROF];
	double layer[COLI_TL_CLASSES][COLI_TL_FIELDS]; /* the rounds' moe_layer summed */
	struct bench_bytes bytes;
	struct bench_bound bound;
	struct bench_bound ideal; /* stream: host bytes split so CPU and PCIe finish together */
	struct bench_bound ideal_free; /* the same without the host memory's cap (dram_gbs) */
	struct bench_bound moe_ideal;  /* stream: the same over the expert bytes alone */
	double path_s; /* stream: the token's non-MoE time as measured + moe_ideal */
};

struct run {
	int prefill;
	const char *model;
	int tokens, prompt, rounds, warmup, json, disk_mib, read_mib, qd;
	int ctx_fill; /* --ctx-fill: decode after this many cached tokens (= prompt), filled once */
	int noise;    /* threads that burn a core each through the rounds (--noise) */
	int *ids;     /* [prompt] */
	struct arm arm[MAX_ARMS];
	int n_arms;
	/* from the container */
	uint64_t dense_call_bytes; /* dense tensors read per forward call */
	uint64_t embd_row_bytes;   /* one tok_embd row (untied) */
	uint64_t kv_row_bytes;     /* K + V of one position, all layers, fp32 (the engine's
	                            * kv_token_bytes, in --kv-type, when it has one) */
	uint64_t expert_off, expert_bytes, slab_bytes;
	int n_moe_layers;
	struct coli_model_config cfg;
	double disk_gbs[MAX_ROUNDS];
	struct bench_read_result disk;
	struct bench_slabs slabs;  /* the disk term's pattern */
	struct bench_extent *dext; /* [n_dext] slabs read per round */
	size_t n_dext;
	double disk_med;
	int have_gpu;
	struct bench_bw gpu; /* .dram_gbs: bench stream, with a GPU */
	double dram_cores;   /* the cores' part of gpu.dram_gbs */
	/* bench stream (see the stream section below) */
	int stream;
	double vram_frac; /* VRAM expert budget, fraction of the expert bytes */
	int heat_tokens;  /* decode tokens that make the heat when no usage file exists */
	char heat_from[4200];
	char usage_cur[512], usage_snap[512]; /* the arms' usage file, the snapshot (as opts) */
	const char *arm_list;
	int feed_greedy; /* decode feeds the argmax back (--feed greedy), else bench_feed's ids */
	int seqs;        /* --seqs: sequences decoding together (1: one, coli_engine_forward) */
	struct coli_opts base;
	double expert_total_bytes;
};

/* bench_run.c */
/* The id decode step i feeds after `prompt` (see --feed): the argmax of
 * logits, or a fixed pseudo-random id drawn from the prompt and i. */
int bench_feed(const struct run *R, const int *prompt, int i, const float *logits);
/* One timed round of arm a on its open engine (decode or prefill). */
int bench_round_body(struct run *R, struct arm *a, struct round *r, float *logits);

/* bench_run_report.c */
/* Arm a's medians over its R->rounds rounds, and its bounds. */
void bench_summarize(struct run *R, struct arm *a);
/* The report: a table, or one JSON object (--json). */
void bench_print_table(struct run *R);
void bench_print_json(struct run *R);
/* Arms run with --profile: where their MoE window went, a line each. */
void bench_print_profile(const struct run *R);
/* The host-planned decode layers' timeline (arms with --profile; all in stream). */
void bench_print_timeline(const struct run *R);
/* Arm a against arm b: the median of the rounds' own tok/s ratios (the arms
 * of a round run back to back, so a drift of the host's speed over the run
 * cancels in each), and their spread in *lo, *hi; 0 when b has no round. */
double bench_round_ratio(const struct run *R, const struct arm *a, const struct arm *b, double *lo,
                         double *hi);

/* bench_attn.c: --ctx-fill's report, attention's share of the step and the
 * KV cache's bytes against the bandwidth of where attention ran */
void bench_attn_table(const struct run *R);
void bench_attn_json(const struct run *R, const struct arm *a);

/* bench_stream.c */
int bench_stream_setup(struct run *R); /* heat snapshot and the arms; 0 or 1 (said) */
/* A stream round: the snapshot restored, a fresh engine, the round, closed. */
int bench_stream_round(struct run *R, struct arm *a, struct round *r, float *logits);
void bench_stream_table(struct run *R);

#endif
