#!/bin/sh
# tests/fixtures/chat/glm45_cases.jsonl is what jinja2 renders from GLM-4.5's
# template today (tools/glm_chat_cases.py --check); daemon/chat_render holds
# coli's GLM renderer to those texts byte for byte.
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
python3 -c "import jinja2" 2>/dev/null || { echo "python3 jinja2 missing"; exit 77; }
exec python3 "$ROOT/tools/glm_chat_cases.py" --check
