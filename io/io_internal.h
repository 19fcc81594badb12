/*
 * io/io_internal.h — what io/'s files share and nobody else sees: the
 * container's on-disk constants and record layouts (docs/container.md is the
 * prose version; keep the two in step), little-endian field access, the
 * thread-local error message, and full-length pread/pwrite.
 *
 * On-disk records are never cast from the mapping: every field is read and
 * written through le32/le64 helpers at the documented byte offset, so the
 * format does not depend on the compiler's struct layout or on host endianness.
 */
#ifndef COLI_IO_INTERNAL_H
#define COLI_IO_INTERNAL_H

#include <liburing.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "io/io.h"

/* ---- the superblock: bytes [0, 4096) ---- */
#define CT_MAGIC                                                                                   \
	"\x89"                                                                                     \
	"COLI\r\n\x1a" /* split: \x89C would be one escape */
#define CT_MAGIC_BYTES   8
#define CT_SUPER_BYTES   4096
#define CT_SUPER_SUM_OFF (CT_SUPER_BYTES - 8) /* xxh64 of bytes [0, CT_SUPER_SUM_OFF) */
#define CT_SEC_TABLE_OFF 64
#define CT_SEC_ENTRY     32
#define CT_MAX_SECTIONS  64
#define CT_TENSOR_ALIGN  64
#define CT_SECTION_ALIGN 64

/* superblock field offsets */
enum {
	SB_MAGIC = 0,
	SB_VERSION = 8,      /* u32 */
	SB_FLAGS = 12,       /* u32, must be 0 in v1 */
	SB_FILE_BYTES = 16,  /* u64 */
	SB_SUPER_BYTES = 24, /* u32, CT_SUPER_BYTES */
	SB_N_SECTIONS = 28,  /* u32 */
	SB_DENSE_OFF = 32,   /* u64 */
	SB_DENSE_BYTES = 40, /* u64 */
	SB_EXPERT_OFF = 48,  /* u64 */
	SB_EXPERT_BYTES = 56 /* u64 */
};
/* section entry: u32 kind, u32 reserved (0), u64 offset, u64 bytes, u64 xxh64 */
enum { SE_KIND = 0, SE_RSVD = 4, SE_OFFSET = 8, SE_BYTES = 16, SE_XXH = 24 };

/* Section kinds that hold the container's own tables (public kinds are 1..63). */
enum {
	CT_SECTION_TENSORS = 64,       /* tensor table: n x CT_TENSOR_ENTRY */
	CT_SECTION_EXPERT_LAYERS = 65, /* expert layer table: n x CT_LAYER_ENTRY */
	CT_SECTION_SLAB_XXH = 66,      /* u64 xxh64 per slab, layer-table order, expert-major */
};

/* tensor entry, 160 bytes */
#define CT_TENSOR_ENTRY 160
enum {
	TE_NAME = 0,    /* char[96], NUL-terminated, NUL-padded */
	TE_DTYPE = 96,  /* u32 */
	TE_NDIM = 100,  /* u32 */
	TE_SHAPE = 104, /* u64[4], unused dims 0 */
	TE_OFFSET = 136,
	TE_BYTES = 144,
	TE_XXH = 152
};

/* expert layer entry, 64 bytes */
#define CT_LAYER_ENTRY 64
enum {
	LE_LAYER = 0,       /* u32 */
	LE_N_EXPERTS = 4,   /* u32 */
	LE_DTYPE = 8,       /* u32 */
	LE_HIDDEN = 12,     /* u32 */
	LE_INTER = 16,      /* u32 */
	LE_DOWN_DTYPE = 20, /* u32: 0 = dtype, else down's dtype + 1 */
	LE_OFFSET = 24,     /* u64 */
	LE_SLAB_BYTES = 32,
	LE_GATE_OFF = 40,
	LE_UP_OFF = 48,
	LE_DOWN_OFF = 56
};

/* Sanity caps that bound allocations made from a hostile file. */
#define CT_MAX_TENSORS       (1u << 20)
#define CT_MAX_EXPERT_LAYERS 65536u
#define CT_MAX_EXPERTS       65536u

/* ---- little-endian fields ---- */
static inline uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t le64(const unsigned char *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}
static inline void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}
static inline void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint64_t align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* ---- the reader's state (container_read.c opens, container_verify.c hashes) ---- */
struct ct_section {
	uint32_t kind;
	uint64_t offset, bytes, xxh64;
};

struct coli_container {
	char *path;
	int fd;                   /* O_RDONLY, kept for coli_io_container_fd */
	const unsigned char *map; /* the whole file, PROT_READ */
	uint64_t file_bytes;
	int n_sec;
	struct ct_section sec[CT_MAX_SECTIONS];
	uint64_t dense_off, dense_bytes, expert_off, expert_bytes;
	int nt;
	struct coli_tensor_info *t; /* [nt], decoded and validated */
	int nl;
	struct coli_expert_layer *l;   /* [nl], decoded and validated */
	uint64_t *first_slab;          /* [nl] index of the layer's slab 0 in slab_xxh */
	const unsigned char *slab_xxh; /* u64 LE [total slabs], in the mapping */
};

