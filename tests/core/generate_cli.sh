#!/bin/sh
# tests/core/generate_cli.sh — coli generate / logits / tokenize / trace-diff
# as a user meets them: normal runs, -n 0, empty prompt, a prompt longer than
# the context, invalid UTF-8, a model without a tokenizer, seeded sampling,
# the penalties and logit bias, and route traces.
set -u
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
FX="$FIXTURES/qwen3_moe"
"$COLI" convert "$FX" -o m.coli --quant q8 >/dev/null 2>&1 || { echo "convert failed"; exit 1; }

# 1. a normal run: text on stdout, the summary on stderr
"$COLI" generate -m m.coli -p "def fibonacci(n):" -n 8 >out.txt 2>err.txt
[ $? -eq 0 ] && [ -s out.txt ] && grep -q "decode" err.txt && ! grep -q "decode" out.txt &&
	ok "generate: text on stdout, stats on stderr" || bad "generate normal run"

# 2. -n 0: prefill only, nothing printed
"$COLI" generate -m m.coli -p "hello" -n 0 >out.txt 2>err.txt
[ $? -eq 0 ] && [ ! -s out.txt ] && ok "-n 0 prints nothing" || bad "-n 0"

# 3. empty prompt: starts from the model's BOS/EOS token
"$COLI" generate -m m.coli -p "" -n 4 >out.txt 2>err.txt
[ $? -eq 0 ] && ok "empty prompt generates" || { bad "empty prompt"; cat err.txt; }

# 4. prompt longer than the context: a clear error
long=$(awk 'BEGIN { for (i = 0; i < 200; i++) printf "word%d ", i }')
"$COLI" generate -m m.coli --ctx 32 -p "$long" -n 4 >out.txt 2>err.txt
rc=$?
[ $rc -ne 0 ] && grep -q "exceeds the context of 32" err.txt && ok "long prompt refused: $(cat err.txt)" ||
	{ bad "long prompt (rc $rc)"; cat err.txt; }
"$COLI" logits -m m.coli --ctx 16 --text "$long" -o l.f32 >/dev/null 2>err.txt
[ $? -ne 0 ] && grep -q "exceed the context of 16" err.txt && ok "logits: long input refused" ||
	{ bad "logits long input"; cat err.txt; }

# 5. invalid UTF-8: refused with the byte offset (documented in docs/tokenizer.md)
"$COLI" generate -m m.coli -p "$(printf 'ab\377cd')" -n 4 >out.txt 2>err.txt
[ $? -ne 0 ] && grep -q "invalid UTF-8 at byte offset 2" err.txt && ok "invalid UTF-8 refused" ||
	{ bad "invalid UTF-8"; cat err.txt; }

# 6. a model converted without tokenizer.json: text commands refuse, ids work
mkdir notok && cp "$FX"/config.json "$FX"/generation_config.json "$FX"/model.safetensors notok/
"$COLI" convert notok -o notok.coli >/dev/null 2>&1 || bad "convert without tokenizer"
"$COLI" generate -m notok.coli -p "hello" -n 4 >out.txt 2>err.txt
[ $? -ne 0 ] && grep -q "no tokenizer" err.txt && ok "no tokenizer: text refused" ||
	{ bad "no tokenizer text"; cat err.txt; }
"$COLI" tokenize -m notok.coli "hello" >out.txt 2>err.txt
[ $? -ne 0 ] && grep -q "no tokenizer" err.txt && ok "no tokenizer: tokenize refused" ||
	{ bad "no tokenizer tokenize"; cat err.txt; }
"$COLI" generate -m notok.coli --ids 1,2,3 -n 4 >out.txt 2>err.txt
[ $? -eq 0 ] && ok "no tokenizer: --ids works" || { bad "no tokenizer ids"; cat err.txt; }

# 7. seeded sampling is reproducible; greedy ignores the seed
"$COLI" generate -m m.coli -p "import os" -n 16 --temperature 0.9 --top-p 0.95 --seed 7 >s1.txt 2>/dev/null
"$COLI" generate -m m.coli -p "import os" -n 16 --temperature 0.9 --top-p 0.95 --seed 7 >s2.txt 2>/dev/null
cmp -s s1.txt s2.txt && ok "same seed, same text" || bad "seeded sampling not reproducible"
differ=0
for s in 1 2 3; do
	"$COLI" generate -m m.coli -p "import os" -n 16 --temperature 1.5 --seed $s >s3.txt 2>/dev/null
	cmp -s s1.txt s3.txt || differ=1
done
[ $differ = 1 ] && ok "other seeds give other text" || bad "seed has no effect"
"$COLI" generate -m m.coli -p "bad" -n 4 --temperature -1 >/dev/null 2>err.txt
[ $? -eq 2 ] && ok "negative temperature refused" || bad "negative temperature accepted"

