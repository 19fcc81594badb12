#!/bin/bash
# tools/ref/llama_gguf.sh — GGUF files made by llama.cpp's own converter and
# quantizer, read by coli: the files people download, not ones this project
# wrote. A Hugging Face checkpoint (default: the demo model) goes through
# llama.cpp's convert_hf_to_gguf.py (BF16) and llama-quantize into each type
# of TYPES; then, per file:
#
#   convert   `coli convert FILE.gguf` (blocks copied as stored); a type coli
#             does not read (IQ*) must be refused, exit 1, naming the type,
#             with nothing left behind
#   bits      the BF16 file's logits equal those of the checkpoint converted
#             by coli with --quant bf16, bit for bit; the file's tokenizer
#             gives the ids of the checkpoint's tokenizer.json
#   greedy    the greedy text of PROMPT on the CPU and on the simulated
#             device (and on GPU 0 with GPU=1), equal
#   quality   `coli perplexity` on HELD_OUT beside coli's own conversions of
#             the checkpoint (bf16, q8, q4k, q4)
#
# A table goes to stdout; the exit status is 1 when a check fails.
#
# Usage: tools/ref/llama_gguf.sh LLAMA_SRC LLAMA_BIN OUT_DIR
#   LLAMA_SRC  an unpacked llama.cpp tree holding convert_hf_to_gguf.py and
#              gguf-py (../shared/peer/llama-src.tar.xz)
#   LLAMA_BIN  the folder of llama-quantize and its .so files (the peer's
#              build_llama.sh; GGML_CUDA=OFF builds it without a GPU)
# Environment: PYTHON (default python3; with torch, transformers, numpy,
#   safetensors, sentencepiece), COLI (default build/coli), HF (default
#   models/demo), HELD_OUT (default models/demo/held_out.txt), TYPES
#   (default "Q8_0 Q6_K Q5_K_M Q4_K_M Q3_K_M Q2_K Q4_0 IQ4_XS"), GPU
#   (default 0: no GPU run).
set -u
[ $# -eq 3 ] || {
	sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
}
SRC=$(cd "$1" && pwd) BIN=$(cd "$2" && pwd) OUT=$3
PYTHON=${PYTHON:-python3} COLI=$(realpath "${COLI:-build/coli}")
HF=$(realpath "${HF:-models/demo}") HELD_OUT=$(realpath "${HELD_OUT:-models/demo/held_out.txt}")
TYPES=${TYPES:-Q8_0 Q6_K Q5_K_M Q4_K_M Q3_K_M Q2_K Q4_0 IQ4_XS}
GPU=${GPU:-0}
PROMPT='def add(a, b):'
fails=0
mkdir -p "$OUT" && cd "$OUT" || exit 1
export LD_LIBRARY_PATH="$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fail() {
	echo "FAIL $*"
	fails=$((fails + 1))
}
mb() { # FILE -> its size in MB (awk: hosts without bc)
	stat -c %s "$1" | awk '{ printf "%.2f", $1 / 1e6 }'
}
ppl() { # MODEL.coli -> perplexity
	"$COLI" perplexity -m "$1" --gpu off -f "$HELD_OUT" 2>/dev/null |
		sed -n 's/.*perplexity \([0-9.]*\).*/\1/p'
}

PYTHONPATH="$SRC/gguf-py" "$PYTHON" "$SRC/convert_hf_to_gguf.py" "$HF" --outtype bf16 \
	--outfile bf16.gguf >convert_hf.log 2>&1 || {
	tail -5 convert_hf.log
	exit 1
}
for q in bf16 q8 q4k q4; do
	"$COLI" convert "$HF" --quant $q -o hf-$q.coli >/dev/null 2>&1 || fail "coli convert $HF --quant $q"
done

