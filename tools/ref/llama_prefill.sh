#!/bin/bash
# tools/ref/llama_prefill.sh — prefill and decode side by side with llama.cpp
# on identical weights, in one run: the figures issue #42's targets name.
# A Hugging Face checkpoint (HF: made by ../shared/peer/gen_hf.py, a random
# Qwen3-30B-A3B-geometry model) goes through `coli convert --quant q4` and
# through llama.cpp's convert_hf_to_gguf.py + `llama-quantize --pure Q4_0`
# (every matrix Q4_0, as coli's q4). Then, each pair interleaved ROUNDS times:
#
#   gpu   all experts in VRAM: llama-bench -ngl 99 -fa 1 -p P against
#         `coli bench prefill --gpu 0 --prompt P`, for P in PROMPTS; decode
#         (llama-bench -n 64 against `coli bench decode --gpu 0 --tokens 64`)
#   cpu   no GPU (llama.cpp with CUDA_VISIBLE_DEVICES= and -ngl 0, coli
#         --gpu off): prefill of 512 tokens, decode of 32, THREADS threads
#   kq    (KQ=1) #38's Q4_K_M check: llama-quantize's Q4_K_M of the same
#         checkpoint, read by `coli convert` (blocks as stored), against
#         coli's q4 in `coli bench stream --arms overlap+stream` (a quarter
#         of the experts in VRAM; without a GPU, --gpu sim), alternating:
#         tok/s and routed MB/s (tok/s times the expert bytes a token read
#         from VRAM, RAM and disk), Q4_K_M over q4. KQ_ARGS: more arguments
#         for that llama-quantize (`--output-tensor-type q4_0` keeps the
#         output matrix at q4's size: Q4_K_M makes it Q6_K, 46% more bytes
#         a token reads beside the routed ones)
#
# Prints each figure as it comes, then a table: tok/s, coli / llama.cpp.
# Asserts nothing; a failed step is reported and the next one runs.
#
# Usage: tools/ref/llama_prefill.sh LLAMA_SRC LLAMA_BIN HF OUT_DIR
#   LLAMA_SRC  an unpacked llama.cpp tree with convert_hf_to_gguf.py and
#              gguf-py (../shared/peer/llama-src.tar.xz; build_llama.sh
#              removes the tree it built from, so unpack it again: `tar
#              -xJf llama-src.tar.xz -C /tmp` gives /tmp/llama)
#   LLAMA_BIN  the folder of llama-bench and llama-quantize built with CUDA
#              (../shared/peer/build_llama.sh)
# Environment: COLI (default build/coli), PYTHON (python3, with torch,
#   transformers, numpy, safetensors), THREADS (default: the cores), ROUNDS
#   (default 2), PROMPTS (default "512 2048 4096"), SKIP ("gpu" or "cpu"), KQ
#   (default 0), KQ_ARGS.
set -u
[ $# -eq 4 ] || {
	sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
}
SRC=$(cd "$1" && pwd) BIN=$(cd "$2" && pwd) HF=$(cd "$3" && pwd) OUT=$4
COLI=${COLI:-build/coli} PYTHON=${PYTHON:-python3}
[ -x "$COLI" ] || { echo "no coli binary at $COLI (COLI)"; exit 1; }
COLI=$(realpath "$COLI")
THREADS=${THREADS:-$(nproc)} ROUNDS=${ROUNDS:-2} PROMPTS=${PROMPTS:-512 2048 4096}
SKIP=${SKIP:-} KQ=${KQ:-0}
mkdir -p "$OUT" && cd "$OUT" || exit 1
T0=$(date +%s)
say() { echo "[+$(($(date +%s) - T0))s] $*"; }
: >figures.txt
# fig NAME VALUE: a figure for the table (tok/s)
fig() { echo "$1 $2" >>figures.txt && say "$1: $2 tok/s"; }
# llama_tps ARGS...: llama-bench's t/s (the mean over its -r repetitions)
llama_tps() {
	LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BIN/llama-bench" -m q4_0.gguf -t "$THREADS" -r 3 -o csv "$@" \
		2>>llama.err | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i ~ /^"?avg_ts"?$/) c = i }
		NR > 1 && c { gsub(/"/, "", $c); printf "%.0f\n", $c }' | tail -1
}
# coli_tps ARGS...: coli's median tok/s
coli_tps() {
	"$COLI" bench "$@" --rounds 3 --threads "$THREADS" 2>>coli.err |
		awk '$1 == "default" && $2 ~ /^[0-9.]+$/ { printf "%.0f\n", $2; exit }'
}

say "converting ($HF)"
"$COLI" convert "$HF" --quant q4 -o q4.coli --threads "$THREADS" --quiet >convert-coli.log 2>&1 &
cpid=$!
PYTHONPATH="$SRC/gguf-py" "$PYTHON" "$SRC/convert_hf_to_gguf.py" "$HF" --outtype bf16 \
	--outfile bf16.gguf >convert-gguf.log 2>&1 || { say "convert_hf_to_gguf failed"; tail -n 3 convert-gguf.log; exit 1; }
LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BIN/llama-quantize" --pure bf16.gguf q4_0.gguf Q4_0 "$THREADS" \
	>quantize.log 2>&1 || { say "llama-quantize failed"; tail -n 3 quantize.log; exit 1; }
if [ "$KQ" = 1 ]; then
	LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$BIN/llama-quantize" ${KQ_ARGS:-} bf16.gguf q4_k_m.gguf Q4_K_M \
		"$THREADS" >>quantize.log 2>&1 && "$COLI" convert q4_k_m.gguf -o q4km.coli --quiet >>convert-coli.log 2>&1 ||
		{ say "Q4_K_M: quantize or convert failed"; tail -n 3 quantize.log convert-coli.log; KQ=0; }
fi
rm -f bf16.gguf
wait $cpid || { say "coli convert failed"; tail -n 3 convert-coli.log; exit 1; }
say "q4.coli $(stat -c %s q4.coli) B, q4_0.gguf $(stat -c %s q4_0.gguf) B"

case " $SKIP " in *" gpu "*) ;; *)
	for _ in $(seq "$ROUNDS"); do
		for p in $PROMPTS; do
			fig "gpu-pp$p-llama" "$(llama_tps -ngl 99 -fa 1 -p "$p" -n 0)"
			fig "gpu-pp$p-coli" "$(coli_tps prefill -m q4.coli --gpu 0 --ctx $((p + 64)) --prompt "$p")"
		done
		fig gpu-tg64-llama "$(llama_tps -ngl 99 -fa 1 -p 0 -n 64)"
		fig gpu-tg64-coli "$(coli_tps decode -m q4.coli --gpu 0 --tokens 64 --disk-mib 0)"
	done
	;;
