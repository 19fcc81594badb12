#!/bin/sh
# tools/gpu_session.sh — the standard check of a GPU host, in one run: the GPU
# tests against the CPU reference, then the decode figures docs/perf/README.md
# records (all-resident decode: host- vs device-planned, graphs off and on;
# `coli bench stream`'s five arms, two again with COLI_DEV_PREPLAN=0). Prints
# one line per test and the benchmarks' own tables; asserts nothing about
# speed.
#
#   tools/gpu_session.sh pack DIR      (build host) strip coli and the GPU
#                                      tests into DIR and DIR.tar.xz (carry
#                                      the tarball, unpack it on the GPU host)
#   tools/gpu_session.sh run DIR [M]   (GPU host) run them; M: a model path
#                                      (default /tmp/q30-8.coli, made with
#                                      `coli bench make-model` if absent);
#                                      the tests' lines are repeated last;
#                                      TESTS_ONLY=1 skips the benchmarks;
#                                      LOGDIR=D keeps each test's whole log
#   tools/gpu_session.sh ab A B [M]    (GPU host) two coli binaries, A/B:
#                                      all-resident decode interleaved three
#                                      times, then greedy generate with each;
#                                      STREAM=1: then `coli bench stream`'s
#                                      overlap+stream interleaved twice
#   tools/gpu_session.sh prefill-ab A B [C ...] [M]
#                                      (GPU host) two coli binaries or more:
#                                      all-resident prefill (bench prefill
#                                      --gpu 0) of each of PROMPTS (default
#                                      "512 2048 4096") tokens, the binaries
#                                      alternating, ROUNDS (default 2) times
#   tools/gpu_session.sh attn A B [C ...] [M]
#                                      (GPU host) two coli binaries or more
#                                      at long contexts: decode after 1k and
#                                      32k cached tokens interleaved twice
#                                      (bf16 and q8 caches), then each after
#                                      128k once, then prefill of 2k and 32k
#                                      tokens (M: a last argument ending in
#                                      .coli)
#   tools/gpu_session.sh cpu-attn A B [C ...] [M]
#                                      (GPU host, its CPUs) the CPU's decode
#                                      attention of two binaries or more:
#                                      `coli bench attention` at 8k and 32k
#                                      on every core, interleaved twice, A's
#                                      at 8k on 1, 2, 4, 8 and 16 threads,
#                                      then the 8k CPU decode (bench decode
#                                      --gpu off --ctx-fill 8192) of each
#   tools/gpu_session.sh ops T_A T_B [T ...]
#                                      (GPU host) two tests/ptx/dense_kernels
#                                      binaries or more: their decode
#                                      attention over a bf16 and a q8 cache
#                                      at 1k to 128k positions (`--bench
#                                      ops`), alternating twice
#   tools/gpu_session.sh kquant T_A T_B [T ...]
#                                      (GPU host) two tests/ptx/dense_kernels
#                                      binaries or more: the block types'
#                                      expert GEMV (`--bench kquant`, the
#                                      235b tables' fraction of copy),
#                                      alternating ROUNDS (default 2) times,
#                                      a row per dtype and table with each
#                                      binary's rounds
#   Wherever a binary is named, VAR=VALUE@BINARY runs BINARY with VAR set
#   (a switch against the same build: COLI_DEV_PREPLAN=0@DIR/coli).
#   tools/gpu_session.sh kernels COLI [M] [N]
#                                      (GPU host) where a decode step of N
#                                      sequences (default 8) spends its GPU
#                                      time: per kernel name, launches and
#                                      us a step (ncu: `bench decode --seqs N`
#                                      of 4 and of 12 tokens, the difference
#                                      over 8 steps), largest first
#   tools/gpu_session.sh pkernels COLI [M]
#                                      (GPU host) where an all-resident
#                                      prefill spends its GPU time: per
#                                      kernel name, launches and ms of one
#                                      `bench prefill --prompt P` round
#                                      (ncu), largest first, for each P in
#                                      PROMPTS (default "512 2048")
#   tools/gpu_session.sh ncu-attn COLI [N] [M]
#                                      (GPU host) ncu's sections (speed of
#                                      light, memory, scheduler, warp
#                                      states, occupancy) of one attention
#                                      launch of a decode step after N
#                                      cached tokens (default 32768; graphs
#                                      off, so the profiler sees it), then of
#                                      the N-token prompt's last prefill
#                                      chunk's (its tiles, whole mode)
#   tools/gpu_session.sh gaps COLI [M] (GPU host) the all-resident decode's
#                                      kernel time a token (ncu: one greedy
#                                      run of 1 token and one of 17, the
#                                      difference over 16) against its wall
#                                      time a token: the share of a token the
#                                      GPU spends between kernels (launches,
#                                      host round trips), issue #6's < 15%
#
# The device machine may lack liburing, utf8proc and libmicrohttpd: set
# LD_LIBRARY_PATH to their .so files (Debian packages unpacked with dpkg -x).
#
# TESTS="..." (both steps) picks the tests: compiled ones (build/tests/...) or
# scripts (tests/<module>/<name>.sh, run in a scratch directory with
# COLI_TEST_GPU=1). The device tool carries at most 64 MiB with the tracked
# tree (~57 MB): the tarball (2-4 MB) fits; drop tests a run does not need
# (placement takes more than 5 minutes of device time, every family,
# quantization and KV type: COLI_PLACEMENT_DEVS=0 keeps the GPU's arms,
# COLI_PLACEMENT_FIXTURES some fixtures; the test's top comment).
set -u
TESTS=${TESTS:-"ptx/dense_kernels ptx/expert_kernels ptx/gemm_kernels ptx/kquant_gemm ptx/host_wait ptx/job_ring ptx/kinds ptx/kv_types ptx/mla core/no_const_h2d
core/batch_invariance core/graph_replay core/fixture_logits core/fixture_greedy core/forward_argmax core/overlap_release
core/placement core/device_faults core/plan_grouped"}

# ncu_times OUT CMD...: CMD run under ncu (NCU, default /usr/local/cuda/bin/ncu),
# each kernel launch's GPU time a row of the CSV in OUT (kernels and gaps)
ncu_times() {
	out=$1
	shift
	"${NCU:-/usr/local/cuda/bin/ncu}" --metrics gpu__time_duration.sum --csv \
		--cache-control none --clock-control none "$@" >"$out" 2>/dev/null ||
		{ echo "ncu failed"; exit 1; }
}

# ncu_by_kernel CSV: ncu_times' rows summed per kernel name (ncu's CSV: the
# name in field 5, the value last), a line each: name, launches, ns (tabs)
ncu_by_kernel() {
	awk -F'","' '$0 ~ /gpu__time_duration/ {
		u = $(NF - 1); v = $NF; gsub(/[",]/, "", v)
		s[$5] += v * (u ~ /msecond/ ? 1e6 : u ~ /usecond/ ? 1e3 : 1); k[$5]++
	} END { for (n in s) printf "%s\t%d\t%.0f\n", n, k[n], s[n] }' "$1"
}

# need_model COLI MODEL: the bench model, made with COLI if absent (every
# subcommand's default, /tmp/q30-8.coli)
# bins_and_model ARGS...: $bins, the binaries among ARGS, and $model, an
# argument ending in .coli (default /tmp/q30-8.coli)
bins_and_model() {
	model=/tmp/q30-8.coli
	bins=
	for c in "$@"; do
		case $c in *.coli) model=$c ;; *) bins="$bins $(env_arm "$c")" ;; esac
	done
}

