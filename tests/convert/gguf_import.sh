#!/bin/sh
# tests/convert/gguf_import.sh — `coli convert MODEL.gguf` (core/model/
# convert_gguf.c) against the Hugging Face path. tests/convert/gguf_import.py
# writes GGUFs from the fixtures with the `gguf` package (llama.cpp's names
# and keys; the venv is $ROOT/$BUILD/pyenv-gguf, as tests/io/gguf_read.sh's):
#
#   bf16     qwen3_moe, qwen2_moe, olmoe and mixtral (GGUF "llama" with
#            experts, attn_q / attn_k rows permuted as llama.cpp's converter
#            does), matrices BF16 as stored: converted with
#            --quant bf16 and q8, the logits equal, bit for bit, those of the
#            checkpoint directory converted with the same --quant (same
#            weights, same pipeline); `coli tokenize` gives the same ids; the
#            same matrices as Q8_0 (copied) give the checkpoint's q8 logits
#   olmo     tokenizer.ggml.pre "olmo" gives the ids of a tokenizer.json
#            with a ByteLevel (GPT-2 regex) pre-tokenizer
#   q8_0     matrices Q8_0: without --quant it picks q8 and says so, copies
#            every block as stored (the container's planes read back equal
#            the GGUF's blocks), and the logits equal the checkpoint's q8
#            container's bit for bit (the gguf package rounds as coli does);
#            top-1 on every position equals the bf16 container's
#            (logits with the f32 KV cache, as the fixture tests compare)
#   q8_0_odd the same blocks with quants halved, scales doubled (no block
#            reaches |q| = 127, so requantizing would change them): the
#            container still holds them unchanged
#   q4_mix   Q4_0 experts (copied), Q5_1 attention, Q8_0 embedding
#            (dequantized, requantized to q4): picks q4, runs;
#            its top-1 agreement is printed, not asserted (as for q4)
#   split    the q8_0 GGUF written in 3 parts (-0000K-of-00003.gguf, the
#            gguf package's splitting writer): the first part converts to
#            the single file's container, byte for byte; --progress draws
#            its bar to the full total
#   rope     tests/fixtures/long's qwen3_moe_yarn and qwen3_moe_linear configs with
#            qwen3_moe's weights as GGUF rope.scaling.* keys: coli inspect reads the
#            same scaling, logits equal the checkpoint's bit for bit
#   refused  "llama" without experts (dense), a truncated file, a split with a part
#            missing, given by its second part, or with part 2 copied as
#            part 3, a missing tensor, a stacked expert tensor one expert
#            short, expert shapes against expert_feed_forward_length: exit 1 naming why (a tensor by its GGUF name, then the
#            checkpoint name it is read as), no output (nor its .tmp) left behind
set -u
GEN="$ROOT/tests/convert/gguf_import.py"
COLI="$ROOT/$BUILD/coli"
FIX="$ROOT/tests/fixtures"

. "$ROOT/tests/io/gguf_venv" # sets PY

fail=0
bad() { echo "FAIL: $*"; fail=1; }
ids() { tr ' ' ',' <"$FIX/$1/ref/ids.txt" | tr -d '\n'; }
logits() { "$COLI" logits -m "$1" --ids "$2" -o "$3" --kv-type f32 2>err.txt || { cat err.txt; bad "coli logits -m $1"; }; }

