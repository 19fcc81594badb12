/*
 * io/io.h — the .coli container (write, read, verify), safetensors input
 * (GGUF input: io/gguf.h),
 * and the slab streamer (io_uring + O_DIRECT into mem/'s slots, pread fallback). Nothing here knows
 * about models: tensors are names, dtypes and shapes; expert slabs are (layer, expert) byte ranges.
 * docs/container.md specifies the file format byte by byte.
 *
 * All functions return 0 or -errno. Errors are also described in a message
 * buffer (coli_io_errmsg) naming the file and the problem, so tools can print
 * exactly what went wrong.
 */
#ifndef COLI_IO_H
#define COLI_IO_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/dtype.h" /* enum coli_dtype */
#include "mem/mem.h"   /* slab slots */

/* The last error's description for this thread ("file: what went wrong"). */
const char *coli_io_errmsg(void);

/* ===================================================================== */
/* The container                                                          */
/* ===================================================================== */

#define COLI_CONTAINER_VERSION 1
#define COLI_SLAB_ALIGN        4096
#define COLI_TENSOR_NAME_MAX   96

enum coli_section {
	COLI_SECTION_CONFIG = 1,           /* coli's model config, JSON (core/ defines the keys) */
	COLI_SECTION_TOKENIZER = 2,        /* tokenizer.json, verbatim */
	COLI_SECTION_CHAT_TEMPLATE = 3,    /* chat template text from tokenizer_config.json */
	COLI_SECTION_HF_CONFIG = 4,        /* config.json, verbatim (provenance) */
	COLI_SECTION_GEN_CONFIG = 5,       /* generation_config.json, verbatim, optional */
	COLI_SECTION_TOKENIZER_CONFIG = 6, /* tokenizer_config.json, verbatim, optional */
};

struct coli_tensor_info {
	char name[COLI_TENSOR_NAME_MAX]; /* NUL-terminated */
	enum coli_dtype dtype;
	int ndim;          /* 1..4 */
	uint64_t shape[4]; /* shape[0] = rows (outer), shape[ndim-1] = cols (inner) */
	uint64_t offset;   /* absolute file offset, 64-byte aligned */
	uint64_t bytes;
	uint64_t xxh64; /* of the tensor's bytes */
};

/* One MoE layer's expert slabs. Slab e of this layer lives at
 *   offset + e * slab_bytes
 * and holds three matrices in `dtype`, each starting 64-byte aligned:
 *   gate [inter x hidden] at gate_off, up [inter x hidden] at up_off,
 *   down [hidden x inter] at down_off (offsets within the slab).
 * slab_bytes is a multiple of COLI_SLAB_ALIGN, so one O_DIRECT read fetches it. */
struct coli_expert_layer {
	uint32_t layer; /* transformer layer index */
	uint32_t n_experts;
	enum coli_dtype dtype; /* gate and up (and down unless down_kind says) */
	/* 0: down is dtype too (every layer coli's converter quantizes); else
	 * down's dtype + 1, where a GGUF stores its down projection in another
	 * block type than gate/up (Q4_K_M: Q4_K gate/up, Q6_K down) */
	uint32_t down_kind;
	uint32_t hidden;
	uint32_t inter;
	uint64_t offset; /* absolute, COLI_SLAB_ALIGN aligned */
	uint64_t slab_bytes;
	uint64_t gate_off, up_off, down_off;
};

/* The dtype of the layer's down matrices. */
static inline enum coli_dtype coli_io_expert_down_dtype(const struct coli_expert_layer *l)
{
	return l->down_kind ? (enum coli_dtype)(l->down_kind - 1) : l->dtype;
}

/* Computes the slab layout of one layer (gate/up/down offsets, slab_bytes)
 * from dtype, hidden and inter. -EINVAL if the shape cannot be stored. */
int coli_io_slab_layout(struct coli_expert_layer *l);

/* ---- writer ----
 * The writer is told the whole plan up front (every tensor's name, dtype and
 * shape; every expert layer's geometry), lays the file out, and then accepts
 * the bytes in any order: tensors and slab parts are pwrite()n to their final
 * offsets as the converter reads them, shard by shard, in bounded memory.
 * It writes to "PATH.tmp.<pid>" and renames to PATH only in _commit, after
 * computing every checksum from what landed on disk and fsyncing; any failure
 * (including ENOSPC) leaves no file behind after _abort. */
typedef struct coli_io_writer coli_io_writer_t;

int coli_io_writer_create(const char *path, coli_io_writer_t **out);
/* Sections are small text blobs kept in memory until _commit; set them
 * before _layout (their sizes are part of the layout). */
