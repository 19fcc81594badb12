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
};

#define COLI_QBLOCK 32 /* elements per quantization block */

const char *coli_dtype_name(enum coli_dtype t);
/* "f32" "f16" "bf16" "q8"/"q8_0" "q4"/"q4_0" -> dtype; -EINVAL otherwise */
int coli_dtype_parse(const char *s, enum coli_dtype *out);
int coli_dtype_is_quant(enum coli_dtype t);
/* Bytes of a rows x cols matrix in format t (both planes for quant types).
 * Quant types need cols % 32 == 0; returns 0 when the shape is invalid. */
size_t coli_dtype_mat_bytes(enum coli_dtype t, size_t rows, size_t cols);

#endif
