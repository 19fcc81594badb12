/*
 * io/gguf.c — reading GGUF files, validated (io/gguf.h).
 *
 * The format (versions 2 and 3, little endian):
 *
 *   "GGUF" u32 version  u64 n_tensors  u64 n_kv
 *   n_kv x      [ str key ][ u32 vtype ][ value ]
 *   n_tensors x [ str name ][ u32 n_dims ][ u64 ne[n_dims] ][ u32 type ][ u64 offset ]
 *   padding to general.alignment (default 32)
 *   data: each tensor at data_offset + offset (aligned)
 *
 * str is u64 length + bytes; an array value is u32 element type, u64 count,
 * the elements. Checks: the magic and version (big-endian files refused by
 * name), every length and count against the bytes left (so no count can ask
 * for more memory than the file holds), no nested arrays, no duplicate keys
 * or tensor names, 1-4 dims each >= 1, ne[0] a multiple of the type's block,
 * sizes without overflow, offsets aligned, data inside the file, tensors not
 * overlapping. Unknown tensor types parse (the converter names them when it
 * refuses the file) only when their size is computable: a type coli has no
 * block size for is refused here with its number.
 *
 * Split models (gguf-split's PREFIX-0000K-of-0000N.gguf, coli_gguf_open_split)
 * are N such files; part 1 holds the metadata, every part its tensors.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu/ggml.h"
#include "io/gguf.h"
#include "io/io.h"
#include "io/io_internal.h"

#define GGUF_MAGIC      0x46554747u /* "GGUF" read little endian */
#define GGUF_DEF_ALIGN  32
#define GGUF_MAX_DIMS   4
#define GGUF_NAME_MAX   (64u << 10) /* a key or tensor name: llama.cpp's names are < 100 */
#define GGUF_TENSOR_MIN 32          /* bytes of the smallest tensor info: 8 + 4 + 8 + 4 + 8 */
#define GGUF_KV_MIN     14          /* of the smallest entry: 8 + 1 + 4 + 1 */
#define GGUF_COUNT_MAX  (1u << 20)  /* keys or tensors: real files have < 100 and < 100k */

static const char *const g_vtypes[] = {"u8",   "i8",  "u16",   "i16", "u32", "i32", "f32",
                                       "bool", "str", "array", "u64", "i64", "f64"};

const char *coli_gguf_vtype_name(uint32_t vtype)
{
	return vtype <= COLI_GGUF_F64 ? g_vtypes[vtype] : "unknown";
}

/* A cursor over the header: every read checks the bytes left. */
struct cur {
	const unsigned char *p;
	uint64_t off, n;
	const char *path;
};

static int need(struct cur *c, uint64_t k, const char *what)
{
	if (k > c->n - c->off)
		return io_err(-EBADMSG, c->path, "truncated at byte %llu: %s needs %llu bytes",
		              (unsigned long long)c->off, what, (unsigned long long)k);
	return 0;
}

static int rd(struct cur *c, void *dst, unsigned k, const char *what)
{
	int rc = need(c, k, what);

	if (!rc) {
		memcpy(dst, c->p + c->off, k);
		c->off += k;
	}
	return rc;
}

static int rd_str(struct cur *c, const char **s, uint64_t *len, const char *what)
{
	int rc = rd(c, len, 8, what);

	if (!rc)
		rc = need(c, *len, what);
	if (!rc) {
		*s = (const char *)c->p + c->off;
		c->off += *len;
	}
	return rc;
}

static int dup_name(struct cur *c, const char *s, uint64_t len, const char *what, char **out)
{
	if (len == 0 || len > GGUF_NAME_MAX || memchr(s, 0, len))
		return io_err(-EBADMSG, c->path, "%s at byte %llu: %s", what,
		              (unsigned long long)(c->off - len),
		              len == 0              ? "empty"
		              : len > GGUF_NAME_MAX ? "too long"
		                                    : "holds a NUL byte");
	if (!(*out = malloc(len + 1)))
		return io_err(-ENOMEM, c->path, "out of memory");
	memcpy(*out, s, len);
	(*out)[len] = 0;
	return 0;
}

