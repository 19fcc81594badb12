#!/bin/sh
# tools/bench/bench_vs_fio.sh MODEL.coli [ROUNDS] — the bench's own bandwidth
# figures next to independent tools run beside them, alternating, ROUNDS times
# (default 5), medians reported (the machine may be shared and noisy):
#
#   disk/seq    `coli bench io` sequential O_DIRECT read of the expert region
#               vs fio --ioengine=io_uring --direct=1 --fixedbufs --rw=read,
#               same file, offset, size, block (4 MiB) and depth (8)
#   disk/slabs  `coli bench io` slabs arm: SLABS (default 512, at most every
#               slab) random whole-slab reads at
#               the streamer's queue depth (the disk term of `coli bench
#               decode`'s bound) vs fio --rw=randread --bs=SLAB_BYTES over
#               the expert region (random, each block once: distinct slabs),
#               same depth, same byte count; the streamer's own figure on
#               the same slab list is printed next to them
#   Both with the same destination memory on both sides, which a virtio
#   disk is sensitive to (docs/perf/history/2026-11-29.md): "4k" = fio's default
#   malloc'd buffers vs `coli bench io --small-pages`, always; "huge" =
#   fio --mem=mmaphuge on a hugetlbfs mount vs coli's default THP buffers
#   (what the streamer reads into and what the bound uses), when
#   HUGETLBFS=DIR names a hugetlbfs mount with ~64 free 2 MiB pages. The
#   script does not reserve pages or mount anything itself; as root:
#     echo 64 > /proc/sys/vm/nr_hugepages; mount -t hugetlbfs none DIR
#   RAM         `coli bench kernels --read-only` host read (tools/bench/
#               bench_measure.c, median of 10 passes), with all online CPUs
#               and with one thread, vs a STREAM-style read written
#               independently here: plain C with GCC vector extensions,
#               OpenMP static schedule, 256 MiB, first touch by the reading
#               threads, median of 10 passes. By default it reads as coli's
#               does (REF_ACC=4 independent accumulators, REF_THP=1: the
#               buffer THP-advised like the engine's weights);
#               REF_ACC=1 REF_THP=0 gives the reference of the first version
#               of this script (one accumulator chain, 4 KiB pages), which
#               reads 5-25% slower on a busy VM (docs/perf/history/2026-11-29.md)
#
# Not a test: it prints figures for docs/perf/README.md, with the machine
# and the commit. Needs fio, python3, cc with OpenMP. Run from the repo root.
set -eu
MODEL=${1:?usage: tools/bench/bench_vs_fio.sh MODEL.coli [ROUNDS]}
ROUNDS=${2:-5}
COLI=${COLI:-build/coli}
SLABS=${SLABS:-512}
REF_ACC=${REF_ACC:-4} REF_THP=${REF_THP:-1}
QD=8 BS_KIB=4096
T=$(mktemp -d "${TMPDIR:-/tmp}/coli-vs-fio.XXXXXX")
trap 'rm -rf "$T"' EXIT
command -v fio >/dev/null || { echo "fio is not installed"; exit 1; }

# the expert region and the slab pattern, from coli's own view of the file
"$COLI" bench io -m "$MODEL" --json --rounds 1 --slabs 1 --seq-mib 0 --no-stream >"$T/geo.json"
eval "$(python3 - "$T/geo.json" <<'P'
import json, sys
g = json.load(open(sys.argv[1]))
print("OFF=%d EXP=%d SLAB=%d SQD=%d UNIFORM=%d" % (g["expert_offset"], g["expert_bytes"],
      g["slabs"]["slab_bytes"], g["slabs"]["qd"], g["uniform"]))
P
)"
[ "$UNIFORM" = 1 ] || { echo "slabs differ in size or leave gaps: fio cannot replay the slab pattern"; exit 1; }
SIZE=$(( EXP < 1073741824 ? EXP : 1073741824 ))
SIZE=$(( SIZE / 4096 * 4096 ))
NSLAB=$(( EXP / SLAB ))
SLABS=$(( SLABS < NSLAB ? SLABS : NSLAB ))

