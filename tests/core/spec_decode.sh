#!/bin/sh
# tests/core/spec_decode.sh — speculative decoding from n-gram drafts
# (core/spec.c) is lossless: `coli generate` greedy with --spec ngram prints
# the same text as --spec off, byte for byte (and so does --spec auto, whose
# measured cost picks the drafts it verifies), on the demo model (q8 and bf16
# conversions) for a prompt that repeats itself (the first 3,000 bytes of
# the held-out text: drafts get accepted) and one that does not (a random
# token soup: few drafts), on the CPU and on the simulated device (sim, and
# sim:2 with the layers split); and its stats line shows drafts were
# verified and some accepted where the text repeats. The sampler draws each
# token from the verification's row, which is the plain step's logits: a
# seeded sampled generation (top-p, top-k, min-p, penalties, and --json's
# grammar) prints --spec off's text too, and drafts get accepted. A greedy
# verification's argmaxes (the device's with the dense part there) hold with
# several slots open too (--parallel 2: the batch path). When a GPU
# is present (COLI_TEST_GPU=1), the same comparisons run on GPU 0.
# Drafts from a draft model (--draft: the q4 conversion drafting for the q8
# one, the same tokenizer) print the same text too, greedy and seeded, and
# get accepted; a draft model with another tokenizer is refused by name.

fail=0
bad() { echo "FAIL: $*"; fail=1; }

for q in q8 bf16 q4; do
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
			for sp in off ngram auto; do
				"$COLI" generate -m demo-$q.coli -p "$(cat $p.txt)" -n 120 --gpu $g \
					--spec $sp --usage off >$sp.out 2>$sp.err || { cat $sp.err; bad "$q $p $g $sp: generate"; }
			done
			if cmp -s off.out ngram.out; then
				echo "ok: $q $p --gpu $g: --spec ngram prints --spec off's text ($(grep -o '[0-9]* of [0-9]* draft tokens accepted' ngram.err || echo 'no drafts'))"
			else
				bad "$q $p --gpu $g: --spec ngram changed the text"
			fi
			cmp -s off.out auto.out || bad "$q $p --gpu $g: --spec auto changed the text"
			grep -q "spec ngram" off.err && bad "$q $p $g: --spec off drafted"
			if [ $p = rep ] && [ $q = q8 ] && [ $g = off ]; then
				n=$(sed -n 's/.*spec ngram: \([0-9]*\) of .*/\1/p' ngram.err)
				[ "${n:-0}" -gt 0 ] || { cat ngram.err; bad "no draft accepted on repeating text"; }
			fi
		done
	done
done
# off and ngram on the repeating prompt with the options given: the same text,
# and drafts accepted
same_accepted() {
	what=$1
	shift
	for sp in off ngram; do
		"$COLI" generate -m demo-q8.coli -p "$(cat rep.txt)" --spec $sp --usage off "$@" \
			>$sp.out 2>$sp.err || { cat $sp.err; bad "$what $sp: generate"; }
	done
	n=$(sed -n 's/.*spec ngram: \([0-9]*\) of .*/\1/p' ngram.err)
	if cmp -s off.out ngram.out && [ "${n:-0}" -gt 0 ]; then
		echo "ok: $what: --spec ngram prints --spec off's text ($n drafts accepted)"
	else
		bad "$what: --spec ngram changed the text or accepted none (${n:-0})"
	fi
}
# several slots open (--parallel 2): a greedy verification's rows go through
# the batch path, their argmaxes on the (simulated) device
same_accepted "--gpu sim --parallel 2" -n 120 --gpu sim --parallel 2
# sampled and processed: the same seed, the same text
sdevs="off sim"
[ "${COLI_TEST_GPU:-0}" = 1 ] && sdevs="$sdevs 0"
for g in $sdevs; do
	for a in "--temperature 0.5 --top-p 0.9 --seed 1" \
		"--temperature 0.4 --top-k 20 --frequency-penalty 0.3 --seed 9" \
		"--temperature 0.5 --min-p 0.1 --presence-penalty 0.5 --seed 2" \
		"--temperature 0 --repetition-penalty 1.1" "--json --temperature 0.2 --seed 4"; do
		# shellcheck disable=SC2086 # $a: several options
		same_accepted "$a --gpu $g" -n 80 --gpu $g $a
	done
done

# a draft model: the q4 conversion drafting for the q8 one
for g in off sim; do
	for a in "rep" "soup" "rep --temperature 0.5 --top-p 0.9 --seed 1"; do
		p=${a%% *} o=${a#"$p"}
		for d in off draft; do
			x="--spec off"
			[ $d = draft ] && x="--spec ngram --draft demo-q4.coli"
			# shellcheck disable=SC2086 # $o, $x: several options
			"$COLI" generate -m demo-q8.coli -p "$(cat $p.txt)" -n 100 --gpu $g --usage off \
				$o $x >$d.out 2>$d.err || { cat $d.err; bad "$a $g $d: generate"; }
		done
		n=$(sed -n 's/.*spec draft: \([0-9]*\) of .*/\1/p' draft.err)
		if cmp -s off.out draft.out && [ "${n:-0}" -gt 0 ]; then
			echo "ok: $a --gpu $g: --draft prints the text without it ($n drafts accepted)"
		else
			bad "$a --gpu $g: --draft changed the text or accepted none (${n:-0})"
		fi
	done
done
# another tokenizer: refused, naming why
"$COLI" convert "$ROOT/tests/fixtures/olmoe" -o other.coli >/dev/null 2>&1 ||
	bad "convert the olmoe fixture"
if "$COLI" generate -m demo-q8.coli -p hello -n 4 --gpu off --draft other.coli >/dev/null \
	2>draft.err; then
	bad "a draft model with another tokenizer was taken"
elif grep -q "tokenizer" draft.err; then
	echo "ok: another tokenizer's draft model refused: $(cat draft.err)"
else
	cat draft.err
	bad "the refusal of another tokenizer's draft model does not say why"
fi

[ $fail = 0 ] && echo "spec decode ok"
exit $fail
