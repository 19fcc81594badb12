/*
 * core/coli.h — the public API of libcoli: model config, conversion, the
 * engine (load, forward, generate), tokenizer and sampler.
 *
 * Tensor names inside a .coli file are coli's own (GGUF-like), whatever the
 * Hugging Face checkpoint called them; core/convert/convert.c maps them:
 *
 *   tok_embd            [vocab, hidden]
 *   out_norm            [hidden]                       f32
 *   lm_head             [vocab, hidden]                absent when tied to tok_embd
 *   blk.N.attn_norm     [hidden]                       f32
 *   blk.N.attn_q        [n_heads*head_dim, hidden]     (+ blk.N.attn_q_bias f32, qkv_bias)
 *   blk.N.attn_k        [n_kv_heads*head_dim, hidden]  (+ blk.N.attn_k_bias)
 *   blk.N.attn_v        [n_kv_heads*head_dim, hidden]  (+ blk.N.attn_v_bias)
 *   blk.N.attn_o        [hidden, n_heads*head_dim]
 *   blk.N.attn_q_norm   [head_dim] (Qwen3, per head) or [n_heads*head_dim] (OLMoE)   f32
 *   blk.N.attn_k_norm   [head_dim] or [n_kv_heads*head_dim]                          f32
 *   blk.N.attn_o_bias   [hidden]                       f32   (gpt-oss: attn_o_bias)
 *   blk.N.attn_sinks    [n_heads]                      f32   (gpt-oss: attn_sinks)
 *   MLA layers (cfg.kv_lora: DeepSeek-V3, Kimi-K2) have instead of attn_q/k/v:
 *   blk.N.attn_q_a      [q_lora, hidden]               (cfg.q_lora; else attn_q [nh*hd, hidden])
 *   blk.N.attn_q_a_norm [q_lora]                       f32
 *   blk.N.attn_q_b      [n_heads*head_dim, q_lora]     head: qk_nope rows, then rope_dim rows
 *   blk.N.attn_kv_a     [kv_lora+rope_dim, hidden]     c_kv rows, then k_pe rows
 *   blk.N.attn_kv_a_norm [kv_lora]                     f32
 *   blk.N.attn_k_b      [n_heads*kv_lora, qk_nope]     W_UK^T: head h's block the transpose of
 *                                                      kv_b_proj's qk_nope rows of head h
 *   blk.N.attn_v_b      [n_heads*v_head, kv_lora]      W_UV: kv_b_proj's v_head rows of head h
 *   blk.N.attn_o        [hidden, n_heads*v_head]
 *   (RoPE rows of attn_q_b / attn_q / attn_kv_a de-interleaved at convert when the
 *   checkpoint's rope_interleave: the engine's RoPE is rotate-half)
 *   blk.N.ffn_norm      [hidden]                       f32
 *   blk.N.router        [n_experts, hidden]            f32   (MoE layers)
 *   blk.N.router_bias   [n_experts]                    f32   (selection only: GLM-4.5's
 *                                                             e_score_correction_bias)
 *   blk.N.exp_gate_bias [n_experts, moe_inter]         f32   (gpt-oss's expert biases,
 *   blk.N.exp_up_bias   [n_experts, moe_inter]         f32    expert_bias; router_bias is
 *   blk.N.exp_down_bias [n_experts, hidden]            f32    then the softmax router's own)
 *   blk.N.shexp_gate    [shared_inter, hidden]         (shared expert: Qwen2-MoE, GLM-4.5)
 *   blk.N.shexp_up      [shared_inter, hidden]
 *   blk.N.shexp_down    [hidden, shared_inter]
 *   blk.N.shexp_router  [1, hidden]                    f32   (its sigmoid gate, shared_gated)
 *   blk.N.ffn_gate      [dense_inter, hidden]          (dense MLP layers)
 *   blk.N.ffn_up        [dense_inter, hidden]
 *   blk.N.ffn_down      [hidden, dense_inter]
 *
 * Routed experts are not tensors: they are slabs in the expert region (io/io.h).
 * Matrices are stored in the model's quant (bf16/q8_0/q4_0); norms, biases and
 * routers in f32. In a q8/q4 model a matrix whose columns are not a multiple
 * of 32 is bf16, an expert layer whole when its hidden or moe_inter is not
 * (coli convert's fallback, docs/quant.md).
 */
#ifndef COLI_H
#define COLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cpu/dtype.h" /* enum coli_dtype */

enum coli_arch {
	COLI_ARCH_QWEN3_MOE = 1,
	COLI_ARCH_QWEN2_MOE = 2,
	COLI_ARCH_OLMOE = 3,
	COLI_ARCH_MIXTRAL = 4,
	COLI_ARCH_GLM4_MOE = 5,
	COLI_ARCH_MINIMAX_M2 = 6,
	COLI_ARCH_DEEPSEEK_V3 = 7,
	COLI_ARCH_GPT_OSS = 8,
};

/* How a MoE layer's router turns its logits into experts and weights. */
enum coli_router_kind {
	/* softmax over all experts, top_k, renormalised when norm_topk_prob */
	COLI_ROUTER_SOFTMAX = 0,
	/* sigmoid scores; selection on score + blk.N.router_bias (when
	 * router_bias), group-limited (n_group, topk_group); weights are the
	 * unbiased scores, renormalised when norm_topk_prob, times routed_scale
	 * (GLM-4.5, DeepSeek-V3) */
	COLI_ROUTER_SIGMOID = 1,
};

/* The routed experts' activation (h from gate g and up u, per element). */
enum coli_ffn_act {
	/* h = silu(g) * u */
	COLI_ACT_SWIGLU = 0,
	/* gpt-oss: g' = min(g, limit), u' = clamp(u, -limit, limit),
	 * h = (u' + 1) * g' * sigmoid(alpha * g') */
	COLI_ACT_SWIGLU_OAI = 1,
};

/* How rope_factor > 1 scales RoPE (transformers' rope_type; "default" is
 * rope_factor 1). "dynamic", "llama3", "longrope" are refused at convert. */
enum coli_rope_scaling {
	/* YaRN: interpolated and extrapolated frequencies blended over a ramp
	 * of dims, cos and sin times an attention factor */
	COLI_ROPE_YARN = 0,
	/* position interpolation: inv_freq / factor */
	COLI_ROPE_LINEAR = 1,
};

#define COLI_MAX_LAYERS 256
#define COLI_MAX_EOS    8

/* The model config as stored in the container's CONFIG section (JSON, keys
 * are the field names below; see docs/container.md). */
