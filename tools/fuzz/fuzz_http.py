#!/usr/bin/env python3
"""tools/fuzz/fuzz_http.py — a mutation driver for colid's HTTP framing (libFuzzer
cannot drive libmicrohttpd in-process, so this one works over a socket).

It converts the qwen3_moe fixture (tests/daemon/colid_util.py), starts colid
on it with a small body limit and a short header deadline, asks one greedy
chat request for its reference answer, then throws mutated raw requests at
it: each is one connection, the bytes sent in one or a few writes, the write
side shut, the reply read until EOF (a bounded wait). Seeds: request lines,
headers (many, huge, repeated, folded), Content-Length and chunked bodies
(chunk extensions, trailers, overflowing sizes), pipelined requests, HTTP/1.0
and absolute URIs, the API's JSON bodies; plus any file in tests/fuzz/http/.
Mutations: byte flips, inserts of framing tokens (CRLF, ':', chunk sizes,
huge numbers), deletions, duplications, splices of two seeds.

After every batch (and at the end) colid must be running, answer /health
with 200, and answer the chat request with 200 and the reference text; a
reply that is not HTTP (bytes that do not start "HTTP/1.") fails too. At
exit colid gets SIGTERM and must exit 0 with no sanitizer report in its log.
A failing batch is written to OUT/crash-<n>-<i> (one file per request) so it
can be replayed and committed to tests/fuzz/http/.

Usage: fuzz_http.py [--seconds S] [--count N] [--seed K] [--batch B] [--out DIR]
  (COLI, COLID, FIXTURES, TEST_TMP as for tests/daemon/; run from the
  repository's root.) Prints "http: N requests, M batches, 0 failures".
Exit 0 pass, 1 a failure, 77 colid not built.
"""
import argparse
import json
import os
import random
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "daemon"))
from colid_util import Colid, check, convert, post, request  # noqa: E402

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "temperature": 0}


def seeds():
    j = b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}'
    c = b'{"prompt":"def f(","max_tokens":2,"stream":true}'
    # the sampling fields: two streamed choices with logprobs, penalties, a bias
    sm = (b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"n":2,"stream":true,'
          b'"logprobs":true,"top_logprobs":3,"min_p":0.1,"presence_penalty":0.5,'
          b'"repetition_penalty":1.2,"logit_bias":{"5":-100},"seed":1,"stop":["a","b"]}')
    h = b"Host: 127.0.0.1\r\n"
    out = [
        b"GET /health HTTP/1.1\r\n" + h + b"\r\n",
        b"GET /metrics HTTP/1.1\r\n" + h + b"\r\n",
        b"GET /v1/models HTTP/1.0\r\n\r\n",
        b"GET http://127.0.0.1/v1/models/coli HTTP/1.1\r\n" + h + b"\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\n" + h +
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(j) + j,
        b"POST /v1/completions HTTP/1.1\r\n" + h +
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(c) + c,
        b"POST /v1/chat/completions HTTP/1.1\r\n" + h +
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(sm) + sm,
        b"POST /v1/chat/completions HTTP/1.1\r\n" + h + b"Transfer-Encoding: chunked\r\n\r\n" +
        b"%x;ext=1\r\n" % 10 + j[:10] + b"\r\n" + b"%x\r\n" % (len(j) - 10) + j[10:] +
        b"\r\n0\r\nX-Trailer: t\r\n\r\n",
        b"POST /v1/completions HTTP/1.1\r\n" + h + b"Transfer-Encoding: chunked\r\n" +
        b"Content-Length: 5\r\n\r\nffffffffffffffff0\r\n" + c + b"\r\n0\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\n" + h + b"Expect: 100-continue\r\n" +
        b"Content-Length: %d\r\n\r\n" % len(j) + j,
        b"GET /health HTTP/1.1\r\n" + h + b"\r\nGET /v1/models HTTP/1.1\r\n" + h +
        b"\r\nPOST /v1/completions HTTP/1.1\r\n" + h +
        b"Content-Length: %d\r\n\r\n" % len(c) + c,
        b"GET /health HTTP/1.1\r\n" + h + b"X-Long: " + b"a" * 20000 + b"\r\n\r\n",
        b"GET /" + b"v" * 9000 + b" HTTP/1.1\r\n" + h + b"\r\n",
        b"GET /health HTTP/1.1\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(300)) + b"\r\n",
        b"GET /health HTTP/1.1\r\n" + h + b"X-Fold: a\r\n  b\r\n\tc\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\n" + h + b"Authorization: Bearer x\r\n" +
        b"Content-Length: 99999999999999999999\r\n\r\n" + j,
        b"POST /v1/chat/completions HTTP/1.1\r\n" + h + b"Content-Length: 10\r\n" +
        b"Content-Length: 20\r\n\r\n" + j,
        b"DELETE /v1/models HTTP/1.1\r\n" + h + b"\r\n",
        b"\r\n\r\nGET /health HTTP/1.1\r\n" + h + b"\r\n",
        b"GET /health HTTP/2.0\r\n" + h + b"\r\n",
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"GET /%00/../health?x=%ff HTTP/1.1\r\n" + h + b"\r\n",
    ]
    d = os.path.join("tests", "fuzz", "http")
    if os.path.isdir(d):
        for name in sorted(os.listdir(d)):
            with open(os.path.join(d, name), "rb") as f:
                out.append(f.read())
    return out


