#!/bin/sh
# tests/convert/quant_kq.sh — `coli convert --quant q4k|q5k|q6k` of the demo
# model (a trained checkpoint: models/demo) with the K-quant encoders of
# cpu/kquant/kquant_enc.c:
#
#   - the dtypes land as documented: q4k's default --quant-mix writes
#     tok_embd, lm_head and every attn_v Q6_K, the other dense matrices Q4_K,
#     the experts Q4_K with a Q5_0 down (128 columns: partial 256-blocks), and
#     one stderr line names the fallbacks; --quant-mix none keeps attn_v and
#     lm_head Q4_K; q6k's downs are Q8_0; --quant-mix without q4k/q5k and
#     --quant q3k are refused;
#   - quality orders as the bits: the mean KL of each conversion's next-token
#     distributions from bf16's over the first 1,000 tokens of the held-out
#     text, q6k < q5k < q4k (default mix) < q4k (no mix) < q4 (Q4_0); printed;
#   - a K-quant container runs on the simulated device with the CPU's bits.
#
# The perplexity figures of docs/quant.md come from `coli perplexity -m M -f
# models/demo/held_out.txt` on the same conversions (80 s each on 2 cores:
# not run here).

DEMO="$ROOT/models/demo"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
. "$ROOT/tests/io/gguf_venv" # sets PY (numpy comes with the gguf package)

head -c 4000 "$DEMO/held_out.txt" >text.txt
for q in bf16 q4 q4k q5k q6k; do
	"$COLI" convert "$DEMO" -o $q.coli --quant $q --quiet 2>$q.err || { cat $q.err; bad "convert --quant $q"; }
done
"$COLI" convert "$DEMO" -o q4k-nomix.coli --quant q4k --quant-mix none --quiet 2>/dev/null ||
	bad "convert --quant q4k --quant-mix none"

grep -q "4 tensors as q5_0 (columns not a multiple of 256, which q4_k needs): blk.0.experts.down" q4k.err ||
	{ cat q4k.err; bad "q4k: the fallback line"; }
"$COLI" inspect -v q4k.coli >q4k.txt 2>&1
for want in "lm_head q6_k" "tok_embd q6_k" "blk.0.attn_v q6_k" "blk.3.attn_v q6_k" "blk.0.attn_q q4_k"; do
	n=${want% *} t=${want#* }
	grep -Eq "^ *$n +$t " q4k.txt || { grep -E "^ *$n " q4k.txt; bad "q4k: $n is not $t"; }
done
grep -Eq '^ +0 +32 +q4_k +q5_0 +256 +128 ' q4k.txt || bad "q4k: experts not q4_k with a q5_0 down"
"$COLI" inspect -v q4k-nomix.coli >nomix.txt 2>&1
grep -Eq "^ *blk.0.attn_v +q4_k " nomix.txt && grep -Eq "^ *lm_head +q4_k " nomix.txt ||
	bad "q4k --quant-mix none: attn_v / lm_head not q4_k"
"$COLI" inspect q6k.coli | grep -Eq '^ +0 +32 +q6_k +q8_0 ' || bad "q6k: experts not q6_k with a q8_0 down"
"$COLI" convert "$DEMO" -o x.coli --quant q8 --quant-mix lm_head 2>err.txt && bad "--quant-mix under q8 accepted"
grep -q "quant-mix goes with --quant q4k or q5k" err.txt || { cat err.txt; bad "--quant-mix under q8: message"; }
"$COLI" convert "$DEMO" -o x.coli --quant q3k 2>err.txt && bad "--quant q3k accepted"
grep -q "takes bf16, q8, q4, q4k, q5k or q6k" err.txt || { cat err.txt; bad "--quant q3k: message"; }
ls x.coli* >/dev/null 2>&1 && bad "a refused conversion left output"

for m in bf16 q4 q4k-nomix q4k q5k q6k; do
	"$COLI" logits -m $m.coli --text "$(cat text.txt)" -o $m.f32 --gpu off 2>/dev/null ||
		bad "coli logits -m $m.coli"
done
"$PY" - bf16.f32 q4.f32 q4k-nomix.f32 q4k.f32 q5k.f32 q6k.f32 <<'EOF' || bad "KL not ordered by bits"
import sys
import numpy as np
V = 8192
ref = np.fromfile(sys.argv[1], np.float32).reshape(-1, V).astype(np.float64)
def logp(a):
    a = a - a.max(1, keepdims=True)
    return a - np.log(np.exp(a).sum(1, keepdims=True))
lr = logp(ref)
kl = {}
for f in sys.argv[2:]:
    l = logp(np.fromfile(f, np.float32).reshape(-1, V).astype(np.float64))
    kl[f[:-4]] = float((np.exp(lr) * (lr - l)).sum(1).mean())
print("mean KL from bf16 over %d positions: %s" % (len(ref), ", ".join("%s %.5f" % kv for kv in kl.items())))
order = ["q6k", "q5k", "q4k", "q4k-nomix", "q4"]
sys.exit(0 if all(kl[a] < kl[b] for a, b in zip(order, order[1:])) else 1)
EOF

"$COLI" logits -m q4k.coli --text "$(cat text.txt)" -o q4k-sim.f32 --gpu sim 2>sim.err || { cat sim.err; bad "--gpu sim"; }
cmp -s q4k.f32 q4k-sim.f32 || bad "q4k: --gpu sim gives other logits than the CPU"
grep -q "dense part and KV cache on sim" sim.err || { cat sim.err; bad "q4k: not on the simulated device"; }

[ $fail = 0 ] && echo "K-quant conversions ok"
exit $fail
