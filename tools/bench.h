/*
 * tools/bench.h — what the `coli bench` subcommands share (tools/bench_*.c):
 * the bandwidth measurements, the bound of DESIGN.md's performance model,
 * medians and small JSON/table helpers. Private to tools/.
 *
 * The performance model, per decode token (B_x = bytes per token read from
 * or through x, BW_x measured in the same run):
 *
 *   T >= max(B_vram / BW_hbm, B_cpu / BW_cpu, B_stream / BW_pcie, B_disk / BW_disk)
 *
 * A term whose bandwidth was not measured (no GPU: hbm, pcie) is absent.
 */
#ifndef COLI_TOOLS_BENCH_H
#define COLI_TOOLS_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/coli.h"

/* ---- subcommands ---- */
int bench_kernels_main(int argc, char **argv);
int bench_model_main(int argc, char **argv); /* make-model */
int bench_run_main(int argc, char **argv);   /* decode, prefill (argv[0] says which) */
int bench_io_main(int argc, char **argv);

/* ---- small helpers ---- */
double bench_now_s(void);
/* Sorts v[n] in place; returns the median (mean of the two middle values). */
double bench_median(double *v, int n);
/* Page-aligned (2 MiB) allocation, freed with free(). */
void *bench_alloc(size_t bytes);

/* ---- host read bandwidth: a STREAM-like read over a thread pool ----
 * Sum of 64-bit words with 4 independent AVX2 accumulators per thread, each
 * thread over its own contiguous share of the buffer. One pass = one read of
 * the buffer; GB/s = bytes / pass seconds. */
struct bench_readbw {
	const uint64_t *buf;
	size_t words;
	uint64_t sink[64];
};
int bench_readbw_init(struct bench_readbw *r, size_t bytes);
void bench_readbw_free(struct bench_readbw *r);
/* One pass with the pool's threads; returns its seconds. */
double bench_readbw_pass(struct bench_readbw *r, coli_cpu_pool_t *pool);

/* ---- file reads: O_DIRECT through io_uring (pread fallback) ----
 * An extent list is read with up to qd reads in flight, each at most
 * max_io bytes (longer extents are split, in order). This is the disk side
 * of every bench: sequential = consecutive extents of max_io bytes (what fio
 * --rw=read --bs=max_io --iodepth=qd does); slabs = one extent per slab in
 * the order the engine would want them. When the streamer (io/, #5) lands,
 * bench io can run it over the same extent list next to this loop. */
struct bench_extent {
	uint64_t off, bytes;
};
struct bench_read_result {
	uint64_t bytes; /* bytes read */
	double seconds;
	double gbs;
	int direct; /* 1: O_DIRECT; 0: buffered (the file system refused O_DIRECT) */
	int uring;  /* 1: io_uring; 0: pread loop */
};
/* 0 or -errno (message on stderr). */
int bench_read_extents(const char *path, const struct bench_extent *ext, size_t n, int qd,
                       size_t max_io, struct bench_read_result *r);
/* Sequential read of [off, off + bytes) in max_io blocks. */
int bench_read_seq(const char *path, uint64_t off, uint64_t bytes, int qd, size_t max_io,
                   struct bench_read_result *r);

/* ---- the bound ---- */
enum bench_term { BENCH_TERM_HBM, BENCH_TERM_CPU, BENCH_TERM_PCIE, BENCH_TERM_DISK, BENCH_N_TERMS };
extern const char *const bench_term_name[BENCH_N_TERMS];

/* Bandwidths in GB/s; 0 = not measured (the term is then absent). */
struct bench_bw {
	double hbm_gbs, cpu_gbs, pcie_gbs, disk_gbs;
};
/* Bytes per token through each term. */
struct bench_bytes {
	double b[BENCH_N_TERMS];
};
struct bench_bound {
	double term_s[BENCH_N_TERMS]; /* B / BW per token, -1 when absent */
	double bound_s;               /* the max */
	enum bench_term dominant;
};
void bench_bound(const struct bench_bytes *b, const struct bench_bw *bw, struct bench_bound *out);

/* GPU bandwidths (pinned H2D, device memory): -ENODEV on a host without a
 * GPU path; the GPU build fills them (ptx/, the lead's part). */
int bench_gpu_bw(struct bench_bw *bw);

#endif
