/*
 * tests/cpu/pool.c — coli_cpu_pool_run runs every task exactly once per round,
 * across many rounds of varying size, and its return is a barrier: plain
 * (non-atomic) writes made by the tasks are all visible to the caller.
 * Pools of 1..8 threads (more threads than cores on purpose), and rounds
 * separated by pauses long enough for the workers to fall asleep.
 * coli_cpu_pool_run_beside (every third round): the side job runs once, on
 * the caller, and the workers start on the tasks while it runs (the side job
 * waits, up to 5 s, until a worker has finished a task).
 * coli_cpu_pool_run_phases: three phases of 0..40 tasks each (every fourth
 * round with the middle one empty), every task exactly once, each phase's
 * tasks seeing every plain write of the phases before, and the last phase
 * running while the caller's side job waits for it (the phases do not wait
 * for the caller).
 */
#include <time.h>

#include "helpers.h"

#define MAX_TASKS 257

struct round {
	int runs[MAX_TASKS];       /* atomic increments: how many times each ran */
	uint64_t stamp[MAX_TASKS]; /* plain writes: this round's stamp */
	uint64_t id;
	int side_runs, side_saw_work, nt, n;
};

static void task(void *arg, int t, int n)
{
	struct round *r = arg;

	if (t < 0 || t >= n || n > MAX_TASKS)
		abort();
	__atomic_add_fetch(&r->runs[t], 1, __ATOMIC_RELAXED);
	r->stamp[t] = r->id * 1000003u + (uint64_t)t;
}

static void side(void *arg)
{
	struct round *r = arg;
	struct timespec t0, t;

	r->side_runs++;
	if (r->nt < 2 || r->n < 2) /* the caller alone runs the tasks, after this */
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < MAX_TASKS; i++)
			if (__atomic_load_n(&r->runs[i], __ATOMIC_RELAXED)) {
				r->side_saw_work = 1;
				return;
			}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 5);
}

/* ---- phases ---- */
#define PH_MAX 40

struct phases {
	int runs[3][PH_MAX];
	uint64_t val[3][PH_MAX]; /* plain writes */
	int n[3], nt, bad, side_runs, side_saw_last;
	uint64_t id;
};

static struct phases g_ph;

static void phase_task(struct phases *q, int k, int t, int n)
{
	if (t < 0 || t >= n || n != q->n[k])
		abort();
	for (int j = 0; j < k; j++) /* every phase before (one may be empty): all done */
		for (int i = 0; i < q->n[j]; i++)
			if (q->val[j][i] != q->id * 7919u + (uint64_t)i)
				__atomic_store_n(&q->bad, 1, __ATOMIC_RELAXED);
	q->val[k][t] = q->id * 7919u + (uint64_t)t;
	__atomic_add_fetch(&q->runs[k][t], 1, __ATOMIC_RELEASE);
}

static void phase0(void *arg, int t, int n)
{
	phase_task(arg, 0, t, n);
}
static void phase1(void *arg, int t, int n)
{
	phase_task(arg, 1, t, n);
}
static void phase2(void *arg, int t, int n)
{
	phase_task(arg, 2, t, n);
}

/* The caller's side job: with workers to spare, wait (up to 5 s) until a
 * task of the last phase has run. */
static void phase_side(void *arg)
{
	struct phases *q = arg;
	struct timespec t0, t;

	q->side_runs++;
	if (q->nt < 2 || !q->n[0] || !q->n[1] || !q->n[2])
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < q->n[2]; i++)
			if (__atomic_load_n(&q->runs[2][i], __ATOMIC_ACQUIRE)) {
				q->side_saw_last = 1;
				return;
			}
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec < 5);
}

static int phase_rounds(coli_cpu_pool_t *p, int nt, int rounds)
{
	struct phases *q = &g_ph;
	int fails = 0;

	for (int it = 0; it < rounds; it++) {
		struct coli_pool_phase ph[3] = {{phase0, q, 0}, {phase1, q, 0}, {phase2, q, 0}};
		int side = it % 2;

		memset(q->runs, 0, sizeof(q->runs));
		q->id++;
		q->nt = nt, q->bad = 0, q->side_runs = 0, q->side_saw_last = 0;
		for (int k = 0; k < 3; k++)
			q->n[k] = ph[k].n_tasks = (int)(rng_u64() % (PH_MAX + 1));
		if (it % 4 == 3) /* an empty phase between two: the last waits for the first */
			q->n[1] = ph[1].n_tasks = 0;
		coli_cpu_pool_run_phases(p, ph, 3, side ? phase_side : NULL, q);
		for (int k = 0; k < 3; k++)
			for (int t = 0; t < PH_MAX; t++)
				if (q->runs[k][t] != (t < q->n[k]))
					q->bad = 1;
		if (side && (q->side_runs != 1 ||
		             (nt > 1 && q->n[0] && q->n[1] && q->n[2] && !q->side_saw_last)))
			q->bad = 1;
		if (q->bad && fails++ < 10)
			fprintf(stderr,
			        "threads=%d phases %d/%d/%d%s: a task ran twice or not at all, "
			        "ran before its phase's predecessors, or the last phase waited "
			        "for the side job\n",
			        nt, q->n[0], q->n[1], q->n[2], side ? " beside" : "");
	}
	return fails;
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
			r.side_runs = r.side_saw_work = 0;
			r.nt = nt;
			r.n = n;
			if (it % 3 == 2) {
				coli_cpu_pool_run_beside(p, task, &r, n, side, &r);
				if (r.side_runs != 1 || (nt > 1 && n > 1 && !r.side_saw_work)) {
					if (fails < 10)
						fprintf(stderr,
						        "threads=%d round %d beside, %d tasks: "
						        "side ran "
						        "%d times, %s\n",
						        nt, it, n, r.side_runs,
						        r.side_saw_work
						            ? "workers ran during it"
						            : "no worker ran during it");
					fails++;
				}
			} else {
				coli_cpu_pool_run(p, task, &r, n);
			}
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
		fails += phase_rounds(p, nt, 600);
		rounds += 600;
		coli_cpu_pool_destroy(p);
	}
	coli_cpu_pool_run(NULL, task, &r, 5); /* NULL pool: the caller alone */
	fails += phase_rounds(NULL, 1, 20);
	printf("%ld rounds on pools of 1..8 threads, %d failures\n", rounds, fails);
	return fails ? 1 : 0;
}
