"""tests/daemon/colid_util.py — what the colid tests share: convert a fixture,
start colid on a free loopback port (--port 0, the port read from its
"listening on" line), raw HTTP requests with the standard library, and the
one-line skip/fail conventions of tests/run.sh (exit 77 / 1)."""
import atexit
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time

COLI = os.environ.get("COLI", "build/coli")
COLID = os.environ.get("COLID", "build/colid")
FIXTURES = os.environ.get("FIXTURES", "tests/fixtures")
TMP = os.environ.get("TEST_TMP", ".")


def skip(why):
    print(why)
    sys.exit(77)


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def check(cond, why):
    if not cond:
        fail(why)


def convert(fixture):
    out = os.path.join(TMP, fixture + ".coli")
    if not os.path.exists(out):
        r = subprocess.run([COLI, "convert", os.path.join(FIXTURES, fixture), "-o", out],
                           capture_output=True, text=True)
        check(r.returncode == 0, "coli convert %s: %s" % (fixture, r.stderr.strip()))
    return out


class Colid:
    """A running colid; .port, .url, .log(), .stop() -> exit code."""

    def __init__(self, model, *args):
        if not os.access(COLID, os.X_OK):
            skip("colid not built (libmicrohttpd missing)")
        self.logpath = os.path.join(TMP, "colid.%d.log" % time.monotonic_ns())
        self.logf = open(self.logpath, "w")
        self.p = subprocess.Popen([COLID, "-m", model, "--port", "0"] + list(args),
                                  stdout=self.logf, stderr=subprocess.STDOUT)
        atexit.register(self._kill)  # a failed check exits: no colid left running
        self.port = None
        t0 = time.time()
        while time.time() - t0 < 60:
            m = re.search(r"listening on http://[^:]+:(\d+)", self.log())
            if m:
                self.port = int(m.group(1))
                break
            if self.p.poll() is not None:
                fail("colid exited %d at start: %s" % (self.p.returncode, self.log()))
            time.sleep(0.02)
        check(self.port, "colid did not start in 60 s: " + self.log())
        self.url = "http://127.0.0.1:%d" % self.port

    def _kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def log(self):
        with open(self.logpath) as f:
            return f.read()

    def rss_kb(self):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def alive(self):
        return self.p.poll() is None

    def signal(self, sig=signal.SIGTERM):
        self.p.send_signal(sig)

    def stop(self, timeout=60):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            fail("colid did not exit within %d s of SIGTERM: %s" % (timeout, self.log()[-2000:]))


def request(port, method, path, body=None, headers=None, timeout=60):
    """(status, headers dict lower-cased, body bytes). body: bytes, str or a JSON-able object."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    hd = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    return r.status, hd, data


def post(port, path, obj, **kw):
    return request(port, "POST", path, obj, **kw)


def metric(port, name):
    """A /metrics sample's value, or None when absent."""
    st, _, data = request(port, "GET", "/metrics")
    m = re.search(r"^%s (\S+)$" % re.escape(name), data.decode(), re.M)
    return float(m.group(1)) if m else None


def complete(port, prompt, max_tokens=80):
    """A greedy /v1/completions request: (status, body)."""
    st, _, body = post(port, "/v1/completions",
                       {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0},
                       timeout=120)
    return st, body

def kv_gb_for(model, blocks):
    """The --kv-gb of a pool of `blocks` KV blocks (and half of one, for
    rounding) for model: its bytes a token, from a colid of --ctx 512 on the
    CPU that answers one request first."""
    srv = Colid(model, "--gpu", "off", "--ctx", "512")
    st, body = complete(srv.port, "hello", 2)
    check(st == 200, "first colid: %d %s" % (st, body[:200]))
    tok_bytes = metric(srv.port, "coli_kv_bytes_per_token")
    check(tok_bytes and tok_bytes > 0, "coli_kv_bytes_per_token: %r" % tok_bytes)
    srv.stop()
    return (blocks + 0.5) * 32 * tok_bytes / 1e9


def sse_events(data):
    """The payloads of the data: lines of an SSE body."""
    out = []
    for block in data.decode().split("\n\n"):
        for line in block.split("\n"):
            if line.startswith("data: "):
                out.append(line[6:])
    return out


def generate(model, prompt, n):
    r = subprocess.run([COLI, "generate", "-m", model, "-p", prompt, "-n", str(n)],
                       capture_output=True)
    check(r.returncode == 0, "coli generate: %s" % r.stderr.decode(errors="replace"))
    return r.stdout.decode("utf-8")