# 8. logits: [n_tokens x vocab] float32
n=$("$COLI" tokenize -m m.coli "def f(x): return x" | wc -w)
"$COLI" logits -m m.coli --text "def f(x): return x" -o l.f32 2>err.txt || bad "logits run"
[ "$(stat -c %s l.f32)" -eq $((n * 1024 * 4)) ] && ok "logits file is $n x 1024 floats" ||
	bad "logits size $(stat -c %s l.f32) for $n tokens"

# 9. route traces: identical runs agree; bf16 vs q8 are compared position by position
ROUTE_TRACE=t1.txt "$COLI" generate -m m.coli -p "for i in range(3):" -n 8 >/dev/null 2>&1
ROUTE_TRACE=t2.txt "$COLI" generate -m m.coli -p "for i in range(3):" -n 8 >/dev/null 2>&1
"$COLI" trace-diff t1.txt t2.txt >d.txt && grep -q identical d.txt && ok "trace-diff: identical runs" ||
	bad "trace-diff identical"
lines=$(grep -vc '^#' t1.txt)
[ "$lines" -gt 0 ] && ok "trace has $lines routing lines" || bad "empty trace"
sed '5s/ [0-9]*:/ 7:/' t1.txt >t3.txt
"$COLI" trace-diff t1.txt t3.txt >d.txt
[ $? -eq 1 ] && grep -q "first difference at position" d.txt && ok "trace-diff: $(head -n 1 d.txt)" ||
	{ bad "trace-diff difference"; cat d.txt; }
# 10. --ubatch: the prompt in chunks of 3 gives the logits of one pass, byte for byte;
# a size out of range is refused; the default (0) is 512 tokens on the CPU, 2048 with a
# device that has room for it (the simulated one, 1 GB, for this small model)
"$COLI" logits -m m.coli --text "def fibonacci(n): return n if n < 2 else" -o u1.f32 >/dev/null 2>&1 &&
	"$COLI" logits -m m.coli --ubatch 3 --text "def fibonacci(n): return n if n < 2 else" \
		-o u3.f32 >/dev/null 2>&1 && cmp -s u1.f32 u3.f32 && [ -s u1.f32 ] &&
	ok "--ubatch 3: logits byte-identical to one pass" || bad "--ubatch 3 logits differ"
"$COLI" generate -m m.coli --ubatch -1 -p "hi" -n 1 >out.txt 2>err.txt
[ $? -ne 0 ] && grep -q "ubatch '-1': expected an integer in 0..16384" err.txt && ok "--ubatch -1 refused: $(cat err.txt)" ||
	{ bad "--ubatch -1"; cat err.txt; }
for g in off:512 sim:2048; do
	"$COLI" generate -m m.coli --gpu ${g%:*} --ctx 4096 --ctx-override -p "hi" -n 1 --profile >out.txt 2>err.txt &&
		grep -q "prefill per prompt token (chunks of ${g#*:})" err.txt &&
		ok "--gpu ${g%:*}: prompts in chunks of ${g#*:} by default" ||
		{ bad "--gpu ${g%:*}: default --ubatch"; grep "chunks of" err.txt; }
done
# --ctx above the model's trained context (512): refused unless --ctx-override
"$COLI" generate -m m.coli --ctx 513 -p "hi" -n 1 >out.txt 2>err.txt
[ $? -ne 0 ] && grep -q "ctx 513 is above the model's trained context of 512 tokens" err.txt &&
	grep -q -- "--ctx-override" err.txt && ok "--ctx 513 > 512 refused: $(cat err.txt)" ||
	{ bad "--ctx 513 accepted above the trained 512"; cat err.txt; }
"$COLI" generate -m m.coli --ctx 513 --ctx-override -p "hi" -n 1 >out.txt 2>err.txt &&
	ok "--ctx 513 --ctx-override accepted" || { bad "--ctx-override"; cat err.txt; }
"$COLI" generate -m m.coli --ctx 512 -p "hi" -n 1 >out.txt 2>err.txt &&
	ok "--ctx 512 (the trained context) accepted" || { bad "--ctx 512"; cat err.txt; }
# 11. --split: two simulated devices split the layers, logits byte-identical to the CPU's
"$COLI" logits -m m.coli --gpu off --text "def fibonacci(n):" -o s0.f32 >/dev/null 2>&1 &&
	"$COLI" logits -m m.coli --gpu sim:2 --split layers --text "def fibonacci(n):" -o s2.f32 \
		>/dev/null 2>err.txt && grep -q "of layers" err.txt && cmp -s s0.f32 s2.f32 &&
	ok "--split layers on sim:2: logits byte-identical to the CPU" || { bad "--split layers"; cat err.txt; }
