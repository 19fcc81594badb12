/*
 * tests/core/prefix_copy.c — a prompt's cached prefix comes from any slot,
 * a running one too (core/seq.c coli_engine_seq_open; issue #39 item 3):
 * the rows copied from another slot give the tokens and raw logits a
 * prefill from empty gives, byte for byte, and only rows below the source's
 * position are taken.
 *
 * P: 80 drawn ids; A's prompt P+x, B's P+y, S's P[0, 40)+w (6 more ids
 * each, parting from the others at their first). Reference: B and S each
 * alone on a --parallel 1 engine (coli_engine_forward, 6 greedy tokens).
 * On a --parallel 4 engine, stepped in chunks of 17 prompt tokens:
 *   running  A prefilled past P and decoding; S opens: cached 40, copied
 *            from A; S decodes beside A and closes; B opens: cached 80, the
 *            slot S left (40 of its own) plus 40 copied from A; B decodes
 *            beside A. prefix_copied 80, prefix_saved 120.
 *   rewound  A past P, rewound to 50: B opens with cached 50 (not 80: rows
 *            above A's position are stale) and decodes while A prefills 6
 *            other ids over its rows 50-55.
 *   short    A past P, rewound to 20: B opens with cached 0 (20 is below
 *            COLI_SEQ_COPY_MIN) and prefills all of its prompt.
 * Each of S's and B's generated tokens and logits rows must equal the
 * reference's. Cases: q8 experts on the CPU (KV rows bf16; and q8 rows:
 * any type is copied whole), the deepseek_v3 fixture on the CPU (MLA's
 * latent rows, no V cache), --gpu sim:1 with the dense part there (the
 * copy on the device), sim:2 with --split layers (each device copies its
 * layers), sim:1 failing after 800 ops (in the running scenario while B
 * decodes: the dense part moves to the CPU and every slot, B's with its
 * copied prefix, is rebuilt from its history), and with a GPU, q8 and q4 with the dense part on GPU
 * 0 (skipped without one; the reference then alone on the GPU). Every
 * engine hands its KV blocks out scrambled (COLI_KV_SCRAMBLE): the copy
 * goes block by block between tables unlike the identity.
 */
#include <stdint.h>

#include "ptx/ptx.h"
#include "seq_test.h"

#define NP  80 /* shared prefix */
#define NS  40 /* S's share of it */
#define NX  6  /* each prompt's own ending */
#define GEN SQ_GEN

static int open_engine(const char *path, const struct sq_cfg *c, int parallel, coli_engine_t **e)
{
	struct coli_opts o = sq_opts(c, parallel);
	char err[512];

	if (coli_engine_open(path, &o, e, err, sizeof(err))) {
		printf("open %s: %s\n", path, err);
		return 1;
	}
	return 0;
}

static int check_stats(coli_engine_t *e, uint64_t copied, uint64_t saved, const char *what)
{
	struct coli_engine_stats st;

	coli_engine_stats(e, &st);
	if (st.prefix_copied == copied && st.prefix_saved == saved)
		return 0;
	printf("%s: prefix_copied %llu, prefix_saved %llu; want %llu, %llu\n", what,
	       (unsigned long long)st.prefix_copied, (unsigned long long)st.prefix_saved,
	       (unsigned long long)copied, (unsigned long long)saved);
	return 1;
}

/* The three scenarios of the file's essay on fresh engines; the number of
 * failures. pa, pb, ps: A's, B's and S's prompts; rb, rs: B's and S's
 * references. */
static int scenarios(const char *path, const struct sq_cfg *c, const int *pa, const int *pb,
                     const int *ps, const struct sq_ref *rb, const struct sq_ref *rs, int V)
{
	float *logits = malloc(sizeof(float) * V * 4);
	int a2[NP + NX], bad = 0, b;
	struct sq q[3];
	coli_engine_t *e;

	/* running: S from A, then B from S's slot and A */
	if (open_engine(path, c, 4, &e))
		return free(logits), 1;
	b = sq_open(e, &q[0], pa, NP + NX, 0, NULL, "running: A");
	q[0].want = 2, q[0].more = 1; /* A past P, then decoding beside the others */
	b = b ? b : sq_steps(e, q, 1, V, logits, 0, "running: A") != 0;
	b = b ? b : sq_open(e, &q[1], ps, NS + NX, NS, NULL, "running: S");
	if (!b) {
		q[1].ref = rs;
		b = sq_steps(e, q, 2, V, logits, 0, "running: S beside A") != 0;
		coli_engine_seq_close(e, q[1].slot);
	}
	b = b ? b : sq_open(e, &q[1], pb, NP + NX, NP, NULL, "running: B");
	if (!b) {
		q[1].ref = rb;
		b = sq_steps(e, q, 2, V, logits, 0, "running: B beside A") != 0;
	}
	b = b ? b : check_stats(e, NP, NS + NP, "running");
	if (!b && c->fail) { /* the device failed beside B: its slot rebuilt from the copy */
		struct coli_engine_stats st;

		coli_engine_stats(e, &st);
		if (st.dense_on_device) {
			printf("running: the device did not fail (COLI_GPU_FAIL_AFTER %d)\n",
			       c->fail);
			b = 1;
		}
	}
	coli_engine_close(e);
	bad += b;

	/* rewound: A at 50, then writing other ids over its rows 50.. beside B */
	if (open_engine(path, c, 4, &e))
		return free(logits), bad + 1;
	b = sq_open(e, &q[0], pa, NP + NX, 0, NULL, "rewound: A");
	q[0].want = 2;
	b = b ? b : sq_steps(e, q, 1, V, logits, 0, "rewound: A") != 0;
	b = b ? b : coli_engine_seq_rewind(e, q[0].slot, 50) != 0;
	b = b ? b : sq_open(e, &q[1], pb, NP + NX, 50, NULL, "rewound: B");
	if (!b) {
		memcpy(a2, pa, sizeof(int) * 50);
		for (int i = 50; i < 56; i++)
			a2[i] = (pa[i] + 1 + i) % V; /* not P's */
		q[0] = (struct sq){.ids = a2, .n = 56, .slot = q[0].slot, .fed = 50, .more = 1};
		q[1].ref = rb;
		b = sq_steps(e, q, 2, V, logits, 0, "rewound: B beside A") != 0;
	}
	b = b ? b : check_stats(e, 50, 50, "rewound");
	coli_engine_close(e);
	bad += b;

	/* short: A at 20, below the threshold: B prefills everything */
	if (open_engine(path, c, 4, &e))
		return free(logits), bad + 1;
	b = sq_open(e, &q[0], pa, NP + NX, 0, NULL, "short: A");
	q[0].want = 2;
	b = b ? b : sq_steps(e, q, 1, V, logits, 0, "short: A") != 0;
	b = b ? b : coli_engine_seq_rewind(e, q[0].slot, 20) != 0;
	b = b ? b : sq_open(e, &q[1], pb, NP + NX, 0, NULL, "short: B");
	if (!b) {
		q[0].want = 0, q[0].more = 1;
		q[1].ref = rb;
		b = sq_steps(e, q, 2, V, logits, 0, "short: B beside A") != 0;
	}
	b = b ? b : check_stats(e, 0, 0, "short");
	coli_engine_close(e);
	bad += b;
	free(logits);
	return bad;
}

