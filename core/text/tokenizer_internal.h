/*
 * core/text/tokenizer_internal.h — the tokenizer's private layout, shared by
 * core/text/tokenizer.c (loading tokenizer.json), core/text/tokenizer_bpe.c (hash
 * tables and the merge loop), core/text/tokenizer_encode.c (added tokens,
 * normalizers, pre-tokenizers) and core/text/tokenizer_decode.c (bytes out).
 *
 * Every string lives in one arena (t->arena) and is named by a tok_str
 * (offset, length). Per id three strings are kept:
 *
 *   text[id]  the token as written in tokenizer.json ("Ġthe", "<|im_end|>")
 *   key[id]   what the model matches: for byte-level tokenizers the text
 *             mapped back through GPT-2's unicode->byte table (so "Ġthe" is
 *             " the" and BPE runs on raw bytes); else the text itself
 *   dec[id]   the bytes decoding emits for it (decoder applied per token)
 *
 * Two open-addressing hash tables map strings to ids (slots hold id + 1,
 * 0 = empty): `key_hash` (model vocab by key, for BPE and ignore_merges) and
 * `text_hash` (vocab and added tokens by text, for coli_tokenizer_token_id).
 * Merges are a third table keyed by the pair (left id, right id) holding
 * (rank, merged id). Tables are sized to a power of two >= 2x their entries.
 */
#ifndef COLI_TOKENIZER_INTERNAL_H
#define COLI_TOKENIZER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/coli.h"

#define TOK_MAX_NORM 8 /* normalizer steps */
#define TOK_MAX_PRE  8 /* pre-tokenizer steps */

struct tok_str {
	uint32_t off, len; /* into t->arena; len 0 and off 0 when absent */
};

struct tok_hash {
	uint32_t *slots; /* id + 1, 0 = empty */
	uint32_t mask;
};

struct tok_merge_slot {
	uint64_t pair; /* (uint64)left << 32 | right; UINT64_MAX = empty */
	int32_t rank;
	int32_t id;
};

struct tok_added {
	int id;
	struct tok_str content; /* as matched (normalized first when "normalized") */
	unsigned char first;    /* content's first byte */
	uint8_t lstrip, rstrip, single_word, normalized, special;
};

enum tok_norm_kind {
	TOK_NORM_NFC,
	TOK_NORM_NFD,
	TOK_NORM_NFKC,
	TOK_NORM_NFKD,
	TOK_NORM_PREPEND, /* a = the prefix (only if the string is non-empty) */
	TOK_NORM_REPLACE, /* every literal a -> b */
};

struct tok_norm {
	enum tok_norm_kind kind;
	struct tok_str a, b;
};

enum tok_pre_kind {
	TOK_PRE_SPLIT,     /* regex, behaviour */
	TOK_PRE_BYTELEVEL, /* add_prefix_space (first step only), GPT-2 regex if use_regex */
	TOK_PRE_METASPACE, /* ' ' -> replacement, prepend per scheme, split on it if split */
};

enum tok_split_behavior {
	TOK_SPLIT_ISOLATED,
	TOK_SPLIT_REMOVED,
	TOK_SPLIT_MERGED_PREV,
	TOK_SPLIT_MERGED_NEXT,
};

enum tok_prepend { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER };

struct tok_pre {
	enum tok_pre_kind kind;
	void *re; /* pcre2_code_8 *, or NULL */
	enum tok_split_behavior behavior;
	int add_prefix_space;
	struct tok_str replacement; /* Metaspace: the replacement; Split: a literal pattern */
	enum tok_prepend prepend;
	int split;
};

enum tok_dec_kind {
	TOK_DEC_NONE,      /* token texts concatenated */
	TOK_DEC_BYTELEVEL, /* GPT-2 unicode->byte map */
	TOK_DEC_SPM,       /* Replace(▁, ' ') + ByteFallback + Fuse [+ Strip] or Metaspace */
};

struct coli_tokenizer {
	int n_vocab;
	char *arena;
	size_t arena_len, arena_cap;
	struct tok_str *text, *key, *dec; /* [n_vocab] */
	uint8_t *special;                 /* [n_vocab] */
	struct tok_hash key_hash, text_hash;
	struct tok_merge_slot *merges;
	uint32_t merges_mask;
	int n_merges;

	/* model (BPE) */
	int byte_level;    /* pre-tokenizer maps bytes to GPT-2 unicode */
	int byte_id[256];  /* byte-level: id of each single byte, -1 if none */
	int byte_fallback; /* <0xXX> tokens for characters not in the vocab */
	int fallback_id[256];
	int unk_id; /* -1 if none */
	int fuse_unk;
	int ignore_merges;

