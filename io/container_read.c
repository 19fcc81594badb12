/*
 * io/container_read.c — opening a .coli container: map it read-only and
 * check everything the engine will later trust, before anything is used.
 *
 * Order of checks (each failure names the file and the problem):
 *
 *   1. a directory, or size 0 -> "empty file"; magic -> "not a coli
 *      container" (a GGUF or safetensors file, or a directory, is named as
 *      such with the 'coli convert' command that reads it)
 *   2. version (before the checksum: a newer major may lay its superblock out
 *      differently) -> -EPROTO "written by a newer coli (vN) ..."
 *   3. size < superblock -> "file is truncated"
 *   4. superblock xxh64; flags == 0; superblock_bytes == 4096
 *   5. size == file_bytes ("file is truncated: N bytes, expected M")
 *   6. regions: dense and expert regions 4 KiB aligned, expert region last
 *   7. section table: inside [4096, dense), 8-aligned, no overlap, no
 *      duplicate kinds; every section's xxh64 (they are small)
 *   8. tensor table: names NUL-terminated, unique; dtype known; ndim 1..4;
 *      bytes == dtype x shape; 64-aligned inside the dense region; no overlap
 *   9. expert layers: slab layout recomputed and equal; 4 KiB aligned inside
 *      the expert region; no overlap; layer indices unique; one checksum per
 *      slab
 *
 * All offset arithmetic uses __builtin_*_overflow, so no field can wrap an
 * offset back into the file. Tensor and slab bytes are not hashed here;
 * coli_io_container_verify does that (container_verify.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io_internal.h"

#define CORRUPT(c, ...) io_err(-EBADMSG, (c)->path, __VA_ARGS__)

static int dtype_known(uint32_t d)
{
	return d == COLI_DTYPE_F32 || d == COLI_DTYPE_F16 || d == COLI_DTYPE_BF16 ||
	       d == COLI_DTYPE_Q8_0 || d == COLI_DTYPE_Q4_0 ||
	       coli_dtype_is_block((enum coli_dtype)d);
}

/* [off, off+bytes) inside [lo, hi)? */
static int inside(uint64_t off, uint64_t bytes, uint64_t lo, uint64_t hi)
{
	uint64_t end;

	return !__builtin_add_overflow(off, bytes, &end) && off >= lo && end <= hi;
}

static int check_head(coli_container_t *c, const unsigned char *sb, uint64_t have)
{
	uint32_t version;

	if (have == 0)
		return CORRUPT(c, "empty file (0 bytes), not a coli container");
	if (have >= 4 && !memcmp(sb, "GGUF", 4))
		return CORRUPT(c,
		               "a GGUF file, not a coli container: convert it once with "
		               "'coli convert %s -o OUT.coli' (its blocks are copied as stored)",
		               c->path);
	if (have >= 9 && le64(sb) < have && sb[8] == '{')
		return CORRUPT(
		    c, "a safetensors file, not a coli container: convert its checkpoint "
		       "directory (config.json beside it) with 'coli convert DIR -o OUT.coli'");
	if (memcmp(sb, CT_MAGIC, have < CT_MAGIC_BYTES ? have : CT_MAGIC_BYTES))
		return CORRUPT(c,
		               "not a coli container (bad magic %02x %02x %02x %02x ...; "
		               "convert a checkpoint with 'coli convert')",
		               sb[0], have > 1 ? sb[1] : 0, have > 2 ? sb[2] : 0,
		               have > 3 ? sb[3] : 0);
	if (have < SB_VERSION + 4)
		return CORRUPT(c, "file is truncated: %llu bytes, expected at least %u",
		               (unsigned long long)have, CT_SUPER_BYTES);
	version = le32(sb + SB_VERSION);
	if (version > COLI_CONTAINER_VERSION)
		return io_err(-EPROTO, c->path,
		              "written by a newer coli (v%u), this reader supports v%d; "
		              "update coli or reconvert the model",
		              version, COLI_CONTAINER_VERSION);
	if (version == 0)
		return CORRUPT(c, "container version 0 is not valid");
	if (have < CT_SUPER_BYTES) {
		uint64_t want = have >= SB_FILE_BYTES + 8 ? le64(sb + SB_FILE_BYTES) : 0;

		if (want < CT_SUPER_BYTES)
			want = CT_SUPER_BYTES;
		return CORRUPT(c, "file is truncated: %llu bytes, expected %llu",
		               (unsigned long long)have, (unsigned long long)want);
	}
	if (CT_CHECKSUMS_ENFORCED &&
	    le64(sb + CT_SUPER_SUM_OFF) != coli_io_xxh64(sb, CT_SUPER_SUM_OFF))
		return CORRUPT(c, "superblock checksum mismatch (the header is corrupt)");
	if (le32(sb + SB_FLAGS))
		return CORRUPT(c, "superblock flags 0x%x unknown to this reader",
		               le32(sb + SB_FLAGS));
	if (le32(sb + SB_SUPER_BYTES) != CT_SUPER_BYTES)
		return CORRUPT(c, "superblock size %u, expected %u", le32(sb + SB_SUPER_BYTES),
		               CT_SUPER_BYTES);
	if (le64(sb + SB_FILE_BYTES) > have)
		return CORRUPT(c, "file is truncated: %llu bytes, expected %llu",
		               (unsigned long long)have,
		               (unsigned long long)le64(sb + SB_FILE_BYTES));
	if (le64(sb + SB_FILE_BYTES) < have)
		return CORRUPT(
		    c, "file has %llu bytes but its superblock says %llu (trailing data)",
		    (unsigned long long)have, (unsigned long long)le64(sb + SB_FILE_BYTES));
	return 0;
}

