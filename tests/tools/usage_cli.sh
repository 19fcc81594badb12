#!/bin/sh
# The expert usage file end to end: written beside the model at exit,
# `coli usage snapshot` / `restore` round trip byte for byte, a restored
# file is what the next run starts from, a file of another model is
# refused by restore and ignored (one line) by the engine, and a torn
# file is refused by its checksum. No PATH.tmp.* is ever left behind.
set -e
fail() { echo "FAIL: $*"; exit 1; }
"$COLI" convert "$FIXTURES/qwen3_moe" -o a.coli --quant q8 >/dev/null 2>&1
"$COLI" convert "$FIXTURES/olmoe" -o b.coli --quant q8 >/dev/null 2>&1
"$COLI" generate -m a.coli -p "hello world" -n 4 --ram-gb 0 >/dev/null 2>gen1.err
[ -s a.coli.usage ] || fail "no usage file after generate"
ls a.coli.usage.tmp.* 2>/dev/null && fail "temporary usage file left behind"
"$COLI" usage snapshot a.coli -o snap.u 2>/dev/null || fail "snapshot"
cmp -s snap.u a.coli.usage || fail "snapshot differs from the usage file"
# more heat, then restore the snapshot: the file is exactly the snapshot again
"$COLI" generate -m a.coli -p "the quick brown fox" -n 4 >/dev/null 2>&1
cmp -s snap.u a.coli.usage && fail "usage file did not change after a second run"
"$COLI" usage restore a.coli snap.u 2>/dev/null || fail "restore"
cmp -s snap.u a.coli.usage || fail "restore did not reproduce the snapshot"
# another model's file: restore refuses it, the engine ignores it with one line
"$COLI" generate -m b.coli -p "hi" -n 2 >/dev/null 2>&1
if "$COLI" usage restore a.coli b.coli.usage 2>restore.err; then fail "restore accepted another model's file"; fi
grep -q "another model" restore.err || fail "restore message: $(cat restore.err)"
"$COLI" generate -m a.coli -p "hi" -n 2 --usage b.coli.usage >/dev/null 2>gen2.err
[ "$(grep -c 'usage file ignored' gen2.err)" = 1 ] || fail "engine did not say it ignored the file: $(cat gen2.err)"
# torn file
head -c 100 snap.u > torn.u
if "$COLI" usage restore a.coli torn.u 2>torn.err; then fail "restore accepted a torn file"; fi
cmp -s snap.u a.coli.usage || fail "a failed restore changed the usage file"
# --usage off writes nothing
"$COLI" generate -m b.coli -p "hi" -n 2 --usage off >/dev/null 2>&1
ls ./*.tmp.* 2>/dev/null && fail "temporary files left behind"
echo ok
