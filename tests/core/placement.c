/*
 * tests/core/placement.c — placement never changes tokens.
 *
 * For every fixture in bf16, q8 and q4 (and the demo fixture in q4k: Q4_K
 * with Q6_K and Q5_0 matrices, GGUF's block types, on their GEMM at prefill:
 * its 48-token prompt gives dense chunks of 48 and expert runs past
 * COLI_GPU_GEMM_MIN_S_KQ) with the default bf16 KV cache, and in
 * bf16 with the f32 and q8 caches (each compared within its KV type: the
 * cache's rounding is part of the reference; only the cases with the dense
 * part, and so a copy of the cache, on a device): teacher-forced logits of the prompt
 * (one batched prefill) and 12 greedy decode steps with every expert on the
 * CPU are the reference (on a GPU, the run with the dense part there and
 * every expert on the CPU is the reference of the dense-on-GPU cases, and
 * is itself held to the CPU's prompt logits for quantized weights: position
 * 0 within 1e-2 of the largest logit). Then the same with experts on devices — one
 * simulated device and two (`sim:2`: experts spread over both, the dense
 * part on the first) always, GPU 0 when this machine has one and GPUs 0 and
 * 1 when it has two — at VRAM budgets (a device's)
 * of nothing, a few slabs, about half, and everything, and with injected
 * device failures after 0, 2, 3, 4 and 9 launches or syncs (a layer queues 3
 * or 4 launches then syncs, so these fail at issue and at take). Every run must give byte-identical
 * logits and identical ids — except bf16 experts on a real GPU: an expert
 * with COLI_GPU_GEMM_MIN_S tokens or more of a prefill runs on bf16 tensor
 * cores (ptx/expert/gemm.cu), equal only within rounding (the one documented
 * exception), so there the logits must agree to 1e-4 of max|logit| and the
 * ids exactly, with the f32 cache (a bf16 or q8 cache rounds the tensor
 * cores' differences again, past any fixed tolerance on the demo model:
 * those runs' logits are not compared, their other checks are). (On the simulated device every
 * dtype is exact.) The decode steps with the dense part on the device and every expert of a layer
 * resident (planned on the device) or some (preplanned) must have run, and
 * without a fault every run counts its reference's expert hits (over all
 * tiers): a device-planned layer's are counted from the routing it sends
 * back once a forward. On one device a preplanned decode layer queues its
 * tail (host rows up, the accumulate) behind a wait for the host when it
 * issues its experts (COLI_TAIL_AHEAD): some run must have. Every family's
 * dense part, MLA's and gpt-oss's included (the gpt_oss fixtures: sinks,
 * sliding windows, the o_proj and router biases), must have run on the
 * device where asked; gpt-oss's experts (their biases and clamped SwiGLU
 * are the silu op's other kind: the sim's and ptx/expert/kernels.cu
 * coli_swiglu_oai; the down bias a bias add a row per pair) are
 * byte-identical wherever they run. Every fixture, gpt-oss's included, must
 * have had layers planned and preplanned on the dense device.
 *
 * On a GPU host the whole test takes minutes. Two variables narrow it (a
 * device call's time limit; CI runs it whole): COLI_PLACEMENT_DEVS, the
 * device arms to run among "sim sim:2 0 0,1" (space-separated: "0" for the
 * GPU's arms alone, whose simulated ones CI runs anyway), and
 * COLI_PLACEMENT_FIXTURES, the fixtures by name. A name that matches none is
 * an error, not an empty pass, and so is a device list without a one-device
 * arm (sim, or 0 on a GPU host), where the preplanned checks run.
 */
#include <math.h>

#include "fixture_util.h"
#include "io/io.h"
#include "ptx/ptx.h"

#define STEPS 12

struct run {
	float *logits; /* [n][vocab] prefill, then [STEPS][vocab] decode */
	int ids[STEPS];
	uint64_t planned, preplanned; /* MoE layer calls the dense device planned, preplanned */
	uint64_t hits;                /* expert hits of every tier */
	uint64_t tail_ahead;          /* layers whose device tail was queued at issue */
	int dense_on_device;          /* the dense part ran on a device */
};