	struct tok_added *added; /* sorted by content length, longest first */
	int n_added;
	int added_start[256], added_cnt[256]; /* added[] bucket of each first byte */

	struct tok_norm norm[TOK_MAX_NORM];
	int n_norm;
	struct tok_pre pre[TOK_MAX_PRE];
	int n_pre;

	enum tok_dec_kind dec_kind;
	int dec_strip_start;     /* Strip decoder: leading spaces removed from the stream */
	int dec_strip_first;     /* Metaspace decoder: one leading space of the first token */
	int dec_byte_fallback;   /* SPM: "<0xXX>" decodes as that byte */
	struct tok_str dec_repl; /* SPM: this string decodes as ' ' (usually "▁") */
	size_t max_dec_bytes;    /* longest dec[] string */
};

/* arena and hashing (tokenizer_bpe.c) */
int tok_arena_add(struct coli_tokenizer *t, const void *p, size_t n, struct tok_str *out);
static inline const char *tok_s(const struct coli_tokenizer *t, struct tok_str s)
{
	return t->arena + s.off;
}
int tok_hash_init(struct tok_hash *h, size_t n_entries);
void tok_hash_free(struct tok_hash *h);
/* Inserts id under strs[id]; an existing equal key keeps the first id. */
void tok_hash_put(struct tok_hash *h, const struct coli_tokenizer *t, const struct tok_str *strs,
                  int id);
int tok_hash_get(const struct tok_hash *h, const struct coli_tokenizer *t,
                 const struct tok_str *strs, const char *p, size_t n);
int tok_merges_init(struct coli_tokenizer *t, size_t n);
/* -EEXIST if the pair is already present (the first rank is kept). */
int tok_merges_put(struct coli_tokenizer *t, int a, int b, int rank, int id);
const struct tok_merge_slot *tok_merges_get(const struct coli_tokenizer *t, int a, int b);

/* A growable array of ids. */
struct tok_ids {
	int *v;
	size_t n, cap;
};
int tok_ids_push(struct tok_ids *ids, int id);

/* BPE of one pre-token (bytes of the model's alphabet) appended to out. */
int tok_bpe_word(const struct coli_tokenizer *t, const char *p, size_t n, struct tok_ids *out);

/* GPT-2 byte <-> unicode (tokenizer_decode.c). */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp); /* -1 if cp is not in the map */
/* Decodes UTF-8 of s through the map into out (capacity n); returns the
 * byte count, or -1 if some character is not in the map. */
int tok_bytelevel_unmap(const char *s, size_t n, char *out);
/* Fills t->dec for every id (after vocab, added tokens and decoder are known). */
int tok_decode_build(struct coli_tokenizer *t);

/* UTF-8 helpers, inline: the BPE, the decoder and the pre-tokenizer each use
 * them, and none of those files calls another for them.
 *
 * Scans a UTF-8 sequence at p: *need = its full length (1..4, or 1 for a
 * byte that cannot start one); returns how many bytes from p are a valid
 * prefix of it (1..need), or 0 if p[0] cannot start a sequence. */
static inline int tok_utf8_scan(const unsigned char *p, size_t n, int *need)
{
	unsigned c = p[0], lo = 0x80, hi = 0xBF;

	if (c < 0x80)
		return *need = 1, 1;
	if (c >= 0xC2 && c <= 0xDF)
		*need = 2;
	else if (c >= 0xE0 && c <= 0xEF)
		*need = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
	else if (c >= 0xF0 && c <= 0xF4)
		*need = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
	else
		return *need = 1, 0;
	int got = 1;
	for (; got < *need && (size_t)got < n; got++) {
		unsigned x = p[got];
		if (x < (got == 1 ? lo : 0x80) || x > (got == 1 ? hi : 0xBF))
			break;
	}
	return got;
}

/* Length of a valid sequence at p (1..4), or 0 if invalid / truncated within n. */
static inline int tok_utf8_len(const unsigned char *p, size_t n)
{
	int need, got = tok_utf8_scan(p, n, &need);
	return got == need ? need : 0;
}

/* Runs the normalizer steps on s[0..n); *out malloc'd (tokenizer_encode.c). */
int tok_normalize(const struct coli_tokenizer *t, const char *s, size_t n, char **out,
                  size_t *out_len);

/* Encode-side setup: GPT-2 regex compile, regex compile (tokenizer_encode.c). */
int tok_regex_compile(const char *pat, size_t n, void **out, char *err, size_t errlen);
void tok_regex_free(void *re);

#endif
