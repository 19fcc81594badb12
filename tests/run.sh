#!/bin/sh
# coli test runner: one line per test (name, seconds, result), then
# "N passed, N failed, N skipped". A test is a compiled program
# ($BUILD/tests/<module>/<name>) or a script (tests/<module>/<name>.sh);
# exit 0 = pass, 77 = skip (its last output line says why), else fail.
# Usage: tests/run.sh [PATTERN]   (PATTERN filters by module/name substring)
BUILD=${BUILD:-build}
TIMEOUT=${TEST_TIMEOUT:-600}
ROOT=$(pwd)
export COLI="$ROOT/$BUILD/coli" COLID="$ROOT/$BUILD/colid" BUILD ROOT
export FIXTURES="$ROOT/tests/fixtures"
LOGDIR="$ROOT/$BUILD/test-logs"
mkdir -p "$LOGDIR"
pass=0 fail=0 skip=0 failed=""

list() {
	for f in "$BUILD"/tests/*/*; do
		[ -x "$f" ] && [ -f "$f" ] && case "$f" in *.d) ;; *) echo "$f" ;; esac
	done
	for f in tests/*/*.sh; do [ -f "$f" ] && echo "$f"; done
}

for t in $(list | sort); do
	name=$(echo "$t" | sed -e "s|^$BUILD/tests/||" -e 's|^tests/||' -e 's|\.sh$||')
	[ -n "$1" ] && case "$name" in *$1*) ;; *) continue ;; esac
	log="$LOGDIR/$(echo "$name" | tr / _).log"
	work=$(mktemp -d "${TMPDIR:-/tmp}/coli-test.XXXXXX")
	start=$(date +%s.%N)
	case "$t" in
	*.sh) (cd "$work" && TEST_TMP="$work" timeout "$TIMEOUT" sh "$ROOT/$t") >"$log" 2>&1 ;;
	*) (cd "$work" && TEST_TMP="$work" timeout "$TIMEOUT" "$ROOT/$t") >"$log" 2>&1 ;;
	esac
	rc=$?
	secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
	rm -rf "$work"
	if [ $rc -eq 0 ]; then
		pass=$((pass + 1)); printf '%-44s %7.2fs  ok\n' "$name" "$secs"
	elif [ $rc -eq 77 ]; then
		skip=$((skip + 1)); printf '%-44s %7.2fs  skip: %s\n' "$name" "$secs" "$(tail -n 1 "$log")"
	else
		fail=$((fail + 1)); failed="$failed $name"
		printf '%-44s %7.2fs  FAIL (exit %d)\n' "$name" "$secs" "$rc"
		tail -n 20 "$log" | sed 's/^/    | /'
	fi
done
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
