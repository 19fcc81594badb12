#!/bin/sh
# tests/convert/gguf_arch.sh — `coli convert MODEL.gguf` for the families
# llama.cpp names glm4moe, deepseek2, gpt-oss and minimax-m2
# (core/convert/convert_gguf_config.c). tests/convert/gguf_import.py writes
# each GGUF from the Hugging Face fixture as llama.cpp's converter does (the
# gguf package's TensorNameMap names, the family's keys, stacked experts; the
# venv is $ROOT/$BUILD/pyenv-gguf, as tests/io/gguf_read.sh's):
#
#   glm4_moe        with an MTP block (blk.3, nextn.*: skipped) as GLM-4.5's
#                   files carry one; partial RoPE, q/k/v biases, QK norm,
#                   sigmoid routing with exp_probs_b, groups, shared expert,
#                   a dense first layer
#   deepseek_v3     deepseek2 (MLA with q_lora, YaRN with mscale_all_dim as
#                   yarn_log_multiplier), attn_kv_b split into attn_k_b
#                   (transposed) / attn_v_b as the converter writes it now,
#                   and kept whole (mode kvb, an older file's key lengths)
#   deepseek_v3_noqlora  the same without q_lora (a plain attn_q)
#   gpt_oss         gpt-oss (sinks, sliding layers, q/k/v/o, router and
#                   expert biases, gate_up split into ffn_gate_exps /
#                   ffn_up_exps, YaRN) against the fixture with swiglu_limit 7
#                   (`limit7`: llama.cpp's constant, which no key holds)
#   gpt_oss_mxfp4   the same from the MXFP4 checkpoint: experts as ggml MXFP4
#                   blocks (repacked, not requantized, as the converter does),
#                   converted to q8 exactly as the checkpoint's are
#   minimax_m2      minimax-m2 (partial RoPE, q/k norms over the whole
#                   projection, sigmoid routing with exp_probs_b, w1/w3/w2
#                   experts stacked)
#   o200k           tokenizer.ggml.pre "gpt-4o" gives the ids of a
#                   tokenizer.json with gpt-oss's o200k Split regex; labelled
#                   qwen2 it does not ("TypeError": the texts tell them apart)
#   (each)          converted with --quant bf16 and q8, the logits equal, bit
#                   for bit, those of the checkpoint directory converted with
#                   the same --quant (the same weights through the same
#                   pipeline: the checkpoint's logits are transformers' within
#                   tests/core/fixture_logits.c's tolerance), and `coli
#                   tokenize` gives the checkpoint's ids
#   refused         deepseek2 routed by softmax (expert_gating_func 1, or
#                   absent: DeepSeek-V2's files), gpt-oss with an array
#                   sliding_window_pattern: exit 1 naming the key, no output
#                   left behind
set -u
GEN="$ROOT/tests/convert/gguf_import.py"
COLI="$ROOT/$BUILD/coli"
FIX="$ROOT/tests/fixtures"

. "$ROOT/tests/io/gguf_venv" # sets PY

fail=0
bad() { echo "FAIL: $*"; fail=1; }
ids() { tr ' ' ',' <"$FIX/$1/ref/ids.txt" | tr -d '\n'; }
logits() { "$COLI" logits -m "$1" --ids "$2" -o "$3" 2>err.txt || { cat err.txt; bad "coli logits -m $1"; }; }

# same NAME HF_DIR GGUF_MODE IDS_FIXTURE QUANTS: the GGUF written in GGUF_MODE
# from HF_DIR converts to the checkpoint's logits for each quant
same() {
	name=$1 hf=$2 mode=$3 fx=$4
	shift 4
	"$PY" "$GEN" write "$hf" "$name.gguf" "$mode" || { bad "$name: writing the GGUF"; return; }
	for q in "$@"; do
		"$COLI" convert "$hf" -o "hf-$name-$q.coli" --quant $q --quiet 2>/dev/null ||
			bad "$name: converting the checkpoint directory"
		"$COLI" convert "$name.gguf" -o "gg-$name-$q.coli" --quant $q --quiet 2>err.txt ||
			{ cat err.txt; bad "$name: coli convert $name.gguf --quant $q"; continue; }
		logits "hf-$name-$q.coli" "$(ids $fx)" "hf-$name-$q.f32"
		logits "gg-$name-$q.coli" "$(ids $fx)" "gg-$name-$q.f32"
		if cmp -s "hf-$name-$q.f32" "gg-$name-$q.f32"; then
			echo "ok: $name $q: GGUF and checkpoint give the same logits, bit for bit"
		else
			bad "$name $q: the GGUF's logits differ from the checkpoint's"
		fi
	done
}

