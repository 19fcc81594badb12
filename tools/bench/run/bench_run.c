/*
 * tools/bench/run/bench_run.c — `coli bench decode|prefill -m MODEL [--arms A,B,...]`:
 * tokens per second per arm, next to the bound of DESIGN.md's performance
 * model computed from bandwidths measured in the same run. `coli bench
 * stream` runs through here too with fixed arms (tools/bench/run/bench_stream.c).
 *
 * Arms. An arm is a set of engine options written as the flags without
 * dashes, '+' between several: "ram-gb=0", "ram-gb=2+threads=1". Each arm
 * gets its own engine (options = the command line's, then the arm's), opened
 * once. "default" (or an empty arm) changes nothing.
 *
 * The arms' engines run with --usage off unless --usage FILE is given: the
 * model's usage file is neither read nor written.
 *
 * Rounds. After --warmup rounds, --rounds rounds each run every arm once, in
 * turn (A B A B ...), so drift from clocks or neighbours hits all arms alike.
 * A decode round: reset the KV cache, prefill a fixed prompt of token ids,
 * then time --tokens decode steps (EOS ignored) fed by bench_feed: by default
 * a pseudo-random token sequence, the same for every arm in a round. A
 * synthetic model's greedy output falls into a loop of a few tokens routed to
 * the same few experts, which makes every tier look hotter than real text
 * does; --feed greedy feeds the argmax back instead (coli_engine_forward_argmax,
 * as coli generate at temperature 0). Each random-feed step's logits come
 * back as a sampling client takes them (coli_engine_forward_last, as coli
 * generate: in the engine's buffer, not copied out). A
 * prefill round: reset, time one forward over the prompt. Right after an arm
 * runs, one host-read pass with a pool of that arm's thread count; once per
 * round, one O_DIRECT read of --disk-mib of the model's expert slabs in the
 * slab streamer's pattern (whole random slabs at its queue depth, a fresh
 * draw each round: tools/bench/bench_measure.c). Every figure is a median over the
 * rounds, with min and max as the spread.
 *
 * The medians over the rounds, the bound and the report (table, JSON,
 * --profile, the timeline) are tools/bench/run/bench_run_report.c's.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/coli.h"
#include "cpu/cpu.h"
#include "io/io.h"
#include "tools/bench/bench.h"
#include "tools/tools.h"

#include "tools/bench/run/bench_run.h"

/* --noise: threads that spin on arithmetic until told to stop, unpinned, so
 * the scheduler shares the cores between them and the engine's threads as
 * it would with any other busy process. */
struct noise {
	pthread_t t[256];
	int n, stop;
};

static void *burn(void *arg)
{
	struct noise *z = arg;
	volatile double x = 1.0;

	while (!__atomic_load_n(&z->stop, __ATOMIC_RELAXED))
		for (int i = 0; i < 4096; i++)
			x = x * 1.0000001 + 1e-9;
	return NULL;
}

static int noise_start(struct noise *z, int n)
{
	z->stop = 0;
	for (z->n = 0; z->n < n; z->n++)
		if (pthread_create(&z->t[z->n], NULL, burn, z))
			return tool_err("bench", "cannot start noise thread %d", z->n);
	return 0;
}

static void noise_stop(struct noise *z)
{
	__atomic_store_n(&z->stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < z->n; i++)
		pthread_join(z->t[i], NULL);
	z->n = 0;
}

