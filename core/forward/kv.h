/*
 * core/forward/kv.h — the KV cache on the host: a pool of fixed-size blocks
 * of token positions, the block table of each of n_seq sequences
 * (--parallel: slots) and those tokens' ids. The forward (core/forward/
 * forward.c on the CPU) grows a slot's table as the slot advances
 * (coli_kv_grow, before a step's rows are written) and writes through it;
 * core/engine.c sizes the pool at open (coli_kv_alloc, --kv-gb), rewinds
 * slot 0 (coli_engine_reset) and frees it at close (coli_kv_free);
 * core/seq.c hands slots to sequences (coli_engine_seq_open: coli_kv_open
 * finds the prompt's cached prefix, coli_kv_release lets it go at the
 * close) and reserves what an admitted request may grow to
 * (coli_kv_reserve). A dense
 * device keeps the rows of its layers in its own memory as the same blocks
 * (core/forward/dense_dev.c: [its layers][n_blocks][B] rows and a device
 * copy of the block tables, brought up to these before each step): this
 * pool alone says which block is whose; hist lets the engine rebuild every
 * slot from its token ids if that device fails.
 *
 * Layout: kcache [n_layers][n_blocks][B] rows of krow bytes, vcache likewise
 * with vrow. Block b is B positions of every layer (rows b * B .. b * B + B
 * - 1 of each layer's [n_blocks][B]); slot s's position p is in its block
 * seq[s].blk[p / B], row p % B of it. Layer-major, so a layer's rows start
 * at one base (the attention's K and V pointers) and a position's row in it
 * is blk * B + p % B: one lookup, no stride a block. B = COLI_KV_BLOCK.
 * A row is one token's keys (values) of one layer, [nkv][hd] values
 * stored as --kv-type says (cpu/cpu.h "typed KV cache rows": fp32, bf16,
 * or q8 with a scale a kv head after the int8s). MLA: kcache's rows are the
 * latent [c_kv normed (kv_lora) || k_pe roped (rope_dim)], q8 with two
 * scales (c_kv's, k_pe's), and there is no vcache (the values are c_kv:
 * the key type is the cache's type).
 *
 * Blocks (core/forward/kv_pool.c): a block is free (on the free stack),
 * held (by the tables that list it: ref of them; open slots', and slot 0's
 * for the single-sequence calls) or cached (held by none, its rows kept,
 * least recently released evicted first when no block is free). Full
 * blocks of final rows are published in an index keyed by their tokens and
 * their predecessor: a new prompt whose first 32k tokens match takes those
 * k blocks into its table (coli_kv_open), no copy — the prefix cache, as
 * large as the pool. A closed slot's table is weak: it keeps the ids with
 * their generations (gen moves on when a block's rows stop being what they
 * were), so its next open keeps its own history to the token where those
 * still match. An open slot may hold a reservation (resv blocks: what its
 * request may grow to, colid's admission): the blocks it has not taken yet
 * are promised, and another slot's growth never takes them.
 */
#ifndef COLI_CORE_FORWARD_KV_H
#define COLI_CORE_FORWARD_KV_H

#include <stddef.h>
#include <stdint.h>

struct coli_model_config;
struct coli_attn_group;

/* Positions a block. 32 = the GPU attention's chunk (AD_CHUNK, ptx/attn/attention.cuh),
 * so a chunk never straddles two blocks once the device pages too; the smallest
 * such size wastes the least (a sequence's last block is half empty on average)
 * and gives a later prefix cache the finest grain. A power of two: the lookup
 * is a shift and a mask. */
#define COLI_KV_BLOCK       32
#define COLI_KV_BLOCK_SHIFT 5

/* One sequence's slot: its block table and what is in it. */
struct coli_kv_seq {
	int pos;        /* tokens in the slot */
	int *blk;       /* [ctx / B rounded up] block ids; the first n_blk listed */
	uint64_t *bgen; /* [ctx / B rounded up] each listed block's generation when
	                 * the table let it go (closed: a weak table) */
	int n_blk;      /* blocks listed: positions [0, n_blk * B) have rows */
	int n_pub;      /* its first n_pub blocks are in the index */
	int held;       /* the table holds its blocks (a reference each): from the
	                 * slot's open to its close, and slot 0 until it is opened */
	int resv;       /* blocks promised to the open slot (coli_kv_reserve), or 0 */
	int *hist;      /* [ctx] token ids in the slot: its own prefix's key, and what
	                 * the CPU rebuilds the cache from if the dense device fails */
	int open;       /* held by a sequence (coli_engine_seq_open); slot 0 is the
	                 * single-sequence calls' (coli_engine_forward) */
	uint64_t used;  /* the engine's seq counter when last opened: least recent first */
};

