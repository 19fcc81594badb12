/*
 * tests/core/kv_pool.c — the KV cache as a pool of blocks (core/forward/kv.h;
 * issue #39 item 2): sequences take blocks as they grow, so two stepped
 * together hold interleaved blocks; each still gets the tokens and raw
 * logits it gets alone, byte for byte. A closed sequence's blocks stay as
 * its prefix until the pool needs them, the least recently closed one's
 * last blocks first; a sequence opening with a running one's prefix lists
 * its blocks; a step that cannot get its blocks fails with
 * -ENOSPC and changes nothing; a promise (coli_engine_seq_reserve) keeps
 * another sequence's growth off the promised blocks.
 *
 * P: 80 drawn ids; A's prompt P+x, B's P+y (6 more ids each, parting at
 * their first), C's 40 other ids. Reference: each alone on a --parallel 1
 * engine with the default pool (coli_engine_forward, 6 greedy tokens). A
 * block is 32 positions; a prompt of 86 and its 6 tokens take 3 blocks.
 *   together  --parallel 2, a pool of 6 blocks: A and B from empty, stepped
 *             in chunks of 17 prompt tokens (their blocks interleave): 6 in
 *             use, 0 free. Then B again after A prefilled past P: its table
 *             lists A's first two blocks (64 cached), 4 in use, 2 free. On
 *             5 blocks with A's 3 promised, B's 92 positions fit only
 *             counting the two it shares (coli_engine_kv_fits 0,
 *             coli_engine_kv_fits_prompt 1): its promise holds, 1 free.
 *   reclaim   --parallel 3, 6 blocks: A runs and closes, D (86 other ids:
 *             its own slot) runs and closes
 *             (6 cached), C (46 positions) takes A's last 2 blocks (A closed
 *             first, its blocks released last to first): D again gets 85
 *             cached (its prompt but the last), A 32 (its first block), and
 *             A's tokens are the reference's.
 *   nospace   --parallel 2, 4 blocks: A promised 92 positions; B's promise
 *             of 92 is refused (-ENOSPC) and coli_engine_kv_fits says 0; a
 *             step of B's 40 prompt tokens (2 blocks) fails -ENOSPC, and
 *             one of A and B together too, neither position moving; 160
 *             positions never fit (-E2BIG). A closed, B runs: its tokens are
 *             the reference's.
 * Cases: q8 experts on the CPU with bf16 and q8 rows, the deepseek_v3
 * fixture (MLA's latent rows), --gpu sim:1 and sim:2 (--split layers) with
 * the dense part there (its cache the pool's blocks, through the device's
 * block tables; deepseek_v3's latent rows too), GPU 0 when there is one
 * (demo and deepseek_v3; skipped without). Every engine
 * hands its blocks out scrambled (COLI_KV_SCRAMBLE): no table is the
 * identity, so a device reader or writer off the table shows.
 */
#include <errno.h>
#include <stdint.h>

#include "seq_test.h"

#define NP  80
#define NX  6
#define NC  40
#define GEN SQ_GEN
#define BLK 32

static int want_counts(coli_engine_t *e, int used, int cached, int free_, const char *what)
{
	struct coli_engine_stats st;

	coli_engine_stats(e, &st);
	if (st.kv_blocks_used == used && st.kv_blocks_cached == cached &&
	    st.kv_blocks_free == free_)
		return 0;
	printf("%s: blocks used %d cached %d free %d; want %d %d %d\n", what, st.kv_blocks_used,
	       st.kv_blocks_cached, st.kv_blocks_free, used, cached, free_);
	return 1;
}

