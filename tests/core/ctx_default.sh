#!/bin/sh
# tests/core/ctx_default.sh — the context when --ctx is 0 (core/ctx.c): the
# model's trained length, capped by what the RAM budget leaves the KV cache,
# said at start when capped (and with --verbose); --ctx above the trained
# length refused naming where it comes from (max_position_embeddings, or YaRN's
# original x factor) unless --ctx-override.
#   tiny shape  trained 4096, 2 KB of fp32 KV a token: opens at 4096 (no line;
#               --verbose says "the model's trained length"); --ram-gb 0.015 with
#               --kv-type f32 caps it
#               below 4096 to a multiple of 256 whose cache is at most half the
#               budget, said; --ctx 4097 refused, 4096 runs
#   qwen3_moe_yarn  tests/fixtures/long's config (max_position_embeddings 2560,
#               YaRN x4 of 2048) with qwen3_moe's weights: trained 8192, so
#               --ctx 8192 runs and 8193 is refused naming "YaRN: original 2048 x
#               factor 4"
set -u
fail=0
bad() { echo "FAIL: $*"; fail=1; }
"$COLI" bench make-model --shape tiny -o tiny.coli 2>/dev/null || { echo "make-model failed"; exit 1; }
gen() { "$COLI" generate -m "$@" --ids 1,2,3 -n 2 --gpu off >out.txt 2>err.txt; }

gen tiny.coli || { cat err.txt; bad "tiny: generate"; }
grep -q "^coli: ctx" err.txt && bad "tiny: a ctx line without a cap: $(grep '^coli: ctx' err.txt)"
gen tiny.coli --verbose || { cat err.txt; bad "tiny: generate --verbose"; }
grep -q "^coli: ctx 4096 (the model's trained length" err.txt &&
	echo "ok: tiny opens at its trained 4096" || { cat err.txt; bad "tiny: --verbose ctx line"; }

gen tiny.coli --ram-gb 0.015 --kv-type f32 # the budget then refuses the rest; the line comes first
line=$(grep "^coli: ctx" err.txt)
n=$(echo "$line" | sed -n 's/^coli: ctx \([0-9]*\) (the model.s trained 4096, capped by RAM.*/\1/p')
if [ -n "$n" ] && [ "$n" -lt 4096 ] && [ $((n % 256)) -eq 0 ] && [ $((n * 2048)) -le 7500000 ]; then
	echo "ok: --ram-gb 0.015 caps it: $line"
else
	cat err.txt; bad "--ram-gb 0.015: no cap below 4096 said"
fi

gen tiny.coli --ctx 4097 && bad "--ctx 4097 accepted above the trained 4096"
grep -q "trained context of 4096 tokens (max_position_embeddings)" err.txt &&
	echo "ok: --ctx 4097 refused: $(cat err.txt)" || { cat err.txt; bad "--ctx 4097: message"; }
gen tiny.coli --ctx 4096 || { cat err.txt; bad "--ctx 4096"; }

mkdir -p yarn
for f in model.safetensors tokenizer.json tokenizer_config.json generation_config.json; do
	ln -sf "$FIXTURES/qwen3_moe/$f" "yarn/$f"
done
cp "$FIXTURES/long/qwen3_moe_yarn/config.json" yarn/config.json
"$COLI" convert yarn -o yarn.coli --quant bf16 --quiet 2>err.txt || { cat err.txt; exit 1; }
gen yarn.coli --ctx 8192 || { cat err.txt; bad "yarn: --ctx 8192 (original x factor)"; }
gen yarn.coli --ctx 8193 && bad "yarn: --ctx 8193 accepted"
grep -q "trained context of 8192 tokens (YaRN: original 2048 x factor 4)" err.txt &&
	echo "ok: yarn: --ctx 8193 refused: $(cat err.txt)" || { cat err.txt; bad "yarn: --ctx 8193: message"; }
gen yarn.coli --verbose || { cat err.txt; bad "yarn: default"; }
grep -q "^coli: ctx 8192 (the model's trained length" err.txt &&
	echo "ok: yarn: opens at 8192, past max_position_embeddings 2560" || { cat err.txt; bad "yarn: default ctx"; }
exit $fail
