/*
 * core/dev/dev.c — opening expert devices from --gpu, and the checked entry
 * points the scheduler calls beside the kernels' (dev.h): each passes
 * coli_dev_gate (the device has not failed, the fault injector
 * COLI_GPU_FAIL_AFTER does not fire, the launch counted) and forwards to the
 * backend's op; a failure is sticky (coli_dev_fail), so a device that failed
 * once is never trusted again and its experts are computed on the CPU from
 * then on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dev/dev.h"
#include "ptx/ptx.h"

#define SIM_MEM_BYTES ((size_t)1 << 30) /* what the simulated device reports */

int coli_dev_fail(struct coli_dev *d, int rc, const char *what)
{
	if (!d->failed)
		fprintf(stderr, "coli: device %s: %s failed (%s); its experts move to the CPU\n",
		        d->name, what, strerror(-rc));
	d->failed = 1;
	return rc;
}

/* One op through the gate, counted as `count`, and the backend's result
 * settled (the body of every entry point below). */
#define GATED(count, call, what)                                                                   \
	do {                                                                                       \
		int rc_ = coli_dev_gate(d, count, 1);                                              \
		return rc_ ? rc_ : coli_dev_settle(d, (call), what);                               \
	} while (0)

int coli_dev_alloc(struct coli_dev *d, size_t bytes, uint64_t *addr)
{
	int rc = coli_dev_gate(d, COLI_DEV_COUNT_NONE, 1);

	if (rc)
		return rc;
	if (d->fail_at == COLI_FAIL_AT_ALLOC && d->fail_after >= 0 && d->allocs++ >= d->fail_after)
		return -ENOMEM;               /* injected */
	return d->ops->alloc(d, bytes, addr); /* out of memory is not a device failure */
}

void coli_dev_free(struct coli_dev *d, uint64_t addr)
{
	if (addr)
		d->ops->free(d, addr);
}

int coli_dev_upload(struct coli_dev *d, uint64_t dst, const void *src, size_t n)
{
	GATED(COLI_DEV_COUNT_NONE, d->ops->upload(d, dst, src, n), "upload");
}

int coli_dev_upload_async(struct coli_dev *d, uint64_t dst, const void *src, size_t n)
{
	GATED(COLI_DEV_COUNT_NONE, d->ops->upload_async(d, dst, src, n), "upload");
}

int coli_dev_stage_init(struct coli_dev *d, int n)
{
	GATED(COLI_DEV_COUNT_NONE, d->ops->stage_init(d, n), "staging setup");
}

int coli_dev_stage_copy(struct coli_dev *d, int slot, uint64_t dst, const void *src, size_t n)
{
	GATED(COLI_DEV_COUNT_COPY, d->ops->stage_copy(d, slot, dst, src, n), "staging copy");
}

int coli_dev_stage_use(struct coli_dev *d, int slot)
{
	GATED(COLI_DEV_COUNT_NONE, d->ops->stage_use(d, slot), "staging wait");
}

int coli_dev_stage_done(struct coli_dev *d, int slot)
{
	GATED(COLI_DEV_COUNT_NONE, d->ops->stage_done(d, slot), "staging event");
}

int coli_dev_stage_fence(struct coli_dev *d, int slot)
{
	GATED(COLI_DEV_COUNT_NONE, d->ops->stage_fence(d, slot), "staging event");
}

/* 1: slot's copy landed; 0: in flight; a failed device has nothing in flight. */
int coli_dev_stage_landed(struct coli_dev *d, int slot)
{
	int rc;

	if (d->failed)
		return 1;
	rc = d->ops->stage_landed(d, slot);
	return rc < 0 ? (coli_dev_fail(d, rc, "staging query"), 1) : rc;
}

int coli_dev_mark(struct coli_dev *d, int slot)
{
	GATED(COLI_DEV_COUNT_NONE, d->ops->mark(d, slot), "event record");
}

int coli_dev_elapsed(struct coli_dev *d, int from, int to, double *s)
{
	GATED(COLI_DEV_COUNT_NONE, d->ops->elapsed(d, from, to, s), "event timing");
}

int coli_dev_point(struct coli_dev *d)
{
	int rc = coli_dev_gate(d, COLI_DEV_COUNT_NONE, 1);

	if (rc || !d->ops->point)
		return rc;
	rc = d->ops->point(d);
	return rc ? coli_dev_fail(d, rc, "event record") : 1;
}

