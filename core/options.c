/*
 * core/options.c — the one options table. Each row names a field of struct
 * coli_opts, its command-line flag and/or environment variable, its type,
 * default and help, and what the value may be: numbers carry [min, max],
 * choices a name table whose index is the enum value stored in the field,
 * free-form strings a syntax check where one exists. Defaults, environment
 * lookup, flag parsing, --help and the startup print all walk this table; no
 * other file calls getenv(), and no other file compares option strings.
 *
 * Precedence: default < environment < command line. A bad value is refused
 * the same way from either: "--stream 'x': expected auto, off or only",
 * "COLI_STREAM='x': expected auto, off or only". An empty environment
 * variable counts as unset.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core_internal.h"

enum opt_type {
	OPT_INT,    /* int in [min, max] */
	OPT_DOUBLE, /* double in [min, max] */
	OPT_FLAG,   /* int: a bare flag sets 1; a value 0 or 1 */
	OPT_BOOL,   /* int: on|off (1|0, yes|no) */
	OPT_ENUM,   /* int (an enum): the index of its name in choices */
	OPT_STR,    /* char[size], checked by check() when it has one */
	OPT_PATH,   /* char[size]; "off" or "none" sets the int at off_word instead */
};

struct opt_row {
	const char *flag; /* "--ram-gb" or NULL */
	const char *env;  /* "COLI_RAM_GB" or NULL */
	enum opt_type type;
	size_t off;
	size_t size; /* of the field */
	const char *def;
	const char *help;
	double min, max;             /* OPT_INT, OPT_DOUBLE */
	const char *const *choices;  /* OPT_ENUM: names by value, NULL-ended */
	int (*check)(const char *v); /* OPT_STR: 0 when v is well formed */
	const char *expect;          /* OPT_STR with check: what it allows, in words */
	size_t off_word;             /* OPT_PATH: the int "off" sets */
};

/* Choice names, each at its enum value (the value stored in the field). */
static const char *const k_stream[] = {[COLI_OPT_STREAM_AUTO] = "auto",
                                       [COLI_OPT_STREAM_OFF] = "off",
                                       [COLI_OPT_STREAM_ONLY] = "only",
                                       [COLI_OPT_STREAM_ONLY + 1] = NULL};
static const char *const k_spec[] = {[COLI_OPT_SPEC_OFF] = "off",
                                     [COLI_OPT_SPEC_NGRAM] = "ngram",
                                     [COLI_OPT_SPEC_AUTO] = "auto",
                                     [COLI_OPT_SPEC_AUTO + 1] = NULL};
static const char *const k_cpu_isa[] = {
    [COLI_OPT_CPU_ISA_AUTO] = "auto", [COLI_OPT_CPU_ISA_SCALAR] = "scalar",
    [COLI_OPT_CPU_ISA_AVX2] = "avx2", [COLI_OPT_CPU_ISA_AVX512] = "avx512",
    [COLI_OPT_CPU_ISA_AMX] = "amx",   [COLI_OPT_CPU_ISA_AMX + 1] = NULL};
static const char *const k_dense[] = {
    [COLI_OPT_DENSE_AUTO] = "auto", [COLI_OPT_DENSE_CPU] = "cpu", [COLI_OPT_DENSE_CPU + 1] = NULL};
static const char *const k_split[] = {[COLI_OPT_SPLIT_AUTO] = "auto",
                                      [COLI_OPT_SPLIT_LAYERS] = "layers",
                                      [COLI_OPT_SPLIT_NONE] = "none",
                                      [COLI_OPT_SPLIT_NONE + 1] = NULL};
static const char *const k_io[] = {[COLI_OPT_IO_AUTO] = "auto",
                                   [COLI_OPT_IO_URING] = "uring",
                                   [COLI_OPT_IO_PREAD] = "pread",
                                   [COLI_OPT_IO_PREAD + 1] = NULL};
