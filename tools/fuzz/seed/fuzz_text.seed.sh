#!/bin/sh
# Seeds for tools/fuzz/fuzz_text.c beside the committed ones (tests/fuzz/text/):
# the fixtures' tokenizers, cut by tools/fuzz/seed/fuzz_cut_tokenizer.py (every part,
# a tenth of the bytes: a whole one took most of an execution's time; the
# full fixture tokenizer is what selector 2 encodes with), and some text.
# Usage: fuzz_text.seed.sh DIR
for t in tokenizer qwen2_moe mixtral; do
	python3 tools/fuzz/seed/fuzz_cut_tokenizer.py "tests/fixtures/$t/tokenizer.json" "$1/.cut.json" &&
		{ printf '\001'; cat "$1/.cut.json"; } >"$1/seed-tok-cut-$t"
	rm -f "$1/.cut.json"
done
{ printf '\002'; head -c 2000 tests/fixtures/demo/held_out.txt; } >"$1/seed-text"
# replies in every family's format (tools/ref/reply_cases.py), selector 3
i=0
python3 -c 'import json, sys
for l in open(sys.argv[1], encoding="utf-8"):
    c = json.loads(l)
    if "text" in c:
        print(json.dumps(c["text"]))' tests/fixtures/chat/reply_cases.jsonl |
	while read -r t; do
		i=$((i + 1))
		{ printf '\003'; python3 -c 'import json, sys; sys.stdout.write(json.loads(sys.argv[1]))' "$t"; } >"$1/seed-reply-$i"
	done
exit 0
