/*
 * core/forward/kv.h — the KV cache on the host: the keys and values of the
 * tokens seen so far, and those tokens' ids, for n_seq sequences (--parallel:
 * slots). The forward (core/forward/forward.c on the CPU) writes a slot and
 * advances its pos; core/engine.c sizes it at open (coli_kv_alloc), rewinds
 * slot 0 (coli_engine_reset) and frees it at close (coli_kv_free); core/seq.c
 * hands slots to sequences (coli_engine_seq_open, which may copy a prefix's
 * rows from one slot into another: coli_kv_copy_rows). The dense device keeps its
 * own copy of every slot's rows of its layers (core/forward/dense_dev.c: a
 * slot's stride there is the longest device range's layers), not this one's
 * contents; hist lets the engine rebuild every slot from its token ids if
 * that device fails.
 *
 * Layout: kcache [n_seq][n_layers][ctx] rows of krow bytes, vcache likewise
 * with vrow: a slot is one [n_layers][ctx] block, the unit fixed-size blocks
 * (a pool and block tables) may later replace. A row is one token's keys
 * (values) of one layer, [nkv][hd] values
 * stored as --kv-type says (cpu/cpu.h "typed KV cache rows": fp32, bf16,
 * or q8 with a scale a kv head after the int8s). MLA: kcache's rows are the
 * latent [c_kv normed (kv_lora) || k_pe roped (rope_dim)], q8 with two
 * scales (c_kv's, k_pe's), and there is no vcache (the values are c_kv:
 * the key type is the cache's type).
 */
#ifndef COLI_CORE_FORWARD_KV_H
#define COLI_CORE_FORWARD_KV_H

#include <stddef.h>
#include <stdint.h>

struct coli_model_config;
struct coli_attn_group;

/* One sequence's slot: its block of rows and what is in it. */
struct coli_kv_seq {
	int pos;       /* tokens in the slot */
	int *hist;     /* [ctx] token ids in the slot: the prefix cache's key, and what
	                * the CPU rebuilds the cache from if the dense device fails */
	int open;      /* held by a sequence (coli_engine_seq_open); slot 0 is the
	                * single-sequence calls' (coli_engine_forward) */
	uint64_t used; /* the engine's seq counter when last opened: least recent first */
};

struct coli_kv {
	int ctx;                 /* positions a slot holds */
	int n_seq;               /* slots (--parallel) */
	int n_layers;            /* layers a slot holds */
	void *kcache, *vcache;   /* [n_seq][n_layers][ctx] rows of krow / vrow bytes,
	                          * through mem/; MLA: vcache NULL */
	int kt, vt;              /* enum coli_kv_type of K and V (MLA: vt = kt) */
	int n, seg;              /* values a row (nkv*hd; MLA kv_lora + rope_dim) and
	                          * dims a q8 scale (hd; MLA kv_lora) */
	size_t krow, vrow;       /* bytes of a row (vrow 0 under MLA) */
	size_t bytes;            /* of kcache, every slot */
	size_t vbytes;           /* of vcache (0 under MLA), every slot */
	struct coli_kv_seq *seq; /* [n_seq] */
	uint64_t opens;          /* slots opened so far (coli_kv_seq.used's clock) */
};

/* --kv-type's value: "T" (K and V) or "K,V", each f32, bf16 or q8 -> *kt,
 * *vt (enum coli_kv_type). -EINVAL when malformed. */
int coli_kv_types_parse(const char *s, int *kt, int *vt);
/* Bytes of one token's rows in one layer of model c (K and V; MLA: the
 * latent row), for types kt, vt: the planner's and the stats' unit. */
size_t coli_kv_token_bytes(const struct coli_model_config *c, int kt, int vt);
/* kv for n_seq slots of ctx positions of model c with types kt/vt, on NUMA
 * node `node` (mem/'s values). -ENOMEM: kv holds what was allocated (bytes
 * say how much was asked); coli_kv_free releases it. */
int coli_kv_alloc(struct coli_kv *kv, const struct coli_model_config *c, int n_seq, int ctx, int kt,
                  int vt, int node);
/* Releases what coli_kv_alloc made (a zeroed kv: nothing); kv is zeroed. */
void coli_kv_free(struct coli_kv *kv);
/* Slot `seq`'s layer l rows of T tokens from pos0: k [T][n] (and v [T][n],
 * NULL under MLA) stored in the cache's types. */
void coli_kv_append(struct coli_kv *kv, int seq, int l, int pos0, int T, const float *k,
                    const float *v);
/* Rows [r0, r1) of every layer of slot `from` into slot `to` (K and V, or
 * MLA's latent rows: whole typed rows, byte for byte); the slots' pos and
 * hist are the caller's (core/seq.c's prefix copy). */
void coli_kv_copy_rows(struct coli_kv *kv, int from, int to, int r0, int r1);
/* Group g's (kv head g's; MLA: the one latent head, g 0) typed rows of slot
 * seq's layer l from position k0 into a's K, V and type fields (hd: dims of
 * a head). */
void coli_kv_group_rows(const struct coli_kv *kv, int seq, int l, int g, int hd, int k0,
                        struct coli_attn_group *a);

#endif
