"""tests/daemon/openai_py.py — the official openai Python client against colid:
models, chat, completion, streaming (both), usage; and greedy output through
the API byte-identical to `coli generate` on the same prompt, for a ChatML
model (qwen3_moe) and an [INST] one (mixtral)."""
import sys

import openai
from colid_util import Colid, check, convert, generate

CHAT = {
    # what core/text/chat.c renders for one user message (docs/api.md)
    "qwen3_moe": "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n",
    "mixtral": "[INST] {} [/INST]",
}

for fixture in ("qwen3_moe", "mixtral"):
    model = convert(fixture)
    srv = Colid(model)
    cli = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)

    ids = [m.id for m in cli.models.list()]
    check(ids == [fixture], "models.list: %r" % ids)

    prompt, n = "def fibonacci(n):", 24
    want = generate(model, prompt, n)
    r = cli.completions.create(model=fixture, prompt=prompt, max_tokens=n, temperature=0)
    got = r.choices[0].text
    check(got == want, "%s completion greedy: API %r != coli generate %r" % (fixture, got, want))
    check(r.usage.completion_tokens <= n and r.usage.prompt_tokens > 0, "usage %r" % r.usage)
    check(r.choices[0].finish_reason in ("stop", "length"), "finish %r" % r.choices[0].finish_reason)
    print("ok  %s completion == coli generate (%d tokens): %r" % (fixture, r.usage.completion_tokens, got[:40]))

    parts = []
    for ch in cli.completions.create(model=fixture, prompt=prompt, max_tokens=n, temperature=0,
                                     stream=True):
        parts.append(ch.choices[0].text if ch.choices else "")
    check("".join(parts) == want, "%s streamed completion %r != %r" % (fixture, "".join(parts), want))
    print("ok  %s streamed completion, %d chunks" % (fixture, len(parts)))

    user = "Say hi in French."
    want = generate(model, CHAT[fixture].format(user), 32)
    r = cli.chat.completions.create(model=fixture, messages=[{"role": "user", "content": user}],
                                    max_tokens=32, temperature=0)
    got = r.choices[0].message.content
    check(r.choices[0].message.role == "assistant", "role")
    check(got == want, "%s chat greedy: API %r != coli generate %r" % (fixture, got, want))
    check(r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, "usage sum")
    print("ok  %s chat == coli generate on the rendered template: %r (%s)" % (fixture, got[:40], r.choices[0].finish_reason))

    parts, usage, finish = [], None, None
    stream = cli.chat.completions.create(model=fixture, messages=[{"role": "user", "content": user}],
                                         max_tokens=32, temperature=0, stream=True,
                                         stream_options={"include_usage": True})
    for ch in stream:
        if ch.usage:
            usage = ch.usage
        for c in ch.choices:
            parts.append(c.delta.content or "")
            finish = c.finish_reason or finish
    check("".join(parts) == want, "%s streamed chat %r != %r" % (fixture, "".join(parts), want))
    check(usage and usage.completion_tokens == r.usage.completion_tokens, "stream usage %r" % usage)
    check(finish == r.choices[0].finish_reason, "stream finish %r" % finish)
    print("ok  %s streamed chat, %d chunks, usage %d+%d" % (fixture, len(parts), usage.prompt_tokens, usage.completion_tokens))

    # sampling with a seed is reproducible
    a = cli.completions.create(model=fixture, prompt="x", max_tokens=12, temperature=0.9, seed=7)
    b = cli.completions.create(model=fixture, prompt="x", max_tokens=12, temperature=0.9, seed=7)
    check(a.choices[0].text == b.choices[0].text, "seeded sampling differs")
    print("ok  %s seeded sampling reproducible" % fixture)

    try:
        cli.chat.completions.create(model=fixture, messages=[], max_tokens=4)
        check(False, "empty messages accepted")
    except openai.BadRequestError as e:
        print("ok  %s BadRequestError: %s" % (fixture, str(e)[:80]))
    check(srv.stop() == 0, "exit code")