struct coli_model_config {
	enum coli_arch arch;
	char model_type[32]; /* "qwen3_moe" ... */
	int n_layers;
	int hidden;
	int n_heads;
	int n_kv_heads;
	int head_dim;
	int vocab;
	int n_experts; /* routed experts per MoE layer */
	int top_k;
	int moe_inter;    /* routed expert intermediate size */
	int shared_inter; /* 0 = no shared expert */
	int shared_gated; /* 1: the shared expert's output is scaled by sigmoid(shexp_router . x)
	                   * (Qwen2-MoE); 0: added as is (GLM-4.5). Optional key [1] */
	int dense_inter;  /* intermediate size of dense MLP layers (0 if none) */
	int norm_topk_prob;
	int qk_norm; /* 0 none, 1 per head (Qwen3), 2 whole projection (OLMoE) */
	int qkv_bias;
	int tie_embeddings;
	int max_ctx;
	/* optional keys (absent from older containers: the defaults in brackets) */
	int rope_dim;       /* leading dims of each head that RoPE rotates [head_dim] */
	int router_kind;    /* enum coli_router_kind [COLI_ROUTER_SOFTMAX] */
	int router_bias;    /* 1: MoE layers carry blk.N.router_bias [0] */
	int n_group;        /* sigmoid routing: expert groups [1] */
	int topk_group;     /* groups kept per token [1] */
	float routed_scale; /* routed experts' weights are multiplied by it [1.0] */
	/* MLA (DeepSeek-V3, Kimi-K2; optional keys, 0 in every other family):
	 * kv_lora > 0 makes every layer's attention MLA, with head_dim =
	 * qk_nope + rope_dim (the query/key head) and n_kv_heads = n_heads */
	int q_lora;  /* rank of q_a/q_b; 0: a plain attn_q [0] */
	int kv_lora; /* rank of the latent KV (the cache's c_kv) [0: not MLA] */
	int qk_nope; /* query/key dims without RoPE, per head [0] */
	int v_head;  /* value dims per head [0] */
	/* RoPE scaling (rope_factor > 1): YaRN (transformers' rope_type "yarn":
	 * inv_freq, the cos/sin attention factor and the softmax scale
	 * correction computed by coli_config_rope) unless rope_scaling says
	 * linear (rope_type "linear": inv_freq / factor) [1 = plain RoPE] */
	float rope_factor;
	int rope_scaling;      /* enum coli_rope_scaling [COLI_ROPE_YARN: the only
	                        * kind before linear, so an older container reads
	                        * as it was written] */
	int rope_orig_ctx;     /* original_max_position_embeddings [0] */
	float yarn_beta_fast;  /* [32] */
	float yarn_beta_slow;  /* [1] */
	float yarn_mscale;     /* [0: absent] */
	float yarn_mscale_all; /* mscale_all_dim [0: absent] */
	float yarn_attn;       /* attention_factor given outright [0: derived] */
	int yarn_truncate;     /* YaRN's correction range rounded to whole dims [1]
	                        * (gpt-oss: "truncate": false) */
	/* gpt-oss (optional keys, 0 in every other family): */
	int sliding_window; /* keys a sliding layer's query sees, itself included [0] */
	int attn_sinks;     /* 1: blk.N.attn_sinks [n_heads], a logit per head in the
	                     * softmax's denominator [0] */
	int attn_o_bias;    /* 1: blk.N.attn_o_bias [hidden] [0] */
	int expert_bias;    /* 1: MoE layers carry blk.N.exp_gate_bias, exp_up_bias
	                     * [n_experts, moe_inter] and exp_down_bias [n_experts,
	                     * hidden]; with router_bias under softmax routing the
	                     * bias is added to the router logits [0] */
	int ffn_act;        /* enum coli_ffn_act of the routed experts [SWIGLU] */
	float act_alpha;    /* SWIGLU_OAI's sigmoid gain [0] */
	float act_limit;    /* SWIGLU_OAI's clamp [0] */
	int is_sliding_layer[COLI_MAX_LAYERS]; /* "sliding_layers": window applies */
	float norm_eps;
	float rope_theta;
	enum coli_dtype quant; /* of matrices and slabs (some bf16: see the top) */
	int is_moe_layer[COLI_MAX_LAYERS];
	int n_eos;
	int eos[COLI_MAX_EOS];
	int bos; /* -1 if none */
};

const char *coli_arch_name(enum coli_arch a);
/* "qwen3_moe" -> arch; -EPROTONOSUPPORT for anything else. */
int coli_arch_parse(const char *model_type, enum coli_arch *out);
/* The supported model_type values, comma separated, for messages. */
const char *coli_arch_supported(void);

/* Zeroes *c and sets the optional fields to what an absent key means (a
 * gated shared expert, softmax routing, one group, scale 1); rope_dim is
 * left 0 for the caller to set (head_dim for full RoPE). */
void coli_config_init(struct coli_model_config *c);
/* JSON <-> struct. _parse fills *c (and validates ranges); errors are
 * described in errbuf. _format returns a malloc'd JSON string. */
int coli_config_parse(const char *json, size_t len, struct coli_model_config *c, char *errbuf,
                      size_t errlen);
char *coli_config_format(const struct coli_model_config *c);
/* RoPE as transformers computes it for c (core/model/rope.c): inv_freq
 * [rope_dim/2] (YaRN's blend of interpolated and extrapolated frequencies
 * when rope_factor > 1, linear's 1/theta^(2i/rope_dim) / factor, else
 * 1/theta^(2i/rope_dim)), *attn the factor cos and
 * sin are multiplied by (1 without YaRN), *scale the softmax scale:
 * head_dim^-0.5, times DeepSeek's mscale(factor, mscale_all_dim)^2 under
 * YaRN, in double then rounded once. */
void coli_config_rope(const struct coli_model_config *c, float *inv_freq, float *attn,
                      float *scale);
/* The context the model was trained for, as vLLM derives max_model_len:
 * max_ctx (max_position_embeddings), under YaRN rope_orig_ctx * factor,
 * under linear scaling max_ctx * factor; at most 2^24. */
int coli_config_ctx_trained(const struct coli_model_config *c);

/* ---- conversion from a Hugging Face checkpoint directory or a GGUF file ---- */
struct coli_convert_opts {
	const char *hf_dir; /* the directory, or a .gguf file */
	const char *out_path;
	enum coli_dtype quant; /* COLI_DTYPE_BF16 (default), Q8_0, Q4_0, Q4_K, Q5_K, Q6_K */
	/* q4k / q5k: matrices written Q6_K instead, by name (comma-separated:
	 * "lm_head", "attn_v" for every layer's, ...); NULL: COLI_QUANT_MIX,
	 * "" or "none": no mix */
	const char *quant_mix;
	int progress;   /* draw a progress bar on stderr */
	int threads;    /* threads converting a chunk (0: all online CPUs) */
	int quant_auto; /* a GGUF source picks quant from its types, an FP8 checkpoint
	                 * takes q8 (docs/quant.md) */
};
/* The default --quant-mix: the embeddings, the output matrix and attention's
 * v take Q6_K under q4k / q5k, as llama.cpp's Q4_K_M / Q5_K_M give them more
 * bits (docs/quant.md has the measured effect). */
#define COLI_QUANT_MIX "tok_embd,lm_head,attn_v"
void coli_convert_opts_init(struct coli_convert_opts *o);
/* 0 or -errno; on failure *errbuf says what and where, and no output file exists. */
int coli_convert(const struct coli_convert_opts *o, char *errbuf, size_t errlen);

/* ---- synthetic models (core/model/synth.c; `coli bench make-model`) ----
 * A valid .coli in the geometry of a real MoE model (docs/shapes.md), with
 * seeded random weights written directly in the target format, at disk speed.
 * No tokenizer section: use token ids. */
struct coli_synth_opts {
	const char *shape; /* "qwen3-30b-a3b", ... (coli_synth_shapes) */
	const char *out_path;
	enum coli_dtype quant; /* BF16, Q8_0, Q4_0 (default Q4_0) */
	int n_layers;          /* 0: the shape's depth */
	uint64_t seed;         /* same seed, shape, quant, layers -> same bytes */
	int threads;           /* generator threads (0: online CPUs) */
	int progress;          /* progress line on stderr */
};
void coli_synth_opts_init(struct coli_synth_opts *o);
/* The shape names, comma separated, for messages. */
const char *coli_synth_shapes(void);
/* The config of a named shape with quant and depth applied (n_layers 0: the
 * shape's); *source (may be NULL) names where its numbers come from.
 * -ENOENT for an unknown name, -EINVAL for a bad depth. */
int coli_synth_shape(const char *name, enum coli_dtype quant, int n_layers,
                     struct coli_model_config *c, const char **source);
/* Write the model; 0 or -errno with err saying what failed (no file left). */
int coli_synth_write(const struct coli_synth_opts *o, char *err, size_t errlen);

/* ===================================================================== */
/* tokenizer (core/tokenizer*.c)                                          */
/* ===================================================================== */
/*
 * A Hugging Face tokenizer.json interpreter: byte-level BPE (Qwen2/Qwen3,
 * OLMoE, GPT-2 style) and SentencePiece-style BPE with byte fallback
 * (Mixtral). docs/tokenizer.md lists what is supported; anything else fails
 * at load with -ENOTSUP and a message naming the feature.
 *
 * encode does not apply the post_processor (no BOS/EOS template): callers
 * add the model's BOS (struct coli_model_config.bos) themselves.
 * A loaded tokenizer is immutable: one may be shared by many threads.
 */
typedef struct coli_tokenizer coli_tokenizer_t;

/* json: the bytes of tokenizer.json (need not be NUL-terminated). */
int coli_tokenizer_load(const char *json, size_t len, coli_tokenizer_t **out, char *err,
                        size_t errlen);
void coli_tokenizer_free(coli_tokenizer_t *t);
/* 1 + the largest id of the vocab and added tokens. */
int coli_tokenizer_n_vocab(const coli_tokenizer_t *t);
/* Id of a token by its text as written in tokenizer.json ("<|im_end|>",
 * "Ġthe"); added tokens first. -1 if none. */
int coli_tokenizer_token_id(const coli_tokenizer_t *t, const char *token_str);
/* Text of a token as written in tokenizer.json (NUL-terminated), or NULL. */
const char *coli_tokenizer_token_str(const coli_tokenizer_t *t, int id);
/* 1 if id is an added token marked "special", else 0. */
int coli_tokenizer_is_special(const coli_tokenizer_t *t, int id);

/* Encode UTF-8 text; added tokens (special or not) written in the text are
 * matched as HF tokenizers does. *ids is malloc'd (free it), even when
 * *n_ids is 0. Invalid UTF-8 anywhere in text: -EILSEQ, nothing returned,
 * and err says the byte offset. */
