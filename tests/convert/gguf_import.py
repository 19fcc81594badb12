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

  gpt2tok HF_DIR OUT_DIR       the fixture with its tokenizer.json's
                               pre-tokenizer replaced by ByteLevel with
                               GPT-2's regex and no normalizer (the weights
                               linked)
"""
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
    if mode in ("bf16", "llama", "missing", "few_exps", "bad_ffn", "olmo"):
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


def write(hf_dir, out, mode, split=0):
    cfg = json.load(open(f"{hf_dir}/config.json"))
    tok = json.load(open(f"{hf_dir}/tokenizer.json"))
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
    for s, i in tok["model"]["vocab"].items():
        tokens[i], types[i] = s, gguf.TokenType.NORMAL
    for a in tok["added_tokens"]:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("olmo" if mode == "olmo" else "qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    if cfg.get("bos_token_id") is not None:
        w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
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


def gpt2tok(hf_dir, out):
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
    json.dump(tok, open(f"{out}/tokenizer.json", "w"))


def top1(a, b, vocab):
    x = np.fromfile(a, dtype=np.float32).reshape(-1, vocab)
    y = np.fromfile(b, dtype=np.float32).reshape(-1, vocab)
    d = np.nonzero(x.argmax(1) != y.argmax(1))[0]
    print(f"{len(d)} of {len(x)} max|dlogit| {np.abs(x - y).max():.4f} differing: {[int(i) for i in d]}")


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else 0)
    elif sys.argv[1] == "gpt2tok":
        gpt2tok(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "blocks":
        blocks(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "top1":
        top1(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        raise SystemExit("usage: gguf_import.py write HF_DIR OUT MODE | blocks GGUF COLI | "
                         "top1 A B VOCAB")
