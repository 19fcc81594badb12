/*
 * tests/core/prefix_cache.c — the prefix cache (core/forward/kv_pool.c;
 * issue #39 item 3): a prompt's first full blocks of 32 positions come from
 * the index, whoever wrote them (a running sequence, a closed one whose
 * slot has since served others), shared rather than copied; a rewind that
 * writes over a shared block copies it first; the cache holds more
 * prefixes than there are slots and evicts the least recently used. Each
 * sequence's tokens and raw logits equal those of its prompt alone, byte
 * for byte.
 *
 * P: 80 drawn ids; A's prompt P+x, B's P+y, S's P[0, 40)+w (6 more ids
 * each, parting from the others at their first); A2: P[0, 50) and 6 other
 * ids. Reference: B, S and A2 each alone on a --parallel 1 engine
 * (coli_engine_forward, 6 greedy tokens). On a --parallel 4 engine,
 * stepped in chunks of 17 prompt tokens:
 *   running  A prefilled past P and decoding; S opens: cached 32 (A's
 *            first block: its second holds S's own tokens), decodes beside
 *            A and closes; B opens: cached 64 (A's two blocks, more than
 *            the 40 of S's slot), decodes beside A. prefix_shared 96.
 *   rewound  A past P, rewound to 50; B opens: cached 32 (A's block 1 holds
 *            rows above A's position, so it is not published) and decodes
 *            while A writes A2's 6 ids over its rows 50-55 and decodes A2.
 *   cow      A past P; B opens: cached 64, A's two blocks; A rewinds to 50
 *            and writes A2's ids: its block 1 is copied first (18 rows:
 *            kv_copied), B decodes from the block as it was, A decodes A2.
 * Then, on a --parallel 2 engine, Q1..Q5 (70 other ids each) run one after
 * another and close (3 blocks each): with the default pool (16 blocks) Q1
 * plus 6 ids opens with cached 64 (its blocks, though both slots have
 * served others since); with a pool of 8 blocks Q1's are evicted (cached
 * 0) and Q3's first two kept (cached 64: a chain loses its last block
 * first). Their tokens against a reference alone.
 * Cases: q8 experts on the CPU (KV rows bf16; and q8 rows), the
 * deepseek_v3 fixture on the CPU (MLA's latent rows, no V cache), --gpu
 * sim:1 with the dense part there (its block tables, the copy on the
 * device), sim:2 with --split layers (each device its layers), sim:1
 * failing after 800 ops (in the running scenario while B decodes: the
 * dense part moves to the CPU and every slot, A's and B's sharing blocks,
 * is rebuilt from its history), the deepseek_v3 fixture on sim:1 (MLA's
 * latent rows in the device's blocks; failing too), and with a GPU, q8 and
 * q4 with the dense part on GPU 0 and deepseek_v3 there (skipped without
 * one; the reference then alone on the GPU).
 * Every engine hands its KV blocks out scrambled (COLI_KV_SCRAMBLE).
 */
#include <stdint.h>

#include "seq_test.h"

#define NP  80 /* shared prefix */
#define NS  40 /* S's share of it */
#define NX  6  /* each prompt's own ending */
#define NR  50 /* A's rewind */
#define NQ  70 /* Q1..Q5 */
#define GEN SQ_GEN

static int check_stats(coli_engine_t *e, uint64_t shared, uint64_t saved, uint64_t copied,
                       const char *what)
{
	struct coli_engine_stats st;

	coli_engine_stats(e, &st);
	if (st.prefix_shared == shared && st.prefix_saved == saved && st.kv_copied == copied)
		return 0;
	printf("%s: prefix_shared %llu, prefix_saved %llu, kv_copied %llu; want %llu, %llu, "
	       "%llu\n",
	       what, (unsigned long long)st.prefix_shared, (unsigned long long)st.prefix_saved,
	       (unsigned long long)st.kv_copied, (unsigned long long)shared,
	       (unsigned long long)saved, (unsigned long long)copied);
	return 1;
}

/* The prompts and their references. */
struct prompts {
	int a[NP + NX], b[NP + NX], s[NS + NX], a2[NR + NX], q[5][NQ + NX];
	struct sq_ref rb, rs, ra2, rq[5];
};

/* A at 50 writing A2's ids beside B (already open), each checked. */
static int a2_beside_b(coli_engine_t *e, struct sq *q, const struct prompts *p, int V,
                       float *logits, const char *what)
{
	q[0] = (struct sq){
	    .ids = p->a2, .n = NR + NX, .slot = q[0].slot, .fed = NR, .want = GEN, .ref = &p->ra2};
	q[1].ref = &p->rb;
	return sq_steps(e, q, 2, V, logits, 0, what) != 0;
}

