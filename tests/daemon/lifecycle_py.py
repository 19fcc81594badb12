"""tests/daemon/lifecycle_py.py — queueing, cancellation and shutdown, made
observable with --debug-token-delay-ms (20 ms per token), one request at a
time (--parallel 1: the queue's rules; tests/daemon/batch_invariance has the
slots'):
  - a full queue answers 429 with Retry-After and an OpenAI error object
  - a streaming client that disconnects cancels its generation at once
  - a non-streaming client that disconnects does too; one that leaves while
    queued is skipped
  - SIGTERM: /health answers 503 "stopping" on a new connection and a new
    request gets 503 while draining, a queued request gets 503, the running
    stream finishes with [DONE], exit 0
  - a second SIGTERM cancels the running request at once, exit 0"""
import json
import os
import re
import signal
import socket
import threading
import time

from colid_util import Colid, check, convert, post, request, sse_events

model = convert("qwen3_moe")


def metric(port, name):
    st, _, data = request(port, "GET", "/metrics")
    m = re.search(r"^%s (\S+)$" % re.escape(name), data.decode(), re.M)
    return float(m.group(1)) if m else None


def raw_post(port, path, body):
    s = socket.create_connection(("127.0.0.1", port))
    b = json.dumps(body).encode()
    s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(b), b))
    return s


def wait_for(pred, what, timeout=10):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return time.time() - t0
        time.sleep(0.02)
    check(False, "timed out waiting for " + what)


LONG = {"prompt": "Hello world", "max_tokens": 300, "temperature": 0}
srv = Colid(model, "--queue", "1", "--debug-token-delay-ms", "20", "--parallel", "1")
port = srv.port

# 1. a full queue: one running, one queued, the third is refused
a = raw_post(port, "/v1/completions", LONG)
wait_for(lambda: metric(port, "coli_running") == 1, "the first job to run")
b = raw_post(port, "/v1/completions", LONG)
wait_for(lambda: metric(port, "coli_queue_depth") == 1, "the second job to queue")
st, hd, data = post(port, "/v1/completions", LONG)
err = json.loads(data)["error"]
check(st == 429 and int(hd.get("retry-after", "0")) >= 1 and err["code"] == "queue_full",
      "full queue: %d %r %r" % (st, hd.get("retry-after"), err))
print("ok  full queue -> 429, Retry-After %s: %s" % (hd["retry-after"], err["message"]))

# 2. both clients leave: the running job is cancelled, the queued one skipped
c0 = metric(port, "coli_generations_cancelled_total")
a.close()
b.close()
t = wait_for(lambda: metric(port, "coli_generations_cancelled_total") == c0 + 2,
             "two cancellations")
check(metric(port, "coli_running") == 0, "still running")
print("ok  running + queued clients gone -> both cancelled in %.2f s (300 tokens = 6 s)" % t)

# 3. a streaming client that reads a little, then leaves
s = raw_post(port, "/v1/chat/completions",
             {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 300, "stream": True})
got = b""
while got.count(b"data: ") < 3:
    got += s.recv(4096)
check(got.startswith(b"HTTP/1.1 200") and b"text/event-stream" in got, "stream head %r" % got[:200])
c0 = metric(port, "coli_generations_cancelled_total")
s.close()
t = wait_for(lambda: metric(port, "coli_generations_cancelled_total") == c0 + 1,
             "the stream's cancellation")
print("ok  streaming client gone after 3 events -> cancelled in %.2f s" % t)
st, _, data = post(port, "/v1/completions", {"prompt": "x", "max_tokens": 3})
check(st == 200, "served after cancellations: %d" % st)
# the KV cache's bytes after a job: the default bf16, 2 bytes a value of K and V of every
# layer (the qwen3_moe fixture's config), and ctx positions of them
cfg = json.load(open(os.path.join(os.environ.get("ROOT", "."), "tests/fixtures/qwen3_moe/config.json")))
want = 2 * 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * cfg["head_dim"]
per, total = metric(port, "coli_kv_bytes_per_token"), metric(port, "coli_kv_cache_bytes")
check(per == want and total and total % want == 0,
      "/metrics KV bytes a token %r (want %d), in all %r" % (per, want, total))
print("ok  /metrics: KV cache %d bytes a token (bf16), %d in all" % (per, total))
srv.stop()

# 4. SIGTERM: the running stream finishes, a queued request gets 503, exit 0
srv = Colid(model, "--queue", "2", "--debug-token-delay-ms", "20", "--parallel", "1")
port = srv.port
out = {}


def stream_reader():
    try:
        st, _, data = post(port, "/v1/completions", {"prompt": "Hello world", "max_tokens": 40,
                                                     "temperature": 0, "stream": True})
        out["stream"] = (st, sse_events(data))
    except Exception as e:  # step 5 cuts it on purpose
        out["stream"] = (0, [repr(e)])


def queued_reader():
    out["queued"] = post(port, "/v1/completions", {"prompt": "Hello world", "max_tokens": 5})


t1 = threading.Thread(target=stream_reader)
t1.start()
wait_for(lambda: metric(port, "coli_running") == 1, "the stream to run")
t2 = threading.Thread(target=queued_reader)
t2.start()
wait_for(lambda: metric(port, "coli_queue_depth") == 1, "the second to queue")
srv.signal(signal.SIGTERM)
wait_for(lambda: request(port, "GET", "/health", timeout=5)[0] == 503, "/health 503")
st, _, data = request(port, "GET", "/health", timeout=5)
check(json.loads(data)["status"] == "stopping", "/health while draining: %r" % data)
st, _, data = post(port, "/v1/completions", {"prompt": "x", "max_tokens": 2}, timeout=5)
check(st == 503 and json.loads(data)["error"]["code"] == "shutting_down",
      "a new request while draining: %d %r" % (st, data[:200]))
t1.join(30)
t2.join(30)
rc = srv.stop()
st, ev = out["stream"]
check(st == 200 and ev[-1] == "[DONE]" and json.loads(ev[-2])["choices"][0]["finish_reason"] == "length",
      "the running stream did not finish: %r" % ev[-3:])
ntext = sum(len(json.loads(e)["choices"][0]["text"]) > 0 for e in ev[:-1])
check(out["queued"][0] == 503, "queued request at shutdown: %r" % (out["queued"],))
check(rc == 0, "exit %d" % rc)
try:
    socket.create_connection(("127.0.0.1", port), timeout=1).close()
    check(False, "still accepting after exit")
except OSError:
    pass
print("ok  SIGTERM: /health 503 on a new connection while draining, a new request 503, "
      "running stream finished (%d events), queued got 503, exit 0" % len(ev))

# 5. a second SIGTERM cancels the running request at once
srv = Colid(model, "--debug-token-delay-ms", "20")
port = srv.port
t1 = threading.Thread(target=stream_reader)
t1.start()
wait_for(lambda: metric(port, "coli_running") == 1, "the stream to run")
out["stream"] = None
srv.signal(signal.SIGTERM)
time.sleep(0.1)
t0 = time.time()
srv.signal(signal.SIGTERM)
rc = srv.stop(timeout=10)
t1.join(10)
check(rc == 0 and time.time() - t0 < 2, "second SIGTERM: exit %d after %.1f s" % (rc, time.time() - t0))
check("second signal" in srv.log(), "no second-signal message")
print("ok  second SIGTERM: cancelled, exit 0 in %.2f s" % (time.time() - t0))
