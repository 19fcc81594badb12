#!/usr/bin/env python3
"""tests/bench/check_json.py KIND FILE — consistency checks of one
`coli bench decode|prefill|stream|io --json` report (see decode_json.sh). KIND
decode-dev: a decode report whose arms run the dense part on a simulated
device, whose bytes all count at the host read bandwidth. Prints one line
per check; exits 1 at the first failure. Never checks wall time beyond
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
    for k in ("seq", "slabs", "ratio", "expert_offset", "expert_bytes", "n_slabs_total",
              "uniform", "pages", "fixed", "direct"):
        if k not in r:
            fail("missing key " + k)
    sl = r["slabs"]
    if not (r["seq"]["gbs"] > 0 and sl["gbs"] > 0):
        fail("bandwidths must be > 0")
    if not (r["seq"]["qd"] >= 1 and sl["qd"] >= 1 and r["seq"]["block_bytes"] % 4096 == 0):
        fail("seq/slabs depth or block size")
    if r["pages"] not in ("thp", "4k"):
        fail("pages %r" % r["pages"])
    if r["expert_offset"] % 4096:
        fail("expert region not 4 KiB aligned")
    if not 0 < sl["n"] <= r["n_slabs_total"]:
        fail("slabs drawn %d not in (0, %d]" % (sl["n"], r["n_slabs_total"]))
    if r["uniform"] and r["expert_bytes"] != r["n_slabs_total"] * sl["slab_bytes"]:
        fail("uniform, but expert bytes != slabs x slab bytes")
    if sl["bytes"] != sl["n"] * sl["slab_bytes"]:
        fail("slab bytes != n x slab_bytes (one layer geometry expected)")
    # the streamer's pattern: one read per whole slab
    if sl["reads"] != sl["n"]:
        fail("slabs arm: %d reads for %d slabs" % (sl["reads"], sl["n"]))
    if "stream" in r:
        st = r["stream"]
        if not (st["gbs"] > 0 and st["bytes"] == sl["bytes"] and st["reads"] == sl["n"]
                and st["qd"] == sl["qd"]):
            fail("stream arm: not the slabs arm's list (%r)" % st)
    if not close(r["ratio"], sl["gbs"] / r["seq"]["gbs"], 2e-3, 1e-4):
        fail("ratio != slabs/seq")
    print("ok   io: seq %.3f GB/s, slabs %.3f GB/s, ratio %.3f%s" %
          (r["seq"]["gbs"], sl["gbs"], r["ratio"],
           ", stream %.3f GB/s" % r["stream"]["gbs"] if "stream" in r else ""))
    sys.exit(0)

def timeline(name, a, every_layer):
    """A host-planned decode layer's timeline (--profile arms): its steps end in
    order after the routing; every_layer: the host planned every layer, so every
    timed layer call is counted once."""
    tl = a["layer_timeline_us"]
    if [t["copies"] for t in tl] != [0, 1, 2, 3]:
        fail("%s: layer timeline classes %r" % (name, tl))
    for t in tl:
        if t["layers"] > 0 and not (t["chain"] >= 0 and 0 <= t["issue"] <= t["cpu"] + 1e-3
                                    and t["cpu"] <= t["take"] + 1e-3
                                    and t["take"] <= t["end"] + 1e-3):
            fail("%s: layer timeline out of order %r" % (name, t))
    n, want = sum(t["layers"] for t in tl), r["rounds"] * r["tokens"] * r["n_moe_layers"]
    if every_layer and n != want:
        fail("%s: %d layer calls timed, expected rounds x tokens x MoE layers %d" %
             (name, n, want))


if kind == "stream":
    want = ["sync", "overlap", "overlap+stream", "stream-only", "cpu-only"]
    names = [a["arm"] for a in r["arms"]]
    if names != want:
        fail("stream arms %r, expected %r" % (names, want))
    L, K, S = r["n_moe_layers"], r["top_k"], r["slab_bytes"]
    if not (0 < r["vram_frac"] <= 1 and r["heat_from"] and r["expert_bytes"] > 0):
        fail("stream: vram_frac, heat_from or expert_bytes missing")
    by = {a["arm"]: a for a in r["arms"]}
    vram = by["sync"]["bytes_per_token"]["vram"]
    for a in r["arms"]:
        name, b = a["arm"], a["bytes_per_token"]
        # --profile: a quarter of the experts in VRAM, none in cpu-only: the host
        # plans every layer of every arm
        if "layer_timeline_us" in a:
            timeline(name, a, True)
        if not (a["tok_s"] > 0 and a["tok_s_min"] <= a["tok_s"] <= a["tok_s_max"]):
            fail("%s: tok_s %s not in (0, spread]" % (name, a["tok_s"]))
        if len(a["tok_s_rounds"]) != r["rounds"]:
            fail("%s: %d rounds reported" % (name, len(a["tok_s_rounds"])))
        # bytes per tier add up to the routed experts' bytes
        if not close(b["vram"] + b["ram"] + b["disk"], L * K * S):
            fail("%s: vram+ram+disk %.1f != layers x top_k x slab %d" %
                 (name, b["vram"] + b["ram"] + b["disk"], L * K * S))
        if not close(a["routed_pairs_per_token"], L * K, 1e-6, 1e-6):
            fail("%s: routed pairs %.3f != %d" % (name, a["routed_pairs_per_token"], L * K))
        # same heat, same resident set: the same VRAM bytes in every arm with VRAM
        want_vram = 0 if name == "cpu-only" else vram
        if not close(b["vram"], want_vram):
            fail("%s: vram bytes %.1f, expected %.1f" % (name, b["vram"], want_vram))
        host = b["ram"] + b["disk"]
        st = a["stream_bytes_per_token"]
        if name in ("sync", "overlap", "cpu-only") and st != 0:
            fail("%s: streamed %.1f bytes with --stream off" % (name, st))
        if name == "stream-only" and not close(st, host):
            fail("stream-only: streamed %.1f != ram+disk %.1f" % (st, host))
        if name == "overlap+stream" and not (-1 <= st <= host + 1):
            fail("overlap+stream: streamed %.1f outside [0, ram+disk]" % st)
        # copies: at most one per streamed expert plus the lookahead's guesses
        # (staged copies that hit need none); none without streaming
        cp = a["stream_copy_bytes_per_token"]
        if cp < 0 or (st == 0 and name != "stream-only" and cp > 0 and
                      name in ("sync", "overlap", "cpu-only")):
            fail("%s: %.1f bytes copied per token" % (name, cp))
        if a["group_async"] != (name != "sync"):
            fail("%s: group_async %d" % (name, a["group_async"]))
        w = a["overlap_window_ms_per_token"]
        if not all(v >= 0 for v in w.values()):
            fail("%s: overlap window %r" % (name, w))
        if a["reloads"] != 0:
            fail("%s: %d reloads without CUDA_RELEASE_HOST" % (name, a["reloads"]))
        terms = a["bound_terms_s"]
        if not close(a["bound_tok_s"], 1 / max(terms.values()), 2e-3, 1e-6):
            fail("%s: bound_tok_s != 1 / max(terms)" % name)
        if not close(a["ratio"], a["tok_s"] / a["bound_tok_s"], 2e-3, 1e-6):
            fail("%s: ratio != tok_s / bound_tok_s" % name)
        if not close(a["ideal_ratio"], a["tok_s"] / a["ideal_bound_tok_s"], 2e-3, 1e-6):
            fail("%s: ideal_ratio != tok_s / ideal_bound_tok_s" % name)
        # the host memory's cap only lowers the bound's rate; measured only
        # with a GPU (sim: none, so the two agree)
        if a["ideal_ratio"] < a["ideal_ratio_uncapped"] * (1 - 1e-6):
            fail("%s: the capped ideal ratio below the uncapped one" % name)
        if r["bandwidth"]["dram_gbs"] is None and not close(
                a["ideal_ratio"], a["ideal_ratio_uncapped"], 1e-6, 1e-9):
            fail("%s: no host memory cap measured, yet the ratios differ" % name)
        if a["ideal_bound_tok_s"] < a["bound_tok_s"] * (1 - 1e-6):
            fail("%s: the best split's bound is below the arm's own" % name)
        # the path bound: the token outside the MoE phase + the expert bytes' ideal
        if not (a["path_bound_tok_s"] > 0 and a["moe_ideal_ms_per_token"] >= 0 and
                a["moe_ms_per_token"] >= 0):
            fail("%s: path bound %r, moe ideal %r ms" %
                 (name, a["path_bound_tok_s"], a["moe_ideal_ms_per_token"]))
        if not close(a["path_ratio"], a["tok_s"] / a["path_bound_tok_s"], 2e-3, 1e-6):
            fail("%s: path_ratio != tok_s / path_bound_tok_s" % name)
        path_ms = 1e3 / a["path_bound_tok_s"]
        want_path = max(1e3 / a["tok_s"] - a["moe_ms_per_token"], 0) + a["moe_ideal_ms_per_token"]
        if not close(path_ms, want_path, 2e-3, 1e-6):
            fail("%s: path %.4f ms != non-MoE + moe ideal %.4f ms" % (name, path_ms, want_path))
        if r["device"] == "sim":
            want_moe = (b["vram"] + host) / (a["host_read_gbs"] * 1e9) * 1e3
            if not close(a["moe_ideal_ms_per_token"], want_moe, 2e-3, 1e-9):
                fail("%s: sim: moe ideal %.6g ms != the expert bytes at the host read %.6g" %
                     (name, a["moe_ideal_ms_per_token"], want_moe))
            want_cpu = (b["dense"] + b["vram"] + host) / (a["host_read_gbs"] * 1e9)
            if not close(terms["cpu"], want_cpu, 2e-3, 1e-12):
                fail("%s: sim: cpu term %.6g != every byte at the host read %.6g" %
                     (name, terms["cpu"], want_cpu))
        print("ok   stream %-15s %.1f tok/s, vram/ram/disk/streamed %.0f/%.0f/%.0f/%.0f B/token, "
              "window %.3f|%.3f|%.3f ms, ratio %.3f" %
              (name, a["tok_s"], b["vram"], b["ram"], b["disk"], st, w["pack_issue"],
               w["cpu_rows"], w["take"], a["ratio"]))
    sys.exit(0)
dev = kind == "decode-dev"
if dev:
    kind = "decode"

if r.get("bench") != kind:
    fail("bench is %r, expected %r" % (r.get("bench"), kind))
bw = r["bandwidth"]
if not (bw["disk_gbs"] > 0):
    fail("disk bandwidth not measured")
# the disk term is measured in the slab streamer's pattern: whole slabs,
# one read each, at the streamer's queue depth
if bw.get("disk_pattern") != "slabs":
    fail("disk pattern %r, expected slabs" % bw.get("disk_pattern"))
if bw["disk_block_bytes"] != r["slab_bytes"]:
    fail("disk reads of %d bytes, slabs are %d" % (bw["disk_block_bytes"], r["slab_bytes"]))
if not (bw["disk_qd"] >= 1 and bw["disk_reads_per_round"] >= 1):
    fail("disk depth or reads per round")
if bw["disk_bytes_per_round"] != bw["disk_reads_per_round"] * r["slab_bytes"]:
    fail("disk bytes per round %d != %d reads x slab %d" %
         (bw["disk_bytes_per_round"], bw["disk_reads_per_round"], r["slab_bytes"]))
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
    ph = a["phase_ms_per_token"]
    if not all(v >= -1e-3 for v in ph.values()) or ph["moe"] <= 0:
        fail("%s: phase split %r" % (name, ph))
    # attention's core (the CPU's scores, softmax and values) is part of attention
    core = ph.get("attention_core")
    if core is None or core > ph["attention"] + 1e-3 or (not dev and not core > 0):
        fail("%s: attention core %r of attention %.4f" % (name, core, ph["attention"]))
    # --profile's window detail: there iff the arm ran with it, its parts inside the MoE
    # phase (medians of separate sums: some slack), a device's expert work timed where
    # the host planned the layers (some experts resident, some not; a layer wholly
    # resident is planned on the dense device, outside the window)
    pr = a.get("profile_ms_per_token")
    if ("profile" in name) != (pr is not None):
        fail("%s: profile detail %s" % (name, "missing" if pr is None else "unasked for"))
    if pr is not None:
        inside = pr["plan"] + pr["host_slabs"] + pr["device_issue"] + pr["beside"]
        if not all(v >= -1e-3 for v in pr.values()) or inside > 1.5 * ph["moe"] + 0.01:
            fail("%s: profile %r against moe %.4f ms" % (name, pr, ph["moe"]))
        if dev and b["vram"] > 0 and b["ram"] + b["disk"] > 0 and not pr["devices_busy"] > 0:
            fail("%s: a device ran the experts, yet devices busy is %r" % (name, pr))
        # with the host planning every layer (a few experts resident)
        timeline(name, a, dev and b["vram"] > 0 and b["ram"] + b["disk"] > 0)
    if kind == "decode" and not (ph["attention"] > 0 and ph["lm_head"] > 0):
        fail("%s: decode phase split lacks attention or lm_head: %r" % (name, ph))
    if dev:
        # a simulated device computes on the CPU: every byte is a CPU byte
        want_cpu = (b["dense"] + b["vram"] + b["ram"] + b["disk"]) / (a["host_read_gbs"] * 1e9)
        if not close(a["bound_terms_s"]["cpu"], want_cpu, 2e-3, 1e-12):
            fail("%s: sim: cpu term %.6g != every byte at the host read %.6g" %
                 (name, a["bound_terms_s"]["cpu"], want_cpu))
        print("ok   %s %s: %.1f tok/s, phases %s" % (kind, name, a["tok_s"], ph))
        continue
    if b["disk"] > 0:
        want = b["disk"] / (bw["disk_gbs"] * 1e9)
        if not close(a["bound_terms_s"]["disk"], want, 2e-3, 1e-12):
            fail("%s: disk term %.6g != disk bytes / disk GB/s %.6g" %
                 (name, a["bound_terms_s"]["disk"], want))
    cpu = a["bound_terms_s"]["cpu"]
    want_cpu = (b["dense"] + b["ram"] + b["disk"]) / (a["host_read_gbs"] * 1e9)
    if not close(cpu, want_cpu, 2e-3, 1e-12):
        fail("%s: cpu term %.6g != (dense+ram+disk)/host_read %.6g" % (name, cpu, want_cpu))
    bound_s = max(a["bound_terms_s"].values())
    if not close(a["bound_tok_s"], 1 / bound_s, 2e-3, 1e-6):
        fail("%s: bound_tok_s != 1 / max(terms)" % name)
    if not close(a["ratio"], a["tok_s"] / a["bound_tok_s"], 2e-3, 1e-6):
        fail("%s: ratio != tok_s / bound_tok_s" % name)
    # above 1 only when a bandwidth measured in the same run came out low (a
    # busy host): reported, not asserted (a measurement, not a property)
    if not a["ratio"] > 0:
        fail("%s: ratio %.3f not positive" % (name, a["ratio"]))
    print("ok   %s %s: %.1f tok/s, bound %.1f tok/s (%s), ratio %.3f, experts %.0f B/token" %
          (kind, name, a["tok_s"], a["bound_tok_s"], a["bound_term"], a["ratio"], b["experts"]))
