#!/bin/sh
# tests/convert/gguf_kquant.sh — a GGUF of K-quants and the other block
# types coli keeps as stored (cpu/kquant/kquant.c), converted without --quant: a
# tiny qwen3moe with rows of whole 256-blocks (tests/convert/mkckpt.py,
# hidden 256, the fixture's tokenizer) written by tests/convert/
# gguf_kquant.py with the `gguf` package (venv: tests/io/gguf_venv):
#
#   kq      Q4_K gate/up + Q6_K down experts (Q4_K_M's mix) in layer 0, Q5_K
#           + Q2_K in layer 2, every other type in the dense matrices: every
#           matrix is copied (the stderr count; the container's bytes equal
#           the GGUF's, expert by expert), the logits agree with those of the
#           same blocks dequantized by the gguf package (stored F32,
#           converted to bf16): top-1 on all but at most 1 of 51 positions,
#           mean KL < 0.01 (measured: 0 and 3.4e-4); --gpu sim runs all of it
#           on the device (ptx/expert/kquant.cu's GEMVs, a Q6_K down beside Q4_K gate
#           and up, block-type embeddings), the same bits
#   dense   the experts Q8_0, the dense part block types: --gpu sim runs
#           both on the device, the same bits as the CPU
#   mixgu   layer 2's gate Q5_K and up Q4_K: that layer's gate and up become
#           the config's q8_0 (dequantized), its Q2_K down is kept (inspect's
#           row; the count: 8 of 41 converted; the kept blocks equal); the
#           logits agree with its blocks' dequantization (gate and up requantized
#           to q8_0 besides: top-1 at most 3 of 51 apart, measured 2; KL < 0.01,
#           measured 3.5e-4)
#   mixdown the experts' gate/up Q4_0 and down Q8_0, the rest Q8_0: kept as
#           stored (a q4_0 layer with a q8_0 down); --gpu sim runs all of it on
#           the device (down is a launch of its own), the same bits
#   mixdense the experts and attention Q4_0, embeddings and the dense MLP
#           Q8_0, all kept: q8_0 and q4_0 dense matrices side by side run on
#           the simulated device (dense part and experts), the CPU's bits
#   iq      IQ4_NL and IQ2_XXS tensors: refused naming both and their types,
#           nothing written
set -u
GEN="$ROOT/tests/convert/gguf_kquant.py"
COLI="$ROOT/$BUILD/coli"
FIX="$ROOT/tests/fixtures"

. "$ROOT/tests/io/gguf_venv" # sets PY

fail=0
bad() { echo "FAIL: $*"; fail=1; }
IDS=$(tr ' ' ',' <"$FIX/qwen3_moe/ref/ids.txt" | tr -d '\n')
logits() { # MODEL OUT [flags]: stderr kept in OUT.err
	m=$1 o=$2
	shift 2
	"$COLI" logits -m "$m" --ids "$IDS" -o "$o" "$@" 2>"$o.err" || { cat "$o.err"; bad "coli logits -m $m $*"; }
}

python3 "$ROOT/tests/convert/mkckpt.py" hf --arch qwen3_moe --hidden 256 --head-dim 64 \
	--moe-inter 256 --dense-inter 256 --vocab 1024 || { echo "FAIL: mkckpt"; exit 1; }
cp "$FIX/qwen3_moe/tokenizer.json" "$FIX/qwen3_moe/tokenizer_config.json" hf/

for m in kq ref dense iq mixgu mixgu-ref mixdown mixdense; do
	"$PY" "$GEN" write hf $m.gguf $m || { echo "FAIL: writing $m.gguf"; exit 1; }
done

# kq: every block kept, the values the gguf package's
"$COLI" convert kq.gguf -o kq.coli --quiet 2>err.txt || { cat err.txt; bad "kq: coli convert"; }
copied=$(sed -n 's/.*: \([0-9]*\) of \([0-9]*\) block-quantized matrices copied.*/\1 \2/p' err.txt)
echo "kq: matrices copied as stored, of those in block types: $copied"
[ -n "$copied" ] && [ "${copied% *}" = "${copied#* }" ] || { cat err.txt; bad "kq: not every matrix copied ($copied)"; }
"$PY" "$GEN" blocks kq.gguf kq.coli || bad "kq: blocks not copied as stored"
"$COLI" inspect kq.coli | grep -Eq '^ +0 +4 +q4_k +q6_k +256 +256 ' ||
	{ "$COLI" inspect kq.coli; bad "kq: expert layer 0 is not q4_k with a q6_k down"; }
