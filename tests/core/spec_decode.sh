#!/bin/sh
# tests/core/spec_decode.sh — speculative decoding from n-gram drafts
# (core/spec.c) is lossless: `coli generate` greedy with --spec ngram prints
# the same text as --spec off, byte for byte, on the demo model (q8 and bf16
# conversions) for a prompt that repeats itself (the first 3,000 bytes of
# the held-out text: drafts get accepted) and one that does not (a random
# token soup: few drafts), on the CPU and on the simulated device (sim, and
# sim:2 with the layers split); and its stats line shows drafts were
# verified and some accepted where the text repeats. A sampled generation
# (temperature 0.8) never drafts. When a GPU is present (COLI_TEST_GPU=1), the
# same comparisons run on GPU 0.

fail=0
bad() { echo "FAIL: $*"; fail=1; }

for q in q8 bf16; do
	"$COLI" convert "$ROOT/models/demo" -o demo-$q.coli --quant $q >/dev/null 2>&1 ||
		{ echo "FAIL: convert $q"; exit 1; }
done
head -c 3000 "$ROOT/models/demo/held_out.txt" >rep.txt
# a token soup: words of the held-out text in a seeded shuffle
tr -s ' \n' '\n\n' <"$ROOT/models/demo/held_out.txt" | head -n 400 |
	awk 'BEGIN { srand(7) } { print rand() "\t" $0 }' | sort | cut -f2 | tr '\n' ' ' >soup.txt

devs="off sim sim:2"
[ "${COLI_TEST_GPU:-0}" = 1 ] && devs="$devs 0"
for q in q8 bf16; do
	for p in rep soup; do
		for g in $devs; do
			for sp in off ngram; do
				"$COLI" generate -m demo-$q.coli -p "$(cat $p.txt)" -n 120 --gpu $g \
					--spec $sp --usage off >$sp.out 2>$sp.err || { cat $sp.err; bad "$q $p $g $sp: generate"; }
			done
			if cmp -s off.out ngram.out; then
				echo "ok: $q $p --gpu $g: --spec ngram prints --spec off's text ($(grep -o '[0-9]* of [0-9]* draft tokens accepted' ngram.err || echo 'no drafts'))"
			else
				bad "$q $p --gpu $g: --spec ngram changed the text"
			fi
			grep -q "spec ngram" off.err && bad "$q $p $g: --spec off drafted"
			if [ $p = rep ] && [ $q = q8 ] && [ $g = off ]; then
				n=$(sed -n 's/.*spec ngram: \([0-9]*\) of .*/\1/p' ngram.err)
				[ "${n:-0}" -gt 0 ] || { cat ngram.err; bad "no draft accepted on repeating text"; }
			fi
		done
	done
done
"$COLI" generate -m demo-q8.coli -p "$(cat rep.txt)" -n 40 --gpu off --temperature 0.8 \
	--seed 3 --usage off >t.out 2>t.err || { cat t.err; bad "sampled generate"; }
grep -q "spec ngram" t.err && bad "a sampled generation drafted"

[ $fail = 0 ] && echo "spec decode ok"
exit $fail