static int together(const char *path, const struct sq_cfg *c, const int *pa, const int *pb,
                    const struct sq_ref *ra, const struct sq_ref *rb, int V, float *logits)
{
	struct sq q[2];
	coli_engine_t *e;
	int b;

	if (sq_open_engine(path, c, 2, 6, &e))
		return 1;
	b = sq_open(e, &q[0], pa, NP + NX, 0, ra, "together: A");
	b = b ? b : sq_open(e, &q[1], pb, NP + NX, 0, rb, "together: B");
	b = b ? b : sq_steps(e, q, 2, V, logits, 0, "together") != 0;
	b = b ? b : want_counts(e, 6, 0, 0, "together");
	coli_engine_close(e);
	if (b || sq_open_engine(path, c, 2, 6, &e))
		return 1;
	/* B after A prefilled past P: A's first two blocks in B's table too */
	b = sq_open(e, &q[0], pa, NP + NX, 0, ra, "shared: A");
	b = b ? b : sq_steps(e, q, 1, V, logits, NP + 5, "shared: A") != 0;
	b = b ? b : sq_open(e, &q[1], pb, NP + NX, 2 * BLK, rb, "shared: B");
	b = b ? b : sq_steps(e, q, 2, V, logits, 0, "shared") != 0;
	b = b ? b : want_counts(e, 4, 0, 2, "shared");
	coli_engine_close(e);
	if (b || sq_open_engine(path, c, 2, 5, &e))
		return 1;
	/* admission counts the shared blocks: A promised 3 of 5, so B's 3 do not
	 * fit alone, but 2 of them are A's */
	b = sq_open(e, &q[0], pa, NP + NX, 0, ra, "admit: A");
	b = b ? b : coli_engine_seq_reserve(e, q[0].slot, NP + NX + GEN) != 0;
	b = b ? b : sq_steps(e, q, 1, V, logits, NP + 5, "admit: A") != 0;
	if (!b && (coli_engine_kv_fits(e, NP + NX + GEN) != 0 ||
	           coli_engine_kv_fits_prompt(e, pb, NP + NX, NP + NX + GEN) != 1)) {
		printf("admit: B fits %d, with its prompt %d; want 0, 1\n",
		       coli_engine_kv_fits(e, NP + NX + GEN),
		       coli_engine_kv_fits_prompt(e, pb, NP + NX, NP + NX + GEN));
		b = 1;
	}
	b = b ? b : sq_open(e, &q[1], pb, NP + NX, 2 * BLK, rb, "admit: B");
	b = b ? b : coli_engine_seq_reserve(e, q[1].slot, NP + NX + GEN) != 0;
	b = b ? b : sq_steps(e, q, 2, V, logits, 0, "admit") != 0;
	b = b ? b : want_counts(e, 4, 0, 1, "admit");
	coli_engine_close(e);
	return b;
}

static int reclaim(const char *path, const struct sq_cfg *c, const int *pa, const int *pb,
                   const int *pc, const struct sq_ref *ra, int V, float *logits)
{
	struct sq q[1];
	coli_engine_t *e;
	int b, sa;

	if (sq_open_engine(path, c, 3, 6, &e))
		return 1;
	b = sq_open(e, q, pa, NP + NX, 0, NULL, "reclaim: A");
	b = b ? b : sq_steps(e, q, 1, V, logits, 0, "reclaim: A") != 0;
	sa = q->slot;
	coli_engine_seq_close(e, sa);
	b = b ? b : sq_open(e, q, pb, NP + NX, 0, NULL, "reclaim: D");
	b = b ? b : sq_steps(e, q, 1, V, logits, 0, "reclaim: D") != 0;
	coli_engine_seq_close(e, q->slot);
	b = b ? b : want_counts(e, 0, 6, 0, "reclaim: A and D closed");
	b = b ? b : sq_open(e, q, pc, NC, 0, NULL, "reclaim: C");
	b = b ? b : sq_steps(e, q, 1, V, logits, 0, "reclaim: C") != 0;
	b = b ? b : want_counts(e, 2, 4, 0, "reclaim: C running");
	coli_engine_seq_close(e, q->slot);
	b = b ? b : sq_open(e, q, pb, NP + NX, NP + NX - 1, NULL, "reclaim: D again");
	coli_engine_seq_close(e, q->slot);
	b = b ? b : sq_open(e, q, pa, NP + NX, BLK, ra, "reclaim: A again");
	b = b ? b : sq_steps(e, q, 1, V, logits, 0, "reclaim: A again") != 0;
	coli_engine_close(e);
	return b;
}