static unsigned scalar_bytes(uint32_t t)
{
	static const unsigned b[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

	return t <= COLI_GGUF_F64 ? b[t] : 0;
}

/* A scalar of type t at q into kv->v. */
static void scalar_get(const unsigned char *q, uint32_t t, struct coli_gguf_kv *kv)
{
	uint64_t u = 0;

	memcpy(&u, q, scalar_bytes(t));
	switch (t) {
	case COLI_GGUF_I8:
		kv->v.i = (int8_t)u;
		break;
	case COLI_GGUF_I16:
		kv->v.i = (int16_t)u;
		break;
	case COLI_GGUF_I32:
		kv->v.i = (int32_t)u;
		break;
	case COLI_GGUF_F32: {
		float f;

		memcpy(&f, q, 4);
		kv->v.f = f;
		break;
	}
	case COLI_GGUF_F64:
		memcpy(&kv->v.f, q, 8);
		break;
	default: /* unsigned, bool, i64 (as its bits) */
		kv->v.u = u;
	}
}

static int read_array(struct cur *c, struct coli_gguf_kv *kv)
{
	uint32_t at;
	int rc = rd(c, &at, 4, "an array's element type");

	if (!rc)
		rc = rd(c, &kv->n, 8, "an array's length");
	if (rc)
		return rc;
	if (at == COLI_GGUF_ARR || at > COLI_GGUF_F64)
		return io_err(-EBADMSG, c->path, "key '%s': array of %s not supported", kv->key,
		              at == COLI_GGUF_ARR ? "arrays" : "an unknown type");
	kv->atype = at;
	if (at != COLI_GGUF_STR) {
		unsigned b = scalar_bytes(at);

		if (kv->n > (c->n - c->off) / b)
			return need(c, UINT64_MAX, "an array's elements");
		kv->data = c->p + c->off;
		c->off += kv->n * b;
		return 0;
	}
	if (kv->n > (c->n - c->off) / 8) /* every string takes 8 bytes at least */
		return need(c, UINT64_MAX, "an array's strings");
	kv->strs = malloc((kv->n ? kv->n : 1) * sizeof(*kv->strs));
	if (!kv->strs)
		return io_err(-ENOMEM, c->path, "out of memory");
	for (uint64_t i = 0; i < kv->n; i++) {
		const char *s;
		uint64_t len;

		kv->strs[i] = c->p + c->off;
		if ((rc = rd_str(c, &s, &len, "an array's string")))
			return rc;
	}
	return 0;
}

static int read_kv(struct cur *c, struct coli_gguf *g, int i)
{
	struct coli_gguf_kv *kv = &g->kv[i];
	const char *s;
	uint64_t len;
	uint32_t t;
	int rc = rd_str(c, &s, &len, "a key");

	if (rc || (rc = dup_name(c, s, len, "a key", &kv->key)))
		return rc;
	for (int j = 0; j < i; j++)
		if (!strcmp(g->kv[j].key, kv->key))
			return io_err(-EBADMSG, c->path, "key '%s' appears twice", kv->key);
	if ((rc = rd(c, &t, 4, "a value type")))
		return rc;
	if (t > COLI_GGUF_F64)
		return io_err(-EBADMSG, c->path, "key '%s': unknown value type %u", kv->key, t);
	kv->type = t;
	if (t == COLI_GGUF_STR)
		return rd_str(c, &kv->s, &kv->len, kv->key);
	if (t == COLI_GGUF_ARR)
		return read_array(c, kv);
	if ((rc = need(c, scalar_bytes(t), kv->key)))
		return rc;
	scalar_get(c->p + c->off, t, kv);
	c->off += scalar_bytes(t);
	kv->n = 1;
	return 0;
}

static int read_tensor(struct cur *c, struct coli_gguf *g, int i)
{
	struct coli_gguf_tensor *t = &g->t[i];
	const char *s;
	uint64_t len, rows = 1;
	uint32_t nd;
	unsigned be, bb;
	int rc = rd_str(c, &s, &len, "a tensor name");

	if (rc || (rc = dup_name(c, s, len, "a tensor name", &t->name)))
		return rc;
	if ((rc = rd(c, &nd, 4, t->name)))
		return rc;
	if (nd < 1 || nd > GGUF_MAX_DIMS)
		return io_err(-EBADMSG, c->path, "tensor '%s': %u dims (1-%d)", t->name, nd,
		              GGUF_MAX_DIMS);
	t->ndim = (int)nd;
	for (int d = 0; d < t->ndim; d++) {
		if ((rc = rd(c, &t->ne[d], 8, t->name)))
			return rc;
		if (t->ne[d] == 0 || t->ne[d] > (1ull << 40))
			return io_err(-EBADMSG, c->path, "tensor '%s': dim %d is %llu", t->name, d,
			              (unsigned long long)t->ne[d]);
		if (d && rows > UINT64_MAX / t->ne[d])
			return io_err(-EBADMSG, c->path, "tensor '%s': too many elements", t->name);
		if (d)
			rows *= t->ne[d];
	}
	for (int d = t->ndim; d < GGUF_MAX_DIMS; d++)
		t->ne[d] = 1;
	if ((rc = rd(c, &t->type, 4, t->name)) || (rc = rd(c, &t->offset, 8, t->name)))
		return rc;
	if (coli_ggml_type_block(t->type, &be, &bb))
		return io_err(-EBADMSG, c->path, "tensor '%s': ggml type %u is unknown", t->name,
		              t->type);
	if (t->ne[0] % be)
		return io_err(-EBADMSG, c->path,
		              "tensor '%s': a row of %llu elements is not whole %s blocks of %u",
		              t->name, (unsigned long long)t->ne[0], coli_ggml_type_name(t->type),
		              be);
	t->bytes = t->ne[0] / be * bb;
	if (rows > UINT64_MAX / t->bytes)
		return io_err(-EBADMSG, c->path, "tensor '%s': too many bytes", t->name);
	t->bytes *= rows;
	for (int j = 0; j < i; j++)
		if (!strcmp(g->t[j].name, t->name))
			return io_err(-EBADMSG, c->path, "tensor '%s' appears twice", t->name);
	return 0;
}

static int cmp_off(const void *a, const void *b)
{
	const struct coli_gguf_tensor *x = *(const struct coli_gguf_tensor *const *)a,
	                              *y = *(const struct coli_gguf_tensor *const *)b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* general.alignment, then every tensor's range: aligned, inside the file,
 * no two overlapping. */
static int place_tensors(struct cur *c, struct coli_gguf *g)
{
	const struct coli_gguf_kv *a = coli_gguf_find(g, "general.alignment");
	struct coli_gguf_tensor **o;
	uint64_t data;
	int rc = 0;

	g->alignment = GGUF_DEF_ALIGN;
	if (a) {
		if (a->type != COLI_GGUF_U32 || !a->v.u || (a->v.u & (a->v.u - 1)))
			return io_err(-EBADMSG, c->path,
			              "general.alignment must be a u32 power of two (%s %llu)",
			              coli_gguf_vtype_name(a->type), (unsigned long long)a->v.u);
		g->alignment = (uint32_t)a->v.u;
	}
	data = (c->off + g->alignment - 1) / g->alignment * g->alignment;
	if (g->n_tensors && data > c->n)
		return io_err(-EBADMSG, c->path,
		              "the data section starts past the end of the file");
	g->data_offset = data;
	o = malloc((g->n_tensors ? g->n_tensors : 1) * sizeof(*o));
	if (!o)
		return io_err(-ENOMEM, c->path, "out of memory");
	for (int i = 0; i < g->n_tensors; i++) {
		struct coli_gguf_tensor *t = &g->t[i];

		o[i] = t;
		if (t->offset % g->alignment || t->offset > c->n - data ||
		    t->bytes > c->n - data - t->offset) {
			rc =
			    io_err(-EBADMSG, c->path,
			           "tensor '%s': data at %llu + %llu bytes is %s the file", t->name,
			           (unsigned long long)t->offset, (unsigned long long)t->bytes,
			           t->offset % g->alignment ? "not aligned in" : "outside");
			goto out;
		}
		t->offset += data;
	}
	qsort(o, (size_t)g->n_tensors, sizeof(*o), cmp_off);
	for (int i = 1; i < g->n_tensors; i++)
		if (o[i - 1]->offset + o[i - 1]->bytes > o[i]->offset) {
			rc = io_err(-EBADMSG, c->path, "tensors '%s' and '%s' overlap",
			            o[i - 1]->name, o[i]->name);
			goto out;
		}
out:
	free(o);
	return rc;
}

int coli_gguf_parse(const void *p, uint64_t n, const char *path, struct coli_gguf *g)
{
	struct cur c = {p, 0, n, path};
	uint32_t magic = 0, ver = 0;
	uint64_t nt = 0, nkv = 0;
	int rc;

	memset(g, 0, sizeof(*g));
	g->map = p, g->map_bytes = n;
	if (!(g->path = strdup(path)))
		return io_err(-ENOMEM, path, "out of memory");
	if ((rc = rd(&c, &magic, 4, "the magic")) || magic != GGUF_MAGIC) {
		rc = io_err(-EBADMSG, path, "not a GGUF file (no 'GGUF' magic)");
		goto err;
	}
	if ((rc = rd(&c, &ver, 4, "the version")))
		goto err;
	if (ver != 2 && ver != 3) {
		rc =
		    io_err(-EBADMSG, path, "GGUF version %u not supported (2 and 3 are%s)", ver,
		           (ver >> 24) == 3 || (ver >> 24) == 2 ? "; this file is big endian" : "");
		goto err;
	}
	g->version = ver;
	if ((rc = rd(&c, &nt, 8, "the tensor count")) || (rc = rd(&c, &nkv, 8, "the key count")))
		goto err;
	/* every entry takes bytes: counts beyond what the file holds are lies */
	if (nkv > (n - c.off) / GGUF_KV_MIN || nt > (n - c.off) / GGUF_TENSOR_MIN ||
	    nkv > GGUF_COUNT_MAX || nt > GGUF_COUNT_MAX) {
		rc = io_err(-EBADMSG, path, "%llu keys and %llu tensors cannot fit in %llu bytes",
		            (unsigned long long)nkv, (unsigned long long)nt, (unsigned long long)n);
		goto err;
	}
	g->kv = calloc(nkv ? nkv : 1, sizeof(*g->kv));
	g->t = calloc(nt ? nt : 1, sizeof(*g->t));
	if (!g->kv || !g->t) {
		rc = io_err(-ENOMEM, path, "out of memory");
		goto err;
	}
	for (uint64_t i = 0; i < nkv; i++, g->n_kv++)
		if ((rc = read_kv(&c, g, (int)i))) {
			g->n_kv++; /* its key (and strs) are freed with the rest */
			goto err;
		}
	for (uint64_t i = 0; i < nt; i++, g->n_tensors++)
		if ((rc = read_tensor(&c, g, (int)i))) {
			g->n_tensors++;
			goto err;
		}
	if ((rc = place_tensors(&c, g)))
		goto err;
	return 0;
err:
	coli_gguf_close(g);
	return rc;
}

int coli_gguf_open(const char *path, struct coli_gguf *g)
{
	struct stat st;
	void *map;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	memset(g, 0, sizeof(*g));
	if (fd < 0)
		return io_err(-errno, path, "cannot open: %s", strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < 24) {
		rc = io_err(-EBADMSG, path, "not a GGUF file (%s)",
		            fstat(fd, &st) || !S_ISREG(st.st_mode) ? "not a regular file"
		                                                   : "shorter than its header");
		close(fd);
		return rc;
	}
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return io_err(-errno, path, "cannot map: %s", strerror(errno));
	rc = coli_gguf_parse(map, (uint64_t)st.st_size, path, g);
	if (rc) {
		munmap(map, (size_t)st.st_size);
		return rc;
	}
	g->mapped = 1;
	return 0;
}

void coli_gguf_close(struct coli_gguf *g)
{
	for (int i = 0; g->kv && i < g->n_kv; i++) {
		free(g->kv[i].key);
		free(g->kv[i].strs);
	}
	for (int i = 0; g->t && i < g->n_tensors; i++)
		free(g->t[i].name);
	free(g->kv);
	free(g->t);
	free(g->path);
	if (g->mapped)
		munmap((void *)g->map, (size_t)g->map_bytes);
	memset(g, 0, sizeof(*g));
}

const struct coli_gguf_kv *coli_gguf_find(const struct coli_gguf *g, const char *key)
{
	for (int i = 0; i < g->n_kv; i++)
		if (!strcmp(g->kv[i].key, key))
			return &g->kv[i];
	return NULL;
}

static int is_int(uint32_t t)
{
	return t <= COLI_GGUF_I32 || t == COLI_GGUF_BOOL || t == COLI_GGUF_U64 ||
	       t == COLI_GGUF_I64;
}

static int is_signed(uint32_t t)
{
	return t == COLI_GGUF_I8 || t == COLI_GGUF_I16 || t == COLI_GGUF_I32 || t == COLI_GGUF_I64;
}

int coli_gguf_get_u64(const struct coli_gguf *g, const char *key, uint64_t *out)
{
	const struct coli_gguf_kv *kv = coli_gguf_find(g, key);

	if (!kv)
		return -ENOENT;
	if (!is_int(kv->type) || (is_signed(kv->type) && kv->v.i < 0))
		return io_err(-EBADMSG, g->path, "key '%s' is %s, not a non-negative integer", key,
		              coli_gguf_vtype_name(kv->type));
	*out = kv->v.u;
	return 0;
}

int coli_gguf_get_f64(const struct coli_gguf *g, const char *key, double *out)
{
	const struct coli_gguf_kv *kv = coli_gguf_find(g, key);

	if (!kv)
		return -ENOENT;
	if (kv->type == COLI_GGUF_F32 || kv->type == COLI_GGUF_F64)
		*out = kv->v.f;
	else if (is_int(kv->type))
		*out = is_signed(kv->type) ? (double)kv->v.i : (double)kv->v.u;
	else
		return io_err(-EBADMSG, g->path, "key '%s' is %s, not a number", key,
		              coli_gguf_vtype_name(kv->type));
	return 0;
}

int coli_gguf_get_str(const struct coli_gguf *g, const char *key, const char **s, uint64_t *len)
{
	const struct coli_gguf_kv *kv = coli_gguf_find(g, key);

	if (!kv)
		return -ENOENT;
	if (kv->type != COLI_GGUF_STR)
		return io_err(-EBADMSG, g->path, "key '%s' is %s, not a string", key,
		              coli_gguf_vtype_name(kv->type));
	*s = kv->s, *len = kv->len;
	return 0;
}

const char *coli_gguf_arr_str(const struct coli_gguf_kv *kv, uint64_t i, uint64_t *len)
{
	if (kv->type != COLI_GGUF_ARR || kv->atype != COLI_GGUF_STR || i >= kv->n)
		return NULL;
	memcpy(len, kv->strs[i], 8);
	return (const char *)kv->strs[i] + 8;
}

int64_t coli_gguf_arr_i64(const struct coli_gguf_kv *kv, uint64_t i)
{
	struct coli_gguf_kv one = {0};

	if (kv->type != COLI_GGUF_ARR || !is_int(kv->atype) || i >= kv->n)
		return 0;
	scalar_get(kv->data + i * scalar_bytes(kv->atype), kv->atype, &one);
	return one.v.i;
}

double coli_gguf_arr_f64(const struct coli_gguf_kv *kv, uint64_t i)
{
	struct coli_gguf_kv one = {0};

	if (kv->type != COLI_GGUF_ARR || i >= kv->n || kv->atype == COLI_GGUF_STR)
		return 0;
	scalar_get(kv->data + i * scalar_bytes(kv->atype), kv->atype, &one);
	if (kv->atype == COLI_GGUF_F32 || kv->atype == COLI_GGUF_F64)
		return one.v.f;
	return is_signed(kv->atype) ? (double)one.v.i : (double)one.v.u;
}

const struct coli_gguf_tensor *coli_gguf_tensor_find(const struct coli_gguf *g, const char *name)
{
	for (int i = 0; i < g->n_tensors; i++)
		if (!strcmp(g->t[i].name, name))
			return &g->t[i];
	return NULL;
}

const void *coli_gguf_tensor_data(const struct coli_gguf *g, const struct coli_gguf_tensor *t)
{
	return g->map + t->offset;
}

/* split.count and split.no of g (count 1, no 0 when absent). */
static int split_keys(const struct coli_gguf *g, uint64_t *count, uint64_t *no)
{
	int rc = coli_gguf_get_u64(g, "split.count", count);

	if (rc == -ENOENT)
		*count = 1, rc = 0;
	if (!rc && (rc = coli_gguf_get_u64(g, "split.no", no)) == -ENOENT)
		*no = 0,
		rc = *count > 1 ? io_err(-EBADMSG, g->path, "split.count but no split.no") : 0;
	if (!rc && (*count < 1 || *count > 9999 || *no >= *count))
		rc = io_err(-EBADMSG, g->path, "split.no %llu of split.count %llu",
		            (unsigned long long)*no, (unsigned long long)*count);
	return rc;
}

/* Part k's name: path with its "-00001-of-%05d.gguf" tail renumbered. */
static int part_path(const char *path, uint64_t count, uint64_t k, char **out)
{
	char tail[48];
	size_t n = strlen(path), tl;

	snprintf(tail, sizeof(tail), "-%05llu-of-%05llu.gguf", 1ull, (unsigned long long)count);
	tl = strlen(tail);
	if (n < tl || strcmp(path + n - tl, tail))
		return io_err(-EINVAL, path,
		              "split.count is %llu, but the name does not end in %s (give the "
		              "first part under the name gguf-split gave it)",
		              (unsigned long long)count, tail);
	if (!(*out = malloc(n - tl + sizeof(tail))))
		return io_err(-ENOMEM, path, "out of memory");
	memcpy(*out, path, n - tl);
	snprintf(*out + n - tl, sizeof(tail), "-%05llu-of-%05llu.gguf", (unsigned long long)k + 1,
	         (unsigned long long)count);
	return 0;
}

/* Part k (k >= 1) opened and checked against part 1. */
static int open_part(struct coli_gguf *p, uint64_t count, uint64_t k)
{
	uint64_t c, no;
	char *name = NULL;
	int rc = part_path(p[0].path, count, k, &name);

	if (rc)
		return rc;
	if (access(name, F_OK)) {
		rc = io_err(-ENOENT, p[0].path, "part %llu of %llu, %s, is missing",
		            (unsigned long long)k + 1, (unsigned long long)count, name);
		free(name);
		return rc;
	}
	rc = coli_gguf_open(name, &p[k]);
	free(name);
	if (!rc && !(rc = split_keys(&p[k], &c, &no)) && (c != count || no != k))
		rc = io_err(-EBADMSG, p[k].path,
		            "split.no %llu of split.count %llu: not part %llu of %llu of %s",
		            (unsigned long long)no, (unsigned long long)c,
		            (unsigned long long)k + 1, (unsigned long long)count, p[0].path);
	return rc;
}

/* Every part's tensors add up to split.tensors.count, each name once. */
static int check_parts(struct coli_gguf *p, int n)
{
	uint64_t want, got = 0;
	int rc = coli_gguf_get_u64(&p[0], "split.tensors.count", &want);

	for (int k = 0; k < n; k++)
		got += (uint64_t)p[k].n_tensors;
	if (rc == -ENOENT)
		return io_err(-EBADMSG, p[0].path, "split.count without split.tensors.count");
	if (!rc && want != got)
		return io_err(-EBADMSG, p[0].path,
		              "split.tensors.count is %llu, the %d parts hold %llu tensors",
		              (unsigned long long)want, n, (unsigned long long)got);
	for (int k = 1; !rc && k < n; k++)
		for (int i = 0; i < p[k].n_tensors; i++)
			for (int j = 0; j < k; j++)
				if (coli_gguf_tensor_find(&p[j], p[k].t[i].name))
					return io_err(-EBADMSG, p[k].path,
					              "tensor '%s' is also in %s", p[k].t[i].name,
					              p[j].path);
	return rc;
}

int coli_gguf_open_split(const char *path, struct coli_gguf **parts, int *n_parts)
{
	struct coli_gguf first, *p;
	uint64_t count, no;
	int rc = coli_gguf_open(path, &first), n = 1;

	*parts = NULL, *n_parts = 0;
	if (rc)
		return rc;
	if ((rc = split_keys(&first, &count, &no)))
		goto err_first;
	if (no) {
		rc = io_err(-EINVAL, path,
		            "this is part %llu of %llu of a split model: give the first part "
		            "(-00001-of-%05llu.gguf)",
		            (unsigned long long)no + 1, (unsigned long long)count,
		            (unsigned long long)count);
		goto err_first;
	}
	if (!(p = calloc(count, sizeof(*p)))) {
		rc = io_err(-ENOMEM, path, "out of memory");
		goto err_first;
	}
	p[0] = first;
	for (; (uint64_t)n < count && !rc; n++)
		rc = open_part(p, count, (uint64_t)n);
	if (!rc && count > 1)
		rc = check_parts(p, n);
	if (rc) {
		coli_gguf_close_split(p, n);
		return rc;
	}
	*parts = p, *n_parts = n;
	return 0;
err_first:
	coli_gguf_close(&first);
	return rc;
}

void coli_gguf_close_split(struct coli_gguf *parts, int n_parts)
{
	for (int k = 0; parts && k < n_parts; k++)
		coli_gguf_close(&parts[k]);
	free(parts);
}
