#!/bin/sh
# tests/bench/make_model.sh — `coli bench make-model` writes a valid, loadable
# model: the tiny shape in q4, q8 and bf16 passes `coli verify` and generates
# from token ids; the same seed gives the same bytes whatever the thread count,
# another seed other bytes; --layers sets the depth; bad shapes and quants are
# refused with a message and leave no file.
set -u
fail() { echo "FAIL: $*"; exit 1; }
for q in q4 q8 bf16; do
	"$COLI" bench make-model --shape tiny --quant $q -o m-$q.coli 2>log.txt || { cat log.txt; fail "make-model $q"; }
	"$COLI" verify m-$q.coli >/dev/null || fail "verify $q"
	"$COLI" generate -m m-$q.coli --ids 1,2,3 -n 8 >out.txt 2>err.txt || { cat err.txt; fail "generate $q"; }
	grep -q "generated 8 tok" err.txt || { cat err.txt; fail "generate $q: expected 8 tokens"; }
	echo "ok   tiny $q: verify, generate --ids"
done
"$COLI" bench make-model --shape tiny --threads 1 --seed 7 -o a.coli 2>/dev/null || fail "seed 7, 1 thread"
"$COLI" bench make-model --shape tiny --threads 2 --seed 7 -o b.coli 2>/dev/null || fail "seed 7, 2 threads"
"$COLI" bench make-model --shape tiny --threads 2 --seed 8 -o c.coli 2>/dev/null || fail "seed 8"
cmp -s a.coli b.coli || fail "same seed, different thread count: files differ"
cmp -s a.coli c.coli && fail "different seeds: same file"
echo "ok   deterministic per seed, independent of threads"
"$COLI" bench make-model --shape tiny --layers 3 -o l3.coli 2>/dev/null || fail "--layers 3"
"$COLI" inspect l3.coli | grep -q "^layers *3 (0 dense, 3 MoE)" || { "$COLI" inspect l3.coli; fail "--layers 3 not applied"; }
echo "ok   --layers"
"$COLI" bench make-model --shape nope -o x.coli 2>err.txt && fail "unknown shape accepted"
grep -q "qwen3-30b-a3b" err.txt || { cat err.txt; fail "unknown shape: message does not list the shapes"; }
"$COLI" bench make-model --shape tiny --quant f16 -o x.coli 2>err.txt && fail "f16 accepted"
ls x.coli* >/dev/null 2>&1 && fail "a refused make-model left a file"
echo "ok   refusals"
exit 0