int coli_tokenizer_encode(const coli_tokenizer_t *t, const char *text, size_t len, int **ids,
                          int *n_ids, char *err, size_t errlen);

/* Streaming decode: feed ids one at a time; only complete UTF-8 comes out.
 * Bytes of an incomplete character are held in pending until completed; an
 * invalid sequence becomes U+FFFD (one per maximal invalid subpart, as
 * Rust's from_utf8_lossy, hence HF's decode). Special tokens decode to
 * their text. */
struct coli_detok {
	unsigned char pending[8]; /* an incomplete UTF-8 sequence (<= 3 bytes) */
	int n_pending;
	int n_tokens;   /* ids pushed so far */
	int n_stripped; /* leading spaces removed so far (decoders that Strip) */
};
void coli_detok_init(struct coli_detok *d);
/* Writes at most cap bytes (not NUL-terminated); returns bytes written, or
 * -EINVAL for an id outside [0, n_vocab), -ENOSPC when cap is too small (d
 * is then unchanged). cap >= coli_tokenizer_max_piece_bytes(t) always fits. */
int coli_detok_push(const coli_tokenizer_t *t, struct coli_detok *d, int id, char *out, size_t cap);
/* End of stream: pending bytes become U+FFFD. Returns bytes written (<= 3*8). */
int coli_detok_flush(const coli_tokenizer_t *t, struct coli_detok *d, char *out, size_t cap);
size_t coli_tokenizer_max_piece_bytes(const coli_tokenizer_t *t);
/* The bytes id decodes to on its own (*len of them, not NUL-terminated;
 * maybe part of a UTF-8 character), before the stream's position rules
 * (leading-space strips): what a token's logprob entry shows. NULL for an
 * id outside [0, n_vocab) or without a token. */
const char *coli_tokenizer_piece(const coli_tokenizer_t *t, int id, size_t *len);
/* Whole-sequence decode (same bytes as pushing every id then flushing);
 * *text is malloc'd and NUL-terminated, *len excludes the NUL. */
int coli_tokenizer_decode(const coli_tokenizer_t *t, const int *ids, int n_ids, char **text,
                          size_t *len);

/* ===================================================================== */
/* Strict numbers (core/parse.c): the whole string, range checked, no     */
/* suffixes. 0, -EINVAL (not a number), -ERANGE (outside [min, max]).      */
/* ===================================================================== */

int coli_parse_long(const char *s, long min, long max, long *out);
int coli_parse_int(const char *s, int min, int max, int *out);
/* Decimal or 0x hexadecimal, no sign (seeds). */
int coli_parse_u64(const char *s, uint64_t max, uint64_t *out);
/* Finite numbers only (no nan, no inf). */
int coli_parse_double(const char *s, double min, double max, double *out);
/* "an integer in 0..65535" ("an integer >= 0" when max is INT_MAX or
 * LONG_MAX), "a number in 0..2": what a range allows, for messages. */
void coli_parse_expect_long(long min, long max, char *buf, size_t len);
void coli_parse_expect_double(double min, double max, char *buf, size_t len);

/* ===================================================================== */
/* Options: one table (core/options.c) drives flags, environment, --help  */
/* and the startup print. Nothing else reads the environment. A choice is */
/* an enum, parsed once from its name; numbers carry bounds.              */
/* ===================================================================== */

enum coli_opt_stream {                       /* --stream: RAM-tier experts */
	               COLI_OPT_STREAM_AUTO, /* split CPU/GPU by measured speed */
	               COLI_OPT_STREAM_OFF,  /* on the CPU */
	               COLI_OPT_STREAM_ONLY  /* all streamed to a GPU */
};
enum coli_opt_dense { COLI_OPT_DENSE_AUTO, COLI_OPT_DENSE_CPU };
/* --spec: n-gram drafts verified in decoding (core/spec.c); auto: while a
 * verification's tokens measure cheaper than plain steps, on the CPU or a
 * GPU (core/spec.c's guard) */
enum coli_opt_spec { COLI_OPT_SPEC_OFF, COLI_OPT_SPEC_NGRAM, COLI_OPT_SPEC_AUTO };
/* --cpu-isa: the CPU kernels (cpu/dispatch.c); every one gives the same
 * bits, so forcing one is for measuring (bench A/B) and tests. The value
 * less one is cpu/cpu.h's enum coli_cpu_isa. */
enum coli_opt_cpu_isa {
	COLI_OPT_CPU_ISA_AUTO,
	COLI_OPT_CPU_ISA_SCALAR,
	COLI_OPT_CPU_ISA_AVX2,
	COLI_OPT_CPU_ISA_AVX512,
	COLI_OPT_CPU_ISA_AMX
};
enum coli_opt_split { COLI_OPT_SPLIT_AUTO, COLI_OPT_SPLIT_LAYERS, COLI_OPT_SPLIT_NONE };
enum coli_opt_io { COLI_OPT_IO_AUTO, COLI_OPT_IO_URING, COLI_OPT_IO_PREAD };
enum coli_opt_verify { COLI_OPT_VERIFY_FIRST, COLI_OPT_VERIFY_ON, COLI_OPT_VERIFY_OFF };
enum coli_opt_fail_at { /* COLI_GPU_FAIL_AT: the op the injected failure strikes */
	                COLI_OPT_FAIL_AT_ANY,
	                COLI_OPT_FAIL_AT_LAUNCH,
	                COLI_OPT_FAIL_AT_COPY,
	                COLI_OPT_FAIL_AT_SYNC,
	                COLI_OPT_FAIL_AT_ALLOC
};
enum coli_opt_ptx_fail { /* COLI_PTX_FAIL: the embedded PTX builds that fail to load */
	                 COLI_OPT_PTX_FAIL_NONE,
	                 COLI_OPT_PTX_FAIL_90,
	                 COLI_OPT_PTX_FAIL_ALL
};

struct coli_opts {
	double ram_gb;           /* --ram-gb: host budget for experts (<0: unlimited) */
	double vram_gb;          /* --vram-gb: device budget (<0: auto) */
	char gpu[64];            /* --gpu auto|off|sim|sim:N|LIST (checked when set) */
	int threads;             /* --threads (0: all online CPUs) */
	int ctx;                 /* --ctx: KV cache positions (0: trained, capped by memory) */
	int ctx_override;        /* --ctx-override: --ctx may exceed the model's max_ctx */
	char kv_type[16];        /* --kv-type T|K,V: f32, bf16, q8 (checked when set) */
	int ubatch;              /* --ubatch: tokens per forward pass (prefill chunk; 0: auto) */
	int parallel;            /* --parallel: sequence slots in the KV cache (0: auto) */
	double kv_gb;            /* --kv-gb: the KV block pool in GB (0: parallel x ctx) */
	int parallel_auto;       /* not a flag: what --parallel 0 may resolve to at most
	                          * (coli_opts_init: 1; colid: 8), memory permitting */
	char usage[512];         /* --usage FILE (empty: beside the model) */
	int usage_off;           /* --usage off|none: no usage file */
	char chat_template[512]; /* --chat-template auto|builtin|FILE (core/chat_detect.c) */
	int profile;             /* --profile */
	char numa_bind[32];      /* --numa-bind auto|off|interleave|N (checked when set) */
	int group_async;         /* COLI_GROUP_ASYNC */
	int cuda_profile;        /* COLI_CUDA_PROFILE */
	int release_host;        /* CUDA_RELEASE_HOST */
	char route_trace[512];   /* ROUTE_TRACE */
	int gpu_fail_after;      /* COLI_GPU_FAIL_AFTER (-1 off) */
	int gpu_fail_dev;        /* COLI_GPU_FAIL_DEV: the device it strikes (-1 every one) */
	int kv_scramble;         /* COLI_KV_SCRAMBLE: the pool's blocks handed out scrambled */
	enum coli_opt_fail_at gpu_fail_at; /* COLI_GPU_FAIL_AT */
	enum coli_opt_ptx_fail ptx_fail;   /* COLI_PTX_FAIL */
	int dev_route;   /* COLI_DEV_ROUTE: route (and plan resident layers) on the dense device */
	int dev_preplan; /* COLI_DEV_PREPLAN: partly resident layers' VRAM experts planned there */
	int dev_graph;   /* COLI_DEV_GRAPH: decode layers replayed as captured graphs */
	int pdl;         /* COLI_PDL: programmatic dependent launch on sm_90+ */
	int tail_ahead;  /* COLI_TAIL_AHEAD: a layer's device tail queued before its CPU rows end */
	int sim_latency_us;          /* COLI_SIM_LATENCY_US: the simulated device's sync */
	enum coli_opt_stream stream; /* --stream */
	enum coli_opt_dense dense;   /* --dense: where attention, norms, routers run */
	enum coli_opt_split split;   /* --split: the dense part over devices */
	int stream_slots;            /* --stream-slots: VRAM staging slabs per device */
	int verbose;                 /* --verbose: the startup print */
	int prefetch;                /* --prefetch on|off: router lookahead */
	enum coli_opt_spec spec;     /* --spec: decoding verifies n-gram drafts (core/spec.c) */
	enum coli_opt_io io;         /* --io: slab streamer backend */
	enum coli_opt_verify verify_slabs; /* --verify-slabs */
	int usage_every; /* --usage-every N: write the usage file every N tokens (0: at close) */
	enum coli_opt_cpu_isa cpu_isa; /* --cpu-isa: force the CPU kernels (process-wide) */
};

