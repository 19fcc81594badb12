/*
 * tools/bench_io.c — `coli bench io -m MODEL`: how fast expert slabs come off
 * the disk when read the way the engine reads them, next to the file's own
 * sequential O_DIRECT bandwidth (the disk term's BW in the bound).
 *
 *   seq     the expert region read front to back in --block blocks, --qd in
 *           flight (fio --rw=read --direct=1 --ioengine=io_uring with the same
 *           block size and depth: tools/bench_vs_fio.sh)
 *   slabs   --slabs random (layer, expert) slabs, a fixed seeded draw, one read
 *           each (split at --block), --qd in flight: the demand pattern of a
 *           token whose routed experts all miss RAM
 *
 * Both use tools/bench_measure.c's reader, so the two figures differ only in
 * the access pattern. Arms alternate (seq, slabs, seq, slabs, ...) for
 * --rounds rounds; the figures are medians with min and max. O_DIRECT
 * bypasses the page cache, so rounds do not warm each other; where the file
 * system refuses O_DIRECT (tmpfs) the reads are buffered and say so.
 *
 * When the slab streamer lands (io/, #5), a third arm runs it over the same
 * slab list; this reader stays as the raw baseline it is compared with.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io.h"
#include "tools/bench.h"
#include "tools/tools.h"

#define MAX_ROUNDS 101

static void help(FILE *f)
{
	fprintf(f, "usage: coli bench io -m MODEL.coli [--slabs N] [--qd Q] [--block KIB]\n"
	           "                     [--seq-mib M] [--rounds R] [--seed S] [--json]\n"
	           "  --slabs N     random slabs per round (default 256, at most all of them)\n"
	           "  --qd Q        reads in flight (default 8)\n"
	           "  --block KIB   largest single read, KiB (default 4096)\n"
	           "  --seq-mib M   sequential bytes per round (default: the expert region, at\n"
	           "                most 1024 MiB)\n"
	           "  --rounds R    alternating rounds (default 3)\n");
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct io_arm {
	double gbs[MAX_ROUNDS], med, min, max;
	struct bench_read_result last;
};

static void finish(struct io_arm *a, int n)
{
	a->med = bench_median(a->gbs, n); /* sorts */
	a->min = a->gbs[0];
	a->max = a->gbs[n - 1];
}

