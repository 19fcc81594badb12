/*
 * core/convert/convert_tiktoken.c — a tiktoken tokenizer (Kimi-K2's) as a
 * tokenizer.json text, for `coli convert HF_DIR` when HF_DIR has no
 * tokenizer.json but a rank file (tokenizer_config.json's vocab_file, else
 * tiktoken.model) and a tokenizer class coli knows.
 *
 * Input
 *   rank file   one token a line: base64 of the token's bytes, a space, its
 *               rank (= id). Ranks are 0, 1, 2, ... in line order (blank
 *               lines skipped, as tiktoken's loader does); every single byte
 *               is a token. A token is under TOK_BYTES_MAX bytes, a line
 *               at most LINE_MAX chars, the file at most FILE_MAX bytes.
 *   class       tokenizer_config.json: tokenizer_class "TikTokenTokenizer"
 *               and auto_map.AutoTokenizer naming tokenization_kimi (Kimi's
 *               Python class); its pattern is coli_convert_kimi_regex, its 256 special
 *               tokens follow the ranks: added_tokens_decoder's content
 *               where it names the id, else <|reserved_token_{id}|>.
 *
 * Output (core/convert/convert_tok.c's layout, ignore_merges on)
 *   vocab       each token's bytes through GPT-2's byte-to-unicode map, id =
 *               rank
 *   merges      for every token of 2+ bytes, each split into two pieces that
 *               are both tokens, ordered by the token's rank, then the left
 *               piece's, then the right's. BPE with these merges merges the
 *               adjacent pair whose concatenation has the lowest rank, which
 *               is tiktoken's rank-greedy rule; ignore_merges is tiktoken's
 *               "a whole pre-token that is a token is that token".
 *   regex       Kimi's pat_str with each class intersection [X&&[^\p{Han}]]
 *               (fancy-regex syntax, which PCRE2 lacks) written as
 *               (?:(?!\p{sc:Han})[X]): the same characters, one at a time.
 *               \p{sc:Han}, not \p{Han}: Rust's regex (tiktoken's) reads
 *               \p{Han} as the Script property, PCRE2 as Script_Extensions,
 *               which also holds CJK punctuation (U+3001, U+3002, U+30FC).
 *
 * Cost: one pass over the file, a hash table of the tokens (polynomial
 * hashes, so every split of a token is looked up in time linear in its
 * length); merges capped at MERGES_MAX.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/convert/convert_internal.h"

#define FILE_MAX       (64u << 20)
#define LINE_MAX_CHARS 2048u
#define TOK_BYTES_MAX  1024u
#define TOKENS_MAX     (1u << 22)
#define MERGES_MAX     (16u << 20)
#define N_SPECIAL      256
#define HASH_B         0x100000001b3ull /* odd: the polynomial hash's base */

/* Kimi-K2's pat_str, the intersections rewritten (the file's top). */
#define NOT_HAN "(?!\\p{sc:Han})"
#define UPPER   "(?:" NOT_HAN "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}])"
#define LOWER   "(?:" NOT_HAN "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}])"
#define CONTR   "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
const char coli_convert_kimi_regex[] =
    "[\\p{sc:Han}]+|[^\\r\\n\\p{L}\\p{N}]?" UPPER "*" LOWER "+" CONTR
    "|[^\\r\\n\\p{L}\\p{N}]?" UPPER "+" LOWER "*" CONTR
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* The rank file decoded: token i is bytes[off[i], off[i+1]); slot[] an open
 * addressing table of token ids (-1 empty) keyed by hash(). */
struct ranks {
	uint8_t *bytes;
	uint32_t *off;
	uint32_t n, cap;
	int32_t *slot;
	uint64_t mask;
	const char *name;
	char *errbuf;
	size_t errlen;
};

static uint64_t hash(const uint8_t *p, size_t n)
{
	uint64_t h = 0;

	for (size_t i = 0; i < n; i++)
		h = h * HASH_B + p[i] + 1;
	return h;
}

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 29);
}