/* A block's state in the pool (core/forward/kv_pool.c). */
struct coli_kv_block {
	int ref;      /* tables holding it; 0: free or cached */
	uint64_t gen; /* moves on when its rows stop being the rows they were */
	int cached;   /* in the cache's LRU list (prev, next) */
	int prev, next;
	int pub; /* in the index, under key, in its bucket's list (hnext) */
	int hnext;
	int parent;    /* the block before it in its chain (-1: the first) ... */
	uint64_t pgen; /* ... and that one's generation when it was published */
	uint64_t key;  /* hash of its chain's token ids up to its end */
};

struct coli_kv {
	int ctx;      /* positions a slot holds */
	int n_seq;    /* slots (--parallel) */
	int n_layers; /* layers a block holds */
	int n_blocks; /* the pool: blocks of COLI_KV_BLOCK positions */
	int nbs;      /* table entries a slot: ctx / B rounded up */
	int *free;    /* [n_blocks] stack of free block ids, n_free of them */
	int n_free;
	struct coli_kv_block *b; /* [n_blocks] */
	int lru_head, lru_tail;  /* the cached blocks, least recently released first */
	int n_cached;
	int *btok;               /* [n_blocks][B] a published block's token ids */
	int *bucket;             /* [n_bucket] the index's lists, -1 ended */
	int n_bucket;            /* a power of two */
	int rebuild;             /* the rows are being written again from the slots'
	                          * histories (a dense device failed): coli_kv_grow
	                          * only extends, sharing stays */
	void *kcache, *vcache;   /* [n_layers][n_blocks][B] rows of krow / vrow bytes,
	                          * through mem/; MLA: vcache NULL */
	int kt, vt;              /* enum coli_kv_type of K and V (MLA: vt = kt) */
	int n, seg;              /* values a row (nkv*hd; MLA kv_lora + rope_dim) and
	                          * dims a q8 scale (hd; MLA kv_lora) */
	size_t krow, vrow;       /* bytes of a row (vrow 0 under MLA) */
	size_t bytes;            /* of kcache, every block */
	size_t vbytes;           /* of vcache (0 under MLA), every block */
	struct coli_kv_seq *seq; /* [n_seq] */
	uint64_t opens;          /* slots opened so far (coli_kv_seq.used's clock) */
	int node;                /* NUMA node of kcache / vcache (mem/'s values) */
};

/* --kv-type's value: "T" (K and V) or "K,V", each f32, bf16 or q8 -> *kt,
 * *vt (enum coli_kv_type). -EINVAL when malformed. */
int coli_kv_types_parse(const char *s, int *kt, int *vt);
/* Bytes of one token's rows in one layer of model c (K and V; MLA: the
 * latent row), for types kt, vt: the planner's and the stats' unit. */
size_t coli_kv_token_bytes(const struct coli_model_config *c, int kt, int vt);
/* kv for n_seq slots of ctx positions of model c with types kt/vt, a pool
 * of n_blocks blocks (0: n_seq x ctx's, every slot full at once), on NUMA
 * node `node` (mem/'s values). -ENOMEM: kv holds what was allocated (bytes
 * say how much was asked); coli_kv_free releases it. */
int coli_kv_alloc(struct coli_kv *kv, const struct coli_model_config *c, int n_seq, int ctx, int kt,
                  int vt, int n_blocks, int node);
/* Blocks of n positions. */
static inline int coli_kv_blocks_of(int n)
{
	return (n + COLI_KV_BLOCK - 1) / COLI_KV_BLOCK;
}
/* The pool's bookkeeping for n_blocks blocks (coli_kv_alloc's): 0 or
 * -ENOMEM; coli_kv_pool_free releases it. */
int coli_kv_pool_alloc(struct coli_kv *kv);
void coli_kv_pool_free(struct coli_kv *kv);
/* Blocks a new sequence could still take: free and cached, less those
 * promised to open slots and not taken yet. */
int coli_kv_room(const struct coli_kv *kv);
/* Blocks now held by some table (in use) and cached. */
void coli_kv_counts(const struct coli_kv *kv, int *in_use, int *cached);
/* A block copied before a step writes over it (copy-on-write): its first
 * rows rows of every layer from block src into block dst. */
struct coli_kv_cow {
	int src, dst, rows;
};
/* The n runs' slots slot[i] made ready to write positions [pos, upto[i]):
 * blocks past pos's let go; pos's block, if another table holds it too or
 * the index lists it, replaced by a new one whose rows below pos the caller
 * copies (cow[*n_cow] of them, at most n), else given a new generation; then
 * new blocks to upto[i], from the free stack, else the cache's least
 * recently released. A closed slot (slot 0 of a single-sequence call) is
 * held again first: -EINVAL when its rows below pos were taken since.
 * -ENOSPC, nothing changed, when the pool cannot give them all
 * (coli_kv_room), -E2BIG past ctx. While kv->rebuild only the new blocks
 * are taken. */
