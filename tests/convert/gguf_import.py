"""tests/convert/gguf_import.py -- a GGUF from a Hugging Face fixture, written
with the `gguf` package (llama.cpp's) under llama.cpp's tensor names and
metadata keys, for tests/convert/gguf_import.sh.

  write HF_DIR OUT.gguf MODE [SPLIT]
                               SPLIT: at most that many tensors a file,
                               written as OUT-00001-of-0000N.gguf ... by the
                               package's splitting writer (gguf-split's
                               names and split.* keys)
                               MODE: bf16   matrices BF16 as stored, 1-D and
                                            the router F32 (exact widenings)
                                     q8_0   matrices Q8_0 (router F32)
                                     q4_mix matrices Q4_0, attn Q5_1, the
                                            embedding Q8_0 (router F32)
                                     q8_0_odd  q8_0 with every block's quants
                                            halved and its scale doubled:
                                            no block reaches |q| = 127, so
                                            requantizing the values would
                                            give other blocks
                                     missing   bf16 without blk.1.attn_k.weight
                                     few_exps  bf16 with blk.0.ffn_up_exps
                                            stacking one expert too few
                                     bad_ffn   bf16 with expert_feed_forward_
                                            length twice the tensors' rows
                                     olmo   bf16, tokenizer.ggml.pre "olmo"
                                     kimi   bf16, HF_DIR a tiktoken checkpoint
                                            (tests/convert/tiktoken_import.py
                                            write): its ranks and specials as
                                            llama.cpp stores Kimi-K2's
                                            (tiktoken_vocab), pre "kimi-k2"
                                     llama  bf16 under architecture "llama"
                                            without expert_count (dense)
The architecture is the fixture's: qwen3moe, qwen2moe (shared expert,
q/k/v biases; ffn_gate_inp_shexp written 1-D as llama.cpp does), olmoe, or
for mixtral "llama" with experts, whose attn_q / attn_k rows are permuted
into ggml's interleaved RoPE order as llama.cpp's converter does.

  blocks IN.gguf OUT.coli      every Q8_0 / Q4_0 matrix of the GGUF whose
                               container matrix has its dtype (q8_0 / q4_0)
                               holds the same bytes, planar (cpu/cpu.h):
                               prints "blocks: N matrices equal"; exit 1 on
                               the first difference

  top1 A.f32 B.f32 VOCAB       prints the positions where argmax differs and
                               the count: "N of M"

The weights are read from model.safetensors with numpy alone (bf16 is the
high half of a float32). The tokenizer comes from tokenizer.json: every id's
string, control type for special added tokens, the merges as "a b"; the
pre-tokenizer name is "qwen2" (Qwen's regex, which the fixtures use), or
"olmo" (mode olmo: GPT-2's regex, for a tokenizer.json rewritten to a
ByteLevel pre-tokenizer: `gpt2tok DIR`).

  seed HF_DIR OUT.gguf         a fuzz seed of the fixture's family
                               (glm4_moe, deepseek_v3, gpt_oss, minimax_m2):
                               its keys, 8 tokens, a small token_embd
                               (tests/fuzz/gguf/arch-*.gguf)

  write for glm4_moe, deepseek_v3(_noqlora), gpt_oss(_mxfp4), minimax_m2:
                               llama.cpp's glm4moe, deepseek2, gpt-oss,
                               minimax-m2 (write_arch: names from the gguf
                               package's TensorNameMap; modes bf16, q8_0,
                               kvb, mxfp4, o200k, softmax, pattern)
  limit7 HF_DIR OUT_DIR        the gpt_oss fixture at swiglu_limit 7
  batch CMD ARGS -- CMD ARGS   several commands, one interpreter start
  o200ktok HF_DIR OUT_DIR      gpt2tok with gpt-oss's o200k Split regex
  glm4tok, dsv3tok             the same with GLM-4.5's (Llama 3's) regex, with
                               DeepSeek-V3's three Splits

  gpt2tok HF_DIR OUT_DIR       the fixture with its tokenizer.json's
                               pre-tokenizer replaced by ByteLevel with
                               GPT-2's regex and no normalizer (the weights
                               linked)
"""
import base64
import json
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, v in hdr.items():
            if name == "__metadata__":
                continue
            a, b = v["data_offsets"]
            f.seek(base + a)
            raw = f.read(b - a)
            if v["dtype"] == "BF16":
                arr = np.frombuffer(raw, dtype=np.uint16).reshape(v["shape"])
                out[name] = ("bf16", arr)
            elif v["dtype"] == "U8":
                out[name] = ("u8", np.frombuffer(raw, dtype=np.uint8).reshape(v["shape"]))
            elif v["dtype"] == "F32":
                out[name] = ("f32", np.frombuffer(raw, dtype=np.float32).reshape(v["shape"]))
            else:
                raise SystemExit(f"{path}: {name}: dtype {v['dtype']} not handled here")
        return out


