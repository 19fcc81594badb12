#!/usr/bin/env python3
"""Train coli's demo model: a small Qwen3-MoE-architecture LM, saved in Hugging Face format.

Offline by design: the corpus is text every GPU host already has -- the Python standard
library's *.py sources (sysconfig.get_paths()["stdlib"]) plus uncompressed docs under
/usr/share/doc (*.txt, *.md, *.rst, README*) when present. When those two come to less than
40 MiB (Ubuntu's system Python ships without its test suite; containers strip /usr/share/doc),
installed packages' *.py files (site-packages, md5(path) order) top the corpus up to 40 MiB so
a few minutes on an H200 do not turn into dozens of epochs (--site-packages-mb 0 turns that
off). Files are read in sorted order;
a file is held out when md5(its corpus path) % 50 == 0 (stable when files come and go).
A byte-level BPE tokenizer (Qwen2-style pre-tokenizer) is trained on the training files.

The training loop runs for a wall-clock budget (--minutes), AdamW + bf16 autocast, warmup then
cosine decay over the *time* budget, router aux loss on. Outputs in --out:

  model-0000K-of-0000N.safetensors (+ model.safetensors.index.json)   bf16, shards < 16 MB
  config.json  generation_config.json  tokenizer.json  tokenizer_config.json (ChatML template)
  held_out.txt   the held-out text (<= 256 KiB) that the final held-out loss is measured on
  train_log.json data description, command, seed, versions, losses, perplexity, expert load

Held-out protocol (so other tools can reproduce the number): tokenize held_out.txt as plain
text (no special tokens), cut the ids into consecutive non-overlapping windows of --seq-len
tokens (the tail shorter than 2 tokens is dropped, a shorter tail is kept), each window is an
independent sequence starting at position 0; loss = mean next-token cross-entropy over every
predicted position of every window (the first token of each window is not predicted).

  GPU:  python3 tools/ref/train_demo_moe.py --out models/demo --minutes 6
  CPU smoke test: python3 tools/ref/train_demo_moe.py --tiny --device cpu --minutes 1 --out /tmp/demo
"""

import argparse
import contextlib
import hashlib
import json
import math
import os
import platform
import random
import shlex
import shutil
import sys
import sysconfig
import tarfile
import time

# Keep the hub offline and quiet: everything here is local.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

import torch
import torch.nn.functional as F

import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, Qwen3MoeConfig, Qwen3MoeForCausalLM

QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
DOC_SKIP_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".html", ".htm", ".pdf", ".png", ".svg")
HELD_OUT_MOD = 50
CORPUS_TARGET_MIB = 40  # stdlib + docs are topped up to this with installed packages' *.py (see --site-packages-mb)
HELD_OUT_MAX_BYTES = 256 * 1024
MAX_FILE_BYTES = 512 * 1024
DOCS_MAX_BYTES = 16 * 1024 * 1024
TOTAL_MAX_BYTES = 40 * 1000 * 1000     # whole model directory, asserted
FILE_MAX_BYTES = 16 * 1000 * 1000      # any single output file (transfer limit is 16 MB)
SHARD_SIZE = "15MB"                    # 36 MB of bf16 -> 3 shards


def log(msg):
    print(msg, flush=True)


# ----------------------------------------------------------------------------- data

