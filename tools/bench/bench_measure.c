/*
 * tools/bench/bench_measure.c — the measurements every `coli bench` shares: host
 * read bandwidth (STREAM-like), file read bandwidth (O_DIRECT, io_uring) in
 * two patterns, and the bound of DESIGN.md's performance model.
 *
 * Host read. Each pool task sums its contiguous share of a buffer larger
 * than the last-level cache as 64-bit words with four independent AVX2
 * accumulators (scalar without AVX2). Only loads: the figure is the read
 * bandwidth a GEMV over weights can reach, which is the CPU term's BW. Why
 * this shape (docs/perf/history/2026-11-29.md has the measurements): four
 * independent chains keep enough cache misses in flight (one chain reads
 * 5-15% slower on a busy host; eight or sixteen are no faster than four),
 * and the buffer is THP-advised like the engine's slot arena (4 KiB pages
 * read ~15% slower here: the prefetchers stop at page boundaries and the
 * TLB misses).
 *
 * File reads. An extent list is read through io_uring with O_DIRECT and up
 * to qd reads in flight, each read at most max_io bytes into its own
 * buffer (qd buffers of max_io bytes, one 2 MiB-aligned arena, registered
 * with the ring as the streamer registers its slots):
 *
 *   extents  [off, bytes] ...   -> reads [off, min(bytes, max_io)] ... in order
 *   ring     qd SQEs; a completion frees its buffer for the next read
 *
 * Sequential: fio --ioengine=io_uring --direct=1 --fixedbufs --rw=read
 * --bs=max_io --iodepth=qd. Slabs (the disk term): whole slabs at their
 * offsets in a seeded random order, qd = the streamer's queue depth; fio
 * --rw=randread --bs=slab_bytes over the expert region. tools/bench/bench_vs_fio.sh
 * runs both next to fio. When the kernel refuses io_uring (seccomp, old
 * kernel) a pread loop with one read in flight is used and reported; when
 * the file system refuses O_DIRECT (tmpfs: EINVAL) the file is read
 * buffered and reported as such — that figure is the page cache's, not the
 * disk's.
 */
#include <errno.h>
#include <fcntl.h>
#include <immintrin.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "io/io.h"
#include "mem/mem.h"
#include "ptx/ptx.h"
#include "tools/bench/bench.h"

const char *const bench_term_name[BENCH_N_TERMS] = {"hbm", "cpu", "pcie", "disk"};

double bench_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return n & 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void *bench_alloc(size_t bytes)
{
	void *p = NULL;

	if (posix_memalign(&p, 2 << 20, bytes ? bytes : 1))
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE); /* as the engine's arenas: see the top */
	return p;
}

/* ---- host read ---- */

__attribute__((target("avx2"))) static uint64_t sum_avx2(const uint64_t *p, size_t n)
{
	__m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
		a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 4)));
		a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 8)));
		a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 12)));
	}
	__m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
	uint64_t out[4];

	_mm256_storeu_si256((__m256i *)out, s);
	return out[0] + out[1] + out[2] + out[3];
}

static uint64_t sum_scalar(const uint64_t *p, size_t n)
{
	uint64_t a = 0, b = 0, c = 0, d = 0;

	for (size_t i = 0; i + 4 <= n; i += 4) {
		a += p[i];
		b += p[i + 1];
		c += p[i + 2];
		d += p[i + 3];
	}
	return a + b + c + d;
}

static uint64_t sum_words(const uint64_t *p, size_t n)
{
	size_t body = n & ~(size_t)15;
	uint64_t t = __builtin_cpu_supports("avx2") ? sum_avx2(p, body) : sum_scalar(p, body);

	for (size_t i = body; i < n; i++)
		t += p[i];
	return t;
}

/* Task t of n reads words [t * W / n, (t + 1) * W / n), cut at 16-word
 * (128-byte) boundaries: every word once, whatever n. */
static void readbw_task(void *arg, int t, int n)
{
	struct bench_readbw *r = arg;
	size_t units = r->words / 16;
	size_t a = units * (size_t)t / (size_t)n * 16;
	size_t b = t == n - 1 ? r->words : units * (size_t)(t + 1) / (size_t)n * 16;

	r->sink[t & 63] += sum_words(r->buf + a, b - a);
}

/* Share of [p, p + bytes) backed by huge pages: AnonHugePages of the
 * mapping that holds p, from /proc/self/smaps; -1 when unreadable. */
