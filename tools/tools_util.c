/*
 * tools/tools_util.c — helpers shared by the command-line programs.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"

int tool_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "coli %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/* "PROG: OPT 'V': expected WHAT" */
static int bad_number(const char *prog, const char *opt, const char *v, const char *what)
{
	fprintf(stderr, "%s: %s '%.200s': expected %s\n", prog, opt, v, what);
	return -1;
}

int tool_int(const char *prog, const char *opt, const char *v, int min, int max, int *out)
{
	char what[96];

	if (!coli_parse_int(v, min, max, out))
		return 0;
	coli_parse_expect_long(min, max, what, sizeof(what));
	return bad_number(prog, opt, v, what);
}

int tool_double(const char *prog, const char *opt, const char *v, double min, double max,
                double *out)
{
	char what[96];

	if (!coli_parse_double(v, min, max, out))
		return 0;
	coli_parse_expect_double(min, max, what, sizeof(what));
	return bad_number(prog, opt, v, what);
}

int tool_u64(const char *prog, const char *opt, const char *v, uint64_t min, uint64_t max,
             uint64_t *out)
{
	char what[96];
	uint64_t x;

	if (!coli_parse_u64(v, max, &x) && x >= min) {
		*out = x;
		return 0;
	}
	snprintf(what, sizeof(what), "an integer in %llu..%llu%s", (unsigned long long)min,
	         (unsigned long long)max, max == UINT64_MAX ? " (or 0x hex)" : "");
	return bad_number(prog, opt, v, what);
}

int tool_engine_args_init(struct tool_engine_args *a, const char *prog)
{
	char err[300];

	a->model = NULL;
	if (coli_opts_init(&a->opts, err, sizeof(err))) {
		fprintf(stderr, "%s: %s\n", prog, err);
		return -1;
	}
	return 0;
}

int tool_engine_arg(struct tool_engine_args *a, int argc, char **argv, int *i)
{
	char err[256];
	int rc;

	if (!strcmp(argv[*i], "-m") || !strcmp(argv[*i], "--model")) {
		if (*i + 1 >= argc) {
			tool_err(argv[0], "%s needs a file", argv[*i]);
			return -1;
		}
		a->model = argv[*i + 1];
		*i += 2;
		return 1;
	}
	rc = coli_opts_parse_arg(&a->opts, argc, argv, i, err, sizeof(err));
	if (rc < 0) {
		tool_err(argv[0], "%s", err);
		return -1;
	}
	return rc;
}

int tool_prompt_ids(coli_engine_t *e, const char *text, const char *ids_csv, int **ids, int *n)
{
	const struct coli_model_config *c = coli_engine_config(e);
	char err[256];

	if (ids_csv) {
		int cap = 16, k = 0;
		const char *p = ids_csv;
		int *v = malloc(sizeof(int) * cap);

		while (v && *p) {
			char *end;
			long x = strtol(p, &end, 10);

			if (end == p || x < 0 || x >= c->vocab) {
				free(v);
				tool_err("ids", "bad token id list at '%s' (ids are 0..%d)", p,
				         c->vocab - 1);
				return 1;
			}
			if (k == cap) {
				int *nv = realloc(v, sizeof(int) * (cap *= 2));

				if (!nv)
					break;
				v = nv;
			}
			v[k++] = (int)x;
			p = *end == ',' || *end == ' ' ? end + 1 : end;
		}
		*ids = v;
		*n = k;
		return v ? 0 : 1;
	}
	if (!coli_engine_tokenizer(e)) {
		tool_err("prompt", "this model has no tokenizer; pass the prompt as --ids");
		return 1;
	}
	if (coli_tokenizer_encode(coli_engine_tokenizer(e), text, strlen(text), ids, n, err,
	                          sizeof(err))) {
		tool_err("prompt", "%s", err);
		return 1;
	}
	if (*n == 0) {
		/* an empty prompt: start from BOS, or the first EOS (end of a document) */
		int start = c->bos >= 0 ? c->bos : (c->n_eos ? c->eos[0] : 0);

		free(*ids);
		*ids = malloc(sizeof(int));
		if (!*ids)
			return 1;
		(*ids)[0] = start;
		*n = 1;
	}
	return 0;
}

