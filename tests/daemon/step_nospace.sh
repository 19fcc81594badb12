#!/bin/sh
# A batch step short of KV blocks (colid --debug-kv-no-promise: admitted on
# the prompt alone, so two running requests can want more blocks than the
# pool has): the runs that fit run, the others wait for blocks; every
# request is answered with the text it gets alone. When not one run fits,
# only the newest request ends (step_nospace_py.py).
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/step_nospace_py.py"
