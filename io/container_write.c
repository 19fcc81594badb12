/*
 * io/container_write.c — the .coli writer (io/io.h; format in
 * docs/container.md).
 *
 * Life of a writer:
 *
 *   create      open "PATH.tmp.<pid>" (O_RDWR, truncated)
 *   set_section / plan_tensor / plan_experts       (any order, before layout)
 *   layout      every offset fixed; free space checked (fstatvfs) and the
 *               whole file reserved (fallocate, else ftruncate -> sparse)
 *   write_tensor / write_slab   pwrite at final offsets, any order, any
 *               thread (they share no mutable state but `failed`, a flag)
 *   commit      read every tensor and slab back and hash what is on disk;
 *               write sections, tables and, last, the superblock; fsync;
 *               rename to PATH; fsync the directory. Frees w.
 *   abort       unlink the temporary file, free w.
 *
 * File order: superblock | sections (text, then the three tables) | dense
 * region (tensors, 64-byte aligned) | expert region (layers in plan order,
 * each n_experts slabs of slab_bytes). The superblock goes last so a crash
 * mid-commit leaves a file with a zero magic, which no reader accepts; the
 * rename makes it visible only when complete.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include "io/io_internal.h"

#define N_PUBLIC_SECTIONS 7 /* kinds 1..6, index 0 unused */
#define HASH_CHUNK        (8u << 20)

struct wsection {
	int set;
	void *data;
	size_t bytes;
	uint64_t offset;
};

struct coli_io_writer {
	char *path;
	char *tmp;
	int fd;
	int laid_out;
	volatile int failed; /* a write failed: commit refuses */
	struct wsection sec[N_PUBLIC_SECTIONS];
	struct coli_tensor_info *t;
	int nt, cap_t;
	struct coli_expert_layer *l;
	int nl, cap_l;
	uint64_t n_slabs;
	uint64_t tab_off[3]; /* tensor table, layer table, slab checksums */
	uint64_t dense_off, dense_bytes, expert_off, expert_bytes, file_bytes;
};