/* The scenarios of the file's essay on fresh engines; the failures. */
static int scenarios(const char *path, const struct sq_cfg *c, const struct prompts *p, int V)
{
	float *logits = malloc(sizeof(float) * V * 4);
	int bad = 0, b;
	struct sq q[3];
	coli_engine_t *e;

	/* running: S, then B, from A's published blocks */
	if (sq_open_engine(path, c, 4, 0, &e))
		return free(logits), 1;
	b = sq_open(e, &q[0], p->a, NP + NX, 0, NULL, "running: A");
	q[0].want = 2, q[0].more = 1; /* A past P, then decoding beside the others */
	b = b ? b : sq_steps(e, q, 1, V, logits, 0, "running: A") != 0;
	b = b ? b : sq_open(e, &q[1], p->s, NS + NX, 32, &p->rs, "running: S");
	b = b ? b : sq_steps(e, q, 2, V, logits, 0, "running: S beside A") != 0;
	if (!b)
		coli_engine_seq_close(e, q[1].slot);
	b = b ? b : sq_open(e, &q[1], p->b, NP + NX, 64, &p->rb, "running: B");
	b = b ? b : sq_steps(e, q, 2, V, logits, 0, "running: B beside A") != 0;
	b = b ? b : check_stats(e, 96, 96, 0, "running");
	if (!b && c->fail) { /* the device failed beside B: the shared blocks rebuilt */
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

	/* rewound: A at 50 before B opens: only A's first block is final */
	if (sq_open_engine(path, c, 4, 0, &e))
		return free(logits), bad + 1;
	b = sq_open(e, &q[0], p->a, NP + NX, 0, NULL, "rewound: A");
	q[0].want = 2;
	b = b ? b : sq_steps(e, q, 1, V, logits, 0, "rewound: A") != 0;
	b = b ? b : coli_engine_seq_rewind(e, q[0].slot, NR) != 0;
	b = b ? b : sq_open(e, &q[1], p->b, NP + NX, 32, &p->rb, "rewound: B");
	b = b ? b : a2_beside_b(e, q, p, V, logits, "rewound: A2 beside B");
	b = b ? b : check_stats(e, 32, 32, 0, "rewound");
	coli_engine_close(e);
	bad += b;

	/* cow: B shares A's two blocks, then A writes over the second */
	if (sq_open_engine(path, c, 4, 0, &e))
		return free(logits), bad + 1;
	b = sq_open(e, &q[0], p->a, NP + NX, 0, NULL, "cow: A");
	q[0].want = 2;
	b = b ? b : sq_steps(e, q, 1, V, logits, 0, "cow: A") != 0;
	b = b ? b : sq_open(e, &q[1], p->b, NP + NX, 64, &p->rb, "cow: B");
	b = b ? b : coli_engine_seq_rewind(e, q[0].slot, NR) != 0;
	b = b ? b : a2_beside_b(e, q, p, V, logits, "cow: A2 beside B");
	b = b ? b : check_stats(e, 64, 64, NR - 32, "cow");
	coli_engine_close(e);
	bad += b;

	/* many: five prompts through two slots, then Q3 and Q1 again (not with
	 * a failing device: a failover empties the cache) */
	for (int blocks = 0; !c->fail && blocks <= 8; blocks += 8) {
		const char *what = blocks ? "many, 8 blocks" : "many";
		const int again[2] = {2, 0}, cached[2] = {64, blocks ? 0 : 64};

		if (sq_open_engine(path, c, 2, blocks, &e))
			return free(logits), bad + 1;
		b = 0;
		for (int i = 0; !b && i < 5; i++) {
			b = sq_open(e, &q[0], p->q[i], NQ, 0, NULL, what) ||
			    sq_steps(e, q, 1, V, logits, 0, what) != 0;
			coli_engine_seq_close(e, q[0].slot);
		}
		for (int k = 0; !b && k < 2; k++) {
			b = sq_open(e, &q[0], p->q[again[k]], NQ + NX, cached[k], &p->rq[again[k]],
			            what) ||
			    sq_steps(e, q, 1, V, logits, 0, what) != 0;
			coli_engine_seq_close(e, q[0].slot);
		}
		coli_engine_close(e);
		bad += b;
	}
	free(logits);
	return bad;
}

static int run_case(const struct sq_cfg *c)
{
	struct prompts *p = calloc(1, sizeof(*p));
	struct sq_ref *refs[8];
	int V, bad = 1, n_ref = 0, ok;
	char path[8192];
	uint32_t r = 4242;
	coli_engine_t *e;

	if (!p || fx_convert(c->fixture, c->q, fx_tmpdir(), path, sizeof(path)) ||
	    sq_open_engine(path, c, 1, 0, &e))
		return free(p), 1;
	V = coli_engine_config(e)->vocab;
	for (int t = 0; t < NP + NX; t++)
		p->a[t] = (int)((r = r * 1103515245u + 12345u) >> 8) % V;
	for (int i = 0; i < 5; i++)
		for (int t = 0; t < NQ + NX; t++)
			p->q[i][t] = (int)((r = r * 1103515245u + 12345u) >> 8) % V;
	memcpy(p->b, p->a, sizeof(p->b));
	memcpy(p->s, p->a, sizeof(int) * NS);
	memcpy(p->a2, p->a, sizeof(int) * NR);
	for (int t = 0; t < NX; t++) { /* each parts from the others at its first */
		p->b[NP + t] = (p->a[NP + t] + 1 + t) % V;
		p->s[NS + t] = (p->a[NS + t] + 2 + t) % V;
		p->a2[NR + t] = (p->a[NR + t] + 3 + t) % V;
	}
	refs[n_ref++] = &p->rb, refs[n_ref++] = &p->rs, refs[n_ref++] = &p->ra2;
	refs[n_ref++] = &p->rq[0], refs[n_ref++] = &p->rq[2];
	ok = 1;
	for (int i = 0; i < n_ref; i++)
		ok &= (refs[i]->logits = malloc(sizeof(float) * V * GEN)) != NULL;
	if (ok && !sq_alone(e, p->b, NP + NX, &p->rb, V) &&
	    !sq_alone(e, p->s, NS + NX, &p->rs, V) && !sq_alone(e, p->a2, NR + NX, &p->ra2, V) &&
	    !sq_alone(e, p->q[0], NQ + NX, &p->rq[0], V) &&
	    !sq_alone(e, p->q[2], NQ + NX, &p->rq[2], V)) {
		struct coli_engine_stats st;

		coli_engine_stats(e, &st);
		sq_block_gb_of(&st);
		coli_engine_close(e);
		e = NULL;
		if (strcmp(c->dense, "cpu") && strcmp(c->gpu, "off") && !st.dense_on_device)
			printf("%s: the dense part is not on the device\n", c->gpu);
		else
			bad = scenarios(path, c, p, V);
	}
	if (e)
		coli_engine_close(e);
	printf("%-14s %-4s %-6s dense %-4s split %-6s kv %-4s%s %s\n", c->fixture,
	       coli_dtype_name(c->q), c->gpu, c->dense, c->split, c->kv, c->fail ? " (fails)" : "",
	       bad ? "MISMATCH" : "identical");
	for (int i = 0; i < n_ref; i++)
		free(refs[i]->logits);
	free(p);
	return bad != 0;
}

int main(void)
{
	const struct sq_cfg cases[] = {
	    {"demo", COLI_DTYPE_Q8_0, "off", "cpu", "auto", "bf16", 0},
	    {"demo", COLI_DTYPE_Q8_0, "off", "cpu", "auto", "q8", 0},
	    {"deepseek_v3", COLI_DTYPE_Q8_0, "off", "cpu", "auto", "bf16", 0},
	    {"demo", COLI_DTYPE_Q8_0, "sim:1", "auto", "auto", "bf16", 0},
	    {"demo", COLI_DTYPE_Q8_0, "sim:2", "auto", "layers", "bf16", 0},
	    {"demo", COLI_DTYPE_Q8_0, "sim:1", "auto", "auto", "bf16", 800},
	    {"demo", COLI_DTYPE_Q8_0, "0", "auto", "auto", "bf16", 0},
	    {"deepseek_v3", COLI_DTYPE_Q8_0, "sim:1", "auto", "auto", "bf16", 0},
	    {"deepseek_v3", COLI_DTYPE_Q8_0, "sim:1", "auto", "auto", "bf16", 800},
	    {"deepseek_v3", COLI_DTYPE_Q8_0, "0", "auto", "auto", "bf16", 0},
	    {"demo", COLI_DTYPE_Q4_0, "0", "auto", "auto", "bf16", 0},
	};

	return sq_cases(cases, sizeof(cases) / sizeof(cases[0]), run_case) ? 1 : 0;
}
