/*
 * ptx/kernels_abi.h — structures passed from the host to the kernels of
 * ptx/expert/kernels.cu and ptx/dense/dense.cu. Compiled by both gcc (host, x86-64) and nvcc
 * (device): only fixed-size fields and 64-bit pointers, so both see the same layout.
 */
#ifndef COLI_PTX_KERNELS_ABI_H
#define COLI_PTX_KERNELS_ABI_H

#define COLI_GPU_MAX_S 4 /* activation vectors per GEMV job (decode batch) */
/* Rows of a step whose MoE layers may be planned on the device and whose ops
 * may be captured as one graph: a decode step of up to this many sequences
 * (--parallel). A pair a thread in the plan's CTA: top_k <= 16 keeps
 * COLI_GPU_STEP_T * top_k within COLI_GPU_PLAN_MAX_P. */
#define COLI_GPU_STEP_T    16
#define COLI_GPU_GEMV_ROWS 32 /* rows of a job per GEMV CTA (ptx/expert/kernels.cu) */
/* An expert's run of at least this many tokens goes to the tensor-core GEMM
 * (ptx/expert/gemm.cu); shorter runs to GEMV jobs of COLI_GPU_MAX_S. bf16: the GEMV
 * was faster below ~14 tokens on an H200; q8/q4 (128 x 16 tiles for short
 * runs): from 3 tokens on (the crossover of qwen3-30b's 128 experts on an
 * H200, docs/perf/kernels.md). Same bits either way. */
#define COLI_GPU_GEMM_MIN_S   16
#define COLI_GPU_GEMM_MIN_S_Q 3
/* GGUF's block types (ptx/expert/kquant_gemm.cu): from 8 tokens, where their GEMV
 * jobs of COLI_GPU_MAX_S would read the weights twice or more and the GEMM's
 * 128 x 16 tile reads them once (not measured yet; same bits either way).
 * A dense matrix of a block type from 16 tokens: its GEMV is those same
 * jobs, no split dense kernel. */
#define COLI_GPU_GEMM_MIN_S_KQ       8
#define COLI_GPU_DENSE_GEMM_MIN_T_KQ 16
/* A quantized dense matrix (q/k/v, o, ...) times at least this many tokens
 * goes to the GEMM too (the same bits as its GEMV). Lower than this a CTA's
 * walk over K is the GEMM's time whatever the tile count (qwen3-30b's q/k/v
 * and o on an H200, GEMM against GEMV at 16 and 64 tokens:
 * docs/perf/kernels.md). */
#define COLI_GPU_DENSE_GEMM_MIN_T 48
/* Below that, from this many tokens, a q8_0 / q4_0 dense matrix (not
 * lm_head's long q4 rows) takes the GEMV's tensor-core form for a few tokens
 * (ptx/dense/dgemv.cuh dgemm_q_few: 16 rows x 8 or 16 tokens a CTA, the canonical
 * lanes over its warps; the same bits). */
#define COLI_GPU_DMMA_MIN_T 3
/* A wide one (lm_head), whose tiles fill the GPU however few the tokens, from
 * COLI_GPU_MAX_S + 1: past one token the GEMV is bound by its dot products
 * (an H200, q4 lm_head 151,936 x 2,048: 8 tokens 155 us against 252, 4
 * tokens 152 against 128; docs/perf/history/2026-12-03.md). */
#define COLI_GPU_DENSE_GEMM_WIDE_ROWS 32768

/* One matrix [rows x K] times S activation vectors; all pointers are device
 * addresses. Quantized weights read xq/xd/xqsum, float weights read xf. The
 * fields are a macro because the GEMM job (below) starts with the same ones,
 * in the same order: one list, one layout, and the fields stay direct members
 * of both (no nested name at every use). */