int coli_io_writer_set_section(coli_io_writer_t *w, enum coli_section kind, const void *data,
                               size_t bytes);
/* Plan: returns the tensor's index (>= 0) or -errno. Call before _layout. */
int coli_io_writer_plan_tensor(coli_io_writer_t *w, const char *name, enum coli_dtype dtype,
                               int ndim, const uint64_t *shape);
/* Plan an expert layer (l->layer, n_experts, dtype, hidden, inter set); returns
 * its index among expert layers (>= 0) or -errno. */
int coli_io_writer_plan_experts(coli_io_writer_t *w, const struct coli_expert_layer *l);
/* Fixes every offset; after this, only the write calls below and _commit/_abort. */
int coli_io_writer_layout(coli_io_writer_t *w);
/* Write bytes [off, off+n) of tensor `idx`. The write calls may run
 * concurrently from several threads (disjoint ranges); bytes never written
 * read as zero. */
int coli_io_writer_write_tensor(coli_io_writer_t *w, int idx, uint64_t off, const void *p,
                                size_t n);
/* Write bytes [off, off+n) of slab (expert layer index `li`, expert e). */
int coli_io_writer_write_slab(coli_io_writer_t *w, int li, uint32_t e, uint64_t off, const void *p,
                              size_t n);
/* Checksums, tables, superblock, fsync, rename. Frees w in every case. */
int coli_io_writer_commit(coli_io_writer_t *w);
/* Removes the temporary file and frees w. */
void coli_io_writer_abort(coli_io_writer_t *w);
/* Planned file size (valid after _layout), for progress and space checks. */
uint64_t coli_io_writer_file_bytes(const coli_io_writer_t *w);

/* ---- reader ----
 * _open validates the superblock, its checksum, the section table and every
 * offset and size against the file size before anything is used; it does not
 * hash the tensors or slabs (that is coli_io_container_verify's job). The file
 * is mapped read-only; pointers returned stay valid until _close. */
typedef struct coli_container coli_container_t;

int coli_io_container_open(const char *path, coli_container_t **out);
void coli_io_container_close(coli_container_t *c);
const char *coli_io_container_path(const coli_container_t *c);
uint64_t coli_io_container_file_bytes(const coli_container_t *c);
/* Section bytes (not NUL-terminated; *bytes set) or NULL if absent. */
const void *coli_io_container_section(const coli_container_t *c, enum coli_section kind,
                                      size_t *bytes);
int coli_io_container_n_tensors(const coli_container_t *c);
const struct coli_tensor_info *coli_io_container_tensor(const coli_container_t *c, int i);
const struct coli_tensor_info *coli_io_container_find(const coli_container_t *c, const char *name);
/* Pointer to a tensor's bytes in the mapping. */
const void *coli_io_container_tensor_data(const coli_container_t *c,
                                          const struct coli_tensor_info *t);
int coli_io_container_n_expert_layers(const coli_container_t *c);
const struct coli_expert_layer *coli_io_container_expert_layer(const coli_container_t *c, int i);
/* Expert layer for a transformer layer index, or NULL if that layer is dense. */
const struct coli_expert_layer *coli_io_container_experts_of(const coli_container_t *c,
                                                             uint32_t layer);
/* Absolute offset of slab (li, e); pointer into the mapping; stored checksum. */
uint64_t coli_io_container_slab_offset(const coli_container_t *c, int li, uint32_t e);
const void *coli_io_container_slab_data(const coli_container_t *c, int li, uint32_t e);
uint64_t coli_io_container_slab_xxh64(const coli_container_t *c, int li, uint32_t e);
/* Drop the host's copies of slab (li, e): its pages in the mapping and in
 * the page cache (advice; the data is read back from the file when touched
 * again). For CUDA_RELEASE_HOST; 0 or -errno. */
int coli_io_container_slab_drop(const coli_container_t *c, int li, uint32_t e);
/* A file descriptor opened O_RDONLY (for the streamer's own O_DIRECT fd, reopen path). */
int coli_io_container_fd(const coli_container_t *c);
/* The dense region [offset, offset + bytes) (4096-aligned) and the file's
 * identity: xxh64 of the superblock, which covers the section table and so
 * the checksums of the tensor table, expert layers and every slab. */
void coli_io_container_dense_region(const coli_container_t *c, uint64_t *offset, uint64_t *bytes);
uint64_t coli_io_container_hash(const coli_container_t *c);

/* Hash everything. Returns 0 if all good, -EBADMSG at the first mismatch with
 * the object named in coli_io_errmsg(). progress (may be NULL) is called with
 * bytes done / total. */
