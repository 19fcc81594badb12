#!/bin/sh
# tools/fuzz/fuzz.sh — build and run every libFuzzer target tools/fuzz/fuzz_<name>.c
# (make fuzz; tests/tools/fuzz_smoke runs it for a few seconds a target).
# Each target is compiled with clang -fsanitize=fuzzer,address,undefined
# against the library sources (instrumented the same way, but for the SIMD
# kernels, which no parser reaches and which take minutes under ASan: those
# are built plain) and -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION (checksums
# not enforced, so mutations reach the structural checks), then run from the
# repository's root for $FUZZ_SECONDS each.
# Seeds: the committed corpus tests/fuzz/<name>/ (add every crash found
# there, once fixed), and tools/fuzz/seed/fuzz_<name>.seed.sh OUTDIR when present.
# A target may say " * fuzz-sources: a.c b.c" (more sources of tools/; the
# line may repeat) and " * fuzz-max-len: N" (its inputs' size cap; default
# 262144).
# Corpora and crash files live in $BUILD/fuzz/<name>/. FUZZ_TARGETS="a b"
# picks targets; FUZZ_RUNS=N runs N executions a target instead of
# $FUZZ_SECONDS; FUZZ_REUSE_LIB=1 keeps the instrumented library of the last
# run (after a change to a target only; kept only if built with the same
# FUZZ_OPT). FUZZ_OPT (-O1 by default) optimizes the instrumented code:
# tests/tools/fuzz_smoke builds at -O0, half the library's compile time for
# fewer executions a second; the SIMD kernels stay at -O1. The target "http" is no libFuzzer
# target: tools/fuzz/fuzz_http.py throws mutated raw requests at a running colid
# (it needs $BUILD/coli and $BUILD/colid; skipped without colid).
# Targets run FUZZ_JOBS at a time (nproc by default: a fuzzer is one
# process on one core), each one's lines printed together, in name order, once
# all are done. Exit 1 if any target found a crash or did not build, 77 if
# clang with libFuzzer is missing.
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
CLANG=${CLANG:-clang}
command -v "$CLANG" >/dev/null 2>&1 || { echo "fuzz: clang not found (apt-get install clang)"; exit 77; }
PKGS="jansson libxxhash libpcre2-8 libutf8proc liburing numa"
FUZZ_OPT=${FUZZ_OPT:--O1}
CFLAGS="-std=gnu11 -g $FUZZ_OPT -I. -D_GNU_SOURCE -ffp-contract=off -fno-omit-frame-pointer
	-DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION $(pkg-config --cflags $PKGS 2>/dev/null)"
