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
#                   and kept whole (mode kvb, an older file's key lengths), and
#                   both (mode both: the split pair is read, kv_b skipped)
#   deepseek_v3_noqlora  without q_lora (a plain attn_q)
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
#   deepseek-v3     tokenizer.ggml.pre "deepseek-v3" gives the ids of a
#                   tokenizer.json with DeepSeek-V3's three Splits in turn, and
#                   not qwen2's ("it'self" tells them apart); "glm4" those of
#                   one with GLM-4.5's (Llama 3's) regex (no text in the
#                   fixtures' 1024 tokens tells it from qwen2's: equality only)
#   kimi-k2         tokenizer.ggml.pre "kimi-k2": tests/convert/tiktoken_import.py's
#                   Kimi tiktoken checkpoint (768 ranks, 256 specials) stored as
#                   llama.cpp stores Kimi-K2's vocabulary (byte-level tokens, the
#                   merges rebuilding each rank, specials as control tokens):
#                   `coli tokenize` equals tiktoken's own ids on its 538 texts
#                   (2 need tiktoken's whole-piece rule) and decodes them back
#                   (needs the tiktoken venv, tests/convert/tiktoken_venv; said
#                   and skipped without it)
#   (each)          converted with --quant bf16 and/or q8, the logits equal, bit
#                   for bit, those of the checkpoint directory converted with
#                   the same --quant (the same weights through the same
#                   pipeline: the checkpoint's logits are transformers' within
#                   tests/core/fixture_logits.c's tolerance), and `coli
#                   tokenize` gives the checkpoint's ids
#   q8_0            glm4_moe, deepseek_v3 (attn_q_b and attn_kv_a's RoPE rows
#                   de-interleaved by moving whole rows of blocks), gpt_oss with
#                   matrices Q8_0 (biases, router and 1-D F32 as llama.cpp
#                   keeps them): without --quant every block is kept and the
#                   logits equal the checkpoint's q8 conversion's bit for bit;
#                   deepseek2 kvb+q8_0 (attn_kv_b whole in Q8_0: its W_UK half
#                   transposed, so dequantized and requantized): top-1 equal
#                   to the checkpoint's q8 on every position
#   mlablk          deepseek2 with attn_k_b / attn_v_b in Q5_0, Q4_1 and Q5_1
#                   (llama.cpp's fallbacks for 128-column rows): converted to
#                   q8_0, which the device's per-head jobs take, so --gpu sim
#                   runs the dense part, the CPU's logits bit for bit; top-1
#                   of the bf16 checkpoint on all but at most one position
#   refused         deepseek2 routed by softmax (expert_gating_func 1, or
#                   absent: DeepSeek-V2's files), gpt-oss with an array
#                   sliding_window_pattern, glm4moe with llama.cpp's YaRN
#                   log multiplier (a correction transformers has not), a
#                   missing blk.1.exp_probs_b (glm4moe) or ffn_gate_inp.bias
#                   (gpt-oss): exit 1 naming the key or tensor (the GGUF's
#                   name, then the checkpoint's), no output left behind
set -u
GEN="$ROOT/tests/convert/gguf_import.py"
COLI="$ROOT/$BUILD/coli"
FIX="$ROOT/tests/fixtures"

TPY=$(. "$ROOT/tests/convert/tiktoken_venv" >/dev/null 2>&1 && echo "$PY") # tiktoken's
. "$ROOT/tests/io/gguf_venv" # sets PY

fail=0
bad() { echo "FAIL: $*"; fail=1; }
ids() { tr ' ' ',' <"$FIX/$1/ref/ids.txt" | tr -d '\n'; }
logits() { "$COLI" logits -m "$1" --ids "$2" -o "$3" 2>err.txt || { cat err.txt; bad "coli logits -m $1"; }; }

# every GGUF and fixture copy at once (one interpreter start)
"$PY" "$GEN" batch limit7 "$FIX/gpt_oss" l7 -- limit7 "$FIX/gpt_oss_mxfp4" l7mx -- \
	o200ktok l7 otok -- dsv3tok "$FIX/deepseek_v3" dtok -- glm4tok "$FIX/glm4_moe" gtok -- \
	write dtok dsv3.gguf dsv3 -- write gtok glm4.gguf glm4 -- \
	write "$FIX/glm4_moe" glm4moe.gguf bf16 -- \
	write "$FIX/deepseek_v3" deepseek2.gguf bf16 -- \
	write "$FIX/deepseek_v3" deepseek2-kvb.gguf kvb -- \
	write "$FIX/deepseek_v3" deepseek2-both.gguf both -- \
	write "$FIX/deepseek_v3_noqlora" deepseek2-noq.gguf bf16 -- \
	write l7 gptoss.gguf bf16 -- write l7mx gptoss-mxfp4.gguf mxfp4 -- \
	write "$FIX/minimax_m2" minimax-m2.gguf bf16 -- write otok o200k.gguf o200k -- \
	write "$FIX/glm4_moe" glm4moe-q8_0.gguf q8_0 -- \
	write "$FIX/deepseek_v3" deepseek2-q8_0.gguf q8_0 -- \
	write "$FIX/deepseek_v3" deepseek2-kvb-q8_0.gguf kvb+q8_0 -- \
	write "$FIX/deepseek_v3" deepseek2-mlablk.gguf mlablk -- \
	write l7 gptoss-q8_0.gguf q8_0 -- \
	write "$FIX/deepseek_v3" ds-softmax.gguf softmax -- write l7 oss-pattern.gguf pattern -- \
	write "$FIX/glm4_moe" glm-yarn.gguf yarn -- write "$FIX/glm4_moe" glm-nobias.gguf nobias -- \
	write l7 oss-nobias.gguf nobias ||
	{ echo "FAIL: writing the GGUFs"; exit 1; }

