/*
 * core/text/tokenizer_decode.c — from ids back to text, one id at a time.
 *
 * At load, tok_decode_build turns every token into the bytes the decoder
 * produces for it alone (t->dec[id]):
 *
 *   ByteLevel  each character of the token's text mapped back through
 *              GPT-2's byte<->unicode table ("Ġhi" -> " hi"); a token with
 *              a character outside the table ("  " added tokens in
 *              GPT-NeoX-style files) decodes as its raw UTF-8, as HF does.
 *   SPM        Replace("▁", " ") and ByteFallback ("<0xE2>" -> one byte
 *              0xE2); Fuse is implicit (bytes are concatenated); Strip and
 *              the Metaspace decoder's first-token rule are applied by the
 *              stream state, since they depend on position.
 *   none       the text itself.
 *
 * The stream (struct coli_detok) then concatenates bytes and releases only
 * complete UTF-8: a valid but incomplete sequence at the end waits in
 * d->pending (at most 3 bytes); an invalid sequence becomes U+FFFD, one per
 * maximal invalid subpart (the Unicode "best practice" that Rust's
 * String::from_utf8_lossy follows, so the output equals HF's decode of the
 * whole id list). Output is computed in a counting pass first, so a push
 * that does not fit returns -ENOSPC without touching the state.
 *
 * Known difference: HF's ByteFallback decoder replaces an invalid run of
 * <0xXX> tokens with one U+FFFD per token, where we emit one per maximal
 * invalid subpart. Valid text decodes identically.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/text/tokenizer_internal.h"

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the
 * other 68 (0-32, 127-160, 173) to U+0100.. in byte order. */