/* The id of the token with these bytes and hash h, -1 if none. */
static int32_t lookup(const struct ranks *r, const uint8_t *p, size_t n, uint64_t h)
{
	for (uint64_t i = mix(h) & r->mask;; i = (i + 1) & r->mask) {
		int32_t id = r->slot[i];

		if (id < 0)
			return -1;
		if (r->off[id + 1] - r->off[id] == n && !memcmp(r->bytes + r->off[id], p, n))
			return id;
	}
}

static int b64val(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Standard base64 with padding; the decoded length, -1 if malformed. */
static long b64decode(const char *s, size_t n, uint8_t *out)
{
	long o = 0;

	if (!n || n % 4)
		return -1;
	for (size_t i = 0; i < n; i += 4) {
		int v[4], pad = 0;

		for (int k = 0; k < 4; k++) {
			v[k] = b64val((unsigned char)s[i + k]);
			if (s[i + k] == '=' && i + 4 == n && k >= 2 && (k == 3 || s[i + 3] == '='))
				v[k] = 0, pad++;
			else if (v[k] < 0)
				return -1;
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
		             (uint32_t)v[3];
		out[o++] = (uint8_t)(w >> 16);
		if (pad < 2)
			out[o++] = (uint8_t)(w >> 8);
		if (pad < 1)
			out[o++] = (uint8_t)w;
	}
	return o;
}

static int fail(struct ranks *r, unsigned line, const char *what)
{
	return coli_convert_errf(r->errbuf, r->errlen, -EINVAL,
	                         "%s line %u: %s (a tiktoken rank file has one 'BASE64 RANK' a "
	                         "line, ranks 0, 1, 2, ... in order)",
	                         r->name, line, what);
}

/* One line "BASE64 RANK" as token r->n. */
static int add_line(struct ranks *r, const char *s, size_t n, unsigned line)
{
	const char *sp = memchr(s, ' ', n);
	uint8_t buf[TOK_BYTES_MAX];
	unsigned long rank = 0;
	long len;

	if (n > LINE_MAX_CHARS)
		return fail(r, line, "line too long");
	if (!sp)
		return fail(r, line, "no space between token and rank");
	if (sp == s + n - 1 || (size_t)(s + n - sp - 1) > 9)
		return fail(r, line, "rank missing or too long");
	for (const char *d = sp + 1; d < s + n; d++) {
		if (*d < '0' || *d > '9')
			return fail(r, line, "rank is not a decimal number");
		rank = rank * 10 + (unsigned long)(*d - '0');
	}
	if ((size_t)(sp - s) > (TOK_BYTES_MAX / 3) * 4)
		return fail(r, line, "token over 1023 bytes");
	len = b64decode(s, (size_t)(sp - s), buf);
	if (len <= 0)
		return fail(r, line, len ? "token is not valid base64" : "empty token");
	if (rank != r->n)
		return fail(r, line,
		            rank < r->n ? "rank repeats or decreases" : "ranks skip a value");
	if (r->n == TOKENS_MAX)
		return fail(r, line, "more than 4194304 tokens");
	if (r->n + 1 >= r->cap) {
		uint32_t *o = realloc(r->off, 2 * (size_t)r->cap * sizeof(*o));

		if (!o)
			return -ENOMEM;
		r->off = o;
		r->cap *= 2;
	}
	memcpy(r->bytes + r->off[r->n], buf, (size_t)len);
	r->off[r->n + 1] = r->off[r->n] + (uint32_t)len;
	r->n++;
	return 0;
}

/* The table of tokens; a token twice is refused with its two lines' ranks. */
static int index_tokens(struct ranks *r)
{
	uint64_t size = 16;

	while (size < 2 * (uint64_t)r->n)
		size *= 2;
	r->slot = malloc(size * sizeof(*r->slot));
	if (!r->slot)
		return -ENOMEM;
	memset(r->slot, 0xff, size * sizeof(*r->slot));
	r->mask = size - 1;
	for (uint32_t id = 0; id < r->n; id++) {
		const uint8_t *p = r->bytes + r->off[id];
		size_t n = r->off[id + 1] - r->off[id];
		uint64_t h = hash(p, n), i;
		int32_t dup = lookup(r, p, n, h);

		if (dup >= 0)
			return coli_convert_errf(
			    r->errbuf, r->errlen, -EINVAL,
			    "%s: ranks %d and %u are the same bytes (each token "
			    "once in a tiktoken rank file)",
			    r->name, dup, id);
		for (i = mix(h) & r->mask; r->slot[i] >= 0; i = (i + 1) & r->mask)
			;
		r->slot[i] = (int32_t)id;
	}
	for (int b = 0; b < 256; b++) {
		uint8_t c = (uint8_t)b;

		if (lookup(r, &c, 1, hash(&c, 1)) < 0)
			return coli_convert_errf(
			    r->errbuf, r->errlen, -EINVAL,
			    "%s: byte 0x%02x is not a token (tiktoken needs all "
			    "256 single bytes to encode any text)",
			    r->name, b);
	}
	return 0;
}

static int parse(struct ranks *r, const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	unsigned line = 0;
	int rc;

	r->cap = 1024;
	r->off = malloc(r->cap * sizeof(*r->off));
	r->bytes = malloc(len + 1); /* decoded bytes are fewer than their base64 */
	if (!r->off || !r->bytes)
		return -ENOMEM;
	r->off[0] = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end;

		line++;
		if (e > p && e[-1] == '\r')
			e--;
		if (e > p && (rc = add_line(r, p, (size_t)(e - p), line)))
			return rc;
		p = nl ? nl + 1 : end;
	}
	if (r->n < 256)
		return coli_convert_errf(r->errbuf, r->errlen, -EINVAL,
		                         "%s: %u tokens (a tiktoken rank file has at least the "
		                         "256 single bytes)",
		                         r->name, r->n);
	return index_tokens(r);
}

/* Bytes through GPT-2's bytes_to_unicode, as UTF-8 (2 bytes at most each). */
static size_t byte_level(const uint8_t *p, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t b = p[i];
		uint32_t cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174
		                  ? b
		                  : 256 + (b <= 32    ? b
		                           : b <= 160 ? 33 + (b - 127)
		                                      : 67);

		if (cp < 0x80) {
			out[o++] = (char)cp;
		} else {
			out[o++] = (char)(0xc0 | cp >> 6);
			out[o++] = (char)(0x80 | (cp & 0x3f));
		}
	}
	return o;
}

