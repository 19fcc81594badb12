#!/usr/bin/env python3
"""reply_cases.py -- assistant turns with reasoning and tool calls as the models' own chat
templates write them (jinja2), for coli's reply parser (core/text/reply.c).

    python3 tools/ref/reply_cases.py            # rewrite tests/fixtures/chat/reply_cases.jsonl
    python3 tools/ref/reply_cases.py --check    # exit 1 if the committed file is stale

A model is trained on its template's rendering of an assistant turn, so what it generates
after the generation prompt is that rendering: for each family, the template (the files
and licences of tools/ref/chat_jinja_cases.py) renders [user, assistant] without a generation
prompt and [user] with one, and the case's text is the difference, less the end-of-turn
marker a sampler stops at. The expected reply is the assistant message itself. Qwen3's
Hermes-style <tool_call> and Kimi-K2's tool-call sections are not in the committed
templates: their cases are written here from the formats their model cards document.
A first line {"tools": [..]}, then one JSON object a line: {"family", "think_open", "text", "reasoning", "content",
"tool_calls": [{"name", "arguments"}]}; tests/text/reply_parse.c parses each text (with
TOOLS, below, as the request's tools) and compares.
"""
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIR = os.path.join(ROOT, "tests", "fixtures", "chat")
OUT = os.path.join(DIR, "reply_cases.jsonl")

U = {"role": "user", "content": "Weather in Paris and Tōkyō?"}
W1 = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "metric": True}}
W2 = {"name": "get_weather", "arguments": {"city": "東京", "days": 1, "hours": [6, 12],
                                             "note": "42"}}
T0 = {"name": "now", "arguments": {}}
TOOLS = [  # the request's tools: their schemas type GLM's and MiniMax's raw values
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"},
            "metric": {"type": "boolean"}, "hours": {"type": "array"},
            "note": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},
]
TURNS = [  # (reasoning, content, tool calls)
    ("", "It is sunny.", []),
    ("The user wants weather.", "", [W1]),
    ("Two cities.", "Checking both.", [W1, W2]),
    ("", "", [T0]),
    ("Plain reasoning only.", "Bonjour !", []),
]
ENDS = ["<|im_end|>", "<｜end▁of▁sentence｜>", "[e~[", "<|return|>", "<|user|>",
        "<|observation|>"]
FAMILIES = [  # family, template, extra keywords, message style
    ("glm", "glm45_chat_template.jinja", {}),
    ("minimax", "minimax_m2_chat_template.jinja", {}),
    ("deepseek", "deepseek_v31_chat_template.jinja",
     {"bos_token": "<｜begin▁of▁sentence｜>", "enable_thinking": False}),
    ("harmony", "gpt_oss_chat_template.jinja", {"strftime_now": lambda fmt: "2026-01-02"}),
]


def message(family, reasoning, content, calls):
    m = {"role": "assistant", "content": content}
    if family == "deepseek":  # V3.1's template concatenates JSON text and its content
        m["tool_calls"] = [{"type": "function", "function": {
            "name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)}}
            for c in calls] or None
        if reasoning:  # thinking mode: the reasoning precedes </think> in the turn
            m["content"] = content
        return m
    if calls:
        m["tool_calls"] = [{"type": "function", "function": c} for c in calls]
    if reasoning:
        m["thinking" if family == "harmony" else "reasoning_content"] = reasoning
    return m


def rendered(family, template, extra):
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)  # transformers' filter (not jinja2's)

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    with open(os.path.join(DIR, template), encoding="utf-8") as f:
        tpl = env.from_string(f.read())
    out = []
    for reasoning, content, calls in TURNS:
        if family == "harmony" and len(calls) > 1:
            continue  # the template writes one call a message
        if family == "harmony" and calls and reasoning and content:
            continue  # it refuses content and thinking beside a call
        if family == "deepseek":
            reasoning = ""  # V3.1 renders no reasoning in a turn (non-thinking mode here)
        m = message(family, reasoning, content, calls)
        try:
            full = tpl.render(messages=[U, m], add_generation_prompt=False, tools=None, **extra)
            head = tpl.render(messages=[U], add_generation_prompt=True, tools=None, **extra)
        except jinja2.exceptions.TemplateError as e:
            raise SystemExit(f"{template}: {e}")
        if not full.startswith(head):
            # a turn without reasoning after a prompt that opens <think> (MiniMax-M2):
            # the template writes no <think> there, the model would have; not a case
            continue
        text = full[len(head):]
        for e in ENDS:
            if text.rstrip("\n").endswith(e):
                text = text.rstrip("\n")[: -len(e)]
        out.append({"family": family, "think_open": head.rstrip().endswith("<think>"),
                    "text": text,
                    "reasoning": reasoning or None, "content": content.strip(),
                    "tool_calls": calls})
    return out


def documented():
    """Qwen3 (Hermes <tool_call>, Qwen3's template) and Kimi-K2 (its tool call guide)."""
    out = []
    for reasoning, content, calls in TURNS:
        hermes = "".join("\n<tool_call>\n" + json.dumps(c, ensure_ascii=False) + "\n</tool_call>"
                         for c in calls)
        think = "<think>\n" + reasoning + "\n</think>\n\n"
        out.append({"family": "chatml", "think_open": False,
                    "text": think + content + hermes, "reasoning": reasoning or None,
                    "content": content, "tool_calls": calls})
        kimi = ""
        if calls:
            kimi = "<|tool_calls_section_begin|>" + "".join(
                f"<|tool_call_begin|>functions.{c['name']}:{i}<|tool_call_argument_begin|>"
                + json.dumps(c["arguments"], ensure_ascii=False) + "<|tool_call_end|>"
                for i, c in enumerate(calls)) + "<|tool_calls_section_end|>"
        out.append({"family": "kimi", "think_open": False, "text": content + kimi,
                    "reasoning": None, "content": content, "tool_calls": calls})
    # not the format: a reply that only mentions the marker stays content
    out.append({"family": "chatml", "think_open": False,
                "text": "Use <tool_call> tags like this: <tool_call>oops</tool_call>",
                "reasoning": None,
                "content": "Use <tool_call> tags like this: <tool_call>oops</tool_call>",
                "tool_calls": []})
    return out


def main():
    cases = []
    for family, template, extra in FAMILIES:
        got = rendered(family, template, extra)
        if len(got) < 2:
            raise SystemExit(f"{template}: {len(got)} cases follow the generation prompt")
        cases += got
    cases += documented()
    text = json.dumps({"tools": TOOLS}, ensure_ascii=False) + "\n"
    text += "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
    if "--check" in sys.argv[1:]:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print(f"{OUT} differs from jinja2's renderings: "
                      "run python3 tools/ref/reply_cases.py", file=sys.stderr)
                return 1
        print(f"ok  {OUT}: {len(cases)} cases match jinja2")
        return 0
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {OUT}: {len(cases)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
