#!/usr/bin/env python3
"""make_fixtures.py -- tiny tokenizer, checkpoints and transformers references for coli's tests.

    python3 tools/ref/make_fixtures.py --out tests/fixtures
    python3 tools/ref/make_fixtures.py --out tests/fixtures --only glm4_moe

What it writes (all under --out; each fixture directory is deleted and rewritten):

  tokenizer/            tokenizer.json (byte-level BPE, Qwen2 pre-tokenizer, 1024 ids),
                        cases.jsonl ({"text", "ids"} per line, HF tokenizers, no added
                        specials), chat_cases.jsonl (chat template renderings)
  <fixture>/            a Hugging Face checkpoint (config.json, generation_config.json,
                        model.safetensors or shards + model.safetensors.index.json,
                        tokenizer.json, tokenizer_config.json) and
  <fixture>/ref/        prompt.txt, ids.txt, logits.f32, greedy.txt, greedy_margin.txt,
                        meta.json -- computed by transformers in float32 from the bf16
                        weights, so they are exact references for a bf16 engine.
  long/<name>/          config.json (a primary's with RoPE scaling: LONG below) and
                        ref/logits_at.f32 + ref/meta.json: transformers' logits at a few
                        positions of an 8192-token prompt, the primary's weights

Fixtures: qwen3_moe, qwen2_moe, olmoe, mixtral, glm4_moe, minimax_m2, deepseek_v3*, gpt_oss
(Hub per-expert tensor layout where the family has one, Hub config dialect: top-level
rope_theta, torch_dtype) and variants that share weights with a primary: qwen3_moe_fused
(transformers-5 native: fused 3-D expert tensors and the config exactly as transformers 5
writes it: rope_parameters, num_local_experts, dtype), qwen2_moe_sharded (three safetensors
shards + index) and gpt_oss_mxfp4 (the experts as MXFP4 _blocks/_scales with
quantization_config "mxfp4", as openai/gpt-oss-* ship them; needs accelerate to load).

Everything runs on the CPU and is deterministic for a given Python / torch / transformers /
tokenizers install: the corpus is a fixed list of stdlib files plus text written below,
and every fixture has its own seed. See tests/fixtures/README.md for the layouts.

--only NAME[,NAME]: write only those fixtures (a primary, or a variant with its primary
built in memory but not written, or a long-context one read from its primary on disk), with the tokenizer read from --out/tokenizer/ rather than
trained and written again, and no chat cases: the other fixtures keep their bits (which
depend on the torch version).
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

import torch
import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers
import transformers
from safetensors import safe_open

# ---------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------

QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
BPE_VOCAB = 1021            # learned ids 0..1020 (256 bytes + merges); specials 1021..1023
STDLIB_FILES = [            # relative to the stdlib dir; missing ones are skipped (printed)
    "LICENSE.txt", "argparse.py", "textwrap.py", "string.py", "heapq.py", "bisect.py",
    "functools.py", "dataclasses.py", "json/__init__.py", "json/decoder.py",
    "json/encoder.py", "collections/__init__.py", "pathlib.py", "shlex.py",
]
# Written here so that merges exist for non-ASCII scripts; repeated in the corpus.
MULTILINGUAL = """\
Le café est déjà prêt ; la crème brûlée aussi. Où est l'élève ? À bientôt, garçon naïf.
Größe, Straße, Übung, schön, Mädchen, Fußgänger. El niño español comió piña y jalapeño.
Ação, coração, informação, não, São Paulo. Zażółć gęślą jaźń. Čeština, Dvořák, Škoda.
東京は日本の首都です。今日はいい天気ですね。私は学生です。ありがとうございます。
北京是中国的首都。我们今天学习机器学习和自然语言处理。你好，世界！模型、专家、路由。
서울은 한국의 수도입니다. 안녕하세요, 세계! 감사합니다.
Москва — столица России. Привет, мир! Спасибо большое. Ελληνικά: Καλημέρα κόσμε.
مرحبا بالعالم. اللغة العربية جميلة. שלום עולם. עברית היא שפה יפה.
नमस्ते दुनिया। हिंदी भाषा। ภาษาไทย สวัสดี
Emoji: 😀 😂 🚀 🎉 👍 ❤️ 🔥 ✨ 🤖 🧠 👩‍👩‍👧 👨‍💻 🏳️‍🌈 👍🏽 🇯🇵 🇫🇷
Math: α β γ δ ε π σ ∑ ∫ √ ∞ ≤ ≥ ≠ ± × ÷ → ← ⇒ ∀ ∃ ∈ °C € £ ¥ © ® ™ … « » “ ” ‘ ’ — –
"""
TABBED = "def f(x):\r\n\tif x:\r\n\t\treturn x\r\n\treturn None\r\n\r\n\t\t\tdeep\t\tcell\r\n"


def stdlib_dir():
    return os.path.dirname(os.__file__)


def build_corpus():
    """The training corpus: a list of documents, in a fixed order."""
    docs = []
    base = stdlib_dir()
    for rel in STDLIB_FILES:
        path = os.path.join(base, rel)
        if not os.path.exists(path):
            print(f"  corpus: {path} missing, skipped")
            continue
        with open(path, encoding="utf-8") as f:
            docs.append(f.read())
    topics = os.path.join(base, "pydoc_data", "topics.py")       # documentation prose
    if os.path.exists(topics):
        with open(topics, encoding="utf-8") as f:
            docs.append(f.read()[:400_000])
    docs.extend([MULTILINGUAL] * 40)
    # CRLF line ends and tab indents, so that merges exist for "\r\n" runs and tabs
    docs.extend([MULTILINGUAL.replace("\n", "\r\n")] * 10)
    docs.extend([TABBED] * 20)
    return docs


def train_tokenizer():
    tok = Tokenizer(models.BPE(byte_fallback=False, fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                              use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[])
    tok.train_from_iterator(build_corpus(), trainer=trainer)
    assert tok.get_vocab_size() == BPE_VOCAB, tok.get_vocab_size()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False, lstrip=False,
                                       rstrip=False, single_word=False) for s in SPECIALS])
    assert tok.get_vocab_size() == BPE_VOCAB + len(SPECIALS)
    return tok


CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
INST_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}{{- '[INST] ' + message['content'] + ' [/INST]' }}"
    "{%- elif message['role'] == 'assistant' %}{{- message['content'] + eos_token }}"
    "{%- endif %}"
    "{%- endfor %}"
)


def tokenizer_config(tok, style):
    ids = {s: tok.token_to_id(s) for s in SPECIALS}
    cfg = {
        "add_bos_token": False,
        "add_eos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": {
            str(ids[s]): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                          "single_word": False, "special": True} for s in SPECIALS},
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "errors": "replace",
        "model_max_length": 512,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "unk_token": None,
    }
    if style == "chatml":
        cfg.update(additional_special_tokens=["<|im_start|>", "<|im_end|>"],
                   chat_template=CHATML_TEMPLATE, eos_token="<|im_end|>",
                   tokenizer_class="Qwen2Tokenizer")
    else:
        cfg.update(chat_template=INST_TEMPLATE, eos_token="<|endoftext|>",
                   tokenizer_class="PreTrainedTokenizerFast")
    return cfg


def save_tokenizer_json(tok, path, legacy_merges=False):
    """tokenizers >= 0.20 writes merges as pairs [["a", "b"], ...]; older files (most Hub
    checkpoints, Qwen's included) hold strings ["a b", ...]. Both load in HF tokenizers."""
    tok.save(path)
    if legacy_merges:
        with open(path, encoding="utf-8") as f:
            t = json.load(f)
        assert all(" " not in a and " " not in b for a, b in t["model"]["merges"])
        t["model"]["merges"] = [f"{a} {b}" for a, b in t["model"]["merges"]]
        with open(path, "w", encoding="utf-8") as f:
            json.dump(t, f, indent=2, ensure_ascii=False)
        again = Tokenizer.from_file(path)
        for _, text in tokenizer_case_texts():
            assert again.encode(text, add_special_tokens=False).ids == \
                tok.encode(text, add_special_tokens=False).ids, text


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, ensure_ascii=False)
        f.write("\n")


