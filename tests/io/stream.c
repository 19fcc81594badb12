/*
 * tests/io/stream.c — the slab streamer against the mapping, byte for byte:
 * on io_uring and on the pread fallback; O_DIRECT on tmpfs falls back to
 * buffered reads; a corrupted slab is an error naming (layer, expert), never
 * data; EINVAL from an O_DIRECT read (tmpfs before Linux 6.6) switches to
 * buffered reads; transient EIO and short reads (fault hook) are retried to the right
 * bytes; persistent EIO is an error naming the slab. A prefetch read that is
 * retried and then waited on is read and finished once (it was promoted into
 * the demand queue a second time: finished twice, destroy waited forever):
 * 500 rounds of retried prefetch reads on the pread workers, under an alarm so
 * a hang fails in seconds. Queued reads cancelled (what closing a stream
 * does) end cancelled or landed whole, never half.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fixture_util.h"
#include "io/io.h"
#include "mem/mem.h"

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		if (!(x)) {                                                                        \
			printf("%s:%d: %s (%s)\n", __FILE__, __LINE__, #x, coli_io_errmsg());      \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

struct fault {
	int mode; /* 0 none, 1 EIO on the first 2 attempts, 2 EIO always, 3 short, 4 flip once */
	int calls;
};

static int fault(void *arg, int li, uint32_t expert, int attempt, void *buf, int res)
{
	struct fault *f = arg;

	(void)li, (void)expert;
	__atomic_fetch_add(&f->calls, 1, __ATOMIC_RELAXED); /* from every worker */
	switch (f->mode) {
	case 1:
		return attempt < 2 ? -EIO : res;
	case 2:
		return -EIO;
	case 3: /* land 4 KiB at a time */
		return res > 4096 ? 4096 : res;
	case 4:
		if (attempt == 0 && res > 0)
			((unsigned char *)buf)[100] ^= 0x40;
		return res;
	case 5: /* what a filesystem without O_DIRECT answers */
		return attempt == 0 ? -EINVAL : res;
	}
	return res;
}

/* Read every slab of the container through a stream of 5 slots and compare. */
static int read_all(const char *path, enum coli_io_backend be, struct fault *f, int verify,
                    int *err_out)
{
	coli_container_t *c;
	coli_mem_slots_t *slots;
	coli_io_stream_t *s;
	struct coli_io_stream_opts o;
	size_t slot = 0;
	int rc = 0;

	CHECK(coli_io_container_open(path, &c) == 0);
	for (int li = 0; li < coli_io_container_n_expert_layers(c); li++)
		if (coli_io_container_expert_layer(c, li)->slab_bytes > slot)
			slot = coli_io_container_expert_layer(c, li)->slab_bytes;
	CHECK(coli_mem_slots_create(slot, 5, COLI_MEM_NODE_ANY, &slots) == 0);
	coli_io_stream_opts_init(&o);
	o.backend = be;
	o.verify = verify ? COLI_IO_VERIFY_ON : COLI_IO_VERIFY_OFF;
	o.fault = f ? fault : NULL;
	o.fault_arg = f;
	CHECK(coli_io_stream_create(c, slots, &o, &s) == 0);
	printf("  %s\n", coli_io_stream_describe(s));
	*err_out = 0;
	for (int li = 0; li < coli_io_container_n_expert_layers(c) && !*err_out; li++) {
		const struct coli_expert_layer *xl = coli_io_container_expert_layer(c, li);

		for (uint32_t e0 = 0; e0 < xl->n_experts && !*err_out; e0 += 5) {
			struct coli_io_read r[5];
			int n = 0;

			for (uint32_t e = e0; e < xl->n_experts && n < 5; e++, n++)
				r[n] = (struct coli_io_read){li, e, n};
			/* cycle through the classes: the answer must not depend on them */
			CHECK(coli_io_stream_submit(s, r, n, (enum coli_io_prio)(e0 / 5 % 3)) == 0);
			for (int k = 0; k < n; k++) {
				int w = coli_io_stream_wait(s, k);

				if (w) {
					*err_out = w;
					printf("  error: %s\n", coli_io_errmsg());
					break;
				}
				if (memcmp(coli_mem_slots_ptr(slots, k),
				           coli_io_container_slab_data(c, li, r[k].expert),
				           xl->slab_bytes)) {
					printf("  slab (%d, %u) differs from the mapping\n", li,
					       r[k].expert);
					rc = 1;
				}
			}
		}
	}
	coli_io_stream_destroy(s);
	coli_mem_slots_destroy(slots);
	coli_io_container_close(c);
	return rc;
}

