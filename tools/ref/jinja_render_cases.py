#!/usr/bin/env python3
"""jinja_render_cases.py -- jinja2's renderings of chat templates, for coli's Jinja interpreter.

    python3 tools/ref/jinja_render_cases.py            # rewrite tests/fixtures/chat/*_render.jsonl
    python3 tools/ref/jinja_render_cases.py --check    # exit 1 if a committed file is stale
    python3 tools/ref/jinja_render_cases.py --random N --seed S --out DIR
                                                   # N random conversations a template
    python3 tools/ref/jinja_render_cases.py --random-expr N --seed S --out DIR
                                                   # N random expressions (inline templates)

Renders every template of tests/fixtures/chat/ (the models' own: GLM-4.5, MiniMax-M2,
DeepSeek-V3.1, DeepSeek-V3 (the original release's, which coli's built-in renderer takes
for V3.1's), Kimi-K2, Qwen3, gpt-oss, Mixtral, each with its LICENSE file; and
features_chat_template.jinja, written for these tests) over a set of conversations
(system prompts, multi-turn, reasoning in reasoning_content / thinking / <think>, tool
definitions, assistant tool calls, tool results, unicode) with add_generation_prompt on
and off and the thinking switch left out / off / on, plus small inline templates that
pin one construct each. jinja2 is configured as transformers' apply_chat_template
configures it: ImmutableSandboxedEnvironment(trim_blocks, lstrip_blocks, loopcontrols),
tojson = json.dumps(ensure_ascii=False, ...), globals raise_exception and strftime_now
(the clock fixed at NOW, local time), and the variables messages, tools, documents,
add_generation_prompt, bos_token, eos_token and the template keywords.
Writes one JSON object a line: {"template" (a file name) or "source" (inline text),
"context", "now", "text"} or, where jinja2 raised, "error" instead of "text".
tests/jinja/render_cases.c renders the same with coli and compares byte for byte.
"""
import copy
import datetime
import json
import os
import re
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIR = os.path.join(ROOT, "tests", "fixtures", "chat")
NOW = 1764633600  # 2025-12-02 00:00:00 UTC; strftime_now sees this instant

S = {"role": "system", "content": "You are terse."}
U1 = {"role": "user", "content": "Say hi in French."}
A1 = {"role": "assistant", "content": "Salut !"}
U2 = {"role": "user", "content": "And in Japanese?"}
UNI = {"role": "user", "content": "日本語で挨拶して 🙂 — «ça va?»\ttab"}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                         "description": "Temperature unit"},
                "days": {"type": "integer", "description": "Forecast days", "default": 1},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Searches the web.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "limit": {"type": "number"},
                "safe": {"type": "boolean"},
                "filters": {"type": "object", "properties": {"site": {"type": "string"},
                                                             "lang": {"type": "string"}},
                            "required": ["site"]},
            },
            "required": ["query", "tags"],
        },
    },
}
TOOLS = [WEATHER, SEARCH]
ARGS = {"city": "Paris", "unit": "celsius"}


def call(name, args, string_args):
    return {"id": "call_1", "type": "function",
            "function": {"name": name,
                         "arguments": json.dumps(args, ensure_ascii=False) if string_args else args}}


def conversations(string_args):
    """(messages, tools) pairs; string_args: tool-call arguments as JSON text (DeepSeek)"""
    tc = {"role": "assistant", "content": "", "tool_calls": [call("get_weather", ARGS, string_args)]}
    tc_none = {"role": "assistant", "content": None,
               "tool_calls": [call("search", {"query": "mistral", "tags": ["a", "b"]}, string_args)]}
    result = {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21, "sky": "clear"}'}
    two = {"role": "assistant", "content": "Checking both.",
           "tool_calls": [call("get_weather", ARGS, string_args),
                          call("search", {"query": "météo", "tags": []}, string_args)]}
    plain = [
        [S, U1],
        [S, U1, A1, U2],
        [U1, A1],
        [U1],
        [UNI],
        [{"role": "system", "content": "Réponds en français.\n"}, UNI],
        [U1, {"role": "assistant", "content": "<think>French: salut.</think>\nSalut !"}],
        [U1, {"role": "assistant", "content": "<think>\nFrench.\n</think>\n\n  Salut !  \n"}, U2],
        [U1, {"role": "assistant", "content": "Salut !", "reasoning_content": "Easy: salut."}, U2],
        [U1, {"role": "assistant", "content": "Salut !", "reasoning_content": "Easy."}],
        [S, U1, {"role": "assistant", "content": "<think>plan</think>Salut !"}, U2,
         {"role": "assistant", "content": "<think>again</think>Konnichiwa"}],
    ]
    out = [(m, None) for m in plain]
    out += [
        ([S, U1], TOOLS),
        ([U1], [WEATHER]),
        ([S, {"role": "user", "content": "Weather in Paris?"}, tc, result], TOOLS),
        ([{"role": "user", "content": "Weather in Paris?"}, tc, result,
          {"role": "assistant", "content": "21°C and clear."}, U2], TOOLS),
        ([{"role": "user", "content": "Find it."}, tc_none, result], TOOLS),
        ([{"role": "user", "content": "Both?"}, two, result, result], TOOLS),
    ]
    return out


