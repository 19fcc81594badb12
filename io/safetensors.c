/*
 * io/safetensors.c — reading Hugging Face .safetensors files, validated.
 *
 * The format:
 *
 *   [ u64 N, little endian ][ N bytes of JSON ][ data region ............ ]
 *                            {"name": {"dtype": "BF16", "shape": [r, c],
 *                                      "data_offsets": [begin, end]}, ...,
 *                             "__metadata__": {...}}
 *
 * data_offsets are relative to the start of the data region. Everything in
 * the header is hostile until checked: N must fit the file (and a 100 MiB cap,
 * the reference implementation's), the JSON must be an object without
 * duplicate keys, every tensor needs a known dtype, a shape of at most 4
 * non-negative dims, and [begin, end) inside the data region with
 * end - begin == numel x element size computed without overflow. Ranges may
 * not overlap (holes are tolerated). "__metadata__" is ignored.
 *
 * F32, F16, BF16 and the 8-bit floats F8_E4M3, F8_E5M2 and F8_E8M0 can be
 * read (converted to fp32, exactly; an F8 weight's block scales are the
 * converter's business, core/convert/convert_fp8.c); the other dtypes of the
 * spec parse (so a file is described fully) and fail at read time with a
 * message naming the dtype and the tensor. Reads are pread()s of at most
 * COLI_ST_READ_CHUNK bytes each, into the caller's buffer: narrower sources
 * are read into the tail of the fp32 destination (its last n x size bytes)
 * and widened in place from the front, so no second buffer is needed
 * (element i's output bytes end at 4i+3, before the tail's element i+1).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/io.h"
#include "io/io_internal.h"

#define COLI_ST_HEADER_MAX (100u << 20)
#define COLI_ST_READ_CHUNK (16u << 20)

static const struct {
	const char *name;
	enum coli_st_dtype dtype;
	unsigned bytes;
} g_st_dtypes[] = {
    {"F32", COLI_ST_F32, 4},         {"F16", COLI_ST_F16, 2},
    {"BF16", COLI_ST_BF16, 2},       {"F64", COLI_ST_OTHER, 8},
    {"I64", COLI_ST_OTHER, 8},       {"U64", COLI_ST_OTHER, 8},
    {"I32", COLI_ST_OTHER, 4},       {"U32", COLI_ST_OTHER, 4},
    {"I16", COLI_ST_OTHER, 2},       {"U16", COLI_ST_OTHER, 2},
    {"I8", COLI_ST_OTHER, 1},        {"U8", COLI_ST_OTHER, 1},
    {"BOOL", COLI_ST_OTHER, 1},      {"F8_E4M3", COLI_ST_F8_E4M3, 1},
    {"F8_E5M2", COLI_ST_F8_E5M2, 1}, {"F8_E8M0", COLI_ST_F8_E8M0, 1},
};
#define N_ST_DTYPES (int)(sizeof(g_st_dtypes) / sizeof(g_st_dtypes[0]))

unsigned coli_io_st_dtype_bytes(enum coli_st_dtype d)
{
	switch (d) {
	case COLI_ST_F32:
		return 4;
	case COLI_ST_F16:
	case COLI_ST_BF16:
		return 2;
	case COLI_ST_F8_E4M3:
	case COLI_ST_F8_E5M2:
	case COLI_ST_F8_E8M0:
		return 1;
	default:
		return 0;
	}
}

static int cmp_offset(const void *a, const void *b)
{
	const struct coli_st_tensor *x = *(struct coli_st_tensor *const *)a;
	const struct coli_st_tensor *y = *(struct coli_st_tensor *const *)b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Reads a JSON integer >= 0 into *out; 0 or -1. */