/* Libfuzzer builds define this so mutated files get past the checksums to
 * the structural checks behind them; never set for a real build. */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define CT_CHECKSUMS_ENFORCED 0
#else
#define CT_CHECKSUMS_ENFORCED 1
#endif

/* ---- the slab streamer (stream.c common + io_uring, stream_pread.c) ----
 * One request per slot, indexed by slot. Life of a request:
 *   IDLE -> QUEUED (in q[prio]) -> INFLIGHT (kernel or a worker)
 *        -> back to QUEUED after a short read / retryable error
 *        -> IDLE with err set (0 or -errno), waiters woken.
 * Every field below the mutex is guarded by mu; a request's buffer and its
 * done/len belong to whoever holds it INFLIGHT. */
enum { SR_IDLE = 0, SR_QUEUED = 1, SR_INFLIGHT = 2 };

struct stream_req {
	int li;
	uint32_t expert;
	uint64_t off; /* slab's absolute file offset */
	size_t len;   /* slab bytes */
	size_t done;  /* bytes landed so far */
	int state, err;
	int prio;     /* QUEUED: the queue it is in (a retry is a demand read) */
	int attempts; /* failed attempts (EIO, end of file) */
	int checks;   /* checksum mismatches */
	int tries;    /* every attempt, for the fault hook */
	int bg;       /* INFLIGHT from the background queue (counted in inflight_bg) */
};

struct stream_queue {
	int *v; /* ring of slot indices, capacity n_slots */
	int head, n;
};

struct coli_io_stream {
	coli_container_t *c;
	coli_mem_slots_t *slots;
	struct coli_io_stream_opts o;
	int n_slots;
	char *base; /* slot arena */
	size_t slot_bytes;
	int fd;        /* O_DIRECT (or buffered after fallback) */
	int fd_direct; /* whether fd has O_DIRECT */
	int fd_old;    /* the O_DIRECT fd after a fallback, closed at the end */
	enum coli_io_verify verify;
	unsigned char *checked; /* [slab]: its xxh64 matched once (FIRST); slab
	                         * = c->first_slab[li] + expert */
	enum coli_io_backend backend;
	char desc[96];
	struct stream_req *req;   /* [n_slots] */
	struct stream_queue q[3]; /* by enum coli_io_prio */

	pthread_mutex_t mu;
	pthread_cond_t done_cv; /* a request went IDLE */
	pthread_cond_t work_cv; /* pread workers: work queued or stop */
	int pending;            /* QUEUED + INFLIGHT */
	int inflight;
	int inflight_bg; /* of them background reads (at most BG_INFLIGHT) */
	int stop;
	double busy_t0;
	struct coli_io_stream_stats st;

	/* io_uring */
	struct io_uring ring;
	int ring_ok, fixed;
	int slots_per_buf; /* slots per registered iovec (each <= 1 GiB) */
	pthread_t reaper;
	int reaper_ok;

	/* pread pool */
	pthread_t *workers;
	int n_workers;
};

/* stream.c, called with mu held: the next read to start, marked in flight
 * (demand, prefetch, then background while few of those are in flight), or
 * -1; and the end of an attempt in flight */
int stream_queue_pop(struct coli_io_stream *s);
void stream_left_flight(struct coli_io_stream *s, int i);
/* Outcome of one attempt on slot i (res = bytes or -errno, fault hook already
 * applied); called WITHOUT mu, by the thread holding the request INFLIGHT.
 * Verifies when complete, then under mu requeues or finishes it. */
void stream_attempt_done(struct coli_io_stream *s, int i, int res);
double stream_now(void);

/* stream_pread.c */
int stream_pread_start(struct coli_io_stream *s);
void stream_pread_stop(struct coli_io_stream *s);

/* ---- io_util.c ---- */
/* Formats the thread's error message ("PATH: what"), returns rc. */
int io_err(int rc, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Full-length pwrite/pread: retry short transfers and EINTR; 0 or -errno.
 * pread past end of file returns -EIO (a short file where bytes were due). */
int io_pwrite_full(int fd, const void *p, size_t n, uint64_t off);
int io_pread_full(int fd, void *p, size_t n, uint64_t off);

/* ---- container_format.c ---- */
/* Bytes of a rows x cols matrix in dtype t (cpu/cpu.h's formats), with
 * overflow checks: 0 or -EINVAL (unknown dtype, zero dim, quant cols % 32)
 * or -EOVERFLOW. Must agree with coli_dtype_mat_bytes. */
int io_mat_bytes(uint32_t dtype, uint64_t rows, uint64_t cols, uint64_t *out);
/* A tensor's bytes from its shape: rows = product of shape[0..ndim-2], cols =
 * shape[ndim-1] (a 1-D tensor is one row). */
int io_tensor_bytes(uint32_t dtype, int ndim, const uint64_t *shape, uint64_t *out);
const char *io_section_name(uint32_t kind);
void io_tensor_encode(unsigned char *e, const struct coli_tensor_info *t);
void io_layer_encode(unsigned char *e, const struct coli_expert_layer *l);

#endif
