/*
 * cpu/ggml.h — the tensor types of ggml (llama.cpp's library, the types a
 * GGUF file holds) as names, block sizes and dequantization to fp32. A leaf
 * like cpu/dtype.h (tools/check_layers.py's part "cpu/dtype"): io/gguf.c
 * sizes tensors with it, the converter reads weights through it.
 *
 * Blocks (little endian; d, dmin, m: IEEE half; K-quants are 256 elements):
 *
 *   Q4_0   d, qs[16]                      x = d * (nibble - 8)
 *   Q4_1   d, m, qs[16]                   x = d * nibble + m
 *   Q5_0   d, qh[4], qs[16]               x = d * ((nibble | bit << 4) - 16)
 *   Q5_1   d, m, qh[4], qs[16]            x = d * (nibble | bit << 4) + m
 *   Q8_0   d, qs[32] (int8)               x = qs * d
 *   Q2_K   scales[16], qs[64], d, dmin    16 groups of 16: 4-bit scale and min
 *   Q3_K   hmask[32], qs[64], scales[12], d        16 groups: 6-bit signed scales
 *   Q4_K   d, dmin, scales[12], qs[128]            8 groups of 32: 6-bit scale, min
 *   Q5_K   d, dmin, scales[12], qh[32], qs[128]    the same with a fifth bit
 *   Q6_K   ql[128], qh[64], scales[16] (int8), d   16 groups of 16
 *   MXFP4  e (E8M0), qs[16]               x = 2^(e-127) * FP4(nibble)
 *
 * In the 32-element types byte j holds elements j (low nibble) and j + 16
 * (high). Dequantization gives the bits of the `gguf` Python package's
 * (tests/cpu/ggml_dequant.c checks every type): each value is one product,
 * or a product and a sum, in float.
 */
#ifndef COLI_CPU_GGML_H
#define COLI_CPU_GGML_H

#include <stdint.h>

#include "cpu/dtype.h" /* enum coli_dtype: the formats a repack fills */

/* ggml's numbering (stored in GGUF files: never renumber). */
enum coli_ggml_type {
	COLI_GGML_F32 = 0,
	COLI_GGML_F16 = 1,
	COLI_GGML_Q4_0 = 2,
	COLI_GGML_Q4_1 = 3,
	COLI_GGML_Q5_0 = 6,
	COLI_GGML_Q5_1 = 7,
	COLI_GGML_Q8_0 = 8,
	COLI_GGML_Q2_K = 10,
	COLI_GGML_Q3_K = 11,
	COLI_GGML_Q4_K = 12,
	COLI_GGML_Q5_K = 13,
	COLI_GGML_Q6_K = 14,
	COLI_GGML_BF16 = 30,
	COLI_GGML_MXFP4 = 39,
};

/* A type's name ("Q4_K"), NULL when unknown; its block: elements and bytes
 * (-ENOENT, both 0, when unknown). The names and sizes cover every type a
 * GGUF may hold, IQ and TQ included, so a file can be described and refused
 * by name. */
const char *coli_ggml_type_name(uint32_t type);
int coli_ggml_type_block(uint32_t type, unsigned *elems, unsigned *bytes);
/* 1 if coli_ggml_dequant reads the type. */
int coli_ggml_can_dequant(uint32_t type);
/* n elements (whole blocks) of type at src to fp32 at dst: 0, or -ENOTSUP
 * for a type it cannot read, -EINVAL when n is not whole blocks. */
int coli_ggml_dequant(uint32_t type, const void *src, float *dst, uint64_t n);

/* Blocks kept as stored. coli's Q8_0 and Q4_0 (cpu/cpu.h) hold the same
 * values as ggml's Q8_0 and Q4_0 blocks (the same fp16 scale, int8 quants,
 * nibble order), laid out as two planes instead of 34/18-byte structs: a
 * GGUF tensor of such a type becomes a coli matrix by moving bytes, with no
 * rounding. coli's block types (Q4_1, Q5_0, Q5_1, Q2_K ... Q6_K: cpu/dtype.h)
 * are ggml's blocks as they are, rows of whole blocks: their repack is a
 * copy. F32/F16/BF16, MXFP4 and the rest have no coli twin.
 *
 * _dtype_of: the coli dtype that keeps a ggml type's blocks (-ENOENT when
 * none does); _of_dtype: the ggml type a coli dtype's blocks are (-1 for
 * none: F32, F16, BF16 are not blocks).
 *
 * _same_blocks: 1 if a ggml type's blocks are coli dtype t's.
 * _repack: rows [row0, row1) of a rows x cols matrix of ggml blocks at src
 * (row-major, row r at src + r * cols/32 * block bytes) into dst in coli's
 * planar layout (quants [rows][cols or cols/2], then fp16 scales
 * [rows][cols/32]): disjoint row ranges can be filled by threads. -EINVAL
 * when the pair is not such a twin or cols is not whole blocks. */
int coli_ggml_dtype_of(uint32_t type, enum coli_dtype *t);
int coli_ggml_of_dtype(enum coli_dtype t);
int coli_ggml_same_blocks(uint32_t type, enum coli_dtype t);
int coli_ggml_repack(uint32_t type, const void *src, int rows, int cols, void *dst, int row0,
                     int row1);

#endif
