/*
 * tools/bench/bench_io.c — `coli bench io -m MODEL`: how fast expert slabs come off
 * the disk when read the way the engine reads them, next to the file's own
 * sequential O_DIRECT bandwidth.
 *
 *   seq     the expert region read front to back in --block blocks, --qd in
 *           flight (fio --rw=read --direct=1 --ioengine=io_uring --fixedbufs
 *           with the same block size and depth: tools/bench/bench_vs_fio.sh)
 *   slabs   --slabs distinct random (layer, expert) slabs, a fresh seeded
 *           draw per round, one whole-slab read each, --slab-qd in flight
 *           (default: the streamer's queue depth): the pattern io/stream.c
 *           puts on the disk, and the disk term of `coli bench decode`'s
 *           bound (fio --rw=randread --bs=SLAB over the expert region)
 *   stream  the slab streamer itself (io/stream.c, checksums off) over the
 *           same slab list, --slab-qd slots kept busy: it should come close
 *           to `slabs` and not beat it, or the disk term is not a bound
 *
 * All three read with O_DIRECT into registered buffers; seq and slabs share
 * tools/bench/bench_measure.c's reader, so they differ only in the access pattern.
 * Arms alternate (seq, slabs, stream, seq, ...) for --rounds rounds; the
 * figures are medians with min and max. O_DIRECT bypasses the page cache, so
 * rounds do not warm each other (a host cache below a VM may still); where
 * the file system refuses O_DIRECT (tmpfs) the reads are buffered and say so.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "mem/mem.h"
#include "tools/bench/bench.h"
#include "tools/tools.h"

#define MAX_ROUNDS 101

static void help(FILE *f)
{
	fprintf(f,
	        "usage: coli bench io -m MODEL.coli [--slabs N] [--slab-qd Q] [--qd Q]\n"
	        "                     [--block KIB] [--seq-mib M] [--rounds R] [--seed S]\n"
	        "                     [--no-stream] [--small-pages] [--json]\n"
	        "  --slabs N     random slabs per round (default 256, at most all of them)\n"
	        "  --slab-qd Q   slab reads in flight (default %d: the streamer's)\n"
	        "  --qd Q        sequential reads in flight (default 8)\n"
	        "  --block KIB   sequential read size, KiB (default 4096)\n"
	        "  --seq-mib M   sequential bytes per round (default: the expert region, at\n"
	        "                most 1024 MiB; 0: no seq arm)\n"
	        "  --rounds R    alternating rounds (default 3)\n"
	        "  --no-stream   leave out the streamer arms (without and with the slabs'\n"
	        "                checksums, as the engine reads them by default)\n"
	        "  --small-pages seq and slabs read into 4 KiB pages (fio's default buffers)\n"
	        "                instead of huge pages (the streamer's slot arena)\n",
	        bench_stream_qd());
}

struct io_arm {
	double gbs[MAX_ROUNDS], med, min, max;
	struct bench_read_result last;
};

static void finish(struct io_arm *a, int n)
{
	a->med = bench_median(a->gbs, n); /* sorts */
	a->min = a->gbs[0];
	a->max = a->gbs[n - 1];
}

/* The streamer over ext[n] (slab indices idx[n] into s), qd slots: slot
 * i % qd takes read i once its previous read is done. verify: the engine's
 * default (each slab's xxh64 checked the first time it lands, which in a
 * fresh stream is every read here) or none (the disk alone). */
static int run_stream(const struct bench_slabs *s, const size_t *idx, size_t n, int qd,
                      enum coli_io_verify verify, struct bench_read_result *r, char *desc,
                      size_t desc_len)
{
	struct coli_io_stream_opts o;
	coli_container_t *c = NULL;
	coli_mem_slots_t *slots = NULL;
	coli_io_stream_t *st = NULL;
	struct coli_io_stream_stats s0, s1;
	size_t slot_bytes = (s->slab_bytes + 4095) & ~(size_t)4095;
	double t0;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = coli_io_container_open(s->path, &c);
	rc = rc ? rc : coli_mem_slots_create(slot_bytes, qd, COLI_MEM_NODE_ANY, &slots);
	if (!rc)
		memset(coli_mem_slots_base(slots), 0, coli_mem_slots_bytes(slots));
	coli_io_stream_opts_init(&o);
	o.queue_depth = qd;
	o.verify = verify;
	o.quiet = 1;
	rc = rc ? rc : coli_io_stream_create(c, slots, &o, &st);
	if (rc)
		goto out;
	snprintf(desc, desc_len, "%s", coli_io_stream_describe(st));
	coli_io_stream_stats(st, &s0);
	t0 = bench_now_s();
	for (size_t i = 0; i < n + (size_t)qd && !rc; i++) {
		int slot = (int)(i % (size_t)qd);

		if (i >= (size_t)qd)
			rc = coli_io_stream_wait(st, slot);
		if (!rc && i < n) {
			struct coli_io_read rd = {s->li[idx[i]], s->ex[idx[i]], slot};

			rc = coli_io_stream_submit(st, &rd, 1, COLI_IO_DEMAND);
		}
	}
	r->seconds = bench_now_s() - t0;
	coli_io_stream_stats(st, &s1);
	r->bytes = s1.bytes - s0.bytes;
	r->reads = s1.reads - s0.reads;
	r->gbs = r->seconds > 0 ? r->bytes / r->seconds / 1e9 : 0;
out:
	if (rc)
		fprintf(stderr, "coli bench io: streamer: %s\n",
		        coli_io_errmsg()[0] ? coli_io_errmsg() : strerror(-rc));
	if (st)
		coli_io_stream_destroy(st);
	coli_mem_slots_destroy(slots);
	coli_io_container_close(c);
	return rc;
}

