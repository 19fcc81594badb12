"""tests/convert/tiktoken_import.py — the reference side of
tests/convert/tiktoken_import.sh: a Kimi-style tiktoken tokenizer and the ids
tiktoken itself gives.

  write FIXTURE OUT   OUT = FIXTURE's config and weights, with tokenizer.json
                      replaced by tiktoken.model (768 ranks: the 256 bytes, a
                      byte-level BPE trained here over a text of Han, accented
                      Latin, digits, contractions and emoji, and two tokens BPE
                      cannot reach from their bytes, so only tiktoken's
                      whole-piece rule finds them) and a Kimi tokenizer_config.json
                      (tokenizer_class TikTokenTokenizer, auto_map
                      tokenization_kimi, added_tokens_decoder from id 768);
                      OUT/cases.jsonl: the texts (CASES, then 500 seeded random
                      joins of PIECES), one JSON string a line;
                      OUT/want.txt: tiktoken.Encoding(pat_str=Kimi's pattern,
                      those ranks and specials).encode(text, allowed_special=
                      "all") a line. The rank file is read back with tiktoken's
                      own load_tiktoken_bpe, and every decode must give the text.
  bad OUT KIND        OUT/tiktoken.model (or OUT/tokenizer_config.json) spoiled
                      as KIND says (the shell lists the kinds)
  compare CASES GOT WANT  exit 1 unless coli's ids (GOT) equal WANT, a line each
  decoded CASES GOT   exit 1 unless every line of GOT (`coli tokenize --decode
                      --lines` output) is the JSON string of CASES' line
"""
import base64
import collections
import json
import os
import random
import shutil
import sys

import regex
import tiktoken
from tiktoken.load import load_tiktoken_bpe

KIMI_PAT = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
N_RANKS = 768  # + 256 specials = the fixtures' vocab_size 1024
UNREACHABLE = [b"zyxw", b" quokka"]
NAMED = {0: "[BOS]", 1: "[EOS]", 2: "<|im_end|>", 3: "<|im_user|>", 4: "<|im_assistant|>",
         6: "<|start_header_id|>", 7: "<|end_header_id|>", 9: "[EOT]", 10: "<|im_system|>",
         17: "<|im_middle|>"}

TRAIN = """
中文分词测试：我们今天去北京，天气很好。人工智能和机器学习正在改变世界。
你好世界，你好朋友，世界和平。汉字与English混合在一起。
The café served crème brûlée; naïve façade, Ñandú, ÉCOLE, Straße, Ærøskøbing.
I'm sure you'll see it's what we've said: they'd go, she's here, don't stop, we're done.
THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG. the quick brown fox jumps over the lazy dog.
Numbers: 0 1 12 123 1234 12345 123456 1234567 2026-12-02 3.14159 42% $1,000,000.
Emoji: 👍 🎉 😀 🚀 ❤️ 👨‍👩‍👧 — done. Привет мир, Ωmega, ひらがな, カタカナ, 한국어.
HelloWorld你好world ひらがな漢字 Hello世界 XMLHttpRequest camelCaseWord ひらがな漢字 HelloWorld你好world.
HelloWorld你好world ひらがな漢字 Hello世界 XMLHttpRequest camelCaseWord ひらがな漢字 HelloWorld你好world.
HelloWorld你好world ひらがな漢字 Hello世界 XMLHttpRequest camelCaseWord ひらがな漢字 HelloWorld你好world.
Tokenizers split text into pieces; merges join frequent pairs of symbols into tokens.
Mixture-of-experts models route every token to a few experts, chosen by a small router.
深度学习模型需要大量的数据和计算资源，专家混合模型只激活一部分参数。
Les élèves étudient la géométrie à l'école; déjà vu, où est la bibliothèque?
Über die Brücke gehen Mädchen und Jungen schön langsam nach Hause.
def encode(text):\n    return [ord(c) for c in text]\n\nif __name__ == "__main__":\n    main()
"""

