/*
 * tools/bench/serve/bench_serve_report.c — the figures and the report of `coli bench
 * serve` (tools/bench/serve/bench_serve.c runs the load; docs/perf/README.md, "serve").
 *
 * A round's figures: requests/s and output tok/s over the round's wall time
 * (first send to last byte), TTFT, inter-token latency and end-to-end
 * latency at p50 and p99 by nearest rank (the smallest value with at least
 * that share of the values at or below it), queue time as colid counted it.
 * Over rounds each figure is the median with [min..max]; between arms
 * (--clients 1,8) a ratio is the median of the rounds' own ratios, each
 * round having run every arm back to back.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"
#include "tools/bench/serve/bench_serve.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest value with at least q of the values <= it. */
static double pct(double *v, int n, double q)
{
	int k;

	if (!n)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	k = (int)(q * n + 0.999999);
	return v[k < 1 ? 0 : k - 1];
}

void bench_serve_figures(const struct result *r, int n, struct figures *f)
{
	double *ttft = malloc(sizeof(double) * (size_t)(n + 1)),
	       *e2e = malloc(sizeof(double) * (size_t)(n + 1)), *itl;
	double t0 = 1e300, t1 = 0;
	long long n_gaps = 0;
	int ok = 0, usage = 1, by_ids = 1;

	memset(f, 0, sizeof(*f));
	for (int i = 0; i < n; i++)
		n_gaps += r[i].ok ? r[i].n_gaps : 0;
	itl = malloc(sizeof(double) * (size_t)(n_gaps + 1));
	n_gaps = 0;
	for (int i = 0; i < n; i++) {
		f->requests++;
		if (r[i].start_s < t0)
			t0 = r[i].start_s;
		if (r[i].end_s > t1)
			t1 = r[i].end_s;
		if (!r[i].ok) {
			if (!f->errors++)
				snprintf(f->first_error, sizeof(f->first_error), "%s", r[i].why);
			continue;
		}
		usage &= r[i].usage_tokens >= 0;
		by_ids &= r[i].id_chunks > 0;
		f->tokens += r[i].tokens;
		f->chunks += r[i].chunks;
		f->id_chunks += r[i].id_chunks;
		if (r[i].outs)
			ttft[ok] = r[i].ttft_s;
		else
			ttft[ok] = r[i].end_s - r[i].start_s;
		e2e[ok++] = r[i].end_s - r[i].start_s;
		for (int g = 0; g < r[i].n_gaps; g++)
			itl[n_gaps++] = r[i].gaps[g];
	}
	f->wall_s = n ? t1 - t0 : 0;
	f->req_s = f->wall_s > 0 ? ok / f->wall_s : 0;
	f->tok_s = f->wall_s > 0 ? f->tokens / f->wall_s : 0;
	f->ttft_p50 = pct(ttft, ok, 0.5);
	f->ttft_p99 = pct(ttft, ok, 0.99);
	f->e2e_p50 = pct(e2e, ok, 0.5);
	f->e2e_p99 = pct(e2e, ok, 0.99);
	f->itl_p50 = pct(itl, (int)n_gaps, 0.5);
	f->itl_p99 = pct(itl, (int)n_gaps, 0.99);
	f->tokens_by = usage && ok ? "usage" : by_ids && ok ? "token_ids" : "chunks";
	free(ttft);
	free(e2e);
	free(itl);
}

static double med(double *v, int n, double *lo, double *hi)
{
	double m;

	m = n ? bench_median(v, n) : 0;
	*lo = n ? v[0] : 0;
	*hi = n ? v[n - 1] : 0;
	return m;
}

#define N_FIG 9
static const char *const g_fig_names[N_FIG] = {"requests_per_s", "output_tok_s", "ttft_p50_s",
                                               "ttft_p99_s",     "itl_p50_s",    "itl_p99_s",
                                               "e2e_p50_s",      "e2e_p99_s",    "queue_s"};

