#!/bin/sh
# tests/fixtures/chat/*_render.jsonl are what jinja2 (configured as
# transformers' apply_chat_template configures it) renders today from the
# chat templates of tests/fixtures/chat/ and the inline ones of
# tools/jinja_render_cases.py; jinja/render_cases holds core/jinja to those
# texts byte for byte. This test re-renders them with jinja2 from PyPI (a venv
# holding jinja2 only, tests/jinja/jinja2_venv) and fails if any differs.
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }
. "$ROOT/tests/jinja/jinja2_venv" # sets PY
exec "$PY" "$ROOT/tools/jinja_render_cases.py" --check
