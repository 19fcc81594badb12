#!/bin/sh
# tests/io/gguf_read.sh — io/gguf.c against the `gguf` Python package
# (llama.cpp's): a file the package writes with every metadata type, string
# and number arrays and tensors of several types is read by `coli inspect
# -v`, whose key and tensor lines must equal the package's GGUFReader's
# (types, values, shapes, absolute offsets, sizes); then 20 malformed files
# (bad magic or version, big endian, truncation, lying counts, duplicate
# keys and tensors, bad dims and types, partial blocks, data outside the
# file, unaligned or overlapping tensors, a bad alignment, a NUL in a key)
# must each be refused with exit 1 and a message saying why.
# The venv is tests/io/gguf_venv's.
set -u
REF="$ROOT/tests/io/gguf_ref.py"
COLI="$ROOT/$BUILD/coli"

. "$ROOT/tests/io/gguf_venv" # sets PY

fail=0
"$PY" "$REF" write ok.gguf || exit 1
"$PY" "$REF" expect ok.gguf >want.txt || exit 1
"$COLI" inspect -v ok.gguf >out.txt || { echo "FAIL: coli inspect refused the package's file"; cat out.txt; exit 1; }
grep '^key \|^tensor ' out.txt >got.txt
if ! cmp -s got.txt want.txt; then
	echo "FAIL: coli inspect and gguf.GGUFReader differ:"
	diff got.txt want.txt
	fail=1
fi
echo "ok: $(grep -c '^key ' got.txt) keys and $(grep -c '^tensor ' got.txt) tensors as the gguf package reads them"

"$PY" "$REF" bad bad || exit 1
n=0
for f in bad/*.gguf; do
	name=$(basename "$f" .gguf)
	why=$(cat "bad/$name.why")
	"$COLI" inspect "$f" >msg.txt 2>&1
	rc=$?
	n=$((n + 1))
	if [ $rc != 1 ] || ! grep -qF "$why" msg.txt; then
		echo "FAIL: $name: exit $rc, wanted 1 with '$why'; got: $(cat msg.txt)"
		fail=1
	fi
done
echo "ok: $n malformed files refused with their reason"
exit $fail