static int check_regions(coli_container_t *c, const unsigned char *sb)
{
	uint64_t end;

	c->dense_off = le64(sb + SB_DENSE_OFF);
	c->dense_bytes = le64(sb + SB_DENSE_BYTES);
	c->expert_off = le64(sb + SB_EXPERT_OFF);
	c->expert_bytes = le64(sb + SB_EXPERT_BYTES);
	if (c->dense_off < CT_SUPER_BYTES || c->dense_off % COLI_SLAB_ALIGN ||
	    c->expert_off % COLI_SLAB_ALIGN ||
	    !inside(c->dense_off, c->dense_bytes, 0, c->expert_off) ||
	    __builtin_add_overflow(c->expert_off, c->expert_bytes, &end) || end != c->file_bytes)
		return CORRUPT(c,
		               "superblock regions are inconsistent (dense %llu+%llu, experts "
		               "%llu+%llu, file %llu)",
		               (unsigned long long)c->dense_off, (unsigned long long)c->dense_bytes,
		               (unsigned long long)c->expert_off,
		               (unsigned long long)c->expert_bytes,
		               (unsigned long long)c->file_bytes);
	return 0;
}

static int cmp_u64_pair(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Ranges [off, off+bytes) as pairs; sorted in place; index of the first
 * range that overlaps its predecessor, or -1. */
static long first_overlap(uint64_t *pairs, size_t n)
{
	qsort(pairs, n, 2 * sizeof(uint64_t), cmp_u64_pair);
	for (size_t i = 1; i < n; i++)
		if (pairs[2 * i] < pairs[2 * (i - 1)] + pairs[2 * (i - 1) + 1])
			return (long)i;
	return -1;
}

static int check_sections(coli_container_t *c, const unsigned char *sb)
{
	uint64_t pairs[2 * CT_MAX_SECTIONS];
	uint32_t n = le32(sb + SB_N_SECTIONS);

	if (n > CT_MAX_SECTIONS)
		return CORRUPT(c, "section table has %u entries (at most %d)", n, CT_MAX_SECTIONS);
	c->n_sec = (int)n;
	for (int i = 0; i < c->n_sec; i++) {
		const unsigned char *e = sb + CT_SEC_TABLE_OFF + CT_SEC_ENTRY * i;
		struct ct_section *s = &c->sec[i];

		s->kind = le32(e + SE_KIND);
		s->offset = le64(e + SE_OFFSET);
		s->bytes = le64(e + SE_BYTES);
		s->xxh64 = le64(e + SE_XXH);
		if (!s->kind || le32(e + SE_RSVD))
			return CORRUPT(c, "section table entry %d is malformed", i);
		for (int j = 0; j < i; j++)
			if (c->sec[j].kind == s->kind)
				return CORRUPT(c, "section %s appears twice",
				               io_section_name(s->kind));
		if (s->offset % 8 || !inside(s->offset, s->bytes, CT_SUPER_BYTES, c->dense_off))
			return CORRUPT(c,
			               "section %s (offset %llu, %llu bytes) lies outside the "
			               "metadata area [%u, %llu) or is misaligned",
			               io_section_name(s->kind), (unsigned long long)s->offset,
			               (unsigned long long)s->bytes, CT_SUPER_BYTES,
			               (unsigned long long)c->dense_off);
		pairs[2 * i] = s->offset;
		pairs[2 * i + 1] = s->bytes;
	}
	if (first_overlap(pairs, n) >= 0)
		return CORRUPT(c, "sections overlap");
	for (int i = 0; i < c->n_sec; i++) {
		const struct ct_section *s = &c->sec[i];

		if (CT_CHECKSUMS_ENFORCED &&
		    coli_io_xxh64(c->map + s->offset, (size_t)s->bytes) != s->xxh64)
			return CORRUPT(c, "section %s checksum mismatch", io_section_name(s->kind));
	}
	return 0;
}

static const struct ct_section *find_section(const coli_container_t *c, uint32_t kind)
{
	for (int i = 0; i < c->n_sec; i++)
		if (c->sec[i].kind == kind)
			return &c->sec[i];
	return NULL;
}

static int table(coli_container_t *c, uint32_t kind, uint64_t entry, uint64_t max,
                 const unsigned char **p, uint64_t *n)
{
	const struct ct_section *s = find_section(c, kind);

	if (!s)
		return CORRUPT(c, "the %s section is missing", io_section_name(kind));
	if (s->bytes % entry || s->bytes / entry > max)
		return CORRUPT(c,
		               "the %s section has %llu bytes, not a whole number of "
		               "%llu-byte entries (or too many)",
		               io_section_name(kind), (unsigned long long)s->bytes,
		               (unsigned long long)entry);
	*p = c->map + s->offset;
	*n = s->bytes / entry;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp((*(const struct coli_tensor_info *const *)a)->name,
	              (*(const struct coli_tensor_info *const *)b)->name);
}

static int check_tensor(coli_container_t *c, int i, const unsigned char *e)
{
	struct coli_tensor_info *t = &c->t[i];
	uint32_t dtype = le32(e + TE_DTYPE), ndim = le32(e + TE_NDIM);
	uint64_t want;
	int rc;

	if (!memchr(e + TE_NAME, 0, COLI_TENSOR_NAME_MAX) || !e[TE_NAME])
		return CORRUPT(c, "tensor table entry %d: name is empty or not NUL-terminated", i);
	memcpy(t->name, e + TE_NAME, COLI_TENSOR_NAME_MAX);
	if (!dtype_known(dtype))
		return CORRUPT(c, "tensor %s: unknown dtype %u", t->name, dtype);
	if (ndim < 1 || ndim > 4)
		return CORRUPT(c, "tensor %s: ndim %u (1..4 allowed)", t->name, ndim);
	t->dtype = (enum coli_dtype)dtype;
	t->ndim = (int)ndim;
	for (int d = 0; d < 4; d++) {
		t->shape[d] = le64(e + TE_SHAPE + 8 * d);
		if (d >= t->ndim && t->shape[d])
			return CORRUPT(c, "tensor %s: shape[%d] set past ndim %u", t->name, d,
			               ndim);
	}
	t->offset = le64(e + TE_OFFSET);
	t->bytes = le64(e + TE_BYTES);
	t->xxh64 = le64(e + TE_XXH);
	rc = io_tensor_bytes(dtype, t->ndim, t->shape, &want);
	if (rc || want != t->bytes) {
		char shape[128];
		int k = 0;

		for (int d = 0; d < t->ndim; d++)
			k += snprintf(shape + k, sizeof(shape) - (size_t)k, "%s%llu",
			              d ? " x " : "[", (unsigned long long)t->shape[d]);
		return CORRUPT(c, "tensor %s: %llu bytes do not match %s %s]", t->name,
		               (unsigned long long)t->bytes,
		               coli_dtype_name((enum coli_dtype)dtype), shape);
	}
	if (t->offset % CT_TENSOR_ALIGN ||
	    !inside(t->offset, t->bytes, c->dense_off, c->dense_off + c->dense_bytes))
		return CORRUPT(c,
		               "tensor %s: offset %llu (+%llu bytes) is misaligned or outside "
		               "the dense region",
		               t->name, (unsigned long long)t->offset,
		               (unsigned long long)t->bytes);
	return 0;
}

static int check_tensors(coli_container_t *c)
{
	const unsigned char *p;
	const struct coli_tensor_info **byname = NULL;
	uint64_t n, *pairs = NULL;
	long bad;
	int rc;

	rc = table(c, CT_SECTION_TENSORS, CT_TENSOR_ENTRY, CT_MAX_TENSORS, &p, &n);
	if (rc)
		return rc;
	c->nt = (int)n;
	c->t = calloc(n + 1, sizeof(*c->t));
	pairs = calloc(2 * n + 1, sizeof(*pairs));
	byname = calloc(n + 1, sizeof(*byname));
	if (!c->t || !pairs || !byname) {
		rc = io_err(-ENOMEM, c->path, "out of memory for %llu tensors",
		            (unsigned long long)n);
		goto out;
	}
	for (int i = 0; i < c->nt; i++) {
		rc = check_tensor(c, i, p + (size_t)i * CT_TENSOR_ENTRY);
		if (rc)
			goto out;
		pairs[2 * i] = c->t[i].offset;
		pairs[2 * i + 1] = c->t[i].bytes;
		byname[i] = &c->t[i];
	}
	bad = first_overlap(pairs, n);
	if (bad >= 0) {
		rc = CORRUPT(c, "tensors overlap at offset %llu",
		             (unsigned long long)pairs[2 * bad]);
		goto out;
	}
	qsort(byname, n, sizeof(*byname), cmp_names);
	for (uint64_t i = 1; i < n; i++)
		if (!strcmp(byname[i]->name, byname[i - 1]->name)) {
			rc = CORRUPT(c, "tensor %s appears twice", byname[i]->name);
			goto out;
		}
out:
	free(pairs);
	free(byname);
	return rc;
}

static int check_layer(coli_container_t *c, int i, const unsigned char *e, uint64_t *slabs)
{
	struct coli_expert_layer *l = &c->l[i], x;
	uint32_t dtype = le32(e + LE_DTYPE);
	uint64_t all;

	l->layer = le32(e + LE_LAYER);
	l->n_experts = le32(e + LE_N_EXPERTS);
	l->hidden = le32(e + LE_HIDDEN);
	l->inter = le32(e + LE_INTER);
	l->offset = le64(e + LE_OFFSET);
	l->slab_bytes = le64(e + LE_SLAB_BYTES);
	l->gate_off = le64(e + LE_GATE_OFF);
	l->up_off = le64(e + LE_UP_OFF);
	l->down_off = le64(e + LE_DOWN_OFF);
	if (!dtype_known(dtype))
		return CORRUPT(c, "expert layer %u: unknown dtype %u", l->layer, dtype);
	l->dtype = (enum coli_dtype)dtype;
	l->down_kind = le32(e + LE_DOWN_DTYPE);
	if (l->down_kind && (!dtype_known(l->down_kind - 1) || l->down_kind - 1 == dtype))
		return CORRUPT(c, "expert layer %u: down dtype field %u is not another known dtype",
		               l->layer, l->down_kind);
	if (!l->n_experts || l->n_experts > CT_MAX_EXPERTS)
		return CORRUPT(c, "expert layer %u: %u experts (1..%u allowed)", l->layer,
		               l->n_experts, CT_MAX_EXPERTS);
	x = *l;
	if (coli_io_slab_layout(&x) || x.slab_bytes != l->slab_bytes || x.gate_off != l->gate_off ||
	    x.up_off != l->up_off || x.down_off != l->down_off)
		return CORRUPT(
		    c, "expert layer %u: slab layout does not match %s hidden %u inter %u",
		    l->layer, coli_dtype_name((enum coli_dtype)dtype), l->hidden, l->inter);
	if (__builtin_mul_overflow(l->slab_bytes, (uint64_t)l->n_experts, &all) ||
	    l->offset % COLI_SLAB_ALIGN || !inside(l->offset, all, c->expert_off, c->file_bytes))
		return CORRUPT(c,
		               "expert layer %u: slabs at %llu (%u x %llu bytes) are misaligned or "
		               "outside the expert region",
		               l->layer, (unsigned long long)l->offset, l->n_experts,
		               (unsigned long long)l->slab_bytes);
	for (int j = 0; j < i; j++)
		if (c->l[j].layer == l->layer)
			return CORRUPT(c, "expert layer %u appears twice", l->layer);
	c->first_slab[i] = *slabs;
	*slabs += l->n_experts;
	return 0;
}

static int check_layers(coli_container_t *c)
{
	const unsigned char *p, *sx;
	uint64_t n, nx, slabs = 0, *pairs;
	int rc = 0;

	rc = table(c, CT_SECTION_EXPERT_LAYERS, CT_LAYER_ENTRY, CT_MAX_EXPERT_LAYERS, &p, &n);
	if (rc)
		return rc;
	c->nl = (int)n;
	c->l = calloc(n + 1, sizeof(*c->l));
	c->first_slab = calloc(n + 1, sizeof(*c->first_slab));
	pairs = calloc(2 * n + 1, sizeof(*pairs));
	if (!c->l || !c->first_slab || !pairs) {
		rc = io_err(-ENOMEM, c->path, "out of memory for %llu expert layers",
		            (unsigned long long)n);
		goto out;
	}
	for (int i = 0; i < c->nl && !rc; i++) {
		rc = check_layer(c, i, p + (size_t)i * CT_LAYER_ENTRY, &slabs);
		pairs[2 * i] = c->l[i].offset;
		pairs[2 * i + 1] = c->l[i].slab_bytes * c->l[i].n_experts;
	}
	if (rc)
		goto out;
	if (first_overlap(pairs, n) >= 0) {
		rc = CORRUPT(c, "expert layers overlap");
		goto out;
	}
	rc = table(c, CT_SECTION_SLAB_XXH, 8, UINT64_MAX / 8, &sx, &nx);
	if (rc)
		goto out;
	if (nx != slabs) {
		rc = CORRUPT(c, "%llu slab checksums for %llu slabs", (unsigned long long)nx,
		             (unsigned long long)slabs);
		goto out;
	}
	c->slab_xxh = sx;
out:
	free(pairs);
	return rc;
}

int coli_io_container_open(const char *path, coli_container_t **out)
{
	unsigned char sb[CT_SUPER_BYTES];
	coli_container_t *c;
	struct stat st;
	uint64_t have;
	int rc;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c || !(c->path = strdup(path))) {
		free(c);
		return io_err(-ENOMEM, path, "out of memory opening the container");
	}
	c->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (c->fd < 0) {
		rc = io_err(-errno, path, "cannot open: %s", strerror(errno));
		goto err;
	}
	if (fstat(c->fd, &st)) {
		rc = io_err(-errno, path, "cannot stat: %s", strerror(errno));
		goto err;
	}
	if (S_ISDIR(st.st_mode)) {
		rc = io_err(-EINVAL, path,
		            "a directory, not a coli container: a Hugging Face checkpoint "
		            "converts once with 'coli convert %s -o OUT.coli'",
		            path);
		goto err;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = io_err(-EINVAL, path, "not a regular file");
		goto err;
	}
	have = (uint64_t)st.st_size;
	memset(sb, 0, sizeof(sb));
	rc = io_pread_full(c->fd, sb, have < sizeof(sb) ? (size_t)have : sizeof(sb), 0);
	if (rc) {
		io_err(rc, path, "cannot read the superblock: %s", strerror(-rc));
		goto err;
	}
	c->file_bytes = have;
	rc = check_head(c, sb, have);
	if (rc)
		goto err;
	c->map = mmap(NULL, have, PROT_READ, MAP_SHARED, c->fd, 0);
	if (c->map == MAP_FAILED) {
		c->map = NULL;
		rc = io_err(-errno, path, "cannot map %llu bytes: %s", (unsigned long long)have,
		            strerror(errno));
		goto err;
	}
	rc = check_regions(c, sb);
	if (!rc)
		rc = check_sections(c, sb);
	if (!rc)
		rc = check_tensors(c);
	if (!rc)
		rc = check_layers(c);
	if (rc)
		goto err;
	*out = c;
	return 0;
err:
	coli_io_container_close(c);
	return rc;
}

