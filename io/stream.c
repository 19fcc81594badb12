/*
 * io/stream.c — the slab streamer: whole-slab reads into mem/'s slots, the
 * parts every backend shares (queues, retries, checksums, statistics) and the
 * io_uring backend. The pread backend is io/stream_pread.c.
 *
 * Requests (io_internal.h, struct stream_req) are indexed by slot: a slot
 * has at most one read pending. Three FIFO queues hold QUEUED slots, demand
 * (q[0]) before prefetch (q[1]) before background (q[2]); a dispatcher hands
 * them to the kernel while fewer than queue_depth are in flight, background
 * reads only while fewer than BG_INFLIGHT of them are, so a demand read never
 * waits behind a read that was merely queued, and shares the disk with at
 * most BG_INFLIGHT background reads.
 *
 * io_uring: the engine thread (submit/wait) and the reaper thread (the only
 * CQ consumer) both prepare SQEs, always under mu, and submit before
 * unlocking, so no SQE outlives the lock. The reaper blocks in
 * io_uring_wait_cqe without mu (waiting touches only the CQ). Reads go to
 * the registered slot arena with read_fixed: buffers are registered as
 * iovecs of whole slots, each at most 1 GiB (the kernel's per-buffer cap).
 *
 * An attempt's outcome (stream_attempt_done): a short read continues from
 * where it stopped (rounded down to 4 KiB under O_DIRECT); EIO and
 * end-of-file are retried up to opts.retries times; a checksum mismatch is
 * re-read the same number of times (a transient bus or cache error heals, a
 * corrupt file does not), then the read fails with the slab named.
 * EINVAL from an O_DIRECT read switches the stream to a buffered fd.
 *
 * Checksums (opts.verify): by default every slab is hashed the first time
 * it lands after the stream was created, whatever that costs (xxh64 runs at
 * several GB/s a core, above any disk; `coli bench io` prints the rate), so
 * corruption on disk is always caught before a token uses it; a slab read
 * again after an eviction is not hashed again (ON: every read; OFF: none).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "io/io_internal.h"

#define STOP_TAG      UINT64_MAX
#define MAX_BUF_BYTES ((size_t)1 << 30)
/* Background reads in flight at once. With a queue depth of them, the
 * warm-up read of a whole model at open held a short run's first demand reads
 * behind it (2-token prompt, 8-layer qwen3-30b q4, 2-core VM: 1.5 tok/s
 * prefill with 32 in flight, 2.1-2.6 with 8, 6.5 with 1, decode no slower). */
#define BG_INFLIGHT 1

static atomic_int g_said_direct, g_said_uring, g_said_fixed;

/* One line on stderr, once per process per flag. */
#define ANNOUNCE(s, flag, ...)                                                                     \
	do {                                                                                       \
		if (!(s)->o.quiet && !atomic_exchange(&(flag), 1))                                 \
			fprintf(stderr, __VA_ARGS__);                                              \
	} while (0)

double stream_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void coli_io_stream_opts_init(struct coli_io_stream_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->backend = COLI_IO_AUTO;
	o->direct = 1;
	o->verify = COLI_IO_VERIFY_FIRST;
	o->queue_depth = 32;
	o->threads = 4;
	o->retries = 3;
}

/* ---- queues (mu held) ---- */

static void queue_push(struct coli_io_stream *s, int prio, int i)
{
	struct stream_queue *q = &s->q[prio];

	q->v[(q->head + q->n++) % s->n_slots] = i;
}

static void queue_remove(struct coli_io_stream *s, int prio, int i)
{
	struct stream_queue *q = &s->q[prio];
	int k, w = 0;

	for (k = 0; k < q->n; k++) {
		int v = q->v[(q->head + k) % s->n_slots];

		if (v != i)
			q->v[(q->head + w++) % s->n_slots] = v;
	}
	q->n = w;
}

static int queue_take(struct coli_io_stream *s, int prio)
{
	struct stream_queue *q = &s->q[prio];
	int i;

	if (!q->n)
		return -1;
	i = q->v[q->head];
	q->head = (q->head + 1) % s->n_slots;
	q->n--;
	return i;
}

