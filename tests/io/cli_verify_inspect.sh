#!/bin/sh
# tests/io/cli_verify_inspect.sh — `coli verify` exit codes and messages and
# `coli inspect` output on the synthetic container (written by the round-trip
# test's --write helper, since coli convert is not needed for this).
HELPER="$ROOT/$BUILD/tests/io/container_roundtrip"
[ -x "$COLI" ] && [ -x "$HELPER" ] || { echo "build coli and tests first (make tests)"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

"$HELPER" --write m.coli >offsets.txt || fail "helper could not write m.coli"

"$COLI" verify m.coli >out.txt 2>err.txt || fail "verify of a good file: $(cat err.txt)"
grep -q "m.coli: ok" out.txt || fail "verify did not say ok: $(cat out.txt)"

"$COLI" inspect m.coli >inspect.txt 2>err.txt || fail "inspect: $(cat err.txt)"
for want in "architecture   qwen3_moe" "layers         3 (1 dense, 2 MoE)" "top-k 2" \
	"quant          q8_0" "dense tensors  8, 44736 bytes" "expert layers  3" \
	"expert bytes   610304" "file total     663552"; do
	grep -qF "$want" inspect.txt || fail "inspect lacks '$want'"
done
grep -q "blk.0.attn_q" inspect.txt && fail "inspect without -v printed the tensor table"
"$COLI" inspect -v m.coli >inspect_v.txt || fail "inspect -v"
grep -Eq "^blk.0.attn_q +q8_0 +64 x 64 " inspect_v.txt || fail "inspect -v lacks blk.0.attn_q"
grep -Eq "^ +2 +5 +q4_0 +q4_0 +96 +64 " inspect_v.txt || fail "inspect lacks expert layer 2's row"
grep -Eq "^ +3 +2 +q4_k +q6_k +256 +512 " inspect_v.txt || fail "inspect lacks expert layer 3's row (q4_k, down q6_k)"

# flip one byte inside slab (layer 2, expert 3)
off=$(awk '$1 == "slab" && $2 == 2 && $3 == 3 { print $4 + 100 }' offsets.txt)
cp m.coli slab.coli
printf 'Z' | dd of=slab.coli bs=1 seek="$off" conv=notrunc 2>/dev/null
"$COLI" verify slab.coli >out.txt 2>err.txt && fail "verify passed a corrupt slab"
[ $? -eq 1 ] || fail "verify exit code not 1"
grep -q "slab.coli: slab (layer 2, expert 3) checksum mismatch" err.txt || fail "message: $(cat err.txt)"

# flip one byte inside a tensor
off=$(awk '$1 == "tensor" && $2 == "blk.0.ffn_gate" { print $3 + 7 }' offsets.txt)
cp m.coli tensor.coli
printf 'Z' | dd of=tensor.coli bs=1 seek="$off" conv=notrunc 2>/dev/null
"$COLI" verify tensor.coli 2>err.txt; rc=$?
[ $rc -eq 1 ] || fail "verify exit $rc on a corrupt tensor"
grep -q "tensor blk.0.ffn_gate checksum mismatch" err.txt || fail "message: $(cat err.txt)"

# truncated, empty, missing, not a container
head -c 100000 m.coli >trunc.coli
"$COLI" verify trunc.coli 2>err.txt; rc=$?
[ $rc -eq 1 ] && grep -q "trunc.coli: file is truncated: 100000 bytes, expected 663552" err.txt ||
	fail "truncated: exit $rc, $(cat err.txt)"
"$COLI" inspect trunc.coli 2>err.txt && fail "inspect accepted a truncated file"
: >empty.coli
"$COLI" verify empty.coli 2>err.txt; rc=$?
[ $rc -eq 1 ] && grep -q "empty.coli: empty file" err.txt || fail "empty: exit $rc, $(cat err.txt)"
"$COLI" verify nonexistent.coli 2>err.txt; rc=$?
[ $rc -eq 1 ] && grep -q "nonexistent.coli: cannot open" err.txt || fail "missing: $(cat err.txt)"
echo "hello" >text.coli
"$COLI" verify text.coli 2>err.txt; rc=$?
[ $rc -eq 1 ] && grep -q "not a coli container" err.txt || fail "text file: $(cat err.txt)"
"$COLI" verify 2>/dev/null && fail "verify without a file succeeded"
echo "coli verify/inspect ok"
exit 0