# env_arm ARG: ARG, or for VAR=VALUE@COLI a script running COLI with VAR set
# (an opt-in switch against the same binary: `attn build/coli
# COLI_DEV_PREPLAN=0@build/coli`), named after VAR=VALUE in a folder of its own
env_arm() {
	case $1 in
	*=*@*)
		envdir=$(mktemp -d) || exit 1 # (a subshell's: one a wrapper)
		printf '#!/bin/sh\nexport %s\nexec %s "$@"\n' "${1%%@*}" "$(realpath "${1#*@}")" \
			>"$envdir/${1%%@*}" && chmod +x "$envdir/${1%%@*}" && echo "$envdir/${1%%@*}"
		;;
	*) echo "$1" ;;
	esac
}

need_model() {
	[ -f "$2" ] || "$1" bench make-model --shape qwen3-30b-a3b --layers 8 --quant q4 \
		-o "$2" >/dev/null 2>&1 || { echo "make-model failed"; exit 1; }
}

case "${1:-}" in
pack)
	dir=${2:?usage: tools/gpu_session.sh pack DIR}
	build=${BUILD:-build}
	mkdir -p "$dir" || exit 1
	strip -o "$dir/coli" "$build/coli" || exit 1
	for t in $TESTS; do # a compiled test, or a script (tests/<module>/<name>.sh)
		mkdir -p "$dir/tests/${t%/*}" || exit 1
		if [ -f "tests/$t.sh" ]; then
			cp "tests/$t.sh" "$dir/tests/$t.sh" || exit 1
		else
			strip -o "$dir/tests/$t" "$build/tests/$t" || exit 1
		fi
	done
	# carried compressed: the binaries share most of their bytes (the
	# embedded PTX, ~30 MB each), which xz finds only within its window:
	# a window past two binaries (7 tests: 267 MB -> 3.5 MB in 7 s on two
	# cores; preset 6 saves a fifth of that in 25 times the time)
	tar -C "$(dirname "$dir")" -cf - "$(basename "$dir")" |
		xz -T0 --lzma2=preset=3,dict=96MiB >"$dir.tar.xz" || exit 1
	du -sh "$dir" "$dir.tar.xz"
	echo "carry $dir.tar.xz; on the GPU host: tar -C $(dirname "$dir") -xJf $dir.tar.xz"
	;;
