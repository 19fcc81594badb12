"""tests/daemon/bench_serve_py.py — `coli bench serve` (docs/perf/README.md):

- with -m (the bench starts colid itself, engine options passed through):
  `--requests 8 --clients 2 --json` has every field, requests 8, errors 0,
  output tokens within 8 x max_tokens, p50 <= p99 for each latency, rates
  consistent with the round's wall time;
- with --clients 1,2 --rounds 2: one report per arm, and each ratio the
  median of the rounds' own ratios of the arms' figures;
- with --url against a colid this test started (--access-log, --warmup 0):
  the bench's requests, output tokens and prompt lengths equal what colid
  logged, its errors 0, its queue time present (colid reports it), and
  colid's TTFT histogram counted each request once; a --seconds run stops;
- against a port where nothing listens: exit 1 and a message; against one
  that accepts and never answers: the request fails after --timeout;
- --colid PATH (the colid -m starts; every -m run here names build/colid so):
  a path with no colid is refused by name (exit 1), --colid with --url too
  (exit 2);
- token ids (--token-ids auto: asked of colid, -m or found by /v1/models'
  owned_by): on a synthetic model without a tokenizer (make-model tiny) the
  report has token-id chunks, no text ones, and an ITL; against a colid
  with --debug-token-delay-ms 20 the ITL p50 is the 20 ms a token and
  --token-ids off gives none; against a stub server that sends 2 ids a
  chunk every 40 ms (not colid: asked only with --token-ids on) each chunk's
  gap is spread over its ids: ITL p50 20 ms, 4 gaps of 6 tokens."""
import json
import os
import re
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from colid_util import COLI, COLID, TMP, Colid, check, convert, request

model = convert("qwen3_moe")
FIELDS = ["requests_per_s", "output_tok_s", "ttft_p50_s", "ttft_p99_s", "itl_p50_s",
          "itl_p99_s", "e2e_p50_s", "e2e_p99_s", "queue_s", "requests", "errors",
          "output_tokens", "tokens_by", "clients", "rounds", "prompt_tokens", "max_tokens",
          "shared_prefix", "prefix_tokens", "seed", "rounds_detail", "text_chunks"]


