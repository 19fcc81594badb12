#!/bin/bash
# tools/ref/dense_dev_diff.sh — the GPU's dense part against the CPU's, by
# weight type, path and cache (GPU host): a checkpoint (default the demo
# model) is converted under each of QUANTS, a text's teacher-forced logits
# (`coli logits`) are taken with --gpu off and then on GPU 0 (DEV) with the
# dense part there in each of these ways:
#
#   gpu      the default placement
#   ub8      --ubatch 8: prompt chunks of 8 tokens (the GEMV jobs, not the
#            tensor-core GEMM of 16 tokens or more)
#   ub1      --ubatch 1: one token a step (decode's kernels)
#   xcpu     --vram-gb 0: every expert on the CPU, only the dense part on GPU
#   f32      --kv-type f32 on both sides (no bf16 rounding of the cache)
#
# and, as the control, `--dense cpu` (experts on GPU 0, which must be equal).
# Lines per model and way: max |Δ| over the largest |logit|, the positions
# whose top-1 differs; position 0's |Δ|, the positions over 1e-3 (and the
# first), the median, and the text's mean NLL against the CPU's; and where
# the routes (ROUTE_TRACE) first differ. Asserts nothing; exit 1 only when a
# step fails.
#
# A fault in a kernel shows at most positions, position 0 included, and in
# the NLL. The dense part is exempt from the placement invariant
# (docs/engine.md): rounding of its own (attention's order, the router) can
# move an activation's int8 step or a near-tie of the top-k routing, which
# then shows as a jump from one position on, starting where the routes
# first differ, with the NLL about unchanged.
#
# What the lines tell apart: bf16 against the block types (the dense GEMM
# and GEMV of GGUF's types, ptx/dense/gpu_dense.c dense_kq); gpu against
# f32 (the tensor-core attention of the bf16 cache, ptx/attn/gpu_attn.c
# attention_tc, which no random fixture reaches: their head_dim is 16 or
# 32, the demo model's 64; the f32 cache takes the other kernels); gpu
# against ub8 and ub1 (prefill's tiles and the GEMM against decode's path).
# The default text is about 111 tokens of the demo's: prompts of 64 tokens
# or more take the whole-prompt attention (AP_MIN_T).
#
# Usage: tools/ref/dense_dev_diff.sh OUT_DIR
# Environment: COLI (default build/coli), HF (default models/demo), TEXT_FILE
#   (default HF/held_out.txt; its first 400 bytes), QUANTS (default "bf16 q8
#   q4 q4k q4k:none q5k q6k"; q4k:none is q4k with --quant-mix none),
#   PYTHON (python3 with numpy), DEV (default 0: the device's --gpu; sim
#   checks the script where there is no GPU: every line equal).
set -u
[ $# -eq 1 ] || {
	sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
}
COLI=$(realpath "${COLI:-build/coli}") HF=$(realpath "${HF:-models/demo}")
TEXT_FILE=$(realpath "${TEXT_FILE:-$HF/held_out.txt}") PYTHON=${PYTHON:-python3}
QUANTS=${QUANTS:-bf16 q8 q4 q4k q4k:none q5k q6k} DEV=${DEV:-0}
mkdir -p "$1" && cd "$1" || exit 1
text=$(head -c 400 "$TEXT_FILE")
# the comparer: vocabulary from the model (coli inspect), logits [n][V]
cat >cmp.py <<'PY'
import sys, numpy as np
V = int(sys.argv[1]); ids = np.loadtxt(sys.argv[2], dtype=np.int64, ndmin=1)
ref = np.fromfile(sys.argv[3], np.float32).reshape(-1, V)
scale = np.abs(ref).max()
def nll(l):  # mean -log p(next token) over the text, in nats
    l = l[:len(ids) - 1].astype(np.float64); m = l.max(1, keepdims=True)
    lp = l - m - np.log(np.exp(l - m).sum(1, keepdims=True))
    return -lp[np.arange(len(lp)), ids[1:len(lp) + 1]].mean()
n0 = nll(ref)
for f in sys.argv[4:]:
    try: o = np.fromfile(f, np.float32)
    except OSError: print(f"  {f:28s} missing"); continue
    if o.size != ref.size:
        print(f"  {f:28s} {o.size} values, the CPU's {ref.size}"); continue
    o = o.reshape(-1, V); d = np.abs(o - ref); pos = d.max(1) / scale
    top = int((o.argmax(1) != ref.argmax(1)).sum()); over = np.nonzero(pos > 1e-3)[0]
    print(f"  {f:28s} max |d| {d.max() / scale:.3g} of max|logit|, mean {d.mean() / scale:.3g}, "
          f"top-1 differs at {top} of {ref.shape[0]}" + ("  (equal)" if not d.any() else ""))
    print(f"  {'':28s} position 0: {pos[0]:.3g}; over 1e-3 at {len(over)} positions"
          + (f" from {over[0]}" if len(over) else "") + f"; median {np.median(pos):.3g}; "
          f"NLL {nll(o):.5f} vs {n0:.5f}")
PY
fails=0
for q in $QUANTS; do
	m=${q/:/-}
	quant=${q%%:*} mix=
	[ "$q" != "$quant" ] && mix="--quant-mix ${q#*:}"
	"$COLI" convert "$HF" --quant "$quant" $mix -o "$m.coli" >"convert-$m.log" 2>&1 || {
		echo "$m: coli convert failed: $(tail -1 "convert-$m.log")"
		fails=$((fails + 1))
		continue
	}
	V=$("$COLI" inspect "$m.coli" | sed -n 's/.*vocab \([0-9]*\).*/\1/p')
	"$COLI" tokenize -m "$m.coli" "$text" | tr ' ' '\n' >"$m.ids"
	L() { # NAME ARGS...: teacher-forced logits, and the routes taken
		n=$1
		shift
		ROUTE_TRACE="$m-$n.routes" "$COLI" logits -m "$m.coli" --text "$text" \
			-o "$m-$n.l" "$@" 2>>"$m.err" ||
			echo "  $m $n: coli logits failed: $(tail -1 "$m.err")"
	}
	L cpu --gpu off
	L cpu-f32 --gpu off --kv-type f32
	L gpu --gpu $DEV
	L ub8 --gpu $DEV --ubatch 8
	L ub1 --gpu $DEV --ubatch 1
	L xcpu --gpu $DEV --vram-gb 0
	L dcpu --gpu $DEV --dense cpu
	L f32 --gpu $DEV --kv-type f32
	echo "$m (vocab $V), against --gpu off:"
	"$PYTHON" cmp.py "$V" "$m.ids" "$m-cpu.l" "$m-gpu.l" "$m-ub8.l" "$m-ub1.l" "$m-xcpu.l" \
		"$m-dcpu.l"
	"$PYTHON" cmp.py "$V" "$m.ids" "$m-cpu-f32.l" "$m-f32.l"
	for n in gpu xcpu f32; do # where the first route differs, if one does
		r=$([ $n = f32 ] && echo cpu-f32 || echo cpu)
		echo "  routes $n: $("$COLI" trace-diff "$m-$r.routes" "$m-$n.routes" 2>&1 | head -1)"
	done
done
exit $((fails > 0))
