#!/bin/sh
# Seeds for tools/fuzz/fuzz_jinja.c beside the committed ones (tests/fuzz/jinja/):
# every chat template of tests/fixtures/chat/ and the inline templates of
# tests/fixtures/chat/inline_render.jsonl, one file each.
# Usage: fuzz_jinja.seed.sh DIR
for t in tests/fixtures/chat/*.jinja; do
	cp "$t" "$1/seed-$(basename "$t" .jinja)"
done
python3 - "$1" <<'PY'
import json, os, sys
with open("tests/fixtures/chat/inline_render.jsonl", encoding="utf-8") as f:
    for i, line in enumerate(f):
        with open(os.path.join(sys.argv[1], "seed-inline-%02d" % i), "w", encoding="utf-8") as o:
            o.write(json.loads(line)["source"])
PY
exit 0
