#!/bin/sh
# Seeds for tools/fuzz/fuzz_container.c: small valid containers written by the
# round-trip test's helper (make tests builds it). Usage: fuzz_container.seed.sh DIR
h="${BUILD:-build}/tests/io/container_roundtrip"
[ -x "$h" ] || { echo "fuzz: no seed ($h not built; run make tests first)"; exit 0; }
"$h" --write "$1/seed-small.bin" --small >/dev/null
"$h" --write "$1/seed-full.bin" >/dev/null
exit 0