static const char *const k_verify[] = {[COLI_OPT_VERIFY_FIRST] = "first",
                                       [COLI_OPT_VERIFY_ON] = "on",
                                       [COLI_OPT_VERIFY_OFF] = "off",
                                       [COLI_OPT_VERIFY_OFF + 1] = NULL};
static const char *const k_fail_at[] = {
    [COLI_OPT_FAIL_AT_ANY] = "any",     [COLI_OPT_FAIL_AT_LAUNCH] = "launch",
    [COLI_OPT_FAIL_AT_COPY] = "copy",   [COLI_OPT_FAIL_AT_SYNC] = "sync",
    [COLI_OPT_FAIL_AT_ALLOC] = "alloc", [COLI_OPT_FAIL_AT_ALLOC + 1] = NULL};
static const char *const k_ptx_fail[] = {[COLI_OPT_PTX_FAIL_NONE] = "none",
                                         [COLI_OPT_PTX_FAIL_90] = "90",
                                         [COLI_OPT_PTX_FAIL_ALL] = "all",
                                         [COLI_OPT_PTX_FAIL_ALL + 1] = NULL};

static int check_gpu(const char *v);
static int check_numa(const char *v);
static int check_chat_template(const char *v);
static int check_kv_type(const char *v);

#define F(field)                                                                                   \
	.off = offsetof(struct coli_opts, field), .size = sizeof(((struct coli_opts *)0)->field)
