/*
 * cpu/gemv/gemm_panel_avx512.c — cpu/gemv/gemm_panel.h with AVX-512 VNNI on
 * 256-bit vectors: a unit's sums as vpdpbusd into int32, scaled by vpmulld.
 */
#define PANEL_VNNI 1
#define PANEL_NAME coli_gemm_panel_avx512
#include "cpu/gemv/gemm_panel.h"