void coli_io_container_close(coli_container_t *c)
{
	if (!c)
		return;
	if (c->map)
		munmap((void *)c->map, c->file_bytes);
	if (c->fd >= 0)
		close(c->fd);
	free(c->t);
	free(c->l);
	free(c->first_slab);
	free(c->path);
	free(c);
}

const char *coli_io_container_path(const coli_container_t *c)
{
	return c->path;
}

uint64_t coli_io_container_file_bytes(const coli_container_t *c)
{
	return c->file_bytes;
}

const void *coli_io_container_section(const coli_container_t *c, enum coli_section kind,
                                      size_t *bytes)
{
	const struct ct_section *s = find_section(c, (uint32_t)kind);

	if (!s)
		return NULL;
	*bytes = (size_t)s->bytes;
	return c->map + s->offset;
}

int coli_io_container_n_tensors(const coli_container_t *c)
{
	return c->nt;
}

const struct coli_tensor_info *coli_io_container_tensor(const coli_container_t *c, int i)
{
	return i >= 0 && i < c->nt ? &c->t[i] : NULL;
}

const struct coli_tensor_info *coli_io_container_find(const coli_container_t *c, const char *name)
{
	for (int i = 0; i < c->nt; i++)
		if (!strcmp(c->t[i].name, name))
			return &c->t[i];
	return NULL;
}

