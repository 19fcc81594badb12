#!/bin/sh
# tests/fixtures/chat/*_cases.jsonl are what jinja2 renders from GLM-4.5's,
# MiniMax-M2's, DeepSeek-V3.1's and Kimi-K2's templates today (tools/ref/chat_jinja_cases.py
# --check); daemon/chat_render holds coli's renderers to those texts byte for byte.
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
python3 -c "import jinja2" 2>/dev/null || { echo "python3 jinja2 missing"; exit 77; }
exec python3 "$ROOT/tools/ref/chat_jinja_cases.py" --check