void tool_print_gen_stats(coli_engine_t *e, const struct coli_gen_stats *st, int profile)
{
	struct coli_engine_stats es;
	uint64_t loads;

	coli_engine_stats(e, &es);
	loads = es.hits[COLI_TIER_VRAM] + es.hits[COLI_TIER_RAM] + es.hits[COLI_TIER_DISK];
	fprintf(stderr,
	        "coli: prompt %d tok, prefill %.1f tok/s | generated %d tok, decode %.2f tok/s%s | "
	        "experts: %.1f per token\n",
	        st->n_prompt, st->prefill_s > 0 ? st->n_prompt / st->prefill_s : 0, st->n_gen,
	        st->decode_s > 0 && st->n_gen > 1 ? (st->n_gen - 1) / st->decode_s : 0,
	        st->stopped_eos ? " (eos)" : "",
	        st->n_prompt + st->n_gen > 0 ? (double)st->expert_calls / (st->n_prompt + st->n_gen)
	                                     : 0);
	if (st->spec_rounds) {
		fprintf(stderr,
		        "coli: spec %s: %d of %d draft tokens accepted in %d verifying "
		        "forwards",
		        st->spec_model ? "draft" : "ngram", st->spec_accepted, st->spec_drafted,
		        st->spec_rounds);
		if (st->spec_cost > 0) /* --spec auto: what decided the drafts verified */
			fprintf(stderr, "; a draft token cost %.2f of a step", st->spec_cost);
		fprintf(stderr, "\n");
	}
	if (!loads)
		return;
	fprintf(stderr,
	        "coli: tiers: %llu expert loads, VRAM %.1f%% RAM %.1f%% disk %.1f%% (%llu RAM "
	        "slots for "
	        "%llu experts) | disk %.1f MB in %.3f s (%.2f GB/s), blocked %.3f s | "
	        "prefetch recall %.1f%%, waste %.1f%% of %llu\n",
	        (unsigned long long)loads, 100.0 * es.hits[COLI_TIER_VRAM] / loads,
	        100.0 * es.hits[COLI_TIER_RAM] / loads, 100.0 * es.hits[COLI_TIER_DISK] / loads,
	        (unsigned long long)es.ram_slots, (unsigned long long)es.total_slabs,
	        es.disk_bytes_read / 1e6, es.disk_read_s,
	        es.disk_read_s > 0 ? es.disk_bytes_read / 1e9 / es.disk_read_s : 0, es.disk_wait_s,
	        es.lookahead_routed ? 100.0 * es.lookahead_hit / es.lookahead_routed : 0,
	        es.prefetch_issued ? 100.0 * es.prefetch_wasted / es.prefetch_issued : 0,
	        (unsigned long long)es.prefetch_issued);
	if (!profile)
		return;
	/* the prompt's forward: where its time went */
	if (st->prefill_s > 0) {
		double n = st->n_prompt;

		fprintf(
		    stderr,
		    "coli: prefill per prompt token (chunks of %d): %.3f ms = attention %.3f | moe "
		    "%.3f (plan %.3f, pack+issue %.3f with host slabs %.3f, device issue %.3f and "
		    "lookahead %.3f, cpu-rows %.3f with device issue %.3f, take %.3f) | lm_head "
		    "%.3f | other\n",
		    coli_engine_ubatch(e), 1e3 * st->prefill_s / n,
		    1e3 * st->prefill_attention_s / n, 1e3 * st->prefill_moe_s / n,
		    1e3 * st->prefill_plan_s / n, 1e3 * st->prefill_issue_s / n,
		    1e3 * st->prefill_slabs_s / n, 1e3 * st->prefill_devissue_s / n,
		    1e3 * st->prefill_lookahead_s / n, 1e3 * st->prefill_cpu_s / n,
		    1e3 * st->prefill_beside_s / n, 1e3 * st->prefill_take_s / n,
		    1e3 * st->prefill_lm_head_s / n);
	}
	if (es.handoff_s > 0)
		fprintf(
		    stderr,
		    "coli: layer split: the residual stream handed between devices in %.3f ms a "
		    "prompt token, %.3f ms a decode token\n",
		    st->n_prompt ? 1e3 * st->prefill_handoff_s / st->n_prompt : 0,
		    st->decode_steps ? 1e3 * st->decode_handoff_s / st->decode_steps : 0);
	/* the overlap window over the decode steps (--profile, COLI_CUDA_PROFILE=1) */
	{
		double n = st->decode_steps > 0 ? st->decode_steps : 1;
		double win = st->decode_issue_s + st->decode_cpu_s + st->decode_take_s;

		fprintf(
		    stderr,
		    "coli: overlap window per decode token: pack+issue %.3f ms (route %.3f, "
		    "host slabs %.3f, device issue %.3f) | cpu-rows %.3f ms (device issue beside "
		    "them %.3f) | take(sync+acc) %.3f ms = %.3f ms of %.3f ms; devices busy with "
		    "experts %.3f ms (%.0f%% of the window)\n",
		    1e3 * st->decode_issue_s / n, 1e3 * st->decode_plan_s / n,
		    1e3 * st->decode_slabs_s / n, 1e3 * st->decode_devissue_s / n,
		    1e3 * st->decode_cpu_s / n, 1e3 * st->decode_beside_s / n,
		    1e3 * st->decode_take_s / n, 1e3 * win / n, 1e3 * st->decode_s / n,
		    1e3 * st->decode_dev_busy_s / n,
		    win > 0 ? 100.0 * st->decode_dev_busy_s / win : 0);
		if (st->decode_dev_ops > 0)
			fprintf(
			    stderr,
			    "coli: device ops per decode token: %.1f (kernel launches, syncs and "
			    "staging copies of the dense part and the experts; transfers not "
			    "counted)\n",
			    st->decode_dev_ops / n);
		/* the window's bound: the host tiers' bytes at the CPU's and the
		 * stream's rates together (DESIGN.md's B_ram / (BW_cpu + BW_pcie)) */
		if (st->decode_host_bytes > 0 && es.cost_bw_cpu + es.cost_bw_stream > 0) {
			double bpt = st->decode_host_bytes / n;
			double bound = bpt / (es.cost_bw_cpu + es.cost_bw_stream);

			fprintf(
			    stderr,
			    "coli: window bound per decode token: %.1f MB from RAM/disk at CPU "
			    "%.1f + stream %.1f GB/s (the cost model's, last measured) = %.3f ms; "
			    "the window is %.2fx it\n",
			    bpt / 1e6, es.cost_bw_cpu / 1e9, es.cost_bw_stream / 1e9, 1e3 * bound,
			    win / n / bound);
		}
		fprintf(stderr,
		        "coli: devices: %llu experts streamed (%llu found staged), %.3f GB copied "
		        "(%.2f GB/s over the run), "
		        "other host->device %.1f MB, weights uploaded at open %.2f GB, %llu VRAM "
		        "swaps (%llu read back into RAM), dense part on %s (%llu MoE layer calls "
		        "stayed on it, %llu planned there, %llu preplanned; %llu layer calls "
		        "replayed from %llu graphs)\n",
		        (unsigned long long)es.stream_experts,
		        (unsigned long long)es.stream_staged_hits, es.stream_copy_bytes / 1e9,
		        st->decode_s > 0
		            ? es.stream_copy_bytes / 1e9 / (st->prefill_s + st->decode_s)
		            : 0,
		        (es.h2d_bytes - es.stream_copy_bytes) / 1e6, es.h2d_const_bytes / 1e9,
		        (unsigned long long)es.vram_swaps, (unsigned long long)es.vram_readmits,
		        es.dense_on_device ? "the device" : "the CPU",
		        (unsigned long long)es.moe_layers_on_dense,
		        (unsigned long long)es.moe_layers_dev_planned,
		        (unsigned long long)es.moe_layers_dev_preplanned,
		        (unsigned long long)es.dev_graph_replays,
		        (unsigned long long)es.dev_graph_captures);
		fprintf(stderr,
		        "coli: faults: device failed at issue %llu, at take %llu | "
		        "CUDA_RELEASE_HOST: %llu host copies dropped, %llu reloads (%.1f MB)\n",
		        (unsigned long long)es.dev_fail_issue, (unsigned long long)es.dev_fail_take,
		        (unsigned long long)es.host_drops, (unsigned long long)es.reloads,
		        es.reload_bytes / 1e6);
	}
}