static int vocab(const struct ranks *r, json_t *voc)
{
	char s[2 * TOK_BYTES_MAX];

	for (uint32_t id = 0; id < r->n; id++) {
		size_t n = byte_level(r->bytes + r->off[id], r->off[id + 1] - r->off[id], s);

		if (json_object_setn_new_nocheck(voc, s, n, json_integer(id)))
			return -ENOMEM;
	}
	return 0;
}

static int cmp_pair(const void *a, const void *b)
{
	const int32_t *x = a, *y = b;

	return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* Every token's splits into two tokens, in merge order (the file's top). */
static int merges(struct ranks *r, json_t *out)
{
	int32_t pairs[TOK_BYTES_MAX][2];
	uint64_t pre[TOK_BYTES_MAX + 1], pw[TOK_BYTES_MAX + 1];
	char s[4 * TOK_BYTES_MAX + 2];
	size_t total = 0;

	pw[0] = 1;
	for (size_t i = 1; i <= TOK_BYTES_MAX; i++)
		pw[i] = pw[i - 1] * HASH_B;
	for (uint32_t id = 0; id < r->n; id++) {
		const uint8_t *p = r->bytes + r->off[id];
		size_t n = r->off[id + 1] - r->off[id], np = 0;

		pre[0] = 0;
		for (size_t i = 0; i < n; i++)
			pre[i + 1] = pre[i] * HASH_B + p[i] + 1;
		for (size_t k = 1; k < n; k++) {
			int32_t a = lookup(r, p, k, pre[k]);
			int32_t b =
			    a < 0 ? -1 : lookup(r, p + k, n - k, pre[n] - pre[k] * pw[n - k]);

			if (b >= 0)
				pairs[np][0] = a, pairs[np++][1] = b;
		}
		qsort(pairs, np, sizeof(pairs[0]), cmp_pair);
		if ((total += np) > MERGES_MAX)
			return coli_convert_errf(r->errbuf, r->errlen, -E2BIG,
			                         "%s: more than %u merges (token splits)", r->name,
			                         MERGES_MAX);
		for (size_t i = 0; i < np; i++) {
			const uint32_t *o = r->off;
			size_t a = byte_level(r->bytes + o[pairs[i][0]],
			                      o[pairs[i][0] + 1] - o[pairs[i][0]], s);

			s[a++] = ' ';
			a += byte_level(r->bytes + o[pairs[i][1]],
			                o[pairs[i][1] + 1] - o[pairs[i][1]], s + a);
			if (json_array_append_new(out, json_stringn_nocheck(s, a)))
				return -ENOMEM;
		}
	}
	return 0;
}

