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
exit 0
