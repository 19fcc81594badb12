#!/usr/bin/env python3
"""Tiny Hugging Face-style MoE checkpoints for the converter's tests.

Pure standard library (struct/json/random), so tests run wherever python3
does. Writes config.json (in the dialect of the chosen architecture),
generation_config.json, tokenizer_config.json and model.safetensors, or
shards plus model.safetensors.index.json.

  mkckpt.py OUT --arch qwen3_moe|qwen2_moe|olmoe|mixtral|glm4_moe|minimax_m2|deepseek_v3
            [--fused] [--shards N] [--rope-params] [--dtype bf16|f16|f32] [--no-qlora]
            [--hidden H] [--head-dim D] [--moe-inter I] [--dense-inter I] [--vocab V]
            [--seed S] [--extra NAME:DTYPE] [--drop NAME] [--mtp]

glm4_moe: layer 0 dense (first_k_dense_replace), e_score_correction_bias (f32, as the
Hub's files), one shared expert, q/k/v bias, QK norm, partial_rotary_factor 0.5 (top
level, or in rope_parameters with --rope-params: transformers 5's dialect, with
num_local_experts and num_mtp_layers); --mtp adds one next-token-prediction layer's
tensors as model.layers.L (L = num_hidden_layers), which the converter skips.

minimax_m2: every layer MoE (block_sparse_moe.experts.N.w1/w2/w3, the Hub's names, or
transformers 5's mlp.experts fused with --fused), e_score_correction_bias (f32) beside the
router, QK norm over the whole q / k projection, rotary_dim 8 of head_dim 16 (the Hub's
key; with --rope-params partial_rotary_factor 0.5 in rope_parameters); --mtp: one MTP
module (num_mtp_modules 1) as model.layers.L, skipped.

deepseek_v3: glm4_moe's MoE layout (no bias, no QK norm) with MLA attention (q_lora_rank 32,
or a plain q_proj with --no-qlora; kv_lora_rank 32, qk_nope 32 + qk_rope 8, v 16;
rope_interleave) and YaRN rope scaling: rope_scaling {"type": "yarn"} beside a top-level
rope_theta, or with --rope-params rope_parameters {"rope_type": "yarn"} and num_mtp_layers.
"""
import argparse, json, os, random, struct


def f32_to_bf16_bits(x):
    b = struct.unpack('<I', struct.pack('<f', x))[0]
    return (b + 0x7fff + ((b >> 16) & 1)) >> 16


def encode(vals, dtype):
    if dtype == 'F32':
        return struct.pack('<%df' % len(vals), *vals)
    if dtype == 'F16':
        return struct.pack('<%de' % len(vals), *vals)
    if dtype == 'BF16':
        return struct.pack('<%dH' % len(vals), *[f32_to_bf16_bits(v) for v in vals])
    if dtype in ('I8', 'F8_E4M3', 'U8'):
        return bytes(len(vals))
    raise ValueError(dtype)