def collect_corpus(tiny, site_mb=0):
    """Returns (files, description). files: list of (corpus_path, text), sorted by corpus_path."""
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    entries = []  # (corpus_path, abs_path)
    for root, dirs, names in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in ("site-packages", "dist-packages", "__pycache__"))
        for n in names:
            if n.endswith(".py"):
                p = os.path.join(root, n)
                entries.append(("stdlib/" + os.path.relpath(p, stdlib), p))
    docs_root = "/usr/share/doc"
    doc_entries = []
    if os.path.isdir(docs_root):
        for root, dirs, names in os.walk(docs_root):
            dirs[:] = sorted(dirs)
            for n in names:
                low = n.lower()
                if low.endswith((".txt", ".md", ".rst")) or (
                        low.startswith("readme") and not low.endswith(DOC_SKIP_SUFFIXES)):
                    p = os.path.join(root, n)
                    if os.path.isfile(p) and not os.path.islink(p):
                        doc_entries.append(("doc/" + os.path.relpath(p, docs_root), p))
    entries.sort()
    doc_entries.sort()

    def read(p):
        try:
            with open(p, "rb") as f:
                raw = f.read(MAX_FILE_BYTES + 1)
        except OSError:
            return None
        if len(raw) > MAX_FILE_BYTES or b"\0" in raw:
            return None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
        text = text.replace("\r\n", "\n")
        return text if text.strip() else None

    files = []
    py_bytes = 0
    for cp, p in entries:
        t = read(p)
        if t is not None:
            files.append((cp, t))
            py_bytes += len(t.encode())
    doc_bytes = 0
    for cp, p in doc_entries:
        t = read(p)
        if t is None:
            continue
        b = len(t.encode())
        if doc_bytes + b > DOCS_MAX_BYTES:
            continue
        files.append((cp, t))
        doc_bytes += b
    site_bytes = 0
    site_dirs = []
    if site_mb is None:  # auto: top the corpus up to CORPUS_TARGET_MIB (none for --tiny)
        site_mb = 0 if tiny else max(0.0, CORPUS_TARGET_MIB - (py_bytes + doc_bytes) / 2**20)
    site_mb = round(site_mb, 1)
    if site_mb > 0:  # optional: more Python, from the installed packages (host-dependent)
        seen = set()
        site_entries = []
        for key in ("purelib", "platlib"):
            d = os.path.realpath(sysconfig.get_paths()[key])
            if d in seen or not os.path.isdir(d):
                continue
            seen.add(d)
            site_dirs.append(d)
            for root, dirs, names in os.walk(d):
                dirs[:] = sorted(x for x in dirs if x != "__pycache__")
                for n in names:
                    if n.endswith(".py"):
                        p = os.path.join(root, n)
                        site_entries.append(("site/" + os.path.relpath(p, d), p))
        site_entries.sort(key=lambda e: (hashlib.md5(e[0].encode()).hexdigest(), e[0]))
        for cp, p in site_entries:
            t = read(p)
            if t is None:
                continue
            b = len(t.encode())
            if site_bytes + b > site_mb * 1024 * 1024:
                continue
            files.append((cp, t))
            site_bytes += b
    files.sort()
    if tiny:  # a deterministic ~1.5 MB subset: files in md5(path) order
        keep, total = [], 0
        for cp, t in sorted(files, key=lambda f: (hashlib.md5(f[0].encode()).hexdigest(), f[0])):
            keep.append((cp, t))
            total += len(t)
            if total > 1_500_000:
                break
        files = sorted(keep)
    desc = {
        "stdlib_dir": stdlib,
        "python": platform.python_version(),
        "stdlib_py_files": sum(1 for cp, _ in files if cp.startswith("stdlib/")),
        "stdlib_py_bytes": py_bytes,
        "doc_files": sum(1 for cp, _ in files if cp.startswith("doc/")),
        "doc_bytes": doc_bytes,
        "docs_root": docs_root,
        "doc_selection": "uncompressed *.txt *.md *.rst README* under /usr/share/doc, each <= 512 KiB, "
                         "first 16 MiB in sorted order",
        "file_rules": "utf-8, no NUL, <= 512 KiB, CRLF->LF; sorted by corpus path",
        "held_out_rule": f"md5(corpus path) % {HELD_OUT_MOD} == 0",
        "site_packages_dirs": site_dirs,
        "site_py_files": sum(1 for cp, _ in files if cp.startswith("site/")),
        "site_py_bytes": site_bytes,
        "site_selection": f"*.py under purelib/platlib in md5(path) order, up to {site_mb} MiB" if site_mb else "none",
        "tiny_subset": bool(tiny),
    }
    return files, desc


def is_held_out(corpus_path):
    return int(hashlib.md5(corpus_path.encode()).hexdigest(), 16) % HELD_OUT_MOD == 0


def held_out_text(held):
    """Whole held-out files in md5(path) order (mixes code and docs), until HELD_OUT_MAX_BYTES;
    joined by a blank line."""
    parts, total, names = [], 0, []
    for cp, t in sorted(held, key=lambda f: (hashlib.md5(f[0].encode()).hexdigest(), f[0])):
        b = len(t.encode()) + 2
        if total + b > HELD_OUT_MAX_BYTES:
            continue
        parts.append(t.rstrip("\n") + "\n")
        names.append(cp)
        total += b
    return "\n".join(parts), names