static double fig(const struct figures *f, int k)
{
	const double v[N_FIG] = {f->req_s,   f->tok_s,   f->ttft_p50, f->ttft_p99, f->itl_p50,
	                         f->itl_p99, f->e2e_p50, f->e2e_p99,  f->queue_s};
	return v[k];
}

/* One arm's rounds f[rounds]: its JSON object, or its lines on stdout. */
static json_t *report_arm(const struct opts *o, int clients, const struct figures *f, int rounds,
                          int json)
{
	double m[N_FIG], lo[N_FIG], hi[N_FIG], v[64];
	int requests = 0, errors = 0;
	long long tokens = 0, chunks = 0, id_chunks = 0;
	const char *first_error = "";

	for (int r = 0; r < rounds; r++) {
		requests += f[r].requests;
		errors += f[r].errors;
		tokens += f[r].tokens;
		chunks += f[r].chunks;
		id_chunks += f[r].id_chunks;
		if (!first_error[0])
			first_error = f[r].first_error;
	}
	for (int k = 0; k < N_FIG; k++) {
		for (int r = 0; r < rounds; r++)
			v[r] = fig(&f[r], k);
		m[k] = med(v, rounds, &lo[k], &hi[k]);
	}
	if (json) {
		json_t *j =
		    json_pack("{s:i,s:i,s:i,s:I,s:s,s:I,s:I}", "clients", clients, "requests",
		              requests, "errors", errors, "output_tokens", (json_int_t)tokens,
		              "tokens_by", f[0].tokens_by, "text_chunks", (json_int_t)chunks,
		              "token_id_chunks", (json_int_t)id_chunks);
		json_t *rr = json_array();

		for (int k = 0; k < N_FIG; k++) {
			int absent = k == N_FIG - 1 && m[k] < 0;

			json_object_set_new(j, g_fig_names[k],
			                    absent ? json_null() : json_real(m[k]));
			if (rounds > 1 && !absent) {
				char name[64];

				snprintf(name, sizeof(name), "%s_range", g_fig_names[k]);
				json_object_set_new(j, name, json_pack("[f,f]", lo[k], hi[k]));
			}
		}
		for (int r = 0; r < rounds; r++) {
			json_t *one = json_pack("{s:i,s:i,s:I,s:f}", "requests", f[r].requests,
			                        "errors", f[r].errors, "output_tokens",
			                        (json_int_t)f[r].tokens, "wall_s", f[r].wall_s);

			for (int k = 0; k < N_FIG; k++)
				json_object_set_new(one, g_fig_names[k],
				                    k == N_FIG - 1 && f[r].queue_s < 0
				                        ? json_null()
				                        : json_real(fig(&f[r], k)));
			json_array_append_new(rr, one);
		}
		json_object_set_new(j, "rounds_detail", rr);
		if (errors)
			json_object_set_new(j, "first_error", json_string(first_error));
		return j;
	}
	printf("bench serve: %d clients, %d round(s), %d requests, %d errors, %lld output tokens "
	       "(counted by %s)\n",
	       clients, rounds, requests, errors, tokens, f[0].tokens_by);
	printf("  prompt %d..%d tokens, max_tokens %d..%d, shared prefix %.0f%% of %d tokens\n",
	       o->prompt.lo, o->prompt.hi, o->out.lo, o->out.hi, o->shared * 100, o->prefix_tokens);
	printf("  chunks: %lld with text, %lld with token ids (%s); TTFT and ITL from the %s\n",
	       chunks, id_chunks, o->token_ids > 0 ? "return_token_ids asked" : "not asked",
	       id_chunks ? "token ids" : "text");
	for (int k = 0; k < N_FIG; k++) {
		if (k == N_FIG - 1 && m[k] < 0) {
			printf("  %-16s (the server does not report it)\n", g_fig_names[k]);
			continue;
		}
		printf("  %-16s %12.4f", g_fig_names[k], m[k]);
		if (rounds > 1)
			printf("  [%.4f..%.4f]", lo[k], hi[k]);
		putchar('\n');
	}
	if (errors)
		printf("  first error: %s\n", first_error);
	if (!chunks && !id_chunks && requests > errors)
		printf("  note: the server streamed no text and no token ids (a model without a "
		       "tokenizer, and --token-ids off?): TTFT is the whole request, ITL absent\n");
	return NULL;
}

