#!/bin/sh
# tests/tools/fuzz_smoke.sh — every libFuzzer target (tools/fuzz/fuzz_*.c: the
# model file through engine open and a token, the container reader,
# safetensors headers, config and tokenizer parsing, the Hugging Face config
# files convert reads, colid's requests through the chat renderers, chat
# templates through the Jinja interpreter) builds
# under ASan+UBSan and runs a few seconds from its seeds (tests/fuzz/ and the
# targets' seed scripts) without a report, and tools/fuzz/fuzz_http.py throws
# mutated raw HTTP at a running colid for as long. The instrumented code is
# built at -O0 (FUZZ_OPT; the SIMD kernels at -O1): the library's build,
# most of this test's time, takes half the CPU of -O1's. `make fuzz` runs
# them longer (FUZZ_SECONDS, 30 by default) at -O1; docs/fuzz.md.
command -v clang >/dev/null 2>&1 || { echo "no clang (make deps installs clang and libclang-rt-dev)"; exit 77; }
cd "$ROOT" || exit 1
BUILD=$BUILD FUZZ_SECONDS=${FUZZ_SMOKE_SECONDS:-4} FUZZ_OPT=-O0 sh tools/fuzz/fuzz.sh
