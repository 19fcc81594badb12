#!/bin/sh
# Seeds for tools/fuzz/fuzz_request.c: request bodies, good and bad.
out=$1
mkdir -p "$out"
printf '%s' '{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":8,"temperature":0.5,"top_p":0.9,"seed":1,"stop":["\n","ab"],"stream":true,"stream_options":{"include_usage":true}}' >"$out/chat"
printf '%s' '{"prompt":"Hello","max_tokens":4,"n":1,"logprobs":null,"echo":false,"user":"u"}' >"$out/completion"
printf '%s' '{"prompt":[1,2,3],"stop":"x"}' >"$out/ids"
printf '%s' '{"prompt":[[1,2],[3]],"n":2,"return_token_ids":true}' >"$out/batch_ids"
printf '%s' '{"prompt":["a","b\u00e9"],"return_token_ids":false,"stream":true}' >"$out/batch_text"
printf '%s' '{"prompt":["caf\u00e9 \ud83d\ude00"],"frequency_penalty":0}' >"$out/unicode"
printf '{"prompt":"\377"}' >"$out/badutf8"
printf '%s' '{"messages":[{"role":"user","content":"hi"}],"n":3,"logprobs":true,"top_logprobs":5,"min_p":0.05,"presence_penalty":0.5,"frequency_penalty":-0.5,"repetition_penalty":1.1,"logit_bias":{"0":-100,"17":2.5},"seed":42,"stop":["a","b","c","d"]}' >"$out/sampling_chat"
printf '%s' '{"prompt":"x","n":2,"logprobs":20,"best_of":1,"echo":false,"logit_bias":{"5":100},"min_p":0,"stream":true}' >"$out/sampling_completion"
printf '%s' '{"messages":[{"role":"user","content":"hi"}],"top_logprobs":2,"logit_bias":{"01x":1,"-3":1},"n":0}' >"$out/sampling_bad"
printf '%s' '{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}}}}' >"$out/json_schema"
printf '%s' '{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"},"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}}}' >"$out/tool_forced"
printf '%s' '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}' >"$out/tool_required"
