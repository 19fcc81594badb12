#!/bin/sh
# The KV cache kept across requests (coli_generate's prefix reuse): a prompt
# that shares its beginning with the previous request's is prefilled from
# where they part, usage says how many tokens were cached, and the text is
# byte-identical to a prefill from empty; clients sending a shared prefix
# while another request with it runs share that one's blocks
# (prefix_cache_py.py).
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/prefix_cache_py.py"