/* Defaults, then the environment variables of the table. A malformed or
 * out-of-range variable leaves that option at its default and returns
 * -EINVAL with "NAME='VALUE': expected ..." in err (err may be NULL); the
 * other variables are still read. */
int coli_opts_init(struct coli_opts *o, char *err, size_t errlen);
/* If argv[*i] is an engine flag, consume it (and its value), advance *i and
 * return 1; 0 if it is not an engine flag; -EINVAL (message in err naming
 * the flag, the value and what it allows) if its value is missing or bad. */
int coli_opts_parse_arg(struct coli_opts *o, int argc, char **argv, int *i, char *err,
                        size_t errlen);
/* Set one option by its flag ("--stream") or environment name
 * ("COLI_STREAM") from text, as a flag or the environment would: 0, -ENOENT
 * for an unknown name, -EINVAL (message in err) for a bad value. */
int coli_opts_set(struct coli_opts *o, const char *name, const char *value, char *err,
                  size_t errlen);
/* An option's value as text ("only", "32", "-1") in buf, which it returns;
 * NULL for an unknown name. */
const char *coli_opts_get(const struct coli_opts *o, const char *name, char *buf, size_t len);
/* Every field within its row's bounds and choices (a struct filled by
 * hand, not through the table): 0, or -EINVAL naming the first that is not. */
int coli_opts_check(const struct coli_opts *o, char *err, size_t errlen);
void coli_opts_help(FILE *f);
/* One line per option with its value and what it allows. */
void coli_opts_print(const struct coli_opts *o, FILE *f);

/* ===================================================================== */
/* The engine                                                             */
/* ===================================================================== */

typedef struct coli_engine coli_engine_t;

/* Open a .coli model with options o (NULL: defaults). err says what failed. */
int coli_engine_open(const char *path, const struct coli_opts *o, coli_engine_t **out, char *err,
                     size_t errlen);
void coli_engine_close(coli_engine_t *e);
const struct coli_model_config *coli_engine_config(const coli_engine_t *e);
/* The model's tokenizer, or NULL when the container carries none. */
const coli_tokenizer_t *coli_engine_tokenizer(const coli_engine_t *e);
int coli_engine_ctx(const coli_engine_t *e);    /* KV capacity in tokens */
int coli_engine_ubatch(const coli_engine_t *e); /* tokens per forward pass, as resolved */
int coli_engine_pos(const coli_engine_t *e);    /* tokens in the KV cache */
void coli_engine_reset(coli_engine_t *e);       /* empty the KV cache */
/* Keep the cache's first pos tokens and drop the rest (the next forward runs
 * at position pos), as the prefix cache does: 0, or -EINVAL when pos is
 * negative or past the tokens the cache holds. */
int coli_engine_rewind(coli_engine_t *e, int pos);
/* --numa-bind as coli_engine_open resolved and applied it: the NUMA node the
 * engine's memory and threads are on (>= 0), -1 when none was chosen (off,
 * or a one-node machine: the kernel places), -2 when memory is interleaved
 * over every node. *why (if why is not NULL) is one line saying what and why
 * ("node 1 (auto: node 1 of GPU 0000:17:00.0)"). The opening thread runs on
 * that node afterwards, so threads the caller starts after open inherit it. */
int coli_engine_numa(const coli_engine_t *e, const char **why);
/* Speculative decoding from a draft model (--spec: core/spec.c): coli_generate
 * drafts the next tokens with draft's greedy steps (its own KV cache, kept in
 * step with the text) and verifies them in one forward of e. draft must read
 * text as e does: the same tokenizer (every token's text) or, without
 * tokenizers, the same vocabulary size; else -EINVAL and err says why.
 * draft stays the caller's (close it after e's last generation); NULL
 * detaches it. coli generate --draft. */
int coli_engine_set_draft(coli_engine_t *e, coli_engine_t *draft, char *err, size_t errlen);
/* Why the last coli_engine_forward failed ("" if it did not). */
const char *coli_engine_errmsg(const coli_engine_t *e);
/* Run n tokens at positions pos..pos+n-1 (appending to the KV cache).
 * logits: [n][vocab] when all_logits, else [vocab] for the last token.
 * -E2BIG when the context would overflow (nothing is changed then). */
int coli_engine_forward(coli_engine_t *e, const int *ids, int n, float *logits, int all_logits);
/* The same, but only the greedy choice after the last token: *next = the
 * index of its largest logit, ties to the lowest id (coli_sampler_pick at
 * temperature 0). With the dense part on a GPU the argmax runs there and only
 * the index crosses the bus, not the vocabulary's logits. */
int coli_engine_forward_argmax(coli_engine_t *e, const int *ids, int n, int *next);
/* The greedy choice after each of the n tokens: next[j] = the argmax of token
 * j's logits, as coli_engine_forward with all_logits and coli_argmax a row
 * give it (a greedy verification of drafts, core/spec.c). With the dense part
 * on a GPU the argmaxes run there and only the n indices cross the bus;
 * else the logits land in buf [n][vocab] first. */
int coli_engine_forward_argmax_all(coli_engine_t *e, const int *ids, int n, float *buf, int *next);
/* The same, but *logits = the last token's [vocab] logits in a buffer of the
 * engine's (page-locked when a GPU holds the dense part: the logits land there
 * from the device), valid until the next call on e. Saves coli_engine_forward's
 * copy of the vocabulary into the caller's buffer (152k floats: 30-60 us a
 * token). Same values as coli_engine_forward's. */
int coli_engine_forward_last(coli_engine_t *e, const int *ids, int n, const float **logits);

/* ---- several sequences (core/seq.c; docs/engine.md "Sequences") ----
 * The KV cache holds coli_engine_n_seq slots (--parallel), each a sequence
 * of its own: its rows, its position, its token history. Slot 0 is the one
 * the calls above use (coli_engine_forward, coli_generate). A caller opens a
 * slot per sequence, steps a batch of runs (each n consecutive tokens of one
 * slot from its position: prefill chunks and decode tokens mixed) and
 * closes it. Its rows outlive the close: a later prompt starting with the
 * same tokens keeps them (the prefix cache: hits and saved tokens in
 * coli_engine_stats). On the CPU a row's bits do not depend on
 * the other rows of its batch: a sequence's tokens are those it gets alone. */
#define COLI_MAX_SEQ 64 /* --parallel's bound */
struct coli_run {
	int slot;       /* from coli_engine_seq_open */
	int n;          /* tokens, at the slot's position on */
	const int *ids; /* [n] */
	int logits;     /* 0: none; 1: the last row's [vocab]; 2: every row's [n][vocab] */
};
struct coli_batch {
	int n_runs;
	const struct coli_run *runs; /* [n_runs], each slot at most once */
};
/* Slots in the KV cache (--parallel as resolved at open). */
int coli_engine_n_seq(const coli_engine_t *e);
/* A slot for a new sequence whose prompt is ids[n]: of the slots not open,
 * the one whose own history shares the longest prefix with ids, rows still
 * there (ties: the least recently opened, a slot never opened before any
 * other, then the lowest number: a fresh engine hands out slot 0 first,
 * then 1, 2, ...; the use coli_engine_forward and coli_generate make of
 * slot 0 is no open), keeping that prefix's rows, at most n - 1 tokens (the
 * last is run again for its logits) — or, when longer, the prompt's first
 * full blocks of 32 positions that the prefix index holds (any earlier
 * sequence's, running or closed, whose rows are still in the pool: shared,
 * not copied). Returns the slot (>= 0) and *cached (may be NULL) = the
 * tokens kept; -EBUSY when every slot is open. */
