"""tests/tokenizer/hf_parity.py — the Python side of hf_parity.sh.

Trains small tokenizers with the `tokenizers` library (fixed corpus and
settings, so the files are reproducible), writes test cases, and checks
coli's answers against HF's:

  train DIR                    DIR/{qwen2,qwen2_im,o200k,o200k_im,gpt2,spm,spm_meta}.json
  cases FILE N SEED            FILE: JSON lines, a fixed set + N random strings
  long FILE                    FILE: three ~100k-character cases
  expect TOK CASES IDS DEC RT  HF's ids per case (IDS), HF's decode of them
                               (DEC, JSON lines), normalizer(case) (RT)
  compare NAME CASES IDS GOT_IDS DEC GOT_DEC RT ROUNDTRIP
                               prints counts and the first mismatches; exit 1
                               on any mismatch

ROUNDTRIP 1 asks decode(encode(x)) == normalizer(x) too (byte-level ones).
"""
import json
import random
import sys
import unicodedata

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, trainers)

QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# o200k_base's split (GPT-4o; gpt-oss's tokenizer.json: Split(Isolated) then ByteLevel
# without its regex, no normalizer): case-aware letter runs with contractions, digits in
# threes, punctuation runs keeping a trailing newline or '/'
O200K_RE = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
            r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}"
            r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
HARMONY = ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>",
           "<|start|>", "<|end|>", "<|message|>", "<|call|>"]


def corpus():
    rng = random.Random(1234)
    words = ("the quick brown fox jumps over the lazy dog it's we're they'll I'd "
             "def return import class self print for while if else elif None True False "
             "tokenizer mixture experts model layer weight bias expert router gate").split()
    lines = []
    for _ in range(3000):
        k = rng.randint(3, 15)
        lines.append(" ".join(rng.choice(words) for _ in range(k)) + rng.choice([".", "!", "?", ":", ""]))
    lines += ["    return x + y  # add\n\tpass", "for i in range(10):\n    print(i)", "x = [1, 2, 3]"] * 50
    lines += ["日本語のテキストです。", "中文文本测试，你好世界", "한국어 텍스트", "Привет, мир!",
              "Γειά σου κόσμε", "مرحبا بالعالم", "नमस्ते दुनिया", "café naïve résumé"] * 40
    lines += ["😀 👍🏽 👨‍👩‍👧 🇫🇷 ❤️", "12345 67890 3.14159 1,000,000"] * 40
    return lines


def train_bytelevel(pre, specials, added, vocab_size=1500):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC() if pre == "qwen2" else None
    if pre in ("qwen2", "o200k"):
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN2_RE if pre == "qwen2" else O200K_RE),
                                 behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                             special_tokens=specials,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer=tr)
    if added:
        tok.add_tokens(added)
    return tok