static double huge_share(const void *p, size_t bytes)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[256];
	int in = 0;
	double kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' '))
			in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
		else if (in && sscanf(line, "AnonHugePages: %lf kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb < 0 ? -1 : kb * 1024 / (double)bytes;
}

int bench_readbw_init(struct bench_readbw *r, size_t bytes)
{
	uint64_t *b;

	memset(r, 0, sizeof(*r));
	r->words = bytes / 8;
	b = coli_mem_alloc(r->words * 8, COLI_MEM_NODE_ANY);
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < r->words; i++)
		b[i] = i;
	r->buf = b;
	r->huge_share = huge_share(b, r->words * 8);
	return 0;
}

void bench_readbw_free(struct bench_readbw *r)
{
	coli_mem_free((void *)r->buf, r->words * 8);
	r->buf = NULL;
}

double bench_readbw_pass(struct bench_readbw *r, coli_cpu_pool_t *pool)
{
	int n = coli_cpu_pool_threads(pool);
	double t0 = bench_now_s();

	coli_cpu_pool_run(pool, readbw_task, r, n);
	return bench_now_s() - t0;
}

/* ---- file reads ---- */

static int open_direct(const char *path, int *direct)
{
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);

	*direct = 1;
	if (fd < 0 && errno == EINVAL) {
		*direct = 0;
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0) {
		int rc = -errno;

		fprintf(stderr, "coli bench: cannot open %s: %s\n", path, strerror(-rc));
		return rc;
	}
	return fd;
}

/* Reads of at most max_io bytes, in extent order: *k = extent, *off = done in it. */
struct cursor {
	const struct bench_extent *ext;
	size_t n, k;
	uint64_t off;
	size_t max_io;
};

static int next_read(struct cursor *c, uint64_t *off, size_t *len)
{
	while (c->k < c->n && c->off >= c->ext[c->k].bytes) {
		c->k++;
		c->off = 0;
	}
	if (c->k >= c->n)
		return 0;
	uint64_t left = c->ext[c->k].bytes - c->off;

	*off = c->ext[c->k].off + c->off;
	*len = left < c->max_io ? (size_t)left : c->max_io;
	c->off += *len;
	return 1;
}

static int read_pread(int fd, struct cursor *c, void *buf, struct bench_read_result *r)
{
	uint64_t off;
	size_t len;

	while (next_read(c, &off, &len)) {
		ssize_t got = pread(fd, buf, len, (off_t)off);

		if (got < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		r->bytes += (uint64_t)got;
		r->reads++;
	}
	return 0;
}

/* Registers the qd buffers as fixed buffers (one iovec each); 0 when
 * refused (RLIMIT_MEMLOCK, old kernel): plain reads then. */
static int register_bufs(struct io_uring *ring, char *bufs, int qd, size_t max_io)
{
	struct iovec *iov = malloc(sizeof(*iov) * (size_t)qd);
	int ok;

	if (!iov)
		return 0;
	for (int i = 0; i < qd; i++)
		iov[i] = (struct iovec){bufs + (size_t)i * max_io, max_io};
	ok = io_uring_register_buffers(ring, iov, (unsigned)qd) == 0;
	free(iov);
	return ok;
}

static int read_uring(int fd, struct cursor *c, char *bufs, int qd, struct bench_read_result *r)
{
	struct io_uring ring;
	int *free_slot = malloc(sizeof(int) * (size_t)qd), n_free = qd, inflight = 0, rc;

	if (!free_slot)
		return -ENOMEM;
	rc = io_uring_queue_init((unsigned)qd, &ring, 0);
	if (rc) {
		free(free_slot);
		return rc; /* caller falls back to pread */
	}
	r->fixed = register_bufs(&ring, bufs, qd, c->max_io);
	for (int i = 0; i < qd; i++)
		free_slot[i] = i;
	for (;;) {
		uint64_t off;
		size_t len;
		int queued = 0;

		while (n_free && next_read(c, &off, &len)) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			int slot = free_slot[--n_free];
			char *dst = bufs + (size_t)slot * c->max_io;

			if (r->fixed)
				io_uring_prep_read_fixed(sqe, fd, dst, (unsigned)len, off, slot);
			else
				io_uring_prep_read(sqe, fd, dst, (unsigned)len, off);
			io_uring_sqe_set_data64(sqe, (uint64_t)slot);
			queued++;
		}
		if (queued) {
			rc = io_uring_submit(&ring);
			if (rc < 0)
				break;
			inflight += queued;
		}
		if (!inflight) {
			rc = 0;
			break;
		}
		struct io_uring_cqe *cqe;

		rc = io_uring_wait_cqe(&ring, &cqe);
		if (rc < 0)
			break;
		if (cqe->res < 0) {
			rc = cqe->res;
			break;
		}
		r->bytes += (uint64_t)cqe->res;
		r->reads++;
		free_slot[n_free++] = (int)io_uring_cqe_get_data64(cqe);
		io_uring_cqe_seen(&ring, cqe);
		inflight--;
	}
	io_uring_queue_exit(&ring);
	free(free_slot);
	return rc < 0 ? rc : 0;
}