int coli_engine_seq_open(coli_engine_t *e, const int *ids, int n, int *cached);
/* The slot is free again; its full blocks go to the prefix index, its
 * rows stay until the pool needs the blocks. */
void coli_engine_seq_close(coli_engine_t *e, int slot);
/* Tokens in the slot's cache. */
int coli_engine_seq_pos(const coli_engine_t *e, int slot);
/* Keep the slot's first pos tokens (coli_engine_rewind's, for a slot). */
int coli_engine_seq_rewind(coli_engine_t *e, int slot, int pos);
/* The KV pool (core/forward/kv.h): blocks of 32 positions shared by the
 * slots, taken as a slot grows (coli_engine_step) and kept once it closes
 * (the prefix cache, least recently used evicted first when blocks run
 * short). A caller that admits sequences promises each what it may grow to
 * (coli_engine_seq_reserve, after the open); a step never takes another
 * open slot's blocks, nor those promised to it. */
/* Positions the pool holds (every block). */
int coli_engine_kv_tokens(const coli_engine_t *e);
/* Whether a new sequence of n positions (prompt + max_tokens) fits beside
 * the open ones' blocks and promises: 1 now, 0 not yet (wait for one to
 * close), -E2BIG never (more than the pool or the context). */
int coli_engine_kv_fits(const coli_engine_t *e, int n);
/* The same for a prompt ids[n_ids] (n counts it): the blocks its open would
 * take from the prefix cache (another sequence's, running or not) count as
 * there already. Running sequences' full blocks are published first (as an
 * open does). */
int coli_engine_kv_fits_prompt(coli_engine_t *e, const int *ids, int n_ids, int n);
/* Promise the open slot room for n positions (0: none); -ENOSPC, nothing
 * changed, when the pool cannot (coli_engine_kv_fits said 0). */
int coli_engine_seq_reserve(coli_engine_t *e, int slot, int n);
/* One forward over every run of b: the norms, projections and experts see
 * all rows at once (a RAM expert is read once per step), RoPE, the KV
 * append and attention go per run. logits: the rows the runs ask for, in
 * run order ([sum of asked rows][vocab]; NULL when none asks). The rows of
 * all runs are at most coli_engine_ubatch. -EINVAL (a bad run: slot not
 * open or given twice, n < 1, an id outside the vocabulary, too many rows),
 * -E2BIG (a run past the context), -ENOSPC (the pool cannot give the runs'
 * slots the blocks they grow into, beside the open slots' blocks and
 * promises): nothing changed. With the dense part on
 * a device the runs go there together (each row's slot and position in a
 * row table: docs/engine.md "Sequences"); with one slot, a batch is its one
 * run through coli_engine_forward. The rows' logits are copied into the
 * caller's buffer (a decode row: 30-60 us, as coli_engine_forward's). */
int coli_engine_step(coli_engine_t *e, const struct coli_batch *b, float *logits);
/* The same, but the rows' greedy ids: next[j] = coli_argmax of the j-th row
 * asked (in run order), as coli_engine_step's logits give it. With the dense
 * part on a GPU the argmaxes run there and only the ids cross the bus; else
 * the rows land in buf [rows asked][vocab] first. */
int coli_engine_step_argmax(coli_engine_t *e, const struct coli_batch *b, float *buf, int *next);
/* The same, but *logits = the rows asked, in run order, in a buffer of the
 * engine's ([coli_engine_n_seq][vocab], page-locked when a GPU holds the
 * dense part: the rows land there from the device), valid until the next
 * call on e; a run asks at most its last row (logits 0 or 1: -EINVAL
 * else). Saves the copy into the caller's buffer, and with several rows the
 * download into pageable memory (the driver's staging, a few GB/s: 4.9 MB
 * for 8 rows of a 152k vocabulary). Same values as coli_engine_step's. */
int coli_engine_step_last(coli_engine_t *e, const struct coli_batch *b, const float **logits);

/* ---- sampling (core/text/sampler.c, sampler_proc.c; docs/api.md) ----
 *
 * One struct coli_sampler per sequence (a request's choice), owned by the
 * caller: the request's values, the generator's state and the sequence's
 * token history; nothing of it lives in the engine. The logits a token is
 * drawn from are the model's, then in this order:
 *
 *   0. a grammar (constrained decoding): the tokens it refuses are -inf
 *   1. logit_bias: l += bias; a bias of -100 or less bans the token (-inf)
 *   2. repetition_penalty r (transformers' semantics, over the prompt and the
 *      tokens generated so far): a seen token's logit l becomes l / r when
 *      l > 0, else l * r
 *   3. frequency_penalty f and presence_penalty p (OpenAI's, over the
 *      generated tokens only): l -= c * f + (c > 0) * p, c = the token's count
 *   4. temperature T (0: greedy, the largest logit, ties to the lowest id)
 *   5. min_p: tokens whose probability is below min_p times the likeliest
 *      one's are cut (l < l_max + T ln min_p)
 *   6. top-k, then top-p over what is left (renormalised), then one draw
 *
 * (vLLM's order.) logprobs are the model's own distribution: the log-softmax
 * of the raw logits, before any of 1-6 (vLLM's default, "raw_logprobs"), so
 * a token's logprob does not depend on the sampling values. */
#define COLI_SAMPLER_MAX_TOP 20 /* top_logprobs, as OpenAI */

struct coli_logit_bias {
	int id;
	float bias; /* <= -100: banned */
};

/* What the last coli_sampler_pick chose, with logprobs when asked. */
struct coli_sample_out {
	int id;
	float logprob; /* the raw log-softmax of id (when logprobs >= 0) */
	int n_top;     /* = logprobs: the likeliest tokens, best first, ties to lower ids */
	int top_id[COLI_SAMPLER_MAX_TOP];
	float top_logprob[COLI_SAMPLER_MAX_TOP];
};

struct coli_sampler {
	float temperature; /* 0: greedy */
	float top_p;       /* 1: off */
	int top_k;         /* 0: off */
	uint64_t seed;
	uint64_t state; /* rng state (set by coli_sampler_init) */
	/* set after coli_sampler_init, which leaves them off */
	float min_p;                        /* 0: off; [0, 1] */
	float presence_penalty;             /* 0: off */
	float frequency_penalty;            /* 0: off */
	float repetition_penalty;           /* 1: off; > 0 */
	const struct coli_logit_bias *bias; /* [n_bias], the caller's, alive while sampling */
	int n_bias;
	int logprobs; /* -1: none; 0..COLI_SAMPLER_MAX_TOP: the chosen token's logprob and
	               * that many top ones in out */
	struct coli_sample_out out;
	/* the sequence (coli_sampler_begin .. coli_sampler_end): per token id,
	 * bit 31 in the prompt, bits 0-30 times generated; the ids seen */
	int vocab;
	uint32_t *hist; /* [vocab], only with a penalty */
	int *seen;      /* [n_seen] distinct ids with hist != 0 */
	int n_seen, cap_seen;
	float *work; /* [vocab] the processed logits, when any of 1, 2, 3, 5 is on */
	/* constrained decoding (step 0 above; core/text/grammar*.c): the caller's grammar and its
	 * tokenizer's trie (NULL: coli_generate takes the engine's), alive while sampling; once the
	 * grammar accepts, only end_ids (coli_generate adds the model's EOS ids) */
	const struct coli_grammar *grammar;
	const struct coli_vocab_trie *trie;
	int end_ids[8];
	int n_end_ids;
	struct coli_grammar_state *gstate; /* [2] the sequence's (begin .. end), the last
	                                    * mask's key */
	uint64_t *allow;                   /* [vocab / 64] the last mask */
};
/* temperature, top_p, top_k and seed set; everything else off. */
void coli_sampler_init(struct coli_sampler *s, float temperature, float top_p, int top_k,
                       uint64_t seed);
/* Start a sequence: the history holds prompt[n_prompt] (for the repetition
 * penalty). 0, -EINVAL (an id outside [0, vocab)), -ENOMEM. coli_generate
 * calls begin, accept and end itself. */
int coli_sampler_begin(struct coli_sampler *s, int vocab, const int *prompt, int n_prompt);
/* The sequence went on with id (the token picked). */
void coli_sampler_accept(struct coli_sampler *s, int id);
/* Frees the sequence's state; s->out and the values stay. */
void coli_sampler_end(struct coli_sampler *s);
/* 1 when a pick needs the logits (not just their argmax): sampling, any of
 * the processing steps, or logprobs. */
int coli_sampler_needs_logits(const struct coli_sampler *s);
/* The logits steps 1, 2, 3 and 5 make of logits[vocab], into out[vocab]
 * (what the draw sees before its temperature, top-k and top-p). */
