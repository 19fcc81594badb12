/*
 * tests/core/batch_invariance.c — a sequence's tokens and raw logits are
 * byte-identical whether it runs alone or batched with others (core/seq.c,
 * core/forward/forward.c; issue #39 item 4), through the public API on the
 * demo model.
 *
 * 16 sequences with prompts of 2 to 61 tokens (drawn ids), 6 greedy tokens
 * each. Reference: each alone on a --parallel 1 engine through the
 * single-sequence calls (coli_engine_forward: the whole prompt, then a token
 * a step). Then on a --parallel 16 engine through coli_engine_step, all 16
 * together in four schedules: (a) every prompt in chunks of 1 to 7 tokens
 * beside the others' decode tokens, all starting at once; (b) chunks of 5
 * to 23, sequence i joining at step i % 5, at most 40 rows a step (the rest
 * wait); (c) again with the prompts the slots now hold: the prefix cache
 * keeps all but each prompt's last token; (d) each sequence's continuation as
 * one run with every row's logits (speculative decoding's verification),
 * three sequences a step. Every generated token's logits
 * row and id must equal the reference's byte for byte (every other step
 * through coli_engine_step_last: the rows in the engine's buffer). Cases: q8 and q4
 * experts on the CPU, q8 with --gpu sim:1 --dense cpu (the experts on the
 * simulated device, which must have served some) and with the dense part
 * there too (several slots' rows on the device: core/forward/forward_dev.c);
 * and with the simulated device failing mid-run (the dense part moves to
 * the CPU, every slot's cache rebuilt there from its history: the same
 * tokens, the sim's bits being the CPU's);
 * with a GPU, q8 and q4 with the dense part and the experts on GPU 0 (the
 * reference then alone on the GPU: its attention kernels give a query the
 * same bits alone, in a row table or in a graph). The deepseek_v3 fixture
 * (MLA: every slot's latent rows in the pool's blocks on the device) in q8
 * on the CPU, on the simulated device (failing mid-run too) and on GPU 0. Every engine hands its
 * KV blocks out scrambled (COLI_KV_SCRAMBLE): no slot's block table is the
 * identity, so a device reader or writer off the table shows.
 */
#include <stdint.h>

#include "fixture_util.h"
#include "ptx/ptx.h"

#define N_SEQ 16
#define GEN   6
#define CTX   128

struct seq {
	int ids[64], n; /* prompt */
	int out[GEN];
	float *logits; /* [GEN][V] */
};

static struct coli_opts opts(const char *gpu, const char *dense, int parallel)
{
	struct coli_opts o;

	coli_opts_init(&o, NULL, 0);
	o.threads = 2;
	o.ctx = CTX;
	o.parallel = parallel;
	o.kv_scramble = 1; /* no block table is the identity: a wrong address shows */
	snprintf(o.gpu, sizeof(o.gpu), "%s", gpu);
	coli_opts_set(&o, "--dense", dense, NULL, 0);
	coli_opts_set(&o, "--usage", "off", NULL, 0);
	return o;
}

/* The reference: each sequence alone through coli_engine_forward. */
static int alone(const char *path, const char *gpu, const char *dense, struct seq *q, int V)
{
	struct coli_opts o = opts(gpu, dense, 1);
	coli_engine_t *e;
	char err[512];
	int rc = coli_engine_open(path, &o, &e, err, sizeof(err));

	if (rc) {
		printf("open %s: %s\n", path, err);
		return rc;
	}
	for (int s = 0; !rc && s < N_SEQ; s++) {
		coli_engine_reset(e);
		rc = coli_engine_forward(e, q[s].ids, q[s].n, q[s].logits, 0);
		for (int g = 0; !rc && g < GEN; g++) {
			q[s].out[g] = fx_argmax(q[s].logits + (size_t)g * V, V);
			if (g + 1 < GEN)
				rc = coli_engine_forward(e, &q[s].out[g], 1,
				                         q[s].logits + (size_t)(g + 1) * V, 0);
		}
	}
	coli_engine_close(e);
	return rc;
}

/* One schedule of all sequences together; compares with the reference.
 * chunk(s): sequence s's prompt chunk; join(s): its first step; cap: rows
 * a step. Returns mismatches, or -1 on an engine error. */
