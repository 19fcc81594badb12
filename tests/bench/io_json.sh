#!/bin/sh
# tests/bench/io_json.sh — `coli bench io --json`: sequential and slab
# bandwidths both measured, slab bytes = slabs x slab size, ratio = slabs/seq.
set -u
command -v python3 >/dev/null || { echo "python3 not installed"; exit 77; }
"$COLI" bench make-model --shape tiny -o tiny.coli 2>/dev/null || { echo "make-model failed"; exit 1; }
"$COLI" bench io -m tiny.coli --json --slabs 16 --rounds 2 >out.json || { echo "bench io failed"; exit 1; }
python3 "$ROOT/tests/bench/check_json.py" io out.json || { cat out.json; exit 1; }
exit 0