run)
	dir=${2:?usage: tools/gpu_session.sh run DIR [MODEL]}
	model=${3:-/tmp/q30-8.coli}
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null
	for t in $TESTS; do
		start=$(date +%s)
		if [ -f "$dir/tests/$t.sh" ]; then # scripts run in a scratch directory
			s=$(realpath "$dir/tests/$t.sh") c=$(realpath "$dir/coli") r=$PWD
			mkdir -p "$tmp/w" && (cd "$tmp/w" && COLI=$c FIXTURES=$r/tests/fixtures \
				ROOT=$r COLI_TEST_GPU=1 timeout 600 sh "$s") >"$tmp/log" 2>&1
		else
			TEST_TMP=$tmp FIXTURES=$PWD/tests/fixtures timeout 600 "$dir/tests/$t" \
				>"$tmp/log" 2>&1
		fi
		rc=$?
		[ -n "${LOGDIR:-}" ] && cp "$tmp/log" "$LOGDIR/$(echo "$t" | tr / _).log"
		printf '%-24s rc=%d %4ds  %s\n' "$t" $rc $(($(date +%s) - start)) \
			"$(grep -E '^ *FAIL|[^0-9 ] differ$| [1-9][0-9]* (differ|(checks )?failed)' "$tmp/log" |
				grep -vE ' 0 of [0-9]+ (outputs )?differ' | head -1 |
				cut -c1-90)" | tee -a "$tmp/tests"
	done
	# the device tool returns only the tail of a long output: the tests'
	# lines again at the very end, after the benchmarks' tables
	trap 'echo "== tests"; cat "$tmp/tests"; rm -rf "$tmp"' EXIT
	[ "${TESTS_ONLY:-0}" = 1 ] && exit 0
	need_model "$dir/coli" "$model"
	for v in ROUTE=0 GRAPH=0 GRAPH=1 GRAPH=0 GRAPH=1; do
		printf 'all resident, COLI_DEV_%s: ' $v
		env COLI_DEV_$v "$dir/coli" bench decode -m "$model" --gpu 0 --tokens 32 \
			--rounds 3 --disk-mib 0 2>&1 | grep '^default' | head -1 | cut -c1-60
	done
	"$dir/coli" bench stream -m "$model" --tokens 32 --rounds 5 2>&1 |
		grep -v '^coli: \(dense\|cuda\)'
	echo "the same, resident experts planned by the host (COLI_DEV_PREPLAN=0):"
	COLI_DEV_PREPLAN=0 "$dir/coli" bench stream -m "$model" --tokens 32 --rounds 5 \
		--arms sync,overlap+stream 2>&1 | grep -E '^(sync|overlap\+stream) '
	;;
