/*
 * io/container_verify.c — coli_io_container_verify: hash every section,
 * tensor and slab of an opened container and compare with the stored xxh64.
 * The first mismatch is reported by name ("tensor blk.0.attn_q",
 * "slab (layer 3, expert 17)"), so a user knows what is corrupt.
 *
 * Reads through the read-only mapping in file order (sections, dense region,
 * expert region), in chunks of at most 64 MiB so the progress callback fires
 * often; after each chunk the pages are advised away (MADV_DONTNEED on a
 * read-only file mapping only drops clean page references), keeping the
 * resident set small while a 100 GB file streams through.
 */
#include <errno.h>
#include <stdio.h>
#include <sys/mman.h>
#define XXH_STATIC_LINKING_ONLY /* XXH64_state_t on the stack */
#include <xxhash.h>

#include "io/io_internal.h"

#define CHUNK (64ull << 20)

struct progress {
	void (*fn)(void *arg, uint64_t done, uint64_t total);
	void *arg;
	uint64_t done, total;
};

static uint64_t hash_mapped(const coli_container_t *c, uint64_t off, uint64_t n, struct progress *p)
{
	XXH64_state_t st;

	XXH64_reset(&st, 0);
	while (n) {
		uint64_t k = n < CHUNK ? n : CHUNK;
		uintptr_t a = (uintptr_t)(c->map + off), lo = (a + 4095) & ~(uintptr_t)4095;

		XXH64_update(&st, c->map + off, (size_t)k);
		/* drop whole pages of this chunk we will not read again */
		if (lo < a + k && ((a + k) & ~(uintptr_t)4095) > lo)
			madvise((void *)lo, ((a + k) & ~(uintptr_t)4095) - lo, MADV_DONTNEED);
		off += k;
		n -= k;
		p->done += k;
		if (p->fn)
			p->fn(p->arg, p->done, p->total);
	}
	return XXH64_digest(&st);
}

static int mismatch(const coli_container_t *c, const char *what, uint64_t stored, uint64_t got)
{
	return io_err(
	    -EBADMSG, c->path,
	    "%s checksum mismatch (stored %016llx, computed %016llx): the file is corrupt; "
	    "reconvert or copy it again",
	    what, (unsigned long long)stored, (unsigned long long)got);
}

int coli_io_container_verify(const coli_container_t *c,
                             void (*progress)(void *arg, uint64_t done, uint64_t total), void *arg)
{
	struct progress p = {progress, arg, 0, 0};
	char what[COLI_TENSOR_NAME_MAX + 64];
	uint64_t h;

	for (int i = 0; i < c->n_sec; i++)
		p.total += c->sec[i].bytes;
	for (int i = 0; i < c->nt; i++)
		p.total += c->t[i].bytes;
	for (int i = 0; i < c->nl; i++)
		p.total += c->l[i].slab_bytes * c->l[i].n_experts;
	if (progress)
		progress(arg, 0, p.total);

	for (int i = 0; i < c->n_sec; i++) {
		h = hash_mapped(c, c->sec[i].offset, c->sec[i].bytes, &p);
		if (h != c->sec[i].xxh64) {
			snprintf(what, sizeof(what), "section %s", io_section_name(c->sec[i].kind));
			return mismatch(c, what, c->sec[i].xxh64, h);
		}
	}
	for (int i = 0; i < c->nt; i++) {
		h = hash_mapped(c, c->t[i].offset, c->t[i].bytes, &p);
		if (h != c->t[i].xxh64) {
			snprintf(what, sizeof(what), "tensor %s", c->t[i].name);
			return mismatch(c, what, c->t[i].xxh64, h);
		}
	}
	for (int i = 0; i < c->nl; i++) {
		const struct coli_expert_layer *l = &c->l[i];

		for (uint32_t e = 0; e < l->n_experts; e++) {
			uint64_t want = coli_io_container_slab_xxh64(c, i, e);

			h = hash_mapped(c, l->offset + (uint64_t)e * l->slab_bytes, l->slab_bytes,
			                &p);
			if (h != want) {
				snprintf(what, sizeof(what), "slab (layer %u, expert %u)", l->layer,
				         e);
				return mismatch(c, what, want, h);
			}
		}
	}
	return 0;
}
