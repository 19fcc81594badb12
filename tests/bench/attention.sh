#!/bin/sh
# tests/bench/attention.sh — `coli bench attention` (tools/bench/bench_cpu_attn.c):
# the report's header (the shape, the cache's MB a layer, the host read and
# the bound) and a row per ISA arm with a positive time and a cache rate that
# is bytes over it; the split as coli_attention_groups_mt decides it (one
# eight-head unit on 3 threads after 600 positions: split; on one thread, or
# the scalar kernels: a task a group); bad options refused with a message
# and status 2. Speed is not asserted (benchmarks are not tests).
set -u
fail() { echo "FAIL: $*"; exit 1; }
avx2=0
grep -qw avx2 /proc/cpuinfo 2>/dev/null && avx2=1
isa=scalar
[ $avx2 = 1 ] && isa=scalar,avx2
"$COLI" bench attention --ctx 600 --heads 8 --kv-heads 1 --head-dim 64 --layers 2 --reps 3 \
	--threads 3 --isa $isa >out.txt 2>err.txt || { cat err.txt; fail "bench attention"; }
cat out.txt
grep -q "^cpu decode attention: ctx 600, 8 heads on 1 kv heads of 64 dims, bf16 cache (0.2 MB a layer, 2 layers in turn); 3 threads; host read [0-9.]* GB/s (same run): bound [0-9.]* ms a layer$" out.txt ||
	fail "header"
# ms, cache GB/s = 2 x 600 x 128 bytes / ms, and the split
awk '$1 == "scalar" || $1 == "avx2" {
	n++; ms = $2; gbs = $7; want = 2 * 600 * 128 / (ms * 1e-3) / 1e9
	if (!(ms > 0) || (gbs - want) > 0.1 + 0.02 * want || (want - gbs) > 0.1 + 0.02 * want) bad++
	sp[$1] = ($0 ~ /threads share each group$/) ? 1 : ($0 ~ /a task a group$/) ? 0 : -1
} END {
	ok = n == 1 + avx2 && !bad && sp["scalar"] == 0 && (!avx2 || sp["avx2"] == 1)
	exit !ok
}' avx2=$avx2 out.txt ||
	fail "arm rows: ms, GB/s or the split"
echo "ok   report: header, $isa arms, GB/s = bytes / time, split where coli_attention_groups_mt splits"
"$COLI" bench attention --ctx 600 --heads 8 --kv-heads 1 --head-dim 64 --layers 1 --reps 3 \
	--threads 1 >one.txt 2>&1 || { cat one.txt; fail "one thread"; }
grep -q "a task a group$" one.txt || { cat one.txt; fail "one thread: split"; }
echo "ok   one thread: a task a group"
for bad in "--ctx 0" "--heads 6 --kv-heads 4" "--kv-type f16" "--isa avx3" "--reps 1" "--bogus 1" "--ctx"; do
	"$COLI" bench attention $bad >o.txt 2>e.txt
	rc=$?
	[ $rc -eq 2 ] && [ -s e.txt ] || { cat o.txt e.txt; fail "'$bad': status $rc, want 2 and a message"; }
done
echo "ok   bad options refused (status 2, a message)"
