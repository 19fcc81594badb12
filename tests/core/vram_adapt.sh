#!/bin/sh
# tests/core/vram_adapt.sh — the VRAM tier adapts between tokens without
# changing them: the trained demo model (skewed routing) on the simulated
# device with room for a fifth of its experts and no usage file, 300 greedy
# tokens; experts must be swapped into VRAM along the way (the profile
# counts them), the experts they displace read back into RAM in the background
# (placed at open, they never had a RAM copy), and the text must equal the
# CPU's, byte for byte.
set -u
"$COLI" convert "$ROOT/models/demo" -o demo.coli --quant q8 >/dev/null 2>&1 || { echo "convert failed"; exit 1; }
"$COLI" generate -m demo.coli -p "def read_file(path):" -n 300 --gpu off --usage off >cpu.txt 2>/dev/null || exit 1
"$COLI" generate -m demo.coli -p "def read_file(path):" -n 300 --gpu sim --vram-gb 0.003 \
	--stream off --usage off --profile >sim.txt 2>err.txt || { cat err.txt; exit 1; }
swaps=$(sed -n 's/.* \([0-9]*\) VRAM swaps.*/\1/p' err.txt)
echo "VRAM swaps during 300 tokens: ${swaps:-none}"
[ -n "$swaps" ] && [ "$swaps" -gt 0 ] || { echo "FAIL: no expert was swapped in"; exit 1; }
back=$(sed -n 's/.* VRAM swaps (\([0-9]*\) read back into RAM).*/\1/p' err.txt)
echo "of the experts they replaced, read back into RAM ahead of use: ${back:-none}"
[ -n "$back" ] && [ "$back" -gt 0 ] && [ "$back" -le "$swaps" ] ||
	{ echo "FAIL: no displaced expert was read back into RAM"; exit 1; }
cmp -s cpu.txt sim.txt || { echo "FAIL: text differs from the CPU's"; exit 1; }
echo "text identical to the CPU's"
