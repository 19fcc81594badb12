/*
 * tests/io/container_roundtrip.c — write the synthetic container through the
 * writer API, reopen it, and check that every section, tensor and slab byte
 * round-trips, offsets follow the documented layout, and verify passes.
 *
 * Also the helper the CLI test uses (no coli convert on this branch):
 *   container_roundtrip --write PATH [--small]   write the synthetic file and
 *   print "slab LAYER E OFFSET" / "tensor NAME OFFSET" lines.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "io/synth.h"

static int g_fail;
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond);                 \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			g_fail = 1;                                                                \
		}                                                                                  \
	} while (0)

static int write_mode(const char *path, int small)
{
	coli_container_t *c;
	int rc = synth_write(path, small);

	if (rc || (rc = coli_io_container_open(path, &c))) {
		fprintf(stderr, "%s\n", coli_io_errmsg());
		return 1;
	}
	for (int i = 0; i < coli_io_container_n_tensors(c); i++)
		printf("tensor %s %llu\n", coli_io_container_tensor(c, i)->name,
		       (unsigned long long)coli_io_container_tensor(c, i)->offset);
	for (int i = 0; i < coli_io_container_n_expert_layers(c); i++)
		for (uint32_t e = 0; e < coli_io_container_expert_layer(c, i)->n_experts; e++)
			printf("slab %u %u %llu\n", coli_io_container_expert_layer(c, i)->layer, e,
			       (unsigned long long)coli_io_container_slab_offset(c, i, e));
	coli_io_container_close(c);
	return 0;
}

static int byte_mismatch(const unsigned char *p, uint32_t id, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		if (p[i] != synth_byte(id, i))
			return 1;
	return 0;
}

struct prog {
	uint64_t last, total;
	int calls, backwards;
};

static void on_progress(void *arg, uint64_t done, uint64_t total)
{
	struct prog *p = arg;

	p->backwards |= done < p->last;
	p->last = done;
	p->total = total;
	p->calls++;
}

static void check_sections(coli_container_t *c)
{
	size_t n;

	for (int i = 0; i < SYNTH_N_SECTIONS; i++) {
		const void *s = coli_io_container_section(c, g_synth_sections[i].kind, &n);

		CHECK(s && n == strlen(g_synth_sections[i].text) &&
		          !memcmp(s, g_synth_sections[i].text, n),
		      "section %d", (int)g_synth_sections[i].kind);
	}
	CHECK(!coli_io_container_section(c, COLI_SECTION_TOKENIZER_CONFIG, &n),
	      "unset section present");
}

static void check_tensors(coli_container_t *c)
{
	CHECK(coli_io_container_n_tensors(c) == SYNTH_N_TENSORS, "n_tensors %d",
	      coli_io_container_n_tensors(c));
	for (int i = 0; i < SYNTH_N_TENSORS; i++) {
		const struct coli_tensor_info *t =
		    coli_io_container_find(c, g_synth_tensors[i].name);

		CHECK(t && t == coli_io_container_tensor(c, i), "find %s", g_synth_tensors[i].name);
		if (!t)
			continue;
		CHECK(t->dtype == g_synth_tensors[i].dtype && t->ndim == g_synth_tensors[i].ndim &&
		          !memcmp(t->shape, g_synth_tensors[i].shape, sizeof(t->shape)),
		      "%s dtype/shape", t->name);
		CHECK(t->bytes == g_synth_tensors[i].bytes, "%s bytes %llu", t->name,
		      (unsigned long long)t->bytes);
		{
			size_t rows = 1;

			for (int d = 0; d < t->ndim - 1; d++)
				rows *= t->shape[d];
			CHECK(t->bytes ==
			          coli_dtype_mat_bytes(t->dtype, rows, t->shape[t->ndim - 1]),
			      "%s: container bytes differ from coli_dtype_mat_bytes", t->name);
		}
		CHECK(t->offset % 64 == 0, "%s offset %llu", t->name,
		      (unsigned long long)t->offset);
		CHECK(!byte_mismatch(coli_io_container_tensor_data(c, t), (uint32_t)i, t->bytes),
		      "%s bytes differ", t->name);
		CHECK(t->xxh64 == coli_io_xxh64(coli_io_container_tensor_data(c, t), t->bytes),
		      "%s xxh64", t->name);
	}
	CHECK(!coli_io_container_find(c, "nope") && !coli_io_container_tensor(c, -1) &&
	          !coli_io_container_tensor(c, SYNTH_N_TENSORS),
	      "out-of-range lookups");
}

static void check_layers(coli_container_t *c)
{
	uint64_t prev_end = 0;

	CHECK(coli_io_container_n_expert_layers(c) == SYNTH_N_LAYERS, "n layers");
	CHECK(!coli_io_container_experts_of(c, 0), "layer 0 is dense");
	for (int i = 0; i < SYNTH_N_LAYERS; i++) {
		const struct coli_expert_layer *l = coli_io_container_expert_layer(c, i);
		struct coli_expert_layer want = g_synth_layers[i];

		CHECK(l && l == coli_io_container_experts_of(c, want.layer), "layer %d", i);
		if (!l)
			continue;
		coli_io_slab_layout(&want);
		CHECK(l->n_experts == want.n_experts && l->dtype == want.dtype &&
		          coli_io_expert_down_dtype(l) == coli_io_expert_down_dtype(&want) &&
		          l->hidden == want.hidden && l->inter == want.inter &&
		          l->slab_bytes == want.slab_bytes && l->up_off == want.up_off &&
		          l->down_off == want.down_off && l->gate_off == 0,
		      "layer %u geometry", l->layer);
		CHECK(l->slab_bytes % COLI_SLAB_ALIGN == 0 && l->offset % COLI_SLAB_ALIGN == 0 &&
		          l->up_off % 64 == 0 && l->down_off % 64 == 0,
		      "layer %u alignment", l->layer);
		CHECK(l->offset >= prev_end, "layers in order");
		for (uint32_t e = 0; e < l->n_experts; e++) {
			const unsigned char *p = coli_io_container_slab_data(c, i, e);

			CHECK(coli_io_container_slab_offset(c, i, e) ==
			          l->offset + e * l->slab_bytes,
			      "slab offset (%u, %u)", l->layer, e);
			CHECK(p && !byte_mismatch(p, SYNTH_SLAB_ID(i, e), l->slab_bytes),
			      "slab (%u, %u) bytes differ", l->layer, e);
			CHECK(coli_io_container_slab_xxh64(c, i, e) ==
			          coli_io_xxh64(p, l->slab_bytes),
			      "slab (%u, %u) xxh64", l->layer, e);
		}
		prev_end = l->offset + l->n_experts * l->slab_bytes;
		CHECK(!coli_io_container_slab_data(c, i, l->n_experts), "slab past n_experts");
	}
	/* the expert region is last */
	CHECK(prev_end == coli_io_container_file_bytes(c), "expert region ends the file");
	/* slab layout formula: q8_0 hidden 64 inter 32 -> gate 2048 + 128 bytes */
	CHECK(coli_io_container_expert_layer(c, 0)->up_off == 2176, "q8 up_off");
}