# bits: the BF16 GGUF against the checkpoint
"$COLI" convert bf16.gguf -o bf16.coli >convert-bf16.log 2>&1 || fail "coli convert bf16.gguf"
text=$(head -c 2000 "$HELD_OUT")
"$COLI" logits -m bf16.coli --gpu off --text "$text" -o gguf.logits 2>/dev/null &&
	"$COLI" logits -m hf-bf16.coli --gpu off --text "$text" -o hf.logits 2>/dev/null &&
	cmp -s gguf.logits hf.logits || fail "bf16 GGUF logits differ from the checkpoint's"
"$COLI" tokenize -m bf16.coli "$text" >ids-gguf.txt 2>&1
"$COLI" tokenize --tokenizer-json "$HF/tokenizer.json" "$text" >ids-json.txt 2>&1
cmp -s ids-gguf.txt ids-json.txt || fail "the GGUF's tokenizer ids differ from tokenizer.json's"
echo "bf16 GGUF: logits of $(($(stat -c %s hf.logits) / 4)) values equal the checkpoint's: $(cmp -s gguf.logits hf.logits && echo yes || echo no);" \
	"tokenizer ids ($(wc -w <ids-json.txt)) equal: $(cmp -s ids-gguf.txt ids-json.txt && echo yes || echo no)"

printf '%-9s %9s %10s %-28s %s\n' file MB perplexity "greedy CPU = sim$([ "$GPU" = 1 ] && echo ' = GPU')" notes
printf '%-9s %9.2f %10s %-28s %s\n' "coli bf16" "$(mb hf-bf16.coli)" "$(ppl hf-bf16.coli)" - -
for q in q8 q4k q4; do
	printf '%-9s %9.2f %10s %-28s %s\n' "coli $q" "$(mb hf-$q.coli)" "$(ppl hf-$q.coli)" - -
done
for t in bf16 $TYPES; do
	if [ "$t" != bf16 ]; then
		"$BIN/llama-quantize" bf16.gguf "$t.gguf" "$t" >quantize-$t.log 2>&1 || {
			fail "llama-quantize $t"
			continue
		}
		rm -f "$t.coli"
		if ! "$COLI" convert "$t.gguf" -o "$t.coli" >convert-$t.log 2>&1; then
			case $t in
			IQ*)
				if grep -q "($t)" convert-$t.log && ! ls "$t".coli* >/dev/null 2>&1; then
					printf '%-9s %9s %10s %-28s %s\n' "$t" - - "refused, nothing written" "$(grep -o "[0-9]* tensors of a type" convert-$t.log)"
				else
					fail "$t: not refused as it should be: $(tail -1 convert-$t.log)"
				fi
				continue
				;;
			esac
			fail "coli convert $t.gguf: $(tail -1 convert-$t.log)"
			continue
		fi
	fi
	"$COLI" generate -m "$t.coli" --gpu off -n 48 -p "$PROMPT" >greedy-$t-cpu.txt 2>/dev/null
	"$COLI" generate -m "$t.coli" --gpu sim -n 48 -p "$PROMPT" >greedy-$t-sim.txt 2>/dev/null
	same=yes
	cmp -s greedy-$t-cpu.txt greedy-$t-sim.txt || same=no
	if [ "$GPU" = 1 ]; then
		"$COLI" generate -m "$t.coli" --gpu 0 -n 48 -p "$PROMPT" >greedy-$t-gpu.txt 2>/dev/null
		cmp -s greedy-$t-cpu.txt greedy-$t-gpu.txt || same=no
	fi
	[ $same = yes ] || fail "$t: greedy text differs across devices"
	printf '%-9s %9.2f %10s %-28s %s\n' "$t" "$(mb "$t.gguf")" "$(ppl "$t.coli")" "$same" \
		"$(grep -o 'falling back to *[a-z0-9_]*' quantize-$t.log 2>/dev/null | awk '{print $4}' | sort | uniq -c | awk '{printf "%s%s x%s", (NR > 1 ? ", " : "fallbacks: "), $2, $1}')"
done
[ $fails -eq 0 ] && echo "all checks passed" || echo "$fails checks failed"
[ $fails -eq 0 ]
