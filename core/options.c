/*
 * core/options.c — the one options table. Each row names a field of struct
 * coli_opts, its command-line flag and/or environment variable, its type,
 * default and help. Defaults, environment lookup, flag parsing, --help and
 * the startup print all walk this table; no other file calls getenv().
 *
 * Precedence: default < environment < command line.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/coli.h"

enum opt_type { OPT_INT, OPT_DOUBLE, OPT_STR, OPT_FLAG, OPT_BOOL };

struct opt_row {
	const char *flag; /* "--ram-gb" or NULL */
	const char *env;  /* "COLI_RAM_GB" or NULL */
	enum opt_type type;
	size_t off;
	size_t size; /* for strings */
	const char *def;
	const char *help;
};

#define F(field) offsetof(struct coli_opts, field), sizeof(((struct coli_opts *)0)->field)
static const struct opt_row g_opts[] = {
    {"--ram-gb", "COLI_RAM_GB", OPT_DOUBLE, F(ram_gb), "-1",
     "host RAM budget in GB for the whole engine (-1: no limit)"},
    {"--vram-gb", "COLI_VRAM_GB", OPT_DOUBLE, F(vram_gb), "-1",
     "GPU memory for resident experts in GB (-1: what the device has free); "
     "staging slots come on top"},
    {"--gpu", "COLI_GPU", OPT_STR, F(gpu), "auto",
     "auto | off | sim | sim:N (N simulated devices) | device list (0,1)"},
    {"--threads", "COLI_THREADS", OPT_INT, F(threads), "0", "CPU threads (0: all online CPUs)"},
    {"--ctx", "COLI_CTX", OPT_INT, F(ctx), "0",
     "KV cache length in tokens (0: the model's, at most 4096)"},
    {"--ubatch", "COLI_UBATCH", OPT_INT, F(ubatch), "0",
     "prompt tokens per forward pass (prefill chunk; scratch grows with it; 0: 2048 with a "
     "GPU that has room, else 512)"},
    {"--usage", "COLI_USAGE", OPT_STR, F(usage), "",
     "expert usage file (default: MODEL.usage; off: none)"},
    {"--profile", "COLI_PROFILE", OPT_FLAG, F(profile), "0", "per-token timing report"},
    {"--numa-bind", "COLI_NUMA_BIND", OPT_STR, F(numa_bind), "auto",
     "auto | off | interleave | NODE: where engine memory and threads live"},
    {"--stream", "COLI_STREAM", OPT_STR, F(stream), "auto",
     "RAM-tier experts: auto (split CPU/GPU by measured speed) | off (CPU) | only (GPU)"},
    {"--dense", "COLI_DENSE", OPT_STR, F(dense), "auto",
     "dense part (attention, norms, routers, lm_head, KV cache): auto (first device) | cpu"},
    {"--split", "COLI_SPLIT", OPT_STR, F(split), "auto",
     "several devices: layers (each device a range of layers, their dense part and "
     "experts) | none (the dense part on the first) | auto (layers when the model does not "
     "fit the first)"},
    {"--stream-slots", "COLI_STREAM_SLOTS", OPT_INT, F(stream_slots), "32",
     "VRAM staging slabs per device for streamed experts (this layer's and the next's guess)"},
    {"--verbose", "COLI_VERBOSE", OPT_FLAG, F(verbose), "0", "print the options at start"},
    {"--prefetch", "COLI_PREFETCH", OPT_BOOL, F(prefetch), "on",
     "on | off: prefetch the next layer's likely experts (router lookahead)"},
    {"--io", "COLI_IO", OPT_STR, F(io), "auto",
     "auto | uring | pread: how expert slabs are read (pread: the fallback)"},
    {"--verify-slabs", "COLI_VERIFY_SLABS", OPT_STR, F(verify_slabs), "auto",
     "auto | on | off: xxh64 of every slab read (auto: on if under 5% of read time)"},
    {"--usage-every", "COLI_USAGE_EVERY", OPT_INT, F(usage_every), "1024",
     "write the expert usage file every N tokens (0: only at exit)"},
    {NULL, "COLI_GROUP_ASYNC", OPT_INT, F(group_async), "1",
     "overlap GPU groups with CPU rows (0: synchronous, for A/B)"},
    {NULL, "COLI_CUDA_PROFILE", OPT_INT, F(cuda_profile), "0", "print the overlap window split"},
    {NULL, "CUDA_RELEASE_HOST", OPT_INT, F(release_host), "0",
     "drop a slab's host copy after its upload to VRAM"},
    {NULL, "ROUTE_TRACE", OPT_STR, F(route_trace), "",
     "write routed experts per position and layer to FILE"},
    {NULL, "COLI_GPU_FAIL_AFTER", OPT_INT, F(gpu_fail_after), "-1",
     "fault injection: fail a device after N launches or syncs"},
    {NULL, "COLI_GPU_FAIL_DEV", OPT_INT, F(gpu_fail_dev), "-1",
     "fault injection: the device (its index in --gpu) that fails (-1: every device)"},
    {NULL, "COLI_DEV_PREPLAN", OPT_INT, F(dev_preplan), "1",
     "start a partly resident MoE layer's VRAM experts on the dense device while the host "
     "plans the rest (0: the host plans them too, for A/B)"},
    {NULL, "COLI_DEV_ROUTE", OPT_INT, F(dev_route), "1",
     "route on the dense device and plan fully resident MoE layers there (0: the host, for A/B)"},
    {NULL, "COLI_STREAM_HOME", OPT_INT, F(stream_home), "2",
     "several devices: stream a layer's RAM-tier experts to the device holding its dense "
     "part only (1: always; 2: at decode, round-robin at prefill; 0: round-robin over the "
     "devices with staging room)"},
    {NULL, "COLI_STAGE_AHEAD", OPT_INT, F(stage_ahead), "0",
     "copy the lookahead's guessed RAM-tier experts to staging slots a layer ahead (1; off: "
     "slower on the H200, wrong guesses evict slots later tokens reuse)"},
    {NULL, "COLI_TAIL_AHEAD", OPT_INT, F(tail_ahead), "1",
     "decode, one device: queue a preplanned layer's device tail (the accumulate reading "
     "the CPU rows in place) behind a stream wait when its experts are issued, released "
     "when the CPU rows are done (0: queue it after them, for A/B)"},
    {NULL, "COLI_DEV_GRAPH", OPT_INT, F(dev_graph), "1",
     "decode: replay each layer's device work as a CUDA graph captured once (0: launch every "
     "kernel, for A/B)"},
    {NULL, "COLI_PDL", OPT_INT, F(pdl), "1",
     "sm_90+: launch kernels with programmatic dependent launch, each scheduled while the one "
     "before drains (0: plain launches, for A/B)"},
    {NULL, "COLI_GPU_FAIL_AT", OPT_STR, F(gpu_fail_at), "any",
     "fault injection: the injected failure strikes the first kernel launch, staging copy, sync (a "
     "take) or any op; alloc: device allocations from the Nth on fail (out of device memory)"},
    {NULL, "COLI_PTX_FAIL", OPT_STR, F(ptx_fail), "",
     "fault injection: the embedded PTX fails to JIT-compile, the compute_90 build (90: coli "
     "takes the compute_80 one) or both (all: the GPU is unusable)"},
    {NULL, "COLI_SIM_LATENCY_US", OPT_INT, F(sim_latency_us), "0",
     "--gpu sim: microseconds each sync takes (device time to overlap with)"},
};
#undef F
#define N_OPTS (int)(sizeof(g_opts) / sizeof(g_opts[0]))

