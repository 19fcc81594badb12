"""tests/daemon/harmony_call_py.py — gpt-oss's <|call|> ends the assistant's turn as
<|return|> does, where generation_config does not list it among the EOS ids.

The gpt_oss fixture converted with gpt-oss's chat template (the harmony family) and its
tokenizer's added token 1022 renamed <|call|> (its EOS ids stay 1021 and 1023): a chat
request whose logit_bias forces 1022 must end at once, finish_reason "stop" and no
completion token, where without the rule it would run to max_tokens."""
import json
import os
import subprocess

from colid_util import COLI, FIXTURES, TMP, Colid, check, post


def main():
    src, out = os.path.join(TMP, "harmony_src"), os.path.join(TMP, "harmony.coli")
    os.makedirs(src, exist_ok=True)
    for f in ("config.json", "generation_config.json", "model.safetensors",
              "tokenizer_config.json"):
        os.symlink(os.path.abspath(os.path.join(FIXTURES, "gpt_oss", f)), os.path.join(src, f))
    with open(os.path.join(FIXTURES, "gpt_oss", "tokenizer.json")) as f:
        tok = json.load(f)
    call = [a for a in tok["added_tokens"] if a["id"] == 1022]
    check(len(call) == 1, "no added token 1022 in the gpt_oss fixture")
    call[0]["content"] = "<|call|>"
    with open(os.path.join(src, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    os.symlink(os.path.abspath(os.path.join(FIXTURES, "chat", "gpt_oss_chat_template.jinja")),
               os.path.join(src, "chat_template.jinja"))
    r = subprocess.run([COLI, "convert", src, "-o", out], capture_output=True, text=True)
    check(r.returncode == 0, "convert: " + r.stderr[-400:])
    srv = Colid(out, "--ctx", "2048", "--ctx-override")
    try:
        st, _, data = post(srv.port, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "call a tool"}], "max_tokens": 8,
            "temperature": 0, "logit_bias": {"1022": 100}})
        check(st == 200, "HTTP %d %s" % (st, data[:300]))
        b = json.loads(data)
        c = b["choices"][0]
        check(c["finish_reason"] == "stop" and b["usage"]["completion_tokens"] == 0,
              "<|call|> did not end the turn: %s" % data[:400])
        # the same without the bias runs on (the rule is the token, not the request)
        st, _, data = post(srv.port, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "call a tool"}], "max_tokens": 8,
            "temperature": 0, "logit_bias": {"1022": -100}})
        b = json.loads(data)
        check(st == 200 and b["usage"]["completion_tokens"] > 0, "baseline: %s" % data[:300])
        print("ok  <|call|> ends the turn (finish stop, 0 tokens); %d tokens without it" %
              b["usage"]["completion_tokens"])
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
