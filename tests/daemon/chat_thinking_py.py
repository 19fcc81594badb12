"""tests/daemon/chat_thinking_py.py — chat_template_kwargs.enable_thinking through colid.

olmoe's checkpoint converted with GLM-4.5's chat template, then with MiniMax-M2's,
DeepSeek-V3.1's and Kimi-K2's (tests/fixtures/chat/): colid renders a chat request, and usage.prompt_tokens must be the
token count of jinja2's rendering of that template (tests/fixtures/chat/*_cases.jsonl,
counted with `coli tokenize` on the same model): GLM with the switch left out, true or null
(thinking on, the template's default) and false (user turns end in /nothink, the prompt in
<think></think>); MiniMax-M2 and Kimi-K2, whose templates have no switch, the same count
either way; DeepSeek-V3.1, whose template thinks only when asked, true alone opens <think>.
Each twice: with the model's template rendered by core/jinja (colid's default) and with
--chat-template builtin (the family's C renderer). Then the refusals: a non-boolean value,
a non-object, the field on /v1/completions; a variable the template does not read is
accepted and changes nothing."""
import json
import os
import subprocess

from colid_util import COLI, FIXTURES, TMP, Colid, check, fail, post

S = {"role": "system", "content": "You are terse."}
U1 = {"role": "user", "content": "Say hi in French."}
MSGS = [S, U1]
FILES = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
         "tokenizer_config.json"]


def model_with(template, name):
    """olmoe's checkpoint with chat/template as its chat_template.jinja, converted
    (once: both renderers use the same model)."""
    src, out = os.path.join(TMP, name + "_src"), os.path.join(TMP, name + ".coli")
    if os.path.exists(out):
        return out
    os.makedirs(src, exist_ok=True)
    for f in FILES:
        os.symlink(os.path.abspath(os.path.join(FIXTURES, "olmoe", f)), os.path.join(src, f))
    os.symlink(os.path.abspath(os.path.join(FIXTURES, "chat", template)),
               os.path.join(src, "chat_template.jinja"))
    r = subprocess.run([COLI, "convert", src, "-o", out], capture_output=True, text=True)
    check(r.returncode == 0, "convert %s: %s" % (name, r.stderr.strip()))
    return out


def jinja_tokens(model, cases, think, bos=None):
    """Token count of jinja2's rendering of MSGS (generation prompt on, enable_thinking
    think: None = not given) through the model's tokenizer. bos: the BOS text the case
    was rendered with, to drop: the Jinja renderer passes the model's own bos_token,
    and olmoe's tokenizer has none (transformers would pass none either)."""
    with open(os.path.join(FIXTURES, "chat", cases), encoding="utf-8") as f:
        for line in f:
            c = json.loads(line)
            if c["messages"] == MSGS and c["add_generation_prompt"] and \
                    c["enable_thinking"] is think:
                text = c["text"]
                if bos and text.startswith(bos):
                    text = text[len(bos):]
                r = subprocess.run([COLI, "tokenize", "-m", model, text],
                                   capture_output=True, text=True)
                check(r.returncode == 0, "coli tokenize: " + r.stderr.strip())
                return len(r.stdout.split())
    fail("%s has no case for %r with enable_thinking %r" % (cases, MSGS, think))


def prompt_tokens(port, kwargs, absent=False):
    body = {"messages": MSGS, "max_tokens": 1, "temperature": 0}
    if not absent:
        body["chat_template_kwargs"] = kwargs
    st, _, data = post(port, "/v1/chat/completions", body)
    check(st == 200, "chat with %r: %d %s" % (kwargs, st, data[:300]))
    return json.loads(data)["usage"]["prompt_tokens"]


def refused(port, path, body, needle):
    st, _, data = post(port, path, body)
    err = json.loads(data).get("error", {}) if data.startswith(b"{") else {}
    check(st == 400 and needle in err.get("message", ""),
          "%r on %s: %d %s, want 400 naming %r" % (body, path, st, data[:300], needle))
    print("ok  refused: %s" % err["message"][:100])


def family(name, template, cases, differ, on_case=None, renderer="jinja"):
    """on_case: the enable_thinking of the case that true must match (None: the
    template's default is thinking on). renderer: jinja (the default: the model's
    template through core/jinja) or builtin (--chat-template builtin: the family's C
    renderer)."""
    model = model_with(template, name)
    bos = "<｜begin▁of▁sentence｜>" if renderer == "jinja" else None
    on, off = jinja_tokens(model, cases, on_case, bos), jinja_tokens(model, cases, False, bos)
    default = jinja_tokens(model, cases, None, bos)
    check((on != off) == differ, "%s: jinja2 renderings on %d / off %d tokens" % (name, on, off))
    srv = Colid(model, "--chat-template", "auto" if renderer == "jinja" else renderer)
    try:
        want_line = "chat template %s (family %s" % ("jinja" if renderer == "jinja" else name,
                                                      name)
        check(want_line in srv.log(),
              "%s: %r not in the start line: %s" % (name, want_line, srv.log()[-600:]))
        got = {"absent": prompt_tokens(srv.port, None, absent=True),
               "null": prompt_tokens(srv.port, {"enable_thinking": None}),
               "true": prompt_tokens(srv.port, {"enable_thinking": True}),
               "empty": prompt_tokens(srv.port, {}),
               "false": prompt_tokens(srv.port, {"enable_thinking": False})}
        for k, v in got.items():
            want = {"false": off, "true": on}.get(k, default)
            check(v == want, "%s: enable_thinking %s: prompt_tokens %d, jinja2's text %d"
                  % (name, k, v, want))
        print("ok  %s (%s): prompt tokens %s equal jinja2's (on %d, off %d)"
              % (name, renderer, got, on, off))
        if name == "glm" and renderer == "jinja":
            refused(srv.port, "/v1/chat/completions",
                    {"messages": MSGS, "chat_template_kwargs": {"enable_thinking": "no"}},
                    "must be a boolean")
            check(prompt_tokens(srv.port, {"tools_style": 1}) == default,
                  "a variable the template does not read changed the prompt")
            refused(srv.port, "/v1/chat/completions",
                    {"messages": MSGS, "chat_template_kwargs": [1]}, "must be an object")
            refused(srv.port, "/v1/completions",
                    {"prompt": "hi", "chat_template_kwargs": {"enable_thinking": False}},
                    "Unrecognized request argument supplied: chat_template_kwargs")
    finally:
        rc = srv.stop()
    check(rc == 0, "%s: colid exited %d" % (name, rc))


for how in ("jinja", "builtin"):
    family("glm", "glm45_chat_template.jinja", "glm45_cases.jsonl", True, None, how)
    family("minimax", "minimax_m2_chat_template.jinja", "minimax_m2_cases.jsonl", False, None,
           how)
    family("deepseek", "deepseek_v31_chat_template.jinja", "deepseek_v31_cases.jsonl", True,
           True, how)
    family("kimi", "kimi_k2_chat_template.jinja", "kimi_k2_cases.jsonl", False, None, how)
