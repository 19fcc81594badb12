/*
 * tests/io/container_bad_input.c — every way a .coli file can be wrong that
 * the reader or verify must catch: truncation at many points, empty and junk
 * files, wrong magic, a newer version, flipped bytes in the superblock, the
 * tables, a tensor and a slab, and structural lies behind valid checksums
 * (the test re-seals the checksums after editing a field, so the structural
 * check itself is exercised). Each case checks the return code AND that the
 * message names the file and the problem.
 *
 * The test edits fields at the offsets io/io_internal.h documents.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/edit.h"
#include "io/synth.h"

#define BAD "bad.coli"

static int g_fail, g_cases;
static unsigned char *g_good;
static size_t g_n;

static int put_file(const char *path, const unsigned char *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int ok = fd >= 0 && (size_t)write(fd, p, n) == n;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/* open (and, if open_ok, verify) BAD holding p[0..n); expect rc and a message
 * "bad.coli: ...needle..." */
static void expect(const char *name, const unsigned char *p, size_t n, int at_verify, int want_rc,
                   const char *needle)
{
	coli_container_t *c = NULL;
	const char *msg;
	int rc;

	g_cases++;
	if (put_file(BAD, p, n)) {
		fprintf(stderr, "%s: cannot write %s\n", name, BAD);
		g_fail = 1;
		return;
	}
	rc = coli_io_container_open(BAD, &c);
	if (at_verify) {
		if (rc) {
			fprintf(stderr, "FAIL %s: open failed: %s\n", name, coli_io_errmsg());
			g_fail = 1;
			return;
		}
		rc = coli_io_container_verify(c, NULL, NULL);
		coli_io_container_close(c);
	} else if (!rc) {
		coli_io_container_close(c);
	}
	msg = coli_io_errmsg();
	if (rc != want_rc ||
	    (rc && (strncmp(msg, BAD ": ", strlen(BAD ": ")) || !strstr(msg, needle)))) {
		fprintf(stderr, "FAIL %s: rc %d (want %d), message '%s' (want '%s')\n", name, rc,
		        want_rc, msg, needle);
		g_fail = 1;
	} else {
		printf("ok %-34s %s\n", name, msg);
	}
}

static unsigned char *copy(void)
{
	static unsigned char *b;

	free(b);
	b = malloc(g_n + 8192);
	memcpy(b, g_good, g_n);
	return b;
}

static unsigned char *sec_entry(unsigned char *b, uint32_t kind)
{
	unsigned char *e = edit_sec_entry(b, kind);

	if (!e) {
		fprintf(stderr, "no section %u\n", kind);
		exit(1);
	}
	return e;
}

static unsigned char *section(unsigned char *b, uint32_t kind)
{
	return b + le64(sec_entry(b, kind) + SE_OFFSET);
}

static unsigned char *tensor_entry(unsigned char *b, int i)
{
	return section(b, CT_SECTION_TENSORS) + CT_TENSOR_ENTRY * i;
}

static unsigned char *layer_entry(unsigned char *b, int i)
{
	return section(b, CT_SECTION_EXPERT_LAYERS) + CT_LAYER_ENTRY * i;
}

static void truncations(void)
{
	uint64_t dense = le64(g_good + SB_DENSE_OFF), experts = le64(g_good + SB_EXPERT_OFF);
	size_t cuts[] = {1, 7, 12, 100, 4095, 4096, 4097, dense + 10, experts + 5000, g_n - 1};
	char name[64];

	expect("empty file", g_good, 0, 0, -EBADMSG, "empty file");
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		snprintf(name, sizeof(name), "truncated to %zu bytes", cuts[i]);
		expect(name, g_good, cuts[i], 0, -EBADMSG, "file is truncated");
	}
	{
		char want[96];

		snprintf(want, sizeof(want), "file is truncated: %zu bytes, expected %zu", g_n - 1,
		         g_n);
		expect("truncated message", g_good, g_n - 1, 0, -EBADMSG, want);
	}
}

