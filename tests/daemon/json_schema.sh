#!/bin/sh
# Structured output (response_format json_schema / json_object) on the demo
# model, every output validated by the `jsonschema` package (PyPI, in a venv
# cached at $BUILD/pyenv-jsonschema): json_schema_py.py says what and how to
# run the full 500-output target.
VENV="$ROOT/$BUILD/pyenv-jsonschema"
if ! "$VENV/bin/python" -c "import jsonschema" 2>/dev/null; then
	python3 -m venv "$VENV" >venv.log 2>&1 || { echo "python3 -m venv failed (apt-get install python3-venv)"; exit 77; }
	"$VENV/bin/pip" install -q --disable-pip-version-check jsonschema >pip.log 2>&1 ||
		{ tail -n 3 pip.log; echo "cannot install jsonschema from PyPI (offline?)"; exit 77; }
fi
PYTHONPATH="$ROOT/tests/daemon" exec "$VENV/bin/python" "$ROOT/tests/daemon/json_schema_py.py"