CASES = [
    "Hello, world!", "你好世界", "你好world", "Hello世界", "日本語とEnglish混在", "中文,标点。、还有「引号」",
    "HelloWorld camelCaseWord XMLHttpRequest ABCdef", "I'm YOU'LL she'S it's we've They'D don't WE'RE i'M",
    "naïve café Ñandú ÉCOLE Straße", "1 12 123 1234 12345 123456 1234567", "3.14159 2026-12-02 42%",
    "a\n\nb", "a \n b", "  \n\n  x", "line1\r\nline2\r\n", "x   \n", " \t\n ", "end   ", "   start",
    "\n", "   ", "👍🏽 ok 🎉🎉", "family 👨‍👩‍👧 emoji", "Привет мир Ωmega", "e\u0301te\u0301 नमस्ते",
    "ǅemal ʰa ひらがなカタカナ 한국어", "ひらがな漢字", "HelloWorld你好world", "½ ² ٣٤٥ Ⅻ", "zyxw quokka a zyxw", " quokka",
    "[BOS]hello[EOS]", "<|im_user|>user<|im_middle|>你好<|im_end|>", "<|reserved_token_1000|>x<|reserved_token_779|>",
    "<|im_end|<|im_end|>", "ー。\n、's zyxw。zyxw", "def f(x):\n    return x  # ok\n\n\n", "",
]


PIECES = ["你好", "世界", "漢字", "ひらがな", "カタ", "한국", "Hello", "WORLD", "camel", "Case", "naïve", "É", "ß",
          "'s", "'LL", "'re", "'D", "1", "23", "4567", " ", "  ", "\n", "\r\n", "\t", "\n\n", "👍", "🏽", "👨‍👩‍👧",
          ",", ".", "。", "、", "(", ")", "e\u0301", "ʰ", "ǅ", "zyxw", " quokka", "[BOS]", "<|im_end|>",
          "<|reserved_token_900|>", "the", " quick", "fox", "_", "#", "$1,000", "Ⅻ", "½", "٣", "ǈ", "ῼ", "ﬁ",
          "İ", "ſ", "\u212a", "\u00a0", "\u2028", "\u0085", "\u3000", "\u200b", "〇", "々", "〆", "ー", "ｶ", "０", "Ａ",
          "'", "’s", "Σ", "ς", "\x00", "\x7f"]  # Han by script (〇 々) and not (、 。 ー), Unicode spaces


def random_cases(n, seed=7):
    """n texts of 1-12 pieces drawn from PIECES (seeded: the same every run)."""
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12))) for _ in range(n)]