int coli_io_writer_create(const char *path, coli_io_writer_t **out)
{
	coli_io_writer_t *w;
	int rc = -ENOMEM;

	*out = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return io_err(-ENOMEM, path, "out of memory creating the writer");
	w->fd = -1;
	w->path = strdup(path);
	if (!w->path || asprintf(&w->tmp, "%s.tmp.%ld", path, (long)getpid()) < 0) {
		w->tmp = NULL;
		io_err(rc, path, "out of memory creating the writer");
		goto err;
	}
	w->fd = open(w->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (w->fd < 0) {
		rc = -errno;
		io_err(rc, path, "cannot create temporary file %s: %s", w->tmp, strerror(-rc));
		goto err;
	}
	*out = w;
	return 0;
err:
	free(w->tmp);
	free(w->path);
	free(w);
	return rc;
}

static void writer_free(coli_io_writer_t *w)
{
	for (int k = 0; k < N_PUBLIC_SECTIONS; k++)
		free(w->sec[k].data);
	free(w->t);
	free(w->l);
	free(w->tmp);
	free(w->path);
	free(w);
}

void coli_io_writer_abort(coli_io_writer_t *w)
{
	if (!w)
		return;
	if (w->fd >= 0)
		close(w->fd);
	unlink(w->tmp);
	writer_free(w);
}

uint64_t coli_io_writer_file_bytes(const coli_io_writer_t *w)
{
	return w->laid_out ? w->file_bytes : 0;
}

int coli_io_writer_set_section(coli_io_writer_t *w, enum coli_section kind, const void *data,
                               size_t bytes)
{
	struct wsection *s;
	void *copy;

	if (w->laid_out)
		return io_err(-EINVAL, w->path, "section %s set after layout (set sections first)",
		              io_section_name(kind));
	if ((int)kind < 1 || (int)kind >= N_PUBLIC_SECTIONS)
		return io_err(-EINVAL, w->path, "unknown section kind %d", (int)kind);
	copy = malloc(bytes ? bytes : 1);
	if (!copy)
		return io_err(-ENOMEM, w->path, "out of memory holding section %s (%zu bytes)",
		              io_section_name(kind), bytes);
	if (bytes)
		memcpy(copy, data, bytes);
	s = &w->sec[kind];
	free(s->data);
	s->set = 1;
	s->data = copy;
	s->bytes = bytes;
	return 0;
}

static int grow(void **p, int *cap, int n, size_t elem)
{
	void *q;
	int c;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : 64;
	q = realloc(*p, (size_t)c * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

int coli_io_writer_plan_tensor(coli_io_writer_t *w, const char *name, enum coli_dtype dtype,
                               int ndim, const uint64_t *shape)
{
	struct coli_tensor_info *t;
	size_t len = strlen(name);
	uint64_t bytes;
	int rc;

	if (w->laid_out)
		return io_err(-EINVAL, w->path, "tensor %s planned after layout", name);
	if (!len || len >= COLI_TENSOR_NAME_MAX)
		return io_err(-ENAMETOOLONG, w->path,
		              "tensor name '%.*s' is empty or longer than %d bytes",
		              (int)(len > 200 ? 200 : len), name, COLI_TENSOR_NAME_MAX - 1);
	rc = io_tensor_bytes(dtype, ndim, shape, &bytes);
	if (rc)
		return io_err(rc, w->path, "tensor %s: %s x %d-D shape cannot be stored (%s)", name,
		              coli_dtype_name(dtype), ndim,
		              rc == -EOVERFLOW
		                  ? "too large"
		                  : "bad dtype, zero dim or cols not a multiple of 32");
	for (int i = 0; i < w->nt; i++)
		if (!strcmp(w->t[i].name, name))
			return io_err(-EEXIST, w->path, "tensor %s planned twice", name);
	if (w->nt >= (int)CT_MAX_TENSORS || grow((void **)&w->t, &w->cap_t, w->nt, sizeof(*w->t)))
		return io_err(-ENOMEM, w->path, "too many tensors (%d)", w->nt);
	t = &w->t[w->nt];
	memset(t, 0, sizeof(*t));
	memcpy(t->name, name, len);
	t->dtype = dtype;
	t->ndim = ndim;
	for (int i = 0; i < ndim; i++)
		t->shape[i] = shape[i];
	t->bytes = bytes;
	return w->nt++;
}

int coli_io_writer_plan_experts(coli_io_writer_t *w, const struct coli_expert_layer *l)
{
	struct coli_expert_layer x = *l;
	int rc;

	if (w->laid_out)
		return io_err(-EINVAL, w->path, "expert layer %u planned after layout", l->layer);
	if (!x.n_experts || x.n_experts > CT_MAX_EXPERTS)
		return io_err(-EINVAL, w->path, "expert layer %u: %u experts (1..%u allowed)",
		              x.layer, x.n_experts, CT_MAX_EXPERTS);
	if (x.down_kind == (uint32_t)x.dtype + 1) /* the same dtype: stored as 0 */
		x.down_kind = 0;
	rc = coli_io_slab_layout(&x);
	if (rc)
		return io_err(
		    rc, w->path, "expert layer %u: %s hidden %u inter %u cannot be stored as slabs",
		    x.layer, coli_dtype_name((enum coli_dtype)x.dtype), x.hidden, x.inter);
	for (int i = 0; i < w->nl; i++)
		if (w->l[i].layer == x.layer)
			return io_err(-EEXIST, w->path, "expert layer %u planned twice", x.layer);
	if (w->nl >= (int)CT_MAX_EXPERT_LAYERS ||
	    grow((void **)&w->l, &w->cap_l, w->nl, sizeof(*w->l)))
		return io_err(-ENOMEM, w->path, "too many expert layers (%d)", w->nl);
	x.offset = 0;
	w->l[w->nl] = x;
	w->n_slabs += x.n_experts;
	return w->nl++;
}

/* off = align(off, a) + bytes, with overflow checks; *at = the aligned start. */
static int place(uint64_t *off, uint64_t a, uint64_t bytes, uint64_t *at)
{
	uint64_t s;

	if (__builtin_add_overflow(*off, a - 1, &s))
		return -EOVERFLOW;
	s = s / a * a;
	if (__builtin_add_overflow(s, bytes, off))
		return -EOVERFLOW;
	*at = s;
	return 0;
}

/* "1.50 GiB" / "12.0 MiB" / "640 KiB" for messages about space */
static const char *human(uint64_t b, char *buf, size_t n)
{
	if (b >= (1ull << 30))
		snprintf(buf, n, "%.2f GiB", b / 1073741824.0);
	else if (b >= (1ull << 20))
		snprintf(buf, n, "%.1f MiB", b / 1048576.0);
	else
		snprintf(buf, n, "%llu KiB", (unsigned long long)(b >> 10));
	return buf;
}

static int reserve(coli_io_writer_t *w)
{
	struct statvfs sv;
	int rc;

	if (fstatvfs(w->fd, &sv) == 0) {
		uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
		char h1[32], h2[32];

		if (avail < w->file_bytes)
			return io_err(-ENOSPC, w->path,
			              "not enough free space: the container needs %llu bytes (%s), "
			              "its file system has %llu bytes (%s) free",
			              (unsigned long long)w->file_bytes,
			              human(w->file_bytes, h1, sizeof(h1)),
			              (unsigned long long)avail, human(avail, h2, sizeof(h2)));
	}
	do
		rc = fallocate(w->fd, 0, 0, (off_t)w->file_bytes) ? -errno : 0;
	while (rc == -EINTR);
	if (rc == -EOPNOTSUPP || rc == -ENOSYS || rc == -EINVAL) {
		/* no preallocation here: a sparse file, and ENOSPC may come from pwrite */
		rc = ftruncate(w->fd, (off_t)w->file_bytes) ? -errno : 0;
	}
	if (rc)
		return io_err(
		    rc, w->path, "cannot reserve %llu bytes for %s: %s%s",
		    (unsigned long long)w->file_bytes, w->tmp, strerror(-rc),
		    rc == -ENOSPC ? " (the file system is full)"
		    : rc == -EFBIG
		        ? " (file size limit: see ulimit -f, or the file system's maximum)"
		        : "");
	return 0;
}

int coli_io_writer_layout(coli_io_writer_t *w)
{
	uint64_t off = CT_SUPER_BYTES, tab[3];
	int rc = 0;

	if (w->laid_out)
		return io_err(-EINVAL, w->path, "layout called twice");
	tab[0] = (uint64_t)w->nt * CT_TENSOR_ENTRY;
	tab[1] = (uint64_t)w->nl * CT_LAYER_ENTRY;
	tab[2] = w->n_slabs * 8;
	for (int k = 1; k < N_PUBLIC_SECTIONS; k++)
		if (w->sec[k].set)
			rc |= place(&off, CT_SECTION_ALIGN, w->sec[k].bytes, &w->sec[k].offset);
	for (int i = 0; i < 3; i++)
		rc |= place(&off, CT_SECTION_ALIGN, tab[i], &w->tab_off[i]);
	rc |= place(&off, COLI_SLAB_ALIGN, 0, &w->dense_off);
	for (int i = 0; i < w->nt; i++)
		rc |= place(&off, CT_TENSOR_ALIGN, w->t[i].bytes, &w->t[i].offset);
	rc |= place(&off, COLI_SLAB_ALIGN, 0, &w->expert_off);
	w->dense_bytes = w->expert_off - w->dense_off;
	for (int i = 0; i < w->nl; i++) {
		uint64_t b;

		if (__builtin_mul_overflow(w->l[i].slab_bytes, (uint64_t)w->l[i].n_experts, &b))
			rc = -EOVERFLOW;
		rc |= place(&off, COLI_SLAB_ALIGN, b, &w->l[i].offset);
	}
	if (rc || off > (uint64_t)INT64_MAX)
		return io_err(-EFBIG, w->path, "planned container is too large to address");
	w->file_bytes = off;
	w->expert_bytes = off - w->expert_off;
	rc = reserve(w);
	if (rc)
		return rc;
	w->laid_out = 1;
	return 0;
}

static int write_at(coli_io_writer_t *w, const char *what, uint64_t base, uint64_t size,
                    uint64_t off, const void *p, size_t n)
{
	uint64_t end;
	int rc;

	if (!w->laid_out)
		return io_err(-EINVAL, w->path, "%s written before layout", what);
	if (__builtin_add_overflow(off, (uint64_t)n, &end) || end > size)
		return io_err(-ERANGE, w->path,
		              "%s: write of %zu bytes at %llu passes its end (%llu)", what, n,
		              (unsigned long long)off, (unsigned long long)size);
	rc = io_pwrite_full(w->fd, p, n, base + off);
	if (rc) {
		w->failed = 1;
		return io_err(rc, w->path, "writing %s to %s: %s%s", what, w->tmp, strerror(-rc),
		              rc == -ENOSPC ? " (the file system is full)" : "");
	}
	return 0;
}

int coli_io_writer_write_tensor(coli_io_writer_t *w, int idx, uint64_t off, const void *p, size_t n)
{
	char what[COLI_TENSOR_NAME_MAX + 16];

	if (idx < 0 || idx >= w->nt)
		return io_err(-EINVAL, w->path, "tensor index %d out of range (%d planned)", idx,
		              w->nt);
	snprintf(what, sizeof(what), "tensor %s", w->t[idx].name);
	return write_at(w, what, w->t[idx].offset, w->t[idx].bytes, off, p, n);
}

int coli_io_writer_write_slab(coli_io_writer_t *w, int li, uint32_t e, uint64_t off, const void *p,
                              size_t n)
{
	const struct coli_expert_layer *l;
	char what[64];

	if (li < 0 || li >= w->nl || e >= w->l[li].n_experts)
		return io_err(-EINVAL, w->path, "slab (layer index %d, expert %u) out of range", li,
		              e);
	l = &w->l[li];
	snprintf(what, sizeof(what), "slab (layer %u, expert %u)", l->layer, e);
	return write_at(w, what, l->offset + (uint64_t)e * l->slab_bytes, l->slab_bytes, off, p, n);
}

/* xxh64 of bytes [off, off+n) as they are on disk. */
static int hash_range(coli_io_writer_t *w, void *buf, uint64_t off, uint64_t n, uint64_t *out)
{
	XXH64_state_t *st = XXH64_createState();
	int rc = 0;

	if (!st)
		return -ENOMEM;
	XXH64_reset(st, 0);
	while (n && !rc) {
		size_t c = n < HASH_CHUNK ? (size_t)n : HASH_CHUNK;

		rc = io_pread_full(w->fd, buf, c, off);
		XXH64_update(st, buf, c);
		off += c;
		n -= c;
	}
	*out = XXH64_digest(st);
	XXH64_freeState(st);
	return rc;
}

static void put_section(unsigned char *sb, int *n, uint32_t kind, uint64_t off, const void *p,
                        uint64_t bytes)
{
	unsigned char *e = sb + CT_SEC_TABLE_OFF + CT_SEC_ENTRY * (*n)++;

	put32(e + SE_KIND, kind);
	put64(e + SE_OFFSET, off);
	put64(e + SE_BYTES, bytes);
	put64(e + SE_XXH, coli_io_xxh64(p, (size_t)bytes));
}

/* Tables, sections and superblock; the data is already in place. */
static int write_metadata(coli_io_writer_t *w, unsigned char *buf)
{
	unsigned char *tt = NULL, *lt = NULL, *sx = NULL, sb[CT_SUPER_BYTES];
	size_t tb = (size_t)w->nt * CT_TENSOR_ENTRY, lb = (size_t)w->nl * CT_LAYER_ENTRY;
	size_t sxb = (size_t)w->n_slabs * 8;
	uint64_t h;
	int rc = -ENOMEM, ns = 0;

	tt = calloc(1, tb + 1);
	lt = calloc(1, lb + 1);
	sx = calloc(1, sxb + 1);
	if (!tt || !lt || !sx) {
		io_err(rc, w->path, "out of memory building the tables");
		goto out;
	}
	for (int i = 0; i < w->nt; i++) {
		rc = hash_range(w, buf, w->t[i].offset, w->t[i].bytes, &w->t[i].xxh64);
		if (rc) {
			io_err(rc, w->path, "reading back tensor %s: %s", w->t[i].name,
			       strerror(-rc));
			goto out;
		}
		io_tensor_encode(tt + (size_t)i * CT_TENSOR_ENTRY, &w->t[i]);
	}
	for (int i = 0, s = 0; i < w->nl; i++) {
		const struct coli_expert_layer *l = &w->l[i];

		io_layer_encode(lt + (size_t)i * CT_LAYER_ENTRY, l);
		for (uint32_t e = 0; e < l->n_experts; e++, s++) {
			rc = hash_range(w, buf, l->offset + (uint64_t)e * l->slab_bytes,
			                l->slab_bytes, &h);
			if (rc) {
				io_err(rc, w->path, "reading back slab (layer %u, expert %u): %s",
				       l->layer, e, strerror(-rc));
				goto out;
			}
			put64(sx + (size_t)s * 8, h);
		}
	}
	memset(sb, 0, sizeof(sb));
	for (int k = 1; k < N_PUBLIC_SECTIONS; k++)
		if (w->sec[k].set)
			put_section(sb, &ns, (uint32_t)k, w->sec[k].offset, w->sec[k].data,
			            w->sec[k].bytes);
	put_section(sb, &ns, CT_SECTION_TENSORS, w->tab_off[0], tt, tb);
	put_section(sb, &ns, CT_SECTION_EXPERT_LAYERS, w->tab_off[1], lt, lb);
	put_section(sb, &ns, CT_SECTION_SLAB_XXH, w->tab_off[2], sx, sxb);
	memcpy(sb + SB_MAGIC, CT_MAGIC, CT_MAGIC_BYTES);
	put32(sb + SB_VERSION, COLI_CONTAINER_VERSION);
	put64(sb + SB_FILE_BYTES, w->file_bytes);
	put32(sb + SB_SUPER_BYTES, CT_SUPER_BYTES);
	put32(sb + SB_N_SECTIONS, (uint32_t)ns);
	put64(sb + SB_DENSE_OFF, w->dense_off);
	put64(sb + SB_DENSE_BYTES, w->dense_bytes);
	put64(sb + SB_EXPERT_OFF, w->expert_off);
	put64(sb + SB_EXPERT_BYTES, w->expert_bytes);
	put64(sb + CT_SUPER_SUM_OFF, coli_io_xxh64(sb, CT_SUPER_SUM_OFF));

	rc = 0;
	for (int k = 1; k < N_PUBLIC_SECTIONS && !rc; k++)
		if (w->sec[k].set)
			rc = io_pwrite_full(w->fd, w->sec[k].data, w->sec[k].bytes,
			                    w->sec[k].offset);
	if (!rc)
		rc = io_pwrite_full(w->fd, tt, tb, w->tab_off[0]);
	if (!rc)
		rc = io_pwrite_full(w->fd, lt, lb, w->tab_off[1]);
	if (!rc)
		rc = io_pwrite_full(w->fd, sx, sxb, w->tab_off[2]);
	/* the superblock only once everything it describes is written */
	if (!rc)
		rc = io_pwrite_full(w->fd, sb, sizeof(sb), 0);
	if (rc)
		io_err(rc, w->path, "writing the container's tables to %s: %s%s", w->tmp,
		       strerror(-rc), rc == -ENOSPC ? " (the file system is full)" : "");
out:
	free(tt);
	free(lt);
	free(sx);
	return rc;
}

static int fsync_dir(const char *path)
{
	char *dir = strdup(path), *slash;
	int fd, rc = 0;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (!slash)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = 0;
	else
		*slash = 0;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		/* some file systems refuse fsync on directories; rename is then as durable as it
		 * gets */
		if (fsync(fd) && errno != EINVAL && errno != EROFS)
			rc = -errno;
		close(fd);
	}
	free(dir);
	return rc;
}

int coli_io_writer_commit(coli_io_writer_t *w)
{
	unsigned char *buf = NULL;
	int rc;

	if (!w->laid_out) {
		rc = io_err(-EINVAL, w->path, "commit before layout");
		goto err;
	}
	if (w->failed) {
		rc = io_err(-EIO, w->path, "an earlier write failed; the container is incomplete");
		goto err;
	}
	buf = malloc(HASH_CHUNK);
	if (!buf) {
		rc = io_err(-ENOMEM, w->path, "out of memory for the read-back buffer");
		goto err;
	}
	rc = write_metadata(w, buf);
	if (rc)
		goto err;
	if (fsync(w->fd)) {
		rc = io_err(-errno, w->path, "fsync %s: %s", w->tmp, strerror(errno));
		goto err;
	}
	rc = close(w->fd) ? -errno : 0;
	w->fd = -1;
	if (rc) {
		io_err(rc, w->path, "close %s: %s", w->tmp, strerror(-rc));
		goto err;
	}
	if (rename(w->tmp, w->path)) {
		rc = io_err(-errno, w->path, "rename %s to %s: %s", w->tmp, w->path,
		            strerror(errno));
		goto err;
	}
	rc = fsync_dir(w->path);
	if (rc) {
		io_err(rc, w->path, "fsync of its directory failed: %s", strerror(-rc));
		unlink(w->path);
		goto err;
	}
	free(buf);
	if (w->fd >= 0)
		close(w->fd);
	writer_free(w);
	return 0;
err:
	free(buf);
	coli_io_writer_abort(w);
	return rc;
}