int stream_queue_pop(struct coli_io_stream *s)
{
	int i = queue_take(s, COLI_IO_DEMAND);

	if (i < 0)
		i = queue_take(s, COLI_IO_PREFETCH);
	if (i < 0 && s->inflight_bg < BG_INFLIGHT && (i = queue_take(s, COLI_IO_BACKGROUND)) >= 0) {
		s->req[i].bg = 1;
		s->inflight_bg++;
	}
	if (i >= 0) {
		s->req[i].state = SR_INFLIGHT;
		s->inflight++;
	}
	return i;
}

void stream_left_flight(struct coli_io_stream *s, int i)
{
	s->inflight--;
	if (s->req[i].bg) {
		s->req[i].bg = 0;
		s->inflight_bg--;
	}
}

/* ---- io_uring dispatch (mu held) ---- */

static void finish_locked(struct coli_io_stream *s, int i, int err);

static void uring_dispatch(struct coli_io_stream *s)
{
	int prepped = 0, rc;

	while (s->inflight < s->o.queue_depth && io_uring_sq_space_left(&s->ring)) {
		struct io_uring_sqe *sqe;
		struct stream_req *r;
		char *dst;
		int i = stream_queue_pop(s);

		if (i < 0)
			break;
		sqe = io_uring_get_sqe(&s->ring); /* there is room: checked above */
		r = &s->req[i];
		dst = s->base + (size_t)i * s->slot_bytes + r->done;
		if (s->fixed)
			io_uring_prep_read_fixed(sqe, s->fd, dst, (unsigned)(r->len - r->done),
			                         r->off + r->done, i / s->slots_per_buf);
		else
			io_uring_prep_read(sqe, s->fd, dst, (unsigned)(r->len - r->done),
			                   r->off + r->done);
		io_uring_sqe_set_data64(sqe, (uint64_t)i);
		prepped++;
	}
	if (!prepped)
		return;
	for (int tries = 0; tries < 100; tries++) {
		rc = io_uring_submit(&s->ring);
		if (rc >= 0 || (rc != -EAGAIN && rc != -EBUSY && rc != -EINTR))
			break;
		/* the kernel is short of resources: let completions drain */
		pthread_mutex_unlock(&s->mu);
		usleep(100);
		pthread_mutex_lock(&s->mu);
	}
	if (rc < 0) {
		/* SQEs we could not submit: fail their reads rather than hang */
		for (int i = 0; i < s->n_slots; i++)
			if (s->req[i].state == SR_INFLIGHT && s->req[i].done == 0) {
				stream_left_flight(s, i);
				finish_locked(s, i, rc);
			}
	}
}

static void kick_locked(struct coli_io_stream *s)
{
	if (s->backend == COLI_IO_URING)
		uring_dispatch(s);
	else
		pthread_cond_broadcast(&s->work_cv);
}

static void *reaper_main(void *arg)
{
	struct coli_io_stream *s = arg;

	for (;;) {
		struct io_uring_cqe *cqe;
		uint64_t tag;
		int res, rc;

		rc = io_uring_wait_cqe(&s->ring, &cqe);
		if (rc == -EINTR || rc == -EAGAIN)
			continue;
		if (rc < 0) {
			fprintf(stderr, "coli: io_uring wait failed: %s\n", strerror(-rc));
			break;
		}
		tag = io_uring_cqe_get_data64(cqe);
		res = cqe->res;
		io_uring_cqe_seen(&s->ring, cqe);
		if (tag == STOP_TAG)
			break;
		pthread_mutex_lock(&s->mu);
		stream_left_flight(s, (int)tag);
		pthread_mutex_unlock(&s->mu);
		if (s->o.fault) {
			struct stream_req *r = &s->req[tag];

			res = s->o.fault(s->o.fault_arg, r->li, r->expert, r->tries,
			                 s->base + tag * s->slot_bytes, res);
		}
		s->req[tag].tries++;
		stream_attempt_done(s, (int)tag, res);
	}
	return NULL;
}