/* Queue a read of every slab (one slot each; prefetch and background) on one
 * worker or one read in flight, cancel at once: each slot ends either landed, with the mapping's
 * bytes, or cancelled (-ECANCELED), as many as cancel said, and the stream
 * takes reads again. Which are which depends on timing; the sum does not. */
static int cancel_queued(const char *path, enum coli_io_backend be)
{
	coli_container_t *c;
	coli_mem_slots_t *slots;
	coli_io_stream_t *s;
	struct coli_io_stream_opts o;
	struct coli_io_read r[256];
	size_t slot = 0;
	int n = 0, dropped, landed = 0, cancelled = 0;

	CHECK(coli_io_container_open(path, &c) == 0);
	for (int li = 0; li < coli_io_container_n_expert_layers(c); li++) {
		const struct coli_expert_layer *xl = coli_io_container_expert_layer(c, li);

		slot = xl->slab_bytes > slot ? xl->slab_bytes : slot;
		for (uint32_t e = 0; e < xl->n_experts && n < 256; e++, n++)
			r[n] = (struct coli_io_read){li, e, n};
	}
	CHECK(coli_mem_slots_create(slot, (size_t)n, COLI_MEM_NODE_ANY, &slots) == 0);
	coli_io_stream_opts_init(&o);
	o.backend = be;
	o.queue_depth = 1;
	o.threads = 1;
	CHECK(coli_io_stream_create(c, slots, &o, &s) == 0);
	CHECK(coli_io_stream_submit(s, r, n / 2, COLI_IO_PREFETCH) == 0);
	CHECK(coli_io_stream_submit(s, r + n / 2, n - n / 2, COLI_IO_BACKGROUND) == 0);
	dropped = coli_io_stream_cancel(s);
	for (int k = 0; k < n; k++) {
		int w = coli_io_stream_wait(s, k);

		if (w == -ECANCELED) {
			CHECK(strstr(coli_io_errmsg(), "cancelled"));
			cancelled++;
			continue;
		}
		CHECK(w == 0);
		CHECK(!memcmp(coli_mem_slots_ptr(slots, k),
		              coli_io_container_slab_data(c, r[k].li, r[k].expert),
		              coli_io_container_expert_layer(c, r[k].li)->slab_bytes));
		landed++;
	}
	printf("  %d reads queued: %d cancelled, %d landed\n", n, cancelled, landed);
	CHECK(cancelled == dropped && landed + cancelled == n);
	CHECK(coli_io_stream_submit(s, r, 1, COLI_IO_DEMAND) == 0 &&
	      coli_io_stream_wait(s, 0) == 0);
	coli_io_stream_destroy(s);
	coli_mem_slots_destroy(slots);
	coli_io_container_close(c);
	return 0;
}

static int copy_file(const char *from, const char *to)
{
	FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
	char buf[65536];
	size_t n;

	if (!a || !b)
		return -1;
	while ((n = fread(buf, 1, sizeof(buf), a)) > 0)
		fwrite(buf, 1, n, b);
	fclose(a);
	return fclose(b);
}

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL: the streamer hung (30 s): a read finished twice, or "
	                          "never\n";

	(void)sig;
	(void)!write(1, msg, sizeof(msg) - 1);
	_exit(1);
}

