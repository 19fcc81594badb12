/*
 * tests/tokenizer/invalid_utf8.c — encode refuses invalid UTF-8 with
 * -EILSEQ and names the byte offset in err (the documented behaviour: no
 * silent replacement, so a caller never gets ids for text it did not send).
 * Covers a lone continuation byte, an overlong form, a surrogate, a code
 * point past U+10FFFF, a truncated sequence at the very end, and shows that
 * NUL bytes and the largest valid code points are accepted.
 */
#include "tokenizer/tok_test.h"

static void expect_bad(const coli_tokenizer_t *t, const char *s, size_t n, size_t off)
{
	char err[256] = "", want[32];
	int *ids = (int *)1, k = 7;
	int rc = coli_tokenizer_encode(t, s, n, &ids, &k, err, sizeof(err));
	snprintf(want, sizeof(want), "offset %zu ", off);
	CHECK(rc == -EILSEQ, "rc %d for offset %zu", rc, off);
	CHECK(strstr(err, want) != NULL, "err \"%s\" lacks \"%s\"", err, want);
	CHECK(ids == NULL && k == 0, "outputs not cleared");
	if (rc == 0)
		free(ids);
}

static void expect_ok(const coli_tokenizer_t *t, const char *s, size_t n)
{
	char err[256], *text;
	int *ids, k;
	size_t len;
	int rc = coli_tokenizer_encode(t, s, n, &ids, &k, err, sizeof(err));
	CHECK(rc == 0, "valid input refused: %s", err);
	if (rc)
		return;
	rc = coli_tokenizer_decode(t, ids, k, &text, &len);
	CHECK(rc == 0 && len == n && !memcmp(text, s, n), "round trip of %zu bytes", n);
	free(ids);
	if (!rc)
		free(text);
}

int main(void)
{
	char *json = bl_json(NULL, 0, NULL, NULL, NULL);
	coli_tokenizer_t *t = load_or_die(json);
	free(json);

	expect_bad(t, "ab\x80", 3, 2);
	expect_bad(t, "\xC0\xAF", 2, 0);           /* overlong '/' */
	expect_bad(t, "x\xED\xA0\x80y", 5, 1);     /* surrogate U+D800 */
	expect_bad(t, "xx\xF4\x90\x80\x80", 6, 2); /* U+110000 */
	expect_bad(t, "hello \xF0\x9F\x98", 9, 6); /* truncated at the end */
	expect_bad(t,
	           "\xE2\x82"
	           "A",
	           3, 0); /* cut short */
	expect_bad(t, "\xFF", 1, 0);
	expect_ok(t, "a\0b", 3);
	expect_ok(t, "\xF4\x8F\xBF\xBF \xEF\xBF\xBF \xEF\xBF\xBD", 12);
	coli_tokenizer_free(t);
	return g_fail;
}