static int run_case(const struct sq_cfg *c)
{
	int pa[NP + NX], pb[NP + NX], ps[NS + NX], V, bad = 1;
	struct sq_ref rb = {0}, rs = {0};
	char path[8192];
	uint32_t r = 4242;
	coli_engine_t *e;

	if (fx_convert(c->fixture, c->q, fx_tmpdir(), path, sizeof(path)))
		return 1;
	if (open_engine(path, c, 1, &e))
		return 1;
	V = coli_engine_config(e)->vocab;
	for (int t = 0; t < NP + NX; t++)
		pa[t] = (int)((r = r * 1103515245u + 12345u) >> 8) % V;
	memcpy(pb, pa, sizeof(pb));
	memcpy(ps, pa, sizeof(int) * NS);
	for (int t = 0; t < NX; t++) { /* each parts from the others at its first */
		pb[NP + t] = (pa[NP + t] + 1 + t) % V;
		ps[NS + t] = (pa[NS + t] + 2 + t) % V;
	}
	rb.logits = malloc(sizeof(float) * V * GEN);
	rs.logits = malloc(sizeof(float) * V * GEN);
	if (rb.logits && rs.logits && !sq_alone(e, pb, NP + NX, &rb, V) &&
	    !sq_alone(e, ps, NS + NX, &rs, V)) {
		struct coli_engine_stats st;

		coli_engine_stats(e, &st);
		coli_engine_close(e);
		e = NULL;
		if (strcmp(c->dense, "cpu") && strcmp(c->gpu, "off") && !st.dense_on_device)
			printf("%s: the dense part is not on the device\n", c->gpu);
		else
			bad = scenarios(path, c, pa, pb, ps, &rb, &rs, V);
	}
	if (e)
		coli_engine_close(e);
	printf("%-14s %-4s %-6s dense %-4s split %-6s kv %-4s%s %s\n", c->fixture,
	       coli_dtype_name(c->q), c->gpu, c->dense, c->split, c->kv, c->fail ? " (fails)" : "",
	       bad ? "MISMATCH" : "identical");
	free(rb.logits), free(rs.logits);
	return bad != 0;
}

int main(void)
{
	const char *why;
	const int gpu = coli_ptx_probe(&why) > 0; /* then the GPU's cases too */
	const struct sq_cfg cases[] = {
	    {"demo", COLI_DTYPE_Q8_0, "off", "cpu", "auto", "bf16", 0},
	    {"demo", COLI_DTYPE_Q8_0, "off", "cpu", "auto", "q8", 0},
	    {"deepseek_v3", COLI_DTYPE_Q8_0, "off", "cpu", "auto", "bf16", 0},
	    {"demo", COLI_DTYPE_Q8_0, "sim:1", "auto", "auto", "bf16", 0},
	    {"demo", COLI_DTYPE_Q8_0, "sim:2", "auto", "layers", "bf16", 0},
	    {"demo", COLI_DTYPE_Q8_0, "sim:1", "auto", "auto", "bf16", 800},
	    {"demo", COLI_DTYPE_Q8_0, "0", "auto", "auto", "bf16", 0},
	    {"demo", COLI_DTYPE_Q4_0, "0", "auto", "auto", "bf16", 0},
	};
	int fails = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!strcmp(cases[i].gpu, "0") && !gpu) {
			printf("%-14s %-4s gpu 0: skipped (%s)\n", cases[i].fixture,
			       coli_dtype_name(cases[i].q), why ? why : "no GPU");
			continue;
		}
		fails += run_case(&cases[i]);
	}
	return fails ? 1 : 0;
}
