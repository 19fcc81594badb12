"""tests/daemon/observe_py.py — colid's observability routes over raw HTTP
(docs/api.md, "Tokenizing", "Metrics", "Access log"):

- /tokenize gives the ids `coli tokenize` gives (the engine's own tokenizer,
  another process) for texts with spaces, Unicode and a special token;
  /detokenize of them gives `coli tokenize --decode`'s text; both names of
  each field are accepted;
- bad bodies (not JSON, wrong types, unknown keys, ids outside the
  vocabulary, over --max-body-bytes, GET) get the right 4xx with an OpenAI
  error object naming the field;
- after a mix of whole and streamed, chat and completion requests, each
  /metrics histogram is well formed (cumulative buckets, +Inf = _count) and
  counts what was made: TTFT and queue time one per generation request,
  inter-token gaps sum(completion_tokens - 1) from the replies' usage; the
  batch loop's step histograms (--parallel 2) one forward and one host
  observation a step, at least a step a generated token (requests come one
  at a time);
- --access-log writes one line per HTTP request with the method, path,
  status and token counts of each (as a multiset: a line is written after
  its reply is out, so the next request's may come first)."""
import json
import os
import re
import subprocess

from colid_util import COLI, TMP, Colid, check, convert, post, request, sse_events

model = convert("qwen3_moe")
log = os.path.join(TMP, "access.log")
srv = Colid(model, "--max-body-bytes", "4096", "--access-log", log, "--parallel", "2")
port = srv.port
made = []  # (method, path, status) of every request, for the access log


def call(method, path, body=None):
    st, hd, data = request(port, method, path, body)
    made.append((method, path, st))
    return st, hd, data


# ---- /tokenize, /detokenize vs coli tokenize ----
texts = ["Hello world", "  two  spaces\nand a line", "café ☕ 𝔘 naïve", "<|im_end|>x", ""]
for i, t in enumerate(texts):
    key = "prompt" if i % 2 == 0 else "content"
    st, _, data = call("POST", "/tokenize", {key: t, "add_special_tokens": True})
    check(st == 200, "tokenize %r: %d %s" % (t, st, data[:200]))
    got = json.loads(data)
    if t:
        r = subprocess.run([COLI, "tokenize", "-m", model, t], capture_output=True, text=True)
        check(r.returncode == 0, "coli tokenize: " + r.stderr)
        want = [int(x) for x in r.stdout.split()]
    else:
        want = []
    check(got["tokens"] == want, "tokenize %r: %r, coli tokenize %r" % (t, got["tokens"], want))
    check(got["count"] == len(want), "count %r for %d ids" % (got["count"], len(want)))
    check(isinstance(got["max_model_len"], int) and got["max_model_len"] > 0, "max_model_len")
    if not want:
        continue
    st, _, data = call("POST", "/detokenize", {"tokens": want, "model": "any"})
    check(st == 200, "detokenize: %d %s" % (st, data[:200]))
    back = json.loads(data)
    r = subprocess.run([COLI, "tokenize", "-m", model, "--decode"] + [str(x) for x in want],
                       capture_output=True)
    check(r.returncode == 0, "coli tokenize --decode: %r" % r.stderr)
    check(back["prompt"] == r.stdout.decode() == back["content"],
          "detokenize %r: %r, coli %r" % (want, back, r.stdout))
    check(back["prompt"] == t, "round trip of %r gave %r" % (t, back["prompt"]))
st, _, data = call("POST", "/tokenize", {"content": "Hello world", "add_special": False})
check(st == 200 and json.loads(data)["count"] > 0, "llama-server's names: %d" % st)


# ---- errors ----
def expect(what, path, body, status, param=None, method="POST"):
    st, hd, data = call(method, path, body)
    check(st == status, "%s: status %d, want %d: %s" % (what, st, status, data[:300]))
    err = json.loads(data)["error"]
    check(err["message"], what + ": empty message")
    if param:
        check(err["param"] == param, "%s: param %r, want %r" % (what, err["param"], param))


expect("not JSON", "/tokenize", b"hello", 400)
expect("empty body", "/detokenize", b"", 400)
expect("root array", "/tokenize", [1, 2], 400)
expect("prompt number", "/tokenize", {"prompt": 3}, 400, "prompt")
expect("both names", "/tokenize", {"prompt": "a", "content": "b"}, 400, "content")
expect("no prompt", "/tokenize", {"model": "m"}, 400, "prompt")
expect("unknown key", "/tokenize", {"prompt": "a", "with_pieces": True}, 400, "with_pieces")
expect("add_special_tokens string", "/tokenize", {"prompt": "a", "add_special_tokens": "yes"},
       400, "add_special_tokens")
expect("tokens string", "/detokenize", {"tokens": "1 2"}, 400, "tokens")
expect("token string", "/detokenize", {"tokens": [1, "2"]}, 400, "tokens")
expect("token negative", "/detokenize", {"tokens": [-1]}, 400, "tokens")
expect("token past the vocabulary", "/detokenize", {"tokens": [1, 10 ** 6]}, 400, "tokens")
expect("no tokens", "/detokenize", {}, 400, "tokens")
expect("too long", "/tokenize", {"prompt": "x" * 5000}, 413)
expect("GET", "/tokenize", None, 405, method="GET")