static int no_temp_left(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int found = 0;

	while (d && (de = readdir(d)))
		found |= strstr(de->d_name, ".tmp.") != NULL;
	if (d)
		closedir(d);
	return !found;
}

int main(int argc, char **argv)
{
	const char *path = "roundtrip.coli";
	struct prog p = {0};
	coli_container_t *c;
	int rc;

	if (argc >= 3 && !strcmp(argv[1], "--write"))
		return write_mode(argv[2], argc >= 4 && !strcmp(argv[3], "--small"));
	rc = synth_write(path, 0);
	if (rc) {
		fprintf(stderr, "write: %s\n", coli_io_errmsg());
		return 1;
	}
	CHECK(no_temp_left("."), "a temporary file is left behind");
	rc = coli_io_container_open(path, &c);
	if (rc) {
		fprintf(stderr, "open: %s\n", coli_io_errmsg());
		return 1;
	}
	CHECK(!strcmp(coli_io_container_path(c), path), "path");
	CHECK(coli_io_container_fd(c) >= 0, "fd");
	check_sections(c);
	check_tensors(c);
	check_layers(c);
	rc = coli_io_container_verify(c, on_progress, &p);
	CHECK(rc == 0, "verify: %s", coli_io_errmsg());
	CHECK(p.calls >= 2 && !p.backwards && p.last == p.total && p.total > 0,
	      "progress calls %d last %llu total %llu", p.calls, (unsigned long long)p.last,
	      (unsigned long long)p.total);
	CHECK(coli_io_container_verify(c, NULL, NULL) == 0, "verify without progress");
	coli_io_container_close(c);

	/* a second commit over an existing file replaces it */
	rc = synth_write(path, 1);
	CHECK(rc == 0, "rewrite: %s", coli_io_errmsg());
	rc = coli_io_container_open(path, &c);
	CHECK(rc == 0 && coli_io_container_n_tensors(c) == 2, "reopen small: %s", coli_io_errmsg());
	if (!rc)
		coli_io_container_close(c);
	if (!g_fail)
		printf("roundtrip ok: %d tensors, %d expert layers, every byte checked\n",
		       SYNTH_N_TENSORS, SYNTH_N_LAYERS);
	return g_fail;
}
