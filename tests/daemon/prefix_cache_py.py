"""Prefix reuse across colid requests (tests/daemon/prefix_cache.sh).

On the qwen3_moe fixture, CPU only (where a token's bits do not depend on the
batch it ran in): a long shared prefix with two different endings, then the
same prompt again. Each reply must equal `coli generate` on the same prompt
(a fresh process, a prefill from empty), and usage.prompt_tokens_details.
cached_tokens must be 0 for the first, the shared prefix's tokens for the
second (the token count both prompts agree on, computed here from the tokens
`coli tokenize` gives), and all but the last token for the repeat; and
/metrics' prompt, prefilled and prefix-cache saved tokens must add up to the
replies'. On --parallel 1 (coli_generate) and 2 (colid's batch loop)."""
import json
import re
import subprocess

from colid_util import COLI, Colid, check, convert, generate, post, request

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


def metric(port, name):
    st, _, data = request(port, "GET", "/metrics")
    m = re.search(r"^%s (\S+)$" % re.escape(name), data.decode(), re.M)
    return float(m.group(1)) if m else None


for par in ("1", "2"):  # coli_generate's one sequence, colid_batch.c's slots
    srv = Colid(model, "--gpu", "off", "--parallel", par)
    prev, n_prompt, n_cached = None, 0, 0
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
        print("ok  --parallel %s %-7s prompt %d tokens, %d cached, text = coli generate's"
              % (par, what, len(toks), cached))
        prev = toks  # (the cache also holds the reply's tokens; these prompts part before)
        n_prompt, n_cached = n_prompt + len(toks), n_cached + cached
    # /metrics: the prompt tokens, those prefilled (the cached ones are not) and the
    # cache's saved tokens agree with the replies' usage
    got = [metric(srv.port, n) for n in ("coli_prompt_tokens_total", "coli_prefill_tokens_total",
                                         "coli_prefix_cache_saved_tokens_total")]
    check(got == [n_prompt, n_prompt - n_cached, n_cached],
          "--parallel %s: /metrics prompt, prefilled, saved tokens %r, want %r"
          % (par, got, [n_prompt, n_prompt - n_cached, n_cached]))
    print("ok  --parallel %s /metrics: %d prompt tokens, %d prefilled, %d kept by the cache"
          % (par, n_prompt, n_prompt - n_cached, n_cached))
    check(srv.stop() == 0, "colid exit")
