#!/bin/sh
# tests/bench/stream_json.sh — `coli bench stream --json` on the tiny shape
# with the simulated device: the five arms in order; bytes per tier add up to
# the routed experts' bytes; every arm with VRAM serves the same VRAM bytes
# (same heat restored before each round, same resident set) and cpu-only
# none; only the streaming arms stream, stream-only all of the host's
# experts; no reloads; bound and ratios follow from the reported figures;
# with --profile each arm times every layer call once, its steps in order;
# the table ends with the overlap+stream summary (of one round: the
# median of the rounds' ratios equals the ratio of the medians) when sync and
# overlap+stream both ran, and only then; a token's part outside the timed
# layers is not negative.
# The heat files are removed afterwards and the model's own usage file is
# not created. No wall-time assertions.
set -u
command -v python3 >/dev/null || { echo "python3 not installed"; exit 77; }
"$COLI" bench make-model --shape tiny -o tiny.coli 2>/dev/null || { echo "make-model failed"; exit 1; }
"$COLI" bench stream -m tiny.coli --gpu sim --json --rounds 2 --tokens 6 --heat-tokens 32 \
	--disk-mib 1 --read-mib 16 --profile >out.json 2>err.txt || { cat err.txt; echo "bench stream failed"; exit 1; }
python3 "$ROOT/tests/bench/check_json.py" stream out.json || { cat out.json; exit 1; }
grep -q "layer_timeline_us" out.json || { echo "FAIL: --profile JSON lacks the layer timeline"; exit 1; }
ls tiny.coli.usage* 2>/dev/null && { echo "FAIL: heat files left behind"; exit 1; }
"$COLI" bench stream -m tiny.coli --gpu sim --rounds 1 --warmup 0 --tokens 2 --disk-mib 1 \
	--read-mib 16 --arms sync,cpu-only >table.txt 2>/dev/null || { echo "table output failed"; exit 1; }
grep -q "^sync " table.txt && grep -q "^cpu-only " table.txt && grep -q "cpu-rows" table.txt ||
	{ cat table.txt; echo "FAIL: table lacks arms or columns"; exit 1; }
grep -q "x sync" table.txt && { cat table.txt; echo "FAIL: a summary without overlap+stream"; exit 1; }
"$COLI" bench stream -m tiny.coli --gpu sim --rounds 1 --warmup 0 --tokens 2 --disk-mib 1 \
	--read-mib 16 --arms sync,overlap+stream >table.txt 2>/dev/null || { echo "table output failed"; exit 1; }
grep -Eq "^overlap\+stream: [0-9.]+x sync \(median of the rounds' ratios; [0-9.]+x of the medians\); [0-9.]+ of the ideal bound \([0-9.]+ without the host memory's cap\), [0-9.]+ of the path bound$" table.txt ||
	{ cat table.txt; echo "FAIL: no summary line"; exit 1; }
# one round: its own ratio is the ratio of the medians
sed -n "s/^overlap+stream: \([0-9.]*\)x sync (median of the rounds' ratios; \([0-9.]*\)x of the medians).*/\1 \2/p" \
	table.txt | { read a b && [ "$a" = "$b" ]; } || { cat table.txt; echo "FAIL: one round, two ratios"; exit 1; }
# the layers' timed parts lie inside the rounds' tokens: the part outside them is
# never below zero (two rounds: the token's and the layers' time both the rounds' mean)
"$COLI" bench stream -m tiny.coli --gpu sim --rounds 2 --warmup 0 --tokens 4 --disk-mib 1 \
	--read-mib 16 --arms sync,overlap+stream >table.txt 2>/dev/null || { echo "table output failed"; exit 1; }
grep -q " outside " table.txt || { cat table.txt; echo "FAIL: no outside line"; exit 1; }
awk '$2 == "outside" && $3 < 0 { bad = 1 } END { exit bad }' table.txt ||
	{ cat table.txt; echo "FAIL: a token's outside part below zero"; exit 1; }
"$COLI" bench stream -m tiny.coli --gpu sim --arms fast >/dev/null 2>err.txt && { echo "FAIL: unknown arm accepted"; exit 1; }
grep -q "unknown arm 'fast'" err.txt || { cat err.txt; echo "FAIL: unknown arm: message"; exit 1; }
exit 0
