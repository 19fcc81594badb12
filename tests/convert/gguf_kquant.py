"""tests/convert/gguf_kquant.py -- GGUFs whose matrices are K-quants and the
other block types coli keeps as stored (Q4_1, Q5_0, Q5_1, Q2_K..Q6_K), for
tests/convert/gguf_kquant.sh. The model is a Hugging Face checkpoint whose
rows are whole 256-element blocks (tests/convert/mkckpt.py, hidden 256).

  write HF_DIR OUT.gguf MODE   MODE: kq   every matrix in a block type: the
                                          types of a Q4_K_M file (Q4_K gate/up,
                                          Q6_K down and output) and, in other
                                          layers, every other type (table TYPES)
                                    ref  the same blocks dequantized by the
                                          gguf package, stored F32: the
                                          reference weights
                                    iq   kq with blk.0.ffn_down_exps in IQ4_NL
                                          and blk.2.attn_q in IQ2_XXS (random
                                          bytes): refused
                                    dense kq with the experts in Q8_0: only
                                          the dense part has block types
                                    mixgu kq with blk.2.ffn_up_exps Q4_K beside
                                          its Q5_K gate: that layer's gate and
                                          up are converted, its down kept
                                    mixgu-ref  mixgu's blocks dequantized
                                    mixdown every matrix Q8_0 but the experts'
                                          gate and up, Q4_0: layers whose down
                                          is another dtype (q8_0 beside q4_0)
                                    mixdense the experts and attention Q4_0,
                                          the rest Q8_0: q8_0 and q4_0 dense
                                          matrices side by side
  compare REF.f32 GOT.f32 VOCAB MAX_TOP1 MAX_KL
                               top-1 differences and mean KL(ref || got)
                               printed; exit 1 beyond the bounds
  blocks IN.gguf OUT.coli      every block-type matrix whose container dtype
                               is its twin holds the GGUF's bytes unchanged
                               (expert slabs: per expert); prints "blocks: N
                               matrices equal"

The `gguf` package cannot quantize K-quants (its quantize raises
NotImplementedError for them), so the blocks are made here by a plain
rounding (a scale and min per group from the group's range, 6-bit or 4-bit
scales relative to the block's largest): any valid block will do, since the
reference is the package's dequantization of these same blocks. Q4_1 /
Q5_0 / Q5_1 use the package's own quantizer.
"""
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_import as gi  # noqa: E402

# the type of each matrix, by GGUF name pattern (layer 1 is dense)
TYPES = {
    "token_embd.weight": T.Q6_K, "output.weight": T.Q6_K,
    "blk.0.attn_q.weight": T.Q4_K, "blk.0.attn_k.weight": T.Q4_K,
    "blk.0.attn_v.weight": T.Q6_K, "blk.0.attn_output.weight": T.Q4_K,
    "blk.0.ffn_gate_exps.weight": T.Q4_K, "blk.0.ffn_up_exps.weight": T.Q4_K,
    "blk.0.ffn_down_exps.weight": T.Q6_K,
    "blk.1.attn_q.weight": T.Q5_K, "blk.1.attn_k.weight": T.Q3_K,
    "blk.1.attn_v.weight": T.Q2_K, "blk.1.attn_output.weight": T.Q5_0,
    "blk.1.ffn_gate.weight": T.Q4_1, "blk.1.ffn_up.weight": T.Q5_1,
    "blk.1.ffn_down.weight": T.Q5_K,
    "blk.2.attn_q.weight": T.Q8_0, "blk.2.attn_k.weight": T.Q4_0,
    "blk.2.attn_v.weight": T.Q6_K, "blk.2.attn_output.weight": T.Q3_K,
    "blk.2.ffn_gate_exps.weight": T.Q5_K, "blk.2.ffn_up_exps.weight": T.Q5_K,
    "blk.2.ffn_down_exps.weight": T.Q2_K,
}
IQ = {"blk.0.ffn_down_exps.weight": T.IQ4_NL, "blk.2.attn_q.weight": T.IQ2_XXS}


def f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def safe(v):
    return np.where(v > 0, v, 1.0)


