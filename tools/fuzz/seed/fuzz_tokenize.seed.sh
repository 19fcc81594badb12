#!/bin/sh
# Seeds for tools/fuzz/fuzz_tokenize.c: /tokenize and /detokenize bodies.
out=$1
mkdir -p "$out"
printf '%s' '{"prompt":"Hello world caf\u00e9","add_special_tokens":true,"model":"m"}' >"$out/tokenize"
printf '%s' '{"content":"hi","add_special":false}' >"$out/llama"
printf '%s' '{"tokens":[1,2,3,100],"model":"m"}' >"$out/detokenize"
printf '%s' '{"tokens":[-1,"a",1e3]}' >"$out/bad_ids"
printf '%s' '{"prompt":"a","content":"b"}' >"$out/both"
