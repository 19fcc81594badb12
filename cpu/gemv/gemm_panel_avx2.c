/*
 * cpu/gemv/gemm_panel_avx2.c — cpu/gemv/gemm_panel.h on AVX2: a unit's sums as
 * vpmaddubsw pairs in int16, scaled by vpmaddwd.
 */
#define PANEL_VNNI 0
#define PANEL_NAME coli_gemm_panel_avx2
#include "cpu/gemv/gemm_panel.h"
