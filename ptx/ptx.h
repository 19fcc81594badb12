/*
 * ptx/ptx.h — the GPU through the CUDA driver API: libcuda.so.1 loaded with
 * dlopen, precompiled PTX embedded at build time. Without nvcc at build time
 * or without a driver at run time, every entry says "no GPU" and the engine
 * runs on the CPU (said once).
 */
#ifndef COLI_PTX_H
#define COLI_PTX_H

/* Number of usable CUDA devices (0 when none); *why describes the reason when
 * there are none ("built without nvcc", "libcuda.so.1 not found", ...). */
int coli_ptx_probe(const char **why);

#endif
