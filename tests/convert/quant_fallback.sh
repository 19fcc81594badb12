#!/bin/sh
# tests/convert/quant_fallback.sh — a checkpoint with matrices whose columns
# are not a multiple of 32 converts under bf16, q8 and q4: under q8/q4 those
# matrices (an expert layer whole) are kept as bf16 and one line names them
# (core/convert/convert.c mat_dtype). The container runs: `coli logits` (one
# batch, and one token a forward: the decode path) and `coli generate` give
# the same bits on the CPU and on the simulated device, which keeps on the
# CPU what the device kernels cannot take (core/engine.c devices_place) and
# says so. A checkpoint where every matrix falls back gives under q8/q4 the
# logits of its bf16 conversion, bit for bit; one where only attn_o does
# does not (the other matrices are quantized).
#
#   hd   qwen3_moe, head_dim 20: attn_o [64 x 80] falls back; the dense part
#        stays on the CPU, the experts go to the device
#   mi   qwen2_moe, moe_intermediate_size 40: the expert layers fall back
#        (their down is [64 x 40]); everything runs on the CPU
#   hid  olmoe, hidden_size 80 (head_dim 20): every matrix reading the hidden state falls
#        back (tok_embd, lm_head, q/k/v/o, the experts); CPU only
#   all  qwen3_moe, hidden 48, head_dim 20, expert and dense widths 40, 72:
#        every matrix falls back
MK="python3 $ROOT/tests/convert/mkckpt.py"
command -v python3 >/dev/null || { echo "python3 needed to make checkpoints"; exit 77; }
fail=0
TEXT='def main():
    for i in range(10):
        print(i * i)'

# mk NAME ARGS...: a checkpoint with the fixtures' tokenizer (vocabulary 1024)
mk() {
	name=$1
	shift
	$MK "$name" --vocab 1024 "$@" || exit 1
	cp "$FIXTURES/qwen3_moe/tokenizer.json" "$name/" || exit 1
}
mk hd --arch qwen3_moe --head-dim 20
mk mi --arch qwen2_moe --moe-inter 40
mk hid --arch olmoe --hidden 80
mk all --arch qwen3_moe --hidden 48 --head-dim 20 --moe-inter 40 --dense-inter 72

# convert NAME QUANT FALLBACK: converts; under q8/q4 the line names FALLBACK
convert() {
	if ! "$COLI" convert "$1" -o "$1-$2.coli" --quant "$2" 2>err.txt; then
		echo "FAIL $1 $2: convert refused:"; cat err.txt; fail=1; return
	fi
	line=$(grep 'kept as bf16' err.txt)
	if [ "$2" = bf16 ]; then
		[ -z "$line" ] || { echo "FAIL $1 bf16: a fallback line: $line"; fail=1; }
	elif ! echo "$line" | grep -q "columns not a multiple of 32.* $3"; then
		echo "FAIL $1 $2: no line naming $3:"; cat err.txt; fail=1
	else
		echo "ok   $1 $2: $line"
	fi
}

# same NAME QUANT DEVMSG [DEVMSG2]: CPU and --gpu sim agree (logits batched and
# a token a forward, greedy tokens), and the sim run says DEVMSG (and DEVMSG2)
same() {
	m="$1-$2.coli" ok=1
	for g in off sim; do
		"$COLI" logits -m "$m" --text "$TEXT" -o "$g.f32" --gpu "$g" 2>"$g.err" &&
			"$COLI" logits -m "$m" --text "$TEXT" -o "$g-1.f32" --gpu "$g" --ubatch 1 \
			    2>/dev/null &&
			"$COLI" generate -m "$m" -p "$TEXT" -n 16 --gpu "$g" >"$g.txt" 2>/dev/null ||
			{ echo "FAIL $1 $2 --gpu $g: does not run:"; cat "$g.err"; fail=1; return; }
	done
	cmp -s off.f32 sim.f32 || { echo "FAIL $1 $2: logits differ, CPU vs sim"; ok=0; }
	cmp -s off.f32 off-1.f32 || { echo "FAIL $1 $2: batched vs a token a forward"; ok=0; }
	cmp -s off-1.f32 sim-1.f32 || { echo "FAIL $1 $2: decode logits differ, CPU vs sim"; ok=0; }
	cmp -s off.txt sim.txt || { echo "FAIL $1 $2: generated text differs, CPU vs sim"; ok=0; }
	[ -s off.txt ] || { echo "FAIL $1 $2: generated nothing"; ok=0; }
	for p in "$3" "${4:-$3}"; do
		grep -q "$p" sim.err || { echo "FAIL $1 $2: sim run lacks /$p/:"; cat sim.err; ok=0; }
	done
	cp off.f32 "$1-$2.f32"
	if [ $ok = 1 ]; then
		echo "ok   $1 $2: CPU = sim ($(sha256sum <off.f32 | cut -c1-16))"
	else
		fail=1
	fi
}

for q in bf16 q8 q4; do
	convert hd $q 'blk.0.attn_o blk.1.attn_o blk.2.attn_o$'
	convert mi $q 'blk.0.experts blk.2.experts$'
	convert hid $q 'tok_embd lm_head blk.0.attn_q'
	convert all $q 'tok_embd lm_head'
done
[ $fail = 0 ] || exit 1

# what the container holds: attn_o bf16 beside q4 attn_q; the experts bf16
"$COLI" inspect -v hd-q4.coli >insp.txt 2>&1
grep -Eq '^blk\.0\.attn_o +bf16 ' insp.txt && grep -Eq '^blk\.0\.attn_q +q4_0 ' insp.txt ||
	{ echo "FAIL hd-q4: attn_o not bf16 or attn_q not q4_0:"; grep 'blk.0' insp.txt; fail=1; }
"$COLI" inspect mi-q8.coli >insp.txt 2>&1
grep -Eq '^ +0 +4 +bf16 +bf16 +64 +40 ' insp.txt ||
	{ echo "FAIL mi-q8: expert layer 0 not bf16:"; cat insp.txt; fail=1; }

for q in bf16 q8 q4; do
	same hd $q 'blk.0.attn_o has 80 columns.*dense part runs on the CPU' 'experts resident'
	same mi $q 'experts of layer 0 are 40 x 64.*running on the CPU'
	same hid $q 'experts of layer 0 are 32 x 80.*running on the CPU'
	same all $q 'running on the CPU'
done

for q in q8 q4; do
	if cmp -s all-bf16.f32 all-$q.f32; then
		echo "ok   all $q: every matrix bf16, the logits of the bf16 conversion"
	else
		echo "FAIL all $q: logits differ from the bf16 conversion's"; fail=1
	fi
	if cmp -s hd-bf16.f32 hd-$q.f32; then
		echo "FAIL hd $q: logits equal to bf16 (were the matrices quantized?)"; fail=1
	fi
done
exit $fail