int coli_dev_point_wait(struct coli_dev *d)
{
	GATED(COLI_DEV_COUNT_SYNC, d->ops->point_wait ? d->ops->point_wait(d) : d->ops->sync(d),
	      "synchronize");
}

int coli_dev_host_wait(struct coli_dev *d, uint32_t seq)
{
	int rc = coli_dev_gate(d, COLI_DEV_COUNT_NONE, 1);

	if (rc || !coli_dev_can(d, COLI_DEV_CAP_HOST_WAIT))
		return rc;
	rc = d->ops->host_wait(d, seq);
	if (rc == -ENOTSUP) /* a driver without stream waits */
		return 0;
	return rc ? coli_dev_fail(d, rc, "stream wait on the host") : 1;
}

uint64_t coli_dev_host_addr(struct coli_dev *d, const void *p, size_t n)
{
	return d->failed || !d->ops->host_addr ? 0 : d->ops->host_addr(d, p, n);
}

void coli_dev_host_signal(struct coli_dev *d, uint32_t seq)
{
	if (d->ops->host_signal)
		d->ops->host_signal(d, seq);
}

int coli_dev_download_async(struct coli_dev *d, void *dst, uint64_t src, size_t n)
{
	GATED(COLI_DEV_COUNT_NONE, d->ops->download_async(d, dst, src, n), "download");
}

int coli_dev_download_many(struct coli_dev *d, const struct coli_dev_down *v, int n)
{
	int rc = 0;

	if (!d->ops->download_many) {
		for (int i = 0; i < n && !rc; i++)
			rc = coli_dev_download_async(d, v[i].dst, v[i].src, v[i].n);
		return rc;
	}
	for (int i = 0; i < n && !rc; i += COLI_DEV_DOWN_MAX) {
		int k = n - i < COLI_DEV_DOWN_MAX ? n - i : COLI_DEV_DOWN_MAX;

		rc = coli_dev_gate(d, COLI_DEV_COUNT_NONE, 1);
		rc = rc ? rc : coli_dev_settle(d, d->ops->download_many(d, v + i, k), "download");
	}
	return rc;
}

int coli_dev_sync(struct coli_dev *d)
{
	/* a sync counts: injection can fail a take too */
	GATED(COLI_DEV_COUNT_SYNC, d->ops->sync(d), "synchronize");
}

int coli_dev_capture_begin(struct coli_dev *d)
{
	int rc = coli_dev_gate(d, COLI_DEV_COUNT_NONE, 1);

	if (rc)
		return rc;
	if (!coli_dev_can(d, COLI_DEV_CAP_GRAPHS))
		return -ENOTSUP;
	d->cap_from = d->launches;
	return d->ops->capture_begin(d);
}

int coli_dev_capture_end(struct coli_dev *d, uint64_t *graph, long *n_ops)
{
	int rc = d->ops->capture_end(d, graph); /* ends it even on a failed device */

	*n_ops = d->launches - d->cap_from;
	d->launches = d->cap_from; /* recorded, not launched: the replays count */
	return rc ? rc : d->failed ? -EIO : 0;
}

int coli_dev_graph_launch(struct coli_dev *d, uint64_t graph, long n_ops)
{
	int rc = coli_dev_gate(d, COLI_DEV_COUNT_GRAPH, n_ops); /* the launches it holds */

	return rc ? rc : coli_dev_settle(d, d->ops->graph_launch(d, graph), "graph launch");
}

void coli_dev_graph_free(struct coli_dev *d, uint64_t graph)
{
	if (graph)
		d->ops->graph_free(d, graph);
}

int coli_dev_mem_info(struct coli_dev *d, size_t *free_bytes, size_t *total_bytes)
{
	GATED(COLI_DEV_COUNT_NONE, d->ops->mem_info(d, free_bytes, total_bytes), "memory query");
}

void coli_dev_close(struct coli_dev *d)
{
	if (d)
		d->ops->close(d);
}

