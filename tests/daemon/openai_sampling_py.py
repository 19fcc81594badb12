"""tests/daemon/openai_sampling_py.py — the sampling fields through the
official openai Python client against colid (qwen3_moe fixture):

  logprobs      completions (logprobs=5) and chat (logprobs, top_logprobs=5):
                every logprob and top list equals the log-softmax (computed
                here, in double) of `coli logits` teacher-forced on the
                prompt and the tokens chosen so far, greedy chosen here too;
                the chat entries' bytes make the reply's text; streamed
                chunks carry the same entries as the whole reply
  penalties     greedy with repetition 1.5, frequency 0.7, presence 1.5 (each
                alone) and all three: the tokens are the argmax of `coli
                logits` after the formulas of docs/api.md applied here (and
                not the plain greedy ones), their logprobs the raw ones
  logit_bias    -100 on the greedy first token: the second best comes
                instead (its raw logprob); +100 on " the": every token is it
  n             n=2: two choices, index 0 and 1, choice 0 the n=1 reply with
                the same seed, usage the sum of both; streamed: the same texts
  stop          a list of two: the text ends before the first of either
  seed          two equal requests (T 1, min_p, penalties, top_k) are equal
  errors        bad values: BadRequestError naming the field
"""
import array
import atexit
import math
import os
import subprocess

import openai
from colid_util import COLI, TMP, Colid, check, convert

FIX = "qwen3_moe"
model = convert(FIX)
srv = Colid(model)
atexit.register(lambda: srv.alive() and srv.p.kill())  # a failed check leaves no colid behind
cli = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)


def tokenize(text):
    r = subprocess.run([COLI, "tokenize", "-m", model, text], capture_output=True, text=True)
    check(r.returncode == 0, "coli tokenize: " + r.stderr)
    return [int(x) for x in r.stdout.split()]


def last_logits(ids):
    """The last row of `coli logits --ids` (float32 [n x vocab])."""
    out = os.path.join(TMP, "ref.bin")
    r = subprocess.run([COLI, "logits", "-m", model, "--ids", ",".join(map(str, ids)), "-o", out],
                       capture_output=True, text=True)
    check(r.returncode == 0, "coli logits: " + r.stderr)
    a = array.array("f")
    with open(out, "rb") as f:
        a.frombytes(f.read())
    v = len(a) // len(ids)
    return list(a[len(a) - v:])


def log_softmax(l):
    m = max(l)
    lse = m + math.log(sum(math.exp(x - m) for x in l))
    return [x - lse for x in l]


def argmax(l):
    return max(range(len(l)), key=lambda i: (l[i], -i))


def penalize(l, prompt, gen, rep, freq, pres):
    """docs/api.md's order: repetition over prompt + generated, then
    frequency / presence over generated."""
    out = list(l)
    for t in set(prompt) | set(gen):
        c = gen.count(t)
        x = out[t]
        x = x / rep if x > 0 else x * rep
        out[t] = x - c * freq - (pres if c else 0)
    return out


def reference(prompt, n, rep=1.0, freq=0.0, pres=0.0, ban=None):
    """Greedy over coli logits: [(id, raw log-softmax row)] for n steps."""
    gen, steps = [], []
    for _ in range(n):
        raw = last_logits(prompt + gen)
        l = penalize(raw, prompt, gen, rep, freq, pres)
        if ban is not None and not gen:
            l[ban] = -math.inf
        t = argmax(l)
        steps.append((t, log_softmax(raw)))
        gen.append(t)
    return steps


def close(a, b, tol=2e-4):
    return abs(a - b) <= tol


prompt = tokenize("def fibonacci(n):")
N = 10

# ---- completions logprobs against the teacher-forced reference ----
r = cli.completions.create(model=FIX, prompt=prompt, max_tokens=N, temperature=0, logprobs=5)
lp = r.choices[0].logprobs
n_tok = len(lp.tokens)
check(n_tok == r.usage.completion_tokens and n_tok >= 4,
      "completions: %d logprob entries, %d completion tokens" % (n_tok, r.usage.completion_tokens))
