#!/bin/sh
# make run: convert the bundled demo model on first use, then generate.
# Usage: tools/run_demo.sh BUILD HF_DIR OUT.coli PROMPT
set -e
BUILD=$1 HF=$2 OUT=$3 PROMPT=$4
if [ ! -f "$HF/config.json" ]; then
	echo "make run: no demo checkpoint at $HF (config.json missing)" >&2
	exit 1
fi
if [ ! -f "$OUT" ] || [ -n "$(find "$HF" -newer "$OUT" -type f | head -n 1)" ]; then
	echo "make run: converting $HF -> $OUT (first use)" >&2
	"$BUILD/coli" convert "$HF" -o "$OUT" --quant q8
fi
echo "make run: coli generate -m $OUT -p '$PROMPT' -n 64" >&2
echo "----" >&2
stats=$(mktemp)
trap 'rm -f "$stats"' EXIT
printf '%s' "$PROMPT"
rc=0
"$BUILD/coli" generate -m "$OUT" -p "$PROMPT" -n 64 2>"$stats" || rc=$?
printf '\n----\n' >&2
cat "$stats" >&2
exit $rc
