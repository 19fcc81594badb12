/*
 * tests/cpu/pool.c — coli_cpu_pool_run runs every task exactly once per round,
 * across many rounds of varying size, and its return is a barrier: plain
 * (non-atomic) writes made by the tasks are all visible to the caller.
 * Pools of 1..8 threads (more threads than cores on purpose), and rounds
 * separated by pauses long enough for the workers to fall asleep.
 */
#include <time.h>

#include "helpers.h"

#define MAX_TASKS 257

struct round {
	int runs[MAX_TASKS];       /* atomic increments: how many times each ran */
	uint64_t stamp[MAX_TASKS]; /* plain writes: this round's stamp */
	uint64_t id;
};

static void task(void *arg, int t, int n)
{
	struct round *r = arg;

	if (t < 0 || t >= n || n > MAX_TASKS)
		abort();
	__atomic_add_fetch(&r->runs[t], 1, __ATOMIC_RELAXED);
	r->stamp[t] = r->id * 1000003u + (uint64_t)t;
}

int main(void)
{
	static struct round r;
	int fails = 0;
	long rounds = 0;

	for (int nt = 1; nt <= 8; nt++) {
		coli_cpu_pool_t *p;
		if (coli_cpu_pool_create(nt, &p) || coli_cpu_pool_threads(p) != nt) {
			fprintf(stderr, "pool of %d threads: create failed\n", nt);
			return 1;
		}
		for (int it = 0; it < 3000; it++) {
			int n = 1 + (int)(rng_u64() % MAX_TASKS);
			if (it % 4 == 0)
				n = 1 + (int)(rng_u64() % (2 * nt));
			memset(r.runs, 0, sizeof(r.runs));
			r.id++;
			coli_cpu_pool_run(p, task, &r, n);
			rounds++;
			for (int t = 0; t < MAX_TASKS; t++) {
				int want = t < n;
				if (r.runs[t] != want ||
				    (want && r.stamp[t] != r.id * 1000003u + (uint64_t)t)) {
					if (fails < 10)
						fprintf(stderr,
						        "threads=%d round %d task %d/%d: ran %d "
						        "times, stamp %s\n",
						        nt, it, t, n, r.runs[t],
						        want && r.stamp[t] ==
						                    r.id * 1000003u + (uint64_t)t
						            ? "ok"
						            : "stale");
					fails++;
				}
			}
			if (it % 1000 == 999) { /* let the workers go to sleep */
				struct timespec ts = {0, 30 * 1000 * 1000};
				nanosleep(&ts, NULL);
			}
		}
		coli_cpu_pool_destroy(p);
	}
	coli_cpu_pool_run(NULL, task, &r, 5); /* NULL pool: the caller alone */
	printf("%ld rounds on pools of 1..8 threads, %d failures\n", rounds, fails);
	return fails ? 1 : 0;
}