/* Kimi's special tokens: ids n .. n+255, added_tokens_decoder's content or
 * <|reserved_token_{id}|>; special, matched as they are (tiktoken's
 * allowed_special="all"). A content that is also a rank's spelling would
 * take the rank's id in coli's tokenizer: refused. */
static int specials(struct ranks *r, const json_t *tokcfg, const json_t *voc, json_t *added)
{
	const json_t *dec = json_object_get(tokcfg, "added_tokens_decoder");

	for (uint32_t id = r->n; id < r->n + N_SPECIAL; id++) {
		char key[16], dflt[48];
		const json_t *e = json_object_get(dec, (snprintf(key, sizeof(key), "%u", id), key));
		const json_t *c = json_object_get(e, "content");
		const char *s = json_string_value(c);
		json_t *a;

		if (e && (!s || !*s || strlen(s) != json_string_length(c)))
			return coli_convert_errf(
			    r->errbuf, r->errlen, -EINVAL,
			    "tokenizer_config.json: added_tokens_decoder[\"%u\"] has no content "
			    "string (or an empty one, or one with a NUL)",
			    id);
		if (!s)
			s = (snprintf(dflt, sizeof(dflt), "<|reserved_token_%u|>", id), dflt);
		if (json_object_get(voc, s))
			return coli_convert_errf(
			    r->errbuf, r->errlen, -EINVAL,
			    "%s: special token '%.64s' (id %u) is also a rank's bytes; coli's "
			    "tokenizer would give it the rank's id, tiktoken the special one",
			    r->name, s, id);
		for (size_t i = 0; i < json_array_size(added); i++)
			if (!strcmp(s, json_string_value(
			                   json_object_get(json_array_get(added, i), "content"))))
				return coli_convert_errf(
				    r->errbuf, r->errlen, -EINVAL,
				    "tokenizer_config.json: special token '%.64s' names ids %u and "
				    "%u",
				    s, r->n + (unsigned)i, id);
		a = json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)id,
		              "content", s, "single_word", 0, "lstrip", 0, "rstrip", 0,
		              "normalized", 0, "special", 1);
		if (!a || json_array_append_new(added, a))
			return -ENOMEM;
	}
	return 0;
}

int coli_convert_tiktoken_json(const char *text, size_t len, const struct json_t *tokcfg,
                               const char *name, char **out, char *errbuf, size_t errlen)
{
	struct ranks r = {.name = name, .errbuf = errbuf, .errlen = errlen};
	json_t *voc = json_object(), *mg = json_array(), *added = json_array();
	int rc = -ENOMEM;

	*out = NULL;
	errbuf[0] = 0;
	if (len > FILE_MAX) {
		rc = coli_convert_errf(errbuf, errlen, -EFBIG, "%s: larger than %u MiB", name,
		                       FILE_MAX >> 20);
		goto out;
	}
	if (!voc || !mg || !added || (rc = parse(&r, text, len)) || (rc = vocab(&r, voc)) ||
	    (rc = merges(&r, mg)) || (rc = specials(&r, tokcfg, voc, added)))
		goto out;
	struct coli_convert_tok w = {.vocab = voc,
	                             .merges = mg,
	                             .added = added,
	                             .regex = coli_convert_kimi_regex,
	                             .ignore_merges = 1};

	rc = coli_convert_tok_write(&w, out);
out:
	if (rc == -ENOMEM && !errbuf[0])
		coli_convert_errf(errbuf, errlen, rc, "%s: out of memory building the tokenizer",
		                  name);
	json_decref(voc);
	json_decref(mg);
	json_decref(added);
	free(r.bytes);
	free(r.off);
	free(r.slot);
	return rc;
}

