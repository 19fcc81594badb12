#!/bin/sh
# Seeds for tools/fuzz_request.c: request bodies, good and bad.
out=$1
mkdir -p "$out"
printf '%s' '{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":8,"temperature":0.5,"top_p":0.9,"seed":1,"stop":["\n","ab"],"stream":true,"stream_options":{"include_usage":true}}' >"$out/chat"
printf '%s' '{"prompt":"Hello","max_tokens":4,"n":1,"logprobs":null,"echo":false,"user":"u"}' >"$out/completion"
printf '%s' '{"prompt":[1,2,3],"stop":"x"}' >"$out/ids"
printf '%s' '{"prompt":["caf\u00e9 \ud83d\ude00"],"frequency_penalty":0}' >"$out/unicode"
printf '{"prompt":"\377"}' >"$out/badutf8"