def bench(*args, timeout=60):
    """coli bench serve ARGS; with -m, the colid under test (--colid)."""
    more = ["--colid", COLID] if "-m" in args else []
    r = subprocess.run([COLI, "bench", "serve"] + more + list(args), capture_output=True,
                       text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def check_json(out, requests, max_tokens):
    j = json.loads(out)
    for f in FIELDS:
        check(f in j, "field %s missing: %s" % (f, out[:400]))
    check(j["requests"] == requests, "requests %r, want %d" % (j["requests"], requests))
    check(j["errors"] == 0, "errors %r: %s" % (j["errors"], j.get("first_error")))
    check(0 < j["output_tokens"] <= requests * max_tokens, "output_tokens %r" % j["output_tokens"])
    for a in ("ttft", "itl", "e2e"):
        p50, p99 = j[a + "_p50_s"], j[a + "_p99_s"]
        check(0 <= p50 <= p99, "%s p50 %r > p99 %r" % (a, p50, p99))
    check(j["ttft_p99_s"] <= j["e2e_p99_s"], "TTFT p99 past e2e p99")
    r = j["rounds_detail"][0]
    check(abs(r["requests_per_s"] * r["wall_s"] - requests) < 1e-6 * requests + 1e-9,
          "requests/s x wall %r != %d" % (r["requests_per_s"] * r["wall_s"], requests))
    check(abs(r["output_tok_s"] * r["wall_s"] - j["output_tokens"]) < 1e-6 * j["output_tokens"],
          "tok/s x wall != output tokens")
    return j


# ---- -m: the bench starts colid ----
rc, out, err = bench("-m", model, "--threads", "1", "--requests", "8", "--clients", "2",
                     "--prompt-tokens", "8:24", "--max-tokens", "4:12", "--shared-prefix", "0.5",
                     "--prefix-tokens", "6", "--json")
check(rc == 0, "bench -m exit %d: %s %s" % (rc, out[-500:], err[-1500:]))
j = check_json(out, 8, 12)
check(j["tokens_by"] == "usage", "colid sends usage; tokens_by %r" % j["tokens_by"])
check(j["token_ids"] is True and 0 < j["token_id_chunks"] <= j["output_tokens"],
      "-m asks colid for token ids: %r %r" % (j["token_ids"], j["token_id_chunks"]))
check(0 < j["text_chunks"] <= j["output_tokens"], "text_chunks %r" % j["text_chunks"])
check(j["prompt_tokens"] == [8, 24] and j["max_tokens"] == [4, 12], "ranges echoed")

# ---- two arms, interleaved: each arm's report and the ratios of the rounds ----
rc, out, err = bench("-m", model, "--threads", "1", "--clients", "1,2", "--requests", "4",
                     "--rounds", "2", "--prompt-tokens", "6", "--max-tokens", "10", "--json")
check(rc == 0, "bench --clients 1,2 exit %d: %s" % (rc, err[-1500:]))
t = json.loads(out)
check([a["clients"] for a in t["arms"]] == [1, 2], "arms %r" % [a.get("clients") for a in t["arms"]])
for a in t["arms"]:
    check(a["requests"] == 8 and a["errors"] == 0 and len(a["rounds_detail"]) == 2,
          "arm %r: requests %r errors %r" % (a["clients"], a["requests"], a["errors"]))
r = t["ratios"][0]
check(r["clients"] == 2 and r["over_clients"] == 1, "ratio arms %r" % r)
for k in ("output_tok_s", "ttft_p99_s", "itl_p99_s"):
    # a round whose first arm's figure is 0 (no inter-token gap: tokens of
    # no text) is left out, as the bench does
    want = sorted(t["arms"][1]["rounds_detail"][i][k] / t["arms"][0]["rounds_detail"][i][k]
                  for i in range(2) if t["arms"][0]["rounds_detail"][i][k] > 0)
    if not want:
        check(r[k] is None, "%s ratio %r without a round" % (k, r[k]))
        continue
    med = (want[0] + want[-1]) / 2
    check(abs(r[k] - med) <= 1e-9 * max(1, med) and
          abs(r[k + "_range"][0] - want[0]) <= 1e-9 * max(1, want[0]),
          "%s ratio %r, the rounds' ratios %r" % (k, r[k], want))

# ---- --url: against a colid whose access log we read ----
log = os.path.join(TMP, "access.log")
srv = Colid(model, "--access-log", log, "--queue", "32")
rc, out, err = bench("--url", srv.url + "/v1", "--requests", "10", "--clients", "3",
                     "--prompt-tokens", "5:30", "--max-tokens", "3:9", "--warmup", "0",
                     "--seed", "7", "--json")
check(rc == 0, "bench --url exit %d: %s %s" % (rc, out[-500:], err[-1500:]))
j = check_json(out, 10, 9)
check(j["queue_s"] is not None and j["queue_s"] >= 0, "queue_s %r" % j["queue_s"])
check(j["token_ids"] is True, "--url: colid found by /v1/models' owned_by")
st, _, data = request(srv.port, "GET", "/metrics")
m = re.search(r"^coli_time_to_first_token_seconds_count (\d+)$", data.decode(), re.M)
check(m and int(m.group(1)) == 10, "colid TTFT count %r, want 10" % (m and m.group(1)))
rc2, out2, err2 = bench("--url", srv.url, "--seconds", "0.5", "--clients", "2",
                        "--prompt-tokens", "4", "--max-tokens", "4", timeout=30)
check(rc2 == 0 and "0 errors" in out2, "--seconds run: %d %s %s" % (rc2, out2, err2))
check(srv.stop() == 0, "colid exit")
with open(log) as f:
    gen = [l for l in f.read().splitlines() if 'path="/v1/completions"' in l]
# the --url run's (prompts of 5..30 tokens), not the --seconds run's (4)
first = [l for l in gen if int(re.search(r"prompt_tokens=(\d+)", l).group(1)) != 4]
prompts = sorted(int(re.search(r"prompt_tokens=(\d+)", l).group(1)) for l in first)
toks = sum(int(re.search(r"completion_tokens=(\d+)", l).group(1)) for l in first)
check(len(first) == 10, "colid logged %d completions of the --url run" % len(first))
check(all("status=200" in l for l in first), "a non-200 in colid's log")
check(toks == j["output_tokens"], "colid logged %d tokens, the bench %d" % (toks, j["output_tokens"]))
check(all(5 <= p <= 30 for p in prompts), "prompt lengths %r outside 5..30" % prompts)

# ---- nothing listening ----
s = socket.socket()
s.bind(("127.0.0.1", 0))
dead = s.getsockname()[1]
s.close()
rc, out, err = bench("--url", "http://127.0.0.1:%d" % dead, "--requests", "2", timeout=20)
check(rc == 1 and "refused" in err.lower(), "dead port: exit %d, %r" % (rc, err))
# ---- --colid: a path that is no colid is named; it goes with -m only ----
bad = os.path.join(TMP, "no-colid")
rc, out, err = bench("-m", model, "--colid", bad, "--requests", "1", timeout=20)
check(rc == 1 and ("cannot run colid '%s'" % bad) in err, "--colid %s: exit %d, %r" % (bad, rc, err))
rc, out, err = bench("--url", "http://127.0.0.1:1", "--colid", COLID, timeout=20)
check(rc == 2 and "--colid goes with -m" in err, "--colid with --url: exit %d, %r" % (rc, err))
# ---- a server that accepts and never answers: --timeout ----
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
rc, out, err = bench("--url", "http://127.0.0.1:%d" % s.getsockname()[1], "--requests", "1",
                     "--warmup", "0", "--model-name", "m", "--timeout", "0.3", "--json",
                     timeout=20)
s.close()
check(rc == 1, "silent server: exit %d %s" % (rc, err))
t = json.loads(out)
check(t["errors"] == 1 and "timed out" in t["first_error"], "silent server: %r" % t)

# ---- token ids: a model without a tokenizer ----
tiny = os.path.join(TMP, "tiny.coli")
r = subprocess.run([COLI, "bench", "make-model", "--shape", "tiny", "-o", tiny],
                   capture_output=True, text=True)
check(r.returncode == 0, "make-model: " + r.stderr[-400:])
rc, out, err = bench("-m", tiny, "--threads", "1", "--requests", "6", "--clients", "2",
                     "--prompt-tokens", "8", "--max-tokens", "12", "--json")
check(rc == 0, "bench -m tiny exit %d: %s" % (rc, err[-1500:]))
t = check_json(out, 6, 12)
check(t["output_tokens"] == 72 and t["text_chunks"] == 0 and
      0 < t["token_id_chunks"] <= 72 and t["itl_p99_s"] > 0,
      "tiny: tokens %r, text chunks %r, id chunks %r, ITL p99 %r" %
      (t["output_tokens"], t["text_chunks"], t["token_id_chunks"], t["itl_p99_s"]))
srv = Colid(tiny, "--threads", "1", "--debug-token-delay-ms", "20")
got = {}
for mode in ("auto", "off"):
    rc, out, err = bench("--url", srv.url, "--requests", "3", "--clients", "1", "--prompt-tokens",
                         "8", "--max-tokens", "8", "--token-ids", mode, "--json")
    check(rc == 0, "bench --url tiny --token-ids %s: %d %s" % (mode, rc, err[-800:]))
    got[mode] = json.loads(out)
a, o = got["auto"], got["off"]
check(a["token_ids"] is True and 0.015 <= a["itl_p50_s"] <= 0.2 and a["ttft_p50_s"] < a["e2e_p50_s"],
      "a 20 ms token: ITL p50 %r, TTFT %r, e2e %r" % (a["itl_p50_s"], a["ttft_p50_s"], a["e2e_p50_s"]))
check(o["token_ids"] is False and o["token_id_chunks"] == 0 and o["itl_p50_s"] == 0 and
      o["ttft_p50_s"] == o["e2e_p50_s"],
      "--token-ids off on a model without text: %r" % {k: o[k] for k in ("itl_p50_s", "ttft_p50_s")})
check(srv.stop() == 0, "colid exit")
print("ok: token ids: ITL p50 %.4f s at 20 ms a token; none without them" % a["itl_p50_s"])

# ---- a stub server: 3 chunks of 2 ids, 40 ms apart ----
bodies = []


class Stub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *a):
        pass

    def do_GET(self):
        b = json.dumps({"data": [{"id": "stub", "owned_by": "someone"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        bodies.append(req)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for c in range(3):
            time.sleep(0.04)
            ch = {"choices": [{"index": 0, "text": "", "finish_reason": None}]}
            if req.get("return_token_ids"):
                ch["choices"][0]["token_ids"] = [2 * c, 2 * c + 1]
            self.wfile.write(b"data: " + json.dumps(ch).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b'data: {"choices": [], "usage": {"completion_tokens": 6}}\n\n'
                         b"data: [DONE]\n\n")


stub = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
threading.Thread(target=stub.serve_forever, daemon=True).start()
url = "http://127.0.0.1:%d" % stub.server_address[1]
for mode in ("auto", "on"):
    rc, out, err = bench("--url", url, "--requests", "2", "--clients", "1", "--warmup", "0",
                         "--token-ids", mode, "--json")
    check(rc == 0, "stub --token-ids %s: %d %s" % (mode, rc, err[-800:]))
    got[mode] = json.loads(out)
stub.shutdown()
check(len(bodies) == 4 and not any("return_token_ids" in b for b in bodies[:2]) and
      all(b.get("return_token_ids") is True for b in bodies[2:]),
      "return_token_ids asked of a server not colid only with --token-ids on")
a, n = got["on"], got["auto"]
check(a["token_id_chunks"] == 6 and a["output_tokens"] == 12 and
      0.015 <= a["itl_p50_s"] <= 0.03 and 0.035 <= a["ttft_p50_s"] <= 0.2,
      "2 ids a 40 ms chunk: ITL p50 %r (20 ms), TTFT %r" % (a["itl_p50_s"], a["ttft_p50_s"]))
check(n["token_ids"] is False and n["itl_p50_s"] == 0, "auto on a stub: no ids, no ITL")
print("ok: a chunk's gap spread over its ids: ITL p50 %.4f s" % a["itl_p50_s"])
print("ok: -m and --url runs consistent (%d tokens), dead port refused" % j["output_tokens"])
