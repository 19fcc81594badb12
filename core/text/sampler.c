/*
 * core/text/sampler.c — choosing the next token from logits: greedy (temperature
 * 0, ties to the lowest id), or temperature + top-k + top-p sampling with a
 * seeded generator (splitmix64), so a seed reproduces a completion exactly.
 *
 * Order of the filters, as in transformers' sampling: temperature scales the
 * logits, top-k keeps the k largest, softmax, top-p keeps the smallest prefix
 * (by descending probability) whose mass reaches p, then one draw. No full
 * sort of the vocabulary (152k entries took ~25 ms a token): see
 * coli_sampler_pick. tests/core/sampler checks it against a plain reference.
 * Before the draw, a request's penalties, logit_bias and min_p make a copy
 * of the logits (core/text/sampler_proc.c: -inf for a banned or cut token,
 * which weighs 0 here and is never a rounding fallback); after it, the
 * logprobs come from the raw ones (tests/core/sampler_params).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_internal.h"

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* (weight, token id); "better" = larger weight, then smaller id */
struct pair {
	float p;
	int i;
};

static int better(const struct pair *x, const struct pair *y)
{
	return x->p != y->p ? x->p > y->p : x->i < y->i;
}

static int cmp_desc(const void *a, const void *b)
{
	return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

static void swap(struct pair *a, struct pair *b)
{
	struct pair t = *a;

	*a = *b, *b = t;
}

/* Hoare partition of a[lo..hi] (hi - lo >= 2) around the median of three:
 * on return a[lo..*j] are better than a[*i..hi], and whatever lies between
 * is the pivot itself (ids make every pair distinct). */
static void partition(struct pair *a, int lo, int hi, int *pi, int *pj)
{
	int mid = lo + (hi - lo) / 2, i = lo, j = hi;
	struct pair piv;

	if (better(&a[mid], &a[lo]))
		swap(&a[mid], &a[lo]);
	if (better(&a[hi], &a[lo]))
		swap(&a[hi], &a[lo]);
	if (better(&a[hi], &a[mid]))
		swap(&a[hi], &a[mid]);
	piv = a[mid];
	while (i <= j) {
		while (better(&a[i], &piv))
			i++;
		while (better(&piv, &a[j]))
			j--;
		if (i <= j)
			swap(&a[i++], &a[j--]);
	}
	*pi = i, *pj = j;
}

/* Rearrange a[0..n) so that a[0..k) are its k best (in no order): quickselect,
 * expected O(n). */
static void select_best(struct pair *a, int n, int k)
{
	int lo = 0, hi = n - 1, i, j;

	while (k > lo && k <= hi) {
		if (hi - lo < 2) {
			qsort(a + lo, (size_t)(hi - lo + 1), sizeof(*a), cmp_desc);
			return;
		}
		partition(a, lo, hi, &i, &j);
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return;
	}
}

static double mass_of(const struct pair *a, int lo, int hi) /* a[lo..hi) */
{
	double m = 0;

	for (int x = lo; x < hi; x++)
		m += a[x].p;
	return m;
}

/* top-p: rearrange a[0..n) so that its best come first and return k, the
 * length of the shortest best-first prefix whose mass reaches target, as a
 * full sort would give: the same quickselect, steered by mass, expected O(n). */
static int select_mass(struct pair *a, int n, double target)
{
	int lo = 0, hi = n - 1, i, j;
	double cum = 0, m; /* mass of a[0..lo), all kept */

	while (lo <= hi) {
		if (hi - lo < 16) { /* small: sort and walk */
			qsort(a + lo, (size_t)(hi - lo + 1), sizeof(*a), cmp_desc);
			for (int x = lo; x <= hi; x++) {
				cum += a[x].p;
				if (cum >= target)
					return x + 1;
			}
			return hi + 1;
		}
		partition(a, lo, hi, &i, &j);
		m = mass_of(a, lo, j + 1);
		if (cum + m >= target) { /* the prefix ends among the better part */
			hi = j;
			continue;
		}
		cum += m;
		for (int x = j + 1; x < i; x++) { /* the pivot */
			cum += a[x].p;
			if (cum >= target)
				return x + 1;
		}
		lo = i;
	}
	return n;
}

/* top-p over many candidates in id order (a flat distribution's nucleus:
 * tens of thousands of tokens, where the quickselect above cost ms): the
 * boundary weight found from its bits (a non-negative float's bits order as
 * its value) in three passes of counts and masses, 12, 10 and 10 bits from
 * the top, each walking its buckets best first to the one where the mass
 * reaches target; then the tokens of exactly that weight, lowest ids first,
 * until it does. The kept tokens are moved to the front (out: scratch of n
 * pairs); returns their count. */
#define RADIX_MIN 2048 /* candidates from which select_mass_radix runs */

static uint32_t key_of(float p)
{
	uint32_t k;

	memcpy(&k, &p, sizeof(k));
	return k;
}

static int select_mass_radix(struct pair *a, int n, double target, struct pair *out)
{
	static const int shift[3] = {20, 10, 0}, bits[3] = {12, 10, 10};
	uint32_t prefix = 0, mask = 0;
	double cum = 0; /* mass of the buckets better than the current one */
	int kept = 0;

	for (int r = 0; r < 3; r++) {
		int nb = 1 << bits[r], d;
		int *count = calloc((size_t)nb, sizeof(int));
		double *mass = calloc((size_t)nb, sizeof(double));

		if (!count || !mass) {
			free(count), free(mass);
			return select_mass(a, n, target);
		}
		for (int i = 0; i < n; i++) {
			uint32_t k = key_of(a[i].p);

			if ((k & mask) == prefix) {
				d = (int)(k >> shift[r]) & (nb - 1);
				count[d]++;
				mass[d] += a[i].p;
			}
		}
		for (d = nb - 1; d >= 0; d--) {
			if (count[d] && cum + mass[d] >= target)
				break;
			cum += mass[d];
		}
		free(count), free(mass);
		if (d < 0) /* (rounding: the whole mass fell short of it) */
			return n;
		prefix |= (uint32_t)d << shift[r];
		mask |= (uint32_t)(nb - 1) << shift[r];
	}
	/* prefix: the boundary weight's bits; better ones all kept */
	for (int i = 0; i < n; i++)
		if (key_of(a[i].p) > prefix)
			out[kept++] = a[i];
	for (int i = 0; i < n && cum < target; i++)
		if (key_of(a[i].p) == prefix) { /* in id order, as a is */
			out[kept++] = a[i];
			cum += a[i].p;
		}
	memcpy(a, out, sizeof(*a) * (size_t)kept);
	return kept;
}

/*
 * Weights w = exp((logit - max) / T) (cpu/ coli_exp_scaled: within 2 ulp of
 * expf, the same bits on every ISA), made a block of SBLK at a time into a
 * buffer on the stack, never for the whole vocabulary at once (a 600 KB
 * buffer a token cost page faults). Without top-k and top-p: every block's
 * sum (eight independent partial sums, folded in a fixed order), a draw over
 * the blocks, then over the chosen block's weights made again: O(vocab), no
 * sort, no copy. With top-k or top-p only the tokens that can be kept are
 * looked at: those whose logit reaches the k-th largest block maximum (at
 * least k tokens do: top-k's first try), or is within d * T of the max
 * (w >= e^-d), d doubled until they hold the top-k (by count) or the top-p
 * nucleus (by mass); blocks whose max is below that are skipped whole.
 * Among those candidates top-k selects its k best (quickselect), top-p the
 * shortest best-first prefix reaching its mass (the same quickselect steered
 * by mass): the kept set and its probabilities are those of a full
 * descending sort (ties to the lower id), since every token left out is
 * worse than every candidate. The draw walks the kept set in whatever order
 * it is left. The per-block passes (maxima, sums) run over the engine's pool
 * in coli generate (coli_sampler_pick_pool); every draw reads them in block
 * order, so the ids are the single thread's.
 * `coli bench kernels` times it (152k logits shaped like a trained model's;
 * the dev VM, mean us a pick before -> after this form: T 0.8 236 -> 166,
 * top-p 0.9 1816 -> 273, top-k 40 1588 -> 153, top-k 50 top-p 0.95 1558 ->
 * 88). Near-uniform logits (an untrained model) keep a nucleus of tens of
 * thousands: from RADIX_MIN candidates top-p finds its boundary by the
 * weights' bits instead (select_mass_radix; 152k uniform logits, top-p 0.9:
 * 1.16-1.38 -> 0.64-0.91 ms on this VM, one thread).
 */
#define SBLK 256 /* weights per block */

/* Blocks of a vocabulary of `vocab`, and the tokens in block b (the last
 * may be short). */
static int n_blocks(int vocab)
{
	return (vocab + SBLK - 1) / SBLK;
}

static int block_len(int vocab, int b)
{
	return vocab - b * SBLK < SBLK ? vocab - b * SBLK : SBLK;
}

/* A uniform draw in [0, sum). */
static double uniform(struct coli_sampler *s, double sum)
{
	return (double)(splitmix64(&s->state) >> 11) * (1.0 / 9007199254740992.0) * sum;
}

/* w[0..n) = the weights of x[0..n); returns their sum */
static double block_weights(const float *x, int n, float m, float inv_t, float *w)
{
	double a[8] = {0};
	int i = 0;

	coli_exp_scaled(x, n, m, inv_t, w);
	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			a[j] += w[i + j];
	for (; i < n; i++)
		a[i & 7] += w[i];
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* The largest of x[0..n), NaNs never (-inf if none): eight independent
 * maxima, so the loop is vector compares, not one chain. */
static float block_max(const float *x, int n)
{
	float a[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
	              -INFINITY, -INFINITY, -INFINITY, -INFINITY};
	int i = 0;

	for (; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			a[j] = x[i + j] > a[j] ? x[i + j] : a[j];
	for (; i < n; i++)
		a[0] = x[i] > a[0] ? x[i] : a[0];
	for (int j = 1; j < 8; j++)
		a[0] = a[j] > a[0] ? a[j] : a[0];
	return a[0];
}

/* The per-block passes, over a thread pool when there is one: each block's
 * largest logit (bmax != NULL; NaNs never the largest), or its weights' sum
 * (bs != NULL). The draws read them in block order: the same ids with or
 * without a pool. */
struct blocks {
	const float *logits;
	int vocab;
	float m, inv_t;
	float *bmax;
	double *bs;
};

static void blocks_run(void *arg, int task, int n_tasks)
{
	const struct blocks *j = arg;
	const int nb = n_blocks(j->vocab);
	float w[SBLK];

	for (int b = nb * task / n_tasks; b < nb * (task + 1) / n_tasks; b++) {
		const float *l = j->logits + (size_t)b * SBLK;
		int n = block_len(j->vocab, b);

		if (j->bs) {
			j->bs[b] = block_weights(l, n, j->m, j->inv_t, w);
			continue;
		}
		j->bmax[b] = block_max(l, n);
	}
}

static void blocks(coli_cpu_pool_t *pool, struct blocks *j)
{
	int t = pool ? coli_cpu_pool_threads(pool) : 1;

	if (t > 1)
		coli_cpu_pool_run(pool, blocks_run, j, t);
	else
		blocks_run(j, 0, 1);
}

/* Temperature only: the draw over every token; bs: each block's sum. */
static int draw_all(struct coli_sampler *s, const float *logits, int vocab, float m, float inv_t,
                    const double *bs)
{
	int nb = n_blocks(vocab), b, id;
	double sum = 0, r, acc = 0;
	float w[SBLK];

	for (b = 0; b < nb; b++)
		sum += bs[b];
	r = uniform(s, sum);
	for (b = 0; b < nb - 1 && r >= acc + bs[b]; b++)
		acc += bs[b];
	while (b > 0 && bs[b] == 0) /* (r rounding past the last block with mass) */
		b--;
	int n = block_len(vocab, b), last = -1;

	coli_exp_scaled(logits + (size_t)b * SBLK, n, m, inv_t, w);
	for (id = 0; id < n; id++) { /* (r rounding past the block: its last with mass) */
		if (w[id] > 0)
			last = id;
		acc += w[id];
		if (r < acc && w[id] > 0)
			break;
	}
	if (id == n) /* a banned token (weight 0) is never the fallback */
		id = last >= 0 ? last : n - 1;
	return b * SBLK + id;
}

/* The candidates of top-k / top-p: the tokens of logit >= th, with their
 * weights, into pr (room for vocab); bmax: each block's largest logit. */
static int gather(const float *logits, int vocab, const float *bmax, float th, float m, float inv_t,
                  struct pair *pr)
{
	int nb = n_blocks(vocab), c = 0;
	float x[SBLK + 16], w[SBLK + 16];
	int ids[SBLK + 1];

	for (int b = 0; b < nb; b++) {
		const float *l = logits + (size_t)b * SBLK;
		int n = block_len(vocab, b), k = 0;

		if (!(bmax[b] >= th))
			continue;
		for (int i = 0; i < n; i++) { /* branch-free: a store each, kept or not */
			x[k] = l[i], ids[k] = b * SBLK + i;
			k += l[i] >= th;
		}
		for (int i = k; i < (k + 15) / 16 * 16; i++)
			x[i] = m; /* whole vectors (the tail's scalar path is slower) */
		coli_exp_scaled(x, (k + 15) / 16 * 16, m, inv_t, w);
		for (int i = 0; i < k; i++)
			pr[c++] = (struct pair){w[i], ids[i]};
	}
	return c;
}

/* The k-th largest of the nb block maxima (k <= nb): at least k tokens have
 * a logit >= it, so top-k's tokens all do. */
static float kth_block_max(const float *bmax, int nb, int k)
{
	struct pair *a = malloc(sizeof(*a) * (size_t)nb);
	float v;

	if (!a)
		return -INFINITY;
	for (int b = 0; b < nb; b++)
		a[b] = (struct pair){bmax[b], b};
	select_best(a, nb, k);
	v = a[0].p;
	for (int i = 1; i < k; i++)
		v = a[i].p < v ? a[i].p : v;
	free(a);
	return v;
}

/* top-k and/or top-p: bmax, each block's largest logit; bs (top-p alone:
 * the nucleus is a share of every token's mass), each block's sum. */
static int draw_kept(struct coli_sampler *s, const float *logits, int vocab, float m, float inv_t,
                     const float *bmax, const double *bs)
{
	const int nb = n_blocks(vocab), top_k = s->top_k > 0 && s->top_k < vocab;
	const int top_p = s->top_p > 0 && s->top_p < 1;
	double all = 0, sum = 0, r, acc = 0, d = 8;
	struct pair *pr = malloc(sizeof(*pr) * (size_t)vocab);
	float th;
	int n, id;

	if (!pr)
		return coli_argmax(logits, vocab);
	for (int b = 0; bs && b < nb; b++)
		all += bs[b];
	/* first try: top-k's from the block maxima (the k-th largest), else the
	 * tokens within 8 T of the max (w >= e^-8); then d doubles */
	th = top_k && s->top_k <= nb ? kth_block_max(bmax, nb, s->top_k)
	                             : m - (float)d * s->temperature;
	for (;; d *= 2, th = d > 256 ? -INFINITY : m - (float)d * s->temperature) {
		/* (d past the float range of w: every token; a NaN logit never) */
		n = gather(logits, vocab, bmax, th, m, inv_t, pr);
		if (top_k && n < s->top_k && th > -INFINITY)
			continue;
		if (top_k) {
			select_best(pr, n, s->top_k);
			n = s->top_k < n ? s->top_k : n;
			sum = mass_of(pr, 0, n);
		} else {
			sum = all;
		}
		/* with top-k the nucleus is a prefix of the top-k, all here */
		if (top_p && !top_k && th > -INFINITY &&
		    mass_of(pr, 0, n) < s->top_p * sum * (1 + 1e-9))
			continue;
		break;
	}
	if (top_p) {
		struct pair *out =
		    n >= RADIX_MIN && !top_k ? malloc(sizeof(*pr) * (size_t)n) : NULL;

		n = out ? select_mass_radix(pr, n, s->top_p * sum, out)
		        : select_mass(pr, n, s->top_p * sum);
		free(out);
		sum = mass_of(pr, 0, n);
	}
	r = uniform(s, sum);
	id = coli_argmax(logits, vocab); /* r rounding past the last: the last with mass */
	for (int i = n - 1; i >= 0; i--)
		if (pr[i].p > 0) {
			id = pr[i].i;
			break;
		}
	for (int i = 0; i < n; i++) {
		acc += pr[i].p;
		if (r < acc) {
			id = pr[i].i;
			break;
		}
	}
	free(pr);
	return id;
}

static int draw(struct coli_sampler *s, const float *logits, int vocab, coli_cpu_pool_t *pool)
{
	const int nb = n_blocks(vocab), top_k = s->top_k > 0 && s->top_k < vocab;
	const int top_p = s->top_p > 0 && s->top_p < 1;
	double bs_stack[1024], *bs = bs_stack;
	float bmax_stack[1024], *bmax = bmax_stack, m = -INFINITY;
	int id;

	if (s->temperature <= 0)
		return coli_argmax(logits, vocab);
	if (nb > 1024) {
		bs = malloc(sizeof(*bs) * (size_t)nb);
		bmax = malloc(sizeof(*bmax) * (size_t)nb);
		if (!bs || !bmax) {
			free(bs), free(bmax);
			return coli_argmax(logits, vocab);
		}
	}
	struct blocks j = {logits, vocab, 0, 1.0f / s->temperature, bmax, NULL};

	blocks(pool, &j);
	for (int b = 0; b < nb; b++)
		m = bmax[b] > m ? bmax[b] : m;
	if (m == -INFINITY) /* every logit NaN or -inf: coli_argmax's pick */
		m = logits[coli_argmax(logits, vocab)];
	j.m = m;
	j.bmax = NULL, j.bs = bs; /* the sums, where every token's mass counts */
	if (!top_k)
		blocks(pool, &j);
	id = top_k || top_p ? draw_kept(s, logits, vocab, m, j.inv_t, bmax, top_k ? NULL : bs)
	                    : draw_all(s, logits, vocab, m, j.inv_t, bs);
	if (bs != bs_stack)
		free(bs), free(bmax);
	return id;
}

double coli_sampler_lse(const float *logits, int vocab, coli_cpu_pool_t *pool)
{
	const int nb = n_blocks(vocab);
	double bs_stack[1024], *bs = bs_stack, sum = 0;
	float bmax_stack[1024], *bmax = bmax_stack, m = -INFINITY;

	if (nb > 1024) {
		bs = malloc(sizeof(*bs) * (size_t)nb);
		bmax = malloc(sizeof(*bmax) * (size_t)nb);
		if (!bs || !bmax) {
			free(bs), free(bmax);
			return NAN;
		}
	}
	struct blocks j = {logits, vocab, 0, 1.0f, bmax, NULL};

	blocks(pool, &j);
	for (int b = 0; b < nb; b++)
		m = bmax[b] > m ? bmax[b] : m;
	if (m > -INFINITY && m < INFINITY) {
		j.m = m;
		j.bmax = NULL, j.bs = bs;
		blocks(pool, &j);
		for (int b = 0; b < nb; b++)
			sum += bs[b];
	}
	if (bs != bs_stack)
		free(bs), free(bmax);
	return m > -INFINITY && m < INFINITY ? m + log(sum) : m;
}

void coli_sampler_logprobs(const float *logits, int vocab, float *lp)
{
	double lse = coli_sampler_lse(logits, vocab, NULL);

	for (int i = 0; i < vocab; i++)
		lp[i] = (float)((double)logits[i] - lse);
}

/* s->out's logprobs for the token id drawn from logits[vocab] (the raw ones). */
void coli_sampler_report(struct coli_sampler *s, const float *logits, int vocab, int id,
                         coli_cpu_pool_t *pool)
{
	struct coli_sample_out *o = &s->out;
	int n = s->logprobs, k = 0;
	float worst = -INFINITY; /* the list's last, once full */
	double lse;

	o->id = id;
	o->n_top = 0;
	if (n < 0)
		return;
	n = n > COLI_SAMPLER_MAX_TOP ? COLI_SAMPLER_MAX_TOP : n;
	n = n > vocab ? vocab : n;
	lse = coli_sampler_lse(logits, vocab, pool);
	o->logprob = (float)((double)logits[id] - lse);
	for (int i = 0; n && i < vocab; i++) { /* the list best first: ties keep the lower id */
		float v = logits[i];
		int j;

		if (!(v > worst) && k == n) /* (NaN never enters) */
			continue;
		if (v != v)
			continue;
		j = k < n ? k++ : n - 1;
		while (j > 0 && v > logits[o->top_id[j - 1]]) {
			o->top_id[j] = o->top_id[j - 1];
			j--;
		}
		o->top_id[j] = i;
		worst = logits[o->top_id[k - 1]];
	}
	for (int i = 0; i < k; i++)
		o->top_logprob[i] = (float)((double)logits[o->top_id[i]] - lse);
	o->n_top = k;
}

/* The request's steps first (sampler_proc.c: penalties, bias, min_p into
 * s->work), the draw over what they made, then the logprobs from the raw
 * logits. */
int coli_sampler_pick_pool(struct coli_sampler *s, const float *logits, int vocab,
                           coli_cpu_pool_t *pool)
{
	const float *l = coli_sampler_process(s, logits, vocab);
	int id;

	if (!l) /* out of memory for the processed copy: the raw logits' argmax */
		id = coli_argmax(logits, vocab);
	else
		id = draw(s, l, vocab, pool);
	coli_sampler_report(s, logits, vocab, id, pool);
	return id;
}

int coli_sampler_pick(struct coli_sampler *s, const float *logits, int vocab)
{
	return coli_sampler_pick_pool(s, logits, vocab, NULL);
}
