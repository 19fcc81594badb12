#!/bin/sh
# tools/perf_run.sh — the runs behind docs/perf/README.md's current table, each
# as RUN.json (`coli bench ... --json`) with the exact command in RUN.cmd, for
# tools/perf_table.py. Asserts nothing about speed.
#
#   tools/perf_run.sh COLI OUT        (a GPU host) run them into the folder OUT
#   tools/perf_table.py --machine "H200 host ..." --commit $(git rev-parse --short HEAD) \
#       --write docs/perf/README.md OUT/*.json
#
# M30, M235, MDS3: the models (default /tmp/q30-8.coli, /tmp/q235-4.coli,
# /tmp/dsv3-4.coli: deepseek-v3's shape, 3 dense layers then one MoE layer of
# 256 experts; made with `coli bench make-model` when absent). GPU=sim runs the device arms on the
# simulated device (a check of the script on a host without a GPU, not a
# figure for the table); ONLY="decode stream30" runs a subset.
set -u
coli=${1:?usage: tools/perf_run.sh COLI OUT}
out=${2:?usage: tools/perf_run.sh COLI OUT}
gpu=${GPU:-0}
m30=${M30:-/tmp/q30-8.coli}
m235=${M235:-/tmp/q235-4.coli}
mds3=${MDS3:-/tmp/dsv3-4.coli}
only=${ONLY:-"decode decode_cpu prefill stream30 stream235 streamds3 prefill235 prefillds3 io"}
mkdir -p "$out" || exit 1
model() { # PATH SHAPE LAYERS
	[ -f "$1" ] || "$coli" bench make-model --shape "$2" --layers "$3" --quant q4 -o "$1" \
		>/dev/null || { echo "make-model $1 failed"; exit 1; }
}
run() { # NAME ARGS...: the command as run, then its report (NAME_N: picked as NAME)
	name=$1
	shift
	case " $only " in *" $name "* | *" ${name%_*} "*) ;; *) return 0 ;; esac
	echo "coli $* --json" >"$out/$name.cmd"
	if "$coli" "$@" --json >"$out/$name.json" 2>"$out/$name.err"; then
		echo "$name: ok"
	else
		echo "$name: failed ($out/$name.err)"
		rm -f "$out/$name.json" "$out/$name.cmd"
	fi
}
model "$m30" qwen3-30b-a3b 8
run decode bench decode -m "$m30" --gpu "$gpu" --tokens 64 --rounds 3 --disk-mib 0
run decode_cpu bench decode -m "$m30" --gpu off --tokens 32 --rounds 3 --disk-mib 0
run prefill bench prefill -m "$m30" --gpu "$gpu" --prompt 2048 --ctx 4096 --rounds 3 \
	--disk-mib 0 --arms default,vram-gb=0.7
stream_gpu=$([ "$gpu" = sim ] && echo "--gpu sim")
run stream30 bench stream -m "$m30" $stream_gpu --tokens 64 --rounds 3 \
	--arms sync,overlap+stream
case " $only " in *" stream235 "*) model "$m235" qwen3-235b-a22b 4 ;; esac
run stream235 bench stream -m "$m235" $stream_gpu --tokens 32 --rounds 3 \
	--arms sync,overlap+stream
case " $only " in *" streamds3 "* | *" prefillds3 "*) model "$mds3" deepseek-v3 4 ;; esac
run streamds3 bench stream -m "$mds3" $stream_gpu --tokens 32 --rounds 3 \
	--arms sync,overlap+stream
# prefill at 512 and 4096 tokens, the 235b shape beside deepseek-v3's, the
# same command: every expert in VRAM, and a quarter of the expert bytes
# (`coli inspect`'s "expert bytes")
quarter() { "$coli" inspect "$1" | awk '/^expert bytes/ { printf "%.3f", $3 / 4e9 }'; }
for p in 512 4096; do
	case " $only " in *" prefill235 "*)
		run prefill235_$p bench prefill -m "$m235" --gpu "$gpu" --prompt $p --ctx 8192 \
			--rounds 3 --disk-mib 0 --arms default,vram-gb=$(quarter "$m235") ;;
	esac
	case " $only " in *" prefillds3 "*)
		run prefillds3_$p bench prefill -m "$mds3" --gpu "$gpu" --prompt $p --ctx 8192 \
			--rounds 3 --disk-mib 0 --arms default,vram-gb=$(quarter "$mds3") ;;
	esac
done
run io bench io -m "$m30"
