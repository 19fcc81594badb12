"""tests/convert/fp8_ckpt.py -- a block-scaled FP8 checkpoint from a Hugging
Face fixture, laid out as DeepSeek-V3's and Qwen3's FP8 releases are, and its
dequantized references, for tests/convert/fp8_import.sh.

  write FIXTURE OUT BR BC [--scale f32|e8m0] [--bad KIND]

writes three checkpoint directories (the fixture's other files copied):

  OUT/fp8       every linear weight (attention q/k/v/o, MLA's q_a/q_b/kv_a/kv_b, dense MLP, experts,
                shared experts) F8_E4M3 with a float32 "<name>_scale_inv"
                [.., ceil(R/BR), ceil(C/BC)]: scale = amax of the block / 448,
                fp8 = round(w / scale) (ml_dtypes' float8_e4m3fn, nearest even);
                embeddings, lm_head, norms, biases and the router (mlp.gate)
                stay as the fixture has them, as in those releases; config.json
                gains quantization_config {"quant_method": "fp8", "fmt": "e4m3",
                "activation_scheme": "dynamic", "weight_block_size": [BR, BC]}
                (BR = 0: weight_block_size null, one scalar scale per matrix)
  OUT/ref-bf16  the same weights dequantized as transformers does to float32
                (fp8 as float32 x scale_inv, one float32 multiply), then to
                BF16 (nearest even): a plain checkpoint
  OUT/ref-f32   the dequantized float32 values themselves, stored F32

--scale e8m0 stores the scales as DeepSeek-V3.1's "ue8m0" ones: amax / 448
rounded up to a power of two, F8_E8M0 (byte k + 127 for 2^k), scale_fmt
"ue8m0"; fp8 x 2^k then fits BF16 exactly, so ref-bf16 is ref-f32 rounded
to nothing.

--bad makes OUT/fp8 wrong in one way, and prints what the refusal must name:
  gptq       quant_method "gptq"
  truncated  the first scale tensor one block row short
  nan        one weight byte 0x7f (e4m3fn's NaN)
  noconfig   no quantization_config (F8 weights stay)

numpy and ml_dtypes only (tests/convert/fp8_venv); the fp8 decoding is
ml_dtypes', independent of coli's.
"""
import argparse
import json
import os
import shutil
import struct

import ml_dtypes
import numpy as np

F8 = ml_dtypes.float8_e4m3fn
# attention, dense MLP, experts (per expert or fused), shared experts; not
# mlp.gate.weight (the router) nor mlp.shared_expert_gate.weight
QUANTIZED = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
             "gate_proj.weight", "up_proj.weight", "down_proj.weight", "experts.gate_up_proj",
             "experts.down_proj", "q_a_proj.weight", "q_b_proj.weight",
             "kv_a_proj_with_mqa.weight", "kv_b_proj.weight")   # MLA: DeepSeek-V3's


def read_st(path):
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
            out[name] = (v["dtype"], v["shape"], f.read(b - a))
        return out


