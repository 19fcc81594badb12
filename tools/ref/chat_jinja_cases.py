#!/usr/bin/env python3
"""chat_jinja_cases.py -- model chat templates rendered by jinja2, for coli's family renderers.

    python3 tools/ref/chat_jinja_cases.py            # rewrite tests/fixtures/chat/*_cases.jsonl
    python3 tools/ref/chat_jinja_cases.py --check    # exit 1 if a committed file is stale

For each family below, reads its template from tests/fixtures/chat/ (GLM-4.5's, MIT, see
tests/fixtures/chat/LICENSE.glm45; MiniMax-M2's, MIT, see LICENSE.minimax_m2; DeepSeek-V3.1's,
MIT, see LICENSE.deepseek_v31; Kimi-K2's, modified MIT, see LICENSE.kimi_k2; gpt-oss's,
Apache 2.0, see LICENSE.gpt_oss, with strftime_now fixed to HARMONY_DATE) and renders a
few conversations through jinja2 the way transformers' apply_chat_template does (a
sandboxed environment with trim_blocks, lstrip_blocks and the loopcontrols extension), with
the thinking switch left out (the template's default) and with enable_thinking=false
(DeepSeek-V3.1, whose default is off: also enable_thinking=true), and the model's
bos_token where the template writes it (DeepSeek's).
Writes one JSON object a line:
{"messages", "add_generation_prompt", "enable_thinking" (null: not given), "text"};
tests/daemon/chat_render.c renders the same conversations with coli and compares the text
byte for byte. Needs only jinja2 (no transformers, no tokenizer: [gMASK], <|user|>, ]~b]
... are special tokens of the models' tokenizers, which the fixture tokenizer lacks).
"""
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIR = os.path.join(ROOT, "tests", "fixtures", "chat")

S = {"role": "system", "content": "You are terse."}
U1 = {"role": "user", "content": "Say hi in French."}
A1 = {"role": "assistant", "content": "Salut !"}
U2 = {"role": "user", "content": "And in Japanese?"}
GLM_CONVERSATIONS = [
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
# MiniMax-M2: the default system text when there is none (or an empty one), a system
# message later than the first (the template drops it), reasoning split on the first and
# last </think> and kept only after the last user message, newline-only stripping
MINIMAX_CONVERSATIONS = GLM_CONVERSATIONS + [
    [{"role": "system", "content": ""}, U1],
    [U1, S, A1],
    [U1, {"role": "assistant", "content": "<think>\n a \n</think>\n\n b \n"}],
    [U1, {"role": "assistant", "content": "x<think>r1<think>r2</think>mid</think>\nend"}],
    [U1, {"role": "assistant", "content": "</think>only answer"}],
    [U1, {"role": "assistant", "content": ""}, U2],
    [S, U1, {"role": "assistant", "content": "<think>plan</think>Salut !"}, U2,
     {"role": "assistant", "content": "<think>again</think>Konnichiwa"}],
]
# DeepSeek-V3.1: several system messages joined, an assistant turn not after a user turn
# (no <｜Assistant｜> opening), a conversation ending in an assistant turn (no generation
# prompt); Kimi-K2: a system message not first, a conversation without one
DEEPSEEK_CONVERSATIONS = MINIMAX_CONVERSATIONS + [
    [S, U1, {"role": "system", "content": "Second."}, A1],
    [S, A1, U1],
    [U1, A1, A1, U2],
]
KIMI_CONVERSATIONS = MINIMAX_CONVERSATIONS
# gpt-oss (harmony): a first developer message as the system one is, an empty one (no
# developer turn), system and developer messages later than the first (dropped), a
# conversation ending in an assistant turn (<|return|>); not the empty conversation (the
# template reads messages[0])
D = {"role": "developer", "content": "Answer in one word."}
HARMONY_CONVERSATIONS = [c for c in MINIMAX_CONVERSATIONS if c] + [
    [D, U1],
    [D, U1, A1, U2],
    [{"role": "developer", "content": ""}, U1, A1],
    [U1, D, A1, S, U2],
    [U1, A1, A1],
]
HARMONY_DATE = "2026-01-02"   # the template's strftime_now("%Y-%m-%d"), fixed
DS_BOS = "<｜begin▁of▁sentence｜>"
FAMILIES = [  # name, template, cases, conversations, thinking values, extra keywords
    ("glm", "glm45_chat_template.jinja", "glm45_cases.jsonl", GLM_CONVERSATIONS,
     (None, False), {}),
    ("minimax", "minimax_m2_chat_template.jinja", "minimax_m2_cases.jsonl",
     MINIMAX_CONVERSATIONS, (None, False), {}),
    ("deepseek", "deepseek_v31_chat_template.jinja", "deepseek_v31_cases.jsonl",
     DEEPSEEK_CONVERSATIONS, (None, False, True), {"bos_token": DS_BOS}),
    ("kimi", "kimi_k2_chat_template.jinja", "kimi_k2_cases.jsonl", KIMI_CONVERSATIONS,
     (None, False), {}),
    ("harmony", "gpt_oss_chat_template.jinja", "gpt_oss_cases.jsonl", HARMONY_CONVERSATIONS,
     (None,), {"strftime_now": lambda fmt: HARMONY_DATE}),
]


def render(tpl, messages, gen, enable_thinking, extra):
    kw = {} if enable_thinking is None else {"enable_thinking": enable_thinking}
    return tpl.render(messages=messages, add_generation_prompt=gen, tools=None, **kw, **extra)


def cases(template, conversations, thinking, extra):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    with open(os.path.join(DIR, template), encoding="utf-8") as f:
        tpl = env.from_string(f.read())
    lines = []
    for msgs in conversations:
        for gen in (True, False):
            for think in thinking:
                lines.append(json.dumps({"messages": msgs, "add_generation_prompt": gen,
                                         "enable_thinking": think,
                                         "text": render(tpl, msgs, gen, think, extra)},
                                        ensure_ascii=False))
    return "\n".join(lines) + "\n"


def main():
    bad = 0
    for name, template, out, conversations, thinking, extra in FAMILIES:
        path = os.path.join(DIR, out)
        text = cases(template, conversations, thinking, extra)
        if "--check" in sys.argv[1:]:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    print(f"{path} differs from jinja2's renderings: "
                          "run python3 tools/ref/chat_jinja_cases.py", file=sys.stderr)
                    bad = 1
                    continue
            print(f"ok  {name}: {path}: {text.count(chr(10))} cases match jinja2")
            continue
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {path}: {text.count(chr(10))} cases")
    return bad


if __name__ == "__main__":
    sys.exit(main())