#define INT(lo, hi)    .type = OPT_INT, .min = (lo), .max = (hi)
#define DOUBLE(lo, hi) .type = OPT_DOUBLE, .min = (lo), .max = (hi)
#define ENUM(names)    .type = OPT_ENUM, .choices = (names)
#define SWITCH         .type = OPT_INT, .min = 0, .max = 1 /* an A/B or debugging switch */
#define MANY           INT_MAX
static const struct opt_row g_opts[] = {
    {"--ram-gb", "COLI_RAM_GB", DOUBLE(-1, 1e6), F(ram_gb), "-1",
     "host RAM budget in GB for the whole engine (-1: no limit)"},
    {"--vram-gb", "COLI_VRAM_GB", DOUBLE(-1, 1e6), F(vram_gb), "-1",
     "GPU memory for resident experts in GB (-1: what the device has free); "
     "staging slots come on top"},
    {"--gpu", "COLI_GPU", .type = OPT_STR, F(gpu), "auto",
     "auto | off | sim | sim:N (N simulated devices) | device list (0,1)", .check = check_gpu,
     .expect = "auto, off, sim, sim:N (N 1..8) or a list of distinct GPU ordinals 0..63 such as "
               "0,1"},
    {"--threads", "COLI_THREADS", INT(0, 4096), F(threads), "0",
     "CPU threads (0: all online CPUs)"},
    {"--cpu-isa", "COLI_CPU_ISA", ENUM(k_cpu_isa), F(cpu_isa), "auto",
     "CPU kernels: auto (the best this CPU has), amx (AVX-512 plus int8 tiles for prefill), "
     "avx512, avx2 or scalar; all give the same bits (a lower one: to compare speeds); "
     "process-wide"},
    {"--ctx", "COLI_CTX", INT(0, 1 << 24), F(ctx), "0",
     "KV cache length in tokens (0: the model's trained length, capped by memory)"},
    {"--ctx-override", "COLI_CTX_OVERRIDE", .type = OPT_FLAG, F(ctx_override), "0",
     "allow --ctx above the model's trained context (quality past it is not assured)", .max = 1},
    {"--kv-type", "COLI_KV_TYPE", .type = OPT_STR, F(kv_type), "bf16",
     "KV cache element type: bf16, f32 (the exact reference) or q8 (int8 with a scale a "
     "kv head and token); K,V gives keys and values their own (q8,bf16)",
     .check = check_kv_type, .expect = "f32, bf16 or q8, or two of them as K,V"},
    {"--kv-gb", "COLI_KV_GB", DOUBLE(0, 1e6), F(kv_gb), "0",
     "KV cache pool in GB: blocks of 32 positions that sequences take as they grow and "
     "keep as a prefix cache once closed (0: --parallel x --ctx positions, every slot full "
     "at once); colid admits a request when the pool can hold its prompt and max_tokens"},
    {"--ubatch", "COLI_UBATCH", INT(0, 16384), F(ubatch), "0",
     "prompt tokens per forward pass (prefill chunk; scratch grows with it; 0: 2048 with a "
     "GPU that has room, else 512)"},
    {"--parallel", "COLI_PARALLEL", INT(0, 64), F(parallel), "0",
     "sequences the KV cache holds at once (slots of --ctx tokens; colid decodes that many "
     "requests together); 0: 1 for coli's commands, for colid what the memory budget holds, "
     "at most 8 (with the dense part on a GPU its memory counts too)"},
    {"--usage", "COLI_USAGE", .type = OPT_PATH, F(usage), "",
     "expert usage file (default: MODEL.usage; off: none)",
     .off_word = offsetof(struct coli_opts, usage_off)},
    {"--chat-template", "COLI_CHAT_TEMPLATE", .type = OPT_STR, F(chat_template), "auto",
     "chat prompts: auto (the model's Jinja template, else the built-in family renderer), "
     "builtin (the family renderer), or FILE (a Jinja template)",
     .check = check_chat_template, .expect = "auto, builtin or a readable file"},
    {"--profile", "COLI_PROFILE", .type = OPT_FLAG, F(profile), "0", "per-token timing report",
     .max = 1},
    {"--numa-bind", "COLI_NUMA_BIND", .type = OPT_STR, F(numa_bind), "auto",
     "auto | off | interleave | NODE: where engine memory and threads live", .check = check_numa,
     .expect = "auto, off, interleave or a node number"},
    {"--stream", "COLI_STREAM", ENUM(k_stream), F(stream), "auto",
     "RAM-tier experts: auto splits them CPU/GPU by measured speed, off keeps them on the "
     "CPU, only streams them all to a GPU"},
    {"--dense", "COLI_DENSE", ENUM(k_dense), F(dense), "auto",
     "dense part (attention, norms, routers, lm_head, KV cache): auto on the first device, "
     "cpu on the host"},
    {"--split", "COLI_SPLIT", ENUM(k_split), F(split), "auto",
     "several devices: layers (each device a range of layers, their dense part and "
     "experts) | none (the dense part on the first) | auto (layers when the model does not "
     "fit the first)"},
    {"--stream-slots", "COLI_STREAM_SLOTS", INT(0, 4096), F(stream_slots), "32",
     "VRAM staging slabs per device for streamed experts (this layer's and the next's guess)"},
    {"--verbose", "COLI_VERBOSE", .type = OPT_FLAG, F(verbose), "0", "print the options at start",
     .max = 1},
    {"--spec", "COLI_SPEC", ENUM(k_spec), F(spec), "auto",
     "decoding: ngram verifies drafts copied from earlier text (the same tokens, greedy or "
     "sampled with a seed, in fewer steps when text repeats), off one token a step, auto ngram "
     "drafts of the length their measured cost and record say pays"},
    {"--prefetch", "COLI_PREFETCH", .type = OPT_BOOL, F(prefetch), "on",
     "prefetch the next layer's likely experts (router lookahead)"},
    {"--io", "COLI_IO", ENUM(k_io), F(io), "auto",
     "how expert slabs are read (pread: the fallback)"},
    {"--verify-slabs", "COLI_VERIFY_SLABS", ENUM(k_verify), F(verify_slabs), "first",
     "xxh64 of the dense tensors at open and of each expert slab the first time it is read "
     "(first), of every slab read (on), or of nothing (off: the way out, at your risk)"},
    {"--usage-every", "COLI_USAGE_EVERY", INT(0, MANY), F(usage_every), "1024",
     "write the expert usage file every N tokens (0: only at exit)"},
    {NULL, "COLI_GROUP_ASYNC", SWITCH, F(group_async), "1",
     "overlap GPU groups with CPU rows (0: synchronous: `coli bench stream`'s sync arm)"},
    {NULL, "COLI_CUDA_PROFILE", SWITCH, F(cuda_profile), "0", "print the overlap window split"},
    {NULL, "CUDA_RELEASE_HOST", SWITCH, F(release_host), "0",
     "drop a slab's host copy after its upload to VRAM"},
    {NULL, "ROUTE_TRACE", .type = OPT_STR, F(route_trace), "",
     "write routed experts per position and layer to FILE"},
    {NULL, "COLI_GPU_FAIL_AFTER", INT(-1, MANY), F(gpu_fail_after), "-1",
     "fault injection: fail a device after N launches or syncs"},
    {NULL, "COLI_GPU_FAIL_DEV", INT(-1, COLI_MAX_DEVS - 1), F(gpu_fail_dev), "-1",
     "fault injection: the device (its index in --gpu) that fails (-1: every device)"},
    {NULL, "COLI_KV_SCRAMBLE", SWITCH, F(kv_scramble), "0",
     "hand the KV pool's blocks out in a scrambled order (tests: no sequence's block table "
     "is the identity, so a wrong cache address shows)"},
    {NULL, "COLI_DEV_PREPLAN", SWITCH, F(dev_preplan), "1",
     "start a partly resident MoE layer's VRAM experts on the dense device while the host "
     "plans the rest (0: the host plans them too; tests/core/graph_replay covers both)"},
    {NULL, "COLI_DEV_ROUTE", SWITCH, F(dev_route), "1",
     "route on the dense device and plan fully resident MoE layers there (0: the host, the "
     "path of models past the device router's limits; tests/core/generate_cli)"},
    {NULL, "COLI_TAIL_AHEAD", SWITCH, F(tail_ahead), "1",
     "decode, one device: queue a preplanned layer's device tail (the accumulate reading "
     "the CPU rows in place) behind a stream wait when its experts are issued, released "
     "when the CPU rows are done (0: queue it after them, no wait on host memory: to rule "
     "that wait out when a device stalls)"},
    {NULL, "COLI_DEV_GRAPH", SWITCH, F(dev_graph), "1",
     "decode: replay each layer's device work as a CUDA graph captured once (0: launch "
     "every "
     "kernel: for profilers that see kernels only as launched)"},
    {NULL, "COLI_PDL", SWITCH, F(pdl), "1",
     "sm_90+: launch kernels with programmatic dependent launch, each scheduled while the "
     "one "
     "before drains (0: plain launches, to rule PDL out)"},
    {NULL, "COLI_GPU_FAIL_AT", ENUM(k_fail_at), F(gpu_fail_at), "any",
     "fault injection: the injected failure strikes the first kernel launch, staging copy, "
     "sync (a "
     "take) or any op; alloc: device allocations from the Nth on fail (out of device "
     "memory)"},
    {NULL, "COLI_PTX_FAIL", ENUM(k_ptx_fail), F(ptx_fail), "none",
     "fault injection: the embedded PTX fails to JIT-compile, the compute_90 build (90: "
     "coli "
     "takes the compute_80 one) or both (all: the GPU is unusable)"},
    {NULL, "COLI_SIM_LATENCY_US", INT(0, 10000000), F(sim_latency_us), "0",
     "--gpu sim: microseconds each sync takes (device time to overlap with)"},
};
#undef F
#define N_OPTS (int)(sizeof(g_opts) / sizeof(g_opts[0]))

