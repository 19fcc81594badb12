#!/bin/sh
# `coli bench serve` against colid, started by the bench (-m) and given
# (--url, checked against colid's access log and /metrics) (bench_serve_py.py).
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/bench_serve_py.py"