static int nospace(const char *path, const struct sq_cfg *c, const int *pa, const int *pb,
                   const struct sq_ref *rb, int V, float *logits)
{
	struct sq q[2];
	struct coli_run runs[2];
	int who[2], b, rc;
	coli_engine_t *e;

	if (sq_open_engine(path, c, 2, 4, &e))
		return 1;
	b = sq_open(e, &q[0], pa, NP + NX, 0, NULL, "nospace: A");
	b = b ? b : coli_engine_seq_reserve(e, q[0].slot, NP + NX + GEN) != 0;
	b = b ? b : sq_open(e, &q[1], pb, NP + NX, 0, rb, "nospace: B");
	if (!b && ((rc = coli_engine_seq_reserve(e, q[1].slot, NP + NX + GEN)) != -ENOSPC ||
	           coli_engine_kv_fits(e, NP + NX + GEN) != 0 ||
	           coli_engine_kv_fits(e, 5 * BLK) != -E2BIG || coli_engine_kv_fits(e, BLK) != 1)) {
		printf(
		    "nospace: B's promise %d (want -ENOSPC), fits %d %d %d (want 0, -E2BIG, 1)\n",
		    rc, coli_engine_kv_fits(e, NP + NX + GEN), coli_engine_kv_fits(e, 5 * BLK),
		    coli_engine_kv_fits(e, BLK));
		b = 1;
	}
	if (!b) { /* B's 40 tokens want 2 blocks; A's promise leaves 1 */
		struct coli_run r = {.slot = q[1].slot, .n = 40, .ids = pb};

		rc = coli_engine_step(e, &(struct coli_batch){.n_runs = 1, .runs = &r}, NULL);
		sq_runs(q, 2, runs, who);
		runs[1].n = 40;
		b = rc != -ENOSPC ||
		    coli_engine_step(e, &(struct coli_batch){.n_runs = 2, .runs = runs}, logits) !=
		        -ENOSPC ||
		    coli_engine_seq_pos(e, q[0].slot) || coli_engine_seq_pos(e, q[1].slot);
		if (b)
			printf("nospace: steps %d, A at %d, B at %d (want -ENOSPC, 0, 0)\n", rc,
			       coli_engine_seq_pos(e, q[0].slot),
			       coli_engine_seq_pos(e, q[1].slot));
	}
	b = b ? b : want_counts(e, 0, 0, 4, "nospace: nothing taken");
	if (!b) { /* -ENOSPC is no device failure: the dense part stays */
		struct coli_engine_stats st;

		coli_engine_stats(e, &st);
		if (st.dense_on_device != (strcmp(c->gpu, "off") && strcmp(c->dense, "cpu"))) {
			printf("nospace: the dense part moved (on device: %d)\n",
			       st.dense_on_device);
			b = 1;
		}
	}
	coli_engine_seq_close(e, q[0].slot);
	b = b ? b : sq_steps(e, &q[1], 1, V, logits, 0, "nospace: B") != 0;
	coli_engine_close(e);
	return b;
}

static int run_case(const struct sq_cfg *c)
{
	int pa[NP + NX], pb[NP + NX], pc[NC], pd[NP + NX], V, bad = 1;
	struct sq_ref ra = {0}, rb = {0};
	float *logits = NULL;
	char path[8192];
	uint32_t r = 777;
	coli_engine_t *e;

	if (fx_convert(c->fixture, c->q, fx_tmpdir(), path, sizeof(path)))
		return 1;
	if (sq_open_engine(path, c, 1, 0, &e))
		return 1;
	V = coli_engine_config(e)->vocab;
	for (int t = 0; t < NP + NX; t++)
		pa[t] = (int)((r = r * 1103515245u + 12345u) >> 8) % V;
	memcpy(pb, pa, sizeof(pb));
	for (int t = 0; t < NX; t++)
		pb[NP + t] = (pa[NP + t] + 1 + t) % V;
	for (int t = 0; t < NC; t++)
		pc[t] = (pa[t] + 3 + t) % V;
	for (int t = 0; t < NP + NX; t++)
		pd[t] = (pa[t] + 5 + t) % V;
	ra.logits = malloc(sizeof(float) * V * GEN);
	rb.logits = malloc(sizeof(float) * V * GEN);
	logits = malloc(sizeof(float) * V * 2);
	if (ra.logits && rb.logits && logits && !sq_alone(e, pa, NP + NX, &ra, V) &&
	    !sq_alone(e, pb, NP + NX, &rb, V)) {
		struct coli_engine_stats st;

		coli_engine_stats(e, &st);
		sq_block_gb_of(&st);
		coli_engine_close(e);
		e = NULL;
		if (strcmp(c->dense, "cpu") && strcmp(c->gpu, "off") && !st.dense_on_device)
			printf("%s: the dense part is not on the device\n", c->gpu);
		else
			bad = together(path, c, pa, pb, &ra, &rb, V, logits) +
			      reclaim(path, c, pa, pd, pc, &ra, V, logits) +
			      nospace(path, c, pa, pb, &rb, V, logits);
	}
	if (e)
		coli_engine_close(e);
	printf("%-12s %-4s %-6s dense %-4s split %-6s kv %-4s %s\n", c->fixture,
	       coli_dtype_name(c->q), c->gpu, c->dense, c->split, c->kv, bad ? "FAIL" : "ok");
	free(ra.logits), free(rb.logits), free(logits);
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
	    {"demo", COLI_DTYPE_Q8_0, "0", "auto", "auto", "bf16", 0},
	    {"deepseek_v3", COLI_DTYPE_Q8_0, "sim:1", "auto", "auto", "bf16", 0},
	    {"deepseek_v3", COLI_DTYPE_Q8_0, "sim:2", "auto", "layers", "bf16", 0},
	    {"deepseek_v3", COLI_DTYPE_Q8_0, "0", "auto", "auto", "bf16", 0},
	};

	return sq_cases(cases, sizeof(cases) / sizeof(cases[0]), run_case) ? 1 : 0;
}
