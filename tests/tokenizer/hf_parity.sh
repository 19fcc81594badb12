#!/bin/sh
# tests/tokenizer/hf_parity.sh — coli's tokenizer against HF tokenizers.
#
# Trains seven small tokenizers with the `tokenizers` library (Qwen2-style
# Split+ByteLevel+NFC with ChatML specials, the same with ignore_merges,
# gpt-oss's o200k-style Split+ByteLevel with harmony specials, with and
# without ignore_merges,
# GPT-2-style ByteLevel(use_regex) with lstrip/rstrip/single_word/normalized
# added tokens and "a b" merges, SentencePiece-style Prepend/Replace + byte
# fallback, and the Metaspace layout), then on a fixed set of cases plus
# $PARITY_N random strings (default 3000, seed 42) compares:
#   ids          coli tokenize --lines        vs  Tokenizer.encode(x).ids
#   decode       coli tokenize --decode       vs  Tokenizer.decode(HF ids)
#   round trip   decode(encode(x)) == normalizer(x)  (byte-level ones)
# It also runs on every $FIXTURES/*/tokenizer.json
# when the fixtures exist, and three ~100k-character inputs (timed). The venv is cached in $ROOT/$BUILD/pyenv.
set -u
PY="$ROOT/$BUILD/pyenv/bin/python"
DRV="$ROOT/tests/tokenizer/hf_parity.py"
N=${PARITY_N:-3000}

if ! "$PY" -c 'import tokenizers' 2>/dev/null; then
	rm -rf "$ROOT/$BUILD/pyenv"
	python3 -m venv "$ROOT/$BUILD/pyenv" || { echo "python3 -m venv failed (python3-venv missing)"; exit 77; }
	if ! "$PY" -m pip install -q tokenizers >pip.log 2>&1; then
		cat pip.log
		if grep -qiE 'connection|resolve|network|timed out|No matching distribution' pip.log; then
			echo "PyPI unreachable: cannot install tokenizers"
			exit 77
		fi
		exit 1
	fi
fi
"$PY" -c 'import tokenizers; print("tokenizers", tokenizers.__version__)'

"$PY" "$DRV" train . || exit 1
"$PY" "$DRV" cases cases.jsonl "$N" 42 || exit 1

fail=0
check() { # name tokenizer.json roundtrip [cases]
	name=$1 tj=$2 rt=$3 cases=${4:-cases.jsonl}
	"$PY" "$DRV" expect "$tj" "$cases" "$name.ids" "$name.dec" "$name.rt" || { fail=1; return; }
	t0=$(date +%s.%N)
	"$COLI" tokenize --tokenizer-json "$tj" --lines "$cases" >"$name.got" || { echo "$name: coli tokenize failed"; fail=1; return; }
	t1=$(date +%s.%N)
	"$COLI" tokenize --tokenizer-json "$tj" --decode --lines "$name.ids" >"$name.gotdec" || { echo "$name: coli decode failed"; fail=1; return; }
	"$PY" "$DRV" compare "$name" "$cases" "$name.ids" "$name.got" "$name.dec" "$name.gotdec" "$name.rt" "$rt" || fail=1
	awk -v a="$t0" -v b="$t1" -v n="$name" 'BEGIN { printf "  %s: coli tokenize --lines took %.3f s (load included)\n", n, b - a }'
}

check qwen2 qwen2.json 1
check qwen2_ignore_merges qwen2_im.json 1
check o200k o200k.json 1
check o200k_ignore_merges o200k_im.json 1
check gpt2 gpt2.json 1
check spm spm.json 0
check spm_metaspace spm_meta.json 0
"$PY" "$DRV" long long.jsonl || exit 1
check qwen2_long100k qwen2.json 1 long.jsonl
check gpt2_long100k gpt2.json 1 long.jsonl
check spm_long100k spm.json 0 long.jsonl
for tj in "$FIXTURES"/*/tokenizer.json; do
	[ -f "$tj" ] || continue
	check "fixture_$(basename "$(dirname "$tj")")" "$tj" 0
done
exit $fail
