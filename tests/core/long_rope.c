/*
 * tests/core/long_rope.c — RoPE scaling at long positions against transformers.
 *
 * Each tests/fixtures/long/NAME/ holds a config.json (a primary fixture's with
 * RoPE scaling: YaRN or linear, either dialect) and transformers' float32
 * logits at a few positions of an 8192-token prompt (ref/logits_at.f32,
 * ref/meta.json; tools/ref/make_fixtures.py write_long). The checkpoint is the
 * primary's weights with that config, put together in a temporary directory,
 * converted to bf16 and opened with the default --ctx — the model's trained
 * length, which must hold the prompt (8192 from original * factor or
 * max_position_embeddings * factor, not max_position_embeddings). Every
 * reference position must be within 1e-3 * max|ref logit| (DESIGN.md's bf16
 * bound), on the CPU; for qwen3_moe_yarn also with the dense part on the
 * simulated device (the prompt's first quarter, the positions in it: the
 * cost is quadratic) and, when there is one, every fixture on GPU 0 (the device
 * folds YaRN's cos/sin factor into its softmax scale: core/forward/attn_dev.c;
 * partial RoPE under YaRN stays on the CPU). meta.json also says how far plain
 * RoPE moves these logits (0.41 to 0.52 here), far past the tolerance (0.03):
 * a scaling read wrong fails. About 4 s a forward on one core of the CI kind.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <sys/stat.h>

#include "fixture_util.h"
#include "ptx/ptx.h"

#define MAX_POS 32

struct longfx {
	char name[64], primary[64];
	int n, pos[MAX_POS], n_pos;
};

static int read_meta(const char *name, struct longfx *L)
{
	char p[4096];
	json_error_t je;
	json_t *m, *a, *v;
	size_t i;

	snprintf(p, sizeof(p), "%s/long/%s/ref/meta.json", fx_root(), name);
	m = json_load_file(p, 0, &je);
	if (!m)
		return -1;
	snprintf(L->name, sizeof(L->name), "%s", name);
	snprintf(L->primary, sizeof(L->primary), "%s",
	         json_string_value(json_object_get(m, "primary")) ?: "");
	L->n = (int)json_integer_value(json_object_get(m, "n_tokens"));
	a = json_object_get(m, "positions");
	L->n_pos = 0;
	json_array_foreach(a, i, v) if (L->n_pos < MAX_POS) L->pos[L->n_pos++] =
	    (int)json_integer_value(v);
	json_decref(m);
	return L->primary[0] && L->n > 0 && L->n_pos > 0 ? 0 : -1;
}

/* tmp/NAME/: the primary's files as links, the long fixture's config.json. */
static int assemble(const struct longfx *L, const char *tmp, char *dir, size_t len)
{
	static const char *const files[] = {"model.safetensors", "tokenizer.json",
	                                    "tokenizer_config.json", "generation_config.json"};
	char src[16384], dst[16384], root[4096] = "";
	FILE *in, *out;
	int c;

	if (fx_root()[0] != '/' && !getcwd(root, sizeof(root) - 1))
		return -1;
	if (fx_root()[0] != '/')
		strcat(root, "/");
	snprintf(dir, len, "%s/%s", tmp, L->name);
	mkdir(dir, 0755);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(src, sizeof(src), "%s%s/%s/%s", root, fx_root(), L->primary, files[i]);
		snprintf(dst, sizeof(dst), "%s/%s", dir, files[i]);
		unlink(dst);
		if (symlink(src, dst))
			return -1;
	}
	snprintf(src, sizeof(src), "%s/long/%s/config.json", fx_root(), L->name);
	snprintf(dst, sizeof(dst), "%s/config.json", dir);
	in = fopen(src, "rb");
	out = fopen(dst, "wb");
	if (!in || !out) {
		if (in)
			fclose(in);
		if (out)
			fclose(out);
		return -1;
	}
	while ((c = fgetc(in)) != EOF)
		fputc(c, out);
	fclose(in);
	return fclose(out) ? -1 : 0;
}

/* The logits at every position of ids on device `gpu`; the default --ctx. */
static int run(const char *path, const char *gpu, const int *ids, int n, float *out, int *ctx)
{
	struct coli_opts o;
	coli_engine_t *e;
	char err[512];
	int rc;

	coli_opts_init(&o, NULL, 0);
	o.threads = 2;
	snprintf(o.gpu, sizeof(o.gpu), "%s", gpu);
	rc = coli_engine_open(path, &o, &e, err, sizeof(err));
	if (rc) {
		printf("open %s (--gpu %s): %s\n", path, gpu, err);
		return rc;
	}
	*ctx = coli_engine_ctx(e);
	rc = *ctx < n ? -E2BIG : coli_engine_forward(e, ids, n, out, 1);
	coli_engine_close(e);
	return rc;
}

