#!/bin/sh
# 429 with Retry-After, cancellation when the client goes away (running,
# queued, streaming), SIGTERM finishing in-flight work, second signal (lifecycle_py.py).
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/lifecycle_py.py"
