#!/bin/sh
# gpt-oss's <|call|> ends the turn like EOS (harmony_call_py.py).
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/harmony_call_py.py"
