#!/bin/sh
# The KV cache pool under colid (--kv-gb; core/forward/kv.h): with room for
# two requests' blocks, six concurrent ones are all answered, at most two in
# the engine at once, each with the text it gets alone; a request that could
# never fit the pool gets a 400 naming the tokens it needs and the pool's
# size (kv_pool_py.py).
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/kv_pool_py.py"
