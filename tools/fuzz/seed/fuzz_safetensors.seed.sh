#!/bin/sh
# Seeds for tools/fuzz/fuzz_safetensors.c: each fixture shard's header as the
# target reads it (the data region's size, 8 bytes little endian, then the
# JSON header). Without them the target never got past the first brace.
# Usage: fuzz_safetensors.seed.sh DIR
for f in tests/fixtures/*/*.safetensors; do
	[ -f "$f" ] || continue
	python3 - "$f" "$1/seed-$(basename "$(dirname "$f")")-$(basename "$f" .safetensors)" <<'PY'
import os, struct, sys
raw = open(sys.argv[1], "rb").read(1 << 20)
n = struct.unpack("<Q", raw[:8])[0]
data = os.path.getsize(sys.argv[1]) - 8 - n
open(sys.argv[2], "wb").write(struct.pack("<Q", data) + raw[8:8 + n])
PY
done
exit 0
