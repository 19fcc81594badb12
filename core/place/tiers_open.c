/*
 * core/place/tiers_open.c — the expert tiers' open and close
 * (core/place/tiers.c owns the slot map and its reads): the RAM budget, the
 * dense region read into an arena and its checksums, the slot arena
 * (mem/slots.c), the slab streamer (io/stream.c), and the usage file
 * (usage.c): read at open, its hottest experts warmed up, saved every
 * --usage-every tokens and at close.
 *
 * Budget (--ram-gb B, GB = 1e9 bytes), checked at open:
 *   fixed     = dense region (copied into an arena) + KV cache (K and V)
 *               + scratch buffers
 *   min_slots = top_k: the slabs one decode layer needs at once
 *   B >= fixed + min_slots * slot_bytes, else the engine refuses to start
 *   saying how much is needed; slots = min(all slabs, (B - fixed) / slot).
 *   B = 0: exactly the working set. B < 0 (default): as many slots as
 *   90% of MemAvailable allows (at most every slab), dense part left on the
 *   container's mapping; so the default behaves as "everything resident
 *   after first use" on machines that can hold the model, and as a cache
 *   rather than an OOM kill on those that cannot.
 *
 * The usage file's hottest experts are read at open (as background-class
 * reads: io/stream.c serves them last, one at a time) up to the slots the
 * budget allows.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/place/tiers_internal.h"

#define GB 1e9

/* ---- usage ---- */

static void usage_save(struct coli_engine *e)
{
	struct coli_tiers *t = e->tiers;
	char err[700];

	if (!t->usage_on)
		return;
	t->usage.tokens += t->tokens - t->last_save;
	t->last_save = t->tokens;
	if (coli_usage_write(t->usage_path, &t->usage, err, sizeof(err))) {
		fprintf(stderr, "coli: usage file not saved: %s\n", err);
		t->usage_on = 0; /* said once */
	}
}

void coli_tiers_tokens(struct coli_engine *e, int T)
{
	struct coli_tiers *t = e->tiers;

	if (!t)
		return;
	t->tokens += (uint64_t)T;
	if (e->opts.usage_every > 0 && t->tokens - t->last_save >= (uint64_t)e->opts.usage_every)
		usage_save(e);
}

static int cmp_heat(const void *a, const void *b, void *arg)
{
	const uint64_t *c = arg;
	uint64_t x = c[*(const int *)a], y = c[*(const int *)b];

	return x < y ? 1 : x > y ? -1 : *(const int *)a - *(const int *)b;
}

/* Read the usage file into count[] (--usage off: none). 1 if it gave a heat,
 * else 0 with count[] zero. */
static int usage_load(struct coli_engine *e, const char *model)
{
	struct coli_tiers *t = e->tiers;
	char err[700];
	int rc;

	if (e->opts.usage_off)
		return 0;
	if (e->opts.usage[0])
		snprintf(t->usage_path, sizeof(t->usage_path), "%s", e->opts.usage);
	else
		coli_usage_default_path(model, t->usage_path, sizeof(t->usage_path));
	t->usage_on = 1;
	t->usage.model_hash = coli_io_container_hash(t->c);
	t->usage.n_layers = t->nxl;
	t->usage.n_experts = t->E;
	t->usage.counts = t->count;
	rc = coli_usage_read(t->usage_path, &t->usage, err, sizeof(err));
	if (!rc)
		return 1;
	if (rc != -ENOENT)
		fprintf(stderr, "coli: usage file ignored: %s\n", err);
	memset(t->count, 0, (size_t)t->nxl * t->E * sizeof(*t->count));
	t->usage.tokens = 0;
	return 0;
}

/* Load the usage file and queue the warm-up reads: the hottest experts,
 * then the ones it never saw, as far as the RAM slots go. When every expert
 * fits, all are read (with no usage file, or --usage off, too): a model that
 * fits in RAM is read once, in the background, instead of on first use
 * mid-token (or, for an expert placed in VRAM at open, when the VRAM tier's
 * adaptation sends it back). */
