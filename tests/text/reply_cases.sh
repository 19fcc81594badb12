#!/bin/sh
# tests/fixtures/chat/reply_cases.jsonl (what text/reply_parse and
# daemon/reply_split hold the reply split to) is what jinja2 renders from the
# models' templates today: tools/ref/reply_cases.py --check, with jinja2 from
# PyPI (tests/jinja/jinja2_venv).
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
. "$ROOT/tests/jinja/jinja2_venv" # sets PY
exec "$PY" "$ROOT/tools/ref/reply_cases.py" --check
