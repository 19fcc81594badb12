#!/usr/bin/env python3
"""tools/check_layers.py -- the one-way rule between folders and core's parts
(make check-layers; make test runs it).

A part may include the headers of, and call the functions of, itself and the
parts ALLOWED lists for it; nothing else. Calls are read from the built
objects (nm: each undefined coli_* symbol resolved to the object defining it),
includes from the sources ("dir/file.h" lines). A token's path reads top down:

    tools -> core (engine, options, generate) -> core/forward -> core/moe
          -> core/place -> core/dev -> ptx, cpu, io, mem

core/model (config, binding, RoPE, synthetic models), core/convert (checkpoints into
containers, above core/model) and core/text (tokenizer, chat, sampler) sit
beside that path and below core's top; core/jinja (the
template interpreter, libc and jansson only) sits below core/text. cpu/dtype (the weight
types and their block layouts, and ggml's in cpu/ggml) is the leaf every
folder may use;
core/parse.c (strict numbers, libc only) the leaf every part of core may
call. core/coli.h (the public API) and core/core_internal.h (the engine's
structures) belong to every part of core. tests/ may use anything. Where a
lower part must signal a higher one, it calls a hook the higher part handed
it (a function pointer), which this check cannot see, by design.

Inside a part of core, the files' calls form no cycle either (a file that
calls another is above it), except the pairs in ONE_UNIT: one unit's code
split over two files, each using the other.

Usage: tools/check_layers.py [BUILD]   exit 0 clean, 1 with the edges against
the rule listed, 2 when BUILD has no objects (build first).
"""
import os
import re
import subprocess
import sys

LOW = ["cpu", "io", "mem"]
ALLOWED = {
    "tools": None,  # anything
    "core": None,
    "core/forward": ["core/moe", "core/place", "core/dev", "core/model"] + LOW,
    "core/moe": ["core/place", "core/dev", "core/model"] + LOW,
    "core/place": ["core/dev", "core/model"] + LOW,
    "core/dev": ["ptx"] + LOW,
    "core/model": LOW,
    "core/convert": ["core/model"] + LOW,
    "core/text": ["core/model", "core/jinja"] + LOW,
    "core/jinja": [],
    "io": ["mem", "cpu/dtype"],
    "ptx": ["mem", "cpu/dtype"],
    "cpu": ["mem", "cpu/dtype"],
    "mem": [],
}
# file pairs that are one unit split in two (see the top)
ONE_UNIT = [{"core/dev/dev_sim.c", "core/dev/dev_sim_ops.c"}]
# headers every part of core may include
CORE_SHARED = {"core/coli.h", "core/core_internal.h"}
SRC_DIRS = ["core", "mem", "io", "cpu", "ptx", "tools"]


def part(path):
    """The part a source, header or object path belongs to (a subfolder of
    any folder but core/ is its folder's part: ptx/attn is ptx)."""
    d = path.split("/")
    if d[0] == "core" and len(d) > 2:
        return "core/" + d[1]
    if path in ("cpu/dtype.h", "cpu/dtype.c", "cpu/ggml.h", "cpu/ggml.c"):
        return "cpu/dtype"
    if path == "core/parse.c":
        return "core/parse"
    return d[0]


def allowed(src, dst):
    if src == dst or {src, dst} == {"cpu", "cpu/dtype"}:
        return True
    if dst == "core/parse" and src.startswith("core"):
        return True
    ok = ALLOWED.get(src, [])
    return ok is None or dst in ok or (dst == "cpu/dtype" and "cpu" in ok)


def include_edges():
    bad = []
    inc = re.compile(r'^\s*#\s*include\s+"([a-z_]+/[^"]+)"')
    for top in SRC_DIRS:
        for root, _, files in os.walk(top):
            for f in files:
                if not f.endswith((".c", ".h", ".cu", ".cuh")):
                    continue
                path = os.path.join(root, f)
                src = part(path)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        m = inc.match(line)
                        if not m:
                            continue
                        hdr = m.group(1)
                        if hdr in CORE_SHARED and (src == "core" or src.startswith("core/") or src == "tools"):
                            continue
                        dst = part(hdr)
                        if not allowed(src, dst):
                            bad.append(f"{path}:{n}: includes {hdr} ({src} -> {dst})")
    return bad


def file_cycles(defs, undef):
    """Call cycles between the files of one part of core (Tarjan's SCCs)."""
    graph = {}
    for rel, sym in undef:
        dst = defs.get(sym)
        if dst and dst != rel and part(rel[:-2] + ".c") == part(dst[:-2] + ".c"):
            if part(rel[:-2] + ".c").startswith("core/"):
                graph.setdefault(rel[:-2] + ".c", set()).add(dst[:-2] + ".c")
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1 and comp not in ONE_UNIT:
                out.append("call cycle inside " + part(v) + ": " + ", ".join(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def call_edges(build):
    objs = []
    for top in SRC_DIRS:
        for root, _, files in os.walk(os.path.join(build, top)):
            for f in files:  # objects of today's sources (not a moved file's leftovers)
                o = os.path.join(root, f)
                if f.endswith(".o") and os.path.exists(os.path.relpath(o, build)[:-2] + ".c"):
                    objs.append(o)
    if not objs:
        return None
    out = subprocess.run(["nm", "-A"] + objs, capture_output=True, text=True, check=True).stdout
    defs, undef = {}, []
    for line in out.splitlines():
        obj, _, rest = line.partition(":")
        fields = rest.split()
        rel = os.path.relpath(obj, build)
        if len(fields) == 3 and fields[1] in "TDBRV":
            defs[fields[2]] = rel
        elif len(fields) == 2 and fields[0] == "U":
            undef.append((rel, fields[1]))
    bad = set()
    bad.update(file_cycles(defs, undef))
    for rel, sym in undef:
        if sym.startswith("coli_") and sym in defs:
            src, dst = part(rel[:-2] + ".c"), part(defs[sym][:-2] + ".c")
            if not allowed(src, dst):
                bad.add(f"{rel[:-2]}.c calls {sym} ({src} -> {dst}, defined in {defs[sym][:-2]}.c)")
    return sorted(bad)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    calls = call_edges(build)
    if calls is None:
        print(f"check-layers: no objects under {build}/ (build first)")
        return 2
    bad = include_edges() + calls
    for b in bad:
        print(b)
    print(f"check-layers: {len(bad)} edge(s) or cycle(s) against the one-way rule" if bad else "check-layers: ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
