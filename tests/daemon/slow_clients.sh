#!/bin/sh
# Trickling clients (2x the connection limit, from one and from several
# loopback addresses) cannot keep /health and a chat request from answering
# within 1 s (slow_clients_py.py).
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/slow_clients_py.py"