cat >"$T/stream_read.c" <<'C'
/* STREAM-style read bandwidth: sum of a 256 MiB array of uint64, OpenMP.
 * stream_read ACC THP: ACC = 1 or 4 independent vector accumulators per
 * thread, THP = 1: madvise(MADV_HUGEPAGE). Prints median and best GB/s of
 * 10 timed passes (after one warm-up) and the share of huge pages. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
typedef uint64_t v4u64 __attribute__((vector_size(32)));
int main(int argc, char **argv)
{
	size_t bytes = (size_t)256 << 20, n = bytes / sizeof(v4u64);
	int acc = atoi(argv[1]), thp = atoi(argv[2]);
	v4u64 *a = aligned_alloc(1 << 21, bytes), tot = {0};
	double t[11], kb = -1;
	char line[256];
	int in = 0;
	FILE *f;

	if (thp)
		madvise(a, bytes, MADV_HUGEPAGE);
#pragma omp parallel for schedule(static)
	for (size_t i = 0; i < n; i++)
		a[i] = (v4u64){4 * i, 4 * i + 1, 4 * i + 2, 4 * i + 3};
	for (int r = 0; r < 11; r++) {
		double t0 = omp_get_wtime();
#pragma omp parallel
		{
			int nt = omp_get_num_threads(), id = omp_get_thread_num();
			size_t lo = n / 4 * id / nt * 4, hi = n / 4 * (id + 1) / nt * 4;
			v4u64 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};

			if (acc == 4)
				for (size_t i = lo; i < hi; i += 4) {
					s0 += a[i];
					s1 += a[i + 1];
					s2 += a[i + 2];
					s3 += a[i + 3];
				}
			else
				for (size_t i = lo; i < hi; i++)
					s0 += a[i];
#pragma omp critical
			tot += s0 + s1 + s2 + s3;
		}
		t[r] = omp_get_wtime() - t0;
	}
	for (int i = 1; i < 11; i++) /* sort the 10 timed passes */
		for (int j = i + 1; j < 11; j++)
			if (t[j] < t[i]) {
				double x = t[i];
				t[i] = t[j];
				t[j] = x;
			}
	f = fopen("/proc/self/smaps", "r");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = (uintptr_t)a >= lo && (uintptr_t)a < hi;
		else if (in && sscanf(line, "AnonHugePages: %lf kB", &kb) == 1)
			break;
	}
	printf("%.4f %.4f %.3f %llu\n", bytes / ((t[5] + t[6]) / 2) / 1e9, bytes / t[1] / 1e9,
	       kb * 1024 / bytes, (unsigned long long)(tot[0] & 1));
	return 0;
}
C
cc -O3 -march=native -fopenmp -o "$T/stream_read" "$T/stream_read.c"

: >"$T/disk.txt"
: >"$T/ram.txt"
KINDS=4k
[ -n "${HUGETLBFS:-}" ] && KINDS="4k huge"
for r in $(seq 1 "$ROUNDS"); do
    for kind in $KINDS; do
	if [ "$kind" = huge ]; then
		MEM="--mem=mmaphuge:$HUGETLBFS/coli-vs-fio.$$" CF=""
	else
		MEM="--mem=malloc" CF="--small-pages --no-stream"
	fi
	fio --name=seq --filename="$MODEL" --readonly --rw=read --bs=${BS_KIB}k --iodepth=$QD \
		--ioengine=io_uring --direct=1 --fixedbufs $MEM --offset="$OFF" --size="$SIZE" \
		--output-format=json >"$T/fio_seq.json"
	fio --name=slabs --filename="$MODEL" --readonly --rw=randread --bs="$SLAB" \
		--iodepth="$SQD" --ioengine=io_uring --direct=1 --fixedbufs $MEM --offset="$OFF" \
		--size=$(( NSLAB * SLAB )) --io_size=$(( SLABS * SLAB )) --randseed="$r" \
		--output-format=json >"$T/fio_slabs.json"
	"$COLI" bench io -m "$MODEL" --json --rounds 1 --slabs "$SLABS" --seed "$r" --qd $QD \
		--block $BS_KIB --seq-mib $(( SIZE >> 20 )) $CF >"$T/io.json"
	python3 - "$T/fio_seq.json" "$T/fio_slabs.json" "$T/io.json" $kind >>"$T/disk.txt" <<'P'
