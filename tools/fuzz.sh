#!/bin/sh
# tools/fuzz.sh — build and run every libFuzzer target tools/fuzz_<name>.c
# (make fuzz; tests/tools/fuzz_smoke runs it for a few seconds a target).
# Each target is compiled with clang -fsanitize=fuzzer,address,undefined
# against the library sources (instrumented the same way, but for the SIMD
# kernels, which no parser reaches and which take minutes under ASan: those
# are built plain) and -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION (checksums
# not enforced, so mutations reach the structural checks), then run from the
# repository's root for $FUZZ_SECONDS each.
# Seeds: the committed corpus tests/fuzz/<name>/ (add every crash found
# there, once fixed), and tools/fuzz_<name>.seed.sh OUTDIR when present.
# A target may say " * fuzz-sources: a.c b.c" (more sources of tools/) and
# " * fuzz-max-len: N" (its inputs' size cap; default 262144).
# Corpora and crash files live in $BUILD/fuzz/<name>/. FUZZ_TARGETS="a b"
# picks targets; FUZZ_RUNS=N runs N executions a target instead of
# $FUZZ_SECONDS; FUZZ_REUSE_LIB=1 keeps the instrumented library of the last
# run (after a change to a target only). The target "http" is no libFuzzer
# target: tools/fuzz_http.py throws mutated raw requests at a running colid
# (it needs $BUILD/coli and $BUILD/colid; skipped without colid).
# Exit 1 if any target found a crash or did not build, 77 if clang with
# libFuzzer is missing.
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
CLANG=${CLANG:-clang}
command -v "$CLANG" >/dev/null 2>&1 || { echo "fuzz: clang not found (apt-get install clang)"; exit 77; }
PKGS="jansson libxxhash libpcre2-8 libutf8proc liburing numa"
CFLAGS="-std=gnu11 -g -O1 -I. -D_GNU_SOURCE -ffp-contract=off -fno-omit-frame-pointer
	-DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION $(pkg-config --cflags $PKGS 2>/dev/null)"
LIBS="$(pkg-config --libs $PKGS 2>/dev/null) -lm -pthread"
ISA_avx2="-mavx2 -mfma -mf16c"
ISA_avx512="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c"
ISA_amx="$ISA_avx512 -mamx-tile -mamx-int8"
# The library, instrumented, as an archive: a target links only the objects it
# uses, so a source clang cannot compile (GCC-only builtins) matters only if a
# target needs it, and then the link says which symbol is missing.
LIBDIR="$BUILD/fuzz/lib"
build_lib() {
	rm -rf "$LIBDIR" && mkdir -p "$LIBDIR"
	JOBS=$(nproc 2>/dev/null || echo 2)
	running=0
	for f in core/*.c core/*/*.c mem/*.c io/*.c cpu/*.c cpu/*/*.c ptx/*.c; do
		[ -f "$f" ] || continue
		isa=$(basename "$f" .c | sed -n 's/.*_\(avx2\|avx512\|amx\)$/\1/p')
		flags="-fsanitize=fuzzer-no-link,address,undefined"
		[ -n "$isa" ] && eval flags=\$ISA_$isa # plain: see the top
		o="$LIBDIR/$(echo "$f" | tr / _ | sed 's/\.c$/.o/')"
		# one compile per core at a time
		($CLANG $CFLAGS $flags -c "$f" -o "$o" 2>"$o.log" ||
			echo "fuzz: note: $f does not compile with $CLANG (left out; see $o.log)") &
		running=$((running + 1))
		if [ $running -ge "$JOBS" ]; then
			wait
			running=0
		fi
	done
	wait
	ar rcs "$LIBDIR/libcoli-fuzz.a" "$LIBDIR"/*.o
}
picked() { [ -z "${FUZZ_TARGETS:-}" ] || case " $FUZZ_TARGETS " in *" $1 "*) true ;; *) false ;; esac; }
need_lib=0
for t in tools/fuzz_*.c; do picked "$(basename "$t" .c | sed 's/^fuzz_//')" && need_lib=1; done
[ $need_lib = 0 ] || { [ "${FUZZ_REUSE_LIB:-0}" = 1 ] && [ -f "$LIBDIR/libcoli-fuzz.a" ]; } || build_lib
# FUZZ_RUNS=N: N executions a target instead of FUZZ_SECONDS (the counts in
# docs/fuzz.md)
if [ -n "${FUZZ_RUNS:-}" ]; then
	LIMIT="-runs=$FUZZ_RUNS" LIMIT_SAY="$FUZZ_RUNS executions" HTTP_LIMIT="--count $FUZZ_RUNS"
else
	LIMIT="-max_total_time=$FUZZ_SECONDS" LIMIT_SAY="${FUZZ_SECONDS}s" HTTP_LIMIT="--seconds $FUZZ_SECONDS"
fi
status=0
for t in tools/fuzz_*.c; do
	[ -f "$t" ] || continue
	name=$(basename "$t" .c | sed 's/^fuzz_//')
	picked "$name" || continue
	dir="$BUILD/fuzz/$name"
	mkdir -p "$dir/corpus"
	echo "fuzz: building $name"
	# A target may name extra sources of tools/ in a " * fuzz-sources: a.c b.c" line.
	extra=$(sed -n 's/^ \* fuzz-sources: //p' "$t")
	$CLANG $CFLAGS -fsanitize=fuzzer,address,undefined -o "$dir/fuzz_$name" "$t" $extra "$LIBDIR/libcoli-fuzz.a" $LIBS -ldl ||
		{ echo "fuzz: $name does not build"; status=1; continue; }
	[ -d "tests/fuzz/$name" ] && cp tests/fuzz/"$name"/* "$dir/corpus/" 2>/dev/null
	[ -f "tools/fuzz_$name.seed.sh" ] && BUILD=$BUILD sh "tools/fuzz_$name.seed.sh" "$dir/corpus"
	maxlen=$(sed -n 's/^ \* fuzz-max-len: //p' "$t")
	echo "fuzz: running $name for $LIMIT_SAY"
	"$dir/fuzz_$name" $LIMIT -max_len="${maxlen:-262144}" -rss_limit_mb=4096 \
		-artifact_prefix="$dir/" -print_final_stats=1 "$dir/corpus" >"$dir/run.log" 2>&1
	rc=$?
	tail -n 12 "$dir/run.log" | grep -E "stat::number_of_executed_units|stat::new_units_added|Done|ERROR|SUMMARY" | sed "s/^/  $name: /"
	if [ $rc -ne 0 ]; then
		echo "fuzz: $name FAILED (see $dir/run.log and $dir/crash-*)"
		status=1
	fi
done
# colid's HTTP framing: a mutation driver over a socket (see its top comment)
if picked http; then
	dir="$BUILD/fuzz/http"
	mkdir -p "$dir"
	if [ -x "$BUILD/colid" ]; then
		echo "fuzz: running http for $LIMIT_SAY"
		COLI="$BUILD/coli" COLID="$BUILD/colid" TEST_TMP="$dir" \
			python3 tools/fuzz_http.py $HTTP_LIMIT --out "$dir" >"$dir/run.log" 2>&1
		rc=$?
		tail -n 3 "$dir/run.log" | sed "s/^/  /"
		if [ $rc -ne 0 ]; then
			echo "fuzz: http FAILED (see $dir/run.log and $dir/crash-*)"
			status=1
		fi
	else
		echo "fuzz: http skipped ($BUILD/colid not built: libmicrohttpd missing)"
	fi
fi
exit $status