# same NAME HF_DIR IDS_FIXTURE QUANTS: NAME.gguf converts to the checkpoint's
# logits under each quant
same() {
	name=$1 hf=$2 fx=$3
	shift 3
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

same glm4moe "$FIX/glm4_moe" glm4_moe bf16 q8
tok hf-glm4moe-bf16.coli gg-glm4moe-bf16.coli glm4moe
same deepseek2 "$FIX/deepseek_v3" deepseek_v3 bf16 q8
same deepseek2-kvb "$FIX/deepseek_v3" deepseek_v3 q8
same deepseek2-both "$FIX/deepseek_v3" deepseek_v3 q8
same deepseek2-noq "$FIX/deepseek_v3_noqlora" deepseek_v3_noqlora q8
same minimax-m2 "$FIX/minimax_m2" minimax_m2 bf16 q8
tok hf-minimax-m2-bf16.coli gg-minimax-m2-bf16.coli minimax-m2
same gptoss l7 gpt_oss bf16 q8
same gptoss-mxfp4 l7mx gpt_oss q8 bf16

# o200k: the same vocabulary's tokenizer.json with gpt-oss's Split regex
"$COLI" convert otok -o o-hf.coli --quiet 2>/dev/null || bad "converting otok"
"$COLI" convert o200k.gguf -o o-gg.coli --quiet 2>/dev/null || bad "converting o200k.gguf"
tok o-hf.coli o-gg.coli "gpt-4o (o200k)"
t="raise TypeError"
[ "$("$COLI" tokenize -m o-hf.coli "$t" 2>&1)" != "$("$COLI" tokenize -m hf-gptoss-bf16.coli "$t" 2>&1)" ] &&
	[ "$("$COLI" tokenize -m o-hf.coli "$t" 2>&1)" = "$("$COLI" tokenize -m o-gg.coli "$t" 2>&1)" ] &&
	echo "ok: gpt-4o (o200k): '$t' split as o200k, not as qwen2" ||
	bad "o200k: '$t' does not tell the regexes apart, or the GGUF's differs"

# deepseek-v3's three Splits, glm4's regex
for x in dsv3:dtok glm4:gtok; do
	n=${x%:*}
	"$COLI" convert "${x#*:}" -o "$n-hf.coli" --quiet 2>/dev/null || bad "converting ${x#*:}"
	"$COLI" convert "$n.gguf" -o "$n-gg.coli" --quiet 2>/dev/null || bad "converting $n.gguf"
	tok "$n-hf.coli" "$n-gg.coli" "$n"
done
t="it'self (self)"
[ "$("$COLI" tokenize -m dsv3-hf.coli "$t" 2>&1)" != "$("$COLI" tokenize -m hf-deepseek2-bf16.coli "$t" 2>&1)" ] &&
	[ "$("$COLI" tokenize -m dsv3-hf.coli "$t" 2>&1)" = "$("$COLI" tokenize -m dsv3-gg.coli "$t" 2>&1)" ] &&
	echo "ok: deepseek-v3: '$t' split as DeepSeek-V3, not as qwen2" ||
	bad "deepseek-v3: '$t' does not tell the regexes apart, or the GGUF's differs"

# kimi-k2: a tiktoken checkpoint's vocabulary as a GGUF's, against tiktoken
TGEN="$ROOT/tests/convert/tiktoken_import.py"
if [ -z "$TPY" ]; then
	echo "note: no tiktoken venv: kimi-k2 not checked"
elif "$TPY" "$TGEN" write "$FIX/qwen3_moe" kimi >/dev/null && "$PY" "$GEN" write kimi kimi.gguf kimi &&
	"$COLI" convert kimi.gguf -o kimi.coli --quiet 2>err.txt; then
	"$COLI" tokenize -m kimi.coli --lines kimi/cases.jsonl >got.txt 2>err.txt || { cat err.txt; bad "kimi-k2: coli tokenize"; }
	"$TPY" "$TGEN" compare kimi/cases.jsonl got.txt kimi/want.txt && echo "ok: kimi-k2: ids equal tiktoken's" ||
		bad "kimi-k2: ids differ from tiktoken's"
	"$COLI" tokenize -m kimi.coli --decode --lines kimi/want.txt >dec.txt 2>err.txt &&
		"$TPY" "$TGEN" decoded kimi/cases.jsonl dec.txt && echo "ok: kimi-k2: tiktoken's ids decode to the texts" ||
		bad "kimi-k2: decoding does not give the texts back"
else
	cat err.txt
	bad "kimi-k2: writing or converting the GGUF"
fi

# kept NAME HF_DIR IDS_FIXTURE: a Q8_0 GGUF keeps its blocks (no --quant) and
# gives the checkpoint's q8 logits
kept() {
	"$COLI" convert "$2" -o "hf-$1-q8.coli" --quant q8 --quiet 2>/dev/null || bad "$1: checkpoint"
	"$COLI" convert "$1.gguf" -o "gg-$1.coli" 2>err.txt || { cat err.txt; bad "$1: coli convert"; return; }
	grep -q -- "--quant q8_0 from the file's types" err.txt || { cat err.txt; bad "$1: did not pick q8"; }
	copied=$(sed -n 's/.*: \([0-9]*\) of \([0-9]*\) block-quantized matrices copied.*/\1 \2/p' err.txt)
	logits "hf-$1-q8.coli" "$(ids $3)" "hf-$1-q8.f32"
	logits "gg-$1.coli" "$(ids $3)" "gg-$1.f32"
	case $1 in
	*kvb*)
		agree=$("$PY" "$GEN" top1 "hf-$1-q8.f32" "gg-$1.f32" 1024)
		[ "${agree%% *}" = 0 ] &&
			echo "ok: $1: ${copied% *} of ${copied#* } matrices copied, top-1 of the checkpoint's q8: $agree" ||
			bad "$1: top-1 differs from the checkpoint's q8: $agree"
		;;
	*)
		[ "${copied% *}" = "${copied#* }" ] || bad "$1: not every Q8_0 matrix was copied ($copied)"
		cmp -s "hf-$1-q8.f32" "gg-$1.f32" &&
			echo "ok: $1: all ${copied% *} Q8_0 matrices kept, the checkpoint's q8 logits bit for bit" ||
			bad "$1: the Q8_0 GGUF's logits differ from the checkpoint's q8"
		;;
	esac
}
kept glm4moe-q8_0 "$FIX/glm4_moe" glm4_moe
kept deepseek2-q8_0 "$FIX/deepseek_v3" deepseek_v3
kept deepseek2-kvb-q8_0 "$FIX/deepseek_v3" deepseek_v3
kept gptoss-q8_0 l7 gpt_oss