static int together(coli_engine_t *e, const struct seq *q, int V, int lo, int span, int stagger,
                    int cap, int expect_cached, const char *what)
{
	int slot[N_SEQ], fed[N_SEQ], gen[N_SEQ], next[N_SEQ], bad = 0, left = N_SEQ, cached;
	float *logits = malloc(sizeof(float) * V * N_SEQ);
	struct coli_run runs[N_SEQ];
	int who[N_SEQ];

	for (int s = 0; s < N_SEQ; s++) {
		slot[s] = coli_engine_seq_open(e, q[s].ids, q[s].n, &cached);
		if (slot[s] < 0 || cached != (expect_cached ? q[s].n - 1 : 0)) {
			printf("%s: seq %d: slot %d, %d cached\n", what, s, slot[s], cached);
			free(logits);
			return -1;
		}
		fed[s] = cached, gen[s] = 0;
	}
	for (int step = 0; left > 0; step++) {
		int nr = 0, rows = 0, rc, k = 0;

		for (int s = 0; s < N_SEQ; s++) {
			int n, chunk = lo + (s * 7 + step) % span;

			if (gen[s] == GEN || step < (stagger ? s % stagger : 0))
				continue;
			n = fed[s] < q[s].n ? q[s].n - fed[s] : 1;
			n = n < chunk ? n : chunk;
			if (rows + n > cap)
				continue; /* waits for the next step */
			runs[nr] =
			    (struct coli_run){.slot = slot[s],
			                      .n = n,
			                      .ids = fed[s] < q[s].n ? q[s].ids + fed[s] : &next[s],
			                      .logits = fed[s] >= q[s].n || fed[s] + n == q[s].n};
			who[nr++] = s, rows += n;
		}
		/* every other step the rows in the engine's buffer, as colid takes them */
		const float *out = logits;
		const struct coli_batch b = {.n_runs = nr, .runs = runs};

		rc =
		    step % 2 ? coli_engine_step(e, &b, logits) : coli_engine_step_last(e, &b, &out);
		if (rc) {
			printf("%s: step %d: %s\n", what, step, coli_engine_errmsg(e));
			free(logits);
			return -1;
		}
		for (int r = 0; r < nr; r++) {
			int s = who[r];
			const float *l;

			if (fed[s] < q[s].n)
				fed[s] += runs[r].n;
			if (!runs[r].logits)
				continue;
			l = out + (size_t)k++ * V;
			next[s] = fx_argmax(l, V);
			if (next[s] != q[s].out[gen[s]] ||
			    memcmp(l, q[s].logits + (size_t)gen[s] * V, sizeof(float) * V)) {
				if (bad++ < 4)
					printf("%s: seq %d token %d: id %d vs %d alone, logits "
					       "differ\n",
					       what, s, gen[s], next[s], q[s].out[gen[s]]);
			}
			if (++gen[s] == GEN) {
				coli_engine_seq_close(e, slot[s]);
				left--;
			}
		}
	}
	free(logits);
	return bad;
}

/* Speculative decoding's verification (core/seq.c coli_seq_gen_spec): after
 * its prompt, a sequence's reference continuation out[0 .. GEN - 2] goes as
 * one run whose every row has logits (logits = 2), beside two other
 * sequences' runs in the same step: row j must be the reference's row j + 1,
 * byte for byte. Returns mismatches, or -1 on an engine error. */
static int verify(coli_engine_t *e, const struct seq *q, int V)
{
	float *logits = malloc(sizeof(float) * V * 3 * GEN);
	int bad = 0;

	for (int s0 = 0; bad >= 0 && s0 < N_SEQ; s0 += 3) {
		struct coli_run runs[3];
		int slot[3], n = 0, cached, rc = 0;

		for (int s = s0; s < s0 + 3 && s < N_SEQ; s++, n++) {
			struct coli_run pr = {.logits = 1};

			slot[n] = pr.slot = coli_engine_seq_open(e, q[s].ids, q[s].n, &cached);
			pr.n = q[s].n - cached,
			pr.ids = q[s].ids + cached; /* (what the cache lacks) */
			rc = rc || slot[n] < 0 || pr.n < 1 ||
			     coli_engine_step(e, &(struct coli_batch){.n_runs = 1, .runs = &pr},
			                      logits);
			runs[n] = (struct coli_run){
			    .slot = slot[n], .n = GEN - 1, .ids = q[s].out, .logits = 2};
		}
		rc = rc ||
		     coli_engine_step(e, &(struct coli_batch){.n_runs = n, .runs = runs}, logits);
		if (rc) {
			printf("verify: %s\n", coli_engine_errmsg(e));
			bad = -1;
			break;
		}
		for (int i = 0; i < n; i++) {
			for (int j = 0; j < GEN - 1; j++)
				if (memcmp(logits + (size_t)(i * (GEN - 1) + j) * V,
				           q[s0 + i].logits + (size_t)(j + 1) * V,
				           sizeof(float) * V) &&
				    bad++ < 4)
					printf("verify: seq %d row %d: logits differ from alone's "
					       "token "
					       "%d\n",
					       s0 + i, j, j + 1);
			coli_engine_seq_close(e, slot[i]);
		}
	}
	free(logits);
	return bad;
}