# Tokenizer cases: (name, text). Names are for humans reading the file; tests use text/ids.
def tokenizer_case_texts():
    c = []
    c += [
        ("empty", ""),
        ("one_space", " "),
        ("one_letter", "a"),
        ("prose", "The quick brown fox jumps over the lazy dog."),
        ("prose2", "Mixture-of-experts models route each token to a few experts, so most weights stay idle."),
        ("sentences", "Hello, world! How are you today? I'm fine; thanks."),
        ("leading_space", " leading space and trailing"),
        ("caps", "HELLO WORLD, THIS IS LOUD."),
        ("mixed_case", "camelCase snake_case PascalCase SCREAMING_SNAKE kebab-case"),
        ("contractions", "I'll do it. You're right. We've seen it. She's here. It's 'quoted'."),
        ("contractions_caps", "DON'T STOP. I'LL GO. YOU'RE, WE'VE, SHE'D, I'M, IT'S"),
        ("contractions_mixed", "Don'T wOn'T i'Ll I'm ThEy'Re"),
        ("contraction_alone", "'s 't 're 've 'm 'll 'd"),
        ("apostrophe_other", "rock 'n' roll, the '90s, O'Brien, l'été"),
        ("python_def", "def add(a, b):\n    return a + b\n"),
        ("python_class", "class Foo(Bar):\n    \"\"\"Docstring.\"\"\"\n\n    def __init__(self, x=1):\n        self.x = x  # comment\n"),
        ("python_loop", "for i in range(10):\n\tif i % 2 == 0:\n\t\tprint(f\"{i:>3d}\")\n"),
        ("python_dict", "d = {'key': [1, 2, 3], \"other\": None}\nprint(d.get('key', []))"),
        ("c_code", "int main(void) { return printf(\"%d\\n\", 42) < 0; }"),
        ("json", '{"a": 1, "b": [true, false, null], "c": {"d": "e"}}'),
        ("operators", "a += 1; b -= 2; c *= 3; d //= 4; e **= 5; f != g; h >= i; j <= k; l == m; x->y"),
        ("punct_runs", "Wait... what?!? --- *** ### !!! ??? ((( )))"),
        ("url", "https://example.com/path?query=1&x=y#frag"),
        ("email", "user.name+tag@example.org"),
        ("numbers", "123 4567 89012 3.14159 -42 1e-10 0x1F 1,000,000"),
        ("numbers_glued", "abc123def 2024-01-15 v1.2.3 3rd 21st"),
        ("digits_long", "12345678901234567890"),
        ("spaces_2", "a  b"),
        ("spaces_many", "a          b"),
        ("spaces_trailing", "trailing spaces   "),
        ("spaces_only", "     "),
        ("tabs", "a\tb\t\tc\t\t\t"),
        ("tab_space_mix", "\t  \t x"),
        ("newline", "line1\nline2"),
        ("newlines_many", "para1\n\n\npara2\n"),
        ("crlf", "line1\r\nline2\r\n\r\nline3"),
        ("cr_only", "a\rb\r\rc"),
        ("spaces_before_newline", "end   \n  start"),
        ("indent_code", "if x:\n        y = 1\n    z = 2\n"),
        ("only_newlines", "\n\n\n"),
        ("unicode_spaces", "a\u00a0b\u2003c\u3000d"),
        ("accented_precomposed", "café naïve résumé"),
        ("accented_decomposed", "cafe\u0301 nai\u0308ve re\u0301sume\u0301"),
        ("e_acute_nfc", "\u00e9"),
        ("e_acute_nfd", "e\u0301"),
        ("angstrom_sign", "\u212b and \u00c5"),
        ("hangul_decomposed", "\u1100\u1161\u11a8"),
        ("combining_stack", "a\u0301\u0302\u0303 z\u0336"),
        ("german", "Größe Straße Übung schön Fußgänger"),
        ("polish_czech", "Zażółć gęślą jaźń. Dvořák"),
        ("cjk_ja", "東京は日本の首都です。"),
        ("cjk_zh", "我们今天学习机器学习和自然语言处理。"),
        ("cjk_mixed_ascii", "模型model专家expert路由router 123"),
        ("korean", "안녕하세요, 세계!"),
        ("cyrillic", "Привет, мир! Москва"),
        ("greek", "Καλημέρα κόσμε"),
        ("arabic", "مرحبا بالعالم"),
        ("hebrew", "שלום עולם"),
        ("rtl_mixed", "abc שלום 123 مرحبا xyz"),
        ("hindi_thai", "नमस्ते दुनिया ภาษาไทย"),
        ("emoji_simple", "I love 🚀 and 🎉!"),
        ("emoji_zwj_family", "👩‍👩‍👧"),
        ("emoji_zwj_coder", "👨‍💻 codes"),
        ("emoji_flag", "🇯🇵🇫🇷"),
        ("emoji_skin_tone", "👍🏽 👍"),
        ("emoji_variation", "❤️ ❤ ✨"),
        ("emoji_rainbow_flag", "🏳️‍🌈"),
        ("emoji_unseen", "🦩🪐🫠"),
        ("symbols", "α β γ ∑ ∫ √ ∞ ≤ ≥ ≠ ± → ⇒ €100 £5 ¥"),
        ("quotes", "“smart quotes” ‘single’ «guillemets» — dash – en"),
        ("rare_cjk", "龘靐齉"),
        ("control_chars", "a\x00b\x01c\x7fd"),
        ("special_alone", "<|im_start|>"),
        ("special_all", "<|endoftext|><|im_start|><|im_end|>"),
        ("special_in_text", "hello<|im_end|>world"),
        ("special_spaces", " <|im_start|> user <|im_end|> "),
        ("chatml", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"),
        ("special_partial", "<|im_start <|im_end| |im_start|> <|endoftext"),
        ("special_after_newline", "text\n<|endoftext|>\nmore"),
        ("special_glued_code", "x=1<|im_end|>y=2"),
        ("inst", "[INST] What is 2+2? [/INST] 4"),
        ("long_word", "supercalifragilisticexpialidocious antidisestablishmentarianism"),
        ("repeated", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
        ("repeated_words", "the the the the the the"),
        ("markdown", "# Title\n\n- item **bold** _it_\n\n```python\nx = 1\n```\n"),
        ("path", "/usr/lib/python3.11/json/__init__.py C:\\Windows\\System32"),
        ("mixed_all", "Résumé: 東京 🚀 DON'T\tstop\r\n  x = 42; # ok <|im_end|>"),
    ]
    return c


def write_tokenizer_cases(tok, tok_dir):
    from transformers import AutoTokenizer
    hf = AutoTokenizer.from_pretrained(tok_dir)
    lines = []
    for name, text in tokenizer_case_texts():
        ids = tok.encode(text, add_special_tokens=False).ids
        ids_hf = hf.encode(text, add_special_tokens=False)
        if ids != ids_hf:
            raise SystemExit(f"tokenizer case {name}: tokenizers and transformers disagree")
        lines.append(json.dumps({"name": name, "text": text, "ids": ids}, ensure_ascii=False))
    path = os.path.join(tok_dir, "cases.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    # NFC must make the decomposed and precomposed forms identical.
    enc = lambda s: tok.encode(s, add_special_tokens=False).ids
    assert enc("e\u0301") == enc("\u00e9")
    return path, len(lines)


def write_chat_cases(tok_dir, fixture_dirs):
    from transformers import AutoTokenizer
    convo = [{"role": "system", "content": "You are terse."},
             {"role": "user", "content": "Say hi in French."},
             {"role": "assistant", "content": "Salut !"},
             {"role": "user", "content": "And in Japanese?"}]
    lines = []
    for name, d in fixture_dirs:
        hf = AutoTokenizer.from_pretrained(d)
        msgs = convo if name != "mixtral" else convo[1:]
        for gen in (True, False):
            text = hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen)
            ids = hf.encode(text, add_special_tokens=False)
            lines.append(json.dumps({"fixture": name, "messages": msgs,
                                     "add_generation_prompt": gen, "text": text, "ids": ids},
                                    ensure_ascii=False))
    path = os.path.join(tok_dir, "chat_cases.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path

# ---------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------

VOCAB = BPE_VOCAB + len(SPECIALS)
ID_EOT, ID_IM_START, ID_IM_END = BPE_VOCAB, BPE_VOCAB + 1, BPE_VOCAB + 2

# One entry per primary fixture. rope_theta values are deliberately not the class defaults.
# Seeds were picked with --scan-seeds 30 (seeds 1001.., 1002.., 1003.., 1004..) so that both
# the teacher-forced and the greedy top-1/top-2 margins stay above 1e-2 for the whole prompt
# and all 32 steps.
PRIMARIES = {
    "qwen3_moe": dict(
        seed=1020, cls="Qwen3MoeForCausalLM", cfg_cls="Qwen3MoeConfig", chat="chatml",
        cfg=dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32,          # head_dim != hidden/heads
                 num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
                 intermediate_size=96, mlp_only_layers=[1],  # layer 1 is a dense MLP
                 decoder_sparse_step=1, norm_topk_prob=True, rms_norm_eps=1e-6,
                 rope_theta=250000.0, bos_token_id=ID_EOT, eos_token_id=ID_IM_END)),
    "qwen2_moe": dict(
        seed=1027, cls="Qwen2MoeForCausalLM", cfg_cls="Qwen2MoeConfig", chat="chatml",
        cfg=dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=2, num_experts=8, num_experts_per_tok=2,
                 moe_intermediate_size=32, shared_expert_intermediate_size=64,
                 intermediate_size=96, decoder_sparse_step=1, norm_topk_prob=False,
                 qkv_bias=True, rms_norm_eps=1e-6, rope_theta=30000.0,
                 bos_token_id=ID_EOT, eos_token_id=ID_IM_END)),
    "olmoe": dict(
        seed=1031, cls="OlmoeForCausalLM", cfg_cls="OlmoeConfig", chat="chatml",
        cfg=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, num_experts=8, num_experts_per_tok=2,
                 intermediate_size=32, norm_topk_prob=False, rms_norm_eps=1e-5,
                 rope_theta=5000.0, clip_qkv=None,
                 bos_token_id=None, eos_token_id=ID_EOT)),
    "mixtral": dict(
        seed=1028, cls="MixtralForCausalLM", cfg_cls="MixtralConfig", chat="inst",
        cfg=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, num_local_experts=8, num_experts_per_tok=2,
                 intermediate_size=64, rms_norm_eps=1e-5, rope_theta=80000.0,
                 sliding_window=None, bos_token_id=ID_EOT, eos_token_id=ID_EOT)),
    # sigmoid routing with e_score_correction_bias (drawn, not zero), 4 groups of 4
    # experts of which 2 are kept (group limiting prunes half), top-3 of the 8 left,
    # routed_scaling_factor 2.5; one ungated shared expert; layer 0 dense
    # (first_k_dense_replace); partial RoPE (16 of head_dim 32), q/k/v bias, QK norm
    "glm4_moe": dict(
        seed=1013, cls="Glm4MoeForCausalLM", cfg_cls="Glm4MoeConfig", chat="chatml",
        rope_extra=dict(partial_rotary_factor=0.5),
        cfg=dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, n_routed_experts=16,
                 num_experts_per_tok=3, moe_intermediate_size=32, intermediate_size=96,
                 n_shared_experts=1, first_k_dense_replace=1, n_group=4, topk_group=2,
                 norm_topk_prob=True, routed_scaling_factor=2.5, attention_bias=True,
                 use_qk_norm=True, rms_norm_eps=1e-5, rope_theta=40000.0,
                 bos_token_id=None, eos_token_id=ID_IM_END)),
    # sigmoid routing with e_score_correction_bias (drawn), top-3 of 12, renormalised, no
    # groups, no scale, no shared expert; QK norm over the whole q / k projection (before
    # the split into heads); partial RoPE (rotary_dim 16 of head_dim 32)
    "minimax_m2": dict(
        seed=1010, cls="MiniMaxM2ForCausalLM", cfg_cls="MiniMaxM2Config", chat="chatml",
        rope_extra=dict(partial_rotary_factor=0.5),
        cfg=dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, num_local_experts=12,
                 num_experts_per_tok=3, intermediate_size=32, rms_norm_eps=1e-6,
                 rope_theta=70000.0, bos_token_id=None, eos_token_id=ID_IM_END)),
    # MLA: q_lora_rank 32, kv_lora_rank 64, nope 32 + rope 16 (qk head 48), v 32; YaRN
    # (factor 4 over an original 128 positions, mscale 1 / mscale_all_dim 0.8: the cos/sin
    # factor and the softmax scale both differ from 1), rope_interleave (the default);
    # routing as glm4_moe's (bias, 4 groups of 4 keeping 2, top-3, scale 2.5), one
    # shared expert, layer 0 dense. Hub dialect: rope_scaling {"type": "yarn", ...}.
    # The MLA seeds (1017 here, 1016 below) were picked among 1016..1022: coli's q8
    # conversion keeps its bf16 top-1 at all 51 prompt positions (others flipped 1-4
    # positions whose top-2 margin was under 0.2, as q8 noise of ~0.4 does) and no greedy
    # step's margin is under 1e-2
    "deepseek_v3": dict(
        seed=1017, cls="DeepseekV3ForCausalLM", cfg_cls="DeepseekV3Config", chat="chatml",
        rope_extra=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=128,
                        beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=0.8),
        cfg=dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=64,
                 qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
                 n_routed_experts=16, num_experts_per_tok=3, moe_intermediate_size=32,
                 intermediate_size=96, n_shared_experts=1, first_k_dense_replace=1,
                 n_group=4, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5,
                 rope_interleave=True, rms_norm_eps=1e-6, rope_theta=20000.0,
                 bos_token_id=None, eos_token_id=ID_IM_END)),
    # the same family with q_lora_rank null (a plain q_proj), plain RoPE, written the
    # transformers-5 way: fused 3-D expert tensors, the config as v5 writes it
    # (rope_parameters, num_mtp_layers)
    "deepseek_v3_noqlora": dict(
        seed=1016, cls="DeepseekV3ForCausalLM", cfg_cls="DeepseekV3Config", chat="chatml",
        how="fused",
        cfg=dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=4, q_lora_rank=None, kv_lora_rank=64,
                 qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
                 n_routed_experts=16, num_experts_per_tok=3, moe_intermediate_size=32,
                 intermediate_size=96, n_shared_experts=1, first_k_dense_replace=1,
                 n_group=4, topk_group=2, norm_topk_prob=True, routed_scaling_factor=2.5,
                 rope_interleave=True, rms_norm_eps=1e-6, rope_theta=30000.0,
                 bos_token_id=None, eos_token_id=ID_IM_END)),
    # gpt-oss: attention sinks (drawn N(0,1), not ~0), sliding window 8 < the prompt's 51
    # tokens on layers 0 and 2 (layer_types' default alternation), q/k/v/o biases, router
    # bias (added to the logits; softmax over the top-2 logits), expert biases, the clamped
    # SwiGLU with swiglu_limit 0.25 (so that it clamps: gate and up are ~0.3 std here; the
    # released models' 7.0 never would), YaRN factor 4 over 128 positions with "truncate":
    # false; intermediate 64 so that gate_up's 2I (128) is not hidden (64). The expert
    # weights are rounded to MXFP4 values (E2M1 x 2^e per 32 inputs: mxfp4_round), exact in
    # bf16, so that gpt_oss_mxfp4 holds the same weights as _blocks/_scales
    "gpt_oss": dict(
        seed=1040, cls="GptOssForCausalLM", cfg_cls="GptOssConfig", chat="chatml",
        rope_extra=dict(rope_type="yarn", factor=4.0, original_max_position_embeddings=128,
                        beta_fast=32.0, beta_slow=1.0, truncate=False),
        cfg=dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, num_local_experts=8,
                 num_experts_per_tok=2, intermediate_size=64, sliding_window=8,
                 swiglu_limit=0.25, attention_bias=True, rms_norm_eps=1e-5,
                 rope_theta=60000.0, bos_token_id=None, eos_token_id=ID_IM_END)),
}
CHAT_CASE_FIXTURES = ("qwen3_moe", "qwen2_moe", "olmoe", "mixtral")
# Variants: (name, primary, how). They share the primary's weights and references.
VARIANTS = [("qwen3_moe_fused", "qwen3_moe", "fused"),
            ("qwen2_moe_sharded", "qwen2_moe", "sharded"),
            ("gpt_oss_mxfp4", "gpt_oss", "mxfp4")]
