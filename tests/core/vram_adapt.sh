#!/bin/sh
# tests/core/vram_adapt.sh — the VRAM tier adapts between tokens without
# changing them: the trained demo model (skewed routing) on the simulated
# device with room for a fifth of its experts and no usage file, 300 greedy
# tokens; experts must be swapped into VRAM along the way (the profile
# counts them) and the text must equal the CPU's, byte for byte. Again with
# CUDA_RELEASE_HOST=1 (resident experts' host copies dropped): the experts a
# swap sends back to the host must be read back into RAM in the background
# (counted), the text still the CPU's.
set -u
"$COLI" convert "$ROOT/models/demo" -o demo.coli --quant q8 >/dev/null 2>&1 || { echo "convert failed"; exit 1; }
"$COLI" generate -m demo.coli -p "def read_file(path):" -n 300 --gpu off --usage off >cpu.txt 2>/dev/null || exit 1
for rel in 0 1; do
	CUDA_RELEASE_HOST=$rel "$COLI" generate -m demo.coli -p "def read_file(path):" -n 300 \
		--gpu sim --vram-gb 0.003 --stream off --usage off --profile >sim.txt 2>err.txt ||
		{ cat err.txt; exit 1; }
	swaps=$(sed -n 's/.* \([0-9]*\) VRAM swaps.*/\1/p' err.txt)
	back=$(sed -n 's/.* VRAM swaps (\([0-9]*\) read back into RAM).*/\1/p' err.txt)
	echo "CUDA_RELEASE_HOST=$rel: VRAM swaps during 300 tokens: ${swaps:-none}, read back into RAM: ${back:-none}"
	[ -n "$swaps" ] && [ "$swaps" -gt 0 ] || { echo "FAIL: no expert was swapped in"; exit 1; }
	[ -n "$back" ] && [ "$back" -le "$swaps" ] || { echo "FAIL: read-backs not counted"; exit 1; }
	[ "$rel" = 0 ] || [ "$back" -gt 0 ] ||
		{ echo "FAIL: no displaced expert was read back into RAM"; exit 1; }
	cmp -s cpu.txt sim.txt || { echo "FAIL: text differs from the CPU's"; exit 1; }
done
echo "text identical to the CPU's"