void coli_sampler_apply(struct coli_sampler *s, const float *logits, int vocab, float *out);
/* lp[vocab] = log-softmax of logits[vocab] (in double, rounded once): the
 * distribution logprobs report. */
void coli_sampler_logprobs(const float *logits, int vocab, float *lp);
/* Pick a token from logits[vocab]; s->out says which (and its logprobs).
 * Greedy ties go to the lowest id. With a processing step on, the first pick
 * allocates s->work: coli_sampler_end frees it (coli_generate calls it). */
int coli_sampler_pick(struct coli_sampler *s, const float *logits, int vocab);

/* ---- constrained decoding (core/text/grammar*.c; docs/api.md, Structured
 * output) ----
 *
 * A grammar is a pushdown automaton over bytes compiled from a JSON schema
 * (a subset: grammar.c's top comment lists it; any other keyword is refused
 * with -ENOTSUP and its name in err), from "any JSON object", or from a
 * family's tool-call syntax around a tool's parameters. A grammar is
 * immutable: many sequences may share it. The trie is the tokenizer's
 * vocabulary by bytes (built once: coli_vocab_trie_build); the mask of a
 * step walks it with the automaton. */
#define COLI_GRAMMAR_DEPTH 32 /* nesting bound (objects, arrays, $ref recursion) */
struct coli_grammar;
struct coli_grammar_state;
struct coli_vocab_trie;
int coli_grammar_from_schema(const char *schema, size_t len, struct coli_grammar **out, char *err,
                             size_t errlen);
int coli_grammar_json_object(struct coli_grammar **out);
void coli_grammar_free(struct coli_grammar *g);
/* text[len] from the start: 2 a whole value, 1 a prefix of one, 0 refused. */
int coli_grammar_match(const struct coli_grammar *g, const char *text, size_t len);
int coli_vocab_trie_build(const coli_tokenizer_t *t, struct coli_vocab_trie **out);
void coli_vocab_trie_free(struct coli_vocab_trie *v);
size_t coli_vocab_trie_bytes(const struct coli_vocab_trie *v);
/* The engine's trie, built at the first call (on the generating thread). */
const struct coli_vocab_trie *coli_engine_vocab_trie(coli_engine_t *e);
/* allow[(vocab + 63) / 64] = the tokens whose bytes st accepts, plus
 * end_ids[n_end] when st accepts the text as it is; returns their count. */
int coli_grammar_mask(const struct coli_grammar *g, const struct coli_vocab_trie *v,
                      const struct coli_grammar_state *st, const int *end_ids, int n_end,
                      uint64_t *allow, int vocab);
/* out[i] = in[i] where allow's bit i is 1, else -inf (in may be out): the
 * sampler's copy of the logits and the mask in one pass. */
void coli_grammar_mask_logits(const uint64_t *allow, const float *in, float *out, int vocab);

/* ---- generation (shared by coli generate and colid) ---- */
struct coli_gen_stats {
	int n_prompt, n_gen;
	int n_cached; /* prompt tokens whose KV the cache already held (not prefilled) */
	double prefill_s, decode_s;
	int stopped_eos;
	uint64_t expert_calls, expert_bytes;
	/* the MoE overlap window over the decode steps only (see
	 * coli_engine_stats.moe_*_s), and how many forward calls they were */
	double decode_issue_s, decode_plan_s, decode_slabs_s, decode_cpu_s, decode_take_s;
	/* the prompt's forward (--profile): phases, and inside moe the host's
	 * plan, issue (and its device issue, router lookahead), CPU rows, take */
	double prefill_attention_s, prefill_moe_s, prefill_lm_head_s;
	double prefill_plan_s, prefill_issue_s, prefill_devissue_s, prefill_lookahead_s;
	double prefill_slabs_s, prefill_beside_s;
	double prefill_cpu_s, prefill_take_s;
	/* a layer split's hand-overs (--profile: exact) */
	double prefill_handoff_s, decode_handoff_s;
	double decode_devissue_s; /* inside decode_issue_s: the devices' issue */
	double decode_beside_s;   /* inside decode_cpu_s: the devices' issue, overlapped */
	double decode_dev_busy_s;
	double decode_host_bytes; /* slab bytes the RAM and disk tiers served while decoding */
	double decode_dev_ops;    /* device launches, syncs and staging copies while decoding */
	int decode_steps;
	/* --spec: draft tokens verified, accepted, and verifying forwards; 1 when
	 * the drafts came from a draft model (coli_engine_set_draft), 0 n-grams */
	int spec_drafted, spec_accepted, spec_rounds, spec_model;
	double spec_cost; /* --spec auto: a draft token's measured cost in plain steps (0:
	                   * not measured), which decides the drafts verified */
};
/* Called for every generated token with its decoded UTF-8 text (complete
 * characters only; may be empty). Return nonzero to stop. */
typedef int (*coli_gen_cb)(void *arg, int id, const char *text, size_t len);
/* Prefill prompt ids then generate up to max_new tokens, stopping at EOS.
 * The KV cache keeps what it holds of the prompt's beginning (the previous
 * call's prompt and tokens, up to the first id that differs, and never the
 * prompt's last: its logits are needed) and prefills the rest: a prompt that
 * repeats a long system prompt costs only its new part (st->n_cached). The
 * tokens are those of a prefill from empty on the CPU, where a token's bits
 * do not depend on the batch it ran in; on a GPU, bf16 matrices run on the
 * tensor cores from 16 tokens on and round otherwise. */
int coli_generate(coli_engine_t *e, const int *prompt, int n_prompt, int max_new,
                  struct coli_sampler *s, coli_gen_cb cb, void *arg, struct coli_gen_stats *st);
struct coli_spec;
/* One sequence's generation in a slot, stepped by the caller (colid's
 * continuous batching; core/seq.c): begin after coli_engine_seq_open
 * (cached: the tokens it kept); each step, coli_seq_gen_run gives the run
 * to put in the batch (the prompt's next chunk of at most room tokens, then
 * the last token picked; 0: nothing, done) and, after coli_engine_step,
 * coli_seq_gen_after takes the run's logits row (NULL while the prompt is
 * not all in), picks the token as coli_generate would (the same ids for the
 * same logits), streams it to cb and sets done at EOS, max_new or a nonzero
 * cb. end flushes the text (rc 0), ends the sampler and fills st; the slot
 * stays the caller's to close. */
struct coli_seq_gen {
	int slot, n_prompt, max_new;
	const int *prompt; /* [n_prompt], the caller's, alive until end */
	int fed;           /* prompt tokens in the slot (the cached ones too) */
	int next;          /* the token to feed next (decoding) */
	int done, greedy;
	struct coli_sampler *s;
	coli_gen_cb cb;
	void *arg;
	struct coli_detok dt;
	char *text;
	size_t cap;
	double t0, t1;            /* begin, the first token */
	struct coli_gen_stats st; /* n_prompt, n_cached, n_gen, prefill_s, decode_s,
	                           * stopped_eos, decode_steps, spec_* */
	struct coli_spec *spec;   /* --spec's drafts, or NULL */
	float *vlogits;           /* a verification's [k + 1][vocab] */
	double step_t0;           /* a plain step's start after a declined draft */
};
int coli_seq_gen_begin(coli_engine_t *e, struct coli_seq_gen *g, int slot, int cached,
                       const int *prompt, int n_prompt, int max_new, struct coli_sampler *s,
                       coli_gen_cb cb, void *arg);
int coli_seq_gen_run(const struct coli_seq_gen *g, int room, struct coli_run *run);
int coli_seq_gen_after(coli_engine_t *e, struct coli_seq_gen *g, const struct coli_run *run,
                       const float *logits);
void coli_seq_gen_end(coli_engine_t *e, struct coli_seq_gen *g, int rc);
/* Speculative decoding for a sequence decoding alone (--spec, as
 * coli_generate does it; colid calls it while one sequence runs): drafts
 * from the slot's tokens, verifies them in one coli_engine_step of the slot,
 * picks a token from each row in order while it is the draft's next, and
 * streams them. Returns the tokens streamed, 0 when there is no draft (run
 * the plain step; its time feeds --spec auto's measure), or -errno. The
 * tokens are the plain steps' (the rows are batch-invariant, and the
 * sampler draws from them in the order it would have). */
int coli_seq_gen_spec(coli_engine_t *e, struct coli_seq_gen *g);

/* ---- where experts came from (filled by the tier manager, read by
 * generate's summary, coli bench and colid's /metrics) ----
 * Counters are cumulative since coli_engine_open; callers diff two reads. */