#define COLI_GPU_JOB_FIELDS                                                                        \
	const void *w;                /* quants [rows][K] (q4: [rows][K/2]) or bf16 [rows][K] */   \
	const unsigned short *scales; /* fp16 [rows][K/32] (quant types) */                        \
	const signed char *xq;        /* [S][K] int8 activations */                                \
	const float *xd;              /* [S][K/32] activation block scales */                      \
	const int *xqsum;             /* [S][K/32] sum of xq per block (q4) */                     \
	const float *xf;              /* [S][K] fp32 activations (bf16) */                         \
	float *y;                     /* [S][ldy] outputs, row r at y[s*ldy + r] */                \
	int rows, K, S, ldy;
struct coli_gpu_gemv_job {
	COLI_GPU_JOB_FIELDS
};

/* Small tables travel in the launch's parameters instead of memory (the
 * *_inl kernels): nothing to copy, nothing to read over the bus. */
#define COLI_GPU_INL_JOBS 16
/* Jobs a GEMV launch takes (coli_gpu_gemv); longer tables go in several
 * launches (core/moe/moe_dev.c launch_jobs). 4096 x 80 bytes fit a segment
 * of ptx/gpu_mem.c's job ring. */
#define COLI_GPU_MAX_JOBS 4096
struct coli_gpu_gemv_inline {
	struct coli_gpu_gemv_job j[COLI_GPU_INL_JOBS];
};

/* One dense matrix [rows x K] times T activation rows (any T; the dense GEMV
 * of ptx/dense/dense.cu, passed by value). Quantized weights read xq/xd/xqsum (the
 * activations quantized by coli_act_quantize), float weights read xf. */
struct coli_gpu_dense_gemv {
	const void *w; /* [rows][K] in the dtype (q4: [rows][K/2]), 16-byte aligned */
	const unsigned short *scales; /* fp16 [rows][K/32] (quant types) */
	const float *xf;              /* [T][K] fp32 activations (f32, bf16) */
	const signed char *xq;        /* [T][K] int8 activations (quant types) */
	const float *xd;              /* [T][K/32] activation block scales */
	const int *xqsum;             /* [T][K/32] sum of xq per block (q4) */
	float *y;                     /* [T][ldy] outputs, row r of token t at y[t*ldy + r] */
	int rows, K, T, ldy;
	/* y2 != NULL: the rows are three matrices stacked (q, k and v in one
	 * launch): rows [0, rows1) go to y as above, [rows1, rows2) to
	 * y2[t*ldy2 + r - rows1], [rows2, rows) to y3[t*ldy3 + r - rows2] */
	float *y2, *y3;
	int rows1, rows2, ldy2, ldy3;
};

/* One expert matrix [rows x K] times S tokens on tensor cores (ptx/expert/gemm.cu):
 * the prefill form of a GEMV job, S unbounded (the engine's tmax * top_k at
 * most). Same operands and layouts as coli_gpu_gemv_job; K % 32 == 0; for
 * q8/q4 the pointers w, scales, xq must be 16-byte aligned (row strides are
 * multiples of 16 since K % 32 == 0), for bf16 w and xf; scales is read in
 * aligned 4-byte pairs (2 bytes past its end when rows * K/32 is odd, inside
 * any allocation's granularity). q8/q4 results are
 * bit-identical to coli_gemv; bf16 only within rounding (tensor cores). */
#define COLI_GPU_GEMM_TOKENS 64 /* tokens per CTA tile (bf16, the wide q8/q4 tile) */
#define COLI_GPU_GEMM_ROWS_Q 64 /* rows per CTA tile, the wide q8/q4 tile */
/* The q8/q4 tiles, rows x tokens a CTA: 0 wide (64 x 64), 1 (64 x 32) for
 * runs of up to 32 tokens, 2 (128 x 16) for runs of up to 16. A job takes
 * the smallest that holds its run (ptx/expert/gpu_expert.c quant_tile); one launch mixes
 * them. */
