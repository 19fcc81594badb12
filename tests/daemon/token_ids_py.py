"""tests/daemon/token_ids_py.py — token ids in and out of colid (docs/api.md,
"Token ids"), through the official openai client (extra_body) and raw HTTP.

A model without a tokenizer (`coli bench make-model --shape tiny`):
- a token-id prompt runs, usage counts its ids; return_token_ids gives
  choices[0].prompt_token_ids (the prompt) and token_ids (one id per
  completion token, the same greedy ids every time), and without it neither
  field is there;
- refusals, each a 400 naming the field: an id outside the vocabulary (its
  place and value named), an empty prompt, an empty prompt in a batch, a
  batch mixing strings and id lists, text (send token ids), chat messages,
  /tokenize and /detokenize (no tokenizer), return_token_ids not a boolean;
- a batch [[ids], [ids]] with n 2: four choices in order p * n + c, each
  prompt's choices the ids that prompt gives alone;
- streamed (--debug-token-delay-ms: a token at a time): every chunk's
  token_ids are the ids it carries, one per chunk but the finish chunk's,
  their concatenation the whole reply's, prompt_token_ids in the first chunk.

The demo model (a tokenizer): a text prompt's prompt_token_ids are
/tokenize's, its token_ids decode (/detokenize) to its text, and the same
prompt sent as those ids gives the same ids and text; chat whole and
streamed (top-level prompt_token_ids, the rendered prompt's; per chunk ids
that add up to the whole reply's, each chunk's ids within its text); with
logprobs one entry per id."""
import json
import os
import subprocess

import openai
from colid_util import COLI, TMP, Colid, check, post, sse_events

# ---- a model without a tokenizer ----
tiny = os.path.join(TMP, "tiny.coli")
r = subprocess.run([COLI, "bench", "make-model", "--shape", "tiny", "-o", tiny],
                   capture_output=True, text=True)
check(r.returncode == 0, "make-model: " + r.stderr[-400:])
srv = Colid(tiny, "--threads", "1", "--debug-token-delay-ms", "20")
cli = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
IDS = {"return_token_ids": True}


def refused(why, fn, *words):
    try:
        fn()
    except openai.BadRequestError as e:
        msg = str(e)
        for w in words:
            check(w in msg, "%s: %r lacks %r" % (why, msg, w))
        return
    check(False, why + ": accepted")


prompt = [5, 17, 300, 2]
a = cli.completions.create(model="tiny", prompt=prompt, max_tokens=6, temperature=0,
                           extra_body=IDS)
c = a.choices[0]
check(a.usage.prompt_tokens == 4, "usage.prompt_tokens %r" % a.usage.prompt_tokens)
check(c.prompt_token_ids == prompt, "prompt_token_ids %r" % c.prompt_token_ids)
check(len(c.token_ids) == a.usage.completion_tokens == 6, "token_ids %r" % c.token_ids)
check(c.text == "", "a model without a tokenizer gives no text: %r" % c.text)
b = cli.completions.create(model="tiny", prompt=prompt, max_tokens=6, temperature=0,
                           extra_body=IDS)
check(b.choices[0].token_ids == c.token_ids, "greedy ids differ: %r" % b.choices[0].token_ids)
plain = cli.completions.create(model="tiny", prompt=prompt, max_tokens=2)
check(not hasattr(plain.choices[0], "token_ids") or plain.choices[0].token_ids is None,
      "token_ids without return_token_ids")
print("ok  tiny: ids in, ids out %r" % c.token_ids)

mk = lambda p, **kw: (lambda: cli.completions.create(model="tiny", prompt=p, max_tokens=2, **kw))
refused("id outside the vocabulary", mk([1, 2, 1024]), "prompt[2]", "1024", "vocabulary")
refused("nested id outside the vocabulary", mk([[1], [2, 3, 99999]]), "prompt[1][2]", "99999")
refused("negative id", mk([1, -4]), "prompt[1]")
refused("empty prompt", mk([]), "'prompt' is empty")
refused("empty prompt in a batch", mk([[1, 2], []]), "'prompt[1]' is empty")
refused("mixed batch", mk([[1, 2], "x"]), "prompt[1]", "a string")
refused("text without a tokenizer", mk("hello"), "no tokenizer", "token ids")
refused("strings without a tokenizer", mk(["a", "b"]), "no tokenizer", "prompt[0]")
refused("not a boolean", mk([1], extra_body={"return_token_ids": 1}), "return_token_ids")
refused("too many choices", mk([[1]] * 9, n=2), "at most 16")
refused("chat without a tokenizer",
        lambda: cli.chat.completions.create(model="tiny", max_tokens=2,
                                            messages=[{"role": "user", "content": "hi"}]),
        "no tokenizer", "/v1/completions")
for path, body in (("/tokenize", {"prompt": "hi"}), ("/detokenize", {"tokens": [1, 2]})):
    st, _, data = post(srv.port, path, body)
    check(st == 400 and b"no tokenizer" in data, "%s: %d %r" % (path, st, data))
print("ok  tiny: refusals name the field")

P = [[1, 2, 3], [9, 8, 7, 6, 5]]
alone = [cli.completions.create(model="tiny", prompt=p, max_tokens=5, temperature=0.8, seed=11,
                                n=2, extra_body=IDS) for p in P]
both = cli.completions.create(model="tiny", prompt=P, max_tokens=5, temperature=0.8, seed=11,
                              n=2, extra_body=IDS)