enum coli_tier { COLI_TIER_VRAM = 0, COLI_TIER_RAM = 1, COLI_TIER_DISK = 2, COLI_TIER_N = 3 };
/* coli_engine_stats moe_layer: layers by slab copies 0, 1, 2, 3+ (classes),
 * a count and six times each (fields) */
#define COLI_TL_CLASSES 4
#define COLI_TL_FIELDS  8

struct coli_engine_stats {
	uint64_t tokens;             /* tokens run through the forward pass */
	uint64_t expert_uses;        /* (token, routed expert) pairs */
	uint64_t hits[COLI_TIER_N];  /* expert-layer loads served by each tier */
	uint64_t bytes[COLI_TIER_N]; /* slab bytes served by each tier */
	uint64_t disk_reads;         /* slab reads issued (demand + prefetch) */
	uint64_t disk_bytes_read;
	double disk_read_s; /* wall time with reads in flight */
	double disk_wait_s; /* time the forward pass blocked on disk */
	uint64_t prefetch_issued, prefetch_used, prefetch_wasted;
	uint64_t h2d_bytes;                 /* host -> device copies per token (activations) */
	uint64_t h2d_const_bytes;           /* host -> device uploads of weights (at placement) */
	uint64_t stream_experts;            /* RAM-tier expert loads streamed to a device */
	uint64_t stream_bytes;              /* their slab bytes (part of h2d, per token) */
	uint64_t stream_copy_bytes;         /* slab bytes copied into staging (PCIe, part of h2d) */
	uint64_t stream_staged_hits;        /* streamed experts found staged: a slot still holding
	                                     * it (no copy at issue) */
	uint64_t tail_ahead;                /* decode layers whose device tail was queued before
	                                     * their CPU rows ended (COLI_TAIL_AHEAD) */
	uint64_t moe_layers_on_dense;       /* MoE layer calls whose experts all ran on the
	                                     * dense part's device: outputs never left it */
	uint64_t moe_layers_dev_planned;    /* of those, planned on the device too (fully
	                                     * resident layer, decode): no host round trip */
	uint64_t moe_layers_dev_preplanned; /* partly resident layers whose VRAM experts the
	                                     * device started before the host planned */
	uint64_t dev_graph_replays;         /* decode layers run as a captured graph */
	uint64_t dev_graph_captures;        /* graphs captured (once per layer and T, or
	                                     * once per T for a whole token) */
	int dense_on_device;                /* 1: attention, norms, routers, lm_head on a device */
	/* the MoE overlap window (COLI_CUDA_PROFILE): plan + pack + issue to the
	 * devices | CPU rows (incl. waits for disk) | take (device sync + scatter) */
	double moe_issue_s, moe_cpu_s, moe_take_s;
	double moe_plan_s, moe_slabs_s; /* inside pack+issue: route+plan, pinning host slabs */
	double moe_devissue_s;          /* inside pack+issue: the devices' issue (jobs, copies,
	                                 * launches) */
	double lookahead_s;  /* the router lookahead (core/moe/lookahead.c), wherever it ran */
	double moe_beside_s; /* inside CPU rows: the devices' issue run by the calling thread
	                      * beside the rows' first round (COLI_GROUP_ASYNC=1) */
	double dev_busy_s; /* --profile: device time of the MoE expert work (events), all devices */
	uint64_t dev_ops;  /* launches, syncs and staging copies queued on all devices */
	/* a host-planned decode MoE layer with the dense part on a device, timed
	 * from the moment the host has its routing (core/forward/layer_host.c
	 * coli_dense_dev_moe_host), summed over layer calls by the slab copies the layer queued (0,
	 * 1, 2, 3 or more): [k][0] layer calls; seconds [1] queuing its device part, [2] then
	 * waiting for the routing (the dense chain before it), then after it [3] the first slab
	 * copy queued (0: none), [4] the devices' issue done (0: none), [5] the CPU rows done, [6]
	 * take done (device outputs or copies landed), [7] the outputs queued back: the layer's
	 * host part */
	double moe_layer[COLI_TL_CLASSES][COLI_TL_FIELDS];
	double cost_bw_cpu, cost_bw_stream; /* the cost model's bytes/s of CPU rows and of
	                                     * streaming, as last measured (0: not yet) */
	uint64_t vram_swaps;                /* experts swapped into VRAM between tokens */
	uint64_t vram_readmits; /* of those they replaced, read back into RAM in the background */
	/* faults (core/moe/moe.c): a device's layer failing when queued (issue: the
	 * layer's share goes to the CPU) or when collected (take: its experts are
	 * recomputed on the CPU); a failed device is not used again */
	uint64_t dev_fail_issue, dev_fail_take;
	/* CUDA_RELEASE_HOST (docs/tiers.md): host copies dropped after an upload
	 * to VRAM, and dropped slabs read back from disk because the device that
	 * held them failed (reloads, their bytes: part of the disk tier's) */
	uint64_t host_drops;
	uint64_t reloads, reload_bytes;
	/* wall time per phase of the forward pass (core/forward/forward.c), for coli
	 * bench's split; other = forward_s minus the four phases (handoff, embedding,
	 * residual adds, norms outside the phases) */
	double forward_s;   /* inside coli_engine_forward */
	double attention_s; /* norm, q/k/v, rope, attention, o */
	double attn_core_s; /* of it, the CPU's attention over the cache (scores,
	                    * softmax, values); 0 where a device runs it */
	double moe_s;       /* norm, router, routed + shared experts */
	double dense_mlp_s; /* norm, dense MLP layers */
	double lm_head_s;   /* final norm and lm_head */
	double handoff_s;   /* --split layers: the residual stream between devices */
	/* added by the tier manager (core/place/tiers.c); docs/tiers.md */
	uint64_t lookahead_routed; /* experts routed at layers a lookahead guessed */
	uint64_t lookahead_hit;    /* ... of which the guess named: recall = hit/routed */
	uint64_t ram_budget_bytes; /* resolved --ram-gb */
	uint64_t ram_fixed_bytes;  /* dense + KV cache + scratch counted against it */
	uint64_t slot_bytes;       /* one expert slot (largest slab, 4 KiB rounded) */
	uint64_t ram_slots;        /* expert slots in RAM */
	uint64_t min_slots;        /* the working set: slots one layer needs */
	uint64_t total_slabs;      /* routed experts in the model */
	uint64_t disk_retries;     /* short reads, EIO and checksum re-reads */
	uint64_t kv_bytes;         /* the host KV cache: keys and values, or under MLA
	                            * the latent rows, in --kv-type's bytes */
	uint64_t kv_token_bytes;   /* ... of one token, all layers (kv_bytes / pool tokens) */
	int kv_blocks;             /* the pool: blocks of kv_block_tokens positions (--kv-gb) */
	int kv_block_tokens;       /* positions a block */
	int kv_blocks_used;        /* held by sequences (a block several share counts once) */
	int kv_blocks_cached;      /* held by none, their rows kept for a later prompt
	                            * (the prefix cache): evicted least recently used first */
	int kv_blocks_free;        /* neither */
	int kv_seqs;               /* sequence slots (--parallel) */
	int kv_seqs_open;          /* of those, held by a sequence now */
	uint64_t prefix_hits;      /* prompts that kept a cached prefix (coli_engine_seq_open,
	                            * coli_generate) */
	uint64_t prefix_saved;     /* prompt tokens those kept: not prefilled again */
	uint64_t prefix_shared;    /* ... of which in blocks the slot did not write itself:
	                            * found in the prefix index (coli_engine_seq_open) */
	uint64_t kv_copied;        /* positions copied from a shared block before a write
	                            * over it (after a rewind: copy-on-write) */
	uint64_t steps, step_runs; /* forward calls on the CPU path and the runs (sequences)
	                            * in them: step_runs / steps sequences a step */
};
void coli_engine_stats(const coli_engine_t *e, struct coli_engine_stats *st);
/* Wait until every slab read the engine queued on its own (the usage file's
 * warm-up reads, router prefetches) has landed: a measurement then starts
 * from a settled state (coli bench stream). */
void coli_engine_settle(coli_engine_t *e);