static void header(void)
{
	unsigned char *b, junk[20000];

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = synth_byte(7, i);
	expect("junk file", junk, sizeof(junk), 0, -EBADMSG, "not a coli container");
	expect("text file", (const unsigned char *)"hello\n", 6, 0, -EBADMSG,
	       "not a coli container");
	b = copy();
	b[1] ^= 0x20;
	expect("wrong magic", b, g_n, 0, -EBADMSG, "not a coli container");
	/* the files a user may pass instead: named, with the command to run */
	memcpy(junk, "GGUF\3\0\0\0", 8);
	expect("a GGUF file", junk, sizeof(junk), 0, -EBADMSG,
	       "a GGUF file, not a coli container: convert it once with 'coli convert bad.coli");
	memcpy(junk, "\x10\0\0\0\0\0\0\0{\"a\": 1}       ", 24);
	expect("a safetensors file", junk, sizeof(junk), 0, -EBADMSG,
	       "a safetensors file, not a coli container");
	memcpy(junk, "\xff\xff\0\0\0\0\0\0{", 9); /* a length past the file: not one */
	expect("junk with a brace", junk, sizeof(junk), 0, -EBADMSG,
	       "not a coli container (bad magic");
	{
		coli_container_t *c = NULL;
		int rc;

		g_cases++;
		rmdir("bad.dir");
		rc = mkdir("bad.dir", 0755) ? -errno : coli_io_container_open("bad.dir", &c);
		if (rc != -EINVAL ||
		    !strstr(coli_io_errmsg(), "bad.dir: a directory, not a coli "
		                              "container") ||
		    !strstr(coli_io_errmsg(), "'coli convert bad.dir -o OUT.coli'")) {
			fprintf(stderr, "FAIL a directory: rc %d, message '%s'\n", rc,
			        coli_io_errmsg());
			g_fail = 1;
		}
		coli_io_container_close(c);
		rmdir("bad.dir");
	}
	b = copy();
	put32(b + SB_VERSION, 2);
	edit_reseal(b, g_n);
	expect("newer version", b, g_n, 0, -EPROTO,
	       "written by a newer coli (v2), this reader supports v1");
	b = copy();
	put32(b + SB_VERSION, 0x7fffffff);
	expect("newer version, stale sum", b, g_n, 0, -EPROTO, "newer coli (v2147483647)");
	b = copy();
	b[SB_DENSE_BYTES] ^= 1;
	expect("superblock flip (field)", b, g_n, 0, -EBADMSG, "superblock checksum mismatch");
	b = copy();
	b[CT_SEC_TABLE_OFF + 9] ^= 0x80;
	expect("superblock flip (sections)", b, g_n, 0, -EBADMSG, "superblock checksum mismatch");
	b = copy();
	b[3000] ^= 4;
	expect("superblock flip (padding)", b, g_n, 0, -EBADMSG, "superblock checksum mismatch");
	b = copy();
	b[CT_SUPER_SUM_OFF + 7] ^= 1;
	expect("superblock flip (sum)", b, g_n, 0, -EBADMSG, "superblock checksum mismatch");
	b = copy();
	put32(b + SB_FLAGS, 1);
	edit_reseal(b, g_n);
	expect("unknown flags", b, g_n, 0, -EBADMSG, "flags 0x1");
	b = copy();
	memset(b + g_n, 0, 4096);
	expect("trailing data", b, g_n + 4096, 0, -EBADMSG, "trailing data");
	b = copy();
	put64(b + SB_FILE_BYTES, g_n + 4096);
	edit_reseal(b, g_n);
	expect("file_bytes too large", b, g_n, 0, -EBADMSG, "file is truncated");
	b = copy();
	put64(b + SB_DENSE_OFF, 100);
	edit_reseal(b, g_n);
	expect("regions", b, g_n, 0, -EBADMSG, "regions are inconsistent");
	b = copy();
	put64(b + SB_EXPERT_BYTES, UINT64_MAX - 100);
	edit_reseal(b, g_n);
	expect("region overflow", b, g_n, 0, -EBADMSG, "regions are inconsistent");
}