int bench_io_main(int argc, char **argv)
{
	const char *model = NULL;
	int n_slabs = 256, qd = 8, block_kib = 4096, seq_mib = 0, rounds = 3, json = 0, rc = 1;
	uint64_t seed = 1, total_slabs = 0, expert_off = 0, expert_bytes = 0, slab_sum = 0;
	struct bench_extent *ext = NULL, *all = NULL;
	struct io_arm seq = {0}, slabs = {0};
	coli_container_t *c = NULL;

	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
			help(stdout);
			return 0;
		}
		if (!strcmp(o, "--json")) {
			json = 1;
			continue;
		}
		if (!v)
			return tool_err("bench io", "%s needs a value (see --help)", o), 2;
		if (!strcmp(o, "-m") || !strcmp(o, "--model"))
			model = v;
		else if (!strcmp(o, "--slabs"))
			n_slabs = atoi(v);
		else if (!strcmp(o, "--qd"))
			qd = atoi(v);
		else if (!strcmp(o, "--block"))
			block_kib = atoi(v);
		else if (!strcmp(o, "--seq-mib"))
			seq_mib = atoi(v);
		else if (!strcmp(o, "--rounds"))
			rounds = atoi(v);
		else if (!strcmp(o, "--seed"))
			seed = strtoull(v, NULL, 0);
		else
			return tool_err("bench io", "unknown option '%s' (see --help)", o), 2;
		i++;
	}
	if (!model) {
		help(stderr);
		return 2;
	}
	if (n_slabs < 1 || qd < 1 || block_kib < 4 || block_kib % 4 || seq_mib < 0 || rounds < 1 ||
	    rounds > MAX_ROUNDS)
		return tool_err("bench io", "bad --slabs, --qd, --block (KiB, multiple of 4), "
		                            "--seq-mib or --rounds"),
		       2;
	if (coli_io_container_open(model, &c))
		return tool_err("bench io", "%s", coli_io_errmsg());
	int n_layers = coli_io_container_n_expert_layers(c);

	for (int li = 0; li < n_layers; li++)
		total_slabs += coli_io_container_expert_layer(c, li)->n_experts;
	if (!total_slabs) {
		tool_err("bench io", "%s has no expert slabs", model);
		goto out;
	}
	all = malloc(sizeof(*all) * total_slabs);
	ext = malloc(sizeof(*ext) * (size_t)n_slabs);
	if (!all || !ext) {
		tool_err("bench io", "out of memory");
		goto out;
	}
	for (int li = 0, k = 0; li < n_layers; li++) {
		const struct coli_expert_layer *l = coli_io_container_expert_layer(c, li);

		for (uint32_t e = 0; e < l->n_experts; e++, k++)
			all[k] = (struct bench_extent){coli_io_container_slab_offset(c, li, e),
			                               l->slab_bytes};
		if (li == 0)
			expert_off = l->offset;
		expert_bytes = l->offset + l->slab_bytes * l->n_experts - expert_off;
	}
	/* a seeded partial Fisher-Yates: n distinct slabs in random order */
	if ((uint64_t)n_slabs > total_slabs)
		n_slabs = (int)total_slabs;
	seed = seed * 0x9e3779b97f4a7c15ull | 1;
	for (int i = 0; i < n_slabs; i++) {
		uint64_t j = i + xorshift(&seed) % (total_slabs - (uint64_t)i);
		struct bench_extent t = all[i];

		all[i] = all[j];
		all[j] = t;
		ext[i] = all[i];
		slab_sum += ext[i].bytes;
	}
	uint64_t seq_bytes = seq_mib ? (uint64_t)seq_mib << 20 : expert_bytes;

	if (!seq_mib && seq_bytes > (1ull << 30))
		seq_bytes = 1ull << 30;
	if (seq_bytes > expert_bytes)
		seq_bytes = expert_bytes;
	size_t block = (size_t)block_kib << 10;

	for (int r = 0; r < rounds; r++) {
		if (bench_read_seq(model, expert_off, seq_bytes, qd, block, &seq.last) ||
		    bench_read_extents(model, ext, (size_t)n_slabs, qd, block, &slabs.last)) {
			tool_err("bench io", "reading %s failed", model);
			goto out;
		}
		seq.gbs[r] = seq.last.gbs;
		slabs.gbs[r] = slabs.last.gbs;
	}
	finish(&seq, rounds);
	finish(&slabs, rounds);
	const struct coli_expert_layer *l0 = coli_io_container_expert_layer(c, 0);
	double slab_mb = slab_sum / 1e6 / n_slabs;
	const char *mode = seq.last.direct ? "O_DIRECT" : "BUFFERED (O_DIRECT refused)";
	const char *eng = seq.last.uring ? "io_uring" : "pread";

	if (json) {
		printf(
		    "{\"bench\": \"io\", \"model\": \"%s\", \"direct\": %s, \"engine\": \"%s\", "
		    "\"qd\": %d, \"block_bytes\": %zu, \"rounds\": %d,\n"
		    " \"seq\": {\"bytes\": %llu, \"gbs\": %.4f, \"gbs_min\": %.4f, \"gbs_max\": "
		    "%.4f},\n"
		    " \"slabs\": {\"n\": %d, \"slab_bytes\": %llu, \"bytes\": %llu, \"gbs\": %.4f, "
		    "\"gbs_min\": %.4f, \"gbs_max\": %.4f, \"slabs_per_s\": %.2f},\n"
		    " \"ratio\": %.6g}\n",
		    model, seq.last.direct ? "true" : "false", eng, qd, block, rounds,
		    (unsigned long long)seq_bytes, seq.med, seq.min, seq.max, n_slabs,
		    (unsigned long long)l0->slab_bytes, (unsigned long long)slab_sum, slabs.med,
		    slabs.min, slabs.max, slabs.med * 1e9 / (slab_sum / (double)n_slabs),
		    slabs.med / seq.med);
	} else {
		printf("coli bench io: %s, %s via %s, %d reads in flight, reads <= %d KiB; "
		       "medians of %d alternating rounds [min..max]\n",
		       model, mode, eng, qd, block_kib, rounds);
		printf("  seq    %8.1f MB of the expert region      %7.3f GB/s [%.3f..%.3f]\n",
		       seq_bytes / 1e6, seq.med, seq.min, seq.max);
		printf("  slabs  %8d random slabs of %.2f MB       %7.3f GB/s [%.3f..%.3f]  %.0f "
		       "slabs/s\n",
		       n_slabs, slab_mb, slabs.med, slabs.min, slabs.max,
		       slabs.med * 1e3 / slab_mb);
		printf("  ratio  slabs / seq = %.3f\n", slabs.med / seq.med);
	}
	rc = 0;
out:
	free(all);
	free(ext);
	coli_io_container_close(c);
	return rc;
}
