/*
 * cpu/dtype.h — the weight formats as names and sizes: the leaf header that
 * io/, ptx/ and core/ include (and that libcoli installs beside core/coli.h),
 * so the container reader and the GPU backend know a format without seeing
 * the CPU's kernels (tools/check_layers.py's part "cpu/dtype"; the functions
 * are in cpu/dtype.c). What the formats hold, and the canonical reduction
 * every backend follows, are in cpu/cpu.h.
 *
 *   F32   float  [rows][K]
 *   F16   uint16 [rows][K]                       IEEE half
 *   BF16  uint16 [rows][K]                       top 16 bits of an fp32
 *   Q8_0  int8   [rows][K]         then  fp16 d [rows][K/32]
 *   Q4_0  uint8  [rows][K/2]       then  fp16 d [rows][K/32]
 *
 * GGUF's other block types, kept as the GGUF stores them: each row is its
 * K / elems blocks, whole and in order, rows one after the other (no
 * planes: a block holds its scales beside its quants). Their blocks, values
 * and canonical reduction are in cpu/kquant/kquant.c; the bytes a block:
 *
 *   Q4_1 20, Q5_0 22, Q5_1 24 (blocks of 32)
 *   Q2_K 84, Q3_K 110, Q4_K 144, Q5_K 176, Q6_K 210 (blocks of 256)
 *
 * The values are stored in the container: never renumber them.
 */
#ifndef COLI_CPU_DTYPE_H
#define COLI_CPU_DTYPE_H

#include <stddef.h>

enum coli_dtype {
	COLI_DTYPE_F32 = 0,
	COLI_DTYPE_F16 = 1,
	COLI_DTYPE_BF16 = 2,
	COLI_DTYPE_Q8_0 = 8,
	COLI_DTYPE_Q4_0 = 9,
	COLI_DTYPE_Q4_1 = 10,
	COLI_DTYPE_Q5_0 = 11,
	COLI_DTYPE_Q5_1 = 12,
	COLI_DTYPE_Q2_K = 13,
	COLI_DTYPE_Q3_K = 14,
	COLI_DTYPE_Q4_K = 15,
	COLI_DTYPE_Q5_K = 16,
	COLI_DTYPE_Q6_K = 17,
};

#define COLI_QBLOCK 32 /* elements per quantization block */

const char *coli_dtype_name(enum coli_dtype t);
/* "f32" "f16" "bf16" "q8"/"q8_0" "q4"/"q4_0" -> dtype; -EINVAL otherwise */
int coli_dtype_parse(const char *s, enum coli_dtype *out);
/* 1 for every type whose GEMV takes quantized activations (Q8_0, Q4_0 and
 * the block types below). */
int coli_dtype_is_quant(enum coli_dtype t);
/* 1 for GGUF's block types kept as stored (Q4_1 ... Q6_K): rows of whole
 * blocks. Their block: elements and bytes (-EINVAL, both 0, for another
 * type). */
int coli_dtype_is_block(enum coli_dtype t);
int coli_dtype_block(enum coli_dtype t, unsigned *elems, unsigned *bytes);
/* Bytes from one row of a matrix to the next: cols x the element size for
 * F32/F16/BF16, the quant plane's row for Q8_0/Q4_0 (their scales are a
 * plane of their own), the row's blocks for the block types; 0 when cols is
 * not whole blocks. */
size_t coli_dtype_row_bytes(enum coli_dtype t, size_t cols);
/* Bytes of a rows x cols matrix in format t (both planes for quant types).
 * Quant types need cols % 32 == 0; returns 0 when the shape is invalid. */
size_t coli_dtype_mat_bytes(enum coli_dtype t, size_t rows, size_t cols);

#endif
