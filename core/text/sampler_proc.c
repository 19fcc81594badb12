/*
 * core/text/sampler_proc.c — what a request does to the logits before the
 * draw (core/text/sampler.c). The order and the formulas are in core/coli.h
 * above struct coli_sampler; in short:
 *
 *   l                              the model's logits [vocab]
 *   -inf where the grammar refuses constrained decoding (grammar_mask.c:
 *                                  the mask, then the end ids' bits)
 *   + bias (<= -100: -inf)         logit_bias
 *   l / r or l * r                 repetition_penalty, prompt + generated ids
 *   - c f - (c > 0) p              frequency / presence, generated ids
 *   -inf below l_max + T ln min_p  min_p (T > 0)
 *
 * (vLLM's order: bias, then the penalties, then temperature and min_p before
 * top-k and top-p.)
 *
 * The sequence's history is one uint32_t per token id (bit 31: in the
 * prompt, bits 0-30: times generated) and the list of ids seen, so the
 * penalties touch only those ids, not the vocabulary: a token costs one
 * copy of the logits into s->work plus O(ids seen + biases); min_p one max
 * and one pass more; a grammar its mask (the trie walk; none when the state
 * is the last mask's up to what no step tells apart: inside an unbounded
 * string, every token after the first), applied as the copy is made. The
 * grammar's state advances by each accepted token's bytes; a token it
 * refuses (none is offered: only a caller's own pick) leaves it dead, and
 * then only the end ids are allowed. Nothing is allocated or copied when every step is off:
 * the draw then reads the engine's logits as before.
 *
 * The logprobs it reports are sampler.c's (coli_sampler_report: the
 * log-softmax of the raw logits over the draw's block passes, and the top n
 * by one pass keeping a sorted list, best first, ties to the lower id).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_internal.h"
#include "core/text/grammar_internal.h"

#define IN_PROMPT 0x80000000u
#define COUNT     0x7fffffffu

void coli_sampler_init(struct coli_sampler *s, float temperature, float top_p, int top_k,
                       uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	s->temperature = temperature;
	s->top_p = top_p;
	s->top_k = top_k;
	s->seed = seed;
	s->state = seed;
	s->repetition_penalty = 1;
	s->logprobs = -1;
	s->out.id = -1;
}

static int penalized(const struct coli_sampler *s)
{
	return s->repetition_penalty != 1 || s->presence_penalty != 0 || s->frequency_penalty != 0;
}

static int processed(const struct coli_sampler *s)
{
	return penalized(s) || s->n_bias > 0 || (s->min_p > 0 && s->temperature > 0) || s->grammar;
}

int coli_sampler_needs_logits(const struct coli_sampler *s)
{
	return s->temperature > 0 || processed(s) || s->logprobs >= 0;
}

static int see(struct coli_sampler *s, int id)
{
	if (s->n_seen == s->cap_seen) {
		int cap = s->cap_seen ? 2 * s->cap_seen : 256;
		int *p = realloc(s->seen, sizeof(*p) * (size_t)cap);

		if (!p)
			return -ENOMEM;
		s->seen = p;
		s->cap_seen = cap;
	}
	s->seen[s->n_seen++] = id;
	return 0;
}

/* The grammar's state at the start of the sequence, and its mask's words. */
static int grammar_begin(struct coli_sampler *s, int vocab)
{
	if (!s->trie)
		return -ENOTSUP;                    /* no tokenizer: no bytes to constrain */
	s->gstate = malloc(2 * sizeof(*s->gstate)); /* [1]: the key of the mask in allow */
	s->allow = calloc((size_t)(vocab + 63) / 64, sizeof(*s->allow));
	if (!s->gstate || !s->allow)
		return -ENOMEM;
	coli_gstate_init(s->grammar, s->gstate);
	s->gstate[1].depth = -1; /* none yet */
	return 0;
}

int coli_sampler_begin(struct coli_sampler *s, int vocab, const int *prompt, int n_prompt)
{
	int rc;

	coli_sampler_end(s);
	s->vocab = vocab;
	if (s->grammar && (rc = grammar_begin(s, vocab))) {
		coli_sampler_end(s);
		return rc;
	}
	if (!penalized(s))
		return 0;
	s->hist = calloc((size_t)vocab, sizeof(*s->hist));
	if (!s->hist)
		return -ENOMEM;
	for (int i = 0; i < n_prompt; i++) {
		int id = prompt[i];

		if (id < 0 || id >= vocab) {
			coli_sampler_end(s);
			return -EINVAL;
		}
		if (!s->hist[id] && see(s, id)) {
			coli_sampler_end(s);
			return -ENOMEM;
		}
		s->hist[id] |= IN_PROMPT;
	}
	return 0;
}