ref = reference(prompt, n_tok)
for i, (t, row) in enumerate(ref):
    check(close(lp.token_logprobs[i], row[t]),
          "token %d: logprob %r, coli logits' log-softmax %r" % (i, lp.token_logprobs[i], row[t]))
    want = sorted(row, reverse=True)[:5]
    got = sorted(lp.top_logprobs[i].values(), reverse=True)
    check(len(got) >= 5 and all(close(a, b) for a, b in zip(got[:5], want)),
          "token %d: top 5 %r, reference %r" % (i, got[:5], want))
check(lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset), "text_offset %r"
      % lp.text_offset)
print("ok  completions logprobs: %d tokens and their top 5 = log-softmax of coli logits" % n_tok)

# ---- chat logprobs: structure, bytes, stream == whole ----
msgs = [{"role": "user", "content": "Say hi in French."}]
kw = dict(model=FIX, messages=msgs, max_tokens=16, temperature=0.8, seed=11, logprobs=True,
          top_logprobs=5)
r = cli.chat.completions.create(**kw)
content = r.choices[0].logprobs.content
check(len(content) == r.usage.completion_tokens, "chat: %d entries, %d tokens"
      % (len(content), r.usage.completion_tokens))
text = bytes(b for e in content for b in e.bytes).decode("utf-8", errors="replace")
check(r.choices[0].finish_reason == "length" and text == r.choices[0].message.content,
      "chat: the entries' bytes make %r, the reply is %r" % (text, r.choices[0].message.content))
for e in content:
    tops = [x.logprob for x in e.top_logprobs]
    check(len(tops) == 5 and tops == sorted(tops, reverse=True) and e.logprob <= tops[0] + 1e-6,
          "chat entry %r" % e)
parts, streamed = [], []
for ch in cli.chat.completions.create(stream=True, **kw):
    for c in ch.choices:
        parts.append(c.delta.content or "")
        if c.logprobs and c.logprobs.content:
            streamed += c.logprobs.content
check("".join(parts) == r.choices[0].message.content, "chat stream text")
check([(e.token, e.logprob, [x.logprob for x in e.top_logprobs]) for e in streamed] ==
      [(e.token, e.logprob, [x.logprob for x in e.top_logprobs]) for e in content],
      "chat: streamed logprobs differ from the whole reply's")
r2 = cli.completions.create(model=FIX, prompt=prompt, max_tokens=N, temperature=0.8, seed=4,
                            logprobs=2)
toks = []
for ch in cli.completions.create(model=FIX, prompt=prompt, max_tokens=N, temperature=0.8, seed=4,
                                 logprobs=2, stream=True):
    for c in ch.choices:
        if c.logprobs:
            toks += list(zip(c.logprobs.tokens, c.logprobs.token_logprobs))
check(toks == list(zip(r2.choices[0].logprobs.tokens, r2.choices[0].logprobs.token_logprobs)),
      "completions: streamed logprobs differ")
print("ok  chat logprobs: %d entries, bytes = text, stream = whole (chat and completions)"
      % len(content))

# ---- penalties against the reference, each alone and together ----
hello = tokenize("Hello world")  # greedy repeats itself here
plain = [t for t, _ in reference(hello, N)]
for P in (dict(rep=1.5), dict(freq=0.7), dict(pres=1.5), dict(rep=1.5, freq=0.5, pres=0.3)):
    r = cli.completions.create(model=FIX, prompt=hello, max_tokens=N, temperature=0, logprobs=0,
                               extra_body={"repetition_penalty": P.get("rep", 1.0)},
                               frequency_penalty=P.get("freq", 0), presence_penalty=P.get("pres", 0))
    got = r.choices[0].logprobs.token_logprobs
    ref = reference(hello, len(got), **P)
    check(len(got) >= 4 and all(close(g, row[t]) for g, (t, row) in zip(got, ref)),
          "penalties %r: logprobs %r, reference %r" % (P, got, [row[t] for t, row in ref]))
    check([t for t, _ in ref] != plain[:len(ref)], "penalties %r changed nothing here" % P)
    print("ok  penalties %r: %d greedy tokens = reference, not the plain greedy ones"
          % (P, len(got)))

