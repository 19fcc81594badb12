"""Prefix reuse across colid requests (tests/daemon/prefix_cache.sh).

On the qwen3_moe fixture, CPU only (where a token's bits do not depend on the
batch it ran in): a long shared prefix with two different endings, then the
same prompt again. Each reply must equal `coli generate` on the same prompt
(a fresh process, a prefill from empty), and usage.prompt_tokens_details.
cached_tokens must be 0 for the first, the shared prefix's tokens for the
second (the token count both prompts agree on, computed here from the tokens
`coli tokenize` gives), and all but the last token for the repeat."""
import json
import subprocess

from colid_util import COLI, Colid, check, convert, generate, post

model = convert("qwen3_moe")
shared = "import os\nimport sys\n\ndef main(argv):\n    " + "x = 1\n    " * 60


def ids(text):
    r = subprocess.run([COLI, "tokenize", "-m", model, text], capture_output=True, text=True)
    check(r.returncode == 0, "coli tokenize: " + r.stderr)
    return [int(t) for t in r.stdout.split()]


def common(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


srv = Colid(model, "--gpu", "off")
prev = None
for what, prompt in (("first", shared + "return 0\n"), ("second", shared + "print(argv)\n"),
                     ("repeat", shared + "print(argv)\n")):
    st, _, body = post(srv.port, "/v1/completions",
                       {"prompt": prompt, "max_tokens": 12, "temperature": 0})
    check(st == 200, "%s: status %d %s" % (what, st, body[:200]))
    r = json.loads(body)
    got = r["choices"][0]["text"]
    want = generate(model, prompt, 12)
    check(got == want, "%s: %r, coli generate says %r" % (what, got, want))
    toks = ids(prompt)
    cached = r["usage"]["prompt_tokens_details"]["cached_tokens"]
    expect = 0 if prev is None else min(common(prev, toks), len(toks) - 1)
    check(cached == expect, "%s: cached_tokens %d, want %d (prompt %d tokens)"
          % (what, cached, expect, len(toks)))
    print("ok  %-7s prompt %d tokens, %d cached, text = coli generate's" % (what, len(toks),
                                                                             cached))
    prev = toks  # (the cache also holds the reply's tokens; these prompts part before)
check(srv.stop() == 0, "colid exit")
