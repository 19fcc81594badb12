"""tests/daemon/errors.py — every client error colid promises (docs/api.md,
"Errors"), over raw HTTP: each must be the right 4xx with an OpenAI error
object, and the server must answer /health and a real request after it."""
import json
import socket
import threading
import time

from colid_util import Colid, check, convert, post, request

model = convert("qwen3_moe")
keyfile = "key.txt"
with open(keyfile, "w") as f:
    f.write("sekrit-42\n")
srv = Colid(model, "--max-body-bytes", "4096", "--api-key-file", keyfile)
port = srv.port
AUTH = {"Authorization": "Bearer sekrit-42"}


def ok_after(what):
    st, _, body = request(port, "GET", "/health")
    check(st == 200, "after %s: /health %d" % (what, st))
    st, _, body = post(port, "/v1/completions", {"prompt": "hi", "max_tokens": 2}, headers=AUTH)
    check(st == 200, "after %s: a good request got %d %s" % (what, st, body[:200]))


def expect(what, status, body, path="/v1/chat/completions", code=None, param=None, needle=None,
           headers=AUTH):
    st, hd, data = post(port, path, body, headers=headers)
    check(st == status, "%s: status %d, want %d: %s" % (what, st, status, data[:300]))
    check(hd.get("content-type", "").startswith("application/json"), what + ": not JSON")
    try:
        err = json.loads(data)["error"]
    except Exception:
        check(False, "%s: no OpenAI error object in %r" % (what, data[:300]))
    check(isinstance(err.get("message"), str) and err["message"], what + ": empty message")
    check("type" in err and "param" in err and "code" in err, what + ": fields missing")
    if code:
        check(err["code"] == code, "%s: code %r, want %r" % (what, err["code"], code))
    if param:
        check(err["param"] == param, "%s: param %r, want %r" % (what, err["param"], param))
    if needle:
        check(needle in err["message"], "%s: %r not in %r" % (what, needle, err["message"]))
    print("ok  %-34s %d %s" % (what, st, err["message"][:90]))
    ok_after(what)


msg = [{"role": "user", "content": "hi"}]
expect("malformed JSON", 400, b'{"messages": [', needle="malformed JSON")
expect("trailing garbage", 400, b'{"messages": []} x', needle="malformed JSON")
expect("not an object", 400, b'[1, 2]', needle="JSON object")
expect("empty body", 400, b'', needle="empty")
expect("invalid UTF-8", 400, b'{"messages": [{"role": "user", "content": "a\xff\xfeb"}]}',
       needle="UTF-8")
expect("overlong UTF-8", 400, b'{"prompt": "\xc0\xaf"}', path="/v1/completions",
       needle="UTF-8")
expect("lone surrogate escape", 400, b'{"prompt": "\\udc00"}', path="/v1/completions")
expect("NUL escape", 400, b'{"prompt": "a\\u0000b"}', path="/v1/completions")
expect("duplicate key", 400, b'{"prompt": "a", "prompt": "b"}', path="/v1/completions")
expect("messages wrong type", 400, {"messages": "hi"}, param="messages")
expect("messages empty", 400, {"messages": []}, param="messages")
expect("messages missing", 400, {"model": "x"}, param="messages")
expect("bad role", 400, {"messages": [{"role": "wizard", "content": "x"}]},
       param="messages[0]")
expect("content wrong type", 400, {"messages": [{"role": "user", "content": 5}]},
       param="messages[0].content")
expect("max_tokens wrong type", 400, {"messages": msg, "max_tokens": "5"}, param="max_tokens")
expect("max_tokens zero", 400, {"messages": msg, "max_tokens": 0}, param="max_tokens")
expect("temperature range", 400, {"messages": msg, "temperature": 3}, param="temperature")
expect("top_p zero", 400, {"messages": msg, "top_p": 0}, param="top_p")
expect("stream wrong type", 400, {"messages": msg, "stream": "yes"}, param="stream")
expect("stop wrong type", 400, {"messages": msg, "stop": 7}, param="stop")
expect("stop too many", 400, {"messages": msg, "stop": ["a", "b", "c", "d", "e"]}, param="stop")
expect("seed wrong type", 400, {"messages": msg, "seed": 1.5}, param="seed")
expect("unknown field", 400, {"messages": msg, "frobnicate": 1}, param="frobnicate",
       needle="Unrecognized request argument supplied: frobnicate")
