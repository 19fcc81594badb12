#!/bin/sh
# Seeds for tools/fuzz_text.c beside the committed ones (tests/fuzz/text/):
# the fixtures' tokenizers, cut by tools/fuzz_cut_tokenizer.py (every part,
# a tenth of the bytes: a whole one took most of an execution's time; the
# full fixture tokenizer is what selector 2 encodes with), and some text.
# Usage: fuzz_text.seed.sh DIR
for t in tokenizer qwen2_moe mixtral; do
	python3 tools/fuzz_cut_tokenizer.py "tests/fixtures/$t/tokenizer.json" "$1/.cut.json" &&
		{ printf '\001'; cat "$1/.cut.json"; } >"$1/seed-tok-cut-$t"
	rm -f "$1/.cut.json"
done
{ printf '\002'; head -c 2000 tests/fixtures/demo/held_out.txt; } >"$1/seed-text"
exit 0
