/*
 * tests/core/tiers_invariance.c — placement never changes tokens.
 *
 * For every fixture at q8 and bf16: teacher-forced logits of the prompt (one
 * prefill) and 8 greedy decode steps, under --ram-gb -1 (the reference),
 * 0 (working set only: a prefill runs its experts in chunks of top_k slots),
 * tiny (working set + 1), half and full, each with prefetch on and off, on
 * io_uring and on the pread fallback. Every run's logits must be byte-
 * identical to the reference and its greedy ids equal. Also: a budget below
 * the minimum is refused with a message naming the --ram-gb to pass.
 */
#include <errno.h>

#include "fixture_util.h"

#define STEPS 8

struct run {
	float *logits; /* [n + STEPS][vocab] */
	int ids[STEPS];
	struct coli_engine_stats st;
};

static int run(const char *path, double ram_gb, int prefetch, const char *io, const int *ids, int n,
               struct run *r, char *err, size_t errlen)
{
	struct coli_opts o;
	coli_engine_t *e;
	int V, rc;

	coli_opts_init(&o, NULL, 0);
	o.threads = 2;
	o.ram_gb = ram_gb;
	o.prefetch = prefetch;
	coli_opts_set(&o, "--io", io, NULL, 0);
	coli_opts_set(&o, "--verify-slabs", "on", NULL, 0);
	rc = coli_engine_open(path, &o, &e, err, errlen);
	if (rc)
		return rc;
	V = coli_engine_config(e)->vocab;
	rc = coli_engine_forward(e, ids, n, r->logits, 1);
	for (int s = 0; !rc && s < STEPS; s++) {
		const float *l = r->logits + (size_t)(n - 1 + s) * V;
		int best = 0;

		for (int i = 1; i < V; i++)
			best = l[i] > l[best] ? i : best;
		r->ids[s] = best;
		rc = coli_engine_forward(e, &best, 1, r->logits + (size_t)(n + s) * V, 0);
	}
	if (rc)
		snprintf(err, errlen, "forward: %s", coli_engine_errmsg(e));
	coli_engine_stats(e, &r->st);
	coli_engine_close(e);
	return rc;
}

static int fixture(const char *name, enum coli_dtype q)
{
	char path[8192], err[1024];
	int n, V, fails = 0, runs = 0;
	int *ids = fx_read_ints(name, "ids.txt", &n);
	struct run ref, r;
	size_t bytes;
	double gb[5];
	const char *io[2] = {"uring", "pread"};

	if (!ids || fx_convert(name, q, fx_tmpdir(), path, sizeof(path)))
		return 1;
	if (n > 24)
		n = 24; /* enough to route every expert of these fixtures */
	{
		struct coli_opts o;
		coli_engine_t *e;

		coli_opts_init(&o, NULL, 0);
		if (coli_engine_open(path, &o, &e, err, sizeof(err))) {
			printf("%s: %s\n", path, err);
			return 1;
		}
		V = coli_engine_config(e)->vocab;
		coli_engine_close(e);
	}
	bytes = sizeof(float) * (size_t)(n + STEPS) * V;
	ref.logits = malloc(bytes);
	r.logits = malloc(bytes);
	memset(ref.logits, 0xff, bytes); /* poison: NaN */
	if (run(path, -1, 0, "uring", ids, n, &ref, err, sizeof(err))) {
		printf("%s: reference run: %s\n", path, err);
		return 1;
	}
	/* budgets from what the engine counts: fixed + slots x slot */
	{
		double fixed = (double)ref.st.ram_fixed_bytes, slot = (double)ref.st.slot_bytes;
		uint64_t total = ref.st.total_slabs, min = ref.st.min_slots;

		/* the reference left the dense part mapped: count it as a budget does */
		struct run probe = {.logits = r.logits};

		if (run(path, 0, 0, "uring", ids, 1, &probe, err, sizeof(err))) {
			printf("%s: ram 0: %s\n", path, err);
			return 1;
		}
		fixed = (double)probe.st.ram_fixed_bytes;
		gb[0] = -1;
		gb[1] = 0;
		gb[2] = (fixed + (min + 1.5) * slot) / 1e9;
		gb[3] = (fixed + (total / 2 + 0.5) * slot) / 1e9;
		gb[4] = (fixed + (total + 0.5) * slot) / 1e9;
		/* below the minimum: refused, with the number to pass */
		if (run(path, (fixed + (min - 0.5) * slot) / 1e9, 1, "uring", ids, n, &probe, err,
		        sizeof(err)) != -ENOMEM ||
		    !strstr(err, "pass --ram-gb")) {
			printf("%s: a budget below the working set was not refused: %s\n", path,
			       err);
			fails++;
		}
	}
	for (int b = 0; b < 5; b++)
		for (int pf = 0; pf < 2; pf++)
			for (int k = 0; k < 2; k++) {
				memset(r.logits, 0xff, bytes);
				runs++;
				if (run(path, gb[b], pf, io[k], ids, n, &r, err, sizeof(err))) {
					printf("%s ram %g prefetch %d %s: %s\n", path, gb[b], pf,
					       io[k], err);
					fails++;
					continue;
				}
				if (memcmp(r.logits, ref.logits, bytes) ||
				    memcmp(r.ids, ref.ids, sizeof(r.ids))) {
					printf("%s ram %g prefetch %d %s: logits differ from the "
					       "reference\n",
					       path, gb[b], pf, io[k]);
					fails++;
				}
				if (b == 2 && pf && k == 0)
					printf("%-18s %-5s tiny: %llu slots, loads RAM %llu disk "
					       "%llu, "
					       "prefetch %llu issued %llu used, recall %.0f%%\n",
					       name, coli_dtype_name(q),
					       (unsigned long long)r.st.ram_slots,
					       (unsigned long long)r.st.hits[COLI_TIER_RAM],
					       (unsigned long long)r.st.hits[COLI_TIER_DISK],
					       (unsigned long long)r.st.prefetch_issued,
					       (unsigned long long)r.st.prefetch_used,
					       r.st.lookahead_routed ? 100.0 * r.st.lookahead_hit /
					                                   r.st.lookahead_routed
					                             : 0);
			}
	printf("%-18s %-5s %d configurations byte-identical to --ram-gb -1: %s\n", name,
	       coli_dtype_name(q), runs - fails, fails ? "NO" : "yes");
	free(ref.logits), free(r.logits), free(ids);
	return fails != 0;
}

int main(void)
{
	char names[MAX_FIXTURES][64];
	int nf = fx_list(names, MAX_FIXTURES), rc = 0;

	if (nf == 0) {
		printf("no fixtures with references under %s\n", fx_root());
		return 1;
	}
	for (int f = 0; f < nf; f++) {
		rc |= fixture(names[f], COLI_DTYPE_Q8_0);
		rc |= fixture(names[f], COLI_DTYPE_BF16);
	}
	return rc;
}
