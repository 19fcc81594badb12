#!/usr/bin/env python3
"""A ~3.5 GB synthetic Qwen3-30B-A3B-shaped checkpoint (2 layers, 128 experts,
real vocab) for measuring coli convert memory; see docs/quant.md. Needs numpy."""
import json, struct, numpy as np, os
import sys
out = sys.argv[1] if len(sys.argv) > 1 else 'q30'
os.makedirs(out, exist_ok=True)
H, nh, nkv, hd, L, E, MI, V = 2048, 32, 4, 128, 2, 128, 768, 151936
cfg = dict(model_type='qwen3_moe', hidden_size=H, num_attention_heads=nh, num_key_value_heads=nkv,
           head_dim=hd, num_hidden_layers=L, vocab_size=V, num_experts=E, num_experts_per_tok=8,
           moe_intermediate_size=MI, intermediate_size=6144, decoder_sparse_step=1, mlp_only_layers=[],
           norm_topk_prob=True, rms_norm_eps=1e-6, rope_theta=1e6, max_position_embeddings=40960,
           tie_word_embeddings=False, hidden_act='silu', bos_token_id=None, eos_token_id=151645)
json.dump(cfg, open(out + '/config.json', 'w'))
rng = np.random.default_rng(0)
def tensors(layers):
    for l in layers:
        p = 'model.layers.%d.' % l
        yield p + 'input_layernorm.weight', [H]
        yield p + 'post_attention_layernorm.weight', [H]
        yield p + 'self_attn.q_proj.weight', [nh * hd, H]
        yield p + 'self_attn.k_proj.weight', [nkv * hd, H]
        yield p + 'self_attn.v_proj.weight', [nkv * hd, H]
        yield p + 'self_attn.o_proj.weight', [H, nh * hd]
        yield p + 'self_attn.q_norm.weight', [hd]
        yield p + 'self_attn.k_norm.weight', [hd]
        yield p + 'mlp.gate.weight', [E, H]
        for e in range(E):
            yield p + 'mlp.experts.%d.gate_proj.weight' % e, [MI, H]
            yield p + 'mlp.experts.%d.up_proj.weight' % e, [MI, H]
            yield p + 'mlp.experts.%d.down_proj.weight' % e, [H, MI]
shards = [[('model.embed_tokens.weight', [V, H])] + list(tensors([0])),
          list(tensors([1])) + [('model.norm.weight', [H]), ('lm_head.weight', [V, H])]]
wm = {}
for i, ts in enumerate(shards):
    fn = 'model-%05d-of-00002.safetensors' % (i + 1)
    hdr, off = {}, 0
    for n, s in ts:
        b = int(np.prod(s)) * 2
        hdr[n] = dict(dtype='BF16', shape=s, data_offsets=[off, off + b]); off += b
        wm[n] = fn
    h = json.dumps(hdr).encode(); h += b' ' * (-len(h) % 8)
    with open(out + '/' + fn, 'wb') as f:
        f.write(struct.pack('<Q', len(h)) + h)
        for n, s in ts:
            x = (rng.standard_normal(int(np.prod(s)), dtype=np.float32) * 0.02)
            f.write((x.view(np.uint32) >> 16).astype(np.uint16).tobytes())
json.dump(dict(weight_map=wm), open(out + '/model.safetensors.index.json', 'w'))
