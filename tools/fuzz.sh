#!/bin/sh
# tools/fuzz.sh — build and run every libFuzzer target tools/fuzz_<name>.c
# (make fuzz). Each target is compiled with clang -fsanitize=fuzzer,address,
# undefined against the library sources (instrumented the same way) and
# -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION (checksums not enforced, so
# mutations reach the structural checks), then run for $FUZZ_SECONDS.
# Seeds: tools/fuzz_<name>.seed.sh OUTDIR, when present, writes seed inputs.
# Corpora and crash files live in $BUILD/fuzz/<name>/. Exit 1 if any target
# found a crash, 77 if clang with libFuzzer is missing.
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
CLANG=${CLANG:-clang}
command -v "$CLANG" >/dev/null 2>&1 || { echo "fuzz: clang not found (apt-get install clang)"; exit 77; }
PKGS="jansson libxxhash libpcre2-8 libutf8proc"
CFLAGS="-std=gnu11 -g -O1 -I. -D_GNU_SOURCE -ffp-contract=off -fno-omit-frame-pointer
	-DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION $(pkg-config --cflags $PKGS 2>/dev/null)"
LIBS="$(pkg-config --libs $PKGS 2>/dev/null) -lm -pthread"
ISA_avx2="-mavx2 -mfma -mf16c"
ISA_avx512="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mfma -mf16c"
# The library, instrumented, as an archive: a target links only the objects it
# uses, so a source clang cannot compile (GCC-only builtins) matters only if a
# target needs it, and then the link says which symbol is missing.
LIBDIR="$BUILD/fuzz/lib"
rm -rf "$LIBDIR" && mkdir -p "$LIBDIR"
JOBS=$(nproc 2>/dev/null || echo 2)
running=0
for f in core/*.c core/*/*.c mem/*.c io/*.c cpu/*.c ptx/*.c; do
	[ -f "$f" ] || continue
	# the SIMD kernels take minutes under ASan+UBSan and no parser reaches them
	case "$f" in *_avx2.c | *_avx512.c) continue ;; esac
	isa=$(basename "$f" .c | sed -n 's/.*_\(avx2\|avx512\)$/\1/p')
	flags=""
	[ -n "$isa" ] && eval flags=\$ISA_$isa
	o="$LIBDIR/$(echo "$f" | tr / _ | sed 's/\.c$/.o/')"
	# one compile per core at a time
	($CLANG $CFLAGS $flags -fsanitize=fuzzer-no-link,address,undefined -c "$f" -o "$o" 2>"$o.log" ||
		echo "fuzz: note: $f does not compile with $CLANG (left out; see $o.log)") &
	running=$((running + 1))
	if [ $running -ge "$JOBS" ]; then
		wait
		running=0
	fi
done
wait
ar rcs "$LIBDIR/libcoli-fuzz.a" "$LIBDIR"/*.o
status=0
for t in tools/fuzz_*.c; do
	[ -f "$t" ] || continue
	name=$(basename "$t" .c | sed 's/^fuzz_//')
	dir="$BUILD/fuzz/$name"
	mkdir -p "$dir/corpus"
	echo "fuzz: building $name"
	# A target may name extra sources of tools/ in a " * fuzz-sources: a.c b.c" line.
	extra=$(sed -n 's/^ \* fuzz-sources: //p' "$t")
	$CLANG $CFLAGS -fsanitize=fuzzer,address,undefined -o "$dir/fuzz_$name" "$t" $extra "$LIBDIR/libcoli-fuzz.a" $LIBS -ldl ||
		{ echo "fuzz: $name does not build"; status=1; continue; }
	[ -f "tools/fuzz_$name.seed.sh" ] && BUILD=$BUILD sh "tools/fuzz_$name.seed.sh" "$dir/corpus"
	echo "fuzz: running $name for ${FUZZ_SECONDS}s"
	(cd "$dir" && ./"fuzz_$name" -max_total_time="$FUZZ_SECONDS" -max_len=262144 -rss_limit_mb=4096 \
		-print_final_stats=1 corpus >run.log 2>&1)
	rc=$?
	tail -n 12 "$dir/run.log" | grep -E "stat::number_of_executed_units|stat::new_units_added|Done|ERROR|SUMMARY" | sed "s/^/  $name: /"
	if [ $rc -ne 0 ]; then
		echo "fuzz: $name FAILED (see $dir/run.log and $dir/crash-*)"
		status=1
	fi
done
exit $status