"$COLI" convert ref.gguf -o ref.coli --quant bf16 --quiet 2>err.txt || { cat err.txt; bad "ref: coli convert"; }
logits kq.coli kq.f32
logits ref.coli ref.f32
"$PY" "$GEN" compare ref.f32 kq.f32 1024 1 0.01 || bad "kq: logits far from the dequantized weights'"
logits kq.coli kq-sim.f32 --gpu sim
cmp -s kq.f32 kq-sim.f32 || bad "kq: --gpu sim gives other logits than the CPU"
grep -q "dense part and KV cache on sim" kq-sim.f32.err && ! grep -q "on the CPU" kq-sim.f32.err ||
	{ cat kq-sim.f32.err; bad "kq: not placed on the simulated device"; }

# dense: block types only in the dense part
"$COLI" convert dense.gguf -o dense.coli --quiet 2>err.txt || { cat err.txt; bad "dense: coli convert"; }
logits dense.coli dense.f32
logits dense.coli dense-sim.f32 --gpu sim --verbose
cmp -s dense.f32 dense-sim.f32 || bad "dense: --gpu sim gives other logits than the CPU"
grep -q "dense part and KV cache on sim" dense-sim.f32.err && ! grep -q "on the CPU" dense-sim.f32.err ||
	{ cat dense-sim.f32.err; bad "dense: not placed on the simulated device"; }

# mixgu: gate and up of different types: converted; down kept
"$COLI" convert mixgu.gguf -o mixgu.coli --quiet 2>err.txt || { cat err.txt; bad "mixgu: coli convert"; }
grep -q ": 33 of 41 block-quantized matrices copied as stored" err.txt ||
	{ cat err.txt; bad "mixgu: not 33 of 41 copied"; }
"$COLI" inspect mixgu.coli | grep -Eq '^ +2 +4 +q8_0 +q2_k +256 +256 ' ||
	{ "$COLI" inspect mixgu.coli; bad "mixgu: expert layer 2 is not q8_0 with a q2_k down"; }
"$PY" "$GEN" blocks mixgu.gguf mixgu.coli || bad "mixgu: kept blocks not copied as stored"
"$COLI" convert mixgu-ref.gguf -o mixgu-ref.coli --quant bf16 --quiet 2>err.txt || { cat err.txt; bad "mixgu-ref: coli convert"; }
logits mixgu.coli mixgu.f32
logits mixgu-ref.coli mixgu-ref.f32
"$PY" "$GEN" compare mixgu-ref.f32 mixgu.f32 1024 3 0.01 || bad "mixgu: logits far from the dequantized weights'"

# mixdown: q8_0 and q4_0 in one expert layer: on the device
"$COLI" convert mixdown.gguf -o mixdown.coli --quiet 2>err.txt || { cat err.txt; bad "mixdown: coli convert"; }
"$COLI" inspect mixdown.coli | grep -Eq '^ +0 +4 +q4_0 +q8_0 +256 +256 ' ||
	{ "$COLI" inspect mixdown.coli; bad "mixdown: expert layer 0 is not q4_0 with a q8_0 down"; }
logits mixdown.coli mixdown.f32
logits mixdown.coli mixdown-sim.f32 --gpu sim
cmp -s mixdown.f32 mixdown-sim.f32 || bad "mixdown: --gpu sim gives other logits than the CPU"
grep -q "dense part and KV cache on sim" mixdown-sim.f32.err && ! grep -q "on the CPU" mixdown-sim.f32.err ||
	{ cat mixdown-sim.f32.err; bad "mixdown: not placed on the simulated device"; }

# mixdense: q8_0 and q4_0 dense matrices together, on the device
"$COLI" convert mixdense.gguf -o mixdense.coli --quiet 2>err.txt || { cat err.txt; bad "mixdense: coli convert"; }
logits mixdense.coli mixdense.f32
logits mixdense.coli mixdense-sim.f32 --gpu sim
cmp -s mixdense.f32 mixdense-sim.f32 || bad "mixdense: --gpu sim gives other logits than the CPU"
grep -q "dense part and KV cache on sim" mixdense-sim.f32.err && ! grep -q "on the CPU" mixdense-sim.f32.err ||
	{ cat mixdense-sim.f32.err; bad "mixdense: not placed on the simulated device"; }

# iq: refused before anything is written, naming both tensors and types
"$COLI" convert iq.gguf -o iq.coli --quiet 2>err.txt && bad "iq: converted"
grep -q "2 tensors of a type coli cannot read yet: blk.0.ffn_down_exps.weight (IQ4_NL), blk.2.attn_q.weight (IQ2_XXS)" err.txt ||
	{ cat err.txt; bad "iq: the refusal does not name the tensors and types"; }
grep -q "from the file's types" err.txt && bad "iq: a quant was picked before the refusal"
ls iq.coli* 2>/dev/null && bad "iq: output left behind"

[ $fail = 0 ] && echo "gguf k-quants ok"
exit $fail
