#!/bin/sh
# tests/bench/io_json.sh — `coli bench io --json`: sequential, slab and
# streamer bandwidths all measured; the slab arm reads whole slabs, one read
# each (the streamer's pattern), the streamer read the same list; slab bytes
# = slabs x slab size, ratio = slabs/seq; the same with --small-pages.
set -u
command -v python3 >/dev/null || { echo "python3 not installed"; exit 77; }
"$COLI" bench make-model --shape tiny -o tiny.coli 2>/dev/null || { echo "make-model failed"; exit 1; }
"$COLI" bench io -m tiny.coli --json --slabs 16 --rounds 2 >out.json || { echo "bench io failed"; exit 1; }
python3 "$ROOT/tests/bench/check_json.py" io out.json || { cat out.json; exit 1; }
grep -q '"stream"' out.json || { cat out.json; echo "no stream arm"; exit 1; }
"$COLI" bench io -m tiny.coli --json --slabs 8 --slab-qd 4 --rounds 1 --small-pages --no-stream \
	>small.json || { echo "bench io --small-pages failed"; exit 1; }
python3 "$ROOT/tests/bench/check_json.py" io small.json || { cat small.json; exit 1; }
grep -q '"pages": "4k"' small.json || { cat small.json; echo "pages not 4k"; exit 1; }
exit 0