/* The figures compared between arms: arm a over arm 0, the median of the
 * rounds' own ratios (each round runs every arm, so a drift cancels). */
#define N_RATIO 3
static const int g_ratio_fig[N_RATIO] = {1 /* output_tok_s */, 3 /* ttft_p99_s */,
                                         5 /* itl_p99_s */};

/* f[round * n_arms + arm]. */
void bench_serve_report(const struct opts *o, const struct figures *f, int rounds, int json)
{
	struct figures arm_f[64];
	json_t *top = NULL, *arms = NULL, *ratios = NULL;

	if (json) {
		top = json_pack("{s:s,s:s,s:i,s:[i,i],s:[i,i],s:f,s:i,s:I,s:i,s:b}", "bench",
		                "serve", "url", o->url ? o->url : "colid -m", "rounds", rounds,
		                "prompt_tokens", o->prompt.lo, o->prompt.hi, "max_tokens",
		                o->out.lo, o->out.hi, "shared_prefix", o->shared, "prefix_tokens",
		                o->prefix_tokens, "seed", (json_int_t)o->seed, "id_range",
		                o->id_range, "token_ids", o->token_ids > 0);
		arms = json_array();
		ratios = json_array();
	}
	for (int a = 0; a < o->n_arms; a++) {
		json_t *j;

		for (int r = 0; r < rounds; r++)
			arm_f[r] = f[r * o->n_arms + a];
		if (!json && a)
			putchar('\n');
		j = report_arm(o, o->arms[a], arm_f, rounds, json);
		if (!j)
			continue;
		if (o->n_arms == 1) /* one arm: its fields at the top */
			json_object_update(top, j), json_decref(j);
		else
			json_array_append_new(arms, j);
	}
	for (int a = 1; a < o->n_arms; a++) {
		json_t *one =
		    json ? json_pack("{s:i,s:i}", "clients", o->arms[a], "over_clients", o->arms[0])
		         : NULL;

		if (!json)
			printf("%s%d clients / %d clients (median of the rounds' ratios):",
			       a > 1 ? "" : "\n", o->arms[a], o->arms[0]);
		for (int k = 0; k < N_RATIO; k++) {
			int fi = g_ratio_fig[k];
			double v[64], lo, hi, m;
			int n = 0;

			for (int r = 0; r < rounds; r++) {
				double base = fig(&f[r * o->n_arms], fi);

				if (base > 0)
					v[n++] = fig(&f[r * o->n_arms + a], fi) / base;
			}
			m = med(v, n, &lo, &hi);
			if (json) {
				char name[64];

				snprintf(name, sizeof(name), "%s_range", g_fig_names[fi]);
				json_object_set_new(one, g_fig_names[fi],
				                    n ? json_real(m) : json_null());
				json_object_set_new(one, name,
				                    n ? json_pack("[f,f]", lo, hi) : json_null());
			} else {
				printf("  %s %.3fx [%.3f..%.3f]", g_fig_names[fi], m, lo, hi);
			}
		}
		if (json)
			json_array_append_new(ratios, one);
		else
			putchar('\n');
	}
	if (!json)
		return;
	if (o->n_arms > 1) {
		json_object_set_new(top, "arms", arms);
		json_object_set_new(top, "ratios", ratios);
	} else {
		json_decref(arms);
		json_decref(ratios);
	}
	json_dumpf(top, stdout, JSON_INDENT(1));
	fputc('\n', stdout);
	json_decref(top);
}
