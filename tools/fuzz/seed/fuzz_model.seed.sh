#!/bin/sh
# Seeds for tools/fuzz/fuzz_model.c: the qwen3_moe fixture converted to q8 and q4
# by the build's coli, its tokenizer.json cut by tools/fuzz/seed/fuzz_cut_tokenizer.py
# (every part of it, a tenth of the bytes: its load was half of an
# execution's time; docs/fuzz.md). Usage: fuzz_model.seed.sh DIR
c="${BUILD:-build}/coli"
[ -x "$c" ] || { echo "fuzz: no seed ($c not built)"; exit 0; }
[ -f "$1/seed-cut-q8.coli" ] && [ -f "$1/seed-cut-q4.coli" ] && exit 0
src=tests/fixtures/qwen3_moe
tmp=$(mktemp -d "${TMPDIR:-/tmp}/coli-fuzz-model.XXXXXX") || exit 0
for f in "$src"/*; do ln -s "$(pwd)/$f" "$tmp/"; done
rm "$tmp/tokenizer.json"
python3 tools/fuzz/seed/fuzz_cut_tokenizer.py "$src/tokenizer.json" "$tmp/tokenizer.json" || { rm -rf "$tmp"; exit 0; }
for q in q8 q4; do
	[ -f "$1/seed-cut-$q.coli" ] || "$c" convert "$tmp" -o "$1/seed-cut-$q.coli" --quant $q >/dev/null 2>&1
done
rm -rf "$tmp"
exit 0
