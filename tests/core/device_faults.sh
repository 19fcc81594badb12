#!/bin/sh
# tests/core/device_faults.sh — a device that cannot be set up at open gives a
# clear message and a CPU path, never a crash or another token (issue #6's
# faults at start, and a device of two holding dense layers failing mid-run;
# other failures mid-run are tests/core/overlap_release and placement):
#   - out of device memory at start (COLI_GPU_FAIL_AT=alloc: allocations
#     from the Nth on fail), with the simulated device: at the dense part, at
#     the experts' buffers, at the routing tables after some experts were
#     placed (and their host copies dropped: CUDA_RELEASE_HOST=1): each run
#     says so, runs on the CPU and prints the CPU's text byte for byte;
#   - on a GPU host, the same with the real device, and a PTX JIT failure
#     (COLI_PTX_FAIL): of the compute_90 build (the compute_80 one is taken,
#     the same text as the normal GPU run) and of both (the GPU is unusable:
#     the CPU's text).
set -u
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
"$COLI" convert "$FIXTURES/qwen3_moe" -o m.coli --quant q8 >/dev/null 2>&1 || { echo "convert failed"; exit 1; }
gen() { "$COLI" generate -m m.coli -p "def fibonacci(n):" -n 24 --usage off "$@"; }
gen --gpu off >cpu.txt 2>err.txt || { cat err.txt; exit 1; }