LIBS="$(pkg-config --libs $PKGS 2>/dev/null) -lm -pthread"
ISA_avx2="-mavx2 -mfma -mf16c"
ISA_avx512="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c"
ISA_amx="$ISA_avx512 -mamx-tile -mamx-int8"
# the SIMD kernels at -O1 whatever FUZZ_OPT: a model's token runs them, and
# intrinsics at -O0 crawl
ISA_avx2="$ISA_avx2 -O1" ISA_avx512="$ISA_avx512 -O1" ISA_amx="$ISA_amx -O1"
# The library, instrumented, as an archive: a target links only the objects it
# uses, so a source clang cannot compile (GCC-only builtins) matters only if a
# target needs it, and then the link says which symbol is missing.
LIBDIR="$BUILD/fuzz/lib"
build_lib() {
	rm -rf "$LIBDIR" && mkdir -p "$LIBDIR"
	# one compile per core at a time (xargs -P keeps every core busy)
	export CLANG CFLAGS ISA_avx2 ISA_avx512 ISA_amx LIBDIR
	for f in core/*.c core/*/*.c mem/*.c io/*.c cpu/*.c cpu/*/*.c ptx/*.c ptx/*/*.c; do
		[ -f "$f" ] && echo "$f"
	done | xargs -P "$(nproc 2>/dev/null || echo 2)" -n 1 sh -c '
		f=$1
		isa=$(basename "$f" .c | sed -n "s/.*_\(avx2\|avx512\|amx\)$/\1/p")
		flags="-fsanitize=fuzzer-no-link,address,undefined"
		[ -n "$isa" ] && eval flags=\$ISA_$isa # plain: see the top
		o="$LIBDIR/$(echo "$f" | tr / _ | sed "s/\.c$/.o/")"
		$CLANG $CFLAGS $flags -c "$f" -o "$o" 2>"$o.log" ||
			echo "fuzz: note: $f does not compile with $CLANG (left out; see $o.log)"' sh
	ar rcs "$LIBDIR/libcoli-fuzz.a" "$LIBDIR"/*.o
	echo "$CFLAGS" >"$LIBDIR/flags"
}
picked() { [ -z "${FUZZ_TARGETS:-}" ] || case " $FUZZ_TARGETS " in *" $1 "*) true ;; *) false ;; esac; }
need_lib=0
for t in tools/fuzz/fuzz_*.c; do picked "$(basename "$t" .c | sed 's/^fuzz_//')" && need_lib=1; done
[ $need_lib = 0 ] || { [ "${FUZZ_REUSE_LIB:-0}" = 1 ] && [ -f "$LIBDIR/libcoli-fuzz.a" ] &&
	[ "$(cat "$LIBDIR/flags" 2>/dev/null)" = "$CFLAGS" ]; } || build_lib
# FUZZ_RUNS=N: N executions a target instead of FUZZ_SECONDS (the counts in
# docs/fuzz.md)
if [ -n "${FUZZ_RUNS:-}" ]; then
	LIMIT="-runs=$FUZZ_RUNS" LIMIT_SAY="$FUZZ_RUNS executions" HTTP_LIMIT="--count $FUZZ_RUNS"
else
	LIMIT="-max_total_time=$FUZZ_SECONDS" LIMIT_SAY="${FUZZ_SECONDS}s" HTTP_LIMIT="--seconds $FUZZ_SECONDS"
fi
# one_target NAME: build, seed and run one target (or "http"); its lines go
# to stdout, its verdict to the exit status (0 clean, 1 a crash or no build)
one_target() {
	name=$1
	dir="$BUILD/fuzz/$name"
	mkdir -p "$dir"
	if [ "$name" = http ]; then # colid's HTTP framing: a mutation driver over a socket
		[ -x "$BUILD/colid" ] || { echo "fuzz: http skipped ($BUILD/colid not built: libmicrohttpd missing)"; return 0; }
		echo "fuzz: running http for $LIMIT_SAY"
		COLI="$BUILD/coli" COLID="$BUILD/colid" TEST_TMP="$dir" \
			python3 tools/fuzz/fuzz_http.py $HTTP_LIMIT --out "$dir" >"$dir/run.log" 2>&1
		rc=$?
		tail -n 3 "$dir/run.log" | sed "s/^/  /"
		[ $rc -eq 0 ] || { echo "fuzz: http FAILED (see $dir/run.log and $dir/crash-*)"; return 1; }
		return 0
	fi
	t=tools/fuzz/fuzz_$name.c
	mkdir -p "$dir/corpus"
	echo "fuzz: building $name"
	# A target may name extra sources of tools/ in a " * fuzz-sources: a.c b.c" line.
	extra=$(sed -n 's/^ \* fuzz-sources: //p' "$t")
	$CLANG $CFLAGS -fsanitize=fuzzer,address,undefined -o "$dir/fuzz_$name" "$t" $extra "$LIBDIR/libcoli-fuzz.a" $LIBS -ldl ||
		{ echo "fuzz: $name does not build"; return 1; }
	[ -d "tests/fuzz/$name" ] && cp tests/fuzz/"$name"/* "$dir/corpus/" 2>/dev/null
	[ -f "tools/fuzz/seed/fuzz_$name.seed.sh" ] && BUILD=$BUILD sh "tools/fuzz/seed/fuzz_$name.seed.sh" "$dir/corpus"
	maxlen=$(sed -n 's/^ \* fuzz-max-len: //p' "$t")
	echo "fuzz: running $name for $LIMIT_SAY"
	"$dir/fuzz_$name" $LIMIT -max_len="${maxlen:-262144}" -rss_limit_mb=4096 \
		-artifact_prefix="$dir/" -print_final_stats=1 "$dir/corpus" >"$dir/run.log" 2>&1
	rc=$?
	tail -n 12 "$dir/run.log" | grep -E "stat::number_of_executed_units|stat::new_units_added|Done|ERROR|SUMMARY" | sed "s/^/  $name: /"
	[ $rc -eq 0 ] || { echo "fuzz: $name FAILED (see $dir/run.log and $dir/crash-*)"; return 1; }
	return 0
}
names=""
for t in tools/fuzz/fuzz_*.c; do
	[ -f "$t" ] || continue
	name=$(basename "$t" .c | sed 's/^fuzz_//')
	picked "$name" && names="$names $name"
done
picked http && names="$names http"
# FUZZ_JOBS at a time; a batch waits for its slowest (all run for the same
# time); each writes $BUILD/fuzz/NAME/say.txt and, if it failed, .../failed
JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
running=0
for name in $names; do
	mkdir -p "$BUILD/fuzz/$name"
	rm -f "$BUILD/fuzz/$name/failed"
	(one_target "$name" >"$BUILD/fuzz/$name/say.txt" 2>&1 || : >"$BUILD/fuzz/$name/failed") &
	running=$((running + 1))
	if [ $running -ge "$JOBS" ]; then
		wait
		running=0
	fi
done
wait
status=0
for name in $names; do
	cat "$BUILD/fuzz/$name/say.txt"
	[ -f "$BUILD/fuzz/$name/failed" ] && status=1
done
exit $status
