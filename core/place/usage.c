/*
 * core/place/usage.c — the expert usage file: how often each (layer, expert) was
 * routed, kept across runs so the tier manager can load the hottest experts
 * at start, and so A/B runs can start from identical heat
 * (`coli usage snapshot|restore`).
 *
 * Binary, little-endian, default path MODEL.coli.usage:
 *
 *   offset  size  field
 *        0     8  magic "COLIUSE\0"
 *        8     4  version (1)
 *       12     4  n_layers: expert layers, container table order
 *       16     4  n_experts per layer (the largest layer's count)
 *       20     4  reserved, 0
 *       24     8  model hash: xxh64 of the container's superblock, which
 *                 covers its tables and every slab checksum
 *       32     8  tokens counted
 *       40     8  reserved, 0
 *       48  8*L*E counts, u64 [n_layers][n_experts]
 *      end     8  xxh64 of every byte before it
 *
 * Writes are atomic: PATH.tmp.<pid>, fsync, rename over PATH. A file whose
 * hash or shape does not match the model is ignored by the engine (one line
 * on stderr); a torn or corrupt file is refused by its checksum.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core_internal.h"

#define USAGE_MAGIC   "COLIUSE"
#define USAGE_VERSION 1
#define USAGE_HEAD    48

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void coli_usage_default_path(const char *model, char *out, size_t len)
{
	snprintf(out, len, "%s.usage", model);
}

int coli_usage_read(const char *path, struct coli_usage *u, char *err, size_t errlen)
{
	size_t n = (size_t)u->n_layers * u->n_experts, bytes = USAGE_HEAD + 8 * n + 8;
	unsigned char *b;
	FILE *f = fopen(path, "rb");
	long sz;
	int rc = 0;

	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -errno;
	}
	b = malloc(bytes);
	if (!b) {
		fclose(f);
		return -ENOMEM;
	}
	fseek(f, 0, SEEK_END);
	sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	if (sz < USAGE_HEAD + 8 || fread(b, 1, USAGE_HEAD, f) != USAGE_HEAD ||
	    memcmp(b, USAGE_MAGIC, 8)) {
		snprintf(err, errlen, "%s: not a coli usage file", path);
		rc = -EBADMSG;
	} else if (get32(b + 8) != USAGE_VERSION) {
		snprintf(err, errlen, "%s: usage file version %u, this coli reads %d", path,
		         get32(b + 8), USAGE_VERSION);
		rc = -EPROTO;
	} else if (get64(b + 24) != u->model_hash) {
		snprintf(err, errlen,
		         "%s: written for another model (hash %016llx, this model %016llx)", path,
		         (unsigned long long)get64(b + 24), (unsigned long long)u->model_hash);
		rc = -ESTALE;
	} else if (get32(b + 12) != (uint32_t)u->n_layers ||
	           get32(b + 16) != (uint32_t)u->n_experts || (size_t)sz != bytes) {
		snprintf(err, errlen, "%s: shape %ux%u does not match the model's %dx%d", path,
		         get32(b + 12), get32(b + 16), u->n_layers, u->n_experts);
		rc = -EINVAL;
	} else if (fread(b + USAGE_HEAD, 1, bytes - USAGE_HEAD, f) != bytes - USAGE_HEAD ||
	           get64(b + bytes - 8) != coli_io_xxh64(b, bytes - 8)) {
		snprintf(err, errlen, "%s: checksum mismatch (torn or corrupt usage file)", path);
		rc = -EBADMSG;
	} else {
		u->tokens = get64(b + 32);
		for (size_t i = 0; i < n; i++)
			u->counts[i] = get64(b + USAGE_HEAD + 8 * i);
	}
	free(b);
	fclose(f);
	return rc;
}

int coli_usage_write(const char *path, const struct coli_usage *u, char *err, size_t errlen)
{
	size_t n = (size_t)u->n_layers * u->n_experts, bytes = USAGE_HEAD + 8 * n + 8;
	char tmp[4200];
	unsigned char *b = calloc(1, bytes);
	int fd, rc = 0;

	if (!b)
		return -ENOMEM;
	memcpy(b, USAGE_MAGIC, 8);
	put32(b + 8, USAGE_VERSION);
	put32(b + 12, (uint32_t)u->n_layers);
	put32(b + 16, (uint32_t)u->n_experts);
	put64(b + 24, u->model_hash);
	put64(b + 32, u->tokens);
	for (size_t i = 0; i < n; i++)
		put64(b + USAGE_HEAD + 8 * i, u->counts[i]);
	put64(b + bytes - 8, coli_io_xxh64(b, bytes - 8));
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
		free(b);
		return rc;
	}
	for (size_t off = 0; off < bytes && !rc;) {
		ssize_t w = write(fd, b + off, bytes - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			rc = w < 0 ? -errno : -ENOSPC;
		else
			off += (size_t)w;
	}
	if (!rc && fsync(fd))
		rc = -errno;
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc) {
		snprintf(err, errlen, "%s: cannot write: %s", path, strerror(-rc));
		unlink(tmp);
	}
	free(b);
	return rc;
}

int coli_usage_copy(const char *model, const char *from, const char *to, char *err, size_t errlen)
{
	struct coli_usage u = {0};
	coli_container_t *c;
	int rc;

	rc = coli_io_container_open(model, &c);
	if (rc) {
		snprintf(err, errlen, "%s", coli_io_errmsg());
		return rc;
	}
	u.model_hash = coli_io_container_hash(c);
	u.n_layers = coli_io_container_n_expert_layers(c);
	for (int i = 0; i < u.n_layers; i++)
		if ((int)coli_io_container_expert_layer(c, i)->n_experts > u.n_experts)
			u.n_experts = (int)coli_io_container_expert_layer(c, i)->n_experts;
	coli_io_container_close(c);
	u.counts = calloc((size_t)u.n_layers * u.n_experts + 1, sizeof(uint64_t));
	if (!u.counts)
		return -ENOMEM;
	rc = coli_usage_read(from, &u, err, errlen);
	if (!rc)
		rc = coli_usage_write(to, &u, err, errlen);
	free(u.counts);
	return rc;
}