static int run_case(const char *path, const char *gpu, const char *dense, int fail, struct seq *q,
                    int V)
{
	struct coli_opts o = opts(gpu, dense, N_SEQ);
	struct coli_engine_stats st;
	coli_engine_t *e;
	char err[512];
	int bad, b;

	if (alone(path, gpu, dense, q, V))
		return 1;
	o.gpu_fail_after = fail; /* the batched engine's device fails mid-run (-1: never) */
	if (coli_engine_open(path, &o, &e, err, sizeof(err))) {
		printf("open %s: %s\n", path, err);
		return 1;
	}
	if (coli_engine_n_seq(e) != N_SEQ) {
		printf("%d slots, asked %d\n", coli_engine_n_seq(e), N_SEQ);
		coli_engine_close(e);
		return 1;
	}
	bad = together(e, q, V, 1, 7, 0, coli_engine_ubatch(e), 0, "chunks 1-7");
	coli_engine_close(e);
	/* a fresh engine: nothing cached, then everything but the last token */
	if (bad == 0 && !coli_engine_open(path, &o, &e, err, sizeof(err))) {
		bad = together(e, q, V, 5, 19, 5, 40, 0, "chunks 5-23, staggered");
		b = bad ? 0 : together(e, q, V, 1, 3, 0, 40, 1, "prefix cached");
		bad = b < 0 || bad < 0 ? -1 : bad + b;
		coli_engine_stats(e, &st);
		if (!bad && (st.prefix_hits != N_SEQ || st.kv_seqs != N_SEQ || st.kv_seqs_open)) {
			printf("stats: %llu prefix hits, %d slots, %d open\n",
			       (unsigned long long)st.prefix_hits, st.kv_seqs, st.kv_seqs_open);
			bad = 1;
		}
		if (!bad && fail < 0 && strcmp(gpu, "off") && !st.hits[COLI_TIER_VRAM]) {
			printf("%s: no expert ran on the device\n", gpu);
			bad = 1;
		}
		if (!bad && strcmp(dense, "cpu") && st.dense_on_device != (fail < 0)) {
			printf("%s: the dense part %s on the device\n", gpu,
			       fail < 0 ? "is not" : "stayed");
			bad = 1;
		}
		bad = bad ? bad : verify(e, q, V);
		coli_engine_close(e);
	}
	printf("%-28s %-6s dense %-4s%s %s\n", path + strlen(fx_tmpdir()) + 1, gpu, dense,
	       fail >= 0 ? " (fails)" : "", bad ? "MISMATCH" : "identical");
	return bad != 0;
}

int main(void)
{
	const char *why;
	const int gpu = coli_ptx_probe(&why) > 0; /* then the GPU's cases too */
	const struct {
		const char *fixture;
		enum coli_dtype q;
		const char *gpu, *dense;
		int fail; /* COLI_GPU_FAIL_AFTER of the batched engine */
	} cases[] = {{"demo", COLI_DTYPE_Q8_0, "off", "cpu", -1},
	             {"demo", COLI_DTYPE_Q4_0, "off", "cpu", -1},
	             {"demo", COLI_DTYPE_Q8_0, "sim:1", "cpu", -1},
	             {"demo", COLI_DTYPE_Q8_0, "sim:1", "auto", -1},
	             {"demo", COLI_DTYPE_Q8_0, "sim:1", "auto", 600},
	             {"demo", COLI_DTYPE_Q8_0, "0", "auto", -1},
	             {"demo", COLI_DTYPE_Q4_0, "0", "auto", -1},
	             /* MLA: every slot's latent rows in the pool's blocks on the device */
	             {"deepseek_v3", COLI_DTYPE_Q8_0, "off", "cpu", -1},
	             {"deepseek_v3", COLI_DTYPE_Q8_0, "sim:1", "auto", -1},
	             {"deepseek_v3", COLI_DTYPE_Q8_0, "sim:1", "auto", 600},
	             {"deepseek_v3", COLI_DTYPE_Q8_0, "0", "auto", -1}};
	struct seq q[N_SEQ];
	uint32_t r = 12345;
	int fails = 0, V;

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char path[8192];
		coli_engine_t *e;
		struct coli_opts o = opts("off", "cpu", 1);

		if (!strcmp(cases[c].gpu, "0") && !gpu)
			continue;
		char err[512];

		if (fx_convert(cases[c].fixture, cases[c].q, fx_tmpdir(), path, sizeof(path)))
			return 1;
		if (coli_engine_open(path, &o, &e, err, sizeof(err))) {
			printf("open %s: %s\n", path, err);
			return 1;
		}
		V = coli_engine_config(e)->vocab;
		coli_engine_close(e);
		for (int s = 0; s < N_SEQ; s++) {
			q[s].n = 2 + (s * 23) % 60;
			for (int t = 0; t < q[s].n; t++)
				q[s].ids[t] = (int)((r = r * 1103515245u + 12345u) >> 8) % V;
			q[s].logits = malloc(sizeof(float) * V * GEN);
		}
		fails += run_case(path, cases[c].gpu, cases[c].dense, cases[c].fail, q, V);
		for (int s = 0; s < N_SEQ; s++)
			free(q[s].logits);
	}
	return fails ? 1 : 0;
}