# MLA's per-head matrices in block types (Q5_0, Q4_1, Q5_1) become q8_0, which
# the device's per-head jobs take: the dense part runs on the (simulated)
# device with the CPU's bits, and top-1 is the bf16 checkpoint's
"$COLI" convert deepseek2-mlablk.gguf -o gg-mlablk.coli 2>err.txt ||
	{ cat err.txt; bad "mlablk: coli convert"; }
nq8=$("$COLI" inspect -v gg-mlablk.coli 2>&1 | grep -cE "attn_[kv]_b +q8_0 ")
logits gg-mlablk.coli "$(ids deepseek_v3)" mlablk-cpu.f32
"$COLI" logits -m gg-mlablk.coli --ids "$(ids deepseek_v3)" -o mlablk-sim.f32 --gpu sim 2>err.txt ||
	{ cat err.txt; bad "mlablk: coli logits --gpu sim"; }
agree=$("$PY" "$GEN" top1 hf-deepseek2-bf16.f32 mlablk-cpu.f32 1024)
if [ "$nq8" = 6 ] && grep -q "dense part and KV cache on sim" err.txt &&
	cmp -s mlablk-cpu.f32 mlablk-sim.f32 && [ "${agree%% *}" -le 1 ]; then
	echo "ok: deepseek2 with Q5_0/Q4_1/Q5_1 attn_k_b/attn_v_b: 6 of 6 as q8_0, the dense part on sim (the CPU's bits), top-1 of the bf16 checkpoint: $agree"
else
	bad "mlablk: $nq8 of 6 per-head matrices q8_0, top-1 $agree; $(cat err.txt)"
fi

# refused NAME WHY: NAME.gguf is refused with WHY, nothing written
refused() {
	"$COLI" convert "$1.gguf" -o out.coli --quiet >msg.txt 2>&1
	rc=$?
	if [ $rc != 1 ] || ! grep -qF "$2" msg.txt; then
		bad "$1: exit $rc, wanted 1 with '$2'; got: $(cat msg.txt)"
	elif ls out.coli* >/dev/null 2>&1; then
		bad "$1: refused, but left $(ls out.coli*)"
	else
		echo "ok: $1 refused: $(tail -n 1 msg.txt)"
	fi
	rm -f out.coli*
}
refused ds-softmax "deepseek2.expert_gating_func 1 is not supported"
refused oss-pattern "gpt-oss.attention.sliding_window_pattern as an array"
refused glm-yarn "glm4moe.rope.scaling.yarn_log_multiplier 0.1 is not supported (llama.cpp's YaRN correction"
refused glm-nobias "missing tensor blk.1.exp_probs_b.bias (read as model.layers.1.mlp.gate.e_score_correction_bias"
refused oss-nobias "missing tensor blk.1.ffn_gate_inp.bias (read as model.layers.1.mlp.router.bias"
exit $fail
