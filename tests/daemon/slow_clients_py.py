"""tests/daemon/slow_clients_py.py — clients that trickle their headers
cannot lock others out (tools/colid/colid_guard.c). colid runs with
--max-connections 8, --max-conn-per-ip 4, --header-timeout 1.5; attackers
send one header line every 0.25 s and reconnect as soon as they are cut:
  A. 16 connections (2x the limit) from one address, 127.0.0.2
  B. 16 connections from 8 addresses, 127.0.0.3 .. 127.0.0.10
Throughout each phase (3 s, twice the header timeout), a normal client on
127.0.0.1 must get /health and a chat completion within 1 s each; in B,
trickling connections must be cut (the deadline and the headroom) — the
exit line of colid counts them."""
import json
import re
import socket
import threading
import time

from colid_util import Colid, check, convert, post, request

model = convert("qwen3_moe")
srv = Colid(model, "--max-connections", "8", "--max-conn-per-ip", "4", "--header-timeout", "1.5")
port = srv.port


class Tricklers:
    def __init__(self, addrs, n):
        self.addrs = [addrs[i % len(addrs)] for i in range(n)]
        self.socks = [None] * n
        self.cut = 0
        self.quit = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def connect(self, i):
        try:
            s = socket.socket()
            s.bind((self.addrs[i], 0))
            s.settimeout(0.2)
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            s.setblocking(False)
            self.socks[i] = s
        except OSError:
            self.socks[i] = None

    def run(self):
        while not self.quit:
            for i, s in enumerate(self.socks):
                if s is None:
                    self.connect(i)
                    continue
                try:
                    gone = s.recv(1) == b""
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if not gone:
                    try:
                        s.sendall(b"X-Pad: a\r\n")
                    except OSError:
                        gone = True
                if gone:
                    self.cut += 1
                    s.close()
                    self.connect(i)
            time.sleep(0.25)

    def stop(self):
        self.quit = True
        self.t.join()
        for s in self.socks:
            if s:
                s.close()


def normal_client(phase, secs):
    t_end = time.time() + secs
    worst = 0
    n = 0
    while time.time() < t_end:
        t0 = time.time()
        try:
            st, _, data = request(port, "GET", "/health", timeout=1)
        except OSError as e:
            st, data = 0, repr(e).encode()
        dt = time.time() - t0
        check(st == 200 and dt < 1, "%s: /health %d after %.2f s: %s" % (phase, st, dt, data[:200]))
        worst = max(worst, dt)
        t0 = time.time()
        try:
            st, _, data = post(port, "/v1/chat/completions",
                               {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
                               timeout=1)
        except OSError as e:
            st, data = 0, repr(e).encode()
        dt = time.time() - t0
        check(st == 200 and json.loads(data)["choices"][0]["message"]["role"] == "assistant"
              and dt < 1, "%s: chat %d after %.2f s: %s" % (phase, st, dt, data[:200]))
        worst = max(worst, dt)
        n += 1
        time.sleep(0.1)
    return n, worst


for phase, addrs in (("A: 16 from 127.0.0.2", ["127.0.0.2"]),
                     ("B: 16 from 127.0.0.3..10", ["127.0.0.%d" % i for i in range(3, 11)])):
    tr = Tricklers(addrs, 16)
    time.sleep(0.5)
    n, worst = normal_client(phase, 3)
    tr.stop()
    check(tr.cut >= 16, "%s: only %d trickling connections cut" % (phase, tr.cut))
    print("ok  %s trickling: %d /health + chat pairs, slowest %.3f s; %d attacker connections cut"
          % (phase, n, worst, tr.cut))

check(srv.stop() == 0, "exit code after SIGTERM")
m = re.search(r"slow connections shut down: (\d+) past --header-timeout, (\d+) for headroom",
              srv.log())
check(m and int(m.group(1)) > 0 and int(m.group(2)) > 0, "deadline and headroom both used: %r"
      % (m.group(0) if m else srv.log()[-300:]))
print("ok  " + m.group(0))