def train_spm():
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tr = trainers.BpeTrainer(vocab_size=1200, min_frequency=2, show_progress=False,
                             special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(corpus(), trainer=tr)
    j = json.loads(tok.to_str())
    # Mixtral layout: <unk> <s> </s>, 256 byte tokens, then the rest.
    old = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    names = [k for k, _ in old[:3]] + ["<0x%02X>" % b for b in range(256)] + [k for k, _ in old[3:]]
    j["model"]["vocab"] = {k: i for i, k in enumerate(names)}
    for a in j["added_tokens"]:
        a["id"] = j["model"]["vocab"][a["content"]]
    j["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    j["pre_tokenizer"] = None
    j["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    spm = json.dumps(j, ensure_ascii=False)
    # the newer Llama/Mistral layout: Metaspace pre-tokenizer and decoder
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                          "split": False}
    j["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                    "split": False}
    return spm, json.dumps(j, ensure_ascii=False)


def train(d):
    q = train_bytelevel("qwen2", SPECIALS, None)
    q.save(d + "/qwen2.json")
    j = json.loads(q.to_str())
    j["model"]["ignore_merges"] = True
    open(d + "/qwen2_im.json", "w").write(json.dumps(j, ensure_ascii=False))
    added = [AddedToken("[MASK]", lstrip=True, rstrip=False, special=True, normalized=False),
             AddedToken("<tool>", lstrip=False, rstrip=True, special=False, normalized=False),
             AddedToken("hello", single_word=True, normalized=True, special=False),
             AddedToken("  ", normalized=True, special=False),
             AddedToken("    ", normalized=True, special=False)]
    g = train_bytelevel("gpt2", ["<|endoftext|>", "<|padding|>"], added)
    j = json.loads(g.to_str())
    j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
    open(d + "/gpt2.json", "w").write(json.dumps(j, ensure_ascii=False))
    o = train_bytelevel("o200k", HARMONY, None)
    o.save(d + "/o200k.json")
    j = json.loads(o.to_str())
    j["model"]["ignore_merges"] = True
    open(d + "/o200k_im.json", "w").write(json.dumps(j, ensure_ascii=False))
    spm, meta = train_spm()
    open(d + "/spm.json", "w").write(spm)
    open(d + "/spm_meta.json", "w").write(meta)


FIXED = [
    "Hello world", "Hello, world! How are you?", "", " ", "  ", "a", " leading", "trailing   ",
    "def f(x):\n    return x * 2\n", "if (a && b) { c++; }\r\n\treturn;", "tabs\t\tand\tspaces  \t \n",
    "line1\r\nline2\r\n\r\n", "\n\n\n", "   \n   ", "x  \n", "numbers 12345 3.14 1,000,000 007",
    "日本語のテキストです。", "中文文本测试，你好世界！", "한국어 텍스트", "Привет, мир!",
    "😀👍🏽👨‍👩‍👧‍👦🏳️‍🌈🇫🇷", "e\u0301 vs \u00e9", "cafe\u0301 na\u0131ve", "\u1100\u1161\u11a8",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "<|im_end|><|im_end|>",
    "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>analysis<|message|>x<|end|>",
    "CamelCaseWords HTTPServer iPhone McDONALD'S don't DON'T path/to/file.py\n",
    "12345678 1.2.3 ---\n\n/// a//b", "\u00c9cole \u00e9COLE \u01c5 \u1e9e\u00df",
    "a<|endoftext|>b", "<|im_start", "im_end|>", "IT'S WE'RE THEY'LL I'D YOU'VE I'M DON'T",
    "it's we're they'll", "x'ſ 'K", "a\u0085\u0085 b", "a\u00a0\u00a0b \u3000", "a\x1c\x1c b",
    "[MASK] x  [MASK]", "a <tool>  b", "hello world hellos ahello hello", "a    b     c",
    "\u2581lower \u2581", "<s>x</s> <unk>", "\x00nul", "z" * 300, "ab" * 200, "1" * 50,
]

POOLS = {
    "ascii": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "punct": "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "ws": [" ", " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2009", "\u0085", "\x0b"],
    "latin": "àáâäçèéêëìíîïñòóôöùúûüÿßœæøåÀÉÎÕÜĀĒĪŌŪſ",
    "cyr": "абвгдежзийклмнопрстуфхцчшщъыьэюяАБВГД",
    "greek": "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔ",
    "cjk": "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年日本語テキストです한국어텍스트",
    "arabic": "مرحبابالعالم",
    "deva": "नमस्तेदुनियाहिन्दी",
    "comb": ["\u0301", "\u0300", "\u0308", "\u0327", "\u20dd", "\u0653"],
    "emoji": ["😀", "👍", "👍🏽", "👨‍👩‍👧", "❤️", "🇫🇷", "🏳️‍🌈", "\u200d", "\ufe0f", "🤖"],
    "special": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|im_", "end|>", "<|", "|>",
                "[MASK]", "<tool>", "hello", "<s>", "</s>", "<0x41>", "\u2581"],
    "contr": ["'s", "'S", "'t", "'T", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d", "'D"],
}


def random_case(rng):
    out = []
    for _ in range(rng.randint(1, 30)):
        pool = rng.choice(list(POOLS))
        p = POOLS[pool]
        if isinstance(p, str):
            out.append("".join(rng.choice(p) for _ in range(rng.randint(1, 8))))
        else:
            out.append(rng.choice(p))
    return "".join(out)


def cases(path, n, seed):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for c in FIXED + [random_case(rng) for _ in range(n)]:
            f.write(json.dumps(c) + "\n")


def long_cases(path):
    """Three ~100k-character inputs: mixed random text, one 100k-letter word, CJK."""
    rng = random.Random(7)
    mixed = ""
    while len(mixed) < 100000:
        mixed += random_case(rng) + " "
    with open(path, "w") as f:
        for c in [mixed[:100000], "abcdefgh" * 12500, "日本語中文한국어" * 10000]:
            f.write(json.dumps(c) + "\n")


def read_cases(path):
    return [json.loads(l) for l in open(path)]


def expect(tok_path, cases_path, ids_path, dec_path, rt_path):
    tok = Tokenizer.from_file(tok_path)
    cs = read_cases(cases_path)
    with open(ids_path, "w") as fi, open(dec_path, "w") as fd, open(rt_path, "w") as fr:
        for c in cs:
            ids = tok.encode(c, add_special_tokens=False).ids
            fi.write(" ".join(map(str, ids)) + "\n")
            fd.write(json.dumps(tok.decode(ids, skip_special_tokens=False)) + "\n")
            norm = tok.normalizer.normalize_str(c) if tok.normalizer else c
            fr.write(json.dumps(norm) + "\n")


def compare(name, cases_path, ids_path, got_ids_path, dec_path, got_dec_path, rt_path, roundtrip):
    cs = read_cases(cases_path)
    want = open(ids_path).read().split("\n")[:len(cs)]
    got = open(got_ids_path).read().split("\n")[:len(cs)]
    wdec = [json.loads(l) for l in open(dec_path)]
    gdec = [json.loads(l) for l in open(got_dec_path)]
    rt = [json.loads(l) for l in open(rt_path)]
    bad_ids = [i for i in range(len(cs)) if i >= len(got) or got[i] != want[i]]
    bad_dec = [i for i in range(len(cs)) if i >= len(gdec) or gdec[i] != wdec[i]]
    # lstrip/rstrip added tokens eat spaces, so those cases cannot round-trip
    bad_rt = [i for i in range(len(cs)) if roundtrip == "1" and "[MASK]" not in cs[i] and
              "<tool>" not in cs[i] and (i >= len(gdec) or gdec[i] != rt[i])]
    print("%s: %d cases: ids %d mismatched, decode %d mismatched, roundtrip %s" %
          (name, len(cs), len(bad_ids), len(bad_dec),
           ("%d mismatched" % len(bad_rt)) if roundtrip == "1" else "not checked"))
    for i in bad_ids[:5]:
        print("  ids   case %d %s\n    hf   %s\n    coli %s" % (i, json.dumps(cs[i]), want[i],
                                                             got[i] if i < len(got) else "-"))
    for i in bad_dec[:5]:
        print("  dec   case %d %s\n    hf   %s\n    coli %s" % (i, json.dumps(cs[i]), json.dumps(wdec[i]),
                                                             json.dumps(gdec[i]) if i < len(gdec) else "-"))
    for i in bad_rt[:5]:
        print("  rt    case %d %s -> %s" % (i, json.dumps(cs[i]), json.dumps(gdec[i]) if i < len(gdec) else "-"))
    return 1 if bad_ids or bad_dec or bad_rt else 0


if __name__ == "__main__":
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "train":
        train(*a)
    elif cmd == "cases":
        cases(a[0], int(a[1]), int(a[2]))
    elif cmd == "long":
        long_cases(a[0])
    elif cmd == "expect":
        expect(*a)
    elif cmd == "compare":
        sys.exit(compare(*a))
    else:
        sys.exit("unknown command " + cmd)