for fx in qwen3_moe qwen2_moe olmoe mixtral; do
	"$PY" "$GEN" write "$FIX/$fx" "$fx.gguf" bf16 || { bad "$fx: writing the GGUF"; continue; }
	for q in bf16 q8; do
		"$COLI" convert "$FIX/$fx" -o "hf-$fx-$q.coli" --quant $q --quiet 2>/dev/null ||
			bad "$fx: converting the checkpoint directory"
		"$COLI" convert "$fx.gguf" -o "gg-$fx-$q.coli" --quant $q --quiet 2>err.txt ||
			{ cat err.txt; bad "$fx: coli convert $fx.gguf --quant $q"; continue; }
		logits "hf-$fx-$q.coli" "$(ids $fx)" "hf-$fx-$q.f32"
		logits "gg-$fx-$q.coli" "$(ids $fx)" "gg-$fx-$q.f32"
		if cmp -s "hf-$fx-$q.f32" "gg-$fx-$q.f32"; then
			echo "ok: $fx $q: GGUF and checkpoint give the same logits, bit for bit"
		else
			bad "$fx $q: the GGUF's logits differ from the checkpoint's"
		fi
	done
	# Q8_0 blocks (copied; for mixtral read back a row at a time out of
	# ggml's RoPE order) are those the checkpoint's q8 conversion makes
	"$PY" "$GEN" write "$FIX/$fx" "$fx-q8_0.gguf" q8_0 &&
		"$COLI" convert "$fx-q8_0.gguf" -o "gq-$fx.coli" --quiet 2>err.txt &&
		logits "gq-$fx.coli" "$(ids $fx)" "gq-$fx.f32" &&
		cmp -s "gq-$fx.f32" "hf-$fx-q8.f32" &&
		echo "ok: $fx Q8_0: blocks copied, the logits of the checkpoint's q8 container" ||
		{ cat err.txt; bad "$fx: the Q8_0 GGUF's logits differ from the checkpoint's q8"; }
	tok_ok=1
	for text in "Hello, world!" 'def add(a, b): return a - b' "<|im_start|>user
naïve café 123<|im_end|>"; do
		a=$("$COLI" tokenize -m "hf-$fx-bf16.coli" "$text" 2>&1)
		b=$("$COLI" tokenize -m "gg-$fx-bf16.coli" "$text" 2>&1)
		[ "$a" = "$b" ] || { bad "$fx: tokenize '$text': checkpoint $a, GGUF $b"; tok_ok=0; }
	done
	[ $tok_ok = 1 ] && echo "ok: $fx: the GGUF's tokenizer gives the checkpoint's ids on 3 texts"
done

# tokenizer.ggml.pre "olmo" is GPT-2's regex: the qwen3_moe fixture with its
# tokenizer.json rewritten to a ByteLevel (GPT-2 regex) pre-tokenizer, and
# its GGUF labelled olmo, give the same ids; labelled qwen2 they differ on
# "a\n\nb" (so the texts tell the two regexes apart)
"$PY" "$GEN" gpt2tok "$FIX/qwen3_moe" g2tok && "$PY" "$GEN" write g2tok olmo.gguf olmo &&
	"$PY" "$GEN" write g2tok q2.gguf bf16 || bad "writing the olmo fixtures"
"$COLI" convert g2tok -o g2-hf.coli --quiet 2>/dev/null || bad "converting g2tok"
for g in olmo q2; do
	"$COLI" convert $g.gguf -o g2-$g.coli --quiet 2>err.txt || { cat err.txt; bad "converting $g.gguf"; }
done
tok_ok=1
for text in "$(printf 'a\n\nb')" "$(printf 'def f():\n\n    return 1\n')" "IT'S 1000000 naïve"; do
	a=$("$COLI" tokenize -m g2-hf.coli "$text" 2>&1)
	b=$("$COLI" tokenize -m g2-olmo.coli "$text" 2>&1)
	[ "$a" = "$b" ] || { bad "olmo: tokenize '$text': tokenizer.json $a, GGUF $b"; tok_ok=0; }
done
nn=$(printf 'a\n\nb')
[ "$("$COLI" tokenize -m g2-q2.coli "$nn" 2>&1)" != "$("$COLI" tokenize -m g2-hf.coli "$nn" 2>&1)" ] ||
	bad "olmo: qwen2's regex gave GPT-2's ids on 'a\n\nb': the texts do not tell them apart"
[ $tok_ok = 1 ] && echo "ok: tokenizer.ggml.pre olmo gives a GPT-2 ByteLevel tokenizer.json's ids on 3 texts"

