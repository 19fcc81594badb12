#!/bin/sh
# tools, tool calls, the tool role and reasoning_content through colid's chat
# endpoint, rendered by the model's own Jinja template (Qwen3's): the prompt's
# token count equals that of jinja2's rendering (chat_tools_py.py).
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/chat_tools_py.py"
