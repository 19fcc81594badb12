#!/bin/sh
# coli generate --chat: qwen3_moe's ChatML template rendered by core/jinja
# (the default) and by the built-in ChatML renderer (--chat-template builtin)
# give the same prompt and the same greedy text; --chat-template FILE renders
# another template (Mixtral's: a different prompt); a template that raises
# fails with its message; one that cannot render a single user message is
# replaced by the family renderer, with a note saying why; an unreadable
# FILE is refused by the options table.
set -u
M="$TEST_TMP/q.coli"
"$COLI" convert "$FIXTURES/qwen3_moe" -o "$M" >/dev/null 2>&1 || { echo "FAIL: convert"; exit 1; }
run() { "$COLI" generate -m "$M" -p "Say hi." --chat -n 4 "$@" 2>"$TEST_TMP/err"; }
a=$(run --system "Be brief.") || { cat "$TEST_TMP/err"; echo "FAIL: jinja"; exit 1; }
pa=$(grep -o 'prompt [0-9]* tok' "$TEST_TMP/err")
b=$(run --system "Be brief." --chat-template builtin) || { cat "$TEST_TMP/err"; echo "FAIL: builtin"; exit 1; }
pb=$(grep -o 'prompt [0-9]* tok' "$TEST_TMP/err")
[ "$a" = "$b" ] && [ -n "$pa" ] && [ "$pa" = "$pb" ] || { echo "FAIL: jinja '$a' ($pa) vs builtin '$b' ($pb)"; exit 1; }
echo "ok  jinja and builtin: same $pa, same text"
run --chat-template "$FIXTURES/chat/mixtral_chat_template.jinja" >/dev/null ||
	{ cat "$TEST_TMP/err"; echo "FAIL: --chat-template FILE"; exit 1; }
pm=$(grep -o 'prompt [0-9]* tok' "$TEST_TMP/err")
[ "$pm" != "$pa" ] || { echo "FAIL: Mixtral's template gave the same prompt ($pm)"; exit 1; }
echo "ok  --chat-template FILE: $pm"
if run --system "x" --chat-template "$FIXTURES/chat/mixtral_chat_template.jinja" >/dev/null; then
	echo "FAIL: Mixtral's template took a system message"; exit 1
fi
grep -q "raise_exception: Conversation roles must alternate" "$TEST_TMP/err" ||
	{ cat "$TEST_TMP/err"; echo "FAIL: no template message"; exit 1; }
echo "ok  raise_exception: $(tail -n 1 "$TEST_TMP/err")"
printf '{{ messages | frobnicate }}' >"$TEST_TMP/bad.jinja"
run --chat-template "$TEST_TMP/bad.jinja" >/dev/null || { cat "$TEST_TMP/err"; echo "FAIL: fallback"; exit 1; }
grep -q "built-in chatml renderer (template does not render one user message: .*frobnicate" "$TEST_TMP/err" &&
	[ "$(grep -o 'prompt [0-9]* tok' "$TEST_TMP/err")" = "$(run >/dev/null; grep -o 'prompt [0-9]* tok' "$TEST_TMP/err")" ] ||
	{ cat "$TEST_TMP/err"; echo "FAIL: a template that cannot render is not replaced by the family"; exit 1; }
echo "ok  a template that cannot render falls back to the family, saying why"
if run --chat-template "$TEST_TMP/none.jinja" >/dev/null; then echo "FAIL: missing file accepted"; exit 1; fi
grep -q "expected auto, builtin or a readable file" "$TEST_TMP/err" || { cat "$TEST_TMP/err"; echo "FAIL: missing file message"; exit 1; }
echo "ok  missing FILE refused"
