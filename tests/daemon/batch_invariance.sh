#!/bin/sh
# Continuous batching keeps each request's tokens and logprobs byte for byte
# (16 alone on --parallel 1, then together on --parallel 8), and a dropped
# stream frees its slot at once (batch_invariance_py.py); the venv is
# openai_client's.
VENV="$ROOT/$BUILD/pyenv-openai"
if ! "$VENV/bin/python" -c "import openai" 2>/dev/null; then
	python3 -m venv "$VENV" >venv.log 2>&1 || { echo "python3 -m venv failed (apt-get install python3-venv)"; exit 77; }
	"$VENV/bin/pip" install -q --disable-pip-version-check openai >pip.log 2>&1 ||
		{ tail -n 3 pip.log; echo "cannot install openai from PyPI (offline?)"; exit 77; }
fi
PYTHONPATH="$ROOT/tests/daemon" exec "$VENV/bin/python" "$ROOT/tests/daemon/batch_invariance_py.py"