# ---- logit_bias ----
first = reference(prompt, 1)[0]
ban = reference(prompt, 1, ban=first[0])[0]
r = cli.completions.create(model=FIX, prompt=prompt, max_tokens=1, temperature=0, logprobs=0,
                           logit_bias={str(first[0]): -100})
check(close(r.choices[0].logprobs.token_logprobs[0], ban[1][ban[0]]),
      "logit_bias -100: first logprob %r, the second best's %r"
      % (r.choices[0].logprobs.token_logprobs[0], ban[1][ban[0]]))
the = tokenize(" the")
check(len(the) == 1, "' the' is %r" % the)
r = cli.completions.create(model=FIX, prompt=prompt, max_tokens=6, temperature=1, seed=2,
                           logit_bias={str(the[0]): 100})
check(r.choices[0].text == " the" * 6, "logit_bias +100: %r" % r.choices[0].text)
print("ok  logit_bias: -100 on the greedy token gives the second best, +100 on ' the' %r"
      % r.choices[0].text)

# ---- n ----
kw = dict(model=FIX, messages=msgs, max_tokens=12, temperature=1, seed=5, logprobs=True)
one = cli.chat.completions.create(**kw)
two = cli.chat.completions.create(n=2, **kw)
check([c.index for c in two.choices] == [0, 1], "n=2 indices")
check(two.choices[0].message.content == one.choices[0].message.content,
      "n=2: choice 0 %r, n=1 %r" % (two.choices[0].message.content, one.choices[0].message.content))
check(two.usage.completion_tokens == sum(len(c.logprobs.content) for c in two.choices) and
      two.usage.prompt_tokens == one.usage.prompt_tokens, "n=2 usage %r" % two.usage)
texts = {}
for ch in cli.chat.completions.create(n=2, stream=True, **kw):
    for c in ch.choices:
        texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
check(texts == {0: two.choices[0].message.content, 1: two.choices[1].message.content},
      "n=2 streamed %r" % texts)
print("ok  n=2: choices %r, choice 0 = n=1, usage %d, stream the same"
      % ([c.message.content[:12] for c in two.choices], two.usage.completion_tokens))

# ---- stop lists ----
full = cli.completions.create(model=FIX, prompt="Hello world", max_tokens=24,
                              temperature=0).choices[0].text
a, b = full[8:10], full[4:6]
r = cli.completions.create(model=FIX, prompt="Hello world", max_tokens=24, temperature=0,
                           stop=[a, b])
want = full[:min(full.index(a), full.index(b))]
check(r.choices[0].text == want and r.choices[0].finish_reason == "stop",
      "stop %r: %r, want %r" % ([a, b], r.choices[0].text, want))
print("ok  stop list %r" % [a, b])

# ---- seed ----
outs = [cli.completions.create(model=FIX, prompt="x", max_tokens=16, temperature=1, seed=s,
                               presence_penalty=0.5, extra_body={"top_k": 40, "min_p": 0.02}
                               ).choices[0].text for s in (9, 9, 10)]
check(outs[0] == outs[1], "seed 9 twice: %r" % outs[:2])
check(outs[0] != outs[2], "seeds 9 and 10 gave the same %r" % outs[0])
print("ok  seed: equal requests equal, another seed differs")

# ---- errors name the field ----
for field, extra in (("min_p", {"min_p": 2}), ("repetition_penalty", {"repetition_penalty": -1}),
                     ("top_logprobs", {"logprobs": True, "top_logprobs": 30}),
                     ("logit_bias", {"logit_bias": {"x": 1}}), ("n", {"n": 99}),
                     ("presence_penalty", {"presence_penalty": -5})):
    try:
        cli.chat.completions.create(model=FIX, messages=msgs, max_tokens=2, extra_body=extra)
        check(False, "%s accepted" % extra)
    except openai.BadRequestError as e:
        body = e.body.get("error", e.body) if isinstance(e.body, dict) else {}
        check(body.get("param") == field, "%s: %r" % (field, e.body))
print("ok  bad values: BadRequestError naming the field")
check(srv.stop() == 0, "exit code")
