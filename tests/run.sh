#!/bin/sh
# coli test runner: one line per test (name, seconds, result), then
# "N passed, N failed, N skipped". A test is a compiled program
# ($BUILD/tests/<module>/<name>) or a script (tests/<module>/<name>.sh);
# exit 0 = pass, 77 = skip (its last output line says why), else fail.
# Usage: tests/run.sh [PATTERN]   (PATTERN filters by module/name substring)
#
# TEST_PARALLEL=N runs N tests at a time (default 1: one after another). The
# lines still come in name order: a test's line waits for those before it.
# Each test has its own working directory ($TEST_TMP) and daemons take free
# ports; what tests share under $BUILD is a Python venv ($BUILD/pyenv*, made
# by the first test that needs it), so a test holds a lock
# ($BUILD/test-logs/.lock-<venv>, flock) for each venv its script or the files
# it sources name, and two tests of one venv never overlap. A test's seconds
# are its own wall time, longer when it shares the cores.
BUILD=${BUILD:-build}
TIMEOUT=${TEST_TIMEOUT:-600}
PAR=${TEST_PARALLEL:-1}
ROOT=$(pwd)
export COLI="$ROOT/$BUILD/coli" COLID="$ROOT/$BUILD/colid" BUILD ROOT
export FIXTURES="$ROOT/tests/fixtures"
LOGDIR="$ROOT/$BUILD/test-logs"
mkdir -p "$LOGDIR"
command -v flock >/dev/null 2>&1 || PAR=1 # no locks: one at a time

list() {
	for f in "$BUILD"/tests/*/*; do
		[ -x "$f" ] && [ -f "$f" ] && case "$f" in *.d) ;; *) echo "$f" ;; esac
	done
	for f in tests/*/*.sh; do [ -f "$f" ] && echo "$f"; done
}

# venvs T uses: $BUILD/pyenv* named in T or in a file T sources
venvs() {
	case "$1" in *.sh) ;; *) return ;; esac
	srcs=$(sed -n 's|^[[:space:]]*\. "\$ROOT/\(tests/[^"]*\)".*|\1|p' "$1")
	# shellcheck disable=SC2086
	cat "$1" $srcs 2>/dev/null | grep -o 'pyenv[-a-z0-9]*' | sort -u
}

# run_one T NAME: run test T, its output in $LOGDIR/NAME.log, "rc secs" in
# $LOGDIR/NAME.rc
run_one() {
	t=$1 base=$LOGDIR/$(echo "$2" | tr / _) # a subshell's when in parallel
	work=$(mktemp -d "${TMPDIR:-/tmp}/coli-test.XXXXXX")
	start=$(date +%s.%N)
	case "$t" in
	*.sh) set -- sh "$ROOT/$t" ;;
	*) set -- "$ROOT/$t" ;;
	esac
	[ "$PAR" -le 1 ] || for v in $(venvs "$t"); do # sorted: no deadlock
		set -- flock "$LOGDIR/.lock-$v" "$@"
	done
	(cd "$work" && TEST_TMP="$work" timeout "$TIMEOUT" "$@") >"$base.log" 2>&1
	rc=$?
	secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
	rm -rf "$work"
	echo "$rc $secs" >"$base.rc.tmp" && mv "$base.rc.tmp" "$base.rc"
}

pass=0 fail=0 skip=0
# say NAME: the line of a finished test
say() {
	base=$LOGDIR/$(echo "$1" | tr / _)
	read -r rc secs <"$base.rc"
	if [ "$rc" -eq 0 ]; then
		pass=$((pass + 1)); printf '%-44s %7.2fs  ok\n' "$1" "$secs"
	elif [ "$rc" -eq 77 ]; then
		skip=$((skip + 1)); printf '%-44s %7.2fs  skip: %s\n' "$1" "$secs" "$(tail -n 1 "$base.log")"
	else
		fail=$((fail + 1))
		printf '%-44s %7.2fs  FAIL (exit %d)\n' "$1" "$secs" "$rc"
		tail -n 20 "$base.log" | sed 's/^/    | /'
	fi
}

names="" # the picked tests, in order, as "T NAME" lines
for t in $(list | sort); do
	name=$(echo "$t" | sed -e "s|^$BUILD/tests/||" -e 's|^tests/||' -e 's|\.sh$||')
	[ -n "$1" ] && case "$name" in *$1*) ;; *) continue ;; esac
	rm -f "$LOGDIR/$(echo "$name" | tr / _).rc"
	names="$names$t $name
"
done

started=0 said=0 # tests started, lines printed
# say_ready: print the lines of the finished tests that come next in order;
# sets `running` to the number started and not yet finished
say_ready() {
	running=0 i=0
	while read -r _ rname; do
		[ -n "$rname" ] || continue
		i=$((i + 1))
		[ $i -le $started ] || break
		if [ -f "$LOGDIR/$(echo "$rname" | tr / _).rc" ]; then
			[ $i -eq $((said + 1)) ] && { say "$rname"; said=$i; }
		else
			running=$((running + 1))
		fi
	done <<EOF
$names
EOF
}
while read -r t name; do
	[ -n "$name" ] || continue
	if [ "$PAR" -le 1 ]; then
		run_one "$t" "$name" </dev/null
		say "$name"
		continue
	fi
	while say_ready && [ $running -ge "$PAR" ]; do sleep 0.2; done
	run_one "$t" "$name" </dev/null &
	started=$((started + 1))
done <<EOF
$names
EOF
if [ "$PAR" -gt 1 ]; then
	while say_ready && [ $said -lt $started ]; do sleep 0.2; done
	wait
fi
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
