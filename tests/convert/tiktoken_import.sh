#!/bin/sh
# tests/convert/tiktoken_import.sh — `coli convert HF_DIR` where HF_DIR has a
# tiktoken rank file and Kimi's tokenizer class instead of tokenizer.json
# (core/convert/convert_tiktoken.c). tests/convert/tiktoken_import.py writes the
# qwen3_moe fixture with a 768-rank tiktoken.model (checked by tiktoken's own
# loader) and a Kimi tokenizer_config.json, and the ids tiktoken gives with
# Kimi's pattern (fancy-regex, with its && class intersections) and the 256
# special tokens (the venv is $ROOT/$BUILD/pyenv-tiktoken:
# tests/convert/tiktoken_venv).
#
#   ids       `coli tokenize` on 38 fixed texts (Han next to Latin and kana, case
#             changes, contractions in both cases, digit runs of 1-7,
#             newlines and spaces in many arrangements, emoji, marks, the
#             special tokens in text, two tokens BPE cannot reach from their
#             bytes) and 500 seeded random joins of such pieces equals
#             tiktoken's encode(text, allowed_special="all")
#   decode    `coli tokenize --decode` of those ids gives each text back
#   refused   another tokenizer class; rank files with bad base64, a rank
#             twice, a rank skipped, the same bytes twice, a 100 KB line, a
#             single byte missing: exit 1 naming the class or the line, no
#             output (nor its .tmp) left behind
set -u
GEN="$ROOT/tests/convert/tiktoken_import.py"
COLI="$ROOT/$BUILD/coli"
FIX="$ROOT/tests/fixtures"

. "$ROOT/tests/convert/tiktoken_venv" # sets PY

fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$PY" "$GEN" write "$FIX/qwen3_moe" kimi || { echo "FAIL: writing the tiktoken checkpoint"; exit 1; }
"$COLI" convert kimi -o kimi.coli --quant q8 --quiet 2>err.txt || { cat err.txt; echo "FAIL: coli convert kimi"; exit 1; }
"$COLI" tokenize -m kimi.coli --lines kimi/cases.jsonl >got.txt 2>err.txt || { cat err.txt; bad "coli tokenize --lines"; }
"$PY" "$GEN" compare kimi/cases.jsonl got.txt kimi/want.txt || bad "ids differ from tiktoken's"
"$COLI" tokenize -m kimi.coli --decode --lines kimi/want.txt >dec.txt 2>err.txt || { cat err.txt; bad "coli tokenize --decode --lines"; }
"$PY" "$GEN" decoded kimi/cases.jsonl dec.txt && echo "ok: decoding tiktoken's ids gives every text back" ||
	bad "decode does not give the texts back"

for c in "class:tokenizer_class 'QwenTokenizer' is not a tiktoken tokenizer coli knows" \
	"base64:line 301: token is not valid base64" "duprank:line 302: rank repeats or decreases" \
	"gap:line 303: ranks skip a value" "dupbytes:ranks 302 and 303 are the same bytes" \
	"huge:line 305: line too long" "nobyte:byte 0x41 is not a token"; do
	k=${c%%:*} why=${c#*:}
	rm -rf "bad-$k" && cp -r kimi "bad-$k" && "$PY" "$GEN" bad "bad-$k" "$k" || { bad "$k: spoiling the files"; continue; }
	"$COLI" convert "bad-$k" -o out.coli --quiet >msg.txt 2>&1
	rc=$?
	if [ $rc != 1 ] || ! grep -qF "$why" msg.txt; then
		bad "$k: exit $rc, wanted 1 with '$why'; got: $(cat msg.txt)"
	fi
	if ls out.coli* >/dev/null 2>&1; then
		bad "$k: refused, but left $(ls out.coli*)"
		rm -f out.coli*
	fi
done
[ $fail = 0 ] && echo "ok: an unknown class and 6 corrupt rank files refused, nothing written"
exit $fail
