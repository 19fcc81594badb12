"""The KV cache pool under colid (tests/daemon/kv_pool.sh).

On the qwen3_moe fixture, CPU only, --parallel 4, --ctx 512: a first colid
gives the bytes of a token's KV rows (/metrics coli_kv_bytes_per_token);
the second gets --kv-gb for 7 blocks of 32 positions (224 tokens). Each
request is a short prompt and max_tokens 80 (at most 90 positions: 3
blocks), so two fit at once and a third waits for one to finish (colid
admits a request only when the pool can hold its prompt + max_tokens beside
what the running ones hold and were promised; a running one's blocks are
never taken). Six concurrent requests: all 200, coli_running never above 2
while they run (sampled), and each text equals the same request's sent
alone afterwards. A request of prompt + max_tokens 300 (inside --ctx, past
the pool) gets 400 kv_cache_exceeded naming 224; /metrics shows
coli_kv_blocks_total 7."""
import json
import threading
import time

from colid_util import Colid, check, complete, convert, kv_gb_for, metric

model = convert("qwen3_moe")
BLOCKS = 7

gb = kv_gb_for(model, BLOCKS)
srv = Colid(model, "--gpu", "off", "--ctx", "512", "--parallel", "4", "--kv-gb", "%.9f" % gb,
            "--debug-token-delay-ms", "10")
check("KV pool %d tokens" % (BLOCKS * 32) in srv.log(), "startup line: " + srv.log()[-600:])

prompts = ["Story number %d begins:" % i for i in range(6)]
replies, errors = {}, []
most = [0]
done = threading.Event()


def client(p):
    st, body = complete(srv.port, p)
    if st != 200:
        errors.append("%s: %d %s" % (p, st, body[:200]))
    else:
        replies[p] = json.loads(body)["choices"][0]["text"]


def sample():
    while not done.is_set():
        r = metric(srv.port, "coli_running")
        most[0] = max(most[0], int(r or 0))
        time.sleep(0.02)


s = threading.Thread(target=sample)
s.start()
th = [threading.Thread(target=client, args=(p,)) for p in prompts]
for t in th:
    t.start()
for t in th:
    t.join()
done.set()
s.join()
check(not errors, "concurrent: " + "; ".join(errors))
check(most[0] <= 2, "coli_running reached %d with room for 2 requests' blocks" % most[0])
check(most[0] == 2, "coli_running never reached 2 (sampled %d)" % most[0])
for p in prompts:
    st, body = complete(srv.port, p)
    check(st == 200, "alone %s: %d" % (p, st))
    alone = json.loads(body)["choices"][0]["text"]
    check(alone == replies[p], "%s: %r concurrent, %r alone" % (p, replies[p], alone))

st, body = complete(srv.port, "too long for the pool", 300)
check(st == 400, "impossible request: %d %s" % (st, body[:300]))
err = json.loads(body)["error"]
check(err.get("code") == "kv_cache_exceeded" and "%d tokens" % (BLOCKS * 32) in err["message"],
      "impossible request: %s" % err)
check(metric(srv.port, "coli_kv_blocks_total") == BLOCKS,
      "coli_kv_blocks_total %r" % metric(srv.port, "coli_kv_blocks_total"))
check(srv.stop() == 0, "colid exit")
print("6 concurrent requests answered, at most 2 running; 400 past the pool")
