#!/bin/sh
# The API key decided from the headers before any body byte, and compared
# whole at any length (auth_py.py).
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/auth_py.py"