expect("n > 16", 400, {"messages": msg, "n": 17}, param="n", needle="between 1 and 16")
expect("n zero", 400, {"messages": msg, "n": 0}, param="n")
expect("min_p range", 400, {"messages": msg, "min_p": 1.5}, param="min_p", needle="0 and 1")
expect("presence_penalty range", 400, {"messages": msg, "presence_penalty": 2.5},
       param="presence_penalty", needle="-2 and 2")
expect("frequency_penalty type", 400, {"messages": msg, "frequency_penalty": "1"},
       param="frequency_penalty")
expect("repetition_penalty zero", 400, {"messages": msg, "repetition_penalty": 0},
       param="repetition_penalty", needle="greater than 0")
expect("logit_bias type", 400, {"messages": msg, "logit_bias": [1]}, param="logit_bias")
expect("logit_bias key", 400, {"messages": msg, "logit_bias": {"abc": 1}}, param="logit_bias",
       needle="not a token id")
expect("logit_bias value", 400, {"messages": msg, "logit_bias": {"5": 101}},
       param="logit_bias", needle="-100 and 100")
expect("logit_bias id out of vocab", 400, {"messages": msg, "logit_bias": {"99999": 1}},
       param="logit_bias", needle="outside the vocabulary")
expect("chat logprobs type", 400, {"messages": msg, "logprobs": 2}, param="logprobs",
       needle="boolean")
expect("top_logprobs range", 400, {"messages": msg, "logprobs": True, "top_logprobs": 21},
       param="top_logprobs", needle="0 and 20")
expect("top_logprobs alone", 400, {"messages": msg, "top_logprobs": 2}, param="top_logprobs",
       needle="'logprobs': true")
expect("tool_choice required without tools", 400, {"messages": msg, "tool_choice": "required"},
       param="tool_choice", needle="no 'tools'")
expect("tool_choice bad", 400, {"messages": msg, "tool_choice": "always"},
       param="tool_choice", needle="required")
expect("tool_choice named, no such tool", 400,
       {"messages": msg, "tool_choice": {"type": "function", "function": {"name": "f"}},
        "tools": [{"type": "function", "function": {"name": "g"}}]},
       param="tool_choice", needle="'f'")
expect("response_format schema keyword", 400,
       {"messages": msg, "response_format": {"type": "json_schema", "json_schema": {
           "name": "x", "schema": {"type": "string", "format": "date"}}}},
       param="response_format", needle="'format'")
expect("response_format type", 400, {"messages": msg, "response_format": {"type": "xml"}},
       param="response_format", needle="json_schema")
for extra in ({"tool_choice": "auto"}, {"tool_choice": "none"},
              {"response_format": {"type": "text"}}, {"response_format": {"type": "json_object"}}):
    st, _, data = post(port, "/v1/chat/completions", dict({"messages": msg, "max_tokens": 2},
                                                          **extra), headers=AUTH)
    check(st == 200, "%s accepted: %d %s" % (extra, st, data[:200]))
    print("ok  %-34s %d" % (json.dumps(extra)[:34], st))
expect("completions logprobs range", 400, {"prompt": "x", "logprobs": 21},
       path="/v1/completions", param="logprobs")
expect("best_of > 1", 400, {"prompt": "x", "best_of": 2}, path="/v1/completions",
       param="best_of")
expect("echo", 400, {"prompt": "x", "echo": True}, path="/v1/completions", param="echo")
expect("prompt on chat", 400, {"messages": msg, "prompt": "x"}, param="prompt")
expect("empty prompt", 400, {"prompt": ""}, path="/v1/completions", param="prompt")
expect("empty prompt list", 400, {"prompt": []}, path="/v1/completions", param="prompt")
expect("prompt ids out of vocab", 400, {"prompt": [1, 99999]}, path="/v1/completions",
       param="prompt")
