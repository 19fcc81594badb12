#!/bin/sh
# 8 clients x 200 requests, queue of 4: all answered 200 or 429 (by design),
# RSS growth after warm-up < 5% (load_py.py). LOAD_CLIENTS / LOAD_REQUESTS scale it.
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/load_py.py"
