"""tests/daemon/openai_tools_py.py — a whole tool-call round trip through the official
openai Python client: tools in, the call forced (tool_choice naming the function, then
"required" among two, then streamed), tool_calls out with arguments that hold under the
tool's parameters schema, the tool's result sent back as a `tool` message, a final
answer. The demo model (random as to tools) rendered with Qwen3's chat template
(--chat-template), so the calls are constrained decoding's, in Hermes <tool_call> form."""
import json
import os
import subprocess

import openai
from colid_util import COLI, FIXTURES, Colid, check

ROOT = os.environ.get("ROOT", ".")
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 20},
        "unit": {"enum": ["C", "F"]},
        "days": {"type": "integer"}},
        "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "parameters": {"type": "object", "properties": {
        "zone": {"type": "string", "maxLength": 8}}, "required": ["zone"],
        "additionalProperties": False}}}


def weather_args(a):
    """The arguments hold under WEATHER's parameters (written out: no validator here)."""
    check(isinstance(a, dict) and set(a) <= {"city", "unit", "days"}, "keys %r" % a)
    check(isinstance(a.get("city"), str) and len(a["city"]) <= 20, "city %r" % a)
    check(a.get("unit") in ("C", "F"), "unit %r" % a)
    check("days" not in a or (isinstance(a["days"], int) and not isinstance(a["days"], bool)),
          "days %r" % a)


def main():
    model = os.path.join(ROOT, os.environ.get("BUILD", "build"), "demo.coli")
    if not os.path.exists(model):
        r = subprocess.run([COLI, "convert", os.path.join(ROOT, "models", "demo"), "-o", model],
                           capture_output=True, text=True)
        check(r.returncode == 0, "convert demo: " + r.stderr[-400:])
    srv = Colid(model, "--chat-template",
                os.path.join(FIXTURES, "chat", "qwen3_chat_template.jinja"))
    try:
        cli = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
        msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
        r = cli.chat.completions.create(
            model="demo", messages=msgs, tools=[WEATHER, TIME], max_tokens=300, temperature=0,
            tool_choice={"type": "function", "function": {"name": "get_weather"}})
        c = r.choices[0]
        check(c.finish_reason == "tool_calls", "finish_reason %r: %r" % (c.finish_reason,
                                                                         c.message))
        check(len(c.message.tool_calls) == 1, "calls %r" % c.message.tool_calls)
        call = c.message.tool_calls[0]
        check(call.function.name == "get_weather", "name %r" % call.function.name)
        weather_args(json.loads(call.function.arguments))
        print("ok  forced call: get_weather(%s)" % call.function.arguments)

        # content "": Qwen3's template reads it as text (None raises there, as in jinja2)
        msgs.append({"role": "assistant", "content": "",
                     "tool_calls": [t.model_dump() for t in c.message.tool_calls]})
        msgs.append({"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C."})
        r = cli.chat.completions.create(model="demo", messages=msgs, tools=[WEATHER, TIME],
                                        max_tokens=24, temperature=0)
        c = r.choices[0]
        check(c.message.role == "assistant" and c.finish_reason in ("stop", "length"),
              "final: %r %r" % (c.finish_reason, c.message))
        check(c.finish_reason != "tool_calls" or c.message.tool_calls, "final %r" % c.message)
        check(r.usage.prompt_tokens > 40, "the tool turn did not reach the prompt: %r" % r.usage)
        print("ok  final answer after the tool result (%d prompt tokens): %r" %
              (r.usage.prompt_tokens, (c.message.content or "")[:40]))

        # "required" among two tools, two sampled choices: each a call of one of them
        r = cli.chat.completions.create(model="demo", messages=msgs[:1], tools=[WEATHER, TIME],
                                        tool_choice="required", max_tokens=300, n=2,
                                        temperature=1, seed=3)
        for c in r.choices:
            check(c.finish_reason == "tool_calls" and len(c.message.tool_calls) == 1,
                  "required: %r" % c)
            f = c.message.tool_calls[0].function
            a = json.loads(f.arguments)
            if f.name == "get_weather":
                weather_args(a)
            else:
                check(f.name == "get_time" and set(a) == {"zone"} and
                      isinstance(a["zone"], str) and len(a["zone"]) <= 8, "get_time %r" % a)
        print("ok  tool_choice required: %s" % [c.message.tool_calls[0].function.name
                                                for c in r.choices])

        # streamed: the call arrives as tool_calls deltas
        name, args, finish = "", "", None
        for ch in cli.chat.completions.create(
                model="demo", messages=msgs[:1], tools=[WEATHER], max_tokens=300,
                temperature=0, stream=True,
                tool_choice={"type": "function", "function": {"name": "get_weather"}}):
            for c in ch.choices:
                for tc in c.delta.tool_calls or []:
                    name += tc.function.name or ""
                    args += tc.function.arguments or ""
                finish = c.finish_reason or finish
        check(name == "get_weather" and finish == "tool_calls", "stream: %r %r" % (name, finish))
        weather_args(json.loads(args))
        print("ok  streamed forced call: %s(%s)" % (name, args))

        # refused: a call forced without tools, an unknown name
        for body, word in [({"tool_choice": "required"}, "no 'tools'"),
                           ({"tools": [WEATHER], "tool_choice": {
                               "type": "function", "function": {"name": "nope"}}}, "nope")]:
            try:
                cli.chat.completions.create(model="demo", messages=msgs[:1], max_tokens=4,
                                            **body)
                check(False, "not refused: %r" % body)
            except openai.BadRequestError as ex:
                check(word in str(ex), "%r: %s" % (body, ex))
        print("ok  refused: required without tools, an unknown function")
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