int bench_read_extents(const char *path, const struct bench_extent *ext, size_t n, int qd,
                       size_t max_io, unsigned flags, struct bench_read_result *r)
{
	struct cursor c = {ext, n, 0, 0, max_io};
	size_t buf_bytes = (size_t)qd * max_io;
	char *bufs;
	int fd, rc;
	double t0;

	memset(r, 0, sizeof(*r));
	if (qd < 1 || max_io < 4096 || max_io % 4096)
		return -EINVAL;
	fd = open_direct(path, &r->direct);
	if (fd < 0)
		return fd;
	/* like the streamer's slot arena: 2 MiB aligned, THP-advised; or 4 KiB
	 * pages, like fio's default buffers */
	if (flags & BENCH_READ_SMALL_PAGES) {
		void *p = NULL;

		bufs = posix_memalign(&p, 4096, buf_bytes) ? NULL : p;
		if (bufs)
			madvise(bufs, buf_bytes, MADV_NOHUGEPAGE);
	} else {
		bufs = coli_mem_alloc(buf_bytes, COLI_MEM_NODE_ANY);
	}
	if (!bufs) {
		close(fd);
		return -ENOMEM;
	}
	/* fault the pages in before the clock starts (4 KiB pages: left to the
	 * ring's registration, as for fio's buffers, which places them
	 * differently in physical memory than a memset and changes how many
	 * segments a read needs) */
	if (!(flags & BENCH_READ_SMALL_PAGES))
		memset(bufs, 0, buf_bytes);
	t0 = bench_now_s();
	rc = read_uring(fd, &c, bufs, qd, r);
	r->uring = rc == 0;
	if (rc == -ENOSYS || rc == -EPERM || rc == -ENOMEM) {
		c.k = 0, c.off = 0, r->bytes = 0, r->reads = 0, r->fixed = 0;
		t0 = bench_now_s();
		rc = read_pread(fd, &c, bufs, r);
	}
	r->seconds = bench_now_s() - t0;
	r->gbs = r->seconds > 0 ? r->bytes / r->seconds / 1e9 : 0;
	if (rc)
		fprintf(stderr, "coli bench: reading %s: %s\n", path, strerror(-rc));
	if (flags & BENCH_READ_SMALL_PAGES)
		free(bufs);
	else
		coli_mem_free(bufs, buf_bytes);
	close(fd);
	return rc;
}

int bench_read_seq(const char *path, uint64_t off, uint64_t bytes, int qd, size_t max_io,
                   unsigned flags, struct bench_read_result *r)
{
	struct bench_extent e = {off & ~(uint64_t)4095, (bytes + 4095) & ~(uint64_t)4095};

	return bench_read_extents(path, &e, 1, qd, max_io, flags, r);
}

/* ---- the slab pattern ---- */

int bench_slabs_open(const char *path, struct bench_slabs *s)
{
	coli_container_t *c;
	int rc, nxl;
	uint64_t end = 0;

	memset(s, 0, sizeof(*s));
	rc = coli_io_container_open(path, &c);
	if (rc) {
		fprintf(stderr, "coli bench: %s\n", coli_io_errmsg());
		return rc;
	}
	nxl = coli_io_container_n_expert_layers(c);
	for (int li = 0; li < nxl; li++)
		s->n += coli_io_container_expert_layer(c, li)->n_experts;
	s->all = malloc(sizeof(*s->all) * (s->n ? s->n : 1));
	s->perm = malloc(sizeof(*s->perm) * (s->n ? s->n : 1));
	s->li = malloc(sizeof(*s->li) * (s->n ? s->n : 1));
	s->ex = malloc(sizeof(*s->ex) * (s->n ? s->n : 1));
	s->path = strdup(path);
	if (!s->all || !s->perm || !s->li || !s->ex || !s->path) {
		coli_io_container_close(c);
		bench_slabs_close(s);
		return -ENOMEM;
	}
	s->uniform = 1;
	for (int li = 0, k = 0; li < nxl; li++) {
		const struct coli_expert_layer *l = coli_io_container_expert_layer(c, li);

		if (li == 0) {
			s->expert_off = l->offset;
			end = l->offset;
		}
		for (uint32_t e = 0; e < l->n_experts; e++, k++) {
			uint64_t off = coli_io_container_slab_offset(c, li, e);

			s->all[k] = (struct bench_extent){off, l->slab_bytes};
			s->li[k] = li;
			s->ex[k] = e;
			if (off != end || (k && l->slab_bytes != s->all[0].bytes))
				s->uniform = 0;
			end = off + l->slab_bytes;
			if (l->slab_bytes > s->slab_bytes)
				s->slab_bytes = l->slab_bytes;
		}
	}
	s->expert_bytes = end - s->expert_off;
	coli_io_container_close(c);
	if (!s->n) {
		fprintf(stderr, "coli bench: %s has no expert slabs\n", path);
		bench_slabs_close(s);
		return -ENOENT;
	}
	return 0;
}