TOKENS = [b"\r\n", b"\r\n\r\n", b"\n", b"\r", b":", b" ", b"\t", b";", b"0\r\n\r\n",
          b"ffffffffffffffff", b"-1", b"18446744073709551616", b"Content-Length: ",
          b"Transfer-Encoding: chunked\r\n", b"Connection: close\r\n",
          b"Connection: keep-alive\r\n", b"HTTP/1.1", b"\x00", b"\xff", b"%", b"{", b"}",
          b'"', b"\\u0000", b"[" * 64, b"GET / HTTP/1.1\r\n\r\n"]


def mutate(rng, data, pool):
    b = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(7)
        pos = rng.randint(0, len(b))
        if op == 0 and b:  # flip a byte
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # insert a framing token
            b[pos:pos] = rng.choice(TOKENS)
        elif op == 2 and b:  # delete a range
            b[pos:pos + rng.randint(1, 32)] = b""
        elif op == 3 and b:  # duplicate a range
            s = b[pos:pos + rng.randint(1, 64)]
            b[pos:pos] = s * rng.randint(1, 8)
        elif op == 4:  # random bytes
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 5:  # splice another seed
            o = rng.choice(pool)
            b = b[:pos] + o[rng.randint(0, len(o)):]
        elif op == 6 and b:  # a long run (huge headers, huge chunks)
            b[pos:pos] = bytes([rng.choice(b)]) * rng.choice([100, 5000, 70000])
    return bytes(b[:300000])


def send(port, data, rng, timeout):
    """One connection: data in 1-3 writes, write side shut, reply read to EOF."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    reply = b""
    try:
        cuts = sorted(rng.randint(0, len(data)) for _ in range(rng.randint(0, 2)))
        prev = 0
        for c in cuts + [len(data)]:
            s.sendall(data[prev:c])
            prev = c
        s.shutdown(socket.SHUT_WR)
        deadline = time.time() + timeout
        while time.time() < deadline:
            got = s.recv(65536)
            if not got:
                break
            reply += got
    except OSError:
        pass  # colid may cut a bad request short; liveness is checked per batch
    finally:
        s.close()
    return reply


def healthy(srv, ref):
    check(srv.alive(), "colid exited %s" % srv.p.returncode)
    st, _, _ = request(srv.port, "GET", "/health", timeout=10)
    check(st == 200, "/health answered %d" % st)
    st, _, body = post(srv.port, "/v1/chat/completions", CHAT, timeout=30)
    check(st == 200, "chat request answered %d: %r" % (st, body[:200]))
    try:
        text = json.loads(body)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        text = None
    check(isinstance(text, str), "chat answer without content: %r" % body[:300])
    check(ref is None or text == ref, "chat answer changed: %r, was %r" % (text, ref))
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--count", type=int, default=0, help="stop after N requests (0: by time)")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--keep-5xx", action="store_true", help="save requests answered 5xx")
    ap.add_argument("--out", default=os.environ.get("TEST_TMP", "."))
    a = ap.parse_args()
    rng = random.Random(a.seed)
    pool = seeds()
    model = convert("qwen3_moe")
    srv = Colid(model, "--max-body-bytes", "65536", "--header-timeout", "2", "--timeout", "10")
    ref = healthy(srv, None)
    n = batches = 0
    status = {}
    t0 = time.time()
    print("http: seed %d, reference answer %r" % (a.seed, ref))
    while (a.count and n < a.count) or (not a.count and time.time() - t0 < a.seconds):
        batch = [rng.choice(pool) if rng.random() < 0.1 else mutate(rng, rng.choice(pool), pool)
                 for _ in range(a.batch)]
        for data in batch:
            reply = send(srv.port, data, rng, 3)
            code = reply[9:12].decode(errors="replace") if reply else "none"
            status[code] = status.get(code, 0) + 1
            if code.startswith("5") and code != "505" and a.keep_5xx:
                save(a.out, "5xx-%d" % n, [data + b"\n----reply----\n" + reply])
            if reply and not reply.startswith(b"HTTP/1."):
                save(a.out, batches, batch)
                check(False, "a reply that is not HTTP: %r" % reply[:200])
        n += len(batch)
        batches += 1
        try:
            healthy(srv, ref)
        except SystemExit:
            save(a.out, batches, batch)
            raise
    rc = srv.stop()
    log = srv.log()
    check(rc == 0, "colid exited %d after SIGTERM: %s" % (rc, log[-2000:]))
    check("Sanitizer" not in log and "runtime error" not in log, "sanitizer report: " + log[-4000:])
    srv.logf.close()
    os.unlink(srv.logpath)  # kept only when something failed
    print("http: replies by status: " +
          " ".join("%s:%d" % kv for kv in sorted(status.items(), key=lambda kv: -kv[1])))
    print("http: %d requests, %d batches in %.1f s, 0 failures" % (n, batches, time.time() - t0))


def save(out, k, batch):
    os.makedirs(out, exist_ok=True)
    for i, data in enumerate(batch):
        with open(os.path.join(out, "crash-%s-%d" % (k, i)), "wb") as f:
            f.write(data)
    print("http: batch written to %s/crash-%s-*" % (out, k))


if __name__ == "__main__":
    main()