static void usage_open(struct coli_engine *e, const char *model)
{
	struct coli_tiers *t = e->tiers;
	size_t n = (size_t)t->nxl * t->E;
	int *order, room, nb = 0, all_fit = t->n_slots >= t->total;
	uint64_t maxc = 0;

	if (!usage_load(e, model) && !all_fit)
		return;
	order = malloc(n * sizeof(int));
	if (!order)
		return;
	for (size_t i = 0; i < n; i++) {
		order[i] = (int)i;
		maxc = t->count[i] > maxc ? t->count[i] : maxc;
	}
	qsort_r(order, n, sizeof(int), cmp_heat, t->count);
	room = all_fit ? t->total : t->n_slots - t->min_slots; /* else keep slots for misses */
	for (size_t j = 0; j < n && nb < room; j++) {
		int xl = order[j] / t->E, ex = order[j] % t->E, i;

		if (ex >= (int)coli_io_container_expert_layer(t->c, xl)->n_experts)
			continue;
		i = coli_mem_slots_alloc(t->slots);
		if (i < 0)
			break;
		assign(t, i, xl, ex, 0);
		/* start heat from the file, scaled so a live expert can catch up */
		X(t, xl, ex)->score = maxc ? 8.0f * (float)t->count[order[j]] / (float)maxc : 0;
		t->batch[nb++] = (struct coli_io_read){xl, (uint32_t)ex, i};
	}
	if (nb && coli_io_stream_submit(t->io, t->batch, nb, COLI_IO_BACKGROUND))
		for (int j = 0; j < nb; j++) {
			evict(t, t->batch[j].slot, &e->est);
			coli_mem_slots_free(t->slots, t->batch[j].slot);
		}
	free(order);
}

/* ---- open / close ---- */

static void fmt_bytes(char *b, size_t n, double bytes)
{
	if (bytes >= 1e9)
		snprintf(b, n, "%.2f GB", bytes / 1e9);
	else if (bytes >= 1e6)
		snprintf(b, n, "%.2f MB", bytes / 1e6);
	else
		snprintf(b, n, "%.1f KB", bytes / 1e3);
}

uint64_t coli_tiers_mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return kb * 1024;
}

/* Every dense tensor's xxh64 over its bytes, before anything reads them:
 * in the arena's copy of the dense region (which starts at file offset off),
 * or with no arena in the container's mapping. */
static int dense_verify(const coli_container_t *c, const char *arena, uint64_t off, char *err,
                        size_t errlen)
{
	for (int i = 0; i < coli_io_container_n_tensors(c); i++) {
		const struct coli_tensor_info *ti = coli_io_container_tensor(c, i);
		const char *p = arena ? arena + (ti->offset - off)
		                      : (const char *)coli_io_container_tensor_data(c, ti);

		if (coli_io_xxh64(p, ti->bytes) != ti->xxh64) {
			snprintf(err, errlen,
			         "%s: tensor %s is corrupt: its checksum does not match (run 'coli "
			         "verify'; --verify-slabs off skips the check)",
			         coli_io_container_path(c), ti->name);
			return -EBADMSG;
		}
	}
	return 0;
}

