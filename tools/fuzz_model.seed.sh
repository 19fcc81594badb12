#!/bin/sh
# Seeds for tools/fuzz_model.c: the qwen3_moe fixture converted to q8 and q4
# by the build's coli. Usage: fuzz_model.seed.sh DIR
c="${BUILD:-build}/coli"
[ -x "$c" ] || { echo "fuzz: no seed ($c not built)"; exit 0; }
for q in q8 q4; do
	[ -f "$1/seed-$q.coli" ] || "$c" convert tests/fixtures/qwen3_moe -o "$1/seed-$q.coli" --quant $q >/dev/null 2>&1
done
exit 0