int coli_kv_grow(struct coli_kv *kv, const int *slot, const int *upto, int n,
                 struct coli_kv_cow *cow, int *n_cow);
/* Slot s's promise: n positions (its blocks held count toward it). -ENOSPC,
 * nothing changed, when the blocks it lacks are not there (coli_kv_room);
 * n 0 drops the promise. */
int coli_kv_reserve(struct coli_kv *kv, int s, int n);
/* Tokens of slot s's own history (its weak table if closed) that ids[n]
 * starts with and whose rows it still has: at most n - 1, below its pos,
 * up to its first block another use took. */
int coli_kv_own_prefix(const struct coli_kv *kv, int s, const int *ids, int n);
/* Slot s (not open) takes the longest cached prefix of ids[n]: its own
 * (own tokens, coli_kv_own_prefix), or when longer the blocks of the index
 * that the prompt's first full blocks match (every held slot's final full
 * blocks published first), at most n - 1 tokens; its pos and history set.
 * Returns the tokens kept; *shared = those kept through the index. ids
 * NULL and n 0: an empty table (coli_engine_reset's). */
int coli_kv_open(struct coli_kv *kv, int s, const int *ids, int n, int own, int *shared);
/* Every open slot's full final blocks published (coli_kv_open does it
 * first; admission too, before it counts what a prompt would share). */
void coli_kv_publish_open(struct coli_kv *kv);
/* The blocks coli_kv_open(kv, s, ids, n, own) would list (s < 0: no free
 * slot, the index's alone) and, in *cached, how many of them are cached now
 * (they leave the room). */
int coli_kv_open_blocks(const struct coli_kv *kv, int s, const int *ids, int n, int own,
                        int *cached);
/* Slot s closed: its full final blocks published, then every block let go
 * (cached when its rows below pos are worth keeping, else freed); its
 * table stays weak. */
void coli_kv_release(struct coli_kv *kv, int s);
/* Every slot's rows to be written again (a dense device failed: core/
 * engine.c): closed slots' own rows held again (their pos cut to what is
 * still theirs; the caller releases them after), the other cached blocks
 * freed, the index cleared. */
void coli_kv_flush(struct coli_kv *kv);
/* Row index of slot s's position p within a layer's [n_blocks][B] rows
 * (p below its n_blk * B). */
static inline size_t coli_kv_row(const struct coli_kv *kv, int s, int p)
{
	return ((size_t)kv->seq[s].blk[p >> COLI_KV_BLOCK_SHIFT] << COLI_KV_BLOCK_SHIFT) |
	       (size_t)(p & (COLI_KV_BLOCK - 1));
}
/* The free blocks handed out from now on in a scrambled order (a fixed
 * shuffle of the free stack): COLI_KV_SCRAMBLE, the tests' way to make
 * every block table unlike the identity, so that a reader or writer that
 * misses the table reads wrong rows. */
void coli_kv_scramble(struct coli_kv *kv);
/* The rows (kcache, vcache) released, the tables and the token ids kept:
 * the dense devices hold every layer's rows (core/engine.c, once the
 * devices are placed). bytes and vbytes still say their size (the RAM
 * budget keeps counting them), so that coli_kv_rows_alloc can bring them
 * back when the dense part moves to the CPU, which rebuilds their contents
 * from hist. */
void coli_kv_rows_drop(struct coli_kv *kv);
/* The rows coli_kv_rows_drop released, allocated again (contents
 * undefined): 0, or -ENOMEM with none. 0 at once when they are there. */
int coli_kv_rows_alloc(struct coli_kv *kv);
/* Releases what coli_kv_alloc made (a zeroed kv: nothing); kv is zeroed. */
void coli_kv_free(struct coli_kv *kv);
/* Slot `seq`'s layer l rows of T tokens from pos0: k [T][n] (and v [T][n],
 * NULL under MLA) stored in the cache's types. */
void coli_kv_append(struct coli_kv *kv, int seq, int l, int pos0, int T, const float *k,
                    const float *v);
/* A copy-on-write on the host rows: the first c->rows rows of every layer
 * of block c->src into block c->dst (K and V, or MLA's latent rows: whole
 * typed rows, byte for byte). */
void coli_kv_copy_block(struct coli_kv *kv, const struct coli_kv_cow *c);
/* Group g's (kv head g's; MLA: the one latent head, g 0) typed rows of slot
 * seq's layer l from position k0 into a's K, V, type and block-table fields
 * (hd: dims of a head): the layer's base, the slot's table and k0, so the
 * attention reads position k0 + i at its block's row (cpu/cpu.h
 * coli_kv_rows_index). */
void coli_kv_group_rows(const struct coli_kv *kv, int seq, int l, int g, int hd, int k0,
                        struct coli_attn_group *a);

#endif