int coli_io_container_verify(const coli_container_t *c,
                             void (*progress)(void *arg, uint64_t done, uint64_t total), void *arg);

/* ===================================================================== */
/* The slab streamer (io/stream.c: io_uring; io/stream_pread.c: fallback) */
/* ===================================================================== */
/*
 * Reads whole slabs from a container into slots of a coli_mem_slots arena:
 * one read per slot at a time, addressed by (expert layer index, expert).
 * Requests are queued in two classes, demand before prefetch: a queued
 * prefetch never delays a demand read that arrives after it (reads already
 * handed to the kernel are not reordered). Completion runs on the streamer's
 * own thread(s): short reads continue where they stopped, EIO is retried,
 * the slab's xxh64 is checked, then the slot is marked done.
 *
 * Backends, each fallback announced once on stderr:
 *   io_uring   read_fixed into the registered slot arena, O_DIRECT fd
 *              (plain reads when buffer registration is refused)
 *   pread      a small thread pool (io_uring refused: ENOSYS, EPERM under
 *              seccomp, or forced with COLI_IO_PREAD for tests)
 *   O_DIRECT refused (EINVAL, e.g. tmpfs) -> buffered fd, same backend.
 *
 * Thread rules: submit/wait/busy/stats may be called from one thread (the
 * engine's) concurrently with the streamer's own threads; not from several
 * caller threads at once.
 */
enum coli_io_backend { COLI_IO_AUTO = 0, COLI_IO_URING = 1, COLI_IO_PREAD = 2 };
/* FIRST: a slab's xxh64 is checked the first time the stream reads it (a
 * later read of the same slab, after an eviction, is not hashed again); ON:
 * every read; OFF: none. */
enum coli_io_verify { COLI_IO_VERIFY_FIRST = 0, COLI_IO_VERIFY_ON = 1, COLI_IO_VERIFY_OFF = 2 };
/* Read classes, served in this order: DEMAND (a layer waits for it),
 * PREFETCH (the next layer's guess), BACKGROUND (nobody waits yet: the
 * warm-up at open; one at a time in flight, so later demand reads find the
 * disk nearly free). Waiting on a queued read makes it a demand read. */
enum coli_io_prio { COLI_IO_DEMAND = 0, COLI_IO_PREFETCH = 1, COLI_IO_BACKGROUND = 2 };

/* Test hook, called after every read attempt with its result (bytes or
 * -errno) and the bytes landed at buf; returns the result to act on (a
 * smaller count = short read, -EIO = error); may also scribble over buf. */
typedef int (*coli_io_fault_fn)(void *arg, int li, uint32_t expert, int attempt, void *buf,
                                int res);

struct coli_io_stream_opts {
	enum coli_io_backend backend; /* AUTO: io_uring, else pread */
	int direct;                   /* 1: O_DIRECT (default), 0: buffered */
	enum coli_io_verify verify;   /* default FIRST */
	int queue_depth;              /* reads in flight (default 32) */
	int threads;                  /* pread workers (default 4) */
	int retries;                  /* extra attempts after EIO / bad checksum (default 3) */
	coli_io_fault_fn fault;       /* NULL except in tests */
	void *fault_arg;
	int quiet; /* 1: no fallback announcements (tests) */
};
void coli_io_stream_opts_init(struct coli_io_stream_opts *o);

struct coli_io_read {
	int li; /* expert layer index (coli_io_container_expert_layer) */
	uint32_t expert;
	int slot; /* destination slot; must not have a read pending */
};

struct coli_io_stream_stats {
	uint64_t reads, bytes; /* completed slab reads and their bytes */
	uint64_t retries;      /* attempts repeated (short, EIO, checksum) */
	uint64_t verified;     /* slabs whose xxh64 was checked */
	double busy_s;         /* wall time with at least one read queued or in flight */
	double hash_s;         /* time spent in xxh64 */
};

typedef struct coli_io_stream coli_io_stream_t;
/* The slots arena must outlive the stream. */
int coli_io_stream_create(coli_container_t *c, coli_mem_slots_t *slots,
                          const struct coli_io_stream_opts *o, coli_io_stream_t **out);
/* Drops the reads still queued (coli_io_stream_cancel), waits for those in
 * flight, then frees. */
void coli_io_stream_destroy(coli_io_stream_t *s);
/* Drop the reads still queued, not yet handed to the kernel or a worker: each
 * ends with -ECANCELED (coli_io_stream_wait returns it). Returns how many;
 * the reads in flight go on. */
