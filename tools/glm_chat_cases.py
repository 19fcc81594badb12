#!/usr/bin/env python3
"""glm_chat_cases.py -- GLM-4.5's chat template rendered by jinja2, for coli's GLM renderer.

    python3 tools/glm_chat_cases.py            # rewrite tests/fixtures/chat/glm45_cases.jsonl
    python3 tools/glm_chat_cases.py --check    # exit 1 if the committed file is stale

Reads tests/fixtures/chat/glm45_chat_template.jinja (GLM-4.5's chat template, MIT, see
tests/fixtures/chat/README.md) and renders a few conversations through jinja2 the way
transformers' apply_chat_template does (a sandboxed environment with trim_blocks,
lstrip_blocks and the loopcontrols extension), with the thinking switch left out (the
template's default) and with enable_thinking=false. Writes one JSON object a line:
{"messages", "add_generation_prompt", "enable_thinking" (null: not given), "text"};
tests/daemon/chat_render.c renders the same conversations with coli and compares the text
byte for byte. Needs only jinja2 (no transformers, no tokenizer: [gMASK], <sop>, <|user|>
... are special tokens of GLM's tokenizer, which the fixture tokenizer lacks).
"""
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIR = os.path.join(ROOT, "tests", "fixtures", "chat")
TEMPLATE = os.path.join(DIR, "glm45_chat_template.jinja")
CASES = os.path.join(DIR, "glm45_cases.jsonl")

S = {"role": "system", "content": "You are terse."}
U1 = {"role": "user", "content": "Say hi in French."}
A1 = {"role": "assistant", "content": "Salut !"}
U2 = {"role": "user", "content": "And in Japanese?"}
CONVERSATIONS = [
    [S, U1],
    [S, U1, A1, U2],
    [U1, A1],
    # reasoning: kept after the last user message, dropped before it
    [U1, {"role": "assistant", "content": "<think>French: salut.</think>\nSalut !"}],
    [U1, {"role": "assistant", "content": "<think>\nFrench.\n</think>\n\n  Salut !  \n"}, U2],
    [U1, {"role": "assistant", "content": "\n<think> a </think>b</think>\n\nc"}],
    [U1, {"role": "assistant", "content": "<think></think>"}],
    [U1, {"role": "assistant", "content": "   "}],
    [{"role": "user", "content": "Be quick. /nothink"}],
    [{"role": "system", "content": "Réponds en français.\n"},
     {"role": "user", "content": "日本語で挨拶して 🙂"}],
    [],
]


def render(tpl, messages, gen, enable_thinking):
    kw = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
    return tpl.render(messages=messages, add_generation_prompt=gen, tools=None, **kw)


def cases():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    with open(TEMPLATE, encoding="utf-8") as f:
        tpl = env.from_string(f.read())
    lines = []
    for msgs in CONVERSATIONS:
        for gen in (True, False):
            for think in (None, False):
                lines.append(json.dumps({"messages": msgs, "add_generation_prompt": gen,
                                         "enable_thinking": think,
                                         "text": render(tpl, msgs, gen, think)},
                                        ensure_ascii=False))
    return "\n".join(lines) + "\n"


def main():
    text = cases()
    if "--check" in sys.argv[1:]:
        with open(CASES, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{CASES} differs from jinja2's renderings: "
                      "run python3 tools/glm_chat_cases.py", file=sys.stderr)
                return 1
        print(f"ok  {CASES}: {text.count(chr(10))} cases match jinja2")
        return 0
    with open(CASES, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {CASES}: {text.count(chr(10))} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
