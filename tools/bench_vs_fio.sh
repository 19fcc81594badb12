#!/bin/sh
# tools/bench_vs_fio.sh MODEL.coli [ROUNDS] — the bench's own bandwidth
# figures next to independent tools run beside them, alternating, ROUNDS times
# (default 5), medians reported (the machine may be shared and noisy):
#
#   disk  `coli bench io` sequential O_DIRECT read of the expert region
#         vs fio --ioengine=io_uring --direct=1 --rw=read, same file, offset,
#         size, block (4 MiB) and depth (8)
#   RAM   `coli bench kernels --read-only` host read (tools/bench_measure.c,
#         median of 10 passes), with all online CPUs and with one thread
#         vs a STREAM-style read-only kernel written independently here
#         (plain C sum over 256 MiB, OpenMP threads = online CPUs, compiled
#         by the system cc with -O3 -march=native; at -O2 gcc 12 leaves the
#         sum scalar and it is compute bound, ~5 GB/s per thread here)
#
# Not a test: it prints figures for docs/perf/README.md, with the machine
# and the commit. Needs fio, python3, cc with OpenMP. Run from the repo root.
set -eu
MODEL=${1:?usage: tools/bench_vs_fio.sh MODEL.coli [ROUNDS]}
ROUNDS=${2:-5}
COLI=${COLI:-build/coli}
QD=8 BS_KIB=4096
T=$(mktemp -d "${TMPDIR:-/tmp}/coli-vs-fio.XXXXXX")
trap 'rm -rf "$T"' EXIT
command -v fio >/dev/null || { echo "fio is not installed"; exit 1; }

# the expert region: offset of the first expert layer, size capped at 1 GiB
# (what coli bench io reads by default)
"$COLI" inspect "$MODEL" >"$T/inspect.txt"
OFF=$(awk '/^  layer experts/ {getline; print $6; exit}' "$T/inspect.txt")
EXP=$(awk '/^expert bytes/ {print $3}' "$T/inspect.txt")
SIZE=$(( EXP < 1073741824 ? EXP : 1073741824 ))
SIZE=$(( SIZE / 4096 * 4096 ))

cat >"$T/stream_read.c" <<'C'
/* STREAM-style read bandwidth: sum of a 256 MiB uint64 array, OpenMP. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
int main(void)
{
	size_t n = (256u << 20) / 8;
	uint64_t *a = aligned_alloc(1 << 21, n * 8), s = 0;
	double best = 1e9, t[11];
#pragma omp parallel for
	for (size_t i = 0; i < n; i++)
		a[i] = i;
	for (int r = 0; r < 11; r++) {
		double t0 = omp_get_wtime();
#pragma omp parallel for reduction(+ : s)
		for (size_t i = 0; i < n; i++)
			s += a[i];
		t[r] = omp_get_wtime() - t0;
		if (r && t[r] < best)
			best = t[r];
	}
	for (int i = 1; i < 11; i++) /* median of the 10 timed reps */
		for (int j = i + 1; j < 11; j++)
			if (t[j] < t[i]) { double x = t[i]; t[i] = t[j]; t[j] = x; }
	printf("%.4f %.4f %llu\n", n * 8 / ((t[5] + t[6]) / 2) / 1e9, n * 8 / best / 1e9,
	       (unsigned long long)(s & 1));
	return 0;
}
C
cc -O3 -march=native -fopenmp -o "$T/stream_read" "$T/stream_read.c"

: >"$T/disk.txt"
: >"$T/ram.txt"
for r in $(seq 1 "$ROUNDS"); do
	fio --name=seq --filename="$MODEL" --readonly --rw=read --bs=${BS_KIB}k --iodepth=$QD \
		--ioengine=io_uring --direct=1 --offset="$OFF" --size="$SIZE" \
		--output-format=json >"$T/fio.json"
	"$COLI" bench io -m "$MODEL" --json --rounds 1 --slabs 1 --qd $QD --block $BS_KIB \
		--seq-mib $(( SIZE >> 20 )) >"$T/io.json"
	python3 - "$T/fio.json" "$T/io.json" >>"$T/disk.txt" <<'P'
import json, sys
f = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
print(f["jobs"][0]["read"]["bw_bytes"] / 1e9, c["seq"]["gbs"], c["direct"])
P
	for th in $(nproc) 1; do
		OMP_NUM_THREADS=$th "$T/stream_read" >"$T/s.txt"
		"$COLI" bench kernels --json --read-only --reps 10 --mib 256 --threads $th >"$T/k.json"
		python3 - "$T/s.txt" "$T/k.json" $th >>"$T/ram.txt" <<'P'
import json, sys
s = open(sys.argv[1]).read().split(); k = json.load(open(sys.argv[2]))
print(float(s[0]), k["read_gbs"], float(s[1]), sys.argv[3])
P
	done
done

python3 - "$T/disk.txt" "$T/ram.txt" "$MODEL" "$OFF" "$SIZE" "$ROUNDS" <<'P'
import statistics as st, sys
d = [l.split() for l in open(sys.argv[1])]
r = [l.split() for l in open(sys.argv[2])]
med = lambda v: st.median(float(x) for x in v)
fio, cd = med(x[0] for x in d), med(x[1] for x in d)
print("model %s, expert region offset %s, %d MiB per read pass, %s rounds, medians"
      % (sys.argv[3], sys.argv[4], int(sys.argv[5]) >> 20, sys.argv[6]))
print("%-6s %-44s %9s   %-34s %9s %7s" % ("", "independent tool", "GB/s", "coli bench", "GB/s", "coli/ref"))
print("%-6s %-44s %9.3f   %-34s %9.3f %7.3f" % ("disk", "fio io_uring direct=1 read bs=4M qd=8", fio,
      "bench io seq (O_DIRECT=%s)" % d[0][2], cd, cd / fio))
for th in sorted(set(x[3] for x in r), key=int, reverse=True):
    rr = [x for x in r if x[3] == th]
    sr, cr, sbest = med(x[0] for x in rr), med(x[1] for x in rr), med(x[2] for x in rr)
    print("%-6s %-44s %9.3f   %-34s %9.3f %7.3f" % ("RAM/" + th,
          "stream_read %s thr (median; best %.2f)" % (th, sbest), sr,
          "bench kernels --threads %s read_gbs" % th, cr, cr / sr))
print("per round (fio, coli):", " ".join("(%.3f, %.3f)" % (float(x[0]), float(x[1])) for x in d))
for th in sorted(set(x[3] for x in r), key=int, reverse=True):
    print("per round, %s thr (stream, coli):" % th, " ".join("(%.2f, %.2f)" % (float(x[0]), float(x[1])) for x in r if x[3] == th))
P