def harmony_conversations():
    """gpt-oss: thinking in "thinking", one tool call a message, developer role"""
    tc = {"role": "assistant", "content": "", "thinking": "Need the weather.",
          "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                            "arguments": ARGS}}]}
    result = {"role": "tool", "content": '{"temp": 21}'}
    out = [(m, None) for m in [
        [S, U1], [U1, A1, U2], [U1], [UNI],
        [{"role": "developer", "content": "Be brief."}, U1],
        [U1, {"role": "assistant", "content": "Salut !", "thinking": "Easy."}],
        [U1, {"role": "assistant", "content": "Salut !", "thinking": "Easy."}, U2],
    ]]
    out += [
        ([S, U1], TOOLS),
        ([{"role": "user", "content": "Weather?"}, tc, result], TOOLS),
        ([{"role": "user", "content": "Weather?"}, tc, result,
          {"role": "assistant", "content": "21°C."}, U2], TOOLS),
        # raises: a tool result with no tool call before it
        ([U1, {"role": "tool", "content": "x"}], None),
    ]
    return out


# name, template, conversations, thinking values, extra keywords (a list of dicts)
TEMPLATES = [
    ("qwen3", "qwen3_chat_template.jinja", conversations(False), (None, False, True), [{}]),
    ("glm45", "glm45_chat_template.jinja", conversations(False), (None, False), [{}]),
    ("minimax_m2", "minimax_m2_chat_template.jinja", conversations(False), (None,), [{}]),
    ("kimi_k2", "kimi_k2_chat_template.jinja", conversations(False), (None,), [{}]),
    ("deepseek_v31", "deepseek_v31_chat_template.jinja", conversations(True), (None, True),
     [{}]),
    ("deepseek_v3", "deepseek_v3_chat_template.jinja", conversations(True), (None,), [{}]),
    ("gpt_oss", "gpt_oss_chat_template.jinja", harmony_conversations(), (None,),
     [{}, {"reasoning_effort": "high", "model_identity": "You are coli.",
           "builtin_tools": ["browser", "python"]}]),
    ("mixtral", "mixtral_chat_template.jinja",
     [([U1], None), ([U1, A1, U2], None), ([UNI, A1], None), ([S, U1], None), ([A1], None)],
     (None,), [{}]),
    ("features", "features_chat_template.jinja", conversations(False) +
     [([], None), ([{"role": "user", "content": [{"type": "text", "text": "multi"},
                                                  {"type": "text", "text": "part?"}]}], None),
      ([{"role": "robot", "content": "?"}], None)],
     (None, False, True), [{}]),
    ("features_upper", "features_chat_template.jinja", conversations(False)[:3], (None,),
     [{"upper_system": True}]),
]
BOS = {"deepseek_v31": "<｜begin▁of▁sentence｜>", "deepseek_v3": "<｜begin▁of▁sentence｜>", "mixtral": "<s>", "features": "<BOS>",
       "features_upper": "<BOS>"}
EOS = {"deepseek_v31": "<｜end▁of▁sentence｜>", "deepseek_v3": "<｜end▁of▁sentence｜>", "mixtral": "</s>", "features": "<EOS>"}

# inline templates: one construct each; (source, context)
INLINE = [
    ("{{ 'a' ~ 1 ~ none ~ true }}|{{ 1 + 2 * 3 - 4 / 2 }}|{{ 7 // 2 }},{{ -7 // 2 }},{{ 7 % -3 }}", {}),
    ("{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e-5 }} {{ 123456789.0 }} {{ 2.5 | round }} {{ 3.14159 | round(2) }}", {}),
    ("{{ [1, 'a', none, true, 2.5, [], {}] }} {{ {'a': 'it\\'s', 'b': \"q\\\"\"} }} {{ ('x',) }}", {}),
    ("{{ 'Hello World'[1:4] }}|{{ 'héllo'[::-1] }}|{{ 'héllo'[1] }}|{{ [1,2,3,4,5][1::2] }}|{{ [1,2,3][-2:] }}", {}),
    ("{% for x in xs %}{{ loop.index }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.cycle('a','b') }};{% else %}empty{% endfor %}", {"xs": [3, 4, 5]}),
    ("{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", {"xs": []}),
    ("{% for x in range(10) %}{% if x is odd %}{% continue %}{% endif %}{% if x > 6 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("{% for k, v in d | dictsort %}{{ k }}{% endfor %}", {"d": {"b": 1}}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}{{ d.keys() | list }}{{ d.values() | list }}{{ d.get('z', 'dflt') }}{{ d.get('a') }}", {"d": {"b": 1, "a": [2]}}),
    ("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}", {}),
    ("{% set ns = namespace(t=0) %}{% for i in [1, 2, 3] %}{% set ns.t = ns.t + i %}{% endfor %}{{ ns.t }}", {}),
    ("{% set a, b = [1, 2] %}{{ b }}{{ a }}{% set s %}  block {{ a }}  {% endset %}[{{ s }}]", {}),
    ("{% macro m(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 2) }}|{{ m(1, c=3) }}|{{ m(a='x', b='y') }}", {}),
    ("{{ '  x  ' | trim }}|{{ 'xxhixx'.strip('x') }}|{{ '  a b  '.lstrip() }}|{{ '--a--'.rstrip('-') }}|{{ 'AbC' | lower }}{{ 'abc' | upper }}{{ 'hello world' | title }}{{ 'hELLO' | capitalize }}", {}),
    ("{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a b c'.split(' ', 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ 'x'.split('x') }}", {}),
    ("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'abcabc'.replace('b', 'X') }}{{ 'abcabc' | replace('b', 'Y', 1) }}{{ 'banana'.find('an') }}{{ 'banana'.rfind('an') }}{{ 'banana'.count('a') }}", {}),
    ("{{ xs | length }}{{ xs | first }}{{ xs | last }}{{ xs | join('-') }}{{ xs | reverse | list }}{{ xs | sort }}{{ xs | sort(reverse=true) }}{{ xs | unique | list }}{{ xs | min }}{{ xs | max }}{{ xs | sum }}", {"xs": [3, 1, 2, 3]}),
    ("{{ ['b', 'A', 'a', 'C'] | sort }}{{ ['b', 'A', 'a'] | unique | list }}{{ ['b', 'A'] | sort(case_sensitive=true) }}", {}),
    ("{{ people | selectattr('age', 'gt', 30) | map(attribute='name') | join(',') }}|{{ people | rejectattr('admin') | map(attribute='name') | list }}|{{ people | map(attribute='name') | map('upper') | list }}|{{ people | sort(attribute='age') | map(attribute='name') | first }}", {"people": [{"name": "ann", "age": 41, "admin": True}, {"name": "bob", "age": 25}, {"name": "cy", "age": 33, "admin": False}]}),
    ("{{ [0, 1, '', 'a', none] | select | list }}{{ [1, 2, 3, 4] | select('even') | list }}{{ [1, 2, 3] | reject('odd') | list }}", {}),
    ("{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ none is none }}{{ x is string }}{{ x is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ d is mapping }}{{ d is iterable }}{{ x is iterable }}{{ 5 is divisibleby 5 }}{{ 'a' is in 'cat' }}{{ 3 is in [1, 3] }}{{ x is not none }}{{ true is true }}{{ 1 is true }}{{ false is sameas false }}", {"x": "s", "d": {}}),
    ("{{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ d | tojson(sort_keys=true) }}|{{ d | tojson(separators=(',', ':')) }}|{{ 'é\"\\n\\u0001' | tojson }}|{{ 1.0 | tojson }}|{{ [] | tojson(indent=2) }}", {"d": {"z": [1, 2.5, None, True], "a": {"b": "ü"}, "e": {}}}),
    ("{{ x | default('d') }}{{ none | default('d') }}{{ '' | default('d', true) }}{{ x | string }}{{ 3 | string }}{{ '42' | int + 1 }}{{ '4.7' | int }}{{ 'x' | int }}{{ 3 | float }}{{ -3 | abs }}", {}),
    ("{{ 'a' if x else 'b' }}{{ 'c' if y }}{{ x and y }}|{{ x or y }}|{{ not x }}{{ 1 < 2 < 3 }}{{ 1 < 3 < 2 }}{{ 'a' in 'abc' and 'z' not in 'abc' }}{{ [1] == [1] }}{{ 1 == 1.0 }}{{ 'a' != 'b' }}", {"x": 1, "y": 0}),
    ("{% if x %}a{% elif y %}b{% elif z %}c{% else %}d{% endif %}", {"x": 0, "y": "", "z": [1]}),
    ("  {% if true %}\n    indented\n  {% endif %}\n{{- ' stripped' }}  \n  {%+ if true %}kept{% endif %}\n{# comment #}\nend\n", {}),
    ("a  {%- if true -%}  b  {%- endif -%}  c\n{{ 'x' -}}\n   y {{- 'z' }}\n", {}),
    ("{% raw %}{{ not rendered }}{% endraw %} {{ '{{' }}", {}),
    ("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}", {}),
    ("{% filter upper %}shout {{ 'it' }}{% endfilter %}", {}),
    ("{{ 'line1\nline2\n\nline4' | indent(2) }}|{{ 'a\nb' | indent(4, true) }}", {}),
    ("{{ xs[10] }}{{ d.missing }}{{ d['missing'] }}{{ (d.missing or 'fallback') }}{{ xs[0] }}", {"xs": [1], "d": {}}),
    ("{{ strftime_now('%Y-%m-%d %H:%M') }} {{ strftime_now('%d %b %Y') }}", {}),
    ("{{ raise_exception('boom') }}", {}),
    ("{{ undefined_fn() }}", {}),
    ("{{ 1 + 'a' }}", {}),
    ("{% for x in 3 %}{% endfor %}", {}),
    ("{% if %}", {}),
    ("{% endif %}", {}),
    ("{{ x.y.z }}", {}),
    ("{{ 'a' ~ }}", {}),
    ("{% for m in messages %}{{ m['role'] }}:{{ m.content | length }};{% endfor %}{{ messages | length }}", {"messages": [{"role": "user", "content": "héllo"}, {"role": "assistant", "content": ""}]}),
    ("{{ 'x' * 3 }}{{ [1] * 2 }}{{ [1, 2] + [3] }}{{ 2 ** 0.5 }}{{ 10 / 4 }}{{ true + 1 }}", {}),
    ("{{ '%s' }}{{ \"'\" }}{{ '\\'' ~ \"\\\"\" }}{{ 'tab\\there' }}{{ '\\u00e9\\x41' }}", {}),
    ("{{ [1, [2, 3]] | tojson }} {{ {'a': 1}.items() | list }} {{ dict(a=1, b=2) }} {{ namespace(a=1).a }}", {}),
    # what jinja2 returns as generators: always true, no len(), consumed by list/join/for
    ("{{ 'y' if ([] | select) else 'n' }}{{ 'y' if (xs | selectattr('missing')) else 'n' }}{{ xs | select | list }}{{ xs | map('string') | join('+') }}{% for x in xs | reject('odd') %}{{ x }}{% endfor %}{{ (xs | unique | list) }}{{ none | select | list }}{{ (none | reject | reverse) }}", {"xs": [1, 2, 2, 3]}),
    ("{{ (xs | select) | length }}", {"xs": [1]}),
    ("{{ 'a %s b %d c %r %%' % ('x', 3.9, 'q') }}|{{ '%s!' % 5 }}|{{ 'plain' % {} }}", {}),
    ("{{ '%s %s' % ('one',) }}", {}),
    ("{{ 'hello wORLD-foo (bar) [baz]' | title }}|{{ 'hello wORLD'.title() }}|{{ 'é' is lower }}{{ 'É' is upper }}{{ -3 is lower }}{{ 'ÉCOLE'.isupper() }}{{ '٣'.isdigit() }}", {}),
    ("{{ 2.5 | round }} {{ 3 | round }} {{ 7 | round(1, 'floor') }} {{ true is even }} {{ 4.0 is divisibleby 2 }} {{ u is callable }} {{ 3 * 'ab' }} {{ 2 * (1,) }}", {}),
    ("{{ [1] + (2,) }}", {}),
    ("{{ [1] in {'a': 1} }}", {}),
    ("{{ u | int }}", {}),
    ("{{ [u, none] }} {{ xs | batch(2) | list }} {{ xs | batch(3, 0) | list }}", {"xs": [1, 2, 3, 4]}),
    ("{{ d | tojson(ensure_ascii=true) }} {{ d | tojson(true, 1, none, true) }}", {"d": {"é": "日本 🙂\u007f", "a": "x\u2028"}}),
]


def make_env():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(NOW).strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


_COMPILED = {}


def render(env, source, ctx):
    try:
        if source not in _COMPILED:
            _COMPILED[source] = env.from_string(source)
        return {"text": _COMPILED[source].render(**copy.deepcopy(ctx))}
    except Exception as e:  # jinja2 raised: coli must fail too
        return {"error": f"{type(e).__name__}: {e}"}


def template_lines(env, name, file, convs, thinking, extras):
    with open(os.path.join(DIR, file), encoding="utf-8") as f:
        source = f.read()
    lines = []
    for msgs, tools in convs:
        for gen in (True, False):
            for think in thinking:
                for extra in extras:
                    ctx = {"messages": msgs, "tools": tools, "documents": None,
                           "add_generation_prompt": gen,
                           "bos_token": BOS.get(name, ""), "eos_token": EOS.get(name, "")}
                    if think is not None:
                        ctx["enable_thinking"] = think
                    ctx.update(extra)
                    r = render(env, source, ctx)
                    lines.append({"template": file, "context": ctx, "now": NOW, **r})
    return lines


def inline_lines(env):
    return [{"source": src, "context": ctx, "now": NOW, **render(env, src, ctx)}
            for src, ctx in INLINE]


def outputs():
    env = make_env()
    out = {}
    for name, file, convs, thinking, extras in TEMPLATES:
        out[f"{name}_render.jsonl"] = template_lines(env, name, file, convs, thinking, extras)
    out["inline_render.jsonl"] = inline_lines(env)
    return out


PIECES = ["Hi", "Say hi in French.", "  padded  ", "\n\nnewlines\n", "日本語 🙂", "«ça va?»",
          "tab\there", "<think>plan</think>answer", "<think>\na\n</think>\n\nb", "</think>x",
          "a</think>b</think>c", "<tool_response>r</tool_response>", "{\"k\": [1, 2]}", "",
          " ", "x" * 40, "quote ' and \" and \\ backslash", "/nothink", "<|im_end|>"]


def random_conversation(rng, string_args):
    """messages, tools and keywords drawn from the shapes the fixed conversations use"""
    def text():
        return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 3)))
    msgs = []
    if rng.random() < 0.6:
        msgs.append({"role": "system", "content": text()})
    for turn in range(rng.randint(1, 4)):
        msgs.append({"role": "user", "content": text()})
        if turn == 0 and rng.random() < 0.1:
            msgs.append({"role": "system", "content": text()})
        r = rng.random()
        if r < 0.25:
            name, args = rng.choice([("get_weather", ARGS), ("search", {"query": text(), "tags": []})])
            calls = [call(name, args, string_args) for _ in range(rng.choice([1, 1, 2]))]
            content = rng.choice(["", None, text()])
            m = {"role": "assistant", "content": content, "tool_calls": calls}
            if rng.random() < 0.3:
                m["reasoning_content"] = text()
            msgs.append(m)
            for _ in calls:
                msgs.append({"role": "tool", "content": text()})
            if rng.random() < 0.7:
                msgs.append({"role": "assistant", "content": text()})
        elif r < 0.85:
            m = {"role": "assistant", "content": text()}
            if rng.random() < 0.3:
                m["reasoning_content"] = text()
            msgs.append(m)
    if rng.random() < 0.3 and msgs[-1]["role"] == "assistant":
        msgs.pop()
    tools = rng.choice([None, None, TOOLS, [WEATHER]])
    kw = {}
    t = rng.random()
    if t < 0.3:
        kw["enable_thinking"] = False
    elif t < 0.5:
        kw["enable_thinking"] = True
    return msgs, tools, kw


