/*
 * tools/bench/bench.h — what the `coli bench` subcommands share (every file of tools/bench/):
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
#include "cpu/cpu.h" /* coli_cpu_pool_t */

/* ---- subcommands ---- */
int bench_kernels_main(int argc, char **argv);
int bench_model_main(int argc, char **argv); /* make-model */
int bench_run_main(int argc, char **argv);   /* decode, prefill (argv[0] says which) */
int bench_io_main(int argc, char **argv);
int bench_mla_main(int argc, char **argv);
int bench_cpu_attn_main(int argc, char **argv);
int bench_constrain_main(int argc, char **argv);
int bench_spec_main(int argc, char **argv);
int bench_serve_main(int argc, char **argv); /* tools/bench/serve/bench_serve.c */
/* `coli bench kernels`' prefill GEMM table (tools/bench/bench_gemm.c): int8 GOP/s
 * per dtype (those whose bit 1 << dtype is set in dtypes), S and ISA beside
 * the AMX peak; 0 or -ENOMEM. */
int bench_gemm_rates(coli_cpu_pool_t *pool, int reps, uint64_t dtypes);
/* The byte offsets of a GGUF block type's halves (d, dmin / m), -1 ended
 * (tools/bench/bench_kernels.c). */
const int *bench_block_halves(enum coli_dtype dt);

/* ---- an HTTP/1.1 response reader (tools/bench/serve/bench_serve_http.c) ----
 * A push parser over the bytes of one response: status, the headers it
 * needs, a body by Content-Length, chunked or to the close; an event-stream
 * body is cut into server-sent events, each event's data handed to on_event
 * (a nonzero return stops the reading: -ECANCELED). */
#define BENCH_HTTP_LINE  8192
#define BENCH_HTTP_EVENT 65536
#define BENCH_HTTP_BODY  65536
typedef int (*bench_http_event_fn)(void *arg, const char *data, size_t len);
struct bench_http {
	int state;
	int status; /* 0 until the status line */
	int head_done;
	int chunked, sse;
	long long content_length; /* -1: not sent */
	long long left;           /* bytes of the current chunk or body */
	uint64_t body_bytes;      /* body bytes after the framing */
	uint64_t events;          /* server-sent events dispatched (with or without data) */
	char line[BENCH_HTTP_LINE];
	size_t line_len;
	char sse_line[BENCH_HTTP_EVENT];
	size_t sse_len;
	char ev[BENCH_HTTP_EVENT]; /* the data of the event being read, NUL-terminated */
	size_t ev_len;
	int has_data;
	char body[BENCH_HTTP_BODY]; /* a non-stream body's first bytes, NUL-terminated */
	size_t body_len;
	const char *error; /* why, after -EPROTO */
	bench_http_event_fn on_event;
	void *arg;
};
void bench_http_init(struct bench_http *h, bench_http_event_fn on_event, void *arg);
/* 0: more wanted; 1: the response is complete; -EPROTO (h->error says why)
 * or -ECANCELED (on_event said stop). */
int bench_http_feed(struct bench_http *h, const char *p, size_t n);
/* The peer closed: 0 if the response is complete (a body read to the close
 * ends here), else -EPROTO. */
int bench_http_eof(struct bench_http *h);

/* ---- small helpers ---- */
double bench_now_s(void);
/* Sorts v[n] in place; returns the median (mean of the two middle values). */
double bench_median(double *v, int n);
/* 2 MiB-aligned, THP-advised allocation (as mem/ gives the engine), freed
 * with free(). */
void *bench_alloc(size_t bytes);

/* ---- host read bandwidth: a STREAM-like read over a thread pool ----
 * Sum of 64-bit words with 4 independent AVX2 accumulators per thread, each
 * thread over its own contiguous share of the buffer. The buffer is
 * allocated as the engine's weights are (coli_mem_alloc: 2 MiB aligned,
 * THP-advised), so the figure is the read bandwidth of the memory the
 * expert slots live in. One pass = one read of every word; GB/s = bytes /
 * pass seconds (docs/perf/history/2026-11-29.md says why these choices). */
struct bench_readbw {
	const uint64_t *buf;
	size_t words;
	double huge_share; /* share of the buffer backed by huge pages (smaps), -1 unknown */
	uint64_t sink[64];
};
int bench_readbw_init(struct bench_readbw *r, size_t bytes);
void bench_readbw_free(struct bench_readbw *r);
/* One pass with the pool's threads; returns its seconds. */
double bench_readbw_pass(struct bench_readbw *r, coli_cpu_pool_t *pool);