/* ===================================================================== */
/* Chat prompts (core/text/chat.c)                                             */
/* ===================================================================== */
/*
 * The container keeps the model's Hugging Face chat template, which is
 * Jinja. coli_chat_render_call renders a request with it (core/jinja, the
 * default when it parses) or with the built-in renderer of the family the
 * template belongs to (--chat-template builtin, or no usable template),
 * in C (docs/api.md, "Chat templates"):
 *
 *   CHATML  "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message, then
 *           "<|im_start|>assistant\n" (Qwen2/Qwen3, OLMoE-style templates)
 *   INST    [BOS]"[INST] USER [/INST]" and "ASSISTANT" EOS (Mixtral); a
 *           system message is put before the first user message
 *   GLM     "[gMASK]<sop>", then "<|system|>\nS", "<|user|>\nU",
 *           "<|assistant|>\n<think></think>\nA" per message, then
 *           "<|assistant|>" (GLM-4.5; no_think adds "/nothink" to user turns
 *           and "\n<think></think>" to the generation prompt)
 *   MINIMAX "]~!b[]~b]system\nS[e~[\n" (S: the first system message, else
 *           "You are a helpful assistant."), "]~b]user\nU[e~[\n",
 *           "]~b]ai\nA[e~[\n" per message, then "]~b]ai\n<think>\n"
 *           (MiniMax-M2; no thinking switch: no_think is ignored)
 *   DEEPSEEK BOS "S" (the system messages joined by "\n\n"), then "<｜User｜>U",
 *           "<｜Assistant｜></think>A<｜end▁of▁sentence｜>" per message, then
 *           "<｜Assistant｜></think>" (DeepSeek-V3.1; think_on: "<think>")
 *   KIMI    "<|im_system|>system<|im_middle|>S<|im_end|>" (default S when the
 *           first message is not a system one), "<|im_user|>user<|im_middle|>
 *           U<|im_end|>", "<|im_assistant|>assistant<|im_middle|>A<|im_end|>"
 *           per message, then "<|im_assistant|>assistant<|im_middle|>" (Kimi-K2)
 *   HARMONY "<|start|>system<|message|>" + the template's system text (its
 *           identity, "Knowledge cutoff: 2024-06", "Current date: " t->date,
 *           "Reasoning: medium", the valid channels) + "<|end|>"; a first
 *           system or developer message as "<|start|>developer<|message|>#
 *           Instructions\n\nS\n\n<|end|>"; "<|start|>user<|message|>U<|end|>",
 *           "<|start|>assistant<|channel|>final<|message|>A<|end|>" (a last
 *           one without generation prompt ends in <|return|>); then
 *           "<|start|>assistant" (gpt-oss)
 *   PLAIN   the documented fallback: "System: ...\n\nUser: ...\nAssistant:"
 *
 * Detection: markers in the template text, then the tokenizer's added
 * tokens, then the architecture. A template is plain data after _init and
 * can be shared by threads.
 */
enum coli_chat_family {
	COLI_CHAT_PLAIN = 0,
	COLI_CHAT_CHATML = 1,
	COLI_CHAT_INST = 2,
	COLI_CHAT_GLM = 3,
	COLI_CHAT_MINIMAX = 4,
	COLI_CHAT_DEEPSEEK = 5,
	COLI_CHAT_KIMI = 6,
	COLI_CHAT_HARMONY = 7
};

struct coli_chat_msg {
	const char *role;    /* "system", "user" or "assistant" ("developer": harmony only) */
	const char *content; /* UTF-8, NUL-terminated */
};

struct coli_chat_template {
	enum coli_chat_family family;
	char bos[64];      /* text put first (the template names bos_token), or "" */
	char eos[64];      /* text closing an assistant turn (INST), or "" */
	int eot_id;        /* token that ends the assistant's turn (<|im_end|>), or -1 */
	int eot2_id;       /* a second one (harmony's <|call|>: a tool call ends it), or -1 */
	int from_template; /* 1: the family came from the stored template text */
	int no_think;      /* GLM: render as enable_thinking=false; 0 is the
	                    * template's default (thinking on) */
	int think_on;      /* DeepSeek-V3.1: render as thinking=true (given as
	                    * enable_thinking=true); 0 is its default, thinking off */
	char date[16];     /* harmony's "Current date: " (YYYY-MM-DD, the template's
	                    * strftime_now; _init: today, local time) */
	/* The Jinja renderer (core/jinja): the model's template (or --chat-template
	 * FILE) parsed, NULL when the family renders (--chat-template builtin, no
	 * template, or one outside core/jinja's subset: jinja_why says which). */
	struct coli_jinja *jinja;
	char jinja_why[160];
	char bos_token[64]; /* the tokenizer's BOS/EOS text, passed to the template */
	char eos_token[64]; /* as bos_token and eos_token (transformers does the same) */
};

/* A generated reply split as the OpenAI API returns it (core/text/reply.c):
 * reasoning (NULL: none), content, and the tool calls written in family f's
 * format (arguments as JSON text). think_open: the prompt ended inside a
 * reasoning block. tools_json: the request's tools (their schemas type
 * GLM's and MiniMax's key/value arguments), or NULL. Text that does not
 * follow the format stays content. 0 or -ENOMEM; coli_reply_free after. */
struct coli_tool_call {
	char *name, *arguments;
};
struct coli_reply {
	char *reasoning, *content;
	struct coli_tool_call *calls;
	int n_calls;
};
int coli_reply_parse(enum coli_chat_family f, const char *text, size_t n, int think_open,
                     const char *tools_json, struct coli_reply *out);
void coli_reply_free(struct coli_reply *r);
/* Constrained decoding of a tool call in family f's syntax (core/text/
 * grammar_tool.c): tools_json, the request's tools array; name, the function
 * forced, or NULL for any of them. -ENOTSUP for a family not covered. */
int coli_grammar_tool_call(enum coli_chat_family f, const char *tools_json, const char *name,
                           struct coli_grammar **out, char *err, size_t errlen);
/* g (a response_format grammar) made the family's answer: harmony's
 * "<|channel|>final<|message|>" before it; other families unchanged. 0, -ENOMEM. */
int coli_grammar_as_answer(struct coli_grammar *g, enum coli_chat_family f);
const char *coli_chat_family_name(enum coli_chat_family f);
/* The container's chat template text (not NUL-terminated), NULL if none. */
const char *coli_engine_chat_template(const coli_engine_t *e, size_t *len);
/* Detects the family of e's model and fills t, and parses the model's Jinja
 * template (or the file of e's --chat-template option) unless that option is
 * "builtin". Never fails: the family renders when no template parses, PLAIN
 * at worst. coli_chat_template_free releases the parsed template. */
void coli_chat_template_init(const coli_engine_t *e, struct coli_chat_template *t);
void coli_chat_template_free(struct coli_chat_template *t);
/* "jinja" or the family's name: what coli_chat_render_call uses for t */
const char *coli_chat_renderer_name(const struct coli_chat_template *t);
/* Renders n messages (and the assistant's opening when add_generation_prompt)
 * into *out (malloc'd, NUL-terminated, *len without the NUL).
 * -EINVAL for an unknown role, -ENOMEM. */
int coli_chat_render(const struct coli_chat_template *t, const struct coli_chat_msg *m, int n,
                     int add_generation_prompt, char **out, size_t *len);

/* One chat request's inputs (core/text/chat_jinja.c). The Jinja renderer
 * sees what transformers' apply_chat_template passes: messages (as given in
 * messages_json, tool_calls, reasoning_content and all, else built from
 * msgs), tools (or None), documents (None), add_generation_prompt,
 * bos_token, eos_token, enable_thinking when given, and the keys of
 * kwargs_json (chat_template_kwargs). The family renderers see msgs and the
 * thinking switch only, and refuse tools. */
struct coli_chat_call {
	const struct coli_chat_msg *msgs; /* role and content of n_msgs messages */
	int n_msgs;
	const char *messages_json; /* the messages as a JSON array, or NULL: msgs */
	const char *tools_json;    /* a JSON array of tool schemas, or NULL */
	const char *kwargs_json;   /* a JSON object of template variables, or NULL */
	int add_generation_prompt;
	int enable_thinking; /* -1: not given (the template's default), 0 or 1 */
	int64_t now;         /* the time strftime_now formats, seconds; < 0: the clock */
};
/* Renders c with t: the Jinja renderer when t has one, else t's family.
 * *out malloc'd and NUL-terminated. 0; -EINVAL with err filled (a bad
 * message, the template's raise_exception, a limit), -ENOTSUP (tools with a
 * family renderer), -ENOMEM. */
int coli_chat_render_call(const struct coli_chat_template *t, const struct coli_chat_call *c,
                          char **out, size_t *len, char *err, size_t errlen);

/* ---- usage file (core/place/usage.c, docs/tiers.md) ---- */
/* MODEL.usage: the default usage file of a model. */
void coli_usage_default_path(const char *model, char *out, size_t len);
/* Validate `from` against the model (hash and shape) and write it atomically
 * to `to`: `coli usage snapshot` and `restore` are this with the roles swapped. */
int coli_usage_copy(const char *model, const char *from, const char *to, char *err, size_t errlen);

#endif