esac
case " $SKIP " in *" cpu "*) ;; *)
	for _ in $(seq "$ROUNDS"); do
		fig cpu-pp512-llama "$(CUDA_VISIBLE_DEVICES='' llama_tps -ngl 0 -p 512 -n 0)"
		fig cpu-pp512-coli "$(coli_tps prefill -m q4.coli --gpu off --prompt 512)"
		fig cpu-tg32-llama "$(CUDA_VISIBLE_DEVICES='' llama_tps -ngl 0 -p 0 -n 32)"
		fig cpu-tg32-coli "$(coli_tps decode -m q4.coli --gpu off --tokens 32 --disk-mib 0)"
	done
	;;
esac
if [ "$KQ" = 1 ]; then
	# (the stream bench's row: arm, tok/s, [range], vram MB, ram MB, disk MB a token)
	gpu=0
	nvidia-smi -L >/dev/null 2>&1 || gpu=sim
	: >kq.txt
	for _ in $(seq "$ROUNDS"); do
		for m in q4 q4km; do
			"$COLI" bench stream -m $m.coli --gpu $gpu --tokens 32 --rounds 3 --arms overlap+stream \
				2>>coli.err | awk -v m=$m '$1 == "overlap+stream" && $2 ~ /^[0-9.]+$/ && $3 ~ /^\[/ {
					printf "%s %.1f %.1f %.2f\n", m, $2, $2 * ($4 + $5 + $6), $4 + $5 + $6 }' |
				tee -a kq.txt | while read -r name tps mbs mb; do say "stream $name: $tps tok/s, $mbs routed MB/s ($mb MB a token)"; done
		done
	done
	echo "=== coli bench stream (overlap+stream, --gpu $gpu): Q4_K_M over q4, medians"
	awk 'function med(x, c,   i, j, t) { for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++)
			if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
			return c % 2 ? x[(c + 1) / 2] : (x[c / 2] + x[c / 2 + 1]) / 2 }
		{ n[$1]++; if ($1 == "q4") { a[n[$1]] = $2; b[n[$1]] = $3 } else { c[n[$1]] = $2; d[n[$1]] = $3 } }
		END { if (!n["q4"] || !n["q4km"]) { print "no figures"; exit }
			t0 = med(a, n["q4"]); r0 = med(b, n["q4"]); t1 = med(c, n["q4km"]); r1 = med(d, n["q4km"])
			printf "q4      %8.1f tok/s %9.1f routed MB/s\nQ4_K_M  %8.1f tok/s %9.1f routed MB/s\n", t0, r0, t1, r1
			printf "ratio   %8.3f       %9.3f (#38: >= 0.9 per routed byte)\n", t1 / t0, r1 / r0 }' kq.txt
fi

echo "=== tok/s per run (llama.cpp: llama-bench's mean of 3; coli: median of 3), coli / llama.cpp of the medians"
awk '{ k = $1; sub(/-(llama|coli)$/, "", k); e = ($1 ~ /-coli$/) ? "coli" : "llama"
	v[k, e] = v[k, e] " " $2; n[k, e]++; s[k, e, n[k, e]] = $2 + 0; if (!(k in seen)) { seen[k] = 1; o[++m] = k } }
	function med(k, e,   i, j, t, c) { c = n[k, e]; for (i = 1; i <= c; i++) a[i] = s[k, e, i]
		for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return c ? (c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2) : 0 }
	END { printf "%-10s %-24s %-24s %s\n", "", "llama.cpp", "coli", "ratio"
		for (i = 1; i <= m; i++) { k = o[i]; l = med(k, "llama"); c = med(k, "coli")
			printf "%-10s %-24s %-24s %s\n", k, v[k, "llama"], v[k, "coli"], (l > 0 ? sprintf("%.2fx", c / l) : "-") } }' figures.txt
