"""tests/daemon/batch_invariance_py.py — continuous batching keeps every
request's tokens (issue #39 item 4), through the official openai client
against colid on the demo model (q8 experts):

  alone      16 completions one after another on colid --parallel 1 (one
             job at a time, coli_generate): prompts of mixed lengths, mixed
             max_tokens, logprobs=3, greedy and seeded T=0.9 sampling
  together   the same 16 at once on colid --parallel 8 (8 in slots, 8
             queued, each taking a slot as one ends): text, finish
             reason, token logprobs and top logprobs equal byte for byte (repr of the
             floats), and /metrics counted the slots, more than 2 sequences
             a step on average, and no slot left in use
  spec       a greedy request whose prompt repeats, alone on each server:
             the same text; on --parallel 8 drafts verified while one
             sequence runs, one step for the prompt and one a token less
             the accepted drafts (/metrics' coli_spec_draft_tokens_total)
             a sampled repeating request (seed, logprobs) drafted alone on
             --parallel 1: the same text and logprobs as on --spec off
  cancelled  a stream read for 3 events, then dropped: its slot is free
             again at once (coli_sequence_slots in_use back to 0,
             coli_generations_cancelled_total + 1) and a new request runs
  draft      --parallel 2 --draft (the q4 conversion drafting for the q8
             one): the repeating requests, greedy and sampled, give the
             texts and logprobs above, with drafts accepted
  ubatch     --parallel 4 --ubatch 2: the start line says 2 run at once,
             the repeating greedy request gives --parallel 1's text (drafts
             of one token), and 4 concurrent requests never hold more than
             2 slots
With COLI_TEST_GPU=1 (make test-gpu) alone, together, spec and the --spec off
reference run on GPU 0
(the dense part and the experts there: a query's attention has the same bits
in a graph, a row table and a draft's batch); otherwise on the CPU."""
import atexit
import concurrent.futures
import http.client
import json
import os
import socket
import subprocess
import time

import openai
from colid_util import COLI, FIXTURES, TMP, Colid, check, metric, post, request

model = os.path.join(TMP, "demo.q8.coli")
r = subprocess.run([COLI, "convert", os.path.join(FIXTURES, "demo"), "-o", model, "--quant", "q8"],
                   capture_output=True, text=True)
check(r.returncode == 0, "coli convert demo: " + r.stderr)

WORDS = "the cat sat on a mat and then it ran far away from home to see".split()
REQS = []
for i in range(16):
    n = 2 + (i * 7) % 29
    prompt = " ".join(WORDS[(i + k * 3) % len(WORDS)] for k in range(n))
    req = {"prompt": prompt, "max_tokens": 3 + (i * 5) % 14, "logprobs": 3}
    if i % 2:
        req.update(temperature=0.9, seed=100 + i)
    else:
        req.update(temperature=0)
    REQS.append(req)


def answer(cli, req):
    c = cli.completions.create(model="demo", **req)
    ch = c.choices[0]
    lp = ch.logprobs
    return (ch.text, ch.finish_reason, lp.tokens, [repr(x) for x in lp.token_logprobs],
            [sorted((k, repr(v)) for k, v in t.items()) for t in lp.top_logprobs])


GPU = ["--gpu", "0" if os.environ.get("COLI_TEST_GPU") == "1" else "off"]


def serve(parallel):
    # --spec ngram: drafts whatever they cost (auto may pause them on this model);
    # several slots: 3 ms a token, so the 16 requests overlap even where a step
    # takes well under a request's round trip (a GPU)
    delay = ["--debug-token-delay-ms", "3"] if parallel > 1 else []
    srv = Colid(model, "--parallel", str(parallel), "--queue", "32", "--threads", "2",
                "--spec", "ngram", *GPU, *delay)
    atexit.register(lambda: srv.alive() and srv.p.kill())
    cli = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
    return srv, cli


# a greedy request whose text repeats: --spec drafts it (alone, on either server)
REP = {"prompt": " ".join("one two three four five six seven eight".split() * 4),
       "max_tokens": 40, "temperature": 0}  # no logprobs: the greedy path
