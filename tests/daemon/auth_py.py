"""tests/daemon/auth_py.py — the API key: decided from the headers alone,
before any body byte is read, and compared whole at any length.
  - a 600-character key: the full key is accepted, the key cut at 511
    characters and the key with one more character are refused
  - a request announcing a 1 MB body with a wrong or missing key gets 401
    at once, though no body byte is ever sent"""
import socket
import time

from colid_util import Colid, check, convert, post, request

model = convert("qwen3_moe")
key = "".join("abcdefghijklmnopqrstuvwxyz0123456789"[i % 36] for i in range(600))
with open("key.txt", "w") as f:
    f.write(key + "\n")
srv = Colid(model, "--api-key-file", "key.txt")
port = srv.port
BODY = {"prompt": "hi", "max_tokens": 2}

st, _, data = post(port, "/v1/completions", BODY, headers={"Authorization": "Bearer " + key})
check(st == 200, "the full 600-character key: %d %s" % (st, data[:200]))
for what, k in (("cut at 511", key[:511]), ("one more char", key + "x"), ("empty", "")):
    st, _, data = post(port, "/v1/completions", BODY, headers={"Authorization": "Bearer " + k})
    check(st == 401 and b"invalid_api_key" in data, "key %s: %d %s" % (what, st, data[:200]))
print("ok  600-character key accepted whole; 511-char prefix, longer and empty refused")

for what, hdr in (("wrong key", b"Authorization: Bearer nope\r\n"), ("no key", b"")):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    t0 = time.time()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + hdr +
              b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
    resp = b""
    try:
        while b"\r\n\r\n" not in resp:
            c = s.recv(4096)
            if not c:
                break
            resp += c
    except socket.timeout:
        pass
    s.close()
    check(resp.startswith(b"HTTP/1.1 401"), "%s, body never sent: %r" % (what, resp[:100]))
    print("ok  %s with a 1 MB body announced, none sent: 401 in %.3f s" % (what, time.time() - t0))
st, _, _ = request(port, "GET", "/health")
check(st == 200, "/health after: %d" % st)
check(srv.stop() == 0, "exit code after SIGTERM")