/* max |a - b| / max |a| over n values (NaN counts as infinitely far) */
static double rel_diff(const float *a, const float *b, size_t n)
{
	double m = 0, d = 0;

	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)a[i] - b[i]);

		m = fabs(a[i]) > m ? fabs(a[i]) : m;
		d = e > d || e != e ? (e != e ? INFINITY : e) : d;
	}
	return m > 0 ? d / m : d;
}

/* Position 0's largest |a - b| over the largest |a| of all (NaN:
 * infinite), and the median position's (into *med): position 0 runs every
 * dense op (its attention is V itself), so a fault in a kernel shows
 * there; the dense part's own rounding (exempt from the placement
 * invariant) moves int8 steps and near-ties of the routing, which the
 * positions after them inherit through the cache (tools/ref/dense_dev_diff.sh
 * on the demo's 111 tokens, H100, 2026-12-06: position 0 1.0e-7 (q4k) and
 * 1.4e-7 (q4), the median 7.2e-3 and 7.5e-3, the text's NLL within 0.2%). */
static double pos0_diff(const float *a, const float *b, int n, int V, double *med)
{
	double m = 0, *d = calloc((size_t)(n > 0 ? n : 1), sizeof(double)), p0;

	for (size_t i = 0; i < (size_t)n * V; i++)
		m = fabs(a[i]) > m ? fabs(a[i]) : m;
	for (int p = 0; p < n; p++)
		for (size_t i = (size_t)p * V; i < (size_t)(p + 1) * V; i++) {
			double e = fabs((double)a[i] - b[i]) / (m > 0 ? m : 1);

			d[p] = e > d[p] || e != e ? (e != e ? INFINITY : e) : d[p];
		}
	p0 = d[0];
	for (int i = 1; i < n; i++) /* insertion sort: a prompt's positions */
		for (int j = i; j > 0 && d[j - 1] > d[j]; j--) {
			double t = d[j];

			d[j] = d[j - 1], d[j - 1] = t;
		}
	*med = n > 0 ? d[n / 2] : 0;
	free(d);
	return p0;
}

static const char *g_kv = "bf16"; /* --kv-type of the runs being compared */

static int do_run(const char *path, const char *gpu, double vram_gb, int fail_after,
                  const char *stream, int slots, const char *dense, double ram_gb, const int *ids,
                  int n, int V, struct run *r)
{
	struct coli_opts o;
	coli_engine_t *e;
	char err[512];
	int rc, id;

	coli_opts_init(&o, NULL, 0);
	o.threads = 2;
	snprintf(o.kv_type, sizeof(o.kv_type), "%s", g_kv);
	snprintf(o.gpu, sizeof(o.gpu), "%s", gpu);
	o.vram_gb = vram_gb;
	o.gpu_fail_after = fail_after;
	coli_opts_set(&o, "--stream", stream, NULL, 0);
	o.stream_slots = slots;
	coli_opts_set(&o, "--dense", dense, NULL, 0);
	o.ram_gb = ram_gb;
	o.group_async = !(fail_after == 2 || fail_after == 80); /* some runs take synchronously */
	o.dev_preplan = 1; /* the default, asserted to have run below */
	rc = coli_engine_open(path, &o, &e, err, sizeof(err));
	if (rc) {
		printf("open %s (gpu %s): %s\n", path, gpu, err);
		return rc;
	}
	for (size_t i = 0; i < (size_t)(n + STEPS) * V; i++)
		r->logits[i] = NAN; /* poison */
	rc = coli_engine_forward(e, ids, n, r->logits, 1);
	id = 0;
	for (int v = 1; v < V; v++)
		if (r->logits[(size_t)(n - 1) * V + v] > r->logits[(size_t)(n - 1) * V + id])
			id = v;
	for (int s = 0; !rc && s < STEPS; s++) {
		float *l = r->logits + (size_t)(n + s) * V;

		r->ids[s] = id;
		rc = coli_engine_forward(e, &id, 1, l, 0);
		id = 0;
		for (int v = 1; v < V; v++)
			if (l[v] > l[id])
				id = v;
	}
	{
		struct coli_engine_stats st;

		coli_engine_stats(e, &st);
		r->planned = st.moe_layers_dev_planned;
		r->preplanned = st.moe_layers_dev_preplanned;
		r->hits =
		    st.hits[COLI_TIER_VRAM] + st.hits[COLI_TIER_RAM] + st.hits[COLI_TIER_DISK];
		r->tail_ahead = st.tail_ahead;
		r->dense_on_device = st.dense_on_device;
	}
	coli_engine_close(e);
	return rc;
}

