/*
 * tests/ptx/host_wait.c — the compute stream waiting for the host
 * (coli_gpu_host_wait / coli_gpu_host_signal, cuStreamWaitValue32): what is
 * queued behind the wait does not run before the host signals its sequence
 * number, runs after it, and a wait for a number already signalled does not
 * hold the stream. Observed through a download into registered (mapped)
 * host memory, which the device writes itself (no host wait is needed to
 * see it land, so the test never blocks on a held stream). Skips (77) without
 * a GPU or where the driver has no stream waits.
 */
#include <string.h>
#include <time.h>

#include "ptx_test.h"

/* Polls *p for up to ms milliseconds: 1 once it equals v. */
static int lands(volatile const unsigned *p, unsigned v, int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if (*p == v)
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	return 0;
}

int main(void)
{
	static unsigned host[1024] __attribute__((aligned(4096)));
	const unsigned vals[3] = {0x11111111u, 0x22222222u, 0x33333333u};
	uint64_t src[3];
	int rc = ptx_test_open(), fails = 0;
	struct timespec hold = {0, 50 * 1000 * 1000};

	if (rc)
		return rc;
	if (!coli_gpu_has_host_wait(g_gpu)) {
		printf("skip: this driver has no stream waits (cuStreamWaitValue32)\n");
		coli_gpu_close(g_gpu);
		return 77;
	}
	if (coli_gpu_host_register(g_gpu, host, sizeof(host))) {
		printf("registering host memory failed\n");
		return 1;
	}
	for (int i = 0; i < 3; i++)
		src[i] = dev_copy(&vals[i], sizeof(unsigned));
	/* twice: a wait, a download behind it; held until the signal */
	for (int round = 0; round < 2; round++) {
		uint32_t seq = (uint32_t)round + 1;

		host[0] = 0;
		if (coli_gpu_host_wait(g_gpu, seq) ||
		    coli_gpu_download_async(g_gpu, host, src[round], sizeof(unsigned)))
			return 1;
		nanosleep(&hold, NULL);
		if (host[0] != 0) {
			printf("round %d: the download behind the wait ran before the signal\n",
			       round);
			fails++;
		}
		coli_gpu_host_signal(g_gpu, seq);
		if (!lands(&host[0], vals[round], 5000)) {
			printf("round %d: the download did not land within 5 s of the signal\n",
			       round);
			return 1; /* the stream may be held: no sync */
		}
		if (coli_gpu_sync(g_gpu))
			return 1;
	}
	/* a wait for the number the host already stored passes at once */
	host[0] = 0;
	if (coli_gpu_host_wait(g_gpu, 2) ||
	    coli_gpu_download_async(g_gpu, host, src[2], sizeof(unsigned)))
		return 1;
	if (!lands(&host[0], vals[2], 5000)) {
		printf("a wait for the last signalled number held the stream\n");
		coli_gpu_host_signal(g_gpu, 2);
		return 1;
	}
	if (coli_gpu_sync(g_gpu))
		return 1;
	printf("stream waits on the host: held until signalled (2 rounds), passed when already "
	       "signalled; %d failures\n",
	       fails);
	for (int i = 0; i < 3; i++)
		coli_gpu_free(g_gpu, src[i]);
	coli_gpu_host_unregister(g_gpu, host);
	coli_gpu_close(g_gpu);
	return fails != 0;
}
