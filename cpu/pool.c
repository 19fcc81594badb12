/*
 * cpu/pool.c — the engine's CPU thread pool: n_threads - 1 pthread workers plus
 * the calling thread, which always takes part in the work.
 *
 * One round (coli_cpu_pool_run) at a time, driven by the caller:
 *
 *   job      fn, arg, base, n_total      written by the caller before publishing
 *   gen      uint32 futex word           bumped (seq_cst) to publish a round
 *   ticket   uint64 = n << 32 | next     a task is claimed by a fetch_add on the whole
 *                                        word: the task count travels with the
 *                                        index, so a claim is judged against the
 *                                        round it landed in, and a worker that
 *                                        wakes late takes a task of the current
 *                                        round or none (a stale n_tasks once let a
 *                                        task run twice). The job fields are read
 *                                        only after a successful claim: the round
 *                                        cannot end, so they cannot be rewritten,
 *                                        before the claimed task is done.
 *   done     tasks finished this round   the caller waits for done == n
 *
 * A round holds at most 65535 tasks; larger counts run as several rounds.
 * gen, ticket and done each have a cache line (see the struct): a round with
 * sixteen threads took ~4 us with nothing to do when they shared one and
 * claims were a CAS loop, ~2.2 us now (H200 host, docs/perf/kernels.md).
 *
 * Workers spin on gen for a while (a decode step launches rounds every few
 * microseconds) and then sleep on the futex; `sleepers` lets the caller skip
 * the wake syscall when nobody sleeps (a Dekker pair with seq_cst on both
 * sides: either the caller sees the sleeper or the sleeper sees the new gen,
 * and FUTEX_WAIT re-checks the word in the kernel).
 *
 * Tasks must not call coli_cpu_pool_run on the same pool. The pool does not
 * pin threads (mem/ owns NUMA placement).
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu/cpu.h"

#define SPIN_ITERS (1 << 15) /* ~50-500 us of pause before sleeping */
/* Tasks a thread for work split into equal units (coli_cpu_pool_tasks): a
 * thread that stalls (descheduled on a busy host) holds back a quarter of
 * its share, which the others cannot take, instead of all of it; more
 * costs a claim (one fetch_add) and a smaller run a task. */
#define TASKS_PER_THREAD 4