void bench_slabs_close(struct bench_slabs *s)
{
	free(s->all);
	free(s->perm);
	free(s->li);
	free(s->ex);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

static uint64_t xorshift(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

size_t bench_slabs_draw(struct bench_slabs *s, uint64_t seed, size_t n, struct bench_extent *out,
                        size_t *idx)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1;

	if (n > s->n)
		n = s->n;
	for (size_t i = 0; i < s->n; i++)
		s->perm[i] = i;
	for (size_t i = 0; i < n; i++) {
		size_t j = i + (size_t)(xorshift(&x) % (s->n - i)), t = s->perm[i];

		s->perm[i] = s->perm[j];
		s->perm[j] = t;
		out[i] = s->all[s->perm[i]];
		if (idx)
			idx[i] = s->perm[i];
	}
	return n;
}

int bench_read_slabs(const struct bench_slabs *s, const struct bench_extent *ext, size_t n, int qd,
                     unsigned flags, struct bench_read_result *r)
{
	size_t max_io = (s->slab_bytes + 4095) & ~(size_t)4095;

	return bench_read_extents(s->path, ext, n, qd, max_io, flags, r);
}

int bench_stream_qd(void)
{
	struct coli_io_stream_opts o;

	coli_io_stream_opts_init(&o);
	return o.queue_depth;
}

/* ---- the bound ---- */

/* The host's memory shared by the cores and the link: copies of the
 * registered chunk (host, chunk bytes) to dev queued back to back, a
 * window of at least eight read passes; the passes that start inside 85% of
 * it are the cores' contended rate (a pass that outlasts the copies would
 * count uncontended time), the copies' events their own. A probe on the
 * H200 host on 2026-11-30 (one simple reader a core) saw the cores alone at
 * 103 GB/s, 79 beside a link at 50: ~129 together, not 153. These passes
 * (d0354ea, 2026-12-01) read 119 GB/s beside the link, 171 in all: above CPU + PCIe,
 * so there the cap does not bind; on other runs of that host 121-161, so
 * the window is taken DRAM_WINDOWS times and the best kept (as the other
 * bandwidths are best of 5: one slow window would lower the bound). */
#define DRAM_WINDOWS 3

static int dram_window(coli_gpu_t *g, void *host, size_t chunk, uint64_t dev,
                       struct bench_readbw *r, coli_cpu_pool_t *pool, const struct bench_bw *bw,
                       double *cores_gbs, double *dram_gbs)
{
	double pass = bench_readbw_pass(r, pool), window, t0, t_read = 0, bytes = 0;
	int k = (int)(8 * pass * bw->pcie_gbs * 1e9 / chunk) + 1, rc;
	float ms = 0;

	k = k < 16 ? 16 : k;
	window = k * (double)chunk / (bw->pcie_gbs * 1e9);
	rc = coli_gpu_mark(g, 0);
	for (int i = 0; !rc && i < k; i++)
		rc = coli_gpu_upload_async(g, dev, host, chunk);
	rc = rc ? rc : coli_gpu_mark(g, 1);
	t0 = bench_now_s();
	while (!rc && bench_now_s() + pass < t0 + 0.85 * window) {
		t_read += bench_readbw_pass(r, pool);
		bytes += (double)r->words * 8;
	}
	rc = rc ? rc : coli_gpu_elapsed_ms(g, 0, 1, &ms);
	if (!rc && (t_read <= 0 || ms <= 0))
		rc = -EAGAIN;
	if (!rc) {
		*cores_gbs = bytes / t_read / 1e9;
		*dram_gbs = *cores_gbs + k * (double)chunk / (ms * 1e-3) / 1e9;
	}
	return rc;
}

static int gpu_dram(coli_gpu_t *g, void *host, size_t chunk, uint64_t dev, struct bench_readbw *r,
                    coli_cpu_pool_t *pool, struct bench_bw *bw, double *cores_gbs)
{
	double cores, dram;
	int rc = 0;

	bw->dram_gbs = 0;
	for (int i = 0; !rc && i < DRAM_WINDOWS; i++) {
		rc = dram_window(g, host, chunk, dev, r, pool, bw, &cores, &dram);
		if (!rc && dram > bw->dram_gbs)
			bw->dram_gbs = dram, *cores_gbs = cores;
	}
	return rc;
}

void bench_bound(const struct bench_bytes *b, const struct bench_bw *bw, struct bench_bound *out)
{
	const double gbs[BENCH_N_TERMS] = {bw->hbm_gbs, bw->cpu_gbs, bw->pcie_gbs, bw->disk_gbs};

	out->bound_s = 0;
	out->dominant = BENCH_TERM_CPU;
	for (int i = 0; i < BENCH_N_TERMS; i++) {
		out->term_s[i] = gbs[i] > 0 ? b->b[i] / (gbs[i] * 1e9) : -1;
		if (out->term_s[i] > out->bound_s) {
			out->bound_s = out->term_s[i];
			out->dominant = (enum bench_term)i;
		}
	}
}

/* GPU 0: pinned host -> device (64 MiB copies from cuMemHostRegister'd
 * memory, the PCIe term) and device memory (a 512 MiB device-to-device copy
 * counted as read + write bytes, the HBM term), best of 5 each; with r and
 * pool, then the host memory's cap (gpu_dram) with the same buffers (not
 * measured: dram_gbs 0). */
int bench_gpu_bw(struct bench_bw *bw, struct bench_readbw *r, coli_cpu_pool_t *pool,
                 double *cores_gbs)
{
	const size_t h2d = (size_t)64 << 20, d2d = (size_t)512 << 20;
	const char *why;
	char err[256];
	coli_gpu_t *g;
	uint64_t a = 0, b = 0;
	void *host;
	double best_h = 1e30, best_d = 1e30;
	int rc;

	if (coli_ptx_probe(&why) == 0 || coli_gpu_open(0, 0, &g, err, sizeof(err)))
		return -ENODEV;
	host = coli_mem_alloc(h2d, COLI_MEM_NODE_ANY);
	rc = host ? coli_gpu_host_register(g, host, h2d) : -ENOMEM;
	rc = rc ? rc : coli_gpu_alloc(g, d2d, &a);
	rc = rc ? rc : coli_gpu_alloc(g, d2d, &b);
	rc = rc ? rc : coli_gpu_memset(g, a, 1, d2d);
	for (int i = 0; !rc && i < 6; i++) {
		float ms_h = 0, ms_d = 0;

		rc = coli_gpu_mark(g, 0);
		rc = rc ? rc : coli_gpu_upload_async(g, b, host, h2d);
		rc = rc ? rc : coli_gpu_mark(g, 1);
		rc = rc ? rc : coli_gpu_copy(g, b, a, d2d);
		rc = rc ? rc : coli_gpu_mark(g, 2);
		rc = rc ? rc : coli_gpu_elapsed_ms(g, 0, 1, &ms_h);
		rc = rc ? rc : coli_gpu_elapsed_ms(g, 1, 2, &ms_d);
		if (!rc && i > 0) { /* the first round warms up */
			best_h = ms_h < best_h ? ms_h : best_h;
			best_d = ms_d < best_d ? ms_d : best_d;
		}
	}
	if (!rc) {
		bw->pcie_gbs = h2d / (best_h * 1e-3) / 1e9;
		bw->hbm_gbs = 2.0 * d2d / (best_d * 1e-3) / 1e9;
	}
	bw->dram_gbs = 0;
	if (!rc && r && pool && gpu_dram(g, host, h2d, b, r, pool, bw, cores_gbs))
		bw->dram_gbs = 0; /* not measured: no cap */
	coli_gpu_free(g, a);
	coli_gpu_free(g, b);
	if (host) {
		coli_gpu_host_unregister(g, host);
		coli_mem_free(host, h2d);
	}
	coli_gpu_close(g);
	return rc ? -ENODEV : 0;
}
