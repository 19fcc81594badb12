#!/usr/bin/env python3
"""tests/bench/check_json.py KIND FILE — consistency checks of one
`coli bench decode|prefill|io --json` report (see decode_json.sh). Prints one
line per check; exits 1 at the first failure. Never checks wall time beyond
tok/s > 0."""
import json
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def close(a, b, rel=1e-3, abs_=1.0):
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


kind, path = sys.argv[1], sys.argv[2]
try:
    r = json.load(open(path))
except ValueError as e:
    fail("not one JSON object: %s" % e)

if kind == "io":
    for k in ("seq", "slabs", "ratio"):
        if k not in r:
            fail("missing key " + k)
    if not (r["seq"]["gbs"] > 0 and r["slabs"]["gbs"] > 0):
        fail("bandwidths must be > 0")
    if r["slabs"]["bytes"] != r["slabs"]["n"] * r["slabs"]["slab_bytes"]:
        fail("slab bytes != n x slab_bytes (one layer geometry expected)")
    if not close(r["ratio"], r["slabs"]["gbs"] / r["seq"]["gbs"], 2e-3, 1e-4):
        fail("ratio != slabs/seq")
    print("ok   io: seq %.3f GB/s, slabs %.3f GB/s, ratio %.3f" %
          (r["seq"]["gbs"], r["slabs"]["gbs"], r["ratio"]))
    sys.exit(0)

if r.get("bench") != kind:
    fail("bench is %r, expected %r" % (r.get("bench"), kind))
bw = r["bandwidth"]
if not (bw["disk_gbs"] > 0):
    fail("disk bandwidth not measured")
if not r["arms"]:
    fail("no arms")
L, K, S = r["n_moe_layers"], r["top_k"], r["slab_bytes"]
for a in r["arms"]:
    name = a["arm"]
    for k in ("tok_s", "tok_s_min", "tok_s_max", "bound_tok_s", "bound_term", "ratio",
              "bytes_per_token", "phase_ms_per_token", "host_read_gbs"):
        if k not in a:
            fail("%s: missing key %s" % (name, k))
    if not (a["tok_s"] > 0 and a["tok_s_min"] <= a["tok_s"] <= a["tok_s_max"]):
        fail("%s: tok_s %s not in (0, spread]" % (name, a["tok_s"]))
    if len(a["tok_s_rounds"]) != r["rounds"]:
        fail("%s: %d rounds reported, %d run" % (name, len(a["tok_s_rounds"]), r["rounds"]))
    b = a["bytes_per_token"]
    tiers = b["vram"] + b["ram"] + b["disk"]
    if not close(tiers, b["experts"]):
        fail("%s: tiers %.1f != experts %.1f" % (name, tiers, b["experts"]))
    # every expert load is one slab, whichever tier served it
    if not close(b["experts"], a["expert_loads_per_token"] * S):
        fail("%s: expert bytes %.1f != loads %.3f x slab %d" %
             (name, b["experts"], a["expert_loads_per_token"], S))
    # routed (token, expert) pairs: exactly top_k per MoE layer per token
    if not close(a["routed_pairs_per_token"], L * K, 1e-6, 1e-6):
        fail("%s: routed pairs %.3f != layers %d x top_k %d" %
             (name, a["routed_pairs_per_token"], L, K))
    if kind == "decode" and not close(b["experts"], L * K * S):
        fail("%s: decode expert bytes %.1f != %d x %d x %d" % (name, b["experts"], L, K, S))
    if kind == "prefill" and not (0 < a["expert_loads_per_token"] <= L * K + 1e-9):
        fail("%s: prefill loads per token %.3f not in (0, %d]" %
             (name, a["expert_loads_per_token"], L * K))
    if not (b["dense"] > 0 and a["host_read_gbs"] > 0):
        fail("%s: dense bytes or host read bandwidth missing" % name)
    cpu = a["bound_terms_s"]["cpu"]
    want_cpu = (b["dense"] + b["ram"] + b["disk"]) / (a["host_read_gbs"] * 1e9)
    if not close(cpu, want_cpu, 2e-3, 1e-12):
        fail("%s: cpu term %.6g != (dense+ram+disk)/host_read %.6g" % (name, cpu, want_cpu))
    bound_s = max(a["bound_terms_s"].values())
    if not close(a["bound_tok_s"], 1 / bound_s, 2e-3, 1e-6):
        fail("%s: bound_tok_s != 1 / max(terms)" % name)
    if not close(a["ratio"], a["tok_s"] / a["bound_tok_s"], 2e-3, 1e-6):
        fail("%s: ratio != tok_s / bound_tok_s" % name)
    if not (0 < a["ratio"] <= 1.5):
        fail("%s: ratio %.3f outside (0, 1.5]" % (name, a["ratio"]))
    ph = a["phase_ms_per_token"]
    if not all(v >= -1e-3 for v in ph.values()) or ph["moe"] <= 0:
        fail("%s: phase split %r" % (name, ph))
    print("ok   %s %s: %.1f tok/s, bound %.1f tok/s (%s), ratio %.3f, experts %.0f B/token" %
          (kind, name, a["tok_s"], a["bound_tok_s"], a["bound_term"], a["ratio"], b["experts"]))