def random_corpus(n, seed, out):
    """n random conversations a template, rendered by jinja2, into out/chat/ with the
    templates, for tests/jinja/render_cases to compare (FIXTURES=out)"""
    import random
    env = make_env()
    os.makedirs(os.path.join(out, "chat"), exist_ok=True)
    total = errs = 0
    for name, file, _convs, _thinking, _extras in TEMPLATES:
        rng = random.Random(f"{seed}/{name}")
        with open(os.path.join(DIR, file), encoding="utf-8") as f:
            source = f.read()
        with open(os.path.join(out, "chat", file), "w", encoding="utf-8") as f:
            f.write(source)
        lines = []
        for _ in range(n):
            msgs, tools, kw = random_conversation(rng, name.startswith("deepseek"))
            if name == "gpt_oss":  # its tool calls carry thinking, not reasoning_content
                for m in msgs:
                    if "reasoning_content" in m:
                        m["thinking"] = m.pop("reasoning_content")
            ctx = {"messages": msgs, "tools": tools, "documents": None,
                   "add_generation_prompt": rng.random() < 0.8,
                   "bos_token": BOS.get(name, ""), "eos_token": EOS.get(name, ""), **kw}
            lines.append({"template": file, "context": ctx, "now": NOW, **render(env, source, ctx)})
        with open(os.path.join(out, "chat", f"{name}_render.jsonl"), "w", encoding="utf-8") as f:
            f.write("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
        total += len(lines)
        errs += sum("error" in x for x in lines)
    print(f"wrote {total} random renderings ({errs} where jinja2 raises) to {out}/chat")


EXPR_ATOMS = ["1", "0", "-3", "2.5", "0.1", "'a'", "'Hello World'", "''", "' x '", "'é🙂'", "none",
              "true", "false", "[1, 2, 3]", "[]", "['b', 'A', 'a']", "{'k': 1, 'j': [2]}", "{}",
              "(1, 'x')", "xs", "d", "s", "n", "f", "u", "people", "msg", "msg.content",
              "msg['role']", "xs[0]", "xs[-1]", "d.k", "d['missing']", "s[1:3]", "s[::-1]", "xs[::2]"]
EXPR_BIN = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "<=", ">=", "in", "not in",
            "and", "or", "**"]