static void help(FILE *f, const char *cmd)
{
	fprintf(f,
	        "usage: coli bench %s -m MODEL.coli [--arms A,B,...] [--tokens N] [--prompt N]\n"
	        "                  [--rounds R] [--warmup W] [--disk-mib M] [--read-mib M]\n"
	        "                  [--qd Q] [--json] [engine options]\n"
	        "  --arms LIST     engine option sets, comma separated; options of one arm\n"
	        "                  joined by '+' (e.g. ram-gb=0,ram-gb=2,ram-gb=-1+threads=1);\n"
	        "                  default: one arm with the command line's options\n"
	        "  --tokens N      decode steps timed per round (default 16)\n"
	        "  --prompt N      prompt length in tokens (default 8 decode, 64 prefill)\n"
	        "  --ctx-fill N    decode: time the steps after N cached tokens, prefilled once\n"
	        "                  per arm (the first round) and rewound to N every round;\n"
	        "                  prints attention's share and KV bytes read per token\n"
	        "  --rounds R      interleaved rounds after warm-up (default 5)\n"
	        "  --warmup W      untimed rounds first (default 1)\n"
	        "  --disk-mib M    random expert slabs read per round for the disk bandwidth, as\n"
	        "                  the streamer reads them (default 256; 0: skip the disk term)\n"
	        "  --read-mib M    buffer of the host read measurement (default 256)\n"
	        "  --qd Q          slab reads in flight for the disk measurement (default %d:\n"
	        "                  the streamer's queue depth)\n"
	        "  --feed F        what decode steps feed: random (default: a fixed\n"
	        "                  pseudo-random sequence, the same in every arm) or greedy\n"
	        "                  (the argmax; a synthetic model then loops on a few experts)\n"
	        "  --seqs N        decode: N sequences (--parallel N slots) decoding together,\n"
	        "                  a step one token of each through coli_engine_step; figures\n"
	        "                  per token of all (default 1: coli_engine_forward)\n"
	        "  --noise N       N threads that each burn a core through every round (a\n"
	        "                  busy host: how the CPU rows bear it; default 0)\n"
	        "  --json          one JSON object on stdout instead of the table\n",
	        cmd, bench_stream_qd());
	if (!strcmp(cmd, "stream"))
		fprintf(
		    f, "stream: arms sync, overlap, overlap+stream, stream-only, cpu-only (--arms\n"
		       "  picks some); each round on a fresh engine from the same heat\n"
		       "  --vram-frac F   VRAM expert budget as a fraction of the expert bytes\n"
		       "                  (default 0.25); streaming arms add their staging slots\n"
		       "  --heat-tokens N decode tokens (fed as --feed says) that make the heat\n"
		       "                  when the model has no usage file (default 128)\n");
	fputc('\n', f);
	coli_opts_help(f);
}

/* "ram-gb=2+threads=1" -> options on top of base. */
static int arm_parse(struct arm *a, const char *spec, const struct coli_opts *base)
{
	char buf[128], *save = NULL, err[256];

	snprintf(a->name, sizeof(a->name), "%s", *spec ? spec : "default");
	a->opts = *base;
	if (!*spec || !strcmp(spec, "default"))
		return 0;
	snprintf(buf, sizeof(buf), "%s", spec);
	for (char *tok = strtok_r(buf, "+", &save); tok; tok = strtok_r(NULL, "+", &save)) {
		char flag[160], *argv[1] = {flag};
		int i = 0, rc;

		snprintf(flag, sizeof(flag), "--%s", tok);
		rc = coli_opts_parse_arg(&a->opts, 1, argv, &i, err, sizeof(err));
		if (rc <= 0)
			return tool_err("bench", "arm '%s': %s", spec,
			                rc ? err : "not an engine option (see --help)");
	}
	return 0;
}

/* Dense bytes per forward call and the geometry bench needs, from the file. */
static int model_bytes(struct run *R)
{
	coli_container_t *c;
	const struct coli_model_config *cfg = &R->cfg;
	int rc = coli_io_container_open(R->model, &c);

	if (rc)
		return tool_err("bench", "%s", coli_io_errmsg());
	for (int i = 0; i < coli_io_container_n_tensors(c); i++) {
		const struct coli_tensor_info *t = coli_io_container_tensor(c, i);

		if (!strcmp(t->name, "tok_embd")) {
			R->embd_row_bytes = t->bytes / t->shape[0];
			if (!cfg->tie_embeddings)
				continue; /* only the rows of the tokens */
		}
		R->dense_call_bytes += t->bytes;
	}
	R->kv_row_bytes =
	    cfg->kv_lora /* MLA: one latent row (core/forward/kv.c) */
	        ? (uint64_t)cfg->n_layers * (cfg->kv_lora + cfg->rope_dim) * sizeof(float)
	        : 2ull * cfg->n_layers * cfg->n_kv_heads * cfg->head_dim * sizeof(float);
	R->n_moe_layers = coli_io_container_n_expert_layers(c);
	if (R->n_moe_layers) {
		const struct coli_expert_layer *l0 = coli_io_container_expert_layer(c, 0);
		const struct coli_expert_layer *ln =
		    coli_io_container_expert_layer(c, R->n_moe_layers - 1);

		R->slab_bytes = l0->slab_bytes;
		R->expert_off = l0->offset;
		R->expert_bytes = ln->offset + ln->slab_bytes * ln->n_experts - l0->offset;
	}
	for (int i = 0; i < R->n_moe_layers; i++) {
		const struct coli_expert_layer *l = coli_io_container_expert_layer(c, i);

		R->expert_total_bytes += (double)l->slab_bytes * l->n_experts;
	}
	coli_io_container_close(c);
	return 0;
}