/* Enum fields are stored through an int pointer. */
_Static_assert(sizeof(enum coli_opt_stream) == sizeof(int), "enum options are ints");

/* --chat-template: auto, builtin, or a file that can be read (its text is
 * parsed when a chat template is set up, core/chat_detect.c). */
static int check_chat_template(const char *v)
{
	return strcmp(v, "auto") && strcmp(v, "builtin") && access(v, R_OK) ? -EINVAL : 0;
}

/* --kv-type: T or K,V (core/forward/kv.c reads it at open). */
static int check_kv_type(const char *v)
{
	int kt, vt;

	return coli_kv_types_parse(v, &kt, &vt);
}

/* --gpu: the syntax core/dev/dev.c's coli_dev_open_all reads at open (which
 * devices exist is its business, there). */
static int check_gpu(const char *v)
{
	char seen[64] = {0};
	int n = 0;

	if (!strcmp(v, "auto") || !strcmp(v, "off") || !strcmp(v, "sim"))
		return 0;
	if (!strncmp(v, "sim:", 4)) {
		int k;

		return coli_parse_int(v + 4, 1, COLI_MAX_DEVS, &k);
	}
	while (*v) {
		char num[8];
		size_t len = strcspn(v, ",");
		int ord;

		if (len >= sizeof(num) || n == 16)
			return -EINVAL;
		memcpy(num, v, len);
		num[len] = 0;
		if (coli_parse_int(num, 0, 63, &ord) || seen[ord]++)
			return -EINVAL;
		n++;
		v += len;
		if (*v == ',' && !*++v)
			return -EINVAL; /* a trailing comma */
	}
	return n ? 0 : -EINVAL;
}