# Long-context variants (long/NAME/): a primary's weights read back from OUT/PRIMARY with
# another config -- RoPE scaling and max_position_embeddings -- and transformers' logits at a
# few positions of an N_LONG-token prompt (long_ids below), so only config.json and a few
# KiB of references are committed; tests/core/long_rope.c puts the checkpoint together.
# (name, primary, dialect, rope scaling, max_position_embeddings). Trained lengths as vLLM
# derives them: yarn original * factor (qwen3's 2560 is below it, as Qwen3-30B-A3B's 40960
# is below the 131072 its model card's factor 4 gives), linear max_position_embeddings *
# factor; all 8192 = N_LONG.
LONG = [("qwen3_moe_yarn", "qwen3_moe", "rope_scaling",
         {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}, 2560),
        ("qwen3_moe_linear", "qwen3_moe", "rope_parameters",
         {"rope_type": "linear", "factor": 4.0}, 2048),
        ("glm4_moe_yarn", "glm4_moe", "rope_scaling",
         {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}, 8192)]
N_LONG = 8192
LONG_POSITIONS = [0, 1, 2047, 2048, 4095, 6143, 8000, 8191]
LEGACY_MERGES = ("qwen2_moe", "qwen2_moe_sharded")    # tokenizer.json merges as "a b" strings
SHARD_SIZE = "300KB"

