"""tests/daemon/chat_tools_py.py — a chat request with tools through colid's Jinja renderer.

olmoe's checkpoint converted with Qwen3's chat template (tests/fixtures/chat/): for every
conversation of tests/fixtures/chat/qwen3_render.jsonl (jinja2's renderings) that has
tools or a tool-calling turn, with the generation prompt and the thinking switch left out
or off, colid renders the request {messages, tools, chat_template_kwargs} and its
usage.prompt_tokens must be the token count of jinja2's text (`coli tokenize` on the same
model). Then the same model under --chat-template builtin refuses tools (400 naming
'tools'), and a template that raises (Qwen3's on a None content it reads) is a 400."""
import json
import os
import subprocess

from colid_util import COLI, FIXTURES, TMP, Colid, check, post

FILES = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
         "tokenizer_config.json"]


def model_with(template, name):
    src, out = os.path.join(TMP, name + "_src"), os.path.join(TMP, name + ".coli")
    os.makedirs(src, exist_ok=True)
    for f in FILES:
        os.symlink(os.path.abspath(os.path.join(FIXTURES, "olmoe", f)), os.path.join(src, f))
    os.symlink(os.path.abspath(os.path.join(FIXTURES, "chat", template)),
               os.path.join(src, "chat_template.jinja"))
    r = subprocess.run([COLI, "convert", src, "-o", out], capture_output=True, text=True)
    check(r.returncode == 0, "convert %s: %s" % (name, r.stderr.strip()))
    return out


def tokens(model, text):
    r = subprocess.run([COLI, "tokenize", "-m", model, text], capture_output=True, text=True)
    check(r.returncode == 0, "coli tokenize: " + r.stderr.strip())
    return len(r.stdout.split())


def main():
    model = model_with("qwen3_chat_template.jinja", "qwen3")
    cases = []
    with open(os.path.join(FIXTURES, "chat", "qwen3_render.jsonl"), encoding="utf-8") as f:
        for line in f:
            c = json.loads(line)
            ctx = c["context"]
            tooly = ctx["tools"] or any("tool_calls" in m or m["role"] == "tool"
                                        for m in ctx["messages"])
            if tooly and ctx["add_generation_prompt"] and ctx.get("enable_thinking") in (None,
                                                                                       False):
                cases.append(c)
    check(len(cases) >= 8, "only %d tool cases in qwen3_render.jsonl" % len(cases))
    srv = Colid(model, "--ctx", "2048", "--ctx-override")  # tool schemas are long
    n_ok = n_err = 0
    try:
        check("chat template jinja" in srv.log(), "not the Jinja renderer: " + srv.log()[-400:])
        for c in cases:
            ctx = c["context"]
            body = {"messages": ctx["messages"], "max_tokens": 1, "temperature": 0}
            if ctx["tools"]:
                body["tools"] = ctx["tools"]
            if "enable_thinking" in ctx:
                body["chat_template_kwargs"] = {"enable_thinking": ctx["enable_thinking"]}
            st, _, data = post(srv.port, "/v1/chat/completions", body)
            if "error" in c:
                check(st == 400, "jinja2 raised (%s) but colid answered %d" % (c["error"], st))
                n_err += 1
                continue
            check(st == 200, "chat with tools: %d %s" % (st, data[:300]))
            got, want = json.loads(data)["usage"]["prompt_tokens"], tokens(model, c["text"])
            check(got == want, "prompt_tokens %d, jinja2's text %d tokens: %s"
                  % (got, want, json.dumps(body)[:300]))
            n_ok += 1
        print("ok  %d tool conversations: prompt tokens equal jinja2's; %d refused where "
              "jinja2 raises" % (n_ok, n_err))
    finally:
        rc = srv.stop()
    check(rc == 0, "colid exited %d" % rc)
    srv = Colid(model, "--chat-template", "builtin")
    try:
        st, _, data = post(srv.port, "/v1/chat/completions",
                           {"messages": cases[0]["context"]["messages"][:2], "max_tokens": 1,
                            "tools": cases[0]["context"]["tools"] or [{"type": "function"}]})
        err = json.loads(data).get("error", {})
        check(st == 400 and err.get("param") == "tools",
              "builtin renderer with tools: %d %s" % (st, data[:300]))
        print("ok  --chat-template builtin refuses tools: " + err["message"][:100])
    finally:
        rc = srv.stop()
    check(rc == 0, "colid exited %d" % rc)


main()