/* Whether `name` is a word of the space-separated list in environment
 * variable `var` (every name when it is unset or empty). */
static int wanted(const char *var, const char *name)
{
	const char *l = getenv(var), *p;
	size_t n = strlen(name);

	if (!l || !*l)
		return 1;
	for (p = l; (p = strstr(p, name)); p += n)
		if ((p == l || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
			return 1;
	return 0;
}

/* Every word of `var`'s list is one of names[0..n): a typo must not pass by
 * running nothing. */
static int list_known(const char *var, const char *const *names, int n)
{
	const char *l = getenv(var);
	char w[64];

	for (const char *p = l ? l : ""; *p;) {
		size_t k = strcspn(p, " ");
		int found = 0;

		snprintf(w, sizeof(w), "%.*s", (int)(k < sizeof(w) ? k : sizeof(w) - 1), p);
		for (int i = 0; i < n && k; i++)
			found |= !strcmp(w, names[i]);
		if (k && !found) {
			printf("FAIL: %s: '%s' is not one of its choices\n", var, w);
			return 0;
		}
		p += k + (p[k] == ' ');
	}
	return 1;
}

int main(void)
{
	char names[MAX_FIXTURES][64];
	int nf = fx_list(names, MAX_FIXTURES), fails = 0, runs = 0, skipped = 0;
	uint64_t planned = 0, preplanned = 0; /* the device-planned paths were taken */
	uint64_t tail_ahead = 0;              /* and the preplanned tail queued at issue */
	const char *why;
	/* one simulated device, two (experts spread over both, the dense part
	 * on the first), GPU 0, and GPUs 0 and 1 where there are two */
	const char *devs[4] = {"sim", "sim:2", "0", "0,1"};
	int n_gpus = coli_ptx_probe(&why), n_devs = n_gpus >= 2 ? 4 : n_gpus > 0 ? 3 : 2;
	enum coli_dtype quants[] = {COLI_DTYPE_BF16, COLI_DTYPE_Q8_0, COLI_DTYPE_Q4_0,
	                            COLI_DTYPE_Q4_K};

	/* a line at a time: a run stopped by a timeout still shows how far it
	 * got and what differed (two GPUs take minutes) */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (n_gpus <= 0)
		printf("no GPU (%s): simulated devices only\n", why);
	if (nf == 0) {
		printf("no fixtures under %s\n", fx_root());
		return 1;
	}
	{
		const char *fxn[MAX_FIXTURES];

		for (int f = 0; f < nf; f++)
			fxn[f] = names[f];
		if (!list_known("COLI_PLACEMENT_DEVS", devs, 4) ||
		    !list_known("COLI_PLACEMENT_FIXTURES", fxn, nf))
			return 1;
		/* the preplanned layers and their queued tails are one device's */
		if (!wanted("COLI_PLACEMENT_DEVS", "sim") &&
		    !(n_gpus > 0 && wanted("COLI_PLACEMENT_DEVS", "0"))) {
			printf("FAIL: COLI_PLACEMENT_DEVS names no one-device arm this machine "
			       "has (sim, or 0 with a GPU): the preplanned checks run there\n");
			return 1;
		}
	}
	for (int f = 0; f < nf; f++) {
		int n, V;
		int *ids;

		if (!wanted("COLI_PLACEMENT_FIXTURES", names[f]))
			continue;
		ids = fx_read_ints(names[f], "ids.txt", &n);
		uint64_t f_planned = 0, f_preplanned = 0; /* this fixture's */

		/* the default KV type (bf16) with every weight type; f32 and q8
		 * KV (each compared within its type) with bf16 weights */
		for (int kq = 0; kq < 6; kq++) {
			const int qi = kq < 3 ? kq : kq == 5 ? 3 : 0;

			/* q4k (GGUF's block types, Q4_K_M's mix) on the demo
			 * fixture only: its 256 columns are whole Q4_K blocks (the
			 * others' would all fall back to Q5_0), and the MLA
			 * fixtures' block-type matrices keep their dense part on
			 * the CPU */
			if (kq == 5 && strcmp(names[f], "demo"))
				continue;
			g_kv = kq < 3 || kq == 5 ? "bf16" : kq == 3 ? "f32" : "q8";
			char path[8192];
			struct run ref, got, gref;
			coli_container_t *c;
			const struct coli_expert_layer *xl;
			double slab_gb, half_slabs; /* half the experts + 1, in slabs */

			if (fx_convert(names[f], quants[qi], fx_tmpdir(), path, sizeof(path)))
				return 1;
			if (coli_io_container_open(path, &c))
				return 1;
			xl = coli_io_container_expert_layer(c, 0);
			slab_gb = xl->slab_bytes / 1e9;
			half_slabs = coli_io_container_n_expert_layers(c) * xl->n_experts / 2 + 1;
			coli_io_container_close(c);
			{
				size_t nref = 0;
				float *refl = fx_read_floats(names[f], "logits.f32", &nref);

				free(refl);
				V = (int)(nref /
				          (size_t)n); /* the vocabulary, from the reference */
			}
			ref.logits = malloc(sizeof(float) * (n + STEPS) * V);
			got.logits = malloc(sizeof(float) * (n + STEPS) * V);
			gref.logits = malloc(sizeof(float) * (n + STEPS) * V);
			if (do_run(path, "off", -1, -1, "off", 0, "cpu", -1, ids, n, V, &ref))
				return 1;
			for (int d = 0; d < n_devs; d++) {
				int gpu = strncmp(devs[d], "sim", 3) != 0;

				if (!wanted("COLI_PLACEMENT_DEVS", devs[d]))
					continue;
				/* the reference for dense-on-device cases: the simulated
				 * device must match the CPU; a GPU matches its own dense run
				 * with every expert on the CPU */
				if (gpu && do_run(path, devs[d], 0, -1, "off", 16, "auto", -1, ids,
				                  n, V, &gref))
					return 1;
				/* that reference against the CPU's, over the prompt (the
				 * decode steps follow each run's own ids): quantized dense
				 * matrices run the CPU's integer reduction on the device
				 * (GEMV and GEMM), so only attention's and the norms'
				 * rounding separate them. Position 0 is held to 1e-2 of
				 * the largest logit (pos0_diff: a fault shows there; a
				 * rounding that moves one int8 step there stays far
				 * below); the median and the largest are printed. bf16
				 * ones prefill on bf16 tensor cores (printed, not held) */
				if (gpu) {
					double md,
					    rd = rel_diff(ref.logits, gref.logits, (size_t)n * V);
					double p0 = pos0_diff(ref.logits, gref.logits, n, V, &md);
					int held = quants[qi] != COLI_DTYPE_BF16;

					printf(
					    "%s %s kv %s: GPU %s's dense part against the CPU: "
					    "%.3g of max|logit| (position 0 %.3g, median %.3g)%s\n",
					    names[f], coli_dtype_name(quants[qi]), g_kv, devs[d],
					    rd, p0, md, held && !(p0 <= 1e-2) ? ", over 1e-2" : "");
					fails += held && !(p0 <= 1e-2);
				}
				/* VRAM budget (slabs), fault injection, streaming mode,
				 * slots, dense part on the CPU or the device */
				const struct {
					double slabs;
					int fail_after;
					const char *stream;
					int slots;
					const char *dense;
					double ram_gb;
				} cases[] = {
				    {0, -1, "off", 16, "cpu", -1},
				    {3.5, -1, "off", 16, "cpu", -1},
				    {8.5, -1, "off", 16, "cpu", -1},
				    {-1, -1, "off", 16, "cpu", -1},
				    {0, -1, "auto", 16, "cpu", -1},
				    {3.5, -1, "only", 16, "cpu", -1},
				    {0, -1, "only", 1, "cpu", -1},
				    {0, 0, "only", 16, "cpu", -1},
				    {3.5, 2, "auto", 16, "cpu", -1},
				    {3.5, 3, "only", 16, "cpu", -1},
				    {0, 4, "only", 16, "cpu", -1},
				    {-1, 9, "auto", 16, "cpu", -1},
				    /* half the experts a device: on two, every layer in
				     * VRAM, whole layers on the dense device first */
				    {-2, -1, "off", 16, "auto", -1},
				    {0, -1, "off", 16, "auto", -1},
				    {3.5, -1, "auto", 16, "auto", -1},
				    {-1, -1, "off", 16, "auto", -1},
				    {0, -1, "only", 2, "auto", -1},
				    {3.5, 5, "auto", 16, "auto", -1},
				    {3.5, 80, "auto", 16, "auto", -1},
				    {-1, 300, "only", 16, "auto", -1},
				    /* host tiers at their minimum (--ram-gb 0: top_k slots): a
				     * prefill's experts come in chunks from disk and streaming
				     * steps aside; decode streams from pinned slots */
				    {0, -1, "only", 16, "cpu", 0},
				    {3.5, -1, "auto", 16, "cpu", 0},
				    {0, -1, "only", 16, "auto", 0},
				    {0, 3, "only", 16, "cpu", 0},
				};

				for (size_t b = 0; b < sizeof(cases) / sizeof(cases[0]); b++) {
					double slabs =
					    cases[b].slabs == -2 ? half_slabs : cases[b].slabs;
					double vram = slabs < 0 ? -1 : slabs * slab_gb;
					int fa = cases[b].fail_after;

					/* the other KV types: where a device keeps the cache
					 * (the CPU's cases hold it on the host either way) */
					if ((kq == 3 || kq == 4) && strcmp(cases[b].dense, "auto"))
						continue;
					if (do_run(path, devs[d], vram, fa, cases[b].stream,
					           cases[b].slots, cases[b].dense, cases[b].ram_gb,
					           ids, n, V, &got))
						return 1;
					/* the dense part on a GPU routes by its own logits:
					 * its reference is that GPU's run (gref) */
					const struct run *want =
					    gpu && !strcmp(cases[b].dense, "auto") ? &gref : &ref;

					runs++;
					planned += got.planned, preplanned += got.preplanned;
					f_planned += got.planned, f_preplanned += got.preplanned;
					tail_ahead += got.tail_ahead;
					/* each layer call's routed experts are hits of some tier,
					 * wherever they ran (a fault's redo counts twice): a
					 * device-planned layer's come from the routing it sent
					 * back (fast_count) */
					if (fa < 0 && got.hits != want->hits) {
						printf("%s %s: device %s vram %.2g GB stream %s "
						       "dense %s: "
						       "%llu expert hits, the reference's %llu\n",
						       names[f], coli_dtype_name(quants[qi]),
						       devs[d], vram, cases[b].stream,
						       cases[b].dense, (unsigned long long)got.hits,
						       (unsigned long long)want->hits);
						fails++;
					}
					/* every family's dense part runs on the device when
					 * asked (MLA's too: core/forward/mla_dev.c; gpt-oss's) */
					if (!strcmp(cases[b].dense, "auto") && fa < 0 &&
					    !got.dense_on_device) {
						printf("%s %s: device %s: the dense part stayed on "
						       "the CPU (dense auto)\n",
						       names[f], coli_dtype_name(quants[qi]),
						       devs[d]);
						fails++;
					}
					if (cases[b].slabs == -2 &&
					    (strchr(devs[d], ':') || strchr(devs[d], ',')) &&
					    !got.planned) {
						printf(
						    "%s %s: device %s, half the experts each: no "
						    "whole layer was planned on the dense device\n",
						    names[f], coli_dtype_name(quants[qi]), devs[d]);
						fails++;
					}
					if (gpu && !strcmp(cases[b].dense, "auto") && fa >= 0)
						continue; /* dense moved GPU -> CPU mid-run:
						             completes, rounds differently */
					int exact = !(gpu && quants[qi] == COLI_DTYPE_BF16);
					size_t nl = (size_t)(n + STEPS) * V;

					/* bf16 experts on a GPU prefill on tensor cores, within
					 * rounding; a bf16 or q8 cache then rounds those
					 * differences again (a flip to the next bf16 value is
					 * 2^-8 of a K or V), past any fixed tolerance on the
					 * demo model: that case is compared with the f32 cache
					 * only (kq 3) */
					if (!exact && kq != 3) {
						runs--, skipped++; /* its other checks above ran */
						continue;
					}

					if ((exact ? memcmp(want->logits, got.logits,
					                    sizeof(float) * nl) != 0
					           : !(rel_diff(want->logits, got.logits, nl) <=
					               1e-4)) ||
					    memcmp(want->ids, got.ids, sizeof(ref.ids))) {
						printf("%s %s kv %s: device %s vram %.2g GB "
						       "fail_after "
						       "%d stream %s/%d dense %s: logits or ids "
						       "differ "
						       "from the CPU\n",
						       names[f], coli_dtype_name(quants[qi]), g_kv,
						       devs[d], vram, fa, cases[b].stream,
						       cases[b].slots, cases[b].dense);
						fails++;
					}
				}
			}
			free(ref.logits), free(got.logits), free(gref.logits);
			printf("%s %s kv %s: %d placements so far, %d differ\n", names[f],
			       coli_dtype_name(quants[qi]), g_kv, runs, fails);
		}
		/* every fixture's layers are planned and preplanned on the dense
		 * device where its experts are (gpt-oss's too: their biases and
		 * clamped SwiGLU are in the plan's silu and its down bias op) */
		printf("%s: MoE layer calls planned on the dense device %llu, preplanned %llu\n",
		       names[f], (unsigned long long)f_planned, (unsigned long long)f_preplanned);
		if (!f_planned || !f_preplanned) {
			printf("FAIL: %s: the device-planned (fully or partly resident) paths "
			       "never ran\n",
			       names[f]);
			fails++;
		}
		free(ids);
	}
	if (skipped)
		printf(
		    "%d GPU runs of bf16 experts with a bf16 or q8 cache not compared (the "
		    "tensor-core prefill's rounding, rounded again by the cache; their f32-cache "
		    "runs are)\n",
		    skipped);
	printf("%d placements compared with the CPU reference, %d differ; MoE layer calls "
	       "planned on the dense device %llu, preplanned %llu (tails queued at issue %llu)\n",
	       runs, fails, (unsigned long long)planned, (unsigned long long)preplanned,
	       (unsigned long long)tail_ahead);
	if (!planned || !preplanned) {
		printf("FAIL: the device-planned (fully or partly resident) paths never ran\n");
		fails++;
	}
	if (!tail_ahead) { /* COLI_TAIL_AHEAD's default: one device's preplanned layers */
		printf("FAIL: no preplanned layer queued its tail at issue (COLI_TAIL_AHEAD)\n");
		fails++;
	}
	return fails != 0;
}