PROMPT = ("<|im_start|>user\nFix: def add(a, b): return a - b<|im_end|>\n"
          "<|im_start|>assistant\nUse `a + b`. Café 東京 🚀")
N_NEW = 32
MARGIN_MIN = 1e-2


def build_model(spec):
    cfg_cls = getattr(transformers, spec["cfg_cls"])
    kw = dict(spec["cfg"])
    theta = kw.pop("rope_theta")
    rope = dict({"rope_type": "default", "rope_theta": theta}, **spec.get("rope_extra", {}))
    cfg = cfg_cls(vocab_size=VOCAB, max_position_embeddings=512, tie_word_embeddings=False,
                  pad_token_id=ID_EOT, rope_parameters=rope, **kw)
    torch.manual_seed(spec["seed"])
    model = getattr(transformers, spec["cls"])(cfg)
    reinit(model, spec["seed"])
    if cfg.model_type == "gpt_oss":
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):
                    p.copy_(mxfp4_round(p.data)[0])
    return model.to(torch.bfloat16).eval()


FP4_E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def mxfp4_round(w):
    """An expert tensor as transformers holds it, w [E, K, N] (x @ w: K inputs), rounded to
    MXFP4: per output n and 32 consecutive inputs, a power of two 2^s (s = ceil(log2(max /
    6))) times E2M1 values (nearest). Returns (the rounded w [E, K, N] in float32, blocks
    [E, N, K/32, 16] uint8, scales [E, N, K/32] uint8) in the Hub's layout: a row an output,
    byte k of a block elements 2k (low nibble) and 2k + 1 (high), scale s + 127, the nibble
    an E2M1 code (bit 3 the sign) -- what transformers' convert_moe_packed_tensors reads."""
    E, K, N = w.shape
    x = w.float().permute(0, 2, 1).reshape(E, N, K // 32, 32)
    amax = x.abs().amax(-1, keepdim=True)
    s = torch.ceil(torch.log2(amax.clamp(min=2.0 ** -100) / 6)).clamp(-127, 127)
    y = x / 2 ** s
    idx = (y.abs().unsqueeze(-1) - FP4_E2M1).abs().argmin(-1)
    code = idx + 8 * (y < 0)
    deq = torch.where(y < 0, -FP4_E2M1[idx], FP4_E2M1[idx]) * 2 ** s
    blocks = (code[..., 0::2] | (code[..., 1::2] << 4)).to(torch.uint8)
    scales = (s[..., 0] + 127).to(torch.uint8)
    return deq.reshape(E, N, K).permute(0, 2, 1).contiguous(), blocks, scales


def write_mxfp4(d):
    """gpt-oss's Hub form of a saved fixture: each experts.gate_up_proj / down_proj replaced
    by its _blocks and _scales (exact: the weights are MXFP4 values already), and
    config.json's quantization_config as the released models have it."""
    from safetensors.torch import load_file, save_file
    path = os.path.join(d, "model.safetensors")
    sd, out = load_file(path), {}
    for k, v in sd.items():
        if k.endswith("experts.gate_up_proj") or k.endswith("experts.down_proj"):
            deq, blocks, scales = mxfp4_round(v)
            assert torch.equal(deq, v.float()), k
            out[k + "_blocks"], out[k + "_scales"] = blocks, scales
        else:
            out[k] = v
    save_file(out, path, metadata={"format": "pt"})
    cfg_path = os.path.join(d, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {
        "quant_method": "mxfp4",
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                   "model.embed_tokens", "lm_head"]}
    write_json(cfg_path, cfg)


@torch.no_grad()
def reinit(model, seed):
    """Weights with spread, so that logits are far from uniform and routing is decisive.

    norms 1 +- 0.1, biases 0.1, routers 0.5 (router logits ~ 4 std), embeddings 1.0,
    lm_head 1.0, everything else 0.04 (the default 0.02 would make every logit ~0).
    Inner weights stay small (gain < 1 per matrix) so the network is not chaotic: with
    0.15 a q8 rounding anywhere flipped ~10% of the argmaxes, which says nothing about
    the engine; with 0.04 attention and experts still move every logit by far more than
    the 1e-3 test tolerance."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        r = torch.randn(p.shape, generator=g, dtype=torch.float32)
        if "norm" in name:
            p.copy_(1.0 + 0.1 * r)
        elif name.endswith("bias"):
            p.copy_(0.1 * r)
        elif (name.endswith("mlp.gate.weight") or "shared_expert_gate" in name
              or name.endswith("mlp.router.weight")):
            p.copy_(0.5 * r)
        elif name.endswith("self_attn.sinks"):       # gpt-oss: about a score's size
            p.copy_(1.0 * r)
        elif "embed_tokens" in name:
            p.copy_(1.0 * r)
        elif name == "lm_head.weight":
            p.copy_(1.0 * r)
        else:
            p.copy_(0.04 * r)
    # sigmoid routers' e_score_correction_bias (a buffer, so not above): 0.3 N(0,1), about
    # the spread of the sigmoid scores, so the bias changes which experts are chosen
    for name, b in model.named_buffers():
        if name.endswith("e_score_correction_bias"):
            b.copy_(0.3 * torch.randn(b.shape, generator=g, dtype=torch.float32))


def hub_dialect(cfg):
    """transformers 5 writes rope_parameters/dtype (and num_local_experts for qwen3_moe);
    rewrite to the dialect of the checkpoints on the Hub: rope_theta, torch_dtype, ..."""
    rp = cfg.pop("rope_parameters")
    assert rp.get("rope_type", "default") in ("default", "yarn"), rp
    cfg["rope_theta"] = rp.pop("rope_theta")
    cfg["rope_scaling"] = None
    if rp.get("rope_type") == "yarn":           # DeepSeek-V3's files: "type": "yarn"
        rp.pop("rope_type")
        cfg["rope_scaling"] = dict(sorted(dict(rp, type="yarn").items()))
    if "partial_rotary_factor" in rp:           # GLM-4.5's files: a top-level key
        cfg["partial_rotary_factor"] = rp["partial_rotary_factor"]
    if cfg["model_type"] in ("glm4_moe", "deepseek_v3"):  # the Hub's spellings
        if "num_local_experts" in cfg:
            cfg["n_routed_experts"] = cfg.pop("num_local_experts")
        if "num_mtp_layers" in cfg:
            cfg["num_nextn_predict_layers"] = cfg.pop("num_mtp_layers")
    if cfg["model_type"] == "gpt_oss":          # gpt-oss's config.json: both top-k keys
        cfg["experts_per_token"] = cfg["num_experts_per_tok"]
        cfg["initial_context_length"] = cfg["rope_scaling"]["original_max_position_embeddings"]
    if cfg["model_type"] == "minimax_m2":       # MiniMax-M2's config.json spellings
        cfg["rotary_dim"] = int(cfg.pop("partial_rotary_factor", 1.0) * cfg["head_dim"])
        cfg.update(use_qk_norm=True, qk_norm_type="per_layer", scoring_func="sigmoid",
                   use_routing_bias=True, shared_intermediate_size=0, use_mtp=True,
                   num_mtp_modules=3, mtp_transformer_layers=1,
                   attn_type_list=[1] * cfg["num_hidden_layers"])
    if "dtype" in cfg:
        cfg["torch_dtype"] = cfg.pop("dtype")
    if cfg["model_type"] in ("qwen3_moe", "qwen2_moe") and "num_local_experts" in cfg:
        cfg["num_experts"] = cfg.pop("num_local_experts")
    if cfg.get("head_dim", 0) is None:
        del cfg["head_dim"]
    return dict(sorted(cfg.items()))


def save_fixture(model, out, name, chat, tok, how, legacy_merges=False):
    d = os.path.join(out, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    if how == "fused":
        model.save_pretrained(d, safe_serialization=True, save_original_format=False)
    elif how == "mxfp4":
        model.save_pretrained(d, safe_serialization=True)
    elif how == "sharded":
        model.save_pretrained(d, safe_serialization=True, max_shard_size=SHARD_SIZE)
    else:
        model.save_pretrained(d, safe_serialization=True)
    cfg_path = os.path.join(d, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    if how != "fused":                          # the fused variant keeps the v5 dialect
        write_json(cfg_path, hub_dialect(cfg))
    if how == "mxfp4":
        write_mxfp4(d)
    gen = {"bos_token_id": model.config.bos_token_id,
           "eos_token_id": ([ID_IM_END, ID_EOT] if chat == "chatml" else ID_EOT),
           "pad_token_id": ID_EOT, "transformers_version": transformers.__version__}
    write_json(os.path.join(d, "generation_config.json"), gen)
    save_tokenizer_json(tok, os.path.join(d, "tokenizer.json"), legacy_merges)
    write_json(os.path.join(d, "tokenizer_config.json"), tokenizer_config(tok, chat))
    return d


def check_weights(d, model):
    """The checkpoint loads back (float32) to exactly the bf16 weights we made.

    References always come from this reloaded model, never from the in-memory one: its
    .to(bfloat16) also rounded the non-persistent RoPE inv_freq buffer to bf16, which moves
    the logits by ~2e-2 (measured on mixtral) -- the reloaded model recomputes it in fp32."""
    m = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32,
                                                          attn_implementation="eager")
    ref = model.state_dict()
    got = m.state_dict()
    assert sorted(ref) == sorted(got), (set(ref) ^ set(got))
    for k in ref:
        assert torch.equal(ref[k].float(), got[k]), k
    return m.eval()


@torch.no_grad()
def references(m, ids, ref_dir):
    os.makedirs(ref_dir, exist_ok=True)
    x = torch.tensor([ids])
    out = m(x, output_router_logits=True)
    logits = out.logits[0].float().contiguous()                      # (T, V)
    logits.numpy().astype("<f4").tofile(os.path.join(ref_dir, "logits.f32"))
    # greedy: full recompute each step (no KV cache), float32; margins are top1 - top2
    seq = list(ids)
    new, margins = [], []
    for _ in range(N_NEW):
        last = m(torch.tensor([seq])).logits[0, -1].float()
        top = torch.topk(last, 2)
        new.append(int(top.indices[0]))
        margins.append(float(top.values[0] - top.values[1]))
        seq.append(new[-1])
    # the same through transformers' generate (KV cache), for the record
    gen = m.generate(x, do_sample=False, max_new_tokens=N_NEW, min_new_tokens=N_NEW,
                     eos_token_id=None, pad_token_id=ID_EOT)[0, len(ids):].tolist()
    first_low = next((i for i, v in enumerate(margins) if v < MARGIN_MIN), None)
    agree = next((i for i, (a, b) in enumerate(zip(new, gen)) if a != b), None)
    if agree is not None and (first_low is None or agree < first_low):
        raise SystemExit(f"{ref_dir}: generate() differs from the recompute loop at step {agree}")
    with open(os.path.join(ref_dir, "prompt.txt"), "w", encoding="utf-8") as f:
        f.write(PROMPT)
    with open(os.path.join(ref_dir, "ids.txt"), "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")
    with open(os.path.join(ref_dir, "greedy.txt"), "w") as f:
        f.write(" ".join(map(str, new)) + "\n")
    with open(os.path.join(ref_dir, "greedy_margin.txt"), "w") as f:
        f.write(" ".join(f"{v:.6f}" for v in margins) + "\n")
    # statistics that show the fixture is discriminative
    spread = (logits.max(-1).values - logits.mean(-1))
    t2 = torch.topk(logits, 2, dim=-1).values
    tf_margin = t2[:, 0] - t2[:, 1]
    router_gap = []
    if getattr(out, "router_logits", None) and m.config.model_type not in (
            "glm4_moe", "minimax_m2", "deepseek_v3"):
        k = m.config.num_experts_per_tok
        for rl in out.router_logits:                                 # (T, E) per MoE layer
            s = torch.sort(rl.float(), dim=-1, descending=True).values
            router_gap.append(float((s[:, k - 1] - s[:, k]).min()))
    meta = {
        "n_tokens": len(ids), "vocab": logits.shape[1], "n_new": N_NEW,
        "logits": "float32 little-endian, row-major [n_tokens x vocab], teacher-forced",
        "greedy_first_margin_below_1e-2": first_low,
        "generate_matches_recompute": agree is None,
        "logit_max_minus_mean_min": round(float(spread.min()), 4),
        "logit_max_minus_mean_mean": round(float(spread.mean()), 4),
        "logit_abs_max": round(float(logits.abs().max()), 4),
        "teacher_forced_top2_margin_min": round(float(tf_margin.min()), 6),
        "teacher_forced_top2_margin_frac_over_1e-2": round(float((tf_margin > 1e-2).float().mean()), 4),
        "router_topk_gap_min_per_moe_layer": [round(v, 5) for v in router_gap],
        "transformers": transformers.__version__, "torch": torch.__version__,
    }
    write_json(os.path.join(ref_dir, "meta.json"), meta)
    return logits, new, meta


def long_ids(n):
    """The long prompt: ids[i] = (7919 i + 13) mod 1021 (learned ids only, no specials);
    tests/core/long_rope.c makes the same."""
    return [(7919 * i + 13) % 1021 for i in range(n)]


@torch.no_grad()
def write_long(out, name, base, dialect, rope, max_pos):
    """long/NAME/: config.json (the primary's, RoPE scaling in `dialect`) and ref/
    (logits_at.f32 [len(LONG_POSITIONS) x vocab] float32, meta.json), from transformers in
    float32 (sdpa) over long_ids(N_LONG) with the primary's bf16 weights."""
    import tempfile
    src = os.path.join(out, base)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    theta = cfg["rope_theta"]
    cfg["max_position_embeddings"] = max_pos
    if dialect == "rope_scaling":               # the Hub's files (Qwen's model cards)
        cfg["rope_scaling"] = dict(rope)
    else:                                       # transformers 5: theta inside
        del cfg["rope_theta"]
        cfg.pop("rope_scaling", None)
        cfg["rope_parameters"] = dict(rope, rope_theta=theta)
    d = os.path.join(out, "long", name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(os.path.join(d, "ref"))
    write_json(os.path.join(d, "config.json"), dict(sorted(cfg.items())))
    ids = long_ids(N_LONG)
    with tempfile.TemporaryDirectory() as t:
        for fn in os.listdir(src):
            if fn != "config.json" and os.path.isfile(os.path.join(src, fn)):
                os.symlink(os.path.abspath(os.path.join(src, fn)), os.path.join(t, fn))
        shutil.copy(os.path.join(d, "config.json"), os.path.join(t, "config.json"))
        m = transformers.AutoModelForCausalLM.from_pretrained(t, dtype=torch.float32,
                                                              attn_implementation="sdpa").eval()
        kind = rope.get("rope_type", rope.get("type"))
        assert m.config.rope_parameters["rope_type"] == kind, m.config.rope_parameters
        logits = m(torch.tensor([ids])).logits[0, LONG_POSITIONS].float().contiguous()
        # the same weights with plain RoPE: how far the scaling moves these logits
        m2 = transformers.AutoModelForCausalLM.from_pretrained(
            t, dtype=torch.float32, attn_implementation="sdpa",
            rope_parameters={"rope_type": "default", "rope_theta": theta,
                             **({"partial_rotary_factor": cfg["partial_rotary_factor"]}
                                if "partial_rotary_factor" in cfg else {})}).eval()
        plain = m2(torch.tensor([ids])).logits[0, LONG_POSITIONS].float()
    logits.numpy().astype("<f4").tofile(os.path.join(d, "ref", "logits_at.f32"))
    meta = {"primary": base, "n_tokens": N_LONG, "positions": LONG_POSITIONS,
            "ids": "ids[i] = (7919 i + 13) mod 1021", "vocab": logits.shape[1],
            "logits_at": "float32 little-endian, [positions x vocab], teacher-forced",
            "logit_abs_max": round(float(logits.abs().max()), 4),
            "plain_rope_max_abs_diff": round(float((plain - logits).abs().max()), 4),
            "transformers": transformers.__version__, "torch": torch.__version__}
    write_json(os.path.join(d, "ref", "meta.json"), meta)
    return d, meta


def describe_tensors(d):
    names = {}
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".safetensors"):
            with safe_open(os.path.join(d, fn), "pt") as f:
                for k in f.keys():
                    names[k] = (fn, f.get_slice(k).get_shape(), f.get_slice(k).get_dtype())
    return names


def check_fused_layout(fused_dir, hub_dir):
    """Pin down the fused layout against the per-expert one, tensor by tensor:
    experts.gate_up_proj (E, 2*I, H) = cat([gate_proj (I, H), up_proj (I, H)], dim 0) per
    expert -- gate first; experts.down_proj (E, H, I) = stack of down_proj (H, I)."""
    fused, hub = describe_tensors(fused_dir), describe_tensors(hub_dir)
    load = lambda d, names, k: safe_open(os.path.join(d, names[k][0]), "pt").get_tensor(k)
    n = 0
    for k in fused:
        if not k.endswith("experts.gate_up_proj"):
            continue
        pre = k[: -len("gate_up_proj")]
        gu, dn = load(fused_dir, fused, k), load(fused_dir, fused, pre + "down_proj")
        E, I2, H = gu.shape
        assert dn.shape == (E, H, I2 // 2)
        for e in range(E):
            g = load(hub_dir, hub, f"{pre}{e}.gate_proj.weight")
            u = load(hub_dir, hub, f"{pre}{e}.up_proj.weight")
            dw = load(hub_dir, hub, f"{pre}{e}.down_proj.weight")
            assert torch.equal(gu[e, : I2 // 2], g) and torch.equal(gu[e, I2 // 2:], u)
            assert torch.equal(dn[e], dw)
        n += 1
    assert n > 0
    assert not any(".experts.0." in k for k in fused)


@torch.no_grad()
def scan_seeds(tok, ids, count, only=None):
    """--scan-seeds: the smallest teacher-forced and greedy top-2 margins for `count` seeds
    per primary, through the same save / reload path as the fixtures. How seeds were picked."""
    import tempfile
    for name, spec in PRIMARIES.items():
        if only is not None and name not in only:
            continue
        base = 1001 + list(PRIMARIES).index(name)
        for seed in range(base, base + count):
            model = build_model(dict(spec, seed=seed))
            with tempfile.TemporaryDirectory() as d:
                model.save_pretrained(d, safe_serialization=True)
                m = transformers.AutoModelForCausalLM.from_pretrained(
                    d, dtype=torch.float32, attn_implementation="eager").eval()
            top = torch.topk(m(torch.tensor([ids])).logits[0], 2, dim=-1).values
            seq, gmin = list(ids), float("inf")
            for _ in range(N_NEW):
                t = torch.topk(m(torch.tensor([seq])).logits[0, -1], 2)
                gmin = min(gmin, float(t.values[0] - t.values[1]))
                seq.append(int(t.indices[0]))
            tmin = float((top[:, 0] - top[:, 1]).min())
            ok = "ok" if min(tmin, gmin) > MARGIN_MIN else ""
            print(f"{name} seed {seed}: teacher-forced min margin {tmin:.4f}  "
                  f"greedy min margin {gmin:.4f} {ok}", flush=True)


def dir_size(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--scan-seeds", type=int, metavar="N", default=0,
                    help="print the margins of N seeds per architecture and write nothing")
    ap.add_argument("--only", metavar="NAME[,NAME]",
                    help="write only these fixtures (a variant needs its primary named too); "
                         "the tokenizer is read from OUT/tokenizer, nothing else is rewritten")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else None
    variant_of = {n: b for n, b, _ in VARIANTS}
    long_names = {n for n, *_ in LONG}
    for n in only or ():
        if n in long_names:
            continue
        if n not in PRIMARIES and n not in variant_of:
            ap.error(f"--only: no fixture named {n}")
        if n in variant_of and variant_of[n] not in only:
            ap.error(f"--only: {n} needs its primary {variant_of[n]} named too")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    if args.scan_seeds:
        tok = train_tokenizer()
        scan_seeds(tok, tok.encode(PROMPT, add_special_tokens=False).ids, args.scan_seeds, only)
        return
    os.makedirs(args.out, exist_ok=True)
    print(f"python {sys.version.split()[0]}  torch {torch.__version__}  "
          f"transformers {transformers.__version__}  tokenizers {tokenizers.__version__}")

    tok_dir = os.path.join(args.out, "tokenizer")
    if only:
        tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
        print(f"read {tok_dir}/tokenizer.json  vocab {tok.get_vocab_size()}")
    else:
        if os.path.exists(tok_dir):
            shutil.rmtree(tok_dir)
        os.makedirs(tok_dir)
        tok = train_tokenizer()
        tok.save(os.path.join(tok_dir, "tokenizer.json"))
        write_json(os.path.join(tok_dir, "tokenizer_config.json"),
                   tokenizer_config(tok, "chatml"))
        sha = hashlib.sha256(open(os.path.join(tok_dir, "tokenizer.json"), "rb").read()).hexdigest()
        print(f"wrote {tok_dir}/tokenizer.json  vocab {tok.get_vocab_size()}  sha256 {sha[:16]}")
        path, n = write_tokenizer_cases(tok, tok_dir)
        print(f"wrote {path}  {n} cases")

    ids = tok.encode(PROMPT, add_special_tokens=False).ids
    print(f"prompt: {len(ids)} tokens")
    assert ID_IM_START in ids and tok.token_to_id("<|im_start|>") == ID_IM_START

    made, fixture_dirs = {}, []
    for name, spec in PRIMARIES.items():
        if only is not None and name not in only:
            continue
        model = build_model(spec)
        d = save_fixture(model, args.out, name, spec["chat"], tok, spec.get("how", "hub"),
                         name in LEGACY_MERGES)
        m = check_weights(d, model)
        theta = spec["cfg"]["rope_theta"]
        assert m.config.rope_parameters["rope_theta"] == theta, m.config.rope_parameters
        logits, greedy, meta = references(m, ids, os.path.join(d, "ref"))
        made[name] = (model, spec, logits, greedy)
        fixture_dirs.append((name, d))
        print(f"wrote {d}  {dir_size(d) / 1024:.0f} KiB  tokens {len(ids)}  "
              f"spread min {meta['logit_max_minus_mean_min']}  "
              f"top2>1e-2 {meta['teacher_forced_top2_margin_frac_over_1e-2']}  "
              f"greedy low-margin step {meta['greedy_first_margin_below_1e-2']}  "
              f"router gap {meta['router_topk_gap_min_per_moe_layer']}")
        # a wrong rope_theta must be visible in the logits (config-reading bug detector)
        cfg_wrong = m.config
        saved = dict(cfg_wrong.rope_parameters)
        m2 = transformers.AutoModelForCausalLM.from_pretrained(
            d, dtype=torch.float32, attn_implementation="eager",
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0 if theta != 10000.0 else 1e6})
        with torch.no_grad():
            dl = (m2(torch.tensor([ids])).logits[0] - logits).abs().max().item()
        print(f"  logits with a default rope_theta differ by max {dl:.3f} (saved theta {saved['rope_theta']})")

    for name, base, how in VARIANTS:
        if only is not None and name not in only:
            continue
        model, spec, logits, greedy = made[base]
        d = save_fixture(model, args.out, name, spec["chat"], tok, how, name in LEGACY_MERGES)
        if how == "fused":
            check_fused_layout(d, os.path.join(args.out, base))
        if how == "sharded":
            shards = [f for f in os.listdir(d) if f.endswith(".safetensors")]
            assert 2 <= len(shards) <= 3, shards
        # mxfp4: transformers reads the _blocks/_scales back (dequantizing on the CPU,
        # accelerate installed) to exactly the bf16 weights: the layout is its own
        m = check_weights(d, model)
        assert m.config.rope_parameters["rope_theta"] == spec["cfg"]["rope_theta"]
        lv, gv, meta = references(m, ids, os.path.join(d, "ref"))
        assert torch.equal(lv, logits) and gv == greedy, f"{name} references differ from {base}"
        fixture_dirs.append((name, d))
        print(f"wrote {d}  {dir_size(d) / 1024:.0f} KiB  ({how}; references equal {base}'s)")

    for name, base, dialect, rope, max_pos in LONG:
        if only is not None and name not in only:
            continue
        d, meta = write_long(args.out, name, base, dialect, rope, max_pos)
        print(f"wrote {d}  {dir_size(d) / 1024:.0f} KiB  {N_LONG} tokens, logits at "
              f"{LONG_POSITIONS}; plain RoPE moves them by {meta['plain_rope_max_abs_diff']} "
              f"(max|logit| {meta['logit_abs_max']})")

    if only is None:
        path = write_chat_cases(tok_dir, [(n, d) for n, d in fixture_dirs
                                          if n in CHAT_CASE_FIXTURES])
        print(f"wrote {path}")

    print(f"total {dir_size(args.out) / 1024:.0f} KiB under {args.out}")


if __name__ == "__main__":
    main()