int bench_feed(const struct run *R, const int *prompt, int i, const float *logits)
{
	uint64_t h =
	    (uint64_t)prompt[0] * 0x9e3779b97f4a7c15ull + (uint64_t)(i + 1) * 0xbf58476d1ce4e5b9ull;

	if (R->feed_greedy)
		return coli_argmax(logits, R->cfg.vocab);
	h ^= h >> 31;
	return (int)(h % (uint64_t)R->cfg.vocab);
}

/* --seqs: sequence s's prompt (R->ids, its first id moved by s: no prefix
 * shared) into its own slot, prefilled untimed in --ubatch chunks. */
static int seqs_open(struct run *R, struct arm *a, int *slot, int *prompt, float *logits)
{
	int rc = 0, ub = coli_engine_ubatch(a->e);

	for (int s = 0; !rc && s < R->seqs; s++) {
		int *p = prompt + (size_t)s * R->prompt, fed;

		memcpy(p, R->ids, sizeof(int) * R->prompt);
		p[0] = (p[0] + s) % R->cfg.vocab;
		slot[s] = rc = coli_engine_seq_open(a->e, p, R->prompt, &fed);
		for (; rc >= 0 && fed < R->prompt; fed += ub) {
			const struct coli_run run = {.slot = slot[s],
			                             .n = R->prompt - fed < ub ? R->prompt - fed
			                                                       : ub,
			                             .ids = p + fed,
			                             .logits = 1};

			rc = coli_engine_step(a->e, &(struct coli_batch){.n_runs = 1, .runs = &run},
			                      logits + (size_t)s * R->cfg.vocab);
		}
		rc = rc < 0 ? rc : 0;
	}
	return rc;
}

/* --seqs: R->tokens steps of one token of every sequence (each fed as
 * bench_feed feeds one sequence), then the slots closed. */
static int seqs_steps(struct run *R, struct arm *a, const int *slot, const int *prompt,
                      float *logits)
{
	struct coli_run run[COLI_MAX_SEQ];
	const float *step_logits = NULL;
	int id[COLI_MAX_SEQ], rc = 0;

	for (int s = 0; s < R->seqs; s++)
		id[s] = bench_feed(R, prompt + (size_t)s * R->prompt, 0,
		                   logits + (size_t)s * R->cfg.vocab); /* its prefill's */
	for (int i = 0; i < R->tokens && !rc; i++) {
		for (int s = 0; s < R->seqs; s++)
			run[s] =
			    (struct coli_run){.slot = slot[s], .n = 1, .ids = &id[s], .logits = 1};
		/* as colid steps: the rows in the engine's buffer */
		rc = coli_engine_step_last(
		    a->e, &(struct coli_batch){.n_runs = R->seqs, .runs = run}, &step_logits);
		for (int s = 0; s < R->seqs && !rc; s++)
			id[s] = bench_feed(R, prompt + (size_t)s * R->prompt, i + 1,
			                   step_logits + (size_t)s * R->cfg.vocab);
	}
	for (int s = 0; s < R->seqs; s++)
		coli_engine_seq_close(a->e, slot[s]);
	return rc;
}