struct coli_cpu_pool {
	int n_threads;      /* workers + the caller */
	pthread_t *threads; /* [n_threads - 1] */
	int stop;
	/* this round's job, written by the caller before it publishes the
	 * ticket; workers read it once per claimed task */
	_Alignas(64) void (*fn)(void *arg, int task, int n_tasks);
	void *arg;
	int base, n_total; /* this round runs tasks base + [0, n) of n_total */
	/* One line each for what the spinning workers read (gen, sleepers),
	 * what every claim writes (ticket) and what every finished task writes
	 * (done): on one line, each claim and each finish invalidated the line
	 * fifteen spinners were reading. */
	_Alignas(64) uint32_t gen;
	int sleepers;
	_Alignas(64) uint64_t ticket;
	_Alignas(64) int done;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

static void futex_wait(uint32_t *addr, uint32_t val)
{
	syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(uint32_t *addr)
{
	syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

#define ROUND_MAX 0xffff

/* Claim and run tasks until the current round has none left. A claim is
 * one fetch_add, which always succeeds (a CAS loop retried under contention:
 * sixteen threads claiming at once cost O(n^2) line transfers). The count n
 * travels in the same word as the index, so the claim is judged against the
 * round it was made in, whichever that is: a worker that wakes late takes a
 * task of the current round or none. A claim past n takes nothing; it only
 * moves the index, which has 32 bits of room, until the next round's store. */
static void run_tasks(struct coli_cpu_pool *p)
{
	for (;;) {
		/* acquire pairs with the caller's release store of this round's
		 * ticket (the claims after it continue its release sequence): the
		 * job fields below are this round's */
		uint64_t t = __atomic_fetch_add(&p->ticket, 1, __ATOMIC_ACQUIRE);
		int n = (int)(t >> 32);
		uint32_t idx = (uint32_t)t;

		if (idx >= (uint32_t)n)
			return;
		__atomic_load_n(&p->fn, __ATOMIC_RELAXED)(
		    __atomic_load_n(&p->arg, __ATOMIC_RELAXED),
		    __atomic_load_n(&p->base, __ATOMIC_RELAXED) + (int)idx,
		    __atomic_load_n(&p->n_total, __ATOMIC_RELAXED));
		/* release: the task's writes happen-before the caller's acquire
		 * load that sees done == n */
		__atomic_add_fetch(&p->done, 1, __ATOMIC_RELEASE);
	}
}

static void *worker(void *vp)
{
	struct coli_cpu_pool *p = vp;
	uint32_t seen = 0;

	for (;;) {
		uint32_t g;
		int spins = 0;

		while ((g = __atomic_load_n(&p->gen, __ATOMIC_ACQUIRE)) == seen) {
			if (++spins < SPIN_ITERS) {
				cpu_relax();
				continue;
			}
			__atomic_add_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
			if (__atomic_load_n(&p->gen, __ATOMIC_SEQ_CST) == seen)
				futex_wait(&p->gen, seen);
			__atomic_sub_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
			spins = 0;
		}
		seen = g;
		if (__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE))
			return NULL;
		run_tasks(p);
	}
}

int coli_cpu_pool_create(int n_threads, coli_cpu_pool_t **out)
{
	struct coli_cpu_pool *p;
	int err;

	if (n_threads <= 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		n_threads = n > 0 ? (int)n : 1;
	}
	p = aligned_alloc(_Alignof(struct coli_cpu_pool), sizeof(*p)); /* its 64-byte lines */
	if (!p)
		return -ENOMEM;
	memset(p, 0, sizeof(*p));
	p->n_threads = 1;
	p->threads = calloc((size_t)n_threads, sizeof(pthread_t));
	if (!p->threads) {
		free(p);
		return -ENOMEM;
	}
	for (int i = 0; i < n_threads - 1; i++) {
		err = pthread_create(&p->threads[i], NULL, worker, p);
		if (err) {
			coli_cpu_pool_destroy(p);
			return -err;
		}
		p->n_threads++;
	}
	*out = p;
	return 0;
}

void coli_cpu_pool_destroy(coli_cpu_pool_t *p)
{
	if (!p)
		return;
	__atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&p->gen, 1, __ATOMIC_SEQ_CST);
	futex_wake_all(&p->gen);
	for (int i = 0; i < p->n_threads - 1; i++)
		pthread_join(p->threads[i], NULL);
	free(p->threads);
	free(p);
}

int coli_cpu_pool_threads(const coli_cpu_pool_t *p)
{
	return p ? p->n_threads : 1;
}

int coli_cpu_pool_tasks(const coli_cpu_pool_t *p, int units)
{
	int n = p ? TASKS_PER_THREAD * p->n_threads : 1;

	return units < n ? (units > 1 ? units : 1) : n;
}

/* Wait until *x >= n (acquire): spin a while, then give the core away each
 * time round, so that the thread being waited for, if it shares this core
 * (a host busier than its threads), gets to run. */
static void wait_for(const int *x, int n)
{
	for (int spins = 0; __atomic_load_n(x, __ATOMIC_ACQUIRE) < n; spins++) {
		if (spins < SPIN_ITERS)
			cpu_relax();
		else
			sched_yield();
	}
}

/* One round of n <= ROUND_MAX tasks, base..base+n-1 of n_total; the caller
 * runs side(side_arg) first, if given, while the workers start. */
static void run_round(coli_cpu_pool_t *p, void (*fn)(void *, int, int), void *arg, int base, int n,
                      int n_total, void (*side)(void *), void *side_arg)
{
	uint32_t g = p->gen + 1; /* only the caller writes gen */

	__atomic_store_n(&p->fn, fn, __ATOMIC_RELAXED);
	__atomic_store_n(&p->arg, arg, __ATOMIC_RELAXED);
	__atomic_store_n(&p->base, base, __ATOMIC_RELAXED);
	__atomic_store_n(&p->n_total, n_total, __ATOMIC_RELAXED);
	__atomic_store_n(&p->done, 0, __ATOMIC_RELAXED);
	/* release: the job fields above happen-before any successful claim */
	__atomic_store_n(&p->ticket, (uint64_t)n << 32, __ATOMIC_RELEASE);
	/* publish: seq_cst pairs with the sleepers check below and the
	 * worker's increment of sleepers before it waits */
	__atomic_store_n(&p->gen, g, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&p->sleepers, __ATOMIC_SEQ_CST) > 0)
		futex_wake_all(&p->gen);

