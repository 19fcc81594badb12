#!/bin/sh
# Seeds for tools/fuzz/fuzz_config.c: every fixture's config.json,
# tokenizer_config.json, generation_config.json and shard index, NUL
# separated after a quant byte (0 bf16, 1 q8, 2 q4); the long-context
# fixtures' configs (RoPE scaling) with their primaries' other files.
# Usage: fuzz_config.seed.sh DIR
part() { [ -f "$1" ] && cat "$1"; printf '\000'; }
q=0
for d in tests/fixtures/*/; do
	[ -f "$d/config.json" ] || continue
	n=$(basename "$d")
	{
		printf "\\00$q"
		part "$d/config.json"
		part "$d/tokenizer_config.json"
		part "$d/generation_config.json"
		[ -f "$d/model.safetensors.index.json" ] && cat "$d/model.safetensors.index.json"
	} >"$1/seed-$n"
	q=$(((q + 1) % 3))
done
for d in tests/fixtures/long/*/; do
	[ -f "$d/config.json" ] || continue
	n=$(basename "$d") p=tests/fixtures/${n%_*}
	{
		printf "\00$q"
		part "$d/config.json"
		part "$p/tokenizer_config.json"
		part "$p/generation_config.json"
	} >"$1/seed-long-$n"
	q=$(((q + 1) % 3))
done
exit 0