/* --numa-bind: a node's existence is checked at open (mem/numa.c). */
static int check_numa(const char *v)
{
	int node;

	if (!strcmp(v, "auto") || !strcmp(v, "off") || !strcmp(v, "interleave"))
		return 0;
	return coli_parse_int(v, 0, 4095, &node);
}

static int is_off_word(const char *v)
{
	return !strcmp(v, "off") || !strcmp(v, "none");
}

static int set_value(struct coli_opts *o, const struct opt_row *r, const char *v)
{
	char *p = (char *)o + r->off;

	switch (r->type) {
	case OPT_FLAG:
	case OPT_INT:
		return coli_parse_int(v, (int)r->min, (int)r->max, (int *)p);
	case OPT_DOUBLE:
		return coli_parse_double(v, r->min, r->max, (double *)p);
	case OPT_BOOL:
		if (!strcmp(v, "on") || !strcmp(v, "1") || !strcmp(v, "yes"))
			*(int *)p = 1;
		else if (!strcmp(v, "off") || !strcmp(v, "0") || !strcmp(v, "no"))
			*(int *)p = 0;
		else
			return -EINVAL;
		return 0;
	case OPT_ENUM:
		for (int k = 0; r->choices[k]; k++)
			if (!strcmp(v, r->choices[k])) {
				*(int *)p = k;
				return 0;
			}
		return -EINVAL;
	case OPT_PATH:
		if (strlen(v) >= r->size)
			return -ENAMETOOLONG;
		*(int *)((char *)o + r->off_word) = is_off_word(v);
		if (is_off_word(v))
			v = "";
		/* fall through */
	case OPT_STR:
		if (strlen(v) >= r->size)
			return -ENAMETOOLONG;
		if (r->check && r->check(v))
			return -EINVAL;
		memcpy(p, v, strlen(v) + 1);
		return 0;
	}
	return -EINVAL;
}