/* One timed round of arm a; fills *r. */
int bench_round_body(struct run *R, struct arm *a, struct round *r, float *logits)
{
	struct coli_engine_stats s0, s1;
	int n_tok, rc, id, next = 0, ub;
	double t0, t1, calls;

	int slot[COLI_MAX_SEQ], *prompt = NULL, many = R->seqs > 1 && !R->prefill;
	float *lg = NULL; /* --seqs: a logits row a sequence */

	if (many) {
		prompt = malloc(sizeof(int) * (size_t)R->seqs * R->prompt);
		lg = malloc(sizeof(float) * (size_t)R->seqs * R->cfg.vocab);
		rc = !prompt || !lg ? -ENOMEM : seqs_open(R, a, slot, prompt, lg);
		if (rc) {
			free(prompt), free(lg);
			return rc;
		}
	} else if (R->ctx_fill && a->filled) { /* the fill stays: back to its end */
		rc = coli_engine_rewind(a->e, R->prompt);
		next = a->fill_next;
		if (rc)
			return rc;
	} else if (!R->prefill) {
		coli_engine_reset(a->e);
		/* a greedy feed asks the engine for the argmax, as coli generate does */
		rc = R->feed_greedy ? coli_engine_forward_argmax(a->e, R->ids, R->prompt, &next)
		                    : coli_engine_forward(a->e, R->ids, R->prompt, logits, 0);
		if (rc)
			return rc;
		a->filled = R->ctx_fill > 0, a->fill_next = next;
	} else {
		coli_engine_reset(a->e);
	}
	/* the warm-up reads at open (the usage file's hottest experts, or the
	 * whole model when it fits the RAM budget) land before the clock starts */
	coli_engine_settle(a->e);
	coli_engine_stats(a->e, &s0);
	t0 = bench_now_s();
	if (R->prefill) {
		rc = coli_engine_forward(a->e, R->ids, R->prompt, logits, 0);
		n_tok = R->prompt;
	} else if (many) {
		rc = seqs_steps(R, a, slot, prompt, lg);
		n_tok = R->tokens * R->seqs;
		free(prompt), free(lg);
	} else {
		const float *last = logits;

		rc = 0;
		/* each step's logits delivered as a sampling client takes them (coli
		 * generate): in the engine's buffer, not copied out */
		for (int i = 0; i < R->tokens && !rc; i++) {
			id = R->feed_greedy ? next : bench_feed(R, R->ids, i, last);
			rc = R->feed_greedy ? coli_engine_forward_argmax(a->e, &id, 1, &next)
			                    : coli_engine_forward_last(a->e, &id, 1, &last);
		}
		n_tok = R->tokens;
	}
	t1 = bench_now_s();
	if (rc)
		return rc;
	coli_engine_stats(a->e, &s1);
	r->tok_s = n_tok / (t1 - t0);
	for (int x = 0; x < COLI_TIER_N; x++)
		r->tier_b[x] = (double)(s1.bytes[x] - s0.bytes[x]) / n_tok;
	r->uses = (double)(s1.expert_uses - s0.expert_uses) / n_tok;
	r->hits = 0;
	for (int x = 0; x < COLI_TIER_N; x++)
		r->hits += (double)(s1.hits[x] - s0.hits[x]) / n_tok;
	/* dense: every tensor once per call (--ubatch tokens per call at most),
	 * embedding rows per token, and the KV positions attention reads */
	ub = coli_engine_ubatch(a->e);
	calls = R->prefill ? (R->prompt + ub - 1) / ub : R->tokens;
	double kv = 0;
	/* a position's K and V as the engine keeps them (--kv-type) */
	const double kvrow = s1.kv_token_bytes ? (double)s1.kv_token_bytes : R->kv_row_bytes;

	if (R->prefill) /* the call's own K/V: read at least once */
		kv = (double)R->prompt * kvrow;
	else /* step p reads K and V of positions 0..p, of each sequence */
		for (int p = R->prompt; p < R->prompt + R->tokens; p++)
			kv += (double)(p + 1) * kvrow * (many ? R->seqs : 1);
	r->dense_b = (calls * R->dense_call_bytes + kv) / n_tok + R->embd_row_bytes;
	r->kv_b = kv / n_tok;
	r->stream_b = (double)(s1.stream_bytes - s0.stream_bytes) / n_tok;
	r->stream_copy_b = (double)(s1.stream_copy_bytes - s0.stream_copy_bytes) / n_tok;
	r->dense_dev = s1.dense_on_device;
	r->phase_ms[0] = (s1.attention_s - s0.attention_s) * 1e3 / n_tok;
	r->phase_ms[1] = (s1.moe_s - s0.moe_s) * 1e3 / n_tok;
	r->phase_ms[2] = (s1.dense_mlp_s - s0.dense_mlp_s) * 1e3 / n_tok;
	r->phase_ms[3] = (s1.lm_head_s - s0.lm_head_s) * 1e3 / n_tok;
	r->phase_ms[4] = (s1.forward_s - s0.forward_s) * 1e3 / n_tok - r->phase_ms[0] -
	                 r->phase_ms[1] - r->phase_ms[2] - r->phase_ms[3];
	r->win_ms[0] = (s1.moe_issue_s - s0.moe_issue_s) * 1e3 / n_tok;
	r->win_ms[1] = (s1.moe_cpu_s - s0.moe_cpu_s) * 1e3 / n_tok;
	r->win_ms[2] = (s1.moe_take_s - s0.moe_take_s) * 1e3 / n_tok;
	r->win_ms[3] = (s1.attn_core_s - s0.attn_core_s) * 1e3 / n_tok;
	{
		const double d[N_PROF] = {
		    s1.moe_plan_s - s0.moe_plan_s,         s1.moe_slabs_s - s0.moe_slabs_s,
		    s1.moe_devissue_s - s0.moe_devissue_s, s1.lookahead_s - s0.lookahead_s,
		    s1.moe_beside_s - s0.moe_beside_s,     s1.dev_busy_s - s0.dev_busy_s};

		for (int p = 0; p < N_PROF; p++)
			r->prof_ms[p] = d[p] * 1e3 / n_tok;
	}
	r->stream_gbs = (double)(s1.stream_copy_bytes - s0.stream_copy_bytes) / (t1 - t0) / 1e9;
	for (int k = 0; k < COLI_TL_CLASSES; k++)
		for (int f = 0; f < COLI_TL_FIELDS; f++)
			r->layer[k][f] = s1.moe_layer[k][f] - s0.moe_layer[k][f];
	r->reloads = (double)(s1.reloads - s0.reloads);
	r->reload_b = (double)(s1.reload_bytes - s0.reload_bytes);
	return 0;
}