static int json_u64(const json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* One header entry -> t (name already set). hdr_end = 8 + N. */
static int parse_entry(const char *path, const char *name, json_t *obj, uint64_t hdr_end,
                       uint64_t data_bytes, struct coli_st_tensor *t)
{
	json_t *dt = json_object_get(obj, "dtype"), *shape = json_object_get(obj, "shape");
	json_t *offs = json_object_get(obj, "data_offsets");
	uint64_t begin, end, numel = 1, esize = 0;
	const char *ds;

	if (!json_is_object(obj) || !json_is_string(dt) || !json_is_array(shape) ||
	    !json_is_array(offs))
		return io_err(-EBADMSG, path,
		              "bad safetensors header: tensor '%s' needs dtype, shape "
		              "and data_offsets",
		              name);
	ds = json_string_value(dt);
	for (int i = 0; i < N_ST_DTYPES; i++) {
		if (!strcmp(ds, g_st_dtypes[i].name)) {
			t->dtype = g_st_dtypes[i].dtype;
			esize = g_st_dtypes[i].bytes;
		}
	}
	if (!esize)
		return io_err(-EBADMSG, path,
		              "bad safetensors header: tensor '%s' has unknown dtype '%.15s'", name,
		              ds);
	snprintf(t->dtype_name, sizeof(t->dtype_name), "%s", ds);
	if (json_array_size(shape) > 4)
		return io_err(-EBADMSG, path,
		              "tensor '%s' has %zu dimensions (at most 4 are supported)", name,
		              json_array_size(shape));
	t->ndim = (int)json_array_size(shape);
	for (int i = 0; i < t->ndim; i++) {
		if (json_u64(json_array_get(shape, i), &t->shape[i]))
			return io_err(-EBADMSG, path,
			              "bad safetensors header: tensor '%s' shape[%d] is "
			              "not a non-negative integer",
			              name, i);
		if (t->shape[i] && numel > UINT64_MAX / t->shape[i])
			return io_err(-EBADMSG, path,
			              "bad safetensors header: tensor '%s' shape overflows", name);
		numel *= t->shape[i];
	}
	if (json_array_size(offs) != 2 || json_u64(json_array_get(offs, 0), &begin) ||
	    json_u64(json_array_get(offs, 1), &end))
		return io_err(-EBADMSG, path,
		              "bad safetensors header: tensor '%s' data_offsets must be "
		              "[begin, end]",
		              name);
	if (begin > end || end > data_bytes)
		return io_err(-EBADMSG, path,
		              "bad safetensors header: tensor '%s' data_offsets [%llu, "
		              "%llu] outside the data region of %llu bytes",
		              name, (unsigned long long)begin, (unsigned long long)end,
		              (unsigned long long)data_bytes);
	if (numel > UINT64_MAX / esize || end - begin != numel * esize)
		return io_err(-EBADMSG, path,
		              "bad safetensors header: tensor '%s' is %llu bytes but "
		              "dtype %s x shape needs %llu",
		              name, (unsigned long long)(end - begin), ds,
		              (unsigned long long)(numel > UINT64_MAX / esize ? 0 : numel * esize));
	t->offset = hdr_end + begin;
	t->bytes = end - begin;
	return 0;
}

int coli_io_st_parse_header(const char *json, size_t len, uint64_t data_bytes, const char *path,
                            struct coli_st_file *f)
{
	struct coli_st_tensor **order = NULL;
	json_error_t jerr;
	json_t *root, *v;
	const char *key;
	int rc = 0, n = 0;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	f->path = strdup(path ? path : "(memory)");
	if (!f->path)
		return io_err(-ENOMEM, path, "out of memory");
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		rc = io_err(-EBADMSG, f->path, "bad safetensors header: invalid JSON (line %d: %s)",
		            jerr.line, jerr.text);
		goto err;
	}
	if (!json_is_object(root)) {
		rc = io_err(-EBADMSG, f->path, "bad safetensors header: not a JSON object");
		goto err;
	}
	f->t = calloc(json_object_size(root) + 1, sizeof(*f->t));
	order = calloc(json_object_size(root) + 1, sizeof(*order));
	if (!f->t || !order) {
		rc = io_err(-ENOMEM, f->path, "out of memory");
		goto err;
	}
	json_object_foreach(root, key, v)
	{
		struct coli_st_tensor *t = &f->t[n];

		if (!strcmp(key, "__metadata__"))
			continue;
		if (!*key) {
			rc = io_err(-EBADMSG, f->path, "bad safetensors header: empty tensor name");
			goto err;
		}
		t->name = strdup(key);
		if (!t->name) {
			rc = io_err(-ENOMEM, f->path, "out of memory");
			goto err;
		}
		f->n = ++n;
		rc = parse_entry(f->path, key, v, 8 + (uint64_t)len, data_bytes, t);
		if (rc)
			goto err;
		order[n - 1] = t;
	}
	/* No two tensors may share bytes: sort by offset, compare neighbours. */
	qsort(order, n, sizeof(*order), cmp_offset);
	for (int i = 1; i < n; i++) {
		if (order[i - 1]->offset + order[i - 1]->bytes > order[i]->offset) {
			rc = io_err(-EBADMSG, f->path,
			            "bad safetensors header: tensors '%s' and '%s' overlap",
			            order[i - 1]->name, order[i]->name);
			goto err;
		}
	}
	free(order);
	json_decref(root);
	return 0;
err:
	free(order);
	json_decref(root);
	coli_io_st_close(f);
	return rc;
}

