/*
 * core/sampler.c — choosing the next token from logits: greedy (temperature
 * 0, ties to the lowest id), or temperature + top-k + top-p sampling with a
 * seeded generator (splitmix64), so a seed reproduces a completion exactly.
 *
 * Order of the filters, as in transformers' sampling: temperature scales the
 * logits, top-k keeps the k largest, softmax, top-p keeps the smallest prefix
 * (by descending probability) whose mass reaches p, then one draw.
 */
#include <math.h>
#include <stdlib.h>

#include "core/coli.h"

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

static int argmax(const float *x, int n)
{
	int best = 0;

	for (int i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

/* (scaled logit or probability, token id), sorted by descending value */
struct pair {
	float p;
	int i;
};

static int cmp_desc(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;

	if (x->p != y->p)
		return x->p < y->p ? 1 : -1;
	return x->i - y->i;
}

int coli_sampler_pick(struct coli_sampler *s, const float *logits, int vocab)
{
	struct pair *pr;
	int n;
	double sum = 0, r, acc = 0;

	if (s->temperature <= 0)
		return argmax(logits, vocab);
	pr = malloc(sizeof(*pr) * (size_t)vocab);
	if (!pr)
		return argmax(logits, vocab);
	for (int i = 0; i < vocab; i++) {
		pr[i].p = logits[i] / s->temperature;
		pr[i].i = i;
	}
	qsort(pr, (size_t)vocab, sizeof(*pr), cmp_desc);
	n = s->top_k > 0 && s->top_k < vocab ? s->top_k : vocab;
	for (int i = 0; i < n; i++) {
		pr[i].p = (float)exp((double)pr[i].p - pr[0].p);
		sum += pr[i].p;
	}
	if (s->top_p > 0 && s->top_p < 1) {
		double mass = 0;
		int keep = 0;

		while (keep < n && mass < s->top_p * sum)
			mass += pr[keep++].p;
		n = keep > 0 ? keep : 1;
		sum = mass;
	}
	r = (double)(splitmix64(&s->state) >> 11) * (1.0 / 9007199254740992.0) * sum;
	for (int i = 0; i < n; i++) {
		acc += pr[i].p;
		if (r < acc) {
			int id = pr[i].i;

			free(pr);
			return id;
		}
	}
	n = pr[n - 1].i;
	free(pr);
	return n;
}
