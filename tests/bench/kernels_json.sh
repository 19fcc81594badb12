#!/bin/sh
# tests/bench/kernels_json.sh — `coli bench kernels --isa A,B --json`: every
# kernel arm (dtype, S) once for each ISA named, each arm's figures positive
# and its ratio its GB/s over the run's read bound; an ISA the CPU lacks, or a
# name that is none, refused (exit 1) with the ISAs this CPU has named.
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
    seen.setdefault((a["dtype"], a["S"]), []).append(a["isa"])
    if not (a["weight_gbs"] > 0 and a["ms"] > 0):
        sys.exit("arm %s S=%d %s: figures not positive" % (a["dtype"], a["S"], a["isa"]))
    if abs(a["ratio"] - a["weight_gbs"] / r["read_gbs"]) > 2e-3 * max(1.0, a["ratio"]):
        sys.exit("arm %s S=%d: ratio %.3f is not %.3f / %.3f" %
                 (a["dtype"], a["S"], a["ratio"], a["weight_gbs"], r["read_gbs"]))
if not seen:
    sys.exit("no kernel arms")
for k, v in seen.items():
    if sorted(v) != sorted(isas):
        sys.exit("arm %s S=%d ran on %s, not once on each of %s" % (k[0], k[1], v, isas))
print("%d arms, each on %s" % (len(seen), ",".join(isas)))
PY
"$COLI" bench kernels --isa scalar,nope --mib 1 --reps 1 >out.txt 2>&1
rc=$?
[ $rc = 1 ] || { cat out.txt; echo "--isa scalar,nope: exit $rc, not 1"; exit 1; }
grep -q "best:" out.txt || { cat out.txt; echo "the refusal names no ISA"; exit 1; }
exit 0