expect("prompt wrong type", 400, {"prompt": {"a": 1}}, path="/v1/completions", param="prompt")
# the fixture's context is 512 tokens; ~3000 bytes of text is well past it
expect("huge prompt", 400, {"prompt": "word " * 700}, path="/v1/completions",
       code="context_length_exceeded", needle="maximum context length is 512")
expect("prompt + max_tokens > ctx", 400, {"prompt": "hi", "max_tokens": 600},
       path="/v1/completions", code="context_length_exceeded", needle="512")
expect("oversize body", 413, {"prompt": "x" * 5000}, path="/v1/completions",
       code="request_too_large", needle="4096")
expect("oversize body, 100-continue", 413, {"prompt": "x" * 9000}, path="/v1/completions",
       headers=dict(AUTH, Expect="100-continue"), code="request_too_large")
expect("no API key", 401, {"messages": msg}, headers={}, code="invalid_api_key")
expect("wrong API key", 401, {"messages": msg}, headers={"Authorization": "Bearer nope"},
       code="invalid_api_key")
expect("unknown path", 404, {"messages": msg}, path="/v1/nothing")

st, _, data = request(port, "GET", "/v1/chat/completions", headers=AUTH)
check(st == 405 and b"POST" in data, "GET on chat: %d %r" % (st, data))
st, _, data = request(port, "GET", "/v1/models", headers=AUTH)
check(st == 200 and json.loads(data)["data"][0]["id"] == "qwen3_moe", "models: %r" % data)
st, _, data = request(port, "GET", "/v1/models/nope", headers=AUTH)
check(st == 404, "unknown model: %d" % st)
st, _, data = request(port, "GET", "/health")
check(st == 200, "health needs no key")
print("ok  405 / models / health")

# a chunked body past the limit, no Content-Length: read to the end, then 413
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekrit-42\r\n"
          b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n")
for _ in range(10):
    s.sendall(b"400\r\n" + b"x" * 0x400 + b"\r\n")
s.sendall(b"0\r\n\r\n")
resp = s.recv(4096)
s.close()
check(resp.startswith(b"HTTP/1.1 413"), "chunked oversize: %r" % resp[:100])
print("ok  chunked oversize body 413")
ok_after("chunked oversize")

# a client that sends half a request and vanishes
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pro")
s.close()
ok_after("half a request")

# stop strings: the text stops before the first occurrence and excludes it
st, _, data = post(port, "/v1/completions",
                   {"prompt": "Hello world", "max_tokens": 20, "temperature": 0}, headers=AUTH)
full = json.loads(data)["choices"][0]["text"]
cut = full[3:6]
st, _, data = post(port, "/v1/completions",
                   {"prompt": "Hello world", "max_tokens": 20, "temperature": 0, "stop": [cut]},
                   headers=AUTH)
r = json.loads(data)
check(r["choices"][0]["text"] == full[:full.index(cut)] and
      r["choices"][0]["finish_reason"] == "stop",
      "stop %r: got %r from %r" % (cut, r["choices"][0]["text"], full))
print("ok  stop string %r" % cut)

# libmicrohttpd's own replies (docs/api.md, "What stays HTML"): the statuses
# it answers before colid sees the request, and the server serves after each
def raw_status(data):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(data)
        resp = s.recv(4096)
    except OSError:
        resp = b""
    s.close()
    return resp.split(b"\r\n", 1)[0]


for what, data, want in (
        ("request line of 64 KiB", b"GET /" + b"a" * 65536 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
         b"HTTP/1.1 414"),
        ("a 64 KiB header", b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 65536 +
         b"\r\n\r\n", b"HTTP/1.1 431"),
        ("HTTP/2.0 request line", b"GET /health HTTP/2.0\r\nHost: x\r\n\r\n", b"HTTP/1.1 505"),
        ("malformed chunk", b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
         b"Authorization: Bearer sekrit-42\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
         b"HTTP/1.1 400"),
        ("not HTTP", b"GARBAGE\r\n\r\n", b"")):
    got = raw_status(data)
    check(got.startswith(want) if want else got == b"", "%s: %r, want %r" % (what, got, want))
    ok_after(what)
print("ok  libmicrohttpd's own replies: 414, 431, 505, 400, a close; serving after each")
check(srv.stop() == 0, "exit code after SIGTERM")
print("ok  SIGTERM -> exit 0")