ab)
	a=$(env_arm "${2:?usage: tools/gpu_session.sh ab COLI_A COLI_B [MODEL]}")
	b=$(env_arm "${3:?usage: tools/gpu_session.sh ab COLI_A COLI_B [MODEL]}")
	model=${4:-/tmp/q30-8.coli}
	need_model "$a" "$model"
	for c in "$a" "$b" "$a" "$b" "$a" "$b"; do
		printf '%-28s %s\n' "$c" "$("$c" bench decode -m "$model" --gpu 0 --tokens 64 \
			--rounds 3 --disk-mib 0 2>&1 | grep '^default' | head -1 | cut -c1-60)"
	done
	for c in "$a" "$b"; do
		printf '%-28s %s\n' "$c" "$("$c" generate -m "$model" --ids 1,2,3,4,5,6,7,8 -n 256 \
			--usage off 2>&1 >/dev/null | grep decode | cut -c1-100)"
	done
	[ "${STREAM:-0}" = 1 ] || exit 0
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	for c in "$a" "$b" "$a" "$b"; do # overlap+stream: tok/s, x sync, a 1-copy layer
		"$c" bench stream -m "$model" --tokens 64 --rounds 3 \
			--arms sync,overlap+stream >"$tmp/st" 2>&1
		printf '%-28s %s | %s\n%-28s %s\n' "$c" \
			"$(grep '^overlap+stream ' "$tmp/st" | head -1 | cut -c1-44)" \
			"$(grep 'x sync' "$tmp/st" | cut -c17-80)" "" \
			"$(grep -E '^overlap\+stream +1 ' "$tmp/st")"
	done
	;;
prefill-ab)
	shift
	[ $# -ge 2 ] || { echo "usage: tools/gpu_session.sh prefill-ab COLI_A COLI_B [COLI ...] [MODEL]"; exit 2; }
	bins_and_model "$@"
	set -- $bins
	need_model "$1" "$model"
	r=0
	while [ $r -lt "${ROUNDS:-2}" ]; do
		r=$((r + 1))
		for c in "$@"; do
			for p in ${PROMPTS:-512 2048 4096}; do
				printf '%-28s %5d %s\n' "$c" "$p" "$("$c" bench prefill -m "$model" --gpu 0 \
					--prompt "$p" --ctx $((p + 64)) --rounds 3 --disk-mib 0 2>&1 |
					grep '^default' | head -1 | cut -c1-60)"
			done
		done
	done
	;;
