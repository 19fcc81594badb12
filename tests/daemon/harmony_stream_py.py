"""tests/daemon/harmony_stream_py.py — a harmony model (gpt-oss's channels) streams a plain
completion token by token; only its chat replies are held to the end, where the channels
are parsed (tools/colid/colid_answer.c, k->held).

The gpt_oss fixture converted with gpt-oss's chat template (the harmony family), served
with --debug-token-delay-ms (DELAY_MS before each token) and its EOS ids biased away, so a
reply runs its N tokens over at least N * DELAY_MS:
  - /v1/completions streamed: at least 3 text chunks, the first received at least 3
    tokens' delay before the stream's finish chunk (held to the end, as before, it came
    after the last token, as one chunk), and their text joined is the non-streamed reply's;
  - /v1/chat/completions streamed: still held, one delta with the whole reply's message
    (reasoning_content and content as the non-streamed reply's)."""
import http.client
import json
import os
import subprocess
import time

from colid_util import COLI, FIXTURES, TMP, Colid, check, fail, post

DELAY_MS = 100
N = 8
NO_EOS = {"1021": -100, "1023": -100}


def stream(port, path, body):
    """[(seconds since the request, payload)] of the stream's data: events, as received."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    t0 = time.monotonic()
    c.request("POST", path, body=json.dumps(dict(body, stream=True)),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        fail("%s stream: HTTP %d %s" % (path, r.status, r.read()[:300]))
    out = []
    while True:
        line = r.readline()
        if not line:
            break
        if line.startswith(b"data: "):
            out.append((time.monotonic() - t0, line[6:].strip().decode()))
    c.close()
    check(out and out[-1][1] == "[DONE]", "%s stream did not end with [DONE]: %r" % (path, out[-3:]))
    return [(t, json.loads(p)) for t, p in out[:-1]]


def main():
    src, out = os.path.join(TMP, "harmony_src"), os.path.join(TMP, "harmony.coli")
    os.makedirs(src, exist_ok=True)
    for f in ("config.json", "generation_config.json", "model.safetensors",
              "tokenizer_config.json", "tokenizer.json"):
        os.symlink(os.path.abspath(os.path.join(FIXTURES, "gpt_oss", f)), os.path.join(src, f))
    os.symlink(os.path.abspath(os.path.join(FIXTURES, "chat", "gpt_oss_chat_template.jinja")),
               os.path.join(src, "chat_template.jinja"))
    r = subprocess.run([COLI, "convert", src, "-o", out], capture_output=True, text=True)
    check(r.returncode == 0, "convert: " + r.stderr[-400:])
    srv = Colid(out, "--ctx", "2048", "--ctx-override", "--parallel", "1",
                "--debug-token-delay-ms", str(DELAY_MS))
    try:
        # completions: whole, then streamed
        body = {"prompt": "The quick brown fox", "max_tokens": N, "temperature": 0,
                "logit_bias": NO_EOS}
        st, _, data = post(srv.port, "/v1/completions", body)
        check(st == 200, "completions: HTTP %d %s" % (st, data[:300]))
        whole = json.loads(data)
        check(whole["usage"]["completion_tokens"] == N,
              "completions ran %d tokens, not %d: %s" % (whole["usage"]["completion_tokens"],
                                                         N, data[:300]))
        text = whole["choices"][0]["text"]
        ev = stream(srv.port, "/v1/completions", body)
        texts = [(t, e["choices"][0]["text"]) for t, e in ev
                 if e["choices"] and e["choices"][0]["text"]]
        fin = [t for t, e in ev if e["choices"] and e["choices"][0]["finish_reason"]]
        check(len(fin) == 1, "completions stream: %d finish chunks" % len(fin))
        joined = "".join(x for _, x in texts)
        check(joined == text, "completions stream %r != whole reply %r" % (joined, text))
        check(len(texts) >= 3,
              "completions stream: %d text chunks for %d tokens (held to the end?)" %
              (len(texts), N))
        lead = fin[0] - texts[0][0]
        check(lead >= 3 * DELAY_MS / 1000,
              "completions stream: first text %.3f s, finish %.3f s: not before the last "
              "tokens (%d ms a token)" % (texts[0][0], fin[0], DELAY_MS))
        # chat: held to the end (one delta), the same message as the whole reply
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": N,
                "temperature": 0, "logit_bias": NO_EOS}
        st, _, data = post(srv.port, "/v1/chat/completions", body)
        check(st == 200, "chat: HTTP %d %s" % (st, data[:300]))
        msg = json.loads(data)["choices"][0]["message"]
        ev = stream(srv.port, "/v1/chat/completions", body)
        deltas = [e["choices"][0]["delta"] for _, e in ev
                  if e["choices"] and (e["choices"][0]["delta"].get("content") or
                                       e["choices"][0]["delta"].get("reasoning_content"))]
        check(len(deltas) == 1, "chat stream: %d text deltas, not 1 (held)" % len(deltas))
        for f in ("content", "reasoning_content"):
            check((deltas[0].get(f) or None) == (msg.get(f) or None),
                  "chat stream %s %r != whole reply's %r" % (f, deltas[0].get(f), msg.get(f)))
        print("ok  harmony completions stream: %d text chunks, the first %.2f s before the "
              "finish (%d tokens, %d ms each), text as whole; chat held: 1 delta" %
              (len(texts), lead, N, DELAY_MS))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
