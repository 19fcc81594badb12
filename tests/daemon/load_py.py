"""tests/daemon/load_py.py — 8 concurrent clients x 200 requests (chat,
completion, streaming chat, mixed) against a queue of 4 (a client backs off 20 ms after a 429): every request gets
200 or, by design, 429 with Retry-After; nothing else, no hang. RSS after the
load may exceed RSS after warm-up by < 5% (not asserted under ASan, whose
quarantine holds freed memory on purpose)."""
import http.client
import json
import os
import sys
import threading
import time

from colid_util import Colid, check, convert, sse_events

CLIENTS = int(os.environ.get("LOAD_CLIENTS", "8"))
PER = int(os.environ.get("LOAD_REQUESTS", "200"))
WARM = 25  # requests per client before the first RSS reading

model = convert("qwen3_moe")
srv = Colid(model, "--queue", "4")
bodies = [
    ("/v1/completions", {"prompt": "Hello world", "max_tokens": 8, "temperature": 0}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}),
    ("/v1/chat/completions", {"messages": [{"role": "system", "content": "terse"},
                                           {"role": "user", "content": "hello"}],
                              "max_tokens": 8, "stream": True, "stop": ["e"]}),
    ("/v1/completions", {"prompt": "café ☕ 𝔘", "max_tokens": 8, "stream": True, "top_p": 0.9,
                         "seed": 3}),
]
counts = {}
errors = []
lock = threading.Lock()
warm = threading.Barrier(CLIENTS + 1)
go = threading.Barrier(CLIENTS + 1)


def client(ci):
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
    for i in range(PER):
        if i == WARM:
            warm.wait()
            go.wait()
        path, body = bodies[(ci + i) % len(bodies)]
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
        except Exception as e:  # one retry on a fresh connection, counted
            with lock:
                errors.append("client %d request %d: %r" % (ci, i, e))
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
            continue
        st = r.status
        if st == 200:
            if body.get("stream"):
                ev = sse_events(data)
                if not ev or ev[-1] != "[DONE]":
                    st = "bad-stream"
            else:
                json.loads(data)["choices"][0]
        elif st == 429:
            if not r.getheader("Retry-After"):
                st = "429-no-retry-after"
            time.sleep(0.02)  # a short back-off (Retry-After says >= 1 s)
        with lock:
            counts[st] = counts.get(st, 0) + 1


th = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
t0 = time.time()
for t in th:
    t.start()
warm.wait()
rss0 = srv.rss_kb()
go.wait()
for t in th:
    t.join()
secs = time.time() - t0
rss1 = srv.rss_kb()
growth = (rss1 - rss0) / rss0 * 100
total = sum(counts.values())
print("load: %d clients x %d requests in %.1f s: %s; transport errors %d" %
      (CLIENTS, PER, secs, counts, len(errors)))
print("load: RSS after warm-up %d kB, after load %d kB, growth %.2f%%" % (rss0, rss1, growth))
for e in errors[:5]:
    print("  " + e)
check(not errors, "transport errors")
check(total == CLIENTS * PER, "answered %d of %d" % (total, CLIENTS * PER))
check(set(counts) <= {200, 429}, "unexpected statuses %r" % counts)
check(counts.get(200, 0) > 0, "nothing served")
asan = b"__asan_init" in open(os.environ.get("COLID", "build/colid"), "rb").read()
if not asan:
    check(growth < 5, "RSS grew %.2f%% under load" % growth)
else:
    print("load: ASan build: RSS growth reported, not asserted")
check(srv.stop() == 0, "exit code after SIGTERM")
print("ok")
