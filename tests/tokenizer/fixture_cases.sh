#!/bin/sh
# tests/tokenizer/fixture_cases.sh — coli's ids for the fixture tokenizer's
# recorded cases ($FIXTURES/tokenizer/cases.jsonl and chat_cases.jsonl, each
# line {"text": ..., "ids": [...]}, written by HF tokenizers when the
# fixtures were made), against every fixture model's tokenizer.json. Needs
# only the system python3 (stdlib json) to split the case files.
set -u
cases="$FIXTURES/tokenizer/cases.jsonl"
if [ ! -f "$cases" ]; then
	echo "no $cases (the tokenizer fixtures are not in this tree)"
	exit 77
fi
fail=0 n=0
for f in "$cases" "$FIXTURES/tokenizer/chat_cases.jsonl"; do
	[ -f "$f" ] || continue
	python3 -c '
import json, sys
with open(sys.argv[2], "w") as t, open(sys.argv[3], "w") as i:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        t.write(json.dumps(r["text"]) + "\n")
        i.write(" ".join(map(str, r["ids"])) + "\n")
' "$f" texts.jsonl want.txt || exit 1
	for tj in "$FIXTURES/tokenizer/tokenizer.json" "$FIXTURES"/*/tokenizer.json; do
		[ -f "$tj" ] || continue
		# the cases belong to the shared fixture tokenizer: models with their own
		# vocabulary (the trained demo) are checked by hf_parity instead
		python3 -c 'import json, sys
a, b = (json.load(open(p))["model"]["vocab"] for p in sys.argv[1:3])
sys.exit(a != b)' "$FIXTURES/tokenizer/tokenizer.json" "$tj" || continue
		"$COLI" tokenize --tokenizer-json "$tj" --lines texts.jsonl >got.txt || { fail=1; continue; }
		k=$(wc -l <want.txt)
		n=$((n + k))
		if ! cmp -s got.txt want.txt; then
			echo "MISMATCH: $tj on $(basename "$f")"
			diff want.txt got.txt | head -10
			fail=1
		fi
	done
done
echo "$n fixture cases compared"
exit $fail