def write_st(path, tensors):
    """tensors: {name: (dtype, shape, bytes)}, written sorted by name."""
    hdr, off, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name in sorted(tensors):
        dt, shape, data = tensors[name]
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
        blobs.append(data)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def as_f32(dt, shape, raw):
    if dt == "F32":
        return np.frombuffer(raw, dtype=np.float32).reshape(shape)
    if dt == "BF16":
        return (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(
            np.float32).reshape(shape)
    raise SystemExit(f"dtype {dt} not handled here")


def quantized(name, shape):
    return len(shape) >= 2 and name.startswith("model.layers.") and name.endswith(QUANTIZED)


def quantize(w, br, bc, pow2):
    """w [.., R, C] float32 -> (fp8 [.., R, C], scale_inv [.., nrb, ncb] float32)."""
    R, C = w.shape[-2:]
    br, bc = (br, bc) if br else (R, C)
    nrb, ncb = -(-R // br), -(-C // bc)
    pad = np.zeros(w.shape[:-2] + (nrb * br, ncb * bc), dtype=np.float32)
    pad[..., :R, :C] = w
    blocks = pad.reshape(w.shape[:-2] + (nrb, br, ncb, bc))
    amax = np.abs(blocks).max(axis=(-3, -1)).astype(np.float32)
    scale = np.where(amax > 0, amax / np.float32(448), np.float32(1)).astype(np.float32)
    if pow2:  # the least power of two >= scale: 2^e with scale = m 2^e, m in [0.5, 1)
        m, e = np.frexp(scale)
        scale = np.ldexp(np.float32(1), np.where(m == 0.5, e - 1, e)).astype(np.float32)
    full = expand(scale, br, bc, R, C)
    q = np.clip(w / full, -448, 448).astype(F8)
    return q, scale


def expand(scale, br, bc, R, C):
    return np.repeat(np.repeat(scale, br, axis=-2), bc, axis=-1)[..., :R, :C]


def bf16_bytes(x):
    return x.astype(ml_dtypes.bfloat16).tobytes()


def write(fix, out, br, bc, scale_kind, bad):
    src = read_st(os.path.join(fix, "model.safetensors"))
    with open(os.path.join(fix, "config.json")) as f:
        cfg = json.load(f)
    fp8, ref16, ref32, names = {}, {}, {}, []
    for name, (dt, shape, raw) in src.items():
        fp8[name] = ref16[name] = ref32[name] = (dt, shape, raw)
        if not quantized(name, shape):
            continue
        q, scale = quantize(as_f32(dt, shape, raw), br, bc, scale_kind == "e8m0")
        R, C = shape[-2:]
        deq = q.astype(np.float32) * expand(scale, br or R, bc or C, R, C)  # float32 x float32
        fp8[name] = ("F8_E4M3", shape, q.view(np.uint8).tobytes())
        sshape = list(scale.shape) if br or len(shape) > 2 else []
        if scale_kind == "e8m0":
            e = (scale.view(np.uint32) >> 23).astype(np.uint8)  # biased exponent = k + 127
            fp8[name + "_scale_inv"] = ("F8_E8M0", sshape, e.tobytes())
        else:
            fp8[name + "_scale_inv"] = ("F32", sshape, scale.astype(np.float32).tobytes())
        ref16[name] = ("BF16", shape, bf16_bytes(deq))
        ref32[name] = ("F32", shape, deq.astype(np.float32).tobytes())
        names.append(name)
    qc = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
          "weight_block_size": [br, bc] if br else None}
    if scale_kind == "e8m0":
        qc["scale_fmt"] = "ue8m0"
    first = sorted(names)[0]
    if bad == "gptq":
        qc = {"quant_method": "gptq", "bits": 4, "group_size": 128}
        print("gptq")
    elif bad == "truncated":
        dt, shape, raw = fp8[first + "_scale_inv"]
        cut = shape[:-2] + [shape[-2] - 1, shape[-1]]
        fp8[first + "_scale_inv"] = (dt, cut, raw[:4 * int(np.prod(cut))])
        print(first + "_scale_inv")
    elif bad == "nan":
        dt, shape, raw = fp8[first]
        fp8[first] = (dt, shape, b"\x7f" + raw[1:])
        print(first)
    elif bad == "noconfig":
        qc = None
        print(first)
    for sub, tensors, q in (("fp8", fp8, qc), ("ref-bf16", ref16, None), ("ref-f32", ref32, None)):
        d = os.path.join(out, sub)
        os.makedirs(d, exist_ok=True)
        for fn in os.listdir(fix):
            if fn not in ("model.safetensors", "config.json", "ref"):
                shutil.copy(os.path.join(fix, fn), d)
        c = dict(cfg)
        if q:
            c["quantization_config"] = q
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f, indent=2)
        write_st(os.path.join(d, "model.safetensors"), tensors)
        if bad:
            break


def main():
    ap = argparse.ArgumentParser(usage=__doc__)
    ap.add_argument("cmd", choices=["write"])
    ap.add_argument("fixture")
    ap.add_argument("out")
    ap.add_argument("br", type=int)
    ap.add_argument("bc", type=int)
    ap.add_argument("--scale", choices=["f32", "e8m0"], default="f32")
    ap.add_argument("--bad", choices=["gptq", "truncated", "nan", "noconfig"])
    a = ap.parse_args()
    write(a.fixture, a.out, a.br, a.bc, a.scale, a.bad)


if __name__ == "__main__":
    main()