# 11b. COLI_DEV_ROUTE=0: the dense part on a device, every MoE layer routed and planned
# by the host (the path of models past the device router's limits: more than 1024
# experts, top-k above 16); logits byte-identical to the CPU's, nothing planned there
COLI_DEV_ROUTE=0 "$COLI" logits -m m.coli --gpu sim --text "def fibonacci(n):" -o r0.f32 \
	>/dev/null 2>&1 && cmp -s s0.f32 r0.f32 &&
	COLI_DEV_ROUTE=0 "$COLI" generate -m m.coli --gpu sim -p "hi" -n 4 --profile >out.txt 2>err.txt &&
	grep -q "stayed on it, 0 planned there" err.txt &&
	"$COLI" generate -m m.coli --gpu sim -p "hi" -n 4 --profile >out.txt 2>err.txt &&
	grep -q "stayed on it, [1-9][0-9]* planned there" err.txt &&
	ok "COLI_DEV_ROUTE=0 on sim: host routing, logits byte-identical to the CPU" ||
	{ bad "COLI_DEV_ROUTE=0"; cat err.txt; }
# 12. every position's logits on a device come down 64 rows at a time: 150 positions
# in one 256-token pass on the simulated device, byte-identical to the CPU's
IDS=$(seq -s, 1 150)
"$COLI" logits -m m.coli --gpu off --ids "$IDS" -o l0.f32 >/dev/null 2>&1 &&
	"$COLI" logits -m m.coli --gpu sim --ids "$IDS" -o l1.f32 >/dev/null 2>err.txt &&
	cmp -s l0.f32 l1.f32 && [ "$(wc -c <l1.f32)" -gt 600000 ] &&
	ok "150 positions' logits on sim: byte-identical to the CPU" || { bad "150 positions' logits"; cat err.txt; }
"$COLI" generate -m m.coli --gpu sim:2 --split rows -p "hi" -n 1 >out.txt 2>err.txt
[ $? -ne 0 ] && grep -q "expected auto, layers or none" err.txt && ok "--split rows refused" ||
	{ bad "--split rows"; cat err.txt; }
COLI_GPU_FAIL_DEV=8 "$COLI" generate -m m.coli --gpu sim:2 -p "hi" -n 1 >out.txt 2>err.txt
[ $? -ne 0 ] && grep -q "COLI_GPU_FAIL_DEV='8': expected an integer in -1..7" err.txt &&
	ok "COLI_GPU_FAIL_DEV=8 refused" || { bad "COLI_GPU_FAIL_DEV=8"; cat err.txt; }
# 13. the sampling values colid takes: a presence penalty changes the greedy text of a
# prompt the model repeats itself on; +100 on one token makes every token it; -100
# on the greedy first token changes it; values out of range are refused (exit 2)
"$COLI" generate -m m.coli -p "Hello world" -n 10 >p0.txt 2>/dev/null
"$COLI" generate -m m.coli -p "Hello world" -n 10 --presence-penalty 1.5 >p1.txt 2>/dev/null
[ -s p0.txt ] && ! cmp -s p0.txt p1.txt && ok "--presence-penalty 1.5 changes the greedy text" ||
	bad "--presence-penalty changed nothing"
the=$("$COLI" tokenize -m m.coli " the")
"$COLI" generate -m m.coli -p "Hello world" -n 5 --temperature 1 --logit-bias "$the=100" >b.txt 2>/dev/null
[ "$(cat b.txt)" = " the the the the the" ] && ok "--logit-bias $the=100: every token is ' the'" ||
	bad "--logit-bias +100: '$(cat b.txt)'"
first=$("$COLI" generate -m m.coli -p "Hello world" -n 1 2>/dev/null)
"$COLI" generate -m m.coli -p "Hello world" -n 1 --logit-bias "$("$COLI" tokenize -m m.coli "$first" | cut -d' ' -f1)=-100" >b.txt 2>/dev/null
[ -n "$first" ] && [ "$(cat b.txt)" != "$first" ] && ok "--logit-bias -100 bans the greedy token" ||
	bad "--logit-bias -100: '$(cat b.txt)' = '$first'"
for o in "--min-p 1.5" "--presence-penalty 3" "--frequency-penalty -2.5" "--repetition-penalty 0" \
	"--logit-bias 5" "--logit-bias 5=-101" "--logit-bias 99999=1"; do
	"$COLI" generate -m m.coli -p "hi" -n 1 $o >out.txt 2>err.txt
	[ $? -eq 2 ] && grep -q -- "${o%% *}" err.txt || { bad "$o not refused"; cat err.txt; }
done
ok "out-of-range sampling values refused with the option named"
exit $fail