import json, sys
fs, fr, c = (json.load(open(a)) for a in sys.argv[1:4])
bw = lambda f: f["jobs"][0]["read"]["bw_bytes"] / 1e9
print(bw(fs), c["seq"]["gbs"], bw(fr), c["slabs"]["gbs"],
      c["stream"]["gbs"] if "stream" in c else -1, c["direct"], c["fixed"], sys.argv[4])
P
    done
	for th in $(nproc) 1; do
		OMP_NUM_THREADS=$th "$T/stream_read" "$REF_ACC" "$REF_THP" >"$T/s.txt"
		"$COLI" bench kernels --json --read-only --reps 10 --mib 256 --threads $th >"$T/k.json"
		python3 - "$T/s.txt" "$T/k.json" $th >>"$T/ram.txt" <<'P'
import json, sys
s = open(sys.argv[1]).read().split(); k = json.load(open(sys.argv[2]))
print(float(s[0]), k["read_gbs"], float(s[1]), sys.argv[3], float(s[2]), k["read_huge_share"])
P
	done
done

python3 - "$T/disk.txt" "$T/ram.txt" "$MODEL" "$OFF" "$SIZE" "$ROUNDS" "$SLABS" "$SLAB" "$SQD" \
	"$REF_ACC" "$REF_THP" <<'P'
import statistics as st, sys
d = [l.split() for l in open(sys.argv[1])]
r = [l.split() for l in open(sys.argv[2])]
model, off, size, rounds, slabs, slab, sqd, acc, thp = sys.argv[3:12]
med = lambda v: st.median(float(x) for x in v)
print("model %s, expert region offset %s; %s rounds, medians" % (model, off, rounds))
print("%-11s %-46s %8s   %-38s %8s %8s" % ("", "independent tool", "GB/s", "coli bench", "GB/s",
      "coli/ref"))
for kind in ("4k", "huge"):
    dk = [x for x in d if x[7] == kind]
    if not dk:
        continue
    fs, cs, fr, cr, cst = (med(x[i] for x in dk) for i in range(5))
    fmem = "hugetlbfs" if kind == "huge" else "malloc"
    cmem = "THP" if kind == "huge" else "--small-pages"
    print("%-11s %-46s %8.3f   %-38s %8.3f %8.3f" % ("disk/seq", "fio read bs=4M qd=8, %s" % fmem,
          fs, "bench io seq, %s (direct=%s)" % (cmem, dk[0][5]), cs, cs / fs))
    print("%-11s %-46s %8.3f   %-38s %8.3f %8.3f" % ("disk/slabs", "fio randread bs=%s qd=%s, %s" %
          (slab, sqd, fmem), fr, "bench io slabs, %s%s" % (cmem, " (disk term)" if
          kind == "huge" else ""), cr, cr / fr))
    if cst > 0:
        print("%-11s %-46s %8s   %-38s %8.3f %8.3f" % ("", "", "", "bench io stream (io/stream.c)",
              cst, cst / fr))
for th in sorted(set(x[3] for x in r), key=int, reverse=True):
    rr = [x for x in r if x[3] == th]
    sr, cr, sbest = med(x[0] for x in rr), med(x[1] for x in rr), med(x[2] for x in rr)
    print("%-11s %-46s %8.3f   %-38s %8.3f %8.3f" % ("RAM/" + th,
          "stream_read %s thr, %s acc, THP %s (best %.2f)" % (th, acc, thp, sbest), sr,
          "bench kernels --threads %s read_gbs" % th, cr, cr / sr))
print("huge-page share of the buffers (ref, coli): %s" % " ".join(sorted(set(
      "(%.2f, %.2f)" % (float(x[4]), float(x[5])) for x in r))))
print("%s slabs of %s bytes per slab read; per round, disk (fio seq, coli seq, fio slabs, "
      "coli slabs[, stream]):" % (slabs, slab))
for kind in ("4k", "huge"):
    dk = [x for x in d if x[7] == kind]
    if dk:
        print("  %-4s " % kind + " ".join("(%s)" % ", ".join("%.3f" % float(v) for v in x[:5]
              if float(v) >= 0) for x in dk))
for th in sorted(set(x[3] for x in r), key=int, reverse=True):
    print("per round, RAM %s thr (ref, coli):" % th, " ".join("(%.2f, %.2f)" % (float(x[0]),
          float(x[1])) for x in r if x[3] == th))
P