fx=qwen3_moe
for m in q8_0 q8_0_odd q4_mix; do
	"$PY" "$GEN" write "$FIX/$fx" "$m.gguf" $m || { bad "$m: writing the GGUF"; continue; }
	"$COLI" convert "$m.gguf" -o "$m.coli" --quiet 2>err.txt || { cat err.txt; bad "$m: coli convert"; continue; }
	want=$([ $m = q4_mix ] && echo q4_0 || echo q8_0)
	grep -q -- "--quant $want from the file's types" err.txt || { cat err.txt; bad "$m: did not pick --quant $want"; }
	copied=$(sed -n 's/.*: \([0-9]*\) of \([0-9]*\) block-quantized matrices copied.*/\1 \2/p' err.txt)
	echo "$m: matrices copied as stored, of those in block types: $copied"
	if [ $m != q4_mix ] && [ "${copied% *}" != "${copied#* }" ]; then
		bad "$m: not every Q8_0 matrix was copied ($copied)"
	fi
	# the container's q8_0 / q4_0 matrices hold the GGUF's own blocks; for
	# q8_0_odd (no block reaches |q| = 127) requantizing would change them
	"$PY" "$GEN" blocks "$m.gguf" "$m.coli" || bad "$m: blocks not copied as stored"
	logits "$m.coli" "$(ids $fx)" "$m.f32"
	agree=$("$PY" "$GEN" top1 "hf-$fx-bf16.f32" "$m.f32" 1024) || bad "$m: comparing logits"
	echo "$m vs the bf16 container: top-1 differs at $agree"
	if [ $m = q8_0 ] && [ "${agree%% *}" != 0 ]; then
		bad "q8_0: top-1 differs from bf16 (fixture_logits.c allows < 1%: 0 of 51 here)"
	fi
	# the gguf package rounds Q8_0 as coli does (cpu/cpu.h): the copied
	# blocks are those the checkpoint's q8 conversion makes, so the logits
	# are the same by construction
	if [ $m = q8_0 ]; then
		cmp -s "$m.f32" "hf-$fx-q8.f32" || bad "q8_0: logits differ from the checkpoint's q8 container's"
	fi
done

# split: the q8_0 model at 16 tensors a file (3 parts, gguf-split's names
# and split.* keys) converts from its first part to the same container
"$PY" "$GEN" write "$FIX/$fx" sp.gguf q8_0 16 || bad "writing the split GGUF"
sp=sp-00001-of-00003.gguf
if "$COLI" convert $sp -o sp.coli --progress 2>err.txt && cmp -s sp.coli q8_0.coli; then
	echo "ok: a 3-part split converts to the single file's container, byte for byte"
else
	cat err.txt; bad "split: $sp did not convert to q8_0.coli's bytes"