EXPR_FILTERS = ["length", "string", "upper", "lower", "trim", "first", "last", "list", "reverse",
                "sort", "unique", "join", "join(', ')", "tojson", "tojson(indent=1)",
                "default('D')", "default('D', true)", "int", "float", "abs", "round", "capitalize",
                "title", "items", "dictsort", "sum", "min", "max", "select", "reject",
                "map('string')", "map(attribute='name')", "selectattr('age')",
                "rejectattr('age', 'gt', 30)", "replace('a', 'b')", "indent(2)", "count",
                "batch(2)"]
EXPR_TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping",
              "iterable", "sequence", "odd", "even", "true", "false", "boolean", "lower", "upper",
              "divisibleby 2", "in [1, 2]", "sameas none", "callable"]
EXPR_METHODS = [".strip()", ".upper()", ".split()", ".split(',')", ".startswith('H')",
                ".endswith('d')", ".replace('l', 'L')", ".lstrip('H')", ".rstrip()", ".title()",
                ".find('o')", ".count('l')", ".get('k')",
                ".get('z', 0)", ".index(2)", ".splitlines()", ".isdigit()"]
EXPR_CTX = {"xs": [3, 1, 2], "d": {"k": "v", "a": 1}, "s": "Hello, World", "n": 7, "f": -1.5,
            "people": [{"name": "ann", "age": 41}, {"name": "bob", "age": 25}],
            "msg": {"role": "user", "content": "hi"}}