# ----------------------------------------------------------------------------- tokenizer

def train_tokenizer(texts, vocab_size):
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False, trim_offsets=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, use_regex=False, trim_offsets=False)
    tok.post_processor = None
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(SPECIALS),  # specials go after the BPE vocabulary, as in Qwen
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    tok.add_special_tokens(SPECIALS)
    return tok


def write_tokenizer_files(tok, out, model_max_length):
    tok.save(os.path.join(out, "tokenizer.json"), pretty=False)
    added = {}
    for s in SPECIALS:
        added[str(tok.token_to_id(s))] = {
            "content": s, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True,
        }
    cfg = {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        "bos_token": None,
        "chat_template": CHATML_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "errors": "replace",
        "model_max_length": model_max_length,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)
        f.write("\n")


def encode_all(tok, texts, eot):
    """One flat int32 tensor: each document's ids followed by <|endoftext|>."""
    ids = []
    B = 256
    for i in range(0, len(texts), B):
        for e in tok.encode_batch(texts[i:i + B], add_special_tokens=False):
            ids.extend(e.ids)
            ids.append(eot)
    return torch.tensor(ids, dtype=torch.int32)


# ----------------------------------------------------------------------------- model

def make_config(args, vocab_size, eot, im_end):
    if args.tiny:
        dims = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    head_dim=32, moe_intermediate_size=32, intermediate_size=128,
                    num_experts=8, num_experts_per_tok=2)
    else:
        # Like Qwen3-30B-A3B in shape (q width = heads*head_dim != hidden, GQA 4:1, all layers MoE,
        # normalized top-k), scaled down: ~18M parameters, ~36 MB in bf16.
        dims = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2,
                    head_dim=64, moe_intermediate_size=128, intermediate_size=512,
                    num_experts=32, num_experts_per_tok=4)
    cfg = Qwen3MoeConfig(
        vocab_size=vocab_size,
        max_position_embeddings=args.max_pos,
        rms_norm_eps=1e-6,
        hidden_act="silu",
        tie_word_embeddings=False,
        attention_bias=False,
        use_sliding_window=False,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        norm_topk_prob=True,
        output_router_logits=True,
        router_aux_loss_coef=args.aux_coef,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        initializer_range=0.02,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        attn_implementation="sdpa",
        **dims,
    )
    return cfg


def count_params(model):
    return sum(p.numel() for p in model.parameters())


# ----------------------------------------------------------------------------- training helpers

class Batcher:
    """Random windows of seq_len+1 tokens out of one pre-tokenized tensor (on the device)."""

    def __init__(self, data, seq_len, batch, device, seed):
        self.data = data.to(device=device, dtype=torch.long)
        self.L = seq_len
        self.B = batch
        self.offs = torch.arange(seq_len, device=device)
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed)
        self.n = self.data.numel() - seq_len
        assert self.n > 0, "corpus shorter than one window"

    def next(self):
        starts = torch.randint(0, self.n, (self.B,), generator=self.gen, device=self.data.device)
        return self.data[starts[:, None] + self.offs]