static void sections(void)
{
	unsigned char *b;
	struct {
		uint32_t kind;
		const char *needle;
	} flips[] = {
	    {CT_SECTION_TENSORS, "section tensor-table checksum mismatch"},
	    {CT_SECTION_EXPERT_LAYERS, "section expert-layer-table checksum mismatch"},
	    {CT_SECTION_SLAB_XXH, "section slab-checksums checksum mismatch"},
	    {COLI_SECTION_CONFIG, "section config checksum mismatch"},
	    {COLI_SECTION_TOKENIZER, "section tokenizer checksum mismatch"},
	};

	for (size_t i = 0; i < sizeof(flips) / sizeof(flips[0]); i++) {
		b = copy();
		section(b, flips[i].kind)[5] ^= 0x10;
		expect(flips[i].needle, b, g_n, 0, -EBADMSG, flips[i].needle);
	}
	b = copy();
	put32(b + SB_N_SECTIONS, CT_MAX_SECTIONS + 1);
	edit_reseal(b, g_n);
	expect("too many sections", b, g_n, 0, -EBADMSG, "section table has 65 entries");
	b = copy();
	put64(sec_entry(b, COLI_SECTION_CONFIG) + SE_OFFSET, g_n - 8);
	edit_reseal(b, g_n);
	expect("section outside", b, g_n, 0, -EBADMSG, "outside the metadata area");
	b = copy();
	put64(sec_entry(b, COLI_SECTION_CONFIG) + SE_BYTES, UINT64_MAX);
	edit_reseal(b, g_n);
	expect("section size overflow", b, g_n, 0, -EBADMSG, "outside the metadata area");
	b = copy();
	put64(sec_entry(b, COLI_SECTION_CONFIG) + SE_OFFSET,
	      le64(sec_entry(b, COLI_SECTION_TOKENIZER) + SE_OFFSET));
	edit_reseal(b, g_n);
	expect("sections overlap", b, g_n, 0, -EBADMSG, "sections overlap");
	b = copy();
	put32(sec_entry(b, CT_SECTION_TENSORS) + SE_KIND, 63);
	edit_reseal(b, g_n);
	expect("tensor table missing", b, g_n, 0, -EBADMSG, "the tensor-table section is missing");
	b = copy();
	put32(sec_entry(b, COLI_SECTION_HF_CONFIG) + SE_KIND, COLI_SECTION_CONFIG);
	edit_reseal(b, g_n);
	expect("duplicate section", b, g_n, 0, -EBADMSG, "section config appears twice");
	b = copy();
	put64(sec_entry(b, CT_SECTION_SLAB_XXH) + SE_BYTES,
	      le64(sec_entry(b, CT_SECTION_SLAB_XXH) + SE_BYTES) - 8);
	edit_reseal(b, g_n);
	expect("slab checksum count", b, g_n, 0, -EBADMSG, "slab checksums for 11 slabs");
	b = copy();
	put64(sec_entry(b, CT_SECTION_TENSORS) + SE_BYTES, CT_TENSOR_ENTRY * SYNTH_N_TENSORS - 1);
	edit_reseal(b, g_n);
	expect("tensor table size", b, g_n, 0, -EBADMSG, "not a whole number");
}