#define COLI_GPU_GEMM_TILES_Q        3
#define COLI_GPU_GEMM_TILE_ROWS(t)   ((t) == 2 ? 128 : COLI_GPU_GEMM_ROWS_Q)
#define COLI_GPU_GEMM_TILE_TOKENS(t) (COLI_GPU_GEMM_TOKENS >> (t))
#define COLI_GPU_GEMM_ROWS_BF16      128 /* rows per CTA tile, bf16 */
#define COLI_GPU_GEMM_THREADS_Q      512 /* threads per CTA, q8_0 / q4_0: 4 K groups */
#define COLI_GPU_GEMM_GROUPS_Q       4
/* K steps a group stages ahead, any tile (6 / 8 for the 64 x 32 tiles and
 * 4 / 5 for the wide ones measured the same or slower on an H200) */
#define COLI_GPU_GEMM_STAGES_Q(q4) ((q4) ? 4 : 3)
/* dynamic shared memory of a q8/q4 CTA of tile t: the staged blocks of each
 * group (weights, activations, scales, dx, qsum) and a thread's columns of
 * fold partial sums, p2 and for the wide tile p1 (ptx/expert/gemm.cu; 32 x WT
 * outputs a warp tile, WT = 32 wide, 16 else) */
#define COLI_GPU_GEMM_SMEM_Q(q4, t)                                                                \
	(COLI_GPU_GEMM_STAGES_Q(q4) * COLI_GPU_GEMM_GROUPS_Q *                                     \
	     (COLI_GPU_GEMM_TILE_ROWS(t) * ((q4) ? 20 : 36) + COLI_GPU_GEMM_TILE_TOKENS(t) * 40) + \
	 ((t) == 0 ? 2 * 32 : 16) * COLI_GPU_GEMM_THREADS_Q * 4)
/* GGUF's block types (ptx/expert/kquant_gemm.cu): the q8/q4 tiles and threads, 2
 * stages (the weights go through registers, unpacked, one step ahead), a
 * slot of a group per row 32 int8 + 24 bytes of scales, per token 32 int8
 * + dx + qsum; then the fold's partial sums as q8/q4's */
#define COLI_GPU_GEMM_STAGES_KQ 2
#define COLI_GPU_GEMM_SMEM_KQ(t)                                                                   \
	(COLI_GPU_GEMM_STAGES_KQ * COLI_GPU_GEMM_GROUPS_Q *                                        \
	     (COLI_GPU_GEMM_TILE_ROWS(t) * 56 + COLI_GPU_GEMM_TILE_TOKENS(t) * 40) +               \
	 ((t) == 0 ? 2 * 32 : 16) * COLI_GPU_GEMM_THREADS_Q * 4)
#define COLI_GPU_GEMM_THREADS_BF16 256
struct coli_gpu_gemm_job {
	COLI_GPU_JOB_FIELDS
	int tile0; /* first CTA of the job in the launch: set by coli_gpu_gemm */
	int tile;  /* q8/q4: its tile (0-2, above): set by coli_gpu_gemm */
};
struct coli_gpu_gemm_inline { /* a small table in the launch's parameters */
	struct coli_gpu_gemm_job j[COLI_GPU_INL_JOBS];
};

/* A MoE layer's expert outputs not yet summed (host side: the arguments of
 * coli_gpu_acc_rmsnorm): y [n][H] a row per (token, expert) pair, token [n]
 * and weight w [n] per pair, in pair order (ascending expert) — what
 * coli_moe_accumulate would sum. Device addresses. */
struct coli_gpu_pairs {
	unsigned long long y, token, w;
	int n, pad_;
};