attn | cpu-attn)
	mode=$1
	shift
	[ $# -ge 2 ] || { echo "usage: tools/gpu_session.sh $mode COLI_A COLI_B [COLI ...] [MODEL]"; exit 2; }
	bins_and_model "$@"
	set -- $bins
	need_model "$1" "$model"
	if [ "$mode" = cpu-attn ]; then
		for c in "$@" "$@"; do
			for n in 8192 32768; do # (ms a layer, median [min..max])
				"$c" bench attention --ctx $n --reps 10 2>&1 | tail -1 | cut -c1-60 |
					sed "s|^|$c, ctx $n: |"
			done
		done
		# how the first binary's 8k attention scales with threads (the split
		# column says whether threads share a unit)
		for t in 1 2 4 8 16; do
			"$1" bench attention --ctx 8192 --reps 10 --threads $t 2>&1 | tail -1 |
				sed "s|^|$1, ctx 8192, $t threads: |"
		done
		for c in "$@"; do
			printf '%s, cpu decode 8k: %s\n' "$c" "$("$c" bench decode -m "$model" --gpu off \
				--ctx 8400 --ctx-override --tokens 16 --rounds 2 --warmup 0 --disk-mib 0 \
				--ctx-fill 8192 2>&1 | grep -E '^default +[0-9]' | head -1 | cut -c1-110)"
		done
		exit 0
	fi
	dec="bench decode -m $model --gpu 0 --ctx 33000 --ctx-override --tokens 64 --rounds 2
		--disk-mib 0 --arms kv-type=bf16,kv-type=q8"
	for c in "$@" "$@"; do
		for f in 1024 32768; do # (tok/s, median [min..max], of each arm)
			"$c" $dec --ctx-fill $f 2>&1 | grep -E '^kv-type=(bf16|q8) +[0-9]' |
				cut -c1-52 | sed "s|^|$c, fill $f: |"
		done
	done
	for c in "$@"; do
		printf '%s, fill 131072: %s\n' "$c" "$("$c" bench decode -m "$model" --gpu 0 \
			--ctx 131200 --ctx-override --tokens 32 --rounds 1 --disk-mib 0 \
			--ctx-fill 131072 2>&1 | grep -E '^default +[0-9]' | cut -c1-52)"
	done
	for c in "$@"; do
		for p in 2048 32768; do
			printf '%s, prefill %d: %s\n' "$c" $p "$("$c" bench prefill -m "$model" \
				--gpu 0 --ctx 33000 --ctx-override --prompt $p --rounds 2 \
				--disk-mib 0 2>&1 | grep -E '^default +[0-9]' | cut -c1-52)"
		done
	done
	;;
ops)
	shift
	[ $# -ge 2 ] || { echo "usage: tools/gpu_session.sh ops T_A T_B [T ...]"; exit 2; }
	bins=
	for t in "$@"; do bins="$bins $(env_arm "$t")"; done
	for t in $bins $bins; do
		"$t" --bench ops 2>&1 | grep 'attention decode 32/4 x 128 \(bf16\|q8 \)' | sed "s|^|$t |"
	done
	;;
kquant)
	shift
	[ $# -ge 2 ] || { echo "usage: tools/gpu_session.sh kquant T_A T_B [T ...]"; exit 2; }
	bins=
	for t in "$@"; do bins="$bins $(env_arm "$t")"; done
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	rounds=
	r=0
	while [ $r -lt "${ROUNDS:-2}" ]; do
		r=$((r + 1))
		rounds="$rounds $bins"
	done
	for t in $rounds; do
		"$t" --bench kquant >"$tmp/run" 2>&1 || { cat "$tmp/run"; exit 1; }
		grep -m1 'device-to-device copy' "$tmp/run" | sed "s|^|$t: |" >&2
		sed -n "s#^  235b \(gate+up\|down\), top-8 *\([a-z0-9_]*\) .* \([0-9.]*\) of copy.*#\2 \1 $t \3#p" \
			"$tmp/run"
	done >"$tmp/all"
	# a row per dtype and table: each binary's two rounds, in the order named
	awk -v bins="$bins" 'BEGIN { nb = split(bins, b, " ") }
		{ k = $1 " " $2; if (!(k in seen)) { seen[k] = 1; order[++n] = k }
		  v[k, $3] = v[k, $3] (v[k, $3] == "" ? "" : " / ") $4 }
		END { printf "%-16s", "dtype table"
		      for (i = 1; i <= nb; i++) printf "  %-20s", substr(b[i], length(b[i]) - 19)
		      printf "\n"
		      for (j = 1; j <= n; j++) { printf "%-16s", order[j]
		          for (i = 1; i <= nb; i++) printf "  %-20s", v[order[j], b[i]]
		          printf "\n" } }' "$tmp/all"
	;;
kernels)
	c=${2:?usage: tools/gpu_session.sh kernels COLI [MODEL] [SEQS]}
	model=${3:-/tmp/q30-8.coli}
	seqs=${4:-8}
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	need_model "$c" "$model"
	for n in 4 12; do
		ncu_times "$tmp/k$n.csv" "$c" bench decode -m "$model" --gpu 0 --seqs "$seqs" \
			--tokens $n --rounds 1 --warmup 0 --disk-mib 0
		ncu_by_kernel "$tmp/k$n.csv" | sort >"$tmp/s$n"
	done
	echo "decode steps of $seqs sequences, per kernel: launches and us a step (12 - 4 tokens)"
	join -t "$(printf '\t')" -a 2 -e 0 -o 0,1.2,1.3,2.2,2.3 "$tmp/s4" "$tmp/s12" |
		awk -F'\t' '{ printf "%-44s %6.1f %9.1f\n", substr($1, 1, 44), ($4 - $2) / 8,
			($5 - $3) / 8 / 1000; t += ($5 - $3) / 8 / 1000 }
			END { printf "%-44s %6s %9.1f\n", "total", "", t }' | sort -k3 -n -r
	;;