/* pread exactly n bytes at off; short file -> -EIO. */
static int pread_full(int fd, const char *path, void *p, uint64_t n, uint64_t off)
{
	char *dst = p;

	while (n) {
		size_t want = n > COLI_ST_READ_CHUNK ? COLI_ST_READ_CHUNK : (size_t)n;
		ssize_t r = pread(fd, dst, want, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return io_err(-errno, path, "read at offset %llu failed: %s",
			              (unsigned long long)off, strerror(errno));
		if (r == 0)
			return io_err(-EIO, path, "unexpected end of file at offset %llu",
			              (unsigned long long)off);
		dst += r;
		off += (uint64_t)r;
		n -= (uint64_t)r;
	}
	return 0;
}

int coli_io_st_open(const char *path, struct coli_st_file *f)
{
	unsigned char lenb[8];
	uint64_t hlen = 0;
	struct stat st;
	char *hdr;
	int fd, rc;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return io_err(-errno, path, "cannot open: %s", strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return io_err(-EINVAL, path, "not a regular file");
	}
	if (st.st_size < 8) {
		close(fd);
		return io_err(-EBADMSG, path,
		              "bad safetensors header: file is %lld bytes, too short "
		              "for the 8-byte header length",
		              (long long)st.st_size);
	}
	rc = pread_full(fd, path, lenb, 8, 0);
	if (rc) {
		close(fd);
		return rc;
	}
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | lenb[i];
	if (hlen < 2 || hlen > COLI_ST_HEADER_MAX || hlen > (uint64_t)st.st_size - 8) {
		close(fd);
		return io_err(-EBADMSG, path,
		              "bad safetensors header: header length %llu does not fit "
		              "the file (%lld bytes; limit %u)",
		              (unsigned long long)hlen, (long long)st.st_size, COLI_ST_HEADER_MAX);
	}
	hdr = malloc(hlen);
	if (!hdr) {
		close(fd);
		return io_err(-ENOMEM, path, "out of memory for a %llu-byte header",
		              (unsigned long long)hlen);
	}
	rc = pread_full(fd, path, hdr, hlen, 8);
	if (!rc)
		rc = coli_io_st_parse_header(hdr, hlen, (uint64_t)st.st_size - 8 - hlen, path, f);
	free(hdr);
	if (rc) {
		close(fd);
		return rc;
	}
	f->fd = fd;
	f->file_bytes = (uint64_t)st.st_size;
	return 0;
}

void coli_io_st_close(struct coli_st_file *f)
{
	if (!f)
		return;
	for (int i = 0; i < f->n; i++)
		free(f->t[i].name);
	free(f->t);
	free(f->path);
	if (f->fd >= 0)
		close(f->fd);
	memset(f, 0, sizeof(*f));
	f->fd = -1;
}

const struct coli_st_tensor *coli_io_st_find(const struct coli_st_file *f, const char *name)
{
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->t[i].name, name))
			return &f->t[i];
	return NULL;
}

uint64_t coli_io_st_numel(const struct coli_st_tensor *t)
{
	uint64_t n = 1;

	for (int i = 0; i < t->ndim; i++)
		n *= t->shape[i];
	return n;
}

static float half_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
	float f;

	if (exp == 0x1f) {
		u = sign | 0x7f800000u | man << 13; /* inf / nan */
	} else if (exp) {
		u = sign | (exp + 112) << 23 | man << 13;
	} else {
		/* zero or subnormal: man x 2^-24, exact in fp32 */
		f = (float)man * 0x1p-24f;
		memcpy(&u, &f, 4);
		u |= sign;
	}
	memcpy(&f, &u, 4);
	return f;
}