/* Chunks of 32 positions (AD_CHUNK) a split of coli_attn_chunks,
 * coli_attn_prefill and coli_attn_tc holds for a query that sees n
 * positions: a function of n and of the device's split count for the model
 * (max_splits, ptx/attn/gpu_attn.c: about two CTAs per SM over the kv heads, as
 * the scratch allows), never of the batch, the launch or the cache's length,
 * so a query gets the same bits alone, in a prefill batch, in a graph or out
 * of one. A long context is split over max_splits, a short one in splits of
 * COLI_GPU_ATTN_MIN_CPS chunks: below that a CTA's fixed costs (its stages'
 * first latency, the partials and their combine) outweigh its positions
 * (H200, qwen3-30b shape, decode after 1k positions: 1,676 tok/s at 1
 * chunk, 1,790 at 2, 1,937 at 4, 1,804 at 8; docs/perf/kernels.md).
 * The splits holding positions: ceil(ceil(n / 32) / cps), at most
 * max_splits and ceil(ceil(n / 32) / COLI_GPU_ATTN_MIN_CPS).
 * (Macros: nvcc's device code and gcc's host code both use them.) */
#define COLI_GPU_ATTN_MIN_CPS 4
#define COLI_GPU_ATTN_CPS(n, max_splits)                                                           \
	((((n) + 31) / 32 + (max_splits)-1) / (max_splits) > COLI_GPU_ATTN_MIN_CPS                 \
	     ? (((n) + 31) / 32 + (max_splits)-1) / (max_splits)                                   \
	     : COLI_GPU_ATTN_MIN_CPS)

/* coli_attn_chunks' shared memory (ptx/attn/attention.cu AdTile): a chunk's 32
 * rows of one kv head's K and V as the cache stores them (hd values of kesz
 * and vesz bytes), and 256 bytes of row scales with a q8 type; 4 stages of
 * up to 17 KB (three chunks' copies in flight beside the one in use), else
 * 2 up to 34 KB, else 1: at most 64 KiB, which with the kernel's static 10.5
 * KB leaves two CTAs an SM on sm_80/90 and fits sm_86/89's 99 KB a block.
 * (Macros: the kernels' templates and the launcher's host code use them.) */
#define COLI_GPU_AD_TILE(hd, kesz, vesz)                                                           \
	(32 * (hd) * ((kesz) + (vesz)) + ((kesz) == 1 || (vesz) == 1 ? 256 : 0))
#define COLI_GPU_AD_STAGES(tile) ((tile) <= 17408 ? 4 : (tile) <= 34816 ? 2 : 1)
#define COLI_GPU_AD_SMEM(hd, kesz, vesz)                                                           \
	(COLI_GPU_AD_STAGES(COLI_GPU_AD_TILE(hd, kesz, vesz)) * COLI_GPU_AD_TILE(hd, kesz, vesz))

/* coli_attn_tc (ptx/attn/attn_tc.cuh, bf16 and q8 caches): its (query, head)
 * columns a CTA; floats a column's row of scores (40: the B fragments' loads
 * conflict-free); a staged chunk, 32 K rows and 32 V rows as the cache
 * stores them plus 16 bytes a row (ldmatrix's rows in 8 bank groups) and the
 * q8 rows' scales; four stages up to 17 KB, else two; and the dynamic shared
 * memory of TcSmem: the stages, q8's widened K and V ([32][hd + 8] bf16, else
 * 16 bytes), the scores [2][cols][SP], O [cols][hd], 9 words a column. */
#define COLI_GPU_TC_COLS 32
#define COLI_GPU_TC_SP   40
#define COLI_GPU_TC_TILE(hd, kesz, vesz)                                                           \
	(32 * ((hd) * (kesz) + 16) + 32 * ((hd) * (vesz) + 16) +                                   \
	 ((kesz) == 1 || (vesz) == 1 ? 256 : 0))
