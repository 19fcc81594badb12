/*
 * core/dev/dev_sim.h — the simulated device's two halves (private to
 * core/dev/): dev_sim.c is the device (memory, the stream's order, the
 * checks of async sources and late downloads, staging, marks, the host wait)
 * and owns the ops table; dev_sim_ops.c is its kernels, the CPU kernels on
 * the ops' argument structs, computing the bits the CPU path computes.
 */
#ifndef COLI_CORE_DEV_SIM_H
#define COLI_CORE_DEV_SIM_H

#include "core/dev/dev.h"

#define F(a) ((float *)(uintptr_t)(a)) /* a float array at a "device address" */

/* Aborts when op would run behind a host wait not yet signalled (a real
 * stream would run it after the deferred ops, the sim cannot; the engine
 * never does it). Every kernel calls it first. */
void coli_dev_sim_in_order(struct coli_dev *d, const char *op);
#define IN_ORDER(d) coli_dev_sim_in_order(d, __func__)

/* The kernels (dev_sim_ops.c), each the member of struct coli_dev_ops it names. */
int coli_dev_sim_gemv(struct coli_dev *d, const struct coli_dev_jobs *a);
int coli_dev_sim_gemm(struct coli_dev *d, const struct coli_dev_jobs *a);
int coli_dev_sim_act_quantize(struct coli_dev *d, const struct coli_dev_quantize *a);
int coli_dev_sim_silu_mul(struct coli_dev *d, const struct coli_dev_silu *a);
int coli_dev_sim_copy(struct coli_dev *d, const struct coli_dev_copy *a);
int coli_dev_sim_rmsnorm(struct coli_dev *d, const struct coli_dev_norm *a);
int coli_dev_sim_add_bias(struct coli_dev *d, const struct coli_dev_bias *a);
int coli_dev_sim_add(struct coli_dev *d, const struct coli_dev_add *a);
int coli_dev_sim_add_rmsnorm(struct coli_dev *d, const struct coli_dev_norm *a);
int coli_dev_sim_qk_rope_store(struct coli_dev *d, const struct coli_dev_qk_rope *a);
int coli_dev_sim_rope(struct coli_dev *d, const struct coli_dev_rope *a);
int coli_dev_sim_attention(struct coli_dev *d, const struct coli_dev_attention *a);
int coli_dev_sim_mla_prep(struct coli_dev *d, const struct coli_gpu_mla_prep *a);
int coli_dev_sim_mla_attention(struct coli_dev *d, const struct coli_dev_mla *a);
int coli_dev_sim_gather_rows(struct coli_dev *d, const struct coli_dev_gather *a);
int coli_dev_sim_embed(struct coli_dev *d, const struct coli_dev_embed *a);
int coli_dev_sim_gated_add(struct coli_dev *d, const struct coli_dev_gated *a);
int coli_dev_sim_argmax(struct coli_dev *d, const struct coli_dev_argmax *a);
int coli_dev_sim_dense_gemv(struct coli_dev *d, const struct coli_dev_dense *op);
int coli_dev_sim_route(struct coli_dev *d, const struct coli_dev_route *a);
int coli_dev_sim_moe_plan(struct coli_dev *d, const struct coli_gpu_moe_plan *a);
int coli_dev_sim_router_plan(struct coli_dev *d, const struct coli_dev_router_plan *a);
int coli_dev_sim_gemv_table(struct coli_dev *d, const struct coli_dev_jobs *a);

#endif