/* ---- outcomes ---- */

static void finish_locked(struct coli_io_stream *s, int i, int err)
{
	struct stream_req *r = &s->req[i];

	r->err = err;
	r->state = SR_IDLE;
	if (!err) {
		s->st.reads++;
		s->st.bytes += r->len;
	}
	if (--s->pending == 0)
		s->st.busy_s += stream_now() - s->busy_t0;
	pthread_cond_broadcast(&s->done_cv);
}

static void requeue(struct coli_io_stream *s, int i)
{
	pthread_mutex_lock(&s->mu);
	s->req[i].state = SR_QUEUED;
	s->st.retries++;
	/* a read already started finishes first, whatever its class; prio says
	 * the queue it is in: were it left PREFETCH, coli_io_stream_wait would
	 * "promote" it into the demand queue a second time, two workers would
	 * read it and finish it twice (pending went to -1: destroy hung) */
	s->req[i].prio = COLI_IO_DEMAND;
	queue_push(s, COLI_IO_DEMAND, i);
	kick_locked(s);
	pthread_mutex_unlock(&s->mu);
}

static void finish(struct coli_io_stream *s, int i, int err)
{
	pthread_mutex_lock(&s->mu);
	finish_locked(s, i, err);
	kick_locked(s);
	pthread_mutex_unlock(&s->mu);
}

/* Whether a landed read of (li, expert) is to be hashed. */
static int wants_hash(const struct coli_io_stream *s, int li, uint32_t expert)
{
	return s->verify == COLI_IO_VERIFY_ON ||
	       (s->verify == COLI_IO_VERIFY_FIRST &&
	        !__atomic_load_n(&s->checked[s->c->first_slab[li] + expert], __ATOMIC_RELAXED));
}

void stream_attempt_done(struct coli_io_stream *s, int i, int res)
{
	struct stream_req *r = &s->req[i];

	if (res > 0) {
		r->done += (size_t)res;
		if (r->done < r->len) {
			if (s->fd_direct)
				r->done &= ~(size_t)(COLI_SLAB_ALIGN - 1);
			requeue(s, i);
			return;
		}
		if (wants_hash(s, r->li, r->expert)) {
			const char *p = s->base + (size_t)i * s->slot_bytes;
			double t0 = stream_now();
			uint64_t h = coli_io_xxh64(p, r->len);
			uint64_t want = coli_io_container_slab_xxh64(s->c, r->li, r->expert);

			pthread_mutex_lock(&s->mu);
			s->st.hash_s += stream_now() - t0;
			s->st.verified++;
			pthread_mutex_unlock(&s->mu);
			/* a flag, not an order: two reads of one slab at once both hash */
			if (h == want)
				__atomic_store_n(&s->checked[s->c->first_slab[r->li] + r->expert],
				                 1, __ATOMIC_RELAXED);
			if (h != want) {
				r->done = 0;
				if (++r->checks <= s->o.retries) {
					requeue(s, i);
					return;
				}
				finish(s, i, -EBADMSG);
				return;
			}
		}
		finish(s, i, 0);
		return;
	}
	if (res == -EINVAL && s->fd_direct) {
		int fd = open(coli_io_container_path(s->c), O_RDONLY | O_CLOEXEC);

		if (fd >= 0) {
			pthread_mutex_lock(&s->mu);
			if (s->fd_direct) { /* another thread may have switched already */
				s->fd_old = s->fd;
				s->fd = fd;
				s->fd_direct = 0;
				fd = -1;
				ANNOUNCE(
				    s, g_said_direct,
				    "coli: O_DIRECT reads refused on %s: buffered reads (through "
				    "the page cache)\n",
				    coli_io_container_path(s->c));
			}
			pthread_mutex_unlock(&s->mu);
			if (fd >= 0)
				close(fd);
			r->done &= ~(size_t)(COLI_SLAB_ALIGN - 1);
			requeue(s, i);
			return;
		}
	}
	if (res == -EINTR || res == -EAGAIN) {
		requeue(s, i);
		return;
	}
	if (++r->attempts <= s->o.retries) {
		requeue(s, i);
		return;
	}
	finish(s, i, res ? res : -ENODATA);
}

