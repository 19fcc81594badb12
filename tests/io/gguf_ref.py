#!/usr/bin/env python3
"""tests/io/gguf_ref.py -- GGUF files written and read by the `gguf` Python
package (llama.cpp's own), the reference for io/gguf.c.

    gguf_ref.py write OUT.gguf       a file with every metadata type, arrays of
                                     strings and numbers, tensors of several types
    gguf_ref.py expect FILE.gguf     the lines `coli inspect -v FILE` prints for
                                     keys and tensors, from gguf.GGUFReader
    gguf_ref.py bad DIR              malformed files DIR/NAME.gguf, each with the
                                     words its refusal must hold in DIR/NAME.why
"""
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q, GGUFValueType as V

VT = {V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16", V.UINT32: "u32",
      V.INT32: "i32", V.FLOAT32: "f32", V.BOOL: "bool", V.STRING: "str", V.ARRAY: "array",
      V.UINT64: "u64", V.INT64: "i64", V.FLOAT64: "f64"}


def write(path):
    rng = np.random.default_rng(7)
    w = gguf.GGUFWriter(path, "qwen3moe")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -100)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -32000)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -2000000000)
    w.add_float32("t.f32", 0.1)
    w.add_uint64("t.u64", 18000000000000000000)
    w.add_int64("t.i64", -9000000000000000000)
    w.add_float64("t.f64", 1e-300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo wörld")
    w.add_string("t.empty", "")
    w.add_array("t.strs", ["a", "", "ünïcode", "x" * 60] + [f"tok{i}" for i in range(20)])
    w.add_array("t.ints", [1, -2, 3, 2**31 - 1])
    w.add_array("t.floats", [0.5, -1.25, 3.0e38])
    w.add_array("t.empty_arr", [])
    w.add_tensor("f32", rng.standard_normal((3, 64), dtype=np.float32))
    w.add_tensor("f16", rng.standard_normal((64, 2)).astype(np.float16))
    x = rng.standard_normal((4, 64), dtype=np.float32)
    w.add_tensor("q8", gguf.quants.quantize(x, Q.Q8_0), raw_dtype=Q.Q8_0)
    w.add_tensor("q4", gguf.quants.quantize(x, Q.Q4_0), raw_dtype=Q.Q4_0)
    w.add_tensor("q4k", rng.integers(0, 255, (2, 144), dtype=np.uint8), raw_dtype=Q.Q4_K)
    w.add_tensor("bf16", gguf.quants.quantize(x, Q.BF16), raw_dtype=Q.BF16)
    w.add_tensor("cube", rng.standard_normal((2, 3, 32), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def scalar(vt, v):
    if vt in (V.FLOAT32, V.FLOAT64):
        return "%.9g" % float(v)
    if vt == V.BOOL:
        return str(int(bool(v)))
    return str(int(v))


def expect(path):
    r = gguf.GGUFReader(path)
    out = []
    for name, f in r.fields.items():
        if name.startswith("GGUF."):
            continue
        vt = f.types[0]
        line = f"key {name} = " + ("" if vt == V.ARRAY else VT[vt] + " ")
        if vt == V.STRING:
            s = bytes(f.parts[f.data[0]])[:200]
            line += '"' + s.decode("utf-8", "surrogateescape") + '"'
        elif vt == V.ARRAY:
            et = f.types[1] if len(f.types) > 1 else V.UINT8
            if len(f.data) == 0 and len(f.types) == 1:  # an empty array: read its type
                et = V(int(f.parts[-2][0]))
            line += f"array[{len(f.data)}] of {VT[et]}"
            for i in f.data[:8]:
                if et == V.STRING:
                    line += ' "' + bytes(f.parts[i])[:40].decode("utf-8", "surrogateescape") + '"'
                else:
                    line += " " + scalar(et, f.parts[i][0])
            if len(f.data) > 8:
                line += " ..."
        else:
            line += scalar(vt, f.parts[f.data[0]][0])
        out.append(line)
    for t in r.tensors:
        shape = ", ".join(str(int(d)) for d in t.shape)
        out.append(f"tensor {t.name} {t.tensor_type.name} [{shape}] at {int(t.data_offset)}, "
                   f"{int(t.n_bytes)} bytes")
    sys.stdout.buffer.write(("\n".join(out) + "\n").encode("utf-8", "surrogateescape"))


def gstr(b):
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return gstr(key.encode()) + struct.pack("<I", vtype) + payload


def tinfo(name, dims, ttype, off):
    return (gstr(name.encode()) + struct.pack("<I", len(dims)) +
            b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ttype, off))


def gguf_bytes(kvs, tensors, data=b"", version=3, align=32, magic=b"GGUF", counts=None):
    nt, nkv = counts or (len(tensors), len(kvs))
    head = magic + struct.pack("<IQQ", version, nt, nkv) + b"".join(kvs) + b"".join(tensors)
    pad = (-len(head)) % align
    return head + b"\0" * pad + data


def bad(d):
    arch = kv("general.architecture", 8, gstr(b"qwen3moe"))
    f32 = tinfo("w", [32, 2], 0, 0)
    cases = {
        "magic": (gguf_bytes([arch], [], magic=b"GGUX"), "bad magic"),
        "version1": (gguf_bytes([arch], [], version=1), "version 1 not supported"),
        "bigendian": (gguf_bytes([arch], [], version=3 << 24), "big endian"),
        "truncated_kv": (gguf_bytes([arch], [])[:50], "truncated"),
        "huge_counts": (gguf_bytes([arch], [], counts=(1 << 40, 1)), "cannot fit"),
        "dup_key": (gguf_bytes([arch, arch], []), "appears twice"),
        "bad_vtype": (gguf_bytes([kv("k", 13, b"\0" * 8)], []), "unknown value type"),
        "nested_array": (gguf_bytes([kv("k", 9, struct.pack("<IQ", 9, 1))], []),
                         "array of arrays"),
        "string_past_end": (gguf_bytes([kv("k", 8, struct.pack("<Q", 1 << 50))], []),
                            "truncated"),
        "dims0": (gguf_bytes([arch], [tinfo("w", [], 0, 0)]), "0 dims"),
        "dims5": (gguf_bytes([arch], [tinfo("w", [1] * 5, 0, 0)]), "5 dims"),
        "zero_dim": (gguf_bytes([arch], [tinfo("w", [32, 0], 0, 0)]), "dim 1 is 0"),
        "unknown_type": (gguf_bytes([arch], [tinfo("w", [32], 31, 0)], b"\0" * 64),
                         "ggml type 31 is unknown"),
        "partial_block": (gguf_bytes([arch], [tinfo("w", [48, 2], 8, 0)], b"\0" * 128),
                          "not whole Q8_0 blocks of 32"),
        "data_past_end": (gguf_bytes([arch], [f32], b"\0" * 100), "outside the file"),
        "unaligned": (gguf_bytes([arch], [tinfo("w", [8], 0, 4)], b"\0" * 64),
                      "not aligned"),
        "overlap": (gguf_bytes([arch], [f32, tinfo("v", [32], 0, 128)], b"\0" * 512),
                    "overlap"),
        "dup_tensor": (gguf_bytes([arch], [f32, tinfo("w", [32], 0, 256)], b"\0" * 512),
                       "appears twice"),
        "bad_alignment": (gguf_bytes([arch, kv("general.alignment", 4, struct.pack("<I", 3))],
                                     [f32], b"\0" * 256), "power of two"),
        "nul_in_key": (gguf_bytes([kv("a\0b", 4, struct.pack("<I", 1))], []), "NUL byte"),
    }
    os.makedirs(d, exist_ok=True)
    for name, (blob, why) in cases.items():
        with open(os.path.join(d, name + ".gguf"), "wb") as fh:
            fh.write(blob)
        with open(os.path.join(d, name + ".why"), "w") as fh:
            fh.write(why + "\n")


if __name__ == "__main__":
    {"write": write, "expect": expect, "bad": bad}[sys.argv[1]](sys.argv[2])
