#!/bin/sh
# /tokenize and /detokenize against `coli tokenize`, their 4xx; the /metrics
# histograms and the access log against the requests made (observe_py.py).
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/observe_py.py"