/* ---- the API ---- */

static int open_fd(struct coli_io_stream *s)
{
	const char *path = coli_io_container_path(s->c);

	s->fd_old = -1;
	if (s->o.direct) {
		s->fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (s->fd >= 0) {
			s->fd_direct = 1;
			return 0;
		}
		if (errno != EINVAL)
			return io_err(-errno, path, "cannot open for reading: %s", strerror(errno));
		ANNOUNCE(s, g_said_direct,
		         "coli: O_DIRECT refused on %s (tmpfs?): buffered reads (through the page "
		         "cache)\n",
		         path);
	}
	s->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0)
		return io_err(-errno, path, "cannot open for reading: %s", strerror(errno));
	return 0;
}

static int uring_start(struct coli_io_stream *s)
{
	int rc, n_bufs;
	struct iovec *iov;

	rc = io_uring_queue_init((unsigned)s->o.queue_depth * 2, &s->ring, 0);
	if (rc < 0)
		return rc;
	s->ring_ok = 1;
	s->slots_per_buf =
	    s->slot_bytes >= MAX_BUF_BYTES ? 1 : (int)(MAX_BUF_BYTES / s->slot_bytes);
	n_bufs = (s->n_slots + s->slots_per_buf - 1) / s->slots_per_buf;
	iov = calloc((size_t)n_bufs, sizeof(*iov));
	if (iov && s->slot_bytes <= MAX_BUF_BYTES) {
		for (int b = 0; b < n_bufs; b++) {
			int first = b * s->slots_per_buf;
			int n = s->n_slots - first < s->slots_per_buf ? s->n_slots - first
			                                              : s->slots_per_buf;

			iov[b].iov_base = s->base + (size_t)first * s->slot_bytes;
			iov[b].iov_len = (size_t)n * s->slot_bytes;
		}
		rc = io_uring_register_buffers(&s->ring, iov, (unsigned)n_bufs);
		s->fixed = rc == 0;
		if (rc)
			ANNOUNCE(s, g_said_fixed,
			         "coli: io_uring buffer registration refused (%s): plain reads\n",
			         strerror(-rc));
	}
	free(iov);
	rc = pthread_create(&s->reaper, NULL, reaper_main, s);
	if (rc)
		return -rc;
	s->reaper_ok = 1;
	return 0;
}

static void uring_stop(struct coli_io_stream *s)
{
	if (s->reaper_ok) {
		struct io_uring_sqe *sqe;

		pthread_mutex_lock(&s->mu);
		sqe = io_uring_get_sqe(&s->ring);
		if (sqe) {
			io_uring_prep_nop(sqe);
			io_uring_sqe_set_data64(sqe, STOP_TAG);
			io_uring_submit(&s->ring);
		}
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->reaper, NULL);
	}
	if (s->ring_ok)
		io_uring_queue_exit(&s->ring);
}

/* The FIRST policy's flags, a byte a slab of every expert layer, indexed
 * as the container indexes its slab checksums (first_slab[li] + expert). */
static int checked_alloc(struct coli_io_stream *s)
{
	const coli_container_t *c = s->c;
	uint64_t n = c->nl ? c->first_slab[c->nl - 1] + c->l[c->nl - 1].n_experts : 0;

	s->checked = calloc((size_t)(n > 0 ? n : 1), 1);
	if (!s->checked)
		return io_err(-ENOMEM, coli_io_container_path(c), "out of memory for the streamer");
	return 0;
}