/* The grammar's state goes on with id's bytes (an end id: nothing more). */
static void grammar_accept(struct coli_sampler *s, int id)
{
	size_t n = 0;
	const char *p = coli_vocab_trie_piece(s->trie, id, &n);

	for (int i = 0; i < s->n_end_ids; i++)
		if (s->end_ids[i] == id) {
			s->gstate->depth = 0;
			return;
		}
	if (!n) { /* a special token: the one the grammar names next, or the end */
		const char *name = coli_vocab_trie_special_name(s->trie, id);
		const char *want = coli_gstate_token(s->grammar, s->gstate);

		if (!name || !want || strcmp(name, want) ||
		    !coli_gstate_take_token(s->grammar, s->gstate))
			s->gstate->dead = 1;
		return;
	}
	for (size_t i = 0; i < n && !s->gstate->dead; i++)
		if (!coli_gstate_step(s->grammar, s->gstate, (unsigned char)p[i]))
			s->gstate->dead = 1;
}

void coli_sampler_accept(struct coli_sampler *s, int id)
{
	if (s->gstate)
		grammar_accept(s, id);
	if (!s->hist || id < 0 || id >= s->vocab)
		return;
	if (!s->hist[id] && see(s, id))
		return; /* out of memory: this token goes unpenalized */
	if ((s->hist[id] & COUNT) != COUNT)
		s->hist[id]++;
}

void coli_sampler_end(struct coli_sampler *s)
{
	free(s->hist);
	free(s->seen);
	free(s->work);
	free(s->gstate);
	free(s->allow);
	s->gstate = NULL;
	s->allow = NULL;
	s->hist = NULL;
	s->seen = NULL;
	s->work = NULL;
	s->n_seen = s->cap_seen = 0;
}

static float largest(const float *x, int n)
{
	float m = -INFINITY;

	for (int i = 0; i < n; i++)
		m = x[i] > m ? x[i] : m;
	return m;
}

void coli_sampler_apply(struct coli_sampler *s, const float *logits, int vocab, float *out)
{
	const float r = s->repetition_penalty;

	if (out != logits && !s->gstate)
		memcpy(out, logits, sizeof(*out) * (size_t)vocab);
	if (s->gstate) { /* 0. the grammar: what it refuses is -inf (the copy with it) */
		struct coli_grammar_state key;

		coli_gstate_key(s->grammar, s->gstate, &key);
		if (!coli_gstate_same(&key, &s->gstate[1])) { /* (else the last mask holds) */
			coli_grammar_mask(s->grammar, s->trie, s->gstate, s->end_ids, s->n_end_ids,
			                  s->allow, vocab);
			s->gstate[1] = key;
		}
		coli_grammar_mask_logits(s->allow, logits, out, vocab);
	}
	for (int i = 0; i < s->n_bias; i++) {
		int id = s->bias[i].id;

		if (id < 0 || id >= vocab)
			continue;
		out[id] = s->bias[i].bias <= -100 ? -INFINITY : out[id] + s->bias[i].bias;
	}
	for (int i = 0; s->hist && i < s->n_seen; i++) {
		int id = s->seen[i];
		uint32_t h, c;

		if (id >= vocab)
			continue;
		h = s->hist[id];
		c = h & COUNT;
		if (r != 1)
			out[id] = out[id] > 0 ? out[id] / r : out[id] * r;
		if (c)
			out[id] -= (float)c * s->frequency_penalty + s->presence_penalty;
	}
	if (s->min_p > 0 && s->temperature > 0) {
		/* p_i >= min_p p_max  <=>  l_i >= l_max + T ln(min_p) */
		float m = largest(out, vocab);
		float th = m + s->temperature * logf(s->min_p);

		if (m > -INFINITY)
			for (int i = 0; i < vocab; i++)
				out[i] = out[i] >= th ? out[i] : -INFINITY;
	}
}

const float *coli_sampler_process(struct coli_sampler *s, const float *logits, int vocab)
{
	if (!processed(s))
		return logits;
	if (s->work && s->vocab != vocab) {
		free(s->work);
		s->work = NULL;
	}
	if (!s->work) {
		s->work = malloc(sizeof(*s->work) * (size_t)vocab);
		if (!s->work)
			return NULL;
		s->vocab = vocab;
	}
	coli_sampler_apply(s, logits, vocab, s->work);
	return s->work;
}
