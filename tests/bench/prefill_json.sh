#!/bin/sh
# tests/bench/prefill_json.sh — `coli bench prefill --json` on the tiny shape:
# the same consistency checks as decode, except that a prompt batch loads each
# routed expert once per call, so loads per token are at most layers x top_k.
set -u
command -v python3 >/dev/null || { echo "python3 not installed"; exit 77; }
"$COLI" bench make-model --shape tiny --quant q8 -o tiny.coli 2>/dev/null || { echo "make-model failed"; exit 1; }
"$COLI" bench prefill -m tiny.coli --gpu off --json --arms default,threads=1+profile --rounds 3 --prompt 24 \
	--disk-mib 1 --read-mib 32 >out.json || { echo "bench prefill failed"; exit 1; }
python3 "$ROOT/tests/bench/check_json.py" prefill out.json || { cat out.json; exit 1; }
exit 0
