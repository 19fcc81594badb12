#!/bin/sh
# tests/bench/decode_json.sh — `coli bench decode --json` on the tiny shape,
# two arms: the report is one JSON object with tok_s/bound/ratio keys, bytes
# per tier add up to the routed experts' bytes (layers x top_k x slab bytes
# per decode token), the bound and ratio follow from the reported bytes and
# bandwidths (the ram-gb=0 arm reads every slab from disk: its disk term is
# disk bytes / the disk bandwidth measured in the streamer's slab pattern),
# and ratio is positive (above 1 it is printed, not failed: the bandwidths are
# measured in the same run, low on a busy host); a table of two arms says the second against the
# first, round by round (one round: their tok/s ratio). No wall-time assertions. The host tiers only
# (--gpu off: a device, even COLI_GPU=sim in the environment, has its own bound).
# --ctx-fill N: the attention report's KV bytes per token are the cache's rows read.
# --seqs N: every token of N sequences decoding together routes top_k experts a layer.
set -u
command -v python3 >/dev/null || { echo "python3 not installed"; exit 77; }
"$COLI" bench make-model --shape tiny -o tiny.coli 2>/dev/null || { echo "make-model failed"; exit 1; }
"$COLI" bench decode -m tiny.coli --gpu off --json --arms default,threads=1,ram-gb=0 --rounds 3 --tokens 6 \
	--disk-mib 1 --read-mib 32 >out.json || { echo "bench decode failed"; exit 1; }
python3 "$ROOT/tests/bench/check_json.py" decode out.json || { cat out.json; exit 1; }
"$COLI" bench decode -m tiny.coli --rounds 1 --tokens 2 --disk-mib 1 --read-mib 16 >table.txt ||
	{ echo "table output failed"; exit 1; }
grep -q "ratio" table.txt && grep -q "bound" table.txt || { cat table.txt; echo "table lacks columns"; exit 1; }
grep -q "^x " table.txt && { cat table.txt; echo "FAIL: one arm, an A/B line"; exit 1; }
# two arms, one round: the round's own ratio is the ratio of the two tok/s
"$COLI" bench decode -m tiny.coli --gpu off --rounds 1 --tokens 2 --disk-mib 1 --read-mib 16 \
	--arms default,threads=1 >table.txt || { echo "A/B table output failed"; exit 1; }
awk '$1 == "default" && !a { a = $2 } $1 == "threads=1" && !b { b = $2 }
	/^x default, the median/ { x = $(NF - 1) }
	END { exit !(a > 0 && b > 0 && x > 0 && (x - b / a) ^ 2 < (0.002 + 0.01 * x) ^ 2) }' table.txt ||
	{ cat table.txt; echo "FAIL: the A/B line is not threads=1 / default"; exit 1; }
"$COLI" bench decode -m tiny.coli --arms nope=1 >/dev/null 2>err.txt && { echo "bad arm accepted"; exit 1; }
grep -q "arm 'nope=1'" err.txt || { cat err.txt; echo "bad arm: message"; exit 1; }
# --ctx-fill: decode after 300 cached tokens, the fill prefilled once and rewound to each
# round; the report's KV bytes are K and V of every layer over positions 0..p at steps
# p = 300..303 (the cache's fp32 rows: --kv-type f32), its share attention's ms over the step's
# (the context is 305: a round that did not rewind would overflow it and fail)
"$COLI" bench decode -m tiny.coli --gpu off --kv-type f32 --json --ctx-fill 300 --rounds 2 --tokens 4 \
	--disk-mib 0 --read-mib 16 >fill.json || { echo "bench decode --ctx-fill failed"; exit 1; }
"$COLI" inspect tiny.coli >cfg.txt
python3 - fill.json cfg.txt <<'PY' || { cat fill.json; exit 1; }
import json, re, sys
j = json.load(open(sys.argv[1]))
cfg = open(sys.argv[2]).read()
layers = int(re.search(r"^layers +(\d+)", cfg, re.M).group(1))
kv, hd = map(int, re.search(r"\(kv (\d+)\) x (\d+)", cfg).groups())
row = 2 * layers * kv * hd * 4
want = sum((p + 1) * row for p in range(300, 304)) / 4
a = j["arms"][0]
assert j["prompt"] == 300 and a["ctx_fill"] == 300, (j["prompt"], a.get("ctx_fill"))
at = a["attention"]
assert abs(at["kv_bytes_per_token"] - want) <= 1, (at["kv_bytes_per_token"], want)
assert abs(at["ms_per_token"] - a["phase_ms_per_token"]["attention"]) <= 1e-3, at
# the share: the median of the rounds' own (attention / step), so never past 1
assert 0 < at["share"] <= 1.01 and at["kv_gbs"] > 0 and at["bound_gbs"] > 0, at
print("ok: --ctx-fill 300: KV %.0f bytes a token as computed, attention %.1f%% of the step"
      % (at["kv_bytes_per_token"], 100 * at["share"]))
PY
"$COLI" bench decode -m tiny.coli --ctx-fill 300 --prompt 8 >/dev/null 2>err.txt &&
	{ echo "FAIL: --ctx-fill with --prompt accepted"; exit 1; }
grep -q -- "--ctx-fill N is the prompt" err.txt || { cat err.txt; echo "FAIL: --ctx-fill + --prompt: message"; exit 1; }
# --seqs 3: three sequences a step (--parallel 3 slots, coli_engine_step): each token still
# routes top_k experts a layer; an expert is loaded once a step for the tokens that share it
"$COLI" bench decode -m tiny.coli --gpu off --json --seqs 3 --rounds 1 --tokens 4 --disk-mib 0 \
	--read-mib 16 >seqs.json || { echo "bench decode --seqs failed"; exit 1; }
python3 - seqs.json cfg.txt <<'PY' || { cat seqs.json; exit 1; }
import json, re, sys
j = json.load(open(sys.argv[1]))
cfg = open(sys.argv[2]).read()
layers = int(re.search(r"^layers +(\d+)", cfg, re.M).group(1))
k = int(re.search(r"top-k (\d+)", cfg).group(1))
a = j["arms"][0]
assert abs(a["routed_pairs_per_token"] - layers * k) < 1e-6, (a["routed_pairs_per_token"], layers, k)
assert 0 < a["expert_loads_per_token"] <= layers * k, a["expert_loads_per_token"]
assert a["tok_s"] > 0, a
print("ok: --seqs 3: %.1f routed pairs, %.2f loads a token" %
      (a["routed_pairs_per_token"], a["expert_loads_per_token"]))
PY
"$COLI" bench decode -m tiny.coli --seqs 0 >/dev/null 2>err.txt && { echo "FAIL: --seqs 0 accepted"; exit 1; }
grep -q -- "--seqs" err.txt || { cat err.txt; echo "FAIL: --seqs 0: message"; exit 1; }
exit 0
