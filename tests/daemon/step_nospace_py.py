"""A batch step short of KV blocks (tests/daemon/step_nospace.sh).

On the qwen3_moe fixture, CPU only, --parallel 2, --ctx 512, a pool of 5
blocks of 32 positions (--kv-gb from a first colid's
coli_kv_bytes_per_token), --debug-kv-no-promise 1 (a request is admitted
when its prompt fits, promised nothing) and --debug-token-delay-ms 10 (so
the requests overlap). Each request is a short prompt and
max_tokens 80 (at most 3 blocks), so two running ones can want 6 blocks:
the step where the second wants its third block finds none (-ENOSPC from
coli_engine_step). colid steps again without the runs that do not fit
(they wait, slots and blocks kept) and says so once in its log; before,
every job of that step ended with the error (500). Four concurrent
requests: all 200, the log shows the pool ran short, and each text equals
the same request's sent alone afterwards. Then --parallel 3, three requests
that all come to want a block none has: exactly one ends (500), the other
two as alone."""
import json
import threading

from colid_util import Colid, check, complete, convert, kv_gb_for

model = convert("qwen3_moe")
BLOCKS = 5

gb = kv_gb_for(model, BLOCKS)
srv = Colid(model, "--gpu", "off", "--ctx", "512", "--parallel", "2", "--kv-gb", "%.9f" % gb,
            "--debug-kv-no-promise", "1", "--debug-token-delay-ms", "10")
check("KV pool %d tokens" % (BLOCKS * 32) in srv.log(), "startup line: " + srv.log()[-600:])

prompts = ["Story number %d begins:" % i for i in range(4)]
replies, errors = {}, []


def client(p):
    st, body = complete(srv.port, p)
    if st != 200:
        errors.append("%s: %d %s" % (p, st, body[:200]))
    else:
        c = json.loads(body)["choices"][0]
        replies[p] = (c["text"], c["finish_reason"])


th = [threading.Thread(target=client, args=(p,)) for p in prompts]
for t in th:
    t.start()
for t in th:
    t.join()
check(not errors, "concurrent: " + "; ".join(errors))
check("the KV pool ran short" in srv.log(),
      "no step ran short of blocks (the test did not reach -ENOSPC): " + srv.log()[-600:])
alone = {}
for p in prompts:
    st, body = complete(srv.port, p)
    check(st == 200, "alone %s: %d" % (p, st))
    c = json.loads(body)["choices"][0]
    alone[p] = (c["text"], c["finish_reason"])
    check(alone[p] == replies[p], "%s: %r concurrent, %r alone" % (p, replies[p], alone[p]))
check(srv.stop() == 0, "colid exit")
print("4 concurrent requests on 5 blocks without promises: a step ran short, "
      "every text as alone")

# --parallel 3: three running requests of 2 blocks each want 6 of the 5
# when they pass 32 positions; the first two get theirs, the third waits;
# at 64 the oldest wants a third block and none is left: not one run fits,
# and only the newest request ends (500), its blocks freed; the other two
# finish with their texts alone.
srv = Colid(model, "--gpu", "off", "--ctx", "512", "--parallel", "3", "--kv-gb", "%.9f" % gb,
            "--debug-kv-no-promise", "1", "--debug-token-delay-ms", "10")
replies, errors = {}, []
th = [threading.Thread(target=client, args=(p,)) for p in prompts[:3]]
for t in th:
    t.start()
for t in th:
    t.join()
check(len(errors) == 1 and "No space left on device" in errors[0],
      "three on 5 blocks: want exactly one 500 (No space left on device): %s" % errors)
check(len(replies) == 2 and all(replies[p] == alone[p] for p in replies),
      "three on 5 blocks: the two answered differ from alone: %r" % replies)
check("cannot grow any running sequence" in srv.log(), "no deadlock line: " + srv.log()[-600:])
check(srv.stop() == 0, "colid exit (3)")
print("3 concurrent requests that all want blocks: the newest ended, 2 texts as alone")