/* What a row allows, in words: "auto, off or only", "an integer in 0..2". */
static void expect(const struct opt_row *r, int rc, char *buf, size_t len)
{
	size_t at = 0;

	switch (r->type) {
	case OPT_FLAG:
	case OPT_INT:
		coli_parse_expect_long((long)r->min, (long)r->max, buf, len);
		return;
	case OPT_DOUBLE:
		coli_parse_expect_double(r->min, r->max, buf, len);
		return;
	case OPT_BOOL:
		snprintf(buf, len, "on or off");
		return;
	case OPT_ENUM:
		buf[0] = 0;
		for (int k = 0; r->choices[k] && at < len; k++)
			at += (size_t)snprintf(buf + at, len - at, "%s%s",
			                       k == 0              ? ""
			                       : r->choices[k + 1] ? ", "
			                                           : " or ",
			                       r->choices[k]);
		return;
	case OPT_STR:
	case OPT_PATH:
		if (rc == -ENAMETOOLONG || !r->expect)
			snprintf(buf, len, "at most %zu characters", r->size - 1);
		else
			snprintf(buf, len, "%s", r->expect);
		return;
	}
}

/* "--io 'x': expected auto, uring or pread" / "COLI_IO='x': expected ..." */
static void bad_value(const struct opt_row *r, int as_env, const char *v, int rc, char *err,
                      size_t errlen)
{
	char allowed[256];

	if (!err || !errlen)
		return;
	expect(r, rc, allowed, sizeof(allowed));
	snprintf(err, errlen, "%s%s'%.200s': expected %s", as_env ? r->env : r->flag,
	         as_env ? "=" : " ", v, allowed);
}

int coli_opts_init(struct coli_opts *o, char *err, size_t errlen)
{
	int ret = 0;

	memset(o, 0, sizeof(*o));
	for (int i = 0; i < N_OPTS; i++) {
		const struct opt_row *r = &g_opts[i];
		const char *v = r->env ? getenv(r->env) : NULL;
		int rc;

		set_value(o, r, r->def);
		if (!v || !*v)
			continue;
		rc = set_value(o, r, v);
		if (rc) {
			set_value(o, r, r->def);
			if (!ret)
				bad_value(r, 1, v, rc, err, errlen);
			ret = -EINVAL;
		}
	}
	o->parallel_auto = 1; /* coli's commands; colid raises it */
	return ret;
}

static const struct opt_row *find(const char *name)
{
	for (int k = 0; k < N_OPTS; k++)
		if ((g_opts[k].flag && !strcmp(name, g_opts[k].flag)) ||
		    (g_opts[k].env && !strcmp(name, g_opts[k].env)))
			return &g_opts[k];
	return NULL;
}

int coli_opts_set(struct coli_opts *o, const char *name, const char *value, char *err,
                  size_t errlen)
{
	const struct opt_row *r = find(name);
	int rc;

	if (!r) {
		if (err && errlen)
			snprintf(err, errlen, "no option named '%s'", name);
		return -ENOENT;
	}
	rc = set_value(o, r, value);
	if (rc) {
		bad_value(r, !r->flag || strcmp(name, r->flag), value, rc, err, errlen);
		return -EINVAL;
	}
	return 0;
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
			bad_value(r, 0, v, rc, err, errlen);
			return -EINVAL;
		}
		return 1;
	}
	return 0;
}

/* The value as text, in buf (which it returns). */
static const char *value_text(const struct coli_opts *o, const struct opt_row *r, char *buf,
                              size_t len)
{
	const char *p = (const char *)o + r->off;
	int x = *(const int *)p;

	switch (r->type) {
	case OPT_FLAG:
	case OPT_INT:
		snprintf(buf, len, "%d", x);
		break;
	case OPT_DOUBLE:
		snprintf(buf, len, "%g", *(const double *)p);
		break;
	case OPT_BOOL:
		snprintf(buf, len, "%s", x ? "on" : "off");
		break;
	case OPT_ENUM:
		snprintf(buf, len, "%d (not a choice)", x);
		for (int k = 0; r->choices[k]; k++)
			if (k == x)
				snprintf(buf, len, "%s", r->choices[k]);
		break;
	case OPT_PATH:
		if (*(const int *)((const char *)o + r->off_word)) {
			snprintf(buf, len, "off");
			break;
		}
		/* fall through */
	case OPT_STR:
		snprintf(buf, len, "%.*s", *p ? (int)strnlen(p, r->size) : 1, *p ? p : "-");
		break;
	}
	return buf;
}