#define COLI_GPU_TC_STAGES(tile) ((tile) <= 17408 ? 4 : 2)
#define COLI_GPU_TC_SMEM(hd, kesz, vesz)                                                           \
	(COLI_GPU_TC_STAGES(COLI_GPU_TC_TILE(hd, kesz, vesz)) * COLI_GPU_TC_TILE(hd, kesz, vesz) + \
	 ((kesz) == 1 ? 64 * ((hd) + 8) : 16) + ((vesz) == 1 ? 64 * ((hd) + 8) : 16) +             \
	 8 * COLI_GPU_TC_COLS * COLI_GPU_TC_SP + 4 * COLI_GPU_TC_COLS * (hd) +                     \
	 36 * COLI_GPU_TC_COLS)

/* coli_dgemm_f32_j<J> (ptx/dense/dgemm_f32.cuh, a float matrix times a
 * prefill chunk with the split GEMV's bits): rows x tokens a CTA of 16 warps
 * (4 token groups x 4 leaf groups), 16-byte units of each row staged a stage,
 * and the dynamic shared memory: two stages (rows and tokens of 4 * UNITS + 4
 * floats), then the leaf groups' sums [4][threads / 4][16]. */
#define COLI_GPU_DGEMM_ROWS    128
#define COLI_GPU_DGEMM_TOKS    16
#define COLI_GPU_DGEMM_UNITS   32
#define COLI_GPU_DGEMM_THREADS 512
#define COLI_GPU_DGEMM_SMEM                                                                        \
	(2 * 4 * (COLI_GPU_DGEMM_ROWS + COLI_GPU_DGEMM_TOKS) * (4 * COLI_GPU_DGEMM_UNITS + 4) +    \
	 4 * COLI_GPU_DGEMM_THREADS * 16)

/* coli_attn_tcp (ptx/attn/attn_tcp.cuh, a prompt over a bf16 or q8 cache):
 * its (query, head) rows a CTA, a warp's m-tile of 16 each, and the dynamic
 * shared memory of TcpSmem: coli_attn_tc's stages and widened rows, then O
 * [rows][hd + 8] in fp32 and three words a row. */
#define COLI_GPU_TCP_ROWS 128
#define COLI_GPU_TCP_SMEM(hd, kesz, vesz)                                                          \
	(COLI_GPU_TC_STAGES(COLI_GPU_TC_TILE(hd, kesz, vesz)) * COLI_GPU_TC_TILE(hd, kesz, vesz) + \
	 ((kesz) == 1 ? 64 * ((hd) + 8) : 16) + ((vesz) == 1 ? 64 * ((hd) + 8) : 16) +             \
	 4 * COLI_GPU_TCP_ROWS * ((hd) + 8) + 12 * COLI_GPU_TCP_ROWS)

/* Several sequences in one launch (--parallel, core/forward/forward_dev.c):
 * rows [T][2] ints, COLI_GPU_ROWS ints a row: row t's position p and its
 * sequence's slot s. Row t is stored at, and attends to, slot s's positions
 * 0 .. p, each at its block's row of the layer's [n_blocks][32] rows
 * through the device block table (ptx/attn/kv_rows.cuh kv_at); its bits are
 * those of the same query alone (a query's split depends on its own
 * position). NULL (one sequence): row t is at pos0 + t, from *posp when
 * posp is given, of slot 0 of the table the launch is given. */
#define COLI_GPU_ROWS 2

/* The positions a captured decode step's attention launches splits for
 * (ptx/attn/gpu_attn.c): a graph captured at a step ending at position n (pos0 +
 * T) holds the CTAs of the first coli_gpu_attn_reach(n, span) positions, not
 * the whole span's (the same bits: a split past the position returns at
 * once), and may be replayed while pos0 + T stays within them. Buckets of
 * powers of two from COLI_ATTN_REACH0, the last one the whole span; bucket
 * b's reach is coli_gpu_attn_reach((COLI_ATTN_REACH0 << b), span). */
#define COLI_ATTN_REACH0  256
#define COLI_ATTN_BUCKETS 6

static inline int coli_gpu_attn_bucket(int n)
{
	int b = 0;

	while (b < COLI_ATTN_BUCKETS - 1 && (COLI_ATTN_REACH0 << b) < n)
		b++;
	return b;
}