/* ---- main ---- */

#define P "coli bench"

static int prompt_given(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--prompt"))
			return 1;
	return 0;
}

static int parse(struct run *R, int argc, char **argv, const char **arms)
{
	struct tool_engine_args ea;

	if (tool_engine_args_init(&ea, "coli bench"))
		return 2;
	for (int i = 1; i < argc;) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int rc = tool_engine_arg(&ea, argc, argv, &i), bad = 0;

		if (rc < 0)
			return 2;
		if (rc)
			continue;
		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			help(stdout, argv[0]);
			return -1;
		}
		if (!strcmp(o, "--json")) {
			R->json = 1;
			i++;
			continue;
		}
		if (!v)
			return tool_err("bench", "%s needs a value (see --help)", o), 2;
		if (!strcmp(o, "--arms"))
			*arms = v;
		else if (!strcmp(o, "--tokens"))
			bad = tool_int(P, o, v, 1, 1 << 20, &R->tokens);
		else if (!strcmp(o, "--prompt"))
			bad = tool_int(P, o, v, 1, 1 << 20, &R->prompt);
		else if (!R->prefill && !R->stream && !strcmp(o, "--ctx-fill"))
			bad = tool_int(P, o, v, 1, 1 << 24, &R->ctx_fill);
		else if (!strcmp(o, "--rounds"))
			bad = tool_int(P, o, v, 1, MAX_ROUNDS, &R->rounds);
		else if (!strcmp(o, "--warmup"))
			bad = tool_int(P, o, v, 0, 1 << 20, &R->warmup);
		else if (!strcmp(o, "--disk-mib"))
			bad = tool_int(P, o, v, 0, 1 << 24, &R->disk_mib);
		else if (!strcmp(o, "--read-mib"))
			bad = tool_int(P, o, v, 1, 1 << 24, &R->read_mib);
		else if (!strcmp(o, "--qd"))
			bad = tool_int(P, o, v, 1, 4096, &R->qd);
		else if (!R->prefill && !R->stream && !strcmp(o, "--seqs"))
			bad = tool_int(P, o, v, 1, COLI_MAX_SEQ, &R->seqs);
		else if (!strcmp(o, "--noise"))
			bad = tool_int(P, o, v, 0, 256, &R->noise);
		else if (!strcmp(o, "--feed") && (!strcmp(v, "greedy") || !strcmp(v, "random")))
			R->feed_greedy = !strcmp(v, "greedy");
		else if (R->stream && !strcmp(o, "--vram-frac"))
			bad = tool_double(P, o, v, 0, 1, &R->vram_frac);
		else if (R->stream && !strcmp(o, "--heat-tokens"))
			bad = tool_int(P, o, v, 0, 1 << 24, &R->heat_tokens);
		else
			return tool_err("bench", "unknown option '%s' (see --help)", o), 2;
		if (bad)
			return 2;
		i += 2;
	}
	if (R->ctx_fill && prompt_given(argc, argv))
		return tool_err("bench",
		                "--ctx-fill N is the prompt: give it or --prompt, not both"),
		       2;
	if (R->ctx_fill)
		R->prompt = R->ctx_fill;
	R->model = ea.model;
	if (!R->model) {
		help(stderr, argv[0]);
		return 2;
	}
	if (R->tokens < 1 || R->prompt < 1 || R->rounds < 1 || R->rounds > MAX_ROUNDS ||
	    R->warmup < 0 || R->disk_mib < 0 || R->read_mib < 1 || R->qd < 1)
		return tool_err("bench",
		                "--tokens, --prompt, --rounds (<= %d), --read-mib and --qd "
		                "must be positive",
		                MAX_ROUNDS),
		       2;
	if (R->stream) { /* arms need the model's geometry: stream_setup */
		if (!(R->vram_frac >= 0 && R->vram_frac <= 1) || R->heat_tokens < 0)
			return tool_err("bench",
			                "--vram-frac must be in [0, 1], --heat-tokens >= 0"),
			       2;
		R->arm_list = *arms;
		R->base = ea.opts;
		return 0;
	}
	/* arms: each on top of the command line's options. A benchmark leaves the
	 * model's usage file alone: its rounds replay the same token sequences,
	 * so heat they wrote would place exactly the experts the next bench
	 * uses (--usage FILE places by a heat, and updates FILE) */
	char list[1024], *save = NULL;

	if (!ea.opts.usage[0])
		ea.opts.usage_off = 1;

	snprintf(list, sizeof(list), "%s", *arms ? *arms : "default");
	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (R->n_arms == MAX_ARMS)
			return tool_err("bench", "at most %d arms", MAX_ARMS), 2;
		if (arm_parse(&R->arm[R->n_arms++], t, &ea.opts))
			return 2;
	}
	return 0;
}