static int printable(int b)
{
	return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

/* The 68 non-printable bytes in order: 0-32 (n 0-32), 127-160 (n 33-66), 173 (n 67). */
uint32_t tok_byte_to_cp(uint8_t b)
{
	if (printable(b))
		return b;
	return 256 + (b <= 32 ? b : b <= 160 ? 33u + (b - 127u) : 67u);
}

int tok_cp_to_byte(uint32_t cp)
{
	if (cp < 256)
		return printable((int)cp) ? (int)cp : -1;
	if (cp >= 256 + 68)
		return -1;
	uint32_t n = cp - 256;
	return n <= 32 ? (int)n : n <= 66 ? (int)(127 + n - 33) : 173;
}

int tok_bytelevel_unmap(const char *s, size_t n, char *out)
{
	size_t k = 0;
	for (size_t i = 0; i < n;) {
		const unsigned char *p = (const unsigned char *)s + i;
		int cl = tok_utf8_len(p, n - i), b;
		uint32_t cp;
		if (cl == 1)
			cp = p[0];
		else if (cl == 2)
			cp = (p[0] & 0x1Fu) << 6 | (p[1] & 0x3Fu);
		else
			return -1; /* the map's code points are all < U+0800 */
		if ((b = tok_cp_to_byte(cp)) < 0)
			return -1;
		out[k++] = (char)b;
		i += (size_t)cl;
	}
	return (int)k;
}

static int byte_token(const char *s, size_t n)
{
	char hex[3];
	if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>')
		return -1;
	memcpy(hex, s + 3, 2);
	hex[2] = 0;
	char *end;
	long v = strtol(hex, &end, 16);
	return *end ? -1 : (int)v;
}

int tok_decode_build(struct coli_tokenizer *t)
{
	char *buf = NULL;
	size_t cap = 0;
	int rc = 0;

	t->dec = calloc((size_t)t->n_vocab, sizeof(*t->dec));
	if (!t->dec)
		return -ENOMEM;
	for (int id = 0; id < t->n_vocab && !rc; id++) {
		struct tok_str s = t->text[id];
		const char *p = tok_s(t, s);
		size_t k = 0;
		if (!s.len && !s.off)
			continue; /* no token has this id */
		if (cap < s.len + 1) {
			cap = 2 * s.len + 16;
			char *nb = realloc(buf, cap);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
		}
		int b;
		if (t->dec_kind == TOK_DEC_BYTELEVEL) {
			int m = tok_bytelevel_unmap(p, s.len, buf);
			if (m < 0) {
				memcpy(buf, p, s.len);
				k = s.len;
			} else {
				k = (size_t)m;
			}
		} else if (t->dec_kind == TOK_DEC_SPM && t->dec_byte_fallback &&
		           (b = byte_token(p, s.len)) >= 0) {
			buf[k++] = (char)b;
		} else if (t->dec_kind == TOK_DEC_SPM) {
			const char *r = tok_s(t, t->dec_repl);
			size_t rl = t->dec_repl.len;
			for (size_t i = 0; i < s.len;) {
				if (rl && i + rl <= s.len && !memcmp(p + i, r, rl)) {
					buf[k++] = ' ';
					i += rl;
				} else {
					buf[k++] = p[i++];
				}
			}
		} else {
			memcpy(buf, p, s.len);
			k = s.len;
		}
		rc = tok_arena_add(t, buf, k, &t->dec[id]);
		if (k > t->max_dec_bytes)
			t->max_dec_bytes = k;
	}
	free(buf);
	return rc;
}

/* ---- the stream ---- */

void coli_detok_init(struct coli_detok *d)
{
	memset(d, 0, sizeof(*d));
}

size_t coli_tokenizer_max_piece_bytes(const coli_tokenizer_t *t)
{
	/* every byte of pending + token may become a 3-byte U+FFFD */
	return 3 * (t->max_dec_bytes + sizeof(((struct coli_detok *)0)->pending));
}

/* Emits the complete part of p[0..n) into out (or only counts when out is
 * NULL); returns bytes produced and sets *used to the bytes consumed. With
 * final, a trailing incomplete sequence is consumed too, as U+FFFD. */
static size_t emit(const unsigned char *p, size_t n, int final, char *out, size_t *used)
{
	size_t i = 0, k = 0;

	while (i < n) {
		int need, got = tok_utf8_scan(p + i, n - i, &need);
		if (got == need) {
			if (out)
				memcpy(out + k, p + i, (size_t)need);
			k += (size_t)need;
			i += (size_t)need;
			continue;
		}
		if (got && i + (size_t)got == n && !final)
			break; /* valid so far: wait for the rest */
		if (out)
			memcpy(out + k, "\xEF\xBF\xBD", 3);
		k += 3;
		i += got ? (size_t)got : 1;
	}
	*used = i;
	return k;
}

static int stream(struct coli_detok *d, const char *bytes, size_t len, int final, char *out,
                  size_t cap)
{
	unsigned char tmp[256], *buf = tmp;
	size_t n = (size_t)d->n_pending + len, used;

	if (n > sizeof(tmp) && !(buf = malloc(n)))
		return -ENOMEM;
	memcpy(buf, d->pending, (size_t)d->n_pending);
	if (len)
		memcpy(buf + d->n_pending, bytes, len);
	size_t k = emit(buf, n, final, NULL, &used);
	if (k > cap || k > (size_t)INT32_MAX) {
		if (buf != tmp)
			free(buf);
		return -ENOSPC;
	}
	emit(buf, n, final, out, &used);
	d->n_pending = (int)(n - used); /* <= 3 by construction */
	memcpy(d->pending, buf + used, (size_t)d->n_pending);
	if (buf != tmp)
		free(buf);
	return (int)k;
}

const char *coli_tokenizer_piece(const coli_tokenizer_t *t, int id, size_t *len)
{
	if (id < 0 || id >= t->n_vocab || (!t->dec[id].len && !t->dec[id].off))
		return NULL;
	*len = t->dec[id].len;
	return tok_s(t, t->dec[id]);
}

int coli_detok_push(const coli_tokenizer_t *t, struct coli_detok *d, int id, char *out, size_t cap)
{
	if (id < 0 || id >= t->n_vocab)
		return -EINVAL;
	const char *p = tok_s(t, t->dec[id]);
	size_t n = t->dec[id].len;
	int strip = 0, first = d->n_tokens == 0;

	if (t->dec_strip_first && first && n && p[0] == ' ')
		strip = 1;
	/* Strip decoder: up to dec_strip_start spaces at the very start of the
	 * stream; n_stripped < 0 once anything else was seen. */
	int ns = d->n_stripped;
	while (ns >= 0 && ns < t->dec_strip_start && (size_t)strip < n && p[strip] == ' ')
		strip++, ns++;
	if (ns >= 0 && ((size_t)strip < n || ns >= t->dec_strip_start))
		ns = -1;
	int rc = stream(d, p + strip, n - (size_t)strip, 0, out, cap);
	if (rc >= 0) {
		d->n_tokens++;
		d->n_stripped = ns;
	}
	return rc;
}

int coli_detok_flush(const coli_tokenizer_t *t, struct coli_detok *d, char *out, size_t cap)
{
	return stream(d, NULL, 0, 1, out, cap);
}

int coli_tokenizer_decode(const coli_tokenizer_t *t, const int *ids, int n_ids, char **text,
                          size_t *len)
{
	size_t piece = coli_tokenizer_max_piece_bytes(t), cap = piece + 64, n = 0;
	char *buf = malloc(cap);
	struct coli_detok d;
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	coli_detok_init(&d);
	for (int i = 0; i <= n_ids; i++) {
		if (cap - n < piece + 1) {
			cap = 2 * cap + piece;
			char *nb = realloc(buf, cap);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			buf = nb;
		}
		rc = i < n_ids ? coli_detok_push(t, &d, ids[i], buf + n, cap - n - 1)
		               : coli_detok_flush(t, &d, buf + n, cap - n - 1);
		if (rc < 0)
			break;
		n += (size_t)rc;
		rc = 0;
	}
	if (rc) {
		free(buf);
		return rc;
	}
	buf[n] = 0;
	*text = buf;
	*len = n;
	return 0;
}