# the tokenizer: the same ids as the checkpoint's tokenizer.json
tok() {
	for text in "Hello, world!" "<|im_start|>user
naïve café 123<|im_end|>"; do
		a=$("$COLI" tokenize -m "$1" "$text" 2>&1)
		b=$("$COLI" tokenize -m "$2" "$text" 2>&1)
		[ "$a" = "$b" ] || { bad "$3: tokenize '$text': checkpoint $a, GGUF $b"; return; }
	done
	echo "ok: $3: the GGUF's tokenizer gives the checkpoint's ids on 2 texts"
}

same glm4moe "$FIX/glm4_moe" bf16 glm4_moe bf16 q8
tok hf-glm4moe-bf16.coli gg-glm4moe-bf16.coli glm4moe
same deepseek2 "$FIX/deepseek_v3" bf16 deepseek_v3 bf16 q8
same deepseek2-kvb "$FIX/deepseek_v3" kvb deepseek_v3 q8
same deepseek2-noq "$FIX/deepseek_v3_noqlora" bf16 deepseek_v3_noqlora q8
same deepseek2-noq-kvb "$FIX/deepseek_v3_noqlora" kvb deepseek_v3_noqlora q8

# refused NAME HF_DIR MODE WHY: the GGUF is refused with WHY, nothing written
refused() {
	"$PY" "$GEN" write "$2" "$1.gguf" "$3" || { bad "$1: writing the GGUF"; return; }
	"$COLI" convert "$1.gguf" -o out.coli --quiet >msg.txt 2>&1
	rc=$?
	if [ $rc != 1 ] || ! grep -qF "$4" msg.txt; then
		bad "$1: exit $rc, wanted 1 with '$4'; got: $(cat msg.txt)"
	elif ls out.coli* >/dev/null 2>&1; then
		bad "$1: refused, but left $(ls out.coli*)"
	else
		echo "ok: $1 refused: $(cat msg.txt)"
	fi
	rm -f out.coli*
}
same minimax-m2 "$FIX/minimax_m2" bf16 minimax_m2 bf16 q8
tok hf-minimax-m2-bf16.coli gg-minimax-m2-bf16.coli minimax-m2
"$PY" "$GEN" limit7 "$FIX/gpt_oss" l7 && "$PY" "$GEN" limit7 "$FIX/gpt_oss_mxfp4" l7mx ||
	bad "writing the swiglu_limit 7 fixtures"
same gptoss l7 bf16 gpt_oss bf16 q8
same gptoss-mxfp4 l7mx mxfp4 gpt_oss q8 bf16

# o200k: the same vocabulary's tokenizer.json with gpt-oss's Split regex
"$PY" "$GEN" o200ktok l7 otok && "$PY" "$GEN" write otok o200k.gguf o200k ||
	bad "writing the o200k fixtures"
"$COLI" convert otok -o o-hf.coli --quiet 2>/dev/null || bad "converting otok"
"$COLI" convert o200k.gguf -o o-gg.coli --quiet 2>/dev/null || bad "converting o200k.gguf"
tok o-hf.coli o-gg.coli "gpt-4o (o200k)"
t="raise TypeError"
[ "$("$COLI" tokenize -m o-hf.coli "$t" 2>&1)" != "$("$COLI" tokenize -m hf-gptoss-bf16.coli "$t" 2>&1)" ] &&
	[ "$("$COLI" tokenize -m o-hf.coli "$t" 2>&1)" = "$("$COLI" tokenize -m o-gg.coli "$t" 2>&1)" ] &&
	echo "ok: gpt-4o (o200k): '$t' split as o200k, not as qwen2" ||
	bad "o200k: '$t' does not tell the regexes apart, or the GGUF's differs"

refused oss-pattern "$FIX/gpt_oss" pattern "gpt-oss.attention.sliding_window_pattern as an array"
refused ds-softmax "$FIX/deepseek_v3" softmax "deepseek2.expert_gating_func 1 is not supported"
exit $fail