def train(text, pat, n):
    """Byte-level BPE: the most frequent adjacent pair merged until n ranks."""
    words = collections.Counter(regex.findall(pat, text))
    seqs = {w: [bytes([c]) for c in w.encode()] for w in words}
    ranks = {bytes([b]): b for b in range(256)}
    while len(ranks) < n:
        pairs = collections.Counter()
        for w, cnt in words.items():
            s = seqs[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += cnt
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        if a + b not in ranks:
            ranks[a + b] = len(ranks)
        for w in words:
            s, out, i = seqs[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    return ranks


def write(fix, out):
    os.makedirs(out, exist_ok=True)
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        if os.path.exists(os.path.join(fix, f)):
            shutil.copy(os.path.join(fix, f), out)
    simple = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
    ranks = train(TRAIN * 3, simple, N_RANKS - len(UNREACHABLE))
    for t in UNREACHABLE:
        assert t not in ranks and all(t[:k] not in ranks or t[k:] not in ranks for k in range(1, len(t)))
        ranks[t] = len(ranks)
    assert len(ranks) == N_RANKS and sorted(ranks.values()) == list(range(N_RANKS))
    path = os.path.join(out, "tiktoken.model")
    with open(path, "w") as f:
        for tok, r in sorted(ranks.items(), key=lambda kv: kv[1]):
            f.write(base64.b64encode(tok).decode() + " " + str(r) + "\n")
    os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the local file, cache nothing
    assert load_tiktoken_bpe(path) == ranks, "tiktoken reads the rank file otherwise"
    specials = {NAMED.get(i, "<|reserved_token_%d|>" % (N_RANKS + i)): N_RANKS + i for i in range(256)}
    cfg = {
        "tokenizer_class": "TikTokenTokenizer",
        "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
        "added_tokens_decoder": {str(N_RANKS + i): {"content": c, "lstrip": False, "normalized": False,
                                                    "rstrip": False, "single_word": False, "special": True}
                                 for i, c in NAMED.items()},
        "bos_token": "[BOS]", "eos_token": "[EOS]", "model_max_length": 1048576,
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    enc = tiktoken.Encoding(name="kimi-test", pat_str=KIMI_PAT, mergeable_ranks=ranks, special_tokens=specials)
    with open(os.path.join(out, "cases.jsonl"), "w") as fc, open(os.path.join(out, "want.txt"), "w") as fw:
        for text in CASES + random_cases(500):
            ids = enc.encode(text, allowed_special="all")
            assert enc.decode(ids) == text
            fc.write(json.dumps(text) + "\n")
            fw.write(" ".join(map(str, ids)) + "\n")
    whole = sum(1 for t in CASES if any(ranks[u] in enc.encode(t, allowed_special="all") for u in UNREACHABLE))
    print("wrote %s: %d ranks, %d + 500 random cases (%d fixed ones use a token BPE cannot reach)" %
          (out, len(ranks), len(CASES), whole))


def bad(out, kind):
    path = os.path.join(out, "tiktoken.model")
    lines = open(path).read().split("\n")
    if kind == "base64":
        lines[300] = "!!notbase64 300"
    elif kind == "duprank":
        lines[301] = lines[301].split(" ")[0] + " 300"
    elif kind == "gap":
        lines[302] = lines[302].split(" ")[0] + " 303"
    elif kind == "dupbytes":
        lines[303] = lines[302].split(" ")[0] + " 303"
    elif kind == "huge":
        lines[304] = base64.b64encode(b"x" * 100000).decode() + " 304"
    elif kind == "nobyte":
        lines[65] = base64.b64encode(b"\xff\xfe\xfd").decode() + " 65"  # byte "A" is gone
    elif kind == "class":
        cfg = json.load(open(os.path.join(out, "tokenizer_config.json")))
        cfg["tokenizer_class"] = "QwenTokenizer"
        cfg["auto_map"] = {"AutoTokenizer": ["tokenization_qwen.QwenTokenizer", None]}
        json.dump(cfg, open(os.path.join(out, "tokenizer_config.json"), "w"))
        return
    else:
        sys.exit("unknown kind " + kind)
    open(path, "w").write("\n".join(lines))


def compare(cases, got, want):
    """exit 1 unless GOT (coli's ids a line) equals WANT, printing the texts that differ."""
    texts = [json.loads(l) for l in open(cases)]
    have, need = open(got).read().splitlines(), open(want).read().splitlines()
    bad = [i for i in range(len(texts)) if i >= len(have) or have[i] != need[i]]
    for i in bad[:10]:
        print("%r\n  coli     %s\n  tiktoken %s" % (texts[i], have[i] if i < len(have) else "(none)", need[i]))
    print("%d of %d texts differ" % (len(bad), len(texts)) if bad else "%d texts: coli's ids equal tiktoken's" % len(texts))
    sys.exit(1 if bad else 0)


def decoded(cases, got):
    want = [json.loads(l) for l in open(cases)]
    have = [json.loads(l) for l in open(got)]
    ok = len(want) == len(have)
    for i, (w, h) in enumerate(zip(want, have)):
        if w != h:
            print("decode of case %d: %r, wanted %r" % (i + 1, h, w))
            ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    {"write": write, "bad": bad, "compare": compare, "decoded": decoded}[sys.argv[1]](*sys.argv[2:])