pkernels)
	c=${2:?usage: tools/gpu_session.sh pkernels COLI [MODEL]}
	model=${3:-/tmp/q30-8.coli}
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	need_model "$c" "$model"
	for p in ${PROMPTS:-512 2048}; do
		ncu_times "$tmp/p.csv" "$c" bench prefill -m "$model" --gpu 0 --prompt $p \
			--ctx $((p + 64)) --rounds 1 --warmup 0 --disk-mib 0
		echo "prefill of $p tokens, per kernel: launches, ms, share of the kernel time"
		ncu_by_kernel "$tmp/p.csv" | awk -F'\t' '{ n[NR] = $1; k[NR] = $2; s[NR] = $3
			t += $3 } END { for (i = 1; i <= NR; i++) printf "%-44s %6d %9.3f %5.1f%%\n",
			substr(n[i], 1, 44), k[i], s[i] / 1e6, 100 * s[i] / t
			printf "%-44s %6s %9.3f\n", "total", "", t / 1e6 }' | sort -k3 -n -r
	done
	;;
gaps)
	c=${2:?usage: tools/gpu_session.sh gaps COLI [MODEL]}
	model=${3:-/tmp/q30-8.coli}
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	need_model "$c" "$model"
	for n in 1 17; do
		ncu_times "$tmp/k$n.csv" "$c" generate -m "$model" --ids 1,2,3,4,5,6,7,8 -n $n \
			--usage off --gpu 0
	done
	wall=$("$c" generate -m "$model" --ids 1,2,3,4,5,6,7,8 -n 256 --usage off --gpu 0 2>&1 \
		>/dev/null | sed -n 's/.*decode \([0-9.]*\) tok\/s.*/\1/p')
	# the kernel rows of ncu's CSV: name and duration (ns, us or ms)
	for n in 1 17; do
		awk -F'","' '$0 ~ /gpu__time_duration/ {
			u = $(NF - 1); v = $NF; gsub(/[",]/, "", v)
			s += v * (u ~ /msecond/ ? 1e6 : u ~ /usecond/ ? 1e3 : 1); k++
		} END { printf "%d %.0f\n", k, s }' "$tmp/k$n.csv"
	done | {
		read k1 s1
		read k17 s17
		awk -v k="$((k17 - k1))" -v s="$((s17 - s1))" -v w="$wall" 'BEGIN {
			t = 1e6 / w; g = s / 16 / 1e3
			printf "decode %.0f tok/s = %.1f us a token; kernels %.1f a token, %.1f us: " \
				"the GPU idles %.0f%% of a token between kernels\n",
				w, t, k / 16, g, 100 * (1 - g / t)
		}'
	}
	;;
ncu-attn)
	c=${2:?usage: tools/gpu_session.sh ncu-attn COLI [N] [MODEL]}
	fill=${3:-32768}
	model=${4:-/tmp/q30-8.coli}
	need_model "$c" "$model"
	layers=$("$c" bench decode -m "$model" --gpu off --tokens 1 --rounds 1 --warmup 0 \
		--disk-mib 0 2>&1 | sed -n 's/.*, \([0-9]*\) layers,.*/\1/p' | head -1)
	[ -n "$layers" ] || { echo "no layer count from coli bench decode"; exit 1; }
	# the prompt goes in chunks of 2048 (--ubatch), one attention launch a
	# layer each; then each decode step's, a layer each
	chunks=$(((fill + 2047) / 2048))
	for what in "decode $((chunks * layers + layers))" "prefill $(((chunks - 1) * layers))"; do
		echo "== ${what% *} (after ${what#* } launches of coli_attn*)"
		COLI_DEV_GRAPH=0 "${NCU:-/usr/local/cuda/bin/ncu}" --kernel-name regex:coli_attn \
			--launch-skip "${what#* }" --launch-count 1 --clock-control none \
			--cache-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
			--section SchedulerStats --section WarpStateStats --section Occupancy \
			--section LaunchStats "$c" bench decode -m "$model" --gpu 0 \
			--ctx $((fill + 64)) --ctx-override --ubatch 2048 --tokens 4 --rounds 1 \
			--warmup 0 --disk-mib 0 --ctx-fill "$fill" 2>&1 |
			grep -E '^  [a-z_]+|^    [A-Z][A-Za-z/. ()#-]+ +[a-zA-Z/%]* +[0-9]' | cut -c1-100
	done
	;;
*)
	awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" # the comment at the top
	exit 2
	;;
esac
