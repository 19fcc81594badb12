/*
 * tests/core/fixture_util.h — shared by the engine tests: find the fixture
 * checkpoints, convert one into a temporary .coli, read its references.
 *
 * A fixture is $FIXTURES/<name>/ with a Hugging Face checkpoint and ref/:
 *   ids.txt          prompt token ids, one line
 *   logits.f32       transformers' float32 teacher-forced logits [n_ids x vocab]
 *   greedy.txt       greedy continuation ids
 *   greedy_margin.txt top-1 minus top-2 logit at each greedy step
 */
#ifndef COLI_TEST_FIXTURE_UTIL_H
#define COLI_TEST_FIXTURE_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/coli.h"

#define MAX_FIXTURES 32

static inline const char *fx_root(void)
{
	const char *r = getenv("FIXTURES");

	return r ? r : "tests/fixtures";
}

/* Names of fixtures that have references, sorted. Returns the count. */
static inline int fx_list(char names[][64], int max)
{
	DIR *d = opendir(fx_root());
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max) {
		char p[4096];
		struct stat st;

		if (de->d_name[0] == '.' || strlen(de->d_name) >= 64)
			continue;
		snprintf(p, sizeof(p), "%s/%s/ref/logits.f32", fx_root(), de->d_name);
		if (stat(p, &st) == 0)
			snprintf(names[n++], 64, "%s", de->d_name);
	}
	closedir(d);
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (strcmp(names[i], names[j]) > 0) {
				char t[64];

				memcpy(t, names[i], 64);
				memcpy(names[i], names[j], 64);
				memcpy(names[j], t, 64);
			}
	return n;
}

/* Convert fixture `name` at quant q into dir/name.<q>.coli; path returned in out. */
static inline int fx_convert(const char *name, enum coli_dtype q, const char *dir, char *out,
                             size_t outlen)
{
	struct coli_convert_opts o;
	char hf[2048], err[512];
	int rc;

	if (snprintf(hf, sizeof(hf), "%s/%s", fx_root(), name) >= (int)sizeof(hf))
		return -1;
	snprintf(out, outlen, "%s/%s.%s.coli", dir, name, coli_dtype_name(q));
	if (access(out, F_OK) == 0)
		return 0;
	coli_convert_opts_init(&o);
	o.hf_dir = hf;
	o.out_path = out;
	o.quant = q;
	rc = coli_convert(&o, err, sizeof(err));
	if (rc)
		fprintf(stderr, "convert %s (%s): %s\n", name, coli_dtype_name(q), err);
	return rc;
}

/* Whitespace-separated integers from a file; malloc'd. */
static inline int *fx_read_ints(const char *name, const char *file, int *n)
{
	char p[4096];
	FILE *f;
	int cap = 64, *v = malloc(sizeof(int) * cap), x;

	snprintf(p, sizeof(p), "%s/%s/ref/%s", fx_root(), name, file);
	*n = 0;
	f = fopen(p, "r");
	if (!f || !v) {
		free(v);
		if (f)
			fclose(f);
		return NULL;
	}
	while (fscanf(f, "%d", &x) == 1) {
		if (*n == cap)
			v = realloc(v, sizeof(int) * (cap *= 2));
		v[(*n)++] = x;
	}
	fclose(f);
	return v;
}

static inline float *fx_read_floats(const char *name, const char *file, size_t *n)
{
	char p[4096];
	FILE *f;
	float *v;
	long sz;

	snprintf(p, sizeof(p), "%s/%s/ref/%s", fx_root(), name, file);
	f = fopen(p, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	sz = ftell(f);
	fseek(f, 0, SEEK_SET);
	v = malloc((size_t)sz);
	if (v && fread(v, 1, (size_t)sz, f) != (size_t)sz) {
		free(v);
		v = NULL;
	}
	fclose(f);
	*n = (size_t)sz / sizeof(float);
	return v;
}

/* Margins file holds floats as text. */
static inline float *fx_read_margins(const char *name, int *n)
{
	char p[4096];
	FILE *f;
	int cap = 64;
	float *v = malloc(sizeof(float) * cap), x;

	snprintf(p, sizeof(p), "%s/%s/ref/greedy_margin.txt", fx_root(), name);
	*n = 0;
	f = fopen(p, "r");
	if (!f) {
		free(v);
		return NULL;
	}
	while (fscanf(f, "%f", &x) == 1) {
		if (*n == cap)
			v = realloc(v, sizeof(float) * (cap *= 2));
		v[(*n)++] = x;
	}
	fclose(f);
	return v;
}

static inline const char *fx_tmpdir(void)
{
	const char *t = getenv("TEST_TMP");

	return t ? t : "/tmp";
}

/* Index of the largest of x[n] (ties: the lowest), the greedy token. */
static inline int fx_argmax(const float *x, int n)
{
	int b = 0;

	for (int i = 1; i < n; i++)
		if (x[i] > x[b])
			b = i;
	return b;
}

#endif