static int open_arms(struct run *R)
{
	char err[512];

	for (int i = 0; i < R->n_arms; i++) {
		struct arm *a = &R->arm[i];
		int need = R->prompt + (R->prefill ? 0 : R->tokens) + 1, rc;

		if (a->opts.ctx <= 0) {
			a->opts.ctx = need; /* the KV cache the bench needs, not the model's max */
			a->opts.ctx_override = 1; /* speed, not quality: past max_ctx is fine */
		}
		if (R->seqs > 1) /* a slot a sequence */
			a->opts.parallel = R->seqs;
		rc = coli_engine_open(R->model, &a->opts, &a->e, err, sizeof(err));
		if (rc)
			return tool_err("bench", "arm '%s': %s", a->name, err);
		if (coli_engine_ctx(a->e) < need)
			return tool_err("bench", "arm '%s': context %d < %d tokens needed", a->name,
			                coli_engine_ctx(a->e), need);
		a->threads =
		    a->opts.threads > 0 ? a->opts.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
		if (coli_cpu_pool_create(a->threads, &a->pool))
			return tool_err("bench", "cannot start %d threads", a->threads);
	}
	R->cfg = *coli_engine_config(R->arm[0].e);
	return 0;
}

int bench_run_main(int argc, char **argv)
{
	struct run *R = calloc(1, sizeof(*R));
	struct bench_readbw rb = {0};
	static struct noise noise;
	const char *arms = NULL;
	float *logits = NULL;
	int rc;

	if (!R)
		return tool_err("bench", "out of memory");
	R->prefill = !strcmp(argv[0], "prefill");
	R->stream = !strcmp(argv[0], "stream");
	R->vram_frac = 0.25, R->heat_tokens = 128;
	R->tokens = 16, R->rounds = 5, R->warmup = 1, R->disk_mib = 256, R->read_mib = 256;
	R->qd = bench_stream_qd();
	R->prompt = R->prefill ? 64 : 8;
	rc = parse(R, argc, argv, &arms);
	if (rc)
		goto out;
	rc = R->stream ? model_bytes(R) || bench_stream_setup(R) : open_arms(R) || model_bytes(R);
	if (rc)
		goto out;
	if (R->disk_mib && R->expert_bytes) {
		if (bench_slabs_open(R->model, &R->slabs)) {
			rc = tool_err("bench", "cannot list the slabs of %s", R->model);
			goto out;
		}
		R->n_dext = ((uint64_t)R->disk_mib << 20) / R->slabs.slab_bytes;
		R->n_dext = R->n_dext ? R->n_dext : 1;
		R->dext = malloc(sizeof(*R->dext) * R->n_dext);
	}
	R->ids = malloc(sizeof(int) * (size_t)R->prompt);
	logits = malloc(sizeof(float) * (size_t)R->cfg.vocab);
	if (!R->ids || !logits || (R->n_dext && !R->dext) ||
	    bench_readbw_init(&rb, (size_t)R->read_mib << 20)) {
		rc = tool_err("bench", "out of memory");
		goto out;
	}
	{ /* the host memory's cap: stream, with a real GPU */
		int cap = R->stream && strncmp(R->base.gpu, "sim", 3);

		R->have_gpu = bench_gpu_bw(&R->gpu, cap ? &rb : NULL, cap ? R->arm[0].pool : NULL,
		                           &R->dram_cores) == 0;
	}
	rc = noise_start(&noise, R->noise);
	for (int k = -R->warmup; !rc && k < R->rounds; k++) {
		/* a new prompt each round (every arm gets the same one in a round), so
		 * a partial --ram-gb is not simply warm from the round before; the
		 * --ctx-fill prompt is written once and stays in the cache */
		for (int i = 0; i < R->prompt && !(R->ctx_fill && k > -R->warmup); i++)
			R->ids[i] =
			    (int)((1 + 7919ull * (uint64_t)(i + (k + R->warmup) * R->prompt)) %
			          (uint64_t)R->cfg.vocab);
		for (int i = 0; i < R->n_arms; i++) {
			struct arm *a = &R->arm[i];
			struct round tmp, *r = k >= 0 ? &a->r[k] : &tmp;

			/* the kernels are process-wide: each arm's --cpu-isa (checked
			 * when its engine opened) before its round */
			coli_cpu_isa_force(a->opts.cpu_isa == COLI_OPT_CPU_ISA_AUTO
			                       ? coli_cpu_isa_best()
			                       : (enum coli_cpu_isa)(a->opts.cpu_isa - 1));
			rc = R->stream ? bench_stream_round(R, a, r, logits)
			               : bench_round_body(R, a, r, logits);
			if (rc) {
				rc = tool_err("bench", "arm '%s': forward failed: %s", a->name,
				              strerror(-rc));
				goto out;
			}
			r->host_gbs = (double)rb.words * 8 / bench_readbw_pass(&rb, a->pool) / 1e9;
		}
		if (k >= 0 && R->dext) {
			R->n_dext =
			    bench_slabs_draw(&R->slabs, (uint64_t)k + 1, R->n_dext, R->dext, NULL);
			rc = bench_read_slabs(&R->slabs, R->dext, R->n_dext, R->qd, 0, &R->disk);
			if (rc) {
				rc = tool_err("bench", "disk read of %s failed", R->model);
				goto out;
			}
			R->disk_gbs[k] = R->disk.gbs;
		}
	}
	noise_stop(&noise);
	if (rc)
		goto out;
	if (R->dext)
		R->disk_med = bench_median(R->disk_gbs, R->rounds);
	else
		R->disk_mib = 0;
	for (int i = 0; i < R->n_arms; i++)
		bench_summarize(R, &R->arm[i]);
	if (R->json)
		bench_print_json(R);
	else if (R->stream)
		bench_stream_table(R);
	else
		bench_print_table(R);
out:
	noise_stop(&noise); /* (a round failed with it running) */
	if (rc < 0)         /* --help */
		rc = 0;
	for (int i = 0; i < R->n_arms; i++) {
		if (R->arm[i].e)
			coli_engine_close(R->arm[i].e);
		if (R->arm[i].pool)
			coli_cpu_pool_destroy(R->arm[i].pool);
	}
	if (R->stream && R->usage_cur[0]) {
		unlink(R->usage_cur);
		unlink(R->usage_snap);
	}
	bench_readbw_free(&rb);
	bench_slabs_close(&R->slabs);
	free(R->dext);
	free(logits);
	free(R->ids);
	free(R);
	return rc;
}
