#!/bin/sh
# tests/bench/kernels_json.sh — `coli bench kernels --isa A,B --json`: every
# kernel arm (dtype, S, layer rounds or not) once for each ISA named, S = 1
# both ways for every dtype, each arm's figures positive and its ratio its
# GB/s over the run's read bound; --shape 235b names its matrices;
# --dtypes runs the dtypes named and no other; an ISA the CPU lacks, a name
# that is none, an unknown shape or dtype, refused (exit 1) with what is
# known named.
set -u
command -v python3 >/dev/null || { echo "python3 not installed"; exit 77; }
isas=scalar
"$COLI" bench kernels --isa avx2 --mib 1 --reps 1 --threads 1 --read-only --json >/dev/null 2>&1 &&
	isas=scalar,avx2
"$COLI" bench kernels --isa "$isas" --mib 4 --reps 1 --threads 2 --json >out.json ||
	{ echo "bench kernels --isa $isas failed"; exit 1; }
python3 - "$isas" out.json <<'PY' || { cat out.json; exit 1; }
import json, sys
isas = sys.argv[1].split(",")
r = json.load(open(sys.argv[2]))
seen = {}
for a in r["arms"]:
    seen.setdefault((a["dtype"], a["S"], a["layer"]), []).append(a["isa"])
    if not (a["weight_gbs"] > 0 and a["ms"] > 0):
        sys.exit("arm %s S=%d %s: figures not positive" % (a["dtype"], a["S"], a["isa"]))
    if abs(a["ratio"] - a["weight_gbs"] / r["read_gbs"]) > 2e-3 * max(1.0, a["ratio"]):
        sys.exit("arm %s S=%d: ratio %.3f is not %.3f / %.3f" %
                 (a["dtype"], a["S"], a["ratio"], a["weight_gbs"], r["read_gbs"]))
if not seen:
    sys.exit("no kernel arms")
for k, v in seen.items():
    if sorted(v) != sorted(isas):
        sys.exit("arm %s S=%d%s ran on %s, not once on each of %s" %
                 (k[0], k[1], "L" if k[2] else "", v, isas))
for d in {k[0] for k in seen}:
    if (d, 1, True) not in seen or (d, 1, False) not in seen:
        sys.exit("%s: S = 1 not both per matrix and in layer rounds" % d)
print("%d arms, each on %s" % (len(seen), ",".join(isas)))
PY
"$COLI" bench kernels --shape 235b --mib 8 --reps 1 --threads 2 >out.txt 2>&1 ||
	{ cat out.txt; echo "--shape 235b failed"; exit 1; }
grep -q "1536x4096 + 4096x1536" out.txt || { cat out.txt; echo "--shape 235b: not its matrices"; exit 1; }
grep -qE "^q4_k +1L " out.txt || { cat out.txt; echo "--shape 235b: no q4_k 1L row"; exit 1; }
"$COLI" bench kernels --dtypes q2_k,q4 --mib 2 --reps 1 --threads 1 --json >out.json ||
	{ echo "--dtypes q2_k,q4 failed"; exit 1; }
python3 - out.json <<'PY' || { cat out.json; exit 1; }
import json, sys
got = sorted({a["dtype"] for a in json.load(open(sys.argv[1]))["arms"]})
if got != ["q2_k", "q4_0"]:
    sys.exit("--dtypes q2_k,q4 ran %s" % got)
PY
"$COLI" bench kernels --dtypes q2_k,iq4_xs --mib 1 --reps 1 >out.txt 2>&1
rc=$?
[ $rc = 1 ] && grep -q "'iq4_xs' is not one of .*q2_k" out.txt ||
	{ cat out.txt; echo "--dtypes iq4_xs: exit $rc, not refused naming the dtypes"; exit 1; }
"$COLI" bench kernels --shape 7b --mib 1 --reps 1 >out.txt 2>&1
rc=$?
[ $rc = 1 ] && grep -q "30b or 235b" out.txt || { cat out.txt; echo "--shape 7b: exit $rc, not refused naming the shapes"; exit 1; }
"$COLI" bench kernels --isa scalar,nope --mib 1 --reps 1 >out.txt 2>&1
rc=$?
[ $rc = 1 ] || { cat out.txt; echo "--isa scalar,nope: exit $rc, not 1"; exit 1; }
grep -q "best:" out.txt || { cat out.txt; echo "the refusal names no ISA"; exit 1; }
exit 0