check([ch.index for ch in both.choices] == [0, 1, 2, 3], "indexes %r" % [ch.index for ch in both.choices])
check(both.usage.prompt_tokens == 8, "batch prompt_tokens %r" % both.usage.prompt_tokens)
for i, ch in enumerate(both.choices):
    one = alone[i // 2].choices[i % 2]
    check(ch.prompt_token_ids == P[i // 2], "choice %d prompt ids %r" % (i, ch.prompt_token_ids))
    check(ch.token_ids == one.token_ids, "choice %d: batch %r, alone %r" % (i, ch.token_ids, one.token_ids))
print("ok  tiny: a batch of 2 prompts x n 2 = each prompt alone")

chunks = list(cli.completions.create(model="tiny", prompt=prompt, max_tokens=6, temperature=0,
                                     stream=True, extra_body=IDS))
got = [ch.choices[0].token_ids for ch in chunks]
check(sum(got, []) == c.token_ids, "streamed ids %r != %r" % (got, c.token_ids))
check(all(len(g) == 1 for g in got[:-1]) and got[-1] == [] and chunks[-1].choices[0].finish_reason,
      "a token a chunk, then the finish chunk: %r" % got)
check(chunks[0].choices[0].prompt_token_ids == prompt and
      all(getattr(ch.choices[0], "prompt_token_ids", None) is None for ch in chunks[1:]),
      "prompt_token_ids in the first chunk only")
print("ok  tiny: streamed, %d chunks of one id" % (len(got) - 1))
check(srv.stop() == 0, "colid exit")

# ---- the demo model (a tokenizer) ----
demo = os.path.join(os.environ.get("ROOT", "."), os.environ.get("BUILD", "build"), "demo.coli")
if not os.path.exists(demo):
    demo = os.path.join(TMP, "demo.coli")
    r = subprocess.run([COLI, "convert", os.path.join(os.environ.get("FIXTURES", "tests/fixtures"),
                                                      "demo"), "-o", demo],
                       capture_output=True, text=True)
    check(r.returncode == 0, "convert demo: " + r.stderr[-400:])
srv = Colid(demo, "--threads", "1")
cli = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
text = "Once upon a time"
st, _, data = post(srv.port, "/tokenize", {"prompt": text})
tok = json.loads(data)["tokens"]
a = cli.completions.create(model="demo", prompt=text, max_tokens=12, temperature=0, extra_body=IDS)
c = a.choices[0]
check(c.prompt_token_ids == tok, "prompt_token_ids %r, /tokenize %r" % (c.prompt_token_ids, tok))
check(len(c.token_ids) == a.usage.completion_tokens, "%d ids, %d tokens" % (len(c.token_ids), a.usage.completion_tokens))
st, _, data = post(srv.port, "/detokenize", {"tokens": c.token_ids})
check(json.loads(data)["prompt"] == c.text, "/detokenize(token_ids) %r != text %r" % (data, c.text))
b = cli.completions.create(model="demo", prompt=tok, max_tokens=12, temperature=0, extra_body=IDS)
check(b.choices[0].token_ids == c.token_ids and b.choices[0].text == c.text,
      "ids prompt: %r %r, text prompt: %r %r" % (b.choices[0].token_ids, b.choices[0].text, c.token_ids, c.text))
lp = cli.completions.create(model="demo", prompt=text, max_tokens=12, temperature=0, logprobs=2,
                            extra_body=IDS)
check(lp.choices[0].token_ids == c.token_ids and len(lp.choices[0].logprobs.tokens) == len(c.token_ids),
      "logprobs entries and ids")
print("ok  demo: text prompt %r = ids %r -> %r" % (text, tok, c.text))

msgs = [{"role": "user", "content": "Tell me a story."}]
w = cli.chat.completions.create(model="demo", messages=msgs, max_tokens=16, temperature=0,
                                extra_body=IDS)
check(isinstance(w.prompt_token_ids, list) and len(w.prompt_token_ids) == w.usage.prompt_tokens,
      "chat prompt_token_ids %r" % getattr(w, "prompt_token_ids", None))
check(len(w.choices[0].token_ids) == w.usage.completion_tokens, "chat token_ids")
st, _, data = post(srv.port, "/detokenize", {"tokens": w.choices[0].token_ids})
check(json.loads(data)["prompt"] == w.choices[0].message.content, "chat ids decode to the content")
st, _, data = post(srv.port, "/v1/chat/completions",
                   {"messages": msgs, "max_tokens": 16, "temperature": 0, "stream": True,
                    "return_token_ids": True})
ev = [json.loads(e) for e in sse_events(data) if e != "[DONE]"]
check(ev[0].get("prompt_token_ids") == w.prompt_token_ids and
      all("prompt_token_ids" not in e for e in ev[1:]), "streamed chat: prompt ids in the first chunk")
ids, content = [], ""
for e in ev:
    d = e["choices"][0]
    ids += d["token_ids"]
    content += d["delta"].get("content", "")
    st, _, dt = post(srv.port, "/detokenize", {"tokens": ids})
    check(json.loads(dt)["prompt"] == content, "chunk ids %r ahead of or behind the text %r" % (ids, content))
check(ids == w.choices[0].token_ids and content == w.choices[0].message.content,
      "streamed chat ids %r != %r" % (ids, w.choices[0].token_ids))
print("ok  demo: chat whole and streamed, %d ids in %d chunks" % (len(ids), len(ev)))
check(srv.stop() == 0, "colid exit")
