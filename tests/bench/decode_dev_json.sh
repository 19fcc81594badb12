#!/bin/sh
# tests/bench/decode_dev_json.sh — `coli bench decode --json` with the dense
# part on the simulated device (--gpu sim), with and without --profile: the
# report is complete and consistent, and core/forward/forward_dev.c fills the
# per-phase split (attention, moe and lm_head > 0, nothing negative, the four
# phases within the forward time); with a few experts in VRAM (the host plans
# the layers) --profile's window detail times the device's expert work. No
# wall-time assertions.
set -u
command -v python3 >/dev/null || { echo "python3 not installed"; exit 77; }
"$COLI" bench make-model --shape tiny -o tiny.coli 2>/dev/null || { echo "make-model failed"; exit 1; }
"$COLI" bench decode -m tiny.coli --json --rounds 2 --tokens 4 --disk-mib 1 --read-mib 16 \
	--arms gpu=sim,gpu=sim+profile,gpu=sim+vram-gb=0.0005+profile >out.json 2>err.txt || { cat err.txt; echo "bench decode failed"; exit 1; }
grep -q "dense part and KV cache on" err.txt || { cat err.txt; echo "dense part not on the device"; exit 77; }
python3 "$ROOT/tests/bench/check_json.py" decode-dev out.json || { cat out.json; exit 1; }
exit 0
