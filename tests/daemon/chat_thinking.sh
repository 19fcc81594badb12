#!/bin/sh
# chat_template_kwargs.enable_thinking through colid: the prompt it renders for
# GLM-4.5's, MiniMax-M2's, DeepSeek-V3.1's and Kimi-K2's templates has jinja2's
# token count, thinking on and off; bad values refused (chat_thinking_py.py).
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
PYTHONPATH="$ROOT/tests/daemon" exec python3 "$ROOT/tests/daemon/chat_thinking_py.py"
