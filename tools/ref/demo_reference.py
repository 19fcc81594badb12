#!/usr/bin/env python3
"""Reference logits and greedy continuation of the demo model, from transformers (float32).

    python3 tools/ref/demo_reference.py [--model models/demo]

Writes MODEL/ref/ in the fixtures' layout (tests/fixtures/README.md): prompt.txt, ids.txt,
logits.f32 [n x vocab] teacher-forced, greedy.txt (32 ids), greedy_margin.txt, meta.json.
The prompt is the first 48 tokens of the model's held_out.txt, so it is text the model did
not train on. tests/fixtures/demo links here, so make test checks coli against it.
"""
import argparse
import os
import sys

import torch
import transformers
from tokenizers import Tokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures  # noqa: E402  (shares the reference writer)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/demo")
    ap.add_argument("--tokens", type=int, default=48)
    a = ap.parse_args()
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    held = open(os.path.join(a.model, "held_out.txt"), encoding="utf-8").read()
    ids = tok.encode(held[:4000], add_special_tokens=False).ids[: a.tokens]
    make_fixtures.PROMPT = tok.decode(ids)
    make_fixtures.ID_EOT = tok.token_to_id("<|endoftext|>")
    torch.manual_seed(0)
    m = transformers.AutoModelForCausalLM.from_pretrained(
        a.model, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        _, new, meta = make_fixtures.references(m, ids, os.path.join(a.model, "ref"))
    print(f"wrote {a.model}/ref: {len(ids)} prompt tokens, greedy {len(new)}, "
          f"first low-margin step {meta['greedy_first_margin_below_1e-2']}")


if __name__ == "__main__":
    main()
