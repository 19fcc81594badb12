/*
 * cpu/pool.c — the engine's CPU thread pool: n_threads - 1 pthread workers plus
 * the calling thread, which always takes part in the work.
 *
 * One round (coli_cpu_pool_run) at a time, driven by the caller:
 *
 *   job      fn, arg, n_tasks            written by the caller before publishing
 *   gen      uint32 futex word           bumped (seq_cst) to publish a round
 *   ticket   uint64 = gen << 32 | next   a task is claimed by a CAS that checks
 *                                        the round, so a worker that wakes late
 *                                        can never take a task of a newer round
 *   done     tasks finished this round   the caller waits for done == n_tasks
 *
 * Workers spin on gen for a while (a decode step launches rounds every few
 * microseconds) and then sleep on the futex; `sleepers` lets the caller skip
 * the wake syscall when nobody sleeps (a Dekker pair with seq_cst on both
 * sides: either the caller sees the sleeper or the sleeper sees the new gen,
 * and FUTEX_WAIT re-checks the word in the kernel).
 *
 * Tasks must not call coli_cpu_pool_run on the same pool. The pool does not
 * pin threads (mem/ owns NUMA placement). Note: OpenBLAS keeps its own threads;
 * when both run at once they oversubscribe the cores — the engine should call
 * OpenBLAS single-threaded from inside pool tasks, or not overlap the two.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu/cpu.h"

#define SPIN_ITERS (1 << 15) /* ~50-500 us of pause before sleeping */

struct coli_cpu_pool {
	int n_threads;      /* workers + the caller */
	pthread_t *threads; /* [n_threads - 1] */
	void (*fn)(void *arg, int task, int n_tasks);
	void *arg;
	int n_tasks;
	uint32_t gen;
	uint64_t ticket;
	int done;
	int sleepers;
	int stop;
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

/* Claim and run tasks of round g until none is left. */
static void run_tasks(struct coli_cpu_pool *p, uint32_t g)
{
	/* The job fields were written before gen was published (release via the
	 * seq_cst bump) and are not rewritten until every task of round g is
	 * done, which needs our claims below; a stale read is harmless because
	 * the CAS then fails on the round number. */
	void (*fn)(void *, int, int) = __atomic_load_n(&p->fn, __ATOMIC_ACQUIRE);
	void *arg = __atomic_load_n(&p->arg, __ATOMIC_ACQUIRE);
	int n = __atomic_load_n(&p->n_tasks, __ATOMIC_ACQUIRE);
	uint64_t t = __atomic_load_n(&p->ticket, __ATOMIC_ACQUIRE);

	for (;;) {
		if ((uint32_t)(t >> 32) != g || (int)(uint32_t)t >= n)
			return;
		if (!__atomic_compare_exchange_n(&p->ticket, &t, t + 1, 0, __ATOMIC_ACQ_REL,
		                                 __ATOMIC_ACQUIRE))
			continue; /* t was reloaded */
		fn(arg, (int)(uint32_t)t, n);
		/* release: the task's writes happen-before the caller's acquire
		 * load that sees done == n_tasks */
		__atomic_add_fetch(&p->done, 1, __ATOMIC_RELEASE);
		t = __atomic_load_n(&p->ticket, __ATOMIC_ACQUIRE);
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
		run_tasks(p, g);
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
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
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

void coli_cpu_pool_run(coli_cpu_pool_t *p, void (*fn)(void *arg, int task, int n_tasks), void *arg,
                       int n_tasks)
{
	if (n_tasks <= 0)
		return;
	if (!p || p->n_threads == 1 || n_tasks == 1) {
		for (int t = 0; t < n_tasks; t++)
			fn(arg, t, n_tasks);
		return;
	}
	uint32_t g = p->gen + 1; /* only the caller writes gen */

	__atomic_store_n(&p->fn, fn, __ATOMIC_RELAXED);
	__atomic_store_n(&p->arg, arg, __ATOMIC_RELAXED);
	__atomic_store_n(&p->n_tasks, n_tasks, __ATOMIC_RELAXED);
	__atomic_store_n(&p->done, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&p->ticket, (uint64_t)g << 32, __ATOMIC_RELEASE);
	/* publish: seq_cst pairs with the sleepers check below and the
	 * worker's increment of sleepers before it waits */
	__atomic_store_n(&p->gen, g, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&p->sleepers, __ATOMIC_SEQ_CST) > 0)
		futex_wake_all(&p->gen);

	run_tasks(p, g);

	/* barrier: acquire pairs with each task's release increment of done */
	for (int spins = 0; __atomic_load_n(&p->done, __ATOMIC_ACQUIRE) < n_tasks; spins++) {
		if (spins < SPIN_ITERS)
			cpu_relax();
		else
			sched_yield();
	}
}