def as_f32(t):
    kind, arr = t
    if kind == "f32":
        return arr.astype(np.float32)
    return (arr.astype(np.uint32) << 16).view(np.float32)


def add(w, name, t, qtype, odd=False):
    """One tensor: 1-D always F32; 2-D/3-D in qtype."""
    kind, arr = t
    if arr.ndim == 1 or qtype == T.F32:
        w.add_tensor(name, as_f32(t))
    elif qtype == T.BF16:
        if kind == "bf16":
            w.add_tensor(name, np.ascontiguousarray(arr), raw_dtype=T.BF16)
        else:
            w.add_tensor(name, gguf.quants.quantize(as_f32(t), T.BF16), raw_dtype=T.BF16)
    else:
        q = gguf.quants.quantize(as_f32(t), qtype)
        w.add_tensor(name, halve_q8(q) if odd else q, raw_dtype=qtype)


LAYER = {
    "input_layernorm.weight": "attn_norm",
    "post_attention_layernorm.weight": "ffn_norm",
    "self_attn.q_proj.weight": "attn_q",
    "self_attn.k_proj.weight": "attn_k",
    "self_attn.v_proj.weight": "attn_v",
    "self_attn.o_proj.weight": "attn_output",
    "self_attn.q_norm.weight": "attn_q_norm",
    "self_attn.k_norm.weight": "attn_k_norm",
    "mlp.gate.weight": "ffn_gate_inp",
    "block_sparse_moe.gate.weight": "ffn_gate_inp",
    "mlp.gate_proj.weight": "ffn_gate",
    "mlp.up_proj.weight": "ffn_up",
    "mlp.down_proj.weight": "ffn_down",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.bias": "attn_v.bias",
    "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp",
    "mlp.shared_expert.up_proj.weight": "ffn_up_shexp",
    "mlp.shared_expert.down_proj.weight": "ffn_down_shexp",
    "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp",
}