# sampled, with logprobs: drafted too, the sampler drawing from the verification's rows
REP_S = dict(REP, temperature=0.2, seed=3, logprobs=2)
ACC, REJ = ('coli_spec_draft_tokens_total{outcome="%s"}' % o for o in ("accepted", "rejected"))

srv, cli = serve(1)
check("1 sequence at once" in srv.log(), "start line: " + srv.log()[-400:])
alone = [answer(cli, q) for q in REQS]
rep_alone = cli.completions.create(model="demo", **REP)
acc0 = metric(srv.port, ACC)
rep_s_alone = answer(cli, REP_S)
acc_s = metric(srv.port, ACC) - acc0
srv.stop()
check(acc_s > 0, "the sampled repeating request accepted no draft")
check(sum(len(a[2]) for a in alone) > 80, "too few tokens: %r" % [len(a[2]) for a in alone])

srv, cli = serve(8)
check("8 sequences at once" in srv.log(), "start line: " + srv.log()[-400:])
with concurrent.futures.ThreadPoolExecutor(16) as ex:
    together = list(ex.map(lambda q: answer(cli, q), REQS))
cli.close()  # its 16 kept-alive connections: colid's per-address limit is 16
# colid counts a closed connection against that limit until its thread has seen the
# close: a busy host may still hold them when the next request comes (it is reset)
t0 = time.time()
while True:
    try:
        request(srv.port, "GET", "/health")
        break
    except (ConnectionResetError, http.client.RemoteDisconnected):
        check(time.time() - t0 < 10 and srv.alive(), "/health refused for 10 s after closing")
        time.sleep(0.1)
for i, (a, b) in enumerate(zip(alone, together)):
    check(a == b, "request %d differs batched:\n alone    %r\n together %r" % (i, a, b))
check(metric(srv.port, 'coli_sequence_slots{state="total"}') == 8,
      "slots in /metrics: %r" % metric(srv.port, 'coli_sequence_slots{state="total"}'))
check(metric(srv.port, 'coli_sequence_slots{state="in_use"}') == 0, "slots left in use")
steps, seqs = metric(srv.port, "coli_engine_steps_total"), metric(srv.port, "coli_engine_step_sequences_total")
check(seqs / steps > 2, "%d steps ran %d sequences: hardly batched" % (steps, seqs))
print("ok  16 requests alone (--parallel 1) and together (--parallel 8, %.1f sequences a step), "
      "%s: %d tokens, text, finish reasons and logprobs identical"
      % (seqs / steps, " ".join(GPU), sum(len(a[2]) for a in alone)))
acc0, rej0 = metric(srv.port, ACC), metric(srv.port, REJ)
cli = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
rep = cli.completions.create(model="demo", **REP)
cli.close()
rep_steps = metric(srv.port, "coli_engine_steps_total") - steps
acc, rej = metric(srv.port, ACC) - acc0, metric(srv.port, REJ) - rej0
ntok = rep.usage.completion_tokens
check(rep.choices[0].text == rep_alone.choices[0].text and ntok == 40,
      "the repeating request differs on --parallel 8:\n %r\n %r" % (rep, rep_alone))
# drafts were verified through the batched step; one step for the prompt, then
# each step gives a token and its accepted drafts: steps = tokens - accepted
check(acc + rej > 0, "no draft verified (%d steps for %d tokens)" % (rep_steps, ntok))
check(rep_steps == ntok - acc, "%d steps for %d tokens with %d drafts accepted"
      % (rep_steps, ntok, acc))
print("ok  a repeating greedy request alone on --parallel 8: %d tokens in %d steps (--spec: %d "
      "of %d draft tokens accepted), as on --parallel 1" % (ntok, rep_steps, acc, acc + rej))
srv.stop()

# a cancelled stream frees its slot at once (and, --spec off, the sampled
# repeating request's reference)
srv = Colid(model, "--parallel", "2", "--debug-token-delay-ms", "20", "--threads", "2",
            "--spec", "off", *GPU)
