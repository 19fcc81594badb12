#!/bin/sh
# tests/bench/spec.sh — `coli bench spec` (tools/bench/bench_spec.c) on the
# demo model: the header, each excerpt's measured line, and a row per g and
# policy whose figures agree with each other: at g = 0 a verification costs
# a step, so the speedup is exactly the tokens over the steps left once the
# accepted drafts are taken out, (n - 1) / (n - 1 - accepted), and the bound
# is 8; at every g the speedup is at most the bound and the ratio is their
# quotient. Bad options are refused with a message and status 2. Speed is not
# asserted (benchmarks are not tests).
set -u
fail() { echo "FAIL: $*"; exit 1; }
"$COLI" convert "$ROOT/models/demo" -o demo.coli --quant q8 >/dev/null 2>&1 || fail "convert"
"$COLI" bench spec -m demo.coli --text "$ROOT/models/demo/held_out.txt" --excerpts 2 \
	--chars 600 --tokens 64 --g 0,0.25 --gpu off --usage off >out.txt 2>err.txt ||
	{ cat err.txt; fail "bench spec"; }
cat out.txt
grep -q "^coli bench spec: demo.coli, 2 excerpts of .*held_out.txt (600 chars each), 64 greedy tokens each$" out.txt ||
	fail "header"
[ "$(grep -c '^excerpt [01]: [0-9]* tokens; a step [0-9.]* ms, a verification of 8 tokens [0-9.]* ms: g = -*[0-9.]*$' out.txt)" = 2 ] ||
	fail "the measured lines"
awk '/^excerpt [0-9]+:/ { n[$2 + 0] = $3 }
$1 ~ /^[0-9]+$/ && NF == 9 {
	rows++; x = $1; g = $3; split($6, ad, "/"); sp = $7; bound = $8; ratio = $9
	if ($4 != "auto" && $4 != "ngram") bad++
	if (sp > bound + 0.001 || ratio - sp / bound > 0.002 || sp / bound - ratio > 0.002) bad++
	if (g == 0) {
		want = (n[x] - 1) / (n[x] - 1 - ad[1])
		if (bound != 8 || sp - want > 0.001 || want - sp > 0.001) bad++
		zero++
	}
} END { exit !(rows == 12 && zero == 4 && !bad) }' out.txt ||
	fail "rows: 3 g x 2 policies x 2 excerpts, speedup = tokens / cost, <= bound, ratio"
echo "ok   report: header, measured g, rows whose speedup, bound and ratio agree"
for bad in "--g -1" "--g 0.1,x" "--excerpts 0" "--tokens 1" "--bogus 1" "--text"; do
	"$COLI" bench spec -m demo.coli --text "$ROOT/models/demo/held_out.txt" $bad >o.txt 2>e.txt
	rc=$?
	[ $rc -eq 2 ] && [ -s e.txt ] || { cat o.txt e.txt; fail "'$bad': status $rc, want 2 and a message"; }
done
"$COLI" bench spec -m demo.coli >o.txt 2>e.txt
[ $? -eq 2 ] && [ -s e.txt ] || fail "no --text: want status 2 and the usage"
echo "ok   bad options refused (status 2, a message)"