def autocast(device):
    """bf16 autocast on the GPU; plain fp32 on the CPU (CPU bf16 autocast is slower than fp32 there)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def lm_loss(model, x, device):
    """Mean next-token CE over x[:, 1:] (and the router aux loss)."""
    with autocast(device):
        out = model(input_ids=x, output_router_logits=True, use_cache=False)
    logits = out.logits[:, :-1].float()
    ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
    return ce, out.aux_loss


@torch.no_grad()
def held_out_eval(model, ids, seq_len, batch, device, use_autocast=True, count_experts=False):
    """Sum/count CE over non-overlapping windows (see module docstring). Returns (loss, tokens, load)."""
    model.eval()
    wins = [ids[i:i + seq_len] for i in range(0, ids.numel(), seq_len)]
    wins = [w for w in wins if w.numel() >= 2]
    total, count = 0.0, 0
    cfg = model.config
    load = torch.zeros(cfg.num_hidden_layers, cfg.num_experts, dtype=torch.long)
    # group equal lengths so the batch is rectangular (only the tail differs)
    groups = {}
    for w in wins:
        groups.setdefault(w.numel(), []).append(w)
    for L, ws in sorted(groups.items()):
        for i in range(0, len(ws), batch):
            x = torch.stack(ws[i:i + batch]).to(device=device, dtype=torch.long)
            if use_autocast:
                with autocast(device):
                    out = model(input_ids=x, output_router_logits=count_experts, use_cache=False)
            else:
                out = model(input_ids=x, output_router_logits=count_experts, use_cache=False)
            logits = out.logits[:, :-1].float()
            ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1), reduction="sum")
            total += ce.item()
            count += x.size(0) * (L - 1)
            if count_experts:
                for li, rl in enumerate(out.router_logits):
                    top = torch.topk(rl.float(), cfg.num_experts_per_tok, dim=-1).indices.reshape(-1)
                    load[li] += torch.bincount(top.cpu(), minlength=cfg.num_experts)
    model.train()
    return total / max(count, 1), count, load


def set_experts_impl(model, impl):
    model.config._experts_implementation = impl
    for layer in model.model.layers:  # the experts modules normally share model.config; make sure
        layer.mlp.experts.config._experts_implementation = impl


def pick_experts_impl(model, batcher, device, requested):
    """Time fwd+bwd steps per available experts implementation; keep the fastest that works."""
    if requested != "auto":
        set_experts_impl(model, requested)
        return requested, {}
    # batched_mm gathers one weight matrix per (token, expert): fine for decoding, far too much memory
    # for a 50k-token training batch -- not a candidate here.
    cands = ["grouped_mm", "eager"]
    timings = {}
    x = batcher.next()
    for impl in cands:
        try:
            set_experts_impl(model, impl)
            dt = []
            for _ in range(4):
                if device.type == "cuda":
                    torch.cuda.synchronize()
                t0 = time.time()
                ce, aux = lm_loss(model, x, device)
                (ce + model.config.router_aux_loss_coef * aux).backward()
                if device.type == "cuda":
                    torch.cuda.synchronize()
                dt.append(time.time() - t0)
            model.zero_grad(set_to_none=True)
            if not math.isfinite(ce.item()):
                raise RuntimeError("non-finite loss")
            timings[impl] = min(dt[1:])
            log(f"  experts impl {impl:10s}: {timings[impl] * 1000:8.1f} ms/step  (loss {ce.item():.4f})")
        except Exception as e:  # noqa: BLE001 -- an implementation not usable here is just skipped
            model.zero_grad(set_to_none=True)
            if device.type == "cuda":
                torch.cuda.empty_cache()
            log(f"  experts impl {impl:10s}: unusable ({type(e).__name__}: {str(e)[:120]})")
    assert timings, "no experts implementation works on this device"
    best = min(timings, key=timings.get)
    set_experts_impl(model, best)
    return best, timings


# ----------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="models/demo")
    ap.add_argument("--minutes", type=float, default=6.0, help="wall-clock budget of the training loop")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cuda", "cpu"])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--tiny", action="store_true", help="tiny config + small corpus, for a CPU smoke test")
    ap.add_argument("--vocab", type=int, default=None, help="tokenizer vocab incl. 3 specials (8192; tiny 1024)")
    ap.add_argument("--seq-len", type=int, default=None, help="training window (512; tiny 128)")
    ap.add_argument("--batch", type=int, default=None, help="sequences per step (96; tiny 8)")
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate (2e-3; tiny 3e-3)")
    ap.add_argument("--max-pos", type=int, default=2048)
    ap.add_argument("--aux-coef", type=float, default=0.01)
    ap.add_argument("--warmup", type=int, default=None, help="warmup steps (200; tiny 10)")
    ap.add_argument("--log-every", type=int, default=None, help="train-loss print period in steps")
    ap.add_argument("--eval-every-s", type=float, default=60.0, help="held-out eval period in seconds")
    ap.add_argument("--site-packages-mb", type=float, default=None,
                    help="also train on up to this many MiB of installed packages' *.py (purelib/platlib); "
                         f"default: whatever tops stdlib+docs up to {CORPUS_TARGET_MIB} MiB (0 with --tiny); "
                         "0 = stdlib + docs only")
    ap.add_argument("--pack-to", default=None, metavar="DIR",
                    help="also put a transfer copy in DIR: the *.safetensors shards as they are plus "
                         "demo_meta.tar holding every other file (4 files, each < 16 MB)")
    ap.add_argument("--experts-impl", default="auto", choices=["auto", "grouped_mm", "batched_mm", "eager"])
    args = ap.parse_args()
    T = args.tiny
    args.vocab = args.vocab or (1024 if T else 8192)
    args.seq_len = args.seq_len or (128 if T else 512)
    args.batch = args.batch or (8 if T else 96)
    args.lr = args.lr or (3e-3 if T else 2e-3)
    args.warmup = args.warmup if args.warmup is not None else (10 if T else 200)
    args.log_every = args.log_every or (10 if T else 50)
    assert args.seq_len <= args.max_pos

    t_start = time.time()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if device.type == "cuda":
        assert torch.cuda.is_available(), "--device cuda but no CUDA device"
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    gpu_name = torch.cuda.get_device_name(0) if device.type == "cuda" else None
    os.makedirs(args.out, exist_ok=True)
    log(f"coli demo MoE trainer: torch {torch.__version__}, transformers {transformers.__version__}, "
        f"tokenizers {tokenizers.__version__}, python {platform.python_version()}, device {device}"
        + (f" ({gpu_name})" if gpu_name else ""))

    # ---- data
    t0 = time.time()
    files, data_desc = collect_corpus(T, args.site_packages_mb)
    train_files = [(cp, t) for cp, t in files if not is_held_out(cp)]
    held_files = [(cp, t) for cp, t in files if is_held_out(cp)]
    held_txt, held_names = held_out_text(held_files)
    with open(os.path.join(args.out, "held_out.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(held_txt)
    data_desc.update({
        "train_files": len(train_files),
        "train_bytes": sum(len(t.encode()) for _, t in train_files),
        "held_out_files": len(held_files),
        "held_out_txt_files": held_names,
        "held_out_txt_bytes": len(held_txt.encode()),
        "held_out_txt_sha256": hashlib.sha256(held_txt.encode()).hexdigest(),
    })
    log(f"data: {data_desc['stdlib_py_files']} stdlib .py ({data_desc['stdlib_py_bytes'] / 1e6:.1f} MB), "
        f"{data_desc['doc_files']} doc files ({data_desc['doc_bytes'] / 1e6:.1f} MB), {data_desc['site_py_files']} "
        f"site-packages .py ({data_desc['site_py_bytes'] / 1e6:.1f} MB); train {len(train_files)} files "
        f"{data_desc['train_bytes'] / 1e6:.1f} MB, held out {len(held_files)} files, held_out.txt "
        f"{data_desc['held_out_txt_bytes'] / 1e3:.0f} KB from {len(held_names)} files  [{time.time() - t0:.1f}s]")

    # ---- tokenizer
    t0 = time.time()
    texts = [t for _, t in train_files]
    tok = train_tokenizer(texts, args.vocab)
    vocab_size = tok.get_vocab_size()
    eot, im_start, im_end = (tok.token_to_id(s) for s in SPECIALS)
    write_tokenizer_files(tok, args.out, args.max_pos)
    log(f"tokenizer: byte-level BPE, vocab {vocab_size} (specials {eot},{im_start},{im_end})  [{time.time() - t0:.1f}s]")
    t0 = time.time()
    train_ids = encode_all(tok, texts, eot)
    held_ids = torch.tensor(tok.encode(held_txt, add_special_tokens=False).ids, dtype=torch.long)
    data_desc["train_tokens"] = int(train_ids.numel())
    data_desc["held_out_tokens"] = int(held_ids.numel())
    data_desc["bytes_per_token"] = round(data_desc["train_bytes"] / max(1, train_ids.numel()), 3)
    log(f"tokenized: train {train_ids.numel():,} tokens ({data_desc['bytes_per_token']} bytes/token), "
        f"held-out {held_ids.numel():,} tokens  [{time.time() - t0:.1f}s]")

    # ---- model
    cfg = make_config(args, vocab_size, eot, im_end)
    torch.manual_seed(args.seed)
    model = Qwen3MoeForCausalLM(cfg).to(device)
    model.train()
    n_params = count_params(model)
    n_expert = sum(p.numel() for n, p in model.named_parameters() if ".mlp.experts." in n)
    active = n_params - n_expert + n_expert * cfg.num_experts_per_tok // cfg.num_experts
    log(f"model: Qwen3-MoE {cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}, heads {cfg.num_attention_heads}"
        f"/{cfg.num_key_value_heads} x {cfg.head_dim}, {cfg.num_experts} experts top-{cfg.num_experts_per_tok} "
        f"x {cfg.moe_intermediate_size}; params {n_params / 1e6:.2f}M (experts {n_expert / 1e6:.2f}M, "
        f"active/token {active / 1e6:.2f}M), bf16 size {2 * n_params / 1e6:.1f} MB, "
        f"attention {model.config._attn_implementation}")
    assert 2 * n_params < TOTAL_MAX_BYTES, "model too big for the 40 MB budget"

    batcher = Batcher(train_ids, args.seq_len + 1, args.batch, device, args.seed)
    impl, impl_timings = pick_experts_impl(model, batcher, device, args.experts_impl)
    log(f"experts implementation: {impl}")

    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "norm" in n else decay).append(p)
    opt_kw = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    if device.type == "cuda":
        opt_kw["fused"] = True
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], **opt_kw)
    min_lr_frac = 0.1

    def lr_at(step, frac):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        frac = min(max(frac, 0.0), 1.0)
        return args.lr * (min_lr_frac + (1 - min_lr_frac) * 0.5 * (1 + math.cos(math.pi * frac)))

    # ---- train (stop by wall time)
    budget = args.minutes * 60.0
    log(f"training: batch {args.batch} x {args.seq_len} tokens, peak lr {args.lr}, warmup {args.warmup} steps, "
        f"cosine to {min_lr_frac:g}x over {args.minutes:g} min wall time, aux coef {args.aux_coef}")
    history, evals = [], []
    step, tokens = 0, 0
    t_train = time.time()
    t_last_eval = t_train
    warm_end = None  # time after the warmup steps: schedule's time axis starts there
    run_ce = run_aux = 0.0
    run_n = 0
    t_log, tok_log = time.time(), 0
    while True:
        now = time.time()
        elapsed = now - t_train
        if elapsed >= budget:
            break
        if warm_end is None and step >= args.warmup:
            warm_end = now
        frac = 0.0 if warm_end is None else (now - warm_end) / max(1e-6, budget - (warm_end - t_train))
        lr = lr_at(step, frac)
        for g in opt.param_groups:
            g["lr"] = lr
        x = batcher.next()
        ce, aux = lm_loss(model, x, device)
        loss = ce + args.aux_coef * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += x.numel()
        tok_log += x.numel()
        if step % args.log_every == 0 or step == 1:
            c, a, gn = ce.item(), aux.item(), gnorm.item()  # sync only here
            run_ce += c
            run_aux += a
            run_n += 1
            dt = time.time() - t_log
            tps = tok_log / dt if dt > 0 else 0.0
            t_log, tok_log = time.time(), 0
            history.append({"step": step, "t": round(time.time() - t_train, 1), "loss": round(c, 4),
                             "aux": round(a, 4), "lr": lr, "grad_norm": round(gn, 3), "tok_per_s": round(tps)})
            log(f"step {step:6d}  t {time.time() - t_train:6.1f}s  loss {c:.4f}  aux {a:.3f}  lr {lr:.2e}  "
                f"gnorm {gn:.2f}  {tps:,.0f} tok/s")
        if time.time() - t_last_eval >= args.eval_every_s and time.time() - t_train < budget - 5:
            hl, _, _ = held_out_eval(model, held_ids, args.seq_len, args.batch, device)
            evals.append({"step": step, "t": round(time.time() - t_train, 1), "held_out_loss": round(hl, 4)})
            log(f"  held-out loss {hl:.4f}  ppl {math.exp(hl):.2f}")
            t_last_eval = time.time()
    train_time = time.time() - t_train
    log(f"trained {step} steps, {tokens:,} tokens in {train_time:.1f}s = {tokens / train_time:,.0f} tok/s "
        f"({tokens / max(1, train_ids.numel()):.2f} epochs)")

    # final train loss: mean over a few fresh batches (not the noisy last step)
    model.eval()
    with torch.no_grad():
        fl = [lm_loss(model, batcher.next(), device)[0].item() for _ in range(4 if not T else 2)]
    final_train = sum(fl) / len(fl)
    hl, hn, _ = held_out_eval(model, held_ids, args.seq_len, args.batch, device)
    log(f"final train loss {final_train:.4f} (ppl {math.exp(final_train):.2f}); held-out loss {hl:.4f} "
        f"(ppl {math.exp(hl):.2f}) over {hn:,} predicted tokens "
        f"[fp32 weights{', bf16 autocast' if device.type == 'cuda' else ''}]")

    # ---- save (bf16)
    t0 = time.time()
    model.config.output_router_logits = False  # inference default; aux coef stays recorded
    model = model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.config.use_cache = True
    model.save_pretrained(args.out, max_shard_size=SHARD_SIZE, safe_serialization=True)
    # transformers v5 writes num_experts as "num_local_experts" and rope_theta inside "rope_parameters";
    # the Qwen3-MoE checkpoints on the Hub say "num_experts" and "rope_theta". Write both spellings (same
    # values) so readers of either dialect work; transformers reads the file back unchanged.
    cpath = os.path.join(args.out, "config.json")
    with open(cpath) as f:
        cj = json.load(f)
    cj["num_experts"] = cfg.num_experts
    cj["rope_theta"] = cfg.rope_parameters["rope_theta"]
    with open(cpath, "w") as f:
        json.dump(dict(sorted(cj.items())), f, indent=2)
        f.write("\n")
    gen = GenerationConfig(bos_token_id=eot, eos_token_id=[eot, im_end], pad_token_id=eot,
                           do_sample=False, max_new_tokens=128)
    gen.save_pretrained(args.out)
    # a tokenizer_config.json written by someone else (e.g. chat_template.jinja) must not win
    stray = os.path.join(args.out, "chat_template.jinja")
    if os.path.exists(stray):
        os.remove(stray)
    sizes = {n: os.path.getsize(os.path.join(args.out, n)) for n in sorted(os.listdir(args.out))
             if os.path.isfile(os.path.join(args.out, n)) and n != "train_log.json"}
    log(f"saved to {args.out}  [{time.time() - t0:.1f}s]")

    # ---- reload the saved bf16 model and check it (this is the reference other tools compare to)
    del model, opt
    if device.type == "cuda":
        torch.cuda.empty_cache()
    t0 = time.time()
    m2 = AutoModelForCausalLM.from_pretrained(args.out, dtype=torch.float32).to(device)
    m2.eval()
    assert m2.config.num_experts == cfg.num_experts and m2.config.rope_parameters["rope_theta"] == \
        cfg.rope_parameters["rope_theta"] and m2.config.head_dim == cfg.head_dim, "config.json round trip"
    tk2 = AutoTokenizer.from_pretrained(args.out)
    probe = held_txt[:2000]
    assert tk2(probe, add_special_tokens=False)["input_ids"] == tok.encode(probe, add_special_tokens=False).ids, \
        "AutoTokenizer and tokenizers disagree"
    chat = tk2.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", repr(chat)
    hl32, _, load = held_out_eval(m2, held_ids, args.seq_len, args.batch, device, use_autocast=False,
                                  count_experts=True)
    log(f"reloaded bf16 checkpoint, fp32 compute: held-out loss {hl32:.4f} (ppl {math.exp(hl32):.2f})  "
        f"[{time.time() - t0:.1f}s]")
    uniform = math.log(vocab_size)
    log(f"uniform baseline: loss {uniform:.4f} (ppl {vocab_size})")
    frac_load = (load.float() / load.sum(dim=1, keepdim=True).clamp(min=1)).tolist()
    ideal = 1.0 / cfg.num_experts
    for li, fr in enumerate(frac_load):
        log(f"  layer {li} expert load on held-out: max {max(fr) / ideal:.2f}x, min {min(fr) / ideal:.2f}x of uniform; "
            f"top experts {sorted(range(len(fr)), key=lambda e: -fr[e])[:4]}")
    samples = []
    for prompt in ["import os\n", "def main(", "The "]:
        enc = tk2(prompt, return_tensors="pt", add_special_tokens=False).to(device)
        with torch.no_grad():
            o = m2.generate(**enc, max_new_tokens=32, do_sample=False)
        new = o[0, enc["input_ids"].shape[1]:].tolist()
        text = tk2.decode(new, skip_special_tokens=False)
        samples.append({"prompt": prompt, "prompt_ids": enc["input_ids"][0].tolist(), "greedy_ids": new,
                        "greedy_text": text})
        log(f"  greedy {prompt!r} -> {text!r}")

    # ---- size checks
    total = sum(sizes.values())
    big = {n: s for n, s in sizes.items() if s > FILE_MAX_BYTES}
    log("files: " + ", ".join(f"{n} {s / 1e6:.2f}MB" for n, s in sizes.items()) + f"; total {total / 1e6:.2f} MB")
    assert total <= TOTAL_MAX_BYTES, f"model directory {total} bytes > {TOTAL_MAX_BYTES}"
    assert not big, f"files over {FILE_MAX_BYTES} bytes: {big}"

    wall = time.time() - t_start
    result = {
        "what": "coli demo model: small Qwen3-MoE trained from scratch on Python stdlib sources + local docs",
        "command": " ".join(shlex.quote(a) for a in [sys.executable] + sys.argv),
        "args": vars(args),
        "seed": args.seed,
        "data": data_desc,
        "tokenizer": {"type": "byte-level BPE (tokenizers)", "vocab_size": vocab_size,
                      "pre_tokenizer": "Qwen2 Split regex (isolated) + ByteLevel(add_prefix_space=False, use_regex=False)",
                      "normalizer": "NFC", "specials": {s: tok.token_to_id(s) for s in SPECIALS}},
        "model": {"params": n_params, "expert_params": n_expert, "active_params_per_token": active,
                  "config": {k: v for k, v in cfg.to_dict().items() if isinstance(v, (int, float, str, bool, list))}},
        "experts_implementation": impl, "experts_impl_timings_s": impl_timings,
        "train": {"steps": step, "tokens": tokens, "seconds": round(train_time, 1),
                  "tok_per_s": round(tokens / train_time), "epochs": round(tokens / max(1, train_ids.numel()), 3),
                  "batch": args.batch, "seq_len": args.seq_len, "peak_lr": args.lr,
                  "optimizer": "AdamW(0.9,0.95) wd 0.1 (not on norms/1-d), clip 1.0, bf16 autocast, fp32 master",
                  "schedule": f"linear warmup {args.warmup} steps, cosine to {min_lr_frac}x over remaining wall time",
                  "history": history, "evals": evals},
        "final": {"train_loss": round(final_train, 4), "train_ppl": round(math.exp(final_train), 3),
                  "held_out_loss_autocast": round(hl, 4), "held_out_loss": round(hl32, 4),
                  "held_out_ppl": round(math.exp(hl32), 3), "held_out_predicted_tokens": hn,
                  "held_out_protocol": f"held_out.txt, no specials, non-overlapping {args.seq_len}-token windows, "
                                       "each from position 0, mean CE; bf16 weights in fp32 compute",
                  "uniform_loss": round(uniform, 4), "uniform_ppl": vocab_size},
        "expert_load_held_out": load.tolist(),
        "greedy_samples": samples,
        "files": sizes,
        "wall_seconds": round(wall, 1),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                     "cuda": torch.version.cuda},
        "device": str(device), "gpu": gpu_name,
        "host": {"platform": platform.platform(), "cpus": os.cpu_count()},
    }
    with open(os.path.join(args.out, "train_log.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    log(f"done in {wall:.1f}s wall; wrote {os.path.join(args.out, 'train_log.json')}")

    if args.pack_to:
        os.makedirs(args.pack_to, exist_ok=True)
        names = sorted(os.listdir(args.out))
        packed = []
        tpath = os.path.join(args.pack_to, "demo_meta.tar")
        with tarfile.open(tpath, "w", format=tarfile.PAX_FORMAT) as tf:
            for n in names:
                src = os.path.join(args.out, n)
                if not os.path.isfile(src):
                    continue
                if n.endswith(".safetensors"):
                    shutil.copyfile(src, os.path.join(args.pack_to, n))
                    packed.append(n)
                else:
                    tf.add(src, arcname=n)
        packed.append("demo_meta.tar")
        for n in packed:
            sz = os.path.getsize(os.path.join(args.pack_to, n))
            assert sz <= FILE_MAX_BYTES, f"{n}: {sz} bytes"
        log(f"packed for transfer into {args.pack_to}: " + ", ".join(
            f"{n} {os.path.getsize(os.path.join(args.pack_to, n)) / 1e6:.2f}MB" for n in packed)
            + f"  (unpack: cp *.safetensors MODEL_DIR/ && tar xf demo_meta.tar -C MODEL_DIR)")


if __name__ == "__main__":
    main()