def permute(arr, heads):
    """llama.cpp's LlamaModel.permute: each head's rows from the half-split
    (rotate-half) order to ggml's interleaved RoPE pairs."""
    return (arr.reshape(heads, 2, arr.shape[0] // heads // 2, *arr.shape[1:])
            .swapaxes(1, 2).reshape(arr.shape))


def halve_q8(raw):
    """Q8_0 blocks [..., 34] with quants halved (round to even) and d doubled."""
    b = raw.reshape(-1, 34).copy()
    d = b[:, :2].copy().view(np.float16).astype(np.float32) * 2
    q = b[:, 2:].view(np.int8).astype(np.float32) / 2
    b[:, :2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    b[:, 2:] = np.round(q).astype(np.int8).view(np.uint8)
    return b.reshape(raw.shape)


def qtype_of(mode, gg_name):
    if mode in ("bf16", "llama", "missing", "few_exps", "bad_ffn", "olmo", "kimi"):
        return T.BF16
    if "ffn_gate_inp" in gg_name or gg_name.endswith(".bias"):
        return T.F32
    if mode in ("q8_0", "q8_0_odd"):
        return T.Q8_0
    if gg_name == "token_embd.weight":
        return T.Q8_0
    if ".attn_" in gg_name:
        return T.Q5_1
    return T.Q4_0


def byte_chars():
    """GPT-2's byte-level alphabet: printable Latin-1 bytes stand for
    themselves, the other bytes for 256, 257, ... in byte order."""
    keep = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    m, n = {}, 0
    for b in range(256):
        if b in keep:
            m[b] = chr(b)
        else:
            m[b], n = chr(256 + n), n + 1
    return m


def rank_bpe(ranks, piece, below):
    """piece's bytes merged as tiktoken does (the pair whose join has the
    lowest rank first), using ranks under `below` only."""
    parts = [bytes([b]) for b in piece]
    while len(parts) > 1:
        best = min(((ranks.get(parts[i] + parts[i + 1], below), i) for i in range(len(parts) - 1)))
        if best[0] >= below:
            break
        i = best[1]
        parts[i:i + 2] = [parts[i] + parts[i + 1]]
    return parts


def tiktoken_vocab(tt_dir, n_vocab):
    """A tiktoken checkpoint's tokenizer (tiktoken.model, the specials of
    tokenizer_config.json's added_tokens_decoder) as llama.cpp's converter
    stores it for Kimi-K2: every rank's bytes in byte-level characters, the
    merges that rebuild each token from the two pieces ranked below it (none
    for a token BPE cannot reach), the ids past the ranks control tokens: named
    by added_tokens_decoder, else <|reserved_token_ID|> (Kimi's class)."""
    ranks = {}
    for line in open(f"{tt_dir}/tiktoken.model", "rb"):
        if line.strip():
            t, r = line.split()
            ranks[base64.b64decode(t)] = int(r)
    bc = byte_chars()
    text = lambda b: "".join(bc[x] for x in b)
    tokens = [f"[PAD{i}]" for i in range(n_vocab)]
    types = [gguf.TokenType.UNUSED] * n_vocab
    merges = []
    for t, r in sorted(ranks.items(), key=lambda kv: kv[1]):
        tokens[r], types[r] = text(t), gguf.TokenType.NORMAL
        parts = rank_bpe(ranks, t, r) if len(t) > 1 else []
        if len(parts) == 2:
            merges.append(f"{text(parts[0])} {text(parts[1])}")
    named = json.load(open(f"{tt_dir}/tokenizer_config.json"))["added_tokens_decoder"]
    for i in range(len(ranks), n_vocab):  # Kimi's 256 specials, unnamed ones reserved
        a = named.get(str(i), {"content": f"<|reserved_token_{i}|>"})
        tokens[i], types[i] = a["content"], gguf.TokenType.CONTROL
    return tokens, types, merges


def write(hf_dir, out, mode, split=0):
    cfg = json.load(open(f"{hf_dir}/config.json"))
    tok = json.load(open(f"{hf_dir}/tokenizer.json")) if mode != "kimi" else None
    tcfg = json.load(open(f"{hf_dir}/tokenizer_config.json"))
    st = read_safetensors(f"{hf_dir}/model.safetensors")
    arch = {"qwen3_moe": "qwen3moe", "qwen2_moe": "qwen2moe", "olmoe": "olmoe",
            "mixtral": "llama"}[cfg["model_type"]]
    dense = mode == "llama"  # "llama" without expert_count: a dense model
    arch = "llama" if dense else arch
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    w = gguf.GGUFWriter(out, arch, split_max_tensors=split)
    nl = cfg["num_hidden_layers"]
    E = cfg.get("num_experts") or cfg["num_local_experts"]
    w.add_block_count(nl)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    if "shared_expert_intermediate_size" in cfg:
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])
    rp = cfg.get("rope_parameters") or {}
    w.add_rope_freq_base(cfg.get("rope_theta") or rp["rope_theta"])
    # RoPE scaling as llama.cpp's converter writes it: type, factor, and for YaRN the
    # original context (and the betas when the config has them)
    rs = cfg.get("rope_scaling") or rp
    kind = rs.get("rope_type") or rs.get("type") or "default"
    if mode == "longrope":
        kind, rs = "longrope", {"factor": 4.0}
    if kind != "default":
        w.add_rope_scaling_type({"linear": gguf.RopeScalingType.LINEAR,
                                 "yarn": gguf.RopeScalingType.YARN,
                                 "longrope": gguf.RopeScalingType.LONGROPE}[kind])
        w.add_rope_scaling_factor(rs["factor"])
    if kind == "yarn":
        w.add_rope_scaling_orig_ctx_len(rs["original_max_position_embeddings"])
        if rs.get("beta_fast"):
            w.add_rope_scaling_yarn_beta_fast(rs["beta_fast"])
        if rs.get("beta_slow"):
            w.add_rope_scaling_yarn_beta_slow(rs["beta_slow"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    if not dense:
        w.add_expert_count(E)
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    moe_ff = cfg.get("moe_intermediate_size") or cfg["intermediate_size"]
    w.add_expert_feed_forward_length(moe_ff * (2 if mode == "bad_ffn" else 1))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)

    n_vocab = cfg["vocab_size"]
    tokens = [f"[PAD{i}]" for i in range(n_vocab)]
    types = [gguf.TokenType.UNUSED] * n_vocab
    if mode == "kimi":
        tokens, types, merges = tiktoken_vocab(hf_dir, n_vocab)
    else:
        for s, i in tok["model"]["vocab"].items():
            tokens[i], types[i] = s, gguf.TokenType.NORMAL
        for a in tok["added_tokens"]:
            tokens[a["id"]] = a["content"]
            types[a["id"]] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
        merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre({"olmo": "olmo", "kimi": "kimi-k2"}.get(mode, "qwen2"))
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    if cfg.get("bos_token_id") is not None:
        w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    if "chat_template" in tcfg:
        w.add_chat_template(tcfg["chat_template"])

    def put(gg, t):
        if mode == "missing" and gg == "blk.1.attn_k.weight":
            return
        if mode == "few_exps" and gg == "blk.0.ffn_up_exps.weight":
            t = (t[0], t[1][:-1])
        add(w, gg, t, qtype_of(mode, gg), mode == "q8_0_odd")

    put("token_embd.weight", st["model.embed_tokens.weight"])
    put("output_norm.weight", st["model.norm.weight"])
    if "lm_head.weight" in st:
        put("output.weight", st["lm_head.weight"])
    for l in range(nl):
        pre = f"model.layers.{l}."
        for hf, gg in LAYER.items():
            if pre + hf not in st:
                continue
            kind, arr = st[pre + hf]
            if gg == "ffn_gate_inp_shexp":  # llama.cpp's is 1-D [n_embd]
                arr = arr.reshape(-1)
            if arch == "llama" and gg in ("attn_q", "attn_k"):  # as llama.cpp's converter
                heads = cfg["num_attention_heads" if gg == "attn_q" else "num_key_value_heads"]
                arr = permute(arr, heads)
            put(f"blk.{l}.{gg}" + ("" if "." in gg else ".weight"), (kind, arr))
        ex = f"{pre}mlp.experts." if f"{pre}mlp.experts.0.gate_proj.weight" in st else \
            f"{pre}block_sparse_moe.experts."
        if f"{ex}0.gate_proj.weight" not in st and f"{ex}0.w1.weight" not in st:
            continue
        names = ("gate_proj", "up_proj", "down_proj") if "mlp." in ex else ("w1", "w3", "w2")
        for part, gg in zip(names, ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")):
            ts = [st[f"{ex}{e}.{part}.weight"] for e in range(E)]
            put(f"blk.{l}.{gg}.weight", (ts[0][0], np.stack([a for _, a in ts])))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def vocab(w, hf_dir, cfg, pre):
    """tokenizer.ggml.* from tokenizer.json, as write() does."""
    tok = json.load(open(f"{hf_dir}/tokenizer.json"))
    n_vocab = cfg["vocab_size"]
    tokens = [f"[PAD{i}]" for i in range(n_vocab)]
    types = [gguf.TokenType.UNUSED] * n_vocab
    for s, i in tok["model"]["vocab"].items():
        tokens[i], types[i] = s, gguf.TokenType.NORMAL
    for a in tok["added_tokens"]:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    if cfg.get("bos_token_id") is not None:
        w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    w.add_chat_template(json.load(open(f"{hf_dir}/tokenizer_config.json"))["chat_template"])


ARCHS = {"glm4_moe": gguf.MODEL_ARCH.GLM4_MOE, "deepseek_v3": gguf.MODEL_ARCH.DEEPSEEK2,
         "gpt_oss": gguf.MODEL_ARCH.GPT_OSS, "minimax_m2": gguf.MODEL_ARCH.MINIMAXM2}


def rope_params(cfg):
    rp = dict(cfg.get("rope_scaling") or {})
    rp.update(cfg.get("rope_parameters") or {})
    return rp


def hparams(w, cfg, mt, nl, mode):
    """The keys convert_hf_to_gguf.py writes for the family (TextModel's
    set_gguf_parameters, then the model class's)."""
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    rp = rope_params(cfg)
    w.add_block_count(nl)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(1 if mt == "deepseek_v3" else cfg["num_key_value_heads"])
    if rp.get("rope_type", rp.get("type")) == "yarn":
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rp["factor"])
        w.add_rope_scaling_orig_ctx_len(rp["original_max_position_embeddings"])
        if "beta_fast" in rp:
            w.add_rope_scaling_yarn_beta_fast(rp["beta_fast"])
        if "beta_slow" in rp:
            w.add_rope_scaling_yarn_beta_slow(rp["beta_slow"])
    w.add_rope_freq_base(cfg.get("rope_theta") or rp["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_expert_count(cfg.get("n_routed_experts") or cfg["num_local_experts"])
    w.add_expert_used_count(cfg["num_experts_per_tok"])
    if "n_group" in cfg:
        w.add_expert_group_count(cfg["n_group"])
        w.add_expert_group_used_count(cfg["topk_group"])
    if mt in ("minimax_m2", "glm4_moe", "deepseek_v3") and mode != "softmax":  # V3's scoring_func
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    if mt != "deepseek_v3":
        w.add_key_length(hd)
        w.add_value_length(hd)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    if mt == "glm4_moe":
        w.add_rope_dimension_count(int(hd * cfg.get("partial_rotary_factor", 0.5)))
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_shared_count(cfg["n_shared_experts"])
        w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
        w.add_expert_weights_scale(cfg["routed_scaling_factor"])
        w.add_expert_weights_norm(cfg["norm_topk_prob"])
        w.add_nextn_predict_layers(cfg["num_nextn_predict_layers"])
    elif mt == "deepseek_v3":
        kv, rope = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"]
        w.add_leading_dense_block_count(cfg["first_k_dense_replace"])
        w.add_vocab_size(cfg["vocab_size"])
        if cfg.get("q_lora_rank") is not None:
            w.add_q_lora_rank(cfg["q_lora_rank"])
        w.add_kv_lora_rank(kv)
        if "kvb" in mode:  # an older file: key/value lengths are the MLA head's
            w.add_key_length(cfg["qk_nope_head_dim"] + rope)
            w.add_value_length(cfg["v_head_dim"])
        else:
            w.add_key_length(kv + rope)
            w.add_value_length(kv)
            w.add_key_length_mla(cfg["qk_nope_head_dim"] + rope)
            w.add_value_length_mla(cfg["v_head_dim"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_shared_count(cfg["n_shared_experts"])
        w.add_expert_weights_scale(cfg["routed_scaling_factor"])
        if cfg["norm_topk_prob"]:
            w.add_expert_weights_norm(True)
        w.add_rope_dimension_count(rope)
        if rp.get("mscale_all_dim") is not None:
            w.add_rope_scaling_yarn_log_mul(0.1 * rp["mscale_all_dim"])
    elif mt == "gpt_oss":
        w.add_sliding_window(cfg["sliding_window"])
        w.add_expert_feed_forward_length(cfg["intermediate_size"])
    elif mt == "minimax_m2":
        w.add_expert_feed_forward_length(cfg["intermediate_size"])
        w.add_rope_dimension_count(cfg["rotary_dim"])


def mxfp4_blocks(blocks, scales):
    """HF's MXFP4 (_blocks [.., R, C/32, 16]: byte k holds elements 2k (low
    nibble) and 2k + 1; _scales [.., R, C/32]) -> ggml's block_mxfp4 rows
    [.., R, C/32 * 17]: e, then qs[j] holding elements j (low) and j + 16."""
    codes = np.stack([blocks & 15, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)
    qs = (codes[..., :16] | (codes[..., 16:] << 4)).astype(np.uint8)
    out = np.concatenate([scales[..., None], qs], axis=-1)
    return out.reshape(*blocks.shape[:-2], blocks.shape[-2] * 17)


def write_arch(hf_dir, out, mode):
    """glm4moe, deepseek2, gpt-oss, minimax-m2 as llama.cpp's converter writes
    them (names from gguf's TensorNameMap). mode: bf16; kvb (deepseek2 with
    attn_kv_b unsplit, the older files' key lengths); mxfp4 (gpt-oss from an
    MXFP4 checkpoint: the experts' blocks repacked, as the converter does);
    q8_0 (matrices Q8_0, router and 1-D F32); softmax (deepseek2 with
    expert_gating_func softmax: refused); pattern (gpt-oss with an array
    sliding_window_pattern: refused); yarn (YaRN keys: refused outside
    deepseek2 and gpt-oss); nobias (blk.1's exp_probs_b or router bias left
    out: refused naming it); o200k, glm4, dsv3 (tokenizer.ggml.pre "gpt-4o", "glm4",
    "deepseek-v3");
    both (attn_kv_b beside attn_k_b / attn_v_b); mlablk (deepseek2 with
    attn_k_b / attn_v_b in 32-element block types, Q5_0, Q4_1 and Q5_1 by
    layer, as llama.cpp's fallbacks leave a 128-column k_b; the rest BF16);
    joined by "+" (kvb+q8_0)."""
    cfg = json.load(open(f"{hf_dir}/config.json"))
    mt = cfg["model_type"]
    st = read_safetensors(f"{hf_dir}/model.safetensors")
    nl = cfg["num_hidden_layers"]
    mtp = cfg.get("num_nextn_predict_layers", 0) if mt == "glm4_moe" else 0
    tmap = gguf.get_tensor_name_map(ARCHS[mt], nl + mtp)
    w = gguf.GGUFWriter(out, gguf.MODEL_ARCH_NAMES[ARCHS[mt]])
    hparams(w, cfg, mt, nl + mtp, mode)
    if mode == "softmax":
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SOFTMAX)
    if mode == "pattern":
        w.add_sliding_window_pattern([True, False, True])
    if mode == "yarn":  # YaRN with llama.cpp's log multiplier, on a family without it
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(4.0)
        w.add_rope_scaling_orig_ctx_len(128)
        w.add_float32(gguf.MODEL_ARCH_NAMES[ARCHS[mt]] + ".rope.scaling.yarn_log_multiplier", 0.1)
    vocab(w, hf_dir, cfg, {"o200k": "gpt-4o", "glm4": "glm4", "dsv3": "deepseek-v3"}.get(mode, "qwen2"))
    E = cfg.get("n_routed_experts") or cfg["num_local_experts"]

    def put(hf, t, raw=None):
        kind, arr = t
        gg = tmap.get_name(hf, try_suffixes=(".weight", ".bias"))
        if gg is None:
            raise SystemExit(f"no GGUF name for {hf}")
        if mode == "nobias" and gg in ("blk.1.exp_probs_b.bias", "blk.1.ffn_gate_inp.bias"):
            return
        if raw is not None:
            w.add_tensor(gg, raw, raw_dtype=T.MXFP4)
        elif mode == "mlablk" and (".attn_k_b." in gg or ".attn_v_b." in gg):
            qt = (T.Q5_0, T.Q4_1, T.Q5_1)[(int(gg.split(".")[1]) + (".attn_v_b." in gg)) % 3]
            w.add_tensor(gg, gguf.quants.quantize(as_f32(t), qt), raw_dtype=qt)
        elif ("q8_0" in mode.split("+") and arr.ndim >= 2 and "ffn_gate_inp" not in gg
              and not gg.endswith(".bias") and arr.shape[-1] % 32 == 0):
            w.add_tensor(gg, gguf.quants.quantize(as_f32(t), T.Q8_0), raw_dtype=T.Q8_0)
        else:
            add(w, gg, t, T.BF16 if arr.ndim >= 2 and "ffn_gate_inp" not in gg
                and not gg.endswith(".bias") else T.F32)

    layers = {}
    for name, t in st.items():
        parts = name.split(".")
        if name.startswith("model.layers."):
            layers.setdefault(int(parts[2]), {})[".".join(parts[3:])] = t
        else:
            put(name, t)
    if mtp:  # an MTP block as GLM-4.5 has: the last layer's tensors and nextn.*
        rng = np.random.default_rng(7)
        layers[nl] = dict(layers[nl - 1])
        H = cfg["hidden_size"]
        for n, shape in (("eh_proj.weight", (H, 2 * H)), ("enorm.weight", (H,)),
                         ("hnorm.weight", (H,)), ("shared_head.norm.weight", (H,))):
            layers[nl][n] = ("f32", rng.standard_normal(shape).astype(np.float32))
    for l, ts in sorted(layers.items()):
        pre = f"model.layers.{l}."
        ex = {}
        for n, t in ts.items():
            kind, arr = t
            if n.endswith("e_score_correction_bias"):  # the converter's rename
                put(pre + n.replace("_bias", ".bias"), t)
            elif n.endswith(".sinks"):
                put(pre + n + ".weight", t)
            elif mt == "deepseek_v3" and n == "self_attn.kv_b_proj.weight" and "kvb" not in mode:
                nh, nope, vh = cfg["num_attention_heads"], cfg["qk_nope_head_dim"], cfg["v_head_dim"]
                kvb = arr.reshape(nh, nope + vh, -1)
                put(pre + "self_attn.k_b_proj.weight",
                    (kind, np.ascontiguousarray(kvb[:, :nope].transpose(0, 2, 1))))
                put(pre + "self_attn.v_b_proj.weight", (kind, np.ascontiguousarray(kvb[:, nope:])))
                if "both" in mode:  # a file holding the whole kv_b beside the split pair
                    put(pre + n, t)
            elif mt == "gpt_oss" and n.startswith("mlp.experts."):
                ex[n[len("mlp.experts."):]] = t
            elif ".experts." in n:
                ex[n] = t
            else:
                put(pre + n, t)
        if mt == "gpt_oss":
            g = lambda k: ex[k][1]
            if "gate_up_proj_blocks" in ex:
                gb, gs = g("gate_up_proj_blocks"), g("gate_up_proj_scales")
                put(pre + "mlp.experts.gate_proj.weight", ex["gate_up_proj_blocks"],
                    mxfp4_blocks(gb[:, ::2], gs[:, ::2]))
                put(pre + "mlp.experts.up_proj.weight", ex["gate_up_proj_blocks"],
                    mxfp4_blocks(gb[:, 1::2], gs[:, 1::2]))
                put(pre + "mlp.experts.down_proj.weight", ex["down_proj_blocks"],
                    mxfp4_blocks(g("down_proj_blocks"), g("down_proj_scales")))
            else:
                kind, gu = ex["gate_up_proj"]
                gu = gu.swapaxes(-1, -2)
                put(pre + "mlp.experts.gate_proj.weight", (kind, np.ascontiguousarray(gu[:, ::2])))
                put(pre + "mlp.experts.up_proj.weight", (kind, np.ascontiguousarray(gu[:, 1::2])))
                kind, d = ex["down_proj"]
                put(pre + "mlp.experts.down_proj.weight",
                    (kind, np.ascontiguousarray(d.swapaxes(-1, -2))))
            kind, b = ex["gate_up_proj_bias"]
            put(pre + "mlp.experts.gate_proj.bias", (kind, np.ascontiguousarray(b[..., ::2])))
            put(pre + "mlp.experts.up_proj.bias", (kind, np.ascontiguousarray(b[..., 1::2])))
            put(pre + "mlp.experts.down_proj.bias", ex["down_proj_bias"])
            continue
        if not ex:
            continue
        if "mlp.experts.gate_up_proj" in ex:  # transformers 5's fused [E, 2I, H]: gate rows first
            kind, gu = ex["mlp.experts.gate_up_proj"]
            I = gu.shape[1] // 2
            stacks = {"gate_proj": (kind, gu[:, :I]), "up_proj": (kind, gu[:, I:]),
                      "down_proj": ex["mlp.experts.down_proj"]}
            prefix = "mlp.experts."
        else:
            moe = "block_sparse_moe" if mt == "minimax_m2" else "mlp"
            names = ("w1", "w3", "w2") if mt == "minimax_m2" else ("gate_proj", "up_proj", "down_proj")
            stacks = {}
            for hfp, part in zip(names, ("gate_proj", "up_proj", "down_proj")):
                es = [ex[f"{moe}.experts.{e}.{hfp}.weight"] for e in range(E)]
                stacks[part] = (es[0][0], np.stack([a for _, a in es]))
            prefix = "mlp.experts."
        for part, t in stacks.items():
            put(pre + prefix + part + ".weight", (t[0], np.ascontiguousarray(t[1])))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def seed(hf_dir, out):
    """A fuzz seed (tools/fuzz/fuzz_gguf.c, under its 64 KiB cap): the family's keys
    as write_arch writes them, an 8-token vocabulary, an [8, H] token_embd."""
    cfg = json.load(open(f"{hf_dir}/config.json"))
    mt = cfg["model_type"]
    nl = cfg["num_hidden_layers"] + (cfg.get("num_nextn_predict_layers", 0) if mt == "glm4_moe" else 0)
    w = gguf.GGUFWriter(out, gguf.MODEL_ARCH_NAMES[ARCHS[mt]])
    hparams(w, cfg, mt, nl, "bf16")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre({"glm4_moe": "glm4", "gpt_oss": "gpt-4o",
                         "minimax_m2": "minimax-m2"}.get(mt, "qwen2"))
    w.add_token_list(["a", "b", "ab", "c", "d", "cd", "<|end|>", " "])
    w.add_token_types([1] * 6 + [3, 1])
    w.add_token_merges(["a b", "c d"])
    w.add_eos_token_id(6)
    w.add_tensor("token_embd.weight", np.ones((8, cfg["hidden_size"]), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def limit7(hf_dir, out):
    """The gpt_oss fixture with swiglu_limit 7 (llama.cpp's constant: a GGUF
    has no key for it), the weights linked."""
    import os
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(hf_dir):
        if f.endswith(".json") and f != "config.json":
            os.symlink(os.path.abspath(f"{hf_dir}/{f}"), f"{out}/{f}")
    os.symlink(os.path.abspath(f"{hf_dir}/model.safetensors"), f"{out}/model.safetensors")
    cfg = json.load(open(f"{hf_dir}/config.json"))
    cfg["swiglu_limit"] = 7.0
    json.dump(cfg, open(f"{out}/config.json", "w"))


COLI_NAMES = {"attn_output": "attn_o", "ffn_gate_shexp": "shexp_gate",
              "ffn_up_shexp": "shexp_up", "ffn_down_shexp": "shexp_down"}
DTYPE = {T.Q8_0: 8, T.Q4_0: 9}  # cpu/dtype.h's numbers


def read_coli(path):
    """The .coli tables (io/io_internal.h): {name: (dtype, offset, bytes)}
    and {layer: (dtype, offset, slab_bytes, gate_off, up_off, down_off)}."""
    m = np.fromfile(path, dtype=np.uint8).tobytes()
    u32 = lambda o: struct.unpack_from("<I", m, o)[0]
    u64 = lambda o: struct.unpack_from("<Q", m, o)[0]
    tensors, layers = {}, {}
    for i in range(u32(28)):
        e = 64 + 32 * i
        kind, off, n = u32(e), u64(e + 8), u64(e + 16)
        for k in range(0, n, 160 if kind == 64 else 64):
            r = off + k
            if kind == 64:
                name = m[r:r + 96].split(b"\0")[0].decode()
                tensors[name] = (u32(r + 96), u64(r + 136), u64(r + 144))
            elif kind == 65:
                layers[u32(r)] = (u32(r + 8), u64(r + 24), u64(r + 32), u64(r + 40),
                                  u64(r + 48), u64(r + 56))
    return m, tensors, layers


def planar(raw, qtype):
    """ggml blocks [rows, nb * bb] -> coli's quant plane then scale plane."""
    bb = 34 if qtype == T.Q8_0 else 18
    b = raw.reshape(raw.shape[0], -1, bb)
    return b[:, :, 2:].tobytes() + b[:, :, :2].tobytes()


def blocks(gguf_path, coli_path):
    m, tensors, layers = read_coli(coli_path)
    n = 0
    for t in gguf.GGUFReader(gguf_path).tensors:
        if t.tensor_type not in DTYPE:
            continue
        raw = np.asarray(t.data).reshape(-1, t.data.shape[-1])  # [rows, row bytes]
        parts = t.name.split(".")
        if parts[0] == "blk" and parts[2].endswith("_exps"):
            l = int(parts[1])
            dt, off, slab, *offs = layers[l]
            which = ["ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"].index(parts[2])
            E = t.data.shape[0]
            want = [(f"{t.name} expert {e}", off + e * slab + offs[which],
                     raw.reshape(E, -1, raw.shape[-1])[e]) for e in range(E)]
        else:
            name = {"token_embd.weight": "tok_embd", "output.weight": "lm_head"}.get(t.name)
            if name is None:
                name = f"blk.{parts[1]}.{COLI_NAMES.get(parts[2], parts[2])}"
            dt, off, _ = tensors[name]
            want = [(t.name, off, raw)]
        if dt != DTYPE[t.tensor_type]:
            continue
        for what, off, r in want:
            p = planar(r, t.tensor_type)
            if m[off:off + len(p)] != p:
                raise SystemExit(f"blocks: {what}: the container's bytes differ from the GGUF's")
            n += 1
    print(f"blocks: {n} matrices equal")


O200K = ("[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
         "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+"
         "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
         "[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")  # gpt-oss's tokenizer.json (o200k)


LLAMA3 = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+"
          "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")  # GLM-4.5's (Llama 3's)
DEEPSEEK3 = ["\\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
             "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
             "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"]  # DeepSeek-V3's


def gpt2tok(hf_dir, out, regex=None):
    import os
    import shutil
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(hf_dir):
        if f.endswith(".json") and f != "tokenizer.json":
            shutil.copy(f"{hf_dir}/{f}", out)
    os.symlink(os.path.abspath(f"{hf_dir}/model.safetensors"), f"{out}/model.safetensors")
    tok = json.load(open(f"{hf_dir}/tokenizer.json"))
    tok["normalizer"] = None
    tok["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False,
                            "trim_offsets": True, "use_regex": True}
    if regex:  # gpt-oss's shape: Split(regex, Isolated) (DeepSeek-V3: three in turn),
        # then ByteLevel without its own
        tok["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": r}, "behavior": "Isolated", "invert": False}
            for r in ([regex] if isinstance(regex, str) else regex)] + [
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
             "use_regex": False}]}
    json.dump(tok, open(f"{out}/tokenizer.json", "w"))


def top1(a, b, vocab):
    x = np.fromfile(a, dtype=np.float32).reshape(-1, vocab)
    y = np.fromfile(b, dtype=np.float32).reshape(-1, vocab)
    d = np.nonzero(x.argmax(1) != y.argmax(1))[0]
    print(f"{len(d)} of {len(x)} max|dlogit| {np.abs(x - y).max():.4f} differing: {[int(i) for i in d]}")


def main(argv):
    if argv[0] == "write" and json.load(open(f"{argv[1]}/config.json"))["model_type"] in ARCHS:
        write_arch(argv[1], argv[2], argv[3])
    elif argv[0] == "seed":
        seed(argv[1], argv[2])
    elif argv[0] == "limit7":
        limit7(argv[1], argv[2])
    elif argv[0] == "write":
        write(argv[1], argv[2], argv[3], int(argv[4]) if len(argv) > 4 else 0)
    elif argv[0] == "gpt2tok":
        gpt2tok(argv[1], argv[2])
    elif argv[0] == "o200ktok":
        gpt2tok(argv[1], argv[2], O200K)
    elif argv[0] == "glm4tok":
        gpt2tok(argv[1], argv[2], LLAMA3)
    elif argv[0] == "dsv3tok":
        gpt2tok(argv[1], argv[2], DEEPSEEK3)
    elif argv[0] == "blocks":
        blocks(argv[1], argv[2])
    elif argv[0] == "top1":
        top1(argv[1], argv[2], int(argv[3]))
    elif argv[0] == "batch":  # batch CMD ARGS -- CMD ARGS ...: one interpreter start
        cmd = []
        for a in argv[1:] + ["--"]:
            if a != "--":
                cmd.append(a)
            elif cmd:
                main(cmd)
                cmd = []
    else:
        raise SystemExit("usage: gguf_import.py write HF_DIR OUT MODE | blocks GGUF COLI | "
                         "top1 A B VOCAB | batch CMD ARGS -- CMD ARGS ...")


if __name__ == "__main__":
    main(sys.argv[1:])