static void tensors(void)
{
	unsigned char *b, *e;

	b = copy();
	put64(tensor_entry(b, 2) + TE_BYTES, le64(tensor_entry(b, 2) + TE_BYTES) + 1);
	edit_reseal(b, g_n);
	expect("tensor bytes vs shape", b, g_n, 0, -EBADMSG,
	       "tensor blk.0.attn_q: 4353 bytes do not match q8_0");
	b = copy();
	put64(tensor_entry(b, 2) + TE_SHAPE, 1ull << 62);
	put64(tensor_entry(b, 2) + TE_SHAPE + 8, 1ull << 62);
	edit_reseal(b, g_n);
	expect("tensor shape overflow", b, g_n, 0, -EBADMSG, "do not match");
	b = copy();
	put64(tensor_entry(b, 2) + TE_OFFSET, le64(tensor_entry(b, 2) + TE_OFFSET) + 8);
	edit_reseal(b, g_n);
	expect("tensor misaligned", b, g_n, 0, -EBADMSG, "tensor blk.0.attn_q: offset");
	b = copy();
	put64(tensor_entry(b, 2) + TE_OFFSET, UINT64_MAX - 63);
	edit_reseal(b, g_n);
	expect("tensor offset overflow", b, g_n, 0, -EBADMSG, "outside the dense region");
	b = copy();
	put64(tensor_entry(b, 2) + TE_OFFSET, le64(b + SB_EXPERT_OFF));
	edit_reseal(b, g_n);
	expect("tensor in expert region", b, g_n, 0, -EBADMSG, "outside the dense region");
	b = copy();
	memset(tensor_entry(b, 1) + TE_NAME, 'x', COLI_TENSOR_NAME_MAX);
	edit_reseal(b, g_n);
	expect("name not terminated", b, g_n, 0, -EBADMSG, "tensor table entry 1: name");
	b = copy();
	memset(tensor_entry(b, 1) + TE_NAME, 0, COLI_TENSOR_NAME_MAX);
	edit_reseal(b, g_n);
	expect("empty name", b, g_n, 0, -EBADMSG, "name is empty");
	b = copy();
	put32(tensor_entry(b, 1) + TE_DTYPE, 7);
	edit_reseal(b, g_n);
	expect("unknown dtype", b, g_n, 0, -EBADMSG, "tensor out_norm: unknown dtype 7");
	b = copy();
	put32(tensor_entry(b, 1) + TE_NDIM, 0);
	edit_reseal(b, g_n);
	expect("ndim 0", b, g_n, 0, -EBADMSG, "ndim 0");
	b = copy();
	put64(tensor_entry(b, 1) + TE_SHAPE + 24, 5);
	edit_reseal(b, g_n);
	expect("shape past ndim", b, g_n, 0, -EBADMSG, "shape[3] set past ndim");
	b = copy();
	put64(tensor_entry(b, 1) + TE_OFFSET, le64(tensor_entry(b, 0) + TE_OFFSET));
	edit_reseal(b, g_n);
	expect("tensors overlap", b, g_n, 0, -EBADMSG, "tensors overlap");
	b = copy();
	memcpy(tensor_entry(b, 4) + TE_NAME, "out_norm", 9);
	edit_reseal(b, g_n);
	expect("duplicate tensor", b, g_n, 0, -EBADMSG, "tensor out_norm appears twice");
	/* data corruption is verify's to find */
	b = copy();
	e = tensor_entry(b, 2);
	b[le64(e + TE_OFFSET) + 17] ^= 1;
	expect("tensor byte flip", b, g_n, 1, -EBADMSG, "tensor blk.0.attn_q checksum mismatch");
	b = copy();
	e = tensor_entry(b, SYNTH_N_TENSORS - 1);
	b[le64(e + TE_OFFSET) + le64(e + TE_BYTES) - 1] ^= 0x80;
	expect("last tensor byte flip", b, g_n, 1, -EBADMSG, "tensor test.q4_k checksum mismatch");
}

