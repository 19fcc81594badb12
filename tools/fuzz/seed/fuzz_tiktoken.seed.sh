#!/bin/sh
# Seeds for tools/fuzz/fuzz_tiktoken.c: Kimi-style tokenizer_config.json, a NUL,
# then a rank file: the 256 bytes with a few BPE-like tokens (CRLF lines and a
# blank line in one), and corrupt ones (bad base64, a rank skipped, a token
# twice, a byte missing). Usage: fuzz_tiktoken.seed.sh DIR
python3 - "$1" <<'PY'
import base64, json, sys
cfg = {"tokenizer_class": "TikTokenTokenizer",
       "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
       "added_tokens_decoder": {"%d" % (n): {"content": c, "special": True} for n, c in
                                ((300, "[BOS]"), (301, "[EOS]"), (302, "<|im_end|>"))}}
toks = [bytes([b]) for b in range(256)] + [b"he", b"ll", b"hell", b"hello", b" w", b"or", b" wor",
        b" world", b"\xe4\xb8", b"\xe4\xb8\x96", b"12", b"123", b"'s", b"\n\n", b"  ", b"zyxw",
        b"\xe4\xb8\x96\xe7\x95\x8c", b"\xe7\x95", b"\xe7\x95\x8c", b"it", b"it's", b"x\xe4\xb8", b"[B",
        b"OS]", b"<|", b"|>", b"\r\n", b"rl", b"d!", b"ld"]
toks = toks[:300]
def ranks(ts, nl="\n"):
    return nl.join(base64.b64encode(t).decode() + " %d" % i for i, t in enumerate(ts)) + nl
c = json.dumps(cfg).encode() + b"\0"
seeds = {
    "ok": ranks(toks), "crlf": ranks(toks, "\r\n").replace("\r\n", "\r\n\n", 1),
    "bytes-only": ranks(toks[:256]),
    "b64": ranks(toks).replace("aGU=", "aGU", 1), "gap": ranks(toks).replace(" 270\n", " 271\n", 1),
    "twice": ranks(toks + [b"he"]), "nobyte": ranks([b"\xff\xff"] + toks[1:]),
}
for name, text in seeds.items():
    open("%s/seed-%s" % (sys.argv[1], name), "wb").write(c + text.encode())
open("%s/seed-noclass" % sys.argv[1], "wb").write(b"{}\0" + ranks(toks).encode())
PY