/* The first n tokens of the prompt on `gpu`, against the references at the
 * positions below n. */
static int check(const struct longfx *L, const char *coli, const char *gpu, int n)
{
	size_t nref;
	char file[128];
	float *ref, *got;
	int *ids = malloc(sizeof(int) * (size_t)n), V, ctx = 0, bad = 0, done = 0;
	double worst = 0, maxref = 0;

	snprintf(file, sizeof(file), "long/%s", L->name);
	ref = fx_read_floats(file, "logits_at.f32", &nref);
	if (!ref || !ids || nref % (size_t)L->n_pos) {
		printf("%s: unreadable references\n", L->name);
		return 1;
	}
	V = (int)(nref / (size_t)L->n_pos);
	for (int i = 0; i < n; i++) /* tools/ref/make_fixtures.py long_ids */
		ids[i] = (int)((7919ll * i + 13) % 1021);
	got = malloc(sizeof(float) * (size_t)n * V);
	for (size_t i = 0; got && i < (size_t)n * V; i++)
		got[i] = NAN; /* poison */
	if (!got || run(coli, gpu, ids, n, got, &ctx)) {
		printf("%s --gpu %s: forward of %d tokens failed (default ctx %d)\n", L->name, gpu,
		       n, ctx);
		return 1;
	}
	for (int k = 0; k < L->n_pos; k++) {
		const float *r = ref + (size_t)k * V, *g = got + (size_t)L->pos[k] * V;
		double mr = 0, md = 0;

		if (L->pos[k] >= n)
			continue;
		done++;
		for (int v = 0; v < V; v++) {
			double d = fabs((double)g[v] - r[v]);

			mr = fabs(r[v]) > mr ? fabs(r[v]) : mr;
			md = d > md || d != d ? (d != d ? INFINITY : d) : md;
		}
		if (!(md <= 1e-3 * mr)) {
			printf("%s --gpu %s: position %d: max|d| %.3g > 1e-3 * %.3g\n", L->name,
			       gpu, L->pos[k], md, mr);
			bad = 1;
		}
		worst = md > worst ? md : worst;
		maxref = mr > maxref ? mr : maxref;
	}
	printf("%-18s --gpu %-3s ctx %d: %d positions of %d, max|d| %.3g, max|ref| %.3g, ratio "
	       "%.2g\n",
	       L->name, gpu, ctx, done, n, worst, maxref, worst / maxref);
	free(ids), free(ref), free(got);
	return bad;
}

int main(void)
{
	static const char *const names[] = {"qwen3_moe_yarn", "qwen3_moe_linear", "glm4_moe_yarn"};
	const char *why;
	int gpu = coli_ptx_probe(&why) > 0, rc = 0;

	for (size_t f = 0; f < sizeof(names) / sizeof(names[0]); f++) {
		struct longfx L;
		char dir[4096], path[8192], err[512];
		struct coli_convert_opts o;

		if (read_meta(names[f], &L)) {
			printf("%s: no %s/long/%s/ref/meta.json\n", names[f], fx_root(), names[f]);
			return 1;
		}
		if (assemble(&L, fx_tmpdir(), dir, sizeof(dir))) {
			printf("%s: cannot put the checkpoint together under %s\n", L.name,
			       fx_tmpdir());
			return 1;
		}
		snprintf(path, sizeof(path), "%s.bf16.coli", dir);
		coli_convert_opts_init(&o);
		o.hf_dir = dir;
		o.out_path = path;
		o.quant = COLI_DTYPE_BF16;
		if (access(path, F_OK) && coli_convert(&o, err, sizeof(err))) {
			printf("convert %s: %s\n", L.name, err);
			return 1;
		}
		/* the CPU; the simulated device where the dense part goes there (the
		 * device's YaRN scale: full RoPE), a GPU for every one when present */
		rc |= check(&L, path, "off", L.n);
		if (f == 0) /* the scale does not depend on the position: a quarter */
			rc |= check(&L, path, "sim", L.n / 4);
		if (gpu)
			rc |= check(&L, path, "0", L.n);
	}
	return rc;
}
