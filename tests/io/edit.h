/*
 * tests/io/edit.h — editing a .coli image in memory for the tests that feed
 * the reader and the engine bad files: find a section by kind, and re-seal
 * the checksums as a writer would, so the structural checks behind them are
 * what a test exercises. Offsets and fields: io/io_internal.h.
 */
#ifndef COLI_TEST_IO_EDIT_H
#define COLI_TEST_IO_EDIT_H

#include "io/io_internal.h"

/* The section table's entry of the first section of `kind`, or NULL. */
static inline unsigned char *edit_sec_entry(unsigned char *b, uint32_t kind)
{
	for (uint32_t i = 0; i < le32(b + SB_N_SECTIONS) && i < CT_MAX_SECTIONS; i++)
		if (le32(b + CT_SEC_TABLE_OFF + CT_SEC_ENTRY * i + SE_KIND) == kind)
			return b + CT_SEC_TABLE_OFF + CT_SEC_ENTRY * i;
	return NULL;
}

/* Recompute every section checksum and the superblock's over the n bytes
 * of b (entries pointing outside them are left as they are). */
static inline void edit_reseal(unsigned char *b, size_t n)
{
	for (uint32_t i = 0; i < le32(b + SB_N_SECTIONS) && i < CT_MAX_SECTIONS; i++) {
		unsigned char *e = b + CT_SEC_TABLE_OFF + CT_SEC_ENTRY * i;
		uint64_t off = le64(e + SE_OFFSET), bytes = le64(e + SE_BYTES);

		if (off <= n && bytes <= n - off)
			put64(e + SE_XXH, coli_io_xxh64(b + off, bytes));
	}
	put64(b + CT_SUPER_SUM_OFF, coli_io_xxh64(b, CT_SUPER_SUM_OFF));
}

#endif
