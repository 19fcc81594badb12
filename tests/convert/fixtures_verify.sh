#!/bin/sh
# tests/convert/fixtures_verify.sh — every fixture ($FIXTURES/*/config.json)
# converts with `coli convert` in bf16, q8 and q4, and `coli verify` passes
# (a matrix whose columns are not multiples of 32 is kept as bf16 under q8/q4:
# tests/convert/quant_fallback.sh).
n=0 fail=0
for cfg in "$FIXTURES"/*/config.json; do
	[ -f "$cfg" ] || continue
	d=$(dirname "$cfg") name=$(basename "$(dirname "$cfg")")
	for q in bf16 q8 q4; do
		out="$name-$q.coli"
		if "$COLI" convert "$d" -o "$out" --quant $q 2>err.txt; then
			if "$COLI" verify "$out" >/dev/null 2>&1; then
				echo "ok   $name $q"
			else
				echo "FAIL $name $q: verify"; "$COLI" verify "$out"; fail=1
			fi
		else
			echo "FAIL $name $q:"; cat err.txt; fail=1
		fi
		rm -f "$out"
		n=$((n + 1))
	done
done
[ $n -eq 0 ] && { echo "no fixtures under $FIXTURES"; exit 77; }
exit $fail
