#!/bin/sh
# A tool-call round trip through the official openai Python client
# (openai_tools_py.py): forced calls by constrained decoding on the demo
# model, the tool's result back, a final answer; the venv is openai_client's.
VENV="$ROOT/$BUILD/pyenv-openai"
if ! "$VENV/bin/python" -c "import openai" 2>/dev/null; then
	python3 -m venv "$VENV" >venv.log 2>&1 || { echo "python3 -m venv failed (apt-get install python3-venv)"; exit 77; }
	"$VENV/bin/pip" install -q --disable-pip-version-check openai >pip.log 2>&1 ||
		{ tail -n 3 pip.log; echo "cannot install openai from PyPI (offline?)"; exit 77; }
fi
PYTHONPATH="$ROOT/tests/daemon" exec "$VENV/bin/python" "$ROOT/tests/daemon/openai_tools_py.py"
