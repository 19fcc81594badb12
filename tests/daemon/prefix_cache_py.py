"""Prefix reuse across colid requests (tests/daemon/prefix_cache.sh).

On the qwen3_moe fixture, CPU only (where a token's bits do not depend on the
batch it ran in): a long shared prefix with two different endings, then the
same prompt again. Each reply must equal `coli generate` on the same prompt
(a fresh process, a prefill from empty), and usage.prompt_tokens_details.
cached_tokens must be 0 for the first, the shared prefix's tokens for the
second (the token count both prompts agree on, computed here from the tokens
`coli tokenize` gives), and all but the last token for the repeat; and
/metrics' prompt, prefilled and prefix-cache saved tokens must add up to the
replies'. On --parallel 1 and 2. Then more long prompts than slots (three
through --parallel 1, four through 2) and the first again: its whole blocks
come from the block index (its slot served another since), text unchanged.

Then concurrent clients on --parallel 3 (core/forward/kv_pool.c: a running
slot's full blocks serve the prefix cache): A streams a long reply to the
shared prefix + its own ending; once its first token is out (its prompt
prefilled), two clients send the shared prefix with other endings at once.
Each must report cached_tokens = the tokens its prompt shares with A's
rounded down to whole blocks of 32 (A's blocks, shared), or the tokens it
shares with the other client when that one finished first and left its slot,
whichever is more; its text must equal `coli generate`'s, and
coli_prefix_cache_shared_tokens_total must count the block-shared ones."""
import json
import re
import socket
import subprocess
import threading

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


for par in ("1", "2"):  # one slot, two
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
    shared_n = metric(srv.port, "coli_prefix_cache_shared_tokens_total")
    check(shared_n == 0, "--parallel %s: %r tokens from the block index, one request at a time "
          "(the free slot's own history holds more)" % (par, shared_n))
    check(srv.stop() == 0, "colid exit")

# More conversations than slots: prompts with long beginnings of their own, one after
# another, then the first again with another ending. Its slot has served a later prompt
# since, so its beginning comes from the block index: the whole blocks of 32 tokens it
# shares with the first, or a free slot's own history if that shares more.
# (20 lines: about 130 tokens, 5 blocks a conversation with its reply; the pool, 16 blocks
# a slot, holds three conversations on one slot and four on two, so none is evicted)
for par, n_conv in (("1", 3), ("2", 4)):
    srv = Colid(model, "--gpu", "off", "--parallel", par)
    convs = ["# conversation %d\n" % i + ("v%d = %d\n" % (i, i)) * 20 for i in range(n_conv)]
    hist = []
    for i, prompt in enumerate(convs + [convs[0] + "print(v0)\n"]):
        st, _, body = post(srv.port, "/v1/completions",
                           {"prompt": prompt, "max_tokens": 12, "temperature": 0})
        check(st == 200, "conversation %d: status %d %s" % (i, st, body[:200]))
        r = json.loads(body)
        toks = ids(prompt)
        if i == n_conv:
            cached = r["usage"]["prompt_tokens_details"]["cached_tokens"]
            blocks = min(common(hist[0], toks), len(toks) - 1) // 32 * 32
            own = max(min(common(h, toks), len(toks) - 1) for h in hist[-int(par):])
            check(cached == max(blocks, own) and blocks >= 64,
                  "--parallel %s, the first conversation again: cached_tokens %d, want %d "
                  "(its blocks) or %d (a slot's own)" % (par, cached, blocks, own))
            text = generate(model, prompt, 12)
            check(r["choices"][0]["text"] == text, "the first conversation again: %r, coli "
                  "generate says %r" % (r["choices"][0]["text"], text))
            print("ok  %d prompts through --parallel %s: the first again keeps %d of its %d "
                  "tokens from the block index, text = coli generate's"
                  % (n_conv + 1, par, cached, len(toks)))
        hist.append(toks)
    shared_n = metric(srv.port, "coli_prefix_cache_shared_tokens_total")
    check(shared_n and shared_n >= 64, "--parallel %s /metrics: %r tokens shared through the "
          "index" % (par, shared_n))
    check(srv.stop() == 0, "colid exit")

# Concurrent clients: B1 and B2 while A runs. A's EOS ids are biased away and every token
# takes 10 ms (--debug-token-delay-ms), so A runs for seconds after its first token (the
# fixture's 512 positions less A's prompt of 138 tokens).
srv = Colid(model, "--gpu", "off", "--parallel", "3", "--debug-token-delay-ms", "10")
system = "import os\nimport sys\n\ndef main(argv):\n    " + "x = 1\n    " * 20
a_prompt = system + "return 0\n"
b_prompts = [system + "print(argv)\n", system + "y = 2\n"]
a_toks, b_toks = ids(a_prompt), [ids(p) for p in b_prompts]
want = [min(common(a_toks, t), len(t) - 1) for t in b_toks]
check(min(want) >= 32 and common(b_toks[0], b_toks[1]) <= min(want),
      "the prompts share %r tokens with A's, %d with each other: the test wants >= 32, and no "
      "more between the two" % (want, common(b_toks[0], b_toks[1])))
body = json.dumps({"prompt": a_prompt, "max_tokens": 512 - len(a_toks), "temperature": 0,
                   "stream": True, "logit_bias": {"1023": -100, "1021": -100}}).encode()
a = socket.create_connection(("127.0.0.1", srv.port))
a.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
got = b""
while b"data: " not in got:  # A's first token: its prompt is in its slot
    more = a.recv(4096)
    check(more, "A's stream ended before its first token: %r" % got[-300:])
    got += more
replies = [None, None]


def client(i):
    replies[i] = post(srv.port, "/v1/completions",
                      {"prompt": b_prompts[i], "max_tokens": 12, "temperature": 0})


threads = [threading.Thread(target=client, args=(i,)) for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
shared_n = metric(srv.port, "coli_prefix_cache_shared_tokens_total")
saved = metric(srv.port, "coli_prefix_cache_saved_tokens_total")
a.close()  # A's client leaves: its job is cancelled
got_cached = []
for i, (st, _, body) in enumerate(replies):
    check(st == 200, "B%d: status %d %s" % (i + 1, st, body[:200]))
    r = json.loads(body)
    cached = r["usage"]["prompt_tokens_details"]["cached_tokens"]
    blocks = want[i] // 32 * 32  # A's blocks the prompt's first ones match
    ok = (blocks, max(blocks, common(b_toks[0], b_toks[1])))
    check(cached in ok, "B%d: cached_tokens %d, want %d (A's blocks) or %d (the other's slot)"
          % (i + 1, cached, ok[0], ok[1]))
    got_cached.append(cached)
    text = generate(model, b_prompts[i], 12)
    check(r["choices"][0]["text"] == text, "B%d: %r, coli generate says %r"
          % (i + 1, r["choices"][0]["text"], text))
    print("ok  beside a running A: B%d prompt %d tokens, %d cached, text = coli generate's"
          % (i + 1, len(b_toks[i]), cached))
blocks = [w // 32 * 32 for w in want]
check(saved == sum(got_cached) and min(blocks) <= shared_n <= sum(blocks),
      "/metrics: %r tokens saved, %r shared; want %d saved, %d to %d shared"
      % (saved, shared_n, sum(got_cached), min(blocks), sum(blocks)))
print("ok  /metrics: %d tokens kept by the cache, %d of them in a running request's blocks"
      % (saved, shared_n))
check(srv.stop() == 0, "colid exit")