#define P "coli bench io"

int bench_io_main(int argc, char **argv)
{
	const char *model = NULL;
	int n_slabs = 256, slab_qd = bench_stream_qd(), qd = 8, block_kib = 4096, seq_mib = -1;
	int rounds = 3, json = 0, stream = 1, rc = 1;
	unsigned flags = 0;
	uint64_t seed = 1, slab_sum = 0;
	struct bench_extent *ext = NULL;
	size_t *idx = NULL;
	struct io_arm seq = {0}, slabs = {0}, str = {0}, ver = {0};
	struct bench_slabs S = {0};
	char desc[128] = "";

	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			help(stdout);
			return 0;
		}
		if (!strcmp(o, "--json")) {
			json = 1;
			continue;
		}
		if (!strcmp(o, "--no-stream")) {
			stream = 0;
			continue;
		}
		if (!strcmp(o, "--small-pages")) {
			flags |= BENCH_READ_SMALL_PAGES;
			continue;
		}
		if (!v)
			return tool_err("bench io", "%s needs a value (see --help)", o), 2;
		if (!strcmp(o, "-m") || !strcmp(o, "--model"))
			model = v;
		else if (!strcmp(o, "--slabs"))
			bad = tool_int(P, o, v, 1, 1 << 24, &n_slabs);
		else if (!strcmp(o, "--slab-qd"))
			bad = tool_int(P, o, v, 1, 4096, &slab_qd);
		else if (!strcmp(o, "--qd"))
			bad = tool_int(P, o, v, 1, 4096, &qd);
		else if (!strcmp(o, "--block"))
			bad = tool_int(P, o, v, 4, 1 << 20, &block_kib);
		else if (!strcmp(o, "--seq-mib"))
			bad = tool_int(P, o, v, -1, 1 << 24, &seq_mib);
		else if (!strcmp(o, "--rounds"))
			bad = tool_int(P, o, v, 1, MAX_ROUNDS, &rounds);
		else if (!strcmp(o, "--seed"))
			bad = tool_u64(P, o, v, 0, UINT64_MAX, &seed);
		else
			return tool_err("bench io", "unknown option '%s' (see --help)", o), 2;
		if (bad)
			return 2;
		i++;
	}
	if (!model) {
		help(stderr);
		return 2;
	}
	if (n_slabs < 1 || qd < 1 || slab_qd < 1 || block_kib < 4 || block_kib % 4 ||
	    seq_mib < -1 || rounds < 1 || rounds > MAX_ROUNDS)
		return tool_err("bench io",
		                "bad --slabs, --qd, --slab-qd, --block (KiB, multiple of "
		                "4), --seq-mib or --rounds"),
		       2;
	if (bench_slabs_open(model, &S))
		return tool_err("bench io", "cannot list the slabs of %s", model);
	ext = malloc(sizeof(*ext) * (size_t)n_slabs);
	idx = malloc(sizeof(*idx) * (size_t)n_slabs);
	if (!ext || !idx) {
		tool_err("bench io", "out of memory");
		goto out;
	}
	uint64_t seq_bytes = seq_mib >= 0 ? (uint64_t)seq_mib << 20 : S.expert_bytes;

	if (seq_mib < 0 && seq_bytes > (1ull << 30))
		seq_bytes = 1ull << 30;
	if (seq_bytes > S.expert_bytes)
		seq_bytes = S.expert_bytes;
	size_t block = (size_t)block_kib << 10;

	for (int r = 0; r < rounds; r++) {
		/* a fresh draw each round: a host cache below a VM is not warmed
		 * for the next round by this one */
		n_slabs = (int)bench_slabs_draw(&S, seed + (uint64_t)r, (size_t)n_slabs, ext, idx);
		slab_sum = 0;
		for (int i = 0; i < n_slabs; i++)
			slab_sum += ext[i].bytes;
		if ((seq_bytes &&
		     bench_read_seq(model, S.expert_off, seq_bytes, qd, block, flags, &seq.last)) ||
		    bench_read_slabs(&S, ext, (size_t)n_slabs, slab_qd, flags, &slabs.last)) {
			tool_err("bench io", "reading %s failed", model);
			goto out;
		}
		if (stream && (run_stream(&S, idx, (size_t)n_slabs, slab_qd, COLI_IO_VERIFY_OFF,
		                          &str.last, desc, sizeof(desc)) ||
		               run_stream(&S, idx, (size_t)n_slabs, slab_qd, COLI_IO_VERIFY_FIRST,
		                          &ver.last, desc, sizeof(desc)))) {
			tool_err("bench io", "the streamer failed on %s", model);
			goto out;
		}
		seq.gbs[r] = seq.last.gbs;
		slabs.gbs[r] = slabs.last.gbs;
		str.gbs[r] = str.last.gbs;
		ver.gbs[r] = ver.last.gbs;
	}
	finish(&seq, rounds);
	finish(&slabs, rounds);
	finish(&str, rounds);
	finish(&ver, rounds);
	double slab_mb = slab_sum / 1e6 / n_slabs;
	const struct bench_read_result *m = &slabs.last;
	const char *mode = m->direct ? "O_DIRECT" : "BUFFERED (O_DIRECT refused)";
	const char *eng = m->uring ? (m->fixed ? "io_uring, fixed buffers" : "io_uring") : "pread";

	if (json) {
		printf("{\"bench\": \"io\", \"model\": \"%s\", \"direct\": %s, \"engine\": \"%s\", "
		       "\"fixed\": %s, \"pages\": \"%s\", \"rounds\": %d,\n"
		       " \"expert_offset\": %llu, \"expert_bytes\": %llu, \"n_slabs_total\": %zu, "
		       "\"uniform\": %s,\n",
		       model, m->direct ? "true" : "false", m->uring ? "io_uring" : "pread",
		       m->fixed ? "true" : "false", flags & BENCH_READ_SMALL_PAGES ? "4k" : "thp",
		       rounds, (unsigned long long)S.expert_off, (unsigned long long)S.expert_bytes,
		       S.n, S.uniform ? "true" : "false");
		printf(
		    " \"seq\": {\"bytes\": %llu, \"qd\": %d, \"block_bytes\": %zu, \"gbs\": %.6g, "
		    "\"gbs_min\": %.6g, \"gbs_max\": %.6g},\n",
		    (unsigned long long)seq_bytes, qd, block, seq.med, seq.min, seq.max);
		printf(" \"slabs\": {\"n\": %d, \"qd\": %d, \"slab_bytes\": %llu, \"bytes\": %llu, "
		       "\"reads\": %llu, \"gbs\": %.6g, \"gbs_min\": %.6g, \"gbs_max\": %.6g, "
		       "\"slabs_per_s\": %.2f},\n",
		       n_slabs, slab_qd, (unsigned long long)S.slab_bytes,
		       (unsigned long long)slab_sum, (unsigned long long)slabs.last.reads,
		       slabs.med, slabs.min, slabs.max,
		       slabs.med * 1e9 / (slab_sum / (double)n_slabs));
		if (stream)
			printf(" \"stream\": {\"n\": %d, \"qd\": %d, \"bytes\": %llu, \"reads\": "
			       "%llu, "
			       "\"how\": \"%s\", \"gbs\": %.6g, \"gbs_min\": %.6g, \"gbs_max\": "
			       "%.6g},\n",
			       n_slabs, slab_qd, (unsigned long long)str.last.bytes,
			       (unsigned long long)str.last.reads, desc, str.med, str.min, str.max);
		if (stream)
			printf(" \"verify\": {\"gbs\": %.6g, \"gbs_min\": %.6g, \"gbs_max\": %.6g, "
			       "\"cost\": %.6g},\n",
			       ver.med, ver.min, ver.max, str.med > 0 ? 1 - ver.med / str.med : 0);
		printf(" \"ratio\": %.6g}\n", seq.med > 0 ? slabs.med / seq.med : 0);
	} else {
		printf("coli bench io: %s, %s via %s into %s; medians of %d alternating rounds "
		       "[min..max]\n",
		       model, mode, eng,
		       flags & BENCH_READ_SMALL_PAGES ? "4 KiB pages" : "huge pages", rounds);
		if (seq_bytes)
			printf("  seq     %8.1f MB of the expert region, %d x %d KiB    %7.3f GB/s "
			       "[%.3f..%.3f]\n",
			       seq_bytes / 1e6, qd, block_kib, seq.med, seq.min, seq.max);
		printf("  slabs   %8d random slabs of %.2f MB, %d in flight %7.3f GB/s "
		       "[%.3f..%.3f]  %.0f slabs/s\n",
		       n_slabs, slab_mb, slab_qd, slabs.med, slabs.min, slabs.max,
		       slabs.med * 1e3 / slab_mb);
		if (stream)
			printf("  stream  the same slabs through io/stream.c (%s) %7.3f GB/s "
			       "[%.3f..%.3f]\n",
			       desc, str.med, str.min, str.max);
		if (stream)
			printf("  verify  the same with each slab's xxh64 checked (the engine's "
			       "default) %7.3f GB/s [%.3f..%.3f]\n",
			       ver.med, ver.min, ver.max);
		if (seq_bytes)
			printf("  ratio   slabs / seq = %.3f\n", slabs.med / seq.med);
		if (stream)
			printf("  ratio   stream / slabs = %.3f; checksums cost %.1f%% of the "
			       "stream's rate\n",
			       str.med / slabs.med, 100 * (1 - ver.med / str.med));
	}
	rc = 0;
out:
	free(ext);
	free(idx);
	bench_slabs_close(&S);
	return rc;
}