static int set_value(struct coli_opts *o, const struct opt_row *r, const char *v)
{
	char *end;
	void *p = (char *)o + r->off;

	switch (r->type) {
	case OPT_FLAG:
	case OPT_INT: {
		long x = strtol(v, &end, 10);

		if (!*v || *end)
			return -EINVAL;
		*(int *)p = (int)x;
		return 0;
	}
	case OPT_DOUBLE: {
		double x = strtod(v, &end);

		if (!*v || *end)
			return -EINVAL;
		*(double *)p = x;
		return 0;
	}
	case OPT_BOOL:
		if (!strcmp(v, "on") || !strcmp(v, "1") || !strcmp(v, "yes"))
			*(int *)p = 1;
		else if (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "no"))
			*(int *)p = 0;
		else
			return -EINVAL;
		return 0;
	case OPT_STR:
		if (strlen(v) >= r->size)
			return -ENAMETOOLONG;
		memcpy(p, v, strlen(v) + 1);
		return 0;
	}
	return -EINVAL;
}

void coli_opts_init(struct coli_opts *o)
{
	memset(o, 0, sizeof(*o));
	for (int i = 0; i < N_OPTS; i++) {
		const char *v = g_opts[i].env ? getenv(g_opts[i].env) : NULL;

		set_value(o, &g_opts[i], g_opts[i].def);
		if (v && *v && set_value(o, &g_opts[i], v))
			fprintf(stderr, "coli: ignoring %s='%s' (not a valid value)\n",
			        g_opts[i].env, v);
	}
}

