#!/bin/sh
# Seeds for tools/fuzz_text.c beside the committed ones (tests/fuzz/text/):
# the fixtures' tokenizers and some text. Usage: fuzz_text.seed.sh DIR
for t in tokenizer qwen2_moe mixtral; do
	{ printf '\001'; cat "tests/fixtures/$t/tokenizer.json"; } >"$1/seed-tok-$t"
done
{ printf '\002'; head -c 2000 tests/fixtures/demo/held_out.txt; } >"$1/seed-text"
exit 0