	if (side)
		side(side_arg);
	run_tasks(p);

	/* barrier: acquire pairs with each task's release increment of done */
	wait_for(&p->done, n);
}

void coli_cpu_pool_run_beside(coli_cpu_pool_t *p, void (*fn)(void *arg, int task, int n_tasks),
                              void *arg, int n_tasks, void (*side)(void *side_arg), void *side_arg)
{
	if (n_tasks <= 0 || !p || p->n_threads == 1 || n_tasks == 1) {
		if (side)
			side(side_arg);
		for (int t = 0; t < n_tasks; t++)
			fn(arg, t, n_tasks);
		return;
	}
	for (int base = 0; base < n_tasks; base += ROUND_MAX) {
		run_round(p, fn, arg, base, n_tasks - base < ROUND_MAX ? n_tasks - base : ROUND_MAX,
		          n_tasks, side, side_arg);
		side = NULL;
	}
}

void coli_cpu_pool_run(coli_cpu_pool_t *p, void (*fn)(void *arg, int task, int n_tasks), void *arg,
                       int n_tasks)
{
	coli_cpu_pool_run_beside(p, fn, arg, n_tasks, NULL, NULL);
}

/* Phases in one round: task t belongs to the phase whose range holds it, and
 * runs once every task of the phase before is done. Tasks are claimed in
 * index order, so every task of an earlier phase is already claimed by a
 * thread that is running it (or ran it), and none of those waits on a later
 * phase: the spin always ends. The caller claims tasks only after its side
 * job, so a long side job holds no phase back (three rounds held every
 * phase after the first until the caller came back). */
struct phased {
	const struct coli_pool_phase *ph;
	int first[COLI_POOL_PHASES + 1]; /* each phase's first task */
	int done[COLI_POOL_PHASES];      /* its tasks finished */
};

static void phased_task(void *arg, int t, int n_total)
{
	struct phased *q = arg;
	int k = 0;

	(void)n_total;
	while (t >= q->first[k + 1])
		k++;
	/* every earlier phase, not only the one before (which may have no
	 * tasks); acquire pairs with the release increments below: their
	 * writes are visible to this task */
	for (int j = 0; j < k; j++)
		wait_for(&q->done[j], q->ph[j].n_tasks);
	q->ph[k].fn(q->ph[k].arg, t - q->first[k], q->ph[k].n_tasks);
	__atomic_add_fetch(&q->done[k], 1, __ATOMIC_RELEASE);
}

void coli_cpu_pool_run_phases(coli_cpu_pool_t *p, const struct coli_pool_phase *ph, int n,
                              void (*side)(void *side_arg), void *side_arg)
{
	struct phased q = {.ph = ph};

	if (n > COLI_POOL_PHASES)
		n = COLI_POOL_PHASES; /* (the header's bound; callers stay under it) */
	for (int k = 0; k < n; k++)
		q.first[k + 1] = q.first[k] + (ph[k].n_tasks > 0 ? ph[k].n_tasks : 0);
	for (int k = n; k < COLI_POOL_PHASES; k++)
		q.first[k + 1] = q.first[k];
	if (!p || p->n_threads == 1 || q.first[n] > ROUND_MAX) { /* one thread: in order */
		if (side)
			side(side_arg);
		for (int k = 0; k < n; k++)
			for (int t = 0; t < ph[k].n_tasks; t++)
				ph[k].fn(ph[k].arg, t, ph[k].n_tasks);
		return;
	}
	coli_cpu_pool_run_beside(p, phased_task, &q, q.first[n], side, side_arg);
}