cli = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
check(answer(cli, REP_S) == rep_s_alone, "the sampled repeating request differs with --spec off")
cli.close()
print("ok  a sampled repeating request (seed, logprobs): --spec ngram (%d drafts accepted) "
      "gives --spec off's text and logprobs" % acc_s)
port = srv.port
s = socket.create_connection(("127.0.0.1", port))
b = json.dumps({"prompt": "the cat", "max_tokens": 400, "stream": True}).encode()
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: %d\r\n\r\n%s" % (len(b), b))
got = b""
while got.count(b"data: ") < 3:
    got += s.recv(4096)
check(metric(port, 'coli_sequence_slots{state="in_use"}') == 1, "the stream holds no slot")
c0 = metric(port, "coli_generations_cancelled_total")
s.close()
t0 = time.time()
while time.time() - t0 < 5 and metric(port, 'coli_sequence_slots{state="in_use"}') != 0:
    time.sleep(0.02)
t = time.time() - t0
check(metric(port, 'coli_sequence_slots{state="in_use"}') == 0, "slot still in use after 5 s")
check(metric(port, "coli_generations_cancelled_total") == c0 + 1, "not counted as cancelled")
st, _, data = post(port, "/v1/completions", {"prompt": "x", "max_tokens": 3})
check(st == 200, "served after the cancel: %d" % st)
print("ok  a dropped stream freed its slot in %.2f s (400 tokens = 8 s)" % t)
check(srv.stop() == 0, "exit")

# a draft model drafting for a sequence alone (core/seq.c)
q4 = os.path.join(TMP, "demo.q4.coli")
r = subprocess.run([COLI, "convert", os.path.join(FIXTURES, "demo"), "-o", q4, "--quant", "q4"],
                   capture_output=True, text=True)
check(r.returncode == 0, "coli convert demo q4: " + r.stderr)
srv = Colid(model, "--parallel", "2", "--threads", "2", "--spec", "ngram", "--draft", q4, *GPU)
cli = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
acc0 = metric(srv.port, ACC)
rep_d = cli.completions.create(model="demo", **REP)
check(rep_d.choices[0].text == rep_alone.choices[0].text,
      "the repeating request differs with --draft:\n %r\n %r" % (rep_d, rep_alone))
check(answer(cli, REP_S) == rep_s_alone, "the sampled repeating request differs with --draft")
acc_d = metric(srv.port, ACC) - acc0
cli.close()
check(acc_d > 0, "--draft: no draft accepted")
print("ok  --draft (q4 drafting for q8, --parallel 2): the repeating requests' texts and "
      "logprobs as without drafts, %d drafts accepted" % acc_d)
check(srv.stop() == 0, "exit")

# --ubatch 2 under --parallel 4: a step has 2 rows, so 2 sequences run at once
# and the others wait in the queue (not in slots that no step would reach)
srv = Colid(model, "--parallel", "4", "--ubatch", "2", "--debug-token-delay-ms", "10",
            "--threads", "2", "--spec", "ngram")
check("at most 2 sequences run at once" in srv.log(), "start line: " + srv.log()[-400:])
# alone, its drafts are cut to the step's 2 rows (a draft of 7 was -EINVAL: a 500)
st, _, data = post(srv.port, "/v1/completions", REP)
check(st == 200 and json.loads(data)["choices"][0]["text"] == rep_alone.choices[0].text,
      "the repeating request on --ubatch 2: %d %r" % (st, data[:300]))
most, done = 0, []
with concurrent.futures.ThreadPoolExecutor(4) as ex:
    futs = [ex.submit(post, srv.port, "/v1/completions",
                      {"prompt": "the cat %d" % i, "max_tokens": 8, "temperature": 0})
            for i in range(4)]
    while not all(f.done() for f in futs):
        most = max(most, metric(srv.port, 'coli_sequence_slots{state="in_use"}'))
        time.sleep(0.01)
    done = [f.result()[0] for f in futs]
check(done == [200] * 4 and 1 <= most <= 2, "statuses %r, at most %d in slots" % (done, most))
print("ok  --parallel 4 --ubatch 2: 4 requests served, at most %d at once" % most)
check(srv.stop() == 0, "exit")
