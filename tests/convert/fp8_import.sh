#!/bin/sh
# tests/convert/fp8_import.sh — block-scaled FP8 checkpoints in `coli convert`
# (core/convert/convert_fp8.c). tests/convert/fp8_ckpt.py writes, from a
# fixture, an FP8 checkpoint laid out as DeepSeek-V3's and Qwen3's releases
# (F8_E4M3 linear weights, float32 <name>_scale_inv per block) and its
# references: the weights dequantized in float32 (fp8 x scale_inv), stored
# BF16 (ref-bf16) and F32 (ref-f32). The venv is $ROOT/$BUILD/pyenv-fp8
# (tests/convert/fp8_venv: numpy, ml_dtypes).
#
#   same bits  qwen3_moe in blocks of [128, 128] (every matrix one partial
#              block), glm4_moe in [16, 24] (many blocks, partial edges),
#              qwen3_moe_fused in [16, 32] (3-D experts: blocks restart per
#              expert), qwen3_moe with weight_block_size null (one scale per
#              matrix), all with float32 scales, and glm4_moe in [32, 32]
#              with F8_E8M0 (ue8m0) ones; deepseek_v3 in [16, 24] and
#              deepseek_v3_noqlora in [128, 128] (MLA: kv_b_proj's blocks
#              transposed into attn_k_b, the RoPE rows de-interleaved, each
#              with its block's scale): --quant bf16 gives the logits of
#              ref-bf16 --quant bf16, bit for bit; --quant q8 those of
#              ref-f32 --quant q8 (q8 of ref-bf16 quantizes twice-rounded
#              weights, unless the scales are powers of two: then bf16
#              holds fp8 x scale exactly, and q8 of ref-bf16 is checked too)
#   default    without --quant an FP8 checkpoint is converted to q8, said on
#              stderr: the logits of --quant q8
#   refused    (qwen3_moe in blocks of [16, 32]) quant_method "gptq"; a
#              scale tensor one block row short; a
#              NaN encoding; F8 weights without quantization_config: exit 1
#              with a message naming the method or tensor, no output (nor
#              its .tmp) left behind
set -u
GEN="$ROOT/tests/convert/fp8_ckpt.py"
COLI="$ROOT/$BUILD/coli"
FIX="$ROOT/tests/fixtures"

. "$ROOT/tests/convert/fp8_venv" # sets PY

fail=0
bad() { echo "FAIL: $*"; fail=1; }
ids() { tr ' ' ',' <"$FIX/$1/ref/ids.txt" | tr -d '\n'; }
conv() { # DIR OUT.coli [--quant Q]
	cdir=$1 cout=$2
	shift 2
	"$COLI" convert "$cdir" -o "$cout" --quiet "$@" 2>err.txt || { cat err.txt; bad "coli convert $cdir $*"; }
}
logits() { "$COLI" logits -m "$1" --ids "$2" -o "$3" 2>err.txt || { cat err.txt; bad "coli logits -m $1"; }; }

for c in qwen3_moe:128:128:f32 glm4_moe:16:24:f32 qwen3_moe_fused:16:32:f32 qwen3_moe:0:0:f32 \
	glm4_moe:32:32:e8m0 deepseek_v3:16:24:f32 deepseek_v3_noqlora:128:128:f32; do
	fx=$(echo $c | cut -d: -f1) br=$(echo $c | cut -d: -f2) bc=$(echo $c | cut -d: -f3)
	sc=$(echo $c | cut -d: -f4)
	d="$fx-$br-$bc-$sc"
	"$PY" "$GEN" write "$FIX/$fx" "$d" "$br" "$bc" --scale $sc || { bad "$d: writing the checkpoints"; continue; }
	pairs="bf16:ref-bf16 q8:ref-f32"
	[ $sc = e8m0 ] && pairs="$pairs q8:ref-bf16" # power-of-two scales: bf16 holds the products
	for p in $pairs; do
		q=${p%%:*} ref=${p#*:}
		[ -f "$d-fp8-$q.f32" ] || {
			conv "$d/fp8" "$d-fp8-$q.coli" --quant $q
			logits "$d-fp8-$q.coli" "$(ids $fx)" "$d-fp8-$q.f32"
		}
		conv "$d/$ref" "$d-$ref-$q.coli" --quant $q
		logits "$d-$ref-$q.coli" "$(ids $fx)" "$d-$ref-$q.f32"
		if [ -s "$d-fp8-$q.f32" ] && cmp -s "$d-fp8-$q.f32" "$d-$ref-$q.f32"; then
			echo "ok: $fx, blocks [$br, $bc], $sc scales, --quant $q: FP8 and $ref give the same logits, bit for bit"
		else
			bad "$fx, blocks [$br, $bc], $sc scales, --quant $q: FP8's logits differ from $ref's"
		fi
	done
done

d=qwen3_moe-128-128-f32
"$COLI" convert "$d/fp8" -o auto.coli --quiet 2>err.txt || { cat err.txt; bad "coli convert $d/fp8 (no --quant)"; }
grep -q -- "FP8 checkpoint: --quant q8" err.txt || { cat err.txt; bad "no --quant: did not pick q8"; }
logits auto.coli "$(ids qwen3_moe)" auto.f32
cmp -s auto.f32 "$d-fp8-q8.f32" && echo "ok: without --quant an FP8 checkpoint becomes q8" ||
	bad "no --quant: logits differ from --quant q8's"

for k in gptq truncated nan noconfig; do
	rm -rf bad
	why=$("$PY" "$GEN" write "$FIX/qwen3_moe" bad 16 32 --bad $k) || { bad "$k: writing"; continue; }
	"$COLI" convert bad/fp8 -o out.coli --quiet --quant bf16 >msg.txt 2>&1
	rc=$?
	if [ $rc != 1 ] || ! grep -qF "'$why'" msg.txt; then
		bad "$k: exit $rc, wanted 1 naming '$why'; got: $(cat msg.txt)"
	else
		echo "ok: $k refused: $(cat msg.txt)"
	fi
	if ls out.coli* >/dev/null 2>&1; then
		bad "$k: refused, but left $(ls out.coli*)"
		rm -f out.coli*
	fi
done
exit $fail
