#!/bin/sh
# tests/core/plan_grouped.sh — a forward of 2..16 tokens with every expert
# resident is planned on the dense device, the pairs of an expert grouped
# into one job over its tokens' gathered activation rows (coli_moe_plan:
# ptx/dense/route.cu, the simulated device's twin). Those rows are int8 for
# every quantized type, GGUF's block types included (which have no scale
# plane: the gather once took them for bf16 and fed the K-quant jobs stale
# rows). The demo fixture in bf16, q8, q4 and q4k (Q4_K, Q6_K and Q5_0
# matrices), prompts of 2, 7 and 16 tokens (a short prefill, a spec-decode
# verification, a batch of sequences): the logits with every expert on the
# device, planned there and (COLI_DEV_ROUTE=0) by the host, equal byte for
# byte those of the same dense device and routing with every expert on the
# CPU (--vram-gb 0). On the simulated device that reference is the CPU's
# logits too; on GPU 0 (COLI_TEST_GPU=1) it is not: attention over a bf16
# cache runs on tensor cores there, within rounding of the CPU
# (docs/engine.md), and the host's routing path gives other bits than the
# device's.
set -u
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
devs=sim
[ "${COLI_TEST_GPU:-0}" = 1 ] && devs="$devs 0"
ids=$(cut -d' ' -f1-16 "$FIXTURES/demo/ref/ids.txt" | tr ' ' ',')
for q in bf16 q8 q4 q4k; do
	"$COLI" convert "$FIXTURES/demo" -o $q.coli --quant $q >/dev/null 2>&1 || {
		bad "convert --quant $q"
		continue
	}
	for n in 2 7 16; do
		p=$(echo "$ids" | cut -d, -f1-$n)
		"$COLI" logits -m $q.coli --gpu off --ids "$p" -o cpu.f32 >/dev/null 2>&1 ||
			{ bad "$q, $n tokens: logits on the CPU"; continue; }
		for d in $devs; do
			for route in 1 0; do
				COLI_DEV_ROUTE=$route "$COLI" logits -m $q.coli --gpu $d --vram-gb 0 --ids "$p" \
					-o ref.f32 >/dev/null 2>err.txt || { bad "$q, $n tokens, --gpu $d --vram-gb 0: $(tail -1 err.txt)"; continue; }
				if [ $d = sim ]; then
					cmp -s cpu.f32 ref.f32 && ok "$q, $n tokens, --gpu sim --vram-gb 0, COLI_DEV_ROUTE=$route: the CPU's logits" ||
						bad "$q, $n tokens, --gpu sim --vram-gb 0, COLI_DEV_ROUTE=$route: logits differ from the CPU's"
				fi
				COLI_DEV_ROUTE=$route "$COLI" logits -m $q.coli --gpu $d --ids "$p" \
					-o dev.f32 >/dev/null 2>err.txt || { bad "$q, $n tokens, --gpu $d: $(tail -1 err.txt)"; continue; }
				cmp -s ref.f32 dev.f32 && ok "$q, $n tokens, --gpu $d, COLI_DEV_ROUTE=$route: the logits of its experts on the CPU" ||
					bad "$q, $n tokens, --gpu $d, COLI_DEV_ROUTE=$route: logits differ from those of its experts on the CPU"
			done
		done
	done
done
exit $fail