static inline int coli_gpu_attn_reach(int n, int span)
{
	int b = coli_gpu_attn_bucket(n), r = COLI_ATTN_REACH0 << b;

	return b == COLI_ATTN_BUCKETS - 1 || r > span ? span : r;
}

/* Word copies by the SMs (coli_pull): range r is n4[r] 32-bit words from
 * src[r] to dst[r] (device addresses, mapped host memory included). */
#define COLI_GPU_PULLS 4
struct coli_gpu_pulls {
	unsigned long long dst[COLI_GPU_PULLS], src[COLI_GPU_PULLS], n4[COLI_GPU_PULLS];
	int n, pad_;
};

/* Routing on the device (coli_route, ptx/dense/route.cu): per token, softmax of
 * the router logits, the top_k largest (ties to the lower id) in descending
 * order, renormalised when norm; at most this many experts. */
#define COLI_GPU_ROUTE_MAX_E 1024

/* A MoE layer planned on the device (coli_moe_plan): from the routing of
 * T <= COLI_GPU_STEP_T tokens, P = T * K (token, expert) pairs in ascending
 * (expert, token) order, each one GEMV job of S = 1 for gate, up and down
 * (or grouped: gq below), and the pair lists the accumulation reads. An expert whose slabs[] entry
 * is 0 (not resident) gets empty jobs (rows = 0): its pairs keep their place in the lists and y,
 * for the host to fill. All pointers are device addresses. */
#define COLI_GPU_PLAN_MAX_P 256
#define COLI_GPU_PLAN_WARPS (COLI_GPU_PLAN_MAX_P / 32) /* each routes every 8th token */
/* Pairs' rows a plan CTA gathers (grouped): 8 of 2048 int8 = 16 KB, two
 * rounds of its 256 threads' 16-byte loads */
#define COLI_GPU_PLAN_GATHER 8
struct coli_gpu_moe_plan {
	const int *sel;                                /* [T][K] routed experts */
	const float *selw;                             /* [T][K] their weights */
	const unsigned long long *slabs;               /* [E] each expert's resident slab */
	unsigned long long gate_off, up_off, down_off; /* matrix offsets in a slab */
	unsigned long long scale_gu, scale_d; /* scale plane offset from a matrix (0: bf16) */
	const signed char *xq;                /* [T][H] the tokens' activations, int8 */
	const float *xd;                      /* [T][H/32] */
	const int *xqsum;                     /* [T][H/32] */
	const float *xf;                      /* [T][H] f32 (bf16 experts) */
	float *g, *u, *h;                     /* [P][I] */
	const signed char *hq;                /* [P][I] h quantized, and its scales, sums */
	const float *hd;                      /* [P][I/32] */
	const int *hqs;                       /* [P][I/32] */
	float *y;                             /* [P][H] expert outputs, pair order */
	struct coli_gpu_gemv_job *gu_jobs;    /* out [2P]: gate of pair p at 2p, up at 2p+1 */
	struct coli_gpu_gemv_job *down_jobs;  /* out [P] */
	int *pair_token;                      /* out [P] */
	float *pair_w;                        /* out [P] */
	int T, K, H, I;
	const float *rlog; /* [T][E] router logits: route first (coli_route_plan), or NULL */
	int E, norm;       /* experts (always: pair_expert's bound), norm_topk_prob (with rlog) */
	int xquant;        /* activations int8 (q8_0, q4_0, GGUF's block types) or f32 */
	/* out [P] each pair's expert, or NULL: where gpt-oss's per-expert biases
	 * are read (the silu's gate/up rows, the down bias after the down GEMV);
	 * a NaN routing's id E (none left) is written as E - 1, so a bias read
	 * stays inside its table */
	int *pair_expert;
	/* Grouped (gq != NULL; a step of several tokens): the pairs of an expert,
	 * consecutive in pair order, share its weight loads. The plan gathers
	 * the tokens' activation rows into pair order, out [P][H] (gq/gd/gqs
	 * with xquant; gf without), and the first pair
	 * of every COLI_GPU_MAX_S of an expert's run gets the job of them all
	 * (S of them, rows from its own), the others' jobs are empty (rows = 0).
	 * A token's bits are the same either way (a GEMV job's tokens do not
	 * share sums). */
	signed char *gq;
	float *gd;
	int *gqs;
	float *gf;
};