/* 1 if auto_map.AutoTokenizer (a string or a list) names tokenization_kimi. */
static int kimi_auto_map(const json_t *tokcfg)
{
	const json_t *am = json_object_get(json_object_get(tokcfg, "auto_map"), "AutoTokenizer");
	size_t n = json_is_array(am) ? json_array_size(am) : 1;

	for (size_t i = 0; i < n; i++) {
		const char *s = json_string_value(json_is_array(am) ? json_array_get(am, i) : am);

		if (s && !strncmp(s, "tokenization_kimi.", 18))
			return 1;
	}
	return 0;
}

/* The rank file's name in dir: vocab_file if given (a plain file name). */
static int rank_file(const char *dir, const json_t *tokcfg, char **path, char *errbuf,
                     size_t errlen)
{
	const json_t *vf = json_object_get(tokcfg, "vocab_file");
	const char *name = json_string_value(vf);

	*path = NULL;
	if (vf && !json_is_null(vf) &&
	    (!name || !*name || strchr(name, '/') || !strcmp(name, "..") || !strcmp(name, ".")))
		return coli_convert_errf(errbuf, errlen, -EINVAL,
		                         "%s/tokenizer_config.json: vocab_file is not a file name "
		                         "in the same directory",
		                         dir);
	if (asprintf(path, "%s/%s", dir, name ? name : "tiktoken.model") < 0) {
		*path = NULL;
		return coli_convert_errf(errbuf, errlen, -ENOMEM, "out of memory");
	}
	return 0;
}

static int read_all(const char *path, char **out, size_t *len, char *errbuf, size_t errlen)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	size_t got = 0;

	*out = NULL;
	if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > FILE_MAX) {
		rc = fd < 0 ? -errno : -EFBIG;
		goto out;
	}
	*out = malloc((size_t)st.st_size + 1);
	if (!*out) {
		rc = -ENOMEM;
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, *out + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			goto out;
		}
		got += (size_t)n;
	}
	(*out)[got] = 0;
	*len = got;
out:
	if (fd >= 0)
		close(fd);
	if (rc) {
		free(*out);
		*out = NULL;
		coli_convert_errf(errbuf, errlen, rc,
		                  "%s: cannot read (%s; at most %u MiB, a regular file)", path,
		                  strerror(-rc), FILE_MAX >> 20);
	}
	return rc;
}

int coli_convert_tiktoken_load(struct coli_convert_hf *h, const struct json_t *tokcfg, char *errbuf,
                               size_t errlen)
{
	const char *cls = json_string_value(json_object_get(tokcfg, "tokenizer_class"));
	char *path, *text = NULL;
	size_t len = 0;
	int rc = rank_file(h->dir, tokcfg, &path, errbuf, errlen);

	if (rc || access(path, F_OK)) /* no rank file: no tiktoken tokenizer */
		goto out;
	if (!cls || strcmp(cls, "TikTokenTokenizer") || !kimi_auto_map(tokcfg)) {
		rc = coli_convert_errf(
		    errbuf, errlen, -ENOTSUP,
		    "%s: a tiktoken rank file, but tokenizer_class '%.64s' is not a tiktoken "
		    "tokenizer coli knows (known: Kimi's TikTokenTokenizer, auto_map "
		    "tokenization_kimi); save the tokenizer as tokenizer.json (a fast tokenizer's "
		    "save_pretrained) in the directory and convert again",
		    path, cls ? cls : "(none)");
		goto out;
	}
	if ((rc = read_all(path, &text, &len, errbuf, errlen)) ||
	    (rc = coli_convert_tiktoken_json(text, len, tokcfg, path,
	                                     &h->section[COLI_SECTION_TOKENIZER], errbuf, errlen)))
		goto out;
	h->section_bytes[COLI_SECTION_TOKENIZER] = strlen(h->section[COLI_SECTION_TOKENIZER]);
out:
	free(text);
	free(path);
	return rc;
}