def random_expr(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rng.choice(EXPR_ATOMS)
    sub = lambda: random_expr(rng, depth + 1)  # noqa: E731
    if r < 0.5:
        return f"({sub()} {rng.choice(EXPR_BIN)} {sub()})"
    if r < 0.65:
        return f"({sub()} | {rng.choice(EXPR_FILTERS)})"
    if r < 0.75:
        return f"({sub()} is {rng.choice(['', 'not '])}{rng.choice(EXPR_TESTS)})"
    if r < 0.85:
        return f"({sub()}){rng.choice(EXPR_METHODS)}"
    if r < 0.92:
        return f"({sub()} if {sub()} else {sub()})"
    return f"(not {sub()})"


def shows_an_address(text):
    """jinja2 printed a generator or a dict view (its repr: an address, a type name):
    no template depends on that text, and coli prints it differently"""
    norm = re.sub(r"[^a-z0-9]", "", re.sub(r"\d+:", "", text.lower()))
    return any(k in norm for k in ("0x7", "objectat", "generatorobject", "iteratorobject",
                                   "dictkeys", "dictvalues", "dictitems"))


class _Printed(Exception):
    """raised when a probed generator is turned into text"""


class _ProbeIter:
    """an iterator whose text would show an address: printing it stops the render"""

    def __init__(self, it):
        self.it = iter(it)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.it)

    def __str__(self):
        raise _Printed()

    __repr__ = __str__


