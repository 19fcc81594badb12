/*
 * tests/tokenizer/detok_stream.c — streaming decode: an emoji split across
 * tokens comes out only when complete; a ZWJ sequence fed byte by byte
 * comes out whole; invalid sequences become U+FFFD (one per maximal invalid
 * subpart, as from_utf8_lossy) and a dangling prefix at flush too; -ENOSPC
 * leaves the state untouched; bad ids are -EINVAL. Then the SentencePiece
 * decoder: ▁ -> space, the leading space stripped once, <0xXX> byte tokens.
 */
#include "tokenizer/tok_test.h"

#define FFFD "\xEF\xBF\xBD"

static char g_out[4096];
static size_t g_n;

static void push(const coli_tokenizer_t *t, struct coli_detok *d, int id, int want_n)
{
	int rc = coli_detok_push(t, d, id, g_out + g_n, sizeof(g_out) - g_n);
	CHECK(rc >= 0 && (want_n < 0 || rc == want_n), "push %d: %d, want %d bytes", id, rc,
	      want_n);
	if (rc > 0)
		g_n += (size_t)rc;
}

static void expect_out(struct coli_detok *d, const coli_tokenizer_t *t, const char *want)
{
	int rc = coli_detok_flush(t, d, g_out + g_n, sizeof(g_out) - g_n);
	CHECK(rc >= 0, "flush %d", rc);
	g_n += rc > 0 ? (size_t)rc : 0;
	CHECK(g_n == strlen(want) && !memcmp(g_out, want, g_n), "stream gave \"%.*s\", want \"%s\"",
	      (int)g_n, g_out, want);
	g_n = 0;
	coli_detok_init(d);
}

static void byte_level(void)
{
	static const char *const merges[][2] = {{"\xF0", "\x9F"}, {"\x98", "\x80"}};
	char *json = bl_json(merges, 2, NULL, NULL, NULL);
	coli_tokenizer_t *t = load_or_die(json);
	struct coli_detok d;
	free(json);
	coli_detok_init(&d);

	expect_ids(t, "\xF0\x9F\x98\x80", (int[]){256, 257, -1});
	push(t, &d, 256, 0); /* F0 9F: held */
	CHECK(d.n_pending == 2, "pending %d", d.n_pending);
	push(t, &d, 257, 4); /* 98 80 completes 😀 */
	expect_out(&d, t, "\xF0\x9F\x98\x80");

	const char *fam = "a👨‍👩‍👧b";
	for (const char *p = fam; *p; p++)
		push(t, &d, (unsigned char)*p, -1);
	expect_out(&d, t, fam);

	/* E2 82 is a valid prefix of a 3-byte char cut short by 'A' */
	push(t, &d, 0xE2, 0);
	push(t, &d, 0x82, 0);
	push(t, &d, 'A', 4);
	push(t, &d, 0x80, 3); /* lone continuation byte */
	push(t, &d, 0xC0, 3); /* never valid */
	push(t, &d, 0xED, 0); /* ED A0: a surrogate -> two U+FFFD */
	push(t, &d, 0xA0, 6);
	push(t, &d, 0xF0, 0); /* dangling at the end */
	expect_out(&d, t, FFFD "A" FFFD FFFD FFFD FFFD FFFD);

	/* -ENOSPC leaves the state as it was; the same id can be pushed again */
	push(t, &d, 256, 0);
	char small[2];
	int rc = coli_detok_push(t, &d, 257, small, sizeof(small));
	CHECK(rc == -ENOSPC && d.n_pending == 2, "ENOSPC: %d, pending %d", rc, d.n_pending);
	push(t, &d, 257, 4);
	expect_out(&d, t, "\xF0\x9F\x98\x80");

	CHECK(coli_detok_push(t, &d, -1, g_out, sizeof(g_out)) == -EINVAL, "id -1");
	CHECK(coli_detok_push(t, &d, coli_tokenizer_n_vocab(t), g_out, sizeof(g_out)) == -EINVAL,
	      "id n_vocab");
	CHECK(coli_tokenizer_max_piece_bytes(t) >= 3 * 8, "max piece");
	coli_tokenizer_free(t);
}

static void sentencepiece(void)
{
	json_t *vocab = json_pack("{s:i, s:i, s:i}", "<unk>", 0, "<s>", 1, "</s>", 2);
	char name[8];
	for (int b = 0; b < 256; b++) {
		snprintf(name, sizeof(name), "<0x%02X>", b);
		json_object_set_new(vocab, name, json_integer(3 + b));
	}
	json_object_set_new(vocab, "\xE2\x96\x81", json_integer(259)); /* ▁ */
	json_object_set_new(vocab, "h", json_integer(260));
	json_object_set_new(vocab, "i", json_integer(261));
	json_object_set_new(vocab, "\xE2\x96\x81h", json_integer(262));
	json_object_set_new(vocab, "\xE2\x96\x81hi", json_integer(263));
	json_t *root = json_pack(
	    "{s:[{s:i, s:s, s:b, s:b}], s:{s:s, s:[{s:s, s:s}, {s:s, s:{s:s}, s:s}]}, s:n,"
	    " s:{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}, {s:s, s:s, s:i, s:i}]},"
	    " s:{s:s, s:o, s:[s, s], s:b, s:b, s:s}}",
	    "added_tokens", "id", 1, "content", "<s>", "special", 1, "normalized", 0, "normalizer",
	    "type", "Sequence", "normalizers", "type", "Prepend", "prepend", "\xE2\x96\x81", "type",
	    "Replace", "pattern", "String", " ", "content", "\xE2\x96\x81", "pre_tokenizer",
	    "decoder", "type", "Sequence", "decoders", "type", "Replace", "pattern", "String",
	    "\xE2\x96\x81", "content", " ", "type", "ByteFallback", "type", "Fuse", "type", "Strip",
	    "content", " ", "start", 1, "stop", 0, "model", "type", "BPE", "vocab", vocab, "merges",
	    "\xE2\x96\x81 h", "\xE2\x96\x81h i", "byte_fallback", 1, "fuse_unk", 1, "unk_token",
	    "<unk>");
	CHECK(root != NULL, "json_pack");
	char *json = json_dumps(root, 0);
	json_decref(root);
	coli_tokenizer_t *t = load_or_die(json);
	struct coli_detok d;
	free(json);

	expect_ids(t, "hi hi", (int[]){263, 263, -1});
	expect_ids(t, "hi\xC3\xA9", (int[]){263, 3 + 0xC3, 3 + 0xA9, -1}); /* byte fallback */
	expect_ids(t, "<s>hi", (int[]){1, 263, -1});
	coli_detok_init(&d);
	push(t, &d, 263, 2); /* "hi": the leading space is stripped */
	push(t, &d, 263, 3); /* " hi" */
	push(t, &d, 3 + 0xC3, 0);
	push(t, &d, 3 + 0xA9, 2);
	push(t, &d, 260, 1);
	expect_out(&d, t, "hi hi\xC3\xA9h");
	push(t, &d, 259, 0); /* a lone ▁ first: stripped, still at the start */
	push(t, &d, 262, 2); /* the Strip decoder removes one space only */
	expect_out(&d, t, " h");
	coli_tokenizer_free(t);
}

int main(void)
{
	byte_level();
	sentencepiece();
	return g_fail;
}
