#!/usr/bin/env python3
"""tools/fuzz/seed/fuzz_cut_tokenizer.py IN OUT — a tokenizer.json cut for fuzz seeds:
the vocabulary's first 288 ids (a byte-level BPE's 256 byte tokens and the
first merges' results), the merges whose parts and result remain, the added
tokens as they are (ids kept; coli's loader takes gaps). Normalizer,
pre-tokenizer, decoder and post-processor stay whole, so the cut file has
every part the loader parses at about a tenth of the bytes: loading the
fixture's 55 KB tokenizer.json was half of a fuzz_model execution's time
and most of fuzz_text's (docs/fuzz.md)."""
import json
import sys

d = json.load(open(sys.argv[1], encoding="utf-8"))
m = d["model"]
keep = {k: v for k, v in m["vocab"].items() if v < 256 + 32}


def part(s):
    return s if isinstance(s, str) else ""


def ok(p):
    parts = p.split(" ", 1) if isinstance(p, str) else p
    return all(part(s) in keep for s in parts) and "".join(map(part, parts)) in keep


m["merges"] = [p for p in m.get("merges", []) if ok(p)]
m["vocab"] = keep
json.dump(d, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