def write_st(path, tensors):
    """tensors: list of (name, dtype, shape, bytes)."""
    hdr, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, dt, shape, data in tensors:
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
        blobs.append(data)
    h = json.dumps(hdr).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--arch', default='qwen3_moe')
    ap.add_argument('--fused', action='store_true')
    ap.add_argument('--shards', type=int, default=1)
    ap.add_argument('--rope-params', action='store_true')
    ap.add_argument('--dtype', default='bf16')
    ap.add_argument('--hidden', type=int, default=64)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--head-dim', type=int, default=16)
    ap.add_argument('--moe-inter', type=int, default=32)
    ap.add_argument('--dense-inter', type=int, default=96)
    ap.add_argument('--vocab', type=int, default=128)
    ap.add_argument('--extra', action='append', default=[])
    ap.add_argument('--drop', action='append', default=[])
    ap.add_argument('--mtp', action='store_true')
    ap.add_argument('--no-qlora', action='store_true')
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    dt = a.dtype.upper()
    H, nh, nkv, hd, L, E, K, MI, DI, SI, V = a.hidden, 4, 2, a.head_dim, 3, 4, 2, a.moe_inter, a.dense_inter, 64, a.vocab
    arch = a.arch
    cfg = {"model_type": arch, "hidden_size": H, "num_attention_heads": nh,
           "num_key_value_heads": nkv, "num_hidden_layers": L, "vocab_size": V,
           "num_experts_per_tok": K, "rms_norm_eps": 1e-6, "max_position_embeddings": 4096,
           "tie_word_embeddings": False, "hidden_act": "silu", "bos_token_id": 1,
           "eos_token_id": 2, "torch_dtype": "bfloat16"}
    qwen = arch in ('qwen3_moe', 'qwen2_moe')
    ds = arch == 'deepseek_v3'
    glm = arch == 'glm4_moe' or ds
    mm = arch == 'minimax_m2'
    QL, KL, NP, R, VH = (0 if a.no_qlora else 32), 32, 32, 8, 16   # deepseek_v3's MLA
    if mm:
        cfg.update(intermediate_size=MI, num_local_experts=E, head_dim=hd,
                   num_mtp_modules=int(a.mtp))
        if not a.rope_params:
            cfg.update(rotary_dim=hd // 2, use_qk_norm=True, qk_norm_type='per_layer',
                       scoring_func='sigmoid', use_routing_bias=True, use_mtp=a.mtp,
                       attn_type_list=[1] * L, shared_intermediate_size=0)
    elif glm:
        cfg.update(moe_intermediate_size=MI, intermediate_size=DI, first_k_dense_replace=1,
                   n_shared_experts=1, n_group=2, topk_group=1, routed_scaling_factor=1.5,
                   norm_topk_prob=True, attention_bias=True, use_qk_norm=True, head_dim=hd)
        cfg['num_local_experts' if a.rope_params else 'n_routed_experts'] = E
        cfg['num_mtp_layers' if a.rope_params else 'num_nextn_predict_layers'] = int(a.mtp)
        if not a.rope_params and not ds:
            cfg['partial_rotary_factor'] = 0.5
        if ds:
            del cfg['use_qk_norm'], cfg['head_dim']
            cfg.update(attention_bias=False, q_lora_rank=QL or None, kv_lora_rank=KL,
                       num_key_value_heads=nh,
                       qk_nope_head_dim=NP, qk_rope_head_dim=R, v_head_dim=VH,
                       rope_interleave=True)
    elif qwen:
        cfg.update(num_experts=E, moe_intermediate_size=MI, intermediate_size=DI,
                   decoder_sparse_step=1, mlp_only_layers=[1], norm_topk_prob=True)
    else:
        cfg.update(intermediate_size=MI)
        cfg['num_local_experts' if arch == 'mixtral' else 'num_experts'] = E
    if arch == 'qwen3_moe':
        cfg['head_dim'] = hd
    elif not glm and not mm:
        hd = H // nh
    if arch == 'qwen2_moe':
        cfg['shared_expert_intermediate_size'] = SI
    yarn = {"factor": 2.0, "original_max_position_embeddings": 2048, "beta_fast": 32,
            "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}
    if a.rope_params:
        cfg['rope_parameters'] = {"rope_type": "default", "rope_theta": 500000.0}
        if ds:
            cfg['rope_parameters'] = dict(yarn, rope_type="yarn", rope_theta=500000.0)
        elif glm or mm:
            cfg['rope_parameters']['partial_rotary_factor'] = 0.5
    else:
        cfg['rope_theta'] = 1000000.0
        if ds:
            cfg['rope_scaling'] = dict(yarn, type="yarn")
    moe = [not (qwen and i in cfg['mlp_only_layers']) and not (glm and i == 0)
           for i in range(L)]

    T = []

    def add(name, shape, scale=0.05, one=False, dtype=None):
        n = 1
        for s in shape:
            n *= s
        vals = [1.0 + rnd.gauss(0, 0.1) if one else rnd.gauss(0, scale) for _ in range(n)]
        T.append((name, dtype or dt, shape, encode(vals, dtype or dt)))

    add('model.embed_tokens.weight', [V, H])
    for l in range(L + (1 if (glm or mm) and a.mtp else 0)):
        p = 'model.layers.%d.' % l
        if l == L:                      # an MTP layer: a few of its own, then a MoE layer's
            add(p + 'eh_proj.weight', [H, 2 * H])
            add(p + 'enorm.weight', [H], one=True)
            add(p + 'hnorm.weight', [H], one=True)
            add(p + 'shared_head.norm.weight', [H], one=True)
            moe.append(True)
        add(p + 'input_layernorm.weight', [H], one=True)
        add(p + 'post_attention_layernorm.weight', [H], one=True)
        if ds:
            if QL:
                add(p + 'self_attn.q_a_proj.weight', [QL, H])
                add(p + 'self_attn.q_a_layernorm.weight', [QL], one=True)
                add(p + 'self_attn.q_b_proj.weight', [nh * (NP + R), QL])
            else:
                add(p + 'self_attn.q_proj.weight', [nh * (NP + R), H])
            add(p + 'self_attn.kv_a_proj_with_mqa.weight', [KL + R, H])
            add(p + 'self_attn.kv_a_layernorm.weight', [KL], one=True)
            add(p + 'self_attn.kv_b_proj.weight', [nh * (NP + VH), KL])
            add(p + 'self_attn.o_proj.weight', [H, nh * VH])
        else:
            add(p + 'self_attn.q_proj.weight', [nh * hd, H])
            add(p + 'self_attn.k_proj.weight', [nkv * hd, H])
            add(p + 'self_attn.v_proj.weight', [nkv * hd, H])
            add(p + 'self_attn.o_proj.weight', [H, nh * hd])
        if arch == 'qwen2_moe' or (glm and not ds):
            for x, n in (('q', nh), ('k', nkv), ('v', nkv)):
                add(p + 'self_attn.%s_proj.bias' % x, [n * hd])
        if arch == 'qwen3_moe' or (glm and not ds):
            add(p + 'self_attn.q_norm.weight', [hd], one=True)
            add(p + 'self_attn.k_norm.weight', [hd], one=True)
        if arch == 'olmoe' or mm:
            add(p + 'self_attn.q_norm.weight', [nh * hd], one=True)
            add(p + 'self_attn.k_norm.weight', [nkv * hd], one=True)
        if not moe[l]:
            add(p + 'mlp.gate_proj.weight', [DI, H])
            add(p + 'mlp.up_proj.weight', [DI, H])
            add(p + 'mlp.down_proj.weight', [H, DI])
            continue
        mp = p + ('block_sparse_moe.' if arch in ('mixtral', 'minimax_m2') and not a.fused
                  else 'mlp.')
        add(mp + 'gate.weight', [E, H])
        if glm:
            add(mp + 'gate.e_score_correction_bias', [E], scale=0.3, dtype='F32')
        if mm:
            add(mp + 'e_score_correction_bias', [E], scale=0.3, dtype='F32')
        if a.fused:
            add(mp + 'experts.gate_up_proj', [E, 2 * MI, H])
            add(mp + 'experts.down_proj', [E, H, MI])
        else:
            names = ('w1', 'w3', 'w2') if arch in ('mixtral', 'minimax_m2') else ('gate_proj', 'up_proj', 'down_proj')
            for e in range(E):
                add(mp + 'experts.%d.%s.weight' % (e, names[0]), [MI, H])
                add(mp + 'experts.%d.%s.weight' % (e, names[1]), [MI, H])
                add(mp + 'experts.%d.%s.weight' % (e, names[2]), [H, MI])
        if glm:
            add(p + 'mlp.shared_experts.gate_proj.weight', [MI, H])
            add(p + 'mlp.shared_experts.up_proj.weight', [MI, H])
            add(p + 'mlp.shared_experts.down_proj.weight', [H, MI])
        if arch == 'qwen2_moe':
            add(p + 'mlp.shared_expert.gate_proj.weight', [SI, H])
            add(p + 'mlp.shared_expert.up_proj.weight', [SI, H])
            add(p + 'mlp.shared_expert.down_proj.weight', [H, SI])
            add(p + 'mlp.shared_expert_gate.weight', [1, H])
    add('model.norm.weight', [H], one=True)
    add('lm_head.weight', [V, H])
    for x in a.extra:
        name, xdt = x.split(':')
        T.append((name, xdt, [4, 8], encode([0.0] * 32, xdt)))
    T = [t for t in T if t[0] not in a.drop]

    os.makedirs(a.out, exist_ok=True)
    json.dump(cfg, open(os.path.join(a.out, 'config.json'), 'w'), indent=2)
    json.dump({"bos_token_id": 1, "eos_token_id": [2, 3]},
              open(os.path.join(a.out, 'generation_config.json'), 'w'))
    json.dump({"chat_template": [{"name": "tool_use", "template": "T"},
                                 {"name": "default", "template": "{{ messages }}"}]},
              open(os.path.join(a.out, 'tokenizer_config.json'), 'w'))
    if a.shards <= 1:
        write_st(os.path.join(a.out, 'model.safetensors'), T)
        return
    per = (len(T) + a.shards - 1) // a.shards
    wm = {}
    for s in range(a.shards):
        fn = 'model-%05d-of-%05d.safetensors' % (s + 1, a.shards)
        part = T[s * per:(s + 1) * per]
        write_st(os.path.join(a.out, fn), part)
        for t in part:
            wm[t[0]] = fn
    json.dump({"metadata": {}, "weight_map": wm},
              open(os.path.join(a.out, 'model.safetensors.index.json'), 'w'), indent=1)


if __name__ == '__main__':
    main()
