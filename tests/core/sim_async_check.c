/*
 * tests/core/sim_async_check.c — the simulated device catches what its
 * at-once copies would hide: a GPU reads an async upload's registered source
 * when the stream gets there, so the host writing it before a sync is a bug
 * (one shipped on 2026-11-30: placement found it on the H200 only). The sim
 * must abort on it, and must not on the legal orders: rewriting after a
 * sync, and a download into the source queued behind the upload. The same
 * for a staging copy's source (a pinned RAM-tier slab): not to be written
 * before a fence queued behind the copy is known to have landed. And a
 * download reaches the host at the next sync, not before (what a host
 * reading it early would see on a GPU).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/dev/dev.h"
#include "mem/mem.h"

enum { N = 4096 };

/* In a child: upload from registered memory, then act(order); the exit
 * status, or the signal that ended it. */
static int child(int order)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		struct coli_dev *d;
		char *buf;
		size_t sz[] = {N}, bytes;
		void **dst[] = {(void **)&buf};
		uint64_t dev;
		struct rlimit no_core = {0, 0};

		setrlimit(RLIMIT_CORE, &no_core); /* the abort is expected */
		if (coli_dev_sim_open(&d, 0, 1 << 20, 0) || coli_dev_alloc(d, N, &dev) ||
		    coli_dev_stage_init(d, 2))
			_exit(2);
		if (!coli_mem_alloc_buffers(sz, dst, 1, COLI_MEM_NODE_ANY, &bytes))
			_exit(2);
		memset(buf, 1, N);
		if (order >= 3) { /* a staging copy into slot 0, the fence in slot 1 */
			if (coli_dev_stage_copy(d, 0, dev, buf, N) || coli_dev_stage_fence(d, 1))
				_exit(2);
			if (order == 3) /* the bug: unpinned before the fence landed */
				buf[100] = 2;
			while (!coli_dev_stage_landed(d, 1))
				;
			buf[100] = 3;
			coli_dev_sync(d);
			_exit(0);
		}
		if (coli_dev_upload_async(d, dev, buf, N))
			_exit(2);
		if (order == 0) { /* the bug: written before the stream is known past it */
			buf[100] = 2;
			coli_dev_sync(d);
		} else if (order == 1) { /* after a sync */
			coli_dev_sync(d);
			buf[100] = 2;
			coli_dev_sync(d);
		} else { /* the device writes it, behind the upload in stream order */
			coli_dev_download_async(d, buf, dev, N);
			coli_dev_sync(d);
		}
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

int main(void)
{
	int fails = 0, rc;

	rc = child(0);
	printf("host write before sync: %s (status %d)\n",
	       rc == 128 + SIGABRT ? "aborted, as it must" : "NOT caught", rc);
	fails += rc != 128 + SIGABRT;
	rc = child(1);
	printf("host write after sync: %s (status %d)\n", rc == 0 ? "fine" : "FAILED", rc);
	fails += rc != 0;
	rc = child(2);
	printf("download into the source after the upload: %s (status %d)\n",
	       rc == 0 ? "fine" : "FAILED", rc);
	fails += rc != 0;
	{ /* a download: the old bytes until the sync */
		struct coli_dev *d;
		uint64_t dev;
		char *host = malloc(N), *fill = malloc(N);
		int early, late;

		if (!host || !fill || coli_dev_sim_open(&d, 0, 1 << 20, 0) ||
		    coli_dev_alloc(d, N, &dev))
			return 1;
		memset(fill, 7, N), memset(host, 0, N);
		coli_dev_upload(d, dev, fill, N);
		coli_dev_download_async(d, host, dev, N);
		early = host[N - 1];
		coli_dev_sync(d);
		late = host[N - 1];
		printf("download read before the sync %d, after it %d (want 0, 7)\n", early, late);
		fails += early != 0 || late != 7;
		coli_dev_close(d);
		free(host), free(fill);
	}
	rc = child(3);
	printf("staging source written before its fence landed: %s (status %d)\n",
	       rc == 128 + SIGABRT ? "aborted, as it must" : "NOT caught", rc);
	fails += rc != 128 + SIGABRT;
	rc = child(4);
	printf("staging source written after its fence landed: %s (status %d)\n",
	       rc == 0 ? "fine" : "FAILED", rc);
	fails += rc != 0;
	return fails != 0;
}