# ---- generation requests, then /metrics ----
gen = 0
gaps = 0
bodies = [
    ("/v1/completions", {"prompt": "Hello world", "max_tokens": 6, "temperature": 0}),
    ("/v1/completions", {"prompt": "Once upon", "max_tokens": 9, "stream": True,
                         "stream_options": {"include_usage": True}}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hey"}], "max_tokens": 7,
                              "stream": True, "stream_options": {"include_usage": True}}),
    ("/v1/completions", {"prompt": "a b c", "max_tokens": 1}),
]
completions = []
for path, body in bodies:
    st, _, data = call("POST", path, body)
    check(st == 200, "%s: %d %s" % (path, st, data[:200]))
    if body.get("stream"):
        ev = [json.loads(e) for e in sse_events(data) if e != "[DONE]"]
        usage = [e["usage"] for e in ev if e.get("usage")][-1]
    else:
        usage = json.loads(data)["usage"]
    n = usage["completion_tokens"]
    check(n >= 1, "%s generated no token" % path)
    completions.append((usage["prompt_tokens"], n))
    gen += 1
    gaps += n - 1

st, _, data = call("GET", "/metrics")
check(st == 200, "/metrics %d" % st)
text = data.decode()
for name, want in [("coli_time_to_first_token_seconds", gen),
                   ("coli_inter_token_latency_seconds", gaps),
                   ("coli_queue_time_seconds", gen)]:
    check("# TYPE %s histogram" % name in text, name + ": no TYPE histogram line")
    buckets = re.findall(r'^%s_bucket\{le="([^"]+)"\} (\d+)$' % name, text, re.M)
    check(len(buckets) >= 2 and buckets[-1][0] == "+Inf", name + ": buckets " + repr(buckets))
    les = [float(b[0]) for b in buckets[:-1]]
    check(les == sorted(les) and len(set(les)) == len(les), name + ": bounds not increasing")
    counts = [int(b[1]) for b in buckets]
    check(counts == sorted(counts), name + ": buckets not cumulative " + repr(counts))
    count = int(re.search(r"^%s_count (\d+)$" % name, text, re.M).group(1))
    total = float(re.search(r"^%s_sum (\S+)$" % name, text, re.M).group(1))
    check(count == want, "%s_count %d, want %d" % (name, count, want))
    check(counts[-1] == count, "%s: +Inf bucket %d != count %d" % (name, counts[-1], count))
    check(total >= 0 and (total > 0 or want == 0 or name == "coli_queue_time_seconds"),
          "%s_sum %r" % (name, total))

tokens = sum(n for _, n in completions)
steps = []
for name in ["coli_step_forward_seconds", "coli_step_host_seconds"]:
    check("# TYPE %s histogram" % name in text, name + ": no TYPE histogram line")
    counts = [int(c) for c in re.findall(r'^%s_bucket\{le="[^"]+"\} (\d+)$' % name, text, re.M)]
    count = int(re.search(r"^%s_count (\d+)$" % name, text, re.M).group(1))
    check(counts == sorted(counts) and counts and counts[-1] == count,
          name + ": buckets " + repr(counts))
    steps.append(count)
check(steps[0] == steps[1] and steps[0] >= tokens,
      "steps: %d forward, %d host, %d tokens generated" % (steps[0], steps[1], tokens))

# ---- the access log ----
code = srv.stop()
check(code == 0, "colid exit %d" % code)
with open(log) as f:
    lines = f.read().splitlines()
check(len(lines) == len(made), "%d access log lines for %d requests" % (len(lines), len(made)))
pat = re.compile(r'^time=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) method=(\S+) path="([^"]*)" '
                 r"status=(\d+) prompt_tokens=(\d+) completion_tokens=(\d+) "
                 r"ttft_ms=(-|\d+\.\d) total_ms=(\d+\.\d)$")
# A line is written when its reply is out; the client may see the reply and
# send its next request first, so lines are compared as a multiset.
seen, gen_tokens = [], []
for line in lines:
    m = pat.match(line)
    check(m, "access log line malformed: %r" % line)
    seen.append((m.group(2), m.group(3), int(m.group(4))))
    if m.group(3).startswith("/v1/"):
        gen_tokens.append((int(m.group(5)), int(m.group(6))))
        check(m.group(7) != "-" and float(m.group(7)) <= float(m.group(8)) + 0.1,
              "ttft_ms missing or after total_ms: " + line)
    else:
        check(m.group(6) == "0" and m.group(7) == "-", "tokens on a non-generation line: " + line)
check(sorted(seen) == sorted(made), "logged %r, made %r" % (sorted(seen), sorted(made)))
check(sorted(gen_tokens) == sorted(completions),
      "logged tokens %r, replies' usage %r" % (sorted(gen_tokens), sorted(completions)))
print("ok: %d tokenize cases, %d requests logged, histograms count %d/%d/%d"
      % (len(texts), len(made), gen, gaps, gen))
