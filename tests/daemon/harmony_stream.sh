#!/bin/sh
# A harmony model's /v1/completions stream sends text as it is generated,
# its chat stream held to the end for the channels (harmony_stream_py.py).
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/harmony_stream_py.py"