# N: where the allocations start failing; what the message must say ("" : no fallback)
for c in "0:cannot hold the dense part" "60:device sim:0" "75:device sim:0" "1000:"; do
	n=${c%%:*} want=${c#*:}
	for rel in 0 1; do
		what="sim, allocations fail from the ${n}th, CUDA_RELEASE_HOST=$rel"
		COLI_GPU_FAIL_AFTER=$n COLI_GPU_FAIL_AT=alloc CUDA_RELEASE_HOST=$rel \
			gen --gpu sim >out.txt 2>err.txt
		rc=$?
		if [ $rc -ne 0 ]; then
			bad "$what: exit $rc"
			cat err.txt
		elif ! cmp -s cpu.txt out.txt; then
			bad "$what: the text differs from the CPU's"
		elif [ -n "$want" ] && ! grep "$want" err.txt | grep -q "running on the CPU"; then
			bad "$what: no message"
			cat err.txt
		elif [ -z "$want" ] && grep -q "running on the CPU" err.txt; then
			bad "$what: fell back without a cause"
		else
			ok "$what${want:+: $(grep 'running on the CPU' err.txt)}"
		fi
	done
done

# two simulated devices, the second out of memory at start: it is left out with one
# line, the first carries on (dense part and experts), the CPU's text; the first out
# of memory (it would hold the dense part): left out, the second takes the model over;
# split by layers, either out of memory: the other takes the whole model; both out of
# memory: both given up, the CPU's text
COLI_GPU_FAIL_AFTER=0 COLI_GPU_FAIL_AT=alloc COLI_GPU_FAIL_DEV=1 gen --gpu sim:2 --split none >out.txt 2>err.txt
[ $? -eq 0 ] && cmp -s cpu.txt out.txt && grep "sim:1" err.txt | grep -q "going on without it" &&
	grep -q "sim:0 (host memory): [1-9][0-9]* experts resident" err.txt &&
	! grep -q "running on the CPU" err.txt &&
	ok "sim:2, the second out of memory at start: $(grep 'without it' err.txt)" ||
	{ bad "sim:2, the second out of memory at start"; cat err.txt; }
for split in none layers; do
	for dev in 0 1; do
		[ $split = none ] && [ $dev = 1 ] && continue # the case above
		other=$((1 - dev))
		COLI_GPU_FAIL_AFTER=0 COLI_GPU_FAIL_AT=alloc COLI_GPU_FAIL_DEV=$dev gen --gpu sim:2 \
			--split $split >out.txt 2>err.txt
		[ $? -eq 0 ] && cmp -s cpu.txt out.txt &&
			grep "sim:$dev" err.txt | grep -q "dense part.*going on without it" &&
			grep -q "dense part and KV cache on sim:$other" err.txt &&
			grep -q "sim:$other (host memory): [1-9][0-9]* experts resident" err.txt &&
			! grep -q "running on the CPU" err.txt &&
			ok "sim:2 --split $split, sim:$dev out of memory at start: $(grep 'without it' err.txt)" ||
			{ bad "sim:2 --split $split, sim:$dev out of memory at start"; cat err.txt; }
	done
done
COLI_GPU_FAIL_AFTER=0 COLI_GPU_FAIL_AT=alloc gen --gpu sim:2 --split layers >out.txt 2>err.txt
[ $? -eq 0 ] && cmp -s cpu.txt out.txt && grep -q "running on the CPU" err.txt &&
	ok "sim:2, both out of memory at start: $(grep 'running on the CPU' err.txt)" ||
	{ bad "sim:2, both out of memory at start"; cat err.txt; }
# mid-run (COLI_GPU_FAIL_AFTER ops), split by layers: the device failing takes its
# experts to the CPU and its layers' dense part to the other device, which rebuilds
# the KV cache from the tokens so far; then that one fails too: the CPU. The CPU's text.
COLI_GPU_FAIL_AFTER=300 COLI_GPU_FAIL_DEV=1 gen --gpu sim:2 --split layers >out.txt 2>err.txt
[ $? -eq 0 ] && cmp -s cpu.txt out.txt && grep -q "the dense device failed" err.txt &&
	grep -q "dense part and KV cache on sim:0" err.txt && ! grep -q "on the CPU from now on" err.txt &&
	ok "sim:2 --split layers, sim:1 fails mid-run: the dense part moves to sim:0" ||
	{ bad "sim:2 --split layers, sim:1 fails mid-run"; cat err.txt; }
COLI_GPU_FAIL_AFTER=300 gen --gpu sim:2 --split layers >out.txt 2>err.txt
[ $? -eq 0 ] && cmp -s cpu.txt out.txt && [ "$(grep -c 'the dense device failed' err.txt)" -eq 2 ] &&
	grep -q "on the CPU from now on: no device left" err.txt &&
	ok "sim:2 --split layers, both fail mid-run: $(grep 'from now on' err.txt)" ||
	{ bad "sim:2 --split layers, both fail mid-run"; cat err.txt; }
gen --gpu 0,0 >out.txt 2>err.txt
[ $? -ne 0 ] && grep -q "a list of distinct GPU ordinals" err.txt &&
	ok "--gpu 0,0 refused: $(cat err.txt)" || { bad "--gpu 0,0"; cat err.txt; }
gen --gpu sim:0 >out.txt 2>err.txt
[ $? -ne 0 ] && grep -q "sim:N (N 1..8)" err.txt &&
	ok "--gpu sim:0 refused: $(cat err.txt)" || { bad "--gpu sim:0"; cat err.txt; }

# the real device, when there is one
gen --gpu auto >gpu.txt 2>err.txt || { cat err.txt; exit 1; }
if ! grep -q "on cuda:" err.txt; then
	[ $fail -eq 0 ] || exit 1
	echo "the GPU half skipped: no usable GPU ($(grep -o 'no GPU.*' err.txt | head -1))"
	exit 0
fi
COLI_GPU_FAIL_AFTER=0 COLI_GPU_FAIL_AT=alloc gen --gpu 0 >out.txt 2>err.txt
[ $? -eq 0 ] && cmp -s cpu.txt out.txt && grep -q "running on the CPU" err.txt &&
	ok "cuda:0 out of memory at start: $(grep 'running on the CPU' err.txt)" ||
	{ bad "cuda:0 out of memory at start"; cat err.txt; }
COLI_PTX_FAIL=90 gen --gpu 0 >out.txt 2>err.txt
[ $? -eq 0 ] && cmp -s gpu.txt out.txt && grep -q "compute_90 PTX did not load" err.txt &&
	grep -q "on cuda:" err.txt &&
	ok "compute_90 PTX refused: the compute_80 build, the same text" ||
	{ bad "compute_90 PTX refused"; cat err.txt; }
COLI_PTX_FAIL=all gen >out.txt 2>err.txt
[ $? -eq 0 ] && cmp -s cpu.txt out.txt && grep -q "unusable" err.txt &&
	ok "no PTX loads: $(grep -o 'GPU 0 unusable.\{0,80\}' err.txt)" ||
	{ bad "no PTX loads"; cat err.txt; }
exit $fail