const void *coli_io_container_tensor_data(const coli_container_t *c,
                                          const struct coli_tensor_info *t)
{
	return c->map + t->offset;
}

int coli_io_container_n_expert_layers(const coli_container_t *c)
{
	return c->nl;
}

const struct coli_expert_layer *coli_io_container_expert_layer(const coli_container_t *c, int i)
{
	return i >= 0 && i < c->nl ? &c->l[i] : NULL;
}

const struct coli_expert_layer *coli_io_container_experts_of(const coli_container_t *c,
                                                             uint32_t layer)
{
	for (int i = 0; i < c->nl; i++)
		if (c->l[i].layer == layer)
			return &c->l[i];
	return NULL;
}

uint64_t coli_io_container_slab_offset(const coli_container_t *c, int li, uint32_t e)
{
	if (li < 0 || li >= c->nl || e >= c->l[li].n_experts)
		return 0; /* never a slab's offset: the superblock is there */
	return c->l[li].offset + (uint64_t)e * c->l[li].slab_bytes;
}

const void *coli_io_container_slab_data(const coli_container_t *c, int li, uint32_t e)
{
	uint64_t off = coli_io_container_slab_offset(c, li, e);

	return off ? c->map + off : NULL;
}

/* CUDA_RELEASE_HOST: the engine keeps no host copy of a slab a device holds.
 * The mapping's pages of the slab go (MADV_DONTNEED: the next touch faults
 * them back in from the file), and so do the page cache's (POSIX_FADV_
 * DONTNEED: clean pages are dropped, dirty ones cannot exist in a read-only
 * container). Slabs are COLI_SLAB_ALIGN aligned and sized, so the range is
 * whole pages. Advice only: 0, or -errno if the kernel refused it. */
