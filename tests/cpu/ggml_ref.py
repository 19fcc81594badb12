#!/usr/bin/env python3
"""tests/cpu/ggml_ref.py DIR -- random blocks of every ggml type coli
dequantizes and the `gguf` Python package's dequantization of them
(DIR/TYPE.blocks, DIR/TYPE.f32), for tests/cpu/ggml_dequant.c, which runs it
with the venv of tests/io/gguf_venv."""
import sys
import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

out = sys.argv[1]
rng = np.random.default_rng(2026)
# the half fields of each block (byte offsets), given finite random values so
# that every product is a number
HALVES = {Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0],
          Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
          Q.MXFP4: []}
N_BLOCKS = 64
for t, halves in HALVES.items():
    elems, size = gguf.constants.GGML_QUANT_SIZES[t]
    blocks = rng.integers(0, 256, (N_BLOCKS, size), dtype=np.uint8)
    for off in halves:
        h = (rng.standard_normal(N_BLOCKS) * 0.05).astype(np.float16)
        h[:4] = [0.0, -0.0, 6.1e-5, -65504.0]  # zero, negative zero, subnormal range, max
        blocks[:, off:off + 2] = h.view(np.uint8).reshape(N_BLOCKS, 2)
    with np.errstate(over="ignore"):  # MXFP4 scales up to 2^127: inf, as in C
        ref = gguf.quants.dequantize(blocks.reshape(-1), t).astype(np.float32)
    assert ref.size == N_BLOCKS * elems
    blocks.tofile(f"{out}/{t.name}.blocks")
    ref.tofile(f"{out}/{t.name}.f32")
# F16 and BF16: every finite value class (NaN payloads are the converters' own)
h = rng.integers(0, 65536, 4096, dtype=np.uint16)
f16 = h[(h & 0x7c00) != 0x7c00]
f16.tofile(f"{out}/F16.blocks")
f16.view(np.float16).astype(np.float32).tofile(f"{out}/F16.f32")
bf = h[(h & 0x7f80) != 0x7f80]
bf.tofile(f"{out}/BF16.blocks")
gguf.quants.dequantize(bf.view(np.uint8), Q.BF16).astype(np.float32).tofile(f"{out}/BF16.f32")