int main(void)
{
	char path[4096], bad[4200], shm[256];
	struct fault f = {0};
	int err;
	coli_container_t *c;
	uint64_t off;

	signal(SIGALRM, on_alarm);
	alarm(30); /* the whole test takes a few seconds: a hang fails */
	CHECK(fx_convert("qwen3_moe", COLI_DTYPE_Q8_0, fx_tmpdir(), path, sizeof(path)) == 0);
	for (int rep = 0; rep < 500; rep++) { /* retried prefetch reads, waited on at once */
		f = (struct fault){1, 0};
		CHECK(read_all(path, COLI_IO_PREAD, &f, 0, &err) == 0 && err == 0);
	}
	{ /* the same slot twice in one batch is refused, and nothing is queued */
		coli_mem_slots_t *sl;
		coli_io_stream_t *s;
		struct coli_io_read r[2] = {{0, 0, 1}, {0, 1, 1}};

		CHECK(coli_io_container_open(path, &c) == 0);
		CHECK(coli_mem_slots_create(1 << 16, 2, COLI_MEM_NODE_ANY, &sl) == 0);
		CHECK(coli_io_stream_create(c, sl, NULL, &s) == 0);
		CHECK(coli_io_stream_submit(s, r, 2, COLI_IO_DEMAND) == -EBUSY);
		CHECK(!coli_io_stream_busy(s, 1));
		r[0].slot = 7;
		CHECK(coli_io_stream_submit(s, r, 1, COLI_IO_DEMAND) == -EINVAL);
		CHECK(coli_io_stream_submit(s, r + 1, 1, COLI_IO_DEMAND) == 0);
		CHECK(coli_io_stream_wait(s, 1) == 0);
		coli_io_stream_destroy(s);
		coli_mem_slots_destroy(sl);
		coli_io_container_close(c);
	}
	for (int be = COLI_IO_URING; be <= COLI_IO_PREAD; be++) {
		printf("backend %s\n", be == COLI_IO_URING ? "io_uring" : "pread");
		CHECK(read_all(path, be, NULL, 1, &err) == 0 && err == 0);
		f = (struct fault){1, 0};
		CHECK(read_all(path, be, &f, 1, &err) == 0 && err == 0 && f.calls > 0);
		f = (struct fault){3, 0};
		CHECK(read_all(path, be, &f, 1, &err) == 0 && err == 0);
		f = (struct fault){4, 0}; /* a bit flipped in flight: re-read heals it */
		CHECK(read_all(path, be, &f, 1, &err) == 0 && err == 0);
		f = (struct fault){5, 0}; /* EINVAL from an O_DIRECT read: buffered from then on */
		CHECK(read_all(path, be, &f, 1, &err) == 0 && err == 0);
		f = (struct fault){2, 0};
		CHECK(read_all(path, be, &f, 1, &err) == 0 && err == -EIO);
		CHECK(strstr(coli_io_errmsg(), "slab (layer ") &&
		      strstr(coli_io_errmsg(), "read failed after 4 attempts"));
		CHECK(cancel_queued(path, be) == 0);
	}

	/* a corrupted copy: flip one byte inside slab (expert layer 1, expert 3) */
	snprintf(bad, sizeof(bad), "%s/bad.coli", fx_tmpdir());
	CHECK(copy_file(path, bad) == 0);
	CHECK(coli_io_container_open(bad, &c) == 0);
	off = coli_io_container_slab_offset(c, 1, 3) + 123;
	{
		char want[64];
		int fd = open(bad, O_RDWR);
		unsigned char b;

		snprintf(want, sizeof(want), "slab (layer %u, expert 3)",
		         coli_io_container_expert_layer(c, 1)->layer);
		coli_io_container_close(c);
		CHECK(fd >= 0 && pread(fd, &b, 1, (off_t)off) == 1);
		b ^= 1;
		CHECK(pwrite(fd, &b, 1, (off_t)off) == 1 && close(fd) == 0);
		for (int be = COLI_IO_URING; be <= COLI_IO_PREAD; be++) {
			read_all(bad, be, NULL, 1, &err);
			CHECK(err == -EBADMSG && strstr(coli_io_errmsg(), want) &&
			      strstr(coli_io_errmsg(), "checksum mismatch"));
		}
	}

	/* tmpfs refuses O_DIRECT: buffered reads, same bytes */
	{
		struct stat st;

		snprintf(shm, sizeof(shm), "/dev/shm/coli-stream-test.%d.coli", (int)getpid());
		if (stat("/dev/shm", &st) == 0 && copy_file(path, shm) == 0) {
			int fd = open(shm, O_RDONLY | O_DIRECT);

			if (fd >= 0) {
				printf("O_DIRECT works on /dev/shm here: fallback not exercised\n");
				close(fd);
			}
			for (int be = COLI_IO_URING; be <= COLI_IO_PREAD; be++) {
				int r = read_all(shm, be, NULL, 1, &err);

				if (r || err) {
					unlink(shm);
					return 1;
				}
			}
			unlink(shm);
		} else {
			printf("no /dev/shm: tmpfs fallback not exercised\n");
		}
	}
	return 0;
}
