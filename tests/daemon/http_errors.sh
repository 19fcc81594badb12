#!/bin/sh
# Every client error of docs/api.md over raw HTTP: the right 4xx with an
# OpenAI error object, and the server still serving after each (errors.py).
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/errors.py"