/* ptx/attn/mla.cu's shape, which ptx/attn/gpu_mla.c launches and sizes shared memory
 * for: threads a CTA, heads a CTA (the mma's M), positions a tile, dv n-tiles
 * of 8 a warp (dv <= 8 * 8 * COLI_GPU_MLA_NT = 512), splits at most (the combine's
 * weights in shared memory), outputs a combine CTA (4 a thread). */
#define COLI_GPU_MLA_THREADS    256
#define COLI_GPU_MLA_HEADS      16
#define COLI_GPU_MLA_TILE       32
#define COLI_GPU_MLA_NT         8
#define COLI_GPU_MLA_MAX_SPLITS 64
#define COLI_GPU_MLA_COMB       1024

/* ptx/attn/mla_decode.cuh's shape (the decode kernel):
 * heads a CTA (two m16 tiles), positions a tile, key steps of 16 a warp
 * (dk <= 4 * 16 * COLI_GPU_MLA_DEC_KQ = 640), dv n-tiles of 8 a warp (dv <=
 * 4 * 8 * COLI_GPU_MLA_DEC_NT = 512); COLI_GPU_MLA_THREADS threads. */
#define COLI_GPU_MLA_DEC_HEADS 32
#define COLI_GPU_MLA_DEC_TILE  32
#define COLI_GPU_MLA_DEC_KQ    10
#define COLI_GPU_MLA_DEC_NT    16

/* MLA's elementwise step before attention (ptx/attn/mla.cu coli_mla_prep; the CPU's
 * is core/forward/mla.c coli_mla_rope_rows), for T tokens at positions pos0..
 * (posp != NULL: pos0 is read there when the launch runs), or each at its
 * own position and slot (rows):
 *   cache row of t's position = [rmsnorm(kva[t][0, kl)) * w || rope(kva[t][kl, kl + r)) * f]
 *   qn[h][t][0, np)    = q[t][h][0, np)            (q_nope, head-major for W_UK^T)
 *   qrow[t][h][kl, kl + r) = rope(q[t][h][np, np + r)) * f
 * rope: rotate-half over the r dims at inv_freq [r / 2]; f: YaRN's cos/sin
 * factor (1: none). */
#define COLI_GPU_MLA_PREP_MAXROW 1024 /* kl + r of a typed cache row (shared memory) */
struct coli_gpu_mla_prep {
	const float *kva;      /* [T][kl + r] kv_a's output: c_kv, then k_pe */
	const float *q;        /* [T][nh][np + r] the query heads: q_nope, then q_pe */
	const float *w;        /* [kl] kv_a_norm */
	const float *inv_freq; /* [r / 2] */
	const int *posp;
	void *cache; /* the layer's latent cache: [n_blocks][32] rows of [kl + r] in kt */
	float *qn;   /* [nh][T][np] */
	float *qrow; /* [T][nh][kl + r]: the absorbed query rows (q_pe part written here) */
	int T, nh, np, r, kl, pos0;
	float eps, f;
	int kt; /* enum coli_kv_type (cpu/cpu.h): 0 f32, 1 bf16, 2 q8 (scales of c_kv, k_pe) */
	/* where token t's row goes: kv_at(tab, nbs, slot, p) (ptx/attn/kv_rows.cuh),
	 * slot and p from rows (COLI_GPU_ROWS), else slot 0 at pos0 + t */
	const int *rows, *tab;
	int nbs;
};

#endif