def q45k(x, five):
    """Q4_K / Q5_K blocks of x [n, 256]."""
    n, qmax = x.shape[0], 31 if five else 15
    g = x.reshape(n, 8, 32)
    mn = np.minimum(g.min(2), 0)
    scale, mins = (g.max(2) - mn) / qmax, -mn
    d, dmin = scale.max(1) / 63, mins.max(1) / 63
    sc = np.clip(np.rint(scale / safe(d)[:, None]), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(mins / safe(dmin)[:, None]), 0, 63).astype(np.uint8)
    dl = f16(d).astype(np.float32)[:, None] * sc
    ml = f16(dmin).astype(np.float32)[:, None] * m
    q = np.clip(np.rint((g + ml[:, :, None]) / safe(dl)[:, :, None]), 0, qmax).astype(np.uint8)
    s = np.zeros((n, 12), np.uint8)
    s[:, 0:4] = sc[:, 0:4] | (sc[:, 4:8] >> 4) << 6
    s[:, 4:8] = m[:, 0:4] | (m[:, 4:8] >> 4) << 6
    s[:, 8:12] = (sc[:, 4:8] & 15) | (m[:, 4:8] & 15) << 4
    qs = np.zeros((n, 4, 32), np.uint8)
    for j in range(8):
        qs[:, j // 2] |= (q[:, j] & 15) << (4 * (j % 2))
    parts = [f16(d).view(np.uint8).reshape(n, 2), f16(dmin).view(np.uint8).reshape(n, 2), s]
    if five:
        qh = np.zeros((n, 32), np.uint8)
        for j in range(8):
            qh |= (q[:, j] >> 4 & 1) << j
        parts.append(qh)
    return np.concatenate(parts + [qs.reshape(n, 128)], 1)


def q6k(x):
    n = x.shape[0]
    g = x.reshape(n, 16, 16)
    scale = np.abs(g).max(2) / 31
    d = scale.max(1) / 127
    sc = np.clip(np.rint(scale / safe(d)[:, None]), -128, 127).astype(np.int8)
    dl = f16(d).astype(np.float32)[:, None] * sc
    q = (np.clip(np.rint(g / safe(dl)[:, :, None]), -32, 31) + 32).astype(np.uint8).reshape(n, 256)
    ql, qh = np.zeros((n, 128), np.uint8), np.zeros((n, 64), np.uint8)
    for p in range(256):
        h, k = p // 128, p % 128
        ql[:, h * 64 + k % 64] |= (q[:, p] & 15) << (4 * (k // 64))
        qh[:, h * 32 + k % 32] |= (q[:, p] >> 4) << (2 * (k // 32))
    return np.concatenate([ql, qh, sc.view(np.uint8), f16(d).view(np.uint8).reshape(n, 2)], 1)


def q3k(x):
    n = x.shape[0]
    g = x.reshape(n, 16, 16)
    scale = np.abs(g).max(2) / 4
    d = scale.max(1) / 31
    sc = np.clip(np.rint(scale / safe(d)[:, None]), 0, 31).astype(np.uint8)
    dl = f16(d).astype(np.float32)[:, None] * sc
    v = (np.clip(np.rint(g / safe(dl)[:, :, None]), -4, 3) + 4).astype(np.uint8).reshape(n, 256)
    s6 = sc + 32
    s = np.zeros((n, 12), np.uint8)
    s[:, 0:8] = (s6[:, 0:8] & 15) | (s6[:, 8:16] & 15) << 4
    for i in range(4):
        for k in range(4):
            s[:, 8 + i] |= (s6[:, i + 4 * k] >> 4 & 3) << (2 * k)
    hm, qs = np.zeros((n, 32), np.uint8), np.zeros((n, 64), np.uint8)
    for p in range(256):
        qs[:, p // 128 * 32 + p % 32] |= (v[:, p] & 3) << (2 * (p // 32 % 4))
        hm[:, p % 32] |= (v[:, p] >> 2) << (p // 32)
    return np.concatenate([hm, qs, s, f16(d).view(np.uint8).reshape(n, 2)], 1)


def q2k(x):
    n = x.shape[0]
    g = x.reshape(n, 16, 16)
    mn = np.minimum(g.min(2), 0)
    scale, mins = (g.max(2) - mn) / 3, -mn
    d, dmin = scale.max(1) / 15, mins.max(1) / 15
    sc = np.clip(np.rint(scale / safe(d)[:, None]), 0, 15).astype(np.uint8)
    m = np.clip(np.rint(mins / safe(dmin)[:, None]), 0, 15).astype(np.uint8)
    dl = f16(d).astype(np.float32)[:, None] * sc
    ml = f16(dmin).astype(np.float32)[:, None] * m
    q = np.clip(np.rint((g + ml[:, :, None]) / safe(dl)[:, :, None]), 0, 3).astype(np.uint8)
    q = q.reshape(n, 256)
    qs = np.zeros((n, 64), np.uint8)
    for p in range(256):
        qs[:, p // 128 * 32 + p % 32] |= q[:, p] << (2 * (p // 32 % 4))
    return np.concatenate([sc | m << 4, qs, f16(d).view(np.uint8).reshape(n, 2),
                           f16(dmin).view(np.uint8).reshape(n, 2)], 1)


def quantize(x, t):
    """x [..., cols] f32 -> blocks [..., cols / elems * bytes] uint8"""
    if t in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0):
        return gguf.quants.quantize(x, t)
    shape = x.shape
    b = x.reshape(-1, 256).astype(np.float32)
    out = {T.Q4_K: lambda: q45k(b, False), T.Q5_K: lambda: q45k(b, True), T.Q6_K: lambda: q6k(b),
           T.Q3_K: lambda: q3k(b), T.Q2_K: lambda: q2k(b)}[t]()
    return out.reshape(*shape[:-1], -1)


def write(hf_dir, out, mode):
    orig = gi.add

    def add(w, name, t, qtype, odd=False):
        kind, arr = t
        if arr.ndim == 1 or name not in TYPES:
            return orig(w, name, t, qtype, odd)
        qt = T.Q8_0 if mode == "dense" and "_exps" in name else TYPES[name]
        if mode == "mixdown":
            qt = T.Q4_0 if "_exps" in name and "down" not in name else T.Q8_0
        if mode == "mixdense":
            qt = T.Q4_0 if "_exps" in name or ".attn_" in name else T.Q8_0
        if mode.startswith("mixgu") and name == "blk.2.ffn_up_exps.weight":
            qt = T.Q4_K
        if mode == "iq" and name in IQ:
            _, bb = gguf.constants.GGML_QUANT_SIZES[IQ[name]]
            be = gguf.constants.GGML_QUANT_SIZES[IQ[name]][0]
            raw = np.random.default_rng(5).integers(
                0, 256, (*arr.shape[:-1], arr.shape[-1] // be * bb), dtype=np.uint8)
            return w.add_tensor(name, raw, raw_dtype=IQ[name])
        blocks = quantize(gi.as_f32(t), qt)
        if mode.endswith("ref"):
            return w.add_tensor(name, gguf.quants.dequantize(blocks, qt).astype(np.float32))
        return w.add_tensor(name, blocks, raw_dtype=qt)

    gi.add = add
    gi.write(hf_dir, out, "q8_0")  # routers and norms F32; every matrix goes through add


DTYPE = {T.Q4_1: 10, T.Q5_0: 11, T.Q5_1: 12, T.Q2_K: 13, T.Q3_K: 14, T.Q4_K: 15, T.Q5_K: 16,
         T.Q6_K: 17}  # cpu/dtype.h's numbers


def layers_down(m, l):
    """Expert layer l's down dtype (its entry's field at 20: 0 = the layer's,
    else dtype + 1; io/io_internal.h)."""
    import struct
    u32 = lambda o: struct.unpack_from("<I", m, o)[0]
    u64 = lambda o: struct.unpack_from("<Q", m, o)[0]
    for i in range(u32(28)):
        e = 64 + 32 * i
        if u32(e) == 65:
            for k in range(0, u64(e + 16), 64):
                r = u64(e + 8) + k
                if u32(r) == l:
                    return u32(r + 20) - 1 if u32(r + 20) else u32(r + 8)
    raise SystemExit(f"blocks: no expert layer {l}")


def blocks(gguf_path, coli_path):
    m, tensors, layers = gi.read_coli(coli_path)
    n = 0
    for t in gguf.GGUFReader(gguf_path).tensors:
        if t.tensor_type not in DTYPE:
            continue
        raw = np.asarray(t.data).reshape(-1, t.data.shape[-1])
        parts = t.name.split(".")
        if parts[0] == "blk" and parts[2].endswith("_exps"):
            l = int(parts[1])
            dt, off, slab, *offs = layers[l]
            which = ["ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"].index(parts[2])
            if (dt if which < 2 else layers_down(m, l)) != DTYPE[t.tensor_type]:
                continue  # converted, not kept (gate and up of different types)
            E = t.data.shape[0]
            want = [(f"{t.name} expert {e}", off + e * slab + offs[which],
                     raw.reshape(E, -1, raw.shape[-1])[e].tobytes()) for e in range(E)]
        else:
            name = {"token_embd.weight": "tok_embd", "output.weight": "lm_head"}.get(t.name)
            if name is None:
                name = f"blk.{parts[1]}.{gi.COLI_NAMES.get(parts[2], parts[2])}"
            dt, off, _ = tensors[name]
            if dt != DTYPE[t.tensor_type]:
                raise SystemExit(f"blocks: {t.name}: container dtype {dt}, not its twin")
            want = [(t.name, off, raw.tobytes())]
        for what, off, b in want:
            if m[off:off + len(b)] != b:
                raise SystemExit(f"blocks: {what}: the container's bytes differ from the GGUF's")
            n += 1
    print(f"blocks: {n} matrices equal")


def compare(ref, got, vocab, max_top1, max_kl):
    a = np.fromfile(ref, dtype=np.float32).reshape(-1, vocab).astype(np.float64)
    b = np.fromfile(got, dtype=np.float32).reshape(-1, vocab).astype(np.float64)
    lsm = lambda x: x - x.max(1, keepdims=True) - np.log(
        np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True))
    pa, pb = lsm(a), lsm(b)
    kl = float((np.exp(pa) * (pa - pb)).sum(1).mean())
    d = int((a.argmax(1) != b.argmax(1)).sum())
    print(f"top-1 differs at {d} of {len(a)}, mean KL {kl:.2e}, max|dlogit| "
          f"{np.abs(a - b).max():.3f} (bounds {max_top1}, {max_kl})")
    return 0 if d <= max_top1 and kl <= max_kl else 1


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
                         float(sys.argv[6])))
    elif sys.argv[1] == "blocks":
        blocks(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit("usage: gguf_kquant.py write HF_DIR OUT MODE | blocks GGUF COLI")