int coli_opts_parse_arg(struct coli_opts *o, int argc, char **argv, int *i, char *err,
                        size_t errlen)
{
	const char *a = argv[*i];

	for (int k = 0; k < N_OPTS; k++) {
		const struct opt_row *r = &g_opts[k];
		size_t fl;
		const char *v;
		int rc;

		if (!r->flag)
			continue;
		fl = strlen(r->flag);
		if (strncmp(a, r->flag, fl) || (a[fl] && a[fl] != '='))
			continue;
		if (r->type == OPT_FLAG && !a[fl]) {
			*(int *)((char *)o + r->off) = 1;
			*i += 1;
			return 1;
		}
		if (a[fl] == '=') {
			v = a + fl + 1;
			*i += 1;
		} else {
			if (*i + 1 >= argc) {
				snprintf(err, errlen, "%s needs a value", r->flag);
				return -EINVAL;
			}
			v = argv[*i + 1];
			*i += 2;
		}
		rc = set_value(o, r, v);
		if (rc) {
			snprintf(err, errlen, "%s: invalid value '%s'", r->flag, v);
			return rc;
		}
		return 1;
	}
	return 0;
}

void coli_opts_help(FILE *f)
{
	fprintf(f, "engine options (flag / environment, default):\n");
	for (int i = 0; i < N_OPTS; i++) {
		const struct opt_row *r = &g_opts[i];
		char lhs[64];

		snprintf(lhs, sizeof(lhs), "%s%s%s", r->flag ? r->flag : "",
		         r->flag && r->env ? " / " : "", r->env ? r->env : "");
		fprintf(f, "  %-32s %s [%s]\n", lhs, r->help, *r->def ? r->def : "none");
	}
}

void coli_opts_print(const struct coli_opts *o, FILE *f)
{
	for (int i = 0; i < N_OPTS; i++) {
		const struct opt_row *r = &g_opts[i];
		const void *p = (const char *)o + r->off;
		const char *name = r->flag ? r->flag + 2 : r->env;

		switch (r->type) {
		case OPT_BOOL:
			fprintf(f, "  %-18s %s\n", name, *(const int *)p ? "on" : "off");
			break;
		case OPT_FLAG:
		case OPT_INT:
			fprintf(f, "  %-18s %d\n", name, *(const int *)p);
			break;
		case OPT_DOUBLE:
			fprintf(f, "  %-18s %g\n", name, *(const double *)p);
			break;
		case OPT_STR:
			fprintf(f, "  %-18s %s\n", name, *(const char *)p ? (const char *)p : "-");
			break;
		}
	}
}
