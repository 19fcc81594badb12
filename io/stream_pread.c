/*
 * io/stream_pread.c — the streamer's fallback backend: a few threads doing
 * pread(2), for kernels or sandboxes without io_uring (ENOSYS; EPERM under a
 * container's seccomp profile) and for tests (COLI_IO_PREAD).
 *
 * Workers sleep on work_cv, pop the next slot under mu (demand queue first,
 * the same order io_uring's dispatcher uses), read without the lock and hand
 * the outcome to stream_attempt_done, which verifies, retries or finishes
 * exactly as for io_uring. A worker reads one attempt at a time: a short
 * pread goes back through the queue like any short read.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "io/io_internal.h"

static void *worker_main(void *arg)
{
	struct coli_io_stream *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct stream_req *r;
		char *dst;
		ssize_t res;
		int i, fd;

		i = stream_queue_pop(s);
		if (i < 0) {
			if (s->stop)
				break;
			pthread_cond_wait(&s->work_cv, &s->mu);
			continue;
		}
		r = &s->req[i];
		fd = s->fd;
		pthread_mutex_unlock(&s->mu);

		dst = s->base + (size_t)i * s->slot_bytes + r->done;
		do
			res = pread(fd, dst, r->len - r->done, (off_t)(r->off + r->done));
		while (res < 0 && errno == EINTR);
		if (res < 0)
			res = -errno;
		if (s->o.fault)
			res = s->o.fault(s->o.fault_arg, r->li, r->expert, r->tries,
			                 s->base + (size_t)i * s->slot_bytes, (int)res);
		r->tries++;
		pthread_mutex_lock(&s->mu);
		stream_left_flight(s, i);
		pthread_mutex_unlock(&s->mu);
		stream_attempt_done(s, i, (int)res);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

int stream_pread_start(struct coli_io_stream *s)
{
	s->workers = calloc((size_t)s->o.threads, sizeof(*s->workers));
	if (!s->workers)
		return -ENOMEM;
	for (int i = 0; i < s->o.threads; i++) {
		int rc = pthread_create(&s->workers[i], NULL, worker_main, s);

		if (rc)
			return -rc;
		s->n_workers++;
	}
	return 0;
}

void stream_pread_stop(struct coli_io_stream *s)
{
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_broadcast(&s->work_cv);
	pthread_mutex_unlock(&s->mu);
	for (int i = 0; i < s->n_workers; i++)
		pthread_join(s->workers[i], NULL);
	free(s->workers);
	s->workers = NULL;
	s->n_workers = 0;
}