int coli_io_stream_create(coli_container_t *c, coli_mem_slots_t *slots,
                          const struct coli_io_stream_opts *o, coli_io_stream_t **out)
{
	struct coli_io_stream *s;
	int rc;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (o)
		s->o = *o;
	else
		coli_io_stream_opts_init(&s->o);
	if (s->o.queue_depth <= 0)
		s->o.queue_depth = 32;
	if (s->o.threads <= 0)
		s->o.threads = 4;
	if (s->o.retries < 0)
		s->o.retries = 0;
	s->c = c;
	s->slots = slots;
	s->n_slots = coli_mem_slots_count(slots);
	s->base = coli_mem_slots_base(slots);
	s->slot_bytes = coli_mem_slots_slot_bytes(slots);
	s->fd = s->fd_old = -1;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->done_cv, NULL);
	pthread_cond_init(&s->work_cv, NULL);
	s->req = calloc((size_t)s->n_slots, sizeof(*s->req));
	for (int p = 0; p < 3; p++)
		s->q[p].v = malloc(sizeof(int) * (size_t)s->n_slots);
	if (!s->req || !s->q[0].v || !s->q[1].v || !s->q[2].v) {
		rc = io_err(-ENOMEM, coli_io_container_path(c), "out of memory for the streamer");
		goto err;
	}
	rc = open_fd(s);
	if (rc)
		goto err;
	s->verify = s->o.verify;
	rc = checked_alloc(s);
	if (rc)
		goto err;
	s->backend = COLI_IO_PREAD;
	if (s->o.backend != COLI_IO_PREAD) {
		rc = uring_start(s);
		if (!rc) {
			s->backend = COLI_IO_URING;
		} else {
			ANNOUNCE(s, g_said_uring,
			         "coli: io_uring unavailable (%s): pread threads\n", strerror(-rc));
			uring_stop(s);
			s->ring_ok = s->reaper_ok = 0;
		}
	}
	if (s->backend == COLI_IO_PREAD) {
		rc = stream_pread_start(s);
		if (rc) {
			io_err(rc, coli_io_container_path(c), "cannot start I/O threads");
			goto err;
		}
	}
	snprintf(s->desc, sizeof(s->desc), "%s%s, %s",
	         s->backend == COLI_IO_URING ? "io_uring" : "pread",
	         s->backend == COLI_IO_URING ? (s->fixed ? " fixed buffers" : " plain buffers")
	                                     : "",
	         s->fd_direct ? "O_DIRECT" : "buffered");
	*out = s;
	return 0;
err:
	coli_io_stream_destroy(s);
	return rc;
}

int coli_io_stream_cancel(coli_io_stream_t *s)
{
	int i, n = 0;

	pthread_mutex_lock(&s->mu);
	for (int p = 0; p < 3; p++)
		while ((i = queue_take(s, p)) >= 0) {
			finish_locked(s, i, -ECANCELED);
			n++;
		}
	pthread_mutex_unlock(&s->mu);
	return n;
}

void coli_io_stream_destroy(coli_io_stream_t *s)
{
	if (!s)
		return;
	/* a queued read is not worth waiting for (the warm-up read of a whole
	 * model that fits in RAM would hold a short run's exit): dropped */
	coli_io_stream_cancel(s);
	pthread_mutex_lock(&s->mu);
	while (s->pending)
		pthread_cond_wait(&s->done_cv, &s->mu);
	s->stop = 1;
	pthread_mutex_unlock(&s->mu);
	if (s->backend == COLI_IO_URING)
		uring_stop(s);
	else
		stream_pread_stop(s);
	if (s->fd >= 0)
		close(s->fd);
	if (s->fd_old >= 0)
		close(s->fd_old);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->done_cv);
	pthread_cond_destroy(&s->work_cv);
	free(s->req);
	free(s->checked);
	for (int p = 0; p < 3; p++)
		free(s->q[p].v);
	free(s);
}

int coli_io_stream_submit(coli_io_stream_t *s, const struct coli_io_read *r, int n,
                          enum coli_io_prio prio)
{
	int nl = coli_io_container_n_expert_layers(s->c);