int coli_io_container_slab_drop(const coli_container_t *c, int li, uint32_t e)
{
	uint64_t off = coli_io_container_slab_offset(c, li, e);
	size_t n;
	int rc = 0, r;

	if (!off)
		return -EINVAL;
	n = (size_t)c->l[li].slab_bytes;
	if (c->map && madvise((void *)(c->map + off), n, MADV_DONTNEED))
		rc = -errno;
	r = posix_fadvise(c->fd, (off_t)off, (off_t)n, POSIX_FADV_DONTNEED); /* errno value */
	return rc ? rc : -r;
}

uint64_t coli_io_container_slab_xxh64(const coli_container_t *c, int li, uint32_t e)
{
	if (li < 0 || li >= c->nl || e >= c->l[li].n_experts)
		return 0;
	return le64(c->slab_xxh + 8 * (c->first_slab[li] + e));
}

int coli_io_container_fd(const coli_container_t *c)
{
	return c->fd;
}

void coli_io_container_dense_region(const coli_container_t *c, uint64_t *offset, uint64_t *bytes)
{
	*offset = c->dense_off;
	*bytes = c->dense_bytes;
}

uint64_t coli_io_container_hash(const coli_container_t *c)
{
	return coli_io_xxh64(c->map, CT_SUPER_BYTES);
}