/* ---- file reads: O_DIRECT through io_uring (pread fallback) ----
 * An extent list is read with up to qd reads in flight, each at most
 * max_io bytes (longer extents are split, in order), into qd buffers
 * registered with the ring (read_fixed, as the slab streamer does; plain
 * reads where registration is refused). Two patterns use it:
 *   sequential  consecutive extents of max_io bytes (fio --rw=read
 *               --bs=max_io --iodepth=qd): the file's own bandwidth
 *   slabs       one whole-slab read per extent at the slabs' offsets, in a
 *               seeded random order, at the streamer's queue depth (fio
 *               --rw=randread --bs=slab --iodepth=qd over the expert
 *               region): what io/stream.c asks of the disk, and the disk
 *               term of the bound. */
struct bench_extent {
	uint64_t off, bytes;
};
struct bench_read_result {
	uint64_t bytes; /* bytes read */
	uint64_t reads; /* read requests completed */
	double seconds;
	double gbs;
	int direct; /* 1: O_DIRECT; 0: buffered (the file system refused O_DIRECT) */
	int uring;  /* 1: io_uring; 0: pread loop */
	int fixed;  /* 1: registered buffers (read_fixed) */
};
/* flags: BENCH_READ_SMALL_PAGES reads into 4 KiB pages (as fio's default
 * malloc'd buffers) instead of the THP-advised arena the streamer reads
 * into. It matters: a virtio disk takes at most max_segments (254 here)
 * discontiguous pieces per request, so a 2.65 MB read into 4 KiB pages
 * becomes 3 requests and into a huge page 1. 0 or -errno (message on
 * stderr). */
#define BENCH_READ_SMALL_PAGES 1u
int bench_read_extents(const char *path, const struct bench_extent *ext, size_t n, int qd,
                       size_t max_io, unsigned flags, struct bench_read_result *r);
/* Sequential read of [off, off + bytes) in max_io blocks. */
int bench_read_seq(const char *path, uint64_t off, uint64_t bytes, int qd, size_t max_io,
                   unsigned flags, struct bench_read_result *r);

/* Every expert slab of a container, in file order. uniform: all slabs have
 * one size and tile [expert_off, expert_off + expert_bytes) with no gap, so
 * fio's randread with bs = slab_bytes over that range reads exactly slabs. */
struct bench_slabs {
	char *path;
	struct bench_extent *all; /* [n] */
	size_t n;
	uint64_t slab_bytes; /* the largest */
	uint64_t expert_off, expert_bytes;
	int uniform;
	int *li;      /* [n] expert layer index of each slab */
	uint32_t *ex; /* [n] expert of each slab */
	size_t *perm; /* [n] scratch for draws */
};
int bench_slabs_open(const char *path, struct bench_slabs *s);
void bench_slabs_close(struct bench_slabs *s);
/* min(n, all) distinct slabs in a random order, a pure function of seed (a
 * partial Fisher-Yates over every slab): out[i] = all[idx[i]] (idx may be
 * NULL). Returns how many. */
size_t bench_slabs_draw(struct bench_slabs *s, uint64_t seed, size_t n, struct bench_extent *out,
                        size_t *idx);
/* Reads ext[n] one whole slab per read, qd in flight. */
int bench_read_slabs(const struct bench_slabs *s, const struct bench_extent *ext, size_t n, int qd,
                     unsigned flags, struct bench_read_result *r);
/* The slab streamer's queue depth (io/stream.c's default, what the engine
 * runs with). */
int bench_stream_qd(void);

/* ---- the bound ---- */
enum bench_term { BENCH_TERM_HBM, BENCH_TERM_CPU, BENCH_TERM_PCIE, BENCH_TERM_DISK, BENCH_N_TERMS };
extern const char *const bench_term_name[BENCH_N_TERMS];

/* Bandwidths in GB/s; 0 = not measured (the term is then absent).
 * dram_gbs: the host's memory with the cores reading and the link copying at
 * once (DESIGN's BW_dram; it caps BW_cpu + BW_pcie). */
struct bench_bw {
	double hbm_gbs, cpu_gbs, pcie_gbs, disk_gbs, dram_gbs;
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
 * GPU path; the GPU build fills them (ptx/, the lead's part). With r and
 * pool also the host's memory shared by the cores and the link
 * (bw->dram_gbs, 0 when not measured): the pool's read passes over r while
 * GPU 0 copies pinned memory to the device back to back; *cores_gbs: the
 * cores' part. */
int bench_gpu_bw(struct bench_bw *bw, struct bench_readbw *r, coli_cpu_pool_t *pool,
                 double *cores_gbs);

#endif
