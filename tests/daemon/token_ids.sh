#!/bin/sh
# Token ids in and out of colid through the official openai Python client
# (extra_body) and raw HTTP: token-id prompts (good, outside the vocabulary,
# empty, nested batches), return_token_ids whole and streamed, on a model
# without a tokenizer and on the demo model (token_ids_py.py); the venv is
# openai_client's.
VENV="$ROOT/$BUILD/pyenv-openai"
if ! "$VENV/bin/python" -c "import openai" 2>/dev/null; then
	python3 -m venv "$VENV" >venv.log 2>&1 || { echo "python3 -m venv failed (apt-get install python3-venv)"; exit 77; }
	"$VENV/bin/pip" install -q --disable-pip-version-check openai >pip.log 2>&1 ||
		{ tail -n 3 pip.log; echo "cannot install openai from PyPI (offline?)"; exit 77; }
fi
PYTHONPATH="$ROOT/tests/daemon" exec "$VENV/bin/python" "$ROOT/tests/daemon/token_ids_py.py"