const char *coli_opts_get(const struct coli_opts *o, const char *name, char *buf, size_t len)
{
	const struct opt_row *r = find(name);

	return r && buf && len ? value_text(o, r, buf, len) : NULL;
}

int coli_opts_check(const struct coli_opts *o, char *err, size_t errlen)
{
	for (int i = 0; i < N_OPTS; i++) {
		const struct opt_row *r = &g_opts[i];
		const char *p = (const char *)o + r->off;
		int x = *(const int *)p, n = 0, bad = 0;
		double d;
		char buf[64];

		switch (r->type) {
		case OPT_FLAG:
		case OPT_INT:
			bad = x < r->min || x > r->max;
			break;
		case OPT_DOUBLE:
			d = *(const double *)p;
			bad = !(d >= r->min && d <= r->max);
			break;
		case OPT_BOOL:
			bad = x != 0 && x != 1;
			break;
		case OPT_ENUM:
			while (r->choices[n])
				n++;
			bad = x < 0 || x >= n;
			break;
		case OPT_STR:
		case OPT_PATH:
			if (!memchr(p, 0, r->size)) {
				snprintf(err, errlen, "%s: not a terminated string",
				         r->flag ? r->flag : r->env);
				return -EINVAL;
			}
			bad = r->check && r->check(p);
			break;
		}
		if (bad) {
			bad_value(r, !r->flag, value_text(o, r, buf, sizeof(buf)), -EINVAL, err,
			          errlen);
			return -EINVAL;
		}
	}
	return 0;
}

/* "auto|off|only", "0..2", ">= 0", "-1..1.04858e+06" */
static void allowed_short(const struct opt_row *r, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = 0;
	switch (r->type) {
	case OPT_FLAG:
	case OPT_INT:
		if (r->max >= INT_MAX)
			snprintf(buf, len, ">= %d", (int)r->min);
		else
			snprintf(buf, len, "%d..%d", (int)r->min, (int)r->max);
		return;
	case OPT_DOUBLE:
		snprintf(buf, len, "%g..%g", r->min, r->max);
		return;
	case OPT_BOOL:
		snprintf(buf, len, "on|off");
		return;
	case OPT_ENUM:
		for (int k = 0; r->choices[k] && at < len; k++)
			at += (size_t)snprintf(buf + at, len - at, "%s%s", k ? "|" : "",
			                       r->choices[k]);
		return;
	case OPT_STR:
	case OPT_PATH:
		return;
	}
}

void coli_opts_help(FILE *f)
{
	fprintf(f, "engine options (flag / environment: what it does [allowed; default]):\n");
	for (int i = 0; i < N_OPTS; i++) {
		const struct opt_row *r = &g_opts[i];
		char lhs[64], allowed[96];

		snprintf(lhs, sizeof(lhs), "%s%s%s", r->flag ? r->flag : "",
		         r->flag && r->env ? " / " : "", r->env ? r->env : "");
		allowed_short(r, allowed, sizeof(allowed));
		fprintf(f, "  %-34s %s [%s%sdefault %s]\n", lhs, r->help, allowed,
		        allowed[0] ? "; " : "", *r->def ? r->def : "unset");
	}
}

void coli_opts_print(const struct coli_opts *o, FILE *f)
{
	for (int i = 0; i < N_OPTS; i++) {
		const struct opt_row *r = &g_opts[i];
		const char *name = r->flag ? r->flag + 2 : r->env;
		char buf[600], allowed[96];

		allowed_short(r, allowed, sizeof(allowed));
		fprintf(f, "  %-20s %s%s%s%s\n", name, value_text(o, r, buf, sizeof(buf)),
		        allowed[0] ? " (" : "", allowed, allowed[0] ? ")" : "");
	}
}