	if (prio != COLI_IO_DEMAND && prio != COLI_IO_PREFETCH && prio != COLI_IO_BACKGROUND)
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	for (int k = 0; k < n; k++) {
		const struct coli_expert_layer *xl =
		    r[k].li >= 0 && r[k].li < nl ? coli_io_container_expert_layer(s->c, r[k].li)
		                                 : NULL;
		int rc = 0;

		if (r[k].slot < 0 || r[k].slot >= s->n_slots || !xl ||
		    r[k].expert >= xl->n_experts || xl->slab_bytes > s->slot_bytes)
			rc = -EINVAL;
		else if (s->req[r[k].slot].state != SR_IDLE) /* pending, or twice in r */
			rc = -EBUSY;
		if (rc) {
			for (int j = 0; j < k; j++) /* undo the marks below */
				s->req[r[j].slot].state = SR_IDLE;
			pthread_mutex_unlock(&s->mu);
			return rc;
		}
		s->req[r[k].slot].state = SR_QUEUED; /* tentative: catches duplicates */
	}
	for (int k = 0; k < n; k++) {
		struct stream_req *q = &s->req[r[k].slot];

		*q = (struct stream_req){
		    .li = r[k].li,
		    .expert = r[k].expert,
		    .off = coli_io_container_slab_offset(s->c, r[k].li, r[k].expert),
		    .len = coli_io_container_expert_layer(s->c, r[k].li)->slab_bytes,
		    .state = SR_QUEUED,
		    .prio = prio,
		};
		if (s->pending++ == 0)
			s->busy_t0 = stream_now();
		queue_push(s, prio, r[k].slot);
	}
	kick_locked(s);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

static int slab_error(struct coli_io_stream *s, struct stream_req *r)
{
	const struct coli_expert_layer *xl = coli_io_container_expert_layer(s->c, r->li);
	const char *path = coli_io_container_path(s->c);
	unsigned layer = xl ? xl->layer : 0;

	if (r->err == -EBADMSG)
		return io_err(r->err, path,
		              "slab (layer %u, expert %u): checksum mismatch on %d reads; the file "
		              "is corrupt (run 'coli verify')",
		              layer, r->expert, r->checks);
	if (r->err == -ECANCELED)
		return io_err(r->err, path,
		              "slab (layer %u, expert %u): read cancelled before it began", layer,
		              r->expert);
	if (r->err == -ENODATA)
		return io_err(
		    -EIO, path,
		    "slab (layer %u, expert %u): unexpected end of file after %d attempts", layer,
		    r->expert, r->attempts);
	return io_err(r->err, path, "slab (layer %u, expert %u): read failed after %d attempts: %s",
	              layer, r->expert, r->attempts, strerror(-r->err));
}

int coli_io_stream_wait(coli_io_stream_t *s, int slot)
{
	struct stream_req *r;
	int rc;

	if (slot < 0 || slot >= s->n_slots)
		return -EINVAL;
	r = &s->req[slot];
	pthread_mutex_lock(&s->mu);
	if (r->state == SR_QUEUED && r->prio != COLI_IO_DEMAND) {
		queue_remove(s, r->prio, slot);
		r->prio = COLI_IO_DEMAND;
		queue_push(s, COLI_IO_DEMAND, slot);
		kick_locked(s);
	}
	while (r->state != SR_IDLE)
		pthread_cond_wait(&s->done_cv, &s->mu);
	rc = r->err ? slab_error(s, r) : 0;
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int coli_io_stream_busy(coli_io_stream_t *s, int slot)
{
	int busy;

	if (slot < 0 || slot >= s->n_slots)
		return 0;
	pthread_mutex_lock(&s->mu);
	busy = s->req[slot].state != SR_IDLE;
	pthread_mutex_unlock(&s->mu);
	return busy;
}

void coli_io_stream_stats(coli_io_stream_t *s, struct coli_io_stream_stats *st)
{
	pthread_mutex_lock(&s->mu);
	*st = s->st;
	if (s->pending)
		st->busy_s += stream_now() - s->busy_t0;
	pthread_mutex_unlock(&s->mu);
}

const char *coli_io_stream_describe(const coli_io_stream_t *s)
{
	return s->desc;
}