/* "0,2" -> ordinals; returns count or -EINVAL. */
static int parse_list(const char *s, int *ord, int max)
{
	int n = 0;

	while (*s) {
		char *end;
		long v = strtol(s, &end, 10);

		if (end == s || v < 0 || v > 63 || n == max)
			return -EINVAL;
		for (int i = 0; i < n; i++)
			if (ord[i] == v)
				return -EINVAL; /* one context a device */
		ord[n++] = (int)v;
		s = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return -EINVAL;
	}
	return n;
}

/* The GPU ordinals --gpu auto or a list names (at most max): their count,
 * 0 when auto finds none (*why says why), or -EINVAL for a bad list. */
static int spec_ordinals(const char *spec, int *ord, int max, const char **why)
{
	int n;

	if (strcmp(spec, "auto"))
		return parse_list(spec, ord, max);
	n = coli_ptx_probe(why);
	n = n < max ? n : max;
	for (int i = 0; i < n; i++)
		ord[i] = i;
	return n;
}

size_t coli_dev_spec_mem(const char *spec)
{
	int ord[16], n;
	size_t least = 0;
	const char *why;

	if (!strcmp(spec, "off"))
		return 0;
	if (!strncmp(spec, "sim", 3))
		return SIM_MEM_BYTES;
	n = spec_ordinals(spec, ord, 16, &why);
	for (int i = 0; i < n; i++) {
		size_t b = coli_ptx_total_mem(ord[i]);

		if (!b)
			return 0;
		least = !least || b < least ? b : least;
	}
	return least;
}

int coli_dev_spec_node(const char *spec, int *ordinal)
{
	int ord[16], n;
	const char *why;

	*ordinal = -1;
	if (!strcmp(spec, "off") || !strncmp(spec, "sim", 3))
		return -1;
	n = spec_ordinals(spec, ord, 16, &why);
	if (n <= 0)
		return -1;
	*ordinal = ord[0];
	return coli_ptx_numa_node(ord[0]);
}

int coli_dev_open_all(const char *spec, long fail_after, int sim_latency_us, int pdl,
                      unsigned gpu_flags, struct coli_dev **devs, int max, int *n, char *err,
                      size_t errlen)
{
	int ord[16], n_ord, rc;
	const char *why = NULL;

	*n = 0;
	if (!strcmp(spec, "off"))
		return 0;
	if (!strncmp(spec, "sim", 3)) { /* sim or sim:N — N simulated devices */
		char *end = NULL;
		long k = spec[3] == ':' ? strtol(spec + 4, &end, 10) : 1;

		if ((spec[3] && (spec[3] != ':' || *end || end == spec + 4)) || k < 1 || k > max) {
			snprintf(err, errlen,
			         "--gpu '%s': expected sim or sim:N with N from 1 to %d", spec,
			         max);
			return -EINVAL;
		}
		for (int i = 0; i < (int)k; i++) {
			rc = coli_dev_sim_open(&devs[i], i, SIM_MEM_BYTES, sim_latency_us);
			if (rc) {
				for (int j = 0; j < i; j++)
					coli_dev_close(devs[j]);
				snprintf(err, errlen, "cannot create the simulated device");
				return rc;
			}
			devs[i]->fail_after = fail_after;
		}
		*n = (int)k;
		return 0;
	}
	n_ord = spec_ordinals(spec, ord, max < 16 ? max : 16, &why);
	if (n_ord == 0 && !strcmp(spec, "auto")) {
		fprintf(stderr, "coli: no GPU (%s): experts run on the CPU\n", why);
		return 0;
	}
	if (n_ord <= 0) {
		snprintf(err, errlen,
		         "--gpu '%s': expected auto, off, sim, sim:N or a list of distinct "
		         "devices like 0,1",
		         spec);
		return -EINVAL;
	}
	for (int i = 0; i < n_ord; i++) {
		rc = coli_dev_gpu_open(ord[i], pdl, gpu_flags, &devs[*n], err, errlen);
		if (rc) {
			if (!strcmp(spec, "auto")) { /* best effort: say it and go on */
				fprintf(stderr, "coli: GPU %d unusable (%s)\n", ord[i], err);
				err[0] = 0;
				continue;
			}
			for (int k = 0; k < *n; k++)
				coli_dev_close(devs[k]);
			*n = 0;
			return rc;
		}
		devs[*n]->fail_after = fail_after;
		devs[*n]->index = *n;
		(*n)++;
	}
	return 0;
}