int coli_io_st_read_range_raw(const struct coli_st_file *f, const struct coli_st_tensor *t,
                              uint64_t elem0, uint64_t n, void *dst)
{
	unsigned es = coli_io_st_dtype_bytes(t->dtype);

	if (!es)
		return io_err(-ENOTSUP, f->path,
		              "tensor '%s' has dtype %s; only F32, F16, BF16 and F8 "
		              "(E4M3, E5M2, E8M0) can be read",
		              t->name, t->dtype_name);
	if (elem0 > t->bytes / es || n > t->bytes / es - elem0)
		return io_err(-EINVAL, f->path, "tensor '%s': read past its end", t->name);
	if (f->fd < 0)
		return io_err(-EBADF, f->path, "not open for reading");
	return pread_full(f->fd, f->path, dst, n * es, t->offset + elem0 * es);
}

/* e4m3fn: bias 7, no infinities; S.1111.111 is NaN (448 the largest). */
static float e4m3_to_f32(uint8_t b)
{
	uint32_t sign = (uint32_t)(b >> 7) << 31, exp = (b >> 3) & 0xf, man = b & 7, u;
	float f;

	if (exp == 0xf && man == 7) {
		u = sign | 0x7fc00000u;
	} else if (exp) {
		u = sign | (exp + 120) << 23 | man << 20;
	} else {
		f = (float)man * 0x1p-9f; /* subnormal: man x 2^-9, exact */
		memcpy(&u, &f, 4);
		u |= sign;
	}
	memcpy(&f, &u, 4);
	return f;
}

/* e8m0: an exponent alone, 2^(e-127); 0xff is NaN. */
static float e8m0_to_f32(uint8_t b)
{
	uint32_t u = b == 0xff ? 0x7fc00000u : b ? (uint32_t)b << 23 : 0x00400000u;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static void widen_f8(enum coli_st_dtype d, const uint8_t *s8, uint64_t i0, uint64_t i1, float *dst)
{
	for (uint64_t i = i0; i < i1; i++)
		dst[i] = d == COLI_ST_F8_E4M3   ? e4m3_to_f32(s8[i])
		         : d == COLI_ST_F8_E5M2 ? half_to_f32((uint16_t)(s8[i] << 8))
		                                : e8m0_to_f32(s8[i]);
}

void coli_io_st_widen(enum coli_st_dtype d, const void *src, uint64_t i0, uint64_t i1, float *dst)
{
	const uint16_t *s16 = src;

	if (d == COLI_ST_F32) {
		memcpy(dst + i0, (const float *)src + i0, (i1 - i0) * 4);
		return;
	}
	if (coli_io_st_dtype_bytes(d) == 1) {
		widen_f8(d, src, i0, i1, dst);
		return;
	}
	for (uint64_t i = i0; i < i1; i++) {
		uint32_t u = (uint32_t)s16[i] << 16;

		if (d == COLI_ST_BF16)
			memcpy(&dst[i], &u, 4);
		else
			dst[i] = half_to_f32(s16[i]);
	}
}

int coli_io_st_read_range_f32(const struct coli_st_file *f, const struct coli_st_tensor *t,
                              uint64_t elem0, uint64_t n, float *dst)
{
	unsigned es = coli_io_st_dtype_bytes(t->dtype);
	/* narrower dtypes: the last n x es bytes of dst */
	unsigned char *tail = (unsigned char *)dst + (uint64_t)(4 - (es ? es : 4)) * n;
	int rc = coli_io_st_read_range_raw(f, t, elem0, n, tail);

	if (rc || es == 4)
		return rc;
	/* in place: coli_io_st_widen goes in ascending order, reading element i
	 * before writing dst[i], which never reaches the entries still unread */
	coli_io_st_widen(t->dtype, tail, 0, n, dst);
	return 0;
}

int coli_io_st_read_f32(const struct coli_st_file *f, const struct coli_st_tensor *t, float *dst)
{
	return coli_io_st_read_range_f32(f, t, 0, coli_io_st_numel(t), dst);
}