def probe_env():
    """make_env() whose generator-returning filters return _ProbeIter: a render that
    prints one (its text would hold an address, directly or through ~, max, title...)
    raises _Printed"""
    env = make_env()
    for name in ("map", "select", "reject", "selectattr", "rejectattr", "unique", "items",
                 "batch", "reverse"):
        f = env.filters[name]

        def wrapped(*a, _f=f, **k):
            r = _f(*a, **k)
            return r if isinstance(r, (str, list, tuple, dict)) else _ProbeIter(r)
        for attr in ("jinja_pass_arg",):
            if hasattr(f, attr):
                setattr(wrapped, attr, getattr(f, attr))
        env.filters[name] = wrapped
    return env


def random_exprs(n, seed, out):
    """n random expressions over EXPR_CTX (operators, filters, tests, methods, conditionals;
    a fifth of them iterated by a for loop), rendered by jinja2, into out/chat/
    inline_render.jsonl; cases whose text shows an address are left out"""
    import random
    rng = random.Random(f"{seed}/expr")
    env, probe = make_env(), probe_env()
    lines = []
    while len(lines) < n:
        if rng.random() < 0.2:
            src = ("{% for x in " + random_expr(rng) +
                   " %}{{ loop.index }}:{{ x }};{% else %}E{% endfor %}")
        else:
            src = "{{ " + random_expr(rng) + " }}"
        r = render(env, src, EXPR_CTX)
        if "text" in r and shows_an_address(r["text"]):
            continue
        try:  # a generator turned into text, even where the address does not show
            probe.from_string(src).render(**copy.deepcopy(EXPR_CTX))
        except _Printed:
            continue
        except Exception:  # noqa: BLE001 (jinja2 raised: the case says so)
            pass
        if "text" in r and r["text"].endswith("j)"):  # a complex number
            continue
        lines.append({"source": src, "context": EXPR_CTX, "now": NOW, **r})
    os.makedirs(os.path.join(out, "chat"), exist_ok=True)
    with open(os.path.join(out, "chat", "inline_render.jsonl"), "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines))
    errs = sum("error" in x for x in lines)
    print(f"wrote {n} random expressions ({errs} where jinja2 raises) to {out}/chat")


def main():
    if "--random-expr" in sys.argv:
        a = sys.argv
        random_exprs(int(a[a.index("--random-expr") + 1]),
                     a[a.index("--seed") + 1] if "--seed" in a else "0",
                     a[a.index("--out") + 1])
        if "--random" not in a:
            return 0
    if "--random" in sys.argv:
        a = sys.argv
        random_corpus(int(a[a.index("--random") + 1]),
                      a[a.index("--seed") + 1] if "--seed" in a else "0",
                      a[a.index("--out") + 1])
        return 0
    bad = 0
    check = "--check" in sys.argv[1:]
    for fname, lines in outputs().items():
        text = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
        path = os.path.join(DIR, fname)
        if check:
            try:
                with open(path, encoding="utf-8") as f:
                    same = f.read() == text
            except FileNotFoundError:
                same = False
            if not same:
                print(f"{path} differs from jinja2's renderings: "
                      "run python3 tools/ref/jinja_render_cases.py", file=sys.stderr)
                bad = 1
                continue
            print(f"ok  {fname}: {len(lines)} cases match jinja2 {jinja2.__version__}")
            continue
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        errs = sum("error" in x for x in lines)
        print(f"wrote {path}: {len(lines)} cases ({errs} where jinja2 raises)")
    return bad


if __name__ == "__main__":
    sys.exit(main())
