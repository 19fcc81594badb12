/*
 * core/sampler.c — choosing the next token from logits: greedy (temperature
 * 0, ties to the lowest id), or temperature + top-k + top-p sampling with a
 * seeded generator (splitmix64), so a seed reproduces a completion exactly.
 *
 * Order of the filters, as in transformers' sampling: temperature scales the
 * logits, top-k keeps the k largest, softmax, top-p keeps the smallest prefix
 * (by descending probability) whose mass reaches p, then one draw. No full
 * sort of the vocabulary (152k entries took ~25 ms a token): see
 * coli_sampler_pick. tests/core/sampler checks it against a plain reference.
 */
#include <math.h>
#include <stdlib.h>

#include "core/coli.h"
#include "cpu/cpu.h"

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void coli_sampler_init(struct coli_sampler *s, float temperature, float top_p, int top_k,
                       uint64_t seed)
{
	s->temperature = temperature;
	s->top_p = top_p;
	s->top_k = top_k;
	s->seed = seed;
	s->state = seed;
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

/*
 * Weights w = exp((logit - max) / T) in id order, one vectorized pass
 * (cpu/ coli_exp_scaled: within 2 ulp of expf, the same bits on every ISA;
 * expf took ~0.7 ms a token for 152k logits on the H200 host). Without top-k and
 * top-p the draw walks them in id order: O(vocab), no sort. top-k selects its
 * k best (quickselect), top-p the shortest best-first prefix reaching its
 * mass (the same quickselect steered by mass). Both expected O(vocab); the
 * kept set and its probabilities are those of a full descending sort (ties
 * to the lower id), the draw walks the kept set in whatever order it is left.
 */
#define SBLK 256 /* weights per block of the temperature-only draw */

/* A uniform draw in [0, sum). */
static double uniform(struct coli_sampler *s, double sum)
{
	return (double)(splitmix64(&s->state) >> 11) * (1.0 / 9007199254740992.0) * sum;
}

int coli_sampler_pick(struct coli_sampler *s, const float *logits, int vocab)
{
	struct pair *pr;
	int n = vocab, id;
	double sum = 0, r, acc = 0;
	float *w;

	if (s->temperature <= 0)
		return coli_argmax(logits, vocab);
	w = malloc(sizeof(*w) * (size_t)vocab);
	if (!w)
		return coli_argmax(logits, vocab);
	coli_exp_scaled(logits, vocab, logits[coli_argmax(logits, vocab)], 1.0f / s->temperature,
	                w);
	if (!(s->top_k > 0 && s->top_k < vocab) && !(s->top_p > 0 && s->top_p < 1)) {
		/* temperature only: walk w as it is, by blocks (independent sums, so
		 * not one long chain of dependent adds), then inside the block */
		int nb = (vocab + SBLK - 1) / SBLK, b;
		double *bs = malloc(sizeof(*bs) * (size_t)nb);

		if (!bs) {
			free(w);
			return coli_argmax(logits, vocab);
		}
		for (b = 0; b < nb; b++) {
			double t = 0;

			for (int i = b * SBLK; i < vocab && i < (b + 1) * SBLK; i++)
				t += w[i];
			bs[b] = t;
			sum += t;
		}
		r = uniform(s, sum);
		for (b = 0; b < nb - 1 && r >= acc + bs[b]; b++)
			acc += bs[b];
		for (id = b * SBLK; id < vocab - 1; id++) {
			acc += w[id];
			if (r < acc)
				break;
		}
		free(w), free(bs);
		return id;
	}
	pr = malloc(sizeof(*pr) * (size_t)vocab);
	if (!pr) {
		free(w);
		return coli_argmax(logits, vocab);
	}
	for (int i = 0; i < vocab; i++)
		pr[i] = (struct pair){w[i], i};
	free(w);
	if (s->top_k > 0 && s->top_k < vocab) {
		n = s->top_k;
		select_best(pr, vocab, n);
	}
	for (int i = 0; i < n; i++)
		sum += pr[i].p;
	if (s->top_p > 0 && s->top_p < 1) {
		n = select_mass(pr, n, s->top_p * sum);
		sum = mass_of(pr, 0, n);
	}
	r = uniform(s, sum);
	id = pr[n - 1].i; /* r rounding past the last bucket */
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