/* The dense region into an arena on our node, so the budget counts it. */
static int dense_load(struct coli_engine *e, int verify, char *err, size_t errlen)
{
	struct coli_tiers *t = e->tiers;
	const char *path = coli_io_container_path(t->c);
	uint64_t off, bytes;
	int fd, rc = 0;

	coli_io_container_dense_region(t->c, &off, &bytes);
	if (!bytes)
		return 0;
	t->dense = coli_mem_alloc(bytes, e->numa_node);
	if (!t->dense) {
		snprintf(err, errlen, "cannot allocate %.3g MB for the dense weights", bytes / 1e6);
		return -ENOMEM;
	}
	t->dense_bytes = bytes;
	fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	for (uint64_t done = 0; fd >= 0 && done < bytes && !rc;) {
		size_t n = bytes - done > (64u << 20) ? (64u << 20) : bytes - done;
		ssize_t r = pread(fd, (char *)t->dense + done, n, (off_t)(off + done));

		if (r < 0 && errno == EINVAL && done == 0) { /* O_DIRECT refused */
			close(fd);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			rc = r < 0 ? -errno : -EIO;
		else
			done += (uint64_t)r;
	}
	if (fd < 0)
		rc = -errno;
	else
		close(fd);
	if (rc) {
		snprintf(err, errlen, "%s: cannot read the dense weights: %s", path, strerror(-rc));
		return rc;
	}
	if (verify) {
		rc = dense_verify(t->c, t->dense, off, err, errlen);
		if (rc)
			return rc;
	}
	coli_mem_lock(t->dense, bytes, "dense weights");
	if (coli_io_container_n_tensors(t->c) > 0) {
		const struct coli_tensor_info *t0 = coli_io_container_tensor(t->c, 0);
		const char *map0 = (const char *)coli_io_container_tensor_data(t->c, t0);

		coli_model_rebase(&e->m, map0 - (t0->offset - off), bytes, t->dense);
	}
	return 0;
}

static int budget(struct coli_engine *e, const char *model, char *err, size_t errlen)
{
	struct coli_tiers *t = e->tiers;
	struct coli_engine_stats *st = &e->est;
	double B = e->opts.ram_gb;
	uint64_t dense_off, dense, fixed, need, avail;
	char a[32], b[32], c[32], d[32], f[32];

	coli_io_container_dense_region(t->c, &dense_off, &dense);
	fixed =
	    (uint64_t)e->kv.bytes + e->kv.vbytes + e->s.bytes + e->moe.bytes + (B >= 0 ? dense : 0);
	need = fixed + (uint64_t)t->min_slots * t->slot_bytes;
	st->ram_fixed_bytes = fixed;
	if (B < 0) {
		avail = coli_tiers_mem_available() * 9 / 10;
		avail = avail > fixed ? avail - fixed : 0;
		t->n_slots =
		    (int)(avail / t->slot_bytes < (uint64_t)t->total ? avail / t->slot_bytes
		                                                     : (uint64_t)t->total);
		if (t->n_slots < t->min_slots)
			t->n_slots = t->min_slots;
		st->ram_budget_bytes = 0;
	} else if (B == 0) {
		t->n_slots = t->min_slots;
		st->ram_budget_bytes = need;
	} else {
		uint64_t bytes = (uint64_t)(B * GB);

		if (bytes < need) {
			fmt_bytes(a, sizeof(a), (double)dense);
			fmt_bytes(b, sizeof(b), (double)e->kv.bytes + e->kv.vbytes);
			fmt_bytes(c, sizeof(c), (double)(e->s.bytes + e->moe.bytes));
			fmt_bytes(d, sizeof(d), (double)t->min_slots * t->slot_bytes);
			fmt_bytes(f, sizeof(f), (double)need);
			snprintf(
			    err, errlen,
			    "%s: --ram-gb %g cannot hold the engine: dense weights %s + KV cache "
			    "%s (%d x %d tokens) + scratch %s + working set %s (%d experts of %zu "
			    "KB) "
			    "= %s; pass --ram-gb %.4g or more (or --ram-gb 0 for exactly that), "
			    "or a smaller --ctx or --parallel",
			    model, B, a, b, e->kv.n_seq, e->kv.ctx, c, d, t->min_slots,
			    t->slot_bytes >> 10, f, ceil(need / GB * 1e4) / 1e4);
			return -ENOMEM;
		}
		t->n_slots = (int)((bytes - fixed) / t->slot_bytes < (uint64_t)t->total
		                       ? (bytes - fixed) / t->slot_bytes
		                       : (uint64_t)t->total);
		st->ram_budget_bytes = bytes;
	}
	st->slot_bytes = t->slot_bytes;
	st->ram_slots = (uint64_t)t->n_slots;
	st->min_slots = (uint64_t)t->min_slots;
	st->total_slabs = (uint64_t)t->total;
	return 0;
}

int coli_tiers_open(struct coli_engine *e, char *err, size_t errlen)
{
	struct coli_tiers *t = calloc(1, sizeof(*t));
	struct coli_io_stream_opts so;
	const char *model = coli_io_container_path(e->m.c);
	size_t n;
	int rc;

	if (!t)
		return -ENOMEM;
	e->tiers = t;
	t->c = e->m.c;
	t->nxl = coli_io_container_n_expert_layers(t->c);
	t->pred_xl = -1;
	for (int i = 0; i < t->nxl; i++) {
		const struct coli_expert_layer *xl = coli_io_container_expert_layer(t->c, i);

		t->E = (int)xl->n_experts > t->E ? (int)xl->n_experts : t->E;
		t->slot_bytes = xl->slab_bytes > t->slot_bytes ? xl->slab_bytes : t->slot_bytes;
		t->total += (int)xl->n_experts;
	}
	if (!t->nxl)
		return 0; /* a dense model: nothing to tier */
	t->slot_bytes = (t->slot_bytes + 4095) & ~(size_t)4095;
	t->min_slots = e->m.cfg.top_k > 0 ? e->m.cfg.top_k : 1;
	if (t->min_slots > t->total)
		t->min_slots = t->total;
	rc = budget(e, model, err, errlen);
	if (rc)
		return rc;
	n = (size_t)t->nxl * t->E;
	t->x = calloc(n, sizeof(*t->x));
	t->count = calloc(n, sizeof(*t->count));
	t->s = calloc((size_t)t->n_slots, sizeof(*t->s));
	t->acq = calloc((size_t)t->n_slots, sizeof(*t->acq));
	t->batch = calloc(n, sizeof(*t->batch));
	t->pred = calloc((size_t)t->E, 1);
	if (!t->x || !t->count || !t->s || !t->acq || !t->batch || !t->pred) {
		snprintf(err, errlen, "out of memory for the tier map");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		t->x[i].slot = -1;
	if (e->opts.ram_gb >= 0) {
		rc = dense_load(e, e->opts.verify_slabs != COLI_OPT_VERIFY_OFF, err, errlen);
		if (rc)
			return rc;
	} else if (e->opts.verify_slabs != COLI_OPT_VERIFY_OFF) {
		/* no budget: the tensors are read in place from the mapping */
		rc = dense_verify(t->c, NULL, 0, err, errlen);
		if (rc)
			return rc;
	}
	rc = coli_mem_slots_create(t->slot_bytes, t->n_slots, e->numa_node, &t->slots);
	if (rc) {
		snprintf(err, errlen, "cannot allocate %d expert slots of %zu KB (%.3g GB)",
		         t->n_slots, t->slot_bytes >> 10, (double)t->n_slots * t->slot_bytes / GB);
		return rc;
	}
	if (e->opts.ram_gb >= 0)
		coli_mem_lock(coli_mem_slots_base(t->slots), coli_mem_slots_bytes(t->slots),
		              "expert slots");
	coli_io_stream_opts_init(&so);
	so.backend = e->opts.io == COLI_OPT_IO_PREAD   ? COLI_IO_PREAD
	             : e->opts.io == COLI_OPT_IO_URING ? COLI_IO_URING
	                                               : COLI_IO_AUTO;
	so.verify = e->opts.verify_slabs == COLI_OPT_VERIFY_ON    ? COLI_IO_VERIFY_ON
	            : e->opts.verify_slabs == COLI_OPT_VERIFY_OFF ? COLI_IO_VERIFY_OFF
	                                                          : COLI_IO_VERIFY_FIRST;
	rc = coli_io_stream_create(t->c, t->slots, &so, &t->io);
	if (rc) {
		snprintf(err, errlen, "%s", coli_io_errmsg());
		return rc;
	}
	usage_open(e, model);
	if (e->opts.verbose)
		fprintf(stderr,
		        "coli: tiers: %d RAM slots of %zu KB for %d experts (working set %d), %s\n",
		        t->n_slots, t->slot_bytes >> 10, t->total, t->min_slots,
		        coli_io_stream_describe(t->io));
	return 0;
}

void coli_tiers_close(struct coli_engine *e)
{
	struct coli_tiers *t = e->tiers;

	if (!t)
		return;
	if (t->io) {
		usage_save(e);
		coli_io_stream_destroy(t->io);
	}
	coli_mem_slots_destroy(t->slots);
	if (t->dense)
		coli_mem_free(t->dense, t->dense_bytes);
	free(t->x), free(t->count), free(t->s), free(t->acq), free(t->batch), free(t->pred);
	free(t);
	e->tiers = NULL;
}