int coli_io_stream_cancel(coli_io_stream_t *s);
/* Queue n reads of one class and start them; returns 0 or -errno (-EBUSY if
 * a slot already has a read pending, -EINVAL for a bad slab or slot). */
int coli_io_stream_submit(coli_io_stream_t *s, const struct coli_io_read *r, int n,
                          enum coli_io_prio prio);
/* Block until the slot's read is done: 0, or -errno with the slab named in
 * coli_io_errmsg() ("PATH: slab (layer 3, expert 17): ..."). A slot without a
 * pending read returns its last result. Moves a queued prefetch for this
 * slot to the demand class first. */
int coli_io_stream_wait(coli_io_stream_t *s, int slot);
/* 1 while the slot's read is queued or in flight. */
int coli_io_stream_busy(coli_io_stream_t *s, int slot);
void coli_io_stream_stats(coli_io_stream_t *s, struct coli_io_stream_stats *st);
/* "io_uring, O_DIRECT, fixed buffers", "pread x4, buffered", ... */
const char *coli_io_stream_describe(const coli_io_stream_t *s);

/* ===================================================================== */
/* safetensors input                                                      */
/* ===================================================================== */

/* F8_E4M3 (e4m3fn: no infinities, S.1111.111 NaN) and F8_E5M2 (IEEE-like:
 * fp16's upper byte) are block-scaled weights; F8_E8M0 (2^(e-127), 0xff NaN)
 * their power-of-two scales (core/convert/convert_fp8.c). */
enum coli_st_dtype {
	COLI_ST_F32,
	COLI_ST_F16,
	COLI_ST_BF16,
	COLI_ST_F8_E4M3,
	COLI_ST_F8_E5M2,
	COLI_ST_F8_E8M0,
	COLI_ST_OTHER
};

struct coli_st_tensor {
	char *name;
	enum coli_st_dtype dtype;
	char dtype_name[16]; /* as written in the header, for error messages */
	int ndim;
	uint64_t shape[4];
	uint64_t offset; /* absolute in the file (8 + header + data_offsets[0]) */
	uint64_t bytes;
};

/* One safetensors file: header parsed and validated (every data range inside
 * the file, sizes consistent with dtype x shape, no two ranges overlapping;
 * at most 4 dims; header at most 100 MiB). Errors: -EBADMSG with the file and
 * the problem in coli_io_errmsg(). */
struct coli_st_file {
	char *path;
	int fd;
	uint64_t file_bytes;
	int n;
	struct coli_st_tensor *t;
};

int coli_io_st_open(const char *path, struct coli_st_file *f);
void coli_io_st_close(struct coli_st_file *f);
/* Parse a header from memory (the fuzz target's entry); f->fd = -1. */
int coli_io_st_parse_header(const char *json, size_t len, uint64_t data_bytes, const char *path,
                            struct coli_st_file *f);
const struct coli_st_tensor *coli_io_st_find(const struct coli_st_file *f, const char *name);
/* Read a tensor converted to fp32 into dst[numel]. */
int coli_io_st_read_f32(const struct coli_st_file *f, const struct coli_st_tensor *t, float *dst);
/* Read elements [elem0, elem0+n) (row-major order) converted to fp32 into
 * dst[n]: how the converter streams big tensors in bounded row chunks.
 * -ENOTSUP (message names dtype and tensor) for dtypes other than F32, F16,
 * BF16 and the F8 ones (decoded exactly, NaN encodings to NaN, unscaled). */
int coli_io_st_read_range_f32(const struct coli_st_file *f, const struct coli_st_tensor *t,
                              uint64_t elem0, uint64_t n, float *dst);
/* The same elements as stored (dtype bytes each) into dst, one pread: threads
 * can then widen disjoint ranges with coli_io_st_widen (core/convert/convert.c). */
int coli_io_st_read_range_raw(const struct coli_st_file *f, const struct coli_st_tensor *t,
                              uint64_t elem0, uint64_t n, void *dst);
/* Elements [i0, i1) of src (stored as d) to fp32 at dst[i0, i1): the
 * conversions coli_io_st_read_range_f32 makes. */
void coli_io_st_widen(enum coli_st_dtype d, const void *src, uint64_t i0, uint64_t i1, float *dst);
uint64_t coli_io_st_numel(const struct coli_st_tensor *t);
/* Bytes per element of a readable dtype (4, 2 or 1); 0 for COLI_ST_OTHER. */
unsigned coli_io_st_dtype_bytes(enum coli_st_dtype d);

/* xxh64 with seed 0 (wrapper over libxxhash, so only io/ links it directly). */
uint64_t coli_io_xxh64(const void *p, size_t n);

#endif