static void layers(void)
{
	unsigned char *b, *e;

	b = copy();
	put64(layer_entry(b, 0) + LE_SLAB_BYTES, le64(layer_entry(b, 0) + LE_SLAB_BYTES) + 4096);
	edit_reseal(b, g_n);
	expect("slab_bytes lie", b, g_n, 0, -EBADMSG, "expert layer 1: slab layout does not match");
	b = copy();
	put64(layer_entry(b, 1) + LE_DOWN_OFF, 0);
	edit_reseal(b, g_n);
	expect("down_off lie", b, g_n, 0, -EBADMSG, "expert layer 2: slab layout");
	b = copy();
	put32(layer_entry(b, 1) + LE_DTYPE, 3);
	edit_reseal(b, g_n);
	expect("layer dtype", b, g_n, 0, -EBADMSG, "expert layer 2: unknown dtype 3");
	b = copy();
	put32(layer_entry(b, 1) + LE_N_EXPERTS, 0xffffffffu);
	edit_reseal(b, g_n);
	expect("n_experts huge", b, g_n, 0, -EBADMSG, "experts (1..65536 allowed)");
	b = copy();
	put32(layer_entry(b, 2) + LE_N_EXPERTS, 3);
	edit_reseal(b, g_n);
	expect("n_experts past file", b, g_n, 0, -EBADMSG, "outside the expert region");
	b = copy();
	put32(layer_entry(b, 1) + LE_DOWN_DTYPE, 99);
	edit_reseal(b, g_n);
	expect("down dtype unknown", b, g_n, 0, -EBADMSG,
	       "expert layer 2: down dtype field 99 is not another known dtype");
	b = copy();
	put32(layer_entry(b, 0) + LE_DOWN_DTYPE, COLI_DTYPE_Q8_0 + 1);
	edit_reseal(b, g_n);
	expect("down dtype = dtype", b, g_n, 0, -EBADMSG,
	       "expert layer 1: down dtype field 9 is not another known dtype");
	b = copy();
	put32(layer_entry(b, 2) + LE_DOWN_DTYPE, COLI_DTYPE_Q4_0 + 1);
	edit_reseal(b, g_n);
	expect("down dtype resized", b, g_n, 0, -EBADMSG, "slab layout does not match");
	b = copy();
	put64(layer_entry(b, 1) + LE_OFFSET, 1ull << 63);
	edit_reseal(b, g_n);
	expect("layer offset huge", b, g_n, 0, -EBADMSG, "outside the expert region");
	b = copy();
	put64(layer_entry(b, 1) + LE_OFFSET, le64(layer_entry(b, 1) + LE_OFFSET) + 64);
	edit_reseal(b, g_n);
	expect("layer misaligned", b, g_n, 0, -EBADMSG, "misaligned");
	b = copy();
	put64(layer_entry(b, 0) + LE_OFFSET, le64(b + SB_DENSE_OFF));
	edit_reseal(b, g_n);
	expect("layer in dense region", b, g_n, 0, -EBADMSG, "outside the expert region");
	b = copy();
	put32(layer_entry(b, 1) + LE_INTER, 32);
	put32(layer_entry(b, 1) + LE_HIDDEN, 64);
	put32(layer_entry(b, 1) + LE_DTYPE, COLI_DTYPE_Q8_0);
	memcpy(layer_entry(b, 1) + LE_SLAB_BYTES, layer_entry(b, 0) + LE_SLAB_BYTES, 32);
	put64(layer_entry(b, 1) + LE_OFFSET, le64(layer_entry(b, 0) + LE_OFFSET) + 4096 * 2);
	edit_reseal(b, g_n);
	expect("layers overlap", b, g_n, 0, -EBADMSG, "expert layers overlap");
	b = copy();
	put32(layer_entry(b, 1) + LE_LAYER, 1);
	edit_reseal(b, g_n);
	expect("duplicate layer", b, g_n, 0, -EBADMSG, "expert layer 1 appears twice");
	/* slab data */
	b = copy();
	e = layer_entry(b, 1);
	b[le64(e + LE_OFFSET) + 3 * le64(e + LE_SLAB_BYTES) + 100] ^= 2;
	expect("slab byte flip", b, g_n, 1, -EBADMSG, "slab (layer 2, expert 3) checksum mismatch");
	b = copy();
	e = layer_entry(b, 0);
	b[le64(e + LE_OFFSET)] ^= 1;
	expect("first slab byte flip", b, g_n, 1, -EBADMSG,
	       "slab (layer 1, expert 0) checksum mismatch");
	b = copy();
	b[g_n - 1] ^= 1; /* padding of the last slab: covered too */
	expect("slab padding flip", b, g_n, 1, -EBADMSG,
	       "slab (layer 3, expert 1) checksum mismatch");
}

int main(void)
{
	FILE *f;
	long n;

	if (synth_write("good.coli", 0)) {
		fprintf(stderr, "write: %s\n", coli_io_errmsg());
		return 1;
	}
	f = fopen("good.coli", "rb");
	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) <= 0 || fseek(f, 0, SEEK_SET))
		return 1;
	g_n = (size_t)n;
	g_good = malloc(g_n);
	if (fread(g_good, 1, g_n, f) != g_n)
		return 1;
	fclose(f);
	expect("good file verifies", g_good, g_n, 1, 0, "");
	truncations();
	header();
	sections();
	tensors();
	layers();
	printf("%d cases, %s\n", g_cases,
	       g_fail ? "FAILED" : "all caught with a message naming the file");
	free(g_good);
	return g_fail;
}