fi
# --progress: the bar is drawn, and its last state is full (every part's
# bytes counted once: done == total)
last=$(tr '\r' '\n' <err.txt | grep '^\[' | tail -n 1)
case "$last" in
"[##############################]"*MB/s) echo "ok: progress while converting the split: $last" ;;
*) bad "split: --progress drew no full bar (last: '$last')" ;;
esac
mv sp-00003-of-00003.gguf part3
cp sp-00002-of-00003.gguf sp-00003-of-00003.gguf
for c in "sp-00002-of-00003.gguf:give the first part (-00001-of-00003.gguf)" \
	"$sp:not part 3 of 3 of $sp"; do
	f=${c%%:*} why=${c#*:}
	"$COLI" convert "$f" -o out.coli --quiet >msg.txt 2>&1
	rc=$?
	[ $rc = 1 ] && grep -qF "$why" msg.txt || bad "$f: exit $rc, wanted 1 with '$why'; got: $(cat msg.txt)"
done
rm sp-00003-of-00003.gguf

# RoPE scaling: tests/fixtures/long's qwen3_moe configs (YaRN in the Hub's
# rope_scaling, linear in rope_parameters) beside qwen3_moe's weights, written to
# GGUF's {arch}.rope.scaling.* keys as llama.cpp's converter writes them: the
# container's config reads the same scaling and the logits equal the checkpoint
# directory's, bit for bit
for lf in qwen3_moe_yarn qwen3_moe_linear; do
	mkdir -p "$lf"
	for f in model.safetensors tokenizer.json tokenizer_config.json generation_config.json; do
		ln -sf "$FIX/qwen3_moe/$f" "$lf/$f"
	done
	cp "$FIX/long/$lf/config.json" "$lf/config.json"
	"$PY" "$GEN" write "$lf" "$lf.gguf" bf16 || { bad "$lf: writing the GGUF"; continue; }
	"$COLI" convert "$lf" -o "hf-$lf.coli" --quant bf16 --quiet 2>err.txt || { cat err.txt; bad "$lf: convert"; }
	"$COLI" convert "$lf.gguf" -o "gg-$lf.coli" --quant bf16 --quiet 2>err.txt ||
		{ cat err.txt; bad "$lf: coli convert $lf.gguf"; continue; }
	"$COLI" inspect "hf-$lf.coli" | grep -E '^(rope scaling|context)' >hf-rope.txt
	"$COLI" inspect "gg-$lf.coli" | grep -E '^(rope scaling|context)' >gg-rope.txt
	if [ -s hf-rope.txt ] && grep -q "^rope scaling" hf-rope.txt && cmp -s hf-rope.txt gg-rope.txt; then
		echo "ok: $lf: the GGUF's rope scaling reads as the checkpoint's: $(tr '\n' ' ' <gg-rope.txt)"
	else
		bad "$lf: rope scaling differs: checkpoint '$(cat hf-rope.txt)', GGUF '$(cat gg-rope.txt)'"
	fi
	logits "hf-$lf.coli" "$(ids qwen3_moe)" "hf-$lf.f32"
	logits "gg-$lf.coli" "$(ids qwen3_moe)" "gg-$lf.f32"
	cmp -s "hf-$lf.f32" "gg-$lf.f32" && echo "ok: $lf: GGUF and checkpoint logits equal, bit for bit" ||
		bad "$lf: the GGUF's logits differ from the checkpoint's"
	cmp -s "hf-$lf.f32" "hf-qwen3_moe-bf16.f32" && bad "$lf: the scaling changes no logit"
done
"$PY" "$GEN" write "$FIX/qwen3_moe" longrope.gguf longrope || bad "writing longrope.gguf"

"$PY" "$GEN" write "$FIX/$fx" llama.gguf llama || bad "writing llama.gguf"
"$PY" "$GEN" write "$FIX/$fx" missing.gguf missing || bad "writing missing.gguf"
"$PY" "$GEN" write "$FIX/$fx" few_exps.gguf few_exps || bad "writing few_exps.gguf"
"$PY" "$GEN" write "$FIX/$fx" bad_ffn.gguf bad_ffn || bad "writing bad_ffn.gguf"
head -c 100000 "$fx.gguf" >trunc.gguf
for c in "llama.gguf:without llama.expert_count is a dense model" "trunc.gguf:is outside the file" \
	"longrope.gguf:qwen3moe.rope.scaling.type 'longrope' is not supported" \
	"$sp:part 3 of 3, sp-00003-of-00003.gguf, is missing" \
	"missing.gguf:missing tensor blk.1.attn_k.weight (read as model.layers.1.self_attn.k_proj.weight" \
	"few_exps.gguf:missing tensor blk.0.ffn_up_exps.weight, expert 7 (read as model.layers.0.mlp.experts.7.up_proj.weight" \
	"bad_ffn.gguf:tensor 'blk.0.ffn_gate_exps.weight, expert 0 (read as model.layers.0.mlp.experts.0.gate_proj.weight)' has shape [32, 64], but the GGUF's metadata implies [64, 64]"; do
	f=${c%%:*} why=${c#*:}
	"$COLI" convert "$f" -o out.coli --quiet >msg.txt 2>&1
	rc=$?
	if [ $rc != 1 ] || ! grep -qF "$why" msg.txt; then
		bad "$f: exit $rc, wanted 1 with '$why'; got: $(cat msg.txt)"
	fi
	if ls out.coli* >/dev/null 2>&1; then
		bad "$f: refused, but left $(ls out.coli*)"
		rm -f out.coli*
	fi
done
echo "ok: a dense llama, a truncated file, a longrope GGUF, a split missing a part, a part"
echo "    not the first, a part out of place, a missing tensor, a missing expert"
echo "    and a shape the metadata contradicts refused (tensors by their GGUF"
echo "    names), nothing written"
exit $fail
